// A 0/1 switch from the environment: the A/B switches of the CUDA backend (TS_CUDA_GRAPHS, TS_GEMV_SPLIT,
// TS_GEMV_STREAM, TS_MOE_DEVICE_ROUTE; docs/PERFORMANCE.md says what each measured).
#pragma once

namespace ts {

// Unset: `def`; "0" / "1": off / on; anything else is reported on stderr (an A/B run with a typo would
// otherwise measure the default without saying so) and the default kept. Callers read it once (a
// function-local static), so the report comes once.
bool envSwitch(const char* name, bool def);

}  // namespace ts
