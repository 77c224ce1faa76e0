// Request validation: the JSON body becomes a typed request, or an ApiError(400) naming the field
// (`param`) and the allowed range. Everything a handler uses is checked here, in one stage, before any
// sequence is submitted or any KV block is touched. Unknown fields are ignored with a log line (vLLM's
// behaviour); fields we know but do not implement are refused, never silently ignored.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/sequence.h"
#include "serve/context.h"
#include "serve/server_options.h"

namespace ts::serve {

using json = nlohmann::ordered_json;

// Parses a request body: 400 for malformed JSON, invalid UTF-8 or lone surrogates, nesting deeper than
// limits.maxJsonDepth (checked before parsing), or a top level that is not an object.
json parseBody(const std::string& body, const ServerLimits& limits);

enum class ToolChoice { None, Auto, Required, Named };

// Fields shared by chat and completions.
struct CommonRequest {
    bool stream = false;
    bool includeUsage = false;       // stream_options.include_usage
    bool continuousUsage = false;    // stream_options.continuous_usage_stats
    int32_t n = 1;
    SamplingParams sampling;         // maxTokens left at 0 until the prompt length is known
    std::optional<int64_t> maxTokens;
    std::vector<std::string> ignoredFields;  // unknown top-level keys (logged)
};

struct ChatRequest : CommonRequest {
    json messages;                   // normalised: text parts joined, `reasoning` copied to reasoning_content
    json tools;                      // null or the validated tools array
    ToolChoice toolChoice = ToolChoice::None;
    std::string toolName;            // ToolChoice::Named
    json templateKwargs = json::object();  // enable_thinking defaults to true
    bool addGenerationPrompt = true;
    bool logprobs = false;
    int32_t topLogprobs = 0;
    bool parallelToolCalls = true;
};

using PromptInput = std::variant<std::string, std::vector<int32_t>>;

struct CompletionRequest : CommonRequest {
    std::vector<PromptInput> prompts;
    bool echo = false;
    int32_t logprobs = -1;           // -1: none
};

ChatRequest parseChatRequest(const json& body, const ServeContext& ctx, const ServerLimits& limits,
                             const std::string& servedModelName);
CompletionRequest parseCompletionRequest(const json& body, const ServeContext& ctx, const ServerLimits& limits,
                                         const std::string& servedModelName);

// The context check both endpoints make once the prompt is tokenized; returns max_tokens to use
// (the request's, or what is left of the context when it gave none). vLLM's wording, verbatim:
//   prompt alone too long: "This model's maximum context length is N tokens. However, your request has
//     P input tokens. Please reduce the length of the input messages."
//   prompt + max_tokens too long: "This model's maximum context length is N tokens. However, you
//     requested M tokens (P in the messages, C in the completion). Please reduce the length of the
//     messages or completion."
// `promptParam` names the input in the first error ("messages" or "prompt"), `param` the limit in the second.
int32_t resolveMaxTokens(int64_t promptTokens, std::optional<int64_t> maxTokens, int64_t maxModelLen,
                         const char* param = "max_tokens", const char* promptParam = "messages");

}  // namespace ts::serve
