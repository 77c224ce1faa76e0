// Splits GLM model output into reasoning and content, as vLLM's glm45 reasoning parser does for the
// GLM-4.5/4.7/5.x templates: text up to `</think>` is reasoning. When the prompt already opened the
// block (the generation prompt ends `<|assistant|><think>`), output starts as reasoning; otherwise a
// leading `<think>` opens it; with thinking off (`<think></think>` or `</think>` prefilled) everything
// is content. Streaming and whole-text parsing give the same result: feed() holds back only a
// possible partial tag, so where the text is cut never changes what is decided.
#pragma once

#include <string>
#include <string_view>

namespace ts {

struct ReasoningDelta {
    std::string reasoning;
    std::string content;
    bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningParser {
public:
    // `startsInReasoning`: the prompt ends inside an open <think> (ChatTemplate::promptEndsInReasoning).
    explicit ReasoningParser(bool startsInReasoning = true);

    ReasoningDelta feed(std::string_view text) noexcept;
    ReasoningDelta finish() noexcept;  // flushes held-back text; output truncated mid-reasoning stays reasoning

    bool inReasoning() const { return m_state == State::Reasoning; }
    bool reasoningEnded() const { return m_sawEnd; }

    static ReasoningDelta parse(std::string_view text, bool startsInReasoning);

private:
    enum class State { Start, Reasoning, Content };
    ReasoningDelta step(bool final);

    State m_state;
    bool m_atBlockStart;  // in Reasoning, nothing consumed yet: a repeated <think> is dropped
    bool m_sawEnd = false;
    std::string m_buf;
};

// Length of the longest suffix of `text` that is a proper prefix of `tag` (a tag possibly cut by the
// end of a streaming chunk).
size_t partialTagSuffix(std::string_view text, std::string_view tag);

}  // namespace ts
