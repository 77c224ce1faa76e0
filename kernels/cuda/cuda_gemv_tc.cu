// cuda_gemv_tc: the dense GEMV at 1–8 tokens on the tensor cores, BF16 weights — y[T, N] = x[T, K] · Wᵀ with
// W [N, K] row-major BF16, x and y fp32 (T ≤ 8, K % 8 == 0, x 16-byte aligned: CudaBackend::linear's vector
// contract). One of the GEMV modes of cuda_math.cu (ModeSwitch: TS_GEMV1 / TS_GEMV_MULTI = 3, or 4 without
// programmatic dependent launch).
//
// Why: the SIMT GEMV keeps T × R fp32 sums per lane and does T fused multiply-adds per weight, so at 4–8 tokens
// its registers cut the resident warps (92–128 per thread: 2 blocks of 8 warps per SM) and the weights
// stream at 40–55 % of copy bandwidth where one token reaches ~80 %. Here a warp's sums are one mma
// accumulator (4 registers) whatever T is, and a weight is touched by no instruction of its own.
//
// How (mma.sync m16n8k16, bf16 inputs, fp32 accumulators): a warp owns a row block of 16 rows and a k-slice.
// Lane (g = lane / 4, c = lane % 4) loads 16 bytes — 8 consecutive k — of rows g and g + 8 at k = kb + 8c, so
// the A fragment (W, rows × k) is those registers as they come (no shuffles, no conversion): the mma's
// logical k {2c, 2c+1 | 2c+8, 2c+9} are physical kb + 8c + {0, 1 | 2, 3} (then + {4, 5 | 6, 7} for the second
// mma), a permutation of k that the B fragment (x, k × tokens) follows: lane (g, c) loads token g's x at the
// same 8 k. The 8 n-columns of the mma are the tokens (columns ≥ T are zero).
// x stays exact: each fp32 value is split into three bf16 pieces x = hi + mid + lo (each piece the rounding
// error of the one before, exactly representable: 24 significant bits = 3 × 8), and each piece is one mma
// against the same weights, so every product w·x_piece is exact in the fp32 accumulator and the result
// differs from the CPU's fp32 loop by summation order and the tensor core's accumulator rounding only (the
// self-test's linear tolerance, 1e-4, fails a kernel that rounds x to bf16 once).
// Work split (tcPlan()): RB = ⌈N/16⌉ row blocks × S k-slices (S a power of two, slices ≥ 128 k) with ≥ ~4,096
// warps in all; a block of 8 warps holds 8/W row blocks × W slices (W = min(S, 8)) and adds its warps'
// sums in shared memory in warp order; when S > 8, G = S / 8 blocks share a row block (grid y): each writes
// its 16 × 8 partial to scratch, the last to arrive (acquire-release counter, reset by it) adds the G
// partials in order and writes y. Deterministic.
// Loads: weights 16 bytes per lane and row that do not allocate in L1 (read once), the next 64 k in flight
// while the current are multiplied; x through the read-only cache (every warp on the SM reads the same
// slice). PDL: the first weights are loaded before griddepcontrol.wait (they are never written by kernels),
// x after it.
//
// Test: twinspark-cli selftest --backend cuda --filter math (each linear case runs the GEMV modes not in force:
// this one against the CPU with the linear tolerance). Benchmark: twinspark-cli bench-device --what gemv
// (every mode at T = 1, 2, 3, 4, 8 on a decode step's shapes and a KDA layer's chain).
#include <cuda_bf16.h>

#include <algorithm>

#include "core/env_switch.h"
#include "cuda/cuda_backend.h"
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

// Two fp32 values → one bf16x2 word (low half = u), round to nearest even; and its halves back to fp32.
__device__ __forceinline__ uint32_t packBf16(float u, float v) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(u, v);
    return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float lowF(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float highF(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// The three bf16 pieces of 8 fp32 values (pairs (2j, 2j+1) in word j): x = hi + mid + lo exactly (each
// difference below is exact in fp32: the rounding error of a narrower format).
struct XPieces {
    uint32_t hi[4], mid[4], lo[4];
};
__device__ __forceinline__ XPieces splitX(const float (&v)[8]) {
    XPieces p;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float a = v[2 * j], b = v[2 * j + 1];
        p.hi[j] = packBf16(a, b);
        const float ra = a - lowF(p.hi[j]), rb = b - highF(p.hi[j]);
        p.mid[j] = packBf16(ra, rb);
        p.lo[j] = packBf16(ra - lowF(p.mid[j]), rb - highF(p.mid[j]));
    }
    return p;
}

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

// acc += the 16 rows × 32 k of one half of a WTile (a: row g, b: row g + 8) times token g's x at the same k
// (xp: token g's x there; in: the piece lies in the slice — beyond it x is zero and not read).
__device__ __forceinline__ void mulHalf(float (&acc)[4], const uint4& a, const uint4& b, const float* xp, bool in) {
    float v[8];
    if (in) {
        const float4 p = __ldg(reinterpret_cast<const float4*>(xp));
        const float4 q = __ldg(reinterpret_cast<const float4*>(xp) + 1);
        v[0] = p.x; v[1] = p.y; v[2] = p.z; v[3] = p.w;
        v[4] = q.x; v[5] = q.y; v[6] = q.z; v[7] = q.w;
    } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = 0.0f;
    }
    const XPieces x = splitX(v);
    // physical k 8c + {0,1 | 2,3}: words .x | .y; then {4,5 | 6,7}: .z | .w
    mmaBf16(acc, a.x, b.x, a.y, b.y, x.hi[0], x.hi[1]);
    mmaBf16(acc, a.x, b.x, a.y, b.y, x.mid[0], x.mid[1]);
    mmaBf16(acc, a.x, b.x, a.y, b.y, x.lo[0], x.lo[1]);
    mmaBf16(acc, a.z, b.z, a.w, b.w, x.hi[2], x.hi[3]);
    mmaBf16(acc, a.z, b.z, a.w, b.w, x.mid[2], x.mid[3]);
    mmaBf16(acc, a.z, b.z, a.w, b.w, x.lo[2], x.lo[3]);
}

// grid (⌈RB / (8 / W)⌉, G), 256 threads. L: slice length in k (a multiple of 64). part: [RB, G, 16 × 8] and
// counters: [RB] (zero between launches) when G > 1.
__global__ void __launch_bounds__(kTcThreads, 4)
    gemvTcKernel(const float* __restrict__ x, const uint16_t* __restrict__ W, float* __restrict__ y, int T, int64_t N,
                 int64_t K, int wSplit, int G, int64_t L, float* __restrict__ part, int* __restrict__ counters) {
    __shared__ float red[kTcWarps][16 * 8];  // per warp: [row 16][token 8]
    __shared__ int isLast;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, c = lane & 3;
    const int rbPerBlock = kTcWarps / wSplit;
    const int64_t rb = int64_t(blockIdx.x) * rbPerBlock + warp / wSplit;
    const int64_t split = int64_t(blockIdx.y) * wSplit + warp % wSplit;
    const int64_t kBeg = split * L, kEnd = kBeg + L < K ? kBeg + L : K;
    const int64_t row0 = rb * 16 + g, row1 = row0 + 8;

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
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
    const float* xp = x + int64_t(g < T ? g : T - 1) * K + kBeg + 8 * c;
    for (int it = 0; it < iters; ++it) {
        p0 += 64;
        p1 += 64;
        const WTile next = it + 1 < iters ? loadW(p0, p1, rem - 64) : WTile{};
        mulHalf(acc, cur.r0[0], cur.r1[0], xp, rem > 0);
        mulHalf(acc, cur.r0[1], cur.r1[1], xp + 32, rem > 32);
        cur = next;
        xp += 64;
        rem -= 64;
    }

    float* r = red[warp];
    r[g * 8 + 2 * c] = acc[0];
    r[g * 8 + 2 * c + 1] = acc[1];
    r[(g + 8) * 8 + 2 * c] = acc[2];
    r[(g + 8) * 8 + 2 * c + 1] = acc[3];
    __syncthreads();
    for (int i = threadIdx.x; i < rbPerBlock * 128; i += kTcThreads) {
        const int rbl = i >> 7, e = i & 127, rr = e >> 3, t = e & 7;
        const int64_t rowBlock = int64_t(blockIdx.x) * rbPerBlock + rbl, row = rowBlock * 16 + rr;
        if (t >= T || row >= N) continue;
        float v = 0.0f;
        for (int s = 0; s < wSplit; ++s) v += red[rbl * wSplit + s][e];
        if (G == 1) y[int64_t(t) * N + row] = v;
        else part[(rowBlock * G + blockIdx.y) * 128 + e] = v;
    }
    if (G == 1) return;
    // G > 1: one row block per block (wSplit = 8). The last of its G blocks adds the partials in order.
    __syncthreads();
    if (threadIdx.x == 0) isLast = ::ts::cuda::atomAddAcqRel(counters + rb, 1) == G - 1;
    __syncthreads();
    if (!isLast) return;
    if (threadIdx.x < 128) {
        const int e = threadIdx.x, rr = e >> 3, t = e & 7;
        const int64_t row = rb * 16 + rr;
        if (t < T && row < N) {
            float v = 0.0f;
            for (int gy = 0; gy < G; ++gy) v += __ldcg(part + (rb * G + gy) * 128 + e);
            y[int64_t(t) * N + row] = v;
        }
    }
    if (threadIdx.x == 0) counters[rb] = 0;  // for the next launch (stream order)
}

struct TcPlan {
    int64_t rowBlocks = 0, sliceK = 0;
    int wSplit = 1, G = 1;
    unsigned gridX = 0;
};

TcPlan tcPlan(int64_t N, int64_t K) {
    TcPlan p;
    p.rowBlocks = (N + 15) / 16;
    int64_t S = 1;
    while (S < 64 && p.rowBlocks * S < tcTargetWarps() && K / (2 * S) >= tcMinSliceK()) S *= 2;
    // slice length: a multiple of 64 k (the loop's iteration) covering K in S slices
    const int64_t iters = (K + 63) / 64;
    p.sliceK = (iters + S - 1) / S * 64;
    S = (K + p.sliceK - 1) / p.sliceK;  // rounding may leave fewer slices
    // S is a power of two ≤ 64 unless rounding shrank it; W must divide 8 and G·W ≥ S
    int w = 1;
    while (w < 8 && w < S) w *= 2;
    p.wSplit = w;
    p.G = int((S + w - 1) / w);
    const int rbPerBlock = kTcWarps / w;
    p.gridX = unsigned((p.rowBlocks + rbPerBlock - 1) / rbPerBlock);
    return p;
}

}  // namespace

void CudaBackend::gemvTensorCores(const float* x, const void* W, float* y, int64_t T, int64_t N, int64_t K, bool pdl) {
    TS_CHECK(T >= 1 && T <= 8 && K % 8 == 0, "gemvTensorCores: needs 1..8 tokens and K % 8 == 0");
    const TcPlan p = tcPlan(N, K);
    TS_CHECK(p.gridX <= 0x7fffffffu && p.G <= 65535, "gemvTensorCores: matrix too large");
    float* part = nullptr;
    int* counters = nullptr;
    if (p.G > 1) {
        part = zeroedScratch(m_gemvPart, size_t(p.rowBlocks) * size_t(p.G) * 128 * 4).f32();
        counters = zeroedScratch(m_gemvCounters, size_t(p.rowBlocks) * 4).i32();
    }
    const dim3 grid(p.gridX, unsigned(p.G));
    const auto* w = static_cast<const uint16_t*>(W);
    cuda::launchPdl(gemvTcKernel, grid, dim3(kTcThreads), 0, m_stream, pdl, x, w, y, int(T), N, K, p.wSplit, p.G,
                    p.sliceK, part, counters);
}

}  // namespace ts
