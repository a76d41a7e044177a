"""Multi-label energies on grids: alpha-expansion and alpha-beta swap by exact cuts.

``E(l) = sum_p unary[p, l_p] + sum_(p,q) w_pq V(l_p, l_q)`` over the neighbour pairs
of a 2-D or 3-D grid (any neighbourhood of :mod:`vision_cuts.grid`). Both methods make
binary moves, each an exact minimum cut of a Kolmogorov-Zabih energy: a move offers
every node two labels (keep its label or take ``alpha``; or, for the nodes labelled
``alpha`` or ``beta``, one of the two), and the cut picks the best combination. A move
is submodular, so exact, when ``V`` is a metric (expansion) or a semi-metric (swap);
:func:`minimize_labels` checks that first and names a violating triple or pair.
Expansion ends within ``2 max V / min V`` (a nonzero minimum) of the global minimum
(Boykov, Veksler and Zabih 2001); swap ends at a local minimum of its moves.

References
----------
Y. Boykov, O. Veksler and R. Zabih, "Fast approximate energy minimization via graph
cuts", IEEE TPAMI 23(11), 2001.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numba as nb
import numpy as np

from ._backend import resolve_backend, to_numpy
from ._maxflow_cpu import (
    NO_STOP,
    _bk,
    _greedy,
    _index,
    _init_trees,
    _padded_geometry,
    default_threads,
    solve_records,
)
from ._validate import (
    INT32_MAX,
    check_int,
    check_number,
    exact_sum,
    first_index,
    regular_array,
)
from .exceptions import NonSubmodularError
from .grid import (
    COST_MAX,
    GridEnergy,
    _arc_views,
    _as_cost,
    connectivity_planes,
    neighbour_offsets,
)
from .maxflow import maxflow_grid

__all__ = ["LabelResult", "label_energy", "minimize_labels", "pairwise_matrix"]

_METHODS = ("expansion", "swap")


class LabelResult(NamedTuple):
    """``labels`` (int32, grid shape), their exact ``energy`` (int), and ``stats``:
    per cycle the energy after it, the moves cut and the moves that lowered it."""

    labels: np.ndarray
    energy: int
    stats: dict


def pairwise_matrix(model: Any, labels: int) -> np.ndarray:
    """The ``(L, L)`` int64 matrix ``V`` of a pairwise model: ``"potts"`` (1 where the
    labels differ), ``("truncated_linear", cap)`` (``min(|a - b|, cap)``),
    ``("truncated_quadratic", cap)`` (``min((a - b)^2, cap)``), or an ``(L, L)``
    integer matrix as it is (its entries strictly within +-2**62)."""
    if isinstance(labels, bool) or not isinstance(labels, (int, np.integer)):
        raise TypeError(f"labels must be an integer, got {type(labels).__name__}")
    a = np.arange(int(labels))
    diff = np.abs(a[:, None] - a[None, :])
    if isinstance(model, str):
        if model == "potts":
            return (diff != 0).astype(np.int64)
        raise ValueError(
            f"pairwise must be 'potts', ('truncated_linear', cap), "
            f"('truncated_quadratic', cap) or an (L, L) matrix, got {model!r}"
        )
    if isinstance(model, tuple) and len(model) == 2 and isinstance(model[0], str):
        name, cap = model
        cap = check_int(cap, f"the cap of {name!r}", low=1)
        # no cap above (L - 1)^2 changes V: clamped, a cap of any size fits int64
        cap = min(cap, (int(labels) - 1) ** 2)
        if name == "truncated_linear":
            return np.minimum(diff, cap).astype(np.int64)
        if name == "truncated_quadratic":
            return np.minimum(diff * diff, cap).astype(np.int64)
        raise ValueError(
            f"pairwise model must be 'truncated_linear' or 'truncated_quadratic', "
            f"got {name!r}"
        )
    if isinstance(model, tuple) and model and isinstance(model[0], str):
        raise ValueError(
            f"a pairwise model must be a pair (name, cap), such as "
            f"('truncated_linear', 2), got {model!r}"
        )
    v = to_numpy(regular_array(model, "pairwise"))
    if v.dtype.kind not in "iu":
        raise TypeError(f"a pairwise matrix must have an integer dtype, got {v.dtype}")
    if v.shape != (labels, labels):
        raise ValueError(
            f"a pairwise matrix must have shape (L, L) = {(labels, labels)}, got "
            f"{v.shape}"
        )
    # bounded before the cast: a uint64 entry beyond int64 is reported as it is
    v, _ = _as_cost(v, "pairwise", None, np)
    return v


def _check_pairwise(v: np.ndarray, method: str) -> None:
    """Semi-metric (swap) or metric (expansion); the first violation is named."""
    n = v.shape[0]
    neg = np.argwhere(v < 0)
    if len(neg):
        a, b = (int(i) for i in neg[0])
        raise ValueError(f"pairwise V({a}, {b}) = {int(v[a, b])} is negative")
    diag = np.flatnonzero(np.diag(v))
    if len(diag):
        a = int(diag[0])
        raise ValueError(f"pairwise V({a}, {a}) = {int(v[a, a])} must be 0")
    asym = np.argwhere(v != v.T)
    if len(asym):
        a, b = (int(i) for i in asym[0])
        raise ValueError(
            f"pairwise must be symmetric: V({a}, {b}) = {int(v[a, b])} but "
            f"V({b}, {a}) = {int(v[b, a])}"
        )
    off = ~np.eye(n, dtype=bool)
    zero = np.argwhere((v == 0) & off)
    if len(zero):
        a, b = (int(i) for i in zero[0])
        raise ValueError(
            f"pairwise V({a}, {b}) = 0 for different labels: {method} needs V > 0 "
            "off the diagonal"
        )
    if method == "expansion":  # the triangle inequality V(a, c) <= V(a, b) + V(b, c)
        for b in range(n):
            bad = np.argwhere(v > v[:, b][:, None] + v[b, :][None, :])
            if len(bad):
                a, c = (int(i) for i in bad[0])
                raise ValueError(
                    f"expansion needs a metric: V({a}, {c}) = {int(v[a, c])} > "
                    f"V({a}, {b}) + V({b}, {c}) = {int(v[a, b])} + {int(v[b, c])} "
                    "(use method='swap', which needs a semi-metric only)"
                )


def _steps(ndim: int, connectivity: Any) -> int:
    return connectivity_planes(connectivity, ndim) // 2


def _check(unary: Any, pairwise: Any, weights: Any, connectivity: Any) -> tuple:
    """The model as int64 arrays ``(u, v, w, D)``, its energies within int64."""
    u = to_numpy(regular_array(unary, "unary"))
    if u.dtype.kind not in "iu":
        raise TypeError(f"unary must have an integer dtype, got {u.dtype}")
    if u.ndim not in (3, 4) or u.shape[-1] < 2:
        raise ValueError(
            f"unary must have shape (M, N, L) or (P, M, N, L) with L >= 2 labels, got "
            f"{u.shape}"
        )
    # bounded before the cast: a uint64 value beyond int64 is reported as it is
    u, umax = _as_cost(u, "unary", None, np)
    grid, nlabels = u.shape[:-1], u.shape[-1]
    v = pairwise_matrix(pairwise, nlabels)
    D = _steps(len(grid), connectivity)
    if weights is None:
        w = np.ones((D, *grid), dtype=np.int64)
    else:
        w = to_numpy(regular_array(weights, "weights"))
        if w.dtype.kind not in "iu":
            raise TypeError(f"weights must have an integer dtype, got {w.dtype}")
        if w.shape != (D, *grid):
            raise ValueError(
                f"weights must have shape (D, *grid) = {(D, *grid)}, got {w.shape}"
            )
        w, _ = _as_cost(w, "weights", None, np)
        if w.size and int(w.min()) < 0:
            bad = first_index(w < 0)
            raise ValueError(f"weights must be >= 0, got {w[bad]} at index {bad}")
    _check_energy_range(umax, v, w, D)
    return u, v, w, D


def _check_energy_range(umax: int, v: np.ndarray, w: np.ndarray, D: int) -> None:
    """Every energy and every partial sum of its terms lies within +-2**62: ``n
    max|unary| + sum(w) max|V|`` (``w`` over the grid's pairs) below it. The int64
    sums of the energy and of the move graphs (their constants wrap modulo 2**64 only
    on the way to a total within int64) are then exact, and so is each ``w V``."""
    grid = w.shape[1:]
    n = int(np.prod(grid))
    vmax = max(int(v.max()), -int(v.min())) if v.size else 0
    wsum = sum(exact_sum(w[d][_arc_views(len(grid), 2 * d)[0]]) for d in range(D))
    bound = n * umax + wsum * vmax
    if bound >= COST_MAX:
        raise ValueError(
            "unary, weights and pairwise are too large for exact int64 energies: "
            f"{n} nodes x max |unary| ({umax}) + sum of weights ({wsum}) x max |V| "
            f"({vmax}) = {bound} must be below 2**62 ({COST_MAX}); reduce the costs "
            "or the weights"
        )


def label_energy(
    unary: Any,
    labels: Any,
    pairwise: Any = "potts",
    *,
    weights: Any = None,
    connectivity: int = 1,
) -> int:
    """The exact energy ``E(labels)`` of :func:`minimize_labels`'s model, a Python
    int; ``labels`` integers in ``[0, L)`` of the grid shape."""
    u, v, w, D = _check(unary, pairwise, weights, connectivity)
    return _energy(u, v, w, D, _check_labels(labels, u, "labels"))


def _energy(
    u: np.ndarray, v: np.ndarray, w: np.ndarray, D: int, lab: np.ndarray
) -> int:
    ndim = lab.ndim
    total = int(np.take_along_axis(u, lab[..., None], axis=-1).sum())
    for d in range(D):
        tail, head = _arc_views(ndim, 2 * d)
        total += int((w[d][tail] * v[lab[tail], lab[head]]).sum())
    return total


@nb.njit(cache=True, nogil=True)
def _move_graph(
    u, v, w, zero, one, dims, steps, src, snk, edges, src32, snk32
):  # pragma: no cover
    """The Kolmogorov-Zabih capacities of a move in one pass (``grid_energy``'s
    construction, fused): node p takes ``zero[p]`` (x = 0) or ``one[p]`` (x = 1).
    ``u`` (n, L), ``w`` (D, n), labels (n,), ``dims`` (nz, ny, nx), ``steps`` (D, 3)
    (dz, dy, dx); src, snk (n,) int64 scratch; fills the forward planes of edges
    (2 D, n) and src32, snk32 (n,), int32. Returns (constant, -1 or the first edge
    with B + C - A - D < 0, 0 or the first array beyond int32: 1 source, 2 sink,
    3 edges)."""
    nz, ny, nx = dims
    n = nz * ny * nx
    const = 0
    bad = -1
    over = 0
    for i in range(n):
        src[i] = u[i, one[i]]  # cut when x = 1
        snk[i] = u[i, zero[i]]  # cut when x = 0
    for d in range(steps.shape[0]):
        dz, dy, dx = steps[d, 0], steps[d, 1], steps[d, 2]
        for z in range(nz):
            zz = z + dz
            if zz < 0 or zz >= nz:
                continue
            for y in range(ny):
                yy = y + dy
                if yy < 0 or yy >= ny:
                    continue
                for x in range(nx):
                    xx = x + dx
                    if xx < 0 or xx >= nx:
                        continue
                    p = (z * ny + y) * nx + x
                    q = (zz * ny + yy) * nx + xx
                    wd = w[d, p]
                    if wd == 0:
                        continue
                    if zero[p] == one[p] and zero[q] == one[q]:
                        # neither end can change (swap: both outside the pair): a
                        # constant, no capacities
                        const += wd * v[zero[p], zero[q]]
                        continue
                    a = wd * v[zero[p], zero[q]]
                    b = wd * v[zero[p], one[q]]
                    c = wd * v[one[p], zero[q]]
                    e = wd * v[one[p], one[q]]
                    const += a
                    if c > a:
                        src[p] += c - a
                    else:
                        snk[p] += a - c
                        const += c - a
                    if e > c:
                        src[q] += e - c
                    else:
                        snk[q] += c - e
                        const += e - c
                    lam = b + c - a - e
                    if lam < 0 and bad < 0:
                        bad = d * n + p
                    if lam > 2147483647 and over == 0:
                        over = 3
                    edges[2 * d, p] = lam
    for i in range(n):
        m = min(src[i], snk[i])
        s, t = src[i] - m, snk[i] - m
        if s > 2147483647 and over == 0:
            over = 1
        if t > 2147483647 and over == 0:
            over = 2
        src32[i] = s
        snk32[i] = t
        const += m
    return const, bad, over


@nb.njit(cache=True, nogil=True, inline="always")
def _cancel(s, t, over):  # pragma: no cover
    """The part ``min(s, t)`` that a node's source and sink capacities cancel, and
    ``over``, or where it is 0 the first of them left beyond int32 (1 source, 2
    sink)."""
    m = min(s, t)
    if over == 0:
        if s - m > 2147483647:
            over = 1
        elif t - m > 2147483647:
            over = 2
    return m, over


@nb.njit(cache=True, nogil=True, error_model="numpy")
def _move_records(
    czero, cone, v, w, zero, one, dims, steps, pdims, st, rows, r0, r1
):  # pragma: no cover
    """:func:`_move_graph` written straight into the CPU solver's node records ``st``
    (every field of the real nodes, the dead ones left zero; padded layout
    ``pdims`` of ``_maxflow_cpu._padded_geometry``, 2 D planes) from every node's
    unary cost of ``zero`` and of ``one`` (``czero``, ``cone``: read in order
    instead of gathered from an (n, L) table), for the rows [r0, r1) of the grid
    (flat z ny + y): each node gathers its own terminal capacities from the arcs it
    heads as well as those it tails, so that threads on other rows write other
    records. Fills ``rows`` (rows, 4) int64: a row's constant, its first edge with
    B + C - A - D < 0 (flat d n + p, -1: none), an edge beyond int32 (0 / 1) and
    its first node beyond int32 (0, 1 source, 2 sink); :func:`_move_cut_cpu` sums
    them up."""
    nz, ny, nx = dims[0], dims[1], dims[2]
    n = nz * ny * nx
    D = steps.shape[0]
    K = 2 * D
    S = K + 4
    big = 2147483647
    for r in range(r0, r1):
        z = r // ny
        y = r - z * ny
        const = 0
        bad = -1
        eover = 0
        tover = 0
        for x in range(nx):
            p = r * nx + x
            zp = zero[p]
            op = one[p]
            src = np.int64(cone[p])  # cut when x = 1
            snk = np.int64(czero[p])  # cut when x = 0
            b = _index(z, y, x, pdims) * S
            for k in range(S):  # every field (the buffer may hold the last move)
                st[b + k] = 0
            for d in range(D):
                dz, dy, dx = steps[d, 0], steps[d, 1], steps[d, 2]
                zz, yy, xx = z + dz, y + dy, x + dx  # p tails the arc to q
                # branch-free: labels change from node to node, so the tests of
                # the general construction would mispredict (where neither end can
                # change, or w = 0, the terms below are the constant alone)
                if 0 <= zz < nz and 0 <= yy < ny and 0 <= xx < nx:
                    wd = w[d, p]
                    q = (zz * ny + yy) * nx + xx
                    zq = zero[q]
                    oq = one[q]
                    a = wd * v[zp, zq]
                    c = wd * v[op, zq]
                    lam = wd * v[zp, oq] + c - a - wd * v[op, oq]
                    const += a + min(c - a, 0)
                    src += max(c - a, 0)
                    snk += max(a - c, 0)
                    if lam < 0 and (bad < 0 or d * n + p < bad):
                        bad = d * n + p
                    if lam > big:
                        eover = 1
                    else:
                        st[b + 2 * d] = lam
                zz, yy, xx = z - dz, y - dy, x - dx  # p heads the arc from t
                if 0 <= zz < nz and 0 <= yy < ny and 0 <= xx < nx:
                    t = (zz * ny + yy) * nx + xx
                    wd = w[d, t]
                    ot = one[t]
                    c = wd * v[ot, zp]
                    e = wd * v[ot, op]
                    const += min(e - c, 0)
                    src += max(e - c, 0)
                    snk += max(c - e, 0)
            m, tover = _cancel(src, snk, tover)
            const += m
            st[b + K] = src - snk if tover == 0 else 0
        rows[r, 0] = const
        rows[r, 1] = bad
        rows[r, 2] = eover
        rows[r, 3] = tover


def _move(
    u, v, w, D, zero, one, planes, backend, keep=False, costs=None, work=None
) -> tuple:
    """The best combination of two labellings: node p takes ``zero[p]`` or
    ``one[p]``; one exact cut. Returns (labels, energy).

    With ``keep`` (expansion: ``zero`` is the current labelling), where several
    combinations are best, the one that moves the fewest nodes off ``zero`` (the
    smallest set: every best move moves these). The CPU solver's cut puts on the
    sink side every node the source cannot reach, undecided ones included, the
    GPU's only the nodes that reach the sink; the CPU therefore gets the two
    labellings swapped (a move stays submodular when every node's 0 and 1 swap).
    Moving fewer nodes in ties made the next moves better: a 64^3, 32-label
    truncated-linear expansion ended 5 cycles at 2190298 instead of 2193916
    (PyMaxflow's fastmin, which keeps ties too: 2190298)."""
    if keep and resolve_backend(backend, zero) == "cpu":
        swapped = None if costs is None else costs[::-1]
        return _move_cut(u, v, w, D, one, zero, planes, backend, swapped, work)
    return _move_cut(u, v, w, D, zero, one, planes, backend, costs, work)


def _move_cut(u, v, w, D, zero, one, planes, backend, costs=None, work=None) -> tuple:
    """``_move``'s cut: the sink side (x = 1) takes ``one``. On the CPU the move
    graph is written straight into the solver's node records (:func:`_move_records`;
    ``costs``: every node's unary cost of ``zero`` and of ``one``, flat, gathered
    here when None; ``work``: a dict that keeps the records between moves of one
    grid), elsewhere as a :class:`GridEnergy`."""
    grid = zero.shape
    n = zero.size
    dims = np.array((1,) * (3 - len(grid)) + grid, dtype=np.int64)
    steps = np.zeros((D, 3), dtype=np.int64)
    steps[:, 3 - len(grid) :] = neighbour_offsets(len(grid), planes)[::2]
    if resolve_backend(backend, zero) == "cpu" and n:
        if costs is None:
            flat = u.reshape(n, -1)
            costs = tuple(
                np.take_along_axis(flat, lab.reshape(-1, 1), axis=1).reshape(-1)
                for lab in (zero, one)
            )
        return _move_cut_cpu(costs, v, w, D, zero, one, planes, dims, steps, work)
    src, snk = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    src32, snk32 = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32)
    edges = np.zeros((planes, n), dtype=np.int32)
    const, bad, over = _move_graph(
        u.reshape(n, -1), v, w.reshape(D, n), zero.reshape(-1), one.reshape(-1),
        dims, steps, src, snk, edges, src32, snk32,
    )  # fmt: skip
    _move_errors(bad, over, n, grid)
    energy = GridEnergy._trusted(
        src32.reshape(grid), snk32.reshape(grid), edges.reshape(planes, *grid),
        int(const),
    )  # fmt: skip
    cut = maxflow_grid(energy, backend=backend)
    take = to_numpy(cut.labels).astype(bool)
    return np.where(take, one, zero), energy.constant + cut.flow


def _move_errors(bad: int, over: int, n: int, grid: tuple) -> None:
    """The errors of a move graph (see :func:`_move_graph`)."""
    if bad >= 0:  # cannot happen for a checked (semi-)metric; a guard, not a path
        d, p = divmod(int(bad), n)
        raise NonSubmodularError(
            f"a move is not submodular at direction {d}, node "
            f"{np.unravel_index(p, grid)}",
            count=1,
            first=(d, *np.unravel_index(p, grid)),
        )
    if over:
        raise MoveOverflowError(("source", "sink", "edges")[over - 1])


class MoveOverflowError(ValueError):
    """A move graph's ``name`` capacities beyond int32; :func:`minimize_labels`
    replaces it with an error that gives the values of its inputs."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"the {name} capacities of a move exceed int32 ({INT32_MAX}): reduce the "
            "costs or the weights"
        )
        self.name = name


def _overflow_error(name: str, u: np.ndarray, v: np.ndarray, w: np.ndarray):
    """The ValueError of a move graph beyond int32 (``name``: source, sink or
    edges), with the largest terms of ``minimize_labels``'s inputs that make it."""
    spread = u.max(axis=-1).astype(np.int64) - u.min(axis=-1)
    at = np.unravel_index(int(np.argmax(spread)), spread.shape)
    vmax = int(v.max()) if v.size else 0
    wmax = int(w.max()) if w.size else 0
    return ValueError(
        f"the {name} capacities of a move exceed int32 ({INT32_MAX}): every move is "
        "an int32 graph, whose capacities at a node add up its unary spread (its "
        f"largest minus its smallest cost; here up to {int(spread[at])}, at node "
        f"{tuple(int(i) for i in at)}) and its pair terms (weights x V; here up to "
        f"{wmax} x {vmax} = {wmax * vmax} an edge); reduce the costs or the weights"
    )


#: the fewest nodes a thread of :func:`_move_cut_cpu`'s graph build
_MIN_MOVE_ROWS_NODES = 1 << 15


def _move_cut_cpu(costs, v, w, D, zero, one, planes, dims, steps, work=None) -> tuple:
    """:func:`_move_cut` on the CPU solver, its records filled by the move itself
    (kept in ``work["records"]`` for the next move where ``work`` is a dict: the
    move rewrites every field of the real nodes, and nothing writes the dead ones)."""
    t0 = time.perf_counter()
    grid = zero.shape
    n = zero.size
    npad, _, pdims = _padded_geometry(grid, planes)
    size = npad * (planes + 4)
    st = None if work is None else work.get("records")
    if st is None or st.size != size:
        st = np.zeros(size, dtype=np.int32)
        if work is not None:
            work["records"] = st
    nrows = int(dims[0] * dims[1])
    rows = np.empty((nrows, 4), dtype=np.int64)
    args = (
        *costs, v, w.reshape(D, n), zero.reshape(-1), one.reshape(-1),
        dims, steps, tuple(int(x) for x in pdims), st, rows,
    )  # fmt: skip
    threads = default_threads()
    parts = min(threads, max(1, n // _MIN_MOVE_ROWS_NODES), nrows)
    cuts = [nrows * i // parts for i in range(parts + 1)]
    if parts > 1:  # the numba functions release the GIL
        with ThreadPoolExecutor(parts) as pool:
            list(pool.map(lambda i: _move_records(*args, cuts[i], cuts[i + 1]),
                          range(parts)))  # fmt: skip
    else:
        _move_records(*args, 0, nrows)
    bad = rows[:, 1][rows[:, 1] >= 0]
    over = 3 if rows[:, 2].any() else int(rows[np.argmax(rows[:, 3] > 0), 3])
    _move_errors(int(bad.min()) if bad.size else -1, over, n, grid)
    const = int(rows[:, 0].sum())
    flow, labels, _ = solve_records(st, grid, planes, 0, threads, t0)
    return np.where(labels.astype(bool), one, zero), const + int(flow)


# ---- alpha-beta swap on the CPU: each move's graph over its own nodes only -----------
#
# A swap move offers a choice only to the nodes labelled alpha or beta; every other
# node is isolated in the full-grid move graph (no arc capacity, equal terminals), so
# the move is the same cut on the compact graph of the participating nodes, their
# neighbours outside the pair folded into the terminal capacities. The cut is the
# same one too: the CPU solver labels 0 the nodes the source reaches in the final
# residual graph, the smallest source side of all minimum cuts, which depends on the
# move's energy only, not on the graph that represents it or the order of the search.
# Compact node record (int32, S = 2 K + 4 fields): [0, K) residual capacity of the
# arc of plane k, K terminal residual (> 0 from the source), K + 1 timestamp, K + 2
# distance, K + 3 tree / queued / parent code as in ``_maxflow_cpu``, [K + 4, 2 K + 4)
# the compact index of the neighbour in plane k (the dead record ``cap`` when none).
# The max-flow is the grid solver's search itself (``_maxflow_cpu._bk`` and its
# greedy pass and roots), called with ``off=None``: neighbours read from the records.


@nb.njit(cache=True, nogil=True)
def _swap_part(
    uT, v, wp, labp, ma, mb, pos, off, a, b, st, pidx, lo, hi, dead, queue, orph,
    xarc, xnb, xcap, out,
):  # pragma: no cover  # fmt: skip
    """The compact nodes [lo, hi) of a swap move (see :func:`_swap_move`): their
    share of the merged ``ma`` / ``mb`` (``pidx``, ``pos``), their records, each
    node writing its own record only, then their max-flow on their own. A node
    takes part when its label is ``a`` or ``b`` (``pos`` is read for the range's
    own nodes only). An arc to a node outside the range is held back (its record
    field, the neighbour's padded index and the capacity in ``xarc`` / ``xnb`` /
    ``xcap``; the record links to the dead node meanwhile). ``queue`` / ``orph``:
    the range's slices. ``out``: (constant, the energy terms the move can change
    at the current labels, an edge beyond int32 (0 / 1), the first node beyond
    int32 (0, 1 source, 2 sink), held-back arcs, flow, clock); no flow when
    beyond int32."""
    # the nodes [lo, hi) of the merge of ma and mb (disjoint, in raster order): the
    # first lo are ia of ma and lo - ia of mb, ia found by bisection
    na0 = ma.shape[0]
    nb0 = mb.shape[0]
    ia = max(0, lo - nb0)
    top = min(lo, na0)
    while ia < top:
        mid = (ia + top) >> 1
        if ma[mid] < mb[lo - mid - 1]:
            ia = mid + 1
        else:
            top = mid
    ib = lo - ia
    for i in range(lo, hi):
        if ib == nb0 or (ia < na0 and ma[ia] < mb[ib]):
            pp = ma[ia]
            ia += 1
        else:
            pp = mb[ib]
            ib += 1
        pidx[i] = pp
        pos[pp] = i
    first = pidx[lo]  # nodes before it / after ``last`` lie in other ranges
    last = pidx[hi - 1]
    K = off.shape[0]
    S = 2 * K + 4
    NB = K + 4
    big = 2147483647
    const = np.int64(0)
    ecur = np.int64(0)
    over_edge = False
    over_node = 0
    nx = 0
    c2 = v[a, b] + v[b, a]
    vba = v[b, a]
    va = v[a]
    vb = v[b]
    for i in range(lo, hi):
        pp = pidx[i]
        isa = labp[pp] == a
        s = uT[b, pp]  # cut when x = 1
        t = uT[a, pp]  # cut when x = 0
        ecur += t if isa else s
        base = i * S
        for d in range(K >> 1):
            # forward plane: a participating head gets _move_graph's arc, A = E = 0
            # (V(a, a) = V(b, b) = 0): lam = B + C, C to the tail's source and the
            # head's sink, -C to the constant; a fixed one (or none: weight 0) a
            # terminal cost
            q = pp + off[2 * d]
            lq = labp[q]
            wd = wp[d, pp]
            ca = wd * va[lq]
            cb = wd * vb[lq]
            cc = wd * vba
            inp = lq == a or lq == b
            lam = wd * c2 if inp else 0
            over_edge |= lam > big
            j = dead
            if inp:
                if q > last:  # a later range's node: held back
                    xarc[nx] = base + 2 * d
                    xnb[nx] = q
                    xcap[nx] = lam
                    nx += 1
                    lam = 0
                else:
                    j = pos[q]
            st[base + NB + 2 * d] = j
            st[base + 2 * d] = lam
            s += cc if inp else cb
            t += 0 if inp else ca
            const -= cc if inp else 0
            ecur += ca if isa else cb
            # backward plane: the participating tail has the arc
            q = pp + off[2 * d + 1]
            lq = labp[q]
            wd = wp[d, q]
            ca = wd * va[lq]
            cb = wd * vb[lq]
            inp = lq == a or lq == b
            j = dead
            if inp:
                if q < first:  # an earlier range's node: held back
                    xarc[nx] = base + 2 * d + 1
                    xnb[nx] = q
                    xcap[nx] = 0
                    nx += 1
                else:
                    j = pos[q]
            st[base + NB + 2 * d + 1] = j
            st[base + 2 * d + 1] = 0
            s += 0 if inp else cb
            t += wd * vba if inp else ca
            ecur += 0 if inp else (ca if isa else cb)
        mn, over_node = _cancel(s, t, over_node)
        const += mn
        st[base + K] = s - t
        st[base + K + 1] = 0
        st[base + K + 2] = 0
        st[base + K + 3] = 0
    out[0] = const
    out[1] = ecur
    out[2] = over_edge
    out[3] = over_node
    out[4] = nx
    if over_edge or over_node:
        return
    # the range's max-flow on its own
    flow = _greedy(st, None, K, lo, hi)
    n = _init_trees(st, None, K, lo, hi, queue)
    f, _, now, _ = _bk(st, None, K, queue, n, orph, np.int32(0), lo, hi, NO_STOP)
    out[5] = flow + f
    out[6] = now


@nb.njit(cache=True, nogil=True, parallel=True)
def _swap_move(
    uT, v, wp, labp, ma, mb, pos, off, a, b, energy, st, pidx, queue, orph,
    min_part, xarc, xnb, xcap, res,
):  # pragma: no cover  # fmt: skip
    """One alpha-beta swap move on the compact graph of the nodes labelled ``a`` or
    ``b``, in the padded layout of :class:`_CompactSwap`: ``uT`` (L, .) the unary
    costs, ``labp`` the labels (the sentinel L outside the grid), ``wp`` (D, .) the
    weights (0 for arcs that leave the grid), ``pos`` the compact index of every
    node of the move (stale elsewhere: never reset), ``off`` (K,) the step of every
    plane, ``v`` (L + 1, L + 1) with a zero row and column for the sentinel. The
    cut x = 1 takes ``b``, as the full-grid move's ``one``, with ``_move_graph``'s
    capacities and int32 check. ``ma`` / ``mb``: the nodes of ``a`` / ``b`` in
    raster order. The compact nodes, in raster order, are cut into at most
    ``len(res)`` ranges of ``min_part`` nodes or more, each merged and solved by
    one thread side by side (:func:`_swap_part`, the arcs between them held back),
    then the arcs are put back and the search goes on over all of them from the
    tree nodes at their ends, as :func:`vision_cuts._maxflow_cpu.maxflow_grid_cpu`
    merges its strips: every step an ordinary augmentation, the same cut. Applies
    the move to ``labp`` when it lowers ``energy``. Returns (the move's energy, 0
    or the first capacity array beyond int32: 1 source, 2 sink, 3 edges, the nodes
    of ``a`` and of ``b`` after it)."""
    K = off.shape[0]
    S = 2 * K + 4
    FL = K + 3
    dead = queue.shape[0] - 1
    m = ma.shape[0] + mb.shape[0]
    P = min(res.shape[0], m // min_part)
    if P < 2:
        P = 1
    for c in nb.prange(P):
        lo = m * c // P
        hi = m * (c + 1) // P
        _swap_part(
            uT, v, wp, labp, ma, mb, pos, off, a, b, st, pidx, lo, hi, dead,
            queue[lo:hi], orph[lo:hi], xarc[c], xnb[c], xcap[c], res[c],
        )  # fmt: skip
    const = np.int64(0)
    ecur = np.int64(0)
    flow = np.int64(0)
    now = 0
    over = 0
    for c in range(P):
        const += res[c, 0]
        ecur += res[c, 1]
        flow += res[c, 5]
        now = max(now, res[c, 6])
        if res[c, 2]:
            over = 3
        if over == 0:
            over = res[c, 3]
    if over:
        return energy, over, ma, mb
    if P > 1:  # put the held-back arcs in, go on from the trees at their ends
        n = 0
        for c in range(P):
            for t in range(res[c, 4]):
                f = xarc[c, t]
                j = pos[xnb[c, t]]
                st[f] = xcap[c, t]
                st[f + K + 4] = j
                for r in range(2):  # its tail and its head
                    p = f // S if r == 0 else j
                    fl = p * S + FL
                    if (st[fl] & 3) != 0 and (st[fl] & 4) == 0:
                        st[fl] |= 4
                        queue[n] = p
                        n += 1
        f, _, _, _ = _bk(
            st, None, K, queue[:m], n, orph[:m], np.int32(now + 1), 0, m, NO_STOP
        )
        flow += f
    e = energy - ecur + const + flow
    if e >= energy:
        return e, 0, ma, mb
    na = 0
    for i in range(m):
        na += (st[i * S + FL] & 3) == 1  # the source side: x = 0, a
    ma = np.empty(na, dtype=np.int64)
    mb = np.empty(m - na, dtype=np.int64)
    ia = 0
    ib = 0
    for i in range(m):
        pp = pidx[i]
        if (st[i * S + FL] & 3) == 1:
            labp[pp] = a
            ma[ia] = pp
            ia += 1
        else:
            labp[pp] = b
            mb[ib] = pp
            ib += 1
    return e, 0, ma, mb


@nb.njit(cache=True, nogil=True)
def _pad_unary(u, labp, uT):  # pragma: no cover
    """``uT[l, pp] = u[o, l]`` for the o-th real node pp (label < L) of ``labp``."""
    nlabels = u.shape[1]
    o = 0
    for pp in range(labp.shape[0]):
        if labp[pp] < nlabels:
            for lab in range(nlabels):
                uT[lab, pp] = u[o, lab]
            o += 1


#: the fewest compact nodes per range of a move solved side by side
_MIN_PART = 1024


class _CompactSwap:
    """The CPU swap's state in a padded layout (one sentinel node before and after
    every axis: every step of a real node lands in the array): unary costs (L, .),
    labels, weights, compact index; the nodes of every label in raster order; the
    compact graph's buffers, grown to the largest pair seen. A move's compact
    nodes are cut into at most ``parts`` ranges of ``min_part`` nodes or more,
    solved side by side (default: one per worker thread)."""

    def __init__(self, u, v, w, D, lab, *, parts=None, min_part=None) -> None:
        grid = lab.shape
        ndim = len(grid)
        nlabels = u.shape[-1]
        nz, ny, nx = (1,) * (3 - ndim) + grid
        pz = 1 if ndim == 3 else 0
        self.shape = (nz + 2 * pz, ny + 2, nx + 2)
        self.inner = (slice(pz, pz + nz), slice(1, ny + 1), slice(1, nx + 1))
        self.grid = grid
        labp = np.full(self.shape, nlabels, dtype=np.int32)
        labp[self.inner] = lab.reshape(nz, ny, nx)
        self.labp = labp.reshape(-1)
        npad = self.labp.size
        self.uT = np.zeros((nlabels, npad), dtype=np.int64)
        _pad_unary(u.reshape(-1, nlabels), self.labp, self.uT)
        steps = np.zeros((2 * D, 3), dtype=np.int64)
        steps[:, 3 - ndim :] = neighbour_offsets(ndim, 2 * D)
        self.off = steps @ np.array(
            [self.shape[1] * self.shape[2], self.shape[2], 1], dtype=np.int64
        )
        wp = np.zeros((D, *self.shape), dtype=np.int64)
        wp[(slice(None), *self.inner)] = w.reshape(D, nz, ny, nx)
        self.wp = wp.reshape(D, npad)
        real = self.labp < nlabels
        for d in range(D):  # no weight on the arcs that leave the grid (off > 0)
            o = int(self.off[2 * d])
            self.wp[d, : npad - o] *= real[o:]
            self.wp[d, npad - o :] = 0
        vx = np.zeros((nlabels + 1, nlabels + 1), dtype=np.int64)
        vx[:nlabels, :nlabels] = v
        self.v = vx
        self.pos = np.full(npad, -1, dtype=np.int32)
        # the nodes of every label, in raster order
        order = np.argsort(self.labp, kind="stable")
        ends = np.cumsum(np.bincount(self.labp, minlength=nlabels + 1))
        self.members = np.split(order, ends[:nlabels])[:nlabels]
        self.K = 2 * D
        self.n = lab.size
        self.min_part = _MIN_PART if min_part is None else min_part
        # no more ranges than min_part-node ranges fit (the solve's own bound):
        # buffers for any thread count asked for (VISION_CUTS_THREADS) would not
        want = default_threads() if parts is None else parts
        self.parts = max(1, min(want, self.n // self.min_part))
        # arcs from a range into another: forward ones from the nodes at most
        # max(off) padded steps before the range's end, backward ones from those
        # as far after its start
        held = 2 * D * (int(self.off.max()) + 1) if self.parts > 1 else 1
        self.xarc = np.empty((self.parts, held), dtype=np.int64)
        self.xnb = np.empty((self.parts, held), dtype=np.int64)
        self.xcap = np.empty((self.parts, held), dtype=np.int64)
        self.res = np.zeros((self.parts, 8), dtype=np.int64)
        self.cap = -1

    def _grow(self, m: int) -> None:
        cap = min(max(m + m // 4, 64), self.n)
        self.st = np.zeros((cap + 1) * (2 * self.K + 4), dtype=np.int32)  # cap: dead
        self.pidx = np.empty(cap, dtype=np.int64)
        self.queue = np.empty(cap + 1, dtype=np.int32)
        self.orph = np.empty(cap + 1, dtype=np.int32)
        self.cap = cap

    def move(self, a: int, b: int, energy: int) -> int | None:
        """The energy after the best swap of ``a`` and ``b`` (applied when lower);
        None when no node has either label."""
        m = self.members[a].size + self.members[b].size
        if m == 0:
            return None
        if m > self.cap:
            self._grow(m)
        e, over, self.members[a], self.members[b] = _swap_move(
            self.uT, self.v, self.wp, self.labp, self.members[a], self.members[b],
            self.pos, self.off, a, b, energy, self.st, self.pidx, self.queue,
            self.orph, self.min_part, self.xarc, self.xnb, self.xcap, self.res,
        )  # fmt: skip
        if over:
            raise MoveOverflowError(("source", "sink", "edges")[over - 1])
        return int(e)

    def labels(self) -> np.ndarray:
        """The current labels, grid shape."""
        return self.labp.reshape(self.shape)[self.inner].reshape(self.grid).copy()


def _may_change(v: np.ndarray, a: int, b: Any, accepted: list, since: Any) -> bool:
    """Whether the move ``(a, b)`` (``b`` None: the expansion of ``a``) can lower the
    energy, given the moves ``accepted[since:]`` accepted since it last ran (``since``
    None: it never ran). A move's cut is optimal over its moves from the labelling it
    starts from, and it leaves a labelling whose own moves of that kind are a subset
    of them (expansion) or the same (swap), so run again on an unchanged graph it
    finds nothing lower. An expansion's graph holds every node: any accepted move
    changes it. A swap's graph holds the nodes labelled ``a`` or ``b`` and, in their
    terminal costs, the labels of their neighbours as ``V(a, .)`` and ``V(b, .)`` see
    them: a swap of ``c`` and ``d`` (neither ``a`` nor ``b``) leaves it unchanged where
    ``V(a, c) == V(a, d)`` and ``V(b, c) == V(b, d)`` (Potts: always)."""
    if since is None:
        return True
    if b is None:
        return len(accepted) > since
    for c, d in accepted[since:]:
        if c == a or c == b or d == a or d == b:
            return True
        if v[a, c] != v[a, d] or v[b, c] != v[b, d]:
            return True
    return False


def minimize_labels(
    unary: Any,
    pairwise: Any = "potts",
    *,
    weights: Any = None,
    method: str = "expansion",
    connectivity: int = 1,
    init: Any = None,
    max_cycles: int = 10,
    tol: float = 0.0,
    callback: Any = None,
    backend: str = "auto",
    moves_per_cut: int = 1,
) -> LabelResult:
    """Minimise a multi-label grid energy by alpha-expansion or alpha-beta swap.

    Parameters
    ----------
    unary : ndarray, shape (M, N, L) or (P, M, N, L)
        Integer cost of every label at every node. Energies are summed exactly in
        int64: ``n max|unary| + sum(weights) max V`` (``n`` nodes, the weights of
        the grid's pairs) must be below ``2**62``. Each move is cut as an int32
        graph (both backends): a node's capacities add up its unary spread (largest
        minus smallest cost) and its pair terms ``w V``, which must stay below
        ``2**31`` (a ValueError with the values otherwise).
    pairwise : str, tuple or ndarray
        ``V``: ``"potts"``, ``("truncated_linear", cap)``, ``("truncated_quadratic",
        cap)`` or an ``(L, L)`` integer matrix (:func:`pairwise_matrix`). Expansion
        needs a metric, swap a semi-metric (``V(a, b) = V(b, a) > 0 = V(a, a)``);
        truncated quadratic is a semi-metric only.
    weights : ndarray, shape (D, *grid), optional
        Per-edge integer weights ``w_pq`` (>= 0), as in :func:`vision_cuts.grid_energy`;
        default 1.
    method : {"expansion", "swap"}
    connectivity : int
        The neighbourhood, as in :func:`vision_cuts.grid_energy` (4 / 8 in 2-D,
        6 / 18 / 26 in 3-D, or SciPy's rank).
    init : ndarray, optional
        Starting labels (default: the cheapest unary label of each node).
    max_cycles : int
        Most cycles over all labels (expansion) or label pairs (swap); a cycle that
        lowers nothing ends the run.
    tol : float
        Also end the run after a cycle that lowered the energy by at most ``tol``
        times its value at the cycle's start (>= 0; 0: only a cycle that lowers
        nothing).
    callback : callable, optional
        Called as ``callback(done, total)`` after each move (progress), ``total``
        the moves of ``max_cycles`` cycles; ``callback(total, total)`` at the end.
    backend : {"auto", "cpu", "gpu"}
        Where the cuts run (:func:`vision_cuts.maxflow_grid`). On the GPU, expansion
        and swap on a 4-connected 2-D or 6-connected 3-D grid run whole on the device
        (move graphs, cuts, energies; one host read a cycle) where every move's
        capacities fit in int32; other problems build their moves on the host. With
        one move a cut both give the CPU's labels and energies.
    moves_per_cut : int
        The device loop only (elsewhere 1): moves built from one labelling and cut
        together as one stacked grid, then applied one after the other where each
        lowers the energy (as :func:`vision_cuts.stereo_disparity` does on the GPU).
        Expansion groups far-apart labels; swap groups disjoint label pairs (a
        round-robin). Fewer, larger cuts; the result is another local minimum than
        the CPU's (a cycle that lowers nothing still certifies one: its first move
        of each group is exact). 1 (the default): the CPU's moves, one a cut.

    Returns
    -------
    LabelResult
        ``(labels, energy, stats)``; ``energy == label_energy(unary, labels, ...)``;
        ``stats``: ``method``, ``initial_energy``, ``cycles`` (per cycle the energy
        after it, the cuts made, the moves that lowered the energy and the moves
        skipped because no move accepted since they last ran can have changed their
        graph: such a move would find nothing lower), ``device_moves`` (whether the
        device loop ran) and ``moves_per_cut`` (the moves of a cut in that loop, else
        1). The device loop cuts every move (``skipped_moves`` 0); elsewhere the
        loop skips as above and cuts no pair whose labels no node has, so its
        ``cuts`` may be lower for the same labels and energies.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    max_cycles, tol = _check_run(max_cycles, tol, callback, moves_per_cut)
    u, v, w, D = _check(unary, pairwise, weights, connectivity)
    _check_pairwise(v, method)
    lab = _start_labels(init, u)
    stats: dict = {
        "method": method,
        "cycles": [],
        "device_moves": False,
        "moves_per_cut": 1,
    }
    nlabels = u.shape[-1]
    on_gpu = resolve_backend(backend, lab) == "gpu"
    if D == u.ndim - 1 and on_gpu and (method == "expansion" or nlabels > 1):
        from . import _multilabel_gpu

        if _multilabel_gpu.fits(u, v, w):  # the whole loop on the device
            lab, first, energy, cycles, per_cut = _multilabel_gpu.minimize(
                method, u, v, w, lab, max_cycles, tol, callback, int(moves_per_cut)
            )
            stats.update(
                initial_energy=first,
                cycles=cycles,
                device_moves=True,
                moves_per_cut=per_cut,
            )
            return LabelResult(lab.astype(np.int32), int(energy), stats)
    loop = _HostLoop(method, u, v, w, D, lab, backend)
    stats["initial_energy"] = loop.energy
    try:
        loop.run(max_cycles, tol, callback, stats["cycles"])
    except MoveOverflowError as exc:
        raise _overflow_error(exc.name, u, v, w) from None
    return LabelResult(loop.labels().astype(np.int32), int(loop.energy), stats)


def _check_run(
    max_cycles: Any, tol: Any, callback: Any, moves_per_cut: Any = 1
) -> tuple[int, float]:
    """The checks of the arguments that shape a run (of minimize_labels and the
    stereo solvers): ``max_cycles`` as an int, ``tol`` as a float."""
    max_cycles = check_int(max_cycles, "max_cycles", low=1)
    tol = check_number(tol, "tol", low=0)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    check_int(moves_per_cut, "moves_per_cut", low=1)
    return max_cycles, tol


def _start_labels(init: Any, u: np.ndarray) -> np.ndarray:
    """The starting labelling: ``init`` checked, or each node's cheapest label."""
    if init is None:
        return np.argmin(u, axis=-1).astype(np.int64)
    return _check_labels(init, u, "init")


def _check_labels(labels: Any, u: np.ndarray, name: str) -> np.ndarray:
    """``labels`` (the parameter ``name``) as int64: an integer array of the grid
    shape of ``u`` with values in ``[0, L)``."""
    grid, nlabels = u.shape[:-1], u.shape[-1]
    lab = to_numpy(regular_array(labels, name))
    if lab.dtype.kind not in "iu":
        raise TypeError(f"{name} must have an integer dtype, got {lab.dtype}")
    if lab.shape != grid:
        raise ValueError(
            f"{name} must be integer labels of the grid shape {grid}, got shape "
            f"{lab.shape}"
        )
    if lab.size and (int(lab.min()) < 0 or int(lab.max()) >= nlabels):
        bad = first_index((lab < 0) | (lab >= nlabels))
        what = name if name == "labels" else f"{name} labels"
        raise ValueError(
            f"{what} must lie in [0, {nlabels}), got {lab[bad]} at index {bad}"
        )
    return lab.astype(np.int64)


class _HostLoop:
    """minimize_labels' cycles with the moves built on the host (the CPU backend,
    and GPU cuts of host-built moves): the labels, their energy, and what the CPU's
    moves keep from one move to the next."""

    def __init__(self, method, u, v, w, D, lab, backend) -> None:
        self.u, self.v, self.w, self.D = u, v, w, D
        self.lab, self.backend = lab, backend
        self.energy = _energy(u, v, w, D, lab)
        nlabels = u.shape[-1]
        if method == "expansion":
            self.moves = [(a, None) for a in range(nlabels)]
        else:
            self.moves = [(a, b) for a in range(nlabels) for b in range(a + 1, nlabels)]
        on_cpu = resolve_backend(backend, lab) == "cpu"
        # the CPU swap: each move's graph over the nodes labelled a or b only
        self.compact = (
            _CompactSwap(u, v, w, D, lab) if method == "swap" and on_cpu else None
        )
        # the CPU expansion: every node's unary cost at its label, kept up to date,
        # and the column of the label a move proposes, both read in order by the move
        self.ucur = self.uT = None
        self.work: dict = {}
        if method == "expansion" and on_cpu:
            self.ucur = np.take_along_axis(u, lab[..., None], axis=-1).reshape(-1)
            flat = u.reshape(-1, nlabels)
            small = flat.size and max(-int(flat.min()), int(flat.max())) <= INT32_MAX
            dtype = np.int32 if small else np.int64
            self.uT = np.ascontiguousarray(flat.T, dtype=dtype)

    def labels(self) -> np.ndarray:
        return self.compact.labels() if self.compact is not None else self.lab

    def move(self, a: int, b: int | None) -> tuple[bool, bool]:
        """Expansion of ``a`` (``b`` None) or the swap of ``a`` and ``b``, taken if
        it lowers the energy: (a cut was made, the move was taken)."""
        if self.compact is not None:
            e = self.compact.move(a, b, self.energy)
            if e is None:
                return False, False
            taken = e < self.energy
            self.energy = min(self.energy, e)
            return True, taken
        lab, costs = self.lab, None
        if not lab.size:  # an empty grid: no node can move, so no cut is made
            return False, False
        if b is None:
            zero, one = lab, np.full_like(lab, a)
            if self.ucur is not None:
                costs = (self.ucur, self.uT[a])
        else:
            inside = (lab == a) | (lab == b)
            if not inside.any():
                return False, False
            zero, one = np.where(inside, a, lab), np.where(inside, b, lab)
        u, v, w, D = self.u, self.v, self.w, self.D
        proposal, e = _move(
            u, v, w, D, zero, one, 2 * D, self.backend, b is None, costs, self.work
        )
        if e >= self.energy:
            return True, False
        if costs is not None:  # the moved nodes now pay alpha's cost
            self.ucur = np.where(proposal.reshape(-1) == a, costs[1], self.ucur)
        self.lab, self.energy = proposal, e
        return True, True

    def run(self, max_cycles: int, tol: float, callback: Any, cycles: list) -> None:
        """Up to ``max_cycles`` cycles of every move (those no accepted move can have
        changed since they last ran are skipped, :func:`_may_change`); a cycle's
        stats are appended to ``cycles``."""
        moves = self.moves
        total = max_cycles * len(moves)
        accepted: list = []  # the moves that lowered the energy, in order
        tried: dict = {}  # move -> len(accepted) when it last ran
        for cycle in range(max_cycles):
            start, cuts, better, skipped = self.energy, 0, 0, 0
            for i, (a, b) in enumerate(moves):
                if callback is not None and (cycle or i):
                    callback(cycle * len(moves) + i, total)
                if not _may_change(self.v, a, b, accepted, tried.get((a, b))):
                    skipped += 1
                    continue
                cut, taken = self.move(a, b)
                cuts += cut
                if taken:
                    better += 1
                    accepted.append((a, b))
                tried[a, b] = len(accepted)  # its own change left out
            cycles.append(
                {
                    "energy": self.energy,
                    "cuts": cuts,
                    "improving_moves": better,
                    "skipped_moves": skipped,
                }
            )
            energy = self.energy
            if energy >= start or (tol > 0 and start - energy <= tol * abs(start)):
                break
        if callback is not None:
            callback(total, total)
