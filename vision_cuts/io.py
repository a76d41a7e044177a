"""File formats of the benchmark data and of the command line's outputs."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["read_pfm", "write_pfm"]


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
