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

from typing import Any

import numpy as np
from scipy import ndimage

from ._backend import is_cupy_array, resolve_backend, to_numpy
from .grid import GridEnergy, grid_energy
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
#: Default ``moves_per_cut`` of the GPU expansion (measured on tsukuba .. bull, H200).
GPU_MOVES_PER_CUT = 4
#: Capacity of the -z arcs of the Ishikawa graph ("infinite"); see _ishikawa.
_ISHIKAWA_INF = 2**30


# --------------------------------------------------------------------------- inputs
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
    """Validate a pair (shapes only, no data read); float32 (M, N, C <= 3) in ``xp``
    (``xp=None``: validate only, return the inputs)."""
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
            raise ValueError(f"{name} is too small: shape {tuple(img.shape)}")
    if tuple(left.shape) != tuple(right.shape):
        raise ValueError(
            f"left and right must have the same shape and channels, got left "
            f"{tuple(left.shape)} and right {tuple(right.shape)}"
        )
    if xp is None:
        return left, right
    left = _to(xp, left).astype(np.float32)
    right = _to(xp, right).astype(np.float32)
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
    backend: str = "auto",
) -> Any:
    """Matching costs ``C[d, y, x]`` of left ``(x, y)`` against right ``(x - d, y)``.

    ``C = min(mean |I_L - I_R|, ad_truncation) / ad_truncation
    + census_weight * hamming(census_L, census_R) / K``, box-filtered over a
    ``window x window`` neighbourhood (1 = no filtering). Where ``x - d < 0`` the
    right image is clamped to its first column.

    ``backend``: where it is computed (``"gpu"``: ``kernels/stereo.cu``, census radius
    at most 3; equal to the CPU volume up to the rounding of the box filter's float64
    sums); the result has the array kind of ``left``.

    Returns
    -------
    cost : ndarray of float32, shape (max_disparity + 1, M, N), values in [0, 1 +
        census_weight].
    """
    which = resolve_backend(backend, left, right)
    lp, rp = _check_pair(left, right, _xp(which))
    max_disparity = _check_max_disparity(max_disparity, lp.shape[1])
    if which == "gpu":
        cost = _cost_volume_gpu(
            lp, rp, max_disparity, census_radius, ad_truncation, census_weight, window
        )
        return _same_kind(cost, left)
    cost = _cost_volume_cpu(
        lp, rp, max_disparity, census_radius, ad_truncation, census_weight, window
    )
    return _same_kind(cost, left)


def _check_census_radius(census_radius: Any, backend: str) -> int:
    from ._stereo_gpu import MAX_CENSUS_RADIUS

    top = MAX_CENSUS_RADIUS if backend == "gpu" else None
    if (
        isinstance(census_radius, bool)
        or not isinstance(census_radius, (int, np.integer))
        or census_radius < 1
        or (top is not None and census_radius > top)
    ):
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
    left, right, max_disparity, census_radius, ad_truncation, census_weight, window
):
    census_radius = _check_census_radius(census_radius, "cpu")
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
    xp = _xp("gpu" if is_cupy_array(left) else "cpu")
    img = _to(xp, left).astype(np.float32)
    if img.ndim == 2:
        img = img[..., None]
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
    labels in ``[0, D)``; ``smoothness`` as in :func:`solve_disparity`.
    """
    c = to_numpy(cost).astype(np.int64)
    w = to_numpy(weights).astype(np.int64)
    d = to_numpy(disparity).astype(np.int64)
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
    result = minimize_labels(
        np.moveaxis(np.asarray(cost, dtype=np.int64), 0, -1),
        _vmat(d[:, None], d[None, :], kind, trunc),
        weights=w,
        method="expansion",
        init=None if init is None else np.asarray(init, dtype=np.int64),
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


def _ishikawa(cost: Any, w: Any, backend: str) -> Any:
    """Exact minimum for the linear prior: one cut of a (D-1, M, N) 6-connected grid.

    Node ``(k, p)`` on the source side means ``d_p > k``; the disparity is the count of
    source-side nodes in the column. Column arcs carry the data costs along +z
    (source -> (0, p): C[0]; (k, p) -> (k+1, p): C[k+1]; (D-2, p) -> sink: C[D-1]), the
    -z arcs are "infinite" so every column is cut exactly once, and both arcs between
    ``(k, p)`` and ``(k, q)`` carry ``w_pq``, so the cut pays ``w_pq |d_p - d_q|``.
    Built with the array module of the backend (on the device for ``"gpu"``: CuPy in,
    CuPy out).
    """
    xp = _xp(backend)
    ndisp, m, n = (int(v) for v in cost.shape)
    c = _to(xp, cost).astype(np.int64)
    w = _to(xp, w)
    c = c - c.min(axis=0, keepdims=True)  # non-negative; the argmin is unchanged
    if ndisp == 1:
        return xp.zeros((m, n), dtype=np.int64)
    layers = ndisp - 1
    # A valid cut (d = 0 everywhere) costs sum C[0] (no pairwise term); the min cut is
    # never dearer, so it cuts no -z arc as long as that bound is below the "infinity".
    bound = int(c[0].sum())
    if bound >= _ISHIKAWA_INF or int(c.max()) + _ISHIKAWA_INF > _INT32_MAX:
        raise ValueError(
            "cost is too large for the Ishikawa graph in int32 (sum of cost[0] = "
            f"{bound} >= {_ISHIKAWA_INF}); lower the cost scale"
        )
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
    graph = GridEnergy._trusted(source, sink, edges, 0)
    cut = maxflow_grid(graph, backend=backend)
    sink_side = cut.labels.astype(bool)
    return (~sink_side).sum(axis=0).astype(np.int64)


def _check_solver_inputs(c: Any, w: Any, kind: str, trunc: int, xp: Any) -> None:
    if c.ndim != 3 or tuple(w.shape) != (2, *c.shape[1:]):
        raise ValueError(
            f"cost must be (D, M, N) and weights (2, M, N), got {tuple(c.shape)} and "
            f"{tuple(w.shape)}"
        )
    if c.dtype.kind not in "iu" or w.dtype.kind not in "iu":
        raise TypeError("cost and weights must be integer arrays; quantise them first")
    if w.size and int(w.min()) < 0:
        raise ValueError("weights must be non-negative")
    if c.size:
        # every capacity of a move graph is at most the cost range plus the four pair
        # terms of a node (int32 on both backends)
        vmax = {"potts": 1, "truncated_linear": trunc, "linear": c.shape[0] - 1}[kind]
        span = int(c.max()) - min(int(c.min()), 0)
        top = span + 4 * (int(w.max()) if w.size else 0) * vmax
        if top > _INT32_MAX:
            raise ValueError(
                f"cost and weights are too large for int32 move graphs (cost range + 4 "
                f"* max weight * max V = {top} > {_INT32_MAX}); lower the cost scale"
            )


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
) -> Any:
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
    tol : float
        Expansion stops after a cycle that lowered the energy by at most ``tol`` times
        the energy before it (0: only when a cycle changes nothing, a local minimum).
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy inputs or when a device is present, else the
        CPU (``VISION_CUTS_BACKEND`` overrides it). On the GPU the whole loop stays on
        the device.
    callback : callable, optional
        Progress, ``callback(done, total)``.

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
        ``backend="gpu"`` or ``moves_per_cut > 1``).
    """
    method = _check_method(method)
    kind = _check_smoothness(smoothness, method)
    backend = resolve_backend(backend, cost, weights)
    xp = _xp(backend)
    if not (hasattr(cost, "shape") and hasattr(weights, "shape")):
        raise TypeError("cost and weights must be arrays")
    if isinstance(truncation, bool) or not isinstance(truncation, (int, np.integer)):
        raise TypeError(f"truncation must be an integer, got {truncation!r}")
    if truncation < 1:
        raise ValueError(f"truncation must be >= 1, got {truncation}")
    if moves_per_cut is None:
        moves_per_cut = GPU_MOVES_PER_CUT if backend == "gpu" else 1
    from .multilabel import check_moves_per_cut

    check_moves_per_cut(moves_per_cut)
    if not tol >= 0:
        raise ValueError(f"tol must be >= 0, got {tol!r}")
    c = _to(xp, cost)
    w = _to(xp, weights)
    _check_solver_inputs(c, w, kind, int(truncation), xp)
    if method == "ishikawa":
        labels = _ishikawa(c, w, backend)
        if callback is not None:
            callback(1, 1)
        return _same_kind(labels, cost)
    if backend == "cpu" and moves_per_cut == 1 and stats is None:
        labels = _expansion(
            c,
            w,
            kind,
            int(truncation),
            int(max_cycles),
            backend,
            callback=callback,
            tol=float(tol),
        )
    else:
        labels = _expansion_moves(
            c,
            w,
            kind,
            int(truncation),
            int(max_cycles),
            backend,
            int(moves_per_cut),
            callback=callback,
            tol=float(tol),
            stats=stats,
        )
    return _same_kind(labels, cost)


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
    tol: float = 1e-3,
    cost_scale: float = 100.0,
    census_radius: int = 2,
    window: int = 3,
    callback: Any = None,
    moves_per_cut: int | None = None,
) -> Any:
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
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy inputs or when a device is present, else the
        CPU (``VISION_CUTS_BACKEND`` overrides it). On the GPU the cost volume, the
        weights and the expansion loop (or the Ishikawa graph) stay on the device.
    lam : float, optional
        Smoothness strength relative to the data cost (a cost of 1 = a fully
        mismatched census + colour). Default 0.2 (expansion), 0.05 (Ishikawa).
    truncation : int
        ``T`` of the truncated linear prior.
    max_cycles : int
        Cap on expansion cycles.
    tol : float
        Stop expansion after a cycle that lowered the energy by at most ``tol`` times
        the energy before it (default 0.001; 0 = run to a local minimum with respect
        to expansion moves, or to ``max_cycles``).
    cost_scale : float
        Costs and weights are quantised to ``round(value * cost_scale)`` (int32).
    census_radius, window : int
        Cost-volume parameters (:func:`stereo_cost_volume`; census radius at most 3 on
        the GPU).
    callback : callable, optional
        Progress: called as ``callback(done, total)`` after each move (expansion) or
        the cut (Ishikawa); ``done == total`` at the end.

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

    Raises
    ------
    ValueError
        Images of different shapes / channels, ``max_disparity`` outside ``(0, N)``,
        unknown ``method`` or ``smoothness``.
    BackendUnavailableError
        ``backend="gpu"`` without a usable device.
    """
    method = _check_method(method)
    kind = _check_smoothness(smoothness, method)
    first, _ = _check_pair(left, right, None)  # shapes only, before any copy
    width = int(first.shape[1])
    max_disparity = _check_max_disparity(max_disparity, width)
    backend = resolve_backend(backend, left, right)
    xp = _xp(backend)
    lp, rp = _check_pair(left, right, xp)
    if lam is None:
        lam = 0.2 if method == "expansion" else 0.05
    cost = stereo_cost_volume(
        lp,
        rp,
        max_disparity,
        census_radius=census_radius,
        window=window,
        backend=backend,
    )
    c = xp.rint(cost * cost_scale).astype(np.int32)
    w = xp.rint(stereo_weights(lp, smoothness=lam) * cost_scale).astype(np.int32)
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
    )
    return _same_kind(labels.astype(np.float32), left)
