// A Backend that forwards every call to the backend it wraps, with a hook before and after each op: the base of
// the decorators that watch or disturb a backend without touching the model or the engine — ProfilingBackend
// (times each op) and FaultBackend (fails a chosen call, for tests of the error paths). Every virtual of Backend
// is forwarded, the graph regions and the aside stream included, so a decorator that does not override them
// leaves the wrapped backend's behaviour as it was; one whose hooks would be wrong under them (profiling, which
// must see each op run when it is called) overrides those to "not supported".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend.h"

namespace ts {

class ForwardingBackend : public Backend {
public:
    // What a hooked call is: the ops of the model (Compute; `copy` counts as one), the moves between host and
    // backend (Transfer: upload, download, synchronize) and allocations (Memory: alloc, allocUninit).
    enum class OpKind { Compute, Transfer, Memory };
    // Every name before()/after() can be given, in declaration order ("linear" is also reported as
    // "linear (packed)" for packed weights; that label is not in the list).
    static const std::vector<std::string>& opNames();

    explicit ForwardingBackend(std::unique_ptr<Backend> inner) : m_owned(std::move(inner)), m_inner(m_owned.get()) {}
    // Borrowed: `inner` must outlive this decorator (the self-test wraps the backend under test for one check).
    explicit ForwardingBackend(Backend& inner) : m_inner(&inner) {}
    Backend& inner() { return *m_inner; }
    const Backend& inner() const { return *m_inner; }

    std::string name() const override { return m_inner->name(); }

    Buffer alloc(size_t bytes) override;
    Buffer allocUninit(size_t bytes) override;
    void preloadWeight(const WeightView& w) override;
    void releaseWeights() override;
    Buffer upload(const void* host, size_t bytes) override;
    void download(const Buffer& src, void* host, size_t bytes, size_t offset = 0) override;
    void copy(const Buffer& src, size_t srcOffset, const Buffer& dst, size_t dstOffset, size_t bytes) override;
    void embedding(const int32_t* ids, int64_t T, const WeightView& table, const Buffer& out) override;
    void linear(const Buffer& x, int64_t T, const WeightView& w, const Buffer& y) override;
    void rmsnorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, float eps, const Buffer& y) override;
    void layernorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, const Buffer& b, float eps,
                   const Buffer& y) override;
    void swiglu(const Buffer& gate, const Buffer& up, int64_t T, int64_t I, float limit, const Buffer& out) override;
    void add(const Buffer& x, const Buffer& y, int64_t n) override;
    void scale(const Buffer& x, int64_t n, float s) override;
    void zero(const Buffer& x) override;
    void concatColumns(const Buffer* parts, const int64_t* widths, int count, int64_t T, const Buffer& out) override;
    void repeatRows(const Buffer& src, int64_t T, int64_t D, int n, const Buffer& dst) override;
    void mhcPre(const Buffer& streams, int64_t T, int64_t D, const HyperConnParams& p, const Buffer& x,
                const Buffer& post, const Buffer& comb) override;
    void mhcPost(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& y, const Buffer& post,
                 const Buffer& comb) override;
    void mhcHead(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& out) override;
    void causalConvSilu(const Buffer& x, int64_t T, int64_t C, int K, const Buffer& w, const Buffer& convState,
                        const Buffer& out) override;
    void kdaGate(const Buffer& f, int64_t T, int64_t H, int64_t Dk, const Buffer& aLog, const Buffer& dtBias,
                 float lowerBound) override;
    void kdaRecurrent(const Buffer& qkv, int64_t T, int64_t H, int64_t Dk, const Buffer& g, const Buffer& betaLogits,
                      const Buffer& state, const Buffer& out) override;
    void causalConvSiluBatch(const Buffer& x, const int64_t* rows, int64_t nSeqs, int64_t C, int K, const Buffer& w,
                             const Buffer* convStates, const Buffer& out) override;
    void kdaRecurrentBatch(const Buffer& qkv, const int64_t* rows, int64_t nSeqs, int64_t H, int64_t Dk,
                           const Buffer& g, const Buffer& betaLogits, const Buffer* states, const Buffer& out) override;
    void gatedRmsnorm(const Buffer& o, int64_t T, int64_t H, int64_t Dv, const Buffer& w, float eps,
                      const Buffer& gate) override;
    void mlaCacheWrite(const Buffer& c, int64_t T, int64_t R, KvCacheDtype dt, const Buffer& cache,
                       const PageTable& pages, int64_t pos0) override;
    void mlaAbsorbQ(const Buffer& q, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                    const Buffer& qLat) override;
    void mlaSparseAttention(const Buffer& qLat, int64_t T, int64_t H, int64_t R, const Buffer& cache, KvCacheDtype dt,
                            const PageTable& pages, const Buffer& idx, int64_t width, float scale,
                            const Buffer& oLat) override;
    void mlaUpV(const Buffer& oLat, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                const Buffer& o) override;
    void indexerCacheWrite(const Buffer& k, const Buffer& gate, int64_t T, int64_t D, int64_t kp, const Buffer& ape,
                           KvCacheDtype dt, const Buffer& tail, const Buffer& poolStore, const PageTable& pages,
                           int64_t pos0) override;
    void indexerSelect(const Buffer& q, const Buffer& w, int64_t T, int64_t H, int64_t D, int64_t kp, int64_t topk,
                       KvCacheDtype dt, const Buffer& poolStore, const PageTable& pages, int64_t pos0,
                       const Buffer& idx, IndexerStats* stats) override;
    void mlaCacheWriteBatch(const Buffer& c, const SeqRows* seqs, int64_t nSeqs, int64_t R, KvCacheDtype dt,
                            const Buffer& cache) override;
    void mlaSparseAttentionBatch(const Buffer& qLat, const SeqRows* seqs, int64_t nSeqs, int64_t H, int64_t R,
                                 const Buffer& cache, KvCacheDtype dt, const Buffer& idx, int64_t width, float scale,
                                 const Buffer& oLat) override;
    void indexerSelectBatch(const Buffer& q, const Buffer& w, const SeqRows* seqs, int64_t nSeqs, int64_t H,
                            int64_t D, int64_t kp, int64_t topk, KvCacheDtype dt, const Buffer& poolStore,
                            const Buffer& idx, IndexerStats* const* stats) override;
    void indexerCacheWriteBatch(const Buffer& k, const Buffer& gate, const SeqRows* seqs, int64_t nSeqs, int64_t D,
                                int64_t kp, const Buffer& ape, KvCacheDtype dt, const Buffer* tails,
                                const Buffer& poolStore) override;
    void moeRoute(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E, int64_t topk,
                  int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling, int32_t* hostIdx,
                  float* hostWeight) override;
    void gatherRows(const Buffer& x, int64_t D, const int32_t* hostSel, int64_t n, const Buffer& rows) override;
    void scatterAddRows(const Buffer& rows, int64_t D, const int32_t* hostSel, const float* hostScale, int64_t n,
                        const Buffer& y) override;
    bool moeExpertsFused(const Buffer& x, int64_t T, int64_t D, int64_t I, const int32_t* hostIdx,
                         const float* hostWeight, int64_t topk, const WeightView* gate, const WeightView* up,
                         const WeightView* down, int64_t E, float limit, const Buffer& y) override;
    bool moeRouteDevice(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E,
                        int64_t topk, int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling,
                        const Buffer& idx, const Buffer& weight) override;
    bool moeExpertsFusedDevice(const Buffer& x, int64_t T, int64_t D, int64_t I, const Buffer& idx,
                               const Buffer& weight, int64_t topk, const WeightView* gate, const WeightView* up,
                               const WeightView* down, int64_t E, float limit, const Buffer& y) override;
    bool sampleRows(const Buffer& logits, int64_t V, int64_t n, const DeviceSampleRequest* reqs,
                    SampleOutput* out) override;

    void beginGraphRegion(uint64_t key) override { m_inner->beginGraphRegion(key); }
    void endGraphRegion(GraphRegionEnd how) override { m_inner->endGraphRegion(how); }
    bool setGraphsEnabled(bool on) override { return m_inner->setGraphsEnabled(on); }
    GraphStats graphStats() const override { return m_inner->graphStats(); }
    bool beginAside() override { return m_inner->beginAside(); }
    void endAside() override { m_inner->endAside(); }
    void joinAside() override { m_inner->joinAside(); }

    void synchronize() override;
    bool deviceMemory(DeviceMemory* out) const override { return m_inner->deviceMemory(out); }
    void rebaseDeviceMemory(int64_t freeNowBytes) override { m_inner->rebaseDeviceMemory(freeNowBytes); }
    ComputeUnits computeUnits() const override { return m_inner->computeUnits(); }
    bool trapDevice() override { return m_inner->trapDevice(); }

protected:
    // Called before each hooked call is forwarded; may throw (the call is then not forwarded).
    virtual void before(const char* /*op*/, OpKind /*kind*/) {}
    // Called after the wrapped backend returned (not when it threw). `ran` is false where an op with a fallback
    // (moeExpertsFused, moeRouteDevice, moeExpertsFusedDevice, sampleRows) declined and did nothing.
    virtual void after(const char* /*op*/, OpKind /*kind*/, bool /*ran*/) {}

private:
    template <class F>
    void hooked(const char* op, OpKind kind, F&& forward) {
        before(op, kind);
        forward();
        after(op, kind, true);
    }
    template <class F>
    bool hookedDeclinable(const char* op, F&& forward) {
        before(op, OpKind::Compute);
        const bool ran = forward();
        after(op, OpKind::Compute, ran);
        return ran;
    }
    std::unique_ptr<Backend> m_owned;  // null when borrowed
    Backend* m_inner;
};

}  // namespace ts
