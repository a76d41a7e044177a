"""GPU maximum-cardinality bipartite matching: APFB with GPUBFS-WR (CuPy).

The graph is a CSR adjacency of the "left" side (``ptr``, ``idx``, int32, on the
device); the kernels are in ``kernels/bipartite_matching.cu``:

* ``mm_greedy``: the cheap initial matching, one pass in which every left vertex takes
  its first free right neighbour by ``atomicCAS`` (a maximal matching).
* one phase: ``mm_phase_init`` makes every free left vertex the root of a search tree;
  the search (GPUBFS-WR: roots tracked, a tree stops growing once it found a free right
  vertex) runs level by level, alternating ``mm_bfs_small`` (one block, many levels in
  one launch while the frontier holds at most ``SMALL_MAX`` vertices: the long thin
  tails of the search cost a ``__syncthreads`` a level, not a launch) and
  ``mm_bfs_wide`` (one level over any frontier); ``mm_alternate`` flips the one
  augmenting path each successful tree claimed.
* APFB (the default) runs every search to the end; APsB stops after the first level
  that found a path (shortest augmenting paths, as Hopcroft-Karp). Phases repeat until
  one finds no path: its search ran to the end without early exits, so no augmenting
  path is left and the matching is maximum.

The host reads an 8-int state back once per ``_ROUNDS`` pairs of search launches;
the launches of a finished search return at once.

References
----------
M. Deveci, K. Kaya, B. Uçar, Ü. V. Çatalyürek, "GPU accelerated maximum cardinality
matching algorithms for bipartite graphs", Euro-Par 2013, LNCS 8097, pp. 850-861.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._kernels import get_kernel, get_module, sm_count
from .exceptions import DeviceMemoryError

__all__ = ["ALGORITHMS", "maximum_bipartite_matching_gpu"]

ALGORITHMS = ("apfb", "apsb")
DEFAULT_ALGORITHM = "apfb"  # measured against "apsb" by benchmarks/bench_matching.py
_SMALL_MAX = 2048  # frontiers up to this size are searched by the one-block kernel
_SMALL_THREADS = 1024
_THREADS = 256
_WIDE_BLOCKS_PER_SM = 8
_ROUNDS = 4  # (small, wide) launch pairs queued between two reads of the state


def _check_fits(nl: int, nr: int, nnz: int, host_inputs: bool) -> None:
    import cupy

    need = 4 * (6 * nl + 3 * nr) + (4 * (nl + 1 + nnz) if host_inputs else 0)
    free, total = cupy.cuda.runtime.memGetInfo()
    free += cupy.get_default_memory_pool().free_bytes()
    if need > free:
        raise DeviceMemoryError(
            f"a bipartite graph with {nl} x {nr} vertices and {nnz} edges needs about "
            f"{need / 2**20:.1f} MiB of device memory for the GPU matching, but only "
            f"{free / 2**20:.1f} MiB of {total / 2**20:.1f} MiB are free; use "
            "backend='cpu'"
        )


def maximum_bipartite_matching_gpu(
    ptr: Any,
    idx: Any,
    nl: int,
    nr: int,
    *,
    algorithm: str | None = None,
    host_inputs: bool = False,
) -> tuple[Any, Any]:
    """Maximum matching of a bipartite graph given as a device CSR adjacency.

    Parameters
    ----------
    ptr, idx : cupy.ndarray of int32, shapes (nl + 1,) and (nnz,)
        Right neighbours ``idx[ptr[u]:ptr[u + 1]]`` of every left vertex ``u``;
        validated by the caller (``0 <= ptr <= nnz``, ``0 <= idx < nr``).
    nl, nr : int
        Vertices on the left and on the right.
    algorithm : {"apfb", "apsb"}, optional
        Full searches (APFB) or shortest augmenting paths only (APsB); default
        ``DEFAULT_ALGORITHM``.
    host_inputs : bool
        The inputs were uploaded by the caller (counted in the memory check only).

    Returns
    -------
    lmatch, rmatch : cupy.ndarray of int32, shapes (nl,) and (nr,)
        Partner of each left / right vertex, -1 when unmatched.
    """
    import cupy

    if algorithm is None:
        algorithm = DEFAULT_ALGORITHM
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    nnz = int(idx.size)
    _check_fits(nl, nr, nnz, host_inputs)
    lmatch = cupy.full(nl, -1, dtype=cupy.int32)
    rmatch = cupy.full(nr, -1, dtype=cupy.int32)
    if nl == 0 or nr == 0 or nnz == 0:
        return lmatch, rmatch

    mod = get_module("bipartite_matching.cu", {"SMALL_MAX": _SMALL_MAX})
    k_greedy = get_kernel(mod, "mm_greedy")
    k_init = get_kernel(mod, "mm_phase_init")
    k_small = get_kernel(mod, "mm_bfs_small")
    k_wide = get_kernel(mod, "mm_bfs_wide")
    k_alt = get_kernel(mod, "mm_alternate")

    sms = sm_count()

    def blocks(n: int) -> tuple[int]:
        return (max(1, min(-(-n // _THREADS), sms * 32)),)

    bfs = cupy.empty(nl, dtype=cupy.int32)
    root = cupy.empty(nl, dtype=cupy.int32)
    claim = cupy.empty(nl, dtype=cupy.int32)
    q0 = cupy.empty(nl, dtype=cupy.int32)
    q1 = cupy.empty(nl, dtype=cupy.int32)
    pred = cupy.empty(nr, dtype=cupy.int32)
    st = cupy.zeros(8, dtype=cupy.int32)
    host = cupy.cuda.alloc_pinned_memory(st.nbytes)
    host_st = np.frombuffer(host, dtype=np.int32, count=8)
    stream = cupy.cuda.get_current_stream()
    stop = np.int32(1 if algorithm == "apsb" else 0)
    nl32, nr32 = np.int32(nl), np.int32(nr)
    wide = (sms * _WIDE_BLOCKS_PER_SM,)
    search_args = (ptr, idx, rmatch, bfs, root, pred, claim, q0, q1, st, stop)

    k_greedy(blocks(nl), (_THREADS,), (ptr, idx, lmatch, rmatch, nl32))
    for _phase in range(nl + 1):
        st.data.memset_async(0, st.nbytes)
        k_init(blocks(nl), (_THREADS,), (lmatch, bfs, root, claim, q0, st, nl32))
        for _check in range(nl + 2):
            for _ in range(_ROUNDS):
                k_small((1,), (_SMALL_THREADS,), search_args)
                k_wide(wide, (_THREADS,), search_args)
            cupy.cuda.runtime.memcpyAsync(
                host_st.ctypes.data,
                st.data.ptr,
                st.nbytes,
                cupy.cuda.runtime.memcpyDeviceToHost,
                stream.ptr,
            )
            stream.synchronize()
            level = int(host_st[0])
            if host_st[3] or host_st[4 + (level & 1)] == 0:
                break
        else:  # pragma: no cover - a search has at most nl + 1 levels
            raise RuntimeError("GPU matching: the search did not end")
        if not host_st[1]:
            break
        k_alt(blocks(nr), (_THREADS,), (lmatch, rmatch, pred, nr32))
    else:  # pragma: no cover - every phase but the last adds at least one pair
        raise RuntimeError("GPU matching: too many phases")
    return lmatch, rmatch
