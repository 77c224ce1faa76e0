// How the sparse MLA splits a query's selection over blocks (kernels/cuda/mla_plan.h), checked on the host: the
// H200 plans measured in docs/PERFORMANCE.md (benchmark 2), the chunk-length override of the A/B sweep, and the
// invariants every plan must keep for the kernels — whole tiles per chunk, the selection covered with no empty
// trailing chunk, at most 64 chunks (the partial buffer and the merge's shared memory are sized by it).
#include <QtTest>

#include <cstdint>

#include "cuda/mla_plan.h"

using namespace ts::mlaplan;

class TestMlaPlan : public QObject {
    Q_OBJECT
private slots:
    // 128k-context decode on the H200 (132 SMs): 2,063 selected entries, 64 heads.
    void measuredPlans() {
        // Tensor cores (16 heads per block, tiles of 32, ≥ 2 tiles): 33 chunks of 2 tiles at T = 1 ...
        ChunkPlan p = planChunks(1, 4, 2063, 132, 32, 2);
        QCOMPARE(p.chunks, int64_t(33));
        QCOMPARE(p.chunkLen, int64_t(64));
        // ... and 17 of 4 tiles at T = 4 (the bench's sweep found these two the fastest).
        p = planChunks(4, 4, 2063, 132, 32, 2);
        QCOMPARE(p.chunks, int64_t(17));
        QCOMPARE(p.chunkLen, int64_t(128));
        // SIMT (8 heads per block, tiles of 16, ≥ 4 tiles): 33 chunks of 64 at T = 1.
        p = planChunks(1, 8, 2063, 132, 16, 4);
        QCOMPARE(p.chunks, int64_t(33));
        QCOMPARE(p.chunkLen, int64_t(64));
        // A prefill chunk of 36 queries: 288 SIMT blocks fill the GPU with one chunk each (no merge); the tensor
        // cores' 144 blocks per chunk take two chunks to reach ~2 blocks per SM.
        p = planChunks(36, 8, 2063, 132, 16, 4);
        QCOMPARE(p.chunks, int64_t(1));
        p = planChunks(36, 4, 2063, 132, 32, 2);
        QCOMPARE(p.chunks, int64_t(2));
        QCOMPARE(p.chunkLen, int64_t(1056));
        // Many queries: one chunk.
        QCOMPARE(planChunks(1024, 4, 2063, 132, 32, 2).chunks, int64_t(1));
    }

    void forcedTiles() {
        QCOMPARE(planChunks(1, 4, 2063, 132, 32, 2, 1).chunks, int64_t(65));   // one tile per chunk
        QCOMPARE(planChunks(1, 4, 2063, 132, 32, 2, 65).chunks, int64_t(1));   // the whole selection
        QCOMPARE(planChunks(1, 4, 2063, 132, 32, 2, 500).chunkLen, int64_t(2080));  // capped at it
        QCOMPARE(planChunks(1, 4, 2063, 132, 32, 2, 4).chunkLen, int64_t(128));
    }

    void invariants() {
        for (int64_t width : {0, 1, 31, 32, 33, 64, 65, 100, 131, 2063, 4095, 70000})
            for (int64_t T : {1, 2, 4, 36, 1000})
                for (int64_t groups : {1, 2, 4, 8})
                    for (int sms : {0, 1, 48, 132})
                        for (int64_t tile : {16, 32})
                            for (int64_t forced : {0, 1, 3}) {
                                const ChunkPlan p = planChunks(T, groups, width, sms, tile, tile == 32 ? 2 : 4, forced);
                                const int64_t w = width < 1 ? 1 : width;
                                const QString at = QString("width %1 T %2 groups %3 SMs %4 tile %5 forced %6")
                                                       .arg(width).arg(T).arg(groups).arg(sms).arg(tile).arg(forced);
                                QVERIFY2(p.chunkLen > 0 && p.chunkLen % tile == 0, qPrintable(at));
                                QVERIFY2(p.chunks >= 1 && p.chunks * p.chunkLen >= w, qPrintable(at));
                                QVERIFY2((p.chunks - 1) * p.chunkLen < w, qPrintable(at));  // no empty chunk at the end
                                if (forced == 0) QVERIFY2(p.chunks <= 64, qPrintable(at));
                            }
    }
};

QTEST_GUILESS_MAIN(TestMlaPlan)
#include "test_mla_plan.moc"
