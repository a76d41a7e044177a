"""CPU linear assignment: one compiled numba solver for single problems and stacks.

A single problem is a stack of one, solved on the calling thread. Measured
(``benchmarks/bench_assignment.py``, 2 cores): 2.9-4.1x faster than SciPy's solver on
uniform integer costs and level with it on Euclidean point matching; ``lap.lapjv`` is
faster still on uniform square costs. On the optical flow's 2065 x 4095 matrix with 98%
of the pairs forbidden: 64 ms against SciPy's 52 ms (the solve itself 49 ms; the rest is
the scan for NaN and the copy-free checks).

Stacks of problems are solved in one compiled numba call, ``numba.prange`` over chunks
of problems (small stacks on the calling thread), so that many small problems cost no
Python overhead per problem. Each problem runs Jonker-Volgenant (column reduction,
reduction transfer, augmenting row reduction, shortest augmenting paths, as in JV's
paper and ``lap.lapjv``) when it has no forbidden pair and is square or nearly so
(padded to square with zero rows; see ``_use_jv``); otherwise a port of SciPy's
``scipy/optimize/_lsap.cpp`` step by step (same tie-breaking; the rows and columns
reached by a search are kept in lists so the dual update touches only those), which
handles ``inf`` and detects infeasibility as SciPy does. Workspace is allocated once per
chunk of problems.

Costs are float64; integer costs are exact while partial sums of costs and duals stay
below ``2**53`` in magnitude. ``+inf`` marks
a forbidden pair. The caller transposes problems with more rows than columns, negates
for maximisation; the batched solver flags problems holding NaN or ``-inf``
(after negation) instead of solving them.

References
----------
D. F. Crouse, "On implementing 2D rectangular assignment algorithms", IEEE Transactions
on Aerospace and Electronic Systems 52(4), 2016.

R. Jonker and A. Volgenant, "A shortest augmenting path algorithm for dense and sparse
linear assignment problems", Computing 38, 1987.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = [
    "INFEASIBLE",
    "INVALID",
    "SOLVED",
    "linear_sum_assignment_batched_cpu",
    "linear_sum_assignment_cpu",
]

_INF = np.inf
_ARR_CAP = 4  # augmenting-row-reduction steps per pass, in units of n


@nb.njit(cache=True, nogil=True, inline="always")
def _augment(pred, row4col, col4row, sink, start):
    """Flip the alternating path that ends at column ``sink`` back to row ``start``."""
    j = sink
    while True:
        i = pred[j]
        row4col[j] = i
        tmp = col4row[i]
        col4row[i] = j
        j = tmp
        if i == start:
            break


@nb.njit(cache=True, nogil=True)
def _solve_one(c, u, v, spc, path, col4row, row4col, rows, cols, remaining):
    """Min-cost assignment of every row of ``c`` (nr <= nc); False when infeasible.

    ``col4row`` receives the column of each row. The other arrays are workspace of
    length nr (``u``, ``col4row``, ``rows``) or nc (the rest).
    """
    nr, nc = c.shape
    for i in range(nr):
        u[i] = 0.0
        col4row[i] = -1
    for j in range(nc):
        v[j] = 0.0
        path[j] = -1
        row4col[j] = -1
    for cur in range(nr):
        # Dijkstra-like search for a shortest augmenting path from row ``cur``
        nrem = nc
        for it in range(nc):
            remaining[it] = nc - it - 1
            spc[it] = _INF
        nrows = 0
        ncols = 0
        minval = 0.0
        i = cur
        sink = -1
        while sink == -1:
            rows[nrows] = i
            nrows += 1
            index = -1
            lowest = _INF
            ui = u[i]
            for it in range(nrem):
                j = remaining[it]
                r = minval + c[i, j] - ui - v[j]
                if r < spc[j]:
                    path[j] = i
                    spc[j] = r
                s = spc[j]
                if s < lowest or (s == lowest and row4col[j] == -1):
                    lowest = s
                    index = it
            minval = lowest
            if minval == _INF:
                return False
            j = remaining[index]
            if row4col[j] == -1:
                sink = j
            else:
                i = row4col[j]
            cols[ncols] = j
            ncols += 1
            nrem -= 1
            remaining[index] = remaining[nrem]
        # dual update over the rows and columns the search reached
        u[cur] += minval
        for k in range(1, nrows):
            i = rows[k]
            u[i] += minval - spc[col4row[i]]
        for k in range(ncols):
            j = cols[k]
            v[j] -= minval - spc[j]
        _augment(path, row4col, col4row, sink, cur)
    return True


@nb.njit(cache=True, nogil=True)
def _jv_square(c, x, y, v, free, d, cols, pred, unique):
    """Jonker-Volgenant on a finite square ``c``: ``x`` receives the column of each row.

    Column reduction, reduction transfer, two rounds of augmenting row reduction,
    then shortest augmenting paths (Dijkstra on reduced costs, as in the JV paper and
    ``lap.lapjv``). Only the column duals ``v`` are kept (``u_i = min_j c_ij - v_j``).
    """
    n = c.shape[0]
    if n == 1:
        x[0] = 0
        return
    # column reduction
    for j in range(n):
        v[j] = _INF
        y[j] = 0
    for i in range(n):
        x[i] = -1
        unique[i] = True
        for j in range(n):
            if c[i, j] < v[j]:
                v[j] = c[i, j]
                y[j] = i
    for j in range(n - 1, -1, -1):
        i = y[j]
        if x[i] < 0:
            x[i] = j
        else:
            unique[i] = False
            y[j] = -1
    # reduction transfer
    nfree = 0
    for i in range(n):
        if x[i] < 0:
            free[nfree] = i
            nfree += 1
        elif unique[i]:
            j = x[i]
            low = _INF
            for j2 in range(n):
                if j2 != j:
                    r = c[i, j2] - v[j2]
                    if r < low:
                        low = r
            v[j] -= low
    # augmenting row reduction, twice. Each pass stops lowering duals after
    # _ARR_CAP * n steps (JV and lap.lapjv allow up to n per free row): on geometric
    # (Euclidean point-matching) costs the uncapped passes ping-pong between rows
    # with near-equal costs and cost 2-3.5x the whole solve at n = 128-512, while
    # uniform costs never reach the cap. The augmentation below finishes any rows
    # left free, so the cap changes the running time, not the optimum.
    arr_cap = _ARR_CAP * n
    for _ in range(2):
        if nfree == 0:
            break
        current = 0
        newfree = 0
        rr_cnt = 0
        while current < nfree:
            rr_cnt += 1
            fi = free[current]
            current += 1
            j1 = 0
            v1 = c[fi, 0] - v[0]
            j2 = -1
            v2 = _INF
            for j in range(1, n):
                r = c[fi, j] - v[j]
                if r < v2:
                    if r >= v1:
                        v2 = r
                        j2 = j
                    else:
                        v2 = v1
                        v1 = r
                        j2 = j1
                        j1 = j
            i0 = y[j1]
            v1_new = v[j1] - (v2 - v1)
            lowers = v1_new < v[j1]
            if rr_cnt < current * n and rr_cnt < arr_cap:
                if lowers:
                    v[j1] = v1_new
                elif i0 >= 0 and j2 >= 0:
                    j1 = j2
                    i0 = y[j2]
                if i0 >= 0:
                    if lowers:
                        current -= 1
                        free[current] = i0
                    else:
                        free[newfree] = i0
                        newfree += 1
            elif i0 >= 0:
                free[newfree] = i0
                newfree += 1
            x[fi] = j1
            y[j1] = fi
        nfree = newfree
    # augmentation: a shortest augmenting path from every remaining free row.
    # cols[:lo] are scanned, cols[lo:hi] (SCAN) are at the current least distance
    # and wait to be scanned, cols[hi:] (TODO) are the rest. Every pass that relaxes
    # TODO also finds its least distance (a free column first among ties), so that
    # when SCAN runs empty the next column joins it without a pass of its own: on
    # Monge costs (c_ij = i * j, rank one), where the row reduction leaves almost
    # every row free and each step settles one column, a separate search pass
    # doubled the column visits (n = 1000: 3.30e8 search plus 3.32e8 scan visits).
    for f in range(nfree):
        start = free[f]
        lowest = _INF
        kmin = 0
        for j in range(n):
            cols[j] = j
            pred[j] = start
            r = c[start, j] - v[j]
            d[j] = r
            if r < lowest or (r == lowest and y[j] < 0):
                lowest = r
                kmin = j
        lo = 0
        hi = 0
        nready = 0
        final_j = -1
        while True:
            if lo == hi:
                # SCAN is empty: the column of least distance joins it
                nready = lo
                j = cols[kmin]
                cols[kmin] = cols[hi]
                cols[hi] = j
                hi += 1
                if y[j] < 0:
                    final_j = j
                    break
            # scan: relax the TODO columns through the row of one SCAN column
            j = cols[lo]
            lo += 1
            i = y[j]
            mind = d[j]
            h = c[i, j] - v[j] - mind
            if lo != hi:
                # SCAN still holds a column, so no least distance is needed: the
                # plain relaxation (with ties in d, as on integer costs, tracking
                # the minimum costs about 20% more per column)
                for k in range(hi, n):
                    j = cols[k]
                    r = c[i, j] - v[j] - h
                    if r < d[j]:
                        d[j] = r
                        pred[j] = i
                        if r == mind:
                            if y[j] < 0:
                                final_j = j
                                break
                            cols[k] = cols[hi]
                            cols[hi] = j
                            hi += 1
                if final_j != -1:
                    break
                continue
            lowest = _INF
            kmin = hi
            for k in range(hi, n):
                j = cols[k]
                r = c[i, j] - v[j] - h
                dj = d[j]
                if r < dj:
                    d[j] = r
                    pred[j] = i
                    dj = r
                    if r == mind:
                        if y[j] < 0:
                            final_j = j
                            break
                        # at the least distance: onto SCAN (lowest and kmin are
                        # not used while SCAN holds a column)
                        cols[k] = cols[hi]
                        cols[hi] = j
                        hi += 1
                        continue
                if dj <= lowest:
                    if dj < lowest or y[j] < 0:
                        lowest = dj
                        kmin = k
            if final_j != -1:
                break
        # columns scanned before the last one joined SCAN from TODO are final:
        # shift their duals
        mind = d[final_j]
        for k in range(nready):
            j = cols[k]
            v[j] += d[j] - mind
        _augment(pred, y, x, final_j, start)


_FINITE, _FORBIDDEN, _INVALID = 0, 1, 2  # what _classify finds in a problem
SOLVED, INFEASIBLE, INVALID = 0, 1, 2  # per-problem status returned to the caller
# The duals and path lengths are sums of a few costs per row; near float64's limit
# (1.8e308) they overflow to inf. A problem with a finite cost beyond _BIG (status
# _HUGE from _solve_stack) is solved again scaled by a power of two that brings its
# costs below _BIG, when the scaling keeps every cost exactly.
_HUGE = 3
_BIG = 2.0**960


@nb.njit(cache=True, nogil=True)
def _classify(c):
    """``(kind, big)`` of one problem: _FINITE, _FORBIDDEN (some +inf) or _INVALID (a
    NaN or -inf), and whether a finite cost's magnitude exceeds _BIG."""
    kind = _FINITE
    big = False
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            x = c[i, j]
            if not -_INF < x < _INF:
                if x == _INF:
                    kind = _FORBIDDEN
                else:  # NaN or -inf
                    return _INVALID, big
            elif not -_BIG <= x <= _BIG:
                big = True
    return kind, big


@nb.njit(cache=True, nogil=True)
def _solve_chunk(costs, col4row, status, lo, hi, use_jv):
    """Solve ``costs[lo:hi]`` (nr <= nc) into ``col4row``, ``status``; the workspace is
    allocated once for the chunk.

    With ``use_jv``, problems without forbidden (infinite) entries run Jonker-Volgenant
    on the cost padded to square with zero rows (zero rows change no optimum: they
    cost the same whichever columns they take). The others run the SciPy port, which
    handles ``inf`` and detects infeasibility exactly as SciPy does. Problems holding
    a NaN or ``-inf`` are not solved (status INVALID).
    """
    nr, nc = costs.shape[1], costs.shape[2]
    u = np.empty(nr, np.float64)
    rows = np.empty(nr, np.int64)
    v = np.empty(nc, np.float64)
    spc = np.empty(nc, np.float64)
    path = np.empty(nc, np.int64)
    row4col = np.empty(nc, np.int64)
    cols = np.empty(nc, np.int64)
    remaining = np.empty(nc, np.int64)
    # the column lists the searches scan, unsigned: numba indexes with a signed
    # index through a check for negative values, in every array of the inner loops
    # (Machol-Wien 1000 x 1000, one thread: the SciPy port 0.87-1.66 s -> 0.50-0.92,
    # JV 1.19 -> 0.83; the caller keeps nc below 2**32)
    order = np.empty(nc, np.uint32)
    x = np.empty(nc, np.int64)
    unique = np.empty(nc, np.bool_)
    pad = use_jv and nr < nc
    # the padded square, allocated when a problem of the chunk first needs it
    # (an n x 2n problem with forbidden pairs never does: at 2065 x 4095 the
    # 134 MB of zeros cost more than its solve)
    square = np.zeros((0, nc), np.float64)
    for b in range(lo, hi):
        cb = costs[b]
        kind, big = _classify(cb)
        if kind == _INVALID:
            status[b] = INVALID
        elif big:
            status[b] = _HUGE  # solved again, scaled, by the caller
        elif use_jv and kind == _FINITE:
            if pad:
                if square.shape[0] == 0:
                    square = np.zeros((nc, nc), np.float64)
                square[:nr, :] = cb
                _jv_square(square, x, row4col, v, path, spc, order, remaining, unique)
            else:
                _jv_square(cb, x, row4col, v, path, spc, order, remaining, unique)
            col4row[b, :] = x[:nr]
            status[b] = SOLVED
        elif _solve_one(cb, u, v, spc, path, col4row[b], row4col, rows, cols, order):
            status[b] = SOLVED
        else:
            status[b] = INFEASIBLE


@nb.njit(cache=True, nogil=True, parallel=True)
def _solve_stack(costs, col4row, status, nchunks, use_jv):
    """:func:`_solve_chunk` over ``nchunks`` chunks of the stack, spread over the
    threads."""
    nbatch = costs.shape[0]
    for ch in nb.prange(nchunks):
        lo = ch * nbatch // nchunks
        hi = (ch + 1) * nbatch // nchunks
        _solve_chunk(costs, col4row, status, lo, hi, use_jv)


def _use_jv(k: int, m: int) -> bool:
    """Whether finite problems of ``k`` rows and ``m >= k`` columns run JV, padded to
    an ``m x m`` square with zero rows, rather than the SciPy port.

    The padding costs a ``m x m`` copy and a search per zero row, most of them still
    free after the row reduction. Measured (one thread, padded JV / port): at most
    10% wider it pays at every size (2000 x 2200 uniform 0.6, 1000 x 1100 0.36-0.6);
    wider, it pays only while the zero rows are few in cells (100 x 128 uniform 0.41,
    250 x 350 0.52) and turns against it beyond (250 x 475 ties 3.5, 500 x 950
    uniform 2.2, 2000 x 3800 2.3 on uniform, Euclidean and 0/1 costs).
    """
    return 10 * m <= 11 * k or (m <= 2 * k and (m - k) * m <= 2**16)


# Stacks of fewer entries (B * n * m) than this are solved on the calling thread.
# Opening the parallel region wakes every worker and waits at its closing barrier,
# even for workers with no chunk; on a loaded machine that wait lasts about a
# scheduler slice: one 250 x 250 problem took 9.5 ms (median, 2 threads) against
# 0.9-1.3 ms on one thread, one 2 x 2 problem 0.4-1.6 ms against 3 us.
_SERIAL_ENTRIES = 2**13


def _solve(work, col4row, status, use_jv):
    """:func:`_solve_chunk` over the stack ``work``: on the calling thread for one
    problem or a small stack, else in chunks over the threads."""
    nbatch, n, m = work.shape
    if nbatch == 1 or nbatch * n * m < _SERIAL_ENTRIES:
        _solve_chunk(work, col4row, status, 0, nbatch, use_jv)
    else:
        nchunks = min(nbatch, 8 * nb.get_num_threads())
        _solve_stack(work, col4row, status, nchunks, use_jv)


def linear_sum_assignment_batched_cpu(
    costs: np.ndarray, maximize: bool, name: str = "costs", batched: bool = True
) -> tuple:
    """Solve a (B, n, m) stack; returns ``(row_ind, col_ind, status)``.

    A problem whose costs reach beyond 2**960 is solved scaled by the power of two
    that brings them below it; where that scaling cannot keep one of its other costs
    exactly (a cost near float64's smallest, beside one near its largest) that is a
    ValueError naming the cost (``name``, its index without the batch axis unless
    ``batched``).

    ``row_ind`` and ``col_ind`` are int64 arrays of shape (B, min(n, m)), each row of
    ``row_ind`` sorted; ``status`` is an int8 array of shape (B,): SOLVED, INFEASIBLE,
    or INVALID for a problem holding a NaN or an infinity of the wrong sign (the
    caller reports those; the scan costs nothing extra here). Entries of unsolved
    problems are unspecified.
    """
    nbatch, n, m = costs.shape
    k = min(n, m)
    _check_side(costs.shape, name)
    if nbatch == 0 or k == 0:
        empty = np.zeros((nbatch, k), dtype=np.int64)
        return empty, empty.copy(), np.zeros(nbatch, dtype=np.int8)
    transpose = n > m
    work = costs.transpose(0, 2, 1) if transpose else costs
    # one contiguous float64 copy at most; negation turns maximisation into
    # minimisation (-inf forbidden pairs become +inf; a +inf becomes -inf, which the
    # solver flags INVALID)
    if maximize:
        work = np.negative(work, out=np.empty(work.shape), dtype=np.float64)
    else:
        work = np.ascontiguousarray(work, dtype=np.float64)
    col4row = np.empty((nbatch, k), dtype=np.int64)
    status = np.empty(nbatch, dtype=np.int8)
    use_jv = _use_jv(k, max(n, m))
    _solve(work, col4row, status, use_jv)
    huge = np.flatnonzero(status == _HUGE)
    if huge.size:
        part = work[huge]
        finite = np.isfinite(part)
        # each problem's own power of two: its largest magnitude below 2**960
        top = np.where(finite, np.abs(part), 0.0).max(axis=(1, 2))
        shift = (np.frexp(top)[1] - 960)[:, None, None]
        sub = np.ldexp(part, -shift)
        kept = (np.ldexp(sub, shift) == part) | ~finite
        if not kept.all():
            p, i, j = (int(v) for v in np.argwhere(~kept)[0])
            if transpose:
                i, j = j, i
            value = costs[int(huge[p]), i, j].item()
            at = (int(huge[p]), i, j) if batched else (i, j)
            raise ValueError(
                f"{name} mixes costs beyond 2**960 with {value!r} "
                f"at index {at}, which float64 cannot keep once the large costs are "
                f"scaled into range: rescale {name} (or round its smallest values)"
            )
        sub_col4row = np.empty((huge.size, k), dtype=np.int64)
        sub_status = np.empty(huge.size, dtype=np.int8)
        _solve(sub, sub_col4row, sub_status, use_jv)
        col4row[huge] = sub_col4row
        status[huge] = sub_status
    if not transpose:
        rows = np.broadcast_to(np.arange(k, dtype=np.int64), (nbatch, k)).copy()
        return rows, col4row, status
    # solved the transpose: col4row[b, j] is the original row of original column j
    order = np.argsort(col4row, axis=1, kind="stable")
    return np.take_along_axis(col4row, order, axis=1), order, status


_MAX_SIDE = 2**32 - 1  # the searches keep column lists in uint32 (_solve_chunk)


def _check_side(shape: tuple, name: str) -> None:
    """A problem's longer side must fit the uint32 column lists."""
    if max(shape[-2:]) > _MAX_SIDE:
        raise ValueError(
            f"{name} must have at most {_MAX_SIDE} rows and columns for the CPU "
            f"solver, got shape {tuple(shape)}"
        )


def linear_sum_assignment_cpu(cost: np.ndarray, maximize: bool) -> tuple:
    """Solve one (n, m) problem; returns ``(row_ind, col_ind, status)`` with
    ``status`` as in :func:`linear_sum_assignment_batched_cpu`.

    The same solve as a stack of one, without the stack's bookkeeping: about 10 us
    of the 17 us that a 5 x 5 call cost went to broadcasting the row indices, the
    thread count and the search for rescaled problems, against 1.3 us of solve.
    """
    n, m = cost.shape
    k = min(n, m)
    transpose = n > m
    _check_side(cost.shape, "cost")
    if k == 0 or transpose or cost.dtype != np.float64 or maximize:
        row_ind, col_ind, status = linear_sum_assignment_batched_cpu(
            cost[None], maximize, "cost", batched=False
        )
        return row_ind[0], col_ind[0], int(status[0])
    work = np.ascontiguousarray(cost)[None]
    col4row = np.empty((1, k), dtype=np.int64)
    status = np.empty(1, dtype=np.int8)
    _solve_chunk(work, col4row, status, 0, 1, _use_jv(k, m))
    if status[0] == _HUGE:  # solved again, scaled (rare)
        row_ind, col_ind, status = linear_sum_assignment_batched_cpu(
            cost[None], maximize, "cost", batched=False
        )
        return row_ind[0], col_ind[0], int(status[0])
    return np.arange(k, dtype=np.int64), col4row[0], int(status[0])
