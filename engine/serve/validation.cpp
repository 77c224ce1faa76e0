#include "serve/validation.h"

#include <cmath>
#include <limits>
#include <set>

#include <cctype>
#include <cstdio>

#include "core/error.h"
#include "runtime/sampler.h"
#include "serve/api_error.h"

namespace ts::serve {

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

// Typed access to the fields of one JSON object; null counts as absent (clients send explicit nulls).
class Fields {
public:
    Fields(const json& obj, std::string prefix = {}) : m_obj(obj), m_prefix(std::move(prefix)) {}

    std::string name(const std::string& key) const { return m_prefix + key; }
    const json* get(const std::string& key) {
        m_used.insert(key);
        auto it = m_obj.find(key);
        return it == m_obj.end() || it->is_null() ? nullptr : &*it;
    }
    std::optional<bool> boolean(const std::string& key) {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_boolean()) bad(name(key), "'" + name(key) + "' must be a boolean");
        return v->get<bool>();
    }
    std::optional<int64_t> integer(const std::string& key, int64_t lo, int64_t hi) {
        const json* v = get(key);
        if (!v) return std::nullopt;
        int64_t x = 0;
        if (v->is_number_integer()) {
            if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
                bad(name(key), "'" + name(key) + "' must be an integer in [" + std::to_string(lo) + ", " +
                                   std::to_string(hi) + "]");
            x = v->get<int64_t>();
        } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
                   std::floor(v->get<double>()) == v->get<double>() && std::fabs(v->get<double>()) < 9.0e18) {
            x = int64_t(v->get<double>());  // 2.0 is an integer; 1.5 is not
        } else {
            bad(name(key), "'" + name(key) + "' must be an integer");
        }
        if (x < lo || x > hi)
            bad(name(key), "'" + name(key) + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                               "], got " + std::to_string(x));
        return x;
    }
    std::optional<float> number(const std::string& key, double lo, double hi) {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_number()) bad(name(key), "'" + name(key) + "' must be a number");
        const double x = v->get<double>();
        if (!std::isfinite(x) || x < lo || x > hi) {
            char range[96];
            std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
            bad(name(key), "'" + name(key) + "' must be a finite number in " + range);
        }
        return float(x);
    }
    std::optional<std::string> string(const std::string& key) {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_string()) bad(name(key), "'" + name(key) + "' must be a string");
        return v->get<std::string>();
    }
    std::vector<std::string> unused() const {
        std::vector<std::string> out;
        for (const auto& [k, v] : m_obj.items())
            if (!m_used.count(k)) out.push_back(k);
        return out;
    }

private:
    const json& m_obj;
    std::string m_prefix;
    std::set<std::string> m_used;
};

// Depth of [ / { nesting outside strings. nlohmann's parser is iterative, but destroying or dumping a
// value recurses, so depth is bounded before anything is built.
bool depthWithin(const std::string& s, int limit) {
    int depth = 0;
    bool inString = false, escape = false;
    for (char c : s) {
        if (inString) {
            if (escape) escape = false;
            else if (c == '\\') escape = true;
            else if (c == '"') inString = false;
            continue;
        }
        if (c == '"') inString = true;
        else if (c == '[' || c == '{') {
            if (++depth > limit) return false;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return true;
}

void checkModel(Fields& f, const std::string& served) {
    // `model` may be omitted (vLLM then uses the served model); when given it must match.
    if (auto m = f.string("model"); m && *m != served) throw unknownModelError(*m, served);
}

void parseStop(Fields& f, SamplingParams& p, const ServerLimits& lim) {
    if (const json* s = f.get("stop")) {
        std::vector<std::string> stops;
        if (s->is_string()) {
            stops.push_back(s->get<std::string>());
        } else if (s->is_array()) {
            if (s->size() > lim.maxStopStrings)
                bad("stop", "'stop' has " + std::to_string(s->size()) + " entries; at most " +
                                std::to_string(lim.maxStopStrings) + " are allowed");
            for (const auto& e : *s) {
                if (!e.is_string()) bad("stop", "'stop' must be a string or an array of strings");
                stops.push_back(e.get<std::string>());
            }
        } else {
            bad("stop", "'stop' must be a string or an array of strings");
        }
        for (const auto& st : stops) {
            if (st.empty()) bad("stop", "'stop' strings must not be empty");
            if (st.size() > lim.maxStopStringBytes)
                bad("stop", "'stop' strings are limited to " + std::to_string(lim.maxStopStringBytes) + " bytes");
        }
        p.stop = std::move(stops);
    }
    if (const json* s = f.get("stop_token_ids")) {
        if (!s->is_array()) bad("stop_token_ids", "'stop_token_ids' must be an array of token ids");
        if (s->size() > lim.maxStopTokenIds)
            bad("stop_token_ids", "'stop_token_ids' is limited to " + std::to_string(lim.maxStopTokenIds) + " ids");
        for (const auto& e : *s) {
            if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX)
                bad("stop_token_ids", "'stop_token_ids' must hold token ids (non-negative integers)");
            p.stopTokenIds.push_back(int32_t(e.get<int64_t>()));
        }
    }
}

void parseCommon(Fields& f, CommonRequest& r, const ServeContext& ctx, const ServerLimits& lim) {
    SamplingParams& p = r.sampling;
    const SamplingDefaults& d = ctx.defaults;
    p.temperature = f.number("temperature", 0.0, 1.0e6).value_or(d.temperature.value_or(1.0f));
    p.topP = f.number("top_p", 0.0, 1.0).value_or(d.topP.value_or(1.0f));
    if (p.topP <= 0.0f) bad("top_p", "'top_p' must be in (0, 1]");
    p.topK = int32_t(f.integer("top_k", -1, INT32_MAX).value_or(d.topK.value_or(0)));
    if (p.topK == -1) p.topK = 0;
    p.minP = f.number("min_p", 0.0, 1.0).value_or(d.minP.value_or(0.0f));
    p.presencePenalty = f.number("presence_penalty", -2.0, 2.0).value_or(0.0f);
    p.frequencyPenalty = f.number("frequency_penalty", -2.0, 2.0).value_or(0.0f);
    p.repetitionPenalty = f.number("repetition_penalty", 0.0, 1.0e6).value_or(d.repetitionPenalty.value_or(1.0f));
    if (p.repetitionPenalty <= 0.0f) bad("repetition_penalty", "'repetition_penalty' must be > 0");
    if (auto s = f.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
        p.seed = uint64_t(*s);
    parseStop(f, p, lim);
    p.ignoreEos = f.boolean("ignore_eos").value_or(false);
    p.minTokens = int32_t(f.integer("min_tokens", 0, INT32_MAX).value_or(0));
    p.skipSpecialTokens = f.boolean("skip_special_tokens").value_or(true);
    p.includeStopStrInOutput = f.boolean("include_stop_str_in_output").value_or(false);
    r.n = int32_t(f.integer("n", 1, lim.maxChoices).value_or(1));
    r.stream = f.boolean("stream").value_or(false);
    if (const json* so = f.get("stream_options")) {
        if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
        Fields sf(*so, "stream_options.");
        r.includeUsage = sf.boolean("include_usage").value_or(false);
        r.continuousUsage = sf.boolean("continuous_usage_stats").value_or(false);
        if (!r.stream) bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    }
    if (const json* lb = f.get("logit_bias"); lb && !(lb->is_object() && lb->empty()))
        bad("logit_bias", "'logit_bias' is not supported by this server");
    if (const json* rf = f.get("response_format")) {
        if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
            bad("response_format", "'response_format' must be an object with a string 'type'");
        if ((*rf)["type"] != "text")
            bad("response_format", "'response_format' of type '" + (*rf)["type"].get<std::string>() +
                                       "' is not supported by this server (structured output is not implemented)");
    }
    if (auto bo = f.integer("best_of", 1, lim.maxChoices); bo && *bo != r.n)
        bad("best_of", "'best_of' is not supported (it must equal 'n' when given)");
    // Fields with nothing to do here: accepted without effect on generation.
    for (const char* k : {"user", "metadata", "store", "service_tier", "request_id", "priority"}) f.get(k);
}

void finishCommon(Fields& f, CommonRequest& r, const ServeContext& ctx) {
    r.ignoredFields = f.unused();
    SamplingParams probe = r.sampling;
    probe.maxTokens = 1;
    probe.minTokens = 0;
    try {
        validateSamplingParams(probe, ctx.vocabSize);
    } catch (const ts::Error& e) {
        throw fromEngineError(e);
    }
}

std::string textOfContent(const json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) bad(where, "'" + where + "' must be a string or an array of content parts");
    std::string text;
    bool first = true;
    for (const auto& part : content) {
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
            bad(where, "'" + where + "' parts must be objects with a string 'type'");
        const std::string type = part["type"].get<std::string>();
        if (type != "text")
            bad(where, "content parts of type '" + type + "' are not supported by this server (text only)");
        if (!part.contains("text") || !part["text"].is_string()) bad(where, "a 'text' part needs a string 'text'");
        if (!first) text += "\n";  // vLLM joins text parts with a newline for string-content templates
        text += part["text"].get<std::string>();
        first = false;
    }
    return text;
}

json parseMessages(const json* raw, const ServerLimits& lim) {
    if (!raw) bad("messages", "'messages' is required");
    if (!raw->is_array()) bad("messages", "'messages' must be an array");
    if (raw->empty()) bad("messages", "'messages' must not be empty");
    if (raw->size() > lim.maxMessages)
        bad("messages", "'messages' is limited to " + std::to_string(lim.maxMessages) + " entries");
    static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
    json out = json::array();
    for (size_t i = 0; i < raw->size(); ++i) {
        const std::string where = "messages[" + std::to_string(i) + "]";
        const json& m = (*raw)[i];
        if (!m.is_object()) bad(where, "'" + where + "' must be an object");
        if (!m.contains("role") || !m["role"].is_string()) bad(where + ".role", "'" + where + ".role' must be a string");
        const std::string role = m["role"].get<std::string>();
        if (!kRoles.count(role))
            bad(where + ".role", "'" + where + ".role' must be one of system, developer, user, assistant, tool; got '" +
                                     role + "'");
        json n = json::object();
        // OpenAI's `developer` role is the system role under a newer name (clients send it in its place);
        // the chat template knows only `system`, and would drop any other role without a word.
        n["role"] = role == "developer" ? std::string("system") : role;
        const bool hasCalls = m.contains("tool_calls") && !m["tool_calls"].is_null();
        if (!m.contains("content") || m["content"].is_null()) {
            if (role != "assistant") bad(where + ".content", "'" + where + ".content' is required for role " + role);
            n["content"] = "";
        } else {
            n["content"] = textOfContent(m["content"], where + ".content");
        }
        if (m.contains("name") && !m["name"].is_null()) {
            if (!m["name"].is_string()) bad(where + ".name", "'" + where + ".name' must be a string");
            n["name"] = m["name"];
        }
        if (role == "assistant") {
            // Accept reasoning under either name (vLLM renamed reasoning_content to reasoning).
            for (const char* k : {"reasoning_content", "reasoning"}) {
                if (!m.contains(k) || m[k].is_null()) continue;
                if (!m[k].is_string()) bad(where + "." + k, "'" + where + "." + k + "' must be a string");
                if (!n.contains("reasoning_content")) n["reasoning_content"] = m[k];
            }
            if (hasCalls) {
                const json& calls = m["tool_calls"];
                if (!calls.is_array()) bad(where + ".tool_calls", "'" + where + ".tool_calls' must be an array");
                for (size_t j = 0; j < calls.size(); ++j) {
                    const std::string cw = where + ".tool_calls[" + std::to_string(j) + "]";
                    const json& c = calls[j];
                    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
                        bad(cw, "'" + cw + "' must be an object with a 'function' object");
                    const json& fn = c["function"];
                    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
                        bad(cw + ".function.name", "'" + cw + ".function.name' must be a non-empty string");
                    if (fn.contains("arguments") && !fn["arguments"].is_string() && !fn["arguments"].is_object())
                        bad(cw + ".function.arguments", "'" + cw + ".function.arguments' must be a JSON string or object");
                }
                n["tool_calls"] = calls;
            }
        } else if (hasCalls) {
            bad(where + ".tool_calls", "only assistant messages may carry tool_calls");
        }
        if (role == "tool" && m.contains("tool_call_id") && !m["tool_call_id"].is_null()) {
            if (!m["tool_call_id"].is_string()) bad(where + ".tool_call_id", "'tool_call_id' must be a string");
            n["tool_call_id"] = m["tool_call_id"];
        }
        out.push_back(std::move(n));
    }
    return out;
}

bool validToolName(const std::string& s) {
    if (s.empty() || s.size() > 64) return false;
    for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
    return true;
}

void parseTools(Fields& f, ChatRequest& r, const ServerLimits& lim) {
    const json* tools = f.get("tools");
    if (tools) {
        if (!tools->is_array()) bad("tools", "'tools' must be an array");
        if (tools->size() > lim.maxTools)
            bad("tools", "'tools' is limited to " + std::to_string(lim.maxTools) + " entries");
        std::set<std::string> names;
        for (size_t i = 0; i < tools->size(); ++i) {
            const std::string w = "tools[" + std::to_string(i) + "]";
            const json& t = (*tools)[i];
            if (!t.is_object() || t.value("type", std::string()) != "function" || !t.contains("function") ||
                !t["function"].is_object())
                bad(w, "'" + w + "' must be {\"type\": \"function\", \"function\": {...}}");
            const json& fn = t["function"];
            if (!fn.contains("name") || !fn["name"].is_string() || !validToolName(fn["name"].get<std::string>()))
                bad(w + ".function.name", "'" + w + ".function.name' must be 1-64 characters of a-z, A-Z, 0-9, _ . -");
            if (!names.insert(fn["name"].get<std::string>()).second)
                bad(w + ".function.name", "tool names must be unique");
            if (fn.contains("description") && !fn["description"].is_null() && !fn["description"].is_string())
                bad(w + ".function.description", "'" + w + ".function.description' must be a string");
            if (fn.contains("parameters") && !fn["parameters"].is_null()) {
                const json& p = fn["parameters"];
                if (!p.is_object()) bad(w + ".function.parameters", "'" + w + ".function.parameters' must be a JSON schema object");
                if (p.contains("properties") && !p["properties"].is_object())
                    bad(w + ".function.parameters", "'" + w + ".function.parameters.properties' must be an object");
                if (p.contains("type") && !p["type"].is_string() && !p["type"].is_array())
                    bad(w + ".function.parameters", "'" + w + ".function.parameters.type' must be a string");
            }
        }
        r.tools = tools->empty() ? json(nullptr) : *tools;
    }
    const json* tc = f.get("tool_choice");
    // OpenAI's default: "auto" when tools are given, "none" otherwise.
    r.toolChoice = r.tools.is_null() ? ToolChoice::None : ToolChoice::Auto;
    if (tc) {
        if (tc->is_string()) {
            const std::string s = tc->get<std::string>();
            if (s == "none") r.toolChoice = ToolChoice::None;
            else if (s == "auto") r.toolChoice = ToolChoice::Auto;
            else if (s == "required") r.toolChoice = ToolChoice::Required;
            else bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or a named function");
        } else if (tc->is_object() && tc->value("type", std::string()) == "function" && tc->contains("function") &&
                   (*tc)["function"].is_object() && (*tc)["function"].contains("name") &&
                   (*tc)["function"]["name"].is_string()) {
            r.toolChoice = ToolChoice::Named;
            r.toolName = (*tc)["function"]["name"].get<std::string>();
        } else {
            bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                               "{\"type\": \"function\", \"function\": {\"name\": ...}}");
        }
        if ((r.toolChoice == ToolChoice::Required || r.toolChoice == ToolChoice::Named) && r.tools.is_null())
            bad("tool_choice", "'tool_choice' \"required\" or a named function needs a non-empty 'tools' list");
        if (r.toolChoice == ToolChoice::Named) {
            bool found = false;
            for (const auto& t : r.tools) found = found || t["function"]["name"] == r.toolName;
            if (!found) bad("tool_choice", "tool_choice names '" + r.toolName + "', which is not in 'tools'");
        }
    }
    r.parallelToolCalls = f.boolean("parallel_tool_calls").value_or(true);
}

void parseKwargs(Fields& f, ChatRequest& r) {
    r.templateKwargs = json::object();
    r.templateKwargs["enable_thinking"] = true;  // thinking is on unless the request turns it off
    auto effort = [](const json& v, const std::string& w) {
        if (!v.is_string() || (v != "low" && v != "medium" && v != "high"))
            bad(w, "'" + w + "' must be \"low\", \"medium\" or \"high\"");
        return v;
    };
    // OpenAI's top-level reasoning_effort reaches the template as its variable; chat_template_kwargs'
    // own reasoning_effort, when also given, wins (it is the more specific of the two).
    if (const json* re = f.get("reasoning_effort"); re && !re->is_null())
        r.templateKwargs["reasoning_effort"] = effort(*re, "reasoning_effort");
    const json* kw = f.get("chat_template_kwargs");
    if (!kw) return;
    if (!kw->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    // An allow-list: template variables are code inputs, so only the documented switches pass.
    for (const auto& [k, v] : kw->items()) {
        const std::string w = "chat_template_kwargs." + k;
        if (k == "enable_thinking" || k == "thinking" || k == "clear_thinking") {
            if (!v.is_boolean()) bad(w, "'" + w + "' must be a boolean");
            r.templateKwargs[k == "thinking" ? "enable_thinking" : k] = v;
        } else if (k == "reasoning_effort") {
            r.templateKwargs[k] = effort(v, w);
        } else {
            bad(w, "'" + w + "' is not an allowed template variable (allowed: enable_thinking, thinking, "
                   "clear_thinking, reasoning_effort)");
        }
    }
}

}  // namespace

SamplingDefaults SamplingDefaults::fromGenerationConfig(const nlohmann::json& raw) {
    SamplingDefaults d;
    if (!raw.is_object()) return d;
    auto num = [&](const char* k) -> std::optional<float> {
        auto it = raw.find(k);
        if (it == raw.end() || !it->is_number()) return std::nullopt;
        return float(it->get<double>());
    };
    d.temperature = num("temperature");
    d.topP = num("top_p");
    d.minP = num("min_p");
    d.repetitionPenalty = num("repetition_penalty");
    if (auto it = raw.find("top_k"); it != raw.end() && it->is_number_integer()) d.topK = int32_t(it->get<int64_t>());
    return d;
}

json parseBody(const std::string& body, const ServerLimits& limits) {
    if (body.empty()) bad("", "the request body is empty; a JSON object is expected");
    if (!depthWithin(body, limits.maxJsonDepth))
        bad("", "the request body nests deeper than " + std::to_string(limits.maxJsonDepth) + " levels");
    json j;
    try {
        j = json::parse(body);
    } catch (const json::exception& e) {
        bad("", std::string("the request body is not valid JSON: ") + e.what());
    }
    if (!j.is_object()) bad("", "the request body must be a JSON object");
    return j;
}

ChatRequest parseChatRequest(const json& body, const ServeContext& ctx, const ServerLimits& lim,
                             const std::string& served) {
    ChatRequest r;
    Fields f(body);
    checkModel(f, served);
    r.messages = parseMessages(f.get("messages"), lim);
    parseCommon(f, r, ctx, lim);
    const auto mt = f.integer("max_tokens", 1, INT32_MAX);
    const auto mct = f.integer("max_completion_tokens", 1, INT32_MAX);
    r.maxTokens = mct ? mct : mt;  // max_completion_tokens is the newer name and wins
    r.logprobs = f.boolean("logprobs").value_or(false);
    if (auto tl = f.integer("top_logprobs", 0, kMaxLogprobs)) {
        if (!r.logprobs && *tl > 0) bad("top_logprobs", "when using 'top_logprobs', 'logprobs' must be set to true");
        r.topLogprobs = int32_t(*tl);
    }
    r.sampling.logprobs = r.logprobs ? r.topLogprobs : -1;
    parseTools(f, r, lim);
    parseKwargs(f, r);
    r.addGenerationPrompt = f.boolean("add_generation_prompt").value_or(true);
    finishCommon(f, r, ctx);
    return r;
}

CompletionRequest parseCompletionRequest(const json& body, const ServeContext& ctx, const ServerLimits& lim,
                                         const std::string& served) {
    CompletionRequest r;
    Fields f(body);
    checkModel(f, served);
    const json* p = f.get("prompt");
    if (!p) bad("prompt", "'prompt' is required");
    auto tokenList = [&](const json& a, const std::string& w) {
        std::vector<int32_t> ids;
        if (a.empty()) bad(w, "'" + w + "' must not be empty");
        for (const auto& e : a) {
            if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= ctx.vocabSize)
                bad(w, "'" + w + "' token ids must be integers in [0, " + std::to_string(ctx.vocabSize) + ")");
            ids.push_back(int32_t(e.get<int64_t>()));
        }
        return ids;
    };
    if (p->is_string()) {
        r.prompts.emplace_back(p->get<std::string>());
    } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
        r.prompts.emplace_back(tokenList(*p, "prompt"));
    } else if (p->is_array() && !p->empty()) {
        for (size_t i = 0; i < p->size(); ++i) {
            const json& e = (*p)[i];
            const std::string w = "prompt[" + std::to_string(i) + "]";
            if (e.is_string()) r.prompts.emplace_back(e.get<std::string>());
            else if (e.is_array()) r.prompts.emplace_back(tokenList(e, w));
            else bad("prompt", "'prompt' must be a string, an array of strings, or token ids");
        }
    } else {
        bad("prompt", "'prompt' must be a non-empty string, array of strings, or token ids");
    }
    for (const auto& pr : r.prompts)
        if (std::holds_alternative<std::string>(pr) && std::get<std::string>(pr).empty())
            bad("prompt", "'prompt' must not be empty");
    parseCommon(f, r, ctx, lim);
    if (int64_t(r.prompts.size()) * r.n > lim.maxChoices)
        bad("n", "n × number of prompts is " + std::to_string(int64_t(r.prompts.size()) * r.n) + "; at most " +
                     std::to_string(lim.maxChoices) + " completions per request");
    r.maxTokens = f.integer("max_tokens", 1, INT32_MAX);
    r.echo = f.boolean("echo").value_or(false);
    if (auto lp = f.integer("logprobs", 0, kMaxLogprobs)) r.logprobs = int32_t(*lp);
    r.sampling.logprobs = r.logprobs;
    if (r.echo && r.logprobs >= 0)
        bad("echo", "'echo' together with 'logprobs' needs prompt logprobs, which this server does not compute");
    if (auto s = f.string("suffix"); s && !s->empty()) bad("suffix", "'suffix' is not supported by this server");
    finishCommon(f, r, ctx);
    return r;
}

int32_t resolveMaxTokens(int64_t promptTokens, std::optional<int64_t> maxTokens, int64_t maxModelLen,
                         const char* param, const char* promptParam) {
    const std::string head = "This model's maximum context length is " + std::to_string(maxModelLen) + " tokens. ";
    if (promptTokens >= maxModelLen)
        throw ApiError(400, head + "However, your request has " + std::to_string(promptTokens) +
                                " input tokens. Please reduce the length of the input messages.",
                       promptParam);
    if (!maxTokens) return int32_t(std::min<int64_t>(maxModelLen - promptTokens, INT32_MAX));
    if (promptTokens + *maxTokens > maxModelLen)
        throw ApiError(400, head + "However, you requested " + std::to_string(promptTokens + *maxTokens) + " tokens (" +
                                std::to_string(promptTokens) + " in the messages, " + std::to_string(*maxTokens) +
                                " in the completion). Please reduce the length of the messages or completion.",
                       param);
    return int32_t(*maxTokens);
}

}  // namespace ts::serve
