"""Differential stress test of the GPU assignment on the cost families callers make.

Every family of :func:`vision_cuts.datasets.synthetic.assignment_costs` (the optical
flow's stacks with forbidden pairs and a dummy column per row, geometric point sets,
low-range integers with many ties, forbidden entries), square and rectangular both
ways, solved by ``linear_sum_assignment`` and ``linear_sum_assignment_batched`` on the
GPU against the CPU backend (exact): equal totals for integer costs, within the
documented quantisation bound for float costs. The work counters of the large-problem
path are bounded too, so that a livelock or a runaway phase count fails here even when
the answer is right.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import check_rows_count

from vision_cuts import linear_sum_assignment, linear_sum_assignment_batched
from vision_cuts.datasets.synthetic import ASSIGNMENT_FAMILIES, assignment_costs

pytestmark = pytest.mark.gpu

# bids a real row may make in one phase, on average, before the run counts as runaway
# (measured: at most a few per row and phase on these families; the stall that the
# padding rows caused made about 1500)
BIDS_PER_ROW_PHASE = 40
UPDATES_PER_PHASE = 200  # global price updates in one phase


def _total(cost, r, c):
    return float(cost[r, c].sum())


def _tolerance(cost):
    from vision_cuts._assignment_gpu import float_tolerance

    return float_tolerance(cost)


def _check_work(stats, n, m, batch=1):
    from vision_cuts import _assignment_gpu as g

    assert stats["backend"] == "gpu"
    if stats["path"] == "small":  # square problems only: no padding rows
        assert n == m, stats
        assert 1 <= stats["phases"] <= 64, stats
        assert stats["bids"] <= BIDS_PER_ROW_PHASE * batch * n * stats["phases"], stats
        return
    assert stats["path"] == "rows", stats
    rows = batch * min(n, m)
    phases = stats["phases"]
    assert 1 <= phases <= g._ROW_MAX_PHASES
    assert len(stats["per_phase"]) == phases
    assert stats["bids"] <= BIDS_PER_ROW_PHASE * rows * phases + 1000, stats
    for p in stats["per_phase"]:
        assert p["global_updates"] <= UPDATES_PER_PHASE, stats
        assert p["bids"] <= BIDS_PER_ROW_PHASE * rows + 1000, stats
    # a settle frees rows at most a few times a phase
    assert stats["settles"] <= 8 * phases, stats
    check_rows_count(stats)


@pytest.mark.parametrize("kind", ASSIGNMENT_FAMILIES)
@pytest.mark.parametrize("shape", [(1, 1000, 1000), (1, 700, 1100), (1, 1100, 700)])
def test_single_against_cpu(rng, kind, shape):
    cupy = pytest.importorskip("cupy")
    cost = assignment_costs(kind, shape, rng)[0]
    r0, c0 = linear_sum_assignment(cost, backend="cpu")
    want = _total(cost, r0, c0)
    for on_device in (False, True):
        arg = cupy.asarray(cost) if on_device else cost
        r, c, stats = linear_sum_assignment(arg, backend="gpu", return_stats=True)
        if on_device:
            assert isinstance(r, cupy.ndarray)
            r, c = r.get(), c.get()
        assert len(np.unique(c)) == len(c) == min(cost.shape)
        got = _total(cost, r, c)
        assert np.isfinite(got)
        assert got <= want + _tolerance(cost) + 1e-9 * abs(want), (kind, got, want)
        if cost.dtype.kind in "iu" or np.all(cost[np.isfinite(cost)] % 1 == 0):
            assert got == want
        _check_work(stats, *cost.shape)


@pytest.mark.parametrize("kind", ["geometric", "ties", "forbidden", "lowint"])
@pytest.mark.parametrize("shape", [(6, 300, 400), (4, 500, 300), (3, 600, 600)])
def test_batched_against_cpu(rng, kind, shape):
    pytest.importorskip("cupy")
    costs = assignment_costs(kind, shape, rng)
    r0, c0 = linear_sum_assignment_batched(costs, backend="cpu")
    r, c, stats = linear_sum_assignment_batched(costs, backend="gpu", return_stats=True)
    assert r.shape == r0.shape
    for b in range(shape[0]):
        want, got = _total(costs[b], r0[b], c0[b]), _total(costs[b], r[b], c[b])
        assert got <= want + _tolerance(costs[b]) + 1e-9 * abs(want)
        if kind != "geometric":
            assert got == want
    _check_work(stats, *shape[1:], batch=shape[0])


@pytest.mark.parametrize(
    "shape, density",
    [
        ((64, 32, 32), 1.0),
        ((64, 100, 100), 0.25),
        ((64, 47, 64), 1.0),
        ((64, 200, 56), 1.0),
        ((64, 47, 64), 0.05),
        ((32, 128, 128), 0.05),
    ],
)
def test_small_stacks_against_cpu(rng, shape, density):
    """Stacks of small problems, square and rectangular, dense and sparse (a dummy
    column per row where sparse and rectangular, as the flow's): the totals of the
    CPU backend, and bounded work on whichever path solves them (the small kernels
    take square problems only: padded rectangular ones bid for seconds there)."""
    from vision_cuts import _assignment_gpu as g

    B, n, m = shape
    cost = rng.random(shape)
    if density < 1:
        cost[rng.random(shape) > density] = np.inf
        if n != m or density < 0.2:
            dummy = np.full((B, n, n), np.inf)
            dummy[:, np.arange(n), np.arange(n)] = 0.35
            cost = np.concatenate([cost, dummy], axis=2)
    r0, c0 = linear_sum_assignment_batched(cost, backend="cpu")
    r, c, stats = linear_sum_assignment_batched(cost, backend="gpu", return_stats=True)
    for b in range(B):
        want = _total(cost[b], r0[b], c0[b])
        got = _total(cost[b], r[b], c[b])
        assert got <= want + _tolerance(cost[b]) + 1e-9, b
    small = g.small_problem(min(cost.shape[1:]), max(cost.shape[1:]))
    assert stats["path"] == ("small" if small else "rows")
    _check_work(stats, cost.shape[1], cost.shape[2], batch=B)


def test_flow_stacks_of_the_front_end(rng):
    # the stacks optical_flow builds over image tiles (several problems, dummy
    # columns, mostly forbidden pairs), solved as the front end solves them
    pytest.importorskip("cupy")
    from vision_cuts.optical_flow import (
        _build_stack,
        _candidates,
        _feature_groups,
        _Features,
        _groups,
    )

    n = m = 3000
    p0 = rng.random((n, 2)).astype(np.float32) * [640, 480]
    p1 = (p0 + rng.normal(0, 3, (n, 2))).astype(np.float32)
    b0 = rng.integers(0, 2, (n, 256)).astype(np.uint8)
    b1 = np.where(rng.random((m, 256)) < 0.1, 1 - b0, b0).astype(np.uint8)
    f0 = _Features(p0, np.packbits(b0, axis=1), True)
    f1 = _Features(p1, np.packbits(b1, axis=1), True)
    pred = np.zeros((n, 2), np.float32)
    for radius in (40.0, 6.0):
        rows, cols, cost = _candidates(f0, f1, pred, radius, 0.2)
        groups = _groups(_feature_groups(p0, 128))
        stack = _build_stack(rows, cols, cost, groups, m, 0.35).costs
        r0, c0 = linear_sum_assignment_batched(stack, backend="cpu")
        r, c, stats = linear_sum_assignment_batched(
            stack, backend="gpu", return_stats=True
        )
        for b in range(len(stack)):
            want, got = _total(stack[b], r0[b], c0[b]), _total(stack[b], r[b], c[b])
            assert got <= want + _tolerance(stack[b]) + 1e-9 * abs(want)
        _check_work(stats, *stack.shape[1:], batch=len(stack))
        # a dummy column per row: feasible by the diagonal, no matching run
        assert stats["feasibility"] == "diagonal"


def test_infeasible_problems_of_a_large_stack(rng):
    # forbidden pairs are absent arcs on the large-problem path: a matching finds the
    # infeasible problems first; the others are solved exactly
    pytest.importorskip("cupy")
    from vision_cuts import _assignment_gpu as g

    costs = assignment_costs("forbidden", (3, 300, 400), rng)
    costs[1, :, :5] = np.inf
    costs[1, :, 5:] = np.inf  # problem 1: no pair at all
    r, c, status, run = g.linear_sum_assignment_batched_gpu(costs, False)
    assert status.tolist() == [0, 1, 0]
    assert run["stats"]["infeasible"] == 1
    r, c = r.get(), c.get()
    for b in (0, 2):
        r0, c0 = linear_sum_assignment(costs[b], backend="cpu")
        assert _total(costs[b], r[b], c[b]) == _total(costs[b], r0, c0)
    with pytest.raises(ValueError, match=r"costs\[1\]"):
        linear_sum_assignment_batched(costs, backend="gpu")
