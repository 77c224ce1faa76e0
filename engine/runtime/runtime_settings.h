// The deployment's engine settings by their .env names — the recipe's runtime block (MAX_NUM_SEQS,
// MAX_NUM_BATCHED_TOKENS, MAX_MODEL_LEN, GPU_MEM_UTIL, KV_CACHE_DTYPE) and TwinSpark's own (TS_KV_BUDGET_MIB,
// TS_MAX_CONCURRENT_REQUESTS) — with their defaults and the values each accepts. `twinspark-cli serve` and the
// control center both read them through this file, so a value in the .env means the same to both, or is
// refused by both for the same reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backend.h"  // KvCacheDtype

namespace ts {

// An integer setting: its .env / environment name, serve's option (without "--"), the recipe's default and the
// accepted range [lo, hi].
struct IntSetting {
    const char* env;
    const char* option;
    int64_t def, lo, hi;
};

inline constexpr IntSetting kMaxNumSeqsSetting{"MAX_NUM_SEQS", "max-num-seqs", 4, 1, 4096};
inline constexpr IntSetting kMaxNumBatchedTokensSetting{"MAX_NUM_BATCHED_TOKENS", "max-num-batched-tokens", 1024, 1,
                                                        int64_t(1) << 24};
inline constexpr IntSetting kMaxModelLenSetting{"MAX_MODEL_LEN", "max-model-len", 900000, 2, int64_t(1) << 31};
// The KV budget where no GPU_MEM_UTIL applies (the CPU backend), MiB.
inline constexpr IntSetting kKvBudgetMibSetting{"TS_KV_BUDGET_MIB", "kv-budget-mib", 2048, 1, int64_t(1) << 22};
inline constexpr IntSetting kMaxConcurrentRequestsSetting{"TS_MAX_CONCURRENT_REQUESTS", "max-concurrent-requests", 64,
                                                          1, 4096};
// The API's port as the deployment gives it to clients (http://HEAD:PORT/v1): the control center's rule; serve
// also takes 0, any free port (printed), for tests and side-by-side servers.
inline constexpr IntSetting kPortSetting{"PORT", "port", 8888, 1, 65535};
inline constexpr const char* kGpuMemUtilEnv = "GPU_MEM_UTIL";
inline constexpr double kGpuMemUtilDefault = 0.87;  // the recipe's share of the GPU's memory
inline constexpr const char* kKvCacheDtypeEnv = "KV_CACHE_DTYPE";
// The backend (serve's --backend): auto (CUDA when a device exists, else the CPU), cpu or cuda.
inline constexpr const char* kBackendEnv = "TWINSPARK_BACKEND";
inline bool isBackendSetting(const std::string& v) { return v == "auto" || v == "cpu" || v == "cuda"; }

// Each parses one value as written (no trimming). On a value it does not accept: nullopt, and *why says what it
// accepts ("an integer in [1, 4096]", "in (0, 1]", …) for the caller to put after "<name> must be ".
std::optional<int64_t> parseIntSetting(const IntSetting& s, const std::string& value, std::string* why);
std::optional<double> parseGpuMemUtilSetting(const std::string& value, std::string* why);
// fp8 (= fp8_ds_mla, the recipe's) or fp32 (the exact reference mode); bf16, auto and nvfp4 — vLLM's other
// choices — are refused with the reason (*why then starts with "refused:"; otherwise "fp8 or fp32").
std::optional<KvCacheDtype> parseKvCacheDtypeSetting(const std::string& value, std::string* why);

}  // namespace ts
