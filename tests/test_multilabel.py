"""minimize_labels: alpha-expansion and swap against brute force, PyMaxflow's fastmin
and their own move definitions; the model checks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vision_cuts import label_energy, minimize_labels
from vision_cuts.multilabel import pairwise_matrix


def direct(unary, labels, v, weights, steps):
    """E(l) summed pair by pair (``steps``: the forward neighbour steps)."""
    grid = unary.shape[:-1]
    total = sum(int(unary[idx + (labels[idx],)]) for idx in np.ndindex(grid))
    for d, step in enumerate(steps):
        for idx in np.ndindex(grid):
            q = tuple(i + s for i, s in zip(idx, step, strict=True))
            if all(0 <= c < n for c, n in zip(q, grid, strict=True)):
                total += int(weights[(d, *idx)]) * int(v[labels[idx], labels[q]])
    return total


STEPS = {
    (2, 4): [(0, 1), (1, 0)],
    (2, 8): [(0, 1), (1, 0), (1, 1), (1, -1)],
    (3, 26): [
        (0, 0, 1), (0, 1, 0), (1, 0, 0), (0, 1, 1), (0, 1, -1), (1, 0, 1), (1, 0, -1),
        (1, 1, 0), (1, -1, 0), (1, 1, 1), (1, 1, -1), (1, -1, 1), (1, -1, -1),
    ],
}  # fmt: skip


def all_labellings(grid, nlabels):
    for flat in itertools.product(range(nlabels), repeat=int(np.prod(grid))):
        yield np.array(flat).reshape(grid)


def best_move(unary, lab, v, w, steps, zero, one):
    """The cheapest labelling that takes zero[p] or one[p] at every node."""
    grid = lab.shape
    best = None
    for bits in itertools.product((0, 1), repeat=lab.size):
        x = np.array(bits).reshape(grid).astype(bool)
        e = direct(unary, np.where(x, one, zero), v, w, steps)
        best = e if best is None else min(best, e)
    return best


METRICS = [
    "potts",
    ("truncated_linear", 2),
    np.array([[0, 3, 4], [3, 0, 2], [4, 2, 0]]),
]


@pytest.mark.parametrize("model", METRICS, ids=["potts", "tlinear", "matrix"])
@pytest.mark.parametrize("conn", [4, 8])
def test_expansion_and_swap_on_tiny_grids(rng, model, conn):
    grid, nl = (2, 3), 3
    steps = STEPS[(2, conn)]
    v = pairwise_matrix(model, nl)
    for _ in range(3):
        unary = rng.integers(0, 15, (*grid, nl))  # >= 0: the bound needs it
        w = rng.integers(0, 6, (len(steps), *grid))
        optimum = min(
            direct(unary, lab, v, w, steps) for lab in all_labellings(grid, nl)
        )
        nonzero = v[v > 0]
        bound = 2 * nonzero.max() / nonzero.min()
        for method in ("expansion", "swap"):
            res = minimize_labels(
                unary, model, weights=w, method=method, connectivity=conn,
                backend="cpu",
            )  # fmt: skip
            lab = res.labels
            assert res.energy == direct(unary, lab, v, w, steps)
            assert res.energy == label_energy(unary, lab, model, weights=w,
                                              connectivity=conn)  # fmt: skip
            assert res.energy >= optimum
            if method == "expansion":  # Boykov, Veksler and Zabih's bound
                assert res.energy <= bound * optimum
            # a local minimum of its own moves
            for a in range(nl):
                if method == "expansion":
                    zero, one = lab, np.full_like(lab, a)
                    assert best_move(unary, lab, v, w, steps, zero, one) >= res.energy
                else:
                    for b in range(a + 1, nl):
                        inside = (lab == a) | (lab == b)
                        zero, one = np.where(inside, a, lab), np.where(inside, b, lab)
                        e = best_move(unary, lab, v, w, steps, zero, one)
                        assert e >= res.energy


def test_two_labels_are_exact_in_3d(rng):
    # with two labels an expansion move is the whole problem: the global minimum
    grid = (2, 2, 2)
    steps = STEPS[(3, 26)]
    unary = rng.integers(-10, 10, (*grid, 2))
    w = rng.integers(0, 5, (13, *grid))
    v = pairwise_matrix("potts", 2)
    optimum = min(direct(unary, lab, v, w, steps) for lab in all_labellings(grid, 2))
    res = minimize_labels(unary, weights=w, connectivity=26, backend="cpu")
    assert res.energy == optimum


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_against_pymaxflow_fastmin(seed):
    fastmin = pytest.importorskip("maxflow.fastmin")
    rng = np.random.default_rng(seed)
    unary = rng.integers(0, 20, (24, 30, 5))
    model = ("truncated_linear", 2)
    v = pairwise_matrix(model, 5).astype(np.float64)
    start = np.argmin(unary, axis=-1)
    for method, theirs_fn in (
        ("expansion", fastmin.aexpansion_grid),
        ("swap", fastmin.abswap_grid),
    ):
        theirs = theirs_fn(unary.astype(np.float64), v, max_cycles=10, labels=start)
        e_theirs = label_energy(unary, theirs, model)
        ours = minimize_labels(unary, model, method=method, backend="cpu")
        # expansion: at most theirs or within 0.1% (the bar); swap stops at
        # another local minimum of its moves (this test's tiny grids check that it
        # is one): within 0.5% of theirs here (0.2-0.3% measured on these seeds)
        tol = 1.001 if method == "expansion" else 1.005
        assert ours.energy <= e_theirs * tol, (method, ours.energy, e_theirs)
        assert (
            ours.stats["cycles"][-1]["improving_moves"] == 0
            or len(ours.stats["cycles"]) == 10
        )


@pytest.mark.parametrize(
    ("shape", "model"),
    [
        ((20, 26), ("truncated_linear", 2)),
        ((9, 10, 11), ("truncated_linear", 3)),
        ((18, 22), "potts"),
    ],
)
def test_expansion_follows_pymaxflow_cycle_by_cycle(shape, model):
    """Each expansion move is optimal, and in ties it moves the fewest nodes (the
    CPU cut of the swapped move): from the same start, after every cycle, the same
    energy as PyMaxflow's fastmin, which keeps ties the same way."""
    fastmin = pytest.importorskip("maxflow.fastmin")
    rng = np.random.default_rng(len(shape))
    labels = 6
    unary = rng.integers(0, 12, (*shape, labels))  # small integers: many ties
    v = pairwise_matrix(model, labels) * 3
    start = np.argmin(unary, axis=-1)
    for cycles in (1, 2, 4):
        theirs = fastmin.aexpansion_grid(
            unary.astype(np.float64), v.astype(np.float64), max_cycles=cycles,
            labels=start.copy(),
        )  # fmt: skip
        ours = minimize_labels(
            unary, v, method="expansion", max_cycles=cycles, backend="cpu"
        )
        assert ours.energy == label_energy(unary, theirs, v), (cycles, model)


@pytest.mark.parametrize(
    ("shape", "conn"), [((21, 17), 4), ((19, 23), 8), ((6, 7, 9), 26), ((1, 40), 4)]
)
def test_move_graph_built_by_row_ranges(monkeypatch, shape, conn):
    """The CPU move graph written into the solver's records by several threads, a
    range of rows each (here a row a range and up), is the one written by one:
    the same labels and energies cycle for cycle, equal to PyMaxflow's fastmin in
    2-D."""
    from vision_cuts import multilabel

    rng = np.random.default_rng(len(shape) + conn)
    labels = 5
    unary = rng.integers(0, 15, (*shape, labels))
    v = pairwise_matrix(("truncated_linear", 2), labels) * 3
    kw = {"method": "expansion", "connectivity": conn, "backend": "cpu"}
    one = minimize_labels(unary, v, max_cycles=6, **kw)
    monkeypatch.setattr(multilabel, "_MIN_MOVE_ROWS_NODES", 1)
    monkeypatch.setattr(multilabel, "default_threads", lambda: 3)
    split = minimize_labels(unary, v, max_cycles=6, **kw)
    np.testing.assert_array_equal(split.labels, one.labels)
    assert split.stats["cycles"] == one.stats["cycles"]
    assert split.energy == label_energy(unary, split.labels, v, connectivity=conn)
    fastmin = pytest.importorskip("maxflow.fastmin")
    if conn == 4:
        theirs = fastmin.aexpansion_grid(
            unary.astype(np.float64), v.astype(np.float64), max_cycles=6,
            labels=np.argmin(unary, axis=-1),
        )  # fmt: skip
        assert split.energy == label_energy(unary, theirs, v)


def test_progress_and_tolerance():
    rng = np.random.default_rng(5)
    unary = rng.integers(0, 30, (16, 18, 6))
    calls = []
    full = minimize_labels(
        unary,
        "potts",
        max_cycles=6,
        callback=lambda d, t: calls.append((d, t)),
        backend="cpu",
    )
    total = 6 * 6  # 6 labels a cycle, 6 cycles at most
    assert calls[-1] == (total, total)
    done = [d for d, _ in calls]
    assert done == sorted(done) and all(t == total for _, t in calls)
    # after every move but the first, then once at the end
    assert len(calls) == 6 * len(full.stats["cycles"])
    # a tolerance as large as the whole energy ends the run after the first cycle
    short = minimize_labels(unary, "potts", max_cycles=6, tol=1.0)
    assert len(short.stats["cycles"]) == 1
    assert short.energy >= full.energy
    with pytest.raises(ValueError, match="tol must be a finite number >= 0"):
        minimize_labels(unary, "potts", tol=-1)
    with pytest.raises(TypeError, match="callback must be callable"):
        minimize_labels(unary, "potts", callback=3)


def test_device_capacity_bound():
    # the device loop runs only where no move's capacities can leave int32
    from vision_cuts._multilabel_gpu import fits

    v = pairwise_matrix("potts", 3)
    u = np.zeros((4, 5, 3), np.int64)
    w = np.ones((2, 4, 5), np.int64)
    assert fits(u, v, w)
    u[0, 0, 0] = 2**31 - 5  # spread + 2 ndim max(w) max(V) = 2**31 - 5 + 4
    assert fits(u, v, w)
    u[0, 0, 0] = 2**31 - 4
    assert not fits(u, v, w)
    u[0, 0, 0] = -(2**31) - 1  # beyond int32 itself
    assert not fits(u, v, w)
    assert not fits(np.zeros((2, 2, 3), np.int64), v, np.full((2, 2, 2), 2**30))


def test_moves_beyond_int32_are_refused():
    """A move whose capacities leave int32 is a clear error naming the array, not a
    silently wrapped cut."""
    u = np.zeros((3, 4, 3), np.int64)
    u[..., 1] = 2**32
    u[1, 2, 2] = 2**33  # the largest spread, named with its node
    words = r"sink capacities of a move exceed int32 .*8589934592, at node \(1, 2\)"
    with pytest.raises(ValueError, match=words):
        minimize_labels(u, "potts", backend="cpu")
    u = np.zeros((3, 4, 3), np.int64)
    w = np.full((2, 3, 4), 2**30, np.int64)
    init = np.array([[0, 2, 0, 2]] * 3)
    words = r"edges capacities of a move exceed int32 .*1073741824 x 2 = 2147483648"
    with pytest.raises(ValueError, match=words):
        minimize_labels(u, ("truncated_linear", 2), weights=w, init=init, backend="cpu")


def test_model_checks():
    u = np.zeros((2, 3, 3), dtype=np.int64)
    quad = ("truncated_quadratic", 4)  # V(0, 2) = 4 > V(0, 1) + V(1, 2) = 2
    with pytest.raises(
        ValueError, match=r"metric: V\(0, 2\) = 4 > V\(0, 1\) \+ V\(1, 2\)"
    ):
        minimize_labels(u, quad, backend="cpu")
    assert minimize_labels(u, quad, method="swap", backend="cpu").energy == 0
    with pytest.raises(ValueError, match=r"symmetric: V\(0, 1\) = 1 but V\(1, 0\) = 2"):
        minimize_labels(u, np.array([[0, 1, 1], [2, 0, 1], [1, 1, 0]]), method="swap")
    with pytest.raises(ValueError, match=r"V\(1, 1\) = 3 must be 0"):
        minimize_labels(u, np.array([[0, 1, 1], [1, 3, 1], [1, 1, 0]]))
    with pytest.raises(ValueError, match=r"V\(0, 2\) = 0 for different labels"):
        minimize_labels(u, np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]))
    with pytest.raises(ValueError, match=r"V\(0, 1\) = -1 is negative"):
        minimize_labels(u, np.array([[0, -1, 1], [-1, 0, 1], [1, 1, 0]]))
    with pytest.raises(ValueError, match=r"shape \(L, L\) = \(3, 3\)"):
        minimize_labels(u, np.zeros((2, 2), dtype=int))
    with pytest.raises(ValueError, match="pairwise must be 'potts'"):
        minimize_labels(u, "linear")
    with pytest.raises(ValueError, match="cap of 'truncated_linear'"):
        minimize_labels(u, ("truncated_linear", 0))
    with pytest.raises(ValueError, match="method must be one of"):
        minimize_labels(u, method="icm")
    with pytest.raises(ValueError, match="max_cycles must be an integer >= 1"):
        minimize_labels(u, max_cycles=0)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="moves_per_cut must be an integer >= 1"):
            minimize_labels(u, moves_per_cut=bad, backend="cpu")
    for bad in (1.5, True, "2"):
        with pytest.raises(TypeError, match="moves_per_cut must be an integer, got"):
            minimize_labels(u, moves_per_cut=bad, backend="cpu")
    # the CPU cuts its moves one at a time whatever moves_per_cut says
    res = minimize_labels(u + np.arange(3), moves_per_cut=4, backend="cpu")
    assert res.stats["moves_per_cut"] == 1 and res.stats["device_moves"] is False
    with pytest.raises(ValueError, match=r"unary must have shape \(M, N, L\)"):
        minimize_labels(np.zeros((3, 3), dtype=int))
    with pytest.raises(TypeError, match="unary must have an integer dtype"):
        minimize_labels(u.astype(float))
    with pytest.raises(ValueError, match=r"weights must have shape \(D, \*grid\)"):
        minimize_labels(u, weights=np.ones((4, 2, 3), dtype=int))
    with pytest.raises(ValueError, match=r"init labels must lie in \[0, 3\)"):
        minimize_labels(u, init=np.full((2, 3), 3))
    with pytest.raises(ValueError, match="init must be integer labels"):
        minimize_labels(u, init=np.zeros((3, 2), dtype=int))
    for model in (("potts",), ("truncated_linear", 1, 2)):
        with pytest.raises(ValueError, match=r"a pairwise model must be a pair "
                           r"\(name, cap\), such as \('truncated_linear', 2\), got"):
            minimize_labels(u, model)


def _full_grid_swap(unary, model, weights, conn, init, max_cycles):
    """minimize_labels' swap loop on the full-grid move graph (``_move``), the
    construction the CPU's compact swap moves replace: labels, energy, cycles."""
    from vision_cuts.multilabel import _check, _energy, _move

    u, v, w, D = _check(unary, model, weights, conn)
    lab = np.argmin(u, axis=-1) if init is None else np.asarray(init, np.int64)
    energy = _energy(u, v, w, D, lab)
    cycles = []
    for _ in range(max_cycles):
        start, cuts, better = energy, 0, 0
        for a, b in itertools.combinations(range(u.shape[-1]), 2):
            inside = (lab == a) | (lab == b)
            if not inside.any():
                continue
            zero, one = np.where(inside, a, lab), np.where(inside, b, lab)
            proposal, e = _move(u, v, w, D, zero, one, 2 * D, "cpu")
            cuts += 1
            if e < energy:
                lab, energy, better = proposal, e, better + 1
        cycles.append({"energy": energy, "cuts": cuts, "improving_moves": better})
        if energy >= start:
            break
    return lab, energy, cycles


SWAP_CASES = [
    ((14, 17), 4, "potts", False, False),
    ((13, 16), 8, ("truncated_quadratic", 5), True, False),
    ((12, 15), 4, "matrix", True, True),  # some labels absent
    ((5, 6, 7), 6, ("truncated_linear", 2), True, False),
    ((4, 5, 6), 18, "potts", False, True),
    ((4, 5, 6), 26, "matrix", True, False),
    ((1, 30), 8, "potts", True, False),
]


@pytest.mark.parametrize("split", [False, True], ids=["whole", "ranges"])
@pytest.mark.parametrize(
    ("grid", "conn", "model", "weighted", "absent"),
    SWAP_CASES,
    ids=[f"{len(c[0])}d-{c[1]}-{i}" for i, c in enumerate(SWAP_CASES)],
)
def test_swap_follows_the_full_grid_moves(
    monkeypatch, grid, conn, model, weighted, absent, split
):
    """The CPU swap builds each move's graph over the nodes labelled alpha or beta
    only (and may solve it in ranges side by side): the same labels, energies and
    cycle statistics as the full-grid move graph, move for move."""
    from vision_cuts import multilabel
    from vision_cuts.grid import connectivity_planes

    if split:  # ranges of a single node and up, three of them
        monkeypatch.setattr(multilabel, "_MIN_PART", 1)
        monkeypatch.setattr(multilabel, "default_threads", lambda: 3)
    rng = np.random.default_rng(len(grid) * 100 + conn)
    nl = 6
    if model == "matrix":  # a random semi-metric
        model = rng.integers(1, 9, (nl, nl))
        model = model + model.T
        np.fill_diagonal(model, 0)
    unary = rng.integers(-4, 16, (*grid, nl))
    D = connectivity_planes(conn, len(grid)) // 2
    w = rng.integers(0, 4, (D, *grid)) if weighted else None
    init = rng.choice([0, 2, 5], grid) if absent else None
    ours = minimize_labels(
        unary, model, weights=w, method="swap", connectivity=conn, init=init,
        max_cycles=6, backend="cpu",
    )  # fmt: skip
    lab, energy, cycles = _full_grid_swap(unary, model, w, conn, init, 6)
    np.testing.assert_array_equal(ours.labels, lab)
    assert ours.energy == energy
    got = [(c["energy"], c["improving_moves"]) for c in ours.stats["cycles"]]
    assert got == [(c["energy"], c["improving_moves"]) for c in cycles]
    # the pairs skipped (no accepted move can have changed them) are cut there
    for c, ref in zip(ours.stats["cycles"], cycles, strict=True):
        assert c["cuts"] <= ref["cuts"] <= c["cuts"] + c["skipped_moves"]


SKIP_CASES = [
    ((16, 19), 4, "potts", 5),
    ((14, 15), 8, ("truncated_linear", 2), 6),
    ((13, 17), 4, "matrix", 5),
    ((5, 6, 7), 6, ("truncated_quadratic", 4), 4),
]


@pytest.mark.parametrize("method", ["expansion", "swap"])
@pytest.mark.parametrize(
    ("grid", "conn", "model", "nl"),
    SKIP_CASES,
    ids=[f"{len(c[0])}d-{c[1]}-{i}" for i, c in enumerate(SKIP_CASES)],
)
def test_skipped_moves_change_nothing(monkeypatch, method, grid, conn, model, nl):
    """A move no accepted move can have changed since it last ran is skipped: the
    labels, energies and improving moves of every cycle are those of the loop that
    cuts every move, and a run that ends by a cycle lowering nothing skips moves
    in it (work counters)."""
    from vision_cuts import multilabel
    from vision_cuts.grid import connectivity_planes

    rng = np.random.default_rng(len(grid) * 10 + conn + nl)
    if model == "matrix":  # a random semi-metric that is no Potts model
        model = rng.integers(1, 9, (nl, nl))
        model = np.minimum(model + model.T, 12)
        np.fill_diagonal(model, 0)
        if method == "expansion":  # its shortest-path closure: a metric
            for k in range(nl):
                model = np.minimum(model, model[:, k : k + 1] + model[k])
    if method == "expansion" and isinstance(model, tuple) and "quadratic" in model[0]:
        model = ("truncated_linear", 3)  # expansion needs a metric
    unary = rng.integers(0, 30, (*grid, nl))
    D = connectivity_planes(conn, len(grid)) // 2
    w = rng.integers(0, 5, (D, *grid))
    kw = {"weights": w, "method": method, "connectivity": conn, "max_cycles": 12}
    ours = minimize_labels(unary, model, backend="cpu", **kw)
    monkeypatch.setattr(multilabel, "_may_change", lambda *a: True)
    every = minimize_labels(unary, model, backend="cpu", **kw)
    np.testing.assert_array_equal(ours.labels, every.labels)
    assert ours.energy == every.energy
    key = [(c["energy"], c["improving_moves"]) for c in every.stats["cycles"]]
    assert [(c["energy"], c["improving_moves"]) for c in ours.stats["cycles"]] == key
    assert all(c["skipped_moves"] == 0 for c in every.stats["cycles"])
    for c, e in zip(ours.stats["cycles"], every.stats["cycles"], strict=True):
        assert c["cuts"] <= e["cuts"] <= c["cuts"] + c["skipped_moves"]
    last = ours.stats["cycles"][-1]
    assert last["improving_moves"] == 0 and len(ours.stats["cycles"]) > 1
    assert last["skipped_moves"] > 0
    assert sum(c["cuts"] for c in ours.stats["cycles"]) < sum(
        c["cuts"] for c in every.stats["cycles"]
    )


def test_a_move_of_other_labels_makes_a_swap_run_again():
    """With a general semi-metric, a swap of c and d changes the terminal costs of
    an (a, b) swap whose nodes neighbour the nodes that moved, unless V(a, .) and
    V(b, .) see c and d alike: only then is (a, b) skipped."""
    from vision_cuts.multilabel import _may_change

    v = np.array([[0, 1, 2, 2], [1, 0, 3, 4], [2, 3, 0, 1], [2, 4, 1, 0]])
    assert _may_change(v, 0, 1, [], None)  # never ran
    assert not _may_change(v, 0, 1, [(0, 1)], 1)  # nothing since
    assert _may_change(v, 0, 1, [(0, 1), (1, 2)], 1)  # b's nodes moved
    assert _may_change(v, 0, 1, [(2, 3)], 0)  # V(1, 2) != V(1, 3)
    assert not _may_change(np.where(np.eye(4) > 0, 0, 5), 0, 1, [(2, 3)], 0)  # Potts
    assert _may_change(v, 2, None, [(1, None)], 0)  # expansion: any accepted move
    assert not _may_change(v, 2, None, [(2, None)], 1)


@pytest.mark.parametrize("split", [False, True], ids=["whole", "ranges"])
@pytest.mark.parametrize("conn", [4, 8])
def test_compact_swap_move_is_the_full_grid_cut(rng, conn, split):
    """Every swap move, applied whatever its gain: the compact graph's cut takes
    the full-grid move graph's labels and energy (the smallest source side, so
    ties are broken the same way)."""
    from vision_cuts.multilabel import _check, _CompactSwap, _energy, _move

    nl = 5
    unary = rng.integers(0, 6, (11, 13, nl))  # small costs: many ties
    u, v, w, D = _check(unary, ("truncated_linear", 2), None, conn)
    big = 10**12
    for _ in range(3):
        lab = rng.integers(0, nl, u.shape[:-1])
        lab[lab == 3] = 1  # label 3 absent
        cur = _energy(u, v, w, D, lab)
        for a, b in itertools.combinations(range(nl), 2):
            inside = (lab == a) | (lab == b)
            state = _CompactSwap(u, v, w, D, lab, parts=3 if split else 1, min_part=1)
            e = state.move(a, b, big)  # lower than big: always applied
            if not inside.any():
                assert e is None
                continue
            zero, one = np.where(inside, a, lab), np.where(inside, b, lab)
            proposal, e_full = _move(u, v, w, D, zero, one, 2 * D, "cpu")
            assert e - big + cur == e_full
            np.testing.assert_array_equal(state.labels(), proposal)


def test_swap_moves_beyond_int32_are_refused():
    u = np.zeros((3, 4, 3), np.int64)
    u[..., 1] = 2**32
    with pytest.raises(ValueError, match="source capacities of a move exceed int32"):
        minimize_labels(u, "potts", method="swap", backend="cpu")
    u = np.zeros((3, 4, 3), np.int64)
    u[..., 0] = 2**32
    with pytest.raises(ValueError, match="sink capacities of a move exceed int32"):
        minimize_labels(u, "potts", method="swap", backend="cpu")
    u = np.zeros((3, 4, 3), np.int64)
    w = np.full((2, 3, 4), 2**30, np.int64)
    init = np.array([[0, 2, 0, 2]] * 3)
    with pytest.raises(ValueError, match="edges capacities of a move exceed int32"):
        minimize_labels(
            u, ("truncated_linear", 2), weights=w, init=init, method="swap",
            backend="cpu",
        )  # fmt: skip


# ---- input checks --------------------------------------------------------------------


def _brute_force(unary, model, weights):
    """The least energy over every labelling of a tiny 4-connected 2-D grid."""
    grid, nl = unary.shape[:-1], unary.shape[-1]
    return min(
        label_energy(unary, lab, model, weights=weights)
        for lab in all_labellings(grid, nl)
    )


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("method", ["expansion", "swap"])
def test_energies_near_the_int64_bound_are_exact(rng, sign, method):
    # every energy just below 2**62: a constant offset of every unary cost changes
    # no minimum, and the energies keep their exact offset
    grid, nl = (2, 3), 3
    v = pairwise_matrix("potts", nl)
    for _ in range(3):
        small = rng.integers(0, 20, (*grid, nl))
        w = rng.integers(0, 5, (2, *grid))
        pairs = int(w[0][:, :-1].sum() + w[1][:-1].sum())
        big = sign * ((2**62 - 1 - pairs - 20 * small.size) // small[..., 0].size)
        unary = small + big
        res = minimize_labels(unary, "potts", weights=w, method=method, backend="cpu")
        ref = minimize_labels(small, "potts", weights=w, method=method, backend="cpu")
        np.testing.assert_array_equal(res.labels, ref.labels)
        assert res.energy == ref.energy + big * small[..., 0].size
        assert res.energy == direct(unary, res.labels, v, w, STEPS[(2, 4)])
        assert _brute_force(unary, "potts", w) == _brute_force(small, "potts", w) + (
            big * small[..., 0].size
        )


_K = 2**62
_HUGE = [
    # (unary, pairwise, weights, the message)
    (np.full((1, 2, 2), _K - 1) + [0, 1], "potts", None, "unary must lie strictly"),
    (np.full((1, 2, 2), -_K), "potts", None, "unary must lie strictly"),
    (np.full((1, 2, 2), 2**61), "potts", None, "unary, weights and pairwise are too"),
    (np.zeros((2, 3, 3), np.int64), "potts", np.full((2, 2, 3), _K),
     "weights must lie strictly"),
    (np.zeros((2, 3, 3), np.int64), "potts", np.full((2, 2, 3), 2**60),
     "unary, weights and pairwise are too"),
    (np.zeros((2, 3, 3), np.int64), np.array([[0, _K - 1, 1]] * 3), None,
     "unary, weights and pairwise are too"),
    (np.zeros((2, 3, 3), np.int64), np.full((3, 3), _K), None,
     "pairwise must lie strictly"),
]  # fmt: skip


@pytest.mark.parametrize(("unary", "model", "weights", "match"), _HUGE)
def test_energies_beyond_int64_are_refused(unary, model, weights, match):
    """An energy that int64 sums could wrap is a ValueError naming the inputs, from
    the solvers and label_energy alike (never a labelling chosen by wrapped sums)."""
    lab = np.zeros(unary.shape[:-1], dtype=int)
    with pytest.raises(ValueError, match=match):
        label_energy(unary, lab, model, weights=weights)
    for method in ("expansion", "swap"):
        with pytest.raises(ValueError, match=match):
            minimize_labels(unary, model, weights=weights, method=method, backend="cpu")


@pytest.mark.parametrize(
    ("values", "dtype", "name", "shown"),
    [
        ("unary", np.uint64, "unary", "9223372036854775808"),
        ("weights", np.uint64, "weights", "18446744073709551615"),
        ("pairwise", np.uint64, "pairwise", "9223372036854775808"),
    ],
)
def test_uint64_beyond_int64_reports_the_value(values, dtype, name, shown):
    unary = np.zeros((2, 3, 3), dtype=np.int64) + np.arange(3)
    kw: dict = {"pairwise": "potts", "weights": None}
    if values == "unary":
        unary = np.full((2, 3, 3), 2**63, dtype=dtype)
    elif values == "weights":
        kw["weights"] = np.full((2, 2, 3), 2**64 - 1, dtype=dtype)
    else:
        kw["pairwise"] = (1 - np.eye(3, dtype=dtype)) * dtype(2**63)
    with pytest.raises(ValueError, match=rf"{name} must lie .* got {shown} at"):
        minimize_labels(unary, backend="cpu", **kw)
    with pytest.raises(ValueError, match=rf"{name} must lie .* got {shown} at"):
        label_energy(unary, np.zeros((2, 3), int), **kw)


def test_huge_caps_are_clamped():
    # no cap beyond the largest difference changes V; any size of integer works
    for name in ("truncated_linear", "truncated_quadratic"):
        for cap in (2**64, 2**70, np.uint64(2**64 - 1)):
            np.testing.assert_array_equal(
                pairwise_matrix((name, cap), 4), pairwise_matrix((name, 9), 4)
            )
    u = np.arange(18).reshape(2, 3, 3) % 5
    lab = np.array([[0, 2, 1], [2, 0, 0]])
    assert label_energy(u, lab, ("truncated_quadratic", 2**64)) == label_energy(
        u, lab, np.array([[0, 1, 4], [1, 0, 1], [4, 1, 0]])
    )
    big = minimize_labels(u, ("truncated_linear", 2**70), backend="cpu")
    assert big.energy == minimize_labels(u, ("truncated_linear", 2)).energy
    with pytest.raises(TypeError, match="cap of 'truncated_linear' must be an int"):
        pairwise_matrix(("truncated_linear", 1.5), 3)


@pytest.mark.parametrize(
    ("labels", "error", "match"),
    [
        (np.full((2, 3), 3), ValueError, r"labels must lie in \[0, 3\), got 3 at"),
        (np.full((2, 3), -1), ValueError, r"labels must lie in \[0, 3\), got -1 at"),
        (np.full((2, 3), 2**63, np.uint64), ValueError,
         r"labels must lie in \[0, 3\), got 9223372036854775808 at"),
        (np.full((2, 3), 1.7), TypeError, "labels must have an integer dtype, got fl"),
        (np.full((2, 3), np.nan), TypeError, "labels must have an integer dtype"),
        (np.full((2, 3), 1j), TypeError, "labels must have an integer dtype, got co"),
        (np.ones((2, 3), bool), TypeError, "labels must have an integer dtype, got b"),
        (np.zeros((3, 2), int), ValueError, r"labels must be integer labels of the g"),
    ],
)  # fmt: skip
def test_label_energy_checks_the_labels(labels, error, match):
    u = np.arange(18).reshape(2, 3, 3)
    with pytest.raises(error, match=match):
        label_energy(u, labels)
    # the same check as the starting labels of minimize_labels
    match = match.replace("labels must", "init (labels )?must")
    with pytest.raises(error, match=match):
        minimize_labels(u, init=labels, backend="cpu")


def _masked(a):
    return np.ma.masked_array(a, mask=np.zeros(np.shape(a), bool))


_U = np.arange(18).reshape(2, 3, 3) % 7
_IRREGULAR = [
    # (the parameter, minimize_labels' arguments with it irregular)
    ("unary", lambda f: ((f(_U),), {})),
    ("pairwise", lambda f: ((_U, f(1 - np.eye(3, dtype=int))), {})),
    ("weights", lambda f: ((_U,), {"weights": f(np.ones((2, 2, 3), int))})),
    ("init", lambda f: ((_U,), {"init": f(np.zeros((2, 3), int))})),
]


def _ragged(a):
    rows = np.asarray(a).tolist()
    rows[-1] = rows[-1][:-1]  # one entry short
    return rows


@pytest.mark.parametrize(("name", "call"), _IRREGULAR, ids=[n for n, _ in _IRREGULAR])
def test_masked_and_ragged_inputs_are_refused(name, call):
    args, kw = call(_masked)
    with pytest.raises(TypeError, match=f"{name} must be a plain array, got a masked"):
        minimize_labels(*args, backend="cpu", **kw)
    args, kw = call(_ragged)
    with pytest.raises(ValueError, match=f"{name} must be a regular"):
        minimize_labels(*args, backend="cpu", **kw)
    # plain lists are arrays
    args, kw = call(lambda a: np.asarray(a).tolist())
    got = minimize_labels(*args, backend="cpu", **kw)
    args, kw = call(np.asarray)
    assert got.energy == minimize_labels(*args, backend="cpu", **kw).energy


def test_label_energy_refuses_masked_and_ragged_labels():
    lab = np.zeros((2, 3), int)
    with pytest.raises(TypeError, match="labels must be a plain array"):
        label_energy(_U, _masked(lab))
    with pytest.raises(ValueError, match="labels must be a regular"):
        label_energy(_U, _ragged(lab))
    assert label_energy(_U, lab.tolist()) == label_energy(_U, lab)


@pytest.mark.parametrize("shape", [(0, 3, 3), (2, 0, 2), (0, 2, 2, 3)])
def test_an_empty_grid_gives_the_same_result_with_every_method(shape):
    unary = np.zeros(shape, dtype=np.int64)
    results = [
        minimize_labels(unary, method=method, backend="cpu")
        for method in ("expansion", "swap")
    ]
    for res in results:
        assert res.labels.shape == shape[:-1] and res.labels.dtype == np.int32
        assert res.energy == 0 == res.stats["initial_energy"]
        assert res.stats["cycles"] == results[0].stats["cycles"]
        assert res.stats["cycles"][0]["cuts"] == 0
    assert label_energy(unary, np.zeros(shape[:-1], int)) == 0


def test_max_cycles_takes_numpy_integers():
    u = np.random.default_rng(3).integers(0, 9, (4, 5, 3))
    want = minimize_labels(u, max_cycles=3, backend="cpu")
    for value in (np.int64(3), np.int32(3), np.uint8(3)):
        got = minimize_labels(u, max_cycles=value, backend="cpu")
        np.testing.assert_array_equal(got.labels, want.labels)
        assert got.energy == want.energy


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"max_cycles": 0}, ValueError, "max_cycles must be an integer >= 1, got 0"),
        ({"max_cycles": np.int64(-2)}, ValueError, "max_cycles must be an integer"),
        ({"max_cycles": 2.0}, TypeError, "max_cycles must be an integer, got 2.0"),
        ({"max_cycles": True}, TypeError, "max_cycles must be an integer, got True"),
        ({"max_cycles": "3"}, TypeError, "max_cycles must be an integer, got '3'"),
        ({"tol": float("nan")}, ValueError, "tol must be a finite number >= 0"),
        ({"tol": -1e-3}, ValueError, "tol must be a finite number >= 0"),
        ({"tol": "x"}, TypeError, "tol must be a number, got 'x'"),
        ({"tol": None}, TypeError, "tol must be a number, got None"),
    ],
)
def test_run_arguments_are_checked(kw, error, match):
    with pytest.raises(error, match=match):
        minimize_labels(_U, backend="cpu", **kw)


def test_swap_moves_with_a_huge_thread_count(rng, monkeypatch):
    """VISION_CUTS_THREADS far beyond the cores does not size per-thread buffers:
    the ranges are bounded by the nodes (min_part each)."""
    monkeypatch.setenv("VISION_CUTS_THREADS", "10000000")
    unary = rng.integers(0, 20, size=(60, 300, 3))  # rows of 300: long buffers
    want = minimize_labels(unary, method="swap", backend="cpu")
    monkeypatch.setenv("VISION_CUTS_THREADS", "1")
    one = minimize_labels(unary, method="swap", backend="cpu")
    np.testing.assert_array_equal(want.labels, one.labels)
