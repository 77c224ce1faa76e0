// The runtime's cache memory: one paged pool of 64-token blocks shared by all sequences (per DSA-MLA
// layer the fp8_ds_mla latents and the pooled indexer keys), a fixed number of state slots owned by
// running sequences (per KDA layer the fp32 recurrent state and conv tail; per full-indexer layer the
// incomplete pool's tail ring), and snapshot slots holding KDA states at block boundaries for prefix
// caching. Sizes are derived from the config; `KvMemory` is what the memory plan reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend.h"
#include "io/model_config.h"
#include "model/sequence_state.h"

namespace ts {

// Bytes of each kind of cache memory for a config (no allocation), on one tensor-parallel rank: the MLA
// latent and the indexer key are one shared "head" each, so every rank holds them whole; KDA heads are
// split across the ranks, so a rank holds 1/tp of every KDA state (tp must divide linear_num_heads).
struct KvMemory {
    int64_t bytesPerToken = 0;     // paged pool: Σ DSA layers (latent entry + pooled key / kp)
    int64_t bytesPerStateSlot = 0; // one running sequence's KDA states + indexer tails
    int64_t bytesPerSnapshot = 0;  // KDA states at one block boundary
    int64_t latentBytesPerToken = 0;
    int64_t indexerBytesPerToken = 0;  // pooled keys, amortised per token (may round down to 0 for display)
    int dsaLayers = 0, kdaLayers = 0, indexerLayers = 0;
    static KvMemory of(const TextConfig& cfg, KvCacheDtype dtype, bool withMtp, int32_t tp = 1);
};

// ---- What the recipe's vLLM reports for the same config ("GPU KV cache size: N tokens") -------------
// A model of vLLM's hybrid KV cache manager as the recipe deploys it for glm5_next (the glm5_next group
// builder of vLLM plus the recipe's DFlash2 drafter overlay), so that `twinspark-cli plan` can be held
// against the recipe's published numbers. Nothing here is allocated by TwinSpark; docs/PERFORMANCE.md
// ("KV pool plan") gives the sources and every term. In short, per rank:
//   KDA state page   = 3·(K−1+S)·(H·Dk/tp)·2 B (bf16 conv, widened by the S speculative tokens)
//                      + (H/tp)·Dk·Dk·4 B (fp32 recurrent state)
//   block (tokens)   = a·⌈state page / (a · MLA bytes per token)⌉, a = lcm(kernel block, 32·index_kpool):
//                      one attention page must hold one KDA state, which then rides in the MLA tensors
//   pool block bytes = #DSA·block·656 + #indexer·(block/kp)·132 [+ standalone drafter pages]
//   blocks           = ⌊available memory / pool block bytes⌋
//   per request      = ⌈L/block⌉ (MLA+indexer) + 1 (kpool tail) + ⌈#KDA/#DSA⌉·(2+S) (KDA groups)
//                      + ⌈min(W−1+in-flight tokens, L)/draft block⌉+1 (drafter sliding window)
//   reported tokens  = ⌊blocks · L / per request⌋   (vLLM: max_concurrency × max_model_len)
enum class VllmDrafterLayout : uint8_t {
    None,             // no draft model with a KV cache of its own
    Standalone,       // the overlay when the recipe logged 982,612 tokens: the drafter keeps its own small
                      // block and gets tensors of its own, charged in every pool block
    PaddedSlotShare,  // the overlay since: a 64-token drafter block padded to the MLA page, riding in the
                      // MLA tensors (no bytes of its own, only block ids)
};

struct VllmPlanInputs {
    int64_t availableBytes = 0;        // vLLM's "Available KV cache memory" on the binding rank
    int64_t maxModelLen = 900000;
    int64_t maxNumBatchedTokens = 1024;
    int32_t maxConcurrentBatches = 2;  // async scheduling keeps two batches in flight
    int32_t tp = 2;
    int32_t numSpeculativeTokens = 7;
    bool prefixCaching = true;         // KDA states kept at block boundaries ("align" mode)
    int32_t kernelBlock = 64;          // block of the sparse MLA kernels (FlashMLA / FlashInfer sparse)
    VllmDrafterLayout drafter = VllmDrafterLayout::Standalone;
    // The DFlash2 drafter (5 sliding-window layers, 8 KV heads of 128, bf16 KV, window 2048).
    int32_t draftLayers = 5;
    int32_t draftKvHeads = 8;
    int32_t draftHeadDim = 128;
    int32_t draftTp = 1;
    int64_t draftSlidingWindow = 2048;
    int32_t draftNativeBlock = 16;   // its attention backend's block, kept by the standalone layout
    int32_t draftCompactBlock = 64;  // the padded slot-share block
};

// One KV cache group: layers sharing a block table.
struct VllmGroup {
    std::string name;
    int32_t layers = 0;
    int64_t blockSize = 0;         // tokens per block id
    int64_t blocksPerRequest = 0;  // block ids one max_model_len request can hold at once
};

struct VllmKvPlan {
    int64_t mlaBytesPerToken = 0;      // fp8_ds_mla entry
    int64_t indexerBytesPerState = 0;  // fp8 key + fp32 scales, one per index_kpool tokens
    int64_t kdaConvBytes = 0, kdaRecurrentBytes = 0, kdaStatePageBytes = 0;  // per KDA layer, this rank
    int64_t alignment = 0;
    int64_t blockSize = 0;             // attention (and KDA) block, tokens
    int64_t mlaPageBytes = 0, indexerPageBytes = 0;
    int64_t draftBytesPerToken = 0, draftBlockSize = 0, draftPageBytes = 0;
    int64_t draftBytesPerBlock = 0;    // standalone drafter pages in each pool block (0 otherwise)
    int64_t bytesPerBlock = 0;
    int64_t numBlocks = 0;
    int32_t dsaLayers = 0, indexerLayers = 0, kdaLayers = 0, kdaGroups = 0;
    int64_t blocksPerRequest = 0;      // Σ groups
    double maxConcurrency = 0;         // numBlocks / blocksPerRequest
    int64_t tokens = 0;                // what vLLM logs as "GPU KV cache size"
    std::vector<VllmGroup> groups;
    static VllmKvPlan of(const TextConfig& cfg, const VllmPlanInputs& in);
};

// One KDA layer's state page on one rank, as vLLM sizes it (see above).
int64_t vllmKdaStatePageBytes(const TextConfig& cfg, int32_t tp, int32_t numSpeculativeTokens);
// The smallest multiple of `alignment` tokens whose attention page holds `statePageBytes`.
int64_t vllmHybridBlockSize(int64_t statePageBytes, int64_t attnBytesPerToken, int64_t alignment);

struct KvPoolConfig {
    int64_t numBlocks = 0;
    int64_t blockSize = 64;
    int32_t numStateSlots = 4;     // = MAX_NUM_SEQS
    int32_t numSnapshotSlots = 8;
    KvCacheDtype dtype = KvCacheDtype::Fp8;
    bool withMtp = false;          // the MTP block's DSA layer gets pool space too
};

class KvPool {
public:
    KvPool(Backend& backend, const TextConfig& cfg, const KvPoolConfig& pc);
    KvPool(const KvPool&) = delete;
    KvPool& operator=(const KvPool&) = delete;

    const KvPoolConfig& config() const { return m_pc; }
    // The caches of the sequence in `stateSlot` whose tokens live in `blockTable` (kept by reference:
    // it must outlive the step).
    SeqCaches caches(int32_t stateSlot, const std::vector<int32_t>& blockTable);
    // A sequence starting at position 0: zero KDA states and tails.
    void resetSlot(int32_t stateSlot);
    void saveSnapshot(int32_t stateSlot, int32_t snapshot);
    void restoreSnapshot(int32_t snapshot, int32_t stateSlot);
    size_t bytes() const { return m_bytes; }

private:
    void copyKdaStates(const std::vector<LayerState>& from, std::vector<LayerState>& to);  // recurrent + conv

    Backend& m_backend;
    const TextConfig& m_cfg;
    KvPoolConfig m_pc;
    int m_layers = 0;
    std::vector<std::vector<LayerState>> m_slotViews;  // [slot][layer]
    std::vector<std::vector<LayerState>> m_snapshots;  // [snapshot][layer]: recurrent + conv only
    size_t m_bytes = 0;
};

}  // namespace ts
