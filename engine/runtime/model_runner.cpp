#include "runtime/model_runner.h"

#include "core/error.h"
#include "runtime/device_sampling.h"

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
        st.logitsOnDevice = true;  // sampled where they are (runtime/device_sampling.h); other rows are unused
        steps.push_back(st);
    }
    std::vector<ForwardResult> res = m_model.forwardBatch(steps);

    std::vector<LogitRow> rows;
    for (size_t i = 0; i < out.seqs.size(); ++i) {
        const ScheduledSeq& s = out.seqs[i];
        if (s.captureSnapshot >= 0) m_pool.saveSnapshot(s.seq->stateSlot, s.captureSnapshot);
        if (!s.samples) continue;
        const Sequence& seq = *s.seq;
        rows.push_back({&seq, res[i].deviceRow, seq.numCompletionTokens() < seq.params().minTokens});
    }
    if (rows.empty()) return {};
    return sampleLogitRows(m_model.backend(), res.front().deviceLogits, m_model.text().vocab_size, rows, rngFor,
                           m_model.text().eos_token_ids);
}

}  // namespace ts
