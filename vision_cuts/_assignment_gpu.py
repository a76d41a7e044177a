"""GPU linear assignment: epsilon-scaling cost scaling (auction form), CuPy + CUDA.

Reduction (done here, on the device, with CuPy array operations):

1. Orient every problem so that it has no more rows than columns (transpose when
   ``n > m``), negate for ``maximize``, and pad to square ``N x N`` (``N = max(n, m)``)
   with rows of cost 0: the padded rows take the columns nobody else uses.
2. Shift by the smallest finite cost ``lo`` (over the whole stack), so costs are
   nonnegative integers in ``[0, R]``:

   * integer dtypes, and float arrays whose finite values are all integers below
     ``2**53`` in magnitude, are used exactly (``R = hi - lo``);
   * other float costs are quantised: ``q = rint((c - lo) * Q / R)`` with ``Q`` levels,
     ``Q = 2**20`` where the scaled costs then fit int32, else the largest power of two
     between ``2**16`` and ``2**20`` that does (or ``2**20`` with int64 costs). The
     returned assignment is optimal for ``q``, so its true total exceeds the optimum
     by at most ``k * R / Q`` (``k = min(n, m)`` pairs, each rounded by at most
     ``R / (2 Q)``): a relative ``1e-6`` of the cost range per pair with
     ``Q = 2**20`` (:func:`float_tolerance`).
3. Forbidden pairs (``inf``) get the finite cost ``M = k * R + 1``: any assignment
   that uses one costs more than every assignment that does not, so the optimum uses
   one exactly when the problem is infeasible (reported as status INFEASIBLE).
4. Multiply by ``N + 1``. Epsilon scaling ends with ``eps = 1``, so the final
   assignment is ``eps``-optimal with ``eps < 1 / N`` in the units of step 2: the
   exact optimum (Goldberg-Kennedy; Bertsekas).

Overflow: prices only rise, by at most ``2 * smax + 2 * eps`` per phase
(``smax`` = the largest scaled cost), and must stay below ``2**(63 - bits)``
(``bits = N.bit_length()`` low bits of each column word name the owner). The bound is
checked before launching: integer costs whose range is too large for it raise
``ValueError``, float costs get fewer quantisation levels. The kernels also flag an
overflow instead of wrapping.

Kernels (``kernels/assignment.cu``), chosen by problem size ``N``:

* ``N <= 32``: ``assign_small_warp``, one warp per problem (eight per block), one row
  per lane, all phases in one launch; shared-memory column words.
* ``32 < N <= 256``: ``assign_small_block``, one block per problem, a thread per row.
* ``N > 256``: per phase ``assign_keep_rows`` and ``assign_auction_rows``, a warp per
  row over all rows of the stack, global-memory column words, a persistent launch of
  as many blocks as are co-resident. The auction stops after ``GU_BIDS * free rows +
  GU_MIN_BIDS`` bids for a global price update (``assign_global_update``, Bellman-Ford
  to the free columns, ``GLOBAL_UPDATE``), then resumes; after each phase every row
  keeps only its arcs within ``N * eps`` of its pair when they number at most
  ``_ROW_CAND`` (arc fixing, ``ARC_FIXING``; see ``kernels/assignment.cu``).

References
----------
A. V. Goldberg and R. Kennedy, "An efficient cost scaling algorithm for the assignment
problem", Mathematical Programming 71, 1995.

D. P. Bertsekas, "The auction algorithm: a distributed relaxation method for the
assignment problem", Annals of Operations Research 14, 1988.

M. Łupińska, "Parallel implementation of flow and matching algorithms", 2011.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ._kernels import get_kernel, get_module

__all__ = [
    "INFEASIBLE",
    "INVALID",
    "SOLVED",
    "float_tolerance",
    "linear_sum_assignment_batched_gpu",
]

SOLVED, INFEASIBLE, INVALID = 0, 1, 2  # the status codes of _assignment_cpu
ALPHA = 10  # epsilon divisor between phases
FLOAT_LEVELS = 2**20  # quantisation levels of float costs (at most)
FLOAT_LEVELS_MIN = 2**16  # fewest levels before int64 costs are used instead
_INT32_MAX = 2**31 - 1
_EXACT_FLOAT = 2**53
_WARP_MAX_N = 32  # assign_small_warp up to this N
_BLOCK_MAX_N = 256  # assign_small_block up to this N, the row kernels above
_WARP_PROBLEMS = 8  # problems (warps) per block of assign_small_warp
_ROW_BLOCK = 256  # ASSIGN_BLOCK
_ROW_MIN_BLOCKS = 4  # ASSIGN_MIN_BLOCKS: co-resident blocks per SM
_ROW_CAND = 256  # ASSIGN_CAND: longest arc list of a row after arc fixing
GLOBAL_UPDATE = True  # global price updates in the row kernels' phases
ARC_FIXING = True  # per-row arc lists after each phase (row kernels)
GU_BIDS = 4  # a global update after GU_BIDS * (free rows) + GU_MIN_BIDS bids
GU_MIN_BIDS = 64


def schedule(smax: int, alpha: int = ALPHA) -> list[int]:
    """The epsilons of the phases: smax // alpha, // alpha, ... ending with 1."""
    eps, out = max(int(smax), 1), []
    while True:
        eps = max(1, eps // alpha)
        out.append(eps)
        if eps == 1:
            return out


def _prices_fit(smax: int, bits: int) -> bool:
    return 4 * len(schedule(smax, ALPHA)) * smax + smax + 1 < 2 ** (63 - bits)


@dataclasses.dataclass(frozen=True)
class Plan:
    """How the costs of one stack are turned into the kernels' integers."""

    n: int  # real rows (after orientation, n <= N)
    N: int  # padded size = columns
    lo: Any  # smallest finite cost (subtracted)
    span: Any  # hi - lo
    levels: int | None  # quantisation levels Q (None: exact integers)
    big: int | None  # cost of a forbidden pair (before * (N + 1)), None without any
    smax: int  # largest scaled cost
    bits: int  # owner bits of a column word
    cost_t: str  # "int" or "long long"


def make_plan(
    n: int, N: int, lo: Any, hi: Any, forbidden: bool, integral: bool
) -> Plan:
    """Choose the scaling (see the module docstring); ValueError where impossible."""
    bits = max(1, N.bit_length())
    if integral:
        span = int(hi) - int(lo)
        base = n * span + 1 if forbidden else span
        smax = base * (N + 1)
        if not _prices_fit(smax, bits):
            raise ValueError(
                f"cost values span {span} (from {lo} to {hi}); the exact GPU solver "
                f"needs about 4 * phases * {'min(n, m) * ' if forbidden else ''}"
                f"span * (max(n, m) + 1) < 2**{63 - bits}; rescale the costs or use "
                "backend='cpu'"
            )
        lo = lo if isinstance(lo, float) else int(lo)
        return Plan(
            n,
            N,
            lo,
            span,
            None,
            base if forbidden else None,
            smax,
            bits,
            "int" if smax <= _INT32_MAX else "long long",
        )
    span = float(hi) - float(lo)
    levels = FLOAT_LEVELS
    while levels > FLOAT_LEVELS_MIN and _smax(n, N, levels, forbidden) > _INT32_MAX:
        levels //= 2
    if _smax(n, N, levels, forbidden) > _INT32_MAX:
        levels = FLOAT_LEVELS
        while levels >= 2 and not _prices_fit(_smax(n, N, levels, forbidden), bits):
            levels //= 2
        if levels < 2:
            raise ValueError(
                f"a ({n}, {N}) problem is too large for the GPU solver; "
                "use backend='cpu'"
            )
    smax = _smax(n, N, levels, forbidden)
    return Plan(
        n,
        N,
        float(lo),
        span,
        levels,
        n * levels + 1 if forbidden else None,
        smax,
        bits,
        "int" if smax <= _INT32_MAX else "long long",
    )


def _smax(n: int, N: int, levels: int, forbidden: bool) -> int:
    return (n * levels + 1 if forbidden else levels) * (N + 1)


def float_tolerance(cost: np.ndarray) -> float:
    """Bound on (GPU total - optimal total) for float costs ``cost`` (host, 2-D).

    Zero where the costs are used exactly (integers); otherwise ``k * R / Q``.
    """
    cost = np.asarray(cost, dtype=np.float64)
    n, m = sorted(cost.shape)
    fin = np.isfinite(cost)
    if cost.size == 0 or not fin.any():
        return 0.0
    vals = cost[fin]
    lo, hi = float(vals.min()), float(vals.max())
    if np.all(vals == np.rint(vals)) and max(abs(lo), abs(hi)) <= _EXACT_FLOAT:
        return 0.0
    if hi == lo:
        return 0.0
    plan = make_plan(n, m, lo, hi, not fin.all(), False)
    return n * (hi - lo) / plan.levels


# ------------------------------------------------------------------------ stages


def prepare(xp: Any, costs: Any, maximize: bool) -> dict:
    """Orient, negate and measure a (B, n, m) stack; ``xp`` is numpy or cupy.

    Returns a dict with ``x`` (oriented float64 / int64 costs, rows <= columns),
    ``transposed``, ``invalid`` (a NaN or wrong-sign infinity: nothing else is set),
    ``fin`` (finite mask or None) and ``plan``.
    """
    x = costs
    kind = x.dtype.kind
    if kind == "b":
        x = x.astype(xp.int64)
    elif kind == "u" and x.dtype.itemsize == 8 and x.size and int(x.max()) >= 2**62:
        raise ValueError(
            f"costs must be below 2**62 for the GPU solver, got "
            f"{int(x.max())}; use backend='cpu'"
        )
    elif kind in "iu":
        x = x.astype(xp.int64)
    else:
        x = x.astype(xp.float64)
    if maximize:
        x = -x
    transposed = x.shape[1] > x.shape[2]
    if transposed:
        x = x.transpose(0, 2, 1)
    n, N = x.shape[1:]
    out = {"x": x, "transposed": transposed, "invalid": False, "fin": None}
    if x.dtype.kind == "i":
        lo, hi = (int(v) for v in xp.stack([x.min(), x.max()]).tolist())
        out["plan"] = make_plan(n, N, lo, hi, False, True)
        return out
    fin = xp.isfinite(x)
    inf = xp.float64(np.inf)
    stats = (
        xp.stack(
            [
                xp.isnan(x).any() | (x == -inf).any(),
                (~fin).any(),
                xp.where(fin, x, inf).min(),
                xp.where(fin, x, -inf).max(),
                xp.where(fin, x == xp.rint(x), True).all(),
            ]
        )
        .astype(xp.float64)
        .tolist()
    )
    invalid, forbidden, lo, hi, integral = stats
    if invalid:
        out["invalid"] = True
        return out
    if not np.isfinite(lo):  # nothing finite: every pair forbidden
        lo = hi = 0.0
    forbidden = bool(forbidden)
    integral = bool(integral) and max(abs(lo), abs(hi)) <= _EXACT_FLOAT
    if hi == lo:
        integral = True
    out["fin"] = fin if forbidden else None
    out["plan"] = make_plan(n, N, lo, hi, forbidden, integral)
    return out


def scaled(xp: Any, prep: dict, transposed_layout: bool) -> Any:
    """The (B, N, N) integer costs of the kernels (padded, scaled by N + 1)."""
    x, plan, fin = prep["x"], prep["plan"], prep["fin"]
    B = x.shape[0]
    n, N = plan.n, plan.N
    if plan.levels is None:
        q = x - (plan.lo if x.dtype.kind == "i" else xp.float64(plan.lo))
    else:
        q = xp.rint((x - plan.lo) * (plan.levels / plan.span))
        q = xp.clip(q, 0, plan.levels)
    if fin is not None:
        q = xp.where(fin, q, plan.big)
    dt = xp.int32 if plan.cost_t == "int" else xp.int64
    q = (q.astype(xp.int64) * (N + 1)).astype(dt)
    out = xp.zeros((B, N, N), dtype=dt)
    if transposed_layout:
        out[:, :, :n] = q.transpose(0, 2, 1)
    else:
        out[:, :n, :] = q
    return out


def finish(xp: Any, prep: dict, col4row: Any) -> tuple:
    """Assignment of the original orientation and per-problem status from the
    column of each padded row (``col4row``, (B, N))."""
    x, plan = prep["x"], prep["plan"]
    B = x.shape[0]
    cols = col4row[:, : plan.n].astype(xp.int64)
    status = np.full(B, SOLVED, dtype=np.int8)
    if prep["fin"] is not None:
        picked = xp.take_along_axis(prep["fin"], cols[:, :, None], axis=2)[:, :, 0]
        bad = ~picked.all(axis=1)
        status[xp.asnumpy(bad) if xp is not np else bad] = INFEASIBLE
    rows = xp.broadcast_to(xp.arange(plan.n, dtype=xp.int64), (B, plan.n))
    if not prep["transposed"]:
        return xp.ascontiguousarray(rows), cols, status
    order = xp.argsort(cols, axis=1)
    return xp.take_along_axis(cols, order, axis=1), order.astype(xp.int64), status


# ----------------------------------------------------------------------- solving


def _module(plan: Plan) -> Any:
    return get_module(
        "assignment.cu",
        {
            "COST_T": plan.cost_t,
            "ASSIGN_BLOCK": _ROW_BLOCK,
            "ASSIGN_MIN_BLOCKS": _ROW_MIN_BLOCKS,
            "ASSIGN_CAND": _ROW_CAND,
        },
    )


def _solve_small(cp: Any, S: Any, plan: Plan) -> tuple:
    B, N = S.shape[0], plan.N
    mod = _module(plan)
    col4row = cp.empty((B, N), dtype=cp.int32)
    prices = cp.empty((B, N), dtype=cp.int64)
    err = cp.zeros(B, dtype=cp.int32)
    args = (
        S,
        np.int32(B),
        np.int32(N),
        np.int64(plan.smax),
        np.int32(ALPHA),
        np.int32(plan.bits),
        col4row,
        prices,
        err,
    )
    if N <= _WARP_MAX_N:
        wpb = _WARP_PROBLEMS
        shared = wpb * N * 12 + wpb * 4
        get_kernel(mod, "assign_small_warp")(
            ((B + wpb - 1) // wpb,), (32 * wpb,), args, shared_mem=shared
        )
    else:
        threads = min(256, 32 * ((N + 31) // 32))
        get_kernel(mod, "assign_small_block")(
            (B,), (threads,), args, shared_mem=N * 12 + 4
        )
    return col4row, prices, err


def _solve_rows(cp: Any, S: Any, plan: Plan, fixing: bool) -> tuple:
    B, N = S.shape[0], plan.N
    total = B * N
    mod = _module(plan)
    keep = get_kernel(mod, "assign_keep_rows")
    auction = get_kernel(mod, "assign_auction_rows")
    update = get_kernel(mod, "assign_global_update")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    grid = (sms * _ROW_MIN_BLOCKS,)
    block = (_ROW_BLOCK,)
    mask = np.uint64((1 << plan.bits) - 1)
    words = cp.full((B, N), mask, dtype=cp.uint64)
    col4row = cp.full((B, N), -1, dtype=cp.int32)
    state = cp.zeros(4, dtype=cp.int32)  # count, err, bids, sweeps
    count, err, bids, sweeps = state[0:1], state[1:2], state[2:3], state[3:4]
    ncand = cp.full(total, -1, dtype=cp.int32)
    cand = cp.empty(total * _ROW_CAND if fixing else 1, dtype=cp.int32)
    if GLOBAL_UPDATE:
        dist = cp.empty(total, dtype=cp.uint64)
        sync = cp.zeros(8, dtype=cp.uint32)
    stats = {"global_updates": 0, "phases": 0}
    prev = None
    for eps in schedule(plan.smax, ALPHA):
        count.fill(0)
        fix = N * prev if fixing and prev is not None else 0
        e, tot, n32, b32 = (
            np.int64(eps),
            np.int32(total),
            np.int32(N),
            np.int32(plan.bits),
        )
        keep(
            grid,
            block,
            (S, words, col4row, count, tot, n32, e, b32, cand, ncand, np.int64(fix)),
        )
        stats["phases"] += 1
        prev = eps
        while True:
            c, bad, nbids, _ = (int(v) for v in state.get())
            if c >= total or bad:
                break
            budget = nbids + GU_BIDS * (total - c) + GU_MIN_BIDS
            if not GLOBAL_UPDATE or budget >= _INT32_MAX:
                budget = _INT32_MAX
            auction(
                grid,
                block,
                (
                    S,
                    words,
                    col4row,
                    count,
                    err,
                    tot,
                    n32,
                    e,
                    b32,
                    cand,
                    ncand,
                    bids,
                    np.int32(budget),
                ),
            )
            if budget == _INT32_MAX:
                continue
            c, bad, nbids, _ = (int(v) for v in state.get())
            if c >= total or bad:
                break
            if nbids > 2**30:
                bids.fill(0)
            update(
                grid,
                block,
                (
                    S,
                    words,
                    col4row,
                    cand,
                    ncand,
                    dist,
                    sync,
                    err,
                    sweeps,
                    tot,
                    n32,
                    e,
                    b32,
                ),
            )
            stats["global_updates"] += 1
    stats["sweeps"] = int(sweeps.get()[0])
    prices = (words >> np.uint64(plan.bits)).astype(cp.int64)
    return col4row, prices, err, stats


def solve_scaled(cp: Any, prep: dict, fixing: bool = True) -> tuple:
    """Run the kernels on a prepared stack; returns (col4row, prices, S, stats),
    ``stats`` (row kernels only) counting phases, global updates and their
    Bellman-Ford sweeps. ``fixing=False`` turns arc fixing off for this run."""
    plan = prep["plan"]
    small = plan.N <= _BLOCK_MAX_N
    S = scaled(cp, prep, transposed_layout=small)
    if prep["x"].shape[0] * plan.N >= 2**31:
        raise ValueError(
            "a stack of more than 2**31 - 1 rows in all is too large for "
            "the GPU solver; split it"
        )
    if small:
        col4row, prices, err, *stats = _solve_small(cp, S, plan)
    else:
        col4row, prices, err, *stats = _solve_rows(cp, S, plan, fixing and ARC_FIXING)
    if bool(err.any()):
        raise RuntimeError(
            "GPU assignment: price overflow (the bound checked before "
            f"the launch was violated; plan {plan})"
        )
    return col4row, prices, S, (stats[0] if stats else {})


def linear_sum_assignment_batched_gpu(
    costs: Any, maximize: bool, return_prices: bool = False
) -> tuple:
    """Solve a (B, n, m) stack on the GPU: ``(row_ind, col_ind, status)``.

    ``row_ind`` and ``col_ind`` are CuPy int64 arrays of shape (B, min(n, m)),
    ``status`` a NumPy int8 array (SOLVED, INFEASIBLE, or INVALID everywhere when the
    stack holds a NaN or an infinity of the wrong sign, in which case nothing is
    solved). With ``return_prices`` a fourth item is the dict of the run (plan,
    scaled costs ``S``, column prices ``prices`` and ``col4row`` of the padded
    problems), which certifies the optimum: every padded row ``r`` holds a column
    ``j`` with ``S[r, j] + p[j] <= min_k (S[r, k] + p[k]) + 1`` (such a run goes
    without arc fixing, whose prices certify only the arcs they keep).
    """
    import cupy as cp

    x = cp.asarray(costs)
    B, n0, m0 = x.shape
    k = min(n0, m0)
    if B == 0 or k == 0:
        empty = cp.zeros((B, k), dtype=cp.int64)
        out = (empty, empty.copy(), np.full(B, SOLVED, dtype=np.int8))
        return out + ({},) if return_prices else out
    prep = prepare(cp, x, maximize)
    if prep["invalid"]:
        empty = cp.zeros((B, k), dtype=cp.int64)
        out = (empty, empty.copy(), np.full(B, INVALID, dtype=np.int8))
        return out + ({},) if return_prices else out
    # arc fixing keeps the prices eps-optimal on the kept arcs only: a run whose
    # prices are returned (a certificate over the whole matrix) goes without it
    col4row, prices, S, stats = solve_scaled(cp, prep, fixing=not return_prices)
    rows, cols, status = finish(cp, prep, col4row)
    if return_prices:
        return (
            rows,
            cols,
            status,
            {
                "plan": prep["plan"],
                "S": S,
                "prices": prices,
                "col4row": col4row,
                "transposed_layout": prep["plan"].N <= _BLOCK_MAX_N,
                "stats": stats,
            },
        )
    return rows, cols, status
