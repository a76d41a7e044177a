"""Where optical_flow's time goes, on one Middlebury pair after a warm-up.

Default: cProfile. ``--stages``: wall time of every pipeline stage (the device
synchronised around each, so that GPU work is charged to the stage that launched
it), median over ``--repeat`` runs.

python benchmarks/profile_flow.py [--sequence Urban2] [--backend gpu] [--dense]
                                  [--stages] [--repeat 5]
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import pstats
import time
from collections import defaultdict

import numpy as np

from vision_cuts import optical_flow
from vision_cuts.datasets import middlebury_flow as mf
from vision_cuts.optical_flow import DETECTORS

# (module, attribute) of the stages timed by --stages
_STAGES = [
    ("vision_cuts.optical_flow", "_features_of_pair"),
    ("vision_cuts._fast_brief", "detect"),
    ("vision_cuts.optical_flow", "_feature_groups"),
    ("vision_cuts.optical_flow", "_groups"),
    ("vision_cuts.optical_flow", "_candidates"),
    ("vision_cuts._optical_flow_gpu", "upload"),
    ("vision_cuts._optical_flow_gpu", "pair_cost_matrix"),
    ("vision_cuts._optical_flow_gpu", "stack_from_matrix"),
    ("vision_cuts.optical_flow", "_build_stack"),
    ("vision_cuts.optical_flow", "linear_sum_assignment_batched"),
    ("vision_cuts._optical_flow_gpu", "solve"),
    ("vision_cuts._optical_flow_gpu", "matches"),
    ("vision_cuts.optical_flow", "_matches"),
    ("vision_cuts.optical_flow", "_median_near"),
    ("vision_cuts._optical_flow_gpu", "upload_frame"),
    ("vision_cuts._optical_flow_gpu", "refine"),
    ("vision_cuts.optical_flow", "_refine"),
    ("vision_cuts.optical_flow", "_interpolate"),
    ("vision_cuts.optical_flow", "_pyramid"),
    ("vision_cuts._optical_flow_gpu", "dense"),
    ("vision_cuts.optical_flow", "_variational"),
    ("vision_cuts.optical_flow", "_fuse"),
    ("vision_cuts.optical_flow", "_start_dis"),
]


def _sync() -> None:
    try:
        import cupy

        cupy.cuda.Device().synchronize()
    except Exception:  # no device: nothing to wait for
        pass


def stage_times(f0, f1, backend, dense, repeat, detector="fast-brief") -> dict:
    totals: dict = defaultdict(list)
    current: dict = defaultdict(float)
    depth = [0]

    def wrap(name, fn):
        def timed(*a, **k):
            if depth[0]:
                return fn(*a, **k)
            depth[0] += 1
            _sync()
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                _sync()
                current[name] += time.perf_counter() - t
                depth[0] -= 1

        return timed

    saved = []
    for mod_name, attr in _STAGES:
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        if hasattr(mod, attr):
            saved.append((mod, attr, getattr(mod, attr)))
            setattr(mod, attr, wrap(attr, getattr(mod, attr)))
    try:
        optical_flow(f0, f1, backend=backend, dense=dense, detector=detector)  # warm-up
        for _ in range(repeat):
            current.clear()
            _sync()
            t = time.perf_counter()
            optical_flow(f0, f1, backend=backend, dense=dense, detector=detector)
            _sync()
            current["total"] = time.perf_counter() - t
            for k, v in current.items():
                totals[k].append(v)
    finally:
        for mod, attr, fn in saved:
            setattr(mod, attr, fn)
    return {k: 1e3 * float(np.median(v)) for k, v in totals.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None)
    ap.add_argument("--sequence", default="Urban2")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--dense", action="store_true")
    ap.add_argument("--detector", default="fast-brief", choices=DETECTORS)
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    f0, f1, _ = mf.load_flow(args.sequence, args.data)
    if args.stages:
        times = stage_times(
            f0, f1, args.backend, args.dense, args.repeat, args.detector
        )
        print(
            f"{args.sequence}, backend {args.backend}, detector {args.detector}, "
            f"dense {args.dense}: ms"
        )
        for k, v in sorted(times.items(), key=lambda kv: -kv[1]):
            print(f"  {k:32s} {v:8.2f}")
        rest = times["total"] - sum(v for k, v in times.items() if k != "total")
        print(f"  {'(outside the stages)':32s} {rest:8.2f}")
        return
    optical_flow(
        f0, f1, backend=args.backend, dense=args.dense, detector=args.detector
    )  # warm-up
    prof = cProfile.Profile()
    prof.enable()
    optical_flow(f0, f1, backend=args.backend, dense=args.dense, detector=args.detector)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
