// grid_push_relabel.cu: tiled push-relabel for 4-connected 2-D and 6-connected 3-D grids.
//
// Python caller: vision_cuts/_maxflow_gpu.py (maxflow_grid_gpu), through
// vision_cuts/_kernels.get_module("grid_push_relabel.cu", defines).
//
// Memory layout (see common.cuh): n nodes in C order; rc[k * n + g] int32 residual arc
// capacities (K planes); ex[g] uint64 excess (never negative); h[g] int32 heights
// (VC_INF = cannot reach the sink); tcap[g] int32 residual capacity to the sink;
// flags[tile] int32, nonzero when the tile may hold an active node; touched[tile] int32,
// 1 once the tile ran in this round (for the incremental global relabel of grid_bfs.cu;
// the count clears it); mask: the bit masks of grid_bfs.cu's gbfs_level (VC_MASKS below).
//
// Kernels and launch geometry (block = VC_NT threads, one node per thread):
//   gpr_init          1-D grid-stride over n: cancel terminal capacities
//                     (ex = max(s - t, 0), tcap = max(t - s, 0)); out[0] = 1, cnt = 0,
//                     and the BFS tile flags and pending counter (grid_bfs.cu) zeroed;
//                     narrow[0] = whether the total excess fits in 32 bits (PR_NARROW).
//   gpr_push_tile     one block per tile of one checkerboard colour: grid =
//                     ceil(ntx / 2) * nty * ntz blocks; a block with no tile returns.
//   gpr_push_persist  the same sweep by fewer blocks (the resident ones), each running
//                     the flagged tiles of the slots b, b + G, ... in turn (optional).
//   gpr_push_corners  (PR_CORNERS) 1-D over the tile corners inside the grid: the
//                     pushes along the arcs that cross them, after a sweep's colours
//                     (PR_CORNER_FLAGS, default 1: not where the tiles are unflagged).
//   gpr_push_claim    (PR_CORNERS) the sweeps of a round in one launch of the resident
//                     blocks, which claim tile runs and corner groups one at a time and
//                     start each once the runs it must follow have ended (see there).
//   gpr_count_active  one block of PR_COUNT_NT (<= 256) threads per tile: count the
//                     active nodes (ex > 0, finite height) into out[0], set the tile
//                     flags, clear touched; a no-op once out[0] == 0 (the host may queue
//                     rounds past the end of the solve; see the kernel). Used where the
//                     BFS launch does not count (grid_bfs.cu: BFS_COUNT, gbfs_level).
//   gpr_validate      1-D grid-stride over n: the checks of grid_graph on capacities
//                     uploaded as the caller gave them (int32): bad[0], bad[1], bad[2]
//                     the smallest flat index of a negative source, sink, arc entry
//                     (arc entries k * n + g), bad[3 + d] the smallest node g whose arc
//                     pair of direction d (planes 2 d and 2 d + 1) sums beyond 2**31 - 1;
//                     the host fills bad with LLONG_MAX first. Arcs that would leave the
//                     grid are set to zero (they are ignored, as grid_graph does).
//   gpr_reverse       1-D grid-stride over n, after a solve: the residual graph reversed
//                     (each arc pair's two entries exchanged, in place: a pair is its
//                     tail's), tcap = 1 where excess is left, else 0, and the excess
//                     cleared; out[0] = 1. A global relabel then reaches the nodes that
//                     those nodes reach in the residual graph: the smallest source side.
//   gpr_finish        1-D grid-stride over n: labels = (h < VC_INF) (1 = sink side) and
//                     acc[0] += sum of (sink capacity - residual sink capacity), the flow
//                     (the cancelled min(s, t) included: min(s, t) + max(t - s, 0) = t).
//
// Algorithm (Hong's lock-free grid push-relabel as implemented on tiles, in the spirit of
// Vineet & Narayanan "CUDA cuts" and Lupinska 2011): a launch processes the tiles of one
// colour of a checkerboard over tiles ((tx + ty + tz) & 1 == colour). Neighbouring tiles
// have the other colour and are idle, so their heights are constants of the launch (the
// halo) and a push across the tile border can write the neighbour's excess (atomicAdd:
// a node may receive from two tiles) and the reverse residual capacity (one writer: the
// tail of the arc) straight to global memory. Inside the tile, up to `iters` rounds of
//   push:    every active node u (ex > 0, h < VC_INF) sends min(ex, tcap) to the sink
//            (h(u) == 1 whenever tcap > 0) and then min(ex, rc) along each admissible
//            arc (h(u) == h(v) + 1)
//   relabel: after a barrier, every node adds the pushes it received (the increases of
//            its own residual entries) to its excess; a node still active gets
//            h = min(h(v) + 1) over its residual arcs (VC_INF when none is finite or the
//            minimum exceeds hmax = n), written to the other height buffer
// run in shared memory. During a push round heights are fixed, so an arc and its reverse
// are never both admissible: each residual entry has one writer and the round is
// race-free without atomics in shared memory; only pushes across the tile border use
// global atomics (the excess: a node may receive from two tiles; the reverse residual
// entry has one writer, but an atomic add needs no load, so the round does not wait for
// one). The result of a launch is deterministic.
// Heights are a valid labelling throughout (h(u) <= h(v) + 1 on residual arcs: pushes
// keep it, relabels only raise heights), so a finite height is a lower bound on the
// distance to the sink and VC_INF nodes can never reach it again.
//
// Compile-time constants (common.cuh): NDIM, TILE_X, TILE_Y, TILE_Z, IDX_T, VC_INF;
// PR_MIN_BLOCKS (default 1): the minimum resident blocks per SM asked of the compiler
// for gpr_push_tile (2 caps a 1024-thread block at 32 registers); PR_STATS (default 0;
// 1: gpr_push_tile counts tiles run, rounds run and tiles left active in pstats[0..2],
// for the profile of benchmarks/gpu_grid_check.py); PR_LR_AT (default 0 = off; an
// option, not a default: benchmarks/NOTES_gpu_grid.md, sixth round): at this local round
// a tile run raises its heights to the exact distances inside the tile (vc_relax_scan
// of common.cuh; tile sides powers of two <= 32, as the host allows).
// PR_NARROW (default 1): a tile run's excess in 32 bits where the total fits (see there).
// PR_BITLOOP (default 0; the host sets 1 for diagonal grids): a push round's arcs by
// the bits of the node's admissible arcs instead of an unrolled loop over every
// plane (vc_push_arcs below: the same pushes in the same order).
// Shared memory per block: 2 * VC_HN * 4 + (4 * K + 1) * VC_NT bytes (26 KiB for
// 32 x 32 in 2-D, 39 KiB for 16 x 8 x 8 in 3-D).
#include "common.cuh"

#ifndef PR_MIN_BLOCKS
#define PR_MIN_BLOCKS 1  // __launch_bounds__ minimum resident blocks of gpr_push_tile
#endif
#ifndef PR_STATS
#define PR_STATS 0  // 1: gpr_push_tile adds tiles run, rounds run, tiles left active
#endif              //    to pstats[0..2] (profiling only)
#ifndef PR_LR_AT
#define PR_LR_AT 0  // > 0: a local relabel of the tile at this local round (option)
#endif
// PR_TIMES (profiling only, default 0): thread 0 of every tile run records its global-
// timer start and end (ns) in pr_times and (tile << 8 | local rounds run) in pr_tmeta,
// pr_tn counting the runs (benchmarks/push_tile_times.py)
#ifndef PR_TIMES
#define PR_TIMES 0
#endif
#if PR_TIMES
#define PR_TN (1 << 20)
__device__ unsigned long long pr_times[2 * PR_TN];
__device__ unsigned int pr_tmeta[PR_TN];
__device__ unsigned int pr_tn;
__device__ __forceinline__ unsigned long long pr_gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif
// The bit masks of the level-synchronous BFS (grid_bfs.cu, gbfs_level) kept up to date
// by the pushes: in 2-D with tiles 32 nodes wide a warp of a tile is one row word, so
// at the write-back each warp stores its word of the K arc planes, the sink arcs and
// the nodes with excess (mask[p * nwm + y * ntx + tx], p = 0..K + 1); a push across the
// tile border sets the receiver's bit of the reverse arc and of the excess (atomicOr:
// the neighbour tile is idle), and gpr_push_corners sets and clears the bits its
// pushes change. nwm = 0 (the host's choice where no level BFS runs):
// nothing is written.
#define VC_MASKS (NDIM == 2 && TILE_X == 32)
#if PR_LR_AT > 0 && ((TILE_X & (TILE_X - 1)) || (TILE_Y & (TILE_Y - 1)) || \
                     (TILE_Z & (TILE_Z - 1)) || TILE_X > 32 || TILE_Y > 32 || TILE_Z > 32)
#error "PR_LR_AT needs tile sides that are powers of two <= 32"
#endif
#if PR_LR_AT > 0 && VC_DIAG
#error "PR_LR_AT (the line-scan local relabel) has face arcs only"
#endif
// PR_CORNERS (2-D with diagonals; default 0): two checkerboard colours instead of four.
// Tiles of one colour then touch only at their corners, where a single arc pair
// crosses (the corner node's diagonal arc into the tile across the corner): the push
// tiles leave those arcs alone (their relabels still count them, with the heights of
// the tile start, which are lower bounds of the present ones, so the labelling stays
// valid) and gpr_push_corners pushes along them after each sweep, one thread a tile
// corner (see there). Half the launches a sweep, and twice the tiles a launch.
#ifndef PR_CORNERS
#define PR_CORNERS 0
#endif
#if PR_CORNERS && !(VC_DIAG && NDIM == 2)
#error "PR_CORNERS is for 2-D grids with diagonals"
#endif
#ifndef PR_CORNER_FLAGS
#define PR_CORNER_FLAGS 1  // gpr_push_corners skips the pairs of idle tiles (see there)
#endif
#define VC_COLOURS4 (VC_DIAG && !PR_CORNERS)  // 2**NDIM colours (see vc_colour_tile)

// The sum of v over the block (blockDim.x a multiple of 32), in thread 0; every thread
// of the block calls it.
__device__ __forceinline__ vc_u64 vc_block_sum(vc_u64 v) {
    __shared__ vc_u64 s_part[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) s_part[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = lane < (int)(blockDim.x >> 5) ? s_part[lane] : 0ull;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    }
    return v;
}

extern "C" __global__ void gpr_init(const int* __restrict__ src, const int* __restrict__ snk,
                                    vc_u64* __restrict__ ex, int* __restrict__ tcap,
                                    int* __restrict__ out, int* __restrict__ cnt,
                                    int* __restrict__ bflags, int* __restrict__ bctrl,
                                    vc_u64* __restrict__ etot, int* __restrict__ narrow,
                                    int nbtiles, IDX_T n) {
    const IDX_T stride = (IDX_T)gridDim.x * blockDim.x;
    const IDX_T gid = (IDX_T)blockIdx.x * blockDim.x + threadIdx.x;
    if (gid == 0) {
        out[0] = 1;  // "active nodes may exist": the first global relabel runs
        cnt[0] = 0;
        cnt[1] = 0;
        bctrl[0] = 0;  // no BFS tile pending
        bctrl[1] = 0;  // the grid barrier of gbfs_fused (BFS_INIT)
        bctrl[2] = 0;
    }
    for (IDX_T i = gid; i < nbtiles; i += stride) bflags[i] = 0;
    vc_u64 sum = 0;  // the total excess (PR_NARROW)
    for (IDX_T i = (IDX_T)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int s = src[i];
        const int t = snk[i];
        const vc_u64 e = s > t ? (vc_u64)(unsigned int)(s - t) : 0ull;
        ex[i] = e;
        sum += e;
        tcap[i] = t > s ? t - s : 0;
    }
    // narrow[0]: whether the total fits in 32 bits. The blocks add their sums into
    // etot[0]; the last one (ticket etot[1]) decides and leaves both zeroed.
    const vc_u64 b = vc_block_sum(sum);
    if (threadIdx.x == 0) {
        if (b) atomicAdd(&etot[0], b);
        __threadfence();
        if (atomicAdd(&etot[1], 1ull) == (vc_u64)gridDim.x - 1) {  // the last block
            __threadfence();
            const vc_u64 total = atomicExch(&etot[0], 0ull);
            etot[1] = 0ull;
            *narrow = total <= 0xffffffffull ? 1 : 0;
        }
    }
}

// Tile (tx, ty, tz) of the checkerboard colour `colour` of launch slot c; tx >= ntx
// where the slot has no tile. Faces only: two colours, (tx + ty + tz + colour) even,
// slots 0 <= c < vc_colour_slots = ceil(ntx / 2) * nty * ntz. With diagonals tiles
// that share only an edge or a corner are neighbours too: 2**NDIM colours, colour bit
// i the parity of tile coordinate i, slots ceil(ntx / 2) * ceil(nty / 2) (*
// ceil(ntz / 2)); with PR_CORNERS the two colours of the faces (see there).
__device__ __forceinline__ void vc_colour_tile(int c, int colour, int ntx, int nty, int ntz,
                                               int& tx, int& ty, int& tz) {
    const int nhx = (ntx + 1) / 2;
    const int bx = c % nhx;
    const int row = c / nhx;
#if VC_COLOURS4
    const int nhy = (nty + 1) / 2;
    tx = 2 * bx + (colour & 1);
    ty = 2 * (row % nhy) + ((colour >> 1) & 1);
    tz = NDIM == 3 ? 2 * (row / nhy) + ((colour >> 2) & 1) : 0;
    if (ty >= nty || tz >= ntz) tx = ntx;  // no tile in this slot
#else
    (void)ntz;
    ty = row % nty;
    tz = row / nty;
    tx = 2 * bx + ((colour + ty + tz) & 1);
#endif
}

__host__ __device__ __forceinline__ int vc_colour_slots(int ntx, int nty, int ntz) {
#if VC_COLOURS4
    return ((ntx + 1) / 2) * ((nty + 1) / 2) * (NDIM == 3 ? (ntz + 1) / 2 : 1);
#else
    return ((ntx + 1) / 2) * nty * ntz;
#endif
}

// PR_BITLOOP (default 0): the arcs of a push round by their bits. The admissible arcs
// of an active node (h(v) + 1 == h(u), residual, not a corner arc) are found first, with
// no branch, and the pushes then loop over the set bits in plane order: the same pushes
// as the unrolled loop over all K planes, in the same order, but a warp runs the push
// body only as often as its busiest node has admissible arcs (most have one to three),
// not once for every plane any of its nodes can push along. The plane steps of a
// run-time plane come from three packed constants (2 bits a plane and axis).
#ifndef PR_BITLOOP
#define PR_BITLOOP 0
#endif
__device__ __forceinline__ unsigned long long vc_pack_steps(int axis) {
    unsigned long long p = 0ull;
#pragma unroll
    for (int k = 0; k < VC_K; ++k) {
        const int s = axis == 0 ? vc_sx(k) : (axis == 1 ? vc_sy(k) : vc_sz(k));
        p |= (unsigned long long)(s + 1) << (2 * k);
    }
    return p;  // a compile-time constant after unrolling
}
__device__ __forceinline__ int vc_step_of(unsigned long long pack, int k) {
    return (int)((pack >> (2 * k)) & 3ull) - 1;
}
// Node a has pushed d along plane k (step sx, sy, sz; constants where k is): the
// reverse residual entry and the receiver's excess, in shared memory inside the tile,
// else in global memory with the receiver's tile flagged (and its mask bits set).
__device__ __forceinline__ void vc_push_along(int k, int sx, int sy, int sz, int d,
                                              int (*s_rc)[VC_NT], unsigned char* s_touch,
                                              vc_u64* __restrict__ ex, int* __restrict__ rc,
                                              int* __restrict__ flags,
                                              unsigned int* __restrict__ mask, int nwm,
                                              const vc_node& a, int tile, int tx, int ty,
                                              int nx, int ny, int ntx, int nty, IDX_T n) {
    if (vc_tstep(a.lx, sx, TILE_X) == 0 && vc_tstep(a.ly, sy, TILE_Y) == 0 &&
        vc_tstep(a.lz, sz, TILE_Z) == 0) {
        const int tv = a.t + (sz * TILE_Y + sy) * TILE_X + sx;
        s_rc[k ^ 1][tv] += d;  // u is its only writer now
        s_touch[tv] = 1;
        return;
    }
    const IDX_T v = a.g + ((IDX_T)sz * ny + sy) * nx + sx;
    // the neighbour tile is idle and u is the only writer of this entry: atomics only so
    // that no load stalls the round (RED)
    atomicAdd(&ex[v], (vc_u64)d);
    atomicAdd(&rc[(IDX_T)(k ^ 1) * n + v], d);
    flags[tile + (vc_tstep(a.lz, sz, TILE_Z) * nty + vc_tstep(a.ly, sy, TILE_Y)) * ntx +
          vc_tstep(a.lx, sx, TILE_X)] = 1;
#if VC_MASKS
    if (nwm) {  // v's reverse arc is residual now, and v has excess
        const int vx = tx * TILE_X + a.lx + sx;
        const int vy = ty * TILE_Y + a.ly + sy;
        const IDX_T w = (IDX_T)vy * ntx + (vx >> 5);
        const unsigned int bit = 1u << (vx & 31);
        atomicOr(&mask[(IDX_T)(k ^ 1) * nwm + w], bit);
        atomicOr(&mask[(IDX_T)(VC_K + 1) * nwm + w], bit);
    }
#else
    (void)mask, (void)nwm, (void)tx, (void)ty;
#endif
}
// The pushes of node u (this thread) along its admissible arcs, heights sh (the round's
// buffer), after its sink push; e > 0 on entry. r[] and s_rc keep agreeing: an entry u
// pushed along has no other writer in the round (an arc and its reverse are never both
// admissible), so it is read back after the loop.
template <typename E>
__device__ __forceinline__ void vc_push_arcs(int (&r)[VC_K], E& e, int (*s_rc)[VC_NT],
                                             unsigned char* s_touch, const int* sh,
                                             vc_u64* __restrict__ ex, int* __restrict__ rc,
                                             int* __restrict__ flags,
                                             unsigned int* __restrict__ mask, int nwm,
                                             const vc_node& a, int hh, int tile, int tx,
                                             int ty, int nx, int ny, int ntx, int nty,
                                             IDX_T n) {
    const int t = a.t;
    unsigned int adm = 0u;
#pragma unroll
    for (int k = 0; k < VC_K; ++k) {
#if PR_CORNERS
        if (k >= 4 && vc_tstep(a.lx, vc_sx(k), TILE_X) != 0 &&
            vc_tstep(a.ly, vc_sy(k), TILE_Y) != 0)
            continue;  // a corner arc: gpr_push_corners pushes it
#endif
        const int hv = sh[a.hi + vc_halo_off(k)];
        adm |= (hv + 1 == hh && r[k] > 0 ? 1u : 0u) << k;  // hv == VC_INF never matches
    }
    const unsigned long long px = vc_pack_steps(0), py = vc_pack_steps(1),
                             pz = vc_pack_steps(2);
    unsigned int pushed = 0u;
    while (adm != 0u && e > 0) {
        const int k = __ffs(adm) - 1;
        adm &= adm - 1u;
        const int sx = vc_step_of(px, k), sy = vc_step_of(py, k), sz = vc_step_of(pz, k);
        const int rk = s_rc[k][t];  // == r[k]
        const int d = e < (E)rk ? (int)e : rk;
        s_rc[k][t] = rk - d;
        pushed |= 1u << k;
        e -= (E)d;
        vc_push_along(k, sx, sy, sz, d, s_rc, s_touch, ex, rc, flags, mask, nwm, a, tile, tx,
                      ty, nx, ny, ntx, nty, n);
    }
#pragma unroll
    for (int k = 0; k < VC_K; ++k)
        if (pushed >> k & 1u) r[k] = s_rc[k][t];
}

// A tile run's shared memory, one allocation whatever the excess type of the run (a
// __shared__ array declared in the template would be one for each).
struct vc_tile_shared {
    int h[2][VC_HN];  // heights, double-buffered: round i reads [i & 1]
    int rc[VC_K][VC_NT];
    unsigned char touch[VC_NT];  // a neighbour pushed to this node
#if PR_LR_AT > 0
    vc_mask_t m[VC_NT];  // residual masks (the local relabel)
#endif
};
__device__ __forceinline__ vc_tile_shared& vc_tile_smem() {
    __shared__ vc_tile_shared s;
    return s;
}

// One push / relabel tile run (see the header): block-wide, ends synchronised. E: the
// type of a node's excess while the tile runs (see PR_NARROW). PUBLISH (gpr_push_claim):
// every thread fences its stores before the tile's flag is written.
template <typename E, bool PUBLISH = false>
__device__ __forceinline__ void vc_push_tile(int* __restrict__ rc, vc_u64* __restrict__ ex,
                                             int* __restrict__ h, int* __restrict__ tcap,
                                             int* __restrict__ flags,
                                             int* __restrict__ touched,
                                             int* __restrict__ pstats,
                                             unsigned int* __restrict__ mask, int nwm,
                                             int tx, int ty, int tz, int nx, int ny,
                                             int nz, int ntx, int nty, int iters, int hmax,
                                             IDX_T n) {
    const int tile = (tz * nty + ty) * ntx + tx;
#if PR_TIMES
    const unsigned long long pr_t0 = pr_gtime();
#endif
    vc_tile_shared& sm = vc_tile_smem();
    int(*s_h)[VC_HN] = sm.h;
    int(*s_rc)[VC_NT] = sm.rc;
    unsigned char* s_touch = sm.touch;
#if PR_LR_AT > 0
    vc_mask_t* s_m = sm.m;
#endif

    const vc_node a = vc_make_node(tx, ty, tz, nx, ny, nz, ntx, nty);
    const int t = a.t;

    // ---- load the tile ------------------------------------------------------------
    E e = 0;
    int hh = VC_INF;
    int tc = 0;
    int r[VC_K];  // this node's residual capacities; s_rc holds the shared copy
#pragma unroll
    for (int k = 0; k < VC_K; ++k) r[k] = 0;
    if (a.inside) {
        e = (E)ex[a.g];
        hh = h[a.g];
        tc = tcap[a.g];
#pragma unroll
        for (int k = 0; k < VC_K; ++k) r[k] = rc[(IDX_T)k * n + a.g];
    }
#pragma unroll
    for (int k = 0; k < VC_K; ++k) s_rc[k][t] = r[k];
    s_touch[t] = 0;
    s_h[0][a.hi] = hh;
    s_h[1][a.hi] = hh;
    vc_load_halo<false>(s_h[0], h, a, nx, ny, nz);
    vc_load_halo<false>(s_h[1], h, a, nx, ny, nz);

    // ---- push / relabel rounds in shared memory -----------------------------------
    // Round i: (barrier) push along admissible arcs, reading heights from s_h[b];
    // (barrier) collect the pushes received, which show as increases of this node's
    // own entries of s_rc (an arc and its reverse are never both admissible, so each
    // entry has one writer), relabel, and write the height to s_h[b ^ 1]. No atomics
    // in shared memory; two barriers per round.
    int b = 0;
    int it = 0;
    for (; it < iters; ++it) {
        bool act = a.inside && e > 0 && hh < VC_INF;
        if (!__syncthreads_or(act)) break;
#if PR_LR_AT > 0
        if (it == PR_LR_AT) {  // uniform
            // Local relabel: raise every height to its exact distance inside the tile,
            // to a residual sink arc (1) or through a residual border arc to the halo
            // (halo height + 1), VC_INF where neither is left: excess that can no longer
            // leave the tile stops bouncing, the rest sees the way out. The other
            // buffer is scratch until the end of the round; its halo equals this one's.
            int* w = s_h[b ^ 1];
            unsigned int m = 0;
#pragma unroll
            for (int k = 0; k < VC_K; ++k) m |= (r[k] > 0 ? 1u : 0u) << k;
            s_m[t] = (vc_mask_t)m;
            w[a.hi] = a.inside && tc > 0 ? 1 : VC_INF;
            __syncthreads();
            vc_relax_scan(w, s_m);  // ends synchronised
            const int loc = w[a.hi];
            if (a.inside && loc > hh) {  // a valid labelling is never above these
                hh = loc;
                s_h[b][a.hi] = hh;
            }
            act = a.inside && e > 0 && hh < VC_INF;
            __syncthreads();
        }
#endif
        if (act) {
            if (tc > 0) {  // the sink is admissible: h == 1
                const int d = e < (E)tc ? (int)e : tc;
                tc -= d;
                e -= (E)d;
            }
#if PR_BITLOOP
            if (e > 0) vc_push_arcs(r, e, s_rc, s_touch, s_h[b], ex, rc, flags, mask, nwm, a,
                                    hh, tile, tx, ty, nx, ny, ntx, nty, n);
#else
#pragma unroll
            for (int k = 0; k < VC_K; ++k) {
                if (e == 0) break;
#if PR_CORNERS
                if (k >= 4 && vc_tstep(a.lx, vc_sx(k), TILE_X) != 0 &&
                    vc_tstep(a.ly, vc_sy(k), TILE_Y) != 0)
                    continue;  // a corner arc: gpr_push_corners pushes it
#endif
                const int hv = s_h[b][a.hi + vc_halo_off(k)];
                if (hv + 1 != hh) continue;  // hv == VC_INF never matches: hh < VC_INF
                if (r[k] <= 0) continue;
                const int d = e < (E)r[k] ? (int)e : r[k];
                r[k] -= d;
                s_rc[k][t] = r[k];
                e -= (E)d;
                vc_push_along(k, vc_sx(k), vc_sy(k), vc_sz(k), d, s_rc, s_touch, ex, rc,
                              flags, mask, nwm, a, tile, tx, ty, nx, ny, ntx, nty, n);
            }
#endif
        }
        __syncthreads();
        if (s_touch[t]) {  // collect the pushes received along the reverse of each arc
            s_touch[t] = 0;
#pragma unroll
            for (int k = 0; k < VC_K; ++k) {
                const int cur = s_rc[k][t];
                e += (E)(unsigned int)(cur - r[k]);
                r[k] = cur;
            }
        }
        if (a.inside && e > 0 && hh < VC_INF && tc == 0) {
            int m = VC_INF;
#pragma unroll
            for (int k = 0; k < VC_K; ++k) {
                if (r[k] > 0) {
                    const int hv = s_h[b][a.hi + vc_halo_off(k)];
                    if (hv < VC_INF && hv + 1 < m) m = hv + 1;
                }
            }
            hh = m > hmax ? VC_INF : m;
        }
        b ^= 1;
        s_h[b][a.hi] = hh;  // nobody reads s_h[b ^ 1] until the next barrier
    }

    // ---- write back ---------------------------------------------------------------
    if (a.inside) {
        ex[a.g] = (vc_u64)e;
        h[a.g] = hh;
        tcap[a.g] = tc;
#pragma unroll
        for (int k = 0; k < VC_K; ++k) rc[(IDX_T)k * n + a.g] = r[k];
    }
#if VC_MASKS
    if (nwm) {  // uniform: this warp's row word of the bit masks (see the header)
        unsigned int b[VC_K + 2];
#pragma unroll
        for (int k = 0; k < VC_K; ++k) b[k] = __ballot_sync(0xffffffffu, r[k] > 0);
        b[VC_K] = __ballot_sync(0xffffffffu, tc > 0);
        b[VC_K + 1] = __ballot_sync(0xffffffffu, e > 0);
        const int lane = t & 31;
        const int y = ty * TILE_Y + a.ly;
        if (y < ny && lane < VC_K + 2) {
            unsigned int v = b[0];
#pragma unroll
            for (int k = 1; k < VC_K + 2; ++k) v = lane == k ? b[k] : v;
            mask[(IDX_T)lane * nwm + (IDX_T)y * ntx + tx] = v;
        }
    }
#else
    (void)mask, (void)nwm;
#endif
    if (PUBLISH) __threadfence();  // the run's stores before its publication
    const int any = __syncthreads_or(a.inside && e > 0 && hh < VC_INF);
    if (t == 0) {
        flags[tile] = any;
        touched[tile] = 1;  // for the incremental global relabel (grid_bfs.cu)
#if PR_STATS
        atomicAdd(&pstats[0], 1);   // tiles run
        atomicAdd(&pstats[1], it);  // rounds run
        atomicAdd(&pstats[2], any);  // tiles left active
#endif
#if PR_TIMES
        const unsigned int slot = atomicAdd(&pr_tn, 1u);
        if (slot < PR_TN) {
            pr_times[2 * slot] = pr_t0;
            pr_times[2 * slot + 1] = pr_gtime();
            pr_tmeta[slot] = ((unsigned int)tile << 8) | (unsigned int)min(it, 255);
        }
#endif
    }
#if !PR_STATS
    (void)pstats;
#endif
}

// PR_NARROW (default 1): a tile run keeps each node's excess in 32 bits where the
// total initial excess fits in them (gpr_init's narrow[0]). A node's excess never
// exceeds that total (pushes move excess, the sink arcs take it, nothing makes it),
// so the 32-bit values are exact; otherwise the tile runs keep 64 bits. The global
// excess stays 64 bits either way. A block-uniform branch: both are compiled.
#ifndef PR_NARROW
#define PR_NARROW 1
#endif
#define VC_PUSH_TILE_ARGS                                                                  \
    rc, ex, h, tcap, flags, touched, pstats, mask, nwm, tx, ty, tz, nx, ny, nz, ntx, nty, \
        iters, hmax, n
#if PR_NARROW
#define VC_PUSH_TILE(NARROW)                                                               \
    do {                                                                                   \
        if (NARROW)                                                                        \
            vc_push_tile<unsigned int>(VC_PUSH_TILE_ARGS);                                 \
        else                                                                               \
            vc_push_tile<vc_u64>(VC_PUSH_TILE_ARGS);                                       \
    } while (0)
#define VC_PUSH_TILE_PUBLISH(NARROW)                                                       \
    do {                                                                                   \
        if (NARROW)                                                                        \
            vc_push_tile<unsigned int, true>(VC_PUSH_TILE_ARGS);                           \
        else                                                                               \
            vc_push_tile<vc_u64, true>(VC_PUSH_TILE_ARGS);                                 \
    } while (0)
#else
#define VC_PUSH_TILE(NARROW) vc_push_tile<vc_u64>(VC_PUSH_TILE_ARGS)
#define VC_PUSH_TILE_PUBLISH(NARROW) vc_push_tile<vc_u64, true>(VC_PUSH_TILE_ARGS)
#endif

extern "C" __global__ void __launch_bounds__(VC_NT, PR_MIN_BLOCKS)
gpr_push_tile(int* __restrict__ rc, vc_u64* __restrict__ ex, int* __restrict__ h,
              int* __restrict__ tcap, int* __restrict__ flags, int* __restrict__ touched,
              int* __restrict__ pstats, unsigned int* __restrict__ mask, int nwm,
              int nx, int ny, int nz, int ntx, int nty, int ntz, int colour, int iters,
              int hmax, IDX_T n, const int* __restrict__ narrow) {
    int tx, ty, tz;
    vc_colour_tile(blockIdx.x, colour, ntx, nty, ntz, tx, ty, tz);
    if (tx >= ntx) return;
    if (flags[(tz * nty + ty) * ntx + tx] == 0) return;  // uniform over the block
    const bool nar = __ldg(narrow) != 0;
    (void)nar;
    VC_PUSH_TILE(nar);
}

// The same sweep by a persistent grid (fewer blocks than tiles of the colour, at most
// as many as the GPU holds at once): block b reads the flags of the slots b, b + G,
// ... together, then runs its flagged tiles one after the other. In the tail, where
// few tiles are flagged, this saves launching and retiring the empty blocks of
// gpr_push_tile. The tiles of one launch are independent, so the order does not change
// the result.
extern "C" __global__ void __launch_bounds__(VC_NT, PR_MIN_BLOCKS)
gpr_push_persist(int* __restrict__ rc, vc_u64* __restrict__ ex, int* __restrict__ h,
                 int* __restrict__ tcap, int* __restrict__ flags, int* __restrict__ touched,
                 int* __restrict__ pstats, unsigned int* __restrict__ mask, int nwm,
                 int nx, int ny, int nz, int ntx, int nty, int ntz, int colour, int iters,
                 int hmax, IDX_T n, const int* __restrict__ narrow) {
    __shared__ int s_list[VC_NT];
    __shared__ int s_n;
    const int slots = vc_colour_slots(ntx, nty, ntz);
    const int G = gridDim.x;
    const int t = threadIdx.x;
    const bool nar = __ldg(narrow) != 0;
    (void)nar;
    for (int chunk = 0; blockIdx.x + chunk * G < slots; chunk += VC_NT) {
        if (t == 0) s_n = 0;
        __syncthreads();
        const int c = blockIdx.x + (chunk + t) * G;
        if (c < slots) {
            int tx, ty, tz;
            vc_colour_tile(c, colour, ntx, nty, ntz, tx, ty, tz);
            const int tile = (tz * nty + ty) * ntx + tx;
            if (tx < ntx && flags[tile] != 0) s_list[atomicAdd(&s_n, 1)] = tile;
        }
        __syncthreads();
        const int m = s_n;
        for (int i = 0; i < m; ++i) {
            int tx, ty, tz;
            vc_tile_of_block(s_list[i], ntx, nty, tx, ty, tz);
            VC_PUSH_TILE(nar);
        }
        __syncthreads();  // s_n, s_list free
    }
}

// gpr_push_corners (PR_CORNERS): the pushes along the corner arcs, after the colours of
// a sweep. One thread a tile corner inside the grid, the point where the tiles
// (jx - 1, jy - 1), (jx, jy - 1), (jx - 1, jy) and (jx, jy) meet (1 <= jx < ntx,
// 1 <= jy < nty), at x = jx TILE_X, y = jy TILE_Y. Two arc pairs cross it: a = (x - 1,
// y - 1) <-> d = (x, y) (planes 4: +x+y, 5: -x-y) and b = (x, y - 1) <-> c = (x - 1, y)
// (planes 6: -x+y, 7: +x-y). Each pair is one thread's alone, so the push is plain: the
// end with excess and a height one above the other's sends min(excess, residual) and
// flags the receiver's tile. No relabel (the next sweep does them).
__device__ __forceinline__ void vc_mask_bit(unsigned int* mask, int nwm, int p, IDX_T g,
                                            int nx, int ntx, bool on) {
    const int y = (int)(g / nx), x = (int)(g % nx);
    unsigned int* w = mask + (IDX_T)p * nwm + (IDX_T)y * ntx + (x >> 5);
    if (on)
        atomicOr(w, 1u << (x & 31));
    else
        atomicAnd(w, ~(1u << (x & 31)));
}

__device__ __forceinline__ void vc_corner_push(int* rc, vc_u64* ex, const int* h,
                                               int* flags, unsigned int* mask, int nwm,
                                               IDX_T u, IDX_T v, int p, int tile_u,
                                               int tile_v, int nx, int ntx, IDX_T n) {
    const vc_u64 eu = ex[u], ev = ex[v];
    const int hu = h[u], hv = h[v];
    const bool fwd = eu > 0 && hu < VC_INF && hu == hv + 1;  // u -> v admissible
    const bool bwd = ev > 0 && hv < VC_INF && hv == hu + 1;  // v -> u (not both)
    if (!fwd && !bwd) return;
    const IDX_T from = fwd ? u : v, to = fwd ? v : u;
    const int q = fwd ? p : p ^ 1, tile = fwd ? tile_v : tile_u;
    const vc_u64 e = fwd ? eu : ev;
    const int r = rc[(IDX_T)q * n + from];
    if (r <= 0) return;
    const int d = e < (vc_u64)r ? (int)e : r;
    rc[(IDX_T)q * n + from] = r - d;
    rc[(IDX_T)(q ^ 1) * n + to] += d;
    ex[from] = e - (vc_u64)d;
    ex[to] += (vc_u64)d;
    flags[tile] = 1;
    if (nwm) {  // the level BFS's bit masks (VC_MASKS; the words of other threads too)
        if (d == r) vc_mask_bit(mask, nwm, q, from, nx, ntx, false);
        if ((vc_u64)d == e) vc_mask_bit(mask, nwm, VC_K + 1, from, nx, ntx, false);
        vc_mask_bit(mask, nwm, q ^ 1, to, nx, ntx, true);
        vc_mask_bit(mask, nwm, VC_K + 1, to, nx, ntx, true);
    }
}

#if PR_CORNERS
// The pushes across tile corner j (0 <= j < (ntx - 1) * (nty - 1); see above).
__device__ __forceinline__ void vc_corner_pushes(int j, int* rc, vc_u64* ex, const int* h,
                                                 int* flags, unsigned int* mask, int nwm,
                                                 int nx, int ntx, IDX_T n) {
#if !VC_MASKS
    nwm = 0;  // the bit masks exist for push tiles 32 nodes wide only
#endif
    const int njx = ntx - 1;
    const int jx = j % njx + 1, jy = j / njx + 1;
    const IDX_T x = (IDX_T)jx * TILE_X, y = (IDX_T)jy * TILE_Y;
    const int t00 = (jy - 1) * ntx + jx - 1;  // tile of a; d's is t00 + ntx + 1
#if PR_CORNER_FLAGS
    // a pair pushes only from an end with excess and a finite height, and such a node's
    // tile is flagged (its run ended with it active, or a push reached it since): a pair
    // neither of whose tiles is flagged is left alone, its nodes unread (the same
    // pushes; in the tail most tiles are idle)
    const bool pa = (flags[t00] | flags[t00 + ntx + 1]) != 0;
    const bool pb = (flags[t00 + 1] | flags[t00 + ntx]) != 0;
#else
    const bool pa = true, pb = true;
#endif
    if (pa)
        vc_corner_push(rc, ex, h, flags, mask, nwm, (y - 1) * nx + x - 1, y * nx + x, 4,
                       t00, t00 + ntx + 1, nx, ntx, n);
    if (pb)
        vc_corner_push(rc, ex, h, flags, mask, nwm, (y - 1) * nx + x, y * nx + x - 1, 6,
                       t00 + 1, t00 + ntx, nx, ntx, n);
}
#endif

extern "C" __global__ void gpr_push_corners(int* __restrict__ rc, vc_u64* __restrict__ ex,
                                            const int* __restrict__ h,
                                            int* __restrict__ flags,
                                            unsigned int* __restrict__ mask, int nwm,
                                            int nx, int ny, int ntx, int nty, IDX_T n) {
#if PR_CORNERS
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (ntx - 1) * (nty - 1)) return;
    vc_corner_pushes(j, rc, ex, h, flags, mask, nwm, nx, ntx, n);
#else
    (void)rc, (void)ex, (void)h, (void)flags, (void)mask, (void)nwm, (void)nx, (void)ny;
    (void)ntx, (void)nty, (void)n;
    __trap();  // built with PR_CORNERS only
#endif
}

// gpr_push_claim (PR_CORNERS): a round's sweeps in one launch, each tile run started
// as soon as the runs it must follow have ended instead of at a colour launch (an
// option for the busy rounds of 8-connected grids: _maxflow_gpu._PUSH_CLAIM). The
// items, in order: per sweep the colour-0 slots, the colour-1 slots, then the tile
// corners in groups of VC_NT (a thread a corner); a block claims the next item from
// ticket[0] (0 at the launch), one at a time. In sweep s a tile of colour c has phase ph = 2 s + c;
// it is decided once its own run of phase ph - 2, its face neighbours' of phase ph - 1
// and, for s > 0, the corner pushes of sweep s - 1 at its four corners have ended
// (tdone[tile]: the last phase ended, cdone[corner]: the last sweep; -1 at the launch):
// it runs if it is flagged, else it publishes its phase at once. Until then no other
// thread writes what the run reads and writes (the runs that touch it are those of its
// face neighbours, and of diagonal tiles only through the corner pushes), so the pushes
// are those of the colour launches, in an order the neighbourhoods fix. A corner's
// pushes of sweep s wait for its four tiles' phases of sweep s. Thread 0 of the
// claiming block (every thread of a corner group) spins on the dependencies, which are
// items of smaller tickets claimed by blocks that are running (a block claims only
// while it runs): the smallest unfinished item is always ready, so the launch ends
// whatever the number of resident blocks. Each run fences its stores before it
// publishes its phase and the claimer fences once it sees the dependencies ended, so
// the plain loads after it (and the block barrier) see their stores.
#if PR_CORNERS
__device__ __forceinline__ bool vc_claim_ready(const int* tdone, const int* cdone, int tx,
                                               int ty, int ntx, int nty, int ph, int s) {
    const volatile int* td = tdone;
    bool ok = td[ty * ntx + tx] >= ph - 2;
    if (tx > 0) ok &= td[ty * ntx + tx - 1] >= ph - 1;
    if (tx + 1 < ntx) ok &= td[ty * ntx + tx + 1] >= ph - 1;
    if (ty > 0) ok &= td[(ty - 1) * ntx + tx] >= ph - 1;
    if (ty + 1 < nty) ok &= td[(ty + 1) * ntx + tx] >= ph - 1;
    if (s > 0) {
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // corner (jx, jy) is j = (jy - 1)(ntx - 1) + jx - 1
            const int jx = tx + (q & 1), jy = ty + (q >> 1);
            if (jx >= 1 && jx < ntx && jy >= 1 && jy < nty)
                ok &= *(const volatile int*)&cdone[(jy - 1) * (ntx - 1) + jx - 1] >= s - 1;
        }
    }
    return ok;
}
#endif

extern "C" __global__ void __launch_bounds__(VC_NT, PR_MIN_BLOCKS)
gpr_push_claim(int* __restrict__ rc, vc_u64* __restrict__ ex, int* __restrict__ h,
               int* __restrict__ tcap, int* __restrict__ flags, int* __restrict__ touched,
               int* __restrict__ pstats, unsigned int* __restrict__ mask, int nwm, int nx,
               int ny, int nz, int ntx, int nty, int ntz, int iters, int hmax, IDX_T n,
               const int* __restrict__ narrow, int sweeps, int* tdone, int* cdone,
               int* ticket) {
#if PR_CORNERS
    __shared__ int s_item, s_run;
    const int slots = vc_colour_slots(ntx, nty, ntz);
    const int t = threadIdx.x;
    const bool nar = __ldg(narrow) != 0;
    (void)nar;
    const int njx = ntx - 1, nc = njx * (nty - 1);
    const int per = 2 * slots + (nc + VC_NT - 1) / VC_NT;  // items a sweep
    const int total = sweeps * per;
    while (true) {
        if (t == 0) s_item = atomicAdd(ticket, 1);
        __syncthreads();
        const int item = s_item;
        if (item >= total) break;  // uniform
        const int s = item / per, k = item - s * per;
        if (k < 2 * slots) {  // a tile slot
            const int colour = k >= slots, ph = 2 * s + colour;
            int tx, ty, tz;
            vc_colour_tile(k - colour * slots, colour, ntx, nty, ntz, tx, ty, tz);
            const int tile = ty * ntx + tx;
            if (t == 0) {
                int run = 0;
                if (tx < ntx) {
                    while (!vc_claim_ready(tdone, cdone, tx, ty, ntx, nty, ph, s)) {
                    }
                    __threadfence();  // the dependencies' stores, then the flag
                    run = flags[tile] != 0;
                    if (!run) *(volatile int*)&tdone[tile] = ph;
                }
                s_run = run;
            }
            __syncthreads();
            if (s_run) {
                VC_PUSH_TILE_PUBLISH(nar);  // ends synchronised, stores fenced
                if (t == 0) {
                    __threadfence();  // the run's flag and touched stores
                    *(volatile int*)&tdone[tile] = ph;
                }
            }
        } else {  // a group of corners of sweep s, a thread a corner
            const int j = (k - 2 * slots) * VC_NT + t;
            if (j < nc) {
                const int t00 = (j / njx) * ntx + j % njx;  // the corner's four tiles
                const volatile int* td = tdone;
                while (td[t00] < 2 * s + ((t00 % ntx + t00 / ntx) & 1) ||
                       td[t00 + 1] < 2 * s + ((t00 % ntx + t00 / ntx + 1) & 1) ||
                       td[t00 + ntx] < 2 * s + ((t00 % ntx + t00 / ntx + 1) & 1) ||
                       td[t00 + ntx + 1] < 2 * s + ((t00 % ntx + t00 / ntx) & 1)) {
                }
                __threadfence();
                vc_corner_pushes(j, rc, ex, h, flags, mask, nwm, nx, ntx, n);
                __threadfence();
                *(volatile int*)&cdone[j] = s;
            }
        }
        __syncthreads();  // s_item and s_run free for the next claim
    }
#else
    (void)rc, (void)ex, (void)h, (void)tcap, (void)flags, (void)touched, (void)pstats;
    (void)mask, (void)nwm, (void)nx, (void)ny, (void)nz, (void)ntx, (void)nty, (void)ntz;
    (void)iters, (void)hmax, (void)n, (void)narrow, (void)sweeps, (void)tdone, (void)cdone;
    (void)ticket;
    __trap();  // built with PR_CORNERS only
#endif
}

// Count the active nodes (ex > 0, finite height) and set flags[tile] to whether the
// tile holds one: one block of PR_COUNT_NT threads per tile, VC_NT / PR_COUNT_NT nodes
// a thread. The blocks add into cnt[0]; the last block to finish (ticket cnt[1])
// moves the total to out[0] and zeroes cnt. Every block reads out[0] (the count of the
// previous round) before it takes its ticket, so the last block's write comes after all
// reads; out[0] == 0 means the solve has ended and the launch is a no-op.
#define PR_COUNT_NT (VC_NT < 256 ? VC_NT : 256)
extern "C" __global__ void __launch_bounds__(PR_COUNT_NT)
gpr_count_active(const vc_u64* __restrict__ ex, const int* __restrict__ h,
                 int* __restrict__ flags, int* __restrict__ touched, int* __restrict__ out,
                 int* __restrict__ cnt, int nx, int ny, int nz, int ntx, int nty) {
    if (*(volatile int*)out == 0) return;  // uniform over the launch
    int tx, ty, tz;
    vc_tile_of_block(blockIdx.x, ntx, nty, tx, ty, tz);
    int mine = 0;
#pragma unroll
    for (int j = threadIdx.x; j < VC_NT; j += PR_COUNT_NT) {
        const int lx = j % TILE_X;
        const int ly = (j / TILE_X) % TILE_Y;
        const int lz = j / (TILE_X * TILE_Y);
        const int x = tx * TILE_X + lx;
        const int y = ty * TILE_Y + ly;
        const int z = tz * TILE_Z + lz;
        if (x < nx && y < ny && z < nz) {
            const IDX_T g = ((IDX_T)z * ny + y) * nx + x;
            const vc_u64 e = ex[g];
            const int hh = h[g];
            mine += (e > 0 && hh < VC_INF) ? 1 : 0;
        }
    }
    __shared__ int s_c;
    if (threadIdx.x == 0) s_c = 0;
    __syncthreads();
    if (mine) atomicAdd(&s_c, mine);
    __syncthreads();
    const int c = s_c;
    if (threadIdx.x == 0) {
        const int tile = (tz * nty + ty) * ntx + tx;
        flags[tile] = c > 0;
        touched[tile] = 0;  // the next round's pushes mark it again
        if (c) atomicAdd(&cnt[0], c);
        __threadfence();
        if (atomicAdd(&cnt[1], 1) == (int)gridDim.x - 1) {  // the last block
            __threadfence();
            const int total = atomicExch(&cnt[0], 0);
            cnt[1] = 0;
            *(volatile int*)out = total;
        }
    }
}

// Path walks (optional, after a global relabel, before the count): every active node
// sends its excess down the exact distance labels the BFS just computed, one thread a
// node: at each node it first gives what the sink arc takes, then moves the rest along
// the first arc (u, v) with h(v) == h(u) - 1 and residual capacity, claiming
// min(carried, residual) by compare-and-swap and adding it to the reverse arc; what an
// arc cannot take stays at the node as excess (atomicAdd). Every step is a push along
// an admissible arc of the valid labelling, so the labelling stays valid and the result
// is a preflow; walks end at the sink, where no admissible arc is left, or after
// max_steps. A no-op once out[0] == 0 (like gpr_count_active). Used in the tail, where
// few nodes hold excess that the tiled sweeps move only a few tiles a round.
extern "C" __global__ void gpr_walk(int* __restrict__ rc, vc_u64* __restrict__ ex,
                                    const int* __restrict__ h, int* __restrict__ tcap,
                                    const int* __restrict__ out, int nx, int ny, int nz,
                                    int max_steps, IDX_T n) {
    if (*(volatile const int*)out == 0) return;  // uniform over the launch
    (void)nz;
    const IDX_T stride = (IDX_T)gridDim.x * blockDim.x;
    for (IDX_T g = (IDX_T)blockIdx.x * blockDim.x + threadIdx.x; g < n; g += stride) {
        if (__ldcg(ex + g) == 0ull) continue;
        int hc = h[g];
        if (hc >= VC_INF) continue;
        vc_u64 a = atomicExch(ex + g, 0ull);
        IDX_T cur = g;
        for (int step = 0; a > 0 && step < max_steps; ++step) {
            int tc = __ldcg(tcap + cur);
            while (tc > 0) {  // the sink arc
                const int d = a < (vc_u64)tc ? (int)a : tc;
                const int old = atomicCAS(tcap + cur, tc, tc - d);
                if (old == tc) {
                    a -= (vc_u64)d;
                    break;
                }
                tc = old;
            }
            if (a == 0 || hc <= 1) break;
            bool moved = false;
#pragma unroll
            for (int k = 0; k < VC_K; ++k) {
                int* arc = rc + (IDX_T)k * n + cur;
                int r = __ldcg(arc);
                if (r <= 0) continue;  // arcs that leave the grid have none
                const IDX_T v = cur + vc_grid_off(k, nx, ny);
                if (h[v] != hc - 1) continue;
                int d = 0;
                while (r > 0) {
                    d = a < (vc_u64)r ? (int)a : r;
                    const int old = atomicCAS(arc, r, r - d);
                    if (old == r) break;
                    r = old;
                    d = 0;
                }
                if (d == 0) continue;
                atomicAdd(rc + (IDX_T)(k ^ 1) * n + v, d);
                if (a > (vc_u64)d) atomicAdd(ex + cur, a - (vc_u64)d);
                a = (vc_u64)d;
                cur = v;
                --hc;
                moved = true;
                break;
            }
            if (!moved) break;
        }
        if (a > 0) atomicAdd(ex + cur, a);
    }
}

// grid_graph's checks on the device (see the header).
extern "C" __global__ void gpr_validate(const int* __restrict__ src, const int* __restrict__ snk,
                                        int* __restrict__ rc, long long* __restrict__ bad,
                                        int nx, int ny, int nz, IDX_T n) {
    const IDX_T stride = (IDX_T)gridDim.x * blockDim.x;
    for (IDX_T g = (IDX_T)blockIdx.x * blockDim.x + threadIdx.x; g < n; g += stride) {
        if (src[g] < 0) atomicMin(bad, (long long)g);
        if (snk[g] < 0) atomicMin(bad + 1, (long long)g);
        const int x = (int)(g % nx);
        const int y = (int)((g / nx) % ny);
        const int z = (int)(g / ((IDX_T)nx * ny));
        int cap[VC_K];
#pragma unroll
        for (int k = 0; k < VC_K; ++k) {
            const long long at = (long long)k * n + g;
            cap[k] = rc[at];
            if (cap[k] < 0) atomicMin(bad + 2, at);
            const int hx = x + vc_sx(k), hy = y + vc_sy(k), hz = z + vc_sz(k);
            const bool leaves = hx < 0 || hx >= nx || hy < 0 || hy >= ny || hz < 0 || hz >= nz;
            if (leaves && cap[k] != 0) rc[at] = 0;
        }
#pragma unroll
        for (int d = 0; d < VC_K / 2; ++d) {
            const int hx = x + vc_fwd_dx(d), hy = y + vc_fwd_dy(d), hz = z + vc_fwd_dz(d);
            const bool inside = hx >= 0 && hx < nx && hy >= 0 && hy < ny && hz >= 0 && hz < nz;
            if (!inside) continue;
            const IDX_T q = g + vc_grid_off(2 * d, nx, ny);
            const long long pair = (long long)cap[2 * d] + rc[(long long)(2 * d + 1) * n + q];
            if (pair > 2147483647LL) atomicMin(bad + 3 + d, (long long)g);
        }
    }
}

// The reversed residual graph of the smallest source side (see the header).
extern "C" __global__ void gpr_reverse(int* __restrict__ rc, vc_u64* __restrict__ ex,
                                       int* __restrict__ tcap, int* __restrict__ out, int nx,
                                       int ny, int nz, IDX_T n) {
    const IDX_T stride = (IDX_T)gridDim.x * blockDim.x;
    for (IDX_T g = (IDX_T)blockIdx.x * blockDim.x + threadIdx.x; g < n; g += stride) {
        const int x = (int)(g % nx);
        const int y = (int)((g / nx) % ny);
        const int z = (int)(g / ((IDX_T)nx * ny));
#pragma unroll
        for (int d = 0; d < VC_K / 2; ++d) {
            const int hx = x + vc_fwd_dx(d), hy = y + vc_fwd_dy(d), hz = z + vc_fwd_dz(d);
            const bool inside = hx >= 0 && hx < nx && hy >= 0 && hy < ny && hz >= 0 && hz < nz;
            if (!inside) continue;
            int* fwd = rc + (IDX_T)(2 * d) * n + g;
            int* back = rc + (IDX_T)(2 * d + 1) * n + g + vc_grid_off(2 * d, nx, ny);
            const int r = *fwd;
            *fwd = *back;
            *back = r;
        }
        tcap[g] = ex[g] > 0ull ? 1 : 0;
        ex[g] = 0ull;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = 1;  // the relabel runs
}

// Minimum cut and flow value after the last global relabel (see the header).
extern "C" __global__ void gpr_finish(const int* __restrict__ snk, const int* __restrict__ tcap,
                                      const int* __restrict__ h,
                                      unsigned char* __restrict__ labels,
                                      vc_u64* __restrict__ acc, IDX_T n) {
    const IDX_T stride = (IDX_T)gridDim.x * blockDim.x;
    vc_u64 sum = 0;
    for (IDX_T i = (IDX_T)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        labels[i] = h[i] < VC_INF ? 1 : 0;
        sum += (vc_u64)(unsigned int)(snk[i] - tcap[i]);  // 0 <= tcap <= sink
    }
    // one atomic a block (one a warp on a single address serialised: ~0.1 ms at 2 MP)
    sum = vc_block_sum(sum);
    if (threadIdx.x == 0 && sum) atomicAdd(acc, sum);
}
