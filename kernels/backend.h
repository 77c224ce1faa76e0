// The op interface every compute backend implements (CPU: kernels/cpu, the reference and the truth;
// CUDA: kernels/cuda, later). The model (engine/model) is written once against this interface.
//
// Conventions
// - Activations are fp32, row-major, in memory the backend owns (Buffer). T = tokens in the step.
// - Weights are views (WeightView) of checkpoint memory: [rows = out_features, cols = in_features]
//   row-major, BF16 / F16 / F32; every op accumulates in fp32.
// - Small per-channel parameters (norm weights, biases, gates) are uploaded once as fp32 Buffers.
// - No op keeps a pointer after it returns; caches are plain buffers passed in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ts {

// The packed form of an EXL3 linear, as a device backend reads it (engine/quant/exl3_format.h has the
// format): trellis I16 [k/16, n/16, 16·K] little-endian (host memory, maybe unaligned), suh fp32 [k],
// svh fp32 [n], bias fp32 [n] or null. k, n are the 128-padded dims; y = (H(x·suh) · W̃) then H and ·svh.
struct TrellisView {
    int64_t k = 0;           // padded in_features
    int64_t n = 0;           // padded out_features
    int bits = 0;            // K, 1..8
    uint8_t codebook = 0;    // 0 = 3inst, 1 = mcg, 2 = mul1 (exllamav3's `cb`)
    const uint8_t* trellis = nullptr;
    const float* suh = nullptr;
    const float* svh = nullptr;
    const float* bias = nullptr;
    size_t trellisBytes() const { return size_t(k) * size_t(n) * size_t(bits) / 8; }
};

// A linear layer whose weights stay packed in a quantized format (EXL3): the backend asks it to compute
// y[T, out] = x[T, in] · Wᵀ from the packed form; the weights are never expanded. Implementations live
// with their format (engine/quant). Host backends call forwardHost; device backends read trellis() and
// run their own kernels over an uploaded copy.
class PackedLinear {
public:
    virtual ~PackedLinear() = default;
    virtual int64_t inFeatures() const = 0;
    virtual int64_t outFeatures() const = 0;
    virtual size_t packedBytes() const = 0;
    // Host memory: x [T, inFeatures], y [T, outFeatures].
    virtual void forwardHost(const float* x, int64_t T, float* y) const = 0;
    // The packed EXL3 form (valid while the PackedLinear lives), or nullptr for another format.
    virtual const TrellisView* trellis() const { return nullptr; }
};

// A weight matrix [rows, cols] inside (mapped) checkpoint memory (the pointer may be unaligned), or a
// packed linear of the same logical shape (only `Backend::linear` accepts those).
struct WeightView {
    DType dtype = DType::F32;
    const void* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;
    const PackedLinear* packed = nullptr;
    // Rows [first, first + count) of this matrix, as a view.
    WeightView rowSlice(int64_t first, int64_t count) const;
    // The view of a packed linear: [outFeatures, inFeatures].
    static WeightView of(const PackedLinear& p) {
        WeightView v;
        v.packed = &p;
        v.rows = p.outFeatures();
        v.cols = p.inFeatures();
        return v;
    }
};

// Backend-owned memory. For the CPU backend it is host memory; a CUDA backend returns device memory.
class Buffer {
public:
    Buffer() = default;
    Buffer(std::shared_ptr<void> mem, size_t bytes) : m_mem(std::move(mem)), m_bytes(bytes) {}
    float* f32() const { return static_cast<float*>(m_mem.get()); }
    uint8_t* bytes() const { return static_cast<uint8_t*>(m_mem.get()); }
    int32_t* i32() const { return static_cast<int32_t*>(m_mem.get()); }
    size_t size() const { return m_bytes; }
    bool empty() const { return !m_mem; }
    // An aliasing view of [offset, offset + bytes) that keeps the whole allocation alive.
    Buffer view(size_t offset, size_t bytes) const;
    Buffer viewF32(size_t firstFloat, size_t count) const { return view(firstFloat * 4, count * 4); }

private:
    std::shared_ptr<void> m_mem;
    size_t m_bytes = 0;
};

// Layout of the per-token MLA latent cache entry.
// fp8 (`fp8_ds_mla`, the recipe's): [R fp8 e4m3 | ceil(R/128) fp32 tile scales | 64 bf16 zero k_pe]
//   = 656 bytes for R = 512. The zero k_pe is kept so the layout is the one FlashMLA-style sparse kernels
//   read; NoPE makes it exactly zero. fp32 (exact, for comparisons): R floats.
enum class KvCacheDtype : uint8_t { Fp8, Fp32 };
size_t mlaCacheEntryBytes(KvCacheDtype dtype, int64_t latentDim);
// Bytes of one pooled indexer key: fp8 = D e4m3 + 1 fp32 scale (power-of-two "ue8m0", as vLLM's indexer
// cache); fp32 = D floats.
size_t indexerKeyBytes(KvCacheDtype dtype, int64_t dim);

// mHC parameters of one hyper-connection site (fn [2n+n², n·D], base [2n+n²], scale [3]).
struct HyperConnParams {
    WeightView fn;
    Buffer base;   // fp32 [2n+n²]
    Buffer scale;  // fp32 [3]
    int n = 1;
    int sinkhornIters = 1;
    float hcEps = 1e-6f;
    float normEps = 1e-5f;
};

// A device backend's memory, in bytes (Backend::deviceMemory). On a GPU that shares the system's memory
// (`unified`: an integrated GPU, the GB10 of a DGX Spark) total is the device's figure and free the system's
// MemAvailable (core/host_memory.h says why not cudaMemGetInfo's free there).
struct DeviceMemory {
    int64_t totalBytes = 0;
    int64_t freeBytes = 0;        // now
    int64_t freeAtOpenBytes = 0;  // when the backend opened the device, before anything of its own
    bool unified = false;
};

// Where one sequence's tokens live in a paged cache: token at logical position p is in physical slot
// blocks[p / blockSize] · blockSize + p % blockSize. Host memory (the block table is tiny).
struct PageTable {
    const int32_t* blocks = nullptr;
    int64_t numBlocks = 0;
    int64_t blockSize = 64;
    int64_t slot(int64_t pos) const { return int64_t(blocks[pos / blockSize]) * blockSize + pos % blockSize; }
    int64_t capacity() const { return numBlocks * blockSize; }
};

// One sequence's share of a batched call (mlaCacheWriteBatch, mlaSparseAttentionBatch, indexerSelectBatch): its
// `rows` rows follow the previous sequence's rows in the call's buffers, at logical positions [pos0, pos0 + rows)
// of its pages.
struct SeqRows {
    PageTable pages;
    int64_t pos0 = 0;
    int64_t rows = 0;
};
// The rows of a batched call (Σ rows), each sequence checked first: rows and pos0 ≥ 0, and with oneBlockSize every
// page table's block size equal to the first's and positive (the kernels that read one block size for the call).
// `op` names the op in the error (backend_batch.cpp).
int64_t seqRowsTotal(const SeqRows* seqs, int64_t nSeqs, const char* op, bool oneBlockSize = false);

// Top-k pool selection of one query, produced by indexerSelect.
struct IndexerStats {
    int64_t tiedQueries = 0;  // queries where the K-th and (K+1)-th best candidate scores are equal
    int64_t firstTiedQuery = -1;  // index (within the step) of the first such query, -1 if none
    // Optional (tests, diagnostics): when sized to the step's T by the caller, each full indexer layer
    // folds the pools it selected for query t into selectionHash[t] (and the model folds in each MoE
    // layer's chosen experts), so two runs can be compared for the first token whose discrete
    // decisions (sparse set, expert routing) differ.
    std::vector<uint64_t> selectionHash;
};

// Token sampling on the backend (Backend::sampleRows). The semantics are the host sampler's
// (engine/runtime/sampler.h, which builds these requests): a backend must return the token the host
// sampler returns for the same logits and the same uniform number, or hand the row back (status).
//
// One logit adjustment of a row, applied in this order: mask (-inf: a stop / eos id held back by
// min_tokens), then the repetition penalty (flag kAdjustRepeat: seen in prompt or output; positive logits
// divided by it, others multiplied), then `subtract` (frequency · output count + presence, rounded on the
// host by the sampler's own expression, so the device needs no multiply-add that a compiler could fuse).
struct SampleLogitAdjust {
    static constexpr uint32_t kAdjustMask = 1;
    static constexpr uint32_t kAdjustRepeat = 2;
    int32_t token = 0;     // in [0, V); strictly ascending within a request
    uint32_t flags = 0;    // kAdjustMask | kAdjustRepeat
    float subtract = 0.0f; // 0 when the token has no output count or the penalties are off
};

// One row to sample: parameters already validated (validateSamplingParams).
struct DeviceSampleRequest {
    double uniform = 0.0;        // the row's one draw of SamplerRng::uniform(), in [0, 1); unused when greedy
    double logMinP = 0.0;        // std::log(double(min_p)) taken on the host (the host sampler's libm value);
                                 // -inf = min_p off
    int64_t row = 0;             // the row of `logits` this request samples
    const SampleLogitAdjust* adjust = nullptr;  // host memory, numAdjust entries, read during the call
    int32_t numAdjust = 0;
    int32_t topK = 0;            // <= 0: off
    int32_t logprobs = -1;       // -1: none; N >= 0: the sampled token's raw logprob and the N best raw tokens
    float temperature = 1.0f;    // < 1e-5: greedy (argmax, ties to the lowest id)
    float topP = 1.0f;           // (0, 1]
    float repetitionPenalty = 1.0f;
};

constexpr int32_t kMaxSampleTop = 20;  // = the runtime's kMaxLogprobs (static_assert in runtime/sampler.cpp)

// What comes back per row: a few bytes, never the logits.
struct SampleOutput {
    enum Status : int32_t {
        kOk = 0,
        kNonFinite = 1,  // a NaN or +inf logit: the host sampler raises the numerical error for this row
        kAllMasked = 2,  // every token is -inf after masking: likewise
        kAmbiguous = 3,  // a top_p / inverse-CDF comparison fell within the rounding bound between this
                         // backend's sums and the host's: the host decides (it holds the reference order)
    };
    int32_t token = -1;
    int32_t status = kOk;
    float logprob = 0.0f;        // raw log_softmax of the token (logprobs >= 0)
    int32_t numTop = 0;          // min(logprobs, V) when logprobs > 0
    int32_t topIds[kMaxSampleTop] = {};       // best first, ties: lower id first
    float topLogprobs[kMaxSampleTop] = {};
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;

    // Memory ------------------------------------------------------------------------------------------
    virtual Buffer alloc(size_t bytes) = 0;  // zero-filled
    // Contents unspecified: for an output that the op writing it first overwrites completely (every
    // element), where alloc()'s zero fill would be pure overhead (on CUDA a memset launch per buffer,
    // dozens per decode step). Never for a buffer that is accumulated into (add, scatterAddRows,
    // moeExpertsFused), read before it is written, or written only in part. The CPU backend fills it
    // with quiet NaN (0x7fc00000 per float, 0xFF for trailing bytes), so code that relies on zeros here
    // fails the CPU tests loudly instead of passing by luck. The default is alloc(): always correct.
    virtual Buffer allocUninit(size_t bytes) { return alloc(bytes); }
    // Makes a weight resident now (device backends upload it; host backends read it in place), so that
    // memory is accounted before the KV pool is sized and the first request pays no upload.
    virtual void preloadWeight(const WeightView& /*w*/) {}
    // Forgets every weight upload (device backends cache them by host pointer): called when a model's
    // weights go away and when a self-test run ends, so later weights at the same addresses never read
    // stale copies.
    virtual void releaseWeights() {}
    virtual Buffer upload(const void* host, size_t bytes) = 0;
    virtual void download(const Buffer& src, void* host, size_t bytes, size_t offset = 0) = 0;
    virtual void copy(const Buffer& src, size_t srcOffset, const Buffer& dst, size_t dstOffset, size_t bytes) = 0;

    // Dense math --------------------------------------------------------------------------------------
    // out[T, D] = table[ids[t]]  (ids host-side int32; validated by the caller)
    virtual void embedding(const int32_t* ids, int64_t T, const WeightView& table, const Buffer& out) = 0;
    // y[T, rows] = x[T, cols] · Wᵀ
    virtual void linear(const Buffer& x, int64_t T, const WeightView& w, const Buffer& y) = 0;
    // y = x · rsqrt(mean(x²) + eps) · w over rows of D (w may be empty = unweighted). In place allowed.
    virtual void rmsnorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, float eps, const Buffer& y) = 0;
    // LayerNorm with weight and bias over rows of D.
    virtual void layernorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, const Buffer& b, float eps,
                           const Buffer& y) = 0;
    // out[T, I] = silu(min(gate, lim)) · clamp(up, −lim, lim); lim <= 0 disables clamping.
    virtual void swiglu(const Buffer& gate, const Buffer& up, int64_t T, int64_t I, float limit,
                        const Buffer& out) = 0;
    // y[i] += x[i] over n floats
    virtual void add(const Buffer& x, const Buffer& y, int64_t n) = 0;
    // x[i] *= s over n floats
    virtual void scale(const Buffer& x, int64_t n, float s) = 0;
    virtual void zero(const Buffer& x) = 0;
    // out[T, Σw] = [parts[0][T, w0] | parts[1][T, w1] | ...]
    virtual void concatColumns(const Buffer* parts, const int64_t* widths, int count, int64_t T,
                               const Buffer& out) = 0;
    // dst[t, i, :] = src[t, :] for i < n: src [T, D] → dst [T, n, D] (the embedding broadcast to the n
    // mHC streams, one op instead of T·n copies). Writes every element of dst; src and dst must not overlap.
    virtual void repeatRows(const Buffer& src, int64_t T, int64_t D, int n, const Buffer& dst) = 0;

    // mHC ---------------------------------------------------------------------------------------------
    // streams [T, n, D] → x [T, D] (pre-weighted collapse), post [T, n], comb [T, n, n] (Sinkhorn).
    virtual void mhcPre(const Buffer& streams, int64_t T, int64_t D, const HyperConnParams& p, const Buffer& x,
                        const Buffer& post, const Buffer& comb) = 0;
    // streams[t, i] = post[t, i] · y[t] + Σ_j comb[t, j, i] · streams[t, j]   (in place)
    virtual void mhcPost(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& y, const Buffer& post,
                         const Buffer& comb) = 0;
    // out[T, D] = mean over the n streams
    virtual void mhcHead(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& out) = 0;

    // KDA (linear attention) ----------------------------------------------------------------------------
    // Causal depthwise conv over channels C with kernel K, then SiLU. convState [K−1, C] holds the
    // previous inputs (oldest first) and is updated. w: fp32 [C, K], w[c, K−1] multiplies the current token.
    virtual void causalConvSilu(const Buffer& x, int64_t T, int64_t C, int K, const Buffer& w,
                                const Buffer& convState, const Buffer& out) = 0;
    // g[T, H·Dk] = lower · sigmoid(exp(A_log[h]) · (f[T, H·Dk] + dtBias)) in place on f.
    virtual void kdaGate(const Buffer& f, int64_t T, int64_t H, int64_t Dk, const Buffer& aLog,
                         const Buffer& dtBias, float lowerBound) = 0;
    // Gated delta rule, token by token, fp32 state S [H, Dk, Dv]. q, k L2-normalised (eps 1e-6) here;
    // q scaled by Dk^-1/2; beta = sigmoid(betaLogits[T, H]). qkv: [T, 3, H, Dk] (conv output); out [T, H, Dv].
    virtual void kdaRecurrent(const Buffer& qkv, int64_t T, int64_t H, int64_t Dk, const Buffer& g,
                              const Buffer& betaLogits, const Buffer& state, const Buffer& out) = 0;
    // Batched forms of causalConvSilu and kdaRecurrent: the step's sequences in one call, sequence s with its own
    // state (convStates[s] / states[s]) and rows[s] rows following the previous sequence's (T = Σ rows). Each
    // computes exactly what the per-sequence op computes on each sequence's rows — the default implementation
    // (backend_batch.cpp) is that loop; the CUDA backend runs decode-sized steps (every sequence < 16 rows) as one
    // launch sequence. x / out must not overlap here.
    virtual void causalConvSiluBatch(const Buffer& x, const int64_t* rows, int64_t nSeqs, int64_t C, int K,
                                     const Buffer& w, const Buffer* convStates, const Buffer& out);
    virtual void kdaRecurrentBatch(const Buffer& qkv, const int64_t* rows, int64_t nSeqs, int64_t H, int64_t Dk,
                                   const Buffer& g, const Buffer& betaLogits, const Buffer* states, const Buffer& out);
    // o[T, H, Dv] ← rmsnorm(o, w[Dv], eps) · sigmoid(gate[T, H, Dv])  (in place)
    virtual void gatedRmsnorm(const Buffer& o, int64_t T, int64_t H, int64_t Dv, const Buffer& w, float eps,
                              const Buffer& gate) = 0;

    // DSA-MLA -----------------------------------------------------------------------------------------
    // Write T latent rows c[T, R] of one sequence at logical positions [pos0, pos0 + T) of its pages.
    // cache: [slots, mlaCacheEntryBytes] for the whole pool.
    virtual void mlaCacheWrite(const Buffer& c, int64_t T, int64_t R, KvCacheDtype dt, const Buffer& cache,
                               const PageTable& pages, int64_t pos0) = 0;
    // q_lat[T, H, R] = W_UKᵀ q_nope ; kvb = kv_b_proj [H·(dn+dv), R], q rows [T, H·dn].
    virtual void mlaAbsorbQ(const Buffer& q, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                            const Buffer& qLat) = 0;
    // Sparse attention in the absorbed form over the cached latents of the selected logical positions of
    // each query: idx [T, width] int32 (−1 = unused), oLat[T, H, R] = Σ softmax(scale · q_lat·c) c.
    virtual void mlaSparseAttention(const Buffer& qLat, int64_t T, int64_t H, int64_t R, const Buffer& cache,
                                    KvCacheDtype dt, const PageTable& pages, const Buffer& idx, int64_t width,
                                    float scale, const Buffer& oLat) = 0;
    // o[T, H·dv] = W_UV o_lat
    virtual void mlaUpV(const Buffer& oLat, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                        const Buffer& o) = 0;

    // k-pool lightning indexer -------------------------------------------------------------------------
    // Append the per-token indexer key k[T, D] and gate logits gate[T, D] of one sequence at positions
    // [pos0, pos0+T) to its tail ring (tail [kp, 2, D] fp32: the incomplete pool's raw k and gate, rounded
    // through bf16 in fp8 mode), and build the pooled key of every pool that completes,
    // key[c] = Σ_m softmax_m(gate[m,c] + ape[m,c]) · k[m,c], into its paged slot: pool j of the sequence
    // lives at pool slot pages.slot(j·kp) / kp of poolStore [slots / kp, indexerKeyBytes].
    virtual void indexerCacheWrite(const Buffer& k, const Buffer& gate, int64_t T, int64_t D, int64_t kp,
                                   const Buffer& ape, KvCacheDtype dt, const Buffer& tail, const Buffer& poolStore,
                                   const PageTable& pages, int64_t pos0) = 0;
    // For each query t (absolute position pos0 + t): score every complete pool j with last token ≤ the
    // query, score = Σ_h w[t,h] · relu(D^-1/2 · q[t,h]·key_j) (w already scaled by H^-1/2), pick the top
    // min(topk/kp, #candidates) (ties: earliest pool first), expand to tokens, then append the query's own
    // incomplete-pool tail. idx [T, width] int32, −1 padded; width = topk + kp − 1.
    virtual void indexerSelect(const Buffer& q, const Buffer& w, int64_t T, int64_t H, int64_t D, int64_t kp,
                               int64_t topk, KvCacheDtype dt, const Buffer& poolStore, const PageTable& pages,
                               int64_t pos0, const Buffer& idx, IndexerStats* stats) = 0;

    // Batched forms of the ops above that address a paged cache: the sequences of one step that share the
    // cache (the runtime's pool) in one call, their rows in sequence order (T = Σ rows; idx [T, width]). Each
    // computes exactly what the per-sequence op computes on each sequence's rows — the default implementation
    // (backend_batch.cpp) is that loop; a backend overrides it where one launch over every query is faster
    // (CUDA: decode at batch > 1 pays each per-sequence call's latency once instead of once per sequence).
    // stats: nSeqs pointers, each null or the sequence's IndexerStats (selectionHash sized to its rows or empty).
    virtual void mlaCacheWriteBatch(const Buffer& c, const SeqRows* seqs, int64_t nSeqs, int64_t R, KvCacheDtype dt,
                                    const Buffer& cache);
    virtual void mlaSparseAttentionBatch(const Buffer& qLat, const SeqRows* seqs, int64_t nSeqs, int64_t H, int64_t R,
                                         const Buffer& cache, KvCacheDtype dt, const Buffer& idx, int64_t width,
                                         float scale, const Buffer& oLat);
    virtual void indexerSelectBatch(const Buffer& q, const Buffer& w, const SeqRows* seqs, int64_t nSeqs, int64_t H,
                                    int64_t D, int64_t kp, int64_t topk, KvCacheDtype dt, const Buffer& poolStore,
                                    const Buffer& idx, IndexerStats* const* stats);
    // indexerCacheWrite's batched form: sequence s's rows of k / gate [T, D] follow the previous sequence's, its
    // own tail ring tails[s] (nSeqs distinct buffers), one pool store for all.
    virtual void indexerCacheWriteBatch(const Buffer& k, const Buffer& gate, const SeqRows* seqs, int64_t nSeqs,
                                        int64_t D, int64_t kp, const Buffer& ape, KvCacheDtype dt, const Buffer* tails,
                                        const Buffer& poolStore);

    // MoE ---------------------------------------------------------------------------------------------
    // Router: logits = x·Wᵀ (fp32), s = sigmoid, choice = s + bias, group-limited top-k of choice
    // (ties: lower expert id), weights = s[idx] normalised (if norm) × scaling. Host outputs.
    virtual void moeRoute(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E,
                          int64_t topk, int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling,
                          int32_t* hostIdx, float* hostWeight) = 0;
    // rows[n, D] = x[sel[i], :]
    virtual void gatherRows(const Buffer& x, int64_t D, const int32_t* hostSel, int64_t n, const Buffer& rows) = 0;
    // y[sel[i], :] += scale[i] · rows[i, :]
    virtual void scatterAddRows(const Buffer& rows, int64_t D, const int32_t* hostSel, const float* hostScale,
                                int64_t n, const Buffer& y) = 0;

    // Routed experts in one call (the fused EXL3 MoE): for every token t and each of its `topk` choices
    // j, y[t] += hostWeight[t, j] · down_e(swiglu(gate_e · x[t], up_e · x[t])) with e = hostIdx[t, j];
    // gate/up/down are arrays of E views ([I, D], [I, D], [D, I]). Returns false when this backend has
    // no fused path for these weights (the model then runs the per-expert loop of gatherRows / linear /
    // swiglu / linear / scatterAddRows, which computes the same sum).
    virtual bool moeExpertsFused(const Buffer& /*x*/, int64_t /*T*/, int64_t /*D*/, int64_t /*I*/,
                                 const int32_t* /*hostIdx*/, const float* /*hostWeight*/, int64_t /*topk*/,
                                 const WeightView* /*gate*/, const WeightView* /*up*/, const WeightView* /*down*/,
                                 int64_t /*E*/, float /*limit*/, const Buffer& /*y*/) {
        return false;
    }

    // The same two steps with the routing left on the backend, so a decode step needs no host round trip
    // per MoE layer. moeRouteDevice: moeRoute's result written to backend buffers idx [T, topk] int32 and
    // weight [T, topk] fp32 (bit-identical to moeRoute's host outputs). moeExpertsFusedDevice: the routed
    // experts of moeExpertsFused reading idx/weight from backend buffers (ids outside [0, E) are skipped,
    // as there), for packed or dense experts (the CUDA backend takes dense ones at decode sizes). Each returns
    // false when this backend has no such path for these weights or this step size (the CPU: never); the
    // caller then downloads idx/weight (or calls moeRoute) and goes on as before.
    virtual bool moeRouteDevice(const Buffer& /*x*/, int64_t /*T*/, const WeightView& /*gate*/,
                                const Buffer& /*bias*/, int64_t /*E*/, int64_t /*topk*/, int64_t /*nGroup*/,
                                int64_t /*topkGroup*/, bool /*normTopk*/, float /*scaling*/, const Buffer& /*idx*/,
                                const Buffer& /*weight*/) {
        return false;
    }
    virtual bool moeExpertsFusedDevice(const Buffer& /*x*/, int64_t /*T*/, int64_t /*D*/, int64_t /*I*/,
                                       const Buffer& /*idx*/, const Buffer& /*weight*/, int64_t /*topk*/,
                                       const WeightView* /*gate*/, const WeightView* /*up*/,
                                       const WeightView* /*down*/, int64_t /*E*/, float /*limit*/,
                                       const Buffer& /*y*/) {
        return false;
    }

    // Sampling --------------------------------------------------------------------------------------
    // Samples n rows of logits [*, V] (fp32, on this backend; reqs[i].row picks the row) and fills out[i]
    // (host memory) for each; waits for the result. Rows with status != kOk must be redone by the host
    // sampler on that row's logits. Returns false when this backend has no sampling path (the CPU: the
    // host sampler is the reference); the caller then downloads the rows and samples on the host.
    virtual bool sampleRows(const Buffer& /*logits*/, int64_t /*V*/, int64_t /*n*/,
                            const DeviceSampleRequest* /*reqs*/, SampleOutput* /*out*/) {
        return false;
    }

    // Decode-step graphs ------------------------------------------------------------------------------
    // The model brackets the part of a step that repeats: between beginGraphRegion(key) and
    // endGraphRegion(), every region with the same key issues the same ops, with the same shapes, weights
    // and activation buffers, in the same order, and the same sizes of backend allocations (alloc /
    // allocUninit at the model's level). What may change from one such region to the next is only
    //   (a) the inputs of the ops a backend keeps eager: host arrays (ids, page tables, expert choices),
    //       positions, per-sequence buffers (recurrent states, caches) and host outputs (downloads);
    //   (b) the contents of buffers.
    // A device backend runs the first region of a key eagerly and measures it, captures the runs of its
    // other ops between the eager ones as CUDA graphs the second time, and replays those graphs from the
    // third time on (the model's host code still runs; a captured op only checks that it matches the
    // recording and returns). Regions do not nest. A backend without graphs ignores all of this.
    // How a region ends: Completed, after its last op; Left, when the model takes a path whose ops follow the
    // data (the key's steps stay eager from then on); Failed, when an exception leaves the step (an op that
    // threw: out of memory, a fault) — nothing is wrong with the key then, so a measuring or capturing run
    // starts over at the key's next step and a replayed key keeps its graphs.
    enum class GraphRegionEnd { Completed, Left, Failed };
    virtual void beginGraphRegion(uint64_t /*key*/) {}
    virtual void endGraphRegion(GraphRegionEnd /*how*/) {}
    // On by default where supported (TS_CUDA_GRAPHS=0 turns it off at start); false = no graphs here.
    virtual bool setGraphsEnabled(bool /*on*/) { return false; }
    struct GraphStats {
        int64_t captures = 0;        // regions captured (one per key, again after an invalidation)
        int64_t replays = 0;         // regions replayed from graphs
        int64_t segmentLaunches = 0; // graph launches (captured runs of ops)
        int64_t eagerRegions = 0;    // regions run eagerly: measuring, or graphs off for the key
        int64_t invalidations = 0;   // times the recorded graphs were dropped (scratch grew, weights changed)
        int64_t retries = 0;         // captures an exception stopped, dropped to be measured and captured again
        int64_t failedRegions = 0;   // regions an exception stopped (GraphRegionEnd::Failed), in any stage
        int64_t stoppedMidSegment = 0;  // of those, replays stopped inside a graph: its later ops did not run
        int64_t lastSegments = 0;    // graphs per replayed region, last replay
        int64_t lastEagerOps = 0;    // eager ops between them, last replay
    };
    virtual GraphStats graphStats() const { return {}; }

    // Work beside the step ----------------------------------------------------------------------------
    // A run of ops whose results the next ops do not read (a MoE layer's shared expert, which needs only the
    // layer's input, beside the routing and the routed experts; a KDA layer's gates beside its q / k / v
    // projections) may be bracketed by beginAside() and
    // endAside(), and joinAside() then comes before the first op that reads those results. A device backend
    // may run the bracketed ops on a second stream, concurrently with the ops issued between endAside() and
    // joinAside(); results are the same bits (the same ops on the same inputs). The contract: the ops in
    // between write nothing the aside reads, and nothing inside the aside waits for the host (uploads,
    // downloads, routing to the host). beginAside() returns false where the ops simply run in order (the CPU;
    // a device backend outside a decode step by default) — then the caller issues them where it would
    // without an aside, and calls neither endAside() nor joinAside().
    virtual bool beginAside() { return false; }
    virtual void endAside() {}
    virtual void joinAside() {}

    // Output ------------------------------------------------------------------------------------------
    virtual void synchronize() {}
    // The backend's device memory (DeviceMemory below); false for host backends (their KV budget is
    // configured, not measured).
    virtual bool deviceMemory(DeviceMemory* /*out*/) const { return false; }
    // Takes the start again from a reading of free memory taken now: freeAtOpenBytes becomes freeNowBytes plus
    // what the backend allocated for itself when it opened (its handles and workspaces). The start-up check
    // (runtime/device_budget.h, checkStartupMemory) calls it when GPU_MEM_UTIL's share was not free at the open
    // but is now (a stopping process returned its memory), before the backend has allocated anything else.
    virtual void rebaseDeviceMemory(int64_t /*freeNowBytes*/) {}
    // The GPU's streaming multiprocessors this backend's work runs on, and the device's whole count: they differ
    // on an SM partition (TS_CUDA_SMS, kernels/cuda/cuda_partition.cu); {0, 0} for a host backend.
    struct ComputeUnits {
        int used = 0, device = 0;
    };
    virtual ComputeUnits computeUnits() const { return {}; }

    // Test hook, never called in normal operation (TS_FAULT_OP=<op>@<n>:trap, fault_backend.h): makes the device
    // meet a real sticky error — a kernel that traps — waits for it and throws what the backend makes of it (the
    // CUDA backend: ErrorKind::DeviceLost, through the same classification as any failed call), so the error
    // paths above it and the unload on a dead context run as after a real fault. False where there is no device
    // (host backends).
    virtual bool trapDevice() { return false; }
};

std::unique_ptr<Backend> makeCpuBackend();

// Backends by name: "cpu", "cuda", or "auto" (CUDA when this build has it and a device exists, else
// CPU). Throws ts::Error(InvalidArgument) for another name and Unsupported for "cuda" when the build
// has no CUDA backend or no device is visible. The returned backend's name() says which was chosen. With
// TS_FAULT_OP set (tests) it comes wrapped in a FaultBackend (fault_backend.h).
std::unique_ptr<Backend> makeBackend(const std::string& name);
// makeBackend's checks without opening a device (the same errors): for bad input found up front.
void checkBackendName(const std::string& name);
bool cudaBackendBuilt();
int cudaDeviceCount();  // 0 when not built or no device

}  // namespace ts
