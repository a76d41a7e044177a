"""File formats of the benchmark data and of the command line's outputs."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["read_flo", "read_pfm", "write_flo", "write_pfm"]

#: Tag of a Middlebury ``.flo`` file (the bytes "PIEH" read as a little-endian float).
FLO_TAG = 202021.25
#: Middlebury stores unknown flow as 1e10-ish values; anything above this is unknown.
FLO_UNKNOWN = 1e9


def write_pfm(path: str | os.PathLike, image: Any) -> None:
    """Write a float image as PFM (``Pf`` grey or ``PF`` colour, little-endian).

    Parameters
    ----------
    path : str or path-like
        Output file.
    image : ndarray, shape (M, N) or (M, N, 3)
        Values are stored as float32 (NaN and infinity are kept).
    """
    img = np.asarray(image)
    if img.ndim == 3 and img.shape[-1] == 3:
        tag = b"PF"
    elif img.ndim == 2:
        tag = b"Pf"
    else:
        raise ValueError(f"image must be (M, N) or (M, N, 3), got shape {img.shape}")
    if img.dtype.kind not in "fiub":
        raise TypeError(f"image must be numeric, got dtype {img.dtype}")
    data = np.flipud(img.astype("<f4"))  # PFM stores the bottom row first
    with open(path, "wb") as f:
        f.write(tag + b"\n%d %d\n-1.0\n" % (img.shape[1], img.shape[0]))
        f.write(np.ascontiguousarray(data).tobytes())


def read_pfm(path: str | os.PathLike) -> np.ndarray:
    """Read a PFM file into a float32 array, (M, N) or (M, N, 3), top row first."""
    with open(path, "rb") as f:
        tag = f.readline().strip()
        if tag not in (b"PF", b"Pf"):
            raise ValueError(f"{os.fspath(path)!r} is not a PFM file (header {tag!r})")
        dims = f.readline().split()
        while dims and dims[0].startswith(b"#"):
            dims = f.readline().split()
        try:
            width, height = int(dims[0]), int(dims[1])
            scale = float(f.readline().strip())
        except (IndexError, ValueError):
            raise ValueError(f"{os.fspath(path)!r}: malformed PFM header") from None
        channels = 3 if tag == b"PF" else 1
        dtype = "<f4" if scale < 0 else ">f4"
        count = width * height * channels
        data = np.frombuffer(f.read(4 * count), dtype=dtype)
    if data.size != count:
        raise ValueError(
            f"{os.fspath(path)!r}: expected {count} values, found {data.size}"
        )
    shape = (height, width, 3) if channels == 3 else (height, width)
    return np.flipud(data.reshape(shape)).astype(np.float32)


def write_flo(path: str | os.PathLike, flow: Any) -> None:
    """Write flow as a Middlebury ``.flo`` file.

    Parameters
    ----------
    path : str or path-like
        Output file.
    flow : ndarray, shape (M, N, 2)
        ``(u, v)`` per pixel, stored as little-endian float32 after the tag 202021.25
        and the int32 width and height. NaN is written as 1e10 (unknown).
    """
    f = np.asarray(flow)
    if f.ndim != 3 or f.shape[-1] != 2:
        raise ValueError(f"flow must have shape (M, N, 2), got {f.shape}")
    if f.dtype.kind not in "fiu":
        raise TypeError(f"flow must be numeric, got dtype {f.dtype}")
    data = np.where(np.isnan(f), 1e10, f).astype("<f4")
    with open(path, "wb") as out:
        out.write(np.array([FLO_TAG], "<f4").tobytes())
        out.write(np.array([f.shape[1], f.shape[0]], "<i4").tobytes())
        out.write(np.ascontiguousarray(data).tobytes())


def read_flo(path: str | os.PathLike, *, unknown_as_nan: bool = False) -> np.ndarray:
    """Read a Middlebury ``.flo`` file into a float32 (M, N, 2) array of ``(u, v)``.

    Unknown flow is stored as huge values (|value| > 1e9, ``FLO_UNKNOWN``); with
    ``unknown_as_nan=True`` both components of such pixels become NaN.
    """
    name = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(12)
        if len(head) < 12:
            raise ValueError(f"{name!r} is not a .flo file (only {len(head)} bytes)")
        tag = float(np.frombuffer(head[:4], "<f4")[0])
        if tag != FLO_TAG:
            raise ValueError(
                f"{name!r} is not a .flo file (tag {tag!r}, expected {FLO_TAG})"
            )
        width, height = (int(v) for v in np.frombuffer(head[4:], "<i4"))
        if width < 0 or height < 0:
            raise ValueError(f"{name!r}: malformed .flo header ({width} x {height})")
        count = width * height * 2
        data = np.frombuffer(f.read(4 * count), dtype="<f4")
    if data.size != count:
        raise ValueError(f"{name!r}: expected {count} values, found {data.size}")
    flow = data.reshape(height, width, 2).astype(np.float32)
    if unknown_as_nan:
        flow[(np.abs(flow) > FLO_UNKNOWN).any(axis=-1)] = np.nan
    return flow
