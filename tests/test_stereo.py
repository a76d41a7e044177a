"""Tests of vision_cuts.stereo: exactness oracles, move optimality, synthetic pairs."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from vision_cuts import stereo_disparity
from vision_cuts.stereo import (
    solve_disparity,
    stereo_cost_volume,
    stereo_energy,
    stereo_weights,
)


def _brute_force(cost, w, kind, trunc=2):
    ndisp, m, n = cost.shape
    best = None
    for flat in itertools.product(range(ndisp), repeat=m * n):
        d = np.array(flat).reshape(m, n)
        e = stereo_energy(cost, w, d, smoothness=kind, truncation=trunc)
        if best is None or e < best:
            best = e
    return best


def _random_problem(rng, ndisp, m, n):
    cost = rng.integers(0, 20, (ndisp, m, n)).astype(np.int32)
    w = rng.integers(0, 8, (2, m, n)).astype(np.int32)
    return cost, w


@pytest.mark.parametrize("shape", [(3, 2, 3), (4, 2, 3), (3, 2, 4), (2, 1, 4)])
def test_ishikawa_equals_brute_force(rng, shape):
    for _ in range(4):
        cost, w = _random_problem(rng, *shape)
        d = solve_disparity(cost, w, method="ishikawa", backend="cpu")
        assert d.shape == shape[1:]
        assert d.min() >= 0 and d.max() < shape[0]
        e = stereo_energy(cost, w, d, smoothness="linear")
        assert e == _brute_force(cost, w, "linear")


def test_ishikawa_cpu_cut_is_watched_and_stops(rng, monkeypatch):
    # with a callback, the CPU's single Ishikawa cut runs on a thread of its own
    # while the callback is called with (0, 1); the same disparities as unwatched
    from _helpers import gate_cpu_search_on_its_stop

    import vision_cuts.stereo as st

    monkeypatch.setattr(st, "_WATCH_S", 0.001)
    cost, w = _random_problem(rng, 12, 60, 70)
    calls = []
    want = solve_disparity(cost, w, method="ishikawa", backend="cpu")
    got = solve_disparity(
        cost,
        w,
        method="ishikawa",
        backend="cpu",
        callback=lambda done, total: calls.append((done, total)),
    )
    np.testing.assert_array_equal(got, want)
    assert calls[-1] == (1, 1) and set(calls[:-1]) <= {(0, 1)}
    # the pyramid's levels: each level's cut reports the levels before it again
    want = solve_disparity(
        cost, w, method="ishikawa_pyramid", label_step=4, backend="cpu"
    )
    calls.clear()
    got = solve_disparity(
        cost,
        w,
        method="ishikawa_pyramid",
        label_step=4,
        backend="cpu",
        callback=lambda done, total: calls.append((done, total)),
    )
    np.testing.assert_array_equal(got, want)
    assert calls[-1] == (3, 3) and set(calls) <= {(0, 3), (1, 3), (2, 3), (3, 3)}
    assert [c for i, c in enumerate(calls) if i == 0 or c != calls[i - 1]] == sorted(
        set(calls)
    )

    # a callback that raises (the GUI's cancel) stops the search: the search starts
    # only once the stop flag is set here, so it must stop, not finish
    class Cancel(Exception):
        pass

    def cancel(done, total):
        raise Cancel

    seen, _ = gate_cpu_search_on_its_stop(monkeypatch)
    with pytest.raises(Cancel):
        solve_disparity(cost, w, method="ishikawa", backend="cpu", callback=cancel)
    with pytest.raises(Cancel):
        solve_disparity(
            cost,
            w,
            method="ishikawa_pyramid",
            label_step=4,
            backend="cpu",
            callback=cancel,
        )
    assert seen == ["stopped", "stopped"]


def _census_bits(gray, radius):
    """Census strings as a (M, N, K) bool array (edge pixels repeated)."""
    m, n = gray.shape
    pad = np.pad(gray, radius, mode="edge")
    bits = []
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            if (dy, dx) != (0, 0):
                nb = pad[radius + dy : radius + dy + m, radius + dx : radius + dx + n]
                bits.append(nb < gray)
    return np.stack(bits, axis=-1)


def _cost_volume_numpy(left, right, ndisp, radius, trunc, weight, window):
    """stereo_cost_volume's formula in whole-array NumPy (float32 (M, N, C) images
    as _check_pair gives them), clipped as the function clips."""
    from scipy import ndimage

    n = left.shape[1]
    cl = _census_bits(left.mean(axis=-1), radius)
    cr = _census_bits(right.mean(axis=-1), radius)
    cost = np.empty((ndisp, *left.shape[:2]), dtype=np.float32)
    for d in range(ndisp):
        idx = np.maximum(np.arange(n) - d, 0)
        ad = np.abs(left - right[:, idx]).mean(axis=-1)
        c = np.minimum(ad, trunc) / trunc
        if weight:
            c = c + weight * np.count_nonzero(cl != cr[:, idx], axis=-1) / cl.shape[-1]
        if window > 1:
            c = ndimage.uniform_filter(c, size=window, mode="nearest")
        cost[d] = c
    return np.clip(cost, 0, 1 + weight)


@pytest.mark.parametrize(
    ("channels", "dtype", "radius", "trunc", "weight", "window"),
    [
        (3, np.uint8, 2, 20.0, 1.0, 3),
        (0, np.uint8, 1, 7.3, 0.37, 1),
        (3, np.float32, 3, 100.0, 2.0, 4),  # sums whose order shows
        (3, np.float32, 1, 300.0, 0.0, 1),
        (1, np.float32, 2, 0.1, 1.0, 2),  # every pixel at the truncation
        (3, np.float64, 4, 255.0, 1.0, 5),  # 80 census bits: two words
        (3, np.uint16, 2, 20.0, 0.0, 3),  # no census: float32 planes
        (4, np.uint8, 5, 33.0, 1.0, 2),  # 120 bits
    ],
)
def test_cpu_cost_volume_is_the_numpy_formula(
    rng, channels, dtype, radius, trunc, weight, window
):
    # the numba planes give the whole-array NumPy formula bit for bit
    from vision_cuts.stereo import _check_pair

    for m, n in ((23, 31), (40, 9), (1, 12)):
        shape = (m, n, channels) if channels else (m, n)
        if dtype != np.float64 and np.dtype(dtype).kind == "f":
            left = rng.random(shape).astype(dtype)
            right = rng.random(shape).astype(dtype)
        else:
            top = 256 if dtype != np.uint16 else 65536
            left = rng.integers(0, top, shape).astype(dtype)
            right = np.roll(left, -2, axis=1)
            right[:, :3] = rng.integers(0, top, right[:, :3].shape)
        ndisp = min(n - 1, 8) + 1
        got = stereo_cost_volume(
            left, right, ndisp - 1, census_radius=radius, ad_truncation=trunc,
            census_weight=weight, window=window, backend="cpu",
        )  # fmt: skip
        lp, rp = _check_pair(left, right, np)
        want = _cost_volume_numpy(lp, rp, ndisp, radius, trunc, weight, window)
        np.testing.assert_array_equal(got, want)


def test_cost_volume_progress_and_cancel(rng, monkeypatch):
    # the CPU volume reports each disparity's plane; with the Ishikawa methods
    # stereo_disparity passes that on as (0, total) now and then, so that a cancel
    # acts while the volume is built
    import vision_cuts.stereo as st

    left, right = _textured_pair(rng, channels=3)
    calls = []
    ref = stereo_cost_volume(left, right, 9, backend="cpu")
    got = stereo_cost_volume(
        left, right, 9, backend="cpu", callback=lambda *a: calls.append(a)
    )
    np.testing.assert_array_equal(got, ref)
    assert calls == [(d, 10) for d in range(1, 11)]
    with pytest.raises(TypeError, match="callback must be callable"):
        stereo_cost_volume(left, right, 9, backend="cpu", callback=3)

    monkeypatch.setattr(st, "_WATCH_S", 0.0)  # every plane reports
    for method, levels in (("ishikawa", 1), ("ishikawa_pyramid", 3)):
        calls.clear()
        stereo_disparity(
            left,
            right,
            max_disparity=9,
            method=method,
            label_step=4 if levels > 1 else None,
            backend="cpu",
            callback=lambda *a: calls.append(a),
        )
        assert calls[:10] == [(0, levels)] * 10 and calls[-1] == (levels, levels)
    # the expansion reports (0, its moves) while the volume is built and once its
    # costs are quantised, then one report a move
    calls.clear()
    stereo_disparity(
        left, right, max_disparity=9, backend="cpu", callback=lambda *a: calls.append(a)
    )
    moves = 10 * 5  # 10 labels, max_cycles 5 (the default)
    assert calls[:11] == [(0, moves)] * 11 and calls[11] == (1, moves)
    assert calls[-1] == (moves, moves)
    for mpc, per_cycle in ((3, 12), (4, 12), (10, 10)):  # groups of equal size
        calls.clear()
        stereo_disparity(
            left, right, max_disparity=9, backend="cpu", moves_per_cut=mpc,
            max_cycles=2, callback=lambda *a: calls.append(a),
        )  # fmt: skip
        assert calls[:10] == [(0, 2 * per_cycle)] * 10
        assert calls[-1] == (2 * per_cycle, 2 * per_cycle)
    monkeypatch.setattr(st, "_WATCH_S", 60.0)  # a short volume: no report
    calls.clear()
    stereo_disparity(
        left, right, max_disparity=9, backend="cpu", callback=lambda *a: calls.append(a)
    )
    assert calls[0] == (1, moves)
    monkeypatch.setattr(st, "_WATCH_S", 0.0)

    class Cancel(Exception):
        pass

    def cancel(done, total):
        raise Cancel

    def never(*args, **kwargs):
        raise AssertionError("the solve ran after a cancel in the cost volume")

    monkeypatch.setattr(st, "solve_disparity", never)
    for method in ("ishikawa", "expansion"):
        with pytest.raises(Cancel):
            stereo_disparity(
                left, right, max_disparity=9, method=method, backend="cpu",
                callback=cancel,
            )  # fmt: skip
    seen = []

    def cancel_after_the_volume(done, total):
        seen.append(done)
        if len(seen) == 11:  # the report after the costs are quantised
            raise Cancel

    with pytest.raises(Cancel):
        stereo_disparity(left, right, max_disparity=9, backend="cpu",
                         callback=cancel_after_the_volume)  # fmt: skip


def test_ishikawa_single_column_is_argmin(rng):
    cost = rng.integers(0, 50, (6, 1, 1)).astype(np.int32)
    d = solve_disparity(
        cost, np.zeros((2, 1, 1), np.int32), method="ishikawa", backend="cpu"
    )
    assert d[0, 0] == int(np.argmin(cost[:, 0, 0]))


@pytest.mark.parametrize("kind", ["potts", "truncated_linear"])
def test_expansion_local_minimum(rng, kind):
    cost, w = _random_problem(rng, 5, 6, 7)
    init_e = stereo_energy(cost, w, np.argmin(cost, axis=0), smoothness=kind)
    d = solve_disparity(
        cost, w, method="expansion", smoothness=kind, max_cycles=50, backend="cpu"
    )
    e = stereo_energy(cost, w, d, smoothness=kind)
    assert e <= init_e
    # one more cycle from the result finds no improving expansion move
    from vision_cuts.stereo import _expansion

    again = _expansion(cost, w, kind, 2, 1, "cpu", init=d)
    assert stereo_energy(cost, w, again, smoothness=kind) == e
    np.testing.assert_array_equal(again, d)


@pytest.mark.parametrize("kind", ["potts", "truncated_linear"])
def test_expansion_within_bound_of_optimum(rng, kind):
    # BVZ 2001: expansion is within 2 (Potts) / 2 max V / min V (truncated linear,
    # here 2 * 2 / 1 = 4) of the optimum
    factor = 2 if kind == "potts" else 4
    for _ in range(5):
        cost, w = _random_problem(rng, 3, 2, 3)
        d = solve_disparity(
            cost, w, method="expansion", smoothness=kind, max_cycles=50, backend="cpu"
        )
        e = stereo_energy(cost, w, d, smoothness=kind)
        opt = _brute_force(cost, w, kind)
        assert opt <= e <= factor * opt


def test_expansion_linear_matches_ishikawa_on_easy_problem(rng):
    cost, w = _random_problem(rng, 4, 2, 2)
    d = solve_disparity(
        cost, w, method="expansion", smoothness="linear", max_cycles=50, backend="cpu"
    )
    exact = solve_disparity(cost, w, method="ishikawa", backend="cpu")
    e = stereo_energy(cost, w, d, smoothness="linear")
    assert e >= stereo_energy(cost, w, exact, smoothness="linear")


def _synthetic_pair(rng, m=40, n=96, back=2, front=6):
    """Two random textures; right = left shifted by a two-plane disparity field.

    Background plane at disparity ``back``, a front-parallel band (own texture) at
    ``front`` in the middle third; the right view is rendered back to front, so the
    band occludes ``front - back`` columns of background on its left.
    """
    bg = rng.integers(0, 256, (m, n + front, 3)).astype(np.float32)
    fg = rng.integers(0, 256, (m, n, 3)).astype(np.float32)
    bg = (bg + np.roll(bg, 1, axis=1)) / 2
    fg = (fg + np.roll(fg, 1, axis=1)) / 2
    disp = np.full((m, n), back, dtype=np.int64)
    band = slice(n // 3, 2 * n // 3)
    disp[:, band] = front
    left = bg[:, :n].copy()
    left[:, band] = fg[:, band]
    # right(x - d) = left(x): background first, then the band on top
    right = bg[:, back : back + n].copy()
    xs = np.arange(n)[band]
    right[:, xs - front] = fg[:, xs]
    return left.astype(np.uint8), right.astype(np.uint8), disp


@pytest.mark.parametrize("method", ["expansion", "ishikawa"])
def test_synthetic_shift_recovered(rng, method):
    left, right, gt = _synthetic_pair(rng)
    d = stereo_disparity(left, right, max_disparity=10, method=method, backend="cpu")
    assert d.dtype == np.float32 and d.shape == gt.shape
    # occluded pixels (uncovered background right of the square) are part of the count
    ok = np.abs(d - gt) <= 1
    assert ok.mean() > 0.95


def test_grey_images_accepted(rng):
    left, right, gt = _synthetic_pair(rng)
    d = stereo_disparity(left.mean(-1), right.mean(-1), max_disparity=10, backend="cpu")
    assert (np.abs(d - gt) <= 1).mean() > 0.9


def test_bad_inputs(rng):
    left = rng.integers(0, 256, (10, 20, 3)).astype(np.uint8)
    with pytest.raises(ValueError, match="same shape"):
        stereo_disparity(left, left[:, :-1], max_disparity=3)
    with pytest.raises(ValueError, match="same shape and channels"):
        stereo_disparity(left, left[..., 0], max_disparity=3)
    for bad in (0, -1, 20, 25):
        with pytest.raises(ValueError, match="max_disparity"):
            stereo_disparity(left, left, max_disparity=bad)
    with pytest.raises(TypeError, match="max_disparity"):
        stereo_disparity(left, left, max_disparity=2.5)
    with pytest.raises(ValueError, match="method"):
        stereo_disparity(left, left, max_disparity=3, method="sgm")
    with pytest.raises(ValueError, match="smoothness"):
        stereo_disparity(
            left, left, max_disparity=3, method="ishikawa", smoothness="potts"
        )
    with pytest.raises(ValueError, match="smoothness"):
        stereo_disparity(left, left, max_disparity=3, smoothness="quadratic")
    with pytest.raises(ValueError, match="backend"):
        stereo_disparity(left, left, max_disparity=3, backend="tpu")
    with pytest.raises(ValueError, match="left must be"):
        stereo_disparity(left[..., :2], left[..., :2], max_disparity=3)


# ------------------------------------------------------------------- loader (data)
@pytest.mark.data
def test_load_all_sets(data_dir):
    from vision_cuts.datasets import middlebury as mb

    for name in mb.stereo_names():
        s = mb.load_stereo(name, data_dir)
        assert s.left.dtype == np.uint8 and s.left.ndim == 3 and s.left.shape[2] == 3
        assert s.right.shape == s.left.shape
        assert s.gt_disparity.dtype == np.float32
        assert s.gt_disparity.shape == s.left.shape[:2]
        assert 0 < s.max_disp < s.left.shape[1]
        unknown = np.isnan(s.gt_disparity).any()
        assert unknown == (name in ("tsukuba", "teddy"))
    s = mb.load_stereo("tsukuba", data_dir)
    assert s.scale == 16 and s.max_disp == 14
    assert np.isnan(s.gt_disparity[0, 0])  # 18-px unknown border


def test_loader_errors(tmp_path, monkeypatch):
    from vision_cuts.datasets import middlebury as mb

    monkeypatch.delenv("VISION_CUTS_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="VISION_CUTS_DATA"):
        mb.load_stereo("tsukuba")
    with pytest.raises(FileNotFoundError, match="middlebury_stereo"):
        mb.load_stereo("tsukuba", tmp_path)
    with pytest.raises(ValueError, match="name"):
        mb.load_stereo("cones", tmp_path)


def test_bad_pixel_rate():
    from vision_cuts.datasets.middlebury import bad_pixel_rate

    gt = np.array([[1.0, 2.0], [np.nan, 4.0]], np.float32)
    assert bad_pixel_rate(gt, gt) == 0.0
    d = np.array([[1.5, 3.5], [0.0, np.nan]], np.float32)
    # known: 3 pixels; bad: 3.5 (err 1.5) and NaN output
    assert bad_pixel_rate(d, gt, 1.0) == pytest.approx(200 / 3)
    assert bad_pixel_rate(np.full_like(gt, -1.0), gt, 10.0) == 100.0


@pytest.mark.data
def test_tsukuba_expansion_bad1(data_dir):
    from vision_cuts.datasets import middlebury as mb

    s = mb.load_stereo("tsukuba", data_dir)
    d = stereo_disparity(s.left, s.right, max_disparity=s.max_disp, backend="cpu")
    assert mb.bad_pixel_rate(d, s.gt_disparity, 1.0) < 10.0


# ---- command line ------------------------------------------------------------------


def test_cli_stereo_outputs(tmp_path, capsys):
    import cv2

    from vision_cuts import cli
    from vision_cuts.io import read_pfm

    rng = np.random.default_rng(5)
    tex = (rng.random((40, 70, 3)) * 255).astype(np.uint8)
    left = tex[:, :60]
    right = tex[:, 4:64]  # left (x, y) = tex (x, y) = right (x - 4, y): disparity 4
    lp, rp = tmp_path / "l.png", tmp_path / "r.png"
    cv2.imwrite(str(lp), left[..., ::-1])
    cv2.imwrite(str(rp), right[..., ::-1])
    pic, pfm, p16 = tmp_path / "d.png", tmp_path / "d.pfm", tmp_path / "d16.png"
    argv = [
        "stereo",
        str(lp),
        str(rp),
        "--max-disparity",
        "8",
        "-o",
        str(pic),
        "--colormap",
        "--pfm",
        str(pfm),
        "--png16",
        str(p16),
        "--backend",
        "cpu",
    ]
    assert cli.main(argv) == 0
    disp = read_pfm(pfm)
    assert disp.shape == (40, 60)
    assert (np.abs(disp[:, 8:] - 4) <= 1).mean() > 0.95
    np.testing.assert_array_equal(
        cv2.imread(str(p16), cv2.IMREAD_UNCHANGED), (disp * 256).astype(np.uint16)
    )
    colour = cv2.imread(str(pic))
    assert colour.shape[0] == 40 and colour.shape[1] > 60  # picture + colour bar
    assert "disparity of a 60x40 pair" in capsys.readouterr().out


def test_cli_stereo_pyramid(tmp_path):
    import cv2

    from vision_cuts import cli
    from vision_cuts.io import read_pfm

    rng = np.random.default_rng(6)
    tex = (rng.random((40, 90, 3)) * 255).astype(np.uint8)
    left, right = tex[:, :80], tex[:, 9:89]  # disparity 9
    lp, rp, pfm = tmp_path / "l.png", tmp_path / "r.png", tmp_path / "d.pfm"
    cv2.imwrite(str(lp), left[..., ::-1])
    cv2.imwrite(str(rp), right[..., ::-1])
    argv = ["stereo", str(lp), str(rp), "--max-disparity", "33", "--method",
            "ishikawa_pyramid", "--pfm", str(pfm), "--backend", "cpu"]  # fmt: skip
    assert cli.main(argv) == 0  # 34 labels: first step 2
    disp = read_pfm(pfm)
    assert (np.abs(disp[:, 33:] - 9) <= 1).mean() > 0.95
    assert cli.main([*argv, "--label-step", "8"]) == 0
    np.testing.assert_array_equal(
        read_pfm(pfm),
        stereo_disparity(
            left, right, max_disparity=33,
            method="ishikawa_pyramid", label_step=8, backend="cpu",
        ),
    )  # fmt: skip
    with pytest.raises(SystemExit, match="--label-step must be a power of two"):
        cli.main([*argv, "--label-step", "3"])
    with pytest.raises(SystemExit, match="--label-step applies to"):
        cli.main([*argv[:5], "--label-step", "2", "--backend", "cpu"])


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["stereo", "camera"], "give LEFT and RIGHT"),
        (["stereo", "motorcycle", "camera"], "takes no RIGHT"),
        (["stereo", "camera", "coffee"], "same shape"),
        (["stereo", "camera", "camera", "--max-disparity", "0"], "max_disparity"),
    ],
)
def test_cli_stereo_errors(argv, match):
    from vision_cuts import cli

    if "--max-disparity" not in argv:
        argv = [*argv, "--max-disparity", "4"]
    with pytest.raises(SystemExit, match=match):
        cli.main(argv)


# ---- the device loop's specification (HostMoves) and the GPU path ------------------


def _random_labels(rng, ndisp, m, n):
    return rng.integers(0, ndisp, (m, n)).astype(np.int32)


@pytest.mark.parametrize("kind", ["potts", "truncated_linear", "linear"])
def test_host_moves_build_is_the_move_energy(rng, kind):
    from vision_cuts._stereo_gpu import HostMoves
    from vision_cuts.stereo import _move_energy

    ndisp, m, n = 5, 4, 6
    cost, w = _random_problem(rng, ndisp, m, n)
    labels = _random_labels(rng, ndisp, m, n)
    groups = np.array([[3, 0, 4]], np.int32)
    stacked = HostMoves(cost, w, kind, 2, groups).build(labels, 0)
    assert stacked.shape == (3 * m, n)
    assert (stacked.edges[[1, 3]] == 0).all()  # all pair terms on the forward arcs
    for b, alpha in enumerate(groups[0]):
        rows = slice(b * m, (b + 1) * m)
        assert (stacked.edges[2][rows][-1] == 0).all()  # no arc between two layers
        ref = _move_energy(
            cost.astype(np.int64), w, labels.astype(np.int64), int(alpha), kind, 2
        )
        offsets = set()
        for _ in range(20):
            x = rng.integers(0, 2, (m, n))
            big = np.zeros((3 * m, n), np.int64)
            big[rows] = x
            offsets.add(stacked.energy(big) - ref.energy(x))
        assert len(offsets) == 1  # the same function of x up to a constant


@pytest.mark.parametrize("kind", ["potts", "truncated_linear", "linear"])
def test_host_moves_mirrored_build_is_the_mirror(rng, kind):
    """``mirror``: terminals exchanged and every arc p -> q moved to q -> p (the
    head's backward plane), layer by layer, nothing else."""
    from vision_cuts._stereo_gpu import HostMoves

    ndisp, m, n = 6, 5, 7
    cost, w = _random_problem(rng, ndisp, m, n)
    labels = _random_labels(rng, ndisp, m, n)
    groups = np.array([[2, 5, 0]], np.int32)
    plain = HostMoves(cost, w, kind, 2, groups).build(labels, 0)
    mirrored = HostMoves(cost, w, kind, 2, groups, mirror=True).build(labels, 0)
    np.testing.assert_array_equal(mirrored.source, plain.sink)
    np.testing.assert_array_equal(mirrored.sink, plain.source)
    e, r = plain.edges.reshape(4, 3, m, n), mirrored.edges.reshape(4, 3, m, n)
    assert (r[[0, 2]] == 0).all()
    np.testing.assert_array_equal(r[1][..., 1:], e[0][..., :-1])
    np.testing.assert_array_equal(r[3][:, 1:], e[2][:, :-1])
    assert (r[1][..., 0] == 0).all() and (r[3][:, 0] == 0).all()


@pytest.mark.parametrize("kind", ["potts", "truncated_linear"])
def test_host_cut_is_the_smallest_optimal_move(rng, kind):
    """Brute force over every move of tiny grids: the host specification's cut, of
    the plain and of the mirrored graph, is the intersection of the optimal moves
    (the smallest, the CPU's move) and has the optimal move energy; the CPU solver's
    own cut of the plain graph would be their union."""
    from vision_cuts import maxflow_grid
    from vision_cuts._stereo_gpu import HostMoves
    from vision_cuts.stereo import _move_energy

    ndisp, m, n = 4, 2, 4
    xs = np.array(
        [[(i >> k) & 1 for k in range(m * n)] for i in range(2 ** (m * n))], np.uint8
    )
    ties = 0
    for _ in range(40):
        cost, w = _random_problem(rng, ndisp, m, n)
        cost //= 4  # small costs: many ties
        labels = _random_labels(rng, ndisp, m, n)
        groups = np.array([[int(rng.integers(0, ndisp))]], np.int32)
        alpha = int(groups[0, 0])
        ref = _move_energy(
            cost.astype(np.int64), w, labels.astype(np.int64), alpha, kind, 2
        )
        energies = np.array([ref.energy(x.reshape(m, n)) for x in xs])
        best = xs[energies == energies.min()].astype(bool)
        # a node labelled alpha moves nowhere: count it either way
        already = (labels == alpha).reshape(-1)
        union, inter = best.any(axis=0) | already, best.all(axis=0) | already
        plain = HostMoves(cost, w, kind, 2, groups).build(labels, 0)
        cpu = maxflow_grid(plain, backend="cpu").labels.astype(bool)
        np.testing.assert_array_equal(cpu.reshape(-1) | already, union)
        ties += int((union != inter).any())
        for mirror in (False, True):
            moves = HostMoves(cost, w, kind, 2, groups, mirror=mirror)
            cut = np.asarray(moves.cut(moves.build(labels, 0))).astype(bool)
            np.testing.assert_array_equal(cut.reshape(-1) | already, inter)
            assert ref.energy(cut.astype(np.uint8)) == energies.min()
    assert ties > 0  # the two rules were told apart


@pytest.mark.parametrize("per_cut", [3, 5])
def test_stacked_moves_on_the_host_reach_a_local_minimum(rng, per_cut):
    """Mirrored stacked moves (the default with several moves a cut): every cycle
    lowers the energy until one finds nothing, and then no exact move improves."""
    cost, w = _random_problem(rng, 7, 9, 11)
    stats = {}
    d = solve_disparity(
        cost, w, max_cycles=50, moves_per_cut=per_cut, stats=stats, backend="cpu"
    )
    assert (np.diff(stats["energies"]) <= 0).all()
    assert stats["energies"][-1] == stats["energies"][-2]
    assert _one_cycle_finds_nothing(cost, w, d, "truncated_linear")


def test_label_groups():
    from vision_cuts._stereo_gpu import label_groups

    assert label_groups(15, 1).ravel().tolist() == list(range(15))
    g = label_groups(15, 4)
    assert g.shape == (4, 4) and g.dtype == np.int32
    assert set(g.ravel().tolist()) == set(range(15))
    assert g[0].tolist() == [0, 4, 8, 12]  # interleaved
    assert label_groups(3, 8).tolist() == [[0, 1, 2]]


def _one_cycle_finds_nothing(cost, w, d, kind):
    from vision_cuts.stereo import _expansion

    e = stereo_energy(cost, w, d, smoothness=kind)
    again = _expansion(cost, w, kind, 2, 1, "cpu", init=np.asarray(d, np.int64))
    return stereo_energy(cost, w, again, smoothness=kind) == e


@pytest.mark.parametrize("per_cut", [1, 3, 5])
@pytest.mark.parametrize("kind", ["potts", "truncated_linear"])
def test_expansion_loop_reaches_a_local_minimum(rng, backend, per_cut, kind):
    cost, w = _random_problem(rng, 5, 6, 7)
    stats = {}
    d = solve_disparity(
        cost,
        w,
        smoothness=kind,
        max_cycles=50,
        backend=backend,
        moves_per_cut=per_cut,
        stats=stats,
    )
    assert isinstance(d, np.ndarray) and d.shape == (6, 7)
    e = stereo_energy(cost, w, d, smoothness=kind)
    assert stats["energies"][0] == stereo_energy(
        cost, w, np.argmin(cost, axis=0), smoothness=kind
    )
    assert stats["energies"][-1] == e
    assert (np.diff(stats["energies"]) <= 0).all()
    assert stats["cycles"] < 50 and stats["energies"][-1] == stats["energies"][-2]
    assert _one_cycle_finds_nothing(cost, w, d, kind)


def test_tol_stops_after_a_small_decrease(rng):
    cost, w = _random_problem(rng, 6, 12, 12)
    full, loose = {}, {}
    solve_disparity(cost, w, backend="cpu", stats=full, max_cycles=50)
    solve_disparity(cost, w, backend="cpu", stats=loose, max_cycles=50, tol=0.5)
    assert loose["cycles"] == 1 < full["cycles"]


def test_default_moves_per_cut_on_the_cpu_is_one(rng):
    cost, w = _random_problem(rng, 4, 6, 6)
    stats = {}
    solve_disparity(cost, w, backend="cpu", stats=stats)
    assert stats["cuts"] == stats["moves"] > 0


def test_solver_bad_inputs(rng):
    cost, w = _random_problem(rng, 3, 4, 5)
    with pytest.raises(ValueError, match="moves_per_cut"):
        solve_disparity(cost, w, moves_per_cut=0, backend="cpu")
    with pytest.raises(ValueError, match="tol"):
        solve_disparity(cost, w, tol=-1.0, backend="cpu")
    with pytest.raises(ValueError, match="weights"):
        solve_disparity(cost, w[:1], backend="cpu")
    with pytest.raises(TypeError, match="integer"):
        solve_disparity(cost.astype(np.float32), w, backend="cpu")
    with pytest.raises(ValueError, match="int32"):
        solve_disparity(cost, w.astype(np.int64) * 2**28, backend="cpu")
    with pytest.raises(ValueError, match="census_radius"):
        stereo_cost_volume(
            np.zeros((5, 9)), np.zeros((5, 9)), 2, census_radius=-1, backend="cpu"
        )


# ---- the Ishikawa pyramid ------------------------------------------------------------


def _window_cost_oracle(cost, base, step, count, w, slope_div=0):
    """The window costs of stereo._window_costs, written directly: (count, M, N), None
    where a label lies outside [0, D). slope_div 0: the mean of the window's costs,
    rounded half up; k > 0: the least of C(d) + round(W |d - l| / k), half up, W the
    sum of the pixel's pair weights."""
    ndisp, m, n = cost.shape
    out = np.empty((count, m, n), dtype=object)
    for r in range(count):
        for y in range(m):
            for x in range(n):
                lab = int(base[y, x]) + r * step
                if not 0 <= lab < ndisp:
                    out[r, y, x] = None
                    continue
                lo, hi = max(0, lab - step // 2), min(ndisp, lab + step // 2 + 1)
                vals = cost[lo:hi, y, x].astype(np.int64)
                if slope_div == 0:
                    out[r, y, x] = (2 * int(vals.sum()) + len(vals)) // (2 * len(vals))
                    continue
                pair = sum(
                    int(w[k, y, x]) if 0 <= yy < m and 0 <= xx < n else 0
                    for k, yy, xx in ((0, y, x + 1), (1, y + 1, x))
                )
                pair += int(w[0, y, x - 1]) if x > 0 else 0
                pair += int(w[1, y - 1, x]) if y > 0 else 0
                out[r, y, x] = min(
                    int(vals[d - lo])
                    + math.floor(
                        Fraction(pair * abs(d - lab), slope_div) + Fraction(1, 2)
                    )
                    for d in range(lo, hi)
                )
    return out


def _window_brute_force(cost, w, base, step, count, slope_div=0):
    """Least energy over every labelling base + r * step (r < count) inside [0, D)."""
    wc = _window_cost_oracle(cost, base, step, count, w, slope_div)
    m, n = base.shape
    best = None
    for flat in itertools.product(range(count), repeat=m * n):
        r = np.array(flat).reshape(m, n)
        if any(wc[r[y, x], y, x] is None for y in range(m) for x in range(n)):
            continue
        d = base + step * r
        e = sum(wc[r[y, x], y, x] for y in range(m) for x in range(n))
        e += int((w[0, :, :-1] * np.abs(d[:, :-1] - d[:, 1:])).sum())
        e += int((w[1, :-1, :] * np.abs(d[:-1, :] - d[1:, :])).sum())
        if best is None or e < best:
            best = e
    return best


def _window_energy(cost, w, base, step, count, d, slope_div=0):
    wc = _window_cost_oracle(cost, base, step, count, w, slope_div)
    r = (d - base) // step
    assert ((d - base) % step == 0).all() and r.min() >= 0 and r.max() < count
    e = sum(wc[r[y, x], y, x] for y in range(d.shape[0]) for x in range(d.shape[1]))
    e += int((w[0, :, :-1] * np.abs(d[:, :-1] - d[:, 1:])).sum())
    e += int((w[1, :-1, :] * np.abs(d[:-1, :] - d[1:, :])).sum())
    return e


def _window_problem(rng, ndisp, m, n, step, count):
    """Costs and weights, and bases that are multiples of (count - 1) * step (so that
    neighbours with different bases are at least that far apart), some of them
    reaching outside [0, D)."""
    cost, w = _random_problem(rng, ndisp, m, n)
    span = (count - 1) * step
    shift = step * (count // 2)
    # every window holds a label inside [0, D); the first and last cross its ends
    base = span * rng.integers(0, (ndisp - 1 + shift) // span + 1, (m, n)) - shift
    return cost, w, base.astype(np.int64)


@pytest.mark.parametrize("slope_div", [0, 4, 3])
def test_window_costs_equal_the_oracle(rng, slope_div):
    from vision_cuts.stereo import _cost_prefix, _window_costs

    for step, count in ((1, 3), (2, 3), (4, 3), (4, 5)):
        cost, w, base = _window_problem(rng, 23, 4, 5, step, count)
        got = _window_costs(*_cost_prefix(cost), base, step, count, w, cost, slope_div)
        want = _window_cost_oracle(cost, base, step, count, w, slope_div)
        inside = want != None  # noqa: E711 (an object array)
        assert inside.any() and (~inside).any()
        np.testing.assert_array_equal(got[inside], want[inside].astype(np.int64))
        assert (got[~inside] > cost.max()).all()


@pytest.mark.parametrize("slope_div", [0, 4, 3])
@pytest.mark.parametrize(
    "ndisp, shape, step, count",
    [
        (7, (2, 3), 1, 3),
        (9, (2, 3), 2, 3),
        (9, (3, 3), 1, 3),
        (13, (2, 2), 2, 4),
        (17, (2, 3), 4, 3),
    ],
)
def test_window_cut_is_the_minimum_over_the_windows(
    rng, ndisp, shape, step, count, slope_div
):
    from vision_cuts.stereo import _window_cut

    for _ in range(4):
        cost, w, base = _window_problem(rng, ndisp, *shape, step, count)
        d = _window_cut(cost, w, base, step, count, "cpu", slope_div=slope_div)
        assert d.min() >= 0 and d.max() < ndisp
        assert _window_energy(
            cost, w, base, step, count, d, slope_div
        ) == _window_brute_force(cost, w, base, step, count, slope_div)


def test_ishikawa_pyramid_levels(rng):
    cost, w = _random_problem(rng, 13, 9, 11)
    exact = solve_disparity(cost, w, method="ishikawa", backend="cpu")
    one = solve_disparity(
        cost, w, method="ishikawa_pyramid", label_step=1, backend="cpu"
    )
    np.testing.assert_array_equal(one, exact)
    e_opt = stereo_energy(cost, w, exact, smoothness="linear")
    for label_step in (2, 4, 8):
        stats, progress = {}, []
        d = solve_disparity(
            cost,
            w,
            method="ishikawa_pyramid",
            label_step=label_step,
            stats=stats,
            backend="cpu",
            callback=lambda done, total, out=progress: out.append((done, total)),
        )
        assert d.shape == (9, 11) and d.min() >= 0 and d.max() < 13
        assert stereo_energy(cost, w, d, smoothness="linear") >= e_opt
        steps = [lv["step"] for lv in stats["levels"]]
        assert progress == [(k + 1, len(steps)) for k in range(len(steps))]
        assert steps == [label_step >> i for i in range(len(steps))] and steps[-1] == 1
        assert [lv["labels"] for lv in stats["levels"]] == [12 // label_step + 1] + [
            3
        ] * (len(steps) - 1)


def test_ishikawa_pyramid_last_level_is_exact_around_its_start(rng, monkeypatch):
    """The pyramid's last cut is the least true energy over {d - 1, d, d + 1} of the
    level before (recorded by wrapping the window cut), labels outside [0, D) left
    out."""
    from vision_cuts import stereo as st

    calls = []
    real = st._window_cut

    def spy(
        cost, w, base, step, count, backend, solver=None, prefix=None, slope_div=0, **kw
    ):
        out = real(cost, w, base, step, count, backend, solver, prefix, slope_div, **kw)
        calls.append((base.copy(), step, count, out.copy(), slope_div))
        return out

    monkeypatch.setattr(st, "_window_cut", spy)
    for _ in range(3):
        calls.clear()
        cost, w = _random_problem(rng, 11, 2, 4)
        d = solve_disparity(
            cost, w, method="ishikawa_pyramid", label_step=2, backend="cpu"
        )
        base, step, count, out, _ = calls[-1]
        assert step == 1 and count == 3
        assert [c[4] for c in calls] == [st.PYRAMID_SLOPE_DIV, 0]
        np.testing.assert_array_equal(out, d)
        np.testing.assert_array_equal(base + 1, calls[0][3])  # around level 1's d
        assert _window_energy(cost, w, base, 1, 3, d) == _window_brute_force(
            cost, w, base, 1, 3
        )
        assert stereo_energy(cost, w, d, smoothness="linear") == _window_energy(
            cost, w, base, 1, 3, d
        )


def test_ishikawa_pyramid_costs_too_large(backend):
    """Costs whose Ishikawa graph does not fit int32 get the exact cut's error, on
    the host and in the device's graph kernel alike."""
    cost = np.zeros((9, 64, 64), np.int32)
    cost[0] = 300_000  # sum of a first layer's capacities >= 2**30
    cost[1] = 300_000
    w = np.ones((2, 64, 64), np.int32)
    for method, kw in (("ishikawa", {}), ("ishikawa_pyramid", {"label_step": 2})):
        with pytest.raises(ValueError, match="too large for the Ishikawa graph"):
            solve_disparity(cost, w, method=method, backend=backend, **kw)


def test_ishikawa_pyramid_default_step():
    from vision_cuts.stereo import _pyramid_step

    assert [_pyramid_step(d, None) for d in (2, 16, 31, 32, 61, 64, 128, 256)] == [
        1,
        1,
        2,
        2,
        4,
        4,
        8,
        16,
    ]


def test_ishikawa_pyramid_errors(rng):
    cost, w = _random_problem(rng, 9, 4, 5)
    for bad in (0, 3, -2, True, 2.0, "4"):
        with pytest.raises(ValueError, match="label_step must be a power of two"):
            solve_disparity(
                cost, w, method="ishikawa_pyramid", label_step=bad, backend="cpu"
            )
    with pytest.raises(ValueError, match="below the number of disparities"):
        solve_disparity(
            cost, w, method="ishikawa_pyramid", label_step=16, backend="cpu"
        )
    with pytest.raises(ValueError, match="label_step applies to"):
        solve_disparity(cost, w, method="expansion", label_step=2, backend="cpu")
    with pytest.raises(ValueError, match="smoothness must be 'linear'"):
        solve_disparity(
            cost, w, method="ishikawa_pyramid", smoothness="potts", backend="cpu"
        )
    left = rng.integers(0, 255, (12, 20, 3)).astype(np.uint8)
    with pytest.raises(ValueError, match="label_step applies to"):
        stereo_disparity(left, left, max_disparity=8, label_step=2, backend="cpu")
    with pytest.raises(ValueError, match="below the number of disparities"):
        stereo_disparity(
            left,
            left,
            max_disparity=8,
            method="ishikawa_pyramid",
            label_step=16,
            backend="cpu",
        )


@pytest.mark.parametrize("method", ["expansion", "ishikawa", "ishikawa_pyramid"])
def test_synthetic_shift_both_backends(rng, backend, method):
    left, right, gt = _synthetic_pair(rng)
    kw = {"label_step": 4} if method == "ishikawa_pyramid" else {}
    d = stereo_disparity(
        left, right, max_disparity=10, method=method, backend=backend, **kw
    )
    assert isinstance(d, np.ndarray) and d.dtype == np.float32 and d.shape == gt.shape
    assert (np.abs(d - gt) <= 1).mean() > 0.95


# ---- GPU only ------------------------------------------------------------------------


def _cupy():
    return pytest.importorskip("cupy")


def _textured_pair(rng, m=37, n=53, channels=3):
    shape = (m, n, channels) if channels else (m, n)
    left = rng.integers(0, 256, shape).astype(np.uint8)
    right = np.roll(left, -3, axis=1)
    right[:, -3:] = rng.integers(0, 256, right[:, -3:].shape)
    return left, right


@pytest.mark.gpu
@pytest.mark.parametrize("channels", [0, 1, 3, 4])
@pytest.mark.parametrize(("radius", "window"), [(2, 3), (1, 1), (3, 4)])
def test_gpu_cost_volume_matches_cpu(rng, channels, radius, window):
    cp = _cupy()
    left, right = _textured_pair(rng, channels=channels)
    kw = dict(census_radius=radius, window=window)
    ref = stereo_cost_volume(left, right, 9, backend="cpu", **kw)
    got = stereo_cost_volume(left, right, 9, backend="gpu", **kw)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6)
    dev = stereo_cost_volume(cp.asarray(left), cp.asarray(right), 9, **kw)
    assert isinstance(dev, cp.ndarray)
    np.testing.assert_array_equal(dev.get(), got)
    qr, qg = np.rint(ref * 100).astype(np.int32), np.rint(got * 100).astype(np.int32)
    assert np.abs(qr - qg).max() <= 1 and (qr != qg).mean() < 1e-3
    with pytest.raises(ValueError, match="census_radius"):
        stereo_cost_volume(left, right, 9, census_radius=4, backend="gpu")
    calls = []
    stereo_cost_volume(
        left, right, 9, backend="gpu", callback=lambda *a: calls.append(a)
    )
    assert calls == [(10, 10)]  # one launch: progress once, at the end


@pytest.mark.gpu
def test_gpu_weights_equal_cpu(rng):
    cp = _cupy()
    from vision_cuts.stereo import stereo_weights

    left, _ = _textured_pair(rng)
    left[:, 10:20] = 7  # flat patch: strong weights
    ref = stereo_weights(left.astype(np.float32), smoothness=0.2)
    got = stereo_weights(cp.asarray(left, dtype=cp.float32), smoothness=0.2)
    np.testing.assert_array_equal(got.get(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("mirror", [False, True])
@pytest.mark.parametrize("kind", ["potts", "truncated_linear", "linear"])
def test_gpu_move_graphs_equal_host(rng, kind, mirror):
    cp = _cupy()
    from vision_cuts._stereo_gpu import DeviceMoves, HostMoves

    cost, w = _random_problem(rng, 6, 9, 13)
    cost[2, 3, 4] = -7  # negative costs are shifted away by min(s, t)
    labels = _random_labels(rng, 6, 9, 13)
    groups = np.array([[1, 5, 0], [2, 3, 4]], np.int32)
    host = HostMoves(cost, w, kind, 2, groups, mirror=mirror)
    dev = DeviceMoves(cp.asarray(cost), cp.asarray(w), kind, 2, groups, mirror=mirror)
    for g in range(2):
        a = host.build(labels, g)
        b = dev.build(cp.asarray(labels), g)
        for name in ("source", "sink", "edges"):
            np.testing.assert_array_equal(getattr(b, name).get(), getattr(a, name))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["potts", "truncated_linear"])
def test_gpu_move_has_the_cpu_move_energy(rng, kind):
    """The GPU cut of one expansion move is an optimal move: its proposal has the
    energy of the CPU move's proposal (BK on the reference move energy)."""
    cp = _cupy()
    from vision_cuts import maxflow_grid
    from vision_cuts._stereo_gpu import DeviceMoves
    from vision_cuts.stereo import _move_energy

    for trial in range(6):
        ndisp, m, n = 7, 20 + trial, 31
        cost, w = _random_problem(rng, ndisp, m, n)
        labels = _random_labels(rng, ndisp, m, n)
        alpha = int(rng.integers(0, ndisp))
        ref = _move_energy(
            cost.astype(np.int64), w, labels.astype(np.int64), alpha, kind, 2
        )
        cpu_move = maxflow_grid(ref, backend="cpu").labels.astype(bool)
        dev = DeviceMoves(
            cp.asarray(cost), cp.asarray(w), kind, 2, np.array([[alpha]], np.int32)
        )
        cut = maxflow_grid(dev.build(cp.asarray(labels), 0), backend="gpu").labels
        assert isinstance(cut, cp.ndarray)
        gpu_move = cut.get().astype(bool)
        e_cpu = stereo_energy(
            cost, w, np.where(cpu_move, alpha, labels), smoothness=kind
        )
        e_gpu = stereo_energy(
            cost, w, np.where(gpu_move, alpha, labels), smoothness=kind
        )
        assert e_gpu == e_cpu
        assert ref.energy(gpu_move.astype(np.uint8)) == ref.energy(
            cpu_move.astype(np.uint8)
        )


@pytest.mark.gpu
def test_gpu_apply_matches_host(rng):
    cp = _cupy()
    from vision_cuts._stereo_gpu import DeviceMoves, HostMoves

    cost, w = _random_problem(rng, 5, 8, 11)
    labels = _random_labels(rng, 5, 8, 11)
    groups = np.array([[4, 1]], np.int32)
    host = HostMoves(cost, w, "truncated_linear", 2, groups)
    dev = DeviceMoves(cp.asarray(cost), cp.asarray(w), "truncated_linear", 2, groups)
    hl, dl = labels.copy(), cp.asarray(labels)
    host.init(hl)
    dev.init(dl)
    assert (
        dev.current_energy()
        == host.current_energy()
        == stereo_energy(cost, w, labels, smoothness="truncated_linear")
    )
    for _ in range(4):  # random cuts: some lower the energy, some do not
        cut = rng.integers(0, 2, (16, 11)).astype(np.uint8)
        for layer in (0, 1):
            host.apply(hl, cut, 0, layer)
            dev.apply(dl, cp.asarray(cut), 0, layer)
            assert dev.current_energy() == host.current_energy()
            np.testing.assert_array_equal(dl.get(), hl)


@pytest.mark.gpu
@pytest.mark.parametrize("per_cut", [1, 4])
def test_gpu_expansion_on_device(rng, per_cut):
    cp = _cupy()
    cost, w = _random_problem(rng, 6, 30, 40)
    stats = {}
    d = solve_disparity(
        cp.asarray(cost),
        cp.asarray(w),
        max_cycles=50,
        moves_per_cut=per_cut,
        stats=stats,
        backend="auto",
    )
    assert isinstance(d, cp.ndarray) and d.shape == (30, 40)
    d = d.get()
    assert stats["energies"][-1] == stereo_energy(
        cost, w, d, smoothness="truncated_linear"
    )
    assert stats["cycles"] < 50
    assert _one_cycle_finds_nothing(cost, w, d, "truncated_linear")


@pytest.mark.gpu
@pytest.mark.parametrize("per_cut", [1, 3, 4])
def test_gpu_stacked_moves_are_the_host_loop(rng, monkeypatch, per_cut):
    """Several moves a cut (built mirrored): the device loop takes the host
    specification's labels and energies, cycle for cycle, and so does the plain
    build (the same smallest moves)."""
    cp = _cupy()
    from vision_cuts import _stereo_gpu

    cost, w = _random_problem(rng, 9, 33, 41)
    host, kw = {}, {"max_cycles": 50, "moves_per_cut": per_cut}
    want = solve_disparity(cost, w, stats=host, backend="cpu", **kw)
    for mirror in (True, False):
        monkeypatch.setattr(_stereo_gpu, "MIRROR_MOVES", mirror)
        dev = {}
        got = solve_disparity(cp.asarray(cost), cp.asarray(w), stats=dev, **kw)
        np.testing.assert_array_equal(got.get(), want)
        assert dev["energies"] == host["energies"]
        assert dev["accepted"] == host["accepted"]


@pytest.mark.gpu
def test_gpu_ishikawa_is_the_cpu_optimum(rng):
    cp = _cupy()
    for shape in [(3, 2, 3), (4, 2, 3)]:
        cost, w = _random_problem(rng, *shape)
        d = solve_disparity(cost, w, method="ishikawa", backend="gpu")
        assert stereo_energy(cost, w, d, smoothness="linear") == _brute_force(
            cost, w, "linear"
        )
    for _ in range(3):
        cost, w = _random_problem(rng, 9, 40, 50)
        ref = solve_disparity(cost, w, method="ishikawa", backend="cpu")
        got = solve_disparity(cp.asarray(cost), cp.asarray(w), method="ishikawa")
        assert isinstance(got, cp.ndarray)
        assert stereo_energy(cost, w, got, smoothness="linear") == stereo_energy(
            cost, w, ref, smoothness="linear"
        )


@pytest.mark.gpu
def test_gpu_window_cut_is_the_cpu_minimum(rng):
    """The device's window graph (one kernel) cuts to the host construction's least
    energy, windows across both ends of [0, D) and negative costs included."""
    cp = _cupy()
    from vision_cuts.stereo import _window_cut

    cases = [
        (9, (2, 3), 2, 3),
        (40, (30, 41), 1, 3),
        (40, (30, 41), 4, 5),
        (40, (30, 41), 8, 5),
        (61, (17, 23), 4, 16),
    ]
    for ndisp, shape, step, count in cases:
        for shift, slope_div in ((0, 0), (-13, 0), (0, 4), (-13, 3)):
            cost, w, base = _window_problem(rng, ndisp, *shape, step, count)
            cost = cost + np.int32(shift)
            ref = _window_cut(cost, w, base, step, count, "cpu", slope_div=slope_div)
            got = _window_cut(
                cp.asarray(cost),
                cp.asarray(w),
                cp.asarray(base),
                step,
                count,
                "gpu",
                slope_div=slope_div,
            )
            assert isinstance(got, cp.ndarray)
            got = got.get()
            assert got.min() >= 0 and got.max() < ndisp
            assert _window_energy(
                cost, w, base, step, count, got, slope_div
            ) == _window_energy(cost, w, base, step, count, ref, slope_div)


@pytest.mark.gpu
def test_gpu_ishikawa_pyramid_levels_are_exact(rng, monkeypatch):
    """Every level of the device pyramid is the least energy over its windows (the
    host's window cut from the same start has the same energy; the two backends may
    break ties between equal cuts differently, so their pyramids may part), and each
    level's solve reports bounded work."""
    cp = _cupy()
    from vision_cuts import stereo as st

    calls = []
    real = st._window_cut

    def spy(
        cost, w, base, step, count, backend, solver=None, prefix=None, slope_div=0, **kw
    ):
        out = real(cost, w, base, step, count, backend, solver, prefix, slope_div, **kw)
        calls.append((cp.asnumpy(base), step, count, cp.asnumpy(out), slope_div))
        return out

    monkeypatch.setattr(st, "_window_cut", spy)
    for label_step in (2, 4):
        calls.clear()
        cost, w = _random_problem(rng, 33, 30, 40)
        cost = cost * 37 + rng.integers(0, 37, cost.shape).astype(np.int32)
        stats = {}
        got = solve_disparity(
            cp.asarray(cost),
            cp.asarray(w),
            method="ishikawa_pyramid",
            label_step=label_step,
            stats=stats,
        )
        assert isinstance(got, cp.ndarray)
        np.testing.assert_array_equal(got.get(), calls[-1][3])
        assert [c[1] for c in calls] == [label_step >> i for i in range(len(calls))]
        assert [c[4] for c in calls] == [st.PYRAMID_SLOPE_DIV] + [0] * (len(calls) - 1)
        for base, step, count, out, slope_div in calls:
            ref = real(cost, w, base, step, count, "cpu", slope_div=slope_div)
            assert _window_energy(
                cost, w, base, step, count, out, slope_div
            ) == _window_energy(cost, w, base, step, count, ref, slope_div)
        for lv in stats["levels"]:  # work counters of each level's solve
            s = lv["solver"]
            assert s["backend"] == "gpu" and 1 <= s["global_relabels"] <= 200
            assert s["sweeps"] <= 8 * s["global_relabels"] + 8


@pytest.mark.gpu
def test_gpu_stereo_disparity_array_kinds(rng):
    cp = _cupy()
    left, right, gt = _synthetic_pair(rng)
    d = stereo_disparity(cp.asarray(left), cp.asarray(right), max_disparity=10)
    assert isinstance(d, cp.ndarray) and d.dtype == cp.float32
    assert (np.abs(d.get() - gt) <= 1).mean() > 0.95
    with pytest.raises(ValueError, match="same shape"):
        stereo_disparity(
            cp.asarray(left), cp.asarray(right[:, :-1]), max_disparity=3, backend="gpu"
        )


@pytest.mark.gpu
@pytest.mark.data
@pytest.mark.parametrize("method", ["expansion", "ishikawa", "ishikawa_pyramid"])
def test_tsukuba_gpu_agrees_with_cpu(data_dir, method):
    from vision_cuts.datasets import middlebury as mb

    s = mb.load_stereo("tsukuba", data_dir)
    kw = {"label_step": 4} if method == "ishikawa_pyramid" else {}
    cpu = stereo_disparity(
        s.left, s.right, max_disparity=s.max_disp, method=method, backend="cpu", **kw
    )
    gpu = stereo_disparity(
        s.left,
        s.right,
        max_disparity=s.max_disp,
        method=method,
        backend="gpu",
        moves_per_cut=1,  # the CPU's algorithm (the GPU default cuts 4 moves at once)
        **kw,
    )
    b_cpu = mb.bad_pixel_rate(cpu, s.gt_disparity, 1.0)
    b_gpu = mb.bad_pixel_rate(gpu, s.gt_disparity, 1.0)
    assert b_gpu < 10.0 and abs(b_gpu - b_cpu) < 1.0
    assert (cpu == gpu).mean() > 0.97


@pytest.mark.gpu
@pytest.mark.data
def test_tsukuba_gpu_solvers_on_the_cpu_costs(data_dir):
    """On one integer cost volume: the GPU Ishikawa cut has exactly the CPU optimum's
    energy; the GPU expansion reaches a local minimum as low as the CPU one, give or
    take the moves whose ties break differently."""
    cp = _cupy()
    from vision_cuts.datasets import middlebury as mb
    from vision_cuts.stereo import stereo_weights

    s = mb.load_stereo("tsukuba", data_dir)
    cost = stereo_cost_volume(s.left, s.right, s.max_disp, backend="cpu")
    c = np.rint(cost * 100).astype(np.int32)
    w = np.rint(stereo_weights(s.left, smoothness=0.05) * 100).astype(np.int32)
    ref = solve_disparity(c, w, method="ishikawa", backend="cpu")
    got = solve_disparity(cp.asarray(c), cp.asarray(w), method="ishikawa")
    e_ref = stereo_energy(c, w, ref, smoothness="linear")
    assert stereo_energy(c, w, got, smoothness="linear") == e_ref
    w = np.rint(stereo_weights(s.left, smoothness=0.2) * 100).astype(np.int32)
    ref = solve_disparity(c, w, backend="cpu")
    got = solve_disparity(c, w, backend="gpu", moves_per_cut=1)
    e_ref = stereo_energy(c, w, ref, smoothness="truncated_linear")
    e_got = stereo_energy(c, w, got, smoothness="truncated_linear")
    assert abs(e_got - e_ref) <= 1e-3 * e_ref


# ---- input checks of the front door --------------------------------------------------


def _shifted_pair(rng, shift=2, dtype=np.float64):
    right = rng.integers(0, 255, (12, 20)).astype(dtype)
    return np.roll(right, shift, axis=1), right


def _with(a, index, value):
    out = a.astype(np.float64)
    out[index] = value
    return out


@pytest.mark.parametrize(
    ("which", "make", "error", "match"),
    [
        ("left", lambda a: _with(a, (3, 5), np.nan), ValueError,
         r"left must hold finite values .*got nan at index \(3, 5\)"),
        ("right", lambda a: _with(a, (0, 7), -np.inf), ValueError,
         r"right must hold finite values .*got -inf at index \(0, 7\)"),
        ("left", lambda a: np.full(a.shape, np.inf), ValueError,
         r"left must hold finite values .*got inf at index \(0, 0\)"),
        # finite in float64, not in float32: reported as given
        ("left", lambda a: _with(a, (1, 2), 1e39), ValueError,
         r"left must hold finite values \(as float32\), got 1e\+39 at index \(1, 2\)"),
        ("right", lambda a: a + 1j, TypeError,
         "right must have a bool, integer or floating dtype, got complex128"),
        ("left", lambda a: a.astype(object), TypeError,
         "left must have a bool, integer or floating dtype, got object"),
        ("left", lambda a: np.ma.masked_array(a, mask=a > 100), TypeError,
         "left must be a plain array, got a masked array"),
        ("right", lambda a: a.tolist()[:-1] + [a.tolist()[-1][:-1]], ValueError,
         r"right must be a regular \(rectangular\) array"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("method", ["expansion", "ishikawa"])
def test_stereo_images_are_checked(rng, which, make, error, match, method):
    left, right = _shifted_pair(rng)
    pair = {"left": left, "right": right}
    pair[which] = make(pair[which])
    with pytest.raises(error, match=match):
        stereo_disparity(
            pair["left"], pair["right"], max_disparity=4, method=method,
            backend="cpu",
        )  # fmt: skip
    with pytest.raises(error, match=match):
        stereo_cost_volume(pair["left"], pair["right"], 4, backend="cpu")


def test_stereo_accepts_real_image_dtypes(rng):
    left, right = _shifted_pair(rng)
    want = stereo_disparity(left, right, max_disparity=4, backend="cpu")
    assert np.all(want[:, 4:] == 2)
    for dtype in (np.uint8, np.int64, np.float32):
        got = stereo_disparity(
            left.astype(dtype), right.astype(dtype), max_disparity=4, backend="cpu"
        )
        np.testing.assert_array_equal(got, want)
    got = stereo_disparity(
        left.tolist(), right.tolist(), max_disparity=4, backend="cpu"
    )
    np.testing.assert_array_equal(got, want)


_BAD_SCALARS = [
    ({"lam": -1.0}, ValueError, "lam must be a finite number >= 0, got -1.0"),
    ({"lam": float("nan")}, ValueError, "lam must be a finite number >= 0, got nan"),
    ({"lam": float("inf")}, ValueError, "lam must be a finite number >= 0, got inf"),
    ({"lam": "a"}, TypeError, "lam must be a number, got 'a'"),
    ({"lam": 1e12}, ValueError,
     r"pair weights quantised with lam=1000000000000.0, cost_scale=100.0 must be at "
     r"most 2147483647 \(int32\), got 3e\+14"),
    ({"cost_scale": 0}, ValueError, "cost_scale must be a finite number > 0, got 0"),
    ({"cost_scale": -1}, ValueError, "cost_scale must be a finite number > 0, got -1"),
    ({"cost_scale": float("nan")}, ValueError, "cost_scale must be a finite number"),
    ({"cost_scale": float("inf")}, ValueError, "cost_scale must be a finite number"),
    ({"cost_scale": "x"}, TypeError, "cost_scale must be a number, got 'x'"),
    ({"cost_scale": 1e12}, ValueError,
     r"matching costs quantised with cost_scale=1000000000000.0 must be at most "
     r"2147483647 \(int32\)"),
    ({"max_cycles": 2.7}, TypeError, "max_cycles must be an integer, got 2.7"),
    ({"max_cycles": "3"}, TypeError, "max_cycles must be an integer, got '3'"),
    ({"max_cycles": True}, TypeError, "max_cycles must be an integer, got True"),
    ({"max_cycles": None}, TypeError, "max_cycles must be an integer, got None"),
    ({"max_cycles": 0}, ValueError, "max_cycles must be an integer >= 1, got 0"),
    ({"window": 0}, ValueError, r"window must be an integer in \[1, 46340\], got 0"),
    ({"window": -5}, ValueError, r"window must be an integer in \[1, 46340\], got -5"),
    ({"window": 2.5}, TypeError, "window must be an integer, got 2.5"),
    ({"window": float("nan")}, TypeError, "window must be an integer, got nan"),
    ({"window": True}, TypeError, "window must be an integer, got True"),
    ({"window": "3"}, TypeError, "window must be an integer, got '3'"),
    ({"tol": "x"}, TypeError, "tol must be a number, got 'x'"),
    ({"tol": None}, TypeError, "tol must be a number, got None"),
    ({"tol": -0.5}, ValueError, "tol must be a finite number >= 0, got -0.5"),
    ({"callback": 3}, TypeError, "callback must be callable, got int"),
    ({"census_radius": 1.5}, TypeError, "census_radius must be an integer, got 1.5"),
    ({"census_radius": 0}, ValueError, "census_radius must be an integer, census_"),
]  # fmt: skip


@pytest.mark.parametrize(("kw", "error", "match"), _BAD_SCALARS)
def test_stereo_scalar_parameters_are_checked(rng, kw, error, match):
    left, right = _shifted_pair(rng, dtype=np.uint8)
    with pytest.raises(error, match=match):
        stereo_disparity(left, right, max_disparity=4, backend="cpu", **kw)


def test_stereo_scalar_parameters_take_numpy_numbers(rng):
    left, right = _shifted_pair(rng, dtype=np.uint8)
    want = stereo_disparity(left, right, max_disparity=4, backend="cpu")
    got = stereo_disparity(
        left, right, max_disparity=4, backend="cpu", max_cycles=np.int64(5),
        window=np.int32(3), lam=np.float64(0.2), cost_scale=np.int64(100),
        tol=np.float32(1e-3),
    )  # fmt: skip
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"max_cycles": 2.5}, TypeError, "max_cycles must be an integer, got 2.5"),
        ({"max_cycles": -1}, ValueError, "max_cycles must be an integer >= 1"),
        ({"tol": "x"}, TypeError, "tol must be a number, got 'x'"),
        ({"tol": float("nan")}, ValueError, "tol must be a finite number >= 0"),
    ],
)
def test_solver_run_arguments_are_checked(rng, kw, error, match):
    cost, w = _random_problem(rng, 3, 4, 5)
    with pytest.raises(error, match=match):
        solve_disparity(cost, w, backend="cpu", **kw)
    labels = solve_disparity(cost, w, max_cycles=np.int64(2), backend="cpu")
    assert labels.shape == (4, 5)


@pytest.mark.parametrize("window", [0, 2.0, True, 46341])
def test_cost_volume_window_is_checked(rng, window):
    left, right = _shifted_pair(rng)
    with pytest.raises((TypeError, ValueError), match="window must be an integer"):
        stereo_cost_volume(left, right, 4, window=window, backend="cpu")


# ------------------------------------------------- the energy and the weights, inputs
_COST = np.arange(12, dtype=np.int32).reshape(3, 2, 2)
_W = np.ones((2, 2, 2), np.int32)
_D = np.array([[0, 1], [2, 0]])


def test_stereo_energy_by_hand():
    # data 0 + 5 + 10 + 3; pairs: row 0 |0-1| = 1, row 1 |2-0| = 2, column 0
    # |0-2| = 2, column 1 |1-0| = 1 (the last row and column have no pair beyond)
    assert stereo_energy(_COST, _W, _D, smoothness="linear") == 18 + 6
    assert stereo_energy(_COST, _W, _D, smoothness="potts") == 18 + 4
    assert (
        stereo_energy(_COST, _W, _D, smoothness="truncated_linear", truncation=1)
        == 18 + 4
    )


@pytest.mark.parametrize(
    ("args", "kw", "exc", "match"),
    [
        ((_COST, _W, _D + 3), {}, ValueError, r"disparity must lie in \[0, 3\), got 3"),
        ((_COST, _W, -_D), {}, ValueError, r"disparity must lie in \[0, 3\), got -1"),
        ((_COST, _W, _D * 1.0), {}, TypeError, r"disparity must have an integer dtype"),
        ((_COST, _W, _D[:1]), {}, ValueError, r"disparity must have shape \(2, 2\)"),
        ((_COST, _W[:1], _D), {}, ValueError, r"weights must have shape \(2, M, N\)"),
        ((_COST[0], _W, _D), {}, ValueError, r"cost must have shape \(D, M, N\)"),
        ((_COST * 1.0, _W, _D), {}, TypeError, r"cost has floating dtype"),
        ((np.ma.masked_array(_COST), _W, _D), {}, TypeError, r"cost must be a plain"),
        ((_COST, _W, _D), {"smoothness": "cubic"}, ValueError, r"smoothness must be"),
        (
            (_COST, _W, _D),
            {"smoothness": "truncated_linear", "truncation": 0},
            ValueError,
            r"truncation must be an integer >= 1",
        ),
        (
            (_COST, _W.astype(np.int64) * 2**60, _D),
            {},
            ValueError,
            r"too large for an exact int64",
        ),
        (
            (_COST.astype(np.uint64) + np.uint64(2**63), _W, _D),
            {},
            ValueError,
            r"cost must lie strictly between .* got 9223372036854775808",
        ),
    ],
)
def test_stereo_energy_checks(args, kw, exc, match):
    with pytest.raises(exc, match=match):
        stereo_energy(*args, **kw)


def test_stereo_weights_values_and_checks():
    img = np.zeros((3, 4), np.uint8)
    img[:, 2:] = 200
    w = stereo_weights(img, smoothness=2.0)
    assert w.shape == (2, 3, 4) and w.dtype == np.float32
    assert w[0, :, 1].tolist() == [2.0] * 3  # across the edge: the weak weight
    assert w[0, :, 0].tolist() == [6.0] * 3 and w[1, :2].min() == 6.0
    assert (w[0, :, -1] == 0).all() and (w[1, -1] == 0).all()
    for kw, match in [
        ({"smoothness": -1.0}, "smoothness must be a finite number"),
        ({"threshold": float("nan")}, "threshold must be a finite"),
        ({"ratio": 0.5}, "ratio must be a finite number >= 1"),
        ({"smoothness": "2"}, "smoothness must be a number"),
    ]:
        with pytest.raises((ValueError, TypeError), match=match):
            stereo_weights(img, **kw)
    bad = img.astype(np.float32)
    bad[1, 1] = np.nan
    with pytest.raises(ValueError, match=r"left must hold finite values .* \(1, 1\)"):
        stereo_weights(bad)


@pytest.mark.parametrize("max_cycles", [1, 8])
def test_expansion_progress_ends_once_at_the_total(backend, max_cycles):
    """The expansion's progress rises by one move a report and ends with one
    ``(total, total)``, whether every cycle ran (``max_cycles=1``) or the cycles
    stopped early; the last report came twice when every cycle ran."""
    rng = np.random.default_rng(5)
    left = rng.integers(0, 256, (24, 40, 3), dtype=np.uint8)
    right = np.roll(left, -2, axis=1)
    calls = []
    stereo_disparity(
        left, right, max_disparity=6, method="expansion", backend=backend,
        max_cycles=max_cycles, moves_per_cut=1,
        callback=lambda d, t: calls.append((d, t)),
    )  # fmt: skip
    total = calls[-1][1]
    assert total == max_cycles * 7 and calls[-1] == (total, total)  # labels 0..6
    # a cost volume that ran a quarter second reports (0, total) first
    while calls[0] == (0, total):
        del calls[0]
    done = [d for d, _ in calls]
    assert done == list(range(1, len(done))) + [total]
    assert done.count(total) == 1 and all(t == total for _, t in calls)


def test_max_disparity_of_another_type_is_a_type_error(rng):
    left, right = _shifted_pair(rng, dtype=np.uint8)
    with pytest.raises(TypeError, match=r"max_disparity must be an integer, got 4.0"):
        stereo_disparity(left, right, max_disparity=4.0, backend="cpu")
    with pytest.raises(ValueError, match="0 < max_disparity < image width"):
        stereo_disparity(left, right, max_disparity=0, backend="cpu")


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"ad_truncation": 0}, ValueError, "ad_truncation must be a finite number > "),
        ({"ad_truncation": -5}, ValueError, "ad_truncation must be a finite number > "),
        ({"ad_truncation": float("nan")}, ValueError, "ad_truncation must be a finite"),
        ({"ad_truncation": "20"}, TypeError, "ad_truncation must be a number"),
        ({"census_weight": -1}, ValueError, "census_weight must be a finite number >="),
        ({"census_weight": float("inf")}, ValueError, "census_weight must be a finite"),
    ],
)  # fmt: skip
def test_cost_volume_numbers_are_checked(rng, kw, error, match):
    """These gave NaN costs (ad_truncation 0 or NaN), costs of 1 everywhere (negative
    ad_truncation) or negative costs (negative census_weight) without an error."""
    from vision_cuts.stereo import stereo_cost_volume

    left, right = _shifted_pair(rng, dtype=np.uint8)
    with pytest.raises(error, match=match):
        stereo_cost_volume(left, right, 3, backend="cpu", **kw)
    cost = stereo_cost_volume(left, right, 3, backend="cpu", census_weight=0.5)
    assert np.isfinite(cost).all() and 0 <= cost.min() and cost.max() <= 1.5


@pytest.mark.parametrize("method", ["expansion", "ishikawa", "ishikawa_pyramid"])
def test_solve_disparity_takes_any_cost_offset(rng, method):
    """A constant added to every cost leaves the minimiser alone: a positive offset
    that puts the costs beyond int32 was refused ("cost range" of 2**31 and more),
    while the same negative offset was taken."""
    cost = rng.integers(0, 50, (4, 5, 6))
    w = rng.integers(0, 5, (2, 5, 6))
    want = solve_disparity(cost, w, method=method, backend="cpu")
    for offset in (2**31, -(2**31), 2**40):
        got = solve_disparity(cost + offset, w, method=method, backend="cpu")
        np.testing.assert_array_equal(got, want)
    big = cost.astype(np.uint64) + np.uint64(2**63)
    np.testing.assert_array_equal(
        solve_disparity(big, w, method=method, backend="cpu"), want
    )
    with pytest.raises(ValueError, match="too large for int32 move graphs"):
        solve_disparity(cost * 2**27, w, method=method, backend="cpu")


def test_solve_disparity_stats_of_an_offset_are_the_given_costs(rng):
    cost = rng.integers(0, 50, (4, 5, 6))
    w = rng.integers(0, 5, (2, 5, 6))
    plain, shifted = {}, {}
    d = solve_disparity(cost, w, moves_per_cut=2, stats=plain, backend="cpu")
    solve_disparity(cost + 2**31, w, moves_per_cut=2, stats=shifted, backend="cpu")
    assert shifted["energies"] == [e + 2**31 * 30 for e in plain["energies"]]
    assert shifted["energies"][-1] == stereo_energy(
        cost + 2**31, w, d, smoothness="truncated_linear"
    )


@pytest.mark.parametrize("method", ["expansion", "ishikawa", "ishikawa_pyramid"])
def test_solve_disparity_one_disparity_or_no_pixel(method):
    """One disparity: every label is 0 (expansion asked for a unary of L >= 2); no
    pixel: an empty labelling (NumPy's zero-size reduction error before)."""
    cost = np.arange(30).reshape(1, 5, 6)
    calls = []
    got = solve_disparity(
        cost, np.ones((2, 5, 6), int), method=method, backend="cpu",
        callback=lambda d, t: calls.append((d, t)),
    )  # fmt: skip
    assert got.shape == (5, 6) and not got.any() and calls == [(1, 1)]
    empty = solve_disparity(
        np.zeros((3, 0, 4), int), np.zeros((2, 0, 4), int), method=method,
        backend="cpu",
    )  # fmt: skip
    assert empty.shape == (0, 4)


def test_stereo_energy_of_float_costs_names_no_missing_parameter():
    labels = np.zeros((4, 5), int)
    with pytest.raises(TypeError, match=r"quantise it first") as info:
        stereo_energy(np.zeros((3, 4, 5)), np.zeros((2, 4, 5), int), labels)
    assert "Pass scale" not in str(info.value)


@pytest.mark.parametrize("backend", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_every_dtype_of_a_picture_is_read_on_one_scale(rng, backend):
    """A [0, 1] float pair was read as grey levels 0..1 (the differences' truncation
    and the weights' threshold are in levels of 0..255): another energy than the same
    pair as uint8, as a uint16 pair or a bool pair was. Each now gives the uint8
    pair's costs, weights and disparities."""
    if backend == "gpu":
        _cupy()
    left, right = _textured_pair(rng, channels=3)
    ref_cost = stereo_cost_volume(left, right, 9, backend=backend)
    ref = stereo_disparity(left, right, max_disparity=9, backend=backend)
    for name, (lf, rf) in {
        "float in [0, 1]": (left / 255.0, right / 255.0),
        "float32 in [0, 1]": ((left / 255.0).astype(np.float32),
                              (right / 255.0).astype(np.float32)),
        "float grey levels": (left.astype(float), right.astype(float)),
        "uint16": (left.astype(np.uint16) * 257, right.astype(np.uint16) * 257),
    }.items():  # fmt: skip
        cost = stereo_cost_volume(lf, rf, 9, backend=backend)
        np.testing.assert_allclose(cost, ref_cost, atol=1e-4, err_msg=name)
        got = stereo_disparity(lf, rf, max_disparity=9, backend=backend)
        assert (got == ref).mean() > 0.999, name
    binary = (left > 127, right > 127)
    as_bool = stereo_disparity(*binary, max_disparity=9, backend=backend)
    as_levels = stereo_disparity(*(b.astype(np.uint8) * 255 for b in binary),
                                 max_disparity=9, backend=backend)  # fmt: skip
    np.testing.assert_array_equal(as_bool, as_levels)


def test_float_overshoot_keeps_the_unit_scale(rng):
    """One pixel a little above 1 in a [0, 1] float pair (an interpolation's
    overshoot) switched the whole pair to grey levels 0..1; it now keeps the [0, 1]
    scale, and a pair with one image on each scale is an error naming both."""
    left, right = _textured_pair(rng, channels=3)
    ref = stereo_disparity(left, right, max_disparity=9, backend="cpu")
    lf = left / 255.0
    lf[0, 0, 0] = 1.0001
    got = stereo_disparity(lf, right / 255.0, max_disparity=9, backend="cpu")
    assert (got == ref).mean() > 0.999
    words = r"different scales: left has values up to (1|0\.99\d*) and right up to 2"
    with pytest.raises(ValueError, match=words):
        stereo_disparity(left / 255.0, right.astype(float), max_disparity=9)
    black = np.zeros(left.shape)  # no value above 0: black on either scale
    stereo_disparity(black, right.astype(float), max_disparity=9, backend="cpu")


def test_solve_disparity_input_errors_name_the_array():
    """Each error names the array, what it must be and what it got; a volume of no
    disparity is an error (0 is not a label of it), not a map of zeros."""
    c = np.ones((3, 5, 6), np.int32)
    w = np.ones((2, 5, 6), np.int32)
    for method in ("expansion", "ishikawa"):
        with pytest.raises(ValueError, match=r"cost must hold at least one disparity "
                           r"\(D >= 1 in \(D, M, N\)\), got shape \(0, 5, 6\)"):
            solve_disparity(c[:0], w, method=method, backend="cpu")
    with pytest.raises(TypeError, match=r"cost must be an integer array, got dtype "
                       r"float64; quantise it first"):
        solve_disparity(c.astype(float), w, backend="cpu")
    with pytest.raises(TypeError, match=r"weights must be an integer array, got dtype "
                       r"float32"):
        solve_disparity(c, w.astype(np.float32), backend="cpu")
    neg = w.copy()
    neg[1, 2, 3] = -4
    with pytest.raises(ValueError, match=r"weights must be non-negative, got -4 at "
                       r"\(1, 2, 3\)"):
        solve_disparity(c, neg, backend="cpu")
    with pytest.raises(TypeError, match="weights must be a NumPy or CuPy array, got"):
        solve_disparity(c, w.tolist(), backend="cpu")
    left = np.zeros((6, 1, 3), np.uint8)
    with pytest.raises(ValueError, match=r"left must have at least 1 row and 2 "
                       r"columns, got shape \(6, 1, 3\)"):
        stereo_disparity(left, left, max_disparity=1, backend="cpu")
