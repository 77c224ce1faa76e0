// Private to cuda_exl3.cu (included once, there): the streaming EXL3 decode unit (Plan::MG = kStream), chosen
// by planLaunch for 16-row jobs whose slice one streaming unit takes — every decode step up to ~8–12 rows
// per matrix at K = 4. Variants: the shared-memory ring (default) or the register ring (TS_EXL3_TUNE bit 16);
// one or two stages per slice (bit 64 keeps one); 8 or 16 token rows (one or two mmas per tile); 3INST/MCG
// weights as rounded fp16 values or, at K ≤ 4, as their two fp16 halves (twice the mmas, useHalves).
// Test: twinspark-cli selftest --backend cuda --filter exl3 (decode-sized linear and MoE cases; "moe glm T=1"
// takes two stages); host checks of its lane arithmetic and planner: tests/kernels/test_exl3_{lanes,plan}.cpp.
// Benchmark: twinspark-cli bench-device --what exl3 (or exl3-moe / exl3-gemv4 for short A/B runs); where a
// launch's time goes, unit by unit and phase by phase: --what exl3-trace (the TRACE instantiation below, K = 4).
#pragma once

#include "cuda/cuda_exl3_unit.cuh"

namespace ts {
namespace exl3cuda {
namespace {

// The same unit (job × slice × 128 columns) without the block-wide trellis stage: warp w streams its two
// n-tiles (contiguous in memory) k-tile by k-tile through its own ring — by default ringSteps(K) slots of
// shared memory filled by cp.async, one commit group per k-tile (streamLoopSmem: 1.5–4 KiB in flight per warp
// that cost no registers); with TS_EXL3_TUNE bit 16, 4 k-tiles of registers (streamLoop: lane t loads word t,
// and t + 32 for K > 4, of each tile with a coalesced 4-byte load that skips L1, and takes the other words of
// its bit windows from their lanes by shuffles). Nothing in the loop waits for the rest of the block. A slice
// is one stage of stageTiles(K) k-tiles, or two for jobs of ≤ 8 rows at K ≥ 3 with the shared-memory ring
// (streamSliceTiles): each stage's activations are transformed with their own row scale (one warp per row
// and stage), and the loop moves its sums to the second stage's scale at that stage's first k-tile. The
// block's shared memory is its staged activations (16 KiB for ≤ 8 tokens at K = 4) and the warps' rings, so
// registers (64) set the occupancy: 8 blocks per SM (fewer only at K ≤ 2 with more than 8 tokens, where the
// staged activations need up to 41 KB).
constexpr int kRing = 4;

template <int K>
constexpr int laneWords() { return (tileWords(K) + 31) / 32; }  // ring words per lane and tile: 1 or 2

__device__ __forceinline__ uint32_t ldStream(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.global.nc.L1::no_allocate.b32 %0, [%1];\n" : "=r"(v) : "l"(p));
    return v;
}

// Word `lane` (and lane + 32) of the tile at tp (lanes past the tile's 8K words read nothing).
template <int K>
__device__ __forceinline__ void loadTileWords(const uint32_t* tp, int lane, uint32_t (&w)[laneWords<K>()]) {
    constexpr int TW = tileWords(K);
    w[0] = (TW >= 32 || lane < TW) ? ldStream(tp + lane) : 0u;
    if constexpr (laneWords<K>() > 1) w[1] = lane + 32 < TW ? ldStream(tp + lane + 32) : 0u;
}

// Word index of activation k (0..15 within k-tile kt) of token row `row` in the streaming stage: per
// (kt, row) 8 words of fp16 pairs, ordered so that lane (g, c) reads the B fragment of token g — b0 (k 2c,
// 2c+1) and b1 (k 2c+8, 2c+9) — as one 8-byte load: word 2c + (k >= 8). R: rows per k-tile (streamRows).
__device__ __forceinline__ int xsStreamWord(int kt, int row, int k, int R) {
    const int kp = k >> 1;
    return (kt * R + row) * 8 + 2 * (kp & 3) + (kp >> 2);
}

// Step 2 for the streaming unit, one token row of one stage (one warp): xr of the stage's kts k-tiles as the
// CPU computes it (the same ops as transformRow), the stage's row scale 2^e (max |xr| → [2^14, 2^15)), fp16
// values into xs at k-tiles ktOff.. of the slice, and Σ of those fp16 values (fp32, a fixed order) into
// rowSum[row] for the MUL1 correction; rowSum and eRow are the stage's [16] arrays.
// v: the row's x ⊙ suh (rowInputs), rotated here.
template <int KS>
__device__ __forceinline__ void transformRowStream(int row, int ktOff, int kts, float (&v)[KS / 8][4], uint32_t* xs,
                                                   float* rowSum, int* eRow, int rows, int lane) {
    constexpr int HB = KS / 8;
    const int e = rotateInputs<KS>(kts, lane, v);
    const float scale = pow2(e);
    float sum = 0.0f;
#pragma unroll
    for (int hb = 0; hb < HB; ++hb) {
        if (hb * 8 < kts) {
            const int kl = ktOff * 16 + hb * 128 + 4 * lane;  // k within the slice; 4 consecutive values = 2 words
            const __half h0 = __float2half_rn(__fmul_rn(v[hb][0], scale)), h1 = __float2half_rn(__fmul_rn(v[hb][1], scale));
            const __half h2 = __float2half_rn(__fmul_rn(v[hb][2], scale)), h3 = __float2half_rn(__fmul_rn(v[hb][3], scale));
            xs[xsStreamWord(kl >> 4, row, kl & 15, rows)] = uint32_t(__half_as_ushort(h0)) | (uint32_t(__half_as_ushort(h1)) << 16);
            xs[xsStreamWord(kl >> 4, row, (kl & 15) + 2, rows)] =
                uint32_t(__half_as_ushort(h2)) | (uint32_t(__half_as_ushort(h3)) << 16);
            sum += (__half2float(h0) + __half2float(h1)) + (__half2float(h2) + __half2float(h3));
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) {
        rowSum[row] = sum;
        eRow[row] = e;
    }
}

// 3INST/MCG at K ≤ 4 take their weights as fp16 halves (codebookHalves, tileProduct); at K > 4, where the
// 3-word bit windows already fill the 64 registers, the extra operands made ptxas spill 50–76 more bytes, so
// those keep the rounded pairs of codebookPairs.
template <int K, int CB>
constexpr bool useHalves() { return CB != 2 && K <= 4; }
// On the halves route at K = 4, MCG's lanes hash their states as laneHashes4 does (the tile's operands are the
// hashes, not the states: laneOperands4). 3INST keeps the states: with its additive constant the same source
// came out of ptxas with more instructions, not fewer (IADD3s and MOVs beside the IMADs), and its 4096→12288
// GEMV went 19.6 → 20.1 µs where MCG's went 20.0 → 18.8 µs (fourteenth session, call 3).
template <int K, int CB>
constexpr bool preHashed() { return K == 4 && CB == 1; }

// One token group's activations of a k-tile as the mma's B operand: the lane's two words (token g; k 2c, 2c+1 |
// 2c+8, 2c+9), or for the halves (H) each activation twice — (a_2c, a_2c) and (a_2c+8, a_2c+8) for the first
// mma, (a_2c+1, a_2c+1) and (a_2c+9, a_2c+9) for the second — made here once per k-tile for both n-tiles.
template <bool H>
struct TileB {
    uint32_t b[H ? 4 : 2];
};
template <bool H>
__device__ __forceinline__ TileB<H> tileB(uint2 v) {
    if constexpr (!H) {
        return {{v.x, v.y}};
    } else {
        return {{__byte_perm(v.x, v.x, halvesDup(0)), __byte_perm(v.y, v.y, halvesDup(0)),
                 __byte_perm(v.x, v.x, halvesDup(1)), __byte_perm(v.y, v.y, halvesDup(1))}};
    }
}

// acc += one 16×16 tile (the lane's 8 states) times 8 tokens. The lane's values are the mma's A operand Ŵᵀ
// (rows n = g, g + 8; k = 2c, 2c+1, 2c+8, 2c+9 — the same positions as its B fragments, spec §3.1).
// One mma of the fp16 pairs codebookPairs makes (a0 = (g, 2c..) = bq[0], a1 = (g+8, 2c..) = bq[2],
// a2 = (g, 2c+8..) = bq[1], a3 = (g+8, 2c+8..) = bq[3]); or, for the halves, two mmas whose k pairs are the
// (lo, hi) halves of one weight each — the first takes the weights at k 2c and 2c+8 (states 0, 4, 2, 6), the
// second those at 2c+1 and 2c+9 (1, 5, 3, 7) — against the duplicated activations of tileB.
// st8: the lane's 8 states — or, where preHashed (MCG at K = 4), their hashes already (laneOperands4).
template <int K, int CB>
__device__ __forceinline__ void tileProduct(const uint32_t (&st8)[8], const TileB<useHalves<K, CB>()>& x,
                                            float (&acc)[4]) {
    if constexpr (!useHalves<K, CB>()) {
        uint32_t bq[4];
        codebookPairs<CB>(st8, bq);
        mma(acc, bq[0], bq[2], bq[1], bq[3], x.b[0], x.b[1]);
    } else {
        uint32_t h[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) h[j] = preHashed<K, CB>() ? maskXor3inst(st8[j]) : codebookHalves<CB>(st8[j]);
#pragma unroll
        for (int I = 0; I < 2; ++I)
            mma(acc, h[halvesState(I, 0)], h[halvesState(I, 1)], h[halvesState(I, 2)], h[halvesState(I, 3)],
                x.b[2 * I], x.b[2 * I + 1]);
    }
}

// A K = 4 lane's tile operands from its words t − 1 (w0) and t (w1): the 8 states, or for MCG their hashes
// (laneHashes4: fewer ALU instructions, the pipe that loop waited for; preHashed) — what tileProduct takes.
template <int CB>
__device__ __forceinline__ void laneOperands4(uint32_t w0, uint32_t w1, uint32_t (&st8)[8]) {
    if constexpr (preHashed<4, CB>())
        laneHashes4<CB>(w0, w1, st8);
    else
        laneStates4(w0, w1, st8);
}

// The register ring's first kRing k-tiles (TS_EXL3_TUNE bit 16); np moves on to the tile of k-tile kRing.
template <int K>
__device__ __forceinline__ void streamPrefetch(const uint32_t*& np, int64_t kStride, int nkt, int lane,
                                               uint32_t (&ring)[kRing][2][laneWords<K>()]) {
#pragma unroll
    for (int i = 0; i < kRing; ++i) {
        if (i < nkt) {
            loadTileWords<K>(np, lane, ring[i][0]);
            loadTileWords<K>(np + tileWords(K), lane, ring[i][1]);
        }
        np += kStride;
    }
}

// The streaming unit's main loop over its nkt k-tiles for tokens 0..7 of the job (TWO: also 8..15, into accB,
// for m > 8). The roles of the mma operands are swapped against the staged variant: the lane's 8 decoded
// values of a 16×16 tile are exactly an A fragment of Ŵᵀ (rows n = g, g + 8; k = 2c, 2c+1, 2c+8, 2c+9 — the
// same positions as its B fragments, spec §3.1), and the activations of 8 tokens are the B fragment, so ONE
// mma.m16n8k16 per tile computes 16 columns × 8 tokens: acc[nt][i] = column 16·nt + g + 8·(i >> 1) of the
// warp's 32, token 2c + (i & 1) (+ 8 for accB).
// ring: k-tiles [0, kRing) already loaded (streamPrefetch); np: the tile of k-tile kRing.
template <int K, int CB, bool TWO>
__device__ __forceinline__ void streamLoop(uint32_t (&ring)[kRing][2][laneWords<K>()], const uint32_t* np,
                                           int64_t kStride, int nkt, const uint2* xa, int R, int g, int c, int lane,
                                           float (&acc)[2][4], float (&accB)[2][4]) {
    constexpr int TW = tileWords(K);
    constexpr int NW = laneWords<K>();
#pragma unroll 1
    for (int base = 0; base < nkt; base += kRing) {
#pragma unroll
        for (int i = 0; i < kRing; ++i) {
            const int kt = base + i;
            if (kt >= nkt) break;  // uniform
            uint32_t w[2][NW];
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int q = 0; q < NW; ++q) w[nt][q] = ring[i][nt][q];
            if (kt + kRing < nkt) {
                loadTileWords<K>(np, lane, ring[i][0]);
                loadTileWords<K>(np + TW, lane, ring[i][1]);
            }
            np += kStride;
            constexpr bool H = useHalves<K, CB>();
            const TileB<H> a02 = tileB<H>(xa[(kt * R + g) * 4 + c]);  // token g (B column g), k 2c.. | 2c+8..
            TileB<H> a13{};
            if constexpr (TWO) a13 = tileB<H>(xa[(kt * R + g + 8) * 4 + c]);
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                uint32_t st8[8];
                if constexpr (K == 4) {  // one shuffle: word t − 1 (the lane's own word is t)
                    laneOperands4<CB>(__shfl_sync(0xffffffffu, w[nt][0], (lane + 31) & 31), w[nt][0], st8);
                } else {
                    laneStatesFrom<K>(
                        [&](uint32_t idx) {
                            if constexpr (NW == 1) {
                                return __shfl_sync(0xffffffffu, w[nt][0], int(idx));
                            } else {
                                const uint32_t v0 = __shfl_sync(0xffffffffu, w[nt][0], int(idx & 31u));
                                const uint32_t v1 = __shfl_sync(0xffffffffu, w[nt][1], int(idx & 31u));
                                return idx < 32u ? v0 : v1;
                            }
                        },
                        lane, st8);
                }
                tileProduct<K, CB>(st8, a02, acc[nt]);
                if constexpr (TWO) tileProduct<K, CB>(st8, a13, accB[nt]);
            }
        }
    }
}

// The same loop with the warp's k-tiles in flight in its shared-memory ring (the default): ringSteps(K) = D
// k-tiles in D/2 slots of two k-tiles each, filled by cp.async with one commit group per slot, so the loop
// waits, synchronizes the warp and copies once per two k-tiles. A slot is 4·8K words: k-tile kt of the pair
// (2·8K words: the warp's two n-tiles, contiguous in global memory too), then k-tile kt + 1. Its 16-byte
// pieces: for K ≤ 4 (8K ≤ 32 pieces) lane p copies piece p, of k-tile p / 4K; for K > 4 lane p (< 4K)
// copies piece p of each k-tile, with two copies. The ring's addresses are 32-bit shared-window addresses
// computed once per unit (RingLane), so a load in the loop is a register plus a constant.
__device__ __forceinline__ uint32_t smemAddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ uint32_t ldsU32(uint32_t a) {
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(a));
    return v;
}
__device__ __forceinline__ uint2 ldsU64(uint32_t a) {
    uint2 v;
    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(a));
    return v;
}
__device__ __forceinline__ void cpAsync16s(uint32_t d, const uint32_t* g) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(g) : "memory");
}

// The addresses below are ringPiece's (cuda_exl3.cuh; test_exl3_lanes checks that its pieces fill a slot
// exactly once from the right words), written as the cheaper forms checked here for every lane at compile
// time: the first piece lands at word 4·lane of the slot and comes from k-tile lane / 4K, word 4·(lane % 4K)
// (K ≤ 4) or k-tile 0, word 4·lane (K > 4); the second (K > 4) lands 16K words on, one k-tile on.
template <int K>
constexpr bool ringFormulasAreRingPiece() {
    for (int lane = 0; lane < 32; ++lane) {
        const RingPiece a = ringPiece(K, lane, 0);
        if (a.h * 16 * K + 4 * a.w != 4 * lane || a.valid != (lane < (K <= 4 ? 8 * K : 4 * K))) return false;
        if (a.h != (K <= 4 ? lane / (4 * K) : 0) || a.w != (K <= 4 ? lane % (4 * K) : lane)) return false;
        if (ringPieces(K) > 1) {
            const RingPiece b = ringPiece(K, lane, 1);
            if (b.valid != a.valid || b.h != a.h + 1 || b.w != a.w) return false;
        }
    }
    return true;
}

// One lane's part of the warp's ring.
struct RingLane {
    uint32_t ring;  // the warp's ring (shared window, bytes)
    uint32_t dst;   // ring + 16·lane: this lane's piece of a slot (K ≤ 4) or of its first k-tile (K > 4)
    bool copies;    // the lane copies (lane < 8K for K ≤ 4, < 4K for K > 4)
};
template <int K>
__device__ __forceinline__ RingLane ringLane(const uint32_t* ring, int lane) {
    static_assert(ringFormulasAreRingPiece<K>(), "the ring's addresses are ringPiece's");
    const uint32_t r = smemAddr(ring);
    return {r, r + 16u * uint32_t(lane), lane < (K <= 4 ? 8 * K : 4 * K)};
}
// This lane's source at the warp's tile np of a slot's first k-tile (its piece's k-tile and word).
template <int K>
__device__ __forceinline__ const uint32_t* ringSource(const uint32_t* np, int64_t kStride, int lane) {
    if constexpr (K <= 4) return np + (lane / (4 * K)) * kStride + 4 * (lane % (4 * K));
    return np + 4 * lane;
}

// Copies k-tiles kt, kt + 1 into the slot at byte offset slotOff; lp: ringSource at k-tile kt.
template <int K>
__device__ __forceinline__ void copyPair(const RingLane& rl, uint32_t slotOff, const uint32_t* lp, int64_t kStride) {
    if (!rl.copies) return;
    cpAsync16s(rl.dst + slotOff, lp);
    if constexpr (K > 4) cpAsync16s(rl.dst + slotOff + 2 * tileWords(K) * 4, lp + kStride);
}

// The ring's first D/2 slots (k-tiles [0, D) that exist: nkt is a multiple of 8); lp moves on to k-tile D.
template <int K>
__device__ __forceinline__ void streamPrefetchSmem(const RingLane& rl, const uint32_t*& lp, int64_t kStride, int nkt) {
    constexpr int D = ringSteps(K), PB = 2 * 2 * tileWords(K) * 4;  // PB: bytes per slot
#pragma unroll 1
    for (int q = 0; q < D / 2; ++q) {
        if (2 * q < nkt) copyPair<K>(rl, uint32_t(q * PB), lp, kStride);
        cpAsyncCommit();
        lp += 2 * kStride;
    }
}

// A streaming unit's slice is one or two stages of stageTiles(K) k-tiles (streamSliceTiles); each stage's
// activations carry their own row scale 2^e (eRow [stage][16]; an all-zero stage, kEInit, takes the other
// stage's). Its effective exponent for token row `row`:
__device__ __forceinline__ int stageExp(const int* eRow, int nst, int st, int row) {
    const int e0 = eRow[row];
    if (nst == 1) return e0;
    const int e1 = eRow[kGroupRows + row];
    const int a = e0 == kEInit ? e1 : e0;
    return st == 0 ? a : (e1 == kEInit ? a : e1);
}
// 2^d for an exponent difference of two stages, clamped to fp32's normal range (only inputs whose stages
// differ by > 2^126 in magnitude would reach the clamp).
__device__ __forceinline__ float pow2Diff(int d) { return pow2(max(-126, min(126, d))); }

// At the second stage's first k-tile, the sums so far (activations scaled by 2^e0) move to the second
// stage's scale 2^e1: exact (a power of two). acc[nt][i] holds token 2c + (i & 1), accB token 8 + 2c + (i & 1).
template <bool TWO>
__device__ __forceinline__ void rescaleToStage1(float (&acc)[2][4], float (&accB)[2][4], const int* eRow, int m, int c) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
#pragma unroll
        for (int hf = 0; hf < (TWO ? 2 : 1); ++hf) {
            const int row = 8 * hf + 2 * c + q;
            const float f = row < m ? pow2Diff(stageExp(eRow, 2, 1, row) - stageExp(eRow, 2, 0, row)) : 1.0f;
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    if (hf) accB[nt][2 * h + q] *= f;
                    else acc[nt][2 * h + q] *= f;
                }
        }
    }
}

// The loop runs in passes of kPass = 4 k-tiles (two slots), unrolled: slots and activation rows in a pass
// are the pass's base plus constants. Slices are multiples of 8 k-tiles (the planner's KSL; tilesK too), so
// every pass is whole, and passes up to nkt − D refill their slots with k-tiles base + D.. (streamPass's REFILL),
// the last D/kPass passes commit empty groups instead (the ring's drain), keeping wait_group's count.
// R (rows per k-tile of the staged activations) follows from TWO: 16 rows, else 8.
constexpr int kPass = 4;

// The 8 states of the lane in the two n-tiles of the k-tile at shared byte address t (MCG at K = 4: their
// hashes, laneOperands4).
template <int K, int CB>
__device__ __forceinline__ void ringStates(uint32_t t, int lane, uint32_t (&st8)[2][8]) {
    constexpr int TW = tileWords(K);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
        if constexpr (K == 4)
            laneOperands4<CB>(ldsU32(t + 4 * (nt * TW + ((lane + 31) & 31))), ldsU32(t + 4 * (nt * TW + lane)), st8[nt]);
        else
            laneStatesFrom<K>([&](uint32_t i) { return ldsU32(t + 4 * (uint32_t(nt * TW) + i)); }, lane, st8[nt]);
    }
}

// One k-tile's two mmas (four for TWO) from the lane's states; xa: the lane's activations of that k-tile.
template <int K, int CB, bool TWO>
__device__ __forceinline__ void tileMma(const uint32_t (&st8)[2][8], uint32_t xa, float (&acc)[2][4], float (&accB)[2][4]) {
    constexpr bool H = useHalves<K, CB>();
    const TileB<H> a02 = tileB<H>(ldsU64(xa));  // token g (B fragment column g), k 2c.. | 2c+8..
    TileB<H> a13{};
    if constexpr (TWO) a13 = tileB<H>(ldsU64(xa + 256));  // token g + 8: 8 rows of 4 uint2 on
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
        tileProduct<K, CB>(st8[nt], a02, acc[nt]);
        if constexpr (TWO) tileProduct<K, CB>(st8[nt], a13, accB[nt]);
    }
}

// One pass: k-tiles base .. base + 3 from slots slotOff, slotOff + PB; REFILL: lp is this lane's source at
// k-tile base + D (ringSource) and each slot, once read, takes the k-tiles D on.
template <int K, int CB, bool TWO, bool REFILL>
__device__ __forceinline__ void streamPass(const RingLane& rl, uint32_t slotOff, uint32_t xPass,
                                           const uint32_t*& lp, int64_t kStride, int lane, float (&acc)[2][4],
                                           float (&accB)[2][4]) {
    constexpr int TW = tileWords(K), SB = 2 * TW * 4, PB = 2 * SB, DP = ringSteps(K) / 2, R = TWO ? 16 : 8;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        const uint32_t slot = rl.ring + slotOff + j * PB;
        cpAsyncWait<DP - 1>();  // this lane's copies of the slot have landed (one group per slot)
        __syncwarp();           // ... and every lane's
        uint32_t st8[2][8];
        ringStates<K, CB>(slot, lane, st8);
        tileMma<K, CB, TWO>(st8, xPass + (2 * j) * R * 32, acc, accB);
        ringStates<K, CB>(slot + SB, lane, st8);
        __syncwarp();  // the slot is read: refill it
        if constexpr (REFILL) copyPair<K>(rl, slotOff + j * PB, lp, kStride);
        cpAsyncCommit();
        if constexpr (REFILL) lp += 2 * kStride;
        tileMma<K, CB, TWO>(st8, xPass + (2 * j + 1) * R * 32, acc, accB);
    }
}

// ktSplit: the second stage's first k-tile (a multiple of kPass; < 0: one stage), where the sums move to its
// scale (rescaleToStage1, exponents eRow, m token rows). xs: the staged activations' shared address; lp:
// this lane's source at k-tile D (ringSource; streamPrefetchSmem left it there).
template <int K, int CB, bool TWO>
__device__ __forceinline__ void streamLoopSmem(const RingLane& rl, const uint32_t* lp, int64_t kStride, int nkt,
                                               uint32_t xs, int g, int c, int lane, float (&acc)[2][4],
                                               float (&accB)[2][4], int ktSplit, const int* eRow, int m) {
    constexpr int D = ringSteps(K), PB = 2 * 2 * tileWords(K) * 4, R = TWO ? 16 : 8;
    static_assert((D & (D - 1)) == 0 && D % kPass == 0 && kPass == 4, "ring: a power of two, whole passes of two slots");
    const uint32_t xl = xs + uint32_t(g * 4 + c) * 8;  // this lane's B fragment of k-tile 0 (token g)
    int base = 0;
#pragma unroll 1
    for (; base < nkt - D; base += kPass) {
        if (base == ktSplit) rescaleToStage1<TWO>(acc, accB, eRow, m, c);
        streamPass<K, CB, TWO, true>(rl, uint32_t(((base / 2) & (D / 2 - 1)) * PB), xl + base * R * 32, lp, kStride,
                                     lane, acc, accB);
    }
#pragma unroll 1
    for (; base < nkt; base += kPass) {
        if (base == ktSplit) rescaleToStage1<TWO>(acc, accB, eRow, m, c);
        streamPass<K, CB, TWO, false>(rl, uint32_t(((base / 2) & (D / 2 - 1)) * PB), xl + base * R * 32, lp, kStride,
                                      lane, acc, accB);
    }
    cpAsyncWait<0>();  // no copy outlives the unit (the drain's groups are empty)
}

// The phase trace (Params::trace, exl3_tune.h's word layout): thread 0 stamps the unit's words with the device's
// global clock and its SM (cuda_common.cuh).
using ::ts::cuda::globalTimerNs;
using ::ts::cuda::smId;
// The unit's words are found through a pointer that thread 0 keeps in the block's shared memory (a spare
// slot next to the flag, written before the block barrier behind the input transform), so that no register
// holds it through the loop.
__device__ __forceinline__ unsigned long long*& traceSlot(int* flag) {
    return *reinterpret_cast<unsigned long long**>(flag + 2);  // flag + 2: 8-byte aligned, unused otherwise
}
template <bool TRACE>
__device__ __forceinline__ unsigned long long* traceWords(const Params& P, int* flag) {
    if constexpr (TRACE) return P.trace ? traceSlot(flag) : nullptr;
    return nullptr;
}

// TRACE: the instantiation that writes the phase trace (K = 4 only, see kernelFor): a separate kernel, so the
// production kernels' code and registers are untouched (stamps in them made ptxas spill at K = 4).
template <int K, int CB, bool TRACE = false>
__device__ __forceinline__ void runUnitStream(const Params& P, int64_t u, uint32_t* smem) {
    constexpr int KSH = stageTiles(K, kStream);  // k-tiles per stage (the input transform's unit)
    constexpr int TW = tileWords(K);
    const int KSS = streamSliceTiles(K, P.R, P.regRing != 0);  // the planner's longest slice: 1 or 2 stages
    uint32_t* xs = smem;  // [KSS][rows][8 words] fp16 activations, rows = 8 (m ≤ 8) or 16 (≤ streamRows(P.R))
    float* rowSum = reinterpret_cast<float*>(xs + KSS * streamRows(P.R) * 8);  // [2][16] Σ a per stage and row (scaled)
    int* eRow = reinterpret_cast<int*>(rowSum + 2 * kGroupRows);                 // [2][16] row scale exponents
    int* flag = eRow + 2 * kGroupRows;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (TRACE && P.trace && tid == 0) {
        unsigned long long* tw = u < P.traceUnits ? P.trace + u * kExl3TraceWords : nullptr;
        traceSlot(flag) = tw;
        if (tw) {
            tw[kTraceStart] = globalTimerNs();
            tw[kTraceClockStart] = clock64();
            tw[kTraceSm] = smId();
        }
    }
    const int g = lane >> 2, c = lane & 3;
    const UnitCoords uc = unitCoords(u, P.J, P.NB, P.S, P.jobMajor != 0);
    const int j = uc.j, b = uc.b, s = uc.s;
    // Before the PDL wait only the parameters and weights may be read: a job table (written by a copy or
    // by the routing kernel) and the live count come after it.
    if (P.jobs != nullptr || P.liveGroups != nullptr) pdlWait();
    // The job's loads go out before the live count's (a device-routed plan's; its job table has all P.J entries), so
    // that the two latencies overlap at the unit's start instead of adding up.
    const Job job = jobOf(P, j);
    if (P.liveGroups && j >= liveJobs(P)) return;
    const int m = job.m;
    const int kt0 = s * P.KSL;
    const int nkt = min(P.KSL, P.tilesK - kt0);  // ≤ KSS (the plan guarantees it)
    const int nst = nkt > KSH ? 2 : 1;          // stages of the slice (2 only for ≤ 8 rows, see streamSliceTiles)

    // Rows of the staged activations that no token fills are read as B columns: zero them (all R rows of
    // every k-tile are read by the 8- or 16-token loop).
    const int rows = m > 8 ? 16 : 8;
    for (int i = tid; i < nkt * rows * 8; i += kThreads)  // word i: row (i / 8) % rows (rows = 8 or 16)
        if (((i >> 3) & (rows - 1)) >= m) xs[i] = 0u;
    // This warp's n-tile 2w at k-tile kt0 (n-tile 2w + 1 is TW words on); the ring's first k-tiles' loads
    // go out before the wait and the transform below.
    const uint32_t* np = reinterpret_cast<const uint32_t*>(job.trellis) +
                         (int64_t(kt0) * P.tilesN + int64_t(b) * kUnitTilesN + 2 * warp) * TW;
    const int64_t kStride = int64_t(P.tilesN) * TW;
    uint32_t ring[kRing][2][laneWords<K>()];
    const RingLane rl =  // this warp's ring (D k-tiles of 2·8K words)
        ringLane<K>(reinterpret_cast<const uint32_t*>(flag + 4) + warp * ringSteps(K) * 2 * TW, lane);
    // The input transform is one task per (row, stage), task t = row·nst + stage, warp w taking w, w + 4, ...
    // The suh loads of this warp's first task go out before the trellis prefetch (behind it they would wait
    // for the whole device's first ring fills; the block's other warps wait for the transform at the
    // barrier below); its x loads follow the PDL wait. The down phase of the one-launch MoE waits for its
    // rows first (below).
    constexpr int HB = KSH / 8;
    float xin[HB][4];
    const bool early = P.waitOn == nullptr && warp < m * nst;
    if (early) {
        const int st = nst == 2 ? (warp & 1) : 0;
        rowSuh<KSH>(job, kt0 + st * KSH, min(KSH, nkt - st * KSH), lane, xin);
    }
    const uint32_t* lp = ringSource<K>(np, kStride, lane);  // the shared-memory ring's source of this lane
    if (P.regRing)
        streamPrefetch<K>(np, kStride, nkt, lane, ring);
    else
        streamPrefetchSmem<K>(rl, lp, kStride, nkt);
    float acc[2][4], accB[2][4];
#pragma unroll
    for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[a][i] = accB[a][i] = 0.0f;
    pdlWait();  // x, the partial buffer, the counters: the previous kernel's (a no-op when already waited)
    // One-launch MoE, down: wait for the activation rows.
    if (P.waitOn) blockWaitCount(P.waitOn + j, P.waitTarget);
    if (tid == 0) {
        if (unsigned long long* tw = traceWords<TRACE>(P, flag)) {
            tw[kTraceInputReady] = globalTimerNs();
            tw[kTraceMode] = unsigned(P.mode);
            tw[kTraceSlice] = unsigned(s);
            tw[kTraceTiles] = unsigned(nkt);
        }
    }
    for (int t = warp; t < m * nst; t += kWarps) {
        const int row = nst == 2 ? t >> 1 : t, st = nst == 2 ? t & 1 : 0;
        const int ktA = kt0 + st * KSH, kts = min(KSH, nkt - st * KSH);
        if (early && t == warp)
            rowTimesX<KSH>(P, job, row, ktA, kts, lane, xin);
        else
            rowInputs<KSH>(P, job, row, ktA, kts, lane, xin);
        transformRowStream<KSH>(row, st * KSH, kts, xin, xs, rowSum + st * kGroupRows, eRow + st * kGroupRows, rows,
                                lane);
    }
    __syncthreads();
    if (tid == 0)
        if (unsigned long long* tw = traceWords<TRACE>(P, flag)) tw[kTraceStaged] = globalTimerNs();
    const uint2* xa = reinterpret_cast<const uint2*>(xs);  // token r of k-tile kt: xa + (kt·rows + r)·4 + c
    const int ktSplit = nst == 2 ? KSH : -1;               // the second stage's first k-tile (a pass boundary)
    if (P.regRing) {  // (one stage: streamSliceTiles gives the register ring no second)
        if (m > 8)
            streamLoop<K, CB, true>(ring, np, kStride, nkt, xa, rows, g, c, lane, acc, accB);
        else
            streamLoop<K, CB, false>(ring, np, kStride, nkt, xa, rows, g, c, lane, acc, accB);
    } else {
        if (m > 8)
            streamLoopSmem<K, CB, true>(rl, lp, kStride, nkt, smemAddr(xs), g, c, lane, acc, accB, ktSplit, eRow, m);
        else
            streamLoopSmem<K, CB, false>(rl, lp, kStride, nkt, smemAddr(xs), g, c, lane, acc, accB, ktSplit, eRow, m);
    }
    if (lane == 0)
        if (unsigned long long* tw = traceWords<TRACE>(P, flag)) tw[kTraceLoopEnd + warp] = globalTimerNs();

    // True magnitudes: MUL1 sums are Σ a·h, the value being kinv·h + kbias; then undo the token's scale 2^e
    // (the last stage's: the loop moved the first stage's sums to it), with Σ a of both stages at that scale.
    const UnitSink sink = unitSink(P, job, b, s, smem);
    float outv[2][2][4];  // [half][nt][i]
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int row = 8 * hf + 2 * c + q;
            float f = 0.0f, corr = 0.0f;
            if (row < m) {
                const int eF = stageExp(eRow, nst, nst - 1, row);
                f = pow2(-eF);
                if (CB == 2) {
                    float rs = rowSum[row];
                    if (nst == 2) rs = fmaf(rs, pow2Diff(eF - stageExp(eRow, 2, 0, row)), rowSum[kGroupRows + row]);
                    corr = kMul1Bias * rs;
                }
            }
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const float a = hf ? accB[nt][2 * h + q] : acc[nt][2 * h + q];
                    outv[hf][nt][2 * h + q] = (CB == 2 ? fmaf(kMul1Inv, a, corr) : a) * f;
                }
        }
    __syncthreads();  // every warp is done with xs: the sink may reuse it
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int row = 8 * hf + 2 * c + q;
            if (row >= m) continue;
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) sink.put(row, 32 * warp + 16 * nt + g + 8 * h, outv[hf][nt][2 * h + q]);
        }
    finishUnit(P, job, j, b, sink, flag);
    if (tid == 0) {
        if (unsigned long long* tw = traceWords<TRACE>(P, flag)) {  // (thread 0 wrote *flag itself, when it was written)
            tw[kTraceEnd] = globalTimerNs();
            tw[kTraceClockEnd] = clock64();
            tw[kTraceLast] = sink.red ? 1u : unsigned(*flag);
        }
    }
}

}  // namespace
}  // namespace exl3cuda
}  // namespace ts
