// The glm5_next (GLM-5.3-Flash) text model: mHC residual streams, KDA and DSA-MLA layers, dense MLP /
// MoE, HyperHead mean, final norm, lm_head; plus the MTP block. glm_dsa.md §8 and §11 are the math.
//
// forward() appends T tokens of one sequence to its SequenceState and returns their logits. Every op
// treats rows independently, so one prefill, a chunked prefill and token-by-token decode of the same
// tokens produce bit-identical logits (tested in tests/unit/test_forward_consistency).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/sequence_state.h"
#include "model/weights.h"

namespace ts {

struct ForwardResult {
    std::vector<float> logits;  // [rows, vocab]: all T rows, or only the last when lastOnly
    std::vector<float> hidden;  // [T, D] after the final norm (input of lm_head and of the MTP block)
    IndexerStats indexer;       // top-k ties at the selection boundary, over all full indexer layers
};

class Glm5NextModel {
public:
    // Loads config.json (+ generation_config.json) and binds the safetensors weights of `dir`.
    Glm5NextModel(const std::string& dir, Backend& backend);

    const ModelConfig& config() const { return m_cfg; }
    const TextConfig& text() const { return m_cfg.text; }
    const ModelWeights& weights() const { return m_w; }
    Backend& backend() const { return m_backend; }
    bool hasMtp() const { return m_w.mtp.present; }

    std::unique_ptr<SequenceState> newSequence(KvCacheDtype cacheDtype) const;
    // The caches of the MTP block's own position stream (requires hasMtp()).
    std::unique_ptr<SequenceState> newMtpSequence(KvCacheDtype cacheDtype) const;

    // Appends ids[0..T) at positions state.length() … and advances the state.
    // recordSelection: fill result.indexer.selectionHash (one value per token) for diagnostics.
    ForwardResult forward(const int32_t* ids, int64_t T, SequenceState& state, bool lastOnly = false,
                          bool wantHidden = false, bool recordSelection = false) const;

    // MTP draft logits [T, vocab] (§3.6): row t from the main model's final hidden state hidden[t] (at
    // position p = mtpState.length() + t) and the embedding of the token at p + 1, nextIds[t]; the
    // embedding is zeroed at position 0 (as vLLM). Appends T entries to the MTP caches.
    ForwardResult forwardMtp(const float* hidden, const int32_t* nextIds, int64_t T, SequenceState& mtpState) const;

    // Checks ids against the vocabulary; throws InvalidArgument naming the first bad one.
    void checkIds(const int32_t* ids, int64_t T) const;

private:
    struct Step;  // per-call workspace
    void runLayer(const LayerWeights& lw, int layerIndex, bool linear, Step& s, LayerState& ls, int64_t pos0,
                  Buffer& prevIdx, IndexerStats& stats) const;
    Buffer kdaForward(const KdaWeights& w, const Buffer& x, int64_t T, LayerState& ls) const;
    Buffer mlaForward(const MlaWeights& w, const Buffer& x, int64_t T, LayerState& ls, int64_t pos0, KvCacheDtype dt,
                      Buffer& prevIdx, IndexerStats& stats) const;
    Buffer mlpForward(const MlpWeights& w, const Buffer& x, int64_t T, int64_t I) const;
    Buffer moeForward(const MoeWeights& w, const Buffer& x, int64_t T, IndexerStats* stats = nullptr) const;
    std::vector<float> logitsOf(const Buffer& normed, int64_t T, const WeightView& head, bool lastOnly) const;

    Backend& m_backend;
    ModelConfig m_cfg;
    std::unique_ptr<SafetensorsCheckpoint> m_ckpt;
    ModelWeights m_w;
};

}  // namespace ts
