"""Grid max-flow benchmark: vision_cuts (CPU / GPU) against PyMaxflow (BK), same run.

Energies: contrast-sensitive segmentation energies built from a real picture
(scikit-image's astronaut, resized to each size; box-initialised colour histograms,
lambda = 50) and noisy 3-D volumes with blobs, 6-connected.

Columns:
  pmf_build / pmf_solve: PyMaxflow graph construction from the dense arrays
      (add_grid_nodes + add_grid_edges + add_grid_tedges) and ``maxflow()``.
  cpu_build / cpu_solve: ``grid_energy(unary, weights)`` plus the solver's own layout
      pass, and the Boykov-Kolmogorov solve (``maxflow_grid(backend="cpu")``).
  gpu_solve / gpu_e2e: solve time reported by the GPU backend (device arrays in), and
      end to end from host arrays (upload + energy + solve + labels back).
  gpu_cupy_in / gpu_numpy_in: ``maxflow_grid(source, sink, edges, backend="gpu")``
      on the energy's capacity arrays as CuPy / NumPy arrays (checks, upload, solve,
      labels back in the same kind); pinned_copy: the same bytes copied to the
      device from pinned host memory (the floor of a NumPy caller); numpy/floor =
      gpu_numpy_in / (gpu_cupy_in + pinned_copy).
Every flow value is checked against PyMaxflow's; a mismatch aborts the run.

Usage::

    python benchmarks/bench_grid.py                      # CPU: 0.3, 2, 4 MP + 128^3
    python benchmarks/bench_grid.py --backend cpu gpu --sizes 0.3 2 4 8 \
        --volumes 128 256
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np


def machine() -> str:
    from vision_cuts._backend import machine_description

    return machine_description()


def median_time(fn, repeat: int):
    """(median, worst, last result) of ``repeat`` timed calls of ``fn``."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), max(times), out


def pymaxflow_solve(unary, weights):
    import maxflow

    from vision_cuts.grid import neighbour_offsets

    t0 = time.perf_counter()
    g = maxflow.Graph[int]()
    ids = g.add_grid_nodes(unary.shape[:-1])
    nd = unary.ndim - 1
    steps = neighbour_offsets(nd, 2 * weights.shape[0])[::2]
    for d in range(weights.shape[0]):
        st = np.zeros((3,) * nd, dtype=int)
        st[tuple(1 + steps[d])] = 1  # the forward neighbour of direction d
        g.add_grid_edges(ids, weights=weights[d], structure=st, symmetric=True)
    g.add_grid_tedges(ids, unary[..., 1], unary[..., 0])
    t1 = time.perf_counter()
    flow = g.maxflow()
    t2 = time.perf_counter()
    return int(flow), t1 - t0, t2 - t1


def problems(sizes, volumes, connectivity=(4,), volume_connectivity=(6,)):
    import cv2
    import skimage.data

    from vision_cuts.datasets.synthetic import segmentation_problem, volume_problem

    base = skimage.data.astronaut()
    for mp in sizes:
        side = int(round(np.sqrt(mp * 1e6)))
        img = cv2.resize(base, (side, side), interpolation=cv2.INTER_CUBIC)
        for c in connectivity:
            u, w = segmentation_problem(img, connectivity=c)
            yield f"2-D {side}x{side} ({mp:g} MP), {c}-conn", u, w
    for n in volumes:
        for c in volume_connectivity:
            u, w = volume_problem(n, connectivity=c)
            yield f"3-D {n}^3 ({n**3 / 1e6:.1f} M), {c}-conn", u, w


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="*", default=[0.3, 2, 4])
    ap.add_argument("--volumes", type=int, nargs="*", default=[128])
    ap.add_argument("--backend", nargs="+", default=["cpu"], choices=["cpu", "gpu"])
    ap.add_argument(
        "--connectivity",
        type=int,
        nargs="+",
        default=[4],
        choices=[4, 8],
        help="2-D neighbourhoods to run",
    )
    ap.add_argument(
        "--volume-connectivity",
        type=int,
        nargs="+",
        default=[6],
        choices=[6, 18, 26],
        help="3-D neighbourhoods to run",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--no-pymaxflow",
        action="store_true",
        help="skip the baseline (flows are then checked CPU vs GPU)",
    )
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args(argv)

    import vision_cuts as vc

    print(f"machine: {machine()}")
    if "gpu" in args.backend:
        from vision_cuts._backend import gpu_name

        print(f"gpu: {gpu_name()}")
    rows = []
    for name, u, w in problems(
        args.sizes, args.volumes, args.connectivity, args.volume_connectivity
    ):
        conn = 2 * w.shape[0]  # the planes of this energy's neighbourhood
        row = {"problem": name, "nodes": int(np.prod(u.shape[:-1]))}
        ref = None
        if not args.no_pymaxflow:
            runs = [pymaxflow_solve(u, w) for _ in range(max(1, args.repeat))]
            ref = runs[0][0]
            row["pmf_build"] = statistics.median(r[1] for r in runs)
            row["pmf_solve"] = statistics.median(r[2] for r in runs)
        if "cpu" in args.backend:

            def run_cpu(u=u, w=w, conn=conn):
                e = vc.grid_energy(u, weights=w, connectivity=conn)
                cut = vc.maxflow_grid(e, backend="cpu")
                return e, cut

            run_cpu()  # compile / warm caches
            builds, solves, total = [], [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                e, cut = run_cpu()
                total.append(time.perf_counter() - t0)
                solves.append(cut.stats["solve_s"])
                builds.append(total[-1] - cut.stats["solve_s"])
            value = e.constant + cut.flow
            if ref is not None and value != ref:
                raise SystemExit(f"{name}: CPU flow {value} != PyMaxflow {ref}")
            if e.energy(cut.labels) != value:
                raise SystemExit(f"{name}: CPU labels are not a minimum cut")
            ref = value if ref is None else ref
            row.update(
                cpu_build=statistics.median(builds),
                cpu_solve=statistics.median(solves),
                cpu_total=statistics.median(total),
                cpu_total_worst=max(total),
            )
        if "gpu" in args.backend:
            import cupy

            ud, wd = cupy.asarray(u), cupy.asarray(w)
            e_d = vc.grid_energy(ud, weights=wd, connectivity=conn)
            vc.maxflow_grid(e_d, backend="gpu")  # compile + warm up
            solves, stats = [], None
            for _ in range(max(args.repeat, 5)):
                cut = vc.maxflow_grid(e_d, backend="gpu")
                solves.append(cut.stats["time_s"])
                stats = cut.stats
            value = e_d.constant + cut.flow
            if ref is not None and value != ref:
                raise SystemExit(f"{name}: GPU flow {value} != reference {ref}")
            if e_d.energy(cut.labels) != value:
                raise SystemExit(f"{name}: GPU labels are not a minimum cut")

            def e2e(u=u, w=w, conn=conn):
                uu, ww = cupy.asarray(u), cupy.asarray(w)
                lab = vc.maxflow_grid(
                    vc.grid_energy(uu, weights=ww, connectivity=conn), backend="gpu"
                ).labels
                return lab.get()

            t_e2e, w_e2e, _ = median_time(e2e, max(args.repeat, 5))
            # the graph's arrays handed over as they are: NumPy (uploaded through the
            # pinned staging buffers, checked on the device) and CuPy, labels back in
            # the same kind; and the floor of the NumPy call: the three arrays copied
            # from pinned host memory
            arrays = [
                cupy.ascontiguousarray(a) for a in (e_d.source, e_d.sink, e_d.edges)
            ]
            host = [a.get() for a in arrays]

            def numpy_in(host=host):
                return vc.maxflow_grid(*host, backend="gpu").labels

            def cupy_in(arrays=arrays):
                lab = vc.maxflow_grid(*arrays, backend="gpu").labels
                cupy.cuda.get_current_stream().synchronize()
                return lab

            numpy_in()
            cupy_in()
            t_np, w_np, lab_np = median_time(numpy_in, max(args.repeat, 5))
            t_cp, w_cp, lab_cp = median_time(cupy_in, max(args.repeat, 5))
            if not np.array_equal(lab_np, lab_cp.get()):
                raise SystemExit(f"{name}: NumPy-in and CuPy-in labels differ")
            nbytes = sum(a.nbytes for a in host)
            pinned = cupy.cuda.alloc_pinned_memory(nbytes)
            dst = cupy.empty(nbytes, dtype=cupy.uint8)

            def pinned_copy(pinned=pinned, dst=dst, nbytes=nbytes):
                cupy.cuda.runtime.memcpy(
                    dst.data.ptr,
                    pinned.ptr,
                    nbytes,
                    cupy.cuda.runtime.memcpyHostToDevice,
                )

            pinned_copy()
            t_pin, _, _ = median_time(pinned_copy, max(args.repeat, 5))
            del pinned, dst
            row.update(
                gpu_numpy_in=t_np,
                gpu_numpy_in_worst=w_np,
                gpu_cupy_in=t_cp,
                gpu_cupy_in_worst=w_cp,
                pinned_copy=t_pin,
                numpy_in_ratio=t_np / (t_cp + t_pin),
            )
            row.update(
                gpu_solve=statistics.median(solves),
                gpu_solve_worst=max(solves),
                gpu_e2e=t_e2e,
                gpu_e2e_worst=w_e2e,
                gpu_stats={
                    k: v for k, v in stats.items() if isinstance(v, (int, float, str))
                },
            )
        row["flow_checked"] = True
        rows.append(row)
        print(json.dumps(row), flush=True)

    print()
    hdr = f"{'problem':36s}"
    cols = []
    if not args.no_pymaxflow:
        cols += ["pmf_build", "pmf_solve"]
    if "cpu" in args.backend:
        cols += ["cpu_build", "cpu_solve"]
    if "gpu" in args.backend:
        cols += ["gpu_solve", "gpu_e2e", "gpu_cupy_in", "pinned_copy", "gpu_numpy_in"]
    hdr += "".join(f"{c + ' ms':>14s}" for c in cols)
    ratios = []
    if not args.no_pymaxflow and "cpu" in args.backend:
        ratios += [
            ("solve x", "pmf_solve", "cpu_solve"),
            ("e2e x", lambda r: r["pmf_build"] + r["pmf_solve"], "cpu_total"),
        ]
    if not args.no_pymaxflow and "gpu" in args.backend:
        ratios += [("gpu solve x", "pmf_solve", "gpu_solve")]
    if "gpu" in args.backend:  # NumPy-in time / (CuPy-in time + pinned copy time)
        ratios += [
            (
                "numpy/floor",
                "gpu_numpy_in",
                lambda r: r["gpu_cupy_in"] + r["pinned_copy"],
            )
        ]
    hdr += "".join(f"{r[0]:>13s}" for r in ratios)
    print(hdr)
    nan = float("nan")  # a cell the run has no number for (GPU: 4/6-connected only)
    for r in rows:
        line = f"{r['problem']:36s}" + "".join(
            f"{r.get(c, nan) * 1e3:14.1f}" for c in cols
        )
        for _, num, den in ratios:
            a = num(r) if callable(num) else r.get(num, nan)
            b = den(r) if callable(den) else r.get(den, nan)
            line += f"{a / b:13.2f}"
        print(line)
    print(
        "(x = PyMaxflow time / vision_cuts time; every flow equals PyMaxflow's)"
        if not args.no_pymaxflow
        else ""
    )
    # the worst of the timed calls beside their median (ms)
    worst = [
        c for c in ("cpu_total", "gpu_solve", "gpu_e2e", "gpu_cupy_in", "gpu_numpy_in")
        if any(c + "_worst" in r for r in rows)
    ]  # fmt: skip
    if worst:
        print(f"\n{'median / worst ms':36s}" + "".join(f"{c:>18s}" for c in worst))
        for r in rows:
            print(
                f"{r['problem']:36s}"
                + "".join(
                    f"{r.get(c, nan) * 1e3:9.1f} /{r.get(c + '_worst', nan) * 1e3:7.1f}"
                    for c in worst
                )
            )
    if args.json:
        out = {"machine": machine(), "rows": rows}
        if "gpu" in args.backend:
            from vision_cuts._backend import gpu_name

            out["gpu"] = gpu_name()
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
