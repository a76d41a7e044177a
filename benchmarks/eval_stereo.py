"""Middlebury stereo: vision_cuts (expansion, Ishikawa) against cv2.StereoSGBM.

Protocol (DESIGN.md, "Evaluation protocols: Stereo"): left view as reference, bad-t =
% of the pixels with known GT whose error exceeds t px, invalid output counted as bad.
SGBM: mode HH, blockSize 5, P1 = 8*3*25, P2 = 32*3*25, numDisparities = max_disp
rounded up to a multiple of 16, minDisparity 0; its fixed-point output is divided by
16 and its negative (invalid) values count as bad.

Usage::

    python benchmarks/eval_stereo.py [--data DIR] [--sets tsukuba venus ...]
        [--methods expansion ishikawa sgbm] [--backend cpu] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from vision_cuts import stereo_disparity
from vision_cuts._backend import machine_description
from vision_cuts.datasets import middlebury as mb

METHODS = ("expansion", "ishikawa", "sgbm")


def sgbm_disparity(left: np.ndarray, right: np.ndarray, max_disp: int) -> np.ndarray:
    """cv2.StereoSGBM with the protocol's parameters; invalid output is -1."""
    import cv2

    num = int(np.ceil((max_disp + 1) / 16.0)) * 16
    matcher = cv2.StereoSGBM_create(
        minDisparity=0,
        numDisparities=num,
        blockSize=5,
        P1=8 * 3 * 25,
        P2=32 * 3 * 25,
        mode=cv2.STEREO_SGBM_MODE_HH,
    )
    raw = matcher.compute(
        np.ascontiguousarray(left[..., ::-1]), np.ascontiguousarray(right[..., ::-1])
    )
    d = raw.astype(np.float32) / 16.0
    d[raw < 0] = -1.0
    return d


def run(sample: mb.StereoSample, method: str, backend: str) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    if method == "sgbm":
        d = sgbm_disparity(sample.left, sample.right, sample.max_disp)
    else:
        d = stereo_disparity(
            sample.left,
            sample.right,
            max_disparity=sample.max_disp,
            method=method,
            backend=backend,
        )
    return d, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="folder holding middlebury_stereo/")
    ap.add_argument("--sets", nargs="+", default=mb.stereo_names())
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--backend", default="cpu", choices=("auto", "cpu", "gpu"))
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)

    rows = []
    for name in args.sets:
        sample = mb.load_stereo(name, args.data)
        for method in args.methods:
            d, secs = run(sample, method, args.backend)
            row = {
                "set": name,
                "method": method,
                "bad1": mb.bad_pixel_rate(d, sample.gt_disparity, 1.0),
                "bad2": mb.bad_pixel_rate(d, sample.gt_disparity, 2.0),
                "time_s": secs,
                "max_disp": sample.max_disp,
                "shape": list(sample.left.shape[:2]),
            }
            rows.append(row)
            print(
                f"{name:8s} {method:10s} bad-1.0 {row['bad1']:6.2f}%  "
                f"bad-2.0 {row['bad2']:6.2f}%  {secs:7.2f} s",
                flush=True,
            )
    means = {}
    for method in args.methods:
        sel = [r for r in rows if r["method"] == method]
        means[method] = {
            k: float(np.mean([r[k] for r in sel])) for k in ("bad1", "bad2", "time_s")
        }
    print("\nset       " + "".join(f"{m + ' b1/b2/s':>26s}" for m in args.methods))
    for name in args.sets:
        cells = []
        for method in args.methods:
            r = next(r for r in rows if r["set"] == name and r["method"] == method)
            cells.append(f"{r['bad1']:8.2f}{r['bad2']:8.2f}{r['time_s']:10.2f}")
        print(f"{name:10s}" + "".join(cells))
    print(
        f"{'mean':10s}"
        + "".join(
            f"{m['bad1']:8.2f}{m['bad2']:8.2f}{m['time_s']:10.2f}"
            for m in means.values()
        )
    )
    result = {
        "machine": machine_description(),
        "backend": args.backend,
        "rows": rows,
        "means": means,
    }
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return result


if __name__ == "__main__":
    main()
