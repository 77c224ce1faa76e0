// EXL3 on the GPU: y[T, out] = x[T, in] · Wᵀ straight from the packed trellis (CudaBackend::exl3Linear),
// and the kernel the fused MoE (cuda_exl3_moe.cu) runs its gate/up and down projections with. W is
// never expanded in device memory: every 16×16 tile is decoded in registers by the warp that uses it.
// The CPU reference is engine/quant/exl3_gemm.cpp; the format is /work/shared/specs/exl3.md.
//
//   xr = BH_k(x ⊙ suh)   (per 128-block; inputs ≥ in are zero)      — in-block, per stage
//   yr = xr · Ŵ          (tiles decoded on the fly; mma.m16n8k16)   — the main loop
//   y  = BH_n(yr) ⊙ svh + bias, columns < out                        — the epilogue of the last unit
//
// One kernel, exl3Kernel<K, codebook, MG>, 128 threads (the kernel templates: cuda_exl3_kernels.cuh, instantiated
// by K in cuda_exl3_k12/34/56/78.cu so that the build compiles them in parallel; this file plans and launches). Its work is a list of jobs (one matrix × up to
// 16·MG token rows; a linear with more rows is several jobs of the same matrix) cut into units: job ×
// slice of k × block of 128 output columns (8 tiles wide). blockIdx = unit; the grid is sized so that
// every SM holds several units at once — there is no persistent loop. Three variants:
//   - MG = kStream (16-row jobs whose slice one streaming unit takes — one stage, or two for ≤ 8 rows at
//     K ≥ 3: decode steps up to ~8–12 rows per matrix at K = 4; the split-K bound makes bigger jobs
//     multi-stage): runUnitStream (cuda_exl3_stream.cuh). Each warp streams its two n-tiles' trellis words
//     through its own cp.async ring in shared memory (1.5–4 KiB in flight per warp, no block barrier in the
//     loop; TS_EXL3_TUNE bit 16: a ring of 4 k-tiles in registers instead), the decoded tile is the mma's A
//     operand (Ŵᵀ) against single fp16 activations of 8 tokens (one mma per tile), MUL1 enters as 1024 +
//     bytesum with its affine correction per token at the end. Up to 8 blocks per SM (64 registers). Decode
//     plans pick the slice length, 8..streamSliceTiles k-tiles, that minimizes waves × work for the kernel's
//     real occupancy (planLaunch).
//   - MG = 1 (16-row jobs with several stages per slice; every decode job with TS_EXL3_TUNE bit 8) and
//   - MG = 4 (prefill: 64-row jobs, every decoded tile feeds 4 m-groups of mmas, so the decode work per
//     token drops 4×; stages are half as deep to leave shared memory for 64 staged rows): runUnitStaged
//     (cuda_exl3_staged.cuh) — the block stages its trellis in shared memory and keeps activations as hi/lo
//     fp16 pairs. The pieces both units share (input transform, epilogue, arrivals): cuda_exl3_unit.cuh.
// The fused MoE's one launch, exl3MoeKernel<K, codebook, MG>, runs the same units (runUnit) of two such
// unit lists (gate/up, then down) plus the combine, a block taking its unit from a ticket counter
// instead of blockIdx, down units waiting for their activation rows (see MoeParams and exl3MoeKernel).
// Both kernels are launched with programmatic dependent launch (launchPdl): a streaming linear's blocks
// issue their first trellis loads while the previous kernel finishes and wait (griddepcontrol.wait) before
// they read anything a kernel writes; TS_EXL3_TUNE bit 32 launches them plainly.
//
// A staged unit, per stage of stageTiles(K) k-tiles (≈ 32 KiB of trellis):
//   1. cp.async (16 B per thread, coalesced rows of 8 consecutive tiles) brings the stage's trellis into
//      shared memory; two stages in flight when a slice has several (prefill), one otherwise. A
//      single-stage unit commits its stage as groups of 8 k-tiles and decodes each group as soon as it
//      has landed (wait_group + barrier per group), so decoding overlaps the rest of the transfer.
//   2. Meanwhile one warp per token row computes its slice of xr exactly as the CPU does (x·suh, the same
//      butterfly order, ·1/√128), then splits each value into fp16 hi + lo parts after scaling the row
//      by a power of two 2^e (max |xr| → [2^14, 2^15)), so that hi + lo carries ~22 bits whatever the
//      activation's range. e only decreases from stage to stage; accumulators are rescaled (exactly)
//      when it does, and divided by 2^e at the end.
//   3. Warp w owns n-tiles 2w, 2w+1 of the unit. Per k-tile, each lane decodes its 8 positions of the
//      tile (spec §3.1: positions 8·lane..8·lane+7 are exactly one lane's two mma B fragments): the 16-bit
//      states come from a ≤ 96-bit window of the tile's words (laneStates), the codebook hash gives the
//      fp16 value (codebookDup) — placed in BOTH halves of the B register. The A fragment pairs the hi
//      and lo parts of the same activation in the two k slots the duplicate meets, so one
//      mma.m16n8k16 (fp16 × fp16 → fp32) computes v·(hi + lo) for 8 real k-rows × 8 columns × 16 tokens:
//      near-fp32 products at the price of half the tensor throughput, which decode never misses.
//      Four mmas per tile and m-group; rows ≥ the job's token count are zero.
//   4. Split-K: with S > 1 slices (or a gate/up pair) each unit writes its partial sums [rows, 128] to
//      global memory, and the last unit to arrive at an arrival counter (one acquire-release atomic add by
//      one thread after a barrier; the counter is reset by that unit) sums the partials in slice order — so
//      the result does not depend on which unit came last — applies the output Hadamard, ·svh, +bias, and
//      stores. With one slice it does that directly
//      from shared memory. Modes: linear (store y), swiglu (gate/up pair → silu(min(g, l))·clamp(u) into
//      the MoE's activation rows), down (the expert's output rows, then the routed-weight combine).
//
// Numerics vs the CPU (fp32 throughout): identical input transform; staged variants: products exact (fp16 ×
// fp16 in fp32), activation kept to ~2^-22; the tensor core's fp32 accumulation order and truncation differ
// from the CPU's sequential sums (~1e-6..1e-5 relative to the row's RMS); streaming variant: the rotated
// activation rounded once to fp16 (≤ 2^-11) and MUL1's exact affine value (not its fp16 rounding), ~3e-4 of
// the output RMS; the output transform, svh, bias and swiglu repeat the CPU's operations in its order (no FMA
// contraction: __fmul_rn / __fadd_rn).
//
// Test:      twinspark-cli selftest --backend cuda --filter exl3   (engine/selftest/cases_exl3.cpp)
// Benchmark: twinspark-cli bench-device --what exl3                (app/cli/bench_cuda_exl3.cpp: GEMV
//            4096→12288 at K = 2..6 × 3 codebooks and the fused MoE layer, as a fraction of copy bandwidth)
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/env_switch.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_exl3.cuh"
#include "cuda/cuda_exl3_kernels.cuh"
#include "cuda/cuda_exl3_unit.cuh"

namespace ts {
namespace exl3cuda {
namespace {

__global__ void combineKernel(const __grid_constant__ Params P) {
    const int b = blockIdx.x;
    const int t0 = blockIdx.y * 8, t1 = min(P.Tf, t0 + 8);
    combineRange(P, b, t0, t1, threadIdx.x, blockDim.x);
}

// The instantiations live in cuda_exl3_k12/34/56/78.cu (cuda_exl3_kernels.cuh).
KernelFn kernelFor(int MG, int bits, int cb, bool trace = false) {
    switch (bits) {
    case 1: return linearKernelOfK<1>(MG, cb, trace);
    case 2: return linearKernelOfK<2>(MG, cb, trace);
    case 3: return linearKernelOfK<3>(MG, cb, trace);
    case 4: return linearKernelOfK<4>(MG, cb, trace);
    case 5: return linearKernelOfK<5>(MG, cb, trace);
    case 6: return linearKernelOfK<6>(MG, cb, trace);
    case 7: return linearKernelOfK<7>(MG, cb, trace);
    default: return linearKernelOfK<8>(MG, cb, trace);
    }
}

MoeKernelFn moeKernelFor(int MG, int bits, int cb, bool trace = false) {
    switch (bits) {
    case 1: return moeKernelOfK<1>(MG, cb, trace);
    case 2: return moeKernelOfK<2>(MG, cb, trace);
    case 3: return moeKernelOfK<3>(MG, cb, trace);
    case 4: return moeKernelOfK<4>(MG, cb, trace);
    case 5: return moeKernelOfK<5>(MG, cb, trace);
    case 6: return moeKernelOfK<6>(MG, cb, trace);
    case 7: return moeKernelOfK<7>(MG, cb, trace);
    default: return moeKernelOfK<8>(MG, cb, trace);
    }
}

}  // namespace

void preloadDecodeKernels(int bits, int codebook) {
    // One bit per (K, codebook): K 1..8 × 3 codebooks, 27 bits. The attribute query is what makes CUDA load a kernel
    // under lazy loading (measured: the first decode step after a prefill-path prefill came back to its usual time).
    TS_CHECK(bits >= 1 && bits <= 8 && codebook >= 0 && codebook <= 2, "exl3: no decode kernels for these bits");
    static std::atomic<uint32_t> done{0};
    const uint32_t bit = 1u << (bits * 3 + codebook);
    if (done.fetch_or(bit) & bit) return;
    cudaFuncAttributes a;
    for (const int MG : {int(kStream), 1}) {
        TS_CUDA_CHECK(cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(kernelFor(MG, bits, codebook))));
        TS_CUDA_CHECK(cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(moeKernelFor(MG, bits, codebook))));
    }
    TS_CUDA_CHECK(cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(combineKernel)));
}

Plan planLaunch(int bits, int codebook, int MG, int tilesK, int NB, int J, int rowsTotal, int R, bool pairMode, int numSMs,
                bool allowStream, size_t smemLimit) {
    Plan p;
    p.MG = MG > 1 ? kMaxMG : 1;
    const int KS = stageTiles(bits, p.MG);
    const int Rc = std::max(1, std::min(R, kGroupRows * p.MG));
    // The longest slice one unit takes: a stage, or up to two for the streaming unit (streamSliceTiles).
    const bool mayStream = p.MG == 1 && allowStream && !tuneStagedDecode();
    const int KSS = mayStream && !tuneOneStageSlices() ? streamSliceTiles(bits, Rc, tuneRegisterRing()) : KS;
    const int groups8 = tilesK / 8;  // k-tiles come in 8s (128-wide Hadamard blocks)
    const int sSingle = (tilesK + KSS - 1) / KSS;  // fewest slices one unit each can take
    const int64_t unitsPerSlice = int64_t(J) * NB;
    const int64_t target = 6 * int64_t(std::max(1, numSMs));  // units in flight per SM ≈ 6 (smem/regs allow it)
    int S = int(std::max<int64_t>(sSingle, (target + unitsPerSlice - 1) / unitsPerSlice));
    // Split-K partials cost rows·S·n·4 bytes written and read again, through L2 (they fit there): keep
    // that under ~40% of the trellis bytes a job streams from HBM (k·n·K/8), i.e. S ≤ k·K / (160·rows per
    // job) — decode keeps single-stage slices, 16/64-row jobs get few slices — and under 64 MiB in all.
    const double rowsPerJob = double(rowsTotal) / std::max(1, J);
    int sBound = std::max(1, int(double(tilesK) * 16.0 * bits / (160.0 * rowsPerJob)));
    // Except where that bound alone would keep a decode job off the streaming unit (a 13–16-row job at k = 4096,
    // K = 4: 6 slices of 48 k-tiles instead of 8 of 32 — the staged unit, 1.7× slower for a 4096→12288 linear): there
    // the slices one streaming unit takes, as long as their partials stay within the matrix's own bytes (through L2).
    // TS_EXL3_TUNE bit 128: the bound as before (A/B).
    if (mayStream && !(tuneFlags() & 128) && sBound < sSingle &&
        double(sSingle) * rowsPerJob * 32.0 <= double(tilesK) * 16.0 * bits)
        sBound = sSingle;
    S = std::min(S, sBound);
    // The partials' 64 MiB likewise, up to 256 MiB (past L2 either way; at most a few % of the weights a step of that
    // many rows reads): a MoE step of 130–300 tokens has 2,000–4,800 gate/up rows, and at 64 MiB its slices got too
    // long for the streaming unit — 2.3 → 6.0 ms between 128 and 160 tokens on the H200 (docs/PERFORMANCE_EXL3.md).
    const double partBytesPerSlice = double(rowsTotal) * NB * 128 * 4;
    int sCap = std::max(1, int((64.0 * 1024 * 1024) / std::max(1.0, partBytesPerSlice)));
    if (mayStream && !(tuneFlags() & 128) && sCap < sSingle && double(sSingle) * partBytesPerSlice <= 256.0 * 1024 * 1024)
        sCap = sSingle;
    S = std::min(S, sCap);
    S = std::max(1, std::min(S, groups8));
    const int KSL = 8 * ((groups8 + S - 1) / S);
    S = (tilesK + KSL - 1) / KSL;
    p.S = S;
    p.KSL = KSL;
    p.steps = (KSL + KS - 1) / KS;
    p.R = Rc;
    p.smem = stagedSmemBytes(bits, p.MG, p.steps, p.R);
    // A device that gives a block less than the double-buffered stage needs (sm_12x: 99 KiB; K = 2 and 3 with
    // 16-row jobs): one stage per unit, more slices — a plan of the kind every decode step takes.
    if (smemLimit > 0 && p.smem > smemLimit && p.steps > 1) {
        p.KSL = KS;
        p.S = (tilesK + KS - 1) / KS;
        p.steps = 1;
        p.smem = stagedSmemBytes(bits, p.MG, 1, p.R);
    }
    // A slice one streaming unit takes (one stage, or two for ≤ 8 rows): the streaming variant (no trellis
    // stage in shared memory; runUnitStream), one pass. Its shared memory fits the longest such slice.
    if (mayStream && p.KSL <= KSS) {
        p.MG = kStream;
        p.steps = 1;
        p.smem = size_t(streamHeadBytes(bits, p.R, tuneRegisterRing())) +
                 (tuneRegisterRing() ? 0 : size_t(kWarps) * ringSteps(bits) * 2 * tileWords(bits) * 4);
    }
    // Decode plans (one unit per slice): the grid is a few waves of short-lived units, so the wave count
    // matters. Pick the slice length (a multiple of 8 k-tiles up to what one unit takes) that minimizes
    // waves × (k-tiles per unit + a fixed per-unit cost), with the blocks that really fit on an SM; the
    // split-K traffic bound above (S ≤ Smax) still holds, except for the fewest single-stage slices.
    if (p.MG <= 1 && p.steps == 1 && codebook >= 0 && codebook <= 2 && bits >= 1 && bits <= 8 && !(tuneFlags() & 2)) {
        // Blocks per SM, queried once per (device, variant, K, codebook, R) (the plan is made on every
        // call); stored + 1 so that the zero-initialized table means "not yet".
        static std::atomic<int> occCache[8][2][9][3][kGroupRows + 1];
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 8) dev = 0;
        std::atomic<int>& slot = occCache[dev][p.MG][bits][codebook][p.R];
        int occ = slot.load(std::memory_order_relaxed) - 1;
        const KernelFn fn = kernelFor(p.MG == kStream ? kStream : 1, bits, codebook);
        if (occ < 0) {
            // No device (a host-only test) or no answer: plan without the tuning, as when occ = 0.
            if ((p.smem > 48 * 1024 &&
                 cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(p.smem)) != cudaSuccess) ||
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, kThreads, p.smem) != cudaSuccess) {
                (void)cudaGetLastError();
                occ = 0;
            }
            slot.store(occ + 1, std::memory_order_relaxed);
        }
        // Under another GPU's SM limits (TS_CUDA_SM_LIMITS), the blocks one of its SMs would hold (the launch is
        // padded to that count): the device's count is what the table keeps.
        if (occ > 0) occ = ::ts::cuda::limitedResidentBlocks(reinterpret_cast<const void*>(fn), kThreads, p.smem, occ);
        const int64_t slots = int64_t(occ) * std::max(1, numSMs);
        const int Smax = std::max(1, int(double(tilesK) * 16.0 * bits / (160.0 * rowsPerJob)));
        if (slots > 0) {
            constexpr int64_t kUnitCost = 8;  // fixed cost of a unit (transform, epilogue), in k-tiles
            int64_t bestCost = -1;
            int bestKSL = p.KSL;
            const int kslMax = p.MG == kStream ? KSS : KS;
            for (int ksl = kslMax; ksl >= 8; ksl -= 8) {
                const int s2 = (tilesK + ksl - 1) / ksl;
                if (s2 > Smax && ksl != kslMax) continue;
                if (double(rowsTotal) * NB * 128 * 4 * s2 > 64.0 * 1024 * 1024 && ksl != kslMax) continue;
                const int64_t waves = (unitsPerSlice * s2 + slots - 1) / slots;
                const int64_t cost = waves * (std::min(ksl, tilesK) + kUnitCost);
                if (bestCost < 0 || cost < bestCost) {  // ties keep the longer slice (fewer partials)
                    bestCost = cost;
                    bestKSL = ksl;
                }
            }
            if (bestKSL < p.KSL) {
                p.KSL = bestKSL;
                p.S = (tilesK + bestKSL - 1) / bestKSL;
            }
        }
        // TS_EXL3_KSL (A/B runs): that slice length instead, capped at what one unit takes.
        if (const int forced = std::min(tuneSliceTiles(), p.MG == kStream ? KSS : KS); forced >= 8) {
            p.KSL = forced;
            p.S = (tilesK + forced - 1) / forced;
        }
    }
    p.partials = p.S > 1 || pairMode;
    p.blocks = unitsPerSlice * p.S;
    return p;
}

MoePlans planMoePhases(int bitsGU, int cbGU, int bitsD, int cbD, int MG, int tilesKG, int NBG, int tilesKD, int NBD,
                       int pairs, int rows, int R, int numSMs, size_t smemLimit) {
    MoePlans p;
    for (bool allowStream : {true, false}) {
        p.gu = planLaunch(bitsGU, cbGU, MG, tilesKG, NBG, 2 * pairs, 2 * rows, R, true, numSMs, allowStream, smemLimit);
        p.d = planLaunch(bitsD, cbD, MG, tilesKD, NBD, pairs, rows, R, false, numSMs, allowStream, smemLimit);
        if (p.gu.MG == p.d.MG) break;  // (without streaming both are staged: MG agrees)
    }
    return p;
}

int tuneFlags() {
    static const int flags = int(envCount("TS_EXL3_TUNE", 0));
    return flags;
}
int tuneSliceTiles() {
    static const int ksl = int(envCount("TS_EXL3_KSL", 0)) / 8 * 8;
    return ksl;
}

bool tuneStagedDecode() { return (tuneFlags() & 8) != 0; }
bool tuneRegisterRing() { return (tuneFlags() & 16) != 0; }
bool tunePdlOff() { return (tuneFlags() & 32) != 0; }
bool tuneTablesInStream() { return (tuneFlags() & 512) != 0; }
bool tunePlanPlain() { return (tuneFlags() & 2048) != 0; }
bool tuneOneStageSlices() { return (tuneFlags() & 64) != 0; }

namespace {
// An EXL3 kernel launch with programmatic dependent launch allowed (unless TS_EXL3_TUNE bit 32): the
// kernel's blocks may start while the previous kernel in the stream finishes, prefetching their trellis and
// suh until pdlWait (the kernels' contract above). In stream capture it becomes a programmatic graph edge.
template <class Arg>
void launchPdl(void (*fn)(Arg), unsigned grid, size_t smem, cudaStream_t stream, const Arg& arg) {
    ::ts::cuda::launchPdl(fn, dim3(grid), dim3(kThreads), smem, stream, !tunePdlOff(), arg);
}
}  // namespace

namespace {
std::atomic<unsigned long long*> g_trace{nullptr};
std::atomic<int64_t> g_traceUnits{0};
}  // namespace

unsigned long long* traceWordsOf(int64_t u) {
    unsigned long long* t = g_trace.load(std::memory_order_relaxed);
    return t && u >= 0 && u < g_traceUnits.load(std::memory_order_relaxed) ? t + u * kExl3TraceWords : nullptr;
}

namespace {
// Params::trace of one launch's units [first, first + n) of the trace.
void traceInto(Params& p, int64_t first) {
    p.trace = traceWordsOf(first);
    p.traceUnits = p.trace ? g_traceUnits.load(std::memory_order_relaxed) - first : 0;
}
}  // namespace

void setTrace(unsigned long long* words, int64_t units) {
    g_traceUnits.store(words ? std::max<int64_t>(0, units) : 0, std::memory_order_relaxed);
    g_trace.store(words, std::memory_order_relaxed);
}

namespace {
std::atomic<int> g_moeLaunchesOverride{0};  // 0: TS_EXL3_TUNE decides
std::atomic<int> g_moeLastLaunches{0};
std::atomic<int> g_smemLimitKiB{0};  // 0: the device's limit
}  // namespace

int setSmemLimitKiB(int kib) { return g_smemLimitKiB.exchange(kib > 0 ? kib : 0); }
size_t smemLimit(size_t optin) {
    const int kib = g_smemLimitKiB.load(std::memory_order_relaxed);
    return kib > 0 ? std::min(optin, size_t(kib) * 1024) : optin;
}
bool prefillJobs(int bits) {
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return true;
    }
    // (under TS_CUDA_SM_LIMITS the limited SM's per-block figure, as the backend's props() and so the planner have it)
    return chooseMG(64.0, bits, smemLimit(::ts::cuda::limitedBlockSmemOptin(size_t(optin)))) == kMaxMG;
}

int moeLaunches() {
    const int o = g_moeLaunchesOverride.load(std::memory_order_relaxed);
    if (o == 1 || o == 2) return o;
    return (tuneFlags() & 4) ? 2 : 1;
}

int setMoeLaunches(int n) { return g_moeLaunchesOverride.exchange(n == 1 || n == 2 ? n : 0); }

namespace {
ModeSwitch g_moeJobRows("TS_EXL3_MOE_JOB_ROWS", kGroupRows + 1, 8);  // 0 reads as the default
}  // namespace
int moeJobRows() {
    const int r = g_moeJobRows.now();
    return r >= 1 && r <= kGroupRows ? r : 8;
}
int moeJobRowsFor(int MG, double rowsPerMatrix) {
    return MG <= 1 && rowsPerMatrix < 40.0 ? moeJobRows() : kGroupRows * std::max(1, MG);
}
int setMoeJobRows(int rows) { return g_moeJobRows.set(rows >= 1 && rows <= kGroupRows ? rows : -1); }
void noteMoeLaunches(int n) { g_moeLastLaunches.store(n, std::memory_order_relaxed); }
int lastMoeLaunches() { return g_moeLastLaunches.load(std::memory_order_relaxed); }

void launch(const Params& p0, const Plan& plan, int bits, int codebook, cudaStream_t stream) {
    Params p = p0;
    p.noChunk = (tuneFlags() & 1) ? 1 : 0;
    p.regRing = tuneRegisterRing() ? 1 : 0;
    traceInto(p, 0);
    TS_CHECK(bits >= 1 && bits <= 8 && codebook >= 0 && codebook <= 2, "EXL3 CUDA: bad K or codebook");
    TS_CHECK(plan.blocks > 0 && plan.blocks < (int64_t(1) << 31), "EXL3 CUDA: grid too large");
    const bool traced = p.trace && plan.MG == kStream && bits == 4;  // (the trace kernels: K = 4, streaming)
    const KernelFn fn = kernelFor(plan.MG > 1 ? kMaxMG : plan.MG == kStream ? kStream : 1, bits, codebook, traced);
    if (plan.smem > 48 * 1024) {
        // Per device and kernel; cheap enough to repeat for the (prefill-sized) launches that need it.
        TS_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(plan.smem)));
    }
    launchPdl(fn, unsigned(plan.blocks), plan.smem, stream, p);
}

void launchCombine(const Params& p, cudaStream_t stream) {
    if (p.Tf <= 0) return;
    const dim3 grid(unsigned(p.NB), unsigned((p.Tf + 7) / 8));
    cuda::launchPlain(combineKernel, grid, 256, 0, stream, p);
}

void launchMoe(const MoeParams& p0, const Plan& planGU, const Plan& planD, int bits, int codebook, cudaStream_t stream) {
    TS_CHECK(bits >= 1 && bits <= 8 && codebook >= 0 && codebook <= 2, "EXL3 CUDA: bad K or codebook");
    MoeParams p = p0;
    Params& gu = p.ph[0];
    Params& d = p.ph[1];
    TS_CHECK(planGU.MG == planD.MG && gu.mode == kModeSwiglu && d.mode == kModeDown && p.sync,
             "EXL3 CUDA: bad one-launch MoE");
    const int64_t unitsC = d.fusedCombine ? 0 : int64_t(d.NB) * ((d.Tf + 7) / 8);
    const int64_t total = planGU.blocks + planD.blocks + unitsC;  // = the grid = the tickets drawn
    TS_CHECK(planGU.blocks > 0 && planD.blocks > 0 && total < (int64_t(1) << 31),
             "EXL3 CUDA: one-launch MoE too large");
    p.unitsGU = int(planGU.blocks);
    p.unitsD = int(planD.blocks);
    p.unitsC = int(unitsC);
    gu.noChunk = d.noChunk = (tuneFlags() & 1) ? 1 : 0;
    gu.regRing = d.regRing = tuneRegisterRing() ? 1 : 0;
    traceInto(gu, 0);
    traceInto(d, p.unitsGU);
    gu.signal = p.sync + 2;  // per pair: its column blocks written
    gu.waitOn = nullptr;
    d.waitOn = p.sync + 2;   // down job j = pair j
    d.waitTarget = gu.NB;
    d.signal = d.fusedCombine ? nullptr : p.sync + 2 + gu.groups;  // per column block: down jobs out
    // Job-major tickets for streaming units (the staged unit keeps the other order): 1.1–2.1 % off the batch-4 layer,
    // ≤ 1.2 % at batch 1 (H100, docs/PERFORMANCE_EXL3.md, 2026-12-06). TS_EXL3_TUNE bit 1024: the old order (A/B).
    gu.jobMajor = d.jobMajor = !(tuneFlags() & 1024) && planGU.MG == kStream ? 1 : 0;
    const size_t smem = std::max(planGU.smem, planD.smem);
    const bool traced = gu.trace && planGU.MG == kStream && bits == 4;
    const MoeKernelFn fn =
        moeKernelFor(planGU.MG > 1 ? kMaxMG : planGU.MG == kStream ? kStream : 1, bits, codebook, traced);
    if (smem > 48 * 1024)
        TS_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    // One block per ticket (see exl3MoeKernel): the two launches' grids and the combine kernel's, in one.
    launchPdl(fn, unsigned(total), smem, stream, p);
}

}  // namespace exl3cuda

// ---- Exl3Cache ------------------------------------------------------------------------------------------

Exl3Cache::~Exl3Cache() {
    if (copyStream) cudaStreamSynchronize(copyStream);
    for (Staging& st : staging) {
        if (st.done) {
            cudaEventSynchronize(st.done);
            cudaEventDestroy(st.done);
        }
        if (st.host) cudaFreeHost(st.host);
    }
    for (int s = 0; s < 4; ++s) {
        if (argsRead[s]) {
            cudaEventSynchronize(argsRead[s]);
            cudaEventDestroy(argsRead[s]);
        }
        if (argsCopied[s]) cudaEventDestroy(argsCopied[s]);
    }
    if (copyStream) cudaStreamDestroy(copyStream);
}

cudaStream_t Exl3Cache::tablesStream() {
    if (!copyStream) {
        TS_CUDA_CHECK(cudaStreamCreateWithFlags(&copyStream, cudaStreamNonBlocking));
        for (int s = 0; s < 4; ++s) {
            TS_CUDA_CHECK(cudaEventCreateWithFlags(&argsCopied[s], cudaEventDisableTiming));
            TS_CUDA_CHECK(cudaEventCreateWithFlags(&argsRead[s], cudaEventDisableTiming));
        }
    }
    return copyStream;
}

void* Exl3Cache::stagingBuffer(size_t bytes) {
    Staging& st = staging[nextStaging];
    if (st.pending) {
        TS_CUDA_CHECK(cudaEventSynchronize(st.done));  // normally long done (4 calls ago)
        st.pending = false;
    }
    if (!st.done) TS_CUDA_CHECK(cudaEventCreateWithFlags(&st.done, cudaEventDisableTiming));
    if (st.cap < bytes) {
        if (st.host) TS_CUDA_CHECK(cudaFreeHost(st.host));
        st.host = nullptr;
        size_t cap = std::max<size_t>(st.cap * 2, 64 * 1024);
        while (cap < bytes) cap *= 2;
        TS_CUDA_CHECK(cudaMallocHost(&st.host, cap));
        st.cap = cap;
    }
    return st.host;
}

void Exl3Cache::stagingCopied(cudaStream_t stream) {
    Staging& st = staging[nextStaging];
    TS_CUDA_CHECK(cudaEventRecord(st.done, stream));
    st.pending = true;
    nextStaging = (nextStaging + 1) % int(sizeof(staging) / sizeof(staging[0]));
}

// ---- CudaBackend -----------------------------------------------------------------------------------------

Exl3Cache& CudaBackend::exl3Cache() {
    if (!m_exl3) m_exl3 = std::make_shared<Exl3Cache>();
    return *m_exl3;
}

void CudaBackend::exl3Linear(const Buffer& x, int64_t T, const PackedLinear& p, const Buffer& y) {
    using namespace exl3cuda;
    if (T <= 0) return;
    const int64_t in = p.inFeatures(), out = p.outFeatures();
    TS_CHECK(x.size() >= size_t(T * in) * 4 && y.size() >= size_t(T * out) * 4, "exl3Linear: buffer too small");
    TS_CHECK(T < (int64_t(1) << 30), "exl3Linear: too many rows");
    const DeviceTrellis& d = deviceTrellis(p);
    TS_CHECK(d.k % 128 == 0 && d.n % 128 == 0 && in <= d.k && out <= d.n, "exl3Linear: bad EXL3 shape");
    if (exl3PrefillLinear(x, T, p, y)) return;  // many rows: the throughput path (cuda_exl3_prefill.cu)

    Params P;
    P.inlineJob.trellis = d.trellis;
    P.inlineJob.suh = d.suh;
    P.inlineJob.svh = d.svh;
    P.inlineJob.bias = d.bias;
    P.inlineJob.x = x.f32();
    P.inlineJob.ldx = int(in);
    P.inlineJob.y = y.f32();
    P.inlineJob.ldy = int(out);
    const size_t lim = smemLimit(size_t(props().sharedMemPerBlockOptin));
    const int MG = chooseMG(double(T), d.bits, lim);
    // Jobs of 16 rows (64 for prefill sizes): a linear's rows share one read of the weights. (The MoE's 8-row jobs
    // are about outlier experts; here 9–16 rows in two 8-row jobs read the matrix twice — measured slower at 12 rows
    // than one 16-row streaming job, docs/PERFORMANCE_EXL3.md.)
    P.rowsPerJob = kGroupRows * MG;
    P.J = int((T + P.rowsPerJob - 1) / P.rowsPerJob);
    P.T = int(T);
    P.k = int(d.k);
    P.n = int(d.n);
    P.tilesK = int(d.k / 16);
    P.tilesN = int(d.n / 16);
    P.NB = int(d.n / 128);
    P.kIn = int(in);
    P.nOut = int(out);
    P.mode = kModeLinear;
    const Plan plan = planLaunch(d.bits, d.codebook, MG, P.tilesK, P.NB, P.J, int(T), int(std::min<int64_t>(T, P.rowsPerJob)),
                                 false, props().multiProcessorCount, true, lim);
    P.S = plan.S;
    P.KSL = plan.KSL;
    P.steps = plan.steps;
    P.R = plan.R;
    if (plan.partials) {
        Exl3Cache& cache = exl3Cache();
        P.part = zeroedScratch(cache.part, size_t(T) * plan.S * d.n * 4).f32();
        P.counters = zeroedScratch(cache.counters, size_t(P.J) * P.NB * 4).i32();
        P.groups = P.J;
    }
    launch(P, plan, d.bits, d.codebook, stream());
}

}  // namespace ts
