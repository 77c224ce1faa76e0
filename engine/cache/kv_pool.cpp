#include "cache/kv_pool.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace ts {

namespace {
bool isDsaLayer(const TextConfig& c, int L) { return L >= c.num_hidden_layers || c.isDsa(L); }
bool hasIndexer(const TextConfig& c, int L) { return L >= c.num_hidden_layers || c.hasFullIndexer(L); }
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void checkTp(const TextConfig& c, int32_t tp) {
    if (tp < 1 || c.linear_num_heads % tp != 0)
        fail(ErrorKind::InvalidArgument, "tensor parallel size " + std::to_string(tp) +
                                             " does not divide linear_num_heads " + std::to_string(c.linear_num_heads));
}
}  // namespace

KvMemory KvMemory::of(const TextConfig& c, KvCacheDtype dtype, bool withMtp, int32_t tp) {
    checkTp(c, tp);
    KvMemory m;
    const int layers = c.num_hidden_layers + (withMtp ? 1 : 0);
    // Per rank: this rank's share of the KDA heads.
    const int64_t H = c.linear_num_heads / tp, Dk = c.linear_head_dim, K = c.linear_conv_kernel_dim;
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

int64_t vllmKdaStatePageBytes(const TextConfig& c, int32_t tp, int32_t numSpeculativeTokens) {
    checkTp(c, tp);
    if (numSpeculativeTokens < 0) fail(ErrorKind::InvalidArgument, "negative number of speculative tokens");
    const int64_t H = c.linear_num_heads / tp, Dk = c.linear_head_dim, K = c.linear_conv_kernel_dim;
    // q, k and v each keep the last K−1 inputs of their causal conv, plus room for the draft tokens a
    // verify step may roll back over; stored in the model dtype (bf16).
    const int64_t conv = 3 * (K - 1 + numSpeculativeTokens) * H * Dk * 2;
    const int64_t recurrent = H * Dk * Dk * 4;  // always fp32
    return conv + recurrent;
}

int64_t vllmHybridBlockSize(int64_t statePageBytes, int64_t attnBytesPerToken, int64_t alignment) {
    if (statePageBytes < 0 || attnBytesPerToken < 1 || alignment < 1)
        fail(ErrorKind::InvalidArgument, "hybrid block size needs positive page sizes and alignment");
    return alignment * std::max<int64_t>(1, ceilDiv(statePageBytes, alignment * attnBytesPerToken));
}

VllmKvPlan VllmKvPlan::of(const TextConfig& c, const VllmPlanInputs& in) {
    if (in.availableBytes <= 0 || in.maxModelLen < 1 || in.maxNumBatchedTokens < 1 || in.maxConcurrentBatches < 1 ||
        in.kernelBlock < 1 || in.numSpeculativeTokens < 0 || c.index_kpool < 1)
        fail(ErrorKind::InvalidArgument, "vLLM plan: memory, lengths, block sizes and index_kpool must be positive");
    const bool drafter = in.drafter != VllmDrafterLayout::None;
    if (drafter && (in.draftLayers < 1 || in.draftKvHeads < 1 || in.draftHeadDim < 1 || in.draftTp < 1 ||
                    in.draftKvHeads % in.draftTp != 0 || in.draftSlidingWindow < 1 || in.draftNativeBlock < 1 ||
                    in.draftCompactBlock < 1))
        fail(ErrorKind::InvalidArgument, "vLLM plan: the drafter needs positive layers, heads, window and blocks, "
                                         "and its TP must divide its KV heads");
    VllmKvPlan p;
    for (int L = 0; L < c.num_hidden_layers; ++L) {
        if (!c.isDsa(L)) {
            ++p.kdaLayers;
            continue;
        }
        ++p.dsaLayers;
        if (c.hasFullIndexer(L)) ++p.indexerLayers;
    }
    // With DFlash2 the checkpoint's MTP block is not loaded, so it has no cache here.
    if (p.dsaLayers == 0) fail(ErrorKind::InvalidArgument, "vLLM plan: the glm5_next grouping needs a DSA layer");
    const int64_t S = in.numSpeculativeTokens, L = in.maxModelLen, kp = c.index_kpool;

    // Per-token and per-state entry sizes: fp8_ds_mla, and the indexer key as fp8 + one fp32 scale per
    // 128 values.
    p.mlaBytesPerToken = int64_t(mlaCacheEntryBytes(KvCacheDtype::Fp8, c.kv_lora_rank));
    p.indexerBytesPerState = c.index_head_dim + ceilDiv(c.index_head_dim, 128) * 4;

    // One block size for attention and KDA: an MLA page must hold a KDA state. The kpool indexer splits a
    // block into pool pages of 32 entries, so the block is also a multiple of 32·kp.
    p.kdaStatePageBytes = p.kdaLayers > 0 ? vllmKdaStatePageBytes(c, in.tp, in.numSpeculativeTokens) : 0;
    if (p.kdaLayers > 0) {
        const int64_t H = c.linear_num_heads / in.tp, Dk = c.linear_head_dim;
        p.kdaRecurrentBytes = H * Dk * Dk * 4;
        p.kdaConvBytes = p.kdaStatePageBytes - p.kdaRecurrentBytes;
    }
    p.alignment = std::lcm(int64_t(in.kernelBlock), 32 * kp);
    p.blockSize = vllmHybridBlockSize(p.kdaStatePageBytes, p.mlaBytesPerToken, p.alignment);
    p.mlaPageBytes = p.blockSize * p.mlaBytesPerToken;
    p.indexerPageBytes = p.blockSize / kp * p.indexerBytesPerState;

    // KDA layers are spread round-robin over as many groups as it takes for each group to have at most one
    // layer per MLA tensor (their padded pages share those tensors' bytes at other block ids).
    p.kdaGroups = p.kdaLayers > 0 ? int32_t(ceilDiv(p.kdaLayers, p.dsaLayers)) : 0;

    if (drafter) {
        p.draftBytesPerToken = int64_t(in.draftKvHeads / in.draftTp) * in.draftHeadDim * 2 /*K,V*/ * 2 /*bf16*/;
        if (in.drafter == VllmDrafterLayout::Standalone) {
            p.draftBlockSize = in.draftNativeBlock;
            p.draftPageBytes = p.draftBlockSize * p.draftBytesPerToken;
            p.draftBytesPerBlock = int64_t(in.draftLayers) * p.draftPageBytes;
        } else {
            if (in.draftLayers > p.dsaLayers)
                fail(ErrorKind::InvalidArgument, "vLLM plan: padded slot-share needs one MLA tensor per drafter layer");
            p.draftBlockSize = in.draftCompactBlock;
            p.draftPageBytes = p.mlaPageBytes;  // padded: it occupies an MLA page at its own block ids
        }
    }
    p.bytesPerBlock = int64_t(p.dsaLayers) * p.mlaPageBytes + int64_t(p.indexerLayers) * p.indexerPageBytes +
                      p.draftBytesPerBlock;
    p.numBlocks = in.availableBytes / p.bytesPerBlock;

    // Block ids one max_model_len request can hold at the same time, group by group.
    p.groups.push_back({"MLA + indexer", p.dsaLayers + p.indexerLayers, p.blockSize, ceilDiv(L, p.blockSize)});
    if (p.indexerLayers > 0) p.groups.push_back({"kpool tail", p.indexerLayers, kp, 1});  // one scratch block
    // Prefix caching keeps the running state and the last block-boundary copy; a verify step may also
    // write one state per draft token.
    const int64_t kdaBlocks = (in.prefixCaching ? 2 : 1) + S;
    for (int32_t g = 0; g < p.kdaGroups; ++g) {
        const int32_t layers = int32_t((p.kdaLayers - g + p.kdaGroups - 1) / p.kdaGroups);  // round-robin share
        p.groups.push_back({"KDA group " + std::to_string(g), layers, p.blockSize, kdaBlocks});
    }
    if (drafter) {
        // The sliding window plus every token that can be scheduled but not yet finished.
        const int64_t inFlight = int64_t(in.maxConcurrentBatches) * in.maxNumBatchedTokens;
        const int64_t span = std::min(in.draftSlidingWindow - 1 + inFlight, L);
        p.groups.push_back({"DFlash2 drafter", in.draftLayers, p.draftBlockSize, ceilDiv(span, p.draftBlockSize) + 1});
    }
    for (const VllmGroup& g : p.groups) p.blocksPerRequest += g.blocksPerRequest;
    p.maxConcurrency = double(p.numBlocks) / double(p.blocksPerRequest);
    p.tokens = p.numBlocks * L / p.blocksPerRequest;
    return p;
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
