// `bench-device --what exl3`: EXL3 decode at GLM-5.3-Flash's widths (issue 6, benchmark 1), as achieved
// bandwidth = packed trellis bytes read / time, over the device-to-device copy bandwidth (read + write)
// measured in the same run.
// (a) one routed-expert MoE layer through Backend::moeExpertsFused: 288 experts with gate/up 4096→2048 and
//     down 2048→4096 at 4 bpw, top-8 routing, batch 1 and 4, in MUL1 (the codebook of current conversions)
//     and on CUDA also in MCG (the codebook of the recipe's checkpoint, REQUIREMENTS.md).
//     Bytes = the packed bytes of the distinct experts a call reads (8 × 12.6 MB ≈ 100 MB at batch 1).
//     Timed twice on CUDA: the fused MoE in one launch per layer (the default) and in the earlier two
//     (exl3MoeSetLaunches, kernels/exl3_tune.h); the table has a line each with its launch count, the JSON
//     row the default's figures plus launches and two_launch_{launches, us, fraction_of_copy}.
// (a') the same layer routed on the device (moeExpertsFusedDevice, the engine's decode path) at batch 1, 4, 8 and 16,
//     MUL1; at 16 also with the 16-row jobs of before (exl3SetMoeJobRows).
// (b) one large GEMV 4096→12288 through Backend::linear on a packed view, K = 2..6 × each codebook,
//     batch 1 and 4 (25 MB at K = 4); at K = 4 MUL1 also 8, 12, 16 and 24 rows (verify and larger decode batches).
// Every call reads weights that are not in L2 (50 MB on an H200): the GEMV cycles over enough copies of the
// matrix to span ≥ 256 MiB, and each MoE call draws a fresh routing (288 experts = 3.6 GB) — except one
// extra row, the K = 4 MUL1 GEMV at batch 1 on a single copy that L2 holds (marked l2_resident): the
// decoder's speed when HBM is not what it waits for, its ceiling on this device. Method: warm-up,
// then the median over `reps` of a timed batch of calls closed by backend.synchronize() (bench_cuda.h);
// the time per call includes the host's per-call work (for the MoE: routing tables, one copy, launches).
// With parts.trace (--what exl3-trace) the K = 4 MUL1 rows are followed by a phase trace of one launch
// (bench_cuda_exl3_trace.cpp), in "traces"; (a') at batch 1 and 4 too, with its plan kernel's start and end.
// Weights are random trellis bits (a valid EXL3 code for any bits) with random ±scales. Only the Backend
// interface is used: it builds everywhere; on a non-CUDA backend only K = 4 MUL1 batch 1 runs (slowly).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cli/bench_cuda.h"
#include "exl3_tune.h"
#include "quant/exl3_linear.h"

namespace ts::cli {

namespace {

std::string cbName(Exl3Codebook cb) { return std::string(exl3CodebookName(cb)); }

constexpr int64_t kHidden = 4096, kInter = 2048, kExperts = 288, kTopk = 8, kWideOut = 12288;
constexpr size_t kSpanBytes = size_t(256) << 20;  // ≥ 5× the H200's L2

// Random bytes (xorshift64*: fast enough for hundreds of MB).
std::vector<uint8_t> randomBytes(size_t n, uint64_t seed) {
    std::vector<uint8_t> v(n);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i += 8) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        const uint64_t r = s * 0x2545F4914F6CDD1Dull;
        for (size_t b = 0; b < 8 && i + b < n; ++b) v[i + b] = uint8_t(r >> (8 * b));
    }
    return v;
}

// Owns the host trellis bytes that packed linears point into (shared between copies: the device keeps
// one upload per PackedLinear object, so copies still occupy distinct device memory).
struct Weights {
    std::vector<std::unique_ptr<std::vector<uint8_t>>> bytes;
    std::vector<std::unique_ptr<Exl3PackedLinear>> linears;  // alive for the whole benchmark: the backend's
                                                             // upload cache is keyed by their addresses
    const uint8_t* newBytes(size_t n, uint64_t seed) {
        bytes.push_back(std::make_unique<std::vector<uint8_t>>(randomBytes(n, seed)));
        return bytes.back()->data();
    }
    const Exl3PackedLinear* make(const uint8_t* trellis, int64_t in, int64_t out, int bits, Exl3Codebook cb,
                                 std::mt19937& rng) {
        Exl3Linear w;
        w.prefix = "bench";
        w.k = in;  // multiples of 128 here
        w.n = out;
        w.bits = bits;
        w.codebook = cb;
        w.trellis = trellis;
        std::uniform_real_distribution<float> mag(0.5f, 1.5f);
        std::bernoulli_distribution sign(0.5);
        for (int64_t i = 0; i < in; ++i) w.suh.push_back(sign(rng) ? -mag(rng) : mag(rng));
        const float sv = 1.0f / std::sqrt(float(in));
        for (int64_t j = 0; j < out; ++j) w.svh.push_back((sign(rng) ? -mag(rng) : mag(rng)) * sv);
        linears.push_back(std::make_unique<Exl3PackedLinear>(std::move(w), in, out));
        return linears.back().get();
    }
};

// The routed experts of one layer at GLM-5.3-Flash's widths: 8 host bit patterns per projection, shared round-robin
// by the 288 experts (each expert is its own object, hence its own device copy).
struct Experts {
    std::vector<WeightView> gate, up, down;
    size_t bytesPerExpert = 0;
};
Experts makeExperts(Weights& store, Exl3Codebook cb, int bits, std::mt19937& rng) {
    const size_t guBytes = size_t(kHidden * kInter * bits / 8), dBytes = guBytes;
    std::vector<const uint8_t*> hg, hu, hd;
    for (int i = 0; i < 8; ++i) {
        hg.push_back(store.newBytes(guBytes, 100 + uint64_t(i)));
        hu.push_back(store.newBytes(guBytes, 200 + uint64_t(i)));
        hd.push_back(store.newBytes(dBytes, 300 + uint64_t(i)));
    }
    Experts ex;
    for (int64_t e = 0; e < kExperts; ++e) {
        ex.gate.push_back(WeightView::of(*store.make(hg[size_t(e % 8)], kHidden, kInter, bits, cb, rng)));
        ex.up.push_back(WeightView::of(*store.make(hu[size_t(e % 8)], kHidden, kInter, bits, cb, rng)));
        ex.down.push_back(WeightView::of(*store.make(hd[size_t(e % 8)], kInter, kHidden, bits, cb, rng)));
    }
    ex.bytesPerExpert = 2 * guBytes + dBytes;
    return ex;
}

// T tokens' top-k choices: distinct experts per token, uniform.
std::vector<int32_t> randomRouting(int64_t T, std::mt19937& rng) {
    std::vector<int32_t> r, pool(kExperts);
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t e = 0; e < kExperts; ++e) pool[size_t(e)] = int32_t(e);
        for (int64_t k = 0; k < kTopk; ++k) {
            std::uniform_int_distribution<int64_t> pick(k, kExperts - 1);
            std::swap(pool[size_t(k)], pool[size_t(pick(rng))]);
            r.push_back(pool[size_t(k)]);
        }
    }
    return r;
}

Buffer randomBuffer(Backend& backend, size_t n, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return backend.upload(v.data(), n * 4);
}

}  // namespace

nlohmann::json benchExl3Cuda(Backend& backend, int reps, const Exl3BenchParts& parts) {
    const bool device = backend.name() == "cuda";
    const double copyBw = measureCopyBandwidth(backend, reps);
    const std::string unit = device ? exl3DecodeUnit() : "cpu";
    std::printf("EXL3 decode: packed bytes / time vs device-to-device copy %.1f GB/s (read + write); decode unit: %s\n",
                copyBw / 1e9, unit.c_str());
    nlohmann::json rows = nlohmann::json::array(), traceRows = nlohmann::json::array();
    std::mt19937 rng(7);
    Weights store;

    // (a) the routed-expert MoE layer ---------------------------------------------------------------------
    // MUL1 (current conversions' default) and MCG (the codebook of the recipe's checkpoint, REQUIREMENTS.md);
    // a host backend times MUL1 only.
    for (const Exl3Codebook cb : {Exl3Codebook::Mul1, Exl3Codebook::Mcg}) {
        if (!parts.moe || (!device && cb != Exl3Codebook::Mul1)) break;
        const int bits = 4;
        const Experts ex = makeExperts(store, cb, bits, rng);
        const std::vector<WeightView>&gv = ex.gate, &uv = ex.up, &dv = ex.down;
        const size_t expertBytes = ex.bytesPerExpert;
        std::printf("\n(a) routed MoE layer: %lld experts, top-%lld, %lld -> %lld -> %lld at K=%d %s (%.1f MB per expert)\n",
                    static_cast<long long>(kExperts), static_cast<long long>(kTopk), static_cast<long long>(kHidden),
                    static_cast<long long>(kInter), static_cast<long long>(kHidden), bits, cbName(cb).c_str(), double(expertBytes) / 1e6);
        std::printf("%6s %8s %10s %12s %10s %10s %8s\n", "batch", "launches", "experts", "MB/call", "us/call", "GB/s",
                    "of copy");
        for (int64_t T : {int64_t(1), int64_t(4)}) {
            if (!device && T > 1) continue;
            // A list of routings (distinct experts per token), cycled so no call repeats the previous one's.
            const int nRoutings = 64;
            std::vector<std::vector<int32_t>> idx(nRoutings);
            std::vector<float> wt(size_t(T * kTopk), 0.125f);
            double distinct = 0;
            for (auto& r : idx) {
                r = randomRouting(T, rng);
                distinct += double(std::set<int32_t>(r.begin(), r.end()).size());
            }
            distinct /= nRoutings;
            const Buffer x = randomBuffer(backend, size_t(T * kHidden), rng);
            const Buffer y = backend.alloc(size_t(T * kHidden) * 4);
            // Upload every expert once (first use), outside the timing.
            for (int64_t e = 0; e < kExperts; e += kTopk) {
                std::vector<int32_t> one;
                for (int64_t k = 0; k < kTopk; ++k) one.push_back(int32_t((e + k) % kExperts));
                if (!device) break;
                backend.moeExpertsFused(x, 1, kHidden, kInter, one.data(), wt.data(), kTopk, gv.data(), uv.data(),
                                        dv.data(), kExperts, 10.0f, y);
            }
            backend.synchronize();
            // Both variants of the CUDA backend's fused MoE on the same routings: one launch per layer (the
            // default) and the earlier two (exl3_tune.h); the row reports the default, the other as two_launch_*.
            struct Variant {
                double s = 0;
                int launches = 0;
                bool fused = true;
            } var[2];
            const int nVar = device ? 2 : 1;  // one timing on a host backend (it has no fused path anyway)
            const int prevOverride = exl3MoeSetLaunches(0);
            for (int v = 0; v < nVar; ++v) {
                exl3MoeSetLaunches(v + 1);
                int call = 0;
                Variant& r = var[v];
                auto fn = [&] {
                    const std::vector<int32_t>& ro = idx[size_t(call++ % nRoutings)];
                    r.fused = backend.moeExpertsFused(x, T, kHidden, kInter, ro.data(), wt.data(), kTopk, gv.data(),
                                                      uv.data(), dv.data(), kExperts, 10.0f, y) && r.fused;
                };
                r.s = medianSeconds(backend, device ? reps : 1, device ? nRoutings : 1, fn);
                r.launches = exl3MoeLastLaunches();
            }
            exl3MoeSetLaunches(prevOverride);
            if (!var[0].fused) {
                std::printf("%6lld  (backend %s has no fused MoE path: skipped)\n", static_cast<long long>(T),
                            backend.name().c_str());
                rows.push_back({{"bench", "exl3_moe"}, {"batch", T}, {"fused", false}});
                continue;
            }
            const double bytes = distinct * double(expertBytes);
            for (int v = 0; v < nVar; ++v) {
                const double bw = bytes / var[v].s;
                std::printf("%6lld %8d %10.1f %12.1f %10.1f %10.1f %7.1f%%\n", static_cast<long long>(T), var[v].launches,
                            distinct, bytes / 1e6, var[v].s * 1e6, bw / 1e9, 100.0 * bw / copyBw);
            }
            if (parts.trace && cb == Exl3Codebook::Mul1) {
                exl3MoeSetLaunches(1);
                int call = 0;
                traceRows.push_back(traceExl3Calls(
                    backend, "the MoE layer at batch " + std::to_string(T) + " (one launch)",
                    [&] {
                        const std::vector<int32_t>& ro = idx[size_t(call++ % nRoutings)];
                        backend.moeExpertsFused(x, T, kHidden, kInter, ro.data(), wt.data(), kTopk, gv.data(), uv.data(),
                                                dv.data(), kExperts, 10.0f, y);
                    },
                    var[0].s, reps));
                exl3MoeSetLaunches(prevOverride);
            }
            const double bw = bytes / var[0].s;
            nlohmann::json row = {{"bench", "exl3_moe"}, {"batch", T}, {"bits", bits}, {"codebook", cbName(cb)},
                                  {"experts_read", distinct}, {"packed_MB", bytes / 1e6}, {"launches", var[0].launches},
                                  {"us", var[0].s * 1e6}, {"GBps", bw / 1e9}, {"fraction_of_copy", bw / copyBw}};
            if (nVar > 1) {
                row["two_launch_launches"] = var[1].launches;
                row["two_launch_us"] = var[1].s * 1e6;
                row["two_launch_fraction_of_copy"] = bytes / var[1].s / copyBw;
            }
            rows.push_back(row);
        }
        // (a') the same layer with its routing read from device buffers (moeExpertsFusedDevice: the engine's decode
        // path, its work list built by a kernel, planned for the most pairs a step of T tokens can have) at the
        // decode and verify sizes it takes (T <= 16): 8-row jobs (the default) and, where T > 8 makes them differ,
        // the 16-row jobs before it (exl3SetMoeJobRows).
        if (device && cb == Exl3Codebook::Mul1) {
            std::printf("(a') routed on the device (the engine's decode path)\n%6s %8s %10s %12s %10s %10s %8s\n", "batch",
                        "job rows", "experts", "MB/call", "us/call", "GB/s", "of copy");
            for (const int64_t T : {int64_t(1), int64_t(4), int64_t(8), int64_t(16)}) {
                const int nRoutings = 64;
                std::vector<Buffer> ib, wb;
                const std::vector<float> wt(size_t(T * kTopk), 0.125f);
                double distinct = 0;
                for (int i = 0; i < nRoutings; ++i) {
                    const std::vector<int32_t> r = randomRouting(T, rng);
                    distinct += double(std::set<int32_t>(r.begin(), r.end()).size());
                    ib.push_back(backend.upload(r.data(), r.size() * 4));
                    wb.push_back(backend.upload(wt.data(), wt.size() * 4));
                }
                distinct /= nRoutings;
                const Buffer x = randomBuffer(backend, size_t(T * kHidden), rng);
                const Buffer y = backend.alloc(size_t(T * kHidden) * 4);
                for (const int jobRows : {8, 16}) {
                    if (jobRows == 16 && T <= 8) continue;
                    const OverrideScope<exl3SetMoeJobRows> rowsScope(jobRows);
                    int call = 0;
                    bool fused = true;
                    auto fn = [&] {
                        const size_t i = size_t(call++ % nRoutings);
                        fused = backend.moeExpertsFusedDevice(x, T, kHidden, kInter, ib[i], wb[i], kTopk, gv.data(), uv.data(),
                                                              dv.data(), kExperts, 10.0f, y) && fused;
                    };
                    const double sec = medianSeconds(backend, reps, nRoutings, fn);
                    if (!fused) {
                        std::printf("%6lld  (no device-routed path for these weights: skipped)\n", static_cast<long long>(T));
                        break;
                    }
                    const double bytes = distinct * double(expertBytes), bw = bytes / sec;
                    std::printf("%6lld %8d %10.1f %12.1f %10.1f %10.1f %7.1f%%\n", static_cast<long long>(T), jobRows, distinct,
                                bytes / 1e6, sec * 1e6, bw / 1e9, 100.0 * bw / copyBw);
                    rows.push_back({{"bench", "exl3_moe_routed"}, {"batch", T}, {"bits", bits}, {"codebook", cbName(cb)},
                                    {"job_rows", jobRows}, {"experts_read", distinct}, {"packed_MB", bytes / 1e6},
                                    {"us", sec * 1e6}, {"GBps", bw / 1e9}, {"fraction_of_copy", bw / copyBw}});
                    // The engine's path traced (its plan kernel's record included) beside (a)'s trace above.
                    if (parts.trace && jobRows == 8 && T <= 4)
                        traceRows.push_back(traceExl3Calls(backend, "the MoE layer routed on the device at batch " + std::to_string(T),
                                                           fn, sec, reps));
                }
            }
        }
    }

    // (c) prefill sizes ------------------------------------------------------------------------------------
    // The MoE layer with every token of a prompt routed at once (at 4,096 tokens all 288 experts are in use, ~114
    // tokens each) and the GEMV's matrix as a GEMM: compute-bound work, so the figure is TFLOP/s (2 per
    // multiply-add of the model's product; the kernels' own hi/lo activation pieces not counted) and µs per token.
    if (parts.prefill && device) {
        const int bits = 4, pReps = std::max(3, reps / 4);
        std::printf("\n(c) prefill sizes at K=%d: the routed MoE layer (%lld experts, top-%lld) and the GEMM %lld -> %lld; "
                    "TFLOP/s of the model's products, median of %d calls\n",
                    bits, static_cast<long long>(kExperts), static_cast<long long>(kTopk), static_cast<long long>(kHidden),
                    static_cast<long long>(kWideOut), pReps);
        std::printf("%-10s %6s %6s %8s %8s %10s %10s %9s\n", "what", "cb", "tokens", "rows/mat", "max rows", "ms/call",
                    "us/token", "TFLOP/s");
        // Each row twice: the prefill path (cuda_exl3_prefill.cu, at any rows, whatever TS_EXL3_PF_MOE_ROWS and
        // TS_EXL3_PF_LINEAR_ROWS would choose) and the staged kernels it replaces (up to 16 rows a job: the decode
        // kernels). The rows per used expert of each MoE size are printed: the thresholds come from these rows.
        // [0] the prefill path on its GEMM kernel (splits: the split-K its launches took), [1] the staged kernels,
        // [2] extra: the staged kernels with the 16-row decode-sized MoE jobs used before 8 became the default
        // (exl3SetMoeJobRows; MoE steps of ≤ 384 tokens), or the prefill path without split-K
        // (exl3SetPrefillMaxSplit(1); GEMMs of ≤ 1,024 rows), [3] a linear's cuBLAS route (cuda_exl3_dequant.cu: the
        // weights dequantised in each call, which the time includes); < 0: not timed.
        enum Extra { kNoExtra, kMoeRows16, kNoSplit };
        struct Times {
            double t[4] = {-1, -1, -1, -1};
            Extra extra = kNoExtra;
            int splits = 0;
        };
        auto timed = [&](const std::function<void()>& fn, Extra extra, bool cublas) {
            Times s;
            s.extra = extra;
            {
                const OverrideScope<exl3SetPrefillPath> on(1);
                const OverrideScope<exl3SetPrefillMoeMinRows> anyRows(0);
                const OverrideScope<exl3SetPrefillLinearMinRows> anyLinearRows(1);
                {
                    const OverrideScope<exl3SetPrefillCublasRows> gemmKernel(4097);
                    s.t[0] = medianSeconds(backend, pReps, 1, fn);
                    s.splits = exl3PrefillLastSplits();
                    if (extra == kNoSplit) {
                        const OverrideScope<exl3SetPrefillMaxSplit> noSplit(1);
                        s.t[2] = medianSeconds(backend, pReps, 1, fn);
                    }
                }
                if (cublas) {
                    const OverrideScope<exl3SetPrefillCublasRows> anyCublasRows(0);
                    s.t[3] = medianSeconds(backend, pReps, 1, fn);
                }
            }
            const OverrideScope<exl3SetPrefillPath> off(0);
            s.t[1] = medianSeconds(backend, pReps, 1, fn);
            if (extra == kMoeRows16) {
                const OverrideScope<exl3SetMoeJobRows> jobRows(16);
                s.t[2] = medianSeconds(backend, pReps, 1, fn);
            }
            return s;
        };
        // rowsPer: the rows per matrix (a GEMM's tokens; the MoE's routed rows per used expert); maxRows: the most
        // rows of one matrix (the MoE's busiest expert; a GEMM's tokens).
        auto line = [&](const char* what, Exl3Codebook cb, int64_t T, double rowsPer, int64_t maxRows, const Times& s,
                        double flops) {
            const std::string prefillLabel = "prefill path (split-K " + std::to_string(s.splits) + ")";
            const char* const path[4] = {"prefill", "staged", s.extra == kMoeRows16 ? "staged_rows16" : "prefill_no_split",
                                         "prefill_cublas"};
            const char* const label[4] = {prefillLabel.c_str(), "staged kernels",
                                          s.extra == kMoeRows16 ? "staged kernels, 16-row MoE jobs" : "prefill path, no split-K",
                                          "prefill path, cuBLAS route (dequantise + GEMM)"};
            for (int v = 0; v < 4; ++v) {
                const double t = s.t[v];
                if (t < 0) continue;
                std::printf("%-10s %6s %6lld %8.1f %8lld %10.3f %10.2f %9.1f  %s\n", what, cbName(cb).c_str(),
                            static_cast<long long>(T), rowsPer, static_cast<long long>(maxRows), t * 1e3,
                            t * 1e6 / double(T), flops / t / 1e12, label[v]);
                nlohmann::json row = {{"bench", std::string("exl3_prefill_") + what}, {"bits", bits},
                                      {"codebook", cbName(cb)}, {"tokens", T}, {"rows_per_matrix", rowsPer},
                                      {"max_rows", maxRows}, {"path", path[v]}, {"ms", t * 1e3},
                                      {"us_per_token", t * 1e6 / double(T)}, {"TFLOPs", flops / t / 1e12}};
                if (v == 0) row["splits"] = s.splits;
                rows.push_back(row);
            }
        };
        for (const Exl3Codebook cb : {Exl3Codebook::Mul1, Exl3Codebook::Mcg}) {
            const Experts ex = makeExperts(store, cb, bits, rng);
            // 1,024 tokens: the engine's prefill chunk (MAX_NUM_BATCHED_TOKENS), ~28 rows per expert.
            for (const int64_t T : {int64_t(64), int64_t(96), int64_t(128), int64_t(160), int64_t(192), int64_t(224),
                                    int64_t(256), int64_t(320), int64_t(384), int64_t(512), int64_t(1024), int64_t(2048),
                                    int64_t(4096)}) {
                if (cb == Exl3Codebook::Mcg && T != 1024 && T != 4096) continue;
                const std::vector<int32_t> ro = randomRouting(T, rng);
                const std::vector<float> wt(size_t(T * kTopk), 0.125f);
                const Buffer x = randomBuffer(backend, size_t(T * kHidden), rng);
                const Buffer y = backend.alloc(size_t(T * kHidden) * 4);
                bool fused = true;
                auto fn = [&] {
                    fused = backend.moeExpertsFused(x, T, kHidden, kInter, ro.data(), wt.data(), kTopk, ex.gate.data(),
                                                    ex.up.data(), ex.down.data(), kExperts, 10.0f, y) && fused;
                };
                const auto s = timed(fn, T <= 384 ? kMoeRows16 : kNoExtra, false);
                if (!fused) continue;
                std::vector<int64_t> per(size_t(kExperts), 0);
                for (const int32_t e : ro) ++per[size_t(e)];
                const double nUsed = double(kExperts - std::count(per.begin(), per.end(), int64_t(0)));
                line("moe", cb, T, double(T * kTopk) / nUsed, *std::max_element(per.begin(), per.end()), s,
                     2.0 * double(T * kTopk) * 3.0 * double(kHidden * kInter));
            }
        }
        const size_t bytes = size_t(kHidden * kWideOut * bits / 8);
        const WeightView w = WeightView::of(*store.make(store.newBytes(bytes, 2000), kHidden, kWideOut, bits,
                                                        Exl3Codebook::Mul1, rng));
        for (const int64_t T : {int64_t(16), int64_t(17), int64_t(24), int64_t(28), int64_t(32), int64_t(48), int64_t(64),
                                int64_t(96), int64_t(128), int64_t(192), int64_t(256), int64_t(512), int64_t(1024),
                                int64_t(2048), int64_t(4096)}) {
            const Buffer x = randomBuffer(backend, size_t(T * kHidden), rng);
            const Buffer y = backend.alloc(size_t(T * kWideOut) * 4);
            const auto s = timed([&] { backend.linear(x, T, w, y); }, T <= 1024 ? kNoSplit : kNoExtra, T >= 24);
            line("gemm", Exl3Codebook::Mul1, T, double(T), T, s, 2.0 * double(T) * double(kHidden * kWideOut));
        }
    }

    // (b) the large GEMV ----------------------------------------------------------------------------------
    if (!parts.gemv)
        return {{"copy_bandwidth_GBps", copyBw / 1e9}, {"decode_unit", unit}, {"rows", rows}, {"traces", traceRows}};
    std::printf("\n(b) GEMV %lld -> %lld (Backend::linear on a packed view)\n", static_cast<long long>(kHidden),
                static_cast<long long>(kWideOut));
    std::printf("%4s %6s %6s %10s %8s %10s %10s %8s\n", "K", "cb", "batch", "MB/call", "copies", "us/call", "GB/s",
                "of copy");
    const Exl3Codebook cbs[3] = {Exl3Codebook::Inst3, Exl3Codebook::Mcg, Exl3Codebook::Mul1};
    for (int bits = 2; bits <= 6; ++bits) {
        if ((!device || parts.gemvK4Only) && bits != 4) continue;
        const size_t bytes = size_t(kHidden * kWideOut * bits / 8);
        const uint8_t* host = store.newBytes(bytes, 1000 + uint64_t(bits));
        const int copies = device ? int(std::max<size_t>(2, (kSpanBytes + bytes - 1) / bytes)) : 1;
        for (Exl3Codebook cb : cbs) {
            if (!device && cb != Exl3Codebook::Mul1) continue;
            std::vector<WeightView> w;
            for (int i = 0; i < copies; ++i) w.push_back(WeightView::of(*store.make(host, kHidden, kWideOut, bits, cb, rng)));
            for (int64_t T : {int64_t(1), int64_t(4)}) {
                if (!device && T > 1) continue;
                const Buffer x = randomBuffer(backend, size_t(T * kHidden), rng);
                const Buffer y = backend.alloc(size_t(T * kWideOut) * 4);
                int call = 0;
                auto fn = [&] { backend.linear(x, T, w[size_t(call++ % copies)], y); };
                const double s = medianSeconds(backend, device ? reps : 1, device ? 4 * copies : 1, fn);
                const double bw = double(bytes) / s;
                std::printf("%4d %6s %6lld %10.1f %8d %10.1f %10.1f %7.1f%%\n", bits, cbName(cb).c_str(), static_cast<long long>(T),
                            double(bytes) / 1e6, copies, s * 1e6, bw / 1e9, 100.0 * bw / copyBw);
                rows.push_back({{"bench", "exl3_gemv"}, {"in", kHidden}, {"out", kWideOut}, {"bits", bits},
                                {"codebook", cbName(cb)}, {"batch", T}, {"packed_MB", double(bytes) / 1e6}, {"us", s * 1e6},
                                {"GBps", bw / 1e9}, {"fraction_of_copy", bw / copyBw}});
                if (parts.trace && bits == 4 && cb == Exl3Codebook::Mul1)
                    traceRows.push_back(traceExl3Calls(backend, "the GEMV at batch " + std::to_string(T), fn, s, reps));
            }
            // Verify and larger decode batches (speculation's k + 1 = 8 rows per sequence; 2 sequences: 16), below the
            // prefill path's 32 rows, on the cycled copies.
            if (device && bits == 4 && cb == Exl3Codebook::Mul1) {
                for (const int64_t T : {int64_t(8), int64_t(12), int64_t(16), int64_t(24)}) {
                    const Buffer x = randomBuffer(backend, size_t(T * kHidden), rng);
                    const Buffer y = backend.alloc(size_t(T * kWideOut) * 4);
                    int call = 0;
                    auto fn = [&] { backend.linear(x, T, w[size_t(call++ % copies)], y); };
                    const double s = medianSeconds(backend, reps, 4 * copies, fn);
                    const double bw = double(bytes) / s;
                    std::printf("%4d %6s %6lld %10.1f %8d %10.1f %10.1f %7.1f%%\n", bits, cbName(cb).c_str(),
                                static_cast<long long>(T), double(bytes) / 1e6, copies, s * 1e6, bw / 1e9,
                                100.0 * bw / copyBw);
                    rows.push_back({{"bench", "exl3_gemv"}, {"in", kHidden}, {"out", kWideOut}, {"bits", bits},
                                    {"codebook", cbName(cb)}, {"batch", T}, {"packed_MB", double(bytes) / 1e6},
                                    {"us", s * 1e6}, {"GBps", bw / 1e9}, {"fraction_of_copy", bw / copyBw}});
                }
            }
            // The decoder's own ceiling: the same K = 4 MUL1 GEMV on one copy, which stays in L2 (25 MB of the
            // H200's 50 MB) from call to call — what the kernel reaches when HBM is not what it waits for.
            if (device && bits == 4 && cb == Exl3Codebook::Mul1 && bytes * 2 < size_t(50) << 20) {
                const Buffer x = randomBuffer(backend, size_t(kHidden), rng);
                const Buffer y = backend.alloc(size_t(kWideOut) * 4);
                auto fn = [&] { backend.linear(x, 1, w[0], y); };
                const double s = medianSeconds(backend, reps, 4 * copies, fn);
                const double bw = double(bytes) / s;
                std::printf("%4d %6s %6d %10.1f %8s %10.1f %10.1f %7.1f%%  (L2-resident: one copy, repeated)\n", bits,
                            cbName(cb).c_str(), 1, double(bytes) / 1e6, "1", s * 1e6, bw / 1e9, 100.0 * bw / copyBw);
                rows.push_back({{"bench", "exl3_gemv"}, {"in", kHidden}, {"out", kWideOut}, {"bits", bits},
                                {"codebook", cbName(cb)}, {"batch", 1}, {"packed_MB", double(bytes) / 1e6}, {"us", s * 1e6},
                                {"GBps", bw / 1e9}, {"fraction_of_copy", bw / copyBw}, {"l2_resident", true}});
            }
        }
    }
    return {{"copy_bandwidth_GBps", copyBw / 1e9}, {"decode_unit", unit}, {"rows", rows}, {"traces", traceRows}};
}

}  // namespace ts::cli
