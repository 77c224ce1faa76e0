// The KV budget's arithmetic on a device (runtime/device_budget.h): GPU_MEM_UTIL of the device is this process's
// share, the pool gets it minus the model and the profiling step; other processes are not charged to the pool,
// but the share must have been free at the start (vLLM's check, where the recipe stops too). The numbers are
// the recipe's GB10 ones, where charging the system's memory to the pool left it nothing.
#include <QtTest>

#include "core/error.h"
#include "runtime/device_budget.h"

using namespace ts;

namespace {

constexpr int64_t kGiB = int64_t(1) << 30;
int64_t gib(double g) { return int64_t(g * double(kGiB)); }

// The message of the ts::Error fn throws, or "" when it does not throw one.
template <class Fn>
QString errorOf(Fn fn) {
    try {
        fn();
    } catch (const Error& e) {
        return QString::fromStdString(e.what());
    }
    return {};
}

}  // namespace

class TestDeviceBudget : public QObject {
    Q_OBJECT
private slots:
    void theRecipesGb10() {
        // 121.69 GiB device; the system uses 14 GiB (within the 0.13 share); the model takes 84.3 GiB once loaded
        // (82.06 GiB of weights in the recipe's log, plus workspaces) and a 1,024-token step 3.4 GiB.
        const int64_t total = gib(121.69), atOpen = total - gib(14.0);
        const int64_t afterWeights = atOpen - gib(84.3), afterStep = afterWeights - gib(3.4);
        const DeviceBudget b = planDeviceBudget(0.87, total, atOpen, afterWeights, afterStep, true, 1024);
        QCOMPARE(b.requestedBytes, int64_t(0.87 * double(total)));
        QCOMPARE(b.othersBytes, gib(14.0));
        QCOMPARE(b.modelBytes, gib(84.3));
        QCOMPARE(b.activationBytes, gib(3.4));
        QCOMPARE(b.stepTokens, int64_t(1024));
        QVERIFY(b.unified);
        // 105.87 − 84.3 − 3.4 GiB: the system's 14 GiB are not taken from the pool.
        QCOMPARE(b.kvBudgetBytes, b.requestedBytes - gib(84.3) - gib(3.4));
        QVERIFY(qAbs(double(b.kvBudgetBytes) / double(kGiB) - 18.17) < 0.01);
        const QString line = QString::fromStdString(describeDeviceBudget(b, 0.87));
        QVERIFY2(line.contains(QStringLiteral("unified")) && line.contains(QStringLiteral("18.17 GiB for the KV pool")),
                 qPrintable(line));
    }

    void othersBeyondTheirShareStopTheStart() {
        // Issue #47 of the recipe: free memory at boot caps at ~102 of 121.69 GiB, 0.87 asks for 105.87.
        const int64_t total = gib(121.69), atOpen = gib(102.0);
        const QString msg = errorOf([&] { planDeviceBudget(0.87, total, atOpen, atOpen - gib(80), atOpen - gib(83), true, 1024); });
        QVERIFY2(msg.contains(QStringLiteral("GPU_MEM_UTIL 0.87 asks for 105.87 GiB")), qPrintable(msg));
        QVERIFY2(msg.contains(QStringLiteral("only 102.00 GiB were free")), qPrintable(msg));
        QVERIFY2(msg.contains(QStringLiteral("set GPU_MEM_UTIL to 0.83 or less")), qPrintable(msg));
        QVERIFY2(msg.contains(QStringLiteral("unified memory")), qPrintable(msg));
        // The same numbers at the utilisation it names pass.
        const DeviceBudget b = planDeviceBudget(0.83, total, atOpen, atOpen - gib(80), atOpen - gib(83), true, 1024);
        QVERIFY(b.kvBudgetBytes > 0);
    }

    void aModelTooLargeForTheShare() {
        const int64_t total = gib(80.0), atOpen = gib(79.5);
        const QString msg =
            errorOf([&] { planDeviceBudget(0.5, total, atOpen, atOpen - gib(39.0), atOpen - gib(41.0), false, 2048); });
        QVERIFY2(msg.contains(QStringLiteral("leaves no device memory for the KV pool")), qPrintable(msg));
        QVERIFY2(msg.contains(QStringLiteral("one 2048-token step (2.00 GiB)")), qPrintable(msg));
        QVERIFY2(msg.contains(QStringLiteral("at least 0.53 would be needed")), qPrintable(msg));
        QVERIFY2(!msg.contains(QStringLiteral("unified")), qPrintable(msg));
        // At a utilisation that is more than was free at the start, the message says so.
        const QString tight =
            errorOf([&] { planDeviceBudget(0.97, total, atOpen, atOpen - gib(77.0), atOpen - gib(78.5), false, 2048); });
        QVERIFY2(tight.contains(QStringLiteral("more than was free at the start")), qPrintable(tight));
    }

    void aDiscreteGpuAlone() {
        // An H200 that only this process uses: the budget is util × total minus the model and the step.
        const int64_t total = gib(139.8), atOpen = total - gib(0.5);
        const DeviceBudget b = planDeviceBudget(0.87, total, atOpen, atOpen - gib(20.0), atOpen - gib(21.0), false, 1024);
        QCOMPARE(b.kvBudgetBytes, b.requestedBytes - gib(21.0));
        QVERIFY(!b.unified);
        QVERIFY(!QString::fromStdString(describeDeviceBudget(b, 0.87)).contains(QStringLiteral("unified")));
    }

    void utilisationOutOfRange() {
        for (double u : {0.0, -0.5, 1.01}) {
            const QString msg = errorOf([&] { planDeviceBudget(u, gib(80.0), gib(79.0), gib(60.0), gib(59.0), false, 8); });
            QVERIFY2(msg.contains(QStringLiteral("GPU_MEM_UTIL must be in (0, 1]")), qPrintable(msg));
        }
    }

    void memoryFreedMeanwhileIsNotNegativeUse() {
        // Others released memory after the device was opened: free rose, the model's share reads as 0, not < 0.
        const int64_t total = gib(100.0), atOpen = gib(90.0);
        const DeviceBudget b = planDeviceBudget(0.8, total, atOpen, atOpen + gib(5.0), atOpen + gib(4.0), false, 8);
        QCOMPARE(b.modelBytes, int64_t(0));
        QCOMPARE(b.activationBytes, gib(1.0));
        QCOMPARE(b.kvBudgetBytes, b.requestedBytes - gib(1.0));
    }
};

QTEST_APPLESS_MAIN(TestDeviceBudget)
#include "test_device_budget.moc"
