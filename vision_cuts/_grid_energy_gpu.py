"""The symmetric-weight grid energy's capacity arrays from CuPy inputs, in one kernel.

The device twin of :mod:`vision_cuts._grid_energy_cpu`: ``ge_potts``
(``kernels/grid_energy.cu``) reads the unary costs and the weights in their own dtype
(int32 or int64), writes the int32 terminal capacities and every arc plane once, and
gathers what the checks of :func:`vision_cuts.grid.grid_energy` need (the energy's
constant, the largest weight, the negative weights and the first of them, terminal
capacities beyond int32) in one small array read back once. The array expression it
replaces took about twenty launches, int64 copies of the inputs and a host read a
direction (H200: 7.2 ms at 2 MP, 24.4 ms at 8 MP, 8-connected).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._kernels import get_kernel, get_module, sm_count

#: the input dtypes the kernel reads as they are (others take the array expression)
DTYPES = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}
_THREADS = 256
_NONE = 2**63 - 1


def potts_capacities(u: Any, w: Any, planes: int) -> tuple:
    """``u`` (*grid, 2) and ``w`` (D, *grid), CuPy int32 / int64 arrays, ``planes``
    = 2 D. Returns ``(source, sink, edges, constant, checks)`` as
    :func:`vision_cuts._grid_energy_cpu.potts_capacities` does (device arrays)."""
    import cupy

    grid = tuple(u.shape[:-1])
    n = math.prod(grid)
    nz, ny, nx = (1, *grid) if len(grid) == 2 else grid
    u = cupy.ascontiguousarray(u)
    w = cupy.ascontiguousarray(w)
    big = planes * n > 2**31 - 1
    defines = {
        "NDIM": len(grid),
        "VC_PLANES": planes,
        "IDX_T": "long long" if big else "int",
        "U_T": DTYPES[u.dtype],
        "W_T": DTYPES[w.dtype],
        "GE_THREADS": _THREADS,
    }
    kernel = get_kernel(get_module("grid_energy.cu", defines), "ge_potts")
    s = cupy.empty(grid, dtype=cupy.int32)
    t = cupy.empty(grid, dtype=cupy.int32)
    edges = cupy.empty((planes, *grid), dtype=cupy.int32)
    acc = cupy.array([0, 0, 0, _NONE, _NONE, _NONE, 0], dtype=cupy.int64)
    blocks = max(1, min(-(-n // _THREADS), 8 * sm_count()))
    idx = np.int64 if big else np.int32
    kernel(
        (blocks,),
        (_THREADS,),
        (u, w, s, t, edges, acc, np.int32(nx), np.int32(ny), np.int32(nz), idx(n)),
    )
    lower, wmax, nneg, first, bad_s, bad_t, upper = (int(v) for v in acc.get())
    constant = (upper << 32) + lower  # (the kernel's exact split of the sum)

    checks = {
        "wmax": wmax,
        "nneg": nneg,
        "first_neg": (first // n, first % n) if nneg else None,
        "bad_source": None if bad_s == _NONE else bad_s,
        "bad_sink": None if bad_t == _NONE else bad_t,
    }
    return s, t, edges, constant, checks
