// The fused EXL3 MoE with the routing left on the device (CudaBackend::moeExpertsFusedDevice): the
// one-launch fused MoE of cuda_exl3_moe.cu, but its work list is built on the device from the router's
// device outputs (moeRouteDevice, cuda_moe.cu), so a decode step does not stop at every MoE layer to bring
// the expert ids to the host. Two launches per layer: moePlanKernel (one block) builds the work list with
// moeBuildPlan (cuda_exl3_moe_plan.cuh: the host version's tables, by ranks; its steps are tested on the host
// in CI), then exl3MoeKernel runs it. Both are launched with programmatic dependent launch: the plan kernel may
// start while the previous kernel ends — when that kernel lets it (pdlTrigger: a MoE launch does, the router's
// kernels do not) — and copies the expert table meanwhile, and the MoE kernel's blocks may start before the plan
// ends and wait for it at their PDL wait (docs/PERFORMANCE_EXL3.md, 2026-12-06, third session: ~2 µs per layer at
// batch 1 in the benchmark, whose previous kernel is a MoE launch). Building the list inside the MoE launch instead (ticket 0's block, the others waiting
// on a flag) was tried and measured slower: docs/PERFORMANCE_EXL3.md, 2026-12-05 sixth session.
//
//   exl3MoeKernel: planned on the host for the most pairs the step can have, min(T·topk, ⌈T·topk/R⌉ + min(E,
//   T·topk)) (an expert with more than R rows gets more jobs; R = min(T, moeJobRows())), with
//   Params::liveGroups pointing at *live: units of pairs ≥ live exit at once, the combine counts live
//   jobs. At T = 1 the bound is exact (a token's top-k experts are distinct), so the plan, the units and
//   the summation order are the host version's: the result is bit-identical to moeExpertsFused with the
//   same routing (checked by the self-test). At T > 1 the plan's split-K may differ from the host
//   version's (planned for the actual pair count): another fixed order, within the same tolerance of the
//   CPU.
//
// Eligible: 1 ≤ T ≤ 16 and T·topk ≤ 256 (decode and short verify steps; prefill keeps the host plan,
// which also picks 64-row jobs), gate/up/down of every expert packed with one K and codebook (the one
// launch), and the one-launch variant selected (TS_EXL3_TUNE bit 4 selects two launches: host path).
// Every expert of the layer is uploaded on the first call (the plan reads a device table of all
// E experts' pointers) — all of them are read sooner or later in decode anyway.
//
// Test:      twinspark-cli selftest --backend cuda --filter exl3/moe   (engine/selftest/cases_exl3.cpp:
//            "routed on device" against the CPU loop, and bit for bit against moeExpertsFused at T = 1);
//            tests/kernels/test_exl3_moe_plan.cpp (the plan's steps on the host, CI)
// Benchmark: bench-device --what exl3-moe ((a'): the MoE layer routed on the device); the full-width slice
//            decode (scripts/gpu/run_gpu_suite.sh, SLICE=1), with TS_MOE_DEVICE_ROUTE=0 for the host-routed A/B.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/env_switch.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_exl3.cuh"
#include "cuda/cuda_exl3_moe_plan.cuh"

namespace ts {

namespace {

using namespace exl3cuda;

constexpr int kPlanThreads = kMoePlanMaxPairs;  // the plan kernel's block: one thread per (token, choice) pair

static_assert(kTraceStaged == kTraceInputReady + 1 && kTraceLoopEnd == kTraceInputReady + 2,
              "moeBuildPlan's stamps go to three consecutive trace words");

// tableSmem: the dynamic shared memory holds the expert table (moePlanTableSmem(E) bytes were given), else it is
// read from global memory.
__global__ void __launch_bounds__(kPlanThreads) moePlanKernel(const MoePlanArgs a, int tableSmem) {
    __shared__ int scratch[kMoePlanScratchBytes / sizeof(int)];
    extern __shared__ int4 tableWords[];
    unsigned long long t0 = 0;
    if (a.trace && threadIdx.x == 0) t0 = ::ts::cuda::globalTimerNs();
    moeBuildPlan(a, scratch, tableSmem ? reinterpret_cast<MoeExpertPtrs*>(tableWords) : nullptr,
                 a.trace ? a.trace + kTraceInputReady : nullptr);  // words 2, 3, 4: waited, routing loaded, chunks
    if (a.trace) {  // (uniform: a kernel parameter) the phase trace's plan record, once every thread's stores are done
        __syncthreads();
        if (threadIdx.x == 0) {
            a.trace[kTraceSm] = ::ts::cuda::smId();
            a.trace[kTraceStart] = t0;
            a.trace[kTraceEnd] = ::ts::cuda::globalTimerNs();
            a.trace[kTraceMode] = unsigned(kTraceModePlan);
        }
    }
}

size_t align256(size_t v) { return (v + 255) & ~size_t(255); }

}  // namespace

// TS_MOE_DEVICE_ROUTE=0 turns the device-routed path off (A/B: the model then routes through the host); 1 or
// unset: on. Another value is reported once on stderr (an A/B run with a typo would measure the default).
bool exl3cuda::moeDeviceRouting() {
    static const bool on = envSwitch("TS_MOE_DEVICE_ROUTE", true);
    return on;
}

bool CudaBackend::moeExpertsFusedDevice(const Buffer& x, int64_t T, int64_t D, int64_t I, const Buffer& idx,
                                        const Buffer& weight, int64_t topk, const WeightView* gate,
                                        const WeightView* up, const WeightView* down, int64_t E, float limit,
                                        const Buffer& y) {
    if (gate && up && down && E > 0 && !gate[0].packed)  // dense experts: cuda_moe_dense.cu
        return denseExpertsRouted(x, T, D, I, idx, weight, topk, gate, up, down, E, limit, y);
    if (!exl3cuda::moeDeviceRouting() || !gate || !up || !down || E <= 0 || topk <= 0 || T < 1 || T > kGroupRows ||
        T * topk > kPlanThreads || D <= 0 || I <= 0 || E > (int64_t(1) << 24) || moeLaunches() != 1)
        return false;
    TS_CHECK(x.size() >= size_t(T * D) * 4 && y.size() >= size_t(T * D) * 4, "moeExpertsFusedDevice: buffer too small");
    TS_CHECK(idx.size() >= size_t(T * topk) * 4 && weight.size() >= size_t(T * topk) * 4,
             "moeExpertsFusedDevice: idx / weight too small");
    TS_CHECK(D < (int64_t(1) << 30) && I < (int64_t(1) << 30), "moeExpertsFusedDevice: too large");

    // The layer's device table of every expert, and whether the layer qualifies (checked once).
    Exl3Cache& cache = exl3Cache();
    Exl3Cache::RoutedLayer& L = cache.routed[gate[0].packed];
    if (!L.checked) {
        OwnWork own(*this);  // the table's upload below belongs to this op, not to the model
        L.checked = true;
        L.ok = false;
        std::vector<MoeExpertPtrs> host(static_cast<size_t>(E));
        bool ok = true;
        for (int64_t e = 0; e < E && ok; ++e) {
            const WeightView* vs[3] = {&gate[e], &up[e], &down[e]};
            const int64_t outs[3] = {I, I, D}, ins[3] = {D, D, I};
            MoeProjPtrs* dst[3] = {&host[size_t(e)].gate, &host[size_t(e)].up, &host[size_t(e)].down};
            for (int p = 0; p < 3 && ok; ++p) {
                const WeightView& w = *vs[p];
                const TrellisView* t = moePackedView(w, outs[p], ins[p]);
                if (!t) {
                    ok = false;
                    break;
                }
                const int kk = int(t->k), nn = int(t->n);
                if (e == 0 && p != 1) {
                    int* sig = p == 0 ? L.sigGU : L.sigD;
                    sig[0] = t->bits;
                    sig[1] = t->codebook;
                    sig[2] = kk;
                    sig[3] = nn;
                }
                const int* sig = p < 2 ? L.sigGU : L.sigD;
                if (sig[0] != t->bits || sig[1] != t->codebook || sig[2] != kk || sig[3] != nn) ok = false;
                if (!ok) break;
                *dst[p] = moeProjPtrs(deviceTrellis(*w.packed));
            }
        }
        // One kernel instance serves both phases: the same K and codebook.
        ok = ok && L.sigGU[0] == L.sigD[0] && L.sigGU[1] == L.sigD[1];
        if (ok) {
            L.table = upload(host.data(), host.size() * sizeof(MoeExpertPtrs));
            L.ok = true;
        }
    }
    if (!L.ok) return false;
    // Captured in a graph region (the layer's table above is made by the region's first, eager run).
    GraphOp op(*this, true, "moeExpertsFusedDevice", {gk(x.bytes()), gk(T), gk(D), gk(I), gk(idx.bytes()), gk(weight.bytes()),
                                                     gk(topk), gk(gate[0].packed), gk(E), gf(limit), gk(y.bytes())});
    if (op.skip()) return true;
    const int bits = L.sigGU[0], cb = L.sigGU[1];
    const int64_t kG = L.sigGU[2], nG = L.sigGU[3], kD = L.sigD[2], nD = L.sigD[3];

    // Planned for the most pairs this step can have (see the header). Jobs hold ≤ R = min(T, moeJobRows()) rows
    // (8 by default: at 9–16 tokens a job of T rows would put every unit into the 16-row form, though an expert
    // rarely serves more than a few of the tokens); an expert with more rows than that — more than 8 of the
    // tokens, or a token naming it twice — gets more jobs. With c_e rows per used expert,
    // Σ⌈c_e/R⌉ ≤ Σ(c_e/R + 1) ≤ ⌈P0/R⌉ + used ≤ ⌈P0/R⌉ + min(E, P0), and ≤ P0 (at R = T: topk + used, as before).
    const int P0 = int(T * topk);
    const int R = int(std::min<int64_t>(T, moeJobRows()));
    const int maxPairs = int(std::min<int64_t>(int64_t(P0), (P0 + R - 1) / R + std::min<int64_t>(E, P0)));
    const int numSMs = props().multiProcessorCount;
    const int tilesKG = int(kG / 16), NBG = int(nG / 128), tilesKD = int(kD / 16), NBD = int(nD / 128);
    const MoePlans plans = planMoePhases(bits, cb, bits, cb, 1, tilesKG, NBG, tilesKD, NBD, maxPairs, P0, R, numSMs,
                                         smemLimit(size_t(props().sharedMemPerBlockOptin)));
    const Plan& planGU = plans.gu;
    const Plan& planD = plans.d;

    const size_t offJobsD = align256(size_t(2 * maxPairs) * sizeof(Job));
    const size_t offRows = offJobsD + align256(size_t(maxPairs) * sizeof(Job));
    const size_t offCombOff = offRows + align256(size_t(P0) * 4);
    const size_t offComb = offCombOff + align256((size_t(T) + 1) * 4);
    const size_t offLive = offComb + align256(size_t(P0) * sizeof(CombineEntry));
    uint8_t* args = zeroedScratch(cache.args, offLive + 4).bytes();
    float* act = zeroedScratch(cache.act, size_t(P0) * size_t(I) * 4).f32();
    float* eout = zeroedScratch(cache.expertOut, size_t(P0) * size_t(D) * 4).f32();
    const size_t partGU = planGU.partials ? size_t(2 * P0) * planGU.S * size_t(nG) : 0;
    const size_t partD = planD.partials ? size_t(P0) * planD.S * size_t(nD) : 0;
    float* part = zeroedScratch(cache.part, std::max<size_t>(1, partGU + partD) * 4).f32();
    const size_t cntGU = size_t(maxPairs) * NBG, cntD = size_t(maxPairs) * NBD + NBD;
    int* counters = zeroedScratch(cache.counters, (cntGU + cntD + size_t(moeSyncInts(maxPairs, NBD))) * 4).i32();

    MoePlanArgs pa;
    pa.idx = idx.i32();
    pa.weight = weight.f32();
    pa.table = static_cast<const MoeExpertPtrs*>(static_cast<const void*>(L.table.bytes()));
    pa.T = int(T);
    pa.topk = int(topk);
    pa.E = int(E);
    pa.P0 = P0;
    pa.chunk = R;
    pa.x = x.f32();
    pa.D = int(D);
    pa.I = int(I);
    pa.act = act;
    pa.eout = eout;
    pa.jobsGU = reinterpret_cast<Job*>(args);
    pa.jobsD = reinterpret_cast<Job*>(args + offJobsD);
    pa.rows = reinterpret_cast<int32_t*>(args + offRows);
    pa.combOffsets = reinterpret_cast<int32_t*>(args + offCombOff);
    pa.comb = reinterpret_cast<CombineEntry*>(args + offComb);
    pa.live = reinterpret_cast<int*>(args + offLive);
    pa.trace = traceWordsOf(planGU.blocks + planD.blocks);  // the record after the MoE launch's units (fusedCombine: no combine units)
    // With programmatic dependent launch it starts while the previous kernel ends and copies the expert table
    // meanwhile (moeBuildPlan); TS_EXL3_TUNE bit 2048: a plain launch reading the table from global memory (A/B).
    const bool plain = tunePlanPlain();
    const size_t tableSmem = plain ? 0 : moePlanTableSmem(int(E));
    ::ts::cuda::launchPdl(moePlanKernel, dim3(1), dim3(kPlanThreads), tableSmem, stream(), !plain && !tunePdlOff(), pa,
                          int(tableSmem > 0));

    MoeParams mp;
    Params& pg = mp.ph[0];
    pg = moePhaseParams(pa.jobsGU, 2 * maxPairs, maxPairs, kG, nG, D, I, planGU, kModeSwiglu, part, counters);
    pg.limit = limit;
    pg.liveGroups = pa.live;
    Params& pd = mp.ph[1];
    pd = moePhaseParams(pa.jobsD, maxPairs, maxPairs, kD, nD, I, D, planD, kModeDown, part + partGU, counters + cntGU);
    pd.liveGroups = pa.live;
    pd.fusedCombine = 1;  // T·topk ≤ 256
    pd.combOffsets = pa.combOffsets;
    pd.combEntries = pa.comb;
    pd.yFinal = y.f32();
    pd.Tf = int(T);
    mp.sync = counters + cntGU + cntD;
    launchMoe(mp, planGU, planD, bits, cb, stream());
    noteMoeLaunches(1);
    return true;
}

}  // namespace ts
