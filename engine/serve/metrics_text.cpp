// /metrics in the Prometheus text format with vLLM's metric names (v1 engine), so dashboards built for
// the recipe's vLLM read TwinSpark unchanged: labels model_name and engine="0". Counters carry the
// `_total` suffix in the exposition as prometheus_client writes them (vllm:prefix_cache_queries is
// exposed as vllm:prefix_cache_queries_total). TwinSpark-only series use the twinspark: prefix.
#include <cstdio>

#include "serve/handlers.h"

namespace ts::serve {

namespace {

class Writer {
public:
    explicit Writer(std::string labels) : m_labels(std::move(labels)) {}
    void head(const char* name, const char* type, const char* help) {
        m_out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    }
    void sample(const std::string& name, double v, const std::string& extra = {}) {
        char num[64];
        std::snprintf(num, sizeof num, "%.17g", v);
        m_out += name + "{" + m_labels + (extra.empty() ? "" : "," + extra) + "} " + num + "\n";
    }
    void gauge(const char* name, const char* help, double v) {
        head(name, "gauge", help);
        sample(name, v);
    }
    void counter(const char* base, const char* help, double v) {
        head(base, "counter", help);
        sample(std::string(base) + "_total", v);
    }
    void histogram(const char* name, const char* help, const Histogram& h) {
        head(name, "histogram", help);
        uint64_t cum = 0;
        for (size_t i = 0; i < h.bounds.size(); ++i) {
            cum += i < h.counts.size() ? h.counts[i] : 0;
            char le[64];
            std::snprintf(le, sizeof le, "le=\"%g\"", h.bounds[i]);
            sample(std::string(name) + "_bucket", double(cum), le);
        }
        sample(std::string(name) + "_bucket", double(h.count), "le=\"+Inf\"");
        sample(std::string(name) + "_sum", h.sum);
        sample(std::string(name) + "_count", double(h.count));
    }
    std::string take() { return std::move(m_out); }

private:
    std::string m_labels;
    std::string m_out;
};

std::string escapeLabel(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '\\' || c == '"') o += '\\';
        if (c == '\n') { o += "\\n"; continue; }
        o += c;
    }
    return o;
}

}  // namespace

std::string metricsText(const EngineMetrics& m, const ServerCounters& c, const ServeContext& ctx,
                        const ServerOptions& options) {
    (void)ctx;
    Writer w("model_name=\"" + escapeLabel(options.servedModelName) + "\",engine=\"0\"");
    w.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", m.running);
    w.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", m.waiting);
    w.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", m.kvUsage);
    w.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
              double(m.prefixQueries));
    w.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", double(m.prefixHits));
    w.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", double(m.preemptions));
    w.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", double(m.promptTokens));
    w.counter("vllm:generation_tokens", "Number of generation tokens processed.", double(m.generationTokens));
    w.head("vllm:request_success", "counter", "Count of successfully processed requests.");
    w.sample("vllm:request_success_total", double(c.finishedStop.load()), "finished_reason=\"stop\"");
    w.sample("vllm:request_success_total", double(c.finishedLength.load()), "finished_reason=\"length\"");
    w.sample("vllm:request_success_total", double(m.requestsAborted), "finished_reason=\"abort\"");
    w.sample("vllm:request_success_total", double(m.requestsFailed), "finished_reason=\"error\"");
    w.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.ttft);
    w.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", m.itl);
    w.gauge("twinspark:kv_cache_blocks", "Blocks in the paged KV pool.", double(m.kvBlocks));
    w.gauge("twinspark:kv_cache_free_blocks", "Free blocks in the paged KV pool (cached-but-free count as free).",
            double(m.kvFreeBlocks));
    w.gauge("twinspark:kv_cache_token_capacity", "Tokens the KV pool holds.", double(m.kvTokenCapacity));
    w.gauge("twinspark:prompt_tokens_per_second", "Prompt throughput over the last ~2 s.", m.promptTokensPerSecond);
    w.gauge("twinspark:generation_tokens_per_second", "Generation throughput over the last ~2 s.",
            m.generationTokensPerSecond);
    w.gauge("twinspark:http_generation_requests_in_flight", "Chat and completion requests being served.",
            double(c.inFlight.load()));
    w.counter("twinspark:cuda_graph_replays", "Decode steps replayed from CUDA graphs (0 on the CPU backend).",
              double(m.graphReplays));
    w.counter("twinspark:cuda_graph_captures", "Decode-step graphs captured (one per batch size, again after an "
              "invalidation).", double(m.graphCaptures));
    if (m.deviceMemoryTotal > 0) {  // a device backend: its memory (none on the CPU backend)
        w.gauge("twinspark:device_memory_total_bytes", "The GPU's memory.", double(m.deviceMemoryTotal));
        w.gauge("twinspark:device_memory_free_bytes",
                "Free GPU memory; on a GPU that shares the system's memory (GB10), the system's MemAvailable.",
                double(m.deviceMemoryFree));
        w.gauge("twinspark:device_memory_unified", "1 when the GPU shares the system's memory (GB10).",
                m.deviceMemoryUnified ? 1.0 : 0.0);
    }
    w.counter("twinspark:http_requests", "HTTP requests received.", double(c.httpRequests.load()));
    w.counter("twinspark:http_rejected_busy", "Generation requests refused with 503 at the concurrency limit.",
              double(c.rejectedBusy.load()));
    return w.take();
}

}  // namespace ts::serve
