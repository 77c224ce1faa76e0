// Public face of TwinSpark's Jinja renderer: the subset of Jinja2 that Hugging Face chat templates use,
// rendered the way transformers' apply_chat_template does (trim_blocks, lstrip_blocks, loopcontrols,
// HF's tojson, raise_exception, strftime_now). Parsing happens once; render() is const and re-entrant.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "text/jinja_lexer.h"
#include "text/jinja_value.h"

namespace ts::jinja {

struct Template;

// Bounds that turn a runaway template into a ts::Error instead of a hang or an exhausted machine.
struct RenderLimits {
    size_t max_output_bytes = size_t(64) << 20;
    uint64_t max_loop_iterations = 10'000'000;  // summed over all loops of one render
    int max_call_depth = 100;                   // nested macro / callable calls
    size_t max_sequence_length = 1'000'000;     // range(), list and string repetition
};

class JinjaTemplate {
public:
    // Throws ts::Error(InvalidArgument, "template syntax error (line N): ...").
    explicit JinjaTemplate(std::string_view source, const LexerOptions& lex = {});
    ~JinjaTemplate();
    JinjaTemplate(JinjaTemplate&&) noexcept;
    JinjaTemplate& operator=(JinjaTemplate&&) noexcept;

    // Renders with `context` (a JSON object: its keys become template variables) plus `extra`
    // variables that JSON cannot express (callables). Errors (raise_exception, type errors, limits)
    // are ts::Error(InvalidArgument, "template error (line N): ...").
    std::string render(const nlohmann::ordered_json& context, const Object& extra = {}) const;
    std::string render(const Object& vars) const;

    RenderLimits limits;

private:
    std::unique_ptr<Template> m_tpl;
};

}  // namespace ts::jinja
