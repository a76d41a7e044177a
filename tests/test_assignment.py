"""linear_sum_assignment / linear_sum_assignment_batched against SciPy's optimum.

Oracle: ``scipy.optimize.linear_sum_assignment`` for the optimal total (exact for
integer costs, to rounding for float costs) and for feasibility. Every returned
assignment is also checked on its own: distinct rows and columns, ``min(n, m)`` pairs,
sorted rows, no forbidden pair. On ties the chosen pairs may differ from SciPy's, so
only totals are compared.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from scipy.optimize import linear_sum_assignment as scipy_lsa

from vision_cuts import (
    BackendUnavailableError,
    linear_sum_assignment,
    linear_sum_assignment_batched,
)
from vision_cuts._backend import gpu_available

KINDS = ("uniform", "ties", "geometric", "forbidden", "normal")


@pytest.fixture(autouse=True)
def _cpu_by_default(monkeypatch):
    """backend="auto" means the CPU here (the GPU solver has test_assignment_gpu.py;
    its float results are quantised, not exact to rounding as checked below)."""
    monkeypatch.setenv("VISION_CUTS_BACKEND", "cpu")


# ------------------------------------------------------------------- generators


def make_cost(rng, kind, shape, *, maximize=False):
    """Random costs of shape (..., n, m); ``forbidden`` keeps a feasible pairing."""
    *batch, n, m = shape
    if kind == "uniform":
        cost = rng.random(shape)
    elif kind == "ties":
        cost = rng.integers(0, 4, shape)
    elif kind == "normal":
        cost = rng.integers(-1000, 1000, shape).astype(np.float64)
    elif kind == "geometric":
        a = rng.random((*batch, n, 2)) * 100
        b = rng.random((*batch, m, 2)) * 100
        cost = np.sqrt(((a[..., :, None, :] - b[..., None, :, :]) ** 2).sum(-1))
    elif kind == "forbidden":
        cost = rng.integers(0, 50, shape).astype(np.float64)
        forbid = rng.random(shape) < 0.5
        # plant one feasible pairing in every problem so it stays feasible
        k = min(n, m)
        flat = cost.reshape(-1, n, m)
        fflat = forbid.reshape(-1, n, m)
        for b in range(flat.shape[0]):
            rows = rng.permutation(n)[:k]
            cols = rng.permutation(m)[:k]
            fflat[b, rows, cols] = False
        flat[fflat] = -np.inf if maximize else np.inf
        cost = flat.reshape(shape)
    else:  # pragma: no cover
        raise AssertionError(kind)
    return cost


def scipy_total(cost, maximize=False):
    """SciPy's optimal total, or None when SciPy reports infeasibility."""
    try:
        r, c = scipy_lsa(cost, maximize=maximize)
    except ValueError as exc:
        assert "infeasible" in str(exc)
        return None
    return cost[r, c].sum()


def check_assignment(cost, row_ind, col_ind, maximize=False, total=None):
    """A valid assignment of ``cost`` whose total is SciPy's optimum."""
    n, m = cost.shape
    k = min(n, m)
    assert isinstance(row_ind, np.ndarray) and isinstance(col_ind, np.ndarray)
    assert row_ind.dtype.kind == "i" and col_ind.dtype.kind == "i"
    assert row_ind.shape == col_ind.shape == (k,)
    assert np.all(np.diff(row_ind) > 0)  # sorted, distinct
    assert len(np.unique(col_ind)) == k
    if k:
        assert 0 <= row_ind.min() and row_ind.max() < n
        assert 0 <= col_ind.min() and col_ind.max() < m
    picked = cost[row_ind, col_ind]
    assert np.all(np.isfinite(picked)), "a forbidden pair was assigned"
    if total is None:
        total = scipy_total(cost, maximize)
    got = picked.sum()
    if np.asarray(cost).dtype.kind in "biu":
        assert got == total
    else:
        assert np.isclose(got, total, rtol=1e-12, atol=1e-9)


def random_shape(rng, max_side=12):
    return int(rng.integers(1, max_side + 1)), int(rng.integers(1, max_side + 1))


# ----------------------------------------------------------------- single problem


def test_smoke():
    cost = np.array([[4, 1, 3], [2, 0, 5], [3, 2, 2]])
    r, c = linear_sum_assignment(cost, backend="cpu")
    assert r.tolist() == [0, 1, 2]
    assert c.tolist() == [1, 0, 2]
    assert cost[r, c].sum() == 5


@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_single_matches_scipy(rng, kind, maximize):
    for _ in range(60):
        n, m = random_shape(rng)
        cost = make_cost(rng, kind, (n, m), maximize=maximize)
        r, c = linear_sum_assignment(cost, maximize, backend="cpu")
        check_assignment(cost, r, c, maximize)


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (3, 9), (9, 3)])
def test_single_shapes(rng, shape):
    cost = rng.random(shape)
    r, c = linear_sum_assignment(cost)
    check_assignment(cost, r, c)


@pytest.mark.parametrize("shape", [(0, 0), (0, 5), (5, 0)])
def test_single_empty(shape):
    r, c = linear_sum_assignment(np.zeros(shape))
    assert r.shape == c.shape == (0,)
    assert r.dtype.kind == c.dtype.kind == "i"


@pytest.mark.parametrize(
    "dtype", [np.int8, np.int32, np.int64, np.uint16, np.float32, np.float64, np.bool_]
)
def test_single_dtypes(rng, dtype):
    cost = rng.integers(0, 2 if dtype is np.bool_ else 100, (6, 8)).astype(dtype)
    as_float = cost.astype(np.float64)
    for maximize in (False, True):
        r, c = linear_sum_assignment(cost, maximize)
        check_assignment(as_float, r, c, maximize)
        rb, cb = linear_sum_assignment_batched(np.stack([cost, cost[::-1]]), maximize)
        check_assignment(as_float, rb[0], cb[0], maximize)
        check_assignment(as_float[::-1], rb[1], cb[1], maximize)


def test_single_list_and_noncontiguous(rng):
    cost = rng.integers(0, 100, (8, 10))
    r, c = linear_sum_assignment(cost.tolist())
    check_assignment(cost, r, c)
    view = cost.T[::2]  # (5, 8), not contiguous
    r, c = linear_sum_assignment(view)
    check_assignment(np.ascontiguousarray(view), r, c)


def test_single_does_not_modify_input(rng):
    cost = make_cost(rng, "forbidden", (6, 6))
    before = cost.copy()
    linear_sum_assignment(cost)
    linear_sum_assignment_batched(cost[None])
    np.testing.assert_array_equal(cost, before)


def test_maximize_with_forbidden():
    cost = np.array([[-np.inf, 5.0, 1.0], [3.0, -np.inf, 2.0]])
    r, c = linear_sum_assignment(cost, maximize=True)
    assert (r.tolist(), c.tolist()) == ([0, 1], [1, 0])
    rb, cb = linear_sum_assignment_batched(cost[None], maximize=True)
    assert (rb.tolist(), cb.tolist()) == ([[0, 1]], [[1, 0]])


def test_large_integers_exact(rng):
    base = 2**45
    cost = base + rng.integers(0, 1000, (40, 12, 12))
    total = [scipy_total(c) for c in cost.astype(np.float64)]
    r, c = linear_sum_assignment_batched(cost)
    for b in range(len(cost)):
        assert int(cost[b][r[b], c[b]].sum()) == int(total[b])


@pytest.mark.parametrize("fn", [linear_sum_assignment, linear_sum_assignment_batched])
@pytest.mark.parametrize(
    "cost",
    [
        np.array([[np.inf, np.inf], [1.0, 2.0]]),  # a row with no allowed column
        np.array([[1.0, np.inf, np.inf], [2.0, np.inf, np.inf]]),  # two rows, 1 col
        np.array([[np.inf]]),
        np.full((3, 2), np.inf),
    ],
)
def test_infeasible(fn, cost):
    arg = cost if fn is linear_sum_assignment else np.stack([np.zeros_like(cost), cost])
    with pytest.raises(ValueError, match="cost matrix is infeasible") as info:
        fn(arg)
    if fn is linear_sum_assignment:  # SciPy's words, then the reason
        words = f"pairs of cost (shape {cost.shape}) avoids its forbidden"
        assert words in str(info.value)


def test_infeasible_maximize():
    cost = np.array([[-np.inf, -np.inf], [1.0, 2.0]])
    with pytest.raises(ValueError, match="cost matrix is infeasible"):
        linear_sum_assignment(cost, maximize=True)
    with pytest.raises(ValueError, match=r"costs\[0\]"):
        linear_sum_assignment_batched(cost[None], maximize=True)


def test_batched_infeasible_names_index(rng):
    costs = rng.random((6, 4, 5))
    costs[3, 1, :] = np.inf
    costs[5, :, 2:] = np.inf  # 4 rows into 2 columns
    with pytest.raises(
        ValueError,
        match=r"cost matrix is infeasible: costs\[3\].*2 of 6 problems.*\[3, 5\]",
    ):
        linear_sum_assignment_batched(costs)


# ----------------------------------------------------------------------- batched


@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "shape",
    [
        (300, 1, 1),
        (300, 2, 2),
        (200, 5, 5),
        (150, 8, 8),
        (100, 6, 9),
        (100, 9, 6),
        (100, 3, 11),
        (100, 11, 3),
        (40, 24, 24),
        (40, 20, 33),
        (20, 33, 20),
    ],
)
def test_batched_matches_scipy(rng, kind, maximize, shape):
    costs = make_cost(rng, kind, shape, maximize=maximize)
    r, c = linear_sum_assignment_batched(costs, maximize)
    k = min(shape[1:])
    assert r.shape == c.shape == (shape[0], k)
    assert r.dtype == c.dtype == np.int64
    for b in range(shape[0]):
        check_assignment(costs[b], r[b], c[b], maximize)
        if shape[1] <= shape[2]:
            np.testing.assert_array_equal(r[b], np.arange(k))


def test_batched_random_stacks(rng):
    # many small stacks of random shapes, a mixture of every kind
    for t in range(120):
        kind = KINDS[t % len(KINDS)]
        n, m = random_shape(rng, 16)
        nbatch = int(rng.integers(1, 12))
        costs = make_cost(rng, kind, (nbatch, n, m))
        r, c = linear_sum_assignment_batched(costs)
        for b in range(nbatch):
            check_assignment(costs[b], r[b], c[b])


def test_batched_mixed_finite_and_forbidden(rng):
    # one stack where some problems take the JV path and some the inf-aware path
    costs = make_cost(rng, "forbidden", (64, 10, 12)).astype(np.float64)
    finite = rng.random(64) < 0.5
    costs[finite] = rng.integers(0, 50, (int(finite.sum()), 10, 12))
    r, c = linear_sum_assignment_batched(costs)
    for b in range(64):
        check_assignment(costs[b], r[b], c[b])


def test_batched_constant_costs():
    costs = np.ones((5, 7, 7))
    r, c = linear_sum_assignment_batched(costs)
    for b in range(5):
        check_assignment(costs[b], r[b], c[b])


@pytest.mark.parametrize("shape", [(0, 3, 3), (4, 0, 3), (4, 3, 0), (0, 0, 0)])
def test_batched_empty(shape):
    r, c = linear_sum_assignment_batched(np.zeros(shape))
    k = min(shape[1:])
    assert r.shape == c.shape == (shape[0], k)
    assert r.dtype == c.dtype == np.int64


def test_batched_agrees_with_single(rng):
    costs = rng.integers(0, 1000, (50, 9, 7))
    rb, cb = linear_sum_assignment_batched(costs)
    for b in range(50):
        r, c = linear_sum_assignment(costs[b])
        assert costs[b][r, c].sum() == costs[b][rb[b], cb[b]].sum()


# -------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    ("fn", "arg", "exc", "match"),
    [
        (
            linear_sum_assignment,
            np.zeros(3),
            ValueError,
            r"cost must be a 2-D .*\(3,\)",
        ),
        (
            linear_sum_assignment,
            np.zeros((2, 3, 4)),
            ValueError,
            r"cost must be a 2-D .*\(2, 3, 4\)",
        ),
        (linear_sum_assignment, 5.0, ValueError, r"cost must be a 2-D .*\(\)"),
        (
            linear_sum_assignment,
            np.array([[1.0, np.nan]]),
            ValueError,
            r"cost must not contain NaN, got NaN at index \(0, 1\)",
        ),
        (
            linear_sum_assignment,
            np.array([[1.0, -np.inf]]),
            ValueError,
            r"cost contains -inf at index \(0, 1\)",
        ),
        (
            linear_sum_assignment,
            np.array([["a", "b"]]),
            TypeError,
            r"cost must have a real numeric dtype",
        ),
        (
            linear_sum_assignment,
            np.array([[1 + 1j]]),
            TypeError,
            r"cost must have a real numeric dtype.*complex",
        ),
        (
            linear_sum_assignment,
            np.array([[object()]]),
            TypeError,
            r"cost must have a real numeric dtype.*object",
        ),
        (linear_sum_assignment, None, TypeError, r"cost must be an array.*None"),
        (
            linear_sum_assignment,
            [[1, 2], [3]],
            ValueError,
            r"cost must be a regular \(rectangular\) array",
        ),
        (
            linear_sum_assignment_batched,
            np.zeros((3, 3)),
            ValueError,
            r"costs must be a 3-D .*\(3, 3\)",
        ),
        (
            linear_sum_assignment_batched,
            np.zeros(3),
            ValueError,
            r"costs must be a 3-D .*\(3,\)",
        ),
        (
            linear_sum_assignment_batched,
            np.zeros((1, 2, 3, 4)),
            ValueError,
            r"costs must be a 3-D .*\(1, 2, 3, 4\)",
        ),
        (
            linear_sum_assignment_batched,
            np.array([[[0.0, np.nan]]]),
            ValueError,
            r"costs must not contain NaN, got NaN at index \(0, 0, 1\)",
        ),
        (
            linear_sum_assignment_batched,
            np.array([[[0.0, 1.0], [-np.inf, 2.0]]]),
            ValueError,
            r"costs contains -inf at index \(0, 1, 0\)",
        ),
        (
            linear_sum_assignment_batched,
            np.array([[[0.0, 1.0]], [[np.nan, np.inf]]]),
            ValueError,
            r"costs must not contain NaN, got NaN at index \(1, 0, 0\)",
        ),
        (
            linear_sum_assignment_batched,
            np.array([[["x"]]]),
            TypeError,
            r"costs must have a real numeric dtype",
        ),
        (
            linear_sum_assignment_batched,
            None,
            TypeError,
            r"costs must be an array.*None",
        ),
    ],
)
def test_bad_inputs(fn, arg, exc, match):
    with pytest.raises(exc, match=match):
        fn(arg)


@pytest.mark.parametrize("fn", [linear_sum_assignment, linear_sum_assignment_batched])
@pytest.mark.parametrize(
    ("arg", "exc", "match"),
    [
        (
            np.ma.masked_array([[1, 100], [100, 1]], mask=[[1, 0], [0, 1]]),
            TypeError,
            r"must be a plain array, got a masked array",
        ),
        (
            np.array([["1e400", "1"], ["1", "2"]]).astype(np.longdouble),
            ValueError,
            r"within float64's range .*1e\+?400.* at index \(0, 0",
        ),
        ([[2**70, 1], [1, 2]], TypeError, r"got object \(the list given holds Python"),
    ],
)
def test_bad_values(fn, arg, exc, match):
    """Masked entries are not dropped, wider floats are not cut to inf, and integers
    beyond int64 are named for what they are."""
    if fn is linear_sum_assignment_batched:  # a stack of one
        arg = [arg] if isinstance(arg, list) else arg[None]
    with pytest.raises(exc, match=match):
        fn(arg)


@pytest.mark.parametrize("fn", [linear_sum_assignment, linear_sum_assignment_batched])
def test_sparse_cost_is_refused(fn):
    with pytest.raises(TypeError, match=r"must be a dense array, got the sparse csr"):
        fn(scipy.sparse.csr_array(np.eye(2)))


@pytest.mark.parametrize("fn", [linear_sum_assignment, linear_sum_assignment_batched])
@pytest.mark.parametrize(
    ("kw", "value"),
    [("maximize", "False"), ("maximize", np.array([True, False])),
     ("maximize", None), ("return_stats", "no"), ("return_stats", 2)],
)
def test_flags_are_checked(fn, kw, value):
    cost = np.eye(2) if fn is linear_sum_assignment else np.eye(2)[None]
    with pytest.raises(TypeError, match=rf"{kw} must be True or False"):
        fn(cost, **{kw: value})


def test_longdouble_within_float64_is_solved(rng):
    cost = rng.uniform(-5, 5, (6, 6)).astype(np.longdouble)
    row, col = linear_sum_assignment(cost, backend="cpu")
    want_r, want_c = scipy_lsa(cost.astype(np.float64))
    assert float(cost[row, col].sum()) == pytest.approx(
        float(cost[want_r, want_c].sum()), rel=1e-12
    )


@pytest.mark.parametrize("maximize", [False, True])
def test_costs_near_float64_limit_are_exact(rng, maximize):
    """Costs near 1.8e308 would overflow the duals; the solver scales such problems
    by a power of two, so the optimum is that of the exactly scaled problem."""
    c = np.array([[0.0, 0.0, -1e308], [-1e308, -1.7976e308, -1.7976e308],
                  [1.0, 0.0, -1.7976e308]])
    row, col = linear_sum_assignment(c, backend="cpu")
    assert col.tolist() == [0, 1, 2]
    for _ in range(10):
        n, m = (int(v) for v in rng.integers(2, 12, 2))
        big = rng.uniform(-1.0, 1.0, (n, m)) * 1.79e308
        r, cidx = linear_sum_assignment(big, maximize, backend="cpu")
        small = big * 2.0**-200  # exact: the same optimum without the overflow
        wr, wc = scipy_lsa(small, maximize)
        assert small[r, cidx].sum() == pytest.approx(small[wr, wc].sum(), rel=1e-12)
        rb, cb = linear_sum_assignment_batched(np.stack([big, small]), maximize,
                                               backend="cpu")
        assert (rb[0] == r).all() and (cb[0] == cidx).all()
        best = small[wr, wc].sum()
        assert small[rb[1], cb[1]].sum() == pytest.approx(best, rel=1e-12)


@pytest.mark.parametrize("fn", [linear_sum_assignment, linear_sum_assignment_batched])
def test_bad_inputs_maximize_sign(fn):
    cost = np.array([[1.0, np.inf], [2.0, 3.0]])
    arg = cost if fn is linear_sum_assignment else cost[None]
    with pytest.raises(ValueError, match=r"contains inf at index .*-inf with maximiz"):
        fn(arg, maximize=True)


@pytest.mark.parametrize("fn", [linear_sum_assignment, linear_sum_assignment_batched])
def test_bad_backend(fn):
    arg = np.zeros((2, 2)) if fn is linear_sum_assignment else np.zeros((1, 2, 2))
    with pytest.raises(ValueError, match="backend must be one of"):
        fn(arg, backend="tpu")


# ------------------------------------------------------------------------ backends


@pytest.mark.parametrize("fn", [linear_sum_assignment, linear_sum_assignment_batched])
def test_gpu_request_never_falls_back(fn):
    arg = np.zeros((2, 2)) if fn is linear_sum_assignment else np.zeros((1, 2, 2))
    if gpu_available():
        r, c = fn(arg, backend="gpu")  # runs, on the GPU
        assert r.shape[-1] == c.shape[-1] == 2
    else:
        with pytest.raises(BackendUnavailableError, match="backend='gpu'"):
            fn(arg, backend="gpu")


def test_environment_override(monkeypatch, rng):
    cost = rng.random((5, 5))
    monkeypatch.setenv("VISION_CUTS_BACKEND", "cpu")
    check_assignment(cost, *linear_sum_assignment(cost))
    monkeypatch.setenv("VISION_CUTS_BACKEND", "gpu")  # explicit: no silent fallback
    if gpu_available():
        r, c = linear_sum_assignment(cost)
        assert sorted(c.tolist()) == list(range(5))
    else:
        with pytest.raises(BackendUnavailableError):
            linear_sum_assignment(cost)
    monkeypatch.setenv("VISION_CUTS_BACKEND", "auto")
    check_assignment(cost, *linear_sum_assignment(cost))


def test_backend_agreement(backend, rng):
    costs = make_cost(rng, "ties", (30, 12, 10))
    ref_r, ref_c = linear_sum_assignment_batched(costs, backend="cpu")
    if backend == "gpu":
        import cupy

        r, c = linear_sum_assignment_batched(cupy.asarray(costs), backend=backend)
        r, c = r.get(), c.get()
        single = [
            linear_sum_assignment(cupy.asarray(x), backend=backend) for x in costs
        ]
        single = [(a.get(), b.get()) for a, b in single]
    else:
        r, c = linear_sum_assignment_batched(costs, backend=backend)
        single = [linear_sum_assignment(x, backend=backend) for x in costs]
    for b in range(len(costs)):
        want = costs[b][ref_r[b], ref_c[b]].sum()
        assert costs[b][r[b], c[b]].sum() == want
        assert costs[b][single[b]].sum() == want


@pytest.mark.gpu
def test_cupy_in_cupy_out_on_cpu(rng):
    cupy = pytest.importorskip("cupy")
    costs = make_cost(rng, "uniform", (8, 6, 7))
    for backend in ("cpu", "auto"):
        r, c = linear_sum_assignment(cupy.asarray(costs[0]), backend=backend)
        assert isinstance(r, cupy.ndarray) and isinstance(c, cupy.ndarray)
        check_assignment(costs[0], r.get(), c.get())
        rb, cb = linear_sum_assignment_batched(cupy.asarray(costs), backend=backend)
        assert isinstance(rb, cupy.ndarray) and isinstance(cb, cupy.ndarray)
        for b in range(len(costs)):
            check_assignment(costs[b], rb[b].get(), cb[b].get())


def test_return_stats_cpu():
    cost = np.array([[4, 1, 3], [2, 0, 5], [3, 2, 2]])
    r, c, stats = linear_sum_assignment(cost, backend="cpu", return_stats=True)
    assert c.tolist() == [1, 0, 2]
    assert stats == {"backend": "cpu", "path": "cpu"}
    r, c, stats = linear_sum_assignment_batched(
        cost[None], backend="cpu", return_stats=True
    )
    assert c.tolist() == [[1, 0, 2]]
    assert stats["path"] == "cpu"


@pytest.mark.parametrize("shape", [(1, 120, 120), (2, 80, 150), (1, 150, 80)])
def test_cost_families_against_scipy(rng, shape):
    """Every cost family of the stress test (built from the front ends' own code)
    is solved by the CPU backend to SciPy's optimum."""
    from vision_cuts.datasets.synthetic import ASSIGNMENT_FAMILIES, assignment_costs

    for kind in ASSIGNMENT_FAMILIES:
        costs = assignment_costs(kind, shape, rng)
        assert costs.ndim == 3 and 0 < costs.shape[1] <= shape[1], kind
        r, c = linear_sum_assignment_batched(costs, backend="cpu")
        for b in range(len(costs)):
            r0, c0 = scipy_lsa(costs[b])
            want = costs[b][r0, c0].sum()
            assert costs[b][r[b], c[b]].sum() == pytest.approx(want, rel=1e-12), kind


@pytest.mark.parametrize("maximize", [False, True])
def test_huge_costs_scaled_per_problem(maximize):
    """Each problem of a stack takes its own power of two: tiny costs beside costs
    of 1e290 survive the small factor that problem needs, whatever factor a problem
    near float64's limit beside it takes."""
    near = np.array([[1.7e308, 0.0], [0.0, 1.6e308]])
    tiny = np.array([[1e290, 1e-300], [1.00001e-300, 1e290]])
    rows, cols = linear_sum_assignment_batched(np.stack([near, tiny, np.eye(2)]),
                                               maximize, backend="cpu")
    for c, r, k, exact in ((near, rows[0], cols[0], 2.0**-64),
                           (tiny, rows[1], cols[1], 2.0**-8)):
        scaled = c * exact  # exact: the same optimum, sums that do not overflow
        want_r, want_c = scipy_lsa(scaled, maximize)
        assert scaled[r, k].sum() == scaled[want_r, want_c].sum()
    assert cols[1].tolist() == ([0, 1] if maximize else [1, 0])


def test_huge_costs_that_scaling_cannot_keep():
    cost = np.array([[1e-300, 1.00001e-300], [1.79e308, 1.0]])
    with pytest.raises(ValueError, match=r"cost mixes costs beyond 2\*\*960 with "
                       r"1e-300 at index \(0, 0\)"):
        linear_sum_assignment(cost, backend="cpu")
    with pytest.raises(ValueError, match=r"costs mixes .* at index \(1, 0, 0\)"):
        linear_sum_assignment_batched(np.stack([np.eye(2), cost]), backend="cpu")


def test_longdouble_below_float64_is_refused():
    cost = np.array([["1e-400", "3e-400"], ["3e-400", "1e-400"]]).astype(np.longdouble)
    with pytest.raises(ValueError, match=r"within float64's range .*1e-400"):
        linear_sum_assignment(cost, backend="cpu")


def test_zero_dimensional_bool_flag():
    r, c = linear_sum_assignment(np.eye(2), maximize=np.array(True), backend="cpu")
    assert c.tolist() == [0, 1]


# ------------------------------------------------- solver paths (CPU dispatch)


def _forbid_parallel(monkeypatch):
    """Make the threaded stack solver fail, so a test proves it was not used."""
    from vision_cuts import _assignment_cpu

    def fail(*args):
        raise AssertionError("the parallel stack solver ran")

    monkeypatch.setattr(_assignment_cpu, "_solve_stack", fail)


@pytest.mark.parametrize("shape", [(2, 2), (5, 5), (250, 250), (30, 70), (70, 30)])
def test_single_problem_runs_on_the_calling_thread(rng, monkeypatch, shape):
    # one problem never opens the parallel region (a wait at its barrier cost up
    # to a scheduler slice per call on a loaded machine)
    _forbid_parallel(monkeypatch)
    for cost in (rng.random(shape), rng.integers(0, 100, shape)):
        for maximize in (False, True):
            r, c = linear_sum_assignment(cost, maximize)
            check_assignment(cost, r, c, maximize)
    costs = rng.random((1, *shape))
    r, c = linear_sum_assignment_batched(costs)
    check_assignment(costs[0], r[0], c[0])


def test_small_stack_serial_large_stack_parallel(rng, monkeypatch):
    from vision_cuts import _assignment_cpu

    costs = rng.integers(0, 100, (4, 8, 8))
    _forbid_parallel(monkeypatch)
    r, c = linear_sum_assignment_batched(costs)
    for b in range(4):
        check_assignment(costs[b], r[b], c[b])
    monkeypatch.undo()
    calls = []
    parallel = _assignment_cpu._solve_stack

    def spy(*args):
        calls.append(args[3])
        return parallel(*args)

    monkeypatch.setattr(_assignment_cpu, "_solve_stack", spy)
    costs = rng.integers(0, 100, (64, 16, 16))  # 16384 entries: over the threshold
    r, c = linear_sum_assignment_batched(costs)
    assert len(calls) == 1
    for b in range(64):
        check_assignment(costs[b], r[b], c[b])


def test_padding_rule():
    from vision_cuts._assignment_cpu import _use_jv

    assert _use_jv(2000, 2200)  # at most 10% wider: padded at any size
    assert _use_jv(100, 128) and _use_jv(30, 60)  # few padding cells
    assert not _use_jv(200, 390)  # 74,100 padding cells: the port
    assert not _use_jv(2000, 3800) and not _use_jv(8, 64)


@pytest.mark.parametrize("shape", [(200, 390), (390, 200), (200, 215), (100, 128)])
@pytest.mark.parametrize("kind", ["uniform", "ties", "normal", "geometric"])
def test_rectangular_on_both_sides_of_the_padding_rule(rng, shape, kind):
    cost = make_cost(rng, kind, shape)
    r, c = linear_sum_assignment(cost)
    check_assignment(cost, r, c)
    costs = make_cost(rng, kind, (3, *shape))
    rb, cb = linear_sum_assignment_batched(costs)
    for b in range(3):
        check_assignment(costs[b], rb[b], cb[b])


def _monge_costs(rng, n, m):
    """Machol-Wien (c_ij = (i + 1)(j + 1), integers) and rank-one costs: after the
    row reduction almost every row is still free and each search step settles a
    single column."""
    machol = np.outer(np.arange(1, n + 1), np.arange(1, m + 1))
    rank_one = np.outer(rng.random(n) * 100, rng.random(m) * 100)
    return machol, rank_one


@pytest.mark.parametrize("shape", [(60, 60), (40, 44), (40, 70), (70, 40), (7, 7)])
@pytest.mark.parametrize("maximize", [False, True])
def test_machol_wien_and_rank_one(rng, shape, maximize):
    machol, rank_one = _monge_costs(rng, *shape)
    for cost in (machol, machol.astype(np.float64), rank_one):
        r, c = linear_sum_assignment(cost, maximize)
        check_assignment(cost, r, c, maximize)
        rb, cb = linear_sum_assignment_batched(np.stack([cost, cost[::-1]]), maximize)
        check_assignment(cost, rb[0], cb[0], maximize)
        check_assignment(cost[::-1].copy(), rb[1], cb[1], maximize)


def test_cpu_solver_refuses_sides_beyond_uint32():
    """The CPU searches keep their column lists in uint32: a side of 2**32 or more
    is refused, naming the array, before anything is copied (a zero-stride view of
    2**32 columns holds one float)."""
    from numpy.lib.stride_tricks import as_strided

    from vision_cuts._assignment_cpu import (
        linear_sum_assignment_batched_cpu,
        linear_sum_assignment_cpu,
    )

    wide = as_strided(np.zeros(1), shape=(1, 2**32), strides=(0, 0))
    with pytest.raises(ValueError, match=r"cost must have at most 4294967295 rows"):
        linear_sum_assignment_cpu(wide, False)
    tall = as_strided(np.zeros(1), shape=(2, 2**32, 1), strides=(0, 0, 0))
    with pytest.raises(ValueError, match=r"costs must have at most 4294967295 rows"):
        linear_sum_assignment_batched_cpu(tall, False)
