// mHC hyper-connections and KDA (Kimi Delta Attention) linear attention on the GPU: the CUDA side of
// the ops whose reference is kernels/cpu/cpu_mhc_kda.cpp (math: /work/shared/specs/glm_dsa.md §8.1,
// §8.3, §11.3, §11.7–9). Every kernel computes what the CPU loop computes, in fp32, in the same
// per-element order where that is cheap (elementwise ops, Sinkhorn), and with tree reductions where
// the CPU sums sequentially (dot products: differences are fp32 summation-order noise).
//
// Ops and kernels (T = tokens of the call; every op is correct for any T ≥ 0 and any width):
// - mhcPre: streams [T, n, D] → x [T, D], post [T, n], comb [T, n, n]. Two stages:
//   (1) the partial sums, grid (T, chunks): each block takes a chunk of one token's flattened streams and
//       writes its sum of squares and its dot products with the 2n+n² rows of fn (unnormalised) to a
//       scratch [T, chunks, 1+mix] — for a BF16 fn, n = 4 and whole 2048-element chunks (GLM-5.3-Flash)
//       256 threads of 8 elements, one 16-byte fn load per row and thread, all 24 rows in flight
//       (mhcPartialBlockWide); otherwise 128 threads of 4 scalar elements, 512 per chunk (mhcPartialBlock);
//   (2) the mixing (mhcMixToken): sums the chunks in a fixed order, applies the RMS factor, computes
//       pre/post, the row softmax and the Sinkhorn iterations exactly as the CPU does (same order, same
//       +eps terms, IEEE division; for n² ≤ 32 in one warp's registers, a row's or column's values by
//       shuffles), then x = Σ_i pre[i]·streams[i] (float4 columns for n ≤ 4).
//   By default ONE launch (mhcPreFusedKernel): every block of (1) counts its arrival at a per-token counter
//   (acquire-release) and the token's last block runs (2) for the whole row. TS_MHC_FUSED=0 (or
//   mhcSetFusedPre(0), kernels/exl3_tune.h) takes two launches: (1), then mhcMixKernel with D split over
//   blocks of ~1024 columns for few tokens. Both give the same bits (the self-test checks it).
//   Latency-bound at decode sizes (bench-device --what mhc): ~19 µs per call on the H200 while the Sinkhorn
//   took n at run time (its 19 iterations after the first ~11.5 µs, ~600 ns each); 14 µs now that it is
//   templated on n (mhcSinkhornWarp<N>: a phase's shuffles issued together, ~350 ns per iteration).
//   Inside a decode step (n² ≤ 32) the Sinkhorn leaves the critical path: the kernels write comb unbalanced
//   and mhcSinkhornKernel, one warp per token on the side stream (CudaBackend::forkSide), balances it while
//   the layer's body — which reads x only — runs; mhcPost joins. Same function, same bits ("inline vs aside"
//   self-test rows). TS_MHC_SIDE / mhcSetSideSinkhorn: 0 inline, 1 in decode regions (default), 2 always.
// - mhcPost (in place): one thread per (t, d) reads the n old stream values into registers first.
// - mhcHead: one thread per (t, d).
// - causalConvSilu: conv + SiLU with one thread per (t, c) reading the old conv state for the first
//   K−1 window positions; then a second launch (one thread per channel) shifts the state in place
//   using this call's inputs in token order (also when T < K−1). x may alias out (copied first).
// - kdaGate: elementwise, both branches (lower bound, or −exp(A_log)·softplus when lowerBound is NaN).
// - kdaRecurrent: the gated delta rule, token by token, fp32 state [H, Dk, Dv] in place. Columns of
//   the state are independent given (q, k, g, β, v[j]), so grid (H, ⌈Dv/32⌉), block (32 columns,
//   RG = ⌈Dk/R⌉ row groups; R = 8 up to Dk 128, 16 up to 256, 32 up to 1024 (may spill; no real
//   model)): each thread keeps R rows × 1 column of S in registers for the whole call (the
//   state is read once and written once however long T is), the two column sums per token
//   (Sᵀk and Sᵀq) are reduced over the row groups through double-buffered shared memory with one
//   barrier per token; the next token's inputs are staged (and their norms reduced) during the current
//   one. Decode (T = 1) streams the state exactly once (64 heads × 128 × 128 × 4 B = 4 MiB per layer,
//   read + written). Prefill (T ≥ 16, Dk ∈ {32, 64, 128}) goes to the chunked form instead
//   (cuda_kda_chunk.cu: all chunks' intra-chunk work in parallel, then one sequential step per 32
//   tokens instead of per token; TS_KDA_CHUNK=0 keeps every call on this kernel).
// - causalConvSiluBatch / kdaRecurrentBatch: a step's sequences, each with its own state, in one launch of each
//   kernel above (the sequence on grid y / z, its rows and state pointer from one upload: SeqStates) when every
//   sequence is below the chunked threshold (decode, speculative verify); otherwise the per-sequence calls.
// - gatedRmsnorm: one warp per (t, h) row.
//
// Test:      twinspark-cli selftest --backend cuda --filter mhc_kda   (cases: engine/selftest/cases_mhc_kda.cpp)
// Benchmark: twinspark-cli bench-device --what kda (app/cli/bench_cuda_kda.cpp: decode µs per call and
//            achieved state bandwidth, 4 sequences in 4 calls and in one batched call, prefill µs per token: recurrent vs chunked); --what mhc
//            (app/cli/bench_cuda_mhc.cpp: mhcPre µs per call, one launch vs two, and the Sinkhorn's share)
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "core/env_switch.h"
#include "cuda/cuda_common.cuh"

namespace ts {

// cuda_kda_chunk.cu: the chunked gated delta rule for prefill. Returns false, having enqueued nothing,
// when the call belongs to the recurrent kernel (T below the threshold or TS_KDA_CHUNK=0, a head dim
// without a chunked variant, too little shared memory).
bool kdaChunkedPrefill(CudaBackend& be, const Buffer& qkv, int64_t T, int64_t H, int64_t Dk, const Buffer& g,
                       const Buffer& betaLogits, const Buffer& state, const Buffer& out);
namespace kdacuda {
int64_t chunkMinTokensNow();  // cuda_kda_chunk.cu: the chunked path's threshold in tokens (0: off)
}  // namespace kdacuda

// mhcPre in one launch (the default) or two: TS_MHC_FUSED (read once), or a run-time override
// (mhcSetFusedPre, kernels/exl3_tune.h) for the A/B benchmark and the self-test's bit-for-bit check.
namespace mhccuda {
static OverridableSwitch g_fused("TS_MHC_FUSED", true);
int setFusedPre(int on) { return g_fused.set(on); }
bool fusedPre() { return g_fused.on(); }
// Where the Sinkhorn runs (mhcSetSideSinkhorn, kernels/exl3_tune.h): TS_MHC_SIDE (read once; default 1) or the
// run-time override. 0 inline, 1 on the side stream inside decode-step regions, 2 on the side stream always.
static ModeSwitch g_side("TS_MHC_SIDE", 3, 1);
int setSideSinkhorn(int mode) { return g_side.set(mode); }
int sideSinkhorn() { return g_side.now(); }
}  // namespace mhccuda

namespace {

using cuda::blocksFor;
using cuda::sigmoidf_;
using cuda::warpSum;

// Weight element → fp32 with the dtype fixed at compile time (0 = BF16, 1 = F16, 2 = F32).
template <int DT>
__device__ __forceinline__ float ldw(const void* base, int64_t i) {
    if constexpr (DT == 0) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    else if constexpr (DT == 1) return __half2float(static_cast<const __half*>(base)[i]);
    else return static_cast<const float*>(base)[i];
}

int dtypeCode(DType d) {
    switch (d) {
    case DType::BF16: return 0;
    case DType::F16: return 1;
    case DType::F32: return 2;
    default: fail(ErrorKind::Unsupported, "cuda mHC: fn must be BF16, F16 or F32");
    }
}

// ---------------------------------------------------------------------------------------------------
// mHC

constexpr int kMhcThreads = 128;   // partial kernel block (4 warps)
constexpr int kMhcPerThread = 4;   // elements per thread
constexpr int kMhcChunk = kMhcThreads * kMhcPerThread;  // 512 elements of n·D per block
constexpr int kMixThreads = 256;

// part[t, chunk, 0] = Σ s², part[t, chunk, 1 + j] = Σ s · fn[j] over the chunk's elements of token t's
// flattened streams s [n·D] (t = blockIdx.x, chunk = blockIdx.y; 128 threads). sh: 4 warps × (1 + mix) floats.
template <int DT>
__device__ __forceinline__ void mhcPartialBlock(const float* __restrict__ streams, int64_t width,
                                                const void* __restrict__ fn, int mix, int nChunks,
                                                float* __restrict__ part, float* sh) {
    const int64_t t = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float* s = streams + t * width;
    const int64_t first = int64_t(blockIdx.y) * kMhcChunk + threadIdx.x;
    float v[kMhcPerThread];
    float sq = 0.0f;
#pragma unroll
    for (int e = 0; e < kMhcPerThread; ++e) {
        const int64_t i = first + int64_t(e) * kMhcThreads;
        v[e] = i < width ? s[i] : 0.0f;
        sq += v[e] * v[e];
    }
    const int stride = 1 + mix;
    sq = warpSum(sq);
    if (lane == 0) sh[warp * stride] = sq;
    for (int j = 0; j < mix; ++j) {
        const int64_t row = int64_t(j) * width;
        float acc = 0.0f;
#pragma unroll
        for (int e = 0; e < kMhcPerThread; ++e) {
            const int64_t i = first + int64_t(e) * kMhcThreads;
            if (i < width) acc += v[e] * ldw<DT>(fn, row + i);
        }
        acc = warpSum(acc);
        if (lane == 0) sh[warp * stride + 1 + j] = acc;
    }
    __syncthreads();
    float* out = part + (t * nChunks + blockIdx.y) * stride;
    for (int k = threadIdx.x; k < stride; k += blockDim.x) {
        float a = 0.0f;
        for (int w = 0; w < kMhcThreads / 32; ++w) a += sh[w * stride + k];
        out[k] = a;
    }
}

template <int DT>
__global__ void __launch_bounds__(kMhcThreads) mhcPartialKernel(const float* __restrict__ streams, int64_t width,
                                                                const void* __restrict__ fn, int mix, int nChunks,
                                                                float* __restrict__ part) {
    extern __shared__ float sh[];
    mhcPartialBlock<DT>(streams, width, fn, mix, nChunks, part, sh);
}

// The same partial sums for n = 4 (24 mixing rows) and a BF16 fn (GLM-5.3-Flash's) over chunks of
// kMhcWideChunk elements, 256 threads of 8 consecutive elements each: one 16-byte load per fn row and thread,
// all 24 rows' loads in flight at once, the 25 sums reduced over the warp together (independent shuffle
// chains), then over the 8 warps in order. The scalar form above issues one 2-byte load per element and row
// and reduces each row's sum over the warp before the next row's. Needs width a multiple of kMhcWideChunk and
// 16-byte aligned streams and fn (CudaBackend::mhcPre checks). sh: 8 warps × 25 floats.
constexpr int kMhcWideThreads = 256;
constexpr int kMhcWideChunk = kMhcWideThreads * 8;  // 2048 elements of n·D per block
__device__ __forceinline__ void mhcPartialBlockWide(const float* __restrict__ streams, int64_t width,
                                                    const void* __restrict__ fn, int nChunks, float* __restrict__ part,
                                                    float* sh) {
    constexpr int kMix = 24, kStride = 1 + kMix;
    const int64_t t = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t e0 = int64_t(blockIdx.y) * kMhcWideChunk + int64_t(threadIdx.x) * 8;
    const float4* s4 = reinterpret_cast<const float4*>(streams + t * width + e0);
    const float4 a = s4[0], b = s4[1];
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    float acc[kStride];
    acc[0] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[0] += v[e] * v[e];
    // Every row's 16 bytes requested before any is used (the point of this form).
    uint4 raw[kMix];
#pragma unroll
    for (int j = 0; j < kMix; ++j)
        raw[j] = cuda::ldWeight16<false>(static_cast<const uint16_t*>(fn) + int64_t(j) * width + e0);
#pragma unroll
    for (int j = 0; j < kMix; ++j) {
        const uint32_t q[4] = {raw[j].x, raw[j].y, raw[j].z, raw[j].w};
        float d = 0.0f;
#pragma unroll
        for (int h = 0; h < 4; ++h) {  // bf16 → fp32: the high half of the fp32 bits
            d += v[2 * h] * __uint_as_float(q[h] << 16);
            d += v[2 * h + 1] * __uint_as_float(q[h] & 0xffff0000u);
        }
        acc[1 + j] = d;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int k = 0; k < kStride; ++k) acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], o);
    if (lane == 0)
#pragma unroll
        for (int k = 0; k < kStride; ++k) sh[warp * kStride + k] = acc[k];
    __syncthreads();
    if (threadIdx.x < kStride) {
        float sum = 0.0f;
        for (int q = 0; q < kMhcWideThreads / 32; ++q) sum += sh[q * kStride + threadIdx.x];
        part[(t * nChunks + blockIdx.y) * kStride + threadIdx.x] = sum;
    }
}

__global__ void __launch_bounds__(kMhcWideThreads) mhcPartialWideKernel(const float* __restrict__ streams,
                                                                        int64_t width, const void* __restrict__ fn,
                                                                        int nChunks, float* __restrict__ part) {
    extern __shared__ float sh[];
    mhcPartialBlockWide(streams, width, fn, nChunks, part, sh);
}

// Sinkhorn for n² ≤ 32 in one warp's registers, n a compile-time constant: lane i·N + j holds c[i][j] (lanes
// ≥ N² compute values that are never stored). Each phase reads a row's or a column's N values by shuffles
// issued together (no run-time bound or branch between them), sums them in index order from 0 and divides
// (IEEE, + eps in the denominator) — the CPU's operations in its order. The phases are a dependent chain, so
// their latency is the op's: with n a run-time value each shuffle sat behind its own bound test (~600 ns per
// iteration on the H200, now ~350 ns). One thread holding the whole matrix (no shuffles, a phase's n²
// divisions overlapping) was measured too: 25.8 µs per call against 14.0 — its IEEE divisions, not the
// shuffles, set the pace, and a warp spreads them over n² lanes.
template <int N>
__device__ __forceinline__ float mhcSinkhornWarp(float v, int iters, float hcEps, int lane) {
    const int i = lane / N, j = lane % N;
    // One phase: x / (Σ_q x[lane first + q·step] + eps) — a column (first j, step N) or a row (first i·N, step 1).
    auto normalise = [&](float x, int first, int step) {
        float r[N];
#pragma unroll
        for (int q = 0; q < N; ++q) r[q] = __shfl_sync(0xffffffffu, x, (first + q * step) & 31);
        float sum = 0.0f;
#pragma unroll
        for (int q = 0; q < N; ++q) sum += r[q];
        return x / (sum + hcEps);
    };
    auto colNorm = [&](float x) { return normalise(x, j, N); };
    auto rowNorm = [&](float x) { return normalise(x, i * N, 1); };
    v = colNorm(v);
    for (int it = 1; it < iters; ++it) v = colNorm(rowNorm(v));
    return v;
}

// Sinkhorn on c [n, n] (shared memory, complete behind a block barrier): column normalise, then (iters − 1)
// × (row, column); each sum in the CPU's order, + eps in the denominator, IEEE division — the CPU's
// operations in its order. Ends with a block barrier. For n² ≤ 32 (n ≤ 5) the matrix lives in warp 0's
// registers (mhcSinkhornWarp<n>): no shared-memory round trip per step. Else threads < n take a row or a
// column each, on warp barriers (n ≤ 32: 40 block barriers at 20 iterations cost more than the arithmetic)
// or block barriers.
__device__ __forceinline__ void mhcSinkhorn(float* c, int n, int iters, float hcEps) {
    const int tid = threadIdx.x;
    if (n * n <= 32) {
        if (tid < 32) {
            float v = tid < n * n ? c[tid] : 0.0f;
            switch (n) {
            case 1: v = mhcSinkhornWarp<1>(v, iters, hcEps, tid); break;
            case 2: v = mhcSinkhornWarp<2>(v, iters, hcEps, tid); break;
            case 3: v = mhcSinkhornWarp<3>(v, iters, hcEps, tid); break;
            case 4: v = mhcSinkhornWarp<4>(v, iters, hcEps, tid); break;
            default: v = mhcSinkhornWarp<5>(v, iters, hcEps, tid); break;
            }
            if (tid < n * n) c[tid] = v;
        }
        __syncthreads();
        return;
    }
    const bool oneWarp = n <= 32;
    if (!oneWarp || tid < 32) {
        for (int it = 0; it < iters; ++it) {
            if (it > 0) {
                if (tid < n) {
                    float* ci = c + tid * n;
                    float sum = 0.0f;
                    for (int j = 0; j < n; ++j) sum += ci[j];
                    for (int j = 0; j < n; ++j) ci[j] /= (sum + hcEps);
                }
                if (oneWarp) __syncwarp();
                else __syncthreads();
            }
            if (tid < n) {
                const int j = tid;
                float sum = 0.0f;
                for (int i = 0; i < n; ++i) sum += c[i * n + j];
                for (int i = 0; i < n; ++i) c[i * n + j] /= (sum + hcEps);
            }
            if (oneWarp) __syncwarp();
            else __syncthreads();
        }
    }
    if (oneWarp) __syncthreads();
}

// xr[d] = Σ_i pre[i] · s[i, d] (i in order, from 0) for d in [d0, d1), by the block's threads. With n ≤ 4,
// D, d0, d1 multiples of 4 and 16-byte aligned rows: float4 columns, 4 passes' loads in flight at once.
__device__ __forceinline__ void mhcMixRange(const float* __restrict__ s, int64_t D, int n, const float* pre, int64_t d0,
                                            int64_t d1, float* __restrict__ xr) {
    const int bd = blockDim.x;
    const bool vec = n <= 4 && ((D | d0 | d1) & 3) == 0 &&
                     ((reinterpret_cast<uintptr_t>(s) | reinterpret_cast<uintptr_t>(xr)) & 15u) == 0;
    if (vec) {
        float pr[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) pr[i] = i < n ? pre[i] : 0.0f;
        const float4* s4 = reinterpret_cast<const float4*>(s);
        float4* x4 = reinterpret_cast<float4*>(xr);
        const int64_t D4 = D / 4, q1 = d1 / 4;
        for (int64_t q = d0 / 4 + threadIdx.x; q < q1; q += 4 * int64_t(bd)) {
            float4 v[4][4];  // [pass][stream]
#pragma unroll
            for (int u = 0; u < 4; ++u)
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    if (i < n && q + u * bd < q1) v[u][i] = s4[int64_t(i) * D4 + q + u * bd];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                if (q + u * bd >= q1) break;
                float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    if (i >= n) break;
                    acc.x += pr[i] * v[u][i].x;
                    acc.y += pr[i] * v[u][i].y;
                    acc.z += pr[i] * v[u][i].z;
                    acc.w += pr[i] * v[u][i].w;
                }
                x4[q + u * bd] = acc;
            }
        }
        return;
    }
    for (int64_t d = d0 + threadIdx.x; d < d1; d += bd) {
        float acc = 0.0f;
        for (int i = 0; i < n; ++i) acc += pre[i] * s[int64_t(i) * D + d];
        xr[d] = acc;
    }
}

// The mixing of token t (as CpuBackend::mhcPre) from its partials pt [nChunks, 1 + mix] (loaded with ld.cg:
// the fused kernel's come from other blocks of the same launch): the sums in chunk order, the RMS factor,
// pre / post, the row softmax and Sinkhorn, then x[t, d] for d in [d0, d1); writeCoef: also post and comb.
// sh: m [1 + mix] | pre [n] | c [n·n] | the partials [nChunks, 1 + mix]. All threads of the block call it.
__device__ __forceinline__ void mhcMixToken(const float* __restrict__ streams, int64_t D, int n,
                                            const float* pt, int nChunks, const float* __restrict__ base,
                                            const float* __restrict__ scale, int iters, float hcEps, float normEps,
                                            int64_t d0, int64_t d1, bool writeCoef, float* __restrict__ x,
                                            float* __restrict__ post, float* __restrict__ comb, float* sh) {
    const int mix = 2 * n + n * n, stride = 1 + mix;
    float* m = sh;             // [0] = Σ s², [1 + j] = s · fn[j]
    float* pre = sh + stride;  // [n]
    float* c = pre + n;        // [n, n]
    const int64_t t = blockIdx.x, width = int64_t(n) * D;
    // All of the token's partials into shared memory at once (the sums below would otherwise wait one load
    // latency per few chunks), then each sum in chunk order.
    float* pAll = c + n * n;  // [nChunks, stride]
    for (int i = threadIdx.x; i < nChunks * stride; i += blockDim.x) pAll[i] = __ldcg(pt + i);
    __syncthreads();
    for (int k = threadIdx.x; k < stride; k += blockDim.x) {
        float a = 0.0f;
        for (int ch = 0; ch < nChunks; ++ch) a += pAll[ch * stride + k];
        m[k] = a;
    }
    __syncthreads();
    // The CPU normalises first (f = s · inv) and then takes f · fn; inv · (s · fn) is the same up to rounding.
    const float inv = 1.0f / sqrtf(m[0] / float(width) + normEps);
    const float* mm = m + 1;
    const float s0 = scale[0], s1 = scale[1], s2 = scale[2];
    if (threadIdx.x < n) {
        const int i = threadIdx.x;
        pre[i] = sigmoidf_(mm[i] * inv * s0 + base[i]) + hcEps;
        const float pv = 2.0f * sigmoidf_(mm[n + i] * inv * s1 + base[n + i]);
        if (writeCoef) post[t * n + i] = pv;
        // Row i of comb: softmax over j, + eps.
        float* ci = c + i * n;
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
            const int k = 2 * n + i * n + j;
            ci[j] = mm[k] * inv * s2 + base[k];
            mx = fmaxf(mx, ci[j]);
        }
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) sum += (ci[j] = expf(ci[j] - mx));
        for (int j = 0; j < n; ++j) ci[j] = ci[j] / sum + hcEps;
    }
    __syncthreads();
    if (iters > 0) mhcSinkhorn(c, n, iters, hcEps);  // 0: deferred to mhcSinkhornKernel (comb leaves unbalanced)
    if (writeCoef)
        for (int k = threadIdx.x; k < n * n; k += blockDim.x) comb[t * n * n + k] = c[k];
    mhcMixRange(streams + t * width, D, n, pre, d0, d1, x + t * D);
}

// The Sinkhorn of a deferred mhcPre (iters = 0 there): comb [T, n, n] in place, one warp per token, n² ≤ 32
// (mhcSinkhorn's register form: the same operations in the same order as inline, so the same bits). Runs on
// the backend's side stream (CudaBackend::forkSide) beside the layer's body; mhcPost joins it.
__global__ void __launch_bounds__(32) mhcSinkhornKernel(float* __restrict__ comb, int n, int iters, float hcEps) {
    __shared__ float c[32];
    float* ct = comb + int64_t(blockIdx.x) * n * n;
    if (threadIdx.x < n * n) c[threadIdx.x] = ct[threadIdx.x];
    __syncwarp();
    mhcSinkhorn(c, n, iters, hcEps);
    if (threadIdx.x < n * n) ct[threadIdx.x] = c[threadIdx.x];
}

// Per token: x[t, d] = Σ_i pre[i] · s[i, d] for d in this block's slice [blockIdx.y · dPerBlock, + dPerBlock)
// (mhcMixToken; block 0 writes post and comb). Dynamic shared memory: mhcMixToken's.
__global__ void mhcMixKernel(const float* __restrict__ streams, int64_t D, int n, const float* __restrict__ part,
                             int nChunks, const float* __restrict__ base, const float* __restrict__ scale, int iters,
                             float hcEps, float normEps, int64_t dPerBlock, float* __restrict__ x,
                             float* __restrict__ post, float* __restrict__ comb) {
    extern __shared__ float sh[];
    const int stride = 1 + 2 * n + n * n;
    const int64_t d0 = int64_t(blockIdx.y) * dPerBlock;
    const int64_t d1 = d0 + dPerBlock < D ? d0 + dPerBlock : D;
    mhcMixToken(streams, D, n, part + int64_t(blockIdx.x) * nChunks * stride, nChunks, base, scale, iters, hcEps,
                normEps, d0, d1, blockIdx.y == 0, x, post, comb, sh);
}

// mhcPre in one launch: grid (T, nChunks), 128 threads (WIDE: 256, n = 4). Each block computes its chunk's
// partials (mhcPartialBlock / mhcPartialBlockWide) and counts its arrival at cnt[t] (acquire-release, after a
// barrier); the last block of token t — whichever it is — mixes the whole token (mhcMixToken over all of D)
// and resets cnt[t] for the next call. The same operations in the same order as the two launches of the
// same partial form: bit-identical results, one kernel boundary fewer.
template <int DT, bool WIDE>
__global__ void __launch_bounds__(WIDE ? kMhcWideThreads : kMhcThreads)
    mhcPreFusedKernel(const float* __restrict__ streams, int64_t D, int n, const void* __restrict__ fn, int nChunks,
                      float* __restrict__ part, int* __restrict__ cnt, const float* __restrict__ base,
                      const float* __restrict__ scale, int iters, float hcEps, float normEps, float* __restrict__ x,
                      float* __restrict__ post, float* __restrict__ comb) {
    static_assert(!WIDE || DT == 0, "the wide partial sums read a BF16 fn");
    extern __shared__ float sh[];
    __shared__ int lastS;
    const int mix = 2 * n + n * n;
    if constexpr (WIDE)
        mhcPartialBlockWide(streams, int64_t(n) * D, fn, nChunks, part, sh);
    else
        mhcPartialBlock<DT>(streams, int64_t(n) * D, fn, mix, nChunks, part, sh);
    __syncthreads();  // every thread's partial stores, then thread 0's arrival publishes them
    if (threadIdx.x == 0) {
        const int old = cuda::atomAddAcqRel(cnt + blockIdx.x, 1);
        lastS = old == nChunks - 1;
        if (lastS) cnt[blockIdx.x] = 0;
    }
    __syncthreads();
    if (!lastS) return;
    mhcMixToken(streams, D, n, part + int64_t(blockIdx.x) * nChunks * (1 + mix), nChunks, base, scale, iters, hcEps,
                normEps, 0, D, true, x, post, comb, sh);
}

// streams[t, i, d] = post[t, i] · y[t, d] + Σ_j comb[t, j, i] · old[t, j, d]; n ≤ MAXN, the old values
// are read before any is written (in place).
template <int MAXN>
__global__ void mhcPostKernel(float* __restrict__ streams, int64_t T, int64_t D, int n, const float* __restrict__ y,
                              const float* __restrict__ post, const float* __restrict__ comb) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= T * D) return;
    const int64_t t = idx / D, d = idx % D;
    float* s = streams + t * n * D + d;
    const float* c = comb + t * n * n;
    float old[MAXN];
#pragma unroll
    for (int j = 0; j < MAXN; ++j)
        if (j < n) old[j] = s[int64_t(j) * D];
    const float yv = y[t * D + d];
#pragma unroll
    for (int i = 0; i < MAXN; ++i) {
        if (i >= n) break;
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < MAXN; ++j)
            if (j < n) acc += c[j * n + i] * old[j];
        s[int64_t(i) * D] = post[t * n + i] * yv + acc;
    }
}

__global__ void mhcHeadKernel(const float* __restrict__ streams, int64_t T, int64_t D, int n, float* __restrict__ out) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= T * D) return;
    const int64_t t = idx / D, d = idx % D;
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) acc += streams[(t * n + i) * D + d];
    out[idx] = acc / float(n);
}

// ---------------------------------------------------------------------------------------------------
// KDA

// A batched call's sequences (causalConvSiluBatch, kdaRecurrentBatch): sequence s = blockIdx.y (conv) or
// blockIdx.z (recurrence) owns rows [rowStart[s], rowStart[s + 1]) and its state states[s]. Null: one sequence,
// the kernel's own arguments.
struct SeqStates {
    const int32_t* rowStart = nullptr;  // [nSeqs + 1]
    float* const* states = nullptr;     // [nSeqs] device pointers
};

// out[t, c] = silu(Σ_i w[c, i] · window[t + i]) where window = [state (K−1 rows, oldest first); x (T rows)].
__global__ void convSiluKernel(const float* __restrict__ x, int64_t T, int64_t C, int K, const float* __restrict__ w,
                               const float* __restrict__ state, float* __restrict__ out, SeqStates seqs) {
    if (seqs.rowStart) {
        const int s = blockIdx.y;
        const int64_t r0 = seqs.rowStart[s];
        T = seqs.rowStart[s + 1] - r0;
        x += r0 * C;
        out += r0 * C;
        state = seqs.states[s];
    }
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= T * C) return;
    const int64_t t = idx / C, c = idx % C;
    float acc = 0.0f;
    for (int i = 0; i < K; ++i) {
        const int64_t p = t + i;  // window position
        const float win = p < K - 1 ? state[p * C + c] : x[(p - (K - 1)) * C + c];
        acc += w[c * K + i] * win;
    }
    out[idx] = acc / (1.0f + expf(-acc));
}

// state[i, c] = window[T + i] for i < K−1 (the last K−1 inputs, oldest first). Ascending i reads only
// rows above the one it writes (T ≥ 1), so the shift is safe in place.
__global__ void convStateKernel(const float* __restrict__ x, int64_t T, int64_t C, int K, float* state, SeqStates seqs) {
    if (seqs.rowStart) {
        const int s = blockIdx.y;
        const int64_t r0 = seqs.rowStart[s];
        T = seqs.rowStart[s + 1] - r0;
        if (T <= 0) return;  // a sequence without rows keeps its state
        x += r0 * C;
        state = seqs.states[s];
    }
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int i = 0; i < K - 1; ++i) {
        const int64_t p = T + i;
        state[int64_t(i) * C + c] = p < K - 1 ? state[p * C + c] : x[(p - (K - 1)) * C + c];
    }
}

__global__ void kdaGateKernel(float* __restrict__ f, int64_t T, int64_t H, int64_t Dk, const float* __restrict__ aLog,
                              const float* __restrict__ dtBias, float lowerBound, bool softplusBranch) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= T * H * Dk) return;
    const int64_t hd = idx % (H * Dk), h = hd / Dk;
    const float decay = expf(aLog[h]);
    const float g = f[idx] + dtBias[hd];
    if (softplusBranch) {
        const float sp = g > 20.0f ? g : logf(1.0f + expf(g));
        f[idx] = -decay * sp;
    } else {
        f[idx] = lowerBound * sigmoidf_(decay * g);
    }
}

// The gated delta rule for head blockIdx.x, state columns [32·blockIdx.y, +32), all T tokens.
// Block (32, RG): lane = column, threadIdx.y = row group; rows grp·R … grp·R + R − 1 (< Dk) live in
// registers for the whole call. Dv = Dk. 32·RG ≥ Dk (R ≤ 32), so the first Dk threads stage one
// element of q, k, exp(g) each.
//
// Per token t, in two phases around ONE barrier:
//   phase 1: q̂, k̂ from token t's staged values and norms; S ← S·exp(g); partial Sᵀk̂ of this row group
//            → red1[t&1]. Meanwhile token t+1's inputs (loaded during token t−1) are staged into the
//            other parity of the shared buffers, with their warp-partial norms, and token t+2 is loaded.
//   barrier
//   phase 2: mem = β(v − Σ red1); S ← S + k̂·mem; partial Sᵀq̂ → red2[t&1]; row group 0 finishes the
//            previous token's output from red2[(t−1)&1] (its partials were written before the barrier).
// Every shared buffer is double-buffered by token parity; a buffer of parity p is rewritten only after
// a barrier that every reader of its previous contents has passed (phase 2 reads registers only, apart
// from red1[t&1] / red2[(t−1)&1]).
// Dynamic shared memory: stage[2][3·Dk] (q, k, exp g) | wsum[2][64] | red1[2][RG·32] | red2[2][RG·32].
template <int R, int MAXT>
__global__ void __launch_bounds__(MAXT) kdaRecurrentKernel(const float* __restrict__ qkv, int64_t T, int H, int Dk,
                                   const float* __restrict__ g, const float* __restrict__ betaLogits,
                                   float* __restrict__ state, float* __restrict__ out, float qScale, SeqStates seqs) {
    extern __shared__ float sh[];
    if (seqs.rowStart) {  // sequence blockIdx.z of a batched call: its rows and its state
        const int s = blockIdx.z;
        const int64_t r0 = seqs.rowStart[s], HD = int64_t(H) * Dk;
        T = seqs.rowStart[s + 1] - r0;
        qkv += r0 * 3 * HD;
        g += r0 * HD;
        betaLogits += r0 * H;
        out += r0 * HD;
        state = seqs.states[s];
    }
    const int Dv = Dk, RG = blockDim.y;
    float* stage = sh;               // [2][3·Dk]
    float* wsum = stage + 6 * Dk;    // [2][64]: warp partial Σq² at [0, 32), Σk² at [32, 64)
    float* red1 = wsum + 128;        // [2][RG·32]
    float* red2 = red1 + 2 * RG * 32;  // [2][RG·32]
    const int h = blockIdx.x, lane = threadIdx.x, grp = threadIdx.y;
    const int tid = grp * 32 + lane;
    const int j = blockIdx.y * 32 + lane;
    const bool colOk = j < Dv;
    const int64_t C = int64_t(H) * Dk;

    float S[R];
    float* Sh = state + int64_t(h) * Dk * Dv;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int i = grp * R + r;
        S[r] = (i < Dk && colOk) ? Sh[int64_t(i) * Dv + j] : 0.0f;
    }

    // Raw inputs of one token, loaded ahead: q[i], k[i], g[i] for i = tid (< Dk), v[j], β logit.
    float qv = 0.0f, kv = 0.0f, gv = 0.0f, vv = 0.0f, bl = 0.0f;
    auto load = [&](int64_t t) {
        const float* row = qkv + t * 3 * C;
        if (tid < Dk) {
            qv = row[int64_t(h) * Dk + tid];
            kv = row[C + int64_t(h) * Dk + tid];
            gv = g[(t * H + h) * Dk + tid];
        }
        vv = colOk ? row[2 * C + int64_t(h) * Dv + j] : 0.0f;
        bl = betaLogits[t * H + h];
    };
    // Writes the loaded token's q, k, exp(g) and warp-partial squared norms into parity p.
    auto stageInto = [&](int p) {
        float* b = stage + p * 3 * Dk;
        float qsq = 0.0f, ksq = 0.0f;
        if (tid < Dk) {
            b[tid] = qv;
            b[Dk + tid] = kv;
            b[2 * Dk + tid] = expf(gv);
            qsq = qv * qv;
            ksq = kv * kv;
        }
        qsq = warpSum(qsq);
        ksq = warpSum(ksq);
        if (lane == 0) {
            wsum[p * 64 + grp] = qsq;
            wsum[p * 64 + 32 + grp] = ksq;
        }
    };

    float vCur = 0.0f, blCur = 0.0f;  // v[j] and the β logit of the token being computed
    if (T > 0) {
        load(0);
        stageInto(0);
        vCur = vv;
        blCur = bl;
        if (T > 1) load(1);
    }
    __syncthreads();

    for (int64_t t = 0; t < T; ++t) {
        const int p = int(t & 1);
        // Phase 1.
        const float* b = stage + p * 3 * Dk;
        float qn2 = 0.0f, kn2 = 0.0f;
        for (int w = 0; w < RG; ++w) {
            qn2 += wsum[p * 64 + w];
            kn2 += wsum[p * 64 + 32 + w];
        }
        const float qn = sqrtf(qn2 + 1e-6f), kn = sqrtf(kn2 + 1e-6f);
        float kk[R], qq[R];
        float part = 0.0f;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int i = grp * R + r;
            if (i < Dk) {
                kk[r] = b[Dk + i] / kn;
                qq[r] = b[i] / qn * qScale;
                S[r] *= b[2 * Dk + i];
                part += S[r] * kk[r];
            } else {
                kk[r] = qq[r] = 0.0f;  // padded rows: S stays 0
            }
        }
        red1[p * RG * 32 + grp * 32 + lane] = part;
        const float vNow = vCur, beta = sigmoidf_(blCur);
        if (t + 1 < T) {  // uniform over the block
            stageInto(1 - p);
            vCur = vv;
            blCur = bl;
            if (t + 2 < T) load(t + 2);
        }
        __syncthreads();
        // Phase 2.
        float mem = 0.0f;
        for (int w = 0; w < RG; ++w) mem += red1[p * RG * 32 + w * 32 + lane];
        mem = (vNow - mem) * beta;
        float op = 0.0f;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            S[r] += kk[r] * mem;
            op += S[r] * qq[r];
        }
        red2[p * RG * 32 + grp * 32 + lane] = op;
        if (t > 0 && grp == 0 && colOk) {
            float o = 0.0f;
            for (int w = 0; w < RG; ++w) o += red2[(1 - p) * RG * 32 + w * 32 + lane];
            out[((t - 1) * H + h) * Dv + j] = o;
        }
    }
    __syncthreads();
    if (T > 0 && grp == 0 && colOk) {
        const int p = int((T - 1) & 1);
        float o = 0.0f;
        for (int w = 0; w < RG; ++w) o += red2[p * RG * 32 + w * 32 + lane];
        out[((T - 1) * H + h) * Dv + j] = o;
    }

#pragma unroll
    for (int r = 0; r < R; ++r) {
        const int i = grp * R + r;
        if (i < Dk && colOk) Sh[int64_t(i) * Dv + j] = S[r];
    }
}

// seqs.rowStart: a batched call of nSeqs sequences (grid.z), T unused; else one sequence of T rows.
template <int R, int MAXT>
void launchKdaRecurrent(cudaStream_t st, const float* qkv, int64_t T, int H, int Dk, const float* g, const float* beta,
                        float* state, float* out, SeqStates seqs = {}, int64_t nSeqs = 1) {
    const int RG = (Dk + R - 1) / R;
    const dim3 block{32u, unsigned(RG)}, grid{unsigned(H), unsigned((Dk + 31) / 32), unsigned(nSeqs)};
    const size_t smem = size_t(6 * Dk + 128 + 4 * RG * 32) * sizeof(float);
    TS_CHECK(32 * RG <= MAXT, "kdaRecurrent: block too large");
    cuda::launchPlain(kdaRecurrentKernel<R, MAXT>, grid, block, smem, st, qkv, T, H, Dk, g, beta, state, out,
                      1.0f / sqrtf(float(Dk)), seqs);
}

// o[r, j] ← w[j] · (o[r, j] · inv_r) · sigmoid(gate[r, j]), one warp per row r of Dv.
__global__ void gatedRmsnormKernel(float* __restrict__ o, int64_t rows, int64_t Dv, const float* __restrict__ w,
                                   float eps, const float* __restrict__ gate) {
    const int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (r >= rows) return;  // whole warps leave together
    float* x = o + r * Dv;
    const float* gr = gate + r * Dv;
    float sq = 0.0f;
    for (int64_t j = lane; j < Dv; j += 32) sq += x[j] * x[j];
    sq = warpSum(sq);
    const float inv = 1.0f / sqrtf(sq / float(Dv) + eps);
    for (int64_t j = lane; j < Dv; j += 32) x[j] = w[j] * (x[j] * inv) * sigmoidf_(gr[j]);
}

bool overlaps(const Buffer& a, size_t aBytes, const Buffer& b, size_t bBytes) {
    const uint8_t *a0 = a.bytes(), *b0 = b.bytes();
    return a0 < b0 + bBytes && b0 < a0 + aBytes;
}

}  // namespace

// -------------------------------------------------------------------------------------------------------

void CudaBackend::mhcPre(const Buffer& streams, int64_t T, int64_t D, const HyperConnParams& p, const Buffer& x,
                         const Buffer& post, const Buffer& comb) {
    GraphOp op(*this, true, "mhcPre", {gk(streams.bytes()), gk(T), gk(D), gk(p.fn.data), gk(p.base.bytes()), gk(int64_t(p.n)), gk(x.bytes()), gk(post.bytes()), gk(comb.bytes())});
    if (op.skip()) return;
    const int n = p.n, mix = 2 * n + n * n;
    const int64_t width = int64_t(n) * D;
    TS_CHECK(n >= 1 && n <= kMixThreads && p.sinkhornIters >= 1, "mhcPre: n must be in [1, 256], sinkhornIters ≥ 1");
    TS_CHECK(p.fn.rows == mix && p.fn.cols == width, "mhcPre: fn must be [2n+n², n·D]");
    if (T <= 0 || D <= 0) return;
    const void* fn = deviceWeight(p.fn);
    // The partial sums' form: the wide one for a BF16 fn, n = 4, whole 2048-element chunks and 16-byte aligned
    // rows (GLM-5.3-Flash: D a multiple of 512), else the scalar one. Both variants below (one launch, two)
    // take the same form, so they agree bit for bit.
    const int dt = dtypeCode(p.fn.dtype);
    const bool wide = dt == 0 && n == 4 && width % kMhcWideChunk == 0 &&
                      ((reinterpret_cast<uintptr_t>(streams.bytes()) | reinterpret_cast<uintptr_t>(fn)) & 15u) == 0;
    const int chunk = wide ? kMhcWideChunk : kMhcChunk, threads1 = wide ? kMhcWideThreads : kMhcThreads;
    const int nChunks = int((width + chunk - 1) / chunk);
    auto* part = static_cast<float*>(scratch(kScratchA, size_t(T) * size_t(nChunks) * size_t(1 + mix) * 4));
    TS_CHECK(nChunks <= 65535, "mhcPre: n·D too large");
    const dim3 grid1{unsigned(T), unsigned(nChunks)};
    const size_t smem1 = size_t(threads1 / 32) * size_t(1 + mix) * 4;
    // The mixing stage's shared memory (mhcMixToken): m, pre, c, the token's partials.
    const size_t smemMix = size_t(1 + mix + n + n * n) * 4 + size_t(nChunks) * size_t(1 + mix) * 4;
    TS_CHECK(smemMix <= size_t(props().sharedMemPerBlockOptin), "mhcPre: n·D too large for the mixing kernel");
    // The Sinkhorn aside (n² ≤ 32): the kernels below leave comb unbalanced (iters 0) and mhcSinkhornKernel
    // finishes it on the side stream, while the layer's body — which needs x alone — runs; mhcPost joins it.
    // By default only inside a decode step's region, whose end joins whatever is pending.
    joinSide();  // an earlier call's Sinkhorn may still be writing this comb (no mhcPost between them)
    const int sideMode = mhccuda::sideSinkhorn();
    const bool aside = n * n <= 32 && (sideMode == 2 || (sideMode == 1 && inGraphRegion()));
    const int itersHere = aside ? 0 : p.sinkhornIters;
    auto sinkhornAside = [&] {
        if (!aside) return;
        cuda::launchPlain(mhcSinkhornKernel, unsigned(T), 32, 0, forkSide(), comb.f32(), n, p.sinkhornIters, p.hcEps);
        sideIssued();
    };
    if (mhccuda::fusedPre() && n <= kMhcThreads) {
        // One launch (mhcPreFusedKernel): per-token arrival counters, zero between calls.
        int* cnt = zeroedScratch(m_mhcCounters, size_t(T) * 4).i32();
        const size_t smem = std::max(smem1, smemMix);
        auto launchFused = [&](auto kernel) {
            if (smem > 48 * 1024)
                TS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
            cuda::launchPlain(kernel, grid1, threads1, smem, stream(), streams.f32(), D, n, fn, nChunks, part, cnt,
                              p.base.f32(), p.scale.f32(), itersHere, p.hcEps, p.normEps, x.f32(), post.f32(),
                              comb.f32());
        };
        if (wide) {
            launchFused(mhcPreFusedKernel<0, true>);
        } else {
            if (dt == 0) launchFused(mhcPreFusedKernel<0, false>);
            else if (dt == 1) launchFused(mhcPreFusedKernel<1, false>);
            else launchFused(mhcPreFusedKernel<2, false>);
        }
        sinkhornAside();
        return;
    }
    if (wide) {
        cuda::launchPlain(mhcPartialWideKernel, grid1, threads1, smem1, stream(), streams.f32(), width, fn, nChunks,
                          part);
    } else {
        switch (dt) {
        case 0:
            cuda::launchPlain(mhcPartialKernel<0>, grid1, threads1, smem1, stream(), streams.f32(), width, fn, mix,
                              nChunks, part);
            break;
        case 1:
            cuda::launchPlain(mhcPartialKernel<1>, grid1, threads1, smem1, stream(), streams.f32(), width, fn, mix,
                              nChunks, part);
            break;
        default:
            cuda::launchPlain(mhcPartialKernel<2>, grid1, threads1, smem1, stream(), streams.f32(), width, fn, mix,
                              nChunks, part);
            break;
        }
    }
    // Few tokens (decode): spread each token's D over several blocks, ~1024 columns each; many tokens:
    // one block per token (the grid is large enough, and Sinkhorn is not repeated).
    const int64_t dBlocks = T < 32 ? (D + 1023) / 1024 : 1;
    const int64_t dPerBlock = (D + dBlocks - 1) / dBlocks;
    const dim3 grid2{unsigned(T), unsigned(dBlocks)};
    if (smemMix > 48 * 1024)
        TS_CUDA_CHECK(cudaFuncSetAttribute(mhcMixKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smemMix)));
    cuda::launchPlain(mhcMixKernel, grid2, kMixThreads, smemMix, stream(), streams.f32(), D, n, part, nChunks,
                      p.base.f32(), p.scale.f32(), itersHere, p.hcEps, p.normEps, dPerBlock, x.f32(), post.f32(),
                      comb.f32());
    sinkhornAside();
}

void CudaBackend::mhcPost(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& y, const Buffer& post,
                          const Buffer& comb) {
    GraphOp op(*this, true, "mhcPost", {gk(streams.bytes()), gk(T), gk(D), gk(int64_t(n)), gk(y.bytes()), gk(post.bytes()), gk(comb.bytes())});
    if (op.skip()) return;
    TS_CHECK(n >= 1 && n <= 32, "mhcPost: n must be in [1, 32]");
    joinSide();  // comb's Sinkhorn, when mhcPre left it to the side stream
    if (T <= 0 || D <= 0) return;
    const unsigned blocks = blocksFor(T * D, 256);
    if (n <= 4)
        cuda::launchPlain(mhcPostKernel<4>, blocks, 256, 0, stream(), streams.f32(), T, D, n, y.f32(), post.f32(),
                          comb.f32());
    else if (n <= 8)
        cuda::launchPlain(mhcPostKernel<8>, blocks, 256, 0, stream(), streams.f32(), T, D, n, y.f32(), post.f32(),
                          comb.f32());
    else
        cuda::launchPlain(mhcPostKernel<32>, blocks, 256, 0, stream(), streams.f32(), T, D, n, y.f32(), post.f32(),
                          comb.f32());
}

void CudaBackend::mhcHead(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& out) {
    GraphOp op(*this, true, "mhcHead", {gk(streams.bytes()), gk(T), gk(D), gk(int64_t(n)), gk(out.bytes())});
    if (op.skip()) return;
    TS_CHECK(n >= 1, "mhcHead: n must be ≥ 1");
    if (T <= 0 || D <= 0) return;
    cuda::launchPlain(mhcHeadKernel, blocksFor(T * D, 256), 256, 0, stream(), streams.f32(), T, D, n, out.f32());
}

void CudaBackend::causalConvSilu(const Buffer& x, int64_t T, int64_t C, int K, const Buffer& w,
                                 const Buffer& convState, const Buffer& out) {
    GraphOp op(*this, false, "causalConvSilu", {gk(T), gk(C)});
    TS_CHECK(K >= 1, "causalConvSilu: K must be ≥ 1");
    if (T <= 0 || C <= 0) return;
    const size_t bytes = size_t(T) * size_t(C) * 4;
    const float* xs = x.f32();
    if (overlaps(x, bytes, out, bytes)) {  // in place: keep this call's inputs for the state update
        auto* copyOf = static_cast<float*>(scratch(kScratchB, bytes));
        TS_CUDA_CHECK(cudaMemcpyAsync(copyOf, x.f32(), bytes, cudaMemcpyDeviceToDevice, stream()));
        xs = copyOf;
    }
    cuda::launchPlain(convSiluKernel, blocksFor(T * C, 256), 256, 0, stream(), xs, T, C, K, w.f32(), convState.f32(),
                      out.f32(), SeqStates{});
    if (K > 1) {  // after the conv (stream order): it read the old state
        cuda::launchPlain(convStateKernel, blocksFor(C, 256), 256, 0, stream(), xs, T, C, K, convState.f32(),
                          SeqStates{});
    }
}

namespace {
// A batched call's rows and states on the device (kScratchIds): the states' pointers [nSeqs] then rowStart
// [nSeqs + 1]. Checks that every state holds `stateBytes`.
SeqStates uploadSeqStates(CudaBackend& be, const int64_t* rows, int64_t nSeqs, const Buffer* states, size_t stateBytes,
                          const char* op) {
    std::vector<int32_t> h(size_t(3 * nSeqs + 1));
    int64_t r0 = 0;
    int32_t* rowStart = h.data() + 2 * nSeqs;
    for (int64_t s = 0; s < nSeqs; ++s) {
        TS_CHECK(rows[s] >= 0, std::string(op) + ": negative rows");
        TS_CHECK(states[s].size() >= stateBytes, std::string(op) + ": a sequence's state is too small");
        const auto p = reinterpret_cast<uintptr_t>(states[s].f32());
        std::memcpy(h.data() + 2 * s, &p, sizeof(p));
        rowStart[s] = int32_t(r0);
        r0 += rows[s];
    }
    TS_CHECK(r0 <= int64_t(0x7fffffff), std::string(op) + ": too many rows");
    rowStart[nSeqs] = int32_t(r0);
    const int32_t* d = be.uploadInts(CudaBackend::kScratchIds, h.data(), int64_t(h.size()));
    return SeqStates{d + 2 * nSeqs, reinterpret_cast<float* const*>(d)};
}
}  // namespace

void CudaBackend::causalConvSiluBatch(const Buffer& x, const int64_t* rows, int64_t nSeqs, int64_t C, int K,
                                      const Buffer& w, const Buffer* convStates, const Buffer& out) {
    TS_CHECK(K >= 1, "causalConvSilu: K must be ≥ 1");
    int64_t T = 0, maxRows = 0;
    for (int64_t s = 0; s < nSeqs; ++s) {
        T += rows[s];
        maxRows = std::max(maxRows, rows[s]);
    }
    if (nSeqs <= 1 || T <= 0 || C <= 0 || nSeqs > 65535) {
        Backend::causalConvSiluBatch(x, rows, nSeqs, C, K, w, convStates, out);
        return;
    }
    GraphOp op(*this, false, "causalConvSiluBatch", {gk(T), gk(C)});
    TS_CHECK(!overlaps(x, size_t(T * C) * 4, out, size_t(T * C) * 4), "causalConvSiluBatch: x and out overlap");
    const SeqStates seqs = uploadSeqStates(*this, rows, nSeqs, convStates, size_t((K - 1) * C) * 4, "causalConvSilu");
    const dim3 convGrid{unsigned(blocksFor(maxRows * C, 256)), unsigned(nSeqs)};
    cuda::launchPlain(convSiluKernel, convGrid, 256, 0, stream(), x.f32(), 0, C, K, w.f32(), nullptr, out.f32(), seqs);
    if (K > 1) {  // after the conv (stream order): it read the old states
        const dim3 stateGrid{unsigned(blocksFor(C, 256)), unsigned(nSeqs)};
        cuda::launchPlain(convStateKernel, stateGrid, 256, 0, stream(), x.f32(), 0, C, K, nullptr, seqs);
    }
}

void CudaBackend::kdaGate(const Buffer& f, int64_t T, int64_t H, int64_t Dk, const Buffer& aLog, const Buffer& dtBias,
                          float lowerBound) {
    GraphOp op(*this, true, "kdaGate", {gk(f.bytes()), gk(T), gk(H), gk(Dk), gk(aLog.bytes()), gk(dtBias.bytes()), gf(lowerBound)});
    if (op.skip()) return;
    const int64_t n = T * H * Dk;
    if (n <= 0) return;
    cuda::launchPlain(kdaGateKernel, blocksFor(n, 256), 256, 0, stream(), f.f32(), T, H, Dk, aLog.f32(), dtBias.f32(),
                      lowerBound, std::isnan(lowerBound));
}

void CudaBackend::kdaRecurrent(const Buffer& qkv, int64_t T, int64_t H, int64_t Dk, const Buffer& g,
                               const Buffer& betaLogits, const Buffer& state, const Buffer& out) {
    GraphOp op(*this, false, "kdaRecurrent", {gk(T), gk(H)});
    TS_CHECK(Dk >= 1 && Dk <= 1024, "kdaRecurrent: head dim must be in [1, 1024] on CUDA");
    if (T <= 0) return;
    if (kdaChunkedPrefill(*this, qkv, T, H, Dk, g, betaLogits, state, out)) return;
    // R state rows per thread, RG = ⌈Dk/R⌉ row groups of 32 threads. Dk ≤ 128 (GLM-5.3-Flash): R = 8,
    // ≤ 512 threads (more threads in flight for the state stream); ≤ 256: R = 16, ≤ 512 threads (the
    // launch bound caps registers at 128); larger (no real model): R = 32, ≤ 1024 threads, may spill.
    const float *q = qkv.f32(), *gp = g.f32(), *bp = betaLogits.f32();
    if (Dk <= 128) launchKdaRecurrent<8, 512>(stream(), q, T, int(H), int(Dk), gp, bp, state.f32(), out.f32());
    else if (Dk <= 256) launchKdaRecurrent<16, 512>(stream(), q, T, int(H), int(Dk), gp, bp, state.f32(), out.f32());
    else launchKdaRecurrent<32, 1024>(stream(), q, T, int(H), int(Dk), gp, bp, state.f32(), out.f32());
}

void CudaBackend::kdaRecurrentBatch(const Buffer& qkv, const int64_t* rows, int64_t nSeqs, int64_t H, int64_t Dk,
                                    const Buffer& g, const Buffer& betaLogits, const Buffer* states, const Buffer& out) {
    // One launch over every sequence for decode-sized steps: each sequence below the chunked prefill's threshold
    // (the recurrent kernel's calls); otherwise each sequence's own call (a long prefill takes the chunked path).
    const int64_t chunkFrom = kdacuda::chunkMinTokensNow();  // 0: the chunked path is off
    int64_t T = 0;
    bool recurrentOnly = true;
    for (int64_t s = 0; s < nSeqs; ++s) {
        T += rows[s];
        recurrentOnly = recurrentOnly && (chunkFrom == 0 || rows[s] < chunkFrom);
    }
    if (nSeqs <= 1 || T <= 0 || !recurrentOnly || Dk > 128 || Dk < 1 || nSeqs > 65535) {
        Backend::kdaRecurrentBatch(qkv, rows, nSeqs, H, Dk, g, betaLogits, states, out);
        return;
    }
    GraphOp op(*this, false, "kdaRecurrentBatch", {gk(T), gk(H)});
    const SeqStates seqs = uploadSeqStates(*this, rows, nSeqs, states, size_t(H * Dk * Dk) * 4, "kdaRecurrent");
    launchKdaRecurrent<8, 512>(stream(), qkv.f32(), 0, int(H), int(Dk), g.f32(), betaLogits.f32(), nullptr, out.f32(),
                               seqs, nSeqs);
}

void CudaBackend::gatedRmsnorm(const Buffer& o, int64_t T, int64_t H, int64_t Dv, const Buffer& w, float eps,
                               const Buffer& gate) {
    GraphOp op(*this, true, "gatedRmsnorm", {gk(o.bytes()), gk(T), gk(H), gk(Dv), gk(w.bytes()), gf(eps), gk(gate.bytes())});
    if (op.skip()) return;
    const int64_t rows = T * H;
    if (rows <= 0 || Dv <= 0) return;
    constexpr int kWarps = 8;
    cuda::launchPlain(gatedRmsnormKernel, blocksFor(rows, kWarps), kWarps * 32, 0, stream(), o.f32(), rows, Dv, w.f32(),
                      eps, gate.f32());
}

}  // namespace ts
