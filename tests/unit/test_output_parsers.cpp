// Reasoning (vLLM glm45) and tool-call (vLLM glm47) parsing of GLM output: whole-text results, the
// same results when the text arrives in pieces cut at every possible point, typed arguments, and
// malformed or truncated markup degrading to content.
#include <QtTest>

#include <random>

#include "text/reasoning_parser.h"
#include "text/tool_call_parser.h"

using namespace ts;
using ojson = nlohmann::ordered_json;

namespace {

const ojson kTools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters":
    {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
    "code": {"type": "string"}, "opts": {"type": "object"}}}}}])");

std::string fixedId(int i) { return "call_" + std::to_string(i); }

// Everything a streaming client would see, folded back into one result.
struct Folded {
    std::string reasoning, content;
    std::vector<ToolCall> calls;
    bool operator==(const Folded& o) const {
        if (reasoning != o.reasoning || content != o.content || calls.size() != o.calls.size()) return false;
        for (size_t i = 0; i < calls.size(); ++i)
            if (calls[i].id != o.calls[i].id || calls[i].name != o.calls[i].name ||
                calls[i].arguments != o.calls[i].arguments)
                return false;
        return true;
    }
};

Folded streamed(const std::vector<std::string>& chunks, bool startsInReasoning) {
    ReasoningParser rp(startsInReasoning);
    ToolCallParser tp(kTools, fixedId);
    Folded f;
    auto onTool = [&](const ToolParserDelta& d) {
        f.content += d.content;
        for (const auto& c : d.tool_calls) {
            if (c.index == int(f.calls.size())) f.calls.push_back({c.id, c.name, ""});
            f.calls[size_t(c.index)].arguments += c.arguments;
        }
    };
    auto onReasoning = [&](const ReasoningDelta& d) {
        f.reasoning += d.reasoning;
        if (!d.content.empty()) onTool(tp.feed(d.content));
    };
    for (const auto& c : chunks) onReasoning(rp.feed(c));
    onReasoning(rp.finish());
    onTool(tp.finish());
    return f;
}

Folded whole(const std::string& text, bool startsInReasoning) {
    const ReasoningDelta r = ReasoningParser::parse(text, startsInReasoning);
    const ToolParseResult t = ToolCallParser::parse(r.content, kTools, fixedId);
    return {r.reasoning, t.content, t.tool_calls};
}

QString show(const Folded& f) {
    QString s = "reasoning=[" + QString::fromStdString(f.reasoning) + "] content=[" + QString::fromStdString(f.content) + "]";
    for (const auto& c : f.calls)
        s += " call{" + QString::fromStdString(c.id + " " + c.name + " " + c.arguments) + "}";
    return s;
}

const char* const kSamples[] = {
    "plan it</think>The answer is 4.",
    "<think>repeated open</think>ok",
    "thinking with < and </thi partial</think>\n\nDone",
    "no end tag: truncated reasoning",
    "Let me check.</think>I'll look it up.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
    "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>",
    "r</think><tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>New York</arg_value>\n</tool_call>\n"
    "<tool_call>get_weather<arg_key>opts</arg_key><arg_value>{\"a\": [1, 2]}</arg_value><arg_key>x</arg_key>"
    "<arg_value>True</arg_value></tool_call>\n",
    "r</think><tool_call>noargs</tool_call>",
    "r</think>text <tool_call>get_weather<arg_key>city</arg_key><arg_value>Par",      // truncated call
    "r</think><tool_call><arg_key>k</arg_key><arg_value>v</arg_value></tool_call>",    // no name
    "r</think><tool_call>f<arg_key>k</arg_key>junk<arg_value>v</arg_value></tool_call> after",  // junk
    "r</think>a <tool_call>f</tool_call> middle <tool_call>g</tool_call>  ",
    "r</think>un</tool_call>balanced <tool_call <tool_callx>",
    "r</think>数学 🚀 <tool_call>get_weather<arg_key>city</arg_key><arg_value>東京</arg_value></tool_call>",
};

}  // namespace

class TestOutputParsers : public QObject {
    Q_OBJECT

private slots:
    void reasoningWhole() {
        auto r = ReasoningParser::parse("abc</think>xyz", true);
        QCOMPARE(r.reasoning, std::string("abc"));
        QCOMPARE(r.content, std::string("xyz"));
        r = ReasoningParser::parse("<think>abc</think>xyz", true);  // a repeated opening tag is dropped
        QCOMPARE(r.reasoning, std::string("abc"));
        r = ReasoningParser::parse("still thinking", true);  // truncated: all reasoning
        QCOMPARE(r.reasoning, std::string("still thinking"));
        QCOMPARE(r.content, std::string());
        r = ReasoningParser::parse("Hello", false);  // thinking off: all content
        QCOMPARE(r.content, std::string("Hello"));
        QCOMPARE(r.reasoning, std::string());
        r = ReasoningParser::parse("\n<think>abc</think>\nxyz", false);  // GLM-4.5 style: output opens the block
        QCOMPARE(r.reasoning, std::string("abc"));
        QCOMPARE(r.content, std::string("\nxyz"));
        r = ReasoningParser::parse("x <think>y</think>", false);  // a late <think> is just text
        QCOMPARE(r.content, std::string("x <think>y</think>"));
        r = ReasoningParser::parse("  ", false);
        QCOMPARE(r.content, std::string("  "));
        r = ReasoningParser::parse("<thi", false);
        QCOMPARE(r.content, std::string("<thi"));
    }

    void toolCallsWhole() {
        auto t = ToolCallParser::parse(kSamples[4] + std::string(), kTools, fixedId);
        QCOMPARE(t.content, std::string("Let me check.</think>I'll look it up."));
        QCOMPARE(int(t.tool_calls.size()), 1);
        QCOMPARE(t.tool_calls[0].name, std::string("get_weather"));
        QCOMPARE(t.tool_calls[0].id, std::string("call_0"));
        QCOMPARE(t.tool_calls[0].arguments, std::string(R"({"city": "Paris", "days": 2})"));

        // Schema typing: "string" stays raw even when it looks like JSON; others decode.
        t = ToolCallParser::parse("<tool_call>get_weather<arg_key>code</arg_key><arg_value>123</arg_value>"
                                  "<arg_key>days</arg_key><arg_value>7</arg_value><arg_key>opts</arg_key>"
                                  "<arg_value>{\"deep\": [1.5, null]}</arg_value><arg_key>flag</arg_key>"
                                  "<arg_value>False</arg_value><arg_key>word</arg_key><arg_value>hello world</arg_value>"
                                  "</tool_call>",
                                  kTools, fixedId);
        QCOMPARE(int(t.tool_calls.size()), 1);
        QCOMPARE(t.tool_calls[0].arguments,
                 std::string(R"({"code": "123", "days": 7, "opts": {"deep": [1.5, null]}, "flag": false, "word": "hello world"})"));
        QCOMPARE(t.content, std::string());

        // Several calls, whitespace between and after them dropped; GLM-4.5 newline form accepted.
        t = ToolCallParser::parse(std::string(kSamples[5]).substr(9), kTools, fixedId);
        QCOMPARE(int(t.tool_calls.size()), 2);
        QCOMPARE(t.tool_calls[0].arguments, std::string(R"({"city": "New York"})"));
        QCOMPARE(t.tool_calls[1].arguments, std::string(R"({"opts": {"a": [1, 2]}, "x": true})"));
        QCOMPARE(t.tool_calls[1].id, std::string("call_1"));
        QCOMPARE(t.content, std::string());

        t = ToolCallParser::parse("<tool_call>noargs</tool_call>", nullptr, fixedId);
        QCOMPARE(t.tool_calls.at(0).arguments, std::string("{}"));
        // Without schemas, values are decoded.
        t = ToolCallParser::parse("<tool_call>f<arg_key>n</arg_key><arg_value>42</arg_value></tool_call>", nullptr, fixedId);
        QCOMPARE(t.tool_calls.at(0).arguments, std::string(R"({"n": 42})"));
        // Default ids are unique.
        t = ToolCallParser::parse("<tool_call>a</tool_call><tool_call>b</tool_call>");
        QVERIFY(t.tool_calls.at(0).id != t.tool_calls.at(1).id);
        QVERIFY(t.tool_calls.at(0).id.rfind("call_", 0) == 0);
    }

    void malformedDegradesToContent() {
        const char* bad[] = {
            "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par",
            "<tool_call><arg_key>k</arg_key><arg_value>v</arg_value></tool_call>",
            "<tool_call>f<arg_key>k</arg_key>junk<arg_value>v</arg_value></tool_call>",
            "<tool_call>f<arg_key>k</arg_key><arg_value>v</tool_call>",
            "<tool_call>f<tool_call>g</tool_call>",
            "<tool_call",
        };
        for (const char* s : bad) {
            const auto t = ToolCallParser::parse(s, kTools, fixedId);
            QVERIFY2(t.tool_calls.empty(), s);
            QCOMPARE(t.content, std::string(s));
        }
        // A good call after a bad one is still found.
        const auto t = ToolCallParser::parse("<tool_call></tool_call>x<tool_call>g</tool_call>", kTools, fixedId);
        QCOMPARE(t.content, std::string("<tool_call></tool_call>x"));
        QCOMPARE(int(t.tool_calls.size()), 1);
    }

    // Streaming gives the whole-text result wherever the text is cut: at every single split point,
    // at every pair of split points for short samples, byte by byte, and in random pieces.
    void streamingEqualsWhole() {
        std::mt19937 rng(7);
        int checked = 0;
        for (const char* sample : kSamples) {
            const std::string text = sample;
            for (bool startIn : {true, false}) {
                const Folded want = whole(text, startIn);
                for (size_t i = 0; i <= text.size(); ++i) {
                    const Folded got = streamed({text.substr(0, i), text.substr(i)}, startIn);
                    QVERIFY2(got == want, qPrintable(QString("split at %1 of '%2'\n got %3\nwant %4")
                                                         .arg(i).arg(sample).arg(show(got)).arg(show(want))));
                    ++checked;
                }
                if (text.size() <= 90) {
                    for (size_t i = 0; i <= text.size(); ++i)
                        for (size_t j = i; j <= text.size(); ++j) {
                            QVERIFY(streamed({text.substr(0, i), text.substr(i, j - i), text.substr(j)}, startIn) == want);
                            ++checked;
                        }
                }
                std::vector<std::string> bytes;
                for (char c : text) bytes.emplace_back(1, c);
                QVERIFY2(streamed(bytes, startIn) == want, sample);
                for (int trial = 0; trial < 50; ++trial) {
                    std::vector<std::string> pieces;
                    for (size_t p = 0; p < text.size();) {
                        const size_t n = std::min(text.size() - p, size_t(1 + rng() % 12));
                        pieces.push_back(text.substr(p, n));
                        p += n;
                    }
                    QVERIFY(streamed(pieces, startIn) == want);
                    ++checked;
                }
            }
        }
        qInfo("streaming == whole on %d chunkings", checked);
    }

    void streamingDeltaShape() {
        ToolCallParser tp(kTools, fixedId);
        auto d = tp.feed("Sure. <tool_call>get_weather<arg_key>city</arg_key>");
        QCOMPARE(d.content, std::string("Sure. "));
        QVERIFY(d.tool_calls.empty());  // not announced before </tool_call>
        d = tp.feed("<arg_value>Oslo</arg_value></tool_call>");
        QCOMPARE(int(d.tool_calls.size()), 1);
        QCOMPARE(d.tool_calls[0].index, 0);
        QCOMPARE(d.tool_calls[0].id, std::string("call_0"));
        QCOMPARE(d.tool_calls[0].name, std::string("get_weather"));
        QCOMPARE(d.tool_calls[0].arguments, std::string(R"({"city": "Oslo"})"));
        QVERIFY(tp.finish().empty());

        ReasoningParser rp(true);
        auto r = rp.feed("abc</thi");
        QCOMPARE(r.reasoning, std::string("abc"));  // the possible tag start is held back
        QVERIFY(rp.inReasoning());
        r = rp.feed("nk>x");
        QCOMPARE(r.content, std::string("x"));
        QVERIFY(rp.reasoningEnded());
    }
};

QTEST_GUILESS_MAIN(TestOutputParsers)
#include "test_output_parsers.moc"
