// The control center as a process (`twinspark --serve`): SIGTERM, SIGINT or SIGHUP end it as closing its window
// does. A stream running on its in-process API ends with an error event and [DONE] (not cut mid-token), the
// process logs the signal and exits 0.
#include <QElapsedTimer>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>

#include <thread>

#include "../common/free_port.h"
#include "control_center_process.h"
// server_process.h's SSE client; its chat model is the GUI suites' (the same fixture, built for them).
#define TS_CHAT_MODEL_DIR TS_GUI_CHAT_MODEL
#include "../server/server_process.h"

using tstest::json;

class TestControlCenterSignals : public QObject {
    Q_OBJECT
private slots:
    void signalEndsStreamsAndExitsZero_data() {
        QTest::addColumn<int>("sig");
        QTest::addColumn<QString>("name");
        QTest::newRow("SIGTERM") << int(SIGTERM) << QStringLiteral("SIGTERM");
        QTest::newRow("SIGINT") << int(SIGINT) << QStringLiteral("SIGINT");
        QTest::newRow("SIGHUP") << int(SIGHUP) << QStringLiteral("SIGHUP");
    }
    void signalEndsStreamsAndExitsZero() {
        QFETCH(int, sig);
        QFETCH(QString, name);
        QTemporaryDir dir;
        const int port = ts::test::freePort();
        QVERIFY(port > 0);
        const QString env = dir.filePath(QStringLiteral(".env"));
        {
            QFile f(env);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QStringLiteral("PORT=%1\n").arg(port).toUtf8());
        }
        QProcess app;
        QProcessEnvironment pe = QProcessEnvironment::systemEnvironment();
        for (const char* k : {"PORT", "VLLM_API_KEY", "MAX_NUM_SEQS", "MAX_MODEL_LEN", "TWINSPARK_BACKEND"})
            pe.remove(QString::fromLatin1(k));
        pe.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        pe.insert(QStringLiteral("XDG_CONFIG_HOME"), dir.filePath(QStringLiteral("xdg")));
        pe.insert(QStringLiteral("XDG_DATA_HOME"), dir.filePath(QStringLiteral("data")));
        QVERIFY2(startServingControlCenter(app, env, pe, port),
                 qPrintable(QString::fromUtf8(app.readAllStandardError()).right(2000)));

        tstest::SseResult s;
        std::thread streamer([&] {
            httplib::Client c("127.0.0.1", port);
            c.set_read_timeout(60, 0);
            s = tstest::postStream(c, "/v1/chat/completions",
                                   json{{"messages", json::array({json{{"role", "user"}, {"content", "x"}}})},
                                        {"max_tokens", 100000}, {"ignore_eos", true}, {"stream", true}});
        });
        // The signal once the stream is under way: the engine counts it running (asked over HTTP; the streamer's
        // result is only read after join).
        httplib::Client probe("127.0.0.1", port);
        static const QRegularExpression running(QStringLiteral("vllm:num_requests_running\\{[^}]*\\} 1\\b"));
        bool underway = false;
        for (int i = 0; i < 200 && !underway; ++i) {
            const auto m = probe.Get("/metrics");
            underway = m && m->status == 200 && running.match(QString::fromStdString(m->body)).hasMatch();
            if (!underway) QTest::qWait(25);
        }
        QVERIFY(underway);
        QTest::qWait(200);
        ::kill(pid_t(app.processId()), sig);
        const bool ended = app.waitForFinished(20000);
        streamer.join();
        if (!ended) app.kill();
        const QString err = QString::fromUtf8(app.readAllStandardError());
        QVERIFY2(ended, qPrintable(err.right(2000)));
        QVERIFY2(app.exitStatus() == QProcess::NormalExit, qPrintable(err.right(3000)));
        QCOMPARE(app.exitCode(), 0);
        QVERIFY2(err.contains(name + QStringLiteral(" received, shutting down")), qPrintable(err.right(2000)));
        QVERIFY2(s.data.size() >= 2, s.raw.c_str());
        QCOMPARE(s.data.back(), std::string("[DONE]"));
        const json last = json::parse(s.data[s.data.size() - 2], nullptr, false);
        QVERIFY2(last.is_object() && last.contains("error"), s.data[s.data.size() - 2].c_str());
    }
};

QTEST_GUILESS_MAIN(TestControlCenterSignals)
#include "test_control_center_signals.moc"
