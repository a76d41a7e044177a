"""Alpha-expansion of :func:`vision_cuts.minimize_labels` on the device (CuPy).

The moves are those of the stereo front end (``_stereo_gpu.DeviceMoves``, kernels
``stereo_move`` / ``stereo_energy`` of ``kernels/stereo.cu``): per move one kernel
builds the move graph from the unary volume, the weights and the current labels, the
cut runs on the GPU grid solver with device arrays, one kernel sums the proposal's
energy into a device scalar and another takes the move where it lowers the energy.
The host reads the energy and the count of accepted moves once a cycle. The cut's sink
side is the set of nodes that reach the sink (the smallest optimal move), as the CPU's
``keep`` rule takes: the labels and energies are the CPU backend's, cycle for cycle.

Used for 4-connected 2-D and 6-connected 3-D grids whose move capacities provably fit
in int32 (:func:`fits`); other problems take the CPU-built moves with GPU cuts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validate import INT32_MAX

__all__ = ["expansion", "fits"]

_INT32_MIN = -(2**31)


def fits(u: np.ndarray, v: np.ndarray, w: np.ndarray) -> bool:
    """Whether every move's capacities fit in int32 whatever the labels: unary
    values within int32, and their spread plus the pairwise terms a node can collect
    (two arcs a direction, each at most ``max(w) max(V)``) at most ``2**31 - 1``."""
    if u.size == 0:
        return False
    lo, hi = int(u.min()), int(u.max())
    if lo < _INT32_MIN or hi > INT32_MAX:
        return False
    ndim = u.ndim - 1
    wv = (int(w.max()) if w.size else 0) * int(v.max())
    return (hi - lo) + 2 * ndim * wv <= INT32_MAX and 2 * wv <= INT32_MAX


def expansion(
    u: np.ndarray,
    v: np.ndarray,
    w: np.ndarray,
    labels: np.ndarray,
    max_cycles: int,
    tol: float,
    callback: Any,
) -> tuple[np.ndarray, int, int, list]:
    """Expansion cycles over the labels 0 .. L - 1 in order, one move a cut.
    ``u`` (*grid, L), ``v`` (L, L) metric, ``w`` (ndim, *grid) integer arrays,
    ``labels`` the start. Returns (labels, initial energy, final energy, per-cycle
    stats as ``minimize_labels`` reports them); the energies are the device's
    (the host computes none)."""
    import cupy

    from ._stereo_gpu import DeviceMoves, expansion_loop, label_groups

    nlab = int(u.shape[-1])
    cost = cupy.moveaxis(cupy.asarray(u.astype(np.int32)), -1, 0)
    moves = DeviceMoves(
        cost, cupy.asarray(w, dtype=cupy.int32), "matrix", 0, label_groups(nlab, 1),
        vmat=np.ascontiguousarray(v, dtype=np.int32),
    )  # fmt: skip
    lab = cupy.ascontiguousarray(cupy.asarray(labels), dtype=cupy.int32)
    stats: dict = {}
    # progress as the CPU loop reports it: after every move but the last, then
    # (total, total) once; the loop reports after every move and (total, total), so
    # each report goes out two reports late and the last move's is dropped
    held: list = []

    def progress(done: int, total: int) -> None:
        held.append((done, total))
        if len(held) > 2:
            callback(*held.pop(0))

    expansion_loop(
        moves,
        lab,
        max_cycles=max_cycles,
        tol=tol,
        callback=None if callback is None else progress,
        stats=stats,
    )
    if callback is not None:
        callback(*held[-1])
    per_cut = int(moves.groups.shape[0])
    cycles = [
        {"energy": int(e), "cuts": per_cut, "improving_moves": int(a)}
        for e, a in zip(stats["energies"][1:], stats["accepted"], strict=True)
    ]
    first, last = (int(e) for e in (stats["energies"][0], stats["energies"][-1]))
    return lab.get(), first, last, cycles
