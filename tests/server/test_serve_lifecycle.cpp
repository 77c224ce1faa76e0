// `twinspark-cli serve` as a process: graceful SIGTERM (a running stream ends with an error event and
// [DONE], exit 0), refusing a LAN bind without a key, bad model directories and bad options (exit 2).
#include <QtTest>

#include <thread>

#include "server_process.h"

using namespace tstest;

class TestServeLifecycle : public QObject {
    Q_OBJECT
private slots:
    void sigtermEndsStreamsAndExitsZero() {
        ServerProcess srv;
        QVERIFY2(srv.start({}), qPrintable(srv.log()));
        SseResult s;
        std::thread t([&] {
            auto c = srv.clientPtr();
            json b = json{{"messages", json::array({json{{"role", "user"}, {"content", "x"}}})}, {"max_tokens", 1900},
                          {"ignore_eos", true}, {"stream", true}};
            s = postStream(*c, "/v1/chat/completions", b);
        });
        QThread::msleep(300);
        QElapsedTimer e;
        e.start();
        QCOMPARE(srv.stop(10000), 0);
        t.join();
        QVERIFY(e.elapsed() < 8000);
        QVERIFY(!s.data.empty());
        QCOMPARE(s.data.back(), std::string("[DONE]"));
        json err = json::parse(s.data[s.data.size() - 2]);
        QVERIFY2(err.contains("error"), s.data[s.data.size() - 2].c_str());
    }

    void refusesLanWithoutKey() {
        QProcess p;
        p.start(QStringLiteral(TS_CLI_PATH), {"serve", "--model", chatModelDir(), "--host", "0.0.0.0", "--port", "0"});
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 2);
        QVERIFY(QString::fromUtf8(p.readAllStandardError()).contains("API key"));
    }

    void badModelDirExitsTwo() {
        QProcess p;
        p.start(QStringLiteral(TS_CLI_PATH), {"serve", "--model", "/nonexistent/model", "--port", "0"});
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitCode(), 2);
    }

    void badOptions() {
        for (const QStringList& extra : {QStringList{"--kv-cache-dtype", "bf16"}, QStringList{"--port", "70000"},
                                         QStringList{"--gpu-mem-util", "1.5"}, QStringList{"--backend", "tpu"},
                                         QStringList{"--bogus", "1"}}) {
            QProcess p;
            p.start(QStringLiteral(TS_CLI_PATH), QStringList{"serve", "--model", chatModelDir()} + extra);
            QVERIFY(p.waitForFinished(30000));
            QCOMPARE(p.exitCode(), 2);
        }
    }
};

QTEST_GUILESS_MAIN(TestServeLifecycle)
#include "test_serve_lifecycle.moc"
