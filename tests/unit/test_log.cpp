// The engine's message sinks (core/log.h): the current sink receives each message with its level, as given
// (logFormat formats and drops trailing line ends); sinks stack, and removing one — in any order — hands the
// messages to the newest one left, stderr under them all; a sink that throws loses nothing (the line goes to
// stderr); messages from many threads all arrive, one at a time; and once removeLogSink returns, that sink never
// runs again (a sink may capture an object that is destroyed right after — the control center's controller does).
#include <QtTest>

#include <atomic>
#include <string>
#include <thread>
#include <vector>


#include "../common/stderr_capture.h"
#include "core/log.h"

using namespace ts;
using ts::test::stderrOf;

namespace {

// Removes the sinks a test added, even when it fails half-way.
struct Sinks {
    std::vector<uint64_t> ids;
    uint64_t add(LogSink s) { return ids.emplace_back(addLogSink(std::move(s))); }
    ~Sinks() {
        for (uint64_t id : ids) removeLogSink(id);
    }
};

}  // namespace

class TestLog : public QObject {
    Q_OBJECT
private slots:
    void defaultWritesOneLineToStderr() {
        const QString err = stderrOf([] {
            logMessage(LogLevel::Warning, "warning: first");
            logFormat(LogLevel::Error, "engine: request %d failed: %s\n", 7, "numerical error");
        });
        QCOMPARE(err, QStringLiteral("warning: first\nengine: request 7 failed: numerical error\n"));
    }

    void sinkGetsLevelAndText() {
        Sinks sinks;
        std::vector<std::pair<LogLevel, std::string>> got;
        QVERIFY(sinks.add([&](LogLevel l, std::string_view m) { got.emplace_back(l, std::string(m)); }) != 0);
        const QString err = stderrOf([] {
            logFormat(LogLevel::Info, "CUDA: running on %d of %d SMs", 48, 132);
            logMessage(LogLevel::Warning, "two\nlines");
            logFormat(LogLevel::Error, "%s", "");
        });
        QCOMPARE(err, QString());  // the sink took them; nothing on stderr
        QCOMPARE(got.size(), size_t(3));
        QCOMPARE(got[0].first, LogLevel::Info);
        QCOMPARE(got[0].second, std::string("CUDA: running on 48 of 132 SMs"));
        QCOMPARE(got[1].second, std::string("two\nlines"));
        QCOMPARE(got[2].first, LogLevel::Error);
        QCOMPARE(got[2].second, std::string());
        QCOMPARE(std::string(logLevelName(LogLevel::Warning)), std::string("warning"));
    }

    // Two controllers (or a test's probe beside one) may come and go in any order: the newest sink left gets the
    // messages, and a removed one is never called again.
    void sinksStackAndLeaveInAnyOrder() {
        int a = 0, b = 0, c = 0;
        const uint64_t ia = addLogSink([&](LogLevel, std::string_view) { ++a; });
        const uint64_t ib = addLogSink([&](LogLevel, std::string_view) { ++b; });
        const uint64_t ic = addLogSink([&](LogLevel, std::string_view) { ++c; });
        QVERIFY(ia != ib && ib != ic);
        logMessage(LogLevel::Info, "to c");
        removeLogSink(ib);  // not the top: c keeps receiving
        logMessage(LogLevel::Info, "still c");
        QCOMPARE(c, 2);
        QCOMPARE(b, 0);
        removeLogSink(ic);
        logMessage(LogLevel::Info, "back to a");
        QCOMPARE(a, 1);
        removeLogSink(ic);  // twice: ignored
        removeLogSink(0);
        removeLogSink(ia);
        QCOMPARE(stderrOf([] { logMessage(LogLevel::Info, "back on stderr"); }), QStringLiteral("back on stderr\n"));
        QCOMPARE(a + b + c, 3);
    }

    void throwingSinkFallsBackToStderr() {
        Sinks sinks;
        sinks.add([](LogLevel, std::string_view) { throw std::bad_alloc(); });
        QCOMPARE(stderrOf([] { logMessage(LogLevel::Error, "engine: kept"); }), QStringLiteral("engine: kept\n"));
    }

    void longMessagesAreFormattedWhole() {
        Sinks sinks;
        std::string got;
        sinks.add([&](LogLevel, std::string_view m) { got = std::string(m); });
        const std::string big(100000, 'x');
        logFormat(LogLevel::Info, "<%s>", big.c_str());
        QCOMPARE(got.size(), big.size() + 2);
        QCOMPARE(got.front(), '<');
        QCOMPARE(got.back(), '>');
    }

    // Four threads log while the main thread adds a second sink and removes the first: every message lands in
    // exactly one sink, and a removed sink is never called again.
    void threadsAndReplacement() {
        std::atomic<int> first{0}, second{0}, sent{0}, lateCalls{0};
        std::atomic<bool> firstRemoved{false}, stop{false};
        const uint64_t id1 = addLogSink([&](LogLevel, std::string_view) {
            if (firstRemoved.load()) ++lateCalls;
            ++first;
        });
        std::vector<std::thread> ts;
        for (int t = 0; t < 4; ++t)
            ts.emplace_back([&] {
                for (int i = 0; !stop.load(); ++i) {
                    logFormat(LogLevel::Info, "message %d", i);
                    ++sent;
                }
            });
        while (first.load() < 100) std::this_thread::yield();
        Sinks sinks;
        sinks.add([&](LogLevel, std::string_view) { ++second; });
        removeLogSink(id1);
        firstRemoved = true;  // after removeLogSink returned: the first sink must not run from here on
        while (second.load() < 100) std::this_thread::yield();
        stop = true;
        for (auto& t : ts) t.join();
        QCOMPARE(lateCalls.load(), 0);
        QCOMPARE(first.load() + second.load(), sent.load());
    }
};

QTEST_GUILESS_MAIN(TestLog)
#include "test_log.moc"
