// The EXL3 decode/prefill-unit kernels as templates (exl3Kernel<K, codebook, MG>, exl3MoeKernel<…>; what they
// compute and why: cuda_exl3.cu's header) and the per-K entry points that hand out their instantiations.
// Private to kernels/cuda. The instantiations are most of the CUDA backend's compile time (~4 minutes per
// architecture for all eight K in one file on one core), so they are split over four translation units by K —
// cuda_exl3_k12.cu, cuda_exl3_k34.cu, cuda_exl3_k56.cu, cuda_exl3_k78.cu — which the build compiles in
// parallel; cuda_exl3.cu (planning, launches) reaches them through linearKernelOfK / moeKernelOfK.
// Test:      twinspark-cli selftest --backend cuda --filter exl3
// Benchmark: twinspark-cli bench-device --what exl3
#pragma once

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_exl3.cuh"
#include "cuda/cuda_exl3_staged.cuh"
#include "cuda/cuda_exl3_stream.cuh"
#include "cuda/cuda_exl3_unit.cuh"

namespace ts {
namespace exl3cuda {

using KernelFn = void (*)(Params);
using MoeKernelFn = void (*)(MoeParams);

// The kernel of one K for MG = kStream, 1 or kMaxMG and codebook 0..2 (trace: the phase-trace instantiation, which
// exists for K = 4 and MG = kStream only; nullptr elsewhere). Specialised for K = 1..8 in the four files above.
template <int K>
KernelFn linearKernelOfK(int MG, int cb, bool trace);
template <int K>
MoeKernelFn moeKernelOfK(int MG, int cb, bool trace);
template <> KernelFn linearKernelOfK<1>(int, int, bool);
template <> KernelFn linearKernelOfK<2>(int, int, bool);
template <> KernelFn linearKernelOfK<3>(int, int, bool);
template <> KernelFn linearKernelOfK<4>(int, int, bool);
template <> KernelFn linearKernelOfK<5>(int, int, bool);
template <> KernelFn linearKernelOfK<6>(int, int, bool);
template <> KernelFn linearKernelOfK<7>(int, int, bool);
template <> KernelFn linearKernelOfK<8>(int, int, bool);
template <> MoeKernelFn moeKernelOfK<1>(int, int, bool);
template <> MoeKernelFn moeKernelOfK<2>(int, int, bool);
template <> MoeKernelFn moeKernelOfK<3>(int, int, bool);
template <> MoeKernelFn moeKernelOfK<4>(int, int, bool);
template <> MoeKernelFn moeKernelOfK<5>(int, int, bool);
template <> MoeKernelFn moeKernelOfK<6>(int, int, bool);
template <> MoeKernelFn moeKernelOfK<7>(int, int, bool);
template <> MoeKernelFn moeKernelOfK<8>(int, int, bool);

// In each including file its own copies (internal linkage): only the file that instantiates a K has its kernels.
namespace {

// Unit u: the streaming decode unit or the staged one.
// TRACE (MG = kStream only): the phase-trace instantiation (runUnitStream).
template <int K, int CB, int MG, bool TRACE = false>
__device__ __forceinline__ void runUnit(const Params& P, int64_t u, uint32_t* smem) {
    if constexpr (MG == kStream)
        runUnitStream<K, CB, TRACE>(P, u, smem);
    else
        runUnitStaged<K, CB, MG>(P, u, smem);
}

template <int K, int CB, int MG, bool TRACE = false>
__global__ void __launch_bounds__(kThreads, MG == kStream ? 8 : MG == 1 ? 6 : 1) exl3Kernel(const __grid_constant__ Params P) {
    extern __shared__ __align__(16) uint32_t smem[];
    pdlTrigger();  // the next kernel's blocks may start as this one's retire (they wait before reading data)
    runUnit<K, CB, MG, TRACE>(P, blockIdx.x, smem);
}

// The one-launch fused MoE (see MoeParams). One block per unit, as in the two-launch version, but a block
// does not run unit blockIdx.x: it takes the next ticket from an atomic counter when it starts, and runs
// that unit. The last block to finish zeroes the ticket counters for the next launch.
//
// Why it cannot deadlock, whatever the grid size and however many blocks are co-resident: a block draws
// its ticket only once it is running, so when a block holds ticket t, every ticket below t is held by a
// block that is already running, and a running block is never descheduled for good (it keeps its SM until
// it exits). Gate/up units wait for nothing. A down unit waits only for gate/up units, all of which have
// lower tickets, hence are held by running blocks that finish without waiting. A combine unit waits only
// for down units, all below it, which finish by the previous argument. A block that is not yet resident
// holds no ticket, so nobody waits for it: the grid need not fit on the device at once — it is the
// two-launch version's grid, the hardware starting blocks as others exit. (Blocks are dispatched roughly
// in blockIdx order, but nothing relies on it: with a static unit = blockIdx.x a resident down unit could
// wait for a gate/up block the full device can never start.)
//
// Not a persistent grid (occupancy × SMs blocks looping over tickets): the ticket argument would hold the
// same, but around the unit code (80 registers for 6 blocks per SM in decode) such a loop made ptxas spill
// 100+ bytes per thread; with one unit per block the decode kernels keep exl3Kernel's register allocation
// (at K = 4: 16 bytes of stack against 8; the hardware refills SMs as blocks retire, as in two launches).
template <int K, int CB, int MG, bool TRACE = false>
__global__ void __launch_bounds__(kThreads, MG == kStream ? 8 : MG == 1 ? 6 : 1) exl3MoeKernel(const __grid_constant__ MoeParams F) {
    extern __shared__ __align__(16) uint32_t smem[];
    __shared__ int ticketS, lastS;
    const int tid = threadIdx.x;
    // The tickets and the routed plan are written by the previous kernels (the last MoE launch resets them).
    pdlWait();
    pdlTrigger();
    if (tid == 0) ticketS = int(atomicAdd(reinterpret_cast<unsigned*>(F.sync), 1u));
    __syncthreads();
    const int t = ticketS;  // uniform across the block; < F.unitsGU + F.unitsD + F.unitsC = gridDim.x
    const int endGU = F.unitsGU, endD = F.unitsGU + F.unitsD;
    if (t < endD) {
        // The phase's Params by a run-time index into the kernel parameters (still constant-bank loads):
        // one call site, so the unit code is inlined once (two cost twice the compile time and spills).
        const int ph = t < endGU ? 0 : 1;
        runUnit<K, CB, MG, TRACE>(F.ph[ph], ph ? t - endGU : t, smem);
    } else {  // combine: column block b, token rows [8·tb, 8·tb + 8)
        const Params& P = F.ph[1];
        const int cu = t - endD, nTB = (P.Tf + 7) / 8;
        const int b = cu / nTB, t0 = (cu - b * nTB) * 8;
        blockWaitCount(F.sync + 2 + F.ph[0].groups + b, liveJobs(P));
        combineRange(P, b, t0, min(P.Tf, t0 + 8), tid, kThreads);
    }
    // Retire: the last block to get here (ordered after the others' counter updates — the ticket draw, the
    // done counts — by the acquire-release arrival) resets the ticket counter, the retire count and the done counts; every other block
    // has finished with them. The per-column arrival counters reset themselves (their last arrival).
    __syncthreads();
    if (tid == 0) {
        const unsigned old = unsigned(atomAddAcqRel(F.sync + 1, 1));
        lastS = old == gridDim.x - 1;
    }
    __syncthreads();
    if (lastS) {
        const int n = moeSyncInts(F.ph[0].groups, F.ph[1].NB);
        for (int i = tid; i < n; i += kThreads) F.sync[i] = 0;
    }
}

template <int K, int MG, bool TRACE = false>
KernelFn linearFor(int cb) {
    return cb == 0 ? exl3Kernel<K, 0, MG, TRACE> : cb == 1 ? exl3Kernel<K, 1, MG, TRACE> : exl3Kernel<K, 2, MG, TRACE>;
}
template <int K, int MG, bool TRACE = false>
MoeKernelFn moeFor(int cb) {
    return cb == 0 ? exl3MoeKernel<K, 0, MG, TRACE> : cb == 1 ? exl3MoeKernel<K, 1, MG, TRACE>
                                                               : exl3MoeKernel<K, 2, MG, TRACE>;
}
// The bodies of the specialisations (one line each in the K files).
template <int K>
KernelFn pickLinear(int MG, int cb, bool trace) {
    if (trace) {
        if constexpr (K == 4) return MG == kStream ? linearFor<4, kStream, true>(cb) : nullptr;
        return nullptr;
    }
    return MG == kStream ? linearFor<K, kStream>(cb) : MG == 1 ? linearFor<K, 1>(cb) : linearFor<K, kMaxMG>(cb);
}
template <int K>
MoeKernelFn pickMoe(int MG, int cb, bool trace) {
    if (trace) {
        if constexpr (K == 4) return MG == kStream ? moeFor<4, kStream, true>(cb) : nullptr;
        return nullptr;
    }
    return MG == kStream ? moeFor<K, kStream>(cb) : MG == 1 ? moeFor<K, 1>(cb) : moeFor<K, kMaxMG>(cb);
}

}  // namespace
}  // namespace exl3cuda
}  // namespace ts
