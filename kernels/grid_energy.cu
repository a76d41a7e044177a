// grid_energy.cu: the symmetric-weight grid energy's capacity arrays on the device, in
// one pass (vision_cuts/_grid_energy_gpu.py launches it for grid.grid_energy).
//
//   ge_potts   1-D grid-stride over the n nodes g (layout of common.cuh). Inputs as the
//              caller gave them: unary (n, 2) of type U_T (cost of label 0, label 1),
//              weights (D, n) of type W_T, D = VC_K / 2 directions (weights[d, g]
//              couples g with its forward neighbour in direction d; entries without
//              that neighbour are ignored). Writes
//                src[g] = u1 - m, snk[g] = u0 - m (m = min(u0, u1)), int32 where they
//                  fit (0 where not: the host then raises),
//                rc[2 d * n + g] = w[d, g] where g has its forward neighbour, else 0,
//                rc[(2 d + 1) * n + g] = w[d, g - step_d] where g has its backward one,
//                  else 0 (every entry written once: no zero fill first),
//              and what the host's checks need (acc, LLONG_MAX / 0 first):
//                acc[0] += m & 0xffffffff and acc[6] += m >> 32 over the nodes (the
//                  energy's constant is acc[6] * 2**32 + acc[0], exact where one int64
//                  sum of m could wrap; block sums, one atomic each a block),
//                acc[1] = max(acc[1], largest coupling weight),
//                acc[2] += count of negative coupling weights,
//                acc[3] = min(acc[3], d * n + g) over the negative ones (the first in
//                  direction order, then node order),
//                acc[4] / acc[5] = the smallest g whose source / sink capacity
//                  exceeds 2**31 - 1 (or 2**63 - 1: the difference wraps negative).
//              A negative weight is written as 0 (the host raises before the arrays
//              are used).
//
// Compile-time constants: NDIM, VC_PLANES, IDX_T (common.cuh), U_T and W_T (int or
// long long), GE_THREADS (block size, a multiple of 32). No tiles here: common.cuh's
// tile shape only has to be a valid one.
#ifndef TILE_X
#define TILE_X 8
#define TILE_Y 8
#define TILE_Z 1
#endif
#include "common.cuh"

#ifndef U_T
#define U_T int
#endif
#ifndef W_T
#define W_T int
#endif
#ifndef GE_THREADS
#define GE_THREADS 256
#endif

__device__ __forceinline__ long long ge_warp_sum(long long v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ long long ge_warp_max(long long v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const long long u = __shfl_down_sync(0xffffffffu, v, o);
        v = u > v ? u : v;
    }
    return v;
}

extern "C" __global__ void __launch_bounds__(GE_THREADS)
ge_potts(const U_T* __restrict__ unary, const W_T* __restrict__ w, int* __restrict__ src,
         int* __restrict__ snk, int* __restrict__ rc, long long* __restrict__ acc, int nx,
         int ny, int nz, IDX_T n) {
    __shared__ long long s_sum[GE_THREADS / 32], s_hi[GE_THREADS / 32],
        s_max[GE_THREADS / 32], s_neg[GE_THREADS / 32];
    long long sum = 0, hi = 0, wmax = 0, nneg = 0;
    const IDX_T stride = (IDX_T)gridDim.x * blockDim.x;
    for (IDX_T g = (IDX_T)blockIdx.x * blockDim.x + threadIdx.x; g < n; g += stride) {
        const long long u0 = (long long)unary[2 * g], u1 = (long long)unary[2 * g + 1];
        const long long m = u0 < u1 ? u0 : u1;
        sum += m & 0xffffffffLL;
        hi += m >> 32;
        // (unsigned: a difference beyond int64 wraps instead of being undefined)
        const long long s = (long long)((unsigned long long)u1 - (unsigned long long)m);
        const long long t = (long long)((unsigned long long)u0 - (unsigned long long)m);
        // beyond int32, or beyond int64 (the difference wrapped negative)
        const bool bs = s > 2147483647LL || s < 0, bt = t > 2147483647LL || t < 0;
        if (bs) atomicMin(acc + 4, (long long)g);
        if (bt) atomicMin(acc + 5, (long long)g);
        src[g] = bs ? 0 : (int)s;
        snk[g] = bt ? 0 : (int)t;
        const int x = (int)(g % nx);
        const int y = (int)((g / nx) % ny);
        const int z = (int)(g / ((IDX_T)nx * ny));
#pragma unroll
        for (int d = 0; d < VC_K / 2; ++d) {
            const int dx = vc_fwd_dx(d), dy = vc_fwd_dy(d), dz = vc_fwd_dz(d);
            // forward arc g -> g + step: its weight is this node's entry
            const bool fwd = x + dx >= 0 && x + dx < nx && y + dy >= 0 && y + dy < ny &&
                             z + dz >= 0 && z + dz < nz;
            long long wf = 0;
            if (fwd) {
                wf = (long long)w[(IDX_T)d * n + g];
                if (wf > wmax) wmax = wf;
                if (wf < 0) {
                    ++nneg;
                    atomicMin(acc + 3, (long long)d * n + g);
                    wf = 0;
                }
            }
            rc[(IDX_T)(2 * d) * n + g] = (int)wf;
            // backward arc g -> g - step: the weight of the pair's tail g - step
            const bool bwd = x - dx >= 0 && x - dx < nx && y - dy >= 0 && y - dy < ny &&
                             z - dz >= 0 && z - dz < nz;
            long long wb = 0;
            if (bwd) {
                wb = (long long)w[(IDX_T)d * n + g - vc_grid_off(2 * d, nx, ny)];
                if (wb < 0) wb = 0;  // counted at its tail
            }
            rc[(IDX_T)(2 * d + 1) * n + g] = (int)wb;
        }
    }
    sum = ge_warp_sum(sum);
    hi = ge_warp_sum(hi);
    wmax = ge_warp_max(wmax);
    nneg = ge_warp_sum(nneg);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        s_sum[warp] = sum;
        s_hi[warp] = hi;
        s_max[warp] = wmax;
        s_neg[warp] = nneg;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < GE_THREADS / 32; ++i) {
            sum += s_sum[i];
            hi += s_hi[i];
            wmax = s_max[i] > wmax ? s_max[i] : wmax;
            nneg += s_neg[i];
        }
        atomicAdd((unsigned long long*)acc, (unsigned long long)sum);
        atomicAdd((unsigned long long*)(acc + 6), (unsigned long long)hi);
        atomicMax(acc + 1, wmax);
        if (nneg) atomicAdd((unsigned long long*)(acc + 2), (unsigned long long)nneg);
    }
}
