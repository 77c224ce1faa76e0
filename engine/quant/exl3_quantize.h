// The EXL3 quantizer for one linear layer: regularisation and rotation, the global scale search, LDLQ
// with the tail-biting Viterbi tile search, and packing into the tensors exllamav3 (and bindExl3Linear)
// read. Spec: shared/specs/exl3.md §5.2–§5.7; layout §2.1.
//
//   W (in × out, y = x·W; the Hugging Face weight is Wᵀ) is zero-padded to k × n (multiples of 128), then
//   W = diag(su) · BH_k · W_reg · BH_n · diag(sv) holds exactly (su, sv are the stored fp16 suh/svh), and
//   W_reg (rotated, ≈ i.i.d. Gaussian with RMS ≈ 1.24·g) is what LDLQ + Viterbi quantize to Ŵ.
//
// Steps (spec §5.3 unless noted):
//   1. sv = sv0 ⊙ col_rms (normalised by its mean; all-zero columns get 0.1 and svh = 0), sv0 = random ±1.
//   2. W ← (W ⊘ sv) · BH_n.
//   3. su = su0 ⊙ row_rms / (−1.24371088) (zero rows: 0.1); W ← BH_k · (W ⊘ su).
//   4. g: coarse grid 0.1…1.9 on every third sampled tile, fine grid ±2·0.075 on all, parabola (§5.3.4;
//      scored on the open trellis, see searchScale);
//      su ← su / g. suh/svh are rounded to fp16 *before* W_reg is formed, so the identity above is exact.
//   5. With a Hessian H (any positive multiple of Σ xᵀx over calibration rows x): H += 0.025·mean(diag H)·I,
//      H' = BH_k · diag(su) · H · diag(su) · BH_k, block LDL, LDLQ (§5.2, §5.4). Without: every tile on
//      its own (§5.4 fallback).
//      Deliberate difference: exllamav3 folds only the signs su0 into H' (spec §5.2, "observed detail");
//      we fold the full su, so LDLQ minimises the proxy loss of the weight actually stored.
//   6. Pack every tile's states (exl3PackTile) into trellis [k/16, n/16, 16K] (§5.6).
// Deterministic: the same inputs and options give the same bytes for any thread count.
#pragma once

#include "io/safetensors.h"
#include "quant/exl3_format.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ts {

class ThreadPool;

struct Exl3QuantOptions {
    int bits = 4;                                  // K, 1..8
    Exl3Codebook codebook = Exl3Codebook::Mul1;    // exllamav3's default since v1.0
    uint64_t seed = 1;                             // the random signs su0/sv0 (see exl3TensorSeed)
    bool outScales = true;                         // "always": per-output-channel RMS in svh; false = signs only
    double sigmaReg = 0.025;                       // Hessian regularisation, relative to mean(diag H)
    bool scaleSearch = true;                       // search g; false = use fixedScale
    float fixedScale = 0.0f;                       // g when !scaleSearch; 0 = exl3DefaultScale(codebook)
    int scaleSampleTiles = 8;                      // at most this many sampled tiles in the g search
};

// g that fits the codebook when no search runs: 1.0 for 3INST / MCG, 0.8 for MUL1 (RMS 1.0 vs 1.2437).
float exl3DefaultScale(Exl3Codebook cb);
// A per-tensor seed: FNV-1a of the tensor prefix mixed with a run-wide seed, so every linear draws its own
// signs and a rerun reproduces them.
uint64_t exl3TensorSeed(std::string_view prefix, uint64_t runSeed);

struct Exl3Quantized {
    int64_t in = 0, out = 0;   // the linear's logical shape
    int64_t k = 0, n = 0;      // padded to multiples of 128
    int bits = 0;
    Exl3Codebook codebook = Exl3Codebook::Mul1;
    std::vector<uint16_t> trellis;  // [k/16, n/16, 16K]: the I16 tensor's bit patterns (file order)
    std::vector<uint16_t> suh;      // [k] fp16 bits
    std::vector<uint16_t> svh;      // [n] fp16 bits
    std::vector<float> rotated;     // Ŵ [k, n]: the codebook values the trellis decodes to (exact fp16 numbers)
    float scale = 1.0f;             // g
    bool usedHessian = false;       // false: no Hessian given, or it was empty / not finite (fallback)
    int dampRetries = 0;
    double proxyError = 0.0;        // tr(Eᵀ H' E) / tr(W_regᵀ H' W_reg), E = W_reg − Ŵ (H' = I without Hessian)
};

// Quantizes w [in, out] (row-major, fp32). hessian: [in, in] row-major or nullptr. Work runs on `pool`
// (nullptr = ThreadPool::global()); progress(tilesDone, tilesTotal) is called as tile rows finish.
// Throws ts::Error(InvalidArgument) for bits outside 1..8, empty shapes or non-finite weights.
Exl3Quantized exl3Quantize(const float* w, int64_t in, int64_t out, const float* hessian, const Exl3QuantOptions& opt,
                           ThreadPool* pool = nullptr,
                           const std::function<void(int64_t, int64_t)>& progress = {});

// The result as safetensors tensors prefix.trellis (I16), .suh / .svh (F16) and the 0-dim I32 flag .mcg /
// .mul1 (none for 3INST), exactly what bindExl3Linear reads. Views into q: valid while q lives.
std::vector<TensorToWrite> exl3Tensors(const Exl3Quantized& q, const std::string& prefix);
// A bound Exl3Linear over the in-memory result (exl3Reconstruct / exl3Gemm without writing a file).
Exl3Linear exl3LinearView(const Exl3Quantized& q, const std::string& prefix = {});

}  // namespace ts
