// `logits` and `generate`: run the CPU reference forward of a checkpoint directory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/glm5_next.h"
#include "runtime/sampler.h"
#include "cli/model_loading.h"
#include "profiling_backend.h"

namespace ts::cli {

namespace {

double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

}  // namespace

int cmdLogits(const Args& args) {
    if (args.help()) {
        std::printf("twinspark-cli logits --model DIR --prompt-ids 1,2,3 --out FILE.safetensors\n"
                    "    [--kv-cache-dtype fp8|fp32] [--chunk N] [--threads N] [--backend auto|cpu|cuda]\n"
                    "Writes the full-forward logits as one F32 tensor 'logits' [tokens, vocab]. --chunk N prefills\n"
                    "in chunks of N tokens (the result is identical to one prefill). --prompt-ids @FILE reads the\n"
                    "list from FILE (for lists longer than a command line allows).\n");
        return 0;
    }
    auto opts = kModelOptions;
    opts.insert({"prompt-ids", "out", "chunk"});
    args.accept(opts);
    const auto ids = Args::parseIds("prompt-ids", args.requireTextOrFile("prompt-ids"));
    const std::string out = args.require("out");
    const int64_t chunk = args.getInt("chunk", 0, 0, INT32_MAX);
    { AtomicFileWriter probe(out); }  // a place --out cannot be written is found now, not after the forward
    LoadedModel l = loadModel(args);
    l.model->checkIds(ids.data(), int64_t(ids.size()));
    auto state = l.model->newSequence(l.dt);
    const int64_t T = int64_t(ids.size()), V = l.model->text().vocab_size;
    std::vector<float> logits;
    logits.reserve(size_t(T * V));
    IndexerStats ties;
    const int64_t step = chunk > 0 ? chunk : T;
    for (int64_t p = 0; p < T; p += step) {
        const int64_t n = std::min(step, T - p);
        ForwardResult r = l.model->forward(ids.data() + p, n, *state);
        logits.insert(logits.end(), r.logits.begin(), r.logits.end());
        if (r.indexer.firstTiedQuery >= 0 && ties.firstTiedQuery < 0) ties.firstTiedQuery = p + r.indexer.firstTiedQuery;
        ties.tiedQueries += r.indexer.tiedQueries;
    }
    std::map<std::string, std::string> meta = {
        {"kv_cache_dtype", l.dt == KvCacheDtype::Fp8 ? "fp8" : "fp32"},
        {"indexer_first_tied_position", std::to_string(ties.firstTiedQuery)}};
    writeSafetensors(out, {{"logits", DType::F32, {T, V}, logits.data()}}, meta);
    std::fprintf(stderr, "wrote %s: logits [%lld, %lld]", out.c_str(), (long long)T, (long long)V);
    if (ties.firstTiedQuery >= 0)
        std::fprintf(stderr, "; indexer top-k ties at %lld positions (first at %lld)", (long long)ties.tiedQueries,
                     (long long)ties.firstTiedQuery);
    std::fprintf(stderr, "\n");
    return 0;
}

int cmdGenerate(const Args& args) {
    if (args.help()) {
        std::printf("twinspark-cli generate --model DIR (--prompt-ids 1,2,3 | --prompt \"text\" [--system S] [--no-thinking])\n"
                    "    [--max-tokens N] [--ignore-eos] [--concurrency N] [--temperature T --seed S]\n"
                    "    [--kv-cache-dtype fp8|fp32] [--threads N] [--backend auto|cpu|cuda] [--json FILE] [--profile-ops]\n"
                    "    [--warmup] [--prefill-chunk N] [--gpu-mem-util U]\n"
                    "--max-tokens: 32 on the reference path, 64 on the engine path.\n"
                    "--prompt-ids alone: the reference path, one sequence, greedy: prints the ids and the speed\n"
                    "(--profile-ops: also per-op time tables of the prefill and of the decode steps, every op\n"
                    "synchronized; --warmup: the prompt is prefilled and one token decoded on a discarded sequence\n"
                    "first, so that the timed run carries no first-use costs: scratch allocations, and on CUDA the\n"
                    "lazy loading of kernels — ~0.1 s at the first EXL3 decode step on the H200); --prefill-chunk N:\n"
                    "the prompt goes in forward calls of at most N tokens, as the engine prefills it (its\n"
                    "MAX_NUM_BATCHED_TOKENS, 1024), instead of one call for the whole prompt.\n"
                    "--prompt: the text is chat-formatted with the model's template and tokenizer, and generated\n"
                    "through the engine (continuous batching); --concurrency N runs N copies at once and reports\n"
                    "the aggregate speed, and the decode-only speed while all N run (decode_tok_s in --json).\n"
                    "With --concurrency, --prompt-ids \"1,2;3,4\" gives the requests different prompts (request i\n"
                    "takes list i mod count), and --max-tokens \"30;20;10\" different limits (likewise).\n"
                    "--prompt-ids @FILE reads the list(s) from FILE (long prompts: one argument holds ~18k ids).\n"
                    "--gpu-mem-util U (engine path, GPU backends): the KV pool sized as serve sizes it from GPU_MEM_UTIL\n"
                    "(printed) instead of a fixed 1 GiB.\n");
        return 0;
    }
    auto opts = kModelOptions;
    opts.insert({"prompt-ids", "prompt", "system", "max-tokens", "json", "concurrency", "temperature", "seed",
                 "prefill-chunk", "gpu-mem-util"});
    args.accept(opts, {"ignore-eos", "no-thinking", "profile-ops", "warmup"});
    if (args.get("prompt") || args.get("concurrency") || args.get("temperature") || args.get("gpu-mem-util")) {
        if (args.flag("profile-ops") || args.flag("warmup") || args.get("prefill-chunk"))
            fail(ErrorKind::InvalidArgument,
                 "--profile-ops, --warmup and --prefill-chunk go with --prompt-ids alone (the one-sequence path)");
        return generateWithEngine(args);
    }
    if (args.flag("no-thinking") || args.get("system"))
        fail(ErrorKind::InvalidArgument, "--system and --no-thinking go with --prompt");
    if (args.get("seed"))  // the reference path is greedy: a seed would change nothing
        fail(ErrorKind::InvalidArgument, "--seed seeds sampling: give it with --temperature above 0");
    const auto ids = Args::parseIds("prompt-ids", args.requireTextOrFile("prompt-ids"));
    const int64_t maxTokens = args.getInt("max-tokens", 32, 1, 1 << 20);
    const bool ignoreEos = args.flag("ignore-eos");
    const int64_t chunk = args.getInt("prefill-chunk", 0, 1, 1 << 20);  // 0 (absent): the whole prompt at once
    std::optional<AtomicFileWriter> jsonOut;  // opened now: a bad --json path is found before the model loads
    if (auto p = args.get("json")) jsonOut.emplace(*p);
    LoadedModel l = loadModel(args, args.flag("profile-ops"));
    auto* prof = dynamic_cast<ProfilingBackend*>(l.backend.get());
    l.model->checkIds(ids.data(), int64_t(ids.size()));
    // Greedy, checked as the engine's sampler checks: a NaN / +inf logit is a numerical error (max_element
    // would pick a token from it without a word).
    auto argmax = [](const std::vector<float>& v) {
        checkFiniteLogits(v.data(), int64_t(v.size()));
        return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
    };
    // The prompt's prefill: one forward, or forwards of at most `chunk` tokens (the last one's logits are the
    // prompt's).
    auto prefill = [&](SequenceState& seq) {
        const int64_t n = int64_t(ids.size()), step = chunk > 0 ? chunk : n;
        ForwardResult r;
        for (int64_t p = 0; p < n; p += step) r = l.model->forward(ids.data() + p, std::min(step, n - p), seq, true);
        return r;
    };
    if (args.flag("warmup")) {
        // One untimed prefill of the same prompt and one decode step on a sequence of its own, dropped after: the
        // timed run below then finds the backend's scratch buffers and library handles made and its kernels
        // loaded (CUDA loads a kernel at its first launch: the first EXL3 decode step after the prefill path
        // took ~110 ms more on the H200, 2026-12-02 session; CUDA_MODULE_LOADING=EAGER instead costs ~1.1 s
        // at every process start).
        auto scratch = l.model->newSequence(l.dt);
        const ForwardResult w = prefill(*scratch);
        const int32_t first = argmax(w.logits);
        (void)l.model->forward(&first, 1, *scratch, true);
        if (prof) prof->reset();
    }
    auto state = l.model->newSequence(l.dt);
    const auto& eos = l.model->text().eos_token_ids;

    const auto t0 = std::chrono::steady_clock::now();
    ForwardResult r = prefill(*state);
    const auto t1 = std::chrono::steady_clock::now();
    if (prof) {  // the prefill's table, then the decode steps' own
        std::fprintf(stderr, "per-op time of the prefill, %zu tokens (each op synchronized: attribution, not speed):\n%s",
                     ids.size(), prof->report().c_str());
        prof->reset();
    }
    std::vector<int32_t> out;
    int32_t next = argmax(r.logits);
    std::string finish = "length";
    for (int64_t i = 0; i < maxTokens; ++i) {
        out.push_back(next);
        std::printf("%s%d", i ? "," : "", next);
        std::fflush(stdout);
        if (!ignoreEos && std::find(eos.begin(), eos.end(), next) != eos.end()) {
            finish = "stop";
            break;
        }
        if (i + 1 == maxTokens) break;
        r = l.model->forward(&next, 1, *state, true);
        next = argmax(r.logits);
    }
    const auto t2 = std::chrono::steady_clock::now();
    std::printf("\n");
    if (prof)
        std::fprintf(stderr, "per-op time of the decode steps (each op synchronized: attribution, not speed):\n%s",
                     prof->report().c_str());
    const double prefillS = seconds(t0, t1), decodeS = seconds(t1, t2);
    const int64_t decoded = int64_t(out.size()) - 1;  // the first token comes from the prefill
    const double decodeTps = decoded > 0 ? double(decoded) / decodeS : 0.0;
    const std::string chunks = chunk > 0 ? " in chunks of " + std::to_string(chunk) : std::string();
    std::fprintf(stderr, "prompt %zu tokens: prefill%s %.3f s (%.1f tok/s); decode %lld tokens in %.3f s: %.2f tok/s; "
                         "finish %s; threads %d\n",
                 ids.size(), chunks.c_str(), prefillS, double(ids.size()) / prefillS, (long long)decoded, decodeS,
                 decodeTps, finish.c_str(), ThreadPool::global().size());
    if (auto json = args.get("json")) {
        nlohmann::json j = {{"prompt_tokens", ids.size()}, {"generated", out},         {"finish_reason", finish},
                            {"prefill_s", prefillS},       {"decode_tokens", decoded}, {"decode_s", decodeS},
                            {"decode_tok_s", decodeTps},   {"threads", ThreadPool::global().size()},
                            {"prefill_chunk", chunk}};
        jsonOut->write(j.dump(2) + "\n");
        jsonOut->commit();
    }
    return 0;
}

}  // namespace ts::cli
