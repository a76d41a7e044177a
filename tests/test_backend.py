"""Backend selection: resolve_backend, the VISION_CUTS_BACKEND override and probes.

The probes ``has_cupy`` / ``gpu_available`` are cached, so the tests replace the module
attributes that ``resolve_backend`` looks up at call time instead of clearing caches.
"""

from __future__ import annotations

import numpy as np
import pytest

from vision_cuts import (
    BackendUnavailableError,
    NonSubmodularError,
    VisionCutsError,
    _backend,
)
from vision_cuts._backend import is_cupy_array, resolve_backend, to_numpy


class FakeCupyArray:
    """Looks like a CuPy ndarray to ``is_cupy_array`` (module name + CUDA interface)."""

    __module__ = "cupy._core.core"

    @property
    def __cuda_array_interface__(self):
        return {"shape": (1,), "typestr": "<i4", "data": (0, False), "version": 3}


class FakeTorchTensor:
    __module__ = "torch"
    __cuda_array_interface__ = {}


@pytest.fixture
def machine(monkeypatch):
    """Set what the probes report: ``machine("none" | "cupy-only" | "gpu")``."""
    monkeypatch.delenv("VISION_CUTS_BACKEND", raising=False)

    def set_machine(kind):
        monkeypatch.setattr(_backend, "has_cupy", lambda: kind != "none")
        monkeypatch.setattr(_backend, "gpu_available", lambda: kind == "gpu")

    return set_machine


def test_cpu_always_cpu(machine):
    for kind in ("none", "cupy-only", "gpu"):
        machine(kind)
        assert resolve_backend("cpu") == "cpu"
        assert resolve_backend("cpu", np.zeros(3)) == "cpu"


def test_auto(machine):
    machine("none")
    assert resolve_backend("auto") == "cpu"
    assert resolve_backend("auto", np.zeros(3), [1, 2]) == "cpu"
    machine("cupy-only")
    assert resolve_backend("auto") == "cpu"
    machine("gpu")
    assert resolve_backend("auto") == "gpu"
    assert resolve_backend("auto", np.zeros(3)) == "gpu"


def test_auto_follows_cupy_inputs(machine):
    machine("none")
    # a CuPy input selects the GPU even where the probe says no device
    assert resolve_backend("auto", np.zeros(3), FakeCupyArray()) == "gpu"
    assert resolve_backend("auto", FakeTorchTensor()) == "cpu"


def test_explicit_gpu(machine, monkeypatch):
    machine("gpu")
    assert resolve_backend("gpu") == "gpu"
    machine("none")
    with pytest.raises(BackendUnavailableError, match="CuPy is not installed"):
        resolve_backend("gpu")
    machine("cupy-only")
    with pytest.raises(BackendUnavailableError, match="no CUDA device is usable"):
        resolve_backend("gpu", np.zeros(3))
    # the variable that asked for the GPU is named when the call did not
    monkeypatch.setenv("VISION_CUTS_BACKEND", " GPU ")
    with pytest.raises(BackendUnavailableError, match=r"VISION_CUTS_BACKEND='gpu' \(b"):
        resolve_backend("auto")


def test_environment_override(machine, monkeypatch):
    machine("gpu")
    monkeypatch.setenv("VISION_CUTS_BACKEND", "cpu")
    assert resolve_backend("auto") == "cpu"
    assert resolve_backend("gpu") == "gpu"  # explicit arguments win
    monkeypatch.setenv("VISION_CUTS_BACKEND", "  Cpu\n")
    assert resolve_backend("auto") == "cpu"
    monkeypatch.setenv("VISION_CUTS_BACKEND", "")
    assert resolve_backend("auto") == "gpu"  # empty: no override
    monkeypatch.setenv("VISION_CUTS_BACKEND", "auto")
    assert resolve_backend("auto") == "gpu"
    machine("none")
    monkeypatch.setenv("VISION_CUTS_BACKEND", "gpu")
    with pytest.raises(BackendUnavailableError):
        resolve_backend("auto")
    assert resolve_backend("cpu") == "cpu"
    monkeypatch.setenv("VISION_CUTS_BACKEND", "bogus")
    with pytest.raises(ValueError, match="environment variable VISION_CUTS_BACKEND"):
        resolve_backend("auto")


@pytest.mark.parametrize("name", ["bogus", "CPU", "cuda", "", None, 0, ("cpu",)])
def test_invalid_names(name, machine):
    machine("none")
    want = r"backend must be one of \('auto', 'cpu', 'gpu'\)"
    with pytest.raises(ValueError, match=want):
        resolve_backend(name)


def test_is_cupy_array():
    assert is_cupy_array(FakeCupyArray())
    for x in (np.zeros(3), np.float32(1), [1, 2], None, 3, FakeTorchTensor(), "cupy"):
        assert not is_cupy_array(x)


def test_to_numpy():
    a = np.arange(4)
    assert to_numpy(a) is a
    out = to_numpy([[1, 2], [3, 4]])
    assert isinstance(out, np.ndarray)
    assert out.shape == (2, 2)


def test_probes_consistent():
    # without CuPy there can be no device, and the probes are cached booleans
    assert isinstance(_backend.has_cupy(), bool)
    assert isinstance(_backend.gpu_available(), bool)
    assert _backend.gpu_available() <= _backend.has_cupy()
    if not _backend.gpu_available():
        assert _backend.gpu_name() is None
    else:
        assert isinstance(_backend.gpu_name(), str)


def test_gpu_name_without_device(machine):
    machine("cupy-only")
    assert _backend.gpu_name() is None


def test_exception_hierarchy():
    assert issubclass(BackendUnavailableError, VisionCutsError)
    assert issubclass(BackendUnavailableError, RuntimeError)
    assert not issubclass(BackendUnavailableError, ValueError)
    assert issubclass(NonSubmodularError, VisionCutsError)
    assert issubclass(NonSubmodularError, ValueError)
    err = NonSubmodularError("msg", count=3, first=(1, 2, 3))
    assert (err.count, err.first, str(err)) == (3, (1, 2, 3), "msg")
    assert (NonSubmodularError("m").count, NonSubmodularError("m").first) == (0, ())


def test_auto_prefer_cpu(machine, monkeypatch):
    machine("gpu")
    assert resolve_backend("auto", prefer_cpu=True) == "cpu"
    assert resolve_backend("auto", FakeCupyArray(), prefer_cpu=True) == "gpu"
    assert resolve_backend("gpu", prefer_cpu=True) == "gpu"  # explicit arguments win
    monkeypatch.setenv("VISION_CUTS_BACKEND", "gpu")
    assert resolve_backend("auto", prefer_cpu=True) == "gpu"


def test_maximum_flow_auto_by_graph_size(machine, monkeypatch):
    """Under "auto" a device runs only graphs of _GPU_MIN_ARCS arcs or more."""
    import vision_cuts._flow_graph_gpu as flow_gpu
    from vision_cuts import flow_graph, graph, maximum_flow

    calls = []

    def fake_gpu(indptr, heads, reverse, capacity, source, sink, **kw):
        calls.append(heads.shape[0])
        from vision_cuts._flow_graph_cpu import maximum_flow_cpu

        return maximum_flow_cpu(indptr, heads, reverse, capacity, source, sink)

    monkeypatch.setattr(flow_gpu, "maximum_flow_gpu", fake_gpu)
    machine("gpu")
    g = flow_graph([0, 0, 1, 2], [1, 2, 3, 3], [3, 2, 2, 3])
    assert maximum_flow(g, 0, 3).value == 4 and calls == []
    assert maximum_flow(g, 0, 3, backend="gpu").value == 4 and calls == [8]
    monkeypatch.setattr(graph, "_GPU_MIN_ARCS", 8)
    assert maximum_flow(g, 0, 3).value == 4 and calls == [8, 8]
