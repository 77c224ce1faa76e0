// The .ts catalogues are compiled into the app (qt_add_translations, embedded under :/i18n) and the
// main navigation is really translated into Chinese and Uzbek.
#include <QtTest>

#include <QListWidget>
#include <QTemporaryDir>
#include <QTranslator>

#include "ui/conversation_store.h"
#include "ui/engine_controller.h"
#include "ui/env_store.h"
#include "ui/main_window.h"
#include "ui/translations.h"

using namespace ts::ui;

class TestTranslations final : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    void catalogsAreEmbedded() {
        for (const char* code : {"en", "zh_CN", "uz"})
            QVERIFY2(QFile::exists(QStringLiteral(":/i18n/twinspark_%1.qm").arg(QLatin1String(code))), code);
        QCOMPARE(availableLanguages().size(), 3);
        QCOMPARE(chooseLanguage(QStringLiteral("uz")), QStringLiteral("uz"));
        QCOMPARE(chooseLanguage(QStringLiteral("xx")), QStringLiteral("en"));
    }

    void navigationIsTranslated_data() {
        QTest::addColumn<QString>("code");
        QTest::addColumn<QStringList>("pages");
        QTest::newRow("zh_CN") << "zh_CN" << QStringList{"服务器", "仪表板", "聊天", "设置"};
        QTest::newRow("uz") << "uz" << QStringList{"Server", "Boshqaruv paneli", "Suhbat", "Sozlash"};
    }
    void navigationIsTranslated() {
        QFETCH(QString, code);
        QFETCH(QStringList, pages);
        QTranslator tr;
        QVERIFY(tr.load(QStringLiteral(":/i18n/twinspark_%1.qm").arg(code)));
        QCoreApplication::installTranslator(&tr);
        QTemporaryDir dir;
        EnvStore env;
        QString error;
        QVERIFY(env.load(dir.filePath(".env"), &error));
        ConversationStore conversations(dir.filePath("conv"));
        EngineController controller;
        {
            MainWindow w(&controller, &env, &conversations);
            auto* nav = w.findChild<QListWidget*>(QStringLiteral("navigation"));
            QVERIFY(nav);
            QStringList shown;
            for (int i = 0; i < nav->count(); ++i) shown << nav->item(i)->text();
            QCOMPARE(shown, pages);
        }
        QCoreApplication::removeTranslator(&tr);
        controller.shutdown();
    }
};

QTEST_MAIN(TestTranslations)
#include "test_translations.moc"
