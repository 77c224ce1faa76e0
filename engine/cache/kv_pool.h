// The runtime's cache memory: one paged pool of 64-token blocks shared by all sequences (per DSA-MLA
// layer the fp8_ds_mla latents and the pooled indexer keys), a fixed number of state slots owned by
// running sequences (per KDA layer the fp32 recurrent state and conv tail; per full-indexer layer the
// incomplete pool's tail ring), and snapshot slots holding KDA states at block boundaries for prefix
// caching. Sizes are derived from the config; `KvMemory` is what the memory plan reports.
#pragma once

#include <cstdint>
#include <vector>

#include "backend.h"
#include "io/model_config.h"
#include "model/sequence_state.h"

namespace ts {

// Bytes of each kind of cache memory for a config (no allocation).
struct KvMemory {
    int64_t bytesPerToken = 0;     // paged pool: Σ DSA layers (latent entry + pooled key / kp)
    int64_t bytesPerStateSlot = 0; // one running sequence's KDA states + indexer tails
    int64_t bytesPerSnapshot = 0;  // KDA states at one block boundary
    int64_t latentBytesPerToken = 0;
    int64_t indexerBytesPerToken = 0;  // pooled keys, amortised per token (may round down to 0 for display)
    int dsaLayers = 0, kdaLayers = 0, indexerLayers = 0;
    static KvMemory of(const TextConfig& cfg, KvCacheDtype dtype, bool withMtp);
};

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
