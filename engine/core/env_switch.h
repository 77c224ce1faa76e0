// 0/1 switches and counts from the environment: the A/B switches of the CUDA backend (TS_CUDA_GRAPHS,
// TS_GEMV_SPLIT, TS_GEMV_STREAM, TS_MOE_DEVICE_ROUTE; TS_GEMV1, TS_EXL3_TUNE, TS_EXL3_KSL, TS_KDA_CHUNK;
// docs/PERFORMANCE.md says what each measured).
#pragma once

#include <cstdint>

namespace ts {

// Unset: `def`; "0" / "1": off / on; anything else is reported on stderr (an A/B run with a typo would
// otherwise measure the default without saying so) and the default kept. Callers read it once (a
// function-local static), so the report comes once.
bool envSwitch(const char* name, bool def);

// Unset or empty: `def`; a decimal integer in [0, 2^31): that value; anything else (a sign, a suffix, a
// number out of range) is reported on stderr and `def` kept. Read once by callers, as envSwitch.
int64_t envCount(const char* name, int64_t def);

}  // namespace ts
