// EXL3 at prefill sizes: y = x · Wᵀ for a packed EXL3 linear over many token rows, and the routed experts of a
// prefill step (CudaBackend::exl3PrefillLinear / exl3PrefillMoe, chosen by exl3Linear and moeExpertsFused when
// the rows per matrix are many: prefillLinearMinRows() and prefillMoeMinRows() in cuda_exl3.cuh; TS_EXL3_PREFILL or
// exl3SetPrefillPath in kernels/exl3_tune.h). The format and the
// math are cuda_exl3.cu's (xr = BH_k(x ⊙ suh), yr = xr · Ŵ, y = BH_n(yr) ⊙ svh + bias); what differs is the
// work split, built for throughput instead of weight streaming:
//
//   1. transform (exl3PfTransformKernel, one block per row): xr exactly as the CPU computes it (x ⊙ suh, the
//      same butterflies, ·1/√128), the row scaled by 2^e (max |xr| → [2^14, 2^15)) and split into fp16 hi + lo
//      planes (~22 bits: products with the fp16 codebook values stay exact in fp32), once per row and matrix
//      instead of once per unit of 128 output columns.
//   2. GEMM (exl3PfGemmKernel<K, codebook>, 256 threads): a block owns 64 rows × 128 columns of one job (a
//      matrix and its rows) over the whole of k — or, when a launch has too few such tiles for one wave of blocks
//      (a linear of ≤ ~256 rows: 96 tiles at 4096 → 12288 and ≤ 64 rows), over 1/2, 1/4 … of k (split-K,
//      pfSplits: each split's fp32 tile to a partial buffer, the tile's last block adding them in split order
//      before the epilogue). A cp.async ring (4 steps; 3 on sm_12x) brings 32-k
//      steps of the hi/lo planes (64 rows, swizzled for ldmatrix) and of the trellis (2 k-tiles × 8 tiles);
//      per step each warp decodes two tiles (laneStates + the codebook: the CPU's fp16 values exactly) into
//      mma B fragments in shared memory, one step ahead of the tensor cores, and every warp then runs its
//      32 rows × 32 columns: 16 mma.m16n8k16 per k-tile (2 row groups × 2 tiles × 2 halves × hi, lo); a block of
//      at most 32 rows (a MoE expert's rows in a 1,024-token chunk) gives each warp 32 rows × 16 columns instead,
//      and row groups past the block's rows are skipped. Each
//      weight is decoded once per 64 rows (the staged unit of cuda_exl3.cu: once per 64 rows too, but with
//      4 warps, a barrier per 16 k-tiles and the input transform in every unit).
//      Epilogue: ÷ 2^e, the output Hadamard of the block's 128 columns (the CPU's butterflies), ⊙ svh, + bias.
//   3. MoE only: swiglu of the gate and up rows (CudaBackend::swiglu, the CPU's op), the down rows' transform
//      and GEMM, and the combine y[t] += Σ w · out in ascending expert order (the CPU loop's order), for groups
//      of experts in ascending order whose rows fit the scratch budget — so a long prompt needs no more
//      device memory than ~kPfBudget.
//
// Numerics against the CPU (fp32): the input and output transforms, svh, bias, swiglu and combine repeat its
// operations in its order; products exact; sums in the tensor core's fp32 order over k instead of the CPU's
// sequential one, activations kept to ~2^-22 — the prefill tolerance of the self-test (1e-4), as the staged unit.
// Deterministic: fixed work split; the split-K sum in split order whichever block arrives last (its counter the only
// atomic). Splits change the order of the fp32 sums over k, not their precision.
//
// Variants: K = 2..6 × the three codebooks (pfSupported); other K, and blocks that would not fit the device's shared
// memory per block (pfFits), take cuda_exl3.cu's kernels.
// Test:      twinspark-cli selftest --backend cuda --filter exl3   (the prefill-sized linear and MoE cases run
//            this path and, with exl3SetPrefillPath(0), the staged one; both against the CPU)
// Benchmark: twinspark-cli bench-device --what exl3-prefill   (the MoE layer at 64 … 4,096 tokens and a
//            4096 → 12288 GEMM at 16 … 4,096 rows, TFLOP/s, each beside the staged kernels; the GEMM also without
//            split-K, TS_EXL3_PF_SPLIT=1)
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>
#include <atomic>
#include <cstring>
#include <vector>

#include "core/env_switch.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_exl3.cuh"
#include "cuda/cuda_exl3_unit.cuh"

namespace ts {
namespace exl3cuda {

namespace {

constexpr int kPfThreads = 256;  // 8 warps: 2 (rows) × 4 (columns) for the mma (8 × 1 in a narrow block), 8 tiles decoded per k-tile
constexpr int kPfBM = 64;        // token rows per block
// cp.async ring depth (32-k steps), per architecture. 4 on the H200: a block takes ~56 KiB, so three share an SM (80
// registers; the launch bound below) — measured 7–11 % faster than an 8-step ring at two blocks per SM, which was no
// faster than 4 at two; four blocks (64 registers) spilled in the loop and gained nothing (docs/PERFORMANCE.md,
// 2026-12-02 third session); 3 steps measured 1–4 % slower there (fourth session). 3 on sm_12x (a GB10): 100 KiB of
// shared memory per SM and 1 KiB reserved per block hold one 56 KiB block but two of 49 KiB (the epilogue's output
// tile, not the ring, sets the size from 3 steps down, at K ≤ 6). The device code takes its architecture's depth,
// the host plans with pfStagesOn(the device's major version); the kernel traps on a mismatch.
__host__ __device__ constexpr int pfStagesFor(int ccMajor) { return ccMajor >= 12 ? 3 : 4; }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
constexpr int kPfStagesHere = pfStagesFor(12);  // one text for every sm_12x target (scripts/cuda_sm12x_same.sh)
#elif defined(__CUDA_ARCH__)
constexpr int kPfStagesHere = pfStagesFor(__CUDA_ARCH__ / 100);
#else
constexpr int kPfStagesHere = pfStagesFor(9);  // host pass: unused by the kernels' bodies
#endif
constexpr int kPfBlocksPerSm = 3;
constexpr int kPfTransformThreads = 128;
constexpr size_t kPfBudget = size_t(256) << 20;  // scratch of one group of rows (planes, outputs)

// One GEMM job: one matrix applied to m rows of the hi/lo planes (row r at a + r·k), written to y + r·ldy.
struct PfJob {
    const uint16_t* trellis = nullptr;  // [k/16, n/16, 16K]
    const float* svh = nullptr;         // [n]
    const float* bias = nullptr;        // [n] or null
    const __half* ah = nullptr;         // [m, k] hi plane of the job's rows (lo: ah + loOffset)
    const int* e = nullptr;             // [m] the rows' scale exponents
    float* y = nullptr;
    int ldy = 0, m = 0;
    int blockStart = 0;  // first grid block of the job (blocks: ⌈m / 64⌉ × NB × splits, the split innermost)
    int tileStart = 0;   // first output tile (64 rows × 128 columns) of the job among the launch's, for split-K
};

struct PfGemmParams {
    const PfJob* jobs = nullptr;
    int J = 0, k = 0, n = 0, NB = 0, nOut = 0;
    int stages = 0;  // the ring depth the host sized the shared memory for (pfStagesFor)
    int64_t loOffset = 0;  // elements from the hi plane to the lo plane
    // Split-K (launches of too few output tiles to fill the device: a linear of ≤ ~256 rows): each tile's k is
    // cut into `splits` equal runs of 32-k steps, one block each; a block writes its fp32 tile to part [tile][split]
    // [64][128], and the last to arrive at counters[tile] adds the splits in split order (deterministic) and runs
    // the epilogue. splits = 1: one block per tile, as before.
    int splits = 1, splitShift = 0;  // splits = 2^splitShift
    float* part = nullptr;
    int* counters = nullptr;  // [tiles], zero between launches (the last arrival resets its own)
};

__device__ __forceinline__ void cpAsync16Zfill(void* smemDst, const void* gsrc, bool valid) {
    const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(smemDst));
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(gsrc), "r"(n) : "memory");
}

__device__ __forceinline__ void ldmatrixX4(uint32_t (&r)[4], const void* p) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// Shared memory of the GEMM (bytes): the ring of S steps — hi and lo planes [2][64 rows][32 k] fp16 and the
// trellis [2 k-tiles][8 tiles][8K words] — then the decoded B fragments [2 buffers][2 k-tiles][8 tiles][32 lanes]
// of 16 bytes. The epilogue reuses the ring for its [64][128 + 4] fp32 output tile.
__host__ __device__ constexpr int pfPlaneBytes() { return 2 * kPfBM * 64; }
__host__ __device__ constexpr int pfTrellisBytes(int K) { return 2 * 8 * tileWords(K) * 4; }
__host__ __device__ constexpr int pfStageBytes(int K) { return pfPlaneBytes() + pfTrellisBytes(K); }
__host__ __device__ constexpr int pfFragBytes() { return 2 * 2 * 8 * 32 * 16; }
__host__ __device__ constexpr int pfSmemBytes(int K, int S) {
    return (S * pfStageBytes(K) > kPfBM * 132 * 4 ? S * pfStageBytes(K) : kPfBM * 132 * 4) + pfFragBytes();
}
// What the depths are for (the path takes K = 2..6; 1 KiB of each block's shared memory is the system's): three blocks
// per H200 SM (228 KiB), two per sm_12x SM (100 KiB).
static_assert(3 * (pfSmemBytes(6, pfStagesFor(9)) + 1024) <= 228 * 1024, "three prefill blocks per H200 SM");
static_assert(2 * (pfSmemBytes(6, pfStagesFor(12)) + 1024) <= 100 * 1024, "two prefill blocks per sm_12x SM");

// Byte offset of the 16-byte chunk j (k 8j..8j+7 of a 32-k step) of row r in one plane: rows of 64 bytes, the
// chunk index xor-ed with (r / 2) % 4 so that the 8 rows one ldmatrix phase reads fall on distinct banks.
__device__ __forceinline__ int pfChunk(int r, int j) { return r * 64 + ((j ^ ((r >> 1) & 3)) << 4); }

// A split-K block's end (PfGemmParams::splits > 1; the block's fp32 tile is in ct [64][132], rows < m): the tile out
// to part (L2: __stcg), then the arrival at counters[tile]; false for all but the tile's last block, which gets the
// sum of every split's tile in split order (the same bits whichever block is last) in ct. Not inlined: in the kernel
// its code cost the main loop 10–40 instructions a step (the 80-register budget, by ptxas).
__device__ __noinline__ bool pfSplitArrive(const PfGemmParams& P, float* ct, int m, int tile, int ks) {
    __shared__ int lastS;
    const int tid = threadIdx.x;
    float* tp = P.part + int64_t(tile) * P.splits * (kPfBM * 128);
    for (int i = tid; i < m * 32; i += kPfThreads) {
        const int row = i >> 5, c4 = (i & 31) * 4;
        __stcg(reinterpret_cast<float4*>(tp + int64_t(ks) * (kPfBM * 128) + row * 128 + c4),
               *reinterpret_cast<const float4*>(ct + row * 132 + c4));
    }
    __syncthreads();
    if (tid == 0) {
        lastS = atomAddAcqRel(P.counters + tile, 1) == P.splits - 1;
        if (lastS) P.counters[tile] = 0;  // every split has arrived: ready for the next launch
    }
    __syncthreads();
    if (!lastS) return false;
    for (int i = tid; i < m * 32; i += kPfThreads) {
        const int row = i >> 5, c4 = (i & 31) * 4;
        float4 a = __ldcg(reinterpret_cast<const float4*>(tp + row * 128 + c4));
        for (int sp = 1; sp < P.splits; ++sp) {
            const float4 b = __ldcg(reinterpret_cast<const float4*>(tp + int64_t(sp) * (kPfBM * 128) + row * 128 + c4));
            a.x = __fadd_rn(a.x, b.x);
            a.y = __fadd_rn(a.y, b.y);
            a.z = __fadd_rn(a.z, b.z);
            a.w = __fadd_rn(a.w, b.w);
        }
        *reinterpret_cast<float4*>(ct + row * 132 + c4) = a;
    }
    __syncthreads();
    return true;
}

// SPLIT: the split-K instantiation (PfGemmParams::splits > 1). A template flag, not a run-time branch: with the split
// code in the one kernel the unsplit launches at 1,024–4,096 rows ran 10–14 % slower on the H200 (2026-12-02 fourth
// session), though their loop's SASS was no longer; the unsplit instantiation is the kernel as it was.
template <int K, int CB, bool SPLIT>
__global__ void __launch_bounds__(kPfThreads, kPfBlocksPerSm) exl3PfGemmKernel(PfGemmParams P) {
    constexpr int S = kPfStagesHere;
    constexpr int TW = tileWords(K);
    constexpr int SB = pfStageBytes(K);
    extern __shared__ __align__(16) unsigned char smem[];
    unsigned char* ring = smem;
    uint4* frag = reinterpret_cast<uint4*>(smem + (pfSmemBytes(K, S) - pfFragBytes()));  // [2][2][8][32]
    if (P.stages != S) __trap();  // planned for another ring: its shared memory would not hold this one

    // The block's job (binary search over blockStart: jobs are few hundred at most).
    int lo = 0, hi = P.J - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (P.jobs[mid].blockStart <= int(blockIdx.x)) lo = mid;
        else hi = mid - 1;
    }
    const PfJob job = P.jobs[lo];
    const int local = int(blockIdx.x) - job.blockStart;
    // Split-K: the block's tile and split, kept in shared memory across the main loop (in registers, at the 80 the
    // launch bound allows, they cost the loop ~10–40 instructions a step: measured in SASS).
    __shared__ int splitTileS, splitIdxS;
    const int tileLocal = SPLIT ? local >> P.splitShift : local;
    if (SPLIT && threadIdx.x == 0) {
        splitTileS = job.tileStart + tileLocal;
        splitIdxS = local & (P.splits - 1);
    }
    const int nb = tileLocal % P.NB, r0 = (tileLocal / P.NB) * kPfBM;
    const int m = min(kPfBM, job.m - r0);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int tilesK = P.k / 16, tilesN = P.n / 16;
    // The block's run of 32-k steps: all of k, or [s0, s0 + steps) of it (the host makes the splits divide it).
    const int steps = SPLIT ? (tilesK / 2) >> P.splitShift : tilesK / 2;
    const int s0 = SPLIT ? (local & (P.splits - 1)) * steps : 0;
    const __half* ah = job.ah + int64_t(r0) * P.k + (SPLIT ? int64_t(s0) * 32 : 0);
    const uint32_t* tr = reinterpret_cast<const uint32_t*>(job.trellis) + int64_t(nb) * 8 * TW +
                         (SPLIT ? int64_t(s0) * 2 * tilesN * TW : 0);
    // A block of at most 32 rows reads rows 0..31 of the planes only (the narrow warp split below).
    const bool narrow = m <= 32;

    // Step s into ring slot s % S: 512 plane chunks (2 planes × 64 rows × 4; a narrow block's 32 rows: 256), then
    // 2 × 8 × TW / 4 trellis chunks (two k-tile rows of 8 consecutive tiles). Rows ≥ m are zero-filled. Thread t
    // copies chunk (row t / 4 % 64, t % 4) of both planes and trellis chunk t (if t < TCH); its addresses are
    // worked out once here and advance by a constant per step (the loop spent ~100 instructions a step on them).
    constexpr int TCH = 2 * 8 * TW / 4;
    static_assert(TCH <= kPfThreads, "one trellis chunk per thread and step");
    const int pr = (tid >> 2) & 63, pj = tid & 3;
    const bool pLoad = !(narrow && pr >= 32), pValid = pr < m;
    const __half* pSrc = ah + int64_t(pValid ? pr : 0) * P.k + 8 * pj;  // + 32 per step; lo: + loOffset
    const int pDst = pfChunk(pr, pj);
    const bool tLoad = tid < TCH;
    const uint32_t* tSrc = tr + int64_t(tid / (TCH / 2)) * tilesN * TW + (tid % (TCH / 2)) * 4;
    const int64_t tStep = int64_t(2) * tilesN * TW;  // words per step
    auto issue = [&](int s) {
        if (s < steps) {
            unsigned char* st = ring + (s % S) * SB;
            if (pLoad) {
                const __half* src = pSrc + s * 32;
                cpAsync16Zfill(st + pDst, src, pValid);
                cpAsync16Zfill(st + kPfBM * 64 + pDst, src + P.loOffset, pValid);
            }
            if (tLoad) cpAsync16(st + pfPlaneBytes() + tid * 16, tSrc + s * tStep);
        }
        cpAsyncCommit();  // one group per step, maybe empty
    };
    // Decodes step s's 16 tiles into fragment buffer s % 2: warp w takes tile w of both k-tiles.
    auto decode = [&](int s) {
        if (s >= steps) return;
        const uint32_t* tw = reinterpret_cast<const uint32_t*>(ring + (s % S) * SB + pfPlaneBytes());
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            uint32_t st8[8], b[4];
            laneStates<K>(tw + (kk * 8 + warp) * TW, lane, st8);
            lanePairs<CB>(st8, b);
            frag[((s & 1) * 2 + kk) * 256 + warp * 32 + lane] = make_uint4(b[0], b[1], b[2], b[3]);
        }
    };

    // The warps' share of the block's 64 rows × 8 tiles: 2 × 4 warps of 32 rows × 2 tiles each, or — when the block
    // has at most 32 rows (a MoE step of a 1,024-token chunk has ~28 per expert) — 8 warps of 32 rows × 1 tile, so
    // that no warp spends its mmas on zero rows while the others wait for it at the next step's barrier. Either way
    // each output's sum runs over the same mmas in the same order: the results are the same bits.
    const int rbase = narrow ? 0 : 32 * (warp >> 2);  // the warp's first row
    const int tbase = narrow ? warp : 2 * (warp & 3);   // its first tile (of 8)
    const int TN = narrow ? 1 : 2;                      // its tiles
    const int AG = min(2, (m - rbase + 15) >> 4);       // its row groups of 16 that hold rows < m: 1 or 2 (m ≥ 1;
                                                        // a wide block's second row half holds m − 32 ≥ 1 rows)
    float acc[2][2][2][4];  // [row group][tile][column half][mma accumulator]
#pragma unroll
    for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int t = 0; t < 2; ++t)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[a][t][h][i] = 0.0f;

#pragma unroll
    for (int s = 0; s < S - 1; ++s) issue(s);
    cpAsyncWait<S - 2>();  // step 0 has landed
    __syncthreads();
    decode(0);
    // ldmatrix addresses: lane l gives row (l % 16) of its matrix pair, k chunk (l / 16) of the k-tile.
    const int lr = lane & 15, lj = lane >> 4;
    // The main loop for a warp of TN_ tiles and AG_ row groups, both known at compile time: a warp-uniform choice
    // made once, so that no mma is issued under a false predicate (with run-time counts ptxas issued all 32 of a
    // step, predicated, with a WARPSYNC before each pair).
    auto mainLoop = [&](auto tnC, auto agC) {
        constexpr int TN_ = decltype(tnC)::value, AG_ = decltype(agC)::value;
        for (int s = 0; s < steps; ++s) {
            cpAsyncWait<S - 3>();  // step s + 1 has landed (s + 2 … s + S − 2 may still be in flight)
            __syncthreads();       // step s's fragments written; step s − 1's slot and fragments free
            issue(s + S - 1);
            decode(s + 1);
            const unsigned char* st = ring + (s % S) * SB;
#pragma unroll
            for (int kk = 0; kk < 2; ++kk) {
                uint4 bt[TN_];
#pragma unroll
                for (int t = 0; t < TN_; ++t) bt[t] = frag[((s & 1) * 2 + kk) * 256 + (tbase + t) * 32 + lane];
                uint32_t af[2][AG_][4];  // [plane: hi, lo][row group]
#pragma unroll
                for (int a = 0; a < AG_; ++a) {
                    const int r = rbase + 16 * a + lr;
                    ldmatrixX4(af[0][a], st + pfChunk(r, 2 * kk + lj));
                    ldmatrixX4(af[1][a], st + kPfBM * 64 + pfChunk(r, 2 * kk + lj));
                }
                // All the hi products, then the lo ones: an accumulator's second mma comes several after its
                // first, not right behind it.
#pragma unroll
                for (int p = 0; p < 2; ++p)
#pragma unroll
                    for (int a = 0; a < AG_; ++a)
#pragma unroll
                        for (int t = 0; t < TN_; ++t) {
                            mma(acc[a][t][0], af[p][a][0], af[p][a][1], af[p][a][2], af[p][a][3], bt[t].x, bt[t].y);
                            mma(acc[a][t][1], af[p][a][0], af[p][a][1], af[p][a][2], af[p][a][3], bt[t].z, bt[t].w);
                        }
            }
        }
    };
    if (TN == 1) {
        if (AG == 2) mainLoop(std::integral_constant<int, 1>{}, std::integral_constant<int, 2>{});
        else mainLoop(std::integral_constant<int, 1>{}, std::integral_constant<int, 1>{});
    } else {
        if (AG == 2) mainLoop(std::integral_constant<int, 2>{}, std::integral_constant<int, 2>{});
        else mainLoop(std::integral_constant<int, 2>{}, std::integral_constant<int, 1>{});
    }
    cpAsyncWait<0>();
    __syncthreads();  // the ring is free: the output tile goes there

    // acc[a][t][h][i]: row rbase + 16·a + g + 8·(i >> 1), column 16·(tbase + t) + 8·h + 2c + (i & 1).
    float* ct = reinterpret_cast<float*>(ring);  // [64][132]
    const int g = lane >> 2, c = lane & 3;
#pragma unroll
    for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int t = 0; t < 2; ++t)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    if (t >= TN) continue;
                    const int row = rbase + 16 * a + g + 8 * (i >> 1);
                    const int col = 16 * (tbase + t) + 8 * h + 2 * c + (i & 1);
                    ct[row * 132 + col] = acc[a][t][h][i];
                }
    __syncthreads();
    // Split-K: this split's tile out and the arrival; only the tile's last block goes on, with the sum in ct.
    if constexpr (SPLIT)
        if (!pfSplitArrive(P, ct, m, splitTileS, splitIdxS)) return;
    // One warp per row: ÷ 2^e, then the CPU's output transform of the block's 128 columns (lane: 4l..4l+3).
    const int col0 = nb * 128 + 4 * lane;
    float svh[4], bias[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        svh[i] = __ldg(job.svh + col0 + i);
        bias[i] = job.bias ? __ldg(job.bias + col0 + i) : 0.0f;
    }
    for (int row = warp; row < m; row += kPfThreads / 32) {
        const float f = pow2(-__ldg(job.e + r0 + row));
        float v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = __fmul_rn(ct[row * 132 + 4 * lane + i], f);
        had128(v, lane);
        float* yr = job.y + int64_t(r0 + row) * job.ldy;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float o = __fmul_rn(v[i], svh[i]);
            if (job.bias) o = __fadd_rn(o, bias[i]);
            if (col0 + i < P.nOut) yr[col0 + i] = o;
        }
    }
}

// Row r of the work list: xr = BH(x ⊙ suh) (the CPU's operations), e = the exponent that scales max |xr| into
// [2^14, 2^15) (rotateInputs' rule, over the whole row), hi = fp16(xr · 2^e), lo = fp16(xr · 2^e − hi); hi of row
// dst at ah + dst·ld, its lo loOffset elements on (the GEMM kernel's planes: ld = k, lo a plane further; the cuBLAS
// route of cuda_exl3_dequant.cu: ld = 2k, lo right after hi — one [rows, 2k] matrix).
// Dynamic shared memory: k floats (the rotated row) + one per warp.
__global__ void __launch_bounds__(kPfTransformThreads) exl3PfTransformKernel(const PfRow* __restrict__ rows, int k,
                                                                              int kIn, __half* __restrict__ ah,
                                                                              int64_t loOffset, int64_t ld,
                                                                              int* __restrict__ eOut) {
    extern __shared__ float xr[];
    float* wmax = xr + k;
    const PfRow R = rows[blockIdx.x];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = kPfTransformThreads / 32;
    float mx = 0.0f;
    for (int b = warp; b < k / 128; b += nw) {
        const int kk = b * 128 + 4 * lane;
        float v[4], s[4];
        loadX4(R.x, kk, kIn, false, v);
        const float4 q = __ldg(reinterpret_cast<const float4*>(R.suh + kk));
        s[0] = q.x;
        s[1] = q.y;
        s[2] = q.z;
        s[3] = q.w;
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = __fmul_rn(v[i], s[i]);
        had128(v, lane);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            xr[kk + i] = v[i];
            mx = fmaxf(mx, fabsf(v[i]));
        }
    }
    mx = warpMaxF(mx);
    if (lane == 0) wmax[warp] = mx;
    __syncthreads();
    mx = wmax[0];
    for (int w = 1; w < nw; ++w) mx = fmaxf(mx, wmax[w]);
    const int e = rowScaleExponent(mx);
    const float sc = pow2(e);
    __half* hrow = ah + int64_t(R.dst) * ld;
    for (int i = 2 * int(threadIdx.x); i < k; i += 2 * kPfTransformThreads) {
        const float t0 = __fmul_rn(xr[i], sc), t1 = __fmul_rn(xr[i + 1], sc);
        const __half h0 = __float2half_rn(t0), h1 = __float2half_rn(t1);
        const __half l0 = __float2half_rn(__fsub_rn(t0, __half2float(h0)));
        const __half l1 = __float2half_rn(__fsub_rn(t1, __half2float(h1)));
        *reinterpret_cast<__half2*>(hrow + i) = __halves2half2(h0, h1);
        *reinterpret_cast<__half2*>(hrow + loOffset + i) = __halves2half2(l0, l1);
    }
    if (threadIdx.x == 0) eOut[R.dst] = e;
}

// y[t, :] += Σ w · src rows over t's entries [off[t], off[t + 1]) in order (the CPU's scatterAddRows order).
__global__ void exl3PfCombineKernel(const int* __restrict__ off, const int* __restrict__ srcRow,
                                    const float* __restrict__ w, const float* __restrict__ src, int D, int T,
                                    float* __restrict__ y) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= int64_t(T) * D) return;
    const int t = int(idx / D), col = int(idx % D);
    const int e0 = off[t], e1 = off[t + 1];
    if (e0 == e1) return;
    float a = y[idx];
    for (int e = e0; e < e1; ++e) a = __fadd_rn(a, __fmul_rn(w[e], src[int64_t(srcRow[e]) * D + col]));
    y[idx] = a;
}

using PfKernelFn = void (*)(PfGemmParams);
template <int K, bool SPLIT>
PfKernelFn pfKernelForCb(int cb) {
    return cb == 0 ? exl3PfGemmKernel<K, 0, SPLIT> : cb == 1 ? exl3PfGemmKernel<K, 1, SPLIT> : exl3PfGemmKernel<K, 2, SPLIT>;
}
template <int K>
PfKernelFn pfKernelForBits(int cb, bool split) {
    return split ? pfKernelForCb<K, true>(cb) : pfKernelForCb<K, false>(cb);
}
PfKernelFn pfKernelFor(int bits, int cb, bool split) {
    switch (bits) {
    case 2: return pfKernelForBits<2>(cb, split);
    case 3: return pfKernelForBits<3>(cb, split);
    case 4: return pfKernelForBits<4>(cb, split);
    case 5: return pfKernelForBits<5>(cb, split);
    case 6: return pfKernelForBits<6>(cb, split);
    default: return nullptr;
    }
}

OverridableSwitch g_prefillPath("TS_EXL3_PREFILL", true);
// Rows per used expert from which a MoE step takes the prefill path (a count below 4,097; more is reported).
ModeSwitch g_pfMoeMinRows("TS_EXL3_PF_MOE_ROWS", 4097, kPfMinRowsMoe);
ModeSwitch g_pfLinearMinRows("TS_EXL3_PF_LINEAR_ROWS", 4097, kPfMinRowsLinear);  // rows of a linear, likewise
std::atomic<int> g_budgetMiB{0};
ModeSwitch g_pfMaxSplit("TS_EXL3_PF_SPLIT", 17, 8);  // 0 reads as 1
std::atomic<int> g_pfLastSplits{0};

}  // namespace

std::vector<std::pair<int64_t, int64_t>> pfExpertGroups(const int32_t* first, int64_t E, int64_t cap) {
    std::vector<std::pair<int64_t, int64_t>> groups;
    for (int64_t e = 0; e < E;) {
        int64_t e1 = e, rows = 0;
        while (e1 < E && (rows == 0 || rows + (first[e1 + 1] - first[e1]) <= cap)) {
            rows += first[e1 + 1] - first[e1];
            ++e1;
        }
        groups.push_back({e, e1});
        e = e1;
    }
    return groups;
}

PfCombine pfCombineLists(const int32_t* byExpert, int64_t base, int64_t end, int64_t T, int64_t topk,
                         const float* weight) {
    PfCombine c;
    c.off.assign(size_t(T) + 1, 0);
    for (int64_t i = base; i < end; ++i) ++c.off[size_t(byExpert[i] / topk) + 1];
    for (int64_t t = 0; t < T; ++t) c.off[size_t(t) + 1] += c.off[size_t(t)];
    c.src.resize(size_t(c.off[size_t(T)]));
    c.w.resize(c.src.size());
    std::vector<int32_t> fill(c.off.begin(), c.off.end() - 1);
    for (int64_t i = base; i < end; ++i) {  // expert-major rows: each token's entries come out in ascending expert
        const int64_t t = byExpert[i] / topk;
        c.src[size_t(fill[size_t(t)])] = int32_t(i - base);
        c.w[size_t(fill[size_t(t)]++)] = weight[byExpert[i]];
    }
    return c;
}

int setPrefillPath(int on) { return g_prefillPath.set(on); }
bool prefillPath() { return g_prefillPath.on(); }
int setPrefillMoeMinRows(int rows) { return g_pfMoeMinRows.set(rows); }
int prefillMoeMinRows() { return g_pfMoeMinRows.now(); }
int setPrefillLinearMinRows(int rows) { return g_pfLinearMinRows.set(rows); }
int prefillLinearMinRows() { return g_pfLinearMinRows.now(); }
int pfSplits(int64_t tiles, int64_t slots, int64_t steps, int maxSplit) {
    int splits = 1;
    while (splits * 2 <= maxSplit && tiles * splits * 2 <= slots && steps % (splits * 2) == 0 &&
           steps / (splits * 2) >= kPfMinSplitSteps)
        splits *= 2;
    return splits;
}
int setPrefillMaxSplit(int splits) { return g_pfMaxSplit.set(splits >= 1 && splits <= 16 ? splits : -1); }
int prefillMaxSplit() { return std::max(1, g_pfMaxSplit.now()); }
int prefillLastSplits() { return g_pfLastSplits.load(std::memory_order_relaxed); }
void noteSplits(int splits) { g_pfLastSplits.store(splits, std::memory_order_relaxed); }
int setPrefillBudgetMiB(int mib) { return g_budgetMiB.exchange(mib > 0 ? mib : 0); }
size_t prefillBudget() {
    const int mib = g_budgetMiB.load(std::memory_order_relaxed);
    return mib > 0 ? size_t(mib) << 20 : kPfBudget;
}
bool pfSupported(int bits, int codebook) { return bits >= 2 && bits <= 6 && codebook >= 0 && codebook <= 2; }

}  // namespace exl3cuda

namespace {

using namespace exl3cuda;

// Carves consecutive 256-byte-aligned pieces out of one scratch allocation.
struct Carve {
    unsigned char* base;
    size_t used = 0;
    template <class T>
    T* take(size_t count) {
        T* p = reinterpret_cast<T*>(base + used);
        used += (count * sizeof(T) + 255) & ~size_t(255);
        return p;
    }
};
size_t carved(size_t count, size_t size) { return (count * size + 255) & ~size_t(255); }
// The GEMM block of K-bit weights and the transform of a k-wide row (the rotated row in shared memory) fit the shared
// memory a block may have (the device's opt-in limit, or exl3SetSmemLimitKiB's): else the staged kernels take the call.
bool pfFits(int bits, int64_t k, const cudaDeviceProp& dev) {
    const size_t lim = smemLimit(dev.sharedMemPerBlockOptin);
    return size_t(pfSmemBytes(bits, pfStagesFor(dev.major))) <= lim && size_t(k + kPfTransformThreads / 32) * 4 <= lim;
}
// A Buffer over scratch memory the backend owns (no ownership: the arena outlives the call).
Buffer rawBuffer(void* p, size_t bytes) { return Buffer(std::shared_ptr<void>(p, [](void*) {}), bytes); }

}  // namespace

// The GEMM of `jobs` (their grid blocks numbered here, job after job) over planes of k columns, n padded output
// columns (nOut kept).
void CudaBackend::exl3PfGemm(const std::vector<exl3cuda::PfJobHost>& jobs, int bits, int codebook, int64_t k, int64_t n,
                             int64_t nOut, int64_t loOffset) {
    const int stages = pfStagesFor(props().major);  // the ring of the architecture whose code runs here
    const size_t smem = size_t(pfSmemBytes(bits, stages));
    // Per call (host-side attribute writes, no device work): right on every device of the process. The whole unified
    // L1 as shared memory: three blocks of the 4-step ring take ~173 KiB of an H200 SM, two of the 3-step ring ~100
    // KiB of a GB10's.
    auto prepare = [&](PfKernelFn f) {
        TS_CHECK(f != nullptr, "exl3 prefill: no kernel for these bits");
        TS_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        TS_CUDA_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    };
    const PfKernelFn whole = pfKernelFor(bits, codebook, false);
    prepare(whole);

    // Output tiles (64 rows × 128 columns), and the splits of k that bring them to one full wave of blocks: a linear
    // of 32–256 rows has only n/128 – 4·n/128 tiles (96–384 at 4096 → 12288), each a block that would walk all of k.
    int64_t tiles = 0;
    for (const PfJobHost& h : jobs) tiles += (h.m + kPfBM - 1) / kPfBM * (n / 128);
    if (tiles == 0) return;
    int occ = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, whole, kPfThreads, smem) != cudaSuccess) {
        (void)cudaGetLastError();
        occ = 1;
    }
    // Under SM limits (TS_CUDA_SM_LIMITS) the launch is padded to the limited SM's count: plan with that one.
    occ = cuda::limitedResidentBlocks(reinterpret_cast<const void*>(whole), kPfThreads, smem, occ);
    const int64_t slots = int64_t(std::max(1, occ)) * std::max(1, props().multiProcessorCount);
    const int splits = pfSplits(tiles, slots, k / 32, prefillMaxSplit());
    const PfKernelFn fn = splits > 1 ? pfKernelFor(bits, codebook, true) : whole;
    if (splits > 1) prepare(fn);

    std::vector<PfJob> dj(jobs.size());
    int blocks = 0, tileStart = 0;
    for (size_t j = 0; j < jobs.size(); ++j) {
        const PfJobHost& h = jobs[j];
        PfJob& d = dj[j];
        d.trellis = h.trellis;
        d.svh = h.svh;
        d.bias = h.bias;
        d.ah = static_cast<const __half*>(h.planes);
        d.e = h.e;
        d.y = h.y;
        d.ldy = int(h.ldy);
        d.m = int(h.m);
        d.blockStart = blocks;
        d.tileStart = tileStart;
        const int64_t t = (h.m + kPfBM - 1) / kPfBM * (n / 128), b = t * splits;
        TS_CHECK(blocks + b < (int64_t(1) << 31), "exl3 prefill: too many blocks");
        blocks += int(b);
        tileStart += int(t);
    }
    auto* table = static_cast<PfJob*>(scratch(kScratchPfJobs, dj.size() * sizeof(PfJob)));
    TS_CUDA_CHECK(cudaMemcpyAsync(table, dj.data(), dj.size() * sizeof(PfJob), cudaMemcpyHostToDevice, m_stream));
    PfGemmParams P;
    P.jobs = table;
    P.J = int(dj.size());
    P.k = int(k);
    P.n = int(n);
    P.NB = int(n / 128);
    P.nOut = int(nOut);
    P.loOffset = loOffset;
    P.stages = stages;
    P.splits = splits;
    while ((1 << P.splitShift) < splits) ++P.splitShift;
    if (splits > 1) {
        Exl3Cache& cache = exl3Cache();
        P.part = zeroedScratch(cache.pfPart, size_t(tiles) * splits * kPfBM * 128 * 4).f32();
        P.counters = zeroedScratch(cache.pfCounters, size_t(tiles) * 4).i32();
    }
    noteSplits(splits);
    cuda::launchPlain(fn, unsigned(blocks), kPfThreads, smem, m_stream, P);
}

void CudaBackend::exl3PfTransform(const std::vector<exl3cuda::PfRow>& rows, int64_t k, int64_t kIn, void* ah,
                                  int64_t loOffset, int* e, int64_t ld) {
    if (rows.empty()) return;
    auto* d = static_cast<PfRow*>(scratch(kScratchPfRows, rows.size() * sizeof(PfRow)));
    TS_CUDA_CHECK(cudaMemcpyAsync(d, rows.data(), rows.size() * sizeof(PfRow), cudaMemcpyHostToDevice, m_stream));
    const size_t smem = size_t(k + kPfTransformThreads / 32) * 4;
    TS_CHECK(smem <= size_t(props().sharedMemPerBlockOptin), "exl3 prefill: input too wide");
    if (smem > 48 * 1024)
        TS_CUDA_CHECK(cudaFuncSetAttribute(exl3PfTransformKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    cuda::launchPlain(exl3PfTransformKernel, unsigned(rows.size()), kPfTransformThreads, smem, m_stream, d, int(k),
                      int(kIn), static_cast<__half*>(ah), loOffset, ld > 0 ? ld : k, e);
}

bool CudaBackend::exl3PrefillLinear(const Buffer& x, int64_t T, const PackedLinear& p, const Buffer& y) {
    if (!prefillPath() || T < prefillLinearMinRows() || capturingNow()) return false;
    const DeviceTrellis& d = deviceTrellis(p);
    if (!pfSupported(d.bits, d.codebook)) return false;
    const int64_t in = p.inFeatures(), out = p.outFeatures();
    if (exl3PrefillLinearCublas(x, T, d, in, out, y)) return true;  // many rows: cuda_exl3_dequant.cu
    if (!pfFits(d.bits, d.k, props())) return false;
    preloadDecodeKernels(d.bits, d.codebook);
    // Rows per group: the planes (4 bytes per element) and exponents within the budget.
    const int64_t perRow = int64_t(d.k) * 4 + 4;
    const int64_t group = std::max<int64_t>(1, std::min<int64_t>(T, int64_t(prefillBudget()) / perRow));
    const size_t bytes = carved(size_t(group * d.k), 4) + carved(size_t(group), 4);
    Carve cv{static_cast<unsigned char*>(scratch(kScratchPfArena, bytes))};
    auto* planes = cv.take<uint16_t>(size_t(group * d.k) * 2);
    int* e = cv.take<int>(size_t(group));
    const int64_t loOffset = group * d.k;  // the lo plane follows the hi plane of `group` rows
    for (int64_t t0 = 0; t0 < T; t0 += group) {
        const int64_t m = std::min(group, T - t0);
        std::vector<PfRow> rows(static_cast<size_t>(m));
        for (int64_t r = 0; r < m; ++r) rows[size_t(r)] = {x.f32() + (t0 + r) * in, d.suh, int32_t(r), 0};
        exl3PfTransform(rows, d.k, in, planes, loOffset, e);
        std::vector<PfJobHost> jobs(1);
        jobs[0] = {d.trellis, d.svh, d.bias, planes, e, y.f32() + t0 * out, out, m};
        exl3PfGemm(jobs, d.bits, d.codebook, d.k, d.n, out, loOffset);
    }
    return true;
}

bool CudaBackend::exl3PrefillMoe(const Buffer& x, int64_t T, int64_t D, int64_t I, const int32_t* byExpert,
                                 const int32_t* first, int64_t E, int64_t topk, const float* hostWeight,
                                 const WeightView* gate, const WeightView* up, const WeightView* down, float limit,
                                 const Buffer& y) {
    // Signatures were checked by the caller (one K and codebook per projection kind, shapes [I, D] / [D, I]).
    int64_t firstUsed = -1;
    for (int64_t e = 0; e < E && firstUsed < 0; ++e)
        if (first[e + 1] > first[e]) firstUsed = e;
    if (firstUsed < 0) return true;
    const DeviceTrellis& g0 = deviceTrellis(*gate[firstUsed].packed);
    const DeviceTrellis& d0 = deviceTrellis(*down[firstUsed].packed);
    if (!prefillPath() || capturingNow() || !pfSupported(g0.bits, g0.codebook) || !pfSupported(d0.bits, d0.codebook) ||
        !pfFits(g0.bits, g0.k, props()) || !pfFits(d0.bits, d0.k, props()))
        return false;
    preloadDecodeKernels(g0.bits, g0.codebook);
    preloadDecodeKernels(d0.bits, d0.codebook);
    const int64_t kG = g0.k, nG = g0.n, kD = d0.k, nD = d0.n;  // padded: [kG = D', nG = I'], [kD = I', nD = D']
    // Per routed row: gate and up planes (kG each, hi + lo), G and U outputs (I), the activation (I), its planes
    // (kD), the down output (D), exponents.
    const int64_t perRow = 2 * kG * 4 + 3 * I * 4 + kD * 4 + D * 4 + 3 * 4;
    const int64_t cap = std::max<int64_t>(kPfBM, int64_t(prefillBudget()) / perRow);
    const std::vector<std::pair<int64_t, int64_t>> groups = pfExpertGroups(first, E, cap);
    int64_t maxRows = 0;
    for (const auto& gr : groups) maxRows = std::max<int64_t>(maxRows, first[gr.second] - first[gr.first]);
    if (maxRows == 0) return true;
    const size_t bytes = 2 * carved(size_t(maxRows * kG), 4) + 3 * carved(size_t(maxRows * I), 4) +
                         carved(size_t(maxRows * kD), 4) + carved(size_t(maxRows * D), 4) + 3 * carved(size_t(maxRows), 4);
    Carve cv{static_cast<unsigned char*>(scratch(kScratchPfArena, bytes))};
    auto* pg = cv.take<uint16_t>(size_t(maxRows * kG) * 2);
    auto* pu = cv.take<uint16_t>(size_t(maxRows * kG) * 2);
    float* gOut = cv.take<float>(size_t(maxRows * I));
    float* uOut = cv.take<float>(size_t(maxRows * I));
    float* act = cv.take<float>(size_t(maxRows * I));
    auto* pd = cv.take<uint16_t>(size_t(maxRows * kD) * 2);
    float* dOut = cv.take<float>(size_t(maxRows * D));
    int* eg = cv.take<int>(size_t(maxRows));
    int* eu = cv.take<int>(size_t(maxRows));
    int* ed = cv.take<int>(size_t(maxRows));

    for (const auto& [ea, eb] : groups) {
        const int64_t base = first[ea], rowsG = first[eb] - base;
        if (rowsG == 0) continue;
        // Transforms: each routed row's token through gate's and up's suh.
        std::vector<PfRow> rg, ru, rd;
        std::vector<PfJobHost> jg, jd;
        for (int64_t e = ea; e < eb; ++e) {
            const int64_t r0 = first[e] - base, m = first[e + 1] - first[e];
            if (m == 0) continue;
            const DeviceTrellis& tg = deviceTrellis(*gate[e].packed);
            const DeviceTrellis& tu = deviceTrellis(*up[e].packed);
            const DeviceTrellis& td = deviceTrellis(*down[e].packed);
            for (int64_t r = 0; r < m; ++r) {
                const int64_t tok = byExpert[first[e] + r] / topk;
                rg.push_back({x.f32() + tok * D, tg.suh, int32_t(r0 + r), 0});
                ru.push_back({x.f32() + tok * D, tu.suh, int32_t(r0 + r), 0});
                rd.push_back({act + (r0 + r) * I, td.suh, int32_t(r0 + r), 0});
            }
            jg.push_back({tg.trellis, tg.svh, tg.bias, pg + r0 * kG, eg + r0, gOut + r0 * I, I, m});
            jg.push_back({tu.trellis, tu.svh, tu.bias, pu + r0 * kG, eu + r0, uOut + r0 * I, I, m});
            jd.push_back({td.trellis, td.svh, td.bias, pd + r0 * kD, ed + r0, dOut + r0 * D, D, m});
        }
        // The gate, up and down planes are each maxRows rows of hi, then maxRows rows of lo (loOffset).
        exl3PfTransform(rg, kG, D, pg, maxRows * kG, eg);
        exl3PfTransform(ru, kG, D, pu, maxRows * kG, eu);
        exl3PfGemm(jg, g0.bits, g0.codebook, kG, nG, I, maxRows * kG);
        swiglu(rawBuffer(gOut, size_t(rowsG * I) * 4), rawBuffer(uOut, size_t(rowsG * I) * 4), rowsG, I, limit,
               rawBuffer(act, size_t(rowsG * I) * 4));
        exl3PfTransform(rd, kD, I, pd, maxRows * kD, ed);
        exl3PfGemm(jd, d0.bits, d0.codebook, kD, nD, D, maxRows * kD);
        // Combine: y[t] += w · out over t's entries in this group, ascending expert — the group's experts after the
        // earlier groups' ones.
        const PfCombine cl = pfCombineLists(byExpert, base, first[eb], T, topk, hostWeight);
        const int32_t* dOff = uploadInts(kScratchPfComb, cl.off.data(), int64_t(cl.off.size()));
        const int32_t* dSrc = uploadInts(kScratchIds, cl.src.data(), int64_t(cl.src.size()));
        const float* dW = uploadFloats(kScratchScale, cl.w.data(), int64_t(cl.w.size()));
        const int64_t total = T * D;
        cuda::launchPlain(exl3PfCombineKernel, unsigned((total + 255) / 256), 256, 0, m_stream, dOff, dSrc, dW, dOut,
                          int(D), int(T), y.f32());
    }
    return true;
}

}  // namespace ts
