"""benchmarks/emulate_region_discharge.py: the region-discharge emulation is exact.

A design tool like the GPU emulator, but every sweep count it reports is only worth
something if the discharges end in a maximum flow: its flows are checked against the
CPU solver on random 4- and 8-connected grids, with regions of several sizes (some
cut by the grid's edge), with and without the global relabels.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import load_benchmark

from vision_cuts._maxflow_cpu import maxflow_grid_cpu
from vision_cuts.grid import neighbour_offsets


@pytest.fixture(scope="module")
def ard():
    return load_benchmark("emulate_region_discharge")


def _random_grid(rng, shape, planes, high=60):
    m, n = shape
    src = (rng.integers(0, high, shape) * (rng.random(shape) < 0.5)).astype(np.int32)
    snk = (rng.integers(0, high, shape) * (rng.random(shape) < 0.5)).astype(np.int32)
    edges = rng.integers(0, high, (planes, m, n)).astype(np.int32)
    edges *= (rng.random(edges.shape) < 0.7).astype(np.int32)
    offsets = neighbour_offsets(2, planes)
    y, x = np.mgrid[0:m, 0:n]
    for k, (dy, dx) in enumerate(offsets):
        outside = (y + dy < 0) | (y + dy >= m) | (x + dx < 0) | (x + dx >= n)
        edges[k][outside] = 0
    return src, snk, edges, offsets


@pytest.mark.parametrize("planes", [4, 8])
@pytest.mark.parametrize(("region", "global_every"), [(4, 1), (5, 3), (8, 2), (64, 1)])
def test_region_discharge_flow_is_the_cpu_solvers(ard, planes, region, global_every):
    rng = np.random.default_rng(planes * 100 + region)
    for shape in ((13, 17), (24, 24), (1, 30), (9, 1)):
        src, snk, edges, offsets = _random_grid(rng, shape, planes)
        want, _, _ = maxflow_grid_cpu(src, snk, edges)
        flow, records, _ = ard.solve(src, snk, edges, offsets, region, global_every)
        assert flow == want
        # bounded work: the sweeps end, each one discharging a region at least
        assert len(records) < 200
        assert all(sum(r["regions"]) > 0 for r in records)
        # the labels never fell: each region relabel kept a valid labelling
        assert all(r["labels_fell"] == 0 for r in records)


def test_region_discharge_of_a_segmentation_energy(ard):
    # a real picture's energy (8-connected, 96 x 96), 16 x 16 regions
    import skimage.data
    import skimage.transform

    from vision_cuts import grid_energy
    from vision_cuts.datasets.synthetic import segmentation_problem

    img = skimage.transform.resize(skimage.data.astronaut(), (96, 96))
    u, w = segmentation_problem((img * 255).astype(np.uint8), connectivity=8)
    e = grid_energy(u, weights=w, connectivity=8)
    want, _, _ = maxflow_grid_cpu(e.source, e.sink, e.edges)
    flow, records, _ = ard.solve(
        e.source, e.sink, e.edges, neighbour_offsets(2, 8), 16, 1
    )
    assert flow == want and 0 < len(records) < 50


def test_region_discharge_needs_its_global_relabels(ard):
    src, snk, edges, offsets = _random_grid(np.random.default_rng(0), (8, 8), 4)
    with pytest.raises(ValueError, match="global_every must be at least 1, got 0"):
        ard.solve(src, snk, edges, offsets, 4, 0)
