"""The diagonal neighbourhoods on the GPU: 8-connected 2-D grids (two checkerboard
colours and the pushes across tile corners, the level BFS) and 18- / 26-connected 3-D
grids (2**ndim colours, the tile BFS) by the push-relabel kernels, exact against
SciPy, PyMaxflow and the CPU solver.

Marker ``gpu``: skipped without CuPy and a device unless ``VISION_CUTS_REQUIRE_GPU=1``.
Flows must equal the oracle's exactly and every cut must have capacity equal to the
flow; label images are not compared (minimum cuts are not unique). Repeated solves
catch races between tiles that touch at an edge or a corner only.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import direction_step, pymaxflow_mincut, scipy_maxflow
from test_grid_connectivity import CASES, random_planes

from vision_cuts import grid_energy, grid_graph, maxflow_grid, segment
from vision_cuts._maxflow_cpu import maxflow_grid_cpu

pytestmark = pytest.mark.gpu

INT32_MAX = 2**31 - 1
# small tiles: most nodes sit on a tile's edge or corner, so most diagonal pushes
# cross into another tile
SMALL_TILE = {2: (4, 4, 1), 3: (4, 2, 2)}
BIGGER = [((70, 90), 8), ((33, 65), 8), ((19, 17, 21), 18), ((19, 17, 21), 26),
          ((9, 40, 33), 26)]  # fmt: skip
ARC_LOOP_CASES = [((45, 70), 4), ((45, 70), 8), ((11, 13, 17), 6), ((11, 13, 17), 26)]
HUB_CASES = [((9, 11), 4), ((9, 11), 8), ((7, 9, 8), 6), ((7, 9, 8), 26)]


def _solve(src, snk, e, **kw):
    from vision_cuts._maxflow_gpu import maxflow_grid_gpu

    return maxflow_grid_gpu(src, snk, e, max_rounds=20000, **kw)


def _check(src, snk, e, want, repeats=2, **kw):
    g = grid_graph(src, snk, e)
    for _ in range(repeats):
        f, labels, stats = _solve(g.source, g.sink, g.edges, **kw)
        assert stats["backend"] == "gpu"
        assert f == want, (f, want, stats)
        assert g.energy(labels.get()) == f
    return stats


@pytest.mark.parametrize(("shape", "planes"), CASES + BIGGER)
def test_gpu_flow_equals_scipy(rng, shape, planes):
    pytest.importorskip("cupy")
    for density in (0.7, 1.0):
        src, snk, e = random_planes(rng, shape, planes, density=density)
        stats = _check(src, snk, e, scipy_maxflow(src, snk, e))
        assert stats["bfs_mode"] == 0 and stats["incremental_relabels"] == 0


@pytest.mark.parametrize(("shape", "planes"), [((37, 29), 8), ((10, 9, 11), 26),
                                               ((7, 12, 9), 18)])  # fmt: skip
def test_gpu_small_tiles(rng, shape, planes):
    pytest.importorskip("cupy")
    nd = len(shape)
    for _ in range(3):
        src, snk, e = random_planes(rng, shape, planes, high=30)
        want = scipy_maxflow(src, snk, e)
        tile = SMALL_TILE[nd]
        _check(src, snk, e, want, repeats=3, tile=tile, bfs_tile=tile)


def test_gpu_diagonals_only(rng):
    # only diagonal arcs carry flow: every augmenting path uses the corner hand-over
    for shape, planes in (((40, 50), 8), ((12, 14, 10), 26)):
        src, snk, e = random_planes(rng, shape, planes, high=60, density=1.0)
        e[: 2 * len(shape)] = 0
        _check(src, snk, e, scipy_maxflow(src, snk, e), repeats=3)


@pytest.mark.parametrize("relabel", ["level", "tiles", "four colours"])
@pytest.mark.parametrize("tile", [(4, 4, 1), (32, 8, 1), (32, 32, 1)])
def test_gpu_8_connected_corner_pushes(monkeypatch, tile, relabel):
    """8-connected grids run two colours, the arcs across tile corners pushed by a
    launch of their own, and the level BFS (or, beyond its size, the tile BFS): a
    staircase of diagonal arcs through many tile corners (the only way to the sink),
    and random grids, exact; the four colours of the first version too."""
    pytest.importorskip("cupy")
    import vision_cuts._maxflow_gpu as mg

    if relabel == "tiles":
        monkeypatch.setattr(mg, "_BFS_LEVEL_DIAG_MAX_NODES", 0)
    if relabel == "four colours":
        monkeypatch.setattr(mg, "_DIAG_CORNERS", False)
    shape = (70, 70)
    src = np.zeros(shape, np.int64)
    snk = np.zeros(shape, np.int64)
    e = np.zeros((8, *shape), np.int64)
    for i in range(69):  # (i, i) -> (i + 1, i + 1): plane 4 (+x+y) of node (i, i)
        e[4, i, i] = 5 + i % 7
    src[0, 0] = 100
    snk[69, 69] = 100
    stats = _check(src, snk, e, 5, repeats=3, tile=tile)
    assert stats["colours"] == (4 if relabel == "four colours" else 2)
    assert stats["level_bfs"] == (relabel != "tiles")
    rng = np.random.default_rng(3)
    for density in (0.3, 1.0):
        src, snk, e = random_planes(rng, (67, 75), 8, high=40, density=density)
        _check(src, snk, e, scipy_maxflow(src, snk, e), repeats=2, tile=tile)


@pytest.mark.parametrize("tile", [(4, 4, 1), (32, 8, 1)])
def test_gpu_corner_pushes_skip_idle_tiles(monkeypatch, rng, tile):
    """gpr_push_corners leaves alone the corners whose tiles are all unflagged
    (PR_CORNER_FLAGS, the default): exact against SciPy with and without the skip, the
    same smallest sink side; with 4 x 4 tiles most arcs cross a tile corner."""
    pytest.importorskip("cupy")
    import vision_cuts._maxflow_gpu as mg

    monkeypatch.setattr(mg, "_REUSE", False)
    for shape, density in (((67, 75), 0.5), ((130, 97), 1.0)):
        src, snk, e = random_planes(rng, shape, 8, high=40, density=density)
        want = scipy_maxflow(src, snk, e)
        g = grid_graph(src, snk, e)
        cuts = []
        for skip in (0, 1):
            monkeypatch.setattr(mg, "_EXTRA_DEFINES", {"PR_CORNER_FLAGS": skip})
            f, labels, stats = _solve(g.source, g.sink, g.edges, tile=tile)
            assert f == want and g.energy(labels.get()) == f
            assert stats["colours"] == 2
            cuts.append(labels.get())
        np.testing.assert_array_equal(cuts[0], cuts[1])


@pytest.mark.parametrize(
    ("shape", "levels", "words"),
    [
        ((400, 256), 31, 3),
        ((520, 256), 23, 3),
        ((650, 256), 31, 4),
        ((700, 256), 29, 4),
    ],
)
def test_gpu_8_connected_level_bfs_three_words(monkeypatch, rng, shape, levels, words):
    """8-connected grids whose level-BFS regions do not fit two words a thread take
    three, or four, and the most levels a phase that fit (``_level_plan``; forced
    here by a device of two SMs): exact against SciPy, and the solve is the tile
    BFS's (the same distances, so the same active counts after every relabel); the
    heights written after the last phase (LV_DEFER: its bit planes of regions of up to
    2600 words fit beside the frontier buffers) or at the end of each. The pushes by
    colour launches: in gpr_push_claim the order in which tiles that meet at a corner
    run varies more from solve to solve, and with it (exactly) the path."""
    pytest.importorskip("cupy")
    import vision_cuts._maxflow_gpu as mg

    monkeypatch.setattr(mg, "_REUSE", False)
    monkeypatch.setattr(mg, "_PUSH_CLAIM", False)
    monkeypatch.setattr(mg, "sm_count", lambda *args: 2)
    for density, defer in ((0.5, True), (1.0, True), (1.0, False)):
        monkeypatch.setattr(mg, "_LV_DEFER", defer)
        src, snk, e = random_planes(rng, shape, 8, high=40, density=density)
        want = scipy_maxflow(src, snk, e)
        stats = _check(src, snk, e, want, repeats=2)
        assert stats["level_bfs"] and stats["bfs_level_words"] == words
        assert stats["bfs_level_defer"] == defer
        assert stats["bfs_level"][4] == levels and stats["bfs_level"][3] <= 2
        with monkeypatch.context() as m:
            m.setattr(mg, "_BFS_LEVEL_DIAG_MAX_NODES", 0)
            tiles = _check(src, snk, e, want, repeats=1)
        assert not tiles["level_bfs"] and tiles["active"] == stats["active"]


@pytest.mark.parametrize("tile", [(4, 4, 1), (32, 8, 1)])
def test_gpu_8_connected_persistent_tail(rng, tile):
    """The 8-connected tail schedule (persistent push grid, 4 sweeps a relabel): every
    round persistent, with the corner pushes after each sweep, exact; the defaults
    name it."""
    pytest.importorskip("cupy")
    for shape, density in (((67, 75), 0.5), ((130, 97), 1.0)):
        src, snk, e = random_planes(rng, shape, 8, high=40, density=density)
        want = scipy_maxflow(src, snk, e)
        stats = _check(
            src, snk, e, want, repeats=2, tile=tile, persist_below=10**9, tail_sweeps=5
        )
        assert stats["persistent_rounds"] == stats["global_relabels"] - 1 > 0
        stats = _check(src, snk, e, want, repeats=1)
        n = shape[0] * shape[1]
        assert (stats["tail_sweeps"], stats["persist_below"]) == (4, n // 1024)


@pytest.mark.parametrize("bitloop", [False, True])
@pytest.mark.parametrize(("shape", "planes"), ARC_LOOP_CASES)
def test_gpu_push_arc_loops(monkeypatch, rng, shape, planes, bitloop):
    """Both loops of a push round over a node's arcs (the bit loop over its
    admissible arcs, the default with diagonals, and the unrolled loop over every
    plane) are exact with faces and diagonals, small tiles included."""
    pytest.importorskip("cupy")
    import vision_cuts._maxflow_gpu as mg

    monkeypatch.setattr(mg, "_EXTRA_DEFINES", {"PR_BITLOOP": int(bitloop)})
    for density in (0.5, 1.0):
        src, snk, e = random_planes(rng, shape, planes, high=40, density=density)
        want = scipy_maxflow(src, snk, e)
        stats = _check(src, snk, e, want, repeats=2)
        assert stats["push_bitloop"] == bitloop
        _check(src, snk, e, want, repeats=1, tile=SMALL_TILE[len(shape)])
    monkeypatch.setattr(mg, "_EXTRA_DEFINES", {})
    stats = _check(src, snk, e, want, repeats=1)
    assert stats["push_bitloop"] == (planes > 2 * len(shape))


@pytest.mark.parametrize("connectivity", [8, 26])
def test_gpu_segmentation_equals_pymaxflow(connectivity):
    """Contrast-sensitive segmentation energies on a real picture (2-D) and a
    synthetic volume (3-D), diagonals weighted by 1 / length, against PyMaxflow."""
    pytest.importorskip("cupy")
    if connectivity == 8:
        from skimage import data

        img = data.camera()[::2, ::2].astype(np.float32) / 255.0
    else:
        from scipy import ndimage

        noise = np.random.default_rng(4).random((40, 44, 36))
        img = ndimage.gaussian_filter(noise, 3.0).astype(np.float32)
        img = (img - img.min()) / max(float(img.max() - img.min()), 1e-6)
    fg, bg = (img - 0.7) ** 2, (img - 0.2) ** 2
    unary = np.rint(np.stack([fg, bg], axis=-1) * 200).astype(np.int64)
    D = connectivity // 2
    steps = [np.array(direction_step(2 * d, img.ndim)) for d in range(D)]
    w = np.zeros((D, *img.shape), np.int64)
    for d, st in enumerate(steps):
        shifted = img
        for ax, s in enumerate(st):
            shifted = np.roll(shifted, -int(s), axis=ax)
        w[d] = np.rint(40 * np.exp(-((img - shifted) ** 2) * 30) / np.linalg.norm(st))
    energy = grid_energy(unary, weights=w, connectivity=connectivity)
    flow, _ = pymaxflow_mincut(energy.source, energy.sink, energy.edges)
    cut = maxflow_grid(energy, backend="gpu")
    assert cut.flow == flow
    assert energy.energy(cut.labels) == energy.constant + flow
    labels = segment(unary, w, connectivity=connectivity, backend="gpu")
    assert energy.energy(labels) == energy.constant + flow


def test_gpu_numpy_inputs_checked_on_device(rng):
    """int32 NumPy capacities of a diagonal grid go to the device unchecked; the
    device finds the same errors as grid_graph, names the diagonal planes, and ignores
    the arcs that leave the grid."""
    pytest.importorskip("cupy")
    for shape, planes in (((6, 7), 8), ((3, 4, 5), 26), ((4, 3, 5), 18)):
        src, snk, e = random_planes(rng, shape, planes)
        full = np.where(e == 0, 9, e).astype(np.int32)  # border entries too
        keep = full.copy()
        cut = maxflow_grid(src, snk, full, backend="gpu")
        np.testing.assert_array_equal(full, keep)  # the caller's array is untouched
        assert cut.flow == maxflow_grid(src, snk, full, backend="cpu").flow
        assert isinstance(cut.labels, np.ndarray)
        for k in (planes - 1, planes - 2):
            bad = full.copy()
            bad[(k, *(1,) * len(shape))] = -3
            with pytest.raises(ValueError) as got:
                maxflow_grid(src, snk, bad, backend="gpu")
            with pytest.raises(ValueError) as want:
                grid_graph(src, snk, bad)
            assert str(got.value) == str(want.value)
        # an arc pair beyond int32 on the last diagonal direction
        d = planes // 2 - 1
        st = np.array(direction_step(2 * d, len(shape)))
        p = np.array((1,) * len(shape))
        q = p + st
        bad = full.copy()
        bad[(2 * d, *p)] = INT32_MAX - 5
        bad[(2 * d + 1, *q)] = 10
        with pytest.raises(ValueError, match=f"planes {2 * d} and {2 * d + 1}") as got:
            maxflow_grid(src, snk, bad, backend="gpu")
        with pytest.raises(ValueError) as want:
            grid_graph(src, snk, bad)
        assert str(got.value) == str(want.value)


def test_gpu_diagonals_large_capacities(rng):
    # capacities near int32 max, each arc pair within it: excess sums beyond 2**32
    for shape, planes in (((45, 38), 8), ((11, 13, 12), 26)):
        src = rng.integers(INT32_MAX // 2, INT32_MAX, size=shape).astype(np.int32)
        snk = rng.integers(INT32_MAX // 2, INT32_MAX, size=shape).astype(np.int32)
        src[rng.random(shape) < 0.4] = 0
        e = rng.integers(0, INT32_MAX // 2, size=(planes, *shape)).astype(np.int32)
        g = grid_graph(src, snk, e)
        want = maxflow_grid_cpu(g.source, g.sink, g.edges)[0]
        _check(src, snk, e, want)


@pytest.mark.parametrize(("shape", "planes"), HUB_CASES)
def test_gpu_excess_beyond_32_bits(rng, shape, planes):
    """Excess beyond 32 bits: hubs that receive up to K * (2**31 - 1) in one local
    round, from every neighbour at once (inside a tile and across tile borders), and
    random grids near int32 max, against the CPU solver."""
    pytest.importorskip("cupy")
    nd = len(shape)
    steps = [np.array(direction_step(k, nd)) for k in range(planes)]
    src = np.full(shape, INT32_MAX, np.int64)
    snk = np.zeros(shape, np.int64)
    e = np.zeros((planes, *shape), np.int64)
    for hub in ((2,) * nd, tuple(np.array(shape) - 3)):
        hub = np.array(hub)
        src[tuple(hub)] = 0
        snk[tuple(hub)] = INT32_MAX
        for k, st in enumerate(steps):  # the neighbour hub - st pushes along plane k
            e[(k, *(hub - st))] = INT32_MAX
            e[(k ^ 1, *hub)] = 0
    g = grid_graph(src, snk, e)
    want = maxflow_grid_cpu(g.source, g.sink, g.edges)[0]
    assert want == 2 * INT32_MAX
    for tile in (None, SMALL_TILE[nd]):
        _check(src, snk, e, want, tile=tile)
    src = rng.integers(INT32_MAX // 2, INT32_MAX, size=shape, endpoint=True)
    snk = rng.integers(0, INT32_MAX, size=shape, endpoint=True)
    snk[rng.random(shape) < 0.7] = 0
    e = rng.integers(0, INT32_MAX // 2, size=(planes, *shape), endpoint=True)
    g = grid_graph(src, snk, e)
    _check(src, snk, e, maxflow_grid_cpu(g.source, g.sink, g.edges)[0])


@pytest.mark.parametrize(("shape", "planes"), HUB_CASES)
@pytest.mark.parametrize("extra", [0, 1])
def test_gpu_excess_at_the_32_bit_bound(shape, planes, extra):
    """The push tiles keep a node's excess in 32 bits where the total excess fits
    (2**32 - 1 at most), else in 64. Two feeders of 2**31 - 1 and one of 1 + extra
    push everything into a hub in one local round (inside a tile and across tile
    borders): the hub holds the whole total, 2**32 - 1 (narrow) or 2**32 (wide)."""
    pytest.importorskip("cupy")
    from vision_cuts import _maxflow_gpu

    nd = len(shape)
    src = np.zeros(shape, np.int64)
    snk = np.zeros(shape, np.int64)
    e = np.zeros((planes, *shape), np.int64)
    hub = np.array((3,) * nd)
    snk[tuple(hub)] = INT32_MAX
    for k, cap in ((0, INT32_MAX), (1, INT32_MAX), (2, 1 + extra)):
        feeder = hub - np.array(direction_step(k, nd))  # pushes along plane k
        src[tuple(feeder)] = cap
        e[(k, *feeder)] = cap
    assert src.sum() == 2**32 - 1 + extra
    for tile in (None, SMALL_TILE[nd]):
        _check(src, snk, e, INT32_MAX, tile=tile)
        narrow = int(_maxflow_gpu._cache.solver.narrow.get()[0])
        assert narrow == 1 - extra


def test_gpu_diagonal_arguments():
    cupy = pytest.importorskip("cupy")
    src = cupy.zeros((5, 6, 7), cupy.int32)
    e = cupy.zeros((26, 5, 6, 7), cupy.int32)
    with pytest.raises(ValueError, match="bfs_mode must be 0"):
        _solve(src, src, e, bfs_mode=3)
    with pytest.raises(ValueError, match="shared memory"):
        _solve(src, src, e, tile=(16, 8, 8))
    with pytest.raises(ValueError, match=r"K in \(6, 18, 26\)"):
        _solve(src, src, e[:8])
    with pytest.raises(ValueError, match=r"TILE_Y >= 2"):  # (the corner pushes)
        _solve(src[0], src[0], e[:8, 0], tile=(8, 1, 1))
