// The CUDA backend: every op of kernels/backend.h on one NVIDIA GPU, with the CPU backend as the truth
// (`twinspark-cli selftest --backend cuda` compares every op and the whole model against it).
//
// Memory: Buffers are device memory (the caching allocator of cuda_backend.cu; alloc() zero-fills with a
// memset on the stream, allocUninit() does not: a recycled block keeps whatever its last owner wrote).
// Weights (WeightView) point into mapped host checkpoints; the first op that reads one uploads it once
// (same dtype, keyed by host pointer, shape and dtype) and keeps it until releaseWeights(). EXL3 linears
// upload their trellis + scales once. Every op is enqueued on the backend's one stream; upload(),
// download() and ops with host outputs (moeRoute, indexerSelect's stats) wait for it. Small host inputs (page tables, ids, expert choices) go through per-purpose
// scratch slots, which stream order makes safe to reuse.
//
// Decode steps: inside a graph region (Backend::beginGraphRegion) the model-level allocations come from a
// shared arena and the capturable ops are captured once and replayed as CUDA graphs (cuda_graph.cu);
// every op opens a GraphOp first, which decides whether it runs, is captured, or is skipped.
//
// Ops are split by family, one .cu file each (cuda_math, cuda_mhc_kda, cuda_attention, cuda_moe,
// cuda_exl3, cuda_sampling); this file declares them all.
#pragma once

#include <cuda_runtime.h>
#include <cublas_v2.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backend.h"

namespace ts {

struct DevicePool;  // cuda_backend.cu: the caching allocator
struct Exl3Cache;  // cuda_exl3.cuh: the EXL3 files' per-backend scratch and expert tables
namespace exl3cuda {
struct PfRow;      // cuda_exl3.cuh: the prefill path's work lists
struct PfJobHost;
}  // namespace exl3cuda

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int device);
    ~CudaBackend() override;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    std::string name() const override { return "cuda"; }

    Buffer alloc(size_t bytes) override;
    Buffer allocUninit(size_t bytes) override;
    void preloadWeight(const WeightView& w) override;
    void releaseWeights() override;
    Buffer upload(const void* host, size_t bytes) override;
    void download(const Buffer& src, void* host, size_t bytes, size_t offset) override;
    void copy(const Buffer& src, size_t srcOffset, const Buffer& dst, size_t dstOffset, size_t bytes) override;

    // cuda_math.cu
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

    // cuda_mhc_kda.cu
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
    // Decode-sized steps (every sequence below the chunked prefill's threshold) in one launch sequence over all
    // sequences; other steps take the per-sequence loop.
    void causalConvSiluBatch(const Buffer& x, const int64_t* rows, int64_t nSeqs, int64_t C, int K, const Buffer& w,
                             const Buffer* convStates, const Buffer& out) override;
    void kdaRecurrentBatch(const Buffer& qkv, const int64_t* rows, int64_t nSeqs, int64_t H, int64_t Dk, const Buffer& g,
                           const Buffer& betaLogits, const Buffer* states, const Buffer& out) override;

    // cuda_attention.cu
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
    // The batched forms are the implementation (one launch sequence over every query of the step); the
    // per-sequence ops above call them with one sequence.
    void mlaCacheWriteBatch(const Buffer& c, const SeqRows* seqs, int64_t nSeqs, int64_t R, KvCacheDtype dt,
                            const Buffer& cache) override;
    void mlaSparseAttentionBatch(const Buffer& qLat, const SeqRows* seqs, int64_t nSeqs, int64_t H, int64_t R,
                                 const Buffer& cache, KvCacheDtype dt, const Buffer& idx, int64_t width, float scale,
                                 const Buffer& oLat) override;
    void indexerSelectBatch(const Buffer& q, const Buffer& w, const SeqRows* seqs, int64_t nSeqs, int64_t H, int64_t D,
                            int64_t kp, int64_t topk, KvCacheDtype dt, const Buffer& poolStore, const Buffer& idx,
                            IndexerStats* const* stats) override;
    void indexerCacheWriteBatch(const Buffer& k, const Buffer& gate, const SeqRows* seqs, int64_t nSeqs, int64_t D,
                                int64_t kp, const Buffer& ape, KvCacheDtype dt, const Buffer* tails,
                                const Buffer& poolStore) override;

    // cuda_moe.cu
    void moeRoute(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E, int64_t topk,
                  int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling, int32_t* hostIdx,
                  float* hostWeight) override;
    void gatherRows(const Buffer& x, int64_t D, const int32_t* hostSel, int64_t n, const Buffer& rows) override;
    void scatterAddRows(const Buffer& rows, int64_t D, const int32_t* hostSel, const float* hostScale, int64_t n,
                        const Buffer& y) override;

    // cuda_exl3.cu
    bool moeExpertsFused(const Buffer& x, int64_t T, int64_t D, int64_t I, const int32_t* hostIdx,
                         const float* hostWeight, int64_t topk, const WeightView* gate, const WeightView* up,
                         const WeightView* down, int64_t E, float limit, const Buffer& y) override;

    // cuda_moe.cu / cuda_exl3_moe_routed.cu (dense experts: cuda_moe_dense.cu): the routing left on the device
    // (no host round trip)
    bool moeRouteDevice(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E, int64_t topk,
                        int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling, const Buffer& idx,
                        const Buffer& weight) override;
    bool moeExpertsFusedDevice(const Buffer& x, int64_t T, int64_t D, int64_t I, const Buffer& idx, const Buffer& weight,
                               int64_t topk, const WeightView* gate, const WeightView* up, const WeightView* down,
                               int64_t E, float limit, const Buffer& y) override;

    // cuda_sampling.cu
    bool sampleRows(const Buffer& logits, int64_t V, int64_t n, const DeviceSampleRequest* reqs,
                    SampleOutput* out) override;

    // cuda_graph.cu: decode-step graphs (Backend::beginGraphRegion)
    void beginGraphRegion(uint64_t key) override;
    void endGraphRegion(GraphRegionEnd how) override;
    bool setGraphsEnabled(bool on) override;
    GraphStats graphStats() const override;

    // cuda_aside.cu: the model's aside (Backend::beginAside) on the side stream, with scratch of its own.
    bool beginAside() override;
    void endAside() override;
    void joinAside() override;

    void synchronize() override;
    bool deviceMemory(DeviceMemory* out) const override;
    ComputeUnits computeUnits() const override {
        return {m_props.multiProcessorCount, m_partitionOf ? m_partitionOf : m_props.multiProcessorCount};
    }
    void rebaseDeviceMemory(int64_t freeNowBytes) override;
    bool trapDevice() override;  // cuda_backend.cu; TS_FAULT_OP=<op>@<n>:trap (fault_backend.h)

    // Every public op opens one of these first, with its name and the arguments a replay must match
    // (buffer and weight addresses, shapes, scalars; see gk / gf). Inside a graph region, at the model's
    // level: `capturable` ops are captured into the current graph segment (second region of a key) or
    // skipped (skip() = true: their graph is launched at the segment's end); the others run eagerly
    // between segments. Nested calls (an op's own helpers) are part of the op. cuda_graph.cu.
    class GraphOp {
    public:
        GraphOp(CudaBackend& be, bool capturable, const char* name, std::initializer_list<uint64_t> args);
        ~GraphOp() { --m_be.m_opDepth; }
        GraphOp(const GraphOp&) = delete;
        GraphOp& operator=(const GraphOp&) = delete;
        bool skip() const { return m_skip; }

    private:
        CudaBackend& m_be;
        bool m_skip = false;
    };
    // Work done for an op before its GraphOp is open (a first-use upload): not a model-level op.
    class OwnWork {
    public:
        explicit OwnWork(CudaBackend& be) : m_be(be) { ++m_be.m_opDepth; }
        ~OwnWork() { --m_be.m_opDepth; }
        OwnWork(const OwnWork&) = delete;
        OwnWork& operator=(const OwnWork&) = delete;

    private:
        CudaBackend& m_be;
    };
    static uint64_t gk(const void* p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); }
    static uint64_t gk(int64_t v) { return uint64_t(v); }
    static uint64_t gf(float v) {
        uint32_t u;
        std::memcpy(&u, &v, 4);
        return u;
    }

    // --- shared by the op files ---------------------------------------------------------------------
    cudaStream_t stream() const { return m_stream; }
    // A second stream, of the highest priority, for short work off the critical path (cuda_mhc_kda.cu: a decode
    // step's mHC Sinkhorn runs beside the layer's body; only mhcPost needs it). forkSide(): the side stream,
    // ordered after everything issued to stream() so far; sideIssued() after the side work is issued; joinSide():
    // stream()'s later work waits for it (a no-op when nothing is pending). Joined by the work's consumer and at
    // every host synchronisation (upload, download, synchronize) and graph segment or region end, so no captured
    // segment leaves a fork open and nothing reads the side work's outputs, or reuses its buffers, too early.
    cudaStream_t forkSide();
    void sideIssued();
    void joinSide();
    bool inGraphRegion() const;  // cuda_graph.cu: inside Backend::beginGraphRegion … endGraphRegion (a decode step)
    cublasHandle_t cublas() const { return m_cublas; }
    // The handle for a cuBLAS call about to be issued: one handle and one workspace serve both streams, so a
    // call on the main stream while aside work is pending joins it first (never two streams' GEMMs at once).
    cublasHandle_t cublasNow();
    const cudaDeviceProp& props() const { return m_props; }
    int device() const { return m_device; }

    // The device copy of a dense weight matrix (same dtype and layout as the view: [rows, cols]
    // row-major), uploaded on first use. Never a packed view.
    const void* deviceWeight(const WeightView& w);
    // Upload of one EXL3 linear (uploaded on first use; pointers are device memory).
    struct DeviceTrellis {
        const uint16_t* trellis = nullptr;  // [k/16, n/16, 16·K] uint16 (2-byte aligned copy)
        const float* suh = nullptr;         // [k]
        const float* svh = nullptr;         // [n]
        const float* bias = nullptr;        // [n] or null
        int64_t k = 0, n = 0;
        int bits = 0;
        uint8_t codebook = 0;
    };
    const DeviceTrellis& deviceTrellis(const PackedLinear& p);

    // Device scratch that stays valid until the next call with the same slot (stream order makes reuse
    // safe). Grown on demand; never shrinks.
    enum ScratchSlot : int { kScratchPages, kScratchIds, kScratchSel, kScratchScale, kScratchA, kScratchB,
                             kScratchC, kScratchD, kScratchGemm, kScratchPfJobs, kScratchPfRows, kScratchPfArena,
                             kScratchPfComb, kScratchPfWeights, kScratchCount };
    void* scratch(ScratchSlot slot, size_t bytes);
    // Copies n host values into a scratch slot and returns the device pointer.
    const int32_t* uploadInts(ScratchSlot slot, const int32_t* host, int64_t n);
    const float* uploadFloats(ScratchSlot slot, const float* host, int64_t n);
    // A grow-only buffer of at least `bytes` owned by the caller (`b`): new memory is zero-filled, so
    // arrival counters that kernels leave at zero start there; the old buffer is kept for recorded graphs
    // or waited for before it goes.
    Buffer& zeroedScratch(Buffer& b, size_t bytes);
    // The page table's block ids on the device (a scratch slot; valid until the next page-table upload).
    const int32_t* devicePages(const PageTable& pages) { return uploadInts(kScratchPages, pages.blocks, pages.numBlocks); }
    // A batched call's T queries on the device (one upload to kScratchPages): query t of sequence s sits at
    // position qPos[t] = pos0_s + (t − its first row), its sequence's page table at blocks + qTable[t], qBlocks[t]
    // entries long (the sequences' tables concatenated in `blocks`). Valid until the next page-table upload.
    struct DeviceQueries {
        const int32_t* qPos = nullptr;
        const int32_t* qTable = nullptr;
        const int32_t* qBlocks = nullptr;
        const int32_t* blocks = nullptr;
    };
    DeviceQueries deviceQueries(const SeqRows* seqs, int64_t nSeqs, int64_t T);

private:
    // cuda_moe.cu: the router's two launches, writing idx [T, topk] / weight [T, topk] in device memory.
    void routeOnDevice(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E, int64_t topk,
                       int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling, int32_t* dIdx, float* dWeight);
    // cuda_exl3.cu: y[T, p.outFeatures()] = x[T, p.inFeatures()] · Wᵀ for a packed EXL3 linear (called by
    // linear() in cuda_math.cu for w.packed).
    void exl3Linear(const Buffer& x, int64_t T, const PackedLinear& p, const Buffer& y);
    // cuda_gemv_tc.cu: y[T, N] = x[T, K] · Wᵀ on the tensor cores for BF16 W, T ≥ 1, K % 8 == 0, x 16-byte aligned
    // (cuda_math.cu's GEMV modes 3 and 4 at T ≤ 8 and GEMM modes above; pdl: launched with programmatic dependent
    // launch).
    void gemvTensorCores(const float* x, const void* W, float* y, int64_t T, int64_t N, int64_t K, bool pdl);
    // cuda_exl3_prefill.cu: EXL3 at prefill sizes (false: not taken — too few rows, a K without a kernel there,
    // TS_EXL3_PREFILL=0, or a graph being captured; the caller runs cuda_exl3.cu's path). exl3PrefillMoe gets
    // moeExpertsFused's routing: byExpert (flat choices grouped by ascending expert) and first [E + 1].
    bool exl3PrefillLinear(const Buffer& x, int64_t T, const PackedLinear& p, const Buffer& y);
    bool exl3PrefillMoe(const Buffer& x, int64_t T, int64_t D, int64_t I, const int32_t* byExpert, const int32_t* first,
                        int64_t E, int64_t topk, const float* hostWeight, const WeightView* gate, const WeightView* up,
                        const WeightView* down, float limit, const Buffer& y);
    void exl3PfTransform(const std::vector<exl3cuda::PfRow>& rows, int64_t k, int64_t kIn, void* planes,
                         int64_t loOffset, int* e, int64_t ld = 0);  // ld: hi row stride in elements (0: k)
    // cuda_exl3_dequant.cu: a prefill-sized linear's GEMM on cuBLAS over its weights dequantised once per call
    // (false: not taken — fewer rows than prefillCublasRows(), the dequantised copy over its scratch budget, or a
    // row too wide for the transform; the caller runs the prefill GEMM kernel).
    bool exl3PrefillLinearCublas(const Buffer& x, int64_t T, const DeviceTrellis& d, int64_t in, int64_t out,
                                 const Buffer& y);
    void exl3PfGemm(const std::vector<exl3cuda::PfJobHost>& jobs, int bits, int codebook, int64_t k, int64_t n, int64_t nOut,
                    int64_t loOffset);
    bool capturingNow() const;  // cuda_graph.cu: a graph segment is being captured
    // cuda_gemm_pieces.cu: the same product on cuBLAS, x as three exact bf16 pieces (BF16 W, K % 8 == 0, x 16-byte
    // aligned; the GEMM modes of prefill-sized steps). Uses the kScratchGemm slot.
    void gemmCublasPieces(const float* x, const void* W, float* y, int64_t T, int64_t N, int64_t K);
    Buffer m_gemvPart, m_gemvCounters;  // its cross-block split-K partials and arrival counters (zero between calls)
    // cuda_exl3.cu: the EXL3 state (created on first use).
    Exl3Cache& exl3Cache();
    std::shared_ptr<Exl3Cache> m_exl3;
    // cuda_moe_dense.cu: moeExpertsFusedDevice for dense (BF16 / F16 / F32) experts; false when it declines
    // (not a decode-sized step, mixed dtypes or shapes, device routing switched off). Its per-layer tables
    // of the experts' device copies, keyed by the first gate's and last down's host data and the shapes.
    bool denseExpertsRouted(const Buffer& x, int64_t T, int64_t D, int64_t I, const Buffer& idx, const Buffer& weight,
                            int64_t topk, const WeightView* gate, const WeightView* up, const WeightView* down,
                            int64_t E, float limit, const Buffer& y);
    struct DenseMoeLayer;
    using DenseKey = std::tuple<const void*, const void*, int64_t, int64_t, int64_t>;
    std::map<DenseKey, std::shared_ptr<DenseMoeLayer>> m_denseMoe;

    int m_device = 0;
    cudaStream_t m_stream = nullptr;
    cudaStream_t m_side = nullptr;  // forkSide()
    cudaEvent_t m_sideFork = nullptr, m_sideJoin = nullptr;
    bool m_sidePending = false;  // side work issued and not yet joined
    // cuda_aside.cu. While an aside is open (beginAside … endAside) m_stream is the side stream and the
    // resources below are swapped with the main stream's, so that a scratch slot, a split-K partial buffer or
    // an arrival counter is never shared by work of the two streams at once.
    struct AsideResources {
        std::vector<Buffer> scratch;
        Buffer gemvPart, gemvCounters, mhcCounters;
        std::shared_ptr<Exl3Cache> exl3;
    };
    void swapAsideResources();
    AsideResources m_aside;
    bool m_asideOpen = false;    // between beginAside and endAside (also in a replay, where nothing forks)
    bool m_asideForked = false;  // ... and the work is going to the side stream (not a replay)
    cudaStream_t m_asideMain = nullptr;  // the main stream while m_stream is the side one
    // Model-level allocations made inside an aside: kept until the main stream has joined the side work
    // (joinSide), so the pool never hands their memory to main-stream work while the side still uses it.
    std::vector<Buffer> m_asideHeld;
    cublasHandle_t m_cublas = nullptr;
    cudaDeviceProp m_props{};  // multiProcessorCount: the partition's SMs on one (openSmPartition)
    // cuda_partition.cu: the backend's streams in a green context of TS_CUDA_SMS SMs (a measurement of a smaller
    // GPU's SM count, e.g. a GB10's 48, on this one). Called from the constructor before any work is issued.
    void openSmPartition(int greatestPriority);
    void closeSmPartition();
    void* m_greenContext = nullptr;  // CUgreenCtx, or null on the whole device
    void* m_greenDestroy = nullptr;  // the driver's cuGreenCtxDestroy, looked up at open
    int m_partitionOf = 0;           // the device's whole SM count on a partition, else 0
    // cuda_partition.cu too: another GPU's per-SM limits (TS_CUDA_SM_LIMITS=gb10: shared memory, threads) on this
    // one's SMs — props() reports them, and launches are padded to them (cuda::limitedLaunchSmem).
    void openSmLimits();
    void closeSmLimits();
    bool m_smLimits = false;  // this backend set them (one per process)
    // Memory accounting (deviceMemory): whether the device shares the system's memory (cuda_memory.cu says
    // how that is decided) and its free bytes when this backend opened it, before any allocation of its own.
    bool m_unified = false;
    int64_t m_freeAtOpen = 0;
    int64_t m_ownSinceOpen = 0;  // bytes the constructor allocated after m_freeAtOpen was read
    void openMemoryAccounting();
    // Throws Unsupported, naming the device and the build's architectures, when this build has no kernels the
    // device can run (an 'a' target runs only on its own architecture): "auto" then falls back to the CPU.
    void checkKernelImage() const;
    // dst (device) ← host, through the upload ring; returns once the copy is complete (the caller may free host).
    void copyToDevice(void* dst, const void* host, size_t bytes);
    int64_t freeBytesNow(int64_t* totalBytes = nullptr) const;  // free bytes as deviceMemory counts them
    // upload()'s pinned two-slot ring (cuda_memory.cu), made on first use.
    struct UploadRing;
    struct UploadRingDeleter {
        void operator()(UploadRing* r) const;
    };
    std::unique_ptr<UploadRing, UploadRingDeleter> m_uploadRing;
    std::map<std::tuple<const void*, int64_t, int64_t, int>, Buffer> m_weights;
    struct TrellisEntry {
        Buffer mem;
        DeviceTrellis view;
    };
    std::unordered_map<const PackedLinear*, TrellisEntry> m_trellis;
    std::vector<Buffer> m_scratch;
    Buffer m_mhcCounters;  // cuda_mhc_kda.cu: the fused mhcPre's per-token arrival counters (zero between calls)
    std::shared_ptr<DevicePool> m_pool;

    // cuda_graph.cu
    struct GraphState;
    friend class GraphOp;
    std::unique_ptr<GraphState> m_graph;
    int m_opDepth = 0;  // > 0 inside an op: its allocations and calls are its own, not the model's
    void* m_cublasWorkspace = nullptr;  // fixed, so cuBLAS calls can be captured
    // A model-level allocation inside a graph region: from the region's arena once it is measured
    // (false: take it from the pool). Internal allocations of a captured op are kept with its graph.
    bool graphAlloc(size_t bytes, Buffer& out);
    void graphKeep(const Buffer& b);
    // A scratch buffer is being replaced: the graphs may hold its address, so it is kept until they are
    // dropped (returns true) instead of waiting for the stream (false: no graphs, the caller waits).
    bool graphRetire(Buffer& old);
    // Fails (ts::Error Internal) when `what` would wait for the GPU while a graph segment is captured.
    void checkNotCapturing(const char* what) const;
    void graphSegmentEnd();
    // Frees every graph and its memory. contextLost: after a sticky error nothing launched runs again and every
    // wait fails, so neither the wait for launched graphs nor the not-inside-a-region check applies.
    void dropGraphs(bool contextLost = false);
};

}  // namespace ts
