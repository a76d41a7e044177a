"""The GPU grid solve's hand-over to the CPU solver, for energies with long paths.

Push-relabel moves excess a bounded number of steps between two global relabels, and
each relabel's search is as deep as the longest residual path, so a grid whose flow
must travel along long corridors (a maze, a 1 x n strip) takes rounds and relabel
depth that both grow with the path length: a 256 x 256 serpentine corridor took 1.1 s
on an H200 against 18 ms for a Boykov-Kolmogorov search, which follows a whole path in
one augmentation. Vision energies end long before the budget below (296 GrabCut cuts,
123 stereo, multi-label and volume cuts measured: none reached it). So a solve whose
rounds have run for longer than a budget (by default a fixed part and a part per node,
within the CPU solver's time on such grids: see ``BENCHMARKS.md``, "Long-path
energies") hands what is left to the CPU solver, exactly:

For a preflow with excess ``ex``, residual sink capacities ``tcap`` and residual arcs
``rc``, the graph G' with source capacities ``ex``, sink capacities ``tcap`` and arcs
``rc`` has, for every cut S, ``cap_G(S) = flow_so_far + cap_G'(S)`` where
``flow_so_far = sum(sink) - sum(tcap)`` (the flow already in the sink arcs). So the
maximum flow of G is ``flow_so_far + maxflow(G')`` and both have the same minimum cuts:
the CPU solver's smallest sink (or source) side of G' is the GPU's answer for G.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ._maxflow_cpu import maxflow_grid_cpu

log = logging.getLogger(__name__)

__all__ = ["cpu_budget", "finish_on_cpu", "fits_cpu"]

_INT32_MAX = 2**31 - 1
# The default budget of the GPU rounds before the hand-over: a fixed part (launches,
# CUDA graph captures and the first relabels of a small grid) and a part per node.
# The CPU solver takes 0.1-6 us a node on long-path grids and on hard vision
# energies (2 cores); 0.3 us keeps the GPU's slowest vision energies at least 10x
# inside the budget (GrabCut's hardest cut, 0.25 MP: 10 ms of 96; 2 MP: 21 ms of
# 620), since handing one of them over would cost the CPU's time on it (1.3 s for
# banana1's first cut).
_HANDOVER_S = 0.02
_HANDOVER_NS_PER_NODE = 300.0


def cpu_budget(n: int, cpu_after: float | None) -> float:
    """Seconds of GPU rounds after which a solve of ``n`` nodes hands over."""
    if cpu_after is None:
        return _HANDOVER_S + _HANDOVER_NS_PER_NODE * 1e-9 * n
    return float(cpu_after)


def fits_cpu(solver: Any) -> bool:
    """Whether every node's excess fits the CPU solver's int32 terminal capacities
    (read after the solver's stream has finished its queued rounds)."""
    return int(solver.ex.max()) <= _INT32_MAX


def finish_on_cpu(solver: Any, residual: bool, side: str) -> tuple[int, Any, Any, dict]:
    """The rest of a solve on the CPU, from the device state of ``solver`` (its
    stream idle, :func:`fits_cpu` true). Returns ``(flow, labels, residual arcs or
    None, stats)``, labels and residual arcs as CuPy arrays on the current stream."""
    cp = solver.cp
    t0 = time.perf_counter()
    shape, k = solver.shape, solver.k
    so_far = int(solver.snk_in.sum(dtype=cp.int64)) - int(
        solver.tcap.sum(dtype=cp.int64)
    )
    ex = solver.ex.astype(cp.int32).get().reshape(shape)
    tcap = solver.tcap.get().reshape(shape)
    rc = solver.rc.get().reshape((k, *shape))
    t1 = time.perf_counter()
    flow, labels, stats = maxflow_grid_cpu(ex, tcap, rc, side=side, residual=residual)
    t2 = time.perf_counter()
    res = cp.asarray(stats.pop("residual")) if residual else None
    out = cp.asarray(labels)
    info = {
        "download_s": t1 - t0,
        "cpu_s": t2 - t1,
        "flow_before": so_far,
        "cpu_flow": int(flow),
        "cpu_augmentations": int(stats["augmentations"]),
        "cpu_origin_steps": int(stats["origin_steps"]),
        "cpu_threads": int(stats["threads"]),
    }
    log.debug(
        "grid %s: the GPU rounds handed the rest to the CPU solver (%d of the flow "
        "there, %.1f ms)", shape, int(flow), 1e3 * (t2 - t1),
    )  # fmt: skip
    return so_far + int(flow), out, res, info
