// Helpers shared by the CUDA op files: error checks that throw ts::Error, launch arithmetic, and the
// scalar conversions the kernels need (bf16 / f16 / fp8 e4m3 to fp32, as in core/dtype.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "cuda/cuda_error.h"

namespace ts::cuda {

inline void check(cudaError_t e, const char* what, const char* file, int line) {
    if (e != cudaSuccess) throwCuda(e, what, file, line);
}
inline void check(cublasStatus_t s, const char* what, const char* file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    // A cuBLAS failure can be the first sign of a lost context: report the runtime's sticky error as such, so the
    // engine stops now instead of one step later.
    if (const cudaError_t e = cudaPeekAtLastError(); isStickyError(e)) throwCuda(e, what, file, line);
    throwCuda(what, cublasGetStatusString(s), file, line);
}

inline unsigned blocksFor(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

// Weight element → fp32 (dtype codes as DType: 0 = BF16, 1 = F16, 2 = F32).
__device__ __forceinline__ float loadWeight(const void* base, int64_t i, int dtype) {
    if (dtype == 0) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    if (dtype == 1) return __half2float(static_cast<const __half*>(base)[i]);
    return static_cast<const float*>(base)[i];
}

// Eight consecutive weight elements starting at element i (16-byte aligned for BF16/F16; for F32 two
// 16-byte loads) widened to fp32.
// STREAM: the load does not allocate in L1 (read once), so the activations the same warps read again and
// again stay there (the multi-token GEMV reads x [NT, K] once per weight row pair; TS_GEMV_STREAM A/B).
template <bool STREAM>
__device__ __forceinline__ uint4 ldWeight16(const void* p) {
    if constexpr (STREAM) {
        uint4 v;
        asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(p));
        return v;
    } else {
        return __ldg(static_cast<const uint4*>(p));
    }
}

template <int DT, bool STREAM = false>
__device__ __forceinline__ void load8(const void* base, int64_t i, float (&o)[8]) {
    if constexpr (DT == 2) {
        const float* p = static_cast<const float*>(base) + i;
        const uint4 a = ldWeight16<STREAM>(p), b = ldWeight16<STREAM>(p + 4);
        o[0] = __uint_as_float(a.x); o[1] = __uint_as_float(a.y); o[2] = __uint_as_float(a.z); o[3] = __uint_as_float(a.w);
        o[4] = __uint_as_float(b.x); o[5] = __uint_as_float(b.y); o[6] = __uint_as_float(b.z); o[7] = __uint_as_float(b.w);
    } else {
        const uint4 v = ldWeight16<STREAM>(static_cast<const uint16_t*>(base) + i);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            if constexpr (DT == 0) {  // bf16 → fp32 is the high half of the fp32 bits (little-endian pairs)
                o[2 * q] = __uint_as_float(w[q] << 16);
                o[2 * q + 1] = __uint_as_float(w[q] & 0xffff0000u);
            } else {
                o[2 * q] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[q] & 0xffffu)));
                o[2 * q + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[q] >> 16)));
            }
        }
    }
}

__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

// Warp / block reductions (blockDim.x a multiple of 32, at most 1024).
__device__ __forceinline__ float warpSum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warpMax(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Sum over the block; `shared` holds 32 floats. All threads get the result.
__device__ __forceinline__ float blockSum(float v, float* shared) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nWarps = (blockDim.x + 31) >> 5;
    v = warpSum(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < nWarps ? shared[lane] : 0.0f;
    return warpSum(v);
}

// Max over the block (all threads get it); `shared` holds 32 floats.
__device__ __forceinline__ float blockMax(float v, float* shared) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nWarps = (blockDim.x + 31) >> 5;
    v = warpMax(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < nWarps ? shared[lane] : -INFINITY;
    return warpMax(v);
}

// Double-precision sums (where the CPU reference sums in double).
__device__ __forceinline__ double warpSumD(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double blockSumD(double v, double* shared) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nWarps = (blockDim.x + 31) >> 5;
    v = warpSumD(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < nWarps ? shared[lane] : 0.0;
    return warpSumD(v);
}

// One thread's arrival at a block counter (gpu scope, acquire-release), after a __syncthreads: the release
// half publishes the block's stores ordered before the barrier (cumulativity), the acquire half lets the
// last arrival see every earlier arrival's, and its block sees them after the next barrier (the readers
// then load with ld.cg: L1 is not coherent). Used where the last block to finish a piece of work finishes
// it (the EXL3 units' split-K, the fused mHC pre). Replaces __threadfence (fence.sc.gpu, a sequentially
// consistent fence that held every EXL3 unit ~2 µs at its end) + atomicAdd.
__device__ __forceinline__ int atomAddAcqRel(int* p, int v) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

// Programmatic dependent launch (sm_90+; kernels launched with the attribute, launchPdl below or the EXL3
// launcher): a kernel may start while the previous kernel in the stream is finishing. pdlWait blocks until that
// kernel has completed and its memory is visible — before it, a kernel reads only what kernels before that one
// wrote (its parameters, weights); pdlTrigger lets the next kernel start once every block of this one has
// issued it (or exited).
__device__ __forceinline__ void pdlWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdlTrigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// The device's global clock (%globaltimer, ns; one clock for all SMs) and the SM a thread runs on: the phase
// traces' stamps (the EXL3 streaming unit's TRACE instantiation, the device-routed MoE's plan kernel).
__device__ __forceinline__ unsigned long long globalTimerNs() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned smId() {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;\n" : "=r"(sm));
    return sm;
}

}  // namespace ts::cuda

#define TS_CUDA_CHECK(expr) ::ts::cuda::check((expr), #expr, __FILE__, __LINE__)
// (Kernel launches need no check after them: launchPdl below throws on a failed launch, naming the kernel; errors of
// the kernel's execution surface at the next synchronising call.)

namespace ts::cuda {

// Another GPU's per-SM limits on this one (TS_CUDA_SM_LIMITS=gb10; cuda_partition.cu, sm_limits.h), used where
// kernels are launched and grids are planned; while none are set each gives back what it is given.
// g_smLimitsOn: whether they are set (by the first CUDA backend opened under them, cleared by the last closed),
// read inline by launchPdl so that a launch without limits makes no call for them (an atomic at namespace scope,
// initialised before any code runs: no guard on the hot path).
extern std::atomic<bool> g_smLimitsOn;
// limitedResidentBlocks: of fn's blocks (threads, dynamic shared memory), the device's SM holds
// deviceBlocks; how many the limited SM holds. limitedLaunchSmem: the dynamic shared memory to launch fn with so
// that the device's SM holds no more of its blocks than the limited one would (the function's maximum dynamic
// shared memory raised to it when needed); an error if the limited SM could not hold one. limitedBlockSmemOptin:
// the shared memory one block may have (the device's opt-in limit, read where no backend's props() is at hand).
int limitedResidentBlocks(const void* fn, int threads, size_t dynSmem, int deviceBlocks);
size_t limitedLaunchSmem(const void* fn, int threads, size_t dynSmem);
size_t limitedBlockSmemOptin(size_t deviceOptin);

// A launch that failed: the error is taken off the runtime (as cudaGetLastError after <<<>>> did, so that the next
// op's launch check does not report it again) and thrown with the kernel's name. cuda_partition.cu.
[[noreturn]] void launchFailed(cudaError_t e, const void* fn);

// fn<<<grid, block, smem, stream>>>(args...), with programmatic stream serialization allowed when pdl (see
// pdlWait; the A/B switches that launch plainly pass false). Under SM limits (above) smem may be padded.
template <class... P, class... A>
void launchPdl(void (*fn)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl, A&&... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    const int threads = int(block.x * block.y * block.z);
    cfg.dynamicSmemBytes = g_smLimitsOn.load(std::memory_order_acquire)
                               ? limitedLaunchSmem(reinterpret_cast<const void*>(fn), threads, smem)
                               : smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, fn, std::forward<A>(args)...);
    if (e != cudaSuccess) launchFailed(e, reinterpret_cast<const void*>(fn));
}

// fn<<<grid, block, smem, stream>>>(args...) without programmatic serialization. Every kernel in kernels/cuda is
// launched through this or launchPdl, never with <<<>>>, so that SM limits (above) reach all of them — the dense
// GEMVs, norms and KDA kernels too (tests/tools/test_kernel_launches.py fails on a <<<>>> launch).
template <class... P, class... A>
void launchPlain(void (*fn)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, A&&... args) {
    launchPdl(fn, grid, block, smem, stream, false, std::forward<A>(args)...);
}

}  // namespace ts::cuda
