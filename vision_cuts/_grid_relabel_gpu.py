"""The global relabel of the GPU grid max-flow (:mod:`vision_cuts._maxflow_gpu`).

A global relabel sets every node's height to its distance to the sink over residual
arcs (``INF`` where it cannot reach the sink) and counts the nodes left with excess.
:class:`GlobalRelabel` holds its launches; :class:`vision_cuts._maxflow_gpu._Solver`
owns the arrays and kernels they use. The kernels are in ``kernels/grid_bfs.cu`` (the
BFS launches: the level-synchronous ``gbfs_level``, the tile BFS ``gbfs_persistent``
or ``gbfs_warp``, ``gbfs_fused``, and the incremental relabel's ``gbfs_seed`` and
``gbfs_invalidate``) and ``kernels/grid_push_relabel.cu`` (the active count
``gpr_count_active``, the path walks ``gpr_walk`` and ``gpr_reverse`` for the smallest
source side).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["GlobalRelabel"]

_INF = 0x7FFFFF00  # VC_INF of kernels/common.cuh (passed as a define: they agree)
_INIT_BLOCK = 256  # threads a block of the one-thread-a-node launches


class GlobalRelabel:
    """The global relabel launches of a :class:`~vision_cuts._maxflow_gpu._Solver`
    (a base class of it: the methods use the solver's arrays, kernels and launch
    sizes)."""

    def _wmask(self, init: int) -> None:
        """gbfs_wmask: the bit masks of gbfs_warp and gbfs_level; ``init`` bit 1 the
        initial heights of gbfs_init (1 / VC_INF), bit 2 its tile flags (every BFS
        tile flagged for a first visit of gbfs_warp), bit 4 the plane of the nodes
        with excess (gbfs_level's count)."""
        self.fresh = self.track
        self.k_wmask(
            (max(1, min(-(-self.nwords * 32 // _INIT_BLOCK), 65535 * 8)),),
            (_INIT_BLOCK,),
            (
                self.rc,
                self.tcap,
                self.ex,
                self.h,
                self.mask,
                self.bflags,
                self.ctrl,
                np.int32(self.bntiles),
                self.out,
                np.int32(init),
                *self.dims[:2],
                np.int32(self.wnx),
                self.idx(self.n),
            ),
        )

    def global_relabel(
        self,
        mark=None,
        walk: bool = False,
        mode: int = 0,
        incremental: bool = False,
        track: bool = False,
    ) -> None:
        """BFS from the sink, then count the active nodes into ``out[0]`` (no sync).

        ``mode``: 0 (gbfs_persistent) or the bits of gbfs_fused (see ``_BFS_MODE``);
        the separate init and count kernels run where the BFS launch does not do their
        work. ``incremental`` (mode 0): start from the distances ``d`` of the last
        relabel where the pushes left them exact (gbfs_seed, gbfs_invalidate), then
        copy them to the heights; ``track``: keep ``d`` for that (a full relabel copies
        the heights to it). ``mark(name)``, if given, is called after the init, the
        BFS and the walks (the caller marks the count)."""
        if walk:
            mode &= ~2  # the walks come before the count
        self._relabel_init(mode, incremental)
        if mark:
            mark("relabel_init")
        counted = self._relabel_bfs(mode, incremental, walk)
        nbytes, stream = self.n * 4, self.cp.cuda.get_current_stream()
        if incremental:
            self.h.data.copy_from_device_async(self.d.data, nbytes, stream)
        elif track:
            self.d.data.copy_from_device_async(self.h.data, nbytes, stream)
        if mark:
            mark("relabel_bfs")
        if walk:
            self._walk()
            if mark:
                mark("relabel_walk")
        if not (mode & 2 or counted):
            self._count()

    def _relabel_init(self, mode: int, incremental: bool) -> None:
        """The start of a global relabel: the heights the BFS starts from (or, for
        an incremental one, the invalidation of the distances it can no longer
        trust), where the BFS launch does not set them itself."""
        if incremental:
            self.k_seed(
                (-(-self.bntiles // 256),),
                (256,),
                (
                    self.touched,
                    self.pflags,
                    self.iflags,
                    self.bflags,
                    self.ctrl,
                    self.out,
                    *self.dims,
                    *self.btdims,
                    *(np.int32(v) for v in self.tile),
                    *self.tdims[:2],
                ),
            )
            self.k_inval(
                (self.inval_blocks,),
                (self.bnt,),
                (
                    self.rc,
                    self.tcap,
                    self.d,
                    self.iflags,
                    self.bflags,
                    self.ctrl,
                    self.out,
                    *self.dims,
                    *self.btdims,
                    self.idx(self.n),
                ),
            )
        elif self.level and mode == 0:
            if not self.fresh:  # else the push kernel kept them
                self._wmask(init=4 if self.track else 0)
        elif self.bfs_warp and mode == 0:
            self._wmask(init=3)
        elif not mode & 1:
            self.k_bfs_init(
                self.init_grid,
                (_INIT_BLOCK,),
                (
                    self.tcap,
                    self.h,
                    self.bflags,
                    self.ctrl,
                    np.int32(self.bntiles),
                    self.out,
                    self.idx(self.n),
                ),
            )

    def _relabel_bfs(self, mode: int, incremental: bool, walk: bool) -> bool:
        """The BFS launch of a global relabel; whether it counted the active nodes."""
        counted = False  # the BFS launch counted the active nodes
        if self.level and mode == 0 and not incremental:
            cw, ch, rxn, regions, levels, smem = self.level
            counted = self.track and not walk  # the walks come before the count
            self.k_level(
                (regions,),
                (self.lv_nt,),
                (
                    self.mask,
                    self.h,
                    self.pub,
                    self.lctrl,
                    self.out,
                    self.pflags,
                    self.touched,
                    self.cnt,
                    *self.dims[:2],
                    np.int32(self.wnx),
                    np.int32(cw),
                    np.int32(ch),
                    np.int32(rxn),
                    np.int32(levels),
                    np.int32(counted),
                    np.int32(self.tile[1]),
                    np.int32(self.ntiles),
                ),
                shared_mem=smem,
            )
        elif (mode == 0 or incremental) and self.bfs_warp:
            if incremental:
                self._wmask(init=0)
            self.k_bfs(
                (self.bfs_blocks,),
                (self.bfs_threads,),
                (
                    self.mask,
                    self.d if incremental else self.h,
                    self.bflags,
                    self.ctrl,
                    self.out,
                    np.int32(incremental),  # full tile BFS at every visit
                    *self.dims[:2],
                    *self.btdims[:2],
                ),
            )
        elif mode == 0 or incremental:
            self.k_bfs(
                (self.bfs_blocks,),
                (self.bfs_threads,),
                (
                    self.rc,
                    self.d if incremental else self.h,
                    self.bflags,
                    self.ctrl,
                    self.out,
                    self.pstats,
                    *self.dims,
                    *self.btdims,
                    self.idx(self.n),
                ),
            )
        else:
            self.k_bfs_fused(
                (self.fused_blocks,),
                (self.bnt,),
                (
                    self.rc,
                    self.h,
                    self.bflags,
                    self.ctrl,
                    self.out,
                    self.pstats,
                    self.tcap,
                    self.ex,
                    self.pflags,
                    self.cnt,
                    *self.dims,
                    *self.btdims,
                    *self.ptdims,
                    np.int32(mode),
                    self.idx(self.n),
                ),
            )
        return counted

    def _walk(self) -> None:
        """gpr_walk: each active node sends its excess down the new distances."""
        self.k_walk(
            self.init_grid,
            (_INIT_BLOCK,),
            (
                self.rc,
                self.ex,
                self.h,
                self.tcap,
                self.out,
                *self.dims,
                np.int32(min(self.n, _INF - 1)),
                self.idx(self.n),
            ),
        )
        if self.track:  # the walks moved excess and changed arcs
            self._wmask(init=4)

    def _count(self) -> None:
        """gpr_count_active: the active nodes into ``out[0]``, their tiles flagged."""
        self.k_count(
            (self.ntiles,),
            (min(self.nt, 256),),  # PR_COUNT_NT
            (
                self.ex,
                self.h,
                self.pflags,
                self.touched,
                self.out,
                self.cnt,
                *self.dims,
                *self.tdims[:2],
            ),
        )

    def source_side(self, bfs_mode: int) -> Any:
        """After a solve: labels of the smallest source side of the minimum cuts, 0
        for the nodes that a node left with excess reaches along residual arcs (the
        source reaches no node: its arcs are saturated), 1 for the rest. One more
        global relabel, on the reversed residual arcs from those nodes; the residual
        arcs, sink capacities and excess are overwritten (``result`` first)."""
        self.k_reverse(
            self.init_grid,
            (_INIT_BLOCK,),
            (self.rc, self.ex, self.tcap, self.out, *self.dims, self.idx(self.n)),
        )
        self.fresh = False
        self.global_relabel(mode=bfs_mode)
        return (self.h >= _INF).astype(self.cp.uint8).reshape(self.shape)
