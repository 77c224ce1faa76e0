// `serve`: the headless OpenAI-compatible server. It listens first (health answers 503 "Loading model"),
// loads the checkpoint, tokenizer and chat template on a loader thread while printing progress and the
// KV plan, then serves until SIGINT/SIGTERM. Shutdown is graceful: new requests get 503, in-flight ones
// are aborted (streams end with an error event and [DONE]), the listener stops, exit 0.
//
// Defaults are the recipe's (REQUIREMENTS.md), also read from its environment variables and from the deployment
// .env (serve_sources.h; the control center's file): the command line wins over the environment, the environment
// over the file. The model: --model, MODEL_PATH, else the embedded default model. PORT 8888, MAX_NUM_SEQS 4,
// MAX_NUM_BATCHED_TOKENS 1024, MAX_MODEL_LEN 900000, KV_CACHE_DTYPE fp8, GPU_MEM_UTIL 0.87, VLLM_API_KEY (none).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include <pthread.h>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "cli/serve_sources.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/glm5_next.h"
#include "selftest/verify_backend.h"
#include "runtime/device_budget.h"
#include "runtime/engine.h"
#include "runtime/runtime_settings.h"
#include "serve/handlers.h"
#include "serve/server.h"
#include "serve/validation.h"

namespace ts::cli {

namespace {

std::optional<std::string> envOr(const Args& args, const char* option, const char* env) {
    if (auto v = args.get(option)) return v;
    if (const char* e = std::getenv(env); e && *e) return std::string(e);
    return std::nullopt;
}

// An integer setting of runtime/runtime_settings.h: its option, else its environment variable (or .env), else
// the default; a value outside its range is refused, naming both.
int64_t intSetting(const Args& args, const IntSetting& s) {
    auto v = envOr(args, s.option, s.env);
    if (!v) return s.def;
    std::string why;
    const auto x = parseIntSetting(s, *v, &why);
    if (!x)
        fail(ErrorKind::InvalidArgument,
             std::string("--") + s.option + " (or " + s.env + ") must be " + why + ", got '" + *v + "'");
    return *x;
}

std::vector<std::string> splitList(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        const size_t comma = s.find(',', start);
        std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!item.empty()) out.push_back(item);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

// Everything the loader thread builds; destroyed after the server has stopped.
struct Loaded {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Glm5NextModel> model;
    std::unique_ptr<Tokenizer> tokenizer;
    std::unique_ptr<ChatTemplate> chatTemplate;
    std::unique_ptr<Engine> engine;
    std::unique_ptr<serve::EngineSource> source;
    std::shared_ptr<serve::ServeContext> ctx;
};

void printUsage() {
    std::printf(
        "twinspark-cli serve [--model DIR] [--env FILE] [--host 127.0.0.1] [--port 8888]\n"
        "    [--served-model-name GLM-5.3-Flash-EXL3] [--api-key KEY] [--max-num-seqs 4]\n"
        "    [--max-num-batched-tokens 1024] [--max-model-len 900000]\n"
        "    [--kv-cache-dtype fp8|fp32 (fp8_ds_mla = fp8)] [--kv-budget-mib 2048] [--gpu-mem-util 0.87] [--cors-origins A,B]\n"
        "    [--max-concurrent-requests 64] [--threads N] [--backend auto|cpu|cuda] [--insecure-no-api-key] [--quiet]\n"
        "Serves the OpenAI API (/v1/chat/completions, /v1/completions, /v1/models, /health, /metrics,\n"
        "/tokenize, /detokenize) until SIGINT/SIGTERM. Environment defaults: PORT, MAX_NUM_SEQS,\n"
        "MAX_NUM_BATCHED_TOKENS, MAX_MODEL_LEN, KV_CACHE_DTYPE, GPU_MEM_UTIL, VLLM_API_KEY, MODEL_PATH, and\n"
        "TwinSpark's own TS_KV_BUDGET_MIB (--kv-budget-mib), TS_MAX_CONCURRENT_REQUESTS (--max-concurrent-requests)\n"
        "and TWINSPARK_BACKEND (--backend).\n"
        "They are also read from the deployment .env the control center writes (--env FILE, else $TWINSPARK_ENV,\n"
        "./.env, or ~/.config/TwinSpark/TwinSpark/.env); the environment wins over the file, options over both.\n"
        "Without --model or MODEL_PATH the embedded default model is served.\n"
        "--port 0 (or PORT=0) binds any free port and prints it; the control center and setup.sh take PORT 1-65535\n"
        "only (the .env's PORT is the one clients are given: http://HEAD:PORT/v1).\n"
        "A non-loopback --host needs an API key unless --insecure-no-api-key is given.\n"
        "--gpu-mem-util sizes the KV pool on a GPU backend; the CPU backend uses --kv-budget-mib.\n"
        "On a GPU backend every kernel is checked against the CPU reference before serving (the recipe's GPU\n"
        "self-test; a failure stops the server); SKIP_OVERLAY_VERIFY=1 skips it.\n");
}

}  // namespace

int cmdServe(const Args& args) {
    if (args.help()) {
        printUsage();
        return 0;
    }
    args.accept({"model", "env", "host", "port", "served-model-name", "api-key", "max-num-seqs", "max-num-batched-tokens",
                 "max-model-len", "kv-cache-dtype", "kv-budget-mib", "gpu-mem-util", "cors-origins",
                 "max-concurrent-requests", "threads", "backend"},
                {"insecure-no-api-key", "quiet"});
    applyEnvFile(args, stderrNote("serve"));  // first: every setting below may come from it
    const std::string modelDir = resolveServeModel(args, stderrNote("serve"));
    serve::ServerOptions opts;
    opts.host = args.get("host").value_or("127.0.0.1");
    opts.port = int(intSetting(args, IntSetting{kPortSetting.env, kPortSetting.option, kPortSetting.def, 0,
                                                kPortSetting.hi}));  // 0: any free port
    opts.servedModelName = args.get("served-model-name").value_or("GLM-5.3-Flash-EXL3");
    if (opts.servedModelName.empty()) fail(ErrorKind::InvalidArgument, "--served-model-name must not be empty");
    opts.apiKey = envOr(args, "api-key", "VLLM_API_KEY").value_or("");
    if (auto c = args.get("cors-origins")) opts.corsOrigins = splitList(*c);
    opts.logRequests = !args.flag("quiet");
    opts.limits.maxConcurrentRequests = int32_t(intSetting(args, kMaxConcurrentRequestsSetting));
    EngineConfig ec;
    ec.maxNumSeqs = int32_t(intSetting(args, kMaxNumSeqsSetting));
    ec.maxNumBatchedTokens = intSetting(args, kMaxNumBatchedTokensSetting);
    ec.maxModelLen = intSetting(args, kMaxModelLenSetting);
    ec.kvBudgetBytes = intSetting(args, kKvBudgetMibSetting) << 20;
    const std::string dt = envOr(args, "kv-cache-dtype", kKvCacheDtypeEnv).value_or("fp8");
    std::string why;
    if (const auto d = parseKvCacheDtypeSetting(dt, &why)) ec.kvDtype = *d;
    else if (why.rfind("refused", 0) == 0)
        fail(ErrorKind::InvalidArgument, "--kv-cache-dtype (or KV_CACHE_DTYPE) '" + dt + "' is " + why);
    else fail(ErrorKind::InvalidArgument, "--kv-cache-dtype (or KV_CACHE_DTYPE) must be " + why + ", got '" + dt + "'");
    const double gpuMemUtil = parseGpuMemUtil(envOr(args, "gpu-mem-util", kGpuMemUtilEnv).value_or("0.87"),
                                              "--gpu-mem-util (or GPU_MEM_UTIL)");
    const std::string backendName = envOr(args, "backend", kBackendEnv).value_or("auto");
    if (!isBackendSetting(backendName))
        fail(ErrorKind::InvalidArgument,
             "--backend (or TWINSPARK_BACKEND) must be auto, cpu or cuda, got '" + backendName + "'");
    checkBackendName(backendName);  // before listening: also "cuda" in a build or on a host without it
    const int64_t threads = args.getInt("threads", 0, 0, 1024);
    if (threads > 0) ThreadPool::setGlobalThreads(int(threads));

    // Signals are taken synchronously by this thread (sigtimedwait); every thread started from here on
    // inherits the blocked mask, so no handler runs on an HTTP or engine thread. A vanished client must
    // not kill the process: SIGPIPE is ignored (writes fail with EPIPE instead).
    std::signal(SIGPIPE, SIG_IGN);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    serve::HttpServer server(opts);
    server.allowUnauthenticatedLan(args.flag("insecure-no-api-key"));
    server.start();
    std::fprintf(stderr, "serve: listening on http://%s:%d/v1 (health answers 503 until the model is loaded)%s\n",
                 opts.host.c_str(), server.port(), opts.apiKey.empty() ? "; no API key set" : "; API key required");
    std::fflush(stderr);

    auto loaded = std::make_shared<Loaded>();
    std::atomic<int> loadState{0};  // 0 loading, 1 ready, 2 failed
    std::string loadError;
    bool loadInternal = false;  // an engine/GPU defect (exit 3), not bad input (exit 2)
    std::thread loader([&, loaded] {
        try {
            const auto t0 = std::chrono::steady_clock::now();
            std::fprintf(stderr, "serve: loading %s\n", modelDir.c_str());
            loaded->backend = makeBackend(backendName);
            std::fprintf(stderr, "serve: backend %s\n", loaded->backend->name().c_str());
            // GPU_MEM_UTIL's share must be free: checked now, not after minutes of loading.
            checkStartupMemory(*loaded->backend, gpuMemUtil, stderrNote("serve"));
            const auto verified = selftest::verifyBackendOrThrow(*loaded->backend);
            if (verified.skipped) std::fprintf(stderr, "serve: GPU self-test skipped (SKIP_OVERLAY_VERIFY=1)\n");
            if (verified.ran)
                std::fprintf(stderr, "serve: GPU self-test passed (%lld op checks against the CPU reference)\n",
                             (long long)verified.checks);
            loaded->model = std::make_unique<Glm5NextModel>(
                modelDir, *loaded->backend, stderrLoadProgress("serve", *loaded->backend), stderrBindProgress("serve"));
            if (const auto db = deviceKvBudget(*loaded->model, ec, gpuMemUtil)) {
                ec.kvBudgetBytes = db->kvBudgetBytes;
                std::fprintf(stderr, "serve: %s\n", describeDeviceBudget(*db, gpuMemUtil).c_str());
            }
            std::fprintf(stderr, "serve: weights bound (%d layers, vocab %lld)\n", int(loaded->model->text().num_hidden_layers),
                         (long long)loaded->model->text().vocab_size);
            loaded->tokenizer = std::make_unique<Tokenizer>(Tokenizer::fromDirectory(modelDir));
            loaded->chatTemplate = std::make_unique<ChatTemplate>(ChatTemplate::fromModelDir(modelDir));
            std::fprintf(stderr, "serve: tokenizer %zu ids, chat template loaded\n", loaded->tokenizer->vocabSize());
            loaded->engine = std::make_unique<Engine>(*loaded->model, ec, loaded->tokenizer.get());
            const KvPlan& p = loaded->engine->plan();
            std::fprintf(stderr,
                         "serve: KV plan: budget %lld MiB, %lld blocks of %d tokens = %lld tokens (%.2fx one "
                         "max_model_len %lld request), state slots %lld MiB, snapshots %lld MiB, kv dtype %s\n",
                         (long long)(p.budgetBytes >> 20), (long long)p.numBlocks, ec.blockSize, (long long)p.tokens,
                         p.fullLengthRequests, (long long)ec.maxModelLen, (long long)(p.stateBytes >> 20),
                         (long long)(p.snapshotBytes >> 20), ec.kvDtype == KvCacheDtype::Fp8 ? "fp8" : "fp32");
            loaded->source = std::make_unique<serve::EngineSource>(*loaded->engine);
            auto ctx = std::make_shared<serve::ServeContext>();
            ctx->tokenizer = loaded->tokenizer.get();
            ctx->chatTemplate = loaded->chatTemplate.get();
            ctx->source = loaded->source.get();
            ctx->root = modelDir;
            ctx->maxModelLen = std::min<int64_t>(ec.maxModelLen, p.tokens);
            ctx->vocabSize = loaded->model->text().vocab_size;
            ctx->defaults = serve::SamplingDefaults::fromGenerationConfig(loaded->model->config().generation.raw);
            ctx->created = serve::unixTime();
            loaded->ctx = ctx;
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::fprintf(stderr, "serve: ready in %.1f s: model '%s', max_model_len %lld, max_num_seqs %d\n", s,
                         opts.servedModelName.c_str(), (long long)ctx->maxModelLen, ec.maxNumSeqs);
            loadState = 1;
        } catch (const Error& e) {
            loadError = e.what();
            loadInternal = e.kind() == ErrorKind::Internal || e.kind() == ErrorKind::DeviceLost;
            loadState = 2;
        } catch (const std::exception& e) {
            loadError = e.what();
            loadInternal = true;
            loadState = 2;
        }
    });

    int sig = 0;
    bool readySet = false;
    for (;;) {
        timespec ts{0, 200 * 1000 * 1000};
        const int got = sigtimedwait(&sigs, nullptr, &ts);
        if (got == SIGINT || got == SIGTERM) {
            sig = got;
            break;
        }
        if (loadState == 1 && !readySet) {
            server.setReady(loaded->ctx);
            readySet = true;
            std::fflush(stderr);
        }
        if (readySet) {
            // A lost GPU (Engine::deviceFailure): every request has failed and no new one can run in this
            // process. Stop, so that a supervisor (systemd Restart=, docker --restart) starts a fresh one; until
            // the listener closes, /health answers 503 with the reason and requests 503.
            const std::string lost = loaded->engine->deviceFailure();
            if (!lost.empty()) {
                std::fprintf(stderr, "twinspark-cli serve: error: %s; the server stops (exit 3): start it again\n",
                             lost.c_str());
                // The failed requests' handlers first deliver their error (the GPU's, not "shutting down"): they
                // hold no engine work, so this takes milliseconds; 5 s bounds a client that reads slowly.
                const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                while (server.counters().inFlight.load() > 0 && std::chrono::steady_clock::now() < until)
                    std::this_thread::sleep_for(std::chrono::milliseconds(10));
                server.shutdown();
                std::fflush(stderr);
                // Not the destructors: the CUDA context is gone and its teardown has nothing to save.
                std::_Exit(3);
            }
        }
        if (loadState == 2) {
            server.setFailed(loadError);
            std::fprintf(stderr, "twinspark-cli serve: error: %s\n", loadError.c_str());
            server.shutdown();
            loader.join();
            return loadInternal ? 3 : 2;
        }
    }
    std::fprintf(stderr, "serve: %s received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    server.shutdown();
    if (loadState == 0) {
        // The weights are still loading and loading cannot be interrupted; nothing is written anywhere,
        // so leaving now loses nothing.
        std::fprintf(stderr, "serve: stopped during load\n");
        std::fflush(stderr);
        std::_Exit(0);
    }
    loader.join();
    loaded->engine.reset();  // after the server: no handler can reach the engine any more
    std::fprintf(stderr, "serve: stopped\n");
    return 0;
}

}  // namespace ts::cli
