// Op self-test cases of the mHC and KDA family (kernels/cpu/cpu_mhc_kda.cpp is the reference,
// kernels/cuda/cuda_mhc_kda.cu the CUDA side): mhcPre, mhcPost, mhcHead, causalConvSilu, kdaGate,
// kdaRecurrent, gatedRmsnorm. Every op runs on both backends with the same inputs; outputs (and the
// in-place state buffers) are poisoned or freshly uploaded, then compared.
//
// Widths: GLM-5.3-Flash (hidden 4096, hc_mult 4, 20 Sinkhorn iterations, KDA 64 heads × 128, conv
// kernel 4 over q|k|v = 3·64·128 channels), the golden tiny_a model (hidden 128, KDA 4 × 32), the
// embedded model (hidden 256, KDA 4 × 64), and odd sizes (tails of every block shape in the kernels).
//
// Tolerances (|dut − ref| ≤ atol + rtol·|ref|) are fp32 summation-order noise with a ≥ 10× margin,
// sized with a host emulation of the CUDA summation order (tree / row-group sums, FMA contraction)
// against the CPU's sequential order on these input distributions:
// - mhcPre: the 2n+n² mixing logits are dots over n·D = 16384 elements; their order noise (≤ ~4e-6
//   at logits of magnitude ~8) moves x = Σ pre·s by ≤ 9e-6 and post/comb by ≤ 4e-6. On the CUDA backend
//   its one-launch and two-launch forms must also agree bit for bit ("1 vs 2 launches" rows), and so must
//   the Sinkhorn inline and on the side stream ("inline vs aside" rows).
// - kdaRecurrent: dots over Dk per token; the emulated error stays ≤ 1e-6 relative over 300 tokens
//   with slow decay (the delta rule with |k| = 1, β < 1 and decay ≤ 1 does not amplify errors).
//   Calls with T ≥ 16 and Dk ∈ {32, 64, 128} (the "chunk" cases, and the two older "long" ones) take
//   the CUDA backend's chunked form (kernels/cuda/cuda_kda_chunk.cu), which reassociates every sum:
//   32-token chunks, decays as
//   2^(G_t − G_s) of a compensated prefix sum of g·log2e (relative error ~2^-24·(|ΔG|·ln2 + 2) per
//   factor, as the recurrence's product of rounded exp(g)), the intra-chunk delta rule as a unit lower
//   triangular solve with |A[t][s]| ≤ β < 1 (the recurrence's own computation of u, as stable), dots
//   over Dk and over the chunk in tree / row order. A host emulation of the kernels (their code, run on
//   the CPU one thread per CUDA thread) against the CPU loop stays ≤ 5% of the recurrent bound below
//   (max |Δo| ≤ 1.1e-7 at |o| ≤ 0.21, |ΔS| ≤ 7.2e-7 at |S| ≤ 1.2) over 3000 tokens of weak decay (the
//   state remembers longest), 1000 near the −5 lower bound, decays down to −30 (the softplus branch has
//   no lower bound) and 30% strong / 70% weak per element (a channel that forgets, then remembers):
//   the same tolerances hold for both paths, with a ≥ 20× margin for exp2f/expf ulps on the device.
// - elementwise ops (mhcPost, conv, gates, norms): a few ulp (FMA contraction, expf vs std::exp).
// The conv state shift is a copy: compared bit for bit.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "exl3_tune.h"
#include "selftest/op_selftest.h"

namespace ts::selftest {

namespace {

const char* const kFamily = "mhc_kda";

// ---------------------------------------------------------------------------------------------------

struct MhcPreShape {
    const char* label;
    int64_t T, D;
    int n, iters;
    DType dtype;
};

std::vector<OpResult> mhcPreCase(Context& ctx, const MhcPreShape& s) {
    const int n = s.n, mix = 2 * n + n * n;
    const int64_t width = int64_t(n) * s.D;
    const std::vector<float> streams = ctx.randn(size_t(s.T * width));
    // fn ~ N(0, 1/width) makes the mixing logits O(1), so the softmax and Sinkhorn are exercised away
    // from saturation (and with scale up to 2 and base ~ N(0, 0.5²), some rows are far from uniform).
    const WeightView fn = ctx.weight(mix, width, s.dtype, 1.0f / std::sqrt(float(width)));
    const std::vector<float> base = ctx.randn(size_t(mix), 0.5f), scale = ctx.uniform(3, 0.5f, 2.0f);
    auto run = [&](Backend& b) {
        HyperConnParams p;
        p.fn = fn;
        p.base = Context::put(b, base);
        p.scale = Context::put(b, scale);
        p.n = n;
        p.sinkhornIters = s.iters;
        p.hcEps = 1e-6f;
        p.normEps = 1e-5f;
        const Buffer in = Context::put(b, streams);
        const Buffer x = Context::poisoned(b, size_t(s.T * s.D) * 4), post = Context::poisoned(b, size_t(s.T * n) * 4),
                     comb = Context::poisoned(b, size_t(s.T * n * n) * 4);
        b.mhcPre(in, s.T, s.D, p, x, post, comb);
        return Outs{Context::getF32(b, x, size_t(s.T * s.D)), Context::getF32(b, post, size_t(s.T * n)),
                    Context::getF32(b, comb, size_t(s.T * n * n))};
    };
    auto [ref, dut] = onBoth(ctx, run);
    const std::string sh = std::string(s.label) + " T=" + str(s.T) + " D=" + str(s.D) + " n=" + str(n) +
                           " iters=" + str(s.iters) + " fn=" + std::string(dtypeName(s.dtype));
    std::vector<OpResult> rs = {Context::compare(kFamily, "mhcPre.x", sh, ref[0], dut[0], 5e-5, 2e-4),
                                Context::compare(kFamily, "mhcPre.post", sh, ref[1], dut[1], 1e-5, 1e-4),
                                Context::compare(kFamily, "mhcPre.comb", sh, ref[2], dut[2], 1e-5, 1e-4)};
    // The CUDA backend's other variant (one launch ↔ two, kernels/exl3_tune.h) must give the same bits: the
    // same operations in the same order, only the kernel boundary differs.
    if (ctx.dut().name() == "cuda") {
        const bool fused = mhcFusedPre();
        Outs other;
        {
            const TuneOverride<mhcSetFusedPre> flip(fused ? 0 : 1);
            other = run(ctx.dut());
        }
        const char* what[3] = {"mhcPre.x 1 vs 2 launches", "mhcPre.post 1 vs 2 launches", "mhcPre.comb 1 vs 2 launches"};
        for (int i = 0; i < 3; ++i)
            rs.push_back(Context::compareExact(kFamily, what[i], sh + (fused ? " (default: 1)" : " (default: 2)"),
                                               bitsOf(dut[size_t(i)]), bitsOf(other[size_t(i)])));
        // The Sinkhorn on the side stream (a decode step's default, n² ≤ 32; larger n stays inline, so there is
        // nothing to compare) against inline: the same function on the same values, so the same bits — and the
        // download must wait for the side stream's result.
        if (n * n > 32) return rs;
        Outs inl, aside;
        {
            const TuneOverride<mhcSetSideSinkhorn> off(0);
            inl = run(ctx.dut());
        }
        {
            const TuneOverride<mhcSetSideSinkhorn> always(2);
            aside = run(ctx.dut());
        }
        const char* what2[3] = {"mhcPre.x inline vs aside", "mhcPre.post inline vs aside",
                                "mhcPre.comb inline vs aside"};
        for (int i = 0; i < 3; ++i)
            rs.push_back(Context::compareExact(kFamily, what2[i], sh, bitsOf(inl[size_t(i)]), bitsOf(aside[size_t(i)])));
    }
    return rs;
}

std::vector<OpResult> mhcPostCase(Context& ctx, const char* label, int64_t T, int64_t D, int n) {
    const std::vector<float> streams = ctx.randn(size_t(T * n * D)), y = ctx.randn(size_t(T * D));
    const std::vector<float> post = ctx.uniform(size_t(T * n), 0.0f, 2.0f), comb = ctx.uniform(size_t(T * n * n), 0.01f, 1.0f);
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        const Buffer s = Context::put(b, streams);
        b.mhcPost(s, T, D, n, Context::put(b, y), Context::put(b, post), Context::put(b, comb));
        return Outs{Context::getF32(b, s, size_t(T * n * D))};
    });
    const std::string sh = std::string(label) + " T=" + str(T) + " D=" + str(D) + " n=" + str(n);
    return {Context::compare(kFamily, "mhcPost", sh, ref[0], dut[0], 1e-5, 1e-5)};
}

std::vector<OpResult> mhcHeadCase(Context& ctx, const char* label, int64_t T, int64_t D, int n) {
    const std::vector<float> streams = ctx.randn(size_t(T * n * D));
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        const Buffer out = Context::poisoned(b, size_t(T * D) * 4);
        b.mhcHead(Context::put(b, streams), T, D, n, out);
        return Outs{Context::getF32(b, out, size_t(T * D))};
    });
    const std::string sh = std::string(label) + " T=" + str(T) + " D=" + str(D) + " n=" + str(n);
    // Same adds in the same order and one IEEE division on both sides.
    return {Context::compare(kFamily, "mhcHead", sh, ref[0], dut[0], 1e-7, 1e-6)};
}

// ---------------------------------------------------------------------------------------------------

// Consecutive calls of `Ts` tokens each on one conv state (a prefill then decode steps); every call's
// output and the final state are compared. inPlace: out is the input buffer (the CPU allows it).
std::vector<OpResult> convCase(Context& ctx, const char* label, std::vector<int64_t> Ts, int64_t C, int K,
                               bool inPlace = false) {
    const std::vector<float> w = ctx.randn(size_t(C * K), 0.5f), state0 = ctx.randn(size_t((K - 1) * C));
    std::vector<std::vector<float>> xs;
    for (int64_t T : Ts) xs.push_back(ctx.randn(size_t(T * C)));
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        const Buffer wb = Context::put(b, w);
        const Buffer st = Context::put(b, state0.data(), state0.size() * 4);
        Outs o;
        for (size_t i = 0; i < Ts.size(); ++i) {
            const Buffer x = Context::put(b, xs[i]);
            const Buffer out = inPlace ? x : Context::poisoned(b, size_t(Ts[i] * C) * 4);
            b.causalConvSilu(x, Ts[i], C, K, wb, st, out);
            o.push_back(Context::getF32(b, out, size_t(Ts[i] * C)));
        }
        o.push_back(Context::getF32(b, st, size_t((K - 1) * C)));
        return o;
    });
    std::string ts;
    for (int64_t T : Ts) {
        if (!ts.empty()) ts += '+';
        ts += str(T);
    }
    const std::string sh = std::string(label) + " T=" + ts + " C=" + str(C) + " K=" + str(K) + (inPlace ? " in-place" : "");
    std::vector<OpResult> r;
    for (size_t i = 0; i < Ts.size(); ++i)
        r.push_back(Context::compare(kFamily, "causalConvSilu.out", sh + (Ts.size() > 1 ? " call " + str(int64_t(i)) : ""),
                                     ref[i], dut[i], 1e-6, 1e-5));
    if (K > 1) r.push_back(Context::compareExact(kFamily, "causalConvSilu.state", sh, bitsOf(ref.back()), bitsOf(dut.back())));
    return r;
}

std::vector<OpResult> kdaGateCase(Context& ctx, const char* label, int64_t T, int64_t H, int64_t Dk, float lower) {
    const bool softplus = std::isnan(lower);
    // Wide inputs on the softplus branch so that some g = f + dtBias pass its g > 20 cut-off.
    const std::vector<float> f = ctx.randn(size_t(T * H * Dk), softplus ? 8.0f : 2.0f);
    const std::vector<float> aLog = ctx.uniform(size_t(H), -2.0f, 1.5f), dtBias = ctx.randn(size_t(H * Dk));
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        const Buffer fb = Context::put(b, f);
        b.kdaGate(fb, T, H, Dk, Context::put(b, aLog), Context::put(b, dtBias), lower);
        return Outs{Context::getF32(b, fb, size_t(T * H * Dk))};
    });
    const std::string sh = std::string(label) + " T=" + str(T) + " H=" + str(H) + " Dk=" + str(Dk) +
                           (softplus ? " softplus" : " lower=" + fstr(lower));
    return {Context::compare(kFamily, "kdaGate", sh, ref[0], dut[0], 2e-6, 1e-5)};
}

// Consecutive kdaRecurrent calls of `Ts` tokens each on one state. gLow, gHigh: the gates g are uniform
// in [gLow, gHigh) (the model's g = −5·sigmoid(·) lies in (−5, 0); near 0 the state remembers long);
// strongFrac > 0 replaces that fraction of the elements by strong decays in [−5, −4) (channels that
// forget, then remember: the case where decay factors are ratios of very different prefix sums).
std::vector<OpResult> kdaRecurrentCase(Context& ctx, const char* label, std::vector<int64_t> Ts, int64_t H, int64_t Dk,
                                       float gLow = -3.0f, float gHigh = -0.001f, float strongFrac = 0.0f) {
    const int64_t C = H * Dk;
    const std::vector<float> state0 = ctx.randn(size_t(H * Dk * Dk), 0.3f);
    std::vector<std::vector<float>> qkv, g, beta;
    for (int64_t T : Ts) {
        qkv.push_back(ctx.randn(size_t(T * 3 * C)));
        g.push_back(ctx.uniform(size_t(T * C), gLow, gHigh));
        if (strongFrac > 0.0f) {
            const std::vector<float> pick = ctx.uniform(size_t(T * C), 0.0f, 1.0f);
            const std::vector<float> strong = ctx.uniform(size_t(T * C), -5.0f, -4.0f);
            for (size_t e = 0; e < pick.size(); ++e)
                if (pick[e] < strongFrac) g.back()[e] = strong[e];
        }
        beta.push_back(ctx.randn(size_t(T * H)));
    }
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        const Buffer st = Context::put(b, state0);
        Outs o;
        for (size_t i = 0; i < Ts.size(); ++i) {
            const Buffer out = Context::poisoned(b, size_t(Ts[i] * C) * 4);
            b.kdaRecurrent(Context::put(b, qkv[i]), Ts[i], H, Dk, Context::put(b, g[i]), Context::put(b, beta[i]), st, out);
            o.push_back(Context::getF32(b, out, size_t(Ts[i] * C)));
        }
        o.push_back(Context::getF32(b, st, size_t(H * Dk * Dk)));
        return o;
    });
    std::string ts;
    for (int64_t T : Ts) {
        if (!ts.empty()) ts += '+';
        ts += str(T);
    }
    std::string sh = std::string(label) + " T=" + ts + " H=" + str(H) + " Dk=" + str(Dk) + " g>=" + fstr(gLow);
    if (gHigh != -0.001f) sh += " g<" + fstr(gHigh);
    if (strongFrac > 0.0f) sh += " +" + str(int64_t(std::lround(strongFrac * 100))) + "% in [-5,-4)";
    std::vector<OpResult> r;
    for (size_t i = 0; i < Ts.size(); ++i)
        r.push_back(Context::compare(kFamily, "kdaRecurrent.out", sh + (Ts.size() > 1 ? " call " + str(int64_t(i)) : ""),
                                     ref[i], dut[i], 5e-6, 5e-5));
    r.push_back(Context::compare(kFamily, "kdaRecurrent.state", sh, ref.back(), dut.back(), 5e-6, 5e-5));
    return r;
}

// One step of several sequences through the batched KDA state ops (causalConvSiluBatch, then kdaRecurrentBatch on
// its output), each sequence with its own conv state and recurrent state and `rows[s]` rows (0 allowed). The
// reference backend's batched ops are the per-sequence loop; on the device under test they are its own (on CUDA
// one launch of each kernel when every sequence is below the chunked threshold, else the loop). Outputs and every
// sequence's final states are compared with the per-op bounds above (conv states bit for bit).
std::vector<OpResult> kdaStepCase(Context& ctx, const char* label, std::vector<int64_t> rows, int64_t H, int64_t Dk, int K) {
    const int64_t C = H * Dk, n = int64_t(rows.size());
    int64_t T = 0;
    for (int64_t r : rows) T += r;
    const std::vector<float> w = ctx.randn(size_t(3 * C * K), 0.5f);
    std::vector<std::vector<float>> conv0, state0;
    for (int64_t s = 0; s < n; ++s) {
        conv0.push_back(ctx.randn(size_t((K - 1) * 3 * C)));
        state0.push_back(ctx.randn(size_t(H * Dk * Dk), 0.3f));
    }
    const std::vector<float> x = ctx.randn(size_t(T * 3 * C)), g = ctx.uniform(size_t(T * C), -3.0f, -0.001f),
                             beta = ctx.randn(size_t(T * H));
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        std::vector<Buffer> convs, states;
        for (int64_t s = 0; s < n; ++s) {
            convs.push_back(Context::put(b, conv0[size_t(s)]));
            states.push_back(Context::put(b, state0[size_t(s)]));
        }
        const Buffer convOut = Context::poisoned(b, size_t(T * 3 * C) * 4), out = Context::poisoned(b, size_t(T * C) * 4);
        b.causalConvSiluBatch(Context::put(b, x), rows.data(), n, 3 * C, K, Context::put(b, w), convs.data(), convOut);
        b.kdaRecurrentBatch(convOut, rows.data(), n, H, Dk, Context::put(b, g), Context::put(b, beta), states.data(), out);
        Outs o{Context::getF32(b, convOut, size_t(T * 3 * C)), Context::getF32(b, out, size_t(T * C))};
        for (int64_t s = 0; s < n; ++s) {
            o.push_back(Context::getF32(b, convs[size_t(s)], size_t((K - 1) * 3 * C)));
            o.push_back(Context::getF32(b, states[size_t(s)], size_t(H * Dk * Dk)));
        }
        return o;
    });
    std::string rs;
    for (int64_t r : rows) {
        if (!rs.empty()) rs += ',';
        rs += str(r);
    }
    const std::string sh = std::string(label) + " rows=" + rs + " H=" + str(H) + " Dk=" + str(Dk) + " K=" + str(int64_t(K));
    std::vector<OpResult> r = {
        Context::compare(kFamily, "causalConvSiluBatch.out", sh, ref[0], dut[0], 1e-6, 1e-5),
        Context::compare(kFamily, "kdaRecurrentBatch.out", sh, ref[1], dut[1], 5e-6, 5e-5)};
    std::vector<int32_t> convRef, convDut;
    std::vector<float> stRef, stDut;
    for (int64_t s = 0; s < n; ++s) {
        const auto a = bitsOf(ref[size_t(2 + 2 * s)]), d = bitsOf(dut[size_t(2 + 2 * s)]);
        convRef.insert(convRef.end(), a.begin(), a.end());
        convDut.insert(convDut.end(), d.begin(), d.end());
        stRef.insert(stRef.end(), ref[size_t(3 + 2 * s)].begin(), ref[size_t(3 + 2 * s)].end());
        stDut.insert(stDut.end(), dut[size_t(3 + 2 * s)].begin(), dut[size_t(3 + 2 * s)].end());
    }
    if (K > 1) r.push_back(Context::compareExact(kFamily, "causalConvSiluBatch.state", sh + " (every sequence)", convRef, convDut));
    r.push_back(Context::compare(kFamily, "kdaRecurrentBatch.state", sh + " (every sequence)", stRef, stDut, 5e-6, 5e-5));
    return r;
}

std::vector<OpResult> gatedRmsnormCase(Context& ctx, const char* label, int64_t T, int64_t H, int64_t Dv, float eps) {
    const std::vector<float> o = ctx.randn(size_t(T * H * Dv)), gate = ctx.randn(size_t(T * H * Dv), 2.0f);
    const std::vector<float> w = ctx.uniform(size_t(Dv), 0.5f, 1.5f);
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        const Buffer ob = Context::put(b, o);
        b.gatedRmsnorm(ob, T, H, Dv, Context::put(b, w), eps, Context::put(b, gate));
        return Outs{Context::getF32(b, ob, size_t(T * H * Dv))};
    });
    const std::string sh = std::string(label) + " T=" + str(T) + " H=" + str(H) + " Dv=" + str(Dv);
    return {Context::compare(kFamily, "gatedRmsnorm", sh, ref[0], dut[0], 1e-6, 1e-5)};
}

}  // namespace

void addMhcKdaCases(std::vector<Case>& out) {
    auto add = [&](std::string name, std::function<std::vector<OpResult>(Context&)> run) {
        out.push_back(Case{kFamily, std::move(name), std::move(run)});
    };

    // mhcPre: T < 32 splits D over blocks (decode), T ≥ 32 one block per token (the two-launch form; the
    // one-launch form mixes each token in its last chunk block); D tails of the 512-element chunks, of the
    // 1024-column slices and of the float4 columns; n = 1..6, 40; every fn dtype.
    const MhcPreShape pre[] = {
        {"real", 1, 4096, 4, 20, DType::BF16},     {"real", 3, 4096, 4, 20, DType::BF16},
        {"real", 32, 4096, 4, 20, DType::BF16},    {"tiny_a", 7, 128, 4, 20, DType::BF16},
        {"embedded", 5, 256, 4, 20, DType::F32},   {"odd", 3, 100, 3, 5, DType::F16},
        {"odd", 33, 37, 2, 3, DType::F32},         {"n=1", 2, 33, 1, 1, DType::F32},
        {"odd", 2, 1500, 4, 20, DType::BF16},
        // Past the fast forms: n = 6 (2n + n² = 48 mixing rows, the generic column loop), n = 40 (Sinkhorn
        // with block barriers: more than one warp of rows).
        {"n=6", 2, 64, 6, 4, DType::F32},          {"n=40", 1, 16, 40, 3, DType::F32},
        // n = 5: the largest n whose Sinkhorn runs in one warp's registers (n² ≤ 32).
        {"n=5", 3, 64, 5, 6, DType::F32},
    };
    for (const MhcPreShape& s : pre)
        add("mhcPre " + std::string(s.label) + " T=" + str(s.T) + " D=" + str(s.D), [s](Context& c) { return mhcPreCase(c, s); });

    add("mhcPost real T=1", [](Context& c) { return mhcPostCase(c, "real", 1, 4096, 4); });
    add("mhcPost real T=6", [](Context& c) { return mhcPostCase(c, "real", 6, 4096, 4); });
    add("mhcPost tiny_a T=7", [](Context& c) { return mhcPostCase(c, "tiny_a", 7, 128, 4); });
    add("mhcPost odd n=3", [](Context& c) { return mhcPostCase(c, "odd", 3, 100, 3); });
    add("mhcPost odd n=6", [](Context& c) { return mhcPostCase(c, "odd", 2, 50, 6); });
    add("mhcPost odd n=11", [](Context& c) { return mhcPostCase(c, "odd", 2, 19, 11); });
    add("mhcPost n=1", [](Context& c) { return mhcPostCase(c, "n=1", 2, 33, 1); });

    add("mhcHead real T=1", [](Context& c) { return mhcHeadCase(c, "real", 1, 4096, 4); });
    add("mhcHead real T=5", [](Context& c) { return mhcHeadCase(c, "real", 5, 4096, 4); });
    add("mhcHead tiny_a T=7", [](Context& c) { return mhcHeadCase(c, "tiny_a", 7, 128, 4); });
    add("mhcHead odd n=3", [](Context& c) { return mhcHeadCase(c, "odd", 3, 101, 3); });

    // causalConvSilu over q|k|v: C = 3·H·Dk. T < K−1 and T = K−1 shift part of the old state.
    add("causalConvSilu real T=1", [](Context& c) { return convCase(c, "real", {1}, 3 * 64 * 128, 4); });
    add("causalConvSilu real T=20", [](Context& c) { return convCase(c, "real", {20}, 3 * 64 * 128, 4); });
    add("causalConvSilu real prefill+decode", [](Context& c) { return convCase(c, "real", {5, 1, 1}, 3 * 64 * 128, 4); });
    add("causalConvSilu tiny_a T=9", [](Context& c) { return convCase(c, "tiny_a", {9}, 3 * 4 * 32, 4); });
    add("causalConvSilu embedded T=5", [](Context& c) { return convCase(c, "embedded", {5}, 3 * 4 * 64, 4); });
    add("causalConvSilu T<K-1", [](Context& c) { return convCase(c, "short", {2, 1, 2}, 3 * 4 * 32, 4); });
    add("causalConvSilu T=K-1", [](Context& c) { return convCase(c, "short", {3, 3}, 101, 4); });
    add("causalConvSilu odd K=3", [](Context& c) { return convCase(c, "odd", {4, 1}, 101, 3); });
    add("causalConvSilu odd K=2", [](Context& c) { return convCase(c, "odd", {1, 6}, 77, 2); });
    add("causalConvSilu odd K=5", [](Context& c) { return convCase(c, "odd", {2, 7}, 50, 5); });
    add("causalConvSilu in-place", [](Context& c) { return convCase(c, "tiny_a", {6, 1}, 3 * 4 * 32, 4, true); });

    add("kdaGate real T=1", [](Context& c) { return kdaGateCase(c, "real", 1, 64, 128, -5.0f); });
    add("kdaGate real T=7", [](Context& c) { return kdaGateCase(c, "real", 7, 64, 128, -5.0f); });
    add("kdaGate real softplus", [](Context& c) { return kdaGateCase(c, "real", 3, 64, 128, NAN); });
    add("kdaGate tiny_a T=9", [](Context& c) { return kdaGateCase(c, "tiny_a", 9, 4, 32, -5.0f); });
    add("kdaGate odd softplus", [](Context& c) { return kdaGateCase(c, "odd", 3, 3, 20, NAN); });
    add("kdaGate odd lower=-2", [](Context& c) { return kdaGateCase(c, "odd", 2, 5, 37, -2.0f); });

    // kdaRecurrent: decode (T = 1, 2), a prefill, prefill then decode on one state, long slow-decay runs
    // (error accumulation), and head dims off the 32-column / 8-row blocking (48, 100), the 16-row
    // path (200) and the large fallback (300).
    add("kdaRecurrent real T=1", [](Context& c) { return kdaRecurrentCase(c, "real", {1}, 64, 128); });
    add("kdaRecurrent real T=2", [](Context& c) { return kdaRecurrentCase(c, "real", {2}, 64, 128); });
    add("kdaRecurrent real T=8", [](Context& c) { return kdaRecurrentCase(c, "real", {8}, 64, 128); });
    add("kdaRecurrent real prefill+decode", [](Context& c) { return kdaRecurrentCase(c, "real", {6, 1, 1}, 64, 128, -0.5f); });
    add("kdaRecurrent tiny_a T=9", [](Context& c) { return kdaRecurrentCase(c, "tiny_a", {9}, 4, 32); });
    add("kdaRecurrent tiny_a T=1", [](Context& c) { return kdaRecurrentCase(c, "tiny_a", {1}, 4, 32); });
    add("kdaRecurrent embedded T=5", [](Context& c) { return kdaRecurrentCase(c, "embedded", {5}, 4, 64); });
    add("kdaRecurrent long slow decay", [](Context& c) { return kdaRecurrentCase(c, "long", {300, 1}, 4, 32, -0.05f); });
    add("kdaRecurrent long embedded", [](Context& c) { return kdaRecurrentCase(c, "long", {200}, 4, 64, -0.2f); });
    add("kdaRecurrent odd Dk=48", [](Context& c) { return kdaRecurrentCase(c, "odd", {7}, 3, 48); });
    add("kdaRecurrent odd Dk=100", [](Context& c) { return kdaRecurrentCase(c, "odd", {3, 1}, 2, 100, -1.0f); });
    add("kdaRecurrent odd Dk=200", [](Context& c) { return kdaRecurrentCase(c, "odd", {4}, 2, 200); });
    add("kdaRecurrent odd Dk=300", [](Context& c) { return kdaRecurrentCase(c, "odd", {2}, 1, 300); });
    add("kdaRecurrent odd Dk=5", [](Context& c) { return kdaRecurrentCase(c, "odd", {5}, 3, 5); });

    // The chunked prefill of the CUDA backend (T ≥ 16 with Dk = 32, 64, 128; 32-token chunks): T on and
    // off the chunk size, the threshold's edges (15 recurrent, 16 chunked), calls alternating between
    // the two paths on one state, long runs with weak decay (error accumulation), decays near the −5
    // lower bound, far below it (softplus branch), strong/weak mixtures; 32 heads (one block per SM: the
    // prefetching variant on an H200) and 64 heads (more blocks than SMs: the single-buffered variant);
    // Dk = 48 has no chunked variant (a long call on the recurrent kernel).
    add("kdaRecurrent chunk T=64", [](Context& c) { return kdaRecurrentCase(c, "chunk", {64}, 4, 64); });
    add("kdaRecurrent chunk T=100", [](Context& c) { return kdaRecurrentCase(c, "chunk", {100}, 4, 64); });
    add("kdaRecurrent chunk mixed calls", [](Context& c) {
        return kdaRecurrentCase(c, "chunk", {100, 1, 37, 1, 64, 15, 16, 2}, 4, 64, -1.0f);
    });
    add("kdaRecurrent chunk long weak decay", [](Context& c) { return kdaRecurrentCase(c, "chunk", {3000}, 4, 64, -0.05f); });
    add("kdaRecurrent chunk strong decay", [](Context& c) {
        return kdaRecurrentCase(c, "chunk", {1000}, 4, 64, -5.0f, -4.0f);
    });
    add("kdaRecurrent chunk unbounded decay", [](Context& c) { return kdaRecurrentCase(c, "chunk", {500}, 4, 64, -30.0f); });
    add("kdaRecurrent chunk forget-remember", [](Context& c) {
        return kdaRecurrentCase(c, "chunk", {1000, 1}, 4, 64, -0.01f, -0.001f, 0.3f);
    });
    add("kdaRecurrent chunk tiny_a", [](Context& c) { return kdaRecurrentCase(c, "chunk tiny_a", {200, 33}, 4, 32); });
    add("kdaRecurrent chunk real rank", [](Context& c) {
        return kdaRecurrentCase(c, "chunk rank", {1000, 1}, 32, 128, -5.0f);
    });
    add("kdaRecurrent chunk real rank forget-remember", [](Context& c) {
        return kdaRecurrentCase(c, "chunk rank", {300, 17}, 32, 128, -0.05f, -0.001f, 0.3f);
    });
    add("kdaRecurrent chunk real", [](Context& c) { return kdaRecurrentCase(c, "chunk real", {100, 1}, 64, 128, -0.5f); });
    add("kdaRecurrent long odd Dk=48", [](Context& c) { return kdaRecurrentCase(c, "long odd", {100}, 3, 48, -0.2f); });

    // A step of several sequences through the batched conv and recurrence: the real widths at decode (4 sequences
    // of 1 row), a speculative verify mix with a sequence without rows, a step with a prefill past the chunked
    // threshold (the per-sequence calls on CUDA), tiny_a and odd widths (Dk = 48, K = 2).
    add("kda step real decode", [](Context& c) { return kdaStepCase(c, "real", {1, 1, 1, 1}, 64, 128, 4); });
    add("kda step real verify", [](Context& c) { return kdaStepCase(c, "real", {8, 1, 0, 3}, 64, 128, 4); });
    add("kda step mixed prefill", [](Context& c) { return kdaStepCase(c, "mixed", {20, 1, 2}, 4, 64, 4); });
    add("kda step tiny_a", [](Context& c) { return kdaStepCase(c, "tiny_a", {1, 2, 1}, 4, 32, 4); });
    add("kda step odd", [](Context& c) { return kdaStepCase(c, "odd", {2, 1, 5}, 3, 48, 2); });

    add("gatedRmsnorm real T=1", [](Context& c) { return gatedRmsnormCase(c, "real", 1, 64, 128, 1e-5f); });
    add("gatedRmsnorm real T=5", [](Context& c) { return gatedRmsnormCase(c, "real", 5, 64, 128, 1e-5f); });
    add("gatedRmsnorm tiny_a T=3", [](Context& c) { return gatedRmsnormCase(c, "tiny_a", 3, 4, 32, 1e-6f); });
    add("gatedRmsnorm embedded T=2", [](Context& c) { return gatedRmsnormCase(c, "embedded", 2, 4, 64, 1e-6f); });
    add("gatedRmsnorm odd Dv=100", [](Context& c) { return gatedRmsnormCase(c, "odd", 3, 3, 100, 1e-5f); });
    add("gatedRmsnorm odd Dv=7", [](Context& c) { return gatedRmsnormCase(c, "odd", 2, 5, 7, 1e-5f); });
}

}  // namespace ts::selftest
