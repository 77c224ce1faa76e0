// Run-time A/B switches of the CUDA backend's EXL3 kernels (and the KDA prefill's chunked form, the mHC pre
// op's one launch, the one-token dense GEMV's kernel, the sparse MLA's and the indexer select's kernels), for benchmarks and tests (bench-device --what exl3 /
// kda / mhc / gemv, the self-test).
// Process-wide; no-ops that return 0 (kdaSetChunkMinTokens, mhcSetFusedPre, gemvSetOneTokenMode: −1) in builds
// without CUDA.
#pragma once

#include <cstdint>

namespace ts {

// The fused EXL3 MoE (CudaBackend::moeExpertsFused, kernels/cuda/cuda_exl3_moe.cu) runs a layer's routed
// experts in one launch (the default) or, for A/B comparisons, in the earlier two launches (gate/up +
// swiglu, then down + combine; a third, the combine, when the step has more than 256 (token, expert)
// pairs). One launch needs gate/up and down to share K and codebook (converters normally make them so);
// otherwise the call takes two launches whatever the switch. The environment picks with TS_EXL3_TUNE bit 4 (= two launches, docs/PERFORMANCE_EXL3.md); n = 1 or 2
// overrides it from now on, n = 0 restores the environment's choice. Returns the previous override (0:
// none). Both variants compute bit-identical results.
int exl3MoeSetLaunches(int n);
// The most rows one job of a decode-sized fused MoE step holds (host- and device-routed; prefill-sized steps keep
// their 64-row jobs, linears 16-row ones): TS_EXL3_MOE_JOB_ROWS (read once; 1..16) or 8, the streaming unit's mma
// width. An expert with more rows gets more jobs, so that one busy expert or a 9..16-token device-routed step does
// not put the whole launch into the 16-row form (docs/PERFORMANCE_EXL3.md).
// exl3SetMoeJobRows(r) overrides it from now on for r in [1, 16], anything else restores the environment's;
// returns the previous override (−1: none; −1 without CUDA).
int exl3SetMoeJobRows(int rows);
// Kernel launches of the last fused MoE call in this process (1, 2 or 3; 0 before any).
int exl3MoeLastLaunches();
// The variant in force now: 1 or 2 (0 without CUDA).
int exl3MoeLaunches();
// Whether a decode step's MoE may take its work list from device-side routing (moeExpertsFusedDevice): the
// fused EXL3 MoE (kernels/cuda/cuda_exl3_moe_routed.cu) and the dense-expert one (cuda_moe_dense.cu) alike;
// on unless TS_MOE_DEVICE_ROUTE=0 (A/B; a value other than 0 or 1 is reported on stderr); false without CUDA.
bool moeDeviceRouting();
// The unit that EXL3 jobs planned as one stage per slice (decode steps of up to ~8–12 rows per matrix) run on,
// as TS_EXL3_TUNE sets it (bits 8 and 16, docs/PERFORMANCE_EXL3.md): "streaming, shared-memory ring" (the default),
// "streaming, register ring" or "staged", with ", one-stage slices" under bit 64, ", launched without PDL"
// under bit 32, ", split-K bounds as before" under bit 128, ", MoE jobs of N rows" under TS_EXL3_MOE_JOB_ROWS=N
// (N ≠ 8) and ", slices of N k-tiles" under TS_EXL3_KSL=N (decode plans' slice length forced, for A/B
// runs); "none" without CUDA.
// Bigger jobs run the staged unit whatever it says.
const char* exl3DecodeUnit();

// Phase timestamps of the streaming EXL3 decode unit, for bench-device --what exl3-trace: while set, every
// streaming unit of the EXL3 launches that follow writes kExl3TraceWords words at words + u·kExl3TraceWords
// (device memory; u = its block, or its ticket in the one-launch MoE, the down units after the gate/up ones),
// for u < units; other units and staged units write nothing. Null stops it. Times are the device's
// %globaltimer (ns, one clock for all SMs); cycles are the SM's clock64. No-op without CUDA.
constexpr int kExl3TraceWords = 16;
enum Exl3TraceWord : int {
    kTraceSm = 0,          // the SM the unit ran on
    kTraceStart = 1,       // the unit starts (ns)
    kTraceInputReady = 2,  // its inputs may be read: after the PDL wait (and, MoE down units, their rows' wait)
    kTraceStaged = 3,      // its activations are transformed and staged (the block barrier behind them)
    kTraceLoopEnd = 4,     // 4 words: warp w's main loop is done
    kTraceEnd = 8,         // the unit is done (its sums out, its arrival counted, the epilogue if it was last)
    kTraceLast = 9,        // 1: the unit ran its column block's epilogue (the last arrival, or one slice)
    kTraceClockStart = 10, // clock64 at kTraceStart and kTraceEnd
    kTraceClockEnd = 11,
    kTraceMode = 12,       // 0 linear, 1 gate/up pair, 2 down, 3 the plan kernel (kTraceModePlan)
    kTraceSlice = 13,      // the unit's slice of k, and its k-tiles
    kTraceTiles = 14,
};
// The device-routed fused MoE's plan kernel (one block, before the MoE launch) writes the record just after
// its launch's units — index unitsGU + unitsD — with mode kTraceModePlan: kTraceSm, kTraceStart (the kernel
// starts), kTraceInputReady (its wait for the previous kernel is over), kTraceStaged (the routing is loaded),
// kTraceLoopEnd (its chunk counts are done) and kTraceEnd (its work list written), the rest zero; the trace bench
// reports it apart from the units.
constexpr int kTraceModePlan = 3;
static_assert(kTraceLoopEnd + 4 <= kTraceEnd && kTraceTiles < kExl3TraceWords, "the trace words of one unit overlap");
void exl3SetTrace(unsigned long long* deviceWords, int64_t units);

// The KDA prefill (CudaBackend::kdaRecurrent) takes the chunked form for T ≥ a threshold: TS_KDA_CHUNK (read
// once; 0 = never chunked) or 16. kdaSetChunkMinTokens(t) overrides it from now on (t ≥ 0, same meaning), t < 0
// restores the environment's; returns the previous override (−1: none). bench-device's recurrent vs chunked
// timings use it (setting TS_KDA_CHUNK in a running process has no effect after the first read).
int64_t kdaSetChunkMinTokens(int64_t t);
// The threshold in force now (0: never chunked; 0 without CUDA).
int64_t kdaChunkMinTokens();

// mhcPre on the GPU (kernels/cuda/cuda_mhc_kda.cu) runs in one launch — every block computes its chunk's
// partial sums and the last block of each token mixes it — or, for A/B comparisons, in the two launches
// before it (partials, then the mixing): TS_MHC_FUSED=0 (read once) picks two. mhcSetFusedPre(1 or 0)
// overrides it from now on, −1 restores the environment's; returns the previous override (−1: none). Both
// compute bit-identical results. mhcFusedPre: the variant in force now (false without CUDA).
int mhcSetFusedPre(int on);
bool mhcFusedPre();
// Where mhcPre's Sinkhorn runs on the GPU: 0 inline (in the mixing block), 1 on a side stream inside decode-step
// graph regions, beside the layer's body (the default), 2 on the side stream on every call (the self-test's
// bit-for-bit rows, the benchmark). TS_MHC_SIDE (read once) or mhcSetSideSinkhorn(mode) (−1: the environment's
// again; returns the previous override, −1: none). mhcSideSinkhorn: the mode in force (0 without CUDA).
int mhcSetSideSinkhorn(int mode);
int mhcSideSinkhorn();
// Where the model's asides (Backend::beginAside: a MoE layer's shared expert beside the routing and the routed
// experts, a KDA layer's gates beside its q / k / v projections) run on the GPU (kernels/cuda/cuda_aside.cu): 0 in order on the main stream, 1 on the side stream inside
// decode-step graph regions (the default), 2 on the side stream on every call (the self-test's bit-for-bit rows).
// TS_CUDA_ASIDE (read once) or asideSetMode(mode) (−1: the environment's again; returns the previous override,
// −1: none). asideMode: the mode in force (0 without CUDA).
int asideSetMode(int mode);
int asideMode();
// Asides the GPU has run on its side stream since the process started (replays of a captured one not counted; 0
// without CUDA): what the self-test's "aside" rows check, so that they cannot pass without an aside.
int64_t asideForks();

// Sparse MLA on the GPU (CudaBackend::mlaSparseAttention): the tensor-core kernel (kernels/cuda/cuda_attention_tc.cu;
// fp8 cache, latent 512, heads in multiples of 16 — the real model's calls) or, for A/B runs and the self-test's
// second comparison, the SIMT kernel that every other shape takes. TS_MLA_TC=0 (read once) picks the SIMT one;
// mlaSetTensorCores(1 or 0) overrides it from now on, −1 restores the environment's; returns the previous override
// (−1: none). mlaTensorCores: the choice in force now (false without CUDA). The two differ in summation order only.
int mlaSetTensorCores(int on);
bool mlaTensorCores();
// Whether the current device can run the tensor-core kernel at all: it needs 98.2 KiB of shared memory per block
// (sm_120 / sm_121, a GB10, allow 99 KiB) — on a device with less its calls take the SIMT kernel whatever the switch
// says. False without CUDA.
bool mlaTensorCoresFit();
// The tensor-core kernel's chunk of each query's selection, in tiles of 32 latents, forced for A/B runs
// (bench-device --what mla); 0 restores the planner's (about two blocks per SM, at least 2 tiles per chunk).
// Returns the previous value (0 without CUDA).
int mlaSetChunkTiles(int tiles);

// The EXL3 kernels' plans keep a block's shared memory within the device's opt-in limit (sm_12x, a GB10: 99 KiB
// — 16-row jobs at K ≤ 2, one stage per unit where two would not fit). exl3SetSmemLimitKiB(kib > 0) plans as if
// the limit were that many KiB (at most the device's) from now on, so the self-test runs a GB10's plans on an
// H200; anything else restores the device's. Returns the previous override (0: none; 0 without CUDA).
int exl3SetSmemLimitKiB(int kib);
// Whether prefill-sized steps (≥ 40 rows per job) at K = bits take the 64-row jobs, whose activations keep fp16
// hi + lo precision, under the current limit — or, as a GB10's 99 KiB at K ≤ 2, the 16-row jobs of decode, which
// round each activation once to fp16 (the self-test's tolerance follows). True without CUDA or a device.
bool exl3PrefillJobs(int bits);
// The EXL3 prefill path (cuda_exl3_prefill.cu: each row transformed once, 64-row × 128-column GEMM blocks over the
// whole of k, no split-K) for linears and MoE steps of enough rows (the thresholds below), at K = 2..6: on
// unless TS_EXL3_PREFILL=0 (read once); exl3SetPrefillPath(0 / 1) overrides it, anything else restores it (the
// self-test runs prefill-sized cases both ways). Returns the previous override (−1: none; −1 without CUDA).
int exl3SetPrefillPath(int on);
bool exl3PrefillPath();
// The rows per used expert (on average) from which a MoE step takes the prefill path: TS_EXL3_PF_MOE_ROWS (read
// once; a count up to 4,096) or 8; likewise the rows from which a linear takes it: TS_EXL3_PF_LINEAR_ROWS or 17 (both
// the crossovers measured on the H200). exl3SetPrefill…MinRows(r) overrides it from now on for r in [0, 4096],
// anything else restores the environment's; returns the previous override (−1: none; −1 without CUDA, where the
// getters return 0). Under stream capture (decode graphs) a linear never takes the prefill path.
int exl3SetPrefillMoeMinRows(int rows);
int exl3PrefillMoeMinRows();
int exl3SetPrefillLinearMinRows(int rows);
int exl3PrefillLinearMinRows();
// From how many rows a linear on the prefill path runs its GEMM on cuBLAS, over its weights dequantised to fp16 once
// per call (kernels/cuda/cuda_exl3_dequant.cu; the transform's hi + lo rows against two copies of the weights, so the
// precision is the GEMM kernel's): TS_EXL3_PF_CUBLAS_ROWS (read once; up to 4,096; 4,097: never) or the H200's
// crossover. exl3SetPrefillCublasRows(r) overrides it for r in [0, 4097], anything else restores the environment's;
// returns the previous override (−1: none; −1 without CUDA, where the getter returns 0).
int exl3SetPrefillCublasRows(int rows);
int exl3PrefillCublasRows();
// How many linear calls the cuBLAS route has taken in this process (the self-test checks that its forced cases took
// it, and that the GEMM-kernel cases did not); 0 without CUDA.
int64_t exl3PrefillCublasCalls();
// The prefill path's GEMM cuts k into up to this many splits (each a block; the last block of a tile adds them in
// order) when its output tiles are too few for one wave of blocks — a linear of ≤ ~256 rows: TS_EXL3_PF_SPLIT (read
// once; 1..16, a power of two is what is used; 1 = never) or 8. exl3SetPrefillMaxSplit(s) overrides it from now on
// for s in [1, 16], anything else restores the environment's; returns the previous override (−1: none; −1 without
// CUDA). exl3PrefillLastSplits: the splits the last GEMM launch took (0 before any, and without CUDA).
int exl3SetPrefillMaxSplit(int splits);
int exl3PrefillLastSplits();
// The scratch budget (MiB) one group of the prefill path's rows may take (planes and outputs; default 256):
// rows beyond it are done in more groups. 0 restores the default; returns the previous override (0: none).
int exl3SetPrefillBudgetMiB(int mib);

// The k-pool indexer's select on the GPU (CudaBackend::indexerSelect): at GLM-5.3-Flash's widths (index_head_dim
// 128, ≤ 32 heads) the fast path of kernels/cuda/cuda_indexer_select.cu (q quantised inside the score kernel, one
// lane per head; the top-K over keys in shared memory), or for A/B runs and the self-test's second comparison the
// general kernels every other shape takes. TS_IDX_FAST=0 (read once) picks the general ones; indexerSetFastSelect(1
// or 0) overrides it from now on, −1 restores the environment's; returns the previous override (−1: none).
// indexerFastSelect: the choice in force now (false without CUDA). Both are bit-identical to the CPU.
int indexerSetFastSelect(int on);
bool indexerFastSelect();
// The fast path quantises q with the GPU's fp32 → e4m3 conversion; this counts the fp32 bit patterns (all 2^32)
// whose code differs from the CPU's rounding rule (NaN codes equal), on the current device: the self-test's
// check that the shortcut is exact. −1 without CUDA.
int64_t indexerFp8ConversionMismatches();

// The dense GEMV on the GPU at T ≤ 8 (kernels/cuda/cuda_math.cu, ModeSwitch), for A/B runs (bench-device --what
// gemv). One token (TS_GEMV1, read once): 1 (default) K split over a block's 8 warps, 4 rows per block; 2 the same
// with 2 rows per block (the same bits); 0 one warp per whole row (another summation order); 3 the tensor-core GEMV
// (kernels/cuda/cuda_gemv_tc.cu: x exact as three bf16 pieces, another order) with programmatic dependent launch,
// 4 the same launched plainly (the same bits as 3). 2–8 tokens (TS_GEMV_MULTI): 1 (default) the split-K kernel at 2
// tokens, the tensor-core GEMV at 3–8; 2 the split-K kernel at every T; 3 / 4 the tensor-core GEMV at every T (PDL /
// plainly); 5 the split-K kernel held to 3 blocks per SM at 3–4 tokens (the default before the tensor cores);
// 0 whole rows per warp. The tensor-core modes apply to BF16 weights; F16 / F32 run a split-K kernel there.
// gemvSet…Mode(m) overrides the environment from now on, −1 restores it; returns the previous override
// (−1: none). gemv…Mode: the mode in force now (−1 without CUDA).
int gemvSetOneTokenMode(int mode);
int gemvOneTokenMode();
int gemvSetMultiTokenMode(int mode);
int gemvMultiTokenMode();
// Above 8 tokens, BF16 weights (TS_GEMM, read once): 0 the tiled SIMT GEMM; 1 the tensor-core kernel of
// cuda_gemv_tc.cu (x exact as three bf16 pieces; 2, 4 or 8 token groups per warp, launches of ≤ 64 tokens —
// TS_GEMM_TC_GROUPS caps the groups); 2 cuBLAS on the same three pieces (cuda_gemm_pieces.cu); 3 (default) 1 below
// gemmCublasMinTokens() tokens (TS_GEMM_CUBLAS_MIN, read once; default 64), 2 from there. Same override rules.
int gemmSetMode(int mode);
int gemmMode();
int64_t gemmCublasMinTokens();

// Host → device uploads (the weights at load; kernels/cuda/cuda_memory.cu): through the backend's pinned two-slot
// ring (the default), or, TS_UPLOAD_RING=0 (read once), straight from the source as cudaMemcpy stages pageable
// memory — for A/B runs (bench-device --what upload). uploadSetRing(1 or 0) overrides it from now on, −1 restores
// the environment's; returns the previous override (−1: none). uploadRing: the choice in force (false without CUDA).
int uploadSetRing(int on);
bool uploadRing();

// Sets one of the run-time overrides above (a setter that returns the previous override, −1 or 0 for none) for
// its lifetime, then restores the previous one, also when the code in between throws: bench-device times each
// variant in one process, the self-test checks the variant not in force.
template <int (*Set)(int)>
class TuneOverride {
public:
    explicit TuneOverride(int value) : m_old(Set(value)) {}
    ~TuneOverride() { Set(m_old); }
    TuneOverride(const TuneOverride&) = delete;
    TuneOverride& operator=(const TuneOverride&) = delete;

private:
    int m_old;
};

}  // namespace ts
