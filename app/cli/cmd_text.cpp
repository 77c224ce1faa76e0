// `tokenize`, `detokenize`, `render`: the text side of a checkpoint directory (tokenizer.json,
// tokenizer_config.json / chat_template.jinja), exactly as the engine and the server use it.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ts::cli {

namespace {

nlohmann::ordered_json readJsonFile(const std::string& option, const std::string& path) {
    std::ifstream f(path);
    if (!f) fail(ErrorKind::NotFound, "--" + option + ": cannot open " + path);
    try {
        return nlohmann::ordered_json::parse(f);
    } catch (const nlohmann::json::exception& e) {
        fail(ErrorKind::InvalidArgument, "--" + option + ": " + path + " is not valid JSON: " + e.what());
    }
}

std::string idsJson(const std::vector<TokenId>& ids) {
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
    return s + "]";
}

}  // namespace

int cmdTokenize(const Args& args) {
    if (args.help()) {
        std::printf("twinspark-cli tokenize --model DIR --text \"...\" [--no-special]\n"
                    "Prints the token ids as a JSON array. Special-token text ([gMASK], <|user|>, ...) is recognised\n"
                    "unless --no-special.\n");
        return 0;
    }
    args.accept({"model", "text"}, {"no-special"});
    const Tokenizer tok = Tokenizer::fromDirectory(args.require("model"));
    const auto text = args.get("text");
    if (!text) fail(ErrorKind::InvalidArgument, "missing required option --text");
    std::printf("%s\n", idsJson(tok.encode(*text, !args.flag("no-special"))).c_str());
    return 0;
}

int cmdDetokenize(const Args& args) {
    if (args.help()) {
        std::printf("twinspark-cli detokenize --model DIR --ids 1,2,3 [--skip-special]\nPrints the text.\n");
        return 0;
    }
    args.accept({"model", "ids"}, {"skip-special"});
    const Tokenizer tok = Tokenizer::fromDirectory(args.require("model"));
    const auto ids = Args::parseIds("ids", args.require("ids"));
    for (size_t i = 0; i < ids.size(); ++i)
        if (size_t(ids[i]) >= tok.vocabSize())
            fail(ErrorKind::InvalidArgument, "--ids: " + std::to_string(ids[i]) + " (element " + std::to_string(i) +
                                                 ") is outside the tokenizer's vocabulary of " +
                                                 std::to_string(tok.vocabSize()));
    std::printf("%s\n", tok.decode(ids, args.flag("skip-special")).c_str());
    return 0;
}

int cmdRender(const Args& args) {
    if (args.help()) {
        std::printf("twinspark-cli render --model DIR --messages FILE.json [--tools FILE.json] [--no-thinking]\n"
                    "    [--clear-thinking true|false] [--reasoning-effort LEVEL] [--ids]\n"
                    "Prints the exact prompt the model sees for OpenAI-style messages (and with --ids its token ids).\n");
        return 0;
    }
    args.accept({"model", "messages", "tools", "clear-thinking", "reasoning-effort"}, {"no-thinking", "ids"});
    const std::string dir = args.require("model");
    const auto messages = readJsonFile("messages", args.require("messages"));
    if (!messages.is_array() || messages.empty())
        fail(ErrorKind::InvalidArgument, "--messages: expected a non-empty JSON array of messages");
    nlohmann::ordered_json tools = nullptr;
    if (auto t = args.get("tools")) {
        tools = readJsonFile("tools", *t);
        if (!tools.is_array()) fail(ErrorKind::InvalidArgument, "--tools: expected a JSON array of tools");
    }
    nlohmann::ordered_json kwargs = {{"enable_thinking", !args.flag("no-thinking")}};
    if (auto c = args.get("clear-thinking")) {
        if (*c != "true" && *c != "false") fail(ErrorKind::InvalidArgument, "--clear-thinking must be true or false");
        kwargs["clear_thinking"] = *c == "true";
    }
    if (auto e = args.get("reasoning-effort")) kwargs["reasoning_effort"] = *e;
    const ChatTemplate tpl = ChatTemplate::fromModelDir(dir);
    const std::string prompt = tpl.render(messages, tools, true, kwargs);
    if (args.flag("ids")) {
        const Tokenizer tok = Tokenizer::fromDirectory(dir);
        std::printf("%s\n", idsJson(tok.encode(prompt, true)).c_str());
    } else {
        std::fwrite(prompt.data(), 1, prompt.size(), stdout);
        std::printf("\n");
    }
    return 0;
}

}  // namespace ts::cli
