// Delivering a generation to the client, shared by /v1/chat/completions and /v1/completions: either drive
// it to the end and answer one JSON body, or answer at once with an SSE stream that an assembler fills.
// `Assembler` turns ChoiceEvents into the endpoint's chunks: onEvent(ev, out|nullptr, counters),
// start(out), complete(out), response().
#pragma once

#include <chrono>
#include <memory>

#include <httplib.h>

#include "serve/api_error.h"
#include "serve/connection_probe.h"
#include "serve/context.h"
#include "serve/handlers.h"
#include "serve/sse.h"

namespace ts::serve {

// `connection` (may be null): the client's connection, checked every 100 ms (of the clock) while a non-streaming answer waits;
// when the client has gone, the generation is aborted (499, which no one reads but the access log).
template <class Assembler>
void respond(std::shared_ptr<void> request, std::shared_ptr<Generation> gen, std::shared_ptr<Assembler> assembler,
             std::shared_ptr<InFlightSlot> slot, ServerCounters* counters, bool stream,
             std::chrono::milliseconds heartbeat, ConnectionProbe* connection, httplib::Response& res) {
    if (!stream) {
        constexpr auto kProbeEvery = std::chrono::milliseconds(100);  // tokens arrive faster: by the clock, not per wait
        auto nextProbe = std::chrono::steady_clock::now() + kProbeEvery;
        while (!gen->finished()) {
            ChoiceEvent ev;
            const auto w = gen->next(ev, kProbeEvery);
            if (w == Generation::Wait::Shutdown) throw ApiError(503, "the server is shutting down; the request was aborted");
            if (w == Generation::Wait::Overflow) throw ApiError(500, "too many buffered events; the request was aborted");
            if (w == Generation::Wait::Event) {
                if (const std::string* why = engineFailure(ev)) throw ApiError(500, *why);  // the others are aborted
                assembler->onEvent(ev, nullptr, counters);
            }
            // After the event: an answer that is complete is sent, whatever the probe would say.
            if (connection && !gen->finished() && std::chrono::steady_clock::now() >= nextProbe) {
                nextProbe = std::chrono::steady_clock::now() + kProbeEvery;
                if (connection->peerClosed()) {
                    gen->abortAll();
                    throw ApiError(499, "the client closed the connection; the request was aborted");
                }
            }
        }
        res.status = 200;
        res.set_content(dumpJson(assembler->response()), "application/json");
        return;
    }
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    // The provider owns the request, the generation, the assembler and the concurrency slot until the
    // stream ends; the release callback aborts whatever still runs (a client that went away).
    res.set_chunked_content_provider(
        "text/event-stream",
        [request, gen, assembler, slot, counters, heartbeat](size_t, httplib::DataSink& sink) {
            StreamHandler h;
            h.onEvent = [&](const ChoiceEvent& ev, std::vector<json>& out) { assembler->onEvent(ev, &out, counters); };
            h.onComplete = [&](std::vector<json>& out) { assembler->complete(out); };
            std::vector<json> first;
            assembler->start(first);
            std::string head;
            for (const auto& c : first) head += sseData(c);
            auto write = [&sink](std::string_view s) { return s.empty() || sink.write(s.data(), s.size()); };
            if (write(head)) pumpStream(*gen, h, write, heartbeat);  // every way out aborts what still runs
            else gen->abortAll();
            sink.done();
            return true;
        },
        [gen](bool) { gen->abortAll(); });
}

}  // namespace ts::serve
