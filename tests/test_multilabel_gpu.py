"""minimize_labels on the GPU: the device expansion and swap loops (``_multilabel_gpu``)
give the CPU backend's labels and energies cycle for cycle with one move a cut, on
random problems in 2-D and 3-D, every pairwise model, and a real picture; several moves
a cut reach a local minimum; problems whose moves may exceed int32 take the CPU-built
moves (still exact). Marker ``gpu``."""

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
    got = [(c["energy"], c["improving_moves"]) for c in gpu.stats["cycles"]]
    assert got == [(c["energy"], c["improving_moves"]) for c in cpu.stats["cycles"]]
    assert gpu.stats["initial_energy"] == cpu.stats["initial_energy"]
    # the device loop cuts every move; the CPU's loop skips the moves no accepted
    # move can have changed (the same labels all the same)
    for c, g in zip(cpu.stats["cycles"], gpu.stats["cycles"], strict=True):
        if gpu.stats["device_moves"]:
            assert g["skipped_moves"] == 0
            assert c["cuts"] + c["skipped_moves"] <= g["cuts"]
        else:
            assert c == g


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


SWAP_MODELS = ["potts", ("truncated_linear", 2), ("truncated_quadratic", 4)]


@pytest.mark.parametrize("model", SWAP_MODELS, ids=["potts", "tlinear", "tquad"])
@pytest.mark.parametrize("shape", [(13, 17), (1, 9), (5, 6, 7), (3, 1, 8)])
def test_gpu_swap_is_the_cpu_swap(rng, model, shape):
    """Swap on the device, one move a cut: the CPU's labels and energies cycle for
    cycle (its cut is the CPU's on the mirrored graph, undecided nodes included)."""
    pytest.importorskip("cupy")
    nlab = 5
    unary = rng.integers(0, 40, (*shape, nlab))
    unary[..., 3] += 100  # a label few nodes take: pairs with few nodes
    weights = rng.integers(0, 6, (len(shape), *shape))
    kw = {"weights": weights, "max_cycles": 6, "method": "swap"}
    cpu = minimize_labels(unary, model, backend="cpu", **kw)
    gpu = minimize_labels(unary, model, backend="gpu", **kw)
    assert gpu.stats["device_moves"] is True
    np.testing.assert_array_equal(gpu.labels, cpu.labels)
    assert gpu.energy == cpu.energy
    assert gpu.stats["initial_energy"] == cpu.stats["initial_energy"]
    got = [(c["energy"], c["improving_moves"]) for c in gpu.stats["cycles"]]
    want = [(c["energy"], c["improving_moves"]) for c in cpu.stats["cycles"]]
    assert got == want
    # work counters: every pair cut once a cycle (the CPU skips pairs no node has
    # and pairs no accepted move can have changed)
    pairs = nlab * (nlab - 1) // 2
    assert all(c["cuts"] == pairs for c in gpu.stats["cycles"])
    assert all(c["cuts"] + c["skipped_moves"] <= pairs for c in cpu.stats["cycles"])
    assert gpu.energy == label_energy(unary, gpu.labels, model, weights=weights)


@pytest.mark.parametrize("method", ["expansion", "swap"])
@pytest.mark.parametrize("per_cut", [2, 4, 7])
def test_gpu_several_moves_a_cut(rng, method, per_cut):
    """Moves built from one labelling and cut together: the energy is the labels',
    never above the start, and where a cycle lowered nothing the labels are a local
    minimum of the method's moves (a CPU cycle from them changes nothing)."""
    pytest.importorskip("cupy")
    unary = rng.integers(0, 60, (23, 19, 8))
    weights = rng.integers(0, 8, (2, 23, 19))
    model = ("truncated_linear", 3)
    res = minimize_labels(unary, model, weights=weights, method=method,
                          moves_per_cut=per_cut, max_cycles=30,
                          backend="gpu")  # fmt: skip
    assert res.stats["device_moves"] is True
    assert 1 < res.stats["moves_per_cut"] <= per_cut
    assert res.energy == label_energy(unary, res.labels, model, weights=weights)
    energies = [c["energy"] for c in res.stats["cycles"]]
    assert energies[0] <= res.stats["initial_energy"]
    assert all(b <= a for a, b in zip(energies, energies[1:], strict=False))
    assert len(res.stats["cycles"]) < 30  # ended by a cycle that lowered nothing
    assert res.stats["cycles"][-1]["improving_moves"] == 0
    again = minimize_labels(unary, model, weights=weights, method=method,
                            init=res.labels, max_cycles=1, backend="cpu")  # fmt: skip
    assert again.energy == res.energy


def test_gpu_swap_and_diagonals_are_exact(rng):
    # diagonal neighbourhoods build their moves on the host; they agree with the CPU
    pytest.importorskip("cupy")
    unary = rng.integers(0, 30, (9, 8, 3))
    gpu = minimize_labels(unary, "potts", method="swap", backend="gpu",
                          connectivity=8)  # fmt: skip
    assert gpu.stats["device_moves"] is False
    # a local minimum of the swap moves (ties may pick another one than the CPU's)
    assert gpu.energy == label_energy(unary, gpu.labels, "potts", connectivity=8)
    assert gpu.energy <= gpu.stats["initial_energy"]
    again = minimize_labels(unary, "potts", method="swap", init=gpu.labels,
                            max_cycles=1, backend="cpu", connectivity=8)  # fmt: skip
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
        energies = [(c["energy"], c["improving_moves"]) for c in res.stats["cycles"]]
        got[backend] = (calls, energies)
    assert got["gpu"] == got["cpu"]
    assert got["gpu"][0][-1] == (36, 36)
