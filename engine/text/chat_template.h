// Chat API over the Jinja renderer: turns an OpenAI-style request (messages, tools, kwargs such as
// enable_thinking / clear_thinking / reasoning_effort) into the exact prompt text HF's
// apply_chat_template would produce with the checkpoint's template.
//
// GLM-5.3-Flash: the vendor template ignores enable_thinking. Serving recipes run a patched template
// (thinking off -> the prompt ends `<think></think>` and the `Reasoning Effort` system line is dropped).
// We reproduce that by patching the vendor text at load time (applyGlm53FlashThinkingOverride): the
// patch is our own three small edits, applied only when the vendor's exact snippets are found.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ts {

namespace jinja {
class JinjaTemplate;
}

class ChatTemplate {
public:
    // `source` is the Jinja text; `origin` names it in error messages. Throws ts::Error(InvalidFile) on
    // a syntax error. With `thinkingOverride`, a GLM-5.3-Flash template gets the enable_thinking patch.
    explicit ChatTemplate(std::string source, std::string origin = "chat template", bool thinkingOverride = true);
    ~ChatTemplate();
    ChatTemplate(ChatTemplate&&) noexcept;
    ChatTemplate& operator=(ChatTemplate&&) noexcept;

    // Loads chat_template.jinja, else tokenizer_config.json's chat_template (a string, or the entry
    // named "default" of a list), and the special tokens (bos_token, eos_token, ...) HF passes along.
    // Throws ts::Error(NotFound) when the directory has no template.
    static ChatTemplate fromModelDir(const std::string& dir);

    // Renders the prompt. `messages`: OpenAI chat messages (tool-call `arguments` may be JSON strings:
    // they are parsed to objects first, as vLLM does; an unparsable one is ts::Error(InvalidArgument)).
    // `tools`: the OpenAI tools array, or null for none. `kwargs`: extra template variables
    // (enable_thinking, clear_thinking, reasoning_effort, ...), a JSON object or null.
    // Template errors (raise_exception included) are ts::Error(InvalidArgument).
    std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                       bool addGenerationPrompt, const nlohmann::ordered_json& kwargs = nullptr) const;

    // Variables HF passes from the tokenizer (bos_token, eos_token, pad_token, unk_token ...).
    void setSpecialTokens(nlohmann::ordered_json tokens) { m_specialTokens = std::move(tokens); }

    const std::string& source() const { return m_source; }  // after any override
    bool thinkingOverrideApplied() const { return m_overrideApplied; }

    // True when the rendered prompt leaves the model inside a reasoning block: the last `<think>`
    // comes after the last `<|assistant|>` and is not closed. Feeds ReasoningParser's start state.
    static bool promptEndsInReasoning(std::string_view prompt);

    // Copy of `messages` with string tool-call arguments parsed into JSON values.
    static nlohmann::ordered_json normalizeMessages(const nlohmann::ordered_json& messages);

private:
    std::string m_source;
    std::string m_origin;
    bool m_overrideApplied = false;
    nlohmann::ordered_json m_specialTokens = nlohmann::ordered_json::object();
    std::unique_ptr<jinja::JinjaTemplate> m_tpl;
};

// Applies the GLM-5.3-Flash enable_thinking/thinking behaviour to the vendor template text. Returns the
// patched text and sets *applied; text that lacks the vendor snippets comes back unchanged.
std::string applyGlm53FlashThinkingOverride(std::string_view source, bool* applied);

}  // namespace ts
