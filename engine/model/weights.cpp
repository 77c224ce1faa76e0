#include "model/weights.h"

#include <cmath>
#include <sstream>
#include <unordered_set>

#include "core/error.h"
#include "core/log.h"
#include "quant/exl3_format.h"
#include "quant/exl3_linear.h"

namespace ts {

namespace {

std::string shapeStr(const std::vector<int64_t>& s) {
    std::ostringstream o;
    o << "[";
    for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
    o << "]";
    return o.str();
}

class Binder {
public:
    Binder(const SafetensorsCheckpoint& ckpt, Backend& backend, ModelWeights& owner, const Exl3QuantConfig* quant)
        : m_ckpt(ckpt), m_backend(backend), m_owner(owner), m_quant(quant) {}

    const TensorInfo* find(const std::string& name) const { return m_ckpt.find(name); }

    const TensorInfo& require(const std::string& name, const std::vector<int64_t>& shape) const {
        const TensorInfo* t = m_ckpt.find(name);
        if (!t) fail(ErrorKind::InvalidFile, "checkpoint " + m_ckpt.path() + ": missing tensor '" + name +
                                                 "' (expected shape " + shapeStr(shape) + ")");
        if (t->shape != shape)
            fail(ErrorKind::InvalidFile, "checkpoint " + m_ckpt.path() + ": tensor '" + name + "' has shape " +
                                             shapeStr(t->shape) + ", the config implies " + shapeStr(shape));
        return *t;
    }

    static void requireFloat(const TensorInfo& t) {
        if (t.dtype != DType::BF16 && t.dtype != DType::F16 && t.dtype != DType::F32)
            fail(ErrorKind::InvalidFile, "tensor '" + t.name + "' has dtype " + std::string(dtypeName(t.dtype)) +
                                             "; BF16, F16 or F32 expected");
    }

    // A matrix [rows, cols] kept in place.
    WeightView matrix(const std::string& name, int64_t rows, int64_t cols) const {
        const TensorInfo& t = require(name, {rows, cols});
        requireFloat(t);
        hold(name, HeldForm::Checkpoint, int64_t(t.nbytes));
        return WeightView{t.dtype, t.data, rows, cols};
    }

    // A linear layer `prefix` with out_features rows and in_features cols: a dense `prefix.weight`, or an
    // EXL3-packed one (`prefix.trellis` + `.suh`/`.svh` …) that stays packed.
    WeightView linear(const std::string& prefix, int64_t rows, int64_t cols) const {
        if (m_ckpt.find(prefix + ".weight") || !m_ckpt.find(prefix + ".trellis")) return matrix(prefix + ".weight", rows, cols);
        const Exl3ModuleStorage* storage = nullptr;
        if (m_quant)
            if (auto it = m_quant->tensorStorage.find(prefix); it != m_quant->tensorStorage.end()) storage = &it->second;
        auto pl = std::make_unique<Exl3PackedLinear>(bindExl3Linear(tensorLookup(m_ckpt), prefix, storage), cols, rows);
        const Exl3Linear& l = pl->linear();
        ++m_exl3Linears;
        if (m_quant && !m_quant->codebook.empty() && exl3CodebookName(l.codebook) != m_quant->codebook &&
            m_otherCodebook++ == 0)
            m_firstOther = prefix + " (" + std::string(exl3CodebookName(l.codebook)) + ")";
        hold(prefix + ".trellis", HeldForm::Exl3Trellis, l.packedBytes());
        // Legacy ±1 sign words are unpacked to fp32 scales like suh / svh (exl3_format.h).
        hold(prefix + (l.legacySigns ? ".su" : ".suh"), HeldForm::Fp32, l.k * 4);
        hold(prefix + (l.legacySigns ? ".sv" : ".svh"), HeldForm::Fp32, l.n * 4);
        if (!l.bias.empty()) hold(prefix + ".bias", HeldForm::Fp32, int64_t(l.bias.size()) * 4);
        const WeightView v = WeightView::of(*pl);
        m_owner.packed.push_back(std::move(pl));
        return v;
    }

    // Any float tensor of the given shape, converted to fp32 and uploaded.
    Buffer vec(const std::string& name, const std::vector<int64_t>& shape) const {
        const TensorInfo& t = require(name, shape);
        requireFloat(t);
        const std::vector<float> v = toF32(t);
        hold(name, HeldForm::Fp32, int64_t(v.size()) * 4);
        return m_backend.upload(v.data(), v.size() * 4);
    }

    // Records a bound tensor in ModelWeights::held, once.
    void hold(const std::string& name, HeldForm form, int64_t bytes) const {
        if (m_held.insert(name).second) m_owner.held.push_back(HeldTensor{name, form, bytes});
    }

    // The packed experts tensor [E, rows, cols] viewed as expert e's [rows, cols] matrix.
    WeightView expertSlice(const TensorInfo& t, int64_t e, int64_t rows, int64_t cols) const {
        hold(t.name, HeldForm::Checkpoint, int64_t(t.nbytes));
        WeightView all{t.dtype, t.data, t.shape[0] * rows, cols};
        return all.rowSlice(e * rows, rows);
    }

    Backend& backend() const { return m_backend; }

    // The config's codebook against the tensors' flags: a warning, once, after binding.
    void reportCodebooks() const {
        if (m_otherCodebook == 0) return;
        logFormat(LogLevel::Warning,
                  "warning: %s: config.json's quantization_config says codebook %s, but %lld of %lld EXL3 linears "
                  "carry another (first: %s). The tensors' flags are used; if a flag tensor (.mul1 / .mcg) was "
                  "lost in a copy or an edit, those linears decode wrongly.",
                  m_ckpt.path().c_str(), m_quant->codebook.c_str(), static_cast<long long>(m_otherCodebook),
                  static_cast<long long>(m_exl3Linears), m_firstOther.c_str());
    }

private:
    const SafetensorsCheckpoint& m_ckpt;
    Backend& m_backend;
    ModelWeights& m_owner;
    const Exl3QuantConfig* m_quant;                   // null: not an EXL3 checkpoint (or not said)
    mutable std::unordered_set<std::string> m_held;  // names already in m_owner.held
    mutable int64_t m_exl3Linears = 0, m_otherCodebook = 0;
    mutable std::string m_firstOther;
};

// site = "attn" | "ffn". Checkpoints name them `hc_attn_fn` (as saved by transformers and shipped);
// transformers' module tree calls them `attn_hc.fn`: both are accepted.
HyperConnParams bindHc(const Binder& b, const std::string& layer, const std::string& site, const TextConfig& c) {
    const int64_t n = c.hc_mult, mix = 2 * n + n * n;
    const std::string p = b.find(layer + ".hc_" + site + "_fn") ? layer + ".hc_" + site + "_" : layer + "." + site + "_hc.";
    HyperConnParams h;
    h.fn = b.matrix(p + "fn", mix, n * c.hidden_size);
    h.base = b.vec(p + "base", {mix});
    h.scale = b.vec(p + "scale", {3});
    h.n = c.hc_mult;
    h.sinkhornIters = c.hc_sinkhorn_iters;
    h.hcEps = c.hc_eps;
    h.normEps = c.rms_norm_eps;
    return h;
}

MlpWeights bindMlp(const Binder& b, const std::string& p, int64_t D, int64_t I) {
    return MlpWeights{b.linear(p + ".gate_proj", I, D), b.linear(p + ".up_proj", I, D), b.linear(p + ".down_proj", D, I)};
}

KdaWeights bindKda(const Binder& b, const std::string& p, const TextConfig& c) {
    const int64_t D = c.hidden_size, H = c.linear_num_heads, Dk = c.linear_head_dim, C = H * Dk;
    const int64_t K = c.linear_conv_kernel_dim;
    KdaWeights w;
    w.qProj = b.linear(p + ".q_proj", C, D);
    w.kProj = b.linear(p + ".k_proj", C, D);
    w.vProj = b.linear(p + ".v_proj", C, D);
    // transformers 5.17 stores one depthwise conv over [q | k | v]; other exports keep three.
    if (b.find(p + ".conv1d.weight")) {
        w.convW = b.vec(p + ".conv1d.weight", {3 * C, 1, K});
    } else {
        std::vector<float> all;
        for (const char* part : {"q", "k", "v"}) {
            const TensorInfo& t = b.require(p + "." + part + "_conv1d.weight", {C, 1, K});
            Binder::requireFloat(t);
            const std::vector<float> v = toF32(t);
            b.hold(t.name, HeldForm::Fp32, int64_t(v.size()) * 4);
            all.insert(all.end(), v.begin(), v.end());
        }
        w.convW = b.backend().upload(all.data(), all.size() * 4);
    }
    const std::string fg = b.find(p + ".forget_gate.A_log") ? p + ".forget_gate" : p;
    w.fA = b.linear(fg + ".f_a_proj", Dk, D);
    w.fB = b.linear(fg + ".f_b_proj", C, Dk);
    w.dtBias = b.vec(fg + ".dt_bias", {C});
    w.aLog = b.vec(fg + ".A_log", {H});
    w.bProj = b.linear(p + ".b_proj", H, D);
    w.gA = b.linear(p + ".g_a_proj", Dk, D);
    w.gB = b.linear(p + ".g_b_proj", C, Dk);
    w.oNorm = b.vec(p + ".o_norm.weight", {Dk});
    w.oProj = b.linear(p + ".o_proj", D, C);
    return w;
}

MlaWeights bindMla(const Binder& b, const std::string& p, const TextConfig& c, bool fullIndexer) {
    const int64_t D = c.hidden_size, H = c.num_attention_heads, R = c.kv_lora_rank, ql = c.q_lora_rank;
    const int64_t dn = c.qk_nope_head_dim, dv = c.v_head_dim;
    MlaWeights w;
    w.qA = b.linear(p + ".q_a_proj", ql, D);
    w.qANorm = b.vec(p + ".q_a_layernorm.weight", {ql});
    w.qB = b.linear(p + ".q_b_proj", H * dn, ql);
    w.kvA = b.linear(p + ".kv_a_proj_with_mqa", R, D);
    w.kvANorm = b.vec(p + ".kv_a_layernorm.weight", {R});
    w.kvB = b.matrix(p + ".kv_b_proj.weight", H * (dn + dv), R);
    w.oProj = b.linear(p + ".o_proj", D, H * dv);
    w.hasIndexer = fullIndexer;
    if (fullIndexer) {
        const int64_t Hi = c.index_n_heads, Di = c.index_head_dim, kp = c.index_kpool;
        const std::string i = p + ".indexer";
        w.indexer.wqB = b.linear(i + ".wq_b", Hi * Di, ql);
        w.indexer.wk = b.linear(i + ".wk", Di, D);
        w.indexer.kNormW = b.vec(i + ".k_norm.weight", {Di});
        w.indexer.kNormB = b.vec(i + ".k_norm.bias", {Di});
        w.indexer.weightsProj = b.linear(i + ".weights_proj", Hi, D);
        w.indexer.compressGate = b.matrix(i + ".index_kpool_compress_gate", Di, D);
        w.indexer.compressApe = b.vec(i + ".index_kpool_compress_ape", {kp, Di});
    }
    return w;
}

MoeWeights bindMoe(const Binder& b, const std::string& p, const TextConfig& c) {
    const int64_t D = c.hidden_size, E = c.n_routed_experts, I = c.moe_intermediate_size;
    MoeWeights w;
    w.router = b.matrix(p + ".gate.weight", E, D);
    w.correctionBias = b.vec(p + ".gate.e_score_correction_bias", {E});
    w.experts.resize(size_t(E));
    if (b.find(p + ".experts.gate_up_proj")) {
        // transformers' packed layout: gate_up [E, 2I, D] (gate rows first), down [E, D, I].
        const TensorInfo& gu = b.require(p + ".experts.gate_up_proj", {E, 2 * I, D});
        const TensorInfo& dn = b.require(p + ".experts.down_proj", {E, D, I});
        Binder::requireFloat(gu);
        Binder::requireFloat(dn);
        for (int64_t e = 0; e < E; ++e) {
            const WeightView both = b.expertSlice(gu, e, 2 * I, D);
            w.experts[size_t(e)] = MlpWeights{both.rowSlice(0, I), both.rowSlice(I, I), b.expertSlice(dn, e, D, I)};
        }
    } else {
        for (int64_t e = 0; e < E; ++e)
            w.experts[size_t(e)] = bindMlp(b, p + ".experts." + std::to_string(e), D, I);
    }
    for (const MlpWeights& ex : w.experts) {
        w.expertGate.push_back(ex.gate);
        w.expertUp.push_back(ex.up);
        w.expertDown.push_back(ex.down);
    }
    w.hasShared = c.n_shared_experts > 0;
    if (w.hasShared) w.shared = bindMlp(b, p + ".shared_experts", D, I * c.n_shared_experts);
    return w;
}

LayerWeights bindLayer(const Binder& b, const std::string& p, const TextConfig& c, bool linear, bool dense,
                       bool fullIndexer, bool withHc = true) {
    LayerWeights w;
    w.inputNorm = b.vec(p + ".input_layernorm.weight", {c.hidden_size});
    w.postAttnNorm = b.vec(p + ".post_attention_layernorm.weight", {c.hidden_size});
    if (withHc) {
        w.attnHc = bindHc(b, p, "attn", c);
        w.ffnHc = bindHc(b, p, "ffn", c);
    }
    w.linear = linear;
    if (linear) w.kda = bindKda(b, p + ".self_attn", c);
    else w.mla = bindMla(b, p + ".self_attn", c, fullIndexer);
    w.denseMlp = dense;
    if (dense) w.mlp = bindMlp(b, p + ".mlp", c.hidden_size, c.intermediate_size);
    else w.moe = bindMoe(b, p + ".mlp", c);
    return w;
}

}  // namespace

ModelWeights bindWeights(const ModelConfig& cfg, const SafetensorsCheckpoint& ckpt, Backend& backend,
                         const Exl3QuantConfig* quant, const BindProgress& progress) {
    const TextConfig& c = cfg.text;
    ModelWeights w;
    Binder b(ckpt, backend, w, quant);
    w.prefix = ckpt.find("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
    const int64_t V = c.vocab_size, D = c.hidden_size;
    w.embed = b.matrix(w.prefix + "embed_tokens.weight", V, D);
    if (progress) progress(0, c.num_hidden_layers);
    for (int L = 0; L < c.num_hidden_layers; ++L) {
        w.layers.push_back(bindLayer(b, w.prefix + "layers." + std::to_string(L), c, c.isLinear(L),
                                     c.isDenseMlp(L), c.hasFullIndexer(L)));
        if (progress) progress(L + 1, c.num_hidden_layers);
    }
    w.finalNorm = b.vec(w.prefix + "norm.weight", {D});
    if (ckpt.find("lm_head.weight") || ckpt.find("lm_head.trellis")) w.lmHead = b.linear("lm_head", V, D);
    else if (c.tie_word_embeddings) w.lmHead = w.embed;
    else fail(ErrorKind::InvalidFile, "checkpoint " + ckpt.path() + ": missing tensor 'lm_head.weight'");

    // MTP block: layer index num_hidden_layers, when the config announces one and the file has it.
    const std::string m = w.prefix + "layers." + std::to_string(c.num_hidden_layers);
    if (c.num_nextn_predict_layers > 0 && ckpt.find(m + ".eh_proj.weight")) {
        w.mtp.present = true;
        w.mtp.enorm = b.vec(m + ".enorm.weight", {D});
        w.mtp.hnorm = b.vec(m + ".hnorm.weight", {D});
        w.mtp.ehProj = b.linear(m + ".eh_proj", D, 2 * D);
        // A DSA-MLA decoder layer with a full indexer and a plain residual (no mHC), as vLLM's
        // GLM-5.3-Flash MTP layer; its MLP follows the last main layer's kind.
        w.mtp.layer = bindLayer(b, m, c, false, c.isDenseMlp(c.num_hidden_layers - 1), true, false);
        w.mtp.headNorm = b.vec(m + ".shared_head.norm.weight", {D});
        w.mtp.head = ckpt.find(m + ".shared_head.head.weight") || ckpt.find(m + ".shared_head.head.trellis")
                         ? b.linear(m + ".shared_head.head", V, D)
                         : w.lmHead;
    }
    b.reportCodebooks();
    return w;
}

namespace {
void forLayer(const LayerWeights& l, const std::function<void(const WeightView&)>& fn) {
    auto mlp = [&](const MlpWeights& m) {
        fn(m.gate);
        fn(m.up);
        fn(m.down);
    };
    for (const HyperConnParams* hc : {&l.attnHc, &l.ffnHc})
        if (hc->fn.data || hc->fn.packed) fn(hc->fn);
    if (l.linear) {
        const KdaWeights& k = l.kda;
        for (const WeightView* v : {&k.qProj, &k.kProj, &k.vProj, &k.fA, &k.fB, &k.bProj, &k.gA, &k.gB, &k.oProj})
            fn(*v);
    } else {
        const MlaWeights& m = l.mla;
        for (const WeightView* v : {&m.qA, &m.qB, &m.kvA, &m.kvB, &m.oProj}) fn(*v);
        if (m.hasIndexer)
            for (const WeightView* v : {&m.indexer.wqB, &m.indexer.wk, &m.indexer.weightsProj, &m.indexer.compressGate})
                fn(*v);
    }
    if (l.denseMlp) {
        mlp(l.mlp);
    } else {
        fn(l.moe.router);
        for (const MlpWeights& e : l.moe.experts) mlp(e);
        if (l.moe.hasShared) mlp(l.moe.shared);
    }
}
}  // namespace

std::string_view heldFormName(HeldForm f) {
    switch (f) {
    case HeldForm::Checkpoint: return "checkpoint";
    case HeldForm::Fp32: return "fp32";
    case HeldForm::Exl3Trellis: return "exl3";
    }
    return "?";
}

int64_t heldBytes(const ModelWeights& w, HeldForm form) {
    int64_t n = 0;
    for (const HeldTensor& h : w.held)
        if (h.form == form) n += h.bytes;
    return n;
}

int64_t weightViewBytes(const WeightView& v) {
    if (v.packed) {
        const TrellisView* t = v.packed->trellis();
        return t ? int64_t(t->trellisBytes()) : 0;
    }
    return v.data ? v.rows * v.cols * int64_t(dtypeSize(v.dtype)) : 0;
}

void forEachWeightView(const ModelWeights& w, const std::function<void(const WeightView&)>& fn) {
    auto visit = [&](const WeightView& v) {
        if (v.data || v.packed) fn(v);
    };
    visit(w.embed);
    for (const LayerWeights& l : w.layers) forLayer(l, visit);
    visit(w.lmHead);
    if (w.mtp.present) {
        visit(w.mtp.ehProj);
        forLayer(w.mtp.layer, visit);
        visit(w.mtp.head);
    }
}

}  // namespace ts
