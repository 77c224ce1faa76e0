#include "serve/generation.h"

namespace ts::serve {

void EventChannel::push(ChoiceEvent e) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        // Finished events are always kept (they release the request); tokens past the cap mark the
        // request as overflowed, and the HTTP side aborts it.
        if (m_queue.size() >= m_cap && e.event.type == EngineEvent::Type::Token) {
            m_overflow = true;
        } else {
            m_queue.push_back(std::move(e));
        }
    }
    m_cv.notify_one();
}

bool EventChannel::pop(ChoiceEvent& out, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(m_mutex);
    if (!m_cv.wait_for(lock, timeout, [this] { return !m_queue.empty(); })) return false;
    out = std::move(m_queue.front());
    m_queue.pop_front();
    return true;
}

bool EventChannel::overflowed() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_overflow;
}

Generation::Generation(GenerationSource& source, const std::atomic<bool>& shutdown, size_t maxBufferedEvents)
    : m_source(source), m_shutdown(shutdown), m_channel(std::make_shared<EventChannel>(maxBufferedEvents)) {}

Generation::~Generation() { abortAll(); }

void Generation::submitAll(std::vector<std::pair<std::vector<int32_t>, SamplingParams>> choices) {
    std::vector<Engine::Submission> subs;
    subs.reserve(choices.size());
    const int first = int(m_ids.size());
    for (size_t i = 0; i < choices.size(); ++i) {
        std::weak_ptr<EventChannel> weak = m_channel;
        const int choice = first + int(i);
        subs.push_back({std::move(choices[i].first), std::move(choices[i].second), [weak, choice](const EngineEvent& e) {
                            if (auto ch = weak.lock()) ch->push(ChoiceEvent{choice, e});
                        }});
    }
    for (int64_t id : m_source.submitAll(std::move(subs))) {
        m_ids.push_back(id);
        m_done.push_back(false);
        ++m_open;
    }
}

Generation::Wait Generation::next(ChoiceEvent& out, std::chrono::milliseconds timeout) {
    if (m_channel->overflowed()) return Wait::Overflow;
    if (m_shutdown.load()) return Wait::Shutdown;
    if (!m_channel->pop(out, timeout)) return m_shutdown.load() ? Wait::Shutdown : Wait::Timeout;
    if (out.event.type == EngineEvent::Type::Finished && out.choice >= 0 && out.choice < int(m_done.size()) &&
        !m_done[size_t(out.choice)]) {
        m_done[size_t(out.choice)] = true;
        --m_open;
    }
    return Wait::Event;
}

void Generation::abortAll() {
    for (size_t i = 0; i < m_ids.size(); ++i) {
        if (m_done[i]) continue;
        m_source.abort(m_ids[i]);
        m_done[i] = true;
    }
    m_open = 0;
}

}  // namespace ts::serve
