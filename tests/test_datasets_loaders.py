"""Tests of the benchmark loaders' folder lookup and input checks (GrabCut, Middlebury
stereo and flow) and of the argument checks of vision_cuts.datasets.synthetic."""

from __future__ import annotations

import numpy as np
import pytest
from test_datasets_grabcut import grabcut_layout

from vision_cuts.datasets import grabcut as gc
from vision_cuts.datasets import middlebury as mb
from vision_cuts.datasets import middlebury_flow as mf
from vision_cuts.datasets import synthetic
from vision_cuts.io import write_flo

# ------------------------------------------------------------------------- GrabCut


def test_grabcut_folder_under_another_name(tmp_path):
    mine = grabcut_layout(tmp_path / "alt" / "my_grabcut", name="toy", box="2 1 4 3")
    assert gc.data_root(mine) == mine
    assert gc.grabcut_names(mine) == ["toy"]
    s = gc.load_grabcut("toy", mine)
    assert s.rect == (1, 0, 3, 3)
    assert gc.load_grabcut("toy", gc.data_root(mine)).rect == s.rect


def test_grabcut_folder_ignores_a_sibling_named_grabcut(tmp_path):
    mine = grabcut_layout(tmp_path / "alt" / "my_grabcut", name="toy", box="2 1 4 3")
    grabcut_layout(tmp_path / "alt" / "grabcut", name="other", box="1 1 5 4")
    assert gc.grabcut_names(mine) == ["toy"]
    assert gc.load_grabcut("toy", mine).rect == (1, 0, 3, 3)
    with pytest.raises(ValueError, match=r"unknown GrabCut image 'other'.*: toy$"):
        gc.load_grabcut("other", mine)
    # the folder holding grabcut/ still reads that one
    assert gc.grabcut_names(tmp_path / "alt") == ["other"]


def test_grabcut_folder_as_current_directory(tmp_path, monkeypatch):
    mine = grabcut_layout(tmp_path / "my_grabcut")
    monkeypatch.chdir(mine)
    assert gc.grabcut_names(".") == ["toy"]
    assert gc.load_grabcut("toy", ".").rect == (1, 0, 3, 3)


def test_grabcut_named_folder_still_returns_its_parent(tmp_path):
    d = grabcut_layout(tmp_path / "grabcut")
    assert gc.data_root(d) == tmp_path
    assert gc.data_root(tmp_path) == tmp_path


@pytest.mark.parametrize(
    "content, match",
    [
        (b"nan 1 2 3", r"bb_GT[/\\]toy\.txt: expected four integers.*'nan'"),
        (b"1 2 inf 4", r"bb_GT[/\\]toy\.txt: expected four integers.*'inf'"),
        (b"1 -inf 2 3", r"bb_GT[/\\]toy\.txt: expected four integers.*'-inf'"),
        (b"\xff\xfe\x00\x01", r"bb_GT[/\\]toy\.txt: expected ASCII text"),
    ],
)
def test_grabcut_malformed_box_names_the_file(tmp_path, content, match):
    d = grabcut_layout(tmp_path / "grabcut")
    (d / "bb_GT" / "toy.txt").write_bytes(content)
    with pytest.raises(ValueError, match=match):
        gc.load_grabcut("toy", tmp_path, verify=False)


@pytest.mark.parametrize("part", ["garbage", "header", "half"])
def test_grabcut_unreadable_scribbles_name_the_file(tmp_path, part):
    d = grabcut_layout(tmp_path / "grabcut")
    png = d / "scribbles-set-1" / "toy-anno.png"
    data = png.read_bytes()
    cut = {"garbage": b"not a png at all", "header": data[:40]}
    png.write_bytes(cut.get(part, data[: len(data) // 2]))
    with pytest.raises(ValueError, match=r"toy-anno\.png: expected a palette PNG"):
        gc.load_grabcut("toy", tmp_path)


# ---------------------------------------------------------------- Middlebury stereo


def _stereo_set(root, name="venus", shape=(4, 5), right_shape=None, gt=None):
    """A small set ``name`` under ``root/middlebury_stereo`` with the files of SETS."""
    cv2 = pytest.importorskip("cv2")
    spec = mb.SETS[name]
    folder = root / "middlebury_stereo" / name
    folder.mkdir(parents=True, exist_ok=True)
    left = np.arange(np.prod(shape) * 3, dtype=np.uint8).reshape(*shape, 3)
    right = np.zeros((*(right_shape or shape), 3), np.uint8)
    if gt is None:
        gt = np.full(shape, 3 * spec.scale, np.uint8)
        gt[0, 0] = 0
    cv2.imwrite(str(folder / spec.left), left)
    cv2.imwrite(str(folder / spec.right), right)
    cv2.imwrite(str(folder / spec.gt), gt)
    return folder


def test_stereo_fake_set_loads(tmp_path):
    _stereo_set(tmp_path, "venus")
    s = mb.load_stereo("venus", tmp_path)
    assert s.left.shape == s.right.shape == (4, 5, 3)
    assert s.gt_disparity.shape == (4, 5) and s.max_disp == 3
    assert s.gt_disparity[0, 0] == 0.0  # a valid 0 px disparity for venus
    _stereo_set(tmp_path, "tsukuba")
    s = mb.load_stereo("tsukuba", tmp_path)
    assert np.isnan(s.gt_disparity[0, 0]) and s.max_disp == 3


def test_stereo_right_image_of_another_size(tmp_path):
    _stereo_set(tmp_path, "venus", right_shape=(3, 5))
    with pytest.raises(
        ValueError, match=r"im6\.ppm: right image shape \(3, 5, 3\).*\(4, 5, 3\)"
    ):
        mb.load_stereo("venus", tmp_path)


def test_stereo_gt_of_another_size(tmp_path):
    _stereo_set(tmp_path, "venus", gt=np.full((4, 2), 8, np.uint8))
    with pytest.raises(ValueError, match=r"disp2\.pgm: GT shape \(4, 2\).*\(4, 5\)"):
        mb.load_stereo("venus", tmp_path)


def test_stereo_gt_without_known_pixel(tmp_path):
    _stereo_set(tmp_path, "tsukuba", gt=np.zeros((4, 5), np.uint8))
    with pytest.raises(
        ValueError, match=r"truedisp\.row3\.col3\.pgm: GT has no known pixel"
    ):
        mb.load_stereo("tsukuba", tmp_path)


@pytest.mark.parametrize(
    ("gt", "words"),
    [
        (np.full((4, 5), 20480, np.uint16), r"got uint16 with 1 channel"),
        (np.full((4, 5, 3), 80, np.uint8), r"got uint8 with 3 channel"),
    ],
)
def test_stereo_gt_in_another_format(tmp_path, gt, words):
    """A 16-bit GT was cut to 8 bits (20480 read as 80 / 4 = 20, not 5120) and a
    colour one mixed into luminance, silently; either is an error naming the file."""
    _stereo_set(tmp_path, "teddy", gt=gt)  # (a .png GT: PGM holds no colour)
    with pytest.raises(ValueError, match=r"disp2\.png: a ground-truth disparity "
                       r"file must be 8-bit, one channel .*" + words):
        mb.load_stereo("teddy", tmp_path)


def test_bad_pixel_rate_threshold_is_checked():
    d = np.zeros((2, 2))
    assert mb.bad_pixel_rate(d, d + 0.5, threshold=1) == 0.0
    for bad in (-1, float("nan"), float("inf"), "1"):
        with pytest.raises(ValueError, match="threshold must be a finite number >= 0"):
            mb.bad_pixel_rate(d, d, threshold=bad)


@pytest.mark.parametrize("name", [["venus"], ("venus",), 3, None])
def test_stereo_name_of_another_type(tmp_path, name):
    with pytest.raises(
        TypeError, match=r"name must be a str.*got (list|tuple|int|NoneType)"
    ):
        mb.load_stereo(name, tmp_path)


# ------------------------------------------------------------------ Middlebury flow


def test_flow_second_frame_of_another_size(tmp_path):
    cv2 = pytest.importorskip("cv2")
    folder = tmp_path / "middlebury_flow" / "Grove2"
    folder.mkdir(parents=True)
    cv2.imwrite(str(folder / "frame10.png"), np.zeros((6, 8, 3), np.uint8))
    cv2.imwrite(str(folder / "frame11.png"), np.zeros((6, 7, 3), np.uint8))
    write_flo(folder / "flow10.flo", np.zeros((6, 8, 2), np.float32))
    with pytest.raises(
        ValueError, match=r"frame11\.png: shape \(6, 7, 3\).*\(6, 8, 3\)"
    ):
        mf.load_flow("Grove2", tmp_path)


def test_flow_name_of_another_type(tmp_path):
    with pytest.raises(TypeError, match=r"name must be a str.*got list"):
        mf.load_flow(["Grove2"], tmp_path)


# ------------------------------------------------------------------------ real data


@pytest.mark.data
def test_real_stereo_sets_pass_the_checks(data_dir):
    if not (data_dir / "middlebury_stereo").is_dir():
        pytest.skip("no middlebury_stereo data")
    for name in mb.stereo_names():
        s = mb.load_stereo(name, data_dir)
        assert s.right.shape == s.left.shape
        assert s.gt_disparity.shape == s.left.shape[:2]
        assert 0 < s.max_disp < 100


@pytest.mark.data
def test_real_grabcut_folder_as_root(data_dir):
    if not (data_dir / "grabcut").is_dir():
        pytest.skip("no grabcut data")
    names = gc.grabcut_names(data_dir)
    assert gc.grabcut_names(data_dir / "grabcut") == names
    assert gc.data_root(data_dir / "grabcut") == data_dir
    # every box file of the published split passes the stricter parsing
    for name in names:
        assert gc.load_grabcut(name, data_dir / "grabcut").rect[2] > 0


# ------------------------------------------------------------------------ synthetic


def test_segmentation_unary_uint16_matches_uint8(rng):
    img8 = rng.integers(0, 256, (20, 30, 3)).astype(np.uint8)
    img16 = img8.astype(np.uint16) * 257  # the same colours at 16 bits
    box = (2, 2, 10, 10)
    expected = synthetic.segmentation_unary(img8, box)
    np.testing.assert_array_equal(synthetic.segmentation_unary(img16, box), expected)
    # full 16-bit range, every bin reachable
    wide = rng.integers(0, 65536, (20, 30, 3)).astype(np.uint16)
    u = synthetic.segmentation_unary(wide, box)
    assert u.shape == (20, 30, 2) and u.dtype == np.int32 and (u >= 0).all()


def test_segmentation_unary_bad_inputs(rng):
    box = (1, 1, 3, 3)
    with pytest.raises(TypeError, match="image must have .* dtype, got complex128"):
        synthetic.segmentation_unary(np.zeros((4, 4, 3), complex), box)
    with pytest.raises(ValueError, match=r"values in \[0, 256\), got .*300"):
        synthetic.segmentation_unary(np.full((4, 4, 3), 300.0), box)
    with pytest.raises(ValueError, match=r"C >= 3, got \(4, 4, 2\)"):
        synthetic.segmentation_unary(np.zeros((4, 4, 2), np.uint8), box)
    # a box off the picture or reversed fitted the model to no pixel (flat costs)
    for bad in ((10, 10, 20, 20), (3, 3, 1, 1), (0, 0, 4, 5), (-1, 0, 2, 2)):
        with pytest.raises(ValueError, match=r"fg_box must be \(y0, x0, y1, x1\) "
                           r"with 0 <= y0 < y1 <= 4 and 0 <= x0 < x1 <= 4"):
            synthetic.segmentation_unary(np.zeros((4, 4, 3), np.uint8), bad)


def test_contrast_weights_largest_weight_fits_int32():
    top = np.iinfo(np.int32).max
    w = synthetic.contrast_weights(np.zeros((3, 3)), lam=float(top))
    assert w.max() == top and w.min() == 0  # the last column/row has no +x/+y arc
    for lam, scale in ((3e9, 1.0), (5e8, 10.0), (-1.0, 1.0), (float("nan"), 1.0)):
        with pytest.raises(ValueError, match=r"lam \* scale .*int32.*lam="):
            synthetic.contrast_weights(np.zeros((3, 3)), lam=lam, scale=scale)


def test_contrast_weights_narrow_volume_with_channel_axis(rng):
    vol = rng.random((6, 7, 3))
    assert synthetic.contrast_weights(vol).shape == (2, 6, 7)  # read as an image
    assert synthetic.contrast_weights(vol[..., None]).shape == (3, 6, 7, 3)


def test_assignment_costs_flow_needs_features(rng):
    for shape in ((1, 0, 7), (1, 5, 0)):
        with pytest.raises(ValueError, match=r"'flow' family needs n >= 1 and m >= 1"):
            synthetic.assignment_costs("flow", shape, rng)
    with pytest.raises(ValueError, match=r"shape must be \(B, n, m\), got \(5, 7\)"):
        synthetic.assignment_costs("ties", (5, 7), rng)
    assert synthetic.assignment_costs("flow", (1, 1, 1), rng).shape[0] == 1
