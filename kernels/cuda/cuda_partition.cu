// cuda_partition: the backend on part of the GPU's SMs (TS_CUDA_SMS=N), through a CUDA green context — to measure
// on a big GPU (the H200, an H100) what a GPU with fewer SMs would do with the same kernels. Its use: the product's
// GPU, a GB10, has 48 SMs against the H200's 132 (and ~273 GB/s of memory against ~4.2 TB/s), and whether a kernel
// is bound by its instructions or by memory there is a question of how fast 48 SMs can work, which the whole H200
// cannot answer (docs/PERFORMANCE_EXL3.md, the fourth 2026-12-06 session). Host code only: no kernel of its own.
//
// How: the device's SM resource is split by count (cuDevSmResourceSplitByCount: on compute capability 9.0 and
// later a partition is a multiple of 8 SMs, at least 8, so N is rounded up), a green context is made of the first
// group, and the backend's two streams (its main one and the side stream) are created in it. Work on those streams
// runs on the partition's SMs only; memory, modules and events are the primary context's (a green context retains
// it), so nothing else in the backend changes. props().multiProcessorCount becomes the partition's count, so the
// kernels that size their grids by the SM count (the EXL3 decode units, the MLA chunk plans, the indexer, the KDA
// chunks) plan for the partition. The driver API comes through cudaGetDriverEntryPointByVersion: no link against
// libcuda.
//
// Not a product setting: serve and generate honour it too (for a whole-engine run on a partition), and a request
// that cannot be met — a driver without green contexts, a count the device cannot split — fails at open with
// why, never falling back to the whole GPU (a measurement on the wrong number of SMs would say nothing).
// Test and use, on the GPU only: `twinspark-cli bench-device --sms 48 --what exl3` (its header line and JSON say
// how many SMs ran: 48 of the H200's 132), `TS_CUDA_SMS=48 twinspark-cli selftest --backend cuda` (the kernels
// planned for 48 SMs against the CPU); scripts/gpu/partition_check.sh runs both, and the slice, per count in SMS.
#include <cuda.h>

#include <cstdio>
#include <string>

#include "core/env_switch.h"
#include "core/error.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"

namespace ts {
namespace {

// A driver entry point of CUDA 12.4 or later (green contexts), or a clear Unsupported error.
template <class F>
F driverEntry(const char* name) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, CUDA_VERSION, cudaEnableDefault, &found);
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || !fn) {
        cudaGetLastError();
        fail(ErrorKind::Unsupported, std::string("TS_CUDA_SMS: the CUDA driver has no ") + name +
                                         " (green contexts need a CUDA 12.4 or later driver)");
    }
    return reinterpret_cast<F>(fn);
}

void checkDriver(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return;
    fail(ErrorKind::Unsupported,
         std::string("TS_CUDA_SMS: ") + what + " failed (CUresult " + std::to_string(int(r)) + ")");
}

}  // namespace

void CudaBackend::openSmPartition(int greatestPriority) {
    const int64_t asked = envCount("TS_CUDA_SMS", 0);
    const int whole = m_props.multiProcessorCount;
    if (asked <= 0) return;  // unset or 0: the whole device, the primary context's streams
    if (asked >= whole) {
        std::fprintf(stderr, "CUDA: TS_CUDA_SMS=%lld is the whole %s (%d SMs): no partition\n",
                     static_cast<long long>(asked), m_props.name, whole);
        return;
    }
    using GetResource = CUresult (*)(CUdevice, CUdevResource*, CUdevResourceType);
    using SplitByCount = CUresult (*)(CUdevResource*, unsigned*, const CUdevResource*, CUdevResource*, unsigned, unsigned);
    using GenerateDesc = CUresult (*)(CUdevResourceDesc*, CUdevResource*, unsigned);
    using GreenCreate = CUresult (*)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned);
    using GreenStream = CUresult (*)(CUstream*, CUgreenCtx, unsigned, int);
    using DeviceGet = CUresult (*)(CUdevice*, int);
    const auto deviceGet = driverEntry<DeviceGet>("cuDeviceGet");
    const auto getResource = driverEntry<GetResource>("cuDeviceGetDevResource");
    const auto split = driverEntry<SplitByCount>("cuDevSmResourceSplitByCount");
    const auto generate = driverEntry<GenerateDesc>("cuDevResourceGenerateDesc");
    const auto greenCreate = driverEntry<GreenCreate>("cuGreenCtxCreate");
    const auto greenStream = driverEntry<GreenStream>("cuGreenCtxStreamCreate");

    CUdevice dev = 0;
    checkDriver(deviceGet(&dev, m_device), "cuDeviceGet");
    CUdevResource all{};
    checkDriver(getResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
    CUdevResource part{}, rest{};
    unsigned groups = 1;
    checkDriver(split(&part, &groups, &all, &rest, 0, unsigned(asked)), "cuDevSmResourceSplitByCount");
    if (groups < 1 || part.sm.smCount == 0 || int(part.sm.smCount) >= whole)
        fail(ErrorKind::Unsupported, "TS_CUDA_SMS=" + std::to_string(asked) + ": the device's " + std::to_string(whole) +
                                         " SMs cannot be split into a part of that size");
    CUdevResourceDesc desc = nullptr;
    checkDriver(generate(&desc, &part, 1), "cuDevResourceGenerateDesc");
    CUgreenCtx green = nullptr;
    checkDriver(greenCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
    // Replaces the streams the constructor made in the primary context; nothing was issued to them yet.
    TS_CUDA_CHECK(cudaStreamDestroy(m_stream));
    TS_CUDA_CHECK(cudaStreamDestroy(m_side));
    CUstream main = nullptr, side = nullptr;
    checkDriver(greenStream(&main, green, CU_STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate");
    checkDriver(greenStream(&side, green, CU_STREAM_NON_BLOCKING, greatestPriority), "cuGreenCtxStreamCreate");
    m_stream = main;
    m_side = side;
    m_greenContext = green;  // destroyed after its streams (closeSmPartition, from ~CudaBackend)
    m_props.multiProcessorCount = int(part.sm.smCount);
    m_partitionOf = whole;
    std::fprintf(stderr, "CUDA: running on %d of the %s's %d SMs (TS_CUDA_SMS=%lld, a green context)\n",
                 int(part.sm.smCount), m_props.name, whole, static_cast<long long>(asked));
}

void CudaBackend::closeSmPartition() {  // from the destructor: reports nothing, throws nothing
    if (!m_greenContext) return;
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuGreenCtxDestroy", &fn, CUDA_VERSION, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess && fn)
        reinterpret_cast<CUresult (*)(CUgreenCtx)>(fn)(static_cast<CUgreenCtx>(m_greenContext));
    m_greenContext = nullptr;
}

}  // namespace ts
