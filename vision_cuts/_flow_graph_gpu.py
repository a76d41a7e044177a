"""GPU maximum flow on general CSR graphs: lock-free push-relabel (CuPy).

The graph is uploaded once (int32 CSR, int64 residuals and excesses, int32 labels);
the kernels are in ``kernels/graph_push_relabel.cu``. Phase 1: saturate the source
arcs; then rounds of (global relabel = BFS from the sink over residual arcs on the GPU,
in one persistent launch, which also counts the active nodes; when that count is 0 the
preflow is maximal; else ``cycles`` rounds of lock-free push / relabel in one launch).
The sink-side nodes of the last BFS are the minimum cut, ``ex[sink]`` the value. Phase
2 returns the excess left on source-side nodes to the source with the same kernels
(BFS from the source, the sink excluded), so the result is a flow. Host traffic: one
4-byte read per round.

References
----------
B. Hong, "A lock-free multi-threaded algorithm for the maximum flow problem", 2008;
J. Wu, Z. He and B. Hong, "Efficient CUDA algorithms for the maximum network flow
problem", GPU Computing Gems, 2012; Lu and Chatterjee, CSR push-relabel on CUDA with a
global relabel on the GPU (CMU 15-618, 2025).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ._kernels import get_kernel, get_module, sm_count

__all__ = ["maximum_flow_gpu"]

_NT = 256
# push / relabel rounds per launch between two global relabels; on an H200 (warp per
# node) 64 was best on genrmf, 256 on RLG (0.157 vs 0.258 s on 512 x 512), see
# BENCHMARKS.md
_CYCLES = 64
# One warp per node (lanes scan the arcs, a shuffle reduction picks the lowest
# neighbour) beat one thread per node on every family measured on an H200, low degree
# included: RLG 512 x 512 0.16 vs 4.2 s, genrmf 64 x 64 0.66 vs 1.4 s, ADG 2000 0.022
# vs 0.24 s. A thread per node relabels all nodes at once from stale labels and needs
# 5-20x more rounds; the warp form walks the nodes in waves of resident warps.
_WARP_DEFAULT = True
# The warp form used: "warp" (gpr_push_warp: one node per visit) or "ballot"
# (gpr_push_ballot: a warp tests 32 nodes with one load and serves only the active
# ones). The ballot form visits less but needs 2.5-4x more rounds (its nodes are served
# in runs of 32 neighbours from the same stale labels): on an H200 it took 0.84 vs
# 0.26 s on RLG 512 x 512, 1.43 vs 0.67 s on genrmf 64 x 64, 2.49 vs 1.26 s on RLG
# 1024 x 1024, so "warp" is the default.
_WARP_KERNEL = "warp"
_KERNELS = {
    "thread": "gpr_push_thread",
    "warp": "gpr_push_warp",
    "ballot": "gpr_push_ballot",
}
_MAX_ROUNDS = 1_000_000
# The time budget of a solve, a fixed part and a part per CSR arc: past it the solve
# stops (OverBudget) and the caller solves the graph on the CPU. Push-relabel's rounds
# grow with the length of the paths the excess must travel: on AK networks the GPU
# took 250-283x the CPU's time (ak1000: 9.46 s against 34 ms, H100). The families it
# is for take 0.2-1.3 us an arc (genrmf 128 x 16: 1.58 s for 1.29 M arcs, H200), 4x
# inside the budget or more; the CPU takes 0.3-3 us an arc on them.
_BUDGET_S = 0.05
_BUDGET_NS_PER_ARC = 5000.0


class OverBudget(Exception):
    """The GPU solve ran past its time budget; ``args[0]``: its stats until then."""


def _blocks_per_sm(kernel: Any, threads: int) -> int:
    import cupy

    try:
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            kernel.kernel.ptr, threads, 0
        )
    except Exception:
        per_sm = 1
    return max(1, int(per_sm))


def maximum_flow_gpu(
    indptr: np.ndarray,
    heads: np.ndarray,
    reverse: np.ndarray,
    capacity: np.ndarray,
    source: int,
    sink: int,
    *,
    warp_per_vertex: bool | None = None,
    cycles: int | None = None,
    kernel: str | None = None,
    budget_s: float | None = None,
) -> tuple[int, np.ndarray, np.ndarray, dict]:
    """Maximum flow on the GPU; returns ``(value, flow, labels, stats)`` (NumPy).

    ``kernel`` ("thread", "warp" or "ballot") overrides ``warp_per_vertex``.
    ``budget_s``: seconds after the upload past which the solve stops with
    :class:`OverBudget` (checked at each round's count; default ``_BUDGET_S +
    _BUDGET_NS_PER_ARC`` a CSR arc; ``math.inf`` none).
    """
    import cupy

    t0 = time.perf_counter()
    n = int(indptr.shape[0] - 1)
    if warp_per_vertex is None:
        warp_per_vertex = _WARP_DEFAULT
    if kernel is None:
        kernel = _WARP_KERNEL if warp_per_vertex else "thread"
    if kernel not in _KERNELS:
        raise ValueError(f"kernel must be one of {tuple(_KERNELS)}, got {kernel!r}")
    warp_per_vertex = kernel != "thread"
    cycles = _CYCLES if cycles is None else int(cycles)
    mod = get_module("graph_push_relabel.cu", {"GPR_NT": _NT})
    k_sat = get_kernel(mod, "gpr_saturate_source")
    k_bfs = get_kernel(mod, "gpr_bfs")
    k_push = get_kernel(mod, _KERNELS[kernel])
    sms = sm_count()
    bfs_blocks = sms * _blocks_per_sm(k_bfs, _NT)
    push_blocks = sms * _blocks_per_sm(k_push, _NT)
    if not warp_per_vertex:
        push_blocks = min(push_blocks, max(1, -(-n // _NT)))

    d_indptr = cupy.asarray(indptr.astype(np.int32))
    d_heads = cupy.asarray(heads.astype(np.int32))
    d_rev = cupy.asarray(reverse.astype(np.int32))
    d_cap = cupy.asarray(capacity.astype(np.int64))
    r = d_cap.copy()
    ex = cupy.zeros(n, dtype=cupy.int64)
    h = cupy.zeros(n, dtype=cupy.int32)
    front = cupy.empty(2 * n, dtype=cupy.int32)
    ctl = cupy.zeros(8, dtype=cupy.int32)
    bar = cupy.zeros(2, dtype=cupy.uint32)
    pinned = cupy.cuda.alloc_pinned_memory(4)
    active_host = np.frombuffer(pinned, dtype=np.int32, count=1)
    s, t = np.int32(source), np.int32(sink)
    n32 = np.int32(n)
    warp_flag = np.int32(1 if warp_per_vertex else 0)
    t_up = time.perf_counter()
    if budget_s is None:
        budget_s = _BUDGET_S + _BUDGET_NS_PER_ARC * 1e-9 * int(heads.shape[0])
    deadline = t_up + budget_s
    done: list = []  # rounds of the phases ended

    k_sat(
        (max(1, min(1024, -(-int(indptr[source + 1] - indptr[source]) // _NT))),),
        (_NT,),
        (d_indptr, d_heads, d_rev, r, ex, s),
    )

    def run_phase(target, excluded):
        rounds = 0
        while True:
            k_bfs(
                (bfs_blocks,),
                (_NT,),
                (
                    d_indptr,
                    d_heads,
                    d_rev,
                    r,
                    ex,
                    h,
                    front,
                    ctl,
                    bar,
                    n32,
                    np.int32(target),
                    np.int32(excluded),
                    s,
                    t,
                    warp_flag,
                ),
            )
            ctl[3:4].get(out=active_host)
            if int(active_host[0]) == 0:
                done.append(rounds)
                return rounds
            rounds += 1
            if rounds > _MAX_ROUNDS:
                raise RuntimeError("GPU push-relabel did not converge")
            if time.perf_counter() > deadline:
                raise OverBudget(
                    {
                        "gpu_s": time.perf_counter() - t0,
                        "rounds": sum(done) + rounds,
                        "phase": len(done) + 1,
                        "active": int(active_host[0]),
                    }
                )
            k_push(
                (push_blocks,),
                (_NT,),
                (d_indptr, d_heads, d_rev, r, ex, h, n32, s, t, np.int32(cycles)),
            )

    rounds1 = run_phase(t, s)
    labels = (h < n).astype(cupy.uint8)
    value = int(ex[int(sink)].get())
    cupy.cuda.get_current_stream().synchronize()
    t1 = time.perf_counter()
    rounds2 = run_phase(s, t)
    flow = cupy.maximum(d_cap - r, 0)
    flow_h = flow.get()
    labels_h = labels.get()
    t2 = time.perf_counter()
    stats = {
        "backend": "gpu",
        "time_s": t2 - t0,
        "upload_s": t_up - t0,
        "phase1_s": t1 - t_up,
        "phase2_s": t2 - t1,
        "rounds": rounds1,
        "phase2_rounds": rounds2,
        "cycles": cycles,
        "kernel": kernel,
        "handover": None,
    }
    return value, flow_h, labels_h, stats
