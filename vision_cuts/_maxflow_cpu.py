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

import time

import numba as nb
import numpy as np

__all__ = ["maxflow_grid_cpu"]

_NOPARENT = -1  # free node
# parent codes 0..K-1: direction of the arc from the node to its parent
_TERMINAL = 8
_ORPHAN = 9
_FREE, _S, _T = 0, 1, 2
_INF_D = 1 << 30


def _padded_geometry(shape: tuple) -> tuple[tuple, np.ndarray]:
    """Padded shape and per-direction flat offsets (+x, -x, +y, -y, +z, -z)."""
    if len(shape) == 2:
        h, w = shape
        pshape = (h + 2, w + 1)
        wp = w + 1
        off = np.array([1, -1, wp, -wp], dtype=np.int64)
    else:
        d, h, w = shape
        pshape = (d + 2, h + 1, w + 1)
        wp, sp = w + 1, (h + 1) * (w + 1)
        off = np.array([1, -1, wp, -wp, sp, -sp], dtype=np.int64)
    return pshape, off


@nb.njit(cache=True, nogil=True)
def _build(source, sink, edges, nz, ny, nx, pny, pnx, K, rc, tr):
    """Fill the padded residual arrays; return the flow that cancels at the terminals."""
    flow0 = np.int64(0)
    n = nz * ny * nx
    for z in range(nz):
        for y in range(ny):
            i0 = (z * ny + y) * nx
            p0 = ((z + 1) * pny + y) * pnx if K == 6 else (y + 1) * pnx
            for x in range(nx):
                i = i0 + x
                p = p0 + x
                s = np.int64(source[i])
                t = np.int64(sink[i])
                if s < t:
                    flow0 += s
                else:
                    flow0 += t
                tr[p] = np.int32(s - t)
                for k in range(K):
                    rc[p * K + k] = edges[k * n + i]
    return flow0


@nb.njit(cache=True, nogil=True)
def _bk(rc, tr, off, K, ts, dist, parent, tree, queue, inq, orph):
    """Boykov-Kolmogorov max-flow on the padded grid; returns (flow, augmentations)."""
    npad = tr.shape[0]
    qcap = queue.shape[0]
    ocap = orph.shape[0]
    qhead = 0
    qtail = 0
    qlen = 0
    for p in range(npad):
        v = tr[p]
        if v != 0:
            tree[p] = 1 if v > 0 else 2
            parent[p] = 8
            ts[p] = 0
            dist[p] = 1
            queue[qtail] = p
            qtail += 1
            qlen += 1
            inq[p] = 1
        else:
            tree[p] = 0
            parent[p] = -1
    if qtail == qcap:
        qtail = 0
    flow = np.int64(0)
    naug = np.int64(0)
    now = np.int64(0)
    cur = -1
    while True:
        # ---- pick an active node -------------------------------------------------
        i = -1
        if cur >= 0 and parent[cur] != -1:
            i = cur
        else:
            cur = -1
            while qlen > 0:
                c = queue[qhead]
                qhead += 1
                if qhead == qcap:
                    qhead = 0
                qlen -= 1
                inq[c] = 0
                if parent[c] != -1:
                    i = c
                    break
            if i < 0:
                break
        # ---- grow ----------------------------------------------------------------
        mi = -1  # tail of the meeting arc (source-tree side)
        mk = -1  # its direction
        ti = tree[i]
        base = i * K
        if ti == 1:
            for k in range(K):
                if rc[base + k] > 0:
                    j = i + off[k]
                    pj = parent[j]
                    if pj == -1:
                        tree[j] = 1
                        parent[j] = k ^ 1
                        ts[j] = ts[i]
                        dist[j] = dist[i] + 1
                        if inq[j] == 0:
                            inq[j] = 1
                            queue[qtail] = j
                            qtail += 1
                            if qtail == qcap:
                                qtail = 0
                            qlen += 1
                    elif tree[j] == 2:
                        mi = i
                        mk = k
                        break
                    elif ts[j] <= ts[i] and dist[j] > dist[i]:
                        parent[j] = k ^ 1
                        ts[j] = ts[i]
                        dist[j] = dist[i] + 1
        else:
            for k in range(K):
                j = i + off[k]
                if rc[j * K + (k ^ 1)] > 0:
                    pj = parent[j]
                    if pj == -1:
                        tree[j] = 2
                        parent[j] = k ^ 1
                        ts[j] = ts[i]
                        dist[j] = dist[i] + 1
                        if inq[j] == 0:
                            inq[j] = 1
                            queue[qtail] = j
                            qtail += 1
                            if qtail == qcap:
                                qtail = 0
                            qlen += 1
                    elif tree[j] == 1:
                        mi = j
                        mk = k ^ 1
                        break
                    elif ts[j] <= ts[i] and dist[j] > dist[i]:
                        parent[j] = k ^ 1
                        ts[j] = ts[i]
                        dist[j] = dist[i] + 1
        now += 1
        if now >= (1 << 30):  # keep timestamps in int32: restart the clock
            for p in range(npad):
                ts[p] = 0
            now = 1
        if mi < 0:
            cur = -1
            continue
        cur = i
        # ---- augment -------------------------------------------------------------
        mj = mi + off[mk]
        b = rc[mi * K + mk]
        v = mi
        while parent[v] != 8:
            a = parent[v]
            u = v + off[a]
            r = rc[u * K + (a ^ 1)]
            if r < b:
                b = r
            v = u
        if tr[v] < b:
            b = tr[v]
        v = mj
        while parent[v] != 8:
            a = parent[v]
            r = rc[v * K + a]
            if r < b:
                b = r
            v = v + off[a]
        if -tr[v] < b:
            b = -tr[v]
        rc[mi * K + mk] -= b
        rc[mj * K + (mk ^ 1)] += b
        # orphan deque: augment pushes to the front, adoption to the rear
        ohead = 0
        olen = 0
        v = mi
        while parent[v] != 8:
            a = parent[v]
            u = v + off[a]
            rc[v * K + a] += b
            rc[u * K + (a ^ 1)] -= b
            if rc[u * K + (a ^ 1)] == 0:
                parent[v] = 9
                ohead -= 1
                if ohead < 0:
                    ohead += ocap
                orph[ohead] = v
                olen += 1
            v = u
        tr[v] -= b
        if tr[v] == 0:
            parent[v] = 9
            ohead -= 1
            if ohead < 0:
                ohead += ocap
            orph[ohead] = v
            olen += 1
        v = mj
        while parent[v] != 8:
            a = parent[v]
            u = v + off[a]
            rc[u * K + (a ^ 1)] += b
            rc[v * K + a] -= b
            if rc[v * K + a] == 0:
                parent[v] = 9
                ohead -= 1
                if ohead < 0:
                    ohead += ocap
                orph[ohead] = v
                olen += 1
            v = u
        tr[v] += b
        if tr[v] == 0:
            parent[v] = 9
            ohead -= 1
            if ohead < 0:
                ohead += ocap
            orph[ohead] = v
            olen += 1
        flow += b
        naug += 1
        # ---- adopt ---------------------------------------------------------------
        now += 1
        while olen > 0:
            o = orph[ohead]
            ohead += 1
            if ohead == ocap:
                ohead = 0
            olen -= 1
            to = tree[o]
            dmin = _INF_D
            amin = -1
            obase = o * K
            for k in range(K):
                j = o + off[k]
                if to == 1:
                    ok = rc[j * K + (k ^ 1)] > 0
                else:
                    ok = rc[obase + k] > 0
                if ok and tree[j] == to and parent[j] != -1:
                    # distance of j to its terminal, if its origin is a terminal
                    d = 0
                    jj = j
                    while True:
                        if ts[jj] == now:
                            d += dist[jj]
                            break
                        a = parent[jj]
                        d += 1
                        if a == 8:
                            ts[jj] = now
                            dist[jj] = 1
                            break
                        if a == 9:
                            d = _INF_D
                            break
                        jj = jj + off[a]
                    if d < _INF_D:
                        if d < dmin:
                            amin = k
                            dmin = d
                        jj = j
                        while ts[jj] != now:
                            ts[jj] = now
                            dist[jj] = d
                            d -= 1
                            jj = jj + off[parent[jj]]
            if amin >= 0:
                parent[o] = amin
                ts[o] = now
                dist[o] = dmin + 1
            else:
                for k in range(K):
                    j = o + off[k]
                    if tree[j] == to and parent[j] != -1:
                        if to == 1:
                            act = rc[j * K + (k ^ 1)] > 0
                        else:
                            act = rc[obase + k] > 0
                        if act and inq[j] == 0:
                            inq[j] = 1
                            queue[qtail] = j
                            qtail += 1
                            if qtail == qcap:
                                qtail = 0
                            qlen += 1
                        a = parent[j]
                        if a != 8 and a != 9 and j + off[a] == o:
                            parent[j] = 9
                            # rear insert: position ohead + olen
                            pos = ohead + olen
                            if pos >= ocap:
                                pos -= ocap
                            orph[pos] = j
                            olen += 1
                tree[o] = 0
                parent[o] = -1
    return flow, naug


@nb.njit(cache=True, nogil=True)
def _labels(tree, nz, ny, nx, pny, pnx, K, out):
    for z in range(nz):
        for y in range(ny):
            i0 = (z * ny + y) * nx
            p0 = ((z + 1) * pny + y) * pnx if K == 6 else (y + 1) * pnx
            for x in range(nx):
                out[i0 + x] = 0 if tree[p0 + x] == 1 else 1


def maxflow_grid_cpu(source: np.ndarray, sink: np.ndarray, edges: np.ndarray
                     ) -> tuple[int, np.ndarray, dict]:
    """Exact max-flow / min-cut of a validated grid graph on the CPU.

    Inputs are C-contiguous int32 arrays as produced by :func:`vision_cuts.grid_graph`
    (border arcs zero, arc pairs within int32). Returns ``(flow, labels, stats)``.
    """
    shape = source.shape
    k = 2 * len(shape)
    t0 = time.perf_counter()
    labels = np.empty(shape, dtype=np.uint8)
    if source.size == 0:
        return 0, labels, {"backend": "cpu", "augmentations": 0, "time_s": 0.0}
    pshape, off = _padded_geometry(shape)
    npad = int(np.prod(pshape))
    nz, ny, nx = (1, *shape) if len(shape) == 2 else shape
    pny, pnx = pshape[-2], pshape[-1]
    rc = np.zeros(npad * k, dtype=np.int32)
    tr = np.zeros(npad, dtype=np.int32)
    flow0 = _build(source.reshape(-1), sink.reshape(-1), edges.reshape(-1),
                   nz, ny, nx, pny, pnx, k, rc, tr)
    t1 = time.perf_counter()
    ts = np.empty(npad, dtype=np.int32)
    dist = np.empty(npad, dtype=np.int32)
    parent = np.empty(npad, dtype=np.int8)
    tree = np.empty(npad, dtype=np.uint8)
    queue = np.empty(npad, dtype=np.int32)
    inq = np.zeros(npad, dtype=np.uint8)
    orph = np.empty(npad, dtype=np.int32)
    flow, naug = _bk(rc, tr, off, k, ts, dist, parent, tree, queue, inq, orph)
    _labels(tree, nz, ny, nx, pny, pnx, k, labels.reshape(-1))
    t2 = time.perf_counter()
    stats = {"backend": "cpu", "algorithm": "boykov-kolmogorov",
             "augmentations": int(naug), "build_s": t1 - t0, "solve_s": t2 - t1,
             "time_s": t2 - t0}
    return int(flow0) + int(flow), labels, stats
