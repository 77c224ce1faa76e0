// Op self-test cases of the dense math family (kernels/cpu/cpu_math.cpp is the reference,
// kernels/cuda/cuda_math.cu the CUDA side): embedding, linear, rmsnorm, layernorm, swiglu, add, scale,
// zero, concatColumns, repeatRows. Every op runs on both backends with the same inputs into poisoned outputs.
//
// Widths: GLM-5.3-Flash (hidden 4096, dense MLP 12288, q_lora 1536, q_b 64 heads × 256 = 16384,
// kv_lora 512, indexer head dim 128, KDA q|k|v 3 × 64 × 128), the golden tiny_a model (hidden 128,
// MLP 256, expert 32) and the embedded model (hidden 256, MLP 512, expert 96), plus odd sizes that hit
// every tail and fallback path of the CUDA kernels: T = 1..8 (the GEMV, one kernel per T) and T > 8
// (the tiled GEMM; F32 weights go to cuBLAS), K not a multiple of 8 (scalar weight loads), x at an
// address that is not 16-byte aligned (scalar x loads), rows not a multiple of the 128-row tile.
//
// Tolerances (|dut − ref| ≤ atol + rtol·|ref|):
// - linear: weights N(0, 1/K), x N(0, 1), so |y| ~ 1. The outputs differ only by fp32 summation order:
//   a sequential fp32 sum of K products has an error of ≈ u·√(K/2)·σ(y)/√3 ≈ 1.6e-6 at K = 4096 and
//   2.8e-6 at K = 12288 (u = 6e-8); the maximum over ~50k outputs is ≈ 5σ. atol = rtol = 1e-4 leaves
//   ≥ 7× margin and still fails a kernel that rounds x to bf16 (≈ 2e-3 error at |y| ~ 1). On the CUDA
//   backend the GEMV's other modes at T ≤ 8 (gemvSetOneTokenMode, gemvSetMultiTokenMode) run too: the split-K
//   ones must give each other's bits, the whole-row and tensor-core ones (other summation orders; the latter
//   with x in three exact bf16 pieces) the tolerance above; above 8 tokens (BF16) every GEMM kernel not in force
//   (gemmSetMode: the SIMT GEMM, the tensor-core kernel, cuBLAS on three bf16 pieces) the same tolerance.
// - rmsnorm: the mean square is a sum of positive terms (relative order noise ≤ ~1e-6); rtol 1e-5.
// - layernorm: mean in double on both sides; the variance is a sequential fp32 sum on the CPU (relative
//   noise ≈ u·√D/3 = 1.3e-6 at D = 4096, shared by a whole row), so an output term |(x − m)·inv·w| ≤ 6
//   moves by ≤ ~8e-6; it may cancel against b, so the bound is absolute at that scale: atol 3e-5.
// - swiglu: expf (≤ 2 ulp on the GPU) and one division: a few ulp, rtol 1e-5.
// - embedding, add, scale, zero, concatColumns, repeatRows: the same single IEEE operation or a copy on
//   both sides: compared bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exl3_tune.h"
#include "selftest/op_selftest.h"

namespace ts::selftest {

namespace {

const char* const kFamily = "math";

OpResult exact(const std::string& op, const std::string& shape, const std::vector<float>& ref,
               const std::vector<float>& dut) {
    return Context::compareExact(kFamily, op, shape, bitsOf(ref), bitsOf(dut));
}

std::string dt(DType d) { return std::string(dtypeName(d)); }

// ---------------------------------------------------------------------------------------------------

std::vector<OpResult> embeddingCase(Context& ctx, const char* label, int64_t V, int64_t D, DType dtype,
                                    std::vector<int64_t> Ts) {
    const WeightView table = ctx.weight(V, D, dtype, 1.0f);
    std::vector<OpResult> r;
    for (int64_t T : Ts) {
        std::vector<int32_t> ids = ctx.randint(size_t(T), 0, int32_t(V - 1));
        ids[0] = int32_t(V - 1);  // the last row, then (for T > 2) the first
        if (T > 2) ids[1] = 0;
        auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
            const Buffer out = Context::poisoned(b, size_t(T * D) * 4);
            b.embedding(ids.data(), T, table, out);
            return Outs{Context::getF32(b, out, size_t(T * D))};
        });
        const std::string sh = std::string(label) + " V=" + str(V) + " D=" + str(D) + " T=" + str(T) + " " + dt(dtype);
        r.push_back(exact("embedding", sh, ref[0], dut[0]));
    }
    return r;
}

// One weight [N, K], several token counts. xOffset > 0: x starts xOffset floats into its buffer (a view
// that is not 16-byte aligned).
std::vector<OpResult> linearCase(Context& ctx, const char* label, int64_t N, int64_t K, DType dtype,
                                 std::vector<int64_t> Ts, int64_t xOffset = 0) {
    const WeightView w = ctx.weight(N, K, dtype, 1.0f / std::sqrt(float(K)));
    std::vector<OpResult> r;
    for (int64_t T : Ts) {
        const std::vector<float> x = ctx.randn(size_t(T * K + xOffset));
        auto run = [&](Backend& b) {
            const Buffer xb = Context::put(b, x);
            const Buffer xv = xOffset ? xb.view(size_t(xOffset) * 4, size_t(T * K) * 4) : xb;
            const Buffer y = Context::poisoned(b, size_t(T * N) * 4);
            b.linear(xv, T, w, y);
            return Outs{Context::getF32(b, y, size_t(T * N))};
        };
        auto [ref, dut] = onBoth(ctx, run);
        const std::string sh = std::string(label) + " T=" + str(T) + " " + str(K) + "->" + str(N) + " " + dt(dtype) +
                               (xOffset ? " x+" + str(xOffset) : "");
        r.push_back(Context::compare(kFamily, "linear", sh, ref[0], dut[0], 1e-4, 1e-4));
        // The CUDA backend's other GEMV modes at this T (kernels/exl3_tune.h). Forms of one kernel family must give
        // each other's bits: the split-K kernel's (4 or 2 rows per block, held to fewer registers or not, PDL or
        // not) and the tensor-core GEMV's (with and without programmatic dependent launch); whole rows per warp and
        // the tensor cores sum in other orders and meet the CPU's tolerance. Not where the GEMV takes its scalar
        // fallback (K % 8 ≠ 0, x not 16-byte aligned): every mode runs that same kernel there; and for F16 / F32
        // weights the tensor-core modes run a split-K kernel (skipped).
        const bool vectorGemv = K % 8 == 0 && (xOffset * 4) % 16 == 0;
        if (T <= 8 && vectorGemv && ctx.dut().name() == "cuda") {
            const bool one = T == 1, bf16 = dtype == DType::BF16;
            const int def = one ? gemvOneTokenMode() : gemvMultiTokenMode(), modes = one ? 5 : 6;
            // The kernel a mode runs at this T for these weights (cuda_math.cu, ModeSwitch), as family:variant; a mode
            // that runs the same kernel as the default or as a mode already checked is skipped (it could not fail).
            auto kernelOf = [&](int m) -> std::string {
                const bool held = T == 3 || T == 4;
                if (m == 0) return "rows";
                if (one) return m == 2 ? "split:2rows" : (bf16 && m >= 3) ? (m == 3 ? "tc:pdl" : "tc:plain") : "split:4rows";
                if (bf16 && (m == 3 || m == 4 || (m == 1 && T >= 3))) return m == 4 ? "tc:plain" : "tc:pdl";
                return (held && m != 2) ? "split:held" : "split:unheld";
            };
            auto familyOf = [](const std::string& k) { return k.substr(0, k.find(':')); };
            std::vector<std::string> seen{kernelOf(def)};
            // The first result of each family (the default's, then the first mode checked): the family's other
            // forms are compared with it bit for bit, a new family with the CPU.
            std::map<std::string, std::pair<int, std::vector<float>>> firstOf{{familyOf(seen[0]), {def, dut[0]}}};
            for (int mode = 0; mode < modes; ++mode) {
                const std::string kernel = kernelOf(mode);
                if (std::find(seen.begin(), seen.end(), kernel) != seen.end()) continue;
                seen.push_back(kernel);
                std::vector<float> other;
                {
                    std::optional<TuneOverride<gemvSetOneTokenMode>> flipOne;
                    std::optional<TuneOverride<gemvSetMultiTokenMode>> flipMulti;
                    if (one) flipOne.emplace(mode);
                    else flipMulti.emplace(mode);
                    other = run(ctx.dut())[0];
                }
                const std::string op = "linear T=" + str(T) + " mode " + str(mode);
                const auto first = firstOf.find(familyOf(kernel));
                if (first != firstOf.end()) {
                    r.push_back(Context::compareExact(kFamily, op + " vs " + str(first->second.first), sh,
                                                      bitsOf(first->second.second), bitsOf(other)));
                } else {
                    r.push_back(Context::compare(kFamily, op, sh, ref[0], other, 1e-4, 1e-4));
                    firstOf.emplace(familyOf(kernel), std::make_pair(mode, std::move(other)));
                }
            }
        }
        // Above 8 tokens (BF16, vector contract): each GEMM kernel not in force at this T (gemmSetMode: 0 the SIMT
        // GEMM, 1 the tensor-core kernel, 2 cuBLAS on three bf16 pieces; 3 picks 1 or 2 by T) against the CPU.
        if (T > 8 && vectorGemv && dtype == DType::BF16 && ctx.dut().name() == "cuda") {
            const auto kernelOf = [&](int m) { return m == 3 ? (T < gemmCublasMinTokens() ? 1 : 2) : m; };
            const int inForce = kernelOf(gemmMode());
            for (int mode = 0; mode < 3; ++mode) {
                if (mode == inForce) continue;
                std::vector<float> y;
                {
                    TuneOverride<gemmSetMode> flip(mode);
                    y = run(ctx.dut())[0];
                }
                r.push_back(Context::compare(kFamily, "linear T=" + str(T) + " gemm mode " + str(mode), sh, ref[0], y,
                                             1e-4, 1e-4));
            }
        }
    }
    return r;
}

std::vector<OpResult> rmsnormCase(Context& ctx, const char* label, int64_t rows, int64_t D, bool weighted,
                                  bool inPlace, float eps) {
    const std::vector<float> x = ctx.randn(size_t(rows * D), 1.5f), w = ctx.uniform(size_t(D), 0.5f, 1.5f);
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        const Buffer xb = Context::put(b, x);
        const Buffer y = inPlace ? xb : Context::poisoned(b, size_t(rows * D) * 4);
        b.rmsnorm(xb, rows, D, weighted ? Context::put(b, w) : Buffer(), eps, y);
        return Outs{Context::getF32(b, y, size_t(rows * D))};
    });
    const std::string sh = std::string(label) + " rows=" + str(rows) + " D=" + str(D) + " eps=" + fstr(eps) +
                           (weighted ? "" : " unweighted") + (inPlace ? " in-place" : "");
    return {Context::compare(kFamily, "rmsnorm", sh, ref[0], dut[0], 1e-6, 1e-5)};
}

std::vector<OpResult> layernormCase(Context& ctx, const char* label, int64_t rows, int64_t D, bool inPlace) {
    std::vector<float> x = ctx.randn(size_t(rows * D), 2.0f);
    for (float& v : x) v += 0.75f;  // a non-zero mean, so the centring matters
    const std::vector<float> w = ctx.uniform(size_t(D), 0.5f, 1.5f), bias = ctx.randn(size_t(D), 0.5f);
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        const Buffer xb = Context::put(b, x);
        const Buffer y = inPlace ? xb : Context::poisoned(b, size_t(rows * D) * 4);
        b.layernorm(xb, rows, D, Context::put(b, w), Context::put(b, bias), 1e-6f, y);
        return Outs{Context::getF32(b, y, size_t(rows * D))};
    });
    const std::string sh = std::string(label) + " rows=" + str(rows) + " D=" + str(D) + (inPlace ? " in-place" : "");
    return {Context::compare(kFamily, "layernorm", sh, ref[0], dut[0], 3e-5, 1e-5)};
}

std::vector<OpResult> swigluCase(Context& ctx, const char* label, int64_t T, int64_t I, float limit, bool inPlace) {
    // σ = 4: with limit 3 or 10 a good share of gates and ups are clamped.
    const std::vector<float> g = ctx.randn(size_t(T * I), 4.0f), u = ctx.randn(size_t(T * I), 4.0f);
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        const Buffer gb = Context::put(b, g), ub = Context::put(b, u);
        const Buffer out = inPlace ? gb : Context::poisoned(b, size_t(T * I) * 4);
        b.swiglu(gb, ub, T, I, limit, out);
        return Outs{Context::getF32(b, out, size_t(T * I))};
    });
    const std::string sh = std::string(label) + " T=" + str(T) + " I=" + str(I) + " limit=" + fstr(limit) +
                           (inPlace ? " in-place" : "");
    return {Context::compare(kFamily, "swiglu", sh, ref[0], dut[0], 1e-6, 1e-5)};
}

std::vector<OpResult> elementwiseCase(Context& ctx, int64_t n) {
    const std::vector<float> x = ctx.randn(size_t(n)), y = ctx.randn(size_t(n)), z = ctx.randn(size_t(n + 3));
    const float s = 0.70710678f;
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        const Buffer xb = Context::put(b, x), yb = Context::put(b, y), zb = Context::put(b, z);
        b.add(xb, yb, n);
        b.scale(xb, n, s);
        b.zero(zb);
        return Outs{Context::getF32(b, yb, size_t(n)), Context::getF32(b, xb, size_t(n)),
                    Context::getF32(b, zb, size_t(n + 3))};
    });
    const std::string sh = "n=" + str(n);
    return {exact("add", sh, ref[0], dut[0]), exact("scale", sh + " s=" + fstr(s), ref[1], dut[1]),
            exact("zero", "n=" + str(n + 3), ref[2], dut[2])};
}

std::vector<OpResult> concatCase(Context& ctx, const char* label, int64_t T, std::vector<int64_t> widths) {
    std::vector<std::vector<float>> parts;
    int64_t total = 0;
    for (int64_t w : widths) {
        parts.push_back(ctx.randn(size_t(T * w)));
        total += w;
    }
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        std::vector<Buffer> bufs;
        for (const auto& p : parts) bufs.push_back(Context::put(b, p));
        const Buffer out = Context::poisoned(b, size_t(T * total) * 4);
        b.concatColumns(bufs.data(), widths.data(), int(widths.size()), T, out);
        return Outs{Context::getF32(b, out, size_t(T * total))};
    });
    std::string ws;
    for (int64_t w : widths) {
        if (!ws.empty()) ws += '+';
        ws += str(w);
    }
    return {exact("concatColumns", std::string(label) + " T=" + str(T) + " widths=" + ws, ref[0], dut[0])};
}

// src [T, D] → dst [T, n, D]. dstOffset > 0: dst starts dstOffset floats into its buffer (a view that is
// not 16-byte aligned: the scalar path of the CUDA kernel). The whole destination buffer is compared,
// so a write past [T, n, D] shows as well as a missing one.
std::vector<OpResult> repeatRowsCase(Context& ctx, const char* label, int64_t T, int64_t D, int n,
                                     int64_t dstOffset = 0) {
    const std::vector<float> src = ctx.randn(static_cast<size_t>(T * D));
    const size_t outFloats = static_cast<size_t>(T * n * D + dstOffset);
    auto [ref, dut] = onBoth(ctx, [&](Backend& b) {
        const Buffer sb = Context::put(b, src);
        const Buffer db = Context::poisoned(b, outFloats * 4);
        const Buffer dv =
            dstOffset ? db.view(static_cast<size_t>(dstOffset) * 4, static_cast<size_t>(T * n * D) * 4) : db;
        b.repeatRows(sb, T, D, n, dv);
        return Outs{Context::getF32(b, db, outFloats)};
    });
    const std::string sh = std::string(label) + " T=" + str(T) + " D=" + str(D) + " n=" + str(n) +
                           (dstOffset ? " dst+" + str(dstOffset) : "");
    return {exact("repeatRows", sh, ref[0], dut[0])};
}

}  // namespace

void addMathCases(std::vector<Case>& out) {
    auto add = [&](std::string name, std::function<std::vector<OpResult>(Context&)> f) {
        out.push_back(Case{kFamily, std::move(name), std::move(f)});
    };
    using D = DType;

    // embedding
    add("embedding glm", [](Context& c) { return embeddingCase(c, "glm", 1000, 4096, D::BF16, {1, 7}); });
    add("embedding tiny_a", [](Context& c) { return embeddingCase(c, "tiny_a", 512, 128, D::F32, {5}); });
    add("embedding embedded", [](Context& c) { return embeddingCase(c, "embedded", 1920, 256, D::F16, {3}); });
    add("embedding odd", [](Context& c) { return embeddingCase(c, "odd", 37, 77, D::BF16, {4}); });

    // linear: decode (GEMV, T ≤ 8) at the real widths. Host weight generation dominates the run time
    // (the unit test runs every case ~20 times), so the widest matrices keep their real K (the loop the
    // kernels run) and fewer rows (only the grid size depends on N).
    add("linear glm hidden", [](Context& c) { return linearCase(c, "glm o/kda", 4096, 4096, D::BF16, {1, 2, 5, 8, 9}); });
    add("linear glm dense down", [](Context& c) { return linearCase(c, "glm mlp down (1/4 rows)", 1024, 12288, D::BF16, {1, 3}); });
    add("linear glm expert up", [](Context& c) { return linearCase(c, "glm expert gate/up", 2048, 4096, D::BF16, {4, 6}); });
    add("linear glm q_a", [](Context& c) { return linearCase(c, "glm q_a", 1536, 4096, D::BF16, {7, 40}); });
    add("linear glm q_b f16", [](Context& c) { return linearCase(c, "glm q_b (1/2 rows)", 8192, 1536, D::F16, {1, 3}); });
    add("linear glm kv_a", [](Context& c) { return linearCase(c, "glm kv_a", 512, 4096, D::BF16, {1, 4}); });
    add("linear router f32", [](Context& c) { return linearCase(c, "router", 288, 4096, D::F32, {1, 4, 33}); });
    // prefill (GEMM, T > 8): tails of the 64-token and 128-row tiles
    add("linear gemm tails", [](Context& c) { return linearCase(c, "gemm", 200, 4096, D::BF16, {17, 65, 130}); });
    add("linear gemm f16", [](Context& c) { return linearCase(c, "gemm", 2048, 512, D::F16, {3, 20}); });
    add("linear few rows", [](Context& c) { return linearCase(c, "few rows", 66, 4096, D::BF16, {1, 3, 8}); });
    // the tensor-core GEMV's tails: K a multiple of 8 but not of 64 (a short last slice), several row blocks per
    // block with a partial last one
    add("linear k tail", [](Context& c) { return linearCase(c, "k tail", 40, 264, D::BF16, {2, 8}); });
    add("linear wide rows", [](Context& c) { return linearCase(c, "wide rows", 12296, 512, D::BF16, {1, 4, 7, 33}); });
    // tiny models
    add("linear tiny_a", [](Context& c) { return linearCase(c, "tiny_a", 256, 128, D::BF16, {1, 5, 16}); });
    add("linear embedded", [](Context& c) { return linearCase(c, "embedded", 512, 256, D::BF16, {1, 3, 24}); });
    add("linear embedded expert down", [](Context& c) { return linearCase(c, "embedded", 256, 96, D::BF16, {1, 10}); });
    // fallbacks: K % 8 ≠ 0, misaligned x, F32 odd sizes through cuBLAS
    add("linear odd bf16", [](Context& c) { return linearCase(c, "odd", 33, 127, D::BF16, {1, 6, 17}); });
    add("linear odd f16", [](Context& c) { return linearCase(c, "odd", 3, 1001, D::F16, {2, 9}); });
    add("linear odd f32", [](Context& c) { return linearCase(c, "odd", 5, 77, D::F32, {1, 12}); });
    add("linear misaligned x", [](Context& c) { return linearCase(c, "misaligned", 512, 256, D::BF16, {2, 12}, 1); });

    // rmsnorm: block-per-row (D > 1024: registers, or strided) and warp-per-row paths, weighted or not, in place
    add("rmsnorm glm hidden", [](Context& c) { return rmsnormCase(c, "glm", 7, 4096, true, false, 1e-5f); });
    add("rmsnorm glm hidden T=1 in-place", [](Context& c) { return rmsnormCase(c, "glm", 1, 4096, true, true, 1e-5f); });
    add("rmsnorm glm unweighted", [](Context& c) { return rmsnormCase(c, "glm", 3, 4096, false, false, 1e-6f); });
    add("rmsnorm glm q_lora", [](Context& c) { return rmsnormCase(c, "glm q_lora", 2, 1536, true, false, 1e-5f); });
    add("rmsnorm glm kv_lora", [](Context& c) { return rmsnormCase(c, "glm kv_lora", 5, 512, true, true, 1e-5f); });
    add("rmsnorm glm heads", [](Context& c) { return rmsnormCase(c, "glm kda heads", 256, 128, true, false, 1e-5f); });
    // The vector form (D % 4 = 0, ≤ 8192: registers hold the row) with a partial last float4 group per
    // thread, and past its limit (the strided block kernel).
    add("rmsnorm wide", [](Context& c) { return rmsnormCase(c, "wide", 2, 6144, true, true, 1e-5f); });
    add("rmsnorm wider", [](Context& c) { return rmsnormCase(c, "wider", 2, 12288, true, false, 1e-5f); });
    add("rmsnorm boundary", [](Context& c) { return rmsnormCase(c, "boundary", 33, 1024, true, false, 1e-5f); });
    add("rmsnorm boundary+1", [](Context& c) { return rmsnormCase(c, "boundary", 4, 1025, true, false, 1e-5f); });
    add("rmsnorm tiny_a", [](Context& c) { return rmsnormCase(c, "tiny_a", 3, 128, true, false, 1e-6f); });
    add("rmsnorm embedded", [](Context& c) { return rmsnormCase(c, "embedded", 2, 256, true, true, 1e-6f); });
    add("rmsnorm odd", [](Context& c) { return rmsnormCase(c, "odd", 9, 77, false, true, 1e-6f); });

    // layernorm (the indexer's k norm; D = 128 in GLM-5.3-Flash, 32 in the tiny models)
    add("layernorm glm indexer", [](Context& c) { return layernormCase(c, "glm indexer", 7, 128, true); });
    add("layernorm glm indexer T=1", [](Context& c) { return layernormCase(c, "glm indexer", 1, 128, false); });
    add("layernorm tiny", [](Context& c) { return layernormCase(c, "tiny", 5, 32, false); });
    add("layernorm wide", [](Context& c) { return layernormCase(c, "wide", 3, 4096, false); });
    add("layernorm odd", [](Context& c) { return layernormCase(c, "odd", 9, 1100, true); });
    add("layernorm odd small", [](Context& c) { return layernormCase(c, "odd", 65, 77, false); });

    // swiglu
    add("swiglu glm expert", [](Context& c) { return swigluCase(c, "glm expert", 1, 2048, 10.0f, false); });
    add("swiglu glm expert in-place", [](Context& c) { return swigluCase(c, "glm expert", 3, 2048, 10.0f, true); });
    add("swiglu glm dense", [](Context& c) { return swigluCase(c, "glm dense", 4, 12288, 10.0f, false); });
    add("swiglu tiny_a", [](Context& c) { return swigluCase(c, "tiny_a", 3, 32, 3.0f, false); });
    add("swiglu embedded", [](Context& c) { return swigluCase(c, "embedded", 2, 96, 10.0f, true); });
    add("swiglu no limit", [](Context& c) { return swigluCase(c, "odd", 5, 77, 0.0f, false); });

    // add / scale / zero
    add("add scale zero", [](Context& c) { return elementwiseCase(c, 3 * 4096 + 5); });
    add("add scale zero small", [](Context& c) { return elementwiseCase(c, 7); });

    // concatColumns: MTP's [enorm(e) | hnorm(h)], KDA's q | k | v, odd widths
    add("concatColumns glm mtp", [](Context& c) { return concatCase(c, "glm mtp", 3, {4096, 4096}); });
    add("concatColumns glm kda qkv", [](Context& c) { return concatCase(c, "glm kda", 2, {8192, 8192, 8192}); });
    add("concatColumns odd", [](Context& c) { return concatCase(c, "odd", 5, {5, 17, 3}); });
    add("concatColumns T=1", [](Context& c) { return concatCase(c, "T=1", 1, {1, 1}); });

    // repeatRows: the embedding broadcast to the hc_mult = 4 mHC streams (decode, prefill, the tiny
    // models), odd widths and a misaligned destination (scalar path), n = 1
    add("repeatRows glm decode", [](Context& c) { return repeatRowsCase(c, "glm", 1, 4096, 4); });
    add("repeatRows glm prefill", [](Context& c) { return repeatRowsCase(c, "glm", 9, 4096, 4); });
    add("repeatRows tiny_a", [](Context& c) { return repeatRowsCase(c, "tiny_a", 5, 128, 4); });
    add("repeatRows odd", [](Context& c) { return repeatRowsCase(c, "odd", 3, 77, 3); });
    add("repeatRows misaligned", [](Context& c) { return repeatRowsCase(c, "misaligned", 2, 256, 4, 1); });
    add("repeatRows n=1", [](Context& c) { return repeatRowsCase(c, "n=1", 4, 33, 1); });
}

}  // namespace ts::selftest
