// grabcut.cu: the per-pixel colour-model work of GrabCut on the GPU.
//
// vision_cuts/segmentation.py calls gmm_pixel once per iteration: for every pixel and
// for both colour models (0 = foreground, 1 = background) it gives the most likely
// Gaussian (the hard assignment of the next refit) and the negative log-likelihood of
// the whole mixture (the unary cost of the cut), in one pass over the image.
//
// Models: K full-covariance Gaussians each (K <= KMAX); float64 parameters
//   weights (2, K), means (2, K, 3), covariances (2, K, 3, 3), C order.
// A component of weight 0 (no pixels) has log-likelihood -infinity; a model with
// none left gives -log(0) = +infinity.
//
// The window kernels (gc_window_weights, gc_window_costs, gc_apply_cut) build the graph
// of one cut from the whole picture's arrays and write its labels back: the graph is
// the bounding box of the free pixels (rows r0 .. r0 + h - 1, columns c0 .. c0 + w - 1).
// Being kernels of their own, they have one compiled form whatever the box: the same
// work done by CuPy on views of the box compiles a new kernel wherever the box spans
// the picture's full width (the view collapses to fewer dimensions).
//
// Compile check: nvcc --ptx -arch=sm_80 -std=c++17 grabcut.cu

#ifndef KMAX
#define KMAX 32
#endif

#define VC_LOG_2PI 1.8378770664093453
#define VC_INF_F __int_as_float(0x7f800000)  // +infinity (NVRTC has no math.h)

extern "C" __global__ void gmm_pixel(
    const float* __restrict__ xs,       // (n, 3) colours
    const double* __restrict__ weights,  // (2, K)
    const double* __restrict__ means,    // (2, K, 3)
    const double* __restrict__ covs,     // (2, K, 3, 3)
    const int k,
    const long long n,
    unsigned char* __restrict__ comp,    // (2, n) most likely component
    float* __restrict__ nll)             // (2, n) -log sum_j w_j N(x | mu_j, S_j)
{
    __shared__ float s_inv[2 * KMAX][6];  // inverse covariance: 00 01 02 11 12 22
    __shared__ float s_mu[2 * KMAX][3];
    __shared__ float s_c[2 * KMAX];  // log w - log det(S) / 2 - 3 log(2 pi) / 2
    for (int j = threadIdx.x; j < 2 * k; j += blockDim.x) {
        const double* c = covs + 9 * j;
        const double a = c[0], b = c[1], d = c[2], e = c[4], f = c[5], g = c[8];
        // cofactors of the symmetric [[a b d] [b e f] [d f g]]
        const double c00 = e * g - f * f, c01 = d * f - b * g, c02 = b * f - d * e;
        const double c11 = a * g - d * d, c12 = b * d - a * f, c22 = a * e - b * b;
        const double det = a * c00 + b * c01 + d * c02;
        s_inv[j][0] = (float)(c00 / det);
        s_inv[j][1] = (float)(c01 / det);
        s_inv[j][2] = (float)(c02 / det);
        s_inv[j][3] = (float)(c11 / det);
        s_inv[j][4] = (float)(c12 / det);
        s_inv[j][5] = (float)(c22 / det);
        s_mu[j][0] = (float)means[3 * j];
        s_mu[j][1] = (float)means[3 * j + 1];
        s_mu[j][2] = (float)means[3 * j + 2];
        const double w = weights[j];
        s_c[j] = (w > 0.0 && det > 0.0)
                     ? (float)(log(w) - 0.5 * log(det) - 1.5 * VC_LOG_2PI)
                     : -VC_INF_F;
    }
    __syncthreads();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float x0 = xs[3 * i], x1 = xs[3 * i + 1], x2 = xs[3 * i + 2];
        for (int m = 0; m < 2; ++m) {
            float best = -VC_INF_F, top = -VC_INF_F, sum = 0.0f;
            int arg = 0;
            for (int j = m * k; j < (m + 1) * k; ++j) {
                const float cj = s_c[j];
                if (cj == -VC_INF_F) continue;
                const float* v = s_inv[j];
                const float d0 = x0 - s_mu[j][0], d1 = x1 - s_mu[j][1],
                            d2 = x2 - s_mu[j][2];
                const float maha = d0 * (v[0] * d0 + 2.0f * v[1] * d1 + 2.0f * v[2] * d2)
                                   + d1 * (v[3] * d1 + 2.0f * v[4] * d2)
                                   + v[5] * d2 * d2;
                const float ll = cj - 0.5f * maha;
                if (ll > best) {
                    best = ll;
                    arg = j - m * k;
                }
                // running log-sum-exp
                if (ll > top) {
                    sum = sum * expf(top - ll) + 1.0f;
                    top = ll;
                } else {
                    sum += expf(ll - top);
                }
            }
            comp[m * n + i] = (unsigned char)arg;
            nll[m * n + i] = sum > 0.0f ? -(top + logf(sum)) : VC_INF_F;
        }
    }
}

// Warp-aggregated atomic add of a 64-bit value (every lane of the warp calls it).
__device__ __forceinline__ void vc_warp_add(unsigned long long* acc, long long v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) == 0 && v != 0) atomicAdd(acc, (unsigned long long)v);
}

// The window's smoothness weights, planes +x and +y: out (2, h, w) from the picture's
// (2, rows, cols), with the arcs that leave the window (+x of its last column, +y of
// its last row) zero.
extern "C" __global__ void gc_window_weights(
    const int* __restrict__ weights, const int rows, const int cols, const int r0,
    const int c0, const int h, const int w, const int dirs, int* __restrict__ out)
{
    // dirs: 2 (+x, +y) or 4 (and +x+y, -x+y: vision_cuts/grid.py's order)
    const long long hw = (long long)h * w;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < dirs * hw;
         i += (long long)gridDim.x * blockDim.x) {
        const int plane = (int)(i / hw);
        const long long q = i - plane * hw;
        const int y = (int)(q / w), x = (int)(q - (long long)y * w);
        const int dx = plane == 1 ? 0 : (plane == 3 ? -1 : 1);
        const int dy = plane == 0 ? 0 : 1;
        const bool leaves = x + dx < 0 || x + dx >= w || y + dy >= h;
        out[i] = leaves ? 0
                        : weights[(long long)plane * rows * cols
                                  + (long long)(r0 + y) * cols + (c0 + x)];
    }
}

// The terminal capacities of one cut. Per pixel of the window, with the costs
// c_fg = rint(min(nll_fg, 1e6) * scale), c_bg likewise (nll: (2, rows * cols), 0 the
// foreground model, 1 the background model) and the trimap t (0 free, 1 fixed
// background, 2 fixed foreground):
//   u0 (label 0, background) = t == 1 ? 0 : t == 2 ? big : c_bg
//   u1 (label 1, foreground) = t == 1 ? big : t == 2 ? 0 : c_fg
// src = u1 - min(u0, u1), snk = u0 - min(u0, u1), and acc[0] += min(u0, u1) (the
// energy's constant). A cost that is not a number counts as 1e6 nats.
extern "C" __global__ void gc_window_costs(
    const float* __restrict__ nll, const unsigned char* __restrict__ trimap,
    const int rows, const int cols, const int r0, const int c0, const int h,
    const int w, const float scale, const int big, int* __restrict__ src,
    int* __restrict__ snk, unsigned long long* __restrict__ acc)
{
    const long long hw = (long long)h * w, n = (long long)rows * cols;
    const long long stride = (long long)gridDim.x * blockDim.x;
    // every lane runs the same number of loop trips (the warp sum needs all 32)
    const long long start = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long trips = (hw + stride - 1) / stride;
    for (long long t = 0; t < trips; ++t) {
        const long long i = start + t * stride;
        long long low = 0;
        if (i < hw) {
            const int y = (int)(i / w), x = (int)(i - (long long)y * w);
            const long long p = (long long)(r0 + y) * cols + (c0 + x);
            const unsigned char tri = trimap[p];
            const float fg = nll[p], bg = nll[n + p];
            // fminf returns the number when the other operand is NaN
            const int cfg = (int)rintf(fminf(fg, 1e6f) * scale);
            const int cbg = (int)rintf(fminf(bg, 1e6f) * scale);
            const int u0 = tri == 1 ? 0 : (tri == 2 ? big : cbg);
            const int u1 = tri == 1 ? big : (tri == 2 ? 0 : cfg);
            const int m = u0 < u1 ? u0 : u1;
            src[i] = u1 - m;
            snk[i] = u0 - m;
            low = m;
        }
        vc_warp_add(acc, low);
    }
}

// Write one cut's labels (h, w; 1 = foreground) into the picture's labels (bool) and
// count acc[1] += pixels changed, acc[2] += foreground pixels gained (negative: lost).
extern "C" __global__ void gc_apply_cut(
    unsigned char* __restrict__ labels, const unsigned char* __restrict__ cut,
    const int cols, const int r0, const int c0, const int h, const int w,
    unsigned long long* __restrict__ acc)
{
    const long long hw = (long long)h * w;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long start = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long trips = (hw + stride - 1) / stride;
    for (long long t = 0; t < trips; ++t) {
        const long long i = start + t * stride;
        long long changed = 0, gained = 0;
        if (i < hw) {
            const int y = (int)(i / w), x = (int)(i - (long long)y * w);
            const long long p = (long long)(r0 + y) * cols + (c0 + x);
            const unsigned char now = cut[i] != 0, was = labels[p] != 0;
            labels[p] = now;
            changed = now != was;
            gained = (long long)now - (long long)was;
        }
        vc_warp_add(acc + 1, changed);
        vc_warp_add(acc + 2, gained);
    }
}
