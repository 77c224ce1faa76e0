// The sampler against independent references: empirical distributions under temperature / top_k / top_p /
// min_p pass a chi-square goodness-of-fit test (fixed seed, 20k draws, alpha = 0.001) against the exact
// filtered distribution; greedy, penalties and min_tokens on crafted rows; seeds reproduce; logprobs equal a
// double-precision log_softmax of the raw logits; bad parameters are rejected by name; the pieces the device
// path shares (a pre-drawn uniform, the draw order, the per-token adjustments) agree with sample().
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "core/error.h"
#include "runtime/sampler.h"

using namespace ts;

namespace {

Sequence makeSeq(SamplingParams p, std::vector<int32_t> prompt = {0}, std::vector<int32_t> output = {}) {
    Sequence s(1, std::move(prompt), std::move(p));
    for (int32_t t : output) s.appendToken(t);
    return s;
}

// The filtered distribution written the obvious way (full sort, doubles), independently of the sampler:
// temperature, then min_p, then top_k (ties at the cut kept), then top_p (keep while the mass above < p).
std::map<int32_t, double> referenceDistribution(const std::vector<float>& logits, const SamplingParams& p) {
    std::vector<std::pair<double, int32_t>> v;  // (scaled logit, id)
    for (size_t i = 0; i < logits.size(); ++i)
        if (std::isfinite(logits[i])) v.emplace_back(double(logits[i]) / double(p.temperature), int32_t(i));
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    auto probs = [](const std::vector<std::pair<double, int32_t>>& w) {
        double z = 0;
        for (auto& e : w) z += std::exp(e.first - w[0].first);
        std::vector<double> out;
        for (auto& e : w) out.push_back(std::exp(e.first - w[0].first) / z);
        return out;
    };
    if (p.minP > 0) {
        std::vector<double> pr = probs(v);
        size_t keep = 0;
        while (keep < v.size() && pr[keep] >= double(p.minP) * pr[0]) ++keep;
        v.resize(keep);
    }
    if (p.topK > 0 && size_t(p.topK) < v.size()) {
        const double cut = v[size_t(p.topK) - 1].first;
        size_t keep = 0;
        while (keep < v.size() && v[keep].first >= cut) ++keep;
        v.resize(keep);
    }
    if (p.topP < 1) {
        std::vector<double> pr = probs(v);
        double above = 0;
        size_t keep = 0;
        while (keep < v.size() && above < double(p.topP)) above += pr[keep++];
        v.resize(keep);
    }
    std::vector<double> pr = probs(v);
    std::map<int32_t, double> out;
    for (size_t i = 0; i < v.size(); ++i) out[v[i].second] = pr[i];
    return out;
}

// Chi-square critical values at alpha = 0.001, by degrees of freedom.
double chiSquareCritical(size_t df) {
    static const double table[] = {0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588};
    return table[df];
}

// Nine tokens with probabilities fixed by construction (log p + an offset), scattered over ids so that the
// ranking is not the id order, and one masked token (-inf) that must never come out.
std::vector<float> craftedRow() {
    const double probs[] = {0.30, 0.20, 0.15, 0.10, 0.08, 0.07, 0.05, 0.03, 0.02};
    const int32_t ids[] = {7, 2, 9, 0, 5, 1, 8, 3, 6};
    std::vector<float> row(10, -std::numeric_limits<float>::infinity());
    for (int i = 0; i < 9; ++i) row[size_t(ids[i])] = float(std::log(probs[i]) + 3.0);
    return row;  // id 4 stays -inf
}

}  // namespace

class TestSampler : public QObject {
    Q_OBJECT

    // Draws 20k tokens with a fixed seed and tests them against `expected` (chi-square, alpha 0.001);
    // a token outside the support must never be drawn.
    void checkFit(const std::vector<float>& row, const SamplingParams& p, const std::map<int32_t, double>& expected) {
        Sequence seq = makeSeq(p);
        SamplerRng rng(20240611);
        const int draws = 20000;
        std::map<int32_t, int> counts;
        for (int i = 0; i < draws; ++i) ++counts[sample(row.data(), int64_t(row.size()), seq, rng, false, {}).token];
        for (auto& [tok, c] : counts) QVERIFY2(expected.count(tok), qPrintable(QString("token %1 drawn %2 times outside the support").arg(tok).arg(c)));
        double chi2 = 0;
        for (auto& [tok, pr] : expected) {
            const double e = pr * draws;
            QVERIFY2(e >= 5, "test design: expected count below 5");
            const double o = counts.count(tok) ? counts[tok] : 0;
            chi2 += (o - e) * (o - e) / e;
        }
        const size_t df = expected.size() - 1;
        if (df == 0) return;
        QVERIFY2(chi2 < chiSquareCritical(df), qPrintable(QString("chi2 %1 >= %2 (df %3)").arg(chi2).arg(chiSquareCritical(df)).arg(df)));
        // And the sampler's own view of the distribution is the exact one (to the float rounding of the
        // crafted logits: log(p) stored as float encodes p to ~1e-7).
        const auto dist = samplingDistribution(row.data(), int64_t(row.size()), seq, false, {});
        QCOMPARE(dist.size(), expected.size());
        for (auto& [tok, pr] : dist) QVERIFY(std::abs(pr - expected.at(tok)) < 1e-6);
    }

private slots:
    void temperatureOne() {
        SamplingParams p;
        const auto row = craftedRow();
        const auto ref = referenceDistribution(row, p);
        QCOMPARE(ref.size(), size_t(9));
        QVERIFY(std::abs(ref.at(7) - 0.30) < 1e-6);  // the construction really encodes these probabilities
        checkFit(row, p, ref);
    }

    void temperatureScaled() {
        for (float t : {0.5f, 2.0f}) {
            SamplingParams p;
            p.temperature = t;
            const auto row = craftedRow();
            const auto ref = referenceDistribution(row, p);
            // p^(1/T) renormalised: at T = 0.5 the top token has 0.09 / 0.1776.
            if (t == 0.5f) QVERIFY(std::abs(ref.at(7) - 0.09 / 0.1776) < 1e-6);
            checkFit(row, p, ref);
        }
    }

    void topK() {
        SamplingParams p;
        p.topK = 3;
        const auto row = craftedRow();
        const std::map<int32_t, double> expected = {{7, 0.30 / 0.65}, {2, 0.20 / 0.65}, {9, 0.15 / 0.65}};
        checkFit(row, p, expected);
    }

    void topP() {
        SamplingParams p;
        p.topP = 0.7f;  // masses above: 0, .30, .50, .65 (< .7: kept), .75 -> the first four
        const auto row = craftedRow();
        const std::map<int32_t, double> expected = {{7, 0.30 / 0.75}, {2, 0.20 / 0.75}, {9, 0.15 / 0.75}, {0, 0.10 / 0.75}};
        checkFit(row, p, expected);
    }

    void minP() {
        SamplingParams p;
        p.minP = 0.4f;  // threshold 0.12: keeps .30 .20 .15
        const auto row = craftedRow();
        const std::map<int32_t, double> expected = {{7, 0.30 / 0.65}, {2, 0.20 / 0.65}, {9, 0.15 / 0.65}};
        checkFit(row, p, expected);
    }

    void combined() {
        SamplingParams p;
        p.temperature = 0.8f;
        p.topK = 7;
        p.topP = 0.9f;
        p.minP = 0.05f;
        const auto row = craftedRow();
        const auto ref = referenceDistribution(row, p);
        QVERIFY(ref.size() >= 3 && ref.size() < 7);
        checkFit(row, p, ref);
    }

    // Large rows exercise the partial-sort paths (top_p needing more than the first 256 candidates).
    void distributionMatchesReferenceOnLargeRows() {
        std::mt19937_64 g(7);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> row(5000);
        for (float& x : row) x = nd(g);
        row[17] = row[18] = 2.5f;  // a tie
        struct Case { float t, topP, minP; int32_t topK; };
        for (Case c : {Case{1.0f, 0.95f, 0.0f, 0}, Case{0.7f, 0.5f, 0.0f, 1000}, Case{1.3f, 0.99f, 0.01f, 0},
                       Case{1.0f, 1.0f, 0.0f, 18}, Case{2.0f, 0.3f, 0.2f, 300}}) {
            SamplingParams p;
            p.temperature = c.t;
            p.topP = c.topP;
            p.minP = c.minP;
            p.topK = c.topK;
            const auto ref = referenceDistribution(row, p);
            const auto dist = samplingDistribution(row.data(), int64_t(row.size()), makeSeq(p), false, {});
            QCOMPARE(dist.size(), ref.size());
            double sum = 0;
            for (auto& [tok, pr] : dist) {
                QVERIFY(ref.count(tok));
                QVERIFY(std::abs(pr - ref.at(tok)) < 1e-12);
                sum += pr;
            }
            QVERIFY(std::abs(sum - 1.0) < 1e-9);
        }
    }

    void greedy() {
        std::vector<float> row = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
        SamplingParams p;
        p.temperature = 0.0f;
        Sequence s = makeSeq(p);
        SamplerRng rng(1);
        QCOMPARE(sample(row.data(), 5, s, rng, false, {}).token, 1);  // tie between 1 and 3: the lower id
        p.temperature = 1e-6f;  // below vLLM's epsilon: greedy too
        p.topK = 1;
        QCOMPARE(sample(row.data(), 5, makeSeq(p), rng, false, {}).token, 1);
        const auto dist = samplingDistribution(row.data(), 5, s, false, {});
        QCOMPARE(dist.size(), size_t(1));
        QCOMPARE(dist[0].first, 1);
    }

    void penalties() {
        // Prompt {0, 1}, output {2, 2, 3}.
        std::vector<float> row = {2.0f, -1.0f, 0.5f, 1.0f, -2.0f, 3.0f};
        SamplingParams p;
        p.repetitionPenalty = 2.0f;  // seen: 0 1 2 3 -> 1, -2, 0.25, 0.5
        p.frequencyPenalty = 0.5f;   // output counts: 2 -> 2, 3 -> 1
        p.presencePenalty = 0.25f;
        Sequence s = makeSeq(p, {0, 1}, {2, 2, 3});
        const std::vector<double> expectLogits = {1.0, -2.0, 0.25 - 1.0 - 0.25, 0.5 - 0.5 - 0.25, -2.0, 3.0};
        double z = 0;
        for (double l : expectLogits) z += std::exp(l);
        const auto dist = samplingDistribution(row.data(), 6, s, false, {});
        QCOMPARE(dist.size(), size_t(6));
        for (auto& [tok, pr] : dist) QVERIFY(std::abs(pr - std::exp(expectLogits[size_t(tok)]) / z) < 1e-6);

        // The repetition penalty can flip the argmax, for positive and for negative logits.
        SamplingParams g;
        g.temperature = 0;
        g.repetitionPenalty = 1.2f;
        SamplerRng rng(3);
        std::vector<float> pos = {2.0f, 1.9f};
        QCOMPARE(sample(pos.data(), 2, makeSeq(g, {0}), rng, false, {}).token, 1);  // 2 / 1.2 < 1.9
        std::vector<float> neg = {-1.0f, -1.1f};
        QCOMPARE(sample(neg.data(), 2, makeSeq(g, {0}), rng, false, {}).token, 1);  // -1.2 < -1.1
        // Presence / frequency touch output tokens only: the prompt token 0 keeps its logit.
        SamplingParams f;
        f.temperature = 0;
        f.presencePenalty = 2.0f;
        std::vector<float> row2 = {1.0f, 0.9f};
        QCOMPARE(sample(row2.data(), 2, makeSeq(f, {0}), rng, false, {}).token, 0);
        QCOMPARE(sample(row2.data(), 2, makeSeq(f, {1}, {0}), rng, false, {}).token, 1);
    }

    void minTokensMasksEosAndStopIds() {
        std::vector<float> row = {5.0f, 4.0f, 3.0f, 1.0f};  // eos = 0, stop id = 1
        SamplingParams p;
        p.temperature = 0;
        p.stopTokenIds = {1};
        SamplerRng rng(5);
        QCOMPARE(sample(row.data(), 4, makeSeq(p), rng, false, {0}).token, 0);
        QCOMPARE(sample(row.data(), 4, makeSeq(p), rng, true, {0}).token, 2);
        p.ignoreEos = true;  // eos does not stop, so it is not held back
        QCOMPARE(sample(row.data(), 4, makeSeq(p), rng, true, {0}).token, 0);
        // Sampling never draws a masked token.
        SamplingParams r;
        r.stopTokenIds = {1};
        Sequence s = makeSeq(r);
        for (int i = 0; i < 2000; ++i) {
            const int32_t t = sample(row.data(), 4, s, rng, true, {0}).token;
            QVERIFY(t == 2 || t == 3);
        }
    }

    void seedReproduces() {
        SamplingParams p;
        p.seed = 42;
        p.topP = 0.9f;
        const auto row = craftedRow();
        Sequence s = makeSeq(p);
        auto run = [&](std::optional<uint64_t> seed) {
            SamplerRng rng(seed);
            std::vector<int32_t> out;
            for (int i = 0; i < 300; ++i) out.push_back(sample(row.data(), 10, s, rng, false, {}).token);
            return out;
        };
        QCOMPARE(run(42), run(42));
        QVERIFY(run(42) != run(43));
        QVERIFY(run(std::nullopt) != run(std::nullopt));  // unseeded streams differ (chance ~ 1e-100)
    }

    void logprobsAreRawLogSoftmax() {
        std::mt19937_64 g(11);
        std::normal_distribution<float> nd(0.0f, 3.0f);
        std::vector<float> row(1000);
        for (float& x : row) x = nd(g);
        row[5] = -std::numeric_limits<float>::infinity();
        double mx = -1e300;
        for (float x : row) mx = std::max(mx, double(x));
        double z = 0;
        for (float x : row) z += std::exp(double(x) - mx);
        const double lse = mx + std::log(z);
        std::vector<int32_t> order(row.size());
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });

        SamplingParams p;
        p.logprobs = 5;
        p.temperature = 0.3f;         // processing must not leak into the logprobs
        p.repetitionPenalty = 1.5f;
        SamplerRng rng(9);
        for (int i = 0; i < 50; ++i) {
            const SampleResult r = sample(row.data(), 1000, makeSeq(p, {order[0], order[1]}), rng, false, {});
            QVERIFY(std::abs(double(r.logprob) - (double(row[size_t(r.token)]) - lse)) < 1e-5);
            QCOMPARE(r.top.size(), size_t(5));
            for (size_t k = 0; k < 5; ++k) {
                QCOMPARE(r.top[k].first, order[k]);
                QVERIFY(std::abs(double(r.top[k].second) - (double(row[size_t(order[k])]) - lse)) < 1e-5);
            }
        }
        p.logprobs = -1;
        const SampleResult none = sample(row.data(), 1000, makeSeq(p), rng, false, {});
        QVERIFY(none.top.empty());
        p.logprobs = 0;  // the sampled token only
        const SampleResult only = sample(row.data(), 1000, makeSeq(p), rng, false, {});
        QVERIFY(only.top.empty());
        QVERIFY(std::abs(double(only.logprob) - (double(row[size_t(only.token)]) - lse)) < 1e-5);
    }

    void nonFiniteLogitsAreNumericalErrors() {
        SamplingParams p;
        SamplerRng rng(1);
        for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
            std::vector<float> row = {0.0f, bad, 1.0f};
            try {
                sample(row.data(), 3, makeSeq(p), rng, false, {});
                QFAIL("no error");
            } catch (const Error& e) {
                QCOMPARE(e.kind(), ErrorKind::Internal);
                QVERIFY(QString(e.what()).contains("numerical error"));
            }
        }
    }

    // The device path draws each row's number before it knows where the row is sampled:
    // sampleWithUniform with that number is sample() with the generator (same token, same stream after).
    void uniformGivenEqualsDrawn() {
        std::mt19937_64 g(5);
        std::normal_distribution<float> nd(0.0f, 2.0f);
        std::vector<float> row(500);
        struct Case { float t, topP, minP; int32_t topK; };
        for (Case c : {Case{1.0f, 1.0f, 0.0f, 0}, Case{0.7f, 0.9f, 0.0f, 0}, Case{1.3f, 1.0f, 0.05f, 20},
                       Case{0.8f, 0.6f, 0.02f, 7}, Case{0.0f, 1.0f, 0.0f, 0}, Case{1e-6f, 0.5f, 0.0f, 3}}) {
            SamplingParams p;
            p.temperature = c.t;
            p.topP = c.topP;
            p.minP = c.minP;
            p.topK = c.topK;
            QCOMPARE(drawsUniform(p), c.t >= 1e-5f);
            SamplerRng a(77), b(77);
            for (int i = 0; i < 40; ++i) {
                for (float& x : row) x = nd(g);
                const Sequence s = makeSeq(p);
                const int32_t viaRng = sample(row.data(), 500, s, a, false, {}).token;
                const double u = drawsUniform(p) ? b.uniform() : 0.0;
                QCOMPARE(sampleWithUniform(row.data(), 500, s, u, false, {}).token, viaRng);
            }
            QCOMPARE(a.uniform(), b.uniform());  // greedy rows drew nothing on either side
        }
    }

    // Without top_p the draw walks the candidates in increasing id (after top_k too), with top_p in the
    // top_p ranking: both orders follow from the input alone, which is what lets a device sampler agree.
    void drawOrder() {
        // Six tokens; top_k 3 keeps ids 2 (p .2), 7 (p .5), 9 (p .3) of the renormalised three.
        std::vector<float> row(10, -5.0f);
        row[2] = float(std::log(0.2));
        row[7] = float(std::log(0.5));
        row[9] = float(std::log(0.3));
        row[4] = row[5] = row[8] = -3.0f;
        SamplingParams p;
        p.topK = 3;
        const Sequence s = makeSeq(p);
        QCOMPARE(sampleWithUniform(row.data(), 10, s, 0.1, false, {}).token, 2);   // [0, .2)
        QCOMPARE(sampleWithUniform(row.data(), 10, s, 0.25, false, {}).token, 7);  // [.2, .7)
        QCOMPARE(sampleWithUniform(row.data(), 10, s, 0.75, false, {}).token, 9);  // [.7, 1)
        p.topP = 0.99f;  // cuts nothing of the three, but the draw now walks them best first: 7, 9, 2
        const Sequence t = makeSeq(p);
        QCOMPARE(sampleWithUniform(row.data(), 10, t, 0.1, false, {}).token, 7);
        QCOMPARE(sampleWithUniform(row.data(), 10, t, 0.6, false, {}).token, 9);
        QCOMPARE(sampleWithUniform(row.data(), 10, t, 0.9, false, {}).token, 2);
    }

    // The margins the self-test judges a device hand-back by: how far each decision's threshold lies from the
    // nearer edge of the element it picked, over the candidates' mass (first / last elements have one edge).
    void marginsOfTheDecisions() {
        const double inf = std::numeric_limits<double>::infinity();
        std::vector<float> row(4, 0.0f);  // four equal tokens: each has mass 1 of z = 4
        SamplingParams p;                 // temperature 1, no top_p
        const Sequence s = makeSeq(p);
        SampleMargins m = sampleMarginsWithUniform(row.data(), 4, s, 0.125, false, {});  // u·z = 0.5 in [0, 1)
        QCOMPARE(m.candidates, int64_t(4));
        QCOMPARE(m.mass, 4.0);
        QCOMPARE(m.topP, inf);
        QCOMPARE(m.draw, 0.5 / 4.0);  // first element: only the upper edge, 1 − 0.5
        m = sampleMarginsWithUniform(row.data(), 4, s, 0.375, false, {});  // 1.5 in [1, 2): 0.5 either side
        QCOMPARE(m.draw, 0.5 / 4.0);
        m = sampleMarginsWithUniform(row.data(), 4, s, 0.5, false, {});  // exactly on the edge 2
        QCOMPARE(m.draw, 0.0);
        m = sampleMarginsWithUniform(row.data(), 4, s, 0.99, false, {});  // 3.96 in the last: only 3.96 − 3
        QVERIFY(std::abs(m.draw - 0.96 / 4.0) < 1e-12);
        // top_p 0.5: the target 2 is exactly the upper edge of the second kept element.
        p.topP = 0.5f;
        const Sequence t = makeSeq(p);
        m = sampleMarginsWithUniform(row.data(), 4, t, 0.25, false, {});
        QCOMPARE(m.topP, 0.0);
        QCOMPARE(m.draw, 0.5 / 4.0);  // u · the kept mass 2 = 0.5, in the first element [0, 1)
        p.topP = 0.625f;  // target 2.5: inside the third element [2, 3), 0.5 either side
        const Sequence v = makeSeq(p);
        m = sampleMarginsWithUniform(row.data(), 4, v, 0.5, false, {});  // kept mass 3, u·3 = 1.5 in [1, 2)
        QCOMPARE(m.topP, 0.5 / 4.0);
        QCOMPARE(m.draw, 0.5 / 4.0);
        // Greedy makes no sum decision.
        p.temperature = 0.0f;
        const Sequence g = makeSeq(p);
        m = sampleMarginsWithUniform(row.data(), 4, g, 0.0, false, {});
        QCOMPARE(m.topP, inf);
        QCOMPARE(m.draw, inf);
    }

    // The per-token adjustments are the penalties' one definition: sorted, distinct, and the same with a
    // history longer than the vocabulary (tallied by id instead of sorted).
    void adjustmentsOfLongHistories() {
        SamplingParams p;
        p.repetitionPenalty = 1.25f;
        p.frequencyPenalty = 0.3f;
        p.presencePenalty = -0.5f;
        p.stopTokenIds = {6};
        std::mt19937 g(3);
        std::vector<int32_t> prompt(40), output(30);
        for (int32_t& t : prompt) t = int32_t(g() % 12);
        for (int32_t& t : output) t = int32_t(g() % 12);
        const Sequence s = makeSeq(p, prompt, output);
        for (int64_t vocab : {int64_t(12), int64_t(100000)}) {  // 70 events: tallied at 12, sorted at 100000
            const auto adj = logitAdjustments(s, vocab, true, {11});
            std::map<int32_t, int32_t> counts;
            for (int32_t t : output) ++counts[t];
            std::set<int32_t> seen(prompt.begin(), prompt.end());
            seen.insert(output.begin(), output.end());
            std::set<int32_t> expectIds = seen;
            expectIds.insert({6, 11});
            QCOMPARE(adj.size(), expectIds.size());
            size_t k = 0;
            for (int32_t id : expectIds) {
                const SampleLogitAdjust& a = adj[k++];
                QCOMPARE(a.token, id);
                QCOMPARE(bool(a.flags & SampleLogitAdjust::kAdjustMask), id == 6 || id == 11);
                QCOMPARE(bool(a.flags & SampleLogitAdjust::kAdjustRepeat), seen.count(id) > 0);
                const float sub = counts.count(id) ? p.frequencyPenalty * float(counts[id]) + p.presencePenalty : 0.0f;
                QCOMPARE(a.subtract, sub);
            }
        }
        // And the sampler applies them: a long history gives the distribution of the short-history rule.
        std::vector<float> row(12);
        for (size_t i = 0; i < row.size(); ++i) row[i] = 0.3f * float(i) - 1.0f;
        const auto dist = samplingDistribution(row.data(), 12, s, true, {11});
        std::vector<double> l(12);
        for (size_t i = 0; i < 12; ++i) {
            float x = row[i];
            if (i == 6 || i == 11) x = -std::numeric_limits<float>::infinity();
            if (std::count(prompt.begin(), prompt.end(), int32_t(i)) || std::count(output.begin(), output.end(), int32_t(i)))
                x = x > 0.0f ? x / p.repetitionPenalty : x * p.repetitionPenalty;
            const auto c = std::count(output.begin(), output.end(), int32_t(i));
            if (c) x -= p.frequencyPenalty * float(c) + p.presencePenalty;
            l[i] = double(x);
        }
        double z = 0;
        for (double v : l) z += std::exp(v);
        for (auto& [tok, pr] : dist) QVERIFY(std::abs(pr - std::exp(l[size_t(tok)]) / z) < 1e-9);
    }

    void validation() {
        validateSamplingParams(SamplingParams{});
        struct Bad { const char* field; std::function<void(SamplingParams&)> set; };
        const std::vector<Bad> bad = {
            {"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
            {"temperature", [](SamplingParams& p) { p.temperature = std::numeric_limits<float>::quiet_NaN(); }},
            {"top_p", [](SamplingParams& p) { p.topP = 0.0f; }},
            {"top_p", [](SamplingParams& p) { p.topP = 1.01f; }},
            {"top_k", [](SamplingParams& p) { p.topK = -2; }},
            {"min_p", [](SamplingParams& p) { p.minP = 1.5f; }},
            {"presence_penalty", [](SamplingParams& p) { p.presencePenalty = 2.5f; }},
            {"frequency_penalty", [](SamplingParams& p) { p.frequencyPenalty = -3.0f; }},
            {"repetition_penalty", [](SamplingParams& p) { p.repetitionPenalty = 0.0f; }},
            {"max_tokens", [](SamplingParams& p) { p.maxTokens = 0; }},
            {"min_tokens", [](SamplingParams& p) { p.minTokens = 17; }},
            {"logprobs", [](SamplingParams& p) { p.logprobs = 21; }},
            {"stop_token_ids", [](SamplingParams& p) { p.stopTokenIds = {5, -1}; }},
        };
        for (const Bad& b : bad) {
            SamplingParams p;
            b.set(p);
            try {
                validateSamplingParams(p);
                QFAIL(qPrintable(QString("accepted a bad %1").arg(b.field)));
            } catch (const Error& e) {
                QCOMPARE(e.kind(), ErrorKind::InvalidArgument);
                QVERIFY2(QString(e.what()).contains(b.field), e.what());
            }
        }
        SamplingParams p;
        p.stopTokenIds = {100};
        validateSamplingParams(p);
        QVERIFY_THROWS_EXCEPTION(Error, validateSamplingParams(p, 100));
        p = {};
        p.topK = -1;  // vLLM's "off"
        p.temperature = 0;
        validateSamplingParams(p);
    }
};

QTEST_GUILESS_MAIN(TestSampler)
#include "test_sampler.moc"
