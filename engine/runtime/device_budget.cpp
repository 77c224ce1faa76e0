#include "runtime/device_budget.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/env_switch.h"
#include "core/error.h"

namespace ts {

namespace {

double gib(int64_t bytes) { return double(bytes) / double(int64_t(1) << 30); }

int64_t requestedOf(double gpuMemUtil, int64_t totalBytes) { return int64_t(gpuMemUtil * double(totalBytes)); }

// The start-up check's message, with the advice the recipe's vLLM gives: the largest utilisation that fits.
// when: how the free figure was taken ("were free when TwinSpark opened it").
std::string startupShortfall(double gpuMemUtil, int64_t totalBytes, int64_t freeBytes, bool unified, const char* when) {
    const char* whose = unified ? "the system and other programs (unified memory: they share the GPU's)" : "other processes";
    const double fits = std::floor(100.0 * double(freeBytes) / double(totalBytes)) / 100.0;
    char msg[512];
    std::snprintf(msg, sizeof msg,
                  "GPU_MEM_UTIL %g asks for %.2f GiB of the device's %.2f GiB, but only %.2f GiB %s (%.2f GiB in use "
                  "by %s): set GPU_MEM_UTIL to %.2f or less, or free memory first",
                  gpuMemUtil, gib(requestedOf(gpuMemUtil, totalBytes)), gib(totalBytes), gib(freeBytes), when,
                  gib(std::max<int64_t>(0, totalBytes - freeBytes)), whose, fits);
    return msg;
}

void checkUtil(double gpuMemUtil) {
    if (!(gpuMemUtil > 0.0 && gpuMemUtil <= 1.0)) {
        char msg[96];
        std::snprintf(msg, sizeof msg, "GPU_MEM_UTIL must be in (0, 1], got %g", gpuMemUtil);
        fail(ErrorKind::InvalidArgument, msg);
    }
}

}  // namespace

DeviceBudget planDeviceBudget(double gpuMemUtil, int64_t totalBytes, int64_t freeAtOpenBytes,
                              int64_t freeAfterWeightsBytes, int64_t freeAfterStepBytes, bool unified,
                              int64_t stepTokens) {
    checkUtil(gpuMemUtil);
    TS_CHECK(totalBytes > 0, "planDeviceBudget: the device reports no memory");
    DeviceBudget b;
    b.totalBytes = totalBytes;
    b.unified = unified;
    b.stepTokens = stepTokens;
    b.requestedBytes = requestedOf(gpuMemUtil, totalBytes);
    b.othersBytes = std::max<int64_t>(0, totalBytes - freeAtOpenBytes);
    // Ours: how far free memory fell since the device was opened. Other processes may have grown or shrunk
    // meanwhile (on unified memory, the page cache moves too); the figure is what the pool has to live with.
    b.modelBytes = std::max<int64_t>(0, freeAtOpenBytes - freeAfterWeightsBytes);
    b.activationBytes = std::max<int64_t>(0, freeAfterWeightsBytes - freeAfterStepBytes);
    if (b.requestedBytes > freeAtOpenBytes)  // vLLM's start-up check: this is where the recipe itself stops too
        fail(ErrorKind::InvalidArgument, startupShortfall(gpuMemUtil, totalBytes, freeAtOpenBytes, unified, "were free when TwinSpark opened it"));
    const int64_t ours = b.modelBytes + b.activationBytes;
    b.kvBudgetBytes = b.requestedBytes - ours;
    if (b.kvBudgetBytes <= 0) {
        const double needed = std::ceil(100.0 * double(ours) / double(totalBytes)) / 100.0 + 0.01;
        char msg[512];
        std::snprintf(msg, sizeof msg,
                      "GPU_MEM_UTIL %g leaves no device memory for the KV pool: it allows %.2f GiB, and the model "
                      "(%.2f GiB) and one %lld-token step (%.2f GiB) take %.2f GiB (at least %.2f would be needed%s)",
                      gpuMemUtil, gib(b.requestedBytes), gib(b.modelBytes), (long long)stepTokens,
                      gib(b.activationBytes), gib(ours), needed,
                      needed * double(totalBytes) > double(freeAtOpenBytes) ? ", more than was free at the start" : "");
        fail(ErrorKind::InvalidArgument, msg);
    }
    return b;
}

DeviceMemory awaitStartupMemory(double gpuMemUtil, const std::function<DeviceMemory()>& read,
                                const MemoryWaitClock& clock, double timeoutS,
                                const std::function<void(const std::string&)>& note, double pollS, double stallS) {
    checkUtil(gpuMemUtil);
    DeviceMemory m = read();
    TS_CHECK(m.totalBytes > 0, "awaitStartupMemory: the device reports no memory");
    const int64_t requested = requestedOf(gpuMemUtil, m.totalBytes);
    if (requested <= m.freeBytes) return m;
    // Growth below this is noise (other programs, the page cache), not a process handing its memory back.
    constexpr int64_t kGrowth = int64_t(256) << 20;
    const double t0 = clock.now();
    double lastGrowth = t0, lastNote = t0 - 1e9;
    int64_t best = m.freeBytes;
    bool slept = false;
    while (true) {
        const double t = clock.now();
        if (t - t0 >= timeoutS || t - lastGrowth >= stallS) break;
        if (t - lastNote >= 5.0) {
            char line[320];
            std::snprintf(line, sizeof line,
                          "waiting for device memory: %.2f GiB free, GPU_MEM_UTIL %g asks for %.2f GiB (a process that "
                          "has just stopped may still be returning its memory; while it comes back, %.0f s at most "
                          "(TS_MEM_WAIT_S), and %.0f s without more)",
                          gib(m.freeBytes), gpuMemUtil, gib(requested), timeoutS, stallS);
            note(line);
            lastNote = t;
        }
        clock.sleep(std::min(pollS, std::max(0.0, timeoutS - (t - t0))));
        slept = true;
        m = read();
        if (requested <= m.freeBytes) {
            char line[160];
            std::snprintf(line, sizeof line, "device memory: %.2f GiB free after %.1f s, enough for GPU_MEM_UTIL %g",
                          gib(m.freeBytes), clock.now() - t0, gpuMemUtil);
            note(line);
            return m;
        }
        if (m.freeBytes >= best + kGrowth) {  // coming back: the stall clock starts again
            best = m.freeBytes;
            lastGrowth = clock.now();
        }
    }
    char when[96];
    if (slept) std::snprintf(when, sizeof when, "were free after waiting %.0f s", clock.now() - t0);
    else std::snprintf(when, sizeof when, "were free");
    fail(ErrorKind::InvalidArgument, startupShortfall(gpuMemUtil, m.totalBytes, m.freeBytes, m.unified, when));
}

double startupMemoryWaitSeconds() {
    static const int64_t s = envCount("TS_MEM_WAIT_S", 30);
    return double(s);
}

void checkStartupMemory(const DeviceMemory& atOpen, const std::function<DeviceMemory()>& readNow,
                        const std::function<void(int64_t)>& rebase, double gpuMemUtil, const MemoryWaitClock& clock,
                        double timeoutS, const std::function<void(const std::string&)>& note) {
    checkUtil(gpuMemUtil);
    // Free at the open is what planDeviceBudget checks: when that fitted, there is nothing to do.
    if (requestedOf(gpuMemUtil, atOpen.totalBytes) <= atOpen.freeAtOpenBytes) return;
    // It did not: wait from the reading taken now (atOpen.freeBytes, which may already fit) for one that does,
    // and plan from that one.
    bool first = true;
    const auto read = [&] {
        if (!first) return readNow();
        first = false;
        return atOpen;
    };
    rebase(awaitStartupMemory(gpuMemUtil, read, clock, timeoutS, note).freeBytes);
}

void checkStartupMemory(Backend& be, double gpuMemUtil, const std::function<void(const std::string&)>& note,
                        double timeoutS) {
    DeviceMemory atOpen;
    if (!be.deviceMemory(&atOpen)) return;
    const MemoryWaitClock clock{
        [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); },
        [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }};
    checkStartupMemory(
        atOpen,
        [&] {
            DeviceMemory m;
            be.deviceMemory(&m);
            return m;
        },
        [&](int64_t freeBytes) { be.rebaseDeviceMemory(freeBytes); }, gpuMemUtil, clock, timeoutS, note);
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
                  "device memory %.2f GiB%s: %.2f GiB in use by others at start, GPU_MEM_UTIL %g allows %.2f GiB; "
                  "the model %.2f GiB, a %lld-token step %.2f GiB -> %.2f GiB for the KV pool",
                  gib(b.totalBytes), b.unified ? " (unified with the system's)" : "", gib(b.othersBytes), gpuMemUtil,
                  gib(b.requestedBytes), gib(b.modelBytes), (long long)b.stepTokens, gib(b.activationBytes),
                  gib(b.kvBudgetBytes));
    return line;
}

}  // namespace ts
