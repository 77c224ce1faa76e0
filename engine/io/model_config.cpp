#include "io/model_config.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

namespace ts {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr uint64_t kMaxConfigBytes = 64ull << 20;

// A value as it appears in the file, shortened for an error message.
std::string shown(const json& v) {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// Typed access to the fields of one JSON object. Every error names "<source>: <prefix><key>".
// Convention: an absent key takes the default; `null` is accepted only where HF allows None.
class Fields {
public:
    Fields(const json& obj, std::string source, std::string prefix)
        : m_obj(obj), m_source(std::move(source)), m_prefix(std::move(prefix)) {}

    const std::string& source() const { return m_source; }
    std::string name(const std::string& key) const { return m_prefix + key; }
    Fields child(const json& obj, const std::string& key) const { return Fields(obj, m_source, name(key) + "."); }

    [[noreturn]] void bad(const std::string& key, const std::string& what,
                          ErrorKind kind = ErrorKind::InvalidFile) const {
        fail(kind, m_source + ": " + name(key) + ": " + what);
    }
    const json* find(const std::string& key) const {
        const auto it = m_obj.find(key);
        return it == m_obj.end() ? nullptr : &*it;
    }
    bool has(const std::string& key) const { return find(key) != nullptr; }
    // Absent or null.
    const json* findNonNull(const std::string& key) const {
        const json* v = find(key);
        return v && !v->is_null() ? v : nullptr;
    }

    int64_t intValue(const std::string& key, const json& v, int64_t lo, int64_t hi) const {
        // JSON floats (4096.0) are rejected like HF's strict dataclasses do: a dimension is an integer.
        if (!v.is_number_integer()) bad(key, "must be an integer, got " + shown(v));
        if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
            bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + shown(v));
        const int64_t x = v.get<int64_t>();
        if (x < lo || x > hi)
            bad(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + shown(v));
        return x;
    }
    int64_t i64(const std::string& key, std::optional<int64_t> def, int64_t lo, int64_t hi) const {
        const json* v = find(key);
        if (!v) {
            if (!def) bad(key, "missing (required)");
            return *def;
        }
        return intValue(key, *v, lo, hi);
    }
    // Dimensions and counts: positive by default.
    int32_t i32(const std::string& key, std::optional<int32_t> def, int32_t lo = 1, int32_t hi = kI32Max) const {
        return int32_t(i64(key, def, lo, hi));
    }
    std::optional<int32_t> optI32(const std::string& key, int32_t lo, int32_t hi) const {
        const json* v = findNonNull(key);
        if (!v) return std::nullopt;
        return int32_t(intValue(key, *v, lo, hi));
    }
    float floatValue(const std::string& key, const json& v) const {
        if (!v.is_number()) bad(key, "must be a number, got " + shown(v));
        const double d = v.get<double>();
        if (!std::isfinite(d) || std::fabs(d) > double(std::numeric_limits<float>::max()))
            bad(key, "must be a finite number, got " + shown(v));
        return float(d);
    }
    float f32(const std::string& key, float def) const {
        const json* v = find(key);
        return v ? floatValue(key, *v) : def;
    }
    // null -> nullopt (HF's "None": e.g. no SwiGLU clamp); absent -> def.
    std::optional<float> optF32(const std::string& key, std::optional<float> def) const {
        const json* v = find(key);
        if (!v) return def;
        if (v->is_null()) return std::nullopt;
        return floatValue(key, *v);
    }
    bool boolean(const std::string& key, bool def) const {
        const json* v = find(key);
        if (!v) return def;
        if (!v->is_boolean()) bad(key, "must be true or false, got " + shown(*v));
        return v->get<bool>();
    }
    std::string str(const std::string& key, const std::string& def) const {
        const json* v = find(key);
        if (!v) return def;
        if (!v->is_string()) bad(key, "must be a string, got " + shown(*v));
        return v->get<std::string>();
    }
    // int, list of ints, or null (token id lists such as eos_token_id).
    std::vector<int32_t> intList(const std::string& key) const {
        std::vector<int32_t> out;
        const json* v = findNonNull(key);
        if (!v) return out;
        if (!v->is_array()) return {int32_t(intValue(key, *v, 0, kI32Max))};
        for (size_t i = 0; i < v->size(); ++i)
            out.push_back(int32_t(intValue(key + "[" + std::to_string(i) + "]", (*v)[i], 0, kI32Max)));
        return out;
    }
    // int, or a list of equal ints (HF allows [h, w] for ViT sizes; we only run square ones).
    int32_t intOrUniformList(const std::string& key, int32_t def) const {
        const json* v = find(key);
        if (!v) return def;
        if (!v->is_array()) return int32_t(intValue(key, *v, 1, kI32Max));
        if (v->empty()) bad(key, "must not be an empty list");
        const int32_t first = int32_t(intValue(key + "[0]", (*v)[0], 1, kI32Max));
        for (size_t i = 1; i < v->size(); ++i)
            if (intValue(key + "[" + std::to_string(i) + "]", (*v)[i], 1, kI32Max) != first)
                bad(key, "non-square sizes " + shown(*v) + " are not supported", ErrorKind::Unsupported);
        return first;
    }

private:
    const json& m_obj;
    std::string m_source;
    std::string m_prefix;
};

template <typename E>
struct EnumName {
    std::string_view name;
    E value;
};

template <typename E, size_t N>
std::vector<E> enumList(const Fields& f, const std::string& key, const json& v, int32_t layers,
                        const EnumName<E> (&names)[N]) {
    if (!v.is_array()) f.bad(key, "must be a list of strings, got " + shown(v));
    if (v.size() != size_t(layers))
        f.bad(key, "has " + std::to_string(v.size()) + " entries but num_hidden_layers is " + std::to_string(layers));
    std::string expected;
    for (const auto& n : names) expected += (expected.empty() ? "" : ", ") + std::string(n.name);
    std::vector<E> out;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string at = key + "[" + std::to_string(i) + "]";
        if (!v[i].is_string()) f.bad(at, "must be a string, got " + shown(v[i]));
        const std::string& s = v[i].get_ref<const std::string&>();
        bool found = false;
        for (const auto& n : names)
            if (n.name == s) { out.push_back(n.value); found = true; break; }
        if (!found) f.bad(at, "unknown value \"" + s + "\" (expected one of: " + expected + ")");
    }
    return out;
}

constexpr EnumName<LayerType> kLayerNames[] = {
    {"linear_attention", LayerType::LinearAttention},
    {"deepseek_sparse_attention", LayerType::DeepseekSparseAttention},
    {"full_attention", LayerType::DeepseekSparseAttention},  // HF alias
};
constexpr EnumName<MlpLayerType> kMlpNames[] = {{"dense", MlpLayerType::Dense}, {"sparse", MlpLayerType::Sparse}};
constexpr EnumName<IndexerType> kIndexerNames[] = {{"full", IndexerType::Full}, {"shared", IndexerType::Shared}};

// The per-layer schedules, derived as Glm5NextTextConfig.__post_init__ does when a list is absent.
void parseSchedules(const Fields& f, TextConfig& t) {
    const int32_t L = t.num_hidden_layers;
    if (const json* v = f.findNonNull("layer_types")) {
        t.layer_types = enumList(f, "layer_types", *v, L, kLayerNames);
    } else {
        for (int32_t i = 0; i < L; ++i)
            t.layer_types.push_back(i % 4 == 3 ? LayerType::DeepseekSparseAttention : LayerType::LinearAttention);
    }
    if (const json* v = f.findNonNull("mlp_layer_types")) {
        t.mlp_layer_types = enumList(f, "mlp_layer_types", *v, L, kMlpNames);
    } else {
        for (int32_t i = 0; i < L; ++i) t.mlp_layer_types.push_back(i < 3 ? MlpLayerType::Dense : MlpLayerType::Sparse);
    }
    if (const json* v = f.findNonNull("indexer_types")) {
        t.indexer_types = enumList(f, "indexer_types", *v, L, kIndexerNames);
    } else if (const json* p = f.findNonNull("index_topk_pattern")) {
        // A string of F/S (or a list of full/shared) overrides the freq/offset schedule.
        if (p->is_string()) {
            const std::string& s = p->get_ref<const std::string&>();
            if (s.size() != size_t(L))
                f.bad("index_topk_pattern", "has " + std::to_string(s.size()) +
                                                " characters but num_hidden_layers is " + std::to_string(L));
            for (size_t i = 0; i < s.size(); ++i) {
                if (s[i] != 'F' && s[i] != 'S')
                    f.bad("index_topk_pattern", "character " + std::to_string(i) + " is '" + std::string(1, s[i]) +
                                                    "', expected 'F' (full) or 'S' (shared)");
                t.indexer_types.push_back(s[i] == 'F' ? IndexerType::Full : IndexerType::Shared);
            }
        } else {
            t.indexer_types = enumList(f, "index_topk_pattern", *p, L, kIndexerNames);
        }
    } else {
        const int64_t freq = std::max<int64_t>(f.i64("index_topk_freq", 1, -kI32Max, kI32Max), 1);
        const int64_t offset = f.i64("index_skip_topk_offset", 2, -kI32Max, kI32Max);
        for (int64_t i = 0; i < L; ++i)
            t.indexer_types.push_back(std::max<int64_t>(i - offset + 1, 0) % freq == 0 ? IndexerType::Full
                                                                                       : IndexerType::Shared);
    }
}

TextConfig parseText(const Fields& f, bool topLevelTie) {
    TextConfig t;
    t.vocab_size = f.i32("vocab_size", {});
    t.hidden_size = f.i32("hidden_size", {});
    t.intermediate_size = f.i32("intermediate_size", {});
    t.moe_intermediate_size = f.i32("moe_intermediate_size", {});
    t.num_hidden_layers = f.i32("num_hidden_layers", {});
    t.num_attention_heads = f.i32("num_attention_heads", {});
    t.n_routed_experts = f.i32("n_routed_experts", {});
    t.num_experts_per_tok = f.i32("num_experts_per_tok", {});
    t.kv_lora_rank = f.i32("kv_lora_rank", {});
    t.q_lora_rank = f.i32("q_lora_rank", {});
    t.qk_nope_head_dim = f.i32("qk_nope_head_dim", {});
    t.v_head_dim = f.i32("v_head_dim", {});
    t.index_topk = f.i32("index_topk", {});
    t.index_head_dim = f.i32("index_head_dim", {});
    t.index_n_heads = f.i32("index_n_heads", {});
    t.index_kpool = f.i32("index_kpool", {});

    t.num_key_value_heads = f.optI32("num_key_value_heads", 1, kI32Max).value_or(t.num_attention_heads);
    t.n_shared_experts = f.i32("n_shared_experts", 1, 0);
    t.routed_scaling_factor = f.f32("routed_scaling_factor", 2.5f);
    t.qk_rope_head_dim = f.i32("qk_rope_head_dim", 0, 0);
    t.n_group = f.i32("n_group", 1);
    t.topk_group = f.i32("topk_group", 1);
    t.norm_topk_prob = f.boolean("norm_topk_prob", true);
    t.scoring_func = f.str("scoring_func", "sigmoid");
    t.topk_method = f.str("topk_method", "noaux_tc");
    t.hidden_act = f.str("hidden_act", "silu");
    t.rms_norm_eps = f.f32("rms_norm_eps", 1e-5f);
    t.max_position_embeddings = f.i64("max_position_embeddings", 4096, 1, std::numeric_limits<int64_t>::max());
    t.pad_token_id = f.optI32("pad_token_id", 0, kI32Max);
    t.eos_token_ids = f.intList("eos_token_id");
    t.tie_word_embeddings = f.boolean("tie_word_embeddings", topLevelTie);
    t.attention_bias = f.boolean("attention_bias", false);
    t.index_kpool_always_select_tail = f.boolean("index_kpool_always_select_tail", true);
    t.swiglu_limit = f.optF32("swiglu_limit", 10.0f);
    t.linear_head_dim = f.i32("linear_head_dim", 128);
    t.linear_num_heads = f.i32("linear_num_heads", 64);
    t.linear_conv_kernel_dim = f.i32("linear_conv_kernel_dim", 4);
    t.linear_lower_bound = f.optF32("linear_lower_bound", -5.0f);
    t.hc_mult = f.i32("hc_mult", 4);
    t.hc_eps = f.f32("hc_eps", 1e-6f);
    // 20 in every published config; the bound keeps a corrupt value from making each forward endless.
    t.hc_sinkhorn_iters = f.i32("hc_sinkhorn_iters", 20, 1, 1000);
    t.num_nextn_predict_layers = f.i32("num_nextn_predict_layers", 0, 0);

    // Kimi-style `linear_attn_config` overrides the linear_* fields (HF reads these four keys).
    if (const json* la = f.findNonNull("linear_attn_config")) {
        if (!la->is_object()) f.bad("linear_attn_config", "must be an object, got " + shown(*la));
        const Fields l = f.child(*la, "linear_attn_config");
        t.linear_head_dim = l.i32("head_dim", t.linear_head_dim);
        t.linear_num_heads = l.i32("num_heads", t.linear_num_heads);
        t.linear_conv_kernel_dim = l.i32("short_conv_kernel_size", t.linear_conv_kernel_dim);
        t.linear_lower_bound = l.optF32("lower_bound", t.linear_lower_bound);
        if (l.boolean("safe_gate", false) && !t.linear_lower_bound) t.linear_lower_bound = -5.0f;
    }
    parseSchedules(f, t);
    return t;
}

void validateText(const Fields& f, const TextConfig& t) {
    const auto unsupported = [&](const std::string& key, const std::string& what) {
        f.bad(key, what, ErrorKind::Unsupported);
    };
    if (t.qk_rope_head_dim != 0)
        unsupported("qk_rope_head_dim", "is " + std::to_string(t.qk_rope_head_dim) +
                                            "; glm5_next attention is NoPE and only 0 is supported");
    const auto only = [&](const std::string& key, const std::string& value, const char* supported) {
        if (value != supported)
            unsupported(key, "\"" + value + "\" is not supported (only \"" + supported + "\")");
    };
    only("scoring_func", t.scoring_func, "sigmoid");
    only("topk_method", t.topk_method, "noaux_tc");
    only("hidden_act", t.hidden_act, "silu");

    if (t.num_attention_heads % t.num_key_value_heads != 0)
        f.bad("num_key_value_heads", std::to_string(t.num_key_value_heads) + " does not divide num_attention_heads " +
                                         std::to_string(t.num_attention_heads));
    if (t.num_experts_per_tok > t.n_routed_experts)
        f.bad("num_experts_per_tok", std::to_string(t.num_experts_per_tok) + " is larger than n_routed_experts " +
                                         std::to_string(t.n_routed_experts));
    if (t.n_routed_experts % t.n_group != 0)
        f.bad("n_group", std::to_string(t.n_group) + " does not divide n_routed_experts " +
                             std::to_string(t.n_routed_experts));
    if (t.topk_group > t.n_group)
        f.bad("topk_group", std::to_string(t.topk_group) + " is larger than n_group " + std::to_string(t.n_group));
    if (int64_t(t.topk_group) * (t.n_routed_experts / t.n_group) < t.num_experts_per_tok)
        f.bad("num_experts_per_tok", std::to_string(t.num_experts_per_tok) + " experts cannot be chosen from " +
                                         std::to_string(t.topk_group) + " groups (topk_group) of " +
                                         std::to_string(t.n_routed_experts / t.n_group) + " experts");
    if (t.index_topk % t.index_kpool != 0)
        f.bad("index_topk", std::to_string(t.index_topk) + " is not a multiple of index_kpool " +
                                std::to_string(t.index_kpool));
    if (!(t.routed_scaling_factor > 0)) f.bad("routed_scaling_factor", "must be positive");
    if (!(t.rms_norm_eps > 0)) f.bad("rms_norm_eps", "must be positive");
    if (!(t.hc_eps >= 0)) f.bad("hc_eps", "must not be negative");
    if (t.swiglu_limit && !(*t.swiglu_limit > 0)) f.bad("swiglu_limit", "must be positive or null (no clamp)");
    if (t.pad_token_id && *t.pad_token_id >= t.vocab_size)
        f.bad("pad_token_id", std::to_string(*t.pad_token_id) + " is outside the vocabulary (vocab_size " +
                                  std::to_string(t.vocab_size) + ")");
    for (int32_t id : t.eos_token_ids)
        if (id >= t.vocab_size)
            f.bad("eos_token_id", std::to_string(id) + " is outside the vocabulary (vocab_size " +
                                      std::to_string(t.vocab_size) + ")");

    // IndexShare: a shared DSA layer reuses the selection of the last DSA layer that ran its indexer.
    // On linear_attention layers the entry means nothing (HF's freq/offset rule marks some of them
    // "shared" and HF ignores it there), so it is accepted and ignored.
    bool sawFull = false;
    for (int32_t i = 0; i < t.num_hidden_layers; ++i) {
        const std::string at = "indexer_types[" + std::to_string(i) + "]";
        if (!t.isDsa(i)) continue;
        if (t.indexer_types[size_t(i)] == IndexerType::Shared) {
            if (!sawFull)
                f.bad(at, "is \"shared\" but no earlier DSA layer has a full indexer to share "
                          "(the first DSA layer must be \"full\")");
        } else {
            sawFull = true;
        }
    }
}

VisionConfig parseVision(const Fields& f) {
    VisionConfig v;
    v.present = true;
    v.model_type = f.str("model_type", v.model_type);
    v.depth = f.i32("depth", v.depth);
    v.hidden_size = f.i32("hidden_size", v.hidden_size);
    v.hidden_act = f.str("hidden_act", v.hidden_act);
    v.attention_bias = f.boolean("attention_bias", v.attention_bias);
    v.num_heads = f.i32("num_heads", v.num_heads);
    v.in_channels = f.i32("in_channels", v.in_channels);
    v.image_size = f.intOrUniformList("image_size", v.image_size);
    v.patch_size = f.intOrUniformList("patch_size", v.patch_size);
    v.rms_norm_eps = f.f32("rms_norm_eps", v.rms_norm_eps);
    v.spatial_merge_size = f.i32("spatial_merge_size", v.spatial_merge_size);
    v.temporal_patch_size = f.intOrUniformList("temporal_patch_size", v.temporal_patch_size);
    v.out_hidden_size = f.i32("out_hidden_size", v.out_hidden_size);
    v.intermediate_size = f.i32("intermediate_size", v.intermediate_size);
    v.projection_intermediate_size = f.i32("projection_intermediate_size", v.projection_intermediate_size);
    v.swiglu_limit = f.optF32("swiglu_limit", v.swiglu_limit);
    if (const json* rp = f.findNonNull("rope_parameters")) {
        if (!rp->is_object()) f.bad("rope_parameters", "must be an object, got " + shown(*rp));
        v.rope_theta = f.child(*rp, "rope_parameters").f32("rope_theta", v.rope_theta);
    }
    if (v.hidden_size % v.num_heads != 0)
        f.bad("num_heads",
              std::to_string(v.num_heads) + " does not divide hidden_size " + std::to_string(v.hidden_size));
    return v;
}

// Reads a JSON file; nullopt when it does not exist and `required` is false.
std::optional<json> readJsonFile(const std::string& path, bool required) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
        if (!required) return std::nullopt;
        fail(ErrorKind::NotFound, path + " does not exist");
    }
    const auto size = fs::file_size(path, ec);
    if (ec) fail(ErrorKind::Io, "cannot read " + path + ": " + ec.message());
    if (size > kMaxConfigBytes)
        fail(ErrorKind::InvalidFile, path + ": " + std::to_string(size) + " bytes is too large");
    std::ifstream in(path, std::ios::binary);
    std::string text(size_t(size), '\0');
    if (!in || !in.read(text.data(), std::streamsize(size))) fail(ErrorKind::Io, "cannot read " + path);
    try {
        return json::parse(text);
    } catch (const json::exception& e) {
        fail(ErrorKind::InvalidFile, path + ": not valid JSON: " + e.what());
    }
}

}  // namespace

std::string_view layerTypeName(LayerType t) {
    return t == LayerType::LinearAttention ? "linear_attention" : "deepseek_sparse_attention";
}
std::string_view mlpLayerTypeName(MlpLayerType t) { return t == MlpLayerType::Dense ? "dense" : "sparse"; }
std::string_view indexerTypeName(IndexerType t) { return t == IndexerType::Full ? "full" : "shared"; }

bool TextConfig::isDsa(int layer) const {
    TS_CHECK(layer >= 0 && size_t(layer) < layer_types.size(), "layer index out of range");
    return layer_types[size_t(layer)] == LayerType::DeepseekSparseAttention;
}

bool TextConfig::isDenseMlp(int layer) const {
    TS_CHECK(layer >= 0 && size_t(layer) < mlp_layer_types.size(), "layer index out of range");
    return mlp_layer_types[size_t(layer)] == MlpLayerType::Dense;
}

bool TextConfig::hasFullIndexer(int layer) const {
    return isDsa(layer) && indexer_types[size_t(layer)] == IndexerType::Full;
}

int TextConfig::numDsaLayers() const {
    int n = 0;
    for (LayerType t : layer_types) n += t == LayerType::DeepseekSparseAttention;
    return n;
}

ModelConfig parseModelConfig(const json& config, const std::string& source) {
    if (!config.is_object()) fail(ErrorKind::InvalidFile, source + ": top level is not a JSON object");
    ModelConfig mc;
    mc.source = source;
    mc.raw = config;
    const Fields top(config, source, "");

    if (!top.has("model_type")) top.bad("model_type", "missing (required)");
    mc.model_type = top.str("model_type", "");
    if (mc.model_type != "glm5_next" && mc.model_type != "glm5_next_text")
        top.bad("model_type", "\"" + mc.model_type + "\" is not supported (supported: glm5_next, glm5_next_text)",
                ErrorKind::Unsupported);
    if (const json* a = top.findNonNull("architectures")) {
        if (!a->is_array()) top.bad("architectures", "must be a list of strings");
        for (const auto& s : *a) {
            if (!s.is_string()) top.bad("architectures", "must be a list of strings, got " + shown(*a));
            mc.architectures.push_back(s.get<std::string>());
        }
    }
    const bool topTie = top.boolean("tie_word_embeddings", false);

    // Nested form (text_config) or flat form (text fields at the top level), as HF accepts both.
    const json* tc = mc.model_type == "glm5_next" ? top.findNonNull("text_config") : nullptr;
    if (tc) {
        if (!tc->is_object()) top.bad("text_config", "must be an object, got " + shown(*tc));
        const Fields tf = top.child(*tc, "text_config");
        const std::string tt = tf.str("model_type", "glm5_next_text");
        if (tt != "glm5_next_text")
            tf.bad("model_type", "\"" + tt + "\" is not supported (expected glm5_next_text)", ErrorKind::Unsupported);
        mc.text = parseText(tf, topTie);
        validateText(tf, mc.text);
    } else {
        mc.flat = true;
        mc.text = parseText(top, topTie);
        validateText(top, mc.text);
    }

    if (const json* vc = top.findNonNull("vision_config")) {
        if (!vc->is_object()) top.bad("vision_config", "must be an object, got " + shown(*vc));
        mc.vision = parseVision(top.child(*vc, "vision_config"));
    }

    // Multimodal marker ids: checked against the vocabulary only when the file sets them (HF's
    // defaults are GLM-5.3-Flash's and would not fit a small test vocabulary).
    const std::pair<const char*, int32_t*> ids[] = {
        {"image_token_id", &mc.image_token_id},        {"video_token_id", &mc.video_token_id},
        {"image_start_token_id", &mc.image_start_token_id}, {"image_end_token_id", &mc.image_end_token_id},
        {"video_start_token_id", &mc.video_start_token_id}, {"video_end_token_id", &mc.video_end_token_id},
    };
    for (const auto& [key, dst] : ids) {
        if (!top.has(key)) continue;
        *dst = top.i32(key, {}, 0, mc.text.vocab_size - 1);
    }

    if (const json* q = top.findNonNull("quantization_config")) {
        if (!q->is_object()) top.bad("quantization_config", "must be an object, got " + shown(*q));
        mc.quantization_config = *q;
    }
    return mc;
}

GenerationConfig parseGenerationConfig(const json& config, const std::string& source) {
    if (!config.is_object()) fail(ErrorKind::InvalidFile, source + ": top level is not a JSON object");
    GenerationConfig g;
    g.raw = config;
    // transformers writes unset fields as null; treat them as absent.
    json clean = json::object();
    for (const auto& [k, v] : config.items())
        if (!v.is_null()) clean[k] = v;
    const Fields f(clean, source, "");
    g.temperature = f.f32("temperature", g.temperature);
    if (g.temperature < 0) f.bad("temperature", "must not be negative");
    g.top_p = f.f32("top_p", g.top_p);
    if (!(g.top_p > 0 && g.top_p <= 1)) f.bad("top_p", "must be in (0, 1]");
    g.top_k = f.i32("top_k", g.top_k, 0);
    g.do_sample = f.boolean("do_sample", g.do_sample);
    g.max_new_tokens = f.optI32("max_new_tokens", 1, kI32Max);
    g.eos_token_ids = f.intList("eos_token_id");
    g.pad_token_id = f.optI32("pad_token_id", 0, kI32Max);
    g.bos_token_id = f.optI32("bos_token_id", 0, kI32Max);
    return g;
}

ModelConfig loadModelConfig(const std::string& modelDir) {
    std::error_code ec;
    if (!fs::is_directory(modelDir, ec)) fail(ErrorKind::NotFound, "model directory " + modelDir + " does not exist");
    const std::string cfgPath = (fs::path(modelDir) / "config.json").string();
    ModelConfig mc = parseModelConfig(*readJsonFile(cfgPath, true), cfgPath);

    const std::string genPath = (fs::path(modelDir) / "generation_config.json").string();
    if (const auto gj = readJsonFile(genPath, false)) {
        mc.generation = parseGenerationConfig(*gj, genPath);
        mc.generation.from_file = true;
        const int32_t vocab = mc.text.vocab_size;
        const auto check = [&](const char* key, int32_t id) {
            if (id >= vocab)
                fail(ErrorKind::InvalidFile, genPath + ": " + key + ": " + std::to_string(id) +
                                                 " is outside the vocabulary (vocab_size " +
                                                 std::to_string(vocab) + ")");
        };
        for (int32_t id : mc.generation.eos_token_ids) check("eos_token_id", id);
        if (mc.generation.pad_token_id) check("pad_token_id", *mc.generation.pad_token_id);
        if (mc.generation.bos_token_id) check("bos_token_id", *mc.generation.bos_token_id);
    }
    return mc;
}

}  // namespace ts
