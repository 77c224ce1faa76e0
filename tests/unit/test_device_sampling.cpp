// runtime/device_sampling: the wiring between a step's logits and Backend::sampleRows, without a GPU.
// With a backend that declines (the CPU) every row is sampled on the host with the numbers the sequences'
// generators would have given sample(); with a scripted backend, the requests carry exactly those numbers
// (one per non-greedy row, none for greedy rows), the per-token adjustments and the rows; device results are
// taken as they are; rows handed back are sampled on the host (same tokens); a non-finite row raises the
// host's numerical error.
#include <QtTest>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>

#include "backend.h"
#include "core/error.h"
#include "runtime/device_sampling.h"

using namespace ts;

namespace {

// Forwards every op to the CPU backend; sampleRows answers from a script (or declines).
class ScriptedBackend final : public Backend {
public:
    ScriptedBackend() : m_cpu(makeCpuBackend()) {}
    std::string name() const override { return "scripted"; }
    Buffer alloc(size_t b) override { return m_cpu->alloc(b); }
    Buffer upload(const void* h, size_t b) override { return m_cpu->upload(h, b); }
    void download(const Buffer& s, void* h, size_t b, size_t o) override { m_cpu->download(s, h, b, o); }
    void copy(const Buffer& s, size_t so, const Buffer& d, size_t dof, size_t b) override { m_cpu->copy(s, so, d, dof, b); }
    void embedding(const int32_t* i, int64_t T, const WeightView& t, const Buffer& o) override { m_cpu->embedding(i, T, t, o); }
    void linear(const Buffer& x, int64_t T, const WeightView& w, const Buffer& y) override { m_cpu->linear(x, T, w, y); }
    void rmsnorm(const Buffer& x, int64_t r, int64_t D, const Buffer& w, float e, const Buffer& y) override { m_cpu->rmsnorm(x, r, D, w, e, y); }
    void layernorm(const Buffer& x, int64_t r, int64_t D, const Buffer& w, const Buffer& b, float e, const Buffer& y) override {
        m_cpu->layernorm(x, r, D, w, b, e, y);
    }
    void swiglu(const Buffer& g, const Buffer& u, int64_t T, int64_t I, float l, const Buffer& o) override { m_cpu->swiglu(g, u, T, I, l, o); }
    void add(const Buffer& x, const Buffer& y, int64_t n) override { m_cpu->add(x, y, n); }
    void scale(const Buffer& x, int64_t n, float s) override { m_cpu->scale(x, n, s); }
    void zero(const Buffer& x) override { m_cpu->zero(x); }
    void concatColumns(const Buffer* p, const int64_t* w, int c, int64_t T, const Buffer& o) override { m_cpu->concatColumns(p, w, c, T, o); }
    void repeatRows(const Buffer& s, int64_t T, int64_t D, int n, const Buffer& d) override { m_cpu->repeatRows(s, T, D, n, d); }
    void mhcPre(const Buffer& s, int64_t T, int64_t D, const HyperConnParams& p, const Buffer& x, const Buffer& po, const Buffer& c) override {
        m_cpu->mhcPre(s, T, D, p, x, po, c);
    }
    void mhcPost(const Buffer& s, int64_t T, int64_t D, int n, const Buffer& y, const Buffer& p, const Buffer& c) override {
        m_cpu->mhcPost(s, T, D, n, y, p, c);
    }
    void mhcHead(const Buffer& s, int64_t T, int64_t D, int n, const Buffer& o) override { m_cpu->mhcHead(s, T, D, n, o); }
    void causalConvSilu(const Buffer& x, int64_t T, int64_t C, int K, const Buffer& w, const Buffer& st, const Buffer& o) override {
        m_cpu->causalConvSilu(x, T, C, K, w, st, o);
    }
    void kdaGate(const Buffer& f, int64_t T, int64_t H, int64_t Dk, const Buffer& a, const Buffer& d, float lb) override {
        m_cpu->kdaGate(f, T, H, Dk, a, d, lb);
    }
    void kdaRecurrent(const Buffer& q, int64_t T, int64_t H, int64_t Dk, const Buffer& g, const Buffer& b, const Buffer& st,
                      const Buffer& o) override {
        m_cpu->kdaRecurrent(q, T, H, Dk, g, b, st, o);
    }
    void gatedRmsnorm(const Buffer& o, int64_t T, int64_t H, int64_t Dv, const Buffer& w, float e, const Buffer& g) override {
        m_cpu->gatedRmsnorm(o, T, H, Dv, w, e, g);
    }
    void mlaCacheWrite(const Buffer& c, int64_t T, int64_t R, KvCacheDtype dt, const Buffer& ca, const PageTable& p,
                       int64_t pos0) override {
        m_cpu->mlaCacheWrite(c, T, R, dt, ca, p, pos0);
    }
    void mlaAbsorbQ(const Buffer& q, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& k, const Buffer& o) override {
        m_cpu->mlaAbsorbQ(q, T, H, dn, dv, k, o);
    }
    void mlaSparseAttention(const Buffer& q, int64_t T, int64_t H, int64_t R, const Buffer& c, KvCacheDtype dt,
                            const PageTable& p, const Buffer& idx, int64_t w, float s, const Buffer& o) override {
        m_cpu->mlaSparseAttention(q, T, H, R, c, dt, p, idx, w, s, o);
    }
    void mlaUpV(const Buffer& o, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& k, const Buffer& out) override {
        m_cpu->mlaUpV(o, T, H, dn, dv, k, out);
    }
    void indexerCacheWrite(const Buffer& k, const Buffer& g, int64_t T, int64_t D, int64_t kp, const Buffer& a, KvCacheDtype dt,
                           const Buffer& t, const Buffer& s, const PageTable& p, int64_t pos0) override {
        m_cpu->indexerCacheWrite(k, g, T, D, kp, a, dt, t, s, p, pos0);
    }
    void indexerSelect(const Buffer& q, const Buffer& w, int64_t T, int64_t H, int64_t D, int64_t kp, int64_t tk,
                       KvCacheDtype dt, const Buffer& s, const PageTable& p, int64_t pos0, const Buffer& idx,
                       IndexerStats* st) override {
        m_cpu->indexerSelect(q, w, T, H, D, kp, tk, dt, s, p, pos0, idx, st);
    }
    void moeRoute(const Buffer& x, int64_t T, const WeightView& g, const Buffer& b, int64_t E, int64_t k, int64_t ng,
                  int64_t tg, bool norm, float sc, int32_t* idx, float* w) override {
        m_cpu->moeRoute(x, T, g, b, E, k, ng, tg, norm, sc, idx, w);
    }
    void gatherRows(const Buffer& x, int64_t D, const int32_t* s, int64_t n, const Buffer& r) override { m_cpu->gatherRows(x, D, s, n, r); }
    void scatterAddRows(const Buffer& r, int64_t D, const int32_t* s, const float* sc, int64_t n, const Buffer& y) override {
        m_cpu->scatterAddRows(r, D, s, sc, n, y);
    }

    bool sampleRows(const Buffer&, int64_t V, int64_t n, const DeviceSampleRequest* reqs, SampleOutput* out) override {
        if (!script) return false;
        seenV = V;
        for (int64_t i = 0; i < n; ++i) {
            const DeviceSampleRequest& q = reqs[i];
            requests.push_back(q);
            adjustments.emplace_back(q.adjust, q.adjust + q.numAdjust);
            out[i] = script(q);
        }
        return true;
    }

    std::function<SampleOutput(const DeviceSampleRequest&)> script;  // empty: decline, as the CPU does
    std::vector<DeviceSampleRequest> requests;
    std::vector<std::vector<SampleLogitAdjust>> adjustments;
    int64_t seenV = 0;

private:
    std::unique_ptr<Backend> m_cpu;
};

constexpr int64_t kV = 300;

struct Fixture {
    std::vector<Sequence> seqs;
    std::vector<float> logits;  // [rows + 1, kV]: row 0 is never sampled (as a prefill chunk's)
    std::vector<LogitRow> rows;
    std::vector<int32_t> eos{5};
};

Fixture makeFixture() {
    Fixture f;
    std::mt19937_64 g(4);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    f.logits.resize(size_t(7 * kV));
    for (float& x : f.logits) x = nd(g);
    // Greedy, seeded sampling with top_k / top_p / min_p, penalties, min_tokens, logprobs.
    std::vector<SamplingParams> ps(6);
    ps[0].temperature = 0.0f;
    ps[1].topK = 20;
    ps[2].topP = 0.8f;
    ps[2].minP = 0.05f;
    ps[3].repetitionPenalty = 1.3f;
    ps[3].frequencyPenalty = 0.4f;
    ps[4].stopTokenIds = {9};
    ps[4].minTokens = 3;
    ps[5].logprobs = 4;
    ps[5].temperature = 0.7f;
    f.seqs.reserve(ps.size());
    for (size_t i = 0; i < ps.size(); ++i) {
        ps[i].seed = 100 + i;
        ps[i].maxTokens = 100;
        f.seqs.emplace_back(int64_t(i), std::vector<int32_t>{1, 2, 9, int32_t(i)}, ps[i]);
        f.seqs.back().appendToken(7);
        f.rows.push_back({&f.seqs.back(), int64_t(i + 1), f.seqs.back().numCompletionTokens() < ps[i].minTokens});
    }
    return f;
}

// What the host path alone gives: sample() with each sequence's own generator.
std::vector<SampleResult> reference(const Fixture& f) {
    std::vector<SampleResult> out;
    for (const LogitRow& r : f.rows) {
        SamplerRng rng(r.seq->params().seed);
        out.push_back(sample(f.logits.data() + r.row * kV, kV, *r.seq, rng, r.suppressStop, f.eos));
    }
    return out;
}

std::vector<SampleResult> viaRows(Backend& be, const Fixture& f, std::map<int64_t, SamplerRng>& rngs) {
    const Buffer logits = be.upload(f.logits.data(), f.logits.size() * 4);
    for (const Sequence& s : f.seqs) rngs.emplace(s.id(), SamplerRng(s.params().seed));
    return sampleLogitRows(be, logits, kV, f.rows, [&](const Sequence& s) -> SamplerRng& { return rngs.at(s.id()); },
                           f.eos);
}

void sameResults(const std::vector<SampleResult>& a, const std::vector<SampleResult>& b) {
    QCOMPARE(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        QCOMPARE(a[i].token, b[i].token);
        QCOMPARE(a[i].logprob, b[i].logprob);
        QCOMPARE(a[i].top, b[i].top);
    }
}

}  // namespace

class TestDeviceSampling : public QObject {
    Q_OBJECT
private slots:
    void decliningBackendSamplesOnTheHost() {
        const Fixture f = makeFixture();
        auto cpu = makeCpuBackend();
        std::map<int64_t, SamplerRng> rngs;
        sameResults(viaRows(*cpu, f, rngs), reference(f));
        // Each generator advanced exactly as sample() advances it: one number, none for the greedy row.
        for (const Sequence& s : f.seqs) {
            SamplerRng fresh(s.params().seed);
            if (drawsUniform(s.params())) fresh.uniform();
            QCOMPARE(rngs.at(s.id()).uniform(), fresh.uniform());
        }
    }

    void requestsCarryTheHostsNumbers() {
        const Fixture f = makeFixture();
        ScriptedBackend be;
        be.script = [](const DeviceSampleRequest&) {
            SampleOutput o;
            o.status = SampleOutput::kAmbiguous;  // every row handed back: the host decides them all
            return o;
        };
        std::map<int64_t, SamplerRng> rngs;
        sameResults(viaRows(be, f, rngs), reference(f));
        QCOMPARE(be.seenV, kV);
        QCOMPARE(be.requests.size(), f.rows.size());
        for (size_t i = 0; i < f.rows.size(); ++i) {
            const DeviceSampleRequest& q = be.requests[i];
            const SamplingParams& p = f.seqs[i].params();
            SamplerRng fresh(p.seed);
            QCOMPARE(q.uniform, drawsUniform(p) ? fresh.uniform() : 0.0);
            QCOMPARE(q.row, f.rows[i].row);
            QCOMPARE(q.temperature, p.temperature);
            QCOMPARE(q.topP, p.topP);
            QCOMPARE(q.topK, p.topK);
            QCOMPARE(q.logprobs, p.logprobs);
            QCOMPARE(q.repetitionPenalty, p.repetitionPenalty);
            QCOMPARE(q.logMinP, p.minP > 0 ? std::log(double(p.minP)) : -std::numeric_limits<double>::infinity());
            const auto want = logitAdjustments(f.seqs[i], kV, f.rows[i].suppressStop, f.eos);
            QCOMPARE(be.adjustments[i].size(), want.size());
            for (size_t k = 0; k < want.size(); ++k) {
                QCOMPARE(be.adjustments[i][k].token, want[k].token);
                QCOMPARE(be.adjustments[i][k].flags, want[k].flags);
                QCOMPARE(be.adjustments[i][k].subtract, want[k].subtract);
            }
        }
        // min_tokens holds back the stop id (9) and the eos (5) of sequence 4 only.
        QVERIFY(!be.adjustments[4].empty());
        QCOMPARE(be.adjustments[4].front().token, 5);
        QCOMPARE(be.adjustments[4].front().flags, SampleLogitAdjust::kAdjustMask);
    }

    void deviceResultsAreTaken() {
        const Fixture f = makeFixture();
        ScriptedBackend be;
        be.script = [](const DeviceSampleRequest& q) {
            SampleOutput o;
            o.token = 40 + int32_t(q.row);
            o.logprob = -1.5f;
            o.numTop = 2;
            o.topIds[0] = 3;
            o.topIds[1] = 8;
            o.topLogprobs[0] = -0.5f;
            o.topLogprobs[1] = -0.75f;
            return o;
        };
        std::map<int64_t, SamplerRng> rngs;
        const auto got = viaRows(be, f, rngs);
        for (size_t i = 0; i < got.size(); ++i) {
            QCOMPARE(got[i].token, 40 + int32_t(f.rows[i].row));
            if (f.seqs[i].params().logprobs >= 0) {
                QCOMPARE(got[i].logprob, -1.5f);
                QCOMPARE(got[i].top.size(), size_t(2));
                QCOMPARE(got[i].top[1].first, 8);
            } else {
                QCOMPARE(got[i].logprob, 0.0f);  // as the host sampler reports rows without logprobs
                QVERIFY(got[i].top.empty());
            }
        }
    }

    // A row the device hands back as non-finite is checked by the host sampler, whose error becomes that row's
    // SampleResult::error (the engine fails that one request); the other rows are sampled as usual.
    void nonFiniteRowFailsThatRowOnly() {
        Fixture f = makeFixture();
        f.logits[size_t(3 * kV + 17)] = std::numeric_limits<float>::quiet_NaN();  // row 3
        ScriptedBackend be;
        be.script = [](const DeviceSampleRequest& q) {
            SampleOutput o;
            o.token = 1;
            if (q.row == 3) o.status = SampleOutput::kNonFinite;
            return o;
        };
        std::map<int64_t, SamplerRng> rngs;
        const std::vector<SampleResult> got = viaRows(be, f, rngs);
        QCOMPARE(got.size(), f.rows.size());
        for (size_t i = 0; i < got.size(); ++i) {
            if (f.rows[i].row == 3) {
                QVERIFY2(got[i].error.find("numerical error: logit of token 17 is NaN") != std::string::npos,
                         got[i].error.c_str());
                QCOMPARE(got[i].token, -1);
            } else {
                QVERIFY2(got[i].error.empty(), got[i].error.c_str());
                QCOMPARE(got[i].token, 1);
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestDeviceSampling)
#include "test_device_sampling.moc"
