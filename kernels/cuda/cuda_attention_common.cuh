// Device helpers shared by cuda_attention.cu (DSA-MLA) and cuda_indexer.cu (the k-pool indexer): the fp8
// e4m3 codec and scale rule, the bf16 rounding of the indexer tail, a block-wide Hadamard + power-of-two
// fp8 quantiser, block scans of 0/1 flags, and unaligned scalar loads from cache entries.
//
// Bit-exactness. The cache writes and the indexer's scores must equal the CPU reference (kernels/cpu/
// cpu_attention.cpp) bit for bit: the cache bytes are compared exactly by the self-test, and a score that
// differs in the last bit can flip a near-tie and change the selected set. The CPU is built without FMA
// contraction (-std=c++20 without extensions and no -march: gcc's fp-contract is off), so every exact path
// here spells its arithmetic with __fmul_rn / __fadd_rn / __fdiv_rn, which nvcc never fuses, in the CPU's
// order. Paths that are compared with a tolerance (attention, the absorbed GEMMs) use plain fp32 FMA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/cuda_common.cuh"

namespace ts::cuda {

__device__ __forceinline__ int64_t imin64(int64_t a, int64_t b) { return a < b ? a : b; }

// fp8 e4m3fn → fp32, exact (core/dtype.cpp's table as arithmetic): 0x7f / 0xff are NaN.
__device__ __forceinline__ float fp8ToF32(uint32_t v) {
    const uint32_t sign = (v & 0x80u) << 24, exp = (v >> 3) & 15u, man = v & 7u;
    if (exp == 15u && man == 7u) return __uint_as_float(sign | 0x7fc00000u);
    if (exp == 0u) return __uint_as_float(sign | __float_as_uint(float(man) * 0.001953125f));  // man · 2^-9
    return __uint_as_float(sign | ((exp + 120u) << 23) | (man << 20));
}

// fp32 → fp8 e4m3fn, saturating round-to-nearest-even: the CPU's f32ToFp8e4m3 step by step (frexpf,
// ldexpf and rintf are exact on the device), so the bytes are identical for every input.
__device__ __forceinline__ uint8_t f32ToFp8(float f) {
    if (isnan(f)) return 0x7f;
    const uint32_t sign = signbit(f) ? 0x80u : 0u;
    const float a = fabsf(f);
    if (a >= 448.0f) return uint8_t(sign | 0x7eu);
    if (a < 0.015625f) return uint8_t(sign | uint32_t(rintf(a * 512.0f)));  // subnormal, quantum 2^-9
    int e;
    frexpf(a, &e);  // a = m · 2^e, m in [0.5, 1)
    float q = rintf(ldexpf(a, 3 - (e - 1)));  // in [8, 16]
    int exp = e - 1 + 7;
    if (q >= 16.0f) {
        q = 8.0f;
        ++exp;
    }
    if (exp > 15 || (exp == 15 && q - 8.0f > 6.0f)) return uint8_t(sign | 0x7eu);
    return uint8_t(sign | uint32_t(exp << 3) | uint32_t(int(q) - 8));
}

// The CPU's quantFp8 scale: max(amax, minAmax) / 448, and with pow2 rounded up to a power of two as
// exp2f(ceilf(log2f(s))). glibc's log2f is not available here; log2 in double rounded to float gives the
// correctly rounded log2f, which equals glibc's result wherever ceil could tell them apart: for the
// scales that occur (2^-22 ≤ s ≤ 2^8) the float nearest to log2(s) is never within 10^-3 ulp of a
// rounding midpoint, far outside both libraries' error.
__device__ __forceinline__ float fp8Scale(float amax, bool pow2, float minAmax) {
    float s = __fdiv_rn(fmaxf(amax, minAmax), 448.0f);
    if (pow2) s = ldexpf(1.0f, int(ceilf(float(log2(double(s))))));
    return s;
}

// fp32 → bf16 → fp32 with round-to-nearest-even (the CPU's f32ToBf16 / bf16ToF32 pair).
__device__ __forceinline__ float roundBf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(((u >> 16) | 0x40u) << 16);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __uint_as_float(u & 0xffff0000u);
}

// A float stored at any byte address (cache entries are byte-packed: fp8 tile scales sit after R bytes).
__device__ __forceinline__ float loadF32Bytes(const uint8_t* p) {
    return __uint_as_float(uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24));
}
__device__ __forceinline__ void storeF32Bytes(uint8_t* p, float v) {
    const uint32_t u = __float_as_uint(v);
    p[0] = uint8_t(u);
    p[1] = uint8_t(u >> 8);
    p[2] = uint8_t(u >> 16);
    p[3] = uint8_t(u >> 24);
}


// Exclusive prefix count of a 0/1 flag over the block in thread order; `total` = the block's count.
// blockDim.x a multiple of 32; `shared` holds 33 ints. Every thread must call it.
__device__ __forceinline__ int blockScanFlag(bool flag, int* shared, int& total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nWarps = blockDim.x >> 5;
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    const int inWarp = __popc(ballot & ((1u << lane) - 1u));
    if (lane == 0) shared[warp] = __popc(ballot);
    __syncthreads();
    if (warp == 0) {
        const int v = lane < nWarps ? shared[lane] : 0;
        int incl = v;
        for (int o = 1; o < 32; o <<= 1) {
            const int n = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += n;
        }
        if (lane < nWarps) shared[lane] = incl - v;
        if (lane == 31) shared[32] = incl;
    }
    __syncthreads();
    total = shared[32];
    const int r = inWarp + shared[warp];
    __syncthreads();  // the slots are reused by the next call
    return r;
}

// Exclusive prefix sum of one int per thread over the block in thread order; `total` = the block's sum.
// blockDim.x a multiple of 32; `shared` holds 33 ints. Every thread must call it.
__device__ __forceinline__ int blockScanInt(int v, int* shared, int& total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nWarps = blockDim.x >> 5;
    int incl = v;
    for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += n;
    }
    if (lane == 31) shared[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        const int w = lane < nWarps ? shared[lane] : 0;
        int wi = w;
        for (int o = 1; o < 32; o <<= 1) {
            const int n = __shfl_up_sync(0xffffffffu, wi, o);
            if (lane >= o) wi += n;
        }
        if (lane < nWarps) shared[lane] = wi - w;
        if (lane == 31) shared[32] = wi;
    }
    __syncthreads();
    total = shared[32];
    const int r = incl - v + shared[warp];
    __syncthreads();  // the slots are reused by the next call
    return r;
}

// In-place orthonormal Walsh–Hadamard transform of x[n] in shared memory (n a power of two) by the whole
// block: the CPU's butterfly stages in the same order (each output is the same sums), then · hs where
// hs = 1/sqrt(n) is computed on the host exactly as the CPU does. Ends with a barrier.
__device__ __forceinline__ void blockHadamard(float* x, int n, float hs) {
    for (int h = 1; h < n; h <<= 1) {
        for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
            const int i = (p / h) * 2 * h + p % h;
            const float a = x[i], b = x[i + h];
            x[i] = __fadd_rn(a, b);
            x[i + h] = __fsub_rn(a, b);
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = __fmul_rn(x[i], hs);
    __syncthreads();
}

// The indexer's fp8 quantiser of one vector x[n] in shared memory (the CPU's quantFp8 with pow2 and
// minAmax 1e-4 after the optional Hadamard): writes the e4m3 bytes to out8 (if non-null), their fp32
// values without the scale to deq (if non-null), and returns the scale. `red` holds 32 floats.
__device__ __forceinline__ float blockQuantPow2(const float* x, int n, uint8_t* out8, float* deq, float* red) {
    float amax = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) amax = fmaxf(amax, fabsf(x[i]));
    amax = blockMax(amax, red);
    const float s = fp8Scale(amax, true, 1e-4f);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const uint8_t b = f32ToFp8(__fdiv_rn(x[i], s));
        if (out8) out8[i] = b;
        if (deq) deq[i] = fp8ToF32(b);
    }
    return s;
}


}  // namespace ts::cuda

// The tensor-core sparse MLA (cuda_attention_tc.cu): its shape, arguments and launcher, used by
// CudaBackend::mlaSparseAttention (cuda_attention.cu) for fp8 caches at R = 512 with heads in multiples of 16.
namespace ts::mlatc {

constexpr int kMlaTcLatent = 512;  // latent width (GLM-5.3-Flash's kv_lora_rank)
constexpr int kMlaTcHeads = 16;    // heads per block
constexpr int kMlaTcTile = 32;     // selected latents per tile; chunks are multiples of it

struct MlaTcArgs {
    const float* qLat;     // [T, H, 512], 16-byte aligned
    const uint8_t* cache;  // [slots, eb] fp8_ds_mla entries, 16-byte aligned, eb a multiple of 16
    int64_t eb;
    const int32_t* sel;    // [T, width] physical slots (mlaSelectSlotsKernel)
    const int32_t* count;  // [T]
    int64_t width, H;      // H: a multiple of 16
    int64_t chunkLen;      // selected entries per chunk, a multiple of kMlaTcTile
    float scale;
    float* oLat;    // [T, H, 512] (one chunk) or null
    float* partO;   // [T, H, chunks, 512] (several chunks): unnormalised o of each chunk
    float* partML;  // [T, H, chunks, 2]: the chunk's running max and sum
};

// grid (T, chunks, H / 16); cuda_attention.cu merges several chunks with its combine kernel. pdl: launched with
// programmatic dependent launch after the slot selection kernel (q is made before waiting for it).
void launchSparseTc(const MlaTcArgs& a, int64_t T, int64_t chunks, bool pdl, cudaStream_t stream);
// TS_MLA_TC (read once; default on) or the override of setTensorCores (1 / 0; −1 restores the environment's;
// returns the previous override): whether eligible calls take this kernel.
int setTensorCores(int on);
bool tensorCores();
// Tiles per chunk forced for A/B runs (> 0), or 0: the planner's (about two blocks per SM, ≥ 2 tiles, ≤ 64
// chunks). setChunkTiles returns the previous value.
int setChunkTiles(int tiles);
int chunkTiles();
// The kernel's dynamic shared memory per block (98.2 KiB: within the 99 KiB sm_120 / sm_121 — a GB10 — allow a
// block; CudaBackend::mlaSparseAttention still checks the device's limit and takes the SIMT kernel on one below).
size_t smemBytes();
bool fitsDevice();  // the current device's opt-in limit per block holds smemBytes()

}  // namespace ts::mlatc
