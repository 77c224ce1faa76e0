// The model's side of the decode-step graph contract (Backend::beginGraphRegion), checked on the CPU so that
// CI catches a break the GPU would only find at replay: which steps open a region, that the region closes
// after the last op before the head, and that two decode steps of the same batch size issue the same ops
// with the same allocation sizes inside it. A backend that forwards to the CPU logs the calls; with
// `deviceMoe` it also offers the device-routed MoE (emulated with CPU ops), as the CUDA backend does for EXL3
// experts, so the region runs to its end; without it the model's per-expert loop must leave the region.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend.h"
#include "core/error.h"
#include "fault_backend.h"
#include "model/glm5_next.h"
#include "model/sequence_state.h"

using namespace ts;

namespace {

const std::string kExl3 = TS_SOURCE_DIR "/resources/models/glm5-next-tiny-exl3";
const std::string kDense = TS_SOURCE_DIR "/resources/models/glm5-next-tiny";  // BF16 experts

class RegionLogBackend final : public Backend {
public:
    explicit RegionLogBackend(bool deviceMoe) : m_cpu(makeCpuBackend()), m_deviceMoe(deviceMoe) {}
    std::string name() const override { return "region-log"; }

    // "begin:KEY", "end:completed|left|failed", and inside a region each op and allocation with its sizes.
    std::vector<std::string> log;
    bool inRegion = false;
    int regions = 0;

    void beginGraphRegion(uint64_t key) override {
        QVERIFY2(!inRegion, "regions must not nest");
        inRegion = true;
        ++regions;
        log.push_back("begin:" + std::to_string(key));
    }
    void endGraphRegion(GraphRegionEnd how) override {
        if (!inRegion) return;  // a no-op outside a region (the MoE loop may call it there)
        inRegion = false;
        log.push_back(std::string("end:") + (how == GraphRegionEnd::Completed ? "completed"
                                             : how == GraphRegionEnd::Left    ? "left"
                                                                              : "failed"));
    }

    // The aside (Backend::beginAside), offered inside regions as the CUDA backend does by default. A broken
    // bracket is recorded in asideError (the test checks it: QVERIFY cannot return a value from here).
    bool offerAside = false;
    bool asideOpen = false;
    std::string asideError;
    bool beginAside() override {
        if (!offerAside || !inRegion) return false;
        if (asideOpen) asideError += "asides must not nest; ";
        asideOpen = true;
        note("asideBegin");
        return true;
    }
    void endAside() override {
        if (!asideOpen) asideError += "endAside without beginAside; ";
        asideOpen = false;
        note("asideEnd");
    }
    void joinAside() override {
        if (asideOpen) asideError += "joinAside inside the aside; ";
        note("asideJoin");
    }

    Buffer alloc(size_t b) override { note("alloc", int64_t(b)); return m_cpu->alloc(b); }
    Buffer allocUninit(size_t b) override { note("allocUninit", int64_t(b)); return m_cpu->allocUninit(b); }
    Buffer upload(const void* h, size_t b) override { note("upload", int64_t(b)); return m_cpu->upload(h, b); }
    void download(const Buffer& s, void* h, size_t b, size_t o) override { note("download", int64_t(b)); m_cpu->download(s, h, b, o); }
    void copy(const Buffer& s, size_t so, const Buffer& d, size_t dof, size_t b) override {
        note("copy", int64_t(b), int64_t(so), int64_t(dof));
        m_cpu->copy(s, so, d, dof, b);
    }
    void embedding(const int32_t* ids, int64_t T, const WeightView& t, const Buffer& out) override {
        note("embedding", T);
        m_cpu->embedding(ids, T, t, out);
    }
    void linear(const Buffer& x, int64_t T, const WeightView& w, const Buffer& y) override {
        note("linear", T, w.rows, w.cols);
        m_cpu->linear(x, T, w, y);
    }
    void rmsnorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, float eps, const Buffer& y) override {
        note("rmsnorm", rows, D);
        m_cpu->rmsnorm(x, rows, D, w, eps, y);
    }
    void layernorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, const Buffer& b, float eps,
                   const Buffer& y) override {
        note("layernorm", rows, D);
        m_cpu->layernorm(x, rows, D, w, b, eps, y);
    }
    void swiglu(const Buffer& g, const Buffer& u, int64_t T, int64_t I, float lim, const Buffer& out) override {
        note("swiglu", T, I);
        m_cpu->swiglu(g, u, T, I, lim, out);
    }
    void add(const Buffer& x, const Buffer& y, int64_t n) override { note("add", n); m_cpu->add(x, y, n); }
    void scale(const Buffer& x, int64_t n, float s) override { note("scale", n); m_cpu->scale(x, n, s); }
    void zero(const Buffer& x) override { note("zero", int64_t(x.size())); m_cpu->zero(x); }
    void concatColumns(const Buffer* p, const int64_t* w, int c, int64_t T, const Buffer& out) override {
        note("concatColumns", T, c);
        m_cpu->concatColumns(p, w, c, T, out);
    }
    void repeatRows(const Buffer& src, int64_t T, int64_t D, int n, const Buffer& dst) override {
        note("repeatRows", T, D, n);
        m_cpu->repeatRows(src, T, D, n, dst);
    }
    void mhcPre(const Buffer& s, int64_t T, int64_t D, const HyperConnParams& p, const Buffer& x, const Buffer& post,
                const Buffer& comb) override {
        note("mhcPre", T, D);
        m_cpu->mhcPre(s, T, D, p, x, post, comb);
    }
    void mhcPost(const Buffer& s, int64_t T, int64_t D, int n, const Buffer& y, const Buffer& post,
                 const Buffer& comb) override {
        note("mhcPost", T, D);
        m_cpu->mhcPost(s, T, D, n, y, post, comb);
    }
    void mhcHead(const Buffer& s, int64_t T, int64_t D, int n, const Buffer& out) override {
        note("mhcHead", T, D);
        m_cpu->mhcHead(s, T, D, n, out);
    }
    void causalConvSilu(const Buffer& x, int64_t T, int64_t C, int K, const Buffer& w, const Buffer& st,
                        const Buffer& out) override {
        note("causalConvSilu", T, C);
        m_cpu->causalConvSilu(x, T, C, K, w, st, out);
    }
    void kdaGate(const Buffer& f, int64_t T, int64_t H, int64_t Dk, const Buffer& a, const Buffer& dt,
                 float lb) override {
        note("kdaGate", T, H);
        m_cpu->kdaGate(f, T, H, Dk, a, dt, lb);
    }
    void kdaRecurrent(const Buffer& qkv, int64_t T, int64_t H, int64_t Dk, const Buffer& g, const Buffer& b,
                      const Buffer& st, const Buffer& out) override {
        note("kdaRecurrent", T, H);
        m_cpu->kdaRecurrent(qkv, T, H, Dk, g, b, st, out);
    }
    void gatedRmsnorm(const Buffer& o, int64_t T, int64_t H, int64_t Dv, const Buffer& w, float eps,
                      const Buffer& g) override {
        note("gatedRmsnorm", T, H);
        m_cpu->gatedRmsnorm(o, T, H, Dv, w, eps, g);
    }
    void mlaCacheWrite(const Buffer& c, int64_t T, int64_t R, KvCacheDtype dt, const Buffer& cache,
                       const PageTable& pages, int64_t pos0) override {
        note("mlaCacheWrite", T, R);
        m_cpu->mlaCacheWrite(c, T, R, dt, cache, pages, pos0);
    }
    void mlaAbsorbQ(const Buffer& q, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                    const Buffer& qLat) override {
        note("mlaAbsorbQ", T, H);
        m_cpu->mlaAbsorbQ(q, T, H, dn, dv, kvb, qLat);
    }
    void mlaSparseAttention(const Buffer& q, int64_t T, int64_t H, int64_t R, const Buffer& c, KvCacheDtype dt,
                            const PageTable& p, const Buffer& idx, int64_t w, float s, const Buffer& o) override {
        note("mlaSparseAttention", T, H, w);
        m_cpu->mlaSparseAttention(q, T, H, R, c, dt, p, idx, w, s, o);
    }
    void mlaUpV(const Buffer& oLat, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                const Buffer& o) override {
        note("mlaUpV", T, H);
        m_cpu->mlaUpV(oLat, T, H, dn, dv, kvb, o);
    }
    void indexerCacheWrite(const Buffer& k, const Buffer& g, int64_t T, int64_t D, int64_t kp, const Buffer& ape,
                           KvCacheDtype dt, const Buffer& tail, const Buffer& store, const PageTable& p,
                           int64_t pos0) override {
        note("indexerCacheWrite", T, D);
        m_cpu->indexerCacheWrite(k, g, T, D, kp, ape, dt, tail, store, p, pos0);
    }
    void indexerSelect(const Buffer& q, const Buffer& w, int64_t T, int64_t H, int64_t D, int64_t kp, int64_t topk,
                       KvCacheDtype dt, const Buffer& store, const PageTable& p, int64_t pos0, const Buffer& idx,
                       IndexerStats* st) override {
        note("indexerSelect", T, H);
        m_cpu->indexerSelect(q, w, T, H, D, kp, topk, dt, store, p, pos0, idx, st);
    }
    void moeRoute(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E, int64_t topk,
                  int64_t nGroup, int64_t topkGroup, bool norm, float scaling, int32_t* hostIdx,
                  float* hostWeight) override {
        note("moeRoute", T, E);
        m_cpu->moeRoute(x, T, gate, bias, E, topk, nGroup, topkGroup, norm, scaling, hostIdx, hostWeight);
    }
    void gatherRows(const Buffer& x, int64_t D, const int32_t* sel, int64_t n, const Buffer& rows) override {
        note("gatherRows", D, n);
        m_cpu->gatherRows(x, D, sel, n, rows);
    }
    void scatterAddRows(const Buffer& rows, int64_t D, const int32_t* sel, const float* scale, int64_t n,
                        const Buffer& y) override {
        note("scatterAddRows", D, n);
        m_cpu->scatterAddRows(rows, D, sel, scale, n, y);
    }

    // The device-routed MoE, emulated: routing into the idx / weight buffers, then each token's experts
    // in ascending id order through the CPU's own ops (the CPU backend has neither path).
    bool moeRouteDevice(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E,
                        int64_t topk, int64_t nGroup, int64_t topkGroup, bool norm, float scaling, const Buffer& idx,
                        const Buffer& weight) override {
        if (!m_deviceMoe) return false;
        note("moeRouteDevice", T, E);
        m_cpu->moeRoute(x, T, gate, bias, E, topk, nGroup, topkGroup, norm, scaling, idx.i32(), weight.f32());
        return true;
    }
    bool moeExpertsFusedDevice(const Buffer& x, int64_t T, int64_t D, int64_t I, const Buffer& idx,
                               const Buffer& weight, int64_t topk, const WeightView* gate, const WeightView* up,
                               const WeightView* down, int64_t E, float limit, const Buffer& y) override {
        if (!m_deviceMoe) return false;
        note("moeExpertsFusedDevice", T, E);
        for (int64_t e = 0; e < E; ++e) {
            std::vector<int32_t> rows;
            std::vector<float> scales;
            for (int64_t t = 0; t < T; ++t)
                for (int64_t k = 0; k < topk; ++k)
                    if (idx.i32()[t * topk + k] == e) {
                        rows.push_back(int32_t(t));
                        scales.push_back(weight.f32()[t * topk + k]);
                    }
            if (rows.empty()) continue;
            const int64_t n = int64_t(rows.size());
            Buffer xe = m_cpu->alloc(size_t(n * D) * 4), g = m_cpu->alloc(size_t(n * I) * 4),
                   u = m_cpu->alloc(size_t(n * I) * 4), ye = m_cpu->alloc(size_t(n * D) * 4);
            m_cpu->gatherRows(x, D, rows.data(), n, xe);
            m_cpu->linear(xe, n, gate[e], g);
            m_cpu->linear(xe, n, up[e], u);
            m_cpu->swiglu(g, u, n, I, limit, g);
            m_cpu->linear(g, n, down[e], ye);
            m_cpu->scatterAddRows(ye, D, rows.data(), scales.data(), n, y);
        }
        return true;
    }

private:
    template <typename... A>
    void note(const char* op, A... sizes) {
        if (!inRegion) {
            if (std::strcmp(op, "linear") == 0) lastOutsideOp = op;
            return;
        }
        std::string s = op;
        ((s += ":" + std::to_string(int64_t(sizes))), ...);
        log.push_back(s);
    }

public:
    std::string lastOutsideOp;

private:
    std::unique_ptr<Backend> m_cpu;
    bool m_deviceMoe;
};

// One forwardBatch of `ids.size()` sequences taking `n` tokens each.
std::vector<ForwardResult> step(const Glm5NextModel& m, std::vector<std::unique_ptr<SequenceState>>& states,
                                const std::vector<std::vector<int32_t>>& ids, bool record = false) {
    std::vector<SeqStep> steps(ids.size());
    for (size_t s = 0; s < ids.size(); ++s) {
        states[s]->reserve(states[s]->length() + int64_t(ids[s].size()));
        steps[s].ids = ids[s].data();
        steps[s].n = int64_t(ids[s].size());
        steps[s].pos0 = states[s]->length();
        steps[s].caches = states[s]->caches();
        steps[s].recordSelection = record;
    }
    auto out = m.forwardBatch(steps);
    for (size_t s = 0; s < ids.size(); ++s) states[s]->advance(int64_t(ids[s].size()));
    return out;
}

// One sequence of `m`, prefilled with 5 tokens (no region: n > 1).
std::vector<std::unique_ptr<SequenceState>> prefilledSequence(const Glm5NextModel& m) {
    std::vector<std::unique_ptr<SequenceState>> st;
    st.push_back(m.newSequence(KvCacheDtype::Fp8));
    step(m, st, {{1, 2, 3, 4, 5}});
    return st;
}

// One sequence of `dir` prefilled with 5 tokens, then one decode step, on `be` and on the CPU alike; `be`'s log holds
// the decode step only. Returns {be's results, the CPU's}.
std::pair<std::vector<ForwardResult>, std::vector<ForwardResult>> prefillThenDecode(const std::string& dir,
                                                                                    RegionLogBackend& be) {
    auto ref = makeCpuBackend();
    Glm5NextModel m(dir, be), mr(dir, *ref);
    std::vector<std::unique_ptr<SequenceState>> st, sr;
    st.push_back(m.newSequence(KvCacheDtype::Fp8));
    sr.push_back(mr.newSequence(KvCacheDtype::Fp8));
    step(m, st, {{1, 2, 3, 4, 5}});
    step(mr, sr, {{1, 2, 3, 4, 5}});
    be.log.clear();
    auto out = step(m, st, {{6}});
    return {std::move(out), step(mr, sr, {{6}})};
}

// The log lines of the region opened first in `log` (begin .. end inclusive).
std::vector<std::string> firstRegion(const std::vector<std::string>& log) {
    std::vector<std::string> r;
    bool in = false;
    for (const std::string& l : log) {
        if (l.rfind("begin:", 0) == 0) in = true;
        if (in) r.push_back(l);
        if (in && l.rfind("end:", 0) == 0) break;
    }
    return r;
}

}  // namespace

class TestGraphRegions : public QObject {
    Q_OBJECT
private slots:
    void decodeStepsRepeatTheirOps();
    void onlyDecodeStepsOpenARegion();
    void perExpertLoopLeavesTheRegion();
    void denseExpertsStayInTheRegion();
    void aFailedStepEndsItsRegionAsFailed();
    void asidesKeepTheirContract();
};

// Two decode steps of the same batch size: one region each, closed as completed, the same ops and
// allocation sizes in the same order; the head (the last linear) runs after the region; the emulated
// device MoE gives the CPU's logits.
void TestGraphRegions::decodeStepsRepeatTheirOps() {
    for (int B : {1, 3}) {
        RegionLogBackend be(true);
        auto ref = makeCpuBackend();
        Glm5NextModel m(kExl3, be), mr(kExl3, *ref);
        std::vector<std::unique_ptr<SequenceState>> st, sr;
        std::vector<std::vector<int32_t>> prompts;
        for (int b = 0; b < B; ++b) {
            st.push_back(m.newSequence(KvCacheDtype::Fp8));
            sr.push_back(mr.newSequence(KvCacheDtype::Fp8));
            std::vector<int32_t> p;
            for (int i = 0; i < 9 + 4 * b; ++i) p.push_back(int32_t((37 * i + 11 * b + 5) % 300));
            prompts.push_back(p);
        }
        // Prefill each sequence alone (n > 1: no region).
        for (int b = 0; b < B; ++b) {
            std::vector<std::unique_ptr<SequenceState>> s1, r1;
            s1.push_back(std::move(st[size_t(b)]));
            r1.push_back(std::move(sr[size_t(b)]));
            step(m, s1, {prompts[size_t(b)]});
            step(mr, r1, {prompts[size_t(b)]});
            st[size_t(b)] = std::move(s1[0]);
            sr[size_t(b)] = std::move(r1[0]);
        }
        QCOMPARE(be.regions, 0);
        std::vector<std::vector<std::string>> regionLogs;
        for (int i = 0; i < 3; ++i) {
            std::vector<std::vector<int32_t>> ids;
            for (int b = 0; b < B; ++b) ids.push_back({int32_t((53 * i + 7 * b + 1) % 300)});
            be.log.clear();
            be.lastOutsideOp.clear();
            auto out = step(m, st, ids);
            auto want = step(mr, sr, ids);
            QCOMPARE(be.regions, i + 1);
            QVERIFY(!be.inRegion);
            const auto r = firstRegion(be.log);
            QVERIFY(r.size() > 10);
            QVERIFY2(r.front().rfind("begin:", 0) == 0 && r.back() == "end:completed", r.back().c_str());
            QCOMPARE(be.lastOutsideOp, std::string("linear"));  // the head, after the region
            regionLogs.push_back(r);
            for (int b = 0; b < B; ++b) {
                QCOMPARE(out[size_t(b)].logits.size(), want[size_t(b)].logits.size());
                for (size_t v = 0; v < want[size_t(b)].logits.size(); ++v)
                    QVERIFY(std::fabs(out[size_t(b)].logits[v] - want[size_t(b)].logits[v]) <= 1e-5f);
            }
        }
        QVERIFY2(regionLogs[0] == regionLogs[1] && regionLogs[1] == regionLogs[2],
                 "two decode steps of one batch size must issue the same ops and allocation sizes");
    }
}

void TestGraphRegions::onlyDecodeStepsOpenARegion() {
    RegionLogBackend be(true);
    Glm5NextModel m(kExl3, be);
    std::vector<std::unique_ptr<SequenceState>> st;
    for (int b = 0; b < 17; ++b) st.push_back(m.newSequence(KvCacheDtype::Fp8));
    auto firstN = [&](size_t n) {
        std::vector<std::unique_ptr<SequenceState>> s;
        for (size_t i = 0; i < n; ++i) s.push_back(std::move(st[i]));
        return s;
    };
    auto giveBack = [&](std::vector<std::unique_ptr<SequenceState>>& s) {
        for (size_t i = 0; i < s.size(); ++i) st[i] = std::move(s[i]);
    };
    auto oneTokenEach = [](int n, int32_t first) {  // a decode step's ids: one token per sequence
        std::vector<std::vector<int32_t>> ids;
        for (int i = 0; i < n; ++i) ids.push_back({first + i});
        return ids;
    };
    {  // prefill of one sequence: no region
        auto s = firstN(1);
        step(m, s, {{1, 2, 3, 4}});
        giveBack(s);
        QCOMPARE(be.regions, 0);
    }
    {  // a mixed step (one sequence prefilling, one decoding): no region
        auto s = firstN(2);
        step(m, s, {{5}, {6, 7, 8}});
        giveBack(s);
        QCOMPARE(be.regions, 0);
    }
    {  // a decode step that records its decisions (selftest / golden diagnostics): no region
        auto s = firstN(2);
        step(m, s, {{9}, {10}}, true);
        giveBack(s);
        QCOMPARE(be.regions, 0);
    }
    {  // 17 sequences decoding: above the graphed sizes
        auto s = firstN(17);
        step(m, s, oneTokenEach(17, 20));
        giveBack(s);
        QCOMPARE(be.regions, 0);
    }
    {  // 16 sequences decoding: one region, keyed differently from 2
        auto s = firstN(16);
        step(m, s, oneTokenEach(16, 40));
        giveBack(s);
        QCOMPARE(be.regions, 1);
        const std::string k16 = be.log.front();
        be.log.clear();
        auto p = firstN(2);
        step(m, p, {{3}, {4}});
        giveBack(p);
        QCOMPARE(be.regions, 2);
        QVERIFY(be.log.front().rfind("begin:", 0) == 0 && be.log.front() != k16);
    }
}

// Without a device MoE path the model's per-expert loop runs: its ops follow the routing, so the step
// leaves its region (GraphRegionEnd::Left) before the loop, and the rest of the step is outside it.
void TestGraphRegions::perExpertLoopLeavesTheRegion() {
    RegionLogBackend be(false);
    Glm5NextModel m(kExl3, be);
    auto st = prefilledSequence(m);
    be.log.clear();
    step(m, st, {{6}});
    QCOMPARE(be.regions, 1);
    const auto r = firstRegion(be.log);
    QCOMPARE(r.back(), std::string("end:left"));
    bool sawRoute = false;
    for (const std::string& l : r) sawRoute = sawRoute || l.rfind("moeRoute:", 0) == 0;
    QVERIFY2(sawRoute, "the region ends at the first MoE layer's loop, after its host routing");
    for (const std::string& l : r) QVERIFY2(l.rfind("gatherRows", 0) != 0, "the loop must run outside the region");
}

// An op that throws inside a decode step (out of memory, an injected fault): the step closes its region as Failed —
// not Left, which tells a device backend that the batch size's steps follow the data and must stay eager for good —
// and the next decode step of that size opens a region again and completes it, with the ops of a step that never
// failed.
void TestGraphRegions::aFailedStepEndsItsRegionAsFailed() {
    RegionLogBackend be(true);
    // The fault decorator TS_FAULT_OP and the self-test use, borrowing the logging backend: rearm(n) makes the n-th
    // mhcPre from then on throw (ErrorKind::Internal, as an op that runs out of memory would).
    FaultBackend fault(be, FaultPlan{"mhcPre", 0, FaultPlan::Kind::Error, "region-log: injected failure"});
    Glm5NextModel m(kExl3, fault);
    auto st = prefilledSequence(m);
    be.log.clear();
    step(m, st, {{6}});
    const auto clean = firstRegion(be.log);
    QCOMPARE(clean.back(), std::string("end:completed"));
    for (int at : {1, 3}) {  // the first op of the step's first layer, and one in its second
        fault.rearm(at);
        be.log.clear();
        QString what;
        try {
            step(m, st, {{7}});
        } catch (const Error& e) {
            what = QString::fromStdString(e.what());
        }
        QVERIFY2(what.contains(QStringLiteral("region-log: injected failure: call %1 of mhcPre failed").arg(at)), qPrintable(what));
        QVERIFY(!be.inRegion);
        QCOMPARE(firstRegion(be.log).back(), std::string("end:failed"));
        be.log.clear();
        step(m, st, {{7}});  // the failed step did not advance the sequence: the same position again
        QVERIFY2(firstRegion(be.log) == clean, "the step after a failed one repeats a clean step's region");
    }
}

// A model with dense (BF16) experts, the embedded default: its MoE layers also offer the device-routed path
// (the CUDA backend has it for dense experts too), so a decode step runs to the region's end with no
// per-expert loop and no download inside it, and gives the CPU's logits.
void TestGraphRegions::denseExpertsStayInTheRegion() {
    RegionLogBackend be(true);
    const auto [out, want] = prefillThenDecode(kDense, be);
    QCOMPARE(be.regions, 1);
    const auto r = firstRegion(be.log);
    QCOMPARE(r.back(), std::string("end:completed"));
    int fused = 0;
    for (const std::string& l : r) {
        fused += l.rfind("moeExpertsFusedDevice:", 0) == 0;
        QVERIFY2(l.rfind("gatherRows", 0) != 0 && l.rfind("download", 0) != 0 && l.rfind("moeRoute:", 0) != 0,
                 ("no host routing or per-expert loop inside the region: " + l).c_str());
    }
    QCOMPARE(fused, 7);  // the embedded model's 7 MoE layers (layer 0 is dense)
    QCOMPARE(out[0].logits.size(), want[0].logits.size());
    for (size_t v = 0; v < want[0].logits.size(); ++v) QVERIFY(std::fabs(out[0].logits[v] - want[0].logits[v]) <= 1e-5f);
}

// Where the backend offers an aside, the model brackets work that the next ops do not read, and joins it right
// before the first op that reads it: each MoE layer's shared expert (its three linears and swiglu) beside the
// routing and the routed experts, joined before the add of its output; each KDA layer's gates (the forget gate's
// two linears and kdaGate, beta, the output gate's two linears) beside the q / k / v projections, joined before the
// short conv. Inside an aside only those ops, nothing that waits for the host; and the logits are the CPU's bits.
void TestGraphRegions::asidesKeepTheirContract() {
    for (const std::string& dir : {kExl3, kDense}) {
        RegionLogBackend be(true);
        be.offerAside = true;
        const auto [out, want] = prefillThenDecode(dir, be);
        const auto r = firstRegion(be.log);
        QCOMPARE(r.back(), std::string("end:completed"));
        const auto starts = [](const std::string& l, const char* p) { return l.rfind(p, 0) == 0; };
        int moeAsides = 0, kdaAsides = 0;
        for (size_t i = 0; i < r.size(); ++i) {
            if (r[i] != "asideBegin") continue;
            size_t j = i + 1;
            int linears = 0, gates = 0;
            for (; j < r.size() && r[j] != "asideEnd"; ++j) {
                const std::string& l = r[j];
                linears += starts(l, "linear:");
                gates += starts(l, "kdaGate:");
                QVERIFY2(starts(l, "linear:") || starts(l, "swiglu:") || starts(l, "kdaGate:") || starts(l, "alloc"),
                         ("only the bracketed work's own ops inside an aside: " + l).c_str());
            }
            QVERIFY2(j < r.size(), "an aside must end inside the region");
            size_t k = j + 1;
            int between = 0, routed = 0;
            for (; k < r.size() && r[k] != "asideJoin"; ++k) {
                QVERIFY2(r[k] != "asideBegin", "an aside must be joined before the next one begins");
                between += starts(r[k], "linear:");
                routed += starts(r[k], "moeExpertsFusedDevice:");
            }
            QVERIFY2(k < r.size(), "an aside must be joined inside the region");
            size_t next = k + 1;  // the first op after the join (allocations are not ops)
            while (next < r.size() && starts(r[next], "alloc")) ++next;
            QVERIFY(next < r.size());
            const bool kda = gates == 1;
            if (kda) {
                ++kdaAsides;
                QCOMPARE(linears, 5);  // f_a, f_b, b_proj, g_a, g_b
                QCOMPARE(between, 3);  // q, k, v
                QVERIFY2(starts(r[next], "causalConvSilu:"), ("the KDA join comes right before the conv: " + r[next]).c_str());
            } else {
                ++moeAsides;
                QCOMPARE(linears, 3);  // the shared expert's gate, up, down
                QCOMPARE(routed, 1);   // the routed experts run between the aside's end and its join
                QVERIFY2(starts(r[next], "add:"), ("the MoE join comes right before the add: " + r[next]).c_str());
            }
        }
        QVERIFY2(be.asideError.empty(), be.asideError.c_str());
        QVERIFY(!be.asideOpen);
        QCOMPARE(moeAsides, 7);  // the embedded models' MoE layers (layer 0 is dense)
        QCOMPARE(kdaAsides, 6);  // and their KDA layers (2 of 8 are DSA)
        QCOMPARE(out[0].logits.size(), want[0].logits.size());
        QVERIFY(std::memcmp(out[0].logits.data(), want[0].logits.data(), want[0].logits.size() * 4) == 0);
    }
}

QTEST_GUILESS_MAIN(TestGraphRegions)
#include "test_graph_regions.moc"
