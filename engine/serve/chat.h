// /v1/chat/completions response assembly: engine events (detokenized text, logprobs, finish) become
// the message (content, reasoning, tool_calls) or the stream of chunks. Reasoning is split by the glm45
// parser and sent under both `reasoning_content` (llama.cpp, older vLLM) and `reasoning` (vLLM since
// PR #27752); tool calls are parsed from the content by the glm47 parser.
//
// tool_choice, exactly:
//   none      tools are still rendered into the prompt (vLLM's default), output is never parsed for
//             calls: any <tool_call> text stays in `content`.
//   auto      calls are parsed; finish_reason "tool_calls" when there is at least one.
//   required  validated (tools must be non-empty); steered: an open <think> block of the generation
//             prompt is closed (no reasoning for this request) and the assistant turn is prefilled with
//             `<tool_call>`, so the model's first output is a call; enforced: a choice without a
//             well-formed call is an error (HTTP 500 non-streaming; an error event in a stream).
//   named     as required, with the prefill `<tool_call>NAME`; every returned call must name that
//             function; finish_reason "stop" (OpenAI's and vLLM's choice for a forced function).
// The arguments themselves are not grammar-constrained (no structured output yet): they are what the
// model wrote, typed by the tool's JSON schema.
// parallel_tool_calls false: only the first call of a choice is returned.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "serve/generation.h"
#include "serve/handlers.h"
#include "serve/validation.h"
#include "text/reasoning_parser.h"
#include "text/tool_call_parser.h"

namespace ts::serve {

class ChatAssembler {
public:
    // `startsInReasoning`: the prompt leaves the model inside <think>. `forcedPrefix`: text the prompt
    // was prefilled with for required / named tool choice (fed to the tool parser first).
    ChatAssembler(const ChatRequest& req, const Tokenizer* tokenizer, std::string model, bool startsInReasoning,
                  std::string forcedPrefix, int64_t promptTokens);

    // The first chunk of each choice: delta {"role": "assistant", "content": ""}.
    void start(std::vector<json>& chunks);
    // Folds one event in; with `chunks`, appends the stream chunks it produces.
    void onEvent(const ChoiceEvent& ev, std::vector<json>* chunks, ServerCounters* counters = nullptr);
    // After every choice finished: the final usage chunk (stream_options.include_usage).
    void complete(std::vector<json>& chunks) const;
    // The whole non-streaming response; throws ApiError(500) when a choice broke tool_choice.
    json response() const;

    const std::string& id() const { return m_id; }

private:
    struct Choice {
        explicit Choice(bool startsInReasoning) : reasoningParser(startsInReasoning) {}
        ReasoningParser reasoningParser;
        std::optional<ToolCallParser> toolParser;
        std::string content, reasoning;
        std::vector<ToolCall> calls;
        json logprobs = json::array();
        json pendingLogprobs = json::array();  // streaming: not yet attached to a chunk
        FinishReason finish = FinishReason::None;
        json stopReason = nullptr;
        int64_t completionTokens = 0, cachedTokens = 0;
        std::string violation;  // tool_choice not honoured
    };
    json chunk(json choices) const;
    json logprobEntry(int32_t token, float lp, const std::vector<std::pair<int32_t, float>>& top) const;
    void apply(Choice& c, int index, const ReasoningDelta& rd, bool final, json& delta);
    void pushDelta(std::vector<json>& chunks, int choice, Choice& c, json& delta);
    const char* finishReason(const Choice& c) const;
    int64_t completionTokens() const;

    const ChatRequest& m_req;
    const Tokenizer* m_tok;
    std::string m_model, m_id;
    int64_t m_created;
    int64_t m_promptTokens;
    std::vector<Choice> m_choices;
};

}  // namespace ts::serve
