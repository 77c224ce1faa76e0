#include "model/sequence_state.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace ts {

SequenceState::SequenceState(Backend& backend, const TextConfig& cfg, KvCacheDtype cacheDtype, int layers,
                             bool mtpOnly)
    : m_backend(backend), m_cfg(cfg), m_dtype(cacheDtype), m_layers(size_t(layers)), m_isDsa(size_t(layers)) {
    const int64_t H = cfg.linear_num_heads, Dk = cfg.linear_head_dim, K = cfg.linear_conv_kernel_dim;
    const int64_t kp = cfg.index_kpool, Di = cfg.index_head_dim;
    // Blocks must hold whole pools; 64 tokens as the runtime's pool when index_kpool divides it.
    m_blockSize = 64 % kp == 0 ? 64 : kp * std::max<int64_t>(1, 64 / kp);
    for (int L = 0; L < layers; ++L) {
        const bool mtp = L >= cfg.num_hidden_layers;  // the MTP block: a DSA layer with a full indexer
        if (mtpOnly && !mtp) continue;
        m_isDsa[size_t(L)] = mtp || cfg.isDsa(L);
        LayerState& ls = m_layers[size_t(L)];
        if (!m_isDsa[size_t(L)]) {
            ls.recurrent = backend.alloc(size_t(H * Dk * Dk) * 4);
            ls.conv = backend.alloc(size_t((K - 1) * 3 * H * Dk) * 4);
        } else if (mtp || cfg.hasFullIndexer(L)) {
            ls.idxTail = backend.alloc(size_t(kp * 2 * Di) * 4);
        }
    }
    reserve(256);
}

void SequenceState::reserve(int64_t tokens) {
    if (tokens <= capacity()) return;
    const int64_t blocks = std::max<int64_t>((tokens + m_blockSize - 1) / m_blockSize, int64_t(m_blocks.size()) * 2);
    const int64_t slots = blocks * m_blockSize;
    const int64_t R = m_cfg.kv_lora_rank, Di = m_cfg.index_head_dim, kp = m_cfg.index_kpool;
    const size_t eb = mlaCacheEntryBytes(m_dtype, R), kb = indexerKeyBytes(m_dtype, Di);
    auto grow = [&](Buffer& b, size_t bytes) {
        Buffer nb = m_backend.alloc(bytes);
        if (!b.empty()) m_backend.copy(b, 0, nb, 0, b.size());
        b = nb;
    };
    for (size_t L = 0; L < m_layers.size(); ++L) {
        if (!m_isDsa[L]) continue;
        grow(m_layers[L].latent, size_t(slots) * eb);
        if (!m_layers[L].idxTail.empty()) grow(m_layers[L].idxPools, size_t(slots / kp) * kb);
    }
    m_blocks.resize(size_t(blocks));
    std::iota(m_blocks.begin(), m_blocks.end(), 0);
}

SeqCaches SequenceState::caches() {
    SeqCaches c;
    c.layers = m_layers.data();
    c.numLayers = int(m_layers.size());
    c.pages = PageTable{m_blocks.data(), int64_t(m_blocks.size()), m_blockSize};
    c.dtype = m_dtype;
    return c;
}

size_t SequenceState::bytes() const {
    size_t n = 0;
    for (const auto& l : m_layers)
        n += l.recurrent.size() + l.conv.size() + l.latent.size() + l.idxPools.size() + l.idxTail.size();
    return n;
}

}  // namespace ts
