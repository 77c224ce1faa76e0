// The CUDA backend's A/B overrides on the host, no GPU needed. The KDA prefill's chunking threshold:
// bench-device --what kda compares the recurrent kernel with the chunked form in one process; the threshold's
// environment variable (TS_KDA_CHUNK) is read once, so the comparison goes through kdaSetChunkMinTokens
// (kernels/exl3_tune.h) — which must take effect at once, report the previous override and restore. And
// TS_EXL3_KSL (set here before anything reads it): decode plans take that slice length, capped at what one
// unit takes, and the bench's decode-unit line says so. The mHC pre op's one-launch / two-launch switch:
// TS_MHC_FUSED=0 (set here) picks two launches, mhcSetFusedPre overrides it at once and restores; where its
// Sinkhorn runs: TS_MHC_SIDE=2 (set here) is read, mhcSetSideSinkhorn overrides it and restores. The dense
// one-token GEMV's mode: TS_GEMV1=2 (set here) is read, gemvSetOneTokenMode overrides it and restores; the GEMM's
// (TS_GEMM=7, set here, is out of range: the default stays). The
// sparse MLA's kernel: TS_MLA_TC=0 (set here) picks SIMT, mlaSetTensorCores overrides it and restores; the
// tensor-core kernel's forced chunk length (mlaSetChunkTiles) is set and cleared. The indexer select's fast
// path: TS_IDX_FAST=0 (set here) picks the general kernels, indexerSetFastSelect overrides it and restores; and
// which calls the fast kernels may take (cuda_indexer.cuh: the shape and shared-memory rules).
#include <QtTest>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cuda/cuda_exl3.cuh"
#include "cuda/cuda_indexer.cuh"
#include "exl3_tune.h"

using namespace ts;

class TestCudaSwitches : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        ::setenv("TS_EXL3_KSL", "40", 1);
        ::setenv("TS_MHC_FUSED", "0", 1);
        ::setenv("TS_MHC_SIDE", "2", 1);
        ::setenv("TS_GEMV1", "2", 1);
        ::setenv("TS_MLA_TC", "0", 1);
        ::setenv("TS_IDX_FAST", "0", 1);
        ::setenv("TS_GEMM", "7", 1);  // out of range: reported, the default used
    }

    void forcedSliceLength() {
        using namespace exl3cuda;
        // The 4096→12288 GEMV at batch 1, K = 4 MUL1: a streaming decode plan, 256 k-tiles.
        const Plan p = planLaunch(4, 2, 1, 256, 96, 1, 1, 1, false, 132);
        QCOMPARE(p.MG, kStream);
        QCOMPARE(p.KSL, 40);
        QCOMPARE(p.S, 7);  // ⌈256 / 40⌉
        QCOMPARE(p.blocks, int64_t(96 * 7));
        QVERIFY2(std::string(exl3DecodeUnit()).find("slices of 40 k-tiles") != std::string::npos, exl3DecodeUnit());
        // 12 rows: one stage per slice (streamSliceTiles: 32 k-tiles), so 40 is capped at 32.
        const Plan q = planLaunch(4, 2, 1, 256, 96, 1, 12, 12, false, 132);
        QCOMPARE(q.MG, kStream);
        QCOMPARE(streamSliceTiles(4, q.R, false), 32);
        QCOMPARE(q.KSL, 32);
        QCOMPARE(q.S, 8);
    }

    void kdaChunkThresholdOverride() {
        const int64_t base = kdaChunkMinTokens();  // the environment's (16 unless TS_KDA_CHUNK is set)
        QCOMPARE(kdaSetChunkMinTokens(0), int64_t(-1));  // no override before
        QCOMPARE(kdaChunkMinTokens(), int64_t(0));        // never chunked
        QCOMPARE(kdaSetChunkMinTokens(1), int64_t(0));
        QCOMPARE(kdaChunkMinTokens(), int64_t(1));  // chunked for any T
        QCOMPARE(kdaSetChunkMinTokens(64), int64_t(1));
        QCOMPARE(kdaChunkMinTokens(), int64_t(64));
        QCOMPARE(kdaSetChunkMinTokens(-1), int64_t(64));  // back to the environment's
        QCOMPARE(kdaChunkMinTokens(), base);
        QCOMPARE(kdaSetChunkMinTokens(-5), int64_t(-1));  // any negative: none
    }

    void mhcFusedPreOverride() { checkSwitchOffInEnvironment(mhcSetFusedPre, mhcFusedPre); }  // TS_MHC_FUSED=0: two launches

    void mhcSideSinkhornOverride() {  // TS_MHC_SIDE=2: the Sinkhorn aside on every call
        QCOMPARE(mhcSideSinkhorn(), 2);
        QCOMPARE(mhcSetSideSinkhorn(0), -1);  // no override before
        QCOMPARE(mhcSideSinkhorn(), 0);
        QCOMPARE(mhcSetSideSinkhorn(1), 0);
        QCOMPARE(mhcSideSinkhorn(), 1);
        QCOMPARE(mhcSetSideSinkhorn(3), 1);  // out of range: clears the override
        QCOMPARE(mhcSideSinkhorn(), 2);
        QCOMPARE(mhcSetSideSinkhorn(-1), -1);
    }

    void gemvOneTokenModeOverride() {
        QCOMPARE(gemvOneTokenMode(), 2);          // the environment's: TS_GEMV1=2
        QCOMPARE(gemvSetOneTokenMode(0), -1);     // no override before
        QCOMPARE(gemvOneTokenMode(), 0);
        QCOMPARE(gemvSetOneTokenMode(1), 0);
        QCOMPARE(gemvOneTokenMode(), 1);
        QCOMPARE(gemvSetOneTokenMode(-1), 1);     // back to the environment's
        QCOMPARE(gemvOneTokenMode(), 2);
        QCOMPARE(gemvSetOneTokenMode(3), -1);     // the tensor-core GEMV
        QCOMPARE(gemvOneTokenMode(), 3);
        QCOMPARE(gemvSetOneTokenMode(5), 3);      // out of range: none
        QCOMPARE(gemvOneTokenMode(), 2);
    }

    void gemmModeOverride() {
        QCOMPARE(gemmMode(), 3);        // TS_GEMM=7 is out of range: the default (by size)
        QCOMPARE(gemmSetMode(0), -1);   // the SIMT GEMM
        QCOMPARE(gemmMode(), 0);
        QCOMPARE(gemmSetMode(2), 0);    // cuBLAS on three bf16 pieces
        QCOMPARE(gemmMode(), 2);
        QCOMPARE(gemmSetMode(4), 2);    // out of range: none
        QCOMPARE(gemmMode(), 3);
        QCOMPARE(gemmCublasMinTokens(), 64);  // TS_GEMM_CUBLAS_MIN unset
    }

    void mlaTensorCoresOverride() {
        checkSwitchOffInEnvironment(mlaSetTensorCores, mlaTensorCores);  // TS_MLA_TC=0: the SIMT kernel
        // The chunk length of the A/B sweep: set, reported back, cleared (negative clears too).
        QCOMPARE(mlaSetChunkTiles(4), 0);
        QCOMPARE(mlaSetChunkTiles(65), 4);
        QCOMPARE(mlaSetChunkTiles(-3), 65);
        QCOMPARE(mlaSetChunkTiles(0), 0);
    }

    void indexerFastSelectOverride() {  // TS_IDX_FAST=0: the general kernels
        checkSwitchOffInEnvironment(indexerSetFastSelect, indexerFastSelect);
    }

    void indexerFastShapes() {
        using namespace idxsel;
        // GLM-5.3-Flash: 32 heads × 128, kpool 16 in blocks of 64; one rank's heads are all 32 (replicated).
        QVERIFY(fastScoreShape(32, 128, 16, 64, true));
        QVERIFY(fastScoreShape(1, 128, 1, 64, true));
        QVERIFY(!fastScoreShape(33, 128, 16, 64, true));  // one lane per head
        QVERIFY(!fastScoreShape(32, 64, 16, 64, true));   // q rows of 128 in registers
        QVERIFY(!fastScoreShape(32, 128, 3, 64, true));   // pools straddling cache blocks
        QVERIFY(!fastScoreShape(32, 128, 16, 64, false));
        // The top-K's keys, chosen pools and list in shared memory: 128k context = 8,192 pools + 128 chosen,
        // within the opt-in limit of the H200 (227 KiB) and of a GB10 (sm_121: 99 KiB).
        QCOMPARE(topSmemBytes(8192, 128), size_t((8192 + 128 + kTopListCap) * 4));
        QVERIFY(fastTopFits(8192, 128, 227 * 1024));
        QVERIFY(fastTopFits(8192, 128, 99 * 1024));
        // The self-test's largest case (60,001 pools) must take the general kernel everywhere.
        QVERIFY(!fastTopFits(60001, 64, 227 * 1024));
        // The boundary: exactly full fits, one pool more does not.
        const size_t optin = 99 * 1024;
        const int64_t most = int64_t((optin - kTopStaticBytes) / 4) - 128 - kTopListCap;
        QVERIFY(fastTopFits(most, 128, optin));
        QVERIFY(!fastTopFits(most + 1, 128, optin));
        // Pools per warp of the score kernel (H200: 132 SMs): decode at 128k spreads 8,192 pools over 1,024 warps
        // (8 each, one batch); a 4k context still one batch per warp; a prefill chunk of 4,096 queries over 256
        // pools gives each block all of a query's pools (64 per warp), never more than its 4 warps share.
        QCOMPARE(fastPoolsPerWarp(8192, 1, 132), int64_t(8));
        QCOMPARE(fastPoolsPerWarp(256, 1, 132), int64_t(8));
        QCOMPARE(fastPoolsPerWarp(8192, 4, 132), int64_t(24));
        QCOMPARE(fastPoolsPerWarp(256, 4096, 132), int64_t(64));
        QCOMPARE(fastPoolsPerWarp(8192, 64, 48), int64_t(912));  // GB10: 48 SMs
        for (int64_t nc : {129, 1000, 8192, 60001})
            for (int64_t nq : {1, 7, 300})
                for (int64_t sms : {1, 48, 132}) {
                    const int64_t p = fastPoolsPerWarp(nc, nq, sms);
                    QVERIFY(p >= 8 && p % 8 == 0);
                    QVERIFY(p <= std::max<int64_t>(8, ((nc + 3) / 4 + 7) / 8 * 8));
                }
    }

private:
    // A 0/1 switch (core/env_switch.h's OverridableSwitch) whose environment variable initTestCase set to 0: an
    // override takes effect at once and reports the previous one (−1: none), −1 restores the environment's, and
    // anything but 0 / 1 clears the override.
    static void checkSwitchOffInEnvironment(int (*set)(int), bool (*get)()) {
        QVERIFY(!get());             // the environment's
        QCOMPARE(set(1), -1);        // no override before
        QVERIFY(get());
        QCOMPARE(set(0), 1);
        QVERIFY(!get());
        QCOMPARE(set(-1), 0);        // back to the environment's
        QVERIFY(!get());
        QCOMPARE(set(1), -1);
        QCOMPARE(set(7), 1);         // anything but 0 / 1: none
        QVERIFY(!get());
        QCOMPARE(set(2), -1);
        QVERIFY(!get());
    }
};

QTEST_APPLESS_MAIN(TestCudaSwitches)
#include "test_cuda_switches.moc"
