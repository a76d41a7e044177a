// optical_flow.cu: the device stages of the optical flow pipeline between the
// features of two frames (vision_cuts/optical_flow.py documents the pipeline).
//
// Python caller: vision_cuts/_optical_flow_gpu.py.
//
// Kernels:
//   flow_pair_costs   one thread per pair (i, j) of an n x m grid (blockDim 16 x 16):
//                     cost[i * m + j] = d(i, j) + weight * |p1_j - p0_i - pred_i| / R
//                     where that distance is <= R, +inf elsewhere. d: the fraction of
//                     differing bits of packed binary descriptors (`words` 32-bit
//                     words each, zero-padded, `nbits` bits before the padding), or
//                     half the Euclidean distance of unit float vectors (`words`
//                     floats each). The formula of the CPU path (`_candidates`), in
//                     double precision; a cost above `max_pair` is +inf too (the
//                     pipeline's dominated pairs; +inf keeps every pair).
//   knn_median        one warp per query: the median (of each component) of the
//                     vectors of the k sources nearest to the query (k <= KMAX);
//                     the median of an even count is the mean of the middle two, as
//                     numpy.median. Ties in distance go to the lower source index.
//   knn_interpolate   one thread per grid pixel: the edge-aware average of the
//                     vectors of its k nearest sources (`_interpolate` documents the
//                     weights), on a grid of gw x gh pixels centred at
//                     (step * x + offset, step * y + offset).
//
// Compile-time constant:
//   KMAX              the largest k (default 16)
#ifndef KMAX
#define KMAX 16
#endif
#define VC_INF_F __int_as_float(0x7f800000)
#define VC_INF_D __longlong_as_double(0x7ff0000000000000LL)

__device__ __forceinline__ void knn_insert(float d, int s, float* best_d, int* best_i,
                                           int k) {
    // sorted by (distance, index); sources arrive in index order, so a tie never
    // displaces an earlier source
    if (d >= best_d[k - 1]) return;
    int p = k - 1;
    while (p > 0 && best_d[p - 1] > d) {
        best_d[p] = best_d[p - 1];
        best_i[p] = best_i[p - 1];
        --p;
    }
    best_d[p] = d;
    best_i[p] = s;
}

#define KNN_TILE 256

// the k nearest sources of (qx, qy), by (distance, index). Every thread of the
// block calls it (the sources pass through shared memory in tiles); `active` says
// whether the thread has a query.
__device__ void knn_search(float qx, float qy, bool active, const float* __restrict__ src,
                           int ns, int k, float* best_d, int* best_i) {
    __shared__ float2 tile[KNN_TILE];
    for (int t = 0; t < k; ++t) {
        best_d[t] = VC_INF_F;
        best_i[t] = -1;
    }
    float worst = VC_INF_F;  // best_d[k - 1], kept in a register
    int lane = threadIdx.x + threadIdx.y * blockDim.x;
    int threads = blockDim.x * blockDim.y;
    for (int base = 0; base < ns; base += KNN_TILE) {
        int count = min(KNN_TILE, ns - base);
        __syncthreads();
        for (int i = lane; i < count; i += threads)
            tile[i] = make_float2(src[2 * (base + i)], src[2 * (base + i) + 1]);
        __syncthreads();
        if (!active) continue;
        for (int i = 0; i < count; ++i) {
            float dx = tile[i].x - qx, dy = tile[i].y - qy;
            float d = dx * dx + dy * dy;
            if (d < worst) {
                knn_insert(d, base + i, best_d, best_i, k);
                worst = best_d[k - 1];
            }
        }
    }
}

extern "C" __global__ void flow_pair_costs(const float* __restrict__ p0,
                                           const float* __restrict__ pred,
                                           const float* __restrict__ p1,
                                           const unsigned int* __restrict__ d0,
                                           const unsigned int* __restrict__ d1, int n,
                                           int m, int words, int binary, int nbits,
                                           double radius, double weight,
                                           double max_pair, double* __restrict__ cost) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || j >= m) return;
    float tx = p0[2 * i] + pred[2 * i], ty = p0[2 * i + 1] + pred[2 * i + 1];
    double dx = (double)p1[2 * j] - (double)tx, dy = (double)p1[2 * j + 1] - (double)ty;
    double dist = sqrt(dx * dx + dy * dy);
    double c = VC_INF_D;
    if (dist <= radius) {
        float d;
        if (binary) {
            int ones = 0;
            for (int w = 0; w < words; ++w) ones += __popc(d0[i * words + w] ^ d1[j * words + w]);
            d = (float)ones / (float)nbits;
        } else {
            const float* a = reinterpret_cast<const float*>(d0) + (size_t)i * words;
            const float* b = reinterpret_cast<const float*>(d1) + (size_t)j * words;
            float dot = 0.f;
            for (int w = 0; w < words; ++w) dot += a[w] * b[w];
            d = 0.5f * sqrtf(fminf(fmaxf(2.f - 2.f * dot, 0.f), 4.f));
        }
        c = (double)d + weight * dist / radius;
        if (c > max_pair) c = VC_INF_D;
    }
    cost[(size_t)i * m + j] = c;
}

__device__ float median_of(float* v, int k) {
    for (int a = 1; a < k; ++a) {  // insertion sort of k <= KMAX values
        float x = v[a];
        int b = a - 1;
        while (b >= 0 && v[b] > x) {
            v[b + 1] = v[b];
            --b;
        }
        v[b + 1] = x;
    }
    return (k & 1) ? v[k / 2] : 0.5f * (v[k / 2 - 1] + v[k / 2]);
}

// the k nearest sources of (qx, qy) by (distance, index), found by one warp: each
// lane keeps the k nearest of the sources lane, lane + 32, ... (in index order, so a
// tie keeps the lower index), then k rounds of a warp minimum over the lanes' next
// candidates merge them. Every lane gets the indices in order in best_i.
__device__ void knn_search_warp(float qx, float qy, const float* __restrict__ src, int ns,
                                int k, int lane, int* best_i) {
    float bd[KMAX];
    int bi[KMAX];
    for (int t = 0; t < k; ++t) {
        bd[t] = VC_INF_F;
        bi[t] = 0x7fffffff;
    }
    for (int s = lane; s < ns; s += 32) {
        const float2 p = reinterpret_cast<const float2*>(src)[s];
        const float dx = p.x - qx, dy = p.y - qy;
        knn_insert(dx * dx + dy * dy, s, bd, bi, k);
    }
    int head = 0;
    for (int t = 0; t < k; ++t) {
        float d = head < k ? bd[head] : VC_INF_F;
        int i = head < k ? bi[head] : 0x7fffffff;
        const float md = d;
        const int mi = i;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            const float od = __shfl_xor_sync(0xffffffffu, d, off);
            const int oi = __shfl_xor_sync(0xffffffffu, i, off);
            if (od < d || (od == d && oi < i)) {
                d = od;
                i = oi;
            }
        }
        if (md == d && mi == i && head < k) ++head;  // this lane's candidate won
        best_i[t] = i;
    }
}

extern "C" __global__ void knn_median(const float* __restrict__ queries, int nq,
                                      const float* __restrict__ src,
                                      const float* __restrict__ vec, int ns, int k,
                                      float* __restrict__ out) {
    // one warp per query
    const int q = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5);
    const int lane = threadIdx.x & 31;
    if (q >= nq) return;  // whole warps leave together
    int best_i[KMAX];
    knn_search_warp(queries[2 * q], queries[2 * q + 1], src, ns, k, lane, best_i);
    if (lane > 1) return;
    float v[KMAX];
    for (int t = 0; t < k; ++t) v[t] = vec[2 * best_i[t] + lane];
    out[2 * q + lane] = median_of(v, k);  // lane 0: x, lane 1: y
}

extern "C" __global__ void knn_interpolate(const float* __restrict__ src,
                                           const float* __restrict__ vec,
                                           const float* __restrict__ src_colour, int ns,
                                           const float* __restrict__ grid_colour,
                                           int gw, int gh, int channels, float step,
                                           float offset, int k, float inv_colour_var,
                                           float* __restrict__ out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    bool active = x < gw && y < gh;
    float best_d[KMAX];
    int best_i[KMAX];
    knn_search(step * x + offset, step * y + offset, active, src, ns, k, best_d, best_i);
    if (!active) return;
    const float* pc = grid_colour + ((size_t)y * gw + x) * channels;
    float scale = sqrtf(best_d[0]) + 10.f;
    float su = 0.f, sv = 0.f, sw = 0.f;
    for (int t = 0; t < k; ++t) {
        int s = best_i[t];
        float dn = sqrtf(best_d[t]) / scale;
        float dc = 0.f;
        for (int c = 0; c < channels; ++c) {
            float e = src_colour[s * channels + c] - pc[c];
            dc += e * e;
        }
        float wgt = expf(-0.5f * dn * dn - 0.5f * dc * inv_colour_var) + 1e-12f;
        su += wgt * vec[2 * s];
        sv += wgt * vec[2 * s + 1];
        sw += wgt;
    }
    out[2 * ((size_t)y * gw + x)] = su / sw;
    out[2 * ((size_t)y * gw + x) + 1] = sv / sw;
}

// ------------------------------------------------------------------ cost stacks
// A pass's batched problem: G groups of features of frame 0, problem g of shape
// n_max x (m_max + n_max), row slot = rank of the feature in its group, column slot =
// rank of the frame-1 feature among those its group's pairs reach, then a dummy
// column per row (cost max_cost for a real row, 0 for a padding row).
//   stack_taken     one thread per pair of the dense (n, m) costs of flow_pair_costs:
//                   marks, per group, the frame-1 features its pairs reach
//   slot_ids        one thread per (g, j) of the (G, m) slot table: the frame-1
//                   feature of every column slot (col_ids, (G, m_max))
//   stack_gather    one thread per element of the stack: the pair's cost (inf where
//                   there is none), or the dummy diagonal
// The matches of the solved stack (one thread per assigned row of every problem):
//   match_best      a row holding a real column proposes (frame-0 feature, frame-1
//                   feature, cost); the cheapest proposal per frame-1 feature is kept
//                   (atomicMin on the bits of the nonnegative double cost) ...
//   match_first     ... the first of equally cheap ones (atomicMin on the position)
//   match_write     col_of[i] = j and cost_of[i] = cost for the kept proposals

extern "C" __global__ void slot_ids(const int* __restrict__ taken,
                                    const long long* __restrict__ slot, int G, int m,
                                    int m_max, long long* __restrict__ col_ids) {
    size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (k >= (size_t)G * m || !taken[k]) return;
    int g = (int)(k / m), j = (int)(k % m);
    col_ids[(size_t)g * m_max + slot[k]] = j;
}

extern "C" __global__ void stack_taken(const double* __restrict__ cost, int n, int m,
                                       const long long* __restrict__ gid,
                                       int* __restrict__ taken) {
    size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (k >= (size_t)n * m) return;
    if (isfinite(cost[k])) taken[gid[k / m] * (size_t)m + k % m] = 1;
}

extern "C" __global__ void stack_gather(const double* __restrict__ cost, int m,
                                        const long long* __restrict__ row_ids,
                                        const long long* __restrict__ col_ids,
                                        const long long* __restrict__ nrows, int G,
                                        int n_max, int m_max, double max_cost,
                                        double* __restrict__ stack) {
    size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t N = (size_t)m_max + n_max;
    if (k >= (size_t)G * n_max * N) return;
    int col = (int)(k % N);
    int row = (int)((k / N) % n_max);
    int g = (int)(k / (N * n_max));
    double v = VC_INF_D;
    if (col < m_max) {
        long long i = row_ids[(size_t)g * n_max + row];
        long long j = col_ids[(size_t)g * m_max + col];
        if (i >= 0 && j >= 0) v = cost[i * (size_t)m + j];
    } else if (col == m_max + row) {
        v = row < nrows[g] ? max_cost : 0.0;
    }
    stack[k] = v;
}

__device__ __forceinline__ bool proposal(const double* __restrict__ stack,
                                         const long long* __restrict__ r,
                                         const long long* __restrict__ c, int e, int k,
                                         int n_max, int N,
                                         const long long* __restrict__ row_ids,
                                         const long long* __restrict__ col_ids,
                                         const long long* __restrict__ ncols,
                                         int m_max, long long* i, long long* j,
                                         double* cost) {
    int g = e / k;
    long long rr = r[e], cc = c[e];
    if (rr < 0 || rr >= n_max || cc < 0 || cc >= ncols[g]) return false;
    *i = row_ids[(size_t)g * n_max + rr];
    if (*i < 0) return false;
    *j = col_ids[(size_t)g * m_max + cc];
    *cost = stack[((size_t)g * n_max + rr) * N + cc];
    return isfinite(*cost);  // a forbidden pair is never a match
}

#define PROPOSAL_ARGS                                                              \
    const double *__restrict__ stack, const long long *__restrict__ r,            \
        const long long *__restrict__ c, int total, int k, int n_max, int N,       \
        const long long *__restrict__ row_ids, const long long *__restrict__ col_ids, \
        const long long *__restrict__ ncols, int m_max
#define PROPOSAL                                                                    \
    int e = blockIdx.x * blockDim.x + threadIdx.x;                                  \
    if (e >= total) return;                                                         \
    long long i, j;                                                                 \
    double cost;                                                                    \
    if (!proposal(stack, r, c, e, k, n_max, N, row_ids, col_ids, ncols, m_max, &i, \
                  &j, &cost))                                                       \
        return;

extern "C" __global__ void match_best(PROPOSAL_ARGS,
                                      unsigned long long* __restrict__ best) {
    PROPOSAL
    atomicMin(best + j, (unsigned long long)__double_as_longlong(cost));
}

extern "C" __global__ void match_first(PROPOSAL_ARGS,
                                       const unsigned long long* __restrict__ best,
                                       int* __restrict__ first) {
    PROPOSAL
    if ((unsigned long long)__double_as_longlong(cost) == best[j]) atomicMin(first + j, e);
}

extern "C" __global__ void match_write(PROPOSAL_ARGS,
                                       const int* __restrict__ first,
                                       long long* __restrict__ col_of,
                                       double* __restrict__ cost_of) {
    PROPOSAL
    if (first[j] == e) {
        col_of[i] = j;
        cost_of[i] = cost;
    }
}

// ------------------------------------------------------------------ Lucas-Kanade
// Single-level Lucas-Kanade tracking (Bouguet's iteration, as cv2.calcOpticalFlowPyrLK
// at maxLevel 0), in floating point:
//   scharr          one thread per pixel and channel: the Scharr derivatives of a
//                   uint8 (h, w, C) frame divided by 32 (grey levels per pixel),
//                   borders reflected (101)
//   lk_track        one warp per point: the window (2 half + 1)^2 around the point in
//                   frame I, sampled bilinearly with its derivatives, is matched in
//                   frame J from the initial guess; every lane holds up to LK_PER_LANE
//                   window pixels and the sums are warp reductions. A point fails
//                   (status 0) when its window's smaller gradient eigenvalue per pixel,
//                   divided by 1024 as OpenCV scales it, is below min_eig, when the
//                   system is singular, or when it leaves the frame; iterations stop at
//                   max_iter, at a step of at most eps, or on an oscillation (a step
//                   undoing the previous one: half of it is taken back).
#ifndef LK_CMAX
#define LK_CMAX 3
#endif
#define LK_PER_LANE 8  // windows up to 15 x 15

__device__ __forceinline__ int reflect101(int v, int n) {
    if (n == 1) return 0;
    while (v < 0 || v >= n) v = v < 0 ? -v : 2 * n - 2 - v;
    return v;
}

extern "C" __global__ void scharr(const unsigned char* __restrict__ img, int h, int w,
                                  int C, float* __restrict__ dx,
                                  float* __restrict__ dy) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int xm = reflect101(x - 1, w), xp = reflect101(x + 1, w);
    int ym = reflect101(y - 1, h), yp = reflect101(y + 1, h);
    for (int c = 0; c < C; ++c) {
#define AT(yy, xx) (float)img[((yy) * w + (xx)) * C + c]
        float gx = 3.f * (AT(ym, xp) - AT(ym, xm)) + 10.f * (AT(y, xp) - AT(y, xm)) +
                   3.f * (AT(yp, xp) - AT(yp, xm));
        float gy = 3.f * (AT(yp, xm) - AT(ym, xm)) + 10.f * (AT(yp, x) - AT(ym, x)) +
                   3.f * (AT(yp, xp) - AT(ym, xp));
#undef AT
        dx[(y * w + x) * C + c] = gx / 32.f;
        dy[(y * w + x) * C + c] = gy / 32.f;
    }
}

template <typename T>
__device__ __forceinline__ void sample(const T* __restrict__ a, int h, int w, int C,
                                       float x, float y, float* out) {
    x = fminf(fmaxf(x, 0.f), (float)(w - 1));
    y = fminf(fmaxf(y, 0.f), (float)(h - 1));
    int x0 = (int)floorf(x), y0 = (int)floorf(y);
    int x1 = min(x0 + 1, w - 1), y1 = min(y0 + 1, h - 1);
    float fx = x - x0, fy = y - y0;
    float w00 = (1.f - fx) * (1.f - fy), w01 = fx * (1.f - fy);
    float w10 = (1.f - fx) * fy, w11 = fx * fy;
    for (int c = 0; c < C; ++c)
        out[c] = w00 * (float)a[(y0 * w + x0) * C + c] + w01 * (float)a[(y0 * w + x1) * C + c] +
                 w10 * (float)a[(y1 * w + x0) * C + c] + w11 * (float)a[(y1 * w + x1) * C + c];
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void lk_track(const unsigned char* __restrict__ I,
                                    const unsigned char* __restrict__ J,
                                    const float* __restrict__ Ix,
                                    const float* __restrict__ Iy, int h, int w, int C,
                                    const float* __restrict__ pts,
                                    const float* __restrict__ guess, int n, int half,
                                    int max_iter, float eps, float min_eig,
                                    float* __restrict__ out, int* __restrict__ status) {
    int pt = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (pt >= n) return;  // whole warps leave together
    int win = 2 * half + 1, area = win * win;
    float ox = pts[2 * pt] - half, oy = pts[2 * pt + 1] - half;
    float iv[LK_PER_LANE][LK_CMAX], gx[LK_PER_LANE][LK_CMAX], gy[LK_PER_LANE][LK_CMAX];
    float a11 = 0.f, a12 = 0.f, a22 = 0.f;
#pragma unroll
    for (int t = 0; t < LK_PER_LANE; ++t) {
        int k = lane + 32 * t;
        if (k >= area) continue;
        float x = ox + k % win, y = oy + k / win;
        sample(I, h, w, C, x, y, iv[t]);
        sample(Ix, h, w, C, x, y, gx[t]);
        sample(Iy, h, w, C, x, y, gy[t]);
        for (int c = 0; c < C; ++c) {
            a11 += gx[t][c] * gx[t][c];
            a12 += gx[t][c] * gy[t][c];
            a22 += gy[t][c] * gy[t][c];
        }
    }
    a11 = warp_sum(a11) / 1024.f;
    a12 = warp_sum(a12) / 1024.f;
    a22 = warp_sum(a22) / 1024.f;
    float det = a11 * a22 - a12 * a12;
    float lmin = (a22 + a11 - sqrtf((a11 - a22) * (a11 - a22) + 4.f * a12 * a12)) /
                 (2.f * area);
    float nx = guess[2 * pt] - half, ny = guess[2 * pt + 1] - half;
    int ok = !(lmin < min_eig || det < 1.1920929e-07f);
    float pdx = 0.f, pdy = 0.f;
    for (int it = 0; ok && it < max_iter; ++it) {
        if (nx < -win || nx >= w || ny < -win || ny >= h) {
            ok = 0;
            break;
        }
        float b1 = 0.f, b2 = 0.f;
#pragma unroll
        for (int t = 0; t < LK_PER_LANE; ++t) {
            int k = lane + 32 * t;
            if (k >= area) continue;
            float jv[LK_CMAX];
            sample(J, h, w, C, nx + k % win, ny + k / win, jv);
            for (int c = 0; c < C; ++c) {
                float d = jv[c] - iv[t][c];
                b1 += d * gx[t][c];
                b2 += d * gy[t][c];
            }
        }
        b1 = warp_sum(b1) / 1024.f;
        b2 = warp_sum(b2) / 1024.f;
        float ddx = (a12 * b2 - a22 * b1) / det, ddy = (a12 * b1 - a11 * b2) / det;
        nx += ddx;
        ny += ddy;
        if (ddx * ddx + ddy * ddy <= eps * eps) break;
        if (it > 0 && fabsf(ddx + pdx) < 0.01f && fabsf(ddy + pdy) < 0.01f) {
            nx -= 0.5f * ddx;
            ny -= 0.5f * ddy;
            break;
        }
        pdx = ddx;
        pdy = ddy;
    }
    if (lane == 0) {
        out[2 * pt] = nx + half;
        out[2 * pt + 1] = ny + half;
        status[pt] = ok;
    }
}
