// EXL3 on the GPU: y[T, out] = x[T, in] · Wᵀ straight from the packed trellis (CudaBackend::exl3Linear),
// and the kernel the fused MoE (cuda_exl3_moe.cu) runs its gate/up and down projections with. W is
// never expanded in device memory: every 16×16 tile is decoded in registers by the warp that uses it.
// The CPU reference is engine/quant/exl3_gemm.cpp; the format is /work/shared/specs/exl3.md.
//
//   xr = BH_k(x ⊙ suh)   (per 128-block; inputs ≥ in are zero)      — in-block, per stage
//   yr = xr · Ŵ          (tiles decoded on the fly; mma.m16n8k16)   — the main loop
//   y  = BH_n(yr) ⊙ svh + bias, columns < out                        — the epilogue of the last unit
//
// One kernel, exl3Kernel<K, codebook, MG>, 128 threads. Its work is a list of jobs (one matrix × up to
// 16·MG token rows; a linear with more rows is several jobs of the same matrix) cut into units: job ×
// slice of k × block of 128 output columns (8 tiles wide). blockIdx = unit; the grid is sized so that
// every SM holds several units at once — there is no persistent loop. Three variants:
//   - MG = kStream (16-row jobs whose slice is one stage: decode steps up to ~8–12 rows per matrix at K = 4;
//     the split-K bound makes bigger jobs multi-stage): runUnitStream. Each warp streams its two n-tiles'
//     trellis words through its own cp.async ring in shared memory (1.5–4 KiB in flight per warp, no block barrier in the loop; TS_EXL3_TUNE bit 16: a ring of 4 k-tiles in registers
//     instead), the decoded tile is the mma's A operand (Ŵᵀ) against single fp16 activations of 8 tokens (one
//     mma per tile), MUL1 enters as 1024 + bytesum with its affine correction per token at the end. Up to 8
//     blocks per SM (64 registers). Decode plans pick the slice length, 8..stageTiles(K) k-tiles, that minimizes
//     waves × work for the kernel's real occupancy (planLaunch).
//   - MG = 1 (16-row jobs with several stages per slice; every decode job with TS_EXL3_TUNE bit 8) and
//   - MG = 4 (prefill: 64-row jobs, every decoded tile feeds 4 m-groups of mmas, so the decode work per
//     token drops 4×; stages are half as deep to leave shared memory for 64 staged rows): runUnitStaged,
//     below — the block stages its trellis in shared memory and keeps activations as hi/lo fp16 pairs.
// The fused MoE's one launch, exl3MoeKernel<K, codebook, MG>, runs the same units (runUnit) of two such
// unit lists (gate/up, then down) plus the combine, a block taking its unit from a ticket counter
// instead of blockIdx, down units waiting for their activation rows (see MoeParams and exl3MoeKernel).
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
//      global memory, and the last unit to arrive at an arrival counter (atomicAdd; the counter is reset
//      by that unit) sums the partials in slice order — so the result does not depend on which unit came
//      last — applies the output Hadamard, ·svh, +bias, and stores. With one slice it does that directly
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

#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_exl3.cuh"

namespace ts {
namespace exl3cuda {
namespace {

constexpr float kHadScale = 0.088388347648f;  // 1/√128 as the CPU's kExl3HadScale

__device__ __forceinline__ void cpAsync16(void* smemDst, const void* gsrc) {
    const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(smemDst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(gsrc) : "memory");
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cpAsyncWait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// wait_group with a run-time count (0..7).
__device__ __forceinline__ void cpAsyncWaitDyn(int n) {
    switch (n) {
    case 0: cpAsyncWait<0>(); break;
    case 1: cpAsyncWait<1>(); break;
    case 2: cpAsyncWait<2>(); break;
    case 3: cpAsyncWait<3>(); break;
    case 4: cpAsyncWait<4>(); break;
    case 5: cpAsyncWait<5>(); break;
    case 6: cpAsyncWait<6>(); break;
    default: cpAsyncWait<7>(); break;
    }
}

// Cross-block signalling of the one-launch MoE (PTX memory model, gpu scope). The writer side: every
// thread's stores, __syncthreads, then one thread's release add; the reader side: one
// thread's acquire loads until the count is reached, then __syncthreads before any thread reads the data
// (the barrier carries the acquire to the block, as in cooperative groups' grid sync).
__device__ __forceinline__ int ldAcquire(const int* p) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void redRelease(int* p, int v) {
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// One thread's arrival at a block counter (gpu scope, acquire-release), after a __syncthreads: the release
// half publishes the block's stores ordered before the barrier (cumulativity), the acquire half lets the
// last arrival see every earlier arrival's, and its block sees them after the next barrier. Replaces
// __threadfence (fence.sc.gpu, a sequentially consistent fence that held every unit ~2 µs at its end) +
// atomicAdd.
__device__ __forceinline__ int atomAddAcqRel(int* p, int v) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
// Programmatic dependent launch (sm_90+; launches made with the attribute, see launchPdl): a kernel may
// start while the previous kernel in the stream is finishing. pdlWait blocks until that kernel has completed
// and its memory is visible — before it, a kernel reads only its parameters and weights (never written by
// kernels); pdlTrigger lets the next kernel start once every block of this one has issued it.
__device__ __forceinline__ void pdlWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdlTrigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// Block-wide: returns once *p ≥ target, with the writers' stores visible to every thread of the block.
// Called where all threads of the block arrive together.
__device__ __forceinline__ void blockWaitCount(const int* p, int target) {
    if (threadIdx.x == 0)
        while (ldAcquire(p) < target) __nanosleep(100);
    __syncthreads();
}
// Block-wide: after every thread's stores, *p += 1 for the waiters of blockWaitCount.
__device__ __forceinline__ void blockSignal(int* p) {
    __syncthreads();
    if (threadIdx.x == 0) redRelease(p, 1);  // cumulative over the block's stores ordered before the barrier
}

// d += A·B, m16n8k16, fp16 inputs, fp32 accumulators (PTX ISA fragment layouts).
__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 2^e as a float for e in [−126, 127]; 0 below (only used for tiny rescale factors).
__device__ __forceinline__ float pow2(int e) { return e < -126 ? 0.0f : __int_as_float((127 + e) << 23); }

// Ĥ on one 128-vector held by a warp, lane l owning elements 4l..4l+3: the CPU's butterfly network
// (hadamard128: h = 1, 2, ..., 64, pairs (u, v) → (u + v, u − v)), then ·1/√128 — the same operations on the
// same operands, so the result is bit-identical to the CPU's.
__device__ __forceinline__ void had128(float (&v)[4], int lane) {
    float a = v[0], b = v[1];
    v[0] = __fadd_rn(a, b);
    v[1] = __fsub_rn(a, b);
    a = v[2];
    b = v[3];
    v[2] = __fadd_rn(a, b);
    v[3] = __fsub_rn(a, b);
    a = v[0];
    b = v[2];
    v[0] = __fadd_rn(a, b);
    v[2] = __fsub_rn(a, b);
    a = v[1];
    b = v[3];
    v[1] = __fadd_rn(a, b);
    v[3] = __fsub_rn(a, b);
#pragma unroll
    for (int m = 1; m < 32; m <<= 1) {
        const bool upper = (lane & m) != 0;  // holds the "+h" element of each pair: gets u − v
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float p = __shfl_xor_sync(0xffffffffu, v[i], m);
            v[i] = upper ? __fsub_rn(p, v[i]) : __fadd_rn(v[i], p);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = __fmul_rn(v[i], kHadScale);
}

__device__ __forceinline__ float warpMaxF(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Word index of element (k-tile kt, row, r = k within the tile) in the staged input: per (kt, row) and
// c = 0..3, 16 bytes = the half2 (hi, lo) pairs of k = 2c, 2c+8, 2c+1, 2c+9 — exactly the A registers
// a0, a2 of the "even rows" mma and a0, a2 of the "odd rows" mma for lanes with lane % 4 = c.
__device__ __forceinline__ int xsWord(int kt, int row, int r, int R) {
    return ((kt * R + row) * 4 + ((r & 7) >> 1)) * 4 + (((r & 1) << 1) | ((r >> 3) & 1));
}

// x_i for i in [kk, kk + 4) of one row, zero at and beyond kIn. `coherent`: x is written during this
// launch (the one-launch MoE's activation rows), so it must not go through the read-only (nc) path; ld.cg
// reads L2, where the writers' stores are.
__device__ __forceinline__ void loadX4(const float* xrow, int kk, int kIn, bool coherent, float (&v)[4]) {
    const float* p = xrow + kk;
    if (kk + 4 <= kIn && (reinterpret_cast<uintptr_t>(p) & 15u) == 0) {
        const float4 q = coherent ? __ldcg(reinterpret_cast<const float4*>(p)) : __ldg(reinterpret_cast<const float4*>(p));
        v[0] = q.x;
        v[1] = q.y;
        v[2] = q.z;
        v[3] = q.w;
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = kk + i < kIn ? (coherent ? __ldcg(p + i) : __ldg(p + i)) : 0.0f;
    }
}

// The inputs of one token row for k-tiles [ktA, ktA + kts) before the rotation (one warp; lane l holds
// elements 4l..4l+3 of each 128-block): x ⊙ suh, the loads and their products. In two steps (suh, then x)
// so that the streaming unit can load suh — a weight — before its trellis prefetch and the PDL wait, and x
// (written by the previous kernel) after it.
template <int KS>
__device__ __forceinline__ void rowSuh(const Job& job, int ktA, int kts, int lane, float (&v)[KS / 8][4]) {
#pragma unroll
    for (int hb = 0; hb < KS / 8; ++hb) {
        if (hb * 8 < kts) {
            const float4 s = __ldg(reinterpret_cast<const float4*>(job.suh + ktA * 16 + hb * 128 + 4 * lane));
            v[hb][0] = s.x;
            v[hb][1] = s.y;
            v[hb][2] = s.z;
            v[hb][3] = s.w;
        }
    }
}
// v = suh (rowSuh) → x ⊙ suh.
template <int KS>
__device__ __forceinline__ void rowTimesX(const Params& P, const Job& job, int row, int ktA, int kts, int lane,
                                          float (&v)[KS / 8][4]) {
    const float* xrow = job.x + int64_t(job.rows ? job.rows[row] : row) * job.ldx;
#pragma unroll
    for (int hb = 0; hb < KS / 8; ++hb) {
        if (hb * 8 < kts) {
            float x[4];
            loadX4(xrow, ktA * 16 + hb * 128 + 4 * lane, P.kIn, P.waitOn != nullptr, x);
#pragma unroll
            for (int i = 0; i < 4; ++i) v[hb][i] = __fmul_rn(x[i], v[hb][i]);
        }
    }
}
template <int KS>
__device__ __forceinline__ void rowInputs(const Params& P, const Job& job, int row, int ktA, int kts, int lane,
                                          float (&v)[KS / 8][4]) {
    rowSuh<KS>(job, ktA, kts, lane, v);
    rowTimesX<KS>(P, job, row, ktA, kts, lane, v);
}

// rowInputs' x ⊙ suh → xr = BH(x ⊙ suh) in place, exactly as the CPU computes it. Returns the exponent e that
// scales the row's largest |xr| into [2^14, 2^15), or kEInit when the stage is all zero.
template <int KS>
__device__ __forceinline__ int rotateInputs(int kts, int lane, float (&v)[KS / 8][4]) {
    constexpr int HB = KS / 8;
    float mx = 0.0f;
#pragma unroll
    for (int hb = 0; hb < HB; ++hb) {
        if (hb * 8 < kts) {
            had128(v[hb], lane);
#pragma unroll
            for (int i = 0; i < 4; ++i) mx = fmaxf(mx, fabsf(v[hb][i]));
        }
    }
    mx = warpMaxF(mx);
    int e = kEInit;
    if (mx > 0.0f) {
        int p = 0;
        frexpf(mx, &p);  // mx = f·2^p, f in [0.5, 1): mx·2^(15−p) in [2^14, 2^15)
        e = isfinite(mx) ? max(-100, min(100, 15 - p)) : 0;
    }
    return e;
}

// The rotated input of one token row for k-tiles [ktA, ktA + kts): rowInputs, then rotateInputs.
template <int KS>
__device__ __forceinline__ int rotatedRow(const Params& P, const Job& job, int row, int ktA, int kts, int lane,
                                          float (&v)[KS / 8][4]) {
    rowInputs<KS>(P, job, row, ktA, kts, lane, v);
    return rotateInputs<KS>(kts, lane, v);
}

// Step 2 of a stage for one token row (one warp): xr of k-tiles [ktA, ktA + kts) → hi/lo pairs in xs, and
// the row's scale exponent for this stage (min of the previous one and this stage's own; an all-zero stage
// keeps the previous scale) → eCur[row].
template <int KS>
__device__ __forceinline__ void transformRow(const Params& P, const Job& job, int row, int ktA, int kts, uint32_t* xs,
                                             int* eCur, const int* ePrev, int lane) {
    constexpr int HB = KS / 8;
    float v[HB][4];
    int e = rotatedRow<KS>(P, job, row, ktA, kts, lane, v);
    e = min(e, ePrev ? ePrev[row] : kEInit);
    const float sc = pow2(e);
#pragma unroll
    for (int hb = 0; hb < HB; ++hb) {
        if (hb * 8 < kts) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float t = __fmul_rn(v[hb][i], sc);  // exact (power of two)
                const __half hi = __float2half_rn(t);
                const __half lo = __float2half_rn(__fsub_rn(t, __half2float(hi)));  // t − hi is exact
                const int kl = hb * 128 + 4 * lane + i;                               // k within the stage
                xs[xsWord(kl >> 4, row, kl & 15, P.R)] =
                    uint32_t(__half_as_ushort(hi)) | (uint32_t(__half_as_ushort(lo)) << 16);
            }
        }
    }
    if (lane == 0) eCur[row] = e;
}

// Σ over slices (in slice order) of the partial sums of one row, columns [col, col + 4).
__device__ __forceinline__ void sumPartials(const Params& P, int prow, int col, float (&v)[4]) {
    const float* p = P.part + int64_t(prow) * P.S * P.n + col;
    float4 q = __ldcg(reinterpret_cast<const float4*>(p));
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
    for (int s = 1; s < P.S; ++s) {
        q = __ldcg(reinterpret_cast<const float4*>(p + int64_t(s) * P.n));
        v[0] = __fadd_rn(v[0], q.x);
        v[1] = __fadd_rn(v[1], q.y);
        v[2] = __fadd_rn(v[2], q.z);
        v[3] = __fadd_rn(v[3], q.w);
    }
}

// yr of a row → BH_n · ⊙ svh (+ bias) for the lane's 4 columns (the CPU's exl3OutputTransform).
__device__ __forceinline__ void outputTransform(const Job& job, int col, int lane, float (&v)[4]) {
    had128(v, lane);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        v[i] = __fmul_rn(v[i], __ldg(job.svh + col + i));
        if (job.bias) v[i] = __fadd_rn(v[i], __ldg(job.bias + col + i));
    }
}

// The CPU's swiglu: silu(min(g, lim)) · clamp(u, −lim, lim), lim ≤ 0: no clamping.
__device__ __forceinline__ float swigluOne(float g, float u, float lim) {
    if (lim > 0.0f) {
        g = lim < g ? lim : g;
        u = u < -lim ? -lim : (lim < u ? lim : u);
    }
    return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

// Final y[t, col] += Σ_choices weight · expert_out[col], choices in ascending expert order, for rows
// [t0, t1) of column block b; threads stride over (row, column).
__device__ __forceinline__ void combineRange(const Params& P, int b, int t0, int t1, int tid, int nth) {
    const int cols = min(128, P.nOut - b * 128);
    for (int idx = tid; idx < (t1 - t0) * 128; idx += nth) {
        const int t = t0 + (idx >> 7), cl = idx & 127;
        if (cl >= cols) continue;
        const int col = b * 128 + cl;
        float* dst = P.yFinal + int64_t(t) * P.nOut + col;
        float a = *dst;
        for (int e = P.combOffsets[t]; e < P.combOffsets[t + 1]; ++e) {
            const CombineEntry ce = P.combEntries[e];
            a = __fadd_rn(a, __fmul_rn(ce.weight, __ldcg(ce.src + col)));
        }
        *dst = a;
    }
}

// Jobs of the launch that are real: P.J, or fewer when the device-side plan says so (Params::liveGroups).
__device__ __forceinline__ int liveJobs(const Params& P) {
    return P.liveGroups ? (P.mode == kModeSwiglu ? 2 : 1) * *P.liveGroups : P.J;
}

__device__ __forceinline__ Job jobOf(const Params& P, int j) {
    if (P.jobs) return P.jobs[j];
    Job job = P.inlineJob;
    const int r0 = P.rowsPerJob * j;
    job.x += int64_t(r0) * job.ldx;
    job.y += int64_t(r0) * job.ldy;
    job.m = min(P.rowsPerJob, P.T - r0);
    job.partRow = r0;
    return job;
}

// The epilogue of column block b for job j (all its rows), run by the unit that completed it. `red`:
// the block's own sums [16, 128] in shared memory (one slice, unpaired), else the partial buffer.
__device__ void epilogue(const Params& P, const Job& job, int j, int b, const float* red, int* flag) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int col = b * 128 + 4 * lane;
    if (P.mode == kModeSwiglu) {
        const Job gj = jobOf(P, j & ~1), uj = jobOf(P, j | 1);
        for (int row = warp; row < gj.m; row += kWarps) {
            float g[4], u[4];
            sumPartials(P, gj.partRow + row, col, g);
            sumPartials(P, uj.partRow + row, col, u);
            outputTransform(gj, col, lane, g);
            outputTransform(uj, col, lane, u);
            float* dst = gj.y + int64_t(row) * gj.ldy;
#pragma unroll
            for (int i = 0; i < 4; ++i)
                if (col + i < P.nOut) dst[col + i] = swigluOne(g[i], u[i], P.limit);
        }
        if (P.signal) blockSignal(P.signal + (j >> 1));  // one launch: this pair's rows of block b are in
        return;
    }
    for (int row = warp; row < job.m; row += kWarps) {
        float v[4];
        if (red) {
#pragma unroll
            for (int i = 0; i < 4; ++i) v[i] = red[row * 128 + 4 * lane + i];
        } else {
            sumPartials(P, job.partRow + row, col, v);
        }
        outputTransform(job, col, lane, v);
        float* dst = job.y + int64_t(row) * job.ldy;
#pragma unroll
        for (int i = 0; i < 4; ++i)
            if (col + i < P.nOut) dst[col + i] = v[i];
    }
    if (P.signal) blockSignal(P.signal + b);  // one launch, down, separate combine: job j's block b is out
    if (P.mode == kModeDown && P.fusedCombine) {
        // Second level: the last of the J job epilogues of this column block combines all tokens.
        __syncthreads();
        if (tid == 0) {
            int* cnt = P.counters + P.groups * P.NB + b;
            const int old = atomAddAcqRel(cnt, 1);
            const bool last = old == liveJobs(P) - 1;
            if (last) *cnt = 0;
            *flag = last;
        }
        __syncthreads();
        if (!*flag) return;
        combineRange(P, b, 0, P.Tf, tid, kThreads);
    }
}

// Where a unit's sums go: with one slice and no pair (arrivals = 1) into shared memory [R][128] for its own
// epilogue (over the stage and input buffers, no longer read), else into its rows of the split-K partial
// buffer. put(row, col, v): row < job.m, col in [0, 128).
struct UnitSink {
    float* red;   // [R][128] or null
    float* prow;  // the partial buffer at (job.partRow, slice s, column block b); row r at + r·rowStride
    int64_t rowStride;
    __device__ __forceinline__ void put(int row, int col, float v) const {
        if (red)
            red[row * 128 + col] = v;
        else
            prow[int64_t(row) * rowStride + col] = v;
    }
    __device__ __forceinline__ void put2(int row, int col, float v0, float v1) const {  // col even
        if (red) {
            red[row * 128 + col] = v0;
            red[row * 128 + col + 1] = v1;
        } else {
            *reinterpret_cast<float2*>(prow + int64_t(row) * rowStride + col) = make_float2(v0, v1);
        }
    }
};
__device__ __forceinline__ UnitSink unitSink(const Params& P, const Job& job, int b, int s, uint32_t* smem) {
    const bool direct = P.S == 1 && P.mode != kModeSwiglu;
    return {direct ? reinterpret_cast<float*>(smem) : nullptr, P.part + (int64_t(job.partRow) * P.S + s) * P.n + b * 128,
            int64_t(P.S) * P.n};
}

// The end of a unit, after every thread has put its sums (UnitSink): finish here (one slice, unpaired) or
// count this unit's arrival at the column block's counter, the last unit to arrive running the epilogue.
// Every thread of the block calls it.
__device__ __forceinline__ void finishUnit(const Params& P, const Job& job, int j, int b, const UnitSink& sink, int* flag) {
    const int tid = threadIdx.x;
    const int arrivals = P.S * (P.mode == kModeSwiglu ? 2 : 1);
    if (sink.red) {  // the whole k range was this unit's: finish here
        __syncthreads();
        epilogue(P, job, j, b, sink.red, flag);
        return;
    }
    // Every thread's partials are ordered before the barrier; thread 0's acquire-release arrival publishes
    // them, and the last arrival's acquire (carried to its block by the barrier) sees every unit's.
    __syncthreads();
    if (tid == 0) {
        const int grp = P.mode == kModeSwiglu ? (j >> 1) : j;
        int* cnt = P.counters + grp * P.NB + b;
        const int old = atomAddAcqRel(cnt, 1);
        const bool last = old == arrivals - 1;
        if (last) *cnt = 0;  // ready for the next launch
        *flag = last;
    }
    __syncthreads();
    if (!*flag) return;
    epilogue(P, job, j, b, nullptr, flag);
}

// Unit u of a launch described by P (blockIdx.x of exl3Kernel; a ticket of exl3MoeKernel), with the
// block's dynamic shared memory. Every thread of the block calls it; it returns with no copy in flight.
template <int K, int CB, int MG>
__device__ __forceinline__ void runUnitStaged(const Params& P, int64_t u, uint32_t* smem) {
    constexpr int KS = stageTiles(K, MG);
    constexpr int TW = tileWords(K);
    constexpr int STAGE_WORDS = KS * kUnitTilesN * TW;
    constexpr int CH = kUnitTilesN * TW / 4;  // 16-byte chunks in one k-tile row of the unit
    pdlWait();  // (prefill and multi-stage units: nothing to overlap worth the bookkeeping)
    const int nBufs = P.steps > 1 ? 2 : 1;
    uint32_t* stage = smem;                                       // [nBufs][KS][8 tiles][8K words]
    uint32_t* xs = smem + nBufs * STAGE_WORDS;                    // [KS][R][4][4 words]
    int* eBuf = reinterpret_cast<int*>(xs + KS * P.R * 16);       // [2][kMaxRows] row scale exponents
    int* flag = eBuf + 2 * kMaxRows;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, c = lane & 3;  // mma fragment coordinates
    const int j = int(u % P.J);  // jobs innermost: units reading the same trellis run side by side
    const int64_t sb = u / P.J;
    const int b = int(sb % P.NB);
    const int s = int(sb / P.NB);
    if (P.liveGroups && j >= liveJobs(P)) return;  // a planned-for pair the step's routing did not use
    const Job job = jobOf(P, j);
    const int m = job.m;

    const int kt0 = s * P.KSL;
    const int ktEnd = min(kt0 + P.KSL, P.tilesK);
    const int nSteps = (ktEnd - kt0 + KS - 1) / KS;
    const uint32_t* trellis = reinterpret_cast<const uint32_t*>(job.trellis);

    // Stage st's trellis: kts rows (k-tiles) of 8 consecutive tiles (8·32K bytes each, contiguous).
    // Rows [r0, r1) of stage st (no commit).
    auto issueRows = [&](int st, int r0, int r1) {
        const int ktA = kt0 + st * KS;
        uint32_t* dst = stage + (st % nBufs) * STAGE_WORDS;
        const uint32_t* src = trellis + (int64_t(ktA) * P.tilesN + int64_t(b) * kUnitTilesN) * TW;
        for (int i = r0 * CH + tid; i < r1 * CH; i += kThreads) {
            const int r = i / CH, q = i - r * CH;
            cpAsync16(dst + r * (CH * 4) + q * 4, src + int64_t(r) * P.tilesN * TW + q * 4);
        }
    };
    auto issue = [&](int st) {
        if (st < nSteps) issueRows(st, 0, min(KS, ktEnd - (kt0 + st * KS)));
        cpAsyncCommit();  // always one group per stage (maybe empty): keeps wait_group counting simple
    };

    // acc[mg][nt][h][i]: rows 16·mg + g (i = 0, 1) and 16·mg + g + 8 (i = 2, 3), columns
    // 32·warp + 16·nt + 8·h + 2c + (i & 1) of the unit's 128.
    float acc[MG][2][2][4];
#pragma unroll
    for (int mg = 0; mg < MG; ++mg)
#pragma unroll
        for (int a = 0; a < 2; ++a)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[mg][a][h][i] = 0.0f;
    int eAcc[MG][2];  // scale exponents of this lane's rows
#pragma unroll
    for (int mg = 0; mg < MG; ++mg) eAcc[mg][0] = eAcc[mg][1] = kEInit;

    // Single-stage units (decode: nBufs = 1) bring their stage in NCH commit groups of CHT k-tiles and
    // start on a chunk as soon as it has landed, so decoding overlaps the rest of the stage's transfer.
    constexpr int CHT = 8;
    constexpr int NCH = KS / CHT;
    static_assert(KS % CHT == 0 && NCH >= 1 && NCH <= 8, "stage must be whole 8-tile chunks");
    const bool chunked = nBufs == 1 && !P.noChunk;
    if (chunked) {
        const int kts0 = min(KS, ktEnd - kt0);
#pragma unroll
        for (int q = 0; q < NCH; ++q) {
            issueRows(0, min(q * CHT, kts0), min((q + 1) * CHT, kts0));
            cpAsyncCommit();
        }
    } else {
        issue(0);
        issue(1);
    }
    // One-launch MoE, down: the input rows are the pair's activations, written by gate/up units of this
    // launch; wait for all of them (the trellis copies issued above proceed meanwhile).
    if (P.waitOn) blockWaitCount(P.waitOn + j, P.waitTarget);
    for (int st = 0; st < nSteps; ++st) {
        const int ktA = kt0 + st * KS, kts = min(KS, ktEnd - ktA);
        int* eCur = eBuf + (st & 1) * kMaxRows;
        const int* ePrev = st ? eBuf + ((st - 1) & 1) * kMaxRows : nullptr;
        for (int row = warp; row < m; row += kWarps) transformRow<KS>(P, job, row, ktA, kts, xs, eCur, ePrev, lane);
        if (chunked) {
            cpAsyncWaitDyn(NCH - 1);  // the first chunk has landed
        } else {
            cpAsyncWait<1>();  // this stage's group has landed (the next one may still be in flight)
        }
        __syncthreads();
#pragma unroll
        for (int mg = 0; mg < MG; ++mg)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
                const int row = 16 * mg + 8 * hi + g;
                if (row < m && eCur[row] != eAcc[mg][hi]) {  // the row's scale went down: rescale (exact)
                    const float f = pow2(eCur[row] - eAcc[mg][hi]);
#pragma unroll
                    for (int a = 0; a < 2; ++a)
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            acc[mg][a][h][2 * hi] *= f;
                            acc[mg][a][h][2 * hi + 1] *= f;
                        }
                    eAcc[mg][hi] = eCur[row];
                }
            }
        const uint32_t* sbuf = stage + (st % nBufs) * STAGE_WORDS;
        const uint4* xs4 = reinterpret_cast<const uint4*>(xs);
        const int nq = chunked ? NCH : 1;
        for (int q = 0; q < nq; ++q) {
            if (q > 0) {  // chunked only: wait for chunk q (uniform across the block)
                cpAsyncWaitDyn(NCH - 1 - q);
                __syncthreads();
            }
            const int kb = chunked ? min(q * CHT, kts) : 0, ke = chunked ? min((q + 1) * CHT, kts) : kts;
            // Running pointers (k-tile kt): the warp's first tile, and (MG = 1) this lane's A words of row g.
            const uint32_t* tcur = sbuf + (kb * kUnitTilesN + 2 * warp) * TW;
            const uint4* acur = xs4 + (kb * P.R + g) * 4 + c;
            const int astep = P.R * 4;
#pragma unroll 1
        for (int kt = kb; kt < ke; ++kt, tcur += kUnitTilesN * TW, acur += astep) {
            // MG = 1: the k-tile's A fragments once for both n-tiles (rows ≥ m read as zero; row g + 8 is
            // 8·4 uint4 further).
            uint4 a0k = make_uint4(0, 0, 0, 0), a1k = make_uint4(0, 0, 0, 0);
            if constexpr (MG == 1) {
                if (g < m) a0k = acur[0];
                if (g + 8 < m) a1k = acur[32];
            }
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                uint32_t st8[8], bq[8];
                laneStates<K>(tcur + nt * TW, lane, st8);
#pragma unroll
                for (int q = 0; q < 8; ++q) bq[q] = codebookDup<CB>(st8[q]);
                if constexpr (MG == 1) {
                    const uint4 a0 = a0k, a1 = a1k;
                    mma(acc[0][nt][0], a0.x, a1.x, a0.y, a1.y, bq[0], bq[2]);
                    mma(acc[0][nt][0], a0.z, a1.z, a0.w, a1.w, bq[1], bq[3]);
                    mma(acc[0][nt][1], a0.x, a1.x, a0.y, a1.y, bq[4], bq[6]);
                    mma(acc[0][nt][1], a0.z, a1.z, a0.w, a1.w, bq[5], bq[7]);
                } else {
#pragma unroll
                for (int mg = 0; mg < MG; ++mg) {
                    if (16 * mg >= m) break;  // uniform: rows of this group are all padding
                    uint4 a0 = make_uint4(0, 0, 0, 0), a1 = make_uint4(0, 0, 0, 0);
                    if (16 * mg + g < m) a0 = xs4[(kt * P.R + 16 * mg + g) * 4 + c];
                    if (16 * mg + g + 8 < m) a1 = xs4[(kt * P.R + 16 * mg + g + 8) * 4 + c];
                    // Lane (g, c)'s positions j: row 2c + (j&1) + 8·((j>>1)&1), column g + 8·(j>>2).
                    mma(acc[mg][nt][0], a0.x, a1.x, a0.y, a1.y, bq[0], bq[2]);  // rows 2c, 2c+8; columns 0..7
                    mma(acc[mg][nt][0], a0.z, a1.z, a0.w, a1.w, bq[1], bq[3]);  // rows 2c+1, 2c+9
                    mma(acc[mg][nt][1], a0.x, a1.x, a0.y, a1.y, bq[4], bq[6]);  // columns 8..15
                    mma(acc[mg][nt][1], a0.z, a1.z, a0.w, a1.w, bq[5], bq[7]);
                }
                }  // MG > 1
            }
        }
        }  // chunks
        __syncthreads();  // everyone is done with this stage's buffers
        issue(st + 2);
    }
    cpAsyncWait<0>();
    const UnitSink sink = unitSink(P, job, b, s, smem);
#pragma unroll
    for (int mg = 0; mg < MG; ++mg)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
            const int row = 16 * mg + 8 * hi + g;
            if (row >= m) continue;
            const float f = pow2(-eAcc[mg][hi]);  // back to the true magnitude
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int col = 32 * warp + 16 * nt + 8 * h + 2 * c;
                    sink.put2(row, col, acc[mg][nt][h][2 * hi] * f, acc[mg][nt][h][2 * hi + 1] * f);
                }
        }
    finishUnit(P, job, j, b, sink, flag);
}

// ---- the streaming decode unit (Plan::MG = kStream) ----------------------------------------------------
//
// The same unit (job × slice of ≤ stageTiles(K) k-tiles × 128 columns, one stage) without the block-wide
// trellis stage: warp w streams its two n-tiles (contiguous in memory) k-tile by k-tile through its own
// ring — by default ringSteps(K) slots of shared memory filled by cp.async, one commit group per k-tile
// (streamLoopSmem: 1.5–4 KiB in flight per warp that cost no registers); with TS_EXL3_TUNE bit 16, 4 k-tiles
// of registers (streamLoop: lane t loads word t, and t + 32 for K > 4, of each tile with a coalesced 4-byte
// load that skips L1, and takes the other words of its bit windows from their lanes by shuffles). Nothing
// in the loop waits for the rest of the block; the block's shared memory is its staged activations (8 KiB
// for ≤ 8 tokens at K = 4) and the warps' rings, so registers (64) set the occupancy: 8 blocks per SM (fewer
// only at K ≤ 2 with more than 8 tokens, where the staged activations need up to 41 KB).
constexpr int kRing = 4;

template <int K>
constexpr int laneWords() { return (tileWords(K) + 31) / 32; }  // ring words per lane and tile: 1 or 2

__device__ __forceinline__ uint32_t ldStream(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.global.nc.L1::no_allocate.b32 %0, [%1];\n" : "=r"(v) : "l"(p));
    return v;
}

// Word `lane` (and lane + 32) of the tile at tp (lanes past the tile's 8K words read nothing).
template <int K>
__device__ __forceinline__ void loadTileWords(const uint32_t* tp, int lane, uint32_t (&w)[laneWords<K>()]) {
    constexpr int TW = tileWords(K);
    w[0] = (TW >= 32 || lane < TW) ? ldStream(tp + lane) : 0u;
    if constexpr (laneWords<K>() > 1) w[1] = lane + 32 < TW ? ldStream(tp + lane + 32) : 0u;
}

// Word index of activation k (0..15 within k-tile kt) of token row `row` in the streaming stage: per
// (kt, row) 8 words of fp16 pairs, ordered so that lane (g, c) reads the B fragment of token g — b0 (k 2c,
// 2c+1) and b1 (k 2c+8, 2c+9) — as one 8-byte load: word 2c + (k >= 8). R: rows per k-tile (streamRows).
__device__ __forceinline__ int xsStreamWord(int kt, int row, int k, int R) {
    const int kp = k >> 1;
    return (kt * R + row) * 8 + 2 * (kp & 3) + (kp >> 2);
}

// Step 2 for the streaming unit, one token row of one stage (one warp): xr of the stage's kts k-tiles as the
// CPU computes it (the same ops as transformRow), the stage's row scale 2^e (max |xr| → [2^14, 2^15)), fp16
// values into xs at k-tiles ktOff.. of the slice, and Σ of those fp16 values (fp32, a fixed order) into
// rowSum[row] for the MUL1 correction; rowSum and eRow are the stage's [16] arrays.
// v: the row's x ⊙ suh (rowInputs), rotated here.
template <int KS>
__device__ __forceinline__ void transformRowStream(int row, int ktOff, int kts, float (&v)[KS / 8][4], uint32_t* xs,
                                                   float* rowSum, int* eRow, int rows, int lane) {
    constexpr int HB = KS / 8;
    const int e = rotateInputs<KS>(kts, lane, v);
    const float scale = pow2(e);
    float sum = 0.0f;
#pragma unroll
    for (int hb = 0; hb < HB; ++hb) {
        if (hb * 8 < kts) {
            const int kl = ktOff * 16 + hb * 128 + 4 * lane;  // k within the slice; 4 consecutive values = 2 words
            const __half h0 = __float2half_rn(__fmul_rn(v[hb][0], scale)), h1 = __float2half_rn(__fmul_rn(v[hb][1], scale));
            const __half h2 = __float2half_rn(__fmul_rn(v[hb][2], scale)), h3 = __float2half_rn(__fmul_rn(v[hb][3], scale));
            xs[xsStreamWord(kl >> 4, row, kl & 15, rows)] = uint32_t(__half_as_ushort(h0)) | (uint32_t(__half_as_ushort(h1)) << 16);
            xs[xsStreamWord(kl >> 4, row, (kl & 15) + 2, rows)] =
                uint32_t(__half_as_ushort(h2)) | (uint32_t(__half_as_ushort(h3)) << 16);
            sum += (__half2float(h0) + __half2float(h1)) + (__half2float(h2) + __half2float(h3));
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) {
        rowSum[row] = sum;
        eRow[row] = e;
    }
}

// The register ring's first kRing k-tiles (TS_EXL3_TUNE bit 16); np moves on to the tile of k-tile kRing.
template <int K>
__device__ __forceinline__ void streamPrefetch(const uint32_t*& np, int64_t kStride, int nkt, int lane,
                                               uint32_t (&ring)[kRing][2][laneWords<K>()]) {
#pragma unroll
    for (int i = 0; i < kRing; ++i) {
        if (i < nkt) {
            loadTileWords<K>(np, lane, ring[i][0]);
            loadTileWords<K>(np + tileWords(K), lane, ring[i][1]);
        }
        np += kStride;
    }
}

// The streaming unit's main loop over its nkt k-tiles for tokens 0..7 of the job (TWO: also 8..15, into accB,
// for m > 8). The roles of the mma operands are swapped against the staged variant: the lane's 8 decoded
// values of a 16×16 tile are exactly an A fragment of Ŵᵀ (rows n = g, g + 8; k = 2c, 2c+1, 2c+8, 2c+9 — the
// same positions as its B fragments, spec §3.1), and the activations of 8 tokens are the B fragment, so ONE
// mma.m16n8k16 per tile computes 16 columns × 8 tokens: acc[nt][i] = column 16·nt + g + 8·(i >> 1) of the
// warp's 32, token 2c + (i & 1) (+ 8 for accB).
// ring: k-tiles [0, kRing) already loaded (streamPrefetch); np: the tile of k-tile kRing.
template <int K, int CB, bool TWO>
__device__ __forceinline__ void streamLoop(uint32_t (&ring)[kRing][2][laneWords<K>()], const uint32_t* np,
                                           int64_t kStride, int nkt, const uint2* xa, int R, int g, int c, int lane,
                                           float (&acc)[2][4], float (&accB)[2][4]) {
    constexpr int TW = tileWords(K);
    constexpr int NW = laneWords<K>();
#pragma unroll 1
    for (int base = 0; base < nkt; base += kRing) {
#pragma unroll
        for (int i = 0; i < kRing; ++i) {
            const int kt = base + i;
            if (kt >= nkt) break;  // uniform
            uint32_t w[2][NW];
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int q = 0; q < NW; ++q) w[nt][q] = ring[i][nt][q];
            if (kt + kRing < nkt) {
                loadTileWords<K>(np, lane, ring[i][0]);
                loadTileWords<K>(np + TW, lane, ring[i][1]);
            }
            np += kStride;
            const uint2 a02 = xa[(kt * R + g) * 4 + c];  // tokens g (B fragment column g), k 2c.. | 2c+8..
            uint2 a13 = make_uint2(0, 0);
            if constexpr (TWO) a13 = xa[(kt * R + g + 8) * 4 + c];
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                uint32_t st8[8], bq[4];
                if constexpr (K == 4) {  // one shuffle: word t − 1 (the lane's own word is t)
                    laneStates4(__shfl_sync(0xffffffffu, w[nt][0], (lane + 31) & 31), w[nt][0], st8);
                } else {
                    laneStatesFrom<K>(
                        [&](uint32_t idx) {
                            if constexpr (NW == 1) {
                                return __shfl_sync(0xffffffffu, w[nt][0], int(idx));
                            } else {
                                const uint32_t v0 = __shfl_sync(0xffffffffu, w[nt][0], int(idx & 31u));
                                const uint32_t v1 = __shfl_sync(0xffffffffu, w[nt][1], int(idx & 31u));
                                return idx < 32u ? v0 : v1;
                            }
                        },
                        lane, st8);
                }
                codebookPairs<CB>(st8, bq);
                // A = Ŵᵀ rows (g | g+8) × k (2c.. | 2c+8..): a0 = (g, 2c..) = bq[0], a1 = (g+8, 2c..) = bq[2],
                // a2 = (g, 2c+8..) = bq[1], a3 = (g+8, 2c+8..) = bq[3].
                mma(acc[nt], bq[0], bq[2], bq[1], bq[3], a02.x, a02.y);
                if constexpr (TWO) mma(accB[nt], bq[0], bq[2], bq[1], bq[3], a13.x, a13.y);
            }
        }
    }
}

// The same loop with the warp's k-tiles in flight in its shared-memory ring of ringSteps(K) slots (cp.async,
// one commit group per k-tile): the bytes in flight cost no registers, so a warp keeps 1.5–4 KiB in flight.
// Slot kt % D holds the warp's two n-tiles (2·8K words, contiguous in global memory too); the prologue
// (streamPrefetchSmem) filled slots [0, D) and np is the tile of k-tile D.
template <int K>
__device__ __forceinline__ void streamPrefetchSmem(const uint32_t*& np, int64_t kStride, int nkt, int lane, uint32_t* ring) {
    constexpr int SW = 2 * tileWords(K), D = ringSteps(K);
#pragma unroll 1
    for (int i = 0; i < D; ++i) {
        if (lane < SW / 4 && i < nkt) cpAsync16(ring + i * SW + 4 * lane, np + 4 * lane);
        cpAsyncCommit();
        np += kStride;
    }
}

// A streaming unit's slice is one or two stages of stageTiles(K) k-tiles (streamSliceTiles); each stage's
// activations carry their own row scale 2^e (eRow [stage][16]; an all-zero stage, kEInit, takes the other
// stage's). Its effective exponent for token row `row`:
__device__ __forceinline__ int stageExp(const int* eRow, int nst, int st, int row) {
    const int e0 = eRow[row];
    if (nst == 1) return e0;
    const int e1 = eRow[kGroupRows + row];
    const int a = e0 == kEInit ? e1 : e0;
    return st == 0 ? a : (e1 == kEInit ? a : e1);
}
// 2^d for an exponent difference of two stages, clamped to fp32's normal range (only inputs whose stages
// differ by > 2^126 in magnitude would reach the clamp).
__device__ __forceinline__ float pow2Diff(int d) { return pow2(max(-126, min(126, d))); }

// At the second stage's first k-tile, the sums so far (activations scaled by 2^e0) move to the second
// stage's scale 2^e1: exact (a power of two). acc[nt][i] holds token 2c + (i & 1), accB token 8 + 2c + (i & 1).
template <bool TWO>
__device__ __forceinline__ void rescaleToStage1(float (&acc)[2][4], float (&accB)[2][4], const int* eRow, int m, int c) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
#pragma unroll
        for (int hf = 0; hf < (TWO ? 2 : 1); ++hf) {
            const int row = 8 * hf + 2 * c + q;
            const float f = row < m ? pow2Diff(stageExp(eRow, 2, 1, row) - stageExp(eRow, 2, 0, row)) : 1.0f;
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    if (hf) accB[nt][2 * h + q] *= f;
                    else acc[nt][2 * h + q] *= f;
                }
        }
    }
}

// The loop runs in passes of kPass k-tiles, unrolled: a pass starts at a multiple of kPass, which divides the
// ring depth, so every slot and activation address in it is the pass's base plus a constant (before, the
// slot index kt % D and the activation row were recomputed per k-tile: ~15 address instructions per k-tile).
// R (rows per k-tile of the staged activations) follows from TWO: 16 rows, else 8.
constexpr int kPass = 4;

// ktSplit: the second stage's first k-tile (a multiple of kPass; < 0: one stage), where the sums move to its
// scale (rescaleToStage1, exponents eRow, m token rows).
template <int K, int CB, bool TWO>
__device__ __forceinline__ void streamLoopSmem(uint32_t* ring, const uint32_t* np, int64_t kStride, int nkt,
                                               const uint2* xa, int g, int c, int lane, float (&acc)[2][4],
                                               float (&accB)[2][4], int ktSplit, const int* eRow, int m) {
    constexpr int TW = tileWords(K), SW = 2 * TW, D = ringSteps(K), R = TWO ? 16 : 8;
    static_assert((D & (D - 1)) == 0 && D % kPass == 0, "ring slots: a power of two, whole passes");
    const bool copier = lane < SW / 4;  // the lanes that move a slot's 16-byte pieces
    const uint2* xl = xa + g * 4 + c;   // this lane's B fragment of k-tile 0: token g (and g + 8: + 8·4)
#pragma unroll 1
    for (int base = 0; base < nkt; base += kPass) {
        if (base == ktSplit) rescaleToStage1<TWO>(acc, accB, eRow, m, c);
        uint32_t* pslot = ring + (base & (D - 1)) * SW;
        const uint2* px = xl + base * R * 4;
#pragma unroll
        for (int i = 0; i < kPass; ++i) {
            const int kt = base + i;
            if (kt >= nkt) break;  // uniform
            cpAsyncWait<D - 1>();  // this lane's copies of k-tile kt have landed (one group per k-tile)
            __syncwarp();          // ... and every lane's
            uint32_t* slot = pslot + i * SW;
            uint32_t st8[2][8];
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                if constexpr (K == 4)
                    laneStates4(slot[nt * TW + ((lane + 31) & 31)], slot[nt * TW + lane], st8[nt]);
                else
                    laneStates<K>(slot + nt * TW, lane, st8[nt]);
            }
            __syncwarp();  // the slot is read: refill it with k-tile kt + D
            if (copier && kt + D < nkt) cpAsync16(slot + 4 * lane, np + 4 * lane);
            cpAsyncCommit();
            np += kStride;
            const uint2 a02 = px[i * R * 4];
            uint2 a13 = make_uint2(0, 0);
            if constexpr (TWO) a13 = px[i * R * 4 + 32];
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                uint32_t bq[4];
                codebookPairs<CB>(st8[nt], bq);
                mma(acc[nt], bq[0], bq[2], bq[1], bq[3], a02.x, a02.y);
                if constexpr (TWO) mma(accB[nt], bq[0], bq[2], bq[1], bq[3], a13.x, a13.y);
            }
        }
    }
    cpAsyncWait<0>();  // no copy outlives the unit (the tail's groups are empty)
}

template <int K, int CB>
__device__ __forceinline__ void runUnitStream(const Params& P, int64_t u, uint32_t* smem) {
    constexpr int KSH = stageTiles(K, kStream);  // k-tiles per stage (the input transform's unit)
    constexpr int TW = tileWords(K);
    const int KSS = streamSliceTiles(K, P.R, P.regRing != 0);  // the planner's longest slice: 1 or 2 stages
    uint32_t* xs = smem;  // [KSS][rows][8 words] fp16 activations, rows = 8 (m ≤ 8) or 16 (≤ streamRows(P.R))
    float* rowSum = reinterpret_cast<float*>(xs + KSS * streamRows(P.R) * 8);  // [2][16] Σ a per stage and row (scaled)
    int* eRow = reinterpret_cast<int*>(rowSum + 2 * kGroupRows);                 // [2][16] row scale exponents
    int* flag = eRow + 2 * kGroupRows;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, c = lane & 3;
    const int j = int(u % P.J);
    const int64_t sb = u / P.J;
    const int b = int(sb % P.NB);
    const int s = int(sb / P.NB);
    // Before the PDL wait only the parameters and weights may be read: a job table (written by a copy or
    // by the routing kernel) and the live count come after it.
    if (P.jobs != nullptr || P.liveGroups != nullptr) pdlWait();
    if (P.liveGroups && j >= liveJobs(P)) return;
    const Job job = jobOf(P, j);
    const int m = job.m;
    const int kt0 = s * P.KSL;
    const int nkt = min(P.KSL, P.tilesK - kt0);  // ≤ KSS (the plan guarantees it)
    const int nst = nkt > KSH ? 2 : 1;          // stages of the slice (2 only for ≤ 8 rows, see streamSliceTiles)

    // Rows of the staged activations that no token fills are read as B columns: zero them (all R rows of
    // every k-tile are read by the 8- or 16-token loop).
    const int rows = m > 8 ? 16 : 8;
    for (int i = tid; i < nkt * rows * 8; i += kThreads)  // word i: row (i / 8) % rows (rows = 8 or 16)
        if (((i >> 3) & (rows - 1)) >= m) xs[i] = 0u;
    // This warp's n-tile 2w at k-tile kt0 (n-tile 2w + 1 is TW words on); the ring's first k-tiles' loads
    // go out before the wait and the transform below.
    const uint32_t* np = reinterpret_cast<const uint32_t*>(job.trellis) +
                         (int64_t(kt0) * P.tilesN + int64_t(b) * kUnitTilesN + 2 * warp) * TW;
    const int64_t kStride = int64_t(P.tilesN) * TW;
    uint32_t ring[kRing][2][laneWords<K>()];
    uint32_t* sring = reinterpret_cast<uint32_t*>(flag + 4) + warp * ringSteps(K) * 2 * TW;  // this warp's ring
    // The input transform is one task per (row, stage), task t = row·nst + stage, warp w taking w, w + 4, ...
    // The suh loads of this warp's first task go out before the trellis prefetch (behind it they would wait
    // for the whole device's first ring fills; the block's other warps wait for the transform at the
    // barrier below); its x loads follow the PDL wait. The down phase of the one-launch MoE waits for its
    // rows first (below).
    constexpr int HB = KSH / 8;
    float xin[HB][4];
    const bool early = P.waitOn == nullptr && warp < m * nst;
    if (early) {
        const int st = nst == 2 ? (warp & 1) : 0;
        rowSuh<KSH>(job, kt0 + st * KSH, min(KSH, nkt - st * KSH), lane, xin);
    }
    if (P.regRing)
        streamPrefetch<K>(np, kStride, nkt, lane, ring);
    else
        streamPrefetchSmem<K>(np, kStride, nkt, lane, sring);
    float acc[2][4], accB[2][4];
#pragma unroll
    for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[a][i] = accB[a][i] = 0.0f;
    pdlWait();  // x, the partial buffer, the counters: the previous kernel's (a no-op when already waited)
    // One-launch MoE, down: wait for the activation rows.
    if (P.waitOn) blockWaitCount(P.waitOn + j, P.waitTarget);
    for (int t = warp; t < m * nst; t += kWarps) {
        const int row = nst == 2 ? t >> 1 : t, st = nst == 2 ? t & 1 : 0;
        const int ktA = kt0 + st * KSH, kts = min(KSH, nkt - st * KSH);
        if (early && t == warp)
            rowTimesX<KSH>(P, job, row, ktA, kts, lane, xin);
        else
            rowInputs<KSH>(P, job, row, ktA, kts, lane, xin);
        transformRowStream<KSH>(row, st * KSH, kts, xin, xs, rowSum + st * kGroupRows, eRow + st * kGroupRows, rows,
                                lane);
    }
    __syncthreads();
    const uint2* xa = reinterpret_cast<const uint2*>(xs);  // token r of k-tile kt: xa + (kt·rows + r)·4 + c
    const int ktSplit = nst == 2 ? KSH : -1;               // the second stage's first k-tile (a pass boundary)
    if (P.regRing) {  // (one stage: streamSliceTiles gives the register ring no second)
        if (m > 8)
            streamLoop<K, CB, true>(ring, np, kStride, nkt, xa, rows, g, c, lane, acc, accB);
        else
            streamLoop<K, CB, false>(ring, np, kStride, nkt, xa, rows, g, c, lane, acc, accB);
    } else {
        if (m > 8)
            streamLoopSmem<K, CB, true>(sring, np, kStride, nkt, xa, g, c, lane, acc, accB, ktSplit, eRow, m);
        else
            streamLoopSmem<K, CB, false>(sring, np, kStride, nkt, xa, g, c, lane, acc, accB, ktSplit, eRow, m);
    }

    // True magnitudes: MUL1 sums are Σ a·h, the value being kinv·h + kbias; then undo the token's scale 2^e
    // (the last stage's: the loop moved the first stage's sums to it), with Σ a of both stages at that scale.
    const UnitSink sink = unitSink(P, job, b, s, smem);
    float outv[2][2][4];  // [half][nt][i]
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int row = 8 * hf + 2 * c + q;
            float f = 0.0f, corr = 0.0f;
            if (row < m) {
                const int eF = stageExp(eRow, nst, nst - 1, row);
                f = pow2(-eF);
                if (CB == 2) {
                    float rs = rowSum[row];
                    if (nst == 2) rs = fmaf(rs, pow2Diff(eF - stageExp(eRow, 2, 0, row)), rowSum[kGroupRows + row]);
                    corr = kMul1Bias * rs;
                }
            }
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const float a = hf ? accB[nt][2 * h + q] : acc[nt][2 * h + q];
                    outv[hf][nt][2 * h + q] = (CB == 2 ? fmaf(kMul1Inv, a, corr) : a) * f;
                }
        }
    __syncthreads();  // every warp is done with xs: the sink may reuse it
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int row = 8 * hf + 2 * c + q;
            if (row >= m) continue;
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) sink.put(row, 32 * warp + 16 * nt + g + 8 * h, outv[hf][nt][2 * h + q]);
        }
    finishUnit(P, job, j, b, sink, flag);
}

// Unit u: the streaming decode unit or the staged one.
template <int K, int CB, int MG>
__device__ __forceinline__ void runUnit(const Params& P, int64_t u, uint32_t* smem) {
    if constexpr (MG == kStream)
        runUnitStream<K, CB>(P, u, smem);
    else
        runUnitStaged<K, CB, MG>(P, u, smem);
}

template <int K, int CB, int MG>
__global__ void __launch_bounds__(kThreads, MG == kStream ? 8 : MG == 1 ? 6 : 1) exl3Kernel(const __grid_constant__ Params P) {
    extern __shared__ __align__(16) uint32_t smem[];
    pdlTrigger();  // the next kernel's blocks may start as this one's retire (they wait before reading data)
    runUnit<K, CB, MG>(P, blockIdx.x, smem);
}

// The one-launch fused MoE (see MoeParams). One block per unit, as in the two-launch version, but a block
// does not run unit blockIdx.x: it takes the next ticket from an atomic counter when it starts, and runs
// that unit. The last block to finish zeroes the ticket counters for the next launch.
//
// Why it cannot deadlock, whatever the grid size and however many blocks are co-resident: a block draws
// its ticket only once it is running, so when a block holds ticket t, every ticket below t is held by a
// block that is already running, and a running block is never descheduled for good (it keeps its SM until
// it exits). Gate/up units wait for nothing. A down unit waits only for gate/up units, all of which have
// lower tickets, hence are held by running blocks that finish without waiting. A combine unit waits only
// for down units, all below it, which finish by the previous argument. A block that is not yet resident
// holds no ticket, so nobody waits for it: the grid need not fit on the device at once — it is the
// two-launch version's grid, the hardware starting blocks as others exit. (Blocks are dispatched roughly
// in blockIdx order, but nothing relies on it: with a static unit = blockIdx.x a resident down unit could
// wait for a gate/up block the full device can never start.)
//
// Not a persistent grid (occupancy × SMs blocks looping over tickets): the ticket argument would hold the
// same, but around the unit code (80 registers for 6 blocks per SM in decode) such a loop made ptxas spill
// 100+ bytes per thread; with one unit per block the decode kernels keep exl3Kernel's register allocation
// (at K = 4: 16 bytes of stack against 8; the hardware refills SMs as blocks retire, as in two launches).
template <int K, int CB, int MG>
__global__ void __launch_bounds__(kThreads, MG == kStream ? 8 : MG == 1 ? 6 : 1) exl3MoeKernel(const __grid_constant__ MoeParams F) {
    extern __shared__ __align__(16) uint32_t smem[];
    __shared__ int ticketS, lastS;
    const int tid = threadIdx.x;
    // The tickets and the routed plan are written by the previous kernels (the last MoE launch resets them).
    pdlWait();
    pdlTrigger();
    if (tid == 0) ticketS = int(atomicAdd(reinterpret_cast<unsigned*>(F.sync), 1u));
    __syncthreads();
    const int t = ticketS;  // uniform across the block; < F.unitsGU + F.unitsD + F.unitsC = gridDim.x
    const int endGU = F.unitsGU, endD = F.unitsGU + F.unitsD;
    if (t < endD) {
        // The phase's Params by a run-time index into the kernel parameters (still constant-bank loads):
        // one call site, so the unit code is inlined once (two cost twice the compile time and spills).
        const int ph = t < endGU ? 0 : 1;
        runUnit<K, CB, MG>(F.ph[ph], ph ? t - endGU : t, smem);
    } else {  // combine: column block b, token rows [8·tb, 8·tb + 8)
        const Params& P = F.ph[1];
        const int cu = t - endD, nTB = (P.Tf + 7) / 8;
        const int b = cu / nTB, t0 = (cu - b * nTB) * 8;
        blockWaitCount(F.sync + 2 + F.ph[0].groups + b, liveJobs(P));
        combineRange(P, b, t0, min(P.Tf, t0 + 8), tid, kThreads);
    }
    // Retire: the last block to get here (ordered after the others' counter updates — the ticket draw, the
    // done counts — by the acquire-release arrival) resets the ticket counter, the retire count and the done counts; every other block
    // has finished with them. The per-column arrival counters reset themselves (their last arrival).
    __syncthreads();
    if (tid == 0) {
        const unsigned old = unsigned(atomAddAcqRel(F.sync + 1, 1));
        lastS = old == gridDim.x - 1;
    }
    __syncthreads();
    if (lastS) {
        const int n = moeSyncInts(F.ph[0].groups, F.ph[1].NB);
        for (int i = tid; i < n; i += kThreads) F.sync[i] = 0;
    }
}

__global__ void combineKernel(const __grid_constant__ Params P) {
    const int b = blockIdx.x;
    const int t0 = blockIdx.y * 8, t1 = min(P.Tf, t0 + 8);
    combineRange(P, b, t0, t1, threadIdx.x, blockDim.x);
}

using KernelFn = void (*)(Params);

template <int K, int MG>
KernelFn kernelFor(int cb) {
    switch (cb) {
    case 0: return exl3Kernel<K, 0, MG>;
    case 1: return exl3Kernel<K, 1, MG>;
    default: return exl3Kernel<K, 2, MG>;
    }
}

template <int MG>
KernelFn kernelFor(int bits, int cb) {
    switch (bits) {
    case 1: return kernelFor<1, MG>(cb);
    case 2: return kernelFor<2, MG>(cb);
    case 3: return kernelFor<3, MG>(cb);
    case 4: return kernelFor<4, MG>(cb);
    case 5: return kernelFor<5, MG>(cb);
    case 6: return kernelFor<6, MG>(cb);
    case 7: return kernelFor<7, MG>(cb);
    default: return kernelFor<8, MG>(cb);
    }
}

using MoeKernelFn = void (*)(MoeParams);

template <int K, int MG>
MoeKernelFn moeKernelFor(int cb) {
    switch (cb) {
    case 0: return exl3MoeKernel<K, 0, MG>;
    case 1: return exl3MoeKernel<K, 1, MG>;
    default: return exl3MoeKernel<K, 2, MG>;
    }
}

template <int MG>
MoeKernelFn moeKernelFor(int bits, int cb) {
    switch (bits) {
    case 1: return moeKernelFor<1, MG>(cb);
    case 2: return moeKernelFor<2, MG>(cb);
    case 3: return moeKernelFor<3, MG>(cb);
    case 4: return moeKernelFor<4, MG>(cb);
    case 5: return moeKernelFor<5, MG>(cb);
    case 6: return moeKernelFor<6, MG>(cb);
    case 7: return moeKernelFor<7, MG>(cb);
    default: return moeKernelFor<8, MG>(cb);
    }
}

size_t stageBytes(int bits, int MG) { return size_t(stageTiles(bits, MG)) * kUnitTilesN * tileWords(bits) * 4; }

}  // namespace

Plan planLaunch(int bits, int codebook, int MG, int tilesK, int NB, int J, int rowsTotal, int R, bool pairMode, int numSMs,
                bool allowStream) {
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
    S = std::min(S, std::max(1, int(double(tilesK) * 16.0 * bits / (160.0 * rowsPerJob))));
    const double partBytesPerSlice = double(rowsTotal) * NB * 128 * 4;
    S = std::min(S, std::max(1, int((64.0 * 1024 * 1024) / std::max(1.0, partBytesPerSlice))));
    S = std::max(1, std::min(S, groups8));
    const int KSL = 8 * ((groups8 + S - 1) / S);
    S = (tilesK + KSL - 1) / KSL;
    p.S = S;
    p.KSL = KSL;
    p.steps = (KSL + KS - 1) / KS;
    p.R = Rc;
    p.smem = size_t(p.steps > 1 ? 2 : 1) * stageBytes(bits, p.MG) + size_t(KS) * p.R * 64 + (2 * kMaxRows + 4) * 4;
    // A slice one streaming unit takes (one stage, or two for ≤ 8 rows): the streaming variant (no trellis
    // stage in shared memory; runUnitStream), one pass. Its shared memory fits the longest such slice.
    if (mayStream && KSL <= KSS) {
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
        if (occ < 0) {
            const KernelFn fn = p.MG == kStream ? kernelFor<kStream>(bits, codebook) : kernelFor<1>(bits, codebook);
            // No device (a host-only test) or no answer: plan without the tuning, as when occ = 0.
            if ((p.smem > 48 * 1024 &&
                 cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(p.smem)) != cudaSuccess) ||
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, kThreads, p.smem) != cudaSuccess) {
                (void)cudaGetLastError();
                occ = 0;
            }
            slot.store(occ + 1, std::memory_order_relaxed);
        }
        const int64_t slots = int64_t(occ) * std::max(1, numSMs);
        const int Smax = std::max(1, int(double(tilesK) * 16.0 * bits / (160.0 * rowsPerJob)));
        if (slots > 0) {
            constexpr int64_t kUnitCost = 8;  // fixed cost of a unit (transform, epilogue), in k-tiles
            int64_t bestCost = -1;
            int bestKSL = KSL;
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
            if (bestKSL < KSL) {
                p.KSL = bestKSL;
                p.S = (tilesK + bestKSL - 1) / bestKSL;
            }
        }
    }
    p.partials = p.S > 1 || pairMode;
    p.blocks = unitsPerSlice * p.S;
    return p;
}

int tuneFlags() {
    static const int flags = [] {
        const char* e = std::getenv("TS_EXL3_TUNE");
        return e ? std::atoi(e) : 0;
    }();
    return flags;
}

bool tuneStagedDecode() { return (tuneFlags() & 8) != 0; }
bool tuneRegisterRing() { return (tuneFlags() & 16) != 0; }
bool tunePdlOff() { return (tuneFlags() & 32) != 0; }
bool tuneOneStageSlices() { return (tuneFlags() & 64) != 0; }

namespace {
// An EXL3 kernel launch with programmatic dependent launch allowed (unless TS_EXL3_TUNE bit 32): the
// kernel's blocks may start while the previous kernel in the stream finishes, prefetching their trellis and
// suh until pdlWait (the kernels' contract above). In stream capture it becomes a programmatic graph edge.
template <class Arg>
void launchPdl(void (*fn)(Arg), unsigned grid, size_t smem, cudaStream_t stream, const Arg& arg) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = tunePdlOff() ? 0 : 1;
    TS_CUDA_CHECK(cudaLaunchKernelEx(&cfg, fn, arg));
}
}  // namespace

namespace {
std::atomic<int> g_moeLaunchesOverride{0};  // 0: TS_EXL3_TUNE decides
std::atomic<int> g_moeLastLaunches{0};
}  // namespace

int moeLaunches() {
    const int o = g_moeLaunchesOverride.load(std::memory_order_relaxed);
    if (o == 1 || o == 2) return o;
    return (tuneFlags() & 4) ? 2 : 1;
}

int setMoeLaunches(int n) { return g_moeLaunchesOverride.exchange(n == 1 || n == 2 ? n : 0); }
void noteMoeLaunches(int n) { g_moeLastLaunches.store(n, std::memory_order_relaxed); }
int lastMoeLaunches() { return g_moeLastLaunches.load(std::memory_order_relaxed); }

void launch(const Params& p0, const Plan& plan, int bits, int codebook, cudaStream_t stream) {
    Params p = p0;
    p.noChunk = (tuneFlags() & 1) ? 1 : 0;
    p.regRing = tuneRegisterRing() ? 1 : 0;
    TS_CHECK(bits >= 1 && bits <= 8 && codebook >= 0 && codebook <= 2, "EXL3 CUDA: bad K or codebook");
    TS_CHECK(plan.blocks > 0 && plan.blocks < (int64_t(1) << 31), "EXL3 CUDA: grid too large");
    const KernelFn fn = plan.MG > 1          ? kernelFor<kMaxMG>(bits, codebook)
                        : plan.MG == kStream ? kernelFor<kStream>(bits, codebook)
                                             : kernelFor<1>(bits, codebook);
    if (plan.smem > 48 * 1024) {
        // Per device and kernel; cheap enough to repeat for the (prefill-sized) launches that need it.
        TS_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(plan.smem)));
    }
    launchPdl(fn, unsigned(plan.blocks), plan.smem, stream, p);
}

void launchCombine(const Params& p, cudaStream_t stream) {
    if (p.Tf <= 0) return;
    const dim3 grid(unsigned(p.NB), unsigned((p.Tf + 7) / 8));
    combineKernel<<<grid, 256, 0, stream>>>(p);
    TS_CUDA_LAUNCH_CHECK();
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
    gu.signal = p.sync + 2;  // per pair: its column blocks written
    gu.waitOn = nullptr;
    d.waitOn = p.sync + 2;   // down job j = pair j
    d.waitTarget = gu.NB;
    d.signal = d.fusedCombine ? nullptr : p.sync + 2 + gu.groups;  // per column block: down jobs out
    const size_t smem = std::max(planGU.smem, planD.smem);
    const MoeKernelFn fn = planGU.MG > 1          ? moeKernelFor<kMaxMG>(bits, codebook)
                           : planGU.MG == kStream ? moeKernelFor<kStream>(bits, codebook)
                                                  : moeKernelFor<1>(bits, codebook);
    if (smem > 48 * 1024)
        TS_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    // One block per ticket (see exl3MoeKernel): the two launches' grids and the combine kernel's, in one.
    launchPdl(fn, unsigned(total), smem, stream, p);
}

}  // namespace exl3cuda

// ---- Exl3Cache ------------------------------------------------------------------------------------------

Exl3Cache::~Exl3Cache() {
    for (Staging& st : staging) {
        if (st.done) {
            cudaEventSynchronize(st.done);
            cudaEventDestroy(st.done);
        }
        if (st.host) cudaFreeHost(st.host);
    }
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

Buffer& CudaBackend::exl3Scratch(Buffer& b, size_t bytes) {
    if (b.empty() || b.size() < bytes) {
        size_t grown = b.empty() ? 4096 : b.size();
        while (grown < bytes) grown *= 2;
        // Enqueued kernels (and recorded graphs: then it is kept until they are dropped) may still
        // use the old one.
        if (!b.empty() && !graphRetire(b)) synchronize();
        b = alloc(grown);  // zero-filled: arrival counters start at 0
    }
    return b;
}

void CudaBackend::exl3Linear(const Buffer& x, int64_t T, const PackedLinear& p, const Buffer& y) {
    using namespace exl3cuda;
    if (T <= 0) return;
    const int64_t in = p.inFeatures(), out = p.outFeatures();
    TS_CHECK(x.size() >= size_t(T * in) * 4 && y.size() >= size_t(T * out) * 4, "exl3Linear: buffer too small");
    TS_CHECK(T < (int64_t(1) << 30), "exl3Linear: too many rows");
    const DeviceTrellis& d = deviceTrellis(p);
    TS_CHECK(d.k % 128 == 0 && d.n % 128 == 0 && in <= d.k && out <= d.n, "exl3Linear: bad EXL3 shape");

    Params P;
    P.inlineJob.trellis = d.trellis;
    P.inlineJob.suh = d.suh;
    P.inlineJob.svh = d.svh;
    P.inlineJob.bias = d.bias;
    P.inlineJob.x = x.f32();
    P.inlineJob.ldx = int(in);
    P.inlineJob.y = y.f32();
    P.inlineJob.ldy = int(out);
    const int MG = chooseMG(double(T));
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
                                 false, props().multiProcessorCount);
    P.S = plan.S;
    P.KSL = plan.KSL;
    P.steps = plan.steps;
    P.R = plan.R;
    if (plan.partials) {
        Exl3Cache& cache = exl3Cache();
        P.part = exl3Scratch(cache.part, size_t(T) * plan.S * d.n * 4).f32();
        P.counters = exl3Scratch(cache.counters, size_t(P.J) * P.NB * 4).i32();
        P.groups = P.J;
    }
    launch(P, plan, d.bits, d.codebook, stream());
}

}  // namespace ts
