// Op self-test cases of the MoE family (kernels/cpu/cpu_moe.cpp is the reference, kernels/cuda/cuda_moe.cu
// the CUDA side): moeRoute, gatherRows, scatterAddRows. Every op runs on both backends with the same
// inputs into poisoned outputs.
//
// Widths: GLM-5.3-Flash (hidden 4096, 288 routed experts, top-8, one group, scaling 2.5), the golden
// tiny_a model (hidden 128, 8 experts, top-2), the embedded model (hidden 256, 16 experts, top-4), a
// DeepSeek-style group-limited router (8 groups, 3 kept), and odd sizes (hidden 77: the scalar weight
// path; T = 9, 37: more than one 8-token block of the router kernel).
//
// Tolerances:
// - moeRoute indices are compared exactly, order included (the weights follow it). The CUDA router
//   computes the logits in the CPU's summation order and the sigmoid's exp in double rounded once
//   (equal to glibc's expf but for ~0.03% of arguments, by 1 ulp), so the choice scores are the CPU's
//   and exact ties (the "ties" cases duplicate experts and whole groups) must break the same way: lower
//   expert id first, lower group first. A flip would need two experts within 1 ulp at the boundary.
// - moeRoute weights: the same operations in the same order; at most a 1-ulp sigmoid difference:
//   rtol 1e-6.
// - gatherRows is a copy: bit for bit. scatterAddRows adds in the CPU's order (i = 0..n−1 per target) with
//   the same multiply/add rounding: at most an ulp per add where FMA contraction differs: rtol 1e-6.
// - moeExpertsFusedDevice with dense experts (kernels/cuda/cuda_moe_dense.cu) against the CPU's per-expert
//   loop (moeExpertLoop): weights N(0, 1/fan_in), so every dot product is O(1); the device sums each one in
//   another order than the CPU's linear and fuses the weighted add, so the experts' contribution y − y0 is
//   compared with linear's bounds (atol = rtol = 1e-4), and y itself as well. A CUDA backend must take the
//   path for decode-sized steps (T ≤ 16) and decline larger ones (the model then runs its loop).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "exl3_tune.h"
#include "selftest/op_selftest.h"

namespace ts::selftest {

namespace {

const char* const kFamily = "moe";

struct RouteSpec {
    const char* label;
    int64_t T, E, D, topk, nGroup, topkGroup;
    bool norm;
    float scaling;
    DType dtype;
    bool ties;  // experts [E/2, E) are exact copies of [0, E/2) (weight rows and bias)
};

std::vector<OpResult> routeCase(Context& ctx, const RouteSpec& s) {
    // Logits ~ N(0, 1.5²): sigmoid scores spread over (0, 1); the bias shifts the choice only.
    WeightView w = ctx.weight(s.E, s.D, s.dtype, 1.5f / std::sqrt(float(s.D)));
    std::vector<float> bias = ctx.uniform(size_t(s.E), -0.05f, 0.05f);
    if (s.ties) {
        const size_t rowBytes = size_t(s.D) * dtypeSize(s.dtype), half = size_t(s.E / 2);
        std::vector<uint8_t> bytes(static_cast<const uint8_t*>(w.data),
                                   static_cast<const uint8_t*>(w.data) + size_t(s.E) * rowBytes);
        std::memcpy(bytes.data() + half * rowBytes, bytes.data(), half * rowBytes);
        w.data = ctx.keep(std::move(bytes));
        for (size_t e = 0; e < half; ++e) bias[half + e] = bias[e];
    }
    const std::vector<float> x = ctx.randn(size_t(s.T * s.D));
    const size_t n = size_t(s.T * s.topk);
    std::vector<int32_t> idxR(n, -7), idxD(n, -7);
    std::vector<float> wR(n, NAN), wD(n, NAN);
    {
        Backend& b = ctx.ref();
        b.moeRoute(Context::put(b, x), s.T, w, Context::put(b, bias), s.E, s.topk, s.nGroup, s.topkGroup, s.norm,
                   s.scaling, idxR.data(), wR.data());
    }
    {
        Backend& b = ctx.dut();
        b.moeRoute(Context::put(b, x), s.T, w, Context::put(b, bias), s.E, s.topk, s.nGroup, s.topkGroup, s.norm,
                   s.scaling, idxD.data(), wD.data());
    }
    const std::string sh = std::string(s.label) + " T=" + str(s.T) + " E=" + str(s.E) + " D=" + str(s.D) +
                           " topk=" + str(s.topk) + (s.nGroup > 1 ? " groups=" + str(s.topkGroup) + "/" + str(s.nGroup) : "") +
                           (s.norm ? " norm" : "") + " x" + fstr(s.scaling) + " " + std::string(dtypeName(s.dtype)) +
                           (s.ties ? " ties" : "");
    std::vector<OpResult> rs{Context::compareExact(kFamily, "moeRoute.idx", sh, idxR, idxD),
                             Context::compare(kFamily, "moeRoute.weight", sh, wR, wD, 1e-7, 1e-6)};
    // The device-output variant (a backend that has it): the same bits as its own host-output routing.
    {
        Backend& b = ctx.dut();
        const Buffer ib = Context::poisoned(b, n * 4), wb = Context::poisoned(b, n * 4);
        if (b.moeRouteDevice(Context::put(b, x), s.T, w, Context::put(b, bias), s.E, s.topk, s.nGroup, s.topkGroup,
                             s.norm, s.scaling, ib, wb)) {
            std::vector<int32_t> idxV(n);
            b.download(ib, idxV.data(), n * 4);
            const std::vector<float> wV = Context::getF32(b, wb, n);
            rs.push_back(Context::compareExact(kFamily, "moeRouteDevice.idx", sh, idxD, idxV));
            rs.push_back(Context::compareExact(kFamily, "moeRouteDevice.weight", sh, bitsOf(wD), bitsOf(wV)));
        }
    }
    return rs;
}

std::vector<OpResult> gatherCase(Context& ctx, const char* label, int64_t T, int64_t D, int64_t n) {
    const std::vector<float> x = ctx.randn(size_t(T * D));
    std::vector<int32_t> sel = ctx.randint(size_t(n), 0, int32_t(T - 1));
    sel[0] = int32_t(T - 1);
    if (n > 2) sel[n - 1] = sel[0];  // a repeat
    std::vector<float> r[2];
    Backend* sides[2] = {&ctx.ref(), &ctx.dut()};
    for (int k = 0; k < 2; ++k) {
        Backend& b = *sides[k];
        const Buffer rows = Context::poisoned(b, size_t(n * D) * 4);
        b.gatherRows(Context::put(b, x), D, sel.data(), n, rows);
        r[k] = Context::getF32(b, rows, size_t(n * D));
    }
    const std::string sh = std::string(label) + " T=" + str(T) + " D=" + str(D) + " n=" + str(n);
    return {Context::compareExact(kFamily, "gatherRows", sh, bitsOf(r[0]), bitsOf(r[1]))};
}

// n source rows added into y [T, D]; targets drawn from [0, T) so they repeat when n > T.
std::vector<OpResult> scatterCase(Context& ctx, const char* label, int64_t T, int64_t D, int64_t n) {
    const std::vector<float> y0 = ctx.randn(size_t(T * D)), rows = ctx.randn(size_t(n * D));
    const std::vector<float> scale = ctx.uniform(size_t(n), 0.05f, 2.5f);
    std::vector<int32_t> sel = ctx.randint(size_t(n), 0, int32_t(T - 1));
    sel[0] = int32_t(T - 1);
    if (n > 2) sel[n - 1] = sel[0];  // at least one repeated target
    std::vector<float> r[2];
    Backend* sides[2] = {&ctx.ref(), &ctx.dut()};
    for (int k = 0; k < 2; ++k) {
        Backend& b = *sides[k];
        const Buffer y = Context::put(b, y0);
        b.scatterAddRows(Context::put(b, rows), D, sel.data(), scale.data(), n, y);
        r[k] = Context::getF32(b, y, size_t(T * D));
    }
    const std::string sh = std::string(label) + " T=" + str(T) + " D=" + str(D) + " n=" + str(n);
    return {Context::compare(kFamily, "scatterAddRows", sh, r[0], r[1], 1e-6, 1e-6)};
}

struct DenseMoeSpec {
    const char* label;
    int64_t T, D, I, E, topk;
    DType dtype;
    float limit;
    bool oddIds;  // each token names its first expert twice and the last id is out of range (both skipped / summed as the loop does)
};

// The routed experts of a dense-expert model with the routing in device buffers (moeExpertsFusedDevice).
std::vector<OpResult> denseMoeCase(Context& ctx, const DenseMoeSpec& s) {
    std::vector<WeightView> gate, up, down;
    for (int64_t e = 0; e < s.E; ++e) {
        gate.push_back(ctx.weight(s.I, s.D, s.dtype, 1.0f / std::sqrt(float(s.D))));
        up.push_back(ctx.weight(s.I, s.D, s.dtype, 1.0f / std::sqrt(float(s.D))));
        down.push_back(ctx.weight(s.D, s.I, s.dtype, 1.0f / std::sqrt(float(s.I))));
    }
    // topk distinct experts per token, drawn from all E.
    std::vector<int32_t> idx;
    std::vector<float> wt;
    moeRandomRouting(ctx, s.T, s.topk, s.E, idx, wt);
    if (s.oddIds) {
        for (int64_t t = 0; t < s.T; ++t) idx[size_t(t * s.topk + 1)] = idx[size_t(t * s.topk)];
        idx[size_t(s.T * s.topk - 1)] = int32_t(s.E + 3);
    }
    const std::vector<float> x = ctx.randn(size_t(s.T * s.D)), y0 = ctx.randn(size_t(s.T * s.D));
    const size_t n = size_t(s.T * s.D);

    std::vector<float> ref, dut;
    {
        Backend& b = ctx.ref();
        const Buffer yb = Context::put(b, y0);
        moeExpertLoop(b, Context::put(b, x), s.T, s.D, s.I, idx, wt, s.topk, gate, up, down, s.E, s.limit, yb);
        ref = Context::getF32(b, yb, n);
    }
    bool taken = false;
    {
        Backend& b = ctx.dut();
        const Buffer yb = Context::put(b, y0);
        taken = b.moeExpertsFusedDevice(Context::put(b, x), s.T, s.D, s.I, Context::put(b, idx), Context::put(b, wt),
                                        s.topk, gate.data(), up.data(), down.data(), s.E, s.limit, yb);
        if (taken) dut = Context::getF32(b, yb, n);
    }
    const std::string sh = std::string(s.label) + " T=" + str(s.T) + " D=" + str(s.D) + " I=" + str(s.I) + " E=" +
                           str(s.E) + " top" + str(s.topk) + " " + std::string(dtypeName(s.dtype)) +
                           (s.limit > 0 ? " limit" : "") + (s.oddIds ? " odd ids" : "");
    const bool cuda = ctx.dut().name() == "cuda";
    const bool expect = cuda && s.T <= 16 && moeDeviceRouting();
    const char* op = "moeExpertsFusedDevice dense";
    if (!taken) {
        if (expect) return {Context::verdict(kFamily, op, sh, false, "declined a decode-sized step of dense experts")};
        return {Context::verdict(kFamily, op, sh, true, cuda ? "declined (as it should: the model's loop runs)"
                                                              : "no device-routed path on this backend")};
    }
    std::vector<float> dRef(n), dDut(n);
    for (size_t i = 0; i < n; ++i) {
        dRef[i] = ref[i] - y0[i];
        dDut[i] = dut[i] - y0[i];
    }
    OpResult r = Context::compare(kFamily, op, sh, ref, dut, 1e-4, 1e-4);
    OpResult rd = Context::compare(kFamily, op, sh + " (y - y0)", dRef, dDut, 1e-4, 1e-4);
    if (!expect) {
        r.pass = false;
        r.note = "taken where it should decline";
    }
    return {r, rd};
}

}  // namespace

void addMoeCases(std::vector<Case>& out) {
    auto add = [&](std::string name, std::function<std::vector<OpResult>(Context&)> f) {
        out.push_back(Case{kFamily, std::move(name), std::move(f)});
    };
    using D = DType;
    auto route = [&](std::string name, RouteSpec s) {
        add(std::move(name), [s](Context& c) { return routeCase(c, s); });
    };

    // moeRoute                  label        T   E    D     topk grp kept norm  scale  dtype    ties
    route("moeRoute glm T=1", {"glm", 1, 288, 4096, 8, 1, 1, true, 2.5f, D::BF16, false});
    route("moeRoute glm T=4", {"glm", 4, 288, 4096, 8, 1, 1, true, 2.5f, D::BF16, false});
    route("moeRoute glm prefill", {"glm", 37, 288, 4096, 8, 1, 1, true, 2.5f, D::BF16, false});
    route("moeRoute glm f32", {"glm", 3, 288, 4096, 8, 1, 1, true, 2.5f, D::F32, false});
    route("moeRoute glm ties", {"glm", 5, 288, 4096, 8, 1, 1, true, 2.5f, D::BF16, true});
    route("moeRoute tiny_a", {"tiny_a", 6, 8, 128, 2, 1, 1, true, 2.5f, D::BF16, false});
    route("moeRoute embedded", {"embedded", 3, 16, 256, 4, 1, 1, true, 2.5f, D::BF16, false});
    route("moeRoute grouped", {"grouped", 9, 64, 512, 6, 8, 3, false, 1.0f, D::BF16, false});
    route("moeRoute grouped ties", {"grouped", 4, 64, 512, 6, 8, 3, true, 1.5f, D::BF16, true});
    route("moeRoute one-expert groups", {"grouped", 3, 8, 128, 2, 8, 4, true, 1.0f, D::F32, false});
    route("moeRoute odd", {"odd", 10, 37, 77, 5, 1, 1, true, 2.5f, D::F16, false});
    // More 32-expert chunks than the rank select's warps and more candidates than its threads (19 × 32).
    route("moeRoute wide ties", {"wide", 3, 600, 256, 32, 1, 1, true, 1.0f, D::BF16, true});

    // gatherRows / scatterAddRows: decode (8 experts' tokens), prefill with repeats, tiny, odd widths
    add("gatherRows glm", [](Context& c) { return gatherCase(c, "glm", 4, 4096, 3); });
    add("gatherRows glm prefill", [](Context& c) { return gatherCase(c, "glm", 37, 4096, 50); });
    add("gatherRows tiny_a", [](Context& c) { return gatherCase(c, "tiny_a", 6, 128, 4); });
    add("gatherRows odd", [](Context& c) { return gatherCase(c, "odd", 9, 1077, 13); });
    add("scatterAddRows glm T=1", [](Context& c) { return scatterCase(c, "glm", 1, 4096, 1); });
    add("scatterAddRows glm prefill", [](Context& c) { return scatterCase(c, "glm", 37, 4096, 50); });
    add("scatterAddRows repeats", [](Context& c) { return scatterCase(c, "repeats", 3, 256, 24); });
    add("scatterAddRows tiny_a", [](Context& c) { return scatterCase(c, "tiny_a", 6, 128, 4); });
    add("scatterAddRows odd", [](Context& c) { return scatterCase(c, "odd", 9, 1077, 13); });

    // moeExpertsFusedDevice, dense experts: the embedded model (BF16, top-4 of 16) and tiny_a (top-2 of 8,
    // clamped swiglu) at decode sizes, GLM-like widths (16-byte loads), F16 / F32 weights, odd widths (the
    // one-element path) with a repeated and an out-of-range id, and the largest step taken (16) and the
    // smallest declined (17).
    auto dense = [&](std::string name, DenseMoeSpec s) {
        add(std::move(name), [s](Context& c) { return denseMoeCase(c, s); });
    };
    //                                     label        T   D     I     E   topk dtype    limit  odd
    dense("moe dense embedded T=1", {"embedded", 1, 256, 96, 16, 4, D::BF16, 0.0f, false});
    dense("moe dense embedded T=4", {"embedded", 4, 256, 96, 16, 4, D::BF16, 0.0f, false});
    dense("moe dense tiny_a T=3", {"tiny_a", 3, 128, 32, 8, 2, D::BF16, 3.0f, false});
    dense("moe dense wide T=2", {"wide", 2, 2048, 512, 12, 8, D::BF16, 10.0f, false});
    dense("moe dense f16 T=16", {"f16", 16, 256, 96, 16, 4, D::F16, 0.0f, true});
    dense("moe dense f32 T=5", {"f32", 5, 128, 64, 8, 3, D::F32, 0.5f, false});
    dense("moe dense odd T=7", {"odd", 7, 77, 50, 9, 3, D::BF16, 0.0f, true});
    dense("moe dense prefill T=17", {"embedded", 17, 256, 96, 16, 4, D::BF16, 0.0f, false});
}

}  // namespace ts::selftest
