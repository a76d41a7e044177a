"""CPU grid max-flow: Boykov-Kolmogorov search trees specialised to grids, in numba.

The graph is never materialised as objects: residual capacities live in one flat int32
array with the K arcs of a node side by side (``rc[p * K + k]``), neighbours are found
by adding a constant offset per direction, and a padded layout (one dead node past the
end of every row / column and a dead plane before and after the first axis) removes
every bounds check: arcs touching a dead node have zero residual capacity both ways, so
no tree ever grows into one.

Exactness: residual capacities stay within ``cap(p->q) + cap(q->p) <= 2**31 - 1`` (the
caller checks that bound), terminal residuals within ``[-(2**31 - 1), 2**31 - 1]``
(they start at ``source - sink`` and only shrink in magnitude), and the flow value is
accumulated in int64.

References
----------
Y. Boykov and V. Kolmogorov, "An experimental comparison of min-cut/max-flow algorithms
for energy minimization in vision", IEEE TPAMI 26(9), 2004.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numba as nb
import numpy as np
from numba import types
from numba.extending import overload

__all__ = ["maxflow_grid_cpu"]

# Parent codes in the node record (see below): 0..K-1 = direction of the arc to the
# parent (K <= 26), _TERMINAL = the parent is the terminal, _ORPHAN = orphan; tree 0
# free, 1 source, 2 sink.
_TERMINAL = 30
_ORPHAN = 31
_INF_D = 1 << 30


def _padded_geometry(
    shape: tuple, K: int | None = None
) -> tuple[int, np.ndarray, tuple]:
    """Padded raster layout: ``(npad, off, dims)``.

    One dead node ends every row (2-D) / one dead row and column end every slice
    (3-D), and ``lead`` dead rows (slices) lie before the grid and one after it, so
    every neighbour index of a real node is in range and every arc into the padding
    has zero capacity: a step off the grid along any axis lands on a dead node. With
    diagonal planes ``lead`` is 2 (a step back along every axis from the first node
    would otherwise fall before the array), else 1. ``off`` holds the flat step of
    each of the ``K`` planes (``vision_cuts.grid.neighbour_offsets``; default
    ``2 * ndim``); ``dims = (row stride, slice stride, lead)`` of the padded grid.
    """
    from .grid import neighbour_offsets

    K = 2 * len(shape) if K is None else K
    steps = neighbour_offsets(len(shape), K)
    lead = 1 if K == 2 * len(shape) else 2
    if len(shape) == 2:
        h, w = shape
        wp = w + 1
        npad = (h + lead + 1) * wp
        off = steps[:, 0] * wp + steps[:, 1]
        dims = (wp, 0, lead)
    else:
        d, h, w = shape
        wp, sp = w + 1, (h + 1) * (w + 1)
        npad = (d + lead + 1) * sp
        off = steps[:, 0] * sp + steps[:, 1] * wp + steps[:, 2]
        dims = (wp, sp, lead)
    return npad, off.astype(np.int64), dims


@nb.njit(cache=True, nogil=True, inline="always")
def _index(z, y, x, dims):
    """Padded index of grid node (z, y, x) (z = 0 in 2-D)."""
    wp, sp, lead = dims
    if sp == 0:
        return (y + lead) * wp + x
    return (z + lead) * sp + y * wp + x


# Node record (int32 fields, S = K + 4 of them per node, nodes in padded C order):
#   [0, K)   residual capacity of the arc to the neighbour in direction k
#   K        terminal residual: > 0 from the source, < 0 to the sink
#   K + 1    timestamp of the distance mark (or of a dead mark, see ``_adopt``)
#   K + 2    distance to the terminal along the tree
#   K + 3    tree (bits 0-1: 0 free, 1 source tree, 2 sink tree), queued (bit 2),
#            dead marks below this orphan (bit 3, within an adoption phase),
#            parent code + 1 (bits 4..: 0 none, 1..K direction to the parent,
#            TERMINAL + 1, ORPHAN + 1)
# One record per node keeps a tree walk on one cache line per step.


@nb.njit(cache=True, nogil=True)
def _build(source, sink, edges, nz, ny, nx, dims, K, steps, st, r0, r1):
    """Fill the node records of the grid rows [r0, r1) (row ``z * ny + y``); return
    the flow that cancels at their terminals. ``steps``: (K, 3) int64, the (dz, dy,
    dx) step of every plane (each -1, 0 or 1)."""
    S = K + 4
    flow0 = np.int64(0)
    n = nz * ny * nx
    moves_z = False
    for k in range(K):
        if steps[k, 0] != 0:
            moves_z = True
    for r in range(r0, r1):
        z = r // ny
        y = r - z * ny
        i0 = r * nx
        # a row whose every node but the two ends has all its neighbours
        inner_row = 1 <= y < ny - 1 and (not moves_z or 1 <= z < nz - 1)
        for x in range(nx):
            i = i0 + x
            b = _index(z, y, x, dims) * S
            s = np.int64(source[i])
            t = np.int64(sink[i])
            if s < t:
                flow0 += s
            else:
                flow0 += t
            st[b + K] = np.int32(s - t)
            if inner_row and 1 <= x < nx - 1:
                for k in range(K):
                    st[b + k] = edges[k * n + i]
                continue
            for k in range(K):
                # arcs that would leave the grid do not exist, whatever the input
                zz = z + steps[k, 0]
                yy = y + steps[k, 1]
                xx = x + steps[k, 2]
                inside = 0 <= zz < nz and 0 <= yy < ny and 0 <= xx < nx
                st[b + k] = edges[k * n + i] if inside else 0
    return flow0


# The search below (greedy pass, roots, grow / augment / adopt) serves two graphs: the
# padded grid, where the neighbour of node i in plane k is ``i + off[k]``, and a graph
# that keeps its neighbours in its records (``off`` None: K more fields [K + 4, 2 K +
# 4), S = 2 K + 4; the compact swap moves of ``vision_cuts.multilabel``). numba
# compiles one version per kind of ``off``: the overloads of ``_stride`` / ``_nbr``
# pick their body by its type, so the grid's search has no look-up and no branch.
# numba's cache does not see edits here from ``multilabel``'s compiled functions:
# delete ``vision_cuts/__pycache__/*.nb[ic]`` after changing the search.


def _stride(off, K):
    """Fields per node record."""
    return 2 * K + 4 if off is None else K + 4


def _nbr(st, off, i, S, K, k):
    """The neighbour of node ``i`` in plane ``k``."""
    return st[i * S + K + 4 + k] if off is None else i + off[k]


# numba: typed by the kind of ``off``, inlined in numba's IR (no call: a call would
# count references to the arrays)
@overload(_stride, inline="always")
def _stride_nb(off, K):
    if isinstance(off, types.NoneType):
        return lambda off, K: 2 * K + 4
    return lambda off, K: K + 4


@overload(_nbr, inline="always")
def _nbr_nb(st, off, i, S, K, k):
    if isinstance(off, types.NoneType):
        return lambda st, off, i, S, K, k: st[i * S + K + 4 + k]
    return lambda st, off, i, S, K, k: i + off[k]


@nb.njit(cache=True, nogil=True)
def _greedy(st, off, K, lo, hi):
    """Augment every path source -> p -> q -> sink along one arc, in one sweep over
    the nodes [lo, hi).

    Exact (these are ordinary augmenting paths) and cheap; on vision energies it
    removes much of the flow before the search trees are built.
    """
    S = _stride(off, K)
    flow = np.int64(0)
    for p in range(hi):  # from 0, not lo: ~10% faster (the indices known >= 0)
        if p < lo:
            continue
        base = p * S
        e = st[base + K]
        if e <= 0:
            continue
        for k in range(K):
            r = st[base + k]
            if r > 0:
                qb = _nbr(st, off, p, S, K, k) * S
                dq = st[qb + K]
                if dq < 0:
                    d = e
                    if r < d:
                        d = r
                    if -dq < d:
                        d = -dq
                    st[base + k] = r - d
                    st[qb + (k ^ 1)] += d
                    st[qb + K] = dq + d
                    e -= d
                    flow += d
                    if e == 0:
                        break
        st[base + K] = e
    return flow


@nb.njit(cache=True, nogil=True, inline="always")
def _par(st, b):
    return (st[b] >> 4) - 1


@nb.njit(cache=True, nogil=True, inline="always")
def _set_par(st, b, a):
    st[b] = (st[b] & 15) | ((a + 1) << 4)


@nb.njit(cache=True, nogil=True)
def _init_trees(st, off, K, lo, hi, queue):
    """Make every node of [lo, hi) with terminal residual a tree root, queued, and
    every other one free."""
    S = _stride(off, K)
    n = 0
    for p in range(lo, hi):
        b = p * S
        v = st[b + K]
        if v != 0:
            # tree, queued, parent = TERMINAL
            st[b + K + 3] = (1 if v > 0 else 2) | 4 | ((_TERMINAL + 1) << 4)
            st[b + K + 1] = 0
            st[b + K + 2] = 1
            queue[n] = p
            n += 1
        else:
            st[b + K + 3] = 0
    return n


@nb.njit(cache=True, nogil=True, inline="always")
def _enqueue(st, fl, j, queue, qtail):
    """Flag node ``j`` (flag field ``fl``) queued and append it; the new tail."""
    st[fl] |= 4
    queue[qtail] = j
    qtail += 1
    if qtail == queue.shape[0]:
        qtail = 0
    return qtail


@nb.njit(cache=True, nogil=True, inline="always")
def _orphan(st, fl, v, orph, ohead):
    """Make node ``v`` (flag field ``fl``) an orphan at the front of the orphan
    deque; the new head."""
    _set_par(st, fl, _ORPHAN)
    ohead -= 1
    if ohead < 0:
        ohead += orph.shape[0]
    orph[ohead] = v
    return ohead


@nb.njit(cache=True, nogil=True, inline="always")
def _pop(ring, head):
    """The entry at ``head`` of a ring buffer and the next head."""
    v = ring[head]
    head += 1
    if head == ring.shape[0]:
        head = 0
    return v, head


@nb.njit(cache=True, nogil=True, inline="always")
def _next_active(st, FL, S, queue, qhead, qlen, cur):
    """The node to grow from: ``cur`` while it is still in a tree, else the first
    queued node that is. Returns (node or -1, qhead, qlen, cur)."""
    i = -1
    if cur >= 0 and (st[cur * S + FL] >> 4) != 0:
        i = cur
    else:
        cur = -1
        while qlen > 0:
            c, qhead = _pop(queue, qhead)
            qlen -= 1
            cb = c * S + FL
            st[cb] &= ~4
            if (st[cb] >> 4) != 0:
                i = c
                break
    return i, qhead, qlen, cur


@nb.njit(cache=True, nogil=True, inline="always")
def _grow(st, off, K, S, i, queue, qtail, qlen):
    """Grow node ``i``'s tree along its residual arcs i -> j (source tree) or
    j -> i (sink tree): free neighbours join it (queued), nearer parents are
    taken over. Stops at the first neighbour of the other tree. Returns (mi, mk,
    qtail, qlen): the tail of the meeting arc on the source-tree side and its
    direction, (-1, -1) where the trees did not meet."""
    TS = K + 1
    DI = K + 2
    FL = K + 3
    mi = -1  # tail of the meeting arc (source-tree side)
    mk = -1  # its direction
    ib = i * S
    ti = st[ib + FL] & 3
    tsi = st[ib + TS]
    di = st[ib + DI]
    for tree in range(1, 3):  # i's tree (a constant in each unrolled copy)
        if tree != ti:
            continue
        for k in range(K):
            if tree == 1 and st[ib + k] <= 0:
                continue
            j = _nbr(st, off, i, S, K, k)
            jb = j * S
            if tree == 2 and st[jb + (k ^ 1)] <= 0:
                continue
            fj = st[jb + FL]
            if (fj >> 4) == 0:
                st[jb + FL] = (fj & 4) | tree | (((k ^ 1) + 1) << 4)
                st[jb + TS] = tsi
                st[jb + DI] = di + 1
                if (fj & 4) == 0:
                    qtail = _enqueue(st, jb + FL, j, queue, qtail)
                    qlen += 1
            elif (fj & 3) == 3 - tree:
                mi = i if tree == 1 else j
                mk = k if tree == 1 else k ^ 1
                break
            elif st[jb + TS] <= tsi and st[jb + DI] > di:
                st[jb + FL] = (fj & 15) | (((k ^ 1) + 1) << 4)
                st[jb + TS] = tsi
                st[jb + DI] = di + 1
    return mi, mk, qtail, qlen


@nb.njit(cache=True, nogil=True, inline="always")
def _augment(st, off, K, S, mi, mk, walk, orph):
    """Push the bottleneck along source -> mi -> mj -> sink, the two tree paths
    met by the arc (mi, mk). Every node that loses the arc to its parent (or its
    terminal) becomes an orphan at the front of ``orph``, whose head starts at 0.
    Returns (bottleneck, orphan head, orphan count)."""
    TR = K
    FL = K + 3
    mj = _nbr(st, off, mi, S, K, mk)
    bneck = st[mi * S + mk]
    # the tree paths: mi's from the source, mj's to the sink, each step (node,
    # arc to its parent) kept in ``walk`` for the update below
    nw = 0
    n1 = 0
    r1 = mi
    r2 = mj
    for tree in range(1, 3):
        v = mi if tree == 1 else mj
        a = _par(st, v * S + FL)
        while a != _TERMINAL:
            u = _nbr(st, off, v, S, K, a)
            r = st[u * S + (a ^ 1)] if tree == 1 else st[v * S + a]
            if r < bneck:
                bneck = r
            walk[nw] = v * 32 + a
            nw += 1
            v = u
            a = _par(st, v * S + FL)
        r = st[v * S + TR] if tree == 1 else -st[v * S + TR]
        if r < bneck:
            bneck = r
        if tree == 1:
            r1 = v
            n1 = nw
        else:
            r2 = v
    st[mi * S + mk] -= bneck
    st[mj * S + (mk ^ 1)] += bneck
    # orphan deque: augment pushes to the front, adoption to the rear
    ohead = 0
    olen = 0
    for tree in range(1, 3):
        for x in range(0 if tree == 1 else n1, n1 if tree == 1 else nw):
            v = walk[x] >> 5
            a = walk[x] & 31
            vb = v * S
            u = _nbr(st, off, v, S, K, a)
            down = u * S + (a ^ 1)  # the arc parent -> v
            up = vb + a  # the arc v -> parent
            fwd = down if tree == 1 else up
            st[up if tree == 1 else down] += bneck
            st[fwd] -= bneck
            if st[fwd] == 0:  # v loses its parent
                ohead = _orphan(st, vb + FL, v, orph, ohead)
                olen += 1
        v = r1 if tree == 1 else r2
        vb = v * S
        st[vb + TR] -= bneck if tree == 1 else -bneck
        if st[vb + TR] == 0:  # the root loses its terminal
            ohead = _orphan(st, vb + FL, v, orph, ohead)
            olen += 1
    return bneck, ohead, olen


@nb.njit(cache=True, nogil=True, inline="always")
def _origin_distance(st, off, K, S, j, now, dead, walk):
    """Distance of tree node ``j`` to its terminal, or _INF_D where its path ends
    at an orphan or at a dead mark; and the nodes read. A path that reaches the
    terminal is marked with timestamp ``now`` and its distances, so that later
    walks stop there; one that does not is marked dead (timestamp ``dead``,
    distance _INF_D + the steps to the orphan) and the orphan it ends at flagged
    (bit 3), so that later walks stop there too until that orphan or one above
    it is adopted (see ``_adopt``)."""
    TS = K + 1
    DI = K + 2
    FL = K + 3
    d = 0
    jj = j
    nw = 0
    while True:
        jjb = jj * S
        ts = st[jjb + TS]
        if ts == now:
            d += st[jjb + DI]
            break
        if ts == dead:
            d = _INF_D
            base = st[jjb + DI]
            break
        a = _par(st, jjb + FL)
        d += 1
        if a == _TERMINAL:
            st[jjb + TS] = now
            st[jjb + DI] = 1
            break
        if a == _ORPHAN:
            d = _INF_D
            base = _INF_D
            if nw > 0:
                st[jjb + FL] |= 8
            break
        walk[nw] = jjb
        nw += 1
        jj = _nbr(st, off, jj, S, K, a)
    if d < _INF_D:
        for x in range(nw):
            jjb = walk[x]
            st[jjb + TS] = now
            st[jjb + DI] = d - x
    else:
        for x in range(nw):
            jjb = walk[x]
            st[jjb + TS] = dead
            st[jjb + DI] = base + (nw - x)
    return d, nw + 1


@nb.njit(cache=True, nogil=True, inline="always")
def _free_orphan(st, off, K, S, o, to, orph, ohead, olen, queue, qtail, qlen):
    """Orphan ``o`` of tree ``to`` found no parent: it leaves the tree, its
    neighbours that could adopt it later are queued and its children become
    orphans at the rear of ``orph``. Returns (olen, qtail, qlen)."""
    FL = K + 3
    ocap = orph.shape[0]
    ob = o * S
    flag = st[ob + FL] & 8  # dead marks below o: its orphaned children hold them
    for k in range(K):
        j = _nbr(st, off, o, S, K, k)
        jb = j * S
        fj = st[jb + FL]
        if (fj & 3) == to and (fj >> 4) != 0:
            if to == 1:
                act = st[jb + (k ^ 1)] > 0
            else:
                act = st[ob + k] > 0
            if act and (fj & 4) == 0:
                qtail = _enqueue(st, jb + FL, j, queue, qtail)
                qlen += 1
            a = (fj >> 4) - 1
            if a != _TERMINAL and a != _ORPHAN and _nbr(st, off, j, S, K, a) == o:
                st[jb + FL] = (st[jb + FL] & 15) | flag | ((_ORPHAN + 1) << 4)
                pos = ohead + olen
                if pos >= ocap:
                    pos -= ocap
                orph[pos] = j
                olen += 1
    st[ob + FL] &= 4  # free (keep the queued bit)
    return olen, qtail, qlen


@nb.njit(cache=True, nogil=True, inline="always")
def _adopt(st, off, K, S, now, orph, ohead, olen, walk, queue, qtail, qlen):
    """Find each orphan a parent in its tree whose path reaches the terminal,
    the nearest one, or free it. Returns (qtail, qlen, clock, nodes read by the
    origin walks).

    A walk that ends at an orphan marks its nodes dead with the stamp ``dead``
    (from ``now + 1`` up: no mark made before has it, and the search's clock
    goes on from the last one) and flags that orphan; a freed orphan passes its
    flag to the children it orphans. So while no flagged orphan has been
    adopted, every node with the stamp lies below a flagged orphan and its walk
    would end at an orphan again: the mark is exact. Adopting a flagged orphan
    gives the nodes below it a path again, so it moves the stamp on
    (``dead + 1``), which voids every dead mark at once. From the same trees an
    orphan chooses as it would without dead marks; the marks change only the
    distances that ``_grow``'s test reads later. A dead mark's distance, _INF_D plus
    the steps to its orphan, keeps ``_grow``'s test sound: it takes a tree
    neighbour whose stamp is not later and whose distance is greater for a node
    that is not an ancestor, and a node's ancestors carry later stamps or
    smaller distances (the orphan above a dead mark, older, is nearer than
    _INF_D once adopted). A leaky maze (a corridor of arcs 1000 winding
    over a 512 x 512 grid, walls 1, one thread) read 948 M nodes in these walks,
    939 M of them on walks from an orphan's descendant back up to it (each
    orphan of a long chain walked the corridor round the bend to itself):
    quadratic in the chain.
    """
    TS = K + 1
    DI = K + 2
    FL = K + 3
    dead = now + 1
    steps = np.int64(0)
    while olen > 0:
        o, ohead = _pop(orph, ohead)
        olen -= 1
        ob = o * S
        to = st[ob + FL] & 3
        dmin = _INF_D
        amin = -1
        for k in range(K):
            j = _nbr(st, off, o, S, K, k)
            jb = j * S
            if to == 1:
                ok = st[jb + (k ^ 1)] > 0
            else:
                ok = st[ob + k] > 0
            fj = st[jb + FL]
            if ok and (fj & 3) == to and (fj >> 4) != 0:
                d, nr = _origin_distance(st, off, K, S, j, now, dead, walk)
                steps += nr
                if d < dmin:
                    amin = k
                    dmin = d
                    if dmin == 1:  # a root: no parent can be nearer
                        break
        if amin >= 0:
            fo = st[ob + FL]
            if (fo & 8) != 0:
                dead += 1  # nodes below o have a path again: void the dead marks
            st[ob + FL] = (fo & 7) | ((amin + 1) << 4)
            st[ob + TS] = now
            st[ob + DI] = dmin + 1
        else:
            olen, qtail, qlen = _free_orphan(
                st, off, K, S, o, to, orph, ohead, olen, queue, qtail, qlen
            )
    return qtail, qlen, dead, steps


@nb.njit(cache=True, nogil=True, _nrt=False)
def _bk_core(st, off, K, queue, qlen, orph, walk, now0, lo, hi, stop):
    """Boykov-Kolmogorov max-flow on the node records (the padded grid, or with
    ``off`` None a graph whose records hold the neighbours).

    Continues from the trees and the residual capacities in ``st``, starting with
    the ``qlen`` active nodes at the front of ``queue``; the nodes it may touch lie
    in [lo, hi). Returns (flow, augmentations, clock, nodes read by the adoption's
    origin walks). ``queue`` (FIFO of active nodes) and ``orph`` (deque of
    orphans) need one slot per node of the range: a node is queued at most once
    (flag bit 2) and orphaned at most once per adoption phase. At the end the
    source tree holds exactly the nodes the source reaches.

    An augmentation keeps the steps of its two tree paths in ``walk`` as it finds
    the bottleneck and updates the arcs from there, and an adoption keeps the path
    it walks from a candidate parent to find its origin and marks it from there:
    both read each path's parent links once, which saved 15-20 % of the search on
    8-connected segmentation energies. An orphan stops looking at its neighbours once
    one of them is a root of its tree (distance 1, the least there is; the neighbours
    left unwalked only lose their distance marks): 0-20 % less time again on grid
    energies, the swap moves' graphs within the spread. A walk that ends at an
    orphan leaves dead marks for the walks after it (``_adopt``): on a leaky maze
    (512 x 512, one thread) the walks read 948 M nodes before, 18 M after.

    ``stop`` (one uint8) is read every 4096 steps of the search: once another thread
    sets it, the search returns where it is (the caller drops the unfinished state).

    ``walk`` is scratch for the tree paths, ``hi - lo + 1`` entries. The stages
    (grow, augment, adopt) are helpers that numba inlines in its IR, and the search
    is compiled without numba's reference counting (``_nrt=False``; it allocates
    nothing): with it, every inlined helper's array arguments were counted in and
    out inside the loop, and the search took 25-30 % longer than in one body (with
    plain calls too; CPU time on 2 cores). Without it, the same or less than that
    one body (16-core host, wall time, medians of four alternated passes: grid
    energies 0-6 % less, 5 % in sum; the swap and expansion moves' graphs 22 / 15 %;
    ``benchmarks/results_h200host_cpu_bk_split_ab.json``).
    """
    S = _stride(off, K)
    TS = K + 1
    FL = K + 3
    qhead = 0
    qtail = qlen
    if qtail == queue.shape[0]:
        qtail = 0
    flow = np.int64(0)
    naug = np.int64(0)
    steps = np.int64(0)
    now = now0
    cur = -1
    it = 0
    while True:
        if (it & 4095) == 0 and stop[0] != 0:
            break
        it += 1
        i, qhead, qlen, cur = _next_active(st, FL, S, queue, qhead, qlen, cur)
        if i < 0:
            break
        mi, mk, qtail, qlen = _grow(st, off, K, S, i, queue, qtail, qlen)
        now += 1
        if now >= (1 << 30):  # keep timestamps in int32: restart the clock
            for p in range(lo, hi):
                st[p * S + TS] = 0
                st[p * S + TS + 1] = 0  # the distances too, or _grow's test fails
            now = 1
        if mi < 0:
            cur = -1
            continue
        cur = i
        bneck, ohead, olen = _augment(st, off, K, S, mi, mk, walk, orph)
        flow += bneck
        naug += 1
        now += 1
        qtail, qlen, now, nr = _adopt(
            st, off, K, S, now, orph, ohead, olen, walk, queue, qtail, qlen
        )
        steps += nr
    return flow, naug, now, steps


@nb.njit(cache=True, nogil=True)
def _bk(st, off, K, queue, qlen, orph, now0, lo, hi, stop):
    """``_bk_core`` with its scratch allocated. Returns (flow, augmentations,
    clock, origin-walk nodes)."""
    walk = np.empty(hi - lo + 1, dtype=np.int64)
    return _bk_core(st, off, K, queue, qlen, orph, walk, now0, lo, hi, stop)


#: the stop flag of a search nobody stops (never written)
NO_STOP = np.zeros(1, dtype=np.uint8)


class SolveStopped(Exception):
    """A CPU search stopped through its ``stop`` flag before it ended."""


@nb.njit(cache=True, nogil=True)
def _queue_boundary(st, K, rows, width, queue):
    """Queue the tree nodes of the given node ranges (rows of the padded grid)."""
    S = K + 4
    n = 0
    for r in range(rows.shape[0]):
        for p in range(rows[r], rows[r] + width):
            b = p * S + K + 3
            if (st[b] & 3) != 0 and (st[b] & 4) == 0:
                st[b] |= 4
                queue[n] = p
                n += 1
    return n


@nb.njit(cache=True, nogil=True)
def _labels(st, nz, ny, nx, dims, K, out):
    S = K + 4
    for z in range(nz):
        for y in range(ny):
            i0 = (z * ny + y) * nx
            for x in range(nx):
                p = _index(z, y, x, dims)
                out[i0 + x] = 0 if (st[p * S + K + 3] & 3) == 1 else 1


@nb.njit(cache=True, nogil=True)
def _sink_side(st, off, K, nz, ny, nx, dims, queue, out):
    """``out`` (grid order) = 1 for the nodes that reach the sink in the residual
    graph of the records ``st`` (a search backwards from the nodes with a residual
    sink arc), else 0: the smallest sink side once the flow is maximum."""
    S = K + 4
    npad = st.size // S
    seen = np.zeros(npad, dtype=np.uint8)
    n = 0
    for p in range(npad):
        if st[p * S + K] < 0:
            seen[p] = 1
            queue[n] = p
            n += 1
    head = 0
    while head < n:
        p = queue[head]
        head += 1
        for k in range(K):
            q = p + off[k]  # in range: a real node's neighbours are (padding)
            if seen[q] == 0 and st[q * S + (k ^ 1)] > 0:  # the arc q -> p
                seen[q] = 1
                queue[n] = q
                n += 1
    for z in range(nz):
        for y in range(ny):
            i0 = (z * ny + y) * nx
            for x in range(nx):
                out[i0 + x] = seen[_index(z, y, x, dims)]


@nb.njit(cache=True, nogil=True)
def _residual_planes(st, nz, ny, nx, dims, K, out):
    """The residual arc capacities of the records, as the planes ``(K, n)`` of the
    input (``out`` flat)."""
    S = K + 4
    n = nz * ny * nx
    for z in range(nz):
        for y in range(ny):
            i0 = (z * ny + y) * nx
            for x in range(nx):
                b = _index(z, y, x, dims) * S
                for k in range(K):
                    out[k * n + i0 + x] = st[b + k]


def _strips(shape: tuple, threads: int) -> int:
    """How many strips to cut the grid into for ``threads`` worker threads: in 2-D
    up to four a thread (a border is a row: cheap to join, and more strips even out
    the threads' work), in 3-D one a thread (a border is a slice; 64^3 expansion
    moves on 2 cores: 9.0-9.2 s with 2 strips, 10.9-11.1 with 8)."""
    n = int(np.prod(shape))
    if threads <= 1 or n < _MIN_NODES_PER_STRIP * 2:
        return 1
    per = 4 if len(shape) == 2 else 1
    return max(1, min(per * threads, n // _MIN_NODES_PER_STRIP, shape[0] // 4))


_MIN_NODES_PER_STRIP = 1 << 14


def default_threads() -> int:
    """Worker threads of the CPU solver: ``VISION_CUTS_THREADS`` or the core count."""
    env = os.environ.get("VISION_CUTS_THREADS", "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(
                f"VISION_CUTS_THREADS must be a positive integer, got {env!r}"
            )
        return value
    return (
        len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else (os.cpu_count() or 1)
    )


def maxflow_grid_cpu(
    source: np.ndarray,
    sink: np.ndarray,
    edges: np.ndarray,
    threads: int | None = None,
    *,
    side: str = "source",
    residual: bool = False,
    stop: np.ndarray = NO_STOP,
) -> tuple[int, np.ndarray, dict]:
    """Exact max-flow / min-cut of a validated grid graph on the CPU.

    Inputs are C-contiguous int32 arrays as produced by :func:`vision_cuts.grid_graph`
    (arc pairs within int32; arcs that would leave the grid are ignored here too).
    Returns ``(flow, labels, stats)``. ``side="sink"`` labels the smallest sink side
    instead (1 only where the sink is reached in the final residual graph, as the GPU
    solver labels it; one more search); ``residual`` adds the final residual arc
    capacities, planes of the shape of ``edges``, as ``stats["residual"]``.
    ``stop``: a one-entry uint8 array that another thread may set to end the search
    early; the call then raises :class:`SolveStopped`.

    With several threads the grid is cut into strips along its first axis; the arcs
    crossing strip borders are removed, each strip is solved on its own thread
    (they share no arc, so no locking is needed), then neighbouring strips are
    joined in pairs, level by level, the pairs of a level side by side: the arcs of
    a border are put back and the search continues over the union from its flows and
    trees, starting from the nodes on that border (the bottom-up merging of Liu and
    Sun, CVPR 2010). Every step is an
    ordinary augmentation, so the result is exact whatever the number of threads;
    the labels are the nodes not reachable from the source in the final residual
    graph, which is the same set for every maximum flow.
    """
    from .grid import neighbour_offsets

    if side not in ("sink", "source"):
        raise ValueError(f"side must be 'sink' or 'source', got {side!r}")
    shape = source.shape
    k = edges.shape[0]
    t0 = time.perf_counter()
    labels = np.empty(shape, dtype=np.uint8)
    if source.size == 0:
        stats = {"backend": "cpu", "augmentations": 0, "origin_steps": 0}
        if residual:
            stats["residual"] = np.zeros(edges.shape, dtype=np.int32)
        return 0, labels, {**stats, "time_s": 0.0}
    threads = default_threads() if threads is None else int(threads)
    npad, off, dims = _padded_geometry(shape, k)
    steps = np.zeros((k, 3), dtype=np.int64)
    steps[:, 3 - len(shape) :] = neighbour_offsets(len(shape), k)
    nz, ny, nx = (1, *shape) if len(shape) == 2 else shape
    st = np.zeros(npad * (k + 4), dtype=np.int32)
    args = (source.reshape(-1), sink.reshape(-1), edges.reshape(-1), nz, ny, nx)
    args += (dims, k, steps, st)
    rows = nz * ny
    parts = min(threads, max(1, source.size // _MIN_NODES_PER_STRIP))
    if parts > 1:  # the threads write disjoint records (pages first touched there)
        cut = [rows * i // parts for i in range(parts + 1)]
        with ThreadPoolExecutor(parts) as pool:
            flow0 = sum(
                int(f)
                for f in pool.map(
                    lambda i: _build(*args, cut[i], cut[i + 1]), range(parts)
                )
            )
    else:
        flow0 = int(_build(*args, 0, rows))
    flow, labels, stats = solve_records(st, shape, k, flow0, threads, t0, stop)
    if side == "sink":
        queue = np.empty(npad, dtype=np.int32)
        _sink_side(st, off, k, nz, ny, nx, dims, queue, labels.reshape(-1))
    if residual:
        planes = np.empty(edges.shape, dtype=np.int32)
        _residual_planes(st, nz, ny, nx, dims, k, planes.reshape(-1))
        stats["residual"] = planes
    if side == "sink" or residual:
        stats["time_s"] = time.perf_counter() - t0
    return flow, labels, stats


def solve_records(
    st: np.ndarray,
    shape: tuple,
    k: int,
    flow0: int,
    threads: int,
    t0: float,
    stop: np.ndarray = NO_STOP,
) -> tuple[int, np.ndarray, dict]:
    """:func:`maxflow_grid_cpu` from filled node records ``st`` (padded layout of
    ``_padded_geometry(shape, k)``, ``k`` planes; ``flow0``: the flow already
    cancelled at the terminals; ``t0``: when the build began, for the stats).
    Returns ``(flow, labels, stats)``; raises :class:`SolveStopped` once ``stop[0]``
    is set (by another thread)."""
    from .grid import neighbour_offsets

    labels = np.empty(shape, dtype=np.uint8)
    npad, off, dims = _padded_geometry(shape, k)
    steps = np.zeros((k, 3), dtype=np.int64)
    steps[:, 3 - len(shape) :] = neighbour_offsets(len(shape), k)
    nz, ny, nx = (1, *shape) if len(shape) == 2 else shape
    t1 = time.perf_counter()
    queue = np.empty(npad, dtype=np.int32)
    orph = np.empty(npad, dtype=np.int32)
    nstrips = _strips(shape, threads)
    S = k + 4
    step = dims[0] if len(shape) == 2 else dims[1]  # nodes per padded row / slice
    # the planes that step along the first axis cross strip borders: forward ones
    # from the last row (slice) of a strip, backward ones from the first of the next
    first = steps[:, 3 - len(shape)]
    down = np.flatnonzero(first > 0)
    up = np.flatnonzero(first < 0)
    lead = dims[2]
    cuts = [round(i * shape[0] / nstrips) for i in range(1, nstrips)]
    rec = st.reshape(npad, S)
    saved = []
    for c in cuts:  # real rows c - 1 | c are padded rows c - 1 + lead | c + lead
        a, b = (c - 1 + lead) * step, (c + lead) * step
        saved.append((rec[a:b][:, down].copy(), rec[b : b + step][:, up].copy()))
        rec[a:b, down] = 0
        rec[b : b + step, up] = 0
    bounds = [0] + [(c + lead) * step for c in cuts] + [npad]

    def strip(i: int):
        # the strip's greedy paths, then its search (no arc leaves a strip)
        lo, hi = bounds[i], bounds[i + 1]
        g = _greedy(st, off, k, lo, hi)
        q = queue[lo:hi]
        n = _init_trees(st, off, k, lo, hi, q)
        f, a, c, w = _bk(st, off, k, q, n, orph[lo:hi], np.int32(0), lo, hi, stop)
        return f + g, a, c, w

    def merge(pair: tuple, now: int):
        # the union of two neighbouring groups of strips: the border between them
        # put back, the search goes on from the tree nodes on it
        (s0, s1), (_, s2) = pair
        fwd, bwd = saved[s1 - 1]
        c = cuts[s1 - 1]
        a, b = (c - 1 + lead) * step, (c + lead) * step
        rec[a:b, down] = fwd
        rec[b : b + step, up] = bwd
        lo, hi = bounds[s0], bounds[s2]
        q = queue[lo:hi]
        n = _queue_boundary(st, k, np.array([a, b], dtype=np.int64), step, q)
        return _bk(st, off, k, q, n, orph[lo:hi], np.int32(now), lo, hi, stop)

    pool = ThreadPoolExecutor(min(threads, nstrips)) if nstrips > 1 else None
    try:
        if pool is not None:
            parts = list(pool.map(strip, range(nstrips)))
        else:
            parts = [strip(0)]
        t_strips = time.perf_counter()
        flow = sum(int(p[0]) for p in parts)
        naug = sum(int(p[1]) for p in parts)
        now = max(int(p[2]) for p in parts) + 1
        walks = sum(int(p[3]) for p in parts)
        # Liu and Sun's bottom-up merging: level by level, neighbouring groups of
        # strips are joined in pairs; the pairs of a level are disjoint ranges, so
        # they run side by side, and the last level joins the whole grid
        spans = [(i, i + 1) for i in range(nstrips)]
        levels = 0
        while len(spans) > 1:
            pairs = [(spans[j], spans[j + 1]) for j in range(0, len(spans) - 1, 2)]
            if len(pairs) > 1:
                done = list(pool.map(lambda pr, now=now: merge(pr, now), pairs))
            else:
                done = [merge(pairs[0], now)]
            flow += sum(int(p[0]) for p in done)
            naug += sum(int(p[1]) for p in done)
            now = max(now, *(int(p[2]) for p in done)) + 1
            walks += sum(int(p[3]) for p in done)
            spans = [(p0[0], p1[1]) for p0, p1 in pairs] + spans[2 * len(pairs) :]
            levels += 1
    finally:
        if pool is not None:
            pool.shutdown()
    if stop[0]:
        raise SolveStopped
    t_merge = time.perf_counter()
    _labels(st, nz, ny, nx, dims, k, labels.reshape(-1))
    t2 = time.perf_counter()
    stats = {
        "backend": "cpu",
        "algorithm": "boykov-kolmogorov",
        "threads": min(threads, nstrips),
        "strips": nstrips,
        "merge_levels": levels,
        "augmentations": naug,
        "origin_steps": walks,
        "build_s": t1 - t0,
        "strips_s": t_strips - t1,
        "merge_s": t_merge - t_strips,
        "solve_s": t2 - t1,
        "time_s": t2 - t0,
    }
    return int(flow0) + flow, labels, stats
