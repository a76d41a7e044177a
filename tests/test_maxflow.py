"""maxflow_grid: exact flow values and minimum cuts against independent oracles.

Oracles (tests/_helpers.py): hand-computed networks, brute-force enumeration of every
labelling (<= 16 nodes), scipy.sparse.csgraph.maximum_flow on the explicit graph and
PyMaxflow. Every solved instance also checks that the returned labelling is a cut whose
capacity equals the flow, which together with the flow value proves it a minimum cut.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import (
    INT32_MAX,
    all_labellings,
    brute_force_mincut,
    cut_capacity,
    direction_step,
    potts_energy,
    pymaxflow_arcwise,
    pymaxflow_mincut,
    pymaxflow_potts_energy,
    random_graph,
    scipy_maxflow,
    scipy_sink_side,
)

from vision_cuts import (
    BackendUnavailableError,
    GridEnergy,
    MinCut,
    grid_energy,
    grid_graph,
    maxflow_grid,
)
from vision_cuts._backend import gpu_available, to_numpy
from vision_cuts.datasets import synthetic


def check_mincut(result, source, sink, edges, *, backend="cpu", flow=None):
    """Types and shape of a MinCut, and cut capacity of its labels == its flow."""
    assert isinstance(result, MinCut)
    assert type(result.flow) is int
    shape = np.shape(source)
    labels = result.labels
    assert isinstance(labels, np.ndarray)  # NumPy in -> NumPy out
    assert labels.dtype == np.uint8
    assert labels.shape == shape
    assert np.isin(labels, (0, 1)).all()
    assert isinstance(result.stats, dict)
    assert result.stats["backend"] == backend
    assert result.stats["time_s"] >= 0
    assert cut_capacity(source, sink, edges, labels) == result.flow
    if flow is not None:
        assert result.flow == flow


def empty_edges(shape):
    return np.zeros((2 * len(shape), *shape), dtype=np.int32)


# ---------------------------------------------------------------- hand-computed


def _net_single_source_heavy():
    # one node: keeping it on the source side cuts sink (3), the other side 5
    return (np.array([[5]]), np.array([[3]]), empty_edges((1, 1)), 3, [[0]])


def _net_single_sink_heavy():
    return (np.array([[3]]), np.array([[5]]), empty_edges((1, 1)), 3, [[1]])


def _net_docstring():
    e = empty_edges((1, 2))
    e[0, 0, 0] = 3  # (0, 0) -> (0, 1)
    return (np.array([[5, 0]]), np.array([[0, 5]]), e, 3, [[0, 1]])


def _net_wrong_way_arc():
    # only the arc (0, 1) -> (0, 0) exists: it carries nothing from s to t
    e = empty_edges((1, 2))
    e[1, 0, 1] = 3
    return (np.array([[5, 0]]), np.array([[0, 5]]), e, 0, [[0, 1]])


def _net_vertical():
    # s -7-> (0,0) -4-> (1,0) -2-> t: the sink arc of (1, 0) is the bottleneck
    e = empty_edges((2, 1))
    e[2, 0, 0] = 4
    return (np.array([[7], [0]]), np.array([[0], [2]]), e, 2, [[0], [0]])


def _net_upward():
    # the -y arc (1, 0) -> (0, 0) carries s -> (1, 0) -> (0, 0) -> t
    e = empty_edges((2, 1))
    e[3, 1, 0] = 6
    e[2, 0, 0] = 100  # the opposite direction is useless
    return (np.array([[0], [9]]), np.array([[8], [0]]), e, 6, [[1], [0]])


def _net_chain():
    e = empty_edges((1, 3))
    e[0, 0, 0] = 4
    e[0, 0, 1] = 6
    return (np.array([[10, 0, 0]]), np.array([[0, 0, 10]]), e, 4, [[0, 1, 1]])


def _net_two_paths():
    # (0,0) -3-> (0,1) -2-> (1,1) and (0,0) -4-> (1,0) -5-> (1,1): flow 2 + 4
    e = empty_edges((2, 2))
    e[0, 0, 0] = 3
    e[2, 0, 1] = 2
    e[2, 0, 0] = 4
    e[0, 1, 0] = 5
    src = np.array([[10, 0], [0, 0]])
    snk = np.array([[0, 0], [0, 10]])
    return (src, snk, e, 6, [[0, 0], [1, 1]])


def _net_z():
    e = empty_edges((2, 1, 1))
    e[4, 0, 0, 0] = 5  # +z: slice 0 -> slice 1
    return (
        np.array([9, 0]).reshape(2, 1, 1),
        np.array([0, 9]).reshape(2, 1, 1),
        e,
        5,
        [[[0]], [[1]]],
    )


def _net_minus_z():
    e = empty_edges((2, 1, 1))
    e[5, 1, 0, 0] = 5  # -z: slice 1 -> slice 0
    e[4, 0, 0, 0] = 1
    return (
        np.array([0, 9]).reshape(2, 1, 1),
        np.array([9, 0]).reshape(2, 1, 1),
        e,
        5,
        [[[1]], [[0]]],
    )


HAND = {
    "single-source-heavy": _net_single_source_heavy,
    "single-sink-heavy": _net_single_sink_heavy,
    "docstring": _net_docstring,
    "wrong-way-arc": _net_wrong_way_arc,
    "vertical": _net_vertical,
    "upward": _net_upward,
    "chain": _net_chain,
    "two-paths": _net_two_paths,
    "z": _net_z,
    "minus-z": _net_minus_z,
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_computed(name, backend):
    src, snk, e, flow, labels = HAND[name]()
    src, snk, e = (a.astype(np.int32) for a in (src, snk, e))
    # the expected cut is the unique minimum: check that against brute force too
    best, cuts = brute_force_mincut(src, snk, e)
    assert best == flow
    assert int((cuts == best).sum()) == 1
    result = maxflow_grid(src, snk, e, backend=backend)
    check_mincut(result, src, snk, e, backend=backend, flow=flow)
    np.testing.assert_array_equal(result.labels, np.array(labels, dtype=np.uint8))


def test_isolated_zero_node_any_side(backend):
    src = snk = np.zeros((1, 1), dtype=np.int32)
    result = maxflow_grid(src, snk, empty_edges((1, 1)), backend=backend)
    check_mincut(result, src, snk, empty_edges((1, 1)), backend=backend, flow=0)


# ------------------------------------------------------------------ brute force

BRUTE_SHAPES = [
    (1, 1),
    (1, 2),
    (1, 7),
    (1, 16),
    (2, 1),
    (5, 1),
    (16, 1),
    (2, 2),
    (2, 3),
    (3, 3),
    (4, 4),
    (2, 8),
    (8, 2),
    (3, 5),
    (1, 1, 1),
    (2, 2, 2),
    (2, 2, 4),
    (1, 4, 4),
    (4, 2, 2),
    (2, 1, 8),
    (16, 1, 1),
    (1, 1, 16),
    (2, 4, 1),
]


def _variant(rng, shape, i):
    """Instance ``i`` of a shape: random, sparse, ties, all-zero, zero source/sink..."""
    kind = i % 8
    if kind == 0:
        return random_graph(rng, shape, high=10)
    if kind == 1:
        return random_graph(rng, shape, high=1, density=0.5)  # many ties
    if kind == 2:
        src, snk, e = random_graph(rng, shape, high=50)
        return np.zeros_like(src), snk, e  # zero source: flow 0
    if kind == 3:
        src, snk, e = random_graph(rng, shape, high=50)
        return src, np.zeros_like(snk), e  # zero sink: flow 0
    if kind == 4:
        z = np.zeros(shape, dtype=np.int32)
        return z, z.copy(), empty_edges(shape)  # all zero
    if kind == 5:
        return random_graph(rng, shape, high=100, directed=False)
    if kind == 6:
        return random_graph(rng, shape, high=1000, density=1.0, terminal_density=1.0)
    src, snk, e = random_graph(rng, shape, high=20, density=0.9)
    e[1::2] = 0  # forward arcs only: strongly directed
    return src, snk, e


@pytest.mark.parametrize("shape", BRUTE_SHAPES, ids=str)
def test_brute_force(shape, rng, backend):
    for i in range(16):
        src, snk, e = _variant(rng, shape, i)
        best, cuts = brute_force_mincut(src, snk, e)
        if i % 8 in (2, 3, 4):
            assert best == 0
        result = maxflow_grid(src, snk, e, backend=backend)
        check_mincut(result, src, snk, e, backend=backend, flow=best)
        if int((cuts == best).sum()) == 1:  # unique minimum cut: labels must match it
            want = all_labellings(src.size)[int(np.argmin(cuts))].reshape(shape)
            np.testing.assert_array_equal(result.labels, want)


def test_oracles_agree(rng):
    """The oracles themselves: brute force, SciPy and two PyMaxflow builds agree."""
    for shape in [(3, 4), (1, 9), (2, 2, 3), (4, 1, 3)]:
        for _ in range(5):
            src, snk, e = random_graph(rng, shape, high=30)
            best, _ = brute_force_mincut(src, snk, e)
            flow, labels = pymaxflow_mincut(src, snk, e)
            assert scipy_maxflow(src, snk, e) == best
            assert pymaxflow_arcwise(src, snk, e) == best
            assert flow == best
            assert cut_capacity(src, snk, e, labels) == best


# ------------------------------------------------------------------------ SciPy


def _scipy_shapes(rng, ndim, count):
    hi = 31 if ndim == 2 else 9
    for _ in range(count):
        yield tuple(int(v) for v in rng.integers(1, hi, size=ndim))


@pytest.mark.parametrize("density", [0.2, 0.7, 1.0])
@pytest.mark.parametrize("high", [1, 10, 10**6])
@pytest.mark.parametrize("ndim", [2, 3])
def test_scipy_oracle(ndim, high, density, rng):
    for shape in _scipy_shapes(rng, ndim, 16):
        src, snk, e = random_graph(
            rng,
            shape,
            high=high,
            density=density,
            terminal_density=rng.uniform(0.05, 1.0),
            directed=bool(rng.random() < 0.7),
        )
        result = maxflow_grid(src, snk, e, backend="cpu")
        check_mincut(result, src, snk, e, flow=scipy_maxflow(src, snk, e))


@pytest.mark.parametrize(
    "shape", [(30, 30), (8, 8, 8), (1, 200), (200, 1), (3, 80)], ids=str
)
def test_scipy_oracle_extremes(shape, rng):
    """Full-size grids, long thin grids, dense terminals and dense arcs."""
    for high, tdens in [(10**6, 1.0), (5, 0.02), (1, 0.5)]:
        src, snk, e = random_graph(
            rng, shape, high=high, density=1.0, terminal_density=tdens
        )
        result = maxflow_grid(src, snk, e, backend="cpu")
        check_mincut(result, src, snk, e, flow=scipy_maxflow(src, snk, e))


def test_cpu_search_stops_on_its_flag(rng):
    # another thread may end a CPU search through its stop flag (stereo's watched
    # cut): with the flag set, one strip or several, the call raises SolveStopped;
    # with a flag that nobody sets, the flow is SciPy's
    from vision_cuts._maxflow_cpu import SolveStopped, maxflow_grid_cpu

    src, snk, e = random_graph(rng, (300, 260), high=50, density=1.0)
    g = grid_graph(src, snk, e)
    for threads in (1, 2):
        with pytest.raises(SolveStopped):
            maxflow_grid_cpu(
                g.source, g.sink, g.edges, threads, stop=np.ones(1, np.uint8)
            )
        flow, _, _ = maxflow_grid_cpu(
            g.source, g.sink, g.edges, threads, stop=np.zeros(1, np.uint8)
        )
        assert flow == scipy_maxflow(src, snk, e)


def test_synthetic_random_grid_graph(rng):
    for shape, directed in [((20, 25), True), ((20, 25), False), ((6, 7, 5), True)]:
        src, snk, e = synthetic.random_grid_graph(shape, rng, directed=directed)
        result = maxflow_grid(src, snk, e, backend="cpu")
        check_mincut(result, src, snk, e, flow=scipy_maxflow(src, snk, e))


# ------------------------------------------------------------------- int32 edge


def test_int32_terminals_single_node(backend):
    m = np.array([[INT32_MAX]], dtype=np.int32)
    result = maxflow_grid(m, m.copy(), empty_edges((1, 1)), backend=backend)
    check_mincut(result, m, m, empty_edges((1, 1)), backend=backend, flow=INT32_MAX)


def test_int32_flow_beyond_int32(backend):
    """16 saturated nodes: the flow is 16 * (2**31 - 1) > 2**34, exactly."""
    m = np.full((4, 4), INT32_MAX, dtype=np.int32)
    e = np.full((4, 4, 4), INT32_MAX // 2, dtype=np.int32)
    result = maxflow_grid(m, m.copy(), e, backend=backend)
    check_mincut(result, m, m, e, backend=backend, flow=16 * INT32_MAX)
    assert result.flow > 2**34


def test_int32_full_arc(backend):
    src = np.array([[INT32_MAX, 0]], dtype=np.int32)
    snk = np.array([[0, INT32_MAX]], dtype=np.int32)
    e = empty_edges((1, 2))
    e[0, 0, 0] = INT32_MAX - 1  # forward + backward = 2**31 - 1 exactly
    e[1, 0, 1] = 1
    result = maxflow_grid(src, snk, e, backend=backend)
    check_mincut(result, src, snk, e, backend=backend, flow=INT32_MAX - 1)
    np.testing.assert_array_equal(result.labels, [[0, 1]])


def _near_limit(rng, shape):
    """Terminals near 2**31 - 1 and every arc pair summing to exactly 2**31 - 1."""
    nd = len(shape)
    src = (INT32_MAX - rng.integers(0, 1000, size=shape)) * (rng.random(shape) < 0.6)
    snk = (INT32_MAX - rng.integers(0, 1000, size=shape)) * (rng.random(shape) < 0.6)
    e = np.zeros((2 * nd, *shape), dtype=np.int64)
    for d in range(nd):
        ax = nd - 1 - d
        fwd = rng.integers(0, INT32_MAX + 1, size=shape)
        lo = [slice(None)] * nd
        hi = [slice(None)] * nd
        lo[ax] = slice(None, -1)
        hi[ax] = slice(1, None)
        e[2 * d][tuple(lo)] = fwd[tuple(lo)]
        e[2 * d + 1][tuple(hi)] = INT32_MAX - fwd[tuple(lo)]
    return src.astype(np.int32), snk.astype(np.int32), e.astype(np.int32)


@pytest.mark.parametrize(
    "shape", [(1, 2), (2, 3), (3, 3), (4, 4), (1, 16), (2, 2, 2), (2, 2, 4)], ids=str
)
def test_int32_near_limit_brute_force(shape, rng, backend):
    for _ in range(6):
        src, snk, e = _near_limit(rng, shape)
        best, _ = brute_force_mincut(src, snk, e)
        result = maxflow_grid(src, snk, e, backend=backend)
        check_mincut(result, src, snk, e, backend=backend, flow=best)


def test_int32_arc_pair_over_limit_rejected():
    src = snk = np.zeros((1, 2), dtype=np.int32)
    e = empty_edges((1, 2))
    e[0, 0, 0] = 2**30
    e[1, 0, 1] = 2**30  # pair sum 2**31 > 2**31 - 1
    with pytest.raises(ValueError, match=r"edges: forward \+ backward"):
        maxflow_grid(src, snk, e, backend="cpu")


# -------------------------------------------------------- segmentation energies


def _check_potts_problem(unary, weights):
    ge = grid_energy(unary, weights=weights)
    result = maxflow_grid(ge, backend="cpu")
    check_mincut(result, ge.source, ge.sink, ge.edges)
    flow, pm_labels = pymaxflow_mincut(ge.source, ge.sink, ge.edges)
    assert result.flow == flow
    best = ge.constant + result.flow
    # the energy, evaluated three ways, is the minimum PyMaxflow finds independently
    assert ge.energy(result.labels) == best
    assert potts_energy(unary, weights, result.labels) == best
    assert pymaxflow_potts_energy(unary, weights) == best
    assert potts_energy(unary, weights, pm_labels) == best
    return result


def test_segmentation_vs_pymaxflow():
    data = pytest.importorskip("skimage.data")
    image = data.coffee()[::2, ::2]  # 200 x 300 RGB
    assert image.shape == (200, 300, 3)
    unary, weights = synthetic.segmentation_problem(image)
    result = _check_potts_problem(unary, weights)
    # a sane segmentation: neither empty nor everything
    assert 0 < int(result.labels.sum()) < result.labels.size


def test_volume_vs_pymaxflow():
    unary, weights = synthetic.volume_problem(32)
    assert unary.shape == (32, 32, 32, 2)
    result = _check_potts_problem(unary, weights)
    assert 0 < int(result.labels.sum()) < result.labels.size


@pytest.mark.data
def test_grabcut_image_vs_pymaxflow(data_dir):
    io = pytest.importorskip("skimage.io")
    folder = data_dir / "grabcut"
    if not folder.is_dir():
        pytest.skip(f"no grabcut data under {data_dir}")
    image = io.imread(folder / "data_GT" / "banana1.bmp")[::4, ::4, :3]
    x0, y0, x1, y1 = (
        float(v) for v in (folder / "bb_GT" / "banana1.txt").read_text().split()
    )
    box = (int(y0 - 1) // 4, int(x0 - 1) // 4, int(y1) // 4, int(x1) // 4)
    unary = synthetic.segmentation_unary(image, box)
    weights = synthetic.contrast_weights(image, lam=50.0)
    _check_potts_problem(unary, weights)


def _leaky_maze(side: int, transposed: bool):
    """``synthetic.corridor_graph`` with walls 1, or its transpose."""
    src, snk, e = synthetic.corridor_graph((side, side), wall=1)
    if transposed:
        src, snk = src.T.copy(), snk.T.copy()
        e = np.ascontiguousarray(np.stack([e[2].T, e[3].T, e[0].T, e[1].T]))
    return src, snk, e


def test_corridor_graph():
    """``synthetic.corridor_graph``: one corridor holding about half the nodes (the
    nodes on its arcs of 1000 counted); the flows (SciPy's, ours) are the
    corridor's capacity with terminals at its ends and the unit terminals' count
    with halves; bad shapes and terminal modes are refused, naming the parameter."""
    for shape in [(1, 1), (1, 9), (2, 5), (9, 9), (12, 7), (3, 6, 5)]:
        for terminals in ("ends", "halves"):
            for wall in (0, 1):
                s, t, e = synthetic.corridor_graph(
                    shape, wall=wall, terminals=terminals
                )
                assert s.dtype == t.dtype == e.dtype == np.int32
                assert e.shape == (2 * len(shape), *shape)
                want = scipy_maxflow(s, t, e)
                assert maxflow_grid(s, t, e, backend="cpu").flow == want
                # every other row of a slice, joined at one end, slice by slice
                rows = (shape[-2] + 1) // 2
                length = (rows * shape[-1] + rows - 1) * (
                    shape[0] if len(shape) == 3 else 1
                )
                if length > 1:
                    assert int((e == 1000).any(axis=0).sum()) == length
                if terminals == "ends" and wall == 0 and np.prod(shape) > 1:
                    assert want == 1000
                if terminals == "halves" and wall == 0:
                    assert want == min(int(s.sum()), int(t.sum()))
    with pytest.raises(ValueError, match="shape must be 2 or 3 positive sizes"):
        synthetic.corridor_graph((4,))
    with pytest.raises(ValueError, match="terminals must be 'ends' or 'halves'"):
        synthetic.corridor_graph((4, 4), terminals="both")


@pytest.mark.parametrize("transposed", [False, True])
def test_leaky_maze_origin_walks_bounded(transposed):
    """Long orphaned chains: each orphan of the corridor had a neighbour across the
    wall below it in its own tree, whose origin walk went round the bend back up
    to it, once per orphan (quadratic in the chain: 3.8 M nodes read at 128 x 128
    by one thread, 948 M at 512 x 512). The walks that end at an orphan now leave
    dead marks for the ones after them."""
    import vision_cuts._maxflow_cpu as cpu

    side = 128
    src, snk, e = _leaky_maze(side, transposed)
    g = grid_graph(src, snk, e)
    flow, labels, stats = cpu.maxflow_grid_cpu(g.source, g.sink, g.edges, threads=1)
    want, _ = pymaxflow_mincut(src, snk, e)
    assert flow == want
    assert cut_capacity(src, snk, e, labels) == flow
    assert stats["strips"] == 1
    assert 0 < stats["origin_steps"] <= 40 * side * side


# ------------------------------------------------------------- result contract


def test_result_types(rng):
    src, snk, e = random_graph(rng, (5, 7), high=20)
    result = maxflow_grid(src, snk, e, backend="cpu")
    flow, labels, stats = result  # a NamedTuple
    assert type(flow) is int
    assert type(labels) is np.ndarray
    assert labels.dtype == np.uint8
    assert labels.shape == (5, 7)
    assert {"backend", "time_s"} <= set(stats)
    assert stats["backend"] == "cpu"
    assert isinstance(stats["time_s"], float)
    ge = grid_graph(src, snk, e)
    again = maxflow_grid(ge, backend="cpu")
    assert again.flow == flow
    assert ge.energy(labels) == flow  # constant 0: E(labels) is the cut


@pytest.mark.parametrize(
    "dtype", [np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.int16]
)
def test_integer_dtypes(dtype, rng):
    src, snk, e = random_graph(rng, (6, 5), high=100)
    want = maxflow_grid(src, snk, e, backend="cpu").flow
    cast = [a.astype(dtype) for a in (src, snk, e)]
    result = maxflow_grid(*cast, backend="cpu")
    check_mincut(result, src, snk, e, flow=want)


def test_non_contiguous_inputs(rng):
    src, snk, e = random_graph(rng, (9, 8), high=50)
    want = maxflow_grid(src, snk, e, backend="cpu")
    # the same graph through Fortran-ordered and strided views
    big = np.zeros((4, 18, 16), dtype=np.int32)
    big[:, ::2, ::2] = e
    result = maxflow_grid(
        np.asfortranarray(src), snk.copy(order="F"), big[:, ::2, ::2], backend="cpu"
    )
    check_mincut(result, src, snk, e, flow=want.flow)


def test_float_capacities_with_scale(rng):
    src, snk, e = random_graph(rng, (5, 6), high=40)
    want = maxflow_grid(src, snk, e, backend="cpu").flow
    result = maxflow_grid(src / 4.0, snk / 4.0, e / 4.0, scale=4.0, backend="cpu")
    check_mincut(result, src, snk, e, flow=want)


def _border_junk(rng):
    """(source, sink, edges with nonzero arcs leaving the 5 x 6 grid, the same edges
    with those arcs zero), int32."""
    src, snk, e = random_graph(rng, (5, 6), high=30)
    junk = e.copy()
    junk[0][:, -1] = 7  # +x arcs leaving the last column
    junk[1][:, 0] = 8  # -x arcs leaving the first column
    junk[2][-1, :] = 9
    junk[3][0, :] = 10
    clean = e.copy()
    for k, sl in enumerate([np.s_[:, -1], np.s_[:, 0], np.s_[-1, :], np.s_[0, :]]):
        clean[k][sl] = 0
    return src, snk, junk, clean


def test_inputs_not_modified_and_border_ignored(rng):
    src, snk, junk, clean = _border_junk(rng)
    saved = junk.copy()
    result = maxflow_grid(src, snk, junk, backend="cpu")
    np.testing.assert_array_equal(junk, saved)
    check_mincut(result, src, snk, clean, flow=scipy_maxflow(src, snk, clean))


@pytest.mark.parametrize(
    "shape", [(0, 5), (5, 0), (0, 0), (0, 3, 3), (2, 0, 4)], ids=str
)
def test_empty_grid(shape, backend):
    z = np.zeros(shape, dtype=np.int32)
    result = maxflow_grid(z, z.copy(), empty_edges(shape), backend=backend)
    assert result.flow == 0
    assert type(result.flow) is int
    assert result.labels.shape == shape
    assert result.labels.dtype == np.uint8
    ge = grid_energy(
        np.zeros((*shape, 2), dtype=np.int32),
        weights=np.zeros((len(shape), *shape), dtype=np.int32),
    )
    assert maxflow_grid(ge, backend=backend).flow == 0


# ------------------------------------------------------------------- bad input


def test_bad_inputs(rng):
    src, snk, e = random_graph(rng, (3, 4), high=5)
    ge = grid_graph(src, snk, e)
    with pytest.raises(TypeError, match="either a GridEnergy"):
        maxflow_grid(ge, snk, e)
    with pytest.raises(TypeError, match="either a GridEnergy"):
        maxflow_grid(ge, edges=e)
    with pytest.raises(TypeError, match="scale"):
        maxflow_grid(ge, scale=2.0)
    with pytest.raises(TypeError, match="sink"):
        maxflow_grid(src)
    with pytest.raises(TypeError, match="edges"):
        maxflow_grid(src, snk)
    with pytest.raises(TypeError, match="source has floating dtype"):
        maxflow_grid(src.astype(np.float64), snk, e)
    with pytest.raises(ValueError, match="edges must have shape"):
        maxflow_grid(src, snk, e[:2])
    with pytest.raises(ValueError, match="sink must be non-negative"):
        maxflow_grid(src, -snk - 1, e)
    for bogus in ["bogus", "CUDA", "", None, 1]:
        with pytest.raises(ValueError, match="backend must be one of"):
            maxflow_grid(ge, backend=bogus)


@pytest.mark.skipif(gpu_available(), reason="a GPU is present: backend='gpu' runs")
def test_explicit_gpu_without_device():
    src, snk, e = random_graph(np.random.default_rng(0), (3, 3))
    with pytest.raises(BackendUnavailableError, match="backend='gpu' asks for the GPU"):
        maxflow_grid(src, snk, e, backend="gpu")
    # never a silent fallback, and it is a RuntimeError, not a ValueError
    with pytest.raises(RuntimeError):
        maxflow_grid(grid_graph(src, snk, e), backend="gpu")


def test_backend_environment(monkeypatch, rng):
    src, snk, e = random_graph(rng, (4, 4), high=9)
    monkeypatch.setenv("VISION_CUTS_BACKEND", "cpu")
    result = maxflow_grid(src, snk, e)
    assert result.stats["backend"] == "cpu"
    check_mincut(result, src, snk, e, flow=scipy_maxflow(src, snk, e))
    monkeypatch.setenv("VISION_CUTS_BACKEND", " CPU ")
    assert maxflow_grid(src, snk, e).stats["backend"] == "cpu"
    monkeypatch.setenv("VISION_CUTS_BACKEND", "bogus")
    with pytest.raises(ValueError, match="VISION_CUTS_BACKEND"):
        maxflow_grid(src, snk, e)
    # an explicit backend is not overridden by the environment
    assert maxflow_grid(src, snk, e, backend="cpu").stats["backend"] == "cpu"
    if not gpu_available():
        monkeypatch.setenv("VISION_CUTS_BACKEND", "gpu")
        with pytest.raises(BackendUnavailableError):
            maxflow_grid(src, snk, e)


# ------------------------------------------------------------ backend agreement


def _agreement_instance(rng, i):
    if i % 5 == 4:  # a grid energy with negative unaries and per-edge terms
        shape = (int(rng.integers(1, 12)), int(rng.integers(1, 12)))
        unary = rng.integers(-30, 30, size=(*shape, 2))
        weights = rng.integers(0, 20, size=(2, *shape))
        return grid_energy(unary, weights=weights)
    ndim = 2 if i % 3 else 3
    hi = 40 if ndim == 2 else 9
    shape = tuple(int(v) for v in rng.integers(1, hi, size=ndim))
    high = [1, 10, 1000, 10**6][i % 4]
    return grid_graph(
        *random_graph(
            rng,
            shape,
            high=high,
            density=float(rng.uniform(0.1, 1.0)),
            directed=bool(i % 2),
        )
    )


def test_backend_agreement(backend, rng):
    """The CPU result is the specification: same flow, cut capacity == flow."""
    cp = pytest.importorskip("cupy") if backend == "gpu" else None
    for i in range(50):
        ge = _agreement_instance(rng, i)
        want = maxflow_grid(ge, backend="cpu")
        result = maxflow_grid(ge, backend=backend)
        assert result.flow == want.flow, f"instance {i}"
        assert type(result.flow) is int
        assert type(result.labels) is np.ndarray
        assert result.labels.dtype == np.uint8
        assert result.stats["backend"] == backend
        assert cut_capacity(ge.source, ge.sink, ge.edges, result.labels) == result.flow
        assert ge.energy(result.labels) == ge.energy(want.labels)
        if cp is not None:  # CuPy in -> CuPy out
            dev = GridEnergy(
                cp.asarray(ge.source),
                cp.asarray(ge.sink),
                cp.asarray(ge.edges),
                ge.constant,
            )
            on_dev = maxflow_grid(dev, backend=backend)
            assert isinstance(on_dev.labels, cp.ndarray)
            assert on_dev.labels.dtype == cp.uint8
            assert on_dev.flow == want.flow
            labels = to_numpy(on_dev.labels)
            assert cut_capacity(ge.source, ge.sink, ge.edges, labels) == want.flow
            auto = maxflow_grid(
                cp.asarray(ge.source), cp.asarray(ge.sink), cp.asarray(ge.edges)
            )
            assert isinstance(auto.labels, cp.ndarray)
            assert auto.flow == want.flow


# ---- multi-threaded strip merging -------------------------------------------------


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_strip_merging_is_exact(rng, monkeypatch, threads):
    """Strips solved on their own threads, then merged: same flow and labels."""
    import vision_cuts._maxflow_cpu as cpu

    monkeypatch.setattr(cpu, "_MIN_NODES_PER_STRIP", 4)

    strips_seen = set()
    for i in range(30):
        nd = 2 if i % 3 else 3
        shape = tuple(int(v) for v in rng.integers(8, 28 if nd == 2 else 10, size=nd))
        s, t, e = random_graph(
            rng,
            shape,
            high=int(rng.choice([3, 50, 10**6])),
            density=float(rng.uniform(0.3, 1.0)),
        )
        g = grid_graph(s, t, e)
        flow, labels, stats = cpu.maxflow_grid_cpu(
            g.source, g.sink, g.edges, threads=threads
        )
        strips_seen.add(stats["strips"])
        assert flow == scipy_maxflow(g.source, g.sink, g.edges)
        assert cut_capacity(g.source, g.sink, g.edges, labels) == flow
        flow1, labels1, stats1 = cpu.maxflow_grid_cpu(
            g.source, g.sink, g.edges, threads=1
        )
        assert stats1["strips"] == 1
        assert flow1 == flow
        # the source side of every maximum flow's residual graph is the same set
        np.testing.assert_array_equal(labels1, labels)
    assert max(strips_seen) > 1


@pytest.mark.parametrize("threads", [1, 3])
def test_smallest_sink_side_and_residual_arcs(rng, monkeypatch, threads):
    """``side="sink"`` labels the nodes that reach the sink in the final residual
    graph (SciPy's flow and a search on its residual graph), ``residual`` returns
    final residual arcs: the arc pairs keep their sums, and the graph they leave
    (terminal capacities moved as a warm start moves them) holds the whole flow,
    with no augmenting path left. Strips merged or not, 4- to 26-connected, ties."""
    import vision_cuts._maxflow_cpu as cpu
    from vision_cuts.grid import connectivity_planes, neighbour_offsets
    from vision_cuts.maxflow import _warm_graph

    monkeypatch.setattr(cpu, "_MIN_NODES_PER_STRIP", 4)
    differ = 0
    for i in range(24):
        nd = 2 if i % 2 else 3
        conn = [[4, 8], [6, 18, 26]][nd - 2][i % (2 if nd == 2 else 3)]
        k = connectivity_planes(conn, nd)
        shape = tuple(int(v) for v in rng.integers(4, 20 if nd == 2 else 8, size=nd))
        high = int(rng.choice([3, 40]))
        s = (rng.integers(0, high, shape) * (rng.random(shape) < 0.5)).astype(np.int32)
        t = (rng.integers(0, high, shape) * (rng.random(shape) < 0.5)).astype(np.int32)
        e = rng.integers(0, high, (k, *shape)) * (rng.random((k, *shape)) < 0.7)
        g = grid_graph(s, t, e.astype(np.int32))
        flow, sink_side, st = cpu.maxflow_grid_cpu(
            g.source, g.sink, g.edges, threads=threads, side="sink", residual=True
        )
        want, want_side = scipy_sink_side(g.source, g.sink, g.edges)
        assert flow == want
        np.testing.assert_array_equal(sink_side, want_side)
        assert cut_capacity(g.source, g.sink, g.edges, sink_side) == flow
        _, source_side, _ = cpu.maxflow_grid_cpu(
            g.source, g.sink, g.edges, threads=threads
        )
        assert not (sink_side.astype(bool) & ~source_side.astype(bool)).any()
        differ += int((sink_side != source_side).any())
        res = st["residual"]
        assert res.shape == g.edges.shape and res.dtype == np.int32
        assert (res >= 0).all()
        for d, step in enumerate(neighbour_offsets(nd, k)):
            if d % 2:
                continue
            pairs = list(zip(step, shape, strict=True))
            fwd = [slice(max(0, -v), n - max(0, v)) for v, n in pairs]
            bwd = [slice(max(0, v), n - max(0, -v)) for v, n in pairs]
            np.testing.assert_array_equal(
                res[d][tuple(fwd)] + res[d + 1][tuple(bwd)],
                g.edges[d][tuple(fwd)] + g.edges[d + 1][tuple(bwd)],
            )
        s2, t2, offset = _warm_graph(g.source, g.sink, g.edges, res)
        assert offset == flow
        assert scipy_maxflow(s2, t2, res) == 0
    assert differ > 0
    with pytest.raises(ValueError, match="side must be"):
        cpu.maxflow_grid_cpu(g.source, g.sink, g.edges, side="both")


def test_strip_merging_segmentation_energy():
    """A real segmentation energy large enough for the default strip size."""
    import cv2
    import skimage.data

    import vision_cuts._maxflow_cpu as cpu

    img = cv2.resize(skimage.data.coffee(), (512, 400), interpolation=cv2.INTER_AREA)
    unary, weights = synthetic.segmentation_problem(img)
    e = grid_energy(unary, weights=weights)
    flow4, labels4, stats4 = cpu.maxflow_grid_cpu(e.source, e.sink, e.edges, threads=4)
    flow1, labels1, _ = cpu.maxflow_grid_cpu(e.source, e.sink, e.edges, threads=1)
    assert stats4["strips"] > 1
    assert flow4 == flow1
    np.testing.assert_array_equal(labels4, labels1)
    assert (
        e.energy(labels4)
        == e.constant + flow4
        == pymaxflow_potts_energy(unary, weights)
    )


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_threads_env_rejected(monkeypatch, value):
    monkeypatch.setenv("VISION_CUTS_THREADS", value)
    g = grid_graph(*[np.ones(s, np.int32) for s in [(4, 4), (4, 4), (4, 4, 4)]])
    with pytest.raises(ValueError, match="VISION_CUTS_THREADS must be a positive"):
        maxflow_grid(g, backend="cpu")


def test_threads_env_used(monkeypatch):
    import vision_cuts._maxflow_cpu as cpu

    monkeypatch.setenv("VISION_CUTS_THREADS", "3")
    assert cpu.default_threads() == 3


def _random_residual(edges, rng):
    """An arbitrary arc flow: per arc pair a random split of cap(p->q) + cap(q->p)."""
    res = np.zeros_like(edges, dtype=np.int64)
    nd = edges.ndim - 1
    for d in range(nd):
        step = direction_step(2 * d, nd)
        ax = [i for i, s in enumerate(step) if s][0]
        tail = [slice(None)] * nd
        head = [slice(None)] * nd
        tail[ax], head[ax] = slice(None, -1), slice(1, None)
        fwd = edges[2 * d][tuple(tail)].astype(np.int64)
        bwd = edges[2 * d + 1][tuple(head)].astype(np.int64)
        total = fwd + bwd
        r = (total * rng.random(total.shape)).astype(np.int64)
        res[2 * d][tuple(tail)] = r
        res[2 * d + 1][tuple(head)] = total - r
    return res.astype(np.int32)


@pytest.mark.parametrize(
    "shape", [(1, 1), (1, 7), (6, 1), (9, 11), (24, 17), (2, 2, 2), (5, 6, 4)]
)
def test_warm_start_reparametrisation(shape, rng):
    """Any arc flow moved onto the terminals keeps the flow value (with the offset)
    and the minimum cuts: the warm-started graph is solved cold here and compared
    with SciPy on the original graph."""
    from vision_cuts.maxflow import _warm_graph

    for _ in range(6):
        src, snk, edges = random_graph(rng, shape, directed=bool(rng.random() < 0.5))
        g = grid_graph(src, snk, edges)
        want = scipy_maxflow(g.source, g.sink, g.edges)
        res = _random_residual(g.edges, rng)
        s2, t2, offset = _warm_graph(g.source, g.sink, g.edges, res)
        g2 = grid_graph(s2, t2, res)
        cut = maxflow_grid(g2, backend="cpu")
        assert cut.flow + offset == want
        # same cut function up to the constant: the labels are a minimum cut of g
        assert cut_capacity(g.source, g.sink, g.edges, cut.labels) == want
        assert np.array_equal(cut.labels, maxflow_grid(g, backend="cpu").labels)


def test_warm_start_overflow_is_refused():
    """A terminal capacity beyond int32 after the move: no warm start (None)."""
    from vision_cuts.maxflow import _warm_graph

    src = np.array([[INT32_MAX, 0]], dtype=np.int32)
    snk = np.zeros((1, 2), dtype=np.int32)
    edges = np.zeros((4, 1, 2), dtype=np.int32)
    edges[1, 0, 1] = 10  # arc (0, 1) -> (0, 0)
    res = edges.copy()
    res[1, 0, 1], res[0, 0, 0] = 0, 10  # 10 units moved into (0, 0)
    assert _warm_graph(src, snk, edges, res) is None


# ------------------------------------------------ checks on the device (GPU backend)


def _bad_capacity_cases(ndim):
    """(name, source, sink, edges) with one or more bad values each, int32."""
    shape = (4, 5) if ndim == 2 else (3, 4, 5)
    rng = np.random.default_rng(ndim)
    base = [a.astype(np.int32) for a in random_graph(rng, shape, high=9)]
    cases = []
    for name, which, at in [
        ("source", 0, (1, 2)),
        ("sink", 1, (0, 4)),
        ("source twice", 0, (3, 1)),
    ]:
        arrays = [a.copy() for a in base]
        idx = at if ndim == 2 else (1, *at)
        arrays[which][idx] = -3
        if name == "source twice":
            arrays[0][(0,) * ndim] = -1  # the first in C order is reported
        cases.append((name, *arrays))
    arrays = [a.copy() for a in base]
    arrays[2][(1, *((0,) * ndim))] = -5  # a -x arc leaving the grid: still an error
    cases.append(("edges border", *arrays))
    arrays = [a.copy() for a in base]
    arrays[1][(2,) * ndim] = -1
    arrays[2][(0, *((1,) * ndim))] = -2  # sink is checked before edges
    cases.append(("sink before edges", *arrays))
    for d in range(ndim):
        arrays = [a.copy() for a in base]
        tail = [1] * ndim
        head = list(tail)
        head[ndim - 1 - d] += 1
        arrays[2][(2 * d, *tail)] = 2**30
        arrays[2][(2 * d + 1, *head)] = 2**30
        cases.append((f"pair {d}", *arrays))
    return cases


@pytest.mark.gpu
@pytest.mark.parametrize("ndim", [2, 3])
def test_device_checks_match_host_errors(ndim):
    """NumPy and CuPy int32 capacities are checked on the device after the upload:
    the same error as the host checks, naming the array and the first bad index."""
    import cupy

    for name, src, snk, e in _bad_capacity_cases(ndim):
        with pytest.raises(ValueError) as host:
            maxflow_grid(src, snk, e, backend="cpu")
        for kind in (np.asarray, cupy.asarray):
            with pytest.raises(ValueError) as dev:
                maxflow_grid(kind(src), kind(snk), kind(e), backend="gpu")
            assert str(dev.value) == str(host.value), name
    # the solver is usable after a refused call, and a good call still checks nothing
    src, snk, e = (
        a.astype(np.int32)
        for a in random_graph(
            np.random.default_rng(9), (6, 7) if ndim == 2 else (3, 4, 5), high=20
        )
    )
    want = maxflow_grid(src, snk, e, backend="cpu").flow
    check_mincut(
        maxflow_grid(src, snk, e, backend="gpu"), src, snk, e, backend="gpu", flow=want
    )


@pytest.mark.gpu
@pytest.mark.parametrize(
    "shape,k",
    [((300, 301), 4), ((300, 301), 8), ((20, 21, 22), 6), ((20, 21, 22), 26)],
    ids=str,
)
def test_device_checks_on_wild_values(shape, k):
    """The device check's findings are read together with the first active count,
    so the solver's first relabel and round run on values nobody has accepted yet:
    int32 values of any sign and size (negative capacities, arc pairs beyond int32)
    must still end in the host check's error, and the next good call is exact."""
    import cupy

    rng = np.random.default_rng(k)
    lo, hi = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    shapes = (shape, shape, (k, *shape))

    def draw(low):
        return [
            rng.integers(low, hi, size=s, dtype=np.int32, endpoint=True) for s in shapes
        ]

    wild = draw(lo)  # every sign: the source's first negative is reported
    arcs = draw(lo)
    arcs[0], arcs[1] = np.abs(arcs[0] // 2), np.abs(arcs[1] // 2)  # the arcs' error
    pairs = draw(2**30)  # no negative value, but arc pairs beyond 2**31 - 1
    for arrays in (wild, arcs, pairs):
        with pytest.raises(ValueError) as host:
            maxflow_grid(*arrays, backend="cpu")
        for kind in (np.asarray, cupy.asarray):
            with pytest.raises(ValueError) as dev:
                maxflow_grid(*(kind(a) for a in arrays), backend="gpu")
            assert str(dev.value) == str(host.value)
        good = [np.abs(a // 2**21) for a in arrays]  # below 1024: pairs fit
        want = maxflow_grid(*good, backend="cpu").flow
        check_mincut(
            maxflow_grid(*good, backend="gpu"), *good, backend="gpu", flow=want
        )


@pytest.mark.gpu
def test_device_checks_ignore_border_arcs_and_keep_inputs(rng):
    import cupy

    src, snk, junk, clean = _border_junk(rng)
    saved = junk.copy()
    want = scipy_maxflow(src, snk, clean)
    result = maxflow_grid(src, snk, junk, backend="gpu")
    np.testing.assert_array_equal(junk, saved)
    check_mincut(result, src, snk, clean, backend="gpu", flow=want)
    dev = cupy.asarray(junk)
    out = maxflow_grid(cupy.asarray(src), cupy.asarray(snk), dev, backend="gpu")
    np.testing.assert_array_equal(dev.get(), saved)  # the caller's device array too
    assert out.flow == want and isinstance(out.labels, cupy.ndarray)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1500, 1501), (3, 1, 7), (2, 2)], ids=str)
def test_staged_uploads_are_exact(shape, rng):
    """Host arrays go up through pinned chunks, streamed by several workers
    (1500 x 1501: 36 MB of arcs): the GPU answer from NumPy equals the one from CuPy
    arrays, the labels too; and bytes arrive exactly."""
    import cupy

    src, snk, e = (a.astype(np.int32) for a in random_graph(rng, shape, high=50))
    from_host = maxflow_grid(src, snk, e, backend="gpu")
    dev = maxflow_grid(*(cupy.asarray(a) for a in (src, snk, e)), backend="gpu")
    assert from_host.flow == dev.flow
    np.testing.assert_array_equal(from_host.labels, dev.labels.get())
    assert cut_capacity(src, snk, e, from_host.labels) == from_host.flow
    from vision_cuts._staging_gpu import _COPY_THREADS, _STAGE_CHUNK, staging

    stage = staging()  # every worker streams more than two chunks, the last a part
    size = _COPY_THREADS * 3 * _STAGE_CHUNK + 12345
    data = rng.integers(0, 255, size, dtype=np.uint8)
    out = cupy.empty(data.size, dtype=cupy.uint8)
    small = cupy.empty(1000, dtype=cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    stage.upload([(small, data[:1000]), (out, data)], stream)  # parts span both
    stream.synchronize()
    np.testing.assert_array_equal(out.get(), data)
    np.testing.assert_array_equal(small.get(), data[:1000])
    stage.upload([(small, data[5:1005])], stream)  # below a chunk: pageable copy
    stream.synchronize()
    np.testing.assert_array_equal(small.get(), data[5:1005])
