"""The distribution of GPU cut times over the energies of multi-label moves and volumes.

GrabCut's cuts are measured by ``diag_grid_tail.py``; this script measures the other
real energies the grid engine sees:

* ``stereo``: every expansion move of ``minimize_labels`` on scikit-image's Middlebury
  motorcycle pair (``bench_multilabel.stereo_problem``: 64 disparities at 741 x 500,
  truncated linear, cap 2, weight 10, at most ``--cycles`` cycles), 4-connected;
* ``labels3d``: every expansion move on the 32-label 64^3 volume of
  ``bench_multilabel.volume_problem`` (truncated linear, cap 2, weight 6), 6-connected;
* ``volume``: binary segmentation volumes (``datasets.synthetic.volume_problem``) of
  64^3, 96^3 and 128^3, 6-, 18- and 26-connected, seeds 0-2.

The moves are recorded as ``minimize_labels(..., backend="gpu")`` makes them, then each
energy is solved cold on the GPU ``--repeats`` times (median and worst) and once on the
CPU backend, whose flow must be the GPU's. Prints the distribution per source (median,
p90, worst, worst over median) and the slowest cuts with the solver's work counters.

    python -P benchmarks/diag_cut_times.py --json /tmp/cut_times.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def recorded_moves(unary, v, cycles):
    """The move energies ``minimize_labels`` cuts on the GPU (host copies), each with
    the side of the cut it asks for: the device loop's mirrored moves (cut by
    ``maxflow_grid_gpu(..., side="source")``), its plain ones and the host-built moves
    (``maxflow_grid``)."""
    from vision_cuts import _maxflow_gpu, _stereo_gpu, minimize_labels, multilabel
    from vision_cuts._backend import to_numpy
    from vision_cuts.grid import GridEnergy

    moves = []
    inner, inner_gpu = multilabel.maxflow_grid, _maxflow_gpu.maxflow_grid_gpu

    def keep(source, sink, edges, constant, side):
        arrays = (to_numpy(a) for a in (source, sink, edges))
        moves.append((GridEnergy._trusted(*arrays, constant), side))

    inside = []  # maxflow_grid's own call of the GPU solver is not a second move

    def record(energy, backend="auto"):
        keep(energy.source, energy.sink, energy.edges, energy.constant, "sink")
        inside.append(1)
        try:
            return inner(energy, backend=backend)
        finally:
            inside.pop()

    def record_gpu(source, sink, edges, **kw):
        if not inside:
            keep(source, sink, edges, 0, kw.get("side", "sink"))
        return inner_gpu(source, sink, edges, **kw)

    multilabel.maxflow_grid = _stereo_gpu.maxflow_grid = record
    _maxflow_gpu.maxflow_grid_gpu = record_gpu
    try:
        minimize_labels(unary, v, max_cycles=cycles, backend="gpu")
    finally:
        multilabel.maxflow_grid = _stereo_gpu.maxflow_grid = inner
        _maxflow_gpu.maxflow_grid_gpu = inner_gpu
    if not moves:
        raise SystemExit("no move was recorded: the GPU loop cuts by another function")
    return moves


def time_cuts(source, energies, repeats):
    """GPU median and worst of each cut (``energies``: (energy, side) pairs, cut as
    the caller asked), the CPU backend's time and flow beside it."""
    import cupy

    from vision_cuts import maxflow_grid
    from vision_cuts._maxflow_gpu import maxflow_grid_gpu

    rows = []
    warmed = set()
    for i, (e, side) in enumerate(energies):
        arrays = (e.source, e.sink, e.edges)
        dev = [cupy.ascontiguousarray(cupy.asarray(a)) for a in arrays]
        key = (e.source.shape, e.edges.shape[0], side)
        if key not in warmed:  # compile (kernels of a new neighbourhood) and warm up
            warmed.add(key)
            maxflow_grid_gpu(*dev, side=side)
        times, flow, stats, all_stats = [], None, None, []
        for _ in range(repeats):
            cupy.cuda.Device().synchronize()
            t = time.perf_counter()
            flow, _, stats = maxflow_grid_gpu(*dev, side=side)
            cupy.cuda.Device().synchronize()
            times.append((time.perf_counter() - t) * 1e3)
            all_stats.append(stats)
        t = time.perf_counter()
        ref = maxflow_grid(e, backend="cpu")
        cpu_ms = (time.perf_counter() - t) * 1e3
        if ref.flow != flow:
            raise SystemExit(f"{source} cut {i}: GPU flow {flow} != CPU {ref.flow}")
        rows.append(
            {
                "source": source,
                "cut": i,
                "shape": list(e.source.shape),
                "planes": int(e.edges.shape[0]),
                "gpu_ms": statistics.median(times),
                "gpu_worst_ms": max(times),
                "cpu_ms": cpu_ms,
                "side": side,
                "sweeps": stats["sweeps"],
                "relabels": stats["global_relabels"],
                # the solves that handed their rest to the CPU solver
                "handovers": sum(1 for st in all_stats if st["handover"]),
            }
        )
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sources", nargs="+", default=["stereo", "labels3d", "volume"],
        choices=["stereo", "labels3d", "volume"],
    )  # fmt: skip
    ap.add_argument("--cycles", type=int, default=2, help="expansion cycles recorded")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from bench_multilabel import stereo_problem
    from bench_multilabel import volume_problem as label_volume

    from vision_cuts import grid_energy
    from vision_cuts._backend import gpu_name, machine_description
    from vision_cuts.datasets.synthetic import volume_problem
    from vision_cuts.multilabel import pairwise_matrix

    print(f"machine: {machine_description()}; gpu: {gpu_name()}")
    rows = []
    for source in args.sources:
        if source == "stereo":
            u, _ = stereo_problem(64)
            v = pairwise_matrix(("truncated_linear", 2), 64) * 10
            energies = recorded_moves(u, v, args.cycles)
        elif source == "labels3d":
            u = label_volume(64, 32)
            v = pairwise_matrix(("truncated_linear", 2), 32) * 6
            energies = recorded_moves(u, v, args.cycles)
        else:
            energies = []
            for n in (64, 96, 128):
                for c in (6, 18, 26):
                    for seed in range(3):
                        uu, ww = volume_problem(n, seed=seed, connectivity=c)
                        e = grid_energy(uu, weights=ww, connectivity=c)
                        energies.append((e, "sink"))
        got = time_cuts(source, energies, args.repeats)
        rows += got
        ms = [r["gpu_ms"] for r in got]
        worst = max(got, key=lambda r: r["gpu_worst_ms"])
        med = statistics.median(ms)
        print(
            f"{source}: {len(got)} cuts, GPU median {med:.2f} ms, p90 "
            f"{np.percentile(ms, 90):.2f}, worst {worst['gpu_worst_ms']:.2f} "
            f"({worst['gpu_worst_ms'] / med:.1f}x the median; cut {worst['cut']}, "
            f"{worst['shape']}, K {worst['planes']}, {worst['sweeps']} sweeps, "
            f"{worst['relabels']} relabels); CPU median "
            f"{statistics.median(r['cpu_ms'] for r in got):.1f} ms; "
            f"{sum(r['handovers'] for r in got)} solves handed to the CPU",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
