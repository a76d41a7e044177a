"""The ``"fast-brief"`` feature detector of :func:`vision_cuts.optical_flow`.

A detector made of integer steps, so that the CPU (this module, numba) and the device
(``_fast_brief_gpu``, ``kernels/fast_brief.cu``) find the same features, bit for
bit. For a grey uint8 frame of ``h x w``:

1. Two scales: the frame (level 0) and the frame resized by 5 / 6 (level 1, ``H1 =
   (5 h + 3) // 6`` rows, ``W1`` likewise) by bilinear interpolation in integers:
   output pixel ``X`` samples the source at ``(12 X + 1) / 10`` (pixel centres
   aligned), ``x0 = (12 X + 1) // 10`` with weights ``10 - f`` and ``f = (12 X + 1)
   % 10`` (tenths; indices clamped to the frame), the same for ``Y``, and the value
   is ``(sum of the four weighted pixels + 50) // 100``.
2. FAST-9 on each level (Rosten and Drummond 2006): for the 16 pixels of the
   radius-3 circle, ``d_k = I_k - I_p``; the score is the largest, over the 16 arcs
   of 9 consecutive circle pixels, of ``max(min d, min -d)`` over the arc; the pixel
   is a corner when the score exceeds ``FAST_THRESHOLD``. Non-maximum suppression
   keeps a corner whose score is above all eight neighbours' (0 for non-corners);
   corners closer than ``BORDER`` px to the level's edge are dropped.
3. Harris response (Harris and Stephens 1988) in integers: ``gx, gy`` the 3 x 3
   Sobel derivatives, ``A, B, C`` the sums of ``gx^2, gx gy, gy^2`` over the 7 x 7
   window around the corner, response ``25 (A C - B^2) - (A + C)^2`` (k = 0.04, times
   25).
4. A corner of level 1 at ``(X, Y)`` stands for the full-size position ``((12 X + 1)
   / 10, (12 Y + 1) / 10)``; it is dropped when a level-0 corner lies within 3 px
   (the same corner found twice; compared in integers, tenths of a pixel).
5. The corners are spread over the frame as ``optical_flow._spread`` does (rounds
   over square cells, strongest first), with every tie broken by the corner's index
   (level 0: ``y w + x``; level 1: ``h w + Y W1 + X``), so the order is total. (The
   corners are listed in the order of that index, so stable sorts break the ties.)
6. BRIEF (Calonder et al. 2010): 256 intensity tests, fixed once by a seeded draw
   from an isotropic Gaussian (sigma 31 / 5 px, clipped to the 31 x 31 patch), on
   the level smoothed by the 7-tap kernel ``[18, 34, 49, 54, 49, 34, 18]`` (sigma
   about 2; clamped borders; kept as unnormalised integer sums), unsteered (video
   frames hardly rotate); bit ``i`` is set when the first point of test ``i`` is
   darker than the second, packed as :func:`numpy.packbits` does.

Each step is one simple kernel on the device. Chosen by measurement against ORB
(BENCHMARKS.md, ``benchmarks/explore_detector.py``): more points than ORB on every
Middlebury sequence and on the video clip; sparse EPE lower or equal on three
sequences and higher on Hydrangea and Urban2, dense EPE equal or lower on all five.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = [
    "BORDER",
    "FAST_THRESHOLD",
    "PATTERN",
    "detect",
    "level_size",
    "pooled",
    "spread",
]

FAST_THRESHOLD = 5  # grey levels
BORDER = 16  # px kept free at a level's edge: the 31 x 31 test patch plus smoothing
DEDUP_TENTHS = 30  # a level-1 corner within 3 px of a level-0 corner is dropped
PER_CELL = 4  # wanted features per spreading cell (``optical_flow._PER_CELL``)
#: the smoothing kernel of the descriptor (sums to 256)
SMOOTH = np.array([18, 34, 49, 54, 49, 34, 18], np.int32)
#: the 256 tests (dx1, dy1, dx2, dy2)
PATTERN = np.clip(
    np.rint(np.random.default_rng(12345).normal(0, 31 / 5, (256, 4))), -15, 15
).astype(np.int32)
#: the circle of FAST: (dx, dy) in order around it
CIRCLE = np.array(
    [
        (0, -3), (1, -3), (2, -2), (3, -1), (3, 0), (3, 1), (2, 2), (1, 3),
        (0, 3), (-1, 3), (-2, 2), (-3, 1), (-3, 0), (-3, -1), (-2, -2), (-1, -3),
    ],
    np.int32,
)  # fmt: skip


def level_size(h: int, w: int) -> tuple:
    """(rows, cols) of level 1."""
    return (5 * h + 3) // 6, (5 * w + 3) // 6


@nb.njit(cache=True, nogil=True, inline="always")
def _taps(i, n):
    """Source taps of output index ``i`` of the 5/6 resize: ``(i0, i1, w1)``, the
    sample at (12 i + 1) / 10 in tenths, indices clamped to ``n``."""
    f = 12 * i + 1
    i0 = f // 10
    return min(i0, n - 1), min(i0 + 1, n - 1), f % 10


@nb.njit(cache=True, nogil=True)
def _resize(src, dst):
    h, w = src.shape
    H, W = dst.shape
    for Y in range(H):
        y0, y1, wy1 = _taps(Y, h)
        for X in range(W):
            x0, x1, wx1 = _taps(X, w)
            top = (10 - wx1) * np.int32(src[y0, x0]) + wx1 * np.int32(src[y0, x1])
            bot = (10 - wx1) * np.int32(src[y1, x0]) + wx1 * np.int32(src[y1, x1])
            dst[Y, X] = ((10 - wy1) * top + wy1 * bot + 50) // 100


@nb.njit(cache=True, nogil=True)
def _fast_scores(img, xs, ys, circle, out):
    """FAST-9 scores of the corners at ``(xs, ys)`` written into ``out``."""
    d = np.empty(25, np.int32)  # the circle's differences, the first 9 repeated
    for n in range(len(xs)):
        x = xs[n]
        y = ys[n]
        p = np.int32(img[y, x])
        for k in range(16):
            d[k] = np.int32(img[y + circle[k, 1], x + circle[k, 0]]) - p
        for k in range(9):
            d[16 + k] = d[k]
        best = 0
        for k in range(16):
            lo = d[k]
            hi = d[k]
            for j in range(k + 1, k + 9):
                lo = min(lo, d[j])
                hi = max(hi, d[j])
            best = max(best, lo, -hi)
        out[y, x] = best


def _scores(img: np.ndarray) -> np.ndarray:
    """FAST-9 score image of a level (0 where there is no corner). OpenCV's FAST
    finds the corners (its segment test is step 2's, without the suppression); the
    scores are computed here."""
    import cv2

    keypoints = cv2.FastFeatureDetector_create(FAST_THRESHOLD, False).detect(img)
    score = np.zeros(img.shape, np.int32)
    if keypoints:
        xy = cv2.KeyPoint_convert(keypoints).reshape(-1, 2).astype(np.int32)
        _fast_scores(img, xy[:, 0], xy[:, 1], CIRCLE, score)
    return score


@nb.njit(cache=True, nogil=True, inline="always")
def _sobel(img, y, x):
    gx = (
        np.int64(img[y - 1, x + 1])
        + 2 * np.int64(img[y, x + 1])
        + np.int64(img[y + 1, x + 1])
        - np.int64(img[y - 1, x - 1])
        - 2 * np.int64(img[y, x - 1])
        - np.int64(img[y + 1, x - 1])
    )
    gy = (
        np.int64(img[y + 1, x - 1])
        + 2 * np.int64(img[y + 1, x])
        + np.int64(img[y + 1, x + 1])
        - np.int64(img[y - 1, x - 1])
        - 2 * np.int64(img[y - 1, x])
        - np.int64(img[y - 1, x + 1])
    )
    return gx, gy


@nb.njit(cache=True, nogil=True)
def _corners(img, score, border):
    """(x, y, response) of the corners kept by the non-maximum suppression at least
    ``border`` px from the edge, in raster order."""
    H, W = img.shape
    cap = max((H * W) // 4 + 1, 1)
    xs = np.empty(cap, np.int32)
    ys = np.empty(cap, np.int32)
    rs = np.empty(cap, np.int64)
    n = 0
    for y in range(border, H - border):
        for x in range(border, W - border):
            s = score[y, x]
            if s == 0:
                continue
            if (
                score[y - 1, x - 1] >= s
                or score[y - 1, x] >= s
                or score[y - 1, x + 1] >= s
                or score[y, x - 1] >= s
                or score[y, x + 1] >= s
                or score[y + 1, x - 1] >= s
                or score[y + 1, x] >= s
                or score[y + 1, x + 1] >= s
            ):
                continue
            A = np.int64(0)
            B = np.int64(0)
            C = np.int64(0)
            for yy in range(y - 3, y + 4):
                for xx in range(x - 3, x + 4):
                    gx, gy = _sobel(img, yy, xx)
                    A += gx * gx
                    B += gx * gy
                    C += gy * gy
            xs[n] = x
            ys[n] = y
            rs[n] = 25 * (A * C - B * B) - (A + C) * (A + C)
            n += 1
    return xs[:n], ys[:n], rs[:n]


@nb.njit(cache=True, nogil=True)
def _duplicates(xs1, ys1, mask0, tenths):
    """Which level-1 corners lie within 3 px of a level-0 corner (``mask0``)."""
    h, w = mask0.shape
    out = np.zeros(len(xs1), np.bool_)
    for i in range(len(xs1)):
        fx = 12 * np.int64(xs1[i]) + 1
        fy = 12 * np.int64(ys1[i]) + 1
        reach = tenths // 10 + 1
        for yf in range(max((fy - tenths) // 10, 0), min(fy // 10 + reach + 1, h)):
            dy = fy - 10 * yf
            for xf in range(max((fx - tenths) // 10, 0), min(fx // 10 + reach + 1, w)):
                dx = fx - 10 * xf
                if mask0[yf, xf] and dx * dx + dy * dy < tenths * tenths:
                    out[i] = True
    return out


def _smooth(img: np.ndarray) -> np.ndarray:
    """The level smoothed for the descriptor: unnormalised sums (float32 holds
    them exactly: at most 255 * 256**2 < 2**24), clamped borders."""
    import cv2

    k = SMOOTH.astype(np.float32)
    return cv2.sepFilter2D(img, cv2.CV_32F, k, k, borderType=cv2.BORDER_REPLICATE)


@nb.njit(cache=True, nogil=True)
def _describe(smooth, xs, ys, pattern, out):
    for i in range(len(xs)):
        x = xs[i]
        y = ys[i]
        for b in range(32):
            v = 0
            for j in range(8):
                t = 8 * b + j
                a = smooth[y + pattern[t, 1], x + pattern[t, 0]]
                c = smooth[y + pattern[t, 3], x + pattern[t, 2]]
                if a < c:
                    v |= 1 << (7 - j)
            out[i, b] = v


def spread(px, py, resp, frame, sizes, shape, count: int, xp=np) -> list:
    """The corners kept per frame, spread over it (see the module docstring).

    ``px, py`` (float32 full-size positions), ``resp`` (responses) and ``frame``
    (which frame, ascending) hold the corners of ``len(sizes)`` frames of ``shape``,
    ``sizes[f]`` of frame ``f``, each frame's in ascending order of their unique
    index; NumPy or CuPy (``xp``) arrays. Returns, per frame, the positions (in
    these arrays) of at most ``count`` corners in the spreading order. Every sort
    is a stable argsort of one integer key, so ties fall to the earlier corner.
    """
    h, w = shape
    n = len(resp)
    cell = max(8.0, float(np.sqrt(h * w * PER_CELL / count)))
    cols = int(w // cell) + 2
    cells = (int(h // cell) + 2) * cols
    cx = xp.floor(px.astype(xp.float64) / cell).astype(xp.int64)
    cy = xp.floor(py.astype(xp.float64) / cell).astype(xp.int64)
    cid = frame.astype(xp.int64) * cells + cy * cols + cx
    # the sort keys in 32 bits where they fit (half the radix passes on the device)
    frames = len(sizes)
    narrow = xp.int32 if max(frames * cells, frames * n) * n < 2**31 else xp.int64
    # strength: the response, descending, then the index
    strongest = xp.argsort(-resp, kind="stable")
    strength = xp.empty(n, dtype=xp.int64)
    strength[strongest] = xp.arange(n)
    # by cell, strongest first
    order = xp.argsort((cid * n + strength).astype(narrow), kind="stable")
    cid_sorted = cid[order]
    new = xp.ones(n, dtype=bool)
    new[1:] = cid_sorted[1:] != cid_sorted[:-1]
    start = xp.flatnonzero(new)
    # rank within the cell: position minus the start of its run
    rank = xp.arange(n) - start[xp.cumsum(new) - 1]
    key = (frame[order].astype(xp.int64) * n + rank) * n + strength[order]
    key = key.astype(narrow)
    picked = order[xp.argsort(key, kind="stable")]
    out, first = [], 0
    for size in sizes:
        out.append(picked[first : first + min(count, size)])
        first += size
    return out


def pooled(level0: tuple, level1: tuple, xp=np) -> tuple:
    """The corners of both levels, ``(x, y, response)`` each (level 1 without its
    duplicates), in one list: full-size positions ``px, py`` (float32) and the
    responses; NumPy or CuPy (``xp``)."""
    (x0, y0, r0), (x1, y1, r1) = level0, level1
    f32 = xp.float32
    px = xp.concatenate([x0.astype(f32), ((12 * x1 + 1) / 10).astype(f32)])
    py = xp.concatenate([y0.astype(f32), ((12 * y1 + 1) / 10).astype(f32)])
    return px, py, xp.concatenate([r0, r1])


def detect(grey: np.ndarray, max_features: int) -> tuple:
    """``(points, desc)``: at most ``max_features`` features of a grey uint8 frame,
    (n, 2) float32 ``(x, y)`` full-size positions and (n, 32) uint8 descriptors,
    in the spreading order."""
    grey = np.ascontiguousarray(grey, dtype=np.uint8)
    h, w = grey.shape
    H1, W1 = level_size(h, w)
    small = np.empty((H1, W1), np.uint8)
    _resize(grey, small)
    found = []
    for img in (grey, small):
        found.append(_corners(img, _scores(img), BORDER))
    (x0, y0, r0), (x1, y1, r1) = found
    mask0 = np.zeros((h, w), np.bool_)
    mask0[y0, x0] = True
    keep = ~_duplicates(x1, y1, mask0, DEDUP_TENTHS)
    x1, y1, r1 = x1[keep], y1[keep], r1[keep]
    if len(x0) + len(x1) == 0:
        return np.zeros((0, 2), np.float32), np.zeros((0, 32), np.uint8)
    px, py, resp = pooled((x0, y0, r0), (x1, y1, r1), xp=np)
    frame = np.zeros(len(px), np.int32)
    (pick,) = spread(px, py, resp, frame, [len(px)], (h, w), max_features)
    desc = np.empty((len(pick), 32), np.uint8)
    on0 = pick < len(x0)
    for level, img, xs, ys, sel in (
        (0, grey, x0, y0, pick[on0]),
        (1, small, x1, y1, pick[~on0] - len(x0)),
    ):
        if len(sel):
            part = np.empty((len(sel), 32), np.uint8)
            _describe(_smooth(img), xs[sel], ys[sel], PATTERN, part)
            desc[on0 if level == 0 else ~on0] = part
    points = np.stack([px[pick], py[pick]], axis=1)
    return points, desc
