// Golden parity: our CPU forward of the glm5_next checkpoints in tests/golden/data against the logits
// transformers 5.17 (Glm5NextForConditionalGeneration, fp32) recorded for them (make_golden.py).
//
// fp32 cache: agreement near fp32 rounding of BF16-weight math, compared on the positions before the
// first indexer top-k tie (glm_dsa.md §10: an exact-zero tie at the selection boundary is resolved
// differently by torch.topk; one flipped tie changes every later position). Tied positions are counted
// and reported separately. fp8 cache (the recipe's fp8_ds_mla latent + fp8 indexer keys): a looser,
// measured bound (docs/ARCHITECTURE.md explains the choice).
#include <QtTest>

#include <algorithm>
#include <cmath>

#include "../common/golden_data.h"
#include "model/glm5_next.h"

using namespace ts;

namespace {

constexpr float kFp32MaxAbs = 1e-4f;  // measured ≈ 2e-6 (see docs/PERFORMANCE.md "Parity")
// fp8 bounds, measured on tiny_a/tiny_b (docs/PERFORMANCE.md "Parity"): up to the first token whose
// discrete decisions differ, max|Δ| ≤ 0.079; over all rows mean|Δ| ≤ 0.071 and top-1 agreement ≥ 85%.
constexpr float kFp8MaxAbs = 0.15f;
constexpr float kFp8MeanAbs = 0.10f;
constexpr double kFp8Top1 = 0.80;

struct Diff {
    float maxAbs = 0;
    double meanAbs = 0;
    int64_t rows = 0;
    int64_t argmaxAgree = 0;    // rows where both pick the same top token
};


Diff compare(const std::vector<float>& ours, const std::vector<float>& ref, int64_t rows, int64_t V) {
    Diff d;
    d.rows = rows;
    double sum = 0;
    for (int64_t r = 0; r < rows; ++r) {
        float rowMax = 0;
        int64_t ao = 0, ar = 0;
        for (int64_t v = 0; v < V; ++v) {
            const size_t i = size_t(r * V + v);
            // NaN counts as an infinite error: std::max would drop it, and a NaN logit (an activation
            // that relied on zeros gets NaN from allocUninit on the CPU) must fail, not vanish.
            const float d0 = std::fabs(ours[i] - ref[i]);
            const float e = std::isnan(d0) ? INFINITY : d0;
            rowMax = std::max(rowMax, e);
            sum += e;
            if (ours[i] > ours[size_t(r * V + ao)]) ao = v;
            if (ref[i] > ref[size_t(r * V + ar)]) ar = v;
        }
        d.maxAbs = std::max(d.maxAbs, rowMax);
        d.argmaxAgree += ao == ar;
    }
    d.meanAbs = rows ? sum / double(rows * V) : 0;
    return d;
}

}  // namespace

class TestGoldenParity : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() {
        QVERIFY2(!test::goldenModelDirs().isEmpty(), "no golden data under tests/golden/data");
    }

    void logits_data() {
        test::addModelAndCacheRows();
    }

    void logits() {
        QFETCH(QString, dir);
        QFETCH(bool, fp8);
        auto backend = makeCpuBackend();
        Glm5NextModel model(dir.toStdString(), *backend);
        SafetensorsFile golden((dir + "/golden.safetensors").toStdString());
        const int64_t V = model.text().vocab_size;
        int prompts = 0;
        int64_t beforeRows = 0;  // fp8: rows compared with the exact run's decisions
        for (int i = 0; golden.find("prompt_" + std::to_string(i)); ++i, ++prompts) {
            const auto ids = test::readIds(golden, "prompt_" + std::to_string(i));
            const auto ref = toF32(golden.get("logits_" + std::to_string(i)));
            const int64_t T = int64_t(ids.size());
            QCOMPARE(int64_t(ref.size()), T * V);

            // Ties are decided on the exact (fp32) scores, so both cache modes compare the same prefix.
            auto s32 = model.newSequence(KvCacheDtype::Fp32);
            ForwardResult r32 = model.forward(ids.data(), T, *s32, false, false, true);
            int64_t upTo = r32.indexer.firstTiedQuery >= 0 ? r32.indexer.firstTiedQuery : T;
            if (!fp8) {
                const Diff d = compare(r32.logits, ref, upTo, V);
                qInfo("fp32 prompt %d: T=%lld compared %lld rows (indexer ties: %lld): max|Δ|=%.3g mean|Δ|=%.3g", i,
                      (long long)T, (long long)upTo, (long long)r32.indexer.tiedQueries, d.maxAbs, d.meanAbs);
                QVERIFY2(upTo >= std::min<int64_t>(T, 8), "a tie this early leaves nothing to compare");
                QVERIFY2(d.maxAbs <= kFp32MaxAbs, qPrintable(QString("fp32 max|Δ| %1").arg(d.maxAbs)));
                continue;
            }
            // fp8: rounding the latent and the indexer keys moves every later hidden state a little, and
            // near-equal scores can then swap a pool in or out of the sparse set or an expert in or out of
            // the routing: a discrete change no tolerance bounds (these random tiny models have many
            // near-ties). So: a tight bound up to the first token whose decisions differ from the exact
            // run's, and over all rows a bound on the mean error and on top-1 agreement.
            auto s8 = model.newSequence(KvCacheDtype::Fp8);
            ForwardResult r8 = model.forward(ids.data(), T, *s8, false, false, true);
            int64_t diverge = T;
            for (int64_t t = 0; t < T; ++t)
                if (r8.indexer.selectionHash[size_t(t)] != r32.indexer.selectionHash[size_t(t)]) {
                    diverge = t;
                    break;
                }
            const Diff before = compare(r8.logits, ref, std::min(upTo, diverge), V);
            const Diff all = compare(r8.logits, ref, upTo, V);
            beforeRows += std::min(upTo, diverge);
            qInfo("fp8  prompt %d: T=%lld decisions diverge at %lld; before: max|Δ|=%.3g mean|Δ|=%.3g; all %lld rows: "
                  "max|Δ|=%.3g mean|Δ|=%.3g, top-1 agree %lld",
                  i, (long long)T, (long long)diverge, before.maxAbs, before.meanAbs, (long long)upTo, all.maxAbs,
                  all.meanAbs, (long long)all.argmaxAgree);
            QVERIFY2(before.maxAbs <= kFp8MaxAbs, qPrintable(QString("fp8 max|Δ| %1").arg(before.maxAbs)));
            QVERIFY2(all.meanAbs <= kFp8MeanAbs, qPrintable(QString("fp8 mean|Δ| %1").arg(all.meanAbs)));
            QVERIFY2(double(all.argmaxAgree) >= kFp8Top1 * double(upTo),
                     qPrintable(QString("fp8 top-1 agreement %1 of %2").arg(all.argmaxAgree).arg(upTo)));
        }
        QVERIFY(prompts >= 2);
        if (fp8) QVERIFY2(beforeRows >= 50, "too few fp8 rows before the first decision change");
    }

    // The MTP block against make_golden.py's PyTorch statement of it (the reference class has none),
    // fed the main model's final hidden states: fp32 cache, rows before the first tie of either pass.
    void mtp_data() {
        QTest::addColumn<QString>("dir");
        for (const QString& d : test::goldenModelDirs()) QTest::newRow(QFileInfo(d).fileName().toUtf8().constData()) << d;
    }

    void mtp() {
        QFETCH(QString, dir);
        auto backend = makeCpuBackend();
        Glm5NextModel model(dir.toStdString(), *backend);
        QVERIFY2(model.hasMtp(), "golden checkpoints carry an MTP block");
        SafetensorsFile golden((dir + "/golden.safetensors").toStdString());
        const int64_t V = model.text().vocab_size;
        for (int i = 0; golden.find("prompt_" + std::to_string(i)); ++i) {
            const auto ids = test::readIds(golden, "prompt_" + std::to_string(i));
            const auto ref = toF32(golden.get("mtp_logits_" + std::to_string(i)));
            const int64_t T = int64_t(ids.size());
            QCOMPARE(int64_t(ref.size()), (T - 1) * V);
            auto s = model.newSequence(KvCacheDtype::Fp32);
            ForwardResult main = model.forward(ids.data(), T, *s, false, true);
            auto ms = model.newMtpSequence(KvCacheDtype::Fp32);
            ForwardResult r = model.forwardMtp(main.hidden.data(), ids.data() + 1, T - 1, *ms);
            int64_t upTo = T - 1;
            if (main.indexer.firstTiedQuery >= 0) upTo = std::min(upTo, main.indexer.firstTiedQuery);
            if (r.indexer.firstTiedQuery >= 0) upTo = std::min(upTo, r.indexer.firstTiedQuery);
            const Diff d = compare(r.logits, ref, upTo, V);
            qInfo("mtp prompt %d: T=%lld compared %lld rows: max|Δ|=%.3g mean|Δ|=%.3g", i, (long long)T,
                  (long long)upTo, d.maxAbs, d.meanAbs);
            QVERIFY(upTo >= std::min<int64_t>(T - 1, 8));
            QVERIFY2(d.maxAbs <= kFp32MaxAbs, qPrintable(QString("mtp max|Δ| %1").arg(d.maxAbs)));
        }
    }
};

QTEST_GUILESS_MAIN(TestGoldenParity)
#include "test_golden_parity.moc"
