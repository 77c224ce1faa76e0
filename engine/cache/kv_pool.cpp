#include "cache/kv_pool.h"

#include "core/error.h"

namespace ts {

namespace {
bool isDsaLayer(const TextConfig& c, int L) { return L >= c.num_hidden_layers || c.isDsa(L); }
bool hasIndexer(const TextConfig& c, int L) { return L >= c.num_hidden_layers || c.hasFullIndexer(L); }
}  // namespace

KvMemory KvMemory::of(const TextConfig& c, KvCacheDtype dtype, bool withMtp) {
    KvMemory m;
    const int layers = c.num_hidden_layers + (withMtp ? 1 : 0);
    const int64_t H = c.linear_num_heads, Dk = c.linear_head_dim, K = c.linear_conv_kernel_dim;
    const int64_t kp = c.index_kpool, Di = c.index_head_dim;
    const int64_t kdaState = H * Dk * Dk * 4 + (K - 1) * 3 * H * Dk * 4;
    int64_t indexerPerBlock64 = 0;  // pooled-key bytes per 64 tokens (exact, kp divides 64)
    for (int L = 0; L < layers; ++L) {
        if (!isDsaLayer(c, L)) {
            ++m.kdaLayers;
            m.bytesPerSnapshot += kdaState;
            m.bytesPerStateSlot += kdaState;
            continue;
        }
        ++m.dsaLayers;
        m.latentBytesPerToken += int64_t(mlaCacheEntryBytes(dtype, c.kv_lora_rank));
        if (hasIndexer(c, L)) {
            ++m.indexerLayers;
            indexerPerBlock64 += (64 / kp) * int64_t(indexerKeyBytes(dtype, Di));
            m.bytesPerStateSlot += kp * 2 * Di * 4;
        }
    }
    m.indexerBytesPerToken = indexerPerBlock64 / 64;
    m.bytesPerToken = m.latentBytesPerToken + (indexerPerBlock64 + 63) / 64;
    return m;
}

KvPool::KvPool(Backend& backend, const TextConfig& cfg, const KvPoolConfig& pc)
    : m_backend(backend), m_cfg(cfg), m_pc(pc), m_layers(cfg.num_hidden_layers + (pc.withMtp ? 1 : 0)) {
    if (pc.blockSize % cfg.index_kpool != 0)
        fail(ErrorKind::InvalidArgument, "block size " + std::to_string(pc.blockSize) +
                                             " is not a multiple of index_kpool " + std::to_string(cfg.index_kpool));
    if (pc.numBlocks < 1 || pc.numStateSlots < 1 || pc.numSnapshotSlots < 0)
        fail(ErrorKind::InvalidArgument, "KV pool needs at least one block and one state slot");
    const int64_t slots = pc.numBlocks * pc.blockSize, kp = cfg.index_kpool, Di = cfg.index_head_dim;
    const int64_t H = cfg.linear_num_heads, Dk = cfg.linear_head_dim, K = cfg.linear_conv_kernel_dim;
    auto alloc = [&](size_t bytes) {
        m_bytes += bytes;
        return backend.alloc(bytes);
    };
    // Pool-wide paged buffers per DSA layer, shared by every slot's views.
    std::vector<LayerState> shared(static_cast<size_t>(m_layers));
    for (int L = 0; L < m_layers; ++L) {
        if (!isDsaLayer(cfg, L)) continue;
        shared[size_t(L)].latent = alloc(size_t(slots) * mlaCacheEntryBytes(pc.dtype, cfg.kv_lora_rank));
        if (hasIndexer(cfg, L)) shared[size_t(L)].idxPools = alloc(size_t(slots / kp) * indexerKeyBytes(pc.dtype, Di));
    }
    m_slotViews.assign(size_t(pc.numStateSlots), shared);
    for (auto& views : m_slotViews)
        for (int L = 0; L < m_layers; ++L) {
            LayerState& ls = views[size_t(L)];
            if (!isDsaLayer(cfg, L)) {
                ls.recurrent = alloc(size_t(H * Dk * Dk) * 4);
                ls.conv = alloc(size_t((K - 1) * 3 * H * Dk) * 4);
            } else if (hasIndexer(cfg, L)) {
                ls.idxTail = alloc(size_t(kp * 2 * Di) * 4);
            }
        }
    m_snapshots.resize(size_t(pc.numSnapshotSlots));
    for (auto& snap : m_snapshots) {
        snap.resize(size_t(m_layers));
        for (int L = 0; L < m_layers; ++L)
            if (!isDsaLayer(cfg, L)) {
                snap[size_t(L)].recurrent = alloc(size_t(H * Dk * Dk) * 4);
                snap[size_t(L)].conv = alloc(size_t((K - 1) * 3 * H * Dk) * 4);
            }
    }
}

SeqCaches KvPool::caches(int32_t stateSlot, const std::vector<int32_t>& blockTable) {
    TS_CHECK(stateSlot >= 0 && stateSlot < m_pc.numStateSlots, "state slot out of range");
    for (int32_t b : blockTable) TS_CHECK(b >= 0 && b < m_pc.numBlocks, "block id out of range");
    SeqCaches c;
    c.layers = m_slotViews[size_t(stateSlot)].data();
    c.numLayers = m_layers;
    c.pages = PageTable{blockTable.data(), int64_t(blockTable.size()), m_pc.blockSize};
    c.dtype = m_pc.dtype;
    return c;
}

void KvPool::resetSlot(int32_t stateSlot) {
    TS_CHECK(stateSlot >= 0 && stateSlot < m_pc.numStateSlots, "state slot out of range");
    for (LayerState& ls : m_slotViews[size_t(stateSlot)]) {
        if (!ls.recurrent.empty()) m_backend.zero(ls.recurrent);
        if (!ls.conv.empty()) m_backend.zero(ls.conv);
        if (!ls.idxTail.empty()) m_backend.zero(ls.idxTail);
    }
}

void KvPool::saveSnapshot(int32_t stateSlot, int32_t snapshot) {
    TS_CHECK(stateSlot >= 0 && stateSlot < m_pc.numStateSlots, "state slot out of range");
    TS_CHECK(snapshot >= 0 && snapshot < m_pc.numSnapshotSlots, "snapshot slot out of range");
    copyKdaStates(m_slotViews[size_t(stateSlot)], m_snapshots[size_t(snapshot)]);
}

void KvPool::restoreSnapshot(int32_t snapshot, int32_t stateSlot) {
    TS_CHECK(stateSlot >= 0 && stateSlot < m_pc.numStateSlots, "state slot out of range");
    TS_CHECK(snapshot >= 0 && snapshot < m_pc.numSnapshotSlots, "snapshot slot out of range");
    resetSlot(stateSlot);  // tails are empty at a block boundary (the block size is a multiple of kp)
    copyKdaStates(m_snapshots[size_t(snapshot)], m_slotViews[size_t(stateSlot)]);
}

void KvPool::copyKdaStates(const std::vector<LayerState>& from, std::vector<LayerState>& to) {
    for (int L = 0; L < m_layers; ++L) {
        if (from[size_t(L)].recurrent.empty()) continue;  // DSA layers: nothing recurrent
        m_backend.copy(from[size_t(L)].recurrent, 0, to[size_t(L)].recurrent, 0, to[size_t(L)].recurrent.size());
        m_backend.copy(from[size_t(L)].conv, 0, to[size_t(L)].conv, 0, to[size_t(L)].conv.size());
    }
}

}  // namespace ts
