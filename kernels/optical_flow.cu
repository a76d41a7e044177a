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
//                     double precision.
//   knn_median        one thread per query: the median (of each component) of the
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

__device__ void knn_search(float qx, float qy, const float* __restrict__ src, int ns,
                           int k, float* best_d, int* best_i) {
    for (int t = 0; t < k; ++t) {
        best_d[t] = VC_INF_F;
        best_i[t] = -1;
    }
    for (int s = 0; s < ns; ++s) {
        float dx = src[2 * s] - qx, dy = src[2 * s + 1] - qy;
        knn_insert(dx * dx + dy * dy, s, best_d, best_i, k);
    }
}

extern "C" __global__ void flow_pair_costs(const float* __restrict__ p0,
                                           const float* __restrict__ pred,
                                           const float* __restrict__ p1,
                                           const unsigned int* __restrict__ d0,
                                           const unsigned int* __restrict__ d1, int n,
                                           int m, int words, int binary, int nbits,
                                           double radius,
                                           double weight, double* __restrict__ cost) {
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

extern "C" __global__ void knn_median(const float* __restrict__ queries, int nq,
                                      const float* __restrict__ src,
                                      const float* __restrict__ vec, int ns, int k,
                                      float* __restrict__ out) {
    int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= nq) return;
    float best_d[KMAX];
    int best_i[KMAX];
    knn_search(queries[2 * q], queries[2 * q + 1], src, ns, k, best_d, best_i);
    float v[KMAX];
    for (int c = 0; c < 2; ++c) {
        for (int t = 0; t < k; ++t) v[t] = vec[2 * best_i[t] + c];
        out[2 * q + c] = median_of(v, k);
    }
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
    if (x >= gw || y >= gh) return;
    float best_d[KMAX];
    int best_i[KMAX];
    knn_search(step * x + offset, step * y + offset, src, ns, k, best_d, best_i);
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
