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
//   The large problems (N > 256) run in assignment_rows.cu.
//   scale_costs_f64     one thread per entry of the (B, N, N) output: the scaled costs
//                       of a C-contiguous float64 (B, n, N) stack for the large-problem
//                       path in one pass (the CuPy expression of scaled() in
//                       _assignment_gpu.py, bit for bit): rint((x - lo) * ratio) clipped
//                       to [0, levels], times N + 1; `absent` where x is not finite;
//                       rows n..N-1 zero.
//
// Compile-time constant (Python prepends a `#define`):
//   COST_T              int (scaled costs < 2**31) or long long
//
// References: A. V. Goldberg and R. Kennedy, "An efficient cost scaling algorithm for
// the assignment problem", Math. Programming 71, 1995; D. P. Bertsekas, "The auction
// algorithm: a distributed relaxation method for the assignment problem", Annals of
// Operations Research 14, 1988; M. Łupińska, "Parallel implementation of flow and
// matching algorithms", 2011.
#ifndef COST_T
#define COST_T int
#endif
#include "assignment_common.cuh"

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

extern "C" __global__ void scale_costs_f64(const double* __restrict__ x, long long total,
                                           int n, int N, double lo, int neg,
                                           double ratio, double levels, long long np1,
                                           long long absent, COST_T* __restrict__ out) {
    long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (k >= total) return;
    long long per = (long long)N * N;
    long long b = k / per, rem = k - b * per;
    int r = (int)(rem / N), c = (int)(rem - (long long)r * N);
    COST_T v = 0;
    if (r < n) {
        double xv = x[(b * n + r) * N + c];
        if (!isfinite(xv)) {
            v = (COST_T)absent;
        } else {
            double d = neg ? (-lo - xv) : (xv - lo);
            double q = fmin(fmax(rint(d * ratio), 0.0), levels);
            v = (COST_T)((long long)q * np1);
        }
    }
    out[k] = v;
}
