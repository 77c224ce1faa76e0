// The work list of a device-routed fused MoE step (CudaBackend::moeExpertsFusedDevice, cuda_exl3_moe_routed.cu),
// built by one block from the router's device outputs: the host version's tables (cuda_exl3_moe.cu), computed
// by ranks instead of a counting sort. Pair i = (t, k) with expert e:
//   row of i     = #{valid j : e_j < e, or e_j = e and j < i}     (experts ascending, token-major within)
//   rowStart(e)  = #{valid j : e_j < e};  count(e) = #{j : e_j = e}
//   first of e   = no j < i with e_j = e; it writes e's jobs: ⌈count/R⌉ pairs of ≤ R rows (R = a.chunk),
//                  pair index = Σ over experts e' < e of ⌈count(e')/R⌉ + chunk (the host's ascending pair order)
//   combine slot = combOffsets[t] + #{valid k' of t : (e_k', k') < (e, k)}   (ascending expert, then choice)
// and *live = the number of pairs. Ids outside [0, E) are skipped, as by the host version.
//
// The plan is three steps over the pairs with a block barrier between them (moePlanExperts, moePlanChunks, then
// moePlanTotals by one thread and moePlanPair for every pair), written as __host__ __device__ functions so that
// tests/kernels/test_exl3_moe_plan.cpp runs them on the host, in that order, against a counting-sort reference.
// moeBuildPlan (nvcc only) is the block-level driver.
//
// Who runs it: moePlanKernel, one block before the MoE launch (cuda_exl3_moe_routed.cu), launched with programmatic
// dependent launch. Any block size; every thread of the block calls it (it has block barriers). Scratch:
// kMoePlanScratchBytes of static shared memory, and moePlanTableSmem(E) bytes of dynamic shared memory for its copy
// of the expert table. The tables are written with plain stores, published by the end of the plan kernel (the MoE
// launch's pdlWait).
//
// Test: tests/kernels/test_exl3_moe_plan.cpp (host, CI); twinspark-cli selftest --backend cuda --filter exl3/moe
// (the device-routed rows against the CPU loop, and bit for bit against the host-routed MoE at T = 1).
#pragma once

#include "cuda/cuda_exl3.cuh"
#ifdef __CUDACC__
#include "cuda/cuda_common.cuh"  // pdlWait, pdlTrigger, globalTimerNs
#endif

namespace ts {
namespace exl3cuda {

constexpr int kMoePlanAbsent = 0x7fffffff;  // the expert of a pair whose id is outside [0, E)

// Loops over the step's pairs, unrolled on the device: their shared-memory reads do not depend on each other, so
// several can be in flight at once.
#ifdef __CUDA_ARCH__
#define TS_MOE_PLAN_UNROLL _Pragma("unroll 8")
#else
#define TS_MOE_PLAN_UNROLL
#endif

// Step 1, pair i: its expert, or kMoePlanAbsent.
__host__ __device__ inline int moePlanExpert(const MoePlanArgs& a, int i) {
    const int v = a.idx[i];
    return v >= 0 && v < a.E ? v : kMoePlanAbsent;
}

// Step 2, pair i (se: every pair's expert): ⌈count/R⌉ of its expert if i is that expert's first pair, else 0.
__host__ __device__ inline int moePlanChunks(const MoePlanArgs& a, const int* se, int i) {
    const int e = se[i];
    if (e == kMoePlanAbsent) return 0;
    int count = 0;
    TS_MOE_PLAN_UNROLL
    for (int j = 0; j < a.P0; ++j)
        if (se[j] == e) {
            if (j < i) return 0;
            ++count;
        }
    return (count + a.chunk - 1) / a.chunk;
}

// Step 3, one thread: the live pair count and each token's first combine slot.
__host__ __device__ inline void moePlanTotals(const MoePlanArgs& a, const int* se, const int* chunks) {
    int total = 0;
    TS_MOE_PLAN_UNROLL
    for (int j = 0; j < a.P0; ++j) total += chunks[j];
    *a.live = total;
    int acc = 0;  // the valid pairs of the tokens before t
    for (int t = 0; t < a.T; ++t) {
        a.combOffsets[t] = acc;
        TS_MOE_PLAN_UNROLL
        for (int k = 0; k < a.topk; ++k) acc += se[t * a.topk + k] != kMoePlanAbsent;
    }
    a.combOffsets[a.T] = acc;
}

// The three jobs of one (expert, chunk) pair — gate and up reading the step's x through the packed rows
// [r0, r0 + m) into the swiglu rows, down reading those into the expert-output rows — the layout both work-list
// builders write: the host one (CudaBackend::moeExpertsFused, cuda_exl3_moe.cu) and moePlanPair below.
// P0: the packed rows of the step (up's split-K partial rows follow gate's); x [T, D], act [P0, I], eout [P0, D].
__host__ __device__ inline void moePairJobs(const MoeExpertPtrs& ex, const float* x, const int32_t* rows, float* act,
                                            float* eout, int D, int I, int P0, int r0, int m, Job* gateUp, Job* down) {
    Job g;
    g.x = x;
    g.rows = rows + r0;
    g.ldx = D;
    g.m = m;
    g.y = act + int64_t(r0) * I;
    g.ldy = I;
    Job u = g;
    g.trellis = ex.gate.trellis;
    g.suh = ex.gate.suh;
    g.svh = ex.gate.svh;
    g.bias = ex.gate.bias;
    g.partRow = r0;
    u.trellis = ex.up.trellis;
    u.suh = ex.up.suh;
    u.svh = ex.up.svh;
    u.bias = ex.up.bias;
    u.partRow = P0 + r0;
    gateUp[0] = g;
    gateUp[1] = u;
    Job d;
    d.trellis = ex.down.trellis;
    d.suh = ex.down.suh;
    d.svh = ex.down.svh;
    d.bias = ex.down.bias;
    d.x = act + int64_t(r0) * I;
    d.ldx = I;
    d.m = m;
    d.y = eout + int64_t(r0) * D;
    d.ldy = D;
    d.partRow = r0;
    *down = d;
}

// Step 3, pair i: its packed row's token, its combine entry and, for an expert's first pair, the expert's jobs.
// w: the pair's routing weight (a.weight[i]); table: the layer's expert table (a.table, or the plan kernel's copy
// of it in shared memory) — both passed in so that the kernel loads them ahead of this step, not behind its stores.
__host__ __device__ inline void moePlanPair(const MoePlanArgs& a, const int* se, const int* chunks, int i, float w,
                                            const MoeExpertPtrs* table) {
    const int e = se[i];
    if (e == kMoePlanAbsent) return;
    int before = 0, count = 0, rank = 0;
    TS_MOE_PLAN_UNROLL
    for (int j = 0; j < a.P0; ++j) {
        const int ej = se[j];
        before += ej < e;  // kMoePlanAbsent is never below a valid e
        if (ej == e) {
            ++count;
            rank += j < i;
        }
    }
    const int row = before + rank;
    const int t = i / a.topk;
    a.rows[row] = t;
    // Combine slot within token t: its valid choices ordered by (expert, choice).
    int slot = 0, offset = 0;
    TS_MOE_PLAN_UNROLL
    for (int j = 0; j < t * a.topk; ++j) offset += se[j] != kMoePlanAbsent;
    for (int j = t * a.topk; j < (t + 1) * a.topk; ++j) {
        const int ej = se[j];
        slot += ej < e || (ej == e && j < i);
    }
    CombineEntry c;
    c.src = a.eout + int64_t(row) * a.D;
    c.weight = w;
    a.comb[offset + slot] = c;
    if (rank != 0) return;  // the expert's first pair writes its jobs
    int pair0 = 0;
    TS_MOE_PLAN_UNROLL
    for (int j = 0; j < a.P0; ++j) pair0 += se[j] < e ? chunks[j] : 0;
    const MoeExpertPtrs ex = table[e];
    for (int ch = 0; ch * a.chunk < count; ++ch) {
        const int p = pair0 + ch, r0 = before + ch * a.chunk;
        const int m = count - ch * a.chunk < a.chunk ? count - ch * a.chunk : a.chunk;
        moePairJobs(ex, a.x, a.rows, a.act, a.eout, a.D, a.I, a.P0, r0, m, a.jobsGU + 2 * p, a.jobsD + p);
    }
}

#ifdef __CUDACC__
namespace {

// The plan kernel keeps a copy of the layer's expert table in shared memory when it fits this many bytes
// (dynamic shared memory, under the 48 KiB a block gets without opting in, beside moeBuildPlan's static scratch):
// GLM-5.3-Flash's 288 experts take 27 KiB. Larger tables are read from global memory.
constexpr size_t kMoePlanTableSmemMax = 40 * 1024;
inline size_t moePlanTableSmem(int E) {
    const size_t b = size_t(E) * sizeof(MoeExpertPtrs);
    return b <= kMoePlanTableSmemMax ? b : 0;
}

// The block-level driver. (P0 ≤ kMoePlanMaxPairs; O(P0²) compares per block, P0 = T·topk ≤ 256: microseconds.)
// The whole kernel lies on the MoE layer's critical path (between the router and the MoE launch), so every global
// load that can go early does: the expert table (written once, at the layer's first step, never by a kernel) is
// copied into shared memory (tableSmem: E entries, or null to read a.table) before the wait for the previous kernel
// (pdlWait: the router's outputs, and the tables the previous MoE launch reads until it ends); the routing ids and
// weights are loaded together after it. Then the next kernel — the MoE launch, which waits for this one's end before
// reading anything — may start (pdlTrigger). The totals go to the block's last thread, so the pair threads do not
// wait for its serial loops.
// stamps: (the phase trace only) where thread 0 stamps the end of its wait for the previous kernel [0], the routing
// loaded [1] and the chunk counts done [2] (each after the block barrier behind it), or null.
__device__ __forceinline__ void moeBuildPlan(const MoePlanArgs& a, int* scratch, MoeExpertPtrs* tableSmem,
                                             unsigned long long* stamps = nullptr) {
    int* se = scratch;                                                      // [P0] expert of pair i, or kMoePlanAbsent
    int* chunks = scratch + kMoePlanMaxPairs;                               // [P0] ⌈count/R⌉ at an expert's first pair
    float* wt = reinterpret_cast<float*>(scratch + 2 * kMoePlanMaxPairs);  // [P0] routing weights
    const int tid = threadIdx.x, nt = blockDim.x;
    if (tableSmem) {
        static_assert(sizeof(MoeExpertPtrs) % 16 == 0, "the table is copied in 16-byte words");
        const int4* src = reinterpret_cast<const int4*>(a.table);
        int4* dst = reinterpret_cast<int4*>(tableSmem);
        const int n = a.E * int(sizeof(MoeExpertPtrs) / 16);
        for (int i = tid; i < n; i += nt) dst[i] = __ldg(src + i);
    }
    ::ts::cuda::pdlWait();
    if (stamps && tid == 0) stamps[0] = ::ts::cuda::globalTimerNs();
    ::ts::cuda::pdlTrigger();
    for (int i = tid; i < a.P0; i += nt) {
        se[i] = moePlanExpert(a, i);
        wt[i] = a.weight[i];
    }
    __syncthreads();
    if (stamps && tid == 0) stamps[1] = ::ts::cuda::globalTimerNs();
    for (int i = tid; i < a.P0; i += nt) chunks[i] = moePlanChunks(a, se, i);
    __syncthreads();
    if (stamps && tid == 0) stamps[2] = ::ts::cuda::globalTimerNs();
    if (tid == nt - 1) moePlanTotals(a, se, chunks);
    const MoeExpertPtrs* table = tableSmem ? tableSmem : a.table;
    for (int i = tid; i < a.P0; i += nt) moePlanPair(a, se, chunks, i, wt[i], table);
}

}  // namespace
#endif

#undef TS_MOE_PLAN_UNROLL

}  // namespace exl3cuda
}  // namespace ts
