#include "runtime/device_budget.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/error.h"

namespace ts {

std::optional<DeviceBudget> deviceKvBudget(const Glm5NextModel& model, const EngineConfig& ec, double gpuMemUtil) {
    Backend& be = model.backend();
    size_t freeBytes = 0, totalBytes = 0;
    if (!be.deviceMemory(&freeBytes, &totalBytes)) return std::nullopt;
    DeviceBudget b;
    b.totalBytes = int64_t(totalBytes);
    b.usedAfterWeightsBytes = int64_t(totalBytes - freeBytes);
    {
        // The profiling step: one prefill of the step budget's size on a throw-away sequence. Token 0 is
        // as good as any: the activations' sizes do not depend on the ids.
        const int64_t T = std::max<int64_t>(1, std::min<int64_t>(ec.maxNumBatchedTokens,
                                                                 model.text().max_position_embeddings));
        std::vector<int32_t> ids(static_cast<size_t>(T), 0);
        auto state = model.newSequence(ec.kvDtype);
        model.forward(ids.data(), T, *state, true);
        be.synchronize();
    }
    if (!be.deviceMemory(&freeBytes, &totalBytes)) return std::nullopt;
    const int64_t used = int64_t(totalBytes - freeBytes);
    b.activationBytes = std::max<int64_t>(0, used - b.usedAfterWeightsBytes);
    const double budget = gpuMemUtil * double(totalBytes) - double(used);
    if (budget <= 0) {
        char msg[256];
        std::snprintf(msg, sizeof msg,
                      "GPU_MEM_UTIL %.2f leaves no device memory for the KV pool: %.2f GiB of %.2f GiB are in use "
                      "after the weights and one %lld-token step (at least %.2f would be needed)",
                      gpuMemUtil, double(used) / double(1 << 30), double(totalBytes) / double(1 << 30),
                      (long long)ec.maxNumBatchedTokens, double(used) / double(totalBytes) + 0.01);
        fail(ErrorKind::InvalidArgument, msg);
    }
    b.kvBudgetBytes = int64_t(budget);
    return b;
}

}  // namespace ts
