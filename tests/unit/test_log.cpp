// The engine's message sink (core/log.h): a sink receives each message with its level, as given (logf formats
// and drops trailing line ends); setLogSink hands back the sink it replaced and an empty one restores stderr; a
// sink that throws loses nothing (the line goes to stderr); messages from many threads all arrive, one at a
// time; and once setLogSink returns, the replaced sink never runs again (a sink may capture an object that is
// destroyed right after — the control center's controller does).
#include <QtTest>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "core/log.h"

using namespace ts;

namespace {

// Captures what the process writes to stderr while it lives.
class StderrCapture {
public:
    StderrCapture() {
        std::fflush(stderr);
        m_saved = ::dup(2);
        m_file = std::tmpfile();
        ::dup2(::fileno(m_file), 2);
    }
    ~StderrCapture() { restore(); }
    std::string text() {
        restore();
        std::string out;
        std::rewind(m_file);
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, m_file)) > 0) out.append(buf, n);
        return out;
    }

private:
    void restore() {
        if (m_saved < 0) return;
        std::fflush(stderr);
        ::dup2(m_saved, 2);
        ::close(m_saved);
        m_saved = -1;
    }
    int m_saved = -1;
    FILE* m_file = nullptr;
};

}  // namespace

class TestLog : public QObject {
    Q_OBJECT
private slots:
    void cleanup() { setLogSink({}); }

    void defaultWritesOneLineToStderr() {
        StderrCapture cap;
        logMessage(LogLevel::Warning, "warning: first");
        logf(LogLevel::Error, "engine: request %d failed: %s\n", 7, "numerical error");
        QCOMPARE(cap.text(), std::string("warning: first\nengine: request 7 failed: numerical error\n"));
    }

    void sinkGetsLevelAndText() {
        std::vector<std::pair<LogLevel, std::string>> got;
        const LogSink before = setLogSink([&](LogLevel l, std::string_view m) { got.emplace_back(l, std::string(m)); });
        QVERIFY(!before);  // the default is the empty sink
        StderrCapture cap;
        logf(LogLevel::Info, "CUDA: running on %d of %d SMs", 48, 132);
        logMessage(LogLevel::Warning, "two\nlines");
        logf(LogLevel::Error, "%s", "");
        QCOMPARE(cap.text(), std::string());  // the sink took them; nothing on stderr
        QCOMPARE(got.size(), size_t(3));
        QCOMPARE(got[0].first, LogLevel::Info);
        QCOMPARE(got[0].second, std::string("CUDA: running on 48 of 132 SMs"));
        QCOMPARE(got[1].second, std::string("two\nlines"));
        QCOMPARE(got[2].first, LogLevel::Error);
        QCOMPARE(got[2].second, std::string());
        QCOMPARE(std::string(logLevelName(LogLevel::Warning)), std::string("warning"));
    }

    void replacingReturnsThePreviousAndEmptyRestoresStderr() {
        int a = 0, b = 0;
        setLogSink([&](LogLevel, std::string_view) { ++a; });
        LogSink prev = setLogSink([&](LogLevel, std::string_view) { ++b; });
        logMessage(LogLevel::Info, "x");
        QCOMPARE(a, 0);
        QCOMPARE(b, 1);
        QVERIFY(prev);
        prev(LogLevel::Info, "handed back");  // the returned sink is the first one, still callable
        QCOMPARE(a, 1);
        setLogSink({});
        StderrCapture cap;
        logMessage(LogLevel::Info, "back on stderr");
        QCOMPARE(cap.text(), std::string("back on stderr\n"));
        QCOMPARE(b, 1);
    }

    void throwingSinkFallsBackToStderr() {
        setLogSink([](LogLevel, std::string_view) { throw std::bad_alloc(); });
        StderrCapture cap;
        logMessage(LogLevel::Error, "engine: kept");
        QCOMPARE(cap.text(), std::string("engine: kept\n"));
    }

    void longMessagesAreFormattedWhole() {
        std::string got;
        setLogSink([&](LogLevel, std::string_view m) { got = std::string(m); });
        const std::string big(100000, 'x');
        logf(LogLevel::Info, "<%s>", big.c_str());
        QCOMPARE(got.size(), big.size() + 2);
        QCOMPARE(got.front(), '<');
        QCOMPARE(got.back(), '>');
    }

    // Four threads log while the main thread swaps sinks: every message lands in exactly one sink, and a sink
    // that has been replaced is never called again.
    void threadsAndReplacement() {
        std::atomic<int> first{0}, second{0}, sent{0}, lateCalls{0};
        std::atomic<bool> firstReplaced{false}, stop{false};
        setLogSink([&](LogLevel, std::string_view) {
            if (firstReplaced.load()) ++lateCalls;
            ++first;
        });
        std::vector<std::thread> ts;
        for (int t = 0; t < 4; ++t)
            ts.emplace_back([&] {
                for (int i = 0; !stop.load(); ++i) {
                    logf(LogLevel::Info, "message %d", i);
                    ++sent;
                }
            });
        while (first.load() < 100) std::this_thread::yield();
        setLogSink([&](LogLevel, std::string_view) { ++second; });
        firstReplaced = true;  // after setLogSink returned: the first sink must not run from here on
        while (second.load() < 100) std::this_thread::yield();
        stop = true;
        for (auto& t : ts) t.join();
        QCOMPARE(lateCalls.load(), 0);
        QCOMPARE(first.load() + second.load(), sent.load());
    }
};

QTEST_GUILESS_MAIN(TestLog)
#include "test_log.moc"
