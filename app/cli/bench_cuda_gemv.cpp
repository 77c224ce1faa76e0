// `bench-device --what gemv`: the dense GEMV (Backend::linear at T = 1, 2, 3, 4, 8 tokens, BF16 weights; and the GEMM
// at 16, 64, 256, 1,024 and 4,096 tokens, where its kernels are compared — the SIMT GEMM, the tensor-core kernel and
// cuBLAS on three bf16 pieces; the SIMT GEMM only up to 256, it would take minutes beyond) at the shapes a
// GLM-5.3-Flash decode step spends half its kernel time in (the full-width slice's Nsight table: 48 GEMVs,
// 784 of 1,585 µs per batch-1 step): the KDA q / k / v projections (4096 → 8192) and o (8192 → 4096), the
// shared expert's gate / up (4096 → 2048) and down (2048 → 4096), MLA q_a (4096 → 1536), and the chain of a
// KDA layer's seven projections as a decode step runs them. Each shape cycles through enough weight copies
// (≥ 100 MB) that L2 (50 MB on the H200) does not hold them, calls back to back in one stream, so a kernel's
// start overlaps its predecessor's end where programmatic dependent launch allows it.
// Every mode of the CUDA backend at each T is timed (gemvSetOneTokenMode / gemvSetMultiTokenMode / gemmSetMode,
// kernels/exl3_tune.h:
// the split-K kernel's forms, whole rows per warp, the tensor-core GEMV); the override is restored
// afterwards. Other backends ignore the modes (the columns are then the same computation).
// Figures: µs per call and weight bytes read per second against the device-to-device copy bandwidth.
// Only the Backend interface is used: it builds without CUDA and runs on any backend.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/bench_cuda.h"
#include "exl3_tune.h"

namespace ts::cli {

namespace {

// BF16 weights with std ~1/sqrt(K) from a cheap generator (the values do not matter to the speed, but they
// are finite and of a realistic magnitude): sign, exponent near 2^-6, random mantissa.
std::vector<uint16_t> randomBf16(size_t n, uint64_t seed) {
    std::vector<uint16_t> w(n);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; ++i) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        const uint32_t r = uint32_t(s >> 11);
        const uint32_t exp = 121u + (r & 3u);  // 2^-6 .. 2^-3
        w[i] = uint16_t(((r >> 2) & 0x8000u) | (exp << 7) | ((r >> 8) & 0x7Fu));
    }
    return w;
}

struct Shape {
    const char* name;
    int64_t N, K;
};

}  // namespace

nlohmann::json benchGemv(Backend& backend, int reps, double copyBw) {
    const Shape shapes[] = {{"kda q/k/v 4096->8192", 8192, 4096},   {"kda o 8192->4096", 4096, 8192},
                            {"shared gate/up 4096->2048", 2048, 4096}, {"shared down 2048->4096", 4096, 2048},
                            {"mla q_a 4096->1536", 1536, 4096}};
    // the decode step's batches (one token per sequence), then GEMM sizes: a speculative verify of 8 positions for
    // 2 or 8 sequences, and prefill chunks
    const int tokenCounts[] = {1, 2, 3, 4, 8, 16, 64, 256, 1024, 4096};
    const double minSetBytes = 100e6;
    // Host copies stay alive for the run: the backend keys its uploads by the host address.
    std::vector<std::vector<uint16_t>> host;
    auto makeCopies = [&](const Shape& s, int copies) {
        std::vector<WeightView> ws;
        for (int c = 0; c < copies; ++c) {
            host.push_back(randomBf16(size_t(s.N * s.K), host.size() + 1));
            WeightView w;
            w.data = host.back().data();
            w.dtype = DType::BF16;
            w.rows = s.N;
            w.cols = s.K;
            ws.push_back(w);
        }
        return ws;
    };
    const int64_t maxT = 4096, maxWidth = 8192;
    std::vector<float> xHost(size_t(maxT * maxWidth));
    for (size_t i = 0; i < xHost.size(); ++i) xHost[i] = float(int(i % 17) - 8) / 8.0f;
    const Buffer x = backend.upload(xHost.data(), xHost.size() * 4);
    const Buffer y = backend.alloc(size_t(maxT * maxWidth) * 4);

    std::vector<std::vector<WeightView>> sets;
    for (const Shape& s : shapes) {
        const double bytes = double(s.N * s.K) * 2.0;
        sets.push_back(makeCopies(s, std::max(2, int(minSetBytes / bytes + 0.999))));
    }
    // A KDA layer's projections in a decode step's order: q, k, v, o, then the shared expert's gate, up, down
    // (two chains' worth of copies, 640 MB, alternate).
    const Shape chain[] = {{"q", 8192, 4096}, {"k", 8192, 4096}, {"v", 8192, 4096}, {"o", 4096, 8192},
                           {"gate", 2048, 4096}, {"up", 2048, 4096}, {"down", 4096, 2048}};
    std::vector<std::vector<WeightView>> chains(2);
    double chainBytes = 0.0;
    for (const Shape& s : chain) {
        chainBytes += double(s.N * s.K) * 2.0;
        for (auto& c : chains) c.push_back(makeCopies(s, 1)[0]);
    }

    nlohmann::json rows = nlohmann::json::array();
    std::printf("dense GEMV, BF16 weights (Backend::linear) at T tokens: us per call back to back, weight GB/s and %% of "
                "copy bandwidth, per mode (kernels/exl3_tune.h; T = 1: 0 a warp per row, 1 K split over 8 warps with 4 rows "
                "per block (default), 2 the same with 2 rows, 3 tensor cores with programmatic dependent launch, 4 the same "
                "launched plainly; T > 1: 0 whole rows per warp, 1 default (K split at 2 tokens, tensor cores at 3-8), 2 K "
                "split never held, 3 tensor cores (PDL), 4 the same launched plainly, 5 K split held to 3 blocks per SM at "
                "3-4 tokens; T > 8: 0 SIMT GEMM (up to 256 tokens), 1 the tensor-core kernel, 2 cuBLAS on three bf16 pieces "
                "- the default takes 1 below %lld tokens, 2 from there); at T > 8 also TFLOP/s (the model's: 2 per "
                "multiply-add)\n", static_cast<long long>(gemmCublasMinTokens()));
    for (const int T : tokenCounts) {
        const int nModes = T == 1 ? 5 : T <= 8 ? 6 : 3;
        const int firstMode = T > 256 ? 1 : 0;  // the SIMT GEMM: ~1 s a call at 4,096 tokens
        // The variant for its lifetime (OverrideScope), then the previous override.
        auto timeMode = [&](int mode, const std::function<void()>& call, int callsPerRep) {
            std::optional<OverrideScope<gemvSetOneTokenMode>> one;
            std::optional<OverrideScope<gemvSetMultiTokenMode>> multi;
            std::optional<OverrideScope<gemmSetMode>> many;
            if (T == 1) one.emplace(mode);
            else if (T <= 8) multi.emplace(mode);
            else many.emplace(mode);
            return 1e6 * medianSeconds(backend, reps, callsPerRep, call);
        };
        std::printf("  T = %d\n  %-28s | %8s", T, "shape", "MB");
        for (int m = firstMode; m < nModes; ++m) std::printf(" | mode %d: us GB/s  %%  ", m);
        std::printf("\n");
        // bytesPerCall: the weights' bytes (BF16: 2 per multiply-add of a token, so flops = T · bytes)
        auto report = [&](const std::string& name, double bytesPerCall, const std::vector<double>& us) {
            std::printf("  %-28s | %8.1f", name.c_str(), bytesPerCall / 1e6);
            const double flops = double(T) * bytesPerCall;
            nlohmann::json modeRows = nlohmann::json::object();
            for (size_t i = size_t(firstMode); i < us.size(); ++i) {
                const double gbs = bytesPerCall / (us[i] * 1e-6) / 1e9;
                const double tflops = flops / (us[i] * 1e-6) / 1e12;
                if (T > 8) std::printf(" | %6.2f %4.0f %4.1f %5.1f TF", us[i], gbs, 100.0 * gbs * 1e9 / copyBw, tflops);
                else std::printf(" | %6.2f %4.0f %4.1f", us[i], gbs, 100.0 * gbs * 1e9 / copyBw);
                modeRows[std::to_string(i)] = {{"us", us[i]}, {"GBps", gbs}, {"of_copy", gbs * 1e9 / copyBw}, {"TFLOPs", tflops}};
            }
            std::printf("\n");
            rows.push_back({{"shape", name}, {"T", T}, {"MB_per_call", bytesPerCall / 1e6}, {"modes", modeRows}});
        };
        for (size_t si = 0; si < std::size(shapes); ++si) {
            const std::vector<WeightView>& ws = sets[si];
            std::vector<double> us(size_t(firstMode), 0.0);
            for (int m = firstMode; m < nModes; ++m) {
                size_t i = 0;
                us.push_back(timeMode(m, [&] {
                    backend.linear(x, T, ws[i], y);
                    i = (i + 1) % ws.size();
                }, int(ws.size()) * 4));
            }
            report(shapes[si].name, double(shapes[si].N * shapes[si].K) * 2.0, us);
        }
        std::vector<double> us(size_t(firstMode), 0.0);
        for (int m = firstMode; m < nModes; ++m) {
            size_t i = 0;
            us.push_back(timeMode(m, [&] {
                for (const WeightView& w : chains[i]) backend.linear(x, T, w, y);
                i ^= 1;
            }, 4));
        }
        report("KDA layer chain (7 GEMVs)", chainBytes, us);
    }
    return rows;
}

}  // namespace ts::cli
