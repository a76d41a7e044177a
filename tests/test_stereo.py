"""Tests of vision_cuts.stereo: exactness oracles, move optimality, synthetic pairs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vision_cuts import stereo_disparity
from vision_cuts.stereo import solve_disparity, stereo_energy


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
    with pytest.raises(ValueError, match="max_disparity"):
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
    argv = ["stereo", str(lp), str(rp), "--max-disparity", "8", "-o", str(pic),
            "--colormap", "--pfm", str(pfm), "--png16", str(p16), "--backend", "cpu"]
    assert cli.main(argv) == 0
    disp = read_pfm(pfm)
    assert disp.shape == (40, 60)
    assert (np.abs(disp[:, 8:] - 4) <= 1).mean() > 0.95
    np.testing.assert_array_equal(cv2.imread(str(p16), cv2.IMREAD_UNCHANGED),
                                  (disp * 256).astype(np.uint16))
    colour = cv2.imread(str(pic))
    assert colour.shape[0] == 40 and colour.shape[1] > 60  # picture + colour bar
    assert "disparity of a 60x40 pair" in capsys.readouterr().out


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
