"""maximum_bipartite_matching: SciPy's contract, cardinality against oracles.

Oracles: SciPy's ``maximum_bipartite_matching`` (on graphs where its Hopcroft-Karp is
fast), SciPy's ``maximum_flow`` on the unit-capacity network source -> rows -> columns
-> sink, brute force over edge subsets for tiny graphs, and known perfect matchings.
Every result is also checked to be a matching: each pair an edge, no vertex twice.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_bipartite_matching as scipy_mbm
from scipy.sparse.csgraph import maximum_flow

from vision_cuts import BackendUnavailableError, maximum_bipartite_matching
from vision_cuts._backend import gpu_available
from vision_cuts.datasets import synthetic

# ------------------------------------------------------------------- oracles


def check_matching(graph, perm, perm_type="row") -> int:
    """Assert ``perm`` is a valid matching of ``graph``; return its cardinality."""
    graph = sp.csr_array(graph)
    perm = np.asarray(perm)
    n_rows, n_cols = graph.shape
    assert perm.shape == ((n_cols,) if perm_type == "row" else (n_rows,))
    assert perm.dtype == np.int32
    assert perm.min(initial=-1) >= -1
    assert perm.max(initial=-1) < (n_rows if perm_type == "row" else n_cols)
    idx = np.flatnonzero(perm >= 0)
    other = perm[idx]
    assert np.unique(other).size == idx.size, "a vertex is matched twice"
    rows, cols = (other, idx) if perm_type == "row" else (idx, other)
    dense_edges = set(zip(*graph.nonzero(), strict=True)) | {
        (r, c)
        for r in range(n_rows)
        for c in graph.indices[graph.indptr[r] : graph.indptr[r + 1]]
    }
    for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
        assert (r, c) in dense_edges, f"({r}, {c}) is not an edge"
    return int(idx.size)


def check_matching_fast(graph, perm) -> int:
    """Vectorised ``check_matching`` for perm_type="row" on big graphs."""
    coo = sp.coo_array(graph)
    perm = np.asarray(perm)
    cols = np.flatnonzero(perm >= 0)
    rows = perm[cols].astype(np.int64)
    assert np.unique(rows).size == cols.size, "a row is matched twice"
    keys = coo.row.astype(np.int64) * graph.shape[1] + coo.col
    assert np.isin(rows * graph.shape[1] + cols, keys).all(), "a pair is not an edge"
    return int(cols.size)


def maxflow_cardinality(graph) -> int:
    graph = sp.coo_array(graph)
    n_r, n_c = graph.shape
    s, t = n_r + n_c, n_r + n_c + 1
    tails = np.concatenate([np.full(n_r, s), graph.row, n_r + np.arange(n_c)])
    heads = np.concatenate([np.arange(n_r), n_r + graph.col, np.full(n_c, t)])
    net = sp.csr_array(
        (np.ones(tails.size, np.int32), (tails, heads)), shape=(t + 1, t + 1)
    )
    net.data[:] = 1
    return int(maximum_flow(net, s, t).flow_value)


def brute_force_cardinality(graph) -> int:
    coo = sp.coo_array(graph)
    edges = list(set(zip(coo.row.tolist(), coo.col.tolist(), strict=True)))
    for k in range(min(graph.shape), 0, -1):
        for sub in itertools.combinations(edges, k):
            rs, cs = zip(*sub, strict=True)
            if len(set(rs)) == k and len(set(cs)) == k:
                return k
    return 0


# ---------------------------------------------------------------- generators


def random_graph(rng, n_rows, n_cols, density, fmt="csr"):
    return sp.random_array((n_rows, n_cols), density=density, rng=rng, format=fmt)


def perfect_graph(rng, n, extra):
    """A hidden perfect matching (random permutation) plus random extra edges."""
    perm = rng.permutation(n)
    r = np.concatenate([np.arange(n), rng.integers(0, n, extra)])
    c = np.concatenate([perm, rng.integers(0, n, extra)])
    return sp.csr_array((np.ones(r.size), (r, c)), shape=(n, n))


def run(graph, perm_type, backend):
    return maximum_bipartite_matching(graph, perm_type, backend=backend)


# ------------------------------------------------------------------- tests


def test_scipy_docstring_examples(backend):
    # SciPy's examples; several maximum matchings exist, so check size and validity
    graph = sp.csr_array([[0, 0, 1], [1, 1, 0]])
    col = run(graph, "column", backend)
    assert col[0] == 2 and col[1] in (0, 1)
    assert check_matching(graph, run(graph, "row", backend)) == 2
    # explicit zeros are edges
    graph = sp.csr_array(([0, 0, 0], [2, 0, 1], [0, 1, 3]))
    assert check_matching(graph, run(graph, "column", backend), "column") == 2
    assert check_matching(graph, run(graph, "row", backend)) == 2
    # a unique maximum matching is reproduced exactly
    graph = sp.csr_array([[0, 0, 1], [1, 1, 0], [0, 1, 0]])
    assert run(graph, "column", backend).tolist() == [2, 0, 1]
    assert run(graph, "row", backend).tolist() == [1, 2, 0]
    # square with a perfect matching: a permutation putting entries on the diagonal
    a = [[0, 1, 2, 0], [1, 0, 0, 1], [2, 0, 0, 3], [0, 1, 3, 0]]
    perm = run(sp.csr_array(a), "row", backend)
    assert (sp.csr_array(a)[perm].diagonal() != 0).all()


@pytest.mark.parametrize("shape", [(2, 0), (0, 3), (0, 0), (3, 4)])
def test_empty_graphs(backend, shape):
    graph = sp.csr_array(shape)
    assert run(graph, "column", backend).tolist() == [-1] * shape[0]
    assert run(graph, "row", backend).tolist() == [-1] * shape[1]
    assert run(graph, "row", backend).dtype == np.int32


def test_random_graphs_match_scipy(backend, rng):
    """300 random graphs (square and rectangular, sparse to dense, every format, empty
    rows and columns included) on both perm types: cardinality equals SciPy's."""
    formats = ["csr", "csc", "coo", "lil", "dok"]
    for trial in range(300):
        n_rows = int(rng.integers(1, 60))
        n_cols = int(rng.integers(1, 60))
        density = float(rng.choice([0.01, 0.03, 0.08, 0.2, 0.5]))
        graph = random_graph(rng, n_rows, n_cols, density, formats[trial % 5])
        want = int((scipy_mbm(sp.csr_array(graph), "row") >= 0).sum())
        for perm_type in ("row", "column"):
            perm = run(graph, perm_type, backend)
            assert check_matching(graph, perm, perm_type) == want, (trial, perm_type)


def test_brute_force_tiny(backend, rng):
    for _ in range(40):
        graph = random_graph(rng, int(rng.integers(1, 5)), int(rng.integers(1, 5)), 0.5)
        perm = run(graph, "row", backend)
        assert check_matching(graph, perm) == brute_force_cardinality(graph)


def test_against_maxflow(backend, rng):
    for n_rows, n_cols, density in [
        (500, 300, 0.004),
        (300, 500, 0.01),
        (1000, 1000, 0.002),
        (2000, 1500, 0.0008),
    ]:
        graph = random_graph(rng, n_rows, n_cols, density)
        perm = run(graph, "row", backend)
        assert check_matching_fast(graph, perm) == maxflow_cardinality(graph)


def test_perfect_matching_instances(backend, rng):
    for n, extra in [(1, 0), (7, 3), (100, 0), (1000, 2000), (5000, 5000)]:
        graph = perfect_graph(rng, n, extra)
        for perm_type in ("row", "column"):
            perm = np.asarray(run(graph, perm_type, backend))
            assert (perm >= 0).all()
            assert np.array_equal(np.sort(perm), np.arange(n))
        assert check_matching_fast(graph, run(graph, "row", backend)) == n


def test_layered_worst_cases(backend):
    """SciPy's Hopcroft-Karp takes about 2**depth steps on the ladder (too slow at
    depth 40); the chain leaves one augmenting path through every vertex."""
    for depth in (1, 2, 5, 12, 40):
        graph = synthetic.ladder_bipartite_graph(depth)
        assert check_matching(graph, run(graph, "row", backend)) == graph.shape[0]
    assert (
        check_matching(
            synthetic.ladder_bipartite_graph(12).tocsc(),
            run(synthetic.ladder_bipartite_graph(12).tocsc(), "column", backend),
            "column",
        )
        == 37
    )
    blocks = sp.block_diag([synthetic.ladder_bipartite_graph(14)] * 50, format="csr")
    assert check_matching_fast(blocks, run(blocks, "row", backend)) == blocks.shape[0]
    for n in (1, 10, 5000):
        graph = synthetic.chain_bipartite_graph(n)
        assert check_matching_fast(graph, run(graph, "row", backend)) == n + 1


def test_grid_graphs(backend, rng):
    for side, holes in [(8, 0.0), (9, 0.0), (30, 0.1), (60, 0.2)]:
        graph = synthetic.grid_bipartite_graph(side, rng, holes)
        want = maxflow_cardinality(graph)
        assert check_matching_fast(graph, run(graph, "row", backend)) == want
        assert check_matching(graph, run(graph, "column", backend), "column") == want


def test_duplicate_entries_and_int64_indices(backend):
    # a non-canonical CSR (duplicates, unsorted) and int64 index arrays
    indptr = np.array([0, 3, 5, 6], dtype=np.int64)
    indices = np.array([1, 1, 0, 2, 2, 2], dtype=np.int64)
    graph = sp.csr_array((np.ones(6), indices, indptr), shape=(3, 3))
    assert check_matching(graph, run(graph, "row", backend)) == 2


def test_cpu_agrees_with_scipy_on_bigger_random(rng):
    graph = random_graph(rng, 20000, 15000, 4 / 15000)
    want = int((scipy_mbm(graph, "row") >= 0).sum())
    assert check_matching_fast(graph, run(graph, "row", "cpu")) == want


def _cpu_with_stats(graph):
    """The CPU solver on a CSR graph: ``(rmatch as a "row" perm, stats)``."""
    from vision_cuts._matching_cpu import maximum_bipartite_matching_cpu

    graph = sp.csr_array(graph)
    stats = {}
    _, rmatch = maximum_bipartite_matching_cpu(
        graph.indptr, graph.indices, *graph.shape, stats=stats
    )
    return rmatch, stats


def _dense_families(rng):
    """Complete, near-complete and lopsided graphs, with and without an isolated
    row or column (which leaves the smaller side short of a perfect matching)."""
    ones = lambda shape: sp.csr_array(np.ones(shape, np.int8))  # noqa: E731
    near = lambda shape, p: sp.csr_array(  # noqa: E731
        (rng.random(shape) < p).astype(np.int8)
    )
    graphs = {
        "complete 300x300": ones((300, 300)),
        "complete 20x3000": ones((20, 3000)),
        "complete 3000x20": ones((3000, 20)),
        "dense 0.98 300x300": near((300, 300), 0.98),
        "dense 0.5 200x200": near((200, 200), 0.5),
        "dense 0.1 400x400": near((400, 400), 0.1),
        "lopsided 20000x50 degree 3": random_graph(rng, 20000, 50, 3 / 50),
        "lopsided 50x20000 degree 400": random_graph(rng, 50, 20000, 400 / 20000),
    }
    cut = ones((300, 300)).tolil()
    cut[:, 7] = 0  # an isolated column: no perfect matching
    graphs["complete 300x300 less a column"] = sp.csr_array(cut)
    cut = ones((3000, 20)).tolil()
    cut[:, 3] = 0
    graphs["complete 3000x20 less a column"] = sp.csr_array(cut)
    # a column reachable from one row only, which every row also reaches
    tail = ones((400, 40)).tolil()
    tail[1:, 39] = 0
    graphs["one-row column 400x40"] = sp.csr_array(tail)
    return graphs


def test_dense_and_lopsided_graphs_match_scipy(rng):
    """Cardinality equals SciPy's on dense, complete and lopsided graphs; the work
    stays within a few passes over the edges, and a complete graph needs one
    adjacency entry per vertex of its smaller side."""
    for name, graph in _dense_families(rng).items():
        perm, stats = _cpu_with_stats(graph)
        want = int((scipy_mbm(graph, "row") >= 0).sum())
        assert check_matching_fast(graph, perm) == want, name
        assert (run(graph, "row", "cpu") >= 0).sum() == want, name
        work = stats["start_scans"] + stats["phase_scans"]
        assert work <= 4 * graph.nnz + sum(graph.shape), (name, stats)
        assert stats["phases"] <= 3, (name, stats)
        if name.startswith("complete") and "less" not in name:
            assert stats["start"] == "greedy", (name, stats)
            assert work == min(graph.shape), (name, stats)
            assert stats["phases"] == 0, (name, stats)


@pytest.mark.parametrize("degree", [0, 10**9])
def test_both_starts_match_scipy(rng, monkeypatch, degree):
    """The greedy start (threshold 0) and Karp-Sipser (threshold out of reach) both
    give SciPy's cardinality, on sparse random, rectangular and dense graphs."""
    from vision_cuts import _matching_cpu

    monkeypatch.setattr(_matching_cpu, "_GREEDY_DEGREE", degree)
    want_start = "greedy" if degree == 0 else "karp_sipser"
    for trial in range(150):
        n_rows = int(rng.integers(1, 80))
        n_cols = int(rng.integers(1, 80))
        density = float(rng.choice([0.02, 0.05, 0.1, 0.3, 0.9]))
        graph = random_graph(rng, n_rows, n_cols, density)
        if graph.nnz == 0:
            continue
        perm, stats = _cpu_with_stats(graph)
        want = int((scipy_mbm(sp.csr_array(graph), "row") >= 0).sum())
        assert check_matching(graph, perm) == want, trial
        assert stats["start"] == want_start
        # a phase reads each edge at most twice (lookahead, descent); the last
        # phase augments nothing or reaches the bound
        assert stats["phase_scans"] <= 2 * graph.nnz * stats["phases"], stats
        assert stats["phases"] <= want + 1, stats
    for name, graph in _dense_families(rng).items():
        perm, stats = _cpu_with_stats(graph)
        want = int((scipy_mbm(graph, "row") >= 0).sum())
        assert check_matching_fast(graph, perm) == want, name
        # Karp-Sipser: the transpose (two passes), then each match reads both
        # partners' lists, and a degree > 1 step its left vertex's list once more
        assert stats["start_scans"] <= 6 * graph.nnz + sum(graph.shape), stats


def test_unbalanced_graph_stops_at_the_smaller_side(rng):
    """Once every column is matched neither start nor phases go on: the 49,900
    free rows left are never searched from."""
    graph = random_graph(rng, 50000, 100, 5 / 100)
    perm, stats = _cpu_with_stats(graph)
    assert check_matching_fast(graph, perm) == 100
    assert stats["phases"] == 0 and stats["phase_scans"] == 0, stats
    assert stats["start_scans"] < 5000, stats


# ---------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_gpu_repeated_runs_are_valid(rng):
    """Races show up as invalid or short matchings: run the same graphs many times."""
    graphs = [
        random_graph(rng, 30000, 30000, 5 / 30000),
        random_graph(rng, 20000, 35000, 3 / 35000),
        synthetic.grid_bipartite_graph(120, rng, 0.1),
        perfect_graph(rng, 20000, 40000),
    ]
    for graph in graphs:
        want = maxflow_cardinality(graph)
        for _ in range(15):
            perm = maximum_bipartite_matching(graph, "row", backend="gpu")
            assert check_matching_fast(graph, perm) == want


@pytest.mark.gpu
def test_gpu_apsb_and_apfb_agree(rng):
    from vision_cuts._matching_gpu import ALGORITHMS, maximum_bipartite_matching_gpu

    cupy = pytest.importorskip("cupy")
    graph = random_graph(rng, 5000, 4000, 3 / 4000)
    want = int((scipy_mbm(graph, "row") >= 0).sum())
    ptr = cupy.asarray(graph.indptr, dtype=cupy.int32)
    idx = cupy.asarray(graph.indices, dtype=cupy.int32)
    for alg in ALGORITHMS:
        for _ in range(5):
            lmatch, rmatch = maximum_bipartite_matching_gpu(
                ptr, idx, 5000, 4000, algorithm=alg
            )
            rm = rmatch.get()
            assert check_matching_fast(graph, rm) == want
            lm = lmatch.get()
            assert np.array_equal(np.flatnonzero(lm >= 0), np.sort(rm[rm >= 0]))


@pytest.mark.gpu
def test_gpu_cupy_sparse_in_cupy_out(rng):
    cupy = pytest.importorskip("cupy")
    csp = pytest.importorskip("cupyx.scipy.sparse")
    graph = random_graph(rng, 3000, 2000, 4 / 2000)
    want = int((scipy_mbm(graph, "row") >= 0).sum())
    for conv in (csp.csr_matrix, csp.csc_matrix, csp.coo_matrix):
        dev = conv(sp.csr_matrix(graph).astype(np.float32))
        for backend in ("gpu", "auto", "cpu"):
            perm = maximum_bipartite_matching(dev, "row", backend=backend)
            assert isinstance(perm, cupy.ndarray)
            assert check_matching_fast(graph, perm.get()) == want
        col = maximum_bipartite_matching(dev, "column", backend="gpu")
        assert isinstance(col, cupy.ndarray)
        assert check_matching(graph, col.get(), "column") == want


# ------------------------------------------------------------------ bad input


def test_bad_inputs():
    dense = np.eye(3)
    with pytest.raises(TypeError, match="graph must be a sparse matrix.*ndarray"):
        maximum_bipartite_matching(dense, backend="cpu")
    with pytest.raises(TypeError, match="graph must be a sparse matrix.*list"):
        maximum_bipartite_matching([[1, 0], [0, 1]], backend="cpu")
    graph = sp.csr_array(np.eye(3))
    with pytest.raises(ValueError, match="perm_type must be one of .*'rows'"):
        maximum_bipartite_matching(graph, "rows", backend="cpu")
    with pytest.raises(ValueError, match="backend must be one of"):
        maximum_bipartite_matching(graph, backend="cuda")
    with pytest.raises(ValueError, match="2-D biadjacency matrix, got shape \\(4,\\)"):
        maximum_bipartite_matching(sp.coo_array(np.ones(4)), backend="cpu")
    bad = sp.csr_array((3, 3))
    bad.indices = np.array([0, 5], dtype=np.int32)
    bad.indptr = np.array([0, 1, 2, 2], dtype=np.int32)
    bad.data = np.ones(2)
    with pytest.raises(ValueError, match=r"stored indices outside \[0, 3\)"):
        maximum_bipartite_matching(bad, backend="cpu")
    bad.indices = np.array([0, 1], dtype=np.int32)
    bad.indptr = np.array([0, 3, 2, 2], dtype=np.int32)
    with pytest.raises(ValueError, match="invalid index pointer array"):
        maximum_bipartite_matching(bad, backend="cpu")


@pytest.mark.parametrize("perm_type", ["row", "column"])
def test_decreasing_index_pointer_is_refused(perm_type):
    """SciPy builds such a matrix without complaint; the solver would index beyond
    its arrays."""
    rows, nnz = 101, 50
    ptr = np.array([0] + [nnz if i % 2 == 0 else 0 for i in range(rows - 1)] + [nnz])
    graph = sp.csr_array((np.ones(nnz), np.arange(nnz) % 4, ptr), shape=(rows, 4))
    with pytest.raises(
        ValueError,
        match=r"must be non-decreasing, got 50 then 0 at "
        r"positions 1 and 2",
    ):
        maximum_bipartite_matching(graph, perm_type, backend="cpu")


@pytest.mark.parametrize(
    "convert", [lambda a: sp.bsr_array(a, blocksize=(2, 2)), lambda a: sp.dia_array(a)]
)
def test_bsr_and_dia_are_refused(convert):
    """BSR stores the zeros that pad its blocks, DIA loses explicit zeros: neither
    format's stored entries are the graph's edges."""
    graph = convert(np.eye(4)[[0, 2, 3, 1]])
    with pytest.raises(
        TypeError,
        match=r"CSR, CSC, COO, LIL or DOK format, got "
        r"(BSR|DIA)",
    ):
        maximum_bipartite_matching(graph, backend="cpu")


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_gpu_request_without_device_raises():
    with pytest.raises(BackendUnavailableError, match="backend='gpu'"):
        maximum_bipartite_matching(sp.csr_array(np.eye(2)), backend="gpu")


@pytest.mark.parametrize("field", ["row", "col"])
@pytest.mark.parametrize("value", ["size", 100, -1])
def test_coo_indices_out_of_range_are_refused(backend, field, value):
    """A COO matrix with a row or column index outside its shape: SciPy's tocsr()
    wrote through it unchecked (a wrong matching, or a crash of the process)."""
    g = sp.random(6, 4, density=0.5, format="coo", random_state=3)
    if backend == "gpu":  # built valid (the constructor checks), then broken
        import cupyx.scipy.sparse as csp

        g = csp.coo_matrix(g)
    if value == "size":  # one past the last row or column
        value = g.shape[0] if field == "row" else g.shape[1]
    getattr(g, field)[0] = value
    with pytest.raises(ValueError, match=f"COO {field} index {value} at entry 0"):
        maximum_bipartite_matching(g, backend=backend)


@pytest.mark.parametrize(
    ("fmt", "backend"),
    [("coo", "cpu"), ("lil", "cpu"), ("dok", "cpu"),
     pytest.param("coo", "gpu", marks=pytest.mark.gpu)],  # (CuPy: no LIL, DOK)
)  # fmt: skip
@pytest.mark.parametrize("shape", [(4000, 7), (7, 4000), (50, 50)])
def test_conversions_take_the_shorter_pointer_array(fmt, shape, backend):
    """A COO (LIL, DOK) matrix was always converted to CSR: a (2**31 - 2) x 1 one
    asked for 16 GB of row pointers and the process was killed. The conversion
    now takes the orientation of the shorter pointer array; the matching is the
    same size as SciPy's, in either ``perm_type``."""
    from vision_cuts.matching import _adjacency

    g = sp.random(*shape, density=0.01, format="coo", random_state=11)
    host = g.asformat(fmt)
    ptr, _, nl, _, rows_left = _adjacency(host)
    assert ptr.shape[0] == min(shape) + 1 and rows_left == (shape[0] <= shape[1])
    if backend == "gpu":
        csp = pytest.importorskip("cupyx.scipy.sparse")
        g_in = csp.coo_matrix(g)
    else:
        g_in = host
    want = int((scipy_mbm(g.tocsr(), perm_type="column") >= 0).sum())
    for perm_type in ("row", "column"):
        perm = maximum_bipartite_matching(g_in, perm_type=perm_type, backend=backend)
        perm = perm.get() if hasattr(perm, "get") else perm
        assert int((perm >= 0).sum()) == want
        dense = g.toarray() != 0
        for i, j in enumerate(perm):
            if j >= 0:
                assert dense[i, j] if perm_type == "column" else dense[j, i]
