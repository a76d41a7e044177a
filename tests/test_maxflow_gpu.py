"""GPU grid max-flow (``vision_cuts._maxflow_gpu``) against the CPU solver.

Every test here needs CuPy and a CUDA device (marker ``gpu``; skipped without them
unless ``VISION_CUTS_REQUIRE_GPU=1``). Flows must equal the CPU flow exactly and every
GPU cut must have capacity equal to the flow (a minimum cut); label images are not
compared, since minimum cuts are not unique. Repeated solves catch races.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from vision_cuts import grid_energy, grid_graph, maxflow_grid
from vision_cuts._maxflow_cpu import maxflow_grid_cpu
from vision_cuts.datasets import synthetic
from vision_cuts.exceptions import DeviceMemoryError

pytestmark = pytest.mark.gpu

INT32_MAX = 2**31 - 1
# small tiles put most arcs on a tile border: the checkerboard hand-over is exercised
SMALL_TILE = {2: (4, 4, 1), 3: (4, 2, 2)}


def _cupy():
    return pytest.importorskip("cupy")


def _solve_gpu(g, **kw):
    from vision_cuts._maxflow_gpu import maxflow_grid_gpu

    return maxflow_grid_gpu(g.source, g.sink, g.edges, max_rounds=5000, **kw)


def _check(g, repeats=2, **kw):
    """GPU flow == CPU flow and GPU cut capacity == flow, ``repeats`` times."""
    f_cpu, _, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
    for _ in range(repeats):
        f, labels, stats = _solve_gpu(g, **kw)
        assert stats["backend"] == "gpu"
        assert labels.shape == g.shape and labels.dtype == np.uint8
        assert f == f_cpu, (f, f_cpu, stats)
        assert g.energy(labels.get()) == f
    return f_cpu


def _big_graph(shape, rng):
    """Capacities near int32 max, every arc pair summing to at most 2**31 - 1."""
    nd = len(shape)
    s = rng.integers(INT32_MAX // 2, INT32_MAX, size=shape, endpoint=True)
    t = rng.integers(INT32_MAX // 2, INT32_MAX, size=shape, endpoint=True)
    s[rng.random(shape) < 0.3] = 0
    e = np.zeros((2 * nd, *shape), dtype=np.int64)
    for d in range(nd):
        ax = nd - 1 - d
        tail = [slice(None)] * nd
        head = [slice(None)] * nd
        tail[ax], head[ax] = slice(None, -1), slice(1, None)
        f = rng.integers(0, INT32_MAX, size=e[2 * d][tuple(tail)].shape, endpoint=True)
        fwd = (f * rng.random(f.shape)).astype(np.int64)
        e[2 * d][tuple(tail)] = fwd
        e[2 * d + 1][tuple(head)] = f - fwd
    return grid_graph(s.astype(np.int32), t.astype(np.int32), e.astype(np.int32))


@pytest.mark.parametrize(
    "shape",
    [
        (1, 1),
        (1, 9),
        (7, 1),
        (2, 2),
        (17, 33),
        (64, 64),
        (45, 130),
        (1, 1, 1),
        (3, 4, 5),
        (9, 17, 33),
        (20, 20, 20),
    ],
)
@pytest.mark.parametrize("small_tile", [False, True])
def test_random_grids_match_cpu(shape, small_tile, rng):
    _cupy()
    kw = {"tile": SMALL_TILE[len(shape)]} if small_tile else {}
    for high, density, directed in [
        (3, 0.5, True),
        (100, 0.8, True),
        (10**6, 1.0, False),
    ]:
        s, t, e = synthetic.random_grid_graph(
            shape, rng, high=high, density=density, directed=directed
        )
        _check(grid_graph(s, t, e), **kw)


@pytest.mark.parametrize("shape", [(31, 29), (6, 7, 8)])
def test_near_int32_capacities(shape, rng):
    _cupy()
    for _ in range(3):
        g = _big_graph(shape, rng)
        f = _check(g, tile=SMALL_TILE[len(shape)])
        _check(g)
        assert f > INT32_MAX  # the flow itself needs int64


@pytest.mark.parametrize(
    "knobs",
    [
        {"local_iters": 1},
        {"local_iters": 100},
        {"sweeps_per_relabel": 1},
        {"sweeps_per_relabel": 16, "local_iters": 3},
        {"sweeps_per_relabel": 2, "tail_sweeps": 7},
        {"sweeps_per_relabel": 2, "tail_sweeps": 3, "tail_iters": 2},
        {"graph": False},
        {"walk_below": 0},
        {"walk_below": 10**9},
        {"walk_below": 10**9, "sweeps_per_relabel": 1, "local_iters": 1},
        {"bfs_mode": 0},
        {"bfs_mode": 31},
        {"bfs_mode": 3, "walk_below": 10**9},
        {"bfs_mode": 28, "sweeps_per_relabel": 1},
        {"persist_below": 10**9},
        {"persist_below": 10**9, "bfs_mode": 31, "tile": (4, 4, 1)},
        {"persist_below": 0, "bfs_mode": 0},
        {"bfs_mode": 63, "bfs_tile": (2, 1, 1)},
        {"incremental_below": 10**9, "bfs_mode": 0},
        {"incremental_below": 10**9, "bfs_mode": 0, "tile": (4, 4, 1)},
        {"incremental_below": 10**9, "bfs_mode": 0, "bfs_tile": (2, 1, 1)},
        {"incremental_below": 10**9, "bfs_mode": 0, "local_iters": 1},
        {"incremental_below": 10**9, "bfs_mode": 0, "persist_below": 10**9},
    ],
)
@pytest.mark.parametrize("level", [True, False])
def test_tuning_knobs_do_not_change_the_answer(knobs, level, rng, monkeypatch):
    """Every knob, with the 2-D level-synchronous BFS (the default there) and with the
    tile BFS for every global relabel."""
    _cupy()
    from vision_cuts import _maxflow_gpu

    monkeypatch.setattr(_maxflow_gpu, "_BFS_LEVEL", level)
    s, t, e = synthetic.random_grid_graph((57, 70), rng, high=50)
    _check(grid_graph(s, t, e), repeats=1, **knobs)
    s, t, e = synthetic.random_grid_graph((9, 13, 11), rng, high=50)
    _check(grid_graph(s, t, e), repeats=1, **knobs)


@pytest.mark.parametrize(
    "bfs_tile",
    [
        {2: (2, 1, 1), 3: (2, 1, 1)},
        {2: (8, 4, 1), 3: (4, 4, 2)},
        {2: (32, 32, 1), 3: (16, 8, 8)},
    ],
)
def test_bfs_tiles_do_not_change_the_answer(bfs_tile, rng, monkeypatch):
    """The global relabel has tiles of its own; any shape gives the exact distances
    (the tile BFS for every relabel in 2-D too)."""
    _cupy()
    from vision_cuts import _maxflow_gpu

    monkeypatch.setattr(_maxflow_gpu, "_BFS_LEVEL", False)
    for shape in [(45, 61), (9, 13, 11)]:
        s, t, e = synthetic.random_grid_graph(shape, rng, high=50)
        _check(grid_graph(s, t, e), repeats=1, bfs_tile=bfs_tile[len(shape)])


def test_incremental_relabels_run_and_agree(rng):
    """Incremental global relabels (distances kept where the pushes left them exact)
    run in the rounds asked for and give the answers of full ones, every time."""
    _cupy()
    for shape in [(120, 90), (14, 17, 15)]:
        s, t, e = synthetic.random_grid_graph(shape, rng, high=40)
        g = grid_graph(s, t, e)
        f_cpu, _, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
        for kw in ({}, {"sweeps_per_relabel": 1, "local_iters": 2}):
            f, labels, st = _solve_gpu(g, bfs_mode=0, incremental_below=10**9, **kw)
            assert f == f_cpu and g.energy(labels.get()) == f
            if st["global_relabels"] > 1:
                assert st["incremental_relabels"] == st["global_relabels"] - 1
            f0, labels0, st0 = _solve_gpu(g, bfs_mode=0, incremental_below=0, **kw)
            assert st0["incremental_relabels"] == 0
            assert f0 == f and g.energy(labels0.get()) == f


def test_the_2d_schedule_by_grid_size(rng, monkeypatch):
    """2-D grids of fewer than _SMALL_2D_BELOW nodes default to the small-grid schedule
    (push tiles of 32 x 8, 16 local rounds, 32 in the tail), larger ones to 32 x 32
    tiles and 32 rounds, and given settings win; all exact (the bound lowered here)."""
    _cupy()
    from vision_cuts import _maxflow_gpu

    monkeypatch.setattr(_maxflow_gpu, "_REUSE", False)
    g = grid_graph(*synthetic.random_grid_graph((100, 90), rng, high=30))
    f_cpu, _, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
    for bound, kw, want in [
        (1 << 21, {}, ((32, 8, 1), (16, 16, 1), 16, 32)),
        (1000, {}, ((32, 32, 1), (16, 16, 1), 32, 32)),
        (1 << 21, {"local_iters": 24}, ((32, 8, 1), (16, 16, 1), 24, 24)),
        (1 << 21, {"tile": (16, 16, 1)}, ((16, 16, 1), (16, 16, 1), 16, 32)),
    ]:
        monkeypatch.setattr(_maxflow_gpu, "_SMALL_2D_BELOW", bound)
        f, labels, st = _solve_gpu(g, **kw)
        assert f == f_cpu and g.energy(labels.get()) == f
        got = (st["tile"], st["bfs_tile"], st["local_iters"], st["tail_iters"])
        assert got == want


def test_3d_long_solves_take_the_tail_pace_after_three_rounds(rng):
    """6-connected 3-D grids run the tail pace (4 sweeps a relabel) in every round after
    the third: an Ishikawa-style graph (columns with infinite backward arcs, the flow
    running up them) needs many rounds; exact, and the work counters show the pace."""
    _cupy()
    from vision_cuts.stereo import _ISHIKAWA_INF

    layers, m, n = 24, 20, 22
    src = np.zeros((layers, m, n), np.int64)
    snk = np.zeros((layers, m, n), np.int64)
    cost = rng.integers(0, 60, size=(layers + 1, m, n))
    src[0], snk[-1] = cost[0], cost[-1]
    e = np.zeros((6, layers, m, n), np.int64)
    w = rng.integers(0, 25, size=(2, m, n))
    e[0, :, :, :-1] = w[0][None, :, :-1]
    e[1, :, :, 1:] = w[0][None, :, :-1]
    e[2, :, :-1, :] = w[1][None, :-1, :]
    e[3, :, 1:, :] = w[1][None, :-1, :]
    e[4, :-1] = cost[1:-1]
    e[5, 1:] = _ISHIKAWA_INF
    g = grid_graph(src, snk, e)
    f_cpu, _, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
    f, labels, st = _solve_gpu(g)
    assert f == f_cpu and g.energy(labels.get()) == f
    assert (st["tail_after"], st["tail_sweeps"], st["sweeps_per_relabel"]) == (3, 4, 1)
    rounds = st["global_relabels"] - 1
    assert rounds > 3
    # rounds 1-3 one sweep each (or four in the tail), every later one four
    assert 3 + 4 * (rounds - 3) <= st["sweeps"] <= 4 * rounds
    # given settings win over the pace
    f, labels, st = _solve_gpu(g, tail_sweeps=1)
    assert f == f_cpu and st["sweeps"] == st["global_relabels"] - 1


def test_incremental_relabels_by_default_on_large_2d_grids(rng, monkeypatch):
    """The default turns incremental relabels on for 2-D grids from _INCR_MIN_NODES
    nodes (lowered here so that a small grid qualifies), not for 3-D ones."""
    _cupy()
    from vision_cuts import _maxflow_gpu

    monkeypatch.setattr(_maxflow_gpu, "_INCR_MIN_NODES", 1000)
    for shape in [(150, 140), (12, 11, 10)]:
        s, t, e = synthetic.random_grid_graph(shape, rng, high=30)
        g = grid_graph(s, t, e)
        f_cpu, _, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
        f, labels, st = _solve_gpu(g)
        assert f == f_cpu and g.energy(labels.get()) == f
        if len(shape) == 2:
            assert st["incremental_below"] == int(
                g.source.size * _maxflow_gpu._INCR_BELOW
            )
        else:
            assert st["incremental_below"] == 0 and st["incremental_relabels"] == 0


def test_small_2d_grids_push_with_more_registers(rng, monkeypatch):
    """With 1024-node push tiles, 2-D grids of fewer than _SMALL_2D nodes compile the
    push kernel for one resident block a SM (PR_MIN_BLOCKS 1), larger ones and 3-D
    grids for two; 8-connected grids (tiles of 256 nodes) for four and five; all are
    exact (the bound lowered here so that a small grid takes the other path)."""
    _cupy()
    from vision_cuts import _maxflow_gpu

    monkeypatch.setattr(_maxflow_gpu, "_REUSE", False)
    for bound, shape, want in [
        (1 << 20, (90, 70), 1),
        (100, (90, 70), 2),
        (1 << 20, (12, 11, 10), 2),  # 3-D: tiles of 16 x 8 x 8, 1024 threads
        (1 << 20, (8, 90, 70), 4),  # 8-connected: tiles of 32 x 8
        (100, (8, 90, 70), 5),
    ]:
        monkeypatch.setattr(_maxflow_gpu, "_SMALL_2D", bound)
        diag = shape[0] == 8  # eight arc planes: the default tiles
        if diag:
            s, t, _ = synthetic.random_grid_graph(shape[1:], rng, high=40)
            g = grid_graph(s, t, rng.integers(0, 41, shape).astype(np.int32))
        else:
            g = grid_graph(*synthetic.random_grid_graph(shape, rng, high=40))
        f_cpu, _, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
        kw = {"tile": (32, 32, 1)} if len(shape) == 2 else {}
        f, labels, st = _solve_gpu(g, **kw)
        assert f == f_cpu and g.energy(labels.get()) == f
        assert st["push_min_blocks"] == want


# shapes that are and are not multiples of 32, thin ones, incremental relabels: the
# cases on which another BFS must give the tile BFS's solve
_BFS_CASES = [
    ((130, 110), {}),
    ((64, 96), {"sweeps_per_relabel": 1}),
    ((1, 300), {}),
    ((300, 1), {}),
    ((33, 31), {"tile": (8, 4, 1)}),
    ((150, 140), {"bfs_mode": 0, "incremental_below": 10**9}),
]


def test_bit_parallel_bfs_gives_the_block_bfs_distances(rng, monkeypatch):
    """The 2-D option _BFS_WARP relabels with gbfs_warp (one warp a 32 x 32 tile, bit
    masks); its distances are the block BFS's, so the whole solve is the same: flow,
    cut and the active count after every global relabel, on shapes that are and are
    not multiples of 32, thin ones, with incremental relabels too."""
    _cupy()
    from vision_cuts import _maxflow_gpu

    monkeypatch.setattr(_maxflow_gpu, "_REUSE", False)
    monkeypatch.setattr(_maxflow_gpu, "_BFS_WARP", True)
    monkeypatch.setattr(_maxflow_gpu, "_BFS_LEVEL", False)  # (else the full relabels)
    for shape, kw in _BFS_CASES:
        for high in (3, 10**6):
            s, t, e = synthetic.random_grid_graph(shape, rng, high=high)
            g = grid_graph(s, t, e)
            f_cpu, _, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
            f, labels, st = _solve_gpu(g, **kw)
            assert st["bfs_warp"] and st["bfs_tile"] == (32, 32, 1)
            assert f == f_cpu and g.energy(labels.get()) == f
            f0, labels0, st0 = _solve_gpu(g, bfs_tile=(16, 16, 1), **kw)
            assert not st0["bfs_warp"]
            monkeypatch.setattr(_maxflow_gpu, "_BFS_WARP", False)
            st1 = _solve_gpu(g, **kw)[2]  # the default: the block BFS
            monkeypatch.setattr(_maxflow_gpu, "_BFS_WARP", True)
            assert not st1["bfs_warp"] and st1["bfs_tile"] != (32, 32, 1)
            assert st1["active"] == st["active"]
            assert f0 == f and st0["active"] == st["active"]
            np.testing.assert_array_equal(labels0.get(), labels.get())


def _bfs_oracle(rc, tcap):
    """Distances to the sink over residual arcs (the planes of ``rc`` in the documented
    order: 4 or 8 of them), 1 where the sink arc is residual, VC_INF where the sink
    cannot be reached: level by level."""
    from vision_cuts._maxflow_gpu import _INF
    from vision_cuts.grid import neighbour_offsets

    ny, nx = tcap.shape

    def part(step, n):  # the tails u with u + step inside, and those heads
        tails = slice(max(0, -step), n - max(0, step))
        return tails, slice(max(0, step), n + min(0, step))

    steps = neighbour_offsets(2, rc.shape[0])
    d = np.full(tcap.shape, _INF, dtype=np.int64)
    front = tcap > 0
    d[front] = 1
    level = 1
    while front.any():
        new = np.zeros_like(front)
        for k, (dy, dx) in enumerate(steps):
            (ty, hy), (tx, hx) = part(int(dy), ny), part(int(dx), nx)
            new[ty, tx] |= (rc[k][ty, tx] > 0) & front[hy, hx]
        new &= d == _INF
        level += 1
        d[new] = level
        front = new
    return d


_KINDS = ("dense", "sparse", "maze")


@pytest.mark.parametrize(("defer", "planes"), [(False, 4), (True, 4), (True, 8)])
@pytest.mark.parametrize("levels", [1, 5, 31])
def test_level_bfs_distances_equal_a_level_by_level_oracle(
    levels, defer, planes, rng, monkeypatch
):
    """gbfs_level (regions, bit masks, L levels between grid barriers) writes the
    exact BFS distances: compared node by node with a NumPy BFS, 4- and 8-connected, on
    shapes that are and are not multiples of 32, thin ones, one node, long mazes and
    lines (deep BFS, many phases; the lines beyond the 63 phases whose levels LV_DEFER
    keeps in shared memory, so both of its ways of writing a height run), regions 64
    words wide; with the heights written at the end of each phase and after the last
    one."""
    _cupy()
    from vision_cuts import _maxflow_gpu

    monkeypatch.setattr(_maxflow_gpu, "_REUSE", False)
    monkeypatch.setattr(_maxflow_gpu, "_BFS_LEVEL", True)
    monkeypatch.setattr(_maxflow_gpu, "_BFS_LEVEL_L", levels)
    monkeypatch.setattr(_maxflow_gpu, "_LV_DEFER", defer)
    deep = 0  # mazes deeper than the phases LV_DEFER keeps
    shapes = [(1, 1), (1, 300), (300, 1), (33, 31), (130, 110), (64, 96), (257, 45)]
    cases = [(shape, kind) for shape in shapes + [(700, 1000)] for kind in _KINDS]
    if levels < 31:  # (two rows of 8438 words: regions 64 words wide)
        cases.append(((2, 270_000), "dense"))
    # one sink arc a row, at its end, and arcs along the rows only: as deep as wide
    cases += [((3, 2500), "line"), ((40, 1200), "line")]
    for shape, kind in cases:
        s, t, e = synthetic.random_grid_graph(shape, rng, high=5)
        if planes == 8:  # diagonals too
            e = rng.integers(0, 6, (8, *shape)).astype(np.int32)
        if kind == "sparse":  # few arcs and sink arcs: many unreachable nodes
            e[rng.random(e.shape) < 0.6] = 0
            t[rng.random(t.shape) < 0.98] = 0
        elif kind == "maze":  # one sink arc, arcs mostly along rows: deep BFS
            e[2:][rng.random(e[2:].shape) < 0.97] = 0
            t[:] = 0
            t[shape[0] // 2, shape[1] - 1] = 5
            s[:] = 0
        elif kind == "line":
            e[:2], e[2:], t[:], s[:] = 1, 0, 0, 0
            t[:, -1] = 1
        g = grid_graph(s, t, e)
        solver = _maxflow_gpu._Solver(g.shape, (32, 32, 1), (16, 16, 1), k=planes)
        assert solver.level is not None and solver.level[4] == levels
        assert solver.lv_defer == defer
        solver.load(g.source, g.sink, g.edges, True)
        solver.init()
        solver.h.fill(-7)  # every height must be written by the relabel
        solver.out.fill(1)  # as if nodes were active: the relabel must run
        solver.global_relabel(mode=0)
        rc = solver.rc.get().reshape((planes, *shape))
        tcap = solver.tcap.get().reshape(shape)
        want = _bfs_oracle(rc, tcap)
        got = solver.h.get().reshape(shape)
        np.testing.assert_array_equal(got, want, err_msg=f"{shape} {kind}")
        finite = want[want < _maxflow_gpu._INF]
        deep += int(finite.size > 0 and finite.max() > 2 + 63 * levels)
        assert solver.lctrl.get().tolist() == [0] * 8  # left for the next launch
        # the count of the same launch: active nodes, the push tiles holding one
        active = (solver.ex.get().reshape(shape) > 0) & (want < _maxflow_gpu._INF)
        assert int(solver.out.get()[0]) == int(active.sum()), (shape, kind)
        ny, nx = shape
        tiles = np.zeros((-(-ny // 32), -(-nx // 32)), dtype=bool)
        ys, xs = np.nonzero(active)
        tiles[ys // 32, xs // 32] = True
        flags = solver.pflags.get().reshape(tiles.shape) != 0
        np.testing.assert_array_equal(flags, tiles, err_msg=f"{shape} {kind}")
        assert solver.cnt.get().tolist() == [0, 0]
    assert deep >= (2 if levels < 31 else 1)  # (the lines)


def test_push_kernel_keeps_the_level_bfs_masks(rng, monkeypatch):
    """With push tiles 32 nodes wide the push kernel keeps gbfs_level's bit masks (arc
    planes, sink arcs, nodes with excess) up to date, so that no pass over the arc
    planes runs before a relabel: after every sweep they equal a fresh gbfs_wmask."""
    _cupy()
    from vision_cuts import _maxflow_gpu

    monkeypatch.setattr(_maxflow_gpu, "_REUSE", False)
    monkeypatch.setattr(_maxflow_gpu, "_BFS_LEVEL", True)
    changed = 0
    for shape in [(130, 110), (33, 31), (64, 96), (1, 300), (300, 1), (250, 333)]:
        for high in (3, 10**6):
            s, t, e = synthetic.random_grid_graph(shape, rng, high=high)
            g = grid_graph(s, t, e)
            solver = _maxflow_gpu._Solver(g.shape, (32, 32, 1), (16, 16, 1))
            assert solver.track
            solver.load(g.source, g.sink, g.edges, True)
            solver.init()
            solver.global_relabel(mode=0)
            for _ in range(4):
                before = solver.mask.get()
                solver.sweeps(1, 8)
                kept = solver.mask.get()
                changed += int((kept != before).any())
                solver.out.fill(1)  # (gbfs_wmask is a no-op once the count is 0)
                solver._wmask(init=4)
                fresh = solver.mask.get()
                np.testing.assert_array_equal(kept, fresh, err_msg=str(shape))
                solver.global_relabel(mode=0)
    assert changed >= 12  # the sweeps did change the masks


@pytest.mark.parametrize("levels", [1, 7, 31])
def test_level_bfs_solve_is_the_tile_bfs_solve(levels, rng, monkeypatch):
    """With the level-synchronous BFS the whole solve is the tile BFS's (the same
    exact distances): flow, cut and the active count after every global relabel, also
    with incremental relabels (which keep the tile BFS) and the fused BFS modes."""
    _cupy()
    from vision_cuts import _maxflow_gpu

    monkeypatch.setattr(_maxflow_gpu, "_REUSE", False)
    monkeypatch.setattr(_maxflow_gpu, "_BFS_LEVEL_L", levels)
    more = [((90, 70), {"bfs_mode": 3}), ((120, 100), {"walk_below": 10**9})]
    for shape, kw in [*_BFS_CASES, *more]:
        for high in (3, 10**6):
            s, t, e = synthetic.random_grid_graph(shape, rng, high=high)
            g = grid_graph(s, t, e)
            f_cpu, _, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
            monkeypatch.setattr(_maxflow_gpu, "_BFS_LEVEL", True)
            f, labels, st = _solve_gpu(g, **kw)
            assert f == f_cpu and g.energy(labels.get()) == f
            assert (st["bfs_level"] is not None) == (kw.get("bfs_mode", 0) == 0)
            monkeypatch.setattr(_maxflow_gpu, "_BFS_LEVEL", False)
            f0, labels0, st0 = _solve_gpu(g, **kw)
            assert st0["bfs_level"] is None
            assert f0 == f
            if "walk_below" not in kw:  # the walks race (compare-and-swap claims):
                # their active counts may differ from solve to solve
                assert st0["active"] == st["active"]
            # the nodes that reach the sink after any maximum flow: the same set
            np.testing.assert_array_equal(labels0.get(), labels.get())


@pytest.mark.parametrize("pipeline", [1, 3])
def test_host_loop_and_solver_reuse(pipeline, rng, monkeypatch):
    """Rounds queued ahead of the active count, and the cached solver (buffers and
    CUDA graphs) reused across calls and shapes, give the same answers."""
    _cupy()
    from vision_cuts import _maxflow_gpu

    monkeypatch.setattr(_maxflow_gpu, "_PIPELINE", pipeline)
    graphs = []
    for shape in [(40, 50), (40, 50), (7, 9, 11), (40, 50)]:
        s, t, e = synthetic.random_grid_graph(shape, rng, high=20)
        graphs.append(grid_graph(s, t, e))
    for g in graphs:
        _check(g, repeats=2)
    monkeypatch.setattr(_maxflow_gpu, "_REUSE", False)
    _check(graphs[0], repeats=1)


def test_result_on_its_own_stream(rng, monkeypatch):
    """The labels and flow are computed on a stream of their own, not behind the
    no-op round queued after the last count: the same answers (the smallest sink side
    is unique) on the caller's stream, across calls that reuse the solver and calls
    that drop it while that round may still be queued (4- and 8-connected 2-D, 6- and
    26-connected 3-D)."""
    cp = _cupy()
    from vision_cuts import _maxflow_gpu

    cases = []
    for shape, k in [((60, 70), 4), ((60, 70), 8), ((9, 10, 11), 6), ((7, 8, 9), 26)]:
        s, t, _ = synthetic.random_grid_graph(shape, rng, high=30)
        e = rng.integers(0, 30, size=(k, *shape)) * (rng.random((k, *shape)) < 0.7)
        cases.append(grid_graph(s, t, e.astype(np.int32)))
    caller = cp.cuda.Stream(non_blocking=True)
    answers = {}
    for side in (False, True):
        monkeypatch.setattr(_maxflow_gpu, "_RESULT_SIDE", side)
        for rep in range(2):
            for i, g in enumerate(cases):  # a new solver at each case
                args = [cp.asarray(a) for a in (g.source, g.sink, g.edges)]
                with caller:
                    f, labels, _ = _solve_gpu(grid_graph(*args))
                    total = int(labels.sum())  # on the caller's stream, at once
                    got = (f, labels.get().tobytes(), total)
                solver = _maxflow_gpu._cache.solver
                assert (getattr(solver, "side", None) is not None) == side
                ref = answers.setdefault(i, got)
                assert got == ref, (i, side, rep)
    for i, g in enumerate(cases):
        f_cpu, _, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
        assert answers[i][0] == f_cpu
        labels = np.frombuffer(answers[i][1], dtype=np.uint8).reshape(g.shape)
        assert g.energy(labels) == f_cpu and answers[i][2] == int(labels.sum())


@pytest.mark.parametrize("claim", [True, False])
def test_claimed_sweeps_agree(claim, rng, monkeypatch):
    """gpr_push_claim (a round's sweeps in one launch, each tile run started once its
    own, its face neighbours' and its corners' earlier runs have ended) gives the CPU's
    flows on 8-connected grids: tiles of 4 x 4 (most arcs on a border or corner) and
    the defaults, grids of one tile, one tile row and one tile column, repeated; its
    rounds are counted, and none with every round persistent."""
    _cupy()
    from vision_cuts import _maxflow_gpu

    monkeypatch.setattr(_maxflow_gpu, "_PUSH_CLAIM", claim)
    monkeypatch.setattr(_maxflow_gpu, "_CLAIM_WAVES", (0.0, float("inf")))  # any size
    shapes = [(70, 90), (5, 7), (1, 37), (33, 2), (9, 200), (300, 6)]
    for shape in shapes:
        s, t, _ = synthetic.random_grid_graph(shape, rng, high=30)
        e = rng.integers(0, 30, size=(8, *shape)) * (rng.random((8, *shape)) < 0.7)
        g = grid_graph(s, t, e.astype(np.int32))
        for kw in ({}, {"tile": (4, 4, 1)}, {"persist_below": 10**9}):
            _check(g, repeats=2, **kw)
            _, _, st = _solve_gpu(g, **kw)
            assert st["sweeps"] <= 64 * st["global_relabels"] + 64
            on = claim and "persist_below" not in kw
            assert (st["claimed_rounds"] > 0) == on, (shape, kw, st["claimed_rounds"])
            if on:  # every round claimed or persistent
                rounds = st["claimed_rounds"] + st["persistent_rounds"]
                assert rounds == st["global_relabels"] - 1


def test_zero_capacities(rng):
    _cupy()
    for shape in [(5, 6), (4, 3, 2)]:
        s, t, e = synthetic.random_grid_graph(shape, rng, high=20)
        z = np.zeros_like(s)
        for args in [(z, z, np.zeros_like(e)), (s, z, e), (z, t, e), (s, t, 0 * e)]:
            _check(grid_graph(*args), repeats=1)


def test_repeated_solves_agree(rng):
    """Races show up as answers that vary between runs of one input."""
    cp = _cupy()
    s, t, e = synthetic.random_grid_graph((150, 170), rng, high=30, density=0.9)
    host = grid_graph(s, t, e)
    g = grid_graph(
        cp.asarray(host.source), cp.asarray(host.sink), cp.asarray(host.edges)
    )
    f_cpu, _, _ = maxflow_grid_cpu(host.source, host.sink, host.edges)
    for _ in range(5):
        f, labels, _ = _solve_gpu(g)
        assert f == f_cpu
        assert g.energy(labels) == f


def test_cupy_in_cupy_out(rng):
    cp = _cupy()
    s, t, e = synthetic.random_grid_graph((23, 41), rng, high=40)
    ds, dt, de = cp.asarray(s), cp.asarray(t), cp.asarray(e)
    before = de.copy()
    cut = maxflow_grid(ds, dt, de, backend="gpu")
    assert isinstance(cut.labels, cp.ndarray) and cut.labels.dtype == cp.uint8
    assert cut.stats["backend"] == "gpu"
    assert bool((de == before).all())  # inputs are not modified
    assert bool((ds == cp.asarray(s)).all()) and bool((dt == cp.asarray(t)).all())
    ref = maxflow_grid(s, t, e, backend="cpu")
    assert cut.flow == ref.flow
    host = maxflow_grid(s, t, e, backend="gpu")
    assert isinstance(host.labels, np.ndarray) and host.flow == ref.flow
    # device inputs of other dtypes and layouts are copied, contiguous int32 ones read
    # in place; the cached solver keeps no reference to them after the call
    from vision_cuts import _maxflow_gpu

    g = grid_graph(s, t, e)
    for args in [
        (cp.asarray(g.source, dtype=cp.int64), cp.asfortranarray(cp.asarray(g.sink))),
        (cp.asarray(g.source), cp.asarray(g.sink)),
    ]:
        f, labels, _ = _maxflow_gpu.maxflow_grid_gpu(*args, cp.asarray(g.edges))
        assert f == ref.flow and g.energy(labels.get()) == f
        solver = getattr(_maxflow_gpu._cache, "solver", None)
        if solver is not None:
            assert solver.src_in is solver.src and solver.snk_in is solver.snk


def test_segmentation_energy():
    _cupy()
    data = pytest.importorskip("skimage.data")
    img = data.astronaut()[::2, ::2]
    unary, weights = synthetic.segmentation_problem(img)
    energy = grid_energy(unary, weights=weights)
    gpu = maxflow_grid(energy, backend="gpu")
    cpu = maxflow_grid(energy, backend="cpu")
    assert gpu.flow == cpu.flow
    assert energy.energy(gpu.labels) == energy.constant + gpu.flow
    for key in ("time_s", "sweeps", "global_relabels"):
        assert key in gpu.stats


def test_volume_energy():
    _cupy()
    unary, weights = synthetic.volume_problem(24)
    energy = grid_energy(unary, weights=weights)
    gpu = maxflow_grid(energy, backend="gpu")
    cpu = maxflow_grid(energy, backend="cpu")
    assert gpu.flow == cpu.flow
    assert energy.energy(gpu.labels) == energy.constant + gpu.flow


@pytest.mark.parametrize("shape", [(1, 1), (37, 53), (120, 90), (9, 10, 11)])
def test_warm_start_matches_cold(shape, rng):
    """A chain of solves on the same arcs with new terminal capacities, each
    warm-started from the last one's residual arcs (as GrabCut's iterations do):
    flows equal the CPU's and labels equal a cold GPU solve's, with NumPy and CuPy
    inputs."""
    cp = _cupy()
    from vision_cuts.maxflow import _maxflow_warm

    _, _, e = synthetic.random_grid_graph(shape, rng, high=60)
    res = None
    warm_used = 0
    for step in range(6):
        s, t, _ = synthetic.random_grid_graph(shape, rng, high=60)
        g = grid_graph(s, t, e)
        if step % 2:
            g = grid_graph(cp.asarray(s), cp.asarray(t), cp.asarray(e))
        cut, res = _maxflow_warm(g, res)
        warm_used += cut.stats["warm_start"]
        f_cpu, _, _ = maxflow_grid_cpu(s, t, e)
        assert cut.flow == f_cpu
        cold = maxflow_grid(g, backend="gpu")
        assert np.array_equal(
            cp.asnumpy(cp.asarray(cut.labels)), cp.asnumpy(cp.asarray(cold.labels))
        )
        assert isinstance(cut.labels, cp.ndarray) == (step % 2 == 1)
    assert warm_used == 5


def test_warm_start_segmentation_chain():
    """Segmentation energies whose unaries drift (GrabCut-like): warm == cold."""
    _cupy()
    from vision_cuts.maxflow import _maxflow_warm

    data = pytest.importorskip("skimage.data")
    img = data.astronaut()[::2, ::2]
    unary, weights = synthetic.segmentation_problem(img)
    rng = np.random.default_rng(5)
    res = None
    for _ in range(4):
        energy = grid_energy(unary, weights=weights)
        cut, res = _maxflow_warm(energy, res)
        cold = maxflow_grid(energy, backend="gpu")
        assert cut.flow == cold.flow == maxflow_grid(energy, backend="cpu").flow
        assert np.array_equal(cut.labels, cold.labels)
        unary = unary + rng.integers(-8, 9, size=unary.shape).astype(unary.dtype)
        unary = np.maximum(unary, 0)


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (0, 2, 2)])
def test_empty_grid(shape):
    cp = _cupy()
    from vision_cuts._maxflow_gpu import maxflow_grid_gpu

    z = cp.zeros(shape, dtype=cp.int32)
    f, labels, stats = maxflow_grid_gpu(
        z, z, cp.zeros((2 * len(shape), *shape), cp.int32)
    )
    assert f == 0 and labels.shape == shape and stats["backend"] == "gpu"


def test_out_of_device_memory(monkeypatch):
    _cupy()
    from vision_cuts import _maxflow_gpu
    from vision_cuts._maxflow_gpu import maxflow_grid_gpu

    monkeypatch.setattr(_maxflow_gpu, "_free_device_bytes", lambda: (1024, 2**34))
    z = np.zeros((300, 400), dtype=np.int32)
    with pytest.raises(DeviceMemoryError, match=r"\(300, 400\).*MiB") as info:
        maxflow_grid_gpu(z, z, np.zeros((4, 300, 400), np.int32))
    assert isinstance(info.value, MemoryError)


def test_too_many_nodes():
    _cupy()
    from vision_cuts._maxflow_gpu import maxflow_grid_gpu

    class Fake:  # shape metadata only: nothing is allocated before the check
        shape = (2**16, 2**16)

    with pytest.raises(ValueError, match="at most .* nodes"):
        maxflow_grid_gpu(Fake(), Fake(), Fake())


def test_kernels_compile():
    cp = _cupy()
    from vision_cuts._kernels import get_module, kernel_names

    for nd, tile in [(2, (32, 32, 1)), (3, (16, 8, 8))]:
        for idx, scan in (("int", 1), ("long long", 0)):
            defines = {
                "NDIM": nd,
                "TILE_X": tile[0],
                "TILE_Y": tile[1],
                "TILE_Z": tile[2],
                "IDX_T": idx,
                "BFS_SCAN": scan,
            }
            for name in ("grid_push_relabel.cu", "grid_bfs.cu"):
                mod = get_module(name, defines)
                for func in kernel_names(name):
                    assert mod.get_function(func) is not None
    del cp


@pytest.mark.parametrize(
    "shape, connectivity",
    [((37, 53), 4), ((64, 70), 8), ((1, 40), 4), ((9, 10, 11), 6), ((12, 9, 10), 26)],
)
def test_smallest_source_side_is_the_cpu_cut(rng, shape, connectivity):
    """``side="source"``: the smallest source side (the nodes that the nodes left
    with excess reach), the CPU solver's cut, on graphs with many ties (capacities
    0-3); ``"sink"`` the smallest sink side. Both minimum cuts, the same flow, and
    the default reuses the solver afterwards as if nothing had happened."""
    cp = _cupy()
    from vision_cuts._maxflow_gpu import maxflow_grid_gpu
    from vision_cuts.grid import connectivity_planes

    k = connectivity_planes(connectivity, len(shape))
    differ = 0
    for _ in range(6):
        s = rng.integers(0, 4, shape).astype(np.int32)
        t = rng.integers(0, 4, shape).astype(np.int32)
        e = (rng.integers(0, 4, (k, *shape)) * (rng.random((k, *shape)) < 0.6)).astype(
            np.int32
        )
        g = grid_graph(s, t, e)
        f_cpu, l_cpu, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
        args = [cp.asarray(a) for a in (g.source, g.sink, g.edges)]
        f_src, l_src, _ = maxflow_grid_gpu(*args, side="source")
        f_snk, l_snk, _ = maxflow_grid_gpu(*args)
        assert f_src == f_snk == f_cpu
        np.testing.assert_array_equal(l_src.get(), np.asarray(l_cpu))
        # the smallest sink side lies inside every sink side
        assert not (l_snk.get().astype(bool) & ~l_src.get().astype(bool)).any()
        differ += int((l_snk.get() != l_src.get()).any())
        for labels in (l_src.get(), l_snk.get()):
            assert g.energy(labels) == g.constant + f_cpu
    assert differ > 0
    with pytest.raises(ValueError, match="side must be"):
        maxflow_grid_gpu(*args, side="both")


@pytest.mark.parametrize(
    "shape, connectivity",
    [((37, 53), 4), ((64, 70), 8), ((1, 300), 4), ((9, 10, 11), 6), ((10, 9, 8), 18)]
    + [((12, 9, 10), 26)],
)
def test_handover_to_the_cpu_is_exact(rng, shape, connectivity):
    """``cpu_after=0``: the rest of the solve after the first global relabel goes to
    the CPU solver. The same flow as the CPU's, the same smallest sink and source
    sides as a solve to the end on the GPU (each side is one set for every maximum
    flow), and final residual arcs that keep the arc pairs' sums and leave no
    augmenting path (what a warm start needs); NumPy in, device checks on, and
    CuPy in."""
    cp = _cupy()
    from vision_cuts._maxflow_gpu import maxflow_grid_gpu
    from vision_cuts.grid import connectivity_planes
    from vision_cuts.maxflow import _warm_graph

    k = connectivity_planes(connectivity, len(shape))
    handed = 0
    for trial in range(4):
        high = [3, 50][trial % 2]
        s = (rng.integers(0, high, shape) * (rng.random(shape) < 0.6)).astype(np.int32)
        t = (rng.integers(0, high, shape) * (rng.random(shape) < 0.6)).astype(np.int32)
        e = rng.integers(0, high, (k, *shape)) * (rng.random((k, *shape)) < 0.7)
        g = grid_graph(s, t, e.astype(np.int32))
        f_cpu, _, _ = maxflow_grid_cpu(g.source, g.sink, g.edges)
        dev = [cp.asarray(a) for a in (g.source, g.sink, g.edges)]
        for side in ("sink", "source"):
            f0, l0, st0 = maxflow_grid_gpu(*dev, side=side, cpu_after=math.inf)
            assert st0["handover"] is None
            f1, l1, st1 = maxflow_grid_gpu(*dev, side=side, cpu_after=0)
            assert f0 == f1 == f_cpu
            np.testing.assert_array_equal(l1.get(), l0.get())
            assert isinstance(l1, cp.ndarray) and l1.dtype == np.uint8
            if st1["handover"] is not None:
                handed += 1
                ho = st1["handover"]
                assert ho["flow_before"] + ho["cpu_flow"] == f_cpu
                assert ho["active"] > 0 and st1["global_relabels"] >= 1
        f2, l2, st2 = maxflow_grid_gpu(
            g.source, g.sink, g.edges, validate=True, residual=True, cpu_after=0
        )
        assert f2 == f_cpu and g.energy(l2.get()) == g.constant + f_cpu
        res = st2.pop("residual").get()
        assert res.shape == g.edges.shape and (res >= 0).all()
        s2, t2, offset = _warm_graph(g.source, g.sink, g.edges, res)
        assert offset == f_cpu  # the residual arcs carry the whole flow: the
        assert maxflow_grid_cpu(s2, t2, res)[0] == 0  # rest has no path
    assert handed > 0


def test_long_corridor_hands_over_by_default():
    """A serpentine corridor of 256 x 256 (one augmenting path of 33,000 nodes):
    push-relabel's rounds and relabel depth both grow with the path (1.1 s on an
    H200 to the end in 346 global relabels, against 18 ms for PyMaxflow); the
    default budget (0.04 s here) hands the rest to the CPU solver after a few
    relabels. The flow and the smallest sink side are the CPU solver's, and the
    relabels run are far fewer than a solve to the end takes."""
    _cupy()
    src, snk, e = synthetic.corridor_graph((256, 256))
    g = grid_graph(src, snk, e)
    cut = maxflow_grid(g, backend="gpu")
    f_cpu, l_cpu, _ = maxflow_grid_cpu(g.source, g.sink, g.edges, side="sink")
    assert cut.flow == f_cpu == 1000
    np.testing.assert_array_equal(cut.labels, l_cpu)
    ho = cut.stats["handover"]
    assert ho is not None and ho["cpu_flow"] > 0
    assert cut.stats["global_relabels"] < 100


def test_vision_energies_finish_on_the_gpu():
    """A segmentation energy (and its 8-connected form) and a volume end on the
    GPU long before the default budget: no hand-over."""
    _cupy()
    data = pytest.importorskip("skimage.data")
    img = data.astronaut()[::2, ::2]
    energies = []
    for connectivity in (1, 2):  # 4 and 8 neighbours
        unary, weights = synthetic.segmentation_problem(img, connectivity=connectivity)
        energies.append(grid_energy(unary, weights=weights, connectivity=connectivity))
    unary, weights = synthetic.volume_problem(48)
    energies.append(grid_energy(unary, weights=weights))
    for energy in energies:
        cut = maxflow_grid(energy, backend="gpu")
        assert cut.stats["handover"] is None
        assert cut.flow == maxflow_grid(energy, backend="cpu").flow


def test_excess_beyond_the_cpu_range_stays_on_the_gpu(rng, monkeypatch):
    """Where a node's excess would not fit the CPU solver's int32 terminals, the
    solve goes on on the GPU (emulated: no excess is taken as fitting)."""
    cp = _cupy()
    from vision_cuts import _grid_handover_gpu
    from vision_cuts._maxflow_gpu import maxflow_grid_gpu

    monkeypatch.setattr(_grid_handover_gpu, "_INT32_MAX", -1)
    for shape in [(40, 50), (8, 9, 10)]:
        s, t, e = synthetic.random_grid_graph(shape, rng, high=40)
        g = grid_graph(s, t, e)
        dev = [cp.asarray(a) for a in (g.source, g.sink, g.edges)]
        f, labels, st = maxflow_grid_gpu(*dev, cpu_after=0)
        assert st["handover"] is None and st["global_relabels"] > 1
        assert f == maxflow_grid_cpu(g.source, g.sink, g.edges)[0]
        assert g.energy(labels.get()) == g.constant + f
