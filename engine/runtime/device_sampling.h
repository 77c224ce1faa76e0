// Sampling a step's rows where their logits are: on the backend (Backend::sampleRows) when it has a
// sampling path, else on the host (runtime/sampler.h, the reference). Either way the token is the host
// sampler's for the same logits and the same uniform number:
// - each row's one uniform number is drawn from its sequence's SamplerRng here, in row order, before
//   anything runs (only for rows that draw one: drawsUniform), and given to whichever side samples;
// - rows the backend hands back (SampleOutput::status: a NaN / +inf logit, every token masked, or a
//   top_p / inverse-CDF comparison within the rounding bound of the host's) are redone by the host
//   sampler on that row alone (one row downloaded), which also raises the host's numerical errors.
// Only token ids, logprobs and top-N come back from the device; the logits stay where they are.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend.h"
#include "runtime/sampler.h"

namespace ts {

// One row to sample: row `row` of the logits buffer holds the model's next-token logits for `seq`.
struct LogitRow {
    const Sequence* seq = nullptr;
    int64_t row = 0;
    bool suppressStop = false;  // min_tokens not reached: eos / stop ids are held back
};

// Samples every row of `rows` from `logits` ([*, vocab] fp32 on `backend`); one result per row, in order.
// Throws what the host sampler throws for a row (ts::Error Internal "numerical error ...").
std::vector<SampleResult> sampleLogitRows(Backend& backend, const Buffer& logits, int64_t vocab,
                                          const std::vector<LogitRow>& rows,
                                          const std::function<SamplerRng&(const Sequence&)>& rngFor,
                                          const std::vector<int32_t>& eosIds);

// The request Backend::sampleRows gets for one row (used by sampleLogitRows and the op self-test).
// `adjust` must outlive the request (it points into it).
DeviceSampleRequest deviceSampleRequest(const SamplingParams& p, int64_t row, double uniform,
                                        const std::vector<SampleLogitAdjust>& adjust);

// A device result as the host sampler reports it (logprob and top only when p.logprobs asked for them).
SampleResult sampleResultOf(const SampleOutput& o, const SamplingParams& p);

}  // namespace ts
