// Private to the indexer's CUDA files: the arguments of the select's two steps (scores, top-K) shared by the
// general kernels (cuda_indexer.cu) and the fast path at GLM-5.3-Flash's widths (cuda_indexer_select.cu), the
// score → key map, and the fast path's launchers. See cuda_indexer_select.cu's header for the fast path.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ts::idxsel {

struct ScoreArgs {
    const float* q;       // [T, H, D]: e4m3 values (general kernel, fp8), or the raw q (fp32; and the fast kernel)
    const float* qScale;  // [T, H] (general kernel, fp8) or null
    const float* w;       // [T, H]
    const uint8_t* store;
    int64_t kb;
    int fp8, aligned4;
    const int32_t* blocks;  // the sequences' page tables, concatenated
    const int32_t* qPos;    // [T] each query's absolute position
    const int32_t* qTable;  // [T] where its sequence's page table starts in `blocks`
    int64_t blockSize;
    int64_t H, D, Dp, kp, K, t0, ncMax;
    int64_t poolsPerWarp;  // general: a block scores 8 · poolsPerWarp consecutive pools of one query; fast: 4 ·
    float softmaxScale;
    float hs;             // the fast kernel's Hadamard scale 1/sqrt(D), as cpu::hadamard computes it
    float* scores;        // [chunk T, ncMax]
};

struct TopArgs {
    const float* scores;  // [chunk T, ncMax]
    const int32_t* qPos;  // [T] each query's absolute position
    int64_t ncMax, kp, K, width, t0;
    int32_t* idx;         // [T, width]
    int32_t* ties;        // [T]
    uint64_t* hashes;     // [T] (seeded) or null
};

#if defined(__CUDACC__)  // (the rules below also compile as host C++: tests/kernels/test_cuda_switches.cpp)
// Order-preserving map of a score to 32 bits (larger score → larger key; −0 and +0 equal, as the CPU's ==).
__device__ __forceinline__ uint32_t orderKey(float f) {
    uint32_t u = __float_as_uint(f);
    if (u == 0x80000000u) u = 0;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
#endif

// --- the fast path (cuda_indexer_select.cu) ----------------------------------------------------------------

constexpr int kFastDim = 128;    // key width of the fast score kernel (GLM-5.3-Flash's index_head_dim)
constexpr int kFastMaxHeads = 32;  // heads: one lane each (index_n_heads = 32)
// The top-K kernel keeps a query's keys, its chosen pools and a list of up to kTopListCap keys in dynamic
// shared memory, beside kTopStaticBytes of its own: as many pools as the device's opt-in limit per block allows
// (H200: ~50k, 800k tokens at kpool 16; GB10: ~17k, 270k tokens); longer contexts take the general kernel.
constexpr int64_t kTopListCap = 4096;
constexpr size_t kTopStaticBytes = (4096 + 33 + 4) * 4;

// TS_IDX_FAST (read once; default on) or the override of setFastSelect (1 / 0; −1 restores the environment's;
// returns the previous override): whether eligible calls take the fast kernels.
int setFastSelect(int on);
bool fastSelect();
// Whether the fast score kernel takes a call: D = 128, H ≤ 32, whole pools per cache block, q and the keys
// aligned for its vector loads (q: 16 bytes; the store: 4 bytes for fp8 entries, 16 for fp32).
inline bool fastScoreShape(int64_t H, int64_t D, int64_t kp, int64_t blockSize, bool aligned) {
    return D == kFastDim && H >= 1 && H <= kFastMaxHeads && blockSize % kp == 0 && aligned;
}
// The fast score kernel's pools per warp for nq queries of up to ncMax pools on `sms` SMs: about 12 warps per SM
// over all of them, in whole batches of 8, and no more than a block's 4 warps can share of one query's pools (each
// block makes q's rows once).
inline int64_t fastPoolsPerWarp(int64_t ncMax, int64_t nq, int64_t sms) {
    const int64_t want = 12 * (sms > 0 ? sms : 1);
    int64_t ppw = (ncMax * nq + want - 1) / want;
    if (ppw > (ncMax + 3) / 4) ppw = (ncMax + 3) / 4;
    ppw = (ppw + 7) / 8 * 8;
    return ppw < 8 ? 8 : ppw;
}
inline size_t topSmemBytes(int64_t ncMax, int64_t K) { return size_t(ncMax + K + kTopListCap) * 4; }
inline bool fastTopFits(int64_t ncMax, int64_t K, size_t optinBytes) {
    return ncMax < (int64_t(1) << 30) && topSmemBytes(ncMax, K) + kTopStaticBytes <= optinBytes;
}

// Scores of nQueries queries (a.t0 ..) over the pools below ncMax: a.q is the RAW q [T, H, 128] (quantised
// here for fp8 caches), 16-byte aligned; a.poolsPerWarp a multiple of 8. Launched with programmatic dependent
// launch.
void launchScore128(const ScoreArgs& a, int64_t nQueries, cudaStream_t stream);
// The top-K of nQueries queries' scores (one block each), keys in shared memory (fastTopFits). PDL too.
void launchTopSmem(const TopArgs& a, int64_t nQueries, cudaStream_t stream);
// Mismatches between the hardware fp32 → e4m3 conversion the fast kernel quantises q with and the CPU's rule
// (cuda_attention_common.cuh's f32ToFp8) over every fp32 bit pattern (NaN codes 0x7f / 0xff count as equal).
int64_t fp8ConversionMismatches();  // on the current device's default stream; synchronises

}  // namespace ts::idxsel
