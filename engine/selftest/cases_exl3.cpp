// Op self-test cases of the EXL3 family: Backend::linear over a packed EXL3 linear (the CPU reference is
// Exl3PackedLinear::forwardHost, engine/quant/exl3_gemm.cpp; the CUDA side is CudaBackend::exl3Linear,
// kernels/cuda/cuda_exl3.cu) and Backend::moeExpertsFused (kernels/cuda/cuda_exl3_moe.cu) against the
// model's per-expert loop (gatherRows / linear / swiglu / linear / scatterAddRows in ascending expert
// order, engine/model/layers.cpp) run on the reference.
//
// Weights: any trellis bitstream is a valid EXL3 weight, so the trellis is random bytes; suh and svh are
// random signs × magnitudes (svh ∝ 1/√k keeps outputs O(1)); some cases carry a bias. Shapes: every
// K = 2..6 × the three codebooks at 128→256 and at an unpadded 200→300 (k 256, n 384), K = 1, 7, 8 at 128→256
// and 4096→2048 (T = 1, 12); GLM-5.3-Flash's
// routed-expert and large shapes 4096→2048, 2048→4096, 4096→12288 and an unpadded 4000→2000 (k 4096,
// n 2048); T = 1, 4 (decode: split-K), 33 (three 16-row jobs, multi-stage slices), 100 (64-row jobs that
// reuse each decoded tile for 4 m-groups). MoE: small experts with heavy sharing (an expert with more
// than 16 tokens: several jobs; ~70 tokens per expert: 64-row jobs), mixed K between projections,
// a swiglu limit that clamps, and the real layer (288 experts, top-8, 4096 → 2048 → 4096); the one-launch
// kernel (gate/up and down of one K) at batch 1/4/8/16 with many tokens per expert, past 256 pairs (the
// combine as units of the launch) and with 64-row jobs; and the one-launch version against the two-launch
// one bit for bit over five calls enqueued back to back (its counters reset between launches).
//
// Tolerance (|dut − ref| ≤ atol + rtol·|ref|, atol = tol·RMS(ref), rtol = tol). Both CUDA variants compute
// the input transform exactly as the CPU and accumulate in the tensor core's fp32 (truncating, another
// order than the CPU's sequential sum).
//   - Prefill-sized jobs (≥ 40 rows, 64-row jobs) keep the rotated activation as fp16 hi + lo (~2^-22
//     relative) and multiply it by the CPU's fp16 weights exactly: expected ~1e-6..1e-5 of the output RMS,
//     tol = 1e-4 (linear) keeps a ≥ 10× margin.
//   - Decode-sized jobs (the streaming variant) round each rotated activation once to fp16 (≤ 2^-11
//     relative, RMS ~2^-12.6) and use MUL1's exact affine value instead of its fp16 rounding (≤ half an
//     fp16 ulp): the two independent errors give an output error of RMS ≈ 3e-4 of the output's, ~1.4e-3
//     at the worst of ~10^4 outputs; tol = 4e-3 (linear).
//   - MoE (two GEMVs, swiglu, eight experts summed): tol = 6e-3 when the step is decode-sized (fewer than 40
//     rows per used expert), else the prefill path's 2e-4.
//   Where the plans keep 16-row jobs for prefill-sized steps (a GB10's 99 KiB at K ≤ 2: exl3PrefillJobs), those
//   steps take the decode bounds.
// An error in any tile, any column block or any slice still shows as O(1).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "exl3_tune.h"
#include "quant/exl3_linear.h"
#include "selftest/op_selftest.h"

namespace ts::selftest {

namespace {

std::string cbName(Exl3Codebook cb) { return std::string(exl3CodebookName(cb)); }

const char* const kFamily = "exl3";
constexpr double kTolLinearPrefill = 1e-4;
constexpr double kTolLinearDecode = 4e-3;
constexpr double kTolMoeDecode = 6e-3;
constexpr double kTolMoePrefill = 2e-4;
// Rows per job below which the CUDA backend plans decode-sized (16-row) jobs (exl3cuda::chooseMG).
constexpr int64_t kPrefillRows = 40;

double rms(const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += double(x) * x;
    return v.empty() ? 0.0 : std::sqrt(s / double(v.size()));
}

OpResult compareRel(const std::string& op, const std::string& shape, const std::vector<float>& ref,
                    const std::vector<float>& dut, double tol) {
    return Context::compare(kFamily, op, shape, ref, dut, tol * std::max(rms(ref), 1e-30), tol);
}

// The MoE tolerance for a routing: prefill-sized steps (≥ kPrefillRows rows per used expert: the backend's
// 64-row jobs, hi/lo activations, where the plans take them at these Ks) keep the tight bound; decode-sized ones
// get the fp16-activation bound.
double moeTol(const std::vector<int32_t>& idx, int64_t E, int bitsGU, int bitsD) {
    if (!exl3PrefillJobs(bitsGU) || !exl3PrefillJobs(bitsD)) return kTolMoeDecode;
    std::vector<int64_t> count(static_cast<size_t>(E), 0);
    int64_t rows = 0, used = 0;
    for (int32_t e : idx)
        if (e >= 0 && e < E) {
            used += count[size_t(e)]++ == 0 ? 1 : 0;
            ++rows;
        }
    return used > 0 && rows >= kPrefillRows * used ? kTolMoePrefill : kTolMoeDecode;
}

// A random packed EXL3 linear [out, in] (padded to multiples of 128), kept alive by the context.
const PackedLinear* randomPacked(Context& ctx, int64_t in, int64_t out, int bits, Exl3Codebook cb, bool bias) {
    Exl3Linear w;
    w.prefix = "selftest";
    w.k = (in + 127) / 128 * 128;
    w.n = (out + 127) / 128 * 128;
    w.bits = bits;
    w.codebook = cb;
    std::vector<uint8_t> bytes(size_t(w.k * w.n * bits / 8));
    for (size_t i = 0; i < bytes.size(); i += 8) {
        const uint64_t r = ctx.rng()();
        std::memcpy(bytes.data() + i, &r, std::min<size_t>(8, bytes.size() - i));
    }
    w.trellis = static_cast<const uint8_t*>(ctx.keep(std::move(bytes)));
    const std::vector<float> su = ctx.uniform(size_t(w.k), 0.5f, 1.5f), sv = ctx.uniform(size_t(w.n), 0.5f, 1.5f);
    std::bernoulli_distribution sign(0.5);
    const float svScale = 1.0f / std::sqrt(float(w.k));
    for (int64_t i = 0; i < w.k; ++i) w.suh.push_back(sign(ctx.rng()) ? -su[size_t(i)] : su[size_t(i)]);
    for (int64_t j = 0; j < w.n; ++j) w.svh.push_back((sign(ctx.rng()) ? -sv[size_t(j)] : sv[size_t(j)]) * svScale);
    if (bias) w.bias = ctx.randn(size_t(w.n), 0.5f);
    return ctx.own(std::make_unique<Exl3PackedLinear>(std::move(w), in, out));
}

// ---- linear ---------------------------------------------------------------------------------------------

// A case run under a kernels/exl3_tune.h override (TuneOverride) for its duration.
template <int (*Set)(int), class Fn>
auto tuned(int value, Fn fn) {
    return [value, fn](Context& c) {
        const TuneOverride<Set> o(value);
        return fn(c);
    };
}

// A linear case with the EXL3 cuBLAS route (cuda_exl3_dequant.cu) forced on — every compared row count must take it —
// or off — none may —, checked on the GPU by the route's call counter: a case whose linear fell back to the other
// route (or took the route against the override) would otherwise pass against the CPU all the same.
template <class Fn>
auto onCublasRoute(bool on, Fn fn) {
    return [on, fn](Context& c) {
        // The prefill path itself forced on for any row count, so that TS_EXL3_PREFILL / TS_EXL3_PF_LINEAR_ROWS, A/B
        // switches, cannot make the check fail (serve's start-up gate runs this self-test).
        const TuneOverride<exl3SetPrefillPath> path(1);
        const TuneOverride<exl3SetPrefillLinearMinRows> anyRows(1);
        const TuneOverride<exl3SetPrefillCublasRows> rows(on ? 0 : 4097);
        const int64_t before = exl3PrefillCublasCalls();
        std::vector<OpResult> rs = fn(c);
        const int64_t taken = exl3PrefillCublasCalls() - before;
        if (c.dut().name() == "cuda" && (on ? taken < int64_t(rs.size()) : taken != 0))
            for (OpResult& r : rs) {
                r.pass = false;
                r.note += (r.note.empty() ? "" : "; ") + std::string("cuBLAS route taken ") + str(taken) +
                          " times, expected " + (on ? "at least " + str(int64_t(rs.size())) : std::string("none"));
            }
        return rs;
    };
}

std::vector<OpResult> linearCase(Context& ctx, const char* label, int64_t in, int64_t out, int bits, Exl3Codebook cb,
                                 const std::vector<int64_t>& Ts, bool bias) {
    const WeightView w = WeightView::of(*randomPacked(ctx, in, out, bits, cb, bias));
    std::vector<OpResult> rs;
    for (int64_t T : Ts) {
        const std::vector<float> x = ctx.randn(size_t(T * in));
        std::vector<float> res[2];
        for (int side = 0; side < 2; ++side) {
            Backend& b = side ? ctx.dut() : ctx.ref();
            const Buffer xb = Context::put(b, x), yb = Context::poisoned(b, size_t(T * out) * 4);
            b.linear(xb, T, w, yb);
            res[side] = Context::getF32(b, yb, size_t(T * out));
        }
        const std::string sh = std::string(label) + " " + str(in) + "→" + str(out) + " K=" + str(bits) + " " +
                               cbName(cb) + (bias ? " bias" : "") + " T=" + str(T);
        const bool prefill = T >= kPrefillRows && exl3PrefillJobs(bits);
        rs.push_back(compareRel("linear", sh, res[0], res[1], prefill ? kTolLinearPrefill : kTolLinearDecode));
    }
    return rs;
}

// ---- fused MoE --------------------------------------------------------------------------------------------

struct MoeShape {
    const char* label;
    int64_t T, D, I, E, topk;
    int distinct;  // distinct expert weight sets; expert e uses set e % distinct
    int bitsGU, bitsD;
    Exl3Codebook cb;
    float limit;
    bool mixedK;     // expert sets alternate their gate/up K (no single launch fits: the fused path declines)
    int64_t poolE;   // routing draws from experts [0, poolE) (sharing between tokens)
    bool oddIds = false;  // each token names its first expert twice, and one id is out of range (skipped)
    // Prefill-sized (64-row jobs): the case runs with TS_EXL3_PF_MOE_ROWS as configured and again on the staged
    // kernels; the other shapes are about the decode-sized kernels and keep the prefill path off.
    bool prefillSized = false;
};

std::vector<OpResult> moeCase(Context& ctx, const MoeShape& s) {
    std::vector<WeightView> gate(size_t(s.E)), up(size_t(s.E)), down(size_t(s.E));
    std::vector<WeightView> sg, su, sd;
    for (int i = 0; i < s.distinct; ++i) {
        const int kGU = s.mixedK && (i & 1) ? s.bitsGU + 1 : s.bitsGU;
        sg.push_back(WeightView::of(*randomPacked(ctx, s.D, s.I, kGU, s.cb, false)));
        su.push_back(WeightView::of(*randomPacked(ctx, s.D, s.I, kGU, s.cb, false)));
        sd.push_back(WeightView::of(*randomPacked(ctx, s.I, s.D, s.bitsD, s.cb, false)));
    }
    for (int64_t e = 0; e < s.E; ++e) {
        gate[size_t(e)] = sg[size_t(e % s.distinct)];
        up[size_t(e)] = su[size_t(e % s.distinct)];
        down[size_t(e)] = sd[size_t(e % s.distinct)];
    }
    // Routing: topk distinct experts per token from the pool; weights in (0.05, 1).
    std::vector<int32_t> idx;
    std::vector<float> wt;
    moeRandomRouting(ctx, s.T, s.topk, s.poolE, idx, wt);
    if (s.mixedK) {  // token 0 picks one expert of each K, so the selection is mixed whatever the seed
        idx[0] = 0;
        idx[1] = 1;
    }
    if (s.oddIds) {  // no router does this, but the op's contract allows it: every path must agree
        for (int64_t t = 0; t < s.T; ++t) idx[size_t(t * s.topk + 1)] = idx[size_t(t * s.topk)];
        idx[size_t(s.T * s.topk - 1)] = int32_t(s.E + 3);
    }
    const std::vector<float> x = ctx.randn(size_t(s.T * s.D)), y0 = ctx.randn(size_t(s.T * s.D));

    std::vector<float> res[2];
    bool fused = false;
    for (int side = 0; side < 2; ++side) {
        Backend& b = side ? ctx.dut() : ctx.ref();
        const Buffer xb = Context::put(b, x), yb = Context::put(b, y0);  // y += the experts' sum
        bool f = false;
        if (side) f = b.moeExpertsFused(xb, s.T, s.D, s.I, idx.data(), wt.data(), s.topk, gate.data(), up.data(),
                                        down.data(), s.E, s.limit, yb);
        if (!f) moeExpertLoop(b, xb, s.T, s.D, s.I, idx, wt, s.topk, gate, up, down, s.E, s.limit, yb);
        if (side) fused = f;
        res[side] = Context::getF32(b, yb, size_t(s.T * s.D));
    }
    // The same routing read from device buffers (moeExpertsFusedDevice: the work list built on the device).
    std::vector<float> resDev;
    bool fusedDev = false;
    {
        Backend& b = ctx.dut();
        const Buffer xb = Context::put(b, x), yb = Context::put(b, y0);
        const Buffer ib = b.upload(idx.data(), idx.size() * 4), wb = Context::put(b, wt);
        fusedDev = b.moeExpertsFusedDevice(xb, s.T, s.D, s.I, ib, wb, s.topk, gate.data(), up.data(), down.data(), s.E,
                                           s.limit, yb);
        if (fusedDev) resDev = Context::getF32(b, yb, size_t(s.T * s.D));
    }
    const std::string sh = std::string(s.label) + " T=" + str(s.T) + " D=" + str(s.D) + " I=" + str(s.I) + " E=" +
                           str(s.E) + " top" + str(s.topk) + " K=" + str(s.bitsGU) + (s.mixedK ? "/" + str(s.bitsGU + 1) : "") +
                           "," + str(s.bitsD) + " " + cbName(s.cb) + (s.limit > 0 ? " limit" : "");
    // Compare the experts' contribution (y − y0): the initial y only checks that y is accumulated into.
    const double tol = moeTol(idx, s.E, s.bitsGU, s.bitsD);
    OpResult r = compareRel("moeExpertsFused", sh, res[0], res[1], tol);
    {
        std::vector<float> dr(res[0].size()), dd(res[1].size());
        for (size_t i = 0; i < dr.size(); ++i) {
            dr[i] = res[0][i] - y0[i];
            dd[i] = res[1][i] - y0[i];
        }
        const OpResult r2 = compareRel("moeExpertsFused", sh, dr, dd, tol);
        if (!r2.pass) r = r2;
    }
    // A CUDA backend must take its fused path for uniformly packed experts (and decline mixed K).
    const bool expectFused = ctx.dut().name() == "cuda" && !s.mixedK;
    if (fused != expectFused && ctx.dut().name() == "cuda") {
        r.pass = false;
        r.note = fused ? "fused path taken for experts with mixed K" : "no fused path: the per-expert loop ran";
    } else if (r.note.empty()) {
        r.note = fused ? "fused, " + str(exl3MoeLastLaunches()) + " launch(es)" : "per-expert loop";
    }
    std::vector<OpResult> rs{r};
    // Routed on the device: taken by a CUDA backend for decode-sized steps of one-launch experts.
    const bool cuda = ctx.dut().name() == "cuda";
    const bool expectDev = cuda && !s.mixedK && s.bitsGU == s.bitsD && s.T <= 16 && s.T * s.topk <= 256 &&
                           exl3MoeLaunches() == 1 && moeDeviceRouting();
    if (fusedDev) {
        OpResult rd = compareRel("moeExpertsFusedDevice", sh, res[0], resDev, tol);
        std::vector<float> dr(res[0].size()), dd(resDev.size());
        for (size_t i = 0; i < dr.size(); ++i) {
            dr[i] = res[0][i] - y0[i];
            dd[i] = resDev[i] - y0[i];
        }
        const OpResult r2 = compareRel("moeExpertsFusedDevice", sh, dr, dd, tol);
        if (!r2.pass) rd = r2;
        if (!expectDev) {
            rd.pass = false;
            rd.note = "device-routed path taken where it should decline";
        }
        rs.push_back(rd);
        // At T = 1 the plan is the host version's: the same bits (with distinct ids and all in range).
        if (s.T == 1 && fused && !s.oddIds)
            rs.push_back(Context::compareExact(kFamily, "moeExpertsFusedDevice vs moeExpertsFused", sh,
                                               bitsOf(res[1]), bitsOf(resDev)));
    } else if (expectDev) {
        rs.push_back(Context::verdict(kFamily, "moeExpertsFusedDevice", sh, false,
                                      "declined a decode-sized step of one-launch experts"));
    }
    return rs;
}

// The fused MoE in one launch (the default) against the two-launch version (kernels/exl3_tune.h) on the
// device: the same five steps, each version's calls enqueued back to back with no synchronisation in
// between after a warm-up pass (the one-launch kernel's ticket and done counters must be back at zero for
// every next call),
// compared bit for bit (same plans, same summation orders), and the one-launch results against the
// reference loop. Steps: T = 1 (top-8 of 288), 16 (top-8 of 12: every expert shared by ~10 tokens),
// 64 (top-8 of 24: 512 pairs > 256, the combine runs as its own units), 100 (top-4 of 6: 64-row jobs, 2
// per expert), T = 1 again. On a backend without the fused path both versions are the loop (trivially
// equal).
std::vector<OpResult> moeLaunchesCase(Context& ctx) {
    const int64_t D = 256, I = 384, E = 288;
    const int distinct = 12, bits = 4;
    const Exl3Codebook cb = Exl3Codebook::Mcg;
    std::vector<WeightView> sg, su, sd, gate(static_cast<size_t>(E)), up(static_cast<size_t>(E)),
        down(static_cast<size_t>(E));
    for (int i = 0; i < distinct; ++i) {
        sg.push_back(WeightView::of(*randomPacked(ctx, D, I, bits, cb, false)));
        su.push_back(WeightView::of(*randomPacked(ctx, D, I, bits, cb, false)));
        sd.push_back(WeightView::of(*randomPacked(ctx, I, D, bits, cb, i == 1)));
    }
    for (int64_t e = 0; e < E; ++e) {
        gate[size_t(e)] = sg[size_t(e % distinct)];
        up[size_t(e)] = su[size_t(e % distinct)];
        down[size_t(e)] = sd[size_t(e % distinct)];
    }
    struct Config {
        int64_t T, topk, pool;
        float limit;
    };
    const Config configs[] = {{1, 8, 288, 0.0f}, {16, 8, 12, 0.5f}, {64, 8, 24, 0.0f}, {100, 4, 6, 0.0f}, {1, 8, 288, 0.0f}};
    struct Step {
        int64_t T = 0, topk = 0, pool = 0;
        float limit = 0.0f;
        std::vector<int32_t> idx;
        std::vector<float> wt, x, y0, ref, out[3];  // per pass
        int launches[2] = {0, 0};
        bool fused[2] = {false, false};
    };
    std::vector<Step> steps(std::size(configs));
    for (size_t i = 0; i < steps.size(); ++i) {
        Step& st = steps[i];
        st.T = configs[i].T;
        st.topk = configs[i].topk;
        st.pool = configs[i].pool;
        st.limit = configs[i].limit;
        moeRandomRouting(ctx, st.T, st.topk, st.pool, st.idx, st.wt);
        st.x = ctx.randn(size_t(st.T * D));
        st.y0 = ctx.randn(size_t(st.T * D));
        Backend& b = ctx.ref();
        const Buffer xb = Context::put(b, st.x), yb = Context::put(b, st.y0);
        moeExpertLoop(b, xb, st.T, D, I, st.idx, st.wt, st.topk, gate, up, down, E, st.limit, yb);
        st.ref = Context::getF32(b, yb, size_t(st.T * D));
    }
    Backend& d = ctx.dut();
    const int prevOverride = exl3MoeSetLaunches(0);
    // Passes: one launch (warm-up: expert uploads and scratch growth synchronise), two launches, one launch
    // again (now nothing on the host waits between the calls); the one-launch results must equal the
    // two-launch ones and each other bit for bit.
    for (int pass = 0; pass < 3; ++pass) {
        const int v = pass == 1 ? 1 : 0;
        exl3MoeSetLaunches(v + 1);
        std::vector<Buffer> xb, yb;  // every input uploaded first: the calls then run back to back
        for (const Step& st : steps) {
            xb.push_back(Context::put(d, st.x));
            yb.push_back(Context::put(d, st.y0));
        }
        for (size_t i = 0; i < steps.size(); ++i) {
            Step& st = steps[i];
            st.fused[v] = d.moeExpertsFused(xb[i], st.T, D, I, st.idx.data(), st.wt.data(), st.topk, gate.data(),
                                            up.data(), down.data(), E, st.limit, yb[i]);
            st.launches[v] = st.fused[v] ? exl3MoeLastLaunches() : 0;
            if (!st.fused[v]) moeExpertLoop(d, xb[i], st.T, D, I, st.idx, st.wt, st.topk, gate, up, down, E, st.limit, yb[i]);
        }
        for (size_t i = 0; i < steps.size(); ++i) steps[i].out[pass] = Context::getF32(d, yb[i], size_t(steps[i].T * D));
    }
    exl3MoeSetLaunches(prevOverride);

    std::vector<OpResult> rs;
    const bool cuda = d.name() == "cuda";
    for (size_t i = 0; i < steps.size(); ++i) {
        const Step& st = steps[i];
        const std::string sh = "step " + str(int64_t(i)) + " T=" + str(st.T) + " top" + str(st.topk) + " of " +
                               str(st.pool) + " D=" + str(D) + " I=" + str(I) + " E=" + str(E) + " K=" + str(bits) +
                               " " + cbName(cb) + (st.limit > 0 ? " limit" : "");
        const double tol = moeTol(st.idx, E, bits, bits);
        OpResult r = compareRel("moeExpertsFused 1 launch", sh, st.ref, st.out[2], tol);
        std::vector<float> dr(st.ref.size()), dd(st.ref.size());
        for (size_t k = 0; k < dr.size(); ++k) {
            dr[k] = st.ref[k] - st.y0[k];
            dd[k] = st.out[2][k] - st.y0[k];
        }
        const OpResult r2 = compareRel("moeExpertsFused 1 launch", sh, dr, dd, tol);
        if (!r2.pass) r = r2;
        OpResult same = Context::compareExact(kFamily, "moeExpertsFused 1 vs 2 launches", sh, bitsOf(st.out[1]),
                                              bitsOf(st.out[2]));
        const OpResult again = Context::compareExact(kFamily, "moeExpertsFused 1 vs 2 launches", sh,
                                                     bitsOf(st.out[0]), bitsOf(st.out[2]));
        if (!again.pass) {
            same = again;
            same.note = "one launch, warm-up pass against the back-to-back pass: " + again.note;
        }
        const int want2 = st.T * st.topk <= 256 ? 2 : 3;
        if (cuda && (!st.fused[0] || !st.fused[1] || st.launches[0] != 1 || st.launches[1] != want2)) {
            r.pass = same.pass = false;
            r.note = same.note = "launches: " + str(st.launches[0]) + " and " + str(st.launches[1]) + " (want 1 and " +
                                 str(want2) + ")";
        } else if (r.note.empty()) {
            r.note = st.fused[0] ? "fused, 1 launch" : "per-expert loop";
        }
        rs.push_back(r);
        rs.push_back(same);
    }
    return rs;
}

}  // namespace

void addExl3Cases(std::vector<Case>& out) {
    using CB = Exl3Codebook;
    const CB cbs[3] = {CB::Inst3, CB::Mcg, CB::Mul1};
    // Every K × codebook at a small padded shape and an unpadded one.
    for (int bits = 2; bits <= 6; ++bits)
        for (CB cb : cbs) {
            out.push_back({kFamily, std::string("linear small K=") + str(bits) + " " + cbName(cb),
                           [bits, cb](Context& c) { return linearCase(c, "small", 128, 256, bits, cb, {1, 4, 33, 100}, false); }});
            out.push_back({kFamily, std::string("linear unpadded K=") + str(bits) + " " + cbName(cb),
                           [bits, cb](Context& c) { return linearCase(c, "unpadded", 200, 300, bits, cb, {1, 17}, bits == 3); }});
        }
    // K = 1, 7, 8 (no shipped conversion uses them, but the format allows them): the streaming unit's deepest
    // ring (K = 1: 32 slots, 4 copying lanes) and its two-word lanes with three-word windows (K ≥ 7), at 1 and
    // 12 rows (12: the 16-token B fragments), and 64-k-tile slices at a routed-expert shape.
    for (int bits : {1, 7, 8}) {
        for (CB cb : cbs)
            out.push_back({kFamily, std::string("linear small K=") + str(bits) + " " + cbName(cb),
                           [bits, cb](Context& c) { return linearCase(c, "small", 128, 256, bits, cb, {1, 12}, false); }});
        out.push_back({kFamily, "linear glm gate 4096→2048 K=" + str(bits) + " mul1",
                       [bits](Context& c) { return linearCase(c, "glm", 4096, 2048, bits, CB::Mul1, {1, 12}, false); }});
    }
    // GLM-5.3-Flash shapes: routed-expert gate/up and down, the large 4096→12288, an unpadded one.
    for (CB cb : cbs) {
        out.push_back({kFamily, std::string("linear glm gate 4096→2048 K=4 ") + cbName(cb),
                       [cb](Context& c) {
                           return linearCase(c, "glm", 4096, 2048, 4, cb, {1, 4, 33}, false);
                       }});
        out.push_back({kFamily, std::string("linear glm down 2048→4096 K=4 ") + cbName(cb),
                       [cb](Context& c) { return linearCase(c, "glm", 2048, 4096, 4, cb, {1, 4}, false); }});
        out.push_back({kFamily, std::string("linear glm 4096→12288 K=4 ") + cbName(cb),
                       [cb](Context& c) { return linearCase(c, "glm", 4096, 12288, 4, cb, {1, 4}, false); }});
    }
    for (int bits : {2, 3, 5, 6})
        out.push_back({kFamily, "linear glm 4096→12288 K=" + str(bits) + " mul1",
                       [bits](Context& c) { return linearCase(c, "glm", 4096, 12288, bits, CB::Mul1, {1}, false); }});
    out.push_back({kFamily, "linear glm unpadded 4000→2000 K=4 mcg bias",
                   [](Context& c) { return linearCase(c, "unpadded", 4000, 2000, 4, CB::Mcg, {1, 4, 33, 100}, true); }});
    // The prefill path (cuda_exl3_prefill.cu: ≥ 17 rows of a linear, ≥ 8 routed rows per used expert, K = 2..6)
    // is the default for the prefill-sized cases; these run them again on the staged kernels (exl3SetPrefillPath(0)),
    // and under a scratch budget of 1 MiB, where its rows are split into several groups (of tokens for a linear,
    // of experts in ascending order for the MoE).
    auto staged = [](auto fn) { return tuned<exl3SetPrefillPath>(0, fn); };
    auto smallBudget = [](auto fn) { return tuned<exl3SetPrefillBudgetMiB>(1, fn); };
    // A GB10 (sm_121) gives a block 99 KiB of shared memory: the plans made for it (16-row jobs at K ≤ 2, one
    // stage per unit where two would not fit) run on any device under exl3SetSmemLimitKiB(99).
    auto gb10 = [](auto fn) { return tuned<exl3SetSmemLimitKiB>(99, fn); };
    // On the staged kernels, which these cases are about (at 100 rows the prefill path, whose blocks fit 99 KiB too,
    // would take the call); the MoE case at the end runs both.
    out.push_back({kFamily, "linear glm gate 4096→2048 K=2 mul1, 99 KiB plans", gb10(staged([](Context& c) {
                       return linearCase(c, "glm", 4096, 2048, 2, CB::Mul1, {1, 33, 100}, false);
                   }))});
    out.push_back({kFamily, "linear glm gate 4096→2048 K=3 mcg, 99 KiB plans", gb10(staged([](Context& c) {
                       return linearCase(c, "glm", 4096, 2048, 3, CB::Mcg, {16, 100}, false);
                   }))});
    out.push_back({kFamily, "linear glm unpadded 4000→2000 K=4 mcg bias, staged prefill", staged([](Context& c) {
                       return linearCase(c, "unpadded", 4000, 2000, 4, CB::Mcg, {100}, true);
                   })});
    out.push_back({kFamily, "linear prefill 1024→512 K=4 mul1, 1 MiB groups", smallBudget([](Context& c) {
                       return linearCase(c, "prefill", 1024, 512, 4, CB::Mul1, {300}, false);
                   })});
    for (CB cb : cbs)
        out.push_back({kFamily, std::string("linear prefill 1024→640 K=5 ") + cbName(cb), [cb](Context& c) {
                           return linearCase(c, "prefill", 1024, 640, 5, cb, {64, 129}, false);
                       }});
    // The prefill GEMM cuts k into splits when its output tiles are too few for a wave of blocks (all the small prefill
    // cases above: at most a few dozen tiles); the same cases with one block per tile.
    auto noSplit = [](auto fn) { return tuned<exl3SetPrefillMaxSplit>(1, fn); };
    out.push_back({kFamily, "linear glm unpadded 4000→2000 K=4 mcg bias, prefill without split-K", noSplit([](Context& c) {
                       return linearCase(c, "unpadded", 4000, 2000, 4, CB::Mcg, {33, 100}, true);
                   })});
    out.push_back({kFamily, "linear prefill 1024→640 K=5 3inst, without split-K", noSplit([](Context& c) {
                       return linearCase(c, "prefill", 1024, 640, 5, CB::Inst3, {64, 129}, false);
                   })});
    // The cuBLAS route (cuda_exl3_dequant.cu: the weights dequantised once per call, each row's hi + lo planes in one
    // GEMM of depth 2k), taken from prefillCublasRows() rows: forced here from any row count, at every K and codebook,
    // on padded columns with a bias and on rows grouped under a 1 MiB budget; and the same shapes on the GEMM kernel at
    // row counts the route would take by default (onCublasRoute checks which route ran).
    auto cublasRoute = [](auto fn) { return onCublasRoute(true, fn); };
    auto gemmKernel = [](auto fn) { return onCublasRoute(false, fn); };
    for (CB cb : {CB::Mul1, CB::Mcg})
        out.push_back({kFamily, std::string("linear glm 4096→12288 K=4 ") + cbName(cb) + ", cuBLAS route",
                       cublasRoute([cb](Context& c) { return linearCase(c, "glm", 4096, 12288, 4, cb, {40, 300}, false); })});
    out.push_back({kFamily, "linear glm unpadded 4000→2000 K=4 mcg bias, cuBLAS route", cublasRoute([](Context& c) {
                       return linearCase(c, "unpadded", 4000, 2000, 4, CB::Mcg, {40, 100}, true);
                   })});
    {
        const CB cbOf[] = {CB::Inst3, CB::Mul1, CB::Mcg, CB::Inst3};
        const int bitsOf[] = {2, 3, 5, 6};
        for (int i = 0; i < 4; ++i) {
            const int bits = bitsOf[i];
            const CB cb = cbOf[i];
            out.push_back({kFamily, "linear prefill 1024→640 K=" + str(bits) + " " + cbName(cb) + ", cuBLAS route",
                           cublasRoute([bits, cb](Context& c) {
                               return linearCase(c, "prefill", 1024, 640, bits, cb, {64, 129}, false);
                           })});
        }
    }
    out.push_back({kFamily, "linear prefill 1024→512 K=4 mul1, 1 MiB groups, cuBLAS route",
                   cublasRoute(smallBudget([](Context& c) { return linearCase(c, "prefill", 1024, 512, 4, CB::Mul1, {300}, false); }))});
    out.push_back({kFamily, "linear prefill 1024→512 K=4 mul1, 1 MiB groups, GEMM kernel",
                   gemmKernel(smallBudget([](Context& c) { return linearCase(c, "prefill", 1024, 512, 4, CB::Mul1, {300}, false); }))});
    out.push_back({kFamily, "linear prefill 1024→640 K=5 mcg, GEMM kernel", gemmKernel([](Context& c) {
                       return linearCase(c, "prefill", 1024, 640, 5, CB::Mcg, {129, 200}, false);
                   })});
    // Verify-sized linears: 12 and 16 rows stream as 16-row jobs (13–16-row jobs since the split-K bound lets them);
    // 24 rows take the prefill path (from 17 rows; a split-K GEMM), and on the staged kernels a 16-row job and an 8-row one.
    out.push_back({kFamily, "linear glm 4096→12288 K=4 mcg, verify rows", [](Context& c) {
                       return linearCase(c, "glm", 4096, 12288, 4, CB::Mcg, {12, 16, 24}, false);
                   }});
    out.push_back({kFamily, "linear glm 4096→12288 K=4 mcg, verify rows, staged", staged([](Context& c) {
                       return linearCase(c, "glm", 4096, 12288, 4, CB::Mcg, {24}, false);
                   })});
    // A last GEMM block of 16 and of 28 rows: blocks of at most 32 rows give each warp one tile of columns (the
    // narrow warp split of cuda_exl3_prefill.cu), with one and two row groups.
    out.push_back({kFamily, "linear prefill 1024→512 K=4 mcg, short last block", [](Context& c) {
                       return linearCase(c, "prefill", 1024, 512, 4, CB::Mcg, {80, 92}, false);
                   }});

    // Fused MoE.
    const MoeShape moes[] = {
        // label, T, D, I, E, topk, distinct, K gate/up, K down, codebook, limit, mixedK, pool
        {"moe small", 1, 256, 384, 16, 4, 16, 4, 4, CB::Mul1, 0.0f, false, 16},
        {"moe small", 4, 256, 384, 16, 4, 16, 3, 5, CB::Mcg, 0.5f, false, 16},
        {"moe small", 33, 256, 384, 16, 4, 16, 4, 4, CB::Inst3, 0.0f, false, 16},
        {"moe shared", 40, 200, 300, 8, 4, 8, 2, 6, CB::Mul1, 0.3f, false, 6},  // > 16 tokens per expert
        {"moe prefill", 70, 256, 384, 8, 4, 8, 4, 3, CB::Mcg, 0.0f, false, 4, false, true},  // 64-row jobs (+ a short one)
        {"moe mixed-K", 4, 256, 256, 8, 2, 4, 4, 4, CB::Mcg, 0.0f, true, 8},
        {"moe glm", 1, 4096, 2048, 288, 8, 16, 4, 4, CB::Mul1, 10.0f, false, 288},
        {"moe glm", 4, 4096, 2048, 288, 8, 16, 4, 4, CB::Mcg, 10.0f, false, 288},
        // Gate/up and down with one K and codebook: the one-launch kernel (the cases above with two Ks take
        // the two-launch version). Top-8 of 288 drawn from a pool of 12 (each used expert serves many
        // tokens, most of the 288 none) at batch 1/4/8/16; more than 256 pairs (the combine as units of
        // the launch); ~67 tokens per expert (64-row jobs + short ones, with the combine units).
        {"moe 1-launch", 1, 256, 384, 288, 8, 16, 4, 4, CB::Mcg, 0.0f, false, 288},
        {"moe 1-launch dup", 4, 256, 384, 288, 8, 16, 4, 4, CB::Mul1, 0.5f, false, 12},
        {"moe 1-launch dup", 8, 256, 384, 288, 8, 16, 3, 3, CB::Mul1, 0.0f, false, 12},
        {"moe 1-launch dup", 16, 256, 384, 288, 8, 16, 5, 5, CB::Inst3, 0.0f, false, 12},
        {"moe 1-launch combine", 64, 256, 256, 288, 8, 16, 2, 2, CB::Mcg, 0.0f, false, 24},
        {"moe 1-launch prefill", 100, 200, 300, 16, 4, 16, 6, 6, CB::Mul1, 0.3f, false, 6, false, true},
        // Device-routed work list (decode sizes): a token naming an expert twice (16 of 12 experts' rows
        // exceed T: extra jobs) and an out-of-range id; the two-K cases above check that it declines.
        {"moe odd ids", 4, 256, 384, 288, 8, 16, 4, 4, CB::Mcg, 0.0f, false, 12, true},
        {"moe odd ids", 16, 256, 384, 288, 8, 16, 3, 3, CB::Mul1, 0.5f, false, 12, true},
    };
    // The shapes not prefill-sized are about the decode-sized kernels (the one-launch MoE, its combine units, the
    // device-routed list): from 8 routed rows per expert a host-routed step would take the prefill path, so they
    // keep it off (the prefill path's own small-rows cases follow below).
    for (const MoeShape& s : moes) {
        out.push_back({kFamily, std::string(s.label) + " T=" + str(s.T), [s](Context& c) {
                           const TuneOverride<exl3SetPrefillMoeMinRows> rows(s.prefillSized ? -1 : 4096);
                           return moeCase(c, s);
                       }});
    }
    // Decode-sized steps take jobs of ≤ 8 rows (exl3SetMoeJobRows): the pool-of-12 cases above give experts of ~10
    // rows, hence split jobs, host and device routed. The 16-row form of the same steps, as before that default:
    for (const MoeShape& s : moes) {
        if (s.prefillSized || s.T <= 8 || s.poolE > 12) continue;
        out.push_back({kFamily, std::string(s.label) + " T=" + str(s.T) + ", 16-row jobs", [s](Context& c) {
                           const TuneOverride<exl3SetPrefillMoeMinRows> rows(4096);
                           const TuneOverride<exl3SetMoeJobRows> jobRows(16);
                           return moeCase(c, s);
                       }});
    }
    // Prefill-sized MoE steps on the staged kernels, and the prefill path's expert groups under a 1 MiB budget.
    const MoeShape pfMoe = {"moe prefill top-8", 64, 512, 256, 32, 8, 32, 4, 4, CB::Mul1, 10.0f, false, 8};
    out.push_back({kFamily, std::string(pfMoe.label) + " T=64", [pfMoe](Context& c) { return moeCase(c, pfMoe); }});
    out.push_back({kFamily, std::string(pfMoe.label) + " T=64, without split-K", [pfMoe](Context& c) {
                       const TuneOverride<exl3SetPrefillMaxSplit> one(1);
                       return moeCase(c, pfMoe);
                   }});
    out.push_back({kFamily, std::string(pfMoe.label) + " T=64, 1 MiB groups",
                   smallBudget([pfMoe](Context& c) { return moeCase(c, pfMoe); })});
    for (const MoeShape& s : moes)
        if (s.prefillSized)
            out.push_back({kFamily, std::string(s.label) + " T=" + str(s.T) + ", staged prefill",
                           staged([s](Context& c) { return moeCase(c, s); })});
    // ~28 rows per expert (the engine's 1,024-token prefill chunk at GLM-5.3-Flash's 288 experts, top-8): the
    // prefill path whatever TS_EXL3_PF_MOE_ROWS says, every block at most 32 rows (the narrow warp split).
    const MoeShape chunkMoe = {"moe chunk-sized", 56, 512, 256, 16, 8, 16, 4, 4, CB::Mul1, 10.0f, false, 16};
    out.push_back({kFamily, std::string(chunkMoe.label) + " T=56, prefill path", [chunkMoe](Context& c) {
                       const TuneOverride<exl3SetPrefillMoeMinRows> anyRows(0);
                       return moeCase(c, chunkMoe);
                   }});
    // ~70 tokens per expert at K = 2 under a GB10's 99 KiB: 16-row jobs instead of 64 (see above).
    const MoeShape gb10Moe = {"moe prefill K=2, 99 KiB plans", 70, 256, 384, 8, 4, 8, 2, 2, CB::Mcg, 0.0f, false, 4};
    out.push_back({kFamily, std::string(gb10Moe.label) + " T=70",
                   gb10(staged([gb10Moe](Context& c) { return moeCase(c, gb10Moe); }))});
    out.push_back({kFamily, std::string(gb10Moe.label) + " T=70, prefill path",
                   gb10([gb10Moe](Context& c) { return moeCase(c, gb10Moe); })});
    // About the decode-sized kernels' launch variants: the prefill path stays off (its ≥ 8 rows per expert would take
    // the 64- and 100-token steps, and it launches neither variant).
    out.push_back({kFamily, "moe 1 vs 2 launches, back to back", [](Context& c) {
                       const TuneOverride<exl3SetPrefillMoeMinRows> rows(4096);
                       return moeLaunchesCase(c);
                   }});
}

}  // namespace ts::selftest
