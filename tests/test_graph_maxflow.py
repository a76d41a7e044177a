"""General-graph maximum flow: CSR graphs, DIMACS files, generators, both backends.

Oracles: ``scipy.sparse.csgraph.maximum_flow`` (Dinic / Edmonds-Karp) for the value,
hand-made networks, and the known values of the DIMACS instances in
``maxflow_dimacs/SOURCE.md``. Every returned flow is checked for capacity and
conservation, and every cut for capacity == value.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_flow as scipy_maximum_flow

from vision_cuts import (
    FlowGraph,
    MaxFlow,
    acyclic_dense_graph,
    ak_graph,
    flow_graph,
    flow_graph_from_sparse,
    genrmf_graph,
    maximum_flow,
    read_dimacs,
    washington_rlg_graph,
    write_dimacs,
)
from vision_cuts.dimacs import DimacsFormatError

KNOWN = {"gl1.max": 156545, "wlm3.max": 11875108}


def scipy_value(g: FlowGraph, s: int, t: int) -> int:
    tails = g.tails
    m = sp.csr_matrix(
        (g.capacity.astype(np.int64), (tails, g.heads)),
        shape=(g.num_nodes, g.num_nodes),
    )
    m.data = m.data.astype(np.int32) if m.data.max(initial=0) < 2**31 else m.data
    return int(scipy_maximum_flow(m.astype(np.int32), s, t).flow_value)


def check_result(g: FlowGraph, s: int, t: int, res: MaxFlow) -> None:
    """Capacity, conservation, cut capacity == value, terminals on their sides."""
    f = res.flow
    assert f.shape == (g.num_arcs,) and f.dtype == np.int64
    assert (f >= 0).all() and (f <= g.capacity).all()
    assert not ((f > 0) & (f[g.reverse] > 0)).any()
    net = np.zeros(g.num_nodes, np.int64)
    np.add.at(net, g.tails, f)
    np.subtract.at(net, g.heads, f)
    inner = np.ones(g.num_nodes, bool)
    inner[[s, t]] = False
    assert (net[inner] == 0).all()
    assert net[s] == res.value and net[t] == -res.value
    lab = res.labels
    assert lab.shape == (g.num_nodes,) and lab.dtype == np.uint8
    assert lab[s] == 0 and lab[t] == 1
    cut = (lab[g.tails] == 0) & (lab[g.heads] == 1)
    assert int(g.capacity[cut].sum()) == res.value
    assert (f[cut] == g.capacity[cut]).all()


def random_graph(rng, n_max=40, m_max=200, c_max=20):
    n = int(rng.integers(2, n_max))
    m = int(rng.integers(0, m_max))
    t = rng.integers(0, n, m)
    h = rng.integers(0, n, m)
    c = rng.integers(0, c_max, m)
    return flow_graph(t, h, c, num_nodes=n), t, h, c


# ------------------------------------------------------------------------ CSR graph


def test_flow_graph_merges_parallel_and_reverse_edges():
    # 0->1 twice, 1->0 once, a self-loop, 1->2
    g = flow_graph([0, 0, 1, 2, 1], [1, 1, 0, 2, 2], [3, 4, 5, 9, 2])
    assert g.num_nodes == 3
    assert g.num_arcs == 4  # (0,1), (1,0), (1,2), (2,1)
    tails = g.tails
    arcs = {
        (int(u), int(v)): int(c)
        for u, v, c in zip(tails, g.heads, g.capacity, strict=True)
    }
    assert arcs == {(0, 1): 7, (1, 0): 5, (1, 2): 2, (2, 1): 0}
    assert (g.heads[g.reverse] == tails).all() and (
        g.reverse[g.reverse] == np.arange(4)
    ).all()
    assert g.edge_arc[3] == -1
    assert (tails[g.edge_arc[[0, 1, 2, 4]]] == [0, 0, 1, 1]).all()
    assert (np.diff(g.indptr) == [1, 2, 1]).all()


def test_edge_flow_splits_merged_arcs():
    g = flow_graph([0, 0, 0, 1, 1], [1, 1, 0, 2, 2], [3, 4, 8, 2, 2])
    res = maximum_flow(g, 0, 2, backend="cpu")
    assert res.value == 4
    ef = g.edge_flow(res.flow)
    assert ef.tolist() == [3, 1, 0, 2, 2]
    with pytest.raises(ValueError, match="flow must have shape"):
        g.edge_flow(np.zeros(3))


def test_flow_graph_from_sparse_matches_edge_list(rng):
    m = sp.random(30, 30, density=0.2, random_state=1, format="csr")
    m.data = np.ceil(m.data * 50)
    m = m.astype(np.int64)
    g = flow_graph_from_sparse(m)
    assert g.num_nodes == 30
    r = maximum_flow(m, 0, 29, backend="cpu")
    assert r.value == maximum_flow(g, 0, 29, backend="cpu").value
    assert r.value == int(scipy_maximum_flow(m.astype(np.int32), 0, 29).flow_value)
    with pytest.raises(ValueError, match="square"):
        flow_graph_from_sparse(sp.csr_matrix((3, 4)))
    with pytest.raises(TypeError, match="sparse"):
        flow_graph_from_sparse(np.zeros((3, 3)))


def test_float_capacities_need_scale():
    with pytest.raises(TypeError, match="capacities has floating dtype"):
        flow_graph([0], [1], [1.5])
    g = flow_graph([0, 1], [1, 2], [1.26, 0.5], scale=10)
    assert sorted(g.capacity.tolist()) == [0, 0, 5, 13]
    assert maximum_flow(g, 0, 2, backend="cpu").value == 5


def test_a_bool_sparse_graph_names_no_missing_parameter():
    """maximum_flow of a bool sparse matrix said "(or float with scale=)", a
    parameter maximum_flow does not have; a bool graph is now told to convert to
    integers (a scale is for floats), naming the argument it has."""
    import scipy.sparse as sp

    m = sp.csr_matrix(np.array([[0, 1], [0, 0]], bool))
    with pytest.raises(TypeError, match=r"graph must have an integer or floating "
                       r"dtype, got bool: convert it to integers first \(graph\."):
        maximum_flow(m, 0, 1, backend="cpu")  # fmt: skip
    with pytest.raises(TypeError, match=r"got bool: convert it to integers first "
                       r"\(capacities\.astype\(int\) makes True a capacity of 1\)"):
        flow_graph([0], [1], np.array([True]))  # fmt: skip
    assert maximum_flow(m.astype(int), 0, 1, backend="cpu").value == 1


def test_bad_inputs():
    with pytest.raises(ValueError, match="capacities must be non-negative"):
        flow_graph([0], [1], [-1])
    with pytest.raises(ValueError, match=r"heads must lie in \[0, num_nodes - 1\]"):
        flow_graph([0], [5], [1], num_nodes=3)
    with pytest.raises(ValueError, match="tails must lie"):
        flow_graph([-1], [0], [1], num_nodes=3)
    with pytest.raises(ValueError, match="same shape"):
        flow_graph([0, 1], [1], [1, 1])
    with pytest.raises(ValueError, match="capacities must have shape"):
        flow_graph([0, 1], [1, 2], [1, 2, 3])
    with pytest.raises(TypeError, match="tails must have an integer dtype"):
        flow_graph([0.0], [1], [1])
    with pytest.raises(ValueError, match="at most 2\\*\\*62"):
        flow_graph([0], [1], np.array([2**62 + 1], dtype=np.uint64))
    with pytest.raises(ValueError, match="sum of capacities"):
        flow_graph([0, 1], [1, 2], [2**61, 2**61])
    g = flow_graph([0, 1], [1, 2], [1, 1])
    with pytest.raises(ValueError, match="source and sink must differ"):
        maximum_flow(g, 1, 1, backend="cpu")
    with pytest.raises(ValueError, match=r"sink must lie in \[0, 2\]"):
        maximum_flow(g, 0, 3, backend="cpu")
    with pytest.raises(TypeError, match="source must be an integer"):
        maximum_flow(g, 0.0, 2, backend="cpu")
    with pytest.raises(ValueError, match="method must be"):
        maximum_flow(g, 0, 2, method="lifo", backend="cpu")
    with pytest.raises(TypeError, match="graph must be a FlowGraph"):
        maximum_flow(np.zeros((3, 3)), 0, 2, backend="cpu")
    with pytest.raises(ValueError, match="backend must be one of"):
        maximum_flow(g, 0, 2, backend="tpu")
    # a GPU-only option is still checked where the CPU ignores it
    with pytest.raises(TypeError, match="warp_per_vertex must be True or False"):
        maximum_flow(g, 0, 2, backend="cpu", warp_per_vertex="yes")
    assert maximum_flow(g, 0, 2, backend="cpu", warp_per_vertex=False).value == 1


@pytest.mark.parametrize(
    "caps, scale",
    [
        ([2**40], 2**24),  # 2**64 would wrap to 0 in int64
        ([2**40 + 1], 2**30),
        ([5, 1], 2**62),
        ([1], 2**64),
        ([1], 1e20),
        (np.array([3, 2**32], np.uint64), 2**31),
    ],
)
def test_integer_capacities_times_scale_checked_before_multiplying(caps, scale):
    with pytest.raises(ValueError, match=r"capacities times scale .* at most 2\*\*62"):
        flow_graph(np.arange(len(caps)), np.arange(len(caps)) + 1, caps, scale=scale)


def test_integer_capacities_times_scale_exact():
    g = flow_graph([0, 1], [1, 2], [3, 2**20], scale=2**30)
    assert g.edge_capacity.tolist() == [3 * 2**30, 2**50]
    assert maximum_flow(g, 0, 2, backend="cpu").value == 3 * 2**30
    # zero capacities stay zero whatever the factor
    assert flow_graph([0], [1], [0], scale=2**64).edge_capacity.tolist() == [0]


@pytest.mark.parametrize(
    "caps, scale, quoted",
    [
        ([2.0, -0.4], 1.0, r"-0\.4 at index 1"),  # would round to 0
        ([-4e-7], 1e6, r"-4e-07 at index 0"),
        ([-0.6], 1.0, r"-0\.6 at index 0"),  # not the rounded -1.0
    ],
)
def test_negative_float_capacities_rejected_before_rounding(caps, scale, quoted):
    n = len(caps)
    message = "capacities must be non-negative, got " + quoted
    with pytest.raises(ValueError, match=message):
        flow_graph(np.arange(n), np.arange(n) + 1, caps, scale=scale)


def test_float_capacity_times_scale_quotes_the_value_passed():
    with pytest.raises(ValueError, match=r"times scale \(1e\+300\).*got 1e\+300 at"):
        flow_graph([0], [1], [1e300], scale=1e300)


@pytest.mark.parametrize("name", ["tails", "heads", "capacities"])
def test_masked_arrays_rejected(name):
    args = {"tails": [0, 1], "heads": [1, 2], "capacities": [5, 7]}
    args[name] = np.ma.array(args[name], mask=[True, False])
    with pytest.raises(TypeError, match=f"{name} must be a plain array"):
        flow_graph(args["tails"], args["heads"], args["capacities"])


@pytest.mark.parametrize("name", ["tails", "heads", "capacities"])
def test_ragged_lists_name_the_parameter(name):
    args = {"tails": [0, 1], "heads": [1, 2], "capacities": [1, 1]}
    args[name] = [[0], [1, 2]]
    with pytest.raises(ValueError, match=f"{name} must be a regular"):
        flow_graph(args["tails"], args["heads"], args["capacities"])


@pytest.mark.parametrize("name", ["tails", "heads"])
@pytest.mark.parametrize(
    "value, dtype", [(2**64 - 1, np.uint64), (2**63, np.uint64), (2**40, np.int64)]
)
def test_huge_node_indices_quoted_unwrapped(name, value, dtype):
    args = {"tails": np.array([0], dtype), "heads": np.array([1], dtype)}
    args[name] = np.array([value], dtype)
    with pytest.raises(ValueError, match=rf"{name} must lie in .* got {value} at"):
        flow_graph(args["tails"], args["heads"], [1])


def test_capacity_sum_limit_is_exact():
    g = flow_graph([0, 1], [1, 2], [2**60, 2**60])  # sum 2**61: accepted
    assert maximum_flow(g, 0, 2, backend="cpu").value == 2**60
    with pytest.raises(ValueError, match=f"sum of capacities .* got {2**61 + 1}"):
        flow_graph([0, 1], [1, 2], [2**60, 2**60 + 1])


@pytest.mark.parametrize(
    "flow, error, message",
    [
        (np.full(4, np.nan), TypeError, "flow must have an integer dtype"),
        (np.array(["1"] * 4), TypeError, "flow must have an integer dtype"),
        (np.ones(4, bool), TypeError, "flow must have an integer dtype"),
        (
            np.array([-5, 0, 5, 0]),
            ValueError,
            r"flow must lie in \[0, capacity\].* got -5 on arc 0 \(0 -> 1\)",
        ),
        (
            np.array([50, 0, 50, 0]),
            ValueError,
            r"got 50 on arc 0 \(0 -> 1\) of capacity 7",
        ),
        (
            np.array([0, 1, 0, 0]),
            ValueError,
            r"got 1 on arc 1 \(1 -> 0\) of capacity 0",
        ),
        (
            np.array([2**64 - 1, 0, 0, 0], np.uint64),
            ValueError,
            f"got {2**64 - 1} on arc 0",
        ),
        (np.ma.array([5, 0, 5, 0]), TypeError, "flow must be a plain array"),
    ],
)
def test_edge_flow_bad_flow(flow, error, message):
    g = flow_graph([0, 0, 1], [1, 1, 2], [3, 4, 5])
    with pytest.raises(error, match=message):
        g.edge_flow(flow)


def test_edge_flow_accepts_integer_flows():
    g = flow_graph([0, 0, 1], [1, 1, 2], [3, 4, 5])
    for flow in ([5, 0, 5, 0], np.array([5, 0, 5, 0], np.uint64)):
        assert g.edge_flow(flow).tolist() == [3, 2, 5]


def test_sparse_messages_name_the_matrix_and_entry():
    floats = sp.csr_matrix(np.array([[0, 1.5], [0, 0]]))
    with pytest.raises(
        TypeError,
        match=r"graph has floating dtype.*flow_graph_from_sparse\(graph, scale=",
    ):
        maximum_flow(floats, 0, 1, backend="cpu")
    with pytest.raises(TypeError, match="matrix has floating dtype.*Pass scale="):
        flow_graph_from_sparse(floats)
    g = flow_graph_from_sparse(floats, scale=2)
    assert maximum_flow(g, 0, 1, backend="cpu").value == 3
    negative = sp.csr_matrix(np.array([[0, 2], [-1, 0]]))
    with pytest.raises(
        ValueError, match=r"matrix must be non-negative, got -1 at entry \(1, 0\)"
    ):
        flow_graph_from_sparse(negative)
    with pytest.raises(ValueError, match=r"graph must be non-negative.*\(1, 0\)"):
        maximum_flow(negative, 0, 1, backend="cpu")
    big = sp.csr_matrix(np.array([[0, 0], [2**40, 0]]))
    with pytest.raises(ValueError, match=r"matrix times scale .* at entry \(1, 0\)"):
        flow_graph_from_sparse(big, scale=2**30)


# ------------------------------------------------------------------------ solvers


def test_hand_network(backend):
    # classic CLRS network, max flow 23
    t = [0, 0, 1, 2, 1, 3, 2, 4, 3, 4]
    h = [1, 2, 3, 1, 2, 2, 4, 3, 5, 5]
    c = [16, 13, 12, 4, 10, 9, 14, 7, 20, 4]
    g = flow_graph(t, h, c)
    res = maximum_flow(g, 0, 5, backend=backend)
    assert isinstance(res, MaxFlow) and isinstance(res.value, int)
    assert res.value == 23
    assert res.stats["backend"] == backend
    check_result(g, 0, 5, res)


def test_disconnected_and_trivial(backend):
    g = flow_graph([0, 2], [1, 3], [5, 5], num_nodes=4)
    res = maximum_flow(g, 0, 3, backend=backend)
    assert res.value == 0
    check_result(g, 0, 3, res)
    g = flow_graph([], [], [], num_nodes=2)
    res = maximum_flow(g, 1, 0, backend=backend)
    assert res.value == 0 and res.labels.tolist() == [1, 0]


@pytest.mark.parametrize("method", ["highest", "fifo"])
def test_random_graphs_against_scipy(rng, method):
    for _ in range(150):
        g, t, h, c = random_graph(rng)
        s, tt = 0, g.num_nodes - 1
        res = maximum_flow(g, s, tt, method=method, backend="cpu")
        assert res.value == scipy_value(g, s, tt)
        check_result(g, s, tt, res)


def test_random_graphs_gpu_matches_cpu(rng, backend):
    for _ in range(100 if backend == "cpu" else 200):
        g, *_ = random_graph(rng, n_max=60, m_max=400, c_max=1000)
        s, t = (int(x) for x in rng.choice(g.num_nodes, 2, replace=False))
        res = maximum_flow(g, s, t, backend=backend)
        assert res.value == maximum_flow(g, s, t, backend="cpu").value
        assert res.value == scipy_value(g, s, t)
        check_result(g, s, t, res)


def test_large_capacities_exact(backend):
    # values beyond int32: excess and flow sums are int64
    cap = 2**40
    g = flow_graph([0, 0, 1, 2], [1, 2, 3, 3], [cap, cap, cap + 7, cap - 3])
    res = maximum_flow(g, 0, 3, backend=backend)
    assert res.value == 2 * cap - 3
    check_result(g, 0, 3, res)


@pytest.mark.parametrize(
    "make",
    [
        lambda: acyclic_dense_graph(60, seed=3),
        lambda: genrmf_graph(4, 5, seed=3),
        lambda: genrmf_graph(3, 12, c1=5, c2=50, seed=4),
        lambda: washington_rlg_graph(16, 12, seed=5),
    ],
    ids=["adg60", "genrmf4x5", "genrmf3x12", "rlg16x12"],
)
def test_generator_instances(make, backend):
    g, s, t = make()
    res = maximum_flow(g, s, t, backend=backend)
    assert res.value == scipy_value(g, s, t)
    check_result(g, s, t, res)
    if backend == "cpu":
        assert maximum_flow(g, s, t, method="fifo", backend="cpu").value == res.value


def decreasing_chain(n, step, reverse_ids):
    """Path s -> ... -> t whose capacity drops every ``step`` arcs: after phase 1 the
    excess sits on every ``step``-th node."""
    k = np.arange(n - 1)
    t, h, s, sink = k, k + 1, 0, n - 1
    if reverse_ids:
        t, h, s, sink = n - 1 - t, n - 1 - h, n - 1, 0
    return flow_graph(t, h, 10 * (n - step * (k // step)), num_nodes=n), s, sink


def funnel_graph(width, depth, seed):
    """Levels of ``width`` nodes, each node linked to 2 random nodes of the next
    level, capacities shrinking with depth: every level keeps excess after phase 1."""
    rng = np.random.default_rng(seed)
    n = width * depth + 2
    idx = 1 + np.arange(width * depth).reshape(depth, width)
    t, h, c = [np.zeros(width, np.int64)], [idx[0]], [np.full(width, 100 * depth)]
    for k in range(depth - 1):
        for _ in range(2):
            t.append(idx[k])
            h.append(idx[k + 1][rng.permutation(width)])
            c.append(40 * (depth - k) + rng.integers(0, 10, width))
    t.append(idx[-1])
    h.append(np.full(width, n - 1))
    c.append(np.full(width, 10))
    g = flow_graph(np.concatenate(t), np.concatenate(h), np.concatenate(c), num_nodes=n)
    return g, 0, n - 1


@pytest.mark.parametrize("method", ["highest", "fifo"])
@pytest.mark.parametrize(
    "make",
    [
        lambda: decreasing_chain(3000, 1, False),
        lambda: decreasing_chain(3000, 1, True),
        lambda: decreasing_chain(3000, 2, False),
        lambda: decreasing_chain(3000, 2, True),
        lambda: funnel_graph(10, 300, seed=1),
    ],
    ids=["chain", "chain_reversed_ids", "chain_alt", "chain_alt_reversed_ids",
         "funnel10x300"],
)
def test_returning_trapped_excess_is_linear(make, method):
    # these left ~n**2/2 small excesses moving one step per pass under the old FIFO
    # return (4.5e6 phase-2 pushes on the 3000-node chain); the return along a
    # topological order of the flow makes at most one push per arc and node
    g, s, t = make()
    res = maximum_flow(g, s, t, method=method, backend="cpu")
    assert res.value == scipy_value(g, s, t)
    check_result(g, s, t, res)
    st = res.stats
    assert st["phase2_pushes"] > 0
    assert st["phase2_cycles"] == 0 and not st["phase2_by_labels"]
    assert st["phase2_pushes"] <= g.num_nodes + g.num_arcs
    assert st["phase2_scans"] <= 3 * (g.num_nodes + g.num_arcs)


@pytest.mark.parametrize("budget", [1.0, 0.0], ids=["depth_first", "by_labels"])
def test_flow_cycles_in_phase2(rng, monkeypatch, budget):
    # phase 1 leaves flow cycles on some small random graphs: the depth-first return
    # cancels each (a walk around it); with no cycle budget the first cycle hands
    # phase 2 to the highest-label return, which must also give a valid flow
    from vision_cuts import _flow_graph_cpu

    monkeypatch.setattr(_flow_graph_cpu, "_CYCLE_BUDGET", budget)
    cycles = 0
    by_labels = 0
    for _ in range(200):
        g, *_ = random_graph(rng, n_max=60, m_max=400, c_max=1000)
        s, t = (int(x) for x in rng.choice(g.num_nodes, 2, replace=False))
        for method in ("highest", "fifo"):
            res = maximum_flow(g, s, t, method=method, backend="cpu")
            assert res.value == scipy_value(g, s, t)
            check_result(g, s, t, res)
            st = res.stats
            cycles += st["phase2_cycles"]
            by_labels += st["phase2_by_labels"]
            linear = g.num_nodes + g.num_arcs
            if st["phase2_by_labels"]:
                # cancelled before the switch: at most budget * linear + one cycle
                assert st["phase2_cycles"] >= 1
                assert st["phase2_pushes"] + st["phase2_relabels"] <= 4 * linear
            else:
                assert st["phase2_relabels"] == 0
                assert st["phase2_pushes"] <= 3 * linear
                assert st["phase2_scans"] <= 5 * linear
    assert cycles > 0
    assert (by_labels > 0) == (budget == 0.0)


def test_cycle_dense_flow_returned_by_labels():
    # genrmf's frames leave many flow cycles (362 here): past the cycle budget the
    # highest-label return takes over and moves only the excess
    g, s, t = genrmf_graph(24, 2, seed=1)
    res = maximum_flow(g, s, t, method="fifo", backend="cpu")
    assert res.value == scipy_value(g, s, t)
    check_result(g, s, t, res)
    st = res.stats
    assert st["phase2_by_labels"]
    assert st["phase2_pushes"] + st["phase2_relabels"] <= 2 * (g.num_nodes + g.num_arcs)


@pytest.mark.gpu
def test_gpu_kernel_variants_agree(rng):
    from vision_cuts._flow_graph_gpu import maximum_flow_gpu

    for g, s, t in (
        acyclic_dense_graph(300, seed=1),
        washington_rlg_graph(64, 32, seed=2),
        genrmf_graph(8, 8, seed=3),
    ):
        want = maximum_flow(g, s, t, backend="cpu").value
        for kernel in ("thread", "warp", "ballot"):
            for cycles in (1, 64):
                value, flow, labels, _ = maximum_flow_gpu(
                    g.indptr,
                    g.heads,
                    g.reverse,
                    g.capacity,
                    s,
                    t,
                    kernel=kernel,
                    cycles=cycles,
                )
                assert value == want
                check_result(g, s, t, MaxFlow(value, flow, labels, {}))


@pytest.mark.gpu
def test_gpu_over_budget_is_solved_on_the_cpu(rng, monkeypatch):
    """A GPU solve past its time budget (here none) stops and the CPU solves the
    graph: SciPy's value, the CPU's labels (the sink side of every maximum flow's
    residual graph), a valid flow, ``stats["handover"]`` with the GPU's rounds."""
    pytest.importorskip("cupy")
    from vision_cuts import _flow_graph_gpu

    monkeypatch.setattr(_flow_graph_gpu, "_BUDGET_S", 0.0)
    monkeypatch.setattr(_flow_graph_gpu, "_BUDGET_NS_PER_ARC", 0.0)
    handed = 0
    for _ in range(40):
        g, *_ = random_graph(rng, n_max=60, m_max=400, c_max=1000)
        s, t = (int(x) for x in rng.choice(g.num_nodes, 2, replace=False))
        res = maximum_flow(g, s, t, backend="gpu", method="fifo")
        cpu = maximum_flow(g, s, t, backend="cpu")
        assert res.value == cpu.value == scipy_value(g, s, t)
        np.testing.assert_array_equal(res.labels, cpu.labels)
        check_result(g, s, t, res)
        assert res.stats["backend"] == "gpu"
        if res.stats["handover"] is not None:
            handed += 1
            assert res.stats["handover"]["rounds"] >= 1
            assert "pushes" in res.stats  # the CPU's counters
    assert handed > 10


@pytest.mark.gpu
def test_ak_network_hands_over_by_default():
    """AK(1000): push-relabel moves the excess a node a relabel along its chains
    (9.5 s on an H100 to the end, against 34 ms on the CPU); the default budget
    (0.11 s here) stops the GPU and the CPU gives the value 2 k + 3."""
    pytest.importorskip("cupy")
    g, s, t = ak_graph(1000)
    res = maximum_flow(g, s, t, backend="gpu")
    assert res.value == 2003 == maximum_flow(g, s, t, backend="cpu").value
    assert res.stats["handover"] is not None
    check_result(g, s, t, res)


# ------------------------------------------------------------------------ generators


def test_ak_graph():
    """AK(k): 4 k + 6 nodes, 6 k + 7 edges, value 2 k + 3 (SciPy's too); bad k
    refused, naming it."""
    for k in (1, 2, 7, 40):
        g, s, t = ak_graph(k)
        assert (s, t) == (0, 1) and g.num_nodes == 4 * k + 6
        assert int((g.capacity > 0).sum()) == 6 * k + 7
        assert scipy_value(g, s, t) == 2 * k + 3
        res = maximum_flow(g, s, t, backend="cpu")
        assert res.value == 2 * k + 3
        check_result(g, s, t, res)
    with pytest.raises(ValueError, match="k must be at least 1"):
        ak_graph(0)
    with pytest.raises(TypeError, match="k must be an integer"):
        ak_graph(2.5)
    with pytest.raises(ValueError, match="k = 200000000 give"):
        ak_graph(200_000_000)


def test_generators_reproducible_and_shaped():
    a = washington_rlg_graph(10, 7, seed=11)
    b = washington_rlg_graph(10, 7, seed=11)
    c = washington_rlg_graph(10, 7, seed=12)
    assert (a.graph.capacity == b.graph.capacity).all()
    assert (a.graph.heads == b.graph.heads).all()
    assert not np.array_equal(a.graph.capacity, c.graph.capacity)
    g, s, t = a
    assert g.num_nodes == 72 and (s, t) == (0, 71)
    pos = g.capacity > 0
    tails, heads = g.tails[pos], g.heads[pos]
    inner = (tails != s) & (heads != t)
    # 3 distinct next-level targets per node of levels 0..5
    assert inner.sum() == 3 * 10 * 6
    assert ((heads[inner] - 1) // 10 == (tails[inner] - 1) // 10 + 1).all()
    assert (np.bincount(tails[inner], minlength=72)[1:61] == 3).all()

    g, s, t = genrmf_graph(4, 3, c1=2, c2=9, seed=0)
    assert g.num_nodes == 48 and (s, t) == (0, 47)
    pos = g.capacity > 0
    grid = g.capacity[pos] == 9 * 16
    assert grid.sum() == 3 * 4 * 3 * 4  # 2 * a * (a - 1) * 2 directions per frame
    inter = g.capacity[pos][~grid]
    assert inter.size == 2 * 16 and inter.min() >= 2 and inter.max() <= 9
    frame_t = g.tails[pos][~grid] // 16
    frame_h = g.heads[pos][~grid] // 16
    assert (frame_h == frame_t + 1).all()
    assert (np.bincount(g.heads[pos][~grid], minlength=48)[16:] == 1).all()

    g, s, t = acyclic_dense_graph(9, max_capacity=5, seed=0)
    pos = g.capacity > 0
    assert pos.sum() == 36 and (g.tails[pos] < g.heads[pos]).all()
    assert g.capacity.max() <= 5
    with pytest.raises(ValueError, match="rows must be at least 3"):
        washington_rlg_graph(2, 5)
    with pytest.raises(ValueError, match="c2 must be at least c1"):
        genrmf_graph(3, 3, c1=5, c2=2)
    with pytest.raises(TypeError, match="n must be an integer"):
        acyclic_dense_graph(5.0)


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: genrmf_graph(2, 2, c2=2**62), "c2"),
        (lambda: genrmf_graph(2, 2, c2=2**63), "c2"),
        (lambda: genrmf_graph(1, 3, c2=2**61), "c2"),
        (lambda: washington_rlg_graph(3, 2, max_capacity=2**62), "max_capacity"),
        (lambda: washington_rlg_graph(3, 2, max_capacity=2**61), "max_capacity"),
        (lambda: acyclic_dense_graph(3, max_capacity=2**63), "max_capacity"),
        (lambda: acyclic_dense_graph(3, max_capacity=2**62), "max_capacity"),
        (lambda: acyclic_dense_graph(3, max_capacity=2**61 // 3 + 1), "max_capacity"),
    ],
)
def test_generator_capacity_parameters_bounded(make, name):
    with pytest.raises(ValueError, match=rf"^{name} must be at most \d+ for .*2\*\*61"):
        make()


def brute_force_value(g: FlowGraph, s: int, t: int) -> int:
    """Max flow of a tiny graph by brute force over the cuts (capacities any size)."""
    best = None
    for mask in range(1 << g.num_nodes):
        side = np.array([(mask >> v) & 1 for v in range(g.num_nodes)])
        if side[s] != 0 or side[t] != 1:
            continue
        cut = (side[g.tails] == 0) & (side[g.heads] == 1)
        value = sum(int(c) for c in g.capacity[cut])
        best = value if best is None else min(best, value)
    return best


@pytest.mark.parametrize(
    "make",
    [
        lambda: acyclic_dense_graph(3, max_capacity=2**61 // 3, seed=0),
        lambda: washington_rlg_graph(3, 2, max_capacity=2**61 // 27, seed=0),
        lambda: genrmf_graph(2, 2, c2=2**61 // 68, seed=0),
    ],
    ids=["adg", "rlg", "genrmf"],
)
def test_generator_capacity_parameters_at_the_limit(make):
    g, s, t = make()
    assert maximum_flow(g, s, t, backend="cpu").value == brute_force_value(g, s, t)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: genrmf_graph(100000, 2), r"a = 100000 and b = 2 give \d+ nodes"),
        (lambda: genrmf_graph(2, 2**28), r"a = 2 and b = 268435456 give \d+ arcs"),
        (
            lambda: washington_rlg_graph(64, 10**8),
            r"rows = 64 and cols = 100000000 give \d+ nodes",
        ),
        (
            lambda: washington_rlg_graph(3, 2**27),
            r"rows = 3 and cols = 134217728 give \d+ arcs",
        ),
        (lambda: acyclic_dense_graph(10**6), r"n must be at most 46341 .* 1000000"),
        (lambda: acyclic_dense_graph(46342), r"n must be at most 46341"),
    ],
)
def test_generator_sizes_bounded_before_allocating(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# ------------------------------------------------------------------------ DIMACS


def test_dimacs_roundtrip(tmp_path, rng):
    g, s, t = genrmf_graph(3, 4, seed=1)
    path = tmp_path / "g.max"
    write_dimacs(path, g, s, t, comment="genrmf 3 x 4\nseed 1")
    text = path.read_text().splitlines()
    assert text[0] == "c genrmf 3 x 4" and text[2].startswith("p max 36 ")
    g2, s2, t2 = read_dimacs(path)
    assert (s2, t2) == (s, t)
    assert (g2.indptr == g.indptr).all() and (g2.heads == g.heads).all()
    assert (g2.capacity == g.capacity).all()
    assert maximum_flow(g2, s2, t2, backend="cpu").value == scipy_value(g, s, t)


@pytest.mark.parametrize(
    "body, message",
    [
        ("p max 3 1\nn 1 s\nn 3 t\na 1 2\n", "line 4: expected 'a <from> <to>"),
        ("p max 3 1\nn 1 s\nn 3 t\na 1 x 5\n", "line 4: non-integer"),
        ("p max 3 1\nn 1 s\nn 3 t\na 1 4 5\n", "line 4: node out of range 1..3"),
        ("p max 3 1\nn 1 s\nn 3 t\na 1 2 -5\n", "line 4: negative capacity"),
        (f"p max 3 1\nn 1 s\nn 3 t\na 1 2 {2**63}\n", "line 4: capacity .* int64"),
        ("c hi\na 1 2 3\n", "line 2: an 'a' line before the 'p max' line"),
        ("p min 3 1\n", "line 1: expected 'p max"),
        ("p max 3 1\nn 1 s\nn 3 q\n", "line 3: expected 'n <id> s'"),
        ("p max 3 1\nn 1 s\nn 3 t\nx 1\n", "line 4: unknown line type 'x'"),
        ("p max 3 1\nn 1 s\nn 3 t\np max 3 1\n", "line 4: a second 'p' line"),
        ("p max 3 2\nn 1 s\nn 3 t\na 1 2 5\n", "announces 2 arcs, the file has 1"),
        ("p max 3 0\nn 1 s\n", "the source or the sink"),
        ("p max 3 0\nn 2 s\nn 2 t\n", "the same node 2"),
        ("c only comments\n", "no 'p max"),
        (
            f"p max 4 2\nn 1 s\nn 4 t\na 1 2 5\na 2 4 {2**62 + 1}\n",
            r"line 5: capacity 4611686018427387905 beyond 2\*\*62",
        ),
        (
            f"p max 4 2\nn 1 s\nn 4 t\na 1 2 {2**61}\na 2 4 {2**61}\n",
            r"line 5: the capacities up to this line sum to \d+, beyond 2\*\*61",
        ),
        (
            "p max 99999999999 0\nn 1 s\nn 2 t\n",
            r"line 1: node count 99999999999 beyond 2\*\*31 - 2",
        ),
        (
            "p max 2000000000 0\nn 1 s\nn 2 t\n",
            "line 1: node count 2000000000 too large for 0 arcs",
        ),
        (
            "p max 4 99999999999\nn 1 s\nn 4 t\n",
            r"line 1: arc count 99999999999 beyond 2\*\*31 - 1",
        ),
        ("p max 3 1\nn 1 s\nn 3 t\na 1 2 5\na 2 3 5\n", "line 5: more 'a' lines"),
        ("p max 4 1\nn 1 s\nn 4 t\na 1 4 1_000\n", "line 4: non-integer field"),
        ("p max 1_0 1\nn 1 s\nn 10 t\na 1 10 5\n", "line 1: non-integer field"),
        ("p max 10 1\nn 1 s\nn 1_0 t\na 1 10 5\n", "line 3: non-integer node"),
        ("p max 4 1\nn 1 s\nn 4 t\na 1 4 0x10\n", "line 4: non-integer field"),
        (
            "p max 4 1\nn 1 s\nn 4 t\na 1 4 " + "9" * 5000 + "\n",
            "line 4: field with too many digits",
        ),
    ],
)
def test_dimacs_errors(tmp_path, body, message):
    path = tmp_path / "bad.max"
    path.write_text(body)
    with pytest.raises(DimacsFormatError, match=message):
        read_dimacs(path)


def test_dimacs_isolated_nodes_and_signs_still_read(tmp_path):
    path = tmp_path / "g.max"
    path.write_text("p max 6 2\nn 1 s\nn 6 t\na 1 6 +7\na 6 1 3\n")
    g, s, t = read_dimacs(path)
    assert g.num_nodes == 6 and (s, t) == (0, 5)
    assert g.edge_capacity.tolist() == [7, 3]
    assert maximum_flow(g, s, t, backend="cpu").value == 7
    g = flow_graph([0], [1], [4], num_nodes=9)  # 7 isolated nodes round-trip
    write_dimacs(path, g, 0, 1)
    assert read_dimacs(path).graph.num_nodes == 9


@pytest.mark.parametrize("name", ["source", "sink"])
@pytest.mark.parametrize("value", [0.7, True, "0", None, "a", np.float64(1.0)])
def test_write_dimacs_terminal_types(tmp_path, name, value):
    g = flow_graph([0, 1], [1, 2], [3, 4])
    terminals = {"source": 0, "sink": 2, name: value}
    path = tmp_path / "g.max"
    with pytest.raises(TypeError, match=f"{name} must be an integer"):
        write_dimacs(path, g, terminals["source"], terminals["sink"])
    assert not path.exists()


@pytest.mark.parametrize(
    "graph, source, sink, message",
    [
        (flow_graph([0, 1], [1, 2], [3, 4]), 1, 1, "source and sink must differ"),
        (flow_graph([], [], [], num_nodes=1), 0, 0, "source and sink must differ"),
        (flow_graph([0, 1], [1, 2], [3, 4]), 0, 3, r"sink must lie in \[0, 2\]"),
        (flow_graph([0, 1], [1, 2], [3, 4]), -1, 2, r"source must lie in \[0, 2\]"),
    ],
)
def test_write_dimacs_writes_only_readable_files(tmp_path, graph, source, sink,
                                                 message):
    path = tmp_path / "g.max"
    with pytest.raises(ValueError, match=message):
        write_dimacs(path, graph, source, sink)
    assert not path.exists()


def test_write_dimacs_bad_comment_keeps_existing_file(tmp_path):
    g = flow_graph([0, 1], [1, 2], [3, 4])
    path = tmp_path / "g.max"
    write_dimacs(path, g, 0, 2)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="comment must be ASCII .*'é' at position 3"):
        write_dimacs(path, g, 0, 2, comment="café")
    with pytest.raises(TypeError, match="comment must be a string, got bytes"):
        write_dimacs(path, g, 0, 2, comment=b"abc")
    with pytest.raises(ValueError, match="source and sink must differ"):
        write_dimacs(path, g, 2, 2)
    assert path.read_bytes() == before


def test_cli_maxflow_huge_or_unaffordable_graphs(tmp_path, monkeypatch):
    from vision_cuts import dimacs, graph
    from vision_cuts.cli import main

    huge = tmp_path / "huge.max"
    huge.write_text("p max 2000000000 0\nn 1 s\nn 2 t\n")
    with pytest.raises(SystemExit, match="line 1: node count 2000000000"):
        main(["maxflow", str(huge), "--backend", "cpu"])
    small = tmp_path / "small.max"
    small.write_text("p max 2 1\nn 1 s\nn 2 t\na 1 2 3\n")

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(graph, "maximum_flow", no_memory)
    with pytest.raises(SystemExit, match="not enough memory to solve .* 2 nodes"):
        main(["maxflow", str(small), "--backend", "cpu"])
    monkeypatch.setattr(dimacs, "read_dimacs", no_memory)
    with pytest.raises(SystemExit, match="small.max: not enough memory to read"):
        main(["maxflow", str(small), "--backend", "cpu"])


def test_cli_maxflow(tmp_path, capsys):
    from vision_cuts.cli import main

    g, s, t = washington_rlg_graph(8, 6, seed=2)
    path = tmp_path / "rlg.max"
    write_dimacs(path, g, s, t)
    flow_file = tmp_path / "flow.txt"
    cut_file = tmp_path / "cut.txt"
    assert (
        main(
            [
                "maxflow",
                str(path),
                "--backend",
                "cpu",
                "--flow",
                str(flow_file),
                "--cut",
                str(cut_file),
            ]
        )
        == 0
    )
    value = scipy_value(g, s, t)
    out = capsys.readouterr().out
    assert out.startswith(f"max flow {value} from node 1 to node 50")
    assert flow_file.read_text().splitlines()[0] == f"s {value}"
    cut = np.loadtxt(cut_file, dtype=int, ndmin=1)
    assert 1 in cut and 50 not in cut
    bad = tmp_path / "bad.max"
    bad.write_text("p max 2 1\nn 1 s\nn 2 t\na 1 3 4\n")
    with pytest.raises(SystemExit, match="line 4"):
        main(["maxflow", str(bad), "--backend", "cpu"])


def test_kernel_names_exist():
    from vision_cuts._kernels import kernel_names

    names = kernel_names("graph_push_relabel.cu")
    for k in (
        "gpr_saturate_source",
        "gpr_bfs",
        "gpr_push_thread",
        "gpr_push_warp",
        "gpr_push_ballot",
    ):
        assert k in names


@pytest.mark.data
@pytest.mark.parametrize("name", sorted(KNOWN))
def test_dimacs_instances_known_values(data_dir, name, backend):
    path = data_dir / "maxflow_dimacs" / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    g, s, t = read_dimacs(path)
    res = maximum_flow(g, s, t, backend=backend)
    assert res.value == KNOWN[name]
    check_result(g, s, t, res)
    assert scipy_value(g, s, t) == KNOWN[name]


def test_write_dimacs_refuses_what_the_reader_refuses(tmp_path):
    from vision_cuts.dimacs import MAX_ISOLATED_NODES

    g = flow_graph([0], [1], [1], num_nodes=MAX_ISOLATED_NODES + 5)
    path = tmp_path / "isolated.max"
    with pytest.raises(ValueError, match=r"graph has 16777221 nodes but 1 arcs"):
        write_dimacs(path, g, 0, 1)
    assert not path.exists()


def test_dimacs_comment_lines_by_first_character(tmp_path):
    path = tmp_path / "c.max"
    path.write_text("c-------\ncomment\np max 2 1\nn 1 s\nn 2 t\na 1 2 7\n")
    g, s, t = read_dimacs(path)
    assert maximum_flow(g, s, t, backend="cpu").value == 7


def test_dimacs_byte_order_mark_is_skipped(tmp_path):
    """A file that starts with a UTF-8 byte-order mark (Windows editors) was refused
    with "unknown line type" and three replacement characters."""
    path = tmp_path / "bom.max"
    path.write_bytes(b"\xef\xbb\xbfp max 2 1\r\nn 1 s\r\nn 2 t\r\na 1 2 7\r\n")
    g, s, t = read_dimacs(path)
    assert maximum_flow(g, s, t, backend="cpu").value == 7
    path.write_bytes(b"p max 2 1\nn 1 s\nn 2 t\na 1 2 \xd9\xa7\n")  # Arabic 7
    with pytest.raises(DimacsFormatError, match="line 4: non-integer field"):
        read_dimacs(path)


def test_integer_scale_beyond_float_precision():
    g = flow_graph([0], [1], [1], scale=2**53 + 1)
    assert int(g.capacity[0]) == 2**53 + 1
    with pytest.raises(ValueError, match=r"scale must be a finite positive number"):
        flow_graph([0], [1], [1], scale=10**400)


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: flow_graph([0], [1], [2**64]), TypeError,
         r"capacities must have an integer or floating dtype, got object \(the list "
         r"given holds"),
        (lambda: flow_graph([2**64], [1], [1]), TypeError,
         r"tails must have an integer dtype, got object \(the list given holds"),
        (lambda: flow_graph(None, [1], [1]), TypeError,
         r"tails must be a 1-D array of integers, got None"),
        (lambda: flow_graph([0, 1], [1, 2], np.array([True, True])), TypeError,
         r"capacities must have an integer or floating dtype, got bool: convert it "
         r"to integers first"),
        (lambda: genrmf_graph(2, 2, seed=-1), ValueError, r"seed must be None, an"),
        (lambda: washington_rlg_graph(3, 2, seed="x"), TypeError, r"seed must be None"),
        (lambda: maximum_flow(flow_graph([0], [1], [1]), 0, 1,
                              method=np.array(["fifo", "x"])),
         ValueError, r"method must be 'highest' or 'fifo'"),
    ],
)
def test_more_named_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_cli_maxflow_flow_lines_follow_the_file(tmp_path, capsys):
    """``--flow`` writes a line for each arc of the file that carries flow, in file
    order: parallel arcs each within their own capacity (not one merged line above
    both), a self-loop none; the summary counts the file's arcs."""
    from vision_cuts.cli import main

    path = tmp_path / "p.max"
    path.write_text(
        "p max 3 6\nn 1 s\nn 3 t\na 1 2 5\na 2 2 4\na 1 2 4\na 2 3 7\na 1 3 1\n"
        "a 3 1 2\n"
    )
    out = tmp_path / "flow.txt"
    assert main(["maxflow", str(path), "--backend", "cpu", "--flow", str(out)]) == 0
    assert "(3 nodes, 6 arcs)" in capsys.readouterr().out
    lines = out.read_text().splitlines()
    assert lines[0] == "s 8"
    arcs = [tuple(int(v) for v in ln.split()[1:]) for ln in lines[1:]]
    caps = {0: 5, 2: 4, 3: 7, 4: 1}  # file arcs that can carry flow
    file_arcs = [(1, 2), (2, 2), (1, 2), (2, 3), (1, 3), (3, 1)]
    pos, flows = 0, {}
    for u, v, x in arcs:  # in file order: match each line to the next such arc
        while file_arcs[pos] != (u, v):
            pos += 1
        flows[pos] = x
        pos += 1
    assert all(0 < x <= caps[i] for i, x in flows.items())
    assert flows[3] == 7 and flows[4] == 1 and flows[0] + flows.get(2, 0) == 7
