// Runs one scheduled step on the model (the nano-vllm ModelRunner): loads or resets KDA states, builds the
// per-sequence SeqSteps over the paged pool, runs forwardBatch, captures snapshots, and samples (on the
// backend when it can: the logits stay there; runtime/device_sampling.h).
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "cache/kv_pool.h"
#include "model/glm5_next.h"
#include "runtime/sampler.h"
#include "runtime/scheduler.h"

namespace ts {

class ModelRunner {
public:
    ModelRunner(const Glm5NextModel& model, const KvPoolConfig& pool);

    const KvPool& pool() const { return m_pool; }
    // Computes every ScheduledSeq of `out`; returns one SampleResult per entry with samples == true, in
    // order. rngFor(seq) gives the sequence's sampler RNG.
    std::vector<SampleResult> step(const SchedulerOutput& out, const std::function<SamplerRng&(const Sequence&)>& rngFor);

private:
    const Glm5NextModel& m_model;
    KvPool m_pool;
};

}  // namespace ts
