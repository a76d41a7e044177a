"""GrabCut's device path (:func:`vision_cuts.grabcut` with ``backend="gpu"``).

The trimap, the window of free pixels and the samples of the initial k-means come
from the host (NumPy: they are the caller's box and scribbles); the picture, its
colour models' work, the graphs and the labels stay on the device. Every launch has
one compiled form whatever the picture's size and box: the window's graph is cut out
and its labels written back by kernels of ``kernels/grabcut.cu`` rather than by CuPy
operations on views of the window (a view that spans the full width collapses to
fewer dimensions, and CuPy compiles a kernel for each such form, 0.5 s on the first
picture with a full-width box), and no boolean indexing runs on the device (its scans
take another form above about 2**18 elements). One host read an iteration: the flow
and the energy's constant with the count of changed labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._kernels import get_kernel, get_module

_THREADS = 256


def _cp() -> Any:
    import cupy

    return cupy


def _blocks(n: int) -> tuple:
    return (max(1, min(-(-n // _THREADS), 65535)),), (_THREADS,)


def pixel_features(xs: Any) -> Any:
    """(N, 10) float64: 1, the colour, and its six distinct products x_i x_j."""
    cp = _cp()
    n, c = xs.shape
    x64 = xs.astype(cp.float64)
    i, j = np.triu_indices(c)
    return cp.concatenate(
        [cp.ones((n, 1)), x64, x64[:, cp.asarray(i)] * x64[:, cp.asarray(j)]], axis=1
    )


def pixel_models(xs: Any, fg: Any, bg: Any) -> tuple:
    """For every pixel and both models (0 = foreground, 1 = background), the most
    likely component (2, N) uint8 and the mixture's negative log-likelihood (2, N)
    float32, in one kernel. The models are NumPy arrays (a few dozen numbers: one
    upload)."""
    cp = _cp()
    k = int(fg.weights.shape[0])
    n = int(xs.shape[0])
    packed = np.concatenate(
        [
            np.asarray(m[i], dtype=np.float64).reshape(-1)
            for i in range(3)
            for m in (fg, bg)
        ]
    )
    dev = cp.asarray(packed)
    w, mu, cov = dev[: 2 * k], dev[2 * k : 8 * k], dev[8 * k :]
    comp = cp.empty((2, n), dtype=cp.uint8)
    nll = cp.empty((2, n), dtype=cp.float32)
    kern = get_kernel(get_module("grabcut.cu"), "gmm_pixel")
    kern(*_blocks(n), (xs, w, mu, cov, np.int32(k), np.int64(n), comp, nll))
    return comp, nll


def refit(feats: Any, comp: Any, lab: Any, k: int, fg: Any, bg: Any) -> tuple:
    """Refit both models from hard assignments in one matrix product.

    Pixel p counts in foreground component ``comp[0, p]`` when ``lab[p]``, else in
    background component ``comp[1, p]``. The (2K, 10) sums come to the host, where
    the models (NumPy) are made; a class without pixels keeps its model (``fg`` /
    ``bg``, which may be None when the class cannot be empty).
    """
    from .segmentation import _gmm_from_stats

    cp = _cp()
    col = cp.where(lab, comp[0].astype(cp.int32), k + comp[1].astype(cp.int32))
    onehot = (col[:, None] == cp.arange(2 * k, dtype=cp.int32)[None, :]).astype(
        cp.float64
    )
    stats = (onehot.T @ feats).get()  # (2k, 10)
    out = []
    for part, old in ((stats[:k], fg), (stats[k:], bg)):
        if part[:, 0].sum() > 0:
            out.append(_gmm_from_stats(part[:, 0], part[:, 1:4], part[:, 4:], np))
        else:
            out.append(old)
    return out[0], out[1]


def initial_models(xs: Any, feats: Any, labels: np.ndarray, lab: Any, k: int) -> tuple:
    """Both colour models fitted to the starting labels (``labels`` on the host,
    ``lab`` the same on the device, flat): k-means++ seeded k-means of each class
    (on at most 20,000 of its pixels, picked on the host), every pixel of the class
    given its nearest centre, and one refit. The same models as the CPU path's
    ``_fit_gmm`` of the same assignments."""
    from .segmentation import _kmeans, _nearest

    cp = _cp()
    comps = []
    for rows in (np.flatnonzero(labels), np.flatnonzero(~labels)):
        centres = _kmeans(xs, k, cp, rows=rows)
        comps.append(_nearest(xs, centres).astype(cp.uint8))
    return refit(feats, cp.stack(comps), lab, k, None, None)


def window_weights(weights: Any, window: tuple) -> Any:
    """The window's (D, h, w) int32 smoothness weights (D = 2 or 4 directions), the
    arcs leaving it zero."""
    cp = _cp()
    r0, r1, c0, c1 = window
    dirs, rows, cols = weights.shape
    h, w = r1 - r0, c1 - c0
    out = cp.empty((dirs, h, w), dtype=cp.int32)
    get_kernel(get_module("grabcut.cu"), "gc_window_weights")(
        *_blocks(dirs * h * w),
        (
            cp.ascontiguousarray(weights, dtype=cp.int32),
            *(np.int32(v) for v in (rows, cols, r0, c0, h, w, dirs)),
            out,
        ),
    )
    return out


def window_costs(
    nll: Any, trimap: Any, window: tuple, scale: float, big: int, acc: Any
) -> tuple:
    """``(source, sink)`` int32 (h, w) of one cut (``gc_window_costs``); adds the
    energy's constant to ``acc[0]``."""
    cp = _cp()
    r0, r1, c0, c1 = window
    rows, cols = trimap.shape
    h, w = r1 - r0, c1 - c0
    src = cp.empty((h, w), dtype=cp.int32)
    snk = cp.empty((h, w), dtype=cp.int32)
    get_kernel(get_module("grabcut.cu"), "gc_window_costs")(
        *_blocks(h * w),
        (
            nll,
            trimap,
            *(np.int32(v) for v in (rows, cols, r0, c0, h, w)),
            np.float32(scale),
            np.int32(big),
            src,
            snk,
            acc,
        ),
    )
    return src, snk


def apply_cut(labels: Any, cut: Any, window: tuple, acc: Any) -> None:
    """Write a cut's labels into ``labels`` (bool, in place); ``acc[1]`` += pixels
    changed, ``acc[2]`` += foreground pixels gained."""
    cp = _cp()
    r0, r1, c0, c1 = window
    h, w = r1 - r0, c1 - c0
    get_kernel(get_module("grabcut.cu"), "gc_apply_cut")(
        *_blocks(h * w),
        (
            labels,
            cp.ascontiguousarray(cut, dtype=cp.uint8),
            *(np.int32(v) for v in (labels.shape[1], r0, c0, h, w)),
            acc,
        ),
    )


def run(
    img: Any,
    labels: np.ndarray,
    fixed: tuple,
    window: tuple,
    weights: Any,
    models: tuple | None,
    k: int,
    iterations: int,
    callback: Any,
) -> tuple:
    """GrabCut's iterations on the device: ``(mask, fg model, bg model, cuts made,
    energy)``, the mask a CuPy uint8 array and the models CuPy arrays.

    ``labels`` and ``fixed`` (fixed background, fixed foreground) are the host
    trimap of ``segmentation._trimap``, ``window`` its ``_free_window``, ``weights``
    the device smoothness weights, ``models`` the two models to start from (None:
    k-means fits of ``labels``). Each cut continues from the last one's residual arcs
    (same arcs, new terminal capacities: ``_maxflow_warm`` gives exactly a cold
    solve's answer).
    """
    from .grid import GridEnergy, grid_energy
    from .maxflow import _maxflow_warm
    from .segmentation import (
        _COST_SCALE,
        GaussianMixture,
        _fixed_cost,
        _host_model,
        log,
    )

    cp = _cp()
    fixed_bg, fixed_fg = fixed
    xs = img.reshape(-1, 3)
    feats = pixel_features(xs)
    lab_dev = cp.asarray(labels)
    lab = lab_dev.reshape(-1)
    if models is None:
        fg_gmm, bg_gmm = initial_models(xs, feats, labels.reshape(-1), lab, k)
    else:
        fg_gmm, bg_gmm = (_host_model(m) for m in models)
    comp_all, nll_all = pixel_models(xs, fg_gmm, bg_gmm)
    # 0 free, 1 fixed background, 2 fixed foreground (disjoint: see _trimap)
    trimap = cp.asarray(fixed_bg.astype(np.uint8) + 2 * fixed_fg.astype(np.uint8))
    r0, r1, c0, c1 = window
    arcs = residual = None
    crop_w = window_weights(weights, window)
    # the wrong label's cost of a fixed pixel: above all its smoothness weights
    big = _fixed_cost(crop_w, trimap[r0:r1, c0:c1] != 0, cp) if r1 > r0 else 0
    foreground = int(np.count_nonzero(labels))
    made, energy = 0, 0
    for it in range(int(iterations)):
        # assign components (in the pixel's own class) and refit both models
        fg_gmm, bg_gmm = refit(feats, comp_all, lab, k, fg_gmm, bg_gmm)
        comp_all, nll_all = pixel_models(xs, fg_gmm, bg_gmm)
        if r1 == r0:  # nothing free: the constraints decide
            break
        acc = cp.zeros(3, dtype=cp.int64)  # constant, changed, foreground gained
        src, snk = window_costs(nll_all, trimap, window, _COST_SCALE, big, acc)
        if arcs is None:  # the arcs do not change between cuts (validated once)
            unary = cp.zeros((r1 - r0, c1 - c0, 2), dtype=cp.int32)
            arcs = grid_energy(
                unary, weights=crop_w, connectivity=2 * len(weights)
            ).edges
        cut, residual = _maxflow_warm(GridEnergy._trusted(src, snk, arcs, 0), residual)
        apply_cut(lab_dev, cut.labels, window, acc)
        made += 1
        constant, changed, gained = (int(v) for v in acc.get())
        energy = constant + int(cut.flow)
        foreground += gained
        log.info("grabcut iteration %d: %d pixels changed", it + 1, changed)
        if callback is not None:
            callback(it + 1, int(iterations))
        if changed == 0 or foreground == 0:
            break
    fg_gmm = GaussianMixture(*(cp.asarray(a) for a in fg_gmm))
    bg_gmm = GaussianMixture(*(cp.asarray(a) for a in bg_gmm))
    return lab_dev.astype(cp.uint8), fg_gmm, bg_gmm, made, energy
