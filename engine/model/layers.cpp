// The sub-layers of glm5_next over the Backend ops: KDA linear attention, DSA-MLA with the k-pool
// indexer, dense SwiGLU MLP and MoE; and the MTP block. Shapes are noted per buffer: T tokens.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/env_switch.h"
#include "core/error.h"
#include "model/glm5_next.h"
#include "model/step_batch.h"

namespace ts {

namespace {
// Step activations of n floats. allocF: contents unspecified (Backend::allocUninit: no zero fill, NaN on
// the CPU backend), for every buffer whose first op as an output writes all of it — which is every
// buffer here but the MoE output. allocZeroF: zero-filled, for a buffer that is accumulated into.
Buffer allocF(Backend& b, int64_t n) { return b.allocUninit(static_cast<size_t>(n) * 4); }
Buffer allocZeroF(Backend& b, int64_t n) { return b.alloc(static_cast<size_t>(n) * 4); }

// Whether the ops with per-sequence state or pages take a step's sequences in one batched call (Backend::…Batch);
// TS_SEQ_BATCH=0 (read once; an A/B switch) makes them the per-sequence calls of before.
bool seqBatch() {
    static const bool on = envSwitch("TS_SEQ_BATCH", true);
    return on;
}

// Runs of consecutive sequences whose paged cache (cacheOf(step): the latents or the pooled keys of one layer) is
// one buffer, with one dtype and block size — in the runtime's pool, every sequence of the step — handed to
// fn(first sequence, the run's SeqRows) for one batched call; a run's rows are contiguous (rowStart order).
// Without seqBatch() every run is one sequence.
template <class BatchT, class CacheOf, class Fn>
void forEachCacheRun(const BatchT& bt, const CacheOf& cacheOf, const Fn& fn) {
    const bool batched = seqBatch();
    const size_t n = bt.steps->size();
    std::vector<SeqRows> run;
    for (size_t s0 = 0; s0 < n;) {
        const Buffer c0 = cacheOf(bt.step(s0));
        const SeqCaches& k0 = bt.step(s0).caches;
        run.clear();
        size_t s = s0;
        for (; s < n; ++s) {
            const SeqCaches& k = bt.step(s).caches;
            const Buffer c = cacheOf(bt.step(s));
            if ((!batched && s > s0) || c.bytes() != c0.bytes() || c.size() != c0.size() || k.dtype != k0.dtype ||
                k.pages.blockSize != k0.pages.blockSize)
                break;
            run.push_back(SeqRows{k.pages, bt.step(s).pos0, bt.rows(s)});
        }
        fn(s0, run);
        s0 = s;
    }
}
int64_t rowsOf(const std::vector<SeqRows>& run) {
    int64_t n = 0;
    for (const SeqRows& r : run) n += r.rows;
    return n;
}

// Issues fn()'s ops as an aside (Backend::beginAside: on a GPU, a second stream beside the ops that follow) and
// returns true — the caller then calls joinAside() before the first op that reads their results; false where the
// backend runs ops in order: fn has not run, and the caller runs it where it would without an aside.
template <class Fn>
bool issueAside(Backend& b, const Fn& fn) {
    if (!b.beginAside()) return false;
    struct Guard {  // when fn throws: the backend must not stay in the aside (fn's error is the one that
        Backend& b;  // propagates, so endAside's own, if any, is dropped — never thrown from a destructor)
        bool open = true;
        ~Guard() {
            if (!open) return;
            try {
                b.endAside();
            } catch (...) {
            }
        }
    } guard{b};
    fn();
    guard.open = false;
    b.endAside();
    return true;
}
}  // namespace

Buffer Glm5NextModel::kdaForward(const KdaWeights& w, int L, Batch& bt) const {
    const TextConfig& c = m_cfg.text;
    Backend& b = m_backend;
    const Buffer& x = bt.xn;
    const int64_t T = bt.T, H = c.linear_num_heads, Dk = c.linear_head_dim, C = H * Dk, D = c.hidden_size;
    const int K = c.linear_conv_kernel_dim;
    // The gates read x alone: their small, latency-bound projections go beside the large q / k / v ones where the
    // backend can (issueAside), and in the order of before where it cannot. Same ops on the same inputs: same bits.
    Buffer low = allocF(b, T * Dk), g = allocF(b, T * C), beta = allocF(b, T * H), gate = allocF(b, T * C);
    const auto forgetAndBeta = [&] {
        b.linear(x, T, w.fA, low);
        b.linear(low, T, w.fB, g);  // forget gate [T, H·Dk]
        b.kdaGate(g, T, H, Dk, w.aLog, w.dtBias, c.linear_lower_bound ? *c.linear_lower_bound : NAN);
        b.linear(x, T, w.bProj, beta);
    };
    const auto outputGate = [&] {  // low is free again: fB has read it (in stream order on either path)
        b.linear(x, T, w.gA, low);
        b.linear(low, T, w.gB, gate);
    };
    const bool aside = issueAside(b, [&] {
        forgetAndBeta();
        outputGate();
    });
    Buffer q = allocF(b, T * C), k = allocF(b, T * C), v = allocF(b, T * C);
    b.linear(x, T, w.qProj, q);
    b.linear(x, T, w.kProj, k);
    b.linear(x, T, w.vProj, v);
    // [T, q | k | v]; qkv is written per sequence below, and the sequences' rows cover [0, T).
    Buffer qkvRaw = allocF(b, T * 3 * C), qkv = allocF(b, T * 3 * C);
    const Buffer parts[3] = {q, k, v};
    const int64_t widths[3] = {C, C, C};
    b.concatColumns(parts, widths, 3, T, qkvRaw);
    if (aside)
        b.joinAside();
    else
        forgetAndBeta();

    // The recurrent part: each sequence on its rows with its own conv tail and state — the step's sequences in
    // one batched call of each op (or one call per sequence without seqBatch()).
    Buffer o = allocF(b, T * C);  // [T, H, Dv], written per sequence (their rows cover [0, T))
    const size_t nSeqs = bt.steps->size();
    std::vector<int64_t> rows(nSeqs);
    std::vector<Buffer> convs(nSeqs), states(nSeqs);
    for (size_t s = 0; s < nSeqs; ++s) {
        rows[s] = bt.rows(s);
        convs[s] = bt.step(s).caches.layers[L].conv;
        states[s] = bt.step(s).caches.layers[L].recurrent;
    }
    const size_t per = seqBatch() ? nSeqs : 1;  // sequences per call
    for (size_t s0 = 0; s0 < nSeqs; s0 += per) {
        const int64_t r0 = bt.rowStart[s0], n = bt.rowStart[s0 + per] - r0, cnt = int64_t(per);
        const Buffer qkvS = qkv.viewF32(size_t(r0 * 3 * C), size_t(n * 3 * C));
        b.causalConvSiluBatch(qkvRaw.viewF32(size_t(r0 * 3 * C), size_t(n * 3 * C)), &rows[s0], cnt, 3 * C, K, w.convW,
                              &convs[s0], qkvS);
        b.kdaRecurrentBatch(qkvS, &rows[s0], cnt, H, Dk, g.viewF32(size_t(r0 * C), size_t(n * C)),
                            beta.viewF32(size_t(r0 * H), size_t(n * H)), &states[s0], o.viewF32(size_t(r0 * C), size_t(n * C)));
    }

    if (!aside) outputGate();
    b.gatedRmsnorm(o, T, H, Dk, w.oNorm, c.rms_norm_eps, gate);
    Buffer y = allocF(b, T * D);
    b.linear(o, T, w.oProj, y);
    return y;
}

Buffer Glm5NextModel::mlaForward(const MlaWeights& w, int L, const Buffer& x, Batch& bt) const {
    const TextConfig& c = m_cfg.text;
    Backend& b = m_backend;
    const int64_t T = bt.T, D = c.hidden_size, H = c.num_attention_heads, R = c.kv_lora_rank, ql = c.q_lora_rank;
    const int64_t dn = c.qk_nope_head_dim, dv = c.v_head_dim, kp = c.index_kpool;
    const int64_t width = c.index_topk + kp - 1;

    Buffer qr = allocF(b, T * ql);  // q_a_layernorm output, shared with the indexer
    b.linear(x, T, w.qA, qr);
    b.rmsnorm(qr, T, ql, w.qANorm, c.rms_norm_eps, qr);
    Buffer q = allocF(b, T * H * dn);
    b.linear(qr, T, w.qB, q);
    Buffer lat = allocF(b, T * R);  // the latent c, cached (fp8_ds_mla or fp32) before it is attended
    b.linear(x, T, w.kvA, lat);
    b.rmsnorm(lat, T, R, w.kvANorm, c.rms_norm_eps, lat);
    const auto latentOf = [L](const SeqStep& st) { return st.caches.layers[L].latent; };
    forEachCacheRun(bt, latentOf, [&](size_t s0, const std::vector<SeqRows>& run) {
        const SeqStep& st = bt.step(s0);
        b.mlaCacheWriteBatch(lat.viewF32(size_t(bt.rowStart[s0] * R), size_t(rowsOf(run) * R)), run.data(),
                             int64_t(run.size()), R, st.caches.dtype, st.caches.layers[L].latent);
    });

    if (w.hasIndexer) {
        const IndexerWeights& iw = w.indexer;
        const int64_t Hi = c.index_n_heads, Di = c.index_head_dim;
        Buffer iq = allocF(b, T * Hi * Di), ik = allocF(b, T * Di), ig = allocF(b, T * Di), wts = allocF(b, T * Hi);
        b.linear(qr, T, iw.wqB, iq);
        b.linear(x, T, iw.wk, ik);
        b.layernorm(ik, T, Di, iw.kNormW, iw.kNormB, 1e-6f, ik);
        b.linear(x, T, iw.compressGate, ig);
        b.linear(x, T, iw.weightsProj, wts);
        b.scale(wts, T * Hi, 1.0f / std::sqrt(float(Hi)));
        // indexerSelect writes all `width` entries of its rows (−1 padding included; CPU and CUDA).
        bt.idx = b.allocUninit(static_cast<size_t>(T * width) * 4);
        // The keys' write, then the selection: one call each per run of sequences sharing the pool store (a whole
        // runtime step), each sequence with its own tail ring.
        const auto poolsOf = [L](const SeqStep& st) { return st.caches.layers[L].idxPools; };
        std::vector<Buffer> tails;
        forEachCacheRun(bt, poolsOf, [&](size_t s0, const std::vector<SeqRows>& run) {
            const SeqStep& first = bt.step(s0);
            const int64_t r0 = bt.rowStart[s0], n = rowsOf(run);
            tails.clear();
            for (size_t i = 0; i < run.size(); ++i) tails.push_back(bt.step(s0 + i).caches.layers[L].idxTail);
            b.indexerCacheWriteBatch(ik.viewF32(size_t(r0 * Di), size_t(n * Di)), ig.viewF32(size_t(r0 * Di), size_t(n * Di)),
                                     run.data(), int64_t(run.size()), Di, kp, iw.compressApe, first.caches.dtype,
                                     tails.data(), first.caches.layers[L].idxPools);
        });
        forEachCacheRun(bt, poolsOf, [&](size_t s0, const std::vector<SeqRows>& run) {
            const SeqStep& first = bt.step(s0);
            const int64_t r0 = bt.rowStart[s0], n = rowsOf(run);
            std::vector<IndexerStats> one(run.size());
            std::vector<IndexerStats*> want(run.size(), nullptr);
            for (size_t i = 0; i < run.size(); ++i) {
                const size_t s = s0 + i;
                const SeqStep& st = bt.step(s);
                if (!bt.rowHash.empty())
                    one[i].selectionHash.assign(bt.rowHash.begin() + bt.rowStart[s], bt.rowHash.begin() + bt.rowStart[s + 1]);
                // Statistics only when asked for: they bring the tie flags back to the host (a round trip).
                if (st.recordTies || !bt.rowHash.empty()) want[i] = &one[i];
            }
            b.indexerSelectBatch(iq.viewF32(size_t(r0 * Hi * Di), size_t(n * Hi * Di)), wts.viewF32(size_t(r0 * Hi), size_t(n * Hi)),
                                 run.data(), int64_t(run.size()), Hi, Di, kp, c.index_topk, first.caches.dtype,
                                 first.caches.layers[L].idxPools, bt.idx.view(size_t(r0 * width) * 4, size_t(n * width) * 4),
                                 want.data());
            for (size_t i = 0; i < run.size(); ++i) {
                const size_t s = s0 + i;
                if (!bt.rowHash.empty())
                    std::copy(one[i].selectionHash.begin(), one[i].selectionHash.end(), bt.rowHash.begin() + bt.rowStart[s]);
                IndexerStats& acc = bt.stats[s];
                if (one[i].firstTiedQuery >= 0 && acc.firstTiedQuery < 0) acc.firstTiedQuery = one[i].firstTiedQuery;
                if (one[i].firstTiedQuery >= 0 && acc.firstTiedQuery >= 0)
                    acc.firstTiedQuery = std::min(acc.firstTiedQuery, one[i].firstTiedQuery);
                acc.tiedQueries += one[i].tiedQueries;
            }
        });
    }
    TS_CHECK(!bt.idx.empty(), "shared DSA layer without a preceding full indexer layer");

    Buffer qLat = allocF(b, T * H * R), oLat = allocF(b, T * H * R), o = allocF(b, T * H * dv);
    b.mlaAbsorbQ(q, T, H, dn, dv, w.kvB, qLat);
    const float scale = 1.0f / std::sqrt(float(c.qkHeadDim()));
    forEachCacheRun(bt, latentOf, [&](size_t s0, const std::vector<SeqRows>& run) {
        const SeqStep& st = bt.step(s0);
        const int64_t r0 = bt.rowStart[s0], n = rowsOf(run);
        b.mlaSparseAttentionBatch(qLat.viewF32(size_t(r0 * H * R), size_t(n * H * R)), run.data(), int64_t(run.size()), H, R,
                                  st.caches.layers[L].latent, st.caches.dtype,
                                  bt.idx.view(size_t(r0 * width) * 4, size_t(n * width) * 4), width, scale,
                                  oLat.viewF32(size_t(r0 * H * R), size_t(n * H * R)));
    });
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
    if (m_mlpObserver) m_mlpObserver->observe(w, x, g, T, c.hidden_size, I);  // calibration (glm5_next.h)
    Buffer y = allocF(b, T * c.hidden_size);
    b.linear(g, T, w.down, y);
    return y;
}

Buffer Glm5NextModel::moeForward(const MoeWeights& w, const Buffer& x, int64_t T, std::vector<uint64_t>* rowHash) const {
    Backend& b = m_backend;
    const TextConfig& c = m_cfg.text;
    const int64_t D = c.hidden_size, E = c.n_routed_experts, K = c.num_experts_per_tok;
    const int64_t I = c.moe_intermediate_size;
    const float limit = c.swiglu_limit ? *c.swiglu_limit : 0.0f;
    // A backend with a fused path for these experts runs them all at once (the CUDA backend: packed EXL3
    // experts with host or device routing, dense ones with device routing at decode sizes); the
    // calibration observer needs each expert's own call, so it keeps the loop.
    const bool fusable = !m_mlpObserver && !w.experts.empty() && w.expertGate.size() == w.experts.size();
    const WeightView *gv = w.expertGate.data(), *uv = w.expertUp.data(), *dv = w.expertDown.data();
    // Zeroed: it is accumulated into (moeExpertsFused and scatterAddRows are y += expert outputs).
    Buffer y = allocZeroF(b, T * D);
    // The shared expert reads x alone, so where the backend can run it beside the routing and the routed
    // experts (Backend::beginAside: a second stream inside a GPU decode step) it is issued first and joined
    // before its add below — the same add in the same place, so the same bits. (Not with the calibration
    // observer: it reads the expert's activations on the host.)
    const int64_t sharedI = int64_t(c.moe_intermediate_size) * c.n_shared_experts;
    Buffer shared;
    const bool aside = w.hasShared && !m_mlpObserver && issueAside(b, [&] { shared = mlpForward(w.shared, x, T, sharedI); });
    std::vector<int32_t> idx(static_cast<size_t>(T * K));
    std::vector<float> wt(static_cast<size_t>(T * K));
    bool fused = false, routed = false;
    if (fusable) {
        // Routing kept on the backend: no host round trip in this layer when the fused path takes it
        // (the decision record, a diagnostic, still brings the ids back). [idx | weight] in one buffer,
        // so one download brings both.
        const size_t tk = size_t(T * K);
        Buffer rt = b.allocUninit(tk * 8);  // both halves written by moeRouteDevice
        const Buffer dIdx = rt.view(0, tk * 4), dWt = rt.view(tk * 4, tk * 4);
        if (b.moeRouteDevice(x, T, w.router, w.correctionBias, E, K, c.n_group, c.topk_group, c.norm_topk_prob,
                             c.routed_scaling_factor, dIdx, dWt)) {
            routed = true;
            fused = b.moeExpertsFusedDevice(x, T, D, I, dIdx, dWt, K, gv, uv, dv,
                                            int64_t(w.experts.size()), limit, y);
            if (!fused || rowHash) {
                std::vector<uint8_t> both(tk * 8);
                b.download(rt, both.data(), tk * 8);
                std::memcpy(idx.data(), both.data(), tk * 4);
                std::memcpy(wt.data(), both.data() + tk * 4, tk * 4);
            }
        }
    }
    if (!routed)
        b.moeRoute(x, T, w.router, w.correctionBias, E, K, c.n_group, c.topk_group, c.norm_topk_prob,
                   c.routed_scaling_factor, idx.data(), wt.data());
    if (rowHash)  // fold the routing into the per-row decision record
        for (int64_t t = 0; t < T; ++t) {
            std::vector<int32_t> chosen(idx.begin() + t * K, idx.begin() + (t + 1) * K);
            std::sort(chosen.begin(), chosen.end());
            uint64_t& hsh = (*rowHash)[size_t(t)];
            for (int32_t e : chosen) hsh = (hsh ^ uint64_t(e + 1)) * 0x100000001b3ull;
        }

    // Only the selected experts run, each over the tokens routed to it. Per token the expert outputs
    // are summed in ascending expert order (as the reference does), then the shared expert is added.
    if (fusable && !fused)
        fused = b.moeExpertsFused(x, T, D, I, idx.data(), wt.data(), K, gv, uv, dv,
                                  int64_t(w.experts.size()), limit, y);
    // The per-expert loop's ops follow the routing (which experts, how many rows): a decode step that
    // takes it cannot be replayed from graphs, so it leaves its graph region here (Backend::
    // endGraphRegion; a no-op outside one). Static per model and backend: it happens on a key's first
    // step, which then stays eager.
    if (!fused) b.endGraphRegion(Backend::GraphRegionEnd::Left);
    std::vector<int32_t> rows;
    std::vector<float> scales;
    for (int64_t e = 0; e < E && !fused; ++e) {
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
        Buffer ye = mlpForward(w.experts[size_t(e)], xe, n, I);
        b.scatterAddRows(ye, D, rows.data(), scales.data(), n, y);
    }
    if (w.hasShared) {
        if (aside)
            b.joinAside();
        else
            shared = mlpForward(w.shared, x, T, sharedI);
        b.add(shared, y, T * D);
    }
    return y;
}

}  // namespace ts
