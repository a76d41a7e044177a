"""``segment()`` end to end on large 8-connected energies, NumPy in, both backends.

The contrast-sensitive segmentation energy of scikit-image's astronaut resized to each
size (``datasets.synthetic.segmentation_problem``, 8 neighbours), handed to
``vision_cuts.segment`` as NumPy arrays, labels back as NumPy: on the GPU with the
default relabels (the level BFS, ``_level_plan``) and with the tile BFS it replaced
above 4 MP, alternated, median and worst of 5 per pass; on the CPU backend median and
worst of 2; PyMaxflow's build + solve of the same graph in the same run. Every
labelling's energy must equal PyMaxflow's minimum. Writes ``--json``.

    python -P benchmarks/bench_segment_large.py [--sizes 2828x2828 3840x2160]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import skimage.data

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grid import machine, median_time, pymaxflow_solve  # noqa: E402

import vision_cuts as vc
import vision_cuts._maxflow_gpu as mg
from vision_cuts.datasets.synthetic import segmentation_problem


def timed(fn, n: int):
    """(median ms, worst ms, last result) of n calls after one warm-up."""
    fn()
    med, worst, out = median_time(fn, n)
    return 1e3 * med, 1e3 * worst, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", nargs="+", default=["2828x2828", "3840x2160"])
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    print(f"machine: {machine()}")
    cap = mg._BFS_LEVEL_DIAG_MAX_NODES
    rows = []
    for size in args.sizes:
        wd, ht = (int(v) for v in size.split("x"))
        img = cv2.resize(
            skimage.data.astronaut(), (wd, ht), interpolation=cv2.INTER_CUBIC
        )
        u, w = segmentation_problem(img, connectivity=8)
        e = vc.grid_energy(u, weights=w, connectivity=8)
        ref, pb, ps = pymaxflow_solve(u, w)
        row = {"problem": f"segment {wd}x{ht} 8-conn", "pymaxflow_ms": 1e3 * (pb + ps)}
        energies = set()
        try:
            for _ in range(2):
                for variant, limit in (("gpu_level", cap), ("gpu_tile", 0)):
                    mg._BFS_LEVEL_DIAG_MAX_NODES = limit
                    med, worst, lab = timed(
                        lambda u=u, w=w: vc.segment(
                            u, w, connectivity=8, backend="gpu"
                        ),
                        5,
                    )
                    row.setdefault(variant, []).append((med, worst))
                    energies.add(int(e.energy(lab)))
        finally:
            mg._BFS_LEVEL_DIAG_MAX_NODES = cap
        med, worst, lab = timed(
            lambda u=u, w=w: vc.segment(u, w, connectivity=8, backend="cpu"), 2
        )
        row["cpu"] = (med, worst)
        energies.add(int(e.energy(lab)))
        if energies != {int(ref)}:
            raise SystemExit(f"{size}: energies {energies} != PyMaxflow's {ref}")
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
