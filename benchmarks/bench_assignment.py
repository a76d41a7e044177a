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
relative for geometric ones on the CPU and within the documented quantisation bound,
``vision_cuts._assignment_gpu.float_tolerance``, on the GPU); a mismatch aborts the
run. Times are medians of ``--repeat`` runs after one warm-up (which also loads
numba's cache); CPU single problems above n = 2000 run once, without warm-up.

``--backend gpu`` adds two GPU columns: ``gpu`` with the costs already on the device
(a CuPy array in, CuPy arrays out: the solve as a pipeline sees it, synchronised,
median of ``--gpu-repeat`` runs after a warm-up that also compiles the kernels) and
``gpu+copy`` with NumPy in and out (host-to-device copy of the float64 costs
included). CPU baselines above ``--baseline-max-n`` (per cost kind) are skipped: they
take minutes there (SciPy and lap on geometric costs).

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
    if backend == "gpu":
        import cupy

        cupy.cuda.Device().synchronize()
    return r, c


def vc_single(cost, backend):
    from vision_cuts import linear_sum_assignment

    r, c = linear_sum_assignment(cost, backend=backend)
    if backend == "gpu":
        import cupy

        cupy.cuda.Device().synchronize()
    return r, c


def gpu_same(costs, got, ref, kind) -> bool:
    """GPU totals: exact for integer costs, within the quantisation bound else."""
    if kind == "uniform":
        return bool(np.array_equal(got, ref))
    from vision_cuts._assignment_gpu import float_tolerance

    tol = np.array([float_tolerance(c) for c in costs])
    return bool(np.all(np.abs(got - ref) <= tol * (1 + 1e-9) + 1e-9 * np.abs(ref)))


def gpu_label(backends) -> str | None:
    if "gpu" not in backends or gpu_note("gpu"):
        return None
    from vision_cuts._backend import gpu_name

    return gpu_name()


def gpu_note(backend: str) -> str | None:
    if backend != "gpu":
        return None
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


def run_batched(specs, kinds, backends, repeat, seed, gpu_repeat=20):
    rows = []
    for kind in kinds:
        for nbatch, n in specs:
            rows.append(batched_row(kind, nbatch, n, backends, repeat, seed,
                                    gpu_repeat))
    return rows


def batched_row(kind, nbatch, n, backends, repeat, seed, gpu_repeat=20):
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
        if backend == "gpu":
            import cupy

            dev = cupy.asarray(costs)
            t_vc, (r, c) = median_time(lambda d=dev: vc_batched(d, "gpu"), gpu_repeat)
            r, c = r.get(), c.get()
            ok = gpu_same(costs, totals(costs, r, c), ref, kind)
            row["gpu+copy_s"], (r, c) = median_time(
                lambda c=costs: vc_batched(c, "gpu"), repeat)
            ok = ok and gpu_same(costs, totals(costs, r, c), ref, kind)
        else:
            t_vc, (r, c) = median_time(lambda c=costs, b=backend: vc_batched(c, b),
                                       repeat)
            ok = same(totals(costs, r, c), ref, kind)
        if not ok:
            sys.exit(f"vision_cuts ({backend}) total differs from SciPy's at "
                     f"B={nbatch}, n={n}")
        row[f"{backend}_s"] = t_vc
    return row


def run_single(sizes, kinds, geometric_max_n, repeat, seed, backends=("cpu",),
               baseline_max_n=None, gpu_repeat=20):
    from scipy.optimize import linear_sum_assignment

    from vision_cuts._assignment_cpu import linear_sum_assignment_batched_cpu

    baseline_max_n = baseline_max_n or {}
    rows = []
    for kind, n in [(k, n) for k in kinds for n in sizes]:
        if kind == "geometric" and n > geometric_max_n:
            continue
        cost = make_costs(kind, (n, n), seed)
        reps = repeat if n <= 2000 else 1
        warm = n <= 2000
        row = {"kind": kind, "n": n, "repeat": reps}
        if "gpu" in backends and not gpu_note("gpu"):
            gpu_single(row, cost, kind, repeat, gpu_repeat)
        if n > baseline_max_n.get(kind, n):
            row["baselines"] = "skipped (--baseline-max-n)"
            rows.append(row)
            continue

        def sp(c=cost):
            r, k = linear_sum_assignment(c)
            return c[r, k].sum()

        t_sp, ref = median_time(sp, reps, warm)
        row["scipy_s"] = t_sp
        if "gpu_total" in row and not gpu_same(cost[None], np.array([row["gpu_total"]]),
                                               np.array([ref]), kind):
            sys.exit(f"vision_cuts (gpu) total differs from SciPy's at n={n}")
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


def gpu_single(row, cost, kind, repeat, gpu_repeat):
    """GPU times of one problem: device-resident (CuPy in/out) and with the copies."""
    import cupy

    dev = cupy.asarray(cost)
    t, (r, c) = median_time(lambda d=dev: vc_single(d, "gpu"), gpu_repeat)
    row["gpu_s"] = t
    row["gpu_total"] = float(cost[r.get(), c.get()].sum())
    row["gpu+copy_s"], (r, c) = median_time(lambda x=cost: vc_single(x, "gpu"),
                                            min(repeat, 5))
    if cost[r, c].sum() != row["gpu_total"] and kind == "uniform":
        sys.exit(f"vision_cuts (gpu) totals differ between runs at n={len(cost)}")


def fmt(t):
    if t is None:
        return "-"
    if t < 0.01:
        return f"{t * 1e3:9.3f} ms"
    return f"{t * 1e3:9.1f} ms" if t < 10 else f"{t:9.2f} s "


def print_batched(rows, backends):
    print("\nBatched: B problems of n x n")
    head = f"{'costs':>9} {'B':>6} {'n':>4} | {'scipy loop':>12} {'lap loop':>12}"
    for b in backends:
        head += f" | {'vc ' + b:>12} {'vs scipy':>8} {'vs lap':>7}"
        if b == "gpu":
            head += f" {'gpu+copy':>12}"
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
            if b == "gpu":
                line += f" {fmt(r.get('gpu+copy_s'))}"
        print(line)


def ratio(a, b):
    return f"{a / b:7.2f}x" if a and b else f"{'-':>8}"


def print_single(rows):
    print("\nSingle n x n problem")
    head = (f"{'costs':>9} {'n':>6} | {'scipy':>12} | {'lap.lapjv':>12} "
            f"{'vs scipy':>8} | {'numba JV':>12} {'vs scipy':>8}")
    gpu = any("gpu_s" in r for r in rows)
    if gpu:
        head += (f" | {'vc gpu':>12} {'vs scipy':>8} {'vs lap':>8} "
                 f"{'gpu+copy':>12}")
    print(head)
    print("-" * len(head))
    for r in rows:
        sp, lap_t, nb = r.get("scipy_s"), r.get("lap_s"), r.get("numba_jv_s")
        line = (f"{r['kind']:>9} {r['n']:>6} | {fmt(sp):>12} | {fmt(lap_t):>12} "
                f"{ratio(sp, lap_t)} | {fmt(nb):>12} {ratio(sp, nb)}")
        if gpu:
            g = r.get("gpu_s")
            line += (f" | {fmt(g):>12} {ratio(sp, g)} {ratio(lap_t, g)} "
                     f"{fmt(r.get('gpu+copy_s')):>12}")
        print(line)


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
    ap.add_argument("--gpu-repeat", type=int, default=20)
    ap.add_argument("--baseline-max-n", nargs="*", default=["geometric=1000"],
                    metavar="KIND=N", help="skip the CPU baselines of single problems "
                    "above N for that cost kind (default: geometric=1000)")
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
    if "gpu" in args.backend and not gpu_note("gpu"):
        from vision_cuts._backend import gpu_name

        print(f"GPU: {gpu_name()}")
    limits = {k: int(v) for k, v in (x.split("=") for x in args.baseline_max_n)}
    batched = run_batched(args.batched, args.kinds, args.backend, args.repeat,
                          args.seed, args.gpu_repeat)
    print_batched(batched, args.backend)
    single = run_single(args.single, args.kinds, args.geometric_max_n, args.repeat,
                        args.seed, args.backend, limits, args.gpu_repeat)
    print_single(single)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "gpu": gpu_label(args.backend),
                       "batched": batched, "single": single}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
