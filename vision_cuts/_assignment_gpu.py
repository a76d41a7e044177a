"""GPU linear assignment: epsilon-scaling cost scaling (auction form), CuPy + CUDA.

Reduction (on the device; one measuring pass, ``sa_stats``, then either applied by
``sa_solve`` while it loads each small problem, or by CuPy array operations into the
scaled copy that the other kernels read):

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
3. Forbidden pairs (``inf``) get, on the small-problem kernels, the finite cost
   ``M = k * R + 1``: any assignment that uses one costs more than every assignment
   that does not, so the optimum uses one exactly when the problem is infeasible
   (reported as status INFEASIBLE). On the large-problem path they are absent arcs
   (``absent_cost``), which add nothing to the range; a maximum bipartite matching of
   the allowed pairs finds the infeasible problems first (``infeasible_problems``) and
   the rest are solved without them. The padding rows of step 1 never bid there (a
   price floor stands for them; see ``kernels/assignment_rows.cu``).
4. Multiply by ``N + 1``. Epsilon scaling ends with ``eps = 1``, so the final
   assignment is ``eps``-optimal with ``eps < 1 / N`` in the units of step 2: the
   exact optimum (Goldberg-Kennedy; Bertsekas).

Overflow: prices only rise, by at most ``2 * smax + 2 * eps`` per phase
(``smax`` = the largest scaled cost), and must stay below ``2**(63 - bits)``
(``bits = N.bit_length()`` low bits of each column word name the owner). The bound is
checked before launching: integer costs whose range is too large for it raise
``ValueError``, float costs get fewer quantisation levels. The kernels also flag an
overflow instead of wrapping.

Kernels, chosen by problem size ``N`` and shape (``small_problem``: the small
kernels take square problems only; a rectangular one goes to the large-problem path,
whose free columns cost nothing, where the small kernels would pad it with rows of
zeros that bid one at a time):

* square, ``N <= 256`` (where one problem's N x N scaled costs fit in a block's shared
  memory, i.e. ``N`` up to about 237 with int32 costs): ``sa_solve``
  (``kernels/assignment_small.cu``), one warp per problem, reading the stack as given
  (no scaled copy), all phases in one launch, Gauss-Seidel auction (one free row bids
  at a time) with the prices and owners of ``N / 32`` columns in each lane's
  registers and 32-bit warp reductions while the prices allow (eps divided by
  ``SMALL_ALPHA`` between phases for ``N <= 32``, by ``ALPHA`` above); it writes the
  assignment in the caller's orientation and the per-problem status itself.
* Otherwise ``N <= 32``: ``assign_small_warp`` (``kernels/assignment.cu``), one warp
  per problem (eight per block), one row per lane, all phases in one launch;
  shared-memory column words. ``32 < N <= 256``: ``assign_small_block``, one block
  per problem, a thread per row (``SMALL_FUSED = False`` selects these two).
* ``N > 256``, or rectangular: ``assign_rows_solve`` (``kernels/assignment_rows.cu``),
  every phase in one persistent launch (grid barriers between the steps; eps divided by
  ``ROW_ALPHA``), a warp per row over all rows of the stack, global-memory column
  words. Each row scans a candidate list of at most ``_ROW_CAND`` of its arcs, kept
  with a lower bound of the reduced costs of the arcs left out, rebuilt from the whole
  row at each phase and when the list can no longer name the row's best arc. The bids
  stop after ``GU_BIDS * free rows + GU_MIN_BIDS`` for a global price update
  (Bellman-Ford over the lists to the free columns, ``GLOBAL_UPDATE``), then resume;
  a row whose left-out arcs all lie ``N * eps`` above its pair at the end of a phase
  keeps only its list from then on (arc fixing, ``ARC_FIXING``).

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
import functools
import time
from typing import Any

import numpy as np

from ._kernels import get_kernel, get_module, sm_count

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
_BLOCK_MAX_N = 256  # the small kernels up to this N (square problems only)
_WARP_PROBLEMS = 8  # problems (warps) per block of assign_small_warp
_ROW_BLOCK = 256  # ASSIGN_BLOCK
_ROW_MIN_BLOCKS = 4  # ASSIGN_MIN_BLOCKS: co-resident blocks per SM
_ROW_CAND = 256  # ASSIGN_CAND: longest candidate list of a row
GLOBAL_UPDATE = True  # global price updates (large-problem path)
ARC_FIXING = True  # rows keep only their lists once the rest is fixed
GU_BIDS = 4  # a global update after GU_BIDS * (free rows) + GU_MIN_BIDS bids
GU_MIN_BIDS = 64
SMALL_FUSED = True  # N <= _BLOCK_MAX_N: sa_solve (assignment_small.cu) where it fits
_FUSED_WARPS = 4  # problems per block of sa_solve for N <= 32 (one per block above)
_FUSED_MIN_BLOCKS = 1  # SA_MINB: co-resident blocks per SM asked of the compiler
SMALL_ALPHA = 30  # epsilon divisor of sa_solve for N <= 32 (ALPHA above that)
_STATS_BLOCKS = 1024  # most blocks of sa_stats (256 threads each)
_OVERFLOW = 3  # sa_solve status of a price overflow
ROW_ALPHA = 64  # epsilon divisor of the large-problem path (measured: fewer phases pay)
_ROW_MAX_PHASES = 56  # R_MAX_PHASES
_ROW_QUIET = 16  # ASSIGN_QUIET: idle warps poll the counters every this many passes
_ROW_BID_BATCH = 8  # ASSIGN_BID_BATCH: bids added to the shared count in batches
_ROW_TIE_SPREAD = 1  # ASSIGN_TIE_SPREAD: rows break ties by a key of their own
#: the large-problem path stops with an error after this many bids per row (over all
#: phases; measured runs make at most about 40 per row and phase) plus
#: RUNAWAY_BIDS_MIN: a livelock fails instead of hanging
RUNAWAY_BIDS_PER_ROW = 4000
RUNAWAY_BIDS_MIN = 1_000_000
#: the time budget of the large-problem path in a public call, a fixed part and a
#: part per cost entry of the stack: past it the stack is solved on the CPU
#: (:func:`linear_sum_assignment_batched_gpu`). Costs whose auction runs price wars
#: (Machol-Wien ``i * j``: 2.9 s at 500 x 950 against SciPy's 0.24 s) end there; the
#: cost families of real callers take 2-9 ms at 1000 x 1000 and 26-43 ms at 4000 x
#: 4000 (H100 and H200), 5x inside the budget or more (0.05 s and 0.5 s).
BUDGET_S = 0.02
BUDGET_NS_PER_ENTRY = 30.0


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
    """Choose the scaling (see the module docstring); ValueError where impossible.

    Forbidden pairs cost ``big`` on the small-problem kernels; the large-problem path
    leaves them out (absent arcs), so they add nothing to the cost range there.
    """
    bits = max(1, N.bit_length())
    forbidden = forbidden and small_problem(n, N)
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
            "int" if smax < _INT32_MAX else "long long",
        )
    span = float(hi) - float(lo)
    levels = FLOAT_LEVELS
    while levels > FLOAT_LEVELS_MIN and _smax(n, N, levels, forbidden) >= _INT32_MAX:
        levels //= 2
    if _smax(n, N, levels, forbidden) >= _INT32_MAX:
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
        "int" if smax < _INT32_MAX else "long long",
    )


def small_problem(n: int, N: int) -> bool:
    """Whether an n x N problem (n <= N) goes to the small kernels: square ones up to
    ``_BLOCK_MAX_N``. A rectangular one would be padded with N - n rows of zeros
    whose bids (one free row at a time) cost far more than the large-problem path's
    free columns: 64 problems of 128 x 256 with forbidden pairs took 1.7-4 s there
    against 3-19 ms on the large-problem path, and 64 flow-like stacks of 47 x 111
    7 ms against 1.9 ms (H100; ``benchmarks/bench_assignment_families.py
    --small``)."""
    return N <= _BLOCK_MAX_N and n == N


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
    """Measure a (B, n, m) stack in one pass; ``xp`` is numpy or cupy.

    Returns a dict with ``raw`` (the costs as given, C-contiguous float64 / int64),
    ``x`` (its oriented view, rows <= columns; not negated: ``neg`` says whether the
    kernels and :func:`scaled` negate for ``maximize``), ``transposed``, ``invalid``
    (a NaN or wrong-sign infinity: nothing else is set), ``fin`` (finite mask of ``x``
    where a pair is forbidden, else None) and ``plan``. On the GPU the measurement is
    one kernel (``sa_stats``: finite min and max, forbidden pairs, integrality) and one
    read of its per-block results.
    """
    x = costs
    kind = x.dtype.kind
    if kind == "u" and x.dtype.itemsize == 8 and x.size and int(x.max()) >= 2**62:
        raise ValueError(
            f"costs must be below 2**62 for the GPU solver, got "
            f"{int(x.max())}; use backend='cpu'"
        )
    x = xp.ascontiguousarray(x, dtype=xp.int64 if kind in "biu" else xp.float64)
    transposed = x.shape[1] > x.shape[2]
    n, N = sorted(x.shape[1:])
    out = {
        "raw": x,
        "x": x.transpose(0, 2, 1) if transposed else x,
        "neg": bool(maximize),
        "transposed": transposed,
        "invalid": False,
        "fin": None,
    }
    lo, hi, flags = _stats(xp, x, bool(maximize))
    if x.dtype.kind == "i":
        out["plan"] = make_plan(n, N, lo, hi, False, True)
        return out
    if flags & 1:
        out["invalid"] = True
        return out
    if not flags & 8:  # nothing finite: every pair forbidden
        lo = hi = 0.0
    forbidden = bool(flags & 2)
    integral = not flags & 4 and max(abs(lo), abs(hi)) <= _EXACT_FLOAT
    if hi == lo:
        integral = True
    out["fin"] = xp.isfinite(out["x"]) if forbidden else None
    out["plan"] = make_plan(n, N, lo, hi, forbidden, integral)
    return out


_SIGN = 1 << 63


def _stats(xp: Any, x: Any, neg: bool) -> tuple:
    """(min, max, flags) of the (negated where ``neg``) stack ``x``: flags 1 = NaN or
    -inf, 2 = +inf, 4 = a finite non-integer, 8 = some finite value (always set for
    int64); min and max over the finite values (0 where there are none)."""
    if xp is np:
        v = -x if neg else x
        if v.dtype.kind == "i":
            return int(v.min()), int(v.max()), 8
        fin = np.isfinite(v)
        flags = (1 if (np.isnan(v).any() or (v == -np.inf).any()) else 0) | (
            2 if (v == np.inf).any() else 0
        )
        if not fin.any():
            return 0.0, 0.0, flags
        vals = v[fin]
        flags |= 8 | (0 if np.all(vals == np.rint(vals)) else 4)
        return float(vals.min()), float(vals.max()), flags
    total = x.size
    blocks = max(1, min(_STATS_BLOCKS, -(-total // 4096)))
    part = xp.empty((blocks, 3), dtype=xp.uint64)
    mod = get_module("assignment_small.cu", {"SA_F64": int(x.dtype.kind == "f")})
    get_kernel(mod, "sa_stats")(
        (blocks,), (256,), (x, np.int64(total), np.int32(neg), part)
    )
    h = part.get()
    kmin, kmax = int(h[:, 0].min()), int(h[:, 1].max())
    flags = int(np.bitwise_or.reduce(h[:, 2]))
    if x.dtype.kind == "i":
        return tuple(
            (k ^ _SIGN) - (1 << 64) if (k ^ _SIGN) >= _SIGN else k ^ _SIGN
            for k in (kmin, kmax)
        ) + (flags,)
    if not flags & 8:
        return 0.0, 0.0, flags
    bits = [k ^ _SIGN if k & _SIGN else ~k & ((1 << 64) - 1) for k in (kmin, kmax)]
    lo, hi = np.array(bits, dtype=np.uint64).view(np.float64).tolist()
    return lo, hi, flags


def scaled(xp: Any, prep: dict, transposed_layout: bool) -> Any:
    """The (B, N, N) integer costs of the kernels (padded, scaled by N + 1)."""
    x, plan, fin = prep["x"], prep["plan"], prep["fin"]
    B = x.shape[0]
    n, N = plan.n, plan.N
    if (
        xp is not np
        and x.dtype == xp.float64
        and plan.levels is not None
        and plan.big is None
        and not transposed_layout
        and x.flags.c_contiguous
    ):  # the large-problem path's usual case: one kernel for the expression below
        out = xp.empty((B, N, N), dtype=xp.int32 if plan.cost_t == "int" else xp.int64)
        total = out.size
        get_kernel(_module(plan), "scale_costs_f64")(
            ((total + 255) // 256,),
            (256,),
            (
                x,
                np.int64(total),
                np.int32(n),
                np.int32(N),
                np.float64(plan.lo),
                np.int32(bool(prep.get("neg"))),
                np.float64(plan.levels / plan.span),
                np.float64(plan.levels),
                np.int64(N + 1),
                np.int64(absent_cost(plan)),
                out,
            ),
        )
        return out
    lo = plan.lo if x.dtype.kind == "i" else xp.float64(plan.lo)
    # (-x) - lo == (-lo) - x exactly (IEEE negation and addition), one pass less
    d = (-lo - x) if prep.get("neg") else (x - lo)
    if plan.levels is None:
        q = d
    else:
        q = xp.rint(d * (plan.levels / plan.span))
        q = xp.clip(q, 0, plan.levels)
    if fin is not None:
        q = xp.where(fin, q, 0 if plan.big is None else plan.big)
    dt = xp.int32 if plan.cost_t == "int" else xp.int64
    q = (q.astype(xp.int64) * (N + 1)).astype(dt)
    if fin is not None and plan.big is None:  # absent arcs (large-problem path)
        q = xp.where(fin, q, absent_cost(plan))
    out = xp.zeros((B, N, N), dtype=dt)
    if transposed_layout:
        out[:, :, :n] = q.transpose(0, 2, 1)
    else:
        out[:, :n, :] = q
    return out


def absent_cost(plan: Plan) -> int:
    """The cost that marks a forbidden pair for ``assign_rows_solve`` (R_ABSENT)."""
    return _INT32_MAX if plan.cost_t == "int" else 2**62 - 1


def diagonal_feasible(cp: Any, fin: Any) -> bool:
    """Whether every problem of the (B, n, N) finite mask (n <= N) assigns every row
    along a diagonal of finite pairs, that of the first n columns or of the last n:
    a certificate of feasibility that costs one read (stacks with a column per row
    for leaving it unmatched have one)."""
    B, n, N = fin.shape
    first = cp.diagonal(fin, axis1=1, axis2=2).all(axis=1)
    last = cp.diagonal(fin[:, :, N - n :], axis1=1, axis2=2).all(axis=1)
    return bool((first | last).all())


def infeasible_problems(cp: Any, fin: Any) -> np.ndarray:
    """Which problems of the (B, n, N) finite mask (n <= N) have no assignment of
    every row: one maximum bipartite matching (on the GPU) of all of them."""
    from ._matching_gpu import maximum_bipartite_matching_gpu

    B, n, N = fin.shape
    rows, cols = cp.nonzero(fin.reshape(B * n, N))
    idx = (cols + (rows // n) * N).astype(cp.int32)
    ptr = cp.zeros(B * n + 1, dtype=cp.int32)
    ptr[1:] = cp.cumsum(cp.bincount(rows, minlength=B * n))
    lmatch, _ = maximum_bipartite_matching_gpu(ptr, idx, B * n, B * N)
    return cp.asnumpy((lmatch < 0).reshape(B, n).any(axis=1))


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
    return get_module("assignment.cu", {"COST_T": plan.cost_t})


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


@functools.cache
def _shared_optin(device: int) -> int:
    """Most dynamic shared memory one block may ask for on ``device``."""
    import cupy as cp

    attr = getattr(cp.cuda.runtime, "cudaDevAttrMaxSharedMemoryPerBlockOptin", 97)
    return int(cp.cuda.runtime.deviceGetAttribute(attr, device))


def _fused_geometry(plan: Plan, device: int) -> tuple | None:
    """``(columns per lane, row stride, area, warps per block, shared bytes)`` of
    ``sa_solve`` for this plan, or None where it does not apply (``N`` above
    ``_BLOCK_MAX_N``, or the N x N costs of one problem exceed shared memory)."""
    N = plan.N
    if not SMALL_FUSED or not small_problem(plan.n, N):
        return None
    per_lane = 1 if N <= 32 else 2 if N <= 64 else 4 if N <= 128 else 8
    ws = -(-N // per_lane) * per_lane
    item = 4 if plan.cost_t == "int" else 8
    area = (N * ws * item + 15) // 16 * 16 // item
    per_warp = area * item + 4 * N
    wpb = _FUSED_WARPS if per_lane == 1 else 1
    if per_warp > _shared_optin(device):
        return None
    while wpb > 1 and wpb * per_warp > _shared_optin(device):
        wpb //= 2
    return per_lane, ws, area, wpb, wpb * per_warp


def _solve_small_fused(cp: Any, prep: dict, geometry: tuple, want: bool) -> tuple:
    """``sa_solve`` on the stack as given: ``(row_ind, col_ind, status, col4row,
    prices, stats)``, col4row and prices (of the padded problems) only with
    ``want``; ``stats``: the most phases of a problem and the bids of all."""
    plan, raw = prep["plan"], prep["raw"]
    per_lane, ws, area, wpb, shared = geometry
    B, n, N = raw.shape[0], plan.n, plan.N
    f64 = raw.dtype.kind == "f"
    mod = get_module(
        "assignment_small.cu",
        {
            "SA_C": per_lane,
            "SA_LONG": int(plan.cost_t != "int"),
            "SA_F64": int(f64),
            "SA_WARPS": wpb,
            "SA_MINB": _FUSED_MIN_BLOCKS,
        },
    )
    kernel = get_kernel(mod, "sa_solve")
    if shared > 48 * 1024:
        kernel.max_dynamic_shared_size_bytes = shared
    rows = cp.empty((B, n), dtype=cp.int64)
    cols = cp.empty((B, n), dtype=cp.int64)
    status = cp.empty(B, dtype=cp.int8)
    col4row = cp.empty((B, N) if want else 1, dtype=cp.int32)
    prices = cp.empty((B, N) if want else 1, dtype=cp.int64)
    quantise = plan.levels is not None
    args = (
        raw,
        np.int32(B),
        np.int32(n),
        np.int32(N),
        np.int32(prep["transposed"]),
        np.int32(prep["neg"]),
        np.float64(plan.lo if f64 else 0.0),
        np.int64(0 if f64 else plan.lo),
        np.float64(plan.levels / plan.span if quantise else 0.0),
        np.int64(plan.levels if quantise else 0),
        np.int32(quantise),
        np.int64(-1 if plan.big is None else plan.big),
        np.int64(plan.smax),
        np.int32(SMALL_ALPHA if N <= 32 else ALPHA),
        np.int32(ws),
        np.int32(area),
        rows,
        cols,
        status,
        col4row,
        prices,
        np.int32(want),
    )
    work = cp.empty((B, 2), dtype=cp.int64)
    kernel(((B + wpb - 1) // wpb,), (32 * wpb,), args + (work,), shared_mem=shared)
    status = status.get()
    if (status == _OVERFLOW).any():
        raise RuntimeError(
            "GPU assignment: price overflow (the bound checked before "
            f"the launch was violated; plan {plan})"
        )
    phases, bids = work.get().T
    stats = {"phases": int(phases.max()), "bids": int(bids.sum())}
    return rows, cols, status, col4row, prices, stats


class OverBudget(Exception):
    """The large-problem path ran past its time budget (the kernel's err 3)."""


def _solve_rows(
    cp: Any,
    S: Any,
    plan: Plan,
    fixing: bool,
    want_prices: bool = True,
    limit_s: float | None = None,
) -> tuple:
    """Every phase in one persistent launch of ``assign_rows_solve``; the bids stop
    ``limit_s`` seconds after the launch (None: no limit) with err 3."""
    B, N = S.shape[0], plan.N
    total = B * N
    if len(schedule(plan.smax, ROW_ALPHA)) > _ROW_MAX_PHASES:
        raise ValueError(
            f"alpha {ROW_ALPHA} gives more than {_ROW_MAX_PHASES} phases for costs up "
            f"to {plan.smax}; use a larger alpha"
        )
    mod = get_module(
        "assignment_rows.cu",
        {
            "COST_T": plan.cost_t,
            "ASSIGN_BLOCK": _ROW_BLOCK,
            "ASSIGN_MIN_BLOCKS": _ROW_MIN_BLOCKS,
            "ASSIGN_CAND": _ROW_CAND,
            "ASSIGN_QUIET": _ROW_QUIET,
            "ASSIGN_BID_BATCH": _ROW_BID_BATCH,
            "ASSIGN_TIE_SPREAD": _ROW_TIE_SPREAD,
        },
    )
    kernel = get_kernel(mod, "assign_rows_solve")
    sms = sm_count()
    lists = N > _ROW_CAND
    mask = np.uint64((1 << plan.bits) - 1)
    words = cp.full((B, N), mask, dtype=cp.uint64)
    col4row = cp.full((B, N), -1, dtype=cp.int32)
    cand = cp.empty(total * _ROW_CAND if lists else 1, dtype=cp.int32)
    candc = cp.empty(total * _ROW_CAND if lists else 1, dtype=S.dtype)
    ncand = cp.full(total, 0 if lists else -1, dtype=cp.int32)
    lowb = cp.full(total, -1 if lists else np.iinfo(np.int64).max, dtype=cp.int64)
    dist = cp.empty(total, dtype=cp.uint64)
    floor = cp.full(B, -1, dtype=cp.int64)
    sync = cp.zeros(8, dtype=cp.uint32)
    state = cp.zeros(64 + 16 * _ROW_MAX_PHASES, dtype=cp.uint64)  # R_STATE
    kernel(
        (sms * _ROW_MIN_BLOCKS,),
        (_ROW_BLOCK,),
        (
            S,
            words,
            col4row,
            cand,
            candc,
            ncand,
            lowb,
            dist,
            floor,
            sync,
            state,
            np.int32(total),
            np.int32(plan.n),
            np.int32(N),
            np.int64(plan.smax),
            np.int32(ROW_ALPHA),
            np.int32(plan.bits),
            np.int32(bool(fixing)),
            np.int32(bool(GLOBAL_UPDATE)),
            np.int64(GU_BIDS),
            np.int64(GU_MIN_BIDS),
            np.int64(RUNAWAY_BIDS_PER_ROW * total + RUNAWAY_BIDS_MIN),
            np.int64(0 if limit_s is None else max(1, int(limit_s * 1e9))),
        ),
    )
    st = state.get().tolist()  # Python ints
    stats = {
        "bids": st[32],
        "sweeps": st[2],
        "global_updates": st[3],
        "list_builds": st[4],
        "list_fallbacks": st[5],
        "phases": st[6],
        "settles": st[7],
        "settle_frees": st[8],
        "whole_rows": st[9],
        # the running count of held rows against the exact recount at the barriers:
        # rounds where it was off (after the keep steps, after the bids) and by how
        # much in all; warps that left the bids idle with no bid added for a while
        "count_off": [st[10], st[12]],
        "count_off_by": st[11] + st[13],
        "stall_exits": st[14],
        "warps": sms * _ROW_MIN_BLOCKS * _ROW_BLOCK // 32,
        "ms": [round(v / 1e6, 3) for v in st[16:19]],  # keep, bids, updates
        "per_phase": _per_phase(st),
    }
    err = np.asarray([st[0]], dtype=np.int32)  # read already: no device round trip
    prices = (words >> np.uint64(plan.bits)).astype(cp.int64) if want_prices else None
    return col4row, prices, err, stats


def _pad_rows_take_free_columns(cp: Any, col4row: Any, n: int) -> None:
    """The padding rows n..N-1 of the large-problem path never bid: give them the
    columns no real row holds (for the certificate over the padded problems)."""
    B, N = col4row.shape
    if n < N:
        taken = cp.zeros((B, N), dtype=cp.bool_)
        taken[cp.arange(B)[:, None], col4row[:, :n]] = True
        col4row[:, n:] = cp.argsort(taken, axis=1)[:, : N - n]


def _per_phase(st: list) -> list:
    """The work of each phase from the kernel's end-of-phase snapshots (state words
    ``64 + 16 * ph + 1 ..``: cumulative bids, global updates, sweeps, list fallbacks,
    the clock, the phase's eps, settles and rows they freed)."""
    out, prev = [], [0, 0, 0, 0, st[19], 0, 0]
    for ph in range(min(st[6], _ROW_MAX_PHASES)):
        snap = st[64 + 16 * ph : 64 + 16 * ph + 9]
        cur = snap[1:6] + snap[7:9]
        out.append(
            {
                "eps": snap[6],
                "bids": cur[0] - prev[0],
                "global_updates": cur[1] - prev[1],
                "sweeps": cur[2] - prev[2],
                "list_fallbacks": cur[3] - prev[3],
                "settles": cur[5] - prev[5],
                "settle_frees": cur[6] - prev[6],
                "ms": round((cur[4] - prev[4]) / 1e6, 3),
            }
        )
        prev = cur
    return out


def solve_scaled(
    cp: Any,
    prep: dict,
    fixing: bool = True,
    want_prices: bool = True,
    limit_s: float | None = None,
) -> tuple:
    """Run the kernels on a prepared stack; returns (col4row, prices, S, stats),
    ``stats`` (row kernels only) counting phases, global updates and their
    Bellman-Ford sweeps. ``fixing=False`` turns arc fixing off for this run;
    ``want_prices=False`` leaves the prices of the large-problem path out (None);
    ``limit_s``: the large-problem path's time budget (:class:`OverBudget` past
    it)."""
    plan = prep["plan"]
    small = small_problem(plan.n, plan.N)
    S = scaled(cp, prep, transposed_layout=small)
    if prep["x"].shape[0] * plan.N >= 2**31:
        raise ValueError(
            "a stack of more than 2**31 - 1 rows in all is too large for "
            "the GPU solver; split it"
        )
    if small:
        col4row, prices, err, *stats = _solve_small(cp, S, plan)
    else:
        col4row, prices, err, *stats = _solve_rows(
            cp, S, plan, fixing and ARC_FIXING, want_prices, limit_s
        )
        if int(err[0]) == 3:
            raise OverBudget(stats[0])
    if bool((err == 2).any()):
        raise RuntimeError(
            "GPU assignment: the large-problem path made more than "
            f"{RUNAWAY_BIDS_PER_ROW} bids per row (a runaway; plan {plan}); "
            "use backend='cpu' for this problem"
        )
    if bool(err.any()):
        raise RuntimeError(
            "GPU assignment: price overflow (the bound checked before "
            f"the launch was violated; plan {plan})"
        )
    return col4row, prices, S, (stats[0] if stats else {})


def _solve_feasible(
    cp: Any, x: Any, maximize: bool, bad: np.ndarray, return_prices: bool
) -> tuple:
    """The stack ``x`` with the problems ``bad`` infeasible: the others solved alone,
    ``bad`` reported INFEASIBLE (their rows and columns 0)."""
    B, n0, m0 = x.shape
    k = min(n0, m0)
    rows = cp.zeros((B, k), dtype=cp.int64)
    cols = cp.zeros((B, k), dtype=cp.int64)
    status = np.full(B, INFEASIBLE, dtype=np.int8)
    ok = np.flatnonzero(~bad)
    run: dict = {"stats": {"path": "none", "infeasible": int(bad.sum())}}
    if ok.size:
        okd = cp.asarray(ok)
        r, c, st, run = linear_sum_assignment_batched_gpu(
            x[okd], maximize, return_prices
        )
        rows[okd], cols[okd], status[ok] = r, c, st
        run["stats"]["infeasible"] = int(bad.sum())
    return rows, cols, status, run


def linear_sum_assignment_batched_gpu(
    costs: Any, maximize: bool, return_prices: bool = False
) -> tuple:
    """Solve a (B, n, m) stack on the GPU: ``(row_ind, col_ind, status, run)``.

    ``row_ind`` and ``col_ind`` are CuPy int64 arrays of shape (B, min(n, m)),
    ``status`` a NumPy int8 array (SOLVED, INFEASIBLE, or INVALID everywhere when the
    stack holds a NaN or an infinity of the wrong sign, in which case nothing is
    solved). ``run`` is a dict whose ``"stats"`` holds the work counters of the solve
    (``path``: "none", "small" or "rows"; the large-problem path adds phases, bids,
    global updates, Bellman-Ford sweeps, list builds and fallbacks, settles and the
    rows they freed, and ``per_phase``). With ``return_prices`` it also holds the
    plan, the scaled costs ``S``, the column prices ``prices`` and ``col4row`` of the
    padded problems, which certify the optimum: every padded row ``r`` holds a column
    ``j`` with ``S[r, j] + p[j] <= min_k (S[r, k] + p[k]) + 1`` (such a run goes
    without arc fixing, whose prices certify only the arcs they keep; forbidden
    pairs of the large-problem path cost ``absent_cost(plan)`` in ``S``).
    """
    import cupy as cp

    x = cp.asarray(costs)
    B, n0, m0 = x.shape
    k = min(n0, m0)
    if B == 0 or k == 0:
        empty = cp.zeros((B, k), dtype=cp.int64)
        return empty, empty.copy(), np.full(B, SOLVED, dtype=np.int8), _no_run()
    prep = prepare(cp, x, maximize)
    if prep["invalid"]:
        empty = cp.zeros((B, k), dtype=cp.int64)
        return empty, empty.copy(), np.full(B, INVALID, dtype=np.int8), _no_run()
    geometry = _fused_geometry(prep["plan"], cp.cuda.Device().id)
    if geometry is not None:
        rows, cols, status, col4row, prices, work = _solve_small_fused(
            cp, prep, geometry, return_prices
        )
        run: dict = {"stats": {"path": "small", **work}}
        if return_prices:
            run.update(
                plan=prep["plan"],
                S=scaled(cp, prep, transposed_layout=False),
                prices=prices,
                col4row=col4row,
                transposed_layout=False,
            )
        return rows, cols, status, run
    fin, feasibility = prep["fin"], "none"
    plan = prep["plan"]
    small = small_problem(plan.n, plan.N)
    if not small and fin is not None:
        # forbidden pairs are absent arcs there, and an infeasible problem would bid
        # for ever: a matching finds those first, and the rest is solved without them
        feasibility = "diagonal"
        if not diagonal_feasible(cp, fin):
            feasibility = "matching"
            bad = infeasible_problems(cp, fin)
            if bad.any():
                return _solve_feasible(cp, x, maximize, bad, return_prices)
    # arc fixing keeps the prices eps-optimal on the kept arcs only: a run whose
    # prices are returned (a certificate over the whole matrix) goes without it
    limit = None if return_prices else BUDGET_S + BUDGET_NS_PER_ENTRY * 1e-9 * x.size
    t0 = time.perf_counter()
    try:
        col4row, prices, S, stats = solve_scaled(
            cp, prep, fixing=not return_prices, limit_s=limit
        )
    except OverBudget as over:
        return _finish_on_cpu(cp, x, maximize, over.args[0], time.perf_counter() - t0)
    rows, cols, status = finish(cp, prep, col4row)
    stats = {
        "path": "small" if small else "rows",
        "feasibility": feasibility,
        **stats,
    }
    run = {"stats": stats}
    if return_prices:
        if not small:
            _pad_rows_take_free_columns(cp, col4row, plan.n)
        run.update(
            plan=prep["plan"],
            S=S,
            prices=prices,
            col4row=col4row,
            transposed_layout=small,
        )
    return rows, cols, status, run


def _finish_on_cpu(
    cp: Any, x: Any, maximize: bool, gpu_stats: dict, gpu_s: float
) -> tuple:
    """The stack ``x`` (every problem feasible and valid) solved on the CPU after the
    GPU ran past its budget: ``(row_ind, col_ind, status, run)`` as
    :func:`linear_sum_assignment_batched_gpu` returns them, the GPU's work until
    then in ``run["stats"]["gpu"]``."""
    from ._assignment_cpu import linear_sum_assignment_batched_cpu

    t0 = time.perf_counter()
    rows, cols, status = linear_sum_assignment_batched_cpu(x.get(), maximize)
    stats = {
        "path": "cpu",
        "handover": {"gpu_s": gpu_s, "cpu_s": time.perf_counter() - t0},
        "gpu": {"path": "rows", **gpu_stats},
    }
    return cp.asarray(rows), cp.asarray(cols), status, {"stats": stats}


def solve_with_dummies(costs: Any, lo: float, hi: float) -> tuple:
    """For a caller that builds its own stacks: the (B, n, N) float64 CuPy stack
    ``costs`` (n < N; no NaN; finite costs within [lo, hi]; every row with a finite
    cost in column N - n + row, so every problem is feasible) solved without the
    measuring pass and the feasibility checks of the public function: ``(col of
    every row (B, n) int64, stats)``. The bounds set the quantisation as the
    measured range would (a looser bound only coarsens it)."""
    import cupy as cp

    x = cp.ascontiguousarray(costs, dtype=cp.float64)
    B, n, N = x.shape
    plan = make_plan(n, N, float(lo), float(hi), True, False)
    if small_problem(n, N):
        raise ValueError(f"expected n < N, got a ({n}, {N}) stack")
    prep = {
        "raw": x,
        "x": x,
        "neg": False,
        "transposed": False,
        "invalid": False,
        "fin": None,  # scaled() marks the forbidden pairs itself (float64, C order)
        "plan": plan,
    }
    col4row, _, _, stats = solve_scaled(cp, prep, want_prices=False)
    return col4row[:, :n].astype(cp.int64), {"path": "rows", **stats}


def _no_run() -> dict:
    return {"stats": {"path": "none"}}
