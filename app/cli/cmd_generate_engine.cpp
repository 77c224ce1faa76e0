// `generate --prompt "text"` / `--concurrency N`: a chat-formatted prompt through the engine, the way
// the server runs requests (continuous batching, paged KV cache, the sampler, stop handling).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "cli/model_loading.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/engine.h"
#include "text/chat_template.h"
#include "text/reasoning_parser.h"
#include "text/tokenizer.h"

namespace ts::cli {

int generateWithEngine(const Args& args) {
    const int64_t maxTokens = args.getInt("max-tokens", 64, 1, 1 << 20);
    const int64_t concurrency = args.getInt("concurrency", 1, 1, 256);
    LoadedModel l = loadModel(args);
    const std::string dir = args.require("model");

    std::vector<int32_t> ids;
    std::unique_ptr<Tokenizer> tok;
    bool startsInReasoning = false;
    if (auto text = args.get("prompt")) {
        if (args.get("prompt-ids")) fail(ErrorKind::InvalidArgument, "give --prompt or --prompt-ids, not both");
        tok = std::make_unique<Tokenizer>(Tokenizer::fromDirectory(dir));
        const ChatTemplate tpl = ChatTemplate::fromModelDir(dir);
        nlohmann::ordered_json messages = nlohmann::ordered_json::array();
        if (auto sys = args.get("system")) messages.push_back({{"role", "system"}, {"content", *sys}});
        messages.push_back({{"role", "user"}, {"content", *text}});
        nlohmann::ordered_json kwargs = {{"enable_thinking", !args.flag("no-thinking")}};
        const std::string prompt = tpl.render(messages, nullptr, true, kwargs);
        startsInReasoning = ChatTemplate::promptEndsInReasoning(prompt);
        ids = tok->encode(prompt, true);
    } else {
        if (args.flag("no-thinking") || args.get("system"))
            fail(ErrorKind::InvalidArgument, "--system and --no-thinking go with --prompt");
        ids = Args::parseIds("prompt-ids", args.require("prompt-ids"));
    }

    SamplingParams sp;
    sp.temperature = 0.0f;
    if (auto t = args.get("temperature")) {
        try {
            sp.temperature = std::stof(*t);
        } catch (...) {
            fail(ErrorKind::InvalidArgument, "--temperature must be a number, got '" + *t + "'");
        }
    }
    if (args.get("seed")) sp.seed = uint64_t(args.getInt("seed", 0, 0, INT64_MAX));
    sp.maxTokens = int32_t(maxTokens);
    sp.ignoreEos = args.flag("ignore-eos");
    EngineConfig ec;
    ec.kvDtype = l.dt;
    ec.maxNumSeqs = int32_t(std::max<int64_t>(4, concurrency));
    ec.kvBudgetBytes = int64_t(1) << 30;
    Engine engine(*l.model, ec, tok.get());

    std::mutex mu;
    std::vector<std::string> texts(static_cast<size_t>(concurrency));
    std::vector<int64_t> counts(static_cast<size_t>(concurrency), 0);
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(concurrency));
    std::vector<std::string> reasons(static_cast<size_t>(concurrency));
    std::vector<int64_t> reqIds;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < concurrency; ++i) {
        reqIds.push_back(engine.submit(ids, sp, [&, i](const EngineEvent& e) {
            std::lock_guard<std::mutex> lock(mu);
            texts[size_t(i)] += e.text;
            if (e.type == EngineEvent::Type::Token) {
                ++counts[size_t(i)];
                tokens[size_t(i)].push_back(e.token);
                if (concurrency == 1 && tok) {
                    std::fputs(e.text.c_str(), stdout);
                    std::fflush(stdout);
                } else if (concurrency == 1) {
                    std::printf("%s%d", counts[0] > 1 ? "," : "", e.token);
                    std::fflush(stdout);
                }
            } else {
                if (concurrency == 1 && tok) std::fputs(e.text.c_str(), stdout);
                reasons[size_t(i)] = e.reason == FinishReason::Stop ? "stop" : e.reason == FinishReason::Length ? "length" : "abort";
            }
        }));
    }
    engine.waitIdle();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("\n");
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    const EngineMetrics m = engine.metrics();
    if (tok && concurrency == 1) {
        const ReasoningDelta d = ReasoningParser::parse(texts[0], startsInReasoning);
        std::fprintf(stderr, "reasoning: %zu bytes, content: %zu bytes\n", d.reasoning.size(), d.content.size());
    }
    std::fprintf(stderr,
                 "%lld request(s) of %zu prompt tokens: %lld tokens generated in %.3f s = %.2f tok/s aggregate "
                 "(%.2f per request); mean time to first token %.3f s; finish %s; threads %d\n",
                 (long long)concurrency, ids.size(), (long long)total, secs, double(total) / secs,
                 double(total) / secs / double(concurrency), m.ttft.count ? m.ttft.sum / double(m.ttft.count) : 0.0,
                 reasons[0].c_str(), ThreadPool::global().size());
    if (auto json = args.get("json")) {
        nlohmann::json j = {{"concurrency", concurrency}, {"prompt_tokens", ids.size()}, {"generated_tokens", total},
                            {"seconds", secs}, {"aggregate_tok_s", double(total) / secs},
                            {"mean_ttft_s", m.ttft.count ? m.ttft.sum / double(m.ttft.count) : 0.0},
                            {"texts", texts}, {"tokens", tokens}, {"finish_reasons", reasons}};
        std::ofstream f(*json);
        f << j.dump(2) << "\n";
        if (!f) fail(ErrorKind::Io, "cannot write " + *json);
    }
    return 0;
}

}  // namespace ts::cli
