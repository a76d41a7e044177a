// grid_bfs.cu: global relabel of the grid push-relabel on the GPU (BFS from the sink).
//
// Python caller: vision_cuts/_maxflow_gpu.py (_Solver.global_relabel), through
// vision_cuts/_kernels.get_module("grid_bfs.cu", defines).
//
// Memory layout (see common.cuh): rc[k * n + g] int32 residual capacities, tcap[g] int32
// residual capacity to the sink, h[g] int32 heights (output: exact distance to the sink
// in the residual graph, VC_INF where the sink cannot be reached), flags[ntiles] int32
// (1 = the tile must be relaxed again), ctrl[0] int32 = pending (tiles flagged or being
// relaxed), out[0] int32 = active nodes after the last count (gpr_count_active): 0 means
// the solve has ended, and both kernels return at once (a round the host queued ahead).
// The tiles here are the BFS tiles (TILE_X, TILE_Y, TILE_Z as compiled for this file),
// independent of the push tiles: h and rc are plain node arrays.
//
// Kernels and launch geometry:
//   gbfs_init        1-D grid-stride over n: h = 1 where tcap > 0 else VC_INF, every
//                    tile flagged, pending = ntiles.
//   gbfs_persistent  a persistent grid of G blocks of VC_NT threads, G no larger than
//                    the number of blocks the GPU holds at once (the host computes it
//                    from the occupancy): block b owns the tiles b, b + G, b + 2G, ...
//                    It claims its flagged tiles (flag 1 -> 0), and for each loads the
//                    heights and halo into shared memory, relaxes
//                    h(u) = min(h(u), h(v) + 1) over residual arcs u -> v to the fixed
//                    point inside the tile, writes the heights that dropped and flags the
//                    neighbour tile across each face where a height dropped. It returns
//                    when pending reaches 0. Blocks wait for each other (a flagged tile
//                    is relaxed only by its owner), hence the residency bound on G.
// Relaxation inside a tile: BFS_SCAN = 0 (default), one-step rounds h(u) = min over
// the arcs of h(v) + 1 with one barrier each, until nothing changes; BFS_SCAN = 1, per
// axis a segmented min-plus scan along each line of the tile by warp shuffles (lines of
// TILE_X, TILE_Y, TILE_Z consecutive lanes), forward and backward, so a straight run of
// residual arcs settles in one step, axes alternating until nothing changes. The scan
// was no faster on an H200 (2 MP 7.99 vs 7.80 ms, 256^3 12.6 vs 10.3 ms: the BFS time
// is the chain of tile hops, not the work inside a tile), hence the default.
// Heights only decrease and always stay >= the true distance, so reading a neighbour's
// heights while another block lowers them is harmless (chaotic relaxation); a tile's
// flag is cleared before its heights are read, so any later drop on its border flags it
// again. At the end every height is the exact BFS distance. Heights written by other
// blocks are read with __ldcg (L2), never from a (non-coherent) L1.
//
// Compile-time constants (common.cuh): NDIM, TILE_X, TILE_Y, TILE_Z, IDX_T, VC_INF;
// BFS_SCAN (default 0; 1 needs every tile side a power of two <= 32); PR_STATS
// (default 0; 1 adds tiles relaxed and relaxation rounds to pstats[3..4]).
#include "common.cuh"

#ifndef BFS_SCAN
#define BFS_SCAN 0
#endif
#ifndef PR_STATS
#define PR_STATS 0
#endif
#if BFS_SCAN && ((TILE_X & (TILE_X - 1)) || (TILE_Y & (TILE_Y - 1)) || \
                 (TILE_Z & (TILE_Z - 1)) || TILE_X > 32 || TILE_Y > 32 || TILE_Z > 32)
#error "BFS_SCAN needs tile sides that are powers of two <= 32"
#endif

extern "C" __global__ void gbfs_init(const int* __restrict__ tcap, int* __restrict__ h,
                                     int* __restrict__ flags, int* __restrict__ ctrl,
                                     int ntiles, const int* __restrict__ out, IDX_T n) {
    if (out[0] == 0) return;  // no active node left: this round is a no-op
    const IDX_T gid = (IDX_T)blockIdx.x * blockDim.x + threadIdx.x;
    const IDX_T stride = (IDX_T)gridDim.x * blockDim.x;
    for (IDX_T i = gid; i < n; i += stride) h[i] = tcap[i] > 0 ? 1 : VC_INF;
    for (IDX_T i = gid; i < ntiles; i += stride) flags[i] = 1;
    if (gid == 0) ctrl[0] = ntiles;  // pending
}

// Relax the heights of a tile in s_h (with its halo, which stays fixed) to the fixed
// point; s_m holds the residual masks of the tile's nodes (bit k: arc plane k has
// residual capacity). Block-wide; ends synchronised. Returns the barrier rounds.
__device__ __forceinline__ int vc_relax_tile(int* s_h, const unsigned char* s_m) {
    const int t = threadIdx.x;
    int rounds = 0;
#if BFS_SCAN
    const unsigned int lanes = VC_NT >= 32 ? 0xffffffffu : ((1u << (VC_NT & 31)) - 1u);
    while (true) {
        bool changed = false;
        ++rounds;
#pragma unroll
        for (int ax = 0; ax < NDIM; ++ax) {
            // this axis' lines lie along consecutive lanes: pos = t % L
            const int L = ax == 0 ? TILE_X : (ax == 1 ? TILE_Y : TILE_Z);
            const int step = ax == 0 ? 1 : (ax == 1 ? VC_HX : VC_HX * VC_HY);
            int lx, ly, lz, pos;
            if (ax == 0) {
                lx = t % TILE_X;
                ly = (t / TILE_X) % TILE_Y;
                lz = t / (TILE_X * TILE_Y);
                pos = lx;
            } else if (ax == 1) {
                ly = t % TILE_Y;
                lx = (t / TILE_Y) % TILE_X;
                lz = t / (TILE_X * TILE_Y);
                pos = ly;
            } else {
                lz = t % TILE_Z;
                lx = (t / TILE_Z) % TILE_X;
                ly = t / (TILE_X * TILE_Z);
                pos = lz;
            }
            const unsigned int m = s_m[(lz * TILE_Y + ly) * TILE_X + lx];
#if NDIM == 3
            const int hi = ((lz + 1) * VC_HY + ly + 1) * VC_HX + lx + 1;
#else
            const int hi = (ly + 1) * VC_HX + lx + 1;
#endif
            const bool fwd = (m >> (2 * ax)) & 1u;      // arc to pos + 1
            const bool bwd = (m >> (2 * ax + 1)) & 1u;  // arc to pos - 1
            const int h0 = s_h[hi];
            int hv = h0;
            if (pos == L - 1 && fwd) {  // the arc leaves the tile: one step from the halo
                const int q = s_h[hi + step];
                if (q < VC_INF && q + 1 < hv) hv = q + 1;
            }
            if (pos == 0 && bwd) {
                const int q = s_h[hi - step];
                if (q < VC_INF && q + 1 < hv) hv = q + 1;
            }
            // forward: min over the run p -> p+1 -> ... -> q of h(q) + q (suffix scan);
            // backward: min over p -> p-1 -> ... -> q of h(q) - q (prefix scan).
            // cf (cb): p reaches p + o (p - o) along residual arcs inside the tile.
            int gf = hv + pos;  // <= VC_INF + 31: no overflow
            int gb = hv - pos;
            int cf = fwd && pos + 1 < L;
            int cb = bwd && pos > 0;
#pragma unroll
            for (int o = 1; o < L; o <<= 1) {
                const int gf2 = __shfl_down_sync(lanes, gf, o, L);
                const int cf2 = __shfl_down_sync(lanes, cf, o, L);
                const int gb2 = __shfl_up_sync(lanes, gb, o, L);
                const int cb2 = __shfl_up_sync(lanes, cb, o, L);
                if (cf) {
                    gf = min(gf, gf2);
                    cf = cf2;
                }
                if (cb) {
                    gb = min(gb, gb2);
                    cb = cb2;
                }
            }
            int hn = min(hv, min(gf - pos, gb + pos));
            if (hn > VC_INF) hn = VC_INF;
            if (hn < h0) {
                s_h[hi] = hn;  // this thread is the only reader and writer of s_h[hi] now
                changed = true;
            }
            __syncthreads();
        }
        if (!__syncthreads_or(changed)) break;
    }
#else
    const int lx = t % TILE_X;
    const int ly = (t / TILE_X) % TILE_Y;
    const int lz = t / (TILE_X * TILE_Y);
#if NDIM == 3
    const int hi = ((lz + 1) * VC_HY + ly + 1) * VC_HX + lx + 1;
#else
    const int hi = (ly + 1) * VC_HX + lx + 1;
    (void)lz;
#endif
    const unsigned int m = s_m[t];
    int hh = s_h[hi];
    while (true) {
        ++rounds;
        int hn = hh;
#pragma unroll
        for (int k = 0; k < VC_K; ++k) {
            if (m & (1u << k)) {
                // a neighbour may be lowering this entry right now: either value is an
                // upper bound of its distance, which is all the relaxation needs
                const int hv = *(volatile int*)&s_h[hi + vc_halo_off(k)];
                if (hv < VC_INF && hv + 1 < hn) hn = hv + 1;
            }
        }
        const bool changed = hn < hh;
        if (changed) {
            hh = hn;
            *(volatile int*)&s_h[hi] = hn;
        }
        if (!__syncthreads_or(changed)) break;
    }
#endif
    return rounds;
}

extern "C" __global__ void __launch_bounds__(VC_NT)
gbfs_persistent(const int* __restrict__ rc, int* h, int* flags, int* ctrl,
                const int* __restrict__ out, int* __restrict__ pstats, int nx, int ny,
                int nz, int ntx, int nty, int ntz, IDX_T n) {
    if (out[0] == 0) return;  // no active node left: this round is a no-op
    __shared__ int s_h[VC_HN];
    __shared__ unsigned char s_m[VC_NT];
    __shared__ int s_list[VC_NT];
    __shared__ int s_cnt;
    __shared__ int s_done;
    const int ntiles = ntx * nty * ntz;
    const int G = gridDim.x;
    const int t = threadIdx.x;
    while (true) {
        int claimed = 0;
        // my tiles are blockIdx.x + j * G; thread t looks at j = chunk + t
        for (int chunk = 0; blockIdx.x + chunk * G < ntiles; chunk += VC_NT) {
            if (t == 0) s_cnt = 0;
            __syncthreads();
            const int cand = blockIdx.x + (chunk + t) * G;
            if (cand < ntiles && *(volatile int*)&flags[cand] != 0 &&
                atomicExch(&flags[cand], 0) != 0) {
                s_list[atomicAdd(&s_cnt, 1)] = cand;
            }
            __threadfence();  // the claim is ordered before the heights are read
            __syncthreads();
            const int cnt = s_cnt;
            for (int i = 0; i < cnt; ++i) {
                const int tile = s_list[i];
                int tx, ty, tz;
                vc_tile_of_block(tile, ntx, nty, tx, ty, tz);
                const vc_node a = vc_make_node(tx, ty, tz, nx, ny, nz, ntx, nty);
                const int h0 = a.inside ? __ldcg(h + a.g) : VC_INF;
                s_h[a.hi] = h0;
                unsigned int m = 0;  // residual arcs (rc is constant during the BFS)
                if (a.inside) {
#pragma unroll
                    for (int k = 0; k < VC_K; ++k)
                        m |= (rc[(IDX_T)k * n + a.g] > 0 ? 1u : 0u) << k;
                }
                s_m[t] = (unsigned char)m;
                vc_load_halo<true>(s_h, h, a, nx, ny, nz);
                __syncthreads();
                const int rounds = vc_relax_tile(s_h, s_m);
#if PR_STATS
                if (t == 0) {
                    atomicAdd(&pstats[3], 1);  // tiles relaxed
                    atomicAdd(&pstats[4], rounds);
                }
#else
                (void)rounds;
                (void)pstats;
#endif
                const int hh = s_h[a.hi];
                if (a.inside && hh < h0) {
                    __stcg(h + a.g, hh);
                    __threadfence();  // the height is visible before the neighbour's flag
#pragma unroll
                    for (int k = 0; k < VC_K; ++k) {
                        if (!vc_in_tile(a, k) && vc_tile_exists(a, k, ntx, nty, ntz)) {
                            const int nb = tile + vc_tile_off(k, ntx, nty);
                            if (atomicExch(&flags[nb], 1) == 0) atomicAdd(&ctrl[0], 1);
                        }
                    }
                }
                __syncthreads();  // s_h, s_m free for the next tile
            }
            if (cnt && t == 0) {
                __threadfence();
                atomicSub(&ctrl[0], cnt);  // after the flags these tiles set
            }
            claimed += cnt;
            __syncthreads();  // s_cnt free
        }
        if (claimed == 0) {
            if (t == 0) {
                s_done = *(volatile int*)&ctrl[0] == 0;
                if (!s_done) __nanosleep(256);
            }
            __syncthreads();
            if (s_done) return;
        }
    }
}
