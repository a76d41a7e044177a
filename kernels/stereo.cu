// stereo.cu: the stereo front end's device work (vision_cuts/_stereo_gpu.py).
//
// Cost volume (stereo_cost_volume on the GPU):
//   stereo_census    one thread a pixel: census code of a (2R+1)^2 window of the grey
//                    image (channel mean), edge-clamped, bit = neighbour < centre.
//   stereo_raw_cost  one thread a (d, y, x): min(mean |L - R|, T) / T + census_weight
//                    * hamming / K against right (max(x - d, 0), y), as double.
//   stereo_box       one thread a (d, y, x): mean over a W x W window (edge-clamped,
//                    scipy.ndimage.uniform_filter's origin), rounded to float.
// Alpha-expansion moves (the loop stays on the device):
//   stereo_move      one thread a node of B stacked move graphs: grid (B * P, M, N)
//                    (P = 1 in 2-D), layer b is the expansion move of label alphas[b]
//                    from `labels`; writes source, sink (normalised to min(s, t) = 0)
//                    and the 2 ndim arc planes (+x, -x, +y, -y (+z, -z), C order; no
//                    arc between two layers). With `mirror` the mirrored graph
//                    (terminals exchanged, every arc reversed: the same cuts with the
//                    sides exchanged): the nodes that prefer their label hold sink
//                    capacity instead of excess; the source side takes alphas[b]
//                    (the caller cuts the smallest source side: the same move).
//   swap_move        the same for alpha-beta swap moves (minimize_labels): layer b
//                    swaps the labels alphas[b] and betas[b]; a node with either label
//                    takes alphas[b] on the sink side (x = 1) and betas[b] on the
//                    source side; the other nodes have no capacities (source side).
//                    This is the CPU swap's graph of (alphas[b], betas[b]) mirrored
//                    (terminals exchanged, arcs reversed), so the nodes that reach the
//                    sink here, which take alphas[b], are those the source reaches
//                    there: the CPU's cut, undecided nodes included.
//   stereo_energy    E(d) of the proposal d: where cut[b], alphas[b]; elsewhere
//                    betas[b] for a node labelled alphas[b] or betas[b] of a swap move
//                    (swap = 1), else labels; or of `labels` when use_cut = 0; block
//                    sums atomically added to *energy (int64).
//   stereo_accept    labels = that proposal, if *e_new < *e_cur.
//   stereo_commit    one thread: *e_cur = min(*e_cur, *e_new), *accepted += 1 where it
//                    dropped; *e_new = 0.
// The Ishikawa pyramid (stereo._window_cut on the device):
//   ishikawa_window  one thread a pixel p: the Ishikawa graph of the labels base[p] +
//                    r * step, r = 0 .. K-1 (K >= 2): the window costs (over the d in
//                    [l - step/2, l + step/2] within [0, D): slope_div 0, the rounded
//                    mean of cost[d]; slope_div > 0, the least of cost[d] + (W_p |d -
//                    l| + slope_div / 2) / slope_div, W_p the sum of p's pair weights;
//                    outside [0, D) the pixel's largest cost plus (step * its pair
//                    weights + 1) a step beyond), plus slope * r, slope = sum over the
//                    neighbours q whose base differs from p's by at least (K-1) step
//                    of w_pq * step * sign(base_p - base_q), minus the column's
//                    least; writes source
//                    (K-1, M, N), sink and the 6 arc planes (K-1, M, N) of every layer
//                    (pair arcs w_pq * step between neighbours with closer bases, +z the
//                    costs, -z `inf`), and adds the column's C[0] to bound[0] and
//                    its largest C to cmax[0] (atomically; the host checks both).
// The move and energy kernels also serve vision_cuts.minimize_labels on the device
// (2-D and 3-D grids, 4 / 6 neighbours, any metric V as a matrix).
// Layouts: images (M, N, C) float32 C order; codes (M, N) uint64; cost (D, P, M, N) C
// order; weights (ndim, P, M, N) int32 (plane 0 couples p with p + x, plane 1 with
// p + y, plane 2 with p + z); labels (P, M, N) int32; cut (B * P, M, N) uint8 (1 = sink
// side = take alphas[b]). Indices are int: Python checks that D * P * M * N and
// 2 ndim * B * P * M * N stay below 2**31.
// Smoothness kinds: 0 Potts [a != b], 1 truncated linear min(|a - b|, T), 2 linear,
// 3 the matrix vmat[a * nlab + b] (nlab labels).
// 1-D launches of any block size (stereo_energy: a multiple of 32, at most 1024).

extern "C" __global__ void stereo_census(const float* __restrict__ img,
                                         unsigned long long* __restrict__ code, int m,
                                         int n, int c, int radius) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m * n) return;
    int y = i / n, x = i - y * n;
    // grey = channel mean, summed in channel order and divided (as NumPy's float32 mean)
    float centre = 0.0f;
    for (int k = 0; k < c; ++k) centre += img[i * c + k];
    centre = centre / (float)c;
    unsigned long long bits = 0ull;
    int bit = 0;
    for (int dy = -radius; dy <= radius; ++dy) {
        int yy = min(max(y + dy, 0), m - 1);
        for (int dx = -radius; dx <= radius; ++dx) {
            if (dy == 0 && dx == 0) continue;
            int xx = min(max(x + dx, 0), n - 1);
            int j = yy * n + xx;
            float g = 0.0f;
            for (int k = 0; k < c; ++k) g += img[j * c + k];
            g = g / (float)c;
            if (g < centre) bits |= 1ull << bit;
            ++bit;
        }
    }
    code[i] = bits;
}

extern "C" __global__ void stereo_raw_cost(const float* __restrict__ left,
                                           const float* __restrict__ right,
                                           const unsigned long long* __restrict__ cl,
                                           const unsigned long long* __restrict__ cr,
                                           double* __restrict__ out, int ndisp, int m,
                                           int n, int c, float ad_trunc,
                                           double census_weight, int nbits) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int mn = m * n;
    if (i >= ndisp * mn) return;
    int d = i / mn;
    int p = i - d * mn;
    int y = p / n, x = p - y * n;
    int q = y * n + max(x - d, 0);
    float ad = 0.0f;
    for (int k = 0; k < c; ++k) ad += fabsf(left[p * c + k] - right[q * c + k]);
    ad = ad / (float)c;
    float colour = fminf(ad, ad_trunc) / ad_trunc;
    double v = (double)colour;
    if (census_weight != 0.0) {
        int ham = __popcll(cl[p] ^ cr[q]);
        v += census_weight * (double)ham / (double)nbits;
    }
    out[i] = v;
}

extern "C" __global__ void stereo_box(const double* __restrict__ in,
                                      float* __restrict__ out, int ndisp, int m, int n,
                                      int window) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int mn = m * n;
    if (i >= ndisp * mn) return;
    int d = i / mn;
    int p = i - d * mn;
    int y = p / n, x = p - y * n;
    int lo = -(window / 2), hi = window - 1 - window / 2;
    const double* plane = in + (long long)d * mn;
    double s = 0.0;
    for (int dy = lo; dy <= hi; ++dy) {
        int yy = min(max(y + dy, 0), m - 1);
        for (int dx = lo; dx <= hi; ++dx) {
            int xx = min(max(x + dx, 0), n - 1);
            s += plane[yy * n + xx];
        }
    }
    out[i] = (float)(s / (double)(window * window));
}

__device__ __forceinline__ long long stereo_v(int a, int b, int kind, int trunc,
                                              const int* __restrict__ vmat, int nlab) {
    if (kind == 3) return vmat[a * nlab + b];
    int diff = a > b ? a - b : b - a;
    if (kind == 0) return diff != 0;
    if (kind == 1) return min(diff, trunc);
    return diff;
}

// Coordinate of node p of a layer along axis d (0: x, 1: y, 2: z) and its extent.
__device__ __forceinline__ int stereo_coord(int p, int d, int nz, int m, int n) {
    if (d == 0) return p % n;
    if (d == 1) return (p / n) % m;
    (void)nz;
    return p / (m * n);
}

extern "C" __global__ void stereo_move(const int* __restrict__ cost,
                                       const int* __restrict__ w,
                                       const int* __restrict__ labels,
                                       const int* __restrict__ alphas,
                                       const int* __restrict__ vmat,
                                       int* __restrict__ source, int* __restrict__ sink,
                                       int* __restrict__ edges, int nlayers, int ndim,
                                       int nz, int m, int n, int kind, int trunc, int nlab,
                                       int mirror) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int mn = nz * m * n;  // nodes of a layer
    int total = nlayers * mn;
    if (i >= total) return;
    int b = i / mn;
    int p = i - b * mn;
    int a = alphas[b];
    int f = labels[p];
    // x_p = 0 keeps f, x_p = 1 takes a; the pair (p, q = p + e) costs
    // w * [[V(f_p, f_q), V(f_p, a)], [V(a, f_q), 0]] = [[A, B], [C, 0]]:
    // tail p: source += max(C - A, 0), sink += max(A - C, 0); head q: sink += C;
    // arc p -> q: B + C - A (>= 0: V is a metric)
    long long s = cost[(long long)a * mn + p];
    long long t = cost[(long long)f * mn + p];
    for (int d = 0; d < ndim; ++d) {
        const int step = d == 0 ? 1 : (d == 1 ? n : m * n);
        const int ext = d == 0 ? n : (d == 1 ? m : nz);
        const int c = stereo_coord(p, d, nz, m, n);
        long long lam = 0;
        if (c + 1 < ext) {  // tail of (p, p + e_d)
            int fq = labels[p + step];
            long long wk = w[(long long)d * mn + p];
            long long A = wk * stereo_v(f, fq, kind, trunc, vmat, nlab);
            long long B = wk * stereo_v(f, a, kind, trunc, vmat, nlab);
            long long C = wk * stereo_v(a, fq, kind, trunc, vmat, nlab);
            s += max(C - A, 0ll);
            t += max(A - C, 0ll);
            lam = B + C - A;
        }
        if (c > 0) {  // head of (p - e_d, p): C = w V(a, f_p)
            t += (long long)w[(long long)d * mn + p - step] *
                 stereo_v(a, f, kind, trunc, vmat, nlab);
        }
        if (mirror) {  // the arc q -> p: the head's backward entry (each written once)
            edges[(long long)(2 * d) * total + i] = 0;
            if (c + 1 < ext) edges[(long long)(2 * d + 1) * total + i + step] = (int)lam;
            if (c == 0) edges[(long long)(2 * d + 1) * total + i] = 0;
        } else {
            edges[(long long)(2 * d) * total + i] = (int)lam;  // forward (0 on the last)
            edges[(long long)(2 * d + 1) * total + i] = 0;     // backward
        }
    }
    long long lo = min(s, t);
    source[i] = (int)((mirror ? t : s) - lo);
    sink[i] = (int)((mirror ? s : t) - lo);
}

extern "C" __global__ void swap_move(const int* __restrict__ cost, const int* __restrict__ w,
                                     const int* __restrict__ labels,
                                     const int* __restrict__ alphas,
                                     const int* __restrict__ betas,
                                     const int* __restrict__ vmat, int* __restrict__ source,
                                     int* __restrict__ sink, int* __restrict__ edges,
                                     int nlayers, int ndim, int nz, int m, int n, int kind,
                                     int trunc, int nlab) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int mn = nz * m * n;
    int total = nlayers * mn;
    if (i >= total) return;
    int b = i / mn;
    int p = i - b * mn;
    const int a = alphas[b], c = betas[b];
    const int f = labels[p];
    const bool in = f == a || f == c;
    // x_p = 1 takes a, x_p = 0 takes c; two nodes of the move cost w [[0, V(c, a)],
    // [V(a, c), 0]]: the tail's source and the head's sink get w V(a, c), the arc
    // w (V(c, a) + V(a, c)); a fixed neighbour q adds w V(a, f_q) to the source and
    // w V(c, f_q) to the sink (V is symmetric)
    long long s = in ? cost[(long long)a * mn + p] : 0;
    long long t = in ? cost[(long long)c * mn + p] : 0;
    const long long vac = stereo_v(a, c, kind, trunc, vmat, nlab);
    for (int d = 0; d < ndim; ++d) {
        const int step = d == 0 ? 1 : (d == 1 ? n : m * n);
        const int ext = d == 0 ? n : (d == 1 ? m : nz);
        const int co = stereo_coord(p, d, nz, m, n);
        long long lam = 0;
        if (in && co + 1 < ext) {  // tail of (p, p + e_d)
            const int fq = labels[p + step];
            const long long wk = w[(long long)d * mn + p];
            if (fq == a || fq == c) {
                s += wk * vac;
                lam = wk * (vac + stereo_v(c, a, kind, trunc, vmat, nlab));
            } else {
                s += wk * stereo_v(a, fq, kind, trunc, vmat, nlab);
                t += wk * stereo_v(c, fq, kind, trunc, vmat, nlab);
            }
        }
        if (in && co > 0) {  // head of (p - e_d, p)
            const int fq = labels[p - step];
            const long long wk = w[(long long)d * mn + p - step];
            if (fq == a || fq == c) {
                t += wk * vac;
            } else {
                s += wk * stereo_v(a, fq, kind, trunc, vmat, nlab);
                t += wk * stereo_v(c, fq, kind, trunc, vmat, nlab);
            }
        }
        edges[(long long)(2 * d) * total + i] = (int)lam;  // forward (0 on the last)
        edges[(long long)(2 * d + 1) * total + i] = 0;     // backward
    }
    long long lo = min(s, t);
    source[i] = (int)(s - lo);
    sink[i] = (int)(t - lo);
}

// The label of node i in the proposal of layer `layer` (see stereo_energy).
__device__ __forceinline__ int stereo_proposal(const int* __restrict__ labels,
                                               const unsigned char* __restrict__ cl,
                                               int i, int a, int c, int use_cut,
                                               int swap) {
    const int f = labels[i];
    if (!use_cut) return f;
    if (cl[i]) return a;
    return swap && (f == a || f == c) ? c : f;
}

extern "C" __global__ void stereo_energy(const int* __restrict__ cost,
                                         const int* __restrict__ w,
                                         const int* __restrict__ labels,
                                         const unsigned char* __restrict__ cut,
                                         const int* __restrict__ alphas,
                                         const int* __restrict__ betas, int layer,
                                         int use_cut, int swap,
                                         unsigned long long* energy,
                                         const int* __restrict__ vmat, int ndim, int nz,
                                         int m, int n, int kind, int trunc, int nlab) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int mn = nz * m * n;
    long long e = 0;
    if (i < mn) {
        const int a = use_cut ? alphas[layer] : 0;
        const int c = use_cut ? betas[layer] : 0;
        const unsigned char* cl = cut + (long long)layer * mn;
        int d = stereo_proposal(labels, cl, i, a, c, use_cut, swap);
        e = cost[(long long)d * mn + i];
        for (int k = 0; k < ndim; ++k) {
            const int step = k == 0 ? 1 : (k == 1 ? n : m * n);
            const int ext = k == 0 ? n : (k == 1 ? m : nz);
            if (stereo_coord(i, k, nz, m, n) + 1 < ext) {
                int dq = stereo_proposal(labels, cl, i + step, a, c, use_cut, swap);
                e += (long long)w[(long long)k * mn + i] *
                     stereo_v(d, dq, kind, trunc, vmat, nlab);
            }
        }
    }
    // block sum: warp shuffles, then one atomic per warp (two's complement: a signed
    // sum through unsigned atomics is exact)
    for (int off = 16; off > 0; off >>= 1) e += __shfl_down_sync(0xffffffffu, e, off);
    if ((threadIdx.x & 31) == 0 && e != 0) atomicAdd(energy, (unsigned long long)e);
}

extern "C" __global__ void stereo_accept(int* __restrict__ labels,
                                         const unsigned char* __restrict__ cut,
                                         const int* __restrict__ alphas,
                                         const int* __restrict__ betas, int layer,
                                         int swap, const long long* e_new,
                                         const long long* e_cur, int mn) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= mn || !(*e_new < *e_cur)) return;
    const int d = stereo_proposal(labels, cut + (long long)layer * mn, i, alphas[layer],
                                  betas[layer], 1, swap);
    if (d != labels[i]) labels[i] = d;  // each thread reads and writes its own only
}

extern "C" __global__ void stereo_commit(long long* e_new, long long* e_cur,
                                         long long* accepted) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        if (*e_new < *e_cur) {
            *e_cur = *e_new;
            *accepted += 1;
        }
        *e_new = 0;
    }
}

// ---- the Ishikawa pyramid's window graphs -------------------------------------------
// the window cost of label l at pixel p (see ishikawa_window)
__device__ __forceinline__ long long ish_window_cost(const int* __restrict__ cost, int p,
                                                     int mn, int D, long long l, int half,
                                                     int step, long long top,
                                                     long long pen, long long wsum,
                                                     int slope_div) {
    if (l < 0 || l >= D) {
        const long long out = l < 0 ? -l : l - (D - 1);
        return top + (out + step - 1) / step * pen;
    }
    const int lo = max(0, (int)l - half), hi = min(D, (int)l + half + 1);
    if (slope_div > 0) {
        long long best = 0x7fffffffffffffffLL;
        for (int k = lo; k < hi; ++k) {
            const long long dist = k > l ? k - l : l - k;
            best = min(best, (long long)cost[(long long)k * mn + p] +
                                 (wsum * dist + slope_div / 2) / slope_div);
        }
        return best;
    }
    long long sum = 0;
    for (int k = lo; k < hi; ++k) sum += cost[(long long)k * mn + p];
    const long long num = 2 * sum + (hi - lo), den = 2 * (long long)(hi - lo);
    const long long q = num / den;  // the mean rounded half up: floor(num / den)
    return (num % den != 0 && num < 0) ? q - 1 : q;
}

extern "C" __global__ void ishikawa_window(const int* __restrict__ cost,
                                           const long long* __restrict__ base,
                                           const int* __restrict__ w, int D, int m, int n,
                                           int step, int K, int inf, int slope_div,
                                           int* __restrict__ source,
                                           int* __restrict__ sink, int* __restrict__ edges,
                                           unsigned long long* __restrict__ bound,
                                           int* __restrict__ cmax) {
    const int mn = m * n;
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= mn) return;
    const int y = p / n, x = p - y * n;
    const long long b = base[p];
    const long long far = (long long)(K - 1) * step;
    // the four pairs: neighbour index, weight, whether it exists
    const int qs[4] = {p + 1, p - 1, p + n, p - n};
    const bool has[4] = {x + 1 < n, x > 0, y + 1 < m, y > 0};
    long long wq[4];
    wq[0] = has[0] ? w[p] : 0;
    wq[1] = has[1] ? w[p - 1] : 0;
    wq[2] = has[2] ? w[mn + p] : 0;
    wq[3] = has[3] ? w[mn + p - n] : 0;
    long long slope = 0, wsum = 0;
    int arc[4];
    for (int k = 0; k < 4; ++k) {
        wsum += wq[k];
        arc[k] = 0;
        if (!has[k]) continue;
        const long long diff = b - base[qs[k]];
        if (diff >= far || -diff >= far) {
            slope += (diff > 0 ? 1 : -1) * wq[k] * step;
        } else {
            arc[k] = (int)(wq[k] * step);
        }
    }
    const int half = step / 2;
    const long long pen = step * wsum + 1;
    long long top = 0;
    if (b < 0 || b + far >= D) {  // a label outside [0, D): the pixel's largest cost
        top = cost[p];
        for (int k = 1; k < D; ++k) top = max(top, (long long)cost[(long long)k * mn + p]);
    }
    long long lo = 0x7fffffffffffffffLL;
    for (int r = 0; r < K; ++r) {
        const long long c =
            ish_window_cost(cost, p, mn, D, b + (long long)r * step, half, step, top, pen,
                            wsum, slope_div) +
            slope * r;
        lo = min(lo, c);
    }
    const int L = K - 1;  // layers
    long long hi = 0;
    for (int r = 0; r < K; ++r) {
        const long long c =
            ish_window_cost(cost, p, mn, D, b + (long long)r * step, half, step, top, pen,
                            wsum, slope_div) +
            slope * r - lo;
        hi = max(hi, c);
        const int cc = (int)min(c, 0x7fffffffLL);
        if (r == 0) {
            atomicAdd(bound, (unsigned long long)c);
            source[p] = cc;
        }
        if (r == L) sink[(long long)(L - 1) * mn + p] = cc;
        if (r >= 1 && r < L) edges[(4LL * L + (r - 1)) * mn + p] = cc;  // +z of layer r-1
    }
    atomicMax(cmax, (int)min(hi, 0x7fffffffLL));
    for (int k = 0; k < L; ++k) {
        const long long g = (long long)k * mn + p;
        if (k > 0) source[g] = 0;
        if (k < L - 1) sink[g] = 0;
        edges[0LL * L * mn + g] = arc[0];
        edges[1LL * L * mn + g] = arc[1];
        edges[2LL * L * mn + g] = arc[2];
        edges[3LL * L * mn + g] = arc[3];
        if (k == L - 1) edges[4LL * L * mn + g] = 0;
        edges[5LL * L * mn + g] = k > 0 ? inf : 0;
    }
}
