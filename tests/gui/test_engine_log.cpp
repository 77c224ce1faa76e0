// The engine's own messages reach the control center's log pane (core/log.h through the EngineController's
// sink), not only the terminal: loading a copy of the embedded EXL3 model whose config.json names a codebook
// the tensors contradict raises the engine's warning on a loader thread, and the Server page's log shows it
// (and the terminal still gets it). When the controller shuts down, its sink is removed. A lost
// GPU (TS_FAULT_OP fails a model step's backend call as a CUDA sticky error would) ends the chat with the reason,
// the log and the engine status say the engine has stopped, and a new chat is refused with what to do.
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPlainTextEdit>
#include <QTemporaryDir>
#include <QtTest>

#include "core/log.h"
#include "gui_spy.h"
#include "ui/engine_controller.h"
#include "ui/server_page.h"

using namespace ts::ui;

namespace {

// Loads `dir` with 64 MiB of KV and waits for the outcome: empty when loaded, else the error.
QString loadModel(EngineController& controller, const QString& dir, const QString& backend = QStringLiteral("auto")) {
    GuiSpy loaded(&controller, &EngineController::modelLoaded);
    GuiSpy failed(&controller, &EngineController::loadFailed);
    LoadOptions o;
    o.kvBudgetMiB = 64;
    o.backend = backend;
    controller.requestLoad(dir, o);
    if (!QTest::qWaitFor([&] { return loaded.count() + failed.count() > 0; }, 60000))
        return QStringLiteral("no answer in 60 s");
    return failed.isEmpty() ? QString() : failed.first().first().toString();
}

}  // namespace

class TestEngineLog final : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    void loadWarningReachesTheLogPane() {
        const QString src = QStringLiteral(TS_SOURCE_DIR "/resources/models/glm5-next-tiny-exl3");
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        for (const QString& n : QDir(src).entryList(QDir::Files)) QVERIFY(QFile::copy(src + "/" + n, tmp.filePath(n)));
        QFile cfgFile(tmp.filePath(QStringLiteral("config.json")));
        QVERIFY(cfgFile.open(QIODevice::ReadOnly));
        QJsonObject cfg = QJsonDocument::fromJson(cfgFile.readAll()).object();
        cfgFile.close();
        QJsonObject qc = cfg.value(QStringLiteral("quantization_config")).toObject();
        QVERIFY2(!qc.isEmpty(), "the embedded EXL3 model has no quantization_config");
        qc.insert(QStringLiteral("codebook"), qc.value(QStringLiteral("codebook")).toString() == QStringLiteral("mcg")
                                                   ? QStringLiteral("mul1")
                                                   : QStringLiteral("mcg"));
        cfg.insert(QStringLiteral("quantization_config"), qc);
        QVERIFY(cfgFile.open(QIODevice::WriteOnly | QIODevice::Truncate));
        cfgFile.write(QJsonDocument(cfg).toJson());
        cfgFile.close();

        {
            EngineController controller;
            ServerPage page(&controller);
            auto* log = page.findChild<QPlainTextEdit*>(QStringLiteral("log"));
            QVERIFY(log);
            const QString error = loadModel(controller, tmp.path());
            QVERIFY2(error.isEmpty(), qPrintable(error));
            QTRY_VERIFY2_WITH_TIMEOUT(log->toPlainText().contains(QStringLiteral("carry another")),
                                      qPrintable(log->toPlainText()), 5000);
            const QString text = log->toPlainText();
            QVERIFY2(text.contains(QStringLiteral("warning: ")), qPrintable(text));
            controller.shutdown();
        }
        // Removed: a line logged now must not reach the destroyed controller (a sink left behind would post to freed
        // memory here).
        ts::logMessage(ts::LogLevel::Info, "test_engine_log: logged after the controller was destroyed");
    }

    void lostDeviceIsShown() {
        EngineController controller;
        ServerPage page(&controller);
        auto* log = page.findChild<QPlainTextEdit*>(QStringLiteral("log"));
        auto* status = page.findChild<QLabel*>(QStringLiteral("engineStatus"));
        QVERIFY(log && status);
        GuiSpy finished(&controller, &EngineController::chatFinished);
        qputenv("TS_FAULT_OP", "embedding@3");  // read when the backend is made, during the load
        const QString error = loadModel(controller, QStringLiteral(TS_GUI_CHAT_MODEL), QStringLiteral("cpu"));
        qunsetenv("TS_FAULT_OP");
        QVERIFY2(error.isEmpty(), qPrintable(error));
        ChatRequest r;
        r.messages = QJsonArray{QJsonObject{{QStringLiteral("role"), QStringLiteral("user")},
                                            {QStringLiteral("content"), QStringLiteral("Hello")}}};
        r.maxTokens = 50;
        r.ignoreEos = true;
        const quint64 first = controller.requestChat(r);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 30000);
        QCOMPARE(finished.first().first().toULongLong(), first);
        const ChatFinish f = finished.first().at(1).value<ChatFinish>();
        QCOMPARE(f.reason, QStringLiteral("error"));
        QVERIFY2(f.error.contains(QStringLiteral("the GPU failed")), qPrintable(f.error));
        QVERIFY(f.completionTokens < 3);
        QTRY_VERIFY2_WITH_TIMEOUT(log->toPlainText().contains(QStringLiteral("The engine has stopped")),
                                  qPrintable(log->toPlainText()), 5000);
        QVERIFY2(log->toPlainText().contains(QStringLiteral("engine: the GPU failed")), qPrintable(log->toPlainText()));
        QTRY_VERIFY2_WITH_TIMEOUT(status->text().startsWith(QStringLiteral("Engine stopped")), qPrintable(status->text()),
                                  5000);
        controller.requestChat(r);
        QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 2, 30000);
        const ChatFinish again = finished.at(1).at(1).value<ChatFinish>();
        QCOMPARE(again.reason, QStringLiteral("error"));
        QVERIFY2(again.error.contains(QStringLiteral("Restart the process")), qPrintable(again.error));
        controller.shutdown();
    }

    // The shipped model is consistent: loading it puts no warning in the pane.
    void consistentModelLogsNoWarning() {
        EngineController controller;
        ServerPage page(&controller);
        auto* log = page.findChild<QPlainTextEdit*>(QStringLiteral("log"));
        QVERIFY(log);
        const QString error = loadModel(controller, QStringLiteral(TS_SOURCE_DIR "/resources/models/glm5-next-tiny-exl3"));
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QTest::qWait(200);  // anything posted during the load has arrived
        QVERIFY2(!log->toPlainText().contains(QStringLiteral("warning")), qPrintable(log->toPlainText()));
        controller.shutdown();
    }
};

QTEST_MAIN(TestEngineLog)
#include "test_engine_log.moc"
