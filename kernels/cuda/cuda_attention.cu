// DSA-MLA on the GPU (glm_dsa.md §3.3 absorbed form, §4 NoPE, §5.1 fp8_ds_mla), the CUDA twin of
// kernels/cpu/cpu_attention.cpp; the k-pool indexer is in cuda_indexer.cu.
//
//   mlaCacheWrite       one block per (token, 128-wide tile): amax → scale amax/448 → e4m3 bytes, the tile
//                       scale and (tile 0) the 64 zero bf16 of k_pe; fp32 mode copies the row. Slots are
//                       computed and bounds-checked on the host, as the CPU does. Bytes equal the CPU's.
//   mlaAbsorbQ, mlaUpV  per-head small GEMMs over kv_b_proj (device copy, bf16/f16/f32) with fp32
//                       accumulation: one tiled SIMT kernel, 64-row tiles for prefill, 16-row tiles up to 16
//                       rows; decode (≤ 4 rows, where the weight read dominates) GEMV forms, one per weight
//                       layout (columns contiguous: absorb; k contiguous: up-projection).
//   mlaSparseAttention  (1) one block per query turns idx[t, width] into the set of physical slots
//                       (−1 and positions beyond the pages dropped, duplicates removed: a sorted, unique
//                       list — what the indexer emits — is taken as is, anything else is deduplicated);
//                       (2) flash-decoding: for an fp8 cache at R = 512 with heads in 16s (the real model) the
//                       tensor-core kernel of cuda_attention_tc.cu; otherwise (and under TS_MLA_TC=0) one block
//                       per (query, chunk of the set, group of 8 heads) streams its latents once for the 8 heads
//                       through shared memory (fp8 dequantised on load, online softmax in fp32); (3) when the
//                       set was split into chunks, one block per (query, head) merges the partial (max, sum, o)
//                       triples.
//
// Test: `twinspark-cli selftest --backend cuda --filter attention` (engine/selftest/cases_attention.cpp:
// cache bytes exact, attention / GEMMs within fp32-order tolerances). Benchmark: `twinspark-cli
// bench-device` (app/cli/bench_cuda_attention.cpp: sparse MLA decode over a 128k context, indexer select).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/cuda_attention_common.cuh"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"
#include "cuda/mla_plan.h"

namespace ts {

namespace {

using namespace ts::cuda;

// --- mlaCacheWrite ----------------------------------------------------------------------------------

// grid (T, ceil(R/128)), block 128. c [T, R] fp32; slots [T]; cache [slots, eb] bytes.
__global__ void mlaCacheWriteFp8Kernel(const float* __restrict__ c, int64_t R, const int32_t* __restrict__ slots,
                                       uint8_t* __restrict__ cache, int64_t eb, float minAmax) {
    __shared__ float red[32];
    const int64_t t = blockIdx.x, tile = blockIdx.y, r = tile * 128 + threadIdx.x;
    const int64_t n = imin64(128, R - tile * 128);
    const float v = threadIdx.x < n ? c[t * R + r] : 0.0f;
    const float amax = blockMax(fabsf(v), red);
    const float s = fp8Scale(amax, false, minAmax);
    uint8_t* e = cache + int64_t(slots[t]) * eb;
    if (threadIdx.x < n) e[r] = f32ToFp8(__fdiv_rn(v, s));
    if (threadIdx.x == 0) storeF32Bytes(e + R + tile * 4, s);
    if (tile == 0) e[R + ((R + 127) / 128) * 4 + threadIdx.x] = 0;  // k_pe ≡ 0 (NoPE): 128 bytes
}

// grid T, block 256: the fp32 entry is the row itself.
__global__ void mlaCacheWriteF32Kernel(const float* __restrict__ c, int64_t R, const int32_t* __restrict__ slots,
                                       float* __restrict__ cache) {
    const int64_t t = blockIdx.x;
    float* e = cache + int64_t(slots[t]) * R;
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) e[r] = c[t * R + r];
}

// --- absorbed-form GEMMs ------------------------------------------------------------------------------

// Batched over heads h = blockIdx.z: C_h[m, n] = Σ_k A_h[m, k] · B_h[k, n], fp32 accumulation.
//   A_h[m, k] = a[h·aHead + m·lda + k]                (fp32 activations)
//   B_h[k, n] = b[bOff + h·bHead + k·ldbK + n·ldbN]    (the weight, dtype 0 bf16 / 1 f16 / 2 f32)
//   C_h[m, n] = c[h·cHead + m·ldc + n]
// Tile BM×64 outputs, k-step 16, 256 threads as 16×16, each (BM/16)×4 outputs.
struct GemmArgs {
    const float* a;
    int64_t aHead, lda;
    const void* b;
    int bType;
    int64_t bOff, bHead, ldbK, ldbN;
    float* c;
    int64_t cHead, ldc;
    int64_t M, N, K;
};

template <int BM>
__global__ void __launch_bounds__(256) headGemmKernel(GemmArgs g) {
    constexpr int BN = 64, BK = 16, TM = BM / 16;
    __shared__ float As[BK][BM + 1];
    __shared__ float Bs[BK][BN + 1];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int64_t h = blockIdx.z, m0 = int64_t(blockIdx.y) * BM, n0 = int64_t(blockIdx.x) * BN;
    const float* a = g.a + h * g.aHead;
    const int64_t bBase = g.bOff + h * g.bHead;
    float acc[TM][4] = {};
    for (int64_t k0 = 0; k0 < g.K; k0 += BK) {
        // A tile BM×BK, k fastest (A rows are contiguous in k).
        for (int i = tid; i < BM * BK; i += 256) {
            const int mm = i / BK, kk = i % BK;
            const int64_t m = m0 + mm, k = k0 + kk;
            As[kk][mm] = (m < g.M && k < g.K) ? a[m * g.lda + k] : 0.0f;
        }
        // B tile BK×BN, the weight's contiguous index fastest.
        for (int i = tid; i < BK * BN; i += 256) {
            int kk, nn;
            if (g.ldbN == 1) {
                kk = i / BN;
                nn = i % BN;
            } else {
                nn = i / BK;
                kk = i % BK;
            }
            const int64_t k = k0 + kk, n = n0 + nn;
            Bs[kk][nn] = (k < g.K && n < g.N) ? loadWeight(g.b, bBase + k * g.ldbK + n * g.ldbN, g.bType) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float bv[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const float av = As[kk][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av, bv[j], acc[i][j]);
            }
        }
        __syncthreads();
    }
    float* c = g.c + h * g.cHead;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int64_t m = m0 + ty + 16 * i;
        if (m >= g.M) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int64_t n = n0 + tx + 16 * j;
            if (n < g.N) c[m * g.ldc + n] = acc[i][j];
        }
    }
}

// Decode forms (M ≤ kDecodeRows: the weight read is everything). The tiled kernel above waits one weight
// load latency per 16-deep k step, ~49 µs per call at GLM-5.3-Flash's widths on the H200 (64 heads × 512 ×
// 192/256, 13–17 MB); these issue each thread's loads back to back. Sums in another fixed order (fp32).
constexpr int kDecodeRows = 4;

template <int DT>
__device__ __forceinline__ float ldB(const void* b, int64_t i) {
    if constexpr (DT == 0) return __uint_as_float(uint32_t(static_cast<const uint16_t*>(b)[i]) << 16);
    else if constexpr (DT == 1) return __half2float(__ushort_as_half(static_cast<const uint16_t*>(b)[i]));
    else return static_cast<const float*>(b)[i];
}

// B contiguous in n (ldbN = 1: mlaAbsorbQ). Block (64 columns, head): thread (column tid % 64, k group tid / 64)
// sums every 4th k; the four groups are added in group order.
template <int DT>
__global__ void __launch_bounds__(256) headGemvNKernel(GemmArgs g) {
    __shared__ float red[4][kDecodeRows][64];
    const int tid = threadIdx.x, col = tid & 63, kg = tid >> 6;
    const int64_t h = blockIdx.y, n = int64_t(blockIdx.x) * 64 + col;
    const float* a = g.a + h * g.aHead;
    const int64_t bBase = g.bOff + h * g.bHead;
    float acc[kDecodeRows] = {};
    if (n < g.N) {
#pragma unroll 8
        for (int64_t k = kg; k < g.K; k += 4) {
            const float bv = ldB<DT>(g.b, bBase + k * g.ldbK + n);
#pragma unroll
            for (int m = 0; m < kDecodeRows; ++m)
                if (m < g.M) acc[m] = fmaf(a[m * g.lda + k], bv, acc[m]);
        }
    }
#pragma unroll
    for (int m = 0; m < kDecodeRows; ++m) red[kg][m][col] = acc[m];
    __syncthreads();
    if (kg == 0 && n < g.N) {
        float* c = g.c + h * g.cHead;
        for (int m = 0; m < g.M; ++m) c[m * g.ldc + n] = ((red[0][m][col] + red[1][m][col]) + red[2][m][col]) + red[3][m][col];
    }
}

// B contiguous in k (ldbK = 1: mlaUpV). One warp per output column: lanes stride k, then a warp sum.
template <int DT>
__global__ void __launch_bounds__(256) headGemvKKernel(GemmArgs g) {
    const int lane = threadIdx.x & 31;
    const int64_t h = blockIdx.y, n = int64_t(blockIdx.x) * 8 + (threadIdx.x >> 5);
    if (n >= g.N) return;  // whole warp
    const float* a = g.a + h * g.aHead;
    const int64_t bRow = g.bOff + h * g.bHead + n * g.ldbN;
    float acc[kDecodeRows] = {};
#pragma unroll 8
    for (int64_t k = lane; k < g.K; k += 32) {
        const float bv = ldB<DT>(g.b, bRow + k);
#pragma unroll
        for (int m = 0; m < kDecodeRows; ++m)
            if (m < g.M) acc[m] = fmaf(a[m * g.lda + k], bv, acc[m]);
    }
    float* c = g.c + h * g.cHead;
#pragma unroll
    for (int m = 0; m < kDecodeRows; ++m) {
        const float v = warpSum(acc[m]);
        if (lane == 0 && m < g.M) c[m * g.ldc + n] = v;
    }
}

void launchHeadGemm(const GemmArgs& g, int64_t H, cudaStream_t stream) {
    if (g.M == 0 || g.N == 0 || H == 0) return;
    TS_CHECK(H <= 65535, "mla GEMM: too many heads");
    if (g.M <= kDecodeRows && (g.ldbN == 1 || g.ldbK == 1) && g.bType >= 0 && g.bType <= 2) {
        const bool byN = g.ldbN == 1;
        const dim3 grid(unsigned(byN ? blocksFor(g.N, 64) : blocksFor(g.N, 8)), unsigned(H));
        auto run = [&](auto dt) {
            constexpr int DT = decltype(dt)::value;
            if (byN) cuda::launchPlain(headGemvNKernel<DT>, grid, 256, 0, stream, g);
            else cuda::launchPlain(headGemvKKernel<DT>, grid, 256, 0, stream, g);
        };
        if (g.bType == 0) run(std::integral_constant<int, 0>{});
        else if (g.bType == 1) run(std::integral_constant<int, 1>{});
        else run(std::integral_constant<int, 2>{});
    } else if (g.M <= 16) {
        const dim3 grid(blocksFor(g.N, 64), 1, unsigned(H));
        cuda::launchPlain(headGemmKernel<16>, grid, 256, 0, stream, g);
    } else {
        const dim3 grid(blocksFor(g.N, 64), blocksFor(g.M, 64), unsigned(H));
        TS_CHECK(grid.y <= 65535, "mla GEMM: too many rows");
        cuda::launchPlain(headGemmKernel<64>, grid, 256, 0, stream, g);
    }
}

// --- sparse attention ---------------------------------------------------------------------------------

// One block (1024 threads) per query t: the selected set as physical slots, sel[t, 0..count[t]), through the
// page table of t's sequence (blocks + qTable[t], qBlocks[t] entries: its capacity is qBlocks[t] · blockSize).
// Fast path: the valid entries (0 ≤ pos < capacity) already strictly ascending (the indexer's output):
// kept in order. Otherwise each valid entry is kept at its first occurrence (quadratic, rare).
__global__ void __launch_bounds__(1024) mlaSelectSlotsKernel(const int32_t* __restrict__ idx, int64_t width,
                                                            const int32_t* __restrict__ allBlocks,
                                                            const int32_t* __restrict__ qTable,
                                                            const int32_t* __restrict__ qBlocks, int64_t blockSize,
                                                            int32_t* __restrict__ sel, int32_t* __restrict__ count) {
    __shared__ int scan[33];
    __shared__ int32_t kept[1024];
    __shared__ int32_t last;
    pdlTrigger();  // the main pass may start (it reads sel and count only after its pdlWait)
    const int64_t t = blockIdx.x;
    const int32_t* blocks = allBlocks + qTable[t];
    const int64_t capacity = int64_t(qBlocks[t]) * blockSize;
    const int32_t* row = idx + t * width;
    int32_t* out = sel + t * width;
    auto slotOf = [&](int32_t pos) { return int32_t(int64_t(blocks[pos / blockSize]) * blockSize + pos % blockSize); };

    // The first kPre rounds' entries and their slots are loaded before the first scan: two dependent loads in
    // all instead of two per round (a 2,063-wide decode selection is 3 rounds).
    constexpr int kPre = 4;
    int32_t preV[kPre], preS[kPre];
#pragma unroll
    for (int k = 0; k < kPre; ++k) {
        const int64_t i = int64_t(k) * blockDim.x + threadIdx.x;
        preV[k] = i < width ? row[i] : -1;
    }
#pragma unroll
    for (int k = 0; k < kPre; ++k) preS[k] = preV[k] >= 0 && preV[k] < capacity ? slotOf(preV[k]) : 0;

    int n = 0;
    bool sorted = true;
    if (threadIdx.x == 0) last = -1;
    __syncthreads();
    int round = 0;
    for (int64_t base = 0; base < width; base += blockDim.x, ++round) {
        const int64_t i = base + threadIdx.x;
        int32_t v = -1, slot = 0;
        if (round < kPre) {
#pragma unroll
            for (int k = 0; k < kPre; ++k)
                if (round == k) {
                    v = preV[k];
                    slot = preS[k];
                }
        } else {
            v = i < width ? row[i] : -1;
        }
        const bool valid = v >= 0 && v < capacity;
        if (valid && round >= kPre) slot = slotOf(v);
        int total;
        const int r = blockScanFlag(valid, scan, total);
        if (valid) {
            kept[r] = v;
            out[n + r] = slot;
        }
        __syncthreads();
        const bool bad = valid && v <= (r > 0 ? kept[r - 1] : last);
        sorted = !__syncthreads_or(bad) && sorted;
        if (threadIdx.x == 0 && total > 0) last = kept[total - 1];
        __syncthreads();
        n += total;
    }
    if (!sorted) {
        n = 0;
        for (int64_t base = 0; base < width; base += blockDim.x) {
            const int64_t i = base + threadIdx.x;
            const int32_t v = i < width ? row[i] : -1;
            bool keep = v >= 0 && v < capacity;
            for (int64_t j = 0; keep && j < i; ++j) keep = row[j] != v;
            int total;
            const int r = blockScanFlag(keep, scan, total);
            if (keep) out[n + r] = slotOf(v);
            n += total;
        }
    }
    if (threadIdx.x == 0) count[t] = n;
}

constexpr int kAttnThreads = 256;
constexpr int kAttnHeads = 8;   // heads per block (HG)
constexpr int kAttnTile = 16;   // latents per shared-memory tile (NT)

struct AttnArgs {
    const float* qLat;      // [T, H, R]
    const uint8_t* cache;   // [slots, eb]
    int64_t eb;
    int fp8;
    int aligned4;           // fp8 entries readable as 4-byte words (R, eb and the base multiples of 4)
    const int32_t* sel;     // [T, width] physical slots
    const int32_t* count;   // [T]
    int64_t width, H, R, RP, nTiles;  // RP: padded row stride of the shared tiles; nTiles = ceil(R/128)
    int64_t chunkLen;       // selected entries per chunk (a multiple of kAttnTile)
    float scale;
    float* oLat;            // [T, H, R] (single chunk) or null
    float* partO;           // [T, H, chunks, R] (several chunks)
    float* partML;          // [T, H, chunks, 2]: running max, sum
};

// grid (T, chunks, ceil(H/8)), block 256. RPT = r values per thread in the P·V product (R ≤ 128·RPT).
// Shared: q[8][RP] | c[16][RP] | p[8][16] | corr[8] | runMax[8] | runSum[8] | tile scales[16][nTiles] |
// slots[16].
template <int RPT>
__global__ void __launch_bounds__(kAttnThreads) mlaSparseAttnKernel(AttnArgs a) {
    extern __shared__ float smem[];
    float* qs = smem;
    float* cs = qs + kAttnHeads * a.RP;
    float* ps = cs + kAttnTile * a.RP;
    float* corr = ps + kAttnHeads * kAttnTile;
    float* runMax = corr + kAttnHeads;
    float* runSum = runMax + kAttnHeads;
    float* tileScale = runSum + kAttnHeads;
    int32_t* slotS = reinterpret_cast<int32_t*>(tileScale + kAttnTile * a.nTiles);

    const int tid = threadIdx.x;
    const int64_t t = blockIdx.x, chunk = blockIdx.y, h0 = int64_t(blockIdx.z) * kAttnHeads;
    const int64_t R = a.R, RP = a.RP;
    const int hg = int(imin64(kAttnHeads, a.H - h0));
    const int64_t n = a.count[t];
    const int64_t cBeg = chunk * a.chunkLen, cEnd = imin64(n, cBeg + a.chunkLen);
    const int nChunks = gridDim.y;

    for (int64_t i = tid; i < kAttnHeads * R; i += kAttnThreads) {
        const int h = int(i / R);
        const int64_t r = i % R;
        qs[h * RP + r] = h < hg ? a.qLat[(t * a.H + h0 + h) * R + r] : 0.0f;
    }

    // QK mapping: 16 r-slices × 16 tiles of (2 heads × 4 latents); PV mapping: 2 head-quads × 128 r lanes.
    const int slice = tid & 15, tileId = tid >> 4, hp = tileId & 3, lq = tileId >> 2;
    const int hq = tid >> 7, rr = tid & 127;
    float acc[4][RPT];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int k = 0; k < RPT; ++k) acc[i][k] = 0.0f;
    if (tid < kAttnHeads) {  // the online softmax state of each head
        runMax[tid] = -INFINITY;
        runSum[tid] = 0.0f;
    }

    const int32_t* selRow = a.sel + t * a.width;
    for (int64_t base = cBeg; base < cEnd; base += kAttnTile) {
        const int nt = int(imin64(kAttnTile, cEnd - base));
        __syncthreads();  // the previous tile is consumed (and q is stored, first time)
        if (tid < nt) slotS[tid] = selRow[base + tid];
        __syncthreads();
        if (a.fp8) {
            for (int i = tid; i < nt * a.nTiles; i += kAttnThreads) {
                const int l = int(i / a.nTiles), k = int(i % a.nTiles);
                tileScale[l * a.nTiles + k] = loadF32Bytes(a.cache + int64_t(slotS[l]) * a.eb + R + 4 * k);
            }
            __syncthreads();
            if (a.aligned4) {
                const int64_t wpl = R >> 2;  // 4-byte words per latent
                for (int64_t w = tid; w < nt * wpl; w += kAttnThreads) {
                    const int l = int(w / wpl);
                    const int64_t r = (w - l * wpl) * 4;
                    const uint32_t word =
                        *reinterpret_cast<const uint32_t*>(a.cache + int64_t(slotS[l]) * a.eb + r);
                    const float s = tileScale[l * a.nTiles + r / 128];
                    float* dst = cs + l * RP + r;
                    dst[0] = __fmul_rn(fp8ToF32(word & 0xffu), s);
                    dst[1] = __fmul_rn(fp8ToF32((word >> 8) & 0xffu), s);
                    dst[2] = __fmul_rn(fp8ToF32((word >> 16) & 0xffu), s);
                    dst[3] = __fmul_rn(fp8ToF32(word >> 24), s);
                }
            } else {
                for (int64_t w = tid; w < nt * R; w += kAttnThreads) {
                    const int l = int(w / R);
                    const int64_t r = w - l * R;
                    cs[l * RP + r] = __fmul_rn(fp8ToF32(a.cache[int64_t(slotS[l]) * a.eb + r]),
                                               tileScale[l * a.nTiles + r / 128]);
                }
            }
        } else {
            const float* cf = reinterpret_cast<const float*>(a.cache);
            for (int64_t w = tid; w < nt * R; w += kAttnThreads) {
                const int l = int(w / R);
                const int64_t r = w - l * R;
                cs[l * RP + r] = cf[int64_t(slotS[l]) * R + r];
            }
        }
        __syncthreads();

        // Scores of 2 heads × 4 latents over this thread's r-slice, then summed over the 16 slices.
        {
            float s[2][4] = {};
            const float* q0 = qs + (2 * hp) * RP;
            const float* q1 = q0 + RP;
            const float* c0 = cs + (4 * lq) * RP;
            for (int64_t r = slice; r < R; r += 16) {
                const float a0 = q0[r], a1 = q1[r];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const float cv = c0[j * RP + r];
                    s[0][j] = fmaf(a0, cv, s[0][j]);
                    s[1][j] = fmaf(a1, cv, s[1][j]);
                }
            }
#pragma unroll
            for (int o = 8; o > 0; o >>= 1)
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) s[i][j] += __shfl_xor_sync(0xffffffffu, s[i][j], o);
            if (slice == 0) {
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const int l = 4 * lq + j;
                        ps[(2 * hp + i) * kAttnTile + l] = l < nt ? a.scale * s[i][j] : -INFINITY;
                    }
            }
        }
        __syncthreads();

        // Online softmax: threads 0..127 are (head, latent) pairs, 16 consecutive lanes per head.
        if (tid < kAttnHeads * kAttnTile) {
            const int h = tid >> 4, l = tid & 15;
            const float sc = ps[h * kAttnTile + l];  // −inf past nt
            float mx = sc;
#pragma unroll
            for (int o = 8; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            const float mOld = runMax[h], mNew = fmaxf(mOld, mx);  // finite: the tile has ≥ 1 entry
            const float pv = l < nt ? expf(sc - mNew) : 0.0f;
            ps[h * kAttnTile + l] = pv;
            float sum = pv;
#pragma unroll
            for (int o = 8; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            if (l == 0) {
                const float cr = expf(mOld - mNew);  // mOld = −inf on the first tile: 0
                corr[h] = cr;
                runSum[h] = runSum[h] * cr + sum;
                runMax[h] = mNew;
            }
        }
        __syncthreads();

        // o[h, r] = o[h, r] · corr[h] + Σ_l p[h, l] · c[l, r] for this thread's 4 heads and r lanes.
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float cr = corr[4 * hq + i];
#pragma unroll
            for (int k = 0; k < RPT; ++k) acc[i][k] *= cr;
        }
        for (int l = 0; l < nt; ++l) {
            float pv[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) pv[i] = ps[(4 * hq + i) * kAttnTile + l];
#pragma unroll
            for (int k = 0; k < RPT; ++k) {
                const int64_t r = rr + 128 * k;
                const float cv = r < R ? cs[l * RP + r] : 0.0f;
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[i][k] = fmaf(pv[i], cv, acc[i][k]);
            }
        }
    }

    // Write: the normalised output (one chunk) or the partial triple (several).
    __syncthreads();
    if (nChunks > 1 && tid < hg) {
        float* ml = a.partML + (((t * a.H + h0 + tid) * nChunks) + chunk) * 2;
        ml[0] = runMax[tid];
        ml[1] = runSum[tid];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int h = 4 * hq + i;
        if (h >= hg) continue;
        const float sum = runSum[h];
#pragma unroll
        for (int k = 0; k < RPT; ++k) {
            const int64_t r = rr + 128 * k;
            if (r >= R) continue;
            if (nChunks == 1) {
                a.oLat[(t * a.H + h0 + h) * R + r] = sum > 0.0f ? acc[i][k] / sum : 0.0f;
            } else if (sum > 0.0f) {
                a.partO[(((t * a.H + h0 + h) * nChunks) + chunk) * R + r] = acc[i][k];
            }
        }
    }
}

// o = Σ_c O_c·e^(m_c − M) / Σ_c l_c·e^(m_c − M) over the chunks that saw entries. grid (T·H, ⌈R/128⌉) when
// `vec` (R a multiple of 4, 16-byte aligned rows), block 128: warp 0 makes the chunks' weights (lane-parallel,
// the sum in a fixed shuffle order), then warp k adds chunks k, k + 4, ... for the block's 128 dims (lane: 4 of
// them, float4, all its chunks' loads in flight) and the four warps' sums are added in warp order. Else grid
// (T·H, 1), the block's threads take the dims one by one. Launched with PDL: waits for the partials first.
// (33 chunks of a 128k-context decode call, ncu: a thread per 4 dims over all chunks 8.2 µs, this form 5.8 µs.)
constexpr int kCombineWarps = 4;
__global__ void __launch_bounds__(32 * kCombineWarps) mlaAttnCombineKernel(const float* __restrict__ partO,
                                                                         const float* __restrict__ partML, int nChunks,
                                                                         int64_t R, int vec, float* __restrict__ oLat) {
    extern __shared__ float w[];  // [nChunks]
    __shared__ float total;
    __shared__ float4 red[kCombineWarps][32];
    pdlWait();
    const int64_t th = blockIdx.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float* ml = partML + th * nChunks * 2;
    if (warp == 0) {
        float mx = -INFINITY;
        for (int c = lane; c < nChunks; c += 32)
            if (__ldcg(ml + 2 * c + 1) > 0.0f) mx = fmaxf(mx, __ldcg(ml + 2 * c));
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        float sum = 0.0f;
        for (int c = lane; c < nChunks; c += 32) {
            const float l = __ldcg(ml + 2 * c + 1);
            const float wc = l > 0.0f ? expf(__ldcg(ml + 2 * c) - mx) : 0.0f;
            w[c] = wc;
            sum += wc * l;
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) total = sum;
    }
    __syncthreads();
    const float* o = partO + th * nChunks * R;
    const float tot = total;
    if (vec) {
        const int64_t r = int64_t(blockIdx.y) * 128 + 4 * lane;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r < R) {
#pragma unroll 8
            for (int c = warp; c < nChunks; c += kCombineWarps) {
                const float wc = w[c];
                // Chunks that saw no entry wrote no partial (its memory is stale): never read.
                const float4 q = wc > 0.0f ? __ldcg(reinterpret_cast<const float4*>(o + int64_t(c) * R + r))
                                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                v.x += wc * q.x;
                v.y += wc * q.y;
                v.z += wc * q.z;
                v.w += wc * q.w;
            }
        }
        red[warp][lane] = v;
        __syncthreads();
        if (warp == 0 && r < R) {
#pragma unroll
            for (int k = 1; k < kCombineWarps; ++k) {
                const float4 q = red[k][lane];
                v.x += q.x;
                v.y += q.y;
                v.z += q.z;
                v.w += q.w;
            }
            *reinterpret_cast<float4*>(oLat + th * R + r) =
                tot > 0.0f ? make_float4(v.x / tot, v.y / tot, v.z / tot, v.w / tot) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        return;
    }
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
        float v = 0.0f;
        for (int c = 0; c < nChunks; ++c)
            if (w[c] > 0.0f) v += w[c] * __ldcg(o + int64_t(c) * R + r);
        oLat[th * R + r] = tot > 0.0f ? v / tot : 0.0f;
    }
}

// The merge of `chunks` partials into oLat (launched after the main pass, with PDL).
void launchCombine(const float* partO, const float* partML, int64_t chunks, int64_t rows, int64_t R, float* oLat,
                   cudaStream_t st) {
    const bool vec = R % 4 == 0 && reinterpret_cast<uintptr_t>(partO) % 16 == 0 && reinterpret_cast<uintptr_t>(oLat) % 16 == 0;
    launchPdl(mlaAttnCombineKernel, dim3(unsigned(rows), vec ? unsigned((R + 127) / 128) : 1u), dim3(32 * kCombineWarps),
              size_t(chunks) * 4, st, true, partO, partML, int(chunks), R, int(vec), oLat);
}

template <int RPT>
void launchSparseAttn(const AttnArgs& a, dim3 grid, size_t shmem, cudaStream_t stream) {
    if (shmem > 48 * 1024)
        TS_CUDA_CHECK(cudaFuncSetAttribute(mlaSparseAttnKernel<RPT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(shmem)));
    cuda::launchPlain(mlaSparseAttnKernel<RPT>, grid, kAttnThreads, shmem, stream, a);
}

}  // namespace

void CudaBackend::mlaCacheWrite(const Buffer& c, int64_t T, int64_t R, KvCacheDtype dt, const Buffer& cache,
                                const PageTable& pages, int64_t pos0) {
    const SeqRows one{pages, pos0, T};
    mlaCacheWriteBatch(c, &one, 1, R, dt, cache);
}

void CudaBackend::mlaCacheWriteBatch(const Buffer& c, const SeqRows* seqs, int64_t nSeqs, int64_t R, KvCacheDtype dt,
                                     const Buffer& cache) {
    const size_t eb = mlaCacheEntryBytes(dt, R);
    const int64_t T = seqRowsTotal(seqs, nSeqs, "mlaCacheWrite");
    for (int64_t s = 0; s < nSeqs; ++s)
        TS_CHECK(seqs[s].pos0 + seqs[s].rows <= seqs[s].pages.capacity(), "mlaCacheWrite: positions beyond the sequence's pages");
    GraphOp op(*this, false, "mlaCacheWrite", {gk(T), gk(R)});
    if (T <= 0 || R <= 0) return;
    TS_CHECK(T <= 0x7fffffff, "mlaCacheWrite: too many tokens");
    std::vector<int32_t> slots(static_cast<size_t>(T));
    for (int64_t s = 0, t = 0; s < nSeqs; ++s)
        for (int64_t r = 0; r < seqs[s].rows; ++r, ++t) {
            const int64_t slot = seqs[s].pages.slot(seqs[s].pos0 + r);
            TS_CHECK(slot >= 0 && size_t(slot + 1) * eb <= cache.size(), "mlaCacheWrite: slot outside the cache");
            TS_CHECK(slot <= 0x7fffffff, "mlaCacheWrite: slot index beyond int32");
            slots[size_t(t)] = int32_t(slot);
        }
    const int32_t* dSlots = uploadInts(kScratchSel, slots.data(), T);
    if (dt == KvCacheDtype::Fp32) {
        cuda::launchPlain(mlaCacheWriteF32Kernel, unsigned(T), 256, 0, stream(), c.f32(), R, dSlots, cache.f32());
    } else {
        const dim3 grid{unsigned(T), unsigned((R + 127) / 128)};
        TS_CHECK(grid.y <= 65535, "mlaCacheWrite: latent too wide");
        cuda::launchPlain(mlaCacheWriteFp8Kernel, grid, 128, 0, stream(), c.f32(), R, dSlots, cache.bytes(),
                          int64_t(eb), FLT_MIN * 448.0f);
    }
}

void CudaBackend::mlaAbsorbQ(const Buffer& q, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                             const Buffer& qLat) {
    GraphOp op(*this, true, "mlaAbsorbQ", {gk(q.bytes()), gk(T), gk(H), gk(dn), gk(dv), gk(kvb.data), gk(qLat.bytes())});
    if (op.skip()) return;
    const int64_t R = kvb.cols;
    TS_CHECK(kvb.rows >= H * (dn + dv), "mlaAbsorbQ: kv_b_proj has too few rows");
    if (T <= 0) return;
    GemmArgs g{};
    g.a = q.f32();
    g.aHead = dn;
    g.lda = H * dn;
    g.b = deviceWeight(kvb);
    g.bType = int(kvb.dtype);
    g.bOff = 0;
    g.bHead = (dn + dv) * R;
    g.ldbK = R;  // W_UK row d of head h is weight row h·(dn+dv) + d
    g.ldbN = 1;
    g.c = qLat.f32();
    g.cHead = R;
    g.ldc = H * R;
    g.M = T;
    g.N = R;
    g.K = dn;
    launchHeadGemm(g, H, stream());
}

void CudaBackend::mlaUpV(const Buffer& oLat, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                         const Buffer& o) {
    GraphOp op(*this, true, "mlaUpV", {gk(oLat.bytes()), gk(T), gk(H), gk(dn), gk(dv), gk(kvb.data), gk(o.bytes())});
    if (op.skip()) return;
    const int64_t R = kvb.cols;
    TS_CHECK(kvb.rows >= H * (dn + dv), "mlaUpV: kv_b_proj has too few rows");
    if (T <= 0) return;
    GemmArgs g{};
    g.a = oLat.f32();
    g.aHead = R;
    g.lda = H * R;
    g.b = deviceWeight(kvb);
    g.bType = int(kvb.dtype);
    g.bOff = dn * R;  // W_UV row j of head h is weight row h·(dn+dv) + dn + j
    g.bHead = (dn + dv) * R;
    g.ldbK = 1;
    g.ldbN = R;
    g.c = o.f32();
    g.cHead = dv;
    g.ldc = H * dv;
    g.M = T;
    g.N = dv;
    g.K = R;
    launchHeadGemm(g, H, stream());
}

void CudaBackend::mlaSparseAttention(const Buffer& qLat, int64_t T, int64_t H, int64_t R, const Buffer& cache,
                                     KvCacheDtype dt, const PageTable& pages, const Buffer& idx, int64_t width,
                                     float scale, const Buffer& oLat) {
    const SeqRows one{pages, 0, T};  // the selection holds positions; pos0 does not enter
    mlaSparseAttentionBatch(qLat, &one, 1, H, R, cache, dt, idx, width, scale, oLat);
}

void CudaBackend::mlaSparseAttentionBatch(const Buffer& qLat, const SeqRows* seqs, int64_t nSeqs, int64_t H, int64_t R,
                                          const Buffer& cache, KvCacheDtype dt, const Buffer& idx, int64_t width,
                                          float scale, const Buffer& oLat) {
    const int64_t T = seqRowsTotal(seqs, nSeqs, "mlaSparseAttention", true);
    GraphOp op(*this, false, "mlaSparseAttention", {gk(T), gk(H), gk(width)});
    if (T <= 0 || H <= 0 || R <= 0) return;
    TS_CHECK(R <= 128 * 16, "mlaSparseAttention: latent wider than 2048");
    TS_CHECK(T <= 0x7fffffff && width >= 0, "mlaSparseAttention: bad shape");
    const size_t eb = mlaCacheEntryBytes(dt, R);
    cudaStream_t st = stream();

    // (1) the selected set of each query as physical slots, through its sequence's page table.
    const DeviceQueries dq = deviceQueries(seqs, nSeqs, T);
    const int64_t w = std::max<int64_t>(width, 1);
    auto* selMem = static_cast<int32_t*>(scratch(kScratchA, size_t(T * w + T) * 4));
    int32_t* sel = selMem;
    int32_t* count = selMem + T * w;
    if (width == 0) {
        TS_CUDA_CHECK(cudaMemsetAsync(count, 0, size_t(T) * 4, st));
    } else {
        cuda::launchPlain(mlaSelectSlotsKernel, unsigned(T), 1024, 0, st, idx.i32(), width, dq.blocks, dq.qTable,
                          dq.qBlocks, seqs[0].pages.blockSize, sel, count);
    }

    // Several chunks per query: their partials in scratch, o [T, H, chunks, R] then (max, sum) [T, H, chunks, 2].
    auto partials = [&](int64_t chunks) {
        auto* part = static_cast<float*>(scratch(kScratchB, size_t(T * H * chunks * (R + 2)) * 4));
        return std::pair<float*, float*>{part, part + T * H * chunks * R};
    };

    // (2) the tensor-core kernel (cuda_attention_tc.cu) for the real model's shape — fp8 cache, R = 512, heads in
    // 16s — unless switched off or the device gives a block less shared memory than it needs (98.2 KiB; sm_12x: 99):
    // chunks of whole 32-latent tiles, at least two per chunk, about two blocks per SM.
    const bool tc = dt == KvCacheDtype::Fp8 && R == mlatc::kMlaTcLatent && H % mlatc::kMlaTcHeads == 0 &&
                    eb % 16 == 0 && reinterpret_cast<uintptr_t>(cache.bytes()) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(qLat.f32()) % 16 == 0 && reinterpret_cast<uintptr_t>(oLat.f32()) % 16 == 0 &&
                    mlatc::tensorCores() && mlatc::smemBytes() <= size_t(props().sharedMemPerBlockOptin);
    if (tc) {
        const int64_t hg = H / mlatc::kMlaTcHeads;
        const mlaplan::ChunkPlan plan =
            mlaplan::planChunks(T, hg, w, props().multiProcessorCount, mlatc::kMlaTcTile, 2, mlatc::chunkTiles());
        const int64_t chunks = plan.chunks, chunkLen = plan.chunkLen;
        TS_CHECK(T * hg <= int64_t(0x7fffffff) && hg <= 65535, "mlaSparseAttention: too many heads");
        mlatc::MlaTcArgs a{};
        a.qLat = qLat.f32();
        a.cache = cache.bytes();
        a.eb = int64_t(eb);
        a.sel = sel;
        a.count = count;
        a.width = w;
        a.H = H;
        a.chunkLen = chunkLen;
        a.scale = scale;
        if (chunks == 1) a.oLat = oLat.f32();
        else std::tie(a.partO, a.partML) = partials(chunks);
        mlatc::launchSparseTc(a, T, chunks, width > 0, st);
        if (chunks > 1) {
            launchCombine(a.partO, a.partML, chunks, T * H, R, oLat.f32(), st);
        }
        return;
    }

    // (2) the SIMT kernel: chunks: about two blocks per SM (several fit: ~51 KB of shared memory each at R = 512), at
    // least 4 tiles per chunk to amortise the q load, at most 64 chunks (the partials' size).
    const int64_t groups = (H + kAttnHeads - 1) / kAttnHeads;
    TS_CHECK(groups <= 65535, "mlaSparseAttention: too many heads");
    const mlaplan::ChunkPlan plan = mlaplan::planChunks(T, groups, w, props().multiProcessorCount, kAttnTile, 4);
    const int64_t chunks = plan.chunks, chunkLen = plan.chunkLen;

    AttnArgs a{};
    a.qLat = qLat.f32();
    a.cache = cache.bytes();
    a.eb = int64_t(eb);
    a.fp8 = dt == KvCacheDtype::Fp8;
    a.aligned4 = (R % 4 == 0) && (eb % 4 == 0) && (reinterpret_cast<uintptr_t>(cache.bytes()) % 4 == 0);
    a.sel = sel;
    a.count = count;
    a.width = w;
    a.H = H;
    a.R = R;
    a.RP = (R + 15) / 16 * 16 + 8;  // rows of 2 heads apart land 16 banks apart
    a.nTiles = (R + 127) / 128;
    a.chunkLen = chunkLen;
    a.scale = scale;
    if (chunks == 1) a.oLat = oLat.f32();
    else std::tie(a.partO, a.partML) = partials(chunks);
    const size_t shmem = size_t((kAttnHeads + kAttnTile) * a.RP + kAttnHeads * kAttnTile + 3 * kAttnHeads +
                                kAttnTile * a.nTiles + kAttnTile) * 4;
    const dim3 grid{unsigned(T), unsigned(chunks), unsigned(groups)};
    const int64_t rpt = (R + 127) / 128;
    if (rpt <= 1) launchSparseAttn<1>(a, grid, shmem, st);
    else if (rpt <= 2) launchSparseAttn<2>(a, grid, shmem, st);
    else if (rpt <= 4) launchSparseAttn<4>(a, grid, shmem, st);
    else if (rpt <= 8) launchSparseAttn<8>(a, grid, shmem, st);
    else launchSparseAttn<16>(a, grid, shmem, st);

    // (3) merge the chunks.
    if (chunks > 1) {
        launchCombine(a.partO, a.partML, chunks, T * H, R, oLat.f32(), st);
    }
}

}  // namespace ts
