// Device benchmarks of `twinspark-cli bench-device` (issue 6; docs/PERFORMANCE.md). Each one uses only the
// Backend interface, so it builds everywhere and runs on whichever backend is chosen (meaningful on CUDA).
// Method: warm-up, then the median over `reps` of a timed batch of launches closed by
// backend.synchronize() (wall clock around a synchronised batch). Each returns JSON rows and prints a table.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "backend.h"
#include "exl3_tune.h"

namespace ts::cli {

// Device-to-device copy bandwidth (read + write bytes per second) of a large backend.copy(): the
// denominator of every "fraction of bandwidth" figure.
double measureCopyBandwidth(Backend& backend, int reps);

// Median seconds of `fn` (one call = one timed batch of `inner` launches), after `warmup` batches.
template <class Fn>
double medianSeconds(Backend& backend, int reps, int inner, Fn&& fn);

// A run-time kernel override of kernels/exl3_tune.h for a scope (TuneOverride): a bench times each variant in one
// process.
template <int (*Set)(int)>
using OverrideScope = TuneOverride<Set>;

// bench_cuda_exl3.cpp: EXL3 GEMV + fused MoE, in one call per process (the device keeps one upload per
// weight object: a second call's fresh objects could reuse a freed one's address). Parts: the MoE layer
// (a), the GEMV (b) at K = 2..6 or at K = 4 only (the short runs for A/B measurements and profiles).
// trace: after the K = 4 MUL1 GEMV and MoE timings (batch 1 and 4), a phase trace of one launch of each
// (traceExl3Calls; --what exl3-trace). prefill (c): the MoE layer at 64 … 4,096 routed tokens and the GEMV's matrix
// at 16 … 4,096 tokens on the prefill path and the staged kernels (--what exl3-prefill; also in exl3), in TFLOP/s.
struct Exl3BenchParts {
    bool moe = true;
    bool gemv = true;
    bool gemvK4Only = false;
    bool trace = false;
    bool prefill = false;
};
nlohmann::json benchExl3Cuda(Backend& backend, int reps, const Exl3BenchParts& parts = {});
// bench_cuda_exl3_trace.cpp: one traced launch of `call` alone and one after three back-to-back calls,
// phase statistics printed and returned; productionSeconds: the untraced median per call, printed beside the
// traced kernel's (reps timed batches).
nlohmann::json traceExl3Calls(Backend& backend, const std::string& label, const std::function<void()>& call,
                              double productionSeconds, int reps);
// The statistics of one traced launch from its words (kExl3TraceWords per unit, `capacity` units; units
// without a start and an end are skipped), printed under the heading `how` and returned: per mode ("linear",
// "gate/up", "down") the phases' p10/p50/p90, "per_sm", "timeline", "units_raw", "span_us", "alive_units_max".
nlohmann::json analyseExl3Trace(const std::vector<unsigned long long>& words, int64_t capacity, const std::string& how);
// The device-routed MoE's plan kernel record in the same words (kTraceModePlan; analyseExl3Trace leaves it out),
// printed and returned as µs from the MoE launch's first unit start: start_us, waited_us, loaded_us, chunks_us,
// end_us, length_after_wait_us and first_input_us; null when the words hold no plan record or no unit.
nlohmann::json analyseExl3TracePlan(const std::vector<unsigned long long>& words, int64_t capacity);
nlohmann::json benchMlaDecode(Backend& backend, int reps);  // bench_cuda_attention.cpp: sparse MLA + indexer
nlohmann::json benchKdaDecode(Backend& backend, int reps);  // bench_cuda_kda.cpp: KDA recurrent decode
nlohmann::json benchMhcPre(Backend& backend, int reps);     // bench_cuda_mhc.cpp: mHC pre, one launch vs two
// bench_cuda_gemv.cpp: the dense one-token BF16 GEMV at the decode step's shapes, every one-token mode.
nlohmann::json benchGemv(Backend& backend, int reps, double copyBw);
// bench_cuda_upload.cpp: 1 GiB host → device uploads from anonymous memory and a mapped file, ring and direct.
nlohmann::json benchUpload(Backend& backend, int reps);

}  // namespace ts::cli

#include <algorithm>
#include <chrono>
#include <vector>

namespace ts::cli {

template <class Fn>
double medianSeconds(Backend& backend, int reps, int inner, Fn&& fn) {
    for (int i = 0; i < inner; ++i) fn();  // warm-up (uploads, caches, clocks)
    backend.synchronize();
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < inner; ++i) fn();
        backend.synchronize();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / inner);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

}  // namespace ts::cli
