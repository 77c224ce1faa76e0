// Helpers shared by the CUDA op files: error checks that throw ts::Error, launch arithmetic, and the
// scalar conversions the kernels need (bf16 / f16 / fp8 e4m3 to fp32, as in core/dtype.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>

#include <cstdint>
#include <string>

#include "core/error.h"

namespace ts::cuda {

[[noreturn]] void throwCuda(const char* what, const char* detail, const char* file, int line);

inline void check(cudaError_t e, const char* what, const char* file, int line) {
    if (e != cudaSuccess) throwCuda(what, cudaGetErrorString(e), file, line);
}
inline void check(cublasStatus_t s, const char* what, const char* file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS) throwCuda(what, cublasGetStatusString(s), file, line);
}

inline unsigned blocksFor(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

// Weight element → fp32 (dtype codes as DType: 0 = BF16, 1 = F16, 2 = F32).
__device__ __forceinline__ float loadWeight(const void* base, int64_t i, int dtype) {
    if (dtype == 0) return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    if (dtype == 1) return __half2float(static_cast<const __half*>(base)[i]);
    return static_cast<const float*>(base)[i];
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

}  // namespace ts::cuda

#define TS_CUDA_CHECK(expr) ::ts::cuda::check((expr), #expr, __FILE__, __LINE__)
// After a kernel launch: launch-configuration errors surface here, execution errors at the next sync.
#define TS_CUDA_LAUNCH_CHECK() ::ts::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
