// Tokenizer parity with Hugging Face `tokenizers` 0.23 on a GLM-style tokenizer.json (tests/golden/tokenizer/,
// written by make_tokenizer_golden.py): identical ids for every recorded string (with and without special
// token recognition), identical decode output (lossy UTF-8 repair, skipped specials, unknown ids), identical
// pre-token pieces, exact round trips, a streaming detokenizer equal to the full decode, and ts::Error (never
// a crash) for malformed tokenizer.json. Also prints our encode speed next to the reference's.
#include <QtTest/QtTest>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/tokenizer.h"

using nlohmann::json;
using ts::TokenId;

namespace {

const std::string kDir = std::string(TS_SOURCE_DIR) + "/tests/golden/tokenizer";

std::string readAll(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::vector<TokenId> idsOf(const json& j) { return j.get<std::vector<TokenId>>(); }

std::string show(const std::vector<TokenId>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
}

std::string fromHex(const std::string& hex) {
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

std::string streamAll(const ts::Tokenizer& tok, const std::vector<TokenId>& ids, bool skip, bool* chunksValid) {
    ts::StreamingDetokenizer sd(tok, skip);
    std::string out;
    for (TokenId id : ids) {
        std::string piece = sd.push(id);
        if (!ts::isValidUtf8(piece)) *chunksValid = false;
        out += piece;
    }
    std::string tail = sd.finish();
    if (!ts::isValidUtf8(tail)) *chunksValid = false;
    return out + tail;
}

}  // namespace

class TestTokenizerParity : public QObject {
    Q_OBJECT

    json m_golden;
    std::optional<ts::Tokenizer> m_tok;

    // Runs `fn` on every case; collects mismatches so one failure report lists the first few.
    template <class Fn>
    void forEachCase(const char* what, Fn fn) {
        int failures = 0;
        std::string first;
        for (const json& c : m_golden["cases"]) {
            std::string msg = fn(c);
            if (!msg.empty()) {
                if (failures < 8) first += "\n  [" + c["cat"].get<std::string>() + "] " + msg;
                ++failures;
            }
        }
        if (failures) QFAIL(qPrintable(QString::fromStdString(std::string(what) + ": " + std::to_string(failures) + " mismatches" + first)));
    }

private slots:
    void initTestCase() {
        m_golden = json::parse(readAll(kDir + "/golden.json"));
        m_tok = ts::Tokenizer::fromDirectory(kDir);
        QVERIFY(m_golden["cases"].size() >= 2000);
    }

    void config() {
        const ts::TokenizerConfig& c = m_tok->config();
        QCOMPARE(c.eosToken.value_or(""), std::string("<|endoftext|>"));
        QVERIFY(m_tok->eosId().has_value());
        QCOMPARE(*m_tok->eosId(), *m_tok->tokenToId("<|endoftext|>"));
        QCOMPARE(m_tok->padId(), m_tok->eosId());
        QVERIFY(!m_tok->bosId().has_value());
        QCOMPARE(c.modelMaxLength.value_or(0), uint64_t(1048576));
        QVERIFY(c.chatTemplate.find("[gMASK]<sop>") != std::string::npos);
        // GLM's flags: role markers special, reasoning/tool tags not.
        QVERIFY(m_tok->isSpecial(*m_tok->tokenToId("<|user|>")));
        QVERIFY(m_tok->isSpecial(*m_tok->tokenToId("[gMASK]")));
        QVERIFY(!m_tok->isSpecial(*m_tok->tokenToId("<think>")));
        QVERIFY(m_tok->isAddedToken(*m_tok->tokenToId("<think>")));
        QCOMPARE(m_tok->vocabSize(), m_golden["vocab_size"].get<size_t>());
    }

    void idsMatchReference() {
        forEachCase("encode", [&](const json& c) -> std::string {
            auto want = idsOf(c["ids"]);
            auto got = m_tok->encode(c["text"].get<std::string>(), true);
            return got == want ? "" : c["text"].dump() + " want " + show(want) + " got " + show(got);
        });
    }

    void idsWithoutSpecialHandlingMatchReference() {
        forEachCase("encode(allowSpecial=false)", [&](const json& c) -> std::string {
            auto want = idsOf(c.contains("ids_nospecial") ? c["ids_nospecial"] : c["ids"]);
            auto got = m_tok->encode(c["text"].get<std::string>(), false);
            return got == want ? "" : c["text"].dump() + " want " + show(want) + " got " + show(got);
        });
    }

    void piecesMatchReference() {
        forEachCase("pre-tokenize", [&](const json& c) -> std::string {
            if (!c.contains("pieces")) return "";
            std::vector<std::string> got;
            for (const std::string& p : m_tok->preTokenize(c["text"].get<std::string>())) got.push_back(ts::byteLevelEncode(p));
            auto want = c["pieces"].get<std::vector<std::string>>();
            return got == want ? "" : c["text"].dump() + " want " + json(want).dump() + " got " + json(got).dump();
        });
    }

    void decodeMatchesReferenceAndRoundTrips() {
        forEachCase("decode", [&](const json& c) -> std::string {
            const std::string text = c["text"].get<std::string>();
            auto ids = idsOf(c["ids"]);
            std::string want = c.contains("decoded") ? c["decoded"].get<std::string>() : text;
            std::string wantSkip = c.contains("decoded_skip") ? c["decoded_skip"].get<std::string>() : want;
            if (want != text) return "reference does not round-trip " + c["text"].dump();
            if (m_tok->decode(ids) != want) return "decode " + c["text"].dump() + " got " + json(m_tok->decode(ids)).dump();
            if (m_tok->decode(ids, true) != wantSkip) return "decode(skip) " + c["text"].dump();
            if (m_tok->decode(m_tok->encode(text, false)) != text) return "round trip (allowSpecial=false) " + c["text"].dump();
            return "";
        });
    }

    void randomIdDecodesMatchReference() {
        int n = 0;
        for (const json& d : m_golden["decodes"]) {
            auto ids = idsOf(d["ids"]);
            bool skip = d["skip"].get<bool>();
            QCOMPARE(m_tok->decode(ids, skip), d["text"].get<std::string>());
            bool valid = true;
            QCOMPARE(streamAll(*m_tok, ids, skip, &valid), d["text"].get<std::string>());
            QVERIFY(valid);
            ++n;
        }
        QVERIFY(n >= 300);
    }

    void streamingEqualsFullDecode() {
        forEachCase("streaming", [&](const json& c) -> std::string {
            auto ids = idsOf(c["ids"]);
            for (bool skip : {false, true}) {
                bool valid = true;
                if (streamAll(*m_tok, ids, skip, &valid) != m_tok->decode(ids, skip) || !valid) return "ids " + c["text"].dump();
            }
            // Byte-by-byte feeding: one single-byte token per byte of the text.
            std::vector<TokenId> bytes;
            for (unsigned char b : c["text"].get<std::string>()) bytes.push_back(*m_tok->tokenToId(ts::byteLevelEncode(std::string(1, char(b)))));
            bool valid = true;
            if (streamAll(*m_tok, bytes, false, &valid) != c["text"].get<std::string>() || !valid) return "bytes " + c["text"].dump();
            return "";
        });
        // Incomplete characters at the end are flushed as U+FFFD, as the full decode does.
        auto e4 = *m_tok->tokenToId(ts::byteLevelEncode("\xE4"));
        auto b8 = *m_tok->tokenToId(ts::byteLevelEncode("\xB8"));
        ts::StreamingDetokenizer sd(*m_tok);
        QCOMPARE(sd.push(e4), std::string());
        QCOMPARE(sd.push(b8), std::string());
        QVERIFY(sd.hasPending());
        QCOMPARE(sd.push(*m_tok->tokenToId("<|user|>")), std::string("\xEF\xBF\xBD<|user|>"));
        QCOMPARE(sd.finish(), std::string());
    }

    void invalidUtf8() {
        for (const json& r : m_golden["invalid_utf8"]) {
            const std::string raw = fromHex(r["hex"].get<std::string>());
            // Python's errors="replace" == our lossy repair; its ids are the reference's ids of that text.
            QCOMPARE(ts::utf8Lossy(raw), r["replaced"].get<std::string>());
            QCOMPARE(m_tok->encode(ts::utf8Lossy(raw)), idsOf(r["ids"]));
            // Raw bytes: each ill-formed byte is its own byte token; nothing is lost.
            auto ids = m_tok->encode(raw);
            QCOMPARE(m_tok->decodeBytes(ids), raw);
            QCOMPARE(m_tok->decode(ids), ts::utf8Lossy(raw));
        }
        // Lone surrogates: the reference refuses the string; ours (as WTF-8 bytes) is lossless bytes.
        for (const json& r : m_golden["surrogates"]) {
            QVERIFY2(r.contains("error"), "tokenizers accepted a lone surrogate");
            const std::string raw = fromHex(r["wtf8_hex"].get<std::string>());
            QCOMPARE(m_tok->decodeBytes(m_tok->encode(raw)), raw);
        }
        // Arbitrary bytes never break encode and always round-trip.
        std::mt19937 rng(7);
        for (int i = 0; i < 2000; ++i) {
            std::string s(size_t(rng() % 40), '\0');
            for (char& ch : s) ch = char(rng() % 4 == 0 ? 0x80 + rng() % 128 : rng() % 256);
            QCOMPARE(m_tok->decodeBytes(m_tok->encode(s)), s);
        }
    }

    void legacyMergeFormatGivesSameIds() {
        json tj = json::parse(readAll(kDir + "/tokenizer.json"));
        json legacy = json::array();
        for (const json& m : tj["model"]["merges"]) legacy.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
        tj["model"]["merges"] = legacy;
        ts::Tokenizer tok2 = ts::Tokenizer::fromJson(tj.dump());
        int n = 0;
        for (const json& c : m_golden["cases"]) {
            if (n++ % 5) continue;
            QCOMPARE(tok2.encode(c["text"].get<std::string>()), idsOf(c["ids"]));
        }
    }

    void malformedTokenizerJsonThrows() {
        const json base = json::parse(readAll(kDir + "/tokenizer.json"));
        auto expect = [&](const char* name, const std::function<void(json&)>& edit, ts::ErrorKind kind) {
            json j = base;
            edit(j);
            try {
                ts::Tokenizer::fromJson(j.dump());
                QFAIL(qPrintable(QString("no error for: ") + name));
            } catch (const ts::Error& e) {
                QVERIFY2(e.kind() == kind, qPrintable(QString(name) + ": wrong kind: " + e.what()));
            }
        };
        using K = ts::ErrorKind;
        expect("missing model", [](json& j) { j.erase("model"); }, K::InvalidFile);
        expect("model not object", [](json& j) { j["model"] = 3; }, K::InvalidFile);
        expect("unknown model type", [](json& j) { j["model"]["type"] = "WordPiece"; }, K::Unsupported);
        expect("no vocab", [](json& j) { j["model"].erase("vocab"); }, K::InvalidFile);
        expect("no merges", [](json& j) { j["model"].erase("merges"); }, K::InvalidFile);
        expect("merge part not in vocab", [](json& j) { j["model"]["merges"].push_back({"zzz", "Ġ"}); }, K::InvalidFile);
        expect("merge result not in vocab", [](json& j) {
            const json& v = j["model"]["vocab"];
            for (const std::string a : {"q", "x", "z", "Q", "X"})
                for (const std::string b : {"q", "x", "z", "Q", "X"})
                    if (v.contains(a) && v.contains(b) && !v.contains(a + b)) {
                        j["model"]["merges"].push_back({a, b});
                        return;
                    }
        }, K::InvalidFile);
        expect("merge of three", [](json& j) { j["model"]["merges"] = json::array({"a b c"}); }, K::InvalidFile);
        expect("merge not a pair", [](json& j) { j["model"]["merges"].push_back(json::array({"a"})); }, K::InvalidFile);
        expect("merges mixed forms", [](json& j) { j["model"]["merges"].push_back("a b"); }, K::InvalidFile);
        expect("negative id", [](json& j) { j["model"]["vocab"]["a"] = -1; }, K::InvalidFile);
        expect("huge id", [](json& j) { j["model"]["vocab"]["a"] = 4000000000LL; }, K::InvalidFile);
        expect("id not a number", [](json& j) { j["model"]["vocab"]["a"] = "7"; }, K::InvalidFile);
        expect("duplicate vocab id", [](json& j) { j["model"]["vocab"]["a"] = j["model"]["vocab"]["b"]; }, K::InvalidFile);
        expect("added id clashes with vocab", [](json& j) { j["added_tokens"][0]["id"] = 5; }, K::InvalidFile);
        expect("added id twice", [](json& j) { j["added_tokens"][1]["id"] = j["added_tokens"][0]["id"]; }, K::InvalidFile);
        expect("added content twice", [](json& j) { j["added_tokens"][1]["content"] = j["added_tokens"][0]["content"]; }, K::InvalidFile);
        expect("added token without id", [](json& j) { j["added_tokens"][0].erase("id"); }, K::InvalidFile);
        expect("added id out of range", [](json& j) { j["added_tokens"][0]["id"] = 1 << 30; }, K::InvalidFile);
        expect("added flag not bool", [](json& j) { j["added_tokens"][0]["special"] = "yes"; }, K::InvalidFile);
        expect("unknown pre-tokenizer", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["type"] = "Whitespace"; }, K::Unsupported);
        expect("no ByteLevel", [](json& j) { j["pre_tokenizer"]["pretokenizers"].erase(1); }, K::Unsupported);
        expect("bad regex", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(\\p{L"; }, K::InvalidFile);
        expect("bad behavior", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; }, K::InvalidFile);
        expect("normalizer", [](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, K::Unsupported);
        expect("decoder missing", [](json& j) { j["decoder"] = nullptr; }, K::Unsupported);
        expect("unknown decoder", [](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, K::Unsupported);
        expect("unknown post-processor", [](json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; }, K::Unsupported);
        expect("unk token missing", [](json& j) { j["model"]["unk_token"] = "<nope>"; }, K::InvalidFile);
        expect("dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, K::Unsupported);
        for (const char* text : {"", "[]", "{", "{\"model\": null}", "null", "\"x\""}) {
            try {
                ts::Tokenizer::fromJson(text);
                QFAIL(qPrintable(QString("no error for text: ") + text));
            } catch (const ts::Error&) {
            }
        }
        // Truncated files: an error every time, never a crash or another exception type.
        const std::string full = base.dump();
        for (size_t cut : {size_t(1), size_t(100), full.size() / 3, full.size() / 2, full.size() - 2}) {
            QVERIFY_THROWS_EXCEPTION(ts::Error, ts::Tokenizer::fromJson(full.substr(0, cut)));
        }
        QVERIFY_THROWS_EXCEPTION(ts::Error, ts::Tokenizer::fromDirectory(kDir + "/no_such_dir"));
    }

    void benchmarkOneMegabyte() {
        const json& b = m_golden["bench"];
        std::string unit;
        bool firstCase = true;
        for (const json& c : m_golden["cases"]) {
            if (!firstCase) unit += '\n';
            unit += c["text"].get<std::string>();
            firstCase = false;
        }
        std::string text;
        for (int i = 0; i < b["reps"].get<int>(); ++i) text += (i ? "\n" : "") + unit;
        QCOMPARE(text.size(), b["bytes"].get<size_t>());
        ts::Tokenizer fresh = ts::Tokenizer::fromDirectory(kDir);  // cold piece cache
        std::vector<double> secs;
        std::vector<TokenId> ids;
        for (int r = 0; r < 3; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            ids = fresh.encode(text);
            secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        QCOMPARE(ids.size(), b["n_ids"].get<size_t>());
        uint64_t h = 0xCBF29CE484222325ULL;
        for (TokenId id : ids) h = (h ^ uint64_t(uint32_t(id))) * 0x100000001B3ULL;
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
        auto head = idsOf(b["ids_head"]);
        QCOMPARE(std::vector<TokenId>(ids.begin(), ids.begin() + std::ptrdiff_t(head.size())), head);
        QCOMPARE(std::string(hex), b["ids_fnv1a64"].get<std::string>());
        double best = *std::min_element(secs.begin(), secs.end());
        qInfo("encode %.2f MB: ours %.1f MB/s (cold cache %.1f MB/s), tokenizers %s %.1f MB/s (its own best of 5, "
              "measured on the GPU host's CPU)",
              double(text.size()) / 1e6, double(text.size()) / best / 1e6, double(text.size()) / secs[0] / 1e6,
              b["tokenizers_version"].get<std::string>().c_str(), b["hf_mb_per_s"].get<double>());
        auto t0 = std::chrono::steady_clock::now();
        std::string back = fresh.decode(ids);
        double dsec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        QCOMPARE(back, text);
        qInfo("decode: %.1f MB/s", double(text.size()) / dsec / 1e6);
    }
};

QTEST_GUILESS_MAIN(TestTokenizerParity)
#include "test_tokenizer_parity.moc"
