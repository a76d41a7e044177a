// variational_flow.cu: variational refinement of a flow field on the device, and the
// dense stages around it (resizing a flow field, warping errors).
//
// Python caller: vision_cuts/_optical_flow_gpu.py (`variational`, `resize_flow`,
// `fuse`).
//
// The refinement minimises, from an initial flow W = (u, v) and for an increment
// dW = (du, dv), the energy of Brox et al. (2004) as OpenCV's VariationalRefinement
// discretises it: a colour-constancy term (weight delta) and a gradient-constancy term
// (weight gamma), each linearised around W and normalised by the local gradient
// magnitude, plus a smoothness term (weight alpha) on the total flow W + dW; every
// term is robust (Psi(s^2) = sqrt(s^2 + eps^2)). Fixed-point iterations freeze the
// robust weights and solve the linear system by red-black successive over-relaxation.
// Images are grey float32 (0..255); derivatives are central differences ([-1 0 1],
// borders replicated) of the average of frame 0 and the warped frame 1 (first order)
// and of the first-order ones (second order); smoothness edges join 4-neighbours inside
// the image, each weighted by the robust weight of its left / upper pixel.
//
// Kernels (one thread per pixel, blockDim 32 x 8; images h x w, row-major):
//   vr_warp_average   warped = frame 1 sampled at x + W (bilinear, borders replicated);
//                     avg = (I0 + warped) / 2, iz = warped - I0
//   vr_first_order    ix, iy (of avg), ixz, iyz (of iz)
//   vr_second_order   ixx, ixy (of ix), iyy (of iy)
//   vr_terms          the data terms of the system (a11, a12, a22, b1, b2) at the
//                     current dW, and the smoothness weight of every pixel (from
//                     W + dW, forward differences)
//   vr_smoothness     adds the smoothness edges to a11, a22, b1, b2
//   vr_sor            one red (parity 0) or black (parity 1) sweep of over-relaxation
//   vr_add            flow = W + dW (interleaved u, v)
//   flow_resize       bilinear resize of an interleaved flow field (OpenCV's
//                     INTER_LINEAR sample positions), times `scale`
//   warp_error        |frame 1 at x + flow - frame 0| summed over the channels
//                     (uint8 frames, bilinear, borders replicated)

__device__ __forceinline__ int clampi(int v, int lo, int hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

__device__ __forceinline__ float bilinear(const float* __restrict__ img, int h, int w,
                                          float x, float y) {
    x = fminf(fmaxf(x, 0.f), (float)(w - 1));
    y = fminf(fmaxf(y, 0.f), (float)(h - 1));
    int x0 = (int)floorf(x), y0 = (int)floorf(y);
    int x1 = min(x0 + 1, w - 1), y1 = min(y0 + 1, h - 1);
    float fx = x - x0, fy = y - y0;
    float top = img[y0 * w + x0] * (1.f - fx) + img[y0 * w + x1] * fx;
    float bot = img[y1 * w + x0] * (1.f - fx) + img[y1 * w + x1] * fx;
    return top * (1.f - fy) + bot * fy;
}

#define PIXEL                                           \
    int x = blockIdx.x * blockDim.x + threadIdx.x;      \
    int y = blockIdx.y * blockDim.y + threadIdx.y;      \
    if (x >= w || y >= h) return;                       \
    int p = y * w + x;

extern "C" __global__ void vr_warp_average(const float* __restrict__ i0,
                                           const float* __restrict__ i1,
                                           const float* __restrict__ flow, int h, int w,
                                           float* __restrict__ avg,
                                           float* __restrict__ iz) {
    PIXEL
    float warped = bilinear(i1, h, w, x + flow[2 * p], y + flow[2 * p + 1]);
    avg[p] = 0.5f * (i0[p] + warped);
    iz[p] = warped - i0[p];
}

__device__ __forceinline__ float dx_of(const float* __restrict__ a, int h, int w, int x,
                                       int y) {
    return a[y * w + min(x + 1, w - 1)] - a[y * w + max(x - 1, 0)];
}

__device__ __forceinline__ float dy_of(const float* __restrict__ a, int h, int w, int x,
                                       int y) {
    return a[min(y + 1, h - 1) * w + x] - a[max(y - 1, 0) * w + x];
}

extern "C" __global__ void vr_first_order(const float* __restrict__ avg,
                                          const float* __restrict__ iz, int h, int w,
                                          float* __restrict__ ix, float* __restrict__ iy,
                                          float* __restrict__ ixz,
                                          float* __restrict__ iyz) {
    PIXEL
    ix[p] = dx_of(avg, h, w, x, y);
    iy[p] = dy_of(avg, h, w, x, y);
    ixz[p] = dx_of(iz, h, w, x, y);
    iyz[p] = dy_of(iz, h, w, x, y);
}

extern "C" __global__ void vr_second_order(const float* __restrict__ ix,
                                           const float* __restrict__ iy, int h, int w,
                                           float* __restrict__ ixx,
                                           float* __restrict__ ixy,
                                           float* __restrict__ iyy) {
    PIXEL
    ixx[p] = dx_of(ix, h, w, x, y);
    ixy[p] = dy_of(ix, h, w, x, y);
    iyy[p] = dy_of(iy, h, w, x, y);
}

// derivative planes, in this order, of one (h, w) float32 array of 8 planes
enum { IX, IY, IZ, IXX, IXY, IYY, IXZ, IYZ };
// system planes: a11, a12, a22, b1, b2, smoothness weight
enum { A11, A12, A22, B1, B2, WS };

extern "C" __global__ void vr_terms(const float* __restrict__ d,
                                    const float* __restrict__ flow,
                                    const float* __restrict__ du,
                                    const float* __restrict__ dv, int h, int w,
                                    float alpha, float gamma, float delta, float zeta,
                                    float eps, float* __restrict__ sys) {
    PIXEL
    size_t n = (size_t)h * w;
    float z2 = zeta * zeta, e2 = eps * eps;
    float Ix = d[IX * n + p], Iy = d[IY * n + p], Iz = d[IZ * n + p];
    float u = du[p], v = dv[p];
    // colour constancy
    float norm = Ix * Ix + Iy * Iy + z2;
    float r = Iz + Ix * u + Iy * v;
    float wc = (0.5f * delta / sqrtf(r * r / norm + e2)) / norm;
    float a11 = wc * Ix * Ix + z2, a12 = wc * Ix * Iy, a22 = wc * Iy * Iy + z2;
    float b1 = -wc * Iz * Ix, b2 = -wc * Iz * Iy;
    // gradient constancy
    float Ixx = d[IXX * n + p], Ixy = d[IXY * n + p], Iyy = d[IYY * n + p];
    float Ixz = d[IXZ * n + p], Iyz = d[IYZ * n + p];
    float n1 = Ixx * Ixx + Ixy * Ixy + z2, n2 = Iyy * Iyy + Ixy * Ixy + z2;
    float rx = Ixz + Ixx * u + Ixy * v, ry = Iyz + Ixy * u + Iyy * v;
    float wg = 0.5f * gamma / sqrtf(rx * rx / n1 + ry * ry / n2 + e2);
    a11 += wg * (Ixx * Ixx / n1 + Ixy * Ixy / n2);
    a12 += wg * (Ixx * Ixy / n1 + Ixy * Iyy / n2);
    a22 += wg * (Ixy * Ixy / n1 + Iyy * Iyy / n2);
    b1 -= wg * (Ixx * Ixz / n1 + Ixy * Iyz / n2);
    b2 -= wg * (Ixy * Ixz / n1 + Iyy * Iyz / n2);
    sys[A11 * n + p] = a11;
    sys[A12 * n + p] = a12;
    sys[A22 * n + p] = a22;
    sys[B1 * n + p] = b1;
    sys[B2 * n + p] = b2;
    // smoothness weight of the total flow W + dW (forward differences, zero at the
    // far borders)
    int px = y * w + min(x + 1, w - 1), py = min(y + 1, h - 1) * w + x;
    float cu = flow[2 * p] + u, cv = flow[2 * p + 1] + v;
    float ux = flow[2 * px] + du[px] - cu, vx = flow[2 * px + 1] + dv[px] - cv;
    float uy = flow[2 * py] + du[py] - cu, vy = flow[2 * py + 1] + dv[py] - cv;
    sys[WS * n + p] = 0.5f * alpha / sqrtf(ux * ux + vx * vx + uy * uy + vy * vy + e2);
}

extern "C" __global__ void vr_smoothness(const float* __restrict__ flow, int h, int w,
                                         float* __restrict__ sys) {
    PIXEL
    size_t n = (size_t)h * w;
    const float* ws = sys + WS * n;
    float u = flow[2 * p], v = flow[2 * p + 1];
    float a = 0.f, b1 = 0.f, b2 = 0.f;
    // edge (p, q) weighted by the weight of its left / upper pixel
    if (x + 1 < w) {
        int q = p + 1;
        a += ws[p];
        b1 += ws[p] * (flow[2 * q] - u);
        b2 += ws[p] * (flow[2 * q + 1] - v);
    }
    if (x > 0) {
        int q = p - 1;
        a += ws[q];
        b1 += ws[q] * (flow[2 * q] - u);
        b2 += ws[q] * (flow[2 * q + 1] - v);
    }
    if (y + 1 < h) {
        int q = p + w;
        a += ws[p];
        b1 += ws[p] * (flow[2 * q] - u);
        b2 += ws[p] * (flow[2 * q + 1] - v);
    }
    if (y > 0) {
        int q = p - w;
        a += ws[q];
        b1 += ws[q] * (flow[2 * q] - u);
        b2 += ws[q] * (flow[2 * q + 1] - v);
    }
    sys[A11 * n + p] += a;
    sys[A22 * n + p] += a;
    sys[B1 * n + p] += b1;
    sys[B2 * n + p] += b2;
}

extern "C" __global__ void vr_sor(const float* __restrict__ sys, int h, int w,
                                  int parity, float omega, float* __restrict__ du,
                                  float* __restrict__ dv) {
    int xh = blockIdx.x * blockDim.x + threadIdx.x;  // every other pixel of a row
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int x = 2 * xh + ((y + parity) & 1);
    if (x >= w || y >= h) return;
    int p = y * w + x;
    size_t n = (size_t)h * w;
    const float* ws = sys + WS * n;
    float su = 0.f, sv = 0.f;
    if (x + 1 < w) {
        su += ws[p] * du[p + 1];
        sv += ws[p] * dv[p + 1];
    }
    if (x > 0) {
        su += ws[p - 1] * du[p - 1];
        sv += ws[p - 1] * dv[p - 1];
    }
    if (y + 1 < h) {
        su += ws[p] * du[p + w];
        sv += ws[p] * dv[p + w];
    }
    if (y > 0) {
        su += ws[p - w] * du[p - w];
        sv += ws[p - w] * dv[p - w];
    }
    float a12 = sys[A12 * n + p];
    float u = du[p], v = dv[p];
    u += omega * ((su + sys[B1 * n + p] - v * a12) / sys[A11 * n + p] - u);
    v += omega * ((sv + sys[B2 * n + p] - u * a12) / sys[A22 * n + p] - v);
    du[p] = u;
    dv[p] = v;
}

extern "C" __global__ void vr_add(const float* __restrict__ flow,
                                  const float* __restrict__ du,
                                  const float* __restrict__ dv, int h, int w,
                                  float* __restrict__ out) {
    PIXEL
    out[2 * p] = flow[2 * p] + du[p];
    out[2 * p + 1] = flow[2 * p + 1] + dv[p];
}

extern "C" __global__ void flow_resize(const float* __restrict__ src, int sh, int sw,
                                       int h, int w, float scale,
                                       float* __restrict__ out) {
    PIXEL
    float sx = (x + 0.5f) * ((float)sw / w) - 0.5f;
    float sy = (y + 0.5f) * ((float)sh / h) - 0.5f;
    sx = fminf(fmaxf(sx, 0.f), (float)(sw - 1));
    sy = fminf(fmaxf(sy, 0.f), (float)(sh - 1));
    int x0 = (int)floorf(sx), y0 = (int)floorf(sy);
    int x1 = min(x0 + 1, sw - 1), y1 = min(y0 + 1, sh - 1);
    float fx = sx - x0, fy = sy - y0;
    for (int c = 0; c < 2; ++c) {
        float top = src[2 * (y0 * sw + x0) + c] * (1.f - fx) + src[2 * (y0 * sw + x1) + c] * fx;
        float bot = src[2 * (y1 * sw + x0) + c] * (1.f - fx) + src[2 * (y1 * sw + x1) + c] * fx;
        out[2 * p + c] = scale * (top * (1.f - fy) + bot * fy);
    }
}

extern "C" __global__ void warp_error(const unsigned char* __restrict__ f0,
                                      const unsigned char* __restrict__ f1,
                                      const float* __restrict__ flow, int h, int w,
                                      int channels, float* __restrict__ err) {
    PIXEL
    float sx = fminf(fmaxf(x + flow[2 * p], 0.f), (float)(w - 1));
    float sy = fminf(fmaxf(y + flow[2 * p + 1], 0.f), (float)(h - 1));
    int x0 = (int)floorf(sx), y0 = (int)floorf(sy);
    int x1 = min(x0 + 1, w - 1), y1 = min(y0 + 1, h - 1);
    float fx = sx - x0, fy = sy - y0;
    float e = 0.f;
    for (int c = 0; c < channels; ++c) {
        float top = f1[(y0 * w + x0) * channels + c] * (1.f - fx) + f1[(y0 * w + x1) * channels + c] * fx;
        float bot = f1[(y1 * w + x0) * channels + c] * (1.f - fx) + f1[(y1 * w + x1) * channels + c] * fx;
        e += fabsf(top * (1.f - fy) + bot * fy - (float)f0[p * channels + c]);
    }
    err[p] = e;
}
