// The op self-test harness (engine/selftest) and `twinspark-cli selftest`: with the CPU backend on both
// sides every case must pass; with a backend that is wrong in exactly one op, that op (and only ops that
// depend on it) must fail, naming it. This is what makes a green GPU self-test mean something.
#include <QtTest>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "backend.h"
#include "../common/cli_runner.h"
#include "selftest/op_selftest.h"

using namespace ts;

namespace {

// Forwards every op to the CPU backend; `faulty` names the one op whose output is corrupted afterwards.
class FaultyBackend final : public Backend {
public:
    explicit FaultyBackend(std::string faulty) : m_cpu(makeCpuBackend()), m_faulty(std::move(faulty)) {}
    std::string name() const override { return "faulty-" + m_faulty; }
    void releaseWeights() override { ++released; }
    int released = 0;  // the harness must drop the uploads of its (freed) case weights
    Buffer alloc(size_t b) override { return m_cpu->alloc(b); }
    Buffer upload(const void* h, size_t b) override { return m_cpu->upload(h, b); }
    void download(const Buffer& s, void* h, size_t b, size_t o) override { m_cpu->download(s, h, b, o); }
    void copy(const Buffer& s, size_t so, const Buffer& d, size_t dof, size_t b) override { m_cpu->copy(s, so, d, dof, b); }

    void embedding(const int32_t* ids, int64_t T, const WeightView& t, const Buffer& out) override {
        m_cpu->embedding(ids, T, t, out);
        hit("embedding", out, size_t(T) * size_t(t.cols));
    }
    void linear(const Buffer& x, int64_t T, const WeightView& w, const Buffer& y) override {
        m_cpu->linear(x, T, w, y);
        hit(w.packed ? "exl3" : "linear", y, size_t(T) * size_t(w.rows));
    }
    void rmsnorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, float eps, const Buffer& y) override {
        m_cpu->rmsnorm(x, rows, D, w, eps, y);
        hit("rmsnorm", y, size_t(rows * D));
    }
    void layernorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, const Buffer& b, float eps,
                   const Buffer& y) override {
        m_cpu->layernorm(x, rows, D, w, b, eps, y);
        hit("layernorm", y, size_t(rows * D));
    }
    void swiglu(const Buffer& g, const Buffer& u, int64_t T, int64_t I, float lim, const Buffer& out) override {
        m_cpu->swiglu(g, u, T, I, lim, out);
        hit("swiglu", out, size_t(T * I));
    }
    void add(const Buffer& x, const Buffer& y, int64_t n) override {
        m_cpu->add(x, y, n);
        hit("add", y, size_t(n));
    }
    void scale(const Buffer& x, int64_t n, float s) override {
        m_cpu->scale(x, n, s);
        hit("scale", x, size_t(n));
    }
    void zero(const Buffer& x) override { m_cpu->zero(x); }
    void concatColumns(const Buffer* p, const int64_t* w, int c, int64_t T, const Buffer& out) override {
        m_cpu->concatColumns(p, w, c, T, out);
        hit("concatColumns", out, size_t(T * w[0]));
    }
    void repeatRows(const Buffer& src, int64_t T, int64_t D, int n, const Buffer& dst) override {
        m_cpu->repeatRows(src, T, D, n, dst);
        hit("repeatRows", dst, static_cast<size_t>(T * n * D));
    }
    void mhcPre(const Buffer& s, int64_t T, int64_t D, const HyperConnParams& p, const Buffer& x, const Buffer& post,
                const Buffer& comb) override {
        m_cpu->mhcPre(s, T, D, p, x, post, comb);
        hit("mhcPre", x, size_t(T * D));
    }
    void mhcPost(const Buffer& s, int64_t T, int64_t D, int n, const Buffer& y, const Buffer& post,
                 const Buffer& comb) override {
        m_cpu->mhcPost(s, T, D, n, y, post, comb);
        hit("mhcPost", s, size_t(T * D * n));
    }
    void mhcHead(const Buffer& s, int64_t T, int64_t D, int n, const Buffer& out) override {
        m_cpu->mhcHead(s, T, D, n, out);
        hit("mhcHead", out, size_t(T * D));
    }
    void causalConvSilu(const Buffer& x, int64_t T, int64_t C, int K, const Buffer& w, const Buffer& st,
                        const Buffer& out) override {
        m_cpu->causalConvSilu(x, T, C, K, w, st, out);
        hit("causalConvSilu", out, size_t(T * C));
    }
    void kdaGate(const Buffer& f, int64_t T, int64_t H, int64_t Dk, const Buffer& a, const Buffer& dt,
                 float lb) override {
        m_cpu->kdaGate(f, T, H, Dk, a, dt, lb);
        hit("kdaGate", f, size_t(T * H * Dk));
    }
    void kdaRecurrent(const Buffer& qkv, int64_t T, int64_t H, int64_t Dk, const Buffer& g, const Buffer& b,
                      const Buffer& st, const Buffer& out) override {
        m_cpu->kdaRecurrent(qkv, T, H, Dk, g, b, st, out);
        hit("kdaRecurrent", out, size_t(T * H * Dk));
    }
    void gatedRmsnorm(const Buffer& o, int64_t T, int64_t H, int64_t Dv, const Buffer& w, float eps,
                      const Buffer& g) override {
        m_cpu->gatedRmsnorm(o, T, H, Dv, w, eps, g);
        hit("gatedRmsnorm", o, size_t(T * H * Dv));
    }
    void mlaCacheWrite(const Buffer& c, int64_t T, int64_t R, KvCacheDtype dt, const Buffer& cache,
                       const PageTable& pages, int64_t pos0) override {
        m_cpu->mlaCacheWrite(c, T, R, dt, cache, pages, pos0);
        if (m_faulty == "mlaCacheWrite") {  // flip one bit of the first written entry
            const int64_t slot = pages.slot(pos0);
            std::vector<uint8_t> b(1);
            const size_t at = size_t(slot) * mlaCacheEntryBytes(dt, R);
            m_cpu->download(cache, b.data(), 1, at);
            b[0] ^= 0x10;
            Buffer one = m_cpu->upload(b.data(), 1);
            m_cpu->copy(one, 0, cache, at, 1);
        }
    }
    void mlaAbsorbQ(const Buffer& q, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                    const Buffer& qLat) override {
        m_cpu->mlaAbsorbQ(q, T, H, dn, dv, kvb, qLat);
        hit("mlaAbsorbQ", qLat, size_t(T * H * kvb.cols));
    }
    void mlaSparseAttention(const Buffer& q, int64_t T, int64_t H, int64_t R, const Buffer& c, KvCacheDtype dt,
                            const PageTable& p, const Buffer& idx, int64_t w, float s, const Buffer& o) override {
        m_cpu->mlaSparseAttention(q, T, H, R, c, dt, p, idx, w, s, o);
        hit("mlaSparseAttention", o, size_t(T * H * R));
    }
    void mlaUpV(const Buffer& oLat, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                const Buffer& o) override {
        m_cpu->mlaUpV(oLat, T, H, dn, dv, kvb, o);
        hit("mlaUpV", o, size_t(T * H * dv));
    }
    void indexerCacheWrite(const Buffer& k, const Buffer& g, int64_t T, int64_t D, int64_t kp, const Buffer& ape,
                           KvCacheDtype dt, const Buffer& tail, const Buffer& store, const PageTable& p,
                           int64_t pos0) override {
        m_cpu->indexerCacheWrite(k, g, T, D, kp, ape, dt, tail, store, p, pos0);
        if (m_faulty == "indexerCacheWrite") hit("indexerCacheWrite", tail, 1);  // corrupt the tail ring
    }
    void indexerSelect(const Buffer& q, const Buffer& w, int64_t T, int64_t H, int64_t D, int64_t kp, int64_t topk,
                       KvCacheDtype dt, const Buffer& store, const PageTable& p, int64_t pos0, const Buffer& idx,
                       IndexerStats* st) override {
        m_cpu->indexerSelect(q, w, T, H, D, kp, topk, dt, store, p, pos0, idx, st);
        if (m_faulty == "indexerSelect") {  // swap the first two selected positions of query 0: same set, wrong order?
            // A wrong choice, not a reordering: replace the first index by −1 (unused).
            int32_t v = -1;
            Buffer b = m_cpu->upload(&v, 4);
            m_cpu->copy(b, 0, idx, 0, 4);
        }
    }
    void moeRoute(const Buffer& x, int64_t T, const WeightView& g, const Buffer& b, int64_t E, int64_t k,
                  int64_t ng, int64_t tg, bool norm, float sc, int32_t* idx, float* w) override {
        m_cpu->moeRoute(x, T, g, b, E, k, ng, tg, norm, sc, idx, w);
        if (m_faulty == "moeRoute") idx[0] = int32_t((idx[0] + 1) % E);
    }
    void gatherRows(const Buffer& x, int64_t D, const int32_t* sel, int64_t n, const Buffer& rows) override {
        m_cpu->gatherRows(x, D, sel, n, rows);
        hit("gatherRows", rows, size_t(n * D));
    }
    void scatterAddRows(const Buffer& rows, int64_t D, const int32_t* sel, const float* sc, int64_t n,
                        const Buffer& y) override {
        m_cpu->scatterAddRows(rows, D, sel, sc, n, y);
        hit("scatterAddRows", y, size_t(D));
    }

    // "sampleRows-handback": a sampler that hands every row back to the host (what a device sampler may do only
    // for rows within its rounding bound); for any other fault, no sampler (the CPU's: the host samples).
    bool sampleRows(const Buffer&, int64_t, int64_t n, const DeviceSampleRequest*, SampleOutput* out) override {
        if (m_faulty != "sampleRows-handback") return false;
        for (int64_t i = 0; i < n; ++i) {
            out[i] = SampleOutput{};
            out[i].token = -1;
            out[i].status = SampleOutput::kAmbiguous;
        }
        return true;
    }

private:
    // Corrupts the last float of [0, n) of `b` when `op` is the faulty one: a one-element error, the
    // smallest thing the self-test has to catch.
    void hit(const char* op, const Buffer& b, size_t n) {
        if (m_faulty != op || n == 0) return;
        float v = 0;
        m_cpu->download(b, &v, 4, (n - 1) * 4);
        v = v * 1.01f + 0.01f;
        Buffer one = m_cpu->upload(&v, 4);
        m_cpu->copy(one, 0, b, (n - 1) * 4, 4);
    }
    std::unique_ptr<Backend> m_cpu;
    std::string m_faulty;
};

}  // namespace

class TestOpSelftest : public QObject {
    Q_OBJECT
private slots:
    void cpuAgainstCpuPassesEveryCase() {
        auto a = makeCpuBackend(), b = makeCpuBackend();
        const auto results = selftest::run(*a, *b, 7);
        std::set<std::string> families;
        for (const auto& r : results) {
            families.insert(r.family);
            if (!r.pass) qWarning("%s/%s %s: %s", r.family.c_str(), r.op.c_str(), r.shape.c_str(), r.note.c_str());
            QVERIFY(r.pass);
            QCOMPARE(r.maxAbsErr, 0.0);  // the same backend twice: bit-identical
        }
        // Every family contributes cases; every op of the Backend interface is covered.
        for (const char* f : {"math", "mhc_kda", "attention", "moe", "exl3", "sampling"})
            QVERIFY2(families.count(f), f);
        std::set<std::string> ops;
        for (const auto& r : results) ops.insert(r.op);
        for (const char* op : {"embedding", "linear", "rmsnorm", "layernorm", "swiglu", "add", "scale",
                               "concatColumns", "repeatRows", "mhcPre", "mhcPost", "mhcHead", "causalConvSilu",
                               "kdaGate", "kdaRecurrent", "gatedRmsnorm", "mlaCacheWrite", "mlaAbsorbQ", "mlaSparseAttention",
                               "mlaUpV", "indexerCacheWrite", "indexerSelect", "moeRoute", "gatherRows",
                               "scatterAddRows", "sampleRows", "mlaCacheWriteBatch", "mlaSparseAttentionBatch",
                               "indexerSelectBatch", "indexerCacheWriteBatch", "causalConvSiluBatch", "kdaRecurrentBatch"}) {
            bool found = false;
            for (const auto& o : ops) found = found || o.find(op) != std::string::npos;
            QVERIFY2(found, op);
        }
    }

    void aWrongOpIsCaughtAndNamed_data() {
        QTest::addColumn<QString>("op");
        QTest::addColumn<QString>("family");  // only that family's cases run: the harness is not cheap
        const std::pair<const char*, const char*> ops[] = {
            {"embedding", "math/"}, {"linear", "math/"}, {"rmsnorm", "math/"}, {"layernorm", "math/"},
            {"swiglu", "math/"}, {"add", "math/"}, {"scale", "math/"}, {"concatColumns", "math/"}, {"repeatRows", "math/"},
            {"mhcPre", "mhc_kda/"}, {"mhcPost", "mhc_kda/"}, {"mhcHead", "mhc_kda/"},
            {"causalConvSilu", "mhc_kda/"}, {"kdaGate", "mhc_kda/"}, {"kdaRecurrent", "mhc_kda/"},
            {"gatedRmsnorm", "mhc_kda/"}, {"mlaCacheWrite", "attention/"}, {"mlaAbsorbQ", "attention/"},
            {"mlaSparseAttention", "attention/"}, {"mlaUpV", "attention/"}, {"indexerCacheWrite", "attention/"},
            {"indexerSelect", "attention/"}, {"moeRoute", "moe/"}, {"gatherRows", "moe/"},
            {"scatterAddRows", "moe/"}, {"exl3", "exl3/"}};
        for (const auto& [op, family] : ops) QTest::newRow(op) << QString(op) << QString(family);
    }
    void aWrongOpIsCaughtAndNamed() {
        QFETCH(QString, op);
        QFETCH(QString, family);
        auto ref = makeCpuBackend();
        FaultyBackend bad(op.toStdString());
        const auto results = selftest::run(*ref, bad, 7, family.toStdString());
        QVERIFY(!results.empty());
        int failedNamingOp = 0;
        for (const auto& r : results)
            if (!r.pass && (r.op.find(op.toStdString()) != std::string::npos || r.family == op.toStdString()))
                ++failedNamingOp;
        QVERIFY2(failedNamingOp > 0, qPrintable("no failing check names " + op));
        QCOMPARE(bad.released, 1);
    }

    // A backend that hands every row back fails every case: no decision of these rows is near the rounding bound,
    // not even in the constructed-ties case, whose tied rows may be handed back but whose control row may not.
    void handBacksNotDueFail() {
        auto ref = makeCpuBackend();
        FaultyBackend bad("sampleRows-handback");
        const auto results = selftest::run(*ref, bad, 7, "sampling/");
        int tokenRows = 0;
        for (const auto& r : results) {
            if (r.op != "sampleRows") continue;
            ++tokenRows;
            const QString what = QString::fromStdString(r.shape + ": " + r.note);
            QVERIFY2(!r.pass, qPrintable(what));
            // The NaN / masked rows fail their own status check; every other row names its margin.
            QVERIFY2(r.note.find("handed back with the host's decisions") != std::string::npos ||
                         r.note.find("expected status") != std::string::npos,
                     qPrintable(what));
            if (r.shape.rfind("exact ties", 0) == 0)
                QVERIFY2(r.note.find("4 tied row(s) handed back to the host") != std::string::npos, qPrintable(what));
        }
        QVERIFY(tokenRows > 10);
    }

    // The rule itself: within twice (8n + 256)·2⁻⁵³ of an edge a hand-back is due, beyond it not; no decision
    // (greedy: both margins infinite) is never due.
    void dueHandBackRule() {
        const double inf = std::numeric_limits<double>::infinity();
        const int64_t n = 151552;
        const double bound = 2.0 * (8.0 * double(n) + 256.0) * 0x1.0p-53;
        QVERIFY(selftest::handBackIsDue(SampleMargins{0.0, inf, n, 1.0}));
        QVERIFY(selftest::handBackIsDue(SampleMargins{inf, bound, n, 1.0}));
        QVERIFY(!selftest::handBackIsDue(SampleMargins{inf, bound * 1.01, n, 1.0}));
        QVERIFY(!selftest::handBackIsDue(SampleMargins{1e-3, 1e-3, n, 1.0}));
        QVERIFY(!selftest::handBackIsDue(SampleMargins{inf, inf, n, 1.0}));
        QVERIFY(selftest::handBackIsDue(SampleMargins{inf, bound, n, 1.0}) &&
                !selftest::handBackIsDue(SampleMargins{inf, bound, 1000, 1.0}));  // the bound grows with n
    }

    void cliExitCodes() {
        // CPU against itself passes (exit 0) and prints the table; a filter matching nothing fails (1);
        // an unknown backend is bad input (2).
        // (--model none: the op checks alone; cliDefaultModels checks the model stage.)
        auto ok = ts::test::runCli({"selftest", "--backend", "cpu", "--filter", "math/", "--quiet", "--model", "none"});
        QCOMPARE(ok.code, 0);
        QVERIFY(ok.out.contains("selftest: passed"));
        QVERIFY2(!ok.out.contains("selftest: models:"), qPrintable(ok.out));
        auto none = ts::test::runCli({"selftest", "--backend", "cpu", "--filter", "no-such-case", "--model", "none"});
        QCOMPARE(none.code, 1);
        auto bad = ts::test::runCli({"selftest", "--backend", "tpu"});
        QCOMPARE(bad.code, 2);
        QVERIFY(bad.err.contains("--backend must be auto, cpu or cuda"));
        auto noModel = ts::test::runCli({"selftest", "--backend", "cpu", "--model", "/nonexistent/model"});
        QCOMPARE(noModel.code, 2);
        QVERIFY(noModel.err.contains("is not a model directory"));
        auto badJson = ts::test::runCli({"selftest", "--backend", "cpu", "--json", "/nonexistent/dir/r.json"});
        QCOMPARE(badJson.code, 2);
        QVERIFY(badJson.err.contains("--json: cannot write"));
        // bench-device: bad input is refused before any backend is opened or timed.
        auto badWhat = ts::test::runCli({"bench-device", "--backend", "cpu", "--what", "exl3,gemm"});
        QCOMPARE(badWhat.code, 2);
        QVERIFY(badWhat.err.contains("'gemm' is not one of exl3, exl3-moe, exl3-gemv4, exl3-trace, exl3-prefill, mla, kda"));
        auto badReps = ts::test::runCli({"bench-device", "--backend", "cpu", "--reps", "0"});
        QCOMPARE(badReps.code, 2);
        auto badBackend = ts::test::runCli({"bench-device", "--backend", "tpu"});
        QCOMPARE(badBackend.code, 2);
        QVERIFY(badBackend.err.contains("--backend must be auto, cpu or cuda"));
        // --sms (an SM partition, kernels/cuda/cuda_partition.cu) takes a count, and --sm-limits (a GB10 SM's limits
        // on this GPU's SMs, kernels/cuda/sm_limits.h) a known name, both checked before any backend opens.
        auto badSms = ts::test::runCli({"bench-device", "--backend", "cpu", "--sms", "many", "--what", ""});
        QCOMPARE(badSms.code, 2);
        QVERIFY2(badSms.err.contains("--sms"), qPrintable(badSms.err));
        auto badLimits = ts::test::runCli({"bench-device", "--sm-limits", "gb11", "--what", ""});
        QCOMPARE(badLimits.code, 2);
        QVERIFY2(badLimits.err.contains("--sm-limits: 'gb11' is not a known SM (gb10)"), qPrintable(badLimits.err));
        // Both only for a backend on a GPU: the cpu backend is refused; "auto" means CUDA, so without a GPU (CI) it
        // is refused rather than timed on the CPU, and with one the header says what ran.
        struct GpuFlag {
            const char* flag;
            const char* value;
            const char* header;  // in the header line when a GPU ran it
        };
        for (const GpuFlag& f : {GpuFlag{"--sms", "48", " SMs"}, GpuFlag{"--sm-limits", "gb10", "with a gb10 SM's limits"}}) {
            auto onCpu = ts::test::runCli({"bench-device", "--backend", "cpu", f.flag, f.value, "--what", ""});
            QCOMPARE(onCpu.code, 2);
            QVERIFY2(onCpu.err.contains(QString(f.flag) + ": the cpu backend does not run on a GPU's SMs"), qPrintable(onCpu.err));
            auto onAuto = ts::test::runCli({"bench-device", f.flag, f.value, "--what", ""});
            if (onAuto.code == 0)
                QVERIFY2(onAuto.out.contains("backend cuda") && onAuto.out.contains(f.header), qPrintable(onAuto.out));
            else
                QVERIFY2(onAuto.code == 2 && onAuto.err.contains("--backend cuda:"), qPrintable(onAuto.err));
        }
    }

    // Without --model the whole-model stage runs on the embedded models (found through the source tree this binary
    // was built from): the EXL3 default model and its BF16 original, fp32 and fp8 KV, prefill and decode — 8 rows,
    // each with compared rows — and the header names them.
    void cliDefaultModels() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString json = dir.filePath(QStringLiteral("selftest.json"));
        auto r = ts::test::runCli({"selftest", "--backend", "cpu", "--filter", "math/", "--quiet", "--json", json}, 300000);
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains("selftest: models: ") && r.out.contains("(the embedded ones;"), qPrintable(r.out));
        QFile f(json);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const auto models = nlohmann::json::parse(f.readAll().toStdString()).at("models");
        QCOMPARE(int(models.size()), 8);
        std::set<std::string> names;
        for (const auto& m : models) {
            names.insert(std::filesystem::path(m.at("model").get<std::string>()).filename().string());
            QVERIFY(m.at("pass").get<bool>());
            QVERIFY(m.at("rows").get<int64_t>() > 0);
        }
        QCOMPARE(names, (std::set<std::string>{"glm5-next-tiny-exl3", "glm5-next-tiny"}));
    }

    // bench-device --what exl3-trace on a backend without the trace kernels: the K = 4 MUL1 GEMV is still timed,
    // and its trace says that it needs CUDA — in the output and in the JSON's "traces" (one, naming the call) —
    // rather than inventing phases; exit 0.
    void benchTraceWithoutCuda() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString json = dir.filePath(QStringLiteral("bench.json"));
        auto r = ts::test::runCli({"bench-device", "--backend", "cpu", "--what", "exl3-trace", "--reps", "1", "--json", json},
                                  300000);
        QCOMPARE(r.code, 0);
        QVERIFY2(r.out.contains("trace of the GEMV at batch 1: needs the CUDA backend"), qPrintable(r.out));
        QFile f(json);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const auto j = nlohmann::json::parse(f.readAll().toStdString());
        const auto& traces = j.at("exl3").at("traces");
        QCOMPARE(int(traces.size()), 1);
        QCOMPARE(QString::fromStdString(traces[0].at("label").get<std::string>()), QStringLiteral("the GEMV at batch 1"));
        QVERIFY(!traces[0].contains("alone") && !traces[0].contains("back_to_back"));
    }
};

QTEST_GUILESS_MAIN(TestOpSelftest)
#include "test_op_selftest.moc"
