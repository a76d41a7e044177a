"""Region split of the GPU's level-synchronous BFS (pure Python, no device needed)."""

from __future__ import annotations

import pytest

from vision_cuts._maxflow_gpu import _level_geometry


@pytest.mark.parametrize(
    "nx, ny",
    [(1, 1), (1, 300), (300, 1), (31, 33), (548, 548), (1000, 700), (1414, 1414)],
)
@pytest.mark.parametrize("levels", [1, 16, 31])
@pytest.mark.parametrize("gmax", [1, 7, 132])
def test_regions_cover_the_grid_and_fit_the_blocks(nx, ny, levels, gmax):
    geo = _level_geometry(nx, ny, gmax, levels)
    if geo is None:  # too large for gmax blocks: the tile BFS runs instead
        nwr = -(-nx // 32)
        assert all(
            (cw + 2) * (-(-ny // max(1, gmax // -(-nwr // cw))) + 2 * levels) > 2048
            for cw in range(1, nwr + 1)
            if -(-nwr // cw) <= gmax
        )
        return
    cw, ch, rxn, regions = geo
    nwr = -(-nx // 32)
    assert cw >= 1 and ch >= 1
    assert rxn == -(-nwr // cw) and rxn * cw >= nwr > (rxn - 1) * cw
    ryn = regions // rxn
    assert regions == rxn * ryn <= gmax
    assert ryn * ch >= ny > (ryn - 1) * ch  # every row in one region, none empty
    assert (cw + 2) * (ch + 2 * levels) <= 1024 * 2  # words a block can hold


def test_a_grid_too_large_for_the_regions_has_none():
    assert _level_geometry(2828, 2828, 132, 31) is None
    assert _level_geometry(1414, 1414, 132, 31) is not None
