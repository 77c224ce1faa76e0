// The host's memory as Linux reports it in /proc/meminfo. On a GPU that shares the system's memory (the
// GB10's integrated GPU in a DGX Spark) this is the GPU's memory too, and MemAvailable is the figure to plan
// with: cudaMemGetInfo reports MemFree there, which counts the page cache — reclaimable, and tens of GiB
// right after a checkpoint was copied or loaded — as used (NVIDIA's DGX Spark known issues; the recipe's
// docs/cold-load-uma.md measured MemFree ~2 GiB against MemAvailable ~117 GiB after its 164 GiB sync).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ts {

struct HostMemory {
    int64_t totalBytes = 0;      // MemTotal
    int64_t freeBytes = 0;       // MemFree: never touched pages only
    int64_t availableBytes = 0;  // MemAvailable: what can be allocated without swapping (free + reclaimable)
};

// The three fields from the text of /proc/meminfo ("Name:   <value> kB" lines, any order); nullopt when one
// is missing or malformed (a kernel older than 3.14 has no MemAvailable: then nothing is guessed).
std::optional<HostMemory> parseMemInfo(const std::string& text);

// parseMemInfo of this machine's /proc/meminfo; nullopt when it cannot be read.
std::optional<HostMemory> readHostMemory();

// Whether a device's memory figures (cudaMemGetInfo: free, total) are the host's: free within 2 GiB of MemFree
// and total within 5 % of MemTotal. A discrete card's free memory does not follow the host's MemFree; a GPU
// that shares the system's memory reports exactly that (the fallback when the driver does not flag the device
// as integrated; kernels/cuda/cuda_memory.cu).
bool looksUnified(int64_t deviceFree, int64_t deviceTotal, const HostMemory& host);

}  // namespace ts
