// `bench-device --what mhc`: the mHC pre op (Backend::mhcPre) at GLM-5.3-Flash's width — 4 residual streams
// of 4096, 2n + n² = 24 mixing rows of a BF16 fn [24, 16384], 20 Sinkhorn iterations — at decode sizes
// (T = 1, 4) and one prefill size (T = 256), and T = 1 once more with a single Sinkhorn iteration (the
// difference to the 20-iteration row is what the other 19 cost). Every layer runs it twice (before attention and before the
// MLP), so a decode step of the 45-layer model pays it 90 times. At decode sizes the op is latency-bound
// (0.8 MB of fn, a few hundred floats of partial sums, a 4 × 4 Sinkhorn), so the figure of merit is µs per
// call, here in a stream of back-to-back calls as a decode step runs them. Both variants of the CUDA
// backend are timed: one launch (partials, then the token's last block mixes) and the two launches before
// it, chosen through the run-time override mhcSetFusedPre (kernels/exl3_tune.h; TS_MHC_FUSED is read once
// per process); the previous override is restored afterwards. Other backends ignore the switch (the two
// columns are then the same computation).
// Only the Backend interface is used: it builds without CUDA and runs on any backend.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "cli/bench_cuda.h"
#include "exl3_tune.h"

namespace ts::cli {

namespace {

using MhcVariantScope = OverrideScope<mhcSetFusedPre>;  // the variant for its lifetime, then the previous override

// Median µs per call of mhcPre on T fresh random tokens: [0] one launch, [1] two.
std::pair<double, double> timeMhcPre(Backend& backend, const HyperConnParams& p, int64_t T, int64_t D, int reps,
                                     std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int n = p.n;
    std::vector<float> s(size_t(T * n * D));
    for (float& v : s) v = nd(rng);
    const Buffer streams = backend.upload(s.data(), s.size() * 4);
    const Buffer x = backend.alloc(size_t(T * D) * 4), post = backend.alloc(size_t(T * n) * 4),
                 comb = backend.alloc(size_t(T * n * n) * 4);
    const int inner = T >= 256 ? 5 : 50;
    double us[2] = {0.0, 0.0};
    for (int v = 0; v < 2; ++v) {
        MhcVariantScope scope(v == 0 ? 1 : 0);
        us[v] = 1e6 * medianSeconds(backend, reps, inner, [&] { backend.mhcPre(streams, T, D, p, x, post, comb); });
    }
    return {us[0], us[1]};
}

}  // namespace

nlohmann::json benchMhcPre(Backend& backend, int reps) {
    const int n = 4, mix = 2 * n + n * n, iters = 20;  // GLM-5.3-Flash: hc_mult 4, 20 Sinkhorn iterations
    const int64_t D = 4096, width = int64_t(n) * D;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // fn as a BF16 weight with std 1/sqrt(width) (logits O(1)), base and scale as the model's fp32 vectors.
    std::vector<uint16_t> fnBits(size_t(mix * width));
    const float fnStd = 1.0f / std::sqrt(float(width));
    for (uint16_t& b : fnBits) {
        const float v = nd(rng) * fnStd;
        uint32_t u;
        std::memcpy(&u, &v, 4);
        b = uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);  // round to nearest even
    }
    std::vector<float> base(static_cast<size_t>(mix));
    const std::vector<float> scale = {1.0f, 1.0f, 1.0f};
    for (float& v : base) v = 0.5f * nd(rng);
    HyperConnParams p;
    p.fn.data = fnBits.data();
    p.fn.dtype = DType::BF16;
    p.fn.rows = mix;
    p.fn.cols = width;
    p.base = backend.upload(base.data(), base.size() * 4);
    p.scale = backend.upload(scale.data(), scale.size() * 4);
    p.n = n;
    p.sinkhornIters = iters;
    p.hcEps = 1e-6f;
    p.normEps = 1e-6f;

    nlohmann::json rows = nlohmann::json::array();
    std::printf("mHC pre (mhcPre), n=%d D=%lld, BF16 fn [%d, %lld], %d Sinkhorn iterations: us per call, "
                "back to back\n", n, static_cast<long long>(D), mix, static_cast<long long>(width), iters);
    std::printf("  %6s | %12s | %12s | %s\n", "T", "one launch", "two launches", "gain");
    // T = 1 with a single Sinkhorn iteration too: the difference is what the other 19 iterations cost.
    struct Row {
        int64_t T;
        int iters;
    };
    for (const Row r : {Row{1, iters}, Row{4, iters}, Row{256, iters}, Row{1, 1}}) {
        p.sinkhornIters = r.iters;
        const auto [one, two] = timeMhcPre(backend, p, r.T, D, reps, rng);
        std::printf("  %6lld%s | %9.2f us | %9.2f us | %5.2fx\n", static_cast<long long>(r.T),
                    r.iters == iters ? "" : " (1 iteration)", one, two, two / one);
        rows.push_back({{"T", r.T}, {"n", n}, {"D", D}, {"iters", r.iters}, {"us_one_launch", one},
                        {"us_two_launches", two}, {"speedup", two / one}});
    }
    return rows;
}

}  // namespace ts::cli
