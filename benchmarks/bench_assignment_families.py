"""Assignment on the cost families real callers produce, both backends, same run.

Families (:func:`vision_cuts.datasets.synthetic.assignment_costs`): the optical flow's
stacks (descriptor + displacement costs, forbidden beyond the search radius, a dummy
column per row), geometric point sets (points plus small jitter, float), integers 0-3
(many ties), integers 0-999, forbidden entries (60% inf). One n x n (or rectangular)
problem each, through ``linear_sum_assignment``:

* ``cpu``: the CPU backend (NumPy in);
* ``gpu``: NumPy in and out (copies included), ``gpu dev``: CuPy in and out
  (synchronised), with the work counters of the GPU solve;
* ``scipy``: ``scipy.optimize.linear_sum_assignment``; ``lap``: ``lap.lapjv`` on
  the finite square families when lap is installed.

Each time is the median of ``--repeat`` runs after a warm-up, with the worst run in
parentheses. Every total is checked against the CPU backend's (exact for integer
costs, within ``float_tolerance`` on the GPU for float costs); a mismatch aborts.

    python benchmarks/bench_assignment_families.py --sizes 1000 4000 [--backend cpu gpu]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from scipy.optimize import linear_sum_assignment as scipy_lsa

from vision_cuts import linear_sum_assignment
from vision_cuts._backend import machine_description
from vision_cuts.datasets.synthetic import ASSIGNMENT_FAMILIES, assignment_costs


def timed(fn, repeat: int, sync=None):
    out = fn()
    times = [float("nan")] if repeat == 0 else []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
    return out, float(np.median(times)), max(times)


def total(cost, r, c) -> float:
    return float(np.asarray(cost)[np.asarray(r), np.asarray(c)].sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", type=int, default=[1000, 4000])
    ap.add_argument("--families", nargs="+", default=list(ASSIGNMENT_FAMILIES))
    ap.add_argument("--backend", nargs="+", default=["cpu"], choices=["cpu", "gpu"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scipy-max-n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    ap.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="NAME=VALUE",
        help="override a setting of vision_cuts._assignment_gpu (tuning runs)",
    )
    ap.add_argument("--no-cpu", action="store_true", help="GPU columns only")
    args = ap.parse_args()
    if args.set:
        from vision_cuts import _assignment_gpu as g

        for item in args.set:
            name, value = item.split("=")
            setattr(g, name, type(getattr(g, name))(int(value)))
        print("settings:", args.set)
    try:
        import lap
    except ImportError:
        lap = None
    print(f"machine: {machine_description()}")
    rows = []
    ms = lambda t: f"{1e3 * t[0]:.1f} ({1e3 * t[1]:.1f})"  # noqa: E731
    print(
        "| family | shape | cpu ms | gpu ms | gpu dev ms | scipy ms | lap ms | "
        "cpu / gpu | phases | bids | GU | list rebuilds | whole rows |"
    )
    print("|---" * 13 + "|")
    for fam in args.families:
        for n in args.sizes:
            rng = np.random.default_rng(args.seed)
            cost = assignment_costs(fam, (1, n, n), rng)[0]
            row = {"family": fam, "shape": list(cost.shape)}
            (r, c), *t_cpu = timed(
                lambda cost=cost: linear_sum_assignment(cost, backend="cpu"),
                0 if args.no_cpu else args.repeat,
            )
            want = total(cost, r, c)
            row["cpu"] = t_cpu
            if n <= args.scipy_max_n and not args.no_cpu:
                (r, c), *t = timed(lambda cost=cost: scipy_lsa(cost), args.repeat)
                assert abs(total(cost, r, c) - want) <= 1e-9 * max(1.0, abs(want))
                row["scipy"] = t
            square = cost.shape[0] == cost.shape[1]
            if lap is not None and square and np.isfinite(cost).all():
                if n <= args.scipy_max_n and not args.no_cpu:
                    _, *t = timed(lambda cost=cost: lap.lapjv(cost), args.repeat)
                    row["lap"] = t
            if "gpu" in args.backend:
                import cupy

                from vision_cuts._assignment_gpu import float_tolerance

                tol = float_tolerance(cost) + 1e-9 * max(1.0, abs(want))
                (r, c, st), *t = timed(
                    lambda cost=cost: linear_sum_assignment(
                        cost, backend="gpu", return_stats=True
                    ),
                    args.repeat,
                )
                assert total(cost, r, c) <= want + tol, (fam, n)
                row["gpu"] = t
                dev = cupy.asarray(cost)
                sync = cupy.cuda.Device().synchronize
                (r, c), *t = timed(
                    lambda dev=dev: linear_sum_assignment(dev, backend="gpu"),
                    args.repeat,
                    sync,
                )
                assert total(cost, r.get(), c.get()) <= want + tol, (fam, n)
                row["gpu_dev"] = t
                row["stats"] = {k: v for k, v in st.items() if k != "per_phase"}
            rows.append(row)
            g = row.get("gpu")
            st = row.get("stats", {})
            cells = [
                fam,
                f"{cost.shape[0]}x{cost.shape[1]}",
                ms(row["cpu"]),
                ms(g) if g else "-",
                ms(row["gpu_dev"]) if "gpu_dev" in row else "-",
                ms(row["scipy"]) if "scipy" in row else "-",
                ms(row["lap"]) if "lap" in row else "-",
                f"{row['cpu'][0] / g[0]:.2f}x" if g else "-",
                str(st.get("phases", "-")),
                str(st.get("bids", "-")),
                str(st.get("global_updates", "-")),
                str(st.get("list_fallbacks", "-")),
                str(st.get("whole_rows", "-")),
            ]
            print("| " + " | ".join(cells) + " |", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine_description(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
