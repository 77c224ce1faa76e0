// The .ts catalogues are compiled into the app (qt_add_translations, embedded under :/i18n) and the
// main navigation is really translated into Chinese and Uzbek. The catalogues are whole and current: every
// tr() string of the control center (re-extracted here with lupdate) is in them, every one has a Chinese and an
// Uzbek translation, and each translation keeps its source's placeholders (%1, %n), rich-text tags and
// keyboard mnemonic — a lost %1 would show a raw placeholder, a lost tag raw markup. `--lang` takes the usual
// spellings of a language (zh, zh-CN, uz_UZ) and refuses one without a catalogue.
#include <QtTest>

#include <QMultiMap>
#include <QProcess>
#include <QRegularExpression>
#include <QXmlStreamReader>

#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QFontInfo>
#include <QGuiApplication>
#include <QListWidget>
#include <QPushButton>
#include <QStackedWidget>
#include <QTemporaryDir>
#include <QTranslator>

#include "control_center_process.h"
#include "ui/conversation_store.h"
#include "ui/engine_controller.h"
#include "ui/env_store.h"
#include "ui/main_window.h"
#include "ui/translations.h"

using namespace ts::ui;

namespace {

struct CatalogMessage {
    QString context;
    QString source;
    QStringList translations;  // one, or the numerus forms
    bool unfinished = false;
};

// The messages of a Qt Linguist .ts file; empty with *error on a read or XML error.
QList<CatalogMessage> readCatalog(const QString& path, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        *error = QStringLiteral("cannot open %1").arg(path);
        return {};
    }
    QList<CatalogMessage> out;
    QXmlStreamReader xml(&f);
    QString context;
    CatalogMessage* cur = nullptr;
    while (!xml.atEnd()) {
        xml.readNext();
        if (!xml.isStartElement()) continue;
        const auto name = xml.name();
        if (name == QLatin1String("name") && !cur) {
            context = xml.readElementText();
        } else if (name == QLatin1String("message")) {
            out.append(CatalogMessage{context, {}, {}, false});
            cur = &out.last();
        } else if (name == QLatin1String("source") && cur) {
            cur->source = xml.readElementText();
        } else if (name == QLatin1String("translation") && cur) {
            const auto type = xml.attributes().value(QLatin1String("type"));
            cur->unfinished = type == QLatin1String("unfinished");
            // A numerus message holds <numerusform> children; a plain one its text.
            QString text;
            bool numerus = false;
            while (!(xml.isEndElement() && xml.name() == QLatin1String("translation")) && !xml.atEnd()) {
                xml.readNext();
                if (xml.isStartElement() && xml.name() == QLatin1String("numerusform")) {
                    numerus = true;
                    cur->translations << xml.readElementText();
                } else if (xml.isCharacters()) {
                    text += xml.text();
                }
            }
            if (!numerus) cur->translations << text;
            cur = nullptr;
        }
    }
    if (xml.hasError()) {
        *error = QStringLiteral("%1: %2 at line %3").arg(path, xml.errorString()).arg(xml.lineNumber());
        return {};
    }
    return out;
}

// What a translation must carry over from its source, sorted: placeholders and rich-text tags.
QStringList carried(const QString& text) {
    static const QRegularExpression re(QStringLiteral(R"(%L?\d|%n|</?[a-zA-Z][^>]*>)"));
    QStringList out;
    for (auto it = re.globalMatch(text); it.hasNext();) out << it.next().captured(0);
    out.sort();
    return out;
}

// Keyboard mnemonics: '&' before a character other than '&' or space ("&&" is a literal ampersand).
int mnemonics(const QString& text) {
    int n = 0;
    for (qsizetype i = 0; i + 1 < text.size(); ++i) {
        if (text[i] != QLatin1Char('&')) continue;
        if (text[i + 1] == QLatin1Char('&')) ++i;
        else if (!text[i + 1].isSpace()) ++n;
    }
    return n;
}

}  // namespace

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
        QCOMPARE(chooseLanguage(QStringLiteral("zh")), QStringLiteral("zh_CN"));
    }

    void languageSpellings() {
        for (const char* s : {"zh_CN", "zh", "zh-CN", "ZH_cn", "zh-Hans", "zh_Hans_CN"}) QCOMPARE(normalizeLanguage(QLatin1String(s)), QStringLiteral("zh_CN"));
        for (const char* s : {"uz", "uz_UZ", "uz-Latn", "UZ"}) QCOMPARE(normalizeLanguage(QLatin1String(s)), QStringLiteral("uz"));
        for (const char* s : {"en", "en_US", "en-GB", " en "}) QCOMPARE(normalizeLanguage(QLatin1String(s)), QStringLiteral("en"));
        // Traditional Chinese and languages without a catalogue name none of ours.
        for (const char* s : {"zh_TW", "zh-Hant", "ru", "", "uzbek", "z"}) QVERIFY2(normalizeLanguage(QLatin1String(s)).isEmpty(), s);
    }

    // The control center refuses a --lang it has no catalogue for (exit 2, and says which it has), before any window.
    void controlCenterRefusesAnUnknownLanguage() {
        const QString err = refusalOf({QStringLiteral("--lang"), QStringLiteral("zh_TW")});
        QVERIFY2(err.contains(QStringLiteral("'zh_TW'")) && err.contains(QStringLiteral("zh_CN")), qPrintable(err));
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
            // The page starts right after the list (the splitter's handle between them), not after a blank band.
            w.resize(1024, 700);
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            auto* stack = w.findChild<QStackedWidget*>();
            QVERIFY(stack);
            const int gap = stack->mapTo(&w, QPoint(0, 0)).x() - (nav->mapTo(&w, QPoint(0, 0)).x() + nav->width());
            QVERIFY2(gap >= 0 && gap <= 16, qPrintable(QString::number(gap)));
        }
        QCoreApplication::removeTranslator(&tr);
        controller.shutdown();
    }

    // Qt's own strings — the wizard's and the message boxes' buttons — come from the system's Qt catalogues
    // (qt6-translations-l10n, which scripts/install-deps.sh installs): in Chinese the buttons are Chinese too.
    // (Qt has no Uzbek catalogue: there they stay English.)
    void qtOwnButtonsAreTranslated() {
        QVERIFY(installTranslations(qApp, QStringLiteral("zh_CN")));
        const auto installed = qApp->findChildren<QTranslator*>(QString(), Qt::FindDirectChildrenOnly);
        QDialogButtonBox box(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
        const QString cancel = box.button(QDialogButtonBox::Cancel)->text();
        for (QTranslator* t : installed) {
            QCoreApplication::removeTranslator(t);
            delete t;
        }
        QVERIFY2(cancel == QStringLiteral("取消"),
                 qPrintable(QStringLiteral("the Cancel button reads '%1': is qtbase_zh_CN.qm there (qt6-translations-l10n, "
                                           "scripts/install-deps.sh)?").arg(cancel)));
    }

    // In Chinese the application font has Chinese glyphs (fonts-wqy-microhei, which scripts/install-deps.sh installs,
    // when the desktop's default has none); other languages keep the default font.
    void chineseGetsAFontWithChineseGlyphs() {
        const QFont before = QGuiApplication::font();
        QCOMPARE(applyLanguageFont(QStringLiteral("uz")), QFontInfo(before).family());
        QCOMPARE(QGuiApplication::font(), before);
        const QString family = applyLanguageFont(QStringLiteral("zh_CN"));
        const QFont after = QGuiApplication::font();
        QGuiApplication::setFont(before);
        QVERIFY2(!family.isEmpty(), "no installed font covers Simplified Chinese: install fonts-wqy-microhei (scripts/install-deps.sh)");
        QVERIFY2(QFontDatabase::writingSystems(QFontInfo(after).family()).contains(QFontDatabase::SimplifiedChinese),
                 qPrintable(QFontInfo(after).family()));
        QCOMPARE(after.pointSizeF(), before.pointSizeF());
    }

    void catalogIsComplete_data() {
        QTest::addColumn<QString>("code");
        QTest::newRow("zh_CN") << "zh_CN";
        QTest::newRow("uz") << "uz";
    }
    void catalogIsComplete() {
        QFETCH(QString, code);
        QString error;
        const auto messages = readCatalog(QStringLiteral(TS_SOURCE_DIR "/translations/twinspark_%1.ts").arg(code), &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QVERIFY(messages.size() > 200);
        QStringList problems;
        for (const CatalogMessage& m : messages) {
            const QString where = m.context + QStringLiteral(": \"") + m.source + QLatin1Char('"');
            if (m.unfinished || m.translations.isEmpty()) {
                problems << QStringLiteral("untranslated: ") + where;
                continue;
            }
            for (const QString& t : m.translations) {
                if (t.trimmed().isEmpty() && !m.source.trimmed().isEmpty())
                    problems << QStringLiteral("empty: ") + where;
                else if (carried(t) != carried(m.source))
                    problems << QStringLiteral("placeholders or tags differ (%1 vs %2): ")
                                        .arg(carried(t).join(QLatin1Char(' ')), carried(m.source).join(QLatin1Char(' '))) +
                                    where;
                else if (mnemonics(t) != mnemonics(m.source))
                    problems << QStringLiteral("mnemonic lost or doubled: ") + where;
            }
        }
        QVERIFY2(problems.isEmpty(), qPrintable(QStringLiteral("%1 problem(s), first ones:\n").arg(problems.size()) +
                                                problems.mid(0, 20).join(QLatin1Char('\n'))));
    }

    // Every tr() string of ts_ui and the app, as lupdate extracts it now, is in the catalogues (a new string must be
    // added with `cmake --build build --target update_translations` and translated; catalogIsComplete then holds it).
    void catalogsFollowTheCode() {
        QTemporaryDir dir;
        const QString fresh = dir.filePath(QStringLiteral("fresh.ts"));
        QProcess lupdate;
        lupdate.setProcessChannelMode(QProcess::MergedChannels);
        lupdate.start(QStringLiteral(TS_LUPDATE), {QStringLiteral(TS_SOURCE_DIR "/ui"), QStringLiteral(TS_SOURCE_DIR "/app/gui/main.cpp"),
                                                  QStringLiteral("-ts"), fresh, QStringLiteral("-no-obsolete"),
                                                  QStringLiteral("-locations"), QStringLiteral("none")});
        QVERIFY(lupdate.waitForFinished(120000));
        QVERIFY2(lupdate.exitStatus() == QProcess::NormalExit && lupdate.exitCode() == 0, lupdate.readAll().constData());
        QString error;
        const auto extracted = readCatalog(fresh, &error);
        QVERIFY2(error.isEmpty(), qPrintable(error));
        QVERIFY(extracted.size() > 200);
        for (const char* code : {"en", "zh_CN", "uz"}) {
            const auto catalog = readCatalog(QStringLiteral(TS_SOURCE_DIR "/translations/twinspark_%1.ts").arg(QLatin1String(code)), &error);
            QVERIFY2(error.isEmpty(), qPrintable(error));
            // By source text: lupdate run on files alone qualifies the contexts differently (no include paths).
            QSet<QString> have;
            for (const CatalogMessage& m : catalog) have.insert(m.source);
            QStringList missing;
            for (const CatalogMessage& m : extracted)
                if (!have.contains(m.source)) missing << m.source;
            QVERIFY2(missing.isEmpty(), qPrintable(QStringLiteral("twinspark_%1.ts lacks %2 string(s) of the code, e.g. \"%3\"")
                                                       .arg(QLatin1String(code)).arg(missing.size()).arg(missing.value(0))));
        }
    }
};

QTEST_MAIN(TestTranslations)
#include "test_translations.moc"
