// The control center opens on the embedded default model when no model is configured (issue 8): where that
// model is looked for (installed location first, then the source tree), which configured model wins over it,
// and, end to end, that the window loaded that way answers in the chat playground.
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "gui_spy.h"

#include "io/default_paths.h"

#include "ui/chat_page.h"
#include "ui/conversation_store.h"
#include "ui/default_model.h"
#include "ui/engine_controller.h"
#include "ui/env_store.h"
#include "ui/main_window.h"
#include "ui/server_page.h"

using namespace ts::ui;

namespace {

// A folder that looks like a model (what the lookup checks: a config.json).
void makeModel(const QString& dir) {
    QVERIFY(QDir().mkpath(dir));
    QFile f(dir + QStringLiteral("/config.json"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{}");
}

QString canonical(const QString& p) { return QFileInfo(p).canonicalFilePath(); }

}  // namespace

class TestDefaultModel final : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    void nameIsTheShippedFolder() {
        QCOMPARE(defaultModelName(), QStringLiteral("glm5-next-tiny-exl3"));  // issue 8: the EXL3 export
        QVERIFY2(QFileInfo::exists(QStringLiteral(TS_SOURCE_DIR "/resources/models/") + defaultModelName() +
                                   QStringLiteral("/config.json")),
                 "the default model is not in resources/models");
    }

    // An installed tree (<prefix>/bin + <prefix>/share/twinspark/models) wins over a source tree, a build
    // directory inside the source tree finds resources/models, and nothing found gives an empty path.
    void lookupOrder() {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        const QString name = defaultModelName();
        const QString prefix = tmp.filePath(QStringLiteral("prefix")), src = tmp.filePath(QStringLiteral("src"));
        QVERIFY(QDir().mkpath(prefix + QStringLiteral("/bin")));
        QVERIFY(QDir().mkpath(src + QStringLiteral("/build/app")));
        const QString empty = tmp.filePath(QStringLiteral("empty"));
        QVERIFY(QDir().mkpath(empty));

        QCOMPARE(findDefaultModel(prefix + QStringLiteral("/bin"), empty, QString()), QString());
        makeModel(src + QStringLiteral("/resources/models/") + name);
        // build/app of the source tree, the working directory, the compiled-in source tree
        QCOMPARE(canonical(findDefaultModel(src + QStringLiteral("/build/app"), empty, QString())),
                 canonical(src + QStringLiteral("/resources/models/") + name));
        QCOMPARE(canonical(findDefaultModel(prefix + QStringLiteral("/bin"), src, QString())),
                 canonical(src + QStringLiteral("/resources/models/") + name));
        QCOMPARE(canonical(findDefaultModel(prefix + QStringLiteral("/bin"), empty, src)),
                 canonical(src + QStringLiteral("/resources/models/") + name));
        // installed copy first
        makeModel(prefix + QStringLiteral("/share/twinspark/models/") + name);
        QCOMPARE(canonical(findDefaultModel(prefix + QStringLiteral("/bin"), src, src)),
                 canonical(prefix + QStringLiteral("/share/twinspark/models/") + name));
        // a folder without config.json is not a model
        QVERIFY(QFile::remove(prefix + QStringLiteral("/share/twinspark/models/") + name + QStringLiteral("/config.json")));
        QCOMPARE(canonical(findDefaultModel(prefix + QStringLiteral("/bin"), src, src)),
                 canonical(src + QStringLiteral("/resources/models/") + name));
        const QString found = findDefaultModel(prefix + QStringLiteral("/bin"), src, src);
        QVERIFY(QDir::isAbsolutePath(found));
    }

    // This test binary (in the build tree) finds the source tree's model.
    void thisBuildFindsTheSourceTreeModel() {
        QCOMPARE(canonical(defaultModelPath()),
                 canonical(QStringLiteral(TS_SOURCE_DIR "/resources/models/") + defaultModelName()));
    }

    // The control center and the headless `twinspark-cli serve` (engine/io/default_paths) read the same .env when
    // none is named: $TWINSPARK_ENV, ./.env, else the configuration folder Qt gives the application TwinSpark.
    void envFileRuleMatchesTheHeadlessServer() {
        const QString org = QCoreApplication::organizationName(), app = QCoreApplication::applicationName();
        const QByteArray xdg = qgetenv("XDG_CONFIG_HOME"), named = qgetenv("TWINSPARK_ENV"), home = qgetenv("HOME");
        QCoreApplication::setOrganizationName(QStringLiteral("TwinSpark"));  // as app/gui/main.cpp
        QCoreApplication::setApplicationName(QStringLiteral("TwinSpark"));
        QStandardPaths::setTestModeEnabled(false);  // only paths are computed here; nothing is written
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        const bool localEnv = QFileInfo::exists(QStringLiteral(".env"));  // then both must take ./.env
        auto same = [] { return QDir::cleanPath(EnvStore::defaultPath()) == QString::fromStdString(ts::defaultEnvPath().string()); };
        qunsetenv("TWINSPARK_ENV");
        qputenv("XDG_CONFIG_HOME", tmp.filePath(QStringLiteral("xdg")).toUtf8());
        const bool withXdg = same();
        const QString xdgPath = EnvStore::defaultPath();
        qunsetenv("XDG_CONFIG_HOME");
        qputenv("HOME", tmp.path().toUtf8());
        const bool withHome = same();
        qputenv("TWINSPARK_ENV", "/somewhere/deploy.env");
        const bool withNamed = same();
        // restore before any check can return
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(org);
        QCoreApplication::setApplicationName(app);
        for (auto [k, v] : {std::pair{"XDG_CONFIG_HOME", xdg}, std::pair{"TWINSPARK_ENV", named}, std::pair{"HOME", home}}) {
            if (v.isNull()) qunsetenv(k);
            else qputenv(k, v);
        }
        QVERIFY(withXdg);
        QVERIFY(withHome);
        QVERIFY(withNamed);
        if (!localEnv) QCOMPARE(xdgPath, tmp.filePath(QStringLiteral("xdg/TwinSpark/TwinSpark/.env")));
    }

    // --model, then MODEL_PATH, then the last model loaded (only while it still exists), then the default.
    void startupChoice() {
        QTemporaryDir tmp;
        const QString last = tmp.filePath(QStringLiteral("last"));
        makeModel(last);
        const QString def = QStringLiteral("/default");
        QCOMPARE(startupModel(QString(), QString(), QString(), def), def);
        QCOMPARE(startupModel(QStringLiteral("/cli"), QStringLiteral("/env"), last, def), QStringLiteral("/cli"));
        QCOMPARE(startupModel(QString(), QStringLiteral("/env"), last, def), QStringLiteral("/env"));
        QCOMPARE(startupModel(QStringLiteral("  "), QString(), last, def), last);
        QCOMPARE(startupModel(QString(), QString(), tmp.filePath(QStringLiteral("gone")), def), def);
        QCOMPARE(startupModel(QString(), QString(), QString(), QString()), QString());
    }

    // A fresh start (no --model, empty MODEL_PATH in a new .env, nothing saved): the window's server page gets the
    // embedded model, loads it as main() does, and the chat playground answers from it (greedy; a question the
    // model is trained on, whose answer it gives in every measured checkpoint: docs/QUALITY.md, family twinspark).
    void freshStartChatsWithTheEmbeddedModel() {
        QSettings().clear();
        QTemporaryDir dir;
        EnvStore env;
        QString error;
        QVERIFY2(env.load(dir.filePath(QStringLiteral(".env")), &error), qPrintable(error));
        QVERIFY(env.value(QStringLiteral("MODEL_PATH")).isEmpty());
        ConversationStore conversations(dir.filePath(QStringLiteral("conv")));
        EngineController controller;
        MainWindow window(&controller, &env, &conversations);
        const QString model = startupModel(QString(), env.value(QStringLiteral("MODEL_PATH")),
                                           QSettings().value(QStringLiteral("server/modelPath")).toString(), defaultModelPath());
        QCOMPARE(canonical(model), canonical(QStringLiteral(TS_SOURCE_DIR "/resources/models/") + defaultModelName()));
        window.serverPage()->setModelPath(model);
        QCOMPARE(window.serverPage()->modelPath(), model);

        GuiSpy loaded(&controller, &EngineController::modelLoaded);
        GuiSpy failed(&controller, &EngineController::loadFailed);
        window.serverPage()->loadModel();
        QTRY_VERIFY_WITH_TIMEOUT(loaded.count() + failed.count() > 0, 60000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
        const auto info = loaded.first().first().value<ModelInfo>();
        QCOMPARE(canonical(info.path), canonical(model));
        QCOMPARE(info.name, defaultModelName());
        QVERIFY(info.hasChatTemplate);
        QVERIFY(!info.randomWeights);
        QVERIFY(window.windowTitle().contains(defaultModelName()));

        window.showPage(MainWindow::Chat);
        ChatPage* chat = window.chatPage();
        QSignalSpy done(chat, &ChatPage::generationFinished);
        chat->setThinking(true);
        chat->setTemperature(0);
        chat->setMaxTokens(200);
        chat->sendMessage(QStringLiteral("What port does the TwinSpark API listen on?"));
        QVERIFY(done.wait(60000));
        const auto finish = done.first().first().value<ChatFinish>();
        QCOMPARE(finish.reason, QStringLiteral("stop"));
        const ChatMessage& answer = chat->conversation().messages.last();
        qInfo("reasoning: %s | content: %s", qPrintable(answer.reasoning), qPrintable(answer.content));
        QVERIFY2(!answer.reasoning.trimmed().isEmpty(), "thinking is on: the reasoning arrives apart");
        QVERIFY2(answer.content.contains(QStringLiteral("8888")), qPrintable(answer.content));
        QVERIFY(!answer.content.contains(QStringLiteral("<think>")) && !answer.content.contains(QStringLiteral("</think>")));
        controller.shutdown();
        QSettings().clear();
    }
};

QTEST_MAIN(TestDefaultModel)
#include "test_default_model.moc"
