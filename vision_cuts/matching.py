"""Maximum-cardinality bipartite matching (SciPy's contract) on the GPU or the CPU."""

from __future__ import annotations

from typing import Any

from ._backend import is_cupy_array, resolve_backend

__all__ = ["maximum_bipartite_matching"]

PERM_TYPES = ("row", "column")
_INT32_MAX = 2**31 - 1


def _is_cupy_sparse(graph: Any) -> bool:
    return type(graph).__module__.startswith("cupyx.scipy.sparse")


def _adjacency(graph: Any) -> tuple[Any, Any, int, int, bool]:
    """``(ptr, idx, nl, nr, rows_left)`` of a validated sparse matrix, in its own
    array module: CSR gives the rows' adjacency (left = rows), CSC the columns'
    (left = columns); other formats are converted to the one of the shorter pointer
    array (CSR where rows are fewer, else CSC: a matrix of 2**31 - 2 rows and one
    column needs 16 GB as CSR and 16 bytes as CSC)."""
    fmt = graph.format
    if fmt in ("bsr", "dia"):
        # their stored entries are not the edges: BSR stores the zeros that pad its
        # blocks, and a conversion from DIA drops explicit zeros
        raise TypeError(
            f"graph must be a sparse matrix in CSR, CSC, COO, LIL or DOK format, got "
            f"{fmt.upper()}: convert it to CSR first, with the edges as stored entries"
        )
    n_rows, n_cols = (int(s) for s in graph.shape)
    if fmt == "coo":  # tocsr() writes through unchecked row and column indices
        for name, ind, size in (("row", graph.row, n_rows), ("col", graph.col, n_cols)):
            if ind.size and (int(ind.min()) < 0 or int(ind.max()) >= size):
                bad = int(((ind < 0) | (ind >= size)).argmax())
                raise ValueError(
                    f"graph has out-of-range index arrays: its COO {name} index "
                    f"{int(ind[bad])} at entry {bad} lies outside [0, {size})"
                )
    if fmt not in ("csr", "csc"):
        fmt = "csr" if n_rows <= n_cols else "csc"
        graph = graph.tocsr() if fmt == "csr" else graph.tocsc()
    if fmt == "csr":
        return graph.indptr, graph.indices, n_rows, n_cols, True
    return graph.indptr, graph.indices, n_cols, n_rows, False


def _check_structure(ptr: Any, idx: Any, nl: int, nr: int) -> None:
    """Index arrays within bounds (the kernels index with them unchecked)."""
    nnz = int(idx.size)
    if ptr.shape != (nl + 1,):
        raise ValueError(
            f"graph has an index pointer array of shape {tuple(ptr.shape)}, expected "
            f"({nl + 1},)"
        )
    if nnz > _INT32_MAX:
        raise ValueError(
            f"graph must have at most {_INT32_MAX} stored entries, got {nnz}"
        )
    lo, hi = int(ptr.min()), int(ptr.max())
    if int(ptr[0]) != 0 or int(ptr[-1]) != nnz or lo < 0 or hi > nnz:
        raise ValueError(
            f"graph has an invalid index pointer array: it must run from 0 to the "
            f"number of stored entries ({nnz}), got values in "
            f"[{lo}, {hi}] starting at {int(ptr[0])}"
        )
    if nl and bool((ptr[1:] < ptr[:-1]).any()):
        down = int((ptr[1:] < ptr[:-1]).argmax())
        raise ValueError(
            f"graph has an invalid index pointer array: it must be non-decreasing, got "
            f"{int(ptr[down])} then {int(ptr[down + 1])} at positions {down} and "
            f"{down + 1}"
        )
    if nnz and (int(idx.min()) < 0 or int(idx.max()) >= nr):
        raise ValueError(
            f"graph has stored indices outside [0, {nr}): got values in "
            f"[{int(idx.min())}, {int(idx.max())}]"
        )


def maximum_bipartite_matching(
    graph: Any, perm_type: str = "row", *, backend: str = "auto"
) -> Any:
    """Maximum-cardinality matching of a bipartite graph, with SciPy's contract.

    Parameters
    ----------
    graph : sparse matrix or array, shape (n_rows, n_cols)
        Biadjacency matrix: rows are one side of the graph, columns the other, and
        every *stored* entry is an edge (explicit zeros included), as in
        :func:`scipy.sparse.csgraph.maximum_bipartite_matching`. Any SciPy sparse
        format but BSR and DIA (CSR and CSC are used as they are, COO, LIL and DOK
        converted to CSR), or a ``cupyx.scipy.sparse`` matrix.
    perm_type : {"row", "column"}
        ``"row"``: the result has length ``n_cols`` and element ``j`` is the row
        matched to column ``j``; ``"column"``: length ``n_rows``, the column matched
        to each row.
    backend : {"auto", "cpu", "gpu"}
        Where to run: ``"gpu"`` needs CuPy and a CUDA device and never falls back;
        ``"auto"`` uses the GPU for CuPy inputs or when a device is present, else the
        CPU (``VISION_CUTS_BACKEND`` overrides it).

    Returns
    -------
    perm : ndarray of int32, shape (n_cols,) or (n_rows,)
        The matching, ``-1`` for unmatched vertices. NumPy for SciPy input, CuPy for
        ``cupyx.scipy.sparse`` input, whichever backend ran. Its cardinality
        ``(perm >= 0).sum()`` equals SciPy's; the pairs themselves may differ where
        several maximum matchings exist.

    Raises
    ------
    TypeError
        ``graph`` is not a sparse matrix or array (a dense array is rejected, as by
        SciPy: wrap it in ``scipy.sparse.csr_array``), or is in BSR or DIA format.
    ValueError
        ``graph`` is not 2-D, has more than ``2**31 - 1`` stored entries, has
        ``2**31 - 1`` or more rows or columns, or has out-of-range index arrays;
        ``perm_type`` is not ``"row"`` or ``"column"`` (SciPy silently treats any
        value but ``"column"`` as ``"row"``).
    BackendUnavailableError
        ``backend="gpu"`` without a usable device.
    DeviceMemoryError
        The graph does not fit in the free memory of the GPU.

    See Also
    --------
    scipy.sparse.csgraph.maximum_bipartite_matching : the contract followed here.

    Notes
    -----
    GPU: APFB with the GPUBFS-WR search of Deveci et al. (2013) from a greedy
    initial matching; the augmenting paths of different search trees are made
    vertex-disjoint by atomic claims, so they are flipped without locks. CPU:
    Pothen-Fan with lookahead and fairness (Duff, Kaya, Uçar 2011), compiled by numba;
    SciPy's Hopcroft-Karp, which this replaces, takes time exponential in the depth of
    layered graphs (its depth-first phase never marks dead ends).

    References
    ----------
    M. Deveci, K. Kaya, B. Uçar, Ü. V. Çatalyürek, "GPU accelerated maximum
    cardinality matching algorithms for bipartite graphs", Euro-Par 2013.
    I. S. Duff, K. Kaya and B. Uçar, "Design, implementation, and analysis of maximum
    transversal algorithms", ACM TOMS 38(2), 2011.

    Examples
    --------
    >>> from scipy.sparse import csr_array
    >>> from vision_cuts import maximum_bipartite_matching
    >>> graph = csr_array([[0, 0, 1], [1, 1, 0], [0, 1, 0]])
    >>> maximum_bipartite_matching(graph, perm_type="column", backend="cpu")
    array([2, 0, 1], dtype=int32)
    >>> maximum_bipartite_matching(graph, perm_type="row", backend="cpu")
    array([1, 2, 0], dtype=int32)
    """
    cupy_in = _is_cupy_sparse(graph)
    if not cupy_in:
        import scipy.sparse

        if not scipy.sparse.issparse(graph):
            kind = type(graph).__name__
            raise TypeError(
                "graph must be a sparse matrix or array (scipy.sparse or "
                f"cupyx.scipy.sparse), got {kind}; wrap a dense biadjacency matrix "
                "in scipy.sparse.csr_array"
            )
    if not isinstance(perm_type, str) or perm_type not in PERM_TYPES:
        raise ValueError(f"perm_type must be one of {PERM_TYPES}, got {perm_type!r}")
    shape = tuple(int(s) for s in graph.shape)
    if len(shape) != 2:
        raise ValueError(f"graph must be a 2-D biadjacency matrix, got shape {shape}")
    if max(shape) > _INT32_MAX - 1:
        raise ValueError(
            f"graph must have fewer than {_INT32_MAX} rows and columns, got shape "
            f"{shape}"
        )
    ptr, idx, nl, nr, rows_left = _adjacency(graph)
    which = resolve_backend(backend, idx if cupy_in else None)
    if which == "cpu":
        from ._backend import to_numpy
        from ._matching_cpu import maximum_bipartite_matching_cpu

        ptr_h, idx_h = to_numpy(ptr), to_numpy(idx)
        _check_structure(ptr_h, idx_h, nl, nr)
        lmatch, rmatch = maximum_bipartite_matching_cpu(ptr_h, idx_h, nl, nr)
    else:
        import cupy

        from ._matching_gpu import maximum_bipartite_matching_gpu

        host_inputs = not is_cupy_array(idx)
        ptr_d, idx_d = cupy.asarray(ptr), cupy.asarray(idx)
        _check_structure(ptr_d, idx_d, nl, nr)  # on the device: a few reductions
        lmatch, rmatch = maximum_bipartite_matching_gpu(
            ptr_d.astype(cupy.int32, copy=False),
            idx_d.astype(cupy.int32, copy=False),
            nl,
            nr,
            host_inputs=host_inputs,
        )
    # left = rows: lmatch is the column of each row ("column"), rmatch the row of
    # each column ("row"); left = columns swaps them
    want_left = (perm_type == "column") == rows_left
    out = lmatch if want_left else rmatch
    if cupy_in and not is_cupy_array(out):
        import cupy

        return cupy.asarray(out)
    if not cupy_in and is_cupy_array(out):
        return out.get()
    return out
