// The k-pool indexer's select at GLM-5.3-Flash's widths (index_head_dim 128, 32 heads): the fast path of
// CudaBackend::indexerSelect (cuda_indexer.cu), bit-identical to the general kernels and to the CPU.
//
//   indexerScore128Kernel  the score of every candidate pool, Σ_h w[t,h]·relu(D^-1/2 · q_h·key) in the CPU's
//                          order (cpu::dot's 8 accumulators, then the heads in order), with no quantiser kernel
//                          before it: each block makes q's fp8 rows itself (the CPU's Hadamard butterflies, four
//                          lanes per head; the power-of-two scale; e4m3 by the hardware conversion, which
//                          fp8ConversionMismatches checks against the CPU's rule for every fp32 input). Then
//                          lane h of every warp holds head h's 128 q values in registers and the warp scores
//                          its pools in batches of 8: their keys are loaded a batch ahead (the first before q
//                          is made), staged as fp32 in shared memory and read back as broadcasts, two pools at
//                          a time (16 accumulator chains), so a pool costs 16 × (2 loads + 8 mul + 8 add) per
//                          lane; the 8 pools' head sums are then added in head order by 8 lanes. The general
//                          kernel (one warp per pool, 4 heads at a time, shuffles per head) took 27.7 µs at
//                          8,192 pools, a latency chain of ~6 µs per pool and warp; this one 10.1 µs, bound by
//                          latency still (212 registers: 2 warps per scheduler, one issue every 3.4 cycles).
//   indexerTopSmemKernel   one block of 1,024 threads per query: its keys (orderKey) in shared memory, a radix
//                          select of the K-th largest in digits of 12, 10 and 10 bits that stops as soon as the
//                          chosen bin's keys are all taken — the first digit over all keys, the finer ones over
//                          a list of the first digit's bin —, then the chosen pools ranked in pool order by warp
//                          ballots and written out coalesced: 8.4 µs at 8,192 pools, where the general kernel,
//                          which re-reads every score from global memory in each of its four 8-bit passes, took
//                          26.8 µs; now the work of one SM (~80 instructions per 32 keys).
// Both are launched with programmatic dependent launch and wait for the previous kernel before reading.
//
// Test: twinspark-cli selftest --backend cuda --filter indexerSelect (each D = 128 row runs this path and,
// as "… general", the other one, both against the CPU; the "fp8 conversion" row checks the hardware e4m3
// conversion over all 2^32 inputs). Switch: TS_IDX_FAST=0 / indexerSetFastSelect(0) (kernels/exl3_tune.h).
// Benchmark: twinspark-cli bench-device --backend cuda --what mla (the indexer rows, both paths).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "core/env_switch.h"
#include "cuda/cuda_attention_common.cuh"
#include "cuda/cuda_indexer.cuh"

namespace ts {
namespace idxsel {

static OverridableSwitch g_fast("TS_IDX_FAST", true);
int setFastSelect(int on) { return g_fast.set(on); }
bool fastSelect() { return g_fast.on(); }

namespace {

using ::ts::cuda::fp8Scale;
using ::ts::cuda::f32ToFp8;
using ::ts::cuda::imin64;
using ::ts::cuda::pdlTrigger;
using ::ts::cuda::pdlWait;

constexpr int kD = kFastDim;
constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kBatch = 8;        // pools per batch of a warp
constexpr int kQStride = kD + 4;  // floats per q row: lane h's 16-byte loads at 528·h bytes, 8 lanes on distinct banks
constexpr int kTStride = kFastMaxHeads + 4;  // floats per pool row of the head terms (8 reading lanes, distinct banks)

struct ScoreSmem {
    float q[kFastMaxHeads][kQStride];  // q rows as the scores use them (fp8: the e4m3 values; fp32: raw)
    float qs[kFastMaxHeads];           // fp8: q's scale per head
    float w[kFastMaxHeads];            // the head weights (0 beyond H)
    float k[kWarps][kBatch][kD];       // a warp's batch of keys as fp32 (without their scale)
    float term[kWarps][kBatch][kTStride];
};

// Two e4m3 codes (low byte first) → fp32, exact (every e4m3 value is an fp16); NaN codes give NaN.
__device__ __forceinline__ float2 e4m3x2ToFloat2(uint16_t codes) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes), __NV_E4M3);
    __half2 v;
    v = *reinterpret_cast<const __half2*>(&h);
    return __half22float2(v);
}

// dst[0 .. N) from N / 4 float4 loads.
template <int N>
__device__ __forceinline__ void loadFloats(const float4* src, float (&dst)[N]) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
        const float4 v = src[i];
        dst[4 * i] = v.x;
        dst[4 * i + 1] = v.y;
        dst[4 * i + 2] = v.z;
        dst[4 * i + 3] = v.w;
    }
}

// Heads 8w .. 8w + 7 of query t into shared memory, four lanes per head (lane: head 8w + lane/4, elements
// [32·(lane%4), +32)). fp8: cpu::hadamard (its butterfly stages in order: 1..16 inside the lane, 32 and 64
// across lanes; each output the same two-operand sums), · hs, then the CPU's quantFp8 (pow2, minAmax 1e-4):
// amax over the row, s = fp8Scale(amax), codes of x / s — x · (1/s), the same rounding: s is a power of two —
// and their values. Rows h ≥ H are zeros.
template <bool FP8>
__device__ __forceinline__ void prepareQ(const ScoreArgs& a, int64_t t, int warp, int lane, ScoreSmem& sm) {
    const int h = warp * 8 + (lane >> 2), qq = lane & 3;
    const int H = int(a.H);
    float x[32];
    if (h < H) {
        loadFloats(reinterpret_cast<const float4*>(a.q + (t * a.H + h) * kD + 32 * qq), x);
    } else {
#pragma unroll
        for (int i = 0; i < 32; ++i) x[i] = 0.0f;
    }
    if constexpr (FP8) {
#pragma unroll
        for (int hs = 1; hs < 32; hs <<= 1)
#pragma unroll
            for (int i = 0; i < 32; ++i)
                if (!(i & hs)) {
                    const float p = x[i], r = x[i + hs];
                    x[i] = __fadd_rn(p, r);
                    x[i + hs] = __fsub_rn(p, r);
                }
#pragma unroll
        for (int bit = 1; bit <= 2; bit <<= 1) {  // stages 32 (quarters 0|1, 2|3) and 64 (0|2, 1|3)
            const bool upper = (qq & bit) != 0;
#pragma unroll
            for (int i = 0; i < 32; ++i) {
                const float o = __shfl_xor_sync(0xffffffffu, x[i], bit);
                x[i] = upper ? __fsub_rn(o, x[i]) : __fadd_rn(x[i], o);
            }
        }
        float amax = 0.0f;
#pragma unroll
        for (int i = 0; i < 32; ++i) {
            x[i] = __fmul_rn(x[i], a.hs);
            amax = fmaxf(amax, fabsf(x[i]));
        }
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
        const float s = fp8Scale(amax, true, 1e-4f), r = __fdiv_rn(1.0f, s);
#pragma unroll
        for (int i = 0; i < 32; i += 2) {
            const __nv_fp8x2_storage_t c = __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(x[i], r), __fmul_rn(x[i + 1], r)),
                                                                    __NV_SATFINITE, __NV_E4M3);
            const float2 v = e4m3x2ToFloat2(c);
            x[i] = v.x;
            x[i + 1] = v.y;
        }
        if (qq == 0) sm.qs[h] = s;
    }
    float4* dst = reinterpret_cast<float4*>(&sm.q[h][32 * qq]);
#pragma unroll
    for (int i = 0; i < 8; ++i) dst[i] = make_float4(x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3]);
    if (qq == 0) sm.w[h] = h < H ? a.w[t * a.H + h] : 0.0f;
}

// One batch's keys as this lane loads them: fp8, word `lane` of each entry (codes 4·lane .. +3) and the entry's
// scale; fp32, floats 4·lane .. +3.
template <bool FP8>
struct KeyWords {
    uint32_t c[FP8 ? kBatch : 1];
    float4 f[FP8 ? 1 : kBatch];
    float ks[kBatch];
};

// Pool j's cache entry (the page table maps whole pools: blockSize % kp == 0; pb = blockSize / kp; pools and
// blocks of one sequence count below 2^31).
__device__ __forceinline__ const uint8_t* poolEntry(const ScoreArgs& a, const int32_t* blocks, int pb, int j) {
    return a.store + (int64_t(blocks[j / pb]) * pb + j % pb) * a.kb;
}

template <bool FP8>
__device__ __forceinline__ void loadBatch(const ScoreArgs& a, const int32_t* blocks, int pb, int jb, int j1, int lane,
                                          KeyWords<FP8>& kw) {
    // Lane b < 8 finds pool jb + b's entry; every lane then loads its part of each.
    const uint8_t* mine = jb + (lane & 7) < j1 ? poolEntry(a, blocks, pb, jb + (lane & 7)) : a.store;
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
        const auto e = reinterpret_cast<const uint8_t*>(__shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(mine), b));
        if (jb + b < j1) {
            if constexpr (FP8) {
                kw.c[b] = reinterpret_cast<const uint32_t*>(e)[lane];
                kw.ks[b] = *reinterpret_cast<const float*>(e + kD);
            } else {
                kw.f[b] = reinterpret_cast<const float4*>(e)[lane];
            }
        }
    }
}

// grid (ceil(ncMax / (4 · poolsPerWarp)), queries of the chunk), block 128; warp w scores pools
// [jBlock + w·ppw, + ppw) of query t.
template <bool FP8>
__global__ void __launch_bounds__(kThreads) indexerScore128Kernel(ScoreArgs a) {
    __shared__ __align__(16) ScoreSmem sm;
    pdlWait();  // before any early exit too: a later kernel's wait covers this one's predecessors only through it
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t t = a.t0 + blockIdx.y, p = a.qPos[t], nc = (p + 1) / a.kp;
    const int64_t jBlock = int64_t(blockIdx.x) * kWarps * a.poolsPerWarp;
    if (nc <= a.K || jBlock >= nc) return;  // all candidates are taken without scores / nothing here

    // This warp's pools; their first batch of keys is loaded before q is made (it does not depend on q).
    const int j0 = int(jBlock + warp * a.poolsPerWarp), j1 = int(imin64(nc, j0 + a.poolsPerWarp));
    const int pb = int(a.blockSize / a.kp);
    const int32_t* blocks = a.blocks + a.qTable[t];  // t's sequence's page table
    KeyWords<FP8> kw;
    if (j0 < j1) loadBatch<FP8>(a, blocks, pb, j0, j1, lane, kw);
    prepareQ<FP8>(a, t, warp, lane, sm);
    __syncthreads();
    float qv[kD];
    loadFloats(reinterpret_cast<const float4*>(sm.q[lane]), qv);
    const float qsh = FP8 ? sm.qs[lane] : 1.0f, wh = sm.w[lane];
    const int H = int(a.H);

    float* scoreRow = a.scores + (t - a.t0) * a.ncMax;
    for (int jb = j0; jb < j1; jb += kBatch) {
        const int nb = min(kBatch, j1 - jb);
        float ksb[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
            if (b < nb) {
                float4 v;
                if constexpr (FP8) {
                    const float2 lo = e4m3x2ToFloat2(uint16_t(kw.c[b])), hi = e4m3x2ToFloat2(uint16_t(kw.c[b] >> 16));
                    v = make_float4(lo.x, lo.y, hi.x, hi.y);
                } else {
                    v = kw.f[b];
                }
                reinterpret_cast<float4*>(sm.k[warp][b])[lane] = v;
            } else {  // read by the last pair's second pool (its result is dropped): defined, not stale
                reinterpret_cast<float4*>(sm.k[warp][b])[lane] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
            ksb[b] = FP8 ? kw.ks[b] : 1.0f;
        }
        __syncwarp();
        if (jb + kBatch < j1) loadBatch<FP8>(a, blocks, pb, jb + kBatch, j1, lane, kw);  // the next batch in flight
        // Two pools at a time: 16 independent accumulator chains per lane (a warp issues every ~3.4 cycles with 8).
#pragma unroll
        for (int b = 0; b < kBatch; b += 2) {
            if (b < nb) {
                // cpu::dot: accumulator i takes elements 8s + i in order; products and sums rounded separately.
                float acc[2][8];
#pragma unroll
                for (int i = 0; i < 8; ++i) acc[0][i] = acc[1][i] = 0.0f;
#pragma unroll
                for (int s = 0; s < kD / 8; ++s) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const float4* kr = reinterpret_cast<const float4*>(sm.k[warp][b + e]);
                        const float4 k0 = kr[2 * s], k1 = kr[2 * s + 1];
                        const float kk[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
                        for (int i = 0; i < 8; ++i) acc[e][i] = __fadd_rn(acc[e][i], __fmul_rn(qv[8 * s + i], kk[i]));
                    }
                }
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float* c = acc[e];
                    const float dot = __fadd_rn(__fadd_rn(__fadd_rn(c[0], c[4]), __fadd_rn(c[1], c[5])),
                                                __fadd_rn(__fadd_rn(c[2], c[6]), __fadd_rn(c[3], c[7])));
                    const float qk = FP8 ? __fmul_rn(dot, __fmul_rn(qsh, ksb[b + e])) : dot;
                    // (the pair's second pool past the batch's end computes on zero keys: not stored)
                    if (b + e < nb) sm.term[warp][b + e][lane] = __fmul_rn(wh, fmaxf(0.0f, __fmul_rn(a.softmaxScale, qk)));
                }
            }
        }
        __syncwarp();
        if (lane < nb) {  // pool jb + lane: its heads' terms in head order, as the CPU adds them
            float tv[kFastMaxHeads];
            loadFloats(reinterpret_cast<const float4*>(sm.term[warp][lane]), tv);
            float total = 0.0f;
#pragma unroll
            for (int h = 0; h < kFastMaxHeads; ++h)
                if (h < H) total = __fadd_rn(total, tv[h]);
            scoreRow[jb + lane] = total;
        }
        __syncwarp();  // the batch's keys and terms are rewritten by the next one
    }
    pdlTrigger();
}

constexpr int kTopThreads = 1024;

// Exclusive prefix sum over the block's 32 warps of one int per warp (lane 0's v); every thread gets its warp's.
__device__ __forceinline__ int warpExclusive(int v, int* shared, int warp, int lane) {
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const int x = shared[lane];
        int incl = x;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int n = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += n;
        }
        shared[lane] = incl - x;
    }
    __syncthreads();
    const int r = shared[warp];
    __syncthreads();  // the slots are reused
    return r;
}

struct TopShared {
    int hist[1 << 12];
    int scan[33];
    int digit, need, cnt, listN;
};
static_assert(sizeof(TopShared) == kTopStaticBytes, "cuda_indexer.cuh's fastTopFits counts it");

// One digit of the radix select: the histogram of bits [shift, shift + bits) of the n keys in src whose bits
// under `mask` equal `prefix` (plain shared atomics: a warp's keys spread over many bins at these widths), then
// the bin holding the need-th largest of them, its count and how many of it are still needed — read from
// shared memory by every thread. bits = 10 or 12 (one to four bins per thread, the highest bins first).
__device__ __forceinline__ void radixDigit(const uint32_t* src, int n, uint32_t prefix, uint32_t mask, int shift, int bits,
                                           int need, TopShared& sh) {
    const int tid = threadIdx.x, bins = 1 << bits, per = bins / kTopThreads;
    for (int i = tid; i < bins; i += kTopThreads) sh.hist[i] = 0;
    __syncthreads();
#pragma unroll 4
    for (int j = tid; j < n; j += kTopThreads) {
        const uint32_t u = src[j];
        if ((u & mask) == prefix) atomicAdd(&sh.hist[(u >> shift) & uint32_t(bins - 1)], 1);
    }
    __syncthreads();
    int c[4], s = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) c[b] = b < per ? sh.hist[bins - 1 - (tid * per + b)] : 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) s += c[b];
    int total;
    int cum = ::ts::cuda::blockScanInt(s, sh.scan, total);  // keys in the bins above this thread's
    if (cum < need && need <= cum + s) {
        bool found = false;
#pragma unroll
        for (int b = 0; b < 4; ++b) {
            if (!found && b < per && cum + c[b] >= need) {
                sh.digit = bins - 1 - (tid * per + b);
                sh.need = need - cum;
                sh.cnt = c[b];
                found = true;
            }
            cum += c[b];
        }
    }
    __syncthreads();
}

// grid = queries of the chunk, block 1024; dynamic shared memory: keys [ncMax] | the chosen pools [K] | the
// K-th bin's keys [kTopListCap].
__global__ void __launch_bounds__(kTopThreads) indexerTopSmemKernel(TopArgs a) {
    extern __shared__ uint32_t keys[];
    __shared__ TopShared sh;
    pdlWait();  // the scores
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t t = a.t0 + blockIdx.x, p = a.qPos[t], nc = (p + 1) / a.kp, kp = a.kp;
    int32_t* out = a.idx + t * a.width;
    int32_t* chosenPools = reinterpret_cast<int32_t*>(keys + a.ncMax);
    uint32_t* list = keys + a.ncMax + a.K;
    const unsigned below = (1u << lane) - 1u;
    int64_t chosen;
    int tied = 0;
    if (nc <= a.K) {
        chosen = nc;
        for (int64_t i = tid; i < nc * kp; i += kTopThreads) out[i] = int32_t(i);
    } else {
        chosen = a.K;
        const int n = int(nc);
        const float* sc = a.scores + int64_t(blockIdx.x) * a.ncMax;
        // Eight loads in flight per thread before their keys are stored (one at a time, each would wait a full
        // L2 round trip).
        for (int base = 0; base < n; base += 8 * kTopThreads) {
            float v[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int j = base + u * kTopThreads + tid;
                v[u] = j < n ? sc[j] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const int j = base + u * kTopThreads + tid;
                if (j < n) keys[j] = orderKey(v[u]);
            }
        }
        __syncthreads();
        // Radix select of the K-th largest key in digits of 12, 10 and 10 bits; `cnt` keys share the chosen
        // prefix and the `need` earliest of them are taken. When need == cnt every key of the bin is taken and
        // the key after the K-th lies in a lower bin: no finer digit changes the selection (and no tie). The
        // first digit (sign, exponent, 3 mantissa bits) leaves few keys in its bin: they are copied to a list
        // that the finer digits scan instead of all n (unless there are more than the list holds: ties).
        radixDigit(keys, n, 0u, 0u, 20, 12, int(a.K), sh);
        uint32_t prefix = uint32_t(sh.digit) << 20, mask = 0xFFF00000u;
        int need = sh.need, cnt = sh.cnt;
        if (need != cnt) {
            const uint32_t* src = keys;
            int m = n;
            if (cnt <= kTopListCap) {
                if (tid == 0) sh.listN = 0;
                __syncthreads();
                for (int base = 0; base < n; base += kTopThreads) {
                    const int j = base + tid;
                    const bool in = j < n && (keys[j] & mask) == prefix;
                    const unsigned bal = __ballot_sync(0xffffffffu, in);
                    if (bal) {
                        int off = 0;
                        if (lane == 0) off = atomicAdd(&sh.listN, __popc(bal));
                        off = __shfl_sync(0xffffffffu, off, 0);
                        if (in) list[off + __popc(bal & below)] = keys[j];
                    }
                }
                __syncthreads();
                src = list;
                m = cnt;
            }
            for (int shift = 10; shift >= 0 && need != cnt; shift -= 10) {  // uniform: read from shared memory
                radixDigit(src, m, prefix, mask, shift, 10, need, sh);
                prefix |= uint32_t(sh.digit) << shift;
                mask |= 0x3FFu << shift;
                need = sh.need;
                cnt = sh.cnt;
            }
        }
        tied = cnt > need;
        // Rank the chosen pools in pool order: warp w owns pools [w·span, (w+1)·span) (span a multiple of 32),
        // lane i of each 32-pool chunk pool base + i, so ballots order them. Without a tie every key at the
        // prefix is taken (need == cnt: no count of the equal keys before each warp is needed).
        const int span = ((n + 32 * 32 - 1) / (32 * 32)) * 32;
        const int j0 = min(n, warp * span), j1 = min(n, j0 + span);
        int eqHere = 0;
        if (need != cnt) {  // uniform
            for (int base = j0; base < j1; base += 32) {
                const int j = base + lane;
                eqHere += __popc(__ballot_sync(0xffffffffu, j < j1 && (keys[j] & mask) == prefix));
            }
        }
        const int eqBefore = need != cnt ? warpExclusive(eqHere, sh.scan, warp, lane) : 0;
        const bool allEq = need == cnt;
        auto chunkFlags = [&](int base, int e, unsigned& eqBallot) {  // whether pool base + lane is taken
            const int j = base + lane;
            const uint32_t u = j < j1 ? keys[j] & mask : 0u;
            if (allEq) {
                eqBallot = 0u;
                return j < j1 && u >= prefix;
            }
            const bool eq = j < j1 && u == prefix;
            eqBallot = __ballot_sync(0xffffffffu, eq);
            return (j < j1 && u > prefix) || (eq && e + __popc(eqBallot & below) < need);
        };
        int selHere = 0;
        for (int base = j0, e = eqBefore; base < j1; base += 32) {
            unsigned eqB;
            selHere += __popc(__ballot_sync(0xffffffffu, chunkFlags(base, e, eqB)));
            e += __popc(eqB);
        }
        int r = warpExclusive(selHere, sh.scan, warp, lane);
        for (int base = j0, e = eqBefore; base < j1; base += 32) {
            unsigned eqB;
            const bool take = chunkFlags(base, e, eqB);
            const unsigned tb = __ballot_sync(0xffffffffu, take);
            if (take) chosenPools[r + __popc(tb & below)] = base + lane;
            r += __popc(tb);
            e += __popc(eqB);
        }
        __syncthreads();
        const int kpi = int(kp);
        for (int i = tid; i < int(a.K) * kpi; i += kTopThreads) out[i] = chosenPools[i / kpi] * kpi + i % kpi;
    }
    // The query's own incomplete pool, then −1.
    const int64_t tail0 = chosen * kp, nTail = p + 1 - nc * kp;
    for (int64_t i = tid; i < nTail; i += kTopThreads) out[tail0 + i] = int32_t(nc * kp + i);
    for (int64_t i = tail0 + nTail + tid; i < a.width; i += kTopThreads) out[i] = -1;
    if (a.hashes && tid == 0) {  // (the chosen pools are in shared memory since the barrier above)
        uint64_t hsh = a.hashes[t] * 0x100000001b3ull + uint64_t(nc);
        for (int64_t i = 0; i < chosen; ++i) hsh = (hsh ^ uint64_t((nc <= a.K ? i : chosenPools[i]) + 1)) * 0x100000001b3ull;
        a.hashes[t] = hsh;
    }
    if (tid == 0) a.ties[t] = tied;
    pdlTrigger();
}

// One thread per fp32 bit pattern (blockIdx.x + gridDim.x·i covers all 2^32): the hardware's code against
// f32ToFp8's, NaN codes equal.
__global__ void fp8ConversionCheckKernel(unsigned long long* mismatches) {
    unsigned long long bad = 0;
    const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
    for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (uint64_t(1) << 32); i += stride) {
        const float f = __uint_as_float(uint32_t(i));
        const uint32_t hw = uint32_t(__nv_cvt_float2_to_fp8x2(make_float2(f, 0.0f), __NV_SATFINITE, __NV_E4M3)) & 0xffu;
        const uint32_t sw = f32ToFp8(f);
        const bool bothNaN = (hw & 0x7fu) == 0x7fu && (sw & 0x7fu) == 0x7fu;
        bad += hw != sw && !bothNaN;
    }
    for (int o = 16; o > 0; o >>= 1) bad += __shfl_xor_sync(0xffffffffu, bad, o);
    if ((threadIdx.x & 31) == 0 && bad) atomicAdd(mismatches, bad);
}

}  // namespace

void launchScore128(const ScoreArgs& a, int64_t nQueries, cudaStream_t stream) {
    const dim3 grid(unsigned((a.ncMax + kWarps * a.poolsPerWarp - 1) / (kWarps * a.poolsPerWarp)), unsigned(nQueries));
    if (a.fp8)
        cuda::launchPdl(indexerScore128Kernel<true>, grid, dim3(kThreads), 0, stream, true, a);
    else
        cuda::launchPdl(indexerScore128Kernel<false>, grid, dim3(kThreads), 0, stream, true, a);
}

void launchTopSmem(const TopArgs& a, int64_t nQueries, cudaStream_t stream) {
    const size_t smem = topSmemBytes(a.ncMax, a.K);
    if (smem > 48 * 1024)  // (fastTopFits: within the device's opt-in limit)
        TS_CUDA_CHECK(cudaFuncSetAttribute(indexerTopSmemKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    cuda::launchPdl(indexerTopSmemKernel, dim3(unsigned(nQueries)), dim3(kTopThreads), smem, stream, true, a);
}

int64_t fp8ConversionMismatches() {
    const cudaStream_t stream = nullptr;
    unsigned long long* d = nullptr;
    TS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&d), sizeof(*d), stream));
    TS_CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(*d), stream));
    cuda::launchPlain(fp8ConversionCheckKernel, 4096, 256, 0, stream, d);
    unsigned long long h = 0;
    TS_CUDA_CHECK(cudaMemcpyAsync(&h, d, sizeof(h), cudaMemcpyDeviceToHost, stream));
    TS_CUDA_CHECK(cudaFreeAsync(d, stream));
    TS_CUDA_CHECK(cudaStreamSynchronize(stream));
    return int64_t(h);
}

}  // namespace idxsel
}  // namespace ts
