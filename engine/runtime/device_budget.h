// The KV budget on a device backend, as the recipe's vLLM derives it: GPU_MEM_UTIL of the device's memory,
// minus what is in use once the weights are resident and one step of the largest size has run (its
// activations stay in the backend's caching allocator, so they are counted as used, as vLLM's profiling
// run counts the activation peak). Host backends have no device memory: their budget is configured.
#pragma once

#include <cstdint>
#include <optional>

#include "model/glm5_next.h"
#include "runtime/engine.h"

namespace ts {

struct DeviceBudget {
    int64_t kvBudgetBytes = 0;
    int64_t totalBytes = 0;
    int64_t usedAfterWeightsBytes = 0;  // before the profiling step
    int64_t activationBytes = 0;        // what the profiling step added
};

// nullopt for a host backend. Throws InvalidArgument when `gpuMemUtil` leaves nothing for the pool (the
// message says how much is in use and what utilisation would fit). Call after the model is loaded and
// before the Engine is built; `ec.maxNumBatchedTokens` sets the profiling step's size (capped by
// max_position_embeddings).
std::optional<DeviceBudget> deviceKvBudget(const Glm5NextModel& model, const EngineConfig& ec, double gpuMemUtil);

}  // namespace ts
