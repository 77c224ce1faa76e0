// Continuous batching (the nano-vllm / vLLM v1 Scheduler): which sequences run in the next step and on how
// many tokens, under MAX_NUM_SEQS and MAX_NUM_BATCHED_TOKENS.
//
// schedule() builds one mixed batch:
//   1. decode: every running sequence whose prompt is computed gets its one new token, oldest first. When
//      the pool cannot give it a block, the newest running sequence is preempted (all its blocks freed, put
//      back at the FRONT of the waiting queue, recomputed from scratch later: prefix hits make that cheap when
//      its blocks are still cached), down to the sequence itself;
//   2. chunked prefill of running sequences whose prompt is not fully computed, then admission of waiting
//      sequences in FCFS order (stopping at the first that does not fit), each chunk as large as the token
//      budget left. Admission allocates blocks for the whole prompt at once (BlockManager::allocate), so a
//      prefill never needs blocks mid-way.
//   A prefill chunk that would cross the sequence's KDA snapshot boundary is cut there, so that the runner
//   can capture the recurrent state exactly at the boundary (captureSnapshot).
// The runner computes, for each ScheduledSeq, tokens [seq->numComputed, seq->numComputed + numTokens):
//   - before the chunk: restoreSnapshot >= 0: load that snapshot into the sequence's state slot; else if
//     seq->numComputed == 0: zero the state (cold start); else the slot already holds the state;
//   - after it: captureSnapshot >= 0: copy the state into that snapshot slot;
//   - samples: the chunk reaches the last token, so the logits of its last position are sampled.
// postprocess() then advances the sequences, appends the sampled tokens and finishes sequences.
// Sequence::stateSlot (KDA state, one of maxNumSeqs) is assigned on admission and released on preemption,
// finish and abort.
//
// The scheduler keeps raw pointers: the caller owns every Sequence and keeps it alive until it is finished
// and the postprocess() of any step that scheduled it has run. Not thread safe (the engine thread): apply
// aborts between steps, or after the runner executed a step and before its postprocess() (the aborted entry
// is then skipped); never between schedule() and the runner, which would see a sequence without blocks.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "cache/block_manager.h"
#include "runtime/sequence.h"

namespace ts {

struct SchedulerConfig {
    int32_t maxNumSeqs = 4;               // running sequences (each owns a KDA state slot)
    int64_t maxNumBatchedTokens = 1024;   // tokens per step, prefill and decode together
    int64_t maxModelLen = 900000;         // prompt + completion
    int32_t blockSize = 64;               // must equal the BlockManager's
    std::vector<int32_t> eosTokenIds;     // generation_config's eos ids (finish unless ignore_eos)
};

struct ScheduledSeq {
    Sequence* seq = nullptr;
    int64_t numTokens = 0;        // tokens to compute this step, from seq->numComputed
    bool isPrefill = false;       // false: a single-token decode of the last sampled token
    bool samples = false;         // the chunk ends at the last token: one token is sampled for it
    int32_t restoreSnapshot = -1;  // see the header comment
    int32_t captureSnapshot = -1;
};

struct SchedulerOutput {
    std::vector<ScheduledSeq> seqs;
    std::vector<Sequence*> preempted;  // back in the waiting queue, their blocks and state slot freed
    bool empty() const { return seqs.empty(); }
};

class Scheduler {
public:
    Scheduler(SchedulerConfig config, BlockManager& blocks);

    // Queues a new sequence. Throws ts::Error(InvalidArgument) when its prompt is empty, longer than
    // maxModelLen, or longer than the whole pool can hold; (Internal) when it is not a fresh Waiting sequence.
    void add(Sequence* seq);
    SchedulerOutput schedule();
    // sampledTokens: one per ScheduledSeq with samples == true, in order. Returns the sequences this call
    // finished (Stop / Length). Entries whose sequence was finished or aborted since schedule() are skipped.
    std::vector<Sequence*> postprocess(const std::vector<ScheduledSeq>& scheduled,
                                       const std::vector<int32_t>& sampledTokens);
    // Finishes a waiting or running sequence now (stop strings, client gone): frees its blocks and state
    // slot. Returns false if no unfinished sequence has this id.
    bool finish(int64_t id, FinishReason reason);
    bool abort(int64_t id) { return finish(id, FinishReason::Abort); }

    bool hasWork() const { return !m_waiting.empty() || !m_running.empty(); }
    int32_t numWaiting() const { return int32_t(m_waiting.size()); }
    int32_t numRunning() const { return int32_t(m_running.size()); }
    int64_t numPreemptions() const { return m_numPreemptions; }
    // min(maxModelLen, pool tokens): a sequence stops with Length when it holds this many tokens.
    int64_t effectiveMaxLen() const { return m_maxLen; }

private:
    void preempt(Sequence* seq, SchedulerOutput& out);
    void release(Sequence* seq, FinishReason reason);  // finish: blocks, state slot, status
    ScheduledSeq prefillChunk(Sequence* seq, int64_t budget, int32_t restore);
    bool stopsOn(const Sequence& seq, int32_t token) const;

    SchedulerConfig m_config;
    BlockManager& m_blocks;
    int64_t m_maxLen;
    std::deque<Sequence*> m_waiting;
    std::vector<Sequence*> m_running;  // admission order: preemption takes from the back
    std::vector<int32_t> m_freeStateSlots;
    int64_t m_numPreemptions = 0;
};

}  // namespace ts
