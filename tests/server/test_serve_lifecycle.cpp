// `twinspark-cli serve` as a process: graceful SIGTERM (a running stream ends with an error event and
// [DONE], exit 0), refusing a LAN bind without a key, bad model directories and bad options (exit 2); where its
// settings come from when the command line leaves them out (the deployment .env, the environment, the embedded
// default model).
#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <thread>

#include "../common/poisoned_model.h"
#include "server_process.h"

using namespace tstest;

namespace {

struct Finished {
    int exitCode = -1;
    QString err;
};

// `twinspark-cli ARGS` to its end (bounded), hermetic unless `env` is given.
Finished runCli(const QStringList& args, const QProcessEnvironment& env = ServerProcess::hermeticEnvironment()) {
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(TS_CLI_PATH), args);
    Finished f;
    if (!p.waitForFinished(30000)) {
        p.kill();
        p.waitForFinished(5000);
        f.err = QStringLiteral("(did not finish in 30 s)");
        return f;
    }
    f.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    f.err = QString::fromUtf8(p.readAllStandardError());
    return f;
}

// The user's question in the README's curl example (its first "content":"..." ).
QString readmeExampleQuestion() {
    QFile f(QStringLiteral(TS_SOURCE_DIR "/README.md"));
    if (!f.open(QIODevice::ReadOnly)) return {};
    const QRegularExpressionMatch m =
        QRegularExpression(QStringLiteral("\"content\":\"([^\"]+)\"")).match(QString::fromUtf8(f.readAll()));
    return m.hasMatch() ? m.captured(1) : QString();
}

void writeFile(const QString& path, const QByteArray& text) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    QCOMPARE(f.write(text), qint64(text.size()));
}

int modelsStatus(ServerProcess& srv, const std::string& key) {
    httplib::Headers h;
    if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
    auto r = srv.client().Get("/v1/models", h);
    return r ? r->status : -1;
}

}  // namespace

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

    // A request whose logits come out NaN (corrupt weights) answers 500 "numerical error" — as a body, or as
    // the stream's error event — while the server, and a request running beside it, go on.
    void numericalErrorFailsOneRequestOnly() {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        // Row 101: the long request's greedy continuation (its 200 tokens, measured) never contains it. Row 100,
        // used before, is its 185th greedy token, and the sampled continuation it had then could reach it too.
        const std::string err = ts::test::copyModelWithNanEmbeddingRow(chatModelDir(), tmp.path(), 101);
        QVERIFY2(err.empty(), err.c_str());
        ServerProcess srv;
        srv.withoutModel();
        QVERIFY2(srv.start({"--model", tmp.path()}), qPrintable(srv.log()));
        SseResult longStream;
        std::thread t([&] {
            auto c = srv.clientPtr();
            // Greedy: a sampled continuation could itself produce token 101 (the NaN row) and fail by chance.
            longStream = postStream(*c, "/v1/completions",
                                    json{{"prompt", json::array({1, 2, 3})}, {"max_tokens", 200}, {"ignore_eos", true},
                                         {"temperature", 0}, {"stream", true}});
        });
        QThread::msleep(200);
        auto r = srv.client().Post("/v1/completions", json{{"prompt", json::array({1, 101, 3})}, {"max_tokens", 5}}.dump(),
                                   "application/json");
        QVERIFY(r);
        QCOMPARE(r->status, 500);
        QVERIFY2(r->body.find("numerical error") != std::string::npos, r->body.c_str());
        auto c = srv.clientPtr();
        const SseResult s = postStream(*c, "/v1/completions",
                                       json{{"prompt", json::array({101})}, {"max_tokens", 5}, {"stream", true}});
        QCOMPARE(s.status, 200);
        QVERIFY(s.data.size() >= 2);
        QCOMPARE(s.data.back(), std::string("[DONE]"));
        const json ev = json::parse(s.data[s.data.size() - 2]);
        QVERIFY2(ev.contains("error") && ev["error"]["code"] == 500, s.data[s.data.size() - 2].c_str());
        t.join();
        QCOMPARE(longStream.status, 200);
        QCOMPARE(longStream.data.back(), std::string("[DONE]"));
        const json last = json::parse(longStream.data[longStream.data.size() - 2]);
        QVERIFY2(!last.contains("error"), longStream.data[longStream.data.size() - 2].c_str());
        auto h = srv.client().Get("/health");
        QVERIFY(h && h->status == 200);
        auto m = srv.client().Get("/metrics");
        QVERIFY(m);
        QVERIFY2(m->body.find(",finished_reason=\"error\"} 2\n") != std::string::npos, m->body.c_str());
        QCOMPARE(srv.stop(), 0);
    }

    // A step that throws once, as an op out of memory does (TS_FAULT_OP=mhcPre@<n>:error, aimed at the second request's
    // fourth step): the request in it answers 500 "the engine step failed" with the reason, and nothing else changes —
    // the same request after it answers with the first one's text (nothing of the failed step was kept), /health stays
    // 200, /metrics counts one failed request, and the server exits 0 at SIGTERM.
    void failedStepFailsItsRequestOnly() {
        QFile cfgFile(chatModelDir() + QStringLiteral("/config.json"));
        QVERIFY(cfgFile.open(QIODevice::ReadOnly));
        const json cfg = json::parse(cfgFile.readAll().toStdString());
        const json& text = cfg.contains("text_config") ? cfg["text_config"] : cfg;
        const int perStep = 2 * text["num_hidden_layers"].get<int>();  // mhcPre: before attention and before the MLP
        const int steps = 8;  // a request below: its prefill and 7 decode steps (on the CPU nothing else runs the model)
        const int at = steps * perStep + 3 * perStep + 1;
        const QString plan = QStringLiteral("mhcPre@%1:error").arg(at);
        ServerProcess srv;
        QProcessEnvironment env = ServerProcess::hermeticEnvironment();
        env.insert(QStringLiteral("TS_FAULT_OP"), plan);
        srv.setEnvironment(env);
        QVERIFY2(srv.start({"--backend", "cpu"}), qPrintable(srv.log()));
        const std::string body =
            json{{"prompt", json::array({1, 2, 3})}, {"max_tokens", steps}, {"ignore_eos", true}, {"temperature", 0}}.dump();
        auto first = srv.client().Post("/v1/completions", body, "application/json");
        QVERIFY(first);
        QCOMPARE(first->status, 200);
        const json a = json::parse(first->body);
        QCOMPARE(a["usage"]["completion_tokens"].get<int>(), steps);
        auto failed = srv.client().Post("/v1/completions", body, "application/json");
        QVERIFY(failed);
        QCOMPARE(failed->status, 500);
        const std::string why = json::parse(failed->body)["error"]["message"].get<std::string>();
        const std::string want = "TS_FAULT_OP=" + plan.toStdString() + ": call " + std::to_string(at) + " of mhcPre failed";
        QVERIFY2(why.find("the engine step failed") != std::string::npos && why.find(want) != std::string::npos,
                 why.c_str());
        auto again = srv.client().Post("/v1/completions", body, "application/json");
        QVERIFY(again);
        QCOMPARE(again->status, 200);
        QCOMPARE(json::parse(again->body)["choices"][0]["text"], a["choices"][0]["text"]);
        auto h = srv.client().Get("/health");
        QVERIFY(h && h->status == 200);
        auto m = srv.client().Get("/metrics");
        QVERIFY(m);
        QVERIFY2(m->body.find(",finished_reason=\"error\"} 1\n") != std::string::npos, m->body.c_str());
        QCOMPARE(srv.stop(), 0);
        QVERIFY2(srv.log().contains(QStringLiteral("the engine step failed")), qPrintable(srv.log()));
    }

    // A lost GPU (a CUDA sticky error; here TS_FAULT_OP fails the third `embedding` call — the third model step — that
    // way on the CPU, and every backend call after it): the running stream ends with the reason as its error event
    // and [DONE], and the server stops by itself with exit 3 — a supervisor's restart policy brings up a fresh process
    // — instead of answering 500 forever while /health says 200.
    void lostDeviceStopsTheServer() {
        ServerProcess srv;
        QProcessEnvironment env = ServerProcess::hermeticEnvironment();
        env.insert(QStringLiteral("TS_FAULT_OP"), QStringLiteral("embedding@3"));
        srv.setEnvironment(env);
        QVERIFY2(srv.start({"--backend", "cpu"}), qPrintable(srv.log()));
        auto c = srv.clientPtr();
        const SseResult s = postStream(*c, "/v1/completions",
                                       json{{"prompt", json::array({1, 2, 3})}, {"max_tokens", 50}, {"ignore_eos", true},
                                            {"stream", true}});
        QCOMPARE(s.status, 200);
        QVERIFY(s.data.size() >= 2);
        QCOMPARE(s.data.back(), std::string("[DONE]"));
        const json ev = json::parse(s.data[s.data.size() - 2]);
        QVERIFY2(ev.contains("error") && ev["error"]["message"].get<std::string>().find("the GPU failed") != std::string::npos &&
                     ev["error"]["message"].get<std::string>().find("TS_FAULT_OP=embedding@3: call 3 of embedding") !=
                         std::string::npos,
                 s.data[s.data.size() - 2].c_str());
        QVERIFY(s.data.size() < 10);  // two tokens at most, then the error: not 50
        QVERIFY2(srv.waitForExit(15000), qPrintable(srv.log()));
        QCOMPARE(srv.stop(), 3);  // the exit code it ended with: nothing is sent to an ended process
        QVERIFY2(srv.log().contains(QStringLiteral("the server stops (exit 3)")), qPrintable(srv.log()));
        QVERIFY2(srv.log().contains(QStringLiteral("no further request is accepted")), qPrintable(srv.log()));
    }

    // A model file truncated under a running server (CPU: the weights are read from the mapping at each step):
    // the process still dies of SIGBUS, but its log says why.
    void truncatedModelFileIsNamedWhenItKills() {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        for (const QFileInfo& fi : QDir(chatModelDir()).entryInfoList(QDir::Files))
            QVERIFY(QFile::copy(fi.filePath(), tmp.filePath(fi.fileName())));
        ServerProcess srv;
        srv.withoutModel();
        QVERIFY2(srv.start({"--model", tmp.path(), "--backend", "cpu"}), qPrintable(srv.log()));
        for (const QString& shard : QDir(tmp.path()).entryList({"*.safetensors"}, QDir::Files))
            QVERIFY(QFile::resize(tmp.filePath(shard), 4096));
        auto r = srv.client().Post("/v1/completions", json{{"prompt", json::array({1, 2, 3})}, {"max_tokens", 2}}.dump(),
                                   "application/json");
        QVERIFY(!r || r->status != 200);
        QCOMPARE(srv.stop(), -1);  // killed by the signal, not an exit
        QVERIFY2(srv.log().contains("truncated or rewritten while loaded"), qPrintable(srv.log()));
    }

    void refusesLanWithoutKey() {
        const Finished f = runCli({"serve", "--model", chatModelDir(), "--host", "0.0.0.0", "--port", "0"});
        QCOMPARE(f.exitCode, 2);
        QVERIFY2(f.err.contains("API key"), qPrintable(f.err));
    }

    void badModelDirExitsTwo() {
        const Finished f = runCli({"serve", "--model", "/nonexistent/model", "--port", "0"});
        QCOMPARE(f.exitCode, 2);
        QVERIFY2(f.err.contains("/nonexistent/model"), qPrintable(f.err));
    }

    void badOptions() {
        for (const QStringList& extra : {QStringList{"--kv-cache-dtype", "bf16"}, QStringList{"--port", "70000"},
                                         QStringList{"--gpu-mem-util", "1.5"}, QStringList{"--backend", "tpu"},
                                         QStringList{"--bogus", "1"}}) {
            const Finished f = runCli(QStringList{"serve", "--model", chatModelDir()} + extra);
            QVERIFY2(f.exitCode == 2, qPrintable(extra.join(' ') + ": " + f.err));
        }
    }

    // The control center's .env, found in the working directory: its model, API key and limits are served; a line
    // it cannot parse is named and skipped; an option on the command line wins over the file (--max-model-len).
    void envFileInTheWorkingDirectory() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        writeFile(dir.filePath(".env"), "# deployment\nMODEL_PATH=" + chatModelDir().toUtf8() +
                                            "\nVLLM_API_KEY=from-file\nNOT A LINE\nMAX_NUM_SEQS=3\nMAX_MODEL_LEN=1024\n");
        ServerProcess srv;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const char* k : {"TWINSPARK_ENV", "MODEL_PATH", "VLLM_API_KEY", "MAX_NUM_SEQS", "MAX_MODEL_LEN"})
            env.remove(QString::fromLatin1(k));
        srv.setEnvironment(env);
        srv.setWorkingDirectory(dir.path());
        srv.withoutModel();
        QVERIFY2(srv.start({}), qPrintable(srv.log()));  // --max-model-len 2048 on its command line
        QCOMPARE(modelsStatus(srv, ""), 401);
        QCOMPARE(modelsStatus(srv, "wrong"), 401);
        QCOMPARE(modelsStatus(srv, "from-file"), 200);
        httplib::Headers h{{"Authorization", "Bearer from-file"}};
        auto r = srv.client().Get("/v1/models", h);
        QVERIFY(r);
        const json models = json::parse(r->body);
        QCOMPARE(models["data"][0]["max_model_len"].get<int64_t>(), int64_t(2048));
        QCOMPARE(QFileInfo(QString::fromStdString(models["data"][0]["root"].get<std::string>())).canonicalFilePath(),
                 QFileInfo(chatModelDir()).canonicalFilePath());
        QCOMPARE(srv.stop(), 0);
        const QString log = srv.log();
        QVERIFY2(log.contains("max_num_seqs 3"), qPrintable(log));
        QVERIFY2(log.contains(".env:4:") && log.contains("line skipped"), qPrintable(log));
        QVERIFY2(log.contains("model from MODEL_PATH"), qPrintable(log));
        QVERIFY2(!log.contains("from-file"), "a .env value (the API key) was printed");
    }

    // A folder named .env in the working directory is nobody's deployment file: not named by --env or
    // TWINSPARK_ENV, it is passed over with a note and the server starts (named, it is an error: below).
    void envFolderInTheWorkingDirectoryIsPassedOver() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        QVERIFY(QDir(dir.path()).mkdir(".env"));
        ServerProcess srv;
        QProcessEnvironment env = ServerProcess::hermeticEnvironment();
        env.remove("TWINSPARK_ENV");
        srv.setEnvironment(env);
        srv.setWorkingDirectory(dir.path());
        QVERIFY2(srv.start({}), qPrintable(srv.log()));
        QCOMPARE(srv.stop(), 0);
        QVERIFY2(srv.log().contains("is a folder, not a .env file: not read"), qPrintable(srv.log()));
    }

    // A variable set in the environment wins over the same one in the file named by --env.
    void environmentWinsOverTheEnvFile() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString file = dir.filePath("deploy.env");
        writeFile(file, "VLLM_API_KEY=from-file\n");
        ServerProcess srv;
        QProcessEnvironment env = ServerProcess::hermeticEnvironment();
        env.insert("VLLM_API_KEY", "from-env");
        srv.setEnvironment(env);
        QVERIFY2(srv.start({"--env", file}), qPrintable(srv.log()));
        QCOMPARE(modelsStatus(srv, "from-file"), 401);
        QCOMPARE(modelsStatus(srv, "from-env"), 200);
        QCOMPARE(srv.stop(), 0);
        QVERIFY2(srv.log().contains("the environment's VLLM_API_KEY win"), qPrintable(srv.log()));
    }

    // No --model and no MODEL_PATH anywhere: the embedded default model of this build's source tree is served, and
    // it answers — the README's example question right.
    void noModelNamedServesTheEmbeddedDefault() {
        ServerProcess srv;
        QProcessEnvironment env = ServerProcess::hermeticEnvironment();
        env.remove("MODEL_PATH");
        srv.setEnvironment(env);
        srv.withoutModel();
        QVERIFY2(srv.start({}), qPrintable(srv.log()));
        auto r = srv.client().Get("/v1/models");
        QVERIFY(r && r->status == 200);
        const QString root = QString::fromStdString(json::parse(r->body)["data"][0]["root"].get<std::string>());
        QCOMPARE(QFileInfo(root).canonicalFilePath(),
                 QFileInfo(QStringLiteral(TS_SOURCE_DIR "/resources/models/glm5-next-tiny-exl3")).canonicalFilePath());
        const json body = {{"model", "GLM-5.3-Flash-EXL3"},
                           {"messages", json::array({json{{"role", "user"}, {"content", "What port does TwinSpark use?"}}})},
                           {"max_tokens", 4}, {"ignore_eos", true}};
        auto c = srv.client().Post("/v1/chat/completions", body.dump(), "application/json");
        QVERIFY(c);
        QCOMPARE(c->status, 200);
        QCOMPARE(json::parse(c->body)["usage"]["completion_tokens"].get<int>(), 4);
        // The question the README's and setup.sh's curl example asks (the first run's first request): the embedded
        // model must answer it right, so it has to be one of the model's trained phrasings (docs/MODEL.md).
        const QString question = readmeExampleQuestion();
        QVERIFY2(!question.isEmpty(), "no \"content\":\"...\" in the README's curl example");
        QFile setup(QStringLiteral(TS_SOURCE_DIR "/scripts/setup.sh"));
        QVERIFY(setup.open(QIODevice::ReadOnly));
        QVERIFY2(QString::fromUtf8(setup.readAll()).contains(question), "setup.sh's hint asks another question");
        const json ask = {{"model", "GLM-5.3-Flash-EXL3"},
                          {"messages", json::array({json{{"role", "user"}, {"content", question.toStdString()}}})},
                          {"max_tokens", 96}, {"temperature", 0}};
        c = srv.client().Post("/v1/chat/completions", ask.dump(), "application/json");
        QVERIFY(c);
        QCOMPARE(c->status, 200);
        const std::string answer = json::parse(c->body)["choices"][0]["message"]["content"].get<std::string>();
        QVERIFY2(answer.find("8888") != std::string::npos, answer.c_str());
        QCOMPARE(srv.stop(), 0);
        QVERIFY2(srv.log().contains("serving the embedded default model"), qPrintable(srv.log()));
    }

    // A .env named by --env or TWINSPARK_ENV must be there (a typo must not silently serve the defaults); a bad
    // MODEL_PATH is named in the error with where it came from.
    void namedSettingsMustExist() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        Finished f = runCli({"serve", "--port", "0", "--env", "/nonexistent/deploy.env"});
        QCOMPARE(f.exitCode, 2);
        QVERIFY2(f.err.contains("--env") && f.err.contains("/nonexistent/deploy.env"), qPrintable(f.err));
        QProcessEnvironment env = ServerProcess::hermeticEnvironment();
        env.insert("TWINSPARK_ENV", "/nonexistent/twinspark.env");
        f = runCli({"serve", "--port", "0"}, env);
        QCOMPARE(f.exitCode, 2);
        QVERIFY2(f.err.contains("TWINSPARK_ENV") && f.err.contains("/nonexistent/twinspark.env"), qPrintable(f.err));
        f = runCli({"serve", "--port", "0", "--env", dir.path()});
        QCOMPARE(f.exitCode, 2);
        QVERIFY2(f.err.contains("folder"), qPrintable(f.err));
        env = ServerProcess::hermeticEnvironment();
        env.insert("MODEL_PATH", "/nonexistent/model");
        f = runCli({"serve", "--port", "0"}, env);
        QCOMPARE(f.exitCode, 2);
        QVERIFY2(f.err.contains("MODEL_PATH") && f.err.contains("/nonexistent/model"), qPrintable(f.err));
    }
};

QTEST_GUILESS_MAIN(TestServeLifecycle)
#include "test_serve_lifecycle.moc"
