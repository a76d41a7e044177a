"""CPU maximum-cardinality bipartite matching: Pothen-Fan with lookahead and fairness.

:func:`scipy.sparse.csgraph.maximum_bipartite_matching` (Hopcroft-Karp from an empty
matching) is the test oracle here, not the product: its depth-first phase never marks
the vertices of a failed search, so a vertex reachable along k paths of increasing
level is expanded k times. On layered graphs (ladders of two vertices a level, each
joined to both vertices of the next level) that is exponential in the depth; SciPy
issue 26147 reports 8.8 s for 94 vertices. ``benchmarks/bench_matching.py`` measures
both on random, grid, chain and ladder graphs.

The solver below is Pothen-Fan+ (Duff, Kaya, Uçar 2011), compiled by numba: a
Karp-Sipser initial matching (a vertex with one unmatched neighbour left is matched to
it, which is always safe; otherwise the next free left vertex takes its free neighbour
of smallest degree) or, when the smaller side's mean degree is high, a plain greedy
one (``_GREEDY_DEGREE`` says why), then phases of depth-first searches from every free
left vertex with

* one visited mark per right vertex and phase, so a failed search is never repeated
  inside a phase (the search is linear in the edges per phase);
* lookahead: before descending, a left vertex scans its not yet scanned neighbours for
  a free one (a per-vertex pointer that only moves forward, since a matched right
  vertex stays matched);
* fairness: odd phases scan adjacency lists forwards, even phases backwards.

A phase that augments nothing proves the matching maximum (the searches of that phase
covered everything reachable from the free left vertices). So does a matching that
covers every non-isolated vertex of the smaller side: both stages stop there, which
spares a 1,000,000 x 100 graph a phase of searches from its 999,900 free rows.

References
----------
A. Pothen and C.-J. Fan, "Computing the block triangular form of a sparse matrix", ACM
TOMS 16(4), 1990. I. S. Duff, K. Kaya and B. Uçar, "Design, implementation, and
analysis of maximum transversal algorithms", ACM TOMS 38(2), 2011. R. M. Karp and M.
Sipser, "Maximum matchings in sparse random graphs", FOCS 1981.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["maximum_bipartite_matching_cpu"]


# the start: a graph whose smaller side has a mean degree of at least _GREEDY_DEGREE
# (edges over min(rows, columns)) starts with the greedy pass instead of
# Karp-Sipser. Karp-Sipser's transpose and degree upkeep read the edges about three
# times over (complete 2000 x 2000: 44-60 ms of a 47-70 ms solve, SciPy 6-11 ms),
# while on such graphs the greedy matching is maximum or nearly so and the phases
# finish it. Measured, start + phases (solver only, ms, Karp-Sipser / greedy):
# random 20000 x 20000 of degree 4: 8.4 / 14.9, degree 8: 8.8 / 8.6, 16: 19.6 /
# 2.7, 64: 73 / 1.9; 100000 x 1000 of row degree 5: 25 / 0.15; 20000 x 2000 of row
# degree 3 (30 a column): 0.93 / 0.10; Karp-Sipser traps of degree 12: 69 / 31
_GREEDY_DEGREE = 16


@nb.njit(cache=True, nogil=True)
def _karp_sipser(ptr, idx, nl, nr):  # pragma: no cover - compiled
    """Karp-Sipser initial matching: match a vertex of degree one (counting unmatched
    neighbours) with its neighbour while there is one, else the next unmatched left
    vertex with its unmatched neighbour of smallest degree. Stops once every
    non-isolated vertex of the smaller side is matched.

    Returns ``(lmatch, rmatch, look, matched, limit, scans)``: ``look`` is the
    lookahead pointer for :func:`_pothen_fan` (past the end for a left vertex with
    no free neighbour), ``limit`` the bound min(non-isolated left, non-isolated
    right) on any matching, ``scans`` the adjacency entries read."""
    nnz = idx.size
    rptr = np.zeros(nr + 1, dtype=np.int64)
    for e in range(nnz):
        rptr[idx[e] + 1] += 1
    for r in range(nr):
        rptr[r + 1] += rptr[r]
    ridx = np.empty(nnz, dtype=np.int32)
    fill = rptr[:-1].copy()
    for u in range(nl):
        for e in range(ptr[u], ptr[u + 1]):
            r = idx[e]
            ridx[fill[r]] = u
            fill[r] += 1
    scans = 2 * nnz
    ldeg = np.empty(nl, dtype=np.int64)
    rdeg = np.empty(nr, dtype=np.int64)
    lnon = 0
    rnon = 0
    for u in range(nl):
        ldeg[u] = ptr[u + 1] - ptr[u]
        if ldeg[u] > 0:
            lnon += 1
    for r in range(nr):
        rdeg[r] = rptr[r + 1] - rptr[r]
        if rdeg[r] > 0:
            rnon += 1
    limit = min(lnon, rnon)
    lmatch = np.full(nl, -1, dtype=np.int32)
    rmatch = np.full(nr, -1, dtype=np.int32)
    stack = np.empty(nl + nr, dtype=np.int64)  # left u as u, right r as nl + r
    top = 0
    for u in range(nl):
        if ldeg[u] == 1:
            stack[top] = u
            top += 1
    for r in range(nr):
        if rdeg[r] == 1:
            stack[top] = nl + r
            top += 1
    nxt = 0  # next left vertex for the degree > 1 step
    matched = 0
    while matched < limit:
        u = -1
        r = -1
        if top > 0:
            top -= 1
            x = stack[top]
            if x < nl:
                if lmatch[x] != -1 or ldeg[x] < 1:
                    continue
                u = x
                e = ptr[u]
                while e < ptr[u + 1]:
                    if rmatch[idx[e]] == -1:
                        r = idx[e]
                        break
                    e += 1
                scans += e + 1 - ptr[u]
            else:
                r = x - nl
                if rmatch[r] != -1 or rdeg[r] < 1:
                    continue
                e = rptr[r]
                while e < rptr[r + 1]:
                    if lmatch[ridx[e]] == -1:
                        u = ridx[e]
                        break
                    e += 1
                scans += e + 1 - rptr[r]
        else:
            while nxt < nl and (lmatch[nxt] != -1 or ldeg[nxt] < 1):
                nxt += 1
            if nxt == nl:
                break
            u = nxt
            best = nl + nr + 1
            scans += ptr[u + 1] - ptr[u]
            for e in range(ptr[u], ptr[u + 1]):
                c = idx[e]
                if rmatch[c] == -1 and rdeg[c] < best:
                    best = rdeg[c]
                    r = c
        if u < 0 or r < 0:  # pragma: no cover - degrees count live neighbours
            continue
        lmatch[u] = r
        rmatch[r] = u
        matched += 1
        scans += (ptr[u + 1] - ptr[u]) + (rptr[r + 1] - rptr[r])
        for e in range(ptr[u], ptr[u + 1]):
            c = idx[e]
            if rmatch[c] == -1:
                rdeg[c] -= 1
                if rdeg[c] == 1:
                    stack[top] = nl + c
                    top += 1
        for e in range(rptr[r], rptr[r + 1]):
            w = ridx[e]
            if lmatch[w] == -1:
                ldeg[w] -= 1
                if ldeg[w] == 1:
                    stack[top] = w
                    top += 1
    # a free left vertex of live degree 0 has only matched neighbours, which stay
    # matched: its lookahead has nothing to find
    look = ptr[:-1].copy()
    for u in range(nl):
        if lmatch[u] == -1 and ldeg[u] == 0:
            look[u] = ptr[u + 1]
    return lmatch, rmatch, look, matched, limit, scans


@nb.njit(cache=True, nogil=True)
def _greedy(ptr, idx, nl, nr):  # pragma: no cover - compiled
    """Greedy initial matching for dense graphs: every left vertex in turn takes the
    first free neighbour of its list, read cyclically from the position of the
    column it would take in a diagonal matching (row ``u`` of a complete square
    graph finds column ``u`` free at once; from the list's start it would read
    ``u + 1`` entries). Stops once every non-isolated left vertex or every right
    vertex is matched.

    Returns :func:`_karp_sipser`'s tuple; ``limit`` counts the right vertices, not
    the non-isolated ones (that would take a pass over the edges)."""
    lnon = 0
    for u in range(nl):
        if ptr[u + 1] > ptr[u]:
            lnon += 1
    limit = min(lnon, nr)
    k = min(nl, nr)
    lmatch = np.full(nl, -1, dtype=np.int32)
    rmatch = np.full(nr, -1, dtype=np.int32)
    look = ptr[:-1].copy()
    matched = 0
    scans = 0
    for u in range(nl):
        if matched == limit:
            break
        b = ptr[u]
        deg = ptr[u + 1] - b
        if deg == 0:
            continue
        start = b + ((u % k) * deg) // k
        r = -1
        for e in range(start, b + deg):
            scans += 1
            if rmatch[idx[e]] == -1:
                r = idx[e]
                break
        if r < 0:
            for e in range(b, start):
                scans += 1
                if rmatch[idx[e]] == -1:
                    r = idx[e]
                    break
        if r < 0:
            look[u] = b + deg  # every neighbour is matched, and stays so
            continue
        lmatch[u] = r
        rmatch[r] = u
        matched += 1
    return lmatch, rmatch, look, matched, limit, scans


@nb.njit(cache=True, nogil=True)
def _pothen_fan(
    ptr, idx, nl, nr, lmatch, rmatch, look, matched, limit
):  # pragma: no cover - compiled
    """Phases of depth-first searches with lookahead from the free left vertices
    (the module's docstring), until a phase augments nothing or the matching
    reaches ``limit``. Returns ``(lmatch, rmatch, phases, scans)``."""
    scans = 0
    phase = 0
    if matched >= limit:
        return lmatch, rmatch, phase, scans
    free = np.empty(nl, dtype=np.int32)
    nfree = 0
    for u in range(nl):
        if lmatch[u] == -1 and ptr[u + 1] > ptr[u]:
            free[nfree] = u
            nfree += 1
    visited = np.zeros(nr, dtype=np.int32)
    stack = np.empty(nl, dtype=np.int32)
    edge = np.empty(nl, dtype=np.int64)  # next edge to try at each stack level
    while nfree > 0:
        phase += 1
        forward = phase % 2 == 1
        augmented = 0
        for k in range(nfree):
            if matched == limit:
                break
            u0 = free[k]
            top = 0
            stack[0] = u0
            edge[0] = ptr[u0] if forward else ptr[u0 + 1] - 1
            while top >= 0:
                u = stack[top]
                # lookahead: a free neighbour ends the search
                r_free = -1
                e = look[u]
                e1 = ptr[u + 1]
                while e < e1:
                    r = idx[e]
                    e += 1
                    if rmatch[r] == -1:
                        r_free = r
                        break
                scans += e - look[u]
                look[u] = e
                if r_free >= 0:
                    r = r_free
                    for j in range(top, -1, -1):
                        w = stack[j]
                        nxt = lmatch[w]
                        lmatch[w] = r
                        rmatch[r] = w
                        r = nxt
                    augmented += 1
                    matched += 1
                    break
                # descend through the next unvisited (matched) neighbour
                descended = False
                if forward:
                    e = edge[top]
                    e_from = e
                    e1 = ptr[u + 1]
                    while e < e1:
                        r = idx[e]
                        e += 1
                        if visited[r] != phase:
                            visited[r] = phase
                            edge[top] = e
                            w = rmatch[r]
                            top += 1
                            stack[top] = w
                            edge[top] = ptr[w]
                            descended = True
                            break
                    scans += e - e_from  # entries read
                else:
                    e = edge[top]
                    e_from = e
                    e0 = ptr[u]
                    while e >= e0:
                        r = idx[e]
                        e -= 1
                        if visited[r] != phase:
                            visited[r] = phase
                            edge[top] = e
                            w = rmatch[r]
                            top += 1
                            stack[top] = w
                            edge[top] = ptr[w + 1] - 1
                            descended = True
                            break
                    scans += e_from - e
                if not descended:
                    top -= 1
        if augmented == 0 or matched == limit:
            break
        # keep the free left vertices that are still free
        m = 0
        for k in range(nfree):
            if lmatch[free[k]] == -1:
                free[m] = free[k]
                m += 1
        nfree = m
    return lmatch, rmatch, phase, scans


def maximum_bipartite_matching_cpu(
    ptr: np.ndarray, idx: np.ndarray, nl: int, nr: int, stats: dict | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Maximum matching of a bipartite graph given as a CSR adjacency (host arrays).

    ``ptr`` (nl + 1,) and ``idx`` (nnz,) list the right neighbours of each left
    vertex, validated by the caller. Returns ``(lmatch, rmatch)``, int32 arrays of
    the partner of each left / right vertex, -1 when unmatched. A ``stats`` dict
    receives the work done: ``start`` ("karp_sipser" or "greedy"),
    ``start_matched``, ``start_scans`` and ``phase_scans`` (adjacency entries read
    by the start and by the phases), and ``phases``.
    """
    ptr = np.ascontiguousarray(ptr, dtype=np.int64)
    idx = np.ascontiguousarray(idx, dtype=np.int32)
    if nl == 0 or nr == 0 or idx.size == 0:
        if stats is not None:
            stats.update(
                start="none", start_matched=0, start_scans=0, phases=0, phase_scans=0
            )
        return np.full(nl, -1, dtype=np.int32), np.full(nr, -1, dtype=np.int32)
    greedy = idx.size >= _GREEDY_DEGREE * min(nl, nr)
    start = _greedy if greedy else _karp_sipser
    lmatch, rmatch, look, matched, limit, start_scans = start(ptr, idx, nl, nr)
    lmatch, rmatch, phases, phase_scans = _pothen_fan(
        ptr, idx, nl, nr, lmatch, rmatch, look, matched, limit
    )
    if stats is not None:
        stats.update(
            start="greedy" if greedy else "karp_sipser",
            start_matched=int(matched),
            start_scans=int(start_scans),
            phases=int(phases),
            phase_scans=int(phase_scans),
        )
    return lmatch, rmatch
