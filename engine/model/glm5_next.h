// The glm5_next (GLM-5.3-Flash) text model: mHC residual streams, KDA and DSA-MLA layers, dense MLP /
// MoE, HyperHead mean, final norm, lm_head; plus the MTP block. glm_dsa.md §8 and §11 are the math.
//
// forwardBatch() runs one step over several sequences at once: their new tokens are concatenated into
// T rows; row-wise work (projections, mHC, norms, MoE) runs over all rows together, and the per-sequence
// work (KDA recurrence, cache writes, indexer, sparse attention) over each sequence's rows with its own
// caches. Every op treats rows independently, so a sequence gets bit-identical logits whether it is
// prefilled at once, in chunks, token by token, or batched with others (tests/golden/test_forward_consistency).
#pragma once

#include <functional>
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
    std::vector<float> logits;  // [rows, vocab]: all rows of the step, or only the last when lastOnly
                                // (empty when the step asked for logitsOnDevice)
    // SeqStep::logitsOnDevice: the rows stay on the backend (a device sampler reads them there, and only
    // a few bytes per row come back): deviceLogits is the batch's whole [R, vocab] fp32 buffer, shared by
    // every step that asked, and this step's first row in it is deviceRow.
    Buffer deviceLogits;
    int64_t deviceRow = -1;
    std::vector<float> hidden;  // [rows, D] after the final norm (lm_head / MTP input), when asked
    IndexerStats indexer;       // top-k ties at the selection boundary; selectionHash when recorded
};

// One sequence's part of a step: tokens ids[0..n) at positions pos0 … pos0+n−1 of its caches.
struct SeqStep {
    const int32_t* ids = nullptr;
    int64_t n = 0;
    int64_t pos0 = 0;
    SeqCaches caches;
    bool lastOnly = false;         // logits (and hidden) of the last row only
    bool logitsOnDevice = false;   // leave the logits on the backend (ForwardResult::deviceLogits)
    bool wantHidden = false;
    bool recordSelection = false;  // fill indexer.selectionHash (diagnostics, tests)
    // Count the indexer's top-k ties (ForwardResult::indexer): a diagnostic that costs a device backend
    // one host round trip per indexer layer, so the serving path leaves it off (forward() turns it on).
    bool recordTies = false;
};

// Calibration hook (the EXL3 quantizer's Hessian capture, quant/exl3_calibration.h). When one is set,
// every MLP (dense, shared expert, routed expert; main layers and the MTP block) reports what its
// projections read: in [T, D], the input of gate_proj and up_proj, and act [T, I], the SwiGLU output that
// down_proj reads. A routed expert reports only the tokens routed to it. The MLP is identified by its
// address inside weights().
class MlpObserver {
public:
    virtual ~MlpObserver() = default;
    virtual void observe(const MlpWeights& mlp, const Buffer& in, const Buffer& act, int64_t T, int64_t D,
                         int64_t I) = 0;
};

// A load's progress: bytes of weights made ready on the backend (uploaded, on a device backend) so far, of all.
// Called once with done = 0, then after every weight; a caller that prints throttles itself.
using LoadProgress = std::function<void(int64_t doneBytes, int64_t totalBytes)>;

// "1.5 / 60.0 GiB (2 %)": both figures in the total's unit, GiB from 1 GiB up and MiB below it (the embedded EXL3
// model uploads 17.3 MiB, which in GiB read "0.0 / 0.0").
std::string formatLoadProgress(int64_t doneBytes, int64_t totalBytes);

class Glm5NextModel {
public:
    // Loads config.json (+ generation_config.json), binds the safetensors weights of `dir` (`binding`: layer by
    // layer; a minute or more for the full-size model on a cold page cache) and has the backend make each ready (a
    // device backend uploads them: minutes for the full-size model, hence `progress`).
    Glm5NextModel(const std::string& dir, Backend& backend, const LoadProgress& progress = {},
                  const BindProgress& binding = {});
    // Tells the backend to drop its uploads of these weights (their host memory is unmapped next).
    ~Glm5NextModel();
    Glm5NextModel(const Glm5NextModel&) = delete;
    Glm5NextModel& operator=(const Glm5NextModel&) = delete;

    const ModelConfig& config() const { return m_cfg; }
    const TextConfig& text() const { return m_cfg.text; }
    const ModelWeights& weights() const { return m_w; }
    Backend& backend() const { return m_backend; }
    bool hasMtp() const { return m_w.mtp.present; }

    std::unique_ptr<SequenceState> newSequence(KvCacheDtype cacheDtype) const;
    // The caches of the MTP block's own position stream (requires hasMtp()).
    std::unique_ptr<SequenceState> newMtpSequence(KvCacheDtype cacheDtype) const;

    // One step over several sequences (see above). The caller has made room in each sequence's pages
    // for positions < pos0 + n.
    std::vector<ForwardResult> forwardBatch(const std::vector<SeqStep>& steps) const;

    // Convenience for one self-contained sequence: appends ids[0..T) at state.length() and advances it.
    ForwardResult forward(const int32_t* ids, int64_t T, SequenceState& state, bool lastOnly = false,
                          bool wantHidden = false, bool recordSelection = false) const;

    // MTP draft logits [T, vocab] (§3.6): row t from the main model's final hidden state hidden[t] (at
    // position p = mtpState.length() + t) and the embedding of the token at p + 1, nextIds[t]; the
    // embedding is zeroed at position 0 (as vLLM). Appends T entries to the MTP caches.
    ForwardResult forwardMtp(const float* hidden, const int32_t* nextIds, int64_t T, SequenceState& mtpState) const;

    // Checks ids against the vocabulary; throws InvalidArgument naming the first bad one.
    void checkIds(const int32_t* ids, int64_t T) const;

    // nullptr (the default) = no calibration hook. Set it only while no forward runs.
    void setMlpObserver(MlpObserver* observer) { m_mlpObserver = observer; }

private:
    struct Batch;  // per-step workspace and row bookkeeping
    void runLayer(int L, Batch& b) const;
    Buffer kdaForward(const KdaWeights& w, int L, Batch& b) const;
    Buffer mlaForward(const MlaWeights& w, int L, const Buffer& x, Batch& b) const;
    Buffer mlpForward(const MlpWeights& w, const Buffer& x, int64_t T, int64_t I) const;
    Buffer moeForward(const MoeWeights& w, const Buffer& x, int64_t T, std::vector<uint64_t>* rowHash) const;
    // lm_head over `rows` normed rows: the logits [rows, V] on the backend.
    Buffer headLogits(const Buffer& normed, int64_t rows, const WeightView& head) const;

    Backend& m_backend;
    ModelConfig m_cfg;
    std::unique_ptr<SafetensorsCheckpoint> m_ckpt;
    ModelWeights m_w;
    MlpObserver* m_mlpObserver = nullptr;
};

}  // namespace ts
