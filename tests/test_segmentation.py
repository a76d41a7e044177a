"""segment(), box_segment() and the ``vision-cuts segment`` command."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import potts_energy

import vision_cuts as vc
from vision_cuts import cli
from vision_cuts.segmentation import box_segment, segment


@pytest.mark.parametrize("shape", [(3, 4), (2, 2, 3)])
def test_segment_is_global_minimum(rng, shape):
    n = int(np.prod(shape))
    for _ in range(5):
        unary = rng.integers(-20, 20, size=(*shape, 2))
        weights = rng.integers(0, 10, size=(len(shape), *shape))
        labels = segment(unary, weights, backend="cpu")
        assert labels.shape == shape and labels.dtype == np.uint8
        best = min(
            potts_energy(unary, weights, np.array(bits).reshape(shape))
            for bits in np.ndindex(*([2] * n))
        )
        assert potts_energy(unary, weights, labels) == best


def _two_tone(h=60, w=80):
    img = np.zeros((h, w, 3), dtype=np.uint8)
    img[...] = (30, 60, 200)
    img[20:45, 25:60] = (220, 180, 40)  # the object
    noise = np.random.default_rng(1).integers(0, 20, size=img.shape)
    return np.clip(img.astype(int) + noise, 0, 255).astype(np.uint8)


def test_box_segment_finds_object():
    img = _two_tone()
    mask = box_segment(img, (15, 10, 60, 45), backend="cpu")
    assert mask.shape == img.shape[:2] and mask.dtype == np.uint8
    truth = np.zeros(img.shape[:2], dtype=bool)
    truth[20:45, 25:60] = True
    assert (mask.astype(bool) == truth).mean() > 0.98
    # outside the box is background, always
    outside = np.ones(img.shape[:2], dtype=bool)
    outside[10:55, 15:75] = False
    assert not mask[outside].any()


@pytest.mark.parametrize(
    ("rect", "kw", "err", "match"),
    [
        ((0, 0, 0, 10), {}, ValueError, "width and height must be positive"),
        ((10, 10, -5, 5), {}, ValueError, "width and height must be positive"),
        ((500, 500, 10, 10), {}, ValueError, "does not overlap"),
        ((1, 2, 3), {}, ValueError, "rect must be"),
        ((0, 0, 10, 10), {"iterations": 0}, ValueError, "iterations must be"),
        ((0, 0, 10, 10), {"bins": 1}, ValueError, "bins must be"),
    ],
)
def test_box_segment_bad_inputs(rect, kw, err, match):
    with pytest.raises(err, match=match):
        box_segment(_two_tone(), rect, backend="cpu", **kw)


def test_box_segment_bad_images():
    with pytest.raises(ValueError, match="image must be"):
        box_segment(np.zeros((4, 4, 2), np.uint8), (0, 0, 2, 2))
    with pytest.raises(TypeError, match="image must be uint8"):
        box_segment(np.zeros((4, 4, 3), np.float32), (0, 0, 2, 2))
    # grey and RGBA pictures are accepted
    grey = _two_tone()[..., 0]
    assert box_segment(grey, (15, 10, 60, 45), backend="cpu").shape == grey.shape
    rgba = np.dstack([_two_tone(), np.full((60, 80), 255, np.uint8)])
    assert box_segment(rgba, (15, 10, 60, 45), backend="cpu").shape == (60, 80)


def test_cli_segment_writes_mask_and_overlay(tmp_path, capsys):
    import cv2

    path = tmp_path / "in.png"
    cv2.imwrite(str(path), _two_tone()[..., ::-1])
    mask_png, over_png = tmp_path / "mask.png", tmp_path / "over.png"
    rc = cli.main(["segment", str(path), "--rect", "15,10,60,45", "-o", str(mask_png),
                   "--overlay", str(over_png), "--backend", "cpu"])
    assert rc == 0
    mask = cv2.imread(str(mask_png), cv2.IMREAD_UNCHANGED)
    assert mask.shape == (60, 80) and set(np.unique(mask)) <= {0, 255}
    assert (mask[20:45, 25:60] == 255).mean() > 0.95
    over = cv2.imread(str(over_png))
    assert over.shape == (60, 80, 3)
    assert "segmented 80x60 image" in capsys.readouterr().out


def test_cli_builtin_sample(tmp_path):
    out = tmp_path / "m.png"
    assert cli.main(["segment", "camera", "--rect", "100,50,300,400", "-o", str(out),
                     "--backend", "cpu"]) == 0
    assert out.exists()


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["segment", "/nonexistent.png"], "cannot read image"),
        (["segment", "sample:nothing"], "unknown sample"),
        (["segment", "camera", "--rect", "900,900,5,5"], "does not overlap"),
    ],
)
def test_cli_errors(argv, match):
    with pytest.raises(SystemExit, match=match):
        cli.main(argv)


def test_cli_bad_rect_syntax(capsys):
    with pytest.raises(SystemExit):
        cli.main(["segment", "camera", "--rect", "1,2"])
    assert "--rect must be x,y,w,h" in capsys.readouterr().err


def test_public_names():
    assert vc.maxflow_grid is not None and callable(segment)
