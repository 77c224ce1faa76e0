// The fused EXL3 MoE (CudaBackend::moeExpertsFused): all routed experts of one layer in ONE launch of the
// EXL3 MoE kernel (exl3MoeKernel: cuda_exl3_kernels.cuh), for every (token, choice) pair of the step. Its work is
// that of two phases, each planned as a grid of units of the EXL3 kernel:
//
//   phase 1 (mode swiglu): for each selected expert and its tokens (≤ 16 rows per job, or 64 when the
//            step has many tokens per expert; more tokens make more jobs), the gate and up GEMVs D → I as two jobs of one pair; the unit that completes a
//            128-column block of the pair applies both output transforms and swiglu(limit) and writes the
//            activation rows [rows, I].
//   phase 2 (mode down): the down GEMV I → D of each expert on its activation rows → the expert's output
//            rows; then y[t] += Σ weight · out over t's choices in ascending expert order (ties: choice
//            order), the CPU loop's order, so the sum is deterministic and matches its rounding. For a
//            small step (T·topk ≤ 256) the last unit of each column block does this combine; otherwise
//            combine units (8 token rows × 128 columns each) do it.
//
// The launch has one block per unit (the two launches' grids together); each block takes its unit in
// ticket order — all of phase 1, then phase 2, then the combine units — from one atomic counter. A down
// unit issues its trellis loads, then waits until every column block of its expert's activation rows is
// written (a per-pair count, acquire/release); a combine unit waits for its column block's down outputs.
// That cannot deadlock: everything a unit waits for has a lower ticket, held by a block that is running
// (exl3MoeKernel in cuda_exl3_kernels.cuh has the argument). The last block to retire zeroes the ticket counters.
// Each unit is the two-launch version's unit, with the same plan and summation orders, so the result is
// bit-identical to it.
//
// The two-launch version (launch 1: phase 1; launch 2: phase 2, plus a third, tiny launch for the combine
// of large steps) remains: for A/B (TS_EXL3_TUNE bit 4, or exl3MoeSetLaunches in kernels/exl3_tune.h) and
// when gate/up and down differ in K or codebook (one kernel instance serves both phases).
//
// No float atomics anywhere: split-K partials and the combine are summed in a fixed order by whichever
// unit completes last (arrival counters). The host builds the step's work list: experts used (ascending),
// their token rows (token-major, choice-minor, as the CPU gathers them), jobs with the experts' device
// pointers, and the combine lists; it goes to the device in one copy, on a stream of its own into one of four
// device slots, so that it is not a step of the compute stream between the previous kernel and this launch
// (TS_EXL3_TUNE bit 512: in the stream, as before). The experts' packed weights are uploaded once
// (deviceTrellis) and a per-layer table of their device copies, keyed by the layer's first gate linear, saves
// the lookups on later steps.
//
// Returns false (the model then runs its per-expert loop) when a selected expert is not EXL3-packed, when
// shapes disagree with D and I, or when the selected gate/up (or down) projections do not share one K,
// codebook and padded shape (each phase is compiled for one K and codebook).
//
// Test:      twinspark-cli selftest --backend cuda --filter exl3/moe   (engine/selftest/cases_exl3.cpp;
//            "moe 1 vs 2 launches" checks the two versions bit for bit)
// Benchmark: twinspark-cli bench-device --what exl3   (a GLM-5.3-Flash routed layer: 8 of 288 experts,
//            4096 → 2048 → 4096 at 4 bpw, batch 1 and 4, one launch and two)
#include <algorithm>
#include <cstring>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_exl3.cuh"
#include "cuda/cuda_exl3_moe_plan.cuh"

namespace ts {

namespace {

// Shape/format signature of one projection: what one launch is compiled and planned for.
struct ProjSig {
    int bits = 0, codebook = 0;
    int64_t k = 0, n = 0;
    bool operator==(const ProjSig& o) const {
        return bits == o.bits && codebook == o.codebook && k == o.k && n == o.n;
    }
};

size_t align256(size_t v) { return (v + 255) & ~size_t(255); }

}  // namespace

bool CudaBackend::moeExpertsFused(const Buffer& x, int64_t T, int64_t D, int64_t I, const int32_t* hostIdx,
                                  const float* hostWeight, int64_t topk, const WeightView* gate, const WeightView* up,
                                  const WeightView* down, int64_t E, float limit, const Buffer& y) {
    GraphOp op(*this, false, "moeExpertsFused", {gk(T), gk(E)});
    using namespace exl3cuda;
    if (!gate || !up || !down || E <= 0 || topk <= 0 || T < 0 || D <= 0 || I <= 0) return false;
    if (!gate[0].packed) return false;  // dense experts: the model's loop (dense linear kernels)
    if (T == 0) return true;
    TS_CHECK(x.size() >= size_t(T * D) * 4 && y.size() >= size_t(T * D) * 4, "moeExpertsFused: buffer too small");
    TS_CHECK(T * topk < (int64_t(1) << 28) && D < (int64_t(1) << 30) && I < (int64_t(1) << 30),
             "moeExpertsFused: too large");

    // Choices per expert, token-major then choice-minor (the order the CPU loop gathers rows in).
    const int64_t P0 = T * topk;
    std::vector<int32_t> count(size_t(E) + 1, 0);
    for (int64_t i = 0; i < P0; ++i) {
        const int32_t e = hostIdx[i];
        if (e >= 0 && e < E) ++count[size_t(e)];
    }
    std::vector<int32_t> first(size_t(E) + 1, 0);
    for (int64_t e = 0; e < E; ++e) first[size_t(e) + 1] = first[size_t(e)] + count[size_t(e)];
    const int32_t nChoices = first[size_t(E)];
    if (nChoices == 0) return true;  // nothing routed: y unchanged, as the loop leaves it
    std::vector<int32_t> byExpert(static_cast<size_t>(nChoices));  // flat (t·topk + k) indices
    {
        std::vector<int32_t> fill(first.begin(), first.end() - 1);
        for (int64_t i = 0; i < P0; ++i) {
            const int32_t e = hostIdx[i];
            if (e >= 0 && e < E) byExpert[size_t(fill[size_t(e)]++)] = int32_t(i);
        }
    }

    // Eligibility: every used expert packed with the right shapes, one signature per projection kind.
    ProjSig sigGU, sigD;
    bool haveSig = false;
    for (int64_t e = 0; e < E; ++e) {
        if (!count[size_t(e)]) continue;
        const TrellisView* tg = moePackedView(gate[e], I, D);
        const TrellisView* tu = moePackedView(up[e], I, D);
        const TrellisView* td = moePackedView(down[e], D, I);
        if (!tg || !tu || !td) return false;
        const ProjSig g{tg->bits, tg->codebook, tg->k, tg->n}, u{tu->bits, tu->codebook, tu->k, tu->n},
            d{td->bits, td->codebook, td->k, td->n};
        if (!(g == u)) return false;
        if (!haveSig) {
            sigGU = g;
            sigD = d;
            haveSig = true;
        } else if (!(g == sigGU) || !(d == sigD)) {
            return false;
        }
    }

    // The layer's table of device copies (uploaded on first use of each expert).
    Exl3Cache& cache = exl3Cache();
    std::vector<MoeExpertPtrs>& table = cache.layers[gate[0].packed];
    if (table.size() != size_t(E)) table.assign(size_t(E), MoeExpertPtrs{});
    for (int64_t e = 0; e < E; ++e) {
        if (!count[size_t(e)] || table[size_t(e)].gate.trellis) continue;
        const PackedLinear* src[3] = {gate[e].packed, up[e].packed, down[e].packed};
        MoeProjPtrs* dst[3] = {&table[size_t(e)].gate, &table[size_t(e)].up, &table[size_t(e)].down};
        for (int q = 0; q < 3; ++q) *dst[q] = moeProjPtrs(deviceTrellis(*src[q]));
    }

    // Pairs: (expert, ≤ chunk of its rows). rowStart indexes the packed row space of the step (act rows,
    // expert-output rows, partial rows); each choice remembers its (pair, row).
    struct Pair {
        int32_t e, rowStart, m;
    };
    std::vector<Pair> pairs;
    std::vector<int32_t> tokRows(static_cast<size_t>(nChoices));  // token of each packed row
    std::vector<int32_t> rowOfChoice(size_t(P0), -1);
    int64_t nUsed = 0;
    for (int64_t e = 0; e < E; ++e) nUsed += count[size_t(e)] ? 1 : 0;
    // Prefill-sized steps (many tokens per expert) take the 64-row jobs: each decoded tile serves 64 rows.
    const size_t lim = smemLimit(size_t(props().sharedMemPerBlockOptin));
    const double perExpert = double(nChoices) / double(nUsed);
    // Many rows per expert (a prefill step): the throughput path of cuda_exl3_prefill.cu, when it takes them.
    if (perExpert >= double(prefillMoeMinRows()) && exl3PrefillMoe(x, T, D, I, byExpert.data(), first.data(), E, topk, hostWeight,
                                                     gate, up, down, limit, y))
        return true;
    const int MG = std::min(chooseMG(perExpert, sigGU.bits, lim), chooseMG(perExpert, sigD.bits, lim));
    // Decode-sized steps: jobs of ≤ moeJobRows() rows (8: an outlier expert must not put the whole plan into the
    // 16-row form; its weights are read once per job instead); 64-row jobs for prefill-sized ones.
    const int32_t chunk = moeJobRowsFor(MG, perExpert);
    int maxM = 1;
    for (int64_t e = 0; e < E; ++e) {
        for (int32_t r0 = first[size_t(e)]; r0 < first[size_t(e) + 1]; r0 += chunk) {
            const int32_t m = std::min<int32_t>(chunk, first[size_t(e) + 1] - r0);
            pairs.push_back({int32_t(e), r0, m});
            maxM = std::max(maxM, int(m));
        }
    }
    for (int32_t r = 0; r < nChoices; ++r) {
        tokRows[size_t(r)] = byExpert[size_t(r)] / int32_t(topk);
        rowOfChoice[size_t(byExpert[size_t(r)])] = r;
    }
    const int nPairs = int(pairs.size());

    // Combine lists: per token, its choices by ascending expert, then choice order.
    std::vector<int32_t> combOffsets(size_t(T) + 1, 0);
    std::vector<std::pair<int32_t, int32_t>> order;  // (expert, flat choice) of one token
    std::vector<int32_t> combChoice;                  // flat choice per entry
    combChoice.reserve(size_t(nChoices));
    for (int64_t t = 0; t < T; ++t) {
        order.clear();
        for (int64_t k = 0; k < topk; ++k) {
            const int32_t e = hostIdx[t * topk + k];
            if (e >= 0 && e < E) order.emplace_back(e, int32_t(t * topk + k));
        }
        std::sort(order.begin(), order.end());
        for (const auto& o : order) combChoice.push_back(o.second);
        combOffsets[size_t(t) + 1] = int32_t(combChoice.size());
    }

    // Plans (they size the partial buffer) and scratch, before any device pointer is taken.
    const int numSMs = props().multiProcessorCount;
    const int tilesKG = int(sigGU.k / 16), NBG = int(sigGU.n / 128);
    const int tilesKD = int(sigD.k / 16), NBD = int(sigD.n / 128);
    const MoePlans plans = planMoePhases(sigGU.bits, sigGU.codebook, sigD.bits, sigD.codebook, MG, tilesKG, NBG, tilesKD,
                                         NBD, nPairs, nChoices, maxM, numSMs, lim);
    const Plan& planGU = plans.gu;
    const Plan& planD = plans.d;
    const bool fusedCombine = T * topk <= 256;
    // One launch needs one kernel instance for both phases: the same K and codebook (MG is shared).
    const bool oneLaunch = moeLaunches() == 1 && sigGU.bits == sigD.bits && sigGU.codebook == sigD.codebook;

    const size_t offJobsD = align256(size_t(2 * nPairs) * sizeof(Job));
    const size_t offRows = offJobsD + align256(size_t(nPairs) * sizeof(Job));
    const size_t offCombOff = offRows + align256(size_t(nChoices) * 4);
    const size_t offCombEnt = offCombOff + align256((size_t(T) + 1) * 4);
    const size_t argBytes = offCombEnt + size_t(nChoices) * sizeof(CombineEntry);
    // The tables go to the device on a stream of their own, into the slot of the staging ring they are written in
    // (Exl3Cache::moeArgs), unless TS_EXL3_TUNE bit 512 keeps the one buffer copied in the compute stream.
    const bool sideCopy = !tuneTablesInStream();
    const int slot = cache.nextStaging;
    uint8_t* args = zeroedScratch(sideCopy ? cache.moeArgs[slot] : cache.args, argBytes).bytes();
    float* act = zeroedScratch(cache.act, size_t(nChoices) * size_t(I) * 4).f32();
    float* eout = zeroedScratch(cache.expertOut, size_t(nChoices) * size_t(D) * 4).f32();
    // Partials and arrival counters: the two launches reuse one region; in one launch gate/up units of
    // some pairs still run while down units of others start, so each phase has its own (partGU is a
    // multiple of 4 floats: the down region stays 16-byte aligned), plus the ticket counters.
    const size_t partGU = planGU.partials ? size_t(2 * nChoices) * planGU.S * size_t(sigGU.n) : 0;
    const size_t partD = planD.partials ? size_t(nChoices) * planD.S * size_t(sigD.n) : 0;
    const size_t partOffD = oneLaunch ? partGU : 0;
    float* part = zeroedScratch(cache.part, std::max<size_t>(1, oneLaunch ? partGU + partD : std::max(partGU, partD)) * 4).f32();
    const size_t cntGU = size_t(nPairs) * NBG, cntD = size_t(nPairs) * NBD + NBD;
    const size_t cntN = oneLaunch ? cntGU + cntD + size_t(moeSyncInts(nPairs, NBD)) : std::max(cntGU, cntD);
    int* counters = zeroedScratch(cache.counters, cntN * 4).i32();
    int* countersD = oneLaunch ? counters + cntGU : counters;

    // The step's tables in one pinned host image, copied once (asynchronously: the host goes on to the
    // next layer's work while the GPU runs this one).
    uint8_t* host = static_cast<uint8_t*>(cache.stagingBuffer(argBytes));
    Job* jobsGU = reinterpret_cast<Job*>(host);
    Job* jobsD = reinterpret_cast<Job*>(host + offJobsD);
    const int32_t* devRows = reinterpret_cast<const int32_t*>(args + offRows);
    for (int p = 0; p < nPairs; ++p) {
        const Pair& pr = pairs[size_t(p)];
        moePairJobs(table[size_t(pr.e)], x.f32(), devRows, act, eout, int(D), int(I), int(nChoices), pr.rowStart,
                    pr.m, jobsGU + 2 * p, jobsD + p);
    }
    std::memcpy(host + offRows, tokRows.data(), size_t(nChoices) * 4);
    std::memcpy(host + offCombOff, combOffsets.data(), (size_t(T) + 1) * 4);
    auto* ent = reinterpret_cast<CombineEntry*>(host + offCombEnt);
    for (size_t i = 0; i < combChoice.size(); ++i) {
        const int32_t ch = combChoice[i];
        ent[i].src = eout + size_t(rowOfChoice[size_t(ch)]) * size_t(D);
        ent[i].weight = hostWeight[ch];
    }
    if (sideCopy) {
        cudaStream_t cs = cache.tablesStream();
        if (cache.argsReadPending[slot]) TS_CUDA_CHECK(cudaStreamWaitEvent(cs, cache.argsRead[slot], 0));
        TS_CUDA_CHECK(cudaMemcpyAsync(args, host, argBytes, cudaMemcpyHostToDevice, cs));
        cache.stagingCopied(cs);
        TS_CUDA_CHECK(cudaEventRecord(cache.argsCopied[slot], cs));
        TS_CUDA_CHECK(cudaStreamWaitEvent(stream(), cache.argsCopied[slot], 0));
    } else {
        TS_CUDA_CHECK(cudaMemcpyAsync(args, host, argBytes, cudaMemcpyHostToDevice, stream()));
        cache.stagingCopied(stream());
    }

    // Launch 1: gate + up + swiglu.
    Params pg = moePhaseParams(reinterpret_cast<const Job*>(args), 2 * nPairs, nPairs, sigGU.k, sigGU.n, D, I, planGU,
                               kModeSwiglu, part, counters);
    pg.limit = limit;

    // Launch 2: down, then the combine into y.
    Params pd = moePhaseParams(reinterpret_cast<const Job*>(args + offJobsD), nPairs, nPairs, sigD.k, sigD.n, I, D,
                               planD, kModeDown, part + partOffD, countersD);
    pd.fusedCombine = fusedCombine ? 1 : 0;
    pd.combOffsets = reinterpret_cast<const int32_t*>(args + offCombOff);
    pd.combEntries = reinterpret_cast<const CombineEntry*>(args + offCombEnt);
    pd.yFinal = y.f32();
    pd.Tf = int(T);
    if (oneLaunch) {  // both phases and the combine: exl3MoeKernel (cuda_exl3_kernels.cuh)
        MoeParams mp;
        mp.ph[0] = pg;
        mp.ph[1] = pd;
        mp.sync = counters + cntGU + cntD;
        launchMoe(mp, planGU, planD, sigGU.bits, sigGU.codebook, stream());
        noteMoeLaunches(1);
    } else {
        launch(pg, planGU, sigGU.bits, sigGU.codebook, stream());
        launch(pd, planD, sigD.bits, sigD.codebook, stream());
        if (!fusedCombine) launchCombine(pd, stream());
        noteMoeLaunches(fusedCombine ? 2 : 3);
    }
    if (sideCopy) {  // the next copy into this slot waits until these launches have read it
        TS_CUDA_CHECK(cudaEventRecord(cache.argsRead[slot], stream()));
        cache.argsReadPending[slot] = true;
    }
    return true;
}

}  // namespace ts
