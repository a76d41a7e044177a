"""Loading of the CUDA kernels in ``vision_cuts/kernels`` through CuPy.

This module and the ``_*_gpu.py`` modules are the only places that import CuPy, and only
inside functions. Compiled modules are memoised per (file, defines, options, device);
CuPy's own on-disk cache handles recompilation when a source file changes (set
``CUPY_CACHE_SAVE_CUDA_SOURCE=1`` and ``CUPY_DUMP_CUDA_SOURCE_ON_ERROR=1`` to debug a
kernel).
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from typing import Any

__all__ = [
    "capture_graph",
    "get_kernel",
    "get_module",
    "kernel_files",
    "kernel_names",
    "kernel_source",
    "sm_count",
]

_PACKAGE = "vision_cuts.kernels"


def kernel_files() -> list[str]:
    """Names of the ``.cu`` files shipped with the package."""
    root = importlib.resources.files(_PACKAGE)
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".cu"))


@functools.cache
def kernel_source(name: str) -> str:
    """Source text of ``kernels/<name>``, with ``#include "x.cuh"`` inlined."""
    root = importlib.resources.files(_PACKAGE)
    path = root / name
    if not path.is_file():
        raise FileNotFoundError(f"kernel file {name!r} is not in {_PACKAGE}")
    text = path.read_text(encoding="utf-8")

    def inline(match: re.Match[str]) -> str:
        return kernel_source(match.group(1))

    return re.sub(r'^\s*#include\s+"([^"]+\.cuh)"\s*$', inline, text, flags=re.M)


def kernel_names(name: str) -> list[str]:
    """Names of the ``extern "C" __global__`` functions defined in a kernel file."""
    src = kernel_source(name)
    # __launch_bounds__(...) may stand before or after the return type
    bounds = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    return re.findall(
        r'extern\s+"C"\s+__global__\s+' + bounds + r"void\s+" + bounds + r"(\w+)\s*\(",
        src,
    )


@functools.cache
def _module(name: str, defines: tuple, options: tuple, device: int) -> Any:
    import cupy

    head = "".join(f"#define {k} {v}\n" for k, v in defines)
    src = head + kernel_source(name)
    try:
        with cupy.cuda.Device(device):
            module = cupy.RawModule(code=src, options=options)
            module.compile()
    except Exception as exc:  # re-raise with the file and defines attached
        raise RuntimeError(
            f"compiling kernels/{name} with defines {dict(defines)} and options "
            f"{options} failed: {exc}"
        ) from exc
    return module


def get_module(name: str, defines: dict | tuple = (), options: tuple = ()) -> Any:
    """Compiled ``cupy.RawModule`` for ``kernels/<name>`` on the current device."""
    import cupy

    if isinstance(defines, dict):
        defines = tuple(sorted(defines.items()))
    opts = ("-std=c++17",) + tuple(options)
    return _module(name, tuple(defines), opts, cupy.cuda.Device().id)


_FUNCTIONS: dict = {}


def get_kernel(module: Any, func: str) -> Any:
    """Look up a kernel function of a compiled module (once: the pipelines launch
    dozens of kernels per call)."""
    key = (id(module), func)
    hit = _FUNCTIONS.get(key)
    if hit is None or hit[0] is not module:
        hit = _FUNCTIONS[key] = (module, module.get_function(func))
    return hit[1]


@functools.cache
def _sm_count(device: int) -> int:
    import cupy

    return int(cupy.cuda.Device(device).attributes["MultiProcessorCount"])


def sm_count() -> int:
    """Streaming multiprocessors of the current device (read once per device:
    ``Device().attributes`` queries every attribute on each call)."""
    import cupy

    return _sm_count(cupy.cuda.Device().id)


def capture_graph(stream: Any, fn) -> Any:
    """CUDA graph of the launches ``fn()`` makes on ``stream`` (which must be the
    current stream while ``fn`` runs); None if unsupported."""
    try:
        stream.begin_capture()
    except Exception:  # no graph support in this CuPy / driver
        return None
    try:
        fn()
    finally:
        graph = stream.end_capture()
    return graph
