// Chat template loading, request normalisation and rendering.
#include "text/chat_template.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "text/jinja_template.h"

namespace ts {

using ojson = nlohmann::ordered_json;

namespace {

std::string readFile(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) fail(ErrorKind::Io, "cannot open " + p.string());
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

bool replaceOnce(std::string& s, std::string_view from, std::string_view to) {
    const size_t p = s.find(from);
    if (p == std::string::npos || s.find(from, p + 1) != std::string::npos) return false;
    s.replace(p, from.size(), to);
    return true;
}

// tokenizer_config.json stores special tokens as strings or as AddedToken objects {"content": ...}.
std::optional<std::string> tokenText(const ojson& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return std::nullopt;
}

}  // namespace

std::string applyGlm53FlashThinkingOverride(std::string_view source, bool* applied) {
    // The three places of the vendor template that decide thinking: the header (where we compute the
    // switch), the Reasoning Effort line (only when thinking) and the generation prompt (`<think>` opens
    // reasoning; `<think></think>` is an empty, closed one). `thinking` and `enable_thinking` are both
    // honoured (chat_template_kwargs spell it either way); neither given means thinking on.
    static constexpr std::string_view kHeader = "[gMASK]<sop>\n";
    static constexpr std::string_view kSwitch =
        "{%- set _ts_thinking = ((thinking is defined and thinking) or (enable_thinking is defined and "
        "enable_thinking)) if (thinking is defined or enable_thinking is defined) else true -%}\n";
    static constexpr std::string_view kEffortFrom =
        "{%- if effective_reasoning_effort is not none -%}<|system|>Reasoning Effort:";
    static constexpr std::string_view kEffortTo =
        "{%- if _ts_thinking and effective_reasoning_effort is not none -%}<|system|>Reasoning Effort:";
    static constexpr std::string_view kGenFrom = "<|assistant|>{{- '<think>' -}}";
    static constexpr std::string_view kGenTo = "<|assistant|>{{- '<think>' if _ts_thinking else '<think></think>' -}}";

    std::string s(source);
    const bool matches = s.compare(0, kHeader.size(), kHeader) == 0 && s.find("_ts_thinking") == std::string::npos &&
                         s.find("enable_thinking") == std::string::npos;
    std::string patched = s;
    if (matches && replaceOnce(patched, kEffortFrom, kEffortTo) && replaceOnce(patched, kGenFrom, kGenTo)) {
        patched.insert(kHeader.size(), kSwitch);
        if (applied) *applied = true;
        return patched;
    }
    if (applied) *applied = false;
    return s;
}

ChatTemplate::ChatTemplate(std::string source, std::string origin, bool thinkingOverride)
    : m_origin(std::move(origin)) {
    m_source = thinkingOverride ? applyGlm53FlashThinkingOverride(source, &m_overrideApplied) : std::move(source);
    try {
        m_tpl = std::make_unique<jinja::JinjaTemplate>(m_source);
    } catch (const Error& e) {
        fail(ErrorKind::InvalidFile, m_origin + ": " + e.what());
    }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

ChatTemplate ChatTemplate::fromModelDir(const std::string& dir) {
    namespace fs = std::filesystem;
    const fs::path root(dir);
    ojson config;
    const fs::path cfgPath = root / "tokenizer_config.json";
    if (fs::exists(cfgPath)) {
        try {
            config = ojson::parse(readFile(cfgPath));
        } catch (const ojson::exception& e) {
            fail(ErrorKind::InvalidFile, cfgPath.string() + ": " + e.what());
        }
    }
    std::string source, origin;
    if (fs::exists(root / "chat_template.jinja")) {
        origin = (root / "chat_template.jinja").string();
        source = readFile(root / "chat_template.jinja");
    } else if (config.is_object() && config.contains("chat_template")) {
        origin = cfgPath.string() + " chat_template";
        const ojson& ct = config["chat_template"];
        if (ct.is_string()) {
            source = ct.get<std::string>();
        } else if (ct.is_array()) {
            for (const auto& e : ct)
                if (e.is_object() && e.value("name", "") == "default" && e.contains("template"))
                    source = e["template"].get<std::string>();
        }
        if (source.empty()) fail(ErrorKind::InvalidFile, origin + ": no usable (default) template");
    } else {
        fail(ErrorKind::NotFound, dir + ": no chat_template.jinja and no chat_template in tokenizer_config.json");
    }
    ChatTemplate t(std::move(source), origin);
    ojson tokens = ojson::object();
    if (config.is_object()) {
        for (const char* k : {"bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token",
                              "mask_token"}) {
            if (config.contains(k))
                if (auto s = tokenText(config[k])) tokens[k] = *s;
        }
    }
    t.setSpecialTokens(std::move(tokens));
    return t;
}

ojson ChatTemplate::normalizeMessages(const ojson& messages) {
    if (!messages.is_array()) fail(ErrorKind::InvalidArgument, "messages must be an array");
    ojson out = messages;
    for (size_t i = 0; i < out.size(); ++i) {
        ojson& m = out[i];
        if (!m.is_object()) fail(ErrorKind::InvalidArgument, "messages[" + std::to_string(i) + "] must be an object");
        if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
        ojson& calls = m["tool_calls"];
        for (size_t j = 0; j < calls.size(); ++j) {
            ojson& tc = calls[j];
            ojson* fn = tc.is_object() && tc.contains("function") && tc["function"].is_object() ? &tc["function"] : &tc;
            if (!fn->is_object() || !fn->contains("arguments") || !(*fn)["arguments"].is_string()) continue;
            const std::string text = (*fn)["arguments"].get<std::string>();
            const std::string where =
                "messages[" + std::to_string(i) + "].tool_calls[" + std::to_string(j) + "].function.arguments";
            try {
                (*fn)["arguments"] = ojson::parse(text);
            } catch (const ojson::exception&) {
                fail(ErrorKind::InvalidArgument, where + " is not valid JSON: " + text.substr(0, 200));
            }
            // A call's arguments are named (the template renders them key by value): "[1,2]" or "3" is JSON,
            // but not arguments.
            if (!(*fn)["arguments"].is_object())
                fail(ErrorKind::InvalidArgument, where + " must be a JSON object, not " + text.substr(0, 200));
        }
    }
    return out;
}

std::string ChatTemplate::render(const ojson& messages, const ojson& tools, bool addGenerationPrompt,
                                 const ojson& kwargs) const {
    // Variables in the order and shape transformers passes them: messages, tools (None when absent),
    // documents, add_generation_prompt, then the special tokens and the caller's kwargs.
    ojson ctx = ojson::object();
    ctx["messages"] = normalizeMessages(messages);
    ctx["tools"] = tools;
    ctx["documents"] = nullptr;
    ctx["add_generation_prompt"] = addGenerationPrompt;
    for (const auto& [k, v] : m_specialTokens.items()) ctx[k] = v;
    if (kwargs.is_object())
        for (const auto& [k, v] : kwargs.items()) ctx[k] = v;
    else if (!kwargs.is_null())
        fail(ErrorKind::InvalidArgument, "chat template kwargs must be an object");
    return m_tpl->render(ctx);
}

bool ChatTemplate::promptEndsInReasoning(std::string_view prompt) {
    const size_t open = prompt.rfind("<think>");
    if (open == std::string_view::npos) return false;
    const size_t assistant = prompt.rfind("<|assistant|>");
    if (assistant != std::string_view::npos && assistant > open) return false;
    return prompt.find("</think>", open) == std::string_view::npos;
}

}  // namespace ts
