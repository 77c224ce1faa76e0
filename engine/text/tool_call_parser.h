// Extracts GLM tool calls from model content, as vLLM's glm47 tool parser does (GLM-4.7 / GLM-5.x):
//   <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>
// (the GLM-4.5 form with newlines between the parts is accepted too). Argument values are typed by the
// tool's JSON schema: a "string" property keeps the raw text, anything else is json-decoded, then read as
// a Python literal (True/False/None), then kept as text. Several calls per message.
//
// Streaming: a call is reported once its </tool_call> has arrived (one delta with index, id, name and
// the complete arguments JSON), so a call that turns out malformed or truncated was never announced and
// simply becomes content, exactly as whole-text parsing reports it. Whitespace between and after calls is
// dropped; other text outside calls is content. Nothing here throws.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ts {

struct ToolCall {
    std::string id;
    std::string name;
    std::string arguments;  // a JSON object, json.dumps style: {"city": "Paris", "days": 2}
};

struct ToolCallDelta {
    int index = 0;
    std::string id;
    std::string name;
    std::string arguments;
};

struct ToolParserDelta {
    std::string content;
    std::vector<ToolCallDelta> tool_calls;
    bool empty() const { return content.empty() && tool_calls.empty(); }
};

struct ToolParseResult {
    std::string content;
    std::vector<ToolCall> tool_calls;
};

class ToolCallParser {
public:
    using IdGenerator = std::function<std::string(int index)>;

    // `tools`: the request's OpenAI tools array (null: no schemas, values are json-decoded).
    // `ids`: makes the id of call `index`; default "call_" + 24 random hex digits.
    explicit ToolCallParser(nlohmann::ordered_json tools = nullptr, IdGenerator ids = {});

    ToolParserDelta feed(std::string_view text) noexcept;
    ToolParserDelta finish() noexcept;

    static ToolParseResult parse(std::string_view text, const nlohmann::ordered_json& tools = nullptr,
                                 IdGenerator ids = {});
    static std::string randomId();

    // One <tool_call> body (between the tags) to name + arguments JSON; false when malformed.
    bool parseCallBody(std::string_view body, std::string& name, std::string& arguments) const;

private:
    ToolParserDelta step(bool final);
    void emitContent(ToolParserDelta& out, std::string_view text, bool final);
    bool isStringParam(const std::string& tool, const std::string& arg) const;

    nlohmann::ordered_json m_tools;
    IdGenerator m_ids;
    bool m_inCall = false;
    int m_count = 0;              // calls emitted so far
    bool m_afterCall = false;     // only whitespace since the last call
    std::string m_buf;            // unprocessed text
    std::string m_pendingSpace;   // whitespace after a call, dropped unless other content follows
};

}  // namespace ts
