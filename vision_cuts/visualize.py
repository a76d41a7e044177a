"""Pictures of optical flow: Middlebury colour coding and arrow overlays.

:func:`flow_to_color` follows the colour wheel of the Middlebury flow benchmark
(Baker et al. 2011, ``colorcode.cpp`` / ``flowToColor.m``): hue gives the direction,
saturation the magnitude relative to ``max_magnitude``, white is no motion, and
unknown flow is black. :func:`draw_flow_arrows` draws sparse vectors on a frame.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ._backend import to_numpy
from ._validate import check_int, check_number, given_kind, regular_array

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
        ``flow`` is not (M, N, 2) or is a ragged nested list, or ``max_magnitude``
        is not a finite positive number.
    TypeError
        ``flow`` is not numeric or is a masked array (mark unknown flow with NaN
        instead: ``flow.filled(np.nan)``), or ``max_magnitude`` is not a number.
    """
    f = to_numpy(regular_array(flow, "flow"))
    if f.dtype.kind not in "biuf":
        raise TypeError(f"flow must be a numeric array, got {given_kind(flow, f)}")
    if f.ndim != 3 or f.shape[-1] != 2:
        raise ValueError(f"flow must have shape (M, N, 2), got {tuple(f.shape)}")
    if max_magnitude is not None:
        max_magnitude = check_number(max_magnitude, "max_magnitude", 0, above=True)
    f = f.astype(np.float64)
    unknown = ~np.isfinite(f).all(-1) | (np.abs(f) > UNKNOWN_FLOW).any(-1)
    u = np.where(unknown, 0.0, f[..., 0])
    v = np.where(unknown, 0.0, f[..., 1])
    rad = np.hypot(u, v)
    if max_magnitude is None:
        top = float(rad.max()) if rad.size else 0.0
    else:
        top = max_magnitude
    if top == 0.0:  # no known motion: any positive scale draws it white
        top = 1.0
    with np.errstate(over="ignore"):  # a tiny max_magnitude: far beyond saturation
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
        The frame the vectors start in (grey, RGB or RGBA): uint8, other integers
        (clipped to [0, 255]), bool (True drawn as 255), or floats (in [0, 1]:
        scaled by 255; else clipped to [0, 255]; NaN drawn as 0).
    points : array_like, shape (K, 2)
        Arrow tails ``(x, y)``.
    vectors : array_like, shape (K, 2)
        ``(dx, dy)``; the arrow heads are at ``points + scale * vectors``. Arrows
        with a NaN or infinite end are left out; arrows reaching far outside the
        image are drawn up to its border.
    color : (r, g, b) or None
        Arrow colour, three numbers in [0, 255]; None colours each arrow by its
        direction on the Middlebury wheel.
    scale : float
        Length factor of the drawn arrows (small motions read better enlarged).
    thickness : int
        Line width in pixels, 1 to 32767 (OpenCV's limit).

    Returns
    -------
    ndarray, shape (M, N, 3), uint8
        RGB picture.

    Raises
    ------
    ValueError
        Bad shapes (the message gives them), a ragged nested list, a ``scale`` that
        is not finite and positive, a ``thickness`` or ``color`` value out of range.
    TypeError
        An array that is not real numeric or is a masked array; a ``scale``,
        ``thickness`` or ``color`` of the wrong type.
    """
    import cv2

    img = _numeric(image, "image")
    if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[-1] not in (1, 3, 4)):
        raise ValueError(
            f"image must be (M, N) or (M, N, C) with C in 1, 3, 4, got shape "
            f"{tuple(img.shape)}"
        )
    pts = _numeric(points, "points").astype(np.float64)
    vec = _numeric(vectors, "vectors").astype(np.float64)
    if pts.ndim != 2 or pts.shape[-1] != 2 or vec.shape != pts.shape:
        raise ValueError(
            f"points and vectors must both have shape (K, 2), got {pts.shape} and "
            f"{vec.shape}"
        )
    scale = check_number(scale, "scale", 0, above=True)
    thickness = check_int(thickness, "thickness", 1, _MAX_THICKNESS)
    rgb = None if color is None else _check_color(color)
    out = _as_rgb8(img)
    if len(pts) == 0 or out.size == 0:
        return out
    if rgb is None:
        # flow_to_color calls a component beyond UNKNOWN_FLOW unknown (black); a
        # finite vector that long is drawn, so it keeps its direction at that length
        top = np.abs(vec).max(axis=1)
        long = np.isfinite(top) & (top > UNKNOWN_FLOW)
        shown = vec.copy()
        shown[long] *= (UNKNOWN_FLOW / top[long])[:, None]
        colors = flow_to_color(shown[None, :, :])[0].tolist()
    else:
        colors = [rgb] * len(pts)
    h, w = out.shape[:2]
    # segments are cut to this box: OpenCV takes C int coordinates, and the cut ends
    # lie far enough outside the image that neither an arrow head nor a thick line
    # end drawn there reaches into it
    margin = 8.0 + thickness
    box = (-margin, -margin, w - 1 + margin, h - 1 + margin)
    with np.errstate(over="ignore", invalid="ignore"):
        heads = pts + scale * vec
    for (x0, y0), (x1, y1), c in zip(
        pts.tolist(), heads.tolist(), colors, strict=True
    ):
        seg = _clip_segment(x0, y0, x1, y1, box)
        if seg is None:
            continue
        x0, y0, x1, y1 = seg
        length = max(math.hypot(x1 - x0, y1 - y0), 1e-6)
        cv2.arrowedLine(
            out,
            (int(round(x0)), int(round(y0))),
            (int(round(x1)), int(round(y1))),
            c,
            thickness,
            cv2.LINE_AA,
            0,
            min(0.5, 4.0 / length),
        )
    return out


#: OpenCV's largest line width (``MAX_THICKNESS`` in ``drawing.cpp``).
_MAX_THICKNESS = 32767


def _numeric(a: Any, name: str) -> np.ndarray:
    """``a`` as a host array of a real numeric dtype (bool, integer or float)."""
    arr = to_numpy(regular_array(a, name))
    if arr.dtype.kind not in "buif":
        raise TypeError(
            f"{name} must have a real numeric dtype (uint8, integer, float or bool), "
            f"got {given_kind(a, arr)}"
        )
    return arr


def _as_rgb8(img: np.ndarray) -> np.ndarray:
    """A fresh uint8 RGB copy of a checked image: bool as 0 / 255, integers clipped
    to [0, 255], floats in [0, 1] scaled by 255 (others clipped, NaN as 0)."""
    if img.dtype == np.bool_:
        img = img.astype(np.uint8) * np.uint8(255)
    elif img.dtype.kind == "f":
        # fmax skips NaN (an all-NaN image gives NaN: not scaled, drawn black)
        top = float(np.fmax.reduce(img, axis=None)) if img.size else np.nan
        img = img * 255.0 if top <= 1.0 else img
        img = np.clip(np.nan_to_num(img), 0, 255)
    elif img.dtype != np.uint8:
        img = np.clip(img, 0, 255)
    img = img.astype(np.uint8)
    if img.ndim == 2 or img.shape[-1] == 1:
        img = np.repeat(img.reshape(img.shape[0], img.shape[1], 1), 3, axis=2)
    return np.ascontiguousarray(img[..., :3]).copy()


def _check_color(color: Any) -> tuple:
    """``color`` as three floats in [0, 255]."""
    if isinstance(color, (str, bytes)) or not isinstance(
        color, (tuple, list, np.ndarray)
    ):
        raise TypeError(
            f"color must be an (r, g, b) tuple of numbers or None, got {color!r} "
            f"({type(color).__name__})"
        )
    if (isinstance(color, np.ndarray) and color.ndim != 1) or len(color) != 3:
        raise ValueError(f"color must have 3 values (r, g, b), got {color!r}")
    return tuple(
        int(check_number(v, f"color[{i}]", 0, 255)) for i, v in enumerate(color)
    )


def _clip_segment(x0, y0, x1, y1, box) -> tuple | None:
    """The part of the segment from ``(x0, y0)`` to ``(x1, y1)`` (Python floats)
    inside ``box`` ``(xmin, ymin, xmax, ymax)`` (Liang-Barsky), or None where there
    is none or an end is not finite. An end inside the box is returned as it is."""
    dx, dy = x1 - x0, y1 - y0
    if not all(math.isfinite(v) for v in (x0, y0, dx, dy)):
        return None
    xmin, ymin, xmax, ymax = box
    t0, t1 = 0.0, 1.0
    for p, q in ((-dx, x0 - xmin), (dx, xmax - x0), (-dy, y0 - ymin), (dy, ymax - y0)):
        if p == 0.0:
            if q < 0.0:  # parallel to this side and outside it
                return None
        elif p < 0.0:
            t0 = max(t0, q / p)
        else:
            t1 = min(t1, q / p)
    if t0 > t1:
        return None
    if t1 < 1.0:
        x1, y1 = x0 + t1 * dx, y0 + t1 * dy
    if t0 > 0.0:
        x0, y0 = x0 + t0 * dx, y0 + t0 * dy
    return x0, y0, x1, y1
