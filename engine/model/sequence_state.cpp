#include "model/sequence_state.h"

#include <algorithm>

namespace ts {

SequenceState::SequenceState(Backend& backend, const TextConfig& cfg, KvCacheDtype cacheDtype, int layers,
                             bool mtpOnly)
    : m_backend(backend), m_cfg(cfg), m_dtype(cacheDtype), m_layers(size_t(layers)), m_isDsa(size_t(layers)) {
    const int64_t H = cfg.linear_num_heads, Dk = cfg.linear_head_dim, K = cfg.linear_conv_kernel_dim;
    for (int L = 0; L < layers; ++L) {
        m_isDsa[size_t(L)] = L >= cfg.num_hidden_layers || cfg.isDsa(L);  // the MTP block is a DSA layer
        if (mtpOnly && L < layers - 1) {
            m_isDsa[size_t(L)] = false;
            continue;
        }
        if (!m_isDsa[size_t(L)]) {
            m_layers[size_t(L)].recurrent = backend.alloc(size_t(H * Dk * Dk) * 4);
            m_layers[size_t(L)].conv = backend.alloc(size_t((K - 1) * 3 * H * Dk) * 4);
        }
    }
    reserve(256);
}

void SequenceState::reserve(int64_t tokens) {
    if (tokens <= m_capacity) return;
    const int64_t cap = std::max<int64_t>(tokens, m_capacity * 2);
    const int64_t R = m_cfg.kv_lora_rank, Di = m_cfg.index_head_dim, kp = m_cfg.index_kpool;
    const size_t eb = mlaCacheEntryBytes(m_dtype, R), kb = indexerKeyBytes(m_dtype, Di);
    auto grow = [&](Buffer& b, size_t bytes) {
        Buffer nb = m_backend.alloc(bytes);
        if (!b.empty()) m_backend.copy(b, 0, nb, 0, b.size());
        b = nb;
    };
    for (size_t L = 0; L < m_layers.size(); ++L) {
        if (!m_isDsa[L]) continue;
        grow(m_layers[L].latent, size_t(cap) * eb);
        grow(m_layers[L].idxTokens, size_t(cap) * size_t(2 * Di) * 4);
        grow(m_layers[L].idxPools, size_t(cap / kp + 1) * kb);
    }
    m_capacity = cap;
}

size_t SequenceState::bytes() const {
    size_t n = 0;
    for (const auto& l : m_layers)
        n += l.recurrent.size() + l.conv.size() + l.latent.size() + l.idxTokens.size() + l.idxPools.size();
    return n;
}

}  // namespace ts
