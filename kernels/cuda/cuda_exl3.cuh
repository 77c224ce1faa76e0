// Private to the EXL3 CUDA files (cuda_exl3.cu: the linear's planning and launches, cuda_exl3_kernels.cuh and
// cuda_exl3_k*.cu: the kernels; cuda_exl3_moe.cu: the fused MoE):
// the work description the kernel reads (jobs, launch parameters), the per-lane trellis decoder, and the
// host-side planner and launcher. See cuda_exl3.cu's header comment for the algorithm.
//
// The decoder functions are __host__ __device__ so that the lane arithmetic (bit windows, fragment
// placement) can be checked against the CPU decoder on a machine without a GPU.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend.h"
#include "exl3_tune.h"

namespace ts {

class CudaBackend;

namespace exl3cuda {

constexpr int kThreads = 128;  // 4 warps per block
constexpr int kWarps = kThreads / 32;
constexpr int kUnitTilesN = 8;  // n-tiles per work unit: 128 output columns = one output Hadamard block
constexpr int kGroupRows = 16;  // token rows of one m-group: the M of mma.m16n8k16
constexpr int kMaxMG = 4;       // m-groups per job in the prefill variant (64 rows share each decoded tile)
constexpr int kMaxRows = kGroupRows * kMaxMG;
constexpr int kEInit = 100;     // "no scale yet" exponent (see the x transform in cuda_exl3.cu)
// Plan::MG of the streaming decode variant (16-row jobs, one stage per unit; see runUnitStream): each warp
// streams its tiles through its own ring (cp.async into shared memory, or registers), no block-wide stage.
constexpr int kStream = 0;

// k-tiles per pipeline stage: about 32 KiB of trellis for the unit's 8 n-tiles (8·32·K bytes per k-tile),
// a multiple of 8 so that a stage covers whole 128-wide input Hadamard blocks. The 64-row variant (MG = 4)
// halves it: its staged activations (64 rows × 64 B per k-tile) would otherwise not fit.
__host__ __device__ constexpr int stageTilesBase(int K) {
    return K <= 2 ? 64 : K == 3 ? 40 : K == 4 ? 32 : K <= 6 ? 24 : 16;
}
__host__ __device__ constexpr int stageTiles(int K, int MG = 1) {
    return MG <= 1 ? stageTilesBase(K) : (stageTilesBase(K) / 2 < 8 ? 8 : stageTilesBase(K) / 2 / 8 * 8);
}
__host__ __device__ constexpr int tileWords(int K) { return 8 * K; }  // uint32 words of one 16×16 tile
// k-tiles in flight per warp in the streaming unit's shared-memory ring (its two n-tiles each): 1.5–4 KiB.
__host__ __device__ constexpr int ringSteps(int K) { return K <= 1 ? 32 : K == 2 ? 16 : 8; }
// A ring slot holds two k-tiles of the warp's two n-tiles: k-tile h of the pair at words [h·16K, h·16K + 16K),
// laid out as in global memory (the two n-tiles' 8K words each, contiguous). It is copied in 16-byte pieces;
// lane `lane`'s copy r (ringPieces(K) of them) is piece w (words 4w..4w+3) of k-tile h of the pair, or none.
// K ≤ 4 (8K ≤ 32 pieces): lane p copies piece p of the slot; K > 4: lane p (< 4K) copies piece p of each
// k-tile. Either way the piece lands at slot word h·16K + 4w. (h and w are given for a lane that does not
// copy too: the device code computes its addresses without a select.)
struct RingPiece {
    bool valid = false;
    int h = 0;  // k-tile of the pair
    int w = 0;  // 4-word piece within that k-tile's 16K words
};
__host__ __device__ constexpr int ringPieces(int K) { return K <= 4 ? 1 : 2; }
__host__ __device__ constexpr RingPiece ringPiece(int K, int lane, int r) {
    if (K <= 4) return RingPiece{r == 0 && lane < 8 * K, lane / (4 * K), lane % (4 * K)};
    return RingPiece{r < 2 && lane < 4 * K, r, lane};
}
// Token rows the streaming unit stages per k-tile: the mma's 8 B columns (16 when a job has more than 8 rows).
__host__ __device__ constexpr int streamRows(int R) { return R > 8 ? 16 : 8; }
// The longest slice a streaming unit takes: one stage (stageTiles), or two for jobs of ≤ 8 rows at K ≥ 3
// with the shared-memory ring — twice the k-tiles per unit, half the units and their fixed costs (a unit's
// ticket, job load, first trellis latency, input transform and split-K arrival; the one-launch MoE layer at
// batch 1 then fits one wave of gate/up units instead of two). The staged activations of two stages still
// leave 8 blocks per SM (≤ 20 KiB at K = 3..8); two stages at K ≤ 2 or for 16 rows would not.
__host__ __device__ constexpr int streamSliceTiles(int K, int R, bool regRing) {
    return (R <= 8 && K >= 3 && !regRing) ? 2 * stageTilesBase(K) : stageTilesBase(K);
}
// Bytes before the streaming unit's per-warp rings: staged activations [slice][rows][8 words], then the row
// sums and exponents of its (up to) two stages [2][16] each, the flag and padding to 16 bytes.
__host__ __device__ constexpr int streamHeadBytes(int K, int R, bool regRing) {
    return streamSliceTiles(K, R, regRing) * streamRows(R) * 32 + (4 * kGroupRows + 4) * 4;
}

enum Mode : int {
    kModeLinear = 0,  // y rows = x rows · W (+ bias), cols < nOut
    kModeSwiglu = 1,  // jobs come in (gate, up) pairs 2p, 2p+1 sharing x rows: act = swiglu(gate, up) → job 2p's y
    kModeDown = 2,    // y rows of the job (the expert's output), then the routed-weight combine into the final y
};

// One matrix applied to up to 16·MG token rows. Device memory (a table) or the inline chunking of a linear.
struct Job {
    const uint16_t* trellis = nullptr;  // [k/16, n/16, 16K]
    const float* suh = nullptr;         // [k]
    const float* svh = nullptr;         // [n]
    const float* bias = nullptr;        // [n] or null
    const float* x = nullptr;           // input rows (fp32)
    const int32_t* rows = nullptr;      // row i of the job is x + rows[i]·ldx (null: x + i·ldx)
    float* y = nullptr;                 // output row i at y + i·ldy
    int ldx = 0, ldy = 0;
    int m = 0;        // rows, 1..16·MG
    int partRow = 0;  // first row of this job in the split-K partial buffer (rows of all jobs, packed)
};

// One entry of the down projection's combine: final y[t] += weight · src[col] for each of t's choices in
// ascending expert order (the CPU loop's order).
struct CombineEntry {
    const float* src = nullptr;  // the expert's output row (device), [nOut]
    float weight = 0.0f;
    int pad = 0;
};

struct Params {
    Job inlineJob;               // jobs == null: job j = rows [rpj·j, rpj·(j+1)) ∩ [0, T) of this one
    int rowsPerJob = kGroupRows; // rpj: 16·MG
    const Job* jobs = nullptr;   // device table [J]
    int J = 0, T = 0;
    int k = 0, n = 0, tilesK = 0, tilesN = 0, NB = 0;  // padded dims; NB = n / 128
    int kIn = 0, nOut = 0;       // logical widths: inputs ≥ kIn are zero, outputs ≥ nOut are dropped
    int S = 1, KSL = 0, steps = 1;  // slices of k, k-tiles per slice, stages per slice (max)
    int R = 1;                   // rows reserved per k-tile in the staged input (max m over jobs)
    int mode = kModeLinear;
    float limit = 0.0f;          // swiglu clamp (≤ 0: none)
    float* part = nullptr;       // split-K partials [(partRow + row)·S + s][n]
    int* counters = nullptr;     // arrival counters, zero between launches: [groups·NB] then [NB] (combine)
    int groups = 0;
    // kModeDown: the combine into the final output.
    int fusedCombine = 0;        // 1: the last unit of each column block combines; 0: a separate kernel does
    const int32_t* combOffsets = nullptr;  // [Tf + 1]
    const CombineEntry* combEntries = nullptr;
    float* yFinal = nullptr;     // [Tf, nOut], accumulated into (y += ...)
    int Tf = 0;
    int noChunk = 0;             // 1: single-stage units wait for their whole stage (A/B switch, see tuneFlags)
    int regRing = 0;             // streaming units: 1 = the register ring, 0 = the shared-memory ring (see tuneFlags)
    // The fused MoE's one launch (MoeParams; null/0 otherwise). waitOn: a unit of job j waits, once its
    // trellis loads are issued, until waitOn[j] ≥ waitTarget (acquire), and then reads its input rows with
    // coherent loads (they are written in the same launch). signal: the epilogue of column block b adds 1
    // (release) to signal[j / 2] (swiglu: the pair) or signal[b] (down) after its stores.
    const int* waitOn = nullptr;
    int waitTarget = 0;
    int* signal = nullptr;
    // One launch, streaming units: unit u is job u / (NB·S), then column block, then slice (jobMajor = 1), instead
    // of job u % J first. A pair's gate/up units then hold consecutive tickets, meant so that in a launch of more
    // than one wave the first pairs are complete when the down units (in the same order) start (the reasoning
    // behind the measured batch-4 gain; no batch-4 trace was taken). launchMoe sets it (unless
    // TS_EXL3_TUNE bit 1024). Within one wave it changes little: which units an SM's schedulers favour does not
    // follow the ticket order (trace, 2026-12-06).
    int jobMajor = 0;
    // The fused MoE with the routing on the device (cuda_exl3_moe_routed.cu): J and groups are upper bounds
    // planned on the host; the real pair count is *liveGroups (written by the plan kernel earlier in the
    // stream), jobs j ≥ liveJobs (2·live for swiglu pairs, live for down) exit at once. Null: all J are real.
    const int* liveGroups = nullptr;
    // Phase timestamps (bench-device --what exl3-trace; null in normal runs): streaming unit u writes
    // kTraceWords words at trace + u·kTraceWords when u < traceUnits (see traceStamp, cuda_exl3_stream.cuh).
    unsigned long long* trace = nullptr;
    int64_t traceUnits = 0;
};

// The work list of a device-routed fused MoE step (cuda_exl3_moe_routed.cu), built on the device from the
// router's outputs by moeBuildPlan (cuda_exl3_moe_plan.cuh) in a one-block kernel before the MoE launch.
constexpr int kMoePlanMaxPairs = 256;  // (token, choice) pairs of an eligible step: T·topk ≤ 256
// One expert's three projections on the device, as the plan copies them into jobs.
struct MoeProjPtrs {
    const uint16_t* trellis;
    const float* suh;
    const float* svh;
    const float* bias;
};
struct MoeExpertPtrs {
    MoeProjPtrs gate, up, down;
};
// A projection's device copy (DT: CudaBackend::DeviceTrellis — a template, so that this header needs no
// cuda_backend.h) as the MoE's tables hold it: both routed paths' tables are filled through it.
template <class DT>
inline MoeProjPtrs moeProjPtrs(const DT& d) {
    return MoeProjPtrs{d.trellis, d.suh, d.svh, d.bias};
}
struct MoePlanArgs {
    const int32_t* idx = nullptr;          // [P0] expert ids, token-major (the router's output)
    const float* weight = nullptr;         // [P0]
    const MoeExpertPtrs* table = nullptr;  // [E]
    int T = 0, topk = 0, E = 0, P0 = 0;
    int chunk = 1;                         // rows per job (the plan's R)
    const float* x = nullptr;              // [T, D]
    int D = 0, I = 0;
    float* act = nullptr;                  // [P0, I] swiglu rows
    float* eout = nullptr;                 // [P0, D] expert outputs
    Job* jobsGU = nullptr;                 // [2·maxPairs]
    Job* jobsD = nullptr;                  // [maxPairs]
    int32_t* rows = nullptr;               // [P0] token of each packed row
    int32_t* combOffsets = nullptr;        // [T + 1]
    CombineEntry* comb = nullptr;          // [P0]
    int* live = nullptr;                   // [1] pairs of this step
    unsigned long long* trace = nullptr;   // bench-device --what exl3-trace only: this kernel's trace record
};
constexpr size_t kMoePlanScratchBytes = 3 * kMoePlanMaxPairs * sizeof(int);  // moeBuildPlan's static shared memory

// The fused MoE in ONE launch (exl3MoeKernel, launchMoe): one block per unit, each block taking a work
// ticket from one atomic counter when it starts, in the order: every gate/up unit of gu = ph[0] (the
// two-launch version's first grid; streaming units job-major, Params::jobMajor, so ticket t is not always that
// grid's block t), then every down unit of d = ph[1] (its second grid, likewise),
// then — when d.fusedCombine = 0 — the combine units (column block b = ticket / ⌈Tf/8⌉, 8 token rows
// each: the combine kernel's blocks).
//   - a down unit of pair p waits for sync[2 + p] = gu.NB (every column block of the pair's activation
//     rows written); it issues its trellis loads first, so the wait overlaps them;
//   - a combine unit of column block b waits for sync[2 + gu.groups + b] = d.J (every pair's down output).
// Both Params describe exactly the plans of the two-launch version, so the results are bit-identical to it (the
// ticket order changes which block runs a unit, not a unit's sums or the fixed order its epilogue adds slices in).
// Deadlock-free for any grid size (exl3MoeKernel has the argument).
struct MoeParams {
    Params ph[2];  // [0] = gu: kModeSwiglu, gate/up pairs; [1] = d: kModeDown (waitOn, signal: by launchMoe)
    int unitsGU = 0, unitsD = 0, unitsC = 0;  // tickets [0, unitsGU), [unitsGU, +unitsD), then the combine
    int* sync = nullptr;  // [moeSyncInts(groups, NBD)], zero between launches: next ticket, blocks retired,
                          // gate/up column blocks done per pair [groups], down jobs done per column block [NBD]
};
constexpr int moeSyncInts(int groups, int nbDown) { return 2 + groups + nbDown; }

// ---- the per-lane trellis decoder -----------------------------------------------------------------------

// The 16-bit states of tile positions 8·lane .. 8·lane+7 (one lane's two mma B fragments, spec §3.1), from
// the tile's 8K stream words (smem or host memory). Position p's state is the circular window of stream
// bits [(p+1)K − 16, (p+1)K) (spec §3.2); the lane's eight windows lie in the 7K+16 bits starting at
// bs = 8·lane·K + K − 16, which span at most three words. Those words are shifted so that bit bs is the
// top bit of a 64-bit (K ≥ 7: 96-bit) window, and state j is then bits [jK, jK + 16) of it.
__host__ __device__ __forceinline__ uint32_t funnelRight(uint32_t lo, uint32_t hi, int sh) {  // (hi:lo) >> sh
#ifdef __CUDA_ARCH__
    return __funnelshift_r(lo, hi, sh);
#else
    return uint32_t(((uint64_t(hi) << 32) | lo) >> sh);
#endif
}
// Bytes 1..2 of x, zero-extended (one PRMT).
__host__ __device__ __forceinline__ uint32_t bytes12(uint32_t x) {
#ifdef __CUDA_ARCH__
    return __byte_perm(x, 0u, 0x4421);
#else
    return (x >> 8) & 0xFFFFu;
#endif
}

// Word i (0 ≤ i < 8K) of the tile comes from get(i): shared/host memory, or lane shuffles (the streaming
// variant); get is called the same number of times by every lane (shuffles need the whole warp).
// K = 4: lane t's 32 symbol bits are word t (w1); the windows reach 12 bits back into word t − 1 (w0):
// state j = ((w0 : w1) >> (28 − 4j)) & 0xFFFF, here in 11 integer ops instead of 14.
__host__ __device__ __forceinline__ void laneStates4(uint32_t w0, uint32_t w1, uint32_t st[8]) {
    const uint32_t u4 = funnelRight(w1, w0, 4), u8 = funnelRight(w1, w0, 8), u12 = funnelRight(w1, w0, 12);
    st[0] = u12 >> 16;
    st[1] = u8 >> 16;
    st[2] = u4 >> 16;
    st[3] = w1 >> 16;
    st[4] = bytes12(u4);
    st[5] = bytes12(w1);
    st[6] = u4 & 0xFFFFu;
    st[7] = w1 & 0xFFFFu;
}

// 3INST/MCG's hash of a state, x = s·A + B (mod 2³²; spec §3.3), CB 0 = 3INST, 1 = MCG.
__host__ __device__ constexpr uint32_t hashMul(int CB) { return CB == 0 ? 89226354u : 0xCBAC1FEDu; }
__host__ __device__ constexpr uint32_t hashAdd(int CB) { return CB == 0 ? 64248484u : 0u; }
__host__ __device__ constexpr uint32_t hashState(int CB, uint32_t s) { return s * hashMul(CB) + hashAdd(CB); }

// The hashes of laneStates4's eight states for 3INST/MCG, with four of its eleven ALU instructions moved to the
// FMA pipe: the K = 4 MCG streaming loop was bound by the ALU pipe (half rate: ~46 ALU instructions per warp
// k-tile, ≥ 92 cycles, against ~80 issued; ncu's pipe utilisation and the SASS, fourteenth session), while its
// FMA-heavy pipe was a fifth busy. The states are the high and low halves of four words v = u12, u8, u4, w1 (st[j] = v >> 16,
// st[j + 4] = v & 0xFFFF), and a low half's hash follows from the word's and the high half's without the mask:
// lo = v − hi·2¹⁶, so x_lo = lo·A + B = v·A + B·(1 + 2¹⁶) − x_hi·2¹⁶ (mod 2³²) — two IMADs where the states
// take an AND or PRMT and then one IMAD. Bit-identical (tests/kernels/test_exl3_lanes.cpp). The streaming
// unit takes it for MCG only (preHashed in cuda_exl3_stream.cuh says why not for 3INST).
template <int CB>
__host__ __device__ __forceinline__ void laneHashes4(uint32_t w0, uint32_t w1, uint32_t x[8]) {
    constexpr uint32_t A = hashMul(CB), B = hashAdd(CB), C = B * 65537u;
    const uint32_t v[4] = {funnelRight(w1, w0, 12), funnelRight(w1, w0, 8), funnelRight(w1, w0, 4), w1};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        x[j] = (v[j] >> 16) * A + B;
        x[j + 4] = v[j] * A + C + x[j] * 0xFFFF0000u;  // − x_hi·2¹⁶
    }
}

template <int K, class Get>
__host__ __device__ __forceinline__ void laneStatesFrom(Get get, int lane, uint32_t st[8]) {
    constexpr uint32_t W = tileWords(K);
    if constexpr (K == 4) {
        laneStates4(get((lane + 31) & 31), get(lane), st);
        return;
    }
    // Three words are needed unless the lane's region starts early enough in its first word (K = 1, 2, 4).
    constexpr bool kThird = !(K == 1 || K == 2 || K == 4);
    const uint32_t bs = 8u * uint32_t(lane) * K + 256u * K + K - 16u;  // + 256K keeps it positive (wrap)
    uint32_t i0 = bs >> 5;
    i0 = i0 >= W ? i0 - W : i0;  // bs >> 5 < 2W
    const uint32_t o = bs & 31u;  // compile-time for K = 4, 8
    const uint32_t i1 = i0 + 1 == W ? 0 : i0 + 1;
    const uint64_t w0 = get(i0), w1 = get(i1);
    uint64_t win = ((w0 << 32) | w1) << o;  // stream bits [bs, bs + 64 − o) at the top, zeros below
    uint32_t tail = 0;                      // K ≥ 7: stream bits [bs + 64, bs + 96)
    if constexpr (kThird) {
        const uint32_t i2 = i1 + 1 == W ? 0 : i1 + 1;
        const uint64_t w2 = get(i2);
        win |= w2 >> (32 - o);  // the next word's top o bits fill the low o bits (o = 0 adds nothing)
        if constexpr (K >= 7) tail = uint32_t(w2 << o);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const int lo = j * K;  // window bits [lo, lo + 16)
        if (lo + 16 <= 64) {
            st[j] = uint32_t(win >> (48 - lo)) & 0xFFFFu;
        } else {  // K ≥ 7, last positions: straddles the 64-bit window and the tail word
            const uint64_t w = (win << 32) | tail;  // bits [32, 96) of the 96-bit window
            st[j] = uint32_t(w >> (80 - lo)) & 0xFFFFu;
        }
    }
}

// The same from the tile's 8K words in memory (smem or host).
template <int K>
__host__ __device__ __forceinline__ void laneStates(const uint32_t* tw, int lane, uint32_t st[8]) {
    laneStatesFrom<K>([tw](uint32_t i) { return tw[i]; }, lane, st);
}

// MUL1's multiplier: x = s·kMul1Mul (mod 2³²), then the byte sum (spec §3.3; exl3_format.h's kExl3Mul1Multiplier,
// test_exl3_lanes checks that they agree).
constexpr uint32_t kMul1Mul = 0x83DCD12Du;
// MUL1's affine map from h = 1024 + bytesum to the value (spec §3.3): kinv·h + kbias.
constexpr float kMul1Inv = 0.00676727294921875f;  // fp16 0x1EEE
constexpr float kMul1Bias = -10.3828125f;         // fp16 0xC931

// The halves route of 3INST/MCG (tileProduct in cuda_exl3_stream.cuh, K ≤ 4; codebookHalves below): a tile
// takes two mmas; mma I (0, 1) has as A register r the (lo, hi) halves of the lane's state halvesState(I, r) —
// {0, 4, 2, 6}, then {1, 5, 3, 7}: rows g | g + 8 at the inputs 2c + I and 2c + 8 + I — and as B the lane's two
// activation words with half I of each duplicated (byte selector halvesDup(I)), so both halves of a weight meet
// the same activation. tests/kernels/test_exl3_lanes.cpp multiplies it out on the host.
__host__ __device__ constexpr int halvesState(int I, int r) { return I + 4 * (r & 1) + 2 * (r >> 1); }
__host__ __device__ constexpr uint32_t halvesDup(int I) { return I == 0 ? 0x1010u : 0x3232u; }

#if defined(__CUDACC__)  // device intrinsics; the lane arithmetic above also compiles as host C++ (tests)
// 3INST/MCG's (x & 0x8FFF8FFF) ^ 0x3B603B60 as one LOP3 ((a & b) ^ c: LUT 0x6A), written out: left to itself
// the compiler emits an AND and an XOR — a SASS LOP3 takes one immediate, the other constant needs a register
// — 8 instructions more per 16×16 tile and lane (SASS of the K = 4 MCG streaming kernel; with this form its
// 4096→12288 GEMV went 23.2 → 20.2 µs, thirteenth session).
__device__ __forceinline__ uint32_t maskXor3inst(uint32_t x) {
    uint32_t r;
    asm("lop3.b32 %0, %1, 0x8FFF8FFF, 0x3B603B60, 0x6A;\n" : "=r"(r) : "r"(x));
    return r;
}

// Codebook value of a state as an fp16 pair with the value in both halves (the bits of a half2): the
// duplicate lets one mma multiply it by the hi and lo parts of the activation (cuda_exl3.cu).
// 3INST/MCG: x = s·M (+A); x = (x & 0x8FFF8FFF) ^ 0x3B603B60; value = fp16(lo) + fp16(hi), one rounding.
// MUL1: x = s·M; h = fp16 bits 0x6400 + bytesum(x) (= 1024 + bytesum exactly); value = fma(h, kinv, kbias).
template <int CB>
__device__ __forceinline__ uint32_t codebookDup(uint32_t s) {
    if constexpr (CB == 2) {
        const uint32_t x = s * kMul1Mul;
        const uint32_t t = __dp4a(x, 0x01010101u, 0x6400u);  // 0x6400 + the sum of the four unsigned bytes
        const __half2 h = *reinterpret_cast<const __half2*>(&t);  // (1024 + bytesum, 0)
        const __half2 kinv = __halves2half2(__ushort_as_half(0x1EEE), __ushort_as_half(0x1EEE));
        const __half2 kbias = __halves2half2(__ushort_as_half(0xC931), __ushort_as_half(0xC931));
        const __half2 r = __hfma2(__low2half2(h), kinv, kbias);  // low half in both lanes: a .H0_H0 operand
        return *reinterpret_cast<const uint32_t*>(&r);
    } else {
        const uint32_t x = maskXor3inst(hashState(CB, s));
        const __half2 h = *reinterpret_cast<const __half2*>(&x);
        const __half2 r = __hadd2(__low2half2(h), __high2half2(h));  // (lo + hi) in both halves
        return *reinterpret_cast<const uint32_t*>(&r);
    }
}

// The streaming unit's fragment: the lane's 8 codebook values as 4 fp16 pairs, positions 2q, 2q+1 in register
// q (spec §3.1: k rows 2c, 2c+1 | 2c+8, 2c+9 of column g, then of column g + 8) — the mma's A operand Ŵᵀ
// there, multiplied by a single fp16 activation per k (no hi/lo duplicate).
// MUL1: the pair holds h = 1024 + bytesum exactly (fp16 bits 0x6400 + bytesum), NOT the value; value =
// kinv·h + kbias is affine, so the unit computes kinv·Σ a·h + kbias·Σ a from the mma sums and the row's Σ a
// (the exact affine value instead of its fp16 rounding: within half an fp16 ulp of the CPU's LUT value).
// 3INST/MCG: (lo + hi) of each hash, one fp16 rounding each — the CPU's values exactly (the streaming unit
// takes this form at K > 4 only; below it, codebookHalves).
template <int CB>
__device__ __forceinline__ void codebookPairs(const uint32_t st[8], uint32_t b[4]) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const uint32_t s0 = st[2 * q], s1 = st[2 * q + 1];
        if constexpr (CB == 2) {
            const uint32_t t0 = __dp4a(s0 * kMul1Mul, 0x01010101u, 0x6400u);
            const uint32_t t1 = __dp4a(s1 * kMul1Mul, 0x01010101u, 0x6400u);
            b[q] = __byte_perm(t0, t1, 0x5410);
        } else {
            const uint32_t h0 = hashState(CB, s0), h1 = hashState(CB, s1);
            const uint32_t x0 = maskXor3inst(h0), x1 = maskXor3inst(h1);
            const uint32_t lo = __byte_perm(x0, x1, 0x5410), hi = __byte_perm(x0, x1, 0x7632);
            const __half2 r = __hadd2(*reinterpret_cast<const __half2*>(&lo), *reinterpret_cast<const __half2*>(&hi));
            b[q] = *reinterpret_cast<const uint32_t*>(&r);
        }
    }
}

// The lane's 8 codebook values of a tile as fp16 pairs in B-fragment order (the prefill GEMM's B operand and the
// dequantised weights of cuda_exl3_dequant.cu): register q = (value 2q, 2q + 1), q = 0,
// 1 the two B registers of the tile's first 8 columns (k 2c, 2c+1 | 2c+8, 2c+9 of column g), q = 2, 3 those of
// columns 8..15 — the CPU's values exactly (MUL1: the fp16 fma of 1024 + bytesum, one rounding per value, as the
// scalar codebook; 3INST/MCG: lo + hi rounded once, codebookPairs).
template <int CB>
__device__ __forceinline__ void lanePairs(const uint32_t (&st)[8], uint32_t (&b)[4]) {
    if constexpr (CB == 2) {
        const __half2 kinv = __halves2half2(__ushort_as_half(0x1EEE), __ushort_as_half(0x1EEE));
        const __half2 kbias = __halves2half2(__ushort_as_half(0xC931), __ushort_as_half(0xC931));
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const uint32_t t0 = __dp4a(st[2 * q] * kMul1Mul, 0x01010101u, 0x6400u);
            const uint32_t t1 = __dp4a(st[2 * q + 1] * kMul1Mul, 0x01010101u, 0x6400u);
            const uint32_t h = __byte_perm(t0, t1, 0x5410);
            const __half2 r = __hfma2(*reinterpret_cast<const __half2*>(&h), kinv, kbias);
            b[q] = *reinterpret_cast<const uint32_t*>(&r);
        }
    } else {
        codebookPairs<CB>(st, b);
    }
}

// 3INST/MCG without the fp16 addition: the hash's two fp16 halves (lo, hi) as they come out of the mask and
// xor — value = lo + hi. The streaming unit (tileProduct in cuda_exl3_stream.cuh, K ≤ 4) hands the pair to
// the mma as is, as two adjacent k positions against the same activation twice, so the tensor core adds
// them: no PRMT, no HADD2 per weight, and the sum is exact in fp32 (spec §3.3) where codebookPairs rounds it
// to fp16 once.
template <int CB>
__device__ __forceinline__ uint32_t codebookHalves(uint32_t s) {
    static_assert(CB != 2, "MUL1 has no halves");
    return maskXor3inst(hashState(CB, s));
}
#endif  // __CUDACC__

// ---- host side --------------------------------------------------------------------------------------------

// Shared memory of a staged unit (MG = 1 or kMaxMG): the trellis stage (double-buffered when `steps` > 1), the
// staged hi/lo activations of R rows, the row exponents and flag.
__host__ __device__ constexpr size_t stageBytes(int bits, int MG) {
    return size_t(stageTiles(bits, MG)) * kUnitTilesN * tileWords(bits) * 4;
}
__host__ __device__ constexpr size_t stagedSmemBytes(int bits, int MG, int steps, int R) {
    return size_t(steps > 1 ? 2 : 1) * stageBytes(bits, MG) + size_t(stageTiles(bits, MG)) * R * 64 +
           (2 * kMaxRows + 4) * 4;
}

// Unit u of a launch of J jobs × NB column blocks × S slices → its (job, column block, slice). By default the job
// changes fastest: units that read the same trellis (a linear's 16-row jobs) run side by side. jobMajor (the
// one-launch MoE's streaming units, Params::jobMajor): the job changes slowest, then the column block, so a job's
// units hold consecutive tickets. tests/kernels/test_exl3_plan.cpp checks that both orders cover every unit once.
struct UnitCoords {
    int j, b, s;
};
__host__ __device__ inline UnitCoords unitCoords(int64_t u, int J, int NB, int S, bool jobMajor) {
    if (jobMajor) {
        const int64_t per = int64_t(NB) * S;
        const int j = int(u / per);
        const int r = int(u - j * per);
        return {j, r % NB, r / NB};
    }
    const int64_t sb = u / J;
    return {int(u % J), int(sb % NB), int(sb / NB)};
}

// How one launch splits its work: S slices of k (KSL k-tiles each) × NB column blocks × J jobs = blocks.
struct Plan {
    int MG = 1;  // m-groups per job: kStream or 1 (decode) or kMaxMG (prefill: each decoded tile serves 64 rows)
    int S = 1, KSL = 0, steps = 1, R = 1;
    size_t smem = 0;
    int64_t blocks = 0;
    bool partials = false;  // units combine through the partial buffer (S > 1 or paired jobs)
};
// bits: K; MG: m-groups per job; tilesK: k/16; NB: n/128; J jobs of up to R rows, rowsTotal rows in all;
// pairMode: swiglu jobs; codebook: the kernel variant (its occupancy picks decode slice lengths; < 0: don't).
// MG = 1 plans that come out as one stage per unit become streaming plans (Plan::MG = kStream) unless
// allowStream is false or TS_EXL3_TUNE has bit 8 (the shared-memory stage kept, for A/B runs). smemLimit > 0: a
// block may have at most that much shared memory (the device's opt-in limit): a staged plan that double-buffers
// past it takes one stage per unit instead (more slices). The 64-row variant can need more than a small limit
// even so — chooseMG keeps such jobs at 16 rows.
Plan planLaunch(int bits, int codebook, int MG, int tilesK, int NB, int J, int rowsTotal, int R, bool pairMode, int numSMs,
                bool allowStream = true, size_t smemLimit = 0);
// The packed form of one expert projection with the logical shape [outF, inF] that the EXL3 kernels take (K
// 1..8, a known codebook, k and n padded to 128), or null: the fused MoE's eligibility, host and device routed.
inline const TrellisView* moePackedView(const WeightView& w, int64_t outF, int64_t inF) {
    if (!w.packed || w.rows != outF || w.cols != inF) return nullptr;
    if (w.packed->inFeatures() != inF || w.packed->outFeatures() != outF) return nullptr;
    const TrellisView* t = w.packed->trellis();
    if (!t || t->bits < 1 || t->bits > 8 || t->codebook > 2 || t->k % 128 || t->n % 128) return nullptr;
    return t;
}
// The two phases of a fused MoE layer: gate/up over 2·pairs jobs (swiglu pairs) of 2·rows routed rows in all,
// down over `pairs` jobs of `rows` rows, jobs of ≤ R rows each (K and codebook per phase). Planned alike, and
// both re-planned without the streaming variant when only one of them would stream: one kernel variant (MG)
// serves both phases of the one-launch kernel.
struct MoePlans {
    Plan gu, d;
};
MoePlans planMoePhases(int bitsGU, int cbGU, int bitsD, int cbD, int MG, int tilesKG, int NBG, int tilesKD, int NBD,
                       int pairs, int rows, int R, int numSMs, size_t smemLimit = 0);
// The Params of one phase of the fused MoE (gate/up pairs: kModeSwiglu, or down: kModeDown) over a
// device job table of J jobs (`groups` pairs), for padded k × n trellises, logical widths kIn → nOut and
// the phase's plan. The caller sets the rest (limit, the combine fields, liveGroups).
inline Params moePhaseParams(const Job* jobs, int J, int groups, int64_t k, int64_t n, int64_t kIn, int64_t nOut,
                             const Plan& plan, int mode, float* part, int* counters) {
    Params p;
    p.jobs = jobs;
    p.J = J;
    p.k = int(k);
    p.n = int(n);
    p.tilesK = int(k / 16);
    p.tilesN = int(n / 16);
    p.NB = int(n / 128);
    p.kIn = int(kIn);
    p.nOut = int(nOut);
    p.S = plan.S;
    p.KSL = plan.KSL;
    p.steps = plan.steps;
    p.R = plan.R;
    p.mode = mode;
    p.part = part;
    p.counters = counters;
    p.groups = groups;
    return p;
}
// The m-groups to use for jobs of about `rowsPerJob` rows (at most 16·MG rows each) at K = bits: the 64-row
// variant when the jobs are that large and its one-stage plan fits smemLimit (0: no limit). Under sm_12x's
// 99 KiB per block (a GB10) K ≤ 2 keeps 16-row jobs: 64 rows of staged activations alone take 128 KiB there.
inline int chooseMG(double rowsPerJob, int bits = 4, size_t smemLimit = 0) {
    if (rowsPerJob < 40.0) return 1;
    return smemLimit == 0 || stagedSmemBytes(bits, kMaxMG, 1, kMaxRows) <= smemLimit ? kMaxMG : 1;
}
// The prefill path (cuda_exl3_prefill.cu): a transform row — x row (fp32) ⊙ suh → row `dst` of the hi/lo planes —
// and a GEMM job — one matrix over m rows of the planes (row r: hi at planes + r·k, lo at + loOffset; exponent
// e[r]) into y + r·ldy. Host-built, copied to the device as they are.
struct PfRow {
    const float* x = nullptr;
    const float* suh = nullptr;
    int32_t dst = 0;
    int32_t pad = 0;
};
struct PfJobHost {
    const uint16_t* trellis = nullptr;
    const float* svh = nullptr;
    const float* bias = nullptr;
    const void* planes = nullptr;  // fp16 [rows, k] (hi; lo at + loOffset elements)
    const int* e = nullptr;
    float* y = nullptr;
    int64_t ldy = 0, m = 0;
};
// When the prefill path is taken: a linear of at least prefillLinearMinRows() rows (TS_EXL3_PF_LINEAR_ROWS, default
// kPfMinRowsLinear); a MoE step of at least prefillMoeMinRows() routed rows per used expert on average
// (TS_EXL3_PF_MOE_ROWS, default kPfMinRowsMoe). The defaults are the crossovers measured on the H200
// (docs/PERFORMANCE.md, "EXL3 prefill at the engine's chunk"; the MoE's moved from 3 to 8 rows once the decode-sized
// steps kept 8-row jobs on the streaming unit up to ~500 tokens: 256 tokens, 7.1 rows, 3.3 against 4.0 ms; 320
// tokens, 8.9 rows, 4.1 against 3.9 ms — docs/PERFORMANCE_EXL3.md, 2026-12-02 fourth session).
// The linear's moved from 32 to 17 rows with the GEMM's split-K (17 / 24 / 28 rows: 0.070 / 0.070 / 0.073 against
// 0.078 / 0.083 / 0.077 ms on the staged kernels at 4096 → 12288; at 16 they keep the lead, 0.046 against 0.061).
// Decode graphs, captured up to 16 rows, never see the prefill path.
constexpr int kPfMinRowsLinear = 17;
constexpr int kPfMinRowsMoe = 8;
// From how many rows a linear on the prefill path runs its GEMM on cuBLAS over its weights dequantised once per call
// (cuda_exl3_dequant.cu): TS_EXL3_PF_CUBLAS_ROWS (read once; a count up to 4,096, or 4,097: never) or kPfMinRowsCublas,
// the crossover measured on the H200 (docs/PERFORMANCE.md, "EXL3 prefill GEMM on cuBLAS"). setPrefillCublasRows(r)
// overrides it for r in [0, 4097] (anything else restores the environment's; returns the previous override, −1 none).
// (4096 → 12288 at K = 4: 128 rows 0.170 against 0.144 ms on the GEMM kernel, 192 rows 0.189 against 0.207 ms.)
constexpr int kPfMinRowsCublas = 192;
int setPrefillCublasRows(int rows);
int prefillCublasRows();
int64_t prefillCublasCalls();  // linear calls the route took (ts::exl3PrefillCublasCalls)
// The dequantised copy's budget: [n, 2k] fp16 (the weights twice, against the hi and lo halves of each row), at most
// this many bytes; a larger matrix keeps the GEMM kernel.
constexpr size_t kPfCublasWeightBytes = size_t(256) << 20;
bool pfSupported(int bits, int codebook);  // K = 2..6, any codebook
// Loads the decode kernels of K = bits and the codebook (the streaming and 16-row linear and MoE kernels, the combine)
// into the context, once per (K, codebook) and process. CUDA loads a kernel at its first use; a prefill on the
// prefill path uses none of them, so the first decode step after it paid ~0.06–0.11 s of loading (measured on the
// H200, docs/PERFORMANCE.md). The prefill path calls it.
void preloadDecodeKernels(int bits, int codebook);
// The MoE's work split (host code, tests/kernels/test_exl3_prefill_plan.cpp): groups [e0, e1) of experts in
// ascending order covering [0, E), each with at most `cap` routed rows unless one expert alone has more;
// first: [E + 1] row offsets of the experts (rows expert-major).
std::vector<std::pair<int64_t, int64_t>> pfExpertGroups(const int32_t* first, int64_t E, int64_t cap);
// A group's combine lists from its rows [base, end) of byExpert (flat choices t·topk + j, expert-major): token t's
// entries [off[t], off[t + 1]) — the row within the group and the choice's weight — in ascending expert order.
struct PfCombine {
    std::vector<int32_t> off, src;
    std::vector<float> w;
};
PfCombine pfCombineLists(const int32_t* byExpert, int64_t base, int64_t end, int64_t T, int64_t topk,
                         const float* weight);
int setPrefillPath(int on);  // TS_EXL3_PREFILL override (ts::exl3SetPrefillPath)
bool prefillPath();
int setPrefillMoeMinRows(int rows);  // TS_EXL3_PF_MOE_ROWS override (ts::exl3SetPrefillMoeMinRows)
int prefillMoeMinRows();
int setPrefillLinearMinRows(int rows);  // TS_EXL3_PF_LINEAR_ROWS override (ts::exl3SetPrefillLinearMinRows)
int prefillLinearMinRows();
// The prefill GEMM's splits of k for `tiles` output tiles, `slots` co-resident blocks on the device and `steps` 32-k
// steps: the largest power of two ≤ maxSplit that keeps the blocks within one wave, divides the steps and leaves
// each split ≥ kPfMinSplitSteps of them (1: no split).
constexpr int kPfMinSplitSteps = 8;
int pfSplits(int64_t tiles, int64_t slots, int64_t steps, int maxSplit);
int setPrefillMaxSplit(int splits);  // TS_EXL3_PF_SPLIT override (ts::exl3SetPrefillMaxSplit)
int prefillMaxSplit();               // the most splits of k one GEMM launch may take (≥ 1)
int prefillLastSplits();             // the splits of the last GEMM launch (0 before any)
void noteSplits(int splits);
size_t prefillBudget();  // scratch bytes one group of the prefill path's rows may take (ts::exl3SetPrefillBudgetMiB)

// A/B switches for measuring the decode changes on a GPU, read once from the environment variable
// TS_EXL3_TUNE (a bit mask; unset or 0 = the defaults): 1 = no chunked waits in single-stage units
// (launch() sets Params::noChunk), 2 = the decode planner keeps the fixed 6-units-per-SM slice count,
// 4 = the fused MoE in two launches (gate/up + swiglu, then down + combine; a third for the combine of
// large steps) instead of one (see moeLaunches), 8 = decode units keep the shared-memory trellis stage
// (MG = 1) instead of streaming (kStream), 16 = streaming units keep their k-tiles in flight in registers
// (4 per warp) instead of a per-warp cp.async ring in shared memory, 32 = the EXL3 kernels are launched
// without programmatic dependent launch (each waits for the previous kernel to finish before it starts),
// 64 = streaming units take one stage per slice (streamSliceTiles' second stage unused), 128 = the planner's
// split-K bounds on partials (≤ 40 % of the weight bytes, ≤ 64 MiB) apply to decode jobs too, as before: a 13–16-row
// linear and a MoE step of more than ~130 tokens then take the staged unit (planLaunch), 512 = the host-routed fused
// MoE copies its job tables in the compute stream, between the previous kernel and its launch, as before
// (Exl3Cache::moeArgs), 1024 = the one-launch MoE's streaming units take their tickets job by job fastest, as
// before, instead of job-major (Params::jobMajor), 2048 = the device-routed MoE's plan kernel as before: launched
// plainly (no programmatic dependent launch) and reading the expert table from global memory.
int tuneFlags();
// The switches of TS_EXL3_TUNE, named (bits 8, 16, 32, 64, 512 and 2048 above).
bool tuneStagedDecode();
bool tuneRegisterRing();
bool tunePdlOff();
bool tuneTablesInStream();
bool tunePlanPlain();
bool tuneOneStageSlices();
// TS_EXL3_KSL (A/B runs): decode plans take slices of that many k-tiles (a multiple of 8, capped at what
// one unit takes) instead of the planner's choice; 0 (unset) = the planner's.
int tuneSliceTiles();
// The fused MoE's variant: 1 (one launch, the default) or 2 (the two-launch version: TS_EXL3_TUNE bit 4,
// or a run-time override, ts::exl3MoeSetLaunches in kernels/exl3_tune.h, for benchmarks and tests).
int moeLaunches();
bool moeDeviceRouting();  // cuda_exl3_moe_routed.cu: TS_MOE_DEVICE_ROUTE (default on)
int setMoeLaunches(int n);     // 1 or 2; anything else: back to TS_EXL3_TUNE. Returns the previous override.
// The most rows one job of a decode-sized fused MoE step holds (MG = 1 plans, host or device routed; a linear keeps
// 16-row jobs, which share one read of its weights): 8, the width of the streaming unit's mma (streamRows),
// unless TS_EXL3_MOE_JOB_ROWS (1..16, read once) or ts::exl3SetMoeJobRows says otherwise. One plan serves every unit
// of a launch, and a 16-row job puts them all into the 16-row form — 16 staged rows, two mmas per tile, one-stage
// slices, or (the split-K bound on partials keeping slices long) the staged unit: so a single MoE expert of 9–16
// rows (an outlier of a ~100-token prefill chunk; every device-routed step of 9–16 tokens by its bound) used to slow
// the whole step. With 8-row jobs such an expert is read once per job instead (docs/PERFORMANCE_EXL3.md).
int moeJobRows();
int setMoeJobRows(int rows);  // 1..16; anything else: back to the environment's. Returns the previous (−1: none).
// The rows per MoE job for MG m-groups and `rowsPerMatrix` routed rows per used expert: moeJobRows() for the
// decode sizes (below chooseMG's 40), else 16·MG (a 64-row plan, or the 16-row jobs a small shared-memory limit
// leaves prefill-sized steps: there each job's weights are a full read).
int moeJobRowsFor(int MG, double rowsPerMatrix);
// The shared memory a block may have in the plans (exl3SetSmemLimitKiB, kernels/exl3_tune.h): the device's opt-in
// limit, or less while an override is set (the self-test plans a GB10's 99 KiB on an H200).
int setSmemLimitKiB(int kib);  // > 0: that many KiB at most; anything else: the device's. Returns the previous (0: none).
size_t smemLimit(size_t deviceOptin);
bool prefillJobs(int bits);    // ts::exl3PrefillJobs (kernels/exl3_tune.h) on the current device
void noteMoeLaunches(int n);   // moeExpertsFused records its launches (for exl3MoeLastLaunches)
int lastMoeLaunches();
// The trace of the next launches (exl3SetTrace, kernels/exl3_tune.h): device words and their capacity in
// units; launch() and launchMoe() copy it into Params::trace (the MoE's down units after its gate/up units).
void setTrace(unsigned long long* words, int64_t units);
// The trace words of unit u while a trace is set and u is within its capacity, else null (the device-routed
// MoE's plan kernel stamps the record after its launch's units: kTraceModePlan, kernels/exl3_tune.h).
unsigned long long* traceWordsOf(int64_t u);
// Enqueues the kernel for (bits, codebook, plan.MG) on `stream`.
void launch(const Params& p, const Plan& plan, int bits, int codebook, cudaStream_t stream);
// The combine of kModeDown as its own kernel (when fusedCombine = 0).
void launchCombine(const Params& p, cudaStream_t stream);
// Enqueues the one-launch fused MoE (both phases planned by planLaunch with the same K, codebook and MG);
// fills the unit counts and the waitOn/signal fields of ph[0] and ph[1] from the plans and p.sync. Grid:
// one block per ticket.
void launchMoe(const MoeParams& p, const Plan& planGU, const Plan& planD, int bits, int codebook, cudaStream_t stream);

}  // namespace exl3cuda

// Per-backend EXL3 state: device scratch that must outlive one call (arrival counters, which the kernels
// leave at zero), grown on demand, pinned host staging for the per-call tables, and the fused MoE's
// per-layer expert tables.
struct Exl3Cache {
    Exl3Cache() = default;
    Exl3Cache(const Exl3Cache&) = delete;
    Exl3Cache& operator=(const Exl3Cache&) = delete;
    ~Exl3Cache();

    Buffer part;      // split-K partial sums (fp32)
    Buffer counters;  // int32 arrival counters (and the one-launch MoE's ticket counters), zero between launches
    Buffer args;      // per-call job tables, row lists and combine lists (device)
    Buffer act;       // the fused MoE's swiglu output rows
    Buffer expertOut; // the fused MoE's per-expert down outputs
    Buffer pfPart;     // the prefill GEMM's split-K tiles (fp32 [tiles][splits][64][128])
    Buffer pfCounters; // its int32 arrival counters per tile, zero between launches

    // Pinned host staging: a ring of slots, each reused only after the copy that last read it has run
    // (its event), so the host never waits on the stream and never overwrites bytes still being copied.
    struct Staging {
        void* host = nullptr;
        size_t cap = 0;
        cudaEvent_t done = nullptr;
        bool pending = false;
    };
    Staging staging[4];
    int nextStaging = 0;
    // A pinned host buffer of at least `bytes`; copy from it on `stream`, then call stagingCopied().
    void* stagingBuffer(size_t bytes);
    void stagingCopied(cudaStream_t stream);
    // The host-routed fused MoE's job tables (cuda_exl3_moe.cu), one device copy per staging slot, copied on a
    // stream of their own: a step's copy then overlaps the previous kernels instead of sitting in the compute
    // stream between the previous launch and its own (measured: about a sixth of a batch-1 MoE layer's period,
    // docs/PERFORMANCE_EXL3.md). argsCopied[s]: the copy into slot s has landed (the launch waits for it);
    // argsRead[s]: the launch that last read slot s has completed (the next copy into s waits for it).
    Buffer moeArgs[4];
    cudaEvent_t argsCopied[4] = {};
    cudaEvent_t argsRead[4] = {};
    bool argsReadPending[4] = {};
    cudaStream_t copyStream = nullptr;
    // copyStream, created on first use (non-blocking: it never waits for the legacy default stream).
    cudaStream_t tablesStream();
    // The host-routed path's per-layer table: each expert's {gate, up, down} device pointers as the jobs take
    // them, filled when the expert is first used (gate.trellis null until then), so a step copies them into its
    // jobs without going back to the weights' upload records. Keyed by the first expert's gate PackedLinear
    // (stable for the model's life), E entries.
    std::unordered_map<const PackedLinear*, std::vector<exl3cuda::MoeExpertPtrs>> layers;
    // The device-routed path (cuda_exl3_moe_routed.cu), same key: a device table of all E experts'
    // {gate, up, down} × {trellis, suh, svh, bias} pointers, and whether the layer qualifies (one K and
    // codebook for all projections, packed shapes [I, D] / [D, I]); sig = {K, codebook, k, n}.
    struct RoutedLayer {
        Buffer table;
        int sigGU[4] = {};
        int sigD[4] = {};
        bool checked = false, ok = false;
    };
    std::unordered_map<const PackedLinear*, RoutedLayer> routed;
};

}  // namespace ts
