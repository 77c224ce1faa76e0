// Everything one sequence carries between forward steps: the KDA recurrent and conv states, the MLA
// latent cache and the indexer stores of each DSA layer. This is the per-sequence form used by the
// reference forward; the paged block pool of the runtime holds the same bytes in 64-token blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "backend.h"
#include "io/model_config.h"

namespace ts {

struct LayerState {
    // KDA layers
    Buffer recurrent;  // fp32 [H, Dk, Dv]
    Buffer conv;       // fp32 [K−1, 3·H·Dk], oldest first
    // DSA layers
    Buffer latent;      // [capacity, mlaCacheEntryBytes]
    Buffer idxTokens;   // fp32 [capacity, 2, Di]: raw indexer key and gate of each token
    Buffer idxPools;    // [capacity / kp, indexerKeyBytes]: pooled keys of complete pools
};

class SequenceState {
public:
    // `layers` = num_hidden_layers (+1 when an MTP block is used). With mtpOnly, only the last layer
    // (the MTP block's DSA layer) gets storage: the state of the MTP draft position stream.
    SequenceState(Backend& backend, const TextConfig& cfg, KvCacheDtype cacheDtype, int layers, bool mtpOnly = false);

    int64_t length() const { return m_length; }  // tokens already in the caches
    int64_t capacity() const { return m_capacity; }
    KvCacheDtype cacheDtype() const { return m_dtype; }
    // Grows the DSA caches (copying their contents) so that `tokens` fit.
    void reserve(int64_t tokens);
    void advance(int64_t tokens) { m_length += tokens; }
    LayerState& layer(int i) { return m_layers[size_t(i)]; }
    // Bytes held by this sequence's states and caches.
    size_t bytes() const;

private:
    Backend& m_backend;
    const TextConfig& m_cfg;
    KvCacheDtype m_dtype;
    std::vector<LayerState> m_layers;
    std::vector<bool> m_isDsa;
    int64_t m_length = 0;
    int64_t m_capacity = 0;
};

}  // namespace ts
