"""Loader and error measure for the Middlebury stereo sets (2001 + quarter-size teddy).

Layout read (``<root>/middlebury_stereo``, see ``SOURCE.md`` in the data folder): one
folder per set with the standard pair and the left-view ground truth (GT). Disparity in
pixels = stored value / scale; a stored 0 is unknown for tsukuba and teddy (NaN here),
and a valid 0 px disparity for the other sets.

``root`` is the folder holding ``middlebury_stereo/``: the ``root`` argument, else the
environment variable ``VISION_CUTS_DATA``.

The evaluation protocol (DESIGN.md, "Evaluation protocols"): bad-t = % of the pixels
with known GT whose disparity error exceeds t px, invalid or missing (NaN, infinite,
negative) output counted as bad (:func:`bad_pixel_rate`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ._common import data_parent

__all__ = [
    "SETS",
    "StereoSample",
    "bad_pixel_rate",
    "data_root",
    "load_stereo",
    "stereo_names",
]

_SUBDIR = "middlebury_stereo"


class _Set(NamedTuple):
    left: str
    right: str
    gt: str
    scale: int
    zero_unknown: bool


#: name -> (left file, right file, left GT file, GT scale, stored 0 = unknown)
SETS = {
    "tsukuba": _Set(
        "scene1.row3.col3.ppm",
        "scene1.row3.col4.ppm",
        "truedisp.row3.col3.pgm",
        16,
        True,
    ),
    "venus": _Set("im2.ppm", "im6.ppm", "disp2.pgm", 8, False),
    "teddy": _Set("im2.png", "im6.png", "disp2.png", 4, True),
    "poster": _Set("im2.ppm", "im6.ppm", "disp2.pgm", 8, False),
    "barn1": _Set("im2.ppm", "im6.ppm", "disp2.pgm", 8, False),
    "barn2": _Set("im2.ppm", "im6.ppm", "disp2.pgm", 8, False),
    "bull": _Set("im2.ppm", "im6.ppm", "disp2.pgm", 8, False),
}


class StereoSample(NamedTuple):
    """One stereo pair: RGB uint8 images, GT (float32 px, NaN = unknown), GT scale and
    the largest integer disparity to search (``ceil`` of the largest GT value)."""

    left: np.ndarray
    right: np.ndarray
    gt_disparity: np.ndarray
    scale: int
    max_disp: int


def stereo_names() -> list[str]:
    """Names of the stereo sets, in the benchmark's order."""
    return list(SETS)


def data_root(path: str | os.PathLike | None = None) -> Path:
    """The benchmark data folder, the one holding ``middlebury_stereo/``.

    ``path`` defaults to ``VISION_CUTS_DATA``; the ``middlebury_stereo`` folder
    itself is accepted too. Raises FileNotFoundError when neither is given or the
    folder is missing.
    """
    return data_parent(path, _SUBDIR)


def _read(path: Path, color: bool) -> np.ndarray:
    import cv2

    if not path.is_file():
        raise FileNotFoundError(f"missing stereo file {path}")
    # the ground truth as stored: read as grey, a 16-bit or colour file would be
    # cut to 8 bits or mixed into luminance (wrong disparities, silently)
    img = cv2.imread(str(path), cv2.IMREAD_COLOR if color else cv2.IMREAD_UNCHANGED)
    if img is None:
        raise OSError(f"could not read {path}")
    if color:
        return img[..., ::-1].copy()
    if img.dtype != np.uint8 or img.ndim != 2:
        channels = 1 if img.ndim == 2 else img.shape[2]
        raise ValueError(
            f"{path}: a ground-truth disparity file must be 8-bit, one channel (the "
            f"sets' format), got {img.dtype} with {channels} channel(s)"
        )
    return img


def load_stereo(name: str, root: str | os.PathLike | None = None) -> StereoSample:
    """Load one set: ``(left, right, gt_disparity, scale, max_disp)``.

    Raises
    ------
    TypeError
        ``name`` is not a string.
    ValueError
        Unknown ``name``; the right image or the GT does not have the left
        image's size; the GT is not an 8-bit grey file; the GT has no known pixel.
    FileNotFoundError
        No data folder, or a file of the set is missing.
    """
    if not isinstance(name, str):
        raise TypeError(
            f"name must be a str, one of {stereo_names()}, got {type(name).__name__} "
            f"{name!r}"
        )
    if name not in SETS:
        raise ValueError(f"name must be one of {stereo_names()}, got {name!r}")
    spec = SETS[name]
    folder = data_root(root) / _SUBDIR / name
    left = _read(folder / spec.left, True)
    right = _read(folder / spec.right, True)
    if right.shape != left.shape:
        raise ValueError(
            f"{folder / spec.right}: right image shape {right.shape} differs from "
            f"the left image's {left.shape} ({folder / spec.left})"
        )
    raw = _read(folder / spec.gt, False)
    if raw.shape != left.shape[:2]:
        raise ValueError(
            f"{folder / spec.gt}: GT shape {raw.shape} differs from the left "
            f"image's {left.shape[:2]} ({folder / spec.left})"
        )
    gt = raw.astype(np.float32) / spec.scale
    if spec.zero_unknown:
        gt[raw == 0] = np.nan
        if not (raw != 0).any():
            raise ValueError(
                f"{folder / spec.gt}: GT has no known pixel (every stored value is "
                f"0, which means unknown for {name}); expected at least one nonzero "
                "disparity"
            )
    max_disp = int(math.ceil(float(np.nanmax(gt))))
    return StereoSample(left, right, gt, spec.scale, max_disp)


def bad_pixel_rate(
    disparity: np.ndarray, gt: np.ndarray, threshold: float = 1.0
) -> float:
    """% of the pixels with known GT whose ``|disparity - gt| > threshold``.

    Dense protocol: NaN, infinite or negative output at a known-GT pixel is bad.
    ``threshold`` is a finite number >= 0 (pixels).
    """
    if not (isinstance(threshold, (int, float, np.number)) and 0 <= threshold < np.inf):
        raise ValueError(f"threshold must be a finite number >= 0, got {threshold!r}")
    d = np.asarray(disparity, dtype=np.float64)
    g = np.asarray(gt, dtype=np.float64)
    if d.shape != g.shape:
        raise ValueError(
            f"disparity and gt must have the same shape, got {d.shape} and {g.shape}"
        )
    known = np.isfinite(g)
    total = int(known.sum())
    if total == 0:
        raise ValueError("gt has no known pixel")
    valid = np.isfinite(d) & (d >= 0)
    err = np.abs(np.where(valid, d, 0.0) - np.where(known, g, 0.0))
    bad = known & (~valid | (err > threshold))
    return 100.0 * float(bad.sum()) / total
