#include "model/glm5_next.h"

#include <cmath>

#include "core/error.h"

namespace ts {

struct Glm5NextModel::Step {
    int64_t T = 0;
    Buffer streams;  // [T, n, D]
    Buffer x;        // [T, D] collapsed streams
    Buffer xn;       // [T, D] normalised sub-layer input
    Buffer post;     // [T, n]
    Buffer comb;     // [T, n, n]
    KvCacheDtype dt = KvCacheDtype::Fp8;
};

Glm5NextModel::Glm5NextModel(const std::string& dir, Backend& backend)
    : m_backend(backend), m_cfg(loadModelConfig(dir)) {
    const TextConfig& c = m_cfg.text;
    if (!c.index_kpool_always_select_tail)
        fail(ErrorKind::Unsupported, dir + "/config.json: text_config.index_kpool_always_select_tail = false is not "
                                           "supported (GLM-5.3-Flash always attends to the incomplete pool)");
    if (!m_cfg.quantization_config.is_null())
        fail(ErrorKind::Unsupported, dir + "/config.json: quantized checkpoints (quantization_config) are not "
                                           "supported by this loader yet; use a BF16/F32 checkpoint");
    m_ckpt = std::make_unique<SafetensorsCheckpoint>(dir);
    m_w = bindWeights(m_cfg, *m_ckpt, backend);
}

std::unique_ptr<SequenceState> Glm5NextModel::newSequence(KvCacheDtype cacheDtype) const {
    return std::make_unique<SequenceState>(m_backend, m_cfg.text, cacheDtype, m_cfg.text.num_hidden_layers);
}

std::unique_ptr<SequenceState> Glm5NextModel::newMtpSequence(KvCacheDtype cacheDtype) const {
    if (!hasMtp()) fail(ErrorKind::Unsupported, "this checkpoint has no MTP block");
    return std::make_unique<SequenceState>(m_backend, m_cfg.text, cacheDtype, m_cfg.text.num_hidden_layers + 1, true);
}

ForwardResult Glm5NextModel::forwardMtp(const float* hidden, const int32_t* nextIds, int64_t T,
                                        SequenceState& mtpState) const {
    const TextConfig& c = m_cfg.text;
    const MtpWeights& w = m_w.mtp;
    if (!w.present) fail(ErrorKind::Unsupported, "this checkpoint has no MTP block");
    TS_CHECK(T > 0, "forwardMtp of zero tokens");
    checkIds(nextIds, T);
    Backend& b = m_backend;
    const int64_t D = c.hidden_size, pos0 = mtpState.length();
    mtpState.reserve(pos0 + T);

    Buffer e = b.alloc(size_t(T * D) * 4), h = b.upload(hidden, size_t(T * D) * 4);
    b.embedding(nextIds, T, m_w.embed, e);
    if (pos0 == 0) b.zero(e.viewF32(0, size_t(D)));
    b.rmsnorm(e, T, D, w.enorm, c.rms_norm_eps, e);
    b.rmsnorm(h, T, D, w.hnorm, c.rms_norm_eps, h);
    Buffer eh = b.alloc(size_t(T * 2 * D) * 4);
    const Buffer parts[2] = {e, h};
    const int64_t widths[2] = {D, D};
    b.concatColumns(parts, widths, 2, T, eh);
    Buffer z = b.alloc(size_t(T * D) * 4), xn = b.alloc(size_t(T * D) * 4);
    b.linear(eh, T, w.ehProj, z);

    ForwardResult r;
    Buffer idx;
    b.rmsnorm(z, T, D, w.layer.inputNorm, c.rms_norm_eps, xn);
    Buffer a = mlaForward(w.layer.mla, xn, T, mtpState.layer(c.num_hidden_layers), pos0, mtpState.cacheDtype(), idx,
                          r.indexer);
    b.add(a, z, T * D);  // z is now the residual r
    b.rmsnorm(z, T, D, w.layer.postAttnNorm, c.rms_norm_eps, xn);
    Buffer m = w.layer.denseMlp ? mlpForward(w.layer.mlp, xn, T, c.intermediate_size) : moeForward(w.layer.moe, xn, T, &r.indexer);
    b.add(m, z, T * D);
    b.rmsnorm(z, T, D, w.headNorm, c.rms_norm_eps, xn);
    r.logits = logitsOf(xn, T, w.head, false);
    mtpState.advance(T);
    return r;
}

void Glm5NextModel::checkIds(const int32_t* ids, int64_t T) const {
    for (int64_t t = 0; t < T; ++t)
        if (ids[t] < 0 || ids[t] >= m_cfg.text.vocab_size)
            fail(ErrorKind::InvalidArgument, "token id " + std::to_string(ids[t]) + " at position " +
                                                 std::to_string(t) + " is outside the vocabulary [0, " +
                                                 std::to_string(m_cfg.text.vocab_size) + ")");
}

void Glm5NextModel::runLayer(const LayerWeights& lw, int layerIndex, bool linear, Step& s, LayerState& ls,
                             int64_t pos0, Buffer& prevIdx, IndexerStats& stats) const {
    (void)layerIndex;
    const TextConfig& c = m_cfg.text;
    const int64_t T = s.T, D = c.hidden_size;
    const int n = c.hc_mult;
    Backend& b = m_backend;

    b.mhcPre(s.streams, T, D, lw.attnHc, s.x, s.post, s.comb);
    b.rmsnorm(s.x, T, D, lw.inputNorm, c.rms_norm_eps, s.xn);
    Buffer y = linear ? kdaForward(lw.kda, s.xn, T, ls)
                      : mlaForward(lw.mla, s.xn, T, ls, pos0, s.dt, prevIdx, stats);
    b.mhcPost(s.streams, T, D, n, y, s.post, s.comb);

    b.mhcPre(s.streams, T, D, lw.ffnHc, s.x, s.post, s.comb);
    b.rmsnorm(s.x, T, D, lw.postAttnNorm, c.rms_norm_eps, s.xn);
    y = lw.denseMlp ? mlpForward(lw.mlp, s.xn, T, c.intermediate_size) : moeForward(lw.moe, s.xn, T, &stats);
    b.mhcPost(s.streams, T, D, n, y, s.post, s.comb);
}

ForwardResult Glm5NextModel::forward(const int32_t* ids, int64_t T, SequenceState& state, bool lastOnly,
                                     bool wantHidden, bool recordSelection) const {
    const TextConfig& c = m_cfg.text;
    TS_CHECK(T > 0, "forward of zero tokens");
    checkIds(ids, T);
    const int64_t D = c.hidden_size, pos0 = state.length();
    const int n = c.hc_mult;
    Backend& b = m_backend;
    state.reserve(pos0 + T);

    Step s;
    s.T = T;
    s.dt = state.cacheDtype();
    s.streams = b.alloc(size_t(T * n * D) * 4);
    s.x = b.alloc(size_t(T * D) * 4);
    s.xn = b.alloc(size_t(T * D) * 4);
    s.post = b.alloc(size_t(T * n) * 4);
    s.comb = b.alloc(size_t(T * n * n) * 4);

    // Embedding, broadcast to the n residual streams.
    Buffer e = b.alloc(size_t(T * D) * 4);
    b.embedding(ids, T, m_w.embed, e);
    for (int64_t t = 0; t < T; ++t)
        for (int i = 0; i < n; ++i) b.copy(e, size_t(t * D) * 4, s.streams, size_t((t * n + i) * D) * 4, size_t(D) * 4);

    ForwardResult r;
    if (recordSelection) r.indexer.selectionHash.assign(size_t(T), 0);
    Buffer prevIdx;  // the selection of the last full indexer layer, for `shared` DSA layers
    for (int L = 0; L < c.num_hidden_layers; ++L)
        runLayer(m_w.layers[size_t(L)], L, c.isLinear(L), s, state.layer(L), pos0, prevIdx, r.indexer);

    b.mhcHead(s.streams, T, D, n, s.x);
    b.rmsnorm(s.x, T, D, m_w.finalNorm, c.rms_norm_eps, s.xn);
    r.logits = logitsOf(s.xn, T, m_w.lmHead, lastOnly);
    if (wantHidden) {
        r.hidden.resize(size_t(T * D));
        b.download(s.xn, r.hidden.data(), r.hidden.size() * 4);
    }
    state.advance(T);
    return r;
}

std::vector<float> Glm5NextModel::logitsOf(const Buffer& normed, int64_t T, const WeightView& head,
                                           bool lastOnly) const {
    const int64_t D = m_cfg.text.hidden_size, V = head.rows;
    const int64_t rows = lastOnly ? 1 : T;
    const Buffer in = lastOnly ? normed.viewF32(size_t((T - 1) * D), size_t(D)) : normed;
    Buffer out = m_backend.alloc(size_t(rows * V) * 4);
    m_backend.linear(in, rows, head, out);
    std::vector<float> logits(static_cast<size_t>(rows * V));
    m_backend.download(out, logits.data(), logits.size() * 4);
    return logits;
}

}  // namespace ts
