"""Tests of vision_cuts.optical_flow, the flow pictures (visualize), the .flo format."""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest
import scipy.optimize

from vision_cuts import (
    BackendUnavailableError,
    FlowResult,
    draw_flow_arrows,
    flow_to_color,
    optical_flow,
    optical_flow_frames,
)
from vision_cuts.io import read_flo, write_flo

# the module (its name is also the function's, which the package exports)
flow_mod = importlib.import_module("vision_cuts.optical_flow")

cv2 = pytest.importorskip("cv2")


def _texture(rng, shape=(160, 200)) -> np.ndarray:
    """A blurred-noise RGB picture: corners everywhere, smooth enough for LK."""
    noise = (rng.random((*shape, 3)) * 255).astype(np.uint8)
    return cv2.GaussianBlur(noise, (0, 0), 1.2)


def _shifted(img: np.ndarray, dx: float, dy: float) -> np.ndarray:
    """``img`` moved by (dx, dy): out(x + dx, y + dy) = img(x, y)."""
    m = np.float32([[1, 0, dx], [0, 1, dy]])
    h, w = img.shape[:2]
    return cv2.warpAffine(
        img, m, (w, h), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REFLECT
    )


@pytest.fixture(scope="module")
def pair():
    rng = np.random.default_rng(7)
    big = _texture(rng, (160, 200))
    return big[20:140, 20:180].copy(), big[18:138, 17:177].copy()  # motion (3, 2)


# ----------------------------------------------------------------------- front end
def test_integer_translation(pair):
    f0, f1 = pair
    res = optical_flow(f0, f1, backend="cpu")
    assert isinstance(res, FlowResult)
    n = len(res.points)
    assert n > 100
    assert res.points.shape == (n, 2) and res.points.dtype == np.float32
    assert res.vectors.shape == (n, 2) and res.vectors.dtype == np.float32
    assert res.costs.shape == (n,) and res.costs.dtype == np.float32
    assert res.dense is None
    # points are pixel centres of frame0, one feature per pixel
    assert np.array_equal(res.points, np.rint(res.points))
    assert len(np.unique(res.points, axis=0)) == n
    err = np.abs(res.vectors - [3.0, 2.0])
    assert np.median(err) < 0.05 and np.mean(err.max(1) < 0.5) > 0.95
    assert (res.costs >= 0).all() and (res.costs <= 0.35 + 1e-6).all()


def test_subpixel_translation_and_dense(rng):
    img = _texture(rng, (120, 160))
    moved = _shifted(img, 1.6, -0.7)
    res = optical_flow(img, moved, backend="cpu", dense=True)
    assert len(res.points) > 50
    inner = (
        (res.points > 10).all(1) & (res.points[:, 0] < 150) & (res.points[:, 1] < 110)
    )
    med = np.median(res.vectors[inner], axis=0)
    assert np.abs(med - [1.6, -0.7]).max() < 0.05
    assert res.dense.shape == (120, 160, 2) and res.dense.dtype == np.float32
    core = res.dense[15:-15, 15:-15]
    assert np.abs(core - [1.6, -0.7]).max(-1).mean() < 0.1


def test_grey_float_input_matches_uint8(pair):
    f0, f1 = pair
    g0 = cv2.cvtColor(f0, cv2.COLOR_RGB2GRAY)
    g1 = cv2.cvtColor(f1, cv2.COLOR_RGB2GRAY)
    a = optical_flow(g0, g1, backend="cpu", refine=False)
    b = optical_flow(g0 / 255.0, g1 / 255.0, backend="cpu", refine=False)
    np.testing.assert_array_equal(a.points, b.points)
    np.testing.assert_array_equal(a.vectors, b.vectors)
    assert len(a.points) > 100


def _augmented(f0, f1, radius, weight, max_cost):
    """Independent build of the n x (m + n) matrix with one dummy column per row."""
    p0, p1 = f0.points.astype(np.float64), f1.points.astype(np.float64)
    n, m = len(p0), len(p1)
    a = np.unpackbits(f0.desc, axis=1).astype(np.float64)
    b = np.unpackbits(f1.desc, axis=1).astype(np.float64)
    hamming = (a[:, None, :] != b[None, :, :]).mean(-1)
    dist = np.sqrt(((p0[:, None, :] - p1[None, :, :]) ** 2).sum(-1))
    cost = np.full((n, m + n), np.inf)
    cost[:, :m] = np.where(dist <= radius, hamming + weight * dist / radius, np.inf)
    cost[np.arange(n), m + np.arange(n)] = max_cost
    return cost


def _one_pass(pair, backend, tile=None):
    """Features of the pair and one global pass (radius 20, weight 0.2, unmatched
    at 0.3) on ``backend``, results on the host."""
    f0, f1 = pair
    grey0 = cv2.cvtColor(f0, cv2.COLOR_RGB2GRAY)
    grey1 = cv2.cvtColor(f1, cv2.COLOR_RGB2GRAY)
    a = flow_mod._detect(grey0, "orb", 200, snap=True)
    b = flow_mod._detect(grey1, "orb", 200, snap=False)
    params = flow_mod._check_params(
        backend, "orb", 200, 20.0, 6.0, 2, 0.2, 0.3, tile, None
    )
    zero = np.zeros_like(a.points)
    rows, cols, costs = flow_mod._Matcher(a, b, params).assign(zero, 20.0)
    return a, b, *(flow_mod.to_numpy(x) for x in (rows, cols, costs))


@pytest.mark.parametrize("backend", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_assignment_pass_is_optimal(pair, backend):
    """One global pass equals SciPy's optimum of the augmented matrix (the GPU's
    float costs are quantised: its total may exceed the optimum by a 2**-20 part of
    the cost range per row)."""
    a, b, rows, cols, costs = _one_pass(pair, backend)
    assert len(set(cols.tolist())) == len(cols) == len(rows)
    full = _augmented(a, b, 20.0, 0.2, 0.3)
    r, c = scipy.optimize.linear_sum_assignment(full)
    best = full[r, c].sum()
    # our pairs, priced by the oracle's float64 matrix (ours is float32)
    ours = full[rows, cols].sum() + 0.3 * (len(a.points) - len(rows))
    tol = 1e-6 * best if backend == "cpu" else len(a.points) * 1.2 / 2**20
    assert best - 1e-9 <= ours <= best + tol
    np.testing.assert_allclose(costs, full[rows, cols], rtol=1e-6)


@pytest.mark.parametrize("nbytes", [32, 5])
def test_compiled_candidates_against_a_kd_tree(rng, nbytes):
    """The compiled grid search finds exactly the pairs a k-d tree finds, with the
    same costs (predictions that leave the image included)."""
    from scipy.spatial import cKDTree

    from vision_cuts._optical_flow_cpu import pair_costs

    n, m, radius = 700, 650, 25.0
    p0 = (rng.random((n, 2)) * [300, 200]).astype(np.float32)
    p1 = (rng.random((m, 2)) * [300, 200]).astype(np.float32)
    d0 = rng.integers(0, 256, (n, nbytes), dtype=np.uint8)
    d1 = rng.integers(0, 256, (m, nbytes), dtype=np.uint8)
    pred = rng.normal(0, 20, (n, 2)).astype(np.float32)
    near = cKDTree(p0 + pred).sparse_distance_matrix(
        cKDTree(p1), radius, output_type="ndarray"
    )
    a = flow_mod._Features(p0, d0, True)
    b = flow_mod._Features(p1, d1, True)
    want = flow_mod._descriptor_distance(a, near["i"], b, near["j"])
    want = want + 0.2 * near["v"] / radius
    rows, cols, costs = pair_costs(p0, pred, p1, d0, d1, radius, 0.2)
    assert np.all(np.diff(rows) >= 0)
    key, key_want = rows * m + cols, near["i"].astype(np.int64) * m + near["j"]
    np.testing.assert_array_equal(np.sort(key), np.sort(key_want))
    np.testing.assert_allclose(
        costs[np.argsort(key)], want[np.argsort(key_want)], rtol=1e-12
    )
    empty = pair_costs(p0[:0], pred[:0], p1, d0[:0], d1, radius, 0.2)
    assert all(len(x) == 0 for x in empty)


@pytest.mark.parametrize("radius", [1e-300, 1e-3, 0.7, 3.0, 1e6])
def test_compiled_candidates_at_any_radius(rng, radius):
    """Radii far below a pixel (the grid's cells stay at least 1/1024 of the
    extent wide) and far beyond the frame give the k-d tree's pairs too."""
    from scipy.spatial import cKDTree

    from vision_cuts._optical_flow_cpu import pair_costs

    p0 = np.rint(rng.random((400, 2)) * [300, 200]).astype(np.float32)
    p1 = np.concatenate([p0[:150], rng.random((250, 2)) * [300, 200]])
    p1 = p1.astype(np.float32)  # 150 exact (0 px) partners, the rest anywhere
    d0 = rng.integers(0, 256, (len(p0), 32), dtype=np.uint8)
    d1 = rng.integers(0, 256, (len(p1), 32), dtype=np.uint8)
    rows, cols, costs = pair_costs(p0, np.zeros_like(p0), p1, d0, d1, radius, 0.2)
    near = cKDTree(p0).sparse_distance_matrix(
        cKDTree(p1), radius, output_type="ndarray"
    )
    key = np.sort(rows * len(p1) + cols)
    want = np.sort(near["i"].astype(np.int64) * len(p1) + near["j"])
    np.testing.assert_array_equal(key, want)
    assert len(key) >= 150 and np.isfinite(costs).all()


@pytest.mark.gpu
@pytest.mark.parametrize("tile", [None, 40])
def test_device_pass_matches_cpu_pass(pair, tile):
    """The device's candidate pairs and stacks give the CPU's matches (tiled too)."""
    *_, rows_c, cols_c, costs_c = _one_pass(pair, "cpu", tile)
    *_, rows_g, cols_g, costs_g = _one_pass(pair, "gpu", tile)
    same = np.intersect1d(rows_c * 100_000 + cols_c, rows_g * 100_000 + cols_g)
    assert len(same) >= 0.98 * len(rows_c)
    assert abs(costs_g.sum() - costs_c.sum()) <= 1e-3 * costs_c.sum()


@pytest.mark.gpu
def test_device_stages_against_the_cpu(rng):
    """Pair costs, neighbourhood medians and the dense interpolation on the device
    equal the CPU's formulas (points in general position: no distance ties)."""
    dev = importlib.import_module("vision_cuts._optical_flow_gpu")
    n, m = 300, 280
    p0 = (rng.random((n, 2)) * 100).astype(np.float32)
    p1 = (rng.random((m, 2)) * 100).astype(np.float32)
    d0 = rng.integers(0, 256, (n, 32), dtype=np.uint8)
    d1 = rng.integers(0, 256, (m, 32), dtype=np.uint8)
    pred = (rng.normal(size=(n, 2))).astype(np.float32)
    a = flow_mod._Features(p0, d0, True)
    b = flow_mod._Features(p1, d1, True)
    rows, cols, cost = flow_mod._candidates(a, b, pred, 15.0, 0.2)
    g0, g1 = dev.upload(p0, d0, True), dev.upload(p1, d1, True)
    rg, cg, costg = (
        flow_mod.to_numpy(x) for x in dev.pair_costs(g0, g1, pred, 15.0, 0.2, 256)
    )
    key, keyg = rows * m + cols, rg * m + cg
    np.testing.assert_array_equal(np.sort(key), keyg)
    np.testing.assert_allclose(costg, cost[np.argsort(key)], rtol=1e-12)
    # SIFT-like unit vectors
    f0 = rng.normal(size=(n, 128)).astype(np.float32)
    f0 /= np.linalg.norm(f0, axis=1, keepdims=True)
    f1 = rng.normal(size=(m, 128)).astype(np.float32)
    f1 /= np.linalg.norm(f1, axis=1, keepdims=True)
    rows, cols, cost = flow_mod._candidates(
        flow_mod._Features(p0, f0, False),
        flow_mod._Features(p1, f1, False),
        pred,
        15.0,
        0.2,
    )
    rg, cg, costg = (
        flow_mod.to_numpy(x)
        for x in dev.pair_costs(
            dev.upload(p0, f0, False), dev.upload(p1, f1, False), pred, 15.0, 0.2, 0
        )
    )
    key = rows * m + cols
    np.testing.assert_array_equal(np.sort(key), rg * m + cg)
    np.testing.assert_allclose(costg, cost[np.argsort(key)], rtol=1e-5)
    # medians, k = 12 and fewer sources than k
    vec = rng.normal(size=(n, 2)).astype(np.float32)
    for src in (p0, p0[:7]):
        want = flow_mod._median_near(src, vec[: len(src)], p1)
        got = flow_mod.to_numpy(
            flow_mod._median_near(src, vec[: len(src)], p1, gpu=True)
        )
        np.testing.assert_allclose(got, want, atol=1e-6)
    # many distance ties (integer grid points): the nearest by (distance, index)
    src = rng.integers(0, 12, (200, 2)).astype(np.float32)
    qs = rng.integers(0, 12, (90, 2)).astype(np.float32)
    vec = rng.normal(size=(200, 2)).astype(np.float32)
    d2 = ((qs[:, None, :] - src[None, :, :]) ** 2).sum(-1)
    near = np.argsort(d2, axis=1, kind="stable")[:, :12]
    want = np.median(vec[near], axis=1)
    got = flow_mod.to_numpy(flow_mod._median_near(src, vec, qs, gpu=True))
    np.testing.assert_array_equal(got, want.astype(np.float32))
    # dense interpolation, grey and colour, full and half grids
    for shape in ((60, 80), (60, 80, 3), (330, 340)):
        img = (rng.random(shape) * 255).astype(np.uint8)
        pts = np.column_stack(
            [rng.uniform(0, shape[1] - 1, 50), rng.uniform(0, shape[0] - 1, 50)]
        ).astype(np.float32)
        v = rng.normal(size=(50, 2)).astype(np.float32)
        want = flow_mod._interpolate(img, pts, v)
        got = flow_mod.to_numpy(flow_mod._interpolate(img, pts, v, gpu=True))
        np.testing.assert_allclose(got, want, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(61, 83), (96, 128)])
def test_device_variational_refinement_against_opencv(rng, shape):
    """The device's variational refinement solves OpenCV's discretisation: from
    the same start, both fields agree (they differ only in how the warp samples:
    floating point here, 1/32 px steps in cv2.remap)."""
    import cupy

    dev = importlib.import_module("vision_cuts._optical_flow_gpu")
    g0 = cv2.GaussianBlur((rng.random(shape) * 255).astype(np.uint8), (0, 0), 2.0)
    g1 = _shifted(g0, 1.3, -0.7)
    start = np.zeros((*shape, 2), np.float32)
    start[..., 0] = 1.0  # part of the way
    want = start.copy()
    vr = cv2.VariationalRefinement_create()
    vr.setFixedPointIterations(5)
    vr.setSorIterations(5)
    vr.calc(g0, g1, want)
    got = dev.variational(
        cupy.asarray(g0, dtype=cupy.float32),
        cupy.asarray(g1, dtype=cupy.float32),
        cupy.asarray(start),
    ).get()
    diff = np.abs(got - want)[4:-4, 4:-4]
    assert float(diff.mean()) < 0.02
    assert float(np.quantile(diff, 0.99)) < 0.15
    # and it moves the flow towards the truth as far as OpenCV's does (5 x 5
    # iterations from a smooth start move it only a little, on both)
    truth = np.array([1.3, -0.7], np.float32)
    err = lambda f: float(np.linalg.norm(f - truth, axis=2)[8:-8, 8:-8].mean())  # noqa: E731
    assert err(got) < err(start) - 0.01
    assert err(got) <= err(want) + 0.01


@pytest.mark.gpu
def test_device_variational_graph_replays_equal_launches(rng, monkeypatch):
    """The refinement replays a CUDA graph of its launches on buffers of its own:
    every replay, with new inputs of each size in turn, equals the launches one by
    one bit for bit, and a returned field is not changed by later calls."""
    import cupy

    dev = importlib.import_module("vision_cuts._optical_flow_gpu")
    cases = []
    for shape in [(61, 83), (96, 128), (61, 83)]:
        for _ in range(2):
            g0 = cv2.GaussianBlur((rng.random(shape) * 255).astype(np.uint8), (0, 0), 2)
            g1 = _shifted(g0, rng.uniform(-2, 2), rng.uniform(-2, 2))
            start = rng.normal(scale=0.5, size=(*shape, 2)).astype(np.float32)
            cases.append(tuple(cupy.asarray(a, dtype=cupy.float32) for a in (g0, g1)))
            cases[-1] += (cupy.asarray(start),)

    def run_all():
        monkeypatch.setattr(dev._plans, "by_key", {})
        outs = [dev.variational(*c) for c in cases]
        return outs, [o.get() for o in outs]

    monkeypatch.setattr(dev, "_GRAPHS", False)
    _, want = run_all()
    monkeypatch.setattr(dev, "_GRAPHS", True)
    outs, got = run_all()
    plans = list(dev._plans.by_key.values())
    assert len(plans) == 2 and all(p.graph is not None for p in plans)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    # the first results, read again after every later call, are unchanged
    for o, g in zip(outs, got, strict=True):
        np.testing.assert_array_equal(o.get(), g)
    with pytest.raises(ValueError, match="variational"):
        dev.variational(cases[0][0], cases[2][1], cases[0][2])


@pytest.mark.gpu
@pytest.mark.parametrize("channels", [1, 3])
def test_device_lucas_kanade_against_opencv(rng, channels):
    """The device's Lucas-Kanade refinement tracks as cv2.calcOpticalFlowPyrLK
    (single level, 15 x 15) does: the same points, within float rounding of
    OpenCV's fixed-point sampling, and the same forward-backward verdicts."""
    import cupy

    dev = importlib.import_module("vision_cuts._optical_flow_gpu")
    f0 = _texture(rng, (150, 190))
    if channels == 1:
        f0 = cv2.cvtColor(f0, cv2.COLOR_RGB2GRAY)
    f1 = _shifted(f0, 2.3, -1.6)
    pts = np.column_stack(
        [rng.integers(0, 190, 400), rng.integers(0, 150, 400)]
    ).astype(np.float32)
    seeds = (
        pts + np.float32([2.0, -2.0]) + rng.normal(0, 0.3, pts.shape).astype(np.float32)
    )
    want, ok_want = flow_mod._refine(f0, f1, pts, seeds)
    got, ok_got = dev.refine(
        dev.upload_frame(f0),
        dev.upload_frame(f1),
        cupy.asarray(pts),
        cupy.asarray(seeds),
        15,
        flow_mod._LK_MAX_SHIFT,
        flow_mod._FB_MAX_ERROR,
    )
    got, ok_got = got.get(), ok_got.get()
    both = ok_want & ok_got
    assert both.sum() >= 0.9 * ok_want.sum() > 200
    assert (ok_want != ok_got).mean() < 0.05
    assert float(np.median(np.abs(got[both] - want[both]))) < 0.01
    inner = both & (pts[:, 0] > 12) & (pts[:, 0] < 178) & (pts[:, 1] > 12)
    inner &= pts[:, 1] < 138
    err = np.abs(got[inner] - pts[inner] - [2.3, -1.6])
    assert float(np.median(err)) < 0.05


@pytest.mark.gpu
def test_dense_backends_agree(rng):
    """Dense flow on the device (interpolation, variational refinement, fusion)
    against the CPU pipeline on a translated texture."""
    big = _texture(rng, (200, 260))
    f0, f1 = big[20:180, 20:240].copy(), big[18:178, 16:236].copy()  # motion (4, 2)
    cpu = optical_flow(f0, f1, backend="cpu", dense=True).dense
    gpu = optical_flow(f0, f1, backend="gpu", dense=True).dense
    assert isinstance(gpu, np.ndarray) and gpu.shape == cpu.shape
    inner = (slice(12, -12), slice(12, -12))
    err_gpu = np.linalg.norm(gpu - [4.0, 2.0], axis=2)[inner]
    err_cpu = np.linalg.norm(cpu - [4.0, 2.0], axis=2)[inner]
    assert float(np.median(err_gpu)) < 0.05
    assert float(err_gpu.mean()) <= 1.5 * float(err_cpu.mean()) + 0.01


def test_tiled_assignment(pair):
    f0, f1 = pair
    whole = optical_flow(f0, f1, backend="cpu")
    tiled = optical_flow(f0, f1, backend="cpu", tile_size=40)
    assert len(tiled.points) > 0.9 * len(whole.points)
    # one-to-one after the tiles' conflicts are resolved
    heads = np.rint((tiled.points + tiled.vectors) * 8)
    assert len(np.unique(heads, axis=0)) == len(heads)
    assert np.median(np.abs(tiled.vectors - [3.0, 2.0])) < 0.05


def _plain_slots(group, index, size, G):
    """Slot numbering written plainly, group by group: the oracle of ``_slots``
    (each group's distinct columns in ascending order)."""
    cols = [sorted({int(j) for g, j in zip(group, index, strict=True) if g == q})
            for q in range(G)]
    count = np.array([len(c) for c in cols], np.int64)
    ids = np.full((G, int(count.max())), -1, np.int64)
    for q, c in enumerate(cols):
        ids[q, : len(c)] = c
    slot = np.array([cols[g].index(int(j)) for g, j in zip(group, index, strict=True)],
                    np.int64)
    return slot, count, ids


@pytest.mark.parametrize(
    "G, size, pairs", [(1, 7, 30), (5, 40, 60), (300, 50, 900), (2000, 30, 500)]
)
def test_slots_against_a_plain_numbering(rng, G, size, pairs):
    """Repeated pairs, groups without pairs and full groups all numbered as by the
    plain numbering, on both ways of numbering (the last two sizes are sorted)."""
    group = rng.integers(0, G, pairs)
    index = rng.integers(0, size, pairs)
    want = _plain_slots(group, index, size, G)
    got = flow_mod._slots(group, index, size, G)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == np.int64


@pytest.mark.parametrize("radius", [20.0, 4.0])
@pytest.mark.parametrize("tile", [1, 3, 40])
def test_small_tiles_build_the_dense_table_stack(pair, tile, radius):
    """The stacks of small tiles (a group per feature or so) equal those built on
    the plain slot numbering (radius 4 with tiles 1 and 3 numbers the slots by
    sorting), and the flow finds the motion."""
    f0, f1 = pair
    a = flow_mod._detect(cv2.cvtColor(f0, cv2.COLOR_RGB2GRAY), "orb", 300, snap=True)
    b = flow_mod._detect(cv2.cvtColor(f1, cv2.COLOR_RGB2GRAY), "orb", 300, snap=False)
    zero = np.zeros_like(a.points)
    rows, cols, cost = flow_mod._candidates(a, b, zero, radius, 0.2)
    groups = flow_mod._groups(flow_mod._feature_groups(a.points, tile))
    G = len(groups.nrows)
    got = flow_mod._build_stack(rows, cols, cost, groups, len(b.points), 0.3)
    want_slot, want_count, want_ids = _plain_slots(
        groups.gid[rows], cols, len(b.points), G
    )
    np.testing.assert_array_equal(got.ncols, want_count)
    np.testing.assert_array_equal(got.col_ids, want_ids)
    g, r = groups.gid[rows], groups.row_slot[rows]
    np.testing.assert_array_equal(got.costs[g, r, want_slot], cost)
    # the pairs and a dummy per row slot (0 on the padding rows), nothing else
    assert np.isfinite(got.costs).sum() == len(rows) + G * got.row_ids.shape[1]
    flow = optical_flow(f0, f1, backend="cpu", tile_size=tile)
    assert np.median(np.abs(flow.vectors - [3.0, 2.0])) < 0.05


def test_unmatched_threshold_and_radius(pair):
    f0, f1 = pair
    res = optical_flow(f0, f1, backend="cpu", max_cost=1e-4)
    assert len(res.points) == 0
    # motion (3, 2) lies beyond a 2 px search radius: nothing true can be matched
    near = optical_flow(
        f0, f1, backend="cpu", search_radius=2.0, local_passes=0, refine=False
    )
    assert np.hypot(*near.vectors.T).max(initial=0.0) <= 2.0 + 1e-5


def test_textureless_gives_empty_result():
    flat = np.full((64, 80, 3), 128, np.uint8)
    res = optical_flow(flat, flat, backend="cpu", dense=True)
    assert res.points.shape == (0, 2) and res.vectors.shape == (0, 2)
    assert res.costs.shape == (0,)
    assert res.dense.shape == (64, 80, 2)
    assert np.isfinite(res.dense).all() and np.abs(res.dense).max() < 1e-3
    tiny = optical_flow(flat[:3, :3], flat[:3, :3], backend="cpu", dense=True)
    assert len(tiny.points) == 0 and tiny.dense.shape == (3, 3, 2)


def test_callback_reports_every_stage(pair):
    seen = []
    optical_flow(
        *pair,
        backend="cpu",
        dense=True,
        local_passes=1,
        callback=lambda d, t: seen.append((d, t)),
    )
    assert seen == [(i, 5) for i in range(1, 6)]


def test_bad_inputs(pair):
    f0, f1 = pair
    with pytest.raises(ValueError, match="same shape"):
        optical_flow(f0, f1[:-1], backend="cpu")
    with pytest.raises(ValueError, match="frame1 is empty"):
        optical_flow(f0, np.zeros((0, 160, 3), np.uint8), backend="cpu")
    with pytest.raises(TypeError, match="frame0 must be an image array, got None"):
        optical_flow(None, f1, backend="cpu")
    with pytest.raises(TypeError, match="frame1 must have a real numeric dtype"):
        optical_flow(f0, f1.astype(complex), backend="cpu")
    with pytest.raises(ValueError, match=r"frame0 must be a \(M, N\) grey"):
        optical_flow(f0[..., :2], f1[..., :2], backend="cpu")
    nan = f0.astype(np.float32)
    nan[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="frame0 contains NaN"):
        optical_flow(nan, f1, backend="cpu")
    with pytest.raises(ValueError, match="detector must be one of"):
        optical_flow(f0, f1, detector="surf", backend="cpu")
    with pytest.raises(ValueError, match="backend must be one of"):
        optical_flow(f0, f1, backend="cuda")
    with pytest.raises(ValueError, match=r"max_features must be an integer in \[1, "):
        optical_flow(f0, f1, max_features=0, backend="cpu")
    with pytest.raises(TypeError, match="search_radius must be a number"):
        optical_flow(f0, f1, search_radius="far", backend="cpu")
    for passes in (-1, 10**30):
        with pytest.raises(ValueError, match=r"local_passes must be an integer in "
                           r"\[0, 64\]"):
            optical_flow(f0, f1, local_passes=passes, backend="cpu")
    with pytest.raises(ValueError, match=r"displacement_weight must be a finite number "
                       r"> 0 and <= 1000000"):
        optical_flow(f0, f1, displacement_weight=1e308, backend="cpu")
    with pytest.raises(TypeError, match="callback must be callable"):
        optical_flow(f0, f1, callback=3, backend="cpu")


def _overshoot(img: np.ndarray, top: float = 1.02) -> np.ndarray:
    """``img`` in [0, 1] with one value above 1 (``top``), as interpolation leaves
    it."""
    out = img.astype(np.float32) / 255.0
    out[0, 0, 0] = top
    return out


def _far_overshoot(img: np.ndarray) -> np.ndarray:
    return _overshoot(img, 2.0)


@pytest.mark.parametrize(
    ("make0", "make1", "words"),
    [
        # a value beyond the overshoot a resampling filter leaves: another scale
        (lambda f: f / 255.0, _far_overshoot, "frame1 has values up to 2,"),
        (_far_overshoot, lambda f: f / 255.0, "frame1 lies in [0, 1] (largest"),
        (lambda f: f.astype(np.float32), lambda f: f / 255.0, "frame1 lies in [0, 1]"),
        (lambda f: f / 255.0, lambda f: f.astype(np.float64), "frame1 has values up"),
    ],
)  # fmt: skip
def test_float_frames_on_two_scales(pair, make0, make1, words):
    f0, f1 = pair
    with pytest.raises(ValueError, match=re.escape(words)) as info:
        optical_flow(make0(f0), make1(f1), backend="cpu")
    assert "frame0" in str(info.value) and "[0, 255]" in str(info.value)


def test_float_overshoot_keeps_the_unit_scale(pair):
    """A [0, 1] frame with one value a little above 1 (an interpolation's overshoot)
    is still read on the [0, 1] scale: the same flow as the frame clipped to 1."""
    f0, f1 = pair
    for top in (1.0001, 1.02, 1.5):
        clipped = np.minimum(_overshoot(f1, top), 1.0)
        ref = optical_flow(f0 / 255.0, clipped, backend="cpu", refine=False)
        got = optical_flow(f0 / 255.0, _overshoot(f1, top), backend="cpu", refine=False)
        assert len(ref.points) > 100
        np.testing.assert_array_equal(got.points, ref.points)
        np.testing.assert_array_equal(got.vectors, ref.vectors)


def test_float_frames_read_on_one_scale(pair):
    """Float frames in [0, 1] are scaled by 255, others taken as grey levels, the
    same for both frames; integer frames are grey levels whatever the other is."""
    f0, f1 = pair
    ref = optical_flow(f0, f1, backend="cpu", refine=False)
    assert len(ref.points) > 100
    for a, b in [
        (f0 / 255.0, (f1 / 255.0).astype(np.float32)),
        (f0.astype(np.float32), f1.astype(np.float64)),
        (f0, f1 / 255.0),
        (f0 / 255.0, f1),
    ]:
        res = optical_flow(a, b, backend="cpu", refine=False)
        np.testing.assert_array_equal(res.points, ref.points)
        np.testing.assert_array_equal(res.vectors, ref.vectors)
    # a black frame (no value above 0) is black on either scale: no error
    black = np.zeros(f0.shape, np.float32)
    for other in (f1 / 255.0, f1.astype(np.float32)):
        assert len(optical_flow(black, other, backend="cpu").points) == 0
        assert len(optical_flow(other, black, backend="cpu").points) == 0


def test_frames_float_scale_is_decided_once(pair):
    from vision_cuts import optical_flow_frames

    f0, f1 = pair
    black = np.zeros(f0.shape, np.float32)
    unit = list(optical_flow_frames([black, f0 / 255.0, f1 / 255.0], backend="cpu"))
    ref = optical_flow(f0, f1, backend="cpu")
    np.testing.assert_array_equal(unit[1].vectors, ref.vectors)
    mixed = [black, f0 / 255.0, f1 / 255.0, f1.astype(np.float32)]
    words = r"frames\[3\] has values up to .* the range \[0, 1\] of frames\[1\]"
    with pytest.raises(ValueError, match=words):
        list(optical_flow_frames(mixed, backend="cpu"))


def test_bool_frames_are_black_and_white(pair):
    g0, g1 = (cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) > 128 for f in pair)
    res = optical_flow(g0, g1, backend="cpu", refine=False)
    b0, b1 = g0.astype(np.uint8) * 255, g1.astype(np.uint8) * 255
    ref = optical_flow(b0, b1, backend="cpu", refine=False)
    assert len(ref.points) > 10
    np.testing.assert_array_equal(res.points, ref.points)
    np.testing.assert_array_equal(res.vectors, ref.vectors)


def test_masked_and_ragged_frames(pair):
    from vision_cuts import optical_flow_frames

    f0, f1 = pair
    masked = np.ma.masked_array(f1, mask=np.zeros(f1.shape, bool))
    with pytest.raises(TypeError, match="frame1 must be a plain array, got a masked"):
        optical_flow(f0, masked, backend="cpu")
    with pytest.raises(ValueError, match=r"frame0 must be a regular \(rectangular\)"):
        optical_flow([[1, 2], [3]], f1, backend="cpu")
    with pytest.raises(TypeError, match=r"frames\[1\] must be a plain array"):
        list(optical_flow_frames([f0, masked], backend="cpu"))


@pytest.mark.parametrize("radius", [1e-300, 1e-3])
def test_tiny_radius_keeps_the_exact_matches(pair, radius):
    """Identical frames: a feature of frame0 (moved to its pixel centre) that
    coincides with one of frame1 has an exact (0 px) match within any radius, and
    the search grid stays small however small the radius."""
    f0 = pair[0]
    grey = cv2.cvtColor(f0, cv2.COLOR_RGB2GRAY)
    a = flow_mod._detect(grey, "fast-brief", 3000, snap=True)
    b = flow_mod._detect(grey, "fast-brief", 3000, snap=False)
    exact = {tuple(p) for p in b.points.tolist()}
    coincide = sum(tuple(p) in exact for p in a.points.tolist())
    res = optical_flow(
        f0, f0, backend="cpu", search_radius=radius, local_radius=radius, refine=False
    )
    assert len(res.points) == coincide > 100
    assert (res.vectors == 0).all()


@pytest.mark.parametrize("detector", ["orb", "sift"])
def test_max_features_beyond_the_pixels(pair, detector):
    """OpenCV is asked for no more keypoints than it can find: a request of
    2**29 features detects what a request of one per pixel does."""
    grey = cv2.cvtColor(pair[0], cv2.COLOR_RGB2GRAY)
    huge = flow_mod._features(grey, detector, 2**29)
    per_pixel = flow_mod._features(grey, detector, grey.size)
    np.testing.assert_array_equal(huge.points, per_pixel.points)
    res = optical_flow(
        *pair, backend="cpu", detector=detector, max_features=2**31 - 1, refine=False
    )
    assert len(res.points) > 30
    with pytest.raises(ValueError, match=r"max_features must be an integer in \[1, "):
        optical_flow(*pair, backend="cpu", max_features=2**31)


def test_huge_max_cost_keeps_the_optimum(pair):
    """Past ``(n + 1) * (1 + displacement_weight)`` the dummy cost no longer changes
    the optimum: a huge ``max_cost`` gives the result of a moderate one (float64 alone
    cannot tell the pair costs apart next to 1e16)."""
    ref = optical_flow(*pair, backend="cpu", max_cost=10.0, refine=False)
    assert np.abs(np.median(ref.vectors, axis=0) - [3.0, 2.0]).max() < 0.05
    for max_cost in (1e16, 1e300):
        res = optical_flow(*pair, backend="cpu", max_cost=max_cost, refine=False)
        np.testing.assert_array_equal(res.points, ref.points)
        np.testing.assert_array_equal(res.vectors, ref.vectors)
        np.testing.assert_array_equal(res.costs, ref.costs)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("dense", "no"),
        ("dense", None),
        ("dense", "0"),
        ("refine", "no"),
        ("refine", 2),
        ("warm_start", "no"),
    ],
)
def test_flags_must_be_true_or_false(pair, name, value):
    from vision_cuts import optical_flow_frames

    if name != "warm_start":
        with pytest.raises(TypeError, match=f"{name} must be True or False, got"):
            optical_flow(*pair, backend="cpu", **{name: value})
    with pytest.raises(TypeError, match=f"{name} must be True or False, got"):
        next(optical_flow_frames(list(pair), backend="cpu", **{name: value}))


def test_explicit_gpu_without_device(pair, monkeypatch):
    from vision_cuts import _backend

    if _backend.gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(BackendUnavailableError):
        optical_flow(*pair, backend="gpu")


def test_sift_detector(pair):
    res = optical_flow(*pair, backend="cpu", detector="sift")
    assert len(res.points) > 30
    assert np.median(np.abs(res.vectors - [3.0, 2.0])) < 0.05


@pytest.mark.gpu
def test_backends_agree(pair):
    cpu = optical_flow(*pair, backend="cpu")
    gpu = optical_flow(*pair, backend="gpu")
    # float costs: equal optimal totals up to the GPU solver's quantisation; ties
    # may pick other pairs, so compare the outcome, not the pairs
    assert abs(len(gpu.points) - len(cpu.points)) <= 0.02 * len(cpu.points)
    np.testing.assert_allclose(
        np.median(gpu.vectors, axis=0), np.median(cpu.vectors, axis=0), atol=0.02
    )


# ----------------------------------------------------------------------- pictures
def test_flow_to_color_reference_values():
    flow = np.array([[[1, 0], [-1, 0], [0, 0], [np.nan, 0], [2e9, 0], [2, 0]]], float)
    rgb = flow_to_color(flow, max_magnitude=1.0)
    assert rgb.shape == (1, 6, 3) and rgb.dtype == np.uint8
    # Middlebury wheel: right = red, left = wheel colour 27 (0, 209, 255), zero =
    # white, unknown = black, beyond max_magnitude darkened by 0.75
    np.testing.assert_array_equal(rgb[0, 0], [255, 0, 0])
    np.testing.assert_array_equal(rgb[0, 1], [0, 209, 255])
    np.testing.assert_array_equal(rgb[0, 2], [255, 255, 255])
    np.testing.assert_array_equal(rgb[0, 3], [0, 0, 0])
    np.testing.assert_array_equal(rgb[0, 4], [0, 0, 0])
    np.testing.assert_array_equal(rgb[0, 5], [191, 0, 0])
    # default scale: the largest known magnitude saturates
    auto = flow_to_color(flow[:, [0, 5]])
    np.testing.assert_array_equal(auto[0, 1], [255, 0, 0])
    np.testing.assert_array_equal(auto[0, 0], [255, 127, 127])
    with pytest.raises(ValueError, match=r"flow must have shape \(M, N, 2\)"):
        flow_to_color(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="max_magnitude must be a finite number > 0"):
        flow_to_color(flow, max_magnitude=0)


def test_draw_flow_arrows():
    img = np.zeros((40, 50), np.uint8)
    out = draw_flow_arrows(
        img, np.array([[5.0, 20.0]]), np.array([[30.0, 0.0]]), color=(255, 0, 0)
    )
    assert out.shape == (40, 50, 3) and out.dtype == np.uint8
    assert (img == 0).all()  # input untouched
    line = out[20, 8:33]
    assert (line[:, 0] > 100).all() and (line[:, 1:] == 0).all()
    assert out[:, :, 0].sum() > 0 and out[5:15].sum() == 0
    wheel = draw_flow_arrows(
        np.zeros((40, 50, 3), np.uint8),
        np.array([[40.0, 5.0]]),
        np.array([[-30.0, 0.0]]),
        color=None,
        scale=1.0,
    )
    assert wheel[5, 20, 1] > 100 and wheel[5, 20, 0] == 0  # leftward = cyan
    empty = draw_flow_arrows(img, np.zeros((0, 2)), np.zeros((0, 2)))
    assert empty.shape == (40, 50, 3)
    with pytest.raises(ValueError, match="points and vectors must both"):
        draw_flow_arrows(img, np.zeros((3, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        draw_flow_arrows(img, np.zeros((1, 2)), np.zeros((1, 2)), scale=0)


def test_flow_to_color_bad_inputs():
    flow = np.ones((1, 2, 2))
    masked = np.ma.masked_array(flow, mask=[[[True, True], [False, False]]])
    with pytest.raises(TypeError, match="flow must be a plain array, got a masked"):
        flow_to_color(masked)
    with pytest.raises(ValueError, match=r"flow must be a regular \(rectangular\)"):
        flow_to_color([[[1, 0], [0]]])
    for bad in ("5", "abc", [1, 2], True):
        with pytest.raises(TypeError, match="max_magnitude must be a number, got"):
            flow_to_color(flow, max_magnitude=bad)
    with pytest.raises(ValueError, match="max_magnitude must be a finite number > 0"):
        flow_to_color(flow, max_magnitude=float("nan"))
    np.testing.assert_array_equal(
        flow_to_color(flow, max_magnitude=np.float32(2.0)), flow_to_color(flow, 2)
    )
    with pytest.raises(TypeError, match="flow must be a numeric array, got None"):
        flow_to_color(None)


def test_flow_to_color_honours_a_tiny_max_magnitude():
    """Any positive ``max_magnitude`` is the magnitude drawn at full saturation (it
    was raised to 1e-9, drawing a flow of 1e-12 almost white), and so is the largest
    magnitude by default; a field without motion is white."""
    full = flow_to_color(np.array([[[1.0, 0.0]]]))
    assert full.tolist() == [[[255, 0, 0]]]
    for tiny in (1e-12, 1e-300):
        flow = np.array([[[tiny, 0.0]]])
        np.testing.assert_array_equal(flow_to_color(flow), full)
        np.testing.assert_array_equal(flow_to_color(flow, max_magnitude=tiny), full)
    beyond = flow_to_color(np.full((1, 1, 2), 1.0), max_magnitude=1e-300)
    np.testing.assert_array_equal(beyond, flow_to_color(np.full((1, 1, 2), 3.0), 1.0))
    np.testing.assert_array_equal(flow_to_color(np.zeros((2, 2, 2))), 255)


@pytest.mark.parametrize(
    ("image", "value"),
    [
        (np.full((4, 4), 300, np.uint16), 255),  # integers are clipped, not wrapped
        (np.full((4, 4), -1, np.int64), 0),
        (np.ones((4, 4), bool), 255),
        (np.full((4, 4, 1), 77, np.int32), 77),
        (np.full((4, 4), 0.5), 127),  # floats in [0, 1] are scaled by 255
        (np.full((4, 4), 300.0), 255),
    ],
)
def test_draw_flow_arrows_image_dtypes(image, value):
    out = draw_flow_arrows(image, np.zeros((0, 2)), np.zeros((0, 2)))
    assert out.shape == (4, 4, 3) and out.dtype == np.uint8
    assert (out == value).all()


@pytest.mark.parametrize(
    "image",
    [np.ones((4, 4), complex), np.ones((4, 4), object), np.full((4, 4), "a")],
)
def test_draw_flow_arrows_non_numeric_image(image):
    with pytest.raises(TypeError, match="image must have a real numeric dtype"):
        draw_flow_arrows(image, np.zeros((0, 2)), np.zeros((0, 2)))


def test_draw_flow_arrows_far_ends():
    """Arrows are cut at a margin outside the image: far ends draw what a nearer end
    in the same direction draws, up to the border."""
    img = np.zeros((40, 50), np.uint8)
    tail = np.array([[5.0, 20.0]])
    near = draw_flow_arrows(img, tail, np.array([[1000.0, 0.0]]), color=(255, 0, 0))
    assert (near[20, 8:50, 0] > 100).all() and (near[..., 1:] == 0).all()
    for vec, scale in [([[1e12, 0.0]], 1.0), ([[1.0, 0.0]], 1e300), ([[3e9, 0.0]], 7)]:
        far = draw_flow_arrows(img, tail, np.array(vec), color=(255, 0, 0), scale=scale)
        np.testing.assert_array_equal(far, near)
    # from far outside into the image: the line enters at the border
    start, vec = np.array([[-1e12, 20.0]]), np.array([[1e12 + 25.0, 0.0]])
    into = draw_flow_arrows(img, start, vec, color=(255, 0, 0))
    assert (into[20, 0:20, 0] > 100).all() and into[20, 35:, 0].max() == 0
    # wholly outside: nothing drawn
    away = draw_flow_arrows(img, np.array([[3e9, 5.0]]), np.array([[3.0, 1.0]]))
    assert away.max() == 0
    empty = draw_flow_arrows(np.zeros((0, 0, 3), np.uint8), tail, np.ones((1, 2)))
    assert empty.shape == (0, 0, 3)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"thickness": 0}, ValueError, r"thickness must be an integer in \[1, 32767\]"),
        ({"thickness": -1}, ValueError, "thickness must be an integer in"),
        ({"thickness": 10**6}, ValueError, "thickness must be an integer in"),
        ({"thickness": 2**40}, ValueError, "thickness must be an integer in"),
        ({"thickness": 1.7}, TypeError, "thickness must be an integer, got 1.7"),
        ({"thickness": None}, TypeError, "thickness must be an integer, got None"),
        ({"thickness": float("nan")}, TypeError, "thickness must be an integer"),
        ({"scale": "2"}, TypeError, "scale must be a number, got '2'"),
        ({"scale": None}, TypeError, "scale must be a number, got None"),
        ({"scale": float("inf")}, ValueError, "scale must be a finite number > 0"),
        ({"color": (0, 255)}, ValueError, r"color must have 3 values \(r, g, b\)"),
        ({"color": "red"}, TypeError, r"color must be an \(r, g, b\) tuple"),
        ({"color": 5}, TypeError, r"color must be an \(r, g, b\) tuple"),
        ({"color": (float("nan"), 0, 0)}, ValueError, r"color\[0\] must be a finite"),
        ({"color": (0, 300, 0)}, ValueError, r"color\[1\] must be a finite number"),
        ({"color": (0, 0, "x")}, TypeError, r"color\[2\] must be a number"),
    ],
)
def test_draw_flow_arrows_bad_options(kwargs, error, words):
    img = np.zeros((20, 30, 3), np.uint8)
    with pytest.raises(error, match=words):
        draw_flow_arrows(img, np.array([[5.0, 5.0]]), np.array([[3.0, 1.0]]), **kwargs)


def test_draw_flow_arrows_bad_arrays():
    img = np.zeros((20, 30, 3), np.uint8)
    one = np.ones((1, 2))
    with pytest.raises(TypeError, match="points must have a real numeric dtype"):
        draw_flow_arrows(img, np.array([["a", "b"]]), one)
    with pytest.raises(TypeError, match="vectors must be a plain array, got a masked"):
        draw_flow_arrows(img, one, np.ma.masked_array(one))
    with pytest.raises(ValueError, match=r"image must be a regular \(rectangular\)"):
        draw_flow_arrows([[1, 2], [3]], one, one)


# ----------------------------------------------------------------------- .flo files
def test_flo_round_trip(tmp_path, rng):
    flow = rng.normal(size=(7, 9, 2)).astype(np.float32)
    flow[2, 3] = np.nan
    path = tmp_path / "x.flo"
    write_flo(path, flow)
    raw = path.read_bytes()
    assert raw[:4] == b"PIEH" and len(raw) == 12 + 7 * 9 * 2 * 4
    back = read_flo(path)
    assert back.shape == (7, 9, 2) and back.dtype == np.float32
    known = ~np.isnan(flow).any(-1)
    np.testing.assert_array_equal(back[known], flow[known])
    assert (back[2, 3] > 1e9).all()  # unknown is stored as a huge value
    nan = read_flo(path, unknown_as_nan=True)
    assert np.isnan(nan[2, 3]).all() and np.isfinite(nan[known]).all()


def test_flo_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match=r"flow must have shape \(M, N, 2\)"):
        write_flo(tmp_path / "a.flo", np.zeros((3, 3)))
    bad = tmp_path / "b.flo"
    bad.write_bytes(b"XXXX" + b"\x00" * 8)
    with pytest.raises(ValueError, match="is not a .flo file"):
        read_flo(bad)
    short = tmp_path / "c.flo"
    short.write_bytes(b"PIEH" + np.array([4, 4], "<i4").tobytes() + b"\x00" * 8)
    with pytest.raises(ValueError, match="expected 32 values"):
        read_flo(short)


# --------------------------------------------------------------------------- frames
@pytest.fixture(scope="module")
def clip():
    from skimage import data

    from vision_cuts.datasets.synthetic import panning_clip

    return panning_clip(data.astronaut(), 7, shape=(240, 320))


def _epe_at_points(res, gt):
    p = res.points.astype(np.int64)
    return float(np.linalg.norm(res.vectors - gt[p[:, 1], p[:, 0]], axis=1).mean())


def test_frames_match_pairwise_calls(clip):
    from vision_cuts import optical_flow_frames

    frames, _ = clip
    cold = list(optical_flow_frames(iter(frames), backend="cpu", warm_start=False))
    assert len(cold) == len(frames) - 1
    for t, res in enumerate(cold):
        ref = optical_flow(frames[t], frames[t + 1], backend="cpu")
        np.testing.assert_array_equal(res.points, ref.points)
        np.testing.assert_array_equal(res.vectors, ref.vectors)


def test_frames_dense_match_pairwise_calls(clip):
    """DIS, started for the next pair while the current one is solved, is that
    pair's: the dense fields equal those of single calls exactly."""
    from vision_cuts import optical_flow_frames

    frames, _ = clip
    got = list(
        optical_flow_frames(frames[:4], backend="cpu", dense=True, warm_start=False)
    )
    assert len(got) == 3
    for t, res in enumerate(got):
        ref = optical_flow(frames[t], frames[t + 1], backend="cpu", dense=True)
        np.testing.assert_array_equal(res.dense, ref.dense)


def test_frames_warm_start_against_the_true_motion(clip):
    from vision_cuts import optical_flow_frames

    frames, flows = clip
    warm = list(optical_flow_frames(frames, backend="cpu", dense=True))
    cold = list(optical_flow_frames(frames, backend="cpu", warm_start=False))
    assert len(warm) == len(flows)
    for w, c, gt in zip(warm, cold, flows, strict=True):
        assert _epe_at_points(w, gt) < 0.15
        assert len(w.points) >= 0.9 * len(c.points) > 100
        assert w.dense.shape == gt.shape
        assert float(np.linalg.norm(w.dense - gt, axis=2)[8:-8, 8:-8].mean()) < 0.5


def test_frames_bad_input(clip):
    from vision_cuts import optical_flow_frames

    frames, _ = clip
    assert list(optical_flow_frames([], backend="cpu")) == []
    assert list(optical_flow_frames(frames[:1], backend="cpu")) == []
    bad = list(frames[:3]) + [frames[3].astype(np.float64) * np.nan] + list(frames[4:])
    gen = optical_flow_frames(bad, backend="cpu")
    with pytest.raises(ValueError, match=r"frames\[3\]"):
        list(gen)
    small = list(frames[:2]) + [frames[2][:100]]
    with pytest.raises(ValueError, match=r"frames\[2\] must have the shape"):
        list(optical_flow_frames(small, backend="cpu"))
    with pytest.raises(ValueError, match="detector"):
        next(optical_flow_frames(frames, detector="nope"))


def test_frames_none_is_not_the_end(pair):
    """None is a bad frame (named), not the end of the sequence; ``frames`` must be
    iterable."""
    from vision_cuts import optical_flow_frames

    f0, f1 = (f[:48, :64] for f in pair)
    with pytest.raises(TypeError, match=r"frames\[2\] must be an image array, got"):
        list(optical_flow_frames([f0, f1, None, f0], backend="cpu"))
    with pytest.raises(TypeError, match=r"frames\[0\] must be an image array, got"):
        list(optical_flow_frames([None, f1, f0], backend="cpu"))
    for bad in (None, 5):
        with pytest.raises(TypeError, match="frames must be an iterable of image"):
            next(optical_flow_frames(bad, backend="cpu"))


@pytest.mark.gpu
def test_frames_on_the_device(clip):
    """The video pipeline on the device (warm start and dense stages there) against
    the true motion and the CPU's matches; CuPy frames give CuPy results."""
    import cupy

    from vision_cuts import optical_flow_frames

    frames, flows = clip
    gpu = list(optical_flow_frames(frames, backend="gpu", dense=True))
    cpu = list(optical_flow_frames(frames, backend="cpu"))
    assert len(gpu) == len(flows)
    for g, c, gt in zip(gpu, cpu, flows, strict=True):
        assert _epe_at_points(g, gt) < 0.15
        assert abs(len(g.points) - len(c.points)) <= 0.05 * len(c.points)
        assert float(np.linalg.norm(g.dense - gt, axis=2)[8:-8, 8:-8].mean()) < 0.5
    on_device = next(optical_flow_frames([cupy.asarray(f) for f in frames[:2]]))
    assert isinstance(on_device.points, cupy.ndarray)
    assert isinstance(on_device.vectors, cupy.ndarray)


@pytest.mark.gpu
def test_device_edge_cases(rng):
    """The device pipeline on what users also pass: textureless, tiny, grey, float
    and SIFT frames, a few features only, a full-HD pair."""
    flat = np.full((64, 80, 3), 128, np.uint8)
    res = optical_flow(flat, flat, backend="gpu", dense=True)
    assert res.points.shape == (0, 2) and res.dense.shape == (64, 80, 2)
    assert np.isfinite(res.dense).all() and np.abs(res.dense).max() < 1e-3
    tiny = optical_flow(flat[:3, :3], flat[:3, :3], backend="gpu", dense=True)
    assert len(tiny.points) == 0 and tiny.dense.shape == (3, 3, 2)
    img = _texture(rng, (120, 160))
    moved = _shifted(img, 1.6, -0.7)
    for a, b in [
        (img, moved),
        (
            cv2.cvtColor(img, cv2.COLOR_RGB2GRAY),
            cv2.cvtColor(moved, cv2.COLOR_RGB2GRAY),
        ),
        (img / 255.0, moved / 255.0),
    ]:
        res = optical_flow(a, b, backend="gpu", dense=True)
        assert len(res.points) > 50
        assert np.abs(np.median(res.vectors, axis=0) - [1.6, -0.7]).max() < 0.05
        core = res.dense[15:-15, 15:-15]
        assert np.abs(core - [1.6, -0.7]).max(-1).mean() < 0.1
    sift = optical_flow(img, moved, backend="gpu", detector="sift")
    assert len(sift.points) > 30
    assert np.abs(np.median(sift.vectors, axis=0) - [1.6, -0.7]).max() < 0.05
    few = optical_flow(img, moved, backend="gpu", max_features=5, dense=True)
    assert len(few.points) <= 5 and few.dense.shape == (120, 160, 2)
    big = _texture(rng, (1100, 1940))
    hd0, hd1 = big[10:1090, 10:1930], big[8:1088, 13:1933]  # motion (-3, 2)
    res = optical_flow(hd0, hd1, backend="gpu", max_features=8000)
    assert len(res.points) > 4000
    assert np.abs(np.median(res.vectors, axis=0) - [-3.0, 2.0]).max() < 0.05


def _kd_groups_reference(points, size):
    """The balanced k-d split written plainly: halve every cell across its longer
    side (stable sort), numbered depth first, lower half first."""
    gid = np.zeros(len(points), np.int64)
    todo, done = [np.arange(len(points))], []
    while todo:
        idx = todo.pop()
        if len(idx) <= size:
            done.append(idx)
            continue
        p = points[idx]
        axis = int(np.ptp(p[:, 1]) > np.ptp(p[:, 0]))
        order = idx[np.argsort(p[:, axis], kind="stable")]
        half = len(idx) // 2
        todo += [order[half:], order[:half]]
    for g, idx in enumerate(done):
        gid[idx] = g
    return gid


def test_feature_groups_against_a_plain_split(rng):
    for trial in range(60):
        n = int(rng.integers(1, 3000))
        size = int(rng.integers(1, 300))
        if trial % 3 == 0:  # many ties
            pts = rng.integers(0, 4, (n, 2)).astype(np.float32)
        elif trial % 3 == 1:  # negative positions (a prediction may give them)
            pts = rng.normal(0, 50, (n, 2)).astype(np.float32)
        else:
            pts = (rng.random((n, 2)) * [640, 480]).astype(np.float32)
        got = flow_mod._feature_groups(pts, None, size)
        np.testing.assert_array_equal(got, _kd_groups_reference(pts, size))
        assert np.bincount(got).max() <= size


def test_local_passes_end_once_nothing_changes(pair, monkeypatch):
    """Passes after one that changes no match repeat it: they end there (the
    assignments are counted), and the progress still reaches its total."""
    import importlib

    module = importlib.import_module("vision_cuts.optical_flow")  # not the function
    calls = []
    assign = module._Matcher.assign
    monkeypatch.setattr(module._Matcher, "assign",
                        lambda self, *a: calls.append(1) or assign(self, *a))
    f0, f1 = pair
    steps = []
    many = optical_flow(f0, f1, backend="cpu", local_passes=64,
                        callback=lambda done, total: steps.append((done, total)))
    assert 2 <= len(calls) <= 5  # the global pass and a few local ones, not 65
    two = optical_flow(f0, f1, backend="cpu", local_passes=2)
    assert np.array_equal(many.points, two.points)
    assert np.array_equal(many.vectors, two.vectors)
    assert steps[-1][0] == steps[-1][1]


def test_frames_from_a_refilled_buffer(pair):
    """A decoder that refills one buffer per frame (as cv2.VideoCapture.read(buf)
    does) gives the same flow as fresh arrays: the frame kept while the next is read
    is a copy."""
    from vision_cuts import optical_flow_frames

    f0, f1 = pair

    def refilled():
        buf = np.empty_like(f0)
        for frame in (f0, f1):
            buf[...] = frame
            yield buf

    fresh = list(optical_flow_frames([f0, f1], backend="cpu"))
    same = list(optical_flow_frames(refilled(), backend="cpu"))
    assert len(fresh) == len(same) == 1
    assert np.array_equal(fresh[0].vectors, same[0].vectors)
    assert np.median(same[0].vectors, axis=0).tolist() == [3.0, 2.0]


def test_pair_and_sequence_agree_on_frame_shapes(pair):
    """RGB with RGBA, or grey with (M, N, 1), is one picture shape once read: the
    sequence took them and the pair refused them. Grey with RGB is refused by both."""
    f0, f1 = pair
    rgba = np.dstack([f1, np.full(f1.shape[:2], 255, np.uint8)])
    want = optical_flow(f0, f1, backend="cpu")
    got = optical_flow(f0, rgba, backend="cpu")
    np.testing.assert_array_equal(got.vectors, want.vectors)
    seq = list(optical_flow_frames([f0, rgba], backend="cpu"))
    np.testing.assert_array_equal(seq[0].vectors, want.vectors)
    grey0, grey1 = f0[..., 0], f1[..., :1]
    assert len(optical_flow(grey0, grey1, backend="cpu").points) > 0
    with pytest.raises(ValueError, match="same shape"):
        optical_flow(grey0, f1, backend="cpu")
    with pytest.raises(ValueError, match="shape of the frames before it"):
        list(optical_flow_frames([grey0, f1], backend="cpu"))
