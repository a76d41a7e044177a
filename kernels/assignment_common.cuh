// assignment_common.cuh: the column words and reductions shared by assignment.cu and
// assignment_rows.cu (see assignment.cu for the column-word scheme).
#ifndef VC_ASSIGNMENT_COMMON
#define VC_ASSIGNMENT_COMMON

typedef unsigned long long au64;

#define A_BIG 0x7fffffffffffffffll
#define A_FULL 0xffffffffu

__device__ __forceinline__ long long a_price(au64 w, int bits) {
    return (long long)(w >> bits);
}
__device__ __forceinline__ long long a_pmax(int bits) {
    return (1ll << (63 - bits)) - 1ll;
}
__device__ __forceinline__ au64 a_mask(int bits) { return (1ull << bits) - 1ull; }

// best (d1 at j1) and second best d2 of the reduced costs seen so far; ties keep the
// lower column in d1 and put the equal value in d2
__device__ __forceinline__ void a_take(long long d, int k, long long& d1, int& j1,
                                       long long& d2) {
    if (d < d1) {
        d2 = d1;
        d1 = d;
        j1 = k;
    } else if (d < d2) {
        d2 = d;
    }
}

__device__ __forceinline__ long long a_warp_min(long long v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = min(v, __shfl_xor_sync(A_FULL, v, off));
    return v;
}

#endif
