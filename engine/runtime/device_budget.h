// The KV budget on a device backend, as the recipe's vLLM derives it: GPU_MEM_UTIL of the device's memory is
// what this process may use (vLLM's "requested memory"); the pool gets what is left of it once the weights are
// resident and one step of the largest size has run (its activations stay in the backend's caching allocator,
// so they count, as vLLM's profiling run counts the activation peak). Other processes' memory is not taken
// from the budget; instead, as vLLM checks at start-up, the requested memory must have been free when the
// backend opened the device — on a unified-memory GB10 the system and every program share that memory, and a
// budget that subtracted them cut the pool at the recipe's own settings to about a quarter (test_device_budget).
// Host backends have no device memory: their budget is configured.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "model/glm5_next.h"
#include "runtime/engine.h"

namespace ts {

struct DeviceBudget {
    int64_t kvBudgetBytes = 0;
    int64_t totalBytes = 0;
    int64_t requestedBytes = 0;      // GPU_MEM_UTIL × total
    int64_t othersBytes = 0;         // in use by others when the device was opened (unified: the system too)
    int64_t modelBytes = 0;          // this process's use once the model is loaded (weights, workspaces)
    int64_t activationBytes = 0;     // what the profiling step added
    int64_t stepTokens = 0;          // the profiling step's tokens
    bool unified = false;
};

// The arithmetic of deviceKvBudget from its measurements (bytes): free when the backend opened the device, after
// the weights, after the profiling step of `stepTokens` tokens. Throws InvalidArgument, with the numbers and the
// GPU_MEM_UTIL that would fit, when the requested memory was not free at the start or leaves nothing for the pool.
DeviceBudget planDeviceBudget(double gpuMemUtil, int64_t totalBytes, int64_t freeAtOpenBytes,
                              int64_t freeAfterWeightsBytes, int64_t freeAfterStepBytes, bool unified,
                              int64_t stepTokens);

// vLLM's start-up check, made when the device has just been opened — before the self-test and minutes of loading,
// not after them as planDeviceBudget would: GPU_MEM_UTIL × the device's memory must be free. When it is not, the
// memory may still be on its way back from a process that has just stopped (a restart: on a GB10 the driver
// returns ~100 GiB of unified memory over seconds), so the readings are taken again every pollS seconds while
// free memory keeps growing, for at most timeoutS seconds; a reading that stops growing for stallS seconds is a
// real shortage, not a restart, and ends the wait early. Throws planDeviceBudget's start-up error (the
// utilisation that fits) when no reading fits. Returns the reading that fit. Never loops over restarts: a
// process that fails leaves it to the user (on a GB10 each failed CUDA start can leave unified memory mapped).
// read: the device's memory now (freeAtOpenBytes unused); sleep: waits seconds; note: a progress line.
struct MemoryWaitClock {
    std::function<double()> now;         // seconds, monotonic
    std::function<void(double)> sleep;   // seconds
};
DeviceMemory awaitStartupMemory(double gpuMemUtil, const std::function<DeviceMemory()>& read,
                                const MemoryWaitClock& clock, double timeoutS,
                                const std::function<void(const std::string&)>& note, double pollS = 1.0,
                                double stallS = 10.0);

// TS_MEM_WAIT_S (seconds; 0: fail at once), default 30.
double startupMemoryWaitSeconds();

// awaitStartupMemory on a backend just opened, with the steady clock: nothing for a host backend, nor for a device
// backend whose free memory at the open fits; otherwise the wait starts from a reading taken now, and the reading
// that fits becomes the backend's start (Backend::rebaseDeviceMemory), which the budget is planned from.
void checkStartupMemory(Backend& be, double gpuMemUtil, const std::function<void(const std::string&)>& note,
                        double timeoutS = startupMemoryWaitSeconds());
// The same on readings: atOpen (Backend::deviceMemory just after the open: freeAtOpenBytes, and freeBytes now),
// readNow (later readings), rebase (the reading that fitted, when the open's did not) — what the overload above
// binds to the backend.
void checkStartupMemory(const DeviceMemory& atOpen, const std::function<DeviceMemory()>& readNow,
                        const std::function<void(int64_t)>& rebase, double gpuMemUtil, const MemoryWaitClock& clock,
                        double timeoutS, const std::function<void(const std::string&)>& note);

// nullopt for a host backend. Throws as planDeviceBudget. Call after the model is loaded and before the Engine is
// built; `ec.maxNumBatchedTokens` sets the profiling step's size (capped by max_position_embeddings).
std::optional<DeviceBudget> deviceKvBudget(const Glm5NextModel& model, const EngineConfig& ec, double gpuMemUtil);

// One line for the logs: the device's memory, what others used at the start, what GPU_MEM_UTIL allows, the
// model's and the profiling step's shares and the pool's.
std::string describeDeviceBudget(const DeviceBudget& b, double gpuMemUtil);

}  // namespace ts
