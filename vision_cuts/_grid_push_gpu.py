"""The push sweeps of the GPU grid max-flow (:mod:`vision_cuts._maxflow_gpu`).

A sweep runs the tiled push-relabel of ``kernels/grid_push_relabel.cu`` over every
checkerboard colour: one block a tile of one colour (``gpr_push_tile``), or a
persistent grid of resident blocks that reads the tile flags (``gpr_push_persist``),
then in 8-connected grids the pushes across the tile corners (``gpr_push_corners``);
or, in 8-connected grids, all the sweeps of a round in one launch whose blocks claim
the tile runs in order (``gpr_push_claim``). :class:`PushSweeps` holds these launches;
:class:`vision_cuts._maxflow_gpu._Solver` owns the arrays and kernels they use.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PushSweeps"]


class PushSweeps:
    """The push launches of a :class:`~vision_cuts._maxflow_gpu._Solver` (a base
    class of it: the methods use the solver's arrays, kernels and launch sizes)."""

    def sweeps(self, count: int, local_iters: int, persist: bool = False) -> None:
        """Push-relabel sweeps: every checkerboard colour (two, or 2**ndim with
        diagonal arcs in 3-D), one launch each (one block a tile, or with ``persist``
        a resident grid that reads the tile flags), then in 8-connected grids the
        pushes across the tile corners; in 8-connected grids without ``persist``,
        one launch of gpr_push_claim instead (see ``_PUSH_CLAIM``)."""
        if self.claim and not persist:
            self._sweeps_claimed(count, local_iters)
            return
        kernel, grid = self.k_push, (self.slots,)
        if persist:
            kernel, grid = self.k_push_persist, (self.persist_blocks,)
        for _ in range(count):
            for colour in self.colours:
                kernel(
                    grid,
                    (self.nt,),
                    (
                        *self._push_args(),
                        np.int32(colour),
                        np.int32(local_iters),
                        np.int32(self.n),
                        self.idx(self.n),
                        self.narrow,
                    ),
                )
            if self.corners:
                corners = (self.ntx - 1) * (self.nty - 1)
                if corners:
                    self.k_corners(
                        (-(-corners // 256),),
                        (256,),
                        (
                            self.rc,
                            self.ex,
                            self.h,
                            self.pflags,
                            self.mask,
                            self.nwm,
                            *self.dims[:2],
                            *self.tdims[:2],
                            self.idx(self.n),
                        ),
                    )

    def _push_args(self) -> tuple:
        """The push kernels' first arguments (up to the tile counts)."""
        return (
            self.rc,
            self.ex,
            self.h,
            self.tcap,
            self.pflags,
            self.touched,
            self.pstats,
            self.mask,
            self.nwm,
            *self.dims,
            *self.tdims,
        )

    def _sweeps_claimed(self, count: int, local_iters: int) -> None:
        """``count`` sweeps in one gpr_push_claim launch."""
        cp = self.cp
        stream = cp.cuda.get_current_stream().ptr
        for buf in (self.tdone, self.cdone):  # -1: no phase ended yet
            cp.cuda.runtime.memsetAsync(buf.data.ptr, 0xFF, buf.nbytes, stream)
        cp.cuda.runtime.memsetAsync(self.ticket.data.ptr, 0, 4, stream)
        self.k_push_claim(
            (self.claim_blocks,),
            (self.nt,),
            (
                *self._push_args(),
                np.int32(local_iters),
                np.int32(self.n),
                self.idx(self.n),
                self.narrow,
                np.int32(count),
                self.tdone,
                self.cdone,
                self.ticket,
            ),
        )
