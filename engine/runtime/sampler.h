// Token sampling for one sequence from one row of logits, in vLLM v1's order:
//   1. logprobs are taken from the RAW logits (log_softmax; vLLM's default logprobs_mode "raw_logprobs");
//   2. min_tokens: while the caller says so, eos (unless ignore_eos) and stop token ids get -inf;
//   3. penalties: repetition (tokens seen in prompt + output: positive logits divided, negative multiplied),
//      then frequency and presence (output tokens only, subtracted);
//   4. temperature < 1e-5 means greedy: argmax, ties to the lowest id;
//   5. otherwise divide by the temperature, then min_p (drop p < min_p * p_max), then top_k (keep every token
//      whose logit is >= the k-th largest: ties at the cut are kept, as vLLM's masking does), then top_p
//      (keep the smallest most-probable set whose mass reaches top_p, renormalised over what min_p and top_k
//      left), and draw one token from what remains with one uniform number: inverse CDF over the candidates
//      in increasing token id, or, when top_p cut, in the top_p ranking (more probable first, ties: lower id
//      first). Both orders are fixed by the input alone, so a seed reproduces its tokens, and a device
//      sampler (Backend::sampleRows) can reproduce them.
// vLLM v1 applies min_p before top_k/top_p (it is an "argmax-invariant logits processor" run right after the
// temperature); v0 applied it after. Only the top_p set can differ between the two orders.
// Everything is CPU and single-threaded: the row is copied once; candidate sets are partially sorted so that
// a 150k vocabulary costs a few O(V) passes, not a full sort, in the usual case. runtime/device_sampling.h
// runs the same sampling on the backend where it can.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "backend.h"
#include "runtime/sequence.h"

namespace ts {

// Per-sequence random stream. Seeded from SamplingParams::seed when set (same seed + same logits = same
// tokens), else from the process's random device. Owned by whoever owns the sequence; one draw per token.
class SamplerRng {
public:
    explicit SamplerRng(std::optional<uint64_t> seed);
    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return double(m_gen() >> 11) * 0x1.0p-53; }

private:
    std::mt19937_64 m_gen;
};

struct SampleResult {
    int32_t token = -1;
    // Only filled when params.logprobs >= 0 (else 0 and empty): the raw log_softmax of the sampled token, and
    // the params.logprobs most likely raw tokens, best first (ties: lower id first).
    float logprob = 0.0f;
    std::vector<std::pair<int32_t, float>> top;
    // Set (token -1) when this row could not be sampled: sampleLogitRows fails that one row, not the batch.
    std::string error;
};

// Throws ts::Error(InvalidArgument) naming the first bad field. vocab > 0 also range-checks stop token ids.
// Ranges (vLLM's): temperature >= 0, 0 < top_p <= 1, top_k >= -1 (0 and -1 = off), 0 <= min_p <= 1,
// presence / frequency in [-2, 2], repetition > 0, max_tokens >= 1, 0 <= min_tokens <= max_tokens,
// -1 <= logprobs <= kMaxLogprobs. All floats must be finite.
constexpr int32_t kMaxLogprobs = 20;
void validateSamplingParams(const SamplingParams& p, int64_t vocab = 0);

// The distribution sample() draws from, after every step up to the draw: (token, probability) pairs in
// increasing token order, probabilities summing to 1. Greedy gives one pair with probability 1. Exposed for
// tests and for speculative decoding's rejection sampling, which needs the target distribution.
std::vector<std::pair<int32_t, double>> samplingDistribution(const float* logits, int64_t vocab, const Sequence& seq,
                                                            bool suppressStop, const std::vector<int32_t>& eosIds);

// Samples the next token of `seq` from `logits` (vocab floats: the model's last-position row).
// suppressStop: min_tokens is not reached yet, so eos / stop token ids must not be sampled.
// A NaN or +inf logit (corrupt weights, overflow) throws ts::Error(Internal, "numerical error ..."): the
// caller fails that one sequence; nothing is resampled (sampleLogitRows returns it as SampleResult::error).
SampleResult sample(const float* logits, int64_t vocab, const Sequence& seq, SamplerRng& rng, bool suppressStop,
                    const std::vector<int32_t>& eosIds);

// The check sample() starts with: a NaN or +inf among `vocab` logits throws that numerical error. Shared with
// the CLI's greedy reference path, so both refuse a corrupt model's output in the same words.
void checkFiniteLogits(const float* logits, int64_t vocab);

// Whether sampling with these parameters draws a uniform number: every token but a greedy one does.
bool drawsUniform(const SamplingParams& p);

// sample() with the row's uniform number already drawn (by SamplerRng::uniform(), when drawsUniform): the
// same token for the same number. For callers that draw before they know where the row is sampled.
SampleResult sampleWithUniform(const float* logits, int64_t vocab, const Sequence& seq, double uniform,
                               bool suppressStop, const std::vector<int32_t>& eosIds);

// How close the host's two running-sum decisions of one row came to going the other way: for top_p's cut and
// for the draw, the distance of the threshold (top_p · mass, u · kept mass) from the nearer edge of the element
// the walk stopped at ([running sum before it, + its mass); no lower edge for the first element, no upper one
// for the last), over `mass`, the mass of the candidates min_p and top_k left (`candidates` of them: what a
// device sampler's rounding bound grows with). +inf where the row makes no such decision (greedy; top_p off
// or one candidate). A device sampler whose sums differ from the host's by rounding may hand a row back
// (SampleOutput::kAmbiguous) only when a margin is within its bound: the self-test checks hand-backs with this.
struct SampleMargins {
    double topP = 0.0, draw = 0.0;  // over `mass`
    int64_t candidates = 0;
    double mass = 0.0;  // Σ exp(l − l_max) over the candidates
};
SampleMargins sampleMarginsWithUniform(const float* logits, int64_t vocab, const Sequence& seq, double uniform,
                                       bool suppressStop, const std::vector<int32_t>& eosIds);

// Steps 2 and 3 of the header as per-token edits, token ascending: the one definition of the masking and
// penalties, applied by the host sampler and shipped to Backend::sampleRows.
std::vector<SampleLogitAdjust> logitAdjustments(const Sequence& seq, int64_t vocab, bool suppressStop,
                                                const std::vector<int32_t>& eosIds);

}  // namespace ts
