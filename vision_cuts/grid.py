"""Binary energies on 2-D and 3-D grids, as dense arrays.

A grid problem is never a Python-level graph object: it is a ``source`` and a ``sink``
capacity per node and ``K`` planes of directed arc capacities, two per neighbour
direction (the arc to the forward neighbour, then the arc to the backward one):

* ``edges[0]`` / ``edges[1]``: arc from a node to its ``+x`` / ``-x`` neighbour (x is
  the last array axis, columns),
* ``edges[2]`` / ``edges[3]``: ``+y`` / ``-y`` (rows),
* 2-D, 8-connected (``K = 8``): ``edges[4]`` / ``edges[5]``: ``+x+y`` / ``-x-y``,
  ``edges[6]`` / ``edges[7]``: ``-x+y`` / ``+x-y``;
* 3-D (``K = 6``): ``edges[4]`` / ``edges[5]``: ``+z`` / ``-z`` (slices); 18-connected
  (``K = 18``) adds the face diagonals ``+x+y``, ``-x+y``, ``+x+z``, ``-x+z``, ``+y+z``,
  ``-y+z`` (planes 6-17, each forward then backward), 26-connected (``K = 26``) the
  corner diagonals ``+x+y+z``, ``-x+y+z``, ``+x-y+z``, ``-x-y+z`` (planes 18-25).

:func:`neighbour_offsets` gives the step of every plane. Arcs that would leave the grid
do not exist; their entries are ignored (set to zero), though still checked as values
(a negative capacity or weight there is an error, as anywhere).
Cut convention: ``labels[p] == 1`` means p is on the sink side (``x_p = 1``), as in
PyMaxflow and Kolmogorov & Zabih; cutting ``source[p]`` is the cost of ``x_p = 1`` and
cutting ``sink[p]`` the cost of ``x_p = 0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._backend import is_cupy_array
from ._validate import (
    INT32_MAX,
    _scaled,
    as_capacity,
    check_finite,
    check_grid_shape,
    check_int,
    check_scale,
    exact_sum,
    first_index,
    object_note,
    regular_array,
)
from .exceptions import NonSubmodularError

__all__ = ["GridEnergy", "grid_energy", "grid_graph", "neighbour_offsets"]


def _xp(a: Any):
    if is_cupy_array(a):
        import cupy

        return cupy
    return np


# forward steps (dz, dy, dx) of the neighbour directions, in plane order; a smaller
# neighbourhood is a prefix of the larger one of its dimension
_FORWARD = {
    2: [(0, 0, 1), (0, 1, 0), (0, 1, 1), (0, 1, -1)],
    3: [
        (0, 0, 1), (0, 1, 0), (1, 0, 0),
        (0, 1, 1), (0, 1, -1), (1, 0, 1), (1, 0, -1), (1, 1, 0), (1, -1, 0),
        (1, 1, 1), (1, 1, -1), (1, -1, 1), (1, -1, -1),
    ],
}  # fmt: skip
#: planes of each neighbourhood: 2-D 4 / 8, 3-D 6 / 18 / 26
PLANES = {2: (4, 8), 3: (6, 18, 26)}


def connectivity_planes(connectivity: Any, ndim: int) -> int:
    """The number of planes ``K`` of a neighbourhood given as its number of neighbours
    (2-D: 4 or 8; 3-D: 6, 18 or 26) or as SciPy's connectivity rank (1 = faces, 2 =
    edges too, 3 = corners too: 1 and 2 in 2-D, 1-3 in 3-D)."""
    allowed = PLANES[ndim]
    if isinstance(connectivity, (int, np.integer)) and not isinstance(
        connectivity, bool
    ):
        c = int(connectivity)
        if c in allowed:
            return c
        if 1 <= c <= ndim:
            return allowed[c - 1]
    raise ValueError(
        f"connectivity must be one of {allowed} (neighbours) or a rank 1-{ndim} for a "
        f"{ndim}-D grid, got {connectivity!r}"
    )


def neighbour_offsets(ndim: int, planes: int) -> np.ndarray:
    """``(K, ndim)`` int array: the step, in array-axis order, from a node to the head
    of its arc in each plane of a ``planes``-plane neighbourhood (see the module
    docstring). Plane ``2 d + 1`` is the reverse of plane ``2 d``."""
    ndim = check_int(ndim, "ndim")
    planes = check_int(planes, "planes")
    if ndim not in PLANES:
        raise ValueError(f"ndim must be 2 or 3, got {ndim}")
    if planes not in PLANES[ndim]:
        raise ValueError(
            f"planes must be one of {PLANES[ndim]} for a {ndim}-D grid, got {planes}"
        )
    out = np.zeros((planes, ndim), dtype=np.int64)
    for d in range(planes // 2):
        v = np.array(_FORWARD[ndim][d][3 - ndim :], dtype=np.int64)
        out[2 * d], out[2 * d + 1] = v, -v
    return out


def _step(ndim: int, k: int) -> tuple:
    """Step of plane ``k`` in array-axis order."""
    v = _FORWARD[ndim][k // 2][3 - ndim :]
    return tuple(v) if k % 2 == 0 else tuple(-c for c in v)


def _arc_views(ndim: int, k: int) -> tuple[tuple, tuple]:
    """Index tuples (tail, head) selecting every existing arc of plane ``k``."""
    tail, head = [], []
    for o in _step(ndim, k):
        if o > 0:
            tail.append(slice(None, -o))
            head.append(slice(o, None))
        elif o < 0:
            tail.append(slice(-o, None))
            head.append(slice(None, o))
        else:
            tail.append(slice(None))
            head.append(slice(None))
    return tuple(tail), tuple(head)


def _node_of(index: tuple, view: tuple) -> tuple:
    """The grid index of position ``index`` of the view ``view`` (of _arc_views)."""
    return tuple(int(i) + (sl.start or 0) for i, sl in zip(index, view, strict=True))


def _border_slices(ndim: int, k: int) -> list:
    """Index tuples whose union is plane ``k``'s entries whose arc would leave the
    grid (one slab per axis the step moves along)."""
    out = []
    for axis, o in enumerate(_step(ndim, k)):
        if o:
            s = [slice(None)] * ndim
            s[axis] = slice(-o, None) if o > 0 else slice(None, -o)
            out.append(tuple(s))
    return out


@dataclass(frozen=True, eq=False)
class GridEnergy:
    """A binary grid energy as dense capacity arrays.

    ``E(x) = constant + sum_p source[p] x_p + sum_p sink[p] (1 - x_p)
    + sum_k sum_p edges[k, p] (1 - x_p) x_{p + e_k}``

    Build one with :func:`grid_energy` (from unary and pairwise terms) or
    :func:`grid_graph` (from capacities); solve it with :func:`maxflow_grid`.

    Attributes
    ----------
    source, sink : ndarray, shape (M, N) or (P, M, N), int32
        Terminal capacities.
    edges : ndarray, shape (K, M, N) or (K, P, M, N), int32
        Directed arc capacities, ``K`` planes (2-D: 4 or 8, 3-D: 6, 18 or 26) in the
        order of the module docstring (+x, -x, +y, -y, ...); zero where an arc would
        leave the grid.
    constant : int
        Energy offset; ``min E = constant + max-flow``.
    """

    source: Any
    sink: Any
    edges: Any
    constant: int = 0

    def __post_init__(self) -> None:
        # A GridEnergy made by hand is validated like grid_graph's input (the
        # builders of this module construct theirs through _trusted instead).
        source, sink, edges = _check_capacities(
            self.source, self.sink, self.edges, None
        )
        if not isinstance(self.constant, (int, np.integer)) or isinstance(
            self.constant, bool
        ):
            raise TypeError(
                f"constant must be an integer, got {type(self.constant).__name__}"
            )
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "sink", sink)
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "constant", int(self.constant))

    @classmethod
    def _trusted(cls, source: Any, sink: Any, edges: Any, constant: int) -> GridEnergy:
        """Wrap arrays that are already validated int32 capacities (no checks)."""
        self = object.__new__(cls)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "sink", sink)
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "constant", int(constant))
        return self

    @property
    def shape(self) -> tuple:
        """Grid shape (M, N) or (P, M, N)."""
        return tuple(self.source.shape)

    @property
    def ndim(self) -> int:
        """2 or 3."""
        return self.source.ndim

    def energy(self, labels: Any) -> int:
        """Exact energy ``E(x)`` of a labelling (1 = sink side), as a Python int.

        Parameters
        ----------
        labels : array_like of {0, 1}, shape ``self.shape``
            Binary labelling, bool or integer.
        """
        xp = _xp(self.source)
        x = regular_array(labels, "labels")
        if is_cupy_array(x) and xp is np:
            x = x.get()
        x = xp.asarray(x)
        if tuple(x.shape) != self.shape:
            raise ValueError(
                f"labels must have the grid shape {self.shape}, got {tuple(x.shape)}"
            )
        if x.dtype.kind not in "biu":
            raise TypeError(f"labels must be bool or integer, got dtype {x.dtype}")
        if x.size and bool(((x != 0) & (x != 1)).any()):
            bad = first_index((x != 0) & (x != 1))
            raise ValueError(f"labels must be 0 or 1, got {x[bad]} at index {bad}")
        one = x.astype(bool)
        zero = ~one
        s64, t64 = self.source.astype(np.int64), self.sink.astype(np.int64)
        total = int(self.constant) + int(s64[one].sum()) + int(t64[zero].sum())
        for k in range(self.edges.shape[0]):
            tail, head = _arc_views(self.ndim, k)
            cut = zero[tail] & one[head]
            total += int(self.edges[k][tail].astype(np.int64)[cut].sum())
        return total


def grid_graph(
    source: Any, sink: Any, edges: Any, *, scale: float | None = None
) -> GridEnergy:
    """Wrap user-built capacity arrays as a :class:`GridEnergy` (constant 0).

    Parameters
    ----------
    source, sink : ndarray, shape (M, N) or (P, M, N)
        Terminal capacities, non-negative integers (int32 preferred).
    edges : ndarray, shape (K, M, N) or (K, P, M, N)
        Directed arc capacities, ``K = 4`` (2-D: +x, -x, +y, -y) or ``K = 6`` (3-D, then
        +z, -z), x being the last axis; ``K = 8`` (2-D) and ``K = 18`` or ``26`` (3-D)
        add the diagonal planes of the module docstring. Forward and backward
        capacities may differ. Entries of arcs that would leave the grid are ignored
        (but checked: they must be valid capacities too).
    scale : float, optional
        Quantise floating-point capacities to ``round(value * scale)``; without it,
        floating inputs are a TypeError. Integer capacities are multiplied by it too
        (and rounded the same way where it is not a whole number), as in
        :func:`grid_energy`. A negative value is an error before any rounding.

    Returns
    -------
    GridEnergy

    Raises
    ------
    TypeError
        Non-array or non-integer input (floats without ``scale``).
    ValueError
        Mismatched shapes, negative / NaN / infinite capacities, values beyond int32, or
        an arc pair whose forward + backward capacity exceeds ``2**31 - 1``.

    Notes
    -----
    Like :func:`numpy.asarray`, this does not copy arrays that are already int32 and
    C-contiguous: the energy then holds the caller's arrays, checked once here.
    Writing to them afterwards changes the energy unchecked (a negative capacity
    then gives a wrong flow); build a new energy from the changed arrays instead.
    """
    return GridEnergy._trusted(*_check_capacities(source, sink, edges, scale), 0)


def _check_capacity_shapes(source: Any, sink: Any, edges: Any) -> int:
    """The shapes and array kinds of capacity arrays agree; returns K (the planes)."""
    check_grid_shape(tuple(source.shape), "source")
    if tuple(sink.shape) != tuple(source.shape):
        raise ValueError(
            f"sink must have the shape of source {tuple(source.shape)}, got "
            f"{tuple(sink.shape)}"
        )
    ndim = source.ndim
    K = edges.shape[0] if edges.ndim == ndim + 1 else None
    if K not in PLANES[ndim] or tuple(edges.shape[1:]) != tuple(source.shape):
        raise ValueError(
            f"edges must have shape (K, *grid) with K in {PLANES[ndim]} (the "
            f"neighbourhoods of a {ndim}-D grid) and grid {tuple(source.shape)}, got "
            f"{tuple(edges.shape)}"
        )
    if len({is_cupy_array(a) for a in (source, sink, edges)}) > 1:
        raise TypeError(
            "source, sink and edges must all be NumPy or all be CuPy arrays"
        )
    return int(K)


def _check_capacities(
    source: Any, sink: Any, edges: Any, scale: float | None
) -> tuple[Any, Any, Any]:
    """Validate capacity arrays; return int32 copies/views with border arcs zero."""
    source = as_capacity(source, "source", scale=scale)
    sink = as_capacity(sink, "sink", scale=scale)
    edges = as_capacity(edges, "edges", scale=scale)
    K = _check_capacity_shapes(source, sink, edges)
    ndim = source.ndim
    border = [_border_slices(ndim, k) for k in range(K)]
    if any(edges[k][b].any() for k in range(K) for b in border[k]):
        edges = edges.copy()
        for k in range(K):
            for b in border[k]:
                edges[k][b] = 0
    for d in range(K // 2):
        tail, head = _arc_views(ndim, 2 * d)
        pair = edges[2 * d][tail].astype(np.int64) + edges[2 * d + 1][head]
        over = pair > INT32_MAX
        if over.size and bool(over.any()):
            bad = first_index(over)
            raise ValueError(
                f"edges: forward + backward capacity of an arc pair must be <= "
                f"{INT32_MAX}, got {int(pair[bad])} between planes {2 * d} and "
                f"{2 * d + 1} at index {_node_of(bad, tail)}"
            )
    return source, sink, edges


#: the costs (and pairwise x weights) the construction takes lie strictly within
#: +-COST_MAX, so that its int64 sums of a few such terms cannot wrap
COST_MAX = 2**62


def _as_cost(a: Any, name: str, scale: float | None, xp) -> tuple[Any, int]:
    """``a`` as int64 costs, quantised by ``scale``, and the largest magnitude among
    them (0 for an empty array); values beyond +-COST_MAX (after scaling) are a
    ValueError naming ``name`` rather than a wrapped int64."""
    scale = check_scale(scale)
    given = a
    a = xp.asarray(regular_array(a, name))
    if a.dtype.kind == "f" or (a.dtype.kind in "iu" and scale not in (None, 1)):
        if a.dtype.kind == "f" and scale is None:
            raise TypeError(
                f"{name} has floating dtype {a.dtype}; energies are integers. Pass "
                "scale=<factor> to quantise (round(value * scale))"
            )
        check_finite(a, name)
        a = _scaled(a, scale, name, xp)
    elif a.dtype.kind not in "iu":
        raise TypeError(
            f"{name} must have an integer dtype, got {a.dtype}"
            f"{object_note(a, type(given).__name__)}"
        )
    bound = 0
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        bound = max(-lo, hi)
        if hi >= COST_MAX or lo <= -COST_MAX:
            over = (a >= COST_MAX) | (a <= -COST_MAX)
            bad = first_index(over)
            value, remedy = int(a[bad]), f"reduce {name}"
            if scale not in (None, 1):
                value, remedy = f"{value} after scaling", f"{remedy} or the scale"
            raise ValueError(
                f"{name} must lie strictly between -2**62 and 2**62 ({COST_MAX}), got "
                f"{value} at index {bad}: {remedy}"
            )
    return a.astype(np.int64, copy=False), bound


def grid_energy(
    unary: Any,
    pairwise: Any = None,
    *,
    weights: Any = None,
    connectivity: int = 1,
    scale: float | None = None,
) -> GridEnergy:
    r"""Build the capacity arrays of a binary submodular grid energy.

    ``E(x) = sum_p unary[p, x_p] + sum_{(p, q)} w_pq * V_pq(x_p, x_q)`` over the
    neighbour pairs ``q = p + e_d`` of the chosen neighbourhood (``D`` directions
    ``e_d``, the forward steps of the module docstring's planes ``2 d``: ``D = 2`` or
    4 in 2-D, 3, 9 or 13 in 3-D).

    Parameters
    ----------
    unary : ndarray, shape (M, N, 2) or (P, M, N, 2)
        Cost of label 0 and label 1 at every node (labels last, as in PyMaxflow).
        Integers; negative values are allowed.
    pairwise : ndarray, optional
        ``V_pq = [[A, B], [C, D]]`` (``A = V(0, 0)``, ``B = V(0, 1)``, ...): either one
        ``(2, 2)`` matrix for every edge, or ``(D, *grid, 2, 2)`` per edge and
        direction. Omitted: the symmetric weight form ``V = [[0, 1], [1, 0]]`` (cost
        ``w_pq`` when the labels differ).
    weights : ndarray, shape (D, *grid), optional
        Per-edge multiplier ``w_pq``; ``weights[d, p]`` couples p with its forward
        neighbour in direction ``d`` (0 = +x, last axis; 1 = +y; 2 = +z in 3-D, then
        the diagonals in the module docstring's order). Entries whose neighbour lies
        outside the grid are ignored: from integer arrays without ``pairwise`` and
        ``scale`` (the one-pass path) not read at all, else checked only against the
        ``2**62`` bound, and floating ones, which ``scale`` multiplies with the rest,
        for being finite too (``minimize_labels`` checks every entry). Default 1.
    connectivity : int
        The neighbourhood: its number of neighbours (2-D: 4 or 8; 3-D: 6, 18 or 26) or
        SciPy's rank (1: faces, the default; 2: and edges; 3: and corners). Diagonal
        pairs get the weights given for them: a length-based weighting (for example
        ``1 / sqrt(2)`` on 2-D diagonals) is the caller's choice.
    scale : float, optional
        Quantise floating costs to ``round(value * scale)``; floats need it. Integer
        costs are multiplied by it too. With ``pairwise``, floating ``weights`` are
        folded into the per-edge matrices first: each ``round(w_pq * V * scale)``.

    Returns
    -------
    GridEnergy
        With ``energy(x)`` equal to E(x) above for every labelling.

    Raises
    ------
    NonSubmodularError
        Some edge has ``w (B + C - A - D) < 0``; the error gives the count and the
        first one.
    ValueError, TypeError
        Bad shapes or dtypes, capacities beyond int32 after the construction, or costs
        the construction's int64 arithmetic could not hold exactly (beyond ``+-2**62``
        after scaling; with ``pairwise``, ``|unary| + 8 D |pairwise| |weights|`` from
        ``2**62`` on). The constant itself is exact, a Python integer of any size.

    Notes
    -----
    The Kolmogorov-Zabih construction: ``V(x_p, x_q) = A + (C - A) x_p + (D - C) x_q
    + (B + C - A - D)(1 - x_p) x_q``; the linear parts go to the terminal arcs, the last
    term to the arc p -> q. Terminal capacities are normalised so that
    ``min(source, sink) = 0``; the offset goes to ``constant``.

    References
    ----------
    V. Kolmogorov and R. Zabih, "What energy functions can be minimized via graph
    cuts?", IEEE TPAMI 26(2), 2004.
    """
    if not (is_cupy_array(unary) or isinstance(unary, (np.ndarray, list, tuple))):
        raise TypeError(f"unary must be an array, got {type(unary).__name__}")
    xp = _xp(unary)
    if pairwise is None and weights is not None and scale is None:
        # the symmetric weight form from integer arrays: one pass (numba on the
        # host, a kernel on the device) instead of the array expression below
        # (converted once: the array expression below takes the same arrays)
        u_in = xp.asarray(regular_array(unary, "unary"))
        w_in = xp.asarray(regular_array(weights, "weights"))
        if _one_pass_dtype(u_in, xp) and _one_pass_dtype(w_in, xp):
            return _potts_energy_one_pass(u_in, w_in, connectivity, xp)
    u, umax = _as_cost(unary, "unary", scale, xp)
    grid, D = _grid_and_directions(u, connectivity)
    ndim = len(grid)
    if pairwise is None:
        if weights is None:
            raise ValueError("give pairwise and/or weights: neither was given")
        w, _ = _as_cost(weights, "weights", scale, xp)
        _check_weights_shape(w, grid, D)
        return _potts_energy(u, w, xp)
    # whether rounding made the terms: a submodular float term may round below 0
    rounded = scale is not None and (_is_float(pairwise) or _is_float(weights))
    (pw, pmax), (w, wmax) = _pairwise_terms(pairwise, weights, scale, grid, D, xp)
    # every int64 value below is a sum of a few of these: bound them so that none wraps
    if umax + 8 * D * pmax * wmax >= 2**62:
        raise ValueError(
            f"unary, pairwise and weights are too large for exact int64 arithmetic: "
            f"|unary| up to {umax}, |pairwise| up to {pmax}, |weights| up to {wmax}; "
            f"|unary| + {8 * D} |pairwise| |weights| must stay below 2**62: reduce the "
            "costs (or the scale)"
        )
    s = u[..., 1].copy()
    t = u[..., 0].copy()
    edges = xp.zeros((2 * D, *grid), dtype=np.int64)
    constant = 0
    nbad, first = 0, None
    for d in range(D):
        tail, head = _arc_views(ndim, 2 * d)
        if pw.ndim == 2:
            a, b, c, dd = (pw[0, 0], pw[0, 1], pw[1, 0], pw[1, 1])
        else:
            a, b, c, dd = (
                pw[d][tail + (0, 0)],
                pw[d][tail + (0, 1)],
                pw[d][tail + (1, 0)],
                pw[d][tail + (1, 1)],
            )
        shape = edges[0][tail].shape
        a, b, c, dd = (xp.broadcast_to(xp.asarray(v), shape) for v in (a, b, c, dd))
        if w is not None:
            wd = w[d][tail]
            a, b, c, dd = a * wd, b * wd, c * wd, dd * wd
        lam = b + c - a - dd
        bad = lam < 0
        if bad.size and bool(bad.any()):
            nbad += int(bad.sum())
            if first is None:  # the node, not the position in the arc view
                first = (d, *_node_of(first_index(bad), tail))
        constant += exact_sum(a)
        ca = c - a
        s[tail] += xp.maximum(ca, 0)
        t[tail] += xp.maximum(-ca, 0)
        constant += exact_sum(xp.minimum(ca, 0))
        dc = dd - c
        s[head] += xp.maximum(dc, 0)
        t[head] += xp.maximum(-dc, 0)
        constant += exact_sum(xp.minimum(dc, 0))
        edges[2 * d][tail] = lam
    if nbad:
        note = (
            f" after rounding with scale={scale!r} (each term is rounded on its own: "
            "a small positive B + C - A - D may round below 0; a larger scale keeps "
            "its sign)"
            if rounded
            else ""
        )
        raise NonSubmodularError(
            f"the energy is not submodular: {nbad} edge(s) have w*(B + C - A - D) < 0"
            f"{note}; the first is direction {first[0]} at node {first[1:]}",
            count=nbad,
            first=first,
        )
    m = xp.minimum(s, t)
    s -= m
    t -= m
    constant += exact_sum(m)
    for name, arr in (("source", s), ("sink", t), ("edges", edges)):
        if arr.size and bool((arr > INT32_MAX).any()):
            bad = first_index(arr > INT32_MAX)
            raise ValueError(
                f"the {name} capacities of this energy exceed int32 ({INT32_MAX}); got "
                f"{int(arr[bad])} at index {bad}: reduce the costs (or the scale)"
            )
    return GridEnergy._trusted(
        s.astype(np.int32), t.astype(np.int32), edges.astype(np.int32), constant
    )


def _is_float(a: Any) -> bool:
    """Whether ``a`` (an array, a nested list or None) holds floats; read from its
    dtype, without a copy of an array to the other backend."""
    if isinstance(a, (list, tuple)):
        try:
            a = np.asarray(a)
        except (ValueError, TypeError):  # a ragged list: the checks that follow
            return False  # name it
    return getattr(getattr(a, "dtype", None), "kind", "") == "f"


def _pairwise_terms(
    pairwise: Any, weights: Any, scale: Any, grid: tuple, D: int, xp
) -> tuple[tuple[Any, int], tuple[Any, int]]:
    """``pairwise`` and ``weights`` as int64 costs, each with its largest magnitude:
    ((pw, pmax), (w, wmax)), where w is None (wmax 1) without weights. Floating weights
    are folded into per-edge matrices ``w * V`` first, then quantised with ``scale``
    like the rest (the terms ``w (B + C - A - D)`` and the others are rounded once,
    not ``w`` and ``V`` apart)."""
    w, wmax = None, 1
    if weights is not None:
        wa = xp.asarray(regular_array(weights, "weights"))
        if wa.dtype.kind == "f" and scale is not None:
            _check_weights_shape(wa, grid, D)
            pf = xp.asarray(regular_array(pairwise, "pairwise"))
            if pf.dtype.kind not in "iuf":
                raise TypeError(f"pairwise must have a numeric dtype, got {pf.dtype}")
            if tuple(pf.shape) not in ((2, 2), (D, *grid, 2, 2)):
                raise ValueError(
                    f"pairwise must have shape (2, 2) or (D, *grid, 2, 2) = "
                    f"{(D, *grid, 2, 2)}, got {tuple(pf.shape)}"
                )
            check_finite(wa, "weights")
            pairwise = wa.astype(np.float64)[..., None, None] * pf.astype(np.float64)
            name = "pairwise x weights"
        else:
            w, wmax = _as_cost(weights, "weights", None, xp)
            wmax = wmax if w.size else 1
            _check_weights_shape(w, grid, D)
            name = "pairwise"
    else:
        name = "pairwise"
    pw, pmax = _as_cost(pairwise, name, scale, xp)
    if tuple(pw.shape) not in ((2, 2), (D, *grid, 2, 2)):
        raise ValueError(
            f"pairwise must have shape (2, 2) or (D, *grid, 2, 2) = "
            f"{(D, *grid, 2, 2)}, got {tuple(pw.shape)}"
        )
    return (pw, pmax), (w, wmax)


def _grid_and_directions(u: Any, connectivity: Any) -> tuple[tuple, int]:
    """The grid shape of unary costs ``u`` and the neighbourhood's directions ``D``."""
    if u.ndim not in (3, 4) or u.shape[-1] != 2:
        raise ValueError(
            f"unary must have shape (M, N, 2) or (P, M, N, 2), got {tuple(u.shape)}"
        )
    grid = tuple(u.shape[:-1])
    return grid, connectivity_planes(connectivity, len(grid)) // 2


def _check_weights_shape(w: Any, grid: tuple, D: int) -> None:
    if tuple(w.shape) != (D, *grid):
        raise ValueError(
            f"weights must have shape (D, *grid) = {(D, *grid)} (D = {D} "
            f"directions of this neighbourhood), got {tuple(w.shape)}"
        )


def _one_pass_dtype(a: Any, xp) -> bool:
    """Whether the one-pass path reads ``a`` as it is: on the host integers that
    int64 holds, in the machine's byte order, on the device int32 and int64 (anything
    else takes the array expression, its casts and its errors)."""
    if xp is np:  # (numba takes no byte order but the machine's)
        return a.dtype.isnative and (
            a.dtype.kind == "i" or (a.dtype.kind == "u" and a.dtype.itemsize < 8)
        )
    from ._grid_energy_gpu import DTYPES

    return a.dtype in DTYPES


def _potts_energy_one_pass(u: Any, w: Any, connectivity: Any, xp) -> GridEnergy:
    """:func:`_potts_energy` for integer inputs in one pass (``_grid_energy_cpu`` on
    the host, ``_grid_energy_gpu`` on the device): the same arrays, constant and
    errors."""
    grid, D = _grid_and_directions(u, connectivity)
    ndim = len(grid)
    _check_weights_shape(w, grid, D)
    if xp is np:
        from ._grid_energy_cpu import potts_capacities

        steps = neighbour_offsets(ndim, 2 * D)[::2]
        s, t, edges, constant, found = potts_capacities(u, w, steps)
    elif u.size == 0:
        return _potts_energy(u.astype(np.int64), w.astype(np.int64), xp)
    else:
        from ._grid_energy_gpu import potts_capacities

        s, t, edges, constant, found = potts_capacities(u, w, 2 * D)
    if 2 * found["wmax"] > INT32_MAX:
        raise ValueError(
            f"weights must be <= {INT32_MAX // 2} (both arcs of a pair carry the "
            f"weight), got {found['wmax']}"
        )

    def node(flat: int) -> tuple:
        return tuple(int(i) for i in np.unravel_index(flat, grid))

    if found["nneg"]:
        first = (found["first_neg"][0], *node(found["first_neg"][1]))
        raise NonSubmodularError(
            f"the energy is not submodular: {found['nneg']} edge(s) have a negative "
            f"weight; the first is direction {first[0]} at node {first[1:]}",
            count=found["nneg"],
            first=first,
        )
    for name, label in (("source", 1), ("sink", 0)):
        flat = found["bad_" + name]
        if flat is not None:  # the value in Python integers (beyond int64 too)
            u0, u1 = (int(v) for v in u.reshape(-1, 2)[flat].tolist())
            at, value = node(flat), (u1 if label else u0) - min(u0, u1)
            raise ValueError(
                f"the {name} capacities of this energy exceed int32 ({INT32_MAX}); got "
                f"{value} at index {at}: reduce the costs (or the scale)"
            )
    return GridEnergy._trusted(s, t, edges, constant)


def _potts_energy(u: Any, w: Any, xp) -> GridEnergy:
    """Fast path of :func:`grid_energy` for the symmetric weight form."""
    D = w.shape[0]
    grid = tuple(u.shape[:-1])
    ndim = len(grid)
    tails = [_arc_views(ndim, 2 * d)[0] for d in range(D)]
    # only the entries that couple a pair count: those without a neighbour are ignored
    wmax = max(
        (int(w[d][tails[d]].max()) for d in range(D) if w[d][tails[d]].size),
        default=0,
    )
    if 2 * wmax > INT32_MAX:
        raise ValueError(
            f"weights must be <= {INT32_MAX // 2} (both arcs of a pair carry the "
            f"weight), got {wmax}"
        )
    bad = [w[d][tails[d]] < 0 for d in range(D)]
    nbad = sum(int(b.sum()) for b in bad)
    if nbad:
        d = next(d for d in range(D) if bool(bad[d].any()))
        first = (d, *_node_of(first_index(bad[d]), tails[d]))
        raise NonSubmodularError(
            f"the energy is not submodular: {nbad} edge(s) have a negative weight; "
            f"the first is direction {first[0]} at node {first[1:]}",
            count=nbad,
            first=first,
        )
    m = xp.minimum(u[..., 0], u[..., 1])
    s = u[..., 1] - m
    t = u[..., 0] - m
    constant = exact_sum(m)
    edges = xp.zeros((2 * D, *grid), dtype=np.int32)
    for name, arr in (("source", s), ("sink", t)):
        if arr.size and int(arr.max()) > INT32_MAX:
            bad_at = first_index(arr > INT32_MAX)
            raise ValueError(
                f"the {name} capacities of this energy exceed int32 ({INT32_MAX}); got "
                f"{int(arr[bad_at])} at index {bad_at}: reduce the costs (or the scale)"
            )
    for d in range(D):
        tail, head = _arc_views(ndim, 2 * d)
        edges[2 * d][tail] = w[d][tail]  # p -> q, cut when x_p = 0, x_q = 1
        edges[2 * d + 1][head] = w[d][tail]  # q -> p, cut when x_p = 1, x_q = 0
    return GridEnergy._trusted(s.astype(np.int32), t.astype(np.int32), edges, constant)
