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
// N is rounded up by the driver (on compute capability 9.0 and later to a multiple of 8, at least 8; the line printed
// at open gives the count); 0, or N at least the device's count, is the whole GPU. Not a product setting: serve and
// generate honour it too (for a whole-engine run on a partition). A request that cannot be met — a driver without
// green contexts, a count the device cannot split — fails the CUDA backend's open with why, never running on the
// whole GPU instead (a measurement on the wrong number of SMs would say nothing; `--backend auto` then warns and
// takes the CPU, and `bench-device --sms` asks for CUDA so that the reason is what it reports). cuBLAS is told the
// partition's count too (cublasSetSmCountTarget, in the constructor).
// Test and use, on the GPU only: `twinspark-cli bench-device --sms 48 --what exl3` (its header line and JSON say
// how many SMs ran: 48 of the H200's 132), `TS_CUDA_SMS=48 twinspark-cli selftest --backend cuda` (the kernels
// planned for 48 SMs against the CPU); scripts/gpu/partition_check.sh runs both, and the slice, per count in SMS.
//
// The SMs' own limits (TS_CUDA_SM_LIMITS=gb10, or bench-device --sm-limits gb10; with or without a partition): each
// SM holds no more blocks of a kernel than a GB10 SM would (100 KiB of shared memory, 1,536 threads; sm_limits.h
// says why this matters). props() then reports the GB10's shared memory per SM and per block and its threads per
// SM, so the planners that read them plan within them; the EXL3 decode and prefill planners count resident blocks
// through limitedResidentBlocks; and every launch of ours (launchPdl and launchPlain, cuda_common.cuh: all of kernels/cuda's
// kernels) gets its dynamic shared memory padded (limitedLaunchSmem) so that the device's SM really holds that
// many. cuBLAS's kernels keep the device's limits.
// Test: the arithmetic on the host (tests/kernels/test_sm_limits.cpp); on a GPU, `TS_CUDA_SM_LIMITS=gb10
// TS_CUDA_SMS=48 twinspark-cli selftest --backend cuda` and partition_check.sh with LIMITS=gb10.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "core/env_switch.h"
#include "core/error.h"
#include "core/log.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"
#include "cuda/sm_limits.h"

namespace ts {
namespace {

// The driver entry points at the ABI of CUDA 12.5 (green-context streams arrived then; the function types below are
// cudaTypedefs.h's for those versions), or a clear Unsupported error.
constexpr unsigned kGreenAbi = 12050;

template <class F>
F driverEntry(const char* name) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, kGreenAbi, cudaEnableDefault, &found);
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || !fn) {
        cudaGetLastError();
        fail(ErrorKind::Unsupported, std::string("TS_CUDA_SMS: the CUDA driver has no ") + name +
                                         " (green contexts need a CUDA 12.5 or later driver)");
    }
    return reinterpret_cast<F>(fn);
}

void checkDriver(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return;
    fail(ErrorKind::Unsupported, std::string("TS_CUDA_SMS: ") + what + " failed (CUresult " + std::to_string(int(r)) + ")");
}

}  // namespace

void CudaBackend::openSmPartition(int greatestPriority) {
    const int64_t asked = envCount("TS_CUDA_SMS", 0);
    const int whole = m_props.multiProcessorCount;
    if (asked <= 0) return;  // unset or 0: the whole device, the primary context's streams
    if (asked >= whole) {
        logFormat(LogLevel::Info, "CUDA: TS_CUDA_SMS=%lld is the whole %s (%d SMs): no partition",
                  static_cast<long long>(asked), m_props.name, whole);
        return;
    }
    const auto deviceGet = driverEntry<PFN_cuDeviceGet_v2000>("cuDeviceGet");
    const auto getResource = driverEntry<PFN_cuDeviceGetDevResource_v12040>("cuDeviceGetDevResource");
    const auto split = driverEntry<PFN_cuDevSmResourceSplitByCount_v12040>("cuDevSmResourceSplitByCount");
    const auto generate = driverEntry<PFN_cuDevResourceGenerateDesc_v12040>("cuDevResourceGenerateDesc");
    const auto greenCreate = driverEntry<PFN_cuGreenCtxCreate_v12040>("cuGreenCtxCreate");
    const auto greenStream = driverEntry<PFN_cuGreenCtxStreamCreate_v12050>("cuGreenCtxStreamCreate");
    const auto greenDestroy = driverEntry<PFN_cuGreenCtxDestroy_v12040>("cuGreenCtxDestroy");

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
    // Both streams before anything is replaced: a failure leaves the backend's streams as they were and takes the
    // green context (and a stream made in it) back, since a constructor that throws runs no destructor.
    CUstream main = nullptr, side = nullptr;
    CUresult r = greenStream(&main, green, CU_STREAM_NON_BLOCKING, 0);
    if (r == CUDA_SUCCESS) r = greenStream(&side, green, CU_STREAM_NON_BLOCKING, greatestPriority);
    if (r != CUDA_SUCCESS) {
        if (main) cudaStreamDestroy(main);
        greenDestroy(green);
        checkDriver(r, "cuGreenCtxStreamCreate");
    }
    // The constructor's streams, made in the primary context: nothing was issued to them yet.
    TS_CUDA_CHECK(cudaStreamDestroy(m_stream));
    TS_CUDA_CHECK(cudaStreamDestroy(m_side));
    m_stream = main;
    m_side = side;
    m_greenContext = green;  // destroyed after its streams (closeSmPartition, from ~CudaBackend)
    m_greenDestroy = reinterpret_cast<void*>(greenDestroy);
    m_props.multiProcessorCount = int(part.sm.smCount);
    m_partitionOf = whole;
    logFormat(LogLevel::Info, "CUDA: running on %d of the %s's %d SMs (TS_CUDA_SMS=%lld, a green context)",
              int(part.sm.smCount), m_props.name, whole, static_cast<long long>(asked));
}

void CudaBackend::closeSmPartition() {  // from the destructor, after the streams: reports nothing, throws nothing
    if (m_greenContext && m_greenDestroy)
        reinterpret_cast<PFN_cuGreenCtxDestroy_v12040>(m_greenDestroy)(static_cast<CUgreenCtx>(m_greenContext));
    m_greenContext = nullptr;
}

// ---- Another GPU's per-SM limits (TS_CUDA_SM_LIMITS) ------------------------------------------------------------

namespace cuda {
std::atomic<bool> g_smLimitsOn{false};  // (cuda_common.cuh) constant-initialised: its constructor is constexpr
}  // namespace cuda

namespace {

// What the limits know of one kernel: its static shared memory, the highest maximum dynamic shared memory they
// have given it (never lowered by them: a kernel launched with several sizes — the indexer's top-k grows with the
// context — must keep every size it was allowed), and whether any of its launches is padded.
struct KernelLimits {
    int64_t staticSmem = 0;
    int64_t attrHigh = 0;  // cudaFuncAttributeMaxDynamicSharedMemorySize as these functions last raised it
    bool padded = false;
};

// The limits in force (process-wide, as the environment variable is; set by the first CUDA backend that opens under
// them, cleared by the last to close; one device) and, per kernel, what they came to, with per (kernel, threads,
// dynamic shared memory) launched the padded dynamic shared memory.
struct SmLimitState {
    std::mutex mutex;
    int backends = 0;  // CUDA backends open under them (on while > 0; all of a process read the same variable)
    int device = -1;
    cuda::SmShape shape{};
    int64_t devSmemPerSm = 0;  // the device's own SM: bytes of shared memory for blocks, and the reserve per block
    int64_t devReserved = 0;
    std::map<const void*, KernelLimits> kernels;
    std::map<std::tuple<const void*, int, size_t>, size_t> padded;
};
SmLimitState& smLimitState() {
    static SmLimitState s;
    return s;
}
KernelLimits& kernelOf(SmLimitState& s, const void* fn) {  // (under s.mutex)
    auto it = s.kernels.find(fn);
    if (it != s.kernels.end()) return it->second;
    cudaFuncAttributes a{};
    TS_CUDA_CHECK(cudaFuncGetAttributes(&a, fn));
    KernelLimits k;
    k.staticSmem = int64_t(a.sharedSizeBytes);
    k.attrHigh = int64_t(a.maxDynamicSharedSizeBytes);
    return s.kernels.emplace(fn, k).first->second;
}
// The kernel's maximum dynamic shared memory set to at least `bytes` and to no less than these functions ever gave
// it — set again each time, since the op code sets it to its own amount before launching (which may be lower).
void raiseAttribute(KernelLimits& k, const void* fn, int64_t bytes) {  // (under s.mutex)
    k.attrHigh = std::max(k.attrHigh, bytes);
    TS_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(k.attrHigh)));
}

}  // namespace

namespace cuda {

int limitedResidentBlocks(const void* fn, int threads, size_t dynSmem, int deviceBlocks) {
    SmLimitState& s = smLimitState();
    if (!cuda::g_smLimitsOn.load(std::memory_order_acquire)) return deviceBlocks;
    std::lock_guard<std::mutex> lock(s.mutex);
    return limitedBlocks(s.shape, kernelOf(s, fn).staticSmem + int64_t(dynSmem), threads, deviceBlocks);
}

size_t limitedBlockSmemOptin(size_t deviceOptin) {
    SmLimitState& s = smLimitState();
    if (!cuda::g_smLimitsOn.load(std::memory_order_acquire)) return deviceOptin;
    std::lock_guard<std::mutex> lock(s.mutex);
    return size_t(limitedBlockOptin(s.shape, int64_t(deviceOptin)));
}

void launchFailed(cudaError_t e, const void* fn) {
    (void)cudaGetLastError();
    const char* name = nullptr;
    if (cudaFuncGetName(&name, fn) != cudaSuccess || !name) {
        (void)cudaGetLastError();
        name = "a kernel";
    }
    throwCuda(e, (std::string("launch of ") + name).c_str(), __FILE__, __LINE__);
}

size_t limitedLaunchSmem(const void* fn, int threads, size_t dynSmem) {
    SmLimitState& s = smLimitState();
    if (!cuda::g_smLimitsOn.load(std::memory_order_acquire)) return dynSmem;
    std::lock_guard<std::mutex> lock(s.mutex);
    KernelLimits& k = kernelOf(s, fn);
    const auto key = std::make_tuple(fn, threads, dynSmem);
    auto it = s.padded.find(key);
    if (it == s.padded.end()) {
        const int64_t st = k.staticSmem;
        int device = 0;  // the occupancy calculator needs the attribute to allow dynSmem (the op code set it so)
        if (int64_t(dynSmem) > k.attrHigh) raiseAttribute(k, fn, int64_t(dynSmem));
        TS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&device, fn, threads, dynSmem));
        const int want = limitedBlocks(s.shape, st + int64_t(dynSmem), threads, device);
        if (want < 1)
            fail(ErrorKind::Unsupported,
                 std::string("TS_CUDA_SM_LIMITS=") + s.shape.name + ": a kernel's block (" + std::to_string(threads) +
                     " threads, " + std::to_string(st + int64_t(dynSmem)) + " bytes of shared memory) does not fit a " +
                     s.shape.name + " SM");
        size_t out = dynSmem;
        if (want < device) {
            // The arithmetic's amount, then grown by the device's allocation unit until want + 1 blocks no longer fit
            // (the occupancy calculator is the judge).
            int64_t d = paddedDynSmem(s.devSmemPerSm, s.devReserved, st, int64_t(dynSmem), want);
            for (int step = 0;; ++step) {
                raiseAttribute(k, fn, d);
                int got = 0;
                TS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&got, fn, threads, size_t(d)));
                if (got == want) break;
                if (got < want || step == 64)
                    fail(ErrorKind::Internal, std::string("TS_CUDA_SM_LIMITS: no padding gives ") + std::to_string(want) +
                                                  " resident blocks (" + std::to_string(got) + " at " +
                                                  std::to_string(d) + " bytes)");
                d += 128;
            }
            out = size_t(d);
            k.padded = true;
        }
        it = s.padded.emplace(key, out).first;
    }
    // Every launch of a padded kernel (padded this time or not) raises the attribute back to the highest padding: the
    // op code may have lowered it to its own amount, and graphs captured with a padded launch replay with this one.
    if (k.padded) raiseAttribute(k, fn, int64_t(it->second));
    return it->second;
}

}  // namespace cuda

void CudaBackend::openSmLimits() {
    const char* v = std::getenv("TS_CUDA_SM_LIMITS");
    if (!v || !*v) return;
    const cuda::SmShape* shape = cuda::smShapeNamed(v);
    if (!shape) fail(ErrorKind::InvalidArgument, std::string("TS_CUDA_SM_LIMITS: '") + v + "' is not a known SM (gb10)");
    const int64_t devSmem = int64_t(m_props.sharedMemPerMultiprocessor);
    if (devSmem < shape->smemPerSm || m_props.maxThreadsPerMultiProcessor < shape->threadsPerSm)
        fail(ErrorKind::Unsupported, std::string("TS_CUDA_SM_LIMITS=") + v + ": the " + m_props.name +
                                         "'s SMs are smaller than a " + v + " SM's: its limits cannot be emulated on them");
    SmLimitState& s = smLimitState();
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.backends > 0 && s.device != m_device)
            fail(ErrorKind::Unsupported, "TS_CUDA_SM_LIMITS: a CUDA backend on another device has them (one device)");
        if (s.backends++ == 0) {
            s.device = m_device;
            s.shape = *shape;
            s.devSmemPerSm = devSmem;
            s.devReserved = int64_t(m_props.reservedSharedMemPerBlock);
            s.kernels.clear();
            s.padded.clear();
            cuda::g_smLimitsOn.store(true, std::memory_order_release);
        }
    }
    m_smLimits = true;
    const int devThreads = m_props.maxThreadsPerMultiProcessor;
    m_props.sharedMemPerMultiprocessor = size_t(shape->smemPerSm);
    m_props.sharedMemPerBlockOptin = size_t(cuda::limitedBlockOptin(*shape, int64_t(m_props.sharedMemPerBlockOptin)));
    m_props.maxThreadsPerMultiProcessor = shape->threadsPerSm;
    logFormat(LogLevel::Info,
              "CUDA: each SM limited to a %s SM's %lld KiB of shared memory (%zu KiB per block) and %d threads "
              "(TS_CUDA_SM_LIMITS; the %s's own: %lld KiB, %d threads)",
              shape->name, static_cast<long long>(shape->smemPerSm / 1024), m_props.sharedMemPerBlockOptin / 1024,
              shape->threadsPerSm, m_props.name, static_cast<long long>(devSmem / 1024), devThreads);
}

void CudaBackend::closeSmLimits() {  // from the destructor: reports nothing, throws nothing
    if (!m_smLimits) return;
    SmLimitState& s = smLimitState();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (--s.backends == 0) {
        cuda::g_smLimitsOn.store(false, std::memory_order_release);
        s.kernels.clear();  // (the attributes they raised stay raised: a higher maximum only permits more)
        s.padded.clear();
        s.device = -1;
    }
    m_smLimits = false;
}

}  // namespace ts
