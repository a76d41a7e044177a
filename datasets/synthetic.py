"""Synthetic problems generated in code: segmentation energies, random grid graphs,
and the structured bipartite graphs of the matching tests and benchmark."""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "ASSIGNMENT_FAMILIES",
    "HARD_ASSIGNMENT_FAMILIES",
    "assignment_costs",
    "chain_bipartite_graph",
    "contrast_weights",
    "corridor_graph",
    "grid_bipartite_graph",
    "ladder_bipartite_graph",
    "panning_clip",
    "random_grid_graph",
    "segmentation_unary",
    "segmentation_problem",
    "volume_problem",
]

_INT32_MAX = int(np.iinfo(np.int32).max)


def contrast_weights(
    image: np.ndarray,
    *,
    lam: float = 50.0,
    scale: float = 1.0,
    connectivity: int = 1,
) -> np.ndarray:
    """Contrast-sensitive Potts weights ``lam * exp(-beta |I_p - I_q|^2) / |p - q|`` as
    int32.

    Returns the ``(D, *grid)`` weights of :func:`vision_cuts.grid_energy` for its
    ``connectivity`` (default: faces only, ``D = ndim``: direction 0 = +x, 1 = +y,
    2 = +z; diagonal neighbourhoods add their directions, weighted by the inverse of
    their length, as GrabCut does); ``beta = 1 / (2 <|I_p - I_q|^2>)`` over the
    neighbour pairs, as in GrabCut. Works for 2-D images (M, N[, C]) and 3-D volumes
    (P, M, N) (single channel). A 3-D array is read as an image with channels when
    its last axis has at most 4 entries, as a volume otherwise: a volume with
    N <= 4 columns must be given with a channel axis of 1, as (P, M, N, 1).

    Raises ValueError when ``lam * scale``, the largest weight, is negative, not
    finite or beyond the int32 range.
    """
    from vision_cuts.grid import _arc_views, connectivity_planes, neighbour_offsets

    top = lam * scale
    if not (math.isfinite(top) and 0 <= round(top) <= _INT32_MAX):
        raise ValueError(
            f"lam * scale is the largest weight and must be finite and in "
            f"[0, {_INT32_MAX}] (int32), got lam={lam!r}, scale={scale!r} "
            f"(lam * scale = {top!r})"
        )
    img = np.asarray(image, dtype=np.float32)
    if img.ndim == 2 or (img.ndim == 3 and img.shape[-1] > 4):
        img = img[..., None]
    grid = img.shape[:-1]
    nd = len(grid)
    planes = connectivity_planes(connectivity, nd)
    steps = neighbour_offsets(nd, planes)[::2]  # the forward step of every direction
    diffs = []
    for d in range(len(steps)):
        tail, head = _arc_views(nd, 2 * d)
        dd = img[head] - img[tail]
        diffs.append((tail, np.sum(dd * dd, axis=-1)))
    mean = sum(float(s.sum()) for _, s in diffs) / max(1, sum(s.size for _, s in diffs))
    beta = 1.0 / (2.0 * mean) if mean > 0 else 0.0
    w = np.zeros((len(steps), *grid), dtype=np.int32)
    for d, (tail, sq) in enumerate(diffs):
        length = float(np.sqrt(np.sum(steps[d] ** 2)))
        v = np.rint(lam * scale * np.exp(-beta * sq) / length).astype(np.float64)
        # float32 rounding can lift a weight of lam * scale just past the int32 range
        w[d][tail] = np.minimum(v, _INT32_MAX).astype(np.int32)
    return w


def segmentation_unary(
    image: np.ndarray, fg_box: tuple, *, bins: int = 16, scale: float = 10.0
) -> np.ndarray:
    """Colour-histogram unaries ``-log P(colour | model)`` for a box-initialised cut.

    Foreground model: pixels inside ``fg_box = (y0, x0, y1, x1)``; background: outside.
    Returns int32 ``(M, N, 2)`` costs (label 0 = background, 1 = foreground).

    ``image`` is (M, N) or (M, N, C), C >= 3 (the first three channels are used).
    Unsigned integer images are quantised over their dtype's full range (0-255 for
    uint8, 0-65535 for uint16); boolean, signed integer and float images must hold
    values in [0, 256). Other dtypes are a TypeError, values out of range a ValueError.
    """
    img = np.asarray(image)
    if img.dtype.kind not in "buif":
        raise TypeError(
            f"image must have a boolean, integer or float dtype, got {img.dtype}"
        )
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    if img.ndim != 3 or img.shape[-1] < 3:
        raise ValueError(
            f"image must have shape (M, N) or (M, N, C) with C >= 3, got "
            f"{np.shape(image)}"
        )
    img = img[..., :3]
    if img.dtype.kind == "u":
        top = float(np.iinfo(img.dtype).max) + 1.0
    else:
        top = 256.0
        if img.size and not (
            np.isfinite(img).all() and img.min() >= 0 and img.max() < top
        ):
            raise ValueError(
                f"image of dtype {img.dtype} must hold values in [0, 256), got "
                f"values in [{img.min()}, {img.max()}]"
            )
        img = img.astype(np.int64)  # 8-bit values; fractions are dropped
    # exact up to 32-bit values; the clip guards the rounding of 64-bit ones
    q = np.floor(img.astype(np.float64) * (bins / top)).astype(np.int64)
    q = np.clip(q, 0, bins - 1)
    code = (q[..., 0] * bins + q[..., 1]) * bins + q[..., 2]
    inside = np.zeros(code.shape, dtype=bool)
    y0, x0, y1, x1 = fg_box
    m, n = code.shape
    if not (0 <= y0 < y1 <= m and 0 <= x0 < x1 <= n):
        # (a box off the picture or reversed fitted the model to no pixel: flat
        # costs everywhere, silently)
        raise ValueError(
            f"fg_box must be (y0, x0, y1, x1) with 0 <= y0 < y1 <= {m} and "
            f"0 <= x0 < x1 <= {n} (the image's rows and columns), got {tuple(fg_box)}"
        )
    inside[y0:y1, x0:x1] = True
    nb = bins**3
    hf = np.bincount(code[inside], minlength=nb).astype(np.float64) + 1.0
    hb = np.bincount(code[~inside], minlength=nb).astype(np.float64) + 1.0
    lf = -np.log(hf / hf.sum())
    lb = -np.log(hb / hb.sum())
    unary = np.empty((*code.shape, 2), dtype=np.int32)
    unary[..., 0] = np.rint(scale * lb[code])
    unary[..., 1] = np.rint(scale * lf[code])
    return unary


def segmentation_problem(
    image: np.ndarray, *, lam: float = 50.0, scale: float = 10.0, connectivity: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """(unary, weights) of a box-initialised contrast-sensitive segmentation energy.

    The box covers the central 60% of the image; the energy is the first GrabCut
    iteration with colour histograms instead of GMMs. ``connectivity`` as in
    :func:`contrast_weights`.
    """
    h, w = image.shape[:2]
    box = (int(0.2 * h), int(0.2 * w), int(0.8 * h), int(0.8 * w))
    unary = segmentation_unary(image, box, scale=scale)
    weights = contrast_weights(image, lam=lam * scale / 10.0, connectivity=connectivity)
    return unary, weights


def volume_problem(
    n: int = 64,
    *,
    seed: int = 0,
    lam: float = 30.0,
    noise: float = 0.35,
    connectivity: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """A noisy 3-D volume with blobs: (unary (n, n, n, 2), weights (D, n, n, n)),
    ``D`` the directions of ``connectivity`` (3 by default; see
    :func:`contrast_weights`).

    Three random ellipsoids of intensity 1 in a background of 0 plus Gaussian noise;
    unaries are the quantised squared distances to the two class means.
    """
    rng = np.random.default_rng(seed)
    z, y, x = np.mgrid[0:n, 0:n, 0:n].astype(np.float32) / n
    vol = np.zeros((n, n, n), dtype=np.float32)
    for _ in range(3):
        c = rng.uniform(0.25, 0.75, size=3)
        r = rng.uniform(0.1, 0.25, size=3)
        vol[
            ((z - c[0]) / r[0]) ** 2
            + ((y - c[1]) / r[1]) ** 2
            + ((x - c[2]) / r[2]) ** 2
            < 1
        ] = 1.0
    vol += rng.normal(0, noise, size=vol.shape).astype(np.float32)
    unary = np.empty((n, n, n, 2), dtype=np.int32)
    unary[..., 0] = np.rint(50 * vol**2)
    unary[..., 1] = np.rint(50 * (vol - 1) ** 2)
    weights = contrast_weights(vol * 255, lam=lam, connectivity=connectivity)
    return unary, weights


def corridor_graph(
    shape: tuple, *, wall: int = 0, terminals: str = "ends"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A grid graph whose flow runs along one winding corridor: int32 (source, sink,
    edges), 4 planes in 2-D, 6 in 3-D.

    The corridor takes every other row of a slice (the rows joined at alternating
    ends) and, in 3-D, the slices in turn (joined at alternating ends of their
    corridors), so it holds about half the nodes in one path. Its arcs have capacity
    1000 both ways, every other arc ``wall``. ``terminals="ends"``: source 10**6 at
    the corridor's first node and sink 10**6 at its last (one augmenting path as
    long as the corridor); ``"halves"``: capacity 1 from the source on the
    corridor's first half and to the sink on its second (many long paths). The
    hard case of push-relabel, whose global relabels are as deep as the corridor.
    """
    if len(shape) not in (2, 3) or min(shape) < 1:
        raise ValueError(f"shape must be 2 or 3 positive sizes, got {shape!r}")
    if terminals not in ("ends", "halves"):
        raise ValueError(f"terminals must be 'ends' or 'halves', got {terminals!r}")
    nd = len(shape)
    h, w = shape[-2:]
    rows = []
    for y in range(0, h, 2):
        xs = range(w) if (y // 2) % 2 == 0 else range(w - 1, -1, -1)
        rows += [(y, x) for x in xs]
        if y + 2 < h:
            rows.append((y + 1, w - 1 if (y // 2) % 2 == 0 else 0))
    if nd == 2:
        path = rows
    else:
        path = []
        for z in range(shape[0]):
            path += [(z, *p) for p in (rows if z % 2 == 0 else rows[::-1])]
    src = np.zeros(shape, np.int32)
    snk = np.zeros(shape, np.int32)
    e = np.full((2 * nd, *shape), wall, np.int32)
    for d in range(nd):  # no arc leaves the grid
        ax = nd - 1 - d
        last = [slice(None)] * nd
        last[ax] = -1
        e[(2 * d, *last)] = 0
        last[ax] = 0
        e[(2 * d + 1, *last)] = 0
    p = np.array(path)
    step = p[1:] - p[:-1]  # one axis changes by +-1
    ax = np.argmax(step != 0, axis=1)
    sign = step[np.arange(len(step)), ax]
    plane = 2 * (nd - 1 - ax) + (sign < 0)
    e[(plane, *p[:-1].T)] = 1000
    e[(plane ^ 1, *p[1:].T)] = 1000
    if terminals == "ends":
        src[tuple(p[0])] = snk[tuple(p[-1])] = 10**6
    else:
        half = len(p) // 2
        src[tuple(p[:half].T)] = 1
        snk[tuple(p[half:].T)] = 1
    return src, snk, e


def random_grid_graph(
    shape: tuple,
    rng: np.random.Generator,
    *,
    high: int = 100,
    density: float = 0.7,
    directed: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random (source, sink, edges) int32 capacities on a 2-D or 3-D grid."""
    nd = len(shape)
    src = (rng.integers(0, high, size=shape) * (rng.random(shape) < 0.5)).astype(
        np.int32
    )
    snk = (rng.integers(0, high, size=shape) * (rng.random(shape) < 0.5)).astype(
        np.int32
    )
    e = rng.integers(0, high, size=(2 * nd, *shape))
    e = (e * (rng.random(e.shape) < density)).astype(np.int32)
    if not directed:
        for d in range(nd):
            ax = nd - 1 - d
            fwd = e[2 * d]
            bwd = np.zeros_like(fwd)
            src_sl = [slice(None)] * nd
            dst_sl = [slice(None)] * nd
            src_sl[ax] = slice(None, -1)
            dst_sl[ax] = slice(1, None)
            bwd[tuple(dst_sl)] = fwd[tuple(src_sl)]
            e[2 * d + 1] = bwd
    return src, snk, e


def ladder_bipartite_graph(depth: int):
    """SciPy's layered worst case for Hopcroft-Karp (scipy.sparse.csr_array).

    Chain rows r_1..r_K (K = depth) on columns [c_{k-1}, c_k], ladder rows a_k, b_k
    on their own column and both columns of level k + 1, and the free row r_0 on
    [c_0, alpha_1, beta_1] last: SciPy's greedy first phase leaves exactly r_0 and
    c_K free, and its depth-first search then walks 2**depth paths. The maximum
    matching is perfect.
    """
    import scipy.sparse as sp

    def alpha(k):
        return depth + 1 + 2 * (k - 1)

    rows = [[k - 1, k] for k in range(1, depth + 1)]
    for k in range(1, depth + 1):
        nxt = [alpha(k + 1), alpha(k + 1) + 1] if k < depth else []
        rows.append([alpha(k), *nxt])
        rows.append([alpha(k) + 1, *nxt])
    rows.append([0, alpha(1), alpha(1) + 1])
    ptr = np.cumsum([0] + [len(r) for r in rows])
    idx = np.concatenate([np.asarray(r, np.int32) for r in rows])
    n = len(rows)
    return sp.csr_array((np.ones(idx.size, np.int8), idx, ptr), shape=(n, n))


def chain_bipartite_graph(n: int):
    """Rows r_1..r_n on [c_{k-1}, c_k] and r_0 on [c_0] last (scipy.sparse.csr_array):
    a greedy start matches r_k to c_{k-1}, and the one augmenting path left runs
    through the whole chain (length 2 n + 1). The maximum matching is perfect."""
    import scipy.sparse as sp

    ptr = np.concatenate([[0], np.arange(2, 2 * n + 1, 2), [2 * n + 1]])
    idx = np.empty(2 * n + 1, np.int32)
    idx[0 : 2 * n : 2] = np.arange(n)
    idx[1 : 2 * n : 2] = np.arange(1, n + 1)
    idx[2 * n] = 0
    return sp.csr_array((np.ones(idx.size, np.int8), idx, ptr), shape=(n + 1, n + 1))


def grid_bipartite_graph(side: int, rng: np.random.Generator, holes: float = 0.1):
    """A side x side 4-connected grid with a fraction ``holes`` of its cells removed,
    as the bipartite graph of its black (rows) and white (columns) cells
    (scipy.sparse.csr_array)."""
    import scipy.sparse as sp

    keep = rng.random((side, side)) >= holes
    yy, xx = np.indices((side, side))
    black = ((yy + xx) % 2 == 0) & keep
    white = ((yy + xx) % 2 == 1) & keep
    bid = np.full((side, side), -1, np.int64)
    wid = np.full((side, side), -1, np.int64)
    bid[black] = np.arange(black.sum())
    wid[white] = np.arange(white.sum())
    rows, cols = [], []
    for dy, dx in ((0, 1), (0, -1), (1, 0), (-1, 0)):
        ys = slice(max(0, -dy), side - max(0, dy))
        xs = slice(max(0, -dx), side - max(0, dx))
        yn = slice(max(0, dy), side - max(0, -dy))
        xn = slice(max(0, dx), side - max(0, -dx))
        b = bid[ys, xs]
        w = wid[yn, xn]
        ok = (b >= 0) & (w >= 0)
        rows.append(b[ok])
        cols.append(w[ok])
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    return sp.csr_array(
        (np.ones(r.size, np.int8), (r, c)), shape=(int(black.sum()), int(white.sum()))
    )


#: The cost families that callers of the assignment solvers produce.
ASSIGNMENT_FAMILIES = ("flow", "geometric", "ties", "lowint", "forbidden")
#: families no caller makes but that stress the solvers (not in the default lists)
HARD_ASSIGNMENT_FAMILIES = ("machol_wien",)


def assignment_costs(kind: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    """A (B, n, m) stack of assignment costs of one family.

    * ``flow``: the stacks :func:`vision_cuts.optical_flow` builds (one problem per
      call of its assignment, ``B`` ignored): n features with 256-bit descriptors in a
      640 x 480 frame, m features of the next frame (the first ``min(n, m)`` moved by a
      smooth motion field plus 0.5 px noise, descriptors with 10% of their bits
      flipped; the rest new), cost = descriptor distance + 0.2 x displacement / 40,
      ``inf`` beyond 40 px, one dummy column per row at 0.35 (unmatched): shape
      (1, n', m' + n') over the n' rows and m' columns with a pair within 40 px.
    * ``geometric``: Euclidean distances between two jittered copies of a point set
      (float), ``ties``: integers 0-3, ``lowint``: integers 0-999, ``forbidden``:
      integers 0-49 with 60% of the pairs ``inf`` (a feasible assignment kept).
    * ``machol_wien``: ``(i + 1) * (j + 1)`` (int64), Machol and Wien's hard case for
      auction and cost-scaling solvers: every row ranks the columns alike and the
      optimum pairs them in reverse order, so the rows wage long price wars.
    """
    if len(shape) != 3:
        raise ValueError(f"shape must be (B, n, m), got {shape!r}")
    nb, n, m = shape
    if kind == "flow":
        if n < 1 or m < 1:
            raise ValueError(
                f"shape (B, n, m) of the 'flow' family needs n >= 1 and m >= 1 "
                f"features, got {shape!r}"
            )
        from vision_cuts.optical_flow import _cost_stack, _Features

        p0 = rng.random((n, 2)) * [640, 480]
        p1 = rng.random((m, 2)) * [640, 480]
        k = min(n, m)
        motion = np.stack(
            [6 * np.sin(p0[:k, 1] / 90), 4 * np.cos(p0[:k, 0] / 120)], axis=1
        )
        p1[:k] = p0[:k] + motion + rng.normal(0, 0.5, (k, 2))
        b0 = rng.integers(0, 2, (n, 256)).astype(np.uint8)
        b1 = rng.integers(0, 2, (m, 256)).astype(np.uint8)
        b1[:k] = np.where(rng.random((k, 256)) < 0.1, 1 - b0[:k], b0[:k])
        f0 = _Features(p0.astype(np.float32), np.packbits(b0, axis=1), True)
        f1 = _Features(p1.astype(np.float32), np.packbits(b1, axis=1), True)
        pred = np.zeros((n, 2), np.float32)
        return _cost_stack(f0, f1, pred, 40.0, 0.2, 0.35).costs
    if kind == "geometric":
        a = rng.random((nb, max(n, m), 2)) * 1000
        b = a + rng.normal(0, 2.0, a.shape)
        a, b = a[:, :n], b[:, rng.permutation(max(n, m))[:m]]
        return np.sqrt(((a[:, :, None, :] - b[:, None, :, :]) ** 2).sum(-1))
    if kind == "ties":
        return rng.integers(0, 4, shape).astype(np.float64)
    if kind == "lowint":
        return rng.integers(0, 1000, shape)
    if kind == "forbidden":
        cost = rng.integers(0, 50, shape).astype(np.float64)
        forbid = rng.random(shape) < 0.6
        k = min(n, m)
        for i in range(nb):
            forbid[i, rng.permutation(n)[:k], rng.permutation(m)[:k]] = False
        cost[forbid] = np.inf
        return cost
    if kind == "machol_wien":
        cost = np.outer(np.arange(1, n + 1), np.arange(1, m + 1)).astype(np.int64)
        return np.broadcast_to(cost, shape).copy()
    kinds = ASSIGNMENT_FAMILIES + HARD_ASSIGNMENT_FAMILIES
    raise ValueError(f"kind must be one of {kinds}, got {kind!r}")


def panning_clip(
    image: np.ndarray, frames: int, shape: tuple = (480, 640), speed: float = 3.0
) -> tuple[list, list]:
    """A camera pan over a real picture, with its exact flow.

    Frame ``t`` shows ``image`` (upscaled to cover the view) through the affine map
    ``x -> A_t x + b_t``: a translation along a smooth curve (about ``speed`` px a
    frame), a slow rotation (up to 1 degree) and zoom (up to 2%). Returns the frames
    (RGB uint8, ``shape``) and the ``frames - 1`` flows from frame t to t + 1
    ((H, W, 2) float32 ``(u, v)``, exact: frame t+1 at ``x + flow(x)`` shows what frame
    t shows at ``x``).
    """
    import cv2

    h, w = shape
    img = np.asarray(image)
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    img = img[..., :3].astype(np.uint8)
    span = speed * frames + max(h, w) * 1.2 + 40
    scale = span / min(img.shape[:2])
    big = cv2.resize(img, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)

    def affine(t):
        s = t / max(frames - 1, 1)
        ang = np.deg2rad(1.0) * np.sin(np.pi * s)
        zoom = 1.0 + 0.02 * np.sin(2 * np.pi * s)
        a = zoom * np.array([[np.cos(ang), -np.sin(ang)], [np.sin(ang), np.cos(ang)]])
        b = np.array([20 + speed * t, 20 + 0.5 * speed * t * (1 + np.sin(3 * s))])
        return a, b

    out, flows = [], []
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    pts = np.stack([xx.ravel(), yy.ravel()])
    for t in range(frames):
        a, b = affine(t)
        m = np.hstack([a, b[:, None]])
        out.append(
            cv2.warpAffine(
                big,
                m,
                (w, h),
                flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                borderMode=cv2.BORDER_REFLECT,
            )
        )
        if t:
            a0, b0 = affine(t - 1)
            src = a0 @ pts + b0[:, None]
            dst = np.linalg.solve(a, src - b[:, None])
            flows.append((dst - pts).T.reshape(h, w, 2).astype(np.float32))
    return out, flows
