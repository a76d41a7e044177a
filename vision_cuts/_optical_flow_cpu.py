"""CPU stages of the optical flow pipeline compiled with numba.

:func:`pair_costs` finds the candidate pairs of one assignment pass for binary
descriptors: the features of frame 1 are binned into square cells at least as wide as
the search radius (wider where the radius is tiny, so that the grid has at most
``_MAX_CELLS`` cells a side), every feature of frame 0 visits the 3 x 3 cells around
its predicted position, and each pair within the radius gets the cost of
``optical_flow._candidates`` (the fraction of differing bits plus the displacement
penalty; the popcount on 64-bit words). One pass counts the pairs of every row, a
second writes them, so the output is allocated once.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["kd_groups", "pair_costs"]

#: Most grid cells a side: a radius far below a pixel would otherwise ask for cells
#: by the billion (memory) or, divided into the positions, overflow their index.
_MAX_CELLS = 1024


@nb.njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + (
        (x >> np.uint64(2)) & np.uint64(0x3333333333333333)
    )
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return int((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@nb.njit(cache=True, nogil=True)
def _scan(
    p0,
    pred,
    p1,
    d0,
    d1,
    nbits,
    radius,
    weight,
    cell_size,
    order,
    start,
    gw,
    gh,
    counts,
    rows,
    cols,
    costs,
):
    """Count (``counts`` given, ``rows`` empty) or write the pairs of every row."""
    n = p0.shape[0]
    words = d0.shape[1]
    r2 = radius * radius
    write = rows.shape[0] > 0
    for i in range(n):
        tx = np.float32(p0[i, 0] + pred[i, 0])
        ty = np.float32(p0[i, 1] + pred[i, 1])
        cx = int(np.floor(tx / cell_size))
        cy = int(np.floor(ty / cell_size))
        k = counts[i] if write else 0
        c = 0
        for yy in range(max(cy - 1, 0), min(cy + 2, gh)):
            for xx in range(max(cx - 1, 0), min(cx + 2, gw)):
                cell = yy * gw + xx
                for s in range(start[cell], start[cell + 1]):
                    j = order[s]
                    dx = np.float64(p1[j, 0]) - np.float64(tx)
                    dy = np.float64(p1[j, 1]) - np.float64(ty)
                    dd = dx * dx + dy * dy
                    if dd > r2:
                        continue
                    if write:
                        ones = 0
                        for w in range(words):
                            ones += _popcount(d0[i, w] ^ d1[j, w])
                        desc = np.float32(ones) / np.float32(nbits)
                        rows[k + c] = i
                        cols[k + c] = j
                        costs[k + c] = np.float64(desc) + weight * np.sqrt(dd) / radius
                    c += 1
        if not write:
            counts[i] = c


def pair_costs(p0, pred, p1, desc0, desc1, radius: float, weight: float) -> tuple:
    """Every pair within ``radius`` of the predicted position, for packed binary
    descriptors (uint8 rows): ``(rows, cols, costs)`` (int64, int64, float64),
    rows ascending."""
    nbits = 8 * desc0.shape[1]
    pad = (-desc0.shape[1]) % 8
    d0 = np.ascontiguousarray(np.pad(desc0, ((0, 0), (0, pad)))).view(np.uint64)
    d1 = np.ascontiguousarray(np.pad(desc1, ((0, 0), (0, pad)))).view(np.uint64)
    p0 = np.ascontiguousarray(p0, np.float32)
    pred = np.ascontiguousarray(pred, np.float32)
    p1 = np.ascontiguousarray(p1, np.float32)
    # frame-1 features binned into square cells no narrower than the radius, so the
    # 3 x 3 cells around a target hold every feature within the radius of it, and
    # no narrower than 1 / _MAX_CELLS of the features' extent, so the grid stays
    # small (in float64, as the scan divides; negative positions, which a
    # prediction may give, fall outside the grid and are never candidates)
    extent = float(p1.max(initial=0.0)) + 1.0
    cell_size = max(float(radius), extent / _MAX_CELLS)
    cx = np.floor(p1[:, 0].astype(np.float64) / cell_size).astype(np.int64)
    cy = np.floor(p1[:, 1].astype(np.float64) / cell_size).astype(np.int64)
    gw = int(max(cx.max(initial=0), 0)) + 1
    gh = int(max(cy.max(initial=0), 0)) + 1
    inside = (cx >= 0) & (cy >= 0)
    cell = np.where(inside, cy * gw + cx, gw * gh)
    order = np.argsort(cell, kind="stable")
    start = np.searchsorted(cell[order], np.arange(gw * gh + 1))
    counts = np.zeros(len(p0), np.int64)
    empty_i = np.zeros(0, np.int64)
    empty_f = np.zeros(0, np.float64)
    args = (
        p0,
        pred,
        p1,
        d0,
        d1,
        nbits,
        float(radius),
        float(weight),
        cell_size,
        order,
        start,
        gw,
        gh,
    )
    _scan(*args, counts, empty_i, empty_i, empty_f)
    total = int(counts.sum())
    offsets = np.zeros(len(p0), np.int64)
    np.cumsum(counts[:-1], out=offsets[1:])
    rows = np.empty(total, np.int64)
    cols = np.empty(total, np.int64)
    costs = np.empty(total, np.float64)
    if total:
        _scan(*args, offsets, rows, cols, costs)
    return rows, cols, costs


@nb.njit(cache=True, nogil=True)
def _kd_split(points, size):
    n = points.shape[0]
    gid = np.zeros(n, np.int64)
    # the coordinates as unsigned integers in the order of the floats (sign flipped,
    # negative ones inverted), sorted by a stable radix sort, 8 bits a pass
    bits = points.view(np.uint32)
    keys = np.empty((n, 2), np.uint32)
    top_bit = np.uint32(0x80000000)
    for i in range(n):
        for a in range(2):
            b = bits[i, a]
            keys[i, a] = ~b if b & top_bit else b | top_bit
    # depth-first stack of cells, each a slice of `buf` (the features of the cell in
    # the order its parent sorted them)
    starts = np.empty(2 * n + 2, np.int64)
    stops = np.empty(2 * n + 2, np.int64)
    buf = np.arange(n).astype(np.int64)
    tmp = np.empty(n, np.int64)
    count = np.empty(257, np.int64)
    starts[0] = 0
    stops[0] = n
    top = 1
    g = 0
    while top > 0:
        top -= 1
        a = starts[top]
        b = stops[top]
        if b - a <= size:
            for k in range(a, b):
                gid[buf[k]] = g
            g += 1
            continue
        lo0 = hi0 = points[buf[a], 0]
        lo1 = hi1 = points[buf[a], 1]
        for k in range(a + 1, b):
            lo0 = min(lo0, points[buf[k], 0])
            hi0 = max(hi0, points[buf[k], 0])
            lo1 = min(lo1, points[buf[k], 1])
            hi1 = max(hi1, points[buf[k], 1])
        axis = 1 if (hi1 - lo1) > (hi0 - lo0) else 0
        for shift in range(0, 32, 8):
            count[:] = 0
            for k in range(a, b):
                count[((keys[buf[k], axis] >> shift) & 255) + 1] += 1
            for t in range(256):
                count[t + 1] += count[t]
            for k in range(a, b):
                d = (keys[buf[k], axis] >> shift) & 255
                tmp[a + count[d]] = buf[k]
                count[d] += 1
            buf[a:b] = tmp[a:b]
        half = (b - a) // 2
        # the upper half below the lower one: the lower half is split first
        starts[top] = a + half
        stops[top] = b
        starts[top + 1] = a
        stops[top + 1] = a + half
        top += 2
    return gid


def kd_groups(points: np.ndarray, size: int) -> np.ndarray:
    """Group of every point of a balanced k-d split into cells of at most ``size``
    points: every larger cell is halved across its longer side (a stable sort by
    that coordinate; the lower half is the first ``len // 2``), cells numbered
    depth first, lower half first."""
    # + 0.0 turns -0.0 into 0.0, which the integer keys would order apart
    pts = np.ascontiguousarray(points, dtype=np.float32) + np.float32(0.0)
    return _kd_split(pts, int(size))
