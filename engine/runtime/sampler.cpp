#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"

namespace ts {

void checkFiniteLogits(const float* logits, int64_t vocab) {
    TS_CHECK(vocab > 0 && vocab <= std::numeric_limits<int32_t>::max(), "sampler: bad vocab size");
    for (int64_t i = 0; i < vocab; ++i) {
        if (std::isnan(logits[i]) || logits[i] == std::numeric_limits<float>::infinity())
            fail(ErrorKind::Internal, "numerical error: logit of token " + std::to_string(i) + " is " +
                                          (std::isnan(logits[i]) ? "NaN" : "+inf"));
    }
}

namespace {

// vLLM's _SAMPLING_EPS: below it a temperature means greedy (dividing by it would overflow to inf).
constexpr float kGreedyTemperature = 1e-5f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kInf = std::numeric_limits<double>::infinity();
static_assert(kMaxLogprobs == kMaxSampleTop, "SampleOutput holds kMaxSampleTop top tokens");

struct Cand {
    int32_t id;
    double logit;  // after penalties and temperature
};

// Strict total order "more probable first, then lower id": makes nth_element / partial_sort results, and so
// the sampled token for a given uniform draw, independent of the standard library's tie handling.
bool moreProbable(const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

[[noreturn]] void invalid(const std::string& field, const std::string& why) {
    fail(ErrorKind::InvalidArgument, "sampling parameter '" + field + "' " + why);
}

// frequency · count + presence, as vLLM computes it on float32 (one site: the device path ships this value).
float outputPenalty(const SamplingParams& p, int32_t count) {
    return p.frequencyPenalty * float(count) + p.presencePenalty;
}

// One adjustment, in the order of the header: mask, repetition penalty, then frequency / presence.
void applyAdjust(float& x, const SampleLogitAdjust& a, float repetitionPenalty) {
    if (a.flags & SampleLogitAdjust::kAdjustMask) x = kNegInf;
    if (a.flags & SampleLogitAdjust::kAdjustRepeat) x = x > 0.0f ? x / repetitionPenalty : x * repetitionPenalty;
    x -= a.subtract;  // 0 leaves every value (-0 and -inf included) unchanged
}

// Steps 2 and 3 of the header (min_tokens masking, penalties) on a float copy of the row, as vLLM does them
// on its float32 logits.
std::vector<float> penalised(const float* logits, int64_t vocab, const Sequence& seq, bool suppressStop,
                             const std::vector<int32_t>& eosIds) {
    std::vector<float> x(logits, logits + vocab);
    const float r = seq.params().repetitionPenalty;
    for (const SampleLogitAdjust& a : logitAdjustments(seq, vocab, suppressStop, eosIds))
        applyAdjust(x[size_t(a.token)], a, r);
    return x;
}

int32_t argmaxLowestId(const std::vector<float>& x) {
    size_t best = 0;
    for (size_t i = 1; i < x.size(); ++i)
        if (x[i] > x[best]) best = i;  // strict: the first (lowest) id wins ties, as torch.argmax
    if (x[best] == kNegInf) fail(ErrorKind::Internal, "numerical error: every token is masked");
    return int32_t(best);
}

// Step 5 up to the draw: the surviving candidates with their temperature-scaled logits, in an order that
// depends only on the input. Returns the largest logit through `maxLogit`.
// margins (optional): top_p's margin and the candidate count (SampleMargins).
std::vector<Cand> filtered(const std::vector<float>& x, const SamplingParams& p, double& maxLogit,
                           SampleMargins* margins = nullptr) {
    const double invT = 1.0 / double(p.temperature);
    std::vector<Cand> c;
    c.reserve(x.size());
    maxLogit = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < x.size(); ++i) {
        if (x[i] == kNegInf) continue;
        const double l = double(x[i]) * invT;
        c.push_back({int32_t(i), l});
        maxLogit = std::max(maxLogit, l);
    }
    if (c.empty()) fail(ErrorKind::Internal, "numerical error: every token is masked");

    // min_p: p_i < min_p * p_max  <=>  l_i - l_max < log(min_p). The best token always survives.
    if (p.minP > 0.0f) {
        const double cut = maxLogit + std::log(double(p.minP));
        std::erase_if(c, [cut](const Cand& a) { return a.logit < cut; });
    }
    // top_k: keep every candidate at least as likely as the k-th one; then back to increasing id, the
    // draw's order when top_p does not cut (nth_element leaves an order no other sampler could reproduce).
    if (p.topK > 0 && size_t(p.topK) < c.size()) {
        auto kth = c.begin() + (p.topK - 1);
        std::nth_element(c.begin(), kth, c.end(), moreProbable);
        const double cut = kth->logit;
        std::erase_if(c, [cut](const Cand& a) { return a.logit < cut; });
        std::sort(c.begin(), c.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
    }
    // top_p: token i survives when the mass of the tokens ranked above it is < top_p. Only the head of the
    // ranking is needed, so sort the best m candidates and double m until the mass is reached.
    double zAll = 0.0;  // the mass of what min_p and top_k left: the margins' unit
    if (margins) {
        for (const Cand& a : c) zAll += std::exp(a.logit - maxLogit);
        margins->candidates = int64_t(c.size());
        margins->mass = zAll;
    }
    if (p.topP < 1.0f && c.size() > 1) {
        double z = zAll;  // the same sum in the same order, when the margins took it
        if (!margins)
            for (const Cand& a : c) z += std::exp(a.logit - maxLogit);
        const double target = double(p.topP) * z;
        size_t m = std::min<size_t>(c.size(), 256);
        for (;;) {
            std::partial_sort(c.begin(), c.begin() + std::ptrdiff_t(m), c.end(), moreProbable);
            double above = 0.0, before = 0.0;
            size_t keep = 0;
            while (keep < m && above < target) {
                before = above;
                above += std::exp(c[keep++].logit - maxLogit);
            }
            if (above >= target || m == c.size()) {
                if (margins) {  // the cut element is c[keep - 1]: [before, above) holds the target
                    const double lo = keep > 1 ? target - before : kInf;
                    const double hi = keep < c.size() ? above - target : kInf;
                    margins->topP = std::min(lo, hi) / zAll;
                }
                c.resize(keep);
                break;
            }
            m = std::min(c.size(), m * 2);
        }
    }
    return c;
}

}  // namespace

SamplerRng::SamplerRng(std::optional<uint64_t> seed) {
    if (seed) {
        m_gen.seed(*seed);
    } else {
        std::random_device rd;
        m_gen.seed((uint64_t(rd()) << 32) ^ uint64_t(rd()));
    }
}

void validateSamplingParams(const SamplingParams& p, int64_t vocab) {
    auto finite = [](const std::string& name, float v) {
        if (!std::isfinite(v)) invalid(name, "must be a finite number");
    };
    finite("temperature", p.temperature);
    finite("top_p", p.topP);
    finite("min_p", p.minP);
    finite("presence_penalty", p.presencePenalty);
    finite("frequency_penalty", p.frequencyPenalty);
    finite("repetition_penalty", p.repetitionPenalty);
    if (p.temperature < 0.0f) invalid("temperature", "must be >= 0, got " + std::to_string(p.temperature));
    if (!(p.topP > 0.0f && p.topP <= 1.0f)) invalid("top_p", "must be in (0, 1], got " + std::to_string(p.topP));
    if (p.topK < -1) invalid("top_k", "must be -1, 0 (off) or a positive count, got " + std::to_string(p.topK));
    if (p.minP < 0.0f || p.minP > 1.0f) invalid("min_p", "must be in [0, 1], got " + std::to_string(p.minP));
    if (p.presencePenalty < -2.0f || p.presencePenalty > 2.0f)
        invalid("presence_penalty", "must be in [-2, 2], got " + std::to_string(p.presencePenalty));
    if (p.frequencyPenalty < -2.0f || p.frequencyPenalty > 2.0f)
        invalid("frequency_penalty", "must be in [-2, 2], got " + std::to_string(p.frequencyPenalty));
    if (p.repetitionPenalty <= 0.0f)
        invalid("repetition_penalty", "must be > 0, got " + std::to_string(p.repetitionPenalty));
    if (p.maxTokens < 1) invalid("max_tokens", "must be >= 1, got " + std::to_string(p.maxTokens));
    if (p.minTokens < 0 || p.minTokens > p.maxTokens)
        invalid("min_tokens", "must be in [0, max_tokens=" + std::to_string(p.maxTokens) + "], got " +
                                  std::to_string(p.minTokens));
    if (p.logprobs < -1 || p.logprobs > kMaxLogprobs)
        invalid("logprobs", "must be in [0, " + std::to_string(kMaxLogprobs) + "], got " + std::to_string(p.logprobs));
    for (int32_t t : p.stopTokenIds)
        if (t < 0 || (vocab > 0 && t >= vocab))
            invalid("stop_token_ids", "contains " + std::to_string(t) + ", outside the vocabulary");
}

std::vector<std::pair<int32_t, double>> samplingDistribution(const float* logits, int64_t vocab, const Sequence& seq,
                                                            bool suppressStop, const std::vector<int32_t>& eosIds) {
    checkFiniteLogits(logits, vocab);
    const std::vector<float> x = penalised(logits, vocab, seq, suppressStop, eosIds);
    if (seq.params().temperature < kGreedyTemperature) return {{argmaxLowestId(x), 1.0}};
    double maxLogit = 0.0;
    std::vector<Cand> c = filtered(x, seq.params(), maxLogit);
    std::sort(c.begin(), c.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
    double z = 0.0;
    for (const Cand& a : c) z += std::exp(a.logit - maxLogit);
    std::vector<std::pair<int32_t, double>> out;
    out.reserve(c.size());
    for (const Cand& a : c) out.emplace_back(a.id, std::exp(a.logit - maxLogit) / z);
    return out;
}

namespace {

// sample() and sampleWithUniform(): the number is drawn from `rng` where the draw happens, when given.
// margins (optional): filled as SampleMargins says.
SampleResult sampleImpl(const float* logits, int64_t vocab, const Sequence& seq, SamplerRng* rng, double uniform,
                        bool suppressStop, const std::vector<int32_t>& eosIds, SampleMargins* margins = nullptr) {
    checkFiniteLogits(logits, vocab);
    const SamplingParams& p = seq.params();
    const std::vector<float> x = penalised(logits, vocab, seq, suppressStop, eosIds);

    SampleResult r;
    if (margins) *margins = SampleMargins{kInf, kInf, 0, 0.0};
    if (p.temperature < kGreedyTemperature) {
        r.token = argmaxLowestId(x);
    } else {
        double maxLogit = 0.0;
        const std::vector<Cand> c = filtered(x, p, maxLogit, margins);
        double z = 0.0;
        for (const Cand& a : c) z += std::exp(a.logit - maxLogit);
        const double u = (rng ? rng->uniform() : uniform) * z;
        double acc = 0.0, before = 0.0;
        size_t at = c.size() - 1;
        r.token = c.back().id;  // if rounding leaves u past the last partial sum
        for (size_t k = 0; k < c.size(); ++k) {
            before = acc;
            acc += std::exp(c[k].logit - maxLogit);
            if (u < acc) {
                r.token = c[k].id;
                at = k;
                break;
            }
        }
        if (margins) {  // the drawn element is c[at]: [before, acc) holds u (or u lies past the end, at the last)
            const double lo = at > 0 ? u - before : kInf;
            const double hi = at + 1 < c.size() ? acc - u : kInf;
            margins->draw = std::min(lo, hi) / margins->mass;
        }
    }

    if (p.logprobs >= 0) {
        // Raw log_softmax in double: logprob = l - (max + log sum exp(l - max)).
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, double(logits[i]));
        double s = 0.0;
        for (int64_t i = 0; i < vocab; ++i) s += std::exp(double(logits[i]) - mx);
        const double lse = mx + std::log(s);
        r.logprob = float(double(logits[r.token]) - lse);
        const size_t n = std::min<size_t>(size_t(p.logprobs), size_t(vocab));
        if (n > 0) {
            std::vector<Cand> all(static_cast<size_t>(vocab));
            for (size_t i = 0; i < all.size(); ++i) all[i] = {int32_t(i), double(logits[i])};
            std::partial_sort(all.begin(), all.begin() + std::ptrdiff_t(n), all.end(), moreProbable);
            r.top.reserve(n);
            for (size_t i = 0; i < n; ++i) r.top.emplace_back(all[i].id, float(all[i].logit - lse));
        }
    }
    return r;
}

}  // namespace

SampleResult sample(const float* logits, int64_t vocab, const Sequence& seq, SamplerRng& rng, bool suppressStop,
                    const std::vector<int32_t>& eosIds) {
    return sampleImpl(logits, vocab, seq, &rng, 0.0, suppressStop, eosIds);
}

SampleResult sampleWithUniform(const float* logits, int64_t vocab, const Sequence& seq, double uniform,
                               bool suppressStop, const std::vector<int32_t>& eosIds) {
    return sampleImpl(logits, vocab, seq, nullptr, uniform, suppressStop, eosIds);
}

bool drawsUniform(const SamplingParams& p) { return !(p.temperature < kGreedyTemperature); }

std::vector<SampleLogitAdjust> logitAdjustments(const Sequence& seq, int64_t vocab, bool suppressStop,
                                                const std::vector<int32_t>& eosIds) {
    const SamplingParams& p = seq.params();
    // (token, what): 0 = held back by min_tokens, 1 = seen (prompt or output), 2 = one output occurrence.
    // Token ids outside [0, vocab) are ignored (they cannot be penalised).
    std::vector<std::pair<int32_t, uint8_t>> ev;
    auto inVocab = [vocab](int32_t t) { return t >= 0 && t < vocab; };
    if (suppressStop) {
        for (int32_t t : p.stopTokenIds)
            if (inVocab(t)) ev.emplace_back(t, 0);
        if (!p.ignoreEos)  // with ignore_eos, eos does not stop, so there is nothing to hold back
            for (int32_t t : eosIds)
                if (inVocab(t)) ev.emplace_back(t, 0);
    }
    const std::vector<int32_t>& toks = seq.tokens();
    if (p.repetitionPenalty != 1.0f)
        for (int32_t t : toks)
            if (inVocab(t)) ev.emplace_back(t, 1);
    if (p.presencePenalty != 0.0f || p.frequencyPenalty != 0.0f)
        for (size_t i = size_t(seq.numPromptTokens()); i < toks.size(); ++i)
            if (inVocab(toks[i])) ev.emplace_back(toks[i], 2);
    auto finish = [&p](SampleLogitAdjust a, int32_t count) {
        if (count > 0) a.subtract = outputPenalty(p, count);
        return a;
    };
    std::vector<SampleLogitAdjust> out;
    if (ev.size() > size_t(vocab) / 8) {  // long histories: tally by token id instead of sorting them
        std::vector<uint32_t> flags(size_t(vocab), 0);
        std::vector<int32_t> counts(size_t(vocab), 0);
        for (const auto& [t, what] : ev) {
            if (what == 0) flags[size_t(t)] |= SampleLogitAdjust::kAdjustMask;
            else if (what == 1) flags[size_t(t)] |= SampleLogitAdjust::kAdjustRepeat;
            else ++counts[size_t(t)];
        }
        for (size_t t = 0; t < flags.size(); ++t)
            if (flags[t] || counts[t]) out.push_back(finish({int32_t(t), flags[t], 0.0f}, counts[t]));
        return out;
    }
    std::sort(ev.begin(), ev.end());
    for (size_t i = 0; i < ev.size();) {
        SampleLogitAdjust a;
        a.token = ev[i].first;
        int32_t count = 0;
        for (; i < ev.size() && ev[i].first == a.token; ++i) {
            if (ev[i].second == 0) a.flags |= SampleLogitAdjust::kAdjustMask;
            else if (ev[i].second == 1) a.flags |= SampleLogitAdjust::kAdjustRepeat;
            else ++count;
        }
        out.push_back(finish(a, count));
    }
    return out;
}

SampleMargins sampleMarginsWithUniform(const float* logits, int64_t vocab, const Sequence& seq, double uniform,
                                       bool suppressStop, const std::vector<int32_t>& eosIds) {
    SampleMargins m;
    (void)sampleImpl(logits, vocab, seq, nullptr, uniform, suppressStop, eosIds, &m);
    return m;
}

}  // namespace ts
