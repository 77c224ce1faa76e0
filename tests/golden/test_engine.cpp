// The engine runtime end to end on a golden checkpoint: continuous batching gives each request exactly
// what it gets alone; a prefix-cache hit gives the same logprobs as a cold prefill; preempted and resumed
// requests produce the same tokens; seeded sampling reproduces; nothing leaks after 1,000 random requests
// with aborts and preemptions; bad requests are refused up front.
#include <QtTest>

#include <algorithm>
#include <map>
#include <mutex>
#include <random>

#include "../common/golden_data.h"
#include "../common/poisoned_model.h"
#include "core/env_switch.h"
#include "core/error.h"
#include "fault_backend.h"
#include "runtime/engine.h"

using namespace ts;

namespace {

const QString kModel = QStringLiteral(TS_SOURCE_DIR "/tests/golden/data/tiny_b");

struct Result {
    std::string text;
    std::string stopString;
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::vector<std::vector<std::pair<int32_t, float>>> tops;
    FinishReason reason = FinishReason::None;
    std::string error;
    int64_t cached = 0;
    bool done = false;
};

// Collects the events of many requests (the callback runs on the engine thread).
struct Collector {
    std::mutex mutex;
    std::map<int64_t, Result> results;
    Engine::Callback cb() {
        return [this](const EngineEvent& e) {
            std::lock_guard<std::mutex> lock(mutex);
            Result& r = results[e.requestId];
            r.text += e.text;
            if (e.type == EngineEvent::Type::Token) {
                r.tokens.push_back(e.token);
                r.logprobs.push_back(e.logprob);
                r.tops.push_back(e.top);
            } else {
                r.reason = e.reason;
                r.error = e.error;
                r.stopString = e.stopString;
                r.cached = e.cachedPromptTokens;
                r.done = true;
            }
        };
    }
};

std::vector<int32_t> prompt(uint32_t seed, int len, int vocab) {
    std::mt19937 g(seed);
    std::vector<int32_t> p(static_cast<size_t>(len));
    for (auto& t : p) t = int32_t(g() % uint32_t(vocab - 10)) + 5;
    return p;
}

SamplingParams greedy(int maxTokens) {
    SamplingParams p;
    p.temperature = 0;
    p.maxTokens = maxTokens;
    p.ignoreEos = true;
    return p;
}

EngineConfig smallConfig() {
    EngineConfig c;
    c.kvBudgetBytes = 16 << 20;
    return c;
}

// The engine's config with two sequence slots: a third request waits for one.
EngineConfig twoSlots() {
    EngineConfig c = smallConfig();
    c.maxNumSeqs = 2;
    return c;
}

// The golden model on a CPU backend that fails as `plan` says (kernels/fault_backend.h).
struct FaultyModel {
    std::unique_ptr<Backend> backend;
    FaultBackend* fault = nullptr;
    std::unique_ptr<Glm5NextModel> model;
    explicit FaultyModel(const std::string& plan) {
        auto owned = std::make_unique<FaultBackend>(makeCpuBackend(), parseFaultPlan(plan));
        fault = owned.get();
        backend = std::move(owned);
        model = std::make_unique<Glm5NextModel>(kModel.toStdString(), *backend);
    }
};

Result runAlone(const Glm5NextModel& m, const std::vector<int32_t>& p, SamplingParams sp, EngineConfig c = smallConfig()) {
    Engine e(m, c);
    Collector col;
    const int64_t id = e.submit(p, sp, col.cb());
    e.waitIdle();
    return col.results[id];
}

}  // namespace

class TestEngine : public QObject {
    Q_OBJECT
    std::unique_ptr<Backend> m_backend = makeCpuBackend();
    std::unique_ptr<Glm5NextModel> m_model;

private slots:
    void initTestCase() { m_model = std::make_unique<Glm5NextModel>(kModel.toStdString(), *m_backend); }

    void concurrentEqualsAlone() {
        const int V = m_model->text().vocab_size;
        std::vector<std::vector<int32_t>> prompts = {prompt(1, 150, V), prompt(2, 7, V), prompt(3, 300, V), prompt(4, 64, V)};
        Engine e(*m_model, smallConfig());
        Collector col;
        std::vector<int64_t> ids;
        for (const auto& p : prompts) ids.push_back(e.submit(p, greedy(24), col.cb()));
        e.waitIdle();
        const double rateJustAfter = e.metrics().generationTokensPerSecond;  // measured over the last 2 s
        e.verifyIdle();
        for (size_t i = 0; i < prompts.size(); ++i) {
            const Result alone = runAlone(*m_model, prompts[i], greedy(24));
            QCOMPARE(col.results[ids[i]].tokens.size(), size_t(24));
            QCOMPARE(col.results[ids[i]].tokens, alone.tokens);
            QVERIFY(col.results[ids[i]].reason == FinishReason::Length);
        }
        const EngineMetrics m = e.metrics();
        QCOMPARE(m.generationTokens, int64_t(4 * 24));
        QCOMPARE(m.promptTokens, int64_t(150 + 7 + 300 + 64));
        QCOMPARE(m.ttft.count, uint64_t(4));
        QVERIFY(rateJustAfter > 0);
        QTest::qWait(2100);
        QCOMPARE(e.metrics().generationTokensPerSecond, 0.0);  // and an idle engine reads 0
    }

    void prefixHitGivesColdLogprobs() {
        const int V = m_model->text().vocab_size;
        const auto first = prompt(7, 200, V);
        auto follow = first;
        const auto extra = prompt(8, 30, V);
        follow.insert(follow.end(), extra.begin(), extra.end());
        SamplingParams sp = greedy(6);
        sp.logprobs = 5;

        Engine e(*m_model, smallConfig());
        Collector col;
        e.submit(first, greedy(3), col.cb());
        e.waitIdle();
        const int64_t id = e.submit(follow, sp, col.cb());
        e.waitIdle();
        const Result hit = col.results[id];
        QCOMPARE(hit.cached, int64_t(192));  // the first prompt's last full block boundary
        const Result cold = runAlone(*m_model, follow, sp);
        QCOMPARE(cold.cached, int64_t(0));
        QCOMPARE(hit.tokens, cold.tokens);
        QCOMPARE(hit.logprobs, cold.logprobs);  // bit-identical: same logits
        QCOMPARE(hit.tops, cold.tops);
        QVERIFY(e.metrics().prefixHits >= 192);
    }

    void preemptionGivesSameTokens() {
        const int V = m_model->text().vocab_size;
        EngineConfig tight = smallConfig();
        KvPlan probe = KvPlan::make(m_model->text(), tight);
        // Room for about 6 blocks beyond the states: 4 requests growing to 200 tokens cannot all fit.
        tight.kvBudgetBytes = probe.stateBytes + probe.snapshotBytes + 8 * 64 * probe.memory.bytesPerToken;
        Engine e(*m_model, tight);
        Collector col;
        std::vector<std::vector<int32_t>> prompts;
        std::vector<int64_t> ids;
        for (uint32_t i = 0; i < 4; ++i) {
            prompts.push_back(prompt(20 + i, 60, V));
            ids.push_back(e.submit(prompts.back(), greedy(90), col.cb()));
        }
        e.waitIdle();
        e.verifyIdle();
        QVERIFY2(e.metrics().preemptions > 0, "the tight pool must force preemptions");
        for (size_t i = 0; i < prompts.size(); ++i)
            QCOMPARE(col.results[ids[i]].tokens, runAlone(*m_model, prompts[i], greedy(90)).tokens);
    }

    void seededSamplingReproduces() {
        const int V = m_model->text().vocab_size;
        SamplingParams sp;
        sp.temperature = 1.0f;
        sp.topP = 0.9f;
        sp.seed = 1234;
        sp.maxTokens = 20;
        sp.ignoreEos = true;
        const auto p = prompt(30, 40, V);
        const Result a = runAlone(*m_model, p, sp), b = runAlone(*m_model, p, sp);
        QCOMPARE(a.tokens, b.tokens);
        sp.seed = 99;
        QVERIFY(runAlone(*m_model, p, sp).tokens != a.tokens);
    }

    // Gauges follow an abort at once, even when the engine goes idle without another step.
    void abortUpdatesGauges() {
        const int V = m_model->text().vocab_size;
        Engine e(*m_model, smallConfig());
        Collector col;
        const int64_t id = e.submit(prompt(50, 100, V), greedy(100000), col.cb());
        for (int i = 0; i < 200 && e.metrics().running == 0; ++i) QTest::qWait(5);
        QCOMPARE(e.metrics().running, 1);
        QVERIFY(e.abort(id));
        e.waitIdle();
        const EngineMetrics m = e.metrics();
        QCOMPARE(m.running, 0);
        QCOMPARE(m.kvFreeBlocks, m.kvBlocks);
        QCOMPARE(m.requestsAborted, int64_t(1));
        QVERIFY(col.results[id].reason == FinishReason::Abort);
    }

    // A NaN logit (here: a NaN embedding row, as corrupt weights give) fails that one request with the reason;
    // a request batched with it finishes with the tokens it gets alone, and the engine serves on.
    void numericalErrorFailsOneRequest() {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        const int64_t bad = 7;
        const std::string err = test::copyModelWithNanEmbeddingRow(kModel, tmp.path(), bad);
        QVERIFY2(err.empty(), err.c_str());
        Glm5NextModel poisoned(tmp.path().toStdString(), *m_backend);
        const int V = poisoned.text().vocab_size;
        std::vector<int32_t> good = prompt(60, 12, V);
        good.erase(std::remove(good.begin(), good.end(), int32_t(bad)), good.end());
        std::vector<int32_t> nanPrompt = prompt(61, 12, V);
        nanPrompt[5] = int32_t(bad);
        const Result alone = runAlone(poisoned, good, greedy(6));
        QCOMPARE(alone.reason, FinishReason::Length);

        Engine e(poisoned, smallConfig());
        Collector col;
        const std::vector<int64_t> ids = e.submitAll({{nanPrompt, greedy(6), col.cb()}, {good, greedy(6), col.cb()}});
        e.waitIdle();
        const Result& failed = col.results[ids[0]];
        QVERIFY(failed.done);
        QCOMPARE(failed.reason, FinishReason::Error);
        QVERIFY2(failed.error.find("numerical error") != std::string::npos, failed.error.c_str());
        QVERIFY(failed.tokens.empty());
        const Result& ok = col.results[ids[1]];
        QCOMPARE(ok.reason, FinishReason::Length);
        QCOMPARE(ok.tokens, alone.tokens);
        EngineMetrics m = e.metrics();
        QCOMPARE(m.requestsFailed, int64_t(1));
        QCOMPARE(m.requestsFinished, int64_t(1));
        QCOMPARE(m.kvFreeBlocks, m.kvBlocks);
        QCOMPARE(m.running, 0);
        // The engine goes on: the next request is served.
        const int64_t again = e.submit(good, greedy(6), col.cb());
        e.waitIdle();
        QCOMPARE(col.results[again].tokens, alone.tokens);
    }

    // A lost GPU (a CUDA sticky error: ErrorKind::DeviceLost; here a FaultBackend fails the third `embedding` call,
    // the third model step, that way, and every backend call after it): every request fails at once with the
    // reason — the running ones and the one still waiting for a slot — nothing stays held, and the engine refuses
    // new requests instead of failing each later.
    void deviceLostFailsEveryRequestAndStopsTakingMore() {
        const FaultyModel fm("embedding@3");
        const FaultBackend& faulty = *fm.fault;
        const Glm5NextModel& model = *fm.model;
        const EngineConfig ec = twoSlots();
        Engine e(model, ec);
        const int V = model.text().vocab_size;
        Collector col;
        const std::vector<int64_t> ids = e.submitAll({{prompt(70, 10, V), greedy(20), col.cb()},
                                                      {prompt(71, 10, V), greedy(20), col.cb()},
                                                      {prompt(72, 10, V), greedy(20), col.cb()}});
        e.waitIdle();
        QVERIFY(faulty.fired());
        for (int64_t id : ids) {
            const Result& r = col.results[id];
            QVERIFY(r.done);
            QCOMPARE(r.reason, FinishReason::Error);
            QVERIFY2(r.error.find("the GPU failed") != std::string::npos &&
                         r.error.find("call 3 of embedding") != std::string::npos,
                     r.error.c_str());
            QVERIFY(r.tokens.size() < 3);  // stopped at the third step, not run to max_tokens
        }
        QVERIFY2(e.deviceFailure().find("the GPU failed") != std::string::npos, e.deviceFailure().c_str());
        const EngineMetrics m = e.metrics();
        QCOMPARE(m.requestsFailed, int64_t(3));
        QCOMPARE(m.running, 0);
        QCOMPARE(m.waiting, 0);
        QCOMPARE(m.kvFreeBlocks, m.kvBlocks);
        e.verifyIdle();
        try {
            e.submit(prompt(73, 4, V), greedy(2), col.cb());
            QFAIL("a request was taken after the device was lost");
        } catch (const Error& err) {
            QCOMPARE(err.kind(), ErrorKind::DeviceLost);
            QVERIFY2(std::string(err.what()).find("Restart the process") != std::string::npos, err.what());
        }
        // Any other step failure leaves the engine running (transientStepFailureFailsOnlyThatStep); so does a fresh
        // engine on a working backend.
        Engine fresh(*m_model, ec);
        QVERIFY(fresh.deviceFailure().empty());
        const int64_t ok = fresh.submit(prompt(74, 4, V), greedy(2), col.cb());
        fresh.waitIdle();
        QCOMPARE(col.results[ok].reason, FinishReason::Length);
    }

    // A step whose op throws an error the device survives (out of memory, a bad launch; here the 25th linear, in
    // the middle of the first step's layers): the requests of that step fail with the reason, the one waiting for
    // a slot then runs and gets exactly the tokens it gets alone — nothing the failed step half-wrote reaches it —
    // and the engine takes new requests.
    void transientStepFailureFailsOnlyThatStep() {
        const FaultyModel fm("linear@25:error");
        const FaultBackend& faulty = *fm.fault;
        const Glm5NextModel& model = *fm.model;
        const EngineConfig ec = twoSlots();
        const int V = model.text().vocab_size;
        const std::vector<int32_t> waiting = prompt(82, 10, V);
        const Result alone = runAlone(*m_model, waiting, greedy(8), ec);
        Engine e(model, ec);
        Collector col;
        const std::vector<int64_t> ids = e.submitAll({{prompt(80, 10, V), greedy(20), col.cb()},
                                                      {prompt(81, 10, V), greedy(20), col.cb()},
                                                      {waiting, greedy(8), col.cb()}});
        e.waitIdle();
        QVERIFY(faulty.fired());
        for (int i = 0; i < 2; ++i) {
            const Result& r = col.results[ids[size_t(i)]];
            QCOMPARE(r.reason, FinishReason::Error);
            QVERIFY2(r.error.find("the engine step failed") != std::string::npos &&
                         r.error.find("call 25 of linear") != std::string::npos,
                     r.error.c_str());
            QVERIFY(r.tokens.empty());  // the first step (the prefill: 174 linears) failed
        }
        const Result& served = col.results[ids[2]];
        QCOMPARE(served.reason, FinishReason::Length);
        QCOMPARE(served.tokens, alone.tokens);
        QVERIFY(e.deviceFailure().empty());
        EngineMetrics m = e.metrics();
        QCOMPARE(m.requestsFailed, int64_t(2));
        QCOMPARE(m.requestsFinished, int64_t(1));
        QCOMPARE(m.kvFreeBlocks, m.kvBlocks);
        const int64_t again = e.submit(waiting, greedy(8), col.cb());
        e.waitIdle();
        QCOMPARE(col.results[again].tokens, alone.tokens);
        e.verifyIdle();
    }

    void refusesBadRequests() {
        Engine e(*m_model, smallConfig());
        const int V = m_model->text().vocab_size;
        auto expectError = [&](std::vector<int32_t> p, SamplingParams sp, const char* what) {
            try {
                e.submit(std::move(p), sp, nullptr);
                QFAIL(what);
            } catch (const Error& err) {
                QVERIFY2(err.kind() == ErrorKind::InvalidArgument, err.what());
            }
        };
        expectError({}, greedy(4), "empty prompt");
        expectError({1, V}, greedy(4), "id outside the vocabulary");
        SamplingParams bad = greedy(4);
        bad.temperature = -1;
        expectError({1, 2}, bad, "negative temperature");
        EngineConfig shortLen = smallConfig();
        shortLen.maxModelLen = 100;
        Engine e2(*m_model, shortLen);
        try {
            e2.submit(prompt(1, 100, V), greedy(4), nullptr);
            QFAIL("prompt at max_model_len");
        } catch (const Error& err) {
            QVERIFY2(QString(err.what()).contains("max_model_len"), err.what());
        }
    }

    // submitAll: one bad request refuses the batch and queues nothing; a good batch is admitted in one step,
    // so every request's tokens come out of the same steps, and each equals the request run alone.
    void submitAllTogether() {
        const int V = m_model->text().vocab_size;
        Engine e(*m_model, smallConfig());
        Collector col;
        std::vector<Engine::Submission> bad;
        bad.push_back({prompt(5, 9, V), greedy(4), col.cb()});
        bad.push_back({{1, V}, greedy(4), col.cb()});
        try {
            e.submitAll(std::move(bad));
            QFAIL("a batch with an id outside the vocabulary was queued");
        } catch (const Error& err) {
            QVERIFY2(err.kind() == ErrorKind::InvalidArgument, err.what());
            QVERIFY2(QString(err.what()).startsWith("request 2 of 2: "), err.what());
        }
        e.waitIdle();
        QCOMPARE(e.metrics().promptTokens, int64_t(0));  // nothing of the refused batch ran
        QVERIFY(col.results.empty());

        const std::vector<std::vector<int32_t>> prompts = {prompt(6, 20, V), prompt(7, 5, V), prompt(8, 33, V)};
        std::mutex orderMutex;
        std::vector<int64_t> order;  // request id of every token event, in the engine's order
        const Engine::Callback inner = col.cb();
        auto cb = [&](const EngineEvent& ev) {
            if (ev.type == EngineEvent::Type::Token) {
                std::lock_guard<std::mutex> lock(orderMutex);
                order.push_back(ev.requestId);
            }
            inner(ev);
        };
        std::vector<Engine::Submission> good;
        for (const auto& p : prompts) good.push_back({p, greedy(10), cb});
        const std::vector<int64_t> ids = e.submitAll(std::move(good));
        QCOMPARE(ids.size(), size_t(3));
        QVERIFY(ids[0] < ids[1] && ids[1] < ids[2]);
        e.waitIdle();
        e.verifyIdle();
        for (size_t i = 0; i < prompts.size(); ++i)
            QCOMPARE(col.results[ids[i]].tokens, runAlone(*m_model, prompts[i], greedy(10)).tokens);
        // Admitted together: every step (the prefill, then 9 decode steps) gives each request one token, so the
        // events come in 10 groups of three, each group holding all three requests.
        QCOMPARE(order.size(), size_t(30));
        for (size_t g = 0; g < 10; ++g) {
            std::vector<int64_t> group(order.begin() + long(3 * g), order.begin() + long(3 * g + 3));
            std::sort(group.begin(), group.end());
            QCOMPARE(group, ids);
        }
    }

    // With a tokenizer the events carry text; stop strings end a request and cut the text before them.
    void textAndStopStrings() {
        const Tokenizer tok = Tokenizer::fromDirectory(TS_SOURCE_DIR "/tests/golden/tokenizer");
        const int V = m_model->text().vocab_size;  // the tokenizer covers these ids (byte pieces, merges)
        const auto p = prompt(41, 30, V);
        auto run = [&](SamplingParams sp) {
            Engine e(*m_model, smallConfig(), &tok);
            Collector col;
            const int64_t id = e.submit(p, sp, col.cb());
            e.waitIdle();
            e.verifyIdle();
            return col.results[id];
        };
        const Result plain = run(greedy(40));
        QCOMPARE(plain.text, tok.decode(plain.tokens, true));
        QVERIFY(plain.text.size() > 20);
        // A stop string taken from the middle of the greedy text.
        const std::string stop = plain.text.substr(plain.text.size() / 2, 3);
        const size_t at = plain.text.find(stop);
        SamplingParams sp = greedy(40);
        sp.stop = {stop, "\x01never"};
        const Result cut = run(sp);
        QVERIFY(cut.reason == FinishReason::Stop);
        QCOMPARE(cut.stopString, stop);
        QCOMPARE(cut.text, plain.text.substr(0, at));
        QVERIFY(cut.tokens.size() < plain.tokens.size());
        sp.includeStopStrInOutput = true;
        QCOMPARE(run(sp).text, plain.text.substr(0, at + stop.size()));
        // Without a tokenizer, stop strings are refused.
        Engine bare(*m_model, smallConfig());
        QVERIFY_THROWS_EXCEPTION(Error, bare.submit(p, sp, nullptr));
    }

    void noLeaksAfterRandomLoad() {
        const int V = m_model->text().vocab_size;
        EngineConfig c = smallConfig();
        KvPlan probe = KvPlan::make(m_model->text(), c);
        c.kvBudgetBytes = probe.stateBytes + probe.snapshotBytes + 10 * 64 * probe.memory.bytesPerToken;
        c.maxNumBatchedTokens = 256;
        Engine e(*m_model, c);
        Collector col;
        std::mt19937 g(5);
        std::vector<int64_t> ids;
        // 1000 by default; scripts/tsan.sh asks for fewer (ThreadSanitizer runs this ~10× slower), enough for
        // submits from this thread to overlap the engine thread's steps many times over.
        const int64_t n = envCount("TS_TEST_RANDOM_LOAD_REQUESTS", 1000);
        for (int64_t i = 0; i < n; ++i) {
            SamplingParams sp = greedy(g() % 4 == 0 ? int(g() % 120) + 1 : int(g() % 12) + 1);
            if (g() % 3 == 0) { sp.temperature = 0.8f; sp.seed = g(); }
            sp.ignoreEos = g() % 2 == 0;
            // Repeated prefixes exercise the prefix cache and its snapshots.
            auto p = prompt(uint32_t(g() % 40), int(g() % 150) + 1, V);
            ids.push_back(e.submit(p, sp, col.cb()));
            if (g() % 7 == 0) e.abort(ids[size_t(g() % ids.size())]);
            if (i % 100 == 99) e.waitIdle();
        }
        e.waitIdle();
        e.verifyIdle();
        int aborted = 0;
        for (int64_t id : ids) {
            QVERIFY(col.results[id].done);
            aborted += col.results[id].reason == FinishReason::Abort;
        }
        const EngineMetrics m = e.metrics();
        qInfo("%lld requests: %d aborted, %lld preemptions, prefix hits %lld of %lld tokens", (long long)n, aborted,
              (long long)m.preemptions, (long long)m.prefixHits, (long long)m.prefixQueries);
        QVERIFY(aborted > 0);
        QVERIFY2(m.preemptions > 0, "the small pool must force preemptions");
        QVERIFY(m.prefixHits > 0);
        QCOMPARE(m.running, 0);
        QCOMPARE(m.waiting, 0);
    }
};

QTEST_GUILESS_MAIN(TestEngine)
#include "test_engine.moc"
