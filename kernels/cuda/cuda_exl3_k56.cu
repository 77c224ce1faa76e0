// The EXL3 kernels for K = 5 and 6 bits per weight: exl3Kernel<K, codebook, MG> and exl3MoeKernel<…> (the linear
// and the one-launch fused MoE; what they compute: cuda_exl3.cu's header) for the three codebooks and the three
// unit variants (MG = kStream: the streaming decode unit; 1 and kMaxMG: the staged unit).
// One of four files that split the instantiations by K so the build compiles them in parallel
// (cuda_exl3_kernels.cuh).
// Test:      twinspark-cli selftest --backend cuda --filter exl3
// Benchmark: twinspark-cli bench-device --what exl3
#include "cuda/cuda_exl3_kernels.cuh"

namespace ts {
namespace exl3cuda {

template <> KernelFn linearKernelOfK<5>(int MG, int cb, bool trace) { return pickLinear<5>(MG, cb, trace); }
template <> KernelFn linearKernelOfK<6>(int MG, int cb, bool trace) { return pickLinear<6>(MG, cb, trace); }
template <> MoeKernelFn moeKernelOfK<5>(int MG, int cb, bool trace) { return pickMoe<5>(MG, cb, trace); }
template <> MoeKernelFn moeKernelOfK<6>(int MG, int cb, bool trace) { return pickMoe<6>(MG, cb, trace); }

}  // namespace exl3cuda
}  // namespace ts
