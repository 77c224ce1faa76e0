#include "runtime/model_runner.h"

#include "core/error.h"

namespace ts {

ModelRunner::ModelRunner(const Glm5NextModel& model, const KvPoolConfig& pool)
    : m_model(model), m_pool(model.backend(), model.text(), pool) {}

std::vector<SampleResult> ModelRunner::step(const SchedulerOutput& out,
                                            const std::function<SamplerRng&(const Sequence&)>& rngFor) {
    std::vector<SeqStep> steps;
    steps.reserve(out.seqs.size());
    for (const ScheduledSeq& s : out.seqs) {
        Sequence& seq = *s.seq;
        TS_CHECK(seq.stateSlot >= 0, "scheduled sequence without a state slot");
        // State before the chunk: a snapshot, a cold start, or what the slot already holds.
        if (s.restoreSnapshot >= 0) m_pool.restoreSnapshot(s.restoreSnapshot, seq.stateSlot);
        else if (seq.numComputed == 0) m_pool.resetSlot(seq.stateSlot);
        SeqStep st;
        st.ids = seq.tokens().data() + seq.numComputed;
        st.n = s.numTokens;
        st.pos0 = seq.numComputed;
        st.caches = m_pool.caches(seq.stateSlot, seq.blockTable);
        st.lastOnly = true;
        steps.push_back(st);
    }
    std::vector<ForwardResult> res = m_model.forwardBatch(steps);

    std::vector<SampleResult> sampled;
    const int64_t V = m_model.text().vocab_size;
    const auto& eos = m_model.text().eos_token_ids;
    for (size_t i = 0; i < out.seqs.size(); ++i) {
        const ScheduledSeq& s = out.seqs[i];
        if (s.captureSnapshot >= 0) m_pool.saveSnapshot(s.seq->stateSlot, s.captureSnapshot);
        if (!s.samples) continue;
        const Sequence& seq = *s.seq;
        const bool suppressStop = seq.numCompletionTokens() < seq.params().minTokens;
        sampled.push_back(sample(res[i].logits.data(), V, seq, rngFor(seq), suppressStop, eos));
    }
    return sampled;
}

}  // namespace ts
