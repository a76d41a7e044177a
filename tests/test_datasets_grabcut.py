"""Tests of vision_cuts.datasets.grabcut: the loader (data) and grabcut_error."""

from __future__ import annotations

import numpy as np
import pytest

from vision_cuts.datasets import grabcut as gc

# --------------------------------------------------------------------- grabcut_error


def test_error_hand_made():
    gt = np.array(
        [
            [0, 0, 1, 1],
            [0, 1, 1, 1],
            [0, 0, 1, 0],
        ],
        dtype=np.uint8,
    )
    mask = np.array(
        [
            [0, 1, 1, 1],
            [0, 1, 0, 1],
            [0, 0, 1, 1],
        ],
        dtype=np.uint8,
    )
    # whole image: 3 of 12 wrong
    assert gc.grabcut_error(mask, gt, (0, 0, 4, 3)) == pytest.approx(25.0)
    assert gc.grabcut_error(gt, gt, (0, 0, 4, 3)) == 0.0
    assert gc.grabcut_error(1 - gt, gt, (0, 0, 4, 3)) == 100.0


def test_error_mask_kinds():
    gt = np.array([[0, 1], [1, 0]], dtype=np.uint8)
    rect = (0, 0, 2, 2)
    as_bool = np.array([[False, True], [False, False]])
    # nonzero is foreground, whatever the dtype (uint8 1, a 255 mask, bool)
    for mask in (as_bool, as_bool.astype(np.uint8), as_bool.astype(np.uint8) * 255):
        assert gc.grabcut_error(mask, gt, rect) == pytest.approx(25.0)


def test_error_excludes_unknown_band():
    u = gc.UNKNOWN
    gt = np.array([[0, u, 1], [u, u, 1]], dtype=np.uint8)
    mask = np.array([[1, 0, 1], [1, 1, 0]], dtype=np.uint8)
    # scored: (0,0) wrong, (0,2) right, (1,2) wrong -> 2 of 3
    assert gc.grabcut_error(mask, gt, (0, 0, 3, 2)) == pytest.approx(200.0 / 3.0)
    # labels in the band do not matter
    assert gc.grabcut_error(np.where(gt == u, 1 - mask, mask), gt, (0, 0, 3, 2)) == (
        pytest.approx(200.0 / 3.0)
    )


def test_error_ignores_pixels_outside_box():
    gt = np.zeros((5, 6), dtype=np.uint8)
    gt[1:4, 2:5] = 1
    mask = gt.copy()
    mask[0, :] = 1  # wrong, but outside the box
    mask[:, 0] = 1  # idem
    rect = (1, 1, 5, 4)  # columns 1..5, rows 1..4: 20 pixels
    assert gc.grabcut_error(mask, gt, rect) == 0.0
    mask[2, 1] = 1  # one wrong pixel inside
    mask[4, 5] = 1  # the box's bottom-right pixel, inside too
    assert gc.grabcut_error(mask, gt, rect) == pytest.approx(100.0 * 2 / 20)


def test_error_bad_inputs():
    gt = np.zeros((3, 4), dtype=np.uint8)
    mask = np.zeros((3, 4), dtype=np.uint8)
    with pytest.raises(ValueError, match="one shape"):
        gc.grabcut_error(mask[:, :3], gt, (0, 0, 2, 2))
    with pytest.raises(ValueError, match="raw boundary_GT"):
        gc.grabcut_error(mask, np.full((3, 4), 128, np.uint8), (0, 0, 2, 2))
    with pytest.raises(ValueError, match="inside"):
        gc.grabcut_error(mask, gt, (2, 0, 3, 2))  # leaves the 4-wide image
    with pytest.raises(ValueError, match="non-empty"):
        gc.grabcut_error(mask, gt, (0, 0, 0, 2))
    with pytest.raises(ValueError, match="four integers"):
        gc.grabcut_error(mask, gt, (0, 0, 2))
    with pytest.raises(ValueError, match="no scored pixel"):
        gc.grabcut_error(mask, np.full((3, 4), gc.UNKNOWN, np.uint8), (0, 0, 2, 2))


# -------------------------------------------------------------------- loader errors


def test_no_root_names_env(monkeypatch):
    monkeypatch.delenv("VISION_CUTS_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="VISION_CUTS_DATA"):
        gc.data_root()
    with pytest.raises(FileNotFoundError, match="VISION_CUTS_DATA"):
        gc.load_grabcut("banana1")


def test_missing_root(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        gc.grabcut_names(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="no grabcut/ subfolder"):
        gc.grabcut_names(tmp_path)
    monkeypatch.setenv("VISION_CUTS_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="VISION_CUTS_DATA"):
        gc.data_root()


def _tiny_dataset(root, name="toy", box="2 1 4 3"):
    """A 4 x 5 image in the GrabCut layout under ``root/grabcut``."""
    return grabcut_layout(root / "grabcut", name, box)


def grabcut_layout(d, name="toy", box="2 1 4 3"):
    """A 4 x 5 image in the GrabCut layout in the folder ``d`` (any name)."""
    cv2 = pytest.importorskip("cv2")
    Image = pytest.importorskip("PIL.Image")
    for sub in ("data_GT", "boundary_GT", "bb_GT", "scribbles-set-1"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    rgb = np.zeros((4, 5, 3), np.uint8)
    rgb[..., 0] = 200  # red
    cv2.imwrite(str(d / "data_GT" / f"{name}.bmp"), rgb[..., ::-1])
    raw = np.zeros((4, 5), np.uint8)
    raw[1:3, 1:4] = 255
    raw[1, 1] = 128
    cv2.imwrite(str(d / "boundary_GT" / f"{name}.bmp"), raw)
    (d / "bb_GT" / f"{name}.txt").write_text(box)
    idx = np.zeros((4, 5), np.uint8)
    idx[2, 2] = 1
    idx[0, 0] = 2
    im = Image.frombytes("P", (5, 4), idx.tobytes())
    im.putpalette([0, 0, 0, 255, 255, 207, 219, 0, 0])
    im.save(d / "scribbles-set-1" / f"{name}-anno.png")
    return d


def test_tiny_layout(tmp_path):
    _tiny_dataset(tmp_path)
    assert gc.grabcut_names(tmp_path) == ["toy"]
    s = gc.load_grabcut("toy", tmp_path)
    assert s.image.dtype == np.uint8 and s.image.shape == (4, 5, 3)
    assert (s.image[..., 0] == 200).all() and (s.image[..., 1:] == 0).all()  # RGB
    assert s.gt[1, 1] == gc.UNKNOWN and s.gt[2, 2] == 1 and s.gt[0, 0] == 0
    assert s.rect == (1, 0, 3, 3)  # "2 1 4 3", 1-based inclusive
    assert set(s.scribbles) == {"set1"}  # set 2 absent
    fg, bg = s.scribbles["set1"]
    assert fg.dtype == bool and np.flatnonzero(fg).tolist() == [12]
    assert np.flatnonzero(bg).tolist() == [0]
    # the grabcut folder itself is accepted as root
    assert gc.load_grabcut("toy", tmp_path / "grabcut").rect == s.rect


def test_unknown_name_lists_available(tmp_path):
    _tiny_dataset(tmp_path)
    with pytest.raises(ValueError, match=r"unknown GrabCut image 'nope'.*: toy"):
        gc.load_grabcut("nope", tmp_path)


def test_box_outside_image(tmp_path):
    _tiny_dataset(tmp_path, box="1.0000000e+000 1 6 4")  # x_max 6 > width 5
    with pytest.raises(ValueError, match="not inside"):
        gc.load_grabcut("toy", tmp_path)


def test_registry_mismatch(tmp_path):
    _tiny_dataset(tmp_path, name="teddy")  # teddy is in the registry
    with pytest.raises(ValueError, match="SHA-256"):
        gc.load_grabcut("teddy", tmp_path)
    assert gc.load_grabcut("teddy", tmp_path, verify=False).rect == (1, 0, 3, 3)


# ------------------------------------------------------------------------ real data


_LOADED: dict = {}


@pytest.fixture
def samples(data_dir):
    """Every GrabCut image, loaded once per session (data_dir skips without data)."""
    if data_dir not in _LOADED:
        _LOADED[data_dir] = {
            n: gc.load_grabcut(n, data_dir) for n in gc.grabcut_names(data_dir)
        }
    return _LOADED[data_dir]


@pytest.mark.data
def test_names(data_dir):
    names = gc.grabcut_names(data_dir)
    assert len(names) >= 20
    assert {"banana1", "llama", "teddy"} <= set(names)


@pytest.mark.data
def test_all_images(samples):
    assert len(samples) >= 20
    for name, s in samples.items():
        assert s.name == name
        assert s.image.dtype == np.uint8 and s.image.ndim == 3
        assert s.image.shape[2] == 3
        rows, cols = s.image.shape[:2]
        assert s.gt.shape == (rows, cols) and s.gt.dtype == np.uint8
        values = set(np.unique(s.gt).tolist())
        assert {0, 1} <= values <= {0, 1, gc.UNKNOWN}, name
        x, y, w, h = s.rect
        assert all(isinstance(v, int) for v in s.rect)
        assert 0 <= x and 0 <= y and w > 0 and h > 0
        assert x + w <= cols and y + h <= rows, name
        # SOURCE.md: every box holds the whole GT foreground
        fg_rows, fg_cols = np.nonzero(s.gt == 1)
        assert fg_cols.min() >= x and fg_cols.max() < x + w, name
        assert fg_rows.min() >= y and fg_rows.max() < y + h, name
        assert set(s.scribbles) == {"set1", "set2"}, name
        for key, (fg, bg) in s.scribbles.items():
            assert fg.shape == bg.shape == (rows, cols)
            assert fg.dtype == bool and bg.dtype == bool
            assert fg.any() and bg.any(), (name, key)
            assert not (fg & bg).any(), (name, key)
            # background seeds never lie on GT foreground (SOURCE.md)
            assert not (bg & (s.gt == 1)).any(), (name, key)


@pytest.mark.data
def test_known_sample(samples):
    s = samples["banana1"]
    assert s.image.shape == (480, 640, 3)
    assert s.rect == (15, 19, 605, 417)  # bb_GT: 16 20 620 436
    cross = samples["cross"]
    assert cross.rect == (0, 4, 450, 596)  # reaches the right and bottom edges
    assert cross.image.shape == (600, 450, 3)
    # llama and teddy have no unknown band
    assert not (samples["llama"].gt == gc.UNKNOWN).any()
    assert (s.gt == gc.UNKNOWN).any()


@pytest.mark.data
def test_gt_scores_zero(samples):
    for s in samples.values():
        assert gc.grabcut_error(s.gt == 1, s.gt, s.rect) == 0.0
