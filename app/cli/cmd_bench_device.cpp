// `bench-device`: the backend benchmarks of issue 6 (EXL3 GEMV and fused MoE, sparse MLA decode, KDA
// decode, the mHC pre op, the dense one-token GEMV), each reported against the measured device-to-device copy bandwidth. Prints tables, writes
// one JSON file (--json), docs/PERFORMANCE.md records the results with this command.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "cli/bench_cuda.h"
#include "cli/commands.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "cuda/sm_limits.h"

namespace ts::cli {

double measureCopyBandwidth(Backend& backend, int reps) {
    const size_t bytes = size_t(1) << 30;  // 1 GiB: far beyond any cache
    Buffer a = backend.alloc(bytes), b = backend.alloc(bytes);
    const double s = medianSeconds(backend, reps, 4, [&] { backend.copy(a, 0, b, 0, bytes); });
    return 2.0 * double(bytes) / s;
}

int cmdBenchDevice(const Args& args) {
    if (args.help()) {
        std::printf("twinspark-cli bench-device [--backend auto|cuda|cpu] [--what exl3,mla,kda] [--reps 20] [--sms N]\n"
                    "                           [--sm-limits gb10] [--json FILE]\n"
                    "--what also takes mhc, gemv, upload, exl3-moe (only the fused MoE layer), exl3-gemv4 (only the GEMV at K = 4) and\n"
                    "exl3-trace (both at K = 4, then a phase trace of one launch of each at MUL1, batch 1 and 4) and\n"
                    "exl3-prefill (the MoE layer and a GEMM at prefill sizes, TFLOP/s; also part of exl3);\n"
                    "mhc times the mHC pre op (one launch vs two) at decode and prefill sizes; gemv the dense BF16\n"
                    "GEMV / GEMM at a decode step's shapes, 1 to 4,096 tokens, in each of the CUDA backend's modes;\n"
                    "upload host -> device uploads of 1 GiB (anonymous memory and a mapped file; pinned ring and direct).\n"
                    "Times the device kernels at GLM-5.3-Flash's real widths; bandwidth is reported as a fraction\n"
                    "of the measured device-to-device copy bandwidth (read + write). --what \"\" measures only that\n"
                    "copy bandwidth (scripts/gpu/run_gpu_suite.sh uses it for benchmark 3).\n"
                    "--sms N runs the CUDA backend on N of the GPU's SMs (a green context; TS_CUDA_SMS=N does the same\n"
                    "for any command): what a GPU with that many SMs would do with these kernels, e.g. a GB10's 48.\n"
                    "The driver rounds N up (to a multiple of 8 on an H100 / H200; the header line gives the count);\n"
                    "0, or N at least the device's SMs, is the whole GPU. It needs the CUDA backend (auto means cuda\n"
                    "then). The copy bandwidth, and the fractions of it, are then the partition stream's.\n"
                    "--sm-limits gb10 gives each SM a GB10 SM's limits (100 KiB of shared memory, 1,536 threads;\n"
                    "TS_CUDA_SM_LIMITS=gb10 does the same for any command): kernels keep no more blocks resident per SM\n"
                    "than a GB10 would (their launches padded with shared memory), and the planners plan with a GB10's\n"
                    "figures. With --sms 48, a GB10's SMs as far as this GPU can show them (not its clock or memory).\n");
        return 0;
    }
    args.accept({"backend", "what", "reps", "sms", "sm-limits", "json"});
    const int reps = int(args.getInt("reps", 20, 1, 10000));
    // Before the backend opens (it reads TS_CUDA_SMS once, at its start): kernels/cuda/cuda_partition.cu.
    const bool partition = args.get("sms").has_value();
    if (partition && ::setenv("TS_CUDA_SMS", std::to_string(args.getInt("sms", 0, 0, 100000)).c_str(), 1) != 0)
        fail(ErrorKind::Io, "--sms: cannot set TS_CUDA_SMS");
    // Likewise TS_CUDA_SM_LIMITS (kernels/cuda/sm_limits.h): a known name, checked before anything opens.
    const std::optional<std::string> limits = args.get("sm-limits");
    if (limits) {
        if (!cuda::smShapeNamed(*limits))
            fail(ErrorKind::InvalidArgument, "--sm-limits: '" + *limits + "' is not a known SM (gb10)");
        if (::setenv("TS_CUDA_SM_LIMITS", limits->c_str(), 1) != 0)
            fail(ErrorKind::Io, "--sm-limits: cannot set TS_CUDA_SM_LIMITS");
    }
    const bool onGpu = partition || limits.has_value();
    std::vector<std::string> what;
    std::stringstream ss(args.get("what").value_or("exl3,mla,kda"));
    for (std::string item; std::getline(ss, item, ',');) {
        if (item != "exl3" && item != "exl3-moe" && item != "exl3-gemv4" && item != "exl3-trace" &&
            item != "exl3-prefill" && item != "mla" && item != "kda" && item != "mhc" && item != "gemv" &&
            item != "upload")
            fail(ErrorKind::InvalidArgument, "--what: '" + item +
                                                 "' is not one of exl3, exl3-moe, exl3-gemv4, exl3-trace, exl3-prefill, "
                                                 "mla, kda, mhc, gemv, upload");
        what.push_back(item);
    }
    // Opened before the benchmarks: a bad path is reported at once, not after minutes of timing.
    // The report replaces an older one only when complete (io/atomic_file.h): an interrupted run leaves it as it was.
    std::optional<AtomicFileWriter> jsonOut;
    if (auto path = args.get("json")) {
        try {
            jsonOut.emplace(*path);
        } catch (const Error& e) {
            fail(ErrorKind::Io, std::string("--json: ") + e.what());
        }
    }
    // With --sms or --sm-limits, "auto" is "cuda": a partition the driver refuses is then reported as such, not as a
    // CPU fallback.
    std::string backendName = args.get("backend").value_or("auto");
    if (onGpu && backendName == "auto") backendName = "cuda";
    if (onGpu && backendName == "cpu")
        fail(ErrorKind::InvalidArgument, std::string(partition ? "--sms" : "--sm-limits") +
                                             ": the cpu backend does not run on a GPU's SMs (--backend cuda)");
    auto backend = makeBackend(backendName);
    const double copyBw = measureCopyBandwidth(*backend, reps);
    const Backend::ComputeUnits sms = backend->computeUnits();
    std::printf("bench-device: backend %s, device-to-device copy %.1f GB/s (read + write)", backend->name().c_str(),
                copyBw / 1e9);
    if (sms.used) std::printf(", on %d of %d SMs", sms.used, sms.device);
    // What the backend applied: the flag sets the variable, and a CUDA backend opened under it fails on a bad name.
    const char* limitsEnv = std::getenv("TS_CUDA_SM_LIMITS");
    const std::string applied = backend->name() == "cuda" && limitsEnv ? limitsEnv : "";
    if (!applied.empty()) std::printf(" with a %s SM's limits", applied.c_str());
    std::printf("\n");
    nlohmann::json out = {{"backend", backend->name()}, {"copy_bandwidth_GBps", copyBw / 1e9}};
    if (sms.used) {
        out["sms"] = sms.used;
        out["sms_device"] = sms.device;
    }
    if (!applied.empty()) out["sm_limits"] = applied;
    // The EXL3 items make one call (see benchExl3Cuda), where the first of them stands in the list.
    Exl3BenchParts parts;
    parts.moe = parts.gemv = false;
    parts.gemvK4Only = true;
    for (const std::string& w : what) {
        parts.moe = parts.moe || w == "exl3" || w == "exl3-moe" || w == "exl3-trace";
        parts.gemv = parts.gemv || w == "exl3" || w == "exl3-gemv4" || w == "exl3-trace";
        parts.trace = parts.trace || w == "exl3-trace";
        parts.prefill = parts.prefill || w == "exl3" || w == "exl3-prefill";
        parts.gemvK4Only = parts.gemvK4Only && w != "exl3";
    }
    bool exl3Done = false;
    for (const std::string& w : what) {
        if (w.rfind("exl3", 0) == 0 && !exl3Done) {
            out["exl3"] = benchExl3Cuda(*backend, reps, parts);
            exl3Done = true;
        }
        if (w == "mla") out["mla"] = benchMlaDecode(*backend, reps);
        if (w == "kda") out["kda"] = benchKdaDecode(*backend, reps);
        if (w == "mhc") out["mhc"] = benchMhcPre(*backend, reps);
        if (w == "gemv") out["gemv"] = benchGemv(*backend, reps, copyBw);
        if (w == "upload") out["upload"] = benchUpload(*backend, reps);
    }
    if (jsonOut) {
        jsonOut->write(out.dump(1) + "\n");
        jsonOut->commit();
    }
    return 0;
}

}  // namespace ts::cli
