// Op self-test cases of the sampling family: Backend::sampleRows (kernels/cuda/cuda_sampling.cu) against
// the host sampler (engine/runtime/sampler.cpp, the reference; the CPU backend has no sampleRows). Each
// case is one batch of rows over random logits, sampled by the backend under test with the same uniform
// numbers the host sampler gets (runtime/device_sampling.h builds the requests as the engine does).
//
// Vocabularies: 1000 and 151552 (GLM's padded vocabulary). Parameters: greedy (exact ties, temperature
// below 1e-5, penalties and masks moving the argmax), temperatures, top_k with ties at the cut (logits
// rounded to quarters), min_p, top_p (small and large nuclei: over 4096 tokens at V = 151552 needs several
// sorted slabs), repetition / frequency / presence penalties, suppressed stop and eos ids, combinations,
// logprobs 0..20 with ties among the best raw logits and -inf entries, NaN / +inf / all-masked rows.
//
// What must hold:
// - tokens and top-N ids exactly; a row the backend hands back (status kAmbiguous) passes in the
//   "exact ties" case, whose sums are built to tie with the host's top_p / inverse-CDF thresholds, so
//   the host must decide them (the case checks that decided rows still match), and elsewhere only where
//   the host's own sums put a decision within the device's rounding bound of its other side
//   (sampleMarginsWithUniform: random logits do land there, rarely); any other hand-back fails;
// - NaN / +inf rows come back kNonFinite and all-masked rows kAllMasked, where the host raises its
//   "numerical error";
// - logprobs (raw log_softmax: double sums in another order, exp/log within 1 ulp, rounded to float):
//   |dut − ref| ≤ 1e-5 + 1e-6·|ref| — the float rounding of values up to ~40 in magnitude is 4e-6.
// A backend without the op (the CPU) reports each case as not supported and passes: the runtime then
// samples on the host, which is the reference itself.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "runtime/device_sampling.h"
#include "runtime/sampler.h"
#include "selftest/op_selftest.h"

namespace ts::selftest {

namespace {

const char* const kFamily = "sampling";

// Twice the device's bound over z (cuda_sampling.cu: E = (8n + 256)·2⁻⁵³·z): see runBatch.
double handBackBound(const SampleMargins& m) { return 2.0 * (8.0 * double(m.candidates) + 256.0) * 0x1.0p-53; }

std::string sci(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2e", v);
    return b;
}
constexpr float kInf = std::numeric_limits<float>::infinity();

enum class Expect { Match, MatchOrHandBack, NonFinite, AllMasked };

struct Row {
    SamplingParams p;
    std::vector<float> logits;         // V values
    std::vector<int32_t> prompt{0};
    std::vector<int32_t> output;
    bool suppressStop = false;
    Expect expect = Expect::Match;
    double uniform = -1.0;             // < 0: drawn from a seeded SamplerRng
};

struct Batch {
    std::string label;
    int64_t V = 0;
    std::vector<Row> rows;
    std::vector<int32_t> eos;
};

SamplingParams params(float t, float topP = 1.0f, int32_t topK = 0, float minP = 0.0f) {
    SamplingParams p;
    p.temperature = t;
    p.topP = topP;
    p.topK = topK;
    p.minP = minP;
    p.maxTokens = 1000;
    return p;
}

// Logits rounded to quarters: many exact ties (top_k cuts and top-N lists fall inside tie groups).
std::vector<float> quantized(std::vector<float> v) {
    for (float& x : v) x = std::round(x * 4.0f) / 4.0f;
    return v;
}

int32_t argmaxOf(const std::vector<float>& v) {
    size_t b = 0;
    for (size_t i = 1; i < v.size(); ++i)
        if (v[i] > v[b]) b = i;
    return int32_t(b);
}

std::vector<OpResult> runBatch(Context& ctx, const Batch& b) {
    const int64_t V = b.V;
    const size_t n = b.rows.size();
    std::vector<float> all;
    all.reserve(n * size_t(V));
    std::vector<Sequence> seqs;
    seqs.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        const Row& r = b.rows[i];
        TS_CHECK(int64_t(r.logits.size()) == V, "sampling case: row size");
        validateSamplingParams(r.p, V);
        all.insert(all.end(), r.logits.begin(), r.logits.end());
        seqs.emplace_back(int64_t(i), r.prompt, r.p);
        for (int32_t t : r.output) seqs.back().appendToken(t);
    }
    std::vector<double> uniform(n, 0.0);
    for (size_t i = 0; i < n; ++i) {
        if (!drawsUniform(b.rows[i].p)) continue;
        SamplerRng rng(ctx.rng()());
        uniform[i] = b.rows[i].uniform >= 0.0 ? b.rows[i].uniform : rng.uniform();
    }
    std::vector<std::vector<SampleLogitAdjust>> adjust(n);
    std::vector<DeviceSampleRequest> reqs(n);
    for (size_t i = 0; i < n; ++i) {
        adjust[i] = logitAdjustments(seqs[i], V, b.rows[i].suppressStop, b.eos);
        reqs[i] = deviceSampleRequest(b.rows[i].p, int64_t(i), uniform[i], adjust[i]);
    }
    std::vector<SampleOutput> out(n);
    for (SampleOutput& o : out) {  // poisoned: an output the backend does not write fails
        o.token = std::numeric_limits<int32_t>::min();
        o.status = -1;
        o.numTop = -1;
    }
    Backend& dut = ctx.dut();
    const Buffer logits = Context::put(dut, all);
    const std::string shape = b.label + " V=" + str(V) + " rows=" + str(int64_t(n));
    if (!dut.sampleRows(logits, V, int64_t(n), reqs.data(), out.data())) {
        return {Context::verdict(kFamily, "sampleRows", shape, true,
                                 "not supported: the runtime samples these rows on the host (the reference)")};
    }

    // The host sampler on the same rows and numbers; each row's outcome encoded for an exact comparison.
    std::vector<int32_t> refI, dutI;
    std::vector<float> refF, dutF;
    int64_t handedBack = 0, dueHandBacks = 0;
    std::string firstBad;
    auto bad = [&](size_t i, const std::string& why) {
        if (firstBad.empty()) firstBad = "row " + std::to_string(i) + ": " + why;
    };
    for (size_t i = 0; i < n; ++i) {
        const Row& r = b.rows[i];
        const SampleOutput& o = out[i];
        SampleResult ref;
        std::string hostError;
        try {
            ref = sampleWithUniform(all.data() + i * size_t(V), V, seqs[i], uniform[i], r.suppressStop, b.eos);
        } catch (const Error& e) {
            hostError = e.what();
        }
        if (r.expect == Expect::NonFinite || r.expect == Expect::AllMasked) {
            const int32_t want = r.expect == Expect::NonFinite ? SampleOutput::kNonFinite : SampleOutput::kAllMasked;
            const bool ok = o.status == want && hostError.find("numerical error") != std::string::npos;
            refI.push_back(-100 - want);
            dutI.push_back(ok ? -100 - want : -200 - o.status);
            if (!ok) bad(i, "expected status " + std::to_string(want) + ", got " + std::to_string(o.status));
            continue;
        }
        if (!hostError.empty()) {  // a broken case: its rows must sample
            refI.push_back(-1);
            dutI.push_back(-2);
            bad(i, "the host sampler threw: " + hostError);
            continue;
        }
        refI.push_back(ref.token);
        if (o.status == SampleOutput::kAmbiguous && r.expect == Expect::MatchOrHandBack) {
            ++handedBack;  // the host decides this row: nothing of the device's to compare
            dutI.push_back(ref.token);
            continue;
        }
        if (o.status == SampleOutput::kAmbiguous) {
            // Outside the constructed ties a hand-back is due only when one of the host's decisions came within
            // the device's rounding bound of the other side: E = (8n + 256)·2⁻⁵³·z (cuda_sampling.cu), and the
            // host's sums differ from the device's by at most (2n + 4)·2⁻⁵³·z each, so twice E covers the
            // host's view of it. Continuous random logits land there now and then (at top_p 0.999 over 151,552
            // tokens ~0.5 % of rows: the cut falls among tail elements of ~6e-8·z); anything farther is a fault.
            const SampleMargins m =
                sampleMarginsWithUniform(all.data() + i * size_t(V), V, seqs[i], uniform[i], r.suppressStop, b.eos);
            const bool due = handBackIsDue(m);
            dutI.push_back(due ? ref.token : -300 - o.status);
            if (due) {
                ++dueHandBacks;
            } else {
                bad(i, "handed back with the host's decisions " + sci(std::min(m.topP, m.draw)) +
                           "·z from their edges (bound " + sci(handBackBound(m)) + "·z; host token " +
                           std::to_string(ref.token) + ")");
            }
            continue;
        }
        if (o.status != SampleOutput::kOk) {
            dutI.push_back(-300 - o.status);
            bad(i, "status " + std::to_string(o.status) + " (host token " + std::to_string(ref.token) + ")");
            continue;
        }
        dutI.push_back(o.token);
        if (o.token != ref.token) bad(i, "token " + std::to_string(o.token) + ", host " + std::to_string(ref.token));
        if (r.p.logprobs < 0) continue;
        const SampleResult got = sampleResultOf(o, r.p);
        refI.push_back(int32_t(ref.top.size()));
        dutI.push_back(int32_t(got.top.size()));
        if (got.top.size() != ref.top.size()) {
            bad(i, "top list of " + std::to_string(got.top.size()) + ", host " + std::to_string(ref.top.size()));
            continue;
        }
        refF.push_back(ref.logprob);
        dutF.push_back(got.logprob);
        for (size_t k = 0; k < ref.top.size(); ++k) {
            refI.push_back(ref.top[k].first);
            dutI.push_back(got.top[k].first);
            refF.push_back(ref.top[k].second);
            dutF.push_back(got.top[k].second);
        }
    }
    OpResult tokens = Context::compareExact(kFamily, "sampleRows", shape, refI, dutI);
    if (!firstBad.empty()) tokens.note = firstBad;
    if (handedBack) {
        tokens.note += std::string(tokens.note.empty() ? "" : "; ") + std::to_string(handedBack) +
                       " tied row(s) handed back to the host";
    }
    if (dueHandBacks) {
        tokens.note += std::string(tokens.note.empty() ? "" : "; ") + std::to_string(dueHandBacks) +
                       " row(s) handed back to the host within the rounding bound";
    }
    std::vector<OpResult> res{tokens};
    if (!refF.empty()) res.push_back(Context::compare(kFamily, "sampleRows logprobs", shape, refF, dutF, 1e-5, 1e-6));
    return res;
}

// ---------------------------------------------------------------------------------------------------

Batch greedyBatch(Context& ctx, int64_t V) {
    Batch b{"greedy", V, {}, {int32_t(V - 2)}};
    const std::vector<float> base = ctx.randn(size_t(V), 2.0f);
    Row r;
    r.p = params(0.0f);
    r.logits = base;
    b.rows.push_back(r);
    // An exact tie for the max at ids 5, 17 and V-3: the lowest id wins.
    r.logits = base;
    for (int64_t id : {V - 3, int64_t(17), int64_t(5)}) r.logits[size_t(id)] = 50.0f;
    b.rows.push_back(r);
    // Below 1e-5 is greedy too (and top_k 1 changes nothing).
    r.p = params(1e-6f, 1.0f, 1);
    b.rows.push_back(r);
    // The repetition penalty moves the argmax off a seen token: 50 / 1.5 < 40.
    r.p = params(0.0f);
    r.p.repetitionPenalty = 1.5f;
    r.logits = base;
    r.logits[9] = 50.0f;
    r.logits[size_t(V - 5)] = 40.0f;
    r.prompt = {9, 3, 9};
    b.rows.push_back(r);
    // Negative logits multiplied: the best token is the unseen one.
    r.logits.assign(size_t(V), -30.0f);
    r.logits[2] = -1.0f;
    r.logits[4] = -1.1f;
    r.prompt = {2};
    b.rows.push_back(r);
    // min_tokens: the best token is a stop id, the second the eos: both held back.
    r = Row{};
    r.p = params(0.0f);
    r.logits = base;
    r.logits[11] = 60.0f;
    r.logits[size_t(V - 2)] = 55.0f;
    r.p.stopTokenIds = {11};
    r.suppressStop = true;
    b.rows.push_back(r);
    // ... with ignore_eos the eos is not held back.
    r.p.ignoreEos = true;
    b.rows.push_back(r);
    // Presence / frequency on output tokens: 60 - (2·3 + 1) < 55.
    r = Row{};
    r.p = params(0.0f);
    r.p.frequencyPenalty = 2.0f;
    r.p.presencePenalty = 1.0f;
    r.logits = base;
    r.logits[11] = 60.0f;
    r.logits[12] = 55.0f;
    r.output = {11, 7, 11, 11};
    b.rows.push_back(r);
    // Greedy with logprobs over a quantized row (ties among the best raw logits).
    r = Row{};
    r.p = params(0.0f);
    r.p.logprobs = 20;
    r.logits = quantized(ctx.randn(size_t(V), 1.5f));
    b.rows.push_back(r);
    return b;
}

Batch temperatureBatch(Context& ctx, int64_t V) {
    Batch b{"temperature", V, {}, {}};
    const float ts[] = {0.25f, 0.7f, 1.0f, 1.6f};
    for (int i = 0; i < 24; ++i) {
        Row r;
        r.p = params(ts[i % 4]);
        if (i % 6 == 5) r.p.logprobs = 5;
        r.logits = ctx.randn(size_t(V), 2.5f);
        if (i % 5 == 4) r.logits[size_t(i)] = -kInf;  // -inf logits are allowed and never drawn
        b.rows.push_back(r);
    }
    // The ends of the unit interval: the first candidate, and the last (the host's fallback past the end).
    Row r;
    r.p = params(1.0f);
    r.logits = ctx.randn(size_t(V), 2.0f);
    r.uniform = 0.0;
    b.rows.push_back(r);
    r.uniform = 1.0 - 0x1.0p-53;
    b.rows.push_back(r);
    return b;
}

Batch topKBatch(Context& ctx, int64_t V) {
    Batch b{"top_k ties", V, {}, {}};
    const int32_t ks[] = {1, 2, 5, 40, 999, int32_t(V - 1), int32_t(V), int32_t(V + 7)};
    int i = 0;
    for (int32_t k : ks)
        for (bool q : {true, false}) {
            Row r;
            r.p = params(i % 3 == 0 ? 0.6f : 1.2f, 1.0f, k);
            r.logits = ctx.randn(size_t(V), 2.0f);
            if (q) r.logits = quantized(r.logits);  // ties at the k-th value: all of them kept
            b.rows.push_back(r);
            ++i;
        }
    return b;
}

Batch minPBatch(Context& ctx, int64_t V) {
    Batch b{"min_p", V, {}, {}};
    const float mps[] = {0.001f, 0.02f, 0.1f, 0.5f, 1.0f};
    for (float mp : mps)
        for (float t : {0.7f, 1.0f}) {
            Row r;
            r.p = params(t, 1.0f, 0, mp);
            r.logits = mp == 1.0f ? quantized(ctx.randn(size_t(V), 1.0f)) : ctx.randn(size_t(V), 2.0f);
            b.rows.push_back(r);
        }
    return b;
}

Batch topPBatch(Context& ctx, int64_t V, float sigma, const char* label) {
    Batch b{label, V, {}, {}};
    const float tps[] = {0.05f, 0.5f, 0.8f, 0.95f, 0.999f};
    int i = 0;
    for (float tp : tps)
        for (float t : {0.6f, 1.0f}) {
            Row r;
            r.p = params(t, tp);
            r.logits = ctx.randn(size_t(V), sigma);
            if (i % 4 == 3) r.logits = quantized(r.logits);
            if (i % 5 == 2) r.p.logprobs = 3;
            b.rows.push_back(r);
            ++i;
        }
    return b;
}

Batch penaltyBatch(Context& ctx, int64_t V) {
    Batch b{"penalties", V, {}, {int32_t(V - 1)}};
    const std::vector<float> rep = {1.3f, 0.8f, 1.0f}, freq = {0.5f, -0.3f, 0.0f}, pres = {0.7f, -1.0f, 0.25f};
    for (int i = 0; i < 12; ++i) {
        Row r;
        r.p = params(i % 4 == 0 ? 0.0f : 0.8f, i % 3 == 1 ? 0.9f : 1.0f, i % 5 == 2 ? 30 : 0);
        r.p.repetitionPenalty = rep[size_t(i % 3)];
        r.p.frequencyPenalty = freq[size_t((i / 3) % 3)];
        r.p.presencePenalty = pres[size_t(i % 3)];
        r.logits = ctx.randn(size_t(V), 2.0f);
        // A history concentrated on few ids (repeats give counts > 1) that includes the best tokens.
        r.prompt = ctx.randint(300, 0, int32_t(std::min<int64_t>(V - 1, 2000)));
        r.output = ctx.randint(100, 0, 60);
        const int32_t top = argmaxOf(r.logits);
        r.prompt.push_back(top);
        r.output.push_back(top);
        b.rows.push_back(r);
    }
    return b;
}

Batch minTokensBatch(Context& ctx, int64_t V) {
    Batch b{"min_tokens", V, {}, {3, int32_t(V - 1)}};
    for (int i = 0; i < 8; ++i) {
        Row r;
        r.p = params(i % 2 ? 1.0f : 0.0f, i % 4 >= 2 ? 0.7f : 1.0f);
        r.p.stopTokenIds = {7, int32_t(V / 2)};
        r.p.ignoreEos = i == 5;
        r.suppressStop = i != 6;  // one row past min_tokens: nothing held back
        r.logits = ctx.randn(size_t(V), 1.0f);
        for (int32_t t : {3, 7, int32_t(V / 2), int32_t(V - 1)}) r.logits[size_t(t)] = 8.0f;  // the likeliest
        b.rows.push_back(r);
    }
    return b;
}

Batch combinedBatch(Context& ctx, int64_t V) {
    Batch b{"combined", V, {}, {0}};
    for (int i = 0; i < 12; ++i) {
        Row r;
        r.p = params(0.8f, 0.9f, 50, 0.05f);
        if (i % 3 == 1) r.p = params(1.1f, 0.6f, 8, 0.0f);
        if (i % 3 == 2) r.p = params(0.5f, 0.97f, 2000, 0.01f);
        r.p.repetitionPenalty = 1.1f;
        r.p.frequencyPenalty = 0.2f;
        r.p.presencePenalty = 0.1f;
        r.p.logprobs = i % 2 ? 5 : -1;
        r.logits = ctx.randn(size_t(V), 3.0f);
        if (i % 4 == 0) r.logits = quantized(r.logits);
        r.prompt = ctx.randint(64, 0, int32_t(V - 1));
        r.output = ctx.randint(16, 0, int32_t(V - 1));
        r.suppressStop = i % 5 == 0;
        b.rows.push_back(r);
    }
    return b;
}

Batch logprobsBatch(Context& ctx, int64_t V) {
    Batch b{"logprobs", V, {}, {}};
    for (int32_t n : {0, 1, 5, 20}) {
        Row r;
        r.p = params(0.9f);
        r.p.logprobs = n;
        r.logits = quantized(ctx.randn(size_t(V), 1.0f));  // ties among the best: lower id first
        for (int32_t k = 0; k < 4; ++k) r.logits[size_t(10 * k + 1)] = 6.0f;
        r.logits[0] = -kInf;
        b.rows.push_back(r);
        r.p.temperature = 0.0f;
        b.rows.push_back(r);
    }
    return b;
}

Batch numericalBatch(Context& ctx, int64_t V) {
    Batch b{"numerical", V, {}, {}};
    Row r;
    r.p = params(1.0f);
    for (float badValue : {std::numeric_limits<float>::quiet_NaN(), kInf}) {
        r.logits = ctx.randn(size_t(V), 1.0f);
        r.logits[size_t(V / 3)] = badValue;
        r.expect = Expect::NonFinite;
        b.rows.push_back(r);
    }
    r.logits.assign(size_t(V), -kInf);  // nothing can be sampled
    r.expect = Expect::AllMasked;
    b.rows.push_back(r);
    r.p.temperature = 0.0f;
    b.rows.push_back(r);
    // Everything finite masked by min_tokens.
    r.logits.assign(size_t(V), -kInf);
    r.logits[4] = 1.0f;
    r.p.stopTokenIds = {4};
    r.suppressStop = true;
    b.rows.push_back(r);
    // A healthy row in the same batch is unaffected.
    r = Row{};
    r.p = params(0.7f, 0.9f);
    r.logits = ctx.randn(size_t(V), 2.0f);
    b.rows.push_back(r);
    return b;
}

// Sums that tie with the host's thresholds by construction: the host's order decides, so the backend
// may hand these rows back (and must be right where it does not).
Batch exactTiesBatch(int64_t V) {
    Batch b{"exact ties", V, {}, {}};
    Row r;
    r.logits.assign(size_t(V), 0.25f);  // every mass exactly 1, every running sum an exact integer
    r.expect = Expect::MatchOrHandBack;
    r.p = params(1.0f, 0.5f);  // top_p boundary exactly at V/2 (even V)
    b.rows.push_back(r);
    r.p = params(1.0f);
    r.uniform = 0.5;  // u·z = V/2: exactly the end of a token's interval
    b.rows.push_back(r);
    r.p = params(1.0f, 0.5f);
    r.uniform = 0.5;
    b.rows.push_back(r);
    r.p = params(1.0f, 1.0f, 10);
    r.uniform = 0.3;  // top_k 10 of V ties: all kept; 0.3·V is an integer for V = 1000
    b.rows.push_back(r);
    r.p = params(1.0f);
    r.uniform = 0.0;  // the first token; no tie to decide
    r.expect = Expect::Match;
    b.rows.push_back(r);
    return b;
}

void add(std::vector<Case>& out, std::string name, std::function<Batch(Context&)> make) {
    out.push_back(Case{kFamily, std::move(name), [make](Context& c) { return runBatch(c, make(c)); }});
}

}  // namespace

void addSamplingCases(std::vector<Case>& out) {
    for (int64_t V : {int64_t(1000), int64_t(151552)}) {
        const std::string v = " V=" + str(V);
        add(out, "greedy" + v, [V](Context& c) { return greedyBatch(c, V); });
        add(out, "temperature" + v, [V](Context& c) { return temperatureBatch(c, V); });
        add(out, "top_k" + v, [V](Context& c) { return topKBatch(c, V); });
        add(out, "min_p" + v, [V](Context& c) { return minPBatch(c, V); });
        add(out, "top_p" + v, [V](Context& c) { return topPBatch(c, V, 2.0f, "top_p"); });
        // sigma 3: the 0.95 nucleus holds ~9% of the vocabulary, 13k tokens at V = 151552 (four slabs).
        add(out, "top_p wide" + v, [V](Context& c) { return topPBatch(c, V, 3.0f, "top_p wide"); });
        add(out, "penalties" + v, [V](Context& c) { return penaltyBatch(c, V); });
        add(out, "min_tokens" + v, [V](Context& c) { return minTokensBatch(c, V); });
        add(out, "combined" + v, [V](Context& c) { return combinedBatch(c, V); });
        add(out, "logprobs" + v, [V](Context& c) { return logprobsBatch(c, V); });
        add(out, "numerical" + v, [V](Context& c) { return numericalBatch(c, V); });
    }
    add(out, "exact ties V=1000", [](Context&) { return exactTiesBatch(1000); });
}

bool handBackIsDue(const SampleMargins& m) { return std::min(m.topP, m.draw) <= handBackBound(m); }

}  // namespace ts::selftest
