"""Where the GPU assignment's time goes on the optical flow's cost stacks.

    python benchmarks/diag_assignment_stall.py [--data DIR] [--sequences Urban2 ...]
        [--variants default no_gu ...]

The stacks are the ones ``optical_flow`` builds on the Middlebury pairs (captured from
the CPU pipeline: the global pass and the two local passes of each pair). Each runs
through the GPU solver's stages with its work counters (per phase: bids, global
updates, Bellman-Ford sweeps, list fallbacks, settles, time) under a few solver
settings; totals are checked against the CPU backend.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vision_cuts import _assignment_gpu as ag
from vision_cuts.assignment import linear_sum_assignment_batched

VARIANTS = {
    "default": {},
    "no_gu": {"GLOBAL_UPDATE": False},
    "gu1": {"GU_BIDS": 1},
    "alpha10": {"ROW_ALPHA": 10},
    "no_fix": {"ARC_FIXING": False},
}


def run(cp, stack, settings):
    saved = {k: getattr(ag, k) for k in settings}
    try:
        for k, v in settings.items():
            setattr(ag, k, v)
        x = cp.asarray(stack)
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        prep = ag.prepare(cp, x, False)
        col4row, prices, S, stats = ag.solve_scaled(cp, prep)
        rows, cols, status = ag.finish(cp, prep, col4row)
        cp.cuda.Device().synchronize()
        return time.perf_counter() - t0, rows.get(), cols.get(), stats, prep["plan"]
    finally:
        for k, v in saved.items():
            setattr(ag, k, v)


def capture(data, sequences) -> list:
    """The cost stacks of optical_flow's assignment passes on the CPU."""
    import importlib

    from vision_cuts.datasets import middlebury_flow as mf

    mod = importlib.import_module("vision_cuts.optical_flow")
    stacks: list = []
    batched = mod.linear_sum_assignment_batched

    def keep(s, **kw):
        stacks.append(np.array(s))
        return batched(s, **kw)

    mod.linear_sum_assignment_batched = keep
    try:
        for name in sequences:
            f0, f1, _ = mf.load_flow(name, data)
            mod.optical_flow(f0, f1, backend="cpu")
    finally:
        mod.linear_sum_assignment_batched = batched
    return stacks


def main() -> None:
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None, help="folder holding middlebury_flow/")
    ap.add_argument("--sequences", nargs="+", default=["Urban2", "RubberWhale"])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--budget", type=float, default=60.0, help="s per variant")
    args = ap.parse_args()
    stacks = capture(args.data, args.sequences)
    for name in args.variants:
        spent = 0.0
        for i, s in enumerate(stacks):
            if spent > args.budget:
                print(f"{name} stack {i}: skipped (budget)")
                continue
            t, rows, cols, st, plan = run(cp, s, VARIANTS[name])
            spent += t
            tot = s[np.arange(s.shape[0])[:, None], rows, cols].sum(1)
            r, c = linear_sum_assignment_batched(s, backend="cpu")
            opt = s[np.arange(s.shape[0])[:, None], r, c].sum(1)
            err = float(np.max(tot - opt))
            print(
                f"{name} stack {i} {s.shape} N={plan.N} smax={plan.smax} "
                f"{plan.cost_t} {1e3 * t:.1f} ms, max excess {err:.2e}; phases "
                f"{st['phases']} bids {st['bids']} GU {st['global_updates']} "
                f"sweeps {st['sweeps']} builds {st['list_builds']} fallbacks "
                f"{st['list_fallbacks']} ms {st['ms']}",
                flush=True,
            )
            for ph, p in enumerate(st["per_phase"]):
                print(f"    phase {ph}: {p}")


if __name__ == "__main__":
    main()
