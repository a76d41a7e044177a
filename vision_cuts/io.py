"""File formats of the benchmark data and of the command line's outputs."""

from __future__ import annotations

import os
import stat
from typing import Any, BinaryIO

import numpy as np

from ._validate import check_flag, regular_array

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
        Values are stored as float32 (NaN and infinity are kept; values beyond
        float32's range become infinite).
    """
    img = np.asarray(regular_array(image, "image"))
    if img.ndim == 3 and img.shape[-1] == 3:
        tag = b"PF"
    elif img.ndim == 2:
        tag = b"Pf"
    else:
        raise ValueError(f"image must be (M, N) or (M, N, 3), got shape {img.shape}")
    if img.dtype.kind not in "fiub":
        raise TypeError(f"image must be numeric, got dtype {img.dtype}")
    with np.errstate(over="ignore"):  # beyond float32: infinite, as documented
        data = np.flipud(img.astype("<f4"))  # PFM stores the bottom row first
    with open(path, "wb") as f:
        f.write(tag + b"\n%d %d\n-1.0\n" % (img.shape[1], img.shape[0]))
        f.write(np.ascontiguousarray(data).tobytes())


#: the longest PFM header line read (a file that is no PFM may hold no line end)
_PFM_LINE = 4096


def _pfm_line(f: BinaryIO, name: str) -> bytes:
    """One header line of a PFM file, at most ``_PFM_LINE`` bytes."""
    line = f.readline(_PFM_LINE + 1)
    if len(line) > _PFM_LINE:
        raise ValueError(
            f"{name!r} is not a PFM file (a header line longer than {_PFM_LINE} "
            f"bytes, starting {line[:16]!r})"
        )
    return line


def read_pfm(path: str | os.PathLike) -> np.ndarray:
    """Read a PFM file into a float32 array, (M, N) or (M, N, 3), top row first."""
    name = os.fspath(path)
    with open(path, "rb") as f:
        tag = _pfm_line(f, name).strip()
        if tag not in (b"PF", b"Pf"):
            raise ValueError(f"{name!r} is not a PFM file (header {tag[:16]!r})")
        dims = _pfm_line(f, name).split()
        while dims and dims[0].startswith(b"#"):
            dims = _pfm_line(f, name).split()
        try:
            width, height = int(dims[0]), int(dims[1])
            scale = float(_pfm_line(f, name).strip())
        except (IndexError, ValueError):
            raise ValueError(f"{name!r}: malformed PFM header") from None
        if not np.isfinite(scale) or scale == 0:
            # its sign gives the byte order: 0 and NaN give none
            raise ValueError(
                f"{os.fspath(path)!r}: malformed PFM header (scale {scale!r}: a "
                "non-zero number, negative for little-endian data)"
            )
        channels = 3 if tag == b"PF" else 1
        dtype = "<f4" if scale < 0 else ">f4"
        if width < 0 or height < 0:
            raise ValueError(
                f"{os.fspath(path)!r}: malformed PFM header ({width} x {height})"
            )
        count = width * height * channels
        data = np.frombuffer(
            _read_values(
                f, os.fspath(path), count, f"{width} x {height} pixels", exact=False
            ),
            dtype=dtype,
        )
    shape = (height, width, 3) if channels == 3 else (height, width)
    return np.flipud(data.reshape(shape)).astype(np.float32)


def _read_values(
    f: BinaryIO, name: str, count: int, size: str, *, exact: bool
) -> bytes:
    """The ``count`` float32 values (``4 * count`` bytes) that follow the header,
    read only once the file is known to hold them (a header may claim any size); with
    ``exact`` the file must end there. Anything else is a ValueError naming the
    file, the header's ``size`` (its words), the values expected and the bytes
    found."""
    want = 4 * count
    if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
        have = os.fstat(f.fileno()).st_size - f.tell()
        found = str(have)
        data = f.read(want) if have >= want else b""
    else:  # a pipe: read in bounded chunks, up to one byte beyond the values
        chunks: list[bytes] = []
        left = want + 1
        while left > 0:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        have = len(data)
        found = str(have) if have <= want else f"more than {want}"
        data = data[:want]
    if have < want or (exact and have > want):
        what = "is truncated" if have < want else "has bytes beyond its data"
        raise ValueError(
            f"{name!r} {what}: its header gives {size}, so expected {count} values "
            f"({want} bytes of float32) after the header, found {found} bytes"
        )
    return data


def write_flo(path: str | os.PathLike, flow: Any) -> None:
    """Write flow as a Middlebury ``.flo`` file.

    Parameters
    ----------
    path : str or path-like
        Output file.
    flow : ndarray, shape (M, N, 2)
        ``(u, v)`` per pixel, stored as little-endian float32 after the tag 202021.25
        and the int32 width and height. NaN is written as 1e10 (unknown), whatever
        the float dtype; values beyond float32's range become infinite, which reads
        as unknown too.

    Raises
    ------
    ValueError
        ``flow`` is not (M, N, 2) or is a ragged nested list.
    TypeError
        ``flow`` is not integer or float, or is a masked array (mark unknown flow
        with NaN instead: ``flow.filled(np.nan)``).
    """
    f = np.asarray(regular_array(flow, "flow"))
    if f.ndim != 3 or f.shape[-1] != 2:
        raise ValueError(f"flow must have shape (M, N, 2), got {f.shape}")
    if f.dtype.kind not in "fiu":
        raise TypeError(f"flow must be numeric, got dtype {f.dtype}")
    with np.errstate(over="ignore"):  # beyond float32: infinite, i.e. unknown
        data = f.astype("<f4")
    data[np.isnan(data)] = 1e10
    with open(path, "wb") as out:
        out.write(np.array([FLO_TAG], "<f4").tobytes())
        out.write(np.array([f.shape[1], f.shape[0]], "<i4").tobytes())
        out.write(np.ascontiguousarray(data).tobytes())


def read_flo(path: str | os.PathLike, *, unknown_as_nan: bool = False) -> np.ndarray:
    """Read a Middlebury ``.flo`` file into a float32 (M, N, 2) array of ``(u, v)``.

    Unknown flow is stored as huge values (|value| > 1e9, ``FLO_UNKNOWN``); with
    ``unknown_as_nan=True`` both components of such pixels (and of pixels with a NaN
    component) become NaN.

    Raises
    ------
    ValueError
        The file is not a ``.flo`` file (tag), its header is malformed, or it does
        not hold exactly the ``width * height * 2`` values its header gives
        (truncated, or bytes beyond them); the message names the file.
    """
    unknown_as_nan = check_flag(unknown_as_nan, "unknown_as_nan")
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
        size = f"{width} x {height} pixels"
        data = np.frombuffer(
            _read_values(f, name, count, size, exact=True), dtype="<f4"
        )
    flow = data.reshape(height, width, 2).astype(np.float32)
    if unknown_as_nan:
        unknown = (np.abs(flow) > FLO_UNKNOWN) | np.isnan(flow)
        flow[unknown.any(axis=-1)] = np.nan
    return flow
