"""The diagonal neighbourhoods: 8-connected 2-D and 18- / 26-connected 3-D grids on the
CPU solver, exact against SciPy, PyMaxflow and brute force, and their energies."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import (
    brute_force_energy_min,
    brute_force_mincut,
    direct_energy,
    direction_step,
    pymaxflow_mincut,
    random_submodular_pairwise,
    scipy_maxflow,
)

from vision_cuts import grid_energy, grid_graph, maxflow_grid, segment
from vision_cuts._backend import BackendUnavailableError
from vision_cuts.grid import connectivity_planes, neighbour_offsets

CASES = [
    ((1, 1), 8),
    ((1, 7), 8),
    ((7, 1), 8),
    ((5, 6), 8),
    ((13, 17), 8),
    ((1, 1, 5), 18),
    ((2, 3, 4), 18),
    ((4, 4, 4), 18),
    ((2, 3, 4), 26),
    ((5, 4, 3), 26),
]


def random_planes(rng, shape, planes, high=100, density=0.7):
    """Random (source, sink, edges) with ``planes`` arc planes, capacities 0..high."""
    src = rng.integers(0, high + 1, shape) * (rng.random(shape) < 0.5)
    snk = rng.integers(0, high + 1, shape) * (rng.random(shape) < 0.5)
    e = rng.integers(0, high + 1, (planes, *shape)) * (
        rng.random((planes, *shape)) < density
    )
    return src.astype(np.int32), snk.astype(np.int32), e.astype(np.int32)


@pytest.mark.parametrize(("ndim", "planes"), [(2, 4), (2, 8), (3, 6), (3, 18), (3, 26)])
def test_offsets_follow_the_documented_order(ndim, planes):
    got = neighbour_offsets(ndim, planes)
    want = np.array([direction_step(k, ndim) for k in range(planes)])
    np.testing.assert_array_equal(got, want)
    assert len({tuple(v) for v in got}) == planes  # every neighbour once


def test_offsets_arguments():
    for ndim, planes in ((2, 4.0), (2.0, 4), (3, np.float64(26.0)), (True, 4)):
        with pytest.raises(TypeError, match="must be an integer, got"):
            neighbour_offsets(ndim, planes)
    with pytest.raises(ValueError, match="ndim must be 2 or 3, got 4"):
        neighbour_offsets(4, 8)
    with pytest.raises(ValueError, match=r"planes must be one of \(4, 8\) for a 2-D"):
        neighbour_offsets(2, 6)
    assert neighbour_offsets(np.int64(3), np.int32(18)).shape == (18, 3)


def test_connectivity_names():
    assert [connectivity_planes(c, 2) for c in (1, 2, 4, 8)] == [4, 8, 4, 8]
    got = [connectivity_planes(c, 3) for c in (1, 2, 3, 6, 18, 26)]
    assert got == [6, 18, 26, 6, 18, 26]
    for bad in (0, 3, 6, 26, True, 8.0, "8", None):
        with pytest.raises(ValueError, match=r"connectivity must be one of \(4, 8\)"):
            connectivity_planes(bad, 2)
    for bad in (4, 8, 27, 0):
        with pytest.raises(ValueError, match=r"one of \(6, 18, 26\)"):
            connectivity_planes(bad, 3)


@pytest.mark.parametrize(("shape", "planes"), CASES)
def test_cpu_flow_equals_scipy(rng, shape, planes):
    for _ in range(3):
        src, snk, e = random_planes(rng, shape, planes)
        cut = maxflow_grid(src, snk, e, backend="cpu")
        assert cut.stats["backend"] == "cpu"
        assert cut.flow == scipy_maxflow(src, snk, e)
        # the labels are a cut of that capacity
        g = grid_graph(src, snk, e)
        assert g.energy(cut.labels) == cut.flow


@pytest.mark.parametrize(("shape", "planes"), [((4, 5), 8), ((3, 3, 4), 26)])
def test_cpu_flow_equals_pymaxflow(rng, shape, planes):
    src, snk, e = random_planes(rng, shape, planes)
    flow, labels = pymaxflow_mincut(src, snk, e)
    cut = maxflow_grid(src, snk, e, backend="cpu")
    assert cut.flow == flow
    np.testing.assert_array_equal(cut.labels, labels)


@pytest.mark.parametrize(
    ("shape", "planes"), [((3, 3), 8), ((2, 2, 2), 18), ((2, 2, 3), 26)]
)
def test_cpu_flow_equals_brute_force(rng, shape, planes):
    for _ in range(5):
        src, snk, e = random_planes(rng, shape, planes, high=9)
        best, _ = brute_force_mincut(src, snk, e)
        assert maxflow_grid(src, snk, e, backend="cpu").flow == best


@pytest.mark.parametrize(("shape", "planes"), [((200, 180), 8), ((36, 32, 30), 26)])
def test_strips_are_exact(rng, shape, planes):
    # enough nodes for several strips on two threads: the arcs crossing a strip
    # border, diagonal ones included, are cut and put back
    from vision_cuts._maxflow_cpu import maxflow_grid_cpu

    src, snk, e = random_planes(rng, shape, planes, high=50)
    g = grid_graph(src, snk, e)
    one = maxflow_grid_cpu(g.source, g.sink, g.edges, threads=1)
    two = maxflow_grid_cpu(g.source, g.sink, g.edges, threads=3)
    assert two[2]["strips"] > 1
    assert one[0] == two[0] == scipy_maxflow(src, snk, e)
    np.testing.assert_array_equal(one[1], two[1])


@pytest.mark.parametrize(
    ("shape", "planes", "threads"),
    [((120, 90), 4, 3), ((120, 90), 8, 2), ((130, 70), 8, 5), ((30, 24, 22), 26, 7)],
)
def test_strips_join_by_levels(monkeypatch, rng, shape, planes, threads):
    # many strips (odd counts too): neighbouring groups are joined in pairs, level
    # by level, side by side; the flow and the labels are the one-strip solve's
    from vision_cuts import _maxflow_cpu as cpu

    monkeypatch.setattr(cpu, "_MIN_NODES_PER_STRIP", 256)
    src, snk, e = random_planes(rng, shape, planes, high=40)
    g = grid_graph(src, snk, e)
    one = cpu.maxflow_grid_cpu(g.source, g.sink, g.edges, threads=1)
    many = cpu.maxflow_grid_cpu(g.source, g.sink, g.edges, threads=threads)
    strips = many[2]["strips"]
    assert strips >= 3
    assert many[2]["merge_levels"] == int(np.ceil(np.log2(strips)))
    assert one[0] == many[0] == scipy_maxflow(src, snk, e)
    np.testing.assert_array_equal(one[1], many[1])


def test_border_arcs_are_ignored(rng):
    # entries of arcs that leave the grid (diagonal ones at every border) count
    # for nothing, whatever they hold
    src, snk, e = random_planes(rng, (4, 5), 8)
    full = e.copy()
    full[:] = np.where(full == 0, 7, full)
    a = maxflow_grid(src, snk, full, backend="cpu").flow
    g = grid_graph(src, snk, full)
    for k in range(8):
        step = direction_step(k, 2)
        idx = np.indices((4, 5))
        out = np.zeros((4, 5), bool)
        for ax, st in enumerate(step):
            out |= (idx[ax] + st < 0) | (idx[ax] + st >= (4, 5)[ax])
        assert not g.edges[k][out].any()
    assert a == scipy_maxflow(src, snk, full)


@pytest.mark.parametrize(
    ("shape", "connectivity"), [((3, 4), 8), ((2, 2, 3), 26), ((2, 3, 2), 18)]
)
def test_energy_with_diagonals(rng, shape, connectivity):
    D = connectivity // 2
    unary = rng.integers(-20, 30, (*shape, 2))
    weights = rng.integers(0, 15, (D, *shape))
    for kw in (
        {"weights": weights},
        {"pairwise": random_submodular_pairwise(rng, shape, directions=D)},
    ):
        energy = grid_energy(unary, connectivity=connectivity, **kw)
        for _ in range(5):
            x = rng.integers(0, 2, shape)
            assert energy.energy(x) == direct_energy(unary, x, **kw)
        cut = maxflow_grid(energy, backend="cpu")
        assert energy.constant + cut.flow == brute_force_energy_min(unary, **kw)
        assert energy.energy(cut.labels) == energy.constant + cut.flow


def test_segment_with_eight_neighbours(rng):
    unary = rng.integers(0, 50, (6, 7, 2))
    weights = rng.integers(0, 9, (4, 6, 7))
    labels = segment(unary, weights, connectivity=8, backend="cpu")
    best = brute_force_energy_min(unary[:3, :4], weights=weights[:, :3, :4])
    small = segment(unary[:3, :4], weights[:, :3, :4], connectivity=8, backend="cpu")
    assert direct_energy(unary[:3, :4], small, weights=weights[:, :3, :4]) == best
    energy = grid_energy(unary, weights=weights, connectivity=8)
    assert energy.energy(labels) == energy.constant + maxflow_grid(energy).flow


def test_non_submodular_diagonal_named(rng):
    unary = rng.integers(0, 9, (3, 4, 2))
    pw = np.zeros((4, 3, 4, 2, 2), dtype=np.int64)
    pw[..., 0, 1] = pw[..., 1, 0] = 1
    pw[3, 1, 2] = [[5, 0], [0, 5]]  # the -x+y diagonal at node (1, 2)
    with pytest.raises(Exception, match=r"direction 3 at node \(1, 2\)"):
        grid_energy(unary, pw, connectivity=8)


def test_auto_backend_solves_diagonals(rng):
    # whichever backend "auto" picks, the diagonal grid is solved exactly
    src, snk, e = random_planes(rng, (4, 5), 8)
    cut = maxflow_grid(src, snk, e)
    assert cut.flow == scipy_maxflow(src, snk, e)
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(BackendUnavailableError):
            maxflow_grid(src, snk, e, backend="gpu")


def test_gpu_tile_check_needs_two_rows_with_corner_pushes(monkeypatch):
    """The GPU solver's tile check (no device needed): an 8-connected grid's push
    tiles must be at least 2 nodes high, since its corner pushes give each tile corner
    to one thread and a node one row high ends the arc pairs of two corners; tiles of
    4-connected grids, and those of the four-colour option, may be one row high."""
    from vision_cuts import _maxflow_gpu as mg

    with pytest.raises(ValueError, match=r"TILE_Y >= 2.*\(32, 1, 1\)"):
        mg._tiles(2, 8, False, (32, 1, 1), None)
    assert mg._tiles(2, 8, False, (4, 2, 1), None)[0] == (4, 2, 1)
    assert mg._tiles(2, 4, False, (32, 1, 1), None)[0] == (32, 1, 1)
    monkeypatch.setattr(mg, "_DIAG_CORNERS", False)
    assert mg._tiles(2, 8, False, (32, 1, 1), None)[0] == (32, 1, 1)
