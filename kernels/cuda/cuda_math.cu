// cuda_math: the dense ops of kernels/backend.h on the GPU — embedding, linear, rmsnorm, layernorm, swiglu,
// add, scale, zero, concatColumns, repeatRows. The CPU backend (kernels/cpu/cpu_math.cpp) is the truth: same formulas,
// same operand order where it is cheap to keep, fp32 everywhere (weights BF16/F16/F32 widened on load).
//
// Variants
// - linear (dense; y[T, N] = x[T, K] · Wᵀ, W [N, K] row-major, x kept in fp32, fp32 accumulation):
//   * T ≤ 8: a memory-bound GEMV. BF16 weights at 3–8 tokens: the tensor-core GEMV (cuda_gemv_tc.cu; x split
//     into three exact bf16 pieces). Otherwise gemvSplitKernel<dtype, NT, 4, STREAM>: a block of 8 warps owns 4 rows and
//     splits K across its warps (each x piece feeds 4 rows), the warps' sums added in shared memory in warp
//     order; weights in 16-byte loads that do not allocate in L1 (STREAM, TS_GEMV_STREAM=0 turns that off).
//     For F16 / F32 at 3–4 tokens gemvSplitBoundedKernel, the same held to 80 registers (3 blocks per SM instead of 2).
//     Whole rows per warp (gemvVecKernel, R = 1, 2, 4 with NT) left too few warps for an H200 at
//     T ≥ 2 and too many dependent loads per warp at T = 1 (bench-device --what gemv, 13 % slower over a KDA
//     layer's projections on the H200). The modes (TS_GEMV1, TS_GEMV_MULTI) pick among them: see ModeSwitch.
//     Fallback gemvScalarKernel when K % 8 ≠ 0 or x is not 16-byte aligned (a view).
//   * T > 8, BF16 weights, K % 8 == 0, x 16-byte aligned (TS_GEMM, gemmSetMode: see ModeSwitch): below
//     gemmCublasMinTokens() (TS_GEMM_CUBLAS_MIN) tokens the tensor-core kernel of cuda_gemv_tc.cu in launches of
//     ≤ 64 tokens (it reads the weights once per launch: bandwidth-bound sizes), from there cuBLAS with x as three
//     exact bf16 pieces (cuda_gemm_pieces.cu: compute-bound sizes). H200 figures: docs/PERFORMANCE.md.
//   * T > 8, otherwise BF16/F16 weights (and BF16 under TS_GEMM=0): a tiled SIMT GEMM (gemmKernel<dtype>): 64 tokens × 128 rows per block of
//     256 threads, k-tiles of 16 staged in shared memory as fp32 (weights widened on load, register
//     prefetch of the next tile), 4×8 outputs per thread, fp32 FMA. No tensor cores: x stays exact fp32.
//   * T > 8, F32 weights: cublasSgemm (the backend sets CUBLAS_DEFAULT_MATH, so no TF32).
//   * packed (EXL3) weights: CudaBackend::exl3Linear (cuda_exl3.cu).
//   Results differ from the CPU only by fp32 summation order (~1e-6 relative at K = 4096).
// - rmsnorm / layernorm: one warp per row for D ≤ 1024 (8 rows per block), one 256-thread block per row
//   above; in place allowed (every element is read by the thread that writes it, after the reduction).
//   layernorm's mean is summed in double, as the CPU does.
// - swiglu, add, scale: grid-stride element-wise kernels; zero: cudaMemsetAsync; concatColumns: one
//   cudaMemcpy2DAsync per part; embedding: one block per token.
// - repeatRows (the embedding broadcast to the mHC streams): one grid-stride launch over dst [T, n, D],
//   float4 when D % 4 == 0 and both buffers are 16-byte aligned (the T·n copies it replaces were one
//   cudaMemcpyAsync each).
//
// Test: `twinspark-cli selftest --backend cuda --filter math` (cases in engine/selftest/cases_math.cpp:
// the GLM-5.3-Flash and tiny widths, odd sizes, T = 1..8 and T > 8, misaligned x, all weight dtypes).
// Benchmark: the linear kernels are what a decode step spends its dense time in; time them with
// `nsys profile twinspark-cli generate ...` (kernel names gemvVecKernel / gemvSplitKernel / gemmKernel), with
// scripts/gpu/profile_moe_kernel.sh (KERNEL=gemvSplitKernel, ncu --set detailed) or in the slice
// benchmark of docs/PERFORMANCE.md; a 4096×4096 BF16 GEMV at T = 1 should run near copy bandwidth
// (32 MiB in ≈ 8 µs on an H200).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/env_switch.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"

namespace ts {
namespace {

constexpr int kThreads = 256;

int dtypeCode(DType d) {
    switch (d) {
    case DType::BF16: return 0;
    case DType::F16: return 1;
    case DType::F32: return 2;
    default: fail(ErrorKind::Unsupported, "cuda: weights must be BF16, F16 or F32");
    }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

unsigned gridFor(int64_t n, int threads) {
    const int64_t b = (n + threads - 1) / threads;
    return unsigned(b < 1 ? 1 : (b > (int64_t(1) << 30) ? (int64_t(1) << 30) : b));
}

using cuda::load8;  // cuda_common.cuh: eight weight elements widened to fp32

// ---------------------------------------------------------------------------------------------------
// Embedding: out[t, :] = table[ids[t], :] (ids validated on the host).
__global__ void embeddingKernel(const int32_t* __restrict__ ids, const void* __restrict__ table, int dtype,
                                int64_t D, float* __restrict__ out) {
    const int64_t t = blockIdx.x;
    const int64_t row = ids[t];
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) out[t * D + i] = cuda::loadWeight(table, row * D + i, dtype);
}

// acc[r][t] += x[t, k .. k+8) · w[r][0 .. 8) for the NT tokens and R weight rows of one 16-byte piece of
// each row: the x piece of a token is loaded once and feeds the R rows. Both GEMV kernels' inner step.
// HALVES: the piece in two halves of 4 elements, each token's x loaded per half (one float4), so that fewer x
// registers are live at once (the same products in the same order per acc[r][t]: the same bits).
template <int NT, int R, bool HALVES = false>
__device__ __forceinline__ void fmaPiece(const float* __restrict__ x, int64_t K, int64_t k, const float (&w)[R][8],
                                         float (&acc)[R][NT]) {
    if constexpr (HALVES) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                const float4 a = __ldg(reinterpret_cast<const float4*>(x + t * K + k) + h);
                const float xv[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
                for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int q = 0; q < 4; ++q) acc[r][t] = fmaf(xv[q], w[r][4 * h + q], acc[r][t]);
            }
    } else {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float4* xp = reinterpret_cast<const float4*>(x + t * K + k);
            const float4 a = __ldg(xp), b = __ldg(xp + 1);
            const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int q = 0; q < 8; ++q) acc[r][t] = fmaf(xv[q], w[r][q], acc[r][t]);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// GEMV for T = NT ≤ 8 tokens. x [NT, K] fp32 (16-byte aligned, K % 8 == 0), W [N, K], y [NT, N].
// Warp w owns rows [w·R, w·R + R); lane l reads elements [k, k+8) with k ≡ 8l (mod 256), U·R 16-byte
// weight loads in flight per lane (U·R = 4) before any arithmetic.
template <int DT, int NT, int R, bool STREAM>
__global__ void __launch_bounds__(kThreads) gemvVecKernel(const float* __restrict__ x, const void* __restrict__ W,
                                                          float* __restrict__ y, int64_t N, int64_t K) {
    constexpr int U = 4 / R;
    const int lane = threadIdx.x & 31;
    const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const int64_t row0 = warp * R;
    if (row0 >= N) return;  // whole warp leaves together
    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

    for (int64_t kb = int64_t(lane) * 8; kb < K; kb += 256 * U) {
        float w[U][R][8];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t k = kb + int64_t(u) * 256;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                if (k < K && row0 + r < N) load8<DT, STREAM>(W, (row0 + r) * K + k, w[u][r]);
                else
#pragma unroll
                    for (int q = 0; q < 8; ++q) w[u][r][q] = 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t k = kb + int64_t(u) * 256;
            if (k >= K) break;
            fmaPiece<NT, R>(x, K, k, w[u], acc);
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float v = cuda::warpSum(acc[r][t]);
            if (lane == 0 && row0 + r < N) y[int64_t(t) * N + row0 + r] = v;
        }
}

// GEMV for 2 ≤ T = NT ≤ 8 tokens with K split across the block's warps (same input contract as
// gemvVecKernel). Block b owns rows [b·R, b·R + R); warp w reads the 16-byte pieces k = w·256 + 8·lane
// + j·2048 of those R rows, each x piece feeding R rows; the 8 warps' sums meet in shared memory and are
// added in warp order (deterministic). Why: gemvVecKernel gives a warp whole rows, so at 4 tokens a
// 2048-row matrix is 1,024 warps of 80 registers — under one block per SM on an H200 (ncu: 12.5 %
// achieved occupancy, 30 µs for 16 MiB).
constexpr int kSplitWarps = kThreads / 32;

// The body of gemvSplitKernel (HALVES false) and gemvSplitBoundedKernel (true).
template <int DT, int NT, int R, bool STREAM, bool HALVES>
__device__ __forceinline__ void gemvSplit(const float* __restrict__ x, const void* __restrict__ W,
                                          float* __restrict__ y, int64_t N, int64_t K) {
    __shared__ float part[kSplitWarps][R * NT];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t row0 = int64_t(blockIdx.x) * R;
    float acc[R][NT];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
    for (int64_t k = int64_t(warp) * 256 + int64_t(lane) * 8; k < K; k += 256 * kSplitWarps) {
        float w[R][8];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if (row0 + r < N) load8<DT, STREAM>(W, (row0 + r) * K + k, w[r]);
            else
#pragma unroll
                for (int q = 0; q < 8; ++q) w[r][q] = 0.0f;
        }
        fmaPiece<NT, R, HALVES>(x, K, k, w, acc);
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const float v = cuda::warpSum(acc[r][t]);
            if (lane == 0) part[warp][r * NT + t] = v;
        }
    __syncthreads();
    for (int i = threadIdx.x; i < R * NT; i += blockDim.x) {
        const int r = i / NT, t = i - r * NT;
        float v = 0.0f;
#pragma unroll
        for (int wv = 0; wv < kSplitWarps; ++wv) v += part[wv][i];
        if (row0 + r < N) y[int64_t(t) * N + row0 + r] = v;
    }
}

template <int DT, int NT, int R, bool STREAM>
__global__ void __launch_bounds__(kThreads) gemvSplitKernel(const float* __restrict__ x, const void* __restrict__ W,
                                                            float* __restrict__ y, int64_t N, int64_t K) {
    gemvSplit<DT, NT, R, STREAM, false>(x, W, y, N, K);
}

// The same held to 3 blocks per SM (80 registers), with the x pieces loaded per half (fmaPiece's HALVES) so that
// fewer are live at once: the form for NT = 3, 4, which unbounded take 88–92 registers — 2 blocks of 8 warps per
// SM on an H200, and a 4-token projection ran at ~60 % of a 1-token one's bandwidth. H200 (bench-device --what
// gemv, T = 4): a KDA layer's 7 projections 144.1 → 135.9 µs; slice decode at batch 4 +5.0 %.
template <int DT, int NT, int R, bool STREAM>
__global__ void __launch_bounds__(kThreads, 3)
    gemvSplitBoundedKernel(const float* __restrict__ x, const void* __restrict__ W, float* __restrict__ y,
                           int64_t N, int64_t K) {
    gemvSplit<DT, NT, R, STREAM, true>(x, W, y, N, K);
}

// Any K, any x alignment, T ≤ 8: one warp per row, scalar loads.
__global__ void __launch_bounds__(kThreads) gemvScalarKernel(const float* __restrict__ x, const void* __restrict__ W,
                                                             int dtype, float* __restrict__ y, int T, int64_t N,
                                                             int64_t K) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    if (row >= N) return;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t k = lane; k < K; k += 32) {
        const float w = cuda::loadWeight(W, row * K + k, dtype);
#pragma unroll
        for (int t = 0; t < 8; ++t)
            if (t < T) acc[t] = fmaf(x[t * K + k], w, acc[t]);
    }
#pragma unroll
    for (int t = 0; t < 8; ++t) {
        const float v = cuda::warpSum(acc[t]);
        if (t < T && lane == 0) y[int64_t(t) * N + row] = v;
    }
}

// Weight loads that do not allocate in L1 (ldWeight16): the default since the fifth session's A/B on the
// H200 slice (+1.2 to +2.4 % decode tok/s at batch 1, 2, 4; docs/PERFORMANCE_SLICE.md); TS_GEMV_STREAM=0 turns it off.
bool gemvStreamLoads() {
    static const bool on = envSwitch("TS_GEMV_STREAM", true);
    return on;
}

}  // namespace

// The GEMV variants for T ≤ 8 (A/B: bench-device --what gemv times every mode at T = 1, 2, 3, 4, 8; the self-test
// runs the modes not in force). Modes, by the kernel that runs:
//   one token  (TS_GEMV1,      gemvSetOneTokenMode):   0 gemvVecKernel<DT, 1, 1> (a warp per whole row: another
//              summation order); 1 (default) gemvSplitKernel<DT, 1, 4>; 2 the same, 2 rows per block;
//              3 the tensor-core GEMV (cuda_gemv_tc.cu) with programmatic dependent launch, 4 the same launched plainly
//   2–8 tokens (TS_GEMV_MULTI, gemvSetMultiTokenMode): 0 gemvVecKernel (whole rows per warp: another summation
//              order); 1 (default) gemvSplitKernel<DT, 2, 4> at 2 tokens, the tensor-core GEMV (PDL) at 3–8;
//              2 gemvSplitKernel<DT, NT, 4> at every T; 3 the tensor-core GEMV (PDL) at every T, 4 the same launched
//              plainly; 5 the split-K kernel held to 3 blocks per SM at 3–4 tokens (gemvSplitBoundedKernel: the
//              default before the tensor-core GEMV), unheld otherwise
//   The tensor-core GEMV takes BF16 weights only: for F16 / F32 modes 3 and 4 run the default's split-K kernel and
//   mode 1 the split-K kernel held at 3–4 tokens (as mode 5).
//   > 8 tokens (TS_GEMM, gemmSetMode; BF16 weights with the vector contract, else the SIMT GEMM or cuBLAS SGEMM):
//              0 gemmKernel (SIMT, fp32 FMA); 1 the tensor-core kernel (launches of 64 tokens); 2 cuBLAS on three
//              bf16 pieces; 3 (default) 1 below gemmCublasMinTokens() tokens, 2 from there.
//   H200, bench-device --what gemv (docs/PERFORMANCE.md, nineteenth session): at 3–8 tokens the tensor cores
//   read a KDA layer's seven projections at ~70 % of copy bandwidth (the split-K kernel 62 % at 3, 55 % at 4,
//   40 % at 8); at 1–2 tokens the split-K kernel stays ahead (82 / 76 % against 72 / 71 %).
// The split-K forms (T = 1: 1, 2; T > 1: 2, 5, and 1 at 2 tokens) give the same bits at every T, and so do the
// two tensor-core forms: a row's sums do not depend on its neighbours, the registers the kernel is held to or
// how it is launched. The environment is read once; set…Mode(m) overrides it from then on, −1
// restores it.
namespace mathcuda {
namespace {
ModeSwitch g_one{"TS_GEMV1", 5, 1};
ModeSwitch g_multi{"TS_GEMV_MULTI", 6, 1};
ModeSwitch g_many{"TS_GEMM", 4, 3};
}  // namespace
int setOneTokenMode(int mode) { return g_one.set(mode); }
int oneTokenMode() { return g_one.now(); }
int setMultiTokenMode(int mode) { return g_multi.set(mode); }
int multiTokenMode() { return g_multi.now(); }
int setManyTokenMode(int mode) { return g_many.set(mode); }
int manyTokenMode() { return g_many.now(); }
int64_t cublasMinTokens() {
    static const int64_t v = std::max<int64_t>(9, envCount("TS_GEMM_CUBLAS_MIN", 64));
    return v;
}
}  // namespace mathcuda

namespace {

template <int DT, int NT, int RS, bool BOUNDED = false>
void gemvSplitLaunch(const float* x, const void* W, float* y, int64_t N, int64_t K, cudaStream_t s) {
    const unsigned grid = unsigned((N + RS - 1) / RS);
    const bool stream = gemvStreamLoads();
    if constexpr (BOUNDED) {
        if (stream) cuda::launchPlain(gemvSplitBoundedKernel<DT, NT, RS, true>, grid, kThreads, 0, s, x, W, y, N, K);
        else cuda::launchPlain(gemvSplitBoundedKernel<DT, NT, RS, false>, grid, kThreads, 0, s, x, W, y, N, K);
    } else {
        if (stream) cuda::launchPlain(gemvSplitKernel<DT, NT, RS, true>, grid, kThreads, 0, s, x, W, y, N, K);
        else cuda::launchPlain(gemvSplitKernel<DT, NT, RS, false>, grid, kThreads, 0, s, x, W, y, N, K);
    }
}

template <int DT, int NT>
void launchGemvVec(const float* x, const void* W, float* y, int64_t N, int64_t K, cudaStream_t s) {
    const int mode = NT == 1 ? mathcuda::oneTokenMode() : mathcuda::multiTokenMode();
    if constexpr (NT == 1) {
        // One token (every decode projection at batch 1): K split over the block's warps, so that each warp
        // has a few weight loads to wait for instead of a whole row's (one warp per row left a 4096 × 2048
        // projection at 2 TB/s and a 4096 × 8192 one in two waves at 4 blocks per SM).
        switch (mode) {
        case 1:
        case 3:  // the tensor-core modes: BF16 only (CudaBackend::linear); other dtypes take the default
        case 4: gemvSplitLaunch<DT, 1, 4>(x, W, y, N, K, s); return;
        case 2: gemvSplitLaunch<DT, 1, 2>(x, W, y, N, K, s); return;
        default: break;
        }
    } else {
        // 4 rows per block: each x piece feeds 4 rows. At 3–4 tokens the bounded kernel (3 blocks per SM
        // instead of 2); at 2 the unbounded one already fits 4 (64 registers) and bounding it cost 79; at 5–8
        // bounding leaves 2 (121–128 registers, with spills at 8) and measured slower at 8.
        constexpr bool bounded = NT == 3 || NT == 4;
        switch (mode) {
        case 1:  // BF16 weights at 3–8 tokens go to the tensor cores (CudaBackend::linear) before this
        case 3:
        case 4:
        case 5: gemvSplitLaunch<DT, NT, 4, bounded>(x, W, y, N, K, s); return;
        case 2: gemvSplitLaunch<DT, NT, 4>(x, W, y, N, K, s); return;
        default: break;
        }
    }
    constexpr int R = NT <= 2 ? 1 : (NT <= 4 ? 2 : 4);
    const int64_t warps = (N + R - 1) / R;
    if (gemvStreamLoads())
        cuda::launchPlain(gemvVecKernel<DT, NT, R, true>, gridFor(warps * 32, kThreads), kThreads, 0, s, x, W, y, N, K);
    else
        cuda::launchPlain(gemvVecKernel<DT, NT, R, false>, gridFor(warps * 32, kThreads), kThreads, 0, s, x, W, y, N,
                          K);
}

template <int DT>
void dispatchGemvVec(int T, const float* x, const void* W, float* y, int64_t N, int64_t K, cudaStream_t s) {
    switch (T) {
    case 1: launchGemvVec<DT, 1>(x, W, y, N, K, s); break;
    case 2: launchGemvVec<DT, 2>(x, W, y, N, K, s); break;
    case 3: launchGemvVec<DT, 3>(x, W, y, N, K, s); break;
    case 4: launchGemvVec<DT, 4>(x, W, y, N, K, s); break;
    case 5: launchGemvVec<DT, 5>(x, W, y, N, K, s); break;
    case 6: launchGemvVec<DT, 6>(x, W, y, N, K, s); break;
    case 7: launchGemvVec<DT, 7>(x, W, y, N, K, s); break;
    default: launchGemvVec<DT, 8>(x, W, y, N, K, s); break;
    }
}

// ---------------------------------------------------------------------------------------------------
// SIMT GEMM for T > 8: y[M, N] = x[M, K] · W[N, K]ᵀ. Block tile 64 (tokens) × 128 (rows), k-tile 16.
// Thread (tx = tid % 16, ty = tid / 16) owns tokens ty·4 + [0, 4) and rows tx·8 + [0, 8) of the tile.
// Loaders: x — thread reads 4 consecutive k of token tid / 4; W — 8 consecutive k of row tid / 2.
constexpr int kBM = 64, kBN = 128, kBK = 16;

template <int DT>
__global__ void __launch_bounds__(kThreads) gemmKernel(const float* __restrict__ x, const void* __restrict__ W,
                                                       float* __restrict__ y, int64_t M, int64_t N, int64_t K,
                                                       bool vecX, bool vecW) {
    __shared__ __align__(16) float As[kBK][kBM];  // x tile, k-major: As[k][m]
    __shared__ __align__(16) float Bs[kBK][kBN];  // W tile, k-major: Bs[k][n]
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
    const int xm = tid >> 2, xk = (tid & 3) * 4;
    const int wn = tid >> 1, wk = (tid & 1) * 8;
    float xr[4], wr[8];

    auto loadTile = [&](int64_t k0) {
        const int64_t m = m0 + xm, k = k0 + xk;
        if (vecX && m < M && k + 4 <= K) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(x + m * K + k));
            xr[0] = v.x; xr[1] = v.y; xr[2] = v.z; xr[3] = v.w;
        } else {
#pragma unroll
            for (int c = 0; c < 4; ++c) xr[c] = (m < M && k + c < K) ? x[m * K + k + c] : 0.0f;
        }
        const int64_t n = n0 + wn, kw = k0 + wk;
        if (vecW && n < N && kw + 8 <= K) {
            load8<DT>(W, n * K + kw, wr);
        } else {
#pragma unroll
            for (int c = 0; c < 8; ++c) wr[c] = (n < N && kw + c < K) ? cuda::loadWeight(W, n * K + kw + c, DT) : 0.0f;
        }
    };
    auto storeTile = [&]() {
#pragma unroll
        for (int c = 0; c < 4; ++c) As[xk + c][xm] = xr[c];
#pragma unroll
        for (int c = 0; c < 8; ++c) Bs[wk + c][wn] = wr[c];
    };

    float acc[4][8];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    loadTile(0);
    storeTile();
    __syncthreads();
    for (int64_t k0 = 0; k0 < K; k0 += kBK) {
        const bool more = k0 + kBK < K;
        if (more) loadTile(k0 + kBK);  // global loads of the next tile overlap this tile's FMAs
#pragma unroll
        for (int kk = 0; kk < kBK; ++kk) {
            const float4 a = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk][tx * 8]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk][tx * 8 + 4]);
            const float av[4] = {a.x, a.y, a.z, a.w};
            const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
        if (more) {
            storeTile();
            __syncthreads();
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int64_t m = m0 + ty * 4 + i;
        if (m >= M) break;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int64_t n = n0 + tx * 8 + j;
            if (n < N) y[m * N + n] = acc[i][j];
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Norms. Each row is reduced by one warp (D ≤ 1024) or one block (rmsnorm: from registers when D ≤ 8192 and
// rows are 16-byte aligned); `y` may alias `x`.

constexpr int kNormWarpMaxD = 1024;
constexpr int kNormRowsPerBlock = kThreads / 32;

// WARP: one warp per row (row = blockIdx.x · 8 + warp); else one block per row.
template <bool WARP>
__global__ void __launch_bounds__(kThreads) rmsnormKernel(const float* x, int64_t rows, int64_t D,
                                                          const float* __restrict__ w, float eps, float* y) {
    __shared__ float red[32];
    const int64_t row = WARP ? int64_t(blockIdx.x) * kNormRowsPerBlock + (threadIdx.x >> 5) : int64_t(blockIdx.x);
    if (row >= rows) return;  // WARP: whole warp; block mode: never (grid = rows)
    const int start = WARP ? (threadIdx.x & 31) : threadIdx.x, step = WARP ? 32 : blockDim.x;
    const float* xr = x + row * D;
    float* yr = y + row * D;
    float ss = 0.0f;
    for (int64_t i = start; i < D; i += step) ss = fmaf(xr[i], xr[i], ss);
    ss = WARP ? cuda::warpSum(ss) : cuda::blockSum(ss, red);
    const float inv = 1.0f / sqrtf(ss / float(D) + eps);
    for (int64_t i = start; i < D; i += step) {
        const float v = xr[i] * inv;
        yr[i] = w ? w[i] * v : v;
    }
}

// Block mode for rows of D = 4·kThreads·NV floats at most, 16-byte aligned (D = 4096: NV = 4): each thread
// loads its NV float4 at once and keeps them in registers for the second pass. The strided loop above
// issues one dependent load per iteration, ~10 µs per row at D = 4096 (latency-bound: 16 round trips).
template <int NV>
__global__ void __launch_bounds__(kThreads) rmsnormVecKernel(const float* x, int64_t D, const float* __restrict__ w,
                                                             float eps, float* y) {
    __shared__ float red[32];
    const float4* xr = reinterpret_cast<const float4*>(x + int64_t(blockIdx.x) * D);
    float4* yr = reinterpret_cast<float4*>(y + int64_t(blockIdx.x) * D);
    const int n4 = int(D / 4);
    float4 v[NV];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
        const int i = int(threadIdx.x) + k * kThreads;
        v[k] = i < n4 ? xr[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int k = 0; k < NV; ++k) {
        ss = fmaf(v[k].x, v[k].x, ss);
        ss = fmaf(v[k].y, v[k].y, ss);
        ss = fmaf(v[k].z, v[k].z, ss);
        ss = fmaf(v[k].w, v[k].w, ss);
    }
    ss = cuda::blockSum(ss, red);
    const float inv = 1.0f / sqrtf(ss / float(D) + eps);
#pragma unroll
    for (int k = 0; k < NV; ++k) {
        const int i = int(threadIdx.x) + k * kThreads;
        if (i >= n4) break;
        float4 o = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
        if (w) {
            const float4 g = reinterpret_cast<const float4*>(w)[i];
            o = make_float4(g.x * o.x, g.y * o.y, g.z * o.z, g.w * o.w);
        }
        yr[i] = o;
    }
}

template <bool WARP>
__global__ void __launch_bounds__(kThreads) layernormKernel(const float* x, int64_t rows, int64_t D,
                                                            const float* __restrict__ w, const float* __restrict__ b,
                                                            float eps, float* y) {
    __shared__ float red[32];
    __shared__ double redD[32];
    const int64_t row = WARP ? int64_t(blockIdx.x) * kNormRowsPerBlock + (threadIdx.x >> 5) : int64_t(blockIdx.x);
    if (row >= rows) return;
    const int start = WARP ? (threadIdx.x & 31) : threadIdx.x, step = WARP ? 32 : blockDim.x;
    const float* xr = x + row * D;
    float* yr = y + row * D;
    double sum = 0.0;  // the CPU sums the mean in double
    for (int64_t i = start; i < D; i += step) sum += double(xr[i]);
    sum = WARP ? cuda::warpSumD(sum) : cuda::blockSumD(sum, redD);
    const float m = float(sum / double(D));
    float var = 0.0f;
    for (int64_t i = start; i < D; i += step) {
        const float d = xr[i] - m;
        var = fmaf(d, d, var);
    }
    var = WARP ? cuda::warpSum(var) : cuda::blockSum(var, red);
    const float inv = 1.0f / sqrtf(var / float(D) + eps);
    for (int64_t i = start; i < D; i += step) yr[i] = (xr[i] - m) * inv * w[i] + b[i];
}

// ---------------------------------------------------------------------------------------------------
// Element-wise.
__global__ void swigluKernel(const float* gate, const float* up, int64_t n, float limit, float* out) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        float g = gate[i], u = up[i];
        if (limit > 0.0f) {
            g = fminf(g, limit);
            u = u < -limit ? -limit : (limit < u ? limit : u);  // std::clamp
        }
        out[i] = g / (1.0f + expf(-g)) * u;
    }
}

__global__ void addKernel(const float* x, float* y, int64_t n) {  // x may be y
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        y[i] += x[i];
}

__global__ void scaleKernel(float* x, int64_t n, float s) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        x[i] *= s;
}

// dst[t, i, :] = src[t, :]: element e of dst [T, n, D] (in units of V = float or float4, D in units of V)
// reads src[e / (n·D), e % D].
template <class V>
__global__ void repeatRowsKernel(const V* __restrict__ src, int64_t total, int64_t D, int64_t nD,
                                 V* __restrict__ dst) {
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x)
        dst[e] = src[(e / nD) * D + e % D];
}

}  // namespace

void CudaBackend::embedding(const int32_t* ids, int64_t T, const WeightView& table, const Buffer& out) {
    GraphOp op(*this, false, "embedding", {gk(T), gk(table.data)});
    TS_CHECK(!table.packed, "embedding needs a dense table, not a packed (EXL3) linear");
    const int64_t D = table.cols;
    TS_CHECK(out.size() >= size_t(T * D) * 4, "embedding: output buffer too small");
    for (int64_t t = 0; t < T; ++t) TS_CHECK(ids[t] >= 0 && ids[t] < table.rows, "embedding id out of range");
    if (T <= 0 || D <= 0) return;
    const int dt = dtypeCode(table.dtype);
    const void* tab = deviceWeight(table);
    const int32_t* dIds = uploadInts(kScratchIds, ids, T);
    cuda::launchPlain(embeddingKernel, unsigned(T), kThreads, 0, m_stream, dIds, tab, dt, D, out.f32());
}

void CudaBackend::linear(const Buffer& x, int64_t T, const WeightView& w, const Buffer& y) {
    GraphOp op(*this, true, "linear", {gk(x.bytes()), gk(T), gk(w.data), gk(w.packed), gk(w.rows), gk(w.cols), gk(int64_t(w.dtype)), gk(y.bytes())});
    if (op.skip()) return;
    const int64_t K = w.cols, N = w.rows;
    TS_CHECK(x.size() >= size_t(T * K) * 4 && y.size() >= size_t(T * N) * 4, "linear: buffer too small");
    if (w.packed) {
        exl3Linear(x, T, *w.packed, y);
        return;
    }
    if (T <= 0 || N <= 0) return;
    if (K <= 0) {  // empty dot products
        TS_CUDA_CHECK(cudaMemsetAsync(y.f32(), 0, size_t(T * N) * 4, m_stream));
        return;
    }
    const int dt = dtypeCode(w.dtype);
    const void* W = deviceWeight(w);
    const float* X = x.f32();
    float* Y = y.f32();
    if (T <= 8) {
        if (K % 8 == 0 && aligned16(X)) {
            const int mode = T == 1 ? mathcuda::oneTokenMode() : mathcuda::multiTokenMode();
            if (dt == 0 && (mode == 3 || mode == 4 || (mode == 1 && T >= 3))) {
                gemvTensorCores(X, W, Y, T, N, K, mode != 4);
                return;
            }
            if (dt == 0) dispatchGemvVec<0>(int(T), X, W, Y, N, K, m_stream);
            else if (dt == 1) dispatchGemvVec<1>(int(T), X, W, Y, N, K, m_stream);
            else dispatchGemvVec<2>(int(T), X, W, Y, N, K, m_stream);
        } else {
            cuda::launchPlain(gemvScalarKernel, gridFor(N * 32, kThreads), kThreads, 0, m_stream, X, W, dt, Y, int(T),
                              N, K);
        }
        return;
    }
    // BF16 weights above 8 tokens (TS_GEMM): 1 the tensor-core kernel, 2 cuBLAS on three bf16 pieces, 3 (default)
    // by size; 0 the SIMT GEMM below.
    if (dt == 0 && K % 8 == 0 && aligned16(X)) {
        int many = mathcuda::manyTokenMode();
        if (many == 3) many = T < mathcuda::cublasMinTokens() ? 1 : 2;
        if (many == 1) {
            gemvTensorCores(X, W, Y, T, N, K, true);
            return;
        }
        if (many == 2) {
            gemmCublasPieces(X, W, Y, T, N, K);
            return;
        }
    }
    if (dt == 2) {
        // Column-major view: yᵀ [N, T] = W [N, K] · xᵀ [K, T]; W row-major [N, K] is column-major Wᵀ with ld K.
        TS_CHECK(N <= INT32_MAX && K <= INT32_MAX && T <= INT32_MAX, "linear: matrix too large for cuBLAS");
        const float one = 1.0f, zeroF = 0.0f;
        TS_CUDA_CHECK(cublasSgemm(cublasNow(), CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(T), int(K), &one,
                                  static_cast<const float*>(W), int(K), X, int(K), &zeroF, Y, int(N)));
        return;
    }
    const bool vecX = K % 4 == 0 && aligned16(X);
    const bool vecW = K % 8 == 0;
    const int64_t gy = (T + kBM - 1) / kBM;
    TS_CHECK(gy <= 65535, "linear: too many tokens for one GEMM launch");
    const dim3 grid(unsigned((N + kBN - 1) / kBN), unsigned(gy));
    if (dt == 0) cuda::launchPlain(gemmKernel<0>, grid, kThreads, 0, m_stream, X, W, Y, T, N, K, vecX, vecW);
    else cuda::launchPlain(gemmKernel<1>, grid, kThreads, 0, m_stream, X, W, Y, T, N, K, vecX, vecW);
}

void CudaBackend::rmsnorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, float eps, const Buffer& y) {
    GraphOp op(*this, true, "rmsnorm", {gk(x.bytes()), gk(rows), gk(D), gk(w.bytes()), gf(eps), gk(y.bytes())});
    if (op.skip()) return;
    TS_CHECK(x.size() >= size_t(rows * D) * 4 && y.size() >= size_t(rows * D) * 4, "rmsnorm: buffer too small");
    TS_CHECK(w.empty() || w.size() >= size_t(D) * 4, "rmsnorm: weight too small");
    if (rows <= 0 || D <= 0) return;
    const float* W = w.empty() ? nullptr : w.f32();
    const auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
    const int64_t nv = (D / 4 + kThreads - 1) / kThreads;  // float4 per thread in the vector form
    if (D <= kNormWarpMaxD) {
        cuda::launchPlain(rmsnormKernel<true>, gridFor(rows, kNormRowsPerBlock), kThreads, 0, m_stream, x.f32(), rows,
                          D, W, eps, y.f32());
    } else if (D % 4 == 0 && nv <= 8 && aligned(x.f32()) && aligned(y.f32()) && (!W || aligned(W))) {
        if (nv <= 2)
            cuda::launchPlain(rmsnormVecKernel<2>, unsigned(rows), kThreads, 0, m_stream, x.f32(), D, W, eps, y.f32());
        else if (nv <= 4)
            cuda::launchPlain(rmsnormVecKernel<4>, unsigned(rows), kThreads, 0, m_stream, x.f32(), D, W, eps, y.f32());
        else cuda::launchPlain(rmsnormVecKernel<8>, unsigned(rows), kThreads, 0, m_stream, x.f32(), D, W, eps, y.f32());
    } else
        cuda::launchPlain(rmsnormKernel<false>, unsigned(rows), kThreads, 0, m_stream, x.f32(), rows, D, W, eps,
                          y.f32());
}

void CudaBackend::layernorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, const Buffer& b, float eps,
                            const Buffer& y) {
    GraphOp op(*this, true, "layernorm", {gk(x.bytes()), gk(rows), gk(D), gk(w.bytes()), gk(b.bytes()), gf(eps), gk(y.bytes())});
    if (op.skip()) return;
    TS_CHECK(x.size() >= size_t(rows * D) * 4 && y.size() >= size_t(rows * D) * 4, "layernorm: buffer too small");
    TS_CHECK(w.size() >= size_t(D) * 4 && b.size() >= size_t(D) * 4, "layernorm: weight or bias too small");
    if (rows <= 0 || D <= 0) return;
    if (D <= kNormWarpMaxD)
        cuda::launchPlain(layernormKernel<true>, gridFor(rows, kNormRowsPerBlock), kThreads, 0, m_stream, x.f32(), rows,
                          D, w.f32(), b.f32(), eps, y.f32());
    else
        cuda::launchPlain(layernormKernel<false>, unsigned(rows), kThreads, 0, m_stream, x.f32(), rows, D, w.f32(),
                          b.f32(), eps, y.f32());
}

void CudaBackend::swiglu(const Buffer& gate, const Buffer& up, int64_t T, int64_t I, float limit, const Buffer& out) {
    GraphOp op(*this, true, "swiglu", {gk(gate.bytes()), gk(up.bytes()), gk(T), gk(I), gf(limit), gk(out.bytes())});
    if (op.skip()) return;
    const int64_t n = T * I;
    TS_CHECK(gate.size() >= size_t(n) * 4 && up.size() >= size_t(n) * 4 && out.size() >= size_t(n) * 4,
             "swiglu: buffer too small");
    if (n <= 0) return;
    cuda::launchPlain(swigluKernel, gridFor(n, kThreads), kThreads, 0, m_stream, gate.f32(), up.f32(), n, limit,
                      out.f32());
}

void CudaBackend::add(const Buffer& x, const Buffer& y, int64_t n) {
    GraphOp op(*this, true, "add", {gk(x.bytes()), gk(y.bytes()), gk(n)});
    if (op.skip()) return;
    TS_CHECK(x.size() >= size_t(n) * 4 && y.size() >= size_t(n) * 4, "add: buffer too small");
    if (n <= 0) return;
    cuda::launchPlain(addKernel, gridFor(n, kThreads), kThreads, 0, m_stream, x.f32(), y.f32(), n);
}

void CudaBackend::scale(const Buffer& x, int64_t n, float s) {
    GraphOp op(*this, true, "scale", {gk(x.bytes()), gk(n), gf(s)});
    if (op.skip()) return;
    TS_CHECK(x.size() >= size_t(n) * 4, "scale: buffer too small");
    if (n <= 0) return;
    cuda::launchPlain(scaleKernel, gridFor(n, kThreads), kThreads, 0, m_stream, x.f32(), n, s);
}

void CudaBackend::zero(const Buffer& x) {
    GraphOp op(*this, true, "zero", {gk(x.bytes()), gk(int64_t(x.size()))});
    if (op.skip()) return;
    if (x.size()) TS_CUDA_CHECK(cudaMemsetAsync(x.bytes(), 0, x.size(), m_stream));
}

void CudaBackend::concatColumns(const Buffer* parts, const int64_t* widths, int count, int64_t T, const Buffer& out) {
    GraphOp op(*this, true, "concatColumns", {gk(int64_t(count)), gk(T), gk(out.bytes()), count > 0 ? gk(parts[0].bytes()) : 0,
                                              count > 1 ? gk(parts[1].bytes()) : 0, count > 2 ? gk(parts[2].bytes()) : 0,
                                              count > 0 ? gk(widths[0]) : 0, count > 1 ? gk(widths[1]) : 0});
    if (op.skip()) return;
    int64_t total = 0;
    for (int i = 0; i < count; ++i) {
        TS_CHECK(widths[i] >= 0 && parts[i].size() >= size_t(T * widths[i]) * 4, "concatColumns: part too small");
        total += widths[i];
    }
    TS_CHECK(out.size() >= size_t(T * total) * 4, "concatColumns: output too small");
    if (T <= 0) return;
    int64_t off = 0;
    for (int i = 0; i < count; ++i) {
        if (widths[i] > 0)
            TS_CUDA_CHECK(cudaMemcpy2DAsync(out.f32() + off, size_t(total) * 4, parts[i].f32(), size_t(widths[i]) * 4,
                                            size_t(widths[i]) * 4, size_t(T), cudaMemcpyDeviceToDevice, m_stream));
        off += widths[i];
    }
}

void CudaBackend::repeatRows(const Buffer& src, int64_t T, int64_t D, int n, const Buffer& dst) {
    GraphOp op(*this, true, "repeatRows", {gk(src.bytes()), gk(T), gk(D), gk(int64_t(n)), gk(dst.bytes())});
    if (op.skip()) return;
    TS_CHECK(T >= 0 && D >= 0 && n >= 0, "repeatRows: negative shape");
    TS_CHECK(src.size() >= size_t(T * D) * 4 && dst.size() >= size_t(T * n * D) * 4, "repeatRows: buffer too small");
    if (T <= 0 || D <= 0 || n <= 0) return;
    if (D % 4 == 0 && aligned16(src.f32()) && aligned16(dst.f32())) {
        const int64_t D4 = D / 4, total = T * n * D4;
        cuda::launchPlain(repeatRowsKernel<float4>, gridFor(total, kThreads), kThreads, 0, m_stream,
                          reinterpret_cast<const float4*>(src.f32()), total, D4, n * D4,
                          reinterpret_cast<float4*>(dst.f32()));
    } else {
        const int64_t total = T * n * D;
        cuda::launchPlain(repeatRowsKernel<float>, gridFor(total, kThreads), kThreads, 0, m_stream, src.f32(), total, D,
                          n * D, dst.f32());
    }
}

}  // namespace ts
