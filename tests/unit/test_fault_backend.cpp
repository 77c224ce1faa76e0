// The backend decorators (kernels/forwarding_backend.h and the two built on it): a ForwardingBackend passes every
// call through unchanged — results, the batched forms, graph regions and the aside stream reach the wrapped
// backend; FaultBackend fails exactly the planned call (a lost device: that one and every call after it; an
// error: that one only; a trap: the device asked to fail for real, refused without one), TS_FAULT_OP is parsed
// strictly and makeBackend wraps only when it is set; a model's unload survives a backend that cannot release; and
// ProfilingBackend books the ops it timed, not allocations, transfers or declined calls.
#include <QtTest>

#include <algorithm>
#include <cstring>
#include <functional>
#include <tuple>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "fault_backend.h"
#include "model/glm5_next.h"
#include "profiling_backend.h"
#include "../common/stderr_capture.h"

using namespace ts;

namespace {

// Records what reaches the backend below the decorator under test. The batched ops other than
// causalConvSiluBatch, the MoE and sampling paths and the memory queries are recorded, not run.
class RecordingBackend final : public ForwardingBackend {
public:
    RecordingBackend() : ForwardingBackend(makeCpuBackend()) {}
    std::vector<std::string> calls;
    Buffer allocUninit(size_t bytes) override {
        calls.push_back("allocUninit");
        return ForwardingBackend::allocUninit(bytes);
    }
    void preloadWeight(const WeightView&) override { calls.push_back("preloadWeight"); }
    void releaseWeights() override { calls.push_back("releaseWeights"); }
    void causalConvSiluBatch(const Buffer& x, const int64_t* rows, int64_t nSeqs, int64_t C, int K, const Buffer& w,
                             const Buffer* convStates, const Buffer& out) override {
        calls.push_back("causalConvSiluBatch");
        ForwardingBackend::causalConvSiluBatch(x, rows, nSeqs, C, K, w, convStates, out);
    }
    void kdaRecurrentBatch(const Buffer&, const int64_t*, int64_t, int64_t, int64_t, const Buffer&, const Buffer&,
                           const Buffer*, const Buffer&) override {
        calls.push_back("kdaRecurrentBatch");
    }
    void mlaCacheWriteBatch(const Buffer&, const SeqRows*, int64_t, int64_t, KvCacheDtype, const Buffer&) override {
        calls.push_back("mlaCacheWriteBatch");
    }
    void mlaSparseAttentionBatch(const Buffer&, const SeqRows*, int64_t, int64_t, int64_t, const Buffer&, KvCacheDtype,
                                 const Buffer&, int64_t, float, const Buffer&) override {
        calls.push_back("mlaSparseAttentionBatch");
    }
    void indexerSelectBatch(const Buffer&, const Buffer&, const SeqRows*, int64_t, int64_t, int64_t, int64_t, int64_t,
                            KvCacheDtype, const Buffer&, const Buffer&, IndexerStats* const*) override {
        calls.push_back("indexerSelectBatch");
    }
    void indexerCacheWriteBatch(const Buffer&, const Buffer&, const SeqRows*, int64_t, int64_t, int64_t, const Buffer&,
                                KvCacheDtype, const Buffer*, const Buffer&) override {
        calls.push_back("indexerCacheWriteBatch");
    }
    bool moeExpertsFused(const Buffer&, int64_t, int64_t, int64_t, const int32_t*, const float*, int64_t,
                         const WeightView*, const WeightView*, const WeightView*, int64_t, float, const Buffer&) override {
        calls.push_back("moeExpertsFused");
        return true;
    }
    bool moeRouteDevice(const Buffer&, int64_t, const WeightView&, const Buffer&, int64_t, int64_t, int64_t, int64_t, bool,
                        float, const Buffer&, const Buffer&) override {
        calls.push_back("moeRouteDevice");
        return true;
    }
    bool moeExpertsFusedDevice(const Buffer&, int64_t, int64_t, int64_t, const Buffer&, const Buffer&, int64_t,
                               const WeightView*, const WeightView*, const WeightView*, int64_t, float,
                               const Buffer&) override {
        calls.push_back("moeExpertsFusedDevice");
        return true;
    }
    bool sampleRows(const Buffer&, int64_t, int64_t, const DeviceSampleRequest*, SampleOutput*) override {
        calls.push_back("sampleRows");
        return true;
    }
    void beginGraphRegion(uint64_t key) override { calls.push_back("beginGraphRegion " + std::to_string(key)); }
    void endGraphRegion(GraphRegionEnd how) override {
        calls.push_back(how == GraphRegionEnd::Completed ? "endGraphRegion"
                        : how == GraphRegionEnd::Left    ? "endGraphRegion left"
                                                         : "endGraphRegion failed");
    }
    bool setGraphsEnabled(bool on) override {
        calls.push_back(on ? "graphs on" : "graphs off");
        return true;
    }
    GraphStats graphStats() const override {
        GraphStats g;
        g.replays = 7;
        return g;
    }
    bool beginAside() override {
        calls.push_back("beginAside");
        return true;
    }
    void endAside() override { calls.push_back("endAside"); }
    void joinAside() override { calls.push_back("joinAside"); }
    bool deviceMemory(DeviceMemory* out) const override {
        out->totalBytes = 1234;
        return true;
    }
    void rebaseDeviceMemory(int64_t freeNowBytes) override { calls.push_back("rebase " + std::to_string(freeNowBytes)); }
    ComputeUnits computeUnits() const override { return {48, 132}; }
    // As a CUDA backend's after its trap kernel when trapThrows (the context lost), else as one whose trap did not
    // stop the device.
    bool trapThrows = false;
    bool trapDevice() override {
        calls.push_back("trapDevice");
        if (trapThrows)
            fail(ErrorKind::DeviceLost, "CUDA: the test device trapped; this process's GPU context is lost");
        return true;
    }
};

// A packed linear that writes zeros: enough for a host backend's linear() to take the packed path.
class ZeroPackedLinear final : public PackedLinear {
public:
    int64_t inFeatures() const override { return 4; }
    int64_t outFeatures() const override { return 2; }
    size_t packedBytes() const override { return 8; }
    void forwardHost(const float*, int64_t T, float* y) const override { std::fill(y, y + T * 2, 0.0f); }
};

Buffer randomBuffer(Backend& b, size_t n, uint32_t seed) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> h(n);
    for (float& v : h) v = u(g);
    return b.upload(h.data(), n * 4);
}

std::vector<float> downloaded(Backend& b, const Buffer& x, size_t n) {
    std::vector<float> h(n);
    b.download(x, h.data(), n * 4);
    return h;
}

// The error a call throws, or "" with kind Internal when it returns.
std::pair<ErrorKind, std::string> outcome(const std::function<void()>& call) {
    try {
        call();
    } catch (const Error& e) {
        return {e.kind(), e.what()};
    }
    return {ErrorKind::Internal, ""};
}

}  // namespace

// Collects the label of every hooked call.
class LabelRecorder final : public ForwardingBackend {
public:
    LabelRecorder() : ForwardingBackend(makeCpuBackend()) {}
    std::set<std::string> labels;

protected:
    void before(const char* op, OpKind) override { labels.insert(op); }
};

class TestFaultBackend : public QObject {
    Q_OBJECT
private slots:
    void parsesPlans() {
        FaultPlan p = parseFaultPlan("embedding@3");
        QCOMPARE(p.op, std::string("embedding"));
        QCOMPARE(p.call, int64_t(3));
        QCOMPARE(p.kind, FaultPlan::Kind::DeviceLost);
        p = parseFaultPlan("linear@40:error");
        QCOMPARE(p.op, std::string("linear"));
        QCOMPARE(p.call, int64_t(40));
        QCOMPARE(p.kind, FaultPlan::Kind::Error);
        p = parseFaultPlan("*@1:device-lost");
        QCOMPARE(p.op, std::string("*"));
        QCOMPARE(p.kind, FaultPlan::Kind::DeviceLost);
        p = parseFaultPlan("embedding@5:trap");
        QCOMPARE(p.call, int64_t(5));
        QCOMPARE(p.kind, FaultPlan::Kind::Trap);  // the device is lost, not acted out by the decorator
        for (const char* bad : {"", "embedding", "@3", "embedding@", "embedding@0", "embedding@-1", "embedding@3x",
                                "embedding@ 3", "embeding@3", "linear (packed)@3", "embedding@3:", "embedding@3:oom",
                                "embedding@3:trapped",
                                "embedding@99999999999999"}) {
            const auto [kind, what] = outcome([&] { parseFaultPlan(bad); });
            QVERIFY2(kind == ErrorKind::InvalidArgument && !what.empty(), bad);
            QVERIFY2(what.find("expected <op>@<call>") != std::string::npos, what.c_str());
            QVERIFY2(what.find("kdaRecurrentBatch") != std::string::npos, what.c_str());  // the op names are listed
        }
    }

    void forwardsResultsAndEverythingElse() {
        auto owned = std::make_unique<RecordingBackend>();
        RecordingBackend& rec = *owned;
        FaultBackend f(std::move(owned), parseFaultPlan("embedding@1000000"));
        auto plain = makeCpuBackend();
        QCOMPARE(f.name(), plain->name());

        const int64_t T = 3, D = 64;
        const Buffer x = randomBuffer(f, size_t(T * D), 1), w = randomBuffer(f, size_t(D), 2);
        const Buffer y = f.alloc(size_t(T * D) * 4);
        f.rmsnorm(x, T, D, w, 1e-6f, y);
        const Buffer px = randomBuffer(*plain, size_t(T * D), 1), pw = randomBuffer(*plain, size_t(D), 2);
        const Buffer py = plain->alloc(size_t(T * D) * 4);
        plain->rmsnorm(px, T, D, pw, 1e-6f, py);
        const std::vector<float> got = downloaded(f, y, size_t(T * D)), want = downloaded(*plain, py, size_t(T * D));
        QVERIFY(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);

        // The batched form goes to the wrapped backend's batched op, not Backend's per-sequence default.
        const int64_t C = 8, K = 4, rows[2] = {2, 1};
        const Buffer cx = randomBuffer(f, size_t(3 * C), 3), cw = randomBuffer(f, size_t(C * K), 4);
        const Buffer states[2] = {f.alloc(size_t(C * (K - 1)) * 4), f.alloc(size_t(C * (K - 1)) * 4)};
        const Buffer cout = f.alloc(size_t(3 * C) * 4);
        f.causalConvSiluBatch(cx, rows, 2, C, int(K), cw, states, cout);

        // Everything else reaches the wrapped backend as it was called.
        f.allocUninit(16);
        f.preloadWeight(WeightView{});
        f.releaseWeights();
        f.kdaRecurrentBatch({}, nullptr, 0, 0, 0, {}, {}, nullptr, {});
        f.mlaCacheWriteBatch({}, nullptr, 0, 0, KvCacheDtype::Fp8, {});
        f.mlaSparseAttentionBatch({}, nullptr, 0, 0, 0, {}, KvCacheDtype::Fp8, {}, 0, 1.0f, {});
        f.indexerSelectBatch({}, {}, nullptr, 0, 0, 0, 0, 0, KvCacheDtype::Fp8, {}, {}, nullptr);
        f.indexerCacheWriteBatch({}, {}, nullptr, 0, 0, 0, {}, KvCacheDtype::Fp8, nullptr, {});
        QVERIFY(f.moeExpertsFused({}, 0, 0, 0, nullptr, nullptr, 0, nullptr, nullptr, nullptr, 0, 0.0f, {}));
        QVERIFY(f.moeRouteDevice({}, 0, WeightView{}, {}, 0, 0, 0, 0, false, 1.0f, {}, {}));
        QVERIFY(f.moeExpertsFusedDevice({}, 0, 0, 0, {}, {}, 0, nullptr, nullptr, nullptr, 0, 0.0f, {}));
        QVERIFY(f.sampleRows({}, 0, 0, nullptr, nullptr));
        QVERIFY(f.setGraphsEnabled(true));
        f.beginGraphRegion(42);
        f.endGraphRegion(Backend::GraphRegionEnd::Failed);
        f.beginGraphRegion(43);
        f.endGraphRegion(Backend::GraphRegionEnd::Left);
        QCOMPARE(f.graphStats().replays, int64_t(7));
        QVERIFY(f.beginAside());
        f.endAside();
        f.joinAside();
        DeviceMemory dm;
        QVERIFY(f.deviceMemory(&dm));
        QCOMPARE(dm.totalBytes, int64_t(1234));
        f.rebaseDeviceMemory(99);
        QCOMPARE(f.computeUnits().used, 48);
        QVERIFY(f.trapDevice());
        const std::vector<std::string> want2 = {
            "causalConvSiluBatch", "allocUninit", "preloadWeight", "releaseWeights", "kdaRecurrentBatch",
            "mlaCacheWriteBatch", "mlaSparseAttentionBatch", "indexerSelectBatch", "indexerCacheWriteBatch",
            "moeExpertsFused", "moeRouteDevice", "moeExpertsFusedDevice", "sampleRows", "graphs on",
            "beginGraphRegion 42", "endGraphRegion failed",
            "beginGraphRegion 43", "endGraphRegion left", "beginAside", "endAside", "joinAside", "rebase 99",
            "trapDevice"};
        QCOMPARE(rec.calls, want2);
        QVERIFY(!f.fired());
    }

    // "linear" counts dense and packed calls alike, and the message names the packed one's label.
    void linearCountsPackedCallsToo() {
        FaultBackend f(makeCpuBackend(), parseFaultPlan("linear@2:error"));
        const std::vector<float> wd(8, 0.5f);
        WeightView dense;
        dense.data = wd.data();
        dense.rows = 2;
        dense.cols = 4;
        const ZeroPackedLinear pl;
        const WeightView packed = WeightView::of(pl);
        const Buffer x = randomBuffer(f, 4, 9), y = f.alloc(8);
        f.linear(x, 1, dense, y);  // call 1
        const auto [kind, what] = outcome([&] { f.linear(x, 1, packed, y); });  // call 2
        QCOMPARE(kind, ErrorKind::Internal);
        QVERIFY2(what.find("call 2 of linear (linear (packed))") != std::string::npos, what.c_str());
        f.linear(x, 1, packed, y);  // call 3 runs: the packed path, zeros
        QCOMPARE(downloaded(f, y, 2), (std::vector<float>{0.0f, 0.0f}));
    }

    void lostDeviceFailsThatCallAndEveryOneAfter() {
        FaultBackend f(makeCpuBackend(), parseFaultPlan("rmsnorm@2"));
        const int64_t D = 16;
        const Buffer x = randomBuffer(f, size_t(D), 5), w = randomBuffer(f, size_t(D), 6), y = f.alloc(size_t(D) * 4);
        f.rmsnorm(x, 1, D, w, 1e-6f, y);  // call 1 runs
        f.add(x, y, D);                   // other ops do not count
        QVERIFY(!f.fired());
        auto [kind, what] = outcome([&] { f.rmsnorm(x, 1, D, w, 1e-6f, y); });
        QCOMPARE(kind, ErrorKind::DeviceLost);
        QVERIFY2(what.find("call 2 of rmsnorm") != std::string::npos, what.c_str());
        QVERIFY(f.fired());
        // As on a CUDA context after a sticky error: every call fails from here on, allocations and transfers too.
        for (const auto& call : std::vector<std::function<void()>>{
                 [&] { f.add(x, y, D); }, [&] { f.alloc(16); }, [&] { f.synchronize(); },
                 [&] { std::vector<float> h(static_cast<size_t>(D)); f.download(y, h.data(), h.size() * 4); }}) {
            std::tie(kind, what) = outcome(call);
            QCOMPARE(kind, ErrorKind::DeviceLost);
            QVERIFY2(what.find("after the injected loss") != std::string::npos, what.c_str());
        }
    }

    void errorFailsOnlyThatCall() {
        FaultBackend f(makeCpuBackend(), parseFaultPlan("add@2:error"));
        const int64_t n = 8;
        const Buffer x = randomBuffer(f, size_t(n), 7), y = f.alloc(size_t(n) * 4);
        f.add(x, y, n);
        auto [kind, what] = outcome([&] { f.add(x, y, n); });
        QCOMPARE(kind, ErrorKind::Internal);
        QVERIFY2(what.find("call 2 of add failed") != std::string::npos, what.c_str());
        f.add(x, y, n);  // the third runs: y = 2x (the failed call added nothing)
        const std::vector<float> hx = downloaded(f, x, size_t(n)), hy = downloaded(f, y, size_t(n));
        for (int64_t i = 0; i < n; ++i) QCOMPARE(hy[size_t(i)], 2 * hx[size_t(i)]);
    }

    // The self-test's form: a borrowed backend, a one-time plan re-aimed step by step, counting from each rearm.
    void rearmCountsFromNowAndBorrowedBackendSurvives() {
        auto owner = makeCpuBackend();
        const int64_t n = 8;
        const Buffer x = randomBuffer(*owner, size_t(n), 11), y = owner->alloc(size_t(n) * 4);
        owner->zero(y);
        {
            FaultBackend f(*owner, FaultPlan{"add", 0, FaultPlan::Kind::Error, "test: armed"});
            f.add(x, y, n);  // disarmed: runs (y = x)
            f.add(x, y, n);  // y = 2x
            f.rearm(2);
            f.add(x, y, n);  // the first from now runs: y = 3x
            auto [kind, what] = outcome([&] { f.add(x, y, n); });
            QCOMPARE(kind, ErrorKind::Internal);
            QVERIFY2(what.find("test: armed: call 2 of add failed") != std::string::npos, what.c_str());
            f.add(x, y, n);  // one-time: y = 4x
            f.rearm(1);
            QCOMPARE(outcome([&] { f.add(x, y, n); }).first, ErrorKind::Internal);
            f.rearm(3);
            f.rearm(0);  // disarmed again before it fired
            for (int i = 0; i < 4; ++i) f.add(x, y, n);  // y = 8x
            QVERIFY(f.fired());
        }
        // The borrowed backend is still its owner's and alive, with every add that ran and none that failed.
        const std::vector<float> hx = downloaded(*owner, x, size_t(n)), hy = downloaded(*owner, y, size_t(n));
        for (int64_t i = 0; i < n; ++i) {
            float want = 0.0f;
            for (int k = 0; k < 8; ++k) want += hx[size_t(i)];  // the same float adds, in the same order
            QCOMPARE(hy[size_t(i)], want);
        }
        // A lost device is not found again.
        FaultBackend lost(*owner, parseFaultPlan("add@1"));
        QCOMPARE(outcome([&] { lost.rearm(1); }).first, ErrorKind::Internal);
    }

    // A trap plan: the planned call asks the device to trap and throws what the device's backend throws; the
    // decorator does not fail later calls itself (a lost CUDA context does that). Refused where there is no device.
    void trapAsksTheDeviceItself() {
        auto owned = std::make_unique<RecordingBackend>();
        RecordingBackend& rec = *owned;
        rec.trapThrows = true;
        FaultBackend f(std::move(owned), parseFaultPlan("add@2:trap"));
        const int64_t n = 8;
        const Buffer x = randomBuffer(f, size_t(n), 12), y = f.alloc(size_t(n) * 4);
        f.add(x, y, n);
        QVERIFY(rec.calls.empty());
        auto [kind, what] = outcome([&] { f.add(x, y, n); });
        QCOMPARE(kind, ErrorKind::DeviceLost);
        QVERIFY2(what.find("the test device trapped") != std::string::npos, what.c_str());
        QCOMPARE(rec.calls, std::vector<std::string>{"trapDevice"});
        QVERIFY(f.fired());
        f.add(x, y, n);  // reaches the backend: only the device says it is lost
        QCOMPARE(rec.calls.size(), size_t(1));
        QCOMPARE(outcome([&] { f.rearm(1); }).first, ErrorKind::Internal);

        rec.trapThrows = false;  // a trap that did not stop the device is an error of its own, not a pass
        FaultBackend quiet(rec, parseFaultPlan("zero@1:trap"));
        std::tie(kind, what) = outcome([&] { quiet.zero(y); });
        QCOMPARE(kind, ErrorKind::Internal);
        QVERIFY2(what.find("call 1 of zero: the device trapped but the backend reported no error") != std::string::npos,
                 what.c_str());

        FaultBackend cpu(makeCpuBackend(), parseFaultPlan("zero@1:trap"));
        std::tie(kind, what) = outcome([&] { cpu.zero(cpu.alloc(16)); });
        QCOMPARE(kind, ErrorKind::Internal);
        QVERIFY2(what.find("the cpu backend has no device to trap") != std::string::npos, what.c_str());

        qputenv("TS_FAULT_OP", "embedding@3:trap");  // makeBackend refuses it up front on the CPU
        std::tie(kind, what) = outcome([] { makeBackend("cpu"); });
        qunsetenv("TS_FAULT_OP");
        QCOMPARE(kind, ErrorKind::InvalidArgument);
        QVERIFY2(what.find("TS_FAULT_OP=embedding@3:trap: a trap needs a GPU backend") != std::string::npos,
                 what.c_str());
    }

    void anyOpCountsEveryHookedCall() {
        FaultBackend f(makeCpuBackend(), parseFaultPlan("*@3:error"));
        const Buffer x = f.alloc(16);                 // 1
        f.zero(x);                                    // 2
        auto [kind, what] = outcome([&] { f.scale(x, 4, 2.0f); });  // 3
        QCOMPARE(kind, ErrorKind::Internal);
        QVERIFY2(what.find("any op (scale)") != std::string::npos, what.c_str());
        f.scale(x, 4, 2.0f);
    }

    // opNames() is the list TS_FAULT_OP is checked against: every label a model forward hooks must be in it (a
    // hooked op missing there could never be aimed at).
    void opNamesCoverTheLabelsAForwardHooks() {
        LabelRecorder rec;
        const Glm5NextModel model(TS_SOURCE_DIR "/tests/golden/data/tiny_b", rec);
        auto state = model.newSequence(KvCacheDtype::Fp8);
        const std::vector<int32_t> ids = {1, 7, 3, 4, 5};
        model.forward(ids.data(), int64_t(ids.size()), *state);
        QVERIFY(rec.labels.size() >= 15);
        const auto& names = ForwardingBackend::opNames();
        for (const std::string& l : rec.labels) {
            const std::string base = l.substr(0, l.find(" ("));
            QVERIFY2(std::find(names.begin(), names.end(), base) != names.end(), l.c_str());
        }
    }

    // The model's destructor lets its weights go through the backend. One that throws there (a device lost in a way
    // it does not absorb) must not end the process in std::terminate, which would turn serve's exit 3 after a lost GPU
    // into an abort: the error is logged and the destructor returns.
    void modelUnloadSurvivesABackendThatCannotRelease() {
        struct CannotRelease final : ForwardingBackend {
            CannotRelease() : ForwardingBackend(makeCpuBackend()) {}
            int releases = 0;
            void releaseWeights() override {
                ++releases;
                fail(ErrorKind::DeviceLost, "CUDA: cudaStreamSynchronize failed: unspecified launch failure");
            }
        } b;
        const QString err = test::stderrOf([&] {
            const Glm5NextModel model(TS_SOURCE_DIR "/tests/golden/data/tiny_b", b);
        });
        QCOMPARE(b.releases, 1);
        QVERIFY2(err.contains(QStringLiteral("model: releasing the weights on the cpu backend failed: CUDA: "
                                             "cudaStreamSynchronize failed")),
                 qPrintable(err));
    }

    void makeBackendWrapsOnlyWhenAsked() {
        qunsetenv("TS_FAULT_OP");
        QVERIFY(!dynamic_cast<FaultBackend*>(makeBackend("cpu").get()));
        qputenv("TS_FAULT_OP", "embedding@2:error");
        std::unique_ptr<Backend> b = makeBackend("cpu");
        auto* f = dynamic_cast<FaultBackend*>(b.get());
        QVERIFY(f);
        QCOMPARE(f->plan().call, int64_t(2));
        QCOMPARE(b->name(), std::string("cpu"));
        qputenv("TS_FAULT_OP", "embedding@two");
        const auto [kind, what] = outcome([] { makeBackend("cpu"); });
        const auto [checkKind, checkWhat] = outcome([] { checkBackendName("cpu"); });  // the same error up front
        qunsetenv("TS_FAULT_OP");
        QCOMPARE(checkKind, ErrorKind::InvalidArgument);
        QCOMPARE(checkWhat, what);
        QCOMPARE(kind, ErrorKind::InvalidArgument);
        QVERIFY2(what.find("TS_FAULT_OP=embedding@two") != std::string::npos, what.c_str());
    }

    // A decorator over a borrowed backend (the self-test's failed-steps check wraps the backend under test)
    // forwards to it and leaves it to its owner: still there, and usable, after the decorator is gone.
    void borrowedBackendStaysWithItsOwner() {
        RecordingBackend rec;
        {
            ForwardingBackend f(static_cast<Backend&>(rec));  // not the (deleted) copy constructor
            QCOMPARE(&f.inner(), static_cast<Backend*>(&rec));
            QCOMPARE(f.allocUninit(16).size(), size_t(16));
        }
        QCOMPARE(rec.allocUninit(8).size(), size_t(8));
        QCOMPARE(rec.calls, (std::vector<std::string>{"allocUninit", "allocUninit"}));
    }

    void profilingBooksOpsOnly() {
        auto owned = std::make_unique<RecordingBackend>();
        RecordingBackend& rec = *owned;
        ProfilingBackend p(std::move(owned));
        // Off under profiling, whatever the wrapped backend offers: each op must run when it is called.
        QVERIFY(!p.setGraphsEnabled(true));
        p.beginGraphRegion(1);
        p.endGraphRegion(Backend::GraphRegionEnd::Completed);
        QCOMPARE(p.graphStats().replays, int64_t(0));
        QVERIFY(!p.beginAside());
        p.endAside();
        p.joinAside();
        QVERIFY(rec.calls.empty());
        const int64_t n = 32;
        const Buffer x = randomBuffer(p, size_t(n), 8), y = p.alloc(size_t(n) * 4);
        p.add(x, y, n);
        p.add(x, y, n);
        p.scale(y, n, 0.5f);
        std::vector<float> h(static_cast<size_t>(n));
        p.download(y, h.data(), h.size() * 4);
        QVERIFY(p.sampleRows(y, n, 0, nullptr, nullptr));  // taken by the wrapped backend: a row
        QCOMPARE(int(p.rows().size()), 3);
        QCOMPARE(p.rows().at("add").calls, int64_t(2));
        QCOMPARE(p.rows().at("scale").calls, int64_t(1));
        QCOMPARE(p.rows().at("sampleRows").calls, int64_t(1));
        ProfilingBackend cpu(makeCpuBackend());
        QVERIFY(!cpu.sampleRows(y, n, 0, nullptr, nullptr));  // declined by the CPU: nothing ran, no row
        QVERIFY(cpu.rows().empty());
        QVERIFY(p.report().find("add") != std::string::npos);
    }
};

QTEST_APPLESS_MAIN(TestFaultBackend)
#include "test_fault_backend.moc"
