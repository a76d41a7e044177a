"""Region split of the GPU's level-synchronous BFS (pure Python, no device needed)."""

from __future__ import annotations

import pytest

from vision_cuts._maxflow_gpu import _LV_WIDE_MIN_L, _level_geometry, _level_plan


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


@pytest.mark.parametrize(
    "nx, ny", [(2000, 2000), (2400, 2400), (2828, 2828), (3840, 2160), (2160, 3840),
               (256, 400), (256, 520), (8190, 1024), (4000, 3000), (3400, 3400),
               (4608, 3456), (256, 700)],
)  # fmt: skip
@pytest.mark.parametrize("gmax", [2, 108, 132])
@pytest.mark.parametrize("levels", [10, 24, 31])
def test_level_plan_takes_three_words_where_two_do_not_fit(nx, ny, gmax, levels):
    """Two words a thread at the levels asked for where they fit; else, with
    diagonals only, three words and the most levels a phase (at least _LV_WIDE_MIN_L,
    at most those asked for) that fit, else four alike; None where nothing does."""
    two = _level_geometry(nx, ny, gmax, levels, 1024, 2)
    for diag in (False, True):
        plan = _level_plan(nx, ny, gmax, levels, diag)
        if two is not None:
            assert plan == (2, levels, two)
            continue
        if not diag:
            assert plan is None
            continue
        # the first width (three words, then four) that fits at some levels a phase
        want = None
        for width in (3, 4):
            wide = [
                lv
                for lv in range(_LV_WIDE_MIN_L, levels + 1)
                if _level_geometry(nx, ny, gmax, lv, 1024, width) is not None
            ]
            if wide:
                want = (width, max(wide))
                break
        if want is None:
            assert plan is None
            continue
        nper, lv, geo = plan
        assert (nper, lv) == want
        assert geo == _level_geometry(nx, ny, gmax, lv, 1024, nper)
        cw, ch, rxn, regions = geo
        assert regions <= gmax and (cw + 2) * (ch + 2 * lv) <= nper * 1024


def test_level_plan_of_8_megapixels():
    # 2828 x 2828 on 132 SMs: no two-word split; three words at 30 levels a phase
    assert _level_geometry(2828, 2828, 132, 31, 1024, 2) is None
    assert _level_plan(2828, 2828, 132, 31, True)[:2] == (3, 30)
    assert _level_plan(2828, 2828, 132, 31, False) is None
    assert _level_plan(2000, 2000, 132, 31, True)[:2] == (2, 31)
    # 12 MP: four words at 21 levels a phase; 16 MP: nothing fits (the tile BFS)
    assert _level_plan(4000, 3000, 132, 31, True)[:2] == (4, 21)
    assert _level_plan(3400, 3400, 132, 31, True)[:2] == (4, 31)
    assert _level_plan(4608, 3456, 132, 31, True) is None
