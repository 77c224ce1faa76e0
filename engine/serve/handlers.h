// The request handlers behind the route table (server.cpp). Each takes the parsed body and fills the
// response, or throws ApiError / ts::Error, which the dispatcher maps once (api_error.h).
#pragma once

#include <atomic>
#include <string>

#include <nlohmann/json.hpp>

#include "serve/context.h"
#include "serve/server_options.h"

namespace httplib {
struct Response;
}

namespace ts::serve {

using json = nlohmann::ordered_json;

class ConnectionProbe;

struct HandlerEnv {
    const ServeContext& ctx;
    const ServerOptions& options;
    ServerCounters& counters;
    const std::atomic<bool>& shutdown;
    ConnectionProbe* connection = nullptr;  // the request's client (generation routes): is it still there?
};

// Holds one of the limits.maxConcurrentRequests generation slots for as long as it lives (a streaming
// response keeps it until the stream ends). Throws ApiError(503) when all are taken.
class InFlightSlot {
public:
    explicit InFlightSlot(ServerCounters& counters, int32_t limit);
    ~InFlightSlot();
    InFlightSlot(const InFlightSlot&) = delete;
    InFlightSlot& operator=(const InFlightSlot&) = delete;

private:
    ServerCounters& m_counters;
};

// "chatcmpl-…" / "cmpl-…" followed by 32 random hex digits.
std::string makeRequestId(const char* prefix);
int64_t unixTime();
// vLLM's finish_reason strings.
const char* finishReasonName(FinishReason r);
void countFinish(ServerCounters& c, FinishReason r);
// The "usage" object.
json usageJson(int64_t promptTokens, int64_t completionTokens, int64_t cachedTokens);
// Logprob values as JSON numbers (-inf, which JSON cannot carry, becomes vLLM's -9999.0).
double finiteLogprob(float lp);

void handleChat(const json& body, HandlerEnv& env, httplib::Response& res);
void handleCompletions(const json& body, HandlerEnv& env, httplib::Response& res);
void handleTokenize(const json& body, HandlerEnv& env, httplib::Response& res);
void handleDetokenize(const json& body, HandlerEnv& env, httplib::Response& res);
json modelsJson(const ServeContext& ctx, const ServerOptions& options);
// Prometheus text exposition of the engine's and the server's counters, with vLLM's metric names.
std::string metricsText(const EngineMetrics& m, const ServerCounters& c, const ServeContext& ctx,
                        const ServerOptions& options);

}  // namespace ts::serve
