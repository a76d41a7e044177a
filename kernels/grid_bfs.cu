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
//   gbfs_fused       gbfs_persistent with options, the runtime argument `mode` (bits,
//                    see BFS_INIT ... BFS_CHAIN below; grid sized the same way): a
//                    first pass over all tiles from the initial heights (1 / VC_INF
//                    from tcap, so gbfs_init is not launched; flags and pending must
//                    then be 0, as gpr_init and every finished BFS leave them), then a
//                    grid barrier (ctrl[1], ctrl[2]); the active count of
//                    gpr_count_active at the end (pflags, cnt, out, on the push tiles
//                    given by their counts and log2 sides); one flag and one pending
//                    update a visit; claims by one exchange; pending read with the
//                    flags; and chained visits (heights then lowered by atomicMin).
//   gbfs_wmask, gbfs_warp  an option for 2-D grids with 32 x 32 BFS tiles (host:
//                    _BFS_WARP, off): the masks of the residual arcs as bits (and
//                    gbfs_init's work), then gbfs_persistent's relaxation with one warp
//                    a tile and the tile's BFS on bit masks (see its section below).
//   gbfs_level       2-D, the full relabels of grids below 2^21 nodes (host:
//                    _BFS_LEVEL): a level-synchronous BFS on bit masks (gbfs_wmask's,
//                    then those the push kernel keeps), one resident block a region of
//                    the grid with a halo, grid barriers every L levels; it can also
//                    count the active nodes (see its section below).
//   gbfs_seed, gbfs_invalidate  the incremental global relabel (at the end of the file):
//                    the BFS then starts from the distances of the last relabel where
//                    the round's pushes left them exact.
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
// (default 0; 1 adds tiles relaxed and relaxation rounds to pstats[3..4], those of the
// first pass of BFS_INIT to pstats[5..6]); BFS_SLEEP (ns an idle block sleeps).
#include "common.cuh"

#ifndef BFS_SCAN
#define BFS_SCAN 0
#endif
#ifndef PR_STATS
#define PR_STATS 0
#endif
#ifndef BFS_SLEEP
#define BFS_SLEEP 256  // ns an idle BFS block sleeps between polls
#endif
#if BFS_SCAN && VC_DIAG
#error "BFS_SCAN (the line scans) has face arcs only"
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
__device__ __forceinline__ int vc_relax_tile(int* s_h, const vc_mask_t* s_m) {
    int rounds = 0;
#if BFS_SCAN
    rounds = vc_relax_scan(s_h, s_m);
#else
    const int t = threadIdx.x;
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

// Residual-arc mask of this thread's node (bit k: arc plane k has residual capacity).
__device__ __forceinline__ unsigned int vc_arc_mask(const int* __restrict__ rc,
                                                    const vc_node& a, IDX_T n) {
    unsigned int m = 0;
    if (a.inside) {
#pragma unroll
        for (int k = 0; k < VC_K; ++k) m |= (rc[(IDX_T)k * n + a.g] > 0 ? 1u : 0u) << k;
    }
    return m;
}

// The relaxation of a tile visit (gbfs_persistent, gbfs_fused): this thread's height
// and residual arcs and the tile's halo into shared memory, then the tile relaxed to
// its fixed point (PR_STATS: tiles and rounds into pstats[3..4]). Returns the node's
// height before; s_h[a.hi] holds it after. Block-wide; ends synchronised.
__device__ __forceinline__ int vc_relax_visit(int* s_h, vc_mask_t* s_m,
                                              const int* __restrict__ rc, const int* h,
                                              const vc_node& a, int nx, int ny, int nz,
                                              int* __restrict__ pstats, IDX_T n) {
    const int h0 = a.inside ? __ldcg(h + a.g) : VC_INF;
    s_h[a.hi] = h0;
    s_m[a.t] = (vc_mask_t)vc_arc_mask(rc, a, n);  // rc is constant during the BFS
    vc_load_halo<true>(s_h, h, a, nx, ny, nz);
    __syncthreads();
    const int rounds = vc_relax_tile(s_h, s_m);
#if PR_STATS
    if (a.t == 0) {
        atomicAdd(&pstats[3], 1);  // tiles relaxed
        atomicAdd(&pstats[4], rounds);
    }
#else
    (void)rounds;
    (void)pstats;
#endif
    return h0;
}

// The work loop of a persistent pass over the tiles (gbfs_persistent, gbfs_invalidate):
// block b owns the tiles b, b + G, ...; it claims its flagged ones (flag 1 -> 0) and
// calls visit(tile) for each (block-wide; visit may flag tiles, adding 1 to *pending for
// each flag it sets from 0), then takes them off *pending. An idle block sleeps
// BFS_SLEEP ns between polls; the pass ends when *pending reaches 0.
template <typename Visit>
__device__ __forceinline__ void vc_tile_pass(int* flags, int* pending, int ntiles,
                                             Visit visit) {
    __shared__ int s_list[VC_NT];
    __shared__ int s_cnt;
    __shared__ int s_done;
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
            __threadfence();  // the claim is ordered before the tile is read
            __syncthreads();
            const int cnt = s_cnt;
            for (int i = 0; i < cnt; ++i) visit(s_list[i]);
            if (cnt && t == 0) {
                __threadfence();
                atomicSub(pending, cnt);  // after the flags these tiles set
            }
            claimed += cnt;
            __syncthreads();  // s_cnt free
        }
        if (claimed == 0) {
            if (t == 0) {
                s_done = *(volatile int*)pending == 0;
                if (!s_done) __nanosleep(BFS_SLEEP);
            }
            __syncthreads();
            if (s_done) return;
        }
    }
}

extern "C" __global__ void __launch_bounds__(VC_NT)
gbfs_persistent(const int* __restrict__ rc, int* h, int* flags, int* ctrl,
                const int* __restrict__ out, int* __restrict__ pstats, int nx, int ny,
                int nz, int ntx, int nty, int ntz, IDX_T n) {
    if (out[0] == 0) return;  // no active node left: this round is a no-op
    __shared__ int s_h[VC_HN];
    __shared__ vc_mask_t s_m[VC_NT];
    vc_tile_pass(flags, &ctrl[0], ntx * nty * ntz, [&](int tile) {
        int tx, ty, tz;
        vc_tile_of_block(tile, ntx, nty, tx, ty, tz);
        const vc_node a = vc_make_node(tx, ty, tz, nx, ny, nz, ntx, nty);
        const int h0 = vc_relax_visit(s_h, s_m, rc, h, a, nx, ny, nz, pstats, n);
        const int hh = s_h[a.hi];
        if (a.inside && hh < h0) {
            __stcg(h + a.g, hh);
            __threadfence();  // the height is visible before the neighbour's flag
#pragma unroll
            for (int k = 0; k < VC_K; ++k) {
                if (!vc_in_tile(a, k) && vc_tile_exists(a, k, ntx, nty, ntz)) {
                    const int nb = tile + vc_nb_tile_off(a, k, ntx, nty);
                    if (atomicExch(&flags[nb], 1) == 0) atomicAdd(&ctrl[0], 1);
                }
            }
        }
        __syncthreads();  // s_h, s_m free for the next tile
    });
}

// Initial heights of the halo of a tile (1 where the neighbour has a residual sink arc,
// VC_INF otherwise or outside the grid), for the first pass of BFS_INIT: like
// vc_load_halo, from tcap instead of h. Returns whether this thread loaded a finite one.
__device__ __forceinline__ bool vc_halo_init(int* s_h, const int* __restrict__ tcap,
                                             const vc_node& a, int nx, int ny, int nz) {
    const int x = a.tx * TILE_X + a.lx;
    const int y = a.ty * TILE_Y + a.ly;
    bool fin = false;
#define VC_HALO_INIT(cond, dst, off)                                   \
    {                                                                  \
        const int v = (cond) && tcap[a.g + (off)] > 0 ? 1 : VC_INF;    \
        s_h[dst] = v;                                                  \
        fin |= v < VC_INF;                                             \
    }
    if (a.lx == 0) VC_HALO_INIT(a.inside && x > 0, a.hi - 1, -1)
    if (a.lx == TILE_X - 1) VC_HALO_INIT(a.inside && x + 1 < nx, a.hi + 1, 1)
    if (a.ly == 0) VC_HALO_INIT(a.inside && y > 0, a.hi - VC_HX, -(IDX_T)nx)
    if (a.ly == TILE_Y - 1) VC_HALO_INIT(a.inside && y + 1 < ny, a.hi + VC_HX, (IDX_T)nx)
#if NDIM == 3
    const int z = a.tz * TILE_Z + a.lz;
    const IDX_T plane = (IDX_T)nx * ny;
    if (a.lz == 0) VC_HALO_INIT(a.inside && z > 0, a.hi - VC_HX * VC_HY, -plane)
    if (a.lz == TILE_Z - 1)
        VC_HALO_INIT(a.inside && z + 1 < nz, a.hi + VC_HX * VC_HY, plane)
#else
    (void)nz;
#endif
#undef VC_HALO_INIT
    return fin;
}

// Faces of this thread's node that border another tile (bit k: the neighbour in
// direction k lies in an existing neighbour tile).
__device__ __forceinline__ unsigned int vc_border_faces(const vc_node& a, int ntx, int nty,
                                                        int ntz) {
    unsigned int f = 0;
#pragma unroll
    for (int k = 0; k < VC_K; ++k)
        if (!vc_in_tile(a, k) && vc_tile_exists(a, k, ntx, nty, ntz)) f |= 1u << k;
    return f;
}

// Grid-wide barrier of a persistent launch (every block resident), called by one
// thread per block: bar[0] counts arrivals, bar[1] is the generation. The last block
// to arrive resets the count and opens the next generation.
__device__ __forceinline__ void vc_grid_barrier(int* bar) {
    const int gen = *(volatile int*)&bar[1];
    __threadfence();  // the generation is read before this block arrives
    if (atomicAdd(&bar[0], 1) == (int)gridDim.x - 1) {
        atomicExch(&bar[0], 0);
        __threadfence();
        atomicAdd(&bar[1], 1);
    } else {
        while (*(volatile int*)&bar[1] == gen) __nanosleep(64);
    }
    __threadfence();
}

// mode bits of gbfs_fused (a runtime argument, uniform over the launch)
#define BFS_INIT 1    // first pass from tcap (replaces gbfs_init), then a grid barrier
#define BFS_COUNT 2   // count the active nodes at the end (replaces gpr_count_active)
#define BFS_AGG 4     // one flag update and one pending update a tile visit
#define BFS_CLAIM 8   // claim flagged tiles by one exchange, without a read first
#define BFS_POLL 16   // read pending together with the flags, not after them
#define BFS_CHAIN 32  // with BFS_AGG: go on with a neighbour tile this visit flags

extern "C" __global__ void __launch_bounds__(VC_NT)
gbfs_fused(const int* __restrict__ rc, int* h, int* flags, int* ctrl, int* out,
           int* __restrict__ pstats, const int* __restrict__ tcap,
           const vc_u64* __restrict__ ex, int* __restrict__ pflags, int* __restrict__ cnt,
           int nx, int ny, int nz, int ntx, int nty, int ntz, int pntx, int pnty, int pntz,
           int plx, int ply, int plz, int mode, IDX_T n) {
    if (*(volatile int*)out == 0) return;  // no active node left: this round is a no-op
#if VC_DIAG
    __trap();  // face arcs only: its flags aggregate the faces of a tile
#endif
    __shared__ int s_h[VC_HN];
    __shared__ vc_mask_t s_m[VC_NT];
    __shared__ int s_list[VC_NT];
    __shared__ int s_cnt;
    __shared__ int s_done;
    __shared__ int s_pend;
    __shared__ int s_next;
    __shared__ unsigned int s_face[2];
    const int ntiles = ntx * nty * ntz;
    const int G = gridDim.x;
    const int t = threadIdx.x;
    const bool agg = (mode & BFS_AGG) != 0;
    const bool chain = agg && (mode & BFS_CHAIN) != 0;

    // ---- first pass (BFS_INIT): every tile of this block from the initial heights --
    // Heights start at 1 (residual sink arc) or VC_INF, halo included, so no stale
    // height of the push phase is ever read; each tile is relaxed to its fixed point
    // and written whole. A neighbour tile relaxed against an initial border height
    // that has dropped since is flagged; the grid barrier then publishes every height
    // before any block reads another block's tiles.
    if (mode & BFS_INIT) {
        int added = 0;  // thread 0: tiles this block flagged
        int j = 0;
        for (int tile = blockIdx.x; tile < ntiles; tile += G, ++j) {
            int tx, ty, tz;
            vc_tile_of_block(tile, ntx, nty, tx, ty, tz);
            const vc_node a = vc_make_node(tx, ty, tz, nx, ny, nz, ntx, nty);
            if (t == 0) s_face[j & 1] = 0u;
            const int h0 = a.inside && tcap[a.g] > 0 ? 1 : VC_INF;
            s_h[a.hi] = h0;
            const bool fin = vc_halo_init(s_h, tcap, a, nx, ny, nz) || h0 < VC_INF;
            if (__syncthreads_or(fin)) {
                s_m[t] = (vc_mask_t)vc_arc_mask(rc, a, n);
                __syncthreads();
                const int rounds = vc_relax_tile(s_h, s_m);
#if PR_STATS
                if (t == 0) {
                    atomicAdd(&pstats[5], 1);
                    atomicAdd(&pstats[6], rounds);
                }
#else
                (void)rounds;
#endif
            }
            const int hh = s_h[a.hi];
            if (a.inside) __stcg(h + a.g, hh);
            if (hh < h0) {
                const unsigned int f = vc_border_faces(a, ntx, nty, ntz);
                if (f) atomicOr(&s_face[j & 1], f);
            }
            __syncthreads();  // s_face complete; s_h, s_m free for the next tile
            if (t == 0) {
                const unsigned int f = s_face[j & 1];
#pragma unroll
                for (int k = 0; k < VC_K; ++k)
                    if ((f >> k) & 1u)
                        added += atomicExch(&flags[tile + vc_tile_off(k, ntx, nty)], 1) == 0;
            }
        }
        __threadfence();  // heights and flags before the barrier
        __syncthreads();
        if (t == 0) {
            if (added) atomicAdd(&ctrl[0], added);
            vc_grid_barrier(ctrl + 1);
        }
        __syncthreads();
    }

    // ---- relax flagged tiles until none is flagged or being relaxed ---------------
    while (true) {
        int claimed = 0;
        // my tiles are blockIdx.x + j * G; thread t looks at j = chunk + t
        for (int chunk = 0; blockIdx.x + chunk * G < ntiles; chunk += VC_NT) {
            if (t == 0) s_cnt = 0;
            __syncthreads();
            const int cand = blockIdx.x + (chunk + t) * G;
            bool got = false;
            if (cand < ntiles) {
                if (mode & BFS_CLAIM)
                    got = atomicExch(&flags[cand], 0) != 0;
                else
                    got = *(volatile int*)&flags[cand] != 0 &&
                          atomicExch(&flags[cand], 0) != 0;
            }
            if (got) s_list[atomicAdd(&s_cnt, 1)] = cand;
            // pending == 0 at any moment ends the BFS for good (no tile flagged or
            // being relaxed, so none can be flagged again): it may be read before
            // the flags are
            if ((mode & BFS_POLL) && chunk == 0 && t == 0) s_pend = *(volatile int*)&ctrl[0];
            // the claim is ordered before the heights are read
            if (got || !agg) __threadfence();
            __syncthreads();
            const int cnt_here = s_cnt;
            for (int i = 0; i < cnt_here; ++i) {
                int tile = s_list[i];
                // BFS_CHAIN: after a visit that lowers border heights, the block relaxes
                // one of the neighbour tiles across those faces itself, without
                // flagging it (it stays counted in pending while it is relaxed): the
                // front moves on without waiting for the owner to poll and claim. A
                // tile may then be relaxed by two blocks at once, so the heights are
                // lowered by atomicMin; every drop still flags (or chains to) the tiles
                // that read it.
                while (true) {
                    int tx, ty, tz;
                    vc_tile_of_block(tile, ntx, nty, tx, ty, tz);
                    const vc_node a = vc_make_node(tx, ty, tz, nx, ny, nz, ntx, nty);
                    if (agg && t == 0) s_face[0] = 0u;  // thread 0 alone reads it (below)
                    const int h0 =
                        vc_relax_visit(s_h, s_m, rc, h, a, nx, ny, nz, pstats, n);
                    const int hh = s_h[a.hi];
                    if (a.inside && hh < h0) {
                        if (chain)
                            atomicMin(h + a.g, hh);
                        else
                            __stcg(h + a.g, hh);
                        __threadfence();  // visible before the neighbour's flag
                        const unsigned int f = vc_border_faces(a, ntx, nty, ntz);
                        if (agg) {
                            if (f) atomicOr(&s_face[0], f);
                        } else {
#pragma unroll
                            for (int k = 0; k < VC_K; ++k) {
                                if ((f >> k) & 1u) {
                                    const int nb = tile + vc_tile_off(k, ntx, nty);
                                    if (atomicExch(&flags[nb], 1) == 0) atomicAdd(&ctrl[0], 1);
                                }
                            }
                        }
                    }
                    __syncthreads();  // s_h, s_m (and s_face) free for the next tile
                    if (agg && t == 0) {
                        // the neighbours this visit flagged, less the visit itself: one
                        // update, so pending never drops before the new flags count
                        const unsigned int f = s_face[0];
                        int add = -1;
                        int next = -1;
#pragma unroll
                        for (int k = 0; k < VC_K; ++k) {
                            if ((f >> k) & 1u) {
                                const int nb = tile + vc_tile_off(k, ntx, nty);
                                if (chain && next < 0) {
                                    next = nb;  // relaxed next by this block
                                    ++add;
                                } else {
                                    add += atomicExch(&flags[nb], 1) == 0;
                                }
                            }
                        }
                        if (add) atomicAdd(&ctrl[0], add);
                        s_next = next;
                    }
                    if (!chain) break;
                    __syncthreads();  // s_next (the heights were fenced by their writers)
                    tile = s_next;
                    if (tile < 0) break;
                }
            }
            if (!agg && cnt_here && t == 0) {
                __threadfence();
                atomicSub(&ctrl[0], cnt_here);  // after the flags these tiles set
            }
            claimed += cnt_here;
            __syncthreads();  // s_cnt free
        }
        if (claimed == 0) {
            if (mode & BFS_POLL) {  // s_pend was read in the first chunk
                if (s_pend == 0) break;  // uniform: read after a barrier
                if (t == 0) __nanosleep(BFS_SLEEP);
                continue;  // the next barrier is the first chunk's
            }
            if (t == 0) {
                s_done = *(volatile int*)&ctrl[0] == 0;
                if (!s_done) __nanosleep(BFS_SLEEP);
            }
            __syncthreads();
            if (s_done) break;
        }
    }
    if (!(mode & BFS_COUNT)) return;

    // ---- count the active nodes (BFS_COUNT): as gpr_count_active, on the push tiles
    // (sides 1 << plx, 1 << ply, 1 << plz), block b counting push tiles b, b + G, ...;
    // pflags[push tile] = whether it holds one; the last block (ticket cnt[1]) moves
    // the total to out[0]. Every block read out[0] at its start, before its ticket.
    __threadfence();  // pending was 0: every height is final and visible
    const int pnt = 1 << (plx + ply + plz);
    const int pntiles = pntx * pnty * pntz;
    int mine = 0;
    for (int pt = blockIdx.x; pt < pntiles; pt += G) {
        const int ptx = pt % pntx;
        const int pr = pt / pntx;
        const int pty = pr % pnty;
        const int ptz = pr / pnty;
        int c = 0;
#pragma unroll 4
        for (int j = t; j < pnt; j += VC_NT) {
            const int x = (ptx << plx) + (j & ((1 << plx) - 1));
            const int y = (pty << ply) + ((j >> plx) & ((1 << ply) - 1));
            const int z = (ptz << plz) + (j >> (plx + ply));
            if (x < nx && y < ny && z < nz) {
                const IDX_T g = ((IDX_T)z * ny + y) * nx + x;
                const vc_u64 e = ex[g];
                const int hh = __ldcg(h + g);
                c += (e > 0 && hh < VC_INF) ? 1 : 0;
            }
        }
        const int any = __syncthreads_or(c);
        if (t == 0) pflags[pt] = any != 0;
        mine += c;
    }
    mine = __reduce_add_sync(VC_NT >= 32 ? 0xffffffffu : (1u << (VC_NT & 31)) - 1u, mine);
    if (t == 0) s_cnt = 0;
    __syncthreads();
    if ((t & 31) == 0 && mine) atomicAdd(&s_cnt, mine);
    __syncthreads();
    if (t == 0) {
        const int c = s_cnt;
        if (c) atomicAdd(&cnt[0], c);
        __threadfence();
        if (atomicAdd(&cnt[1], 1) == G - 1) {  // the last block
            __threadfence();
            const int total = atomicExch(&cnt[0], 0);
            cnt[1] = 0;
            *(volatile int*)out = total;
        }
    }
}

// ---- bit-parallel BFS by warps (2-D, 32 x 32 BFS tiles) -----------------------------
// gbfs_warp: gbfs_persistent's work (the same flags and pending counter, the same
// result: the exact distances) with one warp a 32 x 32 tile instead of a block, the
// tile's BFS run on bit masks. gbfs_wmask first writes, for every row word of 32 nodes
// (word y * ntx + tx: row y of BFS tile column tx), the residual arcs of each plane and
// the residual sink arcs as bits (mask[p * nw + word], p = 0..K-1 arc planes, K sink;
// K = 4, or 8 with diagonals, which only gbfs_level reads); `init` bit 1: the initial
// heights of gbfs_init (1 / VC_INF), bit 2: its flags and pending, the tiles flagged 2
// ("first visit"), bit 4: plane K + 1, the nodes with excess (gbfs_level's active
// count; the push kernel keeps all K + 2 planes up to date after that,
// grid_push_relabel.cu's VC_MASKS).
// In a visit lane y holds row y's masks and the frontier of a BFS level as one word,
// so one level of the whole tile is a few shifts, ands and two shuffles. A first visit
// (flag 2, or every visit with `full`) runs the whole BFS of the tile: from the sink
// nodes (distance 1) and the halo (a border node with a residual arc to a neighbour
// tile at distance d starts at d + 1), level by level, each node keeping min(old, new);
// the tile's heights are then consistent (h(u) <= h(v) + 1 on the residual arcs inside
// it). A later visit (flag 1: a neighbour's border height dropped) starts only from the
// halo seeds that lower a height and carries on only through nodes that drop, which
// from a consistent tile gives the same heights. A warp owns the tiles w, w + W, ...
// (W warps in all, every one resident), claims its flagged ones as vc_tile_pass does;
// a visit that lowers a border height flags the neighbour tile across that face
// (atomicMax, so a pending first visit stays one). Values only drop and stay upper
// bounds of the distances: the chaotic relaxation of gbfs_persistent, a tile at a time.
#define GW_WARPS 8  // warps a block (independent workers)
#define GW_FULL 0xffffffffu

extern "C" __global__ void gbfs_wmask(const int* __restrict__ rc,
                                      const int* __restrict__ tcap,
                                      const vc_u64* __restrict__ ex, int* __restrict__ h,
                                      unsigned int* __restrict__ mask, int* __restrict__ flags,
                                      int* __restrict__ ctrl, int ntiles,
                                      const int* __restrict__ out, int init, int nx, int ny,
                                      int ntx, IDX_T n) {
    if (out[0] == 0) return;  // no active node left: this round is a no-op
#if NDIM == 2
    const IDX_T nw = (IDX_T)ny * ntx;
    const IDX_T stride = (IDX_T)gridDim.x * blockDim.x;  // a multiple of 32
    const int lane = threadIdx.x & 31;
    for (IDX_T i = (IDX_T)blockIdx.x * blockDim.x + threadIdx.x; i < nw * 32; i += stride) {
        const IDX_T w = i >> 5;  // uniform over the warp
        const int y = (int)(w / ntx);
        const int x = (int)(w % ntx) * 32 + lane;
        const bool in = x < nx;
        const IDX_T g = (IDX_T)y * nx + x;
        int c[VC_K], tc = 0;
#pragma unroll
        for (int k = 0; k < VC_K; ++k) c[k] = in ? rc[(IDX_T)k * n + g] : 0;
        if (in) tc = tcap[g];
        if ((init & 1) && in) h[g] = tc > 0 ? 1 : VC_INF;
        unsigned int b[VC_K + 2];
#pragma unroll
        for (int k = 0; k < VC_K; ++k) b[k] = __ballot_sync(GW_FULL, c[k] > 0);
        b[VC_K] = __ballot_sync(GW_FULL, tc > 0);
        b[VC_K + 1] = 0u;
        if (init & 4) b[VC_K + 1] = __ballot_sync(GW_FULL, in && ex[g] > 0ull);
        if (lane <= ((init & 4) ? VC_K + 1 : VC_K)) mask[(IDX_T)lane * nw + w] = b[lane];
    }
    if (init & 2) {
        const IDX_T gid = (IDX_T)blockIdx.x * blockDim.x + threadIdx.x;
        for (IDX_T i = gid; i < ntiles; i += stride) flags[i] = 2;
        if (gid == 0) ctrl[0] = ntiles;  // pending
    }
#else
    (void)rc, (void)tcap, (void)ex, (void)h, (void)mask, (void)flags, (void)ctrl, (void)ntiles;
    (void)init, (void)nx, (void)ny, (void)ntx, (void)n;
    __trap();  // 2-D only
#endif
}

#if NDIM == 2 && TILE_X == 32 && TILE_Y == 32 && !VC_DIAG
// One visit of tile `tile` by this warp (`full`: the whole BFS of the tile, else from
// the halo seeds that lower a height); s_d: the warp's 32 x 33 scratch of heights.
__device__ __forceinline__ void vc_warp_visit(const unsigned int* __restrict__ mask,
                                              int* h, int* flags, int* pending,
                                              int (*s_d)[33], int tile, bool full, int nx,
                                              int ny, int ntx, int nty) {
    const int lane = threadIdx.x & 31;
    const int tx = tile % ntx, ty = tile / ntx;
    const int x0 = tx * 32, y0 = ty * 32;
    const int x = x0 + lane;
    const int yr = y0 + lane;  // my row
    // the heights of the tile (row r: lane = column), all loads in flight at once
    int hv[32];
#pragma unroll
    for (int r = 0; r < 32; ++r)
        hv[r] = x < nx && y0 + r < ny ? __ldcg(h + (IDX_T)(y0 + r) * nx + x) : VC_INF;
    // my row's masks and the halo (both independent of the copy)
    const IDX_T nw = (IDX_T)ny * ntx;
    unsigned int R0 = 0, R1 = 0, R2 = 0, R3 = 0, T = 0;
    if (yr < ny) {
        const IDX_T w = (IDX_T)yr * ntx + tx;
        R0 = __ldg(mask + w);
        R1 = __ldg(mask + nw + w);
        R2 = __ldg(mask + 2 * nw + w);
        R3 = __ldg(mask + 3 * nw + w);
        T = __ldg(mask + 4 * nw + w);
    }
    const int hT = ty > 0 && x < nx ? __ldcg(h + (IDX_T)(y0 - 1) * nx + x) : VC_INF;
    const int hB = y0 + 32 < ny && x < nx ? __ldcg(h + (IDX_T)(y0 + 32) * nx + x) : VC_INF;
    const int hL = tx > 0 && yr < ny ? __ldcg(h + (IDX_T)yr * nx + x0 - 1) : VC_INF;
    const int hR = x0 + 32 < nx && yr < ny ? __ldcg(h + (IDX_T)yr * nx + x0 + 32) : VC_INF;
    // seeds: sT / sB for the node of column `lane` in row 0 / 31, sL / sR for the node
    // of row `lane` in column 0 / 31
    const unsigned int up3 = __shfl_sync(GW_FULL, R3, 0);   // row 0's arcs to -y
    const unsigned int dn2 = __shfl_sync(GW_FULL, R2, 31);  // row 31's arcs to +y
    int sT = ((up3 >> lane) & 1u) && hT < VC_INF ? hT + 1 : VC_INF;
    int sB = ((dn2 >> lane) & 1u) && hB < VC_INF ? hB + 1 : VC_INF;
    int sL = (R1 & 1u) && hL < VC_INF ? hL + 1 : VC_INF;
    int sR = (R0 >> 31) && hR < VC_INF ? hR + 1 : VC_INF;
#pragma unroll
    for (int r = 0; r < 32; ++r) s_d[r][lane] = hv[r];
    __syncwarp();  // s_d complete for every lane
    if (!full) {  // only seeds that lower a height
        if (sT >= s_d[0][lane]) sT = VC_INF;
        if (sB >= s_d[31][lane]) sB = VC_INF;
        if (sL >= s_d[lane][0]) sL = VC_INF;
        if (sR >= s_d[lane][31]) sR = VC_INF;
        T = 0u;  // the sink nodes are at 1 already
    }
    int L = min(min(sT, sB), min(sL, sR));
    if (T) L = 1;
    L = __reduce_min_sync(GW_FULL, L);
    unsigned int changed = 0;  // bits of my row whose height dropped
    if (L < VC_INF) {
        unsigned int D = 0, F = 0;  // reached; frontier of level L
        while (true) {
            unsigned int inj = L == 1 ? T : 0u;
            if (sL == L) inj |= 1u;
            if (sR == L) inj |= 0x80000000u;
            const unsigned int bt = __ballot_sync(GW_FULL, sT == L);
            const unsigned int bb = __ballot_sync(GW_FULL, sB == L);
            if (lane == 0) inj |= bt;
            if (lane == 31) inj |= bb;
            F = (F | inj) & ~D;
            D |= F;
            unsigned int keep = full ? F : 0u;  // a later visit goes on only where it drops
            for (unsigned int f = F; f; f &= f - 1) {
                const int b = __ffs(f) - 1;
                if (L < s_d[lane][b]) {
                    s_d[lane][b] = L;
                    changed |= 1u << b;
                    keep |= 1u << b;
                }
            }
            F = keep;
            if (!__any_sync(GW_FULL, F != 0)) {  // empty front: jump to the next seed
                int nxt = VC_INF;
                if (sT > L && sT < nxt) nxt = sT;
                if (sB > L && sB < nxt) nxt = sB;
                if (sL > L && sL < nxt) nxt = sL;
                if (sR > L && sR < nxt) nxt = sR;
                nxt = __reduce_min_sync(GW_FULL, nxt);
                if (nxt >= VC_INF) break;
                L = nxt;
                continue;
            }
            const unsigned int up = __shfl_up_sync(GW_FULL, F, 1);
            const unsigned int dn = __shfl_down_sync(GW_FULL, F, 1);
            F = ((F >> 1) & R0) | ((F << 1) & R1) | (lane < 31 ? dn & R2 : 0u) |
                (lane > 0 ? up & R3 : 0u);
            ++L;
        }
    }
    __syncwarp();
    if (!__any_sync(GW_FULL, changed != 0)) return;
    // write the heights that dropped (row r: lane = column), flag the neighbours
#pragma unroll 4
    for (int r = 0; r < 32; ++r) {
        const unsigned int c = __shfl_sync(GW_FULL, changed, r);
        if ((c >> lane) & 1u) __stcg(h + (IDX_T)(y0 + r) * nx + x, s_d[r][lane]);
    }
    const unsigned int cl = __ballot_sync(GW_FULL, changed & 1u);
    const unsigned int cr = __ballot_sync(GW_FULL, changed >> 31);
    const unsigned int ct = __shfl_sync(GW_FULL, changed, 0);
    const unsigned int cb = __shfl_sync(GW_FULL, changed, 31);
    __threadfence();  // the heights are visible before the neighbours' flags
    int nb = -1;
    if (lane == 0 && cl && tx > 0) nb = tile - 1;
    if (lane == 1 && cr && tx + 1 < ntx) nb = tile + 1;
    if (lane == 2 && ct && ty > 0) nb = tile - ntx;
    if (lane == 3 && cb && ty + 1 < nty) nb = tile + ntx;
    if (nb >= 0 && atomicMax(&flags[nb], 1) == 0) atomicAdd(pending, 1);
    __syncwarp();  // s_d free for the next visit
}
#endif

// Defined in every build (so every module exports the same names); its work needs 2-D
// tiles of 32 x 32, where the host launches it, and traps elsewhere. `full`: every
// visit runs the whole BFS of its tile (the incremental relabel's start is not
// consistent inside a tile; gbfs_wmask's is, after each tile's first visit).
extern "C" __global__ void __launch_bounds__(32 * GW_WARPS)
gbfs_warp(const unsigned int* __restrict__ mask, int* h, int* flags, int* ctrl,
          const int* __restrict__ out, int full, int nx, int ny, int ntx, int nty) {
    if (out[0] == 0) return;  // no active node left: this round is a no-op
#if NDIM == 2 && TILE_X == 32 && TILE_Y == 32 && !VC_DIAG
    __shared__ int s_d[GW_WARPS][32][33];
    const int lane = threadIdx.x & 31;
    const int wib = threadIdx.x >> 5;
    const int W = gridDim.x * GW_WARPS;
    const int w = blockIdx.x * GW_WARPS + wib;
    const int ntiles = ntx * nty;
    int* pending = &ctrl[0];
    while (true) {
        int claimed = 0;
        for (int base = w; base < ntiles; base += 32 * W) {
            const int cand = base + lane * W;
            int got = 0;
            if (cand < ntiles && *(volatile int*)&flags[cand] != 0)
                got = atomicExch(&flags[cand], 0);
            __threadfence();  // the claim is ordered before the tile is read
            unsigned int mine = __ballot_sync(GW_FULL, got != 0);
            const unsigned int first = __ballot_sync(GW_FULL, got == 2);
            const int cnt = __popc(mine);
            while (mine) {
                const int j = __ffs(mine) - 1;
                mine &= mine - 1;
                vc_warp_visit(mask, h, flags, pending, s_d[wib], base + j * W,
                              full || ((first >> j) & 1u), nx, ny, ntx, nty);
            }
            if (cnt && lane == 0) {
                __threadfence();
                atomicSub(pending, cnt);  // after the flags these tiles set
            }
            claimed += cnt;
        }
        if (claimed == 0) {
            int done = 0;
            if (lane == 0) {
                done = *(volatile int*)pending == 0;
                if (!done) __nanosleep(BFS_SLEEP);
            }
            if (__shfl_sync(GW_FULL, done, 0)) return;
        }
    }
#else
    (void)mask, (void)h, (void)flags, (void)ctrl, (void)full, (void)nx, (void)ny;
    (void)ntx, (void)nty;
    __trap();
#endif
}

// ---- level-synchronous bit-parallel BFS by regions (2-D) ----------------------------
// gbfs_level: the exact BFS from the sink, a whole level at a time, on the bit masks of
// gbfs_wmask or of the push kernel (mask[p * nw + word], planes 0..K-1 arcs, K sink
// arcs, K + 1 nodes with excess; K = 4, or 8 with the diagonals). A grid of G
// resident blocks (the host sizes it by the occupancy; one block waits for all at the
// grid barriers) splits the row words of the grid into G regions of cw words x ch rows.
// Block b works on its region grown by one word left and right and by L rows above and
// below (its halo): ew = cw + 2 words by eh = ch + 2L rows, row-major, up to LV_NPER
// words a thread. A thread keeps its words' four arc masks, visited set V and frontier
// F in registers and F in shared memory (two buffers LV_S words apart, each the ext
// words row-major with no padding, so the 32 words of a warp are 32 banks and the
// buffer is a constant offset), and a level is, per word, four shared loads, two
// funnel shifts and a few logic ops:
//   F' = ((M0 & F(u+x)) | (M1 & F(u-x)) | (M2 & F(u+y)) | (M3 & F(u-y))) & ~V
// and one barrier. With the diagonals (8-connected, planes 4..7 = +x+y, -x-y, -x+y,
// +x-y) four more terms read the words beside the rows above and below, shifted as
// F(u+x) and F(u-x) are: eight shared loads and six funnel shifts a word (the
// buffers then start a word later, so that the first word's upper left exists).
// Wrong values can only come in from outside the grown region, one node a level (a
// diagonal step too moves one node along each axis), so after L levels (L <= 31: the
// halo's width in rows and at most a word's in columns) the region's own words are
// still exact (that covers the words
// a row's first and last words read across the row ends, and the rows above and
// below the ext, ew words of slack each); a halo row d rows from
// the region matters only up to level L - d of a phase, and is not computed after it.
// The block then publishes V and F of its own words (pub, two parities so that a fast
// neighbour cannot overwrite what a slow one still reads), meets the others at a grid
// barrier, reloads its halo from its neighbours' publications and runs the next L
// levels. The offset l - 1 (0..L-1) of the level l of a phase at which a node is first
// reached is kept as five bit planes: bit k of l - 1 is the parity of the levels
// m < l of the phase with m a multiple of 2^k, so plane k takes ^= ~V after each such
// level (plane 0 every level, plane 1 every other, ...: about two logic ops a word and
// level), and the nodes reached in the phase are V & ~V0 (V0: V when it began). The
// heights of the nodes a phase reached are written while the block waits at the
// barrier (LV_DEFER 0), or kept as bit planes in shared memory (LV_DEFER 1, below);
// after the last phase the block writes 1 (sink arcs), VC_INF (not reached) and, with
// LV_DEFER, the kept levels to its own nodes, a warp a word at a time, so every height
// is written by this launch. The BFS ends after the phase in which no region's own
// frontier is left (term counters, three slots in turn). With `count`, the launch
// also does gpr_count_active's work: the active nodes are V & plane 5; push tile flags
// (push tiles 32 nodes wide, pth rows: tile (y / pth) * nwr + word column) and touched
// are zeroed before the first grid barrier and the flags of the tiles holding an
// active node set after the last one; the blocks add their counts into cnt[0] and the
// last block out moves the total to out[0]. The exit ticket of the last block leaves
// ctrl zeroed for the next launch. ctrl: [0] barrier arrivals, [1] exit tickets, [2..4]
// regions with a frontier at the end of phase p (slot 2 + p % 3).
#ifndef LV_NPER
#define LV_NPER 2  // ext words a thread at most (the host sizes regions to fit)
#endif
#ifndef LV_NT
#define LV_NT 1024  // threads a block (one block a SM)
#endif
// words of a frontier buffer: ext words (<= LV_NT * LV_NPER) and a row of slack above
// and below (ew <= ext words / 3, the ext having at least three rows); dynamic shared
// memory 2 * LV_S * 4 bytes
#define LV_S (2 * LV_NT * LV_NPER)
// the diagonal terms of a level (word i, buffer PAR), and the words before the first
// row of slack (the diagonals read the word left of the first word's upper neighbour)
#if VC_DIAG
#define LV_DIAG_TERMS(PAR)                                                                 \
    | (M4[i] & __funnelshift_r(s_f[od[i] + (PAR) * LV_S], s_f[od[i] + 1 + (PAR) * LV_S], 1)) \
    | (M5[i] & __funnelshift_l(s_f[ou[i] - 1 + (PAR) * LV_S], s_f[ou[i] + (PAR) * LV_S], 1)) \
    | (M6[i] & __funnelshift_l(s_f[od[i] - 1 + (PAR) * LV_S], s_f[od[i] + (PAR) * LV_S], 1)) \
    | (M7[i] & __funnelshift_r(s_f[ou[i] + (PAR) * LV_S], s_f[ou[i] + 1 + (PAR) * LV_S], 1))
#define LV_LEAD 1
#else
#define LV_DIAG_TERMS(PAR)
#define LV_LEAD 0
#endif
// one level j: F of buffer PAR (0 / 1) -> buffer 1 - PAR; PLANES: the bit planes this
// level updates from nv = ~V (see above); BAR: the barrier that ends it, LV_BAR (a
// plain one) or LV_BAR_ANY (the phase ends where no word of the block has a frontier;
// every fourth level: a frontier that dies is noticed up to three levels late, which
// costs nothing but those levels, and the plain barrier is the cheaper)
#define LV_BAR(a) __syncthreads()
#define LV_BAR_ANY(a)                                                                      \
    if (!__syncthreads_or((a) != 0u)) goto phase_end /* nothing left to reach */
#define LV_LEVEL(PAR, PLANES, BAR)                                                         \
    do {                                                                                   \
        unsigned int any = 0u;                                                             \
        _Pragma("unroll") for (int i = 0; i < LV_NPER; ++i) {                              \
            if (i > 0 && !(slot >> i & 1u)) break;                                         \
            if (j > dm[i]) continue;                                                       \
            const int o = so[i];                                                           \
            const unsigned int f = F[i];                                                   \
            const unsigned int fe = __funnelshift_r(f, s_f[o + 1 + (PAR) * LV_S], 1);      \
            const unsigned int fw = __funnelshift_l(s_f[o - 1 + (PAR) * LV_S], f, 1);      \
            const unsigned int nb =                                                        \
                ((M0[i] & fe) | (M1[i] & fw) | (M2[i] & s_f[od[i] + (PAR) * LV_S]) |       \
                 (M3[i] & s_f[ou[i] + (PAR) * LV_S]) LV_DIAG_TERMS(PAR)) &                 \
                ~V[i];                                                                     \
            V[i] |= nb;                                                                    \
            F[i] = nb;                                                                     \
            s_f[o + (1 - (PAR)) * LV_S] = nb;                                              \
            const unsigned int nv = ~V[i];                                                 \
            PLANES;                                                                        \
            any |= nb;                                                                     \
        }                                                                                  \
        BAR(any);                                                                          \
    } while (0)
// LV_DEFER (the host's default 1): the heights of the nodes a phase reaches are not
// written at the end of the phase (up to 32 scattered stores a word, which the block's
// next phase waits for) but kept as LV_DPL bit planes of each own word of the region, in
// the dynamic shared memory after the two frontier buffers (plane k of own word
// (y - L) * cw + x - 1 at s_pl[k * cw * ch + ...]): planes 0-4 the offset in the
// phase (P's bits), 5-10 the phase; every height is then written once, a warp a word,
// after the last phase. Phases from LV_QMAX on (LV_QMAX * L levels deep) write their
// heights at their end as before and mark them written with the phase code LV_QMAX.
#ifndef LV_DEFER
#define LV_DEFER 0
#endif
#define LV_DPL 11
#define LV_QMAX 63
// LV_PROF (profiling only, default 0): thread 0 of each block records global-timer and
// clock64 stamps of every phase (start, levels done, arrival at and exit from the grid
// barrier) and the levels it ran, in the device arrays lv_prof / lv_profk, a launch
// at a time (lv_prof_launch counts them; benchmarks/NOTES_gpu_grid.md, tenth round)
#ifndef LV_PROF
#define LV_PROF 0
#endif
#if LV_PROF  // [launch][block][phase][8] and [launch][block][4]
#define LV_PL 32
#define LV_PB 160
#define LV_PP 64
__device__ unsigned long long lv_prof[LV_PL * LV_PB * LV_PP * 8];
__device__ unsigned long long lv_profk[LV_PL * LV_PB * 4];
__device__ int lv_prof_launch;
__device__ __forceinline__ unsigned long long lv_gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define LV_PREC(P, K, V)                                                                 \
    if (threadIdx.x == 0 && lvl < LV_PL && blockIdx.x < LV_PB && (P) < LV_PP)            \
        lv_prof[(((size_t)lvl * LV_PB + blockIdx.x) * LV_PP + (P)) * 8 + (K)] = (V)
#define LV_KREC(K, V)                                                                    \
    if (threadIdx.x == 0 && lvl < LV_PL && blockIdx.x < LV_PB)                           \
        lv_profk[((size_t)lvl * LV_PB + blockIdx.x) * 4 + (K)] = (V)
#else
#define LV_PREC(P, K, V)
#define LV_KREC(K, V)
#endif
extern "C" __global__ void __launch_bounds__(LV_NT, 1)
    gbfs_level(const unsigned int* __restrict__ mask, int* __restrict__ h,
               unsigned int* __restrict__ pub, int* __restrict__ ctrl, int* __restrict__ out,
               int* __restrict__ pflags, int* __restrict__ touched, int* __restrict__ cnt,
               int nx, int ny, int nwr, int cw, int ch, int rxn, int L, int count, int pth,
               int nptiles) {
    if (*(volatile int*)out == 0) return;  // no active node left: this round is a no-op
#if NDIM == 2
#if LV_PROF
    const int lvl = *(volatile int*)&lv_prof_launch;
    LV_KREC(0, lv_gtime());
    LV_KREC(1, clock64());
#endif
    extern __shared__ unsigned int s_f[];  // 2 buffers of LV_S words (see LV_S)
    __shared__ int s_done, s_cnt;
    const int ew = cw + 2, eh = ch + 2 * L;
    const int next = eh * ew;     // ext words
    const IDX_T nw = (IDX_T)ny * nwr;
    const int G = gridDim.x;
    const int c0 = (blockIdx.x % rxn) * cw - 1;  // grid word column of ext column 0
    const int r0 = (blockIdx.x / rxn) * ch - L;  // grid row of ext row 0
    for (int i = threadIdx.x; i < 2 * LV_S; i += LV_NT) s_f[i] = 0u;
#if LV_DEFER  // (the planes' stride: the region's own words, cw * ch)
#define nown (cw * ch)
#define s_pl (s_f + 2 * LV_S)
    for (int i = threadIdx.x; i < LV_DPL * nown; i += LV_NT) s_pl[i] = 0u;
#endif
    if (threadIdx.x == 0) s_cnt = 0;
    if (count) {  // the count's tile flags: zeroed before the first grid barrier
        for (int i = blockIdx.x * LV_NT + threadIdx.x; i < nptiles; i += G * LV_NT) {
            pflags[i] = 0;
            touched[i] = 0;
        }
    }
    unsigned int M0[LV_NPER], M1[LV_NPER], M2[LV_NPER], M3[LV_NPER], V[LV_NPER],
        V0[LV_NPER], F[LV_NPER], P[LV_NPER][5];
#if VC_DIAG
    unsigned int M4[LV_NPER], M5[LV_NPER], M6[LV_NPER], M7[LV_NPER];
#endif
    int so[LV_NPER], ou[LV_NPER], od[LV_NPER];  // shared index of the word, up, down
    int dm[LV_NPER];   // the last level of a phase the word is computed at
    IDX_T gw[LV_NPER];  // its grid word
    unsigned int own = 0u, in = 0u, slot = 0u;  // bit i: word i is the region's own /
                                                // in the grid / exists
#pragma unroll
    for (int i = 0; i < LV_NPER; ++i) {
        const int e = threadIdx.x + i * LV_NT;
        M0[i] = M1[i] = M2[i] = M3[i] = V[i] = F[i] = 0u;
#if VC_DIAG
        M4[i] = M5[i] = M6[i] = M7[i] = 0u;
#endif
        so[i] = ou[i] = od[i] = ew;  // (never read for a missing word)
        dm[i] = -1;
        gw[i] = 0;
        if (e < next) {
            slot |= 1u << i;
            const int ey = e / ew, ex = e - ey * ew;
            so[i] = ew + LV_LEAD + e;
            ou[i] = so[i] - ew;
            od[i] = so[i] + ew;
            dm[i] = min(ey, eh - 1 - ey);  // rows from the grown region's edge
            const int gy = r0 + ey, gc = c0 + ex;
            if (gy >= 0 && gy < ny && gc >= 0 && gc < nwr) {
                in |= 1u << i;
                if (ex >= 1 && ex <= cw && ey >= L && ey < L + ch) own |= 1u << i;
                const IDX_T w = (IDX_T)gy * nwr + gc;
                gw[i] = w;
                M0[i] = __ldg(mask + w);
                M1[i] = __ldg(mask + nw + w);
                M2[i] = __ldg(mask + 2 * nw + w);
                M3[i] = __ldg(mask + 3 * nw + w);
#if VC_DIAG
                M4[i] = __ldg(mask + 4 * nw + w);
                M5[i] = __ldg(mask + 5 * nw + w);
                M6[i] = __ldg(mask + 6 * nw + w);
                M7[i] = __ldg(mask + 7 * nw + w);
#endif
                V[i] = F[i] = __ldg(mask + VC_K * nw + w);  // level 1: the sink arcs
            }
        }
    }
    for (int p = 0;; ++p) {
        if (p > 0) {  // the halo from the neighbours' publications of the last phase
            const unsigned int* pv = pub + (IDX_T)(p & 1) * 2 * nw;
#pragma unroll
            for (int i = 0; i < LV_NPER; ++i) {
                if ((in >> i & 1u) && !(own >> i & 1u)) {
                    V[i] = __ldcg(pv + gw[i]);
                    F[i] = __ldcg(pv + nw + gw[i]);
                }
            }
        }
        __syncthreads();  // the last phase's reads of the buffers are done
#pragma unroll
        for (int i = 0; i < LV_NPER; ++i) {
            P[i][0] = P[i][1] = P[i][2] = P[i][3] = P[i][4] = 0u;
            V0[i] = V[i];
            if (slot >> i & 1u) s_f[so[i]] = F[i];  // buffer 0
        }
        __syncthreads();
        LV_PREC(p, 0, lv_gtime());
        LV_PREC(p, 1, clock64());
        int j = 1;
        for (;;) {  // F of level 1 + p * L + j; four levels an iteration
            LV_LEVEL(0, P[i][0] ^= nv, LV_BAR);
            if (++j > L) break;
            LV_LEVEL(1, P[i][0] ^= nv; P[i][1] ^= nv, LV_BAR);
            if (++j > L) break;
            LV_LEVEL(0, P[i][0] ^= nv, LV_BAR);
            if (++j > L) break;
            {
                const bool q3 = !(j & 7), q4 = !(j & 15);
                LV_LEVEL(1, P[i][0] ^= nv; P[i][1] ^= nv; P[i][2] ^= nv;
                         if (q3) P[i][3] ^= nv; if (q4) P[i][4] ^= nv, LV_BAR_ANY);
            }
            if (++j > L) break;
        }
    phase_end:
        LV_PREC(p, 2, clock64());
        LV_PREC(p, 5, (unsigned long long)j);
        unsigned int front = 0u;
        const IDX_T po = (IDX_T)((p + 1) & 1) * 2 * nw;
#pragma unroll
        for (int i = 0; i < LV_NPER; ++i) {
            if (own >> i & 1u) {
                __stcg(pub + po + gw[i], V[i]);
                __stcg(pub + po + nw + gw[i], F[i]);
                front |= F[i];
            }
        }
        const int has = __syncthreads_or(front != 0u);
        if (threadIdx.x == 0) {  // arrive at the grid barrier
            if (has) atomicAdd(&ctrl[2 + p % 3], 1);
            if (blockIdx.x == 0) atomicExch(&ctrl[2 + (p + 1) % 3], 0);
            __threadfence();
            atomicAdd(&ctrl[0], 1);
        }
        LV_PREC(p, 6, lv_gtime());
        // while the others arrive: the levels of the nodes this phase reached
        const int k1 = 2 + p * L;  // the height of offset 0 (level 1 of the phase)
#pragma unroll
        for (int i = 0; i < LV_NPER; ++i) {
            unsigned int m = (own >> i & 1u) ? V[i] & ~V0[i] : 0u;
#if LV_DEFER
            if (m) {
                const int e = threadIdx.x + i * LV_NT, ey = e / ew;
                unsigned int* pl = s_pl + (ey - L) * cw + (e - ey * ew - 1);
                const int code = p < LV_QMAX ? p : LV_QMAX;
#pragma unroll
                for (int k = 0; k < 6; ++k)
                    if (code >> k & 1) pl[(5 + k) * nown] |= m;
                if (code < LV_QMAX) {
#pragma unroll
                    for (int k = 0; k < 5; ++k) pl[k * nown] |= P[i][k] & m;
                    m = 0u;  // written after the last phase
                }
            }
#endif
            if (m) {
                const IDX_T w = gw[i];
                int* hr = h + (w / nwr) * nx + (w % nwr) * 32;
                do {
                    const int b = __ffs(m) - 1;
                    hr[b] = k1 + (int)((P[i][0] >> b & 1u) | (P[i][1] >> b & 1u) << 1 |
                                       (P[i][2] >> b & 1u) << 2 | (P[i][3] >> b & 1u) << 3 |
                                       (P[i][4] >> b & 1u) << 4);
                    m &= m - 1;
                } while (m);
            }
        }
        LV_PREC(p, 3, clock64());
        if (threadIdx.x == 0) {
            const int target = (p + 1) * G;
            while (*(volatile int*)ctrl < target) {
            }
            LV_PREC(p, 7, lv_gtime());
            __threadfence();  // the others' publications after their arrivals
            s_done = *(volatile int*)(ctrl + 2 + p % 3) == 0;
        }
        __syncthreads();
        LV_PREC(p, 4, clock64());
        if (s_done) break;
    }
    LV_KREC(2, clock64());
    // the heights no phase wrote: 1 at the sink arcs, VC_INF where the BFS did not
    // reach; a warp a word (coalesced), the words of the lanes in turn; and the count
    const int lane = threadIdx.x & 31;
    int mine = 0;
#pragma unroll
    for (int i = 0; i < LV_NPER; ++i) {
        const bool o = own >> i & 1u;
        const unsigned int sk = o ? __ldg(mask + VC_K * nw + gw[i]) : 0u;
#if LV_DEFER
        const unsigned int todo = o ? 0xffffffffu : 0u;
        unsigned int pl[LV_DPL];
        {
            const int e = threadIdx.x + i * LV_NT, ey = e / ew;
            const int oi = o ? (ey - L) * cw + (e - ey * ew - 1) : 0;
#pragma unroll
            for (int k = 0; k < LV_DPL; ++k) pl[k] = o ? s_pl[k * nown + oi] : 0u;
        }
#else
        const unsigned int todo = o ? ~V[i] | sk : 0u;
#endif
        if (count && o) {
            const unsigned int act = V[i] & __ldg(mask + (VC_K + 1) * nw + gw[i]);
            if (act) {
                mine += __popc(act);
                const int gy = (int)(gw[i] / nwr), gc = (int)(gw[i] % nwr);
                pflags[(gy / pth) * nwr + gc] = 1;
            }
        }
        unsigned int who = __ballot_sync(0xffffffffu, todo != 0u);
        while (who) {
            const int src = __ffs(who) - 1;
            who &= who - 1;
            const unsigned int sw = __shfl_sync(0xffffffffu, sk, src);
            const IDX_T w = __shfl_sync(0xffffffffu, gw[i], src);
            const int x = (int)(w % nwr) * 32 + lane;
#if LV_DEFER
            const unsigned int vw = __shfl_sync(0xffffffffu, V[i], src);
            int lv = 0;
#pragma unroll
            for (int k = 0; k < LV_DPL; ++k)
                lv |= (int)(__shfl_sync(0xffffffffu, pl[k], src) >> lane & 1u) << k;
            const int code = lv >> 5;
            const int hv = !(vw >> lane & 1u) ? VC_INF
                           : (sw >> lane & 1u) ? 1
                                               : 2 + code * L + (lv & 31);
            if (x < nx && code < LV_QMAX) h[(w / nwr) * nx + x] = hv;
#else
            const unsigned int tw = __shfl_sync(0xffffffffu, todo, src);
            if ((tw >> lane & 1u) && x < nx) h[(w / nwr) * nx + x] = (sw >> lane & 1u) ? 1 : VC_INF;
#endif
        }
    }
    if (count) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mine += __shfl_down_sync(0xffffffffu, mine, o);
        if (lane == 0 && mine) atomicAdd(&s_cnt, mine);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (count && s_cnt) atomicAdd(&cnt[0], s_cnt);
        __threadfence();
        LV_KREC(3, clock64());
        if (atomicAdd(&ctrl[1], 1) == G - 1) {  // the last one out
#if LV_PROF
            lv_prof_launch = lvl + 1;
#endif
            ctrl[0] = 0;
            ctrl[1] = 0;
            ctrl[2] = ctrl[3] = ctrl[4] = 0;
            if (count) {
                __threadfence();
                *(volatile int*)out = atomicExch(&cnt[0], 0);
            }
        }
    }
#else
    (void)mask, (void)h, (void)pub, (void)ctrl, (void)nx, (void)ny, (void)nwr, (void)cw;
    (void)ch, (void)rxn, (void)L, (void)pflags, (void)touched, (void)cnt, (void)count;
    (void)pth, (void)nptiles;
    __trap();  // 2-D only
#endif
}
#undef LV_LEVEL
#undef LV_DIAG_TERMS
#undef nown
#undef s_pl
#undef LV_LEAD
#undef LV_BAR
#undef LV_BAR_ANY

// ---- incremental global relabel ----------------------------------------------------
// After a round whose pushes touched few tiles, the exact distances d of the last global
// relabel are still upper bounds of the new ones almost everywhere. Three launches
// replace gbfs_init + a BFS from scratch:
//   gbfs_seed        flags (iflags and flags) the BFS tiles that overlap a push tile the
//                    round ran (touched) or left flagged (a push across its border):
//                    only there did arcs and sink capacities change.
//   gbfs_invalidate  persistent like gbfs_persistent, over iflags: a node keeps its d
//                    only while it is supported (d == 1 with a residual sink arc, or a
//                    residual arc to a node of d - 1 that is supported); the others get
//                    VC_INF. Supports are lost only where arcs changed and then further
//                    from the sink, so the pass starts at the seeded tiles and flags the
//                    neighbour tile across a face where a node lost its d; every tile
//                    where a node changed is flagged for the relaxation (flags).
//   gbfs_persistent  on d, from the flagged tiles: the chaotic relaxation from upper
//                    bounds (a supported node has a path of length d to the sink; the
//                    others start at VC_INF) ends at the exact distances. It also picks
//                    up distances that drop through the reverse arcs the pushes added:
//                    those start in the seeded tiles, which are flagged.
// Why the result is exact: no value ends below the true distance (each is the length
// of a path). Take a shortest path u_k -> ... -> u_1 (u_1 has a sink arc, so d = 1 and
// it stays supported) and assume u_{j-1} ends at j - 1. If that value came from a drop
// in a relaxation, u_j's tile was relaxed afterwards (same tile, or flagged across the
// face), so u_j ends <= j. Otherwise u_{j-1} kept its start value d(u_{j-1}) = j - 1;
// if u_j's tile was never relaxed, u_j was neither seeded nor invalidated, so its arc to
// u_{j-1} is an old arc (a new one lies in a seeded tile) and d(u_j) <= j held before.
// Nodes at VC_INF stay there (no push reaches them), as in the full relabel. The host
// then copies d to the push heights h.
// ctrl[3] is the pending count of iflags (ctrl[0] that of flags, as in the BFS).

// One thread a BFS tile: seed the flags (see above). The push tiles (PTX x PTY x PTZ
// nodes, pntx x pnty of them) come from the push module; out[0] == 0: a no-op round.
extern "C" __global__ void gbfs_seed(const int* __restrict__ touched,
                                     const int* __restrict__ pflags, int* __restrict__ iflags,
                                     int* __restrict__ flags, int* __restrict__ ctrl,
                                     const int* __restrict__ out, int nx, int ny, int nz,
                                     int ntx, int nty, int ntz, int ptx, int pty, int ptz,
                                     int pntx, int pnty) {
    if (*(volatile const int*)out == 0) return;
    const int bt = blockIdx.x * blockDim.x + threadIdx.x;
    int seeded = 0;
    if (bt < ntx * nty * ntz) {
        int tx, ty, tz;
        vc_tile_of_block(bt, ntx, nty, tx, ty, tz);
        const int x0 = tx * TILE_X, y0 = ty * TILE_Y, z0 = tz * TILE_Z;
        const int x1 = min(x0 + TILE_X, nx) - 1;
        const int y1 = min(y0 + TILE_Y, ny) - 1;
        const int z1 = min(z0 + TILE_Z, nz) - 1;
        for (int pz = z0 / ptz; pz <= z1 / ptz && !seeded; ++pz)
            for (int py = y0 / pty; py <= y1 / pty && !seeded; ++py)
                for (int px = x0 / ptx; px <= x1 / ptx; ++px) {
                    const int pt = (pz * pnty + py) * pntx + px;
                    if (touched[pt] | pflags[pt]) {
                        seeded = 1;
                        break;
                    }
                }
        if (seeded) {
            iflags[bt] = 1;
            flags[bt] = 1;
        }
    }
    const unsigned int bal = __ballot_sync(0xffffffffu, seeded);
    if ((threadIdx.x & 31) == 0 && bal) {
        atomicAdd(&ctrl[3], __popc(bal));
        atomicAdd(&ctrl[0], __popc(bal));
    }
}

extern "C" __global__ void __launch_bounds__(VC_NT)
gbfs_invalidate(const int* __restrict__ rc, const int* __restrict__ tcap, int* d,
                int* iflags, int* flags, int* ctrl, const int* __restrict__ out, int nx,
                int ny, int nz, int ntx, int nty, int ntz, IDX_T n) {
    if (out[0] == 0) return;  // no active node left: this round is a no-op
    __shared__ int s_d[VC_HN];
    const int t = threadIdx.x;
    vc_tile_pass(iflags, &ctrl[3], ntx * nty * ntz, [&](int tile) {
        int tx, ty, tz;
        vc_tile_of_block(tile, ntx, nty, tx, ty, tz);
        const vc_node a = vc_make_node(tx, ty, tz, nx, ny, nz, ntx, nty);
        const int d0 = a.inside ? __ldcg(d + a.g) : VC_INF;
        s_d[a.hi] = d0;
        const unsigned int m = vc_arc_mask(rc, a, n);
        const bool root = a.inside && d0 == 1 && tcap[a.g] > 0;
        vc_load_halo<true>(s_d, d, a, nx, ny, nz);
        __syncthreads();
        int dd = d0;
        while (true) {  // peel the unsupported nodes to the fixed point
            bool changed = false;
            if (dd < VC_INF && !root) {
                bool sup = false;
#pragma unroll
                for (int k = 0; k < VC_K; ++k) {
                    if (m & (1u << k)) {
                        const int dv = *(volatile int*)&s_d[a.hi + vc_halo_off(k)];
                        sup |= dv == dd - 1;
                    }
                }
                if (!sup) {
                    dd = VC_INF;
                    *(volatile int*)&s_d[a.hi] = VC_INF;
                    changed = true;
                }
            }
            if (!__syncthreads_or(changed)) break;
        }
        const bool lost = a.inside && dd != d0;
        if (lost) {
            __stcg(d + a.g, VC_INF);
            __threadfence();  // visible before the neighbours' flags
#pragma unroll
            for (int k = 0; k < VC_K; ++k) {
                if (!vc_in_tile(a, k) && vc_tile_exists(a, k, ntx, nty, ntz)) {
                    const int nb = tile + vc_nb_tile_off(a, k, ntx, nty);
                    if (atomicExch(&iflags[nb], 1) == 0) atomicAdd(&ctrl[3], 1);
                }
            }
        }
        if (__syncthreads_or(lost) && t == 0) {  // relax this tile afterwards
            if (atomicExch(&flags[tile], 1) == 0) atomicAdd(&ctrl[0], 1);
        }
        __syncthreads();  // s_d free for the next tile
    });
}
