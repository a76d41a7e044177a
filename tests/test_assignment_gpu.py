"""GPU linear assignment (cost scaling) against SciPy's optimum.

Oracles: ``scipy.optimize.linear_sum_assignment`` for the optimal total (exact for
integer costs; within the documented quantisation bound ``float_tolerance`` for other
float costs) and feasibility; the dual prices of the run, which certify the optimum of
the scaled problem on their own (every row's column is within 1 of its best reduced
cost). A race in the lock-free kernels would show as varying answers, so the
differential tests repeat each stack several times.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import check_rows_count
from scipy.optimize import linear_sum_assignment as scipy_lsa

from vision_cuts import linear_sum_assignment, linear_sum_assignment_batched

pytestmark = pytest.mark.gpu

KINDS = ("uniform", "lowint", "ties", "geometric", "forbidden", "normal")
REPEATS = 3


def make_cost(rng, kind, shape, *, maximize=False):
    """Random costs of shape (B, n, m); ``forbidden`` stays feasible."""
    nb, n, m = shape
    if kind == "uniform":
        return rng.random(shape)
    if kind == "lowint":
        return rng.integers(0, 1000, shape)
    if kind == "ties":
        return rng.integers(0, 4, shape).astype(np.float64)
    if kind == "normal":
        return rng.normal(0, 100, shape)
    if kind == "geometric":
        a = rng.random((nb, n, 2)) * 1000
        b = rng.random((nb, m, 2)) * 1000
        return np.sqrt(((a[:, :, None, :] - b[:, None, :, :]) ** 2).sum(-1))
    assert kind == "forbidden"
    cost = rng.integers(0, 50, shape).astype(np.float64)
    forbid = rng.random(shape) < 0.6
    k = min(n, m)
    for i in range(nb):
        forbid[i, rng.permutation(n)[:k], rng.permutation(m)[:k]] = False
    cost[forbid] = -np.inf if maximize else np.inf
    return cost


def scipy_total(cost, maximize):
    try:
        r, c = scipy_lsa(cost, maximize=maximize)
    except ValueError:
        return None
    return cost[r, c].sum()


def check(cost, r, c, maximize, total=None):
    from vision_cuts._assignment_gpu import float_tolerance

    n, m = cost.shape
    k = min(n, m)
    assert r.shape == c.shape == (k,)
    assert r.dtype == c.dtype == np.int64
    assert np.all(np.diff(r) > 0)
    assert len(np.unique(c)) == k
    if n <= m:
        np.testing.assert_array_equal(r, np.arange(k))
    picked = cost[r, c]
    assert np.all(np.isfinite(picked)), "a forbidden pair was assigned"
    if total is None:
        total = scipy_total(cost, maximize)
    got = picked.sum()
    tol = float_tolerance(-cost if maximize else cost)
    if cost.dtype.kind in "biu" or tol == 0:
        assert np.isclose(got, total, rtol=1e-13, atol=1e-9), (got, total)
    else:
        assert abs(got - total) <= tol * (1 + 1e-9) + 1e-9 * abs(total), (got, total)


def assert_certificate(run):
    """The prices of a run certify its optimum on their own: every padded row holds a
    column whose reduced cost is within 1 (eps) of the row's smallest."""
    S = run["S"].get().astype(np.int64)
    if run["transposed_layout"]:
        S = S.transpose(0, 2, 1)
    p, col = run["prices"].get(), run["col4row"].get()
    assert np.all(np.sort(col, axis=1) == np.arange(S.shape[1]))
    d = S + p[:, None, :]
    held = np.take_along_axis(d, col[:, :, None].astype(np.int64), 2)[..., 0]
    assert np.all(held <= d.min(axis=2) + 1)


def solve_twice_and_certify(costs):
    """Solve a stack on the GPU with and without the prices (arc fixing on, then off);
    check both against SciPy and the prices as a certificate. Returns the run."""
    cupy = pytest.importorskip("cupy")
    from vision_cuts import _assignment_gpu as g

    for prices in (False, True):
        r, c, status, *rest = g.linear_sum_assignment_batched_gpu(
            cupy.asarray(costs), False, return_prices=prices
        )
        assert not status.any()
        r, c = r.get(), c.get()
        for b in range(costs.shape[0]):
            check(costs[b], r[b], c[b], False)
    assert_certificate(rest[0])
    return rest[0]


@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "shape",
    [
        (200, 1, 1),
        (200, 2, 3),
        (200, 5, 5),
        (150, 12, 7),
        (150, 7, 12),
        (100, 32, 32),
        (60, 33, 40),
        (60, 40, 33),
        (40, 64, 64),
        (20, 128, 128),
        (8, 200, 256),
    ],
)
def test_batched_matches_scipy(rng, kind, maximize, shape):
    cupy = pytest.importorskip("cupy")
    costs = make_cost(rng, kind, shape, maximize=maximize)
    totals = [scipy_total(c, maximize) for c in costs]
    first = None
    for _ in range(REPEATS):
        r, c = linear_sum_assignment_batched(
            cupy.asarray(costs), maximize, backend="gpu"
        )
        assert isinstance(r, cupy.ndarray) and isinstance(c, cupy.ndarray)
        r, c = r.get(), c.get()
        got = np.array([costs[b][r[b], c[b]].sum() for b in range(shape[0])])
        if first is None:
            first = got
        elif kind in ("lowint", "ties", "forbidden"):
            # exact costs: a race would make repeated runs differ; quantised float
            # costs may pick different optima of the rounded problem (each within
            # the bound checked below), in whichever order the bids land
            np.testing.assert_array_equal(got, first)
        for b in range(shape[0]):
            check(costs[b], r[b], c[b], maximize, totals[b])


@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(300, 300), (257, 400), (400, 257), (600, 600)])
def test_large_single_matches_scipy(rng, kind, maximize, shape):
    # the warp-per-row kernels (max(n, m) > 256)
    costs = make_cost(rng, kind, (1, *shape), maximize=maximize)[0]
    total = scipy_total(costs, maximize)
    for _ in range(REPEATS):
        r, c = linear_sum_assignment(costs, maximize, backend="gpu")
        assert isinstance(r, np.ndarray) and isinstance(c, np.ndarray)
        check(costs, r, c, maximize, total)


def test_large_batched_rows_kernel(rng):
    costs = rng.integers(0, 100, (6, 300, 280))
    r, c = linear_sum_assignment_batched(costs, backend="gpu")
    for b in range(6):
        check(costs[b], r[b], c[b], False)


def test_random_stacks(rng):
    # many stacks of random shapes and kinds: a few thousand problems in all
    cupy = pytest.importorskip("cupy")
    for t in range(150):
        kind = KINDS[t % len(KINDS)]
        maximize = bool(t % 4 == 1)
        n, m = int(rng.integers(1, 40)), int(rng.integers(1, 40))
        nb = int(rng.integers(1, 30))
        costs = make_cost(rng, kind, (nb, n, m), maximize=maximize)
        r, c = linear_sum_assignment_batched(
            cupy.asarray(costs), maximize, backend="gpu"
        )
        r, c = r.get(), c.get()
        for b in range(nb):
            check(costs[b], r[b], c[b], maximize)


@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 300, 1), (3, 1, 300), (2, 600, 3)])
def test_degenerate_shapes(rng, shape):
    costs = rng.integers(0, 1000, shape)
    r, c = linear_sum_assignment_batched(costs, backend="gpu")
    for b in range(shape[0]):
        check(costs[b], r[b], c[b], False)


@pytest.mark.parametrize("shape", [(0, 0), (0, 5), (5, 0)])
def test_empty(shape):
    cupy = pytest.importorskip("cupy")
    r, c = linear_sum_assignment(cupy.zeros(shape), backend="gpu")
    assert isinstance(r, cupy.ndarray) and r.shape == c.shape == (0,)
    rb, cb = linear_sum_assignment_batched(np.zeros((3, *shape)), backend="gpu")
    assert rb.shape == cb.shape == (3, 0) and rb.dtype == np.int64


@pytest.mark.parametrize(
    "dtype",
    [
        np.int8,
        np.int32,
        np.int64,
        np.uint16,
        np.uint64,
        np.float16,
        np.float32,
        np.float64,
        np.bool_,
    ],
)
def test_dtypes(rng, dtype):
    cost = rng.integers(0, 2 if dtype is np.bool_ else 100, (6, 8)).astype(dtype)
    as_float = cost.astype(np.float64)
    for maximize in (False, True):
        r, c = linear_sum_assignment(cost, maximize, backend="gpu")
        check(as_float, r, c, maximize)


def test_int_extremes_exact(rng):
    cost = np.int64(2**40) + rng.integers(-1000, 1000, (16, 9, 9))
    r, c = linear_sum_assignment_batched(cost, backend="gpu")
    for b in range(16):
        rr, cc = scipy_lsa(cost[b] - 2**40)
        assert int(cost[b][r[b], c[b]].sum()) == int(cost[b][rr, cc].sum())


def test_integer_range_too_large():
    cost = np.array([[0, 2**62], [1, 2]], dtype=np.int64)
    with pytest.raises(ValueError, match=r"span .* backend='cpu'"):
        linear_sum_assignment(cost, backend="gpu")


def test_dual_certificate(rng):
    # the prices of the run certify the optimum of the scaled problem on their own
    cupy = pytest.importorskip("cupy")
    from vision_cuts._assignment_gpu import linear_sum_assignment_batched_gpu

    for shape in [(50, 20, 30), (10, 100, 90), (1, 400, 400)]:
        for kind in ("lowint", "geometric", "forbidden"):
            costs = make_cost(rng, kind, shape)
            *_, run = linear_sum_assignment_batched_gpu(
                cupy.asarray(costs), False, return_prices=True
            )
            assert_certificate(run)


def test_infeasible():
    cases = [
        np.array([[np.inf, np.inf], [1.0, 2.0]]),
        np.array([[1.0, np.inf, np.inf], [2.0, np.inf, np.inf]]),
        np.array([[np.inf]]),
        np.full((3, 2), np.inf),
    ]
    for cost in cases:
        with pytest.raises(ValueError, match="cost matrix is infeasible"):
            linear_sum_assignment(cost, backend="gpu")
    costs = np.random.default_rng(0).random((6, 4, 5))
    costs[3, 1, :] = np.inf
    costs[5, :, 2:] = np.inf
    with pytest.raises(ValueError, match=r"infeasible: costs\[3\].*2 of 6.*\[3, 5\]"):
        linear_sum_assignment_batched(costs, backend="gpu")
    big = np.random.default_rng(1).random((300, 300))
    big[:, 7] = np.inf
    big[:2, :] = np.inf
    with pytest.raises(ValueError, match="cost matrix is infeasible"):
        linear_sum_assignment(big, backend="gpu")


def test_bad_values_on_device():
    cupy = pytest.importorskip("cupy")
    with pytest.raises(ValueError, match=r"cost must not contain NaN.*\(0, 1\)"):
        linear_sum_assignment(cupy.asarray([[1.0, np.nan]]), backend="gpu")
    with pytest.raises(ValueError, match=r"cost contains -inf at index \(0, 1\)"):
        linear_sum_assignment(cupy.asarray([[1.0, -np.inf]]), backend="gpu")
    with pytest.raises(ValueError, match=r"costs contains inf at index \(0, 0, 1\)"):
        linear_sum_assignment_batched(
            cupy.asarray([[[1.0, np.inf]]]), maximize=True, backend="gpu"
        )
    with pytest.raises(ValueError, match=r"costs must be a 3-D"):
        linear_sum_assignment_batched(cupy.zeros((2, 2)), backend="gpu")


def test_auto_uses_gpu_for_cupy(rng, monkeypatch):
    cupy = pytest.importorskip("cupy")
    from vision_cuts import _assignment_cpu

    def fail(*args, **kwargs):
        raise AssertionError("the CPU solver ran")

    monkeypatch.delenv("VISION_CUTS_BACKEND", raising=False)
    monkeypatch.setattr(_assignment_cpu, "linear_sum_assignment_batched_cpu", fail)
    cost = rng.integers(0, 100, (7, 9))
    r, c = linear_sum_assignment(cupy.asarray(cost))
    assert isinstance(r, cupy.ndarray)
    check(cost, r.get(), c.get(), False)


def test_agrees_with_cpu(rng):
    costs = make_cost(rng, "ties", (40, 24, 20))
    rg, cg = linear_sum_assignment_batched(costs, backend="gpu")
    rc, cc = linear_sum_assignment_batched(costs, backend="cpu")
    for b in range(40):
        assert costs[b][rg[b], cg[b]].sum() == costs[b][rc[b], cc[b]].sum()


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize(
    "shape", [(40, 12, 7), (30, 32, 32), (10, 40, 33), (4, 90, 120)]
)
def test_small_kernels_float_forbidden(rng, monkeypatch, fused, shape):
    # quantised float costs with forbidden pairs (sa_solve: scaled costs near or
    # above 2**27, so 64-bit reductions soon or from the start), and the earlier
    # small kernels (SMALL_FUSED = False) on the same kind of stacks
    cupy = pytest.importorskip("cupy")
    from vision_cuts import _assignment_gpu as g

    monkeypatch.setattr(g, "SMALL_FUSED", fused)
    nb, n, m = shape
    k = min(n, m)
    for maximize in (False, True):
        costs = rng.random(shape) * 100
        forbid = rng.random(shape) < 0.4
        for i in range(nb):
            forbid[i, rng.permutation(n)[:k], rng.permutation(m)[:k]] = False
        costs[forbid] = -np.inf if maximize else np.inf
        r, c = linear_sum_assignment_batched(
            cupy.asarray(costs), maximize, backend="gpu"
        )
        r, c = r.get(), c.get()
        for b in range(nb):
            check(costs[b], r[b], c[b], maximize)


@pytest.mark.parametrize(
    ("update", "fixing", "cand", "gu_bids"),
    [
        (False, False, 256, 4),
        (True, False, 256, 4),
        (False, True, 256, 4),
        (True, True, 256, 4),
        (True, True, 4, 1),  # short arc lists: overflowing rows, single-arc rows
        (True, True, 32, 0),  # a global update after every GU_MIN_BIDS bids
    ],
)
def test_global_update_and_arc_fixing(rng, monkeypatch, update, fixing, cand, gu_bids):
    # the row kernels with global price updates and arc fixing on or off: the same
    # optimal totals; a run that returns its prices (without arc fixing, which
    # keeps them eps-optimal on the kept arcs only) certifies its optimum
    pytest.importorskip("cupy")
    from vision_cuts import _assignment_gpu as g

    monkeypatch.setattr(g, "GLOBAL_UPDATE", update)
    monkeypatch.setattr(g, "ARC_FIXING", fixing)
    monkeypatch.setattr(g, "_ROW_CAND", cand)
    monkeypatch.setattr(g, "GU_BIDS", gu_bids)
    updates = 0
    for kind, shape in [
        ("lowint", (1, 1000, 1000)),
        ("geometric", (1, 700, 700)),
        ("ties", (1, 500, 500)),
        ("forbidden", (1, 400, 300)),
        ("lowint", (3, 300, 300)),
    ]:
        run = solve_twice_and_certify(make_cost(rng, kind, shape))
        check_rows_count(run["stats"])
        updates += run["stats"]["global_updates"]
        if not update:
            assert run["stats"]["global_updates"] == 0
    if update:
        assert updates > 0


@pytest.mark.parametrize(
    ("alpha", "quiet", "batch", "cand"),
    [(64, 16, 8, 256), (2, 1, 1, 256), (10, 16, 8, 8), (100, 1, 8, 64)],
)
def test_rows_candidate_lists(rng, monkeypatch, alpha, quiet, batch, cand):
    # the large-problem path scans candidate lists of at most _ROW_CAND arcs with a
    # lower bound of the arcs left out, rebuilt when they run dry; any alpha and
    # polling setting gives the optimum, and the prices of a run (without arc
    # fixing) certify it over every arc
    pytest.importorskip("cupy")
    from vision_cuts import _assignment_gpu as g

    monkeypatch.setattr(g, "ROW_ALPHA", alpha)
    monkeypatch.setattr(g, "_ROW_QUIET", quiet)
    monkeypatch.setattr(g, "_ROW_BID_BATCH", batch)
    monkeypatch.setattr(g, "_ROW_CAND", cand)
    for kind, shape in [
        ("lowint", (1, 800, 800)),
        ("geometric", (1, 600, 500)),
        ("ties", (2, 400, 400)),
        ("forbidden", (1, 300, 450)),
    ]:
        run = solve_twice_and_certify(make_cost(rng, kind, shape))
        stats = run["stats"]
        check_rows_count(stats)
        assert stats["phases"] == len(g.schedule(run["plan"].smax, alpha))
        assert stats["list_builds"] >= stats["phases"]  # every row, every phase
        assert stats["bids"] > 0


@pytest.mark.parametrize("neg", [False, True])
@pytest.mark.parametrize("shape", [(3, 40, 300), (2, 300, 300), (1, 5, 600)])
def test_scaled_kernel_is_the_expression(rng, neg, shape):
    """scale_costs_f64 (one kernel for the large-problem path's float stacks) gives
    the integer costs of scaled()'s CuPy expression, bit for bit."""
    import cupy

    from vision_cuts import _assignment_gpu as g

    x = rng.normal(0, 3, shape)
    x[rng.random(shape) < 0.3] = np.inf if not neg else -np.inf
    x[:, 0, 0] = 7.0  # a finite value in every problem
    fin = np.isfinite(x)
    lo, hi = float(x[fin].min()), float(x[fin].max())
    if neg:
        lo, hi = -hi, -lo
    n, N = shape[1:]
    plan = g.make_plan(n, N, lo, hi, True, False)
    assert plan.big is None and plan.levels is not None
    dev = cupy.asarray(x)
    fast = {"x": dev, "plan": plan, "fin": None, "neg": neg}
    # the same stack in Fortran order takes the expression
    slow = {
        "x": cupy.asfortranarray(dev),
        "plan": plan,
        "fin": cupy.isfinite(dev),
        "neg": neg,
    }
    a = g.scaled(cupy, fast, transposed_layout=False)
    b = g.scaled(cupy, slow, transposed_layout=False)
    assert a.dtype == b.dtype and a.shape == (shape[0], N, N)
    np.testing.assert_array_equal(cupy.asnumpy(a), cupy.asnumpy(b))


def test_runaway_bids_raise(rng, monkeypatch):
    # a cap on the bids of the large-problem path: past it the kernel stops and the
    # call raises, naming the runaway, instead of bidding for ever
    cupy = pytest.importorskip("cupy")
    from vision_cuts import _assignment_gpu as g

    monkeypatch.setattr(g, "RUNAWAY_BIDS_PER_ROW", 0)
    monkeypatch.setattr(g, "RUNAWAY_BIDS_MIN", 100)
    costs = make_cost(rng, "lowint", (1, 600, 600))
    with pytest.raises(RuntimeError, match="runaway"):
        linear_sum_assignment_batched(cupy.asarray(costs), backend="gpu")
    monkeypatch.undo()
    r, c = linear_sum_assignment_batched(cupy.asarray(costs), backend="gpu")
    check(costs[0], r.get()[0], c.get()[0], False)


@pytest.mark.parametrize("maximize", [False, True])
def test_over_budget_stacks_are_solved_on_the_cpu(rng, monkeypatch, maximize):
    """A stack whose large-problem path runs past its time budget (here none) is
    solved again on the CPU: SciPy's optimum (exact, float costs too), the arrays in
    the caller's kind, ``path`` "cpu" with the GPU's counters until then."""
    cupy = pytest.importorskip("cupy")
    from vision_cuts import _assignment_gpu as g

    monkeypatch.setattr(g, "BUDGET_S", 0.0)
    monkeypatch.setattr(g, "BUDGET_NS_PER_ENTRY", 0.0)
    cases = [("lowint", (1, 600, 600)), ("uniform", (2, 300, 700))]
    cases += [("forbidden", (3, 400, 300)), ("geometric", (1, 500, 520))]
    for kind, shape in cases:
        costs = make_cost(rng, kind, shape, maximize=maximize)
        r, c, st = linear_sum_assignment_batched(
            cupy.asarray(costs), maximize, backend="gpu", return_stats=True
        )
        assert isinstance(r, cupy.ndarray) and isinstance(c, cupy.ndarray)
        assert st["path"] == "cpu" and st["backend"] == "gpu", st
        assert st["handover"]["cpu_s"] >= 0 and st["gpu"]["path"] == "rows"
        for b in range(shape[0]):
            want = scipy_total(costs[b], maximize)
            got = costs[b][r.get()[b], c.get()[b]].sum()
            assert got == pytest.approx(want, rel=1e-12, abs=1e-9), (kind, b)
        r1, c1 = linear_sum_assignment(cupy.asarray(costs[0]), maximize, backend="gpu")
        got = costs[0][r1.get(), c1.get()].sum()
        assert got == pytest.approx(scipy_total(costs[0], maximize), rel=1e-12)


def test_machol_wien_costs_hand_over():
    """Machol-Wien costs ``(i + 1) * (j + 1)``, 500 x 950: the auction's price wars
    took 2.9 s and 1.1 M bids on an H200 (SciPy: 0.24 s); the default budget
    (0.034 s here) stops the bids far earlier and the CPU gives SciPy's optimum.
    The cost families of real callers stay on the GPU (the stress tests)."""
    cupy = pytest.importorskip("cupy")
    from vision_cuts.datasets.synthetic import assignment_costs

    costs = assignment_costs("machol_wien", (1, 500, 950), np.random.default_rng(0))
    r, c, st = linear_sum_assignment(
        cupy.asarray(costs[0]), backend="gpu", return_stats=True
    )
    assert st["path"] == "cpu", st
    assert st["gpu"]["bids"] < 500_000
    assert costs[0][r.get(), c.get()].sum() == scipy_total(costs[0], False)
