// The KV budget's arithmetic on a device (runtime/device_budget.h): GPU_MEM_UTIL of the device is this process's
// share, the pool gets it minus the model and the profiling step; other processes are not charged to the pool,
// but the share must have been free at the start (vLLM's check, where the recipe stops too). The numbers are
// the recipe's GB10 ones, where charging the system's memory to the pool left it nothing.
#include <QtTest>

#include <functional>
#include <string>
#include <vector>

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

// A clock that only moves when the code under test sleeps, and a device whose free memory is a function of
// that time: the start-up wait's decisions without waiting.
struct FakeDevice {
    double t = 0.0;
    int64_t total = gib(121.69);
    std::function<int64_t(double)> freeAt;  // free bytes at time t
    int reads = 0, sleeps = 0;
    std::vector<std::string> notes;
    MemoryWaitClock clock() {
        return {[this] { return t; }, [this](double s) {
                    QVERIFY(s >= 0.0);
                    t += s;
                    ++sleeps;
                }};
    }
    DeviceMemory read() {
        ++reads;
        DeviceMemory m;
        m.totalBytes = total;
        m.freeBytes = freeAt(t);
        m.unified = true;
        return m;
    }
    std::function<void(const std::string&)> note() {
        return [this](const std::string& line) { notes.push_back(line); };
    }
};

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

    void theMessageNamesTheUtilisationAsGiven() {
        // The H200 run of serve_check.sh: 0.999 asked for more than was free, and "%.2f" printed it as "1.00" beside
        // the advice "0.99 or less". The value the user gave is named as given.
        const int64_t total = gib(139.80), atOpen = gib(139.19);
        const QString msg = errorOf([&] { planDeviceBudget(0.999, total, atOpen, atOpen, atOpen, false, 1024); });
        QVERIFY2(msg.contains(QStringLiteral("GPU_MEM_UTIL 0.999 asks for 139.66 GiB")), qPrintable(msg));
        QVERIFY2(msg.contains(QStringLiteral("set GPU_MEM_UTIL to 0.99 or less")), qPrintable(msg));
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

    // The start-up check before loading (awaitStartupMemory) ------------------------------------------------

    void enoughMemoryAtOnceDoesNotWait() {
        FakeDevice d;
        d.freeAt = [](double) { return gib(110.0); };
        const DeviceMemory m = awaitStartupMemory(0.87, [&] { return d.read(); }, d.clock(), 30.0, d.note());
        QCOMPARE(m.freeBytes, gib(110.0));
        QCOMPARE(d.reads, 1);
        QCOMPARE(d.sleeps, 0);
        QVERIFY(d.notes.empty());
    }

    void aRestartWaitsForTheMemoryComingBack() {
        // The previous server's ~60 GiB come back over 8 s, from 50 to 110 GiB free: the check passes at the
        // first reading at or above 0.87 × 121.69 = 105.87 GiB (t = 7 s), saying that it waits and why.
        FakeDevice d;
        d.freeAt = [](double t) { return gib(std::min(110.0, 50.0 + 7.5 * t)); };
        const DeviceMemory m = awaitStartupMemory(0.87, [&] { return d.read(); }, d.clock(), 30.0, d.note());
        QVERIFY(m.freeBytes >= int64_t(0.87 * double(d.total)));
        QCOMPARE(d.t, 8.0);  // 50 + 7.5·7 = 102.5 < 105.87 at 7 s; 110 at 8 s
        QVERIFY(!d.notes.empty());
        const QString first = QString::fromStdString(d.notes.front());
        QVERIFY2(first.contains(QStringLiteral("waiting for device memory: 50.00 GiB free")) &&
                     first.contains(QStringLiteral("asks for 105.87 GiB")) &&
                     first.contains(QStringLiteral("TS_MEM_WAIT_S")),
                 qPrintable(first));
        QVERIFY2(QString::fromStdString(d.notes.back()).contains(QStringLiteral("110.00 GiB free after 8.0 s")),
                 d.notes.back().c_str());
        // A note every 5 s at most while waiting, plus the last.
        QCOMPARE(int(d.notes.size()), 3);
    }

    void aShortageThatDoesNotMoveStopsEarly() {
        // The recipe's issue 47: free memory caps at ~102 GiB and stays there. Nothing is coming back, so the wait
        // ends once free memory has not grown for 10 s, not after the whole 30 s, with the same advice as ever.
        FakeDevice d;
        d.freeAt = [](double t) { return gib(102.0) + int64_t(t * 1e6); };  // a few MB of noise
        const QString msg = errorOf([&] { awaitStartupMemory(0.87, [&] { return d.read(); }, d.clock(), 30.0, d.note()); });
        QCOMPARE(d.t, 10.0);
        QVERIFY2(msg.contains(QStringLiteral("GPU_MEM_UTIL 0.87 asks for 105.87 GiB")), qPrintable(msg));
        QVERIFY2(msg.contains(QStringLiteral("were free after waiting 10 s")), qPrintable(msg));
        QVERIFY2(msg.contains(QStringLiteral("set GPU_MEM_UTIL to 0.83 or less")), qPrintable(msg));
        QVERIFY2(msg.contains(QStringLiteral("unified memory")), qPrintable(msg));
    }

    void memoryStillComingBackAtTheTimeoutFails() {
        // Growing (1 GiB/s) but too slowly for the timeout: it waits while it grows, then gives up at 12 s.
        FakeDevice d;
        d.freeAt = [](double t) { return gib(80.0 + t); };
        const QString msg = errorOf([&] { awaitStartupMemory(0.87, [&] { return d.read(); }, d.clock(), 12.0, d.note()); });
        QCOMPARE(d.t, 12.0);
        QVERIFY2(msg.contains(QStringLiteral("only 92.00 GiB were free after waiting 12 s")), qPrintable(msg));
        QVERIFY2(msg.contains(QStringLiteral("set GPU_MEM_UTIL to 0.75 or less")), qPrintable(msg));
    }

    void noWaitWhenTheTimeoutIsZero() {
        FakeDevice d;
        d.freeAt = [](double t) { return gib(t > 0.0 ? 120.0 : 60.0); };
        const QString msg = errorOf([&] { awaitStartupMemory(0.87, [&] { return d.read(); }, d.clock(), 0.0, d.note()); });
        QCOMPARE(d.sleeps, 0);
        QVERIFY2(msg.contains(QStringLiteral("only 60.00 GiB were free (")), qPrintable(msg));
    }

    void theCheckStartsFromTheOpenReadingAndRebasesAfterAWait() {
        // Free memory at the open fits: nothing is read again, nothing rebased (planDeviceBudget checks the same).
        DeviceMemory atOpen;
        atOpen.totalBytes = gib(121.69);
        atOpen.freeAtOpenBytes = gib(108.0);
        atOpen.freeBytes = gib(1.0);  // now: would fail if it were used
        FakeDevice quiet;
        quiet.freeAt = [](double) { return gib(1.0); };
        std::vector<int64_t> rebased;
        const auto keep = [&](int64_t b) { rebased.push_back(b); };
        checkStartupMemory(atOpen, [&] { return quiet.read(); }, keep, 0.87, quiet.clock(), 30.0, quiet.note());
        QCOMPARE(quiet.reads, 0);
        QVERIFY(rebased.empty());

        // It did not fit at the open, but the reading taken just after the open does (memory came back in
        // between): no wait, and the budget is planned from that reading.
        atOpen.freeAtOpenBytes = gib(70.0);
        atOpen.freeBytes = gib(107.0);
        checkStartupMemory(atOpen, [&] { return quiet.read(); }, keep, 0.87, quiet.clock(), 30.0, quiet.note());
        QCOMPARE(quiet.reads, 0);
        QCOMPARE(quiet.sleeps, 0);
        QVERIFY(quiet.notes.empty());
        QCOMPARE(rebased, std::vector<int64_t>{gib(107.0)});

        // Neither fits: the wait starts from the reading after the open (90 GiB, not the open's 70) and the
        // reading that fits (112 GiB at 2 s) becomes the start.
        FakeDevice d;
        d.freeAt = [](double t) { return gib(t >= 2.0 ? 112.0 : 90.0); };
        atOpen.freeBytes = gib(90.0);
        rebased.clear();
        checkStartupMemory(atOpen, [&] { return d.read(); }, keep, 0.87, d.clock(), 30.0, d.note());
        QVERIFY2(QString::fromStdString(d.notes.front()).contains(QStringLiteral("90.00 GiB free")), d.notes.front().c_str());
        QCOMPARE(rebased, std::vector<int64_t>{gib(112.0)});
        QCOMPARE(d.t, 2.0);

        // A bad utilisation is refused before any reading (this one would otherwise wait: nothing fits).
        FakeDevice never;
        never.freeAt = [](double) { return gib(1.0); };
        const QString msg = errorOf([&] {
            checkStartupMemory(atOpen, [&] { return never.read(); }, keep, 1.5, never.clock(), 30.0, never.note());
        });
        QVERIFY2(msg.contains(QStringLiteral("GPU_MEM_UTIL must be in (0, 1]")), qPrintable(msg));
        QCOMPARE(never.reads, 0);
        QCOMPARE(never.sleeps, 0);
    }

    void theMessageSaysWhetherItWaited() {
        // TS_MEM_WAIT_S=0 on a real clock, which moves between two readings: "were free", not "after waiting 0 s".
        FakeDevice d;
        d.freeAt = [](double) { return gib(60.0); };
        MemoryWaitClock moving = d.clock();
        moving.now = [&d] { return d.t += 0.001; };
        const QString msg = errorOf([&] { awaitStartupMemory(0.87, [&] { return d.read(); }, moving, 0.0, d.note()); });
        QVERIFY2(msg.contains(QStringLiteral("only 60.00 GiB were free (")), qPrintable(msg));
    }
};

QTEST_APPLESS_MAIN(TestDeviceBudget)
#include "test_device_budget.moc"
