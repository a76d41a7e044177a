"""minimize_labels on the GPU: the device expansion loop (``_multilabel_gpu``) gives
the CPU backend's labels and energies cycle for cycle, on random problems in 2-D and
3-D, every pairwise model, and a real picture; problems whose moves may exceed int32
take the CPU-built moves (still exact). Marker ``gpu``."""

from __future__ import annotations

import numpy as np
import pytest

from vision_cuts import label_energy, minimize_labels
from vision_cuts.multilabel import pairwise_matrix

pytestmark = pytest.mark.gpu

MODELS = [
    "potts",
    ("truncated_linear", 3),
    np.array([[0, 3, 4, 5], [3, 0, 2, 4], [4, 2, 0, 3], [5, 4, 3, 0]]),
]


def _same(cpu, gpu):
    np.testing.assert_array_equal(gpu.labels, cpu.labels)
    assert gpu.energy == cpu.energy
    assert gpu.stats["cycles"] == cpu.stats["cycles"]
    assert gpu.stats["initial_energy"] == cpu.stats["initial_energy"]


@pytest.mark.parametrize("model", MODELS, ids=["potts", "tlinear", "matrix"])
@pytest.mark.parametrize("shape", [(13, 17), (1, 9), (5, 6, 7), (3, 1, 8)])
def test_gpu_expansion_is_the_cpu_expansion(rng, model, shape):
    pytest.importorskip("cupy")
    nlab = 4
    unary = rng.integers(0, 40, (*shape, nlab))
    weights = rng.integers(0, 6, (len(shape), *shape))
    kw = {"weights": weights, "max_cycles": 6}
    cpu = minimize_labels(unary, model, backend="cpu", **kw)
    gpu = minimize_labels(unary, model, backend="gpu", **kw)
    _same(cpu, gpu)
    assert gpu.stats["device_moves"] is True
    assert gpu.energy == label_energy(unary, gpu.labels, model, weights=weights)
    # work counters: at most max_cycles cycles of one cut a label
    assert 1 <= len(gpu.stats["cycles"]) <= 6
    assert all(c["cuts"] == nlab for c in gpu.stats["cycles"])


def test_gpu_expansion_on_a_picture():
    """Potts denoising of scikit-image's camera, 16 grey levels, from a start other
    than the cheapest label."""
    pytest.importorskip("cupy")
    from skimage import data

    img = data.camera()[::4, ::4].astype(np.float64)
    noisy = img + np.random.default_rng(1).normal(0, 25, img.shape)
    levels = np.linspace(0, 255, 16)
    unary = np.rint(np.abs(noisy[..., None] - levels) / 4).astype(np.int64)
    init = np.zeros(img.shape, np.int64)
    v = pairwise_matrix("potts", 16) * 6
    cpu = minimize_labels(unary, v, init=init, max_cycles=5, backend="cpu")
    gpu = minimize_labels(unary, v, init=init, max_cycles=5, backend="gpu")
    _same(cpu, gpu)
    assert gpu.stats["cycles"][0]["improving_moves"] > 0


def test_gpu_host_moves_where_capacities_may_not_fit(rng, monkeypatch):
    # where the device kernels' int32 capacities could overflow (``fits`` False), the
    # moves are built on the host (their own int32 checks) and cut on the GPU
    pytest.importorskip("cupy")
    from vision_cuts import _multilabel_gpu

    monkeypatch.setattr(_multilabel_gpu, "fits", lambda u, v, w: False)
    unary = rng.integers(0, 50, (6, 7, 3))
    weights = rng.integers(0, 9, (2, 6, 7))
    cpu = minimize_labels(unary, "potts", weights=weights, backend="cpu")
    gpu = minimize_labels(unary, "potts", weights=weights, backend="gpu")
    assert gpu.stats["device_moves"] is False
    _same(cpu, gpu)


def test_gpu_swap_and_diagonals_are_exact(rng):
    # the device loop is expansion on face neighbourhoods; the rest still runs and
    # agrees with the CPU
    pytest.importorskip("cupy")
    unary = rng.integers(0, 30, (9, 8, 3))
    gpu = minimize_labels(unary, "potts", method="swap", backend="gpu")
    assert gpu.stats["device_moves"] is False
    # a local minimum of the swap moves (ties may pick another one than the CPU's)
    assert gpu.energy == label_energy(unary, gpu.labels, "potts")
    assert gpu.energy <= gpu.stats["initial_energy"]
    again = minimize_labels(unary, "potts", method="swap", init=gpu.labels,
                            max_cycles=1, backend="cpu")  # fmt: skip
    assert again.energy == gpu.energy
    cpu = minimize_labels(unary, "potts", connectivity=8, backend="cpu")
    gpu = minimize_labels(unary, "potts", connectivity=8, backend="gpu")
    assert gpu.stats["device_moves"] is False
    _same(cpu, gpu)


def test_gpu_progress_is_the_cpus(rng):
    pytest.importorskip("cupy")
    unary = rng.integers(0, 30, (16, 18, 6))
    got = {}
    for backend in ("cpu", "gpu"):
        calls = []
        res = minimize_labels(
            unary, "potts", max_cycles=6, backend=backend,
            callback=lambda d, t, calls=calls: calls.append((d, t)),
        )  # fmt: skip
        got[backend] = (calls, res.stats["cycles"])
    assert got["gpu"] == got["cpu"]
    assert got["gpu"][0][-1] == (36, 36)
