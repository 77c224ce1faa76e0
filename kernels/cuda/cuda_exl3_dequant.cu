// cuda_exl3_dequant: the GEMM of a prefill-sized EXL3 linear on cuBLAS. y = BH_n(xr · Ŵ) ⊙ svh + bias with
// xr = BH_k(x ⊙ suh) as in cuda_exl3_prefill.cu, but Ŵ is decoded once per call into fp16 instead of once per 64 rows
// inside the GEMM kernel, and the product runs on cuBLAS's tensor-core GEMM:
//
//   1. dequantise (exl3DequantKernel<K, codebook>, one warp per 16×16 tile): the lane's 8 codebook values (lanePairs:
//      the CPU's fp16 values exactly) into Wd [n, 2k] fp16 — row j holds column j of Ŵ twice, at k positions
//      [0, k) and [k, 2k).
//   2. transform (cuda_exl3_prefill.cu's exl3PfTransformKernel with a row stride of 2k): row t of A [m, 2k] is the
//      row's hi plane then its lo plane (fp16, the row scaled by 2^e; ~22 bits), so A · Wdᵀ = (hi + lo) · Ŵ in one
//      GEMM of depth 2k — no second pass over the fp32 output.
//   3. cublasGemmEx (fp16 inputs, fp32 compute and output): Yr [m, n] = A · Wdᵀ. Every product is exact in fp32;
//      sums in cuBLAS's order.
//   4. epilogue (exl3PfOutKernel, one warp per row and 128 columns): ÷ 2^e, the output Hadamard (the CPU's
//      butterflies), ⊙ svh, + bias — the GEMM kernel's epilogue operations, in its order.
//
// Why: the GEMM kernel decodes every weight once per 64 rows and feeds mma.sync from its own ring (151 TFLOP/s of
// the model's products at 4,096 rows of 4096 → 12288 on the H200), where cuBLAS's Hopper kernels run the tensor cores
// near their peak; the decode then costs once per call (~0.165 ms for 4096 → 12288, measured with a GEMM of 24 rows):
// 302 TFLOP/s at 4,096 rows, 250 at 1,024, level with the GEMM kernel between 128 and 192 rows (kPfMinRowsCublas).
// The price is scratch: the dequantised copy (4 bytes per weight; at most kPfCublasWeightBytes, else the GEMM kernel
// is used) and the fp32 output rows.
// Numerics: the GEMM kernel's (the same planes, products exact, fp32 sums in another order): the self-test's
// prefill tolerance. Deterministic: cuBLAS gives the same bits on every run on one GPU model.
//
// Variants: K = 2..6 × the three codebooks (the dequantiser); taken by exl3PrefillLinear from prefillCublasRows()
// rows (TS_EXL3_PF_CUBLAS_ROWS).
// Test:      twinspark-cli selftest --backend cuda --filter exl3   (the "cuBLAS route" linear cases, against the CPU)
// Benchmark: twinspark-cli bench-device --what exl3-prefill   (the 4096 → 12288 GEMM at 16 … 4,096 rows on each route)
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <vector>

#include "core/env_switch.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_exl3.cuh"
#include "cuda/cuda_exl3_unit.cuh"

namespace ts {
namespace exl3cuda {

namespace {

constexpr int kDqWarps = 8;   // tiles per dequantiser block
constexpr int kOutWarps = 8;  // (row, 128 columns) per epilogue block

// Tile (kt, nt) of the trellis ([k/16, n/16, 8K words]) → Wd [n, ld] fp16 at rows 16·nt.., columns 16·kt.. and again
// `dup` columns on. The lane's pairs (lanePairs): q = 0, 1 the values (k 2c, 2c+1 | 2c+8, 2c+9) of column g,
// q = 2, 3 those of column g + 8. They go through the warp's 512 bytes of shared memory ([16 n][16 k] fp16) so that
// each of the tile's 16 rows of Wd is written as one whole 32-byte sector (two lanes × 16 bytes): written straight
// from the fragments, as 4-byte pieces of 16 rows, the dequantiser took ~0.3 ms for 4096 → 12288 on the H200 (the
// partial sectors; docs/PERFORMANCE.md, "EXL3 prefill GEMM on cuBLAS").
template <int K, int CB>
__global__ void __launch_bounds__(kDqWarps * 32) exl3DequantKernel(const uint16_t* __restrict__ trellis, int tilesK,
                                                                   int tilesN, __half* __restrict__ wd, int64_t ld,
                                                                   int64_t dup) {
    __shared__ __align__(16) uint32_t tileS[kDqWarps][16 * 8];  // per warp: [16 n][8 words of k pairs]
    const int warp = threadIdx.x >> 5;
    const int64_t tile = int64_t(blockIdx.x) * kDqWarps + warp;
    if (tile >= int64_t(tilesK) * tilesN) return;
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const int kt = int(tile / tilesN), nt = int(tile % tilesN);
    uint32_t st[8], b[4];
    laneStates<K>(reinterpret_cast<const uint32_t*>(trellis) + tile * tileWords(K), lane, st);
    lanePairs<CB>(st, b);
    uint32_t* ts = tileS[warp];
#pragma unroll
    for (int q = 0; q < 4; ++q) ts[(g + 8 * (q >> 1)) * 8 + c + 4 * (q & 1)] = b[q];
    __syncwarp();
    const int row = lane >> 1, half = lane & 1;  // row n of the tile, k 8·half .. 8·half + 7
    const uint4 v = *reinterpret_cast<const uint4*>(ts + row * 8 + 4 * half);
    __half* p = wd + (int64_t(nt) * 16 + row) * ld + int64_t(kt) * 16 + 8 * half;
    *reinterpret_cast<uint4*>(p) = v;
    if (dup) *reinterpret_cast<uint4*>(p + dup) = v;
}

using DequantFn = void (*)(const uint16_t*, int, int, __half*, int64_t, int64_t);
template <int K>
DequantFn dequantForCb(int cb) {
    return cb == 0 ? exl3DequantKernel<K, 0> : cb == 1 ? exl3DequantKernel<K, 1> : exl3DequantKernel<K, 2>;
}
DequantFn dequantFor(int bits, int cb) {
    switch (bits) {
    case 2: return dequantForCb<2>(cb);
    case 3: return dequantForCb<3>(cb);
    case 4: return dequantForCb<4>(cb);
    case 5: return dequantForCb<5>(cb);
    case 6: return dequantForCb<6>(cb);
    default: return nullptr;
    }
}

// y[r, col] for col < nOut, from the GEMM's fp32 rows yr [m, n]: ÷ 2^e[r], the output Hadamard of each 128 columns
// (lane: 4l..4l+3), ⊙ svh, + bias — exl3PfGemmKernel's epilogue.
__global__ void __launch_bounds__(kOutWarps * 32) exl3PfOutKernel(const float* __restrict__ yr, int n, int m,
                                                                  const int* __restrict__ e, const float* __restrict__ svh,
                                                                  const float* __restrict__ bias, int nOut,
                                                                  float* __restrict__ y, int64_t ldy) {
    const int64_t w = int64_t(blockIdx.x) * kOutWarps + (threadIdx.x >> 5);
    const int NB = n / 128;
    if (w >= int64_t(m) * NB) return;
    const int lane = threadIdx.x & 31;
    const int row = int(w / NB), col0 = int(w % NB) * 128 + 4 * lane;
    const float f = pow2(-__ldg(e + row));
    const float4 a = __ldcs(reinterpret_cast<const float4*>(yr + int64_t(row) * n + col0));
    float v[4] = {__fmul_rn(a.x, f), __fmul_rn(a.y, f), __fmul_rn(a.z, f), __fmul_rn(a.w, f)};
    had128(v, lane);
    float* out = y + int64_t(row) * ldy;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float o = __fmul_rn(v[i], __ldg(svh + col0 + i));
        if (bias) o = __fadd_rn(o, __ldg(bias + col0 + i));
        if (col0 + i < nOut) out[col0 + i] = o;
    }
}

ModeSwitch g_pfCublasRows("TS_EXL3_PF_CUBLAS_ROWS", 4098, kPfMinRowsCublas);  // 4097: never
std::atomic<int64_t> g_pfCublasCalls{0};

size_t carve(size_t count, size_t size) { return (count * size + 255) & ~size_t(255); }

}  // namespace

int setPrefillCublasRows(int rows) { return g_pfCublasRows.set(rows); }
int prefillCublasRows() { return g_pfCublasRows.now(); }
int64_t prefillCublasCalls() { return g_pfCublasCalls.load(std::memory_order_relaxed); }

}  // namespace exl3cuda

bool CudaBackend::exl3PrefillLinearCublas(const Buffer& x, int64_t T, const DeviceTrellis& d, int64_t in, int64_t out,
                                          const Buffer& y) {
    using namespace exl3cuda;
    const int minRows = prefillCublasRows();
    if (minRows > 4096 || T < minRows) return false;
    const size_t wBytes = size_t(d.n) * size_t(2 * d.k) * 2;
    const DequantFn dq = dequantFor(d.bits, d.codebook);
    if (dq == nullptr || wBytes > kPfCublasWeightBytes || 2 * d.k > INT_MAX || d.n > INT_MAX) return false;
    // The transform's row in shared memory, under the limit the plans use (exl3SetSmemLimitKiB's too, as pfFits).
    if (size_t(d.k + 4) * 4 > smemLimit(props().sharedMemPerBlockOptin)) return false;
    preloadDecodeKernels(d.bits, d.codebook);
    g_pfCublasCalls.fetch_add(1, std::memory_order_relaxed);

    // 1. Ŵ twice per row of Wd [n, 2k].
    auto* wd = static_cast<__half*>(scratch(kScratchPfWeights, wBytes));
    const int64_t tiles = (d.k / 16) * (d.n / 16);
    cuda::launchPlain(dq, unsigned((tiles + kDqWarps - 1) / kDqWarps), kDqWarps * 32, 0, m_stream, d.trellis,
                      int(d.k / 16), int(d.n / 16), wd, 2 * d.k, d.k);

    // Rows per group: A [rows, 2k] fp16, the exponents and Yr [rows, n] fp32 within the prefill budget (less 1 KiB for
    // the three pieces' 256-byte alignment, so that the arena keeps its size), the groups of one call equal to within a
    // row. At 4096 → 12288 the default 256 MiB holds 4,095 rows (64 KiB each): 4,096 rows run as two GEMMs of 2,048.
    const int64_t perRow = 2 * d.k * 2 + d.n * 4 + 4;
    const int64_t most = std::max<int64_t>(1, (int64_t(prefillBudget()) - 1024) / perRow);
    const int64_t groups = (T + most - 1) / most, group = (T + groups - 1) / groups;
    TS_CHECK(group <= INT_MAX, "exl3 prefill (cuBLAS): too many rows");
    const size_t aBytes = carve(size_t(group * 2 * d.k), 2), eBytes = carve(size_t(group), 4);
    auto* arena = static_cast<unsigned char*>(scratch(kScratchPfArena, aBytes + eBytes + carve(size_t(group * d.n), 4)));
    auto* a = reinterpret_cast<__half*>(arena);
    auto* e = reinterpret_cast<int*>(arena + aBytes);
    auto* yr = reinterpret_cast<float*>(arena + aBytes + eBytes);
    const float one = 1.0f, zero = 0.0f;
    std::vector<PfRow> rows;
    for (int64_t t0 = 0; t0 < T; t0 += group) {
        const int64_t m = std::min(group, T - t0);
        // 2. Row r: hi at a + r·2k, lo k elements on.
        rows.assign(size_t(m), PfRow{});
        for (int64_t r = 0; r < m; ++r) rows[size_t(r)] = {x.f32() + (t0 + r) * in, d.suh, int32_t(r), 0};
        exl3PfTransform(rows, d.k, in, a, d.k, e, 2 * d.k);
        // 3. Column-major view: Yrᵀ [n, m] = Wd (column-major [2k, n], ld 2k)ᵀ · Aᵀ (column-major [2k, m], ld 2k).
        TS_CUDA_CHECK(cublasGemmEx(cublasNow(), CUBLAS_OP_T, CUBLAS_OP_N, int(d.n), int(m), int(2 * d.k), &one, wd,
                                   CUDA_R_16F, int(2 * d.k), a, CUDA_R_16F, int(2 * d.k), &zero, yr, CUDA_R_32F,
                                   int(d.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        // 4. The epilogue into y's rows t0..
        const int64_t warps = m * (d.n / 128);
        cuda::launchPlain(exl3PfOutKernel, unsigned((warps + kOutWarps - 1) / kOutWarps), kOutWarps * 32, 0, m_stream,
                          yr, int(d.n), int(m), e, d.svh, d.bias, int(out), y.f32() + t0 * out, out);
    }
    return true;
}

}  // namespace ts
