#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>

#include "core/error.h"
#include "core/log.h"

namespace ts {

namespace {
double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
constexpr double kRateWindowSeconds = 2.0;
}  // namespace

KvPlan KvPlan::make(const TextConfig& cfg, const EngineConfig& ec, bool withMtp) {
    KvPlan p;
    p.memory = KvMemory::of(cfg, ec.kvDtype, withMtp);
    p.budgetBytes = ec.kvBudgetBytes;
    p.stateBytes = int64_t(ec.maxNumSeqs) * p.memory.bytesPerStateSlot;
    p.snapshotBytes = int64_t(ec.snapshotSlots) * p.memory.bytesPerSnapshot;
    const int64_t left = p.budgetBytes - p.stateBytes - p.snapshotBytes;
    const int64_t perBlock = int64_t(ec.blockSize) * std::max<int64_t>(1, p.memory.bytesPerToken);
    p.numBlocks = left > 0 ? left / perBlock : 0;
    p.tokens = p.numBlocks * ec.blockSize;
    p.fullLengthRequests = ec.maxModelLen > 0 ? double(p.tokens) / double(ec.maxModelLen) : 0.0;
    return p;
}

static KvPlan checkedPlan(const Glm5NextModel& model, const EngineConfig& c) {
    if (c.maxNumSeqs < 1 || c.maxNumBatchedTokens < 1 || c.maxModelLen < 2 || c.snapshotSlots < 0 || c.blockSize < 1)
        fail(ErrorKind::InvalidArgument, "engine config: max_num_seqs, max_num_batched_tokens and max_model_len "
                                         "must be positive");
    KvPlan p = KvPlan::make(model.text(), c);
    if (p.numBlocks < 2)
        fail(ErrorKind::InvalidArgument,
             "KV budget of " + std::to_string(c.kvBudgetBytes >> 20) + " MiB leaves no room for the KV pool after " +
                 std::to_string((p.stateBytes + p.snapshotBytes) >> 20) + " MiB of state and snapshot slots");
    return p;
}

static std::vector<int32_t> eosOf(const Glm5NextModel& m) {
    std::vector<int32_t> eos = m.text().eos_token_ids;
    for (int32_t e : m.config().generation.eos_token_ids)
        if (std::find(eos.begin(), eos.end(), e) == eos.end()) eos.push_back(e);
    return eos;
}

Engine::Engine(const Glm5NextModel& model, EngineConfig config, const Tokenizer* tokenizer)
    : m_model(model), m_tokenizer(tokenizer), m_config(config), m_plan(checkedPlan(model, config)), m_eos(eosOf(model)),
      m_blocks(int32_t(m_plan.numBlocks), config.blockSize, config.snapshotSlots, model.text().numLinearLayers() > 0),
      m_scheduler(SchedulerConfig{config.maxNumSeqs, config.maxNumBatchedTokens, config.maxModelLen, config.blockSize,
                                  m_eos},
                  m_blocks),
      m_runner(model, KvPoolConfig{m_plan.numBlocks, config.blockSize, config.maxNumSeqs, config.snapshotSlots,
                                   config.kvDtype, false}) {
    m_metrics.kvBlocks = m_plan.numBlocks;
    m_metrics.kvFreeBlocks = m_plan.numBlocks;
    m_metrics.kvTokenCapacity = m_plan.tokens;
    m_thread = std::thread([this] { loop(); });
}

Engine::~Engine() {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_all();
    m_thread.join();
}

void Engine::validateRequest(const std::vector<int32_t>& prompt, const SamplingParams& params) const {
    if (prompt.empty()) fail(ErrorKind::InvalidArgument, "the prompt is empty");
    m_model.checkIds(prompt.data(), int64_t(prompt.size()));
    validateSamplingParams(params, m_model.text().vocab_size);
    if (!params.stop.empty() && !m_tokenizer)
        fail(ErrorKind::InvalidArgument, "stop strings need a tokenizer (this engine runs on token ids only)");
    for (const auto& st : params.stop)
        if (st.empty()) fail(ErrorKind::InvalidArgument, "stop: empty stop strings are not allowed");
    const int64_t maxLen = m_scheduler.effectiveMaxLen();
    if (int64_t(prompt.size()) >= maxLen)
        fail(ErrorKind::InvalidArgument, "the prompt has " + std::to_string(prompt.size()) +
                                             " tokens; this engine holds at most " + std::to_string(maxLen) +
                                             " tokens per request (max_model_len " +
                                             std::to_string(m_config.maxModelLen) + ", KV pool " +
                                             std::to_string(m_plan.tokens) + " tokens), prompt and completion together");
}

int64_t Engine::submit(std::vector<int32_t> prompt, SamplingParams params, Callback onEvent) {
    std::vector<Submission> one;
    one.push_back({std::move(prompt), std::move(params), std::move(onEvent)});
    return submitAll(std::move(one)).front();
}

std::vector<int64_t> Engine::submitAll(std::vector<Submission> requests) {
    for (size_t i = 0; i < requests.size(); ++i) {
        try {
            validateRequest(requests[i].prompt, requests[i].params);
        } catch (const Error& e) {
            if (requests.size() == 1) throw;
            fail(e.kind(), "request " + std::to_string(i + 1) + " of " + std::to_string(requests.size()) + ": " + e.what());
        }
    }
    std::vector<std::unique_ptr<Request>> made;
    made.reserve(requests.size());
    for (Submission& q : requests) {
        auto r = std::make_unique<Request>(SamplerRng(q.params.seed));
        r->cb = std::move(q.onEvent);
        r->submitted = now();
        if (m_tokenizer) r->detok = std::make_unique<StreamingDetokenizer>(*m_tokenizer, q.params.skipSpecialTokens);
        made.push_back(std::move(r));
    }
    std::vector<int64_t> ids;
    ids.reserve(requests.size());
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_deviceFailure.empty())
        fail(ErrorKind::DeviceLost, "the engine has stopped: " + m_deviceFailure + ". Restart the process to use the device again");
    for (size_t i = 0; i < made.size(); ++i) {
        const int64_t id = m_nextId++;
        made[i]->seq = std::make_unique<Sequence>(id, std::move(requests[i].prompt), std::move(requests[i].params));
        m_requests.emplace(id, std::move(made[i]));
        m_incoming.push_back(id);
        ids.push_back(id);
    }
    m_wake.notify_all();
    return ids;
}

bool Engine::finish(int64_t id, FinishReason reason) {
    std::lock_guard<std::mutex> lock(m_mutex);
    // A request leaves m_requests (under this lock) when it finishes; its Sequence's status belongs to the
    // engine thread and is not read here.
    if (m_requests.find(id) == m_requests.end()) return false;
    m_finishes.emplace_back(id, reason);
    m_wake.notify_all();
    return true;
}

EngineMetrics Engine::metrics() const {
    // Read before taking the lock: a driver call and /proc/meminfo, not engine state. A snapshot must not throw
    // (the dashboard's timer and /metrics take one): a device that cannot say leaves the fields at 0.
    DeviceMemory dm;
    bool onDevice = false;
    try {
        onDevice = m_model.backend().deviceMemory(&dm);
    } catch (const std::exception&) {
        onDevice = false;
    }
    std::lock_guard<std::mutex> lock(m_mutex);
    EngineMetrics m = m_metrics;
    if (onDevice) {
        m.deviceMemoryTotal = dm.totalBytes;
        m.deviceMemoryFree = dm.freeBytes;
        m.deviceMemoryUnified = dm.unified;
    }
    // Tokens per second over the last kRateWindowSeconds, measured now: an idle engine reads 0.
    const double t = now();
    while (!m_rates.empty() && t - std::get<0>(m_rates.front()) > kRateWindowSeconds) m_rates.pop_front();
    int64_t p = 0, g = 0;
    for (const auto& [when, prompt, gen] : m_rates) {
        p += prompt;
        g += gen;
    }
    m.promptTokensPerSecond = double(p) / kRateWindowSeconds;
    m.generationTokensPerSecond = double(g) / kRateWindowSeconds;
    return m;
}

void Engine::waitIdle() {
    std::unique_lock<std::mutex> lock(m_mutex);
    m_idle.wait(lock, [this] { return !m_busy && m_incoming.empty() && m_finishes.empty() && m_requests.empty(); });
}

void Engine::verifyIdle() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    TS_CHECK(m_requests.empty() && !m_scheduler.hasWork(), "engine not idle");
    m_blocks.verifyInvariants();
    TS_CHECK(m_blocks.numFreeBlocks() == m_blocks.numBlocks(), "blocks still held after every request ended");
}

std::string Engine::takeText(Request& r, int32_t token, bool* stopped) {
    *stopped = false;
    if (!r.detok) return {};
    const size_t before = r.text.size();
    r.text += r.detok->push(token);
    const auto& stops = r.seq->params().stop;
    if (stops.empty()) {
        std::string out = r.text.substr(r.sent);
        r.sent = r.text.size();
        return out;
    }
    // A stop string can only end in the new text: search from where it could start.
    size_t longest = 0;
    for (const auto& st : stops) longest = std::max(longest, st.size());
    const size_t from = before >= longest ? before - longest + 1 : 0;
    size_t best = std::string::npos, bestLen = 0;
    for (const auto& st : stops) {
        const size_t at = r.text.find(st, from);
        if (at != std::string::npos && at < best) { best = at; bestLen = st.size(); r.stopString = st; }
    }
    if (best != std::string::npos) {
        *stopped = true;
        r.text.resize(r.seq->params().includeStopStrInOutput ? best + bestLen : best);
        std::string out = r.sent < r.text.size() ? r.text.substr(r.sent) : std::string();
        r.sent = r.text.size();
        return out;
    }
    // Hold back what could still become a stop string, on a UTF-8 character boundary.
    size_t safe = r.text.size() >= longest - 1 ? r.text.size() - (longest - 1) : 0;
    while (safe > r.sent && safe < r.text.size() && (uint8_t(r.text[safe]) & 0xc0) == 0x80) --safe;
    if (safe <= r.sent) return {};
    std::string out = r.text.substr(r.sent, safe - r.sent);
    r.sent = safe;
    return out;
}

std::string Engine::flushText(Request& r) {
    if (!r.detok) return {};
    if (r.stopString.empty()) r.text += r.detok->finish();
    std::string out = r.sent < r.text.size() ? r.text.substr(r.sent) : std::string();
    r.sent = r.text.size();
    return out;
}

void Engine::emitFinished(Request& r, std::vector<std::pair<Callback, EngineEvent>>& out) {
    EngineEvent e;
    e.type = EngineEvent::Type::Finished;
    e.requestId = r.seq->id();
    e.reason = r.seq->finish;
    e.text = flushText(r);
    e.stopString = r.stopString;
    if (e.reason == FinishReason::Stop && e.stopString.empty() && r.seq->numCompletionTokens() > 0)
        e.stopToken = r.seq->lastToken();
    e.promptTokens = r.seq->numPromptTokens();
    e.completionTokens = r.seq->numCompletionTokens();
    e.cachedPromptTokens = std::max<int64_t>(0, r.cachedPrompt);
    e.error = r.error;
    if (e.reason == FinishReason::Abort) ++m_metrics.requestsAborted;
    else if (e.reason == FinishReason::Error) ++m_metrics.requestsFailed;
    else ++m_metrics.requestsFinished;
    out.emplace_back(r.cb, std::move(e));
}

void Engine::failRequest(int64_t id, const std::string& why, std::vector<std::pair<Callback, EngineEvent>>& out) {
    auto it = m_requests.find(id);
    if (it == m_requests.end()) return;
    Request& r = *it->second;
    if (r.seq->status != SeqStatus::Finished) m_scheduler.finish(id, FinishReason::Error);  // frees its blocks
    r.seq->finish = FinishReason::Error;
    r.error = why;
    emitFinished(r, out);
    m_requests.erase(it);
}

void Engine::failAll(const std::string& why, std::vector<std::pair<Callback, EngineEvent>>& out) {
    m_deviceFailure = why;
    std::vector<int64_t> ids;
    ids.reserve(m_requests.size());
    for (const auto& [id, r] : m_requests) ids.push_back(id);
    std::sort(ids.begin(), ids.end());  // oldest first, as they came
    // Queued requests not yet handed to the scheduler are failed here too; their ids must not reach it.
    m_incoming.clear();
    m_finishes.clear();
    for (int64_t id : ids) failRequest(id, why, out);
    refreshGauges();
}

std::string Engine::deviceFailure() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_deviceFailure;
}

void Engine::refreshGauges() {
    m_metrics.running = m_scheduler.numRunning();
    m_metrics.waiting = m_scheduler.numWaiting();
    m_metrics.kvUsage = m_blocks.usage();
    m_metrics.kvFreeBlocks = m_blocks.numFreeBlocks();
}

void Engine::loop() {
    for (;;) {
        std::vector<std::pair<Callback, EngineEvent>> events;
        {
            std::unique_lock<std::mutex> lock(m_mutex);
            m_busy = false;
            if (m_requests.empty() && m_incoming.empty() && m_finishes.empty()) m_idle.notify_all();
            m_wake.wait(lock, [this] {
                return m_stop || !m_incoming.empty() || !m_finishes.empty() || m_scheduler.hasWork();
            });
            if (m_stop) return;
            m_busy = true;
            for (int64_t id : m_incoming) {
                Request& r = *m_requests.at(id);
                try {
                    m_scheduler.add(r.seq.get());
                } catch (const Error&) {  // validated in submit; a late refusal still ends the request cleanly
                    r.seq->status = SeqStatus::Finished;
                    r.seq->finish = FinishReason::Abort;
                    emitFinished(r, events);
                    m_requests.erase(id);
                }
            }
            m_incoming.clear();
            for (auto [id, reason] : m_finishes) {
                auto it = m_requests.find(id);
                if (it == m_requests.end()) continue;
                if (m_scheduler.finish(id, reason)) {
                    emitFinished(*it->second, events);
                    m_requests.erase(it);
                }
            }
            m_finishes.clear();
            refreshGauges();  // an abort that leaves the engine idle must show at once, not after the next step
        }
        for (auto& [cb, e] : events) if (cb) cb(e);
        events.clear();
        if (!m_scheduler.hasWork()) continue;

        SchedulerOutput out = m_scheduler.schedule();
        if (out.empty()) {  // nothing fits this instant (e.g. every slot waiting on blocks): yield briefly
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        // The step's requests, looked up under the lock: submit() inserts into m_requests from other threads, and
        // an insert that rehashes while this thread searches the map is a data race (found by ThreadSanitizer,
        // scripts/tsan.sh). The Request objects themselves stay put: only this thread erases them.
        std::vector<Request*> stepRequests;
        stepRequests.reserve(out.seqs.size());
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            for (const ScheduledSeq& s : out.seqs) stepRequests.push_back(m_requests.at(s.seq->id()).get());
        }
        for (Request* r : stepRequests)
            if (r->cachedPrompt < 0) r->cachedPrompt = r->seq->numCachedPrompt;
        std::vector<SampleResult> sampled;
        try {
            sampled = m_runner.step(out, [&stepRequests](const Sequence& s) -> SamplerRng& {
                for (Request* r : stepRequests)  // ≤ max_num_seqs entries
                    if (r->seq->id() == s.id()) return r->rng;
                throw Error(ErrorKind::Internal, "engine: sampled a sequence that was not scheduled");
            });
        } catch (const std::exception& e) {
            const auto* te = dynamic_cast<const Error*>(&e);
            if (te && te->kind() == ErrorKind::DeviceLost) {
                // The device cannot run anything again in this process: every request fails now, with the reason,
                // instead of each failing one step later; submit() refuses from here on.
                const std::string why = std::string("the GPU failed: ") + e.what();
                size_t held = 0;
                {
                    std::lock_guard<std::mutex> lock(m_mutex);
                    held = m_requests.size();
                    failAll(why, events);
                }
                // Logged without the lock: a sink that blocks (a full stderr pipe) must not stall submit or /health.
                logFormat(LogLevel::Error, "engine: %s (%zu request(s) failed; no further request is accepted: restart the "
                                           "process to use the device again)", why.c_str(), held);
                for (auto& [cb, ev] : events) if (cb) cb(ev);
                events.clear();
                continue;
            }
            // Any other step that threw (a device fault the context survives, memory): its requests fail with the
            // reason, the engine and the requests it did not schedule go on. Nothing of the step is committed.
            const std::string why = std::string("the engine step failed: ") + e.what();
            logFormat(LogLevel::Error, "engine: %s (%zu request(s) failed)", why.c_str(), out.seqs.size());
            {
                std::lock_guard<std::mutex> lock(m_mutex);
                for (const ScheduledSeq& s : out.seqs) failRequest(s.seq->id(), why, events);
                refreshGauges();
            }
            for (auto& [cb, ev] : events) if (cb) cb(ev);
            events.clear();
            continue;
        }
        // A row that could not be sampled (NaN / +inf logits) fails its one request before the step is
        // committed: postprocess skips it, the other rows go on.
        std::vector<std::pair<int64_t, std::string>> failures;
        {
            size_t k = 0;
            for (const ScheduledSeq& s : out.seqs) {
                if (!s.samples) continue;
                if (!sampled[k].error.empty()) {
                    failures.emplace_back(s.seq->id(), sampled[k].error);
                    m_scheduler.finish(s.seq->id(), FinishReason::Error);
                }
                ++k;
            }
        }
        std::vector<int32_t> tokens;
        for (const auto& s : sampled) tokens.push_back(s.token);
        int64_t promptDone = 0;
        for (const ScheduledSeq& s : out.seqs)
            if (s.isPrefill) promptDone += s.numTokens;
        const std::vector<Sequence*> finished = m_scheduler.postprocess(out.seqs, tokens);

        const double t = now();
        std::vector<int64_t> finishedIds;  // ids now: a stop string below may free a Sequence
        for (Sequence* s : finished) finishedIds.push_back(s->id());
        std::lock_guard<std::mutex> lock(m_mutex);
        size_t k = 0;
        for (const ScheduledSeq& s : out.seqs) {
            if (!s.samples) continue;
            if (!sampled[k].error.empty()) {
                ++k;
                continue;  // failed above; its Finished event follows
            }
            Request& r = *m_requests.at(s.seq->id());
            EngineEvent e;
            e.requestId = s.seq->id();
            e.token = sampled[k].token;
            e.logprob = sampled[k].logprob;
            e.top = std::move(sampled[k].top);
            ++k;
            if (r.first) m_metrics.ttft.observe(t - r.submitted);
            else m_metrics.itl.observe(t - r.lastToken);
            r.first = false;
            r.lastToken = t;
            bool stopped = false;
            e.text = takeText(r, e.token, &stopped);
            events.emplace_back(r.cb, std::move(e));
            if (!stopped) continue;
            const int64_t id = s.seq->id();
            if (s.seq->status == SeqStatus::Finished) {
                s.seq->finish = FinishReason::Stop;  // ended by length/eos at the same token: the stop string wins
            } else if (m_scheduler.finish(id, FinishReason::Stop)) {
                emitFinished(r, events);
                m_requests.erase(id);
            }
        }
        for (const auto& [fid, why] : failures) failRequest(fid, why, events);
        for (int64_t fid : finishedIds) {
            auto it = m_requests.find(fid);
            if (it == m_requests.end()) continue;  // already ended by a stop string
            emitFinished(*it->second, events);
            m_requests.erase(it);
        }
        m_metrics.promptTokens += promptDone;
        m_metrics.generationTokens += int64_t(tokens.size() - failures.size());  // failed rows generated nothing
        refreshGauges();
        m_metrics.prefixQueries = m_blocks.prefixQueries();
        m_metrics.prefixHits = m_blocks.prefixHits();
        m_metrics.preemptions = m_scheduler.numPreemptions();
        const Backend::GraphStats gs = m_model.backend().graphStats();
        m_metrics.graphReplays = gs.replays;
        m_metrics.graphCaptures = gs.captures;
        m_rates.emplace_back(t, promptDone, int64_t(tokens.size()));
        // Callbacks run without the lock (they may call submit/abort).
        std::vector<std::pair<Callback, EngineEvent>> toSend;
        toSend.swap(events);
        m_mutex.unlock();
        for (const auto& [fid, why] : failures)  // logged without the lock, as the callbacks run
            logFormat(LogLevel::Error, "engine: request %lld failed: %s", static_cast<long long>(fid), why.c_str());
        for (auto& [cb, e] : toSend) if (cb) cb(e);
        m_mutex.lock();
    }
}

}  // namespace ts
