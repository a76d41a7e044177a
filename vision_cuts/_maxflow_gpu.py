"""GPU grid max-flow: tiled push-relabel with the global relabel on the GPU (CuPy).

The graph stays on the device from the upload to the labels: structure-of-arrays
residual capacities (one int32 plane per direction), a uint64 excess, an int32 residual
sink capacity and int32 heights per node. The kernels are in ``kernels/``:

* ``grid_push_relabel.cu``: terminal cancellation (``min(s, t)`` goes straight
  through), the tiled push-relabel launch (one block per tile of one checkerboard
  colour, up to ``local_iters`` push / relabel rounds per tile in shared memory; pushes
  across the tile border go to the idle neighbour tile in global memory; optionally a
  persistent grid of resident blocks instead, ``gpr_push_persist``), the active-node
  count (where the BFS launch does not count), and the final labels and flow.
* ``grid_bfs.cu``: the global relabel, a BFS from the sink over residual arcs by tiled
  chaotic relaxation in one persistent launch (each resident block owns a fixed set of
  tiles, relaxes the flagged ones to their fixed point in shared memory and flags the
  neighbour tiles whose border heights dropped, until no tile is flagged). Unreached
  nodes get height ``INF``: they can never reach the sink again (gap). Its tiles
  (``bfs_tile``) are smaller than the push tiles: more resident blocks hide more of the
  latency of each tile visit. In 3-D by default (``_BFS_MODE``) the launch is
  ``gbfs_fused``, which first sets and relaxes the initial heights of all tiles (then
  a grid barrier) and ends by counting the active nodes and flagging the push tiles
  that hold them. In the tail of large 2-D solves the relabel is incremental: the
  distances of the last relabel stay where no changed arc lies on every shortest
  path (``gbfs_invalidate`` sets the others to ``INF``), and the BFS restarts from
  them and from the tiles the pushes touched. In 2-D grids of fewer than 2**21 nodes
  (with diagonals, below 2**24 where the regions fit) the full relabels are
  level-synchronous instead (``gbfs_level``): one resident block a SM owns a region of
  the grid and its halo, holds the residual arcs of 32 nodes a word as bit masks
  (``gbfs_wmask``), runs a whole BFS level of the region as a few logic operations a
  word and one barrier, and meets the other blocks at a grid barrier every
  ``_BFS_LEVEL_L`` levels to exchange the halos (two words a thread; 8-connected grids
  too large for that take three and fewer levels a phase: ``_level_plan``).

Loop: global relabel; while some node with excess can reach the sink, run
``sweeps_per_relabel`` sweeps (both colours) and relabel again. One round (the sweeps
and the relabel, a fixed sequence of launches) is captured once as a CUDA graph and
replayed. The host queues the next round before it reads the active count of the last
one (copied to pinned memory); the kernels of a round queued after the count reached 0
return at once. The solver's buffers and graphs are kept (per thread, for the last
grid shape) and reused by the next call of the same shape. At the end
``labels = (h < INF)``: the nodes that reach the sink in the residual graph, a minimum
cut (1 = sink side), and ``flow = sum(sink) - sum(residual sink capacity)`` (the
cancelled ``min(s, t)`` included).

Modules: this one plans a solve (tiles, level-BFS regions, schedule), owns its device
arrays and runs its rounds; the launches of a global relabel are in
:mod:`vision_cuts._grid_relabel_gpu`, those of the push sweeps in
:mod:`vision_cuts._grid_push_gpu`, and the pinned uploads of host arrays in
:mod:`vision_cuts._staging_gpu`.

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

import collections
import dataclasses
import functools
import math
import threading
import time
from typing import Any

import numpy as np

from ._grid_handover_gpu import cpu_budget, finish_on_cpu, fits_cpu
from ._grid_push_gpu import PushSweeps
from ._grid_relabel_gpu import _INF, _INIT_BLOCK, GlobalRelabel
from ._kernels import capture_graph, get_kernel, get_module, sm_count
from ._staging_gpu import staging
from .exceptions import DeviceMemoryError

__all__ = ["maxflow_grid_gpu"]

_INT32_MAX = 2**31 - 1
_MAX_NODES = _INF - 16  # finite heights are <= n < _INF
_TILES = {2: (32, 32, 1), 3: (16, 8, 8)}
_BFS_TILES = {2: (16, 16, 1), 3: (16, 4, 4)}  # tiles of the global relabel
# grids with diagonal arcs (8-connected 2-D, 18- and 26-connected 3-D): push tile,
# local rounds and sweeps a relabel per number of planes. A push tile holds K shared
# planes of residual capacities within the 48 KiB a block may declare, so 3-D tiles
# are smaller. 3-D relabels by the plain tile BFS (gbfs_init, gbfs_persistent,
# gpr_count_active, BFS tiles _BFS_TILES: the fused and incremental relabels have face
# arcs only); 8-connected 2-D grids by the level BFS (below _BFS_LEVEL_DIAG_MAX_NODES)
# and two push colours (_DIAG_CORNERS). Chosen on an H100 from the settings of
# benchmarks/tune_grid_diagonal.py (benchmarks/NOTES_gpu_grid.md, diagonal rounds):
# astronaut 8-connected 2 MP 9.3 ms (16.6 with the tile BFS and four colours), 0.3 MP
# 2.9 ms, 4 MP 16.7 ms; 128^3 volumes, 26-connected 10.4 ms (18.1 with the first
# guess), 18-connected 6.0 ms (8.8)
# 8-connected tail (fewer than n / 1024 nodes active): 4 sweeps a relabel, pushed by
# the persistent grid (gpr_push_persist). H200, 2 MP pictures, median of 9, three
# passes: astronaut 9.30-9.35 -> 9.23-9.28 ms, coffee 7.04 -> 6.62-6.68, rocket
# 6.19-6.27 -> 5.94-5.99, immunohistochemistry 21.25-21.41 -> 20.15-20.70, chelsea
# level; astronaut 4 MP 16.5-16.8 -> 15.9-16.2 (NOTES_gpu_grid.md, fifth diagonal round)
_DIAG_SCHEDULE = {
    8: {
        "tile": (32, 8, 1),
        "local_iters": 16,
        "sweeps_per_relabel": 3,
        "tail_sweeps": 4,
        "persist_below": 1 / 1024,
    },
    18: {"tile": (8, 8, 8), "local_iters": 16, "sweeps_per_relabel": 2},
    26: {"tile": (8, 4, 4), "local_iters": 8, "sweeps_per_relabel": 2},
}
# 8-connected grids: two checkerboard colours a sweep, the arcs across the tile
# corners pushed by a launch of their own (PR_CORNERS of grid_push_relabel.cu), instead
# of four colours
_DIAG_CORNERS = True
_RESULT_SIDE = True  # the result on a stream of its own (see _Solver.result)
# 8-connected 2-D grids (two colours, corner pushes): the sweeps of the rounds that do
# not push by the persistent grid (above persist_below active nodes) in one launch of
# gpr_push_claim, whose blocks claim the tile runs and corner groups one at a time and
# start each once the runs it must follow have ended, instead of a launch a colour and
# a corner launch a sweep; not in the tail rounds, whose few runs pay for claiming every
# slot (benchmarks/NOTES_gpu_grid.md, thirteenth round). Where a colour launch holds
# _CLAIM_WAVES[0] to _CLAIM_WAVES[1] waves of the resident push blocks (vc_colour_slots
# / resident blocks; squares of 705 to 1624 nodes a side on 132 SMs, 1920 x 1080
# frames): there the ends of the colour launches cost more than the claims; below, a
# launch runs in about one wave, and above, the claims cost more. H200, alternated in
# one process, off -> on (ms; fifteenth round):
# astronaut 1 MP (3.8 waves) 5.02-5.15 -> 4.85-5.04, 2 MP (6.2) 8.58-8.65 -> 8.35-8.37,
# coffee / chelsea / immunohistochemistry / rocket / camera 2 MP 1-3 % faster each; 3 MP
# (9.2) -0.7 / +0.5 / +0.5 %, 0.3 MP (1.2) +2-8 %, 4 MP (12.1) +2 %; three machines of
# the fourteenth round alike
_PUSH_CLAIM = True
_CLAIM_WAVES = (2.0, 8.0)
_STATIC_SMEM = 48 * 1024  # bytes of static shared memory a block may declare
# 2-D option (off: no faster on an H200, benchmarks/NOTES_gpu_grid.md, seventh round):
# the bit-parallel BFS (gbfs_warp), one warp a 32 x 32 BFS tile, _BFS_WARPS a block
_BFS_WARP = False
# 2-D grids of fewer than _BFS_LEVEL_MAX_NODES nodes: the level-synchronous
# bit-parallel BFS by regions (gbfs_level) for the full global relabels (H200: 0.3 MP
# 2.39-2.41 against 2.72-2.75 ms, 2 MP 5.76-5.90 against 6.20-6.35; at 4 MP, where
# the incremental relabels are on, 9.90 against 9.76); levels a phase between two
# grid barriers (1 to 31)
_BFS_LEVEL = True
_BFS_LEVEL_MAX_NODES = 1 << 21
# with diagonals (8-connected; no incremental relabels there) the level BFS replaces
# the tile BFS below this size, where its regions fit (_level_plan: on 132 SMs up to
# about 9.5 M nodes; H200, 3000 x 3000 astronaut 58.6 -> 41.4 ms, 4096 x 2160 48.6 ->
# 35.0 ms with three words a thread)
_BFS_LEVEL_DIAG_MAX_NODES = 1 << 24
_BFS_LEVEL_L = 31
_LV_NT = 1024  # gbfs_level's block (LV_NT)
_LV_NPER = 2  # its words a thread at most (LV_NPER)
# the levels a phase reaches kept as bit planes in shared memory and every height
# written once after the last phase (LV_DEFER of grid_bfs.cu), instead of scattered
# stores at each phase's end that the block's next phase waits for (H200, 8-connected
# 2 MP astronaut 8.9 -> 8.6 ms, 4 MP 15.4 -> 14.6, immunohistochemistry 19.2 -> 18.2)
_LV_DEFER = True
_LV_DPL = 11  # LV_DPL: the bit planes of an own word's levels
# diagonal grids whose regions do not fit two words a thread (above about 4 MP on 132
# SMs) take three (64 registers: a few spills; 48 KiB of frontier buffers) and the
# most levels a phase, down to _LV_WIDE_MIN_L, that fit, instead of the tile BFS (H200,
# 8-connected: 2828 x 2828 astronaut 44.7 -> 32.3 ms, coffee 38.1 -> 28.8, 2400 x 2400
# 33.7 -> 23.7); where two words fit they stay (2000 x 2000: 16.0 against 16.8 ms);
# where three do not, four (168 bytes of stack, 64 KiB; 3400 x 3400 astronaut 74.0 ->
# 67.4 ms, 4000 x 3000 77 -> 70, coffee 51.3 -> 50.0; slower than three where three fit:
# 2828 x 2828 39.8 against 31.6); about 16 M nodes and above keep the tile BFS
_LV_NPER_WIDE = (3, 4)
_LV_WIDE_MIN_L = 16
# the push kernel keeps gbfs_level's bit masks (push tiles 32 nodes wide), so that
# gbfs_wmask runs only for a solve's first relabel and gbfs_level counts the active
# nodes (no gpr_count_active); False: gbfs_wmask and the count at every relabel
_TRACK_MASKS = True
_BFS_WARPS = 8
# defaults per grid dimension, measured on an H200 (benchmarks/NOTES_gpu_grid.md)
_LOCAL_ITERS = {2: 32, 3: 16}
_SWEEPS_PER_RELABEL = {2: 2, 3: 1}
# face-only grids: the tail pace (``tail_sweeps`` a relabel) also in every round after
# the first ``tail_after``, not only once fewer than n / 1024 nodes are active. 6-
# connected volumes end within four or five relabels at one sweep a relabel, while
# graphs with long paths (Ishikawa's stereo graphs, whose flow runs up the label axis,
# and 3-D multi-label moves) take dozens of rounds and do better with more sweeps
# between their dear relabels (H200: motorcycle's Ishikawa graph 259 -> 170 ms, teddy
# 82 -> 47, the other Middlebury sets 20-30 % less; 96^3 x 32-label moves 7-11 %
# less; 64^3 to 256^3 volume segmentations unchanged; benchmarks/NOTES_gpu_grid.md)
_FACE_TAILS: dict = {3: {"tail_sweeps": 4, "tail_after": 3}}
_NEVER = 1 << 62
_SMALL_2D = 1 << 20  # 2-D grids below this many nodes: one push block a SM
# 2-D grids below this many nodes (where the level BFS relabels): push tiles of 32 x 8
# (a quarter of the nodes a launch and a barrier), 16 local rounds (32 in the tail),
# 2 sweeps a relabel. H200, four pictures at 0.3 / 1 / 1.5 / 2 MP: 18 % less time in
# sum than 32 x 32 tiles, 32 rounds (3 sweeps below 2**20 nodes), faster on every one
# of the 16 (benchmarks/NOTES_gpu_grid.md, tenth round); from 2**21 nodes 32 x 32
# stays faster (4 MP 9.9 against 10.8 ms with 32 x 16)
_SMALL_2D_BELOW = 1 << 21
_SMALL_2D_SCHEDULE = {"tile": (32, 8, 1), "local_iters": 16, "tail_iters": 32}
# diagonal grids: the push loops over an active node's admissible arcs (see _kernels)
_BITLOOP = True
_EXTRA_DEFINES: dict = {}  # benchmarking hook: more compile-time constants (both files)
# rounds in flight: the host queues the next round before it reads the active count of
# the last one (the kernels of a round after the count reached 0 return at once); 1 =
# read the count after every round
_PIPELINE = 2
# path walks (gpr_walk) after the global relabels of the rounds that start with fewer
# than this fraction of the nodes active: off by default, they cost more than they
# save (benchmarks/NOTES_gpu_grid.md, v12)
_WALK_BELOW = 0.0
# global relabel launches per grid dimension: 0 = gbfs_init, gbfs_persistent and
# gpr_count_active; otherwise gbfs_fused with these mode bits (init and count
# launched where their bit is missing): BFS_INIT (1) the first pass starts from the
# terminal arcs in the BFS launch, BFS_COUNT (2) the active count at its end, BFS_AGG
# (4) one flag and pending update a tile visit, BFS_CLAIM (8) claims by one exchange,
# BFS_POLL (16) pending read together with the flags, BFS_CHAIN (32, with 4) a visit
# goes on with a neighbour tile it would flag. 3-D: 1 + 2 (H200: 128^3 1.56 -> 1.32
# ms, 256^3 7.78 -> 7.07); 2-D: 0 (the fused launch was no faster there; the other
# bits measured no faster anywhere; benchmarks/NOTES_gpu_grid.md, v13)
_BFS_MODE = {2: 0, 3: 3}
# persistent push launches (gpr_push_persist, one resident grid reading the tile
# flags, instead of one block a tile) in the rounds that start with fewer than this
# fraction of the nodes active; 0 = never (the default: measured slower, v13)
_PERSIST_BELOW = 0.0
# incremental global relabels (gbfs_seed, gbfs_invalidate, then the BFS from the
# remaining exact distances) after the rounds that start with fewer than this fraction
# of the nodes active, by default in 2-D grids of at least _INCR_MIN_NODES nodes (any
# grid with bfs_mode 0 and no walks when asked for). H200: 4 MP 10.2 -> 9.7 ms, 8 MP
# 18.4 -> 17.2; no gain at 2 MP and below, where the extra launches and the
# invalidation pass cost what the shorter BFS saves (benchmarks/NOTES_gpu_grid.md)
_INCR_BELOW = 0.001
_INCR_MIN_NODES = 1 << 21
_REUSE = True  # keep the last solver (buffers, CUDA graphs) of this thread for reuse
_NO_BAD = 2**63 - 1  # gpr_validate's "nothing found"
_RING = 64  # slots of the pinned buffer the active counts are copied into
_cache = threading.local()


def _bytes_needed(n: int, k: int, host_inputs: bool) -> int:
    """Device bytes one solve allocates (upper estimate)."""
    per_node = (
        4 * k  # residual capacities (the solver's copy of the edges)
        + 8  # the solver's copies of source and sink
        + 8
        + 4
        + 4  # excess, heights, residual sink capacity
        + 4  # distances of the last global relabel (incremental relabels)
        + 1  # labels
        + 2  # bit masks of the 2-D BFS (K + 2 bits a node, words padded per row) and
        # the level BFS's publications (4 bits a node)
        + 12
    )  # temporaries of the final flow reduction
    del host_inputs  # inputs are copied straight into the solver's own buffers
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


def _level_geometry(
    nx: int, ny: int, gmax: int, levels: int, nt: int = 1024, nper: int = 2
) -> tuple | None:
    """Regions of gbfs_level: (cw, ch, regions across, regions) for a grid of nx x ny
    nodes on at most ``gmax`` resident blocks, each region of cw words (32 nodes) x ch
    rows grown by a word and ``levels`` rows on each side: as few grown words as can
    be (a level's work), at most nt * nper (threads a block, words a thread); None if
    no such split exists."""
    nwr = -(-nx // 32)
    best = None
    for cw in range(1, nwr + 1):
        rxn = -(-nwr // cw)
        if rxn > gmax:
            continue
        ch = -(-ny // max(1, gmax // rxn))
        ryn = -(-ny // ch)
        ext = (cw + 2) * (ch + 2 * levels)
        if ext > nt * nper:
            continue
        key = (ext, rxn * ryn)
        if best is None or key < best[0]:
            best = (key, (cw, ch, rxn, rxn * ryn))
    return None if best is None else best[1]


def _level_plan(
    nx: int, ny: int, gmax: int, levels: int, diag: bool, nt: int = _LV_NT
) -> tuple | None:
    """Words a thread, levels a phase and regions (as :func:`_level_geometry`) of
    gbfs_level for an nx x ny grid on at most ``gmax`` blocks: ``_LV_NPER`` words and
    ``levels`` levels where they fit; else, with diagonals, the first of the
    ``_LV_NPER_WIDE`` widths with the most levels from ``levels`` down to
    ``_LV_WIDE_MIN_L`` that fit; None where nothing fits (the tile BFS runs)."""
    geo = _level_geometry(nx, ny, gmax, levels, nt, _LV_NPER)
    if geo is not None:
        return _LV_NPER, levels, geo
    if diag:
        for nper in _LV_NPER_WIDE:
            for lv in range(levels, _LV_WIDE_MIN_L - 1, -1):
                geo = _level_geometry(nx, ny, gmax, lv, nt, nper)
                if geo is not None:
                    return nper, lv, geo
    return None


def _level_smem(nt: int, nper: int, cw: int, ch: int, defer: bool) -> int:
    """Bytes of dynamic shared memory of a gbfs_level block of ``nt`` threads: its two
    frontier buffers of LV_S = 2 * nt * nper words and, with LV_DEFER, the _LV_DPL bit
    planes of its region's cw * ch own words."""
    return (2 * (2 * nt * nper) + (_LV_DPL * cw * ch if defer else 0)) * 4


@functools.cache
def _smem_optin_of(device: int) -> int:
    import cupy

    attrs = cupy.cuda.Device(device).attributes
    return int(attrs.get("MaxSharedMemoryPerBlockOptin", 48 * 1024))


def _smem_optin() -> int:
    """Bytes of shared memory a block of the current device may use (opt-in)."""
    import cupy

    return _smem_optin_of(cupy.cuda.Device().id)


def _resident_blocks(kernel: Any, threads: int, smem: int = 0) -> int:
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
            kernel.kernel.ptr, threads, smem
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


class _Solver(GlobalRelabel, PushSweeps):
    """Device arrays, kernels and launch geometry of one solve; its global relabel
    (:class:`GlobalRelabel`) and push sweeps (:class:`PushSweeps`) are in modules of
    their own."""

    def __init__(
        self, shape: tuple, tile: tuple, bfs_tile: tuple, k: int | None = None
    ) -> None:
        import cupy

        self.cp = cupy
        self.shape = shape
        self.ndim = len(shape)
        self.k = 2 * self.ndim if k is None else int(k)
        self.diag = self.k > 2 * self.ndim  # diagonal arcs (see _DIAG_SCHEDULE)
        self.n = int(np.prod(shape))
        self.tile = tile
        self._tiling(tile, bfs_tile)
        bfs_defines = self._kernels(tile, bfs_tile)
        self._level_bfs(bfs_defines)
        self._buffers()
        self._launch_sizes()

    def _tiling(self, tile: tuple, bfs_tile: tuple) -> None:
        """Tile counts of the push (``tile``) and of the global relabel
        (``bfs_tile``), and the index type."""
        nz, ny, nx = (1, *self.shape) if self.ndim == 2 else self.shape
        self.nxyz = (nx, ny, nz)
        tx, ty, tz = tile
        self.ntx, self.nty, self.ntz = -(-nx // tx), -(-ny // ty), -(-nz // tz)
        self.ntiles = self.ntx * self.nty * self.ntz
        self.nt = tx * ty * tz
        bx, by, bz = bfs_tile
        self.bntx, self.bnty, self.bntz = -(-nx // bx), -(-ny // by), -(-nz // bz)
        self.bntiles = self.bntx * self.bnty * self.bntz
        self.bnt = bx * by * bz
        self.big = self.k * self.n > _INT32_MAX
        self.idx = np.int64 if self.big else np.int32
        # 8-connected: two colours and the corner pushes (see _DIAG_CORNERS)
        self.corners = _DIAG_CORNERS and self.diag and self.ndim == 2
        # tiles of one colour (vc_colour_slots): two colours, or 2**ndim with diagonals
        # (but for the corner pushes)
        if self.diag and not self.corners:
            self.colours = tuple(range(2**self.ndim))
            self.slots = (-(-self.ntx // 2)) * (-(-self.nty // 2)) * (-(-self.ntz // 2))
        else:
            self.colours = (0, 1)
            self.slots = (-(-self.ntx // 2)) * self.nty * self.ntz

    def _kernels(self, tile: tuple, bfs_tile: tuple) -> dict:
        """Compile (or fetch) both modules for this geometry and take their
        kernels; returns the BFS module's defines."""
        tx, ty, tz = tile
        bx, by, bz = bfs_tile
        small = self.ndim == 2 and self.n < _SMALL_2D
        defines = {
            "NDIM": self.ndim,
            "VC_PLANES": self.k,
            "TILE_X": tx,
            "TILE_Y": ty,
            "TILE_Z": tz,
            "IDX_T": "long long" if self.big else "int",
            "VC_INF": hex(_INF),
            "PR_CORNERS": int(self.corners),
            # two resident 1024-thread push blocks per SM beat one with more
            # registers (H200: 2 MP 8.6 -> 8.2 ms, 256^3 30 -> 24 ms), except in 2-D
            # grids of fewer than 2**20 nodes, whose launches hold about a tile a SM
            # (H200, 0.3 MP: 2.97 -> 2.71 ms; four pictures 7-11 % faster); 8-connected
            # tiles of 256 nodes: four (64 registers instead of 78; H100, 2 MP 9.9 ->
            # 9.3 ms, 4 MP 18.0 -> 16.7, 0.3 MP 3.0 -> 2.9), and five (48 registers)
            # from 2**20 nodes (H200, six 2-4 MP energies 2.2 % faster in all, 0.3 MP
            # 3-8 % slower: NOTES_gpu_grid.md, eleventh round)
            "PR_MIN_BLOCKS": self._push_min_blocks(small),
            # diagonal grids push along an active node's admissible arcs by their bits
            # (PR_BITLOOP of grid_push_relabel.cu; H200: 8-connected 2 MP 2-5 %
            # faster, 26-connected 128^3 10.0 -> 7.5 ms); with 4 or 6 planes the
            # unrolled loop is the faster (2 MP 4-connected 4.7 against 5.1 ms)
            "PR_BITLOOP": int(_BITLOOP and self.diag),
            **_EXTRA_DEFINES,
        }
        self.push_min_blocks = int(defines["PR_MIN_BLOCKS"])
        self.bitloop = bool(int(defines["PR_BITLOOP"]))
        pr = get_module("grid_push_relabel.cu", defines)
        # gbfs_level's block and words a thread (the host sizes its regions by them)
        self.lv_plan = self._plan_level()
        nper = self.lv_plan[0] if self.lv_plan is not None else _LV_NPER
        bfs_defines = {
            "LV_NT": _LV_NT,
            "LV_NPER": nper,
            "LV_DEFER": int(self._level_defer()),
            **defines,
        }
        self.lv_defer = bool(int(bfs_defines["LV_DEFER"]))
        bfs = get_module(
            "grid_bfs.cu", {**bfs_defines, "TILE_X": bx, "TILE_Y": by, "TILE_Z": bz}
        )
        self.k_init = get_kernel(pr, "gpr_init")
        self.k_push = get_kernel(pr, "gpr_push_tile")
        self.k_push_persist = get_kernel(pr, "gpr_push_persist")
        self.k_corners = get_kernel(pr, "gpr_push_corners")
        self.claim = _PUSH_CLAIM and self.corners and self._claim_waves()
        self.k_push_claim = get_kernel(pr, "gpr_push_claim") if self.claim else None
        self.k_count = get_kernel(pr, "gpr_count_active")
        self.k_finish = get_kernel(pr, "gpr_finish")
        self.k_validate = get_kernel(pr, "gpr_validate")
        self.k_walk = get_kernel(pr, "gpr_walk")
        self.k_reverse = get_kernel(pr, "gpr_reverse")
        self.k_bfs_init = get_kernel(bfs, "gbfs_init")
        # 2-D with 32 x 32 BFS tiles: the bit-parallel BFS, one warp a tile
        self.bfs_warp = (
            _BFS_WARP
            and self.ndim == 2
            and tuple(bfs_tile) == (32, 32, 1)
            and not self.diag
        )
        self.k_bfs = get_kernel(
            bfs, "gbfs_warp" if self.bfs_warp else "gbfs_persistent"
        )
        self.bfs_threads = 32 * _BFS_WARPS if self.bfs_warp else self.bnt
        self.k_wmask = get_kernel(bfs, "gbfs_wmask")
        self.k_level = get_kernel(bfs, "gbfs_level")
        self.k_bfs_fused = get_kernel(bfs, "gbfs_fused")
        self.k_seed = get_kernel(bfs, "gbfs_seed")
        self.k_inval = get_kernel(bfs, "gbfs_invalidate")
        return bfs_defines

    def _level_defer(self) -> bool:
        """Whether gbfs_level keeps the levels a phase reaches in shared memory and
        writes every height after its last phase (LV_DEFER): where its planes fit a
        block's shared memory beside the frontier buffers."""
        if not _LV_DEFER or self.lv_plan is None:
            return False
        nper, _, (cw, ch, _, _) = self.lv_plan
        return _level_smem(_LV_NT, nper, cw, ch, True) <= _smem_optin()

    def _plan_level(self) -> tuple | None:
        """2-D: words a thread, levels a phase and regions of the level BFS
        (:func:`_level_plan`) for one block a SM, or None (the tile BFS)."""
        below = _BFS_LEVEL_DIAG_MAX_NODES if self.diag else _BFS_LEVEL_MAX_NODES
        if not (_BFS_LEVEL and self.ndim == 2 and self.n < below):
            return None
        levels = int(_BFS_LEVEL_L)
        if not 1 <= levels <= 31:
            raise ValueError(f"_BFS_LEVEL_L must be in [1, 31], got {levels}")
        nx, ny, _ = self.nxyz
        return _level_plan(nx, ny, sm_count(), levels, self.diag)

    def _level_bfs(self, bfs_defines: dict) -> None:
        """2-D: the level-synchronous BFS for the full global relabels
        (``self.level``, None where it is not used), where its regions fit the
        resident blocks, and whether the push kernel keeps its bit masks."""
        nx, ny, _ = self.nxyz
        self.wnx = -(-nx // 32)  # row words of the bit masks
        self.level = None
        self.lv_nper = int(bfs_defines["LV_NPER"])
        if self.lv_plan is not None:
            levels = self.lv_plan[1]
            self.lv_nt = int(bfs_defines["LV_NT"])
            # one block a SM: a level's time is the issue of its block's warps
            sms = sm_count()
            gmax = min(sms, _resident_blocks(self.k_level, self.lv_nt, 48 * 1024))
            nper = self.lv_nper
            geo = _level_geometry(nx, ny, gmax, levels, self.lv_nt, nper)
            if geo is not None:
                cw, ch, rxn, regions = geo
                defer = bool(int(bfs_defines.get("LV_DEFER", 0)))
                smem = _level_smem(self.lv_nt, nper, cw, ch, defer)
                if smem > _STATIC_SMEM - 1024:  # (the kernel's own words on top)
                    self.k_level.max_dynamic_shared_size_bytes = smem
                if regions <= _resident_blocks(self.k_level, self.lv_nt, smem):
                    self.level = (cw, ch, rxn, regions, levels, smem)
        # push tiles 32 nodes wide keep the level BFS's bit masks up to date (a warp
        # is a row word; VC_MASKS of grid_push_relabel.cu), so gbfs_wmask runs only
        # for the first relabel of a solve (and after path walks), and the level BFS
        # counts the active nodes itself (the excess plane)
        self.track = _TRACK_MASKS and self.level is not None and self.tile[0] == 32
        self.fresh = False  # the masks are those of the present residual graph

    def _buffers(self) -> None:
        """The device arrays of a solve and the pinned ring of active counts."""
        cupy, n = self.cp, self.n
        self.key = None
        self.graphs: dict = {}  # (sweeps, local iters) -> captured CUDA graph or None
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.src = cupy.empty(n, dtype=cupy.int32)
        self.snk = cupy.empty(n, dtype=cupy.int32)
        self.rc = cupy.empty(self.k * n, dtype=cupy.int32)
        self.ex = cupy.empty(n, dtype=cupy.uint64)
        self.h = cupy.empty(n, dtype=cupy.int32)
        self.d = cupy.empty(n, dtype=cupy.int32)  # distances of the last relabel
        self.tcap = cupy.empty(n, dtype=cupy.int32)
        self.pflags = cupy.empty(self.ntiles, dtype=cupy.int32)
        self.touched = cupy.zeros(self.ntiles, dtype=cupy.int32)  # push tiles run
        # gpr_push_claim: the last phase each push tile and sweep each tile corner
        # ended, and the claim ticket
        corners = (self.ntx - 1) * (self.nty - 1) if self.claim else 0
        self.tdone = cupy.empty(self.ntiles if self.claim else 0, dtype=cupy.int32)
        self.cdone = cupy.empty(max(corners, 1) if self.claim else 0, dtype=cupy.int32)
        self.ticket = cupy.zeros(1, dtype=cupy.int32)
        self.bflags = cupy.empty(self.bntiles, dtype=cupy.int32)
        self.iflags = cupy.zeros(self.bntiles, dtype=cupy.int32)  # gbfs_invalidate
        # BFS pending, grid barrier of gbfs_fused (2), gbfs_invalidate pending
        self.ctrl = cupy.zeros(4, dtype=cupy.int32)
        self.out = cupy.zeros(1, dtype=cupy.int32)  # active nodes after the last count
        self.cnt = cupy.zeros(2, dtype=cupy.int32)  # count accumulator and ticket
        self.pstats = cupy.zeros(8, dtype=cupy.int32)  # PR_STATS counters (profiling)
        # gbfs_warp, gbfs_level: residual and sink arcs as bits, a word per 32 nodes
        # of a row
        ny = self.nxyz[1]
        self.nwords = ny * self.wnx if self.bfs_warp or self.level else 0
        self.mask = cupy.empty((self.k + 2) * self.nwords, dtype=cupy.uint32)
        self.nwm = np.int32(self.nwords if self.track else 0)  # the push kernel's
        # gbfs_level: published visited sets and frontiers (two parities), its control
        self.pub = cupy.empty(4 * self.nwords if self.level else 0, dtype=cupy.uint32)
        self.lctrl = cupy.zeros(8, dtype=cupy.int32)
        self.acc = cupy.zeros(1, dtype=cupy.uint64)  # flow
        # gpr_init: the total excess and its ticket (left zeroed), and whether the
        # total fits in 32 bits (the push tiles' excess then does: PR_NARROW)
        self.etot = cupy.zeros(2, dtype=cupy.uint64)
        self.narrow = cupy.zeros(1, dtype=cupy.int32)
        self.bad = cupy.empty(3 + self.k // 2, dtype=cupy.int64)  # gpr_validate
        self.bad_pinned = cupy.cuda.alloc_pinned_memory(self.bad.nbytes)
        self.bad_host = np.frombuffer(
            self.bad_pinned, dtype=np.int64, count=self.bad.size
        )
        self.pinned = cupy.cuda.alloc_pinned_memory(4 * _RING)
        self.host = np.frombuffer(self.pinned, dtype=np.int32, count=_RING)

    def _launch_sizes(self) -> None:
        """Kernel arguments of the geometry and the grid sizes of the launches."""
        n = self.n
        self.dims = tuple(np.int32(v) for v in self.nxyz)
        self.tdims = (np.int32(self.ntx), np.int32(self.nty), np.int32(self.ntz))
        self.btdims = (np.int32(self.bntx), np.int32(self.bnty), np.int32(self.bntz))
        self.init_grid = (max(1, min(-(-n // _INIT_BLOCK), 65535)),)
        self.bfs_blocks = min(
            -(-self.bntiles // _BFS_WARPS) if self.bfs_warp else self.bntiles,
            _resident_blocks(self.k_bfs, self.bfs_threads),
        )
        self.fused_blocks = min(
            self.bntiles, _resident_blocks(self.k_bfs_fused, self.bnt)
        )
        self.inval_blocks = min(self.bntiles, _resident_blocks(self.k_inval, self.bnt))
        # push tiles as the BFS launch counts them (BFS_COUNT): counts and log2 sides
        self.ptdims = self.tdims + tuple(
            np.int32(int(v).bit_length() - 1) for v in self.tile
        )
        self.persist_blocks = min(
            self.slots, _resident_blocks(self.k_push_persist, self.nt)
        )
        self.claim_blocks = (
            _resident_blocks(self.k_push_claim, self.nt) if self.claim else 0
        )

    def _claim_waves(self) -> bool:
        """Whether a colour launch of push tiles holds _CLAIM_WAVES[0] to
        _CLAIM_WAVES[1] waves of the resident push blocks (see _PUSH_CLAIM)."""
        waves = self.slots / max(1, _resident_blocks(self.k_push, self.nt))
        return _CLAIM_WAVES[0] <= waves < _CLAIM_WAVES[1]

    def _push_min_blocks(self, small: bool) -> int:
        """PR_MIN_BLOCKS of the push kernel (see the defines)."""
        if self.diag:
            if not (self.corners and self.nt <= 256):
                return 1
            return 4 if small else 5
        return 2 if self.nt >= 512 and not small else 1

    def load(self, source: Any, sink: Any, edges: Any, host: bool) -> None:
        """The inputs on the device (on the current stream): the edges copied into
        the residual capacities, the terminal capacities read in place where they are
        already contiguous int32 device arrays (``src_in``, ``snk_in``: kernels only
        read them; ``release`` drops them after the solve), else copied too."""
        cp = self.cp
        self.src_in, self.snk_in = self.src, self.snk
        if host:  # one staged upload of the three (on the current stream: the
            # solve's in a solve)
            pairs = [
                (dst, np.asarray(x, dtype=np.int32))
                for dst, x in ((self.src, source), (self.snk, sink), (self.rc, edges))
            ]
            staging().upload(pairs, cp.cuda.get_current_stream())
            return
        for name, dst, x in (
            ("src_in", self.src, source),
            ("snk_in", self.snk, sink),
            ("rc", self.rc, edges),
        ):
            if (
                isinstance(x, cp.ndarray)
                and x.dtype == cp.int32
                and x.flags.c_contiguous
                and x.size == dst.size
            ):
                if dst is self.rc:  # a plain copy: no elementwise kernel to launch
                    cp.cuda.runtime.memcpyAsync(
                        dst.data.ptr,
                        x.data.ptr,
                        dst.nbytes,
                        cp.cuda.runtime.memcpyDeviceToDevice,
                        cp.cuda.get_current_stream().ptr,
                    )
                else:
                    setattr(self, name, x.reshape(-1))
            else:
                cp.copyto(dst, cp.asarray(x, dtype=cp.int32).reshape(-1))

    def validate(self) -> None:
        """grid_graph's checks on the loaded capacities (gpr_validate; arcs leaving
        the grid are zeroed in the residual capacities), queued with no host wait:
        the first bad flat index of the source, sink and arc entries, then of each
        direction's arc pairs (``_NO_BAD`` for none), copied to pinned memory, where
        :meth:`validated` reads them once the stream has passed this point."""
        cp = self.cp
        self.bad.fill(_NO_BAD)
        self.k_validate(
            self.init_grid,
            (_INIT_BLOCK,),
            (self.src_in, self.snk_in, self.rc, self.bad, *self.dims, self.idx(self.n)),
        )
        cp.cuda.runtime.memcpyAsync(
            self.bad_pinned.ptr,
            self.bad.data.ptr,
            self.bad.nbytes,
            cp.cuda.runtime.memcpyDeviceToHost,
            cp.cuda.get_current_stream().ptr,
        )

    def validated(self) -> list:
        """What the last :meth:`validate` found (read after a later event of the
        stream has completed)."""
        return self.bad_host.tolist()

    def release(self) -> None:
        """Drop the references to the caller's arrays (the cached solver outlives
        the call)."""
        self.src_in, self.snk_in = self.src, self.snk

    def init(self) -> None:
        self.fresh = False
        self.k_init(
            self.init_grid,
            (_INIT_BLOCK,),
            (
                self.src_in,
                self.snk_in,
                self.ex,
                self.tcap,
                self.out,
                self.cnt,
                self.bflags,
                self.ctrl,
                self.etot,
                self.narrow,
                np.int32(self.bntiles),
                self.idx(self.n),
            ),
        )

    def fetch(self, slot: int) -> Any:
        """Copy out[0] (the active count) to pinned slot ``slot``; event to wait on."""
        cp = self.cp
        cp.cuda.runtime.memcpyAsync(
            self.pinned.ptr + 4 * (slot % _RING),
            self.out.data.ptr,
            4,
            cp.cuda.runtime.memcpyDeviceToHost,
            self.stream.ptr,
        )
        ev = cp.cuda.Event()
        ev.record(self.stream)
        return ev

    def result(self, after: Any = None) -> tuple[int, Any]:
        """Labels (h < INF) and the flow, sum(sink) - sum(residual sink capacity).
        ``after``: an event of the solver's stream after which the heights and sink
        capacities are final; the result is then computed on a stream of its own
        (``self.side``), so that it does not wait for the round queued behind that
        event (a no-op once no active node is left, see :class:`_Rounds`)."""
        cp = self.cp
        stream = self.stream
        if after is not None:
            if getattr(self, "side", None) is None:
                self.side = cp.cuda.Stream(non_blocking=True)
            stream = self.side
            stream.wait_event(after)
        with stream:
            labels = cp.empty(self.n, dtype=cp.uint8)
            self.acc.fill(0)
            self.k_finish(
                self.init_grid,
                (_INIT_BLOCK,),
                (self.snk_in, self.tcap, self.h, labels, self.acc, self.idx(self.n)),
            )
            flow = int(self.acc.get(stream=stream)[0])
        return flow, labels.reshape(self.shape)


def _capacity_error(bad: list, source: Any, sink: Any, edges: Any) -> ValueError:
    """grid_graph's error for the first problem gpr_validate found (in its order:
    source, sink and arc values, then the arc pairs by direction)."""
    from ._backend import to_numpy
    from ._validate import INT32_MAX

    shape = tuple(source.shape)
    for name, a, at in (("source", source, bad[0]), ("sink", sink, bad[1])):
        if at != _NO_BAD:
            idx = tuple(int(v) for v in np.unravel_index(at, shape))
            value = int(to_numpy(a[idx]))
            return ValueError(
                f"{name} must be non-negative, got {value} at index {idx}"
            )
    if bad[2] != _NO_BAD:
        idx = tuple(int(v) for v in np.unravel_index(bad[2], tuple(edges.shape)))
        value = int(to_numpy(edges[idx]))
        return ValueError(f"edges must be non-negative, got {value} at index {idx}")
    from .grid import neighbour_offsets

    steps = neighbour_offsets(len(shape), int(edges.shape[0]))
    for d, at in enumerate(bad[3:]):
        if at != _NO_BAD:
            idx = tuple(int(v) for v in np.unravel_index(at, shape))
            head = tuple(int(v) for v in np.asarray(idx) + steps[2 * d])
            pair = int(to_numpy(edges[(2 * d, *idx)])) + int(
                to_numpy(edges[(2 * d + 1, *head)])
            )
            return ValueError(
                f"edges: forward + backward capacity of an arc pair must be <= "
                f"{INT32_MAX}, got {pair} between planes {2 * d} and {2 * d + 1} at "
                f"index {idx}"
            )
    raise AssertionError(f"no capacity error in {bad}")


def _get_solver(
    shape: tuple, tile: tuple, bfs_tile: tuple, n: int, k: int, host: bool
) -> _Solver:
    """The cached solver of this thread for this problem, or a new one."""
    import cupy

    defines = tuple(sorted(_EXTRA_DEFINES.items()))
    key = (
        shape,
        k,
        tile,
        bfs_tile,
        defines,
        _BFS_WARP,
        _BFS_LEVEL,
        _BFS_LEVEL_L,
        _BFS_LEVEL_DIAG_MAX_NODES,
        _LV_NPER_WIDE,
        _LV_WIDE_MIN_L,
        _LV_DEFER,
        _DIAG_CORNERS,
        _BITLOOP,
        _TRACK_MASKS,
        _PUSH_CLAIM,
        _CLAIM_WAVES,
        cupy.cuda.Device().id,
    )
    old = getattr(_cache, "solver", None)
    if _REUSE and old is not None and old.key == key:
        return old
    if old is not None:  # its last round may still be queued (_Solver.result)
        old.stream.synchronize()
    _cache.solver = None  # frees the old buffers before the size check
    del old
    _check_fits(shape, n, k, host)
    solver = _Solver(shape, tile, bfs_tile, k)
    solver.key = key
    if _REUSE:
        _cache.solver = solver
    return solver


def maxflow_grid_gpu(
    source: Any,
    sink: Any,
    edges: Any,
    *,
    tile: tuple | None = None,
    bfs_tile: tuple | None = None,
    local_iters: int | None = None,
    sweeps_per_relabel: int | None = None,
    tail_sweeps: int | None = None,
    tail_iters: int | None = None,
    walk_below: int | None = None,
    persist_below: int | None = None,
    bfs_mode: int | None = None,
    incremental_below: int | None = None,
    max_rounds: int | None = None,
    graph: bool = True,
    profile: bool = False,
    residual: bool = False,
    validate: bool = False,
    side: str = "sink",
    cpu_after: float | None = None,
) -> tuple[int, Any, dict]:
    """Exact max-flow / min-cut of a validated grid graph on the GPU.

    Parameters
    ----------
    source, sink : ndarray or cupy.ndarray, shape (M, N) or (P, M, N), int32
        Terminal capacities (C-contiguous, as :func:`vision_cuts.grid_graph` makes
        them).
    edges : ndarray or cupy.ndarray, shape (K, *grid), int32
        Arc capacities, planes +x, -x, +y, -y (+z, -z), then the diagonals of 8-,
        18- or 26-connected grids in :mod:`vision_cuts.grid`'s order (K = 4 or 8 in
        2-D, 6, 18 or 26 in 3-D); arcs leaving the grid are zero and
        ``edges[k][p] + edges[k ^ 1][p + e_k] <= 2**31 - 1``. Not modified.

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
        ``active`` (active nodes after each global relabel), ``round_ms`` (device
        milliseconds of each round, sweeps and relabel) and, with ``profile``,
        device milliseconds per phase by CUDA events: ``first_relabel_ms`` (setup and
        the first global relabel), ``push_ms``, ``relabel_ms`` (the sum of
        ``relabel_init_ms``, ``relabel_bfs_ms`` and ``relabel_count_ms``),
        ``result_ms``, and per round ``push_ms_rounds``, ``relabel_ms_rounds``,
        ``bfs_ms_rounds``. ``handover`` is None, or, for a solve whose rest the CPU
        solver finished (see ``cpu_after``), a dict: ``after_s`` (the rounds' time
        then), ``active`` (active nodes at the last count), ``flow_before`` (the
        flow in the sink arcs then), ``download_s``, ``cpu_s``, ``cpu_flow``,
        ``cpu_augmentations``, ``cpu_origin_steps``, ``cpu_threads``.

    Other Parameters
    ----------------
    tile : tuple of int, optional
        Tile shape ``(TILE_X, TILE_Y, TILE_Z)``, x first, powers of two up to 32, at
        most 1024 nodes, ``TILE_X >= 2`` (and ``TILE_Y >= 2`` in 8-connected grids),
        ``TILE_Z = 1`` in 2-D, its K shared planes within 48 KiB. Default (32, 32, 1)
        in 2-D, (32, 8, 1) 8-connected and for 4-connected 2-D grids of fewer than
        2**21 nodes, (16, 8, 8) in 3-D, (8, 8, 8) 18-connected and (8, 4, 4)
        26-connected.
    bfs_tile : tuple of int, optional
        Tile shape of the global relabel, same rules as ``tile``. Default (16, 16, 1)
        in 2-D and (16, 4, 4) in 3-D with a default ``tile``, else ``tile``.
    local_iters : int, optional
        Push / relabel rounds per tile and launch (default 32 in 2-D, 16 for 2-D grids
        of fewer than 2**21 nodes and in 3-D; with diagonal arcs ``_DIAG_SCHEDULE``).
    sweeps_per_relabel : int, optional
        Sweeps between two global relabels (default 2 in 2-D, 1 in 3-D; with
        diagonal arcs ``_DIAG_SCHEDULE``).
    tail_sweeps : int, optional
        Sweeps between global relabels once fewer than ``n / 1024`` nodes are active
        (default: ``sweeps_per_relabel``; 4 for 8-connected grids), and in 3-D grids
        without diagonals in every round after the third (default 4 there).
    tail_iters : int, optional
        Push / relabel rounds per tile and launch in those sweeps (default:
        ``local_iters``, or 32 for 2-D grids of fewer than 2**21 nodes when
        ``local_iters`` is not given either).
    walk_below : int, optional
        After the global relabel of a round that starts with fewer than this many
        active nodes, each active node sends its excess down the new distance labels
        (``gpr_walk``); default 0 (no walks: measured slower).
    persist_below : int, optional
        Rounds that start with fewer than this many active nodes push with a
        persistent grid of resident blocks (``gpr_push_persist``) instead of one block
        a tile; default ``n * _PERSIST_BELOW`` (0), ``n / 1024`` for 8-connected grids
        (their tail rounds).
    bfs_mode : int, optional
        The global relabel launch (default ``_BFS_MODE``: 0 in 2-D, 3 in 3-D; always
        0 with diagonal arcs): 0 the
        BFS kernel alone (``gbfs_persistent``; in 2-D grids of fewer than 2**21 nodes
        ``gbfs_level`` for the full relabels), else ``gbfs_fused`` with these bits: 1
        the initial heights in the BFS launch, 2 the active count in it, 4 one flag
        and pending update a tile visit, 8 claims by one exchange, 16 pending read
        together with the tile flags, 32 (with 4) a visit goes on with a neighbour
        tile it would flag.
    incremental_below : int, optional
        The global relabels after rounds that start with fewer than this many active
        nodes are incremental: they keep the distances of the last relabel wherever
        the round's pushes cannot have changed them and run the BFS only from the
        rest (exact all the same); default ``n * _INCR_BELOW`` for 2-D grids of at
        least ``_INCR_MIN_NODES`` nodes, else 0. Needs ``bfs_mode`` 0 and no walks,
        otherwise every relabel is a full one.
    max_rounds : int, optional
        Give up (``RuntimeError``) after this many global relabels; default unlimited.
    graph : bool
        Replay each round as a captured CUDA graph (fewer host launches).
    profile : bool
        Time the phases with CUDA events (no graph).
    validate : bool
        The capacities are int32 arrays of agreeing shapes but their values are
        unchecked: check them on the device after the upload (:func:`grid_graph`'s
        errors, naming the array and the first bad index) and ignore the arcs that
        leave the grid. The solve does not wait for the check: its findings are
        read with the first active count, and a bad value raises then.
    residual : bool
        Also return the final residual arc capacities, a cupy int32 array of the
        shape of ``edges``, as ``stats["residual"]`` (a warm start of the next solve
        on the same arcs: :func:`warm_start_graph`).
    side : {"sink", "source"}
        Which minimum cut ``labels`` is where there are several: ``"sink"`` (the
        default) the smallest sink side, the nodes that reach the sink in the final
        residual graph; ``"source"`` the smallest source side, the nodes that the
        source or a node left with excess reaches (one more BFS, on the reversed
        residual arcs), labelled 0, as the CPU solver labels them.
    cpu_after : float, optional
        Seconds of rounds (host clock, from the first launch) after which a solve
        with nodes still active hands the rest to the CPU solver (exact: the same
        flow and labels as a solve to the end here, and the residual arcs of a
        maximum flow; see
        :mod:`vision_cuts._grid_handover_gpu`): energies with long paths, on which
        push-relabel's rounds and relabel depth grow with the path length. Default
        ``0.02 + 3e-7 * n`` (within the CPU solver's time on such grids; vision
        energies end ten times sooner or more); ``math.inf`` never, 0 after the
        first global relabel. Not where a node's excess exceeds ``2**31 - 1``.

    Raises
    ------
    ValueError
        A grid of more than ``2**31 - 272`` nodes, or a bad tile.
    DeviceMemoryError
        The solve does not fit in the free device memory (a MemoryError).
    """
    import cupy

    shape = tuple(int(v) for v in source.shape)
    k = int(edges.shape[0])
    n = math.prod(shape)
    t0 = time.perf_counter()
    if side not in ("sink", "source"):
        raise ValueError(f"side must be 'sink' or 'source', got {side!r}")
    if n == 0:
        return _empty_solve(shape, k, residual)
    _check_grid(shape, tuple(edges.shape), n)
    sched = _schedule(
        shape,
        k,
        tile=tile,
        bfs_tile=bfs_tile,
        local_iters=local_iters,
        sweeps_per_relabel=sweeps_per_relabel,
        tail_sweeps=tail_sweeps,
        tail_iters=tail_iters,
        walk_below=walk_below,
        persist_below=persist_below,
        bfs_mode=bfs_mode,
        incremental_below=incremental_below,
    )
    host = not isinstance(edges, cupy.ndarray)
    solver = _get_solver(shape, sched.tile, sched.bfs_tile, n, k, host)
    stream = solver.stream
    caller = cupy.cuda.get_current_stream()
    stream.wait_event(caller.record())  # the inputs may still be in the making
    rounds = _Rounds(solver, sched, profile, graph)
    with stream:
        solver.load(source, sink, edges, host)
        if validate:  # its findings are read with the first active count: the
            solver.validate()  # solve starts without waiting for them
        try:
            done = rounds.run(max_rounds, validate, cpu_budget(n, cpu_after))
        except BaseException as exc:
            stream.synchronize()  # leave no work queued on the cached buffers
            solver.release()
            if isinstance(exc, _BadCapacities):
                raise _capacity_error(solver.validated(), source, sink, edges) from None
            raise
        handover = None
        if not done:  # the rest on the CPU (the stream is idle)
            after = time.perf_counter() - t0
            flow, labels, res, handover = finish_on_cpu(solver, residual, side)
            handover = {"after_s": after, "active": rounds.handed_over[1], **handover}
            early = False
        else:
            # the default answer need not wait for the no-op round queued behind
            # the last count (the next solve on this solver's stream does)
            # (a cached solver: its buffers outlive that round, see _get_solver)
            early = (
                _RESULT_SIDE and _REUSE and not (residual or profile) and side == "sink"
            )
            flow, labels = solver.result(rounds.events[-1] if early else None)
            res = solver.rc.reshape((k, *shape)).copy() if residual else None
            if side == "source":
                labels = solver.source_side(sched.bfs_mode)
        solver.release()
        rounds.mark("result")
        caller.wait_event((solver.side if early else stream).record())
    stats = _solve_stats(solver, sched, rounds, time.perf_counter() - t0)
    stats["handover"] = handover
    if residual:
        stats["residual"] = res
    if profile:
        stats.update(rounds.phase_stats())
    return flow, labels, stats


def _empty_solve(shape: tuple, k: int, residual: bool) -> tuple[int, Any, dict]:
    """The answer for a grid without nodes."""
    import cupy

    stats = {
        "backend": "gpu",
        "algorithm": "push-relabel",
        "time_s": 0.0,
        "sweeps": 0,
        "global_relabels": 0,
        "handover": None,
    }
    if residual:
        stats["residual"] = cupy.zeros((k, *shape), dtype=cupy.int32)
    return 0, cupy.zeros(shape, dtype=cupy.uint8), stats


@dataclasses.dataclass(frozen=True)
class _Schedule:
    """The settings of one solve (see :func:`maxflow_grid_gpu`'s parameters)."""

    n: int
    tile: tuple
    bfs_tile: tuple
    local_iters: int
    sweeps_per_relabel: int
    tail_sweeps: int
    tail_iters: int
    walk_below: int
    persist_below: int
    bfs_mode: int
    incremental_below: int
    track: bool  # keep the distances of the last relabel (incremental relabels)
    tail_after: int  # rounds after this many take the tail pace, whatever is active

    def round_key(self, last: int, index: int) -> tuple:
        """The launches of round ``index`` (1 = the first after the first global
        relabel), after a relabel that left ``last`` active nodes: (sweeps, local
        rounds, walks, persistent push, BFS mode, incremental relabel, keep the
        distances); a round's CUDA graph key."""
        tail = last * 1024 < self.n or index > self.tail_after
        pace = (
            (self.tail_sweeps, self.tail_iters)
            if tail
            else (self.sweeps_per_relabel, self.local_iters)
        )
        return pace + (
            last < self.walk_below,
            last < self.persist_below,
            self.bfs_mode,
            self.track and last < self.incremental_below,
            self.track,
        )


def _check_grid(shape: tuple, edges_shape: tuple, n: int) -> None:
    """A grid the kernels take: at most ``_MAX_NODES`` nodes, a known number of
    arc planes."""
    from .grid import PLANES

    ndim, k = len(shape), int(edges_shape[0])
    if n > _MAX_NODES:
        raise ValueError(
            f"the GPU grid max-flow handles at most {_MAX_NODES} nodes (heights are "
            f"int32), got a grid of shape {shape} with {n} nodes; use backend='cpu'"
        )
    if ndim not in PLANES or k not in PLANES[ndim]:
        raise ValueError(
            f"edges must have K planes with K in {PLANES.get(ndim)} for a {ndim}-D "
            f"grid, got edges of shape {edges_shape}"
        )


def _tiles(ndim: int, k: int, small: bool, tile: Any, bfs_tile: Any) -> tuple:
    """The push and BFS tiles, the defaults filled in and both checked."""
    diag = k > 2 * ndim
    if tile is None:
        if diag:
            tile = _DIAG_SCHEDULE[k]["tile"]
        else:
            tile = _SMALL_2D_SCHEDULE["tile"] if small else _TILES[ndim]
    tile = tuple(tile)
    if bfs_tile is None:
        default = tile in (
            _TILES[ndim],
            _SMALL_2D_SCHEDULE["tile"],
            _DIAG_SCHEDULE.get(k, {}).get("tile"),
        )
        bfs_tile = _BFS_TILES[ndim] if default else tile
        if ndim == 2 and _BFS_WARP and not diag:
            bfs_tile = (32, 32, 1)
    bfs_tile = tuple(bfs_tile)
    for name, tl in (("tile", tile), ("bfs_tile", bfs_tile)):
        if (
            len(tl) != 3
            or math.prod(tl) > 1024
            or tl[0] < 2
            or any(v < 1 or v > 32 or v & (v - 1) for v in tl)
            or (ndim == 2 and tl[2] != 1)
        ):
            raise ValueError(
                f"{name} must be (TILE_X, TILE_Y, TILE_Z), powers of two from 1 to "
                f"32 (TILE_X >= 2), at most 1024 nodes, TILE_Z == 1 in 2-D; got {tl}"
            )
    if diag and ndim == 2 and _DIAG_CORNERS and tile[1] < 2:
        # gpr_push_corners gives each corner's two arc pairs to one thread; in tiles one
        # row high a node ends pairs of two corners, and two threads would update it
        raise ValueError(
            "tile must be at least 2 nodes high (TILE_Y >= 2) in an 8-connected grid, "
            f"whose pushes across tile corners need it; got {tile}"
        )
    # the push block's static shared memory: two height buffers with the halo box, K
    # residual planes and a byte a node (grid_push_relabel.cu)
    halo = (tile[0] + 2) * (tile[1] + 2) * (tile[2] + 2 if ndim == 3 else 1)
    smem = 8 * halo + (4 * k + 1) * math.prod(tile)
    if smem > _STATIC_SMEM:
        raise ValueError(
            f"tile {tile} needs {smem} bytes of shared memory a block with {k} arc "
            f"planes, more than {_STATIC_SMEM}: use a smaller tile"
        )
    return tile, bfs_tile


def _schedule(shape: tuple, k: int, **knobs: Any) -> _Schedule:
    """The solve's settings: ``knobs`` (maxflow_grid_gpu's tuning arguments, the
    fields of :class:`_Schedule`; None for the default) with the defaults of this
    grid filled in, all checked."""
    ndim, n = len(shape), math.prod(shape)
    diag = k > 2 * ndim
    # the defaults of _SMALL_2D_SCHEDULE (face arcs only)
    small = ndim == 2 and n < _SMALL_2D_BELOW and not diag
    kn = dict(knobs)
    kn["tile"], kn["bfs_tile"] = _tiles(ndim, k, small, kn["tile"], kn["bfs_tile"])
    if kn["local_iters"] is None and diag:
        kn["local_iters"] = _DIAG_SCHEDULE[k]["local_iters"]
    elif kn["local_iters"] is None:
        kn["local_iters"] = (
            _SMALL_2D_SCHEDULE["local_iters"] if small else _LOCAL_ITERS[ndim]
        )
        if kn["tail_iters"] is None and small:
            kn["tail_iters"] = _SMALL_2D_SCHEDULE["tail_iters"]
    if kn["sweeps_per_relabel"] is None:
        kn["sweeps_per_relabel"] = (
            _DIAG_SCHEDULE[k]["sweeps_per_relabel"]
            if diag
            else _SWEEPS_PER_RELABEL[ndim]
        )
    tails = _DIAG_SCHEDULE[k] if diag else _FACE_TAILS.get(ndim, {})
    kn["tail_after"] = int(tails.get("tail_after", _NEVER))
    for name, default in (
        ("tail_sweeps", tails.get("tail_sweeps", kn["sweeps_per_relabel"])),
        ("tail_iters", kn["local_iters"]),
        ("walk_below", n * _WALK_BELOW),
        ("persist_below", int(n * tails.get("persist_below", _PERSIST_BELOW))),
        ("bfs_mode", 0 if diag else _BFS_MODE[ndim]),
        ("incremental_below", 0),
    ):
        if kn[name] is None:
            kn[name] = default
    for name in kn:
        if name not in ("tile", "bfs_tile"):
            kn[name] = int(kn[name])
    bfs_mode = kn["bfs_mode"]
    if not 0 <= bfs_mode <= 63:
        raise ValueError(f"bfs_mode must be in [0, 63], got {bfs_mode}")
    if diag and bfs_mode:
        raise ValueError(
            f"bfs_mode must be 0 for a grid with diagonal arcs (K = {k}), got "
            f"{bfs_mode}: the fused relabel has face arcs only"
        )
    if knobs["incremental_below"] is None and ndim == 2 and not diag:
        kn["incremental_below"] = int(n * _INCR_BELOW) if n >= _INCR_MIN_NODES else 0
    paces = [kn[v] for v in ("local_iters", "sweeps_per_relabel")]
    paces += [kn[v] for v in ("tail_sweeps", "tail_iters")]
    if min(paces) < 1:
        raise ValueError(
            "local_iters, sweeps_per_relabel, tail_sweeps and tail_iters must be >= 1, "
            "got {}, {}, {} and {}".format(*paces)
        )
    track = kn["incremental_below"] > 0 and bfs_mode == 0 and kn["walk_below"] <= 0
    return _Schedule(n=n, track=track, **kn)


class _BadCapacities(Exception):
    """gpr_validate found a bad capacity (see :meth:`_Rounds.run`)."""


class _Rounds:
    """The rounds of one solve on ``solver``'s stream: the first global relabel,
    then rounds of sweeps and a relabel (a captured CUDA graph each, unless
    ``profile`` or not ``graph``) until no active node is left. The host keeps
    ``depth`` rounds queued and reads each one's active count from pinned memory.

    After :meth:`run`: ``history`` (active nodes after each global relabel),
    ``plan`` (the round keys launched, :meth:`_Schedule.round_key`), ``events``
    (after each count read: the device time a round) and ``used_graph``."""

    def __init__(self, solver: _Solver, sched: _Schedule, profile: bool, graph: bool):
        self.solver, self.sched = solver, sched
        self.profile = profile
        self.graph = graph and not profile
        self.depth = 1 if profile else max(1, int(_PIPELINE))
        self.marks: list = []  # profile: (name, event) after each phase
        self.tile_stats: list = []  # profile with PR_STATS: a list a round
        self.pr_stats = profile and bool(_EXTRA_DEFINES.get("PR_STATS"))
        self.history: list = []
        self.plan: list = []
        self.events: list = []
        self.used_graph = False
        # (global relabels counted, active nodes then) where the rest went to the
        # CPU solver
        self.handed_over: tuple | None = None

    def mark(self, name: str) -> None:
        if self.profile:
            import cupy

            ev = cupy.cuda.Event()
            ev.record(self.solver.stream)
            self.marks.append((name, ev))

    def one_round(self, *key: Any) -> None:
        """The launches of a round (``key``: :meth:`_Schedule.round_key`)."""
        count, iters, walk, persist, mode, incremental, track = key
        solver = self.solver
        if self.pr_stats:
            solver.pstats.fill(0)
        solver.sweeps(count, iters, persist)
        self.mark("push")
        solver.global_relabel(
            self.mark if self.profile else None, walk, mode, incremental, track
        )
        self.mark("relabel_count")
        if self.pr_stats:
            self.tile_stats.append(solver.pstats.get(stream=solver.stream).tolist())
            self.mark("stats")  # the host round trip above is not solver time

    def _launch(self, key: tuple) -> None:
        solver, stream = self.solver, self.solver.stream
        if self.graph and key not in solver.graphs:
            solver.graphs[key] = capture_graph(
                stream, lambda key=key: self.one_round(*key)
            )
        g = solver.graphs.get(key) if self.graph else None
        if g is not None:
            g.launch(stream)
            self.used_graph = True
        else:
            self.one_round(*key)

    def run(
        self, max_rounds: int | None, validated: bool = False, budget: float = math.inf
    ) -> bool:
        """The rounds; with ``validated``, gpr_validate's findings (queued before
        them) are read when the first active count is: :class:`_BadCapacities`
        where it found any (the kernels queued until then ran on them, bounded
        work that reads no index from a capacity). True once no active node is
        left; False where the rounds ran past ``budget`` seconds with nodes still
        active and the state fits the CPU solver (the stream then idle: the rest is
        :func:`finish_on_cpu`'s)."""
        solver, sched = self.solver, self.sched
        deadline = time.perf_counter() + budget
        self.mark("start")
        solver.init()
        solver.global_relabel(mode=sched.bfs_mode, track=sched.track)
        self.mark("first_relabel")
        # rounds in flight: (index, event after the copy of its active count); round 0
        # is the first global relabel; round i > 0 ran plan[i - 1]
        inflight = collections.deque([(0, solver.fetch(0))])
        history, plan = self.history, self.plan
        launched = 0
        while True:
            while len(inflight) < self.depth:
                key = sched.round_key(history[-1] if history else sched.n, launched + 1)
                self._launch(key)
                launched += 1
                plan.append(key)
                inflight.append((launched, solver.fetch(launched)))
            idx, ev = inflight.popleft()
            ev.synchronize()
            if validated and idx == 0 and min(solver.validated()) != _NO_BAD:
                raise _BadCapacities
            self.events.append(ev)
            active = int(solver.host[idx % _RING])
            history.append(active)
            if active == 0:
                return True
            if max_rounds is not None and len(history) >= max_rounds:
                raise RuntimeError(
                    f"GPU grid max-flow did not converge in {len(history)} global "
                    f"relabels ({sum(p[0] for p in plan[: len(history) - 1])} "
                    f"sweeps, {active} active nodes left), grid {solver.shape}"
                )
            if time.perf_counter() >= deadline:
                solver.stream.synchronize()  # the rounds queued past this count
                if fits_cpu(solver):
                    self.handed_over = (len(history), active)
                    return False
                deadline = math.inf  # (an excess beyond int32: the GPU goes on)

    def ran(self) -> list:
        """The keys of the rounds whose relabel was counted (not those queued past
        the last count; those of a solve handed over to the CPU ran too)."""
        if self.handed_over is not None:
            return list(self.plan)
        return self.plan[: len(self.history) - 1]

    def phase_stats(self) -> dict:
        """Profile: device milliseconds per phase, summed over the rounds, and per
        round (see :func:`maxflow_grid_gpu`'s ``stats``)."""
        import cupy

        phases: dict = {}
        rounds: dict = {"push": [], "relabel": [], "relabel_bfs": []}
        for (_, e0), (name, e1) in zip(self.marks, self.marks[1:], strict=False):
            ms = cupy.cuda.get_elapsed_time(e0, e1)
            phases[name] = phases.get(name, 0.0) + ms
            if name in rounds:
                rounds[name].append(round(ms, 3))
            if name.startswith("relabel_"):  # init, bfs, count: one global relabel
                phases["relabel"] = phases.get("relabel", 0.0) + ms
                if name == "relabel_init":
                    rounds["relabel"].append(0.0)
                rounds["relabel"][-1] = round(rounds["relabel"][-1] + ms, 3)
        out = {f"{k}_ms": v for k, v in phases.items()}
        out["push_ms_rounds"] = rounds["push"]
        out["relabel_ms_rounds"] = rounds["relabel"]
        out["bfs_ms_rounds"] = rounds["relabel_bfs"]
        if self.tile_stats:  # per round: push tiles, push rounds, tiles left active,
            out["push_tiles_rounds"] = self.tile_stats  # BFS tile relaxes, BFS rounds
        return out


def _solve_stats(solver: _Solver, sched: _Schedule, rounds: _Rounds, secs: float):
    """The ``stats`` of a solve (see :func:`maxflow_grid_gpu`)."""
    import cupy

    ran = rounds.ran()
    level = solver.level is not None and not sched.bfs_mode
    return {
        "backend": "gpu",
        "algorithm": "push-relabel (tiled, checkerboard) + GPU BFS global relabel",
        "time_s": secs,
        "sweeps": sum(p[0] for p in ran),
        # (a solve handed over ran every round it queued: one relabel each)
        "global_relabels": len(ran) + 1
        if rounds.handed_over is not None
        else len(rounds.history),
        "local_iters": sched.local_iters,
        "sweeps_per_relabel": sched.sweeps_per_relabel,
        "tail_sweeps": sched.tail_sweeps,
        "tile": sched.tile,
        "bfs_tile": sched.bfs_tile,
        "graph": rounds.used_graph,
        "tail_iters": sched.tail_iters,
        "tail_after": sched.tail_after if sched.tail_after < _NEVER else None,
        "walk_below": sched.walk_below,
        "walks": sum(1 for p in ran if p[2]),
        "persist_below": sched.persist_below,
        "persistent_rounds": sum(1 for p in ran if p[3]),
        # rounds pushed by gpr_push_claim (_PUSH_CLAIM)
        "claimed_rounds": sum(1 for p in ran if not p[3]) if solver.claim else 0,
        "bfs_mode": sched.bfs_mode,
        "incremental_below": sched.incremental_below if sched.track else 0,
        "incremental_relabels": sum(1 for p in ran if p[5]),
        "pipeline": rounds.depth,
        "push_min_blocks": solver.push_min_blocks,
        "push_bitloop": solver.bitloop,
        "bfs_blocks": solver.fused_blocks if sched.bfs_mode else solver.bfs_blocks,
        "bfs_warp": solver.bfs_warp and not sched.bfs_mode,
        "level_bfs": level,
        "colours": len(solver.colours),
        "bfs_level": solver.level[:5] if level else None,
        "bfs_level_words": solver.lv_nper if level else None,
        "bfs_level_defer": solver.lv_defer if level else None,
        "active": rounds.history,
        # device ms of each round (sweeps + global relabel), event to event
        "round_ms": [
            round(cupy.cuda.get_elapsed_time(e0, e1), 3)
            for e0, e1 in zip(rounds.events, rounds.events[1:], strict=False)
        ],
    }
