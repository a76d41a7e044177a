"""Alpha-expansion and alpha-beta swap of :func:`vision_cuts.minimize_labels` on the
device (CuPy).

The moves are those of the stereo front end (``_stereo_gpu.DeviceMoves``, kernels
``stereo_move`` / ``swap_move`` / ``stereo_energy`` of ``kernels/stereo.cu``): per
group of moves one kernel builds the move graphs from the unary volume, the weights and
the current labels, the cut runs on the GPU grid solver with device arrays, and per
move one kernel sums the proposal's energy into a device scalar and another takes the
move where it lowers the energy. The host reads the energy and the count of accepted
moves once a cycle.

One move a cut (``per_cut`` 1, the default) is the CPU's sequence of moves: expansion
over the labels in order, swap over the pairs (a, b), a < b, in order. The cut's sink
side is the set of nodes that reach the sink, which is the CPU's cut (expansion: the
smallest optimal move, its ``keep`` rule; swap: the mirrored graph, see ``swap_move``),
so the labels and energies are the CPU backend's, cycle for cycle. Several moves a cut
are built from one labelling, stacked and cut together, then applied one after the
other where each lowers the energy (the stereo front end's scheme): expansion labels
in the groups of ``label_groups``, swap pairs in rounds of disjoint pairs
(:func:`pair_groups`), so that no move of a group touches another's nodes. Expansion
move graphs are built mirrored (``_stereo_gpu.MIRROR_MOVES``): the same cuts with
less work.

Used for 4-connected 2-D and 6-connected 3-D grids whose move capacities provably fit
in int32 (:func:`fits`); other problems take the CPU-built moves with GPU cuts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validate import INT32_MAX

__all__ = ["fits", "minimize", "pair_groups"]

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


def pair_groups(nlab: int, per_cut: int) -> tuple[np.ndarray, np.ndarray]:
    """The swap moves of a cycle as (alphas, betas), two int32 (G, B) tables: with
    ``per_cut`` 1 the pairs (a, b), a < b, in order, one a group; otherwise the
    rounds of a round-robin over the labels (every pair once, the pairs of a round
    disjoint), each round cut into groups of at most ``per_cut`` pairs, the short
    groups filled with (0, 0) (a move that changes nothing: every group has one
    grid shape, so the solver's buffers are reused)."""
    if per_cut <= 1 or nlab < 4:
        pairs = [(a, b) for a in range(nlab) for b in range(a + 1, nlab)]
        arr = np.array(pairs, dtype=np.int32).reshape(-1, 1, 2)
        return arr[..., 0].copy(), arr[..., 1].copy()
    ring = list(range(nlab)) + ([-1] if nlab % 2 else [])  # -1: a bye
    size = len(ring)
    per_round = size // 2
    width = min(int(per_cut), per_round)
    groups = []
    for _ in range(size - 1):
        pairs = [
            (min(ring[i], ring[size - 1 - i]), max(ring[i], ring[size - 1 - i]))
            for i in range(per_round)
            if ring[i] >= 0 and ring[size - 1 - i] >= 0
        ]
        for k in range(0, len(pairs), width):
            chunk = pairs[k : k + width]
            groups.append(chunk + [(0, 0)] * (width - len(chunk)))
        ring = [ring[0], ring[-1], *ring[1:-1]]  # the circle method
    arr = np.array(groups, dtype=np.int32)
    return arr[..., 0].copy(), arr[..., 1].copy()


def minimize(
    method: str,
    u: np.ndarray,
    v: np.ndarray,
    w: np.ndarray,
    labels: np.ndarray,
    max_cycles: int,
    tol: float,
    callback: Any,
    per_cut: int = 1,
) -> tuple[np.ndarray, int, int, list, int]:
    """``method`` cycles, ``per_cut`` moves a cut (at most): expansion over the
    labels 0 .. L - 1 (``v`` a metric), swap over the label pairs (:func:`pair_groups`;
    ``v`` a semi-metric, two labels or more). ``u`` (*grid, L), ``v`` (L, L), ``w``
    (ndim, *grid) integer arrays, ``labels`` the start. Returns (labels, initial
    energy, final energy, per-cycle stats as ``minimize_labels`` reports them, the
    moves a cut); the energies are the device's (the host computes none)."""
    from ._stereo_gpu import label_groups

    nlab = int(u.shape[-1])
    if method == "expansion":
        groups, betas = label_groups(nlab, per_cut), None
    else:
        groups, betas = pair_groups(nlab, per_cut)
    return _cycles(u, v, w, labels, max_cycles, tol, callback, groups, betas)


def _cycles(u, v, w, labels, max_cycles, tol, callback, groups, betas) -> tuple:
    import cupy

    from ._stereo_gpu import MIRROR_MOVES, DeviceMoves, expansion_loop

    cost = cupy.moveaxis(cupy.asarray(u.astype(np.int32)), -1, 0)
    moves = DeviceMoves(
        cost, cupy.asarray(w, dtype=cupy.int32), "matrix", 0, groups,
        vmat=np.ascontiguousarray(v, dtype=np.int32), betas=betas,
        mirror=betas is None and MIRROR_MOVES,
    )  # fmt: skip
    lab = cupy.ascontiguousarray(cupy.asarray(labels), dtype=cupy.int32)
    stats: dict = {}
    # progress as the CPU loop reports it: after every move but the last, then
    # (total, total) once; the loop reports after every move, so each report goes out
    # one report late and the last move's is replaced by (total, total)
    held: list = []

    def progress(done: int, total: int) -> None:
        held.append((done, total))
        if len(held) > 1:
            callback(*held.pop(0))

    expansion_loop(
        moves,
        lab,
        max_cycles=max_cycles,
        tol=tol,
        callback=None if callback is None else progress,
        final=False,
        stats=stats,
    )
    if callback is not None:
        total = (
            max(1, max_cycles) * int(moves.groups.shape[0]) * int(moves.groups.shape[1])
        )
        callback(total, total)
    ncuts = int(moves.groups.shape[0])  # a cycle's
    cycles = [
        {"energy": int(e), "cuts": ncuts, "improving_moves": int(a), "skipped_moves": 0}
        for e, a in zip(stats["energies"][1:], stats["accepted"], strict=True)
    ]
    first, last = (int(e) for e in (stats["energies"][0], stats["energies"][-1]))
    return lab.get(), first, last, cycles, int(moves.groups.shape[1])
