"""Grid max-flow on energies with long paths: vision_cuts (CPU / GPU) against
PyMaxflow (BK), same run.

Push-relabel's hard case: graphs whose flow runs along one winding corridor
(``datasets.synthetic.corridor_graph``), where every global relabel is as deep as the
corridor and the excess moves a few steps a round. Families:

  ends     one corridor, source at its start, sink at its end (one path of n / 2 nodes)
  leaky    the same with walls of capacity 1 (long and short paths together)
  halves   unit source capacities on the corridor's first half, unit sink ones on its
           second (many long paths); also 3-D and a 1 x n strip

Columns (median / worst of ``--repeat`` calls, one warm-up before):
  pmf:        PyMaxflow build (one ``add_grid_edges`` a plane) + ``maxflow()``
  cpu:        ``maxflow_grid(source, sink, edges, backend="cpu")``
  gpu_numpy / gpu_cupy: ``maxflow_grid(..., backend="gpu")`` with NumPy / CuPy
              arrays in, the default hand-over to the CPU solver included
  gpu_to_end: the GPU solver run to the end (``cpu_after=inf``, CuPy in; up to
              ``--to-end-max`` nodes: it grows about 12x for 4x the nodes)
Ratios are PyMaxflow's time over ours (> 1: ours faster). Every flow is checked
against PyMaxflow's; a mismatch aborts the run.

    python -P benchmarks/bench_grid_long_paths.py --backend cpu gpu --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np

CASES = [
    ("ends", (128, 128)),
    ("ends", (256, 256)),
    ("ends", (512, 512)),
    ("ends", (1024, 1024)),
    ("leaky", (128, 128)),
    ("leaky", (256, 256)),
    ("leaky", (512, 512)),
    ("halves", (256, 256)),
    ("halves", (512, 512)),
    ("halves", (16, 64, 64)),
    ("halves", (1, 20000)),
]


def machine() -> str:
    from vision_cuts._backend import machine_description

    return machine_description()


def timed(fn, repeat: int):
    """(median s, worst s, last result) of ``repeat`` calls after one warm-up."""
    out = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), max(times), out


def problem(family: str, shape: tuple):
    from vision_cuts.datasets.synthetic import corridor_graph

    if family == "leaky":
        return corridor_graph(shape, wall=1)
    return corridor_graph(shape, terminals=family)


def pymaxflow(src, snk, edges) -> int:
    import maxflow

    from vision_cuts.grid import neighbour_offsets

    g = maxflow.Graph[int]()
    ids = g.add_grid_nodes(src.shape)
    for k, step in enumerate(neighbour_offsets(src.ndim, edges.shape[0])):
        st = np.zeros((3,) * src.ndim, dtype=int)
        st[tuple(1 + step)] = 1
        g.add_grid_edges(ids, weights=edges[k], structure=st, symmetric=False)
    g.add_grid_tedges(ids, src, snk)
    return int(g.maxflow())


def run_case(family: str, shape: tuple, backends: list, repeat: int, to_end_max: int):
    """One row: every column of the module docstring for one case."""
    from vision_cuts import maxflow_grid

    src, snk, edges = problem(family, shape)
    n = src.size
    row = {"family": family, "shape": list(shape), "nodes": n}
    med, worst, want = timed(lambda: pymaxflow(src, snk, edges), repeat)
    row.update(pmf_s=med, pmf_worst_s=worst, flow=want)

    def check(flow, what):
        if flow != want:
            sys.exit(f"{family} {shape} {what}: flow {flow} != PyMaxflow {want}")

    if "cpu" in backends:
        med, worst, cut = timed(
            lambda: maxflow_grid(src, snk, edges, backend="cpu"), repeat
        )
        check(cut.flow, "cpu")
        row.update(cpu_s=med, cpu_worst_s=worst)
    if "gpu" not in backends:
        return row
    import cupy

    from vision_cuts._maxflow_gpu import maxflow_grid_gpu

    dev = [cupy.asarray(a) for a in (src, snk, edges)]

    def numpy_in():
        return maxflow_grid(src, snk, edges, backend="gpu")

    def cupy_in():
        cut = maxflow_grid(*dev, backend="gpu")
        cupy.cuda.Device().synchronize()
        return cut

    def to_end():
        out = maxflow_grid_gpu(*dev, cpu_after=math.inf)
        cupy.cuda.Device().synchronize()
        return out

    for name, fn in (("gpu_numpy", numpy_in), ("gpu_cupy", cupy_in)):
        med, worst, cut = timed(fn, repeat)
        check(cut.flow, name)
        row.update({f"{name}_s": med, f"{name}_worst_s": worst})
    row["relabels"] = cut.stats["global_relabels"]
    row["handover"] = cut.stats["handover"]
    if n <= to_end_max:
        med, worst, (flow, _, st) = timed(to_end, repeat)
        check(flow, "gpu_to_end")
        row.update(
            gpu_to_end_s=med,
            gpu_to_end_worst_s=worst,
            to_end_relabels=st["global_relabels"],
        )
    return row


def describe(row: dict) -> str:
    """One printed line of a row."""
    parts = [f"{row['family']:6s} {'x'.join(map(str, row['shape'])):>10s}"]
    for key in ("pmf", "cpu", "gpu_numpy", "gpu_cupy", "gpu_to_end"):
        if f"{key}_s" in row:
            med, worst = 1e3 * row[f"{key}_s"], 1e3 * row[f"{key}_worst_s"]
            parts.append(f"{key} {med:8.1f}/{worst:.1f}")
    for key in ("cpu", "gpu_numpy", "gpu_cupy", "gpu_to_end"):
        if f"{key}_s" in row:
            parts.append(f"pmf/{key} {row['pmf_s'] / row[f'{key}_s']:.2f}")
    if "relabels" in row:
        ho = row["handover"]
        text = f"relabels {row['relabels']}"
        if "to_end_relabels" in row:
            text += f" (to the end {row['to_end_relabels']})"
        if ho:
            text += (
                f", handed over after {1e3 * ho['after_s']:.1f} ms (cpu "
                f"{1e3 * ho['cpu_s']:.1f} ms, download {1e3 * ho['download_s']:.1f} ms)"
            )
        else:
            text += ", no hand-over"
        parts.append(text)
    return "  ".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", nargs="+", default=["cpu"], choices=["cpu", "gpu"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--to-end-max", type=int, default=1 << 16)
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args(argv)

    print(f"machine: {machine()}")
    if "gpu" in args.backend:
        from vision_cuts._backend import gpu_name

        print(f"gpu: {gpu_name()}")
    rows = []
    for family, shape in CASES:
        rows.append(run_case(family, shape, args.backend, args.repeat, args.to_end_max))
        print(describe(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
