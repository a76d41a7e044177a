"""General directed graphs for maximum flow: a CSR type with reverse arcs, generators.

:class:`FlowGraph` stores a capacitated directed graph in compressed sparse row form
where every arc ``u -> v`` has a partner arc ``v -> u`` (its *reverse*, capacity 0 when
the input had no such edge), as push-relabel needs. It is built from edge lists
(:func:`flow_graph`) or a SciPy sparse matrix (:func:`flow_graph_from_sparse`);
parallel input edges are merged into one arc whose capacity is their sum, self-loops
are dropped, and ``FlowGraph.edge_arc`` remembers which arc each input edge went to,
so a flow on arcs maps back to the input edges (:meth:`FlowGraph.edge_flow`).

The generators build the classic families used to evaluate push-relabel codes, seeded
and reproducible: :func:`acyclic_dense_graph` (ADG), :func:`genrmf_graph` (RMFGEN of
Goldfarb and Grigoriadis) and :func:`washington_rlg_graph` (Washington random level
graphs of R. Anderson's generator).

References
----------
D. Goldfarb and M. D. Grigoriadis, "A computational comparison of the Dinic and network
simplex methods for maximum flow", Annals of Operations Research 13, 1988.
R. J. Anderson and J. C. Setubal, "Goldberg's algorithm for maximum flow in
perspective: a computational study", DIMACS Series 12, 1993 (the Washington generator).
J. Gutiérrez Mota, "Implementación en CUDA del algoritmo push-relabel", UCM, 2012.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import isqrt
from typing import Any, NamedTuple

import numpy as np

from ._validate import (
    check_flag,
    check_int,
    check_scale,
    exact_sum,
    given_kind,
    object_note,
    regular_array,
)

__all__ = [
    "MAX_CAPACITY",
    "FlowGraph",
    "FlowProblem",
    "MaxFlow",
    "acyclic_dense_graph",
    "flow_graph",
    "flow_graph_from_sparse",
    "genrmf_graph",
    "maximum_flow",
    "washington_rlg_graph",
]

# The total of all capacities is at most 2**61 (so each capacity is too), so every
# residual capacity, excess and flow value fits in int64 without overflow. A value
# beyond MAX_CAPACITY is refused on its own, before a sum that could wrap is taken.
MAX_CAPACITY = 1 << 62
_MAX_TOTAL = MAX_CAPACITY // 2
_MAX_NODES = (1 << 31) - 2
_MAX_ARCS = (1 << 31) - 1  # reverse arcs included


@dataclass(frozen=True, eq=False)
class FlowGraph:
    """A capacitated directed graph in CSR form with reverse-arc indices.

    Build it with :func:`flow_graph` or :func:`flow_graph_from_sparse`, never by hand.

    Attributes
    ----------
    num_nodes : int
        Number of nodes, numbered ``0 .. num_nodes - 1``.
    indptr : ndarray of int64, shape (num_nodes + 1,)
        The arcs leaving node ``u`` are ``indptr[u] .. indptr[u + 1] - 1``, sorted by
        head.
    heads : ndarray of int32, shape (num_arcs,)
        Head node of every arc.
    capacity : ndarray of int64, shape (num_arcs,)
        Arc capacities (0 for a pure reverse arc).
    reverse : ndarray of int32, shape (num_arcs,)
        Index of the partner arc ``v -> u`` of every arc ``u -> v``.
    edge_arc : ndarray of int64, shape (num_edges,)
        The arc each input edge was merged into, ``-1`` for a dropped self-loop.
    edge_capacity : ndarray of int64, shape (num_edges,)
        Capacities of the input edges (what :meth:`edge_flow` splits the arc flow by).
    """

    num_nodes: int
    indptr: np.ndarray
    heads: np.ndarray
    capacity: np.ndarray
    reverse: np.ndarray
    edge_arc: np.ndarray
    edge_capacity: np.ndarray

    @property
    def num_arcs(self) -> int:
        """Number of arcs, reverse arcs included (twice the number of node pairs)."""
        return int(self.heads.shape[0])

    @property
    def tails(self) -> np.ndarray:
        """Tail node of every arc (int32, computed on demand)."""
        deg = np.diff(self.indptr)
        return np.repeat(np.arange(self.num_nodes, dtype=np.int32), deg)

    def edge_flow(self, flow: Any) -> np.ndarray:
        """Split a flow on arcs over the input edges.

        Parameters
        ----------
        flow : ndarray of int64, shape (num_arcs,)
            Flow per arc, as in :class:`MaxFlow` ``.flow``: integers with
            ``0 <= flow <= capacity``.

        Returns
        -------
        ndarray of int64, shape (num_edges,)
            Flow on every input edge: the flow of an arc is given to the input edges
            merged into it in input order, each up to its capacity; a self-loop gets 0.
            Summed per arc it gives back ``flow``.

        Raises
        ------
        TypeError
            ``flow`` is not an integer array.
        ValueError
            ``flow`` has the wrong shape or a value outside ``[0, capacity]``.
        """
        given = np.asarray(regular_array(flow, "flow"))
        if given.shape != (self.num_arcs,):
            raise ValueError(
                f"flow must have shape ({self.num_arcs},) (one value per arc), got "
                f"{given.shape}"
            )
        if given.size and given.dtype.kind not in "iu":
            raise TypeError(
                f"flow must have an integer dtype (int64, as MaxFlow.flow), got "
                f"{given.dtype}"
            )
        if given.dtype.kind == "u":
            # clamp first so that the cast cannot wrap; the clamped values still
            # exceed every capacity
            flow = np.minimum(given, MAX_CAPACITY + 1).astype(np.int64)
        else:
            flow = given.astype(np.int64, copy=False)
        bad = (flow < 0) | (flow > self.capacity)
        if bad.any():
            i = int(np.argmax(bad))
            u = int(np.searchsorted(self.indptr, i, side="right")) - 1
            raise ValueError(
                f"flow must lie in [0, capacity] on every arc, got {given[i]} on arc "
                f"{i} ({u} -> {self.heads[i]}) of capacity {self.capacity[i]}"
            )
        arc = self.edge_arc
        cap = self.edge_capacity
        out = np.zeros(arc.shape[0], dtype=np.int64)
        keep = np.flatnonzero(arc >= 0)
        if keep.size == 0:
            return out
        order = keep[np.argsort(arc[keep], kind="stable")]
        a = arc[order]
        c = cap[order]
        csum = np.cumsum(c)
        start = np.ones(a.shape[0], dtype=bool)
        start[1:] = a[1:] != a[:-1]
        group_first = np.maximum.accumulate(np.where(start, np.arange(a.size), 0))
        before = csum - c - (csum[group_first] - c[group_first])
        out[order] = np.clip(flow[a] - before, 0, c)
        return out

    def __repr__(self) -> str:
        return f"FlowGraph(num_nodes={self.num_nodes}, num_arcs={self.num_arcs})"


class FlowProblem(NamedTuple):
    """A graph with its source and sink (from the generators and the DIMACS reader)."""

    graph: FlowGraph
    source: int
    sink: int


def _as_index_array(a: Any, name: str) -> np.ndarray:
    given = type(a).__name__
    arr = np.asarray(regular_array(a, name))
    if arr.ndim == 0 and arr.dtype.kind == "O":
        raise TypeError(
            f"{name} must be a 1-D array of integers, got {given_kind(a, arr)}"
        )
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(
            f"{name} must have an integer dtype, got {arr.dtype}"
            f"{object_note(arr, given)}"
        )
    # compared before the cast to int64, so that a uint64 index is quoted unwrapped
    if arr.size and arr.max() > _MAX_NODES - 1:
        i = int(np.argmax(arr > _MAX_NODES - 1))
        raise ValueError(
            f"{name} must lie in [0, {_MAX_NODES - 1}] (a graph has at most "
            f"{_MAX_NODES} nodes), got {arr[i]} at index {i}"
        )
    return arr.astype(np.int64, copy=False)


def _at_index(i: int) -> str:
    return f"at index {i}"


def _as_capacities(
    a: Any,
    name: str,
    n_edges: int,
    scale: Any,
    *,
    where: Callable[[int], str] = _at_index,
    float_hint: str = "Pass scale=<factor> to quantise floats (round(value * scale)), "
    "or convert to an integer dtype",
) -> np.ndarray:
    """Validate capacities and return them as int64.

    Every message quotes the value the caller passed (before any scaling) and where
    it is: ``where(i)`` describes input position ``i``.
    """
    given = type(a).__name__
    arr = np.asarray(regular_array(a, name))
    if arr.ndim == 0:
        arr = np.full(n_edges, arr)
    if arr.shape != (n_edges,):
        raise ValueError(
            f"{name} must have shape ({n_edges},) (one per edge), got {arr.shape}"
        )
    factor = check_scale(scale)
    kind = arr.dtype.kind
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if kind == "f":
        if factor is None:
            raise TypeError(
                f"{name} has floating dtype {arr.dtype}; capacities are integers. "
                f"{float_hint}"
            )
        bad = ~np.isfinite(arr)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name} must be finite, got {arr[i].item()!r} {where(i)}")
        # the sign is checked before rounding: -0.4 must not pass as 0
        if arr.min() < 0:
            i = int(np.argmax(arr < 0))
            raise ValueError(
                f"{name} must be non-negative, got {arr[i].item()!r} {where(i)}"
            )
        with np.errstate(over="ignore"):
            scaled = np.rint(arr.astype(np.float64) * factor)
        if scaled.max() > MAX_CAPACITY:  # (an infinite product included)
            i = int(np.argmax(scaled > MAX_CAPACITY))
            raise ValueError(
                f"{name} times scale ({scale!r}) must be at most 2**62, got "
                f"{arr[i].item()!r} {where(i)}"
            )
        cap = scaled.astype(np.int64)
    elif kind in "iu":
        # range checks before the cast to int64 and before scaling, so that nothing
        # wraps and the messages quote the values passed
        if kind == "i" and arr.min() < 0:
            i = int(np.argmax(arr < 0))
            raise ValueError(f"{name} must be non-negative, got {arr[i]} {where(i)}")
        if arr.max() > MAX_CAPACITY:
            i = int(np.argmax(arr > MAX_CAPACITY))
            raise ValueError(f"{name} must be at most 2**62, got {arr[i]} {where(i)}")
        cap = arr.astype(np.int64)
        if factor is not None and factor != 1:
            if not factor.is_integer():
                raise TypeError(
                    f"scale={scale!r} for integer {name} must be an integer; pass "
                    "float capacities to quantise"
                )
            # an integer scale as given: through float it would round beyond 2**53
            mult = int(scale) if isinstance(scale, (int, np.integer)) else int(factor)
            top = int(cap.max())
            # the product is checked in Python integers: int64 would wrap
            if top * mult > MAX_CAPACITY:
                i = int(np.argmax(cap > MAX_CAPACITY // mult))
                raise ValueError(
                    f"{name} times scale ({scale!r}) must be at most 2**62, got "
                    f"{cap[i]} {where(i)}"
                )
            if top:
                cap = cap * mult
    elif kind == "b":
        raise TypeError(
            f"{name} must have an integer or floating dtype, got bool: convert it "
            f"to integers first ({name}.astype(int) makes True a capacity of 1)"
        )
    else:
        raise TypeError(
            f"{name} must have an integer or floating dtype, got {arr.dtype}"
            f"{object_note(arr, given)}. {float_hint}"
        )
    total = exact_sum(cap)
    if total > _MAX_TOTAL:
        raise ValueError(
            f"the sum of {name} must be at most 2**61 so that flows fit in int64, "
            f"got {total}; rescale the capacities"
        )
    return cap


def flow_graph(
    tails: Any,
    heads: Any,
    capacities: Any,
    *,
    num_nodes: int | None = None,
    scale: float | None = None,
) -> FlowGraph:
    """Build a :class:`FlowGraph` from an edge list.

    Parameters
    ----------
    tails, heads : array_like of int, shape (E,)
        Edge ``i`` goes from ``tails[i]`` to ``heads[i]`` (0-based node indices).
    capacities : array_like of int, shape (E,), or a scalar
        Non-negative integer capacities whose sum is at most 2**61 (so each is too;
        a single value beyond 2**62 is named as such before the sum is taken).
    num_nodes : int, optional
        Number of nodes (at most 2**31 - 2); default ``max(tails, heads) + 1``.
    scale : float, optional
        Quantise floating capacities to ``round(value * scale)``; floats without
        ``scale`` are a TypeError. With integer capacities ``scale`` must be an
        integer and multiplies them; the limits apply to the products.

    Returns
    -------
    FlowGraph
        Parallel edges ``u -> v`` are merged into one arc (capacities summed); edges
        ``u -> v`` and ``v -> u`` become an arc and its reverse; self-loops are
        dropped (``edge_arc == -1``).

    Raises
    ------
    TypeError, ValueError
        Non-integer indices, nodes out of range, negative or too large capacities,
        masked arrays and ragged lists.
    """
    t = _as_index_array(tails, "tails")
    h = _as_index_array(heads, "heads")
    if t.shape != h.shape:
        raise ValueError(
            f"tails and heads must have the same shape, got {t.shape} and {h.shape}"
        )
    cap = _as_capacities(capacities, "capacities", t.shape[0], scale)
    return _build_graph(t, h, cap, num_nodes)


def _build_graph(
    t: np.ndarray, h: np.ndarray, cap: np.ndarray, num_nodes: Any
) -> FlowGraph:
    """CSR arrays from validated int64 ``tails``, ``heads`` and capacities."""
    top = int(max(t.max(initial=-1), h.max(initial=-1))) + 1
    if num_nodes is None:
        num_nodes = top
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, (int, np.integer)):
        raise TypeError(f"num_nodes must be an integer, got {type(num_nodes).__name__}")
    n = int(num_nodes)
    if n < 0 or n > _MAX_NODES:
        raise ValueError(f"num_nodes must lie in [0, {_MAX_NODES}], got {n}")
    for name, arr in (("tails", t), ("heads", h)):
        if arr.size and (arr.min() < 0 or arr.max() >= n):
            i = int(np.argmax((arr < 0) | (arr >= n)))
            raise ValueError(
                f"{name} must lie in [0, num_nodes - 1] = [0, {n - 1}], got {arr[i]} "
                f"at index {i}"
            )
    loop = t == h
    # every edge u->v contributes cap to arc (u, v) and 0 to arc (v, u)
    keys = np.concatenate([t * n + h, h * n + t])[np.concatenate([~loop, ~loop])]
    caps = np.concatenate([cap[~loop], np.zeros(int((~loop).sum()), np.int64)])
    uniq, inv = np.unique(keys, return_inverse=True)
    arc_cap = np.zeros(uniq.shape[0], dtype=np.int64)
    np.add.at(arc_cap, inv, caps)
    if float(arc_cap.max(initial=0)) > MAX_CAPACITY:
        raise ValueError("capacities: a merged arc exceeds 2**62; rescale")
    if uniq.shape[0] > _MAX_ARCS:
        raise ValueError(f"the graph has {uniq.shape[0]} arcs, more than 2**31 - 1")
    arc_tail = uniq // n if n else uniq
    arc_head = (uniq % n).astype(np.int32) if n else uniq.astype(np.int32)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(arc_tail, minlength=n), out=indptr[1:])
    rev_keys = arc_head.astype(np.int64) * n + arc_tail
    reverse = np.searchsorted(uniq, rev_keys).astype(np.int32)
    edge_arc = np.full(t.shape[0], -1, dtype=np.int64)
    edge_arc[~loop] = np.searchsorted(uniq, t[~loop] * n + h[~loop])
    return FlowGraph(n, indptr, arc_head, arc_cap, reverse, edge_arc, cap)


def flow_graph_from_sparse(matrix: Any, *, scale: float | None = None) -> FlowGraph:
    """Build a :class:`FlowGraph` from a square SciPy sparse matrix.

    Entry ``(u, v)`` is the capacity of the edge ``u -> v`` (duplicates summed);
    explicit zeros are kept as zero-capacity edges. The input edges (for
    ``edge_arc``) are the stored entries in COO order. The capacities follow the
    rules of :func:`flow_graph` (``scale`` included); errors name the entry
    ``(row, column)``.
    """
    return _graph_from_sparse(matrix, "matrix", scale)


def _graph_from_sparse(matrix: Any, name: str, scale: Any) -> FlowGraph:
    """:func:`flow_graph_from_sparse` with messages that name the parameter ``name``."""
    import scipy.sparse as sp

    if not sp.issparse(matrix):
        raise TypeError(
            f"{name} must be a SciPy sparse matrix, got {type(matrix).__name__}"
        )
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"{name} must be square, got shape {matrix.shape}")
    n = int(matrix.shape[0])
    if n > _MAX_NODES:
        raise ValueError(
            f"{name} must have at most {_MAX_NODES} rows (one per node), got {n}"
        )
    coo = matrix.tocoo()
    if name == "matrix":
        hint = (
            "Pass scale=<factor> to quantise floats (round(value * scale)), or "
            "convert the matrix to an integer dtype"
        )
    else:
        hint = (
            f"Convert {name} with flow_graph_from_sparse({name}, scale=<factor>) to "
            "quantise floats (round(value * scale)), or convert it to an integer dtype"
        )
    cap = _as_capacities(
        coo.data,
        name,
        int(coo.data.shape[0]),
        scale,
        where=lambda i: f"at entry ({coo.row[i]}, {coo.col[i]})",
        float_hint=hint,
    )
    t = coo.row.astype(np.int64)
    h = coo.col.astype(np.int64)
    return _build_graph(t, h, cap, n)


def _rng(seed: Any) -> np.random.Generator:
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as exc:
        raise type(exc)(
            f"seed must be None, an integer >= 0 (or a sequence of them) or a NumPy "
            f"Generator, got {seed!r}: {exc}"
        ) from None


def _check_int(value: Any, name: str, low: int) -> int:
    v = check_int(value, name)
    if v < low:
        raise ValueError(f"{name} must be at least {low}, got {v}")
    return v


def _check_size(params: str, nodes: int, nodes_rule: str, arcs: int, arcs_rule: str):
    """A generated graph must respect the node and arc limits of :func:`flow_graph`;
    checked before anything is allocated. ``params`` names the size parameters with
    their values, the rules say how they give the counts."""
    if nodes > _MAX_NODES:
        raise ValueError(
            f"{params} give {nodes} nodes ({nodes_rule}); a graph has at most "
            f"{_MAX_NODES} nodes"
        )
    if arcs > _MAX_ARCS:
        raise ValueError(
            f"{params} give {arcs} arcs ({arcs_rule}, reverse arcs included); a graph "
            f"has at most {_MAX_ARCS} arcs"
        )


def _check_capacity_param(value: int, name: str, weight: int, sizes: str) -> None:
    """The largest capacities a generator can draw, ``weight * value`` in total, must
    respect the limit on the sum of capacities (2**61, which also bounds each arc)."""
    limit = _MAX_TOTAL // weight
    if value > limit:
        raise ValueError(
            f"{name} must be at most {limit} for {sizes} (the capacities can sum to "
            f"{weight} * {name}, at most 2**61), got {value}"
        )


def acyclic_dense_graph(
    n: int, *, max_capacity: int = 10000, seed: Any = None
) -> FlowProblem:
    """Acyclic dense graph (ADG): an arc ``i -> j`` for every ``i < j``.

    Parameters
    ----------
    n : int
        Number of nodes, from 2 to 46341; there are ``n (n - 1) / 2`` arcs (twice
        that with the reverse arcs, at most 2**31 - 1).
    max_capacity : int
        Capacities are uniform in ``[1, max_capacity]``; ``max_capacity`` times the
        number of arcs must be at most 2**61.
    seed : int or Generator, optional
        Random seed (the same seed gives the same graph).

    Returns
    -------
    FlowProblem
        ``(graph, source=0, sink=n - 1)``.

    Raises
    ------
    TypeError, ValueError
        A size or capacity parameter that is not an integer or breaks the limits.
    """
    n = _check_int(n, "n", 2)
    max_capacity = _check_int(max_capacity, "max_capacity", 1)
    n_max = (1 + isqrt(1 + 4 * _MAX_ARCS)) // 2  # the largest n with n (n-1) arcs
    if n > n_max:
        raise ValueError(
            f"n must be at most {n_max} (the graph has n (n - 1) arcs, reverse arcs "
            f"included, at most {_MAX_ARCS}), got {n}"
        )
    _check_capacity_param(max_capacity, "max_capacity", n * (n - 1) // 2, f"n = {n}")
    rng = _rng(seed)
    i, j = np.triu_indices(n, k=1)
    cap = rng.integers(1, max_capacity, size=i.shape[0], endpoint=True)
    return FlowProblem(flow_graph(i, j, cap, num_nodes=n), 0, n - 1)


def ak_graph(k: int) -> FlowProblem:
    """Cherkassky and Goldberg's AK(k) network: ``4 k + 6`` nodes, ``6 k + 7`` arcs.

    Two chains of about ``k`` nodes each behind a source and before a sink: the
    first chain's capacities fall by one a node and every node leaves a unit arc to
    its end; the second chain's nodes each leave a unit arc to its mirror node.
    Deterministic. Push-relabel solvers take time quadratic in ``k`` on it (the
    excess moves a node a relabel along the chains); augmenting-path solvers do not.

    Parameters
    ----------
    k : int
        At least 1 (``2 (6 k + 7)`` arcs with the reverse arcs, at most 2**31 - 1).

    Returns
    -------
    FlowProblem
        ``(graph, source=0, sink=1)``.

    Raises
    ------
    TypeError, ValueError
        ``k`` not an integer, below 1 or too large.

    References
    ----------
    B. V. Cherkassky and A. V. Goldberg, "On implementing the push-relabel method for
    the maximum flow problem", Algorithmica 19, 1997 (the AK generator).
    """
    k = _check_int(k, "k", 1)
    _check_size(f"k = {k}", 4 * k + 6, "4 k + 6", 2 * (6 * k + 7), "2 (6 k + 7)")
    i = np.arange(k, dtype=np.int64)
    d = 2 * k + 4
    big = 10**6
    mid = np.arange(k + 3, 2 * k + 3, dtype=np.int64)
    last = np.arange(d, 2 * k + d + 1, dtype=np.int64)
    # 1-based node numbers of the generator's file, shifted to 0-based below
    tails = [i + 3, i + 3, [k + 3, k + 3], mid + 1, last + 1, i + d + 1]
    heads = [i + 4, np.full(k, k + 4), [2 * k + 4, k + 4], mid + 2, last + 2]
    heads.append(2 * k + 2 - i + d)
    caps = [k - i + 1, np.ones(k), [1, 1], np.full(k, k + 1), np.full(2 * k + 1, k)]
    caps.append(np.ones(k))
    tails.append([1, 1, d, 4 * k + 6])
    heads.append([3, d + 1, 2, 2])
    caps.append([big] * 4)
    t = np.concatenate([np.asarray(a, dtype=np.int64) for a in tails]) - 1
    h = np.concatenate([np.asarray(a, dtype=np.int64) for a in heads]) - 1
    c = np.concatenate([np.asarray(a, dtype=np.int64) for a in caps])
    return FlowProblem(flow_graph(t, h, c, num_nodes=4 * k + 6), 0, 1)


def genrmf_graph(
    a: int, b: int, *, c1: int = 1, c2: int = 100, seed: Any = None
) -> FlowProblem:
    """RMFGEN / genrmf graph: ``b`` frames, each an ``a x a`` grid.

    Inside a frame every node has arcs to its (up to 4) grid neighbours with capacity
    ``c2 * a * a``; every node of frame ``k`` has one arc to a node of frame ``k + 1``
    given by a random permutation, capacity uniform in ``[c1, c2]``. The source is the
    first node of the first frame, the sink the last node of the last frame.

    Parameters
    ----------
    a, b : int
        Frame side (at least 1) and number of frames (at least 2): ``a * a * b``
        nodes (at most 2**31 - 2) and ``4 a (a - 1) b + 2 a a (b - 1)`` arcs,
        reverse arcs included (at most 2**31 - 1).
    c1, c2 : int
        Range of the inter-frame capacities; the largest capacities the graph can
        have must sum to at most 2**61.
    seed : int or Generator, optional
        Random seed.

    Returns
    -------
    FlowProblem
        ``(graph, source=0, sink=a * a * b - 1)``.

    Raises
    ------
    TypeError, ValueError
        A size or capacity parameter that is not an integer or breaks the limits.
    """
    a = _check_int(a, "a", 1)
    b = _check_int(b, "b", 2)
    c1 = _check_int(c1, "c1", 0)
    c2 = _check_int(c2, "c2", 1)
    if c2 < c1:
        raise ValueError(f"c2 must be at least c1 = {c1}, got {c2}")
    aa = a * a
    n = aa * b
    n_grid = 4 * a * (a - 1) * b
    _check_size(
        f"a = {a} and b = {b}",
        n,
        "a * a * b",
        n_grid + 2 * aa * (b - 1),
        "4 a (a - 1) b + 2 a a (b - 1)",
    )
    # grid arcs of capacity c2 * a * a, inter-frame arcs of at most c2
    _check_capacity_param(c2, "c2", aa * n_grid + aa * (b - 1), f"a = {a}, b = {b}")
    rng = _rng(seed)
    idx = np.arange(n, dtype=np.int64).reshape(b, a, a)
    big = c2 * aa
    tl, hl = [], []
    for src, dst in (
        (idx[:, :, :-1], idx[:, :, 1:]),
        (idx[:, :, 1:], idx[:, :, :-1]),
        (idx[:, :-1, :], idx[:, 1:, :]),
        (idx[:, 1:, :], idx[:, :-1, :]),
    ):
        tl.append(src.ravel())
        hl.append(dst.ravel())
    frame_t = idx[:-1].reshape(b - 1, aa)
    perm = np.argsort(rng.random((b - 1, aa)), axis=1)
    frame_h = idx[1:].reshape(b - 1, aa)[np.arange(b - 1)[:, None], perm]
    tl.append(frame_t.ravel())
    hl.append(frame_h.ravel())
    caps = np.concatenate(
        [
            np.full(n_grid, big, dtype=np.int64),
            rng.integers(c1, c2, size=(b - 1) * aa, endpoint=True),
        ]
    )
    g = flow_graph(np.concatenate(tl), np.concatenate(hl), caps, num_nodes=n)
    return FlowProblem(g, 0, n - 1)


def washington_rlg_graph(
    rows: int, cols: int, *, max_capacity: int = 10000, seed: Any = None
) -> FlowProblem:
    """Washington random level graph (RLG): ``cols`` levels of ``rows`` nodes.

    Every node of level ``k`` has arcs to 3 distinct random nodes of level ``k + 1``
    with capacities uniform in ``[1, max_capacity]``; the source has an arc of
    capacity ``3 * max_capacity`` to every node of the first level and every node of
    the last level one to the sink (function 2 of R. Anderson's ``washington.c``).

    Parameters
    ----------
    rows, cols : int
        Nodes per level (at least 3) and number of levels (at least 2):
        ``rows * cols + 2`` nodes (at most 2**31 - 2) and
        ``2 (2 rows + 3 rows (cols - 1))`` arcs, reverse arcs included (at most
        2**31 - 1).
    max_capacity : int
        Largest inner arc capacity; the largest capacities the graph can have must
        sum to at most 2**61.
    seed : int or Generator, optional
        Random seed.

    Returns
    -------
    FlowProblem
        ``(graph, source=0, sink=rows * cols + 1)``; node ``1 + k * rows + i`` is node
        ``i`` of level ``k``.

    Raises
    ------
    TypeError, ValueError
        A size or capacity parameter that is not an integer or breaks the limits.
    """
    rows = _check_int(rows, "rows", 3)
    cols = _check_int(cols, "cols", 2)
    max_capacity = _check_int(max_capacity, "max_capacity", 1)
    n = rows * cols + 2
    m = rows * (cols - 1)
    _check_size(
        f"rows = {rows} and cols = {cols}",
        n,
        "rows * cols + 2",
        2 * (2 * rows + 3 * m),
        "2 (2 rows + 3 rows (cols - 1))",
    )
    # 2 rows terminal arcs of capacity 3 * max_capacity, 3 m inner ones
    _check_capacity_param(
        max_capacity, "max_capacity", 6 * rows + 3 * m, f"rows = {rows}, cols = {cols}"
    )
    rng = _rng(seed)
    s, t = 0, n - 1
    first = 1 + np.arange(rows, dtype=np.int64)
    last = 1 + (cols - 1) * rows + np.arange(rows, dtype=np.int64)
    # 3 distinct random targets per node: the first 3 of a random permutation
    pick = np.argsort(rng.random((m, rows)), axis=1)[:, :3] if rows <= 64 else None
    if pick is None:
        pick = rng.integers(0, rows, size=(m, 3))
        for _ in range(64):  # redraw the rare duplicates
            dup = (
                (pick[:, 0] == pick[:, 1])
                | (pick[:, 0] == pick[:, 2])
                | (pick[:, 1] == pick[:, 2])
            )
            if not dup.any():
                break
            pick[dup] = rng.integers(0, rows, size=(int(dup.sum()), 3))
    src_nodes = 1 + np.arange(m, dtype=np.int64)
    level = (src_nodes - 1) // rows
    dst = 1 + (level + 1)[:, None] * rows + pick
    tails = np.concatenate([np.zeros(rows, np.int64), last, np.repeat(src_nodes, 3)])
    heads = np.concatenate([first, np.full(rows, t, np.int64), dst.ravel()])
    caps = np.concatenate(
        [
            np.full(2 * rows, 3 * max_capacity, np.int64),
            rng.integers(1, max_capacity, size=3 * m, endpoint=True),
        ]
    )
    return FlowProblem(flow_graph(tails, heads, caps, num_nodes=n), s, t)


class MaxFlow(NamedTuple):
    """Result of :func:`maximum_flow`.

    Attributes
    ----------
    value : int
        Exact maximum-flow value (= capacity of the minimum cut).
    flow : ndarray of int64, shape (num_arcs,)
        Flow on every arc in the graph's CSR order, ``0 <= flow <= capacity``; an arc
        and its reverse never both carry flow. ``graph.edge_flow(flow)`` gives the
        flow per input edge.
    labels : ndarray of uint8, shape (num_nodes,)
        Minimum cut: 1 = sink side (the nodes that reach the sink in the final
        residual graph), 0 = source side.
    stats : dict
        Solver statistics: ``backend``, ``time_s`` and solver-specific counters.
    """

    value: int
    flow: np.ndarray
    labels: np.ndarray
    stats: dict


def _check_terminal(v: Any, name: str, n: int) -> int:
    v = check_int(v, name)
    if not 0 <= v < n:
        raise ValueError(f"{name} must lie in [0, {n - 1}], got {v}")
    return v


def _check_terminals(source: Any, sink: Any, n: int) -> tuple[int, int]:
    """Source and sink as distinct node indices of a graph of ``n`` nodes."""
    source = _check_terminal(source, "source", n)
    sink = _check_terminal(sink, "sink", n)
    if source == sink:
        raise ValueError(f"source and sink must differ, both are {source}")
    return source, sink


# "auto" runs maximum_flow on the GPU from this many arcs (reverse arcs included).
# Below it the CPU solver was faster on every sparse family measured (H100 with a
# 16-core host, BENCHMARKS.md): 2.6-5x on Washington and genrmf graphs of 4,000-16,000
# nodes, 12-154x on long thin genrmf graphs and 275x on AK networks, whose depth costs
# the GPU a grid barrier per BFS level in every global relabel; the one exception, a
# dense acyclic graph of 600 nodes (359,000 arcs), took 4.6 ms there against 8.2.
# From 1.6 M arcs (RLG 512 x 512, genrmf 64 x 64 and 128 x 16, dense adg2000; H200)
# the GPU was 1.2-3.3x faster.
_GPU_MIN_ARCS = 1_000_000


def maximum_flow(
    graph: Any,
    source: int,
    sink: int,
    *,
    method: str = "highest",
    backend: str = "auto",
    warp_per_vertex: bool | None = None,
) -> MaxFlow:
    """Exact maximum flow and minimum cut of a general directed graph.

    Parameters
    ----------
    graph : FlowGraph or scipy.sparse matrix
        The graph (a square sparse matrix of integer capacities is converted with
        :func:`flow_graph_from_sparse`).
    source, sink : int
        Terminal nodes (0-based, different).
    method : {"highest", "fifo"}
        Active-node selection of the CPU push-relabel.
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for graphs of at least a million arcs (reverse arcs
        included) when a device is present, else the CPU, which measured faster on
        smaller graphs (``VISION_CUTS_BACKEND`` overrides it).

    Returns
    -------
    MaxFlow
        ``(value, flow, labels, stats)``: ``flow`` per CSR arc, ``labels[v] == 1``
        means v is on the sink side of the minimum cut. NumPy arrays on both backends
        (the graph lives on the host).

    Other Parameters
    ----------------
    warp_per_vertex : bool, optional
        GPU only: one warp per node (the default; faster on every family measured)
        or, with False, one thread per node. Checked on both backends, ignored on
        the CPU.

    Raises
    ------
    TypeError, ValueError
        A bad graph, terminals out of range, ``source == sink``, unknown ``method``.
    BackendUnavailableError
        ``backend="gpu"`` without a usable device.

    Notes
    -----
    CPU: push-relabel with highest-label (or FIFO) selection, global relabeling and
    the gap heuristic, then a second phase that returns the excess of the preflow to
    the source (Cherkassky and Goldberg's hi_pr). GPU: lock-free asynchronous
    push-relabel (Hong; Wu, He and Hong), every active node pushing to its lowest
    residual neighbour with atomics on excess and residual capacities, with the global
    relabel (a breadth-first search from the sink) on the GPU. A GPU solve that runs
    past a time budget (0.05 s + 5 us a CSR arc; graphs whose excess must travel long
    paths, such as :func:`ak_graph`'s) stops, and the CPU solves the graph:
    ``stats["handover"]`` then holds the GPU's time and rounds, the rest of ``stats``
    the CPU's counters (``None`` where the GPU finished).

    References
    ----------
    B. V. Cherkassky and A. V. Goldberg, "On implementing the push-relabel method for
    the maximum flow problem", Algorithmica 19, 1997. B. Hong, "A lock-free
    multi-threaded algorithm for the maximum flow problem", 2008. J. Wu, Z. He and
    B. Hong, "Efficient CUDA algorithms for the maximum network flow problem", GPU
    Computing Gems, 2012.

    Examples
    --------
    >>> from vision_cuts import flow_graph, maximum_flow
    >>> g = flow_graph([0, 0, 1, 2], [1, 2, 3, 3], [3, 2, 2, 3])
    >>> res = maximum_flow(g, 0, 3, backend="cpu")
    >>> res.value, res.labels.tolist()
    (4, [0, 0, 1, 1])
    """
    from ._backend import resolve_backend

    if not isinstance(graph, FlowGraph):
        import scipy.sparse as sp

        if sp.issparse(graph):
            graph = _graph_from_sparse(graph, "graph", None)
        else:
            raise TypeError(
                "graph must be a FlowGraph or a SciPy sparse matrix, got "
                f"{type(graph).__name__}"
            )
    source, sink = _check_terminals(source, sink, graph.num_nodes)
    if not isinstance(method, str) or method not in ("highest", "fifo"):
        raise ValueError(f"method must be 'highest' or 'fifo', got {method!r}")
    if warp_per_vertex is not None:  # checked on both backends, used on the GPU
        warp_per_vertex = check_flag(warp_per_vertex, "warp_per_vertex")
    which = resolve_backend(backend, prefer_cpu=graph.num_arcs < _GPU_MIN_ARCS)
    arrays = (graph.indptr, graph.heads, graph.reverse, graph.capacity, source, sink)
    handover = None
    if which == "gpu":
        from ._flow_graph_gpu import OverBudget, maximum_flow_gpu

        try:
            value, flow, labels, stats = maximum_flow_gpu(
                *arrays, warp_per_vertex=warp_per_vertex
            )
            return MaxFlow(int(value), flow, labels, stats)
        except OverBudget as over:  # long paths: the CPU solves it afresh
            handover = over.args[0]
    from ._flow_graph_cpu import maximum_flow_cpu

    value, flow, labels, stats = maximum_flow_cpu(*arrays, method=method)
    if handover is not None:
        stats = {**stats, "backend": "gpu", "handover": handover}
    return MaxFlow(int(value), flow, labels, stats)
