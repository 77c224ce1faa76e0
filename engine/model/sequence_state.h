// The caches one sequence reads and writes in a forward step, and a self-contained owner of them for a
// single request (SequenceState). The runtime's paged pool (engine/cache) hands out the same LayerState
// views into its shared pool buffers; the model code cannot tell the two apart.
#pragma once

#include <cstdint>
#include <vector>

#include "backend.h"
#include "io/model_config.h"

namespace ts {

// Views of one layer's caches for one sequence. Unused members stay empty.
struct LayerState {
    // KDA layers: owned by the sequence (its state slot)
    Buffer recurrent;  // fp32 [H, Dk, Dv]
    Buffer conv;       // fp32 [K−1, 3·H·Dk], oldest first
    // DSA layers: the pool-wide paged buffers, addressed through the sequence's PageTable
    Buffer latent;     // [slots, mlaCacheEntryBytes]
    Buffer idxPools;   // [slots / kp, indexerKeyBytes] pooled indexer keys (full indexer layers)
    Buffer idxTail;    // fp32 [kp, 2, Di]: the sequence's incomplete pool (its state slot)
};

// Everything a step needs to address one sequence's caches.
struct SeqCaches {
    LayerState* layers = nullptr;  // indexed by layer; num_hidden_layers (+1: the MTP block) entries
    int numLayers = 0;
    PageTable pages;
    KvCacheDtype dtype = KvCacheDtype::Fp8;
};

// One request's caches in contiguous memory, with an identity page table; grows on demand. Used by the
// reference path (CLI logits/generate, tests) and for the MTP block's own position stream.
class SequenceState {
public:
    // `layers` = num_hidden_layers (+1 when an MTP block is used). With mtpOnly, only the last layer
    // (the MTP block's DSA layer) gets storage.
    SequenceState(Backend& backend, const TextConfig& cfg, KvCacheDtype cacheDtype, int layers, bool mtpOnly = false);

    int64_t length() const { return m_length; }  // tokens already in the caches
    int64_t capacity() const { return int64_t(m_blocks.size()) * m_blockSize; }
    KvCacheDtype cacheDtype() const { return m_dtype; }
    // Grows the DSA caches (copying their contents) so that `tokens` fit.
    void reserve(int64_t tokens);
    void advance(int64_t tokens) { m_length += tokens; }
    LayerState& layer(int i) { return m_layers[size_t(i)]; }
    SeqCaches caches();
    size_t bytes() const;  // bytes held by this sequence's states and caches

private:
    Backend& m_backend;
    const TextConfig& m_cfg;
    KvCacheDtype m_dtype;
    std::vector<LayerState> m_layers;
    std::vector<bool> m_isDsa;
    std::vector<int32_t> m_blocks;  // identity: block i is physical block i
    int64_t m_blockSize = 64;
    int64_t m_length = 0;
};

}  // namespace ts
