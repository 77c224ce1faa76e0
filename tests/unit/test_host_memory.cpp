// /proc/meminfo as the unified-memory accounting reads it (core/host_memory.h): the three fields in any order,
// kB → bytes, anything malformed refused rather than guessed; and the rule that recognises a device whose
// memory figures are the host's (looksUnified).
#include <QtTest>

#include "core/host_memory.h"

using namespace ts;

namespace {

constexpr int64_t kGiB = int64_t(1) << 30;

// A GB10 as the recipe measured one right after its checkpoint sync: MemFree ~2 GiB, MemAvailable ~117 GiB.
const char* kGb10 =
    "MemTotal:       125494048 kB\n"
    "MemFree:         2097152 kB\n"
    "MemAvailable:   122683392 kB\n"
    "Buffers:            4096 kB\n"
    "Cached:         118489088 kB\n"
    "HugePages_Total:       0\n";

}  // namespace

class TestHostMemory : public QObject {
    Q_OBJECT
private slots:
    void parsesTheThreeFields() {
        const auto m = parseMemInfo(kGb10);
        QVERIFY(m.has_value());
        QCOMPARE(m->totalBytes, int64_t(125494048) * 1024);
        QCOMPARE(m->freeBytes, int64_t(2097152) * 1024);
        QCOMPARE(m->availableBytes, int64_t(122683392) * 1024);
    }

    void orderAndLineEndingsDoNotMatter() {
        const auto m = parseMemInfo("MemAvailable: 300 kB\r\nSwapTotal: 0 kB\r\nMemFree:\t200 kB\r\nMemTotal: 100 kB\r\n");
        QVERIFY(m.has_value());
        QCOMPARE(m->totalBytes, int64_t(100) * 1024);
        QCOMPARE(m->freeBytes, int64_t(200) * 1024);
        QCOMPARE(m->availableBytes, int64_t(300) * 1024);
    }

    void refusesWhatItCannotRead_data() {
        QTest::addColumn<QString>("text");
        QTest::newRow("empty") << QString();
        // A kernel before 3.14 has no MemAvailable: MemFree is not a stand-in for it.
        QTest::newRow("no MemAvailable") << QStringLiteral("MemTotal: 100 kB\nMemFree: 50 kB\n");
        QTest::newRow("no unit") << QStringLiteral("MemTotal: 100\nMemFree: 50 kB\nMemAvailable: 60 kB\n");
        QTest::newRow("other unit") << QStringLiteral("MemTotal: 100 MB\nMemFree: 50 kB\nMemAvailable: 60 kB\n");
        QTest::newRow("negative") << QStringLiteral("MemTotal: -100 kB\nMemFree: 50 kB\nMemAvailable: 60 kB\n");
        QTest::newRow("not a number") << QStringLiteral("MemTotal: lots kB\nMemFree: 50 kB\nMemAvailable: 60 kB\n");
        QTest::newRow("trailing junk") << QStringLiteral("MemTotal: 100 kB x\nMemFree: 50 kB\nMemAvailable: 60 kB\n");
        QTest::newRow("absurdly large") << QStringLiteral("MemTotal: 99999999999999999999 kB\nMemFree: 50 kB\nMemAvailable: 60 kB\n");
    }
    void refusesWhatItCannotRead() {
        QFETCH(QString, text);
        QVERIFY(!parseMemInfo(text.toStdString()).has_value());
    }

    void readsThisMachine() {
        // Every Linux since 3.14 has the three fields; a sane machine has available ≤ total.
        const auto m = readHostMemory();
        QVERIFY(m.has_value());
        QVERIFY(m->totalBytes > 0);
        QVERIFY(m->availableBytes <= m->totalBytes);
        QVERIFY(m->freeBytes <= m->totalBytes);
    }

    void recognisesAUnifiedDevice() {
        const auto host = parseMemInfo(kGb10);
        QVERIFY(host.has_value());
        // The GB10: cudaMemGetInfo's free is MemFree (to within what changed between the two reads) and its total
        // the system's to within a few percent.
        QVERIFY(looksUnified(host->freeBytes + 64 * (int64_t(1) << 20), host->totalBytes + 2 * kGiB, *host));
        // A discrete 141 GB H200 in a 128 GiB host: neither figure follows the host's.
        QVERIFY(!looksUnified(140 * kGiB, 141 * kGiB, *host));
        // A discrete card whose total happens to be the host's: its free memory is not the host's MemFree.
        QVERIFY(!looksUnified(100 * kGiB, host->totalBytes, *host));
        // ... nor is a card whose free memory happens to equal MemFree but whose size is another.
        QVERIFY(!looksUnified(host->freeBytes, 24 * kGiB, *host));
        QVERIFY(!looksUnified(host->freeBytes, 0, *host));
    }
};

QTEST_APPLESS_MAIN(TestHostMemory)
#include "test_host_memory.moc"
