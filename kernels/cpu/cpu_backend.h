// The CPU backend: the reference implementation of every op in kernels/backend.h, threaded over the
// global ThreadPool. Every op computes each output row independently of how many rows the call has,
// so a prompt prefilled at once, in chunks, or token by token gives bit-identical results.
#pragma once

#include "backend.h"

namespace ts {

class CpuBackend final : public Backend {
public:
    std::string name() const override { return "cpu"; }

    Buffer alloc(size_t bytes) override;
    // Quiet NaN in every float (0xFF in trailing bytes): a caller that relies on zeros fails loudly.
    Buffer allocUninit(size_t bytes) override;
    Buffer upload(const void* host, size_t bytes) override;
    void download(const Buffer& src, void* host, size_t bytes, size_t offset) override;
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

    void moeRoute(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E, int64_t topk,
                  int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling, int32_t* hostIdx,
                  float* hostWeight) override;
    void gatherRows(const Buffer& x, int64_t D, const int32_t* hostSel, int64_t n, const Buffer& rows) override;
    void scatterAddRows(const Buffer& rows, int64_t D, const int32_t* hostSel, const float* hostScale, int64_t n,
                        const Buffer& y) override;
};

// Shared helpers of the CPU kernels (cpu_math.cpp).
namespace cpu {
// Convert n elements of a weight row (bf16/f16/f32, possibly unaligned) to fp32.
void rowToF32(const WeightView& w, int64_t row, float* out);
// Dot product with a fixed accumulation order (8 lanes, then pairwise), independent of the caller.
float dot(const float* a, const float* b, int64_t n);
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// In-place orthonormal fast Walsh–Hadamard transform (n a power of two), scaled by n^-1/2.
void hadamard(float* x, int64_t n);
}  // namespace cpu

}  // namespace ts
