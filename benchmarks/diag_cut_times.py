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
    """The move energies ``minimize_labels`` cuts on the GPU (host copies): those of
    the device loop (``_stereo_gpu``) and of the host-built moves (``multilabel``)."""
    from vision_cuts import _stereo_gpu, minimize_labels, multilabel
    from vision_cuts._backend import to_numpy
    from vision_cuts.grid import GridEnergy

    moves = []
    inner = multilabel.maxflow_grid

    def record(energy, backend="auto"):
        arrays = (to_numpy(a) for a in (energy.source, energy.sink, energy.edges))
        moves.append(GridEnergy._trusted(*arrays, energy.constant))
        return inner(energy, backend=backend)

    multilabel.maxflow_grid = _stereo_gpu.maxflow_grid = record
    try:
        minimize_labels(unary, v, max_cycles=cycles, backend="gpu")
    finally:
        multilabel.maxflow_grid = _stereo_gpu.maxflow_grid = inner
    return moves


def time_cuts(source, energies, repeats):
    import cupy

    from vision_cuts import maxflow_grid
    from vision_cuts.grid import GridEnergy

    rows = []
    for i, e in enumerate(energies):
        dev = GridEnergy._trusted(
            *(cupy.asarray(a) for a in (e.source, e.sink, e.edges)), e.constant
        )
        if i == 0:  # compile and warm up
            maxflow_grid(dev, backend="gpu")
        times, cut = [], None
        for _ in range(repeats):
            cupy.cuda.Device().synchronize()
            t = time.perf_counter()
            cut = maxflow_grid(dev, backend="gpu")
            cupy.cuda.Device().synchronize()
            times.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        ref = maxflow_grid(e, backend="cpu")
        cpu_ms = (time.perf_counter() - t) * 1e3
        if ref.flow != cut.flow:
            raise SystemExit(f"{source} cut {i}: GPU flow {cut.flow} != CPU {ref.flow}")
        rows.append(
            {
                "source": source,
                "cut": i,
                "shape": list(e.source.shape),
                "planes": int(e.edges.shape[0]),
                "gpu_ms": statistics.median(times),
                "gpu_worst_ms": max(times),
                "cpu_ms": cpu_ms,
                "sweeps": cut.stats["sweeps"],
                "relabels": cut.stats["global_relabels"],
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
                        energies.append(grid_energy(uu, weights=ww, connectivity=c))
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
            f"{statistics.median(r['cpu_ms'] for r in got):.1f} ms",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
