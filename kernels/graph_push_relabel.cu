// graph_push_relabel.cu: lock-free push-relabel max-flow on general CSR graphs.
//
// Python caller: vision_cuts/_flow_graph_gpu.py (maximum_flow_gpu), through
// vision_cuts/_kernels.get_module("graph_push_relabel.cu").
//
// Memory layout (allocated by the caller): n nodes, m arcs in CSR order.
//   indptr[n + 1] int      arcs of node u are indptr[u] .. indptr[u + 1] - 1
//   heads[m]      int      head node of every arc
//   rev[m]        int      index of the reverse arc
//   r[m]          long long residual capacities (updated with 64-bit atomics)
//   ex[n]         long long excess (updated with 64-bit atomics)
//   h[n]          int      labels; n = "cannot reach the target" (inactive)
//   front[2 * n]  int      two BFS frontier buffers
//   ctl[8]        int      ctl[0..2] frontier counters (rotating), ctl[3] active count
//   bar[2]        unsigned software grid barrier (arrivals, generation)
//
// Kernels and launch geometry:
//   gpr_saturate_source  1-D grid-stride over the arcs of s: saturate them.
//   gpr_bfs              persistent grid (at most the number of blocks resident at
//                        once; the host derives it from the occupancy, since blocks wait
//                        for each other at the software grid barrier): h = residual
//                        distance to `target` (never entering `excluded`), level by
//                        level over a frontier queue, one thread (warp = 0) or one warp
//                        (warp = 1) per frontier node; then counts the active nodes
//                        (excess > 0, h < n, not s or t) into ctl[3].
//   gpr_push_thread      grid-stride over nodes, `cycles` rounds: an active node finds
//                        its lowest residual neighbour; if it is lower it pushes
//                        min(excess, residual) to it, else it relabels to that height + 1
//                        (n when >= n). Hong's lock-free algorithm: only node v lowers
//                        r on v's arcs and ex[v], others only raise them, so stale reads
//                        are safe; atomics keep residuals and excesses exact.
//   gpr_push_warp        the same with one warp per node: lanes scan the arcs, a
//                        shuffle reduction finds the lowest neighbour, lane 0 acts.
// Termination and correctness do not depend on the labels being valid between global
// relabels: the host stops only when an exact BFS finds no active node.
//
// Compile-time constants: GPR_NT threads per block (default 256).

#ifndef GPR_NT
#define GPR_NT 256
#endif

typedef long long ll;
typedef unsigned long long ull;

__device__ __forceinline__ void grid_barrier(unsigned int* bar, unsigned int nblocks) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned int* vb = bar;
        unsigned int gen = vb[1];
        __threadfence();
        unsigned int arrived = atomicAdd(&bar[0], 1u);
        if (arrived == nblocks - 1) {
            atomicExch(&bar[0], 0u);
            __threadfence();
            atomicAdd(&bar[1], 1u);
        } else {
            while (vb[1] == gen) {
            }
        }
        __threadfence();
    }
    __syncthreads();
}

extern "C" __global__ void gpr_saturate_source(const int* __restrict__ indptr,
                                               const int* __restrict__ heads,
                                               const int* __restrict__ rev, ll* r, ll* ex,
                                               int s) {
    int beg = indptr[s], end = indptr[s + 1];
    for (int a = beg + blockIdx.x * blockDim.x + threadIdx.x; a < end;
         a += gridDim.x * blockDim.x) {
        ll c = r[a];
        if (c > 0) {
            r[a] = 0;
            atomicAdd((ull*)&r[rev[a]], (ull)c);
            atomicAdd((ull*)&ex[heads[a]], (ull)c);
        }
    }
}

extern "C" __global__ void __launch_bounds__(GPR_NT)
    gpr_bfs(const int* __restrict__ indptr, const int* __restrict__ heads,
            const int* __restrict__ rev, const ll* r, const ll* ex, int* h, int* front,
            int* ctl, unsigned int* bar, int n, int target, int excluded, int s, int t,
            int warp) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int nthreads = gridDim.x * blockDim.x;
    volatile int* vctl = ctl;
    for (int v = tid; v < n; v += nthreads) h[v] = (v == target) ? 0 : n;
    if (tid == 0) {
        front[0] = target;
        ctl[0] = 1;
        ctl[1] = 0;
        ctl[2] = 0;
        ctl[3] = 0;
    }
    grid_barrier(bar, gridDim.x);
    const int lane = threadIdx.x & 31;
    const int wid = tid >> 5;
    const int nwarps = nthreads >> 5;
    for (int level = 0;; ++level) {
        const int cnt = vctl[level % 3];
        if (cnt == 0) break;
        const int* fin = front + (level & 1) * n;
        int* fout = front + ((level + 1) & 1) * n;
        int* cout = ctl + (level + 1) % 3;
        if (warp) {
            for (int i = wid; i < cnt; i += nwarps) {
                const int u = __ldcg(&fin[i]);
                const int beg = indptr[u], end = indptr[u + 1];
                for (int a = beg + lane; a < end; a += 32) {
                    const int w = heads[a];
                    if (w != excluded && __ldcg(&h[w]) == n && __ldcg(&r[rev[a]]) > 0) {
                        if (atomicCAS(&h[w], n, level + 1) == n) {
                            fout[atomicAdd(cout, 1)] = w;
                        }
                    }
                }
            }
        } else {
            for (int i = tid; i < cnt; i += nthreads) {
                const int u = __ldcg(&fin[i]);
                const int beg = indptr[u], end = indptr[u + 1];
                for (int a = beg; a < end; ++a) {
                    const int w = heads[a];
                    if (w != excluded && __ldcg(&h[w]) == n && __ldcg(&r[rev[a]]) > 0) {
                        if (atomicCAS(&h[w], n, level + 1) == n) {
                            fout[atomicAdd(cout, 1)] = w;
                        }
                    }
                }
            }
        }
        if (tid == 0) ctl[(level + 2) % 3] = 0;
        grid_barrier(bar, gridDim.x);
    }
    int local = 0;
    for (int v = tid; v < n; v += nthreads) {
        if (v != s && v != t && __ldcg(&h[v]) < n && __ldcg(&ex[v]) > 0) ++local;
    }
    if (local) atomicAdd(&ctl[3], local);
}

__device__ __forceinline__ void push_or_relabel(int v, ll e, int hv, int hmin, int amin,
                                                const int* __restrict__ heads,
                                                const int* __restrict__ rev, ll* r,
                                                ll* ex, int* h, int n) {
    if (amin < 0) {
        h[v] = n;  // no residual arc: cannot reach anything
    } else if (hv > hmin) {
        ll ra = __ldcg(&r[amin]);
        ll d = e < ra ? e : ra;
        if (d > 0) {
            atomicAdd((ull*)&r[amin], (ull)(-d));
            atomicAdd((ull*)&r[rev[amin]], (ull)d);
            atomicAdd((ull*)&ex[v], (ull)(-d));
            atomicAdd((ull*)&ex[heads[amin]], (ull)d);
        }
    } else {
        h[v] = hmin + 1 < n ? hmin + 1 : n;
    }
}

extern "C" __global__ void __launch_bounds__(GPR_NT)
    gpr_push_thread(const int* __restrict__ indptr, const int* __restrict__ heads,
                    const int* __restrict__ rev, ll* r, ll* ex, int* h, int n, int s,
                    int t, int cycles) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int nthreads = gridDim.x * blockDim.x;
    for (int c = 0; c < cycles; ++c) {
        for (int v = tid; v < n; v += nthreads) {
            const ll e = __ldcg(&ex[v]);
            if (e <= 0 || v == s || v == t) continue;
            const int hv = __ldcg(&h[v]);
            if (hv >= n) continue;
            int hmin = 0x7FFFFFFF, amin = -1;
            const int beg = indptr[v], end = indptr[v + 1];
            for (int a = beg; a < end; ++a) {
                if (__ldcg(&r[a]) > 0) {
                    const int hw = __ldcg(&h[heads[a]]);
                    if (hw < hmin) {
                        hmin = hw;
                        amin = a;
                    }
                }
            }
            push_or_relabel(v, e, hv, hmin, amin, heads, rev, r, ex, h, n);
        }
    }
}

extern "C" __global__ void __launch_bounds__(GPR_NT)
    gpr_push_warp(const int* __restrict__ indptr, const int* __restrict__ heads,
                  const int* __restrict__ rev, ll* r, ll* ex, int* h, int n, int s, int t,
                  int cycles) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    const int wid = tid >> 5;
    const int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int c = 0; c < cycles; ++c) {
        for (int v = wid; v < n; v += nwarps) {
            // lane 0 reads, all lanes see the same values (warp-uniform branches)
            const ll e = __shfl_sync(0xffffffffu, lane == 0 ? __ldcg(&ex[v]) : 0ll, 0);
            if (e <= 0 || v == s || v == t) continue;
            const int hv = __shfl_sync(0xffffffffu, lane == 0 ? __ldcg(&h[v]) : 0, 0);
            if (hv >= n) continue;
            // key = (height << 32) | arc: the minimum gives the lowest neighbour
            ull best = ~0ull;
            const int beg = indptr[v], end = indptr[v + 1];
            for (int a = beg + lane; a < end; a += 32) {
                if (__ldcg(&r[a]) > 0) {
                    const ull key =
                        ((ull)(unsigned)__ldcg(&h[heads[a]]) << 32) | (unsigned)a;
                    if (key < best) best = key;
                }
            }
            for (int off = 16; off > 0; off >>= 1) {
                const ull o = __shfl_down_sync(0xffffffffu, best, off);
                if (o < best) best = o;
            }
            if (lane == 0) {
                const int hmin = best == ~0ull ? 0x7FFFFFFF : (int)(best >> 32);
                const int amin = best == ~0ull ? -1 : (int)(best & 0xffffffffu);
                push_or_relabel(v, e, hv, hmin, amin, heads, rev, r, ex, h, n);
            }
            __syncwarp();
        }
    }
}

// gpr_push_ballot: one warp per node as gpr_push_warp, but the warp first tests 32
// consecutive nodes at once (one coalesced load of their excesses and labels, a
// ballot) and then serves only the active ones, so inactive nodes cost 1/32 of a visit.
// The excess and label read at the test are safe to use later: only this warp lowers
// ex[u] or changes h[u] while the kernel runs.
extern "C" __global__ void __launch_bounds__(GPR_NT)
    gpr_push_ballot(const int* __restrict__ indptr, const int* __restrict__ heads,
                    const int* __restrict__ rev, ll* r, ll* ex, int* h, int n, int s,
                    int t, int cycles) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    const int wid = tid >> 5;
    const int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int c = 0; c < cycles; ++c) {
        for (int base = wid * 32; base < n; base += nwarps * 32) {
            const int v = base + lane;
            ll my_e = 0;
            int my_h = n;
            if (v < n && v != s && v != t) {
                my_e = __ldcg(&ex[v]);
                if (my_e > 0) my_h = __ldcg(&h[v]);
            }
            unsigned int mask = __ballot_sync(0xffffffffu, my_e > 0 && my_h < n);
            while (mask) {
                const int l = __ffs(mask) - 1;
                mask &= mask - 1;
                const int u = base + l;
                const ll e = __shfl_sync(0xffffffffu, my_e, l);
                const int hu = __shfl_sync(0xffffffffu, my_h, l);
                ull best = ~0ull;
                const int beg = indptr[u], end = indptr[u + 1];
                for (int a = beg + lane; a < end; a += 32) {
                    if (__ldcg(&r[a]) > 0) {
                        const ull key =
                            ((ull)(unsigned)__ldcg(&h[heads[a]]) << 32) | (unsigned)a;
                        if (key < best) best = key;
                    }
                }
                for (int off = 16; off > 0; off >>= 1) {
                    const ull o = __shfl_down_sync(0xffffffffu, best, off);
                    if (o < best) best = o;
                }
                if (lane == 0) {
                    const int hmin = best == ~0ull ? 0x7FFFFFFF : (int)(best >> 32);
                    const int amin = best == ~0ull ? -1 : (int)(best & 0xffffffffu);
                    push_or_relabel(u, e, hu, hmin, amin, heads, rev, r, ex, h, n);
                }
                __syncwarp();
            }
        }
    }
}
