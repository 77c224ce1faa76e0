// fp32 values as three exact bf16 pieces, x = hi + mid + lo (each piece the rounding error of the one before, round to
// nearest even each time: 24 significant bits = 3 × 8, and every difference is exact in fp32). The one definition
// of the split, for the tensor-core GEMV (cuda_gemv_tc.cu: the pieces straight into mma B fragments) and the cuBLAS
// GEMM (cuda_gemm_pieces.cu: the pieces written out as three bf16 planes). Private to kernels/cuda.
// Test: twinspark-cli selftest --backend cuda --filter linear (both kernels against the CPU's fp32 linear; a split
// that loses bits fails its 1e-4 tolerance).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace ts::cuda {

// Two fp32 values → one bf16x2 word (low half = u), round to nearest even; and its halves back to fp32.
__device__ __forceinline__ uint32_t packBf16(float u, float v) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(u, v);
    return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float lowF(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float highF(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// The three pieces of 8 fp32 values, pairs (2j, 2j + 1) in word j (so each piece's 4 words are its 8 bf16 values in
// order, as memory holds them).
struct XPieces {
    uint32_t hi[4], mid[4], lo[4];
};
__device__ __forceinline__ XPieces splitX(const float (&v)[8]) {
    XPieces p;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float a = v[2 * j], b = v[2 * j + 1];
        p.hi[j] = packBf16(a, b);
        const float ra = a - lowF(p.hi[j]), rb = b - highF(p.hi[j]);
        p.mid[j] = packBf16(ra, rb);
        p.lo[j] = packBf16(ra - lowF(p.mid[j]), rb - highF(p.mid[j]));
    }
    return p;
}

}  // namespace ts::cuda
