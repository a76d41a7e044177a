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
  6-connected cut (Ishikawa 2003) built with :func:`vision_cuts.grid_graph`.

Everything here builds arrays with NumPy on the host and calls
:func:`vision_cuts.maxflow_grid`, which runs on the backend asked for.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage

from ._backend import resolve_backend, to_numpy
from .grid import grid_energy, grid_graph
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

METHODS = ("expansion", "ishikawa")
SMOOTHNESS = ("potts", "truncated_linear", "linear")

_INT32_MAX = 2**31 - 1
#: Capacity of the -z arcs of the Ishikawa graph ("infinite"); see _ishikawa.
_ISHIKAWA_INF = 2**30


# --------------------------------------------------------------------------- inputs
def _check_pair(left: Any, right: Any) -> tuple[np.ndarray, np.ndarray]:
    left = to_numpy(left)
    right = to_numpy(right)
    for name, img in (("left", left), ("right", right)):
        if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[-1] not in (1, 3, 4)):
            raise ValueError(
                f"{name} must be a (M, N) grey or (M, N, C) image with C in 1, 3, 4, "
                f"got shape {tuple(img.shape)}"
            )
        if img.shape[0] < 1 or img.shape[1] < 2:
            raise ValueError(f"{name} is too small: shape {tuple(img.shape)}")
    if left.shape != right.shape:
        raise ValueError(
            f"left and right must have the same shape and channels, got left "
            f"{tuple(left.shape)} and right {tuple(right.shape)}"
        )
    left = left.astype(np.float32)
    right = right.astype(np.float32)
    if left.ndim == 2:
        left, right = left[..., None], right[..., None]
    return left[..., :3], right[..., :3]


def _check_max_disparity(max_disparity: Any, width: int) -> int:
    if isinstance(max_disparity, bool) or not isinstance(
        max_disparity, (int, np.integer)
    ):
        raise ValueError(
            f"max_disparity must be an integer, got {type(max_disparity).__name__}"
        )
    if max_disparity <= 0 or max_disparity >= width:
        raise ValueError(
            f"max_disparity must satisfy 0 < max_disparity < image width ({width}), "
            f"got {max_disparity}"
        )
    return int(max_disparity)


def _check_method(method: Any) -> str:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return method


def _check_smoothness(smoothness: Any, method: str) -> str:
    if smoothness is None:
        return "truncated_linear" if method == "expansion" else "linear"
    if smoothness not in SMOOTHNESS:
        raise ValueError(f"smoothness must be one of {SMOOTHNESS}, got {smoothness!r}")
    if method == "ishikawa" and smoothness != "linear":
        raise ValueError(
            "smoothness must be 'linear' for method='ishikawa' (the construction is "
            f"exact for convex priors only), got {smoothness!r}"
        )
    return smoothness


# ---------------------------------------------------------------------- cost volume
def _census(gray: np.ndarray, radius: int) -> np.ndarray:
    """Census bit strings of a (radius*2+1)^2 window, as a (M, N, K) bool array."""
    m, n = gray.shape
    pad = np.pad(gray, radius, mode="edge")
    bits = []
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            if dy == 0 and dx == 0:
                continue
            nb = pad[radius + dy : radius + dy + m, radius + dx : radius + dx + n]
            bits.append(nb < gray)
    return np.stack(bits, axis=-1)


def stereo_cost_volume(
    left: Any,
    right: Any,
    max_disparity: int,
    *,
    census_radius: int = 2,
    ad_truncation: float = 20.0,
    census_weight: float = 1.0,
    window: int = 3,
) -> np.ndarray:
    """Matching costs ``C[d, y, x]`` of left ``(x, y)`` against right ``(x - d, y)``.

    ``C = min(mean |I_L - I_R|, ad_truncation) / ad_truncation
    + census_weight * hamming(census_L, census_R) / K``, box-filtered over a
    ``window x window`` neighbourhood (1 = no filtering). Where ``x - d < 0`` the
    right image is clamped to its first column.

    Returns
    -------
    cost : ndarray of float32, shape (max_disparity + 1, M, N), values in [0, 1 +
        census_weight].
    """
    left, right = _check_pair(left, right)
    max_disparity = _check_max_disparity(max_disparity, left.shape[1])
    m, n = left.shape[:2]
    ndisp = max_disparity + 1
    cl = _census(left.mean(axis=-1), census_radius)
    cr = _census(right.mean(axis=-1), census_radius)
    k = cl.shape[-1]
    cost = np.empty((ndisp, m, n), dtype=np.float32)
    for d in range(ndisp):
        idx = np.maximum(np.arange(n) - d, 0)
        ad = np.abs(left - right[:, idx]).mean(axis=-1)
        c = np.minimum(ad, ad_truncation) / ad_truncation
        if census_weight:
            c = c + census_weight * np.count_nonzero(cl != cr[:, idx], axis=-1) / k
        if window > 1:
            c = ndimage.uniform_filter(c, size=window, mode="nearest")
        cost[d] = c
    return cost


def stereo_weights(
    left: Any, *, smoothness: float = 1.0, threshold: float = 8.0, ratio: float = 3.0
) -> np.ndarray:
    """Contrast-sensitive pair weights (2, M, N) as float: ``ratio * smoothness`` across
    edges whose max channel difference is below ``threshold``, else ``smoothness``
    (Boykov, Veksler and Zabih 2001). Plane 0 couples p with +x, plane 1 with +y."""
    img = to_numpy(left).astype(np.float32)
    if img.ndim == 2:
        img = img[..., None]
    m, n = img.shape[:2]
    w = np.zeros((2, m, n), dtype=np.float32)
    dx = np.abs(np.diff(img, axis=1)).max(axis=-1)
    dy = np.abs(np.diff(img, axis=0)).max(axis=-1)
    w[0, :, :-1] = np.where(dx < threshold, ratio, 1.0) * smoothness
    w[1, :-1, :] = np.where(dy < threshold, ratio, 1.0) * smoothness
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
    labels in ``[0, D)``; ``smoothness`` as in :func:`solve_disparity`.
    """
    c = np.asarray(cost, dtype=np.int64)
    w = np.asarray(weights, dtype=np.int64)
    d = np.asarray(disparity).astype(np.int64)
    data = np.take_along_axis(c, d[None], axis=0).sum()
    vx = _vmat(d[:, :-1], d[:, 1:], smoothness, truncation)
    vy = _vmat(d[:-1, :], d[1:, :], smoothness, truncation)
    return int(data + (w[0, :, :-1] * vx).sum() + (w[1, :-1, :] * vy).sum())


# ------------------------------------------------------------------------- solvers
def _expansion(
    cost: np.ndarray,
    w: np.ndarray,
    kind: str,
    trunc: int,
    max_cycles: int,
    backend: str,
    init: np.ndarray | None = None,
    callback: Any = None,
) -> np.ndarray:
    ndisp, m, n = cost.shape
    cost = cost.astype(np.int64)
    labels = (np.argmin(cost, axis=0) if init is None else init).astype(np.int64)
    energy = stereo_energy(cost, w, labels, smoothness=kind, truncation=trunc)
    rows = np.arange(m)[:, None]
    cols = np.arange(n)[None, :]
    for cycle in range(max_cycles):
        improved = False
        for alpha in range(ndisp):
            if callback is not None and alpha:
                callback(cycle * ndisp + alpha, max_cycles * ndisp)
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
            e = grid_energy(unary.astype(np.int32), pw.astype(np.int32))
            cut = maxflow_grid(e, backend=backend)
            move = to_numpy(cut.labels).astype(bool)
            proposal = np.where(move, alpha, labels)
            new = stereo_energy(cost, w, proposal, smoothness=kind, truncation=trunc)
            if new < energy:
                labels, energy = proposal, new
                improved = True
        if not improved:
            break
    if callback is not None:
        callback(max_cycles * ndisp, max_cycles * ndisp)
    return labels


def _ishikawa(cost: np.ndarray, w: np.ndarray, backend: str) -> np.ndarray:
    """Exact minimum for the linear prior: one cut of a (D-1, M, N) 6-connected grid.

    Node ``(k, p)`` on the source side means ``d_p > k``; the disparity is the count of
    source-side nodes in the column. Column arcs carry the data costs along +z
    (source -> (0, p): C[0]; (k, p) -> (k+1, p): C[k+1]; (D-2, p) -> sink: C[D-1]), the
    -z arcs are "infinite" so every column is cut exactly once, and both arcs between
    ``(k, p)`` and ``(k, q)`` carry ``w_pq``, so the cut pays ``w_pq |d_p - d_q|``.
    """
    ndisp, m, n = cost.shape
    c = cost.astype(np.int64)
    c = c - c.min(axis=0, keepdims=True)  # non-negative; the argmin is unchanged
    if ndisp == 1:
        return np.zeros((m, n), dtype=np.int64)
    layers = ndisp - 1
    # A valid cut (d = 0 everywhere) costs sum C[0] (no pairwise term); the min cut is
    # never dearer, so it cuts no -z arc as long as that bound is below the "infinity".
    bound = int(c[0].sum())
    if bound >= _ISHIKAWA_INF or int(c.max()) + _ISHIKAWA_INF > _INT32_MAX:
        raise ValueError(
            "cost is too large for the Ishikawa graph in int32 (sum of cost[0] = "
            f"{bound} >= {_ISHIKAWA_INF}); lower the cost scale"
        )
    source = np.zeros((layers, m, n), dtype=np.int32)
    sink = np.zeros((layers, m, n), dtype=np.int32)
    source[0] = c[0]
    sink[-1] = c[-1]
    edges = np.zeros((6, layers, m, n), dtype=np.int32)
    edges[0] = w[0][None]  # +x
    edges[1, :, :, 1:] = w[0][None, :, :-1]  # -x: q -> p, q = p + e_x
    edges[2] = w[1][None]  # +y
    edges[3, :, 1:, :] = w[1][None, :-1, :]  # -y
    edges[4, :-1] = c[1:-1]  # +z: (k, p) -> (k+1, p) carries C[k+1]
    edges[5, 1:] = _ISHIKAWA_INF  # -z: (k+1, p) -> (k, p)
    cut = maxflow_grid(grid_graph(source, sink, edges), backend=backend)
    sink_side = to_numpy(cut.labels).astype(bool)
    return (~sink_side).sum(axis=0).astype(np.int64)


def solve_disparity(
    cost: Any,
    weights: Any,
    *,
    method: str = "expansion",
    smoothness: str | None = None,
    truncation: int = 2,
    max_cycles: int = 5,
    backend: str = "auto",
    callback: Any = None,
) -> np.ndarray:
    """Minimise the stereo energy of an integer cost volume over labels ``0 .. D-1``.

    Parameters
    ----------
    cost : ndarray of int, shape (D, M, N)
        Data costs ``cost[d, y, x]``.
    weights : ndarray of int, shape (2, M, N)
        Non-negative pair weights (plane 0: +x neighbour, plane 1: +y).
    method : {"expansion", "ishikawa"}
    smoothness : {"potts", "truncated_linear", "linear"}, optional
        Default ``"truncated_linear"`` for expansion and ``"linear"`` for Ishikawa (the
        only prior it accepts).
    truncation : int
        ``T`` of ``min(|d_p - d_q|, T)``.
    max_cycles : int
        Cap on expansion cycles (each cycle tries every label once).
    backend : {"auto", "cpu", "gpu"}

    Returns
    -------
    labels : ndarray of int64, shape (M, N)
    """
    method = _check_method(method)
    kind = _check_smoothness(smoothness, method)
    backend = resolve_backend(backend, cost, weights)
    c = to_numpy(cost)
    w = to_numpy(weights)
    if c.ndim != 3 or w.shape != (2, *c.shape[1:]):
        raise ValueError(
            f"cost must be (D, M, N) and weights (2, M, N), got {tuple(c.shape)} and "
            f"{tuple(w.shape)}"
        )
    if not (np.issubdtype(c.dtype, np.integer) and np.issubdtype(w.dtype, np.integer)):
        raise TypeError("cost and weights must be integer arrays; quantise them first")
    if w.min() < 0:
        raise ValueError("weights must be non-negative")
    if truncation < 1:
        raise ValueError(f"truncation must be >= 1, got {truncation}")
    if method == "ishikawa":
        labels = _ishikawa(c, w, backend)
        if callback is not None:
            callback(1, 1)
        return labels
    return _expansion(
        c, w, kind, int(truncation), int(max_cycles), backend, callback=callback
    )


# ---------------------------------------------------------------------- front door
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
    cost_scale: float = 100.0,
    census_radius: int = 2,
    window: int = 3,
    callback: Any = None,
) -> np.ndarray:
    """Dense disparity of the left view by graph cuts.

    Parameters
    ----------
    left, right : ndarray, shape (M, N) or (M, N, C)
        Rectified pair; left pixel ``(x, y)`` matches right ``(x - d, y)``.
    max_disparity : int
        Largest disparity searched, ``0 < max_disparity < N``; labels ``0 ..
        max_disparity``.
    method : {"expansion", "ishikawa"}
        Alpha-expansion (approximate, Potts or truncated linear prior) or the exact
        Ishikawa cut (linear prior).
    smoothness : {"potts", "truncated_linear", "linear"}, optional
        The prior ``V``; default truncated linear (expansion) / linear (Ishikawa).
    backend : {"auto", "cpu", "gpu"}
        Where the cuts run (:func:`vision_cuts.maxflow_grid`); the cost volume is built
        on the CPU.
    lam : float, optional
        Smoothness strength relative to the data cost (a cost of 1 = a fully
        mismatched census + colour). Default 0.2 (expansion), 0.05 (Ishikawa).
    truncation : int
        ``T`` of the truncated linear prior.
    max_cycles : int
        Cap on expansion cycles.
    cost_scale : float
        Costs and weights are quantised to ``round(value * cost_scale)`` (int32).
    census_radius, window : int
        Cost-volume parameters (:func:`stereo_cost_volume`).
    callback : callable, optional
        Progress: called as ``callback(done, total)`` after each move (expansion) or
        the cut (Ishikawa); ``done == total`` at the end.

    Returns
    -------
    disparity : ndarray of float32, shape (M, N)

    Raises
    ------
    ValueError
        Images of different shapes / channels, ``max_disparity`` outside ``(0, N)``,
        unknown ``method`` or ``smoothness``.
    """
    method = _check_method(method)
    kind = _check_smoothness(smoothness, method)
    lp, rp = _check_pair(left, right)
    max_disparity = _check_max_disparity(max_disparity, lp.shape[1])
    backend = resolve_backend(backend, left, right)
    if lam is None:
        lam = 0.2 if method == "expansion" else 0.05
    cost = stereo_cost_volume(
        lp, rp, max_disparity, census_radius=census_radius, window=window
    )
    c = np.rint(cost * cost_scale).astype(np.int32)
    w = np.rint(stereo_weights(lp, smoothness=lam) * cost_scale).astype(np.int32)
    labels = solve_disparity(
        c,
        w,
        method=method,
        smoothness=kind,
        truncation=truncation,
        max_cycles=max_cycles,
        callback=callback,
        backend=backend,
    )
    return labels.astype(np.float32)
