// EXL3 quantizer, the Hessian side: the block LDL factorisation of the rotated Hessian and LDLQ, which
// quantizes the rotated weight 16 input rows (one tile row) at a time from the bottom up and feeds each
// strip's error forward into the strips above it. Spec: shared/specs/exl3.md §5.2 (block LDL), §5.4
// (LDLQ).
//
// With H' = (L + I)·D·(L + I)ᵀ, L strictly block-lower (16×16 blocks), D block-diagonal, and E = W − Q
// (k × n), the proxy loss is tr(Eᵀ H' E) = Σ_b ‖D_b^½ F_b‖² with F = (L + I)ᵀ E, i.e. strip b of F is
// E_b + Σ_{j>b} L[j,b]ᵀ E_j. Quantizing strip b's target W_b + Σ_{j>b} L[j,b]ᵀ E_j (the already-made
// errors of the strips below) makes F_b exactly that strip's own quantization residual.
#pragma once

#include "quant/exl3_format.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace ts {

class ThreadPool;

// L of the block LDL of a k × k symmetric positive definite matrix, stored for LDLQ: strip-major,
// lt[(b·k + i)·16 + r] = L[i][16b + r] (rows i ≥ 16(b+1); zero elsewhere), k·k floats.
struct Exl3BlockLdl {
    int64_t k = 0;
    std::vector<float> lt;
    int dampRetries = 0;  // how many times the diagonal was damped before Cholesky succeeded
};

// Factorises h (k × k, row-major, symmetric; k % 16 == 0). When Cholesky fails (not positive definite in
// double precision) the diagonal is damped by `dampStep` and it retries, up to 10 times (exllamav3's
// rule; the caller passes 2·sigma_reg·mean(diag)). Throws ts::Error(InvalidArgument) when it still fails.
Exl3BlockLdl exl3BlockLdl(std::vector<double> h, int64_t k, double dampStep, ThreadPool& pool);

// LDLQ over wReg [k, n] (rotated, regularised; k, n multiples of 16). ldl == nullptr quantizes every tile
// independently (no Hessian: the fallback of §5.4). Outputs: states [k/16, n/16, 256] (per tile, in
// position order p, ready for exl3PackTile) and q [k, n], the decoded value of every weight at its
// (row, column). Tiles of one strip run in parallel on `pool`; the result does not depend on the thread
// count. `onTiles(done)` (optional) is called after each strip with the tiles finished so far.
void exl3Ldlq(const float* wReg, int64_t k, int64_t n, const Exl3BlockLdl* ldl, int bits, Exl3Codebook cb,
              uint16_t* states, float* q, ThreadPool& pool, const std::function<void(int64_t)>& onTiles = {});

// tr(Eᵀ h E) for E = a − b ([k, n]) and h [k, k] (double accumulation); h == nullptr means identity.
double exl3ProxyLoss(const float* a, const float* b, int64_t k, int64_t n, const double* h, ThreadPool& pool);

}  // namespace ts
