"""Exact max-flow / min-cut on 2-D (4- or 8-connected) and 3-D (6-, 18- or
26-connected) grids."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._backend import is_cupy_array, resolve_backend
from ._validate import INT32_MAX
from .grid import GridEnergy, _check_capacity_shapes, grid_graph

__all__ = ["MinCut", "maxflow_grid"]


class MinCut(NamedTuple):
    """Result of :func:`maxflow_grid`.

    Attributes
    ----------
    flow : int
        Exact maximum-flow value (= capacity of the minimum cut).
    labels : ndarray of uint8, grid shape
        Minimum cut: 1 = sink side (``x_p = 1``), 0 = source side. Same array kind
        (NumPy / CuPy) as the input. Where several minimum cuts exist (nodes that
        neither the source reaches nor the sink is reached from, in the final
        residual graph), the backends choose differently, both exactly: the CPU
        gives the smallest source side (0 only where the source reaches), the GPU
        the smallest sink side (1 only where the sink is reached).
    stats : dict
        Solver statistics: ``backend``, ``time_s`` and solver-specific counters.
    """

    flow: int
    labels: Any
    stats: dict


def maxflow_grid(
    energy: Any,
    sink: Any = None,
    edges: Any = None,
    *,
    scale: float | None = None,
    backend: str = "auto",
) -> MinCut:
    """Exact maximum flow and minimum cut of a grid graph.

    Parameters
    ----------
    energy : GridEnergy or ndarray
        A :class:`GridEnergy` (from :func:`grid_energy` or :func:`grid_graph`), or the
        ``source`` capacity array, shape (M, N) or (P, M, N), with ``sink`` and
        ``edges`` given too.
    sink : ndarray, optional
        Sink capacities, the shape of ``source``.
    edges : ndarray, shape (K, *grid), optional
        Directed arc capacities, planes +x, -x, +y, -y (+z, -z), x the last axis; 8
        planes in 2-D or 18 / 26 in 3-D add the diagonal neighbours
        (:mod:`vision_cuts.grid`), on either backend.
    scale : float, optional
        Quantise floating capacities to ``round(value * scale)`` (arrays only);
        integer ones are multiplied by it too (see :func:`grid_graph`).
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy inputs or when a device is present, else the
        CPU (``VISION_CUTS_BACKEND`` overrides it).

    Returns
    -------
    MinCut
        ``(flow, labels, stats)``; ``labels[p] == 1`` means p is on the sink side.

    Raises
    ------
    TypeError, ValueError
        Bad arrays (see :func:`grid_graph`).
    BackendUnavailableError
        ``backend="gpu"`` without a usable device.

    Notes
    -----
    For an energy from :func:`grid_energy`, ``energy.energy(labels) ==
    energy.constant + flow`` is the minimum of E(x). The CPU solver is a
    Boykov-Kolmogorov search-tree algorithm specialised to grids (neighbours by index
    arithmetic, no graph objects), compiled with numba. The GPU solver is a tiled
    push-relabel with global relabels on the device; on grids whose flow must run
    along very long paths (mazes, corridors), where push-relabel's rounds grow with
    the path length, it hands what is left after a time budget (0.02 s + 0.3 us a
    node) to the CPU solver, exactly (``stats["handover"]`` says when and how);
    vision energies end on the GPU far sooner.

    References
    ----------
    Y. Boykov and V. Kolmogorov, "An experimental comparison of min-cut/max-flow
    algorithms for energy minimization in vision", IEEE TPAMI 26(9), 2004.

    Examples
    --------
    >>> import numpy as np
    >>> from vision_cuts import maxflow_grid
    >>> source = np.array([[5, 0]], dtype=np.int32)
    >>> sink = np.array([[0, 5]], dtype=np.int32)
    >>> edges = np.zeros((4, 1, 2), dtype=np.int32)
    >>> edges[0, 0, 0] = 3  # arc (0, 0) -> (0, 1)
    >>> cut = maxflow_grid(source, sink, edges, backend="cpu")
    >>> cut.flow, cut.labels.tolist()
    (3, [[0, 1]])
    """
    if isinstance(energy, GridEnergy):
        if sink is not None or edges is not None:
            raise TypeError(
                "maxflow_grid takes either a GridEnergy or (source, sink, edges) "
                "arrays, not both"
            )
        if scale is not None:
            raise TypeError("scale applies to capacity arrays, not to a GridEnergy")
        graph = energy
    else:
        if sink is None or edges is None:
            raise TypeError(
                "maxflow_grid needs a GridEnergy, or source, sink and edges arrays; "
                f"got energy={type(energy).__name__}, sink={type(sink).__name__}, "
                f"edges={type(edges).__name__}"
            )
        energy, sink, edges = (_plain(a) for a in (energy, sink, edges))
        if _checked_on_device(energy, sink, edges, scale, backend):
            from ._maxflow_gpu import maxflow_grid_gpu

            flow, labels, stats = maxflow_grid_gpu(energy, sink, edges, validate=True)
            if not is_cupy_array(energy):
                labels = labels.get()
            return MinCut(int(flow), labels, stats)
        graph = grid_graph(energy, sink, edges, scale=scale)
    which = resolve_backend(backend, graph.source)
    if which == "gpu":
        from ._maxflow_gpu import maxflow_grid_gpu

        flow, labels, stats = maxflow_grid_gpu(graph.source, graph.sink, graph.edges)
        if not is_cupy_array(graph.source):
            labels = labels.get()
        return MinCut(int(flow), labels, stats)
    from ._maxflow_cpu import maxflow_grid_cpu

    src, snk, edg = graph.source, graph.sink, graph.edges
    on_gpu = is_cupy_array(src)
    if on_gpu:
        src, snk, edg = src.get(), snk.get(), edg.get()
    flow, labels, stats = maxflow_grid_cpu(
        np.ascontiguousarray(src), np.ascontiguousarray(snk), np.ascontiguousarray(edg)
    )
    if on_gpu:
        import cupy

        labels = cupy.asarray(labels)
    return MinCut(int(flow), labels, stats)


def _warm_graph(source: Any, sink: Any, edges: Any, residual: Any) -> tuple | None:
    """Terminal capacities that continue a solve from an earlier one's residual arcs.

    ``residual`` holds the residual arc capacities that an earlier solve (with any
    terminal capacities) left on the arcs ``edges``: for every arc pair,
    ``r(p->q) + r(q->p) == cap(p->q) + cap(q->p)``. Pushing that arc flow f back
    into the graph moves ``in_f(p) = sum_d (residual_d(p) - edges_d(p))`` onto the
    terminals: with ``e = source - sink + in_f`` the graph with arcs ``residual`` and
    terminal capacities ``max(e, 0)`` / ``max(-e, 0)`` has, for every cut, the
    capacity of the original graph minus a constant (Kohli and Torr's dynamic graph
    cuts). Returns ``(source', sink', offset)`` with ``maxflow(original) ==
    offset + maxflow(new)`` and the same minimum cuts, or None when a new terminal
    capacity would not fit in int32.

    References
    ----------
    P. Kohli and P. H. S. Torr, "Dynamic graph cuts for efficient inference in Markov
    random fields", IEEE TPAMI 29(12), 2007.
    """
    if is_cupy_array(source):
        import cupy as xp
    else:
        xp = np
    i64 = xp.int64
    src, snk = source.astype(i64), sink.astype(i64)
    net = src - snk + (residual.astype(i64) - edges.astype(i64)).sum(axis=0)
    s2, t2 = xp.maximum(net, 0), xp.maximum(-net, 0)
    # one device read: the largest new capacity and the offset
    offset = xp.minimum(src, snk).sum() + xp.maximum(snk - src, 0).sum() - t2.sum()
    big = xp.maximum(s2.max(), t2.max()) if net.size else xp.zeros((), dtype=i64)
    big, offset = (int(v) for v in xp.stack([big, offset]).tolist())
    if big > INT32_MAX:
        return None
    return s2.astype(xp.int32), t2.astype(xp.int32), offset


def _plain(a: Any) -> Any:
    """An ndarray subclass (memmap, matrix) as a plain ndarray view, as the host
    checks take it; masked arrays stay (the checks refuse them, naming the array)."""
    if isinstance(a, np.ndarray) and type(a) is not np.ndarray:
        if not isinstance(a, np.ma.MaskedArray):
            return np.asarray(a)
    return a


def _checked_on_device(
    source: Any, sink: Any, edges: Any, scale: Any, backend: str
) -> bool:
    """Whether capacity arrays go to the GPU as they are and are checked there after
    the upload (int32 NumPy or CuPy arrays, no ``scale``, a non-empty grid, the GPU
    backend): their shapes are checked here, their values by ``gpr_validate`` (the
    same errors as :func:`grid_graph`'s)."""
    arrays = (source, sink, edges)
    if scale is not None or not (
        all(isinstance(a, np.ndarray) for a in arrays)
        or all(is_cupy_array(a) for a in arrays)
    ):
        return False
    if any(isinstance(a, np.ma.MaskedArray) for a in arrays):
        return False  # (the host checks refuse it, naming the array)
    if any(a.dtype != np.int32 for a in arrays):
        return False
    if resolve_backend(backend, source) != "gpu":
        return False
    _check_capacity_shapes(source, sink, edges)
    return source.size > 0


def _maxflow_warm(graph: GridEnergy, residual: Any) -> tuple[MinCut, Any]:
    """GPU ``maxflow_grid`` warm-started from ``residual`` (None: a cold solve).

    Returns the cut (flow and labels exactly those of a cold solve) and the final
    residual arcs, for the next call on the same arcs with new terminal capacities.
    """
    import cupy

    from ._maxflow_gpu import maxflow_grid_gpu

    src, snk, edg = (cupy.asarray(a) for a in (graph.source, graph.sink, graph.edges))
    offset = 0
    if residual is not None and tuple(residual.shape) == tuple(edg.shape):
        warm = _warm_graph(src, snk, edg, residual)
        if warm is not None:
            src, snk, offset = warm
            edg = residual
    flow, labels, stats = maxflow_grid_gpu(src, snk, edg, residual=True)
    res = stats.pop("residual")
    stats["warm_start"] = edg is residual
    if not is_cupy_array(graph.source):
        labels = labels.get()
    return MinCut(int(flow) + offset, labels, stats), res
