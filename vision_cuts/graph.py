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

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

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

# Each arc capacity is at most 2**62 and the total of all capacities at most 2**62, so
# every residual capacity, excess and flow value fits in int64 without overflow.
MAX_CAPACITY = 1 << 62
_MAX_NODES = (1 << 31) - 2


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
            Non-negative flow per arc, as in :class:`MaxFlow` ``.flow``.

        Returns
        -------
        ndarray of int64, shape (num_edges,)
            Flow on every input edge: the flow of an arc is given to the input edges
            merged into it in input order, each up to its capacity; a self-loop gets 0.
            Summed per arc it gives back ``flow``.
        """
        flow = np.asarray(flow)
        if flow.shape != (self.num_arcs,):
            raise ValueError(
                f"flow must have shape ({self.num_arcs},) (one value per arc), got "
                f"{flow.shape}"
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
        out[order] = np.clip(flow[a].astype(np.int64) - before, 0, c)
        return out

    def __repr__(self) -> str:
        return f"FlowGraph(num_nodes={self.num_nodes}, num_arcs={self.num_arcs})"


class FlowProblem(NamedTuple):
    """A graph with its source and sink (from the generators and the DIMACS reader)."""

    graph: FlowGraph
    source: int
    sink: int


def _as_index_array(a: Any, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must have an integer dtype, got {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _as_capacities(a: Any, name: str, n_edges: int, scale: float | None) -> np.ndarray:
    from ._validate import check_scale

    arr = np.asarray(a)
    if arr.ndim == 0:
        arr = np.full(n_edges, arr)
    if arr.shape != (n_edges,):
        raise ValueError(
            f"{name} must have shape ({n_edges},) (one per edge), got {arr.shape}"
        )
    scale = check_scale(scale)
    kind = arr.dtype.kind
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if kind == "f":
        if scale is None:
            raise TypeError(
                f"{name} has floating dtype {arr.dtype}; capacities are integers. Pass "
                "scale=<factor> to quantise floats (round(value * scale)), or convert "
                "to an integer dtype"
            )
        bad = ~np.isfinite(arr)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name} must be finite, got {arr[i]!r} at index {i}")
        scaled = np.rint(arr.astype(np.float64) * scale)
        if scaled.size and (scaled.min() < 0 or scaled.max() > MAX_CAPACITY):
            i = int(np.argmax((scaled < 0) | (scaled > MAX_CAPACITY)))
            raise ValueError(
                f"{name} * scale must lie in [0, 2**62], got {scaled[i]!r} at index {i}"
            )
        arr = scaled.astype(np.int64)
    elif kind in "iu":
        if arr.dtype == np.uint64 and arr.size and arr.max() > MAX_CAPACITY:
            i = int(np.argmax(arr > MAX_CAPACITY))
            raise ValueError(f"{name} must be at most 2**62, got {arr[i]} at index {i}")
        arr = arr.astype(np.int64)
        if scale is not None and scale != 1:
            if not float(scale).is_integer():
                raise TypeError(
                    f"scale={scale!r} for integer {name} must be an integer; pass "
                    "float capacities to quantise"
                )
            arr = arr * int(scale)
    else:
        raise TypeError(
            f"{name} must have an integer dtype (or float with scale=), got {arr.dtype}"
        )
    if arr.size:
        if arr.min() < 0:
            i = int(np.argmax(arr < 0))
            raise ValueError(f"{name} must be non-negative, got {arr[i]} at index {i}")
        if arr.max() > MAX_CAPACITY:
            i = int(np.argmax(arr > MAX_CAPACITY))
            raise ValueError(f"{name} must be at most 2**62, got {arr[i]} at index {i}")
        if float(arr.sum(dtype=np.float64)) > 0.5 * MAX_CAPACITY:
            raise ValueError(
                f"the sum of {name} must be below 2**61 so that flows fit in int64, "
                f"got about {float(arr.sum(dtype=np.float64)):.3g}; rescale the "
                "capacities"
            )
    return arr


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
        Non-negative integer capacities (at most 2**62 each, sum below 2**61).
    num_nodes : int, optional
        Number of nodes; default ``max(tails, heads) + 1``.
    scale : float, optional
        Quantise floating capacities to ``round(value * scale)``; floats without
        ``scale`` are a TypeError.

    Returns
    -------
    FlowGraph
        Parallel edges ``u -> v`` are merged into one arc (capacities summed); edges
        ``u -> v`` and ``v -> u`` become an arc and its reverse; self-loops are
        dropped (``edge_arc == -1``).

    Raises
    ------
    TypeError, ValueError
        Non-integer indices, nodes out of range, negative or too large capacities.
    """
    t = _as_index_array(tails, "tails")
    h = _as_index_array(heads, "heads")
    if t.shape != h.shape:
        raise ValueError(
            f"tails and heads must have the same shape, got {t.shape} and {h.shape}"
        )
    cap = _as_capacities(capacities, "capacities", t.shape[0], scale)
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
    if uniq.shape[0] > (1 << 31) - 1:
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
    ``edge_arc``) are the stored entries in COO order.
    """
    import scipy.sparse as sp

    if not sp.issparse(matrix):
        raise TypeError(
            f"matrix must be a SciPy sparse matrix, got {type(matrix).__name__}"
        )
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"matrix must be square, got shape {matrix.shape}")
    coo = matrix.tocoo()
    return flow_graph(
        coo.row, coo.col, coo.data, num_nodes=int(matrix.shape[0]), scale=scale
    )


def _rng(seed: Any) -> np.random.Generator:
    return np.random.default_rng(seed)


def _check_int(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if int(value) < low:
        raise ValueError(f"{name} must be at least {low}, got {value}")
    return int(value)


def acyclic_dense_graph(
    n: int, *, max_capacity: int = 10000, seed: Any = None
) -> FlowProblem:
    """Acyclic dense graph (ADG): an arc ``i -> j`` for every ``i < j``.

    Parameters
    ----------
    n : int
        Number of nodes (at least 2); there are ``n (n - 1) / 2`` arcs.
    max_capacity : int
        Capacities are uniform in ``[1, max_capacity]``.
    seed : int or Generator, optional
        Random seed (the same seed gives the same graph).

    Returns
    -------
    FlowProblem
        ``(graph, source=0, sink=n - 1)``.
    """
    n = _check_int(n, "n", 2)
    max_capacity = _check_int(max_capacity, "max_capacity", 1)
    rng = _rng(seed)
    i, j = np.triu_indices(n, k=1)
    cap = rng.integers(1, max_capacity, size=i.shape[0], endpoint=True)
    return FlowProblem(flow_graph(i, j, cap, num_nodes=n), 0, n - 1)


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
        Frame side and number of frames (``a * a * b`` nodes).
    c1, c2 : int
        Range of the inter-frame capacities.
    seed : int or Generator, optional
        Random seed.

    Returns
    -------
    FlowProblem
        ``(graph, source=0, sink=a * a * b - 1)``.
    """
    a = _check_int(a, "a", 1)
    b = _check_int(b, "b", 2)
    c1 = _check_int(c1, "c1", 0)
    c2 = _check_int(c2, "c2", 1)
    if c2 < c1:
        raise ValueError(f"c2 must be at least c1 = {c1}, got {c2}")
    rng = _rng(seed)
    aa = a * a
    n = aa * b
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
    n_grid = sum(x.size for x in tl)
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
        Nodes per level (at least 3) and number of levels (at least 2).
    max_capacity : int
        Largest arc capacity.
    seed : int or Generator, optional
        Random seed.

    Returns
    -------
    FlowProblem
        ``(graph, source=0, sink=rows * cols + 1)``; node ``1 + k * rows + i`` is node
        ``i`` of level ``k``.
    """
    rows = _check_int(rows, "rows", 3)
    cols = _check_int(cols, "cols", 2)
    max_capacity = _check_int(max_capacity, "max_capacity", 1)
    rng = _rng(seed)
    n = rows * cols + 2
    s, t = 0, n - 1
    first = 1 + np.arange(rows, dtype=np.int64)
    last = 1 + (cols - 1) * rows + np.arange(rows, dtype=np.int64)
    # 3 distinct random targets per node: the first 3 of a random permutation
    m = rows * (cols - 1)
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
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an integer node index, got {type(v).__name__}")
    if not 0 <= int(v) < n:
        raise ValueError(f"{name} must lie in [0, {n - 1}], got {v}")
    return int(v)


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
        ``"auto"`` uses the GPU when a device is present, else the CPU
        (``VISION_CUTS_BACKEND`` overrides it).

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
        or, with False, one thread per node.

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
    relabel (a breadth-first search from the sink) on the GPU.

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
            graph = flow_graph_from_sparse(graph)
        else:
            raise TypeError(
                "graph must be a FlowGraph or a SciPy sparse matrix, got "
                f"{type(graph).__name__}"
            )
    n = graph.num_nodes
    source = _check_terminal(source, "source", n)
    sink = _check_terminal(sink, "sink", n)
    if source == sink:
        raise ValueError(f"source and sink must differ, both are {source}")
    if method not in ("highest", "fifo"):
        raise ValueError(f"method must be 'highest' or 'fifo', got {method!r}")
    which = resolve_backend(backend)
    if which == "gpu":
        from ._flow_graph_gpu import maximum_flow_gpu

        value, flow, labels, stats = maximum_flow_gpu(
            graph.indptr,
            graph.heads,
            graph.reverse,
            graph.capacity,
            source,
            sink,
            warp_per_vertex=warp_per_vertex,
        )
    else:
        from ._flow_graph_cpu import maximum_flow_cpu

        value, flow, labels, stats = maximum_flow_cpu(
            graph.indptr,
            graph.heads,
            graph.reverse,
            graph.capacity,
            source,
            sink,
            method=method,
        )
    return MaxFlow(int(value), flow, labels, stats)
