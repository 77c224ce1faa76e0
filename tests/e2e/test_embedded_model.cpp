// The embedded default model answers the 220 held-out prompts of tests/e2e/data/heldout.jsonl through every
// layer: chat template -> tokenizer -> ts::Engine (greedy) -> detokenizer -> reasoning parser -> tool-call
// parser, scored by exact answer. Both shipped variants are measured:
//   resources/models/glm5-next-tiny       BF16 (what tools/train/train.py exports); issue 8's bar: >= 95%
//   resources/models/glm5-next-tiny-exl3  its EXL3 export (tools/train/export_exl3.sh: routed experts at
//                                         4 bpw, experts stay packed in the forward); issue 8's bar: >= 90%
// and the EXL3 folder is checked to be the export of the BF16 checkpoint that is there now (so a retrained
// BF16 model without a re-export fails here instead of measuring a stale EXL3 model).
// Set TS_EMBEDDED_KV=fp8 to run with the fp8 KV cache (default here: fp32, to match the BF16 reference);
// TS_EMBEDDED_REPORT=FILE writes every output as JSON lines {model, id, ok, text} (docs/QUALITY.md).
// One variant alone: `test_embedded_model bf16Accuracy` or `test_embedded_model exl3Accuracy`.
#include <QtTest>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backend.h"
#include "io/safetensors.h"
#include "model/glm5_next.h"
#include "runtime/engine.h"
#include "text/chat_template.h"
#include "text/reasoning_parser.h"
#include "text/tokenizer.h"
#include "text/tool_call_parser.h"

using namespace ts;
using ojson = nlohmann::ordered_json;

namespace {

const std::string kBf16 = TS_SOURCE_DIR "/resources/models/glm5-next-tiny";
const std::string kExl3 = TS_SOURCE_DIR "/resources/models/glm5-next-tiny-exl3";
const std::string kHeldout = TS_SOURCE_DIR "/tests/e2e/data/heldout.jsonl";

// Issue 8 asks for >= 95% exact answers with BF16 weights and >= 90% with EXL3 4 bpw. A variant that meets its
// target is held to the target; one that does not is held to a floor at its measured level (docs/QUALITY.md), and
// the test prints that the target is not met. A drop below the floor means the engine, the tokenizer, the
// template, a parser, the EXL3 path or a new checkpoint made it worse. The run-4 checkpoint measures 217/220
// (98.6%) with both variants (fp32 and fp8 KV): both targets are met, so both are asserted as they stand.
constexpr double kBf16Target = 0.95, kBf16Floor = kBf16Target;  // met
constexpr double kExl3Target = 0.90, kExl3Floor = kExl3Target;  // met
static_assert(kBf16Floor <= kBf16Target && kExl3Floor <= kExl3Target);

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return {};
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string readFile(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

bool kvFp8() {
    const char* kv = std::getenv("TS_EMBEDDED_KV");
    return kv && std::string(kv) == "fp8";
}

struct Score {
    std::map<std::string, std::pair<int, int>> fam;  // family -> (correct, total)
    int correct = 0, total = 0;
    double secs = 0;
    size_t packedLinears = 0;  // EXL3 linears the model bound packed
    double acc() const { return total ? double(correct) / double(total) : 0.0; }
};

std::vector<ojson> loadHeldout() {
    std::vector<ojson> items;
    std::ifstream f(kHeldout);
    for (std::string line; std::getline(f, line);)
        if (!trim(line).empty()) items.push_back(ojson::parse(line));
    return items;
}

// Greedy answers of the model in `dir` to every held-out item, scored (tools/train/make_corpus.py's scorer:
// exact content, tool calls equal by name and arguments, non-empty reasoning when thinking is on).
Score evaluate(const std::string& dir, const std::string& label, const std::vector<ojson>& items) {
    auto backend = makeCpuBackend();
    Glm5NextModel model(dir, *backend);
    const Tokenizer tok = Tokenizer::fromDirectory(dir);
    const ChatTemplate tpl = ChatTemplate::fromModelDir(dir);
    EngineConfig ec;
    ec.maxNumSeqs = 32;
    ec.kvBudgetBytes = int64_t(1) << 30;
    ec.kvDtype = kvFp8() ? KvCacheDtype::Fp8 : KvCacheDtype::Fp32;
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
    Score s;
    s.packedLinears = model.weights().packed.size();
    s.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    engine.verifyIdle();

    std::ofstream report;
    if (const char* p = std::getenv("TS_EMBEDDED_REPORT")) report.open(p, std::ios::app);
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
        auto& f = s.fam[it["family"].get<std::string>()];
        f.first += ok;
        f.second += 1;
        s.correct += ok;
        s.total += 1;
        if (report) report << ojson{{"model", label}, {"id", it["id"]}, {"ok", ok}, {"text", texts[i]}}.dump() << "\n";
    }
    std::printf("\nembedded model %s (%s), %s KV cache, greedy, %d held-out prompts in %.1f s\n", label.c_str(),
                dir.c_str(), kvFp8() ? "fp8" : "fp32", s.total, s.secs);
    std::printf("| family | correct | accuracy |\n|---|---|---|\n");
    for (const auto& [name, v] : s.fam)
        std::printf("| %s | %d/%d | %.0f%% |\n", name.c_str(), v.first, v.second, 100.0 * v.first / v.second);
    std::printf("| **all** | %d/%d | %.1f%% |\n\n", s.correct, s.total, 100.0 * s.acc());
    std::fflush(stdout);
    return s;
}

// The floor this variant must reach, with the line that says whether issue 8's target is met.
void checkAccuracy(const std::string& label, const Score& s, double target, double floor) {
    const bool met = s.acc() >= target;
    std::printf("issue 8 target for %s: %.0f%%: %s (%.1f%%); asserted floor %.1f%%\n", label.c_str(), 100.0 * target,
                met ? "met" : "NOT met yet", 100.0 * s.acc(), 100.0 * floor);
    std::fflush(stdout);
    QVERIFY2(s.acc() >= floor, qPrintable(QString("%1: exact-answer accuracy %2% fell below the shipped model's floor %3%")
                                              .arg(QString::fromStdString(label))
                                              .arg(100.0 * s.acc(), 0, 'f', 1)
                                              .arg(100.0 * floor, 0, 'f', 1)));
}

}  // namespace

class TestEmbeddedModel : public QObject {
    Q_OBJECT

    std::vector<ojson> m_items;
    std::map<std::string, Score> m_scores;  // label -> score, for the side-by-side table at the end

private slots:
    void initTestCase() {
        m_items = loadHeldout();
        QVERIFY2(m_items.size() >= 200, kHeldout.c_str());
        if (const char* p = std::getenv("TS_EMBEDDED_REPORT")) std::ofstream(p, std::ios::trunc);  // both runs append
    }

    // The EXL3 folder holds the export of the BF16 checkpoint that is there now: every tensor it did not
    // quantize is byte-identical to the BF16 one, every BF16 tensor is either copied or packed
    // (`<prefix>.trellis`), the routed experts (and only they) are packed at 4 bits, and the tokenizer,
    // template and generation config are the same files. A retrained BF16 model makes this fail until
    // tools/train/export_exl3.sh is rerun.
    void exl3IsExportOfBf16() {
        const SafetensorsCheckpoint bf(kBf16), q(kExl3);
        int copied = 0, packed = 0;
        for (const auto& name : bf.names()) {
            const TensorInfo& b = bf.get(name);
            if (const TensorInfo* t = q.find(name)) {
                QVERIFY2(t->dtype == b.dtype && t->shape == b.shape && t->nbytes == b.nbytes &&
                             std::memcmp(t->data, b.data, b.nbytes) == 0,
                         qPrintable(QString::fromStdString(name + " differs between the BF16 and the EXL3 checkpoint: "
                                                           "rerun tools/train/export_exl3.sh")));
                ++copied;
                continue;
            }
            const std::string stem = name.size() > 7 ? name.substr(0, name.size() - 7) : name;  // minus ".weight"
            QVERIFY2(q.find(stem + ".trellis"), qPrintable(QString::fromStdString(name + " is missing from the EXL3 checkpoint")));
            QVERIFY2(stem.find(".mlp.experts.") != std::string::npos,
                     qPrintable(QString::fromStdString(stem + " is packed but is not a routed expert")));
            const TensorInfo& tr = q.get(stem + ".trellis");
            QCOMPARE(tr.shape.size(), size_t(3));
            QCOMPARE(tr.shape[2], int64_t(16 * 4));  // 16·K int16 per 16×16 tile: K = 4 bits
            ++packed;
        }
        QVERIFY(packed > 0 && copied > 0);
        std::printf("EXL3 checkpoint: %d tensors packed (routed experts, 4 bpw), %d copied byte for byte from BF16\n",
                    packed, copied);
        for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"})
            QVERIFY2(readFile(kBf16 + "/" + f) == readFile(kExl3 + "/" + f), f);
        nlohmann::json cb = nlohmann::json::parse(readFile(kBf16 + "/config.json"));
        nlohmann::json cq = nlohmann::json::parse(readFile(kExl3 + "/config.json"));
        QCOMPARE(QString::fromStdString(cq["quantization_config"].value("quant_method", "")), QStringLiteral("exl3"));
        QCOMPARE(cq["quantization_config"].value("bits", 0.0), 4.0);
        cq.erase("quantization_config");
        QVERIFY2(cb == cq, "config.json of the EXL3 checkpoint is not the BF16 one plus quantization_config");
    }

    void bf16Accuracy() {
        const Score s = evaluate(kBf16, "BF16", m_items);
        m_scores["BF16"] = s;
        QCOMPARE(s.packedLinears, size_t(0));
        checkAccuracy("BF16", s, kBf16Target, kBf16Floor);
    }

    void exl3Accuracy() {
        const Score s = evaluate(kExl3, "EXL3 4 bpw", m_items);
        m_scores["EXL3 4 bpw"] = s;
        QVERIFY2(s.packedLinears > 0, "the EXL3 model bound no packed linears: it would measure BF16 weights");
        checkAccuracy("EXL3 4 bpw", s, kExl3Target, kExl3Floor);
    }

    void cleanupTestCase() {
        if (m_scores.size() < 2) return;
        const Score &b = m_scores["BF16"], &q = m_scores["EXL3 4 bpw"];
        std::printf("\n| family | BF16 | EXL3 4 bpw |\n|---|---|---|\n");
        for (const auto& [name, v] : b.fam) {
            const auto it = q.fam.find(name);
            const auto w = it == q.fam.end() ? std::pair<int, int>{0, 0} : it->second;
            std::printf("| %s | %d/%d | %d/%d |\n", name.c_str(), v.first, v.second, w.first, w.second);
        }
        std::printf("| **all** | **%d/%d (%.1f%%)** | **%d/%d (%.1f%%)** |\n\n", b.correct, b.total, 100.0 * b.acc(),
                    q.correct, q.total, 100.0 * q.acc());
        std::fflush(stdout);
    }
};

QTEST_GUILESS_MAIN(TestEmbeddedModel)
#include "test_embedded_model.moc"
