"""Pictures of optical flow: Middlebury colour coding and arrow overlays.

:func:`flow_to_color` follows the colour wheel of the Middlebury flow benchmark
(Baker et al. 2011, ``colorcode.cpp`` / ``flowToColor.m``): hue gives the direction,
saturation the magnitude relative to ``max_magnitude``, white is no motion, and
unknown flow is black. :func:`draw_flow_arrows` draws sparse vectors on a frame.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ._backend import to_numpy

__all__ = ["UNKNOWN_FLOW", "draw_flow_arrows", "flow_to_color"]

#: Flow components above this magnitude are unknown (Middlebury's threshold).
UNKNOWN_FLOW = 1e9


@functools.cache
def _color_wheel() -> np.ndarray:
    """(55, 3) float RGB colours of the Middlebury wheel, red through magenta."""
    ry, yg, gc, cb, bm, mr = 15, 6, 4, 11, 13, 6
    rows = []
    # (length, channel that changes, rising?, constant channels) per segment, as in
    # Middlebury's makeColorWheel: rising 255*i/n, falling 255 - floor(255*i/n)
    segments = (
        (ry, 1, True, {0: 255}),
        (yg, 0, False, {1: 255}),
        (gc, 2, True, {1: 255}),
        (cb, 1, False, {2: 255}),
        (bm, 0, True, {2: 255}),
        (mr, 2, False, {0: 255}),
    )
    for n, channel, rising, fixed in segments:
        seg = np.zeros((n, 3))
        ramp = np.floor(255.0 * np.arange(n) / n)
        seg[:, channel] = ramp if rising else 255.0 - ramp
        for c, value in fixed.items():
            seg[:, c] = value
        rows.append(seg)
    return np.concatenate(rows, axis=0)


def flow_to_color(flow: Any, max_magnitude: float | None = None) -> np.ndarray:
    """Middlebury colour coding of a dense flow field.

    Parameters
    ----------
    flow : array_like, shape (M, N, 2)
        ``(u, v)`` per pixel. NaN, infinite or ``|value| > 1e9`` components mark
        unknown flow.
    max_magnitude : float, optional
        Magnitude drawn at full saturation; larger vectors are darkened (x 0.75) as
        in the Middlebury code. Default: the largest known magnitude.

    Returns
    -------
    ndarray, shape (M, N, 3), uint8
        RGB picture; unknown pixels are black, zero flow is white.

    Raises
    ------
    ValueError
        ``flow`` is not (M, N, 2), or ``max_magnitude`` is not positive.
    TypeError
        ``flow`` is not numeric.
    """
    f = to_numpy(flow)
    if f.dtype.kind not in "biuf":
        raise TypeError(f"flow must be numeric, got dtype {f.dtype}")
    if f.ndim != 3 or f.shape[-1] != 2:
        raise ValueError(f"flow must have shape (M, N, 2), got {tuple(f.shape)}")
    f = f.astype(np.float64)
    unknown = ~np.isfinite(f).all(-1) | (np.abs(f) > UNKNOWN_FLOW).any(-1)
    u = np.where(unknown, 0.0, f[..., 0])
    v = np.where(unknown, 0.0, f[..., 1])
    rad = np.hypot(u, v)
    if max_magnitude is None:
        top = float(rad.max()) if rad.size else 0.0
    else:
        top = float(max_magnitude)
        if not np.isfinite(top) or top <= 0:
            raise ValueError(
                f"max_magnitude must be positive and finite, got {max_magnitude!r}"
            )
    top = max(top, 1e-9)
    u, v, rad = u / top, v / top, rad / top
    wheel = _color_wheel()
    ncols = len(wheel)
    angle = np.arctan2(-v, -u) / np.pi  # in [-1, 1]
    fk = (angle + 1.0) / 2.0 * (ncols - 1)
    k0 = np.floor(fk).astype(np.int64)
    k1 = (k0 + 1) % ncols
    frac = (fk - k0)[..., None]
    col = ((1.0 - frac) * wheel[k0] + frac * wheel[k1]) / 255.0
    inside = (rad <= 1.0)[..., None]
    col = np.where(inside, 1.0 - rad[..., None] * (1.0 - col), col * 0.75)
    out = np.floor(255.0 * col).astype(np.uint8)
    out[unknown] = 0
    return out


def draw_flow_arrows(
    image: Any,
    points: Any,
    vectors: Any,
    *,
    color: tuple[int, int, int] | None = (0, 255, 0),
    scale: float = 1.0,
    thickness: int = 1,
) -> np.ndarray:
    """Draw sparse flow vectors as arrows on a copy of ``image``.

    Parameters
    ----------
    image : array_like, shape (M, N) or (M, N, C)
        The frame the vectors start in (grey, RGB or RGBA; uint8, or floats in
        [0, 1]).
    points : array_like, shape (K, 2)
        Arrow tails ``(x, y)``.
    vectors : array_like, shape (K, 2)
        ``(dx, dy)``; the arrow heads are at ``points + scale * vectors``.
    color : (r, g, b) or None
        Arrow colour; None colours each arrow by its direction on the Middlebury
        wheel.
    scale : float
        Length factor of the drawn arrows (small motions read better enlarged).
    thickness : int
        Line width in pixels.

    Returns
    -------
    ndarray, shape (M, N, 3), uint8
        RGB picture.

    Raises
    ------
    ValueError
        Bad shapes (the message gives them) or a non-positive ``scale``.
    """
    import cv2

    img = to_numpy(image)
    if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[-1] not in (1, 3, 4)):
        raise ValueError(
            f"image must be (M, N) or (M, N, C) with C in 1, 3, 4, got shape "
            f"{tuple(img.shape)}"
        )
    if img.dtype.kind == "f":
        img = img * 255.0 if img.size and float(np.nanmax(img)) <= 1.0 else img
        img = np.clip(np.nan_to_num(img), 0, 255)
    img = img.astype(np.uint8)
    if img.ndim == 2 or img.shape[-1] == 1:
        img = np.repeat(img.reshape(img.shape[0], img.shape[1], 1), 3, axis=2)
    out = np.ascontiguousarray(img[..., :3]).copy()
    pts = np.asarray(to_numpy(points), dtype=np.float64)
    vec = np.asarray(to_numpy(vectors), dtype=np.float64)
    if pts.ndim != 2 or pts.shape[-1] != 2 or vec.shape != pts.shape:
        raise ValueError(
            f"points and vectors must both have shape (K, 2), got {pts.shape} and "
            f"{vec.shape}"
        )
    if not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be positive and finite, got {scale!r}")
    if len(pts) == 0:
        return out
    if color is None:
        colors = flow_to_color(vec[None, :, :])[0]
    else:
        colors = np.broadcast_to(np.asarray(color, dtype=np.int64), (len(pts), 3))
    heads = pts + scale * vec
    for (x0, y0), (x1, y1), c in zip(pts, heads, colors, strict=True):
        if not (np.isfinite(x1) and np.isfinite(y1)):
            continue
        length = max(np.hypot(x1 - x0, y1 - y0), 1e-6)
        cv2.arrowedLine(
            out,
            (int(round(x0)), int(round(y0))),
            (int(round(x1)), int(round(y1))),
            tuple(int(v) for v in c),
            int(thickness),
            cv2.LINE_AA,
            0,
            min(0.5, 4.0 / length),
        )
    return out
