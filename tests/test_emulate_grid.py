"""benchmarks/emulate_grid_gpu.py: the CPU emulation of the GPU grid solve is exact.

The emulator is a design tool (it predicts the GPU's rounds), but every schedule it
tries must still end in a maximum flow: its flows are checked against the CPU solver
here, and its minimum cut (the nodes the last BFS reaches) against the flow.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import load_benchmark

from vision_cuts import grid_graph
from vision_cuts._maxflow_cpu import maxflow_grid_cpu
from vision_cuts.datasets import synthetic


@pytest.fixture(scope="module")
def emu():
    return load_benchmark("emulate_grid_gpu")


def _graph(rng, shape, **kw):
    return grid_graph(*synthetic.random_grid_graph(shape, rng, **kw))


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"sweeps": 1, "iters": 3},
        {"stale": 1},
        {"stale": 2},
        {"shift": True},
        {"walk_below": 10**9},
        {"lr_at": 2, "lr_every": 3},
        {"lr_at": 1, "lr_below": 50},
        {"stall": 2},
        {"tail_sweeps": 5},
        {"early": 4},
        {"cap": 6},
        {"cap": 6, "blk": 4},
        {"cap": 3, "blk": 2},
        {"flip": (-1,)},
        {"flip": (0,)},
        {"flip": (-1, 1, 2)},
        {"flip": tuple(range(40))},
    ],
    ids=str,
)
def test_emulated_flow_is_the_maximum_flow(emu, kw):
    rng = np.random.default_rng(7)
    for shape, high in [((70, 90), 50), ((33, 65), 10**6), ((1, 40), 5), ((64, 64), 3)]:
        g = _graph(rng, shape, high=high)
        want = maxflow_grid_cpu(g.source, g.sink, g.edges)[0]
        res = emu.solve(g.source, g.sink, g.edges, **kw)
        assert res["flow"] == want, (shape, kw)
        assert res["active"][-1] == 0
        assert res["model_ms"] > 0


def test_emulated_rounds_follow_the_schedule(emu):
    """More sweeps a round never need more global relabels on this instance, and every
    round reports its launches (two a sweep) and a BFS depth."""
    rng = np.random.default_rng(3)
    g = _graph(rng, (96, 128), high=20, density=0.5)
    one = emu.solve(g.source, g.sink, g.edges, sweeps=1)
    four = emu.solve(g.source, g.sink, g.edges, sweeps=4)
    assert one["flow"] == four["flow"]
    assert len(four["rounds"]) <= len(one["rounds"])
    for r in four["rounds"]:
        assert len(r["launches"]) == 8
        assert r["depth"] >= 0


@pytest.mark.parametrize("blk", [0, 1, 2, 5])
def test_capped_relabel_is_a_valid_labelling(emu, blk):
    """``bfs_capped`` leaves exact distances up to its cap, a valid labelling (h(u) <=
    h(v) + 1 on residual arcs, 1 at most where a sink arc is left), lower bounds of
    the distances everywhere, and VC_INF only where the sink cannot be reached."""
    rng = np.random.default_rng(11 + blk)
    inf = int(emu.INF)
    for shape, density in [((40, 50), 0.55), ((9, 120), 0.7), ((64, 64), 0.45)]:
        s, t, e = synthetic.random_grid_graph(shape, rng, high=9, density=density)
        ny, nx = shape
        n = nx * ny
        rc = np.asarray(e, dtype=np.int64).reshape(4, n).copy()
        tcap = np.maximum(np.asarray(t, dtype=np.int64) - s, 0).reshape(-1)
        exact = np.full(n, inf, dtype=np.int32)
        depth = emu.bfs(rc, tcap, ny, nx, exact)
        for old in (np.zeros(n, dtype=np.int32), np.minimum(exact, 2)):
            for cap in (1, 4, max(2, depth // 2)):
                h = old.copy()
                emu.bfs_capped(rc, tcap, ny, nx, h, cap, blk)
                near = exact <= cap
                assert np.array_equal(h[near], exact[near]), (shape, cap)
                assert np.all(h <= exact)  # lower bounds; VC_INF only where exact
                assert np.all(h[tcap > 0] <= 1)
                g = np.arange(n)
                x, y = g % nx, g // nx
                for k, (dx, dy) in enumerate([(1, 0), (-1, 0), (0, 1), (0, -1)]):
                    inside = (
                        (0 <= x + dx) & (x + dx < nx) & (0 <= y + dy) & (y + dy < ny)
                    )
                    u = g[inside & (rc[k] > 0)]
                    v = u + dy * nx + dx
                    fin = h[v] < inf
                    assert np.all(h[u][fin] <= h[v][fin] + 1), (shape, cap, k)
