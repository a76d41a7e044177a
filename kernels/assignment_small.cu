// assignment_small.cu: batched linear assignment of small problems (N <= 256), one
// warp per problem, reading the caller's cost stack directly.
//
// Python caller: vision_cuts/_assignment_gpu.py. sa_stats measures the stack in one
// pass (NaN / wrong-sign infinity, forbidden pairs, all values integral, finite min
// and max); Python turns that into the plan of the reduction (see the module
// docstring there) and launches sa_solve, which applies the whole reduction while it
// loads a problem into shared memory: orientation (rows <= columns), negation for
// maximize, the shift by the smallest finite cost, quantisation of float costs,
// forbidden pairs -> the finite cost `big`, padding to N x N with rows of cost 0, and
// the factor N + 1. The scaled costs never exist in global memory.
//
// Algorithm: epsilon scaling (eps = smax / alpha, / alpha, ... down to 1, integer
// division, at least 1) of the auction algorithm in its Gauss-Seidel form: one free
// row bids at a time. At the start of a phase the pairs still eps-optimal for the new
// eps are kept and the others freed (prices unchanged). A bid of row r: reduced costs
// d(k) = c[r, k] + p[k], best d1 at column j1, second best d2; p[j1] rises by
// d2 - d1 + eps (the pair is eps-optimal however other prices rise), r takes j1 and
// its former owner becomes free. The phase ends when every row holds a column; the
// phase eps = 1 on costs scaled by N + 1 ends at the exact optimum (Bertsekas;
// Goldberg-Kennedy). Gauss-Seidel needs no atomics and, on 32 x 32 random problems,
// about 300 bids in all.
//
// Mapping: lane l owns columns l * SA_C .. l * SA_C + SA_C - 1 (N <= 32 * SA_C) with
// their prices and owners in registers; a bid is one row of shared memory (a vector
// load per lane), a local best / second best, and two warp reductions. Rows are
// numbered like columns: lane l keeps the free bits of rows l * SA_C + c in `fr`.
// While every price is below 2**27 - 2 - smax (narrow mode, the usual case) the
// reductions are single 32-bit __reduce_min_sync over (d << 5 | lane); once a price
// passes that bound the warp switches for good to 64-bit minima (two reductions each).
// Prices stay below 2**61 (Python's plan bounds them; an overflow is reported as
// status 3, never wrapped).
//
// Shared memory per warp: N rows of `ws` costs (ws = N rounded up to a multiple of
// SA_C, 16-byte aligned areas of `area` elements), then N ints (column of each row).
//
// Outputs per problem b: row_ind / col_ind (int64, min(n, m) pairs, in the caller's
// orientation, row_ind increasing), status (0 solved, 1 infeasible: a real row holds a
// forbidden pair, 3 price overflow), the work counters `work` (B, 2): phases and bids,
// and, with want != 0, col4row (B, N) and the final prices (B, N), which certify the
// optimum of the scaled problem.
//
// Compile-time constants (Python prepends `#define`s):
//   SA_C      columns per lane: 1, 2, 4 or 8
//   SA_LONG   1: scaled costs are long long (else int, when they fit)
//   SA_F64    1: the stack is float64, 0: int64
//   SA_WARPS  problems (warps) per block of sa_solve
//   SA_MINB   co-resident blocks per SM asked of __launch_bounds__ (1: no register cap)
//
// References: D. P. Bertsekas, "The auction algorithm: a distributed relaxation method
// for the assignment problem", Annals of Operations Research 14, 1988; A. V. Goldberg
// and R. Kennedy, "An efficient cost scaling algorithm for the assignment problem",
// Math. Programming 71, 1995.
#ifndef SA_C
#define SA_C 1
#endif
#ifndef SA_LONG
#define SA_LONG 0
#endif
#ifndef SA_F64
#define SA_F64 1
#endif
#ifndef SA_WARPS
#define SA_WARPS 4
#endif
#ifndef SA_MINB
#define SA_MINB 1
#endif

#if SA_C != 1 && SA_C != 2 && SA_C != 4 && SA_C != 8
#error "SA_C must be 1, 2, 4 or 8"
#endif

#if SA_LONG
typedef long long sa_cost;
#define SA_COST_BYTES 8
#else
typedef int sa_cost;
#define SA_COST_BYTES 4
#endif
#if SA_F64
typedef double sa_in;
#else
typedef long long sa_in;
#endif

#define SA_FULL 0xffffffffu
#define SA_INF 0x7fffffffffffffffll
#define SA_NARROW (1ll << 27)     // narrow mode: every d below this
#define SA_PMAX (1ll << 61)       // prices above this: status 3
#define SA_ROW_BYTES (SA_C * SA_COST_BYTES)

// ------------------------------------------------------------------------- stats

// order-preserving map of a non-NaN double to an unsigned key
__device__ __forceinline__ unsigned long long sa_key(double v) {
    const unsigned long long b = (unsigned long long)__double_as_longlong(v);
    return (b >> 63) ? ~b : (b | 0x8000000000000000ull);
}

// flags: 1 NaN or wrong-sign infinity (-inf after negation), 2 +inf (forbidden pair),
// 4 a finite value that is not an integer, 8 some finite value
__device__ __forceinline__ void sa_take_stat(sa_in x, int neg, unsigned long long& kmin,
                                             unsigned long long& kmax,
                                             unsigned long long& flags) {
#if SA_F64
    const double v = neg ? -x : x;
    if (isfinite(v)) {
        const unsigned long long k = sa_key(v);
        kmin = k < kmin ? k : kmin;
        kmax = k > kmax ? k : kmax;
        flags |= (v != rint(v)) ? 12ull : 8ull;
    } else {
        flags |= (v > 0.0) ? 2ull : 1ull;  // NaN compares false: 1
    }
#else
    const long long v = neg ? -x : x;
    const unsigned long long k = (unsigned long long)v ^ 0x8000000000000000ull;
    kmin = k < kmin ? k : kmin;
    kmax = k > kmax ? k : kmax;
    flags |= 8ull;
#endif
}

// One pass over the total values of the stack; block i writes part[3 i + 0..2] =
// (min key, max key, flags). Launch with 256 threads per block.
extern "C" __global__ void __launch_bounds__(256)
    sa_stats(const sa_in* __restrict__ x, long long total, int neg,
             unsigned long long* __restrict__ part) {
    unsigned long long kmin = ~0ull, kmax = 0ull, flags = 0ull;
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < total; i += 4 * stride) {
        const sa_in v0 = __ldg(x + i), v1 = __ldg(x + i + stride);
        const sa_in v2 = __ldg(x + i + 2 * stride), v3 = __ldg(x + i + 3 * stride);
        sa_take_stat(v0, neg, kmin, kmax, flags);
        sa_take_stat(v1, neg, kmin, kmax, flags);
        sa_take_stat(v2, neg, kmin, kmax, flags);
        sa_take_stat(v3, neg, kmin, kmax, flags);
    }
    for (; i < total; i += stride) sa_take_stat(__ldg(x + i), neg, kmin, kmax, flags);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const unsigned long long a = __shfl_xor_sync(SA_FULL, kmin, off);
        const unsigned long long c = __shfl_xor_sync(SA_FULL, kmax, off);
        flags |= __shfl_xor_sync(SA_FULL, flags, off);
        kmin = a < kmin ? a : kmin;
        kmax = c > kmax ? c : kmax;
    }
    __shared__ unsigned long long red[3][8];
    const int w = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) {
        red[0][w] = kmin;
        red[1][w] = kmax;
        red[2][w] = flags;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 1; k < (int)(blockDim.x >> 5); ++k) {
            kmin = red[0][k] < kmin ? red[0][k] : kmin;
            kmax = red[1][k] > kmax ? red[1][k] : kmax;
            flags |= red[2][k];
        }
        part[3 * (size_t)blockIdx.x + 0] = kmin;
        part[3 * (size_t)blockIdx.x + 1] = kmax;
        part[3 * (size_t)blockIdx.x + 2] = flags;
    }
}

// ------------------------------------------------------------------------- solve

// the scaled cost (before the factor N + 1) of one value of the stack
__device__ __forceinline__ long long sa_conv(sa_in x, int neg, double lo_f, long long lo_i,
                                             double scale, long long levels,
                                             int quantise, long long big) {
#if SA_F64
    const double v = neg ? -x : x;
    if (!isfinite(v)) return big;  // +inf: NaN and -inf were rejected by sa_stats
    if (quantise) {
        double t = rint((v - lo_f) * scale);
        t = fmin(fmax(t, 0.0), (double)levels);
        return (long long)t;
    }
    return (long long)(v - lo_f);
#else
    return (neg ? -x : x) - lo_i;
#endif
}

// the SA_C costs of this lane in one shared row (16-byte vector loads where they fit)
__device__ __forceinline__ void sa_row(const sa_cost* __restrict__ src,
                                       sa_cost (&v)[SA_C]) {
#if SA_ROW_BYTES >= 16
#pragma unroll
    for (int i = 0; i < SA_ROW_BYTES / 16; ++i) {
#if SA_LONG
        const longlong2 t = reinterpret_cast<const longlong2*>(src)[i];
        v[2 * i] = t.x;
        v[2 * i + 1] = t.y;
#else
        const int4 t = reinterpret_cast<const int4*>(src)[i];
        v[4 * i] = t.x;
        v[4 * i + 1] = t.y;
        v[4 * i + 2] = t.z;
        v[4 * i + 3] = t.w;
#endif
    }
#elif SA_ROW_BYTES == 8 && !SA_LONG
    const int2 t = *reinterpret_cast<const int2*>(src);
    v[0] = t.x;
    v[1] = t.y;
#else
    v[0] = src[0];
#endif
}

// warp minimum of a nonnegative 64-bit value (two 32-bit reductions)
__device__ __forceinline__ long long sa_min64(long long v) {
    const unsigned hi = (unsigned)((unsigned long long)v >> 32);
    const unsigned lo = (unsigned)v;
    const unsigned mh = __reduce_min_sync(SA_FULL, hi);
    const unsigned ml = __reduce_min_sync(SA_FULL, hi == mh ? lo : SA_FULL);
    return (long long)(((unsigned long long)mh << 32) | ml);
}

extern __shared__ int4 sa_smem[];

// x: the (B, n0, m0) stack as given (C order); n = min(n0, m0), N = max(n0, m0);
// transposed: n0 > m0 (oriented cost (r, k) = x[b, k, r]). big: scaled cost of a
// forbidden pair before the factor N + 1 (-1: none); smax: largest scaled cost.
extern "C" __global__ void __launch_bounds__(SA_WARPS * 32, SA_MINB)
    sa_solve(const sa_in* __restrict__ x, int B, int n, int N, int transposed, int neg,
             double lo_f, long long lo_i, double scale, long long levels, int quantise,
             long long big, long long smax, int alpha, int ws, int area,
             long long* __restrict__ rows_out, long long* __restrict__ cols_out,
             signed char* __restrict__ status, int* __restrict__ col4row,
             long long* __restrict__ prices, int want, long long* __restrict__ work) {
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const int b = blockIdx.x * SA_WARPS + w;
    if (b >= B) return;  // whole warps: the warp is the unit of synchronisation
    sa_cost* s = reinterpret_cast<sa_cost*>(sa_smem) + (size_t)w * area;
    int* scol = reinterpret_cast<int*>(reinterpret_cast<sa_cost*>(sa_smem) +
                                       (size_t)SA_WARPS * area) +
                w * N;
    const long long np1 = (long long)N + 1;
    const long long bigs = big < 0 ? -1ll : big * np1;

    // load: the whole reduction on the way into shared memory
    const sa_in* xb = x + (size_t)b * n * N;
    if (!transposed) {
        for (int r = 0; r < n; ++r) {
#pragma unroll 4
            for (int k = lane; k < N; k += 32)
                s[r * ws + k] = (sa_cost)(sa_conv(__ldcs(xb + (size_t)r * N + k), neg,
                                                  lo_f, lo_i, scale, levels, quantise,
                                                  big) *
                                          np1);
        }
    } else {
        for (int k = 0; k < N; ++k) {
#pragma unroll 4
            for (int r = lane; r < n; r += 32)
                s[r * ws + k] = (sa_cost)(sa_conv(__ldcs(xb + (size_t)k * n + r), neg,
                                                  lo_f, lo_i, scale, levels, quantise,
                                                  big) *
                                          np1);
        }
    }
    for (int r = n; r < N; ++r)
        for (int k = lane; k < N; k += 32) s[r * ws + k] = 0;  // padding rows
    __syncwarp();

    long long p[SA_C];
    int own[SA_C];
    unsigned fr = 0u;  // free rows lane * SA_C + c, bit c
#pragma unroll
    for (int c = 0; c < SA_C; ++c) {
        p[c] = 0;
        own[c] = -1;
        if (lane * SA_C + c < N) fr |= 1u << c;
    }
    const long long plim = SA_NARROW - 2 - smax;  // narrow while every price <= plim
    bool narrow = plim >= 0;
    // lanes past the last column read column 0's costs (and never use them)
    const sa_cost* mine = s + (lane * SA_C < N ? lane * SA_C : 0);
    long long eps = smax;
    int err = 0;
    bool first = true;
    long long phases = 0, bids = 0;  // the work counters (the same in every lane)
    do {
        ++phases;
        eps /= alpha;
        if (eps < 1) eps = 1;
        if (!first) {
            // keep the pairs that are still eps-optimal, free the others
            for (int r = 0; r < N; ++r) {
                sa_cost v[SA_C];
                sa_row(mine + (size_t)r * ws, v);
                long long d[SA_C];
                long long lm = SA_INF;
#pragma unroll
                for (int c = 0; c < SA_C; ++c) {
                    d[c] = lane * SA_C + c < N ? (long long)v[c] + p[c] : SA_INF;
                    lm = d[c] < lm ? d[c] : lm;
                }
                long long dm;
                if (narrow)
                    dm = __reduce_min_sync(SA_FULL, lm == SA_INF ? SA_FULL : (unsigned)lm);
                else
                    dm = sa_min64(lm);
                bool rel = false;
#pragma unroll
                for (int c = 0; c < SA_C; ++c) {
                    if (own[c] == r && d[c] > dm + eps) {
                        own[c] = -1;
                        rel = true;
                    }
                }
                if (__any_sync(SA_FULL, rel) && lane == r / SA_C) fr |= 1u << (r % SA_C);
            }
        }
        first = false;
        // bids, one free row at a time
        while (true) {
            const unsigned act = __ballot_sync(SA_FULL, fr != 0u);
            if (act == 0u) break;
            ++bids;
            const int L = __ffs(act) - 1;
            int slot = 0;
            if (SA_C > 1) slot = __ffs(__shfl_sync(SA_FULL, fr, L)) - 1;
            const int r = L * SA_C + slot;
            sa_cost v[SA_C];
            sa_row(mine + (size_t)r * ws, v);
            long long ld1 = SA_INF, ld2 = SA_INF;
            int lj = 0;
#pragma unroll
            for (int c = 0; c < SA_C; ++c) {
                const long long d = lane * SA_C + c < N ? (long long)v[c] + p[c] : SA_INF;
                if (d < ld1) {
                    ld2 = ld1;
                    ld1 = d;
                    lj = c;
                } else if (d < ld2) {
                    ld2 = d;
                }
            }
            long long d1, d2;
            int wl;
            if (narrow) {
                const unsigned key =
                    ld1 == SA_INF ? SA_FULL : ((unsigned)ld1 << 5) | (unsigned)lane;
                const unsigned km = __reduce_min_sync(SA_FULL, key);
                wl = (int)(km & 31u);
                d1 = (long long)(km >> 5);
                const long long sec = lane == wl ? ld2 : ld1;
                const unsigned m2 =
                    __reduce_min_sync(SA_FULL, sec == SA_INF ? SA_FULL : (unsigned)sec);
                d2 = m2 == SA_FULL ? d1 : (long long)m2;  // N == 1: no second column
            } else {
                d1 = sa_min64(ld1);
                wl = __ffs(__ballot_sync(SA_FULL, ld1 == d1)) - 1;
                const long long sec = lane == wl ? ld2 : ld1;
                d2 = sa_min64(sec);
                if (d2 == SA_INF) d2 = d1;
            }
            if (d2 + eps > SA_PMAX) {
                err = 1;
                break;
            }
            if (d2 + eps > plim) narrow = false;  // the new price is at most d2 + eps
            const int slot1 = SA_C > 1 ? __shfl_sync(SA_FULL, lj, wl) : 0;
            int old = -1;
            if (lane == wl) {
#pragma unroll
                for (int c = 0; c < SA_C; ++c) {
                    if (c == slot1) {
                        p[c] += d2 - d1 + eps;
                        old = own[c];
                        own[c] = r;
                    }
                }
            }
            old = __shfl_sync(SA_FULL, old, wl);
            if (lane == L) fr &= ~(1u << slot);
            if (old >= 0 && lane == old / SA_C) fr |= 1u << (old % SA_C);
        }
    } while (eps > 1 && !err);

    // results
    bool bad = false;
#pragma unroll
    for (int c = 0; c < SA_C; ++c) {
        const int o = own[c];
        if (o >= 0 && o < n && (long long)s[o * ws + lane * SA_C + c] == bigs) bad = true;
    }
    bad = __any_sync(SA_FULL, bad);
#pragma unroll
    for (int c = 0; c < SA_C; ++c) {
        if (lane * SA_C + c < N && own[c] >= 0) scol[own[c]] = lane * SA_C + c;
    }
    __syncwarp();
    if (lane == 0) {
        status[b] = (signed char)(err ? 3 : (bad ? 1 : 0));
        work[2 * b] = phases;
        work[2 * b + 1] = bids;
    }
    long long* ro = rows_out + (size_t)b * n;
    long long* co = cols_out + (size_t)b * n;
    if (!transposed) {
        for (int i = lane; i < n; i += 32) {
            ro[i] = i;
            co[i] = scol[i];
        }
    } else {
        // the caller's rows are our columns held by real rows, in column order
        int cnt = 0;
#pragma unroll
        for (int c = 0; c < SA_C; ++c)
            cnt += (lane * SA_C + c < N && own[c] >= 0 && own[c] < n) ? 1 : 0;
        int incl = cnt;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const int t = __shfl_up_sync(SA_FULL, incl, off);
            if (lane >= off) incl += t;
        }
        int pos = incl - cnt;
#pragma unroll
        for (int c = 0; c < SA_C; ++c) {
            if (lane * SA_C + c < N && own[c] >= 0 && own[c] < n) {
                ro[pos] = lane * SA_C + c;
                co[pos] = own[c];
                ++pos;
            }
        }
    }
    if (want) {
        for (int i = lane; i < N; i += 32) col4row[(size_t)b * N + i] = scol[i];
#pragma unroll
        for (int c = 0; c < SA_C; ++c)
            if (lane * SA_C + c < N) prices[(size_t)b * N + lane * SA_C + c] = p[c];
    }
}
