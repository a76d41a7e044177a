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
