"""benchmarks/push_tile_times.py: the launch split and the neighbour-scheduled model.

The script's numbers (benchmarks/NOTES_gpu_grid.md, twelfth round) rest on two pieces
of host code that run without a GPU: the split of recorded tile runs into launches and
rounds, and the model that schedules the same runs by their neighbours. Both are
checked here on hand-made runs whose answers are worked out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import load_benchmark

US = 1000  # ns


@pytest.fixture(scope="module")
def ptt():
    return load_benchmark("push_tile_times")


def _runs(rows):
    """Rows of (start us, end us, tile) as the recorded array (local rounds 16)."""
    return np.array([[a * US, b * US, t, 16] for a, b, t in rows], dtype=np.int64)


# a 4 x 2 grid of tiles (ids ty * 4 + tx); colour 0 = (tx + ty) even: 0, 2, 5, 7
NTX, NTY = 4, 2


def test_launches_and_rounds(ptt):
    runs = _runs(
        [
            (0, 10, 0),
            (0, 50, 2),  # launch 1, colour 0
            (55, 60, 1),
            (55, 70, 4),  # launch 2, colour 1
            (75, 80, 0),  # launch 3, colour 0 (the next sweep)
            (300, 310, 5),  # after a relabel's gap: the next round
        ]
    )
    assert ptt.launches_of(runs, NTX) == [(0, 2), (2, 4), (4, 5), (5, 6)]
    rounds = ptt.analyse(runs, NTX, NTY, slots=660, round_gap_us=40)
    assert [r["launches"] for r in rounds] == [3, 1]
    assert rounds[0]["measured_us"] == 80 and rounds[0]["launch_spans_us"] == 70
    assert rounds[1]["measured_us"] == 10


def test_model_follows_face_neighbours_and_corners(ptt):
    runs = _runs([(0, 10, 0), (0, 50, 2), (55, 65, 1), (55, 63, 4), (70, 80, 0)])
    launches = ptt.launches_of(runs, NTX)
    # tile 1 waits for its face neighbours 0 and 2 (ends 10 and 50): 50 + 10; tile 4
    # for tile 0 only: 10 + 8. Sweep 2's run of tile 0 waits for tiles 1 and 4 (ends
    # 60 and 18) and for the corner item at (1, 1), the corner of tiles 0, 1, 4 and 5,
    # ready at 60: with items of 3 us it runs from 63 to 73, and the item at its corner
    # after it ends at 76.
    assert ptt.model(runs, launches, NTX, NTY, slots=660, corner_ns=0) == 70 * US
    assert ptt.model(runs, launches, NTX, NTY, slots=660, corner_ns=3 * US) == 76 * US
    # one block at a time, in the order the runs become ready: 0 (0-10), 2 (10-60),
    # 4 (60-68), 1 (68-78), then tile 0 again (78-88)
    assert ptt.model(runs, launches, NTX, NTY, slots=1, corner_ns=0) == 88 * US
    # four colours: tile 4 runs after tile 1 (the other row, a diagonal neighbour) ends
    # at 60, 60-68; tile 0 then 68-78
    assert ptt.model(runs, launches, NTX, NTY, slots=660, colours=4) == 78 * US


def test_model_with_tiles_bound_to_one_block(ptt):
    """One block owns every tile: it takes the phases in order and each phase's tiles
    as they become ready; a tile that did not run ends its phase 0.5 us after it is
    ready and the block reaches it, and the corners wait for their four tiles."""
    runs = _runs([(0, 10, 0), (0, 50, 2), (55, 65, 1), (55, 63, 4), (70, 80, 0)])
    launches = ptt.launches_of(runs, NTX)
    # sweep 1, colour 0: tiles 0 (0-10) and 2 (10-60), 5 and 7 skipped (60.5);
    # colour 1, all ready at 60.5: 1 (60.5-70.5), 3 skipped (71), 4 (70.5-78.5), 6
    # skipped (79); corners (1, 1) at 80.5, (2, 1) and (3, 1) at 81. Sweep 2, colour 0:
    # tile 0 ready at 80.5, run 81-91, the others skipped (91.5); colour 1 skipped (92);
    # the corners at 94.
    assert ptt.model_bound(runs, launches, NTX, NTY, blocks=1) == 94 * US


def test_model_with_items_claimed_one_at_a_time(ptt):
    """The items claimed in slot order by the one block, no claim, hop or run costs:
    sweep 1 as in the bound model (but tile 1 and 4 in slot order: 60.5-70.5 and
    70.5-78.5); the corners end at 80.5 / 81 / 81 without holding the block, so tile
    0 runs 80.5-90.5 and sweep 2's skipped tiles end at 91 and 91.5; the last corners
    at 93.5."""
    runs = _runs([(0, 10, 0), (0, 50, 2), (55, 65, 1), (55, 63, 4), (70, 80, 0)])
    launches = ptt.launches_of(runs, NTX)
    zero = dict(claim_ns=0, hop_ns=0, run_ns=0)
    assert ptt.model_claimed(runs, launches, NTX, NTY, blocks=1, **zero) == 93.5 * US
    # a claim costs the block, a hop delays the start: both only lengthen it
    assert ptt.model_claimed(runs, launches, NTX, NTY, blocks=1) > 93.5 * US
