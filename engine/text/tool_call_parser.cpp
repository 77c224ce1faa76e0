// GLM tool-call extraction (vLLM glm47 behaviour) as a buffered state machine.
#include "text/tool_call_parser.h"

#include <random>

#include "text/jinja_value.h"
#include "text/reasoning_parser.h"

namespace ts {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kKeyOpen = "<arg_key>";
constexpr std::string_view kKeyClose = "</arg_key>";
constexpr std::string_view kValOpen = "<arg_value>";
constexpr std::string_view kValClose = "</arg_value>";

bool isWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '\v'; }

std::string_view strip(std::string_view s) {
    while (!s.empty() && isWs(s.front())) s.remove_prefix(1);
    while (!s.empty() && isWs(s.back())) s.remove_suffix(1);
    return s;
}

bool allWs(std::string_view s) {
    for (char c : s)
        if (!isWs(c)) return false;
    return true;
}

// json.loads, then the ast.literal_eval cases models produce (True/False/None, 'quoted'), else the text.
jinja::Value decodeValue(std::string_view text) {
    try {
        return jinja::Value::fromJson(ojson::parse(text));
    } catch (const ojson::exception&) {
    }
    if (text == "True") return jinja::Value(true);
    if (text == "False") return jinja::Value(false);
    if (text == "None") return jinja::Value::none();
    if (text.size() >= 2 && text.front() == '\'' && text.back() == '\'' &&
        text.substr(1, text.size() - 2).find_first_of("'\\") == std::string_view::npos)
        return jinja::Value(std::string(text.substr(1, text.size() - 2)));
    return jinja::Value(std::string(text));
}

}  // namespace

std::string ToolCallParser::randomId() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char* hex = "0123456789abcdef";
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id += hex[rng() & 15];
    return id;
}

ToolCallParser::ToolCallParser(ojson tools, IdGenerator ids) : m_tools(std::move(tools)), m_ids(std::move(ids)) {
    if (!m_ids) m_ids = [](int) { return randomId(); };
}

bool ToolCallParser::isStringParam(const std::string& tool, const std::string& arg) const {
    if (!m_tools.is_array()) return false;
    for (const auto& t : m_tools) {
        const ojson& fn = t.is_object() && t.contains("function") ? t["function"] : t;
        if (!fn.is_object() || fn.value("name", "") != tool) continue;
        const auto params = fn.find("parameters");
        if (params == fn.end() || !params->is_object()) return false;
        const auto props = params->find("properties");
        if (props == params->end() || !props->is_object() || !props->contains(arg)) return false;
        const ojson& p = (*props)[arg];
        return p.is_object() && p.contains("type") && p["type"] == "string";
    }
    return false;
}

bool ToolCallParser::parseCallBody(std::string_view body, std::string& name, std::string& arguments) const {
    if (body.find(kOpen) != std::string_view::npos) return false;  // a call opened inside a call
    const size_t firstKey = body.find(kKeyOpen);
    const std::string_view rawName = strip(body.substr(0, firstKey));
    if (rawName.empty() || rawName.find_first_of("<>\n") != std::string_view::npos) return false;
    name = std::string(rawName);
    jinja::Object args;
    std::string_view rest = firstKey == std::string_view::npos ? std::string_view() : body.substr(firstKey);
    while (true) {
        rest = strip(rest);
        if (rest.empty()) break;
        if (rest.substr(0, kKeyOpen.size()) != kKeyOpen) return false;
        rest.remove_prefix(kKeyOpen.size());
        const size_t keyEnd = rest.find(kKeyClose);
        if (keyEnd == std::string_view::npos) return false;
        const std::string key(strip(rest.substr(0, keyEnd)));
        rest = strip(rest.substr(keyEnd + kKeyClose.size()));
        if (rest.substr(0, kValOpen.size()) != kValOpen) return false;
        rest.remove_prefix(kValOpen.size());
        const size_t valEnd = rest.find(kValClose);
        if (valEnd == std::string_view::npos) return false;
        const std::string_view val = strip(rest.substr(0, valEnd));
        rest.remove_prefix(valEnd + kValClose.size());
        if (key.empty() || key.find('<') != std::string::npos) return false;
        args.set(key, isStringParam(name, key) ? jinja::Value(std::string(val)) : decodeValue(val));
    }
    arguments = jinja::jsonDumps(jinja::Value(std::move(args)), jinja::JsonDumpOptions{});
    return true;
}

void ToolCallParser::emitContent(ToolParserDelta& out, std::string_view text, bool final) {
    if (text.empty()) return;
    if (!m_afterCall) {
        out.content += text;
        return;
    }
    // Right after a call, whitespace waits: it is dropped if only whitespace or another call follows.
    m_pendingSpace += text;
    if (!allWs(m_pendingSpace)) {
        out.content += m_pendingSpace;
        m_pendingSpace.clear();
        m_afterCall = false;
    } else if (final) {
        m_pendingSpace.clear();
    }
}

ToolParserDelta ToolCallParser::step(bool final) {
    ToolParserDelta out;
    while (true) {
        if (!m_inCall) {
            const size_t open = m_buf.find(kOpen);
            if (open != std::string::npos) {
                emitContent(out, std::string_view(m_buf).substr(0, open), false);
                if (allWs(m_pendingSpace)) m_pendingSpace.clear();  // whitespace between calls
                m_buf.erase(0, open + kOpen.size());
                m_inCall = true;
                continue;
            }
            const size_t hold = final ? 0 : partialTagSuffix(m_buf, kOpen);
            emitContent(out, std::string_view(m_buf).substr(0, m_buf.size() - hold), final);
            m_buf.erase(0, m_buf.size() - hold);
            if (final) emitContent(out, {}, true);
            if (final && allWs(m_pendingSpace)) m_pendingSpace.clear();
            return out;
        }
        const size_t close = m_buf.find(kClose);
        if (close == std::string::npos) {
            if (final) {  // truncated call: it was never announced, so it is plain content
                m_inCall = false;
                m_buf.insert(0, kOpen);
                emitContent(out, m_buf, true);
                m_buf.clear();
                return out;
            }
            return out;
        }
        std::string name, arguments;
        const std::string_view body = std::string_view(m_buf).substr(0, close);
        if (parseCallBody(body, name, arguments)) {
            m_pendingSpace.clear();
            m_afterCall = true;
            ToolCallDelta d;
            d.index = m_count;
            d.id = m_ids(m_count);
            d.name = std::move(name);
            d.arguments = std::move(arguments);
            out.tool_calls.push_back(std::move(d));
            ++m_count;
        } else {
            emitContent(out, std::string(kOpen) + std::string(body) + std::string(kClose), false);
        }
        m_buf.erase(0, close + kClose.size());
        m_inCall = false;
    }
}

ToolParserDelta ToolCallParser::feed(std::string_view text) noexcept {
    try {
        m_buf.append(text);
        return step(false);
    } catch (...) {
        return {};
    }
}

ToolParserDelta ToolCallParser::finish() noexcept {
    try {
        return step(true);
    } catch (...) {
        return {};
    }
}

ToolParseResult ToolCallParser::parse(std::string_view text, const ojson& tools, IdGenerator ids) {
    ToolCallParser p(tools, std::move(ids));
    ToolParseResult r;
    for (ToolParserDelta d : {p.feed(text), p.finish()}) {
        r.content += d.content;
        for (auto& c : d.tool_calls) r.tool_calls.push_back({c.id, c.name, c.arguments});
    }
    return r;
}

}  // namespace ts
