"""CPU emulation (numba) of augmenting-path region discharge (ARD) on a 2-D grid.

The GPU grid solver is push-relabel with exact global relabels; its 8-connected 2 MP
solve is bound by its count of phases (about 19 global relabels and 63 sweeps of
push tiles, ``NOTES_gpu_grid.md``). Region discharge (Shekhovtsov and Hlavac, "A
distributed mincut/maxflow algorithm combining path augmentation and push-relabel",
IJCV 2013) works on regions instead of nodes: each region, in turn, sends its excess
as far as it can with exact in-region max-flows (first to the sink, then to the
neighbouring regions' boundary nodes in increasing order of their labels), and then
labels its nodes with region distances (the fewest region borders a residual path to
the sink crosses). Its sweeps are bounded by the boundary, not by path lengths.

This emulation counts what a GPU version would run: the sweeps over the regions (four
colours of a 2 x 2 checkerboard of regions a sweep, so that the regions of one colour
share no arc and can run side by side), the regions discharged each sweep, and the
work inside a discharge (max-flow phases, augmenting paths, BFS depths). The flow is
checked against the CPU solver.

    python benchmarks/emulate_region_discharge.py --mp 2 --region 32 64
    python benchmarks/emulate_region_discharge.py --mp 2 --connectivity 4 --region 32
    python benchmarks/emulate_region_discharge.py --mp 2 --global-every 4

The global relabel (exact region distances) runs after every ``--global-every``
sweeps. It cannot be left out: excess that no residual path takes to the sink is
only found dead by a global relabel, and a region relabel raises its label by one a
sweep (to the count of boundary nodes, the bound on a finite label).
"""

from __future__ import annotations

import argparse
import json
import time

import numba
import numpy as np

DINF = np.int32(1 << 30)  # dead label: no residual path to the sink
UNSET = np.int32(1 << 30)


@numba.njit(cache=True, inline="always")
def _step(u, k, nx, ny, dy, dx):
    y = u // nx + dy[k]
    x = u % nx + dx[k]
    if y < 0 or y >= ny or x < 0 or x >= nx:
        return -1
    return y * nx + x


@numba.njit(cache=True, inline="always")
def _out(u, k, cap, nx, ny, dy, dx, y0, y1, x0, x1):
    """The node outside the region that u's open arc of plane k reaches, else -1."""
    if cap[k, u] <= 0:
        return -1
    v = _step(u, k, nx, ny, dy, dx)
    if v < 0:
        return -1
    if y0 <= v // nx < y1 and x0 <= v % nx < x1:
        return -1
    return v


@numba.njit(cache=True, inline="always")
def _inside_from(v, k, cap, nx, ny, dy, dx, y0, y1, x0, x1):
    """The local index of the node u inside the region whose open arc of plane k
    reaches v (u + e_k = v), else -1."""
    u = _step(v, k ^ 1, nx, ny, dy, dx)
    if u < 0 or cap[k, u] <= 0:
        return -1
    uy = u // nx
    ux = u % nx
    if not (y0 <= uy < y1 and x0 <= ux < x1):
        return -1
    return (uy - y0) * (x1 - x0) + ux - x0


@numba.njit(cache=True)
def _exit_cap(u, stage, cap, tcap, d, K, nx, ny, dy, dx, y0, y1, x0, x1):
    """(plane, capacity) of u's first open exit of this stage: the sink arc
    (plane -1) for stage -1, else an arc leaving the region to a node labelled
    ``stage``. (-2, 0) when none."""
    if stage < 0:
        if tcap[u] > 0:
            return -1, tcap[u]
        return -2, 0
    for k in range(K):
        v = _out(u, k, cap, nx, ny, dy, dx, y0, y1, x0, x1)
        if v >= 0 and d[v] == stage:
            return k, cap[k, u]
    return -2, 0


@numba.njit(cache=True)
def _augment(stage, y0, y1, x0, x1, cap, tcap, ex, d, K, nx, ny, dy, dx, ctr):
    """Max-flow inside the region from its excess to the exits of ``stage``
    (Dinic: a BFS back from the exits, then blocking flow by depth-first search with
    current arcs). Returns the flow sent. Counters: ctr[0] phases, ctr[1] paths,
    ctr[2] node visits of the BFS, ctr[3] deepest BFS, ctr[4] BFS levels in all."""
    w = x1 - x0
    m = (y1 - y0) * w
    dist = np.empty(m, dtype=np.int32)
    cur = np.empty(m, dtype=np.int32)
    queue = np.empty(m, dtype=np.int64)
    path = np.empty(m + 1, dtype=np.int64)
    sent = 0
    while True:
        # BFS back from the exits over residual arcs inside the region.
        dist[:] = UNSET
        qh = 0
        qt = 0
        for ly in range(y1 - y0):
            for lx in range(w):
                u = (y0 + ly) * nx + x0 + lx
                kk, c = _exit_cap(
                    u, stage, cap, tcap, d, K, nx, ny, dy, dx, y0, y1, x0, x1
                )
                if c > 0:
                    dist[ly * w + lx] = 0
                    queue[qt] = u
                    qt += 1
        if qt == 0:
            return sent
        reached = False
        deepest = 0
        while qh < qt:
            v = queue[qh]
            qh += 1
            lv = (v // nx - y0) * w + v % nx - x0
            dv = dist[lv]
            if ex[v] > 0:
                reached = True
            for k in range(K):
                lu = _inside_from(v, k, cap, nx, ny, dy, dx, y0, y1, x0, x1)
                if lu < 0 or dist[lu] != UNSET:
                    continue
                dist[lu] = dv + 1
                if dv + 1 > deepest:
                    deepest = dv + 1
                queue[qt] = (y0 + lu // w) * nx + x0 + lu % w
                qt += 1
        ctr[2] += qt
        ctr[4] += deepest
        if deepest > ctr[3]:
            ctr[3] = deepest
        if not reached:
            return sent
        ctr[0] += 1
        cur[:] = 0
        # Blocking flow from every excess node of the region.
        for ly in range(y1 - y0):
            for lx in range(w):
                s = (y0 + ly) * nx + x0 + lx
                if ex[s] <= 0 or dist[ly * w + lx] == UNSET:
                    continue
                while ex[s] > 0:
                    n = 1
                    path[0] = s
                    found = False
                    while n > 0:
                        u = path[n - 1]
                        lu = (u // nx - y0) * w + u % nx - x0
                        kk, c = _exit_cap(
                            u, stage, cap, tcap, d, K, nx, ny, dy, dx, y0, y1, x0, x1
                        )
                        if c > 0:
                            found = True
                            break
                        moved = False
                        while cur[lu] < K:
                            k = cur[lu]
                            v = _step(u, k, nx, ny, dy, dx)
                            if v >= 0 and cap[k, u] > 0 and dist[lu] != UNSET:
                                vy = v // nx
                                vx = v % nx
                                if y0 <= vy < y1 and x0 <= vx < x1:
                                    lv = (vy - y0) * w + vx - x0
                                    if dist[lv] != UNSET and dist[lv] == dist[lu] - 1:
                                        path[n] = v
                                        n += 1
                                        moved = True
                                        break
                            cur[lu] += 1
                        if not moved:
                            dist[lu] = UNSET  # a dead end for this phase
                            n -= 1
                            if n > 0:
                                p = path[n - 1]
                                cur[(p // nx - y0) * w + p % nx - x0] += 1
                    if not found:
                        break
                    # Bottleneck along the path and the exit.
                    u = path[n - 1]
                    kk, c = _exit_cap(
                        u, stage, cap, tcap, d, K, nx, ny, dy, dx, y0, y1, x0, x1
                    )
                    amt = min(ex[s], c)
                    for i in range(n - 1):
                        a = path[i]
                        k = cur[(a // nx - y0) * w + a % nx - x0]
                        if cap[k, a] < amt:
                            amt = cap[k, a]
                    for i in range(n - 1):
                        a = path[i]
                        k = cur[(a // nx - y0) * w + a % nx - x0]
                        b = path[i + 1]
                        cap[k, a] -= amt
                        cap[k ^ 1, b] += amt
                    ex[s] -= amt
                    if kk == -1:
                        tcap[u] -= amt
                    else:
                        v = _step(u, kk, nx, ny, dy, dx)
                        cap[kk, u] -= amt
                        cap[kk ^ 1, v] += amt
                        ex[v] += amt
                    sent += amt
                    ctr[1] += 1


@numba.njit(cache=True)
def _region_relabel(y0, y1, x0, x1, cap, tcap, d, K, nx, ny, dy, dx):
    """Label the region's nodes with region distances: 0 where a residual path inside
    the region reaches the sink, else 1 + the lowest label of a node outside that a
    residual path inside the region and one arc reach; DINF where none. Returns the
    count of labels that fell (0 while the labelling stays valid)."""
    w = x1 - x0
    m = (y1 - y0) * w
    val = np.full(m, DINF, dtype=np.int32)
    for ly in range(y1 - y0):
        for lx in range(w):
            u = (y0 + ly) * nx + x0 + lx
            if tcap[u] > 0:
                val[ly * w + lx] = 0
                continue
            best = DINF
            for k in range(K):
                v = _out(u, k, cap, nx, ny, dy, dx, y0, y1, x0, x1)
                if v >= 0 and d[v] < DINF and d[v] + 1 < best:
                    best = d[v] + 1
            val[ly * w + lx] = best
    order = np.argsort(val, kind="mergesort")
    lab = np.full(m, DINF, dtype=np.int32)
    queue = np.empty(m, dtype=np.int64)
    i = 0
    while i < m and val[order[i]] < DINF:
        level = val[order[i]]
        qh = 0
        qt = 0
        while i < m and val[order[i]] == level:
            li = order[i]
            if lab[li] == DINF:
                lab[li] = level
                queue[qt] = li
                qt += 1
            i += 1
        while qh < qt:
            lv = queue[qh]
            qh += 1
            v = (y0 + lv // w) * nx + x0 + lv % w
            for k in range(K):
                lu = _inside_from(v, k, cap, nx, ny, dy, dx, y0, y1, x0, x1)
                if lu < 0 or lab[lu] != DINF:
                    continue
                lab[lu] = level
                queue[qt] = lu
                qt += 1
    fell = 0
    for ly in range(y1 - y0):
        for lx in range(w):
            u = (y0 + ly) * nx + x0 + lx
            if lab[ly * w + lx] < d[u]:
                fell += 1
            d[u] = lab[ly * w + lx]
    return fell


@numba.njit(cache=True)
def global_relabel(cap, tcap, d, K, nx, ny, dy, dx, region):
    """Exact region distances over the whole grid (0-1 BFS back from the sink: an arc
    inside a region costs 0, across regions 1). Returns the deepest finite label."""
    n = nx * ny
    d[:] = DINF
    dq = np.empty(2 * n + 2, dtype=np.int64)
    head = n + 1
    tail = n + 1
    for u in range(n):
        if tcap[u] > 0:
            d[u] = 0
            dq[tail] = u
            tail += 1
    deepest = 0
    while head < tail:
        v = dq[head]
        head += 1
        dv = d[v]
        if dv > deepest:
            deepest = dv
        for k in range(K):
            u = _step(v, k ^ 1, nx, ny, dy, dx)
            if u < 0 or cap[k, u] <= 0:
                continue
            wgt = 0 if region[u] == region[v] else 1
            if dv + wgt < d[u]:
                d[u] = dv + wgt
                if wgt == 0:
                    head -= 1
                    dq[head] = u
                else:
                    dq[tail] = u
                    tail += 1
    return deepest


@numba.njit(cache=True)
def _region_active(ex, d, y0, y1, x0, x1, nx):
    for y in range(y0, y1):
        for x in range(x0, x1):
            u = y * nx + x
            if ex[u] > 0 and d[u] < DINF:
                return True
    return False


@numba.njit(cache=True)
def discharge(y0, y1, x0, x1, cap, tcap, ex, d, K, nx, ny, dy, dx, ctr):
    """ARD on one region: to the sink, then to the outside labels in increasing order,
    then the region relabel. Returns (stages run, labels that fell)."""
    _augment(-1, y0, y1, x0, x1, cap, tcap, ex, d, K, nx, ny, dy, dx, ctr)
    stages = 1
    lo = 0
    while True:
        left = 0
        for y in range(y0, y1):
            for x in range(x0, x1):
                left += ex[y * nx + x]
        if left == 0:
            break
        # The lowest outside label from ``lo`` up that an open arc reaches (the
        # region's open arcs out only close while it discharges).
        nxt = DINF
        for y in range(y0, y1):
            for x in range(x0, x1):
                u = y * nx + x
                for k in range(K):
                    v = _out(u, k, cap, nx, ny, dy, dx, y0, y1, x0, x1)
                    if v >= 0 and lo <= d[v] < nxt:
                        nxt = d[v]
        if nxt >= DINF:
            break
        lo = nxt + 1
        _augment(nxt, y0, y1, x0, x1, cap, tcap, ex, d, K, nx, ny, dy, dx, ctr)
        stages += 1
    fell = _region_relabel(y0, y1, x0, x1, cap, tcap, d, K, nx, ny, dy, dx)
    return stages, fell


def solve(src, snk, edges, offsets, region_size, global_every, max_sweeps=10000):
    """Region discharge to the end (a global relabel after every ``global_every``
    sweeps, at least 1); returns (flow, per-sweep records, seconds)."""
    if global_every < 1:
        raise ValueError(f"global_every must be at least 1, got {global_every}")
    ny, nx = src.shape
    K = edges.shape[0]
    s64 = src.astype(np.int64).ravel()
    t64 = snk.astype(np.int64).ravel()
    base = int(np.minimum(s64, t64).sum())
    ex = s64 - np.minimum(s64, t64)
    tcap = t64 - np.minimum(s64, t64)
    cap = edges.reshape(K, -1).astype(np.int64).copy()
    dy = offsets[:, 0].astype(np.int64).copy()
    dx = offsets[:, 1].astype(np.int64).copy()
    R = region_size
    nry = -(-ny // R)
    nrx = -(-nx // R)
    yy, xx = np.mgrid[0:ny, 0:nx]
    region = ((yy // R) * nrx + xx // R).ravel().astype(np.int64)
    d = np.zeros(ny * nx, dtype=np.int32)
    t0 = time.perf_counter()
    deepest = global_relabel(cap, tcap, d, K, nx, ny, dy, dx, region)
    records = []
    total_sink0 = int(t64.sum() - np.minimum(s64, t64).sum())
    for sweep in range(max_sweeps):
        active_nodes = int(((ex > 0) & (d < DINF)).sum())
        if active_nodes == 0:
            break
        rec = {
            "sweep": sweep,
            "active_nodes": active_nodes,
            "deepest_label": int(deepest),
            "regions": [],
            "phases_max": 0,
            "phases_median": 0,
            "phases_p90": 0,
            "levels_median": 0,
            "levels_max": 0,
            "stages_max": 0,
            "bfs_depth_max": 0,
            "paths": 0,
            "visits": 0,
            "labels_fell": 0,
        }
        phases = []
        levels = []
        for colour in range(4):
            count = 0
            for ry in range(colour // 2, nry, 2):
                for rx in range(colour % 2, nrx, 2):
                    y0, x0 = ry * R, rx * R
                    y1, x1 = min(y0 + R, ny), min(x0 + R, nx)
                    if not _region_active(ex, d, y0, y1, x0, x1, nx):
                        continue
                    ctr = np.zeros(5, dtype=np.int64)
                    stages, fell = discharge(
                        y0, y1, x0, x1, cap, tcap, ex, d, K, nx, ny, dy, dx, ctr
                    )
                    count += 1
                    phases.append(int(ctr[0]))
                    levels.append(int(ctr[4]))
                    rec["phases_max"] = max(rec["phases_max"], int(ctr[0]))
                    rec["stages_max"] = max(rec["stages_max"], stages)
                    rec["bfs_depth_max"] = max(rec["bfs_depth_max"], int(ctr[3]))
                    rec["paths"] += int(ctr[1])
                    rec["visits"] += int(ctr[2])
                    rec["labels_fell"] += fell
            rec["regions"].append(count)
        rec["phases_median"] = float(np.median(phases)) if phases else 0.0
        rec["phases_p90"] = float(np.percentile(phases, 90)) if phases else 0.0
        rec["levels_median"] = float(np.median(levels)) if levels else 0.0
        rec["levels_max"] = max(levels) if levels else 0
        if (sweep + 1) % global_every == 0:
            deepest = global_relabel(cap, tcap, d, K, nx, ny, dy, dx, region)
        else:
            deepest = int(d[d < DINF].max()) if (d < DINF).any() else 0
        records.append(rec)
    else:
        raise RuntimeError(f"no end after {max_sweeps} sweeps")
    secs = time.perf_counter() - t0
    flow = base + total_sink0 - int(tcap.sum())
    return flow, records, secs


def main() -> int:
    import cv2
    import skimage.data

    from vision_cuts import grid_energy, maxflow_grid
    from vision_cuts.datasets.synthetic import segmentation_problem
    from vision_cuts.grid import neighbour_offsets

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mp", type=float, nargs="+", default=[2.0])
    ap.add_argument("--image", nargs="+", default=["astronaut"])
    ap.add_argument("--connectivity", type=int, default=8, choices=(4, 8))
    ap.add_argument("--region", type=int, nargs="+", default=[32])
    ap.add_argument(
        "--global-every",
        type=int,
        default=1,
        help="a global relabel after every N sweeps (N >= 1)",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    out = []
    for name in args.image:
        base = getattr(skimage.data, name)()
        if base.ndim == 2:
            base = np.dstack([base] * 3)
        base = base[..., :3]
        for mp in args.mp:
            side = int(round(np.sqrt(mp * 1e6)))
            img = cv2.resize(base, (side, side), interpolation=cv2.INTER_CUBIC)
            u, w = segmentation_problem(img, connectivity=args.connectivity)
            e = grid_energy(u, weights=w, connectivity=args.connectivity)
            t = time.perf_counter()
            ref = maxflow_grid(e, backend="cpu")
            ref_s = time.perf_counter() - t
            offsets = neighbour_offsets(2, e.edges.shape[0])
            for R in args.region:
                flow, recs, secs = solve(
                    np.asarray(e.source),
                    np.asarray(e.sink),
                    np.asarray(e.edges),
                    offsets,
                    R,
                    args.global_every,
                )
                ok = flow == ref.flow
                print(
                    f"{name} {side}x{side} {args.connectivity}-conn, regions {R}x{R}: "
                    f"{len(recs)} sweeps, flow {'equal' if ok else 'DIFFERS'} "
                    f"({flow} vs {ref.flow}), emulation {secs:.1f} s, CPU solver "
                    f"{ref_s:.2f} s"
                )
                for r in recs:
                    print(
                        f"  sweep {r['sweep']:3d}: active {r['active_nodes']:8d}, "
                        f"deepest label {r['deepest_label']:4d}, regions by colour "
                        f"{r['regions']}, phases {r['phases_median']:g} / "
                        f"{r['phases_p90']:g} / {r['phases_max']}, BFS levels "
                        f"{r['levels_median']:g} / {r['levels_max']}, stages <= "
                        f"{r['stages_max']}, BFS depth <= {r['bfs_depth_max']}, "
                        f"paths {r['paths']}, visits {r['visits']}"
                        + (
                            f", labels fell {r['labels_fell']}"
                            if r["labels_fell"]
                            else ""
                        )
                    )
                out.append(
                    {
                        "image": name,
                        "side": side,
                        "connectivity": args.connectivity,
                        "region": R,
                        "global_every": args.global_every,
                        "flow_equal": bool(ok),
                        "sweeps": recs,
                    }
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
