"""Where one GrabCut call spends its time: cProfile of the host side (GPU work shows
up where the host waits for it), for a picture resized to ``--size``.

    python benchmarks/profile_grabcut.py --backend gpu --size 1920 1080
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import cv2
import skimage.data

from vision_cuts import grabcut, maxflow, segmentation


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--size", type=int, nargs=2, default=(1920, 1080))
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    w, h = args.size
    img = cv2.resize(skimage.data.coffee(), (w, h), interpolation=cv2.INTER_CUBIC)
    rect = (int(0.28 * w), int(0.1 * h), int(0.53 * w), int(0.65 * h))
    grabcut(img, rect=rect, backend=args.backend)  # warm-up: compile, caches
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        grabcut(img, rect=rect, backend=args.backend)
        times.append(time.perf_counter() - t0)
    runs = ", ".join(f"{t * 1e3:.1f}" for t in times)
    print(f"{w}x{h} {args.backend}: {runs} ms")
    # the cuts' share: wrap the solver calls of grabcut
    cuts: list = []
    # the GPU path calls maxflow._maxflow_warm, the CPU path segmentation.maxflow_grid
    hooks = ((maxflow, "_maxflow_warm"), (segmentation, "maxflow_grid"))
    for module, name in hooks:
        inner = getattr(module, name)

        def timed(*a, _inner=inner, **kw):
            t = time.perf_counter()
            out = _inner(*a, **kw)
            cut = out[0] if isinstance(out, tuple) and len(out) == 2 else out
            cuts.append((time.perf_counter() - t, cut.stats))
            return out

        setattr(module, name, timed)
    t0 = time.perf_counter()
    grabcut(img, rect=rect, backend=args.backend)
    total = time.perf_counter() - t0
    for module, name in hooks:
        wrapped = getattr(module, name)
        setattr(module, name, wrapped.__kwdefaults__["_inner"])
    cut_s = sum(c[0] for c in cuts)
    print(
        f"one call {total * 1e3:.1f} ms: {len(cuts)} cuts {cut_s * 1e3:.1f} ms "
        f"(each: {', '.join(f'{c[0] * 1e3:.1f}' for c in cuts)}; sweeps "
        f"{[c[1].get('sweeps') for c in cuts]}, relabels "
        f"{[c[1].get('global_relabels') for c in cuts]}, warm "
        f"{[c[1].get('warm_start') for c in cuts]}), the rest "
        f"{(total - cut_s) * 1e3:.1f} ms"
    )
    prof = cProfile.Profile()
    prof.enable()
    grabcut(img, rect=rect, backend=args.backend)
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
