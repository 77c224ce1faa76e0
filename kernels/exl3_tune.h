// Run-time A/B switches of the CUDA backend's EXL3 kernels (and the KDA prefill's chunked form), for
// benchmarks and tests (bench-device --what exl3 / kda, the exl3 self-test). Process-wide; no-ops that return
// 0 (kdaSetChunkMinTokens: −1) in builds without CUDA.
#pragma once

#include <cstdint>

namespace ts {

// The fused EXL3 MoE (CudaBackend::moeExpertsFused, kernels/cuda/cuda_exl3_moe.cu) runs a layer's routed
// experts in one launch (the default) or, for A/B comparisons, in the earlier two launches (gate/up +
// swiglu, then down + combine; a third, the combine, when the step has more than 256 (token, expert)
// pairs). One launch needs gate/up and down to share K and codebook (converters normally make them so);
// otherwise the call takes two launches whatever the switch. The environment picks with TS_EXL3_TUNE bit 4 (= two launches, docs/PERFORMANCE.md); n = 1 or 2
// overrides it from now on, n = 0 restores the environment's choice. Returns the previous override (0:
// none). Both variants compute bit-identical results.
int exl3MoeSetLaunches(int n);
// Kernel launches of the last fused MoE call in this process (1, 2 or 3; 0 before any).
int exl3MoeLastLaunches();
// The variant in force now: 1 or 2 (0 without CUDA).
int exl3MoeLaunches();
// Whether the fused MoE may take its work list from device-side routing (moeExpertsFusedDevice,
// kernels/cuda/cuda_exl3_moe_routed.cu): on unless TS_MOE_DEVICE_ROUTE=0 (A/B; a value other than 0 or 1 is
// reported on stderr); false without CUDA.
bool exl3MoeDeviceRouting();
// The unit that EXL3 jobs planned as one stage per slice (decode steps of up to ~8–12 rows per matrix) run on,
// as TS_EXL3_TUNE sets it (bits 8 and 16, docs/PERFORMANCE.md): "streaming, shared-memory ring" (the default),
// "streaming, register ring" or "staged", with ", one-stage slices" under bit 64, ", launched without PDL"
// under bit 32 and ", slices of N k-tiles" under TS_EXL3_KSL=N (decode plans' slice length forced, for A/B
// runs); "none" without CUDA.
// Bigger jobs run the staged unit whatever it says.
const char* exl3DecodeUnit();

// The KDA prefill (CudaBackend::kdaRecurrent) takes the chunked form for T ≥ a threshold: TS_KDA_CHUNK (read
// once; 0 = never chunked) or 16. kdaSetChunkMinTokens(t) overrides it from now on (t ≥ 0, same meaning), t < 0
// restores the environment's; returns the previous override (−1: none). bench-device's recurrent vs chunked
// timings use it (setting TS_KDA_CHUNK in a running process has no effect after the first read).
int64_t kdaSetChunkMinTokens(int64_t t);
// The threshold in force now (0: never chunked; 0 without CUDA).
int64_t kdaChunkMinTokens();

}  // namespace ts
