#include "serve/sse.h"

#include "serve/api_error.h"

namespace ts::serve {

std::string sseData(const json& chunk) { return "data: " + dumpJson(chunk) + "\n\n"; }

std::string sseDone() { return "data: [DONE]\n\n"; }

std::string sseComment(std::string_view text) { return ": " + std::string(text) + "\n\n"; }

StreamEnd pumpStream(Generation& gen, StreamHandler& handler, const std::function<bool(std::string_view)>& write,
                     std::chrono::milliseconds heartbeat) {
    using clock = std::chrono::steady_clock;
    // Waits are short so that shutdown and dead peers are noticed within a fraction of a second even
    // when the heartbeat interval is longer.
    const auto poll = std::min(heartbeat, std::chrono::milliseconds(100));
    auto lastWrite = clock::now();
    std::vector<json> chunks;
    auto flush = [&]() -> bool {
        std::string out;
        for (const auto& c : chunks) out += sseData(c);
        chunks.clear();
        if (out.empty()) return true;
        lastWrite = clock::now();
        return write(out);
    };
    auto endWithError = [&](int status, const std::string& message) {
        gen.abortAll();
        ApiError err(status, message);
        write(sseData(err.body()) + sseDone());
    };
    while (!gen.finished()) {
        ChoiceEvent ev;
        const Generation::Wait w = gen.next(ev, poll);
        if (w == Generation::Wait::Shutdown) {
            endWithError(503, "the server is shutting down; the request was aborted");
            return StreamEnd::Shutdown;
        }
        if (w == Generation::Wait::Overflow) {
            endWithError(500, "the client did not read the stream fast enough; the request was aborted");
            return StreamEnd::Overflow;
        }
        if (w == Generation::Wait::Timeout) {
            if (clock::now() - lastWrite >= heartbeat) {
                lastWrite = clock::now();
                if (!write(sseComment("keep-alive"))) {
                    gen.abortAll();
                    return StreamEnd::ClientGone;
                }
            }
            continue;
        }
        if (const std::string* why = engineFailure(ev)) {
            // What was already sent stands; the stream ends with the error event, as on shutdown.
            flush();
            endWithError(500, *why);
            return StreamEnd::EngineError;
        }
        handler.onEvent(ev, chunks);
        if (!flush()) {
            gen.abortAll();
            return StreamEnd::ClientGone;
        }
    }
    if (handler.onComplete) handler.onComplete(chunks);
    if (!flush()) return StreamEnd::ClientGone;
    if (!write(sseDone())) return StreamEnd::ClientGone;
    return StreamEnd::Complete;
}

}  // namespace ts::serve
