// config.json / generation_config.json of a `glm5_next` (GLM-5.3-Flash) checkpoint, parsed with the
// semantics of transformers 5.17 (Glm5NextConfig / Glm5NextTextConfig): the same defaults, the same
// derivation of the per-layer schedules when they are absent, the same `linear_attn_config` override.
// Fields keep their Hugging Face names so that a value can be looked up in the json by name.
//
// Everything is validated up front: a wrong type, a missing required dimension, an unknown enum string,
// a schedule list of the wrong length or a combination the engine cannot run is a ts::Error whose
// message names the file and the field (e.g. "text_config.index_kpool"). Later code may trust it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ts {

// layer_types[L]. "full_attention" in a config is read as an alias of deepseek_sparse_attention (HF).
enum class LayerType : uint8_t { LinearAttention, DeepseekSparseAttention };
// mlp_layer_types[L]: dense SwiGLU MLP or routed MoE (+ shared experts).
enum class MlpLayerType : uint8_t { Dense, Sparse };
// indexer_types[L]: a DSA layer runs its own indexer (Full) or reuses the selection of the previous
// DSA layer with a full indexer (Shared).
enum class IndexerType : uint8_t { Full, Shared };

std::string_view layerTypeName(LayerType t);
std::string_view mlpLayerTypeName(MlpLayerType t);
std::string_view indexerTypeName(IndexerType t);

struct TextConfig {
    // Required (no default is trusted for a dimension that shapes the weights).
    int32_t vocab_size = 0;
    int32_t hidden_size = 0;
    int32_t intermediate_size = 0;
    int32_t moe_intermediate_size = 0;
    int32_t num_hidden_layers = 0;
    int32_t num_attention_heads = 0;
    int32_t n_routed_experts = 0;
    int32_t num_experts_per_tok = 0;
    int32_t kv_lora_rank = 0;
    int32_t q_lora_rank = 0;
    int32_t qk_nope_head_dim = 0;
    int32_t v_head_dim = 0;
    int32_t index_topk = 0;
    int32_t index_head_dim = 0;
    int32_t index_n_heads = 0;
    int32_t index_kpool = 0;  // HF default 16, the release reportedly 4: must come from the file

    // Optional, HF defaults.
    int32_t num_key_value_heads = 0;  // absent or null -> num_attention_heads
    int32_t n_shared_experts = 1;
    float routed_scaling_factor = 2.5f;
    int32_t qk_rope_head_dim = 0;  // must be 0: the glm5_next MLA is NoPE
    int32_t n_group = 1;
    int32_t topk_group = 1;
    bool norm_topk_prob = true;
    std::string scoring_func = "sigmoid";  // only "sigmoid" is supported
    std::string topk_method = "noaux_tc";  // only "noaux_tc" (bias for selection only) is supported
    std::string hidden_act = "silu";       // only "silu" is supported
    float rms_norm_eps = 1e-5f;
    int64_t max_position_embeddings = 4096;
    std::optional<int32_t> pad_token_id;  // absent or null -> none
    std::vector<int32_t> eos_token_ids;   // `eos_token_id`: int, list or null
    bool tie_word_embeddings = false;
    bool attention_bias = false;
    bool index_kpool_always_select_tail = true;
    std::optional<float> swiglu_limit = 10.0f;  // null -> no clamp
    int32_t linear_head_dim = 128;
    int32_t linear_num_heads = 64;
    int32_t linear_conv_kernel_dim = 4;
    // KDA gate: g = linear_lower_bound * sigmoid(...). null -> HF's unbounded gate (not the release).
    std::optional<float> linear_lower_bound = -5.0f;
    int32_t hc_mult = 4;
    float hc_eps = 1e-6f;
    int32_t hc_sinkhorn_iters = 20;
    int32_t num_nextn_predict_layers = 0;  // MTP layers stored after the last decoder layer

    // Per-layer schedules, num_hidden_layers entries each (derived as HF does when absent).
    std::vector<LayerType> layer_types;
    std::vector<MlpLayerType> mlp_layer_types;
    std::vector<IndexerType> indexer_types;

    bool isDsa(int layer) const;
    bool isLinear(int layer) const { return !isDsa(layer); }
    bool isDenseMlp(int layer) const;
    // A DSA layer that runs its own indexer.
    bool hasFullIndexer(int layer) const;
    int numDsaLayers() const;
    int numLinearLayers() const { return num_hidden_layers - numDsaLayers(); }
    int qkHeadDim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

// The vision tower (GLM-OCR ViT). Parsed and checked for types only; not used by the engine yet.
struct VisionConfig {
    bool present = false;  // false: absent from config.json, the fields hold HF's defaults
    std::string model_type = "glm5_next_vision";
    int32_t depth = 24;
    int32_t hidden_size = 1024;
    std::string hidden_act = "silu";
    bool attention_bias = true;
    int32_t num_heads = 16;
    int32_t in_channels = 3;
    int32_t image_size = 336;
    int32_t patch_size = 14;
    float rms_norm_eps = 1e-5f;
    int32_t spatial_merge_size = 2;
    int32_t temporal_patch_size = 2;
    int32_t out_hidden_size = 1536;
    int32_t intermediate_size = 4096;
    int32_t projection_intermediate_size = 10240;
    std::optional<float> swiglu_limit = 10.0f;
    float rope_theta = 10000.0f;  // rope_parameters.rope_theta
};

// generation_config.json. Defaults are transformers' GenerationConfig defaults.
struct GenerationConfig {
    bool from_file = false;
    float temperature = 1.0f;
    float top_p = 1.0f;
    int32_t top_k = 50;  // 0 = disabled
    bool do_sample = false;
    std::optional<int32_t> max_new_tokens;
    std::vector<int32_t> eos_token_ids;  // `eos_token_id`: int, list or null
    std::optional<int32_t> pad_token_id;
    std::optional<int32_t> bos_token_id;
    nlohmann::json raw;
};

struct ModelConfig {
    std::string source;      // the file it was read from (for messages)
    std::string model_type;  // "glm5_next" or "glm5_next_text"
    std::vector<std::string> architectures;
    // True when the text fields sit at the top level (no text_config), as HF also accepts.
    bool flat = false;
    TextConfig text;
    VisionConfig vision;
    int32_t image_token_id = 154854;
    int32_t video_token_id = 154855;
    int32_t image_start_token_id = 154830;
    int32_t image_end_token_id = 154831;
    int32_t video_start_token_id = 154832;
    int32_t video_end_token_id = 154833;
    nlohmann::json quantization_config;  // null when absent; interpreted by the weight loader
    nlohmann::json raw;                  // the whole config.json
    GenerationConfig generation;         // defaults when generation_config.json is absent

    bool isDsa(int layer) const { return text.isDsa(layer); }
    int numDsaLayers() const { return text.numDsaLayers(); }
    int qkHeadDim() const { return text.qkHeadDim(); }
};

// Parses a config.json already in memory. `source` names it in error messages.
ModelConfig parseModelConfig(const nlohmann::json& config, const std::string& source = "config.json");
GenerationConfig parseGenerationConfig(const nlohmann::json& config,
                                       const std::string& source = "generation_config.json");
// Reads <modelDir>/config.json (required) and <modelDir>/generation_config.json (optional), and checks
// that the generation config's token ids lie in the vocabulary.
ModelConfig loadModelConfig(const std::string& modelDir);

}  // namespace ts
