"""GPU grid max-flow: tiled push-relabel with the global relabel on the GPU (CuPy).

The graph stays on the device from the upload to the labels: structure-of-arrays
residual capacities (one int32 plane per direction), a uint64 excess, an int32 residual
sink capacity and int32 heights per node. The kernels are in ``kernels/``:

* ``grid_push_relabel.cu``: terminal cancellation (``min(s, t)`` goes straight
  through), the tiled push-relabel launch (one block per tile of one checkerboard
  colour, up to ``local_iters`` push / relabel rounds per tile in shared memory; pushes
  across the tile border go to the idle neighbour tile in global memory), the
  active-node count, and the final labels and flow.
* ``grid_bfs.cu``: the global relabel, a BFS from the sink over residual arcs by tiled
  chaotic relaxation in one persistent launch (each resident block owns a fixed set of
  tiles, relaxes the flagged ones to their fixed point in shared memory and flags the
  neighbour tiles whose border heights dropped, until no tile is flagged). Unreached
  nodes get height ``INF``: they can never reach the sink again (gap).

Loop: global relabel; while some node with excess can reach the sink, run
``sweeps_per_relabel`` sweeps (both colours) and relabel again. One round (the sweeps
and the relabel, a fixed sequence of launches) is captured once as a CUDA graph and
replayed; the host reads one integer per round (the active nodes left). At the end
``labels = (h < INF)``: the nodes that reach the sink in the residual graph, a minimum
cut (1 = sink side), and ``flow = sum(sink) - sum(residual sink capacity)`` (the
cancelled ``min(s, t)`` included).

Exactness: residual capacities stay within ``cap(p->q) + cap(q->p) <= 2**31 - 1`` (the
front door checks it), the excess of a node is at most ``s + sum of its in-arcs``
``< 7 * 2**31`` (uint64), and the flow is summed in int64.

References
----------
B. Hong, "A lock-free multi-threaded algorithm for the maximum flow problem", 2008;
V. Vineet and P. J. Narayanan, "CUDA cuts: fast graph cuts on the GPU", CVPR
Workshops 2008; M. Łupińska, "Parallel implementation of flow and matching algorithms",
2011; A. V. Goldberg and R. E. Tarjan, "A new approach to the maximum-flow problem",
JACM 35(4), 1988.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ._kernels import get_kernel, get_module
from .exceptions import DeviceMemoryError

__all__ = ["maxflow_grid_gpu"]

_INF = 0x7FFFFF00  # VC_INF of kernels/common.cuh (passed as a define: they agree)
_INT32_MAX = 2**31 - 1
_MAX_NODES = _INF - 16  # finite heights are <= n < _INF
_TILES = {2: (32, 32, 1), 3: (16, 8, 8)}
# defaults per grid dimension, measured on an H200 (benchmarks/NOTES_gpu_grid.md)
_LOCAL_ITERS = {2: 32, 3: 16}
_SWEEPS_PER_RELABEL = {2: 4, 3: 2}
_INIT_BLOCK = 256
_EXTRA_DEFINES: dict = {}  # benchmarking hook: more compile-time constants (both files)


def _bytes_needed(n: int, k: int, host_inputs: bool) -> int:
    """Device bytes one solve allocates (upper estimate)."""
    per_node = (
        4 * k  # residual capacities
        + 8
        + 4
        + 4  # excess, heights, residual sink capacity
        + 1
        + 1  # residual mask, labels
        + 12
    )  # temporaries of the final flow reduction
    if host_inputs:
        per_node += 8  # uploaded source and sink (the upload of edges becomes rc)
    return n * per_node + (1 << 20)


def _free_device_bytes() -> tuple[int, int]:
    """(free, total) bytes of the current device, counting CuPy's pooled free blocks."""
    import cupy

    free, total = cupy.cuda.runtime.memGetInfo()
    return free + cupy.get_default_memory_pool().free_bytes(), total


def _check_fits(shape: tuple, n: int, k: int, host_inputs: bool) -> None:
    need = _bytes_needed(n, k, host_inputs)
    free, total = _free_device_bytes()
    if need > free:
        raise DeviceMemoryError(
            f"a grid of shape {shape} ({n} nodes, {k} arc planes) needs about "
            f"{need / 2**20:.1f} MiB of device memory for the GPU max-flow, but only "
            f"{free / 2**20:.1f} MiB of {total / 2**20:.1f} MiB are free; use "
            "backend='cpu' or a smaller grid"
        )


def _resident_blocks(kernel: Any, threads: int) -> int:
    """Blocks of ``kernel`` that the whole device holds at once.

    The persistent BFS needs all its blocks resident (a block waits for flags that only
    another block clears), so its grid is sized by the driver's occupancy calculator,
    or, where CuPy does not expose it, by the register and thread limits of an SM with
    one block of margin.
    """
    import cupy

    attrs = cupy.cuda.Device().attributes
    sms = attrs["MultiProcessorCount"]
    try:
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            kernel.kernel.ptr, threads, 0
        )
    except Exception:  # older CuPy: estimate, and keep one block in hand
        warps = -(-threads // 32)
        regs_per_warp = -(-max(1, int(kernel.num_regs)) * 32 // 256) * 256
        by_regs = attrs.get("MaxRegistersPerMultiprocessor", 65536) // (
            regs_per_warp * warps
        )
        by_threads = attrs.get("MaxThreadsPerMultiProcessor", 2048) // (warps * 32)
        per_sm = min(by_regs, by_threads, 16) - 1
    return sms * max(1, int(per_sm))


class _Solver:
    """Device arrays and launch geometry of one solve."""

    def __init__(self, src: Any, snk: Any, rc: Any, shape: tuple, tile: tuple) -> None:
        import cupy

        self.cp = cupy
        self.shape = shape
        self.ndim = len(shape)
        self.k = 2 * self.ndim
        self.n = n = int(np.prod(shape))
        nz, ny, nx = (1, *shape) if self.ndim == 2 else shape
        tx, ty, tz = tile
        self.ntx, self.nty, self.ntz = -(-nx // tx), -(-ny // ty), -(-nz // tz)
        self.ntiles = self.ntx * self.nty * self.ntz
        self.nt = tx * ty * tz
        big = self.k * n > _INT32_MAX
        self.idx = np.int64 if big else np.int32
        defines = {
            "NDIM": self.ndim,
            "TILE_X": tx,
            "TILE_Y": ty,
            "TILE_Z": tz,
            "IDX_T": "long long" if big else "int",
            "VC_INF": hex(_INF),
            # two resident 1024-thread push blocks per SM beat one with more
            # registers (H200: 2 MP 8.6 -> 8.2 ms, 256^3 30 -> 24 ms)
            "PR_MIN_BLOCKS": 2 if self.nt >= 512 else 1,
            **_EXTRA_DEFINES,
        }
        pr = get_module("grid_push_relabel.cu", defines)
        bfs = get_module("grid_bfs.cu", defines)
        self.k_init = get_kernel(pr, "gpr_init")
        self.k_push = get_kernel(pr, "gpr_push_tile")
        self.k_count = get_kernel(pr, "gpr_count_active")
        self.k_finish = get_kernel(pr, "gpr_finish")
        self.k_bfs_init = get_kernel(bfs, "gbfs_init")
        self.k_bfs = get_kernel(bfs, "gbfs_persistent")

        self.src, self.snk, self.rc = src, snk, rc
        self.ex = cupy.empty(n, dtype=cupy.uint64)
        self.h = cupy.empty(n, dtype=cupy.int32)
        self.tcap = cupy.empty(n, dtype=cupy.int32)
        self.mask = cupy.empty(n, dtype=cupy.uint8)
        self.pflags = cupy.empty(self.ntiles, dtype=cupy.int32)
        self.bflags = cupy.empty(self.ntiles, dtype=cupy.int32)
        self.ctrl = cupy.zeros(1, dtype=cupy.int32)
        self.out = cupy.zeros(1, dtype=cupy.int32)
        self.dims = (np.int32(nx), np.int32(ny), np.int32(nz))
        self.tdims = (np.int32(self.ntx), np.int32(self.nty), np.int32(self.ntz))
        self.init_grid = (max(1, min(-(-n // _INIT_BLOCK), 65535)),)
        self.bfs_blocks = min(self.ntiles, _resident_blocks(self.k_bfs, self.nt))

    def init(self) -> None:
        self.k_init(
            self.init_grid,
            (_INIT_BLOCK,),
            (self.src, self.snk, self.ex, self.tcap, self.idx(self.n)),
        )

    def global_relabel(self) -> None:
        """BFS from the sink, then count the active nodes into ``out[0]`` (no sync)."""
        self.k_bfs_init(
            self.init_grid,
            (_INIT_BLOCK,),
            (
                self.rc,
                self.tcap,
                self.h,
                self.mask,
                self.bflags,
                self.ctrl,
                np.int32(self.ntiles),
                self.out,
                self.idx(self.n),
            ),
        )
        self.k_bfs(
            (self.bfs_blocks,),
            (self.nt,),
            (self.mask, self.h, self.bflags, self.ctrl, *self.dims, *self.tdims),
        )
        self.k_count(
            (self.ntiles,),
            (self.nt,),
            (self.ex, self.h, self.pflags, self.out, *self.dims, *self.tdims[:2]),
        )

    def sweeps(self, count: int, local_iters: int) -> None:
        """Push-relabel sweeps: both checkerboard colours, one launch each."""
        grid = ((-(-self.ntx // 2)) * self.nty * self.ntz,)
        for _ in range(count):
            for colour in (0, 1):
                self.k_push(
                    grid,
                    (self.nt,),
                    (
                        self.rc,
                        self.ex,
                        self.h,
                        self.tcap,
                        self.pflags,
                        *self.dims,
                        *self.tdims,
                        np.int32(colour),
                        np.int32(local_iters),
                        np.int32(self.n),
                        self.idx(self.n),
                    ),
                )

    def active(self, stream: Any) -> int:
        return int(self.out.get(stream=stream)[0])

    def result(self, stream: Any) -> tuple[int, Any]:
        """Labels (h < INF) and the flow, sum(sink) - sum(residual sink capacity)."""
        cp = self.cp
        labels = cp.empty(self.n, dtype=cp.uint8)
        acc = cp.zeros(1, dtype=cp.uint64)
        self.k_finish(
            self.init_grid,
            (_INIT_BLOCK,),
            (self.snk, self.tcap, self.h, labels, acc, self.idx(self.n)),
        )
        return int(acc.get(stream=stream)[0]), labels.reshape(self.shape)


def _capture(stream: Any, fn) -> Any:
    """CUDA graph of the launches ``fn()`` makes on ``stream``; None if unsupported."""
    try:
        stream.begin_capture()
    except Exception:  # no graph support in this CuPy / driver
        return None
    try:
        fn()
    finally:
        graph = stream.end_capture()
    return graph


def maxflow_grid_gpu(
    source: Any,
    sink: Any,
    edges: Any,
    *,
    tile: tuple | None = None,
    local_iters: int | None = None,
    sweeps_per_relabel: int | None = None,
    tail_sweeps: int | None = None,
    max_rounds: int | None = None,
    graph: bool = True,
    profile: bool = False,
) -> tuple[int, Any, dict]:
    """Exact max-flow / min-cut of a validated grid graph on the GPU.

    Parameters
    ----------
    source, sink : ndarray or cupy.ndarray, shape (M, N) or (P, M, N), int32
        Terminal capacities (C-contiguous, as :func:`vision_cuts.grid_graph` makes
        them).
    edges : ndarray or cupy.ndarray, shape (K, *grid), int32
        Arc capacities, planes +x, -x, +y, -y (+z, -z); arcs leaving the grid are zero
        and ``edges[k][p] + edges[k ^ 1][p + e_k] <= 2**31 - 1``. Not modified.

    Returns
    -------
    flow : int
        The maximum-flow value.
    labels : cupy.ndarray of uint8, grid shape
        A minimum cut: 1 = sink side (the nodes that reach the sink in the final
        residual graph), 0 = source side.
    stats : dict
        ``backend``, ``time_s`` (wall time, synchronised), ``sweeps`` (push / relabel
        sweeps, two launches each), ``global_relabels``, the tuning knobs used,
        ``active`` (active nodes after each global relabel) and, with ``profile``,
        device milliseconds per phase by CUDA events: ``first_relabel_ms`` (setup and
        the first global relabel), ``push_ms``, ``relabel_ms``, ``result_ms``.

    Other Parameters
    ----------------
    tile : tuple of int, optional
        Tile shape ``(TILE_X, TILE_Y, TILE_Z)``, x first, powers of two up to 32, at
        most 1024 nodes, ``TILE_Z = 1`` in 2-D. Default (32, 32, 1) in 2-D and
        (16, 8, 8) in 3-D.
    local_iters : int, optional
        Push / relabel rounds per tile and launch (default 32 in 2-D, 16 in 3-D).
    sweeps_per_relabel : int, optional
        Sweeps between two global relabels (default 4 in 2-D, 2 in 3-D).
    tail_sweeps : int, optional
        Sweeps between global relabels once fewer than ``n / 1024`` nodes are active
        (default: ``sweeps_per_relabel``).
    max_rounds : int, optional
        Give up (``RuntimeError``) after this many global relabels; default unlimited.
    graph : bool
        Replay each round as a captured CUDA graph (fewer host launches).
    profile : bool
        Time the phases with CUDA events (no graph).

    Raises
    ------
    ValueError
        A grid of more than ``2**31 - 272`` nodes, or a bad tile.
    DeviceMemoryError
        The solve does not fit in the free device memory (a MemoryError).
    """
    import cupy

    shape = tuple(int(v) for v in source.shape)
    ndim = len(shape)
    k = 2 * ndim
    n = math.prod(shape)
    t0 = time.perf_counter()
    if n == 0:
        return (
            0,
            cupy.zeros(shape, dtype=cupy.uint8),
            {
                "backend": "gpu",
                "algorithm": "push-relabel",
                "time_s": 0.0,
                "sweeps": 0,
                "global_relabels": 0,
            },
        )
    if n > _MAX_NODES:
        raise ValueError(
            f"the GPU grid max-flow handles at most {_MAX_NODES} nodes (heights are "
            f"int32), got a grid of shape {shape} with {n} nodes; use backend='cpu'"
        )
    tile = tuple(tile) if tile is not None else _TILES[ndim]
    if (
        len(tile) != 3
        or math.prod(tile) > 1024
        or tile[0] < 2
        or any(v < 1 or v > 32 or v & (v - 1) for v in tile)
        or (ndim == 2 and tile[2] != 1)
    ):
        raise ValueError(
            "tile must be (TILE_X, TILE_Y, TILE_Z), powers of two from 1 to 32 "
            f"(TILE_X >= 2), at most 1024 nodes, TILE_Z == 1 in 2-D; got {tile}"
        )
    local_iters = _LOCAL_ITERS[ndim] if local_iters is None else int(local_iters)
    if sweeps_per_relabel is None:
        sweeps_per_relabel = _SWEEPS_PER_RELABEL[ndim]
    tail_sweeps = sweeps_per_relabel if tail_sweeps is None else int(tail_sweeps)
    if min(local_iters, sweeps_per_relabel, tail_sweeps) < 1:
        raise ValueError(
            f"local_iters, sweeps_per_relabel and tail_sweeps must be >= 1, got "
            f"{local_iters}, {sweeps_per_relabel} and {tail_sweeps}"
        )
    host = not isinstance(edges, cupy.ndarray)
    _check_fits(shape, n, k, host)

    caller = cupy.cuda.get_current_stream()
    stream = cupy.cuda.Stream(non_blocking=True)
    stream.wait_event(caller.record())  # the inputs may still be in the making
    with stream:
        src = cupy.ascontiguousarray(cupy.asarray(source, dtype=cupy.int32)).reshape(-1)
        snk = cupy.ascontiguousarray(cupy.asarray(sink, dtype=cupy.int32)).reshape(-1)
        if host:
            rc = cupy.asarray(np.ascontiguousarray(edges, dtype=np.int32)).reshape(-1)
        else:
            rc = cupy.array(edges, dtype=cupy.int32, order="C", copy=True).reshape(-1)
        solver = _Solver(src, snk, rc, shape, tile)
        marks = []  # profile: (name, event) after each phase

        def mark(name: str) -> None:
            if profile:
                ev = cupy.cuda.Event()
                ev.record(stream)
                marks.append((name, ev))

        mark("start")
        solver.init()
        solver.global_relabel()
        mark("first_relabel")
        active = solver.active(stream)
        relabels, sweeps, history = 1, 0, [active]

        def one_round(count: int) -> None:
            solver.sweeps(count, local_iters)
            mark("push")
            solver.global_relabel()
            mark("relabel")

        graphs: dict = {}  # sweeps per round -> captured CUDA graph (None: unsupported)
        while active > 0:
            if max_rounds is not None and relabels >= max_rounds:
                raise RuntimeError(
                    f"GPU grid max-flow did not converge in {relabels} global relabels "
                    f"({sweeps} sweeps, {active} active nodes left), grid {shape}"
                )
            count = tail_sweeps if active * 1024 < n else sweeps_per_relabel
            if graph and not profile and count not in graphs:
                graphs[count] = _capture(stream, lambda c=count: one_round(c))
            if graphs.get(count) is not None:
                graphs[count].launch(stream)
            else:
                one_round(count)
            active = solver.active(stream)
            sweeps += count
            relabels += 1
            history.append(active)
        flow, labels = solver.result(stream)
        mark("result")
        caller.wait_event(stream.record())
    t1 = time.perf_counter()
    stats = {
        "backend": "gpu",
        "algorithm": "push-relabel (tiled, checkerboard) + GPU BFS global relabel",
        "time_s": t1 - t0,
        "sweeps": sweeps,
        "global_relabels": relabels,
        "local_iters": local_iters,
        "sweeps_per_relabel": sweeps_per_relabel,
        "tail_sweeps": tail_sweeps,
        "tile": tile,
        "graph": any(g is not None for g in graphs.values()),
        "bfs_blocks": solver.bfs_blocks,
        "active": history,
    }
    if profile:  # device milliseconds per phase, summed over the rounds
        phases: dict = {}
        rounds = []
        for (_, e0), (name, e1) in zip(marks, marks[1:], strict=False):
            ms = cupy.cuda.get_elapsed_time(e0, e1)
            phases[name] = phases.get(name, 0.0) + ms
            if name == "push":
                rounds.append(round(ms, 3))
        stats.update({f"{k}_ms": v for k, v in phases.items()})
        stats["push_ms_rounds"] = rounds
    return flow, labels, stats
