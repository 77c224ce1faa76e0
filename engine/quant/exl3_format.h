// EXL3 (exllamav3's QTIP-style trellis format): the checkpoint side. What a quantized linear looks like
// in safetensors, how `quantization_config` and the `quantization_config.json` sidecar describe it, and
// the binding of one linear (a tensor-name prefix) to a validated Exl3Linear view.
// Spec: shared/specs/exl3.md §2 (layout), §8 (pitfalls and what to reject).
//
// Orientation (spec §0): the inner matrix is W (k × n) = (in_features × out_features), y = x · W;
// the Hugging Face nn.Linear weight is Wᵀ. k and n are the padded sizes (multiples of 128) taken from
// the trellis shape; a model config may have smaller in/out sizes (callers zero-extend / trim).
#pragma once

#include "io/safetensors.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ts {

// Per-tensor codebook; the value is exllamav3's internal id `cb` (spec §2.3).
enum class Exl3Codebook : uint8_t { Inst3 = 0, Mcg = 1, Mul1 = 2 };
std::string_view exl3CodebookName(Exl3Codebook cb);  // "3inst", "mcg", "mul1"
std::optional<Exl3Codebook> exl3CodebookFromName(std::string_view name);

// The multipliers locked since exllamav3 0f2da5d; the flag tensors `.mcg` / `.mul1` store them as int32.
inline constexpr uint32_t kExl3McgMultiplier = 0xCBAC1FEDu;   // 3417055213, int32 -877912083
inline constexpr uint32_t kExl3Mul1Multiplier = 0x83DCD12Du;  // 2212286765, int32 -2082680531
inline constexpr int kExl3MaxBits = 8;
inline constexpr int64_t kExl3Pad = 128;  // both dimensions are padded to multiples of the Hadamard size

// One entry of the sidecar's "tensor_storage" (spec §2.5): a leaf module key -> what it stores.
struct Exl3StoredTensor {
    std::vector<int64_t> shape;  // [] for a 0-dim tensor (flags)
    bool hasShape = false;       // "shape" was present
    int64_t nBytes = -1;         // -1 when absent
    std::string dtype;    // as written (torch or safetensors spelling); informational
};
struct Exl3ModuleStorage {
    std::map<std::string, Exl3StoredTensor> storedTensors;  // full tensor name -> info
    bool exl3 = false;                                       // "quant_format": "exl3"
    int bitsPerWeight = 0;                                   // K, when exl3
    std::optional<uint32_t> mul1Multiplier;
    std::optional<uint32_t> mcgMultiplier;
};

// config.json's `quantization_config` when quant_method == "exl3" (spec §2.5), optionally merged with
// the sidecar. `bits` and `codebook` are informational: the per-tensor tensors decide K and codebook.
struct Exl3QuantConfig {
    std::string version;
    double bits = 0.0;      // average K of the decoder's quantized linears (head excluded)
    int headBits = 6;       // K of lm_head; 16 = unquantized head
    std::string codebook;   // may be empty (older conversions)
    std::string outScales;  // "always" / "never" / "auto" / empty
    std::map<std::string, Exl3ModuleStorage> tensorStorage;  // from the sidecar; empty if none
};

// nullopt when `qc` is null/absent or names another quant_method; a malformed exl3 block is a
// ts::Error(InvalidFile) naming `where` (the file) and the field.
std::optional<Exl3QuantConfig> parseExl3QuantConfig(const nlohmann::json& qc, const std::string& where);
// Reads a `quantization_config.json` sidecar; its "tensor_storage" is parsed too. Throws NotFound / Io /
// InvalidFile (naming the file and the module key).
Exl3QuantConfig readExl3Sidecar(const std::string& path);
// For a model directory: config.json's block, with the sidecar's tensor_storage merged when the sidecar
// exists. nullopt when the model is not EXL3.
std::optional<Exl3QuantConfig> loadExl3QuantConfig(const std::string& modelDir);

// A bound quantized linear. Holds a pointer into the (mapped) checkpoint for the packed trellis, valid
// while the SafetensorsFile / SafetensorsCheckpoint it was bound from lives, and small fp32 copies of
// the scale vectors (4·(k+n) bytes against k·n·K/8 packed bytes), so routed experts stay packed.
struct Exl3Linear {
    std::string prefix;          // e.g. "model.layers.3.mlp.experts.7.down_proj"
    int64_t k = 0;               // padded in_features  = 16 · trellis.shape[0]
    int64_t n = 0;               // padded out_features = 16 · trellis.shape[1]
    int bits = 0;                // K = trellis.shape[2] / 16, 1..8
    Exl3Codebook codebook = Exl3Codebook::Inst3;
    const uint8_t* trellis = nullptr;  // I16 [k/16, n/16, 16K], little-endian, may be unaligned
    std::vector<float> suh;      // [k] input-side scale (legacy `.su` unpacked to ±1)
    std::vector<float> svh;      // [n] output-side scale (legacy `.sv` unpacked to ±1)
    std::vector<float> bias;     // [n] or empty; added after the output transform
    bool legacySigns = false;    // bound from `.su`/`.sv`

    int64_t tilesK() const { return k / 16; }
    int64_t tilesN() const { return n / 16; }
    int64_t tileBytes() const { return int64_t(bits) * 32; }  // 16K uint16 = 256·K bits
    const uint8_t* tile(int64_t tk, int64_t tn) const {
        return trellis + (tk * tilesN() + tn) * tileBytes();
    }
    int64_t packedBytes() const { return k * n * bits / 8; }
};

// Looks a tensor up by full name; nullptr when absent. Adapts SafetensorsFile / SafetensorsCheckpoint.
using TensorLookup = std::function<const TensorInfo*(std::string_view)>;
TensorLookup tensorLookup(const SafetensorsFile& f);
TensorLookup tensorLookup(const SafetensorsCheckpoint& c);

// exllamav3's detection rule (spec §2.1): `.trellis`, one of `.su`/`.suh`, one of `.sv`/`.svh`.
bool isExl3Linear(const TensorLookup& find, const std::string& prefix);
// Every prefix P with a `P.trellis` tensor among `names`, sorted.
std::vector<std::string> exl3Prefixes(const std::vector<std::string>& names);

// Binds and validates the linear at `prefix`. Throws ts::Error naming the tensor:
//   NotFound      `.trellis`, or both of `.suh`/`.su` (or `.svh`/`.sv`) missing;
//   InvalidFile   wrong dtype / rank / shape, dims not multiples of 128, both `.su` and `.suh`, both
//                 `.mcg` and `.mul1`, a flag that is not a 0-dim I32;
//   Unsupported   K outside 1..8 (incl. half-integer rates, shape[2] % 16 != 0), a flag multiplier other
//                 than the locked constant, a legacy `.scale` tensor.
// `storage` (optional): the sidecar entry of this module; K, codebook, multiplier and the stored
// shapes must agree with the tensors (InvalidFile otherwise).
Exl3Linear bindExl3Linear(const TensorLookup& find, const std::string& prefix,
                          const Exl3ModuleStorage* storage = nullptr);

}  // namespace ts
