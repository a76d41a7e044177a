"""Device stages of the optical flow pipeline (kernels in ``kernels/optical_flow.cu``).

:mod:`vision_cuts.optical_flow` calls these with ``backend="gpu"``: the candidate pairs
and their costs, the neighbourhood medians that predict each feature's motion, and
the edge-aware interpolation of the dense flow. Features are uploaded once per pair;
the assignment passes then run on the device without host round trips (the cost
stacks are gathered there from the dense pair costs, the same stacks as
``optical_flow._build_stack``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, NamedTuple

import numpy as np

from ._kernels import capture_graph, get_kernel, get_module

log = logging.getLogger(__name__)

__all__ = [
    "DeviceFeatures",
    "DeviceFrame",
    "array_module",
    "dense",
    "fuse",
    "interpolate",
    "knn_median",
    "matches",
    "pair_cost_matrix",
    "pair_costs",
    "refine",
    "resize_flow",
    "solve",
    "stack_from_matrix",
    "upload",
    "upload_frame",
    "variational",
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
    """Features of one frame on the device (the descriptors as 32-bit words);
    ``desc`` may already be there."""
    cp = _cp()
    pts = cp.asarray(np.ascontiguousarray(points, dtype=np.float32))
    if binary:
        d = cp.ascontiguousarray(cp.asarray(desc, dtype=cp.uint8))
        if d.shape[1] % 4:
            d = cp.pad(d, ((0, 0), (0, 4 - d.shape[1] % 4)))
        words = cp.ascontiguousarray(d).view(cp.uint32)
    else:
        words = cp.ascontiguousarray(cp.asarray(desc, dtype=cp.float32))
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
    cost = pair_cost_matrix(f0, f1, pred, radius, weight, nbits)
    rows, cols = cp.nonzero(cp.isfinite(cost))
    return rows.astype(cp.int64), cols.astype(cp.int64), cost[rows, cols]


def pair_cost_matrix(
    f0: DeviceFeatures,
    f1: DeviceFeatures,
    pred: Any,
    radius: float,
    weight: float,
    nbits: int,
    max_pair: float = np.inf,
) -> Any:
    """The (n, m) float64 costs of ``pair_costs`` as a dense matrix, ``inf`` beyond
    ``radius`` and above ``max_pair`` (no list of the pairs, no host
    synchronisation)."""
    cp = _cp()
    n, m = len(f0.points), len(f1.points)
    cost = cp.empty((n, m), dtype=cp.float64)
    pred = cp.ascontiguousarray(cp.asarray(pred, dtype=cp.float32))
    get_kernel(_module(), "flow_pair_costs")(
        ((m + 15) // 16, (n + 15) // 16, 1),
        (16, 16, 1),
        (
            f0.points,
            pred,
            f1.points,
            f0.words,
            f1.words,
            np.int32(n),
            np.int32(m),
            np.int32(f0.words.shape[1]),
            np.int32(bool(f0.binary)),
            np.int32(nbits),
            np.float64(radius),
            np.float64(weight),
            np.float64(max_pair),
            cost,
        ),
    )
    return cost


def stack_from_matrix(
    cost: Any, gid: Any, row_ids: Any, nrows: Any, max_cost: float
) -> tuple | None:
    """The batched problem of one pass (``optical_flow._build_stack`` on the CPU),
    ``(stack, col_ids, ncols)``, from the dense costs of ``pair_cost_matrix``: a row
    per feature of the group, a column per frame-1 feature its pairs reach (in
    feature order), then a dummy column per row; None when no pair lies within the
    radius. One host read (the widest group)."""
    cp = _cp()
    mod = _module()
    n, m = cost.shape
    G, n_max = row_ids.shape
    taken = cp.zeros((G, m), dtype=cp.int32)
    get_kernel(mod, "stack_taken")(
        *_blocks(n * m), (cost, np.int32(n), np.int32(m), gid, taken)
    )
    slot = cp.cumsum(taken, axis=1, dtype=cp.int64) - 1
    ncols = slot[:, -1] + 1
    m_max = int(ncols.max())
    if m_max == 0:
        return None
    col_ids = cp.full((G, m_max), -1, dtype=cp.int64)
    get_kernel(mod, "slot_ids")(
        *_blocks(G * m),
        (taken, slot, np.int32(G), np.int32(m), np.int32(m_max), col_ids),
    )
    N = m_max + n_max
    stack = cp.empty((G, n_max, N), dtype=cp.float64)
    get_kernel(mod, "stack_gather")(
        *_blocks(G * n_max * N),
        (
            cost,
            np.int32(m),
            row_ids,
            col_ids,
            nrows,
            np.int32(G),
            np.int32(n_max),
            np.int32(m_max),
            np.float64(max_cost),
            stack,
        ),
    )
    return stack, col_ids, ncols


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
        get_kernel(_module(), "knn_median")(  # a warp per query
            ((len(q) + 3) // 4,),
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
    to_host: bool = True,
) -> Any:
    """Edge-aware interpolation on a (gh, gw) grid of pixel centres ``(step * x +
    offset, step * y + offset)`` (see ``optical_flow._interpolate``): (gh, gw, 2)
    float32, returned to the host unless ``to_host`` is False."""
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
    return cp.asnumpy(out) if to_host else out


def array_module() -> Any:
    """CuPy (the array module of the device stages)."""
    return _cp()


def _blocks(total: int, threads: int = 256) -> tuple:
    return ((total + threads - 1) // threads,), (threads,)


def solve(stack: Any, hi: float) -> tuple:
    """``(r, c)`` of the solved stack of ``stack_from_matrix`` (costs in [0, ``hi``], a
    dummy column per row): ``_assignment_gpu.solve_with_dummies``, which skips the
    public function's measuring pass and feasibility checks (the stack has neither
    NaN nor an infeasible problem by construction)."""
    from ._assignment_gpu import solve_with_dummies

    cp = _cp()
    c, _ = solve_with_dummies(stack, 0.0, hi)
    return cp.broadcast_to(cp.arange(c.shape[1], dtype=cp.int64), c.shape), c


def matches(
    stack: Any, r: Any, c: Any, row_ids: Any, col_ids: Any, ncols: Any, n: int, m: int
) -> tuple:
    """``(rows, cols, costs)`` of the solved stack on the device, rows ascending
    (``optical_flow._matches``: the cheapest proposal per frame-1 feature wins, the
    first on a tie)."""
    cp = _cp()
    mod = _module()
    G, k = r.shape
    n_max, N = stack.shape[1:]
    m_max = col_ids.shape[1]
    best = cp.full(m, 2**64 - 1, dtype=cp.uint64)
    first = cp.full(m, 2**31 - 1, dtype=cp.int32)
    col_of = cp.full(n, -1, dtype=cp.int64)
    cost_of = cp.empty(n, dtype=cp.float64)
    args = (
        stack,
        cp.ascontiguousarray(r, dtype=cp.int64),
        cp.ascontiguousarray(c, dtype=cp.int64),
        np.int32(G * k),
        np.int32(k),
        np.int32(n_max),
        np.int32(N),
        row_ids,
        col_ids,
        ncols,
        np.int32(m_max),
    )
    blocks = _blocks(G * k)
    get_kernel(mod, "match_best")(*blocks, args + (best,))
    get_kernel(mod, "match_first")(*blocks, args + (best, first))
    get_kernel(mod, "match_write")(*blocks, args + (first, col_of, cost_of))
    rows = cp.flatnonzero(col_of >= 0)
    return rows, col_of[rows], cost_of[rows]


class DeviceFrame(NamedTuple):
    """A frame on the device, uint8 (h, w, C), with its Scharr derivatives."""

    img: Any
    dx: Any
    dy: Any


def upload_frame(img: np.ndarray) -> DeviceFrame:
    """``img`` (uint8 (h, w) or (h, w, C)) on the device with its derivatives."""
    cp = _cp()
    a = cp.asarray(np.ascontiguousarray(img))
    h, w = a.shape[:2]
    C = 1 if a.ndim == 2 else a.shape[2]
    dx = cp.empty((h, w, C), dtype=cp.float32)
    dy = cp.empty((h, w, C), dtype=cp.float32)
    get_kernel(_module(), "scharr")(
        ((w + 31) // 32, (h + 7) // 8, 1),
        (32, 8, 1),
        (a, np.int32(h), np.int32(w), np.int32(C), dx, dy),
    )
    return DeviceFrame(a, dx, dy)


def _track(I: DeviceFrame, J: DeviceFrame, pts: Any, guess: Any, half: int) -> tuple:
    cp = _cp()
    h, w = I.img.shape[:2]
    C = 1 if I.img.ndim == 2 else I.img.shape[2]
    n = len(pts)
    out = cp.empty((n, 2), dtype=cp.float32)
    status = cp.empty(n, dtype=cp.int32)
    if n:
        get_kernel(_module(), "lk_track")(
            *_blocks(32 * n, 128),
            (
                I.img,
                J.img,
                I.dx,
                I.dy,
                np.int32(h),
                np.int32(w),
                np.int32(C),
                cp.ascontiguousarray(pts, dtype=cp.float32),
                cp.ascontiguousarray(guess, dtype=cp.float32),
                np.int32(n),
                np.int32(half),
                np.int32(LK_ITERATIONS),
                np.float32(LK_EPS),
                np.float32(LK_MIN_EIG),
                out,
                status,
            ),
        )
    return out, status.astype(bool)


#: Lucas-Kanade stopping rules and the smallest gradient eigenvalue (OpenCV's
#: defaults for calcOpticalFlowPyrLK as optical_flow calls it).
LK_ITERATIONS, LK_EPS, LK_MIN_EIG = 50, 1e-3, 1e-4


def refine(
    f0: DeviceFrame,
    f1: DeviceFrame,
    points: Any,
    seeds: Any,
    window: int,
    max_shift: float,
    max_fb: float,
) -> tuple:
    """``optical_flow._refine`` on the device: the tracked points and which of them
    pass (both directions converged, within ``max_shift`` of the seed, back within
    ``max_fb`` of the start)."""
    cp = _cp()
    if window > 15 or window % 2 == 0:
        raise ValueError(f"window must be odd and at most 15, got {window}")
    half = window // 2
    fwd, st1 = _track(f0, f1, points, seeds, half)
    back, st2 = _track(f1, f0, fwd, points, half)
    ok = (
        st1
        & st2
        & cp.isfinite(fwd).all(axis=1)
        & (cp.linalg.norm(fwd - seeds, axis=1) < max_shift)
        & (cp.linalg.norm(back - points, axis=1) < max_fb)
    )
    return fwd, ok


# ------------------------------------------------------------------ dense stages
#: Parameters of the variational refinement: OpenCV's VariationalRefinement defaults
#: (smoothness alpha, gradient constancy gamma, colour constancy delta, the
#: normalisation zeta, the robust epsilon, the over-relaxation omega).
VR_PARAMS = {
    "alpha": 20.0,
    "gamma": 10.0,
    "delta": 5.0,
    "zeta": 0.1,
    "eps": 0.001,
    "omega": 1.6,
}


def _vr() -> Any:
    return get_module("variational_flow.cu")


def _launch(name: str, h: int, w: int, args: tuple, half_rows: bool = False) -> None:
    bx, by = 32, 8
    cols = (w + 1) // 2 if half_rows else w
    get_kernel(_vr(), name)(
        ((cols + bx - 1) // bx, (h + by - 1) // by, 1), (bx, by, 1), args
    )


#: variational() replays a CUDA graph of its launches (a refinement is 64 launches of
#: small kernels, bound by the host's launch rate); False: launched one by one
_GRAPHS = True
_MAX_PLANS = 6  # sizes whose buffers and graph a thread keeps
_plans = threading.local()


class _Variational:
    """The buffers of one refinement size and the CUDA graph of its launches on them:
    inputs are copied in, the graph replays, the result is copied out."""

    def __init__(self, h: int, w: int, fixed_point: int, sor: int) -> None:
        cp = _cp()
        f32 = cp.float32
        self.h, self.w, self.fixed_point, self.sor = h, w, fixed_point, sor
        self.grey0 = cp.empty((h, w), dtype=f32)
        self.grey1 = cp.empty((h, w), dtype=f32)
        self.flow = cp.empty((h, w, 2), dtype=f32)
        self.d = cp.empty((8, h, w), dtype=f32)  # ix iy iz ixx ixy iyy ixz iyz
        self.avg = cp.empty((h, w), dtype=f32)
        self.du = cp.empty((h, w), dtype=f32)
        self.dv = cp.empty((h, w), dtype=f32)
        self.system = cp.empty((6, h, w), dtype=f32)
        self.out = cp.empty((h, w, 2), dtype=f32)
        self.graph: Any = None
        self.tried = False  # whether the graph was captured (or failed to be)

    def launches(self) -> None:
        """Every launch of one refinement, on the current stream."""
        h, w = self.h, self.w
        hh, ww = np.int32(h), np.int32(w)
        d, flow, du, dv, system = self.d, self.flow, self.du, self.dv, self.system
        p = {k: np.float32(v) for k, v in VR_PARAMS.items()}
        _launch(
            "vr_warp_average",
            h,
            w,
            (self.grey0, self.grey1, flow, hh, ww, self.avg, d[2]),
        )
        _launch(
            "vr_first_order", h, w, (self.avg, d[2], hh, ww, d[0], d[1], d[6], d[7])
        )
        _launch("vr_second_order", h, w, (d[0], d[1], hh, ww, d[3], d[4], d[5]))
        du.fill(0)
        dv.fill(0)
        terms = (p["alpha"], p["gamma"], p["delta"], p["zeta"], p["eps"], system)
        for _ in range(self.fixed_point):
            _launch("vr_terms", h, w, (d, flow, du, dv, hh, ww, *terms))
            _launch("vr_smoothness", h, w, (flow, hh, ww, system))
            for _ in range(self.sor):
                for parity in (0, 1):
                    _launch(
                        "vr_sor",
                        h,
                        w,
                        (system, hh, ww, np.int32(parity), p["omega"], du, dv),
                        half_rows=True,
                    )
        _launch("vr_add", h, w, (flow, du, dv, hh, ww, self.out))

    def run(self, grey0: Any, grey1: Any, flow: Any) -> Any:
        cp = _cp()
        self.grey0[...] = grey0
        self.grey1[...] = grey1
        self.flow[...] = flow
        if self.graph is not None:
            self.graph.launch()  # on the current stream, after the copies above
        else:
            self.launches()  # loads the kernels; the graph is captured after it
            if _GRAPHS and not self.tried:
                self.tried = True
                # captured on a stream of its own that does not wait on the legacy
                # default stream (other threads may use that one meanwhile); the
                # capture records the launches and runs nothing
                stream = cp.cuda.Stream(non_blocking=True)
                try:
                    with stream:
                        self.graph = capture_graph(stream, self.launches)
                except Exception:  # launched one by one, as without graphs
                    log.debug("variational: no CUDA graph", exc_info=True)
                    self.graph = None
        return self.out.copy()


def _variational_plan(h: int, w: int, fixed_point: int, sor: int) -> _Variational:
    """This thread's refinement of this size on the current device."""
    cp = _cp()
    plans = getattr(_plans, "by_key", None)
    if plans is None:
        plans = _plans.by_key = {}
    key = (cp.cuda.Device().id, h, w, fixed_point, sor)
    plan = plans.pop(key, None)
    if plan is None:
        plan = _Variational(h, w, fixed_point, sor)
        while len(plans) >= _MAX_PLANS:  # the least recently used goes
            plans.pop(next(iter(plans)))
    plans[key] = plan  # most recently used last
    return plan


def variational(
    grey0: Any, grey1: Any, flow: Any, fixed_point: int = 5, sor: int = 5
) -> Any:
    """Variational refinement of ``flow`` ((h, w, 2) float32) between the grey
    frames (float32, 0..255), all on the device (``kernels/variational_flow.cu``
    documents the energy): the refined (h, w, 2) float32 field, a new array."""
    cp = _cp()
    h, w = grey0.shape
    grey0 = cp.asarray(grey0, dtype=cp.float32)
    grey1 = cp.asarray(grey1, dtype=cp.float32)
    flow = cp.asarray(flow, dtype=cp.float32)
    if grey1.shape != (h, w) or flow.shape != (h, w, 2):
        raise ValueError(
            f"variational: frames (h, w) and flow (h, w, 2) expected, got "
            f"{grey0.shape}, {grey1.shape} and {flow.shape}"
        )
    return _variational_plan(h, w, fixed_point, sor).run(grey0, grey1, flow)


def resize_flow(flow: Any, h: int, w: int, scale: float = 1.0) -> Any:
    """Bilinear resize of an (sh, sw, 2) flow field to (h, w, 2), times ``scale``."""
    cp = _cp()
    flow = cp.ascontiguousarray(flow, dtype=cp.float32)
    sh, sw = flow.shape[:2]
    out = cp.empty((h, w, 2), dtype=cp.float32)
    _launch(
        "flow_resize",
        h,
        w,
        (
            flow,
            np.int32(sh),
            np.int32(sw),
            np.int32(h),
            np.int32(w),
            np.float32(scale),
            out,
        ),
    )
    return out


def fuse(img0: Any, img1: Any, proposals: list, window: int) -> Any:
    """Per pixel, the proposal whose warping error summed over a ``window`` square
    is smallest (the first on a tie), on the device; frames uint8 (h, w, C)."""
    cp = _cp()
    from cupyx.scipy import ndimage

    h, w = img0.shape[:2]
    channels = 1 if img0.ndim == 2 else img0.shape[2]
    best, best_err = proposals[0], None
    for f in proposals:
        f = cp.ascontiguousarray(f, dtype=cp.float32)
        err = cp.empty((h, w), dtype=cp.float32)
        _launch(
            "warp_error",
            h,
            w,
            (img0, img1, f, np.int32(h), np.int32(w), np.int32(channels), err),
        )
        # a box sum with mirrored borders, as cv2.boxFilter's default
        err = ndimage.uniform_filter(err, size=window, mode="mirror")
        if best_err is None:
            best, best_err = f, err
            continue
        better = err < best_err
        best = cp.where(better[..., None], f, best)
        best_err = cp.minimum(err, best_err)
    return best


def _pyramid_refine(pyramid: list, full: tuple, flow: Any) -> Any:
    """Coarse-to-fine variational refinement (``optical_flow._variational`` on the
    device): ``pyramid`` holds the host levels ``(scale, frame0, frame1)``, coarsest
    first (``optical_flow._pyramid``), ``full`` the full-size frames on the device."""
    cp = _cp()
    h, w = full[0].shape
    for f, g0, g1 in pyramid:
        if f == 1.0:
            flow = variational(*full, flow)
            continue
        sh, sw = g0.shape
        small = variational(
            cp.asarray(g0, dtype=cp.float32),
            cp.asarray(g1, dtype=cp.float32),
            resize_flow(flow, sh, sw, f),
        )
        flow = resize_flow(small, h, w, 1.0 / f)
    return flow


def dense(
    img0: np.ndarray,
    img1: np.ndarray,
    grey0: np.ndarray,
    grey1: np.ndarray,
    pyramid: list,
    initial: Any,
    other: np.ndarray | None,
    window: int,
    frames: tuple | None = None,
) -> np.ndarray:
    """The dense stages of ``optical_flow._dense`` on the device: ``initial`` (the
    interpolated matches, (h, w, 2) on the device) refined coarse to fine over
    ``pyramid``, fused with ``other`` (DIS's field, host) by the smaller ``window``
    warping error, refined once more at full size; returned to the host.
    ``frames``: the colour frames already on the device, if any."""
    cp = _cp()
    full = (cp.asarray(grey0, dtype=cp.float32), cp.asarray(grey1, dtype=cp.float32))
    ours = _pyramid_refine(pyramid, full, initial)
    if other is None:
        return cp.asnumpy(ours)
    if frames is None:
        frames = (cp.asarray(img0), cp.asarray(img1))
    frames = tuple(cp.ascontiguousarray(f) for f in frames)
    fused = fuse(*frames, [ours, cp.asarray(other)], window)
    return cp.asnumpy(variational(*full, fused))
