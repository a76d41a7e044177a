"""The CPU cost volume of :func:`vision_cuts.stereo_cost_volume`, a disparity's plane
at a time (numba).

Each plane is the value the NumPy definition gives, bit for bit:

- ``ad``: the mean over the channels of ``|left - right|`` in float32 (the channels
  summed in order, then divided by their count), ``right`` at ``max(x - d, 0)``;
- ``c = min(ad, t) / t`` in float32 (``t`` the truncation as float32);
- with a census weight ``w``: ``float64(c) + (w * hamming) / K`` in float64, the
  Hamming distance counted on census strings packed 64 bits a word.

The box filter stays :func:`scipy.ndimage.uniform_filter`, on the plane's dtype.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from ._optical_flow_cpu import _popcount

__all__ = ["census_words", "plane_costs"]


@nb.njit(cache=True, nogil=True)
def _pack(gray, radius, words):
    m, n = gray.shape
    nw = words.shape[2]
    for y in range(m):
        for x in range(n):
            for w in range(nw):
                words[y, x, w] = 0
            g = gray[y, x]
            bit = 0
            for dy in range(-radius, radius + 1):
                yy = min(max(y + dy, 0), m - 1)
                for dx in range(-radius, radius + 1):
                    if dy == 0 and dx == 0:
                        continue
                    xx = min(max(x + dx, 0), n - 1)
                    if gray[yy, xx] < g:
                        words[y, x, bit >> 6] |= np.uint64(1) << np.uint64(bit & 63)
                    bit += 1


def census_words(gray: np.ndarray, radius: int) -> np.ndarray:
    """Census strings of a ``(2 radius + 1)^2`` window (edge pixels repeated), bit
    ``i`` set where the ``i``-th neighbour (row by row, the centre left out) is
    darker: a (M, N, W) uint64 array, ``W = ceil(K / 64)``."""
    k = (2 * radius + 1) ** 2 - 1
    words = np.empty((*gray.shape, -(-k // 64)), dtype=np.uint64)
    _pack(np.ascontiguousarray(gray), int(radius), words)
    return words


@nb.njit(cache=True, nogil=True)
def _plane(left, right, cl, cr, d, trunc, weight, k, out):
    m, n, ch = left.shape
    nw = cl.shape[2]
    count = np.float32(ch)
    for y in range(m):
        for x in range(n):
            xr = max(x - d, 0)
            s = np.float32(0.0)
            for c in range(ch):
                s += np.float32(abs(left[y, x, c] - right[y, xr, c]))
            ad = s / count
            v = min(ad, trunc) / trunc
            if weight != 0.0:
                ham = 0
                for w in range(nw):
                    ham += _popcount(cl[y, x, w] ^ cr[y, xr, w])
                out[y, x] = np.float64(v) + (weight * ham) / k
            else:
                out[y, x] = v


def plane_costs(
    left: np.ndarray,
    right: np.ndarray,
    cl: np.ndarray,
    cr: np.ndarray,
    bits: int,
    d: int,
    truncation: float,
    weight: float,
) -> np.ndarray:
    """The unfiltered matching costs of disparity ``d``: float32 (M, N, C) images,
    census words of :func:`census_words` holding ``bits`` bits. float64 with a
    census weight, else float32."""
    out = np.empty(left.shape[:2], dtype=np.float64 if weight else np.float32)
    _plane(
        left, right, cl, cr, int(d), np.float32(truncation), float(weight),
        float(bits), out,
    )  # fmt: skip
    return out
