#include "runtime/scheduler.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ts {

namespace {

// The last sampled token is the only one left to compute: a one-token decode step.
bool isDecode(const Sequence& s) { return s.numComputed == s.numTokens() - 1 && s.numCompletionTokens() > 0; }

bool contains(const std::vector<int32_t>& v, int32_t t) { return std::find(v.begin(), v.end(), t) != v.end(); }

}  // namespace

Scheduler::Scheduler(SchedulerConfig config, BlockManager& blocks) : m_config(std::move(config)), m_blocks(blocks) {
    const SchedulerConfig& c = m_config;
    if (c.maxNumSeqs < 1 || c.maxNumBatchedTokens < 1 || c.maxModelLen < 1)
        fail(ErrorKind::InvalidArgument, "scheduler: max_num_seqs, max_num_batched_tokens and max_model_len must be "
                                         "positive (got " + std::to_string(c.maxNumSeqs) + ", " +
                                             std::to_string(c.maxNumBatchedTokens) + ", " +
                                             std::to_string(c.maxModelLen) + ")");
    // A step must be able to decode every running sequence.
    if (c.maxNumBatchedTokens < c.maxNumSeqs)
        fail(ErrorKind::InvalidArgument, "scheduler: max_num_batched_tokens (" + std::to_string(c.maxNumBatchedTokens) +
                                             ") must be >= max_num_seqs (" + std::to_string(c.maxNumSeqs) + ")");
    if (c.blockSize != blocks.blockSize())
        fail(ErrorKind::InvalidArgument, "scheduler: block size " + std::to_string(c.blockSize) +
                                             " differs from the block pool's " + std::to_string(blocks.blockSize()));
    m_maxLen = std::min<int64_t>(c.maxModelLen, int64_t(blocks.numBlocks()) * blocks.blockSize());
    for (int32_t s = c.maxNumSeqs - 1; s >= 0; --s) m_freeStateSlots.push_back(s);
}

void Scheduler::add(Sequence* seq) {
    TS_CHECK(seq != nullptr, "add: null sequence");
    TS_CHECK(seq->status == SeqStatus::Waiting && seq->blockTable.empty() && seq->numComputed == 0,
             "add: sequence " + std::to_string(seq->id()) + " is not a fresh waiting sequence");
    const std::string who = "request " + std::to_string(seq->id()) + ": ";
    const int64_t n = seq->numTokens();
    if (n == 0) fail(ErrorKind::InvalidArgument, who + "the prompt is empty");
    if (n > m_config.maxModelLen)
        fail(ErrorKind::InvalidArgument, who + "the prompt has " + std::to_string(n) +
                                             " tokens, more than the maximum model length of " +
                                             std::to_string(m_config.maxModelLen));
    const int64_t poolTokens = int64_t(m_blocks.numBlocks()) * m_blocks.blockSize();
    if (n > poolTokens)
        fail(ErrorKind::InvalidArgument, who + "the prompt has " + std::to_string(n) +
                                             " tokens, more than the KV cache can ever hold (" +
                                             std::to_string(poolTokens) + " tokens)");
    m_waiting.push_back(seq);
}

ScheduledSeq Scheduler::prefillChunk(Sequence* s, int64_t budget, int32_t restore) {
    const int64_t remaining = s->numTokens() - s->numComputed;
    int64_t n = std::min(remaining, budget);
    const int64_t boundary = m_blocks.snapshotBoundary(*s);
    if (boundary > 0 && s->numComputed + n > boundary) n = boundary - s->numComputed;  // capture exactly there
    ScheduledSeq e;
    e.seq = s;
    e.numTokens = n;
    e.isPrefill = remaining > 1 || s->numCompletionTokens() == 0;
    e.samples = s->numComputed + n == s->numTokens();
    e.restoreSnapshot = restore;
    e.captureSnapshot = s->numComputed + n == boundary ? m_blocks.snapshotSlotToCapture(*s) : -1;
    return e;
}

SchedulerOutput Scheduler::schedule() {
    SchedulerOutput out;
    int64_t budget = m_config.maxNumBatchedTokens;

    // 1. Decode steps first, oldest first; make room by preempting the newest.
    for (size_t i = 0; i < m_running.size() && budget > 0;) {
        Sequence* s = m_running[i];
        if (!isDecode(*s)) {
            ++i;
            continue;
        }
        bool preemptedSelf = false;
        while (!m_blocks.canGrow(*s, s->numTokens())) {
            Sequence* victim = m_running.back();
            preempt(victim, out);
            if (victim == s) {
                preemptedSelf = true;
                break;
            }
        }
        if (preemptedSelf) break;  // s was the newest: everything before it is scheduled
        m_blocks.grow(*s, s->numTokens());
        ScheduledSeq e;
        e.seq = s;
        e.numTokens = 1;
        e.samples = true;
        out.seqs.push_back(e);
        --budget;
        ++i;
    }

    // 2. Running sequences still in their prefill (their blocks were allocated on admission). A long prompt
    // does not hold the others back: when more than one prefill wants this step (running ones, and a waiting
    // request that could be admitted now), each running one takes at most an even share of what is left, so a
    // short request's first token never waits for a long prompt's whole prefill (the end vLLM's
    // long_prefill_token_threshold serves). Alone, a prefill takes the whole budget.
    const int64_t prefilling = std::count_if(m_running.begin(), m_running.end(), [](Sequence* s) { return !isDecode(*s); });
    const bool admissible = out.preempted.empty() && !m_waiting.empty() &&
                            int32_t(m_running.size()) < m_config.maxNumSeqs && m_blocks.canAllocate(*m_waiting.front());
    const int64_t sharers = prefilling + (admissible ? 1 : 0);
    const int64_t share = sharers > 1 ? std::max<int64_t>(1, budget / sharers) : budget;
    for (Sequence* s : m_running) {
        if (budget == 0) break;
        if (isDecode(*s)) continue;
        out.seqs.push_back(prefillChunk(s, std::min(budget, share), -1));
        budget -= out.seqs.back().numTokens;
    }

    // 3. Admission, FCFS. Not in a step that had to preempt (vLLM v1): that would re-admit the victim at once.
    while (out.preempted.empty() && !m_waiting.empty() && budget > 0 &&
           int32_t(m_running.size()) < m_config.maxNumSeqs) {
        Sequence* s = m_waiting.front();
        if (!m_blocks.canAllocate(*s)) break;
        const BlockManager::Allocation a = m_blocks.allocate(*s);
        m_waiting.pop_front();
        TS_CHECK(!m_freeStateSlots.empty(), "schedule: no free state slot");
        s->stateSlot = m_freeStateSlots.back();
        m_freeStateSlots.pop_back();
        s->status = SeqStatus::Running;
        m_running.push_back(s);
        out.seqs.push_back(prefillChunk(s, budget, a.restoreSnapshot));
        budget -= out.seqs.back().numTokens;
    }
    return out;
}

void Scheduler::preempt(Sequence* seq, SchedulerOutput& out) {
    TS_CHECK(!m_running.empty() && m_running.back() == seq, "preempt: not the newest running sequence");
    m_running.pop_back();
    m_blocks.deallocate(*seq);  // numComputed, numCachedPrompt and the block table reset here
    m_freeStateSlots.push_back(seq->stateSlot);
    seq->stateSlot = -1;
    seq->status = SeqStatus::Waiting;
    ++seq->numPreemptions;
    ++m_numPreemptions;
    m_waiting.push_front(seq);
    out.preempted.push_back(seq);
}

bool Scheduler::stopsOn(const Sequence& seq, int32_t token) const {
    const SamplingParams& p = seq.params();
    if (seq.numCompletionTokens() < p.minTokens) return false;
    if (!p.ignoreEos && contains(m_config.eosTokenIds, token)) return true;
    return contains(p.stopTokenIds, token);
}

std::vector<Sequence*> Scheduler::postprocess(const std::vector<ScheduledSeq>& scheduled,
                                              const std::vector<int32_t>& sampledTokens) {
    const auto numSampling = std::count_if(scheduled.begin(), scheduled.end(), [](const ScheduledSeq& e) { return e.samples; });
    TS_CHECK(size_t(numSampling) == sampledTokens.size(),
             "postprocess: " + std::to_string(sampledTokens.size()) + " sampled tokens for " +
                 std::to_string(numSampling) + " sampling sequences");
    std::vector<Sequence*> finished;
    size_t k = 0;
    for (const ScheduledSeq& e : scheduled) {
        const int32_t token = e.samples ? sampledTokens[k++] : -1;
        Sequence* s = e.seq;
        if (s->status != SeqStatus::Running) continue;  // finished or aborted after schedule()
        s->numComputed += e.numTokens;
        TS_CHECK(s->numComputed <= s->numTokens(), "postprocess: computed past the last token");
        m_blocks.commitComputed(*s);
        if (!e.samples) continue;
        s->appendToken(token);
        // vLLM v1's check_stop order: length limits first, then eos, then stop token ids.
        FinishReason r = FinishReason::None;
        if (s->numCompletionTokens() >= s->params().maxTokens || s->numTokens() >= m_maxLen)
            r = FinishReason::Length;
        else if (stopsOn(*s, token))
            r = FinishReason::Stop;
        if (r != FinishReason::None) {
            release(s, r);
            finished.push_back(s);
        }
    }
    return finished;
}

bool Scheduler::finish(int64_t id, FinishReason reason) {
    for (Sequence* s : m_running)
        if (s->id() == id) {
            release(s, reason);
            return true;
        }
    for (Sequence* s : m_waiting)
        if (s->id() == id) {
            release(s, reason);
            return true;
        }
    return false;
}

void Scheduler::release(Sequence* s, FinishReason reason) {
    if (s->status == SeqStatus::Running) {
        m_running.erase(std::find(m_running.begin(), m_running.end(), s));
        m_freeStateSlots.push_back(s->stateSlot);
        s->stateSlot = -1;
    } else {
        m_waiting.erase(std::find(m_waiting.begin(), m_waiting.end(), s));
    }
    m_blocks.deallocate(*s);
    s->status = SeqStatus::Finished;
    s->finish = reason;
}

}  // namespace ts
