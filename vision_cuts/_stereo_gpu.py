"""Stereo on the GPU: cost volume and the alpha-expansion loop on the device (CuPy).

The kernels are in ``kernels/stereo.cu``. :func:`cost_volume_gpu` computes the same
volume as :func:`vision_cuts.stereo.stereo_cost_volume` (census codes, truncated colour
differences, the box filter) without leaving the device.

The expansion loop (:func:`expansion_loop`) is written against a small "moves" interface
with two implementations that compute the same arrays and decisions:

* :class:`DeviceMoves`: CuPy and the ``stereo_*`` kernels. Per move group: one kernel
  builds the capacities of the move graphs (source, sink, four arc planes) straight from
  the cost volume, the weights and the current labels; :func:`vision_cuts.maxflow_grid`
  cuts them with CuPy inputs (no host copy); per move one kernel sums the energy of the
  proposal into a device scalar, one updates the labels if it is strictly lower than the
  current energy, one commits it. The host reads one int64 a cycle (the energy, for the
  stopping rule) and nothing else.
* :class:`HostMoves`: the same steps with NumPy; the specification of the kernels, run
  by the CPU tests and by ``backend="cpu"`` with ``moves_per_cut > 1``.

Several moves per cut (``moves_per_cut = B > 1``): the B moves of a group of labels are
built from the same labelling, stacked as one (B * M, N) grid with no arc between the
layers and cut together; they are then applied one after the other, each one checked
against the current energy (a move built from an older labelling is a fusion proposal:
kept only if it lowers the energy). The first move of each group is an exact expansion
move. A cycle in which no move is accepted means every move was exact and none
improved: the result is a local minimum with respect to expansion moves, as with B = 1.

Mirrored moves (``mirror``): each expansion move graph is built mirrored, terminals
exchanged and every arc reversed, which has the same cuts with the sides exchanged.
The nodes that prefer their present label then hold sink capacity instead of excess,
and those are most nodes of a move (on scikit-image's motorcycle pair about 1.1 M of
the 1.48 M stacked nodes as built, 0.2-0.4 M mirrored), so the push-relabel cuts take
less work. The cut taken is the same: the smallest optimal move, here the smallest
source side of the mirrored graph (the solver's ``side="source"``, one more BFS).

References
----------
Y. Boykov, O. Veksler and R. Zabih, "Fast approximate energy minimization via graph
cuts", IEEE TPAMI 23(11), 2001; V. Kolmogorov and R. Zabih, "What energy functions can
be minimized via graph cuts?", IEEE TPAMI 26(2), 2004.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._kernels import get_kernel, get_module
from .grid import GridEnergy
from .maxflow import maxflow_grid

__all__ = [
    "DeviceMoves",
    "HostMoves",
    "KINDS",
    "MAX_CENSUS_RADIUS",
    "cost_volume_gpu",
    "expansion_loop",
    "label_groups",
    "window_graph_gpu",
]

KINDS = {"potts": 0, "truncated_linear": 1, "linear": 2}
MAX_CENSUS_RADIUS = 3  # census codes are 64-bit: (2R + 1)^2 - 1 <= 64 bits
_BLOCK = 256
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
# expansion moves are built mirrored on the device (see the module docstring)
MIRROR_MOVES = True


def _grid(n: int) -> tuple:
    return (max(1, -(-n // _BLOCK)),)


def _module() -> Any:
    return get_module("stereo.cu")


# ---------------------------------------------------------------------- cost volume
def cost_volume_gpu(
    left: Any,
    right: Any,
    max_disparity: int,
    *,
    census_radius: int,
    ad_truncation: float,
    census_weight: float,
    window: int,
) -> Any:
    """The cost volume of :func:`vision_cuts.stereo.stereo_cost_volume` on the device.

    ``left``, ``right``: CuPy float32 (M, N, C) images, C <= 3 (validated by the
    caller). Returns a CuPy float32 (D, M, N) array, D = ``max_disparity + 1``; equal to
    the CPU volume up to the rounding of the box filter's float64 sums.
    """
    import cupy

    left = cupy.ascontiguousarray(left, dtype=cupy.float32)
    right = cupy.ascontiguousarray(right, dtype=cupy.float32)
    m, n, c = (int(v) for v in left.shape)
    ndisp = int(max_disparity) + 1
    if ndisp * m * n > _INT32_MAX:
        raise ValueError(
            f"the cost volume has {ndisp * m * n} entries; the GPU kernels index at "
            f"most {_INT32_MAX}"
        )
    mod = _module()
    census = get_kernel(mod, "stereo_census")
    codes = []
    for img in (left, right):
        code = cupy.empty((m, n), dtype=cupy.uint64)
        census(
            _grid(m * n),
            (_BLOCK,),
            (img, code, np.int32(m), np.int32(n), np.int32(c), np.int32(census_radius)),
        )
        codes.append(code)
    nbits = (2 * census_radius + 1) ** 2 - 1
    raw = cupy.empty((ndisp, m, n), dtype=cupy.float64)
    get_kernel(mod, "stereo_raw_cost")(
        _grid(raw.size),
        (_BLOCK,),
        (
            left,
            right,
            codes[0],
            codes[1],
            raw,
            np.int32(ndisp),
            np.int32(m),
            np.int32(n),
            np.int32(c),
            np.float32(ad_truncation),
            np.float64(census_weight),
            np.int32(max(nbits, 1)),
        ),
    )
    out = cupy.empty((ndisp, m, n), dtype=cupy.float32)
    get_kernel(mod, "stereo_box")(
        _grid(out.size),
        (_BLOCK,),
        (raw, out, np.int32(ndisp), np.int32(m), np.int32(n), np.int32(max(window, 1))),
    )
    return out


# ------------------------------------------------------------- Ishikawa pyramid
def window_graph_gpu(
    cost: Any,
    base: Any,
    weights: Any,
    step: int,
    count: int,
    inf: int,
    slope_div: int = 0,
) -> tuple[Any, Any, Any, int, int]:
    """The Ishikawa graph of :func:`vision_cuts.stereo._window_cut` built on the
    device in one launch (``ishikawa_window``): source, sink (count - 1, M, N) and the
    arc planes (6, count - 1, M, N), int32 CuPy arrays, then the sum of the first
    layer's capacities and the largest column capacity (one host read), which the
    caller checks against ``inf``, the -z capacity.

    ``cost`` (D, M, N) int32, ``base`` (M, N) int64, ``weights`` (2, M, N) int32, all
    CuPy and C-contiguous; ``count >= 2``; ``slope_div``: how a label's window of
    disparities is pooled (:func:`vision_cuts.stereo._window_costs`).
    """
    import cupy

    ndisp, m, n = (int(v) for v in cost.shape)
    layers = count - 1
    source = cupy.empty((layers, m, n), dtype=cupy.int32)
    sink = cupy.empty((layers, m, n), dtype=cupy.int32)
    edges = cupy.empty((6, layers, m, n), dtype=cupy.int32)
    checks = cupy.zeros(2, dtype=cupy.uint64)  # bound, then cmax in its low word
    get_kernel(_module(), "ishikawa_window")(
        _grid(m * n),
        (_BLOCK,),
        (
            cost,
            base,
            weights,
            np.int32(ndisp),
            np.int32(m),
            np.int32(n),
            np.int32(step),
            np.int32(count),
            np.int32(inf),
            np.int32(slope_div),
            source,
            sink,
            edges,
            checks[:1],
            checks[1:].view(cupy.int32)[:1],
        ),
    )
    bound, top = (int(v) for v in checks.get())
    return source, sink, edges, bound, top


# --------------------------------------------------------------------- move groups
def label_groups(ndisp: int, per_cut: int) -> np.ndarray:
    """Labels ``0 .. ndisp - 1`` in groups of equal size (one cut each), as an int32
    (G, B) table: ``G = ceil(ndisp / per_cut)`` groups of ``B = ceil(ndisp / G)``
    labels, interleaved (group g holds g, g + G, g + 2G, ...: far-apart labels compete
    for fewer pixels than neighbouring ones); missing entries are filled with the first
    labels again (all cuts of a cycle have one grid shape, so the solver's buffers are
    reused). ``per_cut = 1``: one label a group, in order."""
    per_cut = max(1, min(int(per_cut), ndisp))
    ngroups = -(-ndisp // per_cut)
    size = -(-ndisp // ngroups)
    order = np.arange(ngroups * size) % ndisp
    return np.ascontiguousarray(order.reshape(size, ngroups).T, dtype=np.int32)


def _vmat(a: Any, b: Any, kind: int, trunc: int, xp: Any = np) -> Any:
    diff = xp.abs(a.astype(np.int64) - b)
    if kind == 0:
        return (diff != 0).astype(np.int64)
    if kind == 1:
        return xp.minimum(diff, trunc)
    return diff


# ------------------------------------------------------------------- host reference
def _mirror(energy: GridEnergy) -> GridEnergy:
    """The mirrored graph of a 2-D grid with face arcs (NumPy): terminals exchanged,
    every arc p -> q moved to q -> p. The same cuts, the sides exchanged."""
    e = np.asarray(energy.edges)
    back = np.zeros_like(e)
    back[1][:, 1:] = e[0][:, :-1]
    back[0][:, :-1] = e[1][:, 1:]
    back[3][1:, :] = e[2][:-1, :]
    back[2][:-1, :] = e[3][1:, :]
    return GridEnergy._trusted(
        np.asarray(energy.sink), np.asarray(energy.source), back, 0
    )


class HostMoves:
    """The move steps in NumPy: the specification of the ``stereo_*`` kernels.

    ``cost`` (D, M, N) and ``w`` (2, M, N) integer arrays; ``labels`` is an int32 (M, N)
    array updated in place by :meth:`apply`.
    """

    backend = "cpu"

    def __init__(
        self,
        cost: Any,
        w: Any,
        kind: str,
        trunc: int,
        groups: Any,
        mirror: bool = False,
    ) -> None:
        self.mirror = bool(mirror)
        self.cost = np.asarray(cost, dtype=np.int64)
        self.w = np.asarray(w, dtype=np.int64)
        self.kind = KINDS[kind]
        self.trunc = int(trunc)
        self.groups = np.asarray(groups, dtype=np.int32)
        self.e_cur = _INT64_MAX
        self.e_new = 0
        self.accepted = 0

    def energy(self, d: np.ndarray) -> int:
        c, w, k, t = self.cost, self.w, self.kind, self.trunc
        d = d.astype(np.int64)
        e = np.take_along_axis(c, d[None], axis=0).sum()
        e += (w[0, :, :-1] * _vmat(d[:, :-1], d[:, 1:], k, t)).sum()
        e += (w[1, :-1, :] * _vmat(d[:-1, :], d[1:, :], k, t)).sum()
        return int(e)

    def init(self, labels: np.ndarray) -> None:
        self.e_cur = self.energy(labels)

    def current_energy(self) -> int:
        return int(self.e_cur)

    def counters(self) -> tuple[int, int]:
        """(current energy, moves accepted so far)."""
        return int(self.e_cur), self.accepted

    def build(self, labels: np.ndarray, group: int) -> GridEnergy:
        """The capacities of the group's stacked move graphs, (B * M, N)."""
        c, w, k, t = self.cost, self.w, self.kind, self.trunc
        m, n = labels.shape
        f = labels.astype(np.int64)
        alphas = self.groups[group]
        nb = len(alphas)
        src = np.empty((nb, m, n), np.int64)
        snk = np.empty((nb, m, n), np.int64)
        edges = np.zeros((4, nb, m, n), np.int64)
        for b, a in enumerate(alphas.tolist()):
            s = c[a].copy()
            tt = np.take_along_axis(c, f[None], axis=0)[0].copy()
            av = np.full_like(f, a)
            for plane, (tail, head) in (
                (0, ((slice(None), slice(None, -1)), (slice(None), slice(1, None)))),
                (2, ((slice(None, -1), slice(None)), (slice(1, None), slice(None)))),
            ):
                wk = w[plane // 2][tail]
                big_a = wk * _vmat(f[tail], f[head], k, t)
                big_b = wk * _vmat(f[tail], av[tail], k, t)
                big_c = wk * _vmat(av[tail], f[head], k, t)
                s[tail] += np.maximum(big_c - big_a, 0)
                tt[tail] += np.maximum(big_a - big_c, 0)
                tt[head] += big_c
                edges[plane, b][tail] = big_b + big_c - big_a
            lo = np.minimum(s, tt)
            src[b], snk[b] = s - lo, tt - lo
        shape = (nb * m, n)
        stacked = GridEnergy._trusted(
            src.reshape(shape).astype(np.int32),
            snk.reshape(shape).astype(np.int32),
            edges.reshape((4, *shape)).astype(np.int32),
            0,
        )
        return _mirror(stacked) if self.mirror else stacked

    def cut(self, energy: GridEnergy) -> Any:
        """The device's cut of the built graph as ``apply`` reads it (1 = take the
        move's label), the smallest optimal move: the smallest sink side of a plain
        graph, the smallest source side of a mirrored one. The CPU solver's source
        side is the smallest (the nodes the source reaches), so a plain graph is cut
        mirrored here."""
        graph = energy if self.mirror else _mirror(energy)
        return 1 - maxflow_grid(graph, backend="cpu").labels

    def apply(self, labels: np.ndarray, cut: Any, group: int, layer: int) -> None:
        m, n = labels.shape
        a = int(self.groups[group, layer])
        mask = np.asarray(cut).reshape(-1, m, n)[layer].astype(bool)
        proposal = np.where(mask, a, labels)
        self.e_new += self.energy(proposal)
        if self.e_new < self.e_cur:
            labels[...] = proposal
            self.accepted += 1
        self.e_cur = min(self.e_cur, self.e_new)
        self.e_new = 0


# ------------------------------------------------------------------------ on device
class DeviceMoves:
    """The move steps on the device (CuPy, ``kernels/stereo.cu``); see HostMoves.

    ``cost`` (L, *grid) and ``w`` (ndim, *grid) integer arrays on a 2-D or 3-D grid
    (faces: 4 or 6 neighbours); the smoothness ``kind`` of ``KINDS`` with ``trunc``,
    or ``"matrix"`` with ``vmat``, an (L, L) integer metric. ``accepted`` counts the
    moves that lowered the energy. ``betas`` (the shape of ``groups``): alpha-beta
    swap moves instead, group g's move b swapping ``groups[g, b]`` and ``betas[g,
    b]`` (``swap_move`` of ``kernels/stereo.cu``; ``vmat`` a semi-metric).
    ``mirror``: expansion move graphs built mirrored (see the module docstring)."""

    backend = "gpu"

    def __init__(
        self,
        cost: Any,
        w: Any,
        kind: str,
        trunc: int,
        groups: Any,
        vmat: Any = None,
        betas: Any = None,
        mirror: bool = False,
    ) -> None:
        import cupy

        self.cp = cupy
        if mirror and betas is not None:
            raise ValueError("mirror applies to expansion moves only")
        self.mirror = bool(mirror)
        self.cost = cupy.ascontiguousarray(cost, dtype=cupy.int32)
        self.w = cupy.ascontiguousarray(w, dtype=cupy.int32)
        nlab, *grid = (int(v) for v in self.cost.shape)
        ndim = len(grid)
        nz, m, n = (1, *grid) if ndim == 2 else grid
        self.grid = tuple(grid)
        self.m, self.n = m, n
        self.nodes = nz * m * n
        if kind == "matrix":
            self.kind = np.int32(3)
            self.vmat = cupy.ascontiguousarray(cupy.asarray(vmat), dtype=cupy.int32)
        else:
            self.kind = np.int32(KINDS[kind])
            self.vmat = cupy.zeros(1, dtype=cupy.int32)
        self.trunc = np.int32(trunc)
        self.groups = cupy.asarray(np.ascontiguousarray(groups, dtype=np.int32))
        self.rows = [self.groups[g] for g in range(int(self.groups.shape[0]))]
        self.swap = np.int32(betas is not None)
        if betas is None:
            self.brows = self.rows  # (not read by the expansion kernels)
        else:
            bet = cupy.asarray(np.ascontiguousarray(betas, dtype=np.int32))
            if bet.shape != self.groups.shape:
                raise ValueError(
                    f"betas must have the shape of groups {self.groups.shape}, got "
                    f"{bet.shape}"
                )
            self.brows = [bet[g] for g in range(int(bet.shape[0]))]
        nb = int(self.groups.shape[1])
        shape = (nb * m, n) if ndim == 2 else (nb * nz, m, n)
        if max(2 * ndim * nb, nlab) * self.nodes > _INT32_MAX:
            raise ValueError(
                f"{nb} stacked move graphs of {self.grid} nodes and {nlab} labels are "
                "too many for the GPU kernels' int32 indices; lower moves_per_cut"
            )
        self.source = cupy.empty(shape, dtype=cupy.int32)
        self.sink = cupy.empty(shape, dtype=cupy.int32)
        self.edges = cupy.empty((2 * ndim, *shape), dtype=cupy.int32)
        # state[0] = energy of the proposal being checked, state[1] = current energy,
        # state[2] = moves accepted
        self.state = cupy.asarray(np.array([0, _INT64_MAX, 0], dtype=np.int64))
        self.dummy_cut = cupy.zeros(1, dtype=cupy.uint8)
        mod = _module()
        self.k_move = get_kernel(mod, "swap_move" if self.swap else "stereo_move")
        self.k_energy = get_kernel(mod, "stereo_energy")
        self.k_accept = get_kernel(mod, "stereo_accept")
        self.k_commit = get_kernel(mod, "stereo_commit")
        self.geometry = (
            np.int32(ndim), np.int32(nz), np.int32(m), np.int32(n), self.kind,
            self.trunc, np.int32(nlab),
        )  # fmt: skip

    def _commit(self) -> None:
        self.k_commit((1,), (1,), (self.state[0:1], self.state[1:2], self.state[2:3]))

    def _energy(self, labels: Any, cut: Any, group: int, layer: int) -> None:
        use = cut is not None
        self.k_energy(
            _grid(self.nodes),
            (_BLOCK,),
            (
                self.cost,
                self.w,
                labels,
                cut if use else self.dummy_cut,
                self.rows[group],
                self.brows[group],
                np.int32(layer),
                np.int32(use),
                self.swap,
                self.state,  # accumulates into state[0]
                self.vmat,
                *self.geometry,
            ),
        )

    def init(self, labels: Any) -> None:
        self.state[...] = self.cp.asarray(np.array([0, _INT64_MAX, 0], dtype=np.int64))
        self._energy(labels, None, 0, 0)
        self._commit()
        self.state[2] = 0

    def current_energy(self) -> int:
        return int(self.state[1].get())

    def counters(self) -> tuple[int, int]:
        """(current energy, moves accepted so far): one host read."""
        e, acc = self.state[1:3].get().tolist()
        return int(e), int(acc)

    def build(self, labels: Any, group: int) -> GridEnergy:
        nb = int(self.groups.shape[1])
        self.k_move(
            _grid(nb * self.nodes),
            (_BLOCK,),
            (
                self.cost,
                self.w,
                labels,
                self.rows[group],
                *((self.brows[group],) if self.swap else ()),
                self.vmat,
                self.source,
                self.sink,
                self.edges,
                np.int32(nb),
                *self.geometry,
                *(() if self.swap else (np.int32(self.mirror),)),
            ),
        )
        return GridEnergy._trusted(self.source, self.sink, self.edges, 0)

    def cut(self, energy: GridEnergy) -> Any:
        """The group's cut as ``apply`` reads it (1 = take the move's label), the
        smallest optimal move: the nodes that reach the sink of a plain graph, the
        smallest source side of a mirrored one."""
        if not self.mirror:
            return maxflow_grid(energy, backend="gpu").labels
        from ._maxflow_gpu import maxflow_grid_gpu

        _, labels, _ = maxflow_grid_gpu(
            energy.source, energy.sink, energy.edges, side="source"
        )
        return labels ^ 1

    def apply(self, labels: Any, cut: Any, group: int, layer: int) -> None:
        self._energy(labels, cut, group, layer)
        self.k_accept(
            _grid(self.nodes),
            (_BLOCK,),
            (
                labels,
                cut,
                self.rows[group],
                self.brows[group],
                np.int32(layer),
                self.swap,
                self.state[0:1],
                self.state[1:2],
                np.int32(self.nodes),
            ),
        )
        self._commit()


# ------------------------------------------------------------------------ the loop
def expansion_loop(
    moves: Any,
    labels: Any,
    *,
    max_cycles: int,
    tol: float = 0.0,
    callback: Any = None,
    final: bool = True,
    stats: dict | None = None,
) -> Any:
    """Alpha-expansion cycles over ``moves.groups`` (or swap cycles, where ``moves``
    builds swap moves); ``labels`` (int32) is updated in place and returned.

    ``callback(done, total)`` after each move (``total`` the moves of ``max_cycles``
    cycles), and with ``final`` once more as ``(total, total)`` where the cycles stop
    early, so that the last report always reads ``done == total``.

    A cycle tries every group once: one cut for the group's stacked moves, then each
    move applied in turn if it lowers the energy. Stops after ``max_cycles`` cycles,
    after a cycle that lowered the energy by nothing, or by at most ``tol`` times the
    energy before it. ``stats`` (optional dict) receives ``cycles``, ``cuts``,
    ``moves``, ``energies`` (after each cycle; the first is the initial energy) and
    ``accepted`` (the moves of each cycle that lowered the energy). The host reads
    the energy and the count once a cycle.
    """
    groups = moves.groups
    ngroups, per_cut = int(groups.shape[0]), int(groups.shape[1])
    total = max(1, max_cycles) * ngroups * per_cut
    moves.init(labels)
    energies = [moves.current_energy()]
    accepted: list = []
    taken = 0
    done = cuts = cycles = 0
    for _ in range(max_cycles):
        cycles += 1
        for g in range(ngroups):
            cut = moves.cut(moves.build(labels, g))
            cuts += 1
            for b in range(per_cut):
                moves.apply(labels, cut, g, b)
                done += 1
                if callback is not None:
                    callback(done, total)
        energy, now = moves.counters()
        energies.append(energy)
        accepted.append(now - taken)
        taken = now
        before, after = energies[-2], energies[-1]
        if after >= before or (tol > 0 and before - after <= tol * abs(before)):
            break
    if callback is not None and final and done < total:
        callback(total, total)
    if stats is not None:
        stats.update(
            cycles=cycles, cuts=cuts, moves=done, energies=energies, accepted=accepted
        )
    return labels
