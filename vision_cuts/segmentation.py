"""Binary segmentation front ends built on :func:`vision_cuts.maxflow_grid`."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ._backend import is_cupy_array
from .grid import grid_energy
from .maxflow import maxflow_grid

__all__ = ["box_segment", "contrast_weights", "segment"]

log = logging.getLogger(__name__)


def segment(
    unary: Any,
    weights: Any = None,
    *,
    pairwise: Any = None,
    scale: float | None = None,
    backend: str = "auto",
) -> Any:
    """Minimum-energy binary labelling of a 2-D or 3-D grid energy.

    Parameters
    ----------
    unary : ndarray, shape (M, N, 2) or (P, M, N, 2)
        Cost of label 0 (background) and label 1 (foreground) per node.
    weights : ndarray, shape (ndim, *grid), optional
        Smoothness weight between each node and its forward neighbour (see
        :func:`vision_cuts.grid_energy`).
    pairwise : ndarray, optional
        Pairwise matrix, as in :func:`vision_cuts.grid_energy`.
    scale : float, optional
        Quantise floating costs to ``round(value * scale)``.
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy inputs or when a device is present, else the
        CPU (``VISION_CUTS_BACKEND`` overrides it).

    Returns
    -------
    labels : ndarray of uint8, grid shape
        1 = foreground (sink side), 0 = background; the exact global minimum of E.
    """
    energy = grid_energy(unary, pairwise, weights=weights, scale=scale)
    return maxflow_grid(energy, backend=backend).labels


def contrast_weights(image: Any, *, lam: float = 50.0) -> np.ndarray:
    """Contrast-sensitive weights ``lam * exp(-beta |I_p - I_q|^2)`` (int32).

    ``beta = 1 / (2 <|I_p - I_q|^2>)`` as in GrabCut. ``image`` is (M, N), (M, N, C)
    or a single-channel volume (P, M, N). Returns ``(ndim, *grid)`` weights.
    """
    from .datasets.synthetic import contrast_weights as _cw  # noqa: I001

    return _cw(np.asarray(image), lam=lam)


def _histogram_unary(
    codes: np.ndarray, fg: np.ndarray, nbins: int, scale: float
) -> np.ndarray:
    hf = np.bincount(codes[fg], minlength=nbins).astype(np.float64) + 1.0
    hb = np.bincount(codes[~fg], minlength=nbins).astype(np.float64) + 1.0
    unary = np.empty((*codes.shape, 2), dtype=np.int32)
    unary[..., 0] = np.rint(-scale * np.log(hb / hb.sum()))[codes]
    unary[..., 1] = np.rint(-scale * np.log(hf / hf.sum()))[codes]
    return unary


def box_segment(
    image: Any,
    rect: tuple,
    *,
    iterations: int = 3,
    lam: float = 50.0,
    bins: int = 16,
    backend: str = "auto",
) -> np.ndarray:
    """Segment the object inside a rectangle with iterated colour-histogram cuts.

    Pixels outside ``rect`` are fixed to background; colour models (joint RGB
    histograms) are re-estimated from the current mask after each cut.

    Parameters
    ----------
    image : ndarray, shape (M, N, 3) or (M, N), uint8
        The picture.
    rect : tuple of int
        ``(x, y, width, height)`` of the box around the object, in pixels.
    iterations : int
        Number of cut / re-estimate rounds (>= 1).
    lam : float
        Smoothness strength.
    bins : int
        Histogram bins per channel (2..64).
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU when a device is present, else the CPU
        (``VISION_CUTS_BACKEND`` overrides it).

    Returns
    -------
    mask : ndarray of uint8, shape (M, N)
        1 = object, 0 = background.
    """
    img = image.get() if is_cupy_array(image) else np.asarray(image)
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    if img.ndim != 3 or img.shape[-1] not in (3, 4):
        raise ValueError(
            f"image must be (M, N), (M, N, 3) or (M, N, 4), got shape {img.shape}"
        )
    if img.dtype != np.uint8:
        raise TypeError(f"image must be uint8, got dtype {img.dtype}")
    img = img[..., :3]
    h, w = img.shape[:2]
    try:
        x, y, rw, rh = (int(v) for v in rect)
    except (TypeError, ValueError):
        raise ValueError(f"rect must be (x, y, width, height), got {rect!r}") from None
    if rw <= 0 or rh <= 0:
        raise ValueError(f"rect width and height must be positive, got {rect!r}")
    x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + rw, w), min(y + rh, h)
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"rect {rect!r} does not overlap the {w}x{h} image")
    if not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be an integer >= 1, got {iterations!r}")
    if not 2 <= bins <= 64:
        raise ValueError(f"bins must be in [2, 64], got {bins}")
    q = img.astype(np.int32) * bins // 256
    codes = (q[..., 0] * bins + q[..., 1]) * bins + q[..., 2]
    inside = np.zeros((h, w), dtype=bool)
    inside[y0:y1, x0:x1] = True
    weights = contrast_weights(img, lam=lam)
    mask = inside.copy()
    big = np.int32(1 << 20)
    for it in range(iterations):
        unary = _histogram_unary(codes, mask, bins**3, 10.0)
        unary[~inside, 1] = big  # outside the box: background only
        new = segment(unary, weights, backend=backend).astype(bool)
        changed = int((new != mask).sum())
        log.info("box_segment iteration %d: %d pixels changed", it + 1, changed)
        mask = new
        if changed == 0 or not mask.any():
            break
    return mask.astype(np.uint8)
