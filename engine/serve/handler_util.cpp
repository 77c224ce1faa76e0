// Small pieces every generation handler shares: request ids, the concurrency slot, finish reasons,
// usage and logprob values.
#include <chrono>
#include <cmath>
#include <random>

#include "serve/api_error.h"
#include "serve/handlers.h"

namespace ts::serve {

InFlightSlot::InFlightSlot(ServerCounters& counters, int32_t limit) : m_counters(counters) {
    if (m_counters.inFlight.fetch_add(1) >= limit) {
        m_counters.inFlight.fetch_sub(1);
        m_counters.rejectedBusy.fetch_add(1);
        throw ApiError(503, "the server is at its limit of " + std::to_string(limit) +
                                " concurrent generation requests; retry shortly");
    }
}

InFlightSlot::~InFlightSlot() { m_counters.inFlight.fetch_sub(1); }

std::string makeRequestId(const char* prefix) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char* hex = "0123456789abcdef";
    std::string id = prefix;
    for (int i = 0; i < 2; ++i) {
        uint64_t v = rng();
        for (int k = 0; k < 16; ++k, v >>= 4) id += hex[v & 15];
    }
    return id;
}

int64_t unixTime() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

const char* finishReasonName(FinishReason r) {
    switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    case FinishReason::Error: return "error";
    case FinishReason::None: break;
    }
    return "abort";
}

void countFinish(ServerCounters& c, FinishReason r) {
    // Aborts are counted by the engine (it sees every one, also of requests whose client is gone).
    if (r == FinishReason::Stop) c.finishedStop.fetch_add(1);
    else if (r == FinishReason::Length) c.finishedLength.fetch_add(1);
}

json usageJson(int64_t promptTokens, int64_t completionTokens, int64_t cachedTokens) {
    json u = json::object();
    u["prompt_tokens"] = promptTokens;
    u["completion_tokens"] = completionTokens;
    u["total_tokens"] = promptTokens + completionTokens;
    u["prompt_tokens_details"] = json{{"cached_tokens", cachedTokens}};
    return u;
}

double finiteLogprob(float lp) { return std::isfinite(lp) ? double(lp) : -9999.0; }

}  // namespace ts::serve
