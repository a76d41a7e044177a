"""Optical flow over a video clip: frames per second and accuracy, with baselines.

The clip is a camera pan over a real picture (scikit-image's astronaut, upscaled;
``vision_cuts.datasets.synthetic.panning_clip``: translation, slow rotation and zoom),
640 x 480, so every pair has its exact flow. Runs, in one process:

* ``pairs``: ``optical_flow`` on every pair, as a loop of single calls;
* ``frames``: ``optical_flow_frames`` (each frame detected once, the next frame read
  and detected on a worker thread, each pair warm-started from the previous motion);
* baselines: ``cv2.DISOpticalFlow`` (medium) and ``cv2.calcOpticalFlowFarneback`` on
  the same grey frames.

Per method: pairs per second over the clip, median and worst time per pair, sparse EPE
at our matched points (ours) or dense EPE (baselines; ours too with ``--dense``).

    python benchmarks/bench_flow_video.py [--frames 150] [--backend cpu gpu] [--dense]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    import cv2
    from skimage import data

    from vision_cuts import optical_flow, optical_flow_frames
    from vision_cuts._backend import machine_description
    from vision_cuts.datasets.synthetic import panning_clip

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--backend", nargs="+", default=["cpu"])
    ap.add_argument("--dense", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    frames, flows = panning_clip(data.astronaut(), args.frames)
    greys = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames]
    print(f"machine: {machine_description()}; OpenCV {cv2.__version__}")
    print(f"clip: {len(frames)} frames of 640x480, {len(flows)} pairs\n")

    def sparse_epe(res, gt):
        p = np.asarray(res.points).astype(np.int64)
        v = np.asarray(res.vectors)
        return float(np.linalg.norm(v - gt[p[:, 1], p[:, 0]], axis=1).mean())

    def dense_epe(f, gt):
        return float(np.linalg.norm(np.asarray(f) - gt, axis=2)[8:-8, 8:-8].mean())

    rows = []

    def record(name, times, results, dense_fn=None, sparse=True):
        total = sum(times)
        row = {
            "method": name,
            "pairs_per_s": len(times) / total,
            "median_ms": 1e3 * float(np.median(times)),
            "worst_ms": 1e3 * float(np.max(times)),
            "p95_ms": 1e3 * float(np.percentile(times, 95)),
            "worst_pair": int(np.argmax(times)),
            "worst_after_first_ms": 1e3 * float(np.max(times[1:]))
            if len(times) > 1
            else float("nan"),
        }
        if sparse:
            row["sparse_epe"] = float(
                np.mean([sparse_epe(r, g) for r, g in zip(results, flows, strict=True)])
            )
            row["points"] = float(np.mean([len(r.points) for r in results]))
        if dense_fn is not None:
            row["dense_epe"] = float(
                np.mean(
                    [
                        dense_epe(dense_fn(r), g)
                        for r, g in zip(results, flows, strict=True)
                    ]
                )
            )
        rows.append(row)
        print(
            f"| {name} | {row['pairs_per_s']:.1f} | {row['median_ms']:.1f} | "
            f"{row['worst_ms']:.1f} (pair {row['worst_pair']}) | "
            f"{row['p95_ms']:.1f} | {row['worst_after_first_ms']:.1f} | "
            f"{row.get('sparse_epe', float('nan')):.3f} | "
            f"{row.get('points', float('nan')):.0f} | "
            f"{row.get('dense_epe', float('nan')):.3f} |",
            flush=True,
        )

    print(
        "| method | pairs/s | median ms | worst ms | p95 ms | worst after the first ms "
        "| sparse EPE | points | dense EPE |"
    )
    print("|---" * 9 + "|")
    for backend in args.backend:
        kw = {"backend": backend, "dense": args.dense}
        optical_flow(frames[0], frames[1], **kw)  # warm-up: compilation, caches
        times, results = [], []
        for t in range(len(flows)):
            t0 = time.perf_counter()
            results.append(optical_flow(frames[t], frames[t + 1], **kw))
            times.append(time.perf_counter() - t0)
        dense_fn = (lambda r: r.dense) if args.dense else None
        record(f"pairs ({backend})", times, results, dense_fn)
        times, results = [], []
        t0 = time.perf_counter()
        for res in optical_flow_frames(frames, **kw):
            results.append(res)
            t1 = time.perf_counter()
            times.append(t1 - t0)
            t0 = t1
        record(f"frames ({backend})", times, results, dense_fn)
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    for name, fn in [
        ("DIS medium", lambda a, b: dis.calc(a, b, None)),
        (
            "Farneback",
            lambda a, b: cv2.calcOpticalFlowFarneback(
                a, b, None, 0.5, 3, 15, 3, 5, 1.2, 0
            ),
        ),
    ]:
        times, results = [], []
        for t in range(len(flows)):
            t0 = time.perf_counter()
            results.append(fn(greys[t], greys[t + 1]))
            times.append(time.perf_counter() - t0)
        record(name, times, results, lambda f: f, sparse=False)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine_description(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
