// Binding of a glm5_next checkpoint's tensors to the model's layers, with every name and shape checked
// against the config before the first forward (a missing or mis-shaped tensor is an error naming it).
// Large matrices stay views into the mapped safetensors files (no copy); small per-channel vectors are
// uploaded to the backend as fp32.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend.h"
#include "io/model_config.h"
#include "io/safetensors.h"

namespace ts {

struct Exl3QuantConfig;

struct KdaWeights {
    WeightView qProj, kProj, vProj;  // [H·Dk, D]
    Buffer convW;                    // fp32 [3·H·Dk, K]: q, k, v channels
    WeightView fA, fB;               // forget gate low-rank: [Dk, D], [H·Dk, Dk]
    Buffer dtBias, aLog;             // fp32 [H·Dk], [H]
    WeightView bProj;                // [H, D]
    WeightView gA, gB;               // output gate: [Dk, D], [H·Dk, Dk]
    Buffer oNorm;                    // fp32 [Dk]
    WeightView oProj;                // [D, H·Dv]
};

struct IndexerWeights {
    WeightView wqB;          // [Hi·Di, q_lora]
    WeightView wk;           // [Di, D]
    Buffer kNormW, kNormB;   // fp32 [Di]
    WeightView weightsProj;  // [Hi, D]
    WeightView compressGate; // [Di, D]
    Buffer compressApe;      // fp32 [kp, Di]
};

struct MlaWeights {
    WeightView qA;       // [q_lora, D]
    Buffer qANorm;       // fp32 [q_lora]
    WeightView qB;       // [H·dn, q_lora]
    WeightView kvA;      // [R, D]
    Buffer kvANorm;      // fp32 [R]
    WeightView kvB;      // [H·(dn+dv), R]
    WeightView oProj;    // [D, H·dv]
    bool hasIndexer = false;
    IndexerWeights indexer;
};

struct MlpWeights {
    WeightView gate, up, down;  // [I, D], [I, D], [D, I]
};

struct MoeWeights {
    WeightView router;       // [E, D]
    Buffer correctionBias;   // fp32 [E]
    std::vector<MlpWeights> experts;
    // The experts' projections side by side, as the fused MoE ops take them ([E] views each; made once by
    // bindMoe, not per step).
    std::vector<WeightView> expertGate, expertUp, expertDown;
    bool hasShared = false;
    MlpWeights shared;
};

struct LayerWeights {
    Buffer inputNorm, postAttnNorm;  // fp32 [D]
    HyperConnParams attnHc, ffnHc;
    bool linear = false;  // KDA (true) or DSA-MLA (false)
    KdaWeights kda;
    MlaWeights mla;
    bool denseMlp = true;
    MlpWeights mlp;
    MoeWeights moe;
};

// The MTP block (glm_dsa.md §3.6, tests/golden/README.md) stored as layer `num_hidden_layers`:
// z = eh_proj([enorm(embed(next)) ; hnorm(h)]); r = z + attn(input_norm(z)); y = r + mlp(post_norm(r));
// logits = head(shared_head.norm(y)). A plain residual: the MTP block has no hyper-connections.
struct MtpWeights {
    bool present = false;
    Buffer enorm, hnorm;   // fp32 [D]
    WeightView ehProj;     // [D, 2D]: input = [enorm(embed) ; hnorm(hidden)]
    LayerWeights layer;    // a DSA-MLA decoder layer (full indexer), attnHc/ffnHc unused
    Buffer headNorm;       // fp32 [D] (shared_head.norm)
    WeightView head;       // [V, D] (shared_head.head, or the main lm_head when absent)
};

// How the engine holds one checkpoint tensor it binds (`twinspark-cli inspect --model`, and what the slice's
// byte model counts, tests/tools/test_slice_byte_model.py): a view of the file at its own dtype (uploaded as it is
// to a device), an fp32 copy (the per-channel vectors; an EXL3 linear's suh / svh / bias), or an EXL3 trellis kept
// packed.
enum class HeldForm : uint8_t { Checkpoint, Fp32, Exl3Trellis };
std::string_view heldFormName(HeldForm f);

struct HeldTensor {
    std::string name;  // the checkpoint's tensor name
    HeldForm form;
    int64_t bytes;     // what the engine keeps of it: the file's bytes, 4 per element, or the packed trellis
};

struct ModelWeights {
    std::string prefix;    // "model.language_model." (glm5_next) or "model." (flat)
    WeightView embed;      // [V, D]
    std::vector<LayerWeights> layers;
    Buffer finalNorm;      // fp32 [D]
    WeightView lmHead;     // [V, D]
    MtpWeights mtp;
    // Owners of the packed (EXL3) linears that views above point to; never expanded to dense.
    std::vector<std::unique_ptr<PackedLinear>> packed;
    // Every checkpoint tensor bound above, once each (a tensor bound twice, e.g. lm_head as the MTP head, is
    // listed once), in binding order. A checkpoint tensor missing here is not read by the forward.
    std::vector<HeldTensor> held;
};

// The bytes of `held` in one form (HeldForm::Exl3Trellis: the packed trellises, never expanded).
int64_t heldBytes(const ModelWeights& w, HeldForm form);

// Every matrix view of the model (embedding, projections, experts, mHC fn, heads), once each.
void forEachWeightView(const ModelWeights& w, const std::function<void(const WeightView&)>& fn);
// The checkpoint bytes a view stands for: rows × cols × the dtype's size, or a packed linear's trellis.
int64_t weightViewBytes(const WeightView& v);

// Binding's progress: decoder layers bound so far, of all — (0, layers) first, then after each layer; the head and
// the MTP block after the last call are quick. Binding reads each EXL3 linear's suh / svh (fp32 copies) and maps the
// rest: on a cold page cache ~2 s per full-width MoE layer (measured here on a 1-layer full-width slice after
// drop_caches, 0.08 s warm), so a full-size checkpoint binds for a minute or more before any upload starts.
using BindProgress = std::function<void(int64_t layersDone, int64_t layers)>;

// Binds and validates every tensor; `ckpt` must outlive the returned views. `quant` (an EXL3 checkpoint's
// quantization_config, with its sidecar's tensor_storage when there is one): each EXL3 linear is checked
// against its sidecar entry (K, codebook, stored shapes: a disagreement is refused), and a codebook other
// than the config's is reported on stderr (the tensors' flags decide, as in exllamav3; a missing flag tensor
// shows up this way).
ModelWeights bindWeights(const ModelConfig& cfg, const SafetensorsCheckpoint& ckpt, Backend& backend,
                         const Exl3QuantConfig* quant = nullptr, const BindProgress& progress = {});

}  // namespace ts
