// The embedded default model (resources/models/glm5-next-tiny, BF16) answers the 220 held-out prompts of
// tests/e2e/data/heldout.jsonl through every layer: chat template -> tokenizer -> ts::Engine (greedy) ->
// detokenizer -> reasoning parser -> tool-call parser, scored by exact answer. Issue 8's bar: >= 95% (BF16).
// Set TS_EMBEDDED_KV=fp8 to run with the fp8 KV cache (default here: fp32, to match the BF16 reference);
// TS_EMBEDDED_REPORT=FILE writes every output as JSON lines (docs/QUALITY.md).
#include <QtTest>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backend.h"
#include "model/glm5_next.h"
#include "runtime/engine.h"
#include "text/chat_template.h"
#include "text/reasoning_parser.h"
#include "text/tokenizer.h"
#include "text/tool_call_parser.h"

using namespace ts;
using ojson = nlohmann::ordered_json;

namespace {

const std::string kModel = TS_SOURCE_DIR "/resources/models/glm5-next-tiny";
const std::string kHeldout = TS_SOURCE_DIR "/tests/e2e/data/heldout.jsonl";
// Issue 8 asks for >= 95% exact answers (BF16). The shipped model measures 55.5% on CPU (docs/QUALITY.md): the
// target is NOT met yet and issue 8 stays open. Until a better-trained model ships, this test guards the
// measured level: a drop below it means the engine, the tokenizer, the template or a parser broke.
constexpr double kIssueTarget = 0.95;
constexpr double kRegressionFloor = 0.50;

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return {};
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

class TestEmbeddedModel : public QObject {
    Q_OBJECT

private slots:
    void heldoutAccuracy() {
        std::vector<ojson> items;
        {
            std::ifstream f(kHeldout);
            QVERIFY2(f.good(), kHeldout.c_str());
            for (std::string line; std::getline(f, line);)
                if (!trim(line).empty()) items.push_back(ojson::parse(line));
        }
        QVERIFY(items.size() >= 200);

        const char* kv = std::getenv("TS_EMBEDDED_KV");
        const bool fp8 = kv && std::string(kv) == "fp8";
        auto backend = makeCpuBackend();
        Glm5NextModel model(kModel, *backend);
        const Tokenizer tok = Tokenizer::fromDirectory(kModel);
        const ChatTemplate tpl = ChatTemplate::fromModelDir(kModel);
        EngineConfig ec;
        ec.maxNumSeqs = 16;
        ec.kvBudgetBytes = int64_t(1) << 30;
        ec.kvDtype = fp8 ? KvCacheDtype::Fp8 : KvCacheDtype::Fp32;
        Engine engine(model, ec, &tok);

        const size_t n = items.size();
        std::vector<std::string> prompts(n), texts(n);
        std::mutex mu;
        const auto t0 = std::chrono::steady_clock::now();
        for (size_t i = 0; i < n; ++i) {
            const ojson& it = items[i];
            const ojson kwargs = {{"enable_thinking", it["enable_thinking"].get<bool>()}};
            prompts[i] = tpl.render(it["messages"], it["tools"], true, kwargs);
            SamplingParams sp;
            sp.temperature = 0.0f;
            sp.maxTokens = 200;
            engine.submit(tok.encode(prompts[i], true), sp, [&, i](const EngineEvent& e) {
                std::lock_guard<std::mutex> lock(mu);
                texts[i] += e.text;
            });
        }
        engine.waitIdle();
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

        std::map<std::string, std::pair<int, int>> fam;  // family -> (correct, total)
        int correct = 0;
        std::ofstream report;
        if (const char* p = std::getenv("TS_EMBEDDED_REPORT")) report.open(p);
        for (size_t i = 0; i < n; ++i) {
            const ojson& it = items[i];
            const ReasoningDelta rd = ReasoningParser::parse(texts[i], ChatTemplate::promptEndsInReasoning(prompts[i]));
            const ToolParseResult tp = ToolCallParser::parse(rd.content, it["tools"]);
            const ojson& exp = it["expected"];
            bool ok = trim(tp.content) == exp["content"].get<std::string>();
            if (it["enable_thinking"].get<bool>() && trim(rd.reasoning).empty()) ok = false;
            if (tp.tool_calls.size() != exp["tool_calls"].size()) ok = false;
            for (size_t c = 0; ok && c < tp.tool_calls.size(); ++c) {
                const ojson& e = exp["tool_calls"][c];
                ok = tp.tool_calls[c].name == e["name"].get<std::string>() &&
                     nlohmann::json::parse(tp.tool_calls[c].arguments) == nlohmann::json(e["arguments"]);
            }
            auto& f = fam[it["family"].get<std::string>()];
            f.first += ok;
            f.second += 1;
            correct += ok;
            if (report) report << ojson{{"id", it["id"]}, {"ok", ok}, {"text", texts[i]}}.dump() << "\n";
        }
        const double acc = double(correct) / double(n);
        std::printf("\nembedded model, %s KV cache, greedy, %zu held-out prompts in %.1f s\n", fp8 ? "fp8" : "fp32",
                    n, secs);
        std::printf("| family | correct | accuracy |\n|---|---|---|\n");
        for (const auto& [name, v] : fam)
            std::printf("| %s | %d/%d | %.0f%% |\n", name.c_str(), v.first, v.second, 100.0 * v.first / v.second);
        std::printf("| **all** | %d/%zu | %.1f%% |\n\n", correct, n, 100.0 * acc);
        std::fflush(stdout);
        engine.verifyIdle();
        std::printf("issue 8 target %.0f%%: %s\n", 100.0 * kIssueTarget, acc >= kIssueTarget ? "met" : "NOT met yet");
        QVERIFY2(acc >= kRegressionFloor, qPrintable(QString("exact-answer accuracy %1% fell below the shipped model's "
                                                             "measured level (floor %2%)")
                                                         .arg(100.0 * acc, 0, 'f', 1).arg(100.0 * kRegressionFloor)));
    }
};

QTEST_GUILESS_MAIN(TestEmbeddedModel)
#include "test_embedded_model.moc"
