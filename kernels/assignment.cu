// assignment.cu: cost-scaling linear assignment (Goldberg-Kennedy refine in its
// auction / double-push form), lock-free, with epsilon scaling.
//
// Python caller: vision_cuts/_assignment_gpu.py, which reduces every problem to B square
// N x N problems of nonnegative integer costs already multiplied by (N + 1) (padding
// rows of cost 0, forbidden pairs replaced by a large finite cost, float costs
// quantised), so that the phase with eps = 1 ends at the exact optimum.
//
// Column state: one 64-bit word per column, (price << bits) | owner, owner = the row
// that holds the column or NONE = 2**bits - 1 (N <= 2**bits - 1, so a row index never
// equals NONE). Prices are nonnegative and only rise, so a bid is one atomicMax on the
// word: the highest (price, row) wins, a lower or stale bid fails and is recomputed,
// and the old owner, finding the word no longer names it, bids again. A bid of row r
// for its best column j1 (reduced cost d = c + p; best d1, second best d2) raises
// p[j1] to d2 - c[r, j1] + eps: the pair is eps-optimal however the other prices rise.
// Prices stay below 2**(63 - bits): Python checks the bound before launching and the
// kernels report an overflow (err) instead of wrapping.
//
// Phases: eps = smax / alpha, / alpha, ... down to 1 (integer division, at least 1).
// At the start of a phase the pairs still eps-optimal for the new eps are kept and the
// others freed (no prices change); the phase ends when every row holds a column.
//
// Kernels and geometry:
//   assign_small_warp   one warp per problem (N <= 32), blockDim.x = 32 * problems per
//                       block, one row per lane; costs transposed (B, N, N): c[k * N + r];
//                       dynamic shared memory (8 + 4) * N bytes + 4 per problem.
//   assign_small_block  one block per problem (N <= blockDim.x * a few), rows
//                       r = threadIdx.x + t * blockDim.x; same transposed layout and
//                       shared memory for one problem.
//     Both run every phase in one launch; rounds (every free row bids once) are
//     separated by a barrier (__syncthreads_or / __any_sync), bids are shared-memory
//     atomics.
//   assign_keep_rows / assign_auction_rows   large problems: one warp per row (a
//                       grid-stride loop over the B * N rows of all problems), costs
//                       row-major (B, N, N): c[(b * N + i) * N + k]; words in global
//                       memory. The host launches both once per phase (after zeroing
//                       count). assign_auction_rows is persistent: every warp loops until
//                       count (columns taken) reaches B * N, so the grid must be
//                       co-resident: Python launches ASSIGN_MIN_BLOCKS blocks of
//                       ASSIGN_BLOCK threads per SM, which __launch_bounds__ guarantees.
//
// Compile-time constants (Python prepends `#define`s):
//   COST_T              int (scaled costs < 2**31) or long long
//   ASSIGN_BLOCK        threads per block of the row kernels (multiple of 32)
//   ASSIGN_MIN_BLOCKS   blocks per SM that must be co-resident (launch bounds)
//
// References: A. V. Goldberg and R. Kennedy, "An efficient cost scaling algorithm for
// the assignment problem", Math. Programming 71, 1995; D. P. Bertsekas, "The auction
// algorithm: a distributed relaxation method for the assignment problem", Annals of
// Operations Research 14, 1988; M. Łupińska, "Parallel implementation of flow and
// matching algorithms", 2011.
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

#if ASSIGN_BLOCK % 32 != 0
#error "ASSIGN_BLOCK must be a multiple of 32"
#endif

typedef unsigned long long au64;

#define A_BIG 0x7fffffffffffffffll
#define A_FULL 0xffffffffu

__device__ __forceinline__ long long a_price(au64 w, int bits) {
    return (long long)(w >> bits);
}
__device__ __forceinline__ long long a_pmax(int bits) {
    return (1ll << (63 - bits)) - 1ll;
}
__device__ __forceinline__ au64 a_mask(int bits) { return (1ull << bits) - 1ull; }

// best (d1 at j1) and second best d2 of the reduced costs seen so far; ties keep the
// lower column in d1 and put the equal value in d2
__device__ __forceinline__ void a_take(long long d, int k, long long& d1, int& j1,
                                       long long& d2) {
    if (d < d1) {
        d2 = d1;
        d1 = d;
        j1 = k;
    } else if (d < d2) {
        d2 = d;
    }
}

// merge (d1, j1, d2) across a warp; every lane ends with the same triple
__device__ __forceinline__ void a_warp_best(long long& d1, int& j1, long long& d2) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const long long od1 = __shfl_xor_sync(A_FULL, d1, off);
        const long long od2 = __shfl_xor_sync(A_FULL, d2, off);
        const int oj1 = __shfl_xor_sync(A_FULL, j1, off);
        if (od1 < d1 || (od1 == d1 && (unsigned)oj1 < (unsigned)j1)) {
            d2 = min(d1, od2);
            d1 = od1;
            j1 = oj1;
        } else {
            d2 = min(d2, od1);
        }
    }
}

__device__ __forceinline__ long long a_warp_min(long long v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = min(v, __shfl_xor_sync(A_FULL, v, off));
    return v;
}

// ------------------------------------------------------------------ small problems

template <bool WARP>
__device__ __forceinline__ void a_sync() {
    if (WARP)
        __syncwarp();
    else
        __syncthreads();
}

template <bool WARP>
__device__ __forceinline__ bool a_sync_or(bool p) {
    if (WARP) {
        __syncwarp();
        return __any_sync(A_FULL, p);
    }
    return __syncthreads_or(p);
}

// One problem by a warp (WARP) or a block; t / nt: this thread and the thread count.
// c: transposed costs, c[k * N + r] = cost of row r, column k.
template <bool WARP>
__device__ void a_solve_small(const COST_T* __restrict__ c, int N, long long smax,
                              int alpha, int bits, au64* sw, int* scol, int* serr, int t,
                              int nt, int* col_out, long long* price_out, int* err_out) {
    const au64 mask = a_mask(bits);
    const long long pmax = a_pmax(bits);
    for (int j = t; j < N; j += nt) {
        sw[j] = mask;  // price 0, no owner
        scol[j] = -1;
    }
    if (t == 0) *serr = 0;
    a_sync<WARP>();
    long long eps = smax;
    do {
        eps /= alpha;
        if (eps < 1) eps = 1;
        // keep the pairs that are still eps-optimal, free the others
        for (int r = t; r < N; r += nt) {
            const int j = scol[r];
            if (j < 0) continue;
            long long dmin = A_BIG;
            for (int k = 0; k < N; ++k)
                dmin = min(dmin, (long long)c[(size_t)k * N + r] + a_price(sw[k], bits));
            const long long dj = (long long)c[(size_t)j * N + r] + a_price(sw[j], bits);
            if (dj > dmin + eps) {
                sw[j] = sw[j] | mask;  // same price, owner NONE
                scol[r] = -1;
            }
        }
        a_sync<WARP>();
        while (true) {
            bool active = false;
            for (int r = t; r < N; r += nt) {
                const int j = scol[r];
                if (j >= 0 && (int)(sw[j] & mask) == r) continue;
                active = true;
                long long d1 = A_BIG, d2 = A_BIG;
                int j1 = 0;
                for (int k = 0; k < N; ++k)
                    a_take((long long)c[(size_t)k * N + r] + a_price(sw[k], bits), k, d1,
                           j1, d2);
                if (d2 == A_BIG) d2 = d1;  // N == 1
                const long long bid = d2 - (long long)c[(size_t)j1 * N + r] + eps;
                if (bid > pmax) {
                    *serr = 1;
                    continue;
                }
                const au64 nw = ((au64)bid << bits) | (au64)r;
                const au64 old = atomicMax(&sw[j1], nw);
                scol[r] = old < nw ? j1 : -1;
            }
            if (!a_sync_or<WARP>(active)) break;
            if (*serr) break;
        }
    } while (eps > 1 && !*serr);
    a_sync<WARP>();
    for (int r = t; r < N; r += nt) {
        col_out[r] = scol[r];
        price_out[r] = a_price(sw[r], bits);
    }
    if (t == 0) *err_out = *serr;
}

extern "C" __global__ void assign_small_warp(const COST_T* __restrict__ costT, int B,
                                             int N, long long smax, int alpha, int bits,
                                             int* col_out, long long* price_out,
                                             int* err_out) {
    extern __shared__ au64 a_smem[];
    const int wpb = blockDim.x >> 5;
    const int w = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int b = blockIdx.x * wpb + w;
    if (b >= B) return;  // whole warps only: the warp is the unit of synchronisation
    au64* sw = a_smem + (size_t)w * N;
    int* scol = (int*)(a_smem + (size_t)wpb * N) + w * N;
    int* serr = (int*)(a_smem + (size_t)wpb * N) + wpb * N + w;
    a_solve_small<true>(costT + (size_t)b * N * N, N, smax, alpha, bits, sw, scol, serr,
                        lane, 32, col_out + (size_t)b * N, price_out + (size_t)b * N,
                        err_out + b);
}

extern "C" __global__ void assign_small_block(const COST_T* __restrict__ costT, int B,
                                              int N, long long smax, int alpha,
                                              int bits, int* col_out,
                                              long long* price_out, int* err_out) {
    extern __shared__ au64 a_smem[];
    const int b = blockIdx.x;
    if (b >= B) return;
    au64* sw = a_smem;
    int* scol = (int*)(a_smem + N);
    int* serr = scol + N;
    a_solve_small<false>(costT + (size_t)b * N * N, N, smax, alpha, bits, sw, scol,
                         serr, threadIdx.x, blockDim.x, col_out + (size_t)b * N,
                         price_out + (size_t)b * N, err_out + b);
}

// ------------------------------------------------------------------ large problems

// Arc fixing (Goldberg-Kennedy): after a phase that ended eps'-optimal (every row r
// holds j with d_r(j) <= d_r(k) + eps' for all k, d_r(k) = c[r, k] + p[k]), an arc with
// d_r(k) - d_r(j) >= N * eps' lies on no optimal assignment: a cycle through it
// alternates at most N such arcs (>= -eps' each) with held arcs (0), so reversing it
// would lower the cost. Each row then keeps the list of its other arcs (cand, ncand;
// ncand < 0: the whole row) when they number at most ASSIGN_CAND, in column order, and
// every later scan of the row (bids, keep, global updates) reads only the list. The
// lists only shrink; the optimum of the smaller problem is the optimum of the whole.
//
// Global price update: with the bids stopped, prices rise by the shortest distance of
// each column to a free column (dist[k] = 0 for a free k; for the column j of row r,
// dist[j] = max(0, min_{k != j} (d_r(k) + dist[k]) + eps - d_r(j))), computed by
// Bellman-Ford relaxation in place (atomicMin) over the rows until a sweep changes
// nothing; columns that reach no free column rise by the largest finite distance.
// Every pair stays eps-optimal, and every free row now sees, through the shortest
// path, a chain of bids that ends at a free column without the price wars of small
// increments.

// Start of a phase: a warp per row keeps its pair when it is still eps-optimal (count
// += 1) and frees it otherwise; with fix_bound > 0 it also builds the row's arc list
// (arcs with d_r(k) - d_r(j) < fix_bound). count must be zero before the launch.
extern "C" __global__ void __launch_bounds__(ASSIGN_BLOCK, ASSIGN_MIN_BLOCKS)
    assign_keep_rows(const COST_T* __restrict__ cost, au64* words, int* col4row,
                     int* count, int total, int N, long long eps, int bits,
                     int* cand, int* ncand, long long fix_bound) {
    const int lane = threadIdx.x & 31;
    const int warp = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5);
    const int nwarps = (int)((gridDim.x * (size_t)blockDim.x) >> 5);
    const au64 mask = a_mask(bits);
    for (int r = warp; r < total; r += nwarps) {
        const int j = __ldcg(col4row + r);
        if (j < 0) continue;
        const int b = r / N;
        const COST_T* row = cost + (size_t)r * N;
        au64* w = words + (size_t)b * N;
        const au64 wj = __ldcg(w + j);
        const long long dj = (long long)__ldg(row + j) + a_price(wj, bits);
        const int nc = ncand[r];
        int* lst = cand + (size_t)r * ASSIGN_CAND;
        const int len = nc < 0 ? N : nc;
        long long dmin = A_BIG;
        int m = 0;  // arcs kept so far (fix_bound > 0)
        for (int base = 0; base < len; base += 32) {
            const int t = base + lane;
            int k = -1;
            long long d = A_BIG;
            if (t < len) {
                k = nc < 0 ? t : lst[t];
                d = (long long)__ldg(row + k) + a_price(__ldcg(w + k), bits);
                dmin = min(dmin, d);
            }
            if (fix_bound > 0 && m <= ASSIGN_CAND) {
                const bool keep = t < len && d - dj < fix_bound;
                const unsigned bal = __ballot_sync(A_FULL, keep);
                const int pos = m + __popc(bal & ((1u << lane) - 1u));
                if (keep && pos < ASSIGN_CAND) lst[pos] = k;  // pos <= t: in place
                m += __popc(bal);
            }
        }
        dmin = a_warp_min(dmin);
        if (lane == 0) {
            if (fix_bound > 0 && m <= ASSIGN_CAND) ncand[r] = m;
            if (dj > dmin + eps) {
                __stcg(w + j, wj | mask);  // only this row owns column j: no race
                __stcg(col4row + r, -1);
            } else {
                atomicAdd(count, 1);
            }
        }
    }
}

// One phase of bidding, persistent: a warp per row (grid-stride), until every column
// of every problem has an owner (count == total) or the bids of this launch reach
// budget (then the host runs a global price update and launches again). On a price
// overflow err is set and count forced to total, which stops every warp.
extern "C" __global__ void __launch_bounds__(ASSIGN_BLOCK, ASSIGN_MIN_BLOCKS)
    assign_auction_rows(const COST_T* __restrict__ cost, au64* words, int* col4row,
                        int* count, int* err, int total, int N, long long eps,
                        int bits, const int* __restrict__ cand,
                        const int* __restrict__ ncand, int* bids, int budget) {
    const int lane = threadIdx.x & 31;
    const int warp = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5);
    const int nwarps = (int)((gridDim.x * (size_t)blockDim.x) >> 5);
    const au64 mask = a_mask(bits);
    const long long pmax = a_pmax(bits);
    volatile int* vcount = count;
    volatile int* vbids = bids;
    while (*vcount < total && *vbids < budget) {
        bool idle = true;
        for (int r = warp; r < total; r += nwarps) {
            const int b = r / N;
            const int i = r - b * N;
            au64* w = words + (size_t)b * N;
            const int j = __ldcg(col4row + r);
            if (j >= 0 && (int)(__ldcg(w + j) & mask) == i) continue;
            idle = false;
            const COST_T* row = cost + (size_t)r * N;
            const int nc = ncand[r];
            long long d1 = A_BIG, d2 = A_BIG;
            int j1 = -1;
            if (nc < 0) {
                for (int k = lane; k < N; k += 32)
                    a_take((long long)__ldg(row + k) + a_price(__ldcg(w + k), bits), k,
                           d1, j1, d2);
            } else {
                const int* lst = cand + (size_t)r * ASSIGN_CAND;
                for (int t = lane; t < nc; t += 32) {
                    const int k = lst[t];
                    a_take((long long)__ldg(row + k) + a_price(__ldcg(w + k), bits), k,
                           d1, j1, d2);
                }
            }
            a_warp_best(d1, j1, d2);
            if (lane == 0) {
                // N == 1, or a single arc left: any price rise keeps the pair
                // eps-optimal; rise by N * eps (the bound of the fixed arcs)
                if (d2 == A_BIG) d2 = nc < 0 ? d1 : d1 + (long long)N * eps;
                const long long bid = d2 - (long long)__ldg(row + j1) + eps;
                atomicAdd(bids, 1);
                if (bid > pmax) {
                    atomicExch(err, 1);
                    atomicExch(count, total);
                } else {
                    const au64 nw = ((au64)bid << bits) | (au64)i;
                    const au64 old = atomicMax(w + j1, nw);
                    if (old < nw) {
                        if ((old & mask) == mask) atomicAdd(count, 1);
                        __stcg(col4row + r, j1);
                    }
                }
            }
            __syncwarp();
        }
        if (idle) __nanosleep(256);
    }
}

// Grid-wide barrier of a co-resident grid: bar[0] arrivals, bar[1] generation.
__device__ __forceinline__ void a_grid_sync(unsigned* bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned* vgen = bar + 1;
        const unsigned gen = *vgen;
        __threadfence();
        if (atomicAdd(bar, 1u) == gridDim.x - 1) {
            atomicExch(bar, 0u);
            __threadfence();
            atomicAdd(bar + 1, 1u);
        } else {
            while (*vgen == gen) __nanosleep(64);
        }
        __threadfence();
    }
    __syncthreads();
}

// Global price update (see above), persistent over the same co-resident grid as
// assign_auction_rows. dist: total words of scratch; sync: 8 ints, zero before the
// first launch (the kernel leaves them zero: bar[0], generation, flags[3], maxd).
// Sweeps run are added to sync[7]... (sweeps counted in sweeps[0]).
extern "C" __global__ void __launch_bounds__(ASSIGN_BLOCK, ASSIGN_MIN_BLOCKS)
    assign_global_update(const COST_T* __restrict__ cost, au64* words,
                         const int* __restrict__ col4row, const int* __restrict__ cand,
                         const int* __restrict__ ncand, unsigned long long* dist,
                         unsigned* sync, int* err, int* sweeps, int total, int N,
                         long long eps, int bits) {
    const int lane = threadIdx.x & 31;
    const int tid = (int)(blockIdx.x * (size_t)blockDim.x + threadIdx.x);
    const int nthreads = (int)(gridDim.x * (size_t)blockDim.x);
    const int warp = tid >> 5;
    const int nwarps = nthreads >> 5;
    const au64 mask = a_mask(bits);
    const unsigned long long INF = 0x7fffffffffffffffull;
    unsigned* bar = sync;
    unsigned* flags = sync + 2;
    unsigned long long* maxd = (unsigned long long*)(sync + 6);  // sync[6..7]
    for (int k = tid; k < total; k += nthreads)
        dist[k] = (__ldcg(words + k) & mask) == mask ? 0ull : INF;
    if (tid == 0) flags[0] = 0u;
    a_grid_sync(bar);
    int it = 0;
    for (;; ++it) {
        if (tid == 0) flags[(it + 1) % 3] = 0u;
        bool changed = false;
        for (int r = warp; r < total; r += nwarps) {
            const int j = __ldcg(col4row + r);
            if (j < 0) continue;
            const int b = r / N;
            const int i = r - b * N;
            const au64* w = words + (size_t)b * N;
            if ((int)(__ldcg(w + j) & mask) != i) continue;
            const unsigned long long* dd = dist + (size_t)b * N;
            const COST_T* row = cost + (size_t)r * N;
            const int nc = ncand[r];
            const int len = nc < 0 ? N : nc;
            const int* lst = cand + (size_t)r * ASSIGN_CAND;
            long long h = A_BIG;
            for (int t = lane; t < len; t += 32) {
                const int k = nc < 0 ? t : lst[t];
                const unsigned long long dk = __ldcg(dd + k);
                if (k == j || dk == INF) continue;
                h = min(h, (long long)__ldg(row + k) + a_price(__ldcg(w + k), bits) +
                               (long long)dk);
            }
            h = a_warp_min(h);
            if (lane == 0 && h < A_BIG) {
                long long nd = h + eps - (long long)__ldg(row + j) -
                               a_price(__ldcg(w + j), bits);
                if (nd < 0) nd = 0;
                if ((unsigned long long)nd < __ldcg(dist + (size_t)b * N + j)) {
                    atomicMin(dist + (size_t)b * N + j, (unsigned long long)nd);
                    changed = true;
                }
            }
        }
        if (changed) flags[it % 3] = 1u;
        a_grid_sync(bar);
        if (*(volatile unsigned*)(flags + it % 3) == 0u) break;
    }
    // columns that reach no free column rise by the largest finite distance
    for (int k = tid; k < total; k += nthreads) {
        const unsigned long long d = __ldcg(dist + k);
        if (d != INF) atomicMax(maxd, d);
    }
    a_grid_sync(bar);
    const unsigned long long cap = *(volatile unsigned long long*)maxd;
    const long long pmax = a_pmax(bits);
    for (int k = tid; k < total; k += nthreads) {
        unsigned long long d = __ldcg(dist + k);
        if (d > cap) d = cap;
        if (d == 0) continue;
        const au64 wk = words[k];
        if (a_price(wk, bits) + (long long)d > pmax) {
            atomicExch(err, 1);
            continue;
        }
        words[k] = wk + (d << bits);
    }
    a_grid_sync(bar);
    if (tid == 0) {
        *maxd = 0ull;
        sweeps[0] += it + 1;
    }
}
