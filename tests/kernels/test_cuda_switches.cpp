// The CUDA backend's run-time overrides (kernels/exl3_tune.h) on the host, no GPU needed: the KDA prefill's
// chunking threshold. bench-device --what kda compares the recurrent kernel with the chunked form in one
// process; the threshold's environment variable (TS_KDA_CHUNK) is read once, so the comparison goes through
// kdaSetChunkMinTokens — which must take effect at once, report the previous override and restore.
#include <QtTest>

#include <cstdint>

#include "exl3_tune.h"

using namespace ts;

class TestCudaSwitches : public QObject {
    Q_OBJECT
private slots:
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
};

QTEST_APPLESS_MAIN(TestCudaSwitches)
#include "test_cuda_switches.moc"
