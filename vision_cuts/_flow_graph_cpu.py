"""CPU maximum flow on general CSR graphs: push-relabel in numba (the hi_pr recipe).

Phase 1 computes a maximum preflow: active nodes (positive excess, label below n) are
discharged in highest-label order (buckets of active nodes per label) or in FIFO
order; current arcs; a global relabel (backward BFS from the sink over residual arcs)
at the start and whenever the relabel work since the last one exceeds
``0.5 * (6 n + m)``; the gap heuristic (doubly linked lists of all nodes per label:
when a label empties, every node above it can no longer reach the sink and gets label
n). Phase 1 ends when no node with excess can reach the sink: the excess of the sink
is the maximum-flow value, and the nodes that reach the sink in the residual graph are
the sink side of a minimum cut.

Phase 2 turns the preflow into a flow: the excess left on source-side nodes is pushed
back to the source by FIFO push-relabel with labels = residual distances to the source
(global relabels from the source at the same frequency).

Exactness: residual capacities, excesses and the value are int64; the front door
bounds the total capacity below 2**61.

References
----------
A. V. Goldberg and R. E. Tarjan, "A new approach to the maximum-flow problem", JACM
35(4), 1988. B. V. Cherkassky and A. V. Goldberg, "On implementing the push-relabel
method for the maximum flow problem", Algorithmica 19, 1997 (hi_pr).
"""

from __future__ import annotations

import time

import numba as nb
import numpy as np

__all__ = ["maximum_flow_cpu"]

_ALPHA = 6
_BETA = 12
_FREQ = 0.5


@nb.njit(cache=True, nogil=True)
def _bfs(n, indptr, heads, rev, r, h, target, excluded, inf, queue):
    """h = residual distance to ``target``, ``inf`` where unreachable; returns #reached.

    ``excluded`` is never entered (the source in phase 1, the sink in phase 2).
    """
    for v in range(n):
        h[v] = inf
    h[target] = 0
    queue[0] = target
    qh = 0
    qt = 1
    while qh < qt:
        u = queue[qh]
        qh += 1
        du = h[u] + 1
        for a in range(indptr[u], indptr[u + 1]):
            w = heads[a]
            if h[w] == inf and w != excluded and r[rev[a]] > 0:
                h[w] = du
                queue[qt] = w
                qt += 1
    return qt


@nb.njit(cache=True, nogil=True)
def _phase1(n, indptr, heads, rev, r, ex, h, s, t, fifo, stats):
    m = heads.shape[0]
    bfirst = np.full(n + 1, -1, np.int32)
    bnext = np.full(n, -1, np.int32)
    bprev = np.full(n, -1, np.int32)
    afirst = np.full(n + 1, -1, np.int32)
    anext = np.full(n, -1, np.int32)
    inq = np.zeros(n, np.bool_)
    ring = np.empty(n, np.int32)
    queue = np.empty(n, np.int32)
    cur = np.empty(n, np.int64)
    for a in range(indptr[s], indptr[s + 1]):
        c = r[a]
        if c > 0:
            w = heads[a]
            r[a] = 0
            r[rev[a]] += c
            ex[w] += c
            ex[s] -= c
    freq = _FREQ * (_ALPHA * n + m)
    work = freq + 1.0  # start with a global relabel
    dmax = 0
    amax = 0
    qh = 0
    qt = 0
    pushes = 0
    relabels = 0
    globals_ = 0
    gaps = 0
    while True:
        if work > freq:
            # global relabel: exact labels, rebuild the buckets and the active set
            globals_ += 1
            work = 0.0
            _bfs(n, indptr, heads, rev, r, h, t, s, n, queue)
            h[s] = n
            bfirst[:] = -1  # all labels: stale active entries above dmax go too
            afirst[:] = -1
            dmax = 0
            amax = 0
            qh = 0
            qt = 0
            for v in range(n):
                cur[v] = indptr[v]
                inq[v] = False
                hv = h[v]
                if v == s or v == t or hv >= n:
                    continue
                nx = bfirst[hv]
                bnext[v] = nx
                bprev[v] = -1
                if nx >= 0:
                    bprev[nx] = v
                bfirst[hv] = v
                if hv > dmax:
                    dmax = hv
                if ex[v] > 0:
                    if fifo:
                        ring[qt] = v
                        qt += 1
                        if qt == n:
                            qt = 0
                        inq[v] = True
                    else:
                        anext[v] = afirst[hv]
                        afirst[hv] = v
                        if hv > amax:
                            amax = hv
        # select an active node
        if fifo:
            if qh == qt:
                break
            v = ring[qh]
            qh += 1
            if qh == n:
                qh = 0
            inq[v] = False
        else:
            while amax > 0 and afirst[amax] < 0:
                amax -= 1
            if amax <= 0:
                break
            v = afirst[amax]
            afirst[amax] = anext[v]
        hv = h[v]
        if ex[v] <= 0 or hv >= n:
            continue
        # discharge v
        start = indptr[v]
        end = indptr[v + 1]
        while True:
            a = cur[v]
            ev = ex[v]
            while a < end:
                ra = r[a]
                if ra > 0:
                    w = heads[a]
                    if h[w] == hv - 1:
                        d = ev if ev < ra else ra
                        r[a] = ra - d
                        r[rev[a]] += d
                        ev -= d
                        pushes += 1
                        if ex[w] == 0 and w != t:
                            if fifo:
                                if not inq[w]:
                                    ring[qt] = w
                                    qt += 1
                                    if qt == n:
                                        qt = 0
                                    inq[w] = True
                            else:
                                anext[w] = afirst[hv - 1]
                                afirst[hv - 1] = w
                                if hv - 1 > amax:
                                    amax = hv - 1
                        ex[w] += d
                        if ev == 0:
                            break
                a += 1
            ex[v] = ev
            cur[v] = a
            if ev == 0:
                break
            # relabel
            relabels += 1
            work += _BETA + (end - start)
            newh = n
            besta = start
            for b in range(start, end):
                if r[b] > 0:
                    hw = h[heads[b]] + 1
                    if hw < newh:
                        newh = hw
                        besta = b
            # unlink v from bucket hv
            nx = bnext[v]
            pv = bprev[v]
            if pv >= 0:
                bnext[pv] = nx
            else:
                bfirst[hv] = nx
            if nx >= 0:
                bprev[nx] = pv
            if bfirst[hv] < 0:
                # gap: nothing above hv can reach the sink any more
                gaps += 1
                for k in range(hv + 1, dmax + 1):
                    u = bfirst[k]
                    while u >= 0:
                        h[u] = n
                        u = bnext[u]
                    bfirst[k] = -1
                dmax = hv - 1 if hv > 0 else 0
                h[v] = n
                break
            if newh >= n:
                h[v] = n
                break
            h[v] = newh
            cur[v] = besta
            nx = bfirst[newh]
            bnext[v] = nx
            bprev[v] = -1
            if nx >= 0:
                bprev[nx] = v
            bfirst[newh] = v
            if newh > dmax:
                dmax = newh
            hv = newh
    stats[0] += pushes
    stats[1] += relabels
    stats[2] += globals_
    stats[3] += gaps


@nb.njit(cache=True, nogil=True)
def _phase2(n, indptr, heads, rev, r, ex, h, s, t, stats):
    """Return the excess of every node but s and t to the source (FIFO)."""
    m = heads.shape[0]
    inf = 1 << 30
    ring = np.empty(n, np.int32)
    inq = np.zeros(n, np.bool_)
    queue = np.empty(n, np.int32)
    cur = np.empty(n, np.int64)
    freq = _FREQ * (_ALPHA * n + m)
    work = freq + 1.0
    qh = 0
    qt = 0
    pushes = 0
    relabels = 0
    globals_ = 0
    while True:
        if work > freq:
            globals_ += 1
            work = 0.0
            _bfs(n, indptr, heads, rev, r, h, s, t, inf, queue)
            qh = 0
            qt = 0
            for v in range(n):
                cur[v] = indptr[v]
                inq[v] = False
                if v != s and v != t and ex[v] > 0:
                    ring[qt] = v
                    qt += 1
                    if qt == n:
                        qt = 0
                    inq[v] = True
        if qh == qt:
            break
        v = ring[qh]
        qh += 1
        if qh == n:
            qh = 0
        inq[v] = False
        hv = h[v]
        if ex[v] <= 0 or hv >= inf:
            continue
        start = indptr[v]
        end = indptr[v + 1]
        while True:
            a = cur[v]
            ev = ex[v]
            while a < end:
                ra = r[a]
                if ra > 0:
                    w = heads[a]
                    if h[w] == hv - 1:
                        d = ev if ev < ra else ra
                        r[a] = ra - d
                        r[rev[a]] += d
                        ev -= d
                        pushes += 1
                        if ex[w] == 0 and w != s and w != t and not inq[w]:
                            ring[qt] = w
                            qt += 1
                            if qt == n:
                                qt = 0
                            inq[w] = True
                        ex[w] += d
                        if ev == 0:
                            break
                a += 1
            ex[v] = ev
            cur[v] = a
            if ev == 0:
                break
            relabels += 1
            work += _BETA + (end - start)
            newh = inf
            besta = start
            for b in range(start, end):
                if r[b] > 0:
                    hw = h[heads[b]] + 1
                    if hw < newh:
                        newh = hw
                        besta = b
            if newh >= inf:  # cannot happen for a valid preflow
                h[v] = inf
                break
            h[v] = newh
            cur[v] = besta
            hv = newh
    stats[4] += pushes
    stats[5] += relabels
    stats[6] += globals_


def maximum_flow_cpu(
    indptr: np.ndarray,
    heads: np.ndarray,
    reverse: np.ndarray,
    capacity: np.ndarray,
    source: int,
    sink: int,
    *,
    method: str = "highest",
) -> tuple[int, np.ndarray, np.ndarray, dict]:
    """Maximum flow by push-relabel; returns ``(value, flow, labels, stats)``.

    ``flow`` is the non-negative flow per arc (int64), ``labels`` uint8 per node with
    1 = sink side of a minimum cut.
    """
    n = int(indptr.shape[0] - 1)
    t0 = time.perf_counter()
    r = capacity.astype(np.int64, copy=True)
    ex = np.zeros(n, np.int64)
    h = np.zeros(n, np.int32)
    stats = np.zeros(8, np.int64)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    heads = np.ascontiguousarray(heads, dtype=np.int32)
    reverse = np.ascontiguousarray(reverse, dtype=np.int32)
    _phase1(
        n,
        indptr,
        heads,
        reverse,
        r,
        ex,
        h,
        int(source),
        int(sink),
        method == "fifo",
        stats,
    )
    t1 = time.perf_counter()
    value = int(ex[sink])
    queue = np.empty(n, np.int32)
    _bfs(n, indptr, heads, reverse, r, h, int(sink), int(source), n, queue)
    labels = (h < n).astype(np.uint8)
    _phase2(n, indptr, heads, reverse, r, ex, h, int(source), int(sink), stats)
    flow = np.maximum(capacity - r, 0)
    t2 = time.perf_counter()
    info = {
        "backend": "cpu",
        "method": method,
        "time_s": t2 - t0,
        "phase1_s": t1 - t0,
        "phase2_s": t2 - t1,
        "pushes": int(stats[0]),
        "relabels": int(stats[1]),
        "global_relabels": int(stats[2]),
        "gaps": int(stats[3]),
        "phase2_pushes": int(stats[4]),
        "phase2_relabels": int(stats[5]),
    }
    return value, flow, labels, info
