// Private to the EXL3 kernel files (cuda_exl3.cu, and cuda_exl3_prefill.cu for the Hadamard, the loads, the mma and
// the row scale): the device pieces the EXL3 units share — cp.async and
// cross-block signalling (acquire-release arrivals, programmatic dependent launch), the mma, the input
// transform of a token row (x ⊙ suh, the 128-wide Hadamard, the row scale), the split-K partial sums, the
// output transform and the epilogue of a column block (linear / swiglu pair / down + routed combine), and a
// unit's end (UnitSink, finishUnit). The units themselves: cuda_exl3_staged.cuh (runUnitStaged) and
// cuda_exl3_stream.cuh (runUnitStream); the kernels, planner and launchers: cuda_exl3.cu.
// Test: twinspark-cli selftest --backend cuda --filter exl3; benchmark: twinspark-cli bench-device --what exl3.
#pragma once

#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

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
using ::ts::cuda::atomAddAcqRel;  // (cuda_common.cuh) the units' arrivals at their column block's counter
// Programmatic dependent launch (cuda_common.cuh; the kernels are launched with the attribute by launchPdl in
// cuda_exl3.cu): before pdlWait a unit reads only its parameters and weights (never written by kernels).
using ::ts::cuda::pdlTrigger;
using ::ts::cuda::pdlWait;
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
// One butterfly of the network: (u, v) → (u + v, u − v).
__device__ __forceinline__ void butterfly(float& u, float& v) {
    const float a = u, b = v;
    u = __fadd_rn(a, b);
    v = __fsub_rn(a, b);
}
__device__ __forceinline__ void had128(float (&v)[4], int lane) {
    butterfly(v[0], v[1]);  // h = 1, 2 inside the lane
    butterfly(v[2], v[3]);
    butterfly(v[0], v[2]);
    butterfly(v[1], v[3]);
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

// The exponent e that scales a row's largest |xr| (mx ≥ 0) into [2^14, 2^15), kEInit for an all-zero row, 0 for a
// non-finite one, within [−100, 100].
__device__ __forceinline__ int rowScaleExponent(float mx) {
    if (!(mx > 0.0f)) return kEInit;
    int p = 0;
    frexpf(mx, &p);  // mx = f·2^p, f in [0.5, 1): mx·2^(15−p) in [2^14, 2^15)
    return isfinite(mx) ? max(-100, min(100, 15 - p)) : 0;
}

// rowInputs' x ⊙ suh → xr = BH(x ⊙ suh) in place, exactly as the CPU computes it. Returns the exponent e that
// scales the row's largest |xr| into [2^14, 2^15), or kEInit when the stage is all zero (rowScaleExponent).
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
    return rowScaleExponent(warpMaxF(mx));
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

// svh and bias of the lane's 4 columns. The swiglu epilogue loads its gate's and up's before the partial sums,
// so that their latency overlaps those loads instead of following them (the epilogue is on the launch's
// critical path: the phase trace, bench-device --what exl3-trace); the linear/down epilogue takes them at the
// output transform, as before (loaded ahead of its row loop they made ptxas spill 12 bytes in the K = 4 linear
// kernel). bias: zeros when the job has none (then unused).
struct ColScale {
    float svh[4], bias[4];
};
__device__ __forceinline__ ColScale colScale(const Job& job, int col) {
    ColScale c;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        c.svh[i] = __ldg(job.svh + col + i);
        c.bias[i] = job.bias ? __ldg(job.bias + col + i) : 0.0f;
    }
    return c;
}
// yr of a row → BH_n · ⊙ svh (+ bias) for the lane's 4 columns (the CPU's exl3OutputTransform).
__device__ __forceinline__ void outputTransform(const Job& job, const ColScale& cs, int lane, float (&v)[4]) {
    had128(v, lane);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        v[i] = __fmul_rn(v[i], cs.svh[i]);
        if (job.bias) v[i] = __fadd_rn(v[i], cs.bias[i]);
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
// [t0, t1) of column block b; threads stride over (row, column). The entries and expert outputs of up to
// kCombineBatch choices are loaded before any is added (same order of adds): one entry → value chain per
// choice, each waiting for the previous add, held the MoE's last unit — it runs after every loop has ended —
// for 13–18 µs at batch 4 (phase trace: the down units' epilogues that combine).
// Not inlined: a call keeps its registers out of the units' allocation (inlined into the down epilogue, the
// batch made ptxas spill in the K = 4 kernel).
constexpr int kCombineBatch = 8;
__device__ __noinline__ void combineRange(const Params& P, int b, int t0, int t1, int tid, int nth) {
    const int cols = min(128, P.nOut - b * 128);
    for (int idx = tid; idx < (t1 - t0) * 128; idx += nth) {
        const int t = t0 + (idx >> 7), cl = idx & 127;
        if (cl >= cols) continue;
        const int col = b * 128 + cl;
        float* dst = P.yFinal + int64_t(t) * P.nOut + col;
        float a = *dst;
        const int e1 = P.combOffsets[t + 1];
        for (int e0 = P.combOffsets[t]; e0 < e1; e0 += kCombineBatch) {
            float w[kCombineBatch], x[kCombineBatch];
#pragma unroll
            for (int i = 0; i < kCombineBatch; ++i) {
                if (e0 + i < e1) {
                    const CombineEntry ce = P.combEntries[e0 + i];
                    w[i] = ce.weight;
                    x[i] = __ldcg(ce.src + col);
                }
            }
#pragma unroll
            for (int i = 0; i < kCombineBatch; ++i)
                if (e0 + i < e1) a = __fadd_rn(a, __fmul_rn(w[i], x[i]));
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
        const ColScale gs = colScale(gj, col), us = colScale(uj, col);
        for (int row = warp; row < gj.m; row += kWarps) {
            float g[4], u[4];
            sumPartials(P, gj.partRow + row, col, g);
            sumPartials(P, uj.partRow + row, col, u);
            outputTransform(gj, gs, lane, g);
            outputTransform(uj, us, lane, u);
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
        outputTransform(job, colScale(job, col), lane, v);
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

}  // namespace
}  // namespace exl3cuda
}  // namespace ts
