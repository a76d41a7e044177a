"""The ``"fast-brief"`` detector on the device (kernels in ``kernels/fast_brief.cu``).

Step for step the integer definition of :mod:`vision_cuts._fast_brief` (its
docstring), so the device finds the CPU's features bit for bit; the spreading order
is the same NumPy code on CuPy arrays. The frames of a call are detected together:
the corners of every level of every frame are marked in one buffer and listed by
one ``flatnonzero`` (in the order of their indices, as the CPU lists them), so a
call synchronises with the host twice, whatever the number of frames.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _fast_brief as ref
from ._kernels import get_kernel, get_module

__all__ = ["detect"]


def _cp() -> Any:
    import cupy

    return cupy


def _grid(h: int, w: int) -> tuple:
    return ((w + 31) // 32, (h + 7) // 8, 1), (32, 8, 1)


def _blocks(total: int, threads: int = 256) -> tuple:
    return ((max(total, 1) + threads - 1) // threads,), (threads,)


def _smooth(mod: Any, img: Any) -> Any:
    cp = _cp()
    H, W = img.shape
    tmp = cp.empty((H, W), dtype=cp.int32)
    out = cp.empty((H, W), dtype=cp.int32)
    args = (np.int32(H), np.int32(W))
    get_kernel(mod, "fb_smooth_h")(*_blocks(H * W), (img, *args, tmp))
    get_kernel(mod, "fb_smooth_v")(*_blocks(H * W), (tmp, *args, out))
    return out


def detect(greys: list, max_features: int) -> list:
    """``[(points, desc), ...]`` of grey uint8 frames of one shape on the device
    (CuPy (h, w) arrays): (n, 2) float32 and (n, 32) uint8 CuPy arrays per frame,
    as ``_fast_brief.detect``."""
    cp = _cp()
    mod = get_module("fast_brief.cu")
    greys = [cp.ascontiguousarray(g, dtype=cp.uint8) for g in greys]
    h, w = greys[0].shape
    H1, W1 = ref.level_size(h, w)
    sizes = [h * w, H1 * W1]
    span = sizes[0] + sizes[1]
    kept = cp.zeros(len(greys) * span, dtype=cp.uint8)
    resp = cp.empty(len(greys) * span, dtype=cp.int64)
    levels = []
    for f, grey in enumerate(greys):
        small = cp.empty((H1, W1), dtype=cp.uint8)
        get_kernel(mod, "fb_resize")(
            *_grid(H1, W1),
            (grey, np.int32(h), np.int32(w), small, np.int32(H1), np.int32(W1)),
        )
        levels.append((grey, small))
        for level, img in enumerate((grey, small)):
            H, W = img.shape
            at = f * span + level * sizes[0]
            score = cp.empty((H, W), dtype=cp.int32)
            get_kernel(mod, "fb_score")(
                *_grid(H, W),
                (img, np.int32(H), np.int32(W), np.int32(ref.FAST_THRESHOLD), score),
            )
            get_kernel(mod, "fb_corners")(
                *_grid(H, W),
                (
                    img,
                    score,
                    np.int32(H),
                    np.int32(W),
                    np.int32(ref.BORDER),
                    kept[at:],
                    resp[at:],
                ),
            )
        get_kernel(mod, "fb_duplicates")(
            *_grid(H1, W1),
            (
                kept[f * span :],
                np.int32(h),
                np.int32(w),
                np.int32(ref.DEDUP_TENTHS),
                kept[f * span + sizes[0] :],
                np.int32(H1),
                np.int32(W1),
            ),
        )
    at = cp.flatnonzero(kept)  # every corner, by frame, level and index
    bounds = cp.asarray(np.arange(len(greys) + 1) * span)
    counts = np.diff(cp.searchsorted(at, bounds).get())
    local = at % span  # frame-local: level 0, then level 1
    level1 = local >= sizes[0]
    pixel = local - level1 * sizes[0]
    x = cp.where(level1, pixel % W1, pixel % w).astype(cp.int32)
    y = cp.where(level1, pixel // W1, pixel // w).astype(cp.int32)
    f32 = cp.float32
    px = cp.where(level1, ((12 * x + 1) / 10).astype(f32), x.astype(f32))
    py = cp.where(level1, ((12 * y + 1) / 10).astype(f32), y.astype(f32))
    frame = (at // span).astype(cp.int32)
    picks = ref.spread(px, py, resp[at], frame, counts, (h, w), max_features, xp=cp)
    pattern = cp.asarray(ref.PATTERN)
    out = []
    for (grey, small), pick in zip(levels, picks, strict=True):
        n = len(pick)
        desc = cp.empty((n, 32), dtype=cp.uint8)
        if n:
            get_kernel(mod, "fb_describe")(
                *_blocks(32 * n),
                (
                    _smooth(mod, grey),
                    np.int32(w),
                    _smooth(mod, small),
                    np.int32(W1),
                    x[pick],
                    y[pick],
                    level1[pick].astype(cp.int32),
                    np.int32(n),
                    pattern,
                    desc,
                ),
            )
        out.append((cp.stack([px[pick], py[pick]], axis=1), desc))
    return out
