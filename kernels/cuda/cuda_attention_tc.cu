// Sparse MLA on the tensor cores: the main pass of CudaBackend::mlaSparseAttention (cuda_attention.cu) for an
// fp8_ds_mla cache at GLM-5.3-Flash's latent width (R = 512) and a multiple of 16 heads — every decode and
// prefill call of the real model, 64 heads (32 per rank at TP = 2). The SIMT kernel in cuda_attention.cu
// keeps every other shape (fp32 cache, other widths) and is the A/B baseline (mlaSetTensorCores(0),
// TS_MLA_TC=0).
//
// What one block computes: query t, one chunk of its selected latents (tiles of 32), 16 heads (one
// mma.m16n8k16 M). Per tile:
//   1. its 32 latents' 512 e4m3 codes → fp16 in shared memory (exact: every e4m3 value is an fp16), and their
//      4 per-128 scales; the next tile's entries land by cp.async while this one is computed;
//   2. scores: warp w takes dims [64w, 64w + 64) (one half of scale group w/2) for all 16 heads × 32
//      latents, q as the A operand in two fp16 parts (hi + lo of q·2^e, e per head and warp so that the
//      largest |q·2^e| lies in [2^14, 2^15): ~22 significant bits, as the EXL3 staged unit keeps its
//      activations), the codes as B (ldmatrix); each partial is multiplied by its latents' scale and 2^-e and
//      the 8 warps' partials are added in warp order;
//   3. online softmax in fp32 (as the SIMT kernel): running max and sum per head, p = exp(s − max);
//   4. values: warp w accumulates o[16 heads, its 64 dims] += P″ · codes with P″ = p · scale · 2^F as hi +
//      lo fp16 (F per head and tile, largest |P″| in [2^14, 2^15)); the accumulators move to the new F and the
//      new max together (corr · 2^(F_new − F_old), exact in its power of two).
// The codes enter both products exactly; q and P″ carry ~22 bits; accumulation is the tensor core's fp32.
// Against the CPU's fp32 the results differ by summation order only at the ~1e-6 level — inside the
// self-test's bound for this op (1e-5 absolute + 1e-4 relative), which the fp16 rounding of q or p alone
// (2^-11) would not be.
// Several chunks per query write (max, sum, o) partials that cuda_attention.cu's combine kernel merges. The
// kernel is launched with programmatic dependent launch after the slot selection: q's fragments are made before
// it waits for that kernel. What bounds it (docs/PERFORMANCE.md, benchmark 2): a tile's chain of phases and
// barriers, ~3 µs per tile with one block on an SM — so the planner spreads a query over ~2 blocks per SM.
//
// Test: twinspark-cli selftest --backend cuda --filter attention ("mlaSparseAttention … fp8" rows at R = 512:
// this kernel, and the "simt" rows: the other one, against the same CPU reference).
// Benchmark: twinspark-cli bench-device --backend cuda --what mla (decode over a 128k context, both kernels).
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>

#include "core/env_switch.h"
#include "cuda/cuda_attention_common.cuh"

namespace ts {
namespace mlatc {

static OverridableSwitch g_tensorCores("TS_MLA_TC", true);
int setTensorCores(int on) { return g_tensorCores.set(on); }
bool tensorCores() { return g_tensorCores.on(); }

std::atomic<int> g_chunkTiles{0};
int setChunkTiles(int tiles) { return g_chunkTiles.exchange(tiles > 0 ? tiles : 0); }
int chunkTiles() { return g_chunkTiles.load(std::memory_order_relaxed); }

namespace {

using ::ts::cuda::imin64;
using ::ts::cuda::pdlTrigger;
using ::ts::cuda::pdlWait;

constexpr int kR = kMlaTcLatent;     // latent width
constexpr int kHeads = kMlaTcHeads;  // heads per block
constexpr int kTileL = kMlaTcTile;   // latents per tile
constexpr int kWarps = 8;            // warp w: dims [64w, 64w + 64) of both products; scale group w / 2
constexpr int kThreads = 32 * kWarps;
constexpr int kCStride = kR + 8;      // halves per latent row of the code tile (+16 B: ldmatrix rows on distinct banks)
static_assert(kR == 64 * kWarps && kR % 128 == 0 && kTileL == 32 && kHeads == 16, "the warp layout below");

// Shared memory, bytes: codes [32][kCStride] fp16 | scales [4][32] | partial scores [8][16][32] (p of the
// softmax overwrites warp 0's rows in place: each p is written by the thread that summed that element) |
// corr [16] | final (max, sum) [2][16] | the next tile's raw entries [32][kRawStride] (e4m3 codes) and scales
// [4][32], landing by cp.async while this tile is computed | q's A fragments, made once and read back at every
// tile (held in registers through the values' product they made ptxas spill).
// 98.2 KiB: under the 99 KiB a block of a GB10 (sm_12x) may opt into. Rows of 32 floats, element l of head row h
// at column (l + 8·(h mod 4)) mod 32: the banks a padded 40-float row would give, without the padding.
constexpr int kSmemCodes = kTileL * kCStride * 2;
constexpr int kSmemScales = (kR / 128) * kTileL * 4;
constexpr int kSmemPart = kWarps * kHeads * kTileL * 4;
constexpr int kRawStride = kR + 16;  // bytes per latent row of the raw entries (rows 4 banks apart)
constexpr int kSmemRaw = kTileL * kRawStride;
constexpr int kSmemQ = kWarps * 4 * 2 * 32 * 16;  // q's A fragments [warp][k-step][hi/lo][lane] (16 B each)
constexpr int kSmemBytes = kSmemCodes + kSmemScales + kSmemPart + 3 * kHeads * 4 + kSmemRaw + kSmemScales + kSmemQ;
static_assert(kSmemBytes <= 99 * 1024, "a GB10 block opts into at most 99 KiB of shared memory");
// Column of latent l in head row h of the partial scores and p (h: the head within the block).
__device__ __forceinline__ int partCol(int h, int l) { return (l + 8 * (h & 3)) & (kTileL - 1); }

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// Four 8×8 b16 matrices; lane l gives the row address of matrix l / 8, row l % 8 (TRANS: transposed).
template <bool TRANS>
__device__ __forceinline__ void ldsm4(uint32_t addr, uint32_t (&r)[4]) {
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
}
// Four e4m3 codes (bytes 0..3 of w) → two fp16 pairs (codes 0, 1 | 2, 3; the lower code in the lower half). Exact.
__device__ __forceinline__ uint2 e4m3x4ToHalf(uint32_t w) {
    uint2 r;
    asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %2;\ncvt.rn.f16x2.e4m3x2 %0, lo;\ncvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
        : "=r"(r.x), "=r"(r.y)
        : "r"(w));
    return r;
}
__device__ __forceinline__ uint32_t smemAddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
// cp.async of 16 (4) bytes, or zeros when !live (src-size 0: nothing is read).
__device__ __forceinline__ void cpAsync16(uint32_t dst, const void* src, bool live) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(live ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cpAsync4(uint32_t dst, const void* src, bool live) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(live ? 4 : 0) : "memory");
}

// 2^e for e in [−126, 127] (exact; the callers clamp).
__device__ __forceinline__ float pow2i(int e) { return __int_as_float((127 + e) << 23); }
// The exponent F with m·2^F in [2^14, 2^15) for m > 0 finite (clamped to ±100); `keep` otherwise.
__device__ __forceinline__ int scaleExp(float m, int keep) {
    if (!(m > 0.0f) || !isfinite(m)) return keep;
    int p = 0;
    frexpf(m, &p);  // m = f·2^p, f in [0.5, 1)
    return max(-100, min(100, 15 - p));
}
// x (already scaled) as hi + lo fp16: hi = fp16(x), lo = fp16(x − hi).
__device__ __forceinline__ void splitHalf(float x, __half& hi, __half& lo) {
    hi = __float2half_rn(x);
    lo = __float2half_rn(__fsub_rn(x, __half2float(hi)));
}
__device__ __forceinline__ uint32_t pack2(__half lo, __half hi) {
    return uint32_t(__half_as_ushort(lo)) | (uint32_t(__half_as_ushort(hi)) << 16);
}
// Two adjacent A-fragment values v·s as the fragment's hi and lo registers (v.x in the lower halves).
__device__ __forceinline__ void splitPair(float2 v, float s, uint32_t& hi, uint32_t& lo) {
    __half h0, l0, h1, l1;
    splitHalf(__fmul_rn(v.x, s), h0, l0);
    splitHalf(__fmul_rn(v.y, s), h1, l1);
    hi = pack2(h0, h1);
    lo = pack2(l0, l1);
}
// The max of m over the 4 lanes of a quad (the lanes that hold one A-fragment row).
__device__ __forceinline__ float quadMax(float m) {
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    return fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
}

// Blocks per SM the registers are budgeted for: two on the H200 (2 × 98.2 KiB of its 227 KiB), one on a GB10,
// whose 99 KiB hold one block (there the 128-register cap of two would only add spills).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
constexpr int kMinBlocks = 1;
#else
constexpr int kMinBlocks = 2;
#endif

// grid (T, chunks, H / 16), block 256, kSmemBytes of dynamic shared memory.
__global__ void __launch_bounds__(kThreads, kMinBlocks) mlaSparseTcKernel(MlaTcArgs a) {
    extern __shared__ __align__(16) unsigned char smem[];
    __half* codes = reinterpret_cast<__half*>(smem);
    float* scales = reinterpret_cast<float*>(smem + kSmemCodes);    // [group][latent]
    float* part = scales + (kR / 128) * kTileL;                     // [warp][head][32], columns by partCol
    float* pS = part;                                               // p [head][32]: warp 0's rows, after the sum
    float* corrS = part + kWarps * kHeads * kTileL;                 // [16]
    float* mlS = corrS + kHeads;                                    // [2][16]
    unsigned char* raw = reinterpret_cast<unsigned char*>(mlS + 2 * kHeads);  // [32][kRawStride]
    float* rawScale = reinterpret_cast<float*>(raw + kSmemRaw);               // [4][32]
    uint4* qfrag = reinterpret_cast<uint4*>(rawScale + (kR / 128) * kTileL);   // [warp][ks][hi/lo][lane]

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, c = lane & 3;
    const int grp = warp >> 1;  // this warp's scale group (dims [128·grp, 128·grp + 128))
    const int64_t t = blockIdx.x, chunk = blockIdx.y, h0 = int64_t(blockIdx.z) * kHeads;
    const int nChunks = gridDim.y;
    pdlTrigger();  // the chunk merge may launch: it waits for this kernel's end before reading anything

    // q of heads g, g + 8 (rows of the A fragment) over this warp's 64 dims as hi/lo fp16 A fragments:
    // qa[ks][part][r] for k-step ks (dims 64w + 16ks ..), part 0 = hi, 1 = lo; r = a0..a3 (spec: a0 (g, 2c..),
    // a1 (g + 8, 2c..), a2 (g, 2c + 8..), a3 (g + 8, 2c + 8..)).
    float qUnscale[2];  // 2^-e of heads g, g + 8
    {
        uint32_t qa[4][2][4];
        float2 v[2][4][2];  // [row][ks][half of the k-step]
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float* qrow = a.qLat + (t * a.H + h0 + g + 8 * r) * kR + 64 * warp + 2 * c;
#pragma unroll
            for (int ks = 0; ks < 4; ++ks) {
                v[r][ks][0] = *reinterpret_cast<const float2*>(qrow + 16 * ks);
                v[r][ks][1] = *reinterpret_cast<const float2*>(qrow + 16 * ks + 8);
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = 0.0f;
#pragma unroll
            for (int ks = 0; ks < 4; ++ks)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) mx = fmaxf(mx, fmaxf(fabsf(v[r][ks][hf].x), fabsf(v[r][ks][hf].y)));
            mx = quadMax(mx);
            const int e = scaleExp(mx, 0);
            const float s = pow2i(e);
            qUnscale[r] = pow2i(-e);
#pragma unroll
            for (int ks = 0; ks < 4; ++ks)
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) splitPair(v[r][ks][hf], s, qa[ks][0][r + 2 * hf], qa[ks][1][r + 2 * hf]);
        }
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
#pragma unroll
            for (int part = 0; part < 2; ++part)
                qfrag[((warp * 4 + ks) * 2 + part) * 32 + lane] =
                    make_uint4(qa[ks][part][0], qa[ks][part][1], qa[ks][part][2], qa[ks][part][3]);
    }

    // q is in (it comes from kernels before the slot selection); the selection's sel and count are read after
    // the PDL wait (a no-op when launched plainly).
    pdlWait();
    const int64_t n = __ldcg(a.count + t);
    const int64_t cBeg = chunk * a.chunkLen, cEnd = imin64(n, cBeg + a.chunkLen);
    const int32_t* selRow = a.sel + t * a.width;
    // The tile's raw entries come by cp.async into `raw` (zero-filled past the set: no stale codes, scale 0,
    // so p = 0 there): lane l of warp p copies bytes [64p, 64p + 64) of latent l and (p < 4) its scale p.
    // `slot`: latent l's cache slot, loaded one tile ahead (slotOf), so the copies go out without waiting for
    // it (measured: no change in the time per tile, ~3 µs alone on an SM — the copies were not what a tile
    // waited for; docs/PERFORMANCE.md, benchmark 2).
    auto slotOf = [&](int64_t base) { return base + lane < cEnd ? __ldcg(selRow + base + lane) : -1; };
    auto loadTile = [&](int32_t slot) {
        const bool live = slot >= 0;
        const uint8_t* e = live ? a.cache + int64_t(slot) * a.eb : a.cache;
        const uint32_t dst = smemAddr(raw + lane * kRawStride + 64 * warp);
#pragma unroll
        for (int k = 0; k < 4; ++k) cpAsync16(dst + 16 * k, e + 64 * warp + 16 * k, live);
        if (warp < kR / 128) cpAsync4(smemAddr(rawScale + warp * kTileL + lane), e + kR + 4 * warp, live);
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    // Slots of tiles 0 and 1 (in flight together); tile 0's copies go out once its slot is in, tile 1's at
    // tile 0, and so on.
    const int32_t slot0 = slotOf(cBeg);
    int32_t slotNext = slotOf(cBeg + kTileL);
    if (cBeg < cEnd) loadTile(slot0);

    float o[8][4];  // o[j]: heads g, g + 8 × dims 64w + 8j + 2c, +1 (C fragment), in units of 2^F
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) o[j][i] = 0.0f;
    int F[2] = {0, 0};
    float runMax = -INFINITY, runSum = 0.0f;  // softmax state of head tid / 16 (the same in its 16 threads)

    const uint32_t codesA = smemAddr(codes);
    for (int64_t base = cBeg; base < cEnd; base += kTileL) {
        const int nt = int(imin64(kTileL, cEnd - base));
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        __syncthreads();  // the tile's entries have landed; the previous tile's codes and p are consumed
        {
            const uint4* src = reinterpret_cast<const uint4*>(raw + lane * kRawStride + 64 * warp);
            __half* row = codes + lane * kCStride + 64 * warp;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const uint4 w = src[k];
                const uint2 x0 = e4m3x4ToHalf(w.x), x1 = e4m3x4ToHalf(w.y);
                const uint2 x2 = e4m3x4ToHalf(w.z), x3 = e4m3x4ToHalf(w.w);
                reinterpret_cast<uint4*>(row + 16 * k)[0] = make_uint4(x0.x, x0.y, x1.x, x1.y);
                reinterpret_cast<uint4*>(row + 16 * k)[1] = make_uint4(x2.x, x2.y, x3.x, x3.y);
            }
            if (warp < kR / 128) scales[warp * kTileL + lane] = rawScale[warp * kTileL + lane];
        }
        __syncthreads();  // codes and scales are in; `raw` is free
        if (base + kTileL < cEnd) {  // in flight during this tile; the slots of the tile after it are loaded
            loadTile(slotNext);
            slotNext = slotOf(base + 2 * kTileL);
        }

        // 2. Partial scores of this warp's 64 dims: 4 n-tiles of 8 latents.
        uint32_t qa[4][2][4];
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
#pragma unroll
            for (int part = 0; part < 2; ++part) {
                const uint4 v = qfrag[((warp * 4 + ks) * 2 + part) * 32 + lane];
                qa[ks][part][0] = v.x;
                qa[ks][part][1] = v.y;
                qa[ks][part][2] = v.z;
                qa[ks][part][3] = v.w;
            }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int kp = 0; kp < 2; ++kp) {
                uint32_t b[4];  // b0, b1 of k-step 2kp, then of 2kp + 1
                ldsm4<false>(codesA + uint32_t(((8 * j + (lane & 7)) * kCStride + 64 * warp + 32 * kp + 8 * (lane >> 3)) * 2), b);
#pragma unroll
                for (int q = 0; q < 2; ++q) {
                    const int ks = 2 * kp + q;
                    mma16816(acc, qa[ks][0][0], qa[ks][0][1], qa[ks][0][2], qa[ks][0][3], b[2 * q], b[2 * q + 1]);
                    mma16816(acc, qa[ks][1][0], qa[ks][1][1], qa[ks][1][2], qa[ks][1][3], b[2 * q], b[2 * q + 1]);
                }
            }
            const int l = 8 * j + 2 * c;
            const float s0 = scales[grp * kTileL + l], s1 = scales[grp * kTileL + l + 1];
            // Heads g and g + 8 share partCol's rotation (8 ≡ 0 mod 4); l and l + 1 stay adjacent (l is even).
            float* p0 = part + (warp * kHeads + g) * kTileL + partCol(g, l);
            *reinterpret_cast<float2*>(p0) = make_float2(acc[0] * s0 * qUnscale[0], acc[1] * s1 * qUnscale[0]);
            *reinterpret_cast<float2*>(p0 + 8 * kTileL) = make_float2(acc[2] * s0 * qUnscale[1], acc[3] * s1 * qUnscale[1]);
        }
        __syncthreads();

        // 3. Online softmax: head h = tid / 16, latents li and li + 16.
        {
            const int h = tid >> 4, li = tid & 15;
            float s[2];
#pragma unroll
            for (int q = 0; q < 2; ++q) {
                const int l = li + 16 * q;
                float acc = 0.0f;
#pragma unroll
                for (int w = 0; w < kWarps; ++w) acc += part[(w * kHeads + h) * kTileL + partCol(h, l)];
                s[q] = l < nt ? a.scale * acc : -INFINITY;
            }
            float mx = fmaxf(s[0], s[1]);
#pragma unroll
            for (int off = 8; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float mNew = fmaxf(runMax, mx);  // finite: the tile has ≥ 1 latent
            const float p0 = li < nt ? expf(s[0] - mNew) : 0.0f;
            const float p1 = li + 16 < nt ? expf(s[1] - mNew) : 0.0f;
            float sum = p0 + p1;
#pragma unroll
            for (int off = 8; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            const float cr = expf(runMax - mNew);  // 0 on the first tile (runMax = −inf)
            runSum = runSum * cr + sum;
            runMax = mNew;
            // Over warp 0's partials of (h, li) and (h, li + 16), which only this thread read.
            pS[h * kTileL + partCol(h, li)] = p0;
            pS[h * kTileL + partCol(h, li + 16)] = p1;
            if (li == 0) corrS[h] = cr;
        }
        __syncthreads();

        // 4. Values: P″ = p · scale(latent, grp) · 2^F of heads g, g + 8 at latents 16ks + {2c, 2c+1, 2c+8, 2c+9}.
        {
            // p · scale of row r (head g + 8r), k-step ks, latents 16ks + 2c + 8hf + {0, 1}: read twice (for the
            // row's largest value, then for the split) rather than held, which made ptxas spill.
            auto prod = [&](int r, int ks, int hf) {
                const int l = 16 * ks + 2 * c + 8 * hf;
                const float2 pp = *reinterpret_cast<const float2*>(pS + (g + 8 * r) * kTileL + partCol(g, l));
                const float2 sc = *reinterpret_cast<const float2*>(scales + grp * kTileL + l);
                return make_float2(__fmul_rn(pp.x, sc.x), __fmul_rn(pp.y, sc.y));
            };
            uint32_t pa[2][2][4];  // [ks][hi/lo][a0..a3]
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = 0.0f;
#pragma unroll
                for (int ks = 0; ks < 2; ++ks)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const float2 v = prod(r, ks, hf);
                        mx = fmaxf(mx, fmaxf(v.x, v.y));
                    }
                mx = quadMax(mx);
                const int fNew = scaleExp(mx, F[r]);
                const float f = corrS[g + 8 * r] * pow2i(max(-126, min(126, fNew - F[r])));
                F[r] = fNew;
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    o[j][2 * r] *= f;
                    o[j][2 * r + 1] *= f;
                }
                const float s = pow2i(fNew);
#pragma unroll
                for (int ks = 0; ks < 2; ++ks)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) splitPair(prod(r, ks, hf), s, pa[ks][0][r + 2 * hf], pa[ks][1][r + 2 * hf]);
            }
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                uint32_t b[4];  // latents 0–7, 8–15 (k-step 0), 16–23, 24–31 (k-step 1) × dims 64w + 8j ..
                ldsm4<true>(codesA + uint32_t((lane * kCStride + 64 * warp + 8 * j) * 2), b);
#pragma unroll
                for (int ks = 0; ks < 2; ++ks) {
                    mma16816(o[j], pa[ks][0][0], pa[ks][0][1], pa[ks][0][2], pa[ks][0][3], b[2 * ks], b[2 * ks + 1]);
                    mma16816(o[j], pa[ks][1][0], pa[ks][1][1], pa[ks][1][2], pa[ks][1][3], b[2 * ks], b[2 * ks + 1]);
                }
            }
        }
    }

    // The chunk's result: normalised (one chunk) or the partial triple.
    if ((tid & 15) == 0) {
        mlS[tid >> 4] = runMax;
        mlS[kHeads + (tid >> 4)] = runSum;
    }
    __syncthreads();
    if (nChunks > 1 && tid < kHeads) {
        float* ml = a.partML + (((t * a.H + h0 + tid) * nChunks) + chunk) * 2;
        ml[0] = mlS[tid];
        ml[1] = mlS[kHeads + tid];
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int64_t h = h0 + g + 8 * r;
        const float sum = mlS[kHeads + g + 8 * r];
        const float un = pow2i(-F[r]);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int d = 64 * warp + 8 * j + 2 * c;
            const float v0 = o[j][2 * r] * un, v1 = o[j][2 * r + 1] * un;
            if (nChunks == 1) {
                *reinterpret_cast<float2*>(a.oLat + (t * a.H + h) * kR + d) =
                    sum > 0.0f ? make_float2(v0 / sum, v1 / sum) : make_float2(0.0f, 0.0f);
            } else if (sum > 0.0f) {
                *reinterpret_cast<float2*>(a.partO + ((t * a.H + h) * nChunks + chunk) * kR + d) = make_float2(v0, v1);
            }
        }
    }
}

}  // namespace

size_t smemBytes() { return size_t(kSmemBytes); }
bool fitsDevice() {
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return ::ts::cuda::limitedBlockSmemOptin(size_t(optin)) >= smemBytes();  // (TS_CUDA_SM_LIMITS: a GB10's 99 KiB)
}

void launchSparseTc(const MlaTcArgs& a, int64_t T, int64_t chunks, bool pdl, cudaStream_t stream) {
    static const bool attr = [] {
        TS_CUDA_CHECK(cudaFuncSetAttribute(mlaSparseTcKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
        return true;
    }();
    (void)attr;
    const dim3 grid{unsigned(T), unsigned(chunks), unsigned(a.H / kHeads)};
    ::ts::cuda::launchPdl(mlaSparseTcKernel, grid, dim3(kThreads), size_t(kSmemBytes), stream, pdl, a);
}

}  // namespace mlatc
}  // namespace ts
