"""How much of the push time is the wait for each launch's slowest tile (GPU; the push
kernels built with PR_TIMES).

With ``PR_TIMES=1`` thread 0 of every push tile run records the run's global-timer
start and end and its local rounds (``kernels/grid_push_relabel.cu``). One solve of a
segmentation energy (CuPy arrays in, after warm-up solves) is recorded; the runs are
split into launches (launches of one stream do not overlap, and consecutive colour
launches alternate colours) and into rounds (a gap of more than ``--round-gap`` us: the
global relabel). For each round this prints the measured push time (first run's start
to the last run's end: colour launches, corner launches and the gaps between them)
beside a model of the same tile runs scheduled by their neighbours instead of by
launches (see :func:`model`: each run taking its measured time, on at most as many
blocks at once as the push kernel keeps resident). The gap between the two is what a
push grid that starts each tile when its neighbours are done (no launch boundaries, no
corner launches) could save, before its own costs. ``--raw`` saves the runs,
``--from-raw`` analyses saved runs without a GPU.

    python benchmarks/push_tile_times.py --pictures astronaut coffee --json out.json
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from level_bfs_phases import _view, modules_with, segmentation_arrays  # noqa: E402


def record(name: str, side: int, conn: int) -> tuple[np.ndarray, dict, tuple]:
    """(runs as rows of start ns, end ns, tile, local rounds; the solve's stats; the
    tile grid (ntx, nty))."""
    import cupy

    import vision_cuts as vc

    arrays = segmentation_arrays(name, side, conn)
    for _ in range(3):
        cut = vc.maxflow_grid(*arrays, backend="gpu")
    cupy.cuda.Device().synchronize()
    mods = modules_with("pr_tn")  # the push modules built with PR_TIMES
    for m in mods:
        _view(m, "pr_tn", cupy.uint32, (1,))[0] = 0
    cupy.cuda.Device().synchronize()
    cut = vc.maxflow_grid(*arrays, backend="gpu")
    cupy.cuda.Device().synchronize()
    rows = []
    for m in mods:
        n = int(_view(m, "pr_tn", cupy.uint32, (1,))[0].get())
        if n == 0:
            continue
        n = min(n, 1 << 20)
        t = _view(m, "pr_times", cupy.uint64, (2 << 20,))[: 2 * n].get()
        t = t.astype(np.int64)
        meta = _view(m, "pr_tmeta", cupy.uint32, (1 << 20,))[:n].get().astype(np.int64)
        rows.append(np.stack([t[0::2], t[1::2], meta >> 8, meta & 255], axis=1))
    runs = np.concatenate(rows) if rows else np.zeros((0, 4), np.int64)
    runs = runs[np.argsort(runs[:, 0], kind="stable")]
    tile = cut.stats["tile"]
    ntx = -(-side // tile[0])
    nty = -(-side // tile[1])
    return runs, cut.stats, (ntx, nty)


def _colour(tile, ntx: int):
    """The checkerboard colour of a tile index (or an array of them): (tx + ty) & 1, as
    vc_colour_tile numbers them."""
    return (tile % ntx + tile // ntx) & 1


def launches_of(runs: np.ndarray, ntx: int) -> list:
    """Index ranges of the launches: a new one where the colour ((tx + ty) & 1) changes
    or where a run starts after every earlier run has ended and more than 1 us later."""
    out, start, last_end = [], 0, None
    colour = _colour(runs[:, 2], ntx)
    for i in range(len(runs)):
        if i > start and (colour[i] != colour[start] or runs[i, 0] > last_end + 1000):
            out.append((start, i))
            start = i
        last_end = runs[i, 1] if i == start else max(last_end, runs[i, 1])
    if len(runs):
        out.append((start, len(runs)))
    return out


def _sweeps(runs: np.ndarray, launches: list, ntx: int) -> list:
    """The launches of a round grouped into sweeps (colour 0, then colour 1; a launch
    with no run leaves no trace, so a sweep starts at each colour-0 launch and after
    two colour-1 launches in a row)."""
    out, last = [], None
    for a, b in launches:
        c = int(_colour(runs[a, 2], ntx))
        if not out or c == 0 or last == 1:
            out.append([])
        out[-1].append((a, b))
        last = c
    return out


_FACES = ((1, 0), (-1, 0), (0, 1), (0, -1))


def _ready(fin, cfin: dict, tx: int, ty: int, ntx: int, nty: int, t0: int, nbrs=_FACES):
    """When tile (tx, ty) may start: the latest end among its neighbours ``nbrs``
    (``fin``: each tile's last end, t0 where none) and its four corners (``cfin``)."""
    r = t0
    for dx, dy in nbrs:
        x, y = tx + dx, ty + dy
        if 0 <= x < ntx and 0 <= y < nty:
            r = max(r, int(fin[y * ntx + x]))
    for q in ((tx, ty), (tx + 1, ty), (tx, ty + 1), (tx + 1, ty + 1)):
        r = max(r, cfin.get(q, t0))
    return r


def model(
    runs: np.ndarray,
    launches: list,
    ntx: int,
    nty: int,
    slots: int,
    corner_ns: float = 2000.0,
    colours: int = 2,
) -> float:
    """Makespan (ns) of the tile runs of one round scheduled by their neighbours: a run
    starts once the earlier runs of its own tile and of its neighbours in the round have
    ended, on at most ``slots`` blocks at once (in the order they become ready), taking
    its measured time. ``colours`` 2: the face neighbours (the other colour), and after
    each sweep a corner item of ``corner_ns`` at every tile corner a run of the sweep
    touched (ready when the latest runs of its four tiles have ended), which the runs of
    the next sweep at that corner wait for; 4: each launch split into its two rows of
    tiles by parity, every one of the eight neighbours a dependency and no corner
    items (the corner arcs pushed by the tile runs)."""
    t0 = int(runs[launches[0][0], 0])
    fin = np.full(ntx * nty, t0, dtype=np.int64)
    cfin: dict = {}
    free = [t0] * slots
    heapq.heapify(free)
    end = t0
    if colours == 2:
        nbrs = _FACES
    else:
        nbrs = tuple((x, y) for x in (-1, 0, 1) for y in (-1, 0, 1) if x or y)
    for sweep in _sweeps(runs, launches, ntx):
        phases = []
        for a, b in sweep:
            idx = np.arange(a, b)
            if colours == 2:
                phases.append(idx)
            else:
                par = (runs[a:b, 2] // ntx) & 1
                phases += [idx[par == 0], idx[par == 1]]
        touched = set()
        for ph in phases:
            ready = []
            for i in ph:
                tile = int(runs[i, 2])
                tx, ty = tile % ntx, tile // ntx
                r = _ready(fin, cfin, tx, ty, ntx, nty, t0, nbrs)
                ready.append((max(r, int(fin[tile])), int(i)))
            ready.sort()
            done = {}
            for r, i in ready:
                s = max(r, heapq.heappop(free))
                f = s + int(runs[i, 1] - runs[i, 0])
                heapq.heappush(free, f)
                done[int(runs[i, 2])] = f
                touched.add(int(runs[i, 2]))
                end = max(end, f)
            for tile, f in done.items():
                fin[tile] = f
        if colours != 2:
            continue
        for tile in touched:
            tx, ty = tile % ntx, tile // ntx
            for jx, jy in ((tx, ty), (tx + 1, ty), (tx, ty + 1), (tx + 1, ty + 1)):
                if 1 <= jx < ntx and 1 <= jy < nty:
                    four = ((jx - 1, jy - 1), (jx, jy - 1), (jx - 1, jy), (jx, jy))
                    r = max(int(fin[y * ntx + x]) for x, y in four)
                    cfin[(jx, jy)] = r + corner_ns
                    end = max(end, r + corner_ns)
    return float(end - t0)


def _by_colour(ntx: int, nty: int) -> dict:
    """Colour -> the tiles of that colour as (slot, tile, tx, ty), in slot order (the
    slots of vc_colour_tile: ty * ceil(ntx / 2) + tx // 2)."""
    nhx = -(-ntx // 2)
    out: dict = {0: [], 1: []}
    for ty in range(nty):
        for tx in range(ntx):
            out[(tx + ty) & 1].append((ty * nhx + tx // 2, ty * ntx + tx, tx, ty))
    return {c: sorted(v) for c, v in out.items()}


def _durations(runs: np.ndarray, sweep: list, ntx: int) -> dict:
    """Colour -> {tile: run time (ns)} of one sweep's launches."""
    dur: dict = {0: {}, 1: {}}
    for a, b in sweep:
        c = int(_colour(runs[a, 2], ntx))
        for i in range(a, b):
            dur[c][int(runs[i, 2])] = int(runs[i, 1] - runs[i, 0])
    return dur


def _take(now: int, items: list, dur: dict, fin, poll_ns: float, run_ns: float) -> int:
    """One block takes ``items`` ((ready, tile), in the order they become ready) from
    ``now``: a tile of ``dur`` runs (its time plus ``run_ns``), another ends
    ``poll_ns`` after it is ready and the block reaches it; their ends go to ``fin``.
    Returns when the block is free."""
    for r, tile in sorted(items):
        d = dur.get(tile)
        if d is None:
            fin[tile] = max(now, r) + poll_ns
        else:
            now = max(now, r) + d + run_ns
            fin[tile] = now
    return now


def _corners(fin, ntx: int, nty: int):
    """(index, (jx, jy), the latest end of its four tiles) of each inner tile corner."""
    for jy in range(1, nty):
        for jx in range(1, ntx):
            four = ((jx - 1, jy - 1), (jx, jy - 1), (jx - 1, jy), (jx, jy))
            r = max(int(fin[y * ntx + x]) for x, y in four)
            yield (jy - 1) * (ntx - 1) + jx - 1, (jx, jy), r


def model_bound(
    runs: np.ndarray,
    launches: list,
    ntx: int,
    nty: int,
    blocks: int,
    corner_ns: float = 2000.0,
    poll_ns: float = 500.0,
    hop_ns: float = 0.0,
    run_ns: float = 0.0,
) -> float:
    """Makespan (ns) of the same schedule with each tile bound to a block, as a push
    grid that hands block b the colour slots b, b + blocks, ... and the tile corners b,
    b + blocks, ... runs it: a block takes the phases (sweep s, colour c) in order and
    its items of a phase in the order they become ready (face neighbours' phase
    2 s + c - 1 ended, its corners' sweep s - 1 ended), one at a time; a tile that did
    not run in that sweep's launch ends its phase ``poll_ns`` after it is ready and
    the block reaches it (it costs its neighbours a wait, not its block a run); then
    the block's corners of the sweep, ``corner_ns`` each once their four tiles ended
    the sweep (2-D, two colours). ``hop_ns``: from the end of what an item waits for to
    its start; ``run_ns``: added to every run (the grid's own costs)."""
    t0 = int(runs[launches[0][0], 0])
    fin = np.full(ntx * nty, t0, dtype=np.int64)
    cfin: dict = {}
    clock = np.full(blocks, t0, dtype=np.int64)
    tiles = _by_colour(ntx, nty)
    for sweep in _sweeps(runs, launches, ntx):
        dur = _durations(runs, sweep, ntx)
        for c in (0, 1):
            prev = fin.copy()
            items: dict = {}
            for slot, tile, tx, ty in tiles[c]:
                r = _ready(prev, cfin, tx, ty, ntx, nty, t0)
                items.setdefault(slot % blocks, []).append((r + hop_ns, tile))
            for blk, lst in items.items():
                clock[blk] = _take(int(clock[blk]), lst, dur[c], fin, poll_ns, run_ns)
        ends: dict = {}
        for j, corner, r in _corners(fin, ntx, nty):
            blk = j % blocks
            cfin[corner] = max(int(clock[blk]), r) + corner_ns
            ends[blk] = max(ends.get(blk, t0), cfin[corner])
        for blk, f in ends.items():
            clock[blk] = max(int(clock[blk]), f)
    return float(max(int(clock.max()), int(fin.max())) - t0)


def model_claimed(
    runs: np.ndarray,
    launches: list,
    ntx: int,
    nty: int,
    blocks: int,
    corner_ns: float = 2000.0,
    poll_ns: float = 500.0,
    claim_ns: float = 500.0,
    hop_ns: float = 2000.0,
    run_ns: float = 1000.0,
    batch: int = 1,
) -> float:
    """Makespan (ns) of the same schedule with the items claimed ``batch`` at a time:
    the phases' items (sweep s, colour c; slot order) go in turn to the block that is
    free first, which spends ``claim_ns`` on a claim, and takes the claimed items in
    the order they become ready: each ``hop_ns`` after what it waits for has ended
    (face neighbours' phase 2 s + c - 1, corners of sweep s - 1), run for its measured
    time plus ``run_ns``, or, for a tile that did not run, ended ``poll_ns`` later
    without holding the block; the corners end ``corner_ns`` after their four tiles'
    sweep, on no block (2-D, two colours)."""
    t0 = int(runs[launches[0][0], 0])
    fin = np.full(ntx * nty, t0, dtype=np.int64)
    cfin: dict = {}
    free = [(t0, b) for b in range(blocks)]
    heapq.heapify(free)
    tiles = _by_colour(ntx, nty)
    for sweep in _sweeps(runs, launches, ntx):
        dur = _durations(runs, sweep, ntx)
        for c in (0, 1):
            prev = fin.copy()
            for k in range(0, len(tiles[c]), batch):
                claimed = [
                    (_ready(prev, cfin, tx, ty, ntx, nty, t0) + hop_ns, tile)
                    for _, tile, tx, ty in tiles[c][k : k + batch]
                ]
                now, blk = heapq.heappop(free)
                now = _take(now + claim_ns, claimed, dur[c], fin, poll_ns, run_ns)
                heapq.heappush(free, (now, blk))
        for _, corner, r in _corners(fin, ntx, nty):
            cfin[corner] = r + corner_ns
    return float(max([int(fin.max()), *cfin.values()]) - t0)


def analyse(runs, ntx, nty, slots, round_gap_us, corner_ns=2000.0):
    launches = launches_of(runs, ntx)
    rounds, cur = [], [launches[0]] if launches else []
    for prev, nxt in zip(launches, launches[1:], strict=False):
        gap = runs[nxt[0], 0] - runs[prev[0] : prev[1], 1].max()
        if gap > round_gap_us * 1000:
            rounds.append(cur)
            cur = []
        cur.append(nxt)
    if cur:
        rounds.append(cur)
    out = []
    for rl in rounds:
        a, b = rl[0][0], rl[-1][1]
        measured = float(runs[a:b, 1].max() - runs[a, 0])
        spans = sum(float(runs[x:y, 1].max() - runs[x, 0]) for x, y in rl)
        out.append(
            dict(
                launches=len(rl),
                runs=int(b - a),
                mean_run_us=float((runs[a:b, 1] - runs[a:b, 0]).mean() / 1e3),
                max_runs_a_launch=max(y - x for x, y in rl),
                measured_us=measured / 1e3,
                launch_spans_us=spans / 1e3,
                model_us=model(runs, rl, ntx, nty, slots, corner_ns) / 1e3,
                model_free_corners_us=model(runs, rl, ntx, nty, slots, 0.0) / 1e3,
                model_four_colours_us=model(runs, rl, ntx, nty, slots, colours=4) / 1e3,
                model_bound_us=model_bound(runs, rl, ntx, nty, slots, corner_ns) / 1e3,
                model_claimed_us=model_claimed(runs, rl, ntx, nty, slots, corner_ns)
                / 1e3,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pictures", nargs="+", default=["astronaut", "coffee"])
    ap.add_argument("--side", type=int, default=1414)
    ap.add_argument("--connectivity", type=int, default=8)
    ap.add_argument("--round-gap", type=float, default=40.0, help="us")
    ap.add_argument("--corner-us", type=float, default=2.0, help="a corner item")
    ap.add_argument("--json")
    ap.add_argument("--raw", help="save every picture's runs and tile grid (.npz)")
    ap.add_argument(
        "--from-raw",
        help="analyse the runs saved by --raw (no GPU; --slots blocks at once)",
    )
    ap.add_argument("--slots", type=int, default=660)
    args = ap.parse_args()

    result, raw = {}, {}
    if args.from_raw:
        saved = np.load(args.from_raw)
        pictures = [k for k in saved.files if not k.endswith("_grid")]
    else:
        import cupy

        import vision_cuts._maxflow_gpu as mg

        mg._EXTRA_DEFINES["PR_TIMES"] = 1
        sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        pictures = args.pictures
    for name in pictures:
        if args.from_raw:
            runs, (ntx, nty) = saved[name], saved[name + "_grid"]
            stats, slots = {}, args.slots
        else:
            runs, stats, (ntx, nty) = record(name, args.side, args.connectivity)
            raw[name] = runs
            raw[name + "_grid"] = np.array([ntx, nty])
            slots = sms * int(stats.get("push_min_blocks") or 1)
        rounds = analyse(
            runs, int(ntx), int(nty), slots, args.round_gap, args.corner_us * 1e3
        )
        tot = {
            k: sum(r[k] for r in rounds) / 1e3
            for k in (
                "measured_us",
                "launch_spans_us",
                "model_us",
                "model_free_corners_us",
                "model_four_colours_us",
                "model_bound_us",
                "model_claimed_us",
            )
        }
        print(
            f"{name}: {len(runs)} tile runs, {len(rounds)} rounds found "
            f"({stats.get('global_relabels')} relabels, {stats.get('sweeps')} sweeps), "
            f"push {tot['measured_us']:.2f} ms measured (launches "
            f"{tot['launch_spans_us']:.2f}); scheduled by neighbours, {slots} blocks "
            f"at once: {tot['model_us']:.2f} ms with corner items of "
            f"{args.corner_us:g} us ({tot['model_free_corners_us']:.2f} without), "
            f"{tot['model_four_colours_us']:.2f} with four colours, "
            f"{tot['model_bound_us']:.2f} with each tile bound to a block, "
            f"{tot['model_claimed_us']:.2f} claimed one at a time (0.5 us a claim, "
            "2 us a hop, 1 us more a run)"
        )
        for i, r in enumerate(rounds):
            print(
                f"  round {i + 1:2d}: {r['launches']:2d} launches {r['runs']:6d} runs "
                f"(most {r['max_runs_a_launch']:5d}, mean {r['mean_run_us']:5.1f} us) "
                f"measured {r['measured_us']:7.1f} us, "
                f"launches {r['launch_spans_us']:7.1f}, model {r['model_us']:7.1f}"
            )
        result[name] = dict(
            stats={k: v for k, v in stats.items() if not isinstance(v, dict)},
            rounds=rounds,
            slots=slots,
            corner_us=args.corner_us,
            **{k.replace("_us", "_ms"): v for k, v in tot.items()},
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
    if args.raw:
        np.savez_compressed(args.raw, **raw)


if __name__ == "__main__":
    main()
