"""Tests of the "fast-brief" detector (vision_cuts._fast_brief and its device twin):
an independent NumPy build of its definition as the oracle, the device against the
CPU bit for bit, and the frames users pass (flat, tiny, few features)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

from vision_cuts import _fast_brief as fb

cv2 = pytest.importorskip("cv2")


def _texture(rng, shape) -> np.ndarray:
    noise = (rng.random(shape) * 255).astype(np.uint8)
    img = cv2.GaussianBlur(noise, (0, 0), 1.5)
    img[: shape[0] // 4] = 90  # a flat band: no corners there
    return img


def _camera(shape=(150, 190)) -> np.ndarray:
    from skimage import data

    h, w = shape
    return np.ascontiguousarray(data.camera()[100 : 100 + h, 150 : 150 + w])


def _resized(g: np.ndarray) -> np.ndarray:
    h, w = g.shape
    H1, W1 = (5 * h + 3) // 6, (5 * w + 3) // 6

    def taps(n_out, n_in):
        f = 12 * np.arange(n_out) + 1
        i0, a = f // 10, f % 10
        return np.minimum(i0, n_in - 1), np.minimum(i0 + 1, n_in - 1), a

    y0, y1, ay = taps(H1, h)
    x0, x1, ax = taps(W1, w)
    top = (10 - ax) * g[y0][:, x0] + ax * g[y0][:, x1]
    bot = (10 - ax) * g[y1][:, x0] + ax * g[y1][:, x1]
    return ((10 - ay)[:, None] * top + ay[:, None] * bot + 50) // 100


def _level(img: np.ndarray) -> tuple:
    """(x, y, response) of the kept corners of one level, by the definition."""
    H, W = img.shape
    score = np.zeros((H, W), np.int64)
    if H > 6 and W > 6:
        ys, xs = np.mgrid[3 : H - 3, 3 : W - 3]
        d = np.stack([img[ys + cy, xs + cx] - img[ys, xs] for cx, cy in fb.CIRCLE], -1)
        dd = np.concatenate([d, d[..., :8]], -1)
        lo = np.stack([dd[..., k : k + 9].min(-1) for k in range(16)], -1)
        hi = np.stack([dd[..., k : k + 9].max(-1) for k in range(16)], -1)
        s = np.maximum(lo, -hi).max(-1)
        score[3 : H - 3, 3 : W - 3] = np.where(s > fb.FAST_THRESHOLD, s, 0)
    pad = np.pad(score, 1)
    neigh = np.max(
        [
            pad[1 + dy : 1 + dy + H, 1 + dx : 1 + dx + W]
            for dy in (-1, 0, 1)
            for dx in (-1, 0, 1)
            if dy or dx
        ],
        axis=0,
    )
    keep = (score > 0) & (score > neigh)
    b = fb.BORDER
    inner = np.zeros_like(keep)
    inner[b : H - b, b : W - b] = True
    keep &= inner
    f = img.astype(np.float64)
    gx = ndi.correlate(f, [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]])
    gy = ndi.correlate(f, [[-1, -2, -1], [0, 0, 0], [1, 2, 1]])
    box = np.ones((7, 7))
    A, B, C = (
        np.rint(ndi.correlate(p, box)).astype(np.int64)
        for p in (gx * gx, gx * gy, gy * gy)
    )
    R = 25 * (A * C - B * B) - (A + C) ** 2
    y, x = np.nonzero(keep)
    return x, y, R[y, x]


def _oracle(grey: np.ndarray, count: int) -> tuple:
    g = grey.astype(np.int64)
    h, w = g.shape
    small = _resized(g)
    W1 = small.shape[1]
    x0, y0, r0 = _level(g)
    x1, y1, r1 = _level(small)
    # duplicates: a level-0 corner within 3 px (tenths of a pixel)
    fx, fy = 12 * x1 + 1, 12 * y1 + 1
    d2 = (fx[:, None] - 10 * x0[None]) ** 2 + (fy[:, None] - 10 * y0[None]) ** 2
    fresh = ~(d2 < 900).any(1) if len(x0) else np.ones(len(x1), bool)
    x1, y1, r1 = x1[fresh], y1[fresh], r1[fresh]
    corners = [
        (float(np.float32(x)), float(np.float32(y)), int(r), int(y * w + x), 0, x, y)
        for x, y, r in zip(x0, y0, r0, strict=True)
    ] + [
        (
            float(np.float32((12 * x + 1) / 10)),
            float(np.float32((12 * y + 1) / 10)),
            int(r),
            int(h * w + y * W1 + x),
            1,
            x,
            y,
        )
        for x, y, r in zip(x1, y1, r1, strict=True)
    ]
    cell = max(8.0, float(np.sqrt(h * w * 4 / count)))

    def cid(c):
        return int(np.floor(c[1] / cell)) * (int(w // cell) + 2) + int(
            np.floor(c[0] / cell)
        )

    by_cell = sorted(corners, key=lambda c: (cid(c), -c[2], c[3]))
    rank, prev, k = {}, None, 0
    for c in by_cell:
        k = k + 1 if cid(c) == prev else 0
        prev = cid(c)
        rank[c[3]] = k
    picked = sorted(corners, key=lambda c: (rank[c[3]], -c[2], c[3]))[:count]
    kern = fb.SMOOTH.astype(np.int64)
    smooth = []
    for img in (g, small):
        p = np.pad(img, 3, mode="edge")
        t = sum(kern[k] * p[:, k : k + img.shape[1]] for k in range(7))
        smooth.append(sum(kern[k] * t[k : k + img.shape[0]] for k in range(7)))
    bits = np.zeros((len(picked), 256), bool)
    for i, c in enumerate(picked):
        s, x, y = smooth[c[4]], c[5], c[6]
        P = fb.PATTERN
        bits[i] = s[y + P[:, 1], x + P[:, 0]] < s[y + P[:, 3], x + P[:, 2]]
    points = np.array([(c[0], c[1]) for c in picked], np.float32).reshape(-1, 2)
    return points, np.packbits(bits, axis=1)


def _frames(rng) -> list:
    return [
        _texture(rng, (90, 110)),
        _camera(),
        _camera((64, 200)),
    ]


@pytest.mark.parametrize("count", [3000, 150, 7])
def test_detect_against_the_definition(rng, count):
    for grey in _frames(rng):
        points, desc = fb.detect(grey, count)
        ref_points, ref_desc = _oracle(grey, count)
        assert len(ref_points) >= min(count, 20)
        np.testing.assert_array_equal(points, ref_points)
        np.testing.assert_array_equal(desc, ref_desc)
        assert points.dtype == np.float32 and desc.dtype == np.uint8


def test_detect_edge_cases(rng):
    for grey in (
        np.full((60, 80), 128, np.uint8),  # flat
        np.zeros((5, 7), np.uint8),  # tiny
        _texture(rng, (31, 40)),  # narrower than two borders
        np.zeros((1, 1), np.uint8),
    ):
        points, desc = fb.detect(grey, 100)
        assert points.shape == (0, 2) and desc.shape == (0, 32)
    points, desc = fb.detect(_camera(), 1)
    assert points.shape == (1, 2) and desc.shape == (1, 32)
    # every kept feature lies at least the border from the edge of its level
    points, _ = fb.detect(_camera(), 5000)
    assert (points >= fb.BORDER - 0.5).all()
    assert (points[:, 0] < 190 - fb.BORDER + 1).all()
    assert len(np.unique(points, axis=0)) == len(points)


def _device_frames(rng) -> list:
    return _frames(rng) + [
        np.full((60, 80), 128, np.uint8),
        np.zeros((5, 7), np.uint8),
        _texture(rng, (481, 641)),
    ]


def _same_on_device(frames, count) -> None:
    import cupy

    from vision_cuts import _fast_brief_gpu

    for grey in frames:
        points, desc = fb.detect(grey, count)
        ((dp, dd),) = _fast_brief_gpu.detect([cupy.asarray(grey)], count)
        np.testing.assert_array_equal(cupy.asnumpy(dp), points)
        np.testing.assert_array_equal(cupy.asnumpy(dd), desc)
    # frames of one shape detected together: each as if alone
    shape = frames[0].shape
    alike = [f for f in frames if f.shape == shape]
    alike += [np.ascontiguousarray(alike[0][::-1]), np.zeros(shape, np.uint8)]
    together = _fast_brief_gpu.detect([cupy.asarray(f) for f in alike], count)
    for grey, (dp, dd) in zip(alike, together, strict=True):
        points, desc = fb.detect(grey, count)
        np.testing.assert_array_equal(cupy.asnumpy(dp), points)
        np.testing.assert_array_equal(cupy.asnumpy(dd), desc)


@pytest.mark.gpu
@pytest.mark.parametrize("count", [3000, 64])
def test_device_detector_is_the_cpu_detector(rng, count):
    _same_on_device(_device_frames(rng), count)


@pytest.mark.gpu
@pytest.mark.data
def test_device_detector_on_middlebury(data_dir):
    from vision_cuts.datasets import middlebury_flow as mf

    for name in mf.flow_names():
        f0, f1, _ = mf.load_flow(name, data_dir)
        grey = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in (f0, f1)]
        _same_on_device(grey, 3000)
