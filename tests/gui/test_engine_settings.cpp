// The control center's engine settings come from the deployment .env as `twinspark-cli serve` reads them: the
// recipe's runtime block (MAX_NUM_SEQS, MAX_NUM_BATCHED_TOKENS, MAX_MODEL_LEN, GPU_MEM_UTIL, KV_CACHE_DTYPE),
// TS_KV_BUDGET_MIB and SKIP_OVERLAY_VERIFY, with the command line over the environment over the file, and an
// empty environment variable counting as unset. A value that is not usable is named with where it came from,
// and the model is not loaded with a default in its place; `serve` refuses the same value.
#include <QCheckBox>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QtTest>

#include <arpa/inet.h>
#include <optional>
#include <atomic>
#include <thread>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include "../common/cli_runner.h"
#include "../common/comma_locale.h"
#include "../common/free_port.h"
#include "control_center_process.h"
#include "gui_spy.h"
#include "ui/api_server.h"
#include "ui/engine_controller.h"
#include "ui/engine_settings.h"
#include "ui/env_store.h"
#include "ui/server_page.h"

using namespace ts::ui;

namespace {

// Every key these tests set in the process environment (cleared after each; the developer's shell may hold some).
const QStringList kKeys = {QStringLiteral("MAX_NUM_SEQS"),     QStringLiteral("MAX_NUM_BATCHED_TOKENS"),
                           QStringLiteral("MAX_MODEL_LEN"),    QStringLiteral("GPU_MEM_UTIL"),
                           QStringLiteral("KV_CACHE_DTYPE"),   QStringLiteral("TS_KV_BUDGET_MIB"),
                           QStringLiteral("SKIP_OVERLAY_VERIFY"), QStringLiteral("TS_MAX_CONCURRENT_REQUESTS"),
                           QStringLiteral("TWINSPARK_BACKEND"),   QStringLiteral("VLLM_API_KEY")};

void writeFile(const QString& path, const QString& text) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(text.toUtf8());
}

using ts::test::freePort;

// The in-process API's twinspark:http_generation_requests_in_flight from a /metrics text (-1 when absent).
int inFlight(const std::string& metrics) {
    const std::string name = "twinspark:http_generation_requests_in_flight{";
    const size_t at = metrics.find(name);
    if (at == std::string::npos) return -1;
    const size_t value = metrics.find("} ", at);
    return value == std::string::npos ? -1 : std::atoi(metrics.c_str() + value + 2);
}

void clearEnvironment() {
    for (const QString& k : kKeys) qunsetenv(qPrintable(k));
}

// An EnvStore over a .env holding `fileText`, with `environment` exported and `cli` as --set values.
struct Store {
    QTemporaryDir dir;
    EnvStore env;
    QString path;
    Store(const QString& fileText, const QMap<QString, QString>& environment = {}, const QMap<QString, QString>& cli = {}) {
        path = dir.filePath(QStringLiteral(".env"));
        writeFile(path, fileText);
        clearEnvironment();
        for (auto it = environment.begin(); it != environment.end(); ++it) qputenv(qPrintable(it.key()), it.value().toUtf8());
        env.setCommandLineOverrides(cli);
        env.readEnvironmentOverrides();
        clearEnvironment();  // EnvStore has read them; nothing else in this process should
        QString error;
        [&] { QVERIFY2(env.load(path, &error), qPrintable(error)); }();
    }
};

const QString kRuntimeEnv = QStringLiteral(
    "PORT=8888\n"
    "MAX_NUM_SEQS=2\n"
    "MAX_NUM_BATCHED_TOKENS=512\n"
    "MAX_MODEL_LEN=4096\n"
    "GPU_MEM_UTIL=0.5\n"
    "KV_CACHE_DTYPE=fp32\n"
    "TS_KV_BUDGET_MIB=256\n"
    "SKIP_OVERLAY_VERIFY=1\n"
    "TWINSPARK_BACKEND=cpu\n");

// A Server page over its own controller (with the in-process API) that reads `env`; load() loads the chat model.
struct PageUnderTest {
    EngineController controller;
    ServerPage page{&controller};
    explicit PageUnderTest(EnvStore& env) {
        controller.setApiServer(makeApiServer());
        page.setEnvStore(&env);
        page.setModelPath(QStringLiteral(TS_GUI_CHAT_MODEL));
    }
    ~PageUnderTest() { controller.shutdown(); }
    // The loaded model's info, or nullopt when none came within a minute.
    std::optional<ModelInfo> load() {
        GuiSpy loaded(&controller, &EngineController::modelLoaded);
        page.loadModel();
        if (!loaded.wait(60000)) return std::nullopt;
        return loaded.first().at(0).value<ModelInfo>();
    }
    template <class W>
    W* child(const char* name) const {
        return page.findChild<W*>(QLatin1String(name));
    }
    QString log() const { return child<QPlainTextEdit>("log")->toPlainText(); }
};

}  // namespace

class TestEngineSettings : public QObject {
    Q_OBJECT

private slots:
    void cleanup() { clearEnvironment(); }

    // Unset and empty keys take the recipe's defaults (what `serve` takes without them).
    void unsetOrEmptyKeysAreTheRecipesDefaults() {
        for (const QString& text : {QStringLiteral("PORT=8888\n"),
                                    QStringLiteral("MAX_NUM_SEQS=\nGPU_MEM_UTIL=\nKV_CACHE_DTYPE=\nMAX_MODEL_LEN=\n")}) {
            Store s(text);
            const EngineSettings e = engineSettings(s.env);
            QVERIFY2(e.problems.isEmpty(), qPrintable(e.problems.values().join('\n')));
            QCOMPARE(e.options.maxNumSeqs, 4);
            QCOMPARE(e.options.maxNumBatchedTokens, qint64(1024));
            QCOMPARE(e.options.maxModelLen, qint64(900000));
            QCOMPARE(e.options.gpuMemUtil, 0.87);
            QCOMPARE(e.options.kvFp32, false);
            QCOMPARE(e.options.kvBudgetMiB, qint64(2048));
            QCOMPARE(e.options.skipGpuSelftest, false);
            QCOMPARE(e.options.backend, QStringLiteral("auto"));
        }
    }

    void theFilesValuesAreRead() {
        Store s(kRuntimeEnv);
        const EngineSettings e = engineSettings(s.env);
        QVERIFY2(e.problems.isEmpty(), qPrintable(e.problems.values().join('\n')));
        QCOMPARE(e.options.maxNumSeqs, 2);
        QCOMPARE(e.options.maxNumBatchedTokens, qint64(512));
        QCOMPARE(e.options.maxModelLen, qint64(4096));
        QCOMPARE(e.options.gpuMemUtil, 0.5);
        QCOMPARE(e.options.kvFp32, true);
        QCOMPARE(e.options.kvBudgetMiB, qint64(256));
        QCOMPARE(e.options.skipGpuSelftest, true);
        QCOMPARE(e.maxConcurrentRequests, 64);
        QCOMPARE(e.options.backend, QStringLiteral("cpu"));
        // fp8_ds_mla is the recipe's name for fp8.
        Store ds(QStringLiteral("KV_CACHE_DTYPE=fp8_ds_mla\n"));
        QCOMPARE(engineSettings(ds.env).options.kvFp32, false);
    }

    // The environment wins over the file and --set over both; an empty environment variable leaves the file's
    // value standing (as in `serve`), for these keys and the setup fields' alike.
    void precedenceAndEmptyVariables() {
        Store env(kRuntimeEnv, {{QStringLiteral("MAX_NUM_SEQS"), QStringLiteral("3")}});
        QCOMPARE(engineSettings(env.env).options.maxNumSeqs, 3);
        Store cli(kRuntimeEnv, {{QStringLiteral("MAX_NUM_SEQS"), QStringLiteral("3")}},
                  {{QStringLiteral("MAX_NUM_SEQS"), QStringLiteral("5")}});
        QCOMPARE(engineSettings(cli.env).options.maxNumSeqs, 5);
        Store empty(kRuntimeEnv + QStringLiteral("VLLM_API_KEY=secret\n"),
                    {{QStringLiteral("MAX_MODEL_LEN"), QString()}, {QStringLiteral("VLLM_API_KEY"), QString()}});
        QCOMPARE(engineSettings(empty.env).options.maxModelLen, qint64(4096));
        QVERIFY(!empty.env.isOverridden(QStringLiteral("MAX_MODEL_LEN")));
        QCOMPARE(empty.env.value(QStringLiteral("VLLM_API_KEY")), QStringLiteral("secret"));
    }

    // Each unusable value is reported with its key, its value and where it came from; nothing stands in for it.
    void unusableValuesAreNamed_data() {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("accepted");  // a phrase of the message
        QTest::newRow("seqs 0") << "MAX_NUM_SEQS" << "0" << "from 1 to 4096";
        QTest::newRow("seqs text") << "MAX_NUM_SEQS" << "four" << "from 1 to 4096";
        QTest::newRow("seqs too many") << "MAX_NUM_SEQS" << "5000" << "from 1 to 4096";
        QTest::newRow("batched tokens") << "MAX_NUM_BATCHED_TOKENS" << "1k" << "from 1 to 16777216";
        QTest::newRow("model len 1") << "MAX_MODEL_LEN" << "1" << "from 2 to 2147483648";
        QTest::newRow("model len float") << "MAX_MODEL_LEN" << "4096.5" << "from 2 to 2147483648";
        QTest::newRow("budget") << "TS_KV_BUDGET_MIB" << "-5" << "from 1 to 4194304";
        QTest::newRow("concurrent requests") << "TS_MAX_CONCURRENT_REQUESTS" << "0" << "from 1 to 4096";
        QTest::newRow("seqs plus") << "MAX_NUM_SEQS" << "+4" << "from 1 to 4096";
        QTest::newRow("mem util 0") << "GPU_MEM_UTIL" << "0" << "at most 1";
        QTest::newRow("mem util pct") << "GPU_MEM_UTIL" << "87%" << "at most 1";
        QTest::newRow("mem util big") << "GPU_MEM_UTIL" << "1.5" << "at most 1";
        QTest::newRow("kv bf16") << "KV_CACHE_DTYPE" << "bf16" << "sparse MLA kernels";
        QTest::newRow("kv nvfp4") << "KV_CACHE_DTYPE" << "nvfp4" << "sparse MLA kernels";
        QTest::newRow("kv other") << "KV_CACHE_DTYPE" << "int4" << "give fp8";
        QTest::newRow("backend") << "TWINSPARK_BACKEND" << "gpu" << "give auto, cpu or cuda";
    }
    void unusableValuesAreNamed() {
        QFETCH(QString, key);
        QFETCH(QString, value);
        QFETCH(QString, accepted);
        // In the file ...
        Store file(kRuntimeEnv + key + QLatin1Char('=') + value + QLatin1Char('\n'));
        EngineSettings e = engineSettings(file.env);
        QCOMPARE(e.problems.size(), 1);
        QString p = e.problems.first();
        QVERIFY2(p.startsWith(QStringLiteral("%1 '%2'").arg(key, value)) && p.contains(file.path) && p.contains(accepted),
                 qPrintable(p));
        // ... from the environment (the file's good value does not stand in) ...
        Store env(kRuntimeEnv, {{key, value}});
        e = engineSettings(env.env);
        QCOMPARE(e.problems.size(), 1);
        QVERIFY2(e.problems.first().contains(QStringLiteral("(from environment)")), qPrintable(e.problems.first()));
        // ... and `serve` refuses the same value from the same file, before loading anything, naming the key.
        const ts::test::CliRun r = ts::test::runCli({QStringLiteral("serve"), QStringLiteral("--env"), file.path,
                                                     QStringLiteral("--port"), QStringLiteral("0"),
                                                     QStringLiteral("--model"), QStringLiteral("/nonexistent-model")});
        const bool refusal = r.err.contains(QStringLiteral("(or %1) must be").arg(key)) ||
                             r.err.contains(QStringLiteral("(or %1) '%2' is refused").arg(key, value));
        QVERIFY2(r.code == 2 && refusal && r.err.contains(QStringLiteral("'%1'").arg(value)) &&
                     !r.err.contains(QStringLiteral("listening on")),
                 qPrintable(r.err));
    }

    // The Server page starts its KV budget and parallel requests at the .env's values; a load reads the rest
    // from it, and the engine gets them (the controller's log and the model's limits say so).
    void serverPageLoadsWithTheEnvsSettings() {
        Store s(QStringLiteral("MAX_NUM_SEQS=3\nMAX_MODEL_LEN=4096\nTS_KV_BUDGET_MIB=96\nMAX_NUM_BATCHED_TOKENS=256\n"));
        PageUnderTest t(s.env);
        QCOMPARE(t.child<QSpinBox>("maxSeqs")->value(), 3);
        QCOMPARE(t.child<QSpinBox>("kvBudget")->value(), 96);
        const auto info = t.load();
        QVERIFY(info);
        QCOMPARE(info->maxModelLen, qint64(4096));
        QVERIFY2(t.log().contains(QStringLiteral("Engine: up to 3 sequences at once, 256 tokens per step, 4096 tokens "
                                                 "per request at most, KV cache fp8")),
                 qPrintable(t.log()));
    }

    // A bad value stops the load before anything is asked of the engine, and the page says which and why.
    void serverPageRefusesToLoadWithABadValue() {
        Store s(QStringLiteral("MAX_MODEL_LEN=lots\n"));
        PageUnderTest t(s.env);
        GuiSpy states(&t.controller, &EngineController::stateChanged);
        t.page.loadModel();
        const QString status = t.child<QLabel>("modelStatus")->text();
        QVERIFY2(status.startsWith(QStringLiteral("Not loaded: MAX_MODEL_LEN 'lots'")) && status.contains(s.path),
                 qPrintable(status));
        QTest::qWait(200);
        QCOMPARE(states.count(), 0);
        QCOMPARE(t.controller.state(), EngineController::State::Empty);
        // Corrected in the file (by hand, while the control center runs): the next load reads it and loads with it.
        writeFile(s.path, QStringLiteral("MAX_MODEL_LEN=2048\n"));
        const auto info = t.load();
        QVERIFY2(info, qPrintable(t.child<QLabel>("modelStatus")->text()));
        QCOMPARE(info->maxModelLen, qint64(2048));
    }

    // MAX_NUM_SEQS only starts the page's control, which the load takes: a bad one is logged and the control's value
    // loads. A bad TS_MAX_CONCURRENT_REQUESTS keeps the API off, with the reason on the page.
    void badControlValuesDoNotBlockTheLoad() {
        Store s(QStringLiteral("MAX_NUM_SEQS=0\nTS_MAX_CONCURRENT_REQUESTS=many\n"));
        PageUnderTest t(s.env);
        QCOMPARE(t.child<QSpinBox>("maxSeqs")->value(), 4);
        QVERIFY(t.load());
        QVERIFY2(t.log().contains(QStringLiteral("MAX_NUM_SEQS '0'")) &&
                     t.log().contains(QStringLiteral("This page's value is used.")) &&
                     t.log().contains(QStringLiteral("Engine: up to 4 sequences at once")),
                 qPrintable(t.log()));
        GuiSpy http(&t.controller, &EngineController::httpStateChanged);
        t.page.setHttpDefaults(QStringLiteral("127.0.0.1"), 0, QString());
        t.page.setHttpEnabled(true);
        QTest::qWait(300);
        QCOMPARE(http.count(), 0);  // nothing was asked of the controller
        QVERIFY(!t.child<QCheckBox>("httpOn")->isChecked());
        const QString status = t.child<QLabel>("httpStatus")->text();
        QVERIFY2(status.startsWith(QStringLiteral("Not started: TS_MAX_CONCURRENT_REQUESTS 'many'")), qPrintable(status));
    }

    // TS_MAX_CONCURRENT_REQUESTS reaches the in-process API: at 1, a request while a stream holds the slot gets 503.
    void concurrencyLimitReachesTheApi() {
        Store s(QStringLiteral("TS_MAX_CONCURRENT_REQUESTS=1\n"));
        PageUnderTest t(s.env);
        QVERIFY(t.load());
        GuiSpy http(&t.controller, &EngineController::httpStateChanged);
        t.page.setHttpDefaults(QStringLiteral("127.0.0.1"), 0, QString());
        t.page.setHttpEnabled(true);
        QVERIFY(http.wait(10000));
        QVERIFY2(http.first().at(0).toBool(), qPrintable(http.first().at(2).toString()));
        const int port = QUrl(http.first().at(1).toString()).port();
        // The holder: a long stream whose client never reads (its slot stays taken while the reply is pending).
        const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(uint16_t(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        QCOMPARE(::connect(holder, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
        const std::string body = R"({"model":"GLM-5.3-Flash-EXL3","max_tokens":1900,"ignore_eos":true,"stream":true,)"
                                 R"("messages":[{"role":"user","content":"hold"}]})";
        const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        QCOMPARE(::send(holder, req.data(), req.size(), 0), ssize_t(req.size()));
        std::atomic<bool> done{false};
        int second = 0;
        std::string metrics;
        std::thread client([&] {
            httplib::Client c("127.0.0.1", port);
            QElapsedTimer clock;
            clock.start();
            // Once the holder is in flight, one more generation request must be refused.
            while (clock.elapsed() < 10000) {
                const auto m = c.Get("/metrics");
                if (m) metrics = m->body;
                if (m && inFlight(m->body) == 1) break;
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            const std::string one = R"({"model":"GLM-5.3-Flash-EXL3","max_tokens":1,"messages":[{"role":"user","content":"x"}]})";
            if (auto r = c.Post("/v1/chat/completions", one, "application/json")) second = r->status;
            done = true;
        });
        QTRY_VERIFY_WITH_TIMEOUT(done.load(), 30000);
        client.join();
        ::close(holder);
        QVERIFY2(second == 503, qPrintable(QStringLiteral("second request: %1\n%2").arg(second).arg(QString::fromStdString(metrics))));
    }

    // The control center under a decimal-comma locale (de_DE.UTF-8, compiled into a temporary folder): the .env's
    // GPU_MEM_UTIL=0.87 loads (the API only starts after the load), and its in-process /metrics keeps numbers in
    // their C form ("0.001", not "0,001"), as Prometheus and vLLM's clients read them.
    void controlCenterUnderADecimalCommaLocale() {
        QTemporaryDir dir;
        if (!ts::test::compileCommaLocale(dir.path()))
            QSKIP("no de_DE locale source (the Debian package `locales`, which scripts/install-deps.sh installs)");
        const int port = freePort();
        QVERIFY(port > 0);
        const QString env = dir.filePath(QStringLiteral(".env"));
        writeFile(env, QStringLiteral("PORT=%1\nGPU_MEM_UTIL=0.87\nMAX_MODEL_LEN=4096\n").arg(port));
        QProcess app;
        QProcessEnvironment pe = QProcessEnvironment::systemEnvironment();
        for (const QString& k : kKeys + QStringList{QStringLiteral("PORT"), QStringLiteral("VLLM_API_KEY"),
                                                    QStringLiteral("LANGUAGE")})
            pe.remove(k);
        pe.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
        pe.insert(QStringLiteral("XDG_CONFIG_HOME"), dir.filePath(QStringLiteral("xdg")));
        pe.insert(QStringLiteral("LOCPATH"), dir.path());
        pe.insert(QStringLiteral("LC_ALL"), QLatin1String(ts::test::kCommaLocale));
        const bool up = startServingControlCenter(app, env, pe, port);
        httplib::Client client("127.0.0.1", port);
        int metricsStatus = 0;
        std::string metricsBody;
        if (up)
            if (const auto m = client.Get("/metrics")) {
                metricsStatus = m->status;
                metricsBody = m->body;
            }
        app.terminate();
        if (!app.waitForFinished(15000)) app.kill();
        QVERIFY2(up, qPrintable(QStringLiteral("the API never answered (model not loaded?): ") +
                                QString::fromUtf8(app.readAllStandardError()).right(2000)));
        QCOMPARE(metricsStatus, 200);
        const QString body = QString::fromStdString(metricsBody);
        QVERIFY2(body.contains(QStringLiteral("le=\"0.001\"")), qPrintable(body.left(2000)));
        static const QRegularExpression comma(QStringLiteral("\\d,\\d"));
        QVERIFY2(!comma.match(body).hasMatch(), qPrintable(comma.match(body).captured(0)));
    }
};

QTEST_MAIN(TestEngineSettings)
#include "test_engine_settings.moc"
