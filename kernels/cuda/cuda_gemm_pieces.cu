// cuda_gemm_pieces: the dense BF16 GEMM of prefill-sized steps on cuBLAS — y[T, N] = x[T, K] · Wᵀ with W [N, K]
// row-major BF16 and x, y fp32, x kept exact: each fp32 value is split into three bf16 pieces x = hi + mid + lo
// (each piece the rounding error of the one before: 24 significant bits = 3 × 8, as the tensor-core GEMV of
// cuda_gemv_tc.cu does), and y = hi·Wᵀ + mid·Wᵀ + lo·Wᵀ as three cublasGemmEx calls (bf16 inputs, fp32 compute
// and output; the second and third add to y with β = 1). Every product is exact in fp32; the result differs
// from the CPU's fp32 loop by summation order and the tensor core's accumulation only (the self-test's linear
// tolerance, 1e-4, fails a kernel that rounds x to bf16 once). cuBLAS gives the same bits on every run on one
// GPU model (its reproducibility guarantee), so the path is deterministic.
//
// Why: above a few dozen tokens a GEMM is bound by its multiply-adds, not by the weight bytes, and cuBLAS's
// Hopper / Blackwell kernels run the tensor cores far closer to their peak than the mma.sync GEMV of
// cuda_gemv_tc.cu, which is built for weight streaming at decode sizes (H200, bench-device --what gemv).
//
// Variants: one, chosen by CudaBackend::linear (cuda_math.cu: the GEMM modes of TS_GEMM, by token count).
// Work split: rows in chunks whose three pieces fit kPiecesBytes of scratch (3 · chunk · K · 2 bytes), each chunk
// one split launch and three GEMMs, so long prefills need no more scratch than a short one.
//
// Test: twinspark-cli selftest --backend cuda --filter linear (each prefill-sized BF16 case runs every GEMM
// kernel against the CPU). Benchmark: twinspark-cli bench-device --what gemv (the GEMM modes at 16 … 4,096
// tokens, µs and TFLOP/s).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_bf16_pieces.cuh"
#include "cuda/cuda_common.cuh"

namespace ts {
namespace {

constexpr size_t kPiecesBytes = size_t(48) << 20;  // scratch for one chunk's three bf16 pieces
constexpr int kSplitThreads = 256;

// x [rows, K] fp32 → pieces [3][rows][K] bf16 (hi, mid, lo: cuda_bf16_pieces.cuh), 8 consecutive values per thread
// (K % 8 == 0, x 16-byte aligned: the vector contract of CudaBackend::linear).
__global__ void splitPiecesKernel(const float* __restrict__ x, int64_t n8, int64_t plane, __nv_bfloat16* __restrict__ p) {
    const int64_t i = int64_t(blockIdx.x) * kSplitThreads + threadIdx.x;
    if (i >= n8) return;
    const float4 a = reinterpret_cast<const float4*>(x)[2 * i], b = reinterpret_cast<const float4*>(x)[2 * i + 1];
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    const cuda::XPieces q = cuda::splitX(v);
    reinterpret_cast<uint4*>(p)[i] = make_uint4(q.hi[0], q.hi[1], q.hi[2], q.hi[3]);
    reinterpret_cast<uint4*>(p + plane)[i] = make_uint4(q.mid[0], q.mid[1], q.mid[2], q.mid[3]);
    reinterpret_cast<uint4*>(p + 2 * plane)[i] = make_uint4(q.lo[0], q.lo[1], q.lo[2], q.lo[3]);
}

}  // namespace

void CudaBackend::gemmCublasPieces(const float* x, const void* W, float* y, int64_t T, int64_t N, int64_t K) {
    TS_CHECK(T >= 1 && K % 8 == 0 && N <= INT32_MAX && K <= INT32_MAX, "gemmCublasPieces: needs K % 8 == 0");
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(T, int64_t(kPiecesBytes / (size_t(6) * size_t(K)))));
    TS_CHECK(chunk <= INT32_MAX, "gemmCublasPieces: too many tokens");
    auto* pieces = static_cast<__nv_bfloat16*>(scratch(kScratchGemm, size_t(3 * chunk * K) * 2));
    const auto* w = static_cast<const __nv_bfloat16*>(W);
    const float one = 1.0f, zero = 0.0f;
    for (int64_t t0 = 0; t0 < T; t0 += chunk) {
        const int64_t rows = std::min(chunk, T - t0), plane = rows * K, n8 = plane / 8;
        cuda::launchPlain(splitPiecesKernel, unsigned((n8 + kSplitThreads - 1) / kSplitThreads), kSplitThreads, 0,
                          m_stream, x + t0 * K, n8, plane, pieces);
        // Column-major view: yᵀ [N, rows] = W [N, K] · pieceᵀ [K, rows]; W row-major [N, K] is column-major Wᵀ
        // with ld K, a piece row-major [rows, K] column-major [K, rows].
        for (int p = 0; p < 3; ++p)
            TS_CUDA_CHECK(cublasGemmEx(cublasNow(), CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(rows), int(K), &one, w,
                                       CUDA_R_16BF, int(K), pieces + p * plane, CUDA_R_16BF, int(K), p ? &one : &zero,
                                       y + t0 * N, CUDA_R_32F, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}

}  // namespace ts
