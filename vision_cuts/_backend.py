"""Backend selection: which device runs a call, and array-kind helpers.

Nothing here imports CuPy at module level, so ``import vision_cuts`` works where CuPy is
absent. The probes are cached for the life of the process.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from .exceptions import BackendUnavailableError

__all__ = [
    "BACKENDS",
    "describe_backend",
    "gpu_available",
    "gpu_name",
    "has_cupy",
    "is_cupy_array",
    "machine_description",
    "resolve_backend",
    "to_numpy",
]

BACKENDS = ("auto", "cpu", "gpu")
_ENV = "VISION_CUTS_BACKEND"


@functools.cache
def has_cupy() -> bool:
    """Return True when CuPy can be imported."""
    try:
        import cupy  # noqa: F401
    except Exception:  # ImportError, or a broken CUDA install raising on import
        return False
    return True


@functools.cache
def gpu_available() -> bool:
    """Return True when CuPy imports and at least one CUDA device is usable."""
    if not has_cupy():
        return False
    try:
        import cupy

        return bool(cupy.cuda.is_available())
    except Exception:
        return False


def gpu_name() -> str | None:
    """Name of the current CUDA device, or None without one."""
    if not gpu_available():
        return None
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def machine_description() -> str:
    """One line naming this machine's CPU, core count and Python (for reports)."""
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical cores, Python {platform.python_version()}"


def describe_backend(backend: str = "auto") -> str:
    """Which device a call with ``backend`` runs on, in words (for status lines).

    ``"GPU: <device name>"`` or ``"CPU: <model>, <n> logical cores"``; raises like
    :func:`resolve_backend` (``BackendUnavailableError`` for ``"gpu"`` without a
    device).
    """
    if resolve_backend(backend) == "gpu":
        return f"GPU: {gpu_name()}"
    return "CPU: " + machine_description().rsplit(", Python", 1)[0]


def is_cupy_array(x: Any) -> bool:
    """Return True for a CuPy ndarray, without importing CuPy."""
    return type(x).__module__.split(".")[0] == "cupy" and hasattr(
        x, "__cuda_array_interface__"
    )


def to_numpy(x: Any) -> np.ndarray:
    """Return ``x`` as a NumPy array (copying from the device for CuPy arrays)."""
    if is_cupy_array(x):
        return x.get()
    return np.asarray(x)


def _check_name(backend: Any, where: str) -> str:
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"{where} must be one of {BACKENDS}, got {backend!r}")
    return backend


def resolve_backend(backend: str, *arrays: Any, prefer_cpu: bool = False) -> str:
    """Turn a ``backend`` argument into ``"cpu"`` or ``"gpu"``.

    Parameters
    ----------
    backend : {"auto", "cpu", "gpu"}
        ``"gpu"`` requires a usable device and raises otherwise; ``"auto"`` picks the
        GPU when any of ``arrays`` is a CuPy array or a device is present, else the
        CPU. The environment variable ``VISION_CUTS_BACKEND`` overrides ``"auto"``.
    *arrays
        The inputs of the call, inspected for CuPy arrays.
    prefer_cpu : bool
        Under ``"auto"``, the CPU unless an input is a CuPy array: for calls whose
        CPU solver measures faster on the inputs at hand.

    Raises
    ------
    BackendUnavailableError
        ``"gpu"`` was requested (directly or through the environment) without a device.
    ValueError
        ``backend`` or ``VISION_CUTS_BACKEND`` is not one of the known names.
    """
    backend = _check_name(backend, "backend")
    asked = f"backend={backend!r}"
    if backend == "auto":
        env = os.environ.get(_ENV, "").strip().lower()
        if env:
            backend = _check_name(env, f"environment variable {_ENV}")
            asked = f"{_ENV}={env!r} (backend='auto')"
    if backend == "auto":
        if any(is_cupy_array(a) for a in arrays):
            return "gpu"
        return "gpu" if not prefer_cpu and gpu_available() else "cpu"
    if backend == "gpu" and not gpu_available():
        why = "CuPy is not installed" if not has_cupy() else "no CUDA device is usable"
        raise BackendUnavailableError(
            f"{asked} asks for the GPU but {why}; install the 'gpu' extra "
            "(cupy-cuda12x or cupy-cuda13x) on a machine with an NVIDIA GPU, or use "
            "backend='cpu'"
        )
    return backend
