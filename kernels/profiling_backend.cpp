#include "profiling_backend.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace ts {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

std::string ProfilingBackend::report() const {
    std::vector<std::pair<std::string, Row>> v(m_rows.begin(), m_rows.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0;
    for (const auto& [k, r] : v) total += r.seconds;
    std::string out = "op                          calls    total ms    us/call   share\n";
    char line[160];
    for (const auto& [k, r] : v) {
        std::snprintf(line, sizeof line, "%-26s %7lld %11.3f %10.2f %6.1f%%\n", k.c_str(), (long long)r.calls,
                      r.seconds * 1e3, r.calls ? r.seconds * 1e6 / double(r.calls) : 0.0,
                      total > 0 ? 100.0 * r.seconds / total : 0.0);
        out += line;
    }
    std::snprintf(line, sizeof line, "%-26s %7s %11.3f\n", "total", "", total * 1e3);
    out += line;
    return out;
}

Buffer ProfilingBackend::alloc(size_t bytes) {
    return m_inner->alloc(bytes);
}

// Forwarded, not left to Backend's default (which would call alloc() and zero-fill on the device).
Buffer ProfilingBackend::allocUninit(size_t bytes) {
    return m_inner->allocUninit(bytes);
}

void ProfilingBackend::preloadWeight(const WeightView& w) {
    m_inner->preloadWeight(w);
}

void ProfilingBackend::releaseWeights() {
    m_inner->releaseWeights();
}

Buffer ProfilingBackend::upload(const void* host, size_t bytes) {
    return m_inner->upload(host, bytes);
}

void ProfilingBackend::download(const Buffer& src, void* host, size_t bytes, size_t offset) {
    m_inner->download(src, host, bytes, offset);
}

void ProfilingBackend::copy(const Buffer& src, size_t srcOffset, const Buffer& dst, size_t dstOffset, size_t bytes) {
    timed("copy", [&] { m_inner->copy(src, srcOffset, dst, dstOffset, bytes); });
}

void ProfilingBackend::embedding(const int32_t* ids, int64_t T, const WeightView& table, const Buffer& out) {
    timed("embedding", [&] { m_inner->embedding(ids, T, table, out); });
}

void ProfilingBackend::linear(const Buffer& x, int64_t T, const WeightView& w, const Buffer& y) {
    timed(w.packed ? "linear (packed)" : "linear", [&] { m_inner->linear(x, T, w, y); });
}

void ProfilingBackend::rmsnorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, float eps, const Buffer& y) {
    timed("rmsnorm", [&] { m_inner->rmsnorm(x, rows, D, w, eps, y); });
}

void ProfilingBackend::layernorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, const Buffer& b, float eps, const Buffer& y) {
    timed("layernorm", [&] { m_inner->layernorm(x, rows, D, w, b, eps, y); });
}

void ProfilingBackend::swiglu(const Buffer& gate, const Buffer& up, int64_t T, int64_t I, float limit, const Buffer& out) {
    timed("swiglu", [&] { m_inner->swiglu(gate, up, T, I, limit, out); });
}

void ProfilingBackend::add(const Buffer& x, const Buffer& y, int64_t n) {
    timed("add", [&] { m_inner->add(x, y, n); });
}

void ProfilingBackend::scale(const Buffer& x, int64_t n, float s) {
    timed("scale", [&] { m_inner->scale(x, n, s); });
}

void ProfilingBackend::zero(const Buffer& x) {
    timed("zero", [&] { m_inner->zero(x); });
}

void ProfilingBackend::concatColumns(const Buffer* parts, const int64_t* widths, int count, int64_t T, const Buffer& out) {
    timed("concatColumns", [&] { m_inner->concatColumns(parts, widths, count, T, out); });
}

void ProfilingBackend::repeatRows(const Buffer& src, int64_t T, int64_t D, int n, const Buffer& dst) {
    timed("repeatRows", [&] { m_inner->repeatRows(src, T, D, n, dst); });
}

void ProfilingBackend::mhcPre(const Buffer& streams, int64_t T, int64_t D, const HyperConnParams& p, const Buffer& x, const Buffer& post, const Buffer& comb) {
    timed("mhcPre", [&] { m_inner->mhcPre(streams, T, D, p, x, post, comb); });
}

void ProfilingBackend::mhcPost(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& y, const Buffer& post, const Buffer& comb) {
    timed("mhcPost", [&] { m_inner->mhcPost(streams, T, D, n, y, post, comb); });
}

void ProfilingBackend::mhcHead(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& out) {
    timed("mhcHead", [&] { m_inner->mhcHead(streams, T, D, n, out); });
}

void ProfilingBackend::causalConvSilu(const Buffer& x, int64_t T, int64_t C, int K, const Buffer& w, const Buffer& convState, const Buffer& out) {
    timed("causalConvSilu", [&] { m_inner->causalConvSilu(x, T, C, K, w, convState, out); });
}

void ProfilingBackend::kdaGate(const Buffer& f, int64_t T, int64_t H, int64_t Dk, const Buffer& aLog, const Buffer& dtBias, float lowerBound) {
    timed("kdaGate", [&] { m_inner->kdaGate(f, T, H, Dk, aLog, dtBias, lowerBound); });
}

void ProfilingBackend::kdaRecurrent(const Buffer& qkv, int64_t T, int64_t H, int64_t Dk, const Buffer& g, const Buffer& betaLogits, const Buffer& state, const Buffer& out) {
    timed("kdaRecurrent", [&] { m_inner->kdaRecurrent(qkv, T, H, Dk, g, betaLogits, state, out); });
}

void ProfilingBackend::gatedRmsnorm(const Buffer& o, int64_t T, int64_t H, int64_t Dv, const Buffer& w, float eps, const Buffer& gate) {
    timed("gatedRmsnorm", [&] { m_inner->gatedRmsnorm(o, T, H, Dv, w, eps, gate); });
}

void ProfilingBackend::mlaCacheWrite(const Buffer& c, int64_t T, int64_t R, KvCacheDtype dt, const Buffer& cache, const PageTable& pages, int64_t pos0) {
    timed("mlaCacheWrite", [&] { m_inner->mlaCacheWrite(c, T, R, dt, cache, pages, pos0); });
}

void ProfilingBackend::mlaAbsorbQ(const Buffer& q, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb, const Buffer& qLat) {
    timed("mlaAbsorbQ", [&] { m_inner->mlaAbsorbQ(q, T, H, dn, dv, kvb, qLat); });
}

void ProfilingBackend::mlaSparseAttention(const Buffer& qLat, int64_t T, int64_t H, int64_t R, const Buffer& cache, KvCacheDtype dt, const PageTable& pages, const Buffer& idx, int64_t width, float scale, const Buffer& oLat) {
    timed("mlaSparseAttention", [&] { m_inner->mlaSparseAttention(qLat, T, H, R, cache, dt, pages, idx, width, scale, oLat); });
}

void ProfilingBackend::mlaUpV(const Buffer& oLat, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb, const Buffer& o) {
    timed("mlaUpV", [&] { m_inner->mlaUpV(oLat, T, H, dn, dv, kvb, o); });
}

void ProfilingBackend::indexerCacheWrite(const Buffer& k, const Buffer& gate, int64_t T, int64_t D, int64_t kp, const Buffer& ape, KvCacheDtype dt, const Buffer& tail, const Buffer& poolStore, const PageTable& pages, int64_t pos0) {
    timed("indexerCacheWrite", [&] { m_inner->indexerCacheWrite(k, gate, T, D, kp, ape, dt, tail, poolStore, pages, pos0); });
}

void ProfilingBackend::indexerSelect(const Buffer& q, const Buffer& w, int64_t T, int64_t H, int64_t D, int64_t kp, int64_t topk, KvCacheDtype dt, const Buffer& poolStore, const PageTable& pages, int64_t pos0, const Buffer& idx, IndexerStats* stats) {
    timed("indexerSelect", [&] { m_inner->indexerSelect(q, w, T, H, D, kp, topk, dt, poolStore, pages, pos0, idx, stats); });
}

// The batched forms keep their own rows: one call of the inner backend's batched op (not its per-sequence calls).
void ProfilingBackend::causalConvSiluBatch(const Buffer& x, const int64_t* rows, int64_t nSeqs, int64_t C, int K, const Buffer& w, const Buffer* convStates, const Buffer& out) {
    timed("causalConvSiluBatch", [&] { m_inner->causalConvSiluBatch(x, rows, nSeqs, C, K, w, convStates, out); });
}

void ProfilingBackend::kdaRecurrentBatch(const Buffer& qkv, const int64_t* rows, int64_t nSeqs, int64_t H, int64_t Dk, const Buffer& g, const Buffer& betaLogits, const Buffer* states, const Buffer& out) {
    timed("kdaRecurrentBatch", [&] { m_inner->kdaRecurrentBatch(qkv, rows, nSeqs, H, Dk, g, betaLogits, states, out); });
}

void ProfilingBackend::mlaCacheWriteBatch(const Buffer& c, const SeqRows* seqs, int64_t nSeqs, int64_t R, KvCacheDtype dt, const Buffer& cache) {
    timed("mlaCacheWriteBatch", [&] { m_inner->mlaCacheWriteBatch(c, seqs, nSeqs, R, dt, cache); });
}

void ProfilingBackend::mlaSparseAttentionBatch(const Buffer& qLat, const SeqRows* seqs, int64_t nSeqs, int64_t H, int64_t R, const Buffer& cache, KvCacheDtype dt, const Buffer& idx, int64_t width, float scale, const Buffer& oLat) {
    timed("mlaSparseAttentionBatch", [&] { m_inner->mlaSparseAttentionBatch(qLat, seqs, nSeqs, H, R, cache, dt, idx, width, scale, oLat); });
}

void ProfilingBackend::indexerSelectBatch(const Buffer& q, const Buffer& w, const SeqRows* seqs, int64_t nSeqs, int64_t H, int64_t D, int64_t kp, int64_t topk, KvCacheDtype dt, const Buffer& poolStore, const Buffer& idx, IndexerStats* const* stats) {
    timed("indexerSelectBatch", [&] { m_inner->indexerSelectBatch(q, w, seqs, nSeqs, H, D, kp, topk, dt, poolStore, idx, stats); });
}

void ProfilingBackend::indexerCacheWriteBatch(const Buffer& k, const Buffer& gate, const SeqRows* seqs, int64_t nSeqs, int64_t D, int64_t kp, const Buffer& ape, KvCacheDtype dt, const Buffer* tails, const Buffer& poolStore) {
    timed("indexerCacheWriteBatch", [&] { m_inner->indexerCacheWriteBatch(k, gate, seqs, nSeqs, D, kp, ape, dt, tails, poolStore); });
}

void ProfilingBackend::moeRoute(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E, int64_t topk, int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling, int32_t* hostIdx, float* hostWeight) {
    timed("moeRoute", [&] { m_inner->moeRoute(x, T, gate, bias, E, topk, nGroup, topkGroup, normTopk, scaling, hostIdx, hostWeight); });
}

void ProfilingBackend::gatherRows(const Buffer& x, int64_t D, const int32_t* hostSel, int64_t n, const Buffer& rows) {
    timed("gatherRows", [&] { m_inner->gatherRows(x, D, hostSel, n, rows); });
}

void ProfilingBackend::scatterAddRows(const Buffer& rows, int64_t D, const int32_t* hostSel, const float* hostScale, int64_t n, const Buffer& y) {
    timed("scatterAddRows", [&] { m_inner->scatterAddRows(rows, D, hostSel, hostScale, n, y); });
}

bool ProfilingBackend::moeExpertsFused(const Buffer& x, int64_t T, int64_t D, int64_t I, const int32_t* hostIdx, const float* hostWeight, int64_t topk, const WeightView* gate, const WeightView* up, const WeightView* down, int64_t E, float limit, const Buffer& y) {
    const auto t0 = Clock::now();
    const bool r = m_inner->moeExpertsFused(x, T, D, I, hostIdx, hostWeight, topk, gate, up, down, E, limit, y);
    m_inner->synchronize();
    if (r) add("moeExpertsFused", t0);  // a declined call did nothing to time (the model runs the expert loop)
    return r;
}

bool ProfilingBackend::moeRouteDevice(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E,
                                      int64_t topk, int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling,
                                      const Buffer& idx, const Buffer& weight) {
    const auto t0 = Clock::now();
    const bool r = m_inner->moeRouteDevice(x, T, gate, bias, E, topk, nGroup, topkGroup, normTopk, scaling, idx, weight);
    m_inner->synchronize();
    if (r) add("moeRouteDevice", t0);
    return r;
}

bool ProfilingBackend::moeExpertsFusedDevice(const Buffer& x, int64_t T, int64_t D, int64_t I, const Buffer& idx,
                                             const Buffer& weight, int64_t topk, const WeightView* gate,
                                             const WeightView* up, const WeightView* down, int64_t E, float limit,
                                             const Buffer& y) {
    const auto t0 = Clock::now();
    const bool r = m_inner->moeExpertsFusedDevice(x, T, D, I, idx, weight, topk, gate, up, down, E, limit, y);
    m_inner->synchronize();
    if (r) add("moeExpertsFusedDevice", t0);
    return r;
}

bool ProfilingBackend::sampleRows(const Buffer& logits, int64_t V, int64_t n, const DeviceSampleRequest* reqs,
                                  SampleOutput* out) {
    const auto t0 = Clock::now();
    const bool r = m_inner->sampleRows(logits, V, n, reqs, out);
    if (r) add("sampleRows", t0);  // a declined call did nothing to time
    return r;
}

void ProfilingBackend::synchronize() {
    m_inner->synchronize();
}

bool ProfilingBackend::deviceMemory(DeviceMemory* out) const {
    return m_inner->deviceMemory(out);
}

void ProfilingBackend::rebaseDeviceMemory(int64_t freeNowBytes) {
    m_inner->rebaseDeviceMemory(freeNowBytes);
}

}  // namespace ts
