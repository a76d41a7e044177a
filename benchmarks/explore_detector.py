"""Exploration: could a detector that ports to the device replace OpenCV's ORB?

The single-pair GPU latency of ``optical_flow`` is bound by ORB on the host (13 ms or
more per pair on the GPU hosts' Xeons, BENCHMARKS.md). A detector made of parts that
are each a simple kernel - FAST corners (threshold 5, non-maximum suppression), ranked
by the Harris response (7 x 7 block, k = 0.04), spread over the image as ``_features``
does, described by 256 unsteered intensity tests on a Gaussian-smoothed image (7 x 7,
sigma 2) drawn once from an isotropic Gaussian (sigma 31 / 5, clipped to the 31 x 31
patch; Calonder et al. 2010, sampling G II), on one scale or two (1 and 1 / 1.2) - is
run here on the CPU through the unchanged pipeline, beside ORB, on the Middlebury
pairs and the video clip of ``bench_flow_video.py``; the last variant drops the
corners that the coarser scale finds again. That variant became the built-in
``detector="fast-brief"`` (in integers, so the device finds the CPU's features; see
``vision_cuts/_fast_brief.py``), whose rows close the table.

python benchmarks/explore_detector.py [--data DIR]
"""

from __future__ import annotations

import argparse
import importlib

import cv2
import numpy as np

from vision_cuts.datasets import middlebury_flow as mf

of = importlib.import_module("vision_cuts.optical_flow")
_PAIRS = np.clip(
    np.rint(np.random.default_rng(12345).normal(0, 31 / 5, (256, 4))), -15, 15
).astype(np.int64)


def _describe(smooth: np.ndarray, pts: np.ndarray) -> np.ndarray:
    x = pts[:, 0].astype(np.int64)[:, None]
    y = pts[:, 1].astype(np.int64)[:, None]
    a = smooth[y + _PAIRS[:, 1], x + _PAIRS[:, 0]]
    b = smooth[y + _PAIRS[:, 3], x + _PAIRS[:, 2]]
    return np.packbits(a < b, axis=1)


def fast_brief(
    grey: np.ndarray,
    detector: str,
    max_features: int,
    scales=(1.0, 1 / 1.2),
    dedup: float = 0.0,
):
    """``optical_flow._features`` with FAST + Harris + BRIEF on ``scales``; with
    ``dedup`` > 0 a corner of a coarser scale within ``dedup`` px of one of the
    finest scale is dropped (the same corner found twice)."""
    from scipy.spatial import cKDTree

    h, w = grey.shape
    pts, resp, desc, level = [], [], [], []
    for k, s in enumerate(scales):
        g = grey
        if s != 1.0:
            g = cv2.resize(
                grey, (round(w * s), round(h * s)), interpolation=cv2.INTER_LINEAR
            )
        kps = cv2.FastFeatureDetector_create(threshold=5).detect(g, None)
        if len(kps) == 0:
            continue
        p = cv2.KeyPoint_convert(kps).reshape(-1, 2)
        gh, gw = g.shape
        keep = (p[:, 0] >= 16) & (p[:, 1] >= 16) & (p[:, 0] < gw - 16)
        p = p[keep & (p[:, 1] < gh - 16)]
        harris = cv2.cornerHarris(g, 7, 3, 0.04)
        pts.append(p / s)
        resp.append(harris[p[:, 1].astype(int), p[:, 0].astype(int)])
        desc.append(_describe(cv2.GaussianBlur(g, (7, 7), 2).astype(np.int16), p))
        level.append(np.full(len(p), k))
    p = np.concatenate(pts).astype(np.float32)
    resp, desc, level = map(np.concatenate, (resp, desc, level))
    if dedup > 0 and (level == 0).any() and (level > 0).any():
        fine = level == 0
        dist = cKDTree(p[fine]).query(p[~fine], k=1)[0]
        keep = np.ones(len(p), bool)
        keep[np.flatnonzero(~fine)[dist < dedup]] = False
        p, resp, desc = p[keep], resp[keep], desc[keep]
    order = of._spread(p, resp, grey.shape, max_features)
    return of._Features(p[order], np.ascontiguousarray(desc[order]), True)


def evaluate(label: str, data, detector: str = "orb") -> None:
    """The table rows of one detector (the variants replace ``_features``, whatever
    ``detector`` names; ``"fast-brief"`` is the built-in port of the last variant)."""
    for name in mf.flow_names():
        f0, f1, gt = mf.load_flow(name, data)
        r = of.optical_flow(f0, f1, backend="cpu", detector=detector)
        epe, n = mf.sparse_epe(r.points, r.vectors, gt)
        print(f"| {label} | {name} | {n} | {epe:.3f} |", flush=True)
    from skimage import data as skdata

    from vision_cuts.datasets.synthetic import panning_clip

    frames, flows = panning_clip(skdata.astronaut(), 150)
    pts, epe = [], []
    for t in range(0, 149, 6):
        r = of.optical_flow(frames[t], frames[t + 1], backend="cpu", detector=detector)
        p = r.points.astype(int)
        pts.append(len(r.points))
        epe.append(
            np.linalg.norm(r.vectors - flows[t][p[:, 1], p[:, 0]], axis=1).mean()
        )
    print(
        f"| {label} | clip (mean / fewest points) | {np.mean(pts):.0f} / {min(pts)} | "
        f"{np.mean(epe):.3f} |",
        flush=True,
    )


def main() -> None:
    import functools

    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None)
    args = ap.parse_args()
    print("| detector | sequence | points | sparse EPE |\n|---|---|---|---|")
    evaluate("ORB (2 levels)", args.data)
    evaluate("fast-brief (built in)", args.data, "fast-brief")
    saved = of._features
    try:
        for label, scales, dedup in [
            ("FAST + BRIEF, one scale", (1.0,), 0.0),
            ("FAST + BRIEF, two scales", (1.0, 1 / 1.2), 0.0),
            ("FAST + BRIEF, two scales, deduplicated 3 px", (1.0, 1 / 1.2), 3.0),
        ]:
            of._features = functools.partial(fast_brief, scales=scales, dedup=dedup)
            evaluate(label, args.data)
    finally:
        of._features = saved


if __name__ == "__main__":
    main()
