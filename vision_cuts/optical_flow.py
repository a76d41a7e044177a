"""Optical flow by assignment between the feature sets of two frames.

:func:`optical_flow` detects features in both frames (``"fast-brief"``, the
project's FAST + Harris + BRIEF detector, ``_fast_brief``; or OpenCV's ORB or SIFT),
builds the cost of every pair within a search radius (descriptor distance plus a
displacement penalty; pairs farther apart are forbidden, ``inf``), lets every feature
of the first frame stay unmatched at a fixed cost (one dummy column per row), and
solves the assignment with :func:`vision_cuts.linear_sum_assignment`, or with
:func:`vision_cuts.linear_sum_assignment_batched` over groups of nearby features
when the sets are large. The result is sparse flow (points, vectors, match costs)
and, on request, dense flow interpolated from the matches.

The pipeline, in order:

1. Features: keypoints and descriptors of both frames; keypoints are moved to the
   nearest pixel centre of the first frame (one per pixel), so flow is reported at
   integer pixel positions.
2. Global assignment: cost ``d(i, j) + displacement_weight * |p1_j - p0_i| / R`` with
   ``R = search_radius`` (``inf`` beyond it), descriptor distance ``d`` in [0, 1]
   (fraction of differing bits for binary descriptors, half the Euclidean distance of
   unit-normalised SIFT descriptors), unmatched at ``max_cost``.
3. Local assignment (``local_passes`` times): the motion predicted at each feature is
   the median vector of its 12 nearest matches of the previous pass; the cost becomes
   ``d(i, j) + displacement_weight * |p1_j - p0_i - pred_i| / r`` with
   ``r = local_radius``, so every correspondence agrees with its neighbourhood.
4. Sub-pixel refinement (``refine=True``): each match seeds a single-level
   Lucas-Kanade fit (15 x 15 window, colour) at the matched position; a match is kept
   when the fit converges within 3 px of the seed, tracking back lands within
   0.5 px of the starting point (forward-backward check), and the refined vector
   lies within 1 px of the median vector of its 12 nearest refined matches.
5. Dense flow (``dense=True``): the matches are interpolated edge-aware (each pixel
   averages its nearest matches weighted by distance and colour similarity), then
   refined variationally, coarse to fine (``cv2.VariationalRefinement``: data,
   gradient-constancy and smoothness terms; Brox et al. 2004). This field and
   OpenCV's DIS flow (Kroeger et al. 2016) are fused: every pixel takes the one whose
   colour warping error, summed over a 9 x 9 window, is smaller; one more variational
   refinement at full size follows. Each proposal fails where the other holds (the
   matches carry large and fast motion, DIS the fine detail between matches), so the
   fusion beats both (BENCHMARKS.md).

Where each stage runs. ``"fast-brief"`` detects where the backend is: compiled code
with OpenCV's FAST on the CPU (the two frames of a pair on two threads), kernels on
the device (``_fast_brief_gpu``, ``kernels/fast_brief.cu``; both frames at once), the
same features bit for bit. ORB (two pyramid levels, since consecutive frames differ
little in scale) and SIFT run on the CPU (OpenCV). With ``backend="cpu"`` the
candidate pairs come from a compiled grid search (``_optical_flow_cpu``) and the rest
from NumPy, SciPy and OpenCV. With ``backend="gpu"`` everything after detection stays
on the device too (``_optical_flow_gpu``, ``kernels/optical_flow.cu``,
``kernels/variational_flow.cu``): the candidate pairs and their costs, the cost
stacks, the solves (``_assignment_gpu.solve_with_dummies``: the stacks are built here,
so the public function's measuring pass and feasibility checks are skipped), the
matches, the neighbourhood medians, the Lucas-Kanade refinement with its checks, and
for dense flow the interpolation, the coarse-to-fine variational refinement (OpenCV's
discretisation, solved by red-black over-relaxation), the fusion and the last
refinement; DIS runs on a CPU thread meanwhile. Only the result comes back. The
device's Lucas-Kanade and variational kernels sample in floating point where OpenCV
uses fixed point, and on the GPU the float costs are quantised (2**20 levels of
[0, max_cost]: no pair above it is kept), so a match whose cost ties another's
within that step may differ from the CPU's: the backends agree to within a few
matches and hundredths of a pixel (``tests/test_optical_flow.py``).

References
----------
E. Rosten and T. Drummond, "Machine learning for high-speed corner detection", ECCV
2006.

M. Calonder, V. Lepetit, C. Strecha and P. Fua, "BRIEF: binary robust independent
elementary features", ECCV 2010.

E. Rublee, V. Rabaud, K. Konolige and G. Bradski, "ORB: an efficient alternative to
SIFT or SURF", ICCV 2011.

B. D. Lucas and T. Kanade, "An iterative image registration technique with an
application to stereo vision", IJCAI 1981.

J. Revaud, P. Weinzaepfel, Z. Harchaoui and C. Schmid, "EpicFlow: edge-preserving
interpolation of correspondences for optical flow", CVPR 2015.

T. Brox, A. Bruhn, N. Papenberg and J. Weickert, "High accuracy optical flow estimation
based on a theory for warping", ECCV 2004.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

from ._backend import BACKENDS, is_cupy_array, resolve_backend, to_numpy
from ._validate import (
    INT32_MAX,
    UNIT_SLACK,
    _xp,
    check_flag,
    check_int,
    check_number,
    regular_array,
    unit_scale,
)
from .assignment import linear_sum_assignment_batched

__all__ = ["DETECTORS", "FlowResult", "optical_flow", "optical_flow_frames"]

log = logging.getLogger(__name__)

DETECTORS = ("fast-brief", "orb", "sift")

#: Default cost of leaving a feature unmatched, per detector (descriptor distances
#: lie in [0, 1]; the displacement penalty adds at most ``displacement_weight``).
_MAX_COST = {"fast-brief": 0.35, "orb": 0.35, "sift": 0.3}
_NEIGHBOURS = 12  # matches whose median vector predicts the local motion
_LK_WINDOW = 15
_LK_MAX_SHIFT = 3.0  # px a refined match may move away from its seed
_FB_MAX_ERROR = 0.5  # px, forward-backward check
_MAX_DEVIATION = 1.0  # px a refined vector may differ from its neighbours' median
_AUTO_TILE_PAIRS = 2**18  # n * m above which the assignment is split into groups
_GROUP_ROWS = 256  # most features of frame 0 in one group of a split assignment
_OVERDETECT = 4  # keypoints detected per wanted feature, before spreading
#: ORB pyramid levels. Consecutive frames differ little in scale, so the default 8
#: levels only cost time; one level alone loses corners where the texture is coarse
#: (a zooming clip kept 1316 matches on average against 1867 with two levels) and two
#: keep them at about half the time of eight (BENCHMARKS.md).
_ORB_LEVELS = 2
_FAST_THRESHOLD = 5  # ORB's FAST threshold (grey levels)
_PER_CELL = 4  # wanted features per spreading cell
_WARM_RADIUS = 12.0  # px around the motion predicted from the previous frame pair
_WARM_MIN_MATCHES = 50  # fewer matches in the previous pair: no warm start
_FUSE_WINDOW = 9  # px, the square over which dense proposals' warping errors are summed
_COLOUR_SIGMA = 12.0  # grey levels, colour weight of the dense interpolation
_END = object()  # the end of a sequence of frames (None is a frame, and an error)
_MAX_LOCAL_PASSES = 64  # the passes stop early once one changes no match
_MAX_DISPLACEMENT_WEIGHT = 1e6  # far beyond any use; keeps every cost finite


class FlowResult(NamedTuple):
    """Sparse (and optionally dense) flow from ``frame0`` to ``frame1``.

    Attributes
    ----------
    points : ndarray, shape (N, 2), float32
        ``(x, y)`` pixel positions in ``frame0`` of the matched features.
    vectors : ndarray, shape (N, 2), float32
        ``(dx, dy)``: ``points + vectors`` is the matched position in ``frame1``.
    costs : ndarray, shape (N,), float32
        Assignment cost of each match (descriptor distance plus displacement
        penalty of the last assignment pass).
    dense : ndarray, shape (M, N, 2), float32, or None
        Per-pixel ``(u, v)`` flow when ``dense=True`` was asked for, else None.
    """

    points: Any
    vectors: Any
    costs: Any
    dense: Any


# --------------------------------------------------------------------------- inputs
def _check_frame(frame: Any, name: str) -> np.ndarray:
    """``frame`` checked (type, dtype, shape, finite values) as a host array of its
    own dtype; :class:`_FrameReader` turns it into the uint8 image the pipeline
    uses. A masked array or a ragged nesting of lists is refused (``regular_array``)."""
    if frame is None:
        raise TypeError(f"{name} must be an image array, got None")
    img = to_numpy(regular_array(frame, name))
    if img.dtype.kind not in "buif":
        raise TypeError(
            f"{name} must have a real numeric dtype (uint8, integer, float or bool), "
            f"got {img.dtype}"
        )
    if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[-1] not in (1, 3, 4)):
        raise ValueError(
            f"{name} must be a (M, N) grey or (M, N, C) image with C in 1, 3, 4, got "
            f"shape {tuple(img.shape)}"
        )
    if img.shape[0] == 0 or img.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {tuple(img.shape)}")
    if img.dtype.kind == "f" and not bool(np.isfinite(img).all()):
        raise ValueError(f"{name} contains NaN or infinity")
    return img


class _FrameReader:
    """Checked frames of one call (a pair, or a whole sequence) as uint8 images:
    grey (M, N) or RGB (M, N, 3), the alpha channel dropped.

    Integer frames are grey levels, clipped to [0, 255]; bool frames are black
    (False) and white (True, 255). Float frames are read on one scale for the whole
    call: multiplied by 255 when they lie in [0, 1] (up to ``1 + UNIT_SLACK``: a
    resampling filter's overshoot), else taken as grey levels. The
    first float frame with a value above 0 decides (a frame with none is black on
    either scale); a later float frame on the other scale is a ValueError naming it,
    since reading the two frames of a pair differently leaves nothing to match.
    """

    def __init__(self) -> None:
        self.unit: bool | None = None  # float frames in [0, 1]; None: undecided
        self.by = ""  # the frame that decided
        self.top = 0.0  # its largest value

    def __call__(self, img: np.ndarray, name: str) -> np.ndarray:
        if img.dtype == np.bool_:
            img = img.astype(np.uint8) * np.uint8(255)
        elif img.dtype.kind == "f":
            top = float(img.max())
            if top > 0.0:
                self._agree(unit_scale(top), top, name)
            if self.unit:
                img = img * 255.0
        if img.dtype != np.uint8:
            img = np.clip(np.rint(img), 0, 255).astype(np.uint8)
        if img.ndim == 3:
            img = img[..., :3] if img.shape[-1] != 1 else img[..., 0]
        return np.ascontiguousarray(img)

    def _agree(self, unit: bool, top: float, name: str) -> None:
        if self.unit is None:
            self.unit, self.by, self.top = unit, name, top
            return
        if unit == self.unit:
            return
        rule = (
            "float frames of one call must all lie in [0, 1] (they are multiplied by "
            f"255; up to {1 + UNIT_SLACK:g} is read as overshoot) or all be grey "
            "levels in [0, 255]"
        )
        if unit:
            raise ValueError(
                f"{name} lies in [0, 1] (largest value {top:g}) but {self.by} has "
                f"values up to {self.top:g}: {rule}; multiply {name} by 255"
            )
        raise ValueError(
            f"{name} has values up to {top:g}, outside the range [0, 1] of {self.by}"
            f": {rule}; clip {name} to [0, 1] or give every frame in [0, 255]"
        )


def _check_positive(
    value: Any, name: str, *, integer: bool = False, high: float | None = None
) -> Any:
    """A positive integer (``integer``) or a finite positive number, at most
    ``high`` where given."""
    if integer:
        return check_int(value, name, 1, None if high is None else int(high))
    return check_number(value, name, 0, high, above=True)


def _grey(img: np.ndarray) -> np.ndarray:
    import cv2

    return img if img.ndim == 2 else cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)


# --------------------------------------------------------------------------- features
class _Features(NamedTuple):
    points: np.ndarray  # (n, 2) float32 (x, y)
    desc: np.ndarray  # (n, d) uint8 packed bits (binary) or float32 unit vectors
    binary: bool


def _detect(grey: np.ndarray, detector: str, max_features: int, snap: bool):
    """Keypoints and descriptors; ``snap`` moves points to pixel centres (deduped)."""
    feats = _features(grey, detector, max_features)
    return _as_first(feats, grey.shape) if snap else feats


def _features(
    grey: np.ndarray, detector: str, max_features: int, backend: str = "cpu"
) -> _Features:
    """At most ``max_features`` keypoints spread over the frame, with descriptors
    (only the kept keypoints are described), strongest first. ``"fast-brief"`` runs
    where ``backend`` says (on the device its descriptors stay there: a CuPy
    array); ORB and SIFT run on the host (OpenCV)."""
    import cv2

    if detector == "fast-brief":
        if backend == "gpu":
            return _device_features([grey], max_features)[0]
        from . import _fast_brief

        return _Features(*_fast_brief.detect(grey, max_features), True)
    # OpenCV takes the count as a C int and reserves room for that many keypoints:
    # ask for at most twice the pixels. ORB gives each of its two levels at least
    # that level's pixels' worth of it (one keypoint a pixel at most) and SIFT keeps
    # its strongest, so a larger request would detect the same keypoints
    pool = min(_OVERDETECT * max_features, 2 * grey.size, INT32_MAX)
    if detector == "orb":
        algo = cv2.ORB_create(
            nfeatures=pool, fastThreshold=_FAST_THRESHOLD, nlevels=_ORB_LEVELS
        )
    else:
        algo = cv2.SIFT_create(nfeatures=pool, contrastThreshold=0.01)
    empty = _Features(
        np.zeros((0, 2), np.float32),
        np.zeros((0, 1), np.uint8 if detector != "sift" else np.float32),
        detector != "sift",
    )
    keypoints = algo.detect(grey, None)
    if len(keypoints) == 0:
        return empty
    pts = cv2.KeyPoint_convert(keypoints).reshape(-1, 2).astype(np.float32)
    response = np.array([k.response for k in keypoints], np.float32)
    order = _spread(pts, response, grey.shape, max_features)
    keypoints, desc = algo.compute(grey, [keypoints[i] for i in order])
    if desc is None or len(keypoints) == 0:
        return empty
    pts = cv2.KeyPoint_convert(keypoints).reshape(-1, 2).astype(np.float32)
    if detector == "sift":
        d = desc.astype(np.float32)
        d /= np.linalg.norm(d, axis=1, keepdims=True) + 1e-12
        return _Features(pts, d, False)
    return _Features(pts, np.ascontiguousarray(desc), True)


def _device_features(greys: list, max_features: int) -> list:
    """``"fast-brief"`` features of grey frames of one shape, detected together on
    the device; the points come back to the host, the descriptors stay there."""
    from . import _fast_brief_gpu
    from ._optical_flow_gpu import array_module

    xp = array_module()
    found = _fast_brief_gpu.detect([xp.asarray(g) for g in greys], max_features)
    return [_Features(to_numpy(p), d, True) for p, d in found]


def _features_of_pair(
    grey0, grey1, detector: str, max_features: int, backend: str = "cpu"
) -> tuple:
    """The features of both frames of a pair (see :func:`_as_first`); on the host
    the second frame's are detected on a worker thread (OpenCV and the compiled
    steps release the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    if detector == "fast-brief" and backend == "gpu":  # both frames at once
        f0, f1 = _device_features([grey0, grey1], max_features)
        return _as_first(f0, grey0.shape), f1
    with ThreadPoolExecutor(1, thread_name_prefix="vision_cuts-detect") as pool:
        second = pool.submit(_features, grey1, detector, max_features)
        f0 = _as_first(_features(grey0, detector, max_features), grey0.shape)
        return f0, second.result()


def _as_first(feats: _Features, shape: tuple) -> _Features:
    """The features of the first frame of a pair: moved to the nearest pixel centre,
    one per pixel (the strongest, i.e. the first, wins)."""
    if len(feats.points) == 0:
        return feats
    h, w = shape[:2]
    cells = _snapped(feats.points, h, w)
    _, first = np.unique(cells[:, 1] * w + cells[:, 0], return_index=True)
    first.sort()
    desc = feats.desc
    if is_cupy_array(desc):  # described on the device
        from ._optical_flow_gpu import array_module

        first_rows = array_module().asarray(first)
    else:
        first_rows = first
    return _Features(cells[first], desc[first_rows], feats.binary)


def _snapped(pts: np.ndarray, h: int, w: int) -> np.ndarray:
    """Points moved to the nearest pixel centre inside an h x w image."""
    out = np.rint(pts)
    out[:, 0] = np.clip(out[:, 0], 0, w - 1)
    out[:, 1] = np.clip(out[:, 1], 0, h - 1)
    return out


def _spread(pts, response, shape, count: int) -> np.ndarray:
    """Indices of at most ``count`` keypoints spread over the image, strongest first.

    The image is cut into square cells holding about ``_PER_CELL`` of the wanted
    keypoints each; keypoints are taken round by round, the strongest of every cell
    in the first round, the second strongest in the next, and so on, so that
    textured regions do not take every feature.
    """
    h, w = shape
    cell = max(8.0, float(np.sqrt(h * w * _PER_CELL / count)))
    cx = (pts[:, 0] // cell).astype(np.int64)
    cy = (pts[:, 1] // cell).astype(np.int64)
    cid = cy * (int(w // cell) + 2) + cx
    order = np.lexsort((-response, cid))  # by cell, strongest first
    cid_sorted = cid[order]
    start = np.r_[0, np.flatnonzero(np.diff(cid_sorted)) + 1]
    rank = np.arange(len(order)) - np.repeat(start, np.diff(np.r_[start, len(order)]))
    pick = order[np.lexsort((-response[order], rank))][:count]
    return pick


_POPCOUNT = np.array([bin(v).count("1") for v in range(256)], np.uint8)


def _descriptor_distance(f0: _Features, rows, f1: _Features, cols) -> np.ndarray:
    """Descriptor distance in [0, 1] of the pairs ``(rows[k], cols[k])``: the
    fraction of differing bits (binary), half the Euclidean distance of the unit
    vectors (SIFT)."""
    a, b = f0.desc[rows], f1.desc[cols]
    if f0.binary:
        x = a ^ b
        if hasattr(np, "bitwise_count") and x.shape[1] % 8 == 0:  # NumPy >= 2
            x = np.ascontiguousarray(x).view(np.uint64)
            ones = np.bitwise_count(x).sum(axis=1, dtype=np.int32)
        else:
            ones = _POPCOUNT[x].sum(axis=1, dtype=np.int32)
        return ones.astype(np.float32) / np.float32(8 * a.shape[1])
    dot = np.einsum("kd,kd->k", a, b)
    return 0.5 * np.sqrt(np.clip(2.0 - 2.0 * dot, 0.0, 4.0))


# --------------------------------------------------------------------------- assignment
def _candidates(f0, f1, pred, radius, weight):
    """Every pair within ``radius`` of the predicted position: ``(rows, cols,
    costs)``, cost = descriptor distance + weight * distance / radius (binary
    descriptors: a compiled grid search, ``_optical_flow_cpu``; float ones: a k-d
    tree)."""
    if f0.binary:
        from ._optical_flow_cpu import pair_costs

        return pair_costs(f0.points, pred, f1.points, f0.desc, f1.desc, radius, weight)
    from scipy.spatial import cKDTree

    target = f0.points + pred
    near = cKDTree(target).sparse_distance_matrix(
        cKDTree(f1.points), radius, output_type="ndarray"
    )
    rows = near["i"].astype(np.int64)
    cols = near["j"].astype(np.int64)
    cost = _descriptor_distance(f0, rows, f1, cols) + weight * near["v"] / radius
    return rows, cols, cost


def _undominated(rows, cols, cost, max_cost) -> tuple:
    """The pairs that an optimal assignment of the pass may use: a pair costing more
    than ``max_cost`` never is (its row's own dummy column is cheaper and takes no
    column from another row), so the stacks leave it out. On the device the pair
    costs do the same (``pair_cost_matrix``'s ``max_pair``)."""
    keep = cost <= max_cost
    return rows[keep], cols[keep], cost[keep]


class _Stack(NamedTuple):
    """A batched assignment problem of candidate pairs, on the host (the device
    builds its own, ``_optical_flow_gpu.stack_from_matrix``)."""

    costs: Any  # (G, n_max, m_max + n_max): pairs, inf elsewhere, a dummy per row
    row_ids: Any  # (G, n_max) feature of frame 0 of every row slot (-1: none)
    col_ids: Any  # (G, m_max) feature of frame 1 of every column slot
    nrows: Any  # rows of each group
    ncols: Any


def _slots(group, index, size: int, G: int) -> tuple:
    """Number the distinct ``index`` values of every group in ascending order:
    ``(slot of each entry, slots of each group, (G, most slots) index of each slot,
    -1 where a group has fewer)``.

    A dense ``(G, size)`` table with a running sum along its rows costs O(G *
    size), which with a small ``tile_size`` (G about the feature count) grows with
    the square of the features: 12,000 features at ``tile_size=1`` took 2.3 GiB and
    4.2 s here. So the table serves only while it is at most ``8 *`` the P entries
    (the default groups: 3.3 ms against 6.5 ms sorted at 16 groups, 3,000 columns
    and 60,000 entries); past that the slots come from the sorted distinct pairs
    ``group * size + index``, O(P log P) time and O(P) memory (3,000 groups of
    3,000 columns, 20,000 entries: 1.9 ms against 117 ms). Both only use
    operations that CuPy also has, on the inputs' array module.
    """
    xp = _xp(group)
    if G * size <= 8 * group.size:
        taken = xp.zeros((G, size), bool)
        taken[group, index] = True
        slot = xp.cumsum(taken, axis=1) - 1
        count = taken.sum(axis=1)
        ids = xp.full((G, int(count.max())), -1, xp.int64)
        tg, tj = xp.nonzero(taken)
        ids[tg, slot[tg, tj]] = tj
        return slot[group, index], count, ids
    key = group.astype(xp.int64) * size + index
    pairs, inverse = xp.unique(key, return_inverse=True)
    pg = pairs // size
    count = xp.bincount(pg, minlength=G)
    first = xp.cumsum(count) - count  # first pair of each group
    slot = xp.arange(pairs.size, dtype=xp.int64) - first[pg]
    ids = xp.full((G, int(count.max())), -1, xp.int64)
    ids[pg, slot] = pairs - pg * size
    return slot[inverse.reshape(-1)], count, ids


class _Groups(NamedTuple):
    """The features of frame 0 in groups, one assignment problem each."""

    gid: Any  # (n,) group of every feature
    row_slot: Any  # (n,) rank of every feature in its group (its row there)
    row_ids: Any  # (G, n_max) feature of every row slot, -1 where a group has fewer
    nrows: Any  # (G,) features of every group


def _groups(gid: np.ndarray, xp=np) -> _Groups:
    """The :class:`_Groups` of the group numbers ``gid`` (0, 1, ...) on ``xp``."""
    n = len(gid)
    G = int(gid.max()) + 1 if n else 1
    nrows = np.bincount(gid, minlength=G).astype(np.int64)
    order = np.argsort(gid, kind="stable")
    starts = np.cumsum(nrows) - nrows
    row_slot = np.empty(n, np.int64)
    row_slot[order] = np.arange(n) - np.repeat(starts, nrows)
    row_ids = np.full((G, max(int(nrows.max()), 1)), -1, np.int64)
    row_ids[gid[order], row_slot[order]] = order
    return _Groups(*(xp.asarray(a) for a in (gid, row_slot, row_ids, nrows)))


def _build_stack(rows, cols, cost, groups: _Groups, m, max_cost) -> _Stack:
    """Scatter the candidate pairs into a padded stack, one problem per group: a row
    per feature of the group in feature order (a feature without pairs keeps only
    its dummy), a column per frame-1 feature its group's pairs reach, in feature
    order, then the dummy columns."""
    G = len(groups.nrows)
    g = groups.gid[rows]
    row_slot = groups.row_slot[rows]
    col_slot, ncols, col_ids = _slots(g, cols, m, G)
    n_max, m_max = groups.row_ids.shape[1], col_ids.shape[1]
    stack = np.full((G, n_max, m_max + n_max), np.inf, dtype=np.float64)
    stack[g, row_slot, col_slot] = cost
    # every row i may stay unmatched through its own dummy column m_max + i
    diag = np.arange(n_max)
    stack[:, diag, m_max + diag] = np.where(
        diag[None, :] < groups.nrows[:, None], max_cost, 0.0
    )
    return _Stack(stack, groups.row_ids, col_ids, groups.nrows, ncols)


def _cost_stack(f0, f1, pred, radius, weight, max_cost, tile=None):
    """The stack of one assignment pass on the CPU (see :func:`_build_stack`) with
    its dominated pairs still in (a harder problem of the same shape: the synthetic
    cost families use it), or None when no pair lies within ``radius``."""
    rows, cols, cost = _candidates(f0, f1, pred, radius, weight)
    if len(rows) == 0:
        return None
    groups = _groups(_feature_groups(f0.points, tile))
    return _build_stack(rows, cols, cost, groups, len(f1.points), max_cost)


def _matches(st: _Stack, r, c) -> tuple:
    """``(rows, cols, costs)`` of the features matched by the solved stack, rows
    ascending. A frame-1 feature reachable from two groups may be taken twice: the
    cheaper match keeps it (the earlier on a tie), the other feature stays
    unmatched."""
    G = len(st.nrows)
    g = np.arange(G)[:, None]
    picked = st.costs[g, r, c]
    ok = (r < st.nrows[:, None]) & (c < st.ncols[:, None])
    gi = np.broadcast_to(g, r.shape)[ok]
    rows, cols, costs = st.row_ids[gi, r[ok]], st.col_ids[gi, c[ok]], picked[ok]
    if G > 1 and len(rows):
        order = np.lexsort(np.stack([np.arange(len(costs)), costs, cols]))
        sc = cols[order]
        first = np.ones(len(sc), bool)
        first[1:] = sc[1:] != sc[:-1]
        keep = np.sort(order[first])
        rows, cols, costs = rows[keep], cols[keep], costs[keep]
    order = np.argsort(rows)  # the rows are distinct
    return rows[order], cols[order], costs[order]


class _Matcher:
    """The assignment passes of one frame pair on its backend: the features are
    uploaded once (GPU), then the candidate pairs, cost stacks, solves and the
    neighbourhood medians run where the backend is, with results on it."""

    def __init__(self, f0: _Features, f1: _Features, params: _Params) -> None:
        n, m = len(f0.points), len(f1.points)
        dummy = _dummy_cost(params.max_cost, n, params.displacement_weight)
        self.f0, self.f1, self.p = f0, f1, params._replace(max_cost=dummy)
        self.gpu = params.backend == "gpu"
        self.frames = None  # the colour frames on the device, once uploaded
        tile = params.tile_size
        size = _GROUP_ROWS if n * m > _AUTO_TILE_PAIRS else None
        gid = _feature_groups(f0.points, tile, size)
        self.n, self.m = n, m
        if self.gpu:
            from . import _optical_flow_gpu as dev

            self.dev = dev
            self.xp = dev.array_module()
            self.d0 = dev.upload(f0.points, f0.desc, f0.binary)
            self.d1 = dev.upload(f1.points, f1.desc, f1.binary)
            self.points0, self.points1 = self.d0.points, self.d1.points
        else:
            self.xp = np
            self.points0, self.points1 = f0.points, f1.points
        self.groups = _groups(gid, self.xp)

    def empty(self) -> tuple:
        xp = self.xp
        return xp.zeros(0, xp.int64), xp.zeros(0, xp.int64), xp.zeros(0, xp.float64)

    def assign(self, pred, radius: float) -> tuple:
        """One pass: ``(rows, cols, costs)`` of the matched pairs, on the backend."""
        p = self.p
        if len(self.f0.points) == 0 or len(self.f1.points) == 0:
            return self.empty()
        gr = self.groups
        if self.gpu:
            # the stack straight from the dense costs (no list of pairs)
            nbits = 8 * self.f0.desc.shape[1] if self.f0.binary else 0
            cost = self.dev.pair_cost_matrix(
                self.d0, self.d1, pred, radius, p.displacement_weight, nbits, p.max_cost
            )
            built = self.dev.stack_from_matrix(
                cost, gr.gid, gr.row_ids, gr.nrows, p.max_cost
            )
            if built is None:
                return self.empty()
            stack, col_ids, ncols = built
            # the stack is ours: costs in [0, max_cost], a dummy per row, no NaN
            r, c = self.dev.solve(stack, p.max_cost)
            return self.dev.matches(
                stack, r, c, gr.row_ids, col_ids, ncols, self.n, self.m
            )
        rows, cols, cost = _undominated(
            *_candidates(self.f0, self.f1, pred, radius, p.displacement_weight),
            p.max_cost,
        )
        if len(rows) == 0:
            return self.empty()
        st = _build_stack(rows, cols, cost, gr, self.m, p.max_cost)
        r, c = linear_sum_assignment_batched(st.costs, backend=p.backend)
        return _matches(st, r, c)

    def predict(self, rows, cols):
        """Motion of every feature of frame 0 predicted from the matches."""
        vec = self.points1[cols] - self.points0[rows]
        return self.median_near(self.points0[rows], vec, self.points0)

    def median_near(self, sources, vectors, queries):
        return _median_near(sources, vectors, queries, self.gpu)


def _same_matches(a: tuple, b: tuple) -> bool:
    """Whether two ``(rows, cols)`` match lists (NumPy or CuPy) are equal."""
    return all(
        len(x) == len(y) and bool((x == y).all()) for x, y in zip(a, b, strict=True)
    )


def _dummy_cost(max_cost: float, n: int, weight: float) -> float:
    """The cost of leaving a feature unmatched that the solvers get: ``max_cost``,
    or ``(n + 1) * (1 + weight)`` where that is smaller.

    A pair costs at most ``1 + weight`` (descriptor distance in [0, 1], displacement
    penalty at most ``weight``), so the pairs of an assignment of ``n`` rows cost at
    most ``n * (1 + weight)`` together. Once leaving a row unmatched costs more than
    that, every assignment with fewer unmatched rows is cheaper than every one with
    more, and the optimum (the most matches, then the cheapest) no longer depends on
    the dummy cost. A larger one would only cost precision: next to 1e16, float64
    cannot tell pair costs apart (and the device quantises ``[0, max_cost]``).
    """
    return min(max_cost, (n + 1) * (1.0 + weight))


def _feature_groups(points, tile, size=None):
    """Group of every feature of ``frame0``: the ``tile`` px square it lies in
    (numbered 0, 1, ... in the order of the squares), else the cell of a balanced
    split into groups of at most ``size`` features, else one group."""
    if tile is not None:
        key = (points[:, 1] // tile).astype(np.int64) * 1_000_003 + (
            points[:, 0] // tile
        )
        return np.unique(key, return_inverse=True)[1].reshape(-1)
    if size is None or len(points) <= size:
        return np.zeros(len(points), np.int64)
    from ._optical_flow_cpu import kd_groups

    return kd_groups(points, size)  # compiled: the host's share of every pass


def _median_near(sources, vectors, queries, gpu: bool = False):
    """Median of the vectors of the ``_NEIGHBOURS`` sources nearest each query (on
    the device with ``gpu``: CuPy arrays in and out)."""
    k = min(_NEIGHBOURS, len(sources))
    if gpu:
        from . import _optical_flow_gpu as dev

        return dev.knn_median(sources, vectors, queries, k)
    from scipy.spatial import cKDTree

    _, idx = cKDTree(sources).query(queries, k=k)
    idx = np.asarray(idx).reshape(len(queries), k)
    return np.median(vectors[idx], axis=1)


# --------------------------------------------------------------------------- refinement
def _refine(img0, img1, points, seeds):
    """Lucas-Kanade fit seeded by the matches, with a forward-backward check."""
    import cv2

    crit = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 50, 1e-3)
    win = (_LK_WINDOW, _LK_WINDOW)
    flags = cv2.OPTFLOW_USE_INITIAL_FLOW
    p0 = points.reshape(-1, 1, 2).astype(np.float32)
    fwd, st1, _ = cv2.calcOpticalFlowPyrLK(
        img0,
        img1,
        p0,
        seeds.reshape(-1, 1, 2).astype(np.float32).copy(),
        winSize=win,
        maxLevel=0,
        criteria=crit,
        flags=flags,
    )
    back, st2, _ = cv2.calcOpticalFlowPyrLK(
        img1,
        img0,
        fwd,
        p0.copy(),
        winSize=win,
        maxLevel=0,
        criteria=crit,
        flags=flags,
    )
    fwd, back = fwd.reshape(-1, 2), back.reshape(-1, 2)
    ok = (
        (st1.ravel() == 1)
        & (st2.ravel() == 1)
        & np.isfinite(fwd).all(1)
        & (np.linalg.norm(fwd - seeds, axis=1) < _LK_MAX_SHIFT)
        & (np.linalg.norm(back - points, axis=1) < _FB_MAX_ERROR)
    )
    return fwd, ok


def _refine_on_host(matcher, img0, img1, rows, cols, costs, refine) -> tuple:
    """The matched points, their targets and costs after the refinement and the
    local consistency check (see the module docstring), on the host."""
    points = matcher.f0.points[rows]
    targets = matcher.f1.points[cols]
    if refine and len(rows):
        targets, ok = _refine(img0, img1, points, targets)
        points, targets, costs = points[ok], targets[ok], costs[ok]
        if len(points) > 2:
            # local consistency: a refined vector far from the median of its
            # neighbours' is a wrong match that the refinement made self-consistent
            vec = targets - points
            pred = _median_near(points, vec, points)
            ok = np.linalg.norm(vec - pred, axis=1) <= _MAX_DEVIATION
            points, targets, costs = points[ok], targets[ok], costs[ok]
    return points, targets, costs


def _refine_on_device(matcher, img0, img1, rows, cols, costs, refine) -> tuple:
    """:func:`_refine_on_host` on the device (its own Lucas-Kanade kernel); the
    results are returned to the host."""
    from . import _optical_flow_gpu as dev

    xp = matcher.xp
    points = matcher.points0[rows]
    targets = matcher.points1[cols]
    if refine and len(rows):
        f0, f1 = dev.upload_frame(img0), dev.upload_frame(img1)
        matcher.frames = (f0.img, f1.img)  # the dense stage reuses them
        targets, ok = dev.refine(
            f0, f1, points, targets, _LK_WINDOW, _LK_MAX_SHIFT, _FB_MAX_ERROR
        )
        keep = xp.flatnonzero(ok)  # one read of the count for the three arrays
        points, targets, costs = points[keep], targets[keep], costs[keep]
        if len(points) > 2:
            vec = targets - points
            pred = _median_near(points, vec, points, gpu=True)
            ok = xp.linalg.norm(vec - pred, axis=1) <= _MAX_DEVIATION
            keep = xp.flatnonzero(ok)
            points, targets, costs = points[keep], targets[keep], costs[keep]
    # one copy back
    both = to_numpy(xp.concatenate([points, targets, costs[:, None]], axis=1))
    return both[:, :2].astype(np.float32), both[:, 2:4].astype(np.float32), both[:, 4]


# --------------------------------------------------------------------------- dense
def _interpolate(img0: np.ndarray, points, vectors, k: int = 16, gpu=False):
    """Edge-aware interpolation of sparse vectors to every pixel.

    Each pixel averages its ``k`` nearest matches, weighted by a Gaussian of the
    distance (scale: the distance to the nearest match plus 10 px) and of the
    colour difference between the pixel and the match (sigma 12 grey levels, on a
    smoothed image), a joint-bilateral simplification of EpicFlow's geodesic
    weights. Frames above 0.1 MP are interpolated on a half-resolution grid (2 x 2
    block centres) and resized back. ``gpu``: the neighbours and weights are found
    on the device (ties in distance may pick other neighbours than the CPU's k-d
    tree) and the field stays there (a CuPy array).
    """
    import cv2

    h, w = img0.shape[:2]
    if len(points) == 0:
        out = np.zeros((h, w, 2), np.float32)
        if gpu:
            from . import _optical_flow_gpu as dev

            return dev.array_module().asarray(out)
        return out
    k = min(k, len(points))
    smooth = cv2.GaussianBlur(img0, (0, 0), 1.5).astype(np.float32)
    if smooth.ndim == 2:
        smooth = smooth[..., None]
    pi = points.astype(np.int64)
    col_match = smooth[pi[:, 1], pi[:, 0]]  # (n, C)
    half = h * w > 100_000 and h >= 4 and w >= 4
    if half:
        gh, gw = h // 2, w // 2
        grid = cv2.resize(smooth, (gw, gh), interpolation=cv2.INTER_AREA)
        grid = grid.reshape(gh, gw, -1)
        step, offset = 2.0, 0.5  # centres of the 2 x 2 blocks
    else:
        gh, gw, grid = h, w, smooth
        step, offset = 1.0, 0.0
    if gpu:
        from . import _optical_flow_gpu as dev

        out = dev.interpolate(
            points, vectors, col_match, grid, step, offset, k, _COLOUR_SIGMA, False
        )
        return dev.resize_flow(out, h, w) if half else out
    out = _interpolate_cpu(points, vectors, col_match, grid, step, offset, k)
    if half:
        out = cv2.resize(out, (w, h), interpolation=cv2.INTER_LINEAR)
    return out


def _interpolate_cpu(points, vectors, col_match, grid, step, offset, k):
    """The weighted average of :func:`_interpolate` on the CPU: (gh, gw, 2)."""
    from scipy.spatial import cKDTree

    gh, gw, channels = grid.shape
    yy, xx = np.mgrid[0:gh, 0:gw] * step + offset
    pix = np.stack([xx.ravel(), yy.ravel()], axis=1)
    dist, idx = cKDTree(points).query(pix, k=k)
    dist = np.asarray(dist, np.float32).reshape(-1, k)
    idx = np.asarray(idx).reshape(-1, k)
    col_pix = grid.reshape(-1, channels)
    out = np.empty((gh * gw, 2), np.float32)
    chunk = 65536
    for s in range(0, gh * gw, chunk):
        d = dist[s : s + chunk]
        scale = d[:, :1] + 10.0
        dc = col_match[idx[s : s + chunk]] - col_pix[s : s + chunk, None, :]
        wgt = np.exp(
            -0.5 * (d / scale) ** 2
            - 0.5 * (dc**2).sum(-1) / (_COLOUR_SIGMA**2 * channels)
        )
        wgt += 1e-12
        out[s : s + chunk] = (wgt[..., None] * vectors[idx[s : s + chunk]]).sum(
            1
        ) / wgt.sum(1)[:, None]
    return out.reshape(gh, gw, 2)


def _warp_error(img0, img1, flow) -> np.ndarray:
    """Per-pixel absolute colour difference between ``img0`` and ``img1`` sampled
    at ``x + flow`` (bilinear, borders replicated), summed over the channels."""
    import cv2

    h, w = img0.shape[:2]
    xx, yy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    warped = cv2.remap(
        img1,
        xx + flow[..., 0],
        yy + flow[..., 1],
        cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_REPLICATE,
    )
    err = cv2.absdiff(warped, img0).astype(np.float32)
    return err.sum(-1) if err.ndim == 3 else err


def _fuse(img0, img1, proposals) -> np.ndarray:
    """Per pixel, the proposal whose warping error summed over a
    ``_FUSE_WINDOW`` square is smallest (the first on a tie; a fusion of flow
    fields; Lempitsky et al. 2010 fuse by graph cuts, which measured no better
    here)."""
    import cv2

    win = (_FUSE_WINDOW, _FUSE_WINDOW)
    best, best_err = proposals[0], None
    for f in proposals:
        err = cv2.boxFilter(_warp_error(img0, img1, f), -1, win)
        if best_err is None:
            best_err = err
            continue
        better = err < best_err
        best = np.where(better[..., None], f, best)
        best_err = np.minimum(err, best_err)
    return best


def _start_dis(grey0, grey1):
    """DIS flow (``cv2.DISOpticalFlow``, medium preset) from ``grey0`` to ``grey1``,
    computed on a worker thread (OpenCV releases the GIL): its future, or None for
    frames below DIS's patch size."""
    from concurrent.futures import ThreadPoolExecutor

    import cv2

    if min(grey0.shape) < 16:
        return None

    def run():
        dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
        return dis.calc(grey0, grey1, None)

    pool = ThreadPoolExecutor(1, thread_name_prefix="vision_cuts-dis")
    future = pool.submit(run)
    pool.shutdown(wait=False)  # the thread ends when ``run`` returns
    return future


def _dense(img0, img1, grey0, grey1, points, vectors, gpu, dis, frames=None):
    """Dense flow: the matches interpolated edge-aware and refined variationally,
    fused with DIS's flow (``dis``: its future from :func:`_start_dis`) by the
    smaller local warping error, then refined variationally once more at full
    size. ``gpu``: everything but DIS on the device (its own variational
    refinement, ``kernels/variational_flow.cu``), one upload of the frames (or none:
    ``frames``, the colour frames already there) and one download of the field."""
    init = _interpolate(img0, points, vectors, gpu=gpu)
    if gpu:
        from . import _optical_flow_gpu as dev

        other = None if dis is None else dis.result()
        pyramid = _pyramid(grey0, grey1, 3)
        return dev.dense(
            img0, img1, grey0, grey1, pyramid, init, other, _FUSE_WINDOW, frames
        )
    ours = _variational(grey0, grey1, init)
    if dis is None:  # below DIS's patch size
        return ours
    fused = _fuse(img0, img1, [ours, dis.result()])
    return _variational(grey0, grey1, fused, levels=1)


def _pyramid(grey0, grey1, levels: int) -> list:
    """The levels of a coarse-to-fine refinement, coarsest first: ``(scale, frame0,
    frame1)``, the frames resized (INTER_AREA; the frames themselves at scale 1);
    levels below 8 px are left out."""
    import cv2

    h, w = grey0.shape
    out = []
    for level in range(levels - 1, -1, -1):
        f = 0.5**level
        sw, sh = max(1, round(w * f)), max(1, round(h * f))
        if sw < 8 or sh < 8:
            continue
        if level:
            g0 = cv2.resize(grey0, (sw, sh), interpolation=cv2.INTER_AREA)
            g1 = cv2.resize(grey1, (sw, sh), interpolation=cv2.INTER_AREA)
            out.append((f, g0, g1))
        else:
            out.append((1.0, grey0, grey1))
    return out


def _variational(grey0, grey1, flow, levels: int = 3) -> np.ndarray:
    """Coarse-to-fine variational refinement of an initial flow field."""
    import cv2

    h, w = grey0.shape
    flow = flow.astype(np.float32)
    for f, g0, g1 in _pyramid(grey0, grey1, levels):
        small = flow
        if f != 1.0:
            size = (g0.shape[1], g0.shape[0])
            small = cv2.resize(flow, size, interpolation=cv2.INTER_AREA) * f
        vr = cv2.VariationalRefinement_create()
        vr.setFixedPointIterations(5)
        vr.setSorIterations(5)
        vr.calc(g0, g1, small)
        flow = cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR) / f
    return flow.astype(np.float32)


# --------------------------------------------------------------------------- front end
class _Params(NamedTuple):
    """The checked parameters of :func:`optical_flow`."""

    backend: str
    detector: str
    max_features: int
    search_radius: float
    local_radius: float
    local_passes: int
    displacement_weight: float
    max_cost: float
    tile_size: int | None


def _check_params(
    backend,
    detector,
    max_features,
    search_radius,
    local_radius,
    local_passes,
    displacement_weight,
    max_cost,
    tile_size,
    callback,
) -> _Params:
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if detector not in DETECTORS:
        raise ValueError(f"detector must be one of {DETECTORS}, got {detector!r}")
    local_passes = check_int(local_passes, "local_passes", 0, _MAX_LOCAL_PASSES)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    return _Params(
        backend,
        detector,
        _check_positive(max_features, "max_features", integer=True, high=INT32_MAX),
        _check_positive(search_radius, "search_radius"),
        _check_positive(local_radius, "local_radius"),
        local_passes,
        _check_positive(
            displacement_weight, "displacement_weight", high=_MAX_DISPLACEMENT_WEIGHT
        ),
        _MAX_COST[detector]
        if max_cost is None
        else _check_positive(max_cost, "max_cost"),
        None
        if tile_size is None
        else _check_positive(tile_size, "tile_size", integer=True),
    )


def check_flow_options(options: dict) -> None:
    """The options of :func:`optical_flow_frames` (``options``: its keyword
    arguments, defaults applied), checked as it checks them: for callers that pass
    them on to many calls (``flow_many``)."""
    names = (
        "backend", "detector", "max_features", "search_radius", "local_radius",
        "local_passes", "displacement_weight", "max_cost", "tile_size",
    )  # fmt: skip
    _check_params(*(options[k] for k in names), None)
    for flag in ("dense", "refine", "warm_start"):
        check_flag(options[flag], flag)


class _Steps:
    """``callback(done, total)`` once per stage."""

    def __init__(self, callback, total: int) -> None:
        self.callback, self.total, self.done = callback, total, 0

    def __call__(self) -> None:
        self.done += 1
        if self.callback is not None:
            self.callback(self.done, self.total)


def _flow_pair(
    img0, img1, grey0, grey1, f0, f1, params, dense, refine, init, progress, dis=None
):
    """The pipeline after detection (see the module docstring). ``init``: predicted
    motion of every feature of ``f0`` (warm start from the previous frame pair), or
    None for the global pass within ``search_radius``; ``dis``: DIS's future where
    the caller started it already (:func:`_start_dis`)."""
    p = params
    # DIS, one of the dense proposals, needs only the frames: it runs on a worker
    # thread (OpenCV releases the GIL) while the matches are found
    if dense and dis is None:
        dis = _start_dis(grey0, grey1)
    matcher = _Matcher(f0, f1, p)
    if init is None:
        pred, radius = np.zeros_like(f0.points), p.search_radius
    else:
        pred, radius = init, _WARM_RADIUS
    rows, cols, costs = matcher.assign(pred, radius)
    progress()
    for done in range(p.local_passes):
        if not len(rows):
            progress()
            continue
        before = rows, cols
        rows, cols, costs = matcher.assign(matcher.predict(rows, cols), p.local_radius)
        progress()
        left = p.local_passes - done - 1
        if left and _same_matches((rows, cols), before):
            # the same matches predict the same motion: every later pass repeats
            # this one
            for _ in range(left):
                progress()
            break
    if matcher.gpu:
        points, targets, costs = _refine_on_device(
            matcher, img0, img1, rows, cols, costs, refine
        )
    else:
        points, targets, costs = _refine_on_host(
            matcher, img0, img1, rows, cols, costs, refine
        )
    vectors = (targets - points).astype(np.float32)
    progress()
    log.debug(
        "optical_flow: %d / %d features matched (%d in frame1)",
        len(points),
        len(f0.points),
        len(f1.points),
    )
    flow = None
    if dense:
        flow = _dense(
            img0, img1, grey0, grey1, points, vectors, matcher.gpu, dis, matcher.frames
        )
        progress()
    return FlowResult(
        points.astype(np.float32).reshape(-1, 2),
        vectors.reshape(-1, 2),
        np.asarray(costs, np.float32).reshape(-1),
        flow,
    )


def optical_flow(
    frame0: Any,
    frame1: Any,
    *,
    backend: str = "auto",
    dense: bool = False,
    detector: str = "fast-brief",
    max_features: int = 3000,
    search_radius: float = 40.0,
    local_radius: float = 6.0,
    local_passes: int = 1,
    displacement_weight: float = 0.2,
    max_cost: float | None = None,
    refine: bool = True,
    tile_size: int | None = None,
    callback: Callable[[int, int], None] | None = None,
) -> FlowResult:
    """Flow from ``frame0`` to ``frame1`` by assignment between their features.

    Parameters
    ----------
    frame0, frame1 : ndarray, shape (M, N) or (M, N, C), C in 1, 3, 4
        The two frames, same shape once read (an alpha channel is dropped and
        (M, N, 1) is grey: RGB and RGBA frames agree, as in a sequence); RGB(A) or
        grey, uint8 (other integer dtypes are clipped to [0, 255]; bool frames are
        black and white, True as 255; float frames in [0, 1] are scaled by 255, an
        interpolation's overshoot up to 1.5 included, other float frames are taken
        as grey levels and clipped). Both float frames are read on one scale: when
        one lies in [0, 1.5] and the other has values above 1.5, that is a
        ValueError. A frame whose values
        are all 0 (or below) is black on either scale and fits both.
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy inputs or when a device is present, else the
        CPU (``VISION_CUTS_BACKEND`` overrides it). Everything after feature
        detection runs there (see the module docstring).
    dense : bool
        Also return per-pixel flow interpolated from the matches.
    detector : {"fast-brief", "orb", "sift"}
        Feature detector and descriptor. ``"fast-brief"``: FAST corners on two
        scales ranked by the Harris response, with unsteered 256-bit BRIEF
        descriptors, defined in integers and computed where ``backend`` runs
        (compiled on the CPU, kernels on the device), the same features on both
        (``_fast_brief`` defines it). ``"orb"`` and ``"sift"``: OpenCV's, on the
        CPU (ORB on two pyramid levels).
    max_features : int
        Upper bound on the features detected per frame, at most ``2**31 - 1``.
    search_radius : float
        Largest displacement (px) of the first, global assignment; farther pairs are
        forbidden. Any finite positive value: far below a pixel, only features at
        the same position pair (the search grid stays bounded however small it is).
    local_radius : float
        Largest deviation (px) from the locally predicted motion in the later passes
        (any finite positive value, as ``search_radius``).
    local_passes : int
        Number of local assignment passes after the global one (0 keeps only the
        global assignment). One is the default: a second pass changes 1-3% of the
        matches and adds at most 1% of points, with the same endpoint error on every
        measured sequence (BENCHMARKS.md), at the cost of a whole pass. At most 64;
        the passes end early once one changes no match.
    displacement_weight : float
        Cost added for a displacement (deviation) of a whole radius (> 0, at most
        1e6).
    max_cost : float, optional
        Cost of leaving a feature unmatched: pairs costing more are never chosen.
        Default 0.35 for FAST-BRIEF and ORB, 0.3 for SIFT. A pair costs at most
        ``1 + displacement_weight``, so with ``n`` features in ``frame0`` every value
        from ``(n + 1) * (1 + displacement_weight)`` up gives the same result (the
        most matches the radii allow, then the cheapest); the solvers are given that
        bound in place of larger values, which would only lose precision.
    refine : bool
        Sub-pixel refinement and forward-backward check of every match (see Notes).
    tile_size : int, optional
        Solve the assignment per square tile of this many pixels of ``frame0``, all
        tiles in one batched call. Default: one problem while ``n * m <= 2**18``
        feature pairs, else groups of at most 256 nearby features (a balanced k-d
        split of ``frame0``'s features), one problem each (a single problem of
        2000 x 4000 with its forbidden pairs took 0.3-0.8 s on the CPU, the groups
        of the same pair 10 ms).
    callback : callable, optional
        ``callback(done, total)`` after each stage (detection, every assignment
        pass, refinement, dense flow), for progress bars.

    Returns
    -------
    FlowResult
        ``(points, vectors, costs, dense)``: ``points`` (N, 2) float32 ``(x, y)`` in
        ``frame0`` (pixel centres), ``vectors`` (N, 2) float32 ``(dx, dy)``, ``costs``
        (N,) float32, and ``dense`` (M, N, 2) float32 ``(u, v)`` or None. N is 0 when
        no feature is found or matched (a textureless frame); ``dense`` is then the
        variational flow started from zero. Same array kind (NumPy / CuPy) as
        ``frame0``.

    Raises
    ------
    TypeError
        A frame is None, not numeric, or a masked array (its mask would be
        ignored: fill it first); a parameter has the wrong type (``dense`` and
        ``refine`` must be True or False).
    ValueError
        Frames of different shapes, an empty frame, a frame that is not (M, N) or
        (M, N, C), a ragged nested list, NaN in a float frame, float frames on
        different scales (see ``frame0, frame1``), an unknown ``detector`` or
        ``backend``, or a parameter out of range.
    BackendUnavailableError
        ``backend="gpu"`` without a usable device.

    See Also
    --------
    vision_cuts.linear_sum_assignment_batched : the solver of each pass.
    vision_cuts.flow_to_color, vision_cuts.draw_flow_arrows : pictures of the result.

    Notes
    -----
    See the module docstring for the pipeline. With tiles or groups, a feature of
    ``frame1`` that two of them both match goes to the cheaper match; the other
    feature stays unmatched. Forbidden pairs are ``inf`` in the cost matrices;
    every feature can stay unmatched through its own dummy column, so no problem
    is infeasible.

    Examples
    --------
    >>> import numpy as np
    >>> from vision_cuts import optical_flow
    >>> rng = np.random.default_rng(0)
    >>> img = (rng.random((120, 160)) * 255).astype(np.uint8)
    >>> shifted = np.roll(img, (2, 3), axis=(0, 1))
    >>> res = optical_flow(img, shifted, backend="cpu")
    >>> bool(np.abs(np.median(res.vectors, axis=0) - [3, 2]).max() < 0.1)
    True
    """
    on_gpu = is_cupy_array(frame0)
    params = _check_params(
        backend,
        detector,
        max_features,
        search_radius,
        local_radius,
        local_passes,
        displacement_weight,
        max_cost,
        tile_size,
        callback,
    )
    dense = check_flag(dense, "dense")
    refine = check_flag(refine, "refine")
    raw0 = _check_frame(frame0, "frame0")
    raw1 = _check_frame(frame1, "frame1")
    reader = _FrameReader()  # one scale for both frames
    img0, img1 = reader(raw0, "frame0"), reader(raw1, "frame1")
    if img0.shape != img1.shape:  # as read (RGB and RGBA agree, as in a sequence)
        raise ValueError(
            "frame0 and frame1 must have the same shape, got frame0 "
            f"{tuple(raw0.shape)} and frame1 {tuple(raw1.shape)}"
        )
    params = params._replace(backend=resolve_backend(backend, frame0, frame1))
    progress = _Steps(callback, 3 + params.local_passes + int(dense))
    grey0, grey1 = _grey(img0), _grey(img1)
    # DIS (a dense proposal) needs only the frames: started before the detection, it
    # runs on its worker thread while the features are found and matched
    dis = _start_dis(grey0, grey1) if dense else None
    f0, f1 = _features_of_pair(
        grey0, grey1, detector, params.max_features, params.backend
    )
    progress()
    result = _flow_pair(
        img0, img1, grey0, grey1, f0, f1, params, dense, refine, None, progress, dis
    )
    return _as_kind(on_gpu, result)


def _as_kind(on_gpu: bool, result: FlowResult) -> FlowResult:
    if not on_gpu:
        return result
    import cupy

    return FlowResult(*(cupy.asarray(a) if a is not None else None for a in result))


def optical_flow_frames(
    frames: Iterable[Any],
    *,
    backend: str = "auto",
    dense: bool = False,
    detector: str = "fast-brief",
    max_features: int = 3000,
    search_radius: float = 40.0,
    local_radius: float = 6.0,
    local_passes: int = 1,
    displacement_weight: float = 0.2,
    max_cost: float | None = None,
    refine: bool = True,
    tile_size: int | None = None,
    warm_start: bool = True,
) -> Iterator[FlowResult]:
    """Flow between the consecutive frames of a sequence, one pair at a time.

    Parameters
    ----------
    frames : iterable of ndarray
        The frames, all of one shape (see :func:`optical_flow`); a generator that
        decodes a video is read one frame ahead, on a worker thread. Float frames
        are read on one scale, decided by the first float frame with a value above
        0: a later one on the other scale is a ValueError naming it.
    warm_start : bool
        Start every pair after the first from the motion of the previous pair (each
        feature's predicted motion is the median vector of the previous matches that
        ended nearest to it), with a first pass within 12 px of that prediction instead
        of the global pass within ``search_radius``. A pair whose warm start matches
        fewer than half as many features as the pair before is solved again from
        scratch (a cut, or motion the prediction missed).
    backend, dense, detector, max_features, search_radius, local_radius, local_passes,
    displacement_weight, max_cost, refine, tile_size
        As for :func:`optical_flow`.

    Yields
    ------
    FlowResult
        The flow from frame ``t`` to frame ``t + 1``, for t = 0, 1, ...; same array
        kind as the first frame.

    Raises
    ------
    TypeError, ValueError
        As :func:`optical_flow`, for the parameters (``warm_start`` must be True or
        False) and for ``frames`` not being iterable at the first step, and for
        each frame (named ``frames[t]``; None is not a frame) when it is reached.

    Notes
    -----
    Every frame is detected and described once (as the second frame of one pair and
    the first of the next), and the next frame is read and detected on a worker
    thread while the current pair is solved. For dense flow, DIS (the second dense
    proposal, on the host) of the next pair starts as soon as its frame is read, so
    it runs while the current pair is solved.
    """
    from concurrent.futures import ThreadPoolExecutor

    params = _check_params(
        backend,
        detector,
        max_features,
        search_radius,
        local_radius,
        local_passes,
        displacement_weight,
        max_cost,
        tile_size,
        None,
    )
    dense = check_flag(dense, "dense")
    refine = check_flag(refine, "refine")
    warm_start = check_flag(warm_start, "warm_start")
    try:
        it = iter(frames)
    except TypeError:
        raise TypeError(
            "frames must be an iterable of image arrays (a list, a generator, ...), "
            f"got {type(frames).__name__}"
        ) from None
    index = [0]
    last_grey = [None]
    reader = _FrameReader()  # one scale for every frame of the sequence

    def read(where: str):
        """The next frame checked, its grey image, its features (detected where
        ``where`` says) and, for dense flow, DIS's future from the frame before to
        this one (started here, so that it runs while the pair before is solved);
        None at the end."""
        frame = next(it, _END)
        if frame is _END:
            return None
        name = f"frames[{index[0]}]"
        index[0] += 1
        img = reader(_check_frame(frame, name), name)
        if isinstance(frame, np.ndarray) and np.may_share_memory(img, frame):
            # kept while the next frame is read: a decoder that refills one buffer
            # must not change it
            img = img.copy()
        grey = _grey(img)
        before, last_grey[0] = last_grey[0], grey
        dis = None
        if dense and before is not None and before.shape == grey.shape:
            dis = _start_dis(before, grey)
        feats = _features(grey, detector, params.max_features, where)
        return frame, name, img, grey, feats, dis

    pool = ThreadPoolExecutor(1, thread_name_prefix="vision_cuts-frames")
    try:
        first = next(it, _END)
        if first is _END:
            return
        on_gpu = is_cupy_array(first)
        params = params._replace(backend=resolve_backend(backend, first))
        it = itertools.chain([first], it)
        cur = read(params.backend)
        ahead = pool.submit(read, params.backend)
        prev = None
        while True:
            nxt = ahead.result()
            if nxt is None:
                return
            ahead = pool.submit(read, params.backend)  # overlaps the solve below
            _, _, img0, grey0, feat0, _ = cur
            _, name, img1, grey1, feat1, dis = nxt
            if img1.shape != img0.shape:
                raise ValueError(
                    f"{name} must have the shape of the frames before it, "
                    f"{img0.shape}, got {img1.shape}"
                )
            f0 = _as_first(feat0, grey0.shape)
            init = None
            if (
                warm_start
                and prev is not None
                and len(prev.points) >= _WARM_MIN_MATCHES
            ):
                init = to_numpy(
                    _median_near(
                        prev.points + prev.vectors,
                        prev.vectors,
                        f0.points,
                        params.backend == "gpu",
                    )
                )
            steps = _Steps(None, 0)
            args = (img0, img1, grey0, grey1, f0, feat1, params, dense, refine)
            res = _flow_pair(*args, init, steps, dis)
            if init is not None and len(res.points) < 0.5 * len(prev.points):
                res = _flow_pair(*args, None, steps, dis)
            yield _as_kind(on_gpu, res)
            prev, cur = res, nxt
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
