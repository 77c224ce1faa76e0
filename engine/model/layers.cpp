// The sub-layers of glm5_next over the Backend ops: KDA linear attention, DSA-MLA with the k-pool
// indexer, dense SwiGLU MLP and MoE; and the MTP block. Shapes are noted per buffer: T tokens.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "model/glm5_next.h"

namespace ts {

namespace {
Buffer allocF(Backend& b, int64_t n) { return b.alloc(size_t(n) * 4); }
}  // namespace

Buffer Glm5NextModel::kdaForward(const KdaWeights& w, const Buffer& x, int64_t T, LayerState& ls) const {
    const TextConfig& c = m_cfg.text;
    Backend& b = m_backend;
    const int64_t H = c.linear_num_heads, Dk = c.linear_head_dim, C = H * Dk, D = c.hidden_size;
    Buffer q = allocF(b, T * C), k = allocF(b, T * C), v = allocF(b, T * C);
    b.linear(x, T, w.qProj, q);
    b.linear(x, T, w.kProj, k);
    b.linear(x, T, w.vProj, v);
    Buffer qkvRaw = allocF(b, T * 3 * C), qkv = allocF(b, T * 3 * C);  // [T, q | k | v]
    const Buffer parts[3] = {q, k, v};
    const int64_t widths[3] = {C, C, C};
    b.concatColumns(parts, widths, 3, T, qkvRaw);
    b.causalConvSilu(qkvRaw, T, 3 * C, c.linear_conv_kernel_dim, w.convW, ls.conv, qkv);

    Buffer low = allocF(b, T * Dk), g = allocF(b, T * C);  // forget gate [T, H·Dk]
    b.linear(x, T, w.fA, low);
    b.linear(low, T, w.fB, g);
    b.kdaGate(g, T, H, Dk, w.aLog, w.dtBias, c.linear_lower_bound ? *c.linear_lower_bound : NAN);
    Buffer beta = allocF(b, T * H);
    b.linear(x, T, w.bProj, beta);

    Buffer o = allocF(b, T * C);  // [T, H, Dv]
    b.kdaRecurrent(qkv, T, H, Dk, g, beta, ls.recurrent, o);

    Buffer gate = allocF(b, T * C);
    b.linear(x, T, w.gA, low);
    b.linear(low, T, w.gB, gate);
    b.gatedRmsnorm(o, T, H, Dk, w.oNorm, c.rms_norm_eps, gate);
    Buffer y = allocF(b, T * D);
    b.linear(o, T, w.oProj, y);
    return y;
}

Buffer Glm5NextModel::mlaForward(const MlaWeights& w, const Buffer& x, int64_t T, LayerState& ls, int64_t pos0,
                                 KvCacheDtype dt, Buffer& prevIdx, IndexerStats& stats) const {
    const TextConfig& c = m_cfg.text;
    Backend& b = m_backend;
    const int64_t D = c.hidden_size, H = c.num_attention_heads, R = c.kv_lora_rank, ql = c.q_lora_rank;
    const int64_t dn = c.qk_nope_head_dim, dv = c.v_head_dim;

    Buffer qr = allocF(b, T * ql);  // q_a_layernorm output, shared with the indexer
    b.linear(x, T, w.qA, qr);
    b.rmsnorm(qr, T, ql, w.qANorm, c.rms_norm_eps, qr);
    Buffer q = allocF(b, T * H * dn);
    b.linear(qr, T, w.qB, q);
    Buffer lat = allocF(b, T * R);  // the latent c, cached (fp8_ds_mla or fp32) before it is attended
    b.linear(x, T, w.kvA, lat);
    b.rmsnorm(lat, T, R, w.kvANorm, c.rms_norm_eps, lat);
    b.mlaCacheWrite(lat, T, R, dt, ls.latent, pos0);

    if (w.hasIndexer) {
        const IndexerWeights& iw = w.indexer;
        const int64_t Hi = c.index_n_heads, Di = c.index_head_dim, kp = c.index_kpool;
        Buffer iq = allocF(b, T * Hi * Di), ik = allocF(b, T * Di), ig = allocF(b, T * Di), wts = allocF(b, T * Hi);
        b.linear(qr, T, iw.wqB, iq);
        b.linear(x, T, iw.wk, ik);
        b.layernorm(ik, T, Di, iw.kNormW, iw.kNormB, 1e-6f, ik);
        b.linear(x, T, iw.compressGate, ig);
        b.linear(x, T, iw.weightsProj, wts);
        b.scale(wts, T * Hi, 1.0f / std::sqrt(float(Hi)));
        b.indexerCacheWrite(ik, ig, T, Di, kp, iw.compressApe, dt, ls.idxTokens, ls.idxPools, pos0);
        prevIdx = b.alloc(size_t(T * (c.index_topk + kp - 1)) * 4);
        b.indexerSelect(iq, wts, T, Hi, Di, kp, c.index_topk, dt, ls.idxPools, pos0, prevIdx, &stats);
    }
    TS_CHECK(!prevIdx.empty(), "shared DSA layer without a preceding full indexer layer");
    const int64_t width = c.index_topk + c.index_kpool - 1;

    Buffer qLat = allocF(b, T * H * R), oLat = allocF(b, T * H * R), o = allocF(b, T * H * dv);
    b.mlaAbsorbQ(q, T, H, dn, dv, w.kvB, qLat);
    b.mlaSparseAttention(qLat, T, H, R, ls.latent, dt, prevIdx, width, 1.0f / std::sqrt(float(c.qkHeadDim())), oLat);
    b.mlaUpV(oLat, T, H, dn, dv, w.kvB, o);
    Buffer y = allocF(b, T * D);
    b.linear(o, T, w.oProj, y);
    return y;
}

Buffer Glm5NextModel::mlpForward(const MlpWeights& w, const Buffer& x, int64_t T, int64_t I) const {
    Backend& b = m_backend;
    const TextConfig& c = m_cfg.text;
    Buffer g = allocF(b, T * I), u = allocF(b, T * I);
    b.linear(x, T, w.gate, g);
    b.linear(x, T, w.up, u);
    b.swiglu(g, u, T, I, c.swiglu_limit ? *c.swiglu_limit : 0.0f, g);
    Buffer y = allocF(b, T * c.hidden_size);
    b.linear(g, T, w.down, y);
    return y;
}

Buffer Glm5NextModel::moeForward(const MoeWeights& w, const Buffer& x, int64_t T, IndexerStats* stats) const {
    Backend& b = m_backend;
    const TextConfig& c = m_cfg.text;
    const int64_t D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
    std::vector<int32_t> idx(static_cast<size_t>(T * K));
    std::vector<float> wt(static_cast<size_t>(T * K));
    b.moeRoute(x, T, w.router, w.correctionBias, E, K, c.n_group, c.topk_group, c.norm_topk_prob,
               c.routed_scaling_factor, idx.data(), wt.data());
    if (stats && stats->selectionHash.size() == size_t(T))  // fold the routing into the decision record
        for (int64_t t = 0; t < T; ++t) {
            std::vector<int32_t> chosen(idx.begin() + t * K, idx.begin() + (t + 1) * K);
            std::sort(chosen.begin(), chosen.end());
            uint64_t& hsh = stats->selectionHash[size_t(t)];
            for (int32_t e : chosen) hsh = (hsh ^ uint64_t(e + 1)) * 0x100000001b3ull;
        }

    // Only the selected experts run, each over the tokens routed to it. Per token the expert outputs
    // are summed in ascending expert order (as the reference does), then the shared expert is added.
    Buffer y = allocF(b, T * D);
    std::vector<int32_t> rows;
    std::vector<float> scales;
    for (int64_t e = 0; e < E; ++e) {
        rows.clear();
        scales.clear();
        for (int64_t t = 0; t < T; ++t)
            for (int64_t k = 0; k < K; ++k)
                if (idx[size_t(t * K + k)] == e) {
                    rows.push_back(int32_t(t));
                    scales.push_back(wt[size_t(t * K + k)]);
                }
        if (rows.empty()) continue;
        const int64_t n = int64_t(rows.size());
        Buffer xe = allocF(b, n * D);
        b.gatherRows(x, D, rows.data(), n, xe);
        Buffer ye = mlpForward(w.experts[size_t(e)], xe, n, c.moe_intermediate_size);
        b.scatterAddRows(ye, D, rows.data(), scales.data(), n, y);
    }
    if (w.hasShared) {
        Buffer sh = mlpForward(w.shared, x, T, int64_t(c.moe_intermediate_size) * c.n_shared_experts);
        b.add(sh, y, T * D);
    }
    return y;
}

}  // namespace ts
