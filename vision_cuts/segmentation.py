"""Binary segmentation front ends built on :func:`vision_cuts.maxflow_grid`."""

from __future__ import annotations

import logging
import math
import numbers
from typing import Any, NamedTuple

import numpy as np

from ._backend import _check_name, is_cupy_array, resolve_backend, to_numpy
from ._validate import INT32_MAX, UNIT_SLACK, check_finite, first_index
from .grid import (
    _arc_views,
    connectivity_planes,
    grid_energy,
    neighbour_offsets,
)
from .maxflow import maxflow_grid

__all__ = ["GaussianMixture", "GrabCutResult", "grabcut", "segment"]

log = logging.getLogger(__name__)


def segment(
    unary: Any,
    weights: Any = None,
    *,
    pairwise: Any = None,
    connectivity: int = 1,
    scale: float | None = None,
    backend: str = "auto",
) -> Any:
    """Minimum-energy binary labelling of a 2-D or 3-D grid energy.

    Parameters
    ----------
    unary : ndarray, shape (M, N, 2) or (P, M, N, 2)
        Cost of label 0 (background) and label 1 (foreground) per node.
    weights : ndarray, shape (D, *grid), optional
        Smoothness weight between each node and its forward neighbour in each of the
        neighbourhood's ``D`` directions (see :func:`vision_cuts.grid_energy`).
    pairwise : ndarray, optional
        Pairwise matrix, as in :func:`vision_cuts.grid_energy`.
    connectivity : int
        The neighbourhood, as in :func:`vision_cuts.grid_energy` (2-D: 4 or 8, 3-D: 6,
        18 or 26 neighbours, or SciPy's rank); every one runs on both backends.
    scale : float, optional
        Quantise floating costs to ``round(value * scale)``.
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy inputs or when a device is present, else the
        CPU (``VISION_CUTS_BACKEND`` overrides it).

    Returns
    -------
    labels : ndarray of uint8, grid shape
        1 = foreground (sink side), 0 = background; the exact global minimum of E
        (the same array kind as ``unary``). Where E has several minima, the CPU and
        the GPU may return different ones (:class:`vision_cuts.MinCut` says which).
    """
    given = [a for a in (unary, weights, pairwise) if a is not None]
    on_device = resolve_backend(backend, unary) == "gpu" and all(
        isinstance(a, np.ndarray) and a.dtype.kind in "iuf" for a in given
    )
    if on_device:
        # NumPy costs for the GPU: build the energy there (one upload of the costs,
        # weights and pairwise terms through the pinned staging buffers), not in a
        # host pass over every arc plane (H200, 128^3 26-connected 212-230 -> 55-56
        # ms, 2 MP 8-connected 80-83 -> 23; with the staged upload and the one-kernel
        # energy: 8-connected 2 MP 24-26 -> 12.4-12.6, 8 MP 95-96 -> 40-42)
        from ._staging_gpu import upload_host

        unary, weights, pairwise = upload_host(unary, weights, pairwise)
    energy = grid_energy(
        unary, pairwise, weights=weights, connectivity=connectivity, scale=scale
    )
    labels = maxflow_grid(energy, backend=backend).labels
    return labels.get() if on_device else labels


# ---- GrabCut ------------------------------------------------------------------------

_LOG2PI = float(np.log(2.0 * np.pi))
_COST_SCALE = 64.0  # nats -> integer capacities: 1/64 nat resolution
# A fixed pixel's cost of the wrong label: this, or more where the pixel's smoothness
# weights add up to it (``_fixed_cost``; both backends).
_FIXED_COST = 1 << 24
_SRGB_TO_XYZ = np.array(
    [
        [0.412453, 0.357580, 0.180423],
        [0.212671, 0.715160, 0.072169],
        [0.019334, 0.119193, 0.950227],
    ]
)
_D65_WHITE = np.array([0.950456, 1.0, 1.088754])


class GaussianMixture(NamedTuple):
    """A colour model: ``K`` full-covariance Gaussians (arrays of the backend's kind).

    Attributes
    ----------
    weights : array, shape (K,)
    means : array, shape (K, C)
    covariances : array, shape (K, C, C)
    """

    weights: Any
    means: Any
    covariances: Any


class GrabCutResult(NamedTuple):
    """Result of :func:`grabcut`.

    Attributes
    ----------
    mask : ndarray of uint8, shape (M, N)
        1 = foreground, 0 = background (same array kind as the image).
    foreground_model, background_model : GaussianMixture
        The colour models of the last iteration, in CIE L*a*b*; pass the result
        back as ``init=`` to refine it with more scribbles.
    iterations : int
        Graph cuts made (fewer than asked when the mask stopped changing: the next cut
        would be the same).
    energy : int
        Energy of ``mask`` in the last cut (integer units of 1/64 nat).
    """

    mask: Any
    foreground_model: GaussianMixture
    background_model: GaussianMixture
    iterations: int
    energy: int


def _xp_of(backend: str):
    if backend == "gpu":
        import cupy

        return cupy
    return np


#: how far a float image may stray outside [0, 1] (the overshoot of a resampling
#: filter); beyond it, a picture on another scale (0..255 floats) would be read as
#: colours 255 times too bright
_FLOAT_SLACK = UNIT_SLACK


def _as_image(image: Any, xp) -> Any:
    """(M, N, 3) float32 in [0, 255] on the backend, from grey / RGB / RGBA input."""
    if not (is_cupy_array(image) or isinstance(image, np.ndarray)):
        raise TypeError(
            f"image must be a NumPy or CuPy array, got {type(image).__name__}"
        )
    if image.ndim == 3 and image.shape[-1] == 4:
        image = image[..., :3]
    if image.ndim == 3 and image.shape[-1] == 1:
        image = image[..., 0]
    if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[-1] != 3):
        raise ValueError(
            f"image must be (M, N) grey, (M, N, 3) RGB or (M, N, 4) RGBA, got shape "
            f"{tuple(image.shape)}"
        )
    if min(image.shape[:2]) < 1:
        raise ValueError(f"image must not be empty, got shape {tuple(image.shape)}")
    kind = image.dtype.kind
    if image.dtype == np.uint8:
        scale = 1.0
    elif image.dtype == np.uint16:
        scale = 255.0 / float(np.iinfo(np.uint16).max)
    elif kind == "f" or kind == "b":
        scale = 255.0  # floating images in [0, 1]
    else:  # wider integers have no range to scale from: 0..255 in int64 is common
        raise TypeError(
            f"image must have dtype uint8, uint16, float (values in [0, 1]) or bool, "
            f"got {image.dtype}; convert it first (image.astype(np.uint8) for values "
            f"in 0..255)"
        )
    given = to_numpy(image) if xp is np else xp.asarray(image)
    if kind == "f" and given.size:  # checked as given: float32 would round 1e300 to
        # infinity and 1.50000001 to 1.5
        check_finite(given, "image")
        lo, hi = float(given.min()), float(given.max())
        if not -_FLOAT_SLACK <= lo <= hi <= 1 + _FLOAT_SLACK:
            raise ValueError(
                f"a float image must lie in [0, 1] (it is multiplied by 255), got "
                f"values in [{lo:g}, {hi:g}]"
                + (
                    "; for a 0..255 picture divide it by 255 or pass it as uint8"
                    if hi > 1 + _FLOAT_SLACK
                    else ""
                )  # fmt: skip
            )
    img = given.astype(xp.float32) * xp.float32(scale)
    if img.ndim == 2:
        img = xp.stack([img, img, img], axis=-1)
    return xp.ascontiguousarray(img)


def _as_scribble(mask: Any, name: str, shape: tuple) -> Any:
    """A scribble as a host boolean array (None stays None)."""
    if mask is None:
        return None
    if not (is_cupy_array(mask) or isinstance(mask, np.ndarray)):
        raise TypeError(f"{name} must be a boolean array, got {type(mask).__name__}")
    if tuple(mask.shape) != shape:
        raise ValueError(
            f"{name} must have the image's shape {shape}, got {tuple(mask.shape)}"
        )
    m = np.asarray(to_numpy(mask))
    if m.dtype == bool:
        return m.copy()
    if m.dtype.kind not in "iufc":
        raise ValueError(
            f"{name} must hold booleans or the numbers 0 and 1, got dtype {m.dtype}"
        )
    bad = (m != 0) & (m != 1)  # NaN too
    if bool(bad.any()):
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{name} must hold booleans or the numbers 0 and 1, got "
            f"{int(bad.sum())} other value(s), the first {m[at].item()!r} at {at}"
        )
    return m != 0


def _rect_entry(v: Any, rect: Any) -> int:
    """One entry of ``rect`` as an int: integers, and floats of integral value."""
    if getattr(v, "ndim", None) == 0 and hasattr(v, "item"):
        v = v.item()  # NumPy scalars and 0-d arrays
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(
            f"rect must be (x, y, width, height) integers, got {rect!r} (an entry "
            f"of type {type(v).__name__})"
        )
    if isinstance(v, numbers.Integral):
        return int(v)
    f = float(v)
    if not (math.isfinite(f) and f.is_integer()):
        raise ValueError(f"rect must be (x, y, width, height) integers, got {rect!r}")
    return int(f)


def default_box(width: int, height: int) -> tuple[int, int, int, int]:
    """The box ``vision-cuts segment`` cuts without --rect or scribbles: the central
    three quarters of the width and seven eighths of the height, at least 1 px, with
    background around it. A ValueError for a picture too small to leave any."""
    if width * height < 2:
        raise ValueError(
            f"the image is {width}x{height} pixels, too small for the default box, "
            "which must leave background around it; pass --rect x,y,w,h or --fg/--bg "
            "scribbles"
        )
    return (width // 8, height // 16, max(1, width * 3 // 4), max(1, height * 7 // 8))


def _check_rect(rect: Any, shape: tuple) -> tuple[int, int, int, int] | None:
    if rect is None:
        return None
    if isinstance(rect, (str, bytes)):
        raise TypeError(
            f"rect must be a sequence of (x, y, width, height) integers, got "
            f"{type(rect).__name__} {rect!r}"
        )
    try:
        entries = list(rect)
    except TypeError:
        raise TypeError(
            f"rect must be a sequence of (x, y, width, height) integers, got "
            f"{type(rect).__name__}"
        ) from None
    if len(entries) != 4:
        raise ValueError(f"rect must be (x, y, width, height) integers, got {rect!r}")
    x, y, w, h = (_rect_entry(v, rect) for v in entries)
    if w <= 0 or h <= 0:
        raise ValueError(f"rect width and height must be positive, got {rect!r}")
    rows, cols = shape
    x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + w, cols), min(y + h, rows)
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"rect {rect!r} does not overlap the {cols}x{rows} image")
    return x0, y0, x1, y1


def _kmeans(xs: Any, k: int, xp, iters: int = 10, rows: Any = None) -> Any:
    """k-means++ seeded k-means on at most 20,000 samples; returns the centres.

    ``rows`` (host integers, optional): the samples are ``xs[rows]``, and at most
    20,000 of them are gathered (the same ones as from ``xs[rows]`` itself)."""
    n = xs.shape[0] if rows is None else len(rows)
    rng = np.random.default_rng(0)
    if n > 20000:
        pick = np.sort(rng.choice(n, 20000, replace=False))
        xs = xs[xp.asarray(pick if rows is None else rows[pick])]
        n = 20000
    elif rows is not None:
        xs = xs[xp.asarray(rows)]
    k = min(k, n)
    centres = xs[int(rng.integers(n))][None, :]
    d2 = ((xs - centres[0]) ** 2).sum(axis=1)
    for _ in range(1, k):
        p = (xp.asnumpy(d2) if xp is not np else d2).astype(np.float64)
        total = float(p.sum())
        if total <= 0:
            break
        nxt = int(rng.choice(n, p=p / total))
        centres = xp.concatenate([centres, xs[nxt][None, :]], axis=0)
        d2 = xp.minimum(d2, ((xs - xs[nxt]) ** 2).sum(axis=1))
    for _ in range(iters):
        dist = ((xs[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        lab = dist.argmin(axis=1)
        if xp is np:
            cnt = np.bincount(lab, minlength=centres.shape[0]).astype(np.float32)
            new = np.stack(
                [
                    np.bincount(lab, weights=xs[:, c], minlength=centres.shape[0])
                    for c in range(xs.shape[1])
                ],
                axis=1,
            )
        else:  # a weighted bincount into k bins serialises its atomics on the GPU
            onehot = (lab[:, None] == xp.arange(centres.shape[0])[None, :]).astype(
                xp.float32
            )
            cnt = onehot.sum(axis=0)
            new = onehot.T @ xs
        keep = cnt > 0
        centres = xp.where(keep[:, None], new / xp.maximum(cnt, 1)[:, None], centres)
    return centres


def _nearest(xs: Any, centres: Any) -> Any:
    dist = ((xs[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    return dist.argmin(axis=1)


def _fit_gmm(xs: Any, comp: Any, k: int, xp) -> GaussianMixture:
    """Weights, means and covariances (float64) from hard component assignments.

    CPU: weighted bincounts. GPU: one-hot matrix products (a weighted bincount into
    K bins would serialise millions of atomics on K addresses).
    """
    n, c = xs.shape
    pairs = [(i, j) for i in range(c) for j in range(i, c)]
    if xp is np:
        cnt = np.bincount(comp, minlength=k).astype(np.float64)
        sums = np.stack(
            [np.bincount(comp, weights=xs[:, i], minlength=k) for i in range(c)], axis=1
        )
        second = np.stack(
            [
                np.bincount(comp, weights=xs[:, i] * xs[:, j], minlength=k)
                for i, j in pairs
            ],
            axis=1,
        )
    else:
        x64 = xs.astype(xp.float64)
        onehot = (comp[:, None] == xp.arange(k)[None, :]).astype(xp.float64)
        feats = xp.concatenate(
            [xp.ones((n, 1)), x64]
            + [(x64[:, i] * x64[:, j])[:, None] for i, j in pairs],
            axis=1,
        )
        stats = onehot.T @ feats  # (k, 1 + c + len(pairs))
        cnt, sums, second = stats[:, 0], stats[:, 1 : 1 + c], stats[:, 1 + c :]
    return _gmm_from_stats(cnt, sums, second, xp)


def _pair_index(c: int) -> np.ndarray:
    """(c, c) index of entry (i, j) of a symmetric matrix in the list of its
    distinct entries (i <= j, row by row), as _fit_gmm orders them."""
    idx = np.empty((c, c), dtype=np.intp)
    q = 0
    for i in range(c):
        for j in range(i, c):
            idx[i, j] = idx[j, i] = q
            q += 1
    return idx


def _gmm_from_stats(cnt: Any, sums: Any, second: Any, xp) -> GaussianMixture:
    """The mixture from per-component pixel counts, sums and second moments.

    ``second`` holds the distinct products ``x_i x_j`` (i <= j) summed per component.
    Covariances get 0.01 on the diagonal (as OpenCV: keeps singular models usable).
    """
    k, c = sums.shape
    prods = second[:, xp.asarray(_pair_index(c).reshape(-1))].reshape(k, c, c)
    safe = xp.maximum(cnt, 1.0)
    means = sums / safe[:, None]
    covs = prods / safe[:, None, None] - means[:, :, None] * means[:, None, :]
    covs = covs + 0.01 * xp.eye(c)[None]
    weights = cnt / xp.maximum(cnt.sum(), 1.0)
    return GaussianMixture(weights, means, covs)


def _host_model(gmm: GaussianMixture) -> GaussianMixture:
    """The model as float64 NumPy arrays."""
    return GaussianMixture(*(np.asarray(to_numpy(a), dtype=np.float64) for a in gmm))


def _component_loglik_planes(xs: Any, gmm: GaussianMixture, xp) -> Any:
    """CPU form of :func:`_component_loglik`.

    ``xs`` is (N, 3); the Mahalanobis form is expanded over the six distinct entries
    of the inverse covariance (elementwise work on contiguous channel planes).
    """
    inv = (
        xp.asnumpy(xp.linalg.inv(gmm.covariances))
        if xp is not np
        else np.linalg.inv(gmm.covariances)
    )
    logdet = np.log(np.linalg.det(inv)) * -1.0
    means = xp.asnumpy(gmm.means) if xp is not np else np.asarray(gmm.means)
    weights = xp.asnumpy(gmm.weights) if xp is not np else np.asarray(gmm.weights)
    k = weights.shape[0]
    planes = [xp.ascontiguousarray(xs[:, c]) for c in range(3)]
    out = xp.empty((k, xs.shape[0]), dtype=xp.float32)
    f32 = np.float32
    for j in range(k):
        if weights[j] <= 0:
            out[j] = -xp.inf
            continue
        d0 = planes[0] - f32(means[j, 0])
        d1 = planes[1] - f32(means[j, 1])
        d2 = planes[2] - f32(means[j, 2])
        m = inv[j]
        maha = d0 * (f32(m[0, 0]) * d0 + f32(2 * m[0, 1]) * d1 + f32(2 * m[0, 2]) * d2)
        maha += d1 * (f32(m[1, 1]) * d1 + f32(2 * m[1, 2]) * d2)
        maha += f32(m[2, 2]) * d2 * d2
        const = np.log(weights[j]) - 0.5 * logdet[j] - 1.5 * _LOG2PI
        out[j] = f32(const) - f32(0.5) * maha
    return out.T


def _component_loglik(xs: Any, gmm: GaussianMixture, xp) -> Any:
    """(N, K) log(w_k N(x | mu_k, Sigma_k)); -inf for empty components.

    With ``Sigma_k^-1 = L_k L_k^T`` (Cholesky), the Mahalanobis distance is
    ``|x^T L_k - mu_k^T L_k|^2``: one (N, 4) x (4, 3K) matrix product for all
    components, then a square and a sum (a handful of GPU launches). On the CPU the
    same sum is expanded over the six distinct entries of the inverse covariance
    instead (NumPy reduces the short last axis slowly).
    """
    if xp is np:
        return _component_loglik_planes(xs, gmm, xp)
    cov = xp.asnumpy(gmm.covariances) if xp is not np else np.asarray(gmm.covariances)
    means = xp.asnumpy(gmm.means) if xp is not np else np.asarray(gmm.means)
    weights = xp.asnumpy(gmm.weights) if xp is not np else np.asarray(gmm.weights)
    k, c = means.shape
    inv = np.linalg.inv(cov)
    chol = np.linalg.cholesky(0.5 * (inv + np.swapaxes(inv, 1, 2)))  # (k, c, c)
    proj = np.empty((c + 1, k * c), dtype=np.float64)
    for j in range(k):
        proj[:c, j * c : (j + 1) * c] = chol[j]
        proj[c, j * c : (j + 1) * c] = -means[j] @ chol[j]
    with np.errstate(divide="ignore"):
        const = np.log(weights) + 0.5 * np.log(np.linalg.det(inv)) - 0.5 * c * _LOG2PI
    n = xs.shape[0]
    xa = xp.empty((n, c + 1), dtype=xp.float32)
    xa[:, :c] = xs
    xa[:, c] = 1.0
    y = xa @ xp.asarray(proj, dtype=xp.float32)  # (n, k * c)
    maha = (y * y).reshape(n, k, c).sum(axis=2)
    return xp.asarray(const.astype(np.float32))[None, :] - 0.5 * maha


def _neg_log_mixture(ll: Any, xp) -> Any:
    m = ll.max(axis=1)
    return -(m + xp.log(xp.exp(ll - m[:, None]).sum(axis=1)))


def _smoothness(img: Any, gamma: float, xp, planes: int = 4) -> Any:
    """GrabCut's contrast-sensitive weights, 1/64 nats: (D, M, N) int32 for the
    ``planes``-plane neighbourhood (4: +x, +y; 8: and the diagonals, weighted by the
    inverse of their length), ``beta`` over its neighbour pairs."""
    steps = neighbour_offsets(2, planes)[::2]
    diffs = []
    for d in range(len(steps)):
        tail, head = _arc_views(2, 2 * d)
        dd = img[head] - img[tail]
        diffs.append((tail, (dd * dd).sum(axis=2)))
    total = sum(float(sq.sum()) for _, sq in diffs)
    count = sum(sq.size for _, sq in diffs)
    beta = 0.0 if total <= 0 or count == 0 else count / (2.0 * total)
    w = xp.zeros((len(steps), *img.shape[:2]), dtype=xp.int32)
    g = gamma * _COST_SCALE
    for d, (tail, sq) in enumerate(diffs):
        length = float(np.sqrt((steps[d] ** 2).sum()))
        w[d][tail] = xp.rint(g * xp.exp(-beta * sq) / length).astype(xp.int32)
    return w


def _rgb_to_lab(img: Any, xp) -> Any:
    """CIE L*a*b* (D65 white) of an (M, N, 3) float32 sRGB image in [0, 255].

    GrabCut's colour models and contrast term work in this space: its Euclidean
    distances follow perceived colour differences, and it separates lightness from
    chroma, so shading spreads a Gaussian along one axis.
    """
    c = img * xp.float32(1.0 / 255.0)
    # (the power's base kept >= its threshold: float images may lie outside [0, 1])
    curve = ((xp.maximum(c, xp.float32(0.04045)) + 0.055) / 1.055) ** 2.4
    lin = xp.where(c <= 0.04045, c / 12.92, curve)
    xyz = lin @ xp.asarray(_SRGB_TO_XYZ.T, dtype=xp.float32)
    t = xyz / xp.asarray(_D65_WHITE, dtype=xp.float32)
    f = xp.where(t > 0.008856, xp.cbrt(t), 7.787 * t + 16.0 / 116.0)
    lab = xp.empty_like(img)
    lab[..., 0] = 116.0 * f[..., 1] - 16.0
    lab[..., 1] = 500.0 * (f[..., 0] - f[..., 1])
    lab[..., 2] = 200.0 * (f[..., 1] - f[..., 2])
    return lab


def _incident_bound(gamma: float, planes: int) -> int:
    """An upper bound of the sum of the smoothness weights of a pixel's 4 or 8
    neighbour pairs (``_smoothness`` rounds ``64 gamma exp(...) / length``, in
    float32 on the image's backend: the relative margin covers that rounding)."""
    g = gamma * _COST_SCALE * (1.0 + 1e-6)
    lengths = [1.0] * 4 + [math.sqrt(2.0)] * (4 if planes == 8 else 0)
    return sum(int(g / length) + 1 for length in lengths)


def _smoothness_limit(planes: int, cost: int) -> int:
    """The largest smoothness, rounded down to 3 significant digits, for which
    ``1 + _incident_bound(smoothness, planes) <= cost``."""
    per_unit = _COST_SCALE * (1.0 + 1e-6) * (4.0 + (2.0**1.5 if planes == 8 else 0.0))
    raw = (cost - 1 - 2 * planes) / per_unit
    step = 10 ** max(math.floor(math.log10(raw)) - 2, 0)
    return int(raw // step) * step


def _fixed_cost(crop_w: Any, fixed: Any, xp) -> int:
    """The cost of the wrong label of the fixed pixels of a window's graph.

    ``crop_w`` is the window's (D, h, w) smoothness weights (``_window_weights``),
    ``fixed`` its (h, w) mask of pixels fixed by the rectangle or the scribbles.
    Flipping a pixel changes the pairwise terms by at most the sum of its pairs'
    weights, so a cost above that makes it a hard constraint: ``_FIXED_COST`` where
    it is (always with the default smoothness), else 1 + the largest such sum of a
    fixed pixel. Either gives the same minimum cuts wherever both respect the
    constraints, and the same energy (a fixed pixel's cost is 0 on its label).
    """
    dirs = int(crop_w.shape[0])
    if crop_w.size == 0 or 1 + 2 * dirs * int(crop_w.max()) <= _FIXED_COST:
        return _FIXED_COST
    total = xp.zeros(crop_w.shape[1:], dtype=xp.int64)
    for d in range(dirs):
        tail, head = _arc_views(2, 2 * d)
        total[tail] += crop_w[d][tail]
        total[head] += crop_w[d][tail]
    need = 1 + int(xp.where(xp.asarray(fixed), total, 0).max())
    return max(_FIXED_COST, need)


def check_grabcut_options(options: dict) -> None:
    """The options of :func:`grabcut` that do not depend on the image (``options``:
    its keyword arguments, defaults applied), checked as it checks them: for callers
    that pass them on to many calls (``segment_many``)."""
    planes = connectivity_planes(options["connectivity"], 2)
    _check_name(options["backend"], "backend")
    smoothness = options["smoothness"]
    if smoothness is None:
        smoothness = 120.0 if planes == 4 else 50.0
    _check_grabcut_args(
        options["iterations"], options["components"], smoothness, options["init"],
        None, planes, options["callback"],
    )  # fmt: skip


def _check_grabcut_args(
    iterations, components, smoothness, init, shape, planes, callback
) -> None:
    """The scalar arguments of :func:`grabcut`, its ``init`` and ``callback``."""
    if (
        isinstance(iterations, bool)
        or not isinstance(iterations, (int, np.integer))
        or iterations < 1
    ):
        raise ValueError(f"iterations must be an integer >= 1, got {iterations!r}")
    if components is not None and (
        isinstance(components, bool)
        or not isinstance(components, (int, np.integer))
        or not 1 <= components <= 32
    ):
        raise ValueError(
            f"components must be an integer in [1, 32], got {components!r}"
        )
    if isinstance(smoothness, (bool, np.bool_)) or not isinstance(
        smoothness, numbers.Real
    ):
        raise ValueError(f"smoothness must be a finite number >= 0, got {smoothness!r}")
    try:
        value = float(smoothness)
    except OverflowError:  # an integer beyond float's range
        value = math.inf if smoothness > 0 else -math.inf
    if not (
        value >= 0
        and (math.isfinite(value) or isinstance(smoothness, numbers.Integral))
    ):
        raise ValueError(f"smoothness must be a finite number >= 0, got {smoothness!r}")
    limit = _smoothness_limit(planes, INT32_MAX)
    if value > limit:
        raise ValueError(
            f"smoothness must be <= {limit} with {planes} neighbours (a fixed "
            f"pixel's cost must exceed all its smoothness weights together, in "
            f"int32), got {smoothness!r}"
        )
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    if init is not None:
        _check_init(init, components, shape)


def _check_init(init: Any, components: Any, shape: tuple | None) -> None:
    """A previous result to refine: its mask (of the image's shape, 0 / 1) and its
    two colour models (the same number K of Gaussians, finite, weights >= 0 and
    covariances positive definite); ``components`` None or K."""
    if not isinstance(init, GrabCutResult):
        raise TypeError(f"init must be a GrabCutResult, got {type(init).__name__}")
    if shape is not None and tuple(init.mask.shape) != shape:
        raise ValueError(
            f"init.mask has shape {tuple(init.mask.shape)}, the image {shape}"
        )
    if shape is not None:
        mask = np.asarray(to_numpy(init.mask))
        if mask.dtype.kind not in "biuf":
            raise TypeError(f"init.mask must hold 0 and 1, got dtype {mask.dtype}")
        bad = None if mask.dtype == bool else (mask != 0) & (mask != 1)
        if bad is not None and bool(bad.any()):
            at = first_index(bad)
            raise ValueError(
                f"init.mask must hold 0 and 1, got {mask[at].item()!r} at {at}"
            )
    sizes = []
    for name in ("foreground_model", "background_model"):
        model = getattr(init, name)
        try:
            w, mu, cov = (np.asarray(to_numpy(a), dtype=np.float64) for a in model)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"init.{name} must be a GaussianMixture of numeric arrays: {exc}"
            ) from None
        k = w.shape[0] if w.ndim == 1 else -1
        if not (1 <= k <= 32 and mu.shape == (k, 3) and cov.shape == (k, 3, 3)):
            raise ValueError(
                f"init.{name} must hold K weights, (K, 3) means and (K, 3, 3) "
                f"covariances with 1 <= K <= 32, got shapes {w.shape}, {mu.shape} "
                f"and {cov.shape}"
            )
        for part, a in (("weights", w), ("means", mu), ("covariances", cov)):
            check_finite(a, f"init.{name}.{part}")
        if bool((w < 0).any()) or not w.sum() > 0:
            raise ValueError(
                f"init.{name}.weights must be >= 0 with a positive sum, got "
                f"{w.tolist()}"
            )
        for j in range(k):
            try:
                np.linalg.cholesky(cov[j])
                ok = np.allclose(cov[j], cov[j].T)
            except np.linalg.LinAlgError:
                ok = False
            if not ok:
                raise ValueError(
                    f"init.{name}.covariances must be symmetric positive definite, "
                    f"got {cov[j].tolist()} for component {j}"
                )
        sizes.append(k)
    if sizes[0] != sizes[1]:
        raise ValueError(
            f"init's two colour models must have the same number of Gaussians, got "
            f"{sizes[0]} (foreground) and {sizes[1]} (background)"
        )
    if components is not None and int(components) != sizes[0]:
        raise ValueError(
            f"components must be left out or equal init's number of Gaussians "
            f"({sizes[0]}) when refining a result, got {components!r}"
        )


def _trimap(shape: tuple, box: Any, fg: Any, bg: Any, init: Any) -> tuple:
    """``(fixed background, fixed foreground, free, starting labels)`` of a GrabCut
    call from its rectangle, scribbles and previous result, as host boolean arrays
    (the caller's constraints; the device path uploads what it needs)."""
    if fg is not None and bg is not None and bool((fg & bg).any()):
        both = fg & bg
        raise ValueError(
            f"foreground and background scribbles overlap: {int(both.sum())} "
            f"pixel(s) are in both, the first at (row, column) {first_index(both)}"
        )
    fixed_bg = np.zeros(shape, dtype=bool)
    if box is not None:
        x0, y0, x1, y1 = box
        fixed_bg[:, :] = True
        fixed_bg[y0:y1, x0:x1] = False
    if bg is not None:
        fixed_bg |= bg
    fixed_fg = fg if fg is not None else np.zeros(shape, dtype=bool)
    fixed_bg &= ~fixed_fg
    free = ~(fixed_bg | fixed_fg)
    if init is not None:
        labels = np.asarray(to_numpy(init.mask)).astype(bool)
    elif box is not None:
        labels = ~fixed_bg
    else:
        if fg is None or bg is None or not bool(fg.any()) or not bool(bg.any()):
            raise ValueError(
                "without rect, give both foreground and background scribbles"
            )
        labels = fixed_fg | free  # free pixels start as foreground
    labels = (labels | fixed_fg) & ~fixed_bg
    if init is None:  # (a previous result brings both colour models with it)
        _check_learnable(labels, box, fg, bg, shape)
    return fixed_bg, fixed_fg, free, labels


def _check_learnable(labels: Any, box: Any, fg: Any, bg: Any, shape: tuple) -> None:
    """Both colour models need pixels to be fitted to: a ValueError that says which
    constraints leave one class without any."""
    if not bool(labels.any()):
        raise ValueError(
            "no foreground to learn from: the background scribbles cover every "
            "pixel of the rectangle; draw the rectangle around the object or add "
            "foreground scribbles"
        )
    if bool(labels.all()):
        whole = box is not None and box == (0, 0, shape[1], shape[0])
        if whole and (fg is None or not bool(fg.any())):
            reason = "the rectangle covers the whole image"
        elif whole:
            reason = (
                "the rectangle covers the whole image and there are only foreground "
                "scribbles"
            )
        else:
            reason = "the foreground scribbles cover every pixel outside the rectangle"
        raise ValueError(
            f"no background to learn from: {reason}; shrink the rectangle or add "
            "background scribbles"
        )


def _initial_models(xs: np.ndarray, labels: np.ndarray, init: Any, k: int) -> tuple:
    """The two colour models to start from on the host: ``init``'s, or k-means
    seeded fits of the starting labels."""
    if init is not None:
        return (
            GaussianMixture(*(to_numpy(a) for a in init.foreground_model)),
            GaussianMixture(*(to_numpy(a) for a in init.background_model)),
        )
    lab = labels.reshape(-1)
    fg_gmm = _fit_gmm(xs[lab], _nearest(xs[lab], _kmeans(xs[lab], k, np)), k, np)
    bg_gmm = _fit_gmm(xs[~lab], _nearest(xs[~lab], _kmeans(xs[~lab], k, np)), k, np)
    return fg_gmm, bg_gmm


def _free_window(free: np.ndarray) -> tuple:
    """``(r0, r1, c0, c1)``: the rows and columns of the graph a cut solves, the
    bounding box of the free pixels and a one-pixel border (empty when nothing is
    free; the fixed pixels outside it give the same minimum)."""
    rows, cols = free.shape
    rr = np.flatnonzero(free.any(axis=1))
    if rr.size == 0:
        return 0, 0, 0, 0
    cc = np.flatnonzero(free.any(axis=0))
    r0, r1 = max(int(rr[0]) - 1, 0), min(int(rr[-1]) + 2, rows)
    c0, c1 = max(int(cc[0]) - 1, 0), min(int(cc[-1]) + 2, cols)
    return r0, r1, c0, c1


def _window_weights(weights: np.ndarray, window: tuple) -> np.ndarray:
    """The smoothness weights cut to ``window``; the arcs leaving it (+x, +y and, with
    8 neighbours, +x+y, -x+y) are zero (all such arcs are ignored by ``grid_energy``
    anyway)."""
    r0, r1, c0, c1 = window
    crop_w = weights[:, r0:r1, c0:c1].copy()
    if r1 > r0:
        crop_w[0, :, -1] = 0
        crop_w[1, -1, :] = 0
        if len(crop_w) == 4:
            crop_w[2:, -1, :] = 0
            crop_w[2, :, -1] = 0
            crop_w[3, :, 0] = 0
    return crop_w


def _grabcut_cpu(
    img: np.ndarray,
    labels: np.ndarray,
    fixed: tuple,
    window: tuple,
    weights: np.ndarray,
    models: tuple,
    k: int,
    iterations: int,
    callback: Any,
) -> tuple:
    """GrabCut's iterations on the host: ``(mask, fg model, bg model, cuts made,
    energy)``, the mask uint8 (the arguments as ``_grabcut_gpu.run``'s; the
    neighbourhood is that of ``weights``, one plane a direction)."""
    fixed_bg, fixed_fg = fixed
    planes = 2 * len(weights)
    fg_gmm, bg_gmm = models
    xs = img.reshape(-1, 3)
    r0, r1, c0, c1 = window
    crop_w = _window_weights(weights, window)
    fixed_w = (fixed_bg | fixed_fg)[r0:r1, c0:c1]
    big = np.int32(_fixed_cost(crop_w, fixed_w, np))  # hard constraints
    made, energy = 0, 0
    for it in range(int(iterations)):
        lab = labels.reshape(-1)
        # assign components (in the pixel's own class) and refit both models; a
        # class without pixels keeps its model (as the GPU loop's refit does)
        n_fg = int(lab.sum())
        if n_fg > 0:
            comp = _component_loglik(xs[lab], fg_gmm, np).argmax(axis=1)
            fg_gmm = _fit_gmm(xs[lab], comp, k, np)
        if n_fg < lab.size:
            comp = _component_loglik(xs[~lab], bg_gmm, np).argmax(axis=1)
            bg_gmm = _fit_gmm(xs[~lab], comp, k, np)
        if r1 == r0:  # nothing free: the constraints decide
            break
        sub = img[r0:r1, c0:c1].reshape(-1, 3)
        dfg = _neg_log_mixture(_component_loglik(sub, fg_gmm, np), np)
        dbg = _neg_log_mixture(_component_loglik(sub, bg_gmm, np), np)
        fb = fixed_bg[r0:r1, c0:c1]
        ff = fixed_fg[r0:r1, c0:c1]
        cost_bg = np.rint(np.minimum(dbg, 1e6) * _COST_SCALE).reshape(fb.shape)
        cost_fg = np.rint(np.minimum(dfg, 1e6) * _COST_SCALE).reshape(fb.shape)
        unary = np.empty((r1 - r0, c1 - c0, 2), dtype=np.int32)
        unary[..., 0] = np.where(fb, 0, np.where(ff, big, cost_bg))
        unary[..., 1] = np.where(fb, big, np.where(ff, 0, cost_fg))
        energy_obj = grid_energy(unary, weights=crop_w, connectivity=planes)
        cut = maxflow_grid(energy_obj, backend="cpu")
        new = labels.copy()
        new[r0:r1, c0:c1] = cut.labels.astype(bool)
        made += 1
        changed = int((new != labels).sum())
        energy = int(energy_obj.constant) + cut.flow
        labels = new
        log.info("grabcut iteration %d: %d pixels changed", it + 1, changed)
        if callback is not None:
            callback(it + 1, int(iterations))
        if changed == 0 or not labels.any():
            break
    return labels.astype(np.uint8), fg_gmm, bg_gmm, made, energy


def grabcut(
    image: Any,
    *,
    rect: Any = None,
    foreground: Any = None,
    background: Any = None,
    iterations: int = 5,
    components: int | None = None,
    smoothness: float | None = None,
    connectivity: int = 8,
    init: GrabCutResult | None = None,
    callback: Any = None,
    backend: str = "auto",
) -> GrabCutResult:
    """GrabCut interactive segmentation: colour GMMs and iterated exact graph cuts.

    Parameters
    ----------
    image : ndarray, shape (M, N, 3), (M, N, 4) or (M, N)
        RGB (alpha ignored) or grey picture; uint8, uint16, float in [0, 1] or bool
        (other integer dtypes: convert them first). Float values may stray up to 0.5
        outside [0, 1] (a resampling filter's overshoot); beyond that (a 0..255
        picture in floats) they are a ValueError.
    rect : tuple of int, optional
        ``(x, y, width, height)`` box around the object: everything outside it is
        background, but for ``foreground`` scribbles (a stroke outside a box drawn
        too small is obeyed). Clipped to the image; it must overlap it. Integers
        (floats of integral value too); no strings or bools.
    foreground, background : ndarray of bool, shape (M, N), optional
        Scribbles: pixels that must be foreground / background (hard constraints,
        kept whatever the smoothness). Bool, or numbers that are all 0 or 1.
        Without ``rect``, both are needed (they seed the two colour models).
    iterations : int
        Graph cuts to make (>= 1); stops early once the mask no longer changes.
    components : int, optional
        Gaussians per colour model, 1 to 32 (default 5, GrabCut's; with ``init``,
        the number in its models, which a refinement keeps).
    smoothness : float, optional
        ``gamma``: weight of the contrast-sensitive term ``gamma exp(-beta |z_p -
        z_q|^2) / |p - q|`` between neighbours (>= 0). Default: GrabCut's 50 with 8
        neighbours; 120 with 4, which matches it per unit length of an axis-aligned
        boundary (``50 (1 + sqrt(2)) = 121``). At most 4910000 with 8 neighbours,
        8380000 with 4 (the int32 capacities).
    connectivity : {4, 8}
        The neighbourhood of the smoothness term, on either backend: 8 (default) is
        GrabCut's as published (diagonals weighted ``1 / sqrt(2)``, less
        metrication on diagonal boundaries); on the 20 GrabCut pictures (in CIE
        Lab) its mean errors are box 7.56 / scribble sets 5.47 and 1.57 %, against
        7.60 / 5.14 / 1.68 with 4 neighbours (over the 60 runs a tie, 4.87 against
        4.81 %: the published form stays the default), at 1.3x (GPU) to 1.5x (CPU)
        the time of 4.
    init : GrabCutResult, optional
        A previous result to refine (the interactive loop): its mask and colour models
        are the starting point, and ``rect`` / scribbles add constraints.
    callback : callable, optional
        Called as ``callback(iteration, iterations)`` after each cut (progress), and
        once more as ``(iterations, iterations)`` where the cuts stop early (a cut
        that changed nothing), so that the last call always reads done == total;
        checked to be callable up front.
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy inputs or when a device is present, else the
        CPU (``VISION_CUTS_BACKEND`` overrides it). The colour models are fitted on the
        same backend as the cut.

    Returns
    -------
    GrabCutResult
        ``mask`` (1 = foreground) in the image's array kind, the two models, the
        number of cuts made and the final energy.

    Raises
    ------
    ValueError, TypeError
        Bad image (TypeError for a dtype other than those above), rectangle,
        scribbles or parameters; a smoothness above its limit; no background to
        learn from (a rectangle covering the whole image without background
        scribbles); a pixel marked both foreground and background.

    Notes
    -----
    The colours are converted to CIE L*a*b* (sRGB, D65 white) first, on either
    backend: the colour models and the contrast term ``|z_p - z_q|`` live in that
    space, and so do the returned models (on the 20 GrabCut pictures it lowers the
    mean box-only error from 8.38 to 7.56 %, cv2.grabCut's, in RGB, being 8.59 %).
    Each iteration assigns every pixel to the most likely Gaussian of its current
    class, refits both models, and minimises ``E(x) = sum_p -log P(z_p | x_p) +
    sum_{pq} gamma exp(-beta |z_p - z_q|^2) [x_p != x_q]`` exactly with
    :func:`vision_cuts.maxflow_grid` (costs quantised to 1/64 nat). Pixels fixed by
    the rectangle or the scribbles are cut out of the graph: only the bounding box of
    the free pixels (plus a one-pixel border) is solved, which gives the same minimum.
    A fixed pixel's wrong label costs more than its smoothness weights add up to
    (``2**24``, or 1 + the largest such sum), so the minimum is the constrained one.

    References
    ----------
    C. Rother, V. Kolmogorov and A. Blake, "GrabCut: interactive foreground
    extraction using iterated graph cuts", ACM SIGGRAPH 2004.
    """
    planes = connectivity_planes(connectivity, 2)
    which = resolve_backend(backend, image)
    if smoothness is None:
        smoothness = 120.0 if planes == 4 else 50.0
    xp = _xp_of(which)
    img = _as_image(image, xp)
    img = _rgb_to_lab(img, xp)  # the colour models' and contrast term's space
    rows, cols = img.shape[:2]
    shape = (rows, cols)
    _check_grabcut_args(
        iterations, components, smoothness, init, shape, planes, callback
    )
    box = _check_rect(rect, shape)
    fg = _as_scribble(foreground, "foreground", shape)
    bg = _as_scribble(background, "background", shape)
    fixed_bg, fixed_fg, free, labels = _trimap(shape, box, fg, bg, init)
    window = _free_window(free)
    weights = _smoothness(img, float(smoothness), xp, planes)
    # (init's models were checked above: both hold K Gaussians)
    k = int(len(init.foreground_model.weights) if init is not None else components or 5)
    if xp is np:
        loop = _grabcut_cpu
        models = _initial_models(img.reshape(-1, 3), labels, init, k)
    else:
        from ._grabcut_gpu import run as loop

        models = None
        if init is not None:
            models = (init.foreground_model, init.background_model)
    mask, fg_gmm, bg_gmm, made, energy = loop(
        img, labels, (fixed_bg, fixed_fg), window, weights, models, k, iterations,
        callback,
    )  # fmt: skip
    if callback is not None and made < iterations:  # converged early: the bar ends
        callback(int(iterations), int(iterations))
    if is_cupy_array(mask) != is_cupy_array(image):  # the image's array kind
        import cupy

        mask = mask.get() if is_cupy_array(mask) else cupy.asarray(mask)
    return GrabCutResult(mask, fg_gmm, bg_gmm, made, int(energy))
