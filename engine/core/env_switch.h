// 0/1 switches, modes and counts from the environment: the A/B switches of the CUDA backend (TS_CUDA_GRAPHS,
// TS_GEMV_STREAM, TS_MOE_DEVICE_ROUTE, TS_MLA_TC, TS_MHC_FUSED, TS_IDX_FAST; TS_GEMV1, TS_GEMV_MULTI, TS_EXL3_TUNE, TS_EXL3_MOE_JOB_ROWS, TS_EXL3_PF_SPLIT,
// TS_EXL3_KSL, TS_KDA_CHUNK; the model's TS_SEQ_BATCH; docs/PERFORMANCE.md says what each measured).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace ts {

// Unset: `def`; "0" / "1": off / on; anything else is reported on stderr (an A/B run with a typo would
// otherwise measure the default without saying so) and the default kept. Callers read it once (a
// function-local static), so the report comes once.
bool envSwitch(const char* name, bool def);

// A 0/1 switch read from the environment once (envSwitch, on first use) that a run-time override replaces: the
// CUDA backend's kernel choices that bench-device and the self-test flip within one process (TS_MLA_TC,
// TS_MHC_FUSED, TS_IDX_FAST and their setters in kernels/exl3_tune.h). set(1 or 0) overrides it, anything else
// clears the override; set returns the previous override (−1: none).
class OverridableSwitch {
public:
    constexpr OverridableSwitch(const char* name, bool def) : m_name(name), m_def(def) {}
    int set(int on) { return m_override.exchange(on == 0 || on == 1 ? on : -1); }
    bool on() const {
        const int o = m_override.load(std::memory_order_relaxed);
        if (o >= 0) return o == 1;
        std::call_once(m_once, [this] { m_env = envSwitch(m_name, m_def); });
        return m_env;
    }

private:
    const char* m_name;
    bool m_def;
    std::atomic<int> m_override{-1};
    mutable std::once_flag m_once;
    mutable bool m_env = false;
};

// Unset or empty: `def`; a decimal integer in [0, 2^31): that value; anything else (a sign, a suffix, a
// number out of range) is reported on stderr and `def` kept. Read once by callers, as envSwitch.
int64_t envCount(const char* name, int64_t def);

// A count in [0, modes): envCount's value, or `def` (reported on stderr) when it is modes or more.
int envMode(const char* name, int modes, int def);

// A mode variable with `modes` values read from the environment once (envMode, on first use) that a run-time
// override replaces: the CUDA backend's multi-way kernel choices (TS_GEMV1, TS_GEMV_MULTI, TS_GEMM, TS_MHC_SIDE and
// their setters in kernels/exl3_tune.h). set(m) overrides it for m in [0, modes), anything else clears the
// override; set returns the previous override (−1: none).
class ModeSwitch {
public:
    constexpr ModeSwitch(const char* name, int modes, int def) : m_name(name), m_modes(modes), m_def(def) {}
    int set(int mode) { return m_override.exchange(mode >= 0 && mode < m_modes ? mode : -1); }
    int now() const {
        const int o = m_override.load(std::memory_order_relaxed);
        if (o >= 0) return o;
        std::call_once(m_once, [this] { m_env = envMode(m_name, m_modes, m_def); });
        return m_env;
    }

private:
    const char* m_name;
    int m_modes, m_def;
    std::atomic<int> m_override{-1};
    mutable std::once_flag m_once;
    mutable int m_env = 0;
};

}  // namespace ts
