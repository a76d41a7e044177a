"""Loader and error measures for the Middlebury optical-flow sequences with GT.

Layout read (``<root>/middlebury_flow``, see ``SOURCE.md`` in the data folder): one
folder per sequence with ``frame10.png``, ``frame11.png`` (RGB, 8 bit) and
``flow10.flo``, the ground-truth (GT) flow from frame10 to frame11: frame10(x, y)
corresponds to frame11(x + u, y + v). Unknown GT (``|value| > 1e9``) is NaN here.

``root`` is the folder holding ``middlebury_flow/``: the ``root`` argument, else the
environment variable ``VISION_CUTS_DATA``.

The evaluation protocol (DESIGN.md, "Evaluation protocols"): average endpoint error
(EPE) over the pixels with known GT (:func:`dense_epe`); for sparse output, EPE at the
matched points, reported with the number of points (:func:`sparse_epe`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ._common import data_parent

__all__ = [
    "SEQUENCES",
    "FlowSample",
    "data_root",
    "dense_epe",
    "flow_names",
    "load_flow",
    "sparse_epe",
]

_SUBDIR = "middlebury_flow"

#: The sequences with public GT, in the benchmark's order.
SEQUENCES = ("Dimetrodon", "Grove2", "Hydrangea", "RubberWhale", "Urban2")


class FlowSample(NamedTuple):
    """One pair: RGB uint8 frames and the GT flow (float32 (M, N, 2), NaN = unknown)."""

    frame0: np.ndarray
    frame1: np.ndarray
    gt_flow: np.ndarray


def flow_names() -> list[str]:
    """Names of the flow sequences, in the benchmark's order."""
    return list(SEQUENCES)


def data_root(path: str | os.PathLike | None = None) -> Path:
    """The benchmark data folder, the one holding ``middlebury_flow/``.

    ``path`` defaults to ``VISION_CUTS_DATA``; the ``middlebury_flow`` folder itself
    is accepted too. Raises FileNotFoundError when neither is given or the folder is
    missing.
    """
    return data_parent(path, _SUBDIR)


def _read_rgb(path: Path) -> np.ndarray:
    import cv2

    if not path.is_file():
        raise FileNotFoundError(f"missing flow file {path}")
    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if img is None:
        raise OSError(f"could not read {path}")
    return img[..., ::-1].copy()


def load_flow(name: str, root: str | os.PathLike | None = None) -> FlowSample:
    """Load one sequence: ``(frame0, frame1, gt_flow)``.

    Raises
    ------
    TypeError
        ``name`` is not a string.
    ValueError
        Unknown ``name``; frame11 or the GT does not have frame10's size.
    FileNotFoundError
        No data folder, or a file of the sequence is missing.
    """
    from vision_cuts.io import read_flo

    if not isinstance(name, str):
        raise TypeError(
            f"name must be a str, one of {flow_names()}, got {type(name).__name__} "
            f"{name!r}"
        )
    if name not in SEQUENCES:
        raise ValueError(f"name must be one of {flow_names()}, got {name!r}")
    folder = data_root(root) / _SUBDIR / name
    frame0 = _read_rgb(folder / "frame10.png")
    frame1 = _read_rgb(folder / "frame11.png")
    if frame1.shape != frame0.shape:
        raise ValueError(
            f"{folder / 'frame11.png'}: shape {frame1.shape} differs from "
            f"frame10.png's {frame0.shape}"
        )
    gt_path = folder / "flow10.flo"
    if not gt_path.is_file():
        raise FileNotFoundError(f"missing flow file {gt_path}")
    gt = read_flo(gt_path, unknown_as_nan=True)
    if gt.shape[:2] != frame0.shape[:2]:
        raise ValueError(
            f"{gt_path}: GT is {gt.shape[1]}x{gt.shape[0]}, the frames "
            f"{frame0.shape[1]}x{frame0.shape[0]}"
        )
    return FlowSample(frame0, frame1, gt)


def _known(gt: np.ndarray) -> np.ndarray:
    return np.isfinite(gt).all(-1) & (np.abs(gt) <= 1e9).all(-1)


def dense_epe(flow: np.ndarray, gt: np.ndarray) -> float:
    """Average endpoint error over the pixels with known GT.

    Dense protocol: every known-GT pixel counts, so ``flow`` must be complete
    there; a NaN or infinite vector at a known-GT pixel is a ValueError.
    """
    f = np.asarray(flow, dtype=np.float64)
    g = np.asarray(gt, dtype=np.float64)
    if f.shape != g.shape or f.ndim != 3 or f.shape[-1] != 2:
        raise ValueError(
            f"flow and gt must both have shape (M, N, 2), got {f.shape} and {g.shape}"
        )
    known = _known(g)
    if not known.any():
        raise ValueError("gt has no known pixel")
    if not np.isfinite(f[known]).all():
        raise ValueError("flow has NaN or infinite vectors at known-GT pixels")
    return float(np.linalg.norm(f[known] - g[known], axis=-1).mean())


def sparse_epe(
    points: np.ndarray, vectors: np.ndarray, gt: np.ndarray
) -> tuple[float, int]:
    """EPE at sparse points and the number of points it averages.

    ``points`` (K, 2) are ``(x, y)`` pixel positions, rounded to the nearest pixel to
    read the GT; points outside the image or on unknown GT are left out (the count
    says how many remain). Returns ``(nan, 0)`` when none remains.
    """
    p = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    v = np.asarray(vectors, dtype=np.float64).reshape(-1, 2)
    if p.shape != v.shape:
        raise ValueError(
            f"points and vectors must have the same shape, got {p.shape} and {v.shape}"
        )
    g = np.asarray(gt, dtype=np.float64)
    h, w = g.shape[:2]
    xi, yi = np.rint(p[:, 0]).astype(np.int64), np.rint(p[:, 1]).astype(np.int64)
    inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
    gv = np.full(p.shape, np.nan)
    gv[inside] = g[yi[inside], xi[inside]]
    use = inside & _known(gv)
    if not use.any():
        return float("nan"), 0
    err = np.linalg.norm(v[use] - gv[use], axis=-1)
    return float(np.nan_to_num(err, nan=np.inf).mean()), int(use.sum())
