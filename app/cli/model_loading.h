// Loading a model for a CLI command from the common options (--model, --kv-cache-dtype, --threads,
// --backend), with the errors a user can act on.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend.h"
#include "cli/commands.h"
#include "model/glm5_next.h"

namespace ts::cli {

extern const std::set<std::string> kModelOptions;

struct LoadedModel {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Glm5NextModel> model;
    KvCacheDtype dt = KvCacheDtype::Fp8;
};

// profileOps: wrap the backend in a ProfilingBackend (kernels/profiling_backend.h): every op synchronized
// and timed (`generate --profile-ops`). gpuMemUtil (`generate --gpu-mem-util`): before the weights load, refused on
// a host backend, and on a device the start-up memory check (runtime/device_budget.h, checkStartupMemory).
LoadedModel loadModel(const Args& args, bool profileOps = false, std::optional<double> gpuMemUtil = std::nullopt);

// A load's progress on stderr for a device backend ("<who>: weights on the device 12.3 / 82.1 GiB (15 %)", at most
// every two seconds, and at the end); nothing for the CPU, which has nothing to upload.
LoadProgress stderrLoadProgress(const std::string& who, const Backend& backend);
// Binding's progress on stderr, for any backend, once it has taken 2 s (a full-size checkpoint on a cold page cache;
// the embedded models bind in milliseconds and print nothing): "<who>: mapping and checking the weights: layer 12 of
// 45", at most every two seconds, then "<who>: weights mapped and checked: 45 layers in 84.1 s".
BindProgress stderrBindProgress(const std::string& who);
// A progress line on stderr as "<who>: <line>" (checkStartupMemory's notes).
std::function<void(const std::string&)> stderrNote(const std::string& who);
KvCacheDtype parseKvCacheDtype(const std::string& value);
// GPU_MEM_UTIL's value in (0, 1]; InvalidArgument naming `option` otherwise.
double parseGpuMemUtil(const std::string& value, const std::string& option);

// The embedded default model as this binary finds it when no model is named (`serve`, `selftest`): next to the
// binary, in the working directory or in the source tree it was built from (io/default_paths.h, in that order);
// nullopt when none of those holds one. embeddedModelCandidates() lists the places, for an error naming them.
std::optional<std::filesystem::path> findEmbeddedModel();
std::vector<std::filesystem::path> embeddedModelCandidates();

// `generate` through the engine (text prompts, concurrency): cmd_generate_engine.cpp.
int generateWithEngine(const Args& args);

}  // namespace ts::cli
