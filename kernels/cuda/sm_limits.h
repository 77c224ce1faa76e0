// The per-SM limits of another GPU's SMs, applied on this one (TS_CUDA_SM_LIMITS=gb10; kernels/cuda/cuda_partition.cu
// does it): the arithmetic, host-only and testable without a GPU (tests/kernels/test_sm_limits.cpp).
//
// Why: with TS_CUDA_SMS=48 an H100 or H200 runs the backend on a GB10's number of SMs, but each of those SMs still
// holds 228 KiB of shared memory and 2,048 threads, against a GB10 SM's 100 KiB and 1,536 (compute capability
// 12.x). A kernel whose blocks are limited by shared memory therefore keeps more of them resident per SM than it
// could on a GB10 — the EXL3 decode unit 8 instead of 3, the tensor-core sparse MLA 2 instead of 1 — and hides
// latency with warps a GB10 would not have. Under the limits, each launch asks for enough (unused) dynamic shared
// memory that the device holds no more of its blocks per SM than a GB10 SM would, and the planners that size grids
// by residency plan with the GB10's count. Not emulated: a GB10 SM's clock, its L1 beside that shared memory
// (the driver sizes this SM's carveout for the padded blocks), its L2 and its memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace ts::cuda {

struct SmShape {
    const char* name;
    int64_t smemPerSm;         // bytes of shared memory an SM has for blocks (the reserve per block included)
    int64_t reservedPerBlock;  // bytes the system takes per resident block
    int threadsPerSm;          // resident threads
};

// Compute capability 12.x (the GB10 is 12.1): 100 KiB of shared memory per SM, 99 KiB for one block, 1 KiB reserved
// per block, 1,536 threads (the CUDA programming guide's table; deviceQuery on a 12.0 part reads 102,400 and 1,536).
inline constexpr SmShape kGb10Sm{"gb10", 102400, 1024, 1536};

// The shared memory one block may have on an SM of shape s when the device allows deviceOptin: the lower of the two
// (the SM's bytes less its per-block reserve: 99 KiB on a GB10).
inline int64_t limitedBlockOptin(const SmShape& s, int64_t deviceOptin) {
    return std::min(deviceOptin, s.smemPerSm - s.reservedPerBlock);
}

// The shape of that name ("gb10"), or null.
inline const SmShape* smShapeNamed(std::string_view name) { return name == kGb10Sm.name ? &kGb10Sm : nullptr; }

// Blocks of `threads` threads and `blockSmem` bytes of shared memory (static + dynamic) that an SM of shape s holds,
// given that the device's own SM holds deviceBlocks of them (its registers and block slots are counted there; a
// GB10 SM has as many registers, 64 K). 0: the kernel cannot run on such an SM.
// Shared memory is given to a block in units of kSmemUnit bytes (its request rounded up).
inline constexpr int64_t kSmemUnit = 128;
inline int limitedBlocks(const SmShape& s, int64_t blockSmem, int threads, int deviceBlocks) {
    int64_t n = deviceBlocks;
    if (threads > 0) n = std::min<int64_t>(n, s.threadsPerSm / threads);
    const int64_t granted = (blockSmem + kSmemUnit - 1) / kSmemUnit * kSmemUnit;
    n = std::min<int64_t>(n, s.smemPerSm / (granted + s.reservedPerBlock));  // 0 past 99 KiB a block
    return int(std::max<int64_t>(0, n));
}

// The dynamic shared memory to launch with on a device whose SM has devSmemPerSm bytes for blocks (devReserved of
// them per block) so that it holds at most `want` (≥ 1) blocks whose static part is staticSmem: the smallest amount
// at least dyn for which want + 1 blocks no longer fit. dyn itself when it already keeps the count at or under want
// (the caller knows the device's count; this gives the byte count that meets it).
inline int64_t paddedDynSmem(int64_t devSmemPerSm, int64_t devReserved, int64_t staticSmem, int64_t dyn, int want) {
    const int64_t perBlock = devSmemPerSm / (int64_t(want) + 1) + 1;  // (want + 1) × perBlock > devSmemPerSm
    return std::max(dyn, perBlock - devReserved - staticSmem);
}

}  // namespace ts::cuda
