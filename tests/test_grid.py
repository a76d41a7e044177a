"""grid_energy / grid_graph / GridEnergy.energy against a direct evaluator of E(x).

``direct_energy`` (tests/_helpers.py) sums the unary and pairwise terms of the
definition one by one, so these tests check the Kolmogorov-Zabih construction, its
constant and the direction conventions (d = 0 is +x, the last axis) independently of
the library.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from _helpers import (
    INT32_MAX,
    border_mask,
    brute_force_energy_min,
    cut_capacity,
    direct_energy,
    random_graph,
    random_submodular_pairwise,
)

from vision_cuts import (
    GridEnergy,
    NonSubmodularError,
    grid_energy,
    grid_graph,
    maxflow_grid,
    segment,
)

SHAPES = [(3, 4), (1, 6), (5, 1), (2, 3, 4), (1, 1, 5), (3, 1, 2)]


def random_labels(rng, grid, count=12):
    yield np.zeros(grid, dtype=np.uint8)
    yield np.ones(grid, dtype=np.uint8)
    for _ in range(count):
        yield (rng.random(grid) < rng.random()).astype(np.uint8)


def check_energy_form(ge, grid):
    """Cardinality of a GridEnergy built by grid_energy."""
    assert isinstance(ge, GridEnergy)
    nd = len(grid)
    assert ge.shape == grid
    assert ge.ndim == nd
    assert ge.source.dtype == ge.sink.dtype == ge.edges.dtype == np.int32
    assert ge.source.shape == ge.sink.shape == grid
    assert ge.edges.shape == (2 * nd, *grid)
    assert type(ge.constant) is int
    # normalised terminals, non-negative capacities, no arc leaves the grid
    assert (np.minimum(ge.source, ge.sink) == 0).all()
    assert (ge.edges >= 0).all()
    for k in range(2 * nd):
        assert not ge.edges[k][border_mask(grid, k)].any()


def check_energies(ge, unary, pairwise, weights, rng):
    grid = np.shape(unary)[:-1]
    check_energy_form(ge, grid)
    for x in random_labels(rng, grid):
        want = direct_energy(unary, x, pairwise, weights)
        assert ge.energy(x) == want
        # E(x) = constant + capacity of the cut x: the graph represents the energy
        assert ge.constant + cut_capacity(ge.source, ge.sink, ge.edges, x) == want


# ---------------------------------------------------------- energy == direct E


@pytest.mark.parametrize("grid", SHAPES, ids=str)
def test_energy_symmetric_weights(grid, rng):
    nd = len(grid)
    unary = rng.integers(-50, 50, size=(*grid, 2))
    weights = rng.integers(0, 30, size=(nd, *grid))
    ge = grid_energy(unary, weights=weights)
    check_energies(ge, unary, None, weights, rng)


@pytest.mark.parametrize("grid", SHAPES, ids=str)
def test_energy_matrix(grid, rng):
    unary = rng.integers(-50, 50, size=(*grid, 2))
    for pw in ([[0, 1], [1, 0]], [[2, 7], [5, -3]], [[-4, 0], [0, -4]],
               [[1, 1], [1, 1]], [[0, 9], [0, 0]]):
        pw = np.array(pw)
        ge = grid_energy(unary, pw)
        check_energies(ge, unary, pw, None, rng)


@pytest.mark.parametrize("grid", SHAPES, ids=str)
def test_energy_matrix_with_weights(grid, rng):
    nd = len(grid)
    unary = rng.integers(-50, 50, size=(*grid, 2))
    weights = rng.integers(0, 10, size=(nd, *grid))
    pw = np.array([[3, 10], [4, -2]])  # B + C - A - D = 13
    ge = grid_energy(unary, pw, weights=weights)
    check_energies(ge, unary, pw, weights, rng)


@pytest.mark.parametrize("grid", SHAPES, ids=str)
def test_energy_per_edge(grid, rng):
    nd = len(grid)
    unary = rng.integers(-50, 50, size=(*grid, 2))
    pw = random_submodular_pairwise(rng, grid)
    ge = grid_energy(unary, pw)
    check_energies(ge, unary, pw, None, rng)
    weights = rng.integers(0, 5, size=(nd, *grid))
    ge = grid_energy(unary, pw, weights=weights)
    check_energies(ge, unary, pw, weights, rng)


def test_energy_negative_weight_on_supermodular_matrix(rng):
    """w (B + C - A - D) is what must be >= 0: -2 * (0 + 0 - 1 - 1) = 4 is fine."""
    grid = (3, 3)
    unary = rng.integers(-5, 5, size=(*grid, 2))
    pw = np.array([[1, 0], [0, 1]])
    weights = np.full((2, *grid), -2)
    ge = grid_energy(unary, pw, weights=weights)
    check_energies(ge, unary, pw, weights, rng)


def test_potts_form_equals_matrix_form(rng):
    grid = (4, 5)
    unary = rng.integers(-20, 20, size=(*grid, 2))
    weights = rng.integers(0, 9, size=(2, *grid))
    a = grid_energy(unary, weights=weights)
    b = grid_energy(unary, np.array([[0, 1], [1, 0]]), weights=weights)
    for x in random_labels(rng, grid):
        assert a.energy(x) == b.energy(x) == direct_energy(unary, x, None, weights)



@pytest.mark.parametrize(
    "grid, conn",
    [((7, 9), 4), ((7, 9), 8), ((1, 5), 8), ((4, 5, 6), 6), ((4, 5, 6), 18),
     ((3, 4, 5), 26), ((300, 260), 8), ((40, 41, 42), 26)],
    ids=str,
)  # fmt: skip
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int16, np.uint32])
@pytest.mark.parametrize(
    "xp_name", ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)]
)
def test_potts_one_pass_equals_array_expression(
    grid, conn, dtype, xp_name, rng, monkeypatch
):
    """Integer inputs take the one-pass path (NumPy: numba, threads from 2**16 nodes;
    CuPy int32 / int64: one kernel); it gives the array expression's arrays, constant
    and errors (negative weights, a weight too large, terminal capacities beyond
    int32)."""
    import importlib

    from vision_cuts.grid import _potts_energy

    one_pass = importlib.import_module(
        "vision_cuts._grid_energy_" + ("cpu" if xp_name == "numpy" else "gpu")
    )
    if xp_name == "cupy":
        import cupy

        to_xp, to_np = cupy.asarray, cupy.asnumpy
        taken = np.dtype(dtype) in (np.int32, np.int64)
    else:
        to_xp = to_np = np.asarray
        taken = True
    calls = []
    real = one_pass.potts_capacities
    monkeypatch.setattr(
        one_pass, "potts_capacities", lambda *a: calls.append(1) or real(*a)
    )
    D = conn // 2
    signed = np.dtype(dtype).kind == "i"
    trials = 5
    for trial in range(trials):
        unary = rng.integers(-40 if signed else 0, 60, size=(*grid, 2)).astype(dtype)
        weights = rng.integers(0, 30, size=(D, *grid)).astype(dtype)
        spot = tuple(int(rng.integers(0, n)) for n in (D, *grid))
        if trial == 1 and signed:
            # negative weights: those without a neighbour are ignored
            for _ in range(3):
                weights[tuple(int(rng.integers(0, n)) for n in (D, *grid))] = -1
        if trial == 2 and np.dtype(dtype).itemsize >= 4:
            weights[spot] = 2**30  # both arcs of the pair: beyond int32
        if trial == 3 and np.dtype(dtype) == np.int64:
            unary[spot[1:]] = (0, 2**31 + 7)  # a source capacity beyond int32
        if trial == 4 and np.dtype(dtype) == np.int64:
            unary[spot[1:]] = (2**32, -5)  # a sink capacity beyond int32
        try:
            want = _potts_energy(unary.astype(np.int64), weights.astype(np.int64), np)
            want_error = None
        except ValueError as e:
            want_error = e
        u, w = to_xp(unary), to_xp(weights)
        if want_error is not None:
            with pytest.raises(type(want_error)) as info:
                grid_energy(u, weights=w, connectivity=conn)
            assert str(info.value) == str(want_error)
            assert getattr(info.value, "first", None) == getattr(
                want_error, "first", None
            )
            assert getattr(info.value, "count", None) == getattr(
                want_error, "count", None
            )
            continue
        got = grid_energy(u, weights=w, connectivity=conn)
        assert got.constant == want.constant
        for name in ("source", "sink", "edges"):
            a, b = to_np(getattr(got, name)), getattr(want, name)
            assert a.dtype == np.int32 and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
    assert len(calls) == (trials if taken else 0)



@pytest.mark.parametrize(
    "xp_name", ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)]
)
def test_one_pass_terminal_capacities_beyond_int64(xp_name):
    """Unary costs whose difference leaves int64 (it would wrap negative) are
    capacities beyond int32: the error names the true value."""
    if xp_name == "cupy":
        import cupy

        to_xp = cupy.asarray
    else:
        to_xp = np.asarray
    unary = np.zeros((3, 4, 2), dtype=np.int64)
    weights = np.ones((2, 3, 4), dtype=np.int64)
    unary[1, 2] = (-(2**62), 2**62)  # source capacity 2**63
    with pytest.raises(ValueError, match=rf"source .* got {2**63} at index \(1, 2\)"):
        grid_energy(to_xp(unary), weights=to_xp(weights))
    unary[1, 2] = (2**63 - 1, -(2**63))  # sink capacity 2**64 - 1
    with pytest.raises(ValueError, match=rf"sink .* got {2**64 - 1} at index \(1, 2\)"):
        grid_energy(to_xp(unary), weights=to_xp(weights))


def test_list_inputs(rng):
    unary = rng.integers(-9, 9, size=(2, 3, 2))
    weights = rng.integers(0, 9, size=(2, 2, 3))
    ge = grid_energy(unary.tolist(), [[0, 1], [1, 0]], weights=weights.tolist())
    check_energies(ge, unary, None, weights, rng)
    src, snk, e = random_graph(rng, (2, 3))
    gg = grid_graph(src.tolist(), snk.tolist(), e.tolist())
    np.testing.assert_array_equal(gg.edges, e * ~np.stack(
        [border_mask((2, 3), k) for k in range(4)]))
    assert gg.source.dtype == np.int32


def test_scale_quantises_costs(rng):
    grid = (3, 4)
    unary = rng.integers(-40, 40, size=(*grid, 2))
    weights = rng.integers(0, 20, size=(2, *grid))
    ge = grid_energy(unary / 8.0, weights=weights / 8.0, scale=8)
    check_energies(ge, unary, None, weights, rng)
    pw = np.array([[0.25, 1.5], [1.0, -0.5]])
    ge = grid_energy(unary / 4.0, pw, scale=4.0)
    check_energies(ge, unary, pw * 4, None, rng)
    # rounding to nearest: 0.3 * 10 -> 3, 0.26 * 10 -> 3 (never truncated to 2)
    ge = grid_energy(np.full((1, 2, 2), 0.26), weights=np.full((2, 1, 2), 0.3),
                     scale=10)
    assert ge.energy(np.array([[0, 1]])) == 3 + 3 + 3


def test_scale_on_integer_costs(rng):
    unary = rng.integers(0, 9, size=(2, 2, 2))
    weights = rng.integers(0, 9, size=(2, 2, 2))
    ge = grid_energy(unary, weights=weights, scale=3)
    x = np.array([[0, 1], [1, 1]])
    assert ge.energy(x) == 3 * direct_energy(unary, x, None, weights)


def test_ignored_entries(rng):
    """Weights and per-edge terms at the last index of their axis couple nothing."""
    grid = (3, 4, 5)
    unary = rng.integers(-9, 9, size=(*grid, 2))
    weights = rng.integers(0, 9, size=(3, *grid))
    pw = random_submodular_pairwise(rng, grid)
    junk_w = weights.copy()
    junk_pw = pw.copy()
    for d in range(3):
        last = border_mask(grid, 2 * d)
        junk_w[d][last] = -7  # would be non-submodular if it were used
        junk_pw[d][last] = [[9, -9], [-9, 9]]
    for x in random_labels(rng, grid, count=4):
        want = direct_energy(unary, x, None, weights)
        assert grid_energy(unary, weights=junk_w).energy(x) == want
        want = direct_energy(unary, x, pw, weights)
        assert grid_energy(unary, junk_pw, weights=junk_w).energy(x) == want
    # a large value that is never used must not trip the int32 checks either
    junk_w[0][border_mask(grid, 0)] = INT32_MAX
    x = np.ones(grid, dtype=np.uint8)
    assert grid_energy(unary, weights=junk_w).energy(x) == direct_energy(
        unary, x, None, weights)


# -------------------------------------------------------------- minimum energy


@pytest.mark.parametrize("grid", [(1, 1), (1, 5), (3, 3), (2, 4), (4, 2), (2, 2, 2),
                                  (1, 2, 3), (3, 1, 3)], ids=str)
def test_min_energy_brute_force(grid, rng, backend):
    nd = len(grid)
    for form in ("potts", "matrix", "per-edge"):
        unary = rng.integers(-30, 30, size=(*grid, 2))
        weights = rng.integers(0, 15, size=(nd, *grid))
        if form == "potts":
            pw = None
        elif form == "matrix":
            pw = np.array([[-2, 6], [3, 1]])
        else:
            pw = random_submodular_pairwise(rng, grid, low=-10, high=10)
        ge = grid_energy(unary, pw, weights=weights)
        best = brute_force_energy_min(unary, pw, weights)
        result = maxflow_grid(ge, backend=backend)
        assert ge.constant + result.flow == best
        assert ge.energy(result.labels) == best
        assert direct_energy(unary, result.labels, pw, weights) == best


# -------------------------------------------------------------- submodularity


def test_non_submodular_weights():
    grid = (3, 5)
    unary = np.zeros((*grid, 2), dtype=np.int32)
    weights = np.ones((2, *grid), dtype=np.int32)
    weights[1][0, 3] = -2  # +y from (0, 3)
    weights[0][1, 2] = -1  # +x from (1, 2): direction 0 comes first
    weights[0][2, 4] = -5  # ignored: no +x neighbour in the last column
    with pytest.raises(NonSubmodularError, match="not submodular") as info:
        grid_energy(unary, weights=weights)
    assert isinstance(info.value, ValueError)
    assert info.value.count == 2
    assert info.value.first == (0, 1, 2)


def test_non_submodular_matrix():
    grid = (3, 4)
    unary = np.zeros((*grid, 2), dtype=np.int32)
    with pytest.raises(NonSubmodularError) as info:
        grid_energy(unary, np.array([[3, 0], [0, 3]]))
    n_edges = 3 * (4 - 1) + (3 - 1) * 4
    assert info.value.count == n_edges
    assert info.value.first == (0, 0, 0)
    # w = 0 makes any term harmless; w < 0 flips a submodular one
    w = np.zeros((2, *grid), dtype=np.int32)
    grid_energy(unary, np.array([[3, 0], [0, 3]]), weights=w)
    w[1][1, 1] = -1
    with pytest.raises(NonSubmodularError) as info:
        grid_energy(unary, np.array([[0, 1], [1, 0]]), weights=w)
    assert (info.value.count, info.value.first) == (1, (1, 1, 1))


def test_non_submodular_per_edge_3d(rng):
    grid = (2, 3, 4)
    unary = np.zeros((*grid, 2), dtype=np.int32)
    pw = random_submodular_pairwise(rng, grid)
    # make three edges violate, by one unit: B + C - A - D = -1
    for d, idx in [(2, (0, 2, 1)), (1, (1, 0, 3)), (2, (0, 0, 0))]:
        a, b, c, dd = pw[(d, *idx)].ravel()
        pw[(d, *idx, 0, 1)] = a + dd - c - 1
    with pytest.raises(NonSubmodularError) as info:
        grid_energy(unary, pw)
    assert info.value.count == 3
    assert info.value.first == (1, 1, 0, 3)
    # exactly modular (B + C - A - D = 0) is fine
    pw[(1, 1, 0, 3, 0, 1)] += 1
    pw[(2, 0, 2, 1, 0, 1)] += 1
    pw[(2, 0, 0, 0, 0, 1)] += 1
    ge = grid_energy(unary, pw)
    x = (rng.random(grid) < 0.5).astype(np.uint8)
    assert ge.energy(x) == direct_energy(unary, x, pw, None)


# ----------------------------------------------------------------- grid_graph


def test_grid_graph_form(rng):
    for shape in [(3, 4), (2, 3, 4)]:
        src, snk, e = random_graph(rng, shape, high=50)
        ge = grid_graph(src, snk, e)
        assert ge.constant == 0
        assert ge.shape == shape
        assert ge.source.dtype == ge.sink.dtype == ge.edges.dtype == np.int32
        np.testing.assert_array_equal(ge.source, src)
        np.testing.assert_array_equal(ge.sink, snk)
        for x in random_labels(rng, shape, count=5):
            assert ge.energy(x) == cut_capacity(src, snk, e, x)
        with pytest.raises(dataclasses.FrozenInstanceError):
            ge.constant = 5


def test_grid_graph_border_arcs_ignored(rng):
    for shape in [(4, 5), (3, 4, 2)]:
        src, snk, e = random_graph(rng, shape, high=20)
        junk = e.copy()
        for k in range(junk.shape[0]):
            junk[k][border_mask(shape, k)] = rng.integers(1, INT32_MAX, dtype=np.int64)
        saved = junk.copy()
        ge = grid_graph(src, snk, junk)
        np.testing.assert_array_equal(junk, saved)  # zeroed in a copy
        for k in range(junk.shape[0]):
            assert not ge.edges[k][border_mask(shape, k)].any()
            inner = ~border_mask(shape, k)
            np.testing.assert_array_equal(ge.edges[k][inner], e[k][inner])
        for x in random_labels(rng, shape, count=4):
            assert ge.energy(x) == cut_capacity(src, snk, e, x)
        assert maxflow_grid(ge, backend="cpu").flow == maxflow_grid(
            src, snk, e, backend="cpu").flow


@pytest.mark.parametrize("value", [-0.4, -0.5, -1e-9])
@pytest.mark.parametrize("where", ["source", "sink", "edges"])
def test_small_negative_float_capacities_are_refused(value, where):
    """-0.4 with scale=1 rounded to -0.0, passed the sign check and was used as 0
    (flow_graph refused it: the sign is now checked before rounding here too)."""
    arrays = {"source": np.zeros((1, 2)), "sink": np.zeros((1, 2)),
              "edges": np.zeros((4, 1, 2))}  # fmt: skip
    arrays[where][(0,) * arrays[where].ndim] = value
    with pytest.raises(ValueError, match=f"{where} must be non-negative, got {value}"):
        grid_graph(arrays["source"], arrays["sink"], arrays["edges"], scale=1)
    with pytest.raises(ValueError, match=f"{where} must be non-negative"):
        maxflow_grid(arrays["source"], arrays["sink"], arrays["edges"], scale=1,
                     backend="cpu")  # fmt: skip


def test_grid_graph_scale():
    src = np.array([[0.26, 1.0]])
    snk = np.array([[0.0, 0.05]])
    e = np.zeros((4, 1, 2))
    e[0, 0, 0] = 0.5
    ge = grid_graph(src, snk, e, scale=10)
    np.testing.assert_array_equal(ge.source, [[3, 10]])
    np.testing.assert_array_equal(ge.sink, [[0, 0]])  # 0.5 rounds to even
    assert ge.edges[0, 0, 0] == 5
    assert ge.source.dtype == np.int32
    ge = grid_graph(np.array([[1, 2]]), np.array([[3, 4]]), np.zeros((4, 1, 2), int),
                    scale=3)
    np.testing.assert_array_equal(ge.sink, [[9, 12]])
    ge = grid_graph(np.array([[1, 3]]), np.array([[3, 4]]), np.zeros((4, 1, 2), int),
                    scale=0.5)
    np.testing.assert_array_equal(ge.source, [[0, 2]])  # rint(0.5) = 0, rint(1.5) = 2


def test_grid_graph_arc_pair_limit():
    src = snk = np.zeros((2, 1), dtype=np.int32)
    e = np.zeros((4, 2, 1), dtype=np.int64)
    e[2, 0, 0] = INT32_MAX - 5
    e[3, 1, 0] = 5  # pair sum exactly 2**31 - 1: accepted
    assert grid_graph(src, snk, e).edges[3, 1, 0] == 5
    e[3, 1, 0] = 6
    with pytest.raises(ValueError, match=r"forward \+ backward .* planes 2 and 3"):
        grid_graph(src, snk, e)
    # border entries do not count towards a pair
    e = np.zeros((4, 2, 1), dtype=np.int64)
    e[0] = INT32_MAX
    e[1] = INT32_MAX
    assert not grid_graph(src, snk, e).edges.any()


# ------------------------------------------------------------------ bad inputs


def test_bad_inputs_grid_energy(rng):
    u = rng.integers(0, 9, size=(3, 4, 2))
    w = rng.integers(0, 9, size=(2, 3, 4))
    bad_shape = "unary must have shape"
    for shape in [(3, 4), (3, 4, 3), (5, 2), (2,), (2, 2, 2, 2, 2)]:
        with pytest.raises(ValueError, match=bad_shape):
            grid_energy(np.zeros(shape, dtype=np.int32), np.eye(2, dtype=int)[::-1])
    with pytest.raises(TypeError, match="unary has floating dtype"):
        grid_energy(u.astype(np.float32), weights=w)
    with pytest.raises(TypeError, match="unary must have an integer dtype, got bool"):
        grid_energy(u.astype(bool), weights=w)
    with pytest.raises(TypeError, match="unary must have an integer dtype"):
        grid_energy(u.astype(object), weights=w)
    with pytest.raises(TypeError, match="unary must be an array"):
        grid_energy("unary", weights=w)
    with pytest.raises(TypeError, match="unary must be an array"):
        grid_energy(None, weights=w)
    for value in (np.nan, np.inf, -np.inf):
        bad = u.astype(np.float64)
        bad[1, 2, 0] = value
        with pytest.raises(ValueError, match=r"unary must be finite.*\(1, 2, 0\)"):
            grid_energy(bad, weights=w, scale=2.0)
    with pytest.raises(ValueError, match="weights must have shape"):
        grid_energy(u, weights=w[:, :2])
    with pytest.raises(ValueError, match="weights must have shape"):
        grid_energy(u, weights=w[0])
    with pytest.raises(TypeError, match="weights has floating dtype"):
        grid_energy(u, weights=w.astype(np.float64))
    with pytest.raises(ValueError, match="pairwise must have shape"):
        grid_energy(u, np.zeros((3, 3), dtype=int))
    with pytest.raises(ValueError, match="pairwise must have shape"):
        grid_energy(u, np.zeros((2, 3, 4, 2), dtype=int))
    with pytest.raises(TypeError, match="pairwise has floating dtype"):
        grid_energy(u, np.array([[0.0, 1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="pairwise and/or weights"):
        grid_energy(u)
    for conn in (0, 3, 5, 6, 26, "4", True, 4.0, None):
        with pytest.raises(ValueError, match=r"connectivity must be one of \(4, 8\)"):
            grid_energy(u, weights=w, connectivity=conn)
    with pytest.raises(ValueError, match=r"weights must have shape \(D, \*grid\)"):
        grid_energy(u, weights=w, connectivity=8)  # 8 needs 4 directions of weights
    with pytest.raises(ValueError, match="weights must be <="):
        grid_energy(u, weights=np.full((2, 3, 4), INT32_MAX // 2 + 1))
    grid_energy(u, weights=np.full((2, 3, 4), INT32_MAX // 2))  # the largest weight
    big = np.zeros((3, 4, 2), dtype=np.int64)
    big[0, 1, 1] = 2**31
    over = "capacities of this energy exceed int32"
    with pytest.raises(ValueError, match=f"source {over}"):
        grid_energy(big, weights=w)
    with pytest.raises(ValueError, match=f"source {over}"):
        grid_energy(big, np.array([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match=f"sink {over}"):
        grid_energy(big[..., ::-1], weights=w)


def test_bad_inputs_energy_labels(rng):
    ge = grid_energy(rng.integers(0, 9, size=(3, 4, 2)),
                     weights=rng.integers(0, 9, size=(2, 3, 4)))
    for shape in [(4, 3), (3, 4, 1), (12,)]:
        with pytest.raises(ValueError, match="labels must have the grid shape"):
            ge.energy(np.zeros(shape, dtype=np.uint8))
    x = np.zeros((3, 4), dtype=np.int64)
    x[2, 1] = 2
    with pytest.raises(ValueError,
                       match=r"labels must be 0 or 1, got 2 at index \(2, 1\)"):
        ge.energy(x)
    x[2, 1] = -1
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        ge.energy(x)
    with pytest.raises(TypeError, match="labels must be bool or integer"):
        ge.energy(np.zeros((3, 4)))
    assert ge.energy(np.ones((3, 4), dtype=bool)) == ge.energy(np.ones((3, 4), int))
    assert ge.energy(np.zeros((3, 4), dtype=np.int8).tolist()) == ge.energy(
        np.zeros((3, 4), dtype=np.uint8))


@pytest.mark.parametrize("name", ["source", "sink", "edges"])
def test_bad_inputs_grid_graph(name, rng):
    src, snk, e = random_graph(rng, (3, 4), high=9)

    def call(value, **kw):
        args = {"source": src, "sink": snk, "edges": e}
        args[name] = value
        return grid_graph(args["source"], args["sink"], args["edges"], **kw)

    arr = {"source": src, "sink": snk, "edges": e}[name]
    neg = arr.astype(np.int64)
    neg.flat[5] = -1
    with pytest.raises(ValueError, match=f"{name} must be non-negative, got -1"):
        call(neg)
    for too_big in (arr.astype(np.int64) + 2**31, arr.astype(np.uint32) + 2**31,
                    arr.astype(np.uint64) + 2**40):
        with pytest.raises(ValueError, match=f"{name} must fit in int32"):
            call(too_big)
    with pytest.raises(TypeError, match=f"{name} has floating dtype"):
        call(arr.astype(np.float64))
    with pytest.raises(TypeError, match=f"{name} must have an integer dtype.*bool"):
        call(arr.astype(bool))
    for odd in (arr.astype(object), arr.astype(np.complex128), arr.astype(str)):
        with pytest.raises(TypeError, match=f"{name} must have an integer dtype"):
            call(odd)
    with pytest.raises(TypeError, match=f"{name} must be a NumPy or CuPy array"):
        call({"not": "an array"})
    for value in (np.nan, np.inf):
        bad = arr.astype(np.float64)
        bad.flat[3] = value
        with pytest.raises(ValueError, match=f"{name} must be finite"):
            call(bad, scale=1.0)
    with pytest.raises(ValueError, match=f"{name} must fit in int32"):
        call(arr.astype(np.float64) + 2.0**31, scale=1.0)
    # the same values as floats with a scale, or as a list, are fine
    ge = call(arr.astype(np.float64), scale=1.0)
    assert ge.energy(np.ones((3, 4), np.uint8)) == grid_graph(src, snk, e).energy(
        np.ones((3, 4), np.uint8))
    assert call(arr.tolist()).source.dtype == np.int32


def test_bad_inputs_grid_graph_shapes(rng):
    src, snk, e = random_graph(rng, (3, 4), high=9)
    for shape in [(5,), (), (2, 2, 2, 2)]:
        z = np.zeros(shape, dtype=np.int32)
        with pytest.raises(ValueError, match="source must be a 2-D .* or 3-D"):
            grid_graph(z, z, np.zeros((2 * max(len(shape), 1), *shape), np.int32))
    with pytest.raises(ValueError, match="sink must have the shape of source"):
        grid_graph(src, snk.T, e)
    with pytest.raises(ValueError, match=r"edges must have shape .*K in \(4, 8\)"):
        grid_graph(src, snk, np.zeros((6, 3, 4), np.int32))  # K = 6 on a 2-D grid
    with pytest.raises(ValueError, match=r"edges must have shape .*K in \(4, 8\)"):
        grid_graph(src, snk, e[:, :, :3])
    with pytest.raises(ValueError, match=r"edges must have shape .*K in \(4, 8\)"):
        grid_graph(src, snk, e[0])
    s3, t3, e3 = random_graph(rng, (2, 3, 4))
    with pytest.raises(ValueError, match=r"edges must have shape .*K in \(6, 18, 26\)"):
        grid_graph(s3, t3, e3[:4])


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), -1.0, 0, "2", True])
def test_bad_scale(scale):
    cap = np.ones((2, 3))
    edges = np.ones((4, 2, 3))
    err = TypeError if isinstance(scale, (str, bool)) else ValueError
    with pytest.raises(err, match="scale must be"):
        grid_graph(cap, cap, edges, scale=scale)
    with pytest.raises(err, match="scale must be"):
        grid_energy(np.ones((2, 3, 2)), weights=np.ones((2, 2, 3)), scale=scale)


# ------------------------------------------------- costs near and beyond int64


@pytest.mark.parametrize(
    "xp_name", ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)]
)
def test_constant_exact_beyond_int64(xp_name, rng):
    """The energy's constant sums the terminal minima over the nodes; with costs near
    2**62 that sum leaves int64 and must still be exact (one-pass path on the host
    and the device, the symmetric form's array path from uint64, the general path)."""
    if xp_name == "cupy":
        import cupy

        to_xp = cupy.asarray
    else:
        to_xp = np.asarray
    grid = (3, 4)
    weights = rng.integers(0, 9, size=(2, *grid))
    big = 2**62 - 2**40
    unary = big + rng.integers(-50, 50, size=(*grid, 2))
    ge = grid_energy(to_xp(unary.astype(np.int64)), weights=to_xp(weights))
    if xp_name == "cupy":
        ge = GridEnergy(*(to_np(a) for a in (ge.source, ge.sink, ge.edges)),
                        ge.constant)  # fmt: skip
    check_energies(ge, unary, None, weights, rng)
    assert ge.constant > 2**63  # the sum left int64
    if xp_name == "cupy":
        return
    # the array paths: uint64 (symmetric form) and a pairwise matrix (general form)
    check_energies(
        grid_energy(unary.astype(np.uint64), weights=weights.astype(np.uint64)),
        unary, None, weights, rng,
    )  # fmt: skip
    half = 2**61 + rng.integers(-50, 50, size=(*grid, 2))
    pw = np.array([[3, 7], [5, 2]])
    check_energies(grid_energy(half, pw, weights=weights), half, pw, weights, rng)


def to_np(a):
    import cupy

    return cupy.asnumpy(a)


def test_costs_beyond_int64_are_errors():
    """Costs the int64 construction could wrap are refused, naming the input, never
    turned into a wrapped energy (a uint64 cost read as -1, a negative capacity)."""
    w = np.ones((2, 1, 1), dtype=np.int32)
    with pytest.raises(ValueError, match=rf"unary must lie .* got {2**64 - 1} at"):
        grid_energy(np.array([[[0, 2**64 - 1]]], dtype=np.uint64), weights=w)
    u = np.array([[[-(2**63), 2**63 - 1]]], dtype=np.int64)
    with pytest.raises(ValueError, match=rf"unary must lie .* got {-(2**63)} at"):
        grid_energy(u, np.array([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="unary must lie .* after scaling"):
        grid_energy(np.array([[[0.0, 1e19]]]), weights=w, scale=2)
    # pairwise x weights beyond int64: refused, not a dropped smoothness term
    u = np.zeros((1, 2, 2), dtype=np.int64)
    P = np.array([[0, 2**32], [2**32, 0]], dtype=np.int64)
    W = np.full((2, 1, 2), 2**32, dtype=np.int64)
    with pytest.raises(ValueError, match="too large for exact int64 arithmetic"):
        grid_energy(u, P, weights=W)
    # B + C beyond int64: refused, not reported as a non-submodular energy
    with pytest.raises(ValueError, match="too large for exact int64 arithmetic"):
        grid_energy(u, np.array([[0, 2**61], [2**61, 0]], dtype=np.int64))


def test_integer_scale_beyond_int32_is_an_error():
    """An integral scale that takes capacities beyond int32 is refused with the true
    scaled value (no int64 product that wraps to 0 or to a negative value)."""
    s = np.full((1, 1), 4, dtype=np.int32)
    e = np.zeros((4, 1, 1), dtype=np.int32)
    for scale, value in ((2**62, 2**64), (2**61, 2**63), (1e20, 4 * 10**20)):
        with pytest.raises(ValueError, match="source must fit in int32") as info:
            maxflow_grid(s, s, e, scale=scale, backend="cpu")
        assert f"got {value} at index (0, 0)" in str(info.value)
    # a negative capacity is named as given, before the scale
    with pytest.raises(ValueError, match=r"source must be non-negative, got -12"):
        grid_graph(-3 * s, s, e, scale=2**62)
    # segment(): a cost scaled beyond int64 is an error, not the dearer label
    from vision_cuts import segment

    with pytest.raises(ValueError, match="unary must lie .* after scaling"):
        segment(np.array([[[0, 4]]], dtype=np.int64), np.zeros((2, 1, 1), np.int32),
                scale=2**62, backend="cpu")  # fmt: skip


def test_float_weights_with_pairwise_and_scale(rng):
    """Floating weights with a pairwise matrix are quantised with scale as the
    per-edge terms w * V (rounded once), not refused with a hint to pass scale."""
    grid = (3, 4)
    unary = rng.integers(-20, 20, size=(*grid, 2))
    weights = rng.integers(0, 16, size=(2, *grid)) / 4.0
    pw = np.array([[1, 6], [4, 2]])
    ge = grid_energy(unary / 4.0, pw, weights=weights, scale=4)
    per_edge = np.rint(weights[..., None, None] * pw * 4).astype(np.int64)
    check_energies(ge, unary, per_edge, None, rng)
    with pytest.raises(TypeError, match="weights has floating dtype"):
        grid_energy(unary, pw, weights=weights)  # no scale: floats still need one
    with pytest.raises(ValueError, match="weights must be finite"):
        grid_energy(unary, pw, weights=np.full((2, *grid), np.nan), scale=4)


def test_capacity_array_messages():
    """A ragged list is a ValueError naming the parameter; a 0-d array is reported
    with its own shape ()."""
    with pytest.raises(ValueError, match="source must be a regular"):
        grid_graph([[1, 2], [3]], np.ones((2, 2)), np.ones((4, 2, 2)))
    with pytest.raises(ValueError, match=r"source must be a 2-D .* got shape \(\)"):
        grid_graph(np.array(5), np.array(5), np.ones((4, 1, 1), np.int32))
    with pytest.raises(ValueError, match="unary must be a regular"):
        grid_energy([[[1, 2], [3]]], weights=np.ones((2, 1, 2), np.int32))


def test_masked_arrays_are_refused():
    """A masked array's mask would be dropped silently: refused, naming the input."""
    cap = np.ma.masked_array(np.ones((2, 3), np.int32), mask=[[0, 1, 0], [0, 0, 0]])
    with pytest.raises(TypeError, match="source must be a plain array, got a masked"):
        grid_graph(cap, np.ones((2, 3), np.int32), np.ones((4, 2, 3), np.int32))
    u = np.ma.masked_array(np.ones((2, 3, 2), np.int32))
    with pytest.raises(TypeError, match="unary must be a plain array"):
        grid_energy(u, weights=np.ones((2, 2, 3), np.int32))
    with pytest.raises(TypeError, match="unary must be a plain array"):
        grid_energy(u, np.array([[0, 1], [1, 0]]))
    # float weights with a pairwise table are folded together before the scale
    u = np.zeros((2, 2, 2), np.int64)
    pw = np.array([[0, 1], [1, 0]])
    w = np.ma.masked_array(np.full((2, 2, 2), 1e9), mask=True)
    with pytest.raises(TypeError, match="weights must be a plain array"):
        grid_energy(u, pw, weights=w, scale=1.0)
    pm = np.ma.masked_array([[0, 10**6], [10**6, 0]], mask=[[0, 1], [1, 0]])
    with pytest.raises(TypeError, match="pairwise must be a plain array"):
        grid_energy(u, pm, weights=np.ones((2, 2, 2)), scale=1.0)


@pytest.mark.gpu
def test_masked_arrays_are_refused_on_the_gpu_path():
    """int32 NumPy arrays go to the device unchecked on the host; a masked one does
    not: the host checks refuse it."""
    cap = np.ma.masked_array(np.ones((2, 3), np.int32), mask=[[0, 1, 0], [0, 0, 0]])
    with pytest.raises(TypeError, match="source must be a plain array"):
        maxflow_grid(cap, np.ones((2, 3), np.int32), np.ones((4, 2, 3), np.int32),
                     backend="gpu")  # fmt: skip


def test_scaled_beyond_float64_is_an_error():
    """A float times scale beyond float64 is a ValueError naming the input, not an
    OverflowError from an infinite value."""
    big = np.full((3, 4), 1e308)
    one = np.ones((3, 4))
    with pytest.raises(ValueError, match=r"source times scale \(10.0\) must be a fin"):
        grid_graph(big, one, np.ones((4, 3, 4)), scale=10)
    with pytest.raises(ValueError, match=r"unary times scale \(10.0\) must be a fin"):
        grid_energy(np.full((3, 4, 2), 1e308), weights=np.ones((2, 3, 4)), scale=10)


@pytest.mark.parametrize(
    "backend", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]
)
def test_ndarray_subclasses_as_capacities(backend, tmp_path):
    """A memmap or np.matrix beside plain arrays is a NumPy array like the others,
    on both backends (the device path compared exact array types)."""
    s = np.ones((3, 4), np.int32)
    e = np.ones((4, 3, 4), np.int32)
    mm = np.memmap(tmp_path / "e.bin", dtype=np.int32, mode="w+", shape=e.shape)
    mm[:] = 1
    want = maxflow_grid(s, s, e, backend="cpu").flow
    assert maxflow_grid(s, s, mm, backend=backend).flow == want
    with pytest.warns(PendingDeprecationWarning):  # (NumPy's, on np.matrix)
        m = np.asmatrix(s)
    assert maxflow_grid(m, m, e, backend=backend).flow == want


@pytest.mark.parametrize("dtype", [">i2", ">i4", ">i8", ">u2"])
@pytest.mark.parametrize("shape", [(5, 6), (3, 4, 5)])
def test_energy_of_big_endian_arrays(dtype, shape):
    """Arrays in the other byte order (FITS volumes, np.frombuffer(..., '>i2')) took
    the one-pass path, where numba stopped with a typing error; they give the energy
    of the same values in the machine's order."""
    rng = np.random.default_rng(11)
    u = rng.integers(0, 30, (*shape, 2))
    w = rng.integers(0, 5, (len(shape), *shape))
    want = grid_energy(u, weights=w)
    for uu, ww in ((u.astype(dtype), w.astype(dtype)), (u, w.astype(dtype))):
        got = grid_energy(uu, weights=ww)
        for name in ("source", "sink", "edges"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
        assert got.constant == want.constant
    labels = segment(u.astype(dtype), w.astype(dtype), backend="cpu")
    np.testing.assert_array_equal(labels, segment(u, w, backend="cpu"))


def test_rounding_that_breaks_submodularity_says_so():
    """Each float term is rounded on its own: a small positive B + C - A - D may
    round below 0. The error says it came from the rounding (a larger scale keeps the
    sign), where the energy's own terms say nothing of scale."""
    u = np.zeros((1, 2, 2))
    pw = np.array([[0.6, 0.4], [0.4, 0.1]])  # B + C - A - D = 0.1
    with pytest.raises(NonSubmodularError, match=r"< 0 after rounding with scale=1 "
                       r"\(each term is rounded on its own"):
        grid_energy(u, pw, scale=1)
    assert grid_energy(u, pw, scale=10).edges.max() == 1
    with pytest.raises(NonSubmodularError) as info:
        grid_energy(u.astype(int), np.array([[0, -1], [-2, 0]]))
    assert "rounding" not in str(info.value)


def test_labels_and_python_integers_errors_name_the_parameter():
    energy = grid_energy(np.zeros((2, 3, 2), int), weights=np.ones((2, 2, 3), int))
    with pytest.raises(ValueError, match=r"labels must be a regular \(rectangular\)"):
        energy.energy([[0, 1], [1]])
    note = r"got object \(the list given holds Python objects: integers beyond int64"
    with pytest.raises(TypeError, match="unary must have an integer dtype, " + note):
        grid_energy([[[2**70, 0]]], weights=np.ones((2, 1, 1), int))
    with pytest.raises(TypeError, match=r"source must have an integer dtype \(int32 "
                       r"preferred\), " + note):
        maxflow_grid([[2**70, 0]], [[0, 0]], np.zeros((4, 1, 2), int))
