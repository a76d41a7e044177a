"""Linear assignment (minimum-cost bipartite matching) with SciPy's contract.

:func:`linear_sum_assignment` solves one dense cost matrix and
:func:`linear_sum_assignment_batched` a stack of equally shaped ones. Both validate
here, on host-side metadata, then dispatch to ``_assignment_cpu`` or ``_assignment_gpu``
(cost scaling on CUDA).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._backend import is_cupy_array, resolve_backend, to_numpy
from ._validate import check_flag, object_note, regular_array

__all__ = ["linear_sum_assignment", "linear_sum_assignment_batched"]

# "auto": the GPU for CuPy costs, else the CPU. Measured (BENCHMARKS.md): with NumPy
# costs in and results out, the copy to the device costs more than the CPU solve for the
# benchmark batches (though not for single problems of n >= 1000, where backend="gpu"
# pays even with the copy), and the CPU solver is exact for any float costs, where the
# GPU quantises non-integer ones.


def _pick_backend(backend: Any, *arrays: Any) -> str:
    """``resolve_backend`` for assignment, with "auto" meaning the GPU only for CuPy
    costs (``VISION_CUTS_BACKEND=gpu`` still asks for it under "auto")."""
    return resolve_backend(backend, *arrays, prefer_cpu=True)


def _as_cost_array(cost: Any, name: str, ndim: int, layout: str) -> Any:
    """Array-kind, dtype and ndim checks (metadata only); returns an ndarray."""
    if cost is None:
        raise TypeError(f"{name} must be an array of real numbers, got None")
    if hasattr(cost, "tocsr") and hasattr(cost, "nnz"):
        raise TypeError(
            f"{name} must be a dense array, got the sparse {type(cost).__name__}: "
            f"pass {name}.toarray() (with inf for the pairs that are not allowed)"
        )
    given = type(cost).__name__
    cost = regular_array(cost, name)
    if not (is_cupy_array(cost) or isinstance(cost, np.ndarray)):
        try:
            cost = np.asarray(cost)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"{name} must be a rectangular array of real numbers, got "
                f"{given} that NumPy cannot convert ({exc})"
            ) from exc
    if cost.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must have a real numeric dtype (integer, floating or bool), got "
            f"{cost.dtype}{object_note(cost, given)}"
        )
    if cost.dtype.kind == "f" and cost.dtype.itemsize > 8:
        # the solvers work in float64: a wider float must hold float64 values
        with np.errstate(over="ignore"):
            narrow = cost.astype(np.float64)
        lost = (np.isinf(narrow) & np.isfinite(cost)) | ((narrow == 0) & (cost != 0))
        if lost.any():
            idx = tuple(int(i) for i in np.argwhere(lost)[0])
            raise ValueError(
                f"{name} must hold values within float64's range (magnitudes from "
                f"about 5e-324 to 1.8e308, or 0), got {cost[idx]!r} at index {idx}"
            )
        cost = narrow
    if cost.ndim != ndim:
        raise ValueError(
            f"{name} must be a {ndim}-D {layout} array, got shape {tuple(cost.shape)}"
        )
    return cost


def _check_values(cost: np.ndarray, name: str, maximize: bool) -> None:
    """No NaN, and infinities only of the forbidden-pair sign (host array)."""
    if cost.dtype.kind != "f" or cost.size == 0:
        return
    nan = np.isnan(cost)
    if nan.any():
        idx = tuple(int(i) for i in np.argwhere(nan)[0])
        raise ValueError(f"{name} must not contain NaN, got NaN at index {idx}")
    wrong = -np.inf if not maximize else np.inf
    bad = cost == wrong
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        allowed = "-inf with maximize=True" if maximize else "+inf with maximize=False"
        raise ValueError(
            f"{name} contains {wrong} at index {idx}; a forbidden pair is marked "
            f"{allowed}"
        )


def _same_kind(on_gpu: bool, *arrays: np.ndarray) -> tuple:
    if not on_gpu:
        return arrays
    import cupy

    return tuple(cupy.asarray(a) for a in arrays)


def linear_sum_assignment(
    cost: Any,
    maximize: bool = False,
    *,
    backend: str = "auto",
    return_stats: bool = False,
) -> tuple:
    """Solve the linear assignment problem, with the contract of SciPy's function.

    Parameters
    ----------
    cost : array_like, shape (n, m)
        Cost of assigning row ``i`` to column ``j``; any real dtype (bool, integer,
        floating). ``inf`` (``-inf`` when ``maximize``) forbids a pair. Rectangular
        matrices are allowed either way: ``min(n, m)`` pairs are chosen.
    maximize : bool, optional
        Maximise the total instead of minimising it.
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy costs (results stay on the device), else the
        CPU (``VISION_CUTS_BACKEND`` overrides it).
    return_stats : bool, optional
        Also return the solver's work counters (see Returns).

    Returns
    -------
    row_ind, col_ind : ndarray of int64, shape (min(n, m),)
        The optimal pairs ``(row_ind[k], col_ind[k])``, ``row_ind`` sorted; the total
        is ``cost[row_ind, col_ind].sum()``. Same array kind (NumPy / CuPy) as
        ``cost``.
    stats : dict
        Only with ``return_stats``: the work counters, as for
        :func:`linear_sum_assignment_batched`.

    Raises
    ------
    TypeError
        ``cost`` is None or has a non-numeric (string, object, complex) dtype.
    ValueError
        ``cost`` is not 2-D (the message gives its shape), contains NaN or an
        infinity of the wrong sign, or is infeasible: ``"cost matrix is infeasible:
        ..."`` (SciPy's words, then the reason) when no ``min(n, m)`` pairs avoid
        every forbidden pair.
    BackendUnavailableError
        ``backend="gpu"`` without a usable device.

    See Also
    --------
    linear_sum_assignment_batched : many equally shaped problems in one call.
    scipy.optimize.linear_sum_assignment : the contract followed here.

    Notes
    -----
    The CPU path runs the numba solver behind :func:`linear_sum_assignment_batched` on a
    stack of one, on the calling thread: Jonker-Volgenant for finite costs that are
    square or nearly so, else a port of SciPy's own shortest augmenting path (Crouse
    2016), which handles ``inf`` and infeasibility. Measured on 2 cores against
    :func:`scipy.optimize.linear_sum_assignment`: 2.9-4.1x faster on uniform integer
    costs (n = 1000 and 4000), level on Euclidean point matching (n = 1000);
    ``lap.lapjv`` is faster still on uniform costs but 3-4x slower on point matching
    (``benchmarks/bench_assignment.py``). Limits: O(n^2 m) worst-case time, one thread,
    a float64 copy of ``cost``; integer costs are exact while partial sums stay below
    ``2**53`` in magnitude. CuPy input on the CPU is copied to the host and the result
    copied back.

    The GPU path is the solver of :func:`linear_sum_assignment_batched` on a stack
    of one (Goldberg-Kennedy cost scaling; see there for its exactness: integer
    costs exact, other float costs quantised to ``2**16``-``2**20`` levels of their
    range).

    References
    ----------
    D. F. Crouse, "On implementing 2D rectangular assignment algorithms", IEEE
    Transactions on Aerospace and Electronic Systems 52(4), 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from vision_cuts import linear_sum_assignment
    >>> cost = np.array([[4, 1, 3], [2, 0, 5], [3, 2, 2]])
    >>> row_ind, col_ind = linear_sum_assignment(cost, backend="cpu")
    >>> col_ind.tolist(), int(cost[row_ind, col_ind].sum())
    ([1, 0, 2], 5)
    """
    cost = _as_cost_array(cost, "cost", 2, "(n, m) cost matrix")
    maximize = check_flag(maximize, "maximize")
    return_stats = check_flag(return_stats, "return_stats")
    on_gpu = is_cupy_array(cost)
    if _pick_backend(backend, cost) == "gpu":
        row_ind, col_ind, status, stats = _solve_gpu(cost[None], maximize, "cost")
        if status[0] == 1:
            raise ValueError(_INFEASIBLE.format(shape=tuple(cost.shape)))
        out = _as_kind(on_gpu, row_ind[0], col_ind[0])
        return out + (stats,) if return_stats else out
    host = to_numpy(cost)
    from ._assignment_cpu import INVALID, SOLVED, linear_sum_assignment_cpu

    # NaN and wrong-sign infinities are found by the compiled solver in the scan it
    # makes anyway; only then is the matrix searched for the entry to name
    row_ind, col_ind, status = linear_sum_assignment_cpu(host, maximize)
    if status == INVALID:
        _check_values(host, "cost", maximize)
        raise AssertionError("the solver flagged a matrix that _check_values accepts")
    if status != SOLVED:
        raise ValueError(_INFEASIBLE.format(shape=tuple(cost.shape)))
    out = _same_kind(on_gpu, row_ind, col_ind)
    return out + (_CPU_STATS.copy(),) if return_stats else out


def linear_sum_assignment_batched(
    costs: Any,
    maximize: bool = False,
    *,
    backend: str = "auto",
    return_stats: bool = False,
) -> tuple:
    """Solve a stack of equally shaped linear assignment problems in one call.

    Parameters
    ----------
    costs : array_like, shape (B, n, m)
        ``costs[b]`` is the cost matrix of problem ``b``, with the conventions of
        :func:`linear_sum_assignment` (real dtype, ``inf`` / ``-inf`` when
        ``maximize`` forbids a pair, rectangular either way).
    maximize : bool, optional
        Maximise every total instead of minimising it.
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy costs (results stay on the device), else the
        CPU (``VISION_CUTS_BACKEND`` overrides it).
    return_stats : bool, optional
        Also return the solver's work counters (see Returns).

    Returns
    -------
    row_ind, col_ind : ndarray of int64, shape (B, k), k = min(n, m)
        ``(row_ind[b], col_ind[b])`` is an optimal assignment of ``costs[b]``, exactly
        as :func:`linear_sum_assignment` would return it in form: ``row_ind[b]`` is
        sorted (``arange(k)`` when ``n <= m``) and the total is
        ``costs[b][row_ind[b], col_ind[b]].sum()``. Every problem of a stack pairs the
        same number ``k`` of rows, hence 2-D arrays rather than lists. Same array kind
        (NumPy / CuPy) as ``costs``.
    stats : dict
        Only with ``return_stats``: ``backend`` ("cpu" or "gpu") and ``path``, the
        solver that ran ("cpu"; on the GPU "small" for the one-warp/one-block
        kernels, "rows" for the large-problem path, "none" when nothing was solved).
        The large-problem path counts its work so that callers and tests can bound
        it: ``phases``, ``bids``, ``global_updates``, ``sweeps`` (Bellman-Ford
        sweeps of the global updates), ``list_builds``, ``list_fallbacks``,
        ``settles`` and ``settle_frees`` (the price floor of rectangular problems),
        ``whole_rows`` (rows whose ties outgrew their candidate list),
        ``ms`` and ``per_phase`` (the same counters and the time of every phase),
        and ``feasibility``, how a stack with forbidden pairs was shown feasible
        ("diagonal": a finite diagonal in its first or last columns, such as a
        dummy column per row; "matching": a maximum matching on the GPU; "none":
        no forbidden pairs). A stack whose large-problem path runs past its time
        budget (0.02 s + 30 ns a cost entry; costs that make the auction wage long
        price wars, such as Machol-Wien's ``i * j``) is solved again on the CPU:
        ``path`` "cpu", ``handover`` (``gpu_s``, ``cpu_s``) and ``gpu`` (the GPU's
        counters until then).

    Raises
    ------
    TypeError
        ``costs`` is None or has a non-numeric dtype.
    ValueError
        ``costs`` is not 3-D, contains NaN or an infinity of the wrong sign, or some
        problem is infeasible; the message names the first infeasible index
        ``costs[b]`` and how many there are.
    BackendUnavailableError
        ``backend="gpu"`` without a usable device.

    See Also
    --------
    linear_sum_assignment : one problem.

    Notes
    -----
    The CPU path is compiled with numba and solves the whole stack in one call,
    problems spread over the cores (``numba.prange``), with no Python work per
    problem. Each problem runs Jonker-Volgenant (column reduction, reduction
    transfer, augmenting row reduction, shortest augmenting paths; the algorithm of
    ``lap.lapjv``), padded to square with zero rows when it is at most 10% wider
    than tall or the padding is small (at most 2**16 cells); wider problems and
    problems with forbidden pairs run a port of
    SciPy's own solver (Crouse 2016), which handles ``inf`` and infeasibility. Both
    are exact; costs are float64, so integer costs are exact while partial sums stay
    below ``2**53`` in magnitude. On ties the chosen assignment may differ from
    SciPy's; the optimal total does not. Measured on 2 cores against a Python loop
    over SciPy: 3-7x faster on 10,000 problems of 32 x 32 and 1,000 of 128 x 128
    (``benchmarks/bench_assignment.py``).

    The GPU path is epsilon-scaling cost scaling (Goldberg-Kennedy's refine in its
    auction / double-push form, lock-free: a bid is one 64-bit ``atomicMax`` on a
    packed (price, owner) column word; alpha = 10; pairs still eps-optimal are kept
    from phase to phase). Small problems run one warp (n, m <= 32) or one block
    (<= 256) per problem, every phase in one launch; larger ones a warp per row of
    all problems, one persistent launch per phase. Problems are padded to square,
    forbidden pairs get a cost that no feasible assignment can beat (infeasibility
    is read off the optimum) and costs are scaled by ``max(n, m) + 1``, so the last
    phase (eps = 1) ends at the exact optimum. Integer costs (and float costs whose
    finite values are all integers) are solved exactly; a ``ValueError`` is raised
    when their range is too large for the int64 prices (about
    ``range * max(n, m)**2 < 2**56 / max(n, m)``, ``min(n, m)`` times less with
    forbidden pairs). Other float costs are rounded to ``Q`` levels of their range
    (``Q = 2**20``, fewer, down to ``2**16``, where that keeps int32 costs): the
    returned total exceeds the optimum by at most ``min(n, m) * (hi - lo) / Q``.

    References
    ----------
    R. Jonker and A. Volgenant, "A shortest augmenting path algorithm for dense and
    sparse linear assignment problems", Computing 38, 1987.

    D. F. Crouse, "On implementing 2D rectangular assignment algorithms", IEEE
    Transactions on Aerospace and Electronic Systems 52(4), 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from vision_cuts import linear_sum_assignment_batched
    >>> costs = np.array([[[4, 1], [2, 0]], [[1, 9], [9, 1]]])
    >>> row_ind, col_ind = linear_sum_assignment_batched(costs, backend="cpu")
    >>> row_ind.tolist(), col_ind.tolist()
    ([[0, 1], [0, 1]], [[1, 0], [0, 1]])
    """
    costs = _as_cost_array(costs, "costs", 3, "(B, n, m) stack of cost matrices")
    maximize = check_flag(maximize, "maximize")
    return_stats = check_flag(return_stats, "return_stats")
    on_gpu = is_cupy_array(costs)
    if _pick_backend(backend, costs) == "gpu":
        row_ind, col_ind, status, stats = _solve_gpu(costs, maximize, "costs")
        _raise_infeasible(status, costs.shape)
        out = _as_kind(on_gpu, row_ind, col_ind)
        return out + (stats,) if return_stats else out
    host = to_numpy(costs)
    from ._assignment_cpu import INVALID, linear_sum_assignment_batched_cpu

    # NaN and wrong-sign infinities are found inside the compiled solver, in the scan
    # it makes anyway, and reported here with the same message as the single form
    row_ind, col_ind, status = linear_sum_assignment_batched_cpu(host, maximize)
    if (status == INVALID).any():
        _check_values(host, "costs", maximize)
        raise AssertionError("the solver flagged a problem that _check_values accepts")
    _raise_infeasible(status, host.shape)
    out = _same_kind(on_gpu, row_ind, col_ind)
    return out + (_CPU_STATS.copy(),) if return_stats else out


#: SciPy's message, then why: the forbidden pairs leave no full assignment.
_INFEASIBLE = (
    "cost matrix is infeasible: no assignment of min(n, m) pairs of cost (shape "
    "{shape}) avoids its forbidden (infinite) entries"
)


def _raise_infeasible(status: np.ndarray, shape: tuple) -> None:
    """ValueError naming the infeasible problems of a stack (status 1 = INFEASIBLE)."""
    if not (status == 1).any():
        return
    bad = np.flatnonzero(status == 1)
    n, m = shape[1:]
    raise ValueError(
        f"cost matrix is infeasible: costs[{int(bad[0])}] has no assignment of "
        f"min(n, m) = {min(n, m)} pairs that avoids every forbidden pair "
        f"({bad.size} of {shape[0]} problems infeasible, indices "
        f"{bad[:10].tolist()}{' ...' if bad.size > 10 else ''})"
    )


_CPU_STATS = {"backend": "cpu", "path": "cpu"}


def _solve_gpu(costs: Any, maximize: bool, name: str) -> tuple:
    """The GPU solver on a (B, n, m) stack: (row_ind, col_ind, status, stats); NaN /
    wrong-sign infinity -> ValueError."""
    from ._assignment_gpu import INVALID, linear_sum_assignment_batched_gpu

    row_ind, col_ind, status, run = linear_sum_assignment_batched_gpu(costs, maximize)
    if (status == INVALID).any():
        host = to_numpy(costs)
        _check_values(host[0] if name == "cost" else host, name, maximize)  # raises
        raise AssertionError("the GPU solver flagged costs that _check_values accepts")
    return row_ind, col_ind, status, {"backend": "gpu", **run["stats"]}


def _as_kind(on_gpu: bool, row_ind: Any, col_ind: Any) -> tuple:
    """CuPy results back to the host for NumPy input."""
    if on_gpu:
        return row_ind, col_ind
    return row_ind.get(), col_ind.get()
