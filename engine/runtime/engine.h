// The engine facade: one model, a paged KV pool, a scheduler and a step thread. submit() is thread safe
// and returns at once; results arrive as events on the step thread (callers marshal them: the HTTP server
// to its connection, the GUI through queued signals). Defaults are the recipe's: MAX_NUM_SEQS 4,
// MAX_NUM_BATCHED_TOKENS 1024, MAX_MODEL_LEN 900000, fp8 KV cache.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <tuple>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cache/block_manager.h"
#include "text/tokenizer.h"
#include "runtime/metrics.h"
#include "runtime/model_runner.h"
#include "runtime/scheduler.h"

namespace ts {

struct EngineConfig {
    int32_t maxNumSeqs = 4;
    int64_t maxNumBatchedTokens = 1024;
    int64_t maxModelLen = 900000;
    int64_t kvBudgetBytes = int64_t(2) << 30;  // memory for the KV pool, state and snapshot slots (CPU)
    int32_t snapshotSlots = 8;
    int32_t blockSize = 64;
    KvCacheDtype kvDtype = KvCacheDtype::Fp8;
};

// How the KV budget is spent (also printed by `twinspark-cli plan`).
struct KvPlan {
    KvMemory memory;
    int64_t budgetBytes = 0;
    int64_t stateBytes = 0;      // maxNumSeqs state slots
    int64_t snapshotBytes = 0;   // snapshot slots
    int64_t numBlocks = 0;
    int64_t tokens = 0;          // numBlocks × blockSize
    double fullLengthRequests = 0;  // tokens / maxModelLen
    static KvPlan make(const TextConfig& cfg, const EngineConfig& ec, bool withMtp = false);
};

struct EngineEvent {
    enum class Type : uint8_t { Token, Finished };
    Type type = Type::Token;
    int64_t requestId = 0;
    // Token
    int32_t token = -1;
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;
    // Text (with a tokenizer): the new UTF-8-complete output text. Text that could be the start of a
    // stop string is held back until it is known not to be one; a Finished event carries the rest.
    std::string text;
    // Finished
    FinishReason reason = FinishReason::None;
    std::string stopString;   // the stop string that ended the request (FinishReason::Stop)
    int32_t stopToken = -1;   // or the eos / stop token id that did
    int64_t promptTokens = 0, completionTokens = 0, cachedPromptTokens = 0;
    std::string error;        // FinishReason::Error: what failed ("numerical error: logit of token 7 is NaN")
};

class Engine {
public:
    using Callback = std::function<void(const EngineEvent&)>;

    // With a tokenizer, events carry detokenized text and SamplingParams::stop strings are honoured
    // (without one, requests with stop strings are refused).
    Engine(const Glm5NextModel& model, EngineConfig config, const Tokenizer* tokenizer = nullptr);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const EngineConfig& config() const { return m_config; }
    const KvPlan& plan() const { return m_plan; }
    // Validates and queues a request; throws ts::Error(InvalidArgument) with a clear message for bad
    // parameters, ids outside the vocabulary, an empty prompt, or a prompt the engine can never hold.
    int64_t submit(std::vector<int32_t> prompt, SamplingParams params, Callback onEvent);
    // Several requests at once: all are validated first (one bad request refuses the whole batch, nothing
    // queued), then queued under one lock, so the step thread admits them together (capacity permitting)
    // and their decode steps line up — what a concurrency benchmark measures. Ids in submission order.
    struct Submission {
        std::vector<int32_t> prompt;
        SamplingParams params;
        Callback onEvent;
    };
    std::vector<int64_t> submitAll(std::vector<Submission> requests);
    // Ends a request now (client gone, stop string matched): Abort, or the given reason. False if unknown.
    bool abort(int64_t id) { return finish(id, FinishReason::Abort); }
    bool finish(int64_t id, FinishReason reason);
    EngineMetrics metrics() const;
    // Empty while the engine can run. After a step failed with ErrorKind::DeviceLost (the GPU's context is gone:
    // every later call would fail the same way), the reason: every request it held has failed with it, submit()
    // refuses with DeviceLost, and only a new process can use the device again — `serve` stops (exit 3) so a
    // supervisor restarts it; the control center says so. TS_FAULT_OP (tests; kernels/fault_backend.h) makes a chosen
    // backend call fail this way on any backend.
    std::string deviceFailure() const;
    // Blocks until no request is waiting or running (tests, shutdown).
    void waitIdle();
    // Consistency check for tests: no request holds blocks or slots once idle.
    void verifyIdle() const;

private:
    void validateRequest(const std::vector<int32_t>& prompt, const SamplingParams& params) const;
    struct Request {
        explicit Request(SamplerRng r) : rng(std::move(r)) {}
        std::unique_ptr<Sequence> seq;
        Callback cb;
        SamplerRng rng;
        double submitted = 0, lastToken = 0;
        bool first = true;
        int64_t cachedPrompt = -1;  // prefix-cache hit of the first admission (the block manager resets it)
        std::unique_ptr<StreamingDetokenizer> detok;
        std::string text;   // output text so far (stop strings are searched here)
        size_t sent = 0;    // bytes of `text` already emitted
        std::string stopString;
        std::string error;  // why it failed (FinishReason::Error)
    };
    // Appends a token's text, checks stop strings; returns the text to emit now. Sets r.stopString and
    // returns true in *stopped when a stop string matched.
    std::string takeText(Request& r, int32_t token, bool* stopped);
    std::string flushText(Request& r);
    void loop();
    void refreshGauges();  // under m_mutex
    void emitFinished(Request& r, std::vector<std::pair<Callback, EngineEvent>>& out);
    // Ends request `id` with FinishReason::Error (its blocks freed, the others untouched); under m_mutex.
    void failRequest(int64_t id, const std::string& why, std::vector<std::pair<Callback, EngineEvent>>& out);
    // The device is lost: records why and fails every request, queued or running; under m_mutex.
    void failAll(const std::string& why, std::vector<std::pair<Callback, EngineEvent>>& out);

    const Glm5NextModel& m_model;
    const Tokenizer* m_tokenizer;
    EngineConfig m_config;
    KvPlan m_plan;
    std::vector<int32_t> m_eos;
    BlockManager m_blocks;
    Scheduler m_scheduler;
    ModelRunner m_runner;

    mutable std::mutex m_mutex;
    std::condition_variable m_wake, m_idle;
    std::unordered_map<int64_t, std::unique_ptr<Request>> m_requests;
    std::vector<int64_t> m_incoming;
    std::vector<std::pair<int64_t, FinishReason>> m_finishes;
    int64_t m_nextId = 1;
    bool m_stop = false;
    bool m_busy = false;
    std::string m_deviceFailure;  // under m_mutex; see deviceFailure()
    EngineMetrics m_metrics;
    mutable std::deque<std::tuple<double, int64_t, int64_t>> m_rates;  // per step: time, prompt, generated tokens
    std::thread m_thread;
};

}  // namespace ts
