// CPU compute with EXL3 weights: dense reconstruction (tests, `inspect --dequantize`) and the
// rotated-input GEMV/GEMM of the forward pass, which decodes the trellis tile by tile into a 1 KiB
// buffer and never materialises W. Spec: shared/specs/exl3.md §3.5 (reconstruction), §3.6 (forward).
//
//   W = diag(suh) · BH_k · Ŵ · BH_n · diag(svh)     (k × n = in × out; y = x · W)
//   forward: xr = BH_k(x ⊙ suh) per 128-block;  yr = xr · Ŵ;  y = BH_n(yr) ⊙ svh (+ bias)
//
// All arithmetic is fp32 (decoded values are exact fp16 numbers). Work is split over the thread pool
// (`pool`, nullptr = ThreadPool::global()); the result does not depend on the thread count.
#pragma once

#include "quant/exl3_format.h"

#include <cstdint>

namespace ts {

class ThreadPool;

// Ŵ, the decoded inner matrix in the rotated basis: out [k, n] row-major (row = input channel).
void exl3ReconstructRotated(const Exl3Linear& w, float* out, ThreadPool* pool = nullptr);
// W in the original basis (both Hadamards and the scale vectors applied): out [k, n] row-major.
// The Hugging Face weight is its transpose.
void exl3Reconstruct(const Exl3Linear& w, float* out, ThreadPool* pool = nullptr);

// The three stages of the forward pass, exposed for callers that fuse around them (MoE).
// xr [m, k] = BH_k(x ⊙ suh); x is [m, xCols] with xCols ≤ k, zero-extended to k (padding).
void exl3InputTransform(const Exl3Linear& w, const float* x, int64_t m, int64_t xCols, float* xr,
                        ThreadPool* pool = nullptr);
// yr [m, n] = xr [m, k] · Ŵ, decoding each 16×16 tile once per call.
void exl3RotatedMatmul(const Exl3Linear& w, const float* xr, int64_t m, float* yr, ThreadPool* pool = nullptr);
// y [m, yCols] = (BH_n(yr) ⊙ svh + bias)[:, :yCols], yCols ≤ n (trims padding). yr is overwritten.
void exl3OutputTransform(const Exl3Linear& w, float* yr, int64_t m, float* y, int64_t yCols,
                         ThreadPool* pool = nullptr);

// y [m, yCols] = x [m, xCols] · W (+ bias), padding handled as above. Allocates m·(k+n) floats of scratch.
void exl3Gemm(const Exl3Linear& w, const float* x, int64_t m, int64_t xCols, float* y, int64_t yCols,
              ThreadPool* pool = nullptr);
// The unpadded-shape convenience: x [m, k], y [m, n].
inline void exl3Gemm(const Exl3Linear& w, const float* x, int64_t m, float* y, ThreadPool* pool = nullptr) {
    exl3Gemm(w, x, m, w.k, y, w.n, pool);
}

}  // namespace ts
