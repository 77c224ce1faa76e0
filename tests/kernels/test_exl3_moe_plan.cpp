// The device-routed fused MoE's work list on the host (kernels/cuda/cuda_exl3_moe_plan.cuh; no GPU needed): the
// plan's steps — every pair's expert, then each expert's job count at its first pair, then the totals and every
// pair's writes, in that order as the block's barriers order them on the GPU, the last step's pairs in a shuffled
// order as threads run there — against a counting-sort reference written here: the packed rows (experts ascending,
// token-major within), the jobs (⌈count/R⌉ per expert, ascending, ≤ R rows each, gate and up paired), the
// combine lists (each token's valid choices by expert, then choice) and the live pair count. Routings are random
// over decode sizes (T ≤ 16, top-k ≤ 8, T·top-k ≤ 256), with ids outside [0, E) and a token naming one expert
// twice, which no router does but the op's contract allows. Outputs are poisoned first, so a table entry the
// plan misses fails.
#include <QtTest>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/cuda_exl3_moe_plan.cuh"

using namespace ts;
using namespace ts::exl3cuda;

namespace {

struct Routing {
    int T = 1, topk = 1, E = 1, R = 1;
    std::vector<int32_t> idx;
    std::vector<float> weight;
};

// What the host version (cuda_exl3_moe.cu) builds, by a counting sort.
struct Reference {
    std::vector<int> rowOf;          // [P0] packed row of pair i, −1 when invalid
    std::vector<int32_t> rows;       // [valid] token of each packed row
    struct Pair {
        int expert, r0, m;
    };
    std::vector<Pair> pairs;         // ascending experts, then chunks
    std::vector<int32_t> combOffsets;  // [T + 1]
    std::vector<int> combPair;       // [valid] the pair index i of each combine slot
};

Reference reference(const Routing& r) {
    const int P0 = r.T * r.topk;
    Reference ref;
    ref.rowOf.assign(size_t(P0), -1);
    std::vector<std::vector<int>> byExpert(size_t(r.E));
    for (int i = 0; i < P0; ++i)
        if (r.idx[size_t(i)] >= 0 && r.idx[size_t(i)] < r.E) byExpert[size_t(r.idx[size_t(i)])].push_back(i);
    int row = 0;
    for (int e = 0; e < r.E; ++e) {
        const std::vector<int>& list = byExpert[size_t(e)];
        for (size_t c = 0; c < list.size(); c += size_t(r.R))
            ref.pairs.push_back({e, row + int(c), int(std::min(list.size() - c, size_t(r.R)))});
        for (int i : list) {
            ref.rowOf[size_t(i)] = row++;
            ref.rows.push_back(i / r.topk);
        }
    }
    ref.combOffsets.push_back(0);
    for (int t = 0; t < r.T; ++t) {
        std::vector<int> mine;
        for (int k = 0; k < r.topk; ++k)
            if (ref.rowOf[size_t(t * r.topk + k)] >= 0) mine.push_back(t * r.topk + k);
        std::stable_sort(mine.begin(), mine.end(),
                         [&](int a, int b) { return r.idx[size_t(a)] < r.idx[size_t(b)]; });  // then choice order
        ref.combPair.insert(ref.combPair.end(), mine.begin(), mine.end());
        ref.combOffsets.push_back(int32_t(ref.combPair.size()));
    }
    return ref;
}

Routing randomRouting(std::mt19937_64& rng) {
    static const int kT[] = {1, 2, 3, 4, 5, 8, 12, 16};
    static const int kTopk[] = {1, 2, 4, 6, 8};
    static const int kE[] = {3, 6, 12, 24, 288};
    Routing r;
    r.T = kT[rng() % 8];
    r.topk = kTopk[rng() % 5];
    r.E = kE[rng() % 5];
    const int rowsPerJob = int(rng() % 3 == 0 ? 1 + rng() % 16 : 8);  // moeJobRows (8 unless overridden)
    r.R = std::min(r.T, rowsPerJob);
    const bool odd = rng() % 4 == 0;
    for (int t = 0; t < r.T; ++t) {
        // Distinct experts per token, as a router picks them (when E allows), then the odd cases.
        std::vector<int32_t> pool(size_t(r.E));
        std::iota(pool.begin(), pool.end(), 0);
        std::shuffle(pool.begin(), pool.end(), rng);
        for (int k = 0; k < r.topk; ++k) {
            int32_t id = pool[size_t(k % r.E)];
            if (odd) {
                const int roll = int(rng() % 10);
                if (roll == 0) id = -1;
                else if (roll == 1) id = int32_t(r.E + int(rng() % 4));
                else if (roll == 2 && k > 0) id = r.idx.back();  // the same expert twice
            }
            r.idx.push_back(id);
            r.weight.push_back(float(rng() % 1000) / 1000.0f);
        }
    }
    return r;
}

}  // namespace

class TestExl3MoePlan : public QObject {
    Q_OBJECT

private slots:
    void planMatchesTheCountingSort() {
        std::mt19937_64 rng(20261205);
        const int D = 64, I = 96;
        std::vector<float> x(size_t(16 * D)), act(size_t(kMoePlanMaxPairs) * I), eout(size_t(kMoePlanMaxPairs) * D);
        int cases = 0, oddIds = 0, multiJob = 0;
        for (int rep = 0; rep < 400; ++rep) {
            const Routing r = randomRouting(rng);
            const int P0 = r.T * r.topk;
            QVERIFY(P0 <= kMoePlanMaxPairs);
            // The experts' pointers: distinct fake addresses per (expert, projection, field).
            std::vector<MoeExpertPtrs> table(size_t(r.E));
            std::vector<float> arena(size_t(r.E) * 12 + 1);
            for (int e = 0; e < r.E; ++e) {
                MoeProjPtrs* ps[3] = {&table[size_t(e)].gate, &table[size_t(e)].up, &table[size_t(e)].down};
                for (int p = 0; p < 3; ++p) {
                    const float* base = arena.data() + (e * 3 + p) * 4;
                    *ps[p] = MoeProjPtrs{reinterpret_cast<const uint16_t*>(base), base + 1, base + 2,
                                         p == 1 ? nullptr : base + 3};
                }
            }
            const int maxPairs = P0;  // the host plans for at most min(P0, ⌈P0/R⌉ + used) ≤ P0
            Job poisonJob;
            poisonJob.m = -7;
            std::vector<Job> jobsGU(size_t(2 * maxPairs), poisonJob), jobsD(size_t(maxPairs), poisonJob);
            std::vector<int32_t> rows(size_t(P0), -5), combOffsets(size_t(r.T) + 1, -5);
            CombineEntry poisonComb;
            poisonComb.weight = -99.0f;
            std::vector<CombineEntry> comb(size_t(P0), poisonComb);
            int live = -5;

            MoePlanArgs a;
            a.idx = r.idx.data();
            a.weight = r.weight.data();
            a.table = table.data();
            a.T = r.T;
            a.topk = r.topk;
            a.E = r.E;
            a.P0 = P0;
            a.chunk = r.R;
            a.x = x.data();
            a.D = D;
            a.I = I;
            a.act = act.data();
            a.eout = eout.data();
            a.jobsGU = jobsGU.data();
            a.jobsD = jobsD.data();
            a.rows = rows.data();
            a.combOffsets = combOffsets.data();
            a.comb = comb.data();
            a.live = &live;

            // The block's steps in barrier order; the last one's pairs in any order.
            std::vector<int> se(static_cast<size_t>(P0)), chunks(static_cast<size_t>(P0));
            for (int i = 0; i < P0; ++i) se[size_t(i)] = moePlanExpert(a, i);
            for (int i = 0; i < P0; ++i) chunks[size_t(i)] = moePlanChunks(a, se.data(), i);
            moePlanTotals(a, se.data(), chunks.data());
            std::vector<int> order(static_cast<size_t>(P0));
            std::iota(order.begin(), order.end(), 0);
            std::shuffle(order.begin(), order.end(), rng);
            for (int i : order) moePlanPair(a, se.data(), chunks.data(), i, r.weight[size_t(i)], a.table);

            const Reference ref = reference(r);
            const int valid = int(ref.rows.size());
            QCOMPARE(live, int(ref.pairs.size()));
            for (int i = 0; i < valid; ++i) QCOMPARE(rows[size_t(i)], ref.rows[size_t(i)]);
            for (int t = 0; t <= r.T; ++t) QCOMPARE(combOffsets[size_t(t)], ref.combOffsets[size_t(t)]);
            for (int s = 0; s < valid; ++s) {
                const int i = ref.combPair[size_t(s)];
                QCOMPARE(comb[size_t(s)].src, static_cast<const float*>(eout.data() + ref.rowOf[size_t(i)] * D));
                QCOMPARE(comb[size_t(s)].weight, r.weight[size_t(i)]);
            }
            for (size_t p = 0; p < ref.pairs.size(); ++p) {
                const Reference::Pair& rp = ref.pairs[p];
                const MoeExpertPtrs& ex = table[size_t(rp.expert)];
                const Job& g = jobsGU[2 * p];
                const Job& u = jobsGU[2 * p + 1];
                const Job& d = jobsD[p];
                QCOMPARE(g.m, rp.m);
                QCOMPARE(u.m, rp.m);
                QCOMPARE(d.m, rp.m);
                QCOMPARE(g.trellis, ex.gate.trellis);
                QCOMPARE(g.suh, ex.gate.suh);
                QCOMPARE(g.svh, ex.gate.svh);
                QCOMPARE(g.bias, ex.gate.bias);
                QCOMPARE(u.trellis, ex.up.trellis);
                QCOMPARE(u.suh, ex.up.suh);
                QCOMPARE(u.bias, ex.up.bias);
                QCOMPARE(d.trellis, ex.down.trellis);
                QCOMPARE(d.svh, ex.down.svh);
                // Gate and up read the layer input through the packed rows' tokens; down reads the swiglu rows.
                QCOMPARE(g.x, static_cast<const float*>(x.data()));
                QCOMPARE(u.x, static_cast<const float*>(x.data()));
                QCOMPARE(g.rows, static_cast<const int32_t*>(rows.data() + rp.r0));
                QCOMPARE(g.ldx, D);
                QCOMPARE(g.y, act.data() + int64_t(rp.r0) * I);
                QCOMPARE(u.y, g.y);
                QCOMPARE(g.ldy, I);
                QCOMPARE(g.partRow, rp.r0);
                QCOMPARE(u.partRow, P0 + rp.r0);
                QCOMPARE(d.x, static_cast<const float*>(act.data() + int64_t(rp.r0) * I));
                QVERIFY(d.rows == nullptr);
                QCOMPARE(d.ldx, I);
                QCOMPARE(d.y, eout.data() + int64_t(rp.r0) * D);
                QCOMPARE(d.ldy, D);
                QCOMPARE(d.partRow, rp.r0);
            }
            // Nothing beyond the live pairs is written (the units of those pairs exit at once).
            for (size_t p = ref.pairs.size(); p < size_t(maxPairs); ++p) {
                QCOMPARE(jobsD[p].m, -7);
                QCOMPARE(jobsGU[2 * p].m, -7);
            }
            ++cases;
            bool repeated = false;  // a token naming one expert twice
            for (int t = 0; t < r.T; ++t)
                for (int k = 1; k < r.topk; ++k)
                    repeated = repeated || std::count(r.idx.begin() + t * r.topk, r.idx.begin() + t * r.topk + k,
                                                      r.idx[size_t(t * r.topk + k)]) > 0;
            oddIds += valid < P0 || repeated;
            multiJob += std::any_of(ref.pairs.begin() + 1, ref.pairs.end(),
                                    [&](const Reference::Pair& q) { return q.expert == (&q - 1)->expert; });
        }
        // The random routings reached the cases that matter: invalid or repeated ids, experts split into jobs.
        QVERIFY(cases == 400);
        QVERIFY2(oddIds > 20, qPrintable(QString::number(oddIds)));
        QVERIFY2(multiJob > 20, qPrintable(QString::number(multiJob)));
    }
};

QTEST_APPLESS_MAIN(TestExl3MoePlan)
#include "test_exl3_moe_plan.moc"
