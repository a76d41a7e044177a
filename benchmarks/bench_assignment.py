"""Linear assignment benchmark: vision_cuts against SciPy (and lap), in the same run.

Cost kinds (``--kinds``): ``uniform``, random integers in [0, 1000) (float64 arrays);
``geometric``, Euclidean distances between two sets of n random points in a
1000 x 1000 square (point matching, the vision workload).

Two tables:

* batched: ``linear_sum_assignment_batched`` on a (B, n, n) stack against a Python loop
  of ``scipy.optimize.linear_sum_assignment`` over the same stack (and a loop of
  ``lap.lapjv`` when lap is installed). Default stacks: 10,000 of 32 x 32 and 1,000 of
  128 x 128. ``vs scipy`` / ``vs lap`` = baseline time / vision_cuts time (> 1:
  vision_cuts faster).
* single: one n x n problem (n = 1000, 4000; geometric only up to
  ``--geometric-max-n``) through SciPy (what ``linear_sum_assignment`` calls on the
  CPU), ``lap.lapjv`` when installed, and, for information, the numba solver behind
  the batched form run on a stack of one.

Every optimal total is checked against SciPy's (exactly for integer costs, to 1e-9
relative for geometric ones); a mismatch aborts the run. Times are medians of
``--repeat`` runs after one warm-up (which also loads numba's cache); single problems
above n = 2000 run once, without warm-up. GPU columns appear with ``--backend gpu``
once a GPU assignment solver exists; until then the GPU rows are skipped with a note.

Usage::

    python benchmarks/bench_assignment.py                   # CPU, default sizes
    python benchmarks/bench_assignment.py --backend cpu gpu --single 1000 4000 8000
    python benchmarks/bench_assignment.py --batched 10000x32 1000x128 100x512 \
        --kinds uniform
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np


def machine() -> str:
    from vision_cuts._backend import machine_description

    return machine_description()


def median_time(fn, repeat: int, warmup: bool = True):
    if warmup:
        fn()
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def have_lap() -> bool:
    try:
        import lap  # noqa: F401
    except ImportError:
        return False
    return True


def totals(costs, rows, cols) -> np.ndarray:
    return np.array([c[r, k].sum() for c, r, k in zip(costs, rows, cols, strict=True)])


# The timed functions return assignments only; totals are computed outside the timing.


def scipy_loop(costs):
    from scipy.optimize import linear_sum_assignment

    return [linear_sum_assignment(c) for c in costs]


def lap_loop(costs):
    import lap

    return [lap.lapjv(c)[1] for c in costs]


def vc_batched(costs, backend):
    from vision_cuts import linear_sum_assignment_batched

    r, c = linear_sum_assignment_batched(costs, backend=backend)
    if backend == "gpu":  # pragma: no cover - no GPU solver yet
        import cupy

        cupy.cuda.Device().synchronize()
    return r, c


def gpu_note(backend: str) -> str | None:
    from vision_cuts import assignment

    if backend != "gpu":
        return None
    if not assignment._HAS_GPU_SOLVER:
        return "skipped: the GPU assignment solver is not available yet"
    from vision_cuts._backend import gpu_available

    return None if gpu_available() else "skipped: no usable CUDA device"


def make_costs(kind, shape, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.integers(0, 1000, shape).astype(np.float64)
    *batch, n, m = shape
    a = rng.random((*batch, n, 1, 2)) * 1000
    b = rng.random((*batch, 1, m, 2)) * 1000
    return np.sqrt(((a - b) ** 2).sum(-1))


def same(got, ref, kind) -> bool:
    if kind == "uniform":
        return bool(np.array_equal(got, ref))
    return bool(np.allclose(got, ref, rtol=1e-9, atol=0))


def run_batched(specs, kinds, backends, repeat, seed):
    rows = []
    for kind in kinds:
        for nbatch, n in specs:
            rows.append(batched_row(kind, nbatch, n, backends, repeat, seed))
    return rows


def batched_row(kind, nbatch, n, backends, repeat, seed):
    costs = make_costs(kind, (nbatch, n, n), seed)
    t_sp, out = median_time(lambda c=costs: scipy_loop(c), repeat)
    ref = totals(costs, *zip(*out, strict=True))
    row = {"kind": kind, "B": nbatch, "n": n, "scipy_loop_s": t_sp}
    if have_lap():
        t_lap, out = median_time(lambda c=costs: lap_loop(c), repeat)
        idx = np.broadcast_to(np.arange(n), (nbatch, n))
        if not same(totals(costs, idx, out), ref, kind):
            sys.exit(f"lap total differs from SciPy's at B={nbatch}, n={n}")
        row["lap_loop_s"] = t_lap
    for backend in backends:
        note = gpu_note(backend)
        if note:
            row[f"{backend}_note"] = note
            continue
        t_vc, (r, c) = median_time(lambda c=costs, b=backend: vc_batched(c, b),
                                   repeat)
        if backend == "gpu":  # pragma: no cover - no GPU solver yet
            r, c = r.get(), c.get()
        if not same(totals(costs, r, c), ref, kind):
            sys.exit(f"vision_cuts ({backend}) total differs from SciPy's at "
                     f"B={nbatch}, n={n}")
        row[f"{backend}_s"] = t_vc
    return row


def run_single(sizes, kinds, geometric_max_n, repeat, seed):
    from scipy.optimize import linear_sum_assignment

    from vision_cuts._assignment_cpu import linear_sum_assignment_batched_cpu

    rows = []
    for kind, n in [(k, n) for k in kinds for n in sizes]:
        if kind == "geometric" and n > geometric_max_n:
            continue
        cost = make_costs(kind, (n, n), seed)
        reps = repeat if n <= 2000 else 1
        warm = n <= 2000

        def sp(c=cost):
            r, k = linear_sum_assignment(c)
            return c[r, k].sum()

        t_sp, ref = median_time(sp, reps, warm)
        row = {"kind": kind, "n": n, "scipy_s": t_sp, "repeat": reps}
        if have_lap():
            import lap

            def lp(c=cost):
                x = lap.lapjv(c)[1]
                return c[np.arange(len(c)), x].sum()

            t_lap, got = median_time(lp, reps, warm)
            if not same(got, ref, kind):
                sys.exit(f"lap total differs from SciPy's at n={n}")
            row["lap_s"] = t_lap

        def nb(c=cost):
            r, k, _ = linear_sum_assignment_batched_cpu(c[None], False)
            return c[r[0], k[0]].sum()

        nb(np.zeros((2, 2)))  # compile / load the cache outside the timing
        t_nb, got = median_time(nb, reps, warm)
        if not same(got, ref, kind):
            sys.exit(f"numba JV total differs from SciPy's at n={n}")
        row["numba_jv_s"] = t_nb
        rows.append(row)
    return rows


def fmt(t):
    return "-" if t is None else (f"{t * 1e3:9.1f} ms" if t < 10 else f"{t:9.2f} s ")


def print_batched(rows, backends):
    print("\nBatched: B problems of n x n")
    head = f"{'costs':>9} {'B':>6} {'n':>4} | {'scipy loop':>12} {'lap loop':>12}"
    for b in backends:
        head += f" | {'vc ' + b:>12} {'vs scipy':>8} {'vs lap':>7}"
    print(head)
    print("-" * len(head))
    for r in rows:
        line = (f"{r['kind']:>9} {r['B']:>6} {r['n']:>4} | {fmt(r['scipy_loop_s'])} "
                f"{fmt(r.get('lap_loop_s'))}")
        for b in backends:
            if f"{b}_s" not in r:
                line += f" | {r.get(f'{b}_note', '-')}"
                continue
            t = r[f"{b}_s"]
            vs_lap = (f"{r['lap_loop_s'] / t:6.1f}x" if "lap_loop_s" in r else
                      f"{'-':>7}")
            line += f" | {fmt(t)} {r['scipy_loop_s'] / t:7.1f}x {vs_lap}"
        print(line)


def print_single(rows):
    print("\nSingle n x n problem")
    head = (f"{'costs':>9} {'n':>6} | {'scipy':>12} | {'lap.lapjv':>12} "
            f"{'vs scipy':>8} | {'numba JV':>12} {'vs scipy':>8}")
    print(head)
    print("-" * len(head))
    for r in rows:
        lap_t = r.get("lap_s")
        lap_cols = (f"{fmt(lap_t)} {r['scipy_s'] / lap_t:7.2f}x" if lap_t else
                    f"{'not installed':>12} {'-':>8}")
        print(f"{r['kind']:>9} {r['n']:>6} | {fmt(r['scipy_s'])} | {lap_cols} | "
              f"{fmt(r['numba_jv_s'])} {r['scipy_s'] / r['numba_jv_s']:7.2f}x")


def parse_spec(text: str) -> tuple[int, int]:
    nbatch, n = text.lower().split("x")
    return int(nbatch), int(n)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", nargs="+", default=["cpu"], choices=["cpu", "gpu"])
    ap.add_argument("--batched", nargs="*", default=[(10000, 32), (1000, 128)],
                    type=parse_spec, metavar="BxN")
    ap.add_argument("--single", nargs="*", default=[1000, 4000], type=int)
    ap.add_argument("--kinds", nargs="+", default=["uniform", "geometric"],
                    choices=["uniform", "geometric"])
    ap.add_argument("--geometric-max-n", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args(argv)

    import numba

    print(f"machine: {machine()}")
    print(f"numba {numba.__version__}, {numba.get_num_threads()} threads; lap "
          f"{'installed' if have_lap() else 'not installed'}; load average "
          f"{os.getloadavg()[0]:.2f}")
    for b in args.backend:
        note = gpu_note(b)
        if note:
            print(f"backend {b}: {note}")
    batched = run_batched(args.batched, args.kinds, args.backend, args.repeat,
                          args.seed)
    print_batched(batched, args.backend)
    single = run_single(args.single, args.kinds, args.geometric_max_n, args.repeat,
                        args.seed)
    print_single(single)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "batched": batched, "single": single}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
