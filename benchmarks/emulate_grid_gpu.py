"""CPU emulation (numba) of the GPU grid max-flow's 2-D solve, round by round.

Runs the algorithm of ``kernels/grid_push_relabel.cu`` and ``kernels/grid_bfs.cu`` as
the GPU runs it with its 2-D defaults: 32 x 32 push tiles of one checkerboard colour a
launch, up to ``iters`` synchronous push / relabel rounds a tile (the heights of a
round fixed, pushes collected after a barrier, as ``vc_push_tile`` does), ``sweeps``
sweeps of both colours a round, then an exact global relabel (BFS from the sink) and
the active count. The launches are deterministic on the GPU, so the emulation follows
the GPU exactly: on the 2 MP astronaut segmentation of ``gpu_grid_check.py`` the active
counts after every global relabel equal the GPU's (1132653, 152760, 54819, ..., 4, 0).

What the GPU's time follows is printed a round: tiles run and their local rounds (the
most of one tile sets a tail launch's length), the BFS depth (the largest finite
distance: a global relabel's length), the active excess; and a time model fitted to the
H200 profile of the default 2 MP solve (a push launch 12.8 us + 0.65 us a local round of
its longest tile, 1.6 us a round and wave of 264 tiles where more than 132 run; a global
relabel 63 us + 0.45 us a BFS level; 0.58 ms besides), which gives 6.16 ms against the
6.19 ms measured. Variants of the schedule that the GPU does not run can be tried here
first (``benchmarks/NOTES_gpu_grid.md``, sixth round, has what they gave):

    python benchmarks/emulate_grid_gpu.py --mp 2
    python benchmarks/emulate_grid_gpu.py --mp 2 --stale 1      # BFS one sweep stale
    python benchmarks/emulate_grid_gpu.py --mp 2 --local-relabel 4
    python benchmarks/emulate_grid_gpu.py --mp 2 --local-relabel 6 \
        --local-relabel-below 2000  # the local relabel in the tail only
    python benchmarks/emulate_grid_gpu.py --mp 2 --shift --walk-below 300
    python benchmarks/emulate_grid_gpu.py --mp 2 --early 31  # BFS stopped early
    python benchmarks/emulate_grid_gpu.py --mp 2 --cap 384 --block 16  # see below
    python benchmarks/emulate_grid_gpu.py --mp 2 --flip 0  # reversed after round 0

``--cap D --block B``: the global relabels of the busy rounds (at least n / 1024 active
nodes; an exact one after a round whose active count did not fall) give exact distances
up to level D only, and the nodes beyond it max(old height, D + 1 + their block's
distance) in the graph of B x B blocks (``bfs_capped``); ``--cap D`` alone gives them
max(old height, D + 1), the seventh round's capped BFS. ``--json F`` appends each
solve's work counters to F.

Every variant keeps the preflow exact (it only changes which pushes happen), and the
flow is checked against the CPU solver.
"""

from __future__ import annotations

import argparse
import json
import time

import numba
import numpy as np

INF = np.int32(0x7FFFFF00)  # VC_INF
TX = 32  # push tile (the 2-D default)
TY = 32
HX = TX + 2


@numba.njit(cache=True)
def _local_relabel(shb, hh, r, tc, inside):
    """Raise the heights of a tile to its exact local distances: to its sink arcs (1)
    and through its border arcs to the halo (halo height + 1), by row and column scans
    until nothing changes; VC_INF where no exit is left. Returns the scan iterations."""
    loc = np.empty(TY * TX, dtype=np.int64)
    for t in range(TY * TX):
        loc[t] = 1 if (inside[t] and tc[t] > 0) else INF
        if not inside[t]:
            continue
        lx = t % TX
        ly = t // TX
        hi = (ly + 1) * HX + lx + 1
        for k in range(4):
            nlx = lx + (1, -1, 0, 0)[k]
            nly = ly + (0, 0, 1, -1)[k]
            if r[k, t] > 0 and not (0 <= nlx < TX and 0 <= nly < TY):
                v = shb[hi + (1, -1, HX, -HX)[k]]
                if v < INF and v + 1 < loc[t]:
                    loc[t] = v + 1
    scans = 0
    changed = True
    while changed:
        changed = False
        scans += 1
        for ly in range(TY):
            for lx in range(TX - 2, -1, -1):
                t = ly * TX + lx
                if r[0, t] > 0 and loc[t + 1] + 1 < loc[t]:
                    loc[t] = loc[t + 1] + 1
                    changed = True
            for lx in range(1, TX):
                t = ly * TX + lx
                if r[1, t] > 0 and loc[t - 1] + 1 < loc[t]:
                    loc[t] = loc[t - 1] + 1
                    changed = True
        for lx in range(TX):
            for ly in range(TY - 2, -1, -1):
                t = ly * TX + lx
                if r[2, t] > 0 and loc[t + TX] + 1 < loc[t]:
                    loc[t] = loc[t + TX] + 1
                    changed = True
            for ly in range(1, TY):
                t = ly * TX + lx
                if r[3, t] > 0 and loc[t - TX] + 1 < loc[t]:
                    loc[t] = loc[t - TX] + 1
                    changed = True
    for t in range(TY * TX):
        if inside[t] and loc[t] > hh[t]:
            hh[t] = INF if loc[t] >= INF else loc[t]
    return scans


@numba.njit(cache=True)
def push_launch(
    rc,
    ex,
    h,
    tcap,
    flags,
    ny,
    nx,
    colour,
    iters,
    hmax,
    stats,
    ox,
    oy,
    fresh,
    lr_at,
    lr_every,
    stall,
):
    """One launch of gpr_push_tile over the tiles of one colour (independent, so in any
    order): the flagged ones (``flags`` as on the GPU), or with ``fresh`` those that
    hold an active node (what a flag would say; ``flags`` is then left to the count),
    on a tiling shifted by (ox, oy).
    Options the GPU does not have: a local relabel (_local_relabel) at local round
    ``lr_at`` (and every ``lr_every`` rounds after it); a tile stops after ``stall``
    rounds in which no flow left it. stats += tiles run, local rounds, tiles left
    active; stats[3] = max local rounds of a tile, stats[4] += local relabel scans,
    stats[5] = max scans of a tile."""
    ntx = (nx + ox + TX - 1) // TX
    nty = (ny + oy + TY - 1) // TY
    run = np.zeros(ntx * nty, dtype=np.int32)
    if fresh:
        for g in range(nx * ny):
            if ex[g] > 0 and h[g] < INF:
                run[((g // nx) + oy) // TY * ntx + ((g % nx) + ox) // TX] = 1
    else:
        run[:] = flags  # the flags of this colour, read at the launch's start
    sh = np.empty((2, (TY + 2) * HX), dtype=np.int32)
    srcv = np.zeros((4, TY * TX), dtype=np.int64)  # s_rc
    r = np.zeros((4, TY * TX), dtype=np.int64)
    e = np.zeros(TY * TX, dtype=np.int64)
    hh = np.zeros(TY * TX, dtype=np.int32)
    tc = np.zeros(TY * TX, dtype=np.int64)
    touch = np.zeros(TY * TX, dtype=np.uint8)
    inside = np.zeros(TY * TX, dtype=np.bool_)
    gidx = np.zeros(TY * TX, dtype=np.int64)
    for ty in range(nty):
        for tx in range(ntx):
            tile = ty * ntx + tx
            if ((tx + ty) & 1) != colour or run[tile] == 0:
                continue
            stats[0] += 1
            for ly in range(-1, TY + 1):  # heights and halo (the neighbours are idle)
                for lx in range(-1, TX + 1):
                    x = tx * TX + lx - ox
                    y = ty * TY + ly - oy
                    v = INF
                    if 0 <= x < nx and 0 <= y < ny:
                        v = h[y * nx + x]
                    sh[0, (ly + 1) * HX + lx + 1] = v
            sh[1, :] = sh[0, :]
            for t in range(TY * TX):
                x = tx * TX + t % TX - ox
                y = ty * TY + t // TX - oy
                inside[t] = 0 <= x < nx and 0 <= y < ny
                touch[t] = 0
                g = y * nx + x
                gidx[t] = g
                e[t] = ex[g] if inside[t] else 0
                hh[t] = h[g] if inside[t] else INF
                tc[t] = tcap[g] if inside[t] else 0
                for k in range(4):
                    r[k, t] = rc[k, g] if inside[t] else 0
                    srcv[k, t] = r[k, t]
            b = 0
            it = 0
            scans = 0
            last_out = 0
            while it < iters:
                if stall > 0 and it - last_out >= stall:
                    break
                anyact = False
                for t in range(TY * TX):
                    if e[t] > 0 and hh[t] < INF:
                        anyact = True
                        break
                if not anyact:
                    break
                if lr_at > 0 and (
                    it == lr_at
                    or (lr_every > 0 and it > lr_at and (it - lr_at) % lr_every == 0)
                ):
                    scans += _local_relabel(sh[b], hh, r, tc, inside)
                    for t in range(TY * TX):
                        sh[b, (t // TX + 1) * HX + t % TX + 1] = hh[t]
                for t in range(TY * TX):  # push, the heights of sh[b] fixed
                    if not (e[t] > 0 and hh[t] < INF):
                        continue
                    lx = t % TX
                    ly = t // TX
                    hi = (ly + 1) * HX + lx + 1
                    if tc[t] > 0:
                        d = min(e[t], tc[t])
                        tc[t] -= d
                        e[t] -= d
                        last_out = it + 1
                    for k in range(4):
                        if e[t] == 0:
                            break
                        if sh[b, hi + (1, -1, HX, -HX)[k]] + 1 != hh[t] or r[k, t] <= 0:
                            continue
                        d = min(e[t], r[k, t])
                        r[k, t] -= d
                        srcv[k, t] = r[k, t]
                        e[t] -= d
                        nlx = lx + (1, -1, 0, 0)[k]
                        nly = ly + (0, 0, 1, -1)[k]
                        if 0 <= nlx < TX and 0 <= nly < TY:
                            tv = nly * TX + nlx
                            srcv[k ^ 1, tv] += d
                            touch[tv] = 1
                        else:
                            v = gidx[t] + (1, -1, nx, -nx)[k]
                            ex[v] += d
                            rc[k ^ 1, v] += d
                            last_out = it + 1
                            if not fresh:
                                flags[tile + (1, -1, ntx, -ntx)[k]] = 1
                for t in range(TY * TX):  # collect, relabel from sh[b] into sh[b ^ 1]
                    if touch[t]:
                        touch[t] = 0
                        for k in range(4):
                            e[t] += srcv[k, t] - r[k, t]
                            r[k, t] = srcv[k, t]
                    if e[t] > 0 and hh[t] < INF and tc[t] == 0:
                        hi = (t // TX + 1) * HX + t % TX + 1
                        m = INF
                        for k in range(4):
                            if r[k, t] > 0:
                                hv = sh[b, hi + (1, -1, HX, -HX)[k]]
                                if hv < INF and hv + 1 < m:
                                    m = hv + 1
                        hh[t] = INF if m > hmax else m
                for t in range(TY * TX):
                    sh[b ^ 1, (t // TX + 1) * HX + t % TX + 1] = hh[t]
                b ^= 1
                it += 1
            stats[1] += it
            stats[3] = max(stats[3], it)
            stats[4] += scans
            stats[5] = max(stats[5], scans)
            left = 0
            for t in range(TY * TX):
                if inside[t]:
                    g = gidx[t]
                    ex[g] = e[t]
                    h[g] = hh[t]
                    tcap[g] = tc[t]
                    for k in range(4):
                        rc[k, g] = r[k, t]
                    if e[t] > 0 and hh[t] < INF:
                        left = 1
            if not fresh:
                flags[tile] = left
            stats[2] += left


@numba.njit(cache=True)
def _seed_sink(tcap, h, q):
    """Level 1: h = 1 where a sink arc is left (those nodes into q), VC_INF elsewhere.
    Returns their count."""
    qt = 0
    for g in range(h.shape[0]):
        h[g] = INF
        if tcap[g] > 0:
            h[g] = 1
            q[qt] = g
            qt += 1
    return qt


@numba.njit(cache=True)
def _next_level(rc, ny, nx, h, q, qh, qt, level, ex, old):
    """The nodes q[qh:qt] are at ``level``: the unreached tails of their residual arcs
    get level + 1 and join q. Returns (qh, qt, how many of the new ones hold excess and
    had a finite old height; 0 where ``ex`` is empty)."""
    found = 0
    end = qt
    while qh < end:
        v = q[qh]
        qh += 1
        x = v % nx
        y = v // nx
        for k in range(4):  # u = v - off(k) has the arc u -> v in plane k
            ux = x - (1, -1, 0, 0)[k]
            uy = y - (0, 0, 1, -1)[k]
            if 0 <= ux < nx and 0 <= uy < ny:
                u = uy * nx + ux
                if h[u] == INF and rc[k, u] > 0:
                    h[u] = level + 1
                    q[qt] = u
                    qt += 1
                    if ex.shape[0] and ex[u] > 0 and old[u] < INF:
                        found += 1
    return qh, qt, found


@numba.njit(cache=True)
def bfs(rc, tcap, ny, nx, h):
    """Exact distance to the sink over residual arcs (1 where tcap > 0, VC_INF where
    the sink cannot be reached), as the global relabel leaves it. Returns the depth."""
    q = np.empty(nx * ny, dtype=np.int64)
    qt = _seed_sink(tcap, h, q)
    qh = 0
    level = 1
    none = np.empty(0, dtype=np.int64)
    while qh < qt:
        qh, qt, _ = _next_level(rc, ny, nx, h, q, qh, qt, level, none, h)
        level += 1
    return level - 1 if qt else 0


@numba.njit(cache=True)
def bfs_early(rc, tcap, ex, ny, nx, h, w):
    """Level-synchronous BFS (as ``bfs``) that stops at the end of the first block of
    ``w`` levels after which every node with excess and a finite height has its exact
    distance; the nodes not reached then keep max(old height, levels + 1), a valid
    labelling (VC_INF where the whole BFS ran). Returns (levels run, depth)."""
    n = nx * ny
    old = h.copy()
    need = 0
    for g in range(n):
        if ex[g] > 0 and old[g] < INF:
            need += 1
    q = np.empty(n, dtype=np.int64)
    qt = _seed_sink(tcap, h, q)
    for i in range(qt):
        if ex[q[i]] > 0 and old[q[i]] < INF:
            need -= 1
    qh = 0
    level = 1
    while qh < qt:
        if need == 0 and level % w == 0:
            for g in range(n):
                if h[g] == INF and old[g] < INF:
                    h[g] = max(old[g], level + 1)
            return level, level
        qh, qt, found = _next_level(rc, ny, nx, h, q, qh, qt, level, ex, old)
        need -= found
        level += 1
    return level, level - 1


@numba.njit(cache=True)
def _tail_blocks(rc, ny, nx, h, old, v, b, nbx, dc, bq, bt, d):
    """The blocks (b x b, nbx a row) of v's unreached tails (residual arcs u -> v, u
    neither reached by this relabel nor at VC_INF before it) not yet met get block
    distance d and join bq[bt:]. Returns the new bt."""
    x = v % nx
    y = v // nx
    for k in range(4):
        ux = x - (1, -1, 0, 0)[k]
        uy = y - (0, 0, 1, -1)[k]
        if 0 <= ux < nx and 0 <= uy < ny:
            u = uy * nx + ux
            if h[u] == INF and old[u] < INF and rc[k, u] > 0:
                c = (uy // b) * nbx + ux // b
                if dc[c] == INF:
                    dc[c] = d
                    bq[bt] = c
                    bt += 1
    return bt


@numba.njit(cache=True)
def bfs_capped(rc, tcap, ny, nx, h, cap, blk):
    """A global relabel with exact distances up to level ``cap`` only. The nodes it
    does not reach keep max(old height, cap + 1 + D), D their block's distance (blocks
    of ``blk`` x ``blk`` nodes; 0: D = 0 everywhere) in the graph of blocks whose arcs
    are the residual arcs between unreached nodes, from the blocks that hold a node
    with a residual arc to level ``cap`` (VC_INF where no such path exists, or the old
    height was VC_INF). A valid labelling: within the unreached nodes both terms are
    valid, and only nodes at distance cap + 1 have arcs to reached ones. Returns
    (exact levels, block levels, depth)."""
    n = nx * ny
    old = h.copy()
    q = np.empty(n, dtype=np.int64)
    qt = _seed_sink(tcap, h, q)
    qh = 0
    level = 1
    none = np.empty(0, dtype=np.int64)
    while qh < qt and level < cap:
        qh, qt, _ = _next_level(rc, ny, nx, h, q, qh, qt, level, none, old)
        level += 1
    if qh == qt:  # the BFS ended by itself: exact
        return level - 1 if qt else 0, 0, level - 1 if qt else 0
    # level == cap, nodes qh..qt at level cap: their unreached arc tails are the seeds
    b = max(blk, 1)
    nbx = (nx + b - 1) // b
    nby = (ny + b - 1) // b
    dc = np.full(nbx * nby, INF, dtype=np.int64)
    bq = np.empty(nbx * nby, dtype=np.int64)
    bt = 0
    for i in range(qh, qt):
        bt = _tail_blocks(rc, ny, nx, h, old, q[i], b, nbx, dc, bq, bt, 0)
    bh = 0
    blevels = 0
    while bh < bt:
        B = bq[bh]
        bh += 1
        if blk == 0:
            continue
        blevels = max(blevels, dc[B])
        by0 = (B // nbx) * b
        bx0 = (B % nbx) * b
        for y in range(by0, min(by0 + b, ny)):
            for x in range(bx0, min(bx0 + b, nx)):
                v = y * nx + x
                if h[v] == INF and old[v] < INF:
                    bt = _tail_blocks(
                        rc, ny, nx, h, old, v, b, nbx, dc, bq, bt, dc[B] + 1
                    )
    depth = cap
    for g in range(n):
        if h[g] == INF and old[g] < INF:
            d = dc[((g // nx) // b) * nbx + (g % nx) // b] if blk else 0
            if blk == 0 and bt == 0:
                d = INF
            if d >= INF:
                h[g] = INF
            else:
                h[g] = max(old[g], cap + 1 + d)
                depth = max(depth, h[g])
    return cap, blevels, depth


@numba.njit(cache=True)
def count(ex, h, flags, ny, nx):
    """gpr_count_active: active nodes; a tile flag says whether the tile has one."""
    ntx = (nx + TX - 1) // TX
    flags[:] = 0
    total = 0
    for g in range(nx * ny):
        if ex[g] > 0 and h[g] < INF:
            total += 1
            flags[(g // nx) // TY * ntx + (g % nx) // TX] = 1
    return total


@numba.njit(cache=True)
def walks(rc, ex, h, tcap, ny, nx):
    """gpr_walk one node after the other: every active node carries its excess down the
    exact distances (the sink arc first) as far as the residual capacities let it.
    Returns the most steps of one walk (a walk round's length on the GPU)."""
    longest = 0
    for g in range(nx * ny):
        if ex[g] == 0 or h[g] >= INF:
            continue
        a = ex[g]
        ex[g] = 0
        cur = g
        hc = h[g]
        steps = 0
        while a > 0:
            steps += 1
            d = min(a, tcap[cur])
            tcap[cur] -= d
            a -= d
            if a == 0 or hc <= 1:
                break
            moved = False
            x = cur % nx
            y = cur // nx
            for k in range(4):
                vx = x + (1, -1, 0, 0)[k]
                vy = y + (0, 0, 1, -1)[k]
                if rc[k, cur] <= 0 or not (0 <= vx < nx and 0 <= vy < ny):
                    continue
                v = vy * nx + vx
                if h[v] != hc - 1:
                    continue
                d = min(a, rc[k, cur])
                rc[k, cur] -= d
                rc[k ^ 1, v] += d
                ex[cur] += a - d
                a = d
                cur = v
                hc -= 1
                moved = True
                break
            if not moved:
                break
        ex[cur] += a
        longest = max(longest, steps)
    return longest


@numba.njit(cache=True)
def reverse(rc, ny, nx):
    """The residual graph reversed (source and sink swapped by the caller, who also
    swaps the excess and the residual sink capacities): arc u -> u + d gets the residual
    capacity of arc u + d -> u. Any state of the preflow is a pseudoflow of both
    orientations with the same minimum cuts, so a solve may go on from it reversed."""
    out = np.zeros_like(rc)
    for g in range(nx * ny):
        x = g % nx
        y = g // nx
        if x + 1 < nx:
            out[0, g] = rc[1, g + 1]
        if x >= 1:
            out[1, g] = rc[0, g - 1]
        if y + 1 < ny:
            out[2, g] = rc[3, g + nx]
        if y >= 1:
            out[3, g] = rc[2, g - nx]
    return out


# time model (H200, fitted to the profile of the default 2 MP solve; microseconds)
LAUNCH_US = 12.8  # a push launch: fixed part (8.8 us with no tile flagged)
ROUND_US = 0.65  # a local round of a lone tile
ROUND_BUSY_US = 1.6  # a local round with two tiles a SM, a wave of 264 tiles
RELABEL_US = 63.0  # a global relabel: init, count, the first pass over all tiles
LEVEL_US = 0.45  # a global relabel: per BFS level
FIXED_MS = 0.58  # first relabel, result and host work
FLIP_US = 25.0  # a reversal: a pass over the arc planes (an estimate, not measured)


def launch_us(stats) -> float:
    tiles, rounds = stats[0], stats[3] + stats[5]  # a scan iteration ~ a local round
    if tiles == 0:
        return 8.8
    per_round = ROUND_US if tiles <= 132 else ROUND_BUSY_US * max(1.0, tiles / 264)
    return LAUNCH_US + rounds * per_round


def relabel_us(depth: int) -> float:
    return RELABEL_US + LEVEL_US * depth


def solve(
    source,
    sink,
    edges,
    *,
    sweeps=2,
    iters=32,
    tail_sweeps=None,
    stale=0,
    shift=False,
    walk_below=0,
    lr_at=0,
    lr_every=0,
    stall=0,
    lr_below=0,
    max_rounds=200,
    early=0,
    cap=0,
    blk=0,
    flip=(),
):
    """Emulate the solve; returns a dict: flow, active (after each global relabel),
    rounds (per round: active, depth, launches' stats, model us), model_ms.

    ``stale`` 1: the BFS of a round runs on the state after its first sweep (as if
    it overlapped the last), 2: on the state before the round's sweeps; an exact
    relabel then confirms the end. ``shift``: every other sweep on tiles offset by half
    a tile. ``walk_below``: rounds that start with fewer active nodes are walk rounds
    (gpr_walk) instead of sweeps. ``lr_at``, ``lr_every``, ``stall``: see push_launch;
    ``lr_below``: the local relabel only in rounds that start with fewer active nodes
    (0: in every round).
    ``early`` W: the BFS stopped at the first multiple of W levels after which every
    node with excess and a finite height has its distance (``bfs_early``).
    ``flip``: the rounds after whose pushes the graph is reversed (``reverse``) before
    the round's relabel; -1: the solve starts on the reversed graph.
    """
    ny, nx = source.shape
    n = nx * ny
    s = np.asarray(source, dtype=np.int64).reshape(-1)
    t = np.asarray(sink, dtype=np.int64).reshape(-1)
    ex = np.maximum(s - t, 0)
    tcap = np.maximum(t - s, 0)
    rc = np.asarray(edges, dtype=np.int64).reshape(4, n).copy()
    h = np.full(n, INF, dtype=np.int32)
    flags = np.zeros(((nx + TX - 1) // TX) * ((ny + TY - 1) // TY), dtype=np.int32)
    tail_sweeps = sweeps if tail_sweeps is None else tail_sweeps
    if flip and (stale or walk_below):
        raise ValueError("flip runs without stale relabels and walks")
    rev = -1 in flip
    if rev:
        rc = reverse(rc, ny, nx)
        ex, tcap = tcap, ex
    bfs(rc, tcap, ny, nx, h)
    active = [count(ex, h, flags, ny, nx)]
    rounds = []
    while len(rounds) < max_rounds:
        if active[-1] == 0:
            if not stale:
                break
            bfs(rc, tcap, ny, nx, h)  # confirm with an exact relabel
            active[-1] = count(ex, h, flags, ny, nx)
            if active[-1] == 0:
                break
        row = {"launches": [], "walk": 0}
        if active[-1] < walk_below:
            row["walk"] = walks(rc, ex, h, tcap, ny, nx)
            depth = bfs(rc, tcap, ny, nx, h)
        else:
            count_sw = tail_sweeps if active[-1] * 1024 < n else sweeps
            snap = None
            if stale == 2:
                snap = (rc.copy(), tcap.copy())
            for sw in range(count_sw):
                if stale == 1 and sw == count_sw - 1:
                    snap = (rc.copy(), tcap.copy())
                ox = oy = TX // 2 if shift and sw % 2 else 0
                for colour in (0, 1):
                    st = np.zeros(6, dtype=np.int64)
                    push_launch(
                        rc,
                        ex,
                        h,
                        tcap,
                        flags,
                        ny,
                        nx,
                        colour,
                        iters,
                        n,
                        st,
                        ox,
                        oy,
                        shift,
                        lr_at if (not lr_below or active[-1] < lr_below) else 0,
                        lr_every,
                        stall,
                    )
                    row["launches"].append(st.tolist())
            if len(rounds) in flip:
                rc = reverse(rc, ny, nx)
                ex, tcap = tcap, ex
                rev = not rev
                row["flip"] = True
            if early:
                lv, depth = bfs_early(rc, tcap, ex, ny, nx, h, early)
                row["levels"] = int(lv)
            elif (
                cap
                and active[-1] * 1024 >= n  # the busy rounds only, and an exact
                and (len(active) < 2 or active[-1] < active[-2])  # one on a stall
            ):
                lv, blv, depth = bfs_capped(rc, tcap, ny, nx, h, cap, blk)
                row["levels"] = int(lv + blv)
            else:
                depth = bfs(*(snap or (rc, tcap)), ny, nx, h)
        active.append(count(ex, h, flags, ny, nx))
        sel = (ex > 0) & (h < INF)
        row.update(
            active=active[-1],
            depth=int(depth),
            excess=int(ex[sel].sum()),
            model_us=sum(launch_us(st) for st in row["launches"])
            + (10 + 1.0 * row["walk"] if row["walk"] else 0)
            + relabel_us(row.get("levels", depth))
            + (FLIP_US if row.get("flip") else 0),
        )
        rounds.append(row)
    flow = int((s if rev else t).sum() - tcap.sum())  # the present sink's arcs
    model_ms = FIXED_MS + sum(r["model_us"] for r in rounds) / 1e3
    return {"flow": flow, "active": active, "rounds": rounds, "model_ms": model_ms}


def main() -> int:
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    from gpu_grid_check import seg_energy

    from vision_cuts import grid_graph
    from vision_cuts._maxflow_cpu import maxflow_grid_cpu

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mp", type=float, nargs="+", default=[2.0])
    ap.add_argument(
        "--image", default="astronaut", help="the skimage.data picture of the energy"
    )
    ap.add_argument(
        "--sweeps",
        type=int,
        default=None,
        help="sweeps a round (default: the GPU's, 3 below 2**20 nodes)",
    )
    ap.add_argument("--tail-sweeps", type=int, default=None)
    ap.add_argument("--iters", type=int, default=32)
    ap.add_argument("--stale", type=int, default=0, choices=(0, 1, 2))
    ap.add_argument("--shift", action="store_true")
    ap.add_argument("--walk-below", type=int, default=0)
    ap.add_argument("--local-relabel", type=int, default=0, metavar="ROUND")
    ap.add_argument("--local-relabel-every", type=int, default=0)
    ap.add_argument("--stall", type=int, default=0)
    ap.add_argument("--local-relabel-below", type=int, default=0, metavar="ACTIVE")
    ap.add_argument("--early", type=int, default=0, metavar="W")
    ap.add_argument("--cap", type=int, default=0, metavar="D")
    ap.add_argument("--block", type=int, default=0, metavar="B")
    ap.add_argument(
        "--flip",
        type=int,
        nargs="+",
        default=[],
        metavar="ROUND",
        help="reverse the graph after these rounds' pushes (-1: solve it reversed)",
    )
    ap.add_argument("--json", help="append a summary of each solve to this file")
    a = ap.parse_args()
    bad = 0
    for mp in a.mp:
        name, en = seg_energy(mp, a.image)
        g = grid_graph(en.source, en.sink, en.edges)
        sweeps = a.sweeps or (3 if g.source.size < 1 << 20 else 2)
        t0 = time.perf_counter()
        res = solve(
            g.source,
            g.sink,
            g.edges,
            sweeps=sweeps,
            iters=a.iters,
            tail_sweeps=a.tail_sweeps,
            stale=a.stale,
            shift=a.shift,
            walk_below=a.walk_below,
            lr_at=a.local_relabel,
            lr_every=a.local_relabel_every,
            stall=a.stall,
            lr_below=a.local_relabel_below,
            early=a.early,
            cap=a.cap,
            blk=a.block,
            flip=tuple(a.flip),
        )
        dt = time.perf_counter() - t0
        f_cpu = maxflow_grid_cpu(g.source, g.sink, g.edges)[0]
        work = [
            sum(st[i] for r in res["rounds"] for st in r["launches"]) for i in (0, 1)
        ]
        levels = sum(r.get("levels", r["depth"]) for r in res["rounds"])
        print(f"tile runs {work[0]}, local rounds {work[1]}, BFS levels {levels}")
        print(
            f"{name}: {len(res['rounds'])} rounds, model {res['model_ms']:.2f} ms "
            f"(H200), flow {res['flow']} (CPU {f_cpu}), {dt:.1f} s"
        )
        print(
            " round  active  excess depth launches (tiles, most local rounds)"
            "           model us"
        )
        for i, r in enumerate(res["rounds"]):
            ls = " ".join(f"({st[0]},{st[3]})" for st in r["launches"]) or (
                f"walk {r['walk']} steps"
            )
            print(
                f" {i:5d} {r['active']:7d} {r['excess']:7d} {r['depth']:5d} "
                f"{r.get('levels', '')!s:>5} "
                f"{ls:44s} {r['model_us']:7.0f}"
            )
        bad += res["flow"] != f_cpu
        if a.json:
            path = pathlib.Path(a.json)
            rows = json.loads(path.read_text()) if path.exists() else []
            rows.append(
                {
                    "problem": name,
                    "args": {
                        k: v for k, v in vars(a).items() if k not in ("json", "mp")
                    },
                    "rounds": len(res["rounds"]),
                    "tile_runs": int(work[0]),
                    "local_rounds": int(work[1]),
                    "bfs_levels": int(levels),
                    "model_ms": round(res["model_ms"], 3),
                    "flow_equal": res["flow"] == f_cpu,
                    "depths": [int(r["depth"]) for r in res["rounds"]],
                    "levels": [int(r.get("levels", r["depth"])) for r in res["rounds"]],
                    "active": [int(v) for v in res["active"]],
                }
            )
            path.write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
