#include "forwarding_backend.h"

namespace ts {

const std::vector<std::string>& ForwardingBackend::opNames() {
    static const std::vector<std::string> names = {
        "alloc", "allocUninit", "upload", "download", "copy", "embedding", "linear", "rmsnorm", "layernorm", "swiglu",
        "add", "scale", "zero", "concatColumns", "repeatRows", "mhcPre", "mhcPost", "mhcHead", "causalConvSilu",
        "kdaGate", "kdaRecurrent", "causalConvSiluBatch", "kdaRecurrentBatch", "gatedRmsnorm", "mlaCacheWrite",
        "mlaAbsorbQ", "mlaSparseAttention", "mlaUpV", "indexerCacheWrite", "indexerSelect", "mlaCacheWriteBatch",
        "mlaSparseAttentionBatch", "indexerSelectBatch", "indexerCacheWriteBatch", "moeRoute", "gatherRows",
        "scatterAddRows", "moeExpertsFused", "moeRouteDevice", "moeExpertsFusedDevice", "sampleRows", "synchronize"};
    return names;
}

// Memory and transfers -----------------------------------------------------------------------------------------

Buffer ForwardingBackend::alloc(size_t bytes) {
    Buffer b;
    hooked("alloc", OpKind::Memory, [&] { b = m_inner->alloc(bytes); });
    return b;
}

// Forwarded, not left to Backend's default (which would call alloc() and zero-fill on the device).
Buffer ForwardingBackend::allocUninit(size_t bytes) {
    Buffer b;
    hooked("allocUninit", OpKind::Memory, [&] { b = m_inner->allocUninit(bytes); });
    return b;
}

void ForwardingBackend::preloadWeight(const WeightView& w) {
    m_inner->preloadWeight(w);
}

void ForwardingBackend::releaseWeights() {
    m_inner->releaseWeights();
}

Buffer ForwardingBackend::upload(const void* host, size_t bytes) {
    Buffer b;
    hooked("upload", OpKind::Transfer, [&] { b = m_inner->upload(host, bytes); });
    return b;
}

void ForwardingBackend::download(const Buffer& src, void* host, size_t bytes, size_t offset) {
    hooked("download", OpKind::Transfer, [&] { m_inner->download(src, host, bytes, offset); });
}

void ForwardingBackend::synchronize() {
    hooked("synchronize", OpKind::Transfer, [&] { m_inner->synchronize(); });
}

void ForwardingBackend::copy(const Buffer& src, size_t srcOffset, const Buffer& dst, size_t dstOffset, size_t bytes) {
    hooked("copy", OpKind::Compute, [&] { m_inner->copy(src, srcOffset, dst, dstOffset, bytes); });
}

// Dense math ---------------------------------------------------------------------------------------------------

void ForwardingBackend::embedding(const int32_t* ids, int64_t T, const WeightView& table, const Buffer& out) {
    hooked("embedding", OpKind::Compute, [&] { m_inner->embedding(ids, T, table, out); });
}

void ForwardingBackend::linear(const Buffer& x, int64_t T, const WeightView& w, const Buffer& y) {
    hooked(w.packed ? "linear (packed)" : "linear", OpKind::Compute, [&] { m_inner->linear(x, T, w, y); });
}

void ForwardingBackend::rmsnorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, float eps, const Buffer& y) {
    hooked("rmsnorm", OpKind::Compute, [&] { m_inner->rmsnorm(x, rows, D, w, eps, y); });
}

void ForwardingBackend::layernorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, const Buffer& b, float eps,
                                  const Buffer& y) {
    hooked("layernorm", OpKind::Compute, [&] { m_inner->layernorm(x, rows, D, w, b, eps, y); });
}

void ForwardingBackend::swiglu(const Buffer& gate, const Buffer& up, int64_t T, int64_t I, float limit,
                               const Buffer& out) {
    hooked("swiglu", OpKind::Compute, [&] { m_inner->swiglu(gate, up, T, I, limit, out); });
}

void ForwardingBackend::add(const Buffer& x, const Buffer& y, int64_t n) {
    hooked("add", OpKind::Compute, [&] { m_inner->add(x, y, n); });
}

void ForwardingBackend::scale(const Buffer& x, int64_t n, float s) {
    hooked("scale", OpKind::Compute, [&] { m_inner->scale(x, n, s); });
}

void ForwardingBackend::zero(const Buffer& x) {
    hooked("zero", OpKind::Compute, [&] { m_inner->zero(x); });
}

void ForwardingBackend::concatColumns(const Buffer* parts, const int64_t* widths, int count, int64_t T,
                                      const Buffer& out) {
    hooked("concatColumns", OpKind::Compute, [&] { m_inner->concatColumns(parts, widths, count, T, out); });
}

void ForwardingBackend::repeatRows(const Buffer& src, int64_t T, int64_t D, int n, const Buffer& dst) {
    hooked("repeatRows", OpKind::Compute, [&] { m_inner->repeatRows(src, T, D, n, dst); });
}

// mHC and KDA --------------------------------------------------------------------------------------------------

void ForwardingBackend::mhcPre(const Buffer& streams, int64_t T, int64_t D, const HyperConnParams& p, const Buffer& x,
                               const Buffer& post, const Buffer& comb) {
    hooked("mhcPre", OpKind::Compute, [&] { m_inner->mhcPre(streams, T, D, p, x, post, comb); });
}

void ForwardingBackend::mhcPost(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& y,
                                const Buffer& post, const Buffer& comb) {
    hooked("mhcPost", OpKind::Compute, [&] { m_inner->mhcPost(streams, T, D, n, y, post, comb); });
}

void ForwardingBackend::mhcHead(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& out) {
    hooked("mhcHead", OpKind::Compute, [&] { m_inner->mhcHead(streams, T, D, n, out); });
}

void ForwardingBackend::causalConvSilu(const Buffer& x, int64_t T, int64_t C, int K, const Buffer& w,
                                       const Buffer& convState, const Buffer& out) {
    hooked("causalConvSilu", OpKind::Compute, [&] { m_inner->causalConvSilu(x, T, C, K, w, convState, out); });
}

void ForwardingBackend::kdaGate(const Buffer& f, int64_t T, int64_t H, int64_t Dk, const Buffer& aLog,
                                const Buffer& dtBias, float lowerBound) {
    hooked("kdaGate", OpKind::Compute, [&] { m_inner->kdaGate(f, T, H, Dk, aLog, dtBias, lowerBound); });
}

void ForwardingBackend::kdaRecurrent(const Buffer& qkv, int64_t T, int64_t H, int64_t Dk, const Buffer& g,
                                     const Buffer& betaLogits, const Buffer& state, const Buffer& out) {
    hooked("kdaRecurrent", OpKind::Compute, [&] { m_inner->kdaRecurrent(qkv, T, H, Dk, g, betaLogits, state, out); });
}

// The batched forms go to the wrapped backend's batched op (not Backend's per-sequence default).
void ForwardingBackend::causalConvSiluBatch(const Buffer& x, const int64_t* rows, int64_t nSeqs, int64_t C, int K,
                                            const Buffer& w, const Buffer* convStates, const Buffer& out) {
    hooked("causalConvSiluBatch", OpKind::Compute,
           [&] { m_inner->causalConvSiluBatch(x, rows, nSeqs, C, K, w, convStates, out); });
}

void ForwardingBackend::kdaRecurrentBatch(const Buffer& qkv, const int64_t* rows, int64_t nSeqs, int64_t H, int64_t Dk,
                                          const Buffer& g, const Buffer& betaLogits, const Buffer* states,
                                          const Buffer& out) {
    hooked("kdaRecurrentBatch", OpKind::Compute,
           [&] { m_inner->kdaRecurrentBatch(qkv, rows, nSeqs, H, Dk, g, betaLogits, states, out); });
}

void ForwardingBackend::gatedRmsnorm(const Buffer& o, int64_t T, int64_t H, int64_t Dv, const Buffer& w, float eps,
                                     const Buffer& gate) {
    hooked("gatedRmsnorm", OpKind::Compute, [&] { m_inner->gatedRmsnorm(o, T, H, Dv, w, eps, gate); });
}

// Sparse MLA and the indexer -----------------------------------------------------------------------------------

void ForwardingBackend::mlaCacheWrite(const Buffer& c, int64_t T, int64_t R, KvCacheDtype dt, const Buffer& cache,
                                      const PageTable& pages, int64_t pos0) {
    hooked("mlaCacheWrite", OpKind::Compute, [&] { m_inner->mlaCacheWrite(c, T, R, dt, cache, pages, pos0); });
}

void ForwardingBackend::mlaAbsorbQ(const Buffer& q, int64_t T, int64_t H, int64_t dn, int64_t dv,
                                   const WeightView& kvb, const Buffer& qLat) {
    hooked("mlaAbsorbQ", OpKind::Compute, [&] { m_inner->mlaAbsorbQ(q, T, H, dn, dv, kvb, qLat); });
}

void ForwardingBackend::mlaSparseAttention(const Buffer& qLat, int64_t T, int64_t H, int64_t R, const Buffer& cache,
                                           KvCacheDtype dt, const PageTable& pages, const Buffer& idx, int64_t width,
                                           float scale, const Buffer& oLat) {
    hooked("mlaSparseAttention", OpKind::Compute,
           [&] { m_inner->mlaSparseAttention(qLat, T, H, R, cache, dt, pages, idx, width, scale, oLat); });
}

void ForwardingBackend::mlaUpV(const Buffer& oLat, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                               const Buffer& o) {
    hooked("mlaUpV", OpKind::Compute, [&] { m_inner->mlaUpV(oLat, T, H, dn, dv, kvb, o); });
}

void ForwardingBackend::indexerCacheWrite(const Buffer& k, const Buffer& gate, int64_t T, int64_t D, int64_t kp,
                                          const Buffer& ape, KvCacheDtype dt, const Buffer& tail,
                                          const Buffer& poolStore, const PageTable& pages, int64_t pos0) {
    hooked("indexerCacheWrite", OpKind::Compute,
           [&] { m_inner->indexerCacheWrite(k, gate, T, D, kp, ape, dt, tail, poolStore, pages, pos0); });
}

void ForwardingBackend::indexerSelect(const Buffer& q, const Buffer& w, int64_t T, int64_t H, int64_t D, int64_t kp,
                                      int64_t topk, KvCacheDtype dt, const Buffer& poolStore, const PageTable& pages,
                                      int64_t pos0, const Buffer& idx, IndexerStats* stats) {
    hooked("indexerSelect", OpKind::Compute,
           [&] { m_inner->indexerSelect(q, w, T, H, D, kp, topk, dt, poolStore, pages, pos0, idx, stats); });
}

void ForwardingBackend::mlaCacheWriteBatch(const Buffer& c, const SeqRows* seqs, int64_t nSeqs, int64_t R,
                                           KvCacheDtype dt, const Buffer& cache) {
    hooked("mlaCacheWriteBatch", OpKind::Compute, [&] { m_inner->mlaCacheWriteBatch(c, seqs, nSeqs, R, dt, cache); });
}

void ForwardingBackend::mlaSparseAttentionBatch(const Buffer& qLat, const SeqRows* seqs, int64_t nSeqs, int64_t H,
                                                int64_t R, const Buffer& cache, KvCacheDtype dt, const Buffer& idx,
                                                int64_t width, float scale, const Buffer& oLat) {
    hooked("mlaSparseAttentionBatch", OpKind::Compute,
           [&] { m_inner->mlaSparseAttentionBatch(qLat, seqs, nSeqs, H, R, cache, dt, idx, width, scale, oLat); });
}

void ForwardingBackend::indexerSelectBatch(const Buffer& q, const Buffer& w, const SeqRows* seqs, int64_t nSeqs,
                                           int64_t H, int64_t D, int64_t kp, int64_t topk, KvCacheDtype dt,
                                           const Buffer& poolStore, const Buffer& idx, IndexerStats* const* stats) {
    hooked("indexerSelectBatch", OpKind::Compute,
           [&] { m_inner->indexerSelectBatch(q, w, seqs, nSeqs, H, D, kp, topk, dt, poolStore, idx, stats); });
}

void ForwardingBackend::indexerCacheWriteBatch(const Buffer& k, const Buffer& gate, const SeqRows* seqs,
                                               int64_t nSeqs, int64_t D, int64_t kp, const Buffer& ape,
                                               KvCacheDtype dt, const Buffer* tails, const Buffer& poolStore) {
    hooked("indexerCacheWriteBatch", OpKind::Compute,
           [&] { m_inner->indexerCacheWriteBatch(k, gate, seqs, nSeqs, D, kp, ape, dt, tails, poolStore); });
}

// MoE and sampling ---------------------------------------------------------------------------------------------

void ForwardingBackend::moeRoute(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E,
                                 int64_t topk, int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling,
                                 int32_t* hostIdx, float* hostWeight) {
    hooked("moeRoute", OpKind::Compute, [&] {
        m_inner->moeRoute(x, T, gate, bias, E, topk, nGroup, topkGroup, normTopk, scaling, hostIdx, hostWeight);
    });
}

void ForwardingBackend::gatherRows(const Buffer& x, int64_t D, const int32_t* hostSel, int64_t n, const Buffer& rows) {
    hooked("gatherRows", OpKind::Compute, [&] { m_inner->gatherRows(x, D, hostSel, n, rows); });
}

void ForwardingBackend::scatterAddRows(const Buffer& rows, int64_t D, const int32_t* hostSel, const float* hostScale,
                                       int64_t n, const Buffer& y) {
    hooked("scatterAddRows", OpKind::Compute, [&] { m_inner->scatterAddRows(rows, D, hostSel, hostScale, n, y); });
}

bool ForwardingBackend::moeExpertsFused(const Buffer& x, int64_t T, int64_t D, int64_t I, const int32_t* hostIdx,
                                        const float* hostWeight, int64_t topk, const WeightView* gate,
                                        const WeightView* up, const WeightView* down, int64_t E, float limit,
                                        const Buffer& y) {
    return hookedDeclinable("moeExpertsFused", [&] {
        return m_inner->moeExpertsFused(x, T, D, I, hostIdx, hostWeight, topk, gate, up, down, E, limit, y);
    });
}

bool ForwardingBackend::moeRouteDevice(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias,
                                       int64_t E, int64_t topk, int64_t nGroup, int64_t topkGroup, bool normTopk,
                                       float scaling, const Buffer& idx, const Buffer& weight) {
    return hookedDeclinable("moeRouteDevice", [&] {
        return m_inner->moeRouteDevice(x, T, gate, bias, E, topk, nGroup, topkGroup, normTopk, scaling, idx, weight);
    });
}

bool ForwardingBackend::moeExpertsFusedDevice(const Buffer& x, int64_t T, int64_t D, int64_t I, const Buffer& idx,
                                              const Buffer& weight, int64_t topk, const WeightView* gate,
                                              const WeightView* up, const WeightView* down, int64_t E, float limit,
                                              const Buffer& y) {
    return hookedDeclinable("moeExpertsFusedDevice", [&] {
        return m_inner->moeExpertsFusedDevice(x, T, D, I, idx, weight, topk, gate, up, down, E, limit, y);
    });
}

bool ForwardingBackend::sampleRows(const Buffer& logits, int64_t V, int64_t n, const DeviceSampleRequest* reqs,
                                   SampleOutput* out) {
    return hookedDeclinable("sampleRows", [&] { return m_inner->sampleRows(logits, V, n, reqs, out); });
}

}  // namespace ts
