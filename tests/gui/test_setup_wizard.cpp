// The setup wizard: fields are validated as the user types (the Next button follows), the recipe's
// forbidden settings cannot be picked (not with the mouse model, not with the keyboard, not through the
// API) and a forbidden value already in the file blocks writing; the .env round trip keeps comments and
// unknown keys; a missing .env is created from the bundled example; environment values are shown as
// overriding the file without being written into it; a PORT that is not a port is refused with its value and
// source (the control center's `--set PORT=` ends the run), never swapped for 8888 in silence.
#include <QtTest>

#include <QAbstractButton>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QStandardItemModel>
#include <QTemporaryDir>
#include <QTranslator>
#include <QWizardPage>

#include "control_center_process.h"
#include "ui/env_schema.h"
#include "ui/env_store.h"
#include "ui/setup_wizard.h"

using namespace ts::ui;

namespace {

QString readFile(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return QString();
    return QString::fromUtf8(f.readAll());
}

void writeFile(const QString& path, const QString& text) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(text.toUtf8());
}

const char* kUserEnv =
    "# my lab's settings\n"
    "HEAD_IP=10.0.0.1  # head\n"
    "WORKER_IP=10.0.0.2\n"
    "PORT=8888\n"
    "GHCR_USER=someone\n"
    "# keep this comment\n"
    "SKIP_DOWNLOAD=1\n";

// A .env in `dir` holding kUserEnv, loaded into `store`.
bool loadUserEnv(const QTemporaryDir& dir, EnvStore& store, QString* error) {
    writeFile(dir.filePath(".env"), kUserEnv);
    return store.load(dir.filePath(".env"), error);
}

}  // namespace

class TestSetupWizard final : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    // Every page, at the wizard's smallest size and in each language: no two of its labels and editors overlap,
    // and no word-wrapped text is cut (each label is at least as tall as its text needs at its width). The Runtime
    // page's notes under the combo boxes once overlapped in a column as narrow as the combos.
    void pagesLayOutWithoutOverlap_data() {
        QTest::addColumn<QString>("code");
        QTest::newRow("en") << "en";
        QTest::newRow("zh_CN") << "zh_CN";
        QTest::newRow("uz") << "uz";
    }
    void pagesLayOutWithoutOverlap() {
        QFETCH(QString, code);
        QTranslator tr;
        if (code != QLatin1String("en")) {
            QVERIFY(tr.load(QStringLiteral(":/i18n/twinspark_%1.qm").arg(code)));
            QCoreApplication::installTranslator(&tr);
        }
        QTemporaryDir dir;
        EnvStore store;
        QString error;
        QVERIFY2(loadUserEnv(dir, store, &error), qPrintable(error));
        {
            SetupWizard w(&store);
            w.resize(w.minimumSize());
            w.show();
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            QStringList seen;
            for (int n = 0; n < 8 && !seen.contains(w.currentPage()->title()); ++n) {
                QWizardPage* page = w.currentPage();
                seen << page->title();
                QCoreApplication::processEvents();
                QList<QWidget*> parts;
                for (QWidget* c : page->findChildren<QWidget*>())
                    if (c->isVisible() && (qobject_cast<QLabel*>(c) || qobject_cast<QComboBox*>(c) ||
                                           qobject_cast<QLineEdit*>(c) || qobject_cast<QAbstractButton*>(c)))
                        parts << c;
                auto describe = [](QWidget* c) {  // object name, and a label's first words
                    auto* l = qobject_cast<QLabel*>(c);
                    return c->objectName() + QLatin1Char(' ') + (l ? l->text().left(30) : QString());
                };
                QVERIFY(!parts.isEmpty());
                for (int i = 0; i < parts.size(); ++i) {
                    const QRect a(parts[i]->mapTo(page, QPoint(0, 0)), parts[i]->size());
                    if (auto* l = qobject_cast<QLabel*>(parts[i]); l && l->wordWrap() && !l->text().isEmpty())
                        QVERIFY2(l->height() >= l->heightForWidth(l->width()),
                                 qPrintable(QStringLiteral("%1, page %2: '%3' is cut (%4 px of %5)")
                                                .arg(code, page->title(), l->text().left(40))
                                                .arg(l->height())
                                                .arg(l->heightForWidth(l->width()))));
                    for (int j = i + 1; j < parts.size(); ++j) {
                        if (parts[i]->isAncestorOf(parts[j]) || parts[j]->isAncestorOf(parts[i])) continue;
                        const QRect b(parts[j]->mapTo(page, QPoint(0, 0)), parts[j]->size());
                        QVERIFY2(!a.intersects(b), qPrintable(QStringLiteral("%1, page %2: '%3' overlaps '%4'")
                                                                   .arg(code, page->title(), describe(parts[i]),
                                                                        describe(parts[j]))));
                    }
                }
                w.next();
            }
            QVERIFY2(seen.size() >= 6, qPrintable(seen.join(QStringLiteral(", "))));
        }
        QCoreApplication::removeTranslator(&tr);
    }

    void validatesAsYouType() {
        QTemporaryDir dir;
        EnvStore store;
        QString error;
        QVERIFY2(loadUserEnv(dir, store, &error), qPrintable(error));
        SetupWizard w(&store);
        w.show();
        w.next();  // Model page -> Nodes page (an empty model folder is only a warning)
        QCOMPARE(w.currentPage()->title(), QStringLiteral("Nodes"));
        QVERIFY(w.currentPage()->isComplete());
        auto* head = qobject_cast<QLineEdit*>(w.editor(QStringLiteral("HEAD_IP")));
        QVERIFY(head);
        head->clear();
        QTest::keyClicks(head, QStringLiteral("10.0.0.300"));
        QCOMPARE(w.verdict(QStringLiteral("HEAD_IP")).level, Verdict::Error);
        QVERIFY(!w.currentPage()->isComplete());
        QVERIFY(!w.button(QWizard::NextButton)->isEnabled());
        QVERIFY(w.messageLabel(QStringLiteral("HEAD_IP"))->isVisible());
        QVERIFY(w.messageLabel(QStringLiteral("HEAD_IP"))->text().contains(QStringLiteral("IPv4")));
        QTest::keyClick(head, Qt::Key_Backspace);
        QTest::keyClick(head, Qt::Key_Backspace);  // "10.0.0.3"
        QCOMPARE(w.verdict(QStringLiteral("HEAD_IP")).level, Verdict::Ok);
        QVERIFY(w.button(QWizard::NextButton)->isEnabled());
        // Head and worker must differ: the check crosses fields.
        w.setFieldValue(QStringLiteral("HEAD_IP"), QStringLiteral("10.0.0.2"));
        QCOMPARE(w.verdict(QStringLiteral("HEAD_IP")).level, Verdict::Error);
        QCOMPARE(w.verdict(QStringLiteral("WORKER_IP")).level, Verdict::Error);
        QVERIFY(!w.button(QWizard::NextButton)->isEnabled());
        w.setFieldValue(QStringLiteral("HEAD_IP"), QStringLiteral("10.0.0.1"));
        QVERIFY(w.button(QWizard::NextButton)->isEnabled());
        w.setFieldValue(QStringLiteral("WORKER_USER"), QStringLiteral("Bad User"));
        QVERIFY(!w.currentPage()->isComplete());
        w.setFieldValue(QStringLiteral("WORKER_USER"), QStringLiteral("spark"));
        w.setFieldValue(QStringLiteral("WORKER_HOME"), QStringLiteral("relative/home"));
        QVERIFY(!w.currentPage()->isComplete());
        w.setFieldValue(QStringLiteral("WORKER_HOME"), QStringLiteral("/home/spark"));
        QVERIFY(w.currentPage()->isComplete());
    }

    void schemaRules_data() {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("value");
        QTest::addColumn<int>("level");
        const int ok = Verdict::Ok, warn = Verdict::Warning, err = Verdict::Error;
        QTest::newRow("ip ok") << "WORKER_IP" << "192.168.10.2" << ok;
        QTest::newRow("ip loopback") << "WORKER_IP" << "127.0.0.1" << err;
        QTest::newRow("ip 5 parts") << "WORKER_IP" << "1.2.3.4.5" << err;
        QTest::newRow("ip spaces") << "WORKER_IP" << " 10.0.0.5" << err;
        QTest::newRow("port ok") << "PORT" << "8888" << ok;
        QTest::newRow("port 0") << "PORT" << "0" << err;
        QTest::newRow("port big") << "PORT" << "65536" << err;
        QTest::newRow("port text") << "PORT" << "88a" << err;
        QTest::newRow("port plus") << "PORT" << "+8080" << err;  // as serve refuses it
        QTest::newRow("port low") << "PORT" << "80" << warn;
        QTest::newRow("if ok") << "HEAD_CX7_IF" << "enp1s0f1np1" << ok;
        QTest::newRow("if empty") << "HEAD_CX7_IF" << "" << warn;
        QTest::newRow("if loopback") << "HEAD_CX7_IF" << "lo" << err;
        QTest::newRow("if alias") << "HEAD_CX7_IF" << "enp1s0:1" << err;
        QTest::newRow("if too long") << "HEAD_CX7_IF" << "abcdefghijklmnop" << err;
        QTest::newRow("if docker") << "WORKER_CX7_IF" << "docker0" << warn;
        QTest::newRow("ib ok") << "HEAD_CX7_IB" << "mlx5_0,mlx5_1:1" << ok;
        QTest::newRow("ib dup") << "HEAD_CX7_IB" << "mlx5_0,mlx5_0" << err;
        QTest::newRow("ib bad") << "WORKER_CX7_IB" << "mlx5 0" << err;
        QTest::newRow("key none") << "VLLM_API_KEY" << "" << warn;
        QTest::newRow("key short") << "VLLM_API_KEY" << "abc" << warn;
        QTest::newRow("key space") << "VLLM_API_KEY" << "abc def ghi jkl" << err;
        QTest::newRow("key ok") << "VLLM_API_KEY" << "0123456789abcdef" << ok;
        QTest::newRow("model missing") << "MODEL_PATH" << "/definitely/not/here" << err;
        QTest::newRow("model relative") << "MODEL_PATH" << "models/x" << err;
        QTest::newRow("model not ckpt") << "MODEL_PATH" << TS_SOURCE_DIR "/docs" << err;
        QTest::newRow("model ok, no tok") << "MODEL_PATH" << TS_SOURCE_DIR "/tests/golden/data/tiny_b" << warn;
        QTest::newRow("kv fp8") << "KV_CACHE_DTYPE" << "fp8" << ok;
        QTest::newRow("kv bf16") << "KV_CACHE_DTYPE" << "bf16" << err;
        QTest::newRow("kv nvfp4") << "KV_CACHE_DTYPE" << "NVFP4" << err;
        QTest::newRow("kv junk") << "KV_CACHE_DTYPE" << "int3" << err;
        // What the engine takes (runtime/runtime_settings.h), spelt as it reads it.
        QTest::newRow("kv fp32") << "KV_CACHE_DTYPE" << "fp32" << ok;
        QTest::newRow("kv fp8_ds_mla") << "KV_CACHE_DTYPE" << "fp8_ds_mla" << ok;
        QTest::newRow("kv FP8") << "KV_CACHE_DTYPE" << "FP8" << err;
        QTest::newRow("moe marlin") << "MOE_BACKEND" << "marlin" << err;
        QTest::newRow("draft triton") << "DRAFT_ATTENTION_BACKEND" << "TRITON_ATTN" << err;
    }
    void schemaRules() {
        QFETCH(QString, key);
        QFETCH(QString, value);
        QFETCH(int, level);
        const Verdict v = EnvSchema::validate(key, value);
        QCOMPARE(int(v.level), level);
        if (level != Verdict::Ok) QVERIFY(!v.message.isEmpty());
    }

    void forbiddenSettingsCannotBeChosen() {
        QTemporaryDir dir;
        writeFile(dir.filePath(".env"), kUserEnv);
        EnvStore store;
        QString error;
        QVERIFY(store.load(dir.filePath(".env"), &error));
        SetupWizard w(&store);
        w.show();
        for (const QString& key : {QStringLiteral("KV_CACHE_DTYPE"), QStringLiteral("MOE_BACKEND"),
                                  QStringLiteral("DRAFT_ATTENTION_BACKEND")}) {
            auto* combo = qobject_cast<QComboBox*>(w.editor(key));
            QVERIFY(combo);
            const QString allowed = combo->currentData().toString();
            int forbidden = 0;
            for (int i = 0; i < combo->count(); ++i) {
                const QString value = combo->itemData(i).toString();
                QString reason;
                if (!EnvSchema::isForbidden(key, value, &reason)) continue;
                ++forbidden;
                const auto* item = qobject_cast<QStandardItemModel*>(combo->model())->item(i);
                QVERIFY2(!item->isEnabled() && !item->isSelectable(), qPrintable(value));
                QVERIFY(!reason.isEmpty());
                QCOMPARE(item->toolTip(), reason);
                QVERIFY(!w.setFieldValue(key, value));  // the API refuses it too
                // And the reason is on screen, not only in a tooltip.
                auto* why = w.findChild<QLabel*>(key + QStringLiteral("_forbidden"));
                QVERIFY(why && why->text().contains(reason));
            }
            QVERIFY(forbidden >= 1);
            // The keyboard skips disabled items: the selection never lands on a forbidden value.
            combo->setFocus();
            for (auto k : {Qt::Key_Down, Qt::Key_Down, Qt::Key_End, Qt::Key_PageDown, Qt::Key_Up, Qt::Key_Home}) {
                QTest::keyClick(combo, k);
                QVERIFY2(!EnvSchema::isForbidden(key, combo->currentData().toString()), qPrintable(key));
            }
            QCOMPARE(combo->currentData().toString(), allowed);
        }
        QVERIFY(w.allValid());
    }

    void forbiddenValueInFileBlocksWriting() {
        QTemporaryDir dir;
        writeFile(dir.filePath(".env"), QStringLiteral("KV_CACHE_DTYPE=bf16\n"));
        EnvStore store;
        QString error;
        QVERIFY(store.load(dir.filePath(".env"), &error));
        SetupWizard w(&store);
        QCOMPARE(w.fieldValue(QStringLiteral("KV_CACHE_DTYPE")), QStringLiteral("bf16"));
        QCOMPARE(w.verdict(QStringLiteral("KV_CACHE_DTYPE")).level, Verdict::Error);
        QVERIFY(w.verdict(QStringLiteral("KV_CACHE_DTYPE")).message.contains(QStringLiteral("sparse MLA")));
        QVERIFY(!w.allValid());
        QVERIFY(!w.writeEnv(&error));
        QCOMPARE(readFile(dir.filePath(".env")), QStringLiteral("KV_CACHE_DTYPE=bf16\n"));  // untouched
        QVERIFY(w.setFieldValue(QStringLiteral("KV_CACHE_DTYPE"), QStringLiteral("fp8")));
        QVERIFY(w.allValid());
        QVERIFY2(w.writeEnv(&error), qPrintable(error));
        QVERIFY(readFile(dir.filePath(".env")).startsWith(QStringLiteral("KV_CACHE_DTYPE=fp8\n")));
    }

    void envRoundTripKeepsCommentsAndUnknownKeys() {
        QTemporaryDir dir;
        const QString path = dir.filePath(".env");
        writeFile(path, kUserEnv);
        EnvStore store;
        QString error;
        QVERIFY(store.load(path, &error));
        QVERIFY(!store.created());
        SetupWizard w(&store);
        QSignalSpy written(&w, &SetupWizard::envWritten);
        QVERIFY(w.setFieldValue(QStringLiteral("HEAD_IP"), QStringLiteral("192.168.100.1")));
        QVERIFY(w.setFieldValue(QStringLiteral("WORKER_IP"), QStringLiteral("192.168.100.2")));
        QVERIFY(w.setFieldValue(QStringLiteral("PORT"), QStringLiteral("9000")));
        QVERIFY(w.setFieldValue(QStringLiteral("WORKER_USER"), QStringLiteral("spark")));
        QVERIFY(w.setFieldValue(QStringLiteral("HEAD_CX7_IF"), QStringLiteral("enp1s0f1np1")));
        QVERIFY(w.setFieldValue(QStringLiteral("VLLM_API_KEY"), QStringLiteral("key with 'quote' and spaces")));
        QVERIFY(!w.allValid());  // spaces in a key are refused
        QVERIFY(w.setFieldValue(QStringLiteral("VLLM_API_KEY"), QStringLiteral("ts-0123456789abcdef")));
        QVERIFY2(w.writeEnv(&error), qPrintable(error));
        QCOMPARE(written.count(), 1);
        const QString out = readFile(path);
        QVERIFY2(out.startsWith(QStringLiteral("# my lab's settings\nHEAD_IP=192.168.100.1  # head\n"
                                               "WORKER_IP=192.168.100.2\nPORT=9000\nGHCR_USER=someone\n"
                                               "# keep this comment\nSKIP_DOWNLOAD=1\n")),
                 qPrintable(out));
        QVERIFY(out.contains(QStringLiteral("\nWORKER_USER=spark\n")));
        QVERIFY(out.contains(QStringLiteral("\nHEAD_CX7_IF=enp1s0f1np1\n")));
        QVERIFY(out.contains(QStringLiteral("\nVLLM_API_KEY=ts-0123456789abcdef\n")));
        QVERIFY(out.contains(QStringLiteral("\nKV_CACHE_DTYPE=fp8\n")));
        QVERIFY(!out.contains(QStringLiteral("WORKER_HOME")));  // empty and never in the file: left out
        // Read back: the same values.
        EnvStore again;
        QVERIFY(again.load(path, &error));
        QCOMPARE(again.value(QStringLiteral("PORT")), QStringLiteral("9000"));
        QCOMPARE(again.value(QStringLiteral("GHCR_USER")), QStringLiteral("someone"));
        QVERIFY(again.problems().isEmpty());
    }

    void missingEnvIsCreatedFromTheExample() {
        QTemporaryDir dir;
        const QString path = dir.filePath("sub/.env");
        EnvStore store;
        QString error;
        QVERIFY2(store.load(path, &error), qPrintable(error));
        QVERIFY(store.created());
        QCOMPARE(readFile(path), readFile(TS_SOURCE_DIR "/resources/.env.example"));
        QCOMPARE(QFile::permissions(path) & QFileDevice::ReadOther, QFileDevice::Permissions());
        SetupWizard w(&store);
        QCOMPARE(w.fieldValue(QStringLiteral("HEAD_IP")), QStringLiteral("10.0.0.1"));
        QCOMPARE(w.fieldValue(QStringLiteral("PORT")), QStringLiteral("8888"));
        QCOMPARE(w.fieldValue(QStringLiteral("KV_CACHE_DTYPE")), QStringLiteral("fp8"));
        QVERIFY(w.allValid());
    }

    void environmentAndCommandLineOverrideTheFile() {
        QTemporaryDir dir;
        const QString path = dir.filePath(".env");
        writeFile(path, kUserEnv);
        qputenv("PORT", "9999");
        EnvStore store;
        store.setCommandLineOverrides({{QStringLiteral("HEAD_IP"), QStringLiteral("10.9.9.9")}});
        store.readEnvironmentOverrides();
        QString error;
        QVERIFY(store.load(path, &error));
        QCOMPARE(store.value(QStringLiteral("PORT")), QStringLiteral("9999"));
        QCOMPARE(store.overrideSource(QStringLiteral("PORT")), QStringLiteral("environment"));
        QCOMPARE(store.value(QStringLiteral("HEAD_IP")), QStringLiteral("10.9.9.9"));
        QCOMPARE(store.overrideSource(QStringLiteral("HEAD_IP")), QStringLiteral("command line"));
        SetupWizard w(&store);
        // The editor holds the file's value; the override is explained next to it.
        QCOMPARE(w.fieldValue(QStringLiteral("PORT")), QStringLiteral("8888"));
        bool explained = false;
        for (QLabel* l : w.findChildren<QLabel*>())
            explained = explained || (l->text().contains(QStringLiteral("9999")) && l->text().contains(QStringLiteral("environment")));
        QVERIFY(explained);
        QVERIFY(w.writeEnv(&error));
        const QString out = readFile(path);
        QVERIFY(out.contains(QStringLiteral("\nPORT=8888\n")));  // the override is not written into the file
        QVERIFY(out.contains(QStringLiteral("HEAD_IP=10.0.0.1  # head")));
        qunsetenv("PORT");
    }

    // The API port the control center starts with: a PORT that is not a port is reported with its value and
    // source (never replaced in silence by 8888); unset or empty means the recipe's 8888.
    void apiPortRefusesWhatIsNotAPort() {
        QTemporaryDir dir;
        const QString path = dir.filePath(".env");
        auto portOf = [&](const QString& fileLine, const QMap<QString, QString>& cli, const char* envPort, QString* problem) {
            writeFile(path, QStringLiteral("HEAD_IP=10.0.0.1\n") + fileLine);
            if (envPort) qputenv("PORT", envPort);
            else qunsetenv("PORT");
            EnvStore store;
            store.setCommandLineOverrides(cli);
            store.readEnvironmentOverrides();
            QString error;
            [&] { QVERIFY2(store.load(path, &error), qPrintable(error)); }();
            problem->clear();
            const int port = store.apiPort(problem);
            qunsetenv("PORT");
            return port;
        };
        QString problem;
        QCOMPARE(portOf(QString(), {}, nullptr, &problem), 8888);
        QVERIFY(problem.isEmpty());
        QCOMPARE(portOf(QStringLiteral("PORT=\n"), {}, nullptr, &problem), 8888);
        QCOMPARE(portOf(QStringLiteral("PORT=9000\n"), {}, nullptr, &problem), 9000);
        QCOMPARE(portOf(QStringLiteral("PORT=80\n"), {}, nullptr, &problem), 80);  // a warning in the wizard, usable
        QVERIFY(problem.isEmpty());
        // (An unquoted "PORT=88 88" is not an assignment at all: the file's problems list shows that line.)
        for (const char* bad : {"abc", "0", "65536", "-1", "'88 88'", "8888x"}) {
            QCOMPARE(portOf(QStringLiteral("PORT=%1\n").arg(QLatin1String(bad)), {}, nullptr, &problem), 0);
            QVERIFY2(problem.contains(QLatin1String(bad)) && problem.contains(path), qPrintable(problem));
        }
        QCOMPARE(portOf(QStringLiteral("PORT=9000\n"), {}, "http", &problem), 0);
        QVERIFY2(problem.contains(QStringLiteral("'http'")) && problem.contains(QStringLiteral("environment")), qPrintable(problem));
        QCOMPARE(portOf(QStringLiteral("PORT=9000\n"), {{QStringLiteral("PORT"), QStringLiteral("x1")}}, "9100", &problem), 0);
        QVERIFY2(problem.contains(QStringLiteral("'x1'")) && problem.contains(QStringLiteral("command line")), qPrintable(problem));
        QCOMPARE(portOf(QStringLiteral("PORT=abc\n"), {{QStringLiteral("PORT"), QStringLiteral("9200")}}, nullptr, &problem), 9200);
    }

    // The control center itself: `--set PORT=` with something that is not a port ends the run with exit 2 and
    // says why, before any window or model (as `twinspark-cli serve --port` does).
    void controlCenterRefusesABadPortOnTheCommandLine() {
        const QString err = refusalOf({QStringLiteral("--set"), QStringLiteral("PORT=88o8")});
        QVERIFY2(err.contains(QStringLiteral("PORT '88o8'")) && err.contains(QStringLiteral("command line")), qPrintable(err));
    }
};

QTEST_MAIN(TestSetupWizard)
#include "test_setup_wizard.moc"
