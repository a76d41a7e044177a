"""CPU emulation (numba) of the GPU assignment solver's large-problem path.

Runs the algorithm of ``kernels/assignment_rows.cu`` without its candidate lists (every
scan reads the whole row until arc fixing leaves a row at most ``--kcap`` arcs, which is
how the GPU path first worked) in synchronous rounds (every free row bids against the
prices of the round's start; per column the highest (price, row) word wins, as the
64-bit atomicMax does), to count what the GPU's time
follows: rounds per phase (the sequential tail), row scans, scanned entries, and the
Bellman-Ford sweeps of the global price updates. Checks every total against SciPy.

    python benchmarks/emulate_assignment_gpu.py --n 1000 4000
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

INF = np.int64(2**62)


@numba.njit(cache=True)
def _best(S, p, r, cand, ncand):
    d1 = INF
    d2 = INF
    j1 = -1
    if ncand[r] < 0:
        for k in range(S.shape[1]):
            d = S[r, k] + p[k]
            if d < d1:
                d2 = d1
                d1 = d
                j1 = k
            elif d < d2:
                d2 = d
        return d1, j1, d2, S.shape[1]
    for t in range(ncand[r]):
        k = cand[r, t]
        d = S[r, k] + p[k]
        if d < d1 or (d == d1 and k < j1):
            d2 = d1
            d1 = d
            j1 = k
        elif d < d2:
            d2 = d
    return d1, j1, d2, ncand[r]


@numba.njit(cache=True)
def _global_update(S, p, owner, col4row, eps, cand, ncand):
    """Bellman-Ford to a fixpoint: dist[j] for the column j of each row r,
    dist[j] = max(0, min_{k != j} (d_r(k) + dist[k]) + eps - d_r(j)), 0 for free
    columns; prices rise by dist (the largest finite one where infinite). Returns
    the sweeps."""
    N = S.shape[0]
    dist = np.full(N, INF, dtype=np.int64)
    for k in range(N):
        if owner[k] < 0:
            dist[k] = 0
    sweeps = 0
    changed = True
    while changed:
        changed = False
        sweeps += 1
        new = dist  # in place (chaotic relaxation, as on the GPU)
        for r in range(N):
            j = col4row[r]
            if j < 0:
                continue
            h = INF
            if ncand[r] < 0:
                for k in range(N):
                    if k != j and dist[k] < INF:
                        h = min(h, S[r, k] + p[k] + dist[k])
            else:
                for t in range(ncand[r]):
                    k = cand[r, t]
                    if k != j and dist[k] < INF:
                        h = min(h, S[r, k] + p[k] + dist[k])
            if h == INF:
                continue
            nd = max(np.int64(0), h + eps - S[r, j] - p[j])
            if nd < new[j]:
                new[j] = nd
                changed = True
        dist = new
    # columns that reach no free column rise by the largest finite distance
    top = np.int64(0)
    for k in range(N):
        if dist[k] < INF:
            top = max(top, dist[k])
    for k in range(N):
        p[k] += min(dist[k], top)
    return sweeps


@numba.njit(cache=True)
def solve(S, alpha, gu_every, gu_free_frac, fix, kcap):  # noqa: C901
    """Returns (col4row, prices, stats[phase, 5]) with stats = rounds, scans,
    scanned entries, global updates, sweeps."""
    N = S.shape[0]
    smax = S.max()
    p = np.zeros(N, dtype=np.int64)
    owner = -np.ones(N, dtype=np.int64)
    col4row = -np.ones(N, dtype=np.int64)
    cand = np.zeros((N, kcap), dtype=np.int64)
    ncand = -np.ones(N, dtype=np.int64)
    bestbid = np.zeros(N, dtype=np.int64)
    bestrow = np.zeros(N, dtype=np.int64)
    stats = np.zeros((64, 6), dtype=np.int64)
    eps = max(smax, 1)
    ph = 0
    while True:
        prev = eps
        eps = max(1, eps // alpha)
        # keep the eps-optimal pairs; arc fixing from the state of the last phase
        for r in range(N):
            j = col4row[r]
            if j < 0:
                continue
            d1, _, _, _ = _best(S, p, r, cand, ncand)
            dj = S[r, j] + p[j]
            if fix and ph > 0:
                # fixing bound from the eps of the phase that just ended
                bound = N * prev
                m = 0
                ok = True
                if ncand[r] < 0:
                    for k in range(N):
                        if S[r, k] + p[k] - dj < bound:
                            if m == kcap:
                                ok = False
                                break
                            cand[r, m] = k
                            m += 1
                else:
                    for t in range(ncand[r]):
                        k = cand[r, t]
                        if S[r, k] + p[k] - dj < bound:
                            cand[r, m] = k
                            m += 1
                if ok:
                    ncand[r] = m
                    stats[ph, 5] += 1
            if dj > d1 + eps:
                owner[j] = -1
                col4row[r] = -1
        nfree = 0
        for r in range(N):
            if col4row[r] < 0:
                nfree += 1
        last_free = nfree
        since = 0
        bids = 0
        while nfree > 0:
            stats[ph, 0] += 1
            since += 1
            if gu_every > 0 and bids >= gu_every * last_free + 64:
                bids = 0
                stats[ph, 3] += 1
                stats[ph, 4] += _global_update(S, p, owner, col4row, eps, cand, ncand)
                since = 0
                last_free = nfree
            for k in range(N):
                bestbid[k] = -1
                bestrow[k] = -1
            for r in range(N):
                if col4row[r] >= 0:
                    continue
                d1, j1, d2, cnt = _best(S, p, r, cand, ncand)
                stats[ph, 1] += 1
                stats[ph, 2] += cnt
                bids += 1
                if d2 == INF:
                    d2 = d1 + N * eps
                bid = d2 - S[r, j1] + eps
                if bid > bestbid[j1] or (bid == bestbid[j1] and r > bestrow[j1]):
                    bestbid[j1] = bid
                    bestrow[j1] = r
            for k in range(N):
                if bestrow[k] < 0:
                    continue
                if bestbid[k] > p[k]:
                    old = owner[k]
                    if old >= 0:
                        col4row[old] = -1
                    else:
                        nfree -= 1
                    p[k] = bestbid[k]
                    owner[k] = bestrow[k]
                    col4row[bestrow[k]] = k
            if gu_free_frac > 0 and nfree > 0 and since >= 4:
                # stalled: fewer than (1 - frac) of the free rows got a column
                if last_free - nfree < gu_free_frac * last_free:
                    stats[ph, 3] += 1
                    stats[ph, 4] += _global_update(
                        S, p, owner, col4row, eps, cand, ncand
                    )
                    since = 0
                last_free = nfree
        ph += 1
        if eps == 1:
            break
    return col4row, p, stats[:ph]


def main():
    from scipy.optimize import linear_sum_assignment

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[1000])
    ap.add_argument("--kinds", nargs="+", default=["uniform"])
    ap.add_argument("--alpha", type=int, default=10)
    ap.add_argument("--gu-frac", type=float, default=0.02)
    ap.add_argument("--gu-bids", type=float, default=0.0)
    ap.add_argument("--kcap", type=int, default=64)
    ap.add_argument("--variants", nargs="+", default=["base", "gu", "fix", "gufix"])
    args = ap.parse_args()
    for kind in args.kinds:
        for n in args.n:
            rng = np.random.default_rng(0)
            if kind == "uniform":
                c = rng.integers(0, 1000, (n, n)).astype(np.int64)
            else:
                a, b = rng.random((n, 1, 2)) * 1000, rng.random((1, n, 2)) * 1000
                g = np.sqrt(((a - b) ** 2).sum(-1))
                c = np.rint(g / g.max() * 2**19).astype(np.int64)
            S = c * (n + 1)
            rr, cc = linear_sum_assignment(c)
            ref = c[rr, cc].sum()
            for v in args.variants:
                gu = args.gu_frac if "gu" in v else 0.0
                gb = args.gu_bids if "gu" in v else 0.0
                t0 = time.perf_counter()
                col, p, st = solve(S, args.alpha, gb, gu, "fix" in v, args.kcap)
                t = time.perf_counter() - t0
                tot = c[np.arange(n), col].sum()
                print(
                    f"{kind} n={n} {v:6s} ok={tot == ref} {t:6.2f}s rounds "
                    f"{st[:, 0].tolist()} scans {st[:, 1].sum()} entries "
                    f"{st[:, 2].sum() / 1e6:.1f}M GU {st[:, 3].tolist()} sweeps "
                    f"{st[:, 4].tolist()} fixed rows {st[:, 5].tolist()}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
