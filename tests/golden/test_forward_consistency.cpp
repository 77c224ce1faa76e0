// Self-consistency of the CPU forward on the golden checkpoints (docs/ARCHITECTURE.md §Contracts):
// one prefill, a chunked prefill and token-by-token decode of the same tokens give bit-identical
// logits, for both cache dtypes. 32+ incremental decode steps are checked against the full forward.
#include <QtTest>

#include <cstring>

#include "../common/golden_data.h"
#include "model/glm5_next.h"

using namespace ts;

namespace {

// Logits of `ids` fed in pieces of `chunk` tokens (chunk ≥ T = one prefill).
std::vector<float> run(const Glm5NextModel& m, const std::vector<int32_t>& ids, KvCacheDtype dt, int64_t prefill,
                       int64_t chunk) {
    auto s = m.newSequence(dt);
    std::vector<float> out;
    const int64_t T = int64_t(ids.size());
    int64_t p = 0;
    while (p < T) {
        const int64_t n = p == 0 ? std::min(prefill, T) : std::min(chunk, T - p);
        ForwardResult r = m.forward(ids.data() + p, n, *s);
        out.insert(out.end(), r.logits.begin(), r.logits.end());
        p += n;
    }
    return out;
}

int64_t firstMismatch(const std::vector<float>& a, const std::vector<float>& b, int64_t V) {
    if (a.size() != b.size()) return -2;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], 4) != 0) return int64_t(i) / V;
    return -1;
}

}  // namespace

class TestForwardConsistency : public QObject {
    Q_OBJECT

private slots:
    void consistency_data() {
        test::addModelAndCacheRows();
    }

    void consistency() {
        QFETCH(QString, dir);
        QFETCH(bool, fp8);
        const KvCacheDtype dt = fp8 ? KvCacheDtype::Fp8 : KvCacheDtype::Fp32;
        auto backend = makeCpuBackend();
        Glm5NextModel model(dir.toStdString(), *backend);
        SafetensorsFile golden((dir + "/golden.safetensors").toStdString());
        // The longest golden prompt: long enough that pools complete and sparse selection happens.
        std::vector<int32_t> ids;
        for (int i = 0; golden.find("prompt_" + std::to_string(i)); ++i) {
            auto p = test::readIds(golden, "prompt_" + std::to_string(i));
            if (p.size() > ids.size()) ids = p;
        }
        const int64_t T = int64_t(ids.size()), V = model.text().vocab_size;
        QVERIFY(T > model.text().index_topk + 40);

        const auto full = run(model, ids, dt, T, T);
        QCOMPARE(int64_t(full.size()), T * V);
        QCOMPARE(firstMismatch(run(model, ids, dt, 37, 37), full, V), int64_t(-1));    // chunked prefill
        QCOMPARE(firstMismatch(run(model, ids, dt, 5, 64), full, V), int64_t(-1));     // uneven chunks
        QCOMPARE(firstMismatch(run(model, ids, dt, T - 40, 1), full, V), int64_t(-1)); // 40 decode steps
    }

    // Several sequences in one step (continuous batching): each gets exactly its logits alone. The
    // prompts prefill together (different lengths), then decode together for 12 steps, with one
    // sequence joining late with a prefill chunk mixed into the decode steps.
    void batched_data() { consistency_data(); }

    void batched() {
        QFETCH(QString, dir);
        QFETCH(bool, fp8);
        const KvCacheDtype dt = fp8 ? KvCacheDtype::Fp8 : KvCacheDtype::Fp32;
        auto backend = makeCpuBackend();
        Glm5NextModel model(dir.toStdString(), *backend);
        SafetensorsFile golden((dir + "/golden.safetensors").toStdString());
        std::vector<std::vector<int32_t>> prompts;
        for (int i = 0; golden.find("prompt_" + std::to_string(i)); ++i)
            prompts.push_back(test::readIds(golden, "prompt_" + std::to_string(i)));
        QVERIFY(prompts.size() >= 3);
        const int64_t V = model.text().vocab_size;
        const size_t S = prompts.size();

        // Alone: the full logits of each prompt.
        std::vector<std::vector<float>> alone(S);
        for (size_t i = 0; i < S; ++i) alone[i] = run(model, prompts[i], dt, int64_t(prompts[i].size()), 1);

        // Batched: all but the last prefill in step 0 (the first prompt's first 40 tokens only), then
        // steps of 1 token for running sequences; the first prompt's rest and the last prompt arrive
        // as chunks of 50 tokens mixed with the decode rows.
        std::vector<std::unique_ptr<SequenceState>> st;
        for (size_t i = 0; i < S; ++i) st.push_back(model.newSequence(dt));
        std::vector<std::vector<float>> got(S);
        std::vector<int64_t> done(S, 0);
        const int64_t firstChunk = 40, chunk = 50;
        bool any = true;
        for (int step = 0; any; ++step) {
            std::vector<SeqStep> steps;
            std::vector<size_t> who;
            for (size_t i = 0; i < S; ++i) {
                const int64_t T = int64_t(prompts[i].size());
                if (done[i] >= T || (i + 1 == S && step < 2)) continue;  // the last prompt joins at step 2
                int64_t n = 1;
                if (done[i] == 0) n = std::min<int64_t>(i == 0 ? firstChunk : chunk, T);
                else if (i == 0 || i + 1 == S) n = std::min<int64_t>(chunk, T - done[i]);
                st[i]->reserve(done[i] + n);
                SeqStep s;
                s.ids = prompts[i].data() + done[i];
                s.n = n;
                s.pos0 = done[i];
                s.caches = st[i]->caches();
                steps.push_back(s);
                who.push_back(i);
            }
            any = !steps.empty();
            if (!any) break;
            auto res = model.forwardBatch(steps);
            for (size_t k = 0; k < who.size(); ++k) {
                got[who[k]].insert(got[who[k]].end(), res[k].logits.begin(), res[k].logits.end());
                done[who[k]] += steps[k].n;
                st[who[k]]->advance(steps[k].n);
            }
        }
        for (size_t i = 0; i < S; ++i) QCOMPARE(firstMismatch(got[i], alone[i], V), int64_t(-1));
    }
};

QTEST_GUILESS_MAIN(TestForwardConsistency)
#include "test_forward_consistency.moc"
