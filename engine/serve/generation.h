// Where generated tokens come from, and how one HTTP request waits for them.
//
// GenerationSource is the server's only view of the engine (submit / abort / metrics). EngineSource
// adapts ts::Engine; tests inject a scripted source to drive the response assembly (reasoning, tool
// calls) deterministically. Events arrive on the source's thread and are queued into the request's
// EventChannel; the HTTP thread drains it. The engine never waits on a socket: a client that reads too
// slowly overflows its channel and its request is aborted.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/engine.h"

namespace ts::serve {

class GenerationSource {
public:
    using Callback = std::function<void(const EngineEvent&)>;
    virtual ~GenerationSource() = default;
    // Queues a request; throws ts::Error(InvalidArgument) for what the engine refuses.
    virtual int64_t submit(std::vector<int32_t> prompt, SamplingParams params, Callback cb) = 0;
    // Queues several requests so that they start together (Engine::submitAll: all validated first, admitted
    // in one step). This default submits one by one and, when one is refused, aborts those already queued.
    virtual std::vector<int64_t> submitAll(std::vector<Engine::Submission> requests) {
        std::vector<int64_t> ids;
        try {
            for (Engine::Submission& r : requests)
                ids.push_back(submit(std::move(r.prompt), std::move(r.params), std::move(r.onEvent)));
        } catch (...) {
            for (int64_t id : ids) abort(id);
            throw;
        }
        return ids;
    }
    virtual bool abort(int64_t id) = 0;
    virtual EngineMetrics metrics() const = 0;
    // Empty while the source can generate; after a fault it cannot recover from (a lost GPU), why: /health
    // answers 503 with it and the server stops (Engine::deviceFailure).
    virtual std::string failure() const { return {}; }
};

class EngineSource final : public GenerationSource {
public:
    explicit EngineSource(Engine& engine) : m_engine(engine) {}
    int64_t submit(std::vector<int32_t> prompt, SamplingParams params, Callback cb) override {
        return m_engine.submit(std::move(prompt), std::move(params), std::move(cb));
    }
    std::vector<int64_t> submitAll(std::vector<Engine::Submission> requests) override {
        return m_engine.submitAll(std::move(requests));
    }
    bool abort(int64_t id) override { return m_engine.abort(id); }
    EngineMetrics metrics() const override { return m_engine.metrics(); }
    std::string failure() const override { return m_engine.deviceFailure(); }

private:
    Engine& m_engine;
};

struct ChoiceEvent {
    int choice = 0;
    EngineEvent event;
};

// The reason when `ev` ends its choice with an engine failure (FinishReason::Error: NaN logits, a step
// that threw), else null. The request answers 500 with it; its other choices are aborted.
inline const std::string* engineFailure(const ChoiceEvent& ev) {
    return ev.event.type == EngineEvent::Type::Finished && ev.event.reason == FinishReason::Error ? &ev.event.error
                                                                                                   : nullptr;
}

// Bounded hand-over from the source's thread to one HTTP thread. Shared by the request and the
// callbacks it registered, so a callback that fires after the request is gone lands harmlessly.
class EventChannel {
public:
    explicit EventChannel(size_t cap) : m_cap(cap) {}
    void push(ChoiceEvent e);
    // Waits up to `timeout`. False on timeout.
    bool pop(ChoiceEvent& out, std::chrono::milliseconds timeout);
    bool overflowed() const;

private:
    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<ChoiceEvent> m_queue;
    size_t m_cap;
    bool m_overflow = false;
};

// The sequences of one HTTP request (n choices, or n × prompts). Unfinished sequences are aborted when
// the object goes away (client gone, error, shutdown), so their KV blocks return to the pool.
class Generation {
public:
    enum class Wait { Event, Timeout, Shutdown, Overflow };

    Generation(GenerationSource& source, const std::atomic<bool>& shutdown, size_t maxBufferedEvents);
    ~Generation();
    Generation(const Generation&) = delete;
    Generation& operator=(const Generation&) = delete;

    // Submits the choices together (GenerationSource::submitAll): they start in the same engine step; choice
    // indices continue from size(). Throws what the source throws, with none of them queued.
    void submitAll(std::vector<std::pair<std::vector<int32_t>, SamplingParams>> choices);
    int size() const { return int(m_ids.size()); }
    bool finished() const { return m_open == 0; }
    Wait next(ChoiceEvent& out, std::chrono::milliseconds timeout);
    void abortAll();

private:
    GenerationSource& m_source;
    const std::atomic<bool>& m_shutdown;
    std::shared_ptr<EventChannel> m_channel;
    std::vector<int64_t> m_ids;
    std::vector<bool> m_done;
    int m_open = 0;
};

}  // namespace ts::serve
