#include "runtime/device_sampling.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace ts {

DeviceSampleRequest deviceSampleRequest(const SamplingParams& p, int64_t row, double uniform,
                                        const std::vector<SampleLogitAdjust>& adjust) {
    DeviceSampleRequest r;
    r.uniform = uniform;
    // The host sampler's min_p cut is maxLogit + std::log(double(min_p)): the same libm call here, so the
    // device adds the same double (its own log may differ by an ulp).
    r.logMinP = p.minP > 0.0f ? std::log(double(p.minP)) : -std::numeric_limits<double>::infinity();
    r.row = row;
    r.adjust = adjust.data();
    r.numAdjust = int32_t(adjust.size());
    r.topK = p.topK;
    r.logprobs = p.logprobs;
    r.temperature = p.temperature;
    r.topP = p.topP;
    r.repetitionPenalty = p.repetitionPenalty;
    return r;
}

SampleResult sampleResultOf(const SampleOutput& o, const SamplingParams& p) {
    SampleResult r;
    r.token = o.token;
    if (p.logprobs >= 0) {
        r.logprob = o.logprob;
        r.top.reserve(size_t(o.numTop));
        for (int32_t i = 0; i < o.numTop; ++i) r.top.emplace_back(o.topIds[i], o.topLogprobs[i]);
    }
    return r;
}

std::vector<SampleResult> sampleLogitRows(Backend& backend, const Buffer& logits, int64_t vocab,
                                          const std::vector<LogitRow>& rows,
                                          const std::function<SamplerRng&(const Sequence&)>& rngFor,
                                          const std::vector<int32_t>& eosIds) {
    const size_t n = rows.size();
    std::vector<double> uniform(n, 0.0);
    for (size_t i = 0; i < n; ++i)
        if (drawsUniform(rows[i].seq->params())) uniform[i] = rngFor(*rows[i].seq).uniform();

    std::vector<std::vector<SampleLogitAdjust>> adjust(n);
    std::vector<DeviceSampleRequest> reqs(n);
    for (size_t i = 0; i < n; ++i) {
        adjust[i] = logitAdjustments(*rows[i].seq, vocab, rows[i].suppressStop, eosIds);
        reqs[i] = deviceSampleRequest(rows[i].seq->params(), rows[i].row, uniform[i], adjust[i]);
    }
    std::vector<SampleOutput> outs(n);
    const bool onDevice = n > 0 && backend.sampleRows(logits, vocab, int64_t(n), reqs.data(), outs.data());

    std::vector<SampleResult> results;
    results.reserve(n);
    std::vector<float> host;
    for (size_t i = 0; i < n; ++i) {
        const Sequence& seq = *rows[i].seq;
        if (onDevice && outs[i].status == SampleOutput::kOk) {
            results.push_back(sampleResultOf(outs[i], seq.params()));
            continue;
        }
        host.resize(size_t(vocab));
        backend.download(logits, host.data(), host.size() * 4, size_t(rows[i].row * vocab) * 4);
        try {
            results.push_back(sampleWithUniform(host.data(), vocab, seq, uniform[i], rows[i].suppressStop, eosIds));
        } catch (const Error& e) {  // this row's logits (NaN / +inf): its sequence fails, the batch goes on
            SampleResult failed;
            failed.error = e.what();
            results.push_back(std::move(failed));
        }
    }
    return results;
}

}  // namespace ts
