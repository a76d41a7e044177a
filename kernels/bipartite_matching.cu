// bipartite_matching.cu: maximum-cardinality bipartite matching, APFB / APsB with the
// GPUBFS-WR search (Deveci, Kaya, Ucar, Catalyurek 2013).
//
// Caller: vision_cuts/_matching_gpu.py (maximum_bipartite_matching_gpu).
//
// Graph: the "left" side (the one whose adjacency is given: the rows of a CSR matrix,
// the columns of a CSC matrix) has nl vertices, the "right" side nr; ptr[nl + 1] and
// idx[nnz] (int32) list the right neighbours of each left vertex.
//
// State (int32 arrays of the caller):
//   lmatch[nl]  right vertex matched to each left vertex, -1 when free
//   rmatch[nr]  left vertex matched to each right vertex, -1 when free, -2 during a
//               phase: the free right end of the augmenting path of one search tree
//   bfs[nl]     BFS level of a left vertex in this phase; VC_UNSEEN, or VC_DONE for a
//               root whose tree already found its augmenting path
//   root[nl]    the free left vertex whose tree holds the vertex (valid when reached)
//   claim[nl]   for a root: the right end of its tree's augmenting path, else -1
//   pred[nr]    the left vertex that reached the right vertex in this phase
//   q0, q1      frontier queues of left vertices (level L reads q[L & 1])
//   st[8]       [0] level L, [1] an augmenting path was found, [2] blocks done (the
//               last block of a wide launch advances the level), [3] stop the search,
//               [4], [5] lengths of q0 and q1
//
// One phase: mm_phase_init (free left vertices = roots, level 0); search levels by
// alternating launches of mm_bfs_small (one block, loops over levels while the
// frontier has at most SMALL_MAX vertices) and mm_bfs_wide (grid-stride over one
// level, any frontier size), until the frontier is empty (APFB: the full search), or
// until the first level that found a path is done (APsB, stop_on_found = 1);
// mm_alternate flips every claimed path.
//
// Races and why they are harmless: a left vertex enters the search once, through an
// atomicCAS on bfs[]; only that winner writes its root[] and the pred[] of the right
// vertex it was reached through, so the search is a forest whose root[] values are
// exact. A free right vertex is taken by atomicCAS on rmatch[] (-1 -> -2) and then
// claimed for the tree through atomicCAS on claim[root] (-1 -> r); a tree that
// already has a path releases it (rmatch back to -1). Every tree therefore owns at most
// one path, and paths of different trees share no vertex: mm_alternate flips them
// without locks, and the matching stays consistent (FixMatching of the paper has
// nothing left to fix). The early exit (WR): a vertex of a tree whose root is
// VC_DONE is not expanded. A phase that found no path ran the search to the end with no
// early exit, so no augmenting path exists and the matching is maximum (Berge).
//
// Geometry: 1-D grids; mm_bfs_small is launched with ONE block of any size; the
// others with any grid (grid-stride loops).
//
// Compile-time constants:
//   SMALL_MAX  largest frontier that mm_bfs_small handles (default 2048)

#ifndef SMALL_MAX
#define SMALL_MAX 2048
#endif

#define VC_UNSEEN (-1)
#define VC_DONE (-2)

// Expand left vertex u of level L: GPUBFS-WR.
__device__ __forceinline__ void mm_expand(int u, int L, const int* __restrict__ ptr,
                                          const int* __restrict__ idx, int* rmatch,
                                          int* bfs, int* root, int* pred, int* claim,
                                          int* qout, int* nout, int* st) {
    const int r0 = root[u];
    if (__ldcg(bfs + r0) == VC_DONE) return;  // this tree already has its path
    const int e1 = ptr[u + 1];
    for (int e = ptr[u]; e < e1; ++e) {
        const int r = idx[e];
        const int m = __ldcg(rmatch + r);
        if (m >= 0) {
            if (__ldcg(bfs + m) == VC_UNSEEN &&
                atomicCAS(bfs + m, VC_UNSEEN, L + 1) == VC_UNSEEN) {
                root[m] = r0;
                pred[r] = u;
                qout[atomicAdd(nout, 1)] = m;
            }
        } else if (m == -1) {
            if (atomicCAS(rmatch + r, -1, -2) == -1) {
                if (atomicCAS(claim + r0, -1, r) == -1) {
                    pred[r] = u;
                    atomicExch(bfs + r0, VC_DONE);
                    atomicExch(st + 1, 1);
                    return;
                }
                atomicExch(rmatch + r, -1);  // the tree has a path already: release
                return;
            }
        }
    }
}

// Greedy initial matching: each left vertex takes its first free right neighbour
// (atomicCAS on rmatch). One pass gives a maximal matching: a left vertex left free
// saw every neighbour taken, and a taken vertex stays taken.
extern "C" __global__ void mm_greedy(const int* __restrict__ ptr,
                                     const int* __restrict__ idx, int* lmatch,
                                     int* rmatch, int nl) {
    for (int u = blockIdx.x * blockDim.x + threadIdx.x; u < nl;
         u += gridDim.x * blockDim.x) {
        if (lmatch[u] >= 0) continue;
        const int e1 = ptr[u + 1];
        for (int e = ptr[u]; e < e1; ++e) {
            const int r = idx[e];
            if (__ldcg(rmatch + r) == -1 && atomicCAS(rmatch + r, -1, u) == -1) {
                lmatch[u] = r;
                break;
            }
        }
    }
}

// Start a phase: free left vertices become roots at level 0 (queue q0), the others
// unseen. st must be zero before the launch.
extern "C" __global__ void mm_phase_init(const int* __restrict__ lmatch, int* bfs,
                                         int* root, int* claim, int* q0, int* st,
                                         int nl) {
    for (int base = blockIdx.x * blockDim.x; base < nl; base += gridDim.x * blockDim.x) {
        const int u = base + threadIdx.x;
        const bool free_u = u < nl && lmatch[u] < 0;
        if (u < nl) {
            bfs[u] = free_u ? 0 : VC_UNSEEN;
            if (free_u) {
                root[u] = u;
                claim[u] = -1;
            }
        }
        // warp-aggregated append (the whole warp takes part in every iteration)
        const unsigned ballot = __ballot_sync(0xffffffffu, free_u);
        const int lane = threadIdx.x & 31;
        int pos = 0;
        if (lane == 0 && ballot) pos = atomicAdd(st + 4, __popc(ballot));
        pos = __shfl_sync(0xffffffffu, pos, 0);
        if (free_u) q0[pos + __popc(ballot & ((1u << lane) - 1u))] = u;
    }
}

// One search level over any frontier size (skipped when the frontier is empty, small
// enough for mm_bfs_small, or the search was stopped). The last block to finish
// advances the level.
extern "C" __global__ void mm_bfs_wide(const int* __restrict__ ptr,
                                       const int* __restrict__ idx, int* rmatch,
                                       int* bfs, int* root, int* pred, int* claim,
                                       int* q0, int* q1, int* st, int stop_on_found) {
    const int L = __ldcg(st);
    const int n = __ldcg(st + 4 + (L & 1));
    if (n <= SMALL_MAX || __ldcg(st + 3)) return;  // uniform over the grid
    const int* qin = (L & 1) ? q1 : q0;
    int* qout = (L & 1) ? q0 : q1;
    int* nout = st + 4 + ((L + 1) & 1);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += gridDim.x * blockDim.x)
        mm_expand(qin[i], L, ptr, idx, rmatch, bfs, root, pred, claim, qout, nout, st);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        if (atomicAdd(st + 2, 1) == (int)gridDim.x - 1) {  // the last block
            __threadfence();
            st[4 + (L & 1)] = 0;
            if (stop_on_found && atomicAdd(st + 1, 0)) st[3] = 1;
            st[2] = 0;
            st[0] = L + 1;
            __threadfence();
        }
    }
}

// Levels with small frontiers, in one block: a level costs a __syncthreads, not a
// launch. Runs while 0 < frontier <= SMALL_MAX and the search is not stopped.
extern "C" __global__ void mm_bfs_small(const int* __restrict__ ptr,
                                        const int* __restrict__ idx, int* rmatch,
                                        int* bfs, int* root, int* pred, int* claim,
                                        int* q0, int* q1, int* st, int stop_on_found) {
    __shared__ int s_L, s_n, s_go;
    while (true) {
        if (threadIdx.x == 0) {
            const int L = __ldcg(st);
            const int n = __ldcg(st + 4 + (L & 1));
            s_L = L;
            s_n = n;
            s_go = n > 0 && n <= SMALL_MAX && __ldcg(st + 3) == 0;
        }
        __syncthreads();
        if (!s_go) break;
        const int L = s_L;
        const int n = s_n;
        const int* qin = (L & 1) ? q1 : q0;
        int* qout = (L & 1) ? q0 : q1;
        int* nout = st + 4 + ((L + 1) & 1);
        for (int i = threadIdx.x; i < n; i += blockDim.x)
            mm_expand(qin[i], L, ptr, idx, rmatch, bfs, root, pred, claim, qout, nout,
                      st);
        __syncthreads();
        if (threadIdx.x == 0) {
            st[4 + (L & 1)] = 0;
            if (stop_on_found && __ldcg(st + 1)) st[3] = 1;
            st[0] = L + 1;
        }
        __syncthreads();
    }
}

// Alternate: flip the augmenting path ending at every claimed right vertex (rmatch ==
// -2). Paths of different trees are vertex-disjoint, so no two threads touch the same
// vertex.
extern "C" __global__ void mm_alternate(int* lmatch, int* rmatch,
                                        const int* __restrict__ pred, int nr) {
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < nr;
         r += gridDim.x * blockDim.x) {
        if (rmatch[r] != -2) continue;
        int cur = r;
        while (true) {
            const int u = pred[cur];
            const int next = lmatch[u];
            lmatch[u] = cur;
            rmatch[cur] = u;
            if (next < 0) break;
            cur = next;
        }
    }
}
