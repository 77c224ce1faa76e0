// `bench-exl3`: the EXL3 rotated GEMV/GEMM on a random packed matrix (any trellis bits are a valid code),
// timed after a warm-up, per thread count; prints a table and writes JSON (docs/PERFORMANCE.md).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "core/thread_pool.h"
#include "quant/exl3_gemm.h"

namespace ts::cli {

int cmdBenchExl3(const Args& args) {
    if (args.help()) {
        std::printf("twinspark-cli bench-exl3 [--k 4096] [--n 2048] [--bits 4] [--codebook mul1|mcg|3inst] [--batch 1]\n"
                    "    [--threads 1,2] [--reps 20] [--json FILE]\n"
                    "Times y = x·W with W [k, n] EXL3-packed (decoded tile by tile, never expanded): median of reps\n"
                    "after one warm-up call, per thread count. This is the CPU decoder; the GPU's is timed by\n"
                    "bench-device --what exl3.\n");
        return 0;
    }
    args.accept({"k", "n", "bits", "codebook", "batch", "threads", "reps", "json"});
    const int64_t k = args.getInt("k", 4096, 128, 1 << 16), n = args.getInt("n", 2048, 128, 1 << 16);
    if (k % 128 || n % 128) fail(ErrorKind::InvalidArgument, "--k and --n must be multiples of 128");
    const int bits = int(args.getInt("bits", 4, 1, kExl3MaxBits));
    const int64_t batch = args.getInt("batch", 1, 1, 4096), reps = args.getInt("reps", 20, 1, 100000);
    const std::string cbName = args.get("codebook").value_or("mul1");
    const auto cb = exl3CodebookFromName(cbName);
    if (!cb) fail(ErrorKind::InvalidArgument, "--codebook must be mul1, mcg or 3inst, got '" + cbName + "'");
    std::vector<int> threadCounts;
    std::stringstream ts(args.get("threads").value_or("1,2"));
    for (std::string item; std::getline(ts, item, ',');) {
        char* end = nullptr;
        const long t = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || t < 1 || t > 1024) fail(ErrorKind::InvalidArgument, "--threads: '" + item + "' is not a thread count");
        threadCounts.push_back(int(t));
    }

    std::mt19937 rng(4);
    std::vector<uint8_t> trellis(static_cast<size_t>(k * n * bits / 8));
    for (auto& b : trellis) b = uint8_t(rng());
    Exl3Linear w;
    w.prefix = "bench";
    w.k = k;
    w.n = n;
    w.bits = bits;
    w.codebook = *cb;
    w.trellis = trellis.data();
    std::uniform_real_distribution<float> u(0.05f, 0.15f);
    w.suh.resize(size_t(k));
    w.svh.resize(size_t(n));
    for (auto& v : w.suh) v = (rng() & 1 ? 1.0f : -1.0f) * u(rng);
    for (auto& v : w.svh) v = (rng() & 1 ? 1.0f : -1.0f) * u(rng);
    std::vector<float> x(static_cast<size_t>(batch * k)), y(static_cast<size_t>(batch * n));
    std::normal_distribution<float> g;
    for (auto& v : x) v = g(rng);

    nlohmann::json out = {{"k", k}, {"n", n}, {"bits", bits}, {"codebook", cbName}, {"batch", batch},
                          {"packed_bytes", w.packedBytes()}, {"runs", nlohmann::json::array()}};
    std::printf("EXL3 %lld x %lld, K=%d %s, batch %lld (%.1f MB packed)\n", (long long)k, (long long)n, bits,
                cbName.c_str(), (long long)batch, double(w.packedBytes()) / 1e6);
    for (int threads : threadCounts) {
        ThreadPool pool(threads);
        exl3Gemm(w, x.data(), batch, y.data(), &pool);  // warm-up: lookup tables, caches
        std::vector<double> times;
        for (int64_t r = 0; r < reps; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            exl3Gemm(w, x.data(), batch, y.data(), &pool);
            times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(times.begin(), times.end());
        const double med = times[times.size() / 2];
        const double wps = double(k) * double(n) * double(batch) / med;
        std::printf("  %2d thread(s): median %.2f ms (min %.2f), %.0f M weight-MACs/s, %.2f GB/s of packed weights\n",
                    threads, med * 1e3, times.front() * 1e3, wps / 1e6, double(w.packedBytes()) / med / 1e9);
        out["runs"].push_back({{"threads", threads}, {"median_ms", med * 1e3}, {"min_ms", times.front() * 1e3},
                               {"mweights_per_s", wps / 1e6}});
    }
    if (auto j = args.get("json")) {
        writeFileAtomically(*j, out.dump(2) + "\n");
    }
    return 0;
}

}  // namespace ts::cli
