// ModelConfig / GenerationConfig: the published GLM-5.3-Flash config (a copy lives in tests/data so CI
// does not depend on /work/shared), HF's derivation rules for absent schedules, the flat form, and one
// case per validation rule asserting that the message names the offending field.
#include "../common/expect_error.h"
#include "core/error.h"
#include "io/model_config.h"

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

using namespace ts;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kFlashConfig = std::string(TS_SOURCE_DIR) + "/tests/data/glm-5.3-flash.config.json";

json readJson(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
}

void writeText(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
}

// A small but complete glm5_next config (8 layers: DSA at 3 and 7), in the nested form.
json tinyConfig() {
    json j = readJson(kFlashConfig);
    json& t = j["text_config"];
    t["num_hidden_layers"] = 8;
    t["vocab_size"] = 1000;
    t["pad_token_id"] = 0;
    t["eos_token_id"] = json::array({1, 2});
    for (const char* k : {"layer_types", "mlp_layer_types", "indexer_types"}) t.erase(k);
    for (const char* k : {"image_token_id", "video_token_id", "image_start_token_id", "image_end_token_id",
                          "video_start_token_id", "video_end_token_id"})
        j[k] = 900;
    return j;
}

// Empty when parsing `j` throws a ts::Error mentioning every needle; else what happened.
QString errorCheck(const json& j, std::initializer_list<std::string> needles, std::optional<ErrorKind> kind = {}) {
    return test::errorCheck([&] { parseModelConfig(j, "cfg.json"); }, needles, kind);
}

template <typename F>
bool throwsKind(F&& fn, ErrorKind kind, std::string* msg) {
    try {
        fn();
    } catch (const Error& e) {
        *msg = e.what();
        return e.kind() == kind;
    }
    *msg = "no error";
    return false;
}

#define EXPECT_THROW_KIND(expr, kind)                                          \
    do {                                                                       \
        std::string m_;                                                        \
        QVERIFY2(throwsKind([&] { (void)(expr); }, kind, &m_), m_.c_str());    \
    } while (0)

}  // namespace

class TestModelConfig : public QObject {
    Q_OBJECT

private slots:
    void flashConfig() {
        const ModelConfig mc = parseModelConfig(readJson(kFlashConfig), kFlashConfig);
        const TextConfig& t = mc.text;
        QCOMPARE(mc.model_type, std::string("glm5_next"));
        QVERIFY(!mc.flat);
        QCOMPARE(mc.architectures, std::vector<std::string>{"Glm5NextForConditionalGeneration"});
        QCOMPARE(t.num_hidden_layers, 45);
        QCOMPARE(t.vocab_size, 154880);
        QCOMPARE(t.hidden_size, 4096);
        QCOMPARE(t.intermediate_size, 12288);
        QCOMPARE(t.moe_intermediate_size, 2048);
        QCOMPARE(t.num_attention_heads, 64);
        QCOMPARE(t.num_key_value_heads, 64);
        QCOMPARE(t.n_routed_experts, 288);
        QCOMPARE(t.n_shared_experts, 1);
        QCOMPARE(t.num_experts_per_tok, 8);
        QCOMPARE(t.routed_scaling_factor, 2.5f);
        QCOMPARE(t.kv_lora_rank, 512);
        QCOMPARE(t.q_lora_rank, 1536);
        QCOMPARE(t.qk_rope_head_dim, 0);
        QCOMPARE(t.qk_nope_head_dim, 256);
        QCOMPARE(t.v_head_dim, 256);
        QCOMPARE(mc.qkHeadDim(), 256);
        QCOMPARE(t.index_topk, 2048);
        QCOMPARE(t.index_head_dim, 128);
        QCOMPARE(t.index_n_heads, 32);
        QCOMPARE(t.index_kpool, 16);
        QVERIFY(t.index_kpool_always_select_tail);
        QCOMPARE(t.swiglu_limit.value(), 10.0f);
        QCOMPARE(t.linear_head_dim, 128);
        QCOMPARE(t.linear_num_heads, 64);
        QCOMPARE(t.linear_conv_kernel_dim, 4);
        QCOMPARE(t.linear_lower_bound.value(), -5.0f);
        QCOMPARE(t.hc_mult, 4);
        QCOMPARE(t.hc_eps, 1e-6f);
        QCOMPARE(t.hc_sinkhorn_iters, 20);
        QCOMPARE(t.rms_norm_eps, 1e-5f);
        QCOMPARE(t.max_position_embeddings, int64_t(1048576));
        QCOMPARE(t.pad_token_id.value(), 154820);
        QCOMPARE(t.eos_token_ids, (std::vector<int32_t>{154820, 154827, 154829}));
        QCOMPARE(t.num_nextn_predict_layers, 0);  // absent from this file
        QVERIFY(t.norm_topk_prob);
        QVERIFY(!t.tie_word_embeddings);

        QCOMPARE(mc.numDsaLayers(), 11);
        QCOMPARE(t.numLinearLayers(), 34);
        for (int i = 0; i < 45; ++i) {
            QCOMPARE(mc.isDsa(i), i % 4 == 3);
            QCOMPARE(t.isDenseMlp(i), i < 3);
            QVERIFY(t.indexer_types[size_t(i)] == IndexerType::Full);
            QCOMPARE(t.hasFullIndexer(i), i % 4 == 3);
        }
        QCOMPARE(layerTypeName(t.layer_types[3]), std::string_view("deepseek_sparse_attention"));

        QVERIFY(mc.vision.present);
        QCOMPARE(mc.vision.depth, 24);
        QCOMPARE(mc.vision.hidden_size, 1024);
        QCOMPARE(mc.vision.num_heads, 16);
        QCOMPARE(mc.vision.patch_size, 14);
        QCOMPARE(mc.vision.out_hidden_size, 1536);
        QCOMPARE(mc.vision.projection_intermediate_size, 10240);
        QCOMPARE(mc.vision.rope_theta, 10000.0f);
        QCOMPARE(mc.image_token_id, 154854);
        QCOMPARE(mc.video_end_token_id, 154833);
        QVERIFY(mc.quantization_config.is_null());
        QCOMPARE(mc.raw["text_config"]["qk_head_dim"].get<int>(), 256);
    }

    void derivedSchedules() {
        json j = tinyConfig();
        ModelConfig mc = parseModelConfig(j);
        QCOMPARE(mc.numDsaLayers(), 2);
        QVERIFY(mc.isDsa(3) && mc.isDsa(7) && !mc.isDsa(4));
        QVERIFY(mc.text.isDenseMlp(2) && !mc.text.isDenseMlp(3));
        for (auto it : mc.text.indexer_types) QVERIFY(it == IndexerType::Full);  // freq 1: all full

        // Fewer than 3 layers: all dense.
        j["text_config"]["num_hidden_layers"] = 2;
        mc = parseModelConfig(j);
        QCOMPARE(mc.text.mlp_layer_types.size(), size_t(2));
        QVERIFY(mc.text.isDenseMlp(1));
        QCOMPARE(mc.numDsaLayers(), 0);

        // index_topk_pattern, "full_attention" alias, linear_attn_config override.
        j = tinyConfig();
        j["text_config"]["index_topk_pattern"] = "FFFFFFFS";
        j["text_config"]["layer_types"] = {"linear_attention", "linear_attention", "linear_attention", "full_attention",
                                           "linear_attention", "linear_attention", "linear_attention",
                                           "deepseek_sparse_attention"};
        j["text_config"]["linear_attn_config"] = {{"num_heads", 8}, {"head_dim", 32}, {"short_conv_kernel_size", 3},
                                                  {"lower_bound", nullptr}, {"safe_gate", true}};
        j["text_config"]["swiglu_limit"] = nullptr;
        mc = parseModelConfig(j);
        QVERIFY(mc.isDsa(3));
        QVERIFY(mc.text.indexer_types[7] == IndexerType::Shared);
        QVERIFY(!mc.text.hasFullIndexer(7) && mc.text.hasFullIndexer(3));
        QCOMPARE(mc.text.linear_num_heads, 8);
        QCOMPARE(mc.text.linear_head_dim, 32);
        QCOMPARE(mc.text.linear_conv_kernel_dim, 3);
        QCOMPARE(mc.text.linear_lower_bound.value(), -5.0f);  // safe_gate with a null bound
        QVERIFY(!mc.text.swiglu_limit.has_value());

        // freq/offset rule: freq 1 whatever the offset -> all full; an int eos; null kv heads.
        j = tinyConfig();
        j["text_config"]["index_topk_freq"] = 1;
        j["text_config"]["index_skip_topk_offset"] = 5;
        j["text_config"]["eos_token_id"] = 3;
        j["text_config"]["num_key_value_heads"] = nullptr;
        mc = parseModelConfig(j);
        QVERIFY(mc.text.hasFullIndexer(3) && mc.text.hasFullIndexer(7));
        QCOMPARE(mc.text.eos_token_ids, std::vector<int32_t>{3});
        QCOMPARE(mc.text.num_key_value_heads, 64);

        // freq 3 / offset 4 marks linear layers "shared" too (HF ignores indexer_types there): accepted;
        // the DSA layers 3 (full) and 7 (shared, reusing layer 3's selection) are what counts.
        j = tinyConfig();
        j["text_config"]["index_topk_freq"] = 3;
        j["text_config"]["index_skip_topk_offset"] = 4;
        mc = parseModelConfig(j);
        QVERIFY(mc.text.indexer_types[5] == IndexerType::Shared && !mc.isDsa(5));
        QVERIFY(mc.text.hasFullIndexer(3) && !mc.text.hasFullIndexer(7));
    }

    void flatForm() {
        const json nested = tinyConfig();
        json flat = nested["text_config"];
        flat["model_type"] = "glm5_next";
        ModelConfig mc = parseModelConfig(flat);
        QVERIFY(mc.flat);
        QCOMPARE(mc.text.num_hidden_layers, 8);
        QVERIFY(!mc.vision.present);
        flat["model_type"] = "glm5_next_text";
        mc = parseModelConfig(flat);
        QCOMPARE(mc.text.vocab_size, 1000);
        // Errors in the flat form name the top-level field.
        flat["hc_mult"] = 0;
        QVERIFY(errorCheck(flat, {"cfg.json", ": hc_mult"}).isEmpty());
    }

    void errors_data() {
        QTest::addColumn<QString>("patch");  // JSON merge patch applied to tinyConfig()
        QTest::addColumn<QString>("needle");
        QTest::addColumn<int>("kind");
        const auto row = [](const char* tag, const char* patch, const char* needle,
                            ErrorKind kind = ErrorKind::InvalidFile) {
            QTest::newRow(tag) << QString(patch) << QString(needle) << int(kind);
        };
        const ErrorKind U = ErrorKind::Unsupported;
        row("wrong model_type", R"({"model_type":"llama"})", "supported: glm5_next", U);
        row("model_type not a string", R"({"model_type":5})", "model_type");
        row("text model_type", R"({"text_config":{"model_type":"glm_moe_dsa"}})", "text_config.model_type", U);
        row("text_config not an object", R"({"text_config":[1]})", "text_config");
        row("vision_config not an object", R"({"vision_config":"x"})", "vision_config");
        row("vision wrong type", R"({"vision_config":{"depth":"24"}})", "vision_config.depth");
        row("vision heads", R"({"vision_config":{"num_heads":7}})", "vision_config.num_heads");
        row("vision non-square", R"({"vision_config":{"patch_size":[14,16]}})", "vision_config.patch_size", U);
        row("quantization_config not an object", R"({"quantization_config":"fp8"})", "quantization_config");
        row("image token outside vocab", R"({"image_token_id":1000})", "image_token_id");
        row("missing hidden_size", R"({"text_config":{"hidden_size":null}})", "text_config.hidden_size");
        row("missing index_kpool", R"({"text_config":{"index_kpool":null}})", "text_config.index_kpool");
        row("string dim", R"({"text_config":{"hidden_size":"4096"}})", "text_config.hidden_size");
        row("float dim", R"({"text_config":{"hidden_size":4096.0}})", "text_config.hidden_size");
        row("bool as int", R"({"text_config":{"v_head_dim":true}})", "text_config.v_head_dim");
        row("zero dim", R"({"text_config":{"kv_lora_rank":0}})", "text_config.kv_lora_rank");
        row("negative dim", R"({"text_config":{"intermediate_size":-1}})", "text_config.intermediate_size");
        row("vocab > 2^31", R"({"text_config":{"vocab_size":3000000000}})", "text_config.vocab_size");
        row("float not a number", R"({"text_config":{"rms_norm_eps":"1e-5"}})", "text_config.rms_norm_eps");
        row("bool wrong type", R"({"text_config":{"norm_topk_prob":1}})", "text_config.norm_topk_prob");
        row("layer_types length", R"({"text_config":{"layer_types":["linear_attention"]}})", "text_config.layer_types");
        row("mlp_layer_types length", R"({"text_config":{"mlp_layer_types":["dense","dense"]}})",
            "text_config.mlp_layer_types");
        row("indexer_types not a list", R"({"text_config":{"indexer_types":"full"}})", "text_config.indexer_types");
        row("unknown layer type",
            R"({"text_config":{"layer_types":["linear_attention","linear_attention","linear_attention","mamba",)"
            R"("linear_attention","linear_attention","linear_attention","full_attention"]}})",
            "text_config.layer_types[3]");
        row("unknown mlp type",
            R"({"text_config":{"mlp_layer_types":["dense","dense","dense","moe",)"
            R"("sparse","sparse","sparse","sparse"]}})",
            "text_config.mlp_layer_types[3]");
        row("unknown indexer type",
            R"({"text_config":{"indexer_types":["full","full","full","full","full","full","full","half"]}})",
            "text_config.indexer_types[7]");
        row("pattern length", R"({"text_config":{"index_topk_pattern":"FFF"}})", "text_config.index_topk_pattern");
        row("pattern char", R"({"text_config":{"index_topk_pattern":"FFFFFFFX"}})", "text_config.index_topk_pattern");
        row("first DSA layer shared",
            R"({"text_config":{"indexer_types":["full","full","full","shared","full","full","full","full"]}})",
            "text_config.indexer_types[3]");
        row("freq rule leaves DSA layer 3 shared",
            R"({"text_config":{"index_topk_freq":4,"index_skip_topk_offset":3}})", "text_config.indexer_types[");
        row("qk_rope_head_dim", R"({"text_config":{"qk_rope_head_dim":64}})", "text_config.qk_rope_head_dim", U);
        row("scoring_func", R"({"text_config":{"scoring_func":"softmax"}})", "text_config.scoring_func", U);
        row("topk_method", R"({"text_config":{"topk_method":"greedy"}})", "text_config.topk_method", U);
        row("hidden_act", R"({"text_config":{"hidden_act":"gelu"}})", "text_config.hidden_act", U);
        row("index_topk % index_kpool", R"({"text_config":{"index_kpool":3}})", "index_kpool");
        row("experts_per_tok > experts", R"({"text_config":{"num_experts_per_tok":289}})",
            "text_config.num_experts_per_tok");
        row("n_group divides experts", R"({"text_config":{"n_group":5}})", "text_config.n_group");
        row("topk_group > n_group", R"({"text_config":{"n_group":4,"topk_group":5}})", "text_config.topk_group");
        row("groups too few for top-k", R"({"text_config":{"n_group":96,"topk_group":2}})",
            "text_config.num_experts_per_tok");
        row("kv heads divide heads", R"({"text_config":{"num_key_value_heads":5}})", "text_config.num_key_value_heads");
        row("hc_mult < 1", R"({"text_config":{"hc_mult":0}})", "text_config.hc_mult");
        row("hc_sinkhorn_iters < 1", R"({"text_config":{"hc_sinkhorn_iters":0}})", "text_config.hc_sinkhorn_iters");
        row("hc_sinkhorn_iters endless", R"({"text_config":{"hc_sinkhorn_iters":2147483647}})",
            "text_config.hc_sinkhorn_iters");
        row("hc_eps negative", R"({"text_config":{"hc_eps":-1}})", "text_config.hc_eps");
        row("swiglu_limit zero", R"({"text_config":{"swiglu_limit":0}})", "text_config.swiglu_limit");
        row("rms_norm_eps zero", R"({"text_config":{"rms_norm_eps":0}})", "text_config.rms_norm_eps");
        row("eos outside vocab", R"({"text_config":{"eos_token_id":[1,1000]}})", "text_config.eos_token_id");
        row("eos negative", R"({"text_config":{"eos_token_id":[-1]}})", "text_config.eos_token_id[0]");
        row("eos wrong type", R"({"text_config":{"eos_token_id":"2"}})", "text_config.eos_token_id");
        row("pad outside vocab", R"({"text_config":{"pad_token_id":5000}})", "text_config.pad_token_id");
        row("nextn negative", R"({"text_config":{"num_nextn_predict_layers":-1}})",
            "text_config.num_nextn_predict_layers");
        row("linear_attn_config type", R"({"text_config":{"linear_attn_config":3}})", "text_config.linear_attn_config");
        row("linear_attn_config field", R"({"text_config":{"linear_attn_config":{"num_heads":"8"}}})",
            "text_config.linear_attn_config.num_heads");
        row("max_position_embeddings", R"({"text_config":{"max_position_embeddings":0}})",
            "text_config.max_position_embeddings");
    }

    void errors() {
        QFETCH(QString, patch);
        QFETCH(QString, needle);
        QFETCH(int, kind);
        json j = tinyConfig();
        j.merge_patch(json::parse(patch.toStdString()));
        // merge_patch deletes keys patched with null: exactly the "missing field" cases.
        const QString err = errorCheck(j, {"cfg.json", needle.toStdString()}, ErrorKind(kind));
        QVERIFY2(err.isEmpty(), qPrintable(err));
    }

    void notAnObject() {
        QVERIFY(errorCheck(json::array(), {"cfg.json", "not a JSON object"}).isEmpty());
        json j = tinyConfig();
        j.erase("model_type");
        QVERIFY(errorCheck(j, {"model_type", "missing"}).isEmpty());
    }

    void generationConfig() {
        GenerationConfig g = parseGenerationConfig(json::object());
        QCOMPARE(g.temperature, 1.0f);
        QCOMPARE(g.top_k, 50);
        QVERIFY(!g.do_sample && !g.max_new_tokens && g.eos_token_ids.empty());
        g = parseGenerationConfig(json::parse(R"({"temperature":0.6,"top_p":0.95,"top_k":0,"do_sample":true,
            "max_new_tokens":128,"eos_token_id":[1,2],"pad_token_id":0,"bos_token_id":null,
            "transformers_version":"5.17.0"})"));
        QCOMPARE(g.temperature, 0.6f);
        QCOMPARE(g.top_p, 0.95f);
        QCOMPARE(g.top_k, 0);
        QVERIFY(g.do_sample);
        QCOMPARE(g.max_new_tokens.value(), 128);
        QCOMPARE(g.eos_token_ids, (std::vector<int32_t>{1, 2}));
        QVERIFY(!g.bos_token_id);

        const auto genError = [](const char* text, const std::string& needle) {
            try {
                parseGenerationConfig(json::parse(text), "gen.json");
            } catch (const Error& e) {
                const std::string m = e.what();
                return m.find(needle) != std::string::npos && m.find("gen.json") != std::string::npos;
            }
            return false;
        };
        QVERIFY(genError(R"({"temperature":-1})", "temperature"));
        QVERIFY(genError(R"({"temperature":"hot"})", "temperature"));
        QVERIFY(genError(R"({"top_p":0})", "top_p"));
        QVERIFY(genError(R"({"top_p":1.5})", "top_p"));
        QVERIFY(genError(R"({"top_k":-1})", "top_k"));
        QVERIFY(genError(R"({"max_new_tokens":0})", "max_new_tokens"));
        QVERIFY(genError(R"({"do_sample":"yes"})", "do_sample"));
        QVERIFY(genError(R"({"eos_token_id":[1,"x"]})", "eos_token_id[1]"));
        QVERIFY(genError(R"([])", "not a JSON object"));
    }

    void loadFromDirectory() {
        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        const std::string dir = tmp.path().toStdString();
        EXPECT_THROW_KIND(loadModelConfig(dir), ErrorKind::NotFound);
        fs::copy_file(kFlashConfig, dir + "/config.json");
        ModelConfig mc = loadModelConfig(dir);
        QVERIFY(!mc.generation.from_file);
        QCOMPARE(mc.source, dir + "/config.json");

        writeText(dir + "/generation_config.json", R"({"eos_token_id":[154820,154827],"top_p":0.9})");
        mc = loadModelConfig(dir);
        QVERIFY(mc.generation.from_file);
        QCOMPARE(mc.generation.top_p, 0.9f);
        QCOMPARE(mc.generation.eos_token_ids.size(), size_t(2));

        writeText(dir + "/generation_config.json", R"({"eos_token_id":200000})");
        EXPECT_THROW_KIND(loadModelConfig(dir), ErrorKind::InvalidFile);
        writeText(dir + "/generation_config.json", R"({"eos_token_id":)");
        EXPECT_THROW_KIND(loadModelConfig(dir), ErrorKind::InvalidFile);
        fs::remove(dir + "/generation_config.json");
        writeText(dir + "/config.json", "{ not json");
        EXPECT_THROW_KIND(loadModelConfig(dir), ErrorKind::InvalidFile);
        EXPECT_THROW_KIND(loadModelConfig(dir + "/missing"), ErrorKind::NotFound);
    }

};

QTEST_GUILESS_MAIN(TestModelConfig)
#include "test_model_config.moc"
