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

from typing import Any, NamedTuple

import numba as nb
import numpy as np

from ._backend import resolve_backend, to_numpy
from ._validate import INT32_MAX
from .exceptions import NonSubmodularError
from .grid import GridEnergy, _arc_views, connectivity_planes, neighbour_offsets
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
    integer matrix as it is."""
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
        if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1:
            raise ValueError(
                f"the cap of {name!r} must be an integer >= 1, got {cap!r}"
            )
        if name == "truncated_linear":
            return np.minimum(diff, int(cap)).astype(np.int64)
        if name == "truncated_quadratic":
            return np.minimum(diff * diff, int(cap)).astype(np.int64)
        raise ValueError(
            f"pairwise model must be 'truncated_linear' or 'truncated_quadratic', "
            f"got {name!r}"
        )
    v = np.asarray(model)
    if v.dtype.kind not in "iu":
        raise TypeError(f"a pairwise matrix must have an integer dtype, got {v.dtype}")
    if v.shape != (labels, labels):
        raise ValueError(
            f"a pairwise matrix must have shape (L, L) = {(labels, labels)}, got "
            f"{v.shape}"
        )
    return v.astype(np.int64)


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
    u = to_numpy(unary)
    if u.dtype.kind not in "iu":
        raise TypeError(f"unary must have an integer dtype, got {u.dtype}")
    if u.ndim not in (3, 4) or u.shape[-1] < 2:
        raise ValueError(
            f"unary must have shape (M, N, L) or (P, M, N, L) with L >= 2 labels, got "
            f"{u.shape}"
        )
    u = u.astype(np.int64)
    grid, nlabels = u.shape[:-1], u.shape[-1]
    v = pairwise_matrix(pairwise, nlabels)
    D = _steps(len(grid), connectivity)
    if weights is None:
        w = np.ones((D, *grid), dtype=np.int64)
    else:
        w = to_numpy(weights)
        if w.dtype.kind not in "iu":
            raise TypeError(f"weights must have an integer dtype, got {w.dtype}")
        if w.shape != (D, *grid):
            raise ValueError(
                f"weights must have shape (D, *grid) = {(D, *grid)}, got {w.shape}"
            )
        if w.size and int(w.min()) < 0:
            raise ValueError("weights must be >= 0")
        w = w.astype(np.int64)
    return u, v, w, D


def label_energy(
    unary: Any,
    labels: Any,
    pairwise: Any = "potts",
    *,
    weights: Any = None,
    connectivity: int = 1,
) -> int:
    """The exact energy ``E(labels)`` of :func:`minimize_labels`'s model, a Python
    int."""
    u, v, w, D = _check(unary, pairwise, weights, connectivity)
    lab = np.asarray(to_numpy(labels)).astype(np.int64)
    if lab.shape != u.shape[:-1]:
        raise ValueError(
            f"labels must have the grid shape {u.shape[:-1]}, got {lab.shape}"
        )
    return _energy(u, v, w, D, lab)


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


def _move(u, v, w, D, zero, one, planes, backend, keep=False) -> tuple:
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
        return _move_cut(u, v, w, D, one, zero, planes, backend)
    return _move_cut(u, v, w, D, zero, one, planes, backend)


def _move_cut(u, v, w, D, zero, one, planes, backend) -> tuple:
    """``_move``'s cut: the sink side (x = 1) takes ``one``."""
    grid = zero.shape
    n = zero.size
    dims = np.array((1,) * (3 - len(grid)) + grid, dtype=np.int64)
    steps = np.zeros((D, 3), dtype=np.int64)
    steps[:, 3 - len(grid) :] = neighbour_offsets(len(grid), planes)[::2]
    src, snk = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    src32, snk32 = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32)
    edges = np.zeros((planes, n), dtype=np.int32)
    const, bad, over = _move_graph(
        u.reshape(n, -1), v, w.reshape(D, n), zero.reshape(-1), one.reshape(-1),
        dims, steps, src, snk, edges, src32, snk32,
    )  # fmt: skip
    if bad >= 0:  # cannot happen for a checked (semi-)metric; a guard, not a path
        d, p = divmod(int(bad), n)
        raise NonSubmodularError(
            f"a move is not submodular at direction {d}, node "
            f"{np.unravel_index(p, grid)}",
            count=1,
            first=(d, *np.unravel_index(p, grid)),
        )
    if over:
        name = ("source", "sink", "edges")[over - 1]
        raise ValueError(
            f"the {name} capacities of a move exceed int32 ({INT32_MAX}): reduce the "
            "costs or the weights"
        )
    energy = GridEnergy._trusted(
        src32.reshape(grid), snk32.reshape(grid), edges.reshape(planes, *grid),
        int(const),
    )  # fmt: skip
    cut = maxflow_grid(energy, backend=backend)
    take = to_numpy(cut.labels).astype(bool)
    return np.where(take, one, zero), energy.constant + cut.flow


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
) -> LabelResult:
    """Minimise a multi-label grid energy by alpha-expansion or alpha-beta swap.

    Parameters
    ----------
    unary : ndarray, shape (M, N, L) or (P, M, N, L)
        Integer cost of every label at every node.
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
        Where the cuts run (:func:`vision_cuts.maxflow_grid`).

    Returns
    -------
    LabelResult
        ``(labels, energy, stats)``; ``energy == label_energy(unary, labels, ...)``.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if (
        isinstance(max_cycles, bool)
        or not isinstance(max_cycles, int)
        or max_cycles < 1
    ):
        raise ValueError(f"max_cycles must be an integer >= 1, got {max_cycles!r}")
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol >= 0:
        raise ValueError(f"tol must be a number >= 0, got {tol!r}")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    u, v, w, D = _check(unary, pairwise, weights, connectivity)
    _check_pairwise(v, method)
    nlabels = u.shape[-1]
    planes = 2 * D
    if init is None:
        lab = np.argmin(u, axis=-1).astype(np.int64)
    else:
        lab = np.asarray(to_numpy(init))
        if lab.shape != u.shape[:-1] or lab.dtype.kind not in "iu":
            raise ValueError(
                f"init must be integer labels of the grid shape {u.shape[:-1]}, got "
                f"{lab.dtype} {lab.shape}"
            )
        if lab.size and (int(lab.min()) < 0 or int(lab.max()) >= nlabels):
            raise ValueError(
                f"init labels must lie in [0, {nlabels}), got {int(lab.min())}.."
                f"{int(lab.max())}"
            )
        lab = lab.astype(np.int64)
    energy = _energy(u, v, w, D, lab)
    stats: dict = {"method": method, "initial_energy": energy, "cycles": []}
    cycles = stats["cycles"]
    if method == "expansion":
        moves = [(a, None) for a in range(nlabels)]
    else:
        moves = [(a, b) for a in range(nlabels) for b in range(a + 1, nlabels)]
    total = max_cycles * len(moves)
    for cycle in range(max_cycles):
        start, cuts, better = energy, 0, 0
        for i, (a, b) in enumerate(moves):
            if callback is not None and (cycle or i):
                callback(cycle * len(moves) + i, total)
            if b is None:
                zero, one = lab, np.full_like(lab, a)
            else:
                inside = (lab == a) | (lab == b)
                if not inside.any():
                    continue
                zero, one = np.where(inside, a, lab), np.where(inside, b, lab)
            proposal, e = _move(u, v, w, D, zero, one, planes, backend, b is None)
            cuts += 1
            if e < energy:
                lab, energy, better = proposal, e, better + 1
        cycles.append({"energy": energy, "cuts": cuts, "improving_moves": better})
        if energy >= start or (tol > 0 and start - energy <= tol * abs(start)):
            break
    if callback is not None:
        callback(total, total)
    return LabelResult(lab.astype(np.int32), int(energy), stats)
