// The EXL3 prefill path's host-side work split (kernels/cuda/cuda_exl3_prefill.cu; no GPU needed): the MoE's
// expert groups cover every expert once, in ascending order, within the row cap unless one expert alone exceeds it;
// the combine lists give each token exactly its routed choices of the group's experts, in ascending expert order,
// with their weights and the rows that hold their outputs — the order the CPU loop adds them in. And the path's
// switches: TS_EXL3_PREFILL=0 (set here) turns it off, exl3SetPrefillPath overrides and restores it, the scratch
// budget override reports the previous value, and the cuBLAS route's row threshold takes 0..4,097 (4,097: never).
#include <QtTest>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <vector>

#include "cuda/cuda_exl3.cuh"
#include "exl3_tune.h"

using namespace ts;
using namespace ts::exl3cuda;

namespace {

// A routing of T tokens × topk distinct experts drawn from [0, pool) of E, and moeExpertsFused's grouping of it:
// first [E + 1], byExpert (flat choices, expert-major, token-major within an expert).
struct Routing {
    std::vector<int32_t> idx, first, byExpert;
    std::vector<float> weight;
};
Routing route(int64_t T, int64_t topk, int64_t E, int64_t pool, std::mt19937& rng) {
    Routing r;
    std::vector<int32_t> cand(static_cast<size_t>(pool));
    std::uniform_real_distribution<float> w(0.0f, 1.0f);
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t e = 0; e < pool; ++e) cand[size_t(e)] = int32_t(e);
        std::shuffle(cand.begin(), cand.end(), rng);
        for (int64_t j = 0; j < topk; ++j) {
            r.idx.push_back(cand[size_t(j)]);
            r.weight.push_back(w(rng));
        }
    }
    r.first.assign(size_t(E) + 1, 0);
    for (const int32_t e : r.idx) ++r.first[size_t(e) + 1];
    for (int64_t e = 0; e < E; ++e) r.first[size_t(e) + 1] += r.first[size_t(e)];
    std::vector<int32_t> fill(r.first.begin(), r.first.end() - 1);
    r.byExpert.resize(r.idx.size());
    for (size_t i = 0; i < r.idx.size(); ++i) r.byExpert[size_t(fill[size_t(r.idx[i])]++)] = int32_t(i);
    return r;
}

}  // namespace

class TestExl3PrefillPlan : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() {
        ::setenv("TS_EXL3_PREFILL", "0", 1);
        ::unsetenv("TS_EXL3_PF_CUBLAS_ROWS");
    }

    void groupsCoverEveryExpertInOrder() {
        std::mt19937 rng(5);
        const int64_t E = 40;
        for (const int64_t cap : {int64_t(1), int64_t(7), int64_t(64), int64_t(100000)}) {
            const Routing r = route(50, 4, E, 24, rng);  // experts 24..39 get no rows
            const auto groups = pfExpertGroups(r.first.data(), E, cap);
            QVERIFY(!groups.empty());
            QCOMPARE(groups.front().first, int64_t(0));
            QCOMPARE(groups.back().second, E);
            for (size_t g = 0; g < groups.size(); ++g) {
                QVERIFY(groups[g].first < groups[g].second);  // never empty
                if (g) QCOMPARE(groups[g].first, groups[g - 1].second);
                const int64_t rows = r.first[size_t(groups[g].second)] - r.first[size_t(groups[g].first)];
                // Over the cap only as one expert alone: its rows are all the group's (experts before it have none).
                const int64_t last = r.first[size_t(groups[g].second)] - r.first[size_t(groups[g].second) - 1];
                if (rows > cap) QCOMPARE(rows, last);
                // Greedy: the next expert would not have fitted.
                if (g + 1 < groups.size() && rows > 0) {
                    const int64_t next = r.first[size_t(groups[g].second) + 1] - r.first[size_t(groups[g].second)];
                    QVERIFY(rows + next > cap);
                }
            }
        }
        QVERIFY(pfExpertGroups(nullptr, 0, 10).empty());
    }

    void combineListsFollowTheCpuOrder() {
        std::mt19937 rng(9);
        const int64_t T = 37, topk = 8, E = 64;
        const Routing r = route(T, topk, E, 20, rng);
        const auto groups = pfExpertGroups(r.first.data(), E, 30);
        QVERIFY(groups.size() > 3);
        std::vector<std::vector<int32_t>> seen(static_cast<size_t>(T));  // each token's experts, over the groups in order
        for (const auto& [ea, eb] : groups) {
            const int64_t base = r.first[size_t(ea)], end = r.first[size_t(eb)];
            const PfCombine c = pfCombineLists(r.byExpert.data(), base, end, T, topk, r.weight.data());
            QCOMPARE(c.off.size(), size_t(T) + 1);
            QCOMPARE(int64_t(c.off.back()), end - base);
            for (int64_t t = 0; t < T; ++t)
                for (int32_t k = c.off[size_t(t)]; k < c.off[size_t(t) + 1]; ++k) {
                    const int32_t choice = r.byExpert[size_t(base + c.src[size_t(k)])];
                    QCOMPARE(int64_t(choice / topk), t);  // the row holds one of t's own choices
                    QCOMPARE(c.w[size_t(k)], r.weight[size_t(choice)]);
                    const int32_t e = r.idx[size_t(choice)];
                    QVERIFY(e >= ea && e < eb);
                    seen[size_t(t)].push_back(e);
                }
        }
        for (int64_t t = 0; t < T; ++t) {
            std::vector<int32_t> want(r.idx.begin() + t * topk, r.idx.begin() + (t + 1) * topk);
            std::sort(want.begin(), want.end());
            QCOMPARE(seen[size_t(t)], want);  // every choice once, ascending expert
        }
    }

    // The GEMM's split-K choice: one wave of blocks at most, a power of two dividing the steps, ≥ 8 steps a split.
    void splitsFillOneWave() {
        // 4096 → 12288 on an H200 (96 column tiles, 3 blocks × 132 SMs): 32–64 rows (96 tiles) take 4 splits, 128
        // rows (192 tiles) 2, 256 rows (384 tiles) none; on a GB10 (2 × 48 slots) the 96 tiles take none.
        QCOMPARE(pfSplits(96, 396, 128, 8), 4);
        QCOMPARE(pfSplits(192, 396, 128, 8), 2);
        QCOMPARE(pfSplits(384, 396, 128, 8), 1);
        QCOMPARE(pfSplits(96, 96, 128, 8), 1);
        QCOMPARE(pfSplits(16, 396, 128, 8), 8);   // the cap
        QCOMPARE(pfSplits(16, 396, 128, 16), 16);
        QCOMPARE(pfSplits(16, 396, 32, 16), 4);   // k = 1024: 32 steps, at least 8 a split
        QCOMPARE(pfSplits(16, 396, 12, 16), 1);   // 12 steps: no power of two leaves 8
        QCOMPARE(pfSplits(16, 396, 128, 1), 1);   // TS_EXL3_PF_SPLIT=1
        for (int64_t tiles : {1, 7, 50, 200, 1000})
            for (int64_t steps : {8, 16, 24, 64, 96, 128})
                for (int cap : {1, 2, 8, 16}) {
                    const int s = pfSplits(tiles, 396, steps, cap);
                    QVERIFY(s >= 1 && s <= cap && (s & (s - 1)) == 0 && steps % s == 0);
                    QVERIFY(s == 1 || (tiles * s <= 396 && steps / s >= kPfMinSplitSteps));
                }
        QCOMPARE(exl3SetPrefillMaxSplit(2), -1);
        QCOMPARE(prefillMaxSplit(), 2);
        QCOMPARE(exl3SetPrefillMaxSplit(0), 2);  // out of range: back to the environment's
        QCOMPARE(prefillMaxSplit(), std::getenv("TS_EXL3_PF_SPLIT") ? prefillMaxSplit() : 8);
    }

    void switches() {
        QCOMPARE(prefillPath(), false);           // TS_EXL3_PREFILL=0
        QCOMPARE(exl3SetPrefillPath(1), -1);
        QCOMPARE(exl3PrefillPath(), true);
        QCOMPARE(exl3SetPrefillPath(7), 1);       // out of range: back to the environment's
        QCOMPARE(exl3PrefillPath(), false);
        // The cuBLAS route's rows: 0..4096, 4097 = never; out of range restores the environment's (unset here).
        QCOMPARE(prefillCublasRows(), kPfMinRowsCublas);
        QCOMPARE(exl3SetPrefillCublasRows(300), -1);
        QCOMPARE(exl3PrefillCublasRows(), 300);
        QCOMPARE(exl3SetPrefillCublasRows(4097), 300);
        QCOMPARE(prefillCublasRows(), 4097);
        QCOMPARE(exl3SetPrefillCublasRows(5000), 4097);
        QCOMPARE(prefillCublasRows(), kPfMinRowsCublas);
        QCOMPARE(exl3SetPrefillBudgetMiB(8), 0);
        QCOMPARE(exl3SetPrefillBudgetMiB(0), 8);  // 0 restores the default
        QVERIFY(pfSupported(4, 2) && pfSupported(2, 0) && pfSupported(6, 1));
        QVERIFY(!pfSupported(1, 2) && !pfSupported(7, 0) && !pfSupported(4, 3));
    }
};

QTEST_APPLESS_MAIN(TestExl3PrefillPlan)
#include "test_exl3_prefill_plan.moc"
