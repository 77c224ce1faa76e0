// `generate --prompt "text"` / `--concurrency N`: a chat-formatted prompt through the engine, the way
// the server runs requests (continuous batching, paged KV cache, the sampler, stop handling).
// `--prompt-ids "1,2,3;4,5,6"` gives each request its own prompt (request i takes list i mod count), so
// that a batch of greedy decodes does not run N identical sequences (identical tokens route to identical
// experts, which would understate the bytes a real batch moves: docs/PERFORMANCE_SLICE.md).
// `--max-tokens "300;200;100"` likewise gives each request its own limit, so the requests finish one after
// another and the batch shrinks step by step (the decode graphs of every batch size, docs/PERFORMANCE_SLICE.md).
// Besides the aggregate speed (prefill included) it reports the decode-only speed of the window in which
// every request is decoding (decode_tok_s), measured from the token events' arrival times.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/model_loading.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "core/thread_pool.h"
#include "runtime/device_budget.h"
#include "runtime/engine.h"
#include "text/chat_template.h"
#include "text/reasoning_parser.h"
#include "text/tokenizer.h"

namespace ts::cli {

namespace {

// The decode window: from the moment the last request received its first token to the moment the first
// request received its last one; every request decodes throughout. Tokens whose arrival lies within a
// quarter of the median inter-token gap of a boundary belong to the boundary's own step (one step's
// events arrive microseconds apart, steps are milliseconds apart) and are counted with it.
struct DecodeWindow {
    double seconds = 0, tokPerS = 0, medianGapS = 0;
    int64_t tokens = 0;
};

DecodeWindow decodeWindow(const std::vector<std::vector<double>>& times) {
    DecodeWindow w;
    double start = 0, end = 1e300;
    std::vector<double> gaps;
    for (const auto& t : times) {
        if (t.size() < 2) return w;
        start = std::max(start, t.front());
        end = std::min(end, t.back());
    }
    if (!(end > start)) return w;
    for (const auto& t : times)
        for (size_t i = 1; i < t.size(); ++i)
            if (t[i - 1] >= start && t[i] <= end) gaps.push_back(t[i] - t[i - 1]);
    if (gaps.empty()) return w;
    std::sort(gaps.begin(), gaps.end());
    const double tol = 0.25 * gaps[gaps.size() / 2];
    for (const auto& t : times)
        for (double x : t)
            if (x > start + tol && x <= end + tol) ++w.tokens;
    w.seconds = end - start;
    w.tokPerS = double(w.tokens) / w.seconds;
    w.medianGapS = gaps[gaps.size() / 2];
    return w;
}

std::vector<std::vector<int32_t>> parsePromptLists(const std::string& text) {
    std::vector<std::vector<int32_t>> lists;
    size_t start = 0;
    while (true) {
        const size_t semi = text.find(';', start);
        lists.push_back(Args::parseIds("prompt-ids", text.substr(start, semi == std::string::npos ? std::string::npos : semi - start)));
        if (semi == std::string::npos) break;
        start = semi + 1;
    }
    return lists;
}

// `--max-tokens N` or `N1;N2;...` (request i takes list i mod count).
std::vector<int64_t> parseMaxTokens(const Args& args) {
    const std::string text = args.get("max-tokens").value_or("64");
    std::vector<int64_t> out;
    size_t start = 0;
    while (true) {
        const size_t semi = text.find(';', start);
        const std::string item = text.substr(start, semi == std::string::npos ? std::string::npos : semi - start);
        char* end = nullptr;
        errno = 0;
        const long long v = item.empty() ? 0 : std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || errno != 0 || v < 1 || v > (1 << 20))
            fail(ErrorKind::InvalidArgument, "--max-tokens: '" + item + "' is not an integer in [1, 1048576] (give N, "
                                             "or N1;N2;... for the requests in turn)");
        out.push_back(v);
        if (semi == std::string::npos) break;
        start = semi + 1;
    }
    return out;
}

}  // namespace

int generateWithEngine(const Args& args) {
    const std::vector<int64_t> maxTokensList = parseMaxTokens(args);
    const int64_t concurrency = args.getInt("concurrency", 1, 1, 256);
    std::optional<double> memUtil;  // checked before the model loads: bad input is reported at once
    if (auto u = args.get("gpu-mem-util")) memUtil = parseGpuMemUtil(*u, "--gpu-mem-util");
    std::optional<AtomicFileWriter> jsonOut;  // opened now: a bad --json path is found before the model loads
    if (auto p = args.get("json")) jsonOut.emplace(*p);
    LoadedModel l = loadModel(args, false, memUtil);
    const std::string dir = args.require("model");

    std::vector<std::vector<int32_t>> prompts;  // request i takes prompts[i % size]
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
        prompts.push_back(tok->encode(prompt, true));
    } else {
        if (args.flag("no-thinking") || args.get("system"))
            fail(ErrorKind::InvalidArgument, "--system and --no-thinking go with --prompt");
        prompts = parsePromptLists(args.requireTextOrFile("prompt-ids"));
        if (int64_t(prompts.size()) > concurrency)
            fail(ErrorKind::InvalidArgument, "--prompt-ids gives " + std::to_string(prompts.size()) +
                                                 " prompts (';'-separated) for --concurrency " + std::to_string(concurrency));
    }
    if (int64_t(maxTokensList.size()) > concurrency)
        fail(ErrorKind::InvalidArgument, "--max-tokens gives " + std::to_string(maxTokensList.size()) +
                                             " limits (';'-separated) for --concurrency " + std::to_string(concurrency));
    const std::vector<int32_t>& ids = prompts[0];

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
    sp.ignoreEos = args.flag("ignore-eos");
    EngineConfig ec;
    ec.kvDtype = l.dt;
    ec.maxNumSeqs = int32_t(std::max<int64_t>(4, concurrency));
    ec.kvBudgetBytes = int64_t(1) << 30;
    if (memUtil) {  // the pool sized as serve sizes it (runtime/device_budget.h)
        const auto db = deviceKvBudget(*l.model, ec, *memUtil);
        TS_CHECK(db.has_value(), "generate: loadModel let --gpu-mem-util through on a host backend");
        ec.kvBudgetBytes = db->kvBudgetBytes;
        std::fprintf(stderr, "generate: %s\n", describeDeviceBudget(*db, *memUtil).c_str());
    }
    Engine engine(*l.model, ec, tok.get());

    std::mutex mu;
    std::vector<std::string> texts(static_cast<size_t>(concurrency));
    std::vector<int64_t> counts(static_cast<size_t>(concurrency), 0);
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(concurrency));
    std::vector<std::string> reasons(static_cast<size_t>(concurrency));
    std::vector<std::string> errors;  // requests the engine failed (numerical error, a step that threw)
    std::vector<std::vector<double>> arrivals(static_cast<size_t>(concurrency));  // seconds since t0, per token
    std::vector<int64_t> reqIds;
    const auto t0 = std::chrono::steady_clock::now();
    // All requests in one submitAll: admitted in the same step, so "decode with all N running" starts at once.
    std::vector<Engine::Submission> subs;
    for (int64_t i = 0; i < concurrency; ++i) {
        SamplingParams spi = sp;
        spi.maxTokens = int32_t(maxTokensList[size_t(i) % maxTokensList.size()]);
        subs.push_back({prompts[size_t(i) % prompts.size()], spi, [&, i](const EngineEvent& e) {
            const double at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::lock_guard<std::mutex> lock(mu);
            texts[size_t(i)] += e.text;
            if (e.type == EngineEvent::Type::Token) {
                arrivals[size_t(i)].push_back(at);
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
                reasons[size_t(i)] = e.reason == FinishReason::Stop     ? "stop"
                                     : e.reason == FinishReason::Length ? "length"
                                     : e.reason == FinishReason::Error  ? "error"
                                                                        : "abort";
                if (e.reason == FinishReason::Error) errors.push_back("request " + std::to_string(i) + ": " + e.error);
            }
        }});
    }
    reqIds = engine.submitAll(std::move(subs));
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
    const DecodeWindow dw = decodeWindow(arrivals);
    std::fprintf(stderr,
                 "%lld request(s) of %zu prompt tokens: %lld tokens generated in %.3f s = %.2f tok/s aggregate "
                 "(%.2f per request); mean time to first token %.3f s; finish %s; threads %d\n",
                 (long long)concurrency, ids.size(), (long long)total, secs, double(total) / secs,
                 double(total) / secs / double(concurrency), m.ttft.count ? m.ttft.sum / double(m.ttft.count) : 0.0,
                 reasons[0].c_str(), ThreadPool::global().size());
    if (dw.tokens > 0)
        std::fprintf(stderr, "decode with all %lld request(s) running: %lld tokens in %.3f s = %.2f tok/s aggregate "
                             "(median step %.3f ms)\n",
                     (long long)concurrency, (long long)dw.tokens, dw.seconds, dw.tokPerS, dw.medianGapS * 1e3);
    if (m.deviceMemoryTotal > 0)  // the engine's snapshot, as /metrics and the dashboard show it
        std::fprintf(stderr, "device memory after the run: %.2f GiB free of %.2f%s\n",
                     double(m.deviceMemoryFree) / double(int64_t(1) << 30), double(m.deviceMemoryTotal) / double(int64_t(1) << 30),
                     m.deviceMemoryUnified ? " (the system's, shared with the GPU)" : "");
    const Backend::GraphStats gs = l.backend->graphStats();
    if (gs.captures + gs.replays + gs.eagerRegions > 0)
        std::fprintf(stderr, "cuda graphs: %lld decode steps replayed, %lld captured, %lld eager (measured, or not "
                             "graphable); a replay: %lld graphs + %lld eager ops; %lld invalidations\n",
                     (long long)gs.replays, (long long)gs.captures, (long long)gs.eagerRegions,
                     (long long)gs.lastSegments, (long long)gs.lastEagerOps, (long long)gs.invalidations);
    if (auto json = args.get("json")) {
        nlohmann::json j = {{"concurrency", concurrency}, {"prompt_tokens", ids.size()}, {"generated_tokens", total},
                            {"seconds", secs}, {"aggregate_tok_s", double(total) / secs},
                            {"mean_ttft_s", m.ttft.count ? m.ttft.sum / double(m.ttft.count) : 0.0},
                            {"texts", texts}, {"tokens", tokens}, {"finish_reasons", reasons},
                            {"distinct_prompts", prompts.size()}, {"backend", l.backend->name()},
                            {"decode_tok_s", dw.tokPerS}, {"decode_window_s", dw.seconds},
                            {"decode_window_tokens", dw.tokens}, {"decode_median_step_s", dw.medianGapS},
                            {"graphs", {{"replays", gs.replays}, {"captures", gs.captures},
                                        {"eager_regions", gs.eagerRegions}, {"invalidations", gs.invalidations},
                                        {"graphs_per_replay", gs.lastSegments},
                                        {"eager_ops_per_replay", gs.lastEagerOps}}}};
        jsonOut->write(j.dump(2) + "\n");
        jsonOut->commit();
    }
    if (!errors.empty())  // the others' results stand (printed and written above); the exit status says it failed
        fail(ErrorKind::Internal, std::to_string(errors.size()) + " of " + std::to_string(concurrency) +
                                      " request(s) failed; " + errors.front());
    return 0;
}

}  // namespace ts::cli
