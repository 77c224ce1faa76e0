#include "model/glm5_next.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/log.h"
#include "model/step_batch.h"
#include "quant/exl3_format.h"

namespace ts {

std::string formatLoadProgress(int64_t done, int64_t total) {
    const bool gib = total >= (int64_t(1) << 30);
    const double unit = double(int64_t(1) << (gib ? 30 : 20));
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.1f / %.1f %s (%d %%)", double(done) / unit, double(total) / unit,
                  gib ? "GiB" : "MiB", total > 0 ? int(100 * done / total) : 100);
    return buf;
}

Glm5NextModel::Glm5NextModel(const std::string& dir, Backend& backend, const LoadProgress& progress,
                             const BindProgress& binding)
    : m_backend(backend), m_cfg(loadModelConfig(dir)) {
    const TextConfig& c = m_cfg.text;
    if (!c.index_kpool_always_select_tail)
        fail(ErrorKind::Unsupported, dir + "/config.json: text_config.index_kpool_always_select_tail = false is not "
                                           "supported (GLM-5.3-Flash always attends to the incomplete pool)");
    // EXL3 (exllamav3's format) is the one quantization read here: its linears bind packed, by tensor
    // names (`.trellis`), whatever the config lists; anything else is refused up front.
    std::optional<Exl3QuantConfig> quant;
    if (!m_cfg.quantization_config.is_null() && !(quant = loadExl3QuantConfig(dir)))
        fail(ErrorKind::Unsupported, dir + "/config.json: quantization_config.quant_method '" +
                                         m_cfg.quantization_config.value("quant_method", std::string("?")) +
                                         "' is not supported (EXL3 checkpoints and BF16/F16/F32 ones are)");
    m_ckpt = std::make_unique<SafetensorsCheckpoint>(dir);
    m_w = bindWeights(m_cfg, *m_ckpt, backend, quant ? &*quant : nullptr, binding);
    int64_t total = 0, done = 0;
    forEachWeightView(m_w, [&](const WeightView& v) { total += weightViewBytes(v); });
    if (progress) progress(0, total);
    forEachWeightView(m_w, [&](const WeightView& v) {
        backend.preloadWeight(v);
        done += weightViewBytes(v);
        if (progress) progress(done, total);
    });
}

Glm5NextModel::~Glm5NextModel() {
    // A destructor must not throw: a backend that cannot let the weights go (its device failed in a way it does not
    // absorb) is logged, and the process ends as it was going to (exit 3 after a lost GPU), not in std::terminate.
    try {
        m_backend.releaseWeights();
    } catch (const std::exception& e) {
        logFormat(LogLevel::Error, "model: releasing the weights on the %s backend failed: %s",
                  m_backend.name().c_str(), e.what());
    }
}

std::unique_ptr<SequenceState> Glm5NextModel::newSequence(KvCacheDtype cacheDtype) const {
    return std::make_unique<SequenceState>(m_backend, m_cfg.text, cacheDtype, m_cfg.text.num_hidden_layers);
}

std::unique_ptr<SequenceState> Glm5NextModel::newMtpSequence(KvCacheDtype cacheDtype) const {
    if (!hasMtp()) fail(ErrorKind::Unsupported, "this checkpoint has no MTP block");
    return std::make_unique<SequenceState>(m_backend, m_cfg.text, cacheDtype, m_cfg.text.num_hidden_layers + 1, true);
}

void Glm5NextModel::checkIds(const int32_t* ids, int64_t T) const {
    for (int64_t t = 0; t < T; ++t)
        if (ids[t] < 0 || ids[t] >= m_cfg.text.vocab_size)
            fail(ErrorKind::InvalidArgument, "token id " + std::to_string(ids[t]) + " at position " +
                                                 std::to_string(t) + " is outside the vocabulary [0, " +
                                                 std::to_string(m_cfg.text.vocab_size) + ")");
}

void Glm5NextModel::runLayer(int L, Batch& b) const {
    const TextConfig& c = m_cfg.text;
    const LayerWeights& lw = m_w.layers[size_t(L)];
    const int64_t T = b.T, D = c.hidden_size;
    const int n = c.hc_mult;
    Backend& be = m_backend;

    be.mhcPre(b.streams, T, D, lw.attnHc, b.x, b.post, b.comb);
    be.rmsnorm(b.x, T, D, lw.inputNorm, c.rms_norm_eps, b.xn);
    Buffer y = lw.linear ? kdaForward(lw.kda, L, b) : mlaForward(lw.mla, L, b.xn, b);
    be.mhcPost(b.streams, T, D, n, y, b.post, b.comb);

    be.mhcPre(b.streams, T, D, lw.ffnHc, b.x, b.post, b.comb);
    be.rmsnorm(b.x, T, D, lw.postAttnNorm, c.rms_norm_eps, b.xn);
    y = lw.denseMlp ? mlpForward(lw.mlp, b.xn, T, c.intermediate_size)
                    : moeForward(lw.moe, b.xn, T, b.rowHash.empty() ? nullptr : &b.rowHash);
    be.mhcPost(b.streams, T, D, n, y, b.post, b.comb);
}

std::vector<ForwardResult> Glm5NextModel::forwardBatch(const std::vector<SeqStep>& steps) const {
    const TextConfig& c = m_cfg.text;
    const int64_t D = c.hidden_size, V = c.vocab_size;
    const int n = c.hc_mult;
    Backend& be = m_backend;

    Batch b;
    b.steps = &steps;
    b.rowStart.push_back(0);
    std::vector<int32_t> ids;
    bool record = false;
    for (const SeqStep& s : steps) {
        TS_CHECK(s.n > 0, "forward of zero tokens");
        TS_CHECK(s.caches.numLayers >= c.num_hidden_layers, "sequence caches miss layers");
        TS_CHECK(s.pos0 + s.n <= s.caches.pages.capacity(), "sequence pages too short for the step");
        checkIds(s.ids, s.n);
        ids.insert(ids.end(), s.ids, s.ids + s.n);
        b.rowStart.push_back(b.rowStart.back() + s.n);
        record = record || s.recordSelection;
    }
    const int64_t T = b.T = b.rowStart.back();
    b.stats.resize(steps.size());
    if (record) b.rowHash.assign(size_t(T), 0);
    // A decode step (one new token per sequence, no decisions recorded) issues the same ops on the same
    // buffer sizes every time for the same batch size: a device backend replays it from CUDA graphs
    // (Backend::beginGraphRegion), keyed by this model and T. Up to kMaxGraphRows rows: the MoE's
    // device-routed path; larger steps are prefill-like and launch-bound far less.
    constexpr int64_t kMaxGraphRows = 16;
    bool decodeOnly = T <= kMaxGraphRows && !record;
    for (const SeqStep& s : steps) decodeOnly = decodeOnly && s.n == 1;
    GraphRegionScope region(be, decodeOnly,
                            (uint64_t(reinterpret_cast<uintptr_t>(this)) << 8) ^ uint64_t(T));
    // Step buffers without a zero fill (Backend::allocUninit): each is written whole before it is read —
    // streams by repeatRows below, x / post / comb by mhcPre (x also by mhcHead), xn by rmsnorm.
    b.streams = be.allocUninit(static_cast<size_t>(T * n * D) * 4);
    b.x = be.allocUninit(static_cast<size_t>(T * D) * 4);
    b.xn = be.allocUninit(static_cast<size_t>(T * D) * 4);
    b.post = be.allocUninit(static_cast<size_t>(T * n) * 4);
    b.comb = be.allocUninit(static_cast<size_t>(T * n * n) * 4);

    // Embedding, broadcast to the n residual streams (one op, not T·n copies).
    Buffer e = be.allocUninit(static_cast<size_t>(T * D) * 4);
    be.embedding(ids.data(), T, m_w.embed, e);
    be.repeatRows(e, T, D, n, b.streams);

    for (int L = 0; L < c.num_hidden_layers; ++L) runLayer(L, b);

    be.mhcHead(b.streams, T, D, n, b.x);
    be.rmsnorm(b.x, T, D, m_w.finalNorm, c.rms_norm_eps, b.xn);

    // Logits: the rows each sequence asked for, in one lm_head call.
    std::vector<int64_t> outRows;
    for (size_t s = 0; s < steps.size(); ++s) {
        if (steps[s].lastOnly) outRows.push_back(b.rowStart[s + 1] - 1);
        else for (int64_t r = b.rowStart[s]; r < b.rowStart[s + 1]; ++r) outRows.push_back(r);
    }
    Buffer sel = be.allocUninit(outRows.size() * static_cast<size_t>(D) * 4);  // every row copied below
    for (size_t i = 0; i < outRows.size(); ++i) be.copy(b.xn, size_t(outRows[i] * D) * 4, sel, i * size_t(D) * 4, size_t(D) * 4);
    region.end();  // the head's logits are the step's output: not in the region's arena
    const Buffer logits = headLogits(sel, int64_t(outRows.size()), m_w.lmHead);
    // Host logits: one download for the whole batch unless some step keeps its rows on the device, then
    // one per host step (the device steps' rows never cross).
    bool anyOnDevice = false;
    for (const SeqStep& s : steps) anyOnDevice = anyOnDevice || s.logitsOnDevice;
    std::vector<float> all;
    if (!anyOnDevice) {
        all.resize(outRows.size() * size_t(V));
        be.download(logits, all.data(), all.size() * 4);
    }

    std::vector<ForwardResult> out(steps.size());
    size_t o = 0;
    for (size_t s = 0; s < steps.size(); ++s) {
        const int64_t rows = steps[s].lastOnly ? 1 : b.rows(s);
        if (steps[s].logitsOnDevice) {
            out[s].deviceLogits = logits;
            out[s].deviceRow = int64_t(o);
        } else if (!anyOnDevice) {
            out[s].logits.assign(all.begin() + int64_t(o) * V, all.begin() + int64_t(o + size_t(rows)) * V);
        } else {
            out[s].logits.resize(size_t(rows * V));
            be.download(logits, out[s].logits.data(), out[s].logits.size() * 4, o * size_t(V) * 4);
        }
        if (steps[s].wantHidden) {
            out[s].hidden.resize(size_t(rows * D));
            be.download(sel, out[s].hidden.data(), out[s].hidden.size() * 4, o * size_t(D) * 4);
        }
        o += size_t(rows);
        out[s].indexer = b.stats[s];
        if (steps[s].recordSelection)
            out[s].indexer.selectionHash.assign(b.rowHash.begin() + b.rowStart[s], b.rowHash.begin() + b.rowStart[s + 1]);
        else
            out[s].indexer.selectionHash.clear();
    }
    return out;
}

ForwardResult Glm5NextModel::forward(const int32_t* ids, int64_t T, SequenceState& state, bool lastOnly,
                                     bool wantHidden, bool recordSelection) const {
    TS_CHECK(T > 0, "forward of zero tokens");
    state.reserve(state.length() + T);
    SeqStep s;
    s.ids = ids;
    s.n = T;
    s.pos0 = state.length();
    s.caches = state.caches();
    s.lastOnly = lastOnly;
    s.wantHidden = wantHidden;
    s.recordSelection = recordSelection;
    s.recordTies = true;
    ForwardResult r = std::move(forwardBatch({s})[0]);
    state.advance(T);
    return r;
}

Buffer Glm5NextModel::headLogits(const Buffer& normed, int64_t rows, const WeightView& head) const {
    Buffer out = m_backend.allocUninit(static_cast<size_t>(rows * head.rows) * 4);  // linear writes it all
    m_backend.linear(normed, rows, head, out);
    return out;
}

ForwardResult Glm5NextModel::forwardMtp(const float* hidden, const int32_t* nextIds, int64_t T,
                                        SequenceState& mtpState) const {
    const TextConfig& c = m_cfg.text;
    const MtpWeights& w = m_w.mtp;
    if (!w.present) fail(ErrorKind::Unsupported, "this checkpoint has no MTP block");
    TS_CHECK(T > 0, "forwardMtp of zero tokens");
    checkIds(nextIds, T);
    Backend& be = m_backend;
    const int64_t D = c.hidden_size, pos0 = mtpState.length();
    mtpState.reserve(pos0 + T);

    std::vector<SeqStep> steps(1);
    steps[0].ids = nextIds;
    steps[0].n = T;
    steps[0].pos0 = pos0;
    steps[0].caches = mtpState.caches();
    Batch b;
    b.steps = &steps;
    b.rowStart = {0, T};
    b.T = T;
    b.stats.resize(1);

    // No zero fill: embedding, concatColumns, linear and rmsnorm write their whole outputs (position 0's
    // embedding is zeroed explicitly).
    Buffer e = be.allocUninit(static_cast<size_t>(T * D) * 4), h = be.upload(hidden, static_cast<size_t>(T * D) * 4);
    be.embedding(nextIds, T, m_w.embed, e);
    if (pos0 == 0) be.zero(e.viewF32(0, size_t(D)));
    be.rmsnorm(e, T, D, w.enorm, c.rms_norm_eps, e);
    be.rmsnorm(h, T, D, w.hnorm, c.rms_norm_eps, h);
    Buffer eh = be.allocUninit(static_cast<size_t>(T * 2 * D) * 4);
    const Buffer parts[2] = {e, h};
    const int64_t widths[2] = {D, D};
    be.concatColumns(parts, widths, 2, T, eh);
    Buffer z = be.allocUninit(static_cast<size_t>(T * D) * 4), xn = be.allocUninit(static_cast<size_t>(T * D) * 4);
    be.linear(eh, T, w.ehProj, z);

    // One DSA-MLA decoder layer with a plain residual (no mHC), then shared_head.
    be.rmsnorm(z, T, D, w.layer.inputNorm, c.rms_norm_eps, xn);
    Buffer a = mlaForward(w.layer.mla, c.num_hidden_layers, xn, b);
    be.add(a, z, T * D);
    be.rmsnorm(z, T, D, w.layer.postAttnNorm, c.rms_norm_eps, xn);
    Buffer m = w.layer.denseMlp ? mlpForward(w.layer.mlp, xn, T, c.intermediate_size) : moeForward(w.layer.moe, xn, T, nullptr);
    be.add(m, z, T * D);
    be.rmsnorm(z, T, D, w.headNorm, c.rms_norm_eps, xn);
    ForwardResult r;
    r.logits.resize(size_t(T * w.head.rows));
    be.download(headLogits(xn, T, w.head), r.logits.data(), r.logits.size() * 4);
    r.indexer = b.stats[0];
    mtpState.advance(T);
    return r;
}

}  // namespace ts
