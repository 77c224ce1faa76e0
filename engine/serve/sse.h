// Server-sent events, the framing vLLM and llama.cpp clients parse: `data: {json}\n\n` per chunk,
// `data: [DONE]\n\n` at the end, an error during a stream as `data: {"error":{...}}\n\n` followed by
// [DONE] (vLLM's form; OpenAI SDKs surface it), and `: keep-alive\n\n` comments while the request has
// nothing to say (clients ignore comments; a failed write is how a vanished client is noticed).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/generation.h"

namespace ts::serve {

using json = nlohmann::ordered_json;

std::string sseData(const json& chunk);
std::string sseDone();
std::string sseComment(std::string_view text);

// How one streaming request turns events into chunks.
struct StreamHandler {
    // Chunks for one event (may be none).
    std::function<void(const ChoiceEvent&, std::vector<json>& out)> onEvent;
    // Chunks after every choice finished (the usage chunk).
    std::function<void(std::vector<json>& out)> onComplete;
};

enum class StreamEnd { Complete, ClientGone, Shutdown, Overflow, EngineError };

// Drives `gen` to completion, writing SSE through `write` (false = the client is gone). Every way out
// aborts what is still running (Generation's destructor does the same, for the paths that throw).
// On Shutdown / Overflow / EngineError an error event and [DONE] are written before returning.
StreamEnd pumpStream(Generation& gen, StreamHandler& handler, const std::function<bool(std::string_view)>& write,
                     std::chrono::milliseconds heartbeat);

}  // namespace ts::serve
