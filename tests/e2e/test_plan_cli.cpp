// `twinspark-cli plan` as a user runs it on the real GLM-5.3-Flash config: both accountings printed, the
// JSON carries the same numbers, bad options exit with 2. The arithmetic itself is tested in
// tests/unit/test_kv_plan.cpp; here the numbers only pin that the command wires the recipe's defaults.
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "../common/cli_runner.h"

namespace {
const QString kConfig = QStringLiteral(TS_SOURCE_DIR "/tests/data/glm-5.3-flash.config.json");
}

class TestPlanCli : public QObject {
    Q_OBJECT

private slots:
    void printsBothAccountingsAtTheRecipesDefaults() {
        QTemporaryDir tmp;
        const QString json = tmp.filePath("plan.json");
        const ts::test::CliRun r = ts::test::runCli({"plan", "--config", kConfig, "--json", json});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        // TwinSpark: 15.67 GiB less 4 state slots and 8 snapshots, in 64-token blocks of 7,307 B per token.
        QVERIFY2(r.out.contains("2177216 tokens = 2.42x one 900000-token request"), qPrintable(r.out));
        // vLLM, drafter standalone (the recipe's layout when it logged 982,612 tokens).
        QVERIFY2(r.out.contains("block: 3584 tokens"), qPrintable(r.out));
        QVERIFY2(r.out.contains("GPU KV cache size: 1045054 tokens, maximum concurrency 1.16x"), qPrintable(r.out));
        QVERIFY2(r.out.contains("with the drafter slot-share: 1632203 tokens, 1.81x"), qPrintable(r.out));

        QFile f(json);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const auto j = nlohmann::json::parse(f.readAll().toStdString());
        QCOMPARE(j["tokens"].get<int64_t>(), int64_t(2177216));
        QCOMPARE(j["vllm"]["tokens"].get<int64_t>(), int64_t(1045054));
        QCOMPARE(j["vllm"]["blocks_per_request"].get<int64_t>(), int64_t(546));
        QCOMPARE(j["vllm"]["groups"].size(), size_t(7));
        QCOMPARE(j["vllm_other_drafter"]["drafter"].get<std::string>(), std::string("slot-share"));
    }

    void drafterAndBatchOptionsReachTheVllmPlan() {
        const ts::test::CliRun r = ts::test::runCli(
            {"plan", "--config", kConfig, "--drafter", "slot-share", "--max-model-len", "1000000",
             "--max-num-batched-tokens", "2048"});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        // 280 MLA + 1 tail + 4 x 9 KDA + 97 drafter, the recipe's own count for this setting.
        QVERIFY2(r.out.contains("per 1000000-token request: 414 block ids"), qPrintable(r.out));
    }

    void badOptionsExitWithTwo() {
        ts::test::CliRun r = ts::test::runCli({"plan", "--config", kConfig, "--drafter", "mtp"});
        QCOMPARE(r.code, 2);
        QVERIFY2(r.err.contains("--drafter"), qPrintable(r.err));
        r = ts::test::runCli({"plan", "--config", kConfig, "--tp", "3"});
        QCOMPARE(r.code, 2);
    }
};

QTEST_GUILESS_MAIN(TestPlanCli)
#include "test_plan_cli.moc"
