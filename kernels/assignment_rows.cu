// assignment_rows.cu: the large-problem path of the GPU assignment (N > 256): every
// phase of the cost scaling in one persistent launch, a warp per row, with candidate
// lists, global price updates and arc fixing.
//
// Python caller: vision_cuts/_assignment_gpu.py (_solve_rows), which hands over B
// square N x N problems of nonnegative integer costs already multiplied by (N + 1),
// row-major (B, N, N): c[(b * N + i) * N + k]. Column words as in assignment.cu: one
// 64-bit word per column, (price << bits) | owner, raised by atomicMax.
//
// Padding and forbidden pairs. Rows n..N-1 of every problem are the padding of a
// rectangular problem (cost 0 everywhere): they never bid. Their part is kept by a
// price floor (r_settle): once every real row holds a column, every column priced below
// theta = (highest price of a column no real row holds) - eps rises to theta and the
// real rows whose pairs stop being eps-optimal bid again; at the end the columns no
// real row holds are within eps of the lowest price, which is the eps-optimality of
// padding rows holding them. (Padding rows that bid fight price wars among themselves,
// eps at a time: benchmarks/NOTES_gpu_assignment.md.) A forbidden pair costs R_ABSENT:
// it is never bid for, listed or relaxed (the caller has checked feasibility). Among
// equally cheap arcs a row takes the lowest key k ^ r_tie(r) (ASSIGN_TIE_SPREAD).
//
// Candidate lists. Each row r keeps a list of at most ASSIGN_CAND of its arcs, in
// column order with their costs, and L[r], a lower bound of the reduced cost
// d_r(k) = c[r, k] + p[k] of every arc left out (L[r] = A_BIG: none left out). Prices
// only rise, so a bound stays valid once taken. A list holds the arcs whose
// d_r(k) - d1 (d1 = the row's smallest) falls below a cut chosen from a histogram of
// half-octave buckets, the most that fit; L[r] is the smallest d_r(k) of the others,
// read after the list's arcs (so no later than any of them). Every scan of the row
// reads only the list and L[r]:
//   * a bid takes the best list arc j1 when its d1 <= L[r] (then it is a best arc of
//     the whole row) and uses d2' = min(d2, L[r]) <= the true second best, so the
//     raised price leaves the pair eps-optimal (a smaller rise than the exact bid:
//     still correct). When d1 > L[r] the list is rebuilt from the whole row
//     (counted as a fallback), and the bid scans the whole row if even the new list
//     cannot answer.
//   * the keep step (start of a phase) compares the pair with min(list, L[r]), a lower
//     bound of the row minimum, so it frees every pair that may not be eps-optimal.
//   * the global price update treats L[r] as an arc to a column of distance >= 0.
// Lists are rebuilt at the start of every phase (rows with L[r] < A_BIG); rows with
// N <= ASSIGN_CAND scan the whole row (ncand < 0), and so does, from then on, a row
// whose fresh list leaves out an arc within eps of its best (L[r] <= d1 + eps): more
// arcs tie near its best than a list holds, and the list would run dry at every bid
// (integers 0-3 at N = 4000: 287k rebuilds for 300k bids before this rule).
//
// Arc fixing (Goldberg-Kennedy): at the end of a phase that was eps'-optimal, an arc
// with d_r(k) - d_r(j) >= N * eps' (j the row's column) lies on no optimal
// assignment. When a freshly built list has L[r] - d_r(j) >= N * eps' every arc left
// out is such an arc: L[r] becomes A_BIG and the list is the whole problem of that
// row from then on (fixing = 0 turns this off, so that the final prices certify
// optimality over every arc).
//
// Global price update: with the bids stopped, prices rise by the shortest distance of
// each column to a free column (dist[k] = 0 for a free k; for the column j of row r,
// dist[j] = max(0, min(L[r], min_{k != j} (d_r(k) + dist[k])) + eps - d_r(j))),
// computed by Bellman-Ford relaxation in place (atomicMin) over the rows until a
// sweep changes nothing; columns that reach no free column rise by the largest finite
// distance. Every pair stays eps-optimal. An update runs after the bids since the
// last one reach gu_bids * (free rows) + gu_min_bids.
//
// Ending the bids. Warps leave the bids when the running count of columns taken in the
// phase reaches the real rows, or the bids reach the budget of a global update; after
// the barrier an exact recount of the real rows that hold their column (r_recount)
// decides what follows and replaces the running count where they differ. A warp also
// leaves when it has been idle while no bid was added for ASSIGN_STALL_NS: with a
// running count one short of the truth every row would otherwise wait for ever (seen:
// test_rows_candidate_lists and test_global_update_and_arc_fixing with short lists, in
// about one solve in 500 of the GPU test files; benchmarks/NOTES_gpu_assignment.md).
// Leaving early is always safe: the recount and the next round pick up any free row.
//
// One launch runs every phase: grid-wide barriers separate the keep step, the bids
// and the global updates, so the grid must be co-resident (Python launches
// ASSIGN_MIN_BLOCKS blocks of ASSIGN_BLOCK threads per SM, which __launch_bounds__
// allows). The host reads the state once at the end.
//
// state (unsigned long long, R_STATE words, zero before the launch):
//   [0] err (1: price overflow, 2: more than max_bids bids, a runaway, 3: the bids
//   ran past limit_ns nanoseconds after the launch, the caller's time budget), [2]
//   Bellman-Ford sweeps, [3] global updates,
//   [4] list builds, [5] fallbacks, [6] phases, [16..18] nanoseconds spent in the
//   keep steps, the bids and the global updates (block 0's view), [19] the clock at
//   the start, [7] settles, [8] rows they freed, [9] rows switched to whole-row scans,
//   [10], [11] keep steps whose running count of held rows differed from the exact
//   recount and by how much in all, [12], [13] the same after the bids, [14] warps that
//   left the bids idle when no bid was added for ASSIGN_STALL_NS, [20], [21] recount
//   slots, [R_BIDS] bids,
//   [R_COUNT + 16 * ph] columns taken in phase ph, and at the end of phase ph (block
//   0's view, cumulative): [+1] bids, [+2] global updates, [+3] sweeps, [+4] list
//   fallbacks, [+5] the clock (ns), [+6] the phase's eps. The counters that every bid
//   touches sit on cache lines of their own: warps with nothing to do poll them only
//   every ASSIGN_QUIET passes, and add their bids every ASSIGN_BID_BATCH bids.
// sync (unsigned, 8 words, zero before the launch): barrier (arrivals, generation,
// result of its OR), maxd.
//
// Contention: tens of thousands of threads reading one word after a barrier queue on
// one L2 slice, so a block reads such words once and shares them (r_grid_sync_or
// carries the OR of a flag through the barrier word itself, r_block_read the rest).
#include "assignment_common.cuh"

#ifndef COST_T
#define COST_T int
#endif
#ifndef ASSIGN_BLOCK
#define ASSIGN_BLOCK 256
#endif
#ifndef ASSIGN_MIN_BLOCKS
#define ASSIGN_MIN_BLOCKS 4
#endif
#ifndef ASSIGN_CAND
#define ASSIGN_CAND 256
#endif
#ifndef ASSIGN_QUIET
#define ASSIGN_QUIET 16
#endif
#ifndef ASSIGN_BID_BATCH
#define ASSIGN_BID_BATCH 8
#endif
#ifndef ASSIGN_STALL_NS
#define ASSIGN_STALL_NS 200000ull
#endif
#ifndef ASSIGN_TIE_SPREAD
#define ASSIGN_TIE_SPREAD 1
#endif
#if ASSIGN_BLOCK % 32 != 0
#error "ASSIGN_BLOCK must be a multiple of 32"
#endif

// the cost of an absent (forbidden) arc: never bid for, never in a list or a path
#define R_ABSENT ((COST_T)(sizeof(COST_T) == 4 ? 0x7fffffffll : 0x3fffffffffffffffll))
#define R_BUCKETS 128
#define R_MAX_PHASES 56
#define R_DINF 0x7fffffffffffffffull
#define R_BIDS 32
#define R_SLOT 20      // [20], [21]: the exact recounts (r_recount), in turn
#define R_KEEP_OFF 10  // [10] keep steps whose running count was off, [11] by how much
#define R_BIDS_OFF 12  // [12] bid rounds whose running count was off, [13] by how much
#define R_STALLS 14    // warps that left the bids idle, with no bid added for a while
#define R_COUNT 64
#define R_STATE (R_COUNT + 16 * R_MAX_PHASES)

// Grid barrier that also returns the OR of pred over the grid (every thread gets it).
// bar[0]: arrivals (low 16 bits) and blocks with pred (high bits), bar[1]: generation,
// bar[2]: the result, written by the last arrival before it opens the barrier (a block
// reads it before it can arrive at the next barrier, so no later result overwrites it
// early). At most 65535 blocks.
__device__ __forceinline__ bool r_grid_sync_or(unsigned* bar, bool pred) {
    __shared__ int s_or;
    const int any = __syncthreads_or(pred);
    if (threadIdx.x == 0) {
        volatile unsigned* vbar = bar;
        const unsigned gen = vbar[1];
        __threadfence();
        const unsigned add = 1u + (any ? 0x10000u : 0u);
        const unsigned old = atomicAdd(bar, add);
        if ((old & 0xffffu) == gridDim.x - 1) {
            atomicExch(bar + 2, (old + add) >> 16 ? 1u : 0u);
            atomicExch(bar, 0u);
            __threadfence();
            atomicAdd(bar + 1, 1u);
        } else {
            while (vbar[1] == gen) __nanosleep(64);
        }
        __threadfence();
        s_or = (int)vbar[2];
    }
    __syncthreads();
    const bool out = s_or != 0;
    __syncthreads();  // s_or is reused by the next barrier
    return out;
}

__device__ __forceinline__ void r_grid_sync(unsigned* bar) { r_grid_sync_or(bar, false); }

// one read of a word shared by the grid, for the whole block (uniform control flow)
__device__ __forceinline__ unsigned long long r_block_read(const unsigned long long* p) {
    __shared__ unsigned long long s_v;
    if (threadIdx.x == 0) s_v = *(const volatile unsigned long long*)p;
    __syncthreads();
    const unsigned long long v = s_v;
    __syncthreads();
    return v;
}

__device__ __forceinline__ unsigned long long r_clock() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// half-octave bucket of x >= 0: 0 for 0, then 1 + 2 * floor(log2 x) + the next bit
__device__ __forceinline__ int r_bucket(long long x) {
    if (x <= 0) return 0;
    const int lg = 63 - __clzll(x);
    const int sub = lg >= 1 ? (int)((x >> (lg - 1)) & 1ll) : 0;
    return 1 + 2 * lg + sub;
}

// reduced cost of arc k (A_BIG for an absent arc)
__device__ __forceinline__ long long r_d(const COST_T* __restrict__ row, const au64* w,
                                         int k, int bits) {
    const COST_T c = __ldg(row + k);
    return c == R_ABSENT ? A_BIG : (long long)c + a_price(__ldcg(w + k), bits);
}

__device__ __forceinline__ long long r_dc(long long c, au64 w, int bits) {
    return c == (long long)R_ABSENT ? A_BIG : c + a_price(w, bits);
}

// the smallest reduced cost of a whole row (every lane gets it)
__device__ long long r_row_min(const COST_T* __restrict__ row, const au64* w, int N,
                               int bits, int lane) {
    long long d1 = A_BIG;
    int k = lane;
    for (; k + 96 < N; k += 128) {
        const long long a = r_d(row, w, k, bits), b = r_d(row, w, k + 32, bits);
        const long long c = r_d(row, w, k + 64, bits), d = r_d(row, w, k + 96, bits);
        d1 = min(d1, min(min(a, b), min(c, d)));
    }
    for (; k < N; k += 32) d1 = min(d1, r_d(row, w, k, bits));
    return a_warp_min(d1);
}

__device__ __forceinline__ void r_take(long long d, int k, long long c, long long& d1,
                                       int& j1, long long& c1, long long& d2,
                                       unsigned tie) {
    // ties between equal reduced costs go to the lower key k ^ tie: rows with
    // different ties spread over equally cheap columns instead of all bidding for the
    // lowest one (tie = 0: the lowest column)
    if (d < d1 || (d == d1 && d < A_BIG && ((unsigned)k ^ tie) < ((unsigned)j1 ^ tie))) {
        d2 = d1;
        d1 = d;
        j1 = k;
        c1 = c;
    } else if (d < d2) {
        d2 = d;
    }
}

// merge (d1, j1, c1, d2) across the warp (ties: the lower key j1 ^ tie)
__device__ __forceinline__ void r_warp_best(long long& d1, int& j1, long long& c1,
                                            long long& d2, unsigned tie) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const long long od1 = __shfl_xor_sync(A_FULL, d1, off);
        const long long od2 = __shfl_xor_sync(A_FULL, d2, off);
        const long long oc1 = __shfl_xor_sync(A_FULL, c1, off);
        const int oj1 = __shfl_xor_sync(A_FULL, j1, off);
        if (od1 < d1 || (od1 == d1 && ((unsigned)oj1 ^ tie) < ((unsigned)j1 ^ tie))) {
            d2 = min(d1, od2);
            d1 = od1;
            j1 = oj1;
            c1 = oc1;
        } else {
            d2 = min(d2, od1);
        }
    }
}

// the tie key of row r (see r_take)
__device__ __forceinline__ unsigned r_tie(int r) {
#if ASSIGN_TIE_SPREAD
    unsigned h = (unsigned)r * 0x9E3779B1u;
    return h ^ (h >> 15);
#else
    return 0u;
#endif
}

// best and second best of a whole row
__device__ void r_row_best(const COST_T* __restrict__ row, const au64* w, int N,
                           int bits, int lane, long long& d1, int& j1, long long& c1,
                           long long& d2, unsigned tie = 0u) {
    d1 = A_BIG, d2 = A_BIG, c1 = 0;
    j1 = -1;
    int k = lane;
    for (; k + 96 < N; k += 128) {
        long long c[4];
        au64 ww[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            c[u] = __ldg(row + k + 32 * u);
            ww[u] = __ldcg(w + k + 32 * u);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u)
            r_take(r_dc(c[u], ww[u], bits), k + 32 * u, c[u], d1, j1, c1, d2, tie);
    }
    for (; k < N; k += 32) {
        const long long c = __ldg(row + k);
        r_take(r_dc(c, __ldcg(w + k), bits), k, c, d1, j1, c1, d2, tie);
    }
    r_warp_best(d1, j1, c1, d2, tie);
}

// best and second best of a list (column order, costs beside)
__device__ void r_list_best(const int* lst, const COST_T* lstc, int nc, const au64* w,
                            int bits, int lane, long long& d1, int& j1, long long& c1,
                            long long& d2, unsigned tie = 0u) {
    d1 = A_BIG, d2 = A_BIG, c1 = 0;
    j1 = -1;
    int t = lane;
    for (; t + 96 < nc; t += 128) {
        int k[4];
        long long c[4];
        au64 ww[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            k[u] = lst[t + 32 * u];
            c[u] = lstc[t + 32 * u];
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) ww[u] = __ldcg(w + k[u]);
#pragma unroll
        for (int u = 0; u < 4; ++u)
            r_take(c[u] + a_price(ww[u], bits), k[u], c[u], d1, j1, c1, d2, tie);
    }
    for (; t < nc; t += 32) {
        const int k = lst[t];
        const long long c = lstc[t];
        r_take(c + a_price(__ldcg(w + k), bits), k, c, d1, j1, c1, d2, tie);
    }
    r_warp_best(d1, j1, c1, d2, tie);
}

// Rebuilds the list of a row from the whole row (see the top of the file); returns its
// length and sets low (every lane gets both). hist: R_BUCKETS ints of this warp.
__device__ int r_build(const COST_T* __restrict__ row, const au64* w, int N, int bits,
                       int lane, int* hist, int* lst, COST_T* lstc, long long& low) {
    const long long d1 = r_row_min(row, w, N, bits, lane);
    __syncwarp();
    for (int b = lane; b < R_BUCKETS; b += 32) hist[b] = 0;
    __syncwarp();
    int k = lane;
    for (; k + 96 < N; k += 128) {
        const long long a = r_d(row, w, k, bits), b = r_d(row, w, k + 32, bits);
        const long long c = r_d(row, w, k + 64, bits), d = r_d(row, w, k + 96, bits);
        atomicAdd(hist + r_bucket(a - d1), 1);
        atomicAdd(hist + r_bucket(b - d1), 1);
        atomicAdd(hist + r_bucket(c - d1), 1);
        atomicAdd(hist + r_bucket(d - d1), 1);
    }
    for (; k < N; k += 32) atomicAdd(hist + r_bucket(r_d(row, w, k, bits) - d1), 1);
    __syncwarp();
    // cut: the first bucket at which the running count exceeds ASSIGN_CAND
    const int h0 = hist[4 * lane], h1 = hist[4 * lane + 1];
    const int h2 = hist[4 * lane + 2], h3 = hist[4 * lane + 3];
    const int s = h0 + h1 + h2 + h3;
    int incl = s;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const int v = __shfl_up_sync(A_FULL, incl, off);
        if (lane >= off) incl += v;
    }
    const int excl = incl - s;
    int cut = R_BUCKETS;
    if (excl + h0 > ASSIGN_CAND)
        cut = 4 * lane;
    else if (excl + h0 + h1 > ASSIGN_CAND)
        cut = 4 * lane + 1;
    else if (excl + h0 + h1 + h2 > ASSIGN_CAND)
        cut = 4 * lane + 2;
    else if (incl > ASSIGN_CAND)
        cut = 4 * lane + 3;
    cut = __reduce_min_sync(A_FULL, (unsigned)cut);
    // collect in column order: buckets below the cut (at most ASSIGN_CAND), or, when
    // bucket 0 alone is too large, its first ASSIGN_CAND arcs
    int m = 0;
    long long lo = A_BIG;
    const unsigned below = (1u << lane) - 1u;
#pragma unroll 4
    for (int base = 0; base < N; base += 32) {
        const int kk = base + lane;
        long long c = 0, d = A_BIG;
        bool want = false;
        if (kk < N) {
            c = __ldg(row + kk);
            d = r_dc(c, __ldcg(w + kk), bits);
            const int b = r_bucket(d - d1);
            want = cut > 0 ? b < cut : b == 0;
        }
        const unsigned bal = __ballot_sync(A_FULL, want);
        const int pos = m + __popc(bal & below);
        if (want && pos < ASSIGN_CAND) {
            lst[pos] = kk;
            lstc[pos] = (COST_T)c;
        } else {
            lo = min(lo, d);
        }
        m += __popc(bal);
    }
    low = a_warp_min(lo);
    __syncwarp();
    return min(m, ASSIGN_CAND);
}

// Global price update over the lists (see the top of the file). Runs on every thread
// of the grid; ends with a grid barrier.
__device__ void r_global_update(const COST_T* __restrict__ cost, au64* words,
                                const int* col4row, const int* cand,
                                const COST_T* candc, const int* ncand,
                                const long long* lowb, unsigned long long* dist,
                                unsigned* sync, unsigned long long* state, int total,
                                int n, int N, long long eps, int bits) {
    const int lane = threadIdx.x & 31;
    const int tid = (int)(blockIdx.x * (size_t)blockDim.x + threadIdx.x);
    const int nthreads = (int)(gridDim.x * (size_t)blockDim.x);
    const int warp = tid >> 5;
    const int nwarps = nthreads >> 5;
    const au64 mask = a_mask(bits);
    unsigned* bar = sync;
    unsigned long long* maxd = (unsigned long long*)(sync + 6);  // sync[6..7]
    for (int k = tid; k < total; k += nthreads)
        dist[k] = (__ldcg(words + k) & mask) == mask ? 0ull : R_DINF;
    r_grid_sync(bar);
    const int nreal = total / N * n;
    int it = 0;
    for (;; ++it) {
        bool changed = false;
        for (int q = warp; q < nreal; q += nwarps) {
            const int b = q / n;
            const int i = q - b * n;
            const int r = b * N + i;
            const int j = __ldcg(col4row + r);
            if (j < 0) continue;
            const au64* w = words + (size_t)b * N;
            if ((int)(__ldcg(w + j) & mask) != i) continue;
            const unsigned long long* dd = dist + (size_t)b * N;
            const COST_T* row = cost + (size_t)r * N;
            const int nc = ncand[r];
            long long h = A_BIG;
            if (nc < 0) {
                for (int k = lane; k < N; k += 32) {
                    const unsigned long long dk = __ldcg(dd + k);
                    if (k == j || dk == R_DINF) continue;
                    const long long d = r_d(row, w, k, bits);
                    if (d < A_BIG) h = min(h, d + (long long)dk);
                }
            } else {
                const int* lst = cand + (size_t)r * ASSIGN_CAND;
                const COST_T* lc = candc + (size_t)r * ASSIGN_CAND;
#pragma unroll 4
                for (int t = lane; t < nc; t += 32) {
                    const int k = lst[t];
                    const unsigned long long dk = __ldcg(dd + k);
                    if (k == j || dk == R_DINF) continue;
                    h = min(h, (long long)lc[t] + a_price(__ldcg(w + k), bits) +
                                   (long long)dk);
                }
                h = min(h, lowb[r]);
            }
            h = a_warp_min(h);
            if (lane == 0 && h < A_BIG) {
                long long nd = h + eps - r_d(row, w, j, bits);
                if (nd < 0) nd = 0;
                if ((unsigned long long)nd < __ldcg(dd + j)) {
                    atomicMin(dist + (size_t)b * N + j, (unsigned long long)nd);
                    changed = true;
                }
            }
        }
        if (!r_grid_sync_or(bar, changed)) break;
    }
    // columns that reach no free column rise by the largest finite distance
    unsigned long long top = 0ull;
    for (int k = tid; k < total; k += nthreads) {
        const unsigned long long d = __ldcg(dist + k);
        if (d != R_DINF) top = max(top, d);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) top = max(top, __shfl_xor_sync(A_FULL, top, off));
    if (lane == 0 && top) atomicMax(maxd, top);
    r_grid_sync(bar);
    const unsigned long long cap = r_block_read(maxd);
    const long long pmax = a_pmax(bits);
    for (int k = tid; k < total; k += nthreads) {
        unsigned long long d = __ldcg(dist + k);
        if (d > cap) d = cap;
        if (d == 0) continue;
        const au64 wk = __ldcg(words + k);
        if (a_price(wk, bits) + (long long)d > pmax) {
            atomicExch(state + 0, 1ull);
            continue;
        }
        __stcg(words + k, wk + (d << bits));
    }
    r_grid_sync(bar);
    if (tid == 0) {
        *maxd = 0ull;
        atomicAdd(state + 2, (unsigned long long)(it + 1));
        atomicAdd(state + 3, 1ull);
    }
}

// Is the pair (r, j) still eps-optimal? (every lane gets the answer)
__device__ __forceinline__ bool r_pair_ok(const COST_T* __restrict__ row, const au64* w,
                                          const int* lst, const COST_T* lc, int nc,
                                          long long L, int j, long long eps, int N,
                                          int bits, int lane) {
    long long d1, c1, d2;
    int j1;
    if (nc < 0)
        r_row_best(row, w, N, bits, lane, d1, j1, c1, d2);
    else
        r_list_best(lst, lc, nc, w, bits, lane, d1, j1, c1, d2);
    const long long dj = r_d(row, w, j, bits);
    const long long dmin = nc >= 0 ? min(d1, L) : d1;
    return dj <= dmin + eps;
}

// The price floor of the columns no real row holds (problems with n < N; see the top of
// the file): once every real row holds a column, every column priced below
// theta_b = (the highest price of a column of problem b that no real row holds) - eps
// rises to theta_b, then the real rows whose pairs are no longer eps-optimal are
// freed. Returns whether any row was freed (every thread gets it). floor: B words,
// -1 on entry and on return. Runs on every thread of the grid.
__device__ bool r_settle(const COST_T* __restrict__ cost, au64* words, int* col4row,
                         const int* cand, const COST_T* candc, const int* ncand,
                         const long long* lowb, long long* floor_,
                         unsigned long long* count, unsigned* sync,
                         unsigned long long* state, int total, int n, int N,
                         long long eps, int bits) {
    const int lane = threadIdx.x & 31;
    const int tid = (int)(blockIdx.x * (size_t)blockDim.x + threadIdx.x);
    const int nthreads = (int)(gridDim.x * (size_t)blockDim.x);
    const int warp = tid >> 5;
    const int nwarps = nthreads >> 5;
    const au64 mask = a_mask(bits);
    unsigned* bar = sync;
    for (int k = tid; k < total; k += nthreads) {
        const au64 wk = __ldcg(words + k);
        if ((wk & mask) == mask) atomicMax(floor_ + k / N, a_price(wk, bits));
    }
    r_grid_sync(bar);
    bool raised = false;
    for (int k = tid; k < total; k += nthreads) {
        const long long theta = __ldcg(floor_ + k / N) - eps;
        const au64 wk = __ldcg(words + k);
        if (a_price(wk, bits) < theta) {
            __stcg(words + k, ((au64)theta << bits) | (wk & mask));
            raised = true;
        }
    }
    raised = r_grid_sync_or(bar, raised);
    for (int b = tid; b < total / N; b += nthreads) floor_[b] = -1;
    if (tid == 0) atomicAdd(state + 7, 1ull);
    if (!raised) return false;
    bool freed = false;
    const int nreal = total / N * n;
    for (int q = warp; q < nreal; q += nwarps) {
        const int b = q / n;
        const int r = b * N + (q - b * n);
        const int j = __ldcg(col4row + r);
        if (j < 0) continue;
        au64* w = words + (size_t)b * N;
        const bool ok =
            r_pair_ok(cost + (size_t)r * N, w, cand + (size_t)r * ASSIGN_CAND,
                      candc + (size_t)r * ASSIGN_CAND, ncand[r], lowb[r], j, eps, N,
                      bits, lane);
        if (!ok && lane == 0) {
            __stcg(w + j, __ldcg(w + j) | mask);  // only this row owns column j
            __stcg(col4row + r, -1);
            atomicAdd(count, ~0ull);  // one column fewer taken
            atomicAdd(state + 8, 1ull);
            freed = true;
        }
        __syncwarp();
    }
    return r_grid_sync_or(bar, freed);
}

// The real rows that hold their column, counted exactly (every thread gets it). slot:
// a state word that is zero on entry; it keeps the count (the caller zeroes it again
// once every block has read it). Runs on every thread of the grid; one barrier.
__device__ long long r_recount(const au64* words, const int* col4row,
                               unsigned long long* slot, unsigned* bar, int total, int n,
                               int N, int bits) {
    const au64 mask = a_mask(bits);
    const int tid = (int)(blockIdx.x * (size_t)blockDim.x + threadIdx.x);
    const int nthreads = (int)(gridDim.x * (size_t)blockDim.x);
    const int nreal = total / N * n;
    unsigned long long mine = 0ull;
    for (int q = tid; q < nreal; q += nthreads) {
        const int b = q / n;
        const int i = q - b * n;
        const int j = __ldcg(col4row + (size_t)b * N + i);
        if (j >= 0 && (int)(__ldcg(words + (size_t)b * N + j) & mask) == i) ++mine;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mine += __shfl_xor_sync(A_FULL, mine, off);
    if ((threadIdx.x & 31) == 0 && mine) atomicAdd(slot, mine);
    r_grid_sync(bar);
    return (long long)r_block_read(slot);
}

// The whole solve (see the top of the file). words: all (price 0, owner NONE);
// col4row: all -1; ncand: -1 (whole rows, N <= ASSIGN_CAND) or 0; lowb: A_BIG or -1
// (no list yet); dist: total words of scratch; floor_: B words of -1; sync, state:
// zero. Rows n..N-1 of every problem (the padding) never bid: the price floor stands
// for them.
extern "C" __global__ void __launch_bounds__(ASSIGN_BLOCK, ASSIGN_MIN_BLOCKS)
    assign_rows_solve(const COST_T* __restrict__ cost, au64* words, int* col4row,
                      int* cand, COST_T* candc, int* ncand, long long* lowb,
                      unsigned long long* dist, long long* floor_, unsigned* sync,
                      unsigned long long* state, int total, int n, int N, long long smax,
                      int alpha, int bits, int fixing, int global_update,
                      long long gu_bids, long long gu_min_bids, long long max_bids,
                      long long limit_ns) {
    __shared__ int s_hist[(ASSIGN_BLOCK / 32) * R_BUCKETS];
    const int lane = threadIdx.x & 31;
    const int warp = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5);
    const int nwarps = (int)((gridDim.x * (size_t)blockDim.x) >> 5);
    int* hist = s_hist + (threadIdx.x >> 5) * R_BUCKETS;
    const au64 mask = a_mask(bits);
    const long long pmax = a_pmax(bits);
    volatile unsigned long long* vstate = state;
    unsigned* bar = sync;
    const bool timer = threadIdx.x == 0 && blockIdx.x == 0;
    const int nreal = total / N * n;  // rows that bid: the first n of every problem
    unsigned long long t0 = timer ? r_clock() : 0ull;
    if (timer) state[19] = t0;
    // the time budget (limit_ns > 0): every warp checks it where it polls the bids
    const unsigned long long deadline =
        limit_ns > 0 ? r_clock() + (unsigned long long)limit_ns : ~0ull;
    long long eps = smax > 1 ? smax : 1, prev = 0;
    int recounts = 0;
    // the exact number of real rows holding their column (after a barrier): it
    // replaces the phase's running count where the two differ (counted in state[off]).
    // The two slots are used in turn: a slot is zeroed one recount after its last use,
    // when every block has passed a barrier since reading it.
    auto r_exact = [&](unsigned long long* count, int off) -> long long {
        unsigned long long* slot = state + R_SLOT + (recounts & 1);
        const long long held = r_recount(words, col4row, slot, bar, total, n, N, bits);
        if (threadIdx.x == 0 && blockIdx.x == 0) {
            state[R_SLOT + ((recounts + 1) & 1)] = 0ull;
            const long long running = (long long)*(volatile unsigned long long*)count;
            if (running != held) {
                *count = (unsigned long long)held;
                state[off] += 1ull;
                state[off + 1] +=
                    (unsigned long long)(running > held ? running - held : held - running);
            }
        }
        ++recounts;
        return held;
    };
    for (int ph = 0;; ++ph) {
        prev = eps;
        eps = eps / alpha;
        if (eps < 1) eps = 1;
        unsigned long long* count = state + R_COUNT + 16 * ph;
        // keep step: rebuild the lists, fix arcs, keep the eps-optimal pairs
        for (int q = warp; q < nreal; q += nwarps) {
            const int b = q / n;
            const int r = b * N + (q - b * n);
            const COST_T* row = cost + (size_t)r * N;
            au64* w = words + (size_t)b * N;
            int* lst = cand + (size_t)r * ASSIGN_CAND;
            COST_T* lc = candc + (size_t)r * ASSIGN_CAND;
            int nc = ncand[r];
            long long L = lowb[r];
            if (nc >= 0 && L < A_BIG) {
                nc = r_build(row, w, N, bits, lane, hist, lst, lc, L);
                if (lane == 0) atomicAdd(state + 4, 1ull);
            }
            const int j = __ldcg(col4row + r);
            if (j >= 0) {
                long long d1, c1, d2;
                int j1;
                if (nc < 0)
                    r_row_best(row, w, N, bits, lane, d1, j1, c1, d2);
                else
                    r_list_best(lst, lc, nc, w, bits, lane, d1, j1, c1, d2);
                const au64 wj = __ldcg(w + j);
                const long long dj = r_dc(__ldg(row + j), wj, bits);
                if (nc >= 0 && fixing && ph > 0 && L < A_BIG &&
                    L - dj >= (long long)N * prev)
                    L = A_BIG;
                const long long dmin = nc >= 0 ? min(d1, L) : d1;
                if (nc >= 0 && L < A_BIG && L <= d1 + eps) {
                    // more arcs within eps of the best than a list holds (ties): the
                    // list would run dry at every bid; whole rows from now on
                    nc = -1;
                    L = A_BIG;
                    if (lane == 0) atomicAdd(state + 9, 1ull);
                }
                if (lane == 0) {
                    if (dj > dmin + eps) {
                        __stcg(w + j, wj | mask);  // only this row owns column j
                        __stcg(col4row + r, -1);
                    } else {
                        atomicAdd(count, 1ull);
                    }
                }
            }
            if (lane == 0) {
                ncand[r] = nc;
                lowb[r] = L;
            }
            __syncwarp();
        }
        r_grid_sync(bar);
        if (ph >= R_MAX_PHASES) {  // cannot happen for alpha >= 2 and 64-bit costs
            if (threadIdx.x == 0 && blockIdx.x == 0) atomicExch(state + 0, 1ull);
            break;
        }
        long long held = r_exact(count, R_KEEP_OFF);
        long long budget = A_BIG;
        volatile unsigned long long* vcount = count;
        if (global_update)
            budget = (long long)r_block_read(state + R_BIDS) + gu_bids * (nreal - held) +
                     gu_min_bids;
        r_grid_sync(bar);
        if (timer) {
            const unsigned long long t = r_clock();
            state[16] += t - t0;
            t0 = t;
        }
        for (;;) {
            // bids, until every real row holds a column or the bids reach the budget
            int quiet = 0;
            unsigned pend = 0;  // bids not yet added to state[R_BIDS] (lane 0)
            long long seen = -1;  // the bids at the start of this warp's idle spell
            unsigned long long since = 0ull;
            for (;;) {
                if (quiet == 0) {
                    const long long nb = (long long)vstate[R_BIDS];
                    if (nb > max_bids) {  // a runaway: every warp leaves, the caller raises
                        if (lane == 0) atomicCAS(state + 0, 0ull, 2ull);
                        break;
                    }
                    if (deadline != ~0ull && r_clock() > deadline) {
                        // past the budget: every warp leaves as here, the caller
                        // solves the problem another way (state[0] = 3)
                        if (lane == 0) atomicCAS(state + 0, 0ull, 3ull);
                        break;
                    }
                    if ((long long)*vcount >= nreal || nb >= budget) break;
                    if (seen != nb) {
                        seen = nb;
                        since = r_clock();
                    } else if (r_clock() - since > ASSIGN_STALL_NS) {
                        // idle while no bid was added for a while: leave (the exact
                        // count after the barrier decides what follows)
                        if (lane == 0) atomicAdd(state + R_STALLS, 1ull);
                        break;
                    }
                }
                bool idle = true;
                for (int q = warp; q < nreal; q += nwarps) {
                    const int b = q / n;
                    const int i = q - b * n;
                    const int r = b * N + i;
                    au64* w = words + (size_t)b * N;
                    const int j = __ldcg(col4row + r);
                    if (j >= 0 && (int)(__ldcg(w + j) & mask) == i) continue;
                    idle = false;
                    const COST_T* row = cost + (size_t)r * N;
                    int* lst = cand + (size_t)r * ASSIGN_CAND;
                    COST_T* lc = candc + (size_t)r * ASSIGN_CAND;
                    int nc = ncand[r];
                    long long L = lowb[r];
                    long long d1, c1, d2;
                    int j1;
                    if (nc < 0) {
                        r_row_best(row, w, N, bits, lane, d1, j1, c1, d2, r_tie(r));
                    } else {
                        r_list_best(lst, lc, nc, w, bits, lane, d1, j1, c1, d2, r_tie(r));
                        if (d1 > L) {  // the list cannot answer: rebuild it
                            nc = r_build(row, w, N, bits, lane, hist, lst, lc, L);
                            if (lane == 0) {
                                ncand[r] = nc;
                                lowb[r] = L;
                                atomicAdd(state + 4, 1ull);
                                atomicAdd(state + 5, 1ull);
                            }
                            r_list_best(lst, lc, nc, w, bits, lane, d1, j1, c1, d2, r_tie(r));
                            if (L <= d1 + eps) {
                                // prices rose meanwhile, or more arcs lie within eps of
                                // the best than the list holds (ties): the whole row,
                                // now and from now on (it would run dry at every bid)
                                r_row_best(row, w, N, bits, lane, d1, j1, c1, d2, r_tie(r));
                                L = A_BIG;
                                nc = -1;
                                if (lane == 0) {
                                    ncand[r] = -1;
                                    lowb[r] = A_BIG;
                                    atomicAdd(state + 9, 1ull);
                                }
                            }
                        }
                        d2 = min(d2, L);
                    }
                    if (lane == 0) {
                        // N == 1, or a single arc left: any price rise keeps the pair
                        // eps-optimal; rise by N * eps (the bound of the fixed arcs)
                        if (d2 == A_BIG) d2 = d1 + (long long)N * eps;
                        const long long bid = d2 - c1 + eps;
                        if (++pend >= ASSIGN_BID_BATCH) {
                            const unsigned long long all =
                                atomicAdd(state + R_BIDS, pend) + pend;
                            pend = 0;
                            if ((long long)all > max_bids) {
                                // a runaway: stop every warp as an overflow does
                                // and let the caller raise (state[0] = 2)
                                atomicCAS(state + 0, 0ull, 2ull);
                                atomicExch(count, (unsigned long long)nreal);
                            }
                        }
                        if (bid > pmax) {
                            atomicExch(state + 0, 1ull);
                            atomicExch(count, (unsigned long long)nreal);
                        } else {
                            const au64 nw = ((au64)bid << bits) | (au64)i;
                            const au64 old = atomicMax(w + j1, nw);
                            if (old < nw) {
                                if ((old & mask) == mask) atomicAdd(count, 1ull);
                                __stcg(col4row + r, j1);
                            }
                        }
                    }
                    __syncwarp();
                }
                if (idle) {
                    if (pend) {
                        atomicAdd(state + R_BIDS, pend);
                        pend = 0;
                    }
                    __nanosleep(128);
                    quiet = (quiet + 1) % ASSIGN_QUIET;
                } else {
                    quiet = 0;
                    seen = -1;
                }
            }
            if (pend) atomicAdd(state + R_BIDS, pend);
            r_grid_sync(bar);
            if (timer) {
                const unsigned long long t = r_clock();
                state[17] += t - t0;
                t0 = t;
            }
            const long long taken = r_exact(count, R_BIDS_OFF);
            if (r_block_read(state)) break;
            if (taken >= nreal) {
                if (n == N || !r_settle(cost, words, col4row, cand, candc, ncand, lowb,
                                        floor_, count, sync, state, total, n, N, eps,
                                        bits))
                    break;
                budget = (long long)r_block_read(state + R_BIDS) +
                         gu_bids * (nreal - (long long)r_block_read(count)) +
                         gu_min_bids;
                r_grid_sync(bar);
                continue;
            }
            if (global_update)
                r_global_update(cost, words, col4row, cand, candc, ncand, lowb, dist, sync,
                                state, total, n, N, eps, bits);
            if (timer) {
                const unsigned long long t = r_clock();
                state[18] += t - t0;
                t0 = t;
            }
            if (r_block_read(state)) break;
            budget = (long long)r_block_read(state + R_BIDS) + gu_bids * (nreal - taken) +
                     gu_min_bids;
            r_grid_sync(bar);
        }
        if (timer) {  // the phase's work counters (cumulative), for stats per phase
            unsigned long long* snap = state + R_COUNT + 16 * ph;
            snap[1] = vstate[R_BIDS];
            snap[2] = vstate[3];
            snap[3] = vstate[2];
            snap[4] = vstate[5];
            snap[5] = r_clock();
            snap[6] = (unsigned long long)eps;
            snap[7] = vstate[7];
            snap[8] = vstate[8];
        }
        if (r_block_read(state) || eps == 1) {
            if (timer) state[6] = (unsigned long long)(ph + 1);
            break;
        }
        r_grid_sync(bar);
    }
}
