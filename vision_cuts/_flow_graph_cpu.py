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

Phase 2 turns the preflow into a flow as hi_pr does: a depth-first search along the
arcs that carry flow into the nodes with excess cancels the flow cycles and yields a
topological order, in which every node then hands its excess back to its flow
predecessors. It is linear when there are no flow cycles. Where the cycles are many
(cancelled arcs > n + m, e.g. genrmf) it stops and a highest-label push-relabel with
labels = distances to the source returns the excess instead, which there touches
only the few nodes the excess passes. A FIFO return (what phase 2 was) is quadratic
on chains and layered graphs of decreasing capacities, where the small trapped
excesses move one step per pass without merging (2e8 pushes, 5 s, on a 20000-node
chain); both orders used now make n pushes there.

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
# phase 2 leaves the depth-first return for the labelled one once the flow cycles it
# cancelled add up to more than _CYCLE_BUDGET * (n + m) arcs. Phase-2 ms at budgets
# 0 / 1 / unbounded (highest): genrmf 96x96x2 1.1 / 3.1 / 6.5 (8000 cycles, 2.8 (n+m)
# arcs), random 80000 nodes with capacities up to 2**40 86 / 62 / 64 (0.65 (n+m)).
_CYCLE_BUDGET = 1.0


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
def _phase2_dfs(n, indptr, heads, rev, cap, r, ex, s, t, budget, stats):
    """Return the excess of every node but s and t to the source (hi_pr's stage 2).

    The flow of arc ``a`` is ``cap[a] - r[a]``, so ``r[a] - cap[a] > 0`` is flow
    *into* the arc's tail from its head. A depth-first search from every node with
    excess follows these incoming-flow arcs backwards (towards the source, never
    into s or t) with current arcs. Reaching a node on the stack closes a flow
    cycle: it is cancelled by its smallest flow (at least one arc drops to zero
    for good, inflows only ever decrease) and the search resumes at the first
    emptied arc. A node is finished when all its inflow comes from finished nodes
    or s; finishing order is a topological order of the acyclic flow left, so
    walking it backwards every node hands its excess to its predecessors before
    they are handled, and each arc is pushed along at most once. Work:
    O(m + total cycle length), linear when there are no cycles. A FIFO push-relabel
    return instead moved the small excesses of a chain of decreasing capacities one
    step per pass: about n**2 / 2 pushes (2e8 at n = 20000) against n - 2 here.

    Returns False, before any excess moves, once the cancelled cycles' total length
    exceeds ``budget``: the preflow is then still valid (cancelling a cycle changes
    no excess) and ``_phase2_labels`` finishes.
    """
    color = np.zeros(n, np.uint8)  # 0 new, 1 on the stack, 2 finished
    pos = np.empty(n, np.int32)  # place on the stack
    stack = np.empty(n, np.int32)
    order = np.empty(n, np.int32)  # finishing order
    cur = indptr[:-1].copy()
    color[s] = 2
    color[t] = 2
    norder = 0
    scans = 0
    pushes = 0
    cycles = 0
    walked = 0
    for root in range(n):
        if color[root] != 0 or ex[root] <= 0:
            continue
        top = 0
        stack[0] = root
        pos[root] = 0
        color[root] = 1
        while top >= 0:
            u = stack[top]
            end = indptr[u + 1]
            a = cur[u]
            moved = False
            while a < end:
                scans += 1
                if r[a] > cap[a]:
                    w = heads[a]
                    cw = color[w]
                    if cw == 0:
                        cur[u] = a
                        top += 1
                        stack[top] = w
                        pos[w] = top
                        color[w] = 1
                        moved = True
                        break
                    if cw == 1:
                        # cycle stack[k] -> ... -> u -> w = stack[k] along cur arcs
                        cur[u] = a
                        k = pos[w]
                        delta = r[a] - cap[a]
                        for i in range(k, top):
                            b = cur[stack[i]]
                            f = r[b] - cap[b]
                            if f < delta:
                                delta = f
                        cut = -1
                        for i in range(k, top + 1):
                            b = cur[stack[i]]
                            r[b] -= delta
                            r[rev[b]] += delta
                            if cut < 0 and r[b] == cap[b]:
                                cut = i
                        cycles += 1
                        walked += top + 1 - k
                        scans += 2 * (top + 1 - k)
                        if walked > budget:
                            stats[4] += walked
                            stats[7] += scans
                            stats[8] += cycles
                            return False
                        for i in range(cut + 1, top + 1):
                            color[stack[i]] = 0
                        top = cut
                        moved = True
                        break
                a += 1
            if moved:
                continue
            cur[u] = end
            color[u] = 2
            order[norder] = u
            norder += 1
            top -= 1
    # return the excess, every node before its flow predecessors
    for i in range(norder - 1, -1, -1):
        u = order[i]
        e = ex[u]
        if e <= 0:
            continue
        for a in range(indptr[u], indptr[u + 1]):
            scans += 1
            f = r[a] - cap[a]
            if f > 0:
                d = e if e < f else f
                r[a] -= d
                r[rev[a]] += d
                ex[heads[a]] += d
                e -= d
                pushes += 1
                if e == 0:
                    break
        ex[u] = e
    stats[4] += pushes + walked
    stats[7] += scans
    stats[8] += cycles
    return True


@nb.njit(cache=True, nogil=True)
def _phase2_labels(n, indptr, heads, rev, r, ex, h, s, t, stats):
    """Return the excess to the source by push-relabel, highest label first.

    Labels are residual distances to the source (global relabels from the source at
    phase 1's frequency). Discharging the node farthest from the source first makes
    the excesses merge on their way back: a FIFO queue moved the small excesses of
    a decreasing chain one step per pass (n**2 / 2 pushes); in this order it makes
    n. Labels can pass n - 1, so the buckets go up to 2 n + 1. Used where the flow
    has many cycles (generated networks of grid frames, genrmf: 8000 cycles of 39
    arcs on average at 96x96x2, a 6-15 ms depth-first phase 2 against 1 ms here).
    """
    m = heads.shape[0]
    inf = 1 << 30
    top_label = 2 * n + 1
    afirst = np.full(top_label + 1, -1, np.int32)
    anext = np.full(n, -1, np.int32)
    queue = np.empty(n, np.int32)
    cur = np.empty(n, np.int64)
    freq = _FREQ * (_ALPHA * n + m)
    work = freq + 1.0
    amax = 0
    pushes = 0
    relabels = 0
    globals_ = 0
    while True:
        if work > freq:
            globals_ += 1
            work = 0.0
            _bfs(n, indptr, heads, rev, r, h, s, t, inf, queue)
            afirst[:] = -1
            amax = 0
            for v in range(n):
                cur[v] = indptr[v]
                hv = h[v]
                if v != s and v != t and ex[v] > 0 and hv < inf:
                    anext[v] = afirst[hv]
                    afirst[hv] = v
                    if hv > amax:
                        amax = hv
        while amax > 0 and afirst[amax] < 0:
            amax -= 1
        if amax <= 0:
            break
        v = afirst[amax]
        afirst[amax] = anext[v]
        hv = h[v]
        if ex[v] <= 0 or hv != amax:
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
                        if ex[w] == 0 and w != s and w != t:
                            # w becomes active one label below v: it is the
                            # highest active node unless amax is already above
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
            if newh > top_label:  # cannot happen for a valid preflow
                h[v] = inf
                break
            h[v] = newh
            cur[v] = besta
            hv = newh
    stats[4] += pushes
    stats[5] += relabels
    stats[6] += globals_
    stats[9] += 1


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
    1 = sink side of a minimum cut. Phase-2 counters: ``phase2_pushes`` (arcs
    whose flow changed: pushes plus the arcs of cancelled cycles),
    ``phase2_relabels``, ``phase2_scans`` (arcs looked at by the depth-first
    return), ``phase2_cycles`` and ``phase2_by_labels`` (the cycle budget ran out and
    the highest-label return finished).
    """
    n = int(indptr.shape[0] - 1)
    t0 = time.perf_counter()
    r = capacity.astype(np.int64, copy=True)
    ex = np.zeros(n, np.int64)
    h = np.zeros(n, np.int32)
    stats = np.zeros(10, np.int64)
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
    cap = capacity.astype(np.int64, copy=False)
    budget = int(_CYCLE_BUDGET * (n + heads.shape[0]))
    src = int(source)
    snk = int(sink)
    if not _phase2_dfs(n, indptr, heads, reverse, cap, r, ex, src, snk, budget, stats):
        _phase2_labels(n, indptr, heads, reverse, r, ex, h, src, snk, stats)
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
        "phase2_scans": int(stats[7]),
        "phase2_cycles": int(stats[8]),
        "phase2_by_labels": bool(stats[9]),
    }
    return value, flow, labels, info
