// EXL3 tile encoder: the tail-biting Viterbi search over the bitshift trellis that finds, for one
// 16×16 tile, the 256 16-bit states whose codebook values are closest (in squared error) to the
// targets, subject to the bitstream constraint. Spec: shared/specs/exl3.md §5.5 (search), §3.2 (trellis).
//
// Trellis: position p holds a 16-bit state s_p = ((s_{p−1} << K) | σ_p) & 0xFFFF, so s_p's top 16−K bits
// (its in-edge, s_p >> K) are the bottom 16−K bits of s_{p−1} (its out-edge, s & (2^(16−K)−1)). The cost
// of a path is Σ_p (codebook(s_p) − w_p)². The stream is circular, so a valid tile also needs
// s_0 >> K == s_255 & (2^(16−K)−1) (tail-biting); the search runs in two passes to satisfy it:
//   1. Viterbi with a free start over the rotated targets w[128..255], w[0..127]; backtracking the best
//      path gives e0, the edge entering position 0;
//   2. Viterbi over w[0..255] with position 0's in-edge fixed to e0, backtracked from out-edge e0 at
//      position 255.
// Every step evaluates all 65536 states (2^K candidates for each of the 2^(16−K) out-edges); the inner
// loop is AVX2/FMA when the CPU has it (runtime dispatch), portable C++ otherwise, with identical
// results (same operations in the same order per state, ties go to the lower candidate).
#pragma once

#include "quant/exl3_format.h"

#include <cstdint>
#include <string_view>

namespace ts {

// Quantizes one tile. w: the 256 targets in position order p (tile-internal tensor-core order, §3.1).
// Writes states[256] (full 16-bit states; the low K bits are the symbols to pack) and, when values is
// non-null, values[256] = codebook(states[p]) as fp32 (exact fp16 numbers). Returns the squared error
// Σ_p (values[p] − w[p])². Uses per-thread scratch (≤ 8 MiB at K = 1); thread-safe.
double exl3ViterbiTile(const float* w, int bits, Exl3Codebook cb, uint16_t* states, float* values = nullptr);

// The same search on an open trellis (free start, free end; one pass, half the cost). Its path is not a
// valid circular tile: for error estimates only (the global scale search). Returns the squared error.
double exl3ViterbiTileOpen(const float* w, int bits, Exl3Codebook cb, float* values = nullptr);

// Which inner loop exl3ViterbiTile uses on this machine: "avx512", "avx2" or "generic".
const char* exl3ViterbiKernelName();
// Tests: select the inner loop ("auto", "generic", "avx2", "avx512"), process-wide. Returns false (and
// changes nothing) when the CPU or the build lacks it.
bool exl3ViterbiUseKernel(std::string_view name);

}  // namespace ts
