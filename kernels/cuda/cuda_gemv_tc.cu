// cuda_gemv_tc: the dense GEMV/GEMM on the tensor cores, BF16 weights — y[T, N] = x[T, K] · Wᵀ with W [N, K]
// row-major BF16, x and y fp32 (K % 8 == 0, x 16-byte aligned: CudaBackend::linear's vector contract). At 1–8
// tokens one of the GEMV modes of cuda_math.cu (ModeSwitch: TS_GEMV1 / TS_GEMV_MULTI = 3, or 4 without
// programmatic dependent launch); above 8 tokens the GEMM modes (TS_GEMM: 1, and 3 below TS_GEMM_CUBLAS_MIN tokens),
// in launches of up to 64 tokens.
//
// Why: the SIMT GEMV keeps T × R fp32 sums per lane and does T fused multiply-adds per weight, so at 4–8 tokens
// its registers cut the resident warps (92–128 per thread: 2 blocks of 8 warps per SM) and the weights
// stream at 40–55 % of copy bandwidth where one token reaches ~80 %. Here a warp's sums are one mma
// accumulator (4 registers) per 8 tokens, and a weight is touched by no instruction of its own. Above 8 tokens
// the SIMT GEMM (cuda_math.cu) does its fp32 FMAs on the CUDA cores; three bf16 mmas per product are cheaper.
//
// How (mma.sync m16n8k16, bf16 inputs, fp32 accumulators): a warp owns a row block of 16 rows and a k-slice.
// Lane (g = lane / 4, c = lane % 4) loads 16 bytes — 8 consecutive k — of rows g and g + 8 at k = kb + 8c, so
// the A fragment (W, rows × k) is those registers as they come (no shuffles, no conversion): the mma's
// logical k {2c, 2c+1 | 2c+8, 2c+9} are physical kb + 8c + {0, 1 | 2, 3} (then + {4, 5 | 6, 7} for the second
// mma), a permutation of k that the B fragment (x, k × tokens) follows: lane (g, c) loads token g's x at the
// same 8 k. The 8 n-columns of the mma are the tokens (columns ≥ T are zero). With NG token groups (the kernel's
// template argument: 1, 2, 4 or 8) the same weight registers meet each group's x: NG accumulators.
// x stays exact: each fp32 value is split into three bf16 pieces x = hi + mid + lo (each piece the rounding
// error of the one before, exactly representable: 24 significant bits = 3 × 8), and each piece is one mma
// against the same weights, so every product w·x_piece is exact in the fp32 accumulator and the result
// differs from the CPU's fp32 loop by summation order and the tensor core's accumulator rounding only (the
// self-test's linear tolerance, 1e-4, fails a kernel that rounds x to bf16 once).
// Work split (tcPlan()): RB = ⌈N/16⌉ row blocks × S k-slices (S a power of two, slices ≥ 128 k) with ≥ ~4,096
// warps in all; a block of 8 warps holds 8/W row blocks × W slices and adds its warps' sums in shared memory in
// warp order (one group: W = min(S, 8); several: W as small as the row blocks allow, so that the block's warps
// share their x through L1); when S > W, G = S / W blocks share a row group (grid y): each writes its partials to
// scratch, the last to arrive (acquire-release counter, reset by it) adds the G partials in order and writes y.
// Deterministic.
// Loads: weights 16 bytes per lane and row that do not allocate in L1 (read once per launch), the next 64 k in
// flight while the current are multiplied; x through the read-only cache. PDL: the first weights are loaded
// before griddepcontrol.wait (they are never written by kernels), x after it.
//
// Test: twinspark-cli selftest --backend cuda --filter math (each linear case runs the modes not in force: this
// kernel against the CPU with the linear tolerance). Benchmark: twinspark-cli bench-device --what gemv (every
// mode at T = 1, 2, 3, 4, 8 on a decode step's shapes and a KDA layer's chain; the GEMM modes at 16, 64, 256).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "core/env_switch.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_bf16_pieces.cuh"
#include "cuda/cuda_common.cuh"

namespace ts {
namespace {

constexpr int kTcWarps = 8;
constexpr int kTcThreads = kTcWarps * 32;
// The plan's two numbers (tcPlan): warps to aim for in all, ~31 per SM on an H200 (enough loads in flight for HBM),
// and the shortest k-slice. TS_GEMV_TC_WARPS / TS_GEMV_TC_MINK (read once) change them for A/B runs.
int64_t tcTargetWarps() {
    static const int64_t v = std::max<int64_t>(1, envCount("TS_GEMV_TC_WARPS", 4096));
    return v;
}
int64_t tcMinSliceK() {
    static const int64_t v = std::max<int64_t>(64, envCount("TS_GEMV_TC_MINK", 128));
    return v;
}

// d += A·B, m16n8k16, bf16 inputs, fp32 accumulators (PTX ISA fragment layouts: a0 (g, 2c..), a1 (g+8, 2c..),
// a2 (g, 2c+8..), a3 (g+8, 2c+8..); b0 (k 2c.., n g), b1 (k 2c+8.., n g); d0, d1 (g, 2c, 2c+1), d2, d3 (g+8, ..)).
__device__ __forceinline__ void mmaBf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                        uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

using cuda::splitX;
using cuda::XPieces;

__device__ __forceinline__ uint4 ldStreamW(const uint16_t* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// The weights of one 64-k iteration: rows g and g + 8 at this lane's k and k + 32 (p0, p1 point at k; zero where
// the piece lies beyond the slice: rem = valid k from this lane's k on).
struct WTile {
    uint4 r0[2], r1[2];
};
__device__ __forceinline__ WTile loadW(const uint16_t* p0, const uint16_t* p1, int rem) {
    WTile t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const bool in = rem > 32 * h;
        t.r0[h] = in ? ldStreamW(p0 + 32 * h) : make_uint4(0, 0, 0, 0);
        t.r1[h] = in ? ldStreamW(p1 + 32 * h) : make_uint4(0, 0, 0, 0);
    }
    return t;
}

// acc[grp] += the 16 rows × 32 k of one half of a WTile (a: row g, b: row g + 8) times token grp·8 + g's x at the
// same k (xp + off[grp]: that token's x there; in: the piece lies in the slice — beyond it x is zero and not read).
// The weights' registers serve every token group.
template <int NG>
__device__ __forceinline__ void mulHalf(float (&acc)[NG][4], const uint4& a, const uint4& b, const float* xp,
                                        const int (&off)[NG], bool in) {
#pragma unroll
    for (int grp = 0; grp < NG; ++grp) {
        float v[8];
        if (in) {
            const float4 p = __ldg(reinterpret_cast<const float4*>(xp + off[grp]));
            const float4 q = __ldg(reinterpret_cast<const float4*>(xp + off[grp]) + 1);
            v[0] = p.x; v[1] = p.y; v[2] = p.z; v[3] = p.w;
            v[4] = q.x; v[5] = q.y; v[6] = q.z; v[7] = q.w;
        } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = 0.0f;
        }
        const XPieces x = splitX(v);
        // physical k 8c + {0,1 | 2,3}: words .x | .y; then {4,5 | 6,7}: .z | .w
        mmaBf16(acc[grp], a.x, b.x, a.y, b.y, x.hi[0], x.hi[1]);
        mmaBf16(acc[grp], a.x, b.x, a.y, b.y, x.mid[0], x.mid[1]);
        mmaBf16(acc[grp], a.x, b.x, a.y, b.y, x.lo[0], x.lo[1]);
        mmaBf16(acc[grp], a.z, b.z, a.w, b.w, x.hi[2], x.hi[3]);
        mmaBf16(acc[grp], a.z, b.z, a.w, b.w, x.mid[2], x.mid[3]);
        mmaBf16(acc[grp], a.z, b.z, a.w, b.w, x.lo[2], x.lo[3]);
    }
}

// NG token groups of 8 (T ≤ 8·NG tokens). grid (⌈RB / (8 / W)⌉, G), 256 threads. L: slice length in k (a multiple
// of 64). When G > 1, part: [gridX, G, 8 / W, 16 × 8 · NG] and counters: [gridX] (zero between launches).
// Registers: NG = 1 ~62 (4 blocks per SM), NG = 8 ≤ 128 (2 blocks).
template <int NG>
__global__ void __launch_bounds__(kTcThreads, NG == 1 ? 4 : 2)
    gemvTcKernel(const float* __restrict__ x, const uint16_t* __restrict__ W, float* __restrict__ y, int T, int64_t N,
                 int64_t K, int wSplit, int G, int64_t L, float* __restrict__ part, int* __restrict__ counters) {
    constexpr int E = 128 * NG;  // one row block's outputs: [group][row 16][token 8]
    __shared__ float red[kTcWarps][E];
    __shared__ int isLast;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, c = lane & 3;
    const int rbPerBlock = kTcWarps / wSplit;
    const int64_t rb = int64_t(blockIdx.x) * rbPerBlock + warp / wSplit;
    const int64_t split = int64_t(blockIdx.y) * wSplit + warp % wSplit;
    const int64_t kBeg = split * L, kEnd = kBeg + L < K ? kBeg + L : K;
    const int64_t row0 = rb * 16 + g, row1 = row0 + 8;

    float acc[NG][4];
#pragma unroll
    for (int grp = 0; grp < NG; ++grp) acc[grp][0] = acc[grp][1] = acc[grp][2] = acc[grp][3] = 0.0f;
    // This lane's pieces start at k = kBeg + 8c; rem counts the valid k from there (the loop's trip count is the
    // warp's, so every lane takes part in every mma). Pointers advance by 64 k per iteration.
    int rem = int(kEnd - kBeg) - 8 * c;
    const int iters = kEnd > kBeg ? int((kEnd - kBeg + 63) / 64) : 0;
    // Rows beyond N read row N − 1 and tokens beyond T read token T − 1 instead: an output row depends only on
    // its A row and an output column only on its B column, and those outputs are never stored.
    const uint16_t* p0 = W + (row0 < N ? row0 : N - 1) * K + kBeg + 8 * c;
    const uint16_t* p1 = W + (row1 < N ? row1 : N - 1) * K + kBeg + 8 * c;
    WTile cur = loadW(p0, p1, rem);
    ::ts::cuda::pdlWait();  // x is the previous kernel's output (a no-op when launched without PDL)
    // Token grp·8 + g's x at this lane's k: xp + off[grp] (one token: the offset folded into xp).
    const float* xp = x + kBeg + 8 * c;
    int off[NG];
    if constexpr (NG == 1) {
        xp += int64_t(g < T ? g : T - 1) * K;
        off[0] = 0;
    } else {
#pragma unroll
        for (int grp = 0; grp < NG; ++grp) off[grp] = int((grp * 8 + g < T ? grp * 8 + g : T - 1) * K);
    }
    for (int it = 0; it < iters; ++it) {
        p0 += 64;
        p1 += 64;
        const WTile next = it + 1 < iters ? loadW(p0, p1, rem - 64) : WTile{};
        mulHalf<NG>(acc, cur.r0[0], cur.r1[0], xp, off, rem > 0);
        mulHalf<NG>(acc, cur.r0[1], cur.r1[1], xp + 32, off, rem > 32);
        cur = next;
        xp += 64;
        rem -= 64;
    }

    float* r = red[warp];
#pragma unroll
    for (int grp = 0; grp < NG; ++grp) {
        r[grp * 128 + g * 8 + 2 * c] = acc[grp][0];
        r[grp * 128 + g * 8 + 2 * c + 1] = acc[grp][1];
        r[grp * 128 + (g + 8) * 8 + 2 * c] = acc[grp][2];
        r[grp * 128 + (g + 8) * 8 + 2 * c + 1] = acc[grp][3];
    }
    __syncthreads();
    // entry i of the block: row block rbl = i / E, e = i % E → group e / 128, row (e % 128) / 8, token e % 8
    const int entries = rbPerBlock * E;
    float* myPart = G > 1 ? part + (int64_t(blockIdx.x) * G + blockIdx.y) * entries : nullptr;
    for (int i = threadIdx.x; i < entries; i += kTcThreads) {
        const int rbl = i / E, e = i % E, rr = (e & 127) >> 3, t = (e >> 7) * 8 + (e & 7);
        const int64_t row = (int64_t(blockIdx.x) * rbPerBlock + rbl) * 16 + rr;
        if (t >= T || row >= N) continue;
        float v = 0.0f;
        for (int s = 0; s < wSplit; ++s) v += red[rbl * wSplit + s][e];
        if (G == 1) y[int64_t(t) * N + row] = v;
        else myPart[i] = v;
    }
    if (G == 1) return;
    // G > 1: the last of the G blocks of this row group adds the partials in order.
    __syncthreads();
    if (threadIdx.x == 0) isLast = ::ts::cuda::atomAddAcqRel(counters + blockIdx.x, 1) == G - 1;
    __syncthreads();
    if (!isLast) return;
    const float* groupPart = part + int64_t(blockIdx.x) * G * entries;
    for (int i = threadIdx.x; i < entries; i += kTcThreads) {
        const int rbl = i / E, e = i % E, rr = (e & 127) >> 3, t = (e >> 7) * 8 + (e & 7);
        const int64_t row = (int64_t(blockIdx.x) * rbPerBlock + rbl) * 16 + rr;
        if (t >= T || row >= N) continue;
        float v = 0.0f;
        for (int gy = 0; gy < G; ++gy) v += __ldcg(groupPart + int64_t(gy) * entries + i);
        y[int64_t(t) * N + row] = v;
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0;  // for the next launch (stream order)
}

struct TcPlan {
    int64_t rowBlocks = 0, sliceK = 0;
    int wSplit = 1, G = 1;
    unsigned gridX = 0;
};

// manyTokens: more than one token group. One group splits K over a block's warps (W = min(S, 8): the block's
// warps read different weights, x is small); several groups keep a block's warps on one k-slice and 8 / W row
// blocks (W as small as the row blocks allow), so the x they all read comes through L1 once per block rather
// than once per warp — at 64 tokens x is 8× the weights' bytes per warp.
TcPlan tcPlan(int64_t N, int64_t K, bool manyTokens) {
    TcPlan p;
    p.rowBlocks = (N + 15) / 16;
    int64_t S = 1;
    while (S < 64 && p.rowBlocks * S < tcTargetWarps() && K / (2 * S) >= tcMinSliceK()) S *= 2;
    // slice length: a multiple of 64 k (the loop's iteration) covering K in S slices
    const int64_t iters = (K + 63) / 64;
    p.sliceK = (iters + S - 1) / S * 64;
    S = (K + p.sliceK - 1) / p.sliceK;  // rounding may leave fewer slices
    // W must divide 8 and G·W ≥ S
    int w = 1;
    if (!manyTokens) {
        while (w < 8 && w < S) w *= 2;
    } else {
        while (w < 8 && w < S && int64_t(kTcWarps / w) > p.rowBlocks) w *= 2;
    }
    p.wSplit = w;
    p.G = int((S + w - 1) / w);
    const int rbPerBlock = kTcWarps / w;
    p.gridX = unsigned((p.rowBlocks + rbPerBlock - 1) / rbPerBlock);
    return p;
}

// At most this many token groups per launch (TS_GEMM_TC_GROUPS: 1, 2, 4 or 8; read once): an A/B knob — more
// groups read the weights fewer times, fewer keep more warps resident (NG = 8 is held to 128 registers).
int tcMaxGroups() {
    static const int v = [] {
        const int64_t g = envCount("TS_GEMM_TC_GROUPS", 8);
        return g >= 8 ? 8 : g >= 4 ? 4 : g >= 2 ? 2 : 1;
    }();
    return v;
}

}  // namespace

void CudaBackend::gemvTensorCores(const float* x, const void* W, float* y, int64_t T, int64_t N, int64_t K, bool pdl) {
    TS_CHECK(T >= 1 && K % 8 == 0 && K <= INT32_MAX / 64, "gemvTensorCores: needs T ≥ 1 and K % 8 == 0");
    // Launches of up to 8 · maxGroups tokens; the first is the largest.
    const int maxGroups = tcMaxGroups();
    const int64_t perLaunch = 8 * maxGroups;
    const auto groupsOf = [](int64_t t) { return t <= 8 ? 1 : t <= 16 ? 2 : t <= 32 ? 4 : 8; };
    const int ng0 = groupsOf(std::min(T, perLaunch));
    const TcPlan p = tcPlan(N, K, ng0 > 1);
    TS_CHECK(p.gridX <= 0x7fffffffu && p.G <= 65535, "gemvTensorCores: matrix too large");
    float* part = nullptr;
    int* counters = nullptr;
    if (p.G > 1) {
        part = zeroedScratch(m_gemvPart, size_t(p.gridX) * size_t(p.G) * size_t(kTcWarps / p.wSplit) * 128 * size_t(ng0) * 4).f32();
        counters = zeroedScratch(m_gemvCounters, size_t(p.gridX) * 4).i32();
    }
    const dim3 grid(p.gridX, unsigned(p.G)), block(kTcThreads);
    const auto* w = static_cast<const uint16_t*>(W);
    for (int64_t t0 = 0; t0 < T; t0 += perLaunch) {
        const int tc = int(std::min(perLaunch, T - t0));
        const float* xc = x + t0 * K;
        float* yc = y + t0 * N;
        // A later launch's plan is the first's; fewer groups use part of its partials.
        switch (groupsOf(tc)) {
        case 1:
            cuda::launchPdl(gemvTcKernel<1>, grid, block, 0, m_stream, pdl, xc, w, yc, tc, N, K, p.wSplit, p.G, p.sliceK, part, counters);
            break;
        case 2:
            cuda::launchPdl(gemvTcKernel<2>, grid, block, 0, m_stream, pdl, xc, w, yc, tc, N, K, p.wSplit, p.G, p.sliceK, part, counters);
            break;
        case 4:
            cuda::launchPdl(gemvTcKernel<4>, grid, block, 0, m_stream, pdl, xc, w, yc, tc, N, K, p.wSplit, p.G, p.sliceK, part, counters);
            break;
        default:
            cuda::launchPdl(gemvTcKernel<8>, grid, block, 0, m_stream, pdl, xc, w, yc, tc, N, K, p.wSplit, p.G, p.sliceK, part, counters);
            break;
        }
    }
}

}  // namespace ts
