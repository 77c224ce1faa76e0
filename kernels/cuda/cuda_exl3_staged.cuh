// Private to cuda_exl3.cu (included once, there): the staged EXL3 unit (Plan::MG = 1 or kMaxMG), which stages
// its slice's trellis in shared memory (two stages in flight for multi-stage slices), keeps activations as
// fp16 hi/lo pairs and feeds four mma per tile and m-group — prefill (64-row jobs) and 16-row jobs whose slice
// needs several stages; every decode job under TS_EXL3_TUNE bit 8. The algorithm: cuda_exl3.cu's header.
// Test: twinspark-cli selftest --backend cuda --filter exl3 (prefill-sized cases); benchmark: bench-device.
#pragma once

#include "cuda/cuda_exl3_unit.cuh"

namespace ts {
namespace exl3cuda {
namespace {

// Unit u of a launch described by P (blockIdx.x of exl3Kernel; a ticket of exl3MoeKernel), with the
// block's dynamic shared memory. Every thread of the block calls it; it returns with no copy in flight.
template <int K, int CB, int MG>
__device__ __forceinline__ void runUnitStaged(const Params& P, int64_t u, uint32_t* smem) {
    constexpr int KS = stageTiles(K, MG);
    constexpr int TW = tileWords(K);
    constexpr int STAGE_WORDS = KS * kUnitTilesN * TW;
    constexpr int CH = kUnitTilesN * TW / 4;  // 16-byte chunks in one k-tile row of the unit
    pdlWait();  // (prefill and multi-stage units: nothing to overlap worth the bookkeeping)
    const int nBufs = P.steps > 1 ? 2 : 1;
    uint32_t* stage = smem;                                       // [nBufs][KS][8 tiles][8K words]
    uint32_t* xs = smem + nBufs * STAGE_WORDS;                    // [KS][R][4][4 words]
    int* eBuf = reinterpret_cast<int*>(xs + KS * P.R * 16);       // [2][kMaxRows] row scale exponents
    int* flag = eBuf + 2 * kMaxRows;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, c = lane & 3;  // mma fragment coordinates
    // Jobs innermost (unitCoords' default order): units reading the same trellis run side by side.
    const UnitCoords uc = unitCoords(u, P.J, P.NB, P.S, false);
    const int j = uc.j, b = uc.b, s = uc.s;
    if (P.liveGroups && j >= liveJobs(P)) return;  // a planned-for pair the step's routing did not use
    const Job job = jobOf(P, j);
    const int m = job.m;

    const int kt0 = s * P.KSL;
    const int ktEnd = min(kt0 + P.KSL, P.tilesK);
    const int nSteps = (ktEnd - kt0 + KS - 1) / KS;
    const uint32_t* trellis = reinterpret_cast<const uint32_t*>(job.trellis);

    // Stage st's trellis: kts rows (k-tiles) of 8 consecutive tiles (8·32K bytes each, contiguous).
    // Rows [r0, r1) of stage st (no commit).
    auto issueRows = [&](int st, int r0, int r1) {
        const int ktA = kt0 + st * KS;
        uint32_t* dst = stage + (st % nBufs) * STAGE_WORDS;
        const uint32_t* src = trellis + (int64_t(ktA) * P.tilesN + int64_t(b) * kUnitTilesN) * TW;
        for (int i = r0 * CH + tid; i < r1 * CH; i += kThreads) {
            const int r = i / CH, q = i - r * CH;
            cpAsync16(dst + r * (CH * 4) + q * 4, src + int64_t(r) * P.tilesN * TW + q * 4);
        }
    };
    auto issue = [&](int st) {
        if (st < nSteps) issueRows(st, 0, min(KS, ktEnd - (kt0 + st * KS)));
        cpAsyncCommit();  // always one group per stage (maybe empty): keeps wait_group counting simple
    };

    // acc[mg][nt][h][i]: rows 16·mg + g (i = 0, 1) and 16·mg + g + 8 (i = 2, 3), columns
    // 32·warp + 16·nt + 8·h + 2c + (i & 1) of the unit's 128.
    float acc[MG][2][2][4];
#pragma unroll
    for (int mg = 0; mg < MG; ++mg)
#pragma unroll
        for (int a = 0; a < 2; ++a)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[mg][a][h][i] = 0.0f;
    int eAcc[MG][2];  // scale exponents of this lane's rows
#pragma unroll
    for (int mg = 0; mg < MG; ++mg) eAcc[mg][0] = eAcc[mg][1] = kEInit;

    // Single-stage units (decode: nBufs = 1) bring their stage in NCH commit groups of CHT k-tiles and
    // start on a chunk as soon as it has landed, so decoding overlaps the rest of the stage's transfer.
    constexpr int CHT = 8;
    constexpr int NCH = KS / CHT;
    static_assert(KS % CHT == 0 && NCH >= 1 && NCH <= 8, "stage must be whole 8-tile chunks");
    const bool chunked = nBufs == 1 && !P.noChunk;
    if (chunked) {
        const int kts0 = min(KS, ktEnd - kt0);
#pragma unroll
        for (int q = 0; q < NCH; ++q) {
            issueRows(0, min(q * CHT, kts0), min((q + 1) * CHT, kts0));
            cpAsyncCommit();
        }
    } else {
        issue(0);
        issue(1);
    }
    // One-launch MoE, down: the input rows are the pair's activations, written by gate/up units of this
    // launch; wait for all of them (the trellis copies issued above proceed meanwhile).
    if (P.waitOn) blockWaitCount(P.waitOn + j, P.waitTarget);
    for (int st = 0; st < nSteps; ++st) {
        const int ktA = kt0 + st * KS, kts = min(KS, ktEnd - ktA);
        int* eCur = eBuf + (st & 1) * kMaxRows;
        const int* ePrev = st ? eBuf + ((st - 1) & 1) * kMaxRows : nullptr;
        for (int row = warp; row < m; row += kWarps) transformRow<KS>(P, job, row, ktA, kts, xs, eCur, ePrev, lane);
        if (chunked) {
            cpAsyncWaitDyn(NCH - 1);  // the first chunk has landed
        } else {
            cpAsyncWait<1>();  // this stage's group has landed (the next one may still be in flight)
        }
        __syncthreads();
#pragma unroll
        for (int mg = 0; mg < MG; ++mg)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
                const int row = 16 * mg + 8 * hi + g;
                if (row < m && eCur[row] != eAcc[mg][hi]) {  // the row's scale went down: rescale (exact)
                    const float f = pow2(eCur[row] - eAcc[mg][hi]);
#pragma unroll
                    for (int a = 0; a < 2; ++a)
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            acc[mg][a][h][2 * hi] *= f;
                            acc[mg][a][h][2 * hi + 1] *= f;
                        }
                    eAcc[mg][hi] = eCur[row];
                }
            }
        const uint32_t* sbuf = stage + (st % nBufs) * STAGE_WORDS;
        const uint4* xs4 = reinterpret_cast<const uint4*>(xs);
        const int nq = chunked ? NCH : 1;
        for (int q = 0; q < nq; ++q) {
            if (q > 0) {  // chunked only: wait for chunk q (uniform across the block)
                cpAsyncWaitDyn(NCH - 1 - q);
                __syncthreads();
            }
            const int kb = chunked ? min(q * CHT, kts) : 0, ke = chunked ? min((q + 1) * CHT, kts) : kts;
            // Running pointers (k-tile kt): the warp's first tile, and (MG = 1) this lane's A words of row g.
            const uint32_t* tcur = sbuf + (kb * kUnitTilesN + 2 * warp) * TW;
            const uint4* acur = xs4 + (kb * P.R + g) * 4 + c;
            const int astep = P.R * 4;
#pragma unroll 1
        for (int kt = kb; kt < ke; ++kt, tcur += kUnitTilesN * TW, acur += astep) {
            // MG = 1: the k-tile's A fragments once for both n-tiles (rows ≥ m read as zero; row g + 8 is
            // 8·4 uint4 further).
            uint4 a0k = make_uint4(0, 0, 0, 0), a1k = make_uint4(0, 0, 0, 0);
            if constexpr (MG == 1) {
                if (g < m) a0k = acur[0];
                if (g + 8 < m) a1k = acur[32];
            }
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {
                uint32_t st8[8], bq[8];
                laneStates<K>(tcur + nt * TW, lane, st8);
#pragma unroll
                for (int q = 0; q < 8; ++q) bq[q] = codebookDup<CB>(st8[q]);
                if constexpr (MG == 1) {
                    const uint4 a0 = a0k, a1 = a1k;
                    mma(acc[0][nt][0], a0.x, a1.x, a0.y, a1.y, bq[0], bq[2]);
                    mma(acc[0][nt][0], a0.z, a1.z, a0.w, a1.w, bq[1], bq[3]);
                    mma(acc[0][nt][1], a0.x, a1.x, a0.y, a1.y, bq[4], bq[6]);
                    mma(acc[0][nt][1], a0.z, a1.z, a0.w, a1.w, bq[5], bq[7]);
                } else {
#pragma unroll
                for (int mg = 0; mg < MG; ++mg) {
                    if (16 * mg >= m) break;  // uniform: rows of this group are all padding
                    uint4 a0 = make_uint4(0, 0, 0, 0), a1 = make_uint4(0, 0, 0, 0);
                    if (16 * mg + g < m) a0 = xs4[(kt * P.R + 16 * mg + g) * 4 + c];
                    if (16 * mg + g + 8 < m) a1 = xs4[(kt * P.R + 16 * mg + g + 8) * 4 + c];
                    // Lane (g, c)'s positions j: row 2c + (j&1) + 8·((j>>1)&1), column g + 8·(j>>2).
                    mma(acc[mg][nt][0], a0.x, a1.x, a0.y, a1.y, bq[0], bq[2]);  // rows 2c, 2c+8; columns 0..7
                    mma(acc[mg][nt][0], a0.z, a1.z, a0.w, a1.w, bq[1], bq[3]);  // rows 2c+1, 2c+9
                    mma(acc[mg][nt][1], a0.x, a1.x, a0.y, a1.y, bq[4], bq[6]);  // columns 8..15
                    mma(acc[mg][nt][1], a0.z, a1.z, a0.w, a1.w, bq[5], bq[7]);
                }
                }  // MG > 1
            }
        }
        }  // chunks
        __syncthreads();  // everyone is done with this stage's buffers
        issue(st + 2);
    }
    cpAsyncWait<0>();
    const UnitSink sink = unitSink(P, job, b, s, smem);
#pragma unroll
    for (int mg = 0; mg < MG; ++mg)
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
            const int row = 16 * mg + 8 * hi + g;
            if (row >= m) continue;
            const float f = pow2(-eAcc[mg][hi]);  // back to the true magnitude
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int col = 32 * warp + 16 * nt + 8 * h + 2 * c;
                    sink.put2(row, col, acc[mg][nt][h][2 * hi] * f, acc[mg][nt][h][2 * hi + 1] * f);
                }
        }
    finishUnit(P, job, j, b, sink, flag);
}

}  // namespace
}  // namespace exl3cuda
}  // namespace ts
