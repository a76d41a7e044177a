"""Tests of the Middlebury flow loader and its error measures."""

from __future__ import annotations

import numpy as np
import pytest

from vision_cuts.datasets import middlebury_flow as mf
from vision_cuts.io import write_flo


def _fake_root(tmp_path, name="Grove2", shape=(6, 8)):
    cv2 = pytest.importorskip("cv2")
    folder = tmp_path / "middlebury_flow" / name
    folder.mkdir(parents=True)
    img = np.arange(np.prod(shape) * 3, dtype=np.uint8).reshape(*shape, 3)
    cv2.imwrite(str(folder / "frame10.png"), img)
    cv2.imwrite(str(folder / "frame11.png"), img[::-1].copy())
    flow = np.ones((*shape, 2), np.float32)
    flow[0, 0] = np.nan  # stored as unknown
    write_flo(folder / "flow10.flo", flow)
    return tmp_path, img


def test_load_from_root_and_env(tmp_path, monkeypatch):
    root, img = _fake_root(tmp_path)
    s = mf.load_flow("Grove2", root)
    np.testing.assert_array_equal(s.frame0, img[..., ::-1])  # RGB
    assert s.gt_flow.shape == (6, 8, 2) and np.isnan(s.gt_flow[0, 0]).all()
    assert np.isfinite(s.gt_flow).sum() == (6 * 8 - 1) * 2
    monkeypatch.setenv("VISION_CUTS_DATA", str(root))
    assert mf.load_flow("Grove2").frame1.shape == (6, 8, 3)
    assert mf.data_root(root / "middlebury_flow") == root


def test_loader_errors(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="name must be one of"):
        mf.load_flow("Venus", tmp_path)
    with pytest.raises(FileNotFoundError, match="no middlebury_flow/ subfolder"):
        mf.load_flow("Grove2", tmp_path)
    monkeypatch.delenv("VISION_CUTS_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="VISION_CUTS_DATA"):
        mf.load_flow("Grove2")
    root, _ = _fake_root(tmp_path)
    (root / "middlebury_flow" / "Grove2" / "flow10.flo").unlink()
    with pytest.raises(FileNotFoundError, match="flow10.flo"):
        mf.load_flow("Grove2", root)


def test_epe_measures():
    gt = np.zeros((4, 5, 2))
    gt[0, 0] = np.nan
    flow = np.zeros((4, 5, 2))
    flow[1, 1] = [3.0, 4.0]
    assert mf.dense_epe(flow, gt) == pytest.approx(5.0 / 19)
    flow[0, 0] = np.nan  # unknown GT there: ignored
    assert mf.dense_epe(flow, gt) == pytest.approx(5.0 / 19)
    flow[2, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        mf.dense_epe(flow, gt)
    pts = np.array([[1.2, 0.9], [0.0, 0.0], [10.0, 1.0]])
    vec = np.array([[3.0, 4.0], [1.0, 1.0], [0.0, 0.0]])
    epe, n = mf.sparse_epe(pts, vec, gt)  # second on unknown GT, third outside
    assert (epe, n) == (5.0, 1)
    assert mf.sparse_epe(pts[1:2], vec[1:2], gt)[1] == 0


@pytest.mark.data
def test_real_sequences(data_dir):
    if not (data_dir / "middlebury_flow").is_dir():
        pytest.skip("no middlebury_flow data")
    unknown = {"Grove2": 0.0, "Hydrangea": 0.066, "Urban2": 0.0}
    for name, frac in unknown.items():
        s = mf.load_flow(name, data_dir)
        h, w = s.frame0.shape[:2]
        assert (w, h) == ((640, 480) if name != "Hydrangea" else (584, 388))
        assert s.frame0.dtype == np.uint8 and s.frame1.shape == s.frame0.shape
        assert np.isnan(s.gt_flow[..., 0]).mean() == pytest.approx(frac, abs=0.002)
        assert mf.dense_epe(s.gt_flow, s.gt_flow) == 0.0


@pytest.mark.data
def test_sparse_flow_beats_pyrlk_on_rubberwhale(data_dir):
    """The benchmark's sparse claim on one real sequence (same points for both)."""
    cv2 = pytest.importorskip("cv2")
    if not (data_dir / "middlebury_flow").is_dir():
        pytest.skip("no middlebury_flow data")
    from vision_cuts import optical_flow

    f0, f1, gt = mf.load_flow("RubberWhale", data_dir)
    res = optical_flow(f0, f1, backend="cpu")
    ours, n = mf.sparse_epe(res.points, res.vectors, gt)
    g0, g1 = (cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in (f0, f1))
    nxt, _, _ = cv2.calcOpticalFlowPyrLK(g0, g1, res.points.reshape(-1, 1, 2), None)
    lk, n_lk = mf.sparse_epe(res.points, nxt.reshape(-1, 2) - res.points, gt)
    assert n == n_lk > 1000
    assert ours < lk
