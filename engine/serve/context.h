// What the request handlers need once the model is loaded: tokenizer, chat template, the generation
// source, the served name and the context limit. The server holds it behind a pointer that is null
// while loading (every model route answers 503 until then).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/generation.h"
#include "serve/server_options.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ts::serve {

// Sampling defaults from generation_config.json: only the keys the file sets (vLLM's
// --generation-config auto); a request's own values win.
struct SamplingDefaults {
    std::optional<float> temperature, topP, minP, repetitionPenalty;
    std::optional<int32_t> topK;
    static SamplingDefaults fromGenerationConfig(const nlohmann::json& raw);
};

struct ServeContext {
    const Tokenizer* tokenizer = nullptr;
    const ChatTemplate* chatTemplate = nullptr;
    GenerationSource* source = nullptr;
    std::string root;            // model directory (/v1/models "root")
    int64_t maxModelLen = 0;     // prompt + completion tokens one request may use (min of the setting and the pool)
    int64_t vocabSize = 0;
    SamplingDefaults defaults;
    int64_t created = 0;         // unix time the model became ready
    // Jinja rendering keeps per-call state: one render at a time (it is short next to generation).
    mutable std::mutex templateMutex;
};

// Counters the server keeps itself (finish reasons by request, HTTP requests), for /metrics.
struct ServerCounters {
    std::atomic<int64_t> finishedStop{0}, finishedLength{0}, finishedAbort{0}, finishedError{0};
    std::atomic<int64_t> httpRequests{0}, rejectedBusy{0};
    std::atomic<int32_t> inFlight{0};
};

}  // namespace ts::serve
