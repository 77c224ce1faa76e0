// The 128-point Hadamard transform of EXL3 (spec §3.4): Sylvester H128 in natural order,
// H[a][b] = (−1)^popcount(a & b), scaled by 1/√128 per application so that Ĥ is orthonormal,
// symmetric and its own inverse. EXL3 applies it block-diagonally over 128-element blocks of both the
// input side (k) and the output side (n) of every quantized linear.
#pragma once

#include <cstdint>

namespace ts {

inline constexpr int kExl3HadSize = 128;
// exllamav3's fp32 r_scale (1/√128). The format means this value; its dense fp16 reconstruction
// behaves as if it were rounded to fp16, which we deliberately do not copy.
inline constexpr float kExl3HadScale = 0.088388347648f;

// x[0..128) ← Ĥ · x (iterative fast Walsh–Hadamard transform, then the scale).
void hadamard128(float* x);
// Every consecutive 128-block of x[0..len) (len % 128 == 0), optionally pre-multiplied elementwise by
// pre[0..len) and post-multiplied by post[0..len) (either may be null): x ← (Ĥ·(x ⊙ pre)) ⊙ post.
void hadamard128Blocks(float* x, int64_t len, const float* pre = nullptr, const float* post = nullptr);
// Transforms along the row index of a 128-row block: for every column j < cols, the 128 values
// a[i·ld + j] (i = 0..127) are replaced by Ĥ applied to them. Row-pair butterflies run over whole rows,
// so the inner loops are contiguous.
void hadamard128Rows(float* a, int64_t ld, int64_t cols);

}  // namespace ts
