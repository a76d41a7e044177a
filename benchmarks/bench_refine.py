"""Interactive GrabCut latency: the calls the desktop app makes on a ~1 MP picture.

A box cut (5 iterations), then strokes, each refining the previous result
(``grabcut(..., init=previous, iterations=2)``, as the Segment tab does), timed per
backend (median of ``--repeat`` after a warm-up), with ``cv2.grabCut`` refining the
same way (``GC_INIT_WITH_MASK`` from its previous mask plus the strokes, 2 iterations)
in the same run.

    python benchmarks/bench_refine.py --backend cpu gpu
"""

from __future__ import annotations

import argparse
import statistics
import time

import cv2
import numpy as np
import skimage.data

from vision_cuts import grabcut
from vision_cuts._backend import gpu_name, machine_description


def _strokes(shape: tuple) -> list:
    """Three strokes (object, background, background) as boolean masks."""
    h, w = shape
    out = []
    for y0, y1, x0, x1, fg in (
        (0.45, 0.48, 0.45, 0.60, True),
        (0.80, 0.83, 0.35, 0.50, False),
        (0.70, 0.73, 0.60, 0.72, False),
    ):
        m = np.zeros(shape, dtype=bool)
        m[int(y0 * h) : int(y1 * h), int(x0 * w) : int(x1 * w)] = True
        out.append((m, fg))
    return out


def _ours(img, rect, strokes, backend):
    times = []
    t0 = time.perf_counter()
    res = grabcut(img, rect=rect, backend=backend)
    times.append(time.perf_counter() - t0)
    fg = np.zeros(img.shape[:2], dtype=bool)
    bg = np.zeros(img.shape[:2], dtype=bool)
    for m, is_fg in strokes:
        (fg if is_fg else bg)[m] = True
        t0 = time.perf_counter()
        res = grabcut(
            img,
            rect=rect,
            foreground=fg if fg.any() else None,
            background=bg if bg.any() else None,
            iterations=2,
            init=res,
            backend=backend,
        )
        times.append(time.perf_counter() - t0)
    return times, res.mask


def _cv2(img, rect, strokes):
    bgr = np.ascontiguousarray(img[..., ::-1])
    mask = np.zeros(img.shape[:2], np.uint8)
    bgd, fgd = np.zeros((1, 65)), np.zeros((1, 65))
    times = []
    cv2.setRNGSeed(0)
    t0 = time.perf_counter()
    cv2.grabCut(bgr, mask, rect, bgd, fgd, 5, cv2.GC_INIT_WITH_RECT)
    times.append(time.perf_counter() - t0)
    for m, is_fg in strokes:
        mask[m] = cv2.GC_FGD if is_fg else cv2.GC_BGD
        t0 = time.perf_counter()
        cv2.grabCut(bgr, mask, rect, bgd, fgd, 2, cv2.GC_INIT_WITH_MASK)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", nargs="+", default=["cpu"], choices=["cpu", "gpu"])
    ap.add_argument("--size", type=int, nargs=2, default=(1280, 800))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    w, h = args.size
    img = cv2.resize(skimage.data.coffee(), (w, h), interpolation=cv2.INTER_CUBIC)
    rect = (int(0.28 * w), int(0.1 * h), int(0.53 * w), int(0.65 * h))
    strokes = _strokes((h, w))
    print(f"machine: {machine_description()}")
    if "gpu" in args.backend:
        print(f"gpu: {gpu_name()}")
    print(
        f"coffee resized to {w}x{h} ({w * h / 1e6:.2f} MP), box {rect}; a box cut "
        f"(5 iterations), then {len(strokes)} strokes, each refining the last result "
        f"(2 iterations); median of {args.repeat} after a warm-up, ms"
    )
    print(
        "method      box cut  "
        + "  ".join(f"stroke {i + 1}" for i in range(len(strokes))),
        flush=True,
    )

    def row(name: str, runs: list) -> None:
        ms = [statistics.median(c) * 1e3 for c in zip(*runs, strict=True)]
        print(f"{name:10s} " + "  ".join(f"{v:8.1f}" for v in ms), flush=True)

    for backend in args.backend:
        _ours(img, rect, strokes, backend)  # warm-up: compile, caches
        row(
            f"ours-{backend}",
            [_ours(img, rect, strokes, backend)[0] for _ in range(args.repeat)],
        )
    row("cv2", [_cv2(img, rect, strokes) for _ in range(args.repeat)])


if __name__ == "__main__":
    main()
