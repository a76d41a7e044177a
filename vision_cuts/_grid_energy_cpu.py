"""The symmetric-weight grid energy's capacity arrays from NumPy inputs, in one pass.

:func:`vision_cuts.grid.grid_energy` with ``weights`` and no ``pairwise`` gives every
pair ``(p, p + e_d)`` the arcs ``w[d, p]`` both ways and every node the terminal
capacities ``unary[p, 1] - m``, ``unary[p, 0] - m`` (``m`` the smaller of the two).
On the host the array expression of that takes a dozen passes over the grid (casts to
int64, a maximum and a sign test per direction, the minimum, the differences, the
planes' copies); here a numba pass over the nodes and one over each direction's arcs
read the inputs in their own integer dtype, write the int32 results once and find the
values the checks need (the largest weight, the negative weights and the first of
them, terminal capacities beyond int32 and the first of them). The caller raises the
errors, with the same texts as the array expression's.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba as nb
import numpy as np

from ._maxflow_cpu import default_threads

INT32_MAX = np.int64(2**31 - 1)


@nb.njit(cache=True, nogil=True)
def _terminals(u, s, t):
    """``u``: (n, 2) unary costs; fills ``s`` / ``t`` (int32, where they fit).
    Returns (the constant's upper and lower 32-bit sums, first node whose source
    capacity exceeds int32 or -1, the same for the sink): the constant is
    ``upper * 2**32 + lower`` (n < 2**31: neither sum wraps, where one int64 sum of
    the minima would). A difference beyond int64 wraps negative: that counts as
    beyond int32 too (the caller computes the value with Python integers)."""
    upper = np.int64(0)
    lower = np.int64(0)
    bad_s = -1
    bad_t = -1
    for p in range(u.shape[0]):
        a = np.int64(u[p, 0])
        b = np.int64(u[p, 1])
        m = a if a < b else b
        upper += m >> 32
        lower += m & 0xFFFFFFFF
        sv = b - m
        tv = a - m
        if sv > INT32_MAX or sv < 0:
            if bad_s < 0:
                bad_s = p
            sv = 0
        if tv > INT32_MAX or tv < 0:
            if bad_t < 0:
                bad_t = p
            tv = 0
        s[p] = sv
        t[p] = tv
    return upper, lower, bad_s, bad_t


@nb.njit(cache=True, nogil=True)
def _arcs(wd, dz, dy, dx, nz, ny, nx, fwd, bwd):
    """One direction ``(dz, dy, dx)``: ``wd`` (n,) its weights; fills ``fwd`` /
    ``bwd`` (n,), zeros on entry, with ``wd`` at the tail of every existing arc and at
    its head. Returns (largest weight, count of negative weights, the first one's node
    index in C order or -1) over the entries that couple a pair."""
    wmax = np.int64(0)
    nneg = np.int64(0)
    first = -1
    off = (dz * ny + dy) * nx + dx
    z0 = 0 if dz >= 0 else -dz
    z1 = nz - dz if dz >= 0 else nz
    y0 = 0 if dy >= 0 else -dy
    y1 = ny - dy if dy >= 0 else ny
    x0 = 0 if dx >= 0 else -dx
    x1 = nx - dx if dx >= 0 else nx
    for z in range(z0, z1):
        for y in range(y0, y1):
            row = (z * ny + y) * nx
            for x in range(x0, x1):
                p = row + x
                v = np.int64(wd[p])
                if v > wmax:
                    wmax = v
                if v < 0:
                    if nneg == 0:
                        first = p
                    nneg += 1
                    v = 0
                fwd[p] = v
                bwd[p + off] = v
    return wmax, nneg, first


def potts_capacities(u: np.ndarray, w: np.ndarray, steps: np.ndarray) -> tuple:
    """``u`` (*grid, 2) and ``w`` (D, *grid), NumPy integer arrays (not uint64);
    ``steps`` (D, ndim) forward steps. Returns ``(source, sink, edges, constant,
    checks)``: int32 capacity arrays (``edges`` (2 D, *grid), zeros where an arc would
    leave the grid) and a dict of what the checks found, nodes as flat indices:
    ``wmax``; ``nneg`` and ``first_neg`` ((direction, node) or None); ``bad_source`` /
    ``bad_sink`` (the first node whose capacity exceeds int32, or None). The arrays
    are only meaningful where the checks pass."""
    grid = u.shape[:-1]
    n = int(np.prod(grid))
    D = w.shape[0]
    nz, ny, nx = (1, *grid) if len(grid) == 2 else grid
    st3 = np.zeros((D, 3), dtype=np.int64)
    st3[:, 3 - len(grid) :] = steps
    s = np.empty(grid, dtype=np.int32)
    t = np.empty(grid, dtype=np.int32)
    edges = np.zeros((2 * D, *grid), dtype=np.int32)
    uf = np.ascontiguousarray(u).reshape(n, 2)
    wf = np.ascontiguousarray(w).reshape(D, n)
    ef = edges.reshape(2 * D, n)

    def direction(d):
        dz, dy, dx = (int(v) for v in st3[d])
        return _arcs(wf[d], dz, dy, dx, nz, ny, nx, ef[2 * d], ef[2 * d + 1])

    def terminals():
        return _terminals(uf, s.reshape(-1), t.reshape(-1))

    threads = min(default_threads(), D + 1)
    if threads > 1 and n >= 1 << 16:
        with ThreadPoolExecutor(threads) as pool:
            term = pool.submit(terminals)
            per = list(pool.map(direction, range(D)))
            upper, lower, bad_s, bad_t = term.result()
    else:
        upper, lower, bad_s, bad_t = terminals()
        per = [direction(d) for d in range(D)]
    wmax = max((int(r[0]) for r in per), default=0)
    nneg = sum(int(r[1]) for r in per)
    first_d = next((d for d in range(D) if per[d][1]), -1)
    first_p = per[first_d][2] if nneg else -1

    checks = {
        "wmax": wmax,
        "nneg": nneg,
        "first_neg": (first_d, int(first_p)) if nneg else None,
        "bad_source": int(bad_s) if bad_s >= 0 else None,
        "bad_sink": int(bad_t) if bad_t >= 0 else None,
    }
    return s, t, edges, (int(upper) << 32) + int(lower), checks
