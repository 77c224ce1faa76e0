// Another GPU's per-SM limits on this one (kernels/cuda/sm_limits.h, TS_CUDA_SM_LIMITS=gb10), the arithmetic on the
// host: how many blocks a GB10 SM holds of a kernel, and the dynamic shared memory that makes an H100 / H200 SM
// hold no more than that. The GPU side runs on the device: the padding is checked against the occupancy calculator
// each time one is made (kernels/cuda/cuda_partition.cu fails the launch otherwise), and the self-test, benchmark 1
// and the slice run under the limits with scripts/gpu/partition_check.sh LIMITS=gb10.
#include <QtTest>

#include <cstdint>

#include "cuda/sm_limits.h"

using namespace ts::cuda;

namespace {
// An H100 / H200 SM (compute capability 9.0): 228 KiB of shared memory for blocks, 1 KiB reserved per block.
constexpr int64_t kSm90Smem = 233472;
constexpr int64_t kSm90Reserved = 1024;
}  // namespace

class TestSmLimits : public QObject {
    Q_OBJECT
private slots:
    void names() {
        QVERIFY(smShapeNamed("gb10") == &kGb10Sm);
        QVERIFY(smShapeNamed("GB10") == nullptr);
        QVERIFY(smShapeNamed("") == nullptr);
        QVERIFY(smShapeNamed("gb100") == nullptr);
        QCOMPARE(kGb10Sm.smemPerSm, int64_t(100 * 1024));
        QCOMPARE(kGb10Sm.threadsPerSm, 1536);
    }

    // Blocks per GB10 SM: by shared memory (100 KiB, 1 KiB per block reserved), by threads (1,536), never more
    // than the device's own SM holds (its registers).
    void gb10Blocks() {
        // A 24 KiB block of 128 threads, 8 per H100 SM (register-bound there): 102,400 / 25,600 = 4 on a GB10.
        QCOMPARE(limitedBlocks(kGb10Sm, 24576, 128, 8), 4);
        // One byte more is a 128-byte unit more, and only 3 fit (4 × (24,704 + 1,024) > 102,400).
        QCOMPARE(limitedBlocks(kGb10Sm, 24577, 128, 8), 3);
        // The unit counts: 33,025 bytes are granted 33,152, and 3 × 34,176 > 102,400 (unrounded, 3 would fit).
        QCOMPARE(limitedBlocks(kGb10Sm, 33025, 128, 8), 2);
        QCOMPARE(limitedBlocks(kGb10Sm, 33024, 128, 8), 3);
        // The streaming EXL3 decode unit at K = 4 (24,848 bytes): 3 per GB10 SM.
        QCOMPARE(limitedBlocks(kGb10Sm, 24848, 128, 8), 3);
        // The largest block a GB10 takes, 99 KiB: one per SM; a byte more cannot run there at all.
        QCOMPARE(limitedBlocks(kGb10Sm, 101376, 128, 2), 1);
        QCOMPARE(limitedBlocks(kGb10Sm, 101377, 128, 2), 0);
        // Threads: 512-thread blocks without shared memory, 4 per H100 SM (2,048 threads), 3 per GB10 SM.
        QCOMPARE(limitedBlocks(kGb10Sm, 0, 512, 4), 3);
        // The device's count binds when it is the lower one.
        QCOMPARE(limitedBlocks(kGb10Sm, 1024, 256, 2), 2);
    }

    // One block's shared memory: the device's opt-in limit or the GB10's 99 KiB, the lower.
    void blockOptin() {
        QCOMPARE(limitedBlockOptin(kGb10Sm, 232448), int64_t(101376));  // an H100 / H200 SM's 227 KiB → 99 KiB
        QCOMPARE(limitedBlockOptin(kGb10Sm, 49152), int64_t(49152));    // a device with less keeps its own
        // and a block of the limit fits the limited SM once, one byte more not at all (limitedBlocks above)
        QCOMPARE(limitedBlocks(kGb10Sm, limitedBlockOptin(kGb10Sm, 232448), 128, 1), 1);
        QCOMPARE(limitedBlocks(kGb10Sm, limitedBlockOptin(kGb10Sm, 232448) + 1, 128, 1), 0);
    }

    // The padding: the smallest dynamic shared memory at least dyn with which an sm_90 SM holds `want` blocks and
    // not want + 1.
    void sm90Padding() {
        // The 24 KiB block above: 4 wanted → 233,472 / 5 + 1 = 46,695 bytes a block, 45,671 of them dynamic.
        QCOMPARE(paddedDynSmem(kSm90Smem, kSm90Reserved, 0, 24576, 4), int64_t(45671));
        // A static part counts: 4 KiB static, the same 4 wanted → 4 KiB less dynamic.
        QCOMPARE(paddedDynSmem(kSm90Smem, kSm90Reserved, 4096, 20480, 4), int64_t(45671 - 4096));
        // Already large enough: kept.
        QCOMPARE(paddedDynSmem(kSm90Smem, kSm90Reserved, 0, 60000, 3), int64_t(60000));
        for (int want = 1; want <= 16; ++want) {
            for (int64_t st : {int64_t(0), int64_t(4096)}) {
                const int64_t d = paddedDynSmem(kSm90Smem, kSm90Reserved, st, 0, want);
                const int64_t block = d + st + kSm90Reserved;
                QVERIFY2(int64_t(want) * block <= kSm90Smem, qPrintable(QString("want %1: %2 fit").arg(want).arg(kSm90Smem / block)));
                QVERIFY2(int64_t(want + 1) * block > kSm90Smem, qPrintable(QString("want %1: %2 fit").arg(want).arg(kSm90Smem / block)));
                // and the smallest such: one byte less lets want + 1 in
                QVERIFY(int64_t(want + 1) * (block - 1) <= kSm90Smem);
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestSmLimits)
#include "test_sm_limits.moc"
