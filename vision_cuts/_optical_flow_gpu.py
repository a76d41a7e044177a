"""Device stages of the optical flow pipeline (kernels in ``kernels/optical_flow.cu``).

:mod:`vision_cuts.optical_flow` calls these with ``backend="gpu"``: the candidate pairs
and their costs, the neighbourhood medians that predict each feature's motion, and
the edge-aware interpolation of the dense flow. Features are uploaded once per pair;
the assignment passes then run on the device without host round trips (the cost
stacks are scattered there, see ``optical_flow._build_stack``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._kernels import get_kernel, get_module

__all__ = [
    "DeviceFeatures",
    "array_module",
    "interpolate",
    "knn_median",
    "pair_costs",
    "upload",
]

_KMAX = 16  # largest neighbour count of the kernels (KMAX)


def _cp() -> Any:
    import cupy

    return cupy


def _module() -> Any:
    return get_module("optical_flow.cu", {"KMAX": _KMAX})


class DeviceFeatures(NamedTuple):
    """The features of one frame on the device."""

    points: Any  # (n, 2) float32
    words: Any  # (n, W) uint32 packed bits, or (n, W) float32 unit vectors
    binary: bool


def upload(points: np.ndarray, desc: np.ndarray, binary: bool) -> DeviceFeatures:
    """Features of one frame on the device (the descriptors as 32-bit words)."""
    cp = _cp()
    pts = cp.asarray(np.ascontiguousarray(points, dtype=np.float32))
    if binary:
        d = np.ascontiguousarray(desc, dtype=np.uint8)
        if d.shape[1] % 4:
            d = np.pad(d, ((0, 0), (0, 4 - d.shape[1] % 4)))
        words = cp.asarray(d.view(np.uint32))
    else:
        words = cp.asarray(np.ascontiguousarray(desc, dtype=np.float32))
    return DeviceFeatures(pts, words, binary)


def pair_costs(
    f0: DeviceFeatures,
    f1: DeviceFeatures,
    pred: Any,
    radius: float,
    weight: float,
    nbits: int,
) -> tuple:
    """Every pair within ``radius`` of the predicted position, on the device:
    ``(rows, cols, costs)`` (int64, int64, float64), rows ascending; ``nbits``: the
    bits of a binary descriptor (before the padding to whole words)."""
    cp = _cp()
    n, m = len(f0.points), len(f1.points)
    cost = cp.empty((n, m), dtype=cp.float64)
    pred = cp.ascontiguousarray(cp.asarray(pred, dtype=cp.float32))
    words = f0.words.shape[1]
    block = (16, 16, 1)
    grid = ((m + 15) // 16, (n + 15) // 16, 1)
    get_kernel(_module(), "flow_pair_costs")(
        grid,
        block,
        (
            f0.points,
            pred,
            f1.points,
            f0.words,
            f1.words,
            np.int32(n),
            np.int32(m),
            np.int32(words),
            np.int32(bool(f0.binary)),
            np.int32(nbits),
            np.float64(radius),
            np.float64(weight),
            cost,
        ),
    )
    rows, cols = cp.nonzero(cp.isfinite(cost))
    return rows.astype(cp.int64), cols.astype(cp.int64), cost[rows, cols]


def knn_median(sources: Any, vectors: Any, queries: Any, k: int) -> Any:
    """(q, 2) float32 median vector of the ``k`` sources nearest each query (ties:
    the lower source index), on the device."""
    cp = _cp()
    if not 1 <= k <= _KMAX:
        raise ValueError(f"k must be in [1, {_KMAX}], got {k}")
    src = cp.ascontiguousarray(cp.asarray(sources, dtype=cp.float32))
    vec = cp.ascontiguousarray(cp.asarray(vectors, dtype=cp.float32))
    q = cp.ascontiguousarray(cp.asarray(queries, dtype=cp.float32))
    out = cp.empty((len(q), 2), dtype=cp.float32)
    if len(q):
        get_kernel(_module(), "knn_median")(
            ((len(q) + 127) // 128,),
            (128,),
            (q, np.int32(len(q)), src, vec, np.int32(len(src)), np.int32(k), out),
        )
    return out


def interpolate(
    points: np.ndarray,
    vectors: np.ndarray,
    point_colour: np.ndarray,
    grid_colour: np.ndarray,
    step: float,
    offset: float,
    k: int,
    sigma_colour: float,
) -> np.ndarray:
    """Edge-aware interpolation on a (gh, gw) grid of pixel centres ``(step * x +
    offset, step * y + offset)`` (see ``optical_flow._interpolate``): (gh, gw, 2)
    float32, returned to the host."""
    cp = _cp()
    if not 1 <= k <= _KMAX:
        raise ValueError(f"k must be in [1, {_KMAX}], got {k}")
    gh, gw, channels = grid_colour.shape
    out = cp.empty((gh, gw, 2), dtype=cp.float32)
    block = (16, 16, 1)
    grid = ((gw + 15) // 16, (gh + 15) // 16, 1)
    get_kernel(_module(), "knn_interpolate")(
        grid,
        block,
        (
            cp.asarray(np.ascontiguousarray(points, dtype=np.float32)),
            cp.asarray(np.ascontiguousarray(vectors, dtype=np.float32)),
            cp.asarray(np.ascontiguousarray(point_colour, dtype=np.float32)),
            np.int32(len(points)),
            cp.asarray(np.ascontiguousarray(grid_colour, dtype=np.float32)),
            np.int32(gw),
            np.int32(gh),
            np.int32(channels),
            np.float32(step),
            np.float32(offset),
            np.int32(k),
            np.float32(1.0 / (sigma_colour**2 * channels)),
            out,
        ),
    )
    return cp.asnumpy(out)


def array_module() -> Any:
    """CuPy (the array module of the device stages)."""
    return _cp()
