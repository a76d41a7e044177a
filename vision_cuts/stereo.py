"""Dense stereo by graph cuts: alpha-expansion and the exact Ishikawa construction.

The energy of a disparity map ``d`` (left view as reference, pixel ``(x, y)`` of the
left image matches ``(x - d, y)`` of the right image) is::

    E(d) = sum_p C[d_p, p] + sum_{(p, q)} w_pq * V(d_p, d_q)

over the 4-connected neighbour pairs, with ``C`` an integer matching-cost volume
(:func:`stereo_cost_volume`), ``w_pq`` contrast-sensitive integer weights
(:func:`stereo_weights`) and ``V`` the Potts model ``[d_p != d_q]``, the truncated
linear model ``min(|d_p - d_q|, truncation)`` or the linear model ``|d_p - d_q|``.

* ``method="expansion"``: alpha-expansion (Boykov, Veksler and Zabih 2001); each move is
  a binary grid cut with a per-edge (2, 2) table, submodular because ``V`` is a metric.
* ``method="ishikawa"``: the global minimum for the linear (convex) prior, one 3-D
  6-connected cut (Ishikawa 2003) with directed infinite constraint arcs.
* ``method="ishikawa_pyramid"``: the linear prior coarse to fine over the labels: an
  Ishikawa cut of the labels ``0, s, 2s, ...`` (each label's cost the least over its
  window of disparities of the cost plus a quarter of the pixel's pair weights a
  disparity away), then at steps ``s/2, s/4, ..., 1`` an Ishikawa cut over the
  three labels ``d_p - t, d_p, d_p + t`` of every pixel; each level is the exact
  minimum over its labels (``_window_cut``), the whole an approximation of the global
  minimum with graphs of ``~D/s`` and 2 layers instead of ``D - 1``.

On the CPU backend the expansion is :func:`vision_cuts.minimize_labels` on the cost
volume (one move a cut; ``moves_per_cut`` or ``stats`` take the device loop's host
form instead) and Ishikawa's graph is built with NumPy for
:func:`vision_cuts.maxflow_grid`. On the GPU backend the cost volume, the weights, the
expansion loop and the Ishikawa graph stay on the device (``_stereo_gpu.py``,
``kernels/stereo.cu``; the cuts by :func:`vision_cuts.maxflow_grid` with CuPy inputs).
``_move_energy`` below writes one expansion move through :func:`grid_energy`: the
specification the device loop's move graphs are tested against.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy import ndimage

from ._backend import _check_name, is_cupy_array, resolve_backend, to_numpy
from ._validate import (
    UNIT_SLACK,
    check_int,
    check_number,
    first_index,
    nonfinite_at,
    regular_array,
    unit_scale,
)
from .grid import COST_MAX, GridEnergy, _as_cost, grid_energy
from .maxflow import maxflow_grid

__all__ = [
    "METHODS",
    "SMOOTHNESS",
    "solve_disparity",
    "stereo_cost_volume",
    "stereo_disparity",
    "stereo_energy",
    "stereo_weights",
]

METHODS = ("expansion", "ishikawa", "ishikawa_pyramid")
#: the methods of the linear prior (Ishikawa's construction)
_ISHIKAWA_METHODS = ("ishikawa", "ishikawa_pyramid")
SMOOTHNESS = ("potts", "truncated_linear", "linear")

_INT32_MAX = 2**31 - 1
#: Default ``moves_per_cut`` of the GPU expansion (measured on tsukuba .. bull, H200).
GPU_MOVES_PER_CUT = 4
#: Capacity of the -z arcs of the Ishikawa graph ("infinite"); see _ishikawa.
_ISHIKAWA_INF = 2**30
#: GPU settings of the thin Ishikawa graphs (largest layers, maxflow_grid_gpu knobs;
#: the first that fits), where the grid solver's 3-D default, 16 x 8 x 8 push tiles,
#: spans more layers than the graph has. H200, the motorcycle's pyramid (its first
#: level then pooled by the mean), three alternated passes (ms): its levels
#: 46.0-46.6 / 5.1-5.7 / 4.2-4.4 -> 41.6-42.0 / 4.0-4.3 / 2.6-2.7, end to end
#: 59.8-62.0 -> 52.1-54.6 (15 layers: the tiles alone 44.7-45.1, 32 local rounds or
#: 16 x 8 x 4 BFS tiles alone 42.8-43.0); tsukuba's exact cut (15 layers) 7.6 -> 6.3.
#: Not the solver's default for thin grids: segmentation slabs of 2 to 12 slices solve
#: 0.1 ms slower with these tiles.
_THIN_SETTINGS = (
    (2, {"tile": (16, 16, 2), "bfs_tile": (16, 16, 2)}),
    (15, {"tile": (16, 16, 4), "bfs_tile": (16, 8, 4), "local_iters": 32}),
)
#: The Ishikawa pyramid's default first step: the largest power of two that leaves at
#: least this many coarse labels (61 disparities: step 4, 16 labels; measured on the
#: motorcycle and the Middlebury sets, benchmarks/eval_stereo.py).
PYRAMID_COARSE_LABELS = 16
#: The pyramid's first level pools each coarse label's window of disparities as the
#: least of ``C(d) + W_p |d - l| / 4`` (``W_p`` the sum of the pixel's pair weights;
#: :func:`_window_costs`): measured on the seven Middlebury sets with steps 4-2-1
#: forced, as accurate as the window's mean and nearer the exact cut's energy on each
#: (benchmarks/eval_stereo.py, BENCHMARKS.md "The Ishikawa pyramid").
PYRAMID_SLOPE_DIV = 4
#: The largest box window of the cost volume (the device's filter takes window *
#: window as an int).
_MAX_WINDOW = 46340


# --------------------------------------------------------------------------- inputs


def _moves_per_cut(moves_per_cut: Any, backend: str) -> Any:
    """``moves_per_cut`` with its default for ``backend`` where it is None."""
    if moves_per_cut is None:
        return GPU_MOVES_PER_CUT if backend == "gpu" else 1
    return moves_per_cut


def _xp(backend: str) -> Any:
    if backend == "gpu":
        import cupy

        return cupy
    return np


def _to(xp: Any, a: Any) -> Any:
    """``a`` as an array of the module ``xp`` (NumPy or CuPy)."""
    if xp is np:
        return to_numpy(a)
    return xp.asarray(a)


def _same_kind(out: Any, like: Any) -> Any:
    """``out`` as the array kind of ``like`` (CuPy in, CuPy out; else NumPy)."""
    if is_cupy_array(like):
        import cupy

        return cupy.asarray(out)
    return to_numpy(out)


def _check_pair(left: Any, right: Any, xp: Any = np) -> tuple[Any, Any]:
    """Validate a pair: its shapes and dtypes (real numbers) without reading data
    (``xp=None``: validate only, return the inputs), else float32 (M, N, C <= 3) in
    ``xp``, every value finite (one reduction an image)."""
    left = regular_array(left, "left")
    right = regular_array(right, "right")
    if not hasattr(left, "shape"):
        left = np.asarray(left)
    if not hasattr(right, "shape"):
        right = np.asarray(right)
    for name, img in (("left", left), ("right", right)):
        if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[-1] not in (1, 3, 4)):
            raise ValueError(
                f"{name} must be a (M, N) grey or (M, N, C) image with C in 1, 3, 4, "
                f"got shape {tuple(img.shape)}"
            )
        if img.shape[0] < 1 or img.shape[1] < 2:
            raise ValueError(
                f"{name} must have at least 1 row and 2 columns, got shape "
                f"{tuple(img.shape)}"
            )
        if img.dtype.kind not in "biuf":
            raise TypeError(
                f"{name} must have a bool, integer or floating dtype, got {img.dtype}"
            )
    if tuple(left.shape) != tuple(right.shape):
        raise ValueError(
            f"left and right must have the same shape and channels, got left "
            f"{tuple(left.shape)} and right {tuple(right.shape)}"
        )
    if xp is None:
        return left, right
    left, right = _grey_levels(
        (left, right),
        (_finite_float32(left, "left", xp), _finite_float32(right, "right", xp)),
        xp,
    )
    if left.ndim == 2:
        left, right = left[..., None], right[..., None]
    return left[..., :3], right[..., :3]


def _grey_levels(given: tuple, images: tuple, xp: Any) -> tuple:
    """The float32 ``images`` on the 0..255 scale of the matching parameters (the
    truncation of the differences, the weights' threshold), from the dtypes
    ``given``: uint16 scaled by 255 / 65535, bool as 0 / 255, other integers as
    grey levels; float images scaled by 255 where they lie in [0, 1] (up to
    ``1 + UNIT_SLACK``), else taken as grey levels (:func:`vision_cuts.optical_flow`'s
    rule). A float image on each scale is a ValueError: one overshooting pixel must
    not switch the scale of the pair silently."""
    tops = {}
    for name, g, img in zip(("left", "right"), given, images, strict=True):
        if g.dtype.kind == "f" and img.size:
            top = float(img.max())
            if top > 0.0:  # (an image with none is black on either scale)
                tops[name] = top
    units = {name: unit_scale(top) for name, top in tops.items()}
    if len(set(units.values())) > 1:
        raise ValueError(
            f"left and right are on different scales: left has values up to "
            f"{tops['left']:g} and right up to {tops['right']:g}; float images must "
            f"both lie in [0, 1] (multiplied by 255; up to {1 + UNIT_SLACK:g} is "
            "read as overshoot) or both be grey levels in [0, 255]"
        )
    unit = any(units.values())
    out = []
    for g, img in zip(given, images, strict=True):
        factor = {"b": 255.0, "f": 255.0 if unit else 1.0}.get(g.dtype.kind, 1.0)
        if g.dtype == np.uint16:
            factor = 255.0 / 65535.0
        out.append(img * xp.float32(factor) if factor != 1.0 else img)
    return tuple(out)


def _finite_float32(img: Any, name: str, xp: Any) -> Any:
    """``img`` as float32 in ``xp``; a value that is not finite there (NaN,
    infinite, or beyond float32's range) is a ValueError naming ``name``, the
    value as given and its index."""
    with np.errstate(over="ignore"):  # (a value beyond float32: reported below)
        out = _to(xp, img).astype(np.float32)
    bad = nonfinite_at(out) if img.dtype.kind == "f" else None
    if bad is not None:
        raise ValueError(
            f"{name} must hold finite values (as float32), got {img[bad].item()!r} at "
            f"index {bad}"
        )
    return out


def _check_max_disparity(max_disparity: Any, width: int | None) -> int:
    """``0 < max_disparity < width`` (``width`` None: not known yet, > 0 only)."""
    if isinstance(max_disparity, bool) or not isinstance(
        max_disparity, (int, np.integer)
    ):
        raise TypeError(
            f"max_disparity must be an integer, got {max_disparity!r} "
            f"({type(max_disparity).__name__})"
        )
    if width is None and max_disparity <= 0:
        raise ValueError(f"max_disparity must be > 0, got {max_disparity}")
    if width is not None and (max_disparity <= 0 or max_disparity >= width):
        raise ValueError(
            f"max_disparity must satisfy 0 < max_disparity < image width ({width}), "
            f"got {max_disparity}"
        )
    return int(max_disparity)


def _check_method(method: Any) -> str:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return method


def _check_label_step(label_step: Any, method: str, ndisp: int | None) -> None:
    """``label_step`` is the pyramid's; checked against D where it is known."""
    if label_step is None:
        return
    if method != "ishikawa_pyramid":
        raise ValueError(
            f"label_step applies to method='ishikawa_pyramid' only, got method="
            f"{method!r} with label_step={label_step!r}"
        )
    _pyramid_step(ndisp or 0, label_step)


def _check_smoothness(smoothness: Any, method: str) -> str:
    if smoothness is None:
        return "truncated_linear" if method == "expansion" else "linear"
    if smoothness not in SMOOTHNESS:
        raise ValueError(f"smoothness must be one of {SMOOTHNESS}, got {smoothness!r}")
    if method in _ISHIKAWA_METHODS and smoothness != "linear":
        raise ValueError(
            f"smoothness must be 'linear' for method={method!r} (the construction is "
            f"exact for convex priors only), got {smoothness!r}"
        )
    return smoothness


# ---------------------------------------------------------------------- cost volume
def stereo_cost_volume(
    left: Any,
    right: Any,
    max_disparity: int,
    *,
    census_radius: int = 2,
    ad_truncation: float = 20.0,
    census_weight: float = 1.0,
    window: int = 3,
    backend: str = "auto",
    callback: Any = None,
) -> Any:
    """Matching costs ``C[d, y, x]`` of left ``(x, y)`` against right ``(x - d, y)``.

    ``C = min(mean |I_L - I_R|, ad_truncation) / ad_truncation
    + census_weight * hamming(census_L, census_R) / K``, box-filtered over a
    ``window x window`` neighbourhood (an integer in ``[1, 46340]``; 1 = no
    filtering). Where ``x - d < 0`` the right image is clamped to its first column.
    The images are read on a 0..255 scale, as :func:`stereo_disparity` reads them
    (``ad_truncation`` is in those grey levels).

    ``backend``: where it is computed (``"gpu"``: ``kernels/stereo.cu``, census radius
    at most 3; equal to the CPU volume up to the rounding of the box filter's float64
    sums); the result has the array kind of ``left``. ``callback(done, total)``:
    progress, after each disparity's plane on the CPU (``total = max_disparity +
    1``), once at the end on the GPU.

    Returns
    -------
    cost : ndarray of float32, shape (max_disparity + 1, M, N), values in [0, 1 +
        census_weight].
    """
    window = check_int(window, "window", 1, _MAX_WINDOW)
    ad_truncation = check_number(ad_truncation, "ad_truncation", 0, above=True)
    census_weight = check_number(census_weight, "census_weight", 0)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    which = resolve_backend(backend, left, right)
    lp, rp = _check_pair(left, right, _xp(which))
    max_disparity = _check_max_disparity(max_disparity, lp.shape[1])
    if which == "gpu":
        cost = _cost_volume_gpu(
            lp, rp, max_disparity, census_radius, ad_truncation, census_weight, window
        )
        if callback is not None:
            callback(max_disparity + 1, max_disparity + 1)
    else:
        cost = _cost_volume_cpu(
            lp,
            rp,
            max_disparity,
            census_radius,
            ad_truncation,
            census_weight,
            window,
            callback,
        )
    # the box filter's float sums leave values a rounding error outside the range
    _xp(which).clip(cost, 0, 1 + census_weight, out=cost)
    return _same_kind(cost, left)


def check_stereo_options(options: dict) -> None:
    """The options of :func:`stereo_disparity` that do not depend on the images
    (``options``: its keyword arguments, defaults applied), checked as it checks
    them: for callers that pass them on to many calls (``stereo_many``). The device
    limit on ``census_radius`` and ``max_disparity`` against the width are checked
    by each call."""
    method = _check_method(options["method"])
    _check_smoothness(options["smoothness"], method)
    max_disparity = _check_max_disparity(options["max_disparity"], None)
    _check_label_step(options["label_step"], method, max_disparity + 1)
    _check_name(options["backend"], "backend")
    if options["lam"] is not None:  # None: the method's default
        check_number(options["lam"], "lam", low=0)
    check_number(options["cost_scale"], "cost_scale", low=0, above=True)
    check_int(options["window"], "window", 1, _MAX_WINDOW)
    _check_census_radius(options["census_radius"], "cpu")
    _check_truncation(options["truncation"])
    from .multilabel import _check_run

    moves = options["moves_per_cut"]
    _check_run(options["max_cycles"], options["tol"], options["callback"],
               1 if moves is None else moves)  # fmt: skip


def _check_truncation(truncation: Any) -> None:
    if isinstance(truncation, bool) or not isinstance(truncation, (int, np.integer)):
        raise TypeError(f"truncation must be an integer, got {truncation!r}")
    if truncation < 1:
        raise ValueError(f"truncation must be >= 1, got {truncation}")


def _check_census_radius(census_radius: Any, backend: str) -> int:
    from ._stereo_gpu import MAX_CENSUS_RADIUS

    top = MAX_CENSUS_RADIUS if backend == "gpu" else None
    check_int(census_radius, "census_radius")  # a TypeError for a non-integer
    if census_radius < 1 or (top is not None and census_radius > top):
        limit = (
            f"1 <= census_radius <= {top} on the GPU" if top else "census_radius >= 1"
        )
        raise ValueError(
            f"census_radius must be an integer, {limit}; got {census_radius!r}"
        )
    return int(census_radius)


def _cost_volume_gpu(
    lp, rp, max_disparity, census_radius, ad_truncation, census_weight, window
):
    from ._stereo_gpu import cost_volume_gpu

    return cost_volume_gpu(
        lp,
        rp,
        max_disparity,
        census_radius=_check_census_radius(census_radius, "gpu"),
        ad_truncation=float(ad_truncation),
        census_weight=float(census_weight),
        window=int(window),
    )


def _cost_volume_cpu(
    left,
    right,
    max_disparity,
    census_radius,
    ad_truncation,
    census_weight,
    window,
    callback=None,
):
    from ._stereo_cpu import census_words, plane_costs

    census_radius = _check_census_radius(census_radius, "cpu")
    m, n = left.shape[:2]
    ndisp = max_disparity + 1
    left = np.ascontiguousarray(left, dtype=np.float32)
    right = np.ascontiguousarray(right, dtype=np.float32)
    cl = census_words(left.mean(axis=-1), census_radius)
    cr = census_words(right.mean(axis=-1), census_radius)
    k = (2 * census_radius + 1) ** 2 - 1
    cost = np.empty((ndisp, m, n), dtype=np.float32)
    for d in range(ndisp):
        # the NumPy definition, bit for bit: see _stereo_cpu
        c = plane_costs(left, right, cl, cr, k, d, ad_truncation, census_weight)
        if window > 1:
            c = ndimage.uniform_filter(c, size=window, mode="nearest")
        cost[d] = c
        if callback is not None:
            callback(d + 1, ndisp)
    return cost


_THRESHOLD, _RATIO = 8.0, 3.0  # stereo_weights' defaults (grey levels, factor)


def stereo_weights(
    left: Any,
    *,
    smoothness: float = 1.0,
    threshold: float = _THRESHOLD,
    ratio: float = _RATIO,
) -> np.ndarray:
    """Contrast-sensitive pair weights (2, M, N) as float: ``ratio * smoothness`` across
    edges whose max channel difference is below ``threshold``, else ``smoothness``
    (Boykov, Veksler and Zabih 2001). Plane 0 couples p with +x, plane 1 with +y.
    ``smoothness`` and ``threshold`` are finite numbers >= 0, ``ratio`` >= 1."""
    smoothness = check_number(smoothness, "smoothness", low=0)
    threshold = check_number(threshold, "threshold", low=0)
    ratio = check_number(ratio, "ratio", low=1)
    xp = _xp("gpu" if is_cupy_array(left) else "cpu")
    img, _ = _check_pair(left, left, xp)  # the image's checks, once
    return _weights(img, smoothness, threshold, ratio)


def _weights(img: Any, smoothness: float, threshold: float, ratio: float) -> Any:
    """:func:`stereo_weights` of a checked float32 (M, N, C) image, in its module."""
    xp = _xp("gpu" if is_cupy_array(img) else "cpu")
    m, n = img.shape[:2]
    w = xp.zeros((2, m, n), dtype=np.float32)
    dx = xp.abs(xp.diff(img, axis=1)).max(axis=-1)
    dy = xp.abs(xp.diff(img, axis=0)).max(axis=-1)
    strong, weak = np.float64(ratio * smoothness), np.float64(smoothness)
    w[0, :, :-1] = xp.where(dx < threshold, strong, weak)
    w[1, :-1, :] = xp.where(dy < threshold, strong, weak)
    return w


# ----------------------------------------------------------------------- the energy
def _vmat(labels_a: np.ndarray, labels_b: np.ndarray, kind: str, trunc: int):
    diff = np.abs(labels_a.astype(np.int64) - labels_b.astype(np.int64))
    if kind == "potts":
        return (diff != 0).astype(np.int64)
    if kind == "truncated_linear":
        return np.minimum(diff, trunc)
    return diff


def stereo_energy(
    cost: Any,
    weights: Any,
    disparity: Any,
    *,
    smoothness: str = "linear",
    truncation: int = 2,
) -> int:
    """``E(d) = sum_p cost[d_p, p] + sum_(p,q) weights * V(d_p, d_q)`` as a Python int.

    ``cost`` (D, M, N) and ``weights`` (2, M, N) integers, ``disparity`` (M, N) integer
    labels in ``[0, D)``; ``smoothness`` as in :func:`solve_disparity`. The energy is
    summed in int64, so ``n max|cost| + 2 n max|weights| max V`` (``n`` pixels) must
    stay below 2**62.
    """
    cost, weights = (to_numpy(regular_array(cost, "cost")),
                     to_numpy(regular_array(weights, "weights")))  # fmt: skip
    for name, a in (("cost", cost), ("weights", weights)):
        if a.dtype.kind == "f":  # _as_cost's hint names a scale this function lacks
            raise TypeError(
                f"{name} has floating dtype {a.dtype}; the energy takes the integer "
                f"{name} a solve takes: quantise it first (round({name} * scale))"
            )
    c, cmax = _as_cost(cost, "cost", None, np)
    if c.ndim != 3 or c.shape[0] < 1:
        raise ValueError(f"cost must have shape (D, M, N), got {tuple(c.shape)}")
    nd, grid = c.shape[0], c.shape[1:]
    w, wmax = _as_cost(weights, "weights", None, np)
    if w.shape != (2, *grid):
        raise ValueError(
            f"weights must have shape (2, M, N) = {(2, *grid)}, got {tuple(w.shape)}"
        )
    d = to_numpy(regular_array(disparity, "disparity"))
    if d.dtype.kind not in "iu":
        raise TypeError(f"disparity must have an integer dtype, got {d.dtype}")
    if d.shape != grid:
        raise ValueError(f"disparity must have shape {grid}, got {tuple(d.shape)}")
    if d.size and (int(d.min()) < 0 or int(d.max()) >= nd):
        bad = first_index((d < 0) | (d >= nd))
        raise ValueError(
            f"disparity must lie in [0, {nd}), got {d[bad]} at index {bad}"
        )
    if smoothness not in SMOOTHNESS:
        raise ValueError(f"smoothness must be one of {SMOOTHNESS}, got {smoothness!r}")
    vmax = {"potts": 1, "linear": nd - 1}.get(smoothness, 0)
    if smoothness == "truncated_linear":
        truncation = check_int(truncation, "truncation", low=1)
        vmax = min(truncation, nd - 1)
    n = d.size
    if n * cmax + 2 * n * wmax * vmax >= COST_MAX:
        raise ValueError(
            f"cost and weights are too large for an exact int64 energy: {n} pixels x "
            f"max |cost| ({cmax}) + {2 * n} pairs x max |weights| ({wmax}) x max V "
            f"({vmax}) must be below 2**62"
        )
    d = d.astype(np.int64)
    data = np.take_along_axis(c, d[None], axis=0).sum()
    vx = _vmat(d[:, :-1], d[:, 1:], smoothness, truncation)
    vy = _vmat(d[:-1, :], d[1:, :], smoothness, truncation)
    return int(data + (w[0, :, :-1] * vx).sum() + (w[1, :-1, :] * vy).sum())


# ------------------------------------------------------------------------- solvers
def _move_energy(
    cost: np.ndarray,
    w: np.ndarray,
    labels: np.ndarray,
    alpha: int,
    kind: str,
    trunc: int,
) -> GridEnergy:
    """The binary energy of the expansion move of ``alpha`` from ``labels`` (CPU):
    ``x_p = 1`` takes ``alpha``, ``x_p = 0`` keeps ``labels[p]``."""
    m, n = labels.shape
    rows = np.arange(m)[:, None]
    cols = np.arange(n)[None, :]
    a = np.full_like(labels, alpha)
    unary = np.empty((m, n, 2), dtype=np.int64)
    unary[..., 0] = cost[labels, rows, cols]
    unary[..., 1] = cost[alpha]
    pw = np.zeros((2, m, n, 2, 2), dtype=np.int64)
    # +x pairs: p = [:, :-1], q = [:, 1:];  +y: p = [:-1], q = [1:]
    for k, (sp, sq) in enumerate(
        (
            ((slice(None), slice(None, -1)), (slice(None), slice(1, None))),
            ((slice(None, -1), slice(None)), (slice(1, None), slice(None))),
        )
    ):
        fp, fq = labels[sp], labels[sq]
        wk = w[k][sp]
        pw[k][sp + (0, 0)] = wk * _vmat(fp, fq, kind, trunc)
        pw[k][sp + (0, 1)] = wk * _vmat(fp, a[sq], kind, trunc)
        pw[k][sp + (1, 0)] = wk * _vmat(a[sp], fq, kind, trunc)
    return grid_energy(unary.astype(np.int32), pw.astype(np.int32))


def _expansion(
    cost: np.ndarray,
    w: np.ndarray,
    kind: str,
    trunc: int,
    max_cycles: int,
    backend: str,
    init: np.ndarray | None = None,
    callback: Any = None,
    tol: float = 0.0,
) -> np.ndarray:
    """Alpha-expansion on the host, one move at a time: :func:`minimize_labels` on the
    cost volume (labels last) with ``V`` as a matrix (the reference loop)."""
    from .multilabel import minimize_labels

    ndisp = int(cost.shape[0])
    d = np.arange(ndisp)
    if init is None:  # each pixel's cheapest label, along the volume's first axis
        init = np.argmin(cost, axis=0)  # (4x quicker than along a moved axis)
    result = minimize_labels(
        np.moveaxis(np.asarray(cost, dtype=np.int64), 0, -1),
        _vmat(d[:, None], d[None, :], kind, trunc),
        weights=w,
        method="expansion",
        init=np.asarray(init, dtype=np.int64),
        max_cycles=max_cycles,
        tol=tol,
        callback=callback,
        backend=backend,
    )
    return result.labels.astype(np.int64)


def _expansion_moves(
    cost: Any,
    w: Any,
    kind: str,
    trunc: int,
    max_cycles: int,
    backend: str,
    moves_per_cut: int,
    init: Any = None,
    callback: Any = None,
    tol: float = 0.0,
    stats: dict | None = None,
) -> Any:
    """Alpha-expansion through :func:`_stereo_gpu.expansion_loop`: on the device for
    ``backend="gpu"`` (CuPy arrays in and out), with NumPy for ``"cpu"``."""
    from . import _stereo_gpu
    from ._stereo_gpu import DeviceMoves, HostMoves, expansion_loop, label_groups

    xp = _xp(backend)
    ndisp = int(cost.shape[0])
    groups = label_groups(ndisp, moves_per_cut)
    moves = (DeviceMoves if backend == "gpu" else HostMoves)(
        cost, w, kind, trunc, groups, mirror=_stereo_gpu.MIRROR_MOVES
    )
    if init is None:
        labels = xp.argmin(moves.cost, axis=0).astype(np.int32)
    else:
        labels = xp.ascontiguousarray(_to(xp, init), dtype=np.int32)
    return expansion_loop(
        moves, labels, max_cycles=max_cycles, tol=tol, callback=callback, stats=stats
    )


def _ishikawa(
    cost: Any,
    w: Any,
    backend: str,
    stats: list | None = None,
    callback: Any = None,
) -> Any:
    """Exact minimum for the linear prior: one cut of a (D-1, M, N) 6-connected grid.

    Node ``(k, p)`` on the source side means ``d_p > k``; the disparity is the count of
    source-side nodes in the column. Column arcs carry the data costs along +z
    (source -> (0, p): C[0]; (k, p) -> (k+1, p): C[k+1]; (D-2, p) -> sink: C[D-1]), the
    -z arcs are "infinite" so every column is cut exactly once, and both arcs between
    ``(k, p)`` and ``(k, q)`` carry ``w_pq``, so the cut pays ``w_pq |d_p - d_q|``.
    Built with the array module of the backend (on the device for ``"gpu"``: CuPy in,
    CuPy out). ``stats``: the solver's stats are appended to it. ``callback``: see
    :func:`_ishikawa_cut`.
    """
    xp = _xp(backend)
    ndisp, m, n = (int(v) for v in cost.shape)
    c = _to(xp, cost).astype(np.int64)
    w = _to(xp, w)
    c = c - c.min(axis=0, keepdims=True)  # non-negative; the argmin is unchanged
    if ndisp == 1:
        if stats is not None:
            stats.append({})
        return xp.zeros((m, n), dtype=np.int64)
    layers = ndisp - 1
    # A valid cut (d = 0 everywhere) costs sum C[0] (no pairwise term); the min cut is
    # never dearer, so it cuts no -z arc as long as that bound is below the "infinity".
    _check_ishikawa_fits(int(c[0].sum()), int(c.max()))
    source = xp.zeros((layers, m, n), dtype=np.int32)
    sink = xp.zeros((layers, m, n), dtype=np.int32)
    source[0] = c[0]
    sink[-1] = c[-1]
    edges = xp.zeros((6, layers, m, n), dtype=np.int32)
    edges[0] = w[0][None]  # +x
    edges[1, :, :, 1:] = w[0][None, :, :-1]  # -x: q -> p, q = p + e_x
    edges[2] = w[1][None]  # +y
    edges[3, :, 1:, :] = w[1][None, :-1, :]  # -y
    edges[4, :-1] = c[1:-1]  # +z: (k, p) -> (k+1, p) carries C[k+1]
    edges[5, 1:] = _ISHIKAWA_INF  # -z: (k+1, p) -> (k, p)
    # the last column / row of the +x / +y planes holds weights without a neighbour
    edges[0, :, :, -1] = 0
    edges[2, :, -1, :] = 0
    return _ishikawa_cut(source, sink, edges, backend, stats, callback)


#: seconds between two ``callback(0, 1)`` calls while a watched CPU cut runs
_WATCH_S = 0.25


def _every(seconds: float, callback: Any, first: bool = True) -> Any:
    """``callback`` called at most once every ``seconds`` (the first call goes
    through; with ``first=False`` only a call ``seconds`` after this one does)."""
    last = [-np.inf if first else time.perf_counter()]

    def call(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= seconds:
            last[0] = now
            callback(done, total)

    return call


def _watched_cpu_cut(source: Any, sink: Any, edges: Any, callback: Any) -> tuple:
    """One CPU cut that a progress callback can stop: the search runs on a thread of
    its own while this thread calls ``callback(0, 1)`` every :data:`_WATCH_S`
    seconds. Whatever the callback raises (a cancel) sets the search's stop flag, and
    the exception is raised here once the search has stopped (within a few thousand
    of its steps), as it is for an interrupt. Returns ``(labels, stats)``."""
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout

    from ._maxflow_cpu import maxflow_grid_cpu

    stop = np.zeros(1, dtype=np.uint8)
    args = (np.ascontiguousarray(a) for a in (source, sink, edges))
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(maxflow_grid_cpu, *args, stop=stop)
        try:
            while True:
                try:
                    _, labels, stats = job.result(timeout=_WATCH_S)
                    return labels, stats
                except FutureTimeout:
                    callback(0, 1)
        except BaseException:
            stop[0] = 1  # leaving the block waits for the search to see it
            raise


def _check_ishikawa_fits(bound: int, top: int) -> None:
    """An Ishikawa graph whose first layer's capacities sum to ``bound`` and whose
    largest column capacity is ``top`` fits int32 with the "infinite" -z arcs."""
    if bound >= _ISHIKAWA_INF or top + _ISHIKAWA_INF > _INT32_MAX:
        raise ValueError(
            "cost is too large for the Ishikawa graph in int32 (sum of cost[0] = "
            f"{bound} >= {_ISHIKAWA_INF}); lower the cost scale"
        )


def _ishikawa_cut(
    source: Any,
    sink: Any,
    edges: Any,
    backend: str,
    stats: list | None,
    callback: Any = None,
) -> Any:
    """Cut an Ishikawa graph; per column the count of source-side nodes (int64).
    On the GPU, graphs of at most 15 layers get :data:`_THIN_SETTINGS`. On the CPU
    with a ``callback``, the cut is watched (:func:`_watched_cpu_cut`)."""
    layers = int(source.shape[0])
    thin = next((kn for most, kn in _THIN_SETTINGS if layers <= most), None)
    if backend == "gpu" and thin is not None:
        from ._maxflow_gpu import maxflow_grid_gpu

        _, labels, solver = maxflow_grid_gpu(source, sink, edges, **thin)
    elif backend == "cpu" and callback is not None:
        labels, solver = _watched_cpu_cut(source, sink, edges, callback)
    else:
        cut = maxflow_grid(GridEnergy._trusted(source, sink, edges, 0), backend=backend)
        labels, solver = cut.labels, cut.stats
    if stats is not None:
        stats.append(solver)
    sink_side = labels.astype(bool)
    return (~sink_side).sum(axis=0).astype(np.int64)


def _cost_prefix(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cumulative sums of a (D, M, N) cost volume along the disparities (D + 1
    planes, int64) and each pixel's largest cost: what :func:`_window_costs` reads."""
    prefix = np.zeros((cost.shape[0] + 1, *cost.shape[1:]), dtype=np.int64)
    np.cumsum(cost, axis=0, out=prefix[1:])
    return prefix, cost.max(axis=0).astype(np.int64)


def _window_costs(
    prefix: np.ndarray,
    top: np.ndarray,
    base: np.ndarray,
    step: int,
    count: int,
    w: np.ndarray,
    cost: np.ndarray | None = None,
    slope_div: int = 0,
) -> np.ndarray:
    """The data costs of the labels ``base + r * step`` (r = 0 .. count - 1), (count, M,
    N) int64, pooled over each label's window, the disparities ``d`` in ``[0, D)``
    with ``|d - l| <= step // 2``: ``slope_div == 0``, the mean of their costs, rounded
    half up; ``slope_div > 0``, the least of ``C(d) + (W_p |d - l| + slope_div // 2)
    // slope_div``, ``W_p`` the sum of the pixel's pair weights (``cost``: the (D, M,
    N) volume). For ``step == 1`` both are the cost itself (``prefix``, ``top``:
    :func:`_cost_prefix`). A label ``l`` outside ``[0, D)`` costs the pixel's largest
    cost ``top`` plus ``(step * W_p + 1)`` for each step it lies beyond (rounded up):
    moving it a step inwards lowers the energy whatever the neighbours are (a pooled
    cost is at most ``top``), so no minimum uses it. The device builds the same costs
    inside ``ishikawa_window`` (kernels/stereo.cu).
    """
    ndisp = int(prefix.shape[0]) - 1
    half = step // 2
    lab = base[None] + step * np.arange(count, dtype=np.int64)[:, None, None]
    inside = np.clip(lab, 0, ndisp - 1)
    wsum = np.zeros(base.shape, dtype=np.int64)
    wsum[:, :-1] += w[0, :, :-1]
    wsum[:, 1:] += w[0, :, :-1]
    wsum[:-1] += w[1, :-1]
    wsum[1:] += w[1, :-1]
    if slope_div:
        pooled = np.take_along_axis(cost, inside, axis=0).astype(np.int64)
        for k in range(1, half + 1):
            extra = (wsum * k + slope_div // 2) // slope_div
            for d in (inside - k, inside + k):
                ok = (d >= 0) & (d < ndisp)
                got = np.take_along_axis(cost, np.clip(d, 0, ndisp - 1), axis=0)
                pooled = np.where(ok, np.minimum(pooled, got + extra[None]), pooled)
    else:
        lo = np.clip(inside - half, 0, ndisp)
        hi = np.clip(inside + half + 1, 0, ndisp)
        total = np.take_along_axis(prefix, hi, axis=0)
        total -= np.take_along_axis(prefix, lo, axis=0)
        span = hi - lo
        pooled = (2 * total + span) // (2 * span)  # the mean, rounded half up
    outside = (np.abs(lab - inside) + step - 1) // step
    out = top[None] + outside * (step * wsum + 1)[None]
    return np.where(outside > 0, out, pooled)


def _window_cut(
    cost: Any,
    w: Any,
    base: Any,
    step: int,
    count: int,
    backend: str,
    stats: list | None = None,
    prefix: tuple | None = None,
    slope_div: int = 0,
    callback: Any = None,
) -> Any:
    """The labelling ``d_p = base_p + r_p * step`` (``0 <= r_p < count``) of least
    energy under :func:`_window_costs` (pooled by ``slope_div``) and the linear prior,
    exactly, provided neighbours with different bases differ by at least ``(count -
    1) * step``.

    The prior of a pair ``(p, q)`` is ``w_pq |base_p - base_q + step (r_p - r_q)|``:
    with equal bases Ishikawa's pair arcs of capacity ``w_pq * step``; otherwise the
    sign of the difference cannot change, so it is linear in ``r_p`` and ``r_q``,
    unary terms ``+- w_pq * step * r``. (A pair that meets neither condition gets the
    arcs, which bound its prior from above: the cut is then a descent step, not
    exact.) One Ishikawa cut of ``count - 1`` layers (``count >= 2``).

    ``backend="gpu"``: ``cost`` (D, M, N) int32, ``w`` (2, M, N) int32 and ``base``
    (M, N) int64, C-contiguous CuPy arrays; one launch builds the graph
    (``_stereo_gpu.window_graph_gpu``). ``"cpu"``: NumPy arrays, ``prefix`` the
    :func:`_cost_prefix` of ``cost`` (computed when not given). ``callback``: the
    CPU cut is watched (:func:`_watched_cpu_cut`).
    """
    if backend == "gpu":
        from ._stereo_gpu import window_graph_gpu

        *graph, bound, top = window_graph_gpu(
            cost, base, w, step, count, _ISHIKAWA_INF, slope_div
        )
        _check_ishikawa_fits(bound, top)
        return base + step * _ishikawa_cut(*graph, backend, stats)
    prefix_sums, top = _cost_prefix(cost) if prefix is None else prefix
    costs = _window_costs(prefix_sums, top, base, step, count, w, cost, slope_div)
    far = (count - 1) * step
    slope = np.zeros(base.shape, dtype=np.int64)
    arcs = np.zeros(w.shape, dtype=np.int64)
    for k, (sp, sq) in enumerate(
        (
            ((slice(None), slice(None, -1)), (slice(None), slice(1, None))),
            ((slice(None, -1), slice(None)), (slice(1, None), slice(None))),
        )
    ):
        diff = base[sp] - base[sq]
        apart = np.abs(diff) >= far
        wk = w[k][sp].astype(np.int64) * step
        sign = np.sign(diff) * apart
        slope[sp] += wk * sign
        slope[sq] -= wk * sign
        arcs[k][sp] = np.where(apart, 0, wk)
    costs += slope[None] * np.arange(count, dtype=np.int64)[:, None, None]
    return base + step * _ishikawa(costs, arcs, backend, stats, callback)


def _pyramid_step(ndisp: int, label_step: Any) -> int:
    """The first step of the Ishikawa pyramid: ``label_step`` checked, or the default
    (:data:`PYRAMID_COARSE_LABELS`)."""
    if label_step is None:
        step = 1
        while -(-ndisp // (2 * step)) >= PYRAMID_COARSE_LABELS:
            step *= 2
        return step
    if (
        isinstance(label_step, bool)
        or not isinstance(label_step, (int, np.integer))
        or label_step < 1
        or label_step & (label_step - 1)
    ):
        raise ValueError(f"label_step must be a power of two >= 1, got {label_step!r}")
    if label_step > 1 and 0 < ndisp <= label_step:
        raise ValueError(
            f"label_step must be below the number of disparities ({ndisp}), got "
            f"{label_step}"
        )
    return int(label_step)


def _ishikawa_pyramid(
    cost: Any,
    w: Any,
    label_step: Any,
    backend: str,
    stats: dict | None = None,
    callback: Any = None,
) -> Any:
    """The linear prior coarse to fine over the labels (see the module docstring);
    ``callback(done, total)`` after each level.

    Level 1: the labels ``0, s, 2s, ...`` below D (window costs of step ``s`` pooled
    by :data:`PYRAMID_SLOPE_DIV`); each later level halves the step ``t`` and cuts the
    three labels ``d_p - t, d_p, d_p + t`` (their windows' mean costs) around the last
    level's ``d`` (multiples of ``2t``, so neighbours with
    different labels differ by at least ``2t``: every level is exact,
    :func:`_window_cut`). The last level (``t = 1``) is the exact minimum of the true
    energy over ``{d_p - 1, d_p, d_p + 1}``.
    """
    xp = _xp(backend)
    ndisp, m, n = (int(v) for v in cost.shape)
    step = _pyramid_step(ndisp, label_step)
    solver: list = []
    total = step.bit_length()  # levels

    def watch(done: int) -> Any:
        # while a level's CPU cut runs: the progress of the levels before it
        return None if callback is None else (lambda _d, _t: callback(done, total))

    if step == 1:  # the window costs of step 1 are the costs themselves
        levels = [(1, ndisp)]
        d = _ishikawa(cost, w, backend, solver, watch(0))
        if callback is not None:
            callback(1, 1)
    else:
        c = _to(xp, cost)
        # int32: _check_solver_inputs bounds the range (a constant shift of every
        # cost changes no minimum)
        if c.dtype != np.int32 and int(c.min()) < -_INT32_MAX:
            c = c - c.min()
        c = xp.ascontiguousarray(c, dtype=np.int32)
        w = xp.ascontiguousarray(_to(xp, w), dtype=np.int32)
        prefix = _cost_prefix(c) if xp is np else None
        levels = [(step, (ndisp - 1) // step + 1)]
        d = xp.zeros((m, n), np.int64)
        d = _window_cut(
            c,
            w,
            d,
            step,
            levels[0][1],
            backend,
            solver,
            prefix,
            PYRAMID_SLOPE_DIV,
            callback=watch(0),
        )
        if callback is not None:
            callback(1, total)
        t = step
        while t > 1:
            t //= 2
            levels.append((t, 3))
            done = len(levels) - 1
            d = _window_cut(
                c, w, d - t, t, 3, backend, solver, prefix, callback=watch(done)
            )
            if callback is not None:
                callback(len(levels), total)
    if stats is not None:
        stats["levels"] = [
            {"step": s, "labels": k, "solver": st}
            for (s, k), st in zip(levels, solver, strict=True)
        ]
    return d


def _check_solver_inputs(c: Any, w: Any, kind: str, trunc: int, xp: Any) -> int:
    """The checks of :func:`solve_disparity`'s arrays. Returns the constant to take
    from every cost before the solve (0 but where positive costs need it to fit the
    int32 move graphs: a constant leaves the minimiser as it is)."""
    if c.ndim != 3 or tuple(w.shape) != (2, *c.shape[1:]):
        raise ValueError(
            f"cost must be (D, M, N) and weights (2, M, N), got {tuple(c.shape)} and "
            f"{tuple(w.shape)}"
        )
    for name, a in (("cost", c), ("weights", w)):
        if a.dtype.kind not in "iu":
            raise TypeError(
                f"{name} must be an integer array, got dtype {a.dtype}; quantise "
                "it first"
            )
    if c.shape[0] < 1:
        raise ValueError(
            f"cost must hold at least one disparity (D >= 1 in (D, M, N)), got "
            f"shape {tuple(c.shape)}"
        )
    if w.size and int(w.min()) < 0:
        at = first_index(w < 0)
        raise ValueError(f"weights must be non-negative, got {w[at].item()} at {at}")
    if not c.size:
        return 0
    # every capacity of a move graph is at most the cost range plus the four pair
    # terms of a node (int32 on both backends)
    vmax = {"potts": 1, "truncated_linear": trunc, "linear": c.shape[0] - 1}[kind]
    lo, hi = int(c.min()), int(c.max())
    pairs = 4 * (int(w.max()) if w.size else 0) * vmax
    shift = lo if lo > 0 and hi + pairs > _INT32_MAX else 0
    top = (hi - shift) - min(lo - shift, 0) + pairs
    if top > _INT32_MAX:
        raise ValueError(
            f"cost and weights are too large for int32 move graphs (cost range + 4 "
            f"* max weight * max V = {top} > {_INT32_MAX}); lower the cost scale"
        )
    return shift


def solve_disparity(
    cost: Any,
    weights: Any,
    *,
    method: str = "expansion",
    smoothness: str | None = None,
    truncation: int = 2,
    max_cycles: int = 5,
    tol: float = 0.0,
    backend: str = "auto",
    callback: Any = None,
    moves_per_cut: int | None = None,
    stats: dict | None = None,
    label_step: int | None = None,
) -> Any:
    """Minimise the stereo energy of an integer cost volume over labels ``0 .. D-1``.

    Parameters
    ----------
    cost : ndarray of int, shape (D, M, N)
        Data costs ``cost[d, y, x]``.
    weights : ndarray of int, shape (2, M, N)
        Non-negative pair weights (plane 0: +x neighbour, plane 1: +y).
    method : {"expansion", "ishikawa", "ishikawa_pyramid"}
        Alpha-expansion, the exact Ishikawa cut, or Ishikawa's construction coarse to
        fine over the labels (see the module docstring).
    smoothness : {"potts", "truncated_linear", "linear"}, optional
        Default ``"truncated_linear"`` for expansion and ``"linear"`` for the Ishikawa
        methods (the only prior they accept).
    truncation : int
        ``T`` of ``min(|d_p - d_q|, T)``.
    max_cycles : int
        Cap on expansion cycles (each cycle tries every label once).
    tol : float
        Expansion stops after a cycle that lowered the energy by at most ``tol`` times
        the energy before it (0: only when a cycle changes nothing, a local minimum).
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy inputs or when a device is present, else the
        CPU (``VISION_CUTS_BACKEND`` overrides it). On the GPU the whole loop stays on
        the device.
    callback : callable, optional
        Progress, ``callback(done, total)`` (see :func:`stereo_disparity`).

    Returns
    -------
    labels : ndarray of int, shape (M, N)
        The array kind of ``cost`` (CuPy in, CuPy out).

    Other Parameters
    ----------------
    moves_per_cut : int, optional
        Expansion moves built from one labelling and cut together as one stacked grid
        (``_stereo_gpu.expansion_loop``); each is applied only if it lowers the energy.
        1 = the plain sequential algorithm (the default on the CPU). Default on the GPU:
        4 (:data:`GPU_MOVES_PER_CUT`), where one cut of four stacked moves costs about
        2.3 times one move's cut (benchmarks/eval_stereo.py).
    stats : dict, optional
        Receives ``cycles``, ``cuts``, ``moves`` and ``energies`` (loop with
        ``backend="gpu"`` or ``moves_per_cut > 1``); for ``"ishikawa_pyramid"``,
        ``levels``: per level its ``step``, its ``labels`` a pixel and the ``solver``'s
        stats (work counters: sweeps and global relabels on the GPU).
    label_step : int, optional
        ``"ishikawa_pyramid"``: the first level's step, a power of two below D (1: the
        exact Ishikawa cut). Default: the largest that leaves at least 16 labels
        (:data:`PYRAMID_COARSE_LABELS`; 4 for 61 disparities).
    """
    method = _check_method(method)
    kind = _check_smoothness(smoothness, method)
    shape = getattr(cost, "shape", ())
    _check_label_step(label_step, method, int(shape[0]) if len(shape) == 3 else None)
    backend = resolve_backend(backend, cost, weights)
    xp = _xp(backend)
    for name, a in (("cost", cost), ("weights", weights)):
        if not hasattr(a, "shape"):
            raise TypeError(
                f"{name} must be a NumPy or CuPy array, got {type(a).__name__}"
            )
    _check_truncation(truncation)
    moves_per_cut = _moves_per_cut(moves_per_cut, backend)
    from .multilabel import _check_run

    max_cycles, tol = _check_run(max_cycles, tol, callback, moves_per_cut)
    c = _to(xp, cost)
    w = _to(xp, weights)
    shift = _check_solver_inputs(c, w, kind, int(truncation), xp)
    if shift:
        c = c - c.dtype.type(shift)
    if c.shape[0] == 1 or not c.size:  # one disparity, or no pixel: nothing to choose
        if stats is not None:
            energy = int(cost[0].sum()) if c.size else 0
            if method == "ishikawa_pyramid":
                stats.update(levels=[])
            elif method == "expansion":
                stats.update(cycles=0, cuts=0, moves=0, energies=[energy])
        if callback is not None:
            callback(1, 1)
        return _same_kind(xp.zeros(c.shape[1:], dtype=np.int64), cost)
    if method == "ishikawa_pyramid":
        labels = _ishikawa_pyramid(c, w, label_step, backend, stats, callback)
        return _same_kind(labels, cost)
    if method == "ishikawa":
        labels = _ishikawa(c, w, backend, callback=callback)
        if callback is not None:
            callback(1, 1)
        return _same_kind(labels, cost)
    if backend == "cpu" and moves_per_cut == 1 and stats is None:
        labels = _expansion(
            c,
            w,
            kind,
            int(truncation),
            max_cycles,
            backend,
            callback=callback,
            tol=tol,
        )
    else:
        labels = _expansion_moves(
            c,
            w,
            kind,
            int(truncation),
            max_cycles,
            backend,
            int(moves_per_cut),
            callback=callback,
            tol=tol,
            stats=stats,
        )
        if shift and stats is not None:  # the energies of the costs as given
            offset = shift * int(c.shape[1]) * int(c.shape[2])
            stats["energies"] = [e + offset for e in stats["energies"]]
    return _same_kind(labels, cost)


# ---------------------------------------------------------------------- front door
def _quantised(a: Any, cost_scale: Any, xp: Any, what: str, given: dict) -> Any:
    """``round(a * cost_scale)`` as int32 (``a``: finite and >= 0); a value beyond
    int32 is a ValueError naming ``what`` and the parameters ``given`` (name: value)
    that set it."""
    q = xp.rint(a * cost_scale)
    if q.size and not bool((q < 2**31).all()):  # (an overflow to inf included)
        params = ", ".join(f"{k}={v!r}" for k, v in given.items())
        raise ValueError(
            f"{what} quantised with {params} must be at most {_INT32_MAX} (int32), got "
            f"{float(q.max()):.6g}: lower {' or '.join(given)}"
        )
    return q.astype(np.int32)


def stereo_disparity(
    left: Any,
    right: Any,
    *,
    max_disparity: int,
    method: str = "expansion",
    smoothness: str | None = None,
    backend: str = "auto",
    lam: float | None = None,
    truncation: int = 2,
    max_cycles: int = 5,
    tol: float = 1e-3,
    cost_scale: float = 100.0,
    census_radius: int = 2,
    window: int = 3,
    callback: Any = None,
    moves_per_cut: int | None = None,
    label_step: int | None = None,
) -> Any:
    """Dense disparity of the left view by graph cuts.

    Parameters
    ----------
    left, right : ndarray, shape (M, N) or (M, N, C)
        Rectified pair; left pixel ``(x, y)`` matches right ``(x - d, y)``. Read on
        the 0..255 scale of the matching parameters: uint8 and other integers as
        grey levels, uint16 scaled by 255 / 65535, bool as 0 / 255, floats scaled by
        255 where they lie in [0, 1] (a resampling filter's overshoot up to 1.5
        included), else grey levels, as :func:`optical_flow` reads frames; a float
        pair with one image on each scale is a ValueError.
    max_disparity : int
        Largest disparity searched, ``0 < max_disparity < N``; labels ``0 ..
        max_disparity``.
    method : {"expansion", "ishikawa", "ishikawa_pyramid"}
        Alpha-expansion (approximate, Potts or truncated linear prior), the exact
        Ishikawa cut (linear prior), or Ishikawa's construction coarse to fine over the
        labels (linear prior; a cut of about D / 4 layers and two-layer refinements
        instead of one of D - 1 layers, see :func:`solve_disparity`).
    smoothness : {"potts", "truncated_linear", "linear"}, optional
        The prior ``V``; default truncated linear (expansion) / linear (Ishikawa).
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy inputs or when a device is present, else the
        CPU (``VISION_CUTS_BACKEND`` overrides it). On the GPU the cost volume, the
        weights and the expansion loop (or the Ishikawa graph) stay on the device.
    lam : float, optional
        Smoothness strength relative to the data cost (a cost of 1 = a fully
        mismatched census + colour). Default 0.2 (expansion), 0.05 (the Ishikawa
        methods).
    truncation : int
        ``T`` of the truncated linear prior.
    max_cycles : int
        Cap on expansion cycles.
    tol : float
        Stop expansion after a cycle that lowered the energy by at most ``tol`` times
        the energy before it (default 0.001; 0 = run to a local minimum with respect
        to expansion moves, or to ``max_cycles``).
    cost_scale : float
        Costs and weights are quantised to ``round(value * cost_scale)`` (int32;
        ``cost_scale > 0``).
    census_radius, window : int
        Cost-volume parameters (:func:`stereo_cost_volume`; ``window`` in ``[1,
        46340]``; census radius at most 3 on the GPU).
    callback : callable, optional
        Progress: called as ``callback(done, total)`` after each move (expansion) or
        the cut (Ishikawa); ``done == total`` at the end. The progress so far is
        also reported again about every quarter second while the cost volume is
        built (``(0, total)``; with the expansion only once it has run that long)
        and, with the Ishikawa methods, while a CPU cut runs: an exception the
        callback raises (a cancel) stops the work and is raised to the caller.

    Returns
    -------
    disparity : ndarray of float32, shape (M, N)
        The array kind of ``left`` (CuPy in, CuPy out, with no host round trip).

    Other Parameters
    ----------------
    moves_per_cut : int, optional
        Expansion moves cut together as one stacked grid (see
        :func:`solve_disparity`); 1 = the plain sequential algorithm. Default: 1 on
        the CPU, 4 on the GPU.
    label_step : int, optional
        ``"ishikawa_pyramid"``: the first level's step (see :func:`solve_disparity`).

    Raises
    ------
    ValueError
        Images of different shapes / channels or with a value that is not finite,
        ``max_disparity`` outside ``(0, N)``, unknown ``method`` or ``smoothness``,
        ``lam < 0``, ``cost_scale <= 0``, ``window`` or ``max_cycles`` below 1,
        ``tol < 0``, or quantised costs or weights beyond int32; for the Ishikawa
        methods also a graph whose total capacity would pass int32 (the sum over
        the pixels of their first disparity's cost above their cheapest must stay
        below 2**30: some 10-25 megapixels at the default ``cost_scale``; lower
        ``cost_scale``, or use ``"expansion"``).
    TypeError
        Images that are not of real numbers (complex, object) or masked; a scalar
        parameter of the wrong type.
    BackendUnavailableError
        ``backend="gpu"`` without a usable device.
    """
    from .multilabel import _check_run

    method = _check_method(method)
    kind = _check_smoothness(smoothness, method)
    first, _ = _check_pair(left, right, None)  # shapes only, before any copy
    width = int(first.shape[1])
    max_disparity = _check_max_disparity(max_disparity, width)
    _check_label_step(label_step, method, max_disparity + 1)
    # the scalars are checked (the values passed on as given), before any work
    if lam is None:
        lam = 0.2 if method == "expansion" else 0.05
    check_number(lam, "lam", low=0)
    check_number(cost_scale, "cost_scale", low=0, above=True)
    check_int(window, "window", 1, _MAX_WINDOW)
    max_cycles, _ = _check_run(
        max_cycles, tol, callback, 1 if moves_per_cut is None else moves_per_cut
    )
    backend = resolve_backend(backend, left, right)
    xp = _xp(backend)
    lp, rp = _check_pair(left, right, xp)
    watch = None  # while the volume is built: (0, total) now and then
    if callback is not None and method in _ISHIKAWA_METHODS:
        levels = 1
        if method == "ishikawa_pyramid":
            levels = _pyramid_step(max_disparity + 1, label_step).bit_length()
        watch = _every(_WATCH_S, lambda _d, _t: callback(0, levels))
    elif callback is not None:  # the expansion: only a volume that runs that long
        from ._stereo_gpu import label_groups  # the moves of a cycle

        per_cut = _moves_per_cut(moves_per_cut, backend)
        total = max_cycles * label_groups(max_disparity + 1, per_cut).size
        watch = _every(_WATCH_S, lambda _d, _t: callback(0, total), first=False)
    cost = stereo_cost_volume(
        lp,
        rp,
        max_disparity,
        census_radius=census_radius,
        window=window,
        backend=backend,
        callback=watch,
    )
    scale = {"cost_scale": cost_scale}
    c = _quantised(cost, cost_scale, xp, "the matching costs", scale)
    if watch is not None:  # (a cancel between the volume and the first cut)
        watch(0, 0)
    w = _quantised(
        _weights(lp, lam, _THRESHOLD, _RATIO), cost_scale, xp, "the pair weights",
        {"lam": lam, "cost_scale": cost_scale},
    )  # fmt: skip
    labels = solve_disparity(
        c,
        w,
        method=method,
        smoothness=kind,
        truncation=truncation,
        max_cycles=max_cycles,
        tol=tol,
        callback=callback,
        backend=backend,
        moves_per_cut=moves_per_cut,
        label_step=label_step,
    )
    return _same_kind(labels.astype(np.float32), left)
