"""GPU grid max-flow with diagonal arcs: a sweep of the solver's settings.

Push tile, BFS tile, local rounds and sweeps a relabel, 72 settings a problem, on the
segmentation energy of scikit-image's astronaut at 2 and 0.3 MP (8-connected) and the
128^3 noisy volume (26- and 18-connected) of ``datasets.synthetic``; device arrays in,
one warm-up, median and worst of 5 solves, then one profiled solve (push and relabel
milliseconds by CUDA events). Every flow is checked against the CPU solver. Writes
``$OUT/tune_diag.json`` (benchmarks/results_h100_grid_diagonal_tuning.json); the
defaults in ``vision_cuts._maxflow_gpu._DIAG_SCHEDULE`` come from it.

    python -P benchmarks/tune_grid_diagonal.py [--sizes 2 0.3] [--volumes 26 18]
        [--tiles 32x8 32x32] [--rounds 16 32] [--sweeps 1 2 3] [--no-level]
        [--four-colours]

``--no-level``: the tile BFS instead of the level BFS for the 8-connected grids (the
level BFS takes no BFS tile; with it the BFS tiles are not swept); ``--four-colours``:
four checkerboard colours instead of two and the corner pushes.
"""

import argparse
import itertools
import json
import os
import statistics

import cupy
import cv2
import numpy as np
import skimage.data

import vision_cuts as vc
from vision_cuts._maxflow_gpu import maxflow_grid_gpu
from vision_cuts.datasets.synthetic import segmentation_problem, volume_problem

OUT = os.environ.get("OUT", "/tmp")
res = []


def run(name, e, cfgs, ref):
    s, t, ed = (
        cupy.ascontiguousarray(cupy.asarray(a)) for a in (e.source, e.sink, e.edges)
    )
    for cfg in cfgs:
        try:
            f, lab, st = maxflow_grid_gpu(s, t, ed, **cfg)
            assert f == ref, (f, ref)
            ts = []
            for _ in range(5):
                f, lab, st = maxflow_grid_gpu(s, t, ed, **cfg)
                ts.append(st["time_s"])
            _, _, pr = maxflow_grid_gpu(s, t, ed, profile=True, **cfg)
            row = dict(
                problem=name,
                cfg=str(cfg),
                ms=1e3 * statistics.median(ts),
                worst=1e3 * max(ts),
                sweeps=st["sweeps"],
                relabels=st["global_relabels"],
                push_ms=pr.get("push_ms"),
                relabel_ms=pr.get("relabel_ms"),
            )
        except Exception as ex:
            row = dict(problem=name, cfg=str(cfg), error=repr(ex)[:200])
        res.append(row)
        print(json.dumps(row), flush=True)


ap = argparse.ArgumentParser()
ap.add_argument("--sizes", type=float, nargs="*", default=[2.0, 0.3])
ap.add_argument("--volumes", type=int, nargs="*", default=[26, 18])
ap.add_argument("--tiles", nargs="+", default=["32x8", "32x16", "32x32", "16x16"])
ap.add_argument("--rounds", type=int, nargs="+", default=[16, 32])
ap.add_argument("--sweeps", type=int, nargs="+", default=[1, 2, 3])
ap.add_argument(
    "--tail-iters", type=int, nargs="+", default=[0], help="0: as local rounds"
)
ap.add_argument("--no-level", action="store_true")
ap.add_argument("--four-colours", action="store_true")
args = ap.parse_args()
if args.no_level or args.four_colours:
    import vision_cuts._maxflow_gpu as _mg

    if args.no_level:
        _mg._BFS_LEVEL_DIAG_MAX_NODES = 0
    if args.four_colours:
        _mg._DIAG_CORNERS = False
bfs_tiles = [(16, 16, 1), (32, 8, 1), (32, 32, 1)] if args.no_level else [(16, 16, 1)]
tiles2 = [tuple(int(v) for v in t.split("x")) + (1,) for t in args.tiles]
base = skimage.data.astronaut()
for mp in args.sizes:
    side = int(round(np.sqrt(mp * 1e6)))
    img = cv2.resize(base, (side, side), interpolation=cv2.INTER_CUBIC)
    u, w = segmentation_problem(img, connectivity=8)
    e = vc.grid_energy(u, weights=w, connectivity=8)
    ref = vc.maxflow_grid(e, backend="cpu").flow
    cfgs = []
    for tile, bt, it, spr, tail in itertools.product(
        tiles2, bfs_tiles, args.rounds, args.sweeps, args.tail_iters
    ):
        cfg = dict(tile=tile, bfs_tile=bt, local_iters=it, sweeps_per_relabel=spr)
        if tail:
            cfg["tail_iters"] = tail
        cfgs.append(cfg)
    run(f"{side}^2 8-conn", e, cfgs, ref)
for n, c in ((128, c) for c in args.volumes):
    u, w = volume_problem(n, connectivity=c)
    e = vc.grid_energy(u, weights=w, connectivity=c)
    ref = vc.maxflow_grid(e, backend="cpu").flow
    cfgs = []
    for tile, bt, it, spr in itertools.product(
        [(8, 8, 4), (8, 4, 4), (16, 4, 4), (8, 8, 8)],
        [(16, 4, 4), (8, 8, 4), (8, 8, 8)],
        [8, 16, 32],
        [1, 2],
    ):
        cfgs.append(
            dict(tile=tile, bfs_tile=bt, local_iters=it, sweeps_per_relabel=spr)
        )
    run(f"{n}^3 {c}-conn", e, cfgs, ref)
json.dump(res, open(f"{OUT}/tune_diag.json", "w"), indent=1)
