"""Assignment on the cost families real callers produce, both backends, same run.

Families (:func:`vision_cuts.datasets.synthetic.assignment_costs`): the optical flow's
stacks (descriptor + displacement costs, forbidden beyond the search radius, a dummy
column per row), geometric point sets (points plus small jitter, float), integers 0-3
(many ties), integers 0-999, forbidden entries (60% inf); ``--families machol_wien``
adds Machol and Wien's ``(i + 1) * (j + 1)``, the auction's hard case. One n x n
problem each (``--width``: n x width n; the flow's stacks are rectangular), through
``linear_sum_assignment``:

* ``cpu``: the CPU backend (NumPy in);
* ``gpu``: NumPy in and out (copies included), ``gpu dev``: CuPy in and out
  (synchronised), with the work counters of the GPU solve and its path ("rows", or
  "cpu" where it ran past its time budget and the CPU solved the problem: the
  counters are then the GPU's until it stopped);
* ``scipy``: ``scipy.optimize.linear_sum_assignment``; ``lap``: ``lap.lapjv`` on
  the finite square families when lap is installed.

Each time is the median of ``--repeat`` runs after a warm-up, with the worst run in
parentheses. Every total is checked against the CPU backend's (exact for integer
costs, within ``float_tolerance`` on the GPU for float costs); a mismatch aborts.

``--small``: instead, stacks of 64 small problems through
``linear_sum_assignment_batched`` (uniform float costs; square and rectangular;
dense, and sparse with a dummy column per row as the flow's stacks have), the CPU
backend and a loop of SciPy calls beside the GPU in the same run, with the GPU's path
and work counters.

    python benchmarks/bench_assignment_families.py --sizes 1000 4000 [--backend cpu gpu]
    python benchmarks/bench_assignment_families.py --small [--backend cpu gpu]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from scipy.optimize import linear_sum_assignment as scipy_lsa

from vision_cuts import linear_sum_assignment, linear_sum_assignment_batched
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


def write_json(path, rows: list) -> None:
    """The rows of a run with the machine, where ``--json`` asks."""
    if path:
        with open(path, "w") as fh:
            json.dump({"machine": machine_description(), "rows": rows}, fh, indent=1)


def total(cost, r, c) -> float:
    return float(np.asarray(cost)[np.asarray(r), np.asarray(c)].sum())


#: (rows, columns, density) of the --small stacks; density < 1: forbidden pairs
#: (inf) and a dummy column per row at 0.35 after the columns, as the flow's stacks
SMALL_SHAPES = [
    (16, 16, 1.0),
    (32, 32, 1.0),
    (100, 100, 1.0),
    (128, 128, 1.0),
    (100, 100, 0.25),
    (47, 64, 1.0),
    (30, 200, 1.0),
    (200, 56, 1.0),
    (100, 150, 1.0),
    (16, 16, 0.05),
    (47, 64, 0.05),
    (47, 64, 0.25),
    (100, 150, 0.25),
    (128, 128, 0.05),
]


def small_stack(B: int, n: int, m: int, density: float, rng) -> np.ndarray:
    c = rng.random((B, n, m))
    if density >= 1:
        return c
    c[rng.random((B, n, m)) > density] = np.inf
    if n == m and density > 0.2:  # square and sparse: no dummy columns
        return c
    dummy = np.full((B, n, n), np.inf)
    dummy[:, np.arange(n), np.arange(n)] = 0.35
    return np.concatenate([c, dummy], axis=2)


def small(args) -> None:
    print(f"machine: {machine_description()}")
    print(
        "| stack | cpu ms | scipy loop ms | gpu ms | gpu dev ms | cpu / gpu dev | "
        "path | phases | bids |"
    )
    print("|---" * 9 + "|")
    rows = []
    for n, m, density in SMALL_SHAPES:
        rng = np.random.default_rng(args.seed)
        stack = small_stack(64, n, m, density, rng)
        name = f"64x{n}x{stack.shape[2]}" + (f" ({density:.0%})" if density < 1 else "")
        row = {"stack": name}
        (r, c), *row["cpu"] = timed(
            lambda s=stack: linear_sum_assignment_batched(s, backend="cpu"), args.repeat
        )
        want = [total(stack[b], r[b], c[b]) for b in range(len(stack))]
        _, *row["scipy"] = timed(lambda s=stack: [scipy_lsa(p) for p in s], args.repeat)
        st = {}
        if "gpu" in args.backend:
            import cupy

            from vision_cuts._assignment_gpu import float_tolerance

            (r, c, st), *row["gpu"] = timed(
                lambda s=stack: linear_sum_assignment_batched(
                    s, backend="gpu", return_stats=True
                ),
                args.repeat,
            )
            for b in range(len(stack)):
                tol = float_tolerance(stack[b]) + 1e-9 * max(1.0, abs(want[b]))
                assert total(stack[b], r[b], c[b]) <= want[b] + tol, (name, b)
            dev = cupy.asarray(stack)
            _, *row["gpu_dev"] = timed(
                lambda d=dev: linear_sum_assignment_batched(d, backend="gpu"),
                args.repeat,
                cupy.cuda.Device().synchronize,
            )
            row["stats"] = {k: v for k, v in st.items() if k != "per_phase"}
        rows.append(row)
        ms = lambda t: f"{1e3 * t[0]:.2f} ({1e3 * t[1]:.2f})"  # noqa: E731
        gd = row.get("gpu_dev")
        cells = [
            name,
            ms(row["cpu"]),
            ms(row["scipy"]),
            ms(row["gpu"]) if "gpu" in row else "-",
            ms(gd) if gd else "-",
            f"{row['cpu'][0] / gd[0]:.2f}x" if gd else "-",
            str(st.get("path", "-")),
            str(st.get("phases", "-")),
            str(st.get("bids", "-")),
        ]
        print("| " + " | ".join(cells) + " |", flush=True)
    write_json(args.json, rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", type=int, default=[1000, 4000])
    ap.add_argument("--families", nargs="+", default=list(ASSIGNMENT_FAMILIES))
    ap.add_argument("--backend", nargs="+", default=["cpu"], choices=["cpu", "gpu"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scipy-max-n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--width", type=float, default=1.0, help="columns per row (m = width * n)"
    )
    ap.add_argument("--json")
    ap.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="NAME=VALUE",
        help="override a setting of vision_cuts._assignment_gpu (tuning runs)",
    )
    ap.add_argument("--no-cpu", action="store_true", help="GPU columns only")
    ap.add_argument(
        "--small", action="store_true", help="batched stacks of small problems"
    )
    args = ap.parse_args()
    if args.set:
        from vision_cuts import _assignment_gpu as g

        for item in args.set:
            name, value = item.split("=")
            setattr(g, name, type(getattr(g, name))(int(value)))
        print("settings:", args.set)
    if args.small:
        small(args)
        return
    try:
        import lap
    except ImportError:
        lap = None
    print(f"machine: {machine_description()}")
    rows = []
    ms = lambda t: f"{1e3 * t[0]:.1f} ({1e3 * t[1]:.1f})"  # noqa: E731
    print(
        "| family | shape | cpu ms | gpu ms | gpu dev ms | scipy ms | lap ms | "
        "cpu / gpu | phases | bids | GU | list rebuilds | whole rows | gpu path |"
    )
    print("|---" * 14 + "|")
    for fam in args.families:
        for n in args.sizes:
            rng = np.random.default_rng(args.seed)
            m = max(1, round(args.width * n))
            cost = assignment_costs(fam, (1, n, m), rng)[0]
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
            if st.get("path") == "cpu":  # past the GPU's budget: its work until then
                st = {**st["gpu"], "path": "cpu"}
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
                str(st.get("path", "-")),
            ]
            print("| " + " | ".join(cells) + " |", flush=True)
    write_json(args.json, rows)


if __name__ == "__main__":
    main()
