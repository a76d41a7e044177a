"""Mapping and alpha sweep of the GPU assignment solver (device-resident costs).

Times ``linear_sum_assignment(_batched)`` with the kernel choice and ``ALPHA`` of
``vision_cuts._assignment_gpu`` overridden: ``sa_solve`` against the earlier
warp-per-problem and block-per-problem kernels (``SMALL_FUSED = False``) for batched
stacks, the row kernels against one block for a single n = 1000 problem, and alpha in
{4, 10, 30} (``ALPHA``; ``sa_solve`` keeps ``SMALL_ALPHA`` for N <= 32). Uniform
integer costs in [0, 1000). Medians of 3 runs after a warm-up.

    python benchmarks/tune_assignment_gpu.py
    python benchmarks/tune_assignment_gpu.py --knobs   # global updates, arc fixing
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def timed(fn, repeat=3):
    import cupy

    fn()
    cupy.cuda.Device().synchronize()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        cupy.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def knobs():
    """Global price updates and arc fixing on / off (row kernels), with run stats."""
    import cupy

    from vision_cuts import _assignment_gpu as g

    default = (g.GLOBAL_UPDATE, g.ARC_FIXING)
    for kind, n in [
        ("uniform", 1000),
        ("uniform", 4000),
        ("geometric", 4000),
        ("uniform", 8000),
    ]:
        rng = np.random.default_rng(0)
        if kind == "uniform":
            cost = rng.integers(0, 1000, (n, n)).astype(np.float64)
        else:
            a, b = rng.random((n, 1, 2)) * 1000, rng.random((1, n, 2)) * 1000
            cost = np.sqrt(((a - b) ** 2).sum(-1))
        dev = cupy.asarray(cost)[None]
        for gu, fix in [(True, True), (True, False), (False, True), (False, False)]:
            if n > 4000 and not gu:
                continue
            g.GLOBAL_UPDATE, g.ARC_FIXING = gu, fix
            run = {}

            def solve(d=dev, out=run):
                out.update(g.linear_sum_assignment_batched_gpu(d, False, True)[3])

            t = timed(solve, 3 if gu else 1)
            st = run["stats"]
            print(
                f"{kind:>9} n={n:5d} global update {gu!s:5} arc fixing {fix!s:5}: "
                f"{t * 1e3:9.2f} ms  ({st['global_updates']} updates, "
                f"{st['sweeps']} sweeps, {st['phases']} phases)",
                flush=True,
            )
    g.GLOBAL_UPDATE, g.ARC_FIXING = default


def main():
    import sys

    if "--knobs" in sys.argv:
        knobs()
        return
    import cupy

    from vision_cuts import _assignment_gpu as g
    from vision_cuts import linear_sum_assignment, linear_sum_assignment_batched

    rng = np.random.default_rng(0)
    default = (g.ALPHA, g._WARP_MAX_N, g._BLOCK_MAX_N, g.SMALL_FUSED)
    legacy = {"SMALL_FUSED": False}  # assign_small_warp / assign_small_block
    cases = [
        ("10000x32 fused", (10000, 32, 32), {}),
        ("10000x32 warp", (10000, 32, 32), legacy),
        ("10000x32 block", (10000, 32, 32), {**legacy, "_WARP_MAX_N": 0}),
        ("1000x128 fused", (1000, 128, 128), {}),
        ("1000x128 block", (1000, 128, 128), legacy),
        ("1000x128 warp", (1000, 128, 128), {**legacy, "_WARP_MAX_N": 128}),
        ("1x1000 rows", (1, 1000, 1000), {}),
        ("1x1000 block", (1, 1000, 1000), {"_BLOCK_MAX_N": 1000}),
    ]
    for alpha in (4, 10, 30):
        for label, shape, over in cases:
            if alpha != 10 and "block" in label and "128" not in label:
                continue
            g.ALPHA, g._WARP_MAX_N, g._BLOCK_MAX_N, g.SMALL_FUSED = default
            g.ALPHA = alpha
            for k, v in over.items():
                setattr(g, k, v)
            costs = cupy.asarray(rng.integers(0, 1000, shape).astype(np.float64))
            t = timed(lambda c=costs: linear_sum_assignment_batched(c, backend="gpu"))
            print(f"alpha {alpha:3d} {label:>16}: {t * 1e3:9.3f} ms", flush=True)
        cost = cupy.asarray(rng.integers(0, 1000, (4000, 4000)).astype(np.float64))
        g.ALPHA, g._WARP_MAX_N, g._BLOCK_MAX_N, g.SMALL_FUSED = default
        g.ALPHA = alpha
        t = timed(lambda c=cost: linear_sum_assignment(c, backend="gpu"), 1)
        print(f"alpha {alpha:3d} {'1x4000 rows':>16}: {t * 1e3:9.3f} ms", flush=True)
    g.ALPHA, g._WARP_MAX_N, g._BLOCK_MAX_N, g.SMALL_FUSED = default


if __name__ == "__main__":
    main()
