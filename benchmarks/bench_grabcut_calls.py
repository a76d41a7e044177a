"""GrabCut on the GPU, call by call: the first call on every picture and box, not
only the warm median.

A user feels the first call on a new picture. The GPU path used to compile CuPy
kernels in the middle of a session whenever a picture took a new form of work (a box
spanning the full width made CuPy views of the window collapse to fewer dimensions;
larger pictures took other scans): 0.5-2.9 s on that call. This benchmark starts
with an empty CuPy kernel cache (``CUPY_CACHE_DIR`` in a temporary folder, sources
saved), makes one warm-up call on the smallest shared picture, and then times every
shared picture in every setting (box only, box with each scribble set) and synthetic
boxes that span the full width or height, scribbles without a box, a small box, and
1920x1080 pictures: the first call, the median of three, and the kernels compiled by
the call (by name). ``cv2.grabCut`` runs on the same pictures beside it (box only).

    python benchmarks/bench_grabcut_calls.py --json out.json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="folder holding grabcut/")
    ap.add_argument("--json", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    cache = tempfile.mkdtemp(prefix="vc-cupy-cache-")
    os.environ["CUPY_CACHE_DIR"] = cache  # before CuPy is imported
    os.environ["CUPY_CACHE_SAVE_CUDA_SOURCE"] = "1"

    import cupy
    import cv2

    from vision_cuts import grabcut
    from vision_cuts.datasets import grabcut as gc

    seen: set = set()

    def compiled() -> list:
        """Kernels compiled since the last call (names from the saved sources)."""
        names = []
        for f in sorted(glob.glob(cache + "/**/*.cu", recursive=True)):
            if f not in seen:
                seen.add(f)
                src = Path(f).read_text(errors="replace")
                found = re.findall(
                    r"__global__\s+(?:__launch_bounds__\([^)]*\)\s*)?void\s+(\w+)", src
                )
                names.append(found[0] if found else "?")
        return names

    def call(image, **kw) -> float:
        cupy.cuda.Device().synchronize()
        t = time.perf_counter()
        grabcut(image, backend="gpu", **kw)
        cupy.cuda.Device().synchronize()
        return (time.perf_counter() - t) * 1e3

    root = gc.data_root(args.data)
    samples = [gc.load_grabcut(n, root) for n in gc.grabcut_names(root)]
    small = min(samples, key=lambda s: s.gt.size)
    warm = call(small.image, rect=small.rect)
    warm_kernels = len(compiled())
    print(
        f"gpu: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}; warm-up on "
        f"{small.name}: {warm:.0f} ms, {warm_kernels} kernels compiled (once a machine)"
    )
    cases = []
    for s in samples:
        cases.append((s.name, "rect", s.image, {"rect": s.rect}))
        for key, (fg, bg) in sorted(s.scribbles.items()):
            kw = {"rect": s.rect, "foreground": fg, "background": bg}
            cases.append((s.name, key, s.image, kw))
    img = next(s.image for s in samples if s.name == "banana2")
    h, w = img.shape[:2]
    fg = np.zeros((h, w), bool)
    fg[200:220, 300:320] = True
    top = np.zeros((h, w), bool)
    top[:3, :] = True
    big = cv2.resize(img, (1920, 1080), interpolation=cv2.INTER_CUBIC)
    big_top = np.zeros((1080, 1920), bool)
    big_top[:4, :] = True
    cases += [
        ("synthetic", "full-height box", img, {"rect": (20, 0, 500, h)}),
        (
            "synthetic",
            "whole-picture box + scribbles",
            img,
            {"rect": (0, 0, w, h), "foreground": fg, "background": top},
        ),
        ("synthetic", "corner box", img, {"rect": (0, 0, 300, 200)}),
        ("synthetic", "scribbles only", img, {"foreground": fg, "background": top}),
        ("synthetic", "small box", img, {"rect": (100, 100, 40, 30)}),
        ("synthetic 1080p", "box", big, {"rect": (400, 100, 1100, 900)}),
        (
            "synthetic 1080p",
            "whole-picture box + scribbles",
            big,
            {"rect": (0, 0, 1920, 1080), "background": big_top},
        ),
    ]
    rows = []
    print(
        f"{'picture':16s} {'setting':30s} {'size':>9s} {'first ms':>9s} "
        f"{'median ms':>9s} {'cv2 ms':>8s}  compiled"
    )
    for name, setting, image, kw in cases:
        first = call(image, **kw)
        kernels = compiled()
        times = [first] + [call(image, **kw) for _ in range(args.repeat - 1)]
        cv2_ms = None
        if setting == "rect":
            bgr = np.ascontiguousarray(image[..., ::-1])
            mask = np.zeros(image.shape[:2], np.uint8)
            z = np.zeros((1, 65), np.float64)
            cv2.setRNGSeed(0)
            t = time.perf_counter()
            cv2.grabCut(bgr, mask, kw["rect"], z, z.copy(), 5, cv2.GC_INIT_WITH_RECT)
            cv2_ms = (time.perf_counter() - t) * 1e3
        row = {
            "picture": name,
            "setting": setting,
            "size": f"{image.shape[1]}x{image.shape[0]}",
            "first_ms": first,
            "median_ms": statistics.median(times),
            "cv2_ms": cv2_ms,
            "compiled": kernels,
        }
        rows.append(row)
        print(
            f"{name:16s} {setting:30s} {row['size']:>9s} {first:9.1f} "
            f"{row['median_ms']:9.1f} {'' if cv2_ms is None else f'{cv2_ms:8.0f}':>8s}"
            f"  {len(kernels)} {' '.join(kernels)[:120]}",
            flush=True,
        )
    for label, pick in (
        ("shared pictures, box only", lambda r: r["setting"] == "rect"),
        (
            "shared pictures, every setting",
            lambda r: (
                r["picture"] != "synthetic" and not r["picture"].startswith("synthetic")
            ),
        ),
        ("640x480-size calls, all", lambda r: not r["picture"].endswith("1080p")),
    ):
        sel = [r for r in rows if pick(r)]
        med = statistics.median(r["median_ms"] for r in sel)
        worst = max(sel, key=lambda r: r["first_ms"])
        print(
            f"{label}: {len(sel)} calls, median {med:.1f} ms, worst first call "
            f"{worst['first_ms']:.1f} ms ({worst['picture']} {worst['setting']}, "
            f"{worst['first_ms'] / med:.2f}x the median), worst median "
            f"{max(r['median_ms'] for r in sel):.1f} ms; kernels compiled after the "
            f"warm-up: {sum(len(r['compiled']) for r in sel)}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"warm_up_ms": warm, "warm_up_kernels": warm_kernels, "calls": rows},
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
