// A Backend decorator that times every op: each call is forwarded to the wrapped backend, which is then
// synchronized, and the wall time is added to the op's row (label = op name, plus "packed" for linears
// over packed weights). Synchronizing after every op removes overlap between the host and the device,
// so the per-op times add up to more than an unprofiled step; what it gives is attribution: which ops
// a decode step spends its time in (`twinspark-cli generate --profile-ops`).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "backend.h"

namespace ts {

class ProfilingBackend final : public Backend {
public:
    explicit ProfilingBackend(std::unique_ptr<Backend> inner) : m_inner(std::move(inner)) {}
    std::string name() const override { return m_inner->name(); }
    Backend& inner() { return *m_inner; }

    struct Row {
        int64_t calls = 0;
        double seconds = 0;
    };
    const std::map<std::string, Row>& rows() const { return m_rows; }
    void reset() { m_rows.clear(); }
    // The table, most expensive first: op, calls, total ms, µs per call, share of the total.
    std::string report() const;

    Buffer alloc(size_t bytes) override;
    Buffer allocUninit(size_t bytes) override;
    void preloadWeight(const WeightView& w) override;
    void releaseWeights() override;
    Buffer upload(const void* host, size_t bytes) override;
    void download(const Buffer& src, void* host, size_t bytes, size_t offset) override;
    void copy(const Buffer& src, size_t srcOffset, const Buffer& dst, size_t dstOffset, size_t bytes) override;
    void embedding(const int32_t* ids, int64_t T, const WeightView& table, const Buffer& out) override;
    void linear(const Buffer& x, int64_t T, const WeightView& w, const Buffer& y) override;
    void rmsnorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, float eps, const Buffer& y) override;
    void layernorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, const Buffer& b, float eps, const Buffer& y) override;
    void swiglu(const Buffer& gate, const Buffer& up, int64_t T, int64_t I, float limit, const Buffer& out) override;
    void add(const Buffer& x, const Buffer& y, int64_t n) override;
    void scale(const Buffer& x, int64_t n, float s) override;
    void zero(const Buffer& x) override;
    void concatColumns(const Buffer* parts, const int64_t* widths, int count, int64_t T, const Buffer& out) override;
    void repeatRows(const Buffer& src, int64_t T, int64_t D, int n, const Buffer& dst) override;
    void mhcPre(const Buffer& streams, int64_t T, int64_t D, const HyperConnParams& p, const Buffer& x, const Buffer& post, const Buffer& comb) override;
    void mhcPost(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& y, const Buffer& post, const Buffer& comb) override;
    void mhcHead(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& out) override;
    void causalConvSilu(const Buffer& x, int64_t T, int64_t C, int K, const Buffer& w, const Buffer& convState, const Buffer& out) override;
    void kdaGate(const Buffer& f, int64_t T, int64_t H, int64_t Dk, const Buffer& aLog, const Buffer& dtBias, float lowerBound) override;
    void kdaRecurrent(const Buffer& qkv, int64_t T, int64_t H, int64_t Dk, const Buffer& g, const Buffer& betaLogits, const Buffer& state, const Buffer& out) override;
    void gatedRmsnorm(const Buffer& o, int64_t T, int64_t H, int64_t Dv, const Buffer& w, float eps, const Buffer& gate) override;
    void mlaCacheWrite(const Buffer& c, int64_t T, int64_t R, KvCacheDtype dt, const Buffer& cache, const PageTable& pages, int64_t pos0) override;
    void mlaAbsorbQ(const Buffer& q, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb, const Buffer& qLat) override;
    void mlaSparseAttention(const Buffer& qLat, int64_t T, int64_t H, int64_t R, const Buffer& cache, KvCacheDtype dt, const PageTable& pages, const Buffer& idx, int64_t width, float scale, const Buffer& oLat) override;
    void mlaUpV(const Buffer& oLat, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb, const Buffer& o) override;
    void indexerCacheWrite(const Buffer& k, const Buffer& gate, int64_t T, int64_t D, int64_t kp, const Buffer& ape, KvCacheDtype dt, const Buffer& tail, const Buffer& poolStore, const PageTable& pages, int64_t pos0) override;
    void indexerSelect(const Buffer& q, const Buffer& w, int64_t T, int64_t H, int64_t D, int64_t kp, int64_t topk, KvCacheDtype dt, const Buffer& poolStore, const PageTable& pages, int64_t pos0, const Buffer& idx, IndexerStats* stats) override;
    void causalConvSiluBatch(const Buffer& x, const int64_t* rows, int64_t nSeqs, int64_t C, int K, const Buffer& w, const Buffer* convStates, const Buffer& out) override;
    void kdaRecurrentBatch(const Buffer& qkv, const int64_t* rows, int64_t nSeqs, int64_t H, int64_t Dk, const Buffer& g, const Buffer& betaLogits, const Buffer* states, const Buffer& out) override;
    void mlaCacheWriteBatch(const Buffer& c, const SeqRows* seqs, int64_t nSeqs, int64_t R, KvCacheDtype dt, const Buffer& cache) override;
    void mlaSparseAttentionBatch(const Buffer& qLat, const SeqRows* seqs, int64_t nSeqs, int64_t H, int64_t R, const Buffer& cache, KvCacheDtype dt, const Buffer& idx, int64_t width, float scale, const Buffer& oLat) override;
    void indexerSelectBatch(const Buffer& q, const Buffer& w, const SeqRows* seqs, int64_t nSeqs, int64_t H, int64_t D, int64_t kp, int64_t topk, KvCacheDtype dt, const Buffer& poolStore, const Buffer& idx, IndexerStats* const* stats) override;
    void indexerCacheWriteBatch(const Buffer& k, const Buffer& gate, const SeqRows* seqs, int64_t nSeqs, int64_t D, int64_t kp, const Buffer& ape, KvCacheDtype dt, const Buffer* tails, const Buffer& poolStore) override;
    void moeRoute(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E, int64_t topk, int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling, int32_t* hostIdx, float* hostWeight) override;
    void gatherRows(const Buffer& x, int64_t D, const int32_t* hostSel, int64_t n, const Buffer& rows) override;
    void scatterAddRows(const Buffer& rows, int64_t D, const int32_t* hostSel, const float* hostScale, int64_t n, const Buffer& y) override;
    bool moeExpertsFused(const Buffer& x, int64_t T, int64_t D, int64_t I, const int32_t* hostIdx, const float* hostWeight, int64_t topk, const WeightView* gate, const WeightView* up, const WeightView* down, int64_t E, float limit, const Buffer& y) override;
    bool moeRouteDevice(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E, int64_t topk,
                        int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling, const Buffer& idx,
                        const Buffer& weight) override;
    bool moeExpertsFusedDevice(const Buffer& x, int64_t T, int64_t D, int64_t I, const Buffer& idx, const Buffer& weight,
                               int64_t topk, const WeightView* gate, const WeightView* up, const WeightView* down,
                               int64_t E, float limit, const Buffer& y) override;
    bool sampleRows(const Buffer& logits, int64_t V, int64_t n, const DeviceSampleRequest* reqs, SampleOutput* out) override;
    void synchronize() override;
    bool deviceMemory(DeviceMemory* out) const override;
    ComputeUnits computeUnits() const override { return m_inner->computeUnits(); }
    void rebaseDeviceMemory(int64_t freeNowBytes) override;

private:
    // Runs one forwarded op, synchronizes the wrapped backend and books the wall time under `op`.
    template <class F>
    void timed(const char* op, F&& forward) {
        const auto t0 = std::chrono::steady_clock::now();
        forward();
        m_inner->synchronize();
        add(op, t0);
    }
    void add(const char* op, std::chrono::steady_clock::time_point t0) {
        Row& r = m_rows[op];
        ++r.calls;
        r.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::unique_ptr<Backend> m_inner;
    std::map<std::string, Row> m_rows;
};

}  // namespace ts
