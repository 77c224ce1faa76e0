// cuda_moe: MoE routing and the row gather / scatter of the per-expert path, on the GPU. The CPU backend
// (kernels/cpu/cpu_moe.cpp) is the truth.
//
// moeRoute — two launches, then one device→host copy of [idx | weight] and a stream sync (host outputs);
// moeRouteDevice — the same two launches writing the caller's device buffers (no copy, no sync: the fused
// EXL3 MoE reads them there, cuda_exl3_moe_routed.cu):
//   1. routerLogitsKernel: logits = x · Wᵀ, s = sigmoid(logit), choice = s + bias, into scratch [T, E].
//      The discrete choice must equal the CPU's, so the dot product is computed in the CPU's exact
//      order (cpu::dot): lane j of 8 accumulates the elements i ≡ j (mod 8) in increasing i, the lanes are
//      combined as ((a0+a4)+(a1+a5))+((a2+a6)+(a3+a7)), multiply and add rounded separately unless the
//      host compiler fuses them (aarch64 / FMA builds; kCpuFusesMulAdd): the logits are bit-identical to
//      the CPU's (checked against cpu::dot by a host emulation of this kernel's order). The sigmoid's
//      exp is taken in double and rounded once, which equals glibc's expf (≤ 0.502 ulp) on all but
//      ~0.03% of arguments (measured on the host; there by 1 ulp), where CUDA's expf has a 2-ulp error
//      bound. So s and choice equal the CPU's, exact ties (duplicated experts) break the same way, and
//      a flip needs two experts within an ulp at the top-k boundary.
//      Launch: one 64-thread block per 8 experts × 8 tokens (thread = expert·8 + lane); weight and x
//      columns are staged through shared memory 256 at a time (coalesced 16-byte loads), the next 256
//      prefetched into registers while the current ones are used. Decode (T ≤ 4, rows 16-byte aligned,
//      shared memory permitting): routerLogitsWholeKernel copies the block's whole weight slice and x into
//      shared memory at once (one memory latency per call instead of one per 256 columns), same lanes,
//      same order, same bits.
//   2. routerSelectKernel: one warp per token. Group-limited masking exactly as the CPU (group score =
//      sum of the two best choices, groups ranked by a stable descending sort, the experts of all but
//      the best topkGroup groups set to −∞), then topk rounds of a warp arg-max in the order (choice desc, id asc):
//      round k takes the best expert that comes after round k−1's in that order, which is the CPU's
//      partial_sort prefix. Weights = s[idx] / (Σ s[idx] + 1e-20) (if norm) × scaling, summed in k order.
//      With E ≤ 512 and topk ≤ 32 each lane keeps its choice / score values in registers for all rounds.
//      Without groups and T ≤ 64: routerRankSelectKernel, one block per token counting ranks in that order
//      within chunks of 32 experts, then among the chunks' candidates (the same top-k, the same order).
// gatherRows: rows[i] = x[sel[i]]; one block per (row, 1024 columns).
// scatterAddRows: y[sel[i]] += scale[i] · rows[i]; targets may repeat. Deterministic without atomics: the
//   host groups i by target (stable, so increasing i), and one block per (target, 1024 columns) adds that
//   target's rows in increasing i — the CPU's order, so the result is the CPU's bit for bit.
//
// Decode (T = 1..4): moeRoute costs two small launches plus a ~10 µs host round trip (moeRouteDevice: no
// round trip; measured on the H200 at 288 × 4096 before the decode forms: 41 + 17 µs per call); the per-expert
// path costs per selected expert one gather, three linears, one swiglu and one scatter launch (the fused
// EXL3 path, moeExpertsFused in cuda_exl3.cu, replaces all of those with one launch).
//
// Test: `twinspark-cli selftest --backend cuda --filter moe` (engine/selftest/cases_moe.cpp: 288 experts
// top-8 at hidden 4096, the tiny configs, group-limited routing, deliberate ties, repeated scatter targets).
// Benchmark: nsys on a decode step (kernels routerLogitsKernel / routerSelectKernel / scatterAddRowsKernel).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include <cuda_pipeline.h>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"

namespace ts {
namespace {

// Whether the CPU backend's `acc += a * b` loops compile to fused multiply-adds: GCC contracts them
// (-ffp-contract=fast is its C++ default) wherever the target has FMA — always on aarch64 (GB10), on
// x86-64 only when built with -mfma / -march=... (the default build is not).
#if defined(__aarch64__) || defined(__FMA__)
constexpr bool kCpuFusesMulAdd = true;
#else
constexpr bool kCpuFusesMulAdd = false;
#endif

template <bool FUSED>
__device__ __forceinline__ float mulAdd(float acc, float a, float b) {
    if constexpr (FUSED) return __fmaf_rn(a, b, acc);
    else return __fadd_rn(acc, __fmul_rn(a, b));
}

constexpr int kRouteExperts = 8;   // experts per block
constexpr int kRouteTokens = 8;    // tokens per block (each staged weight is used for all of them); decode
                                   // calls (T = 1, T ≤ 4) use blocks of 1 / 4 tokens, so no lane spends 8× the
                                   // multiply-adds on padding rows (the summation order is the same)
constexpr int kRouteChunk = 256;   // weight columns staged per step (a multiple of 8: lanes stay i mod 8)
constexpr int kRoutePad = kRouteChunk + 8;  // row pitch in shared memory: 4 experts of a warp hit distinct banks
constexpr int kRouteThreads = kRouteExperts * 8;
constexpr int kRoutePadBytes = 32;  // routerLogitsWholeKernel's weight rows: 8 banks apart

// Eight weights W[e, c .. c+8) widened to fp32 (16-byte loads when vec; zeros past E or D).
template <int DT>
__device__ __forceinline__ void routerLoad8(const void* W, int64_t e, int64_t c, int64_t E, int64_t D, bool vec,
                                            float (&f)[8]) {
    if (vec && e < E && c + 8 <= D) {
        if constexpr (DT == 2) {
            const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(W) + e * D + c);
            const float4 a = __ldg(p), b = __ldg(p + 1);
            f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w; f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
        } else {
            const uint4 u = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(W) + e * D + c));
            const uint32_t h[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                if constexpr (DT == 0) {  // bf16 → fp32: the high half of the fp32 bits
                    f[2 * q] = __uint_as_float(h[q] << 16);
                    f[2 * q + 1] = __uint_as_float(h[q] & 0xffff0000u);
                } else {
                    f[2 * q] = __half2float(__ushort_as_half(static_cast<unsigned short>(h[q] & 0xffffu)));
                    f[2 * q + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(h[q] >> 16)));
                }
            }
        }
    } else {
#pragma unroll
        for (int q = 0; q < 8; ++q) f[q] = (e < E && c + q < D) ? cuda::loadWeight(W, e * D + c + q, DT) : 0.0f;
    }
}

// x [T, D] fp32, W [E, D] (dtype DT), bias [E] fp32 or null → s, choice [T, E].
// Each step stages 256 columns of the block's 8 experts and 8 tokens in shared memory; the next step's
// columns are already being fetched into registers while this step computes (one memory latency per
// call instead of one per step: at T = 1 the call is latency-bound, 36 blocks for 288 experts).
template <int DT, bool FUSED, int TOK>
__global__ void __launch_bounds__(kRouteThreads)
    routerLogitsKernel(const float* __restrict__ x, const void* __restrict__ W, const float* __restrict__ bias,
                       int64_t T, int64_t E, int64_t D, bool vecW, bool vecX, float* __restrict__ sOut,
                       float* __restrict__ choiceOut) {
    constexpr int kWPerThread = (kRouteExperts * kRouteChunk / 8) / kRouteThreads;   // 8-column groups: 4
    constexpr int kXPerThread = (TOK * kRouteChunk / 4) / kRouteThreads;    // 4-column groups: 8
    __shared__ float ws[kRouteExperts][kRoutePad];
    __shared__ __align__(16) float xs[TOK][kRouteChunk];
    const int tid = threadIdx.x, el = tid >> 3, j = tid & 7;
    const int64_t e0 = int64_t(blockIdx.x) * kRouteExperts, t0 = int64_t(blockIdx.y) * TOK;
    const int64_t e = e0 + el;
    float wr[kWPerThread][8], xr[kXPerThread][4];

    auto fetch = [&](int64_t c0) {
#pragma unroll
        for (int r = 0; r < kWPerThread; ++r) {
            const int v = tid + r * kRouteThreads, ee = v / (kRouteChunk / 8), cc = (v % (kRouteChunk / 8)) * 8;
            routerLoad8<DT>(W, e0 + ee, c0 + cc, E, D, vecW, wr[r]);
        }
#pragma unroll
        for (int r = 0; r < kXPerThread; ++r) {
            const int v = tid + r * kRouteThreads, tt = v / (kRouteChunk / 4), cc = (v % (kRouteChunk / 4)) * 4;
            const int64_t t = t0 + tt, c = c0 + cc;
            if (vecX && t < T && c + 4 <= D) {
                const float4 a = __ldg(reinterpret_cast<const float4*>(x + t * D + c));
                xr[r][0] = a.x; xr[r][1] = a.y; xr[r][2] = a.z; xr[r][3] = a.w;
            } else {
#pragma unroll
                for (int q = 0; q < 4; ++q) xr[r][q] = (t < T && c + q < D) ? x[t * D + c + q] : 0.0f;
            }
        }
    };
    auto stash = [&]() {
#pragma unroll
        for (int r = 0; r < kWPerThread; ++r) {
            const int v = tid + r * kRouteThreads, ee = v / (kRouteChunk / 8), cc = (v % (kRouteChunk / 8)) * 8;
#pragma unroll
            for (int q = 0; q < 8; ++q) ws[ee][cc + q] = wr[r][q];
        }
#pragma unroll
        for (int r = 0; r < kXPerThread; ++r) {
            const int v = tid + r * kRouteThreads, tt = v / (kRouteChunk / 4), cc = (v % (kRouteChunk / 4)) * 4;
            *reinterpret_cast<float4*>(&xs[tt][cc]) = make_float4(xr[r][0], xr[r][1], xr[r][2], xr[r][3]);
        }
    };

    float acc[TOK];
#pragma unroll
    for (int tt = 0; tt < TOK; ++tt) acc[tt] = 0.0f;
    fetch(0);
    stash();
    __syncthreads();
    for (int64_t c0 = 0; c0 < D; c0 += kRouteChunk) {
        const bool more = c0 + kRouteChunk < D;
        if (more) fetch(c0 + kRouteChunk);
        const int cEnd = int(D - c0 < kRouteChunk ? D - c0 : kRouteChunk);
        for (int m = j; m < cEnd; m += 8) {  // columns c0 + m ≡ j (mod 8), increasing: the CPU's lane j
            const float w = ws[el][m];
#pragma unroll
            for (int tt = 0; tt < TOK; ++tt) acc[tt] = mulAdd<FUSED>(acc[tt], xs[tt][m], w);
        }
        __syncthreads();
        if (more) {
            stash();
            __syncthreads();
        }
    }
#pragma unroll
    for (int tt = 0; tt < TOK; ++tt) {
        // ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7)), lanes j = 0..7 of one expert are adjacent.
        float v = acc[tt];
        v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 4));  // j < 4: a_j + a_{j+4}
        v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 1));  // j = 0: p0 + p1; j = 2: p2 + p3
        v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 2));  // j = 0: (p0 + p1) + (p2 + p3)
        const int64_t t = t0 + tt;
        if (j == 0 && e < E && t < T) {
            const float ex = float(exp(-double(v)));  // ≈ glibc's expf (see the top comment)
            const float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, ex));
            sOut[t * E + e] = s;
            choiceOut[t * E + e] = bias ? __fadd_rn(s, bias[e]) : s;
        }
    }
}

// Decode form of routerLogitsKernel (T ≤ 4, D % 8 = 0, aligned rows; the same 8 experts × 8 lanes per block,
// the same per-lane order and lane combine, so the same bits): the block's whole weight slice [8, D] (in its
// own dtype) and x [TOK, D] are copied into shared memory with every 16-byte copy in flight at once, then
// each lane runs its chain. The chunked kernel waits one memory latency per 256 columns (16 for D = 4096:
// ~41 µs per call on the H200, a third of a decode step's MoE time); this one waits once. The weight rows
// sit kRoutePadBytes apart beyond their length: the 4 experts of a warp read the same columns, and with a
// pitch of D · 2 bytes (a multiple of 128) their rows fell on the same banks (4-way conflicts per read).
template <int DT, bool FUSED, int TOK>
__global__ void __launch_bounds__(kRouteThreads)
    routerLogitsWholeKernel(const float* __restrict__ x, const void* __restrict__ W, const float* __restrict__ bias,
                            int64_t T, int64_t E, int64_t D, float* __restrict__ sOut, float* __restrict__ choiceOut) {
    extern __shared__ __align__(16) uint8_t routeSmem[];
    constexpr int kWBytes = DT == 2 ? 4 : 2;
    const int tid = threadIdx.x, el = tid >> 3, j = tid & 7;
    const int64_t e0 = int64_t(blockIdx.x) * kRouteExperts, t0 = int64_t(blockIdx.y) * TOK;
    const int64_t e = e0 + el;
    const int64_t nE = E - e0 < kRouteExperts ? E - e0 : kRouteExperts, nT = T - t0 < TOK ? T - t0 : TOK;
    float* xs = reinterpret_cast<float*>(routeSmem);                       // [TOK, D]
    uint8_t* ws = routeSmem + size_t(TOK) * size_t(D) * 4;                 // [8, pitch] weights, dtype DT
    const int rowChunks = int(D * kWBytes / 16), pitch = int(D * kWBytes) + kRoutePadBytes;
    const int xChunks = int(nT * D / 4);  // 16-byte copies
    const uint8_t* wSrc = static_cast<const uint8_t*>(W) + e0 * D * kWBytes;
    for (int r = 0; r < int(nE); ++r)
        for (int q = tid; q < rowChunks; q += kRouteThreads)
            __pipeline_memcpy_async(ws + r * pitch + 16 * q, wSrc + (int64_t(r) * rowChunks + q) * 16, 16);
    for (int i = tid; i < xChunks; i += kRouteThreads) __pipeline_memcpy_async(xs + 4 * i, x + t0 * D + 4 * i, 16);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    float acc[TOK];
#pragma unroll
    for (int tt = 0; tt < TOK; ++tt) acc[tt] = 0.0f;
    if (el < nE) {
        const uint8_t* wr = ws + el * pitch;
        const int Di = int(D);
        for (int i = j; i < Di; i += 8) {  // columns ≡ j (mod 8), increasing: the CPU's lane j
            float w;
            if constexpr (DT == 2) w = reinterpret_cast<const float*>(wr)[i];
            else if constexpr (DT == 0) w = __uint_as_float(uint32_t(reinterpret_cast<const uint16_t*>(wr)[i]) << 16);
            else w = __half2float(__ushort_as_half(reinterpret_cast<const uint16_t*>(wr)[i]));
#pragma unroll
            for (int tt = 0; tt < TOK; ++tt) acc[tt] = mulAdd<FUSED>(acc[tt], tt < nT ? xs[tt * Di + i] : 0.0f, w);
        }
    }
#pragma unroll
    for (int tt = 0; tt < TOK; ++tt) {
        float v = acc[tt];
        v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 4));
        v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 1));
        v = __fadd_rn(v, __shfl_down_sync(0xffffffffu, v, 2));
        const int64_t t = t0 + tt;
        if (j == 0 && e < E && t < T) {
            const float ex = float(exp(-double(v)));
            const float sg = __fdiv_rn(1.0f, __fadd_rn(1.0f, ex));
            sOut[t * E + e] = sg;
            choiceOut[t * E + e] = bias ? __fadd_rn(sg, bias[e]) : sg;
        }
    }
}

constexpr int kSelectWarps = 4;
constexpr int kSelCache = 16;    // choice values per lane held in registers: E ≤ 512 (GLM-5.3-Flash: 288)
constexpr int kSelMaxTopk = 32;

// True when (va, ea) comes before (vb, eb) in the routing order: choice descending, then lower id.
__device__ __forceinline__ bool before(float va, int ea, float vb, int eb) {
    return va != vb ? va > vb : ea < eb;
}

// The routing weights of one token from its selected experts' scores score(0 .. topk−1), in the CPU's
// operations and order: Σ in k order, then each score / (Σ + 1e-20) when normTopk, × scaling (no contraction).
template <class Score>
__device__ __forceinline__ void writeTopkWeights(Score score, int topk, bool normTopk, float scaling, float* out) {
    float sum = 0.0f;
    for (int k = 0; k < topk; ++k) sum = __fadd_rn(sum, score(k));
    for (int k = 0; k < topk; ++k) {
        float w = score(k);
        if (normTopk) w = __fdiv_rn(w, __fadd_rn(sum, 1e-20f));
        out[k] = __fmul_rn(w, scaling);
    }
}

// One warp per token. s, choice [T, E]; groupScore / groupMasked [T, nGroup] scratch (nGroup > 1);
// idx [T, topk] int32, weight [T, topk] fp32.
__global__ void __launch_bounds__(kSelectWarps * 32)
    routerSelectKernel(const float* __restrict__ s, const float* __restrict__ choice, int64_t T, int E, int nGroup,
                       int topkGroup, int topk, bool normTopk, float scaling, float* groupScore, int* groupMasked,
                       int32_t* __restrict__ idx, float* __restrict__ weight) {
    const int lane = threadIdx.x & 31;
    const int64_t t = int64_t(blockIdx.x) * kSelectWarps + (threadIdx.x >> 5);
    if (t >= T) return;  // whole warp
    const float* ch = choice + t * E;
    const float* st = s + t * E;
    const int perGroup = E / nGroup;
    int* masked = nGroup > 1 ? groupMasked + t * nGroup : nullptr;
    if (nGroup > 1) {
        float* gs = groupScore + t * nGroup;
        for (int g = lane; g < nGroup; g += 32) {  // the CPU's running best two, ties to b2
            float b1 = -INFINITY, b2 = -INFINITY;
            for (int e = g * perGroup; e < (g + 1) * perGroup; ++e) {
                const float v = ch[e];
                if (v > b1) { b2 = b1; b1 = v; } else if (v > b2) b2 = v;
            }
            gs[g] = b1 + b2;
        }
        __syncwarp();
        for (int g = lane; g < nGroup; g += 32) {  // rank in a stable descending sort
            int rank = 0;
            for (int h = 0; h < nGroup; ++h) rank += (gs[h] > gs[g] || (gs[h] == gs[g] && h < g)) ? 1 : 0;
            masked[g] = rank >= topkGroup ? 1 : 0;
        }
        __syncwarp();
    }
    if (E <= 32 * kSelCache && topk <= kSelMaxTopk) {
        // The same rounds with the token's choice and score values held in registers (the loop below reads
        // them from memory once per round, and lane 0 reads the chosen scores back through idx: ~17 µs per
        // decode call on the H200, mostly dependent loads). Same comparisons, same order: the same bits.
        __shared__ float selS[kSelectWarps][kSelMaxTopk];
        const int w = threadIdx.x >> 5;
        float cv[kSelCache], sv[kSelCache];
#pragma unroll
        for (int q = 0; q < kSelCache; ++q) {
            const int e = lane + 32 * q;
            cv[q] = sv[q] = 0.0f;
            if (e < E) {
                const int g = perGroup > 0 ? e / perGroup : 0;
                cv[q] = (masked && g < nGroup && masked[g]) ? -INFINITY : ch[e];
                sv[q] = st[e];
            }
        }
        float prevV = 0.0f;
        int prevE = -1;
        for (int k = 0; k < topk; ++k) {
            float bestV = 0.0f, bestS = 0.0f;
            int bestE = -1;
#pragma unroll
            for (int q = 0; q < kSelCache; ++q) {
                const int e = lane + 32 * q;
                if (e >= E) continue;
                const float v = cv[q];
                if (prevE >= 0 && !before(prevV, prevE, v, e)) continue;  // already taken
                if (bestE < 0 || before(v, e, bestV, bestE)) { bestV = v; bestE = e; bestS = sv[q]; }
            }
            for (int o = 16; o > 0; o >>= 1) {
                const float ov = __shfl_xor_sync(0xffffffffu, bestV, o);
                const int oe = __shfl_xor_sync(0xffffffffu, bestE, o);
                const float os = __shfl_xor_sync(0xffffffffu, bestS, o);
                if (oe >= 0 && (bestE < 0 || before(ov, oe, bestV, bestE))) { bestV = ov; bestE = oe; bestS = os; }
            }
            prevV = bestV;
            prevE = bestE;
            if (lane == 0) {
                idx[t * topk + k] = bestE;
                selS[w][k] = bestS;
            }
        }
        if (lane == 0) writeTopkWeights([&](int k) { return selS[w][k]; }, topk, normTopk, scaling, weight + t * topk);
        return;
    }
    float prevV = 0.0f;
    int prevE = -1;
    for (int k = 0; k < topk; ++k) {
        float bestV = 0.0f;
        int bestE = -1;
        for (int e = lane; e < E; e += 32) {
            const int g = perGroup > 0 ? e / perGroup : 0;
            const float v = (masked && g < nGroup && masked[g]) ? -INFINITY : ch[e];
            if (prevE >= 0 && !before(prevV, prevE, v, e)) continue;  // already taken
            if (bestE < 0 || before(v, e, bestV, bestE)) { bestV = v; bestE = e; }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bestV, o);
            const int oe = __shfl_xor_sync(0xffffffffu, bestE, o);
            if (oe >= 0 && (bestE < 0 || before(ov, oe, bestV, bestE))) { bestV = ov; bestE = oe; }
        }
        prevV = bestV;
        prevE = bestE;
        if (lane == 0) idx[t * topk + k] = bestE;
    }
    if (lane == 0)
        writeTopkWeights([&](int k) { return st[idx[t * topk + k]]; }, topk, normTopk, scaling, weight + t * topk);
}

// Decode form of the selection without groups (nGroup = 1, E ≤ kRankMaxE): one block per token, in two
// phases over the routing order (choice descending, then lower id; total over distinct ids):
//   1. each warp takes chunks of 32 experts, one per lane; a lane counts the chunk's experts before its own
//      (32 shuffles issued together); lanes of rank < topk are the chunk's candidates, written to slot
//      chunk · topk + rank (slots left empty hold id −1);
//   2. each candidate counts the candidates before it. An expert of global rank r < topk is a candidate
//      (its rank within its chunk is ≤ r) and every expert before it is one too, so its count is r; every
//      other candidate has all topk true winners before it. So count < topk picks exactly the top-k, at
//      their places in round order: the rounds' result.
// The earlier form counted every expert against all E others in one pass (E² comparisons on one SM, a
// dependent chain of 576 shared-memory reads per thread at E = 288: ~11 µs per decode call on the H200);
// this one is 32 shuffles, then ≤ 72 reads (E = 288, top-8). Only a NaN choice (a broken router) can leave
// a rank unfilled: then id −1 and weight 0 (as before).
constexpr int kRankThreads = 512;
constexpr int kRankMaxE = 2048;
__global__ void __launch_bounds__(kRankThreads)
    routerRankSelectKernel(const float* __restrict__ s, const float* __restrict__ choice, int E, int topk,
                           bool normTopk, float scaling, int32_t* __restrict__ idx, float* __restrict__ weight) {
    __shared__ float candV[kRankMaxE / 32 * kSelMaxTopk];
    __shared__ int candE[kRankMaxE / 32 * kSelMaxTopk];
    __shared__ float selS[kSelMaxTopk];
    const int64_t t = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nChunks = (E + 31) / 32, nSlots = nChunks * topk;
    for (int i = threadIdx.x; i < nSlots; i += kRankThreads) candE[i] = -1;
    if (threadIdx.x < topk) {
        idx[t * topk + threadIdx.x] = -1;
        selS[threadIdx.x] = 0.0f;
    }
    __syncthreads();
    for (int ch = warp; ch < nChunks; ch += kRankThreads / 32) {
        const int e = ch * 32 + lane;
        const bool valid = e < E;
        const float v = valid ? choice[t * E + e] : 0.0f;
        int rank = 0;
#pragma unroll
        for (int q = 0; q < 32; ++q) {
            const float ov = __shfl_sync(0xffffffffu, v, q);
            const int oe = ch * 32 + q;
            rank += (oe < E && before(ov, oe, v, e)) ? 1 : 0;
        }
        if (valid && rank < topk) {
            candV[ch * topk + rank] = v;
            candE[ch * topk + rank] = e;
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < nSlots; c += kRankThreads) {
        const int e = candE[c];
        if (e < 0) continue;
        const float v = candV[c];
        int rank = 0;
#pragma unroll 8
        for (int j = 0; j < nSlots; ++j) {
            const int oe = candE[j];
            rank += (oe >= 0 && before(candV[j], oe, v, e)) ? 1 : 0;
        }
        if (rank < topk) {
            idx[t * topk + rank] = e;
            selS[rank] = s[t * E + e];
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) writeTopkWeights([&](int k) { return selS[k]; }, topk, normTopk, scaling, weight + t * topk);
}

constexpr int kRowThreads = 256;
constexpr int kRowChunk = kRowThreads * 4;  // columns per block

// rows[i, :] = x[sel[i], :]; grid (n, ⌈D / 1024⌉).
__global__ void __launch_bounds__(kRowThreads)
    gatherRowsKernel(const float* __restrict__ x, const int32_t* __restrict__ sel, int64_t D, float* __restrict__ rows) {
    const int64_t i = blockIdx.x;
    const float* src = x + int64_t(sel[i]) * D;
    float* dst = rows + i * D;
    const int64_t d0 = int64_t(blockIdx.y) * kRowChunk;
    const int64_t d1 = d0 + kRowChunk < D ? d0 + kRowChunk : D;
    for (int64_t d = d0 + threadIdx.x; d < d1; d += kRowThreads) dst[d] = src[d];
}

// For target u: y[target[u], :] += Σ_{p ∈ [off[u], off[u+1])} scale[src[p]] · rows[src[p], :] in p order.
template <bool FUSED>
__global__ void __launch_bounds__(kRowThreads)
    scatterAddRowsKernel(const float* __restrict__ rows, int64_t D, const int32_t* __restrict__ target,
                         const int32_t* __restrict__ off, const int32_t* __restrict__ src,
                         const float* __restrict__ scale, float* __restrict__ y) {
    const int64_t u = blockIdx.x;
    float* dst = y + int64_t(target[u]) * D;
    const int p0 = off[u], p1 = off[u + 1];
    const int64_t d0 = int64_t(blockIdx.y) * kRowChunk;
    const int64_t d1 = d0 + kRowChunk < D ? d0 + kRowChunk : D;
    for (int64_t d = d0 + threadIdx.x; d < d1; d += kRowThreads) {
        float acc = dst[d];
        for (int p = p0; p < p1; ++p) {
            const int64_t i = src[p];
            acc = mulAdd<FUSED>(acc, scale[i], rows[i * D + d]);
        }
        dst[d] = acc;
    }
}

}  // namespace

void CudaBackend::routeOnDevice(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E,
                                int64_t topk, int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling,
                                int32_t* dIdx, float* dWeight) {
    TS_CHECK(!gate.packed, "moeRoute needs a dense router weight, not a packed (EXL3) linear");
    const int64_t D = gate.cols;
    TS_CHECK(gate.rows >= E && E > 0 && E <= INT32_MAX, "moeRoute: router weight has fewer rows than experts");
    TS_CHECK(topk >= 1 && topk <= E, "moeRoute: topk out of range");
    TS_CHECK(nGroup >= 1 && nGroup <= E, "moeRoute: n_group out of range");
    TS_CHECK(x.size() >= size_t(T * D) * 4, "moeRoute: x too small");
    TS_CHECK(bias.empty() || bias.size() >= size_t(E) * 4, "moeRoute: bias too small");
    if (T <= 0) return;
    TS_CHECK(gate.dtype == DType::BF16 || gate.dtype == DType::F16 || gate.dtype == DType::F32,
             "moeRoute: router weight must be BF16, F16 or F32");
    const void* W = deviceWeight(gate);
    const size_t te = size_t(T * E);
    float* s = static_cast<float*>(scratch(kScratchA, te * 4 * 2));
    float* choice = s + te;
    float* groupScore = nullptr;
    int* groupMasked = nullptr;
    if (nGroup > 1) {
        groupScore = static_cast<float*>(scratch(kScratchC, size_t(T * nGroup) * 8));
        groupMasked = reinterpret_cast<int*>(groupScore + T * nGroup);
    }

    const bool vecW = D % 8 == 0;
    const bool vecX = D % 4 == 0 && (reinterpret_cast<uintptr_t>(x.f32()) & 15u) == 0;
    const float* B = bias.empty() ? nullptr : bias.f32();
    const int tok = T <= 1 ? 1 : T <= 4 ? 4 : kRouteTokens;
    const int64_t gy = (T + tok - 1) / tok;
    TS_CHECK(gy <= 65535, "moeRoute: too many tokens for one launch");
    const dim3 grid(unsigned((E + kRouteExperts - 1) / kRouteExperts), unsigned(gy));
    // Decode: the whole-slice kernel when its shared memory fits (D = 4096, BF16: 64 KiB + 16 KiB per token;
    // int offsets inside: D ≤ the opt-in shared memory).
    const size_t wBytes = gate.dtype == DType::F32 ? 4 : 2;
    const size_t wholeSmem = size_t(tok) * size_t(D) * 4 + size_t(kRouteExperts) * (size_t(D) * wBytes + kRoutePadBytes);
    const bool whole = tok <= 4 && vecW && vecX && (reinterpret_cast<uintptr_t>(W) & 15u) == 0 &&
                       wholeSmem <= size_t(props().sharedMemPerBlockOptin);
    auto launch = [&](auto dtTag) {
        constexpr int DT = decltype(dtTag)::value;
        if (whole) {
            auto fn = tok == 1 ? routerLogitsWholeKernel<DT, kCpuFusesMulAdd, 1> : routerLogitsWholeKernel<DT, kCpuFusesMulAdd, 4>;
            if (wholeSmem > 48 * 1024)
                TS_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(wholeSmem)));
            cuda::launchPlain(fn, grid, kRouteThreads, wholeSmem, m_stream, x.f32(), W, B, T, E, D, s, choice);
        } else if (tok == 1)
            cuda::launchPlain(routerLogitsKernel<DT, kCpuFusesMulAdd, 1>, grid, kRouteThreads, 0, m_stream, x.f32(), W,
                              B, T, E, D, vecW, vecX, s, choice);
        else if (tok == 4)
            cuda::launchPlain(routerLogitsKernel<DT, kCpuFusesMulAdd, 4>, grid, kRouteThreads, 0, m_stream, x.f32(), W,
                              B, T, E, D, vecW, vecX, s, choice);
        else
            cuda::launchPlain(routerLogitsKernel<DT, kCpuFusesMulAdd, kRouteTokens>, grid, kRouteThreads, 0, m_stream,
                              x.f32(), W, B, T, E, D, vecW, vecX, s, choice);
    };
    if (gate.dtype == DType::BF16) launch(std::integral_constant<int, 0>{});
    else if (gate.dtype == DType::F16) launch(std::integral_constant<int, 1>{});
    else launch(std::integral_constant<int, 2>{});
    if (nGroup == 1 && E <= kRankMaxE && topk <= kSelMaxTopk && T <= 64) {  // decode and short steps
        cuda::launchPlain(routerRankSelectKernel, unsigned(T), kRankThreads, 0, m_stream, s, choice, int(E), int(topk),
                          normTopk, scaling, dIdx, dWeight);
        return;
    }
    cuda::launchPlain(routerSelectKernel, unsigned((T + kSelectWarps - 1) / kSelectWarps), kSelectWarps * 32, 0,
                      m_stream, s, choice, T, int(E), int(nGroup), int(topkGroup < INT32_MAX ? topkGroup : INT32_MAX),
                      int(topk), normTopk, scaling, groupScore, groupMasked, dIdx, dWeight);
}

void CudaBackend::moeRoute(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E,
                           int64_t topk, int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling,
                           int32_t* hostIdx, float* hostWeight) {
    GraphOp op(*this, false, "moeRoute", {gk(T), gk(E)});
    if (T <= 0) return;
    const size_t tk = size_t(T * topk);
    // [idx | weight] contiguous, so one copy brings both back.
    auto* out = static_cast<uint8_t*>(scratch(kScratchB, tk * 8));
    routeOnDevice(x, T, gate, bias, E, topk, nGroup, topkGroup, normTopk, scaling, reinterpret_cast<int32_t*>(out),
                  reinterpret_cast<float*>(out + tk * 4));
    std::vector<uint8_t> host(tk * 8);
    TS_CUDA_CHECK(cudaMemcpyAsync(host.data(), out, tk * 8, cudaMemcpyDeviceToHost, m_stream));
    TS_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    std::memcpy(hostIdx, host.data(), tk * 4);
    std::memcpy(hostWeight, host.data() + tk * 4, tk * 4);
}

bool CudaBackend::moeRouteDevice(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E,
                                 int64_t topk, int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling,
                                 const Buffer& idx, const Buffer& weight) {
    GraphOp op(*this, true, "moeRouteDevice", {gk(x.bytes()), gk(T), gk(gate.data), gk(bias.bytes()), gk(E), gk(topk), gk(nGroup), gk(topkGroup), gk(int64_t(normTopk)), gf(scaling), gk(idx.bytes()), gk(weight.bytes())});
    if (op.skip()) return true;  // it returned true when it was recorded (the hash holds the path)
    if (T <= 0) return true;
    TS_CHECK(topk >= 1 && idx.size() >= size_t(T * topk) * 4 && weight.size() >= size_t(T * topk) * 4,
             "moeRouteDevice: idx / weight too small");
    routeOnDevice(x, T, gate, bias, E, topk, nGroup, topkGroup, normTopk, scaling, idx.i32(), weight.f32());
    return true;
}

void CudaBackend::gatherRows(const Buffer& x, int64_t D, const int32_t* hostSel, int64_t n, const Buffer& rows) {
    GraphOp op(*this, false, "gatherRows", {gk(D), gk(n)});
    TS_CHECK(rows.size() >= size_t(n * D) * 4, "gatherRows: output too small");
    if (n <= 0 || D <= 0) return;
    const int64_t xRows = int64_t(x.size() / (size_t(D) * 4));
    for (int64_t i = 0; i < n; ++i) TS_CHECK(hostSel[i] >= 0 && hostSel[i] < xRows, "gatherRows: row out of range");
    const int32_t* sel = uploadInts(kScratchSel, hostSel, n);
    const int64_t chunks = (D + kRowChunk - 1) / kRowChunk;
    TS_CHECK(n <= INT32_MAX && chunks <= 65535, "gatherRows: too large");
    cuda::launchPlain(gatherRowsKernel, dim3(unsigned(n), unsigned(chunks)), kRowThreads, 0, m_stream, x.f32(), sel, D,
                      rows.f32());
}

void CudaBackend::scatterAddRows(const Buffer& rows, int64_t D, const int32_t* hostSel, const float* hostScale,
                                 int64_t n, const Buffer& y) {
    GraphOp op(*this, false, "scatterAddRows", {gk(D), gk(n)});
    TS_CHECK(rows.size() >= size_t(n * D) * 4, "scatterAddRows: rows too small");
    if (n <= 0 || D <= 0) return;
    TS_CHECK(n <= INT32_MAX / 2, "scatterAddRows: too many rows");
    const int64_t yRows = int64_t(y.size() / (size_t(D) * 4));
    for (int64_t i = 0; i < n; ++i) TS_CHECK(hostSel[i] >= 0 && hostSel[i] < yRows, "scatterAddRows: row out of range");
    // Group the sources by target, keeping increasing i within a target (the CPU's order of the adds).
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return hostSel[a] < hostSel[b]; });
    // Packed upload: [U targets | U + 1 offsets | n sources]
    std::vector<int32_t> packed;
    packed.reserve(size_t(3 * n + 1));
    std::vector<int32_t> offs;
    offs.reserve(size_t(n + 1));
    for (int64_t p = 0; p < n; ++p)
        if (p == 0 || hostSel[order[size_t(p)]] != hostSel[order[size_t(p - 1)]]) {
            packed.push_back(hostSel[order[size_t(p)]]);
            offs.push_back(int32_t(p));
        }
    const int64_t U = int64_t(packed.size());
    offs.push_back(int32_t(n));
    packed.insert(packed.end(), offs.begin(), offs.end());
    packed.insert(packed.end(), order.begin(), order.end());
    const int32_t* dPacked = uploadInts(kScratchSel, packed.data(), int64_t(packed.size()));
    const float* dScale = uploadFloats(kScratchScale, hostScale, n);
    const int64_t chunks = (D + kRowChunk - 1) / kRowChunk;
    TS_CHECK(chunks <= 65535, "scatterAddRows: rows too wide");
    const dim3 grid{unsigned(U), unsigned(chunks)};
    cuda::launchPlain(scatterAddRowsKernel<kCpuFusesMulAdd>, grid, kRowThreads, 0, m_stream, rows.f32(), D, dPacked,
                      dPacked + U, dPacked + 2 * U + 1, dScale, y.f32());
}

}  // namespace ts
