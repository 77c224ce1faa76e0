#include "runtime/device_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/error.h"

namespace ts {

namespace {

double gib(int64_t bytes) { return double(bytes) / double(int64_t(1) << 30); }

}  // namespace

DeviceBudget planDeviceBudget(double gpuMemUtil, int64_t totalBytes, int64_t freeAtOpenBytes,
                              int64_t freeAfterWeightsBytes, int64_t freeAfterStepBytes, bool unified,
                              int64_t stepTokens) {
    if (!(gpuMemUtil > 0.0 && gpuMemUtil <= 1.0)) {
        char msg[96];
        std::snprintf(msg, sizeof msg, "GPU_MEM_UTIL must be in (0, 1], got %g", gpuMemUtil);
        fail(ErrorKind::InvalidArgument, msg);
    }
    TS_CHECK(totalBytes > 0, "planDeviceBudget: the device reports no memory");
    DeviceBudget b;
    b.totalBytes = totalBytes;
    b.unified = unified;
    b.stepTokens = stepTokens;
    b.requestedBytes = int64_t(gpuMemUtil * double(totalBytes));
    b.othersBytes = std::max<int64_t>(0, totalBytes - freeAtOpenBytes);
    // Ours: how far free memory fell since the device was opened. Other processes may have grown or shrunk
    // meanwhile (on unified memory, the page cache moves too); the figure is what the pool has to live with.
    b.modelBytes = std::max<int64_t>(0, freeAtOpenBytes - freeAfterWeightsBytes);
    b.activationBytes = std::max<int64_t>(0, freeAfterWeightsBytes - freeAfterStepBytes);
    const char* whose = unified ? "the system and other programs (unified memory: they share the GPU's)" : "other processes";
    if (b.requestedBytes > freeAtOpenBytes) {
        // vLLM's start-up check: this is where the recipe itself stops, with the same advice.
        const double fits = std::floor(100.0 * double(freeAtOpenBytes) / double(totalBytes)) / 100.0;
        char msg[512];
        std::snprintf(msg, sizeof msg,
                      "GPU_MEM_UTIL %.2f asks for %.2f GiB of the device's %.2f GiB, but only %.2f GiB were free when "
                      "TwinSpark opened it (%.2f GiB in use by %s): set GPU_MEM_UTIL to %.2f or less, or free memory "
                      "first",
                      gpuMemUtil, gib(b.requestedBytes), gib(totalBytes), gib(freeAtOpenBytes), gib(b.othersBytes), whose,
                      fits);
        fail(ErrorKind::InvalidArgument, msg);
    }
    const int64_t ours = b.modelBytes + b.activationBytes;
    b.kvBudgetBytes = b.requestedBytes - ours;
    if (b.kvBudgetBytes <= 0) {
        const double needed = std::ceil(100.0 * double(ours) / double(totalBytes)) / 100.0 + 0.01;
        char msg[512];
        std::snprintf(msg, sizeof msg,
                      "GPU_MEM_UTIL %.2f leaves no device memory for the KV pool: it allows %.2f GiB, and the model "
                      "(%.2f GiB) and one %lld-token step (%.2f GiB) take %.2f GiB (at least %.2f would be needed%s)",
                      gpuMemUtil, gib(b.requestedBytes), gib(b.modelBytes), (long long)stepTokens,
                      gib(b.activationBytes), gib(ours), needed,
                      needed * double(totalBytes) > double(freeAtOpenBytes) ? ", more than was free at the start" : "");
        fail(ErrorKind::InvalidArgument, msg);
    }
    return b;
}

std::optional<DeviceBudget> deviceKvBudget(const Glm5NextModel& model, const EngineConfig& ec, double gpuMemUtil) {
    Backend& be = model.backend();
    DeviceMemory afterWeights;
    if (!be.deviceMemory(&afterWeights)) return std::nullopt;
    // The profiling step: one prefill of the step budget's size on a throw-away sequence. Token 0 is as good
    // as any: the activations' sizes do not depend on the ids.
    const int64_t T = std::max<int64_t>(1, std::min<int64_t>(ec.maxNumBatchedTokens, model.text().max_position_embeddings));
    {
        std::vector<int32_t> ids(static_cast<size_t>(T), 0);
        auto state = model.newSequence(ec.kvDtype);
        model.forward(ids.data(), T, *state, true);
        be.synchronize();
    }
    DeviceMemory afterStep;
    if (!be.deviceMemory(&afterStep)) return std::nullopt;
    return planDeviceBudget(gpuMemUtil, afterStep.totalBytes, afterStep.freeAtOpenBytes, afterWeights.freeBytes,
                            afterStep.freeBytes, afterStep.unified, T);
}

std::string describeDeviceBudget(const DeviceBudget& b, double gpuMemUtil) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "device memory %.2f GiB%s: %.2f GiB in use by others at start, GPU_MEM_UTIL %.2f allows %.2f GiB; "
                  "the model %.2f GiB, a %lld-token step %.2f GiB -> %.2f GiB for the KV pool",
                  gib(b.totalBytes), b.unified ? " (unified with the system's)" : "", gib(b.othersBytes), gpuMemUtil,
                  gib(b.requestedBytes), gib(b.modelBytes), (long long)b.stepTokens, gib(b.activationBytes),
                  gib(b.kvBudgetBytes));
    return line;
}

}  // namespace ts
