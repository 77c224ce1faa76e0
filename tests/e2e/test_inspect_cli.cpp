// `twinspark-cli inspect` as a user runs it: the listing of a safetensors file, one EXL3 linear dequantized to
// a dense weight (held against the engine's own packed GEMM), and `--model`'s report of what the engine holds of
// a model directory (held against the checkpoint's headers). Wrong input: exit 2 and a message, never a crash.
#include <QDir>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "../common/cli_runner.h"
#include "io/safetensors.h"
#include "quant/exl3_format.h"
#include "quant/exl3_gemm.h"

using namespace ts;

namespace {

const QString kExl3Model = QStringLiteral(TS_SOURCE_DIR "/resources/models/glm5-next-tiny-exl3");
const QString kTinyA = QStringLiteral(TS_SOURCE_DIR "/tests/golden/data/tiny_a");

// The first shard of the EXL3 embedded model that holds an EXL3 linear, and that linear's prefix.
std::pair<QString, std::string> firstExl3Linear() {
    for (const QString& n : QDir(kExl3Model).entryList({"*.safetensors"}, QDir::Files, QDir::Name)) {
        const SafetensorsFile f((kExl3Model + "/" + n).toStdString());
        const std::vector<std::string> p = exl3Prefixes(f.names());
        if (!p.empty()) return {kExl3Model + "/" + n, p.front()};
    }
    return {};
}

nlohmann::json readJson(const QString& path) {
    std::ifstream in(path.toStdString());
    return nlohmann::json::parse(in);
}

bool endsWith(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// {name: its header} over every shard of a model directory.
std::map<std::string, const TensorInfo*> checkpointTensors(const SafetensorsCheckpoint& c) {
    std::map<std::string, const TensorInfo*> out;
    for (const std::string& n : c.names()) out[n] = c.find(n);
    return out;
}

}  // namespace

class TestInspectCli : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    QString m_threeInst;  // tiny_a's routed experts quantized to 3INST, which carries no codebook flag

private slots:
    void initTestCase() {
        QVERIFY(m_tmp.isValid());
        m_threeInst = m_tmp.filePath("tiny_a-3inst");
        const test::CliRun r = test::runCli(
            {"quantize", "--in", kTinyA, "--out", m_threeInst, "--codebook", "3inst", "--no-calibration"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
    }

    void listsTensorsAndExl3Linears() {
        const auto [shard, prefix] = firstExl3Linear();
        QVERIFY2(!shard.isEmpty(), "no EXL3 linear in the embedded EXL3 model");
        const test::CliRun r = test::runCli({"inspect", "--file", shard});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const SafetensorsFile f(shard.toStdString());
        QVERIFY(r.out.contains(QString("%1 tensors").arg(f.tensors().size())));
        QVERIFY(r.out.contains(QString("EXL3 linears: %1").arg(exl3Prefixes(f.names()).size())));
        const Exl3Linear l = bindExl3Linear(tensorLookup(f), prefix);
        // One line per linear with its padded dims, K and codebook, as the engine binds it.
        const QString line = QString("%1  in=%2 out=%3 K=%4 codebook=%5")
                                 .arg(QString::fromStdString(prefix))
                                 .arg(l.k)
                                 .arg(l.n)
                                 .arg(l.bits)
                                 .arg(QString::fromStdString(std::string(exl3CodebookName(l.codebook))));
        QVERIFY2(r.out.contains(line), qPrintable(line + "\n" + r.out));
    }

    // The dense weight `--dequantize` writes is the one the packed GEMM multiplies by: x · W from the file
    // against exl3Gemm's x · W (rotated tile by tile, never expanded), on random inputs.
    void dequantizedWeightIsTheGemmsWeight() {
        const auto [shard, prefix] = firstExl3Linear();
        QVERIFY(!shard.isEmpty());
        QTemporaryDir tmp;
        const QString out = tmp.filePath("w.safetensors");
        const test::CliRun r = test::runCli(
            {"inspect", "--file", shard, "--tensor", QString::fromStdString(prefix), "--dequantize", "--out", out});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const SafetensorsFile wf(out.toStdString());
        const TensorInfo& w = wf.get("weight");
        const SafetensorsFile f(shard.toStdString());
        const Exl3Linear l = bindExl3Linear(tensorLookup(f), prefix);
        QCOMPARE(w.dtype, DType::F32);
        QCOMPARE(w.shape, (std::vector<int64_t>{l.k, l.n}));
        const std::vector<float> dense = toF32(w);

        constexpr int64_t m = 3;
        std::mt19937 rng(11);
        std::normal_distribution<float> nd;
        std::vector<float> x(size_t(m * l.k)), y(size_t(m * l.n), NAN);
        for (float& v : x) v = nd(rng);
        exl3Gemm(l, x.data(), m, y.data());
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < l.n; ++j) {
                double ref = 0;
                for (int64_t k = 0; k < l.k; ++k) ref += double(x[size_t(i * l.k + k)]) * dense[size_t(k * l.n + j)];
                worst = std::max(worst, std::abs(ref - double(y[size_t(i * l.n + j)])));
                scale = std::max(scale, std::abs(ref));
            }
        QVERIFY2(scale > 0.1, "a weight of zeros would pass anything");
        QVERIFY2(worst <= 1e-4 * scale, qPrintable(QString("max |x·W_file − x·W_gemm| = %1 (scale %2)").arg(worst).arg(scale)));
    }

    // `--model`: every tensor the engine binds, once, in its form and at its bytes; together with the ones it does
    // not hold, exactly the checkpoint's tensors.
    void modelReportMatchesTheCheckpoint_data() {
        QTest::addColumn<QString>("dir");
        QTest::addColumn<bool>("exl3");
        QTest::newRow("EXL3 embedded model") << kExl3Model << true;
        QTest::newRow("BF16 golden model with MTP") << kTinyA << false;
        QTest::newRow("3INST model (no codebook flags)") << m_threeInst << true;
    }
    void modelReportMatchesTheCheckpoint() {
        QFETCH(QString, dir);
        QFETCH(bool, exl3);
        QTemporaryDir tmp;
        const QString json = tmp.filePath("held.json");
        const test::CliRun r = test::runCli({"inspect", "--model", dir, "--json", json});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        const nlohmann::json j = readJson(json);
        const SafetensorsCheckpoint ckpt(dir.toStdString());
        const auto tensors = checkpointTensors(ckpt);
        QCOMPARE(j["checkpoint_tensors"].get<size_t>(), tensors.size());

        std::set<std::string> seen;
        std::map<std::string, int64_t> byForm;
        int64_t total = 0;
        for (const auto& h : j["held"]) {
            const std::string name = h["name"], form = h["form"];
            const int64_t bytes = h["bytes"];
            QVERIFY2(seen.insert(name).second, ("held twice: " + name).c_str());
            const auto it = tensors.find(name);
            QVERIFY2(it != tensors.end(), ("held but not in the checkpoint: " + name).c_str());
            const TensorInfo& t = *it->second;
            if (form == "checkpoint") {
                QCOMPARE(bytes, int64_t(t.nbytes));  // a view of the file, at its dtype
            } else if (form == "fp32") {
                // One fp32 per element (suh / svh are F16 in the file); legacy su / sv pack 16 signs per I16.
                const bool legacySigns = t.dtype == DType::I16 && (endsWith(name, ".su") || endsWith(name, ".sv"));
                QCOMPARE(bytes, 4 * t.numel() * (legacySigns ? 16 : 1));
            } else {
                QCOMPARE(form, std::string("exl3"));
                QCOMPARE(bytes, int64_t(t.nbytes));  // the trellis stays packed: its bytes, not a dense copy
            }
            byForm[form] += bytes;
            total += bytes;
        }
        QCOMPARE(j["held_bytes"].get<int64_t>(), total);
        for (const auto& n : j["not_held"]) {
            const std::string name = n;
            QVERIFY2(tensors.count(name), name.c_str());
            QVERIFY2(seen.insert(name).second, ("both held and not held: " + name).c_str());
        }
        QCOMPARE(seen.size(), tensors.size());

        // Every EXL3 linear of the checkpoint is held packed, with its scales; its codebook flag is not held.
        const std::vector<std::string> linears = exl3Prefixes(ckpt.names());
        QCOMPARE(!linears.empty(), exl3);
        QCOMPARE(byForm.count("exl3") > 0, exl3);
        std::set<std::string> notHeld;
        for (const auto& n : j["not_held"]) notHeld.insert(n.get<std::string>());
        std::set<std::string> heldNames;
        for (const auto& h : j["held"]) heldNames.insert(h["name"].get<std::string>());
        size_t flags = 0;  // codebook flags in the file (a 3INST linear has none)
        for (const std::string& p : linears) {
            QVERIFY2(heldNames.count(p + ".trellis") && heldNames.count(p + ".suh") && heldNames.count(p + ".svh"), p.c_str());
            for (const char* flag : {".mul1", ".mcg"})
                if (tensors.count(p + flag)) {
                    QVERIFY2(notHeld.count(p + flag), (p + flag).c_str());
                    ++flags;
                }
        }
        // The model's matrices are views (no copy of them is counted); the norms and gates are fp32.
        QVERIFY(byForm["checkpoint"] > 0);
        QVERIFY(byForm["fp32"] > 0);
        QVERIFY(heldNames.count("model.language_model.embed_tokens.weight") || heldNames.count("model.embed_tokens.weight"));

        // The text report: the same totals.
        QVERIFY2(r.out.contains(QString("the engine holds %1 of the checkpoint's %2 tensors")
                                    .arg(j["held"].size())
                                    .arg(tensors.size())),
                 qPrintable(r.out));
        const QString notHeldLine =
            QString("not held: %1 tensors: %2 EXL3 codebook flags").arg(j["not_held"].size()).arg(flags);
        QVERIFY2(r.out.contains(notHeldLine), qPrintable(r.out));
    }

    void modelTensorListing() {
        const test::CliRun r = test::runCli({"inspect", "--model", kTinyA, "--tensors"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        // Each held tensor on its own line: name, form, bytes (a D = 128 norm: 512 fp32 bytes).
        const QRegularExpression line("\n  model\\.language_model\\.layers\\.0\\.input_layernorm\\.weight  fp32 (\\d+)\n");
        const QRegularExpressionMatch m = line.match(r.out);
        QVERIFY2(m.hasMatch(), qPrintable(r.out));
        const nlohmann::json cfg = readJson(kTinyA + "/config.json");
        const int64_t hidden = cfg.contains("text_config") ? cfg["text_config"]["hidden_size"].get<int64_t>()
                                                           : cfg["hidden_size"].get<int64_t>();
        QCOMPARE(m.captured(1).toLongLong(), 4 * hidden);
    }

    // The quantization metadata against the tensors, at load: a sidecar entry that disagrees with its linear
    // (here K) and a bits value no checkpoint can have are refused; a config codebook the flags contradict is a
    // warning (the flags decide, as in exllamav3; a lost flag tensor shows up this way).
    void exl3MetadataAgainstTheTensors() {
        const auto [shard, prefix] = firstExl3Linear();
        QVERIFY(!prefix.empty());
        const SafetensorsFile f(shard.toStdString());
        const int k = bindExl3Linear(tensorLookup(f), prefix).bits;
        auto copyModel = [&](const QString& name) {
            const QString dir = m_tmp.filePath(name);
            QDir().mkpath(dir);
            for (const QString& n : QDir(kExl3Model).entryList(QDir::Files)) QFile::copy(kExl3Model + "/" + n, dir + "/" + n);
            return dir;
        };
        auto writeJson = [](const QString& path, const nlohmann::json& j) {
            std::ofstream(path.toStdString()) << j.dump(1);
        };
        const QString sidecar = copyModel("sidecar");
        nlohmann::json qc = readJson(kExl3Model + "/config.json")["quantization_config"];
        qc["tensor_storage"] = {{prefix, {{"quant_format", "exl3"}, {"bits_per_weight", k == 4 ? 3 : 4}}}};
        writeJson(sidecar + "/quantization_config.json", qc);
        test::CliRun r = test::runCli({"inspect", "--model", sidecar});
        QVERIFY2(r.code == 2 && r.err.contains("bits_per_weight") && r.err.contains(QString::fromStdString(prefix)),
                 qPrintable(r.err));

        const QString badBits = copyModel("bad-bits");
        nlohmann::json cfg = readJson(kExl3Model + "/config.json");
        cfg["quantization_config"]["bits"] = -3;
        writeJson(badBits + "/config.json", cfg);
        r = test::runCli({"inspect", "--model", badBits});
        QVERIFY2(r.code == 2 && r.err.contains("quantization_config.bits"), qPrintable(r.err));

        const QString otherCodebook = copyModel("other-codebook");
        cfg = readJson(kExl3Model + "/config.json");
        const std::string said = cfg["quantization_config"].value("codebook", "");
        cfg["quantization_config"]["codebook"] = said == "mcg" ? "mul1" : "mcg";
        writeJson(otherCodebook + "/config.json", cfg);
        r = test::runCli({"inspect", "--model", otherCodebook});
        QVERIFY2(r.code == 0 && r.err.contains("warning:") && r.err.contains("carry another"), qPrintable(r.err));
        r = test::runCli({"inspect", "--model", kExl3Model});  // the shipped model: consistent, no warning
        QVERIFY2(r.code == 0 && !r.err.contains("warning"), qPrintable(r.err));
    }

    void badInput_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("nothing to inspect") << QStringList{"inspect"} << "inspect needs --file X.safetensors or --model DIR";
        QTest::newRow("no such file") << QStringList{"inspect", "--file", "/nonexistent/x.safetensors"} << "/nonexistent/x.safetensors";
        QTest::newRow("dequantize without tensor") << QStringList{"inspect", "--file", kTinyA + "/model.safetensors", "--dequantize"}
                                                   << "--dequantize needs --tensor PREFIX";
        QTest::newRow("dequantize without out")
            << QStringList{"inspect", "--file", kTinyA + "/model.safetensors", "--tensor", "x", "--dequantize"} << "--dequantize needs --out FILE";
        QTest::newRow("not an EXL3 linear")
            << QStringList{"inspect", "--file", kTinyA + "/model.safetensors", "--tensor",
                           "model.language_model.layers.0.mlp.gate_proj"}
            << "model.language_model.layers.0.mlp.gate_proj";
        QTest::newRow("json without model") << QStringList{"inspect", "--file", kTinyA + "/model.safetensors", "--json", "/tmp/x.json"}
                                            << "--json is only used with --model";
        QTest::newRow("file with model") << QStringList{"inspect", "--model", kTinyA, "--file", kTinyA + "/model.safetensors"}
                                         << "--file is not used with --model";
        QTest::newRow("threads with model") << QStringList{"inspect", "--model", kTinyA, "--threads", "2"}
                                            << "--threads is not used with --model";
        QTest::newRow("no model dir") << QStringList{"inspect", "--model", "/nonexistent/m"} << "/nonexistent/m";
    }
    void badInput() {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        const test::CliRun r = test::runCli(args);
        QVERIFY2(r.code == 2, qPrintable(QString("exit %1: %2").arg(r.code).arg(r.err)));
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestInspectCli)
#include "test_inspect_cli.moc"
