// common.cuh: shared helpers of the grid max-flow kernels.
//
// Included by grid_push_relabel.cu and grid_bfs.cu. vision_cuts/_kernels.py inlines it
// (the line `#include "common.cuh"`), nvcc finds it beside the .cu file, so every .cu
// file still compiles on its own: `nvcc --ptx -arch=sm_80 -std=c++17 grid_bfs.cu`.
//
// Memory layout (vision_cuts/_maxflow_gpu.py allocates it):
//   a grid of (nz, ny, nx) nodes in C order (x = last axis, nz = 1 in 2-D), flat index
//   g = (z * ny + y) * nx + x of type IDX_T; arc planes rc[k * n + g] (structure of
//   arrays, int32), k = 0..K-1 = +x, -x, +y, -y, +z, -z; the reverse of plane k is
//   plane k ^ 1. Arcs that leave the grid have zero capacity.
//
// Tiles: a thread block owns one tile of TILE_X x TILE_Y x TILE_Z nodes, one node per
// thread (threadIdx.x = (lz * TILE_Y + ly) * TILE_X + lx); tiles are numbered
// (tz * nty + ty) * ntx + tx and launched as a 1-D grid. Heights of the tile and of its
// one-node halo (faces only for 4-/6-connectivity, the whole box with diagonals) live
// in shared memory as an (HZ, HY, HX) box.
//
// Compile-time constants (Python prepends `#define`s; the defaults below are 2-D):
//   NDIM    2 or 3
//   VC_PLANES  arc planes K (default 2 * NDIM): 2-D 4 or 8, 3-D 6, 18 or 26, in the
//           order of vision_cuts/grid.py (two a direction, forward then backward; the
//           face directions first, then the diagonals). With diagonals (VC_DIAG) the
//           halo box has its edges and corners too; the push checkerboard has
//           2**NDIM colours in 3-D (tiles that touch at a corner differ) and two in
//           2-D with the corner arcs pushed apart (PR_CORNERS of
//           grid_push_relabel.cu); 2-D relabels by the level BFS on bit masks
//           (gbfs_level), 3-D by the plain tile BFS (gbfs_init, gbfs_persistent) and
//           gpr_count_active: the warp BFS, the fused BFS and the line scans are
//           face-only.
//   TILE_X, TILE_Y, TILE_Z   tile shape, TILE_X * TILE_Y * TILE_Z <= 1024 threads,
//           TILE_Z = 1 in 2-D
//   IDX_T   integer type of flat node / arc indices: int, or long long when
//           K * n > 2**31 - 1 (chosen by Python, as CuPy's _get_inttype does)
//   VC_INF  height of a node that cannot reach the sink (> any finite height <= n;
//           VC_INF + 255 still fits an int, the BFS line scans add up to 31)
#ifndef VC_COMMON_CUH
#define VC_COMMON_CUH

#ifndef NDIM
#define NDIM 2
#endif
#ifndef TILE_X
#define TILE_X 32
#endif
#ifndef TILE_Y
#if NDIM == 2
#define TILE_Y 32
#else
#define TILE_Y 8
#endif
#endif
#ifndef TILE_Z
#if NDIM == 2
#define TILE_Z 1
#else
#define TILE_Z 8
#endif
#endif
#ifndef IDX_T
#define IDX_T int
#endif
#ifndef VC_INF
#define VC_INF 0x7FFFFF00
#endif

#if NDIM != 2 && NDIM != 3
#error "NDIM must be 2 or 3"
#endif
#if NDIM == 2 && TILE_Z != 1
#error "a 2-D tile has TILE_Z == 1"
#endif
#if TILE_X * TILE_Y * TILE_Z > 1024
#error "a tile is one thread block: TILE_X * TILE_Y * TILE_Z <= 1024"
#endif

#ifndef VC_PLANES
#define VC_PLANES (2 * NDIM)
#endif
#if (NDIM == 2 && VC_PLANES != 4 && VC_PLANES != 8) || \
    (NDIM == 3 && VC_PLANES != 6 && VC_PLANES != 18 && VC_PLANES != 26)
#error "VC_PLANES must be 4 or 8 in 2-D, 6, 18 or 26 in 3-D"
#endif
#define VC_K VC_PLANES
#define VC_DIAG (VC_K > 2 * NDIM)
#define VC_NT (TILE_X * TILE_Y * TILE_Z)
#define VC_HX (TILE_X + 2)
#define VC_HY (TILE_Y + 2)
#if NDIM == 3
#define VC_HZ (TILE_Z + 2)
#else
#define VC_HZ 1
#endif
#define VC_HN (VC_HX * VC_HY * VC_HZ)

typedef unsigned long long vc_u64;
// residual-arc masks of a node (bit k: plane k), as the BFS keeps them in shared memory
#if VC_K <= 8
typedef unsigned char vc_mask_t;
#else
typedef unsigned int vc_mask_t;
#endif

// Forward step of direction d (planes 2 d, 2 d + 1) along x, y, z: grid.py's _FORWARD.
__device__ __forceinline__ int vc_fwd_dx(int d) {
#if NDIM == 2
    switch (d) {
        case 0: return 1;
        case 1: return 0;
        case 2: return 1;
        default: return -1;
    }
#else
    switch (d) {
        case 0: case 3: case 5: case 9: case 11: return 1;
        case 4: case 6: case 10: case 12: return -1;
        default: return 0;
    }
#endif
}

__device__ __forceinline__ int vc_fwd_dy(int d) {
#if NDIM == 2
    return d == 0 ? 0 : 1;
#else
    switch (d) {
        case 1: case 3: case 4: case 7: case 9: case 10: return 1;
        case 8: case 11: case 12: return -1;
        default: return 0;
    }
#endif
}

__device__ __forceinline__ int vc_fwd_dz(int d) {
#if NDIM == 2
    (void)d;
    return 0;
#else
    return (d == 2 || d >= 5) ? 1 : 0;
#endif
}

// Step of plane k (compile-time constants after unrolling).
__device__ __forceinline__ int vc_sx(int k) { return (k & 1) ? -vc_fwd_dx(k >> 1) : vc_fwd_dx(k >> 1); }
__device__ __forceinline__ int vc_sy(int k) { return (k & 1) ? -vc_fwd_dy(k >> 1) : vc_fwd_dy(k >> 1); }
__device__ __forceinline__ int vc_sz(int k) { return (k & 1) ? -vc_fwd_dz(k >> 1) : vc_fwd_dz(k >> 1); }

// Where this thread's node sits: local and global coordinates, tile coordinates.
struct vc_node {
    int t;              // thread index in the block = local node index
    int lx, ly, lz;     // coordinates inside the tile
    int tx, ty, tz;     // tile coordinates
    int tile;           // flat tile index
    bool inside;        // the node exists (partial tiles at the far borders)
    IDX_T g;            // flat global index (valid when inside)
    int hi;             // index in the (HZ, HY, HX) halo box
};

__device__ __forceinline__ vc_node vc_make_node(int tx, int ty, int tz, int nx, int ny,
                                                int nz, int ntx, int nty) {
    vc_node a;
    a.t = threadIdx.x;
    a.lx = a.t % TILE_X;
    a.ly = (a.t / TILE_X) % TILE_Y;
    a.lz = a.t / (TILE_X * TILE_Y);
    a.tx = tx;
    a.ty = ty;
    a.tz = tz;
    a.tile = (tz * nty + ty) * ntx + tx;
    const int x = tx * TILE_X + a.lx;
    const int y = ty * TILE_Y + a.ly;
    const int z = tz * TILE_Z + a.lz;
    a.inside = x < nx && y < ny && z < nz;
    a.g = ((IDX_T)z * ny + y) * nx + x;
#if NDIM == 3
    a.hi = ((a.lz + 1) * VC_HY + a.ly + 1) * VC_HX + a.lx + 1;
#else
    a.hi = (a.ly + 1) * VC_HX + a.lx + 1;
#endif
    return a;
}

// Tile coordinates of block b of a launch over all tiles.
__device__ __forceinline__ void vc_tile_of_block(int b, int ntx, int nty, int& tx,
                                                 int& ty, int& tz) {
    tx = b % ntx;
    const int r = b / ntx;
    ty = r % nty;
    tz = r / nty;
}

// Offset of the neighbour in direction k: in the halo box, in the grid.
// k is a compile-time constant after unrolling.
__device__ __forceinline__ int vc_halo_off(int k) {
    return (vc_sz(k) * VC_HY + vc_sy(k)) * VC_HX + vc_sx(k);
}

__device__ __forceinline__ IDX_T vc_grid_off(int k, int nx, int ny) {
    return ((IDX_T)vc_sz(k) * ny + vc_sy(k)) * nx + vc_sx(k);
}

// Offset of the neighbour tile across the face of direction k in the tile numbering
// (face directions only: thread-0 code that aggregates faces of a whole tile).
__device__ __forceinline__ int vc_tile_off(int k, int ntx, int nty) {
    return (vc_sz(k) * nty + vc_sy(k)) * ntx + vc_sx(k);
}

// Which tile holds the neighbour of this thread's node in direction k: the step in
// tile coordinates along each axis (-1, 0 or 1).
__device__ __forceinline__ int vc_tstep(int l, int s, int side) {
    return l + s < 0 ? -1 : (l + s >= side ? 1 : 0);
}

// Is the neighbour in direction k inside the same tile?
__device__ __forceinline__ bool vc_in_tile(const vc_node& a, int k) {
    return vc_tstep(a.lx, vc_sx(k), TILE_X) == 0 && vc_tstep(a.ly, vc_sy(k), TILE_Y) == 0 &&
           vc_tstep(a.lz, vc_sz(k), TILE_Z) == 0;
}

// Offset, in the tile numbering, of the tile that holds the neighbour in direction k
// (0 inside the tile; with diagonals a corner node's arcs reach up to 2**NDIM - 1
// other tiles).
__device__ __forceinline__ int vc_nb_tile_off(const vc_node& a, int k, int ntx, int nty) {
    return (vc_tstep(a.lz, vc_sz(k), TILE_Z) * nty + vc_tstep(a.ly, vc_sy(k), TILE_Y)) * ntx +
           vc_tstep(a.lx, vc_sx(k), TILE_X);
}

// Does the tile that holds the neighbour in direction k exist?
__device__ __forceinline__ bool vc_tile_exists(const vc_node& a, int k, int ntx, int nty,
                                               int ntz) {
    const int x = a.tx + vc_tstep(a.lx, vc_sx(k), TILE_X);
    const int y = a.ty + vc_tstep(a.ly, vc_sy(k), TILE_Y);
    const int z = a.tz + vc_tstep(a.lz, vc_sz(k), TILE_Z);
    return x >= 0 && x < ntx && y >= 0 && y < nty && z >= 0 && z < ntz;
}

// Load a global height: plain, or through L2 only (__ldcg) where other blocks of the same
// launch write the heights (the L1 caches of the SMs are not coherent).
template <bool CG>
__device__ __forceinline__ int vc_ld(const int* p) {
    if (CG) return __ldcg(p);
    return *p;
}

// Fill the halo of s_h (heights in shared memory) from the global heights h: each thread
// on a tile face loads its outward neighbour; neighbours outside the grid get VC_INF.
// The caller writes its own s_h[a.hi] and synchronises afterwards.
template <bool CG>
__device__ __forceinline__ void vc_load_halo(int* s_h, const int* h,
                                             const vc_node& a, int nx, int ny, int nz) {
#if VC_DIAG
    // the whole shell of the halo box (faces, edges, corners), block-stride
    for (int i = a.t; i < VC_HN; i += VC_NT) {
        const int hx = i % VC_HX;
        const int hy = (i / VC_HX) % VC_HY;
        const int hz = i / (VC_HX * VC_HY);
        const bool shell = hx == 0 || hx == VC_HX - 1 || hy == 0 || hy == VC_HY - 1 ||
                           (NDIM == 3 && (hz == 0 || hz == VC_HZ - 1));
        if (!shell) continue;
        const int x = a.tx * TILE_X + hx - 1;
        const int y = a.ty * TILE_Y + hy - 1;
        const int z = NDIM == 3 ? a.tz * TILE_Z + hz - 1 : 0;
        const bool in = x >= 0 && x < nx && y >= 0 && y < ny && z >= 0 && z < nz;
        s_h[i] = in ? vc_ld<CG>(h + ((IDX_T)z * ny + y) * nx + x) : VC_INF;
    }
#else
    const int x = a.tx * TILE_X + a.lx;
    const int y = a.ty * TILE_Y + a.ly;
    if (a.lx == 0) s_h[a.hi - 1] = (a.inside && x > 0) ? vc_ld<CG>(h + a.g - 1) : VC_INF;
    if (a.lx == TILE_X - 1)
        s_h[a.hi + 1] = (a.inside && x + 1 < nx) ? vc_ld<CG>(h + a.g + 1) : VC_INF;
    if (a.ly == 0) s_h[a.hi - VC_HX] = (a.inside && y > 0) ? vc_ld<CG>(h + a.g - nx) : VC_INF;
    if (a.ly == TILE_Y - 1)
        s_h[a.hi + VC_HX] = (a.inside && y + 1 < ny) ? vc_ld<CG>(h + a.g + nx) : VC_INF;
#if NDIM == 3
    const int z = a.tz * TILE_Z + a.lz;
    const IDX_T plane = (IDX_T)nx * ny;
    if (a.lz == 0)
        s_h[a.hi - VC_HX * VC_HY] = (a.inside && z > 0) ? vc_ld<CG>(h + a.g - plane) : VC_INF;
    if (a.lz == TILE_Z - 1)
        s_h[a.hi + VC_HX * VC_HY] =
            (a.inside && z + 1 < nz) ? vc_ld<CG>(h + a.g + plane) : VC_INF;
#else
    (void)nz;
#endif
#endif  // VC_DIAG
}

// Relax the heights of a tile in s_h (with its halo, which stays fixed) to the fixed
// point of h(u) = min(h(u), h(v) + 1) over residual arcs u -> v (s_m: residual masks of
// the tile's nodes, bit k: arc plane k) by segmented min-plus scans: per axis, each line
// of the tile lies along consecutive lanes (lines of TILE_X, TILE_Y, TILE_Z threads) and
// is scanned forward and backward by warp shuffles, so a straight run of residual arcs
// settles in one step; axes alternate until nothing changes. Needs every tile side a
// power of two <= 32. Block-wide; ends synchronised. Returns the scan iterations.
// (grid_bfs.cu with BFS_SCAN, and the local relabel of grid_push_relabel.cu.)
__device__ __forceinline__ int vc_relax_scan(int* s_h, const vc_mask_t* s_m) {
    const int t = threadIdx.x;
    int rounds = 0;
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
    return rounds;
}

#endif  // VC_COMMON_CUH
