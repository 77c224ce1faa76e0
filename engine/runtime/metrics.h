// Counters and histograms of the engine, with vLLM's metric semantics so that /metrics and the dashboard
// read the same numbers: request gauges, KV usage, prefix-cache queries/hits (tokens), token counters,
// time-to-first-token and inter-token-latency histograms.
#pragma once

#include <cstdint>
#include <vector>

namespace ts {

struct Histogram {
    std::vector<double> bounds;   // upper bounds (seconds), ascending; +Inf implied
    std::vector<uint64_t> counts; // per bucket (not cumulative), bounds.size() + 1 entries
    double sum = 0;
    uint64_t count = 0;
    explicit Histogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
    void observe(double v);
};

// vLLM's buckets for vllm:time_to_first_token_seconds and vllm:inter_token_latency_seconds.
std::vector<double> ttftBuckets();
std::vector<double> itlBuckets();

struct EngineMetrics {
    int32_t running = 0, waiting = 0;
    double kvUsage = 0;              // fraction of pool blocks in use (cached-but-free blocks count as free)
    int64_t kvBlocks = 0, kvFreeBlocks = 0, kvTokenCapacity = 0;
    int64_t prefixQueries = 0, prefixHits = 0;  // tokens
    int64_t promptTokens = 0, generationTokens = 0;
    int64_t requestsFinished = 0, requestsAborted = 0, requestsFailed = 0, preemptions = 0;
    double promptTokensPerSecond = 0, generationTokensPerSecond = 0;  // over the last 2 s, as of the snapshot
    // Decode steps replayed from CUDA graphs and batch sizes captured (Backend::graphStats; 0 on the CPU).
    int64_t graphReplays = 0, graphCaptures = 0;
    // The device's memory as of the snapshot (Backend::deviceMemory; all 0 on a host backend). On a GPU that
    // shares the system's memory (a GB10) free is the system's MemAvailable: what every program has left.
    int64_t deviceMemoryTotal = 0, deviceMemoryFree = 0;
    bool deviceMemoryUnified = false;
    Histogram ttft{ttftBuckets()}, itl{itlBuckets()};
};

}  // namespace ts
