// twinspark-cli as a user runs it: real processes, real files. Wrong input must give a clear message
// and a non-zero exit code, never a crash.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "../common/cli_runner.h"
#include "io/safetensors.h"

#include <nlohmann/json.hpp>

using namespace ts;

namespace {

const QString kTinyA = QStringLiteral(TS_SOURCE_DIR "/tests/golden/data/tiny_a");

using Run = test::CliRun;
Run cli(const QStringList& args) { return test::runCli(args); }

QString idsOf(const SafetensorsFile& f, const std::string& name, int64_t n) {
    const auto v = toF32(f.get(name));
    QStringList s;
    for (int64_t i = 0; i < n; ++i) s << QString::number(int(v[size_t(i)]));
    return s.join(',');
}

}  // namespace

class TestCli : public QObject {
    Q_OBJECT

private slots:
    void logitsMatchGolden() {
        QTemporaryDir tmp;
        SafetensorsFile golden((kTinyA + "/golden.safetensors").toStdString());
        const QString ids = idsOf(golden, "prompt_1", 75);
        const QString out = tmp.filePath("l.safetensors");
        Run r = cli({"logits", "--model", kTinyA, "--prompt-ids", ids, "--kv-cache-dtype", "fp32", "--out", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        SafetensorsFile f(out.toStdString());
        const TensorInfo& t = f.get("logits");
        QCOMPARE(t.dtype, DType::F32);
        QCOMPARE(t.shape, (std::vector<int64_t>{75, 512}));
        const auto ours = toF32(t), ref = toF32(golden.get("logits_1"));
        float maxAbs = 0;
        for (size_t i = 0; i < ours.size(); ++i) maxAbs = std::max(maxAbs, std::fabs(ours[i] - ref[i]));
        QVERIFY2(maxAbs < 1e-4f, qPrintable(QString::number(maxAbs)));

        // A chunked prefill writes the very same bytes.
        const QString out2 = tmp.filePath("l2.safetensors");
        r = cli({"logits", "--model", kTinyA, "--prompt-ids", ids, "--kv-cache-dtype", "fp32", "--chunk", "9", "--out", out2});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QFile a(out), b(out2);
        QVERIFY(a.open(QIODevice::ReadOnly) && b.open(QIODevice::ReadOnly));
        QCOMPARE(a.readAll(), b.readAll());
    }

    void generatePrintsIdsAndSpeed() {
        QTemporaryDir tmp;
        const QString json = tmp.filePath("g.json");
        Run r = cli({"generate", "--model", kTinyA, "--prompt-ids", "5,6,7,8,9", "--max-tokens", "12", "--ignore-eos",
                     "--json", json, "--threads", "1"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(r.out.trimmed().split(',').size(), 12);
        QVERIFY2(r.err.contains("tok/s"), qPrintable(r.err));
        QVERIFY(QFile::exists(json));
        // Greedy decode is deterministic: the same again with 2 threads.
        Run r2 = cli({"generate", "--model", kTinyA, "--prompt-ids", "5,6,7,8,9", "--max-tokens", "12", "--ignore-eos",
                      "--threads", "2"});
        QCOMPARE(r2.out, r.out);
    }

    // --profile-ops: the same tokens as unprofiled (the decorator only forwards and times), and per-op tables of
    // the prefill and of the decode steps whose call counts follow from the model (4 layers: one mhcHead per
    // forward). --warmup (an untimed prefill and decode step on a discarded sequence first) changes no token either.
    void profileOpsTable() {
        const QStringList base = {"generate", "--model", kTinyA, "--prompt-ids", "5,6,7,8,9", "--max-tokens", "6",
                                  "--ignore-eos", "--threads", "1"};
        Run plain = cli(base);
        Run prof = cli(base + QStringList{"--profile-ops"});
        QVERIFY2(prof.code == 0, qPrintable(prof.err));
        QCOMPARE(prof.out, plain.out);
        const qsizetype pre = prof.err.indexOf("per-op time of the prefill, 5 tokens");
        const qsizetype dec = prof.err.indexOf("per-op time of the decode steps");
        QVERIFY2(pre >= 0 && dec > pre, qPrintable(prof.err));
        // mhcHead's calls in a table of `err`: the first row naming it after `from`.
        auto headCallsIn = [](const QString& err, qsizetype from) {
            for (const QString& line : err.mid(from).split('\n')) {
                const QStringList f = line.simplified().split(' ');
                if (f.size() >= 2 && f[0] == "mhcHead") return f[1].toInt();
            }
            return -1;
        };
        auto headCalls = [&](qsizetype from) { return headCallsIn(prof.err, from); };
        QCOMPARE(headCalls(pre), 1);  // the prefill: one forward
        QCOMPARE(headCalls(dec), 5);  // 6 tokens: the first from the prefill, 5 decode steps
        Run warm = cli(base + QStringList{"--warmup"});
        QVERIFY2(warm.code == 0, qPrintable(warm.err));
        QCOMPARE(warm.out, plain.out);
        // The warm-up's forwards (a prefill and one decode step) are not in the tables.
        Run warmProf = cli(base + QStringList{"--warmup", "--profile-ops"});
        QVERIFY2(warmProf.code == 0, qPrintable(warmProf.err));
        QCOMPARE(warmProf.out, plain.out);
        const qsizetype wdec = warmProf.err.indexOf("per-op time of the decode steps");
        QVERIFY2(wdec > 0, qPrintable(warmProf.err));
        QCOMPARE(headCallsIn(warmProf.err, warmProf.err.indexOf("per-op time of the prefill")), 1);
        QCOMPARE(headCallsIn(warmProf.err, wdec), 5);
        // --prefill-chunk 2: the 5-token prompt in three forwards (three mhcHead calls in the prefill's table), as
        // the engine prefills a prompt longer than its step; the same greedy tokens.
        Run chunked = cli(base + QStringList{"--prefill-chunk", "2", "--profile-ops"});
        QVERIFY2(chunked.code == 0, qPrintable(chunked.err));
        QCOMPARE(chunked.out, plain.out);
        QCOMPARE(headCallsIn(chunked.err, chunked.err.indexOf("per-op time of the prefill")), 3);
        QVERIFY2(chunked.err.contains("prefill in chunks of 2 "), qPrintable(chunked.err));
        Run badChunk = cli(base + QStringList{"--prefill-chunk", "0"});
        QCOMPARE(badChunk.code, 2);
        QVERIFY2(badChunk.err.contains("--prefill-chunk must be an integer in [1, "), qPrintable(badChunk.err));
        const QString rule = "--profile-ops, --warmup and --prefill-chunk go with --prompt-ids alone";
        Run bad = cli({"generate", "--model", kTinyA, "--prompt", "hi", "--profile-ops"});
        QCOMPARE(bad.code, 2);
        QVERIFY(bad.err.contains(rule));
        Run badWarm = cli({"generate", "--model", kTinyA, "--prompt", "hi", "--warmup"});
        QCOMPARE(badWarm.code, 2);
        QVERIFY(badWarm.err.contains(rule));
        Run badEngineChunk = cli({"generate", "--model", kTinyA, "--prompt", "hi", "--prefill-chunk", "4"});
        QCOMPARE(badEngineChunk.code, 2);
        QVERIFY(badEngineChunk.err.contains(rule));
    }

    // --concurrency runs copies through the engine (continuous batching): each copy must produce the
    // reference path's greedy tokens.
    void concurrencyMatchesReference() {
        QTemporaryDir tmp;
        const QString json = tmp.filePath("c.json");
        const QStringList common = {"--model", kTinyA, "--prompt-ids", "5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45", "--max-tokens", "20", "--ignore-eos"};
        Run ref = cli(QStringList{"generate"} + common);
        QVERIFY2(ref.code == 0, qPrintable(ref.err));
        Run r = cli(QStringList{"generate"} + common + QStringList{"--concurrency", "3", "--json", json});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("tok/s aggregate"), qPrintable(r.err));
        QFile f(json);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const auto j = nlohmann::json::parse(f.readAll().toStdString());
        QCOMPARE(j["tokens"].size(), size_t(3));
        for (const auto& toks : j["tokens"]) {
            QStringList s;
            for (const auto& t : toks) s << QString::number(t.get<int>());
            QCOMPARE(s.join(','), ref.out.trimmed());
        }
    }

    // --prompt-ids "A;B" gives the engine's requests different prompts (request i takes list i mod count):
    // each request reproduces the reference path's tokens for its own prompt, and the JSON reports the
    // decode-only window in which all requests run.
    void concurrencyDistinctPrompts() {
        QTemporaryDir tmp;
        const QString a = "5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20", b = "40,41,42,43,44,45,46,47,48,49,50";
        const QStringList tail = {"--model", kTinyA, "--max-tokens", "12", "--ignore-eos"};
        Run refA = cli(QStringList{"generate", "--prompt-ids", a} + tail);
        Run refB = cli(QStringList{"generate", "--prompt-ids", b} + tail);
        QVERIFY2(refA.code == 0 && refB.code == 0, qPrintable(refA.err + refB.err));
        QVERIFY(refA.out.trimmed() != refB.out.trimmed());
        const QString json = tmp.filePath("d.json");
        Run r = cli(QStringList{"generate", "--prompt-ids", a + ";" + b, "--concurrency", "3", "--json", json} + tail);
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("decode with all 3 request(s) running"), qPrintable(r.err));
        QFile f(json);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const auto j = nlohmann::json::parse(f.readAll().toStdString());
        QCOMPARE(j["distinct_prompts"].get<int>(), 2);
        QCOMPARE(j["tokens"].size(), size_t(3));
        for (size_t i = 0; i < 3; ++i) {
            QStringList s;
            for (const auto& t : j["tokens"][i]) s << QString::number(t.get<int>());
            QCOMPARE(s.join(','), (i % 2 ? refB : refA).out.trimmed());
        }
        // The window counts only steps in which all three decode, 3 tokens each: the CLI submits the three
        // together (Engine::submitAll), so they are prefilled in one step and decode the other 11 together.
        const int window = j["decode_window_tokens"].get<int>();
        QVERIFY2(window == 33, qPrintable(QString::number(window)));
        QVERIFY(j["decode_tok_s"].get<double>() > 0 && j["decode_median_step_s"].get<double>() > 0);

        // More prompts than requests is an error that says so.
        r = cli(QStringList{"generate", "--prompt-ids", a + ";" + b, "--concurrency", "1"} + tail);
        QVERIFY(r.code != 0);
        QVERIFY2(r.err.contains("2 prompts"), qPrintable(r.err));
    }

    // --prompt-ids @FILE: the list(s) from a file (a final newline dropped) give the same tokens as on the command
    // line, on the reference path and through the engine; a missing or empty file is a clear error.
    void promptIdsFromFile() {
        QTemporaryDir tmp;
        const QString a = "5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20", b = "40,41,42,43,44,45,46,47,48,49,50";
        auto write = [&](const QString& name, const QByteArray& text) {
            QFile f(tmp.filePath(name));
            if (!f.open(QIODevice::WriteOnly)) return QString();
            f.write(text);
            return f.fileName();
        };
        const QString one = write("a.ids", a.toUtf8() + "\n"), two = write("ab.ids", (a + ";" + b).toUtf8() + "\r\n\n");
        QVERIFY(!one.isEmpty() && !two.isEmpty());
        const QStringList tail = {"--model", kTinyA, "--max-tokens", "8", "--ignore-eos"};
        Run direct = cli(QStringList{"generate", "--prompt-ids", a} + tail);
        Run fromFile = cli(QStringList{"generate", "--prompt-ids", "@" + one} + tail);
        QVERIFY2(direct.code == 0 && fromFile.code == 0, qPrintable(direct.err + fromFile.err));
        QCOMPARE(fromFile.out.trimmed(), direct.out.trimmed());
        const QString jd = tmp.filePath("d.json"), jf = tmp.filePath("f.json");
        Run engDirect = cli(QStringList{"generate", "--prompt-ids", a + ";" + b, "--concurrency", "2", "--json", jd} + tail);
        Run engFile = cli(QStringList{"generate", "--prompt-ids", "@" + two, "--concurrency", "2", "--json", jf} + tail);
        QVERIFY2(engDirect.code == 0 && engFile.code == 0, qPrintable(engDirect.err + engFile.err));
        auto tokens = [](const QString& path) {
            QFile f(path);
            return f.open(QIODevice::ReadOnly) ? nlohmann::json::parse(f.readAll().toStdString())["tokens"] : nlohmann::json();
        };
        const auto td = tokens(jd), tf = tokens(jf);
        QCOMPARE(td.size(), size_t(2));
        QVERIFY(td == tf);
        QVERIFY(td[0] != td[1]);  // two prompts, not one read twice

        Run missing = cli(QStringList{"generate", "--prompt-ids", "@" + tmp.filePath("none.ids")} + tail);
        QVERIFY(missing.code != 0);
        QVERIFY2(missing.err.contains("--prompt-ids: cannot read"), qPrintable(missing.err));
        Run dir = cli(QStringList{"generate", "--prompt-ids", "@" + tmp.path()} + tail);
        QVERIFY(dir.code != 0);
        QVERIFY2(dir.err.contains("not a file"), qPrintable(dir.err));
        Run empty = cli(QStringList{"generate", "--prompt-ids", "@" + write("empty.ids", "\n")} + tail);
        QVERIFY(empty.code != 0);
        QVERIFY2(empty.err.contains("is empty"), qPrintable(empty.err));
        Run logits = cli({"logits", "--model", kTinyA, "--prompt-ids", "@" + one, "--out", tmp.filePath("l.safetensors")});
        QVERIFY2(logits.code == 0, qPrintable(logits.err));
    }

    // --max-tokens "12;5;9": each request its own limit (request i takes list i mod count), so they finish
    // one after another and the batch shrinks; a greedy request's tokens are a prefix of the longest run.
    void perRequestMaxTokens() {
        QTemporaryDir tmp;
        const QString a = "5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20", b = "40,41,42,43,44,45,46,47,48,49,50";
        Run refA = cli({"generate", "--prompt-ids", a, "--model", kTinyA, "--max-tokens", "12", "--ignore-eos"});
        Run refB = cli({"generate", "--prompt-ids", b, "--model", kTinyA, "--max-tokens", "12", "--ignore-eos"});
        QVERIFY2(refA.code == 0 && refB.code == 0, qPrintable(refA.err + refB.err));
        const QString json = tmp.filePath("m.json");
        Run r = cli({"generate", "--prompt-ids", a + ";" + b, "--concurrency", "3", "--model", kTinyA, "--max-tokens",
                     "12;5;9", "--ignore-eos", "--json", json});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QFile f(json);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const auto j = nlohmann::json::parse(f.readAll().toStdString());
        const size_t want[3] = {12, 5, 9};
        for (size_t i = 0; i < 3; ++i) {
            QCOMPARE(j["tokens"][i].size(), want[i]);
            QCOMPARE(j["finish_reasons"][i].get<std::string>(), std::string("length"));
            QStringList s;
            for (const auto& t : j["tokens"][i]) s << QString::number(t.get<int>());
            QVERIFY2((i % 2 ? refB : refA).out.trimmed().startsWith(s.join(',')), qPrintable(s.join(',')));
        }
        // Bad limits are refused up front, naming the bad element; more limits than requests too.
        r = cli({"generate", "--prompt-ids", a, "--concurrency", "2", "--model", kTinyA, "--max-tokens", "12;x"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("--max-tokens: 'x'"), qPrintable(r.err));
        r = cli({"generate", "--prompt-ids", a, "--concurrency", "2", "--model", kTinyA, "--max-tokens", "12;0"});
        QCOMPARE(r.code, 2);
        r = cli({"generate", "--prompt-ids", a, "--concurrency", "1", "--model", kTinyA, "--max-tokens", "3;4"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("2 limits"), qPrintable(r.err));
    }

    // tokenize / detokenize / render on the golden GLM-style tokenizer, with a chat template of our own.
    void textCommands() {
        const QString tokDir = QStringLiteral(TS_SOURCE_DIR "/tests/golden/tokenizer");
        Run r = cli({"tokenize", "--model", tokDir, "--text", "Salom dunyo [gMASK]<sop>"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const auto ids = nlohmann::json::parse(r.out.toStdString());
        QVERIFY(ids.is_array() && ids.size() > 2);
        QStringList idList;
        for (const auto& v : ids) idList << QString::number(v.get<int>());
        r = cli({"detokenize", "--model", tokDir, "--ids", idList.join(',')});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(r.out, QStringLiteral("Salom dunyo [gMASK]<sop>\n"));
        r = cli({"detokenize", "--model", tokDir, "--ids", "1,99999999"});
        QCOMPARE(r.code, 2);
        QVERIFY(r.err.contains("outside the tokenizer's vocabulary"));

        QTemporaryDir tmp;
        QVERIFY(QFile::copy(tokDir + "/tokenizer.json", tmp.filePath("tokenizer.json")));
        QFile tpl(tmp.filePath("chat_template.jinja"));
        QVERIFY(tpl.open(QIODevice::WriteOnly));
        tpl.write("[gMASK]<sop>{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
                  "{% if add_generation_prompt %}<|assistant|>{% if enable_thinking is defined and not enable_thinking %}"
                  "<think></think>{% else %}<think>{% endif %}{% endif %}");
        tpl.close();
        QFile msgs(tmp.filePath("m.json"));
        QVERIFY(msgs.open(QIODevice::WriteOnly));
        msgs.write(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"2+2?"}])");
        msgs.close();
        r = cli({"render", "--model", tmp.path(), "--messages", msgs.fileName()});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QCOMPARE(r.out, QStringLiteral("[gMASK]<sop><|system|>Be brief.<|user|>2+2?<|assistant|><think>\n"));
        r = cli({"render", "--model", tmp.path(), "--messages", msgs.fileName(), "--no-thinking"});
        QCOMPARE(r.out, QStringLiteral("[gMASK]<sop><|system|>Be brief.<|user|>2+2?<|assistant|><think></think>\n"));
        r = cli({"render", "--model", tmp.path(), "--messages", tmp.filePath("missing.json")});
        QCOMPARE(r.code, 2);
    }

    void benchExl3WritesJson() {
        QTemporaryDir tmp;
        const QString json = tmp.filePath("b.json");
        Run r = cli({"bench-exl3", "--k", "256", "--n", "128", "--reps", "3", "--threads", "1", "--json", json});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        QFile f(json);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const auto j = nlohmann::json::parse(f.readAll().toStdString());
        QCOMPARE(j["runs"].size(), size_t(1));
        QVERIFY(j["runs"][0]["median_ms"].get<double>() > 0);
        QCOMPARE(cli({"bench-exl3", "--k", "100"}).code, 2);  // not a multiple of 128
        QCOMPARE(cli({"bench-exl3", "--threads", "1x"}).code, 2);
    }

    void badInput_data() {
        // Written nowhere (each row fails first); the early check of --out only needs a writable place.
        const QString unusedOut = QDir::temp().filePath("twinspark-test-cli-unused.safetensors");
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("no model dir") << QStringList{"logits", "--model", "/nonexistent/m", "--prompt-ids", "1", "--out", unusedOut}
                                      << "/nonexistent/m";
        QTest::newRow("id outside vocab") << QStringList{"logits", "--model", kTinyA, "--prompt-ids", "1,512", "--out", unusedOut}
                                          << "outside the vocabulary";
        QTest::newRow("negative id") << QStringList{"generate", "--model", kTinyA, "--prompt-ids", "1,-3"} << "not a token id";
        QTest::newRow("empty id") << QStringList{"generate", "--model", kTinyA, "--prompt-ids", "1,,2"} << "not a token id";
        QTest::newRow("bad cache dtype") << QStringList{"generate", "--model", kTinyA, "--prompt-ids", "1", "--kv-cache-dtype", "bf16"}
                                         << "fp8 or fp32";
        QTest::newRow("unknown option") << QStringList{"generate", "--model", kTinyA, "--prompt-ids", "1", "--temprature", "1"}
                                        << "unknown option --temprature";
        QTest::newRow("missing out") << QStringList{"logits", "--model", kTinyA, "--prompt-ids", "1"} << "--out";
        // An output that cannot be written is found before the model loads (the model here does not exist).
        QTest::newRow("unwritable out") << QStringList{"logits", "--model", "/nonexistent/m", "--prompt-ids", "1",
                                                       "--out", "/nonexistent/dir/l.safetensors"}
                                        << "/nonexistent/dir/l.safetensors";
        QTest::newRow("unwritable json") << QStringList{"generate", "--model", "/nonexistent/m", "--prompt-ids", "1",
                                                        "--json", "/nonexistent/dir/r.json"}
                                         << "/nonexistent/dir/r.json";
        QTest::newRow("unwritable json, engine") << QStringList{"generate", "--model", "/nonexistent/m", "--prompt-ids",
                                                                "1", "--concurrency", "2", "--json", "/nonexistent/dir/r.json"}
                                                 << "/nonexistent/dir/r.json";
        QTest::newRow("bad max tokens") << QStringList{"generate", "--model", kTinyA, "--prompt-ids", "1", "--max-tokens", "x"}
                                        << "--max-tokens";
        QTest::newRow("unknown command") << QStringList{"frobnicate"} << "unknown command";
        // The reference path is greedy: a seed there is refused with what it is for, not taken for a --prompt option.
        QTest::newRow("seed without sampling") << QStringList{"generate", "--model", kTinyA, "--prompt-ids", "1", "--seed", "3"}
                                               << "--seed seeds sampling: give it with --temperature";
        QTest::newRow("system without prompt") << QStringList{"generate", "--model", kTinyA, "--prompt-ids", "1", "--system", "s"}
                                               << "--system and --no-thinking go with --prompt";
        QTest::newRow("gpu-mem-util range") << QStringList{"generate", "--model", kTinyA, "--prompt-ids", "1", "--gpu-mem-util", "1.5"}
                                            << "--gpu-mem-util must be in (0, 1], got '1.5'";
        QTest::newRow("gpu-mem-util on the CPU")
            << QStringList{"generate", "--backend", "cpu", "--model", kTinyA, "--prompt-ids", "1", "--gpu-mem-util", "0.5"}
            << "--gpu-mem-util sizes the KV pool on a GPU backend; this one is cpu";
        // ... and before the model loads: a missing model directory is not reached.
        QTest::newRow("gpu-mem-util on the CPU, before the load")
            << QStringList{"generate", "--backend", "cpu", "--model", "/nonexistent-model-dir", "--prompt-ids", "1",
                           "--gpu-mem-util", "0.5"}
            << "--gpu-mem-util sizes the KV pool on a GPU backend; this one is cpu";
    }

    void badInput() {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        Run r = cli(args);
        QVERIFY2(r.code == 2, qPrintable(QString("exit %1: %2").arg(r.code).arg(r.err)));
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
    }

    void malformedCheckpoint() {
        QTemporaryDir tmp;
        for (const char* f : {"config.json", "generation_config.json"})
            QVERIFY(QFile::copy(kTinyA + "/" + f, tmp.filePath(f)));
        // Truncated weights: the header promises more bytes than the file has.
        QFile src(kTinyA + "/model.safetensors");
        QVERIFY(src.open(QIODevice::ReadOnly));
        QFile dst(tmp.filePath("model.safetensors"));
        QVERIFY(dst.open(QIODevice::WriteOnly));
        dst.write(src.read(src.size() / 2));
        dst.close();
        Run r = cli({"generate", "--model", tmp.path(), "--prompt-ids", "1"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("model.safetensors"), qPrintable(r.err));

        // A config that disagrees with the weights: the tensor is named.
        QFile cfg(tmp.filePath("config.json"));
        QVERIFY(cfg.open(QIODevice::ReadOnly));
        QByteArray text = cfg.readAll();
        cfg.close();
        QFile::remove(tmp.filePath("model.safetensors"));
        QVERIFY(QFile::copy(kTinyA + "/model.safetensors", tmp.filePath("model.safetensors")));
        text.replace("\"q_lora_rank\": 64", "\"q_lora_rank\": 48");
        QVERIFY(cfg.open(QIODevice::WriteOnly | QIODevice::Truncate));
        cfg.write(text);
        cfg.close();
        r = cli({"generate", "--model", tmp.path(), "--prompt-ids", "1"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("q_a_proj.weight") || r.err.contains("q_a_layernorm"), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
