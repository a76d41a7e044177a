"""Where optical_flow's time goes: cProfile of one Middlebury pair after a warm-up.

python benchmarks/profile_flow.py [--sequence Urban2] [--backend gpu] [--dense]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats

from vision_cuts import optical_flow
from vision_cuts.datasets import middlebury_flow as mf


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None)
    ap.add_argument("--sequence", default="Urban2")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--dense", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    f0, f1, _ = mf.load_flow(args.sequence, args.data)
    optical_flow(f0, f1, backend=args.backend, dense=args.dense)  # warm-up
    prof = cProfile.Profile()
    prof.enable()
    optical_flow(f0, f1, backend=args.backend, dense=args.dense)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
