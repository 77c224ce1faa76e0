// EXL3 tile decoding: the three procedural codebooks (16-bit state -> fp16), the tail-biting bitstream
// of one 16×16 tile (packing and state extraction) and the tensor-core position permutation.
// Spec: shared/specs/exl3.md §3.1 (permutation), §3.2 (bitstream), §3.3 (codebooks).
//
// A tile of K bits per weight is 16K little-endian uint16 in the file = 8K little-endian uint32 words
// w[0..8K), each holding the next 32 bits of a circular 256·K-bit stream MSB first. Position p's state
// is the 16-bit window of that stream ending at bit (p+1)·K (wrapping to the tile's own end).
#pragma once

#include "quant/exl3_format.h"

#include <array>
#include <cstdint>

namespace ts {

inline constexpr int kExl3TileValues = 256;  // 16 × 16 weights per tile

// ---- codebooks --------------------------------------------------------------------------------------

// The fp16 bit pattern of codebook(state), computed procedurally exactly as the GPU does (fp16
// __hadd / __hfma semantics; computed in fp32 where it is exact, then rounded once to nearest-even).
uint16_t exl3CodebookBits(Exl3Codebook cb, uint16_t state);
// 65536-entry LUTs, built once on first use (thread-safe): fp16 bits (128 KiB) and the same values as
// fp32 (256 KiB, what the CPU decoder reads).
const uint16_t* exl3CodebookLutF16(Exl3Codebook cb);
const float* exl3CodebookLutF32(Exl3Codebook cb);

// ---- bitstream --------------------------------------------------------------------------------------

// Reads the 8K stream words of one packed tile (16K int16, any alignment). words: [8K].
void exl3TileWords(const uint8_t* tile, int bits, uint32_t* words);
// The state of position p (0..255) from the words, by the spec's direct window formula (§3.2).
uint16_t exl3StateAt(const uint32_t* words, int bits, int p);
// All 256 states of a packed tile (fast path used by the decoders; equal to exl3StateAt for every p).
void exl3TileStates(const uint8_t* tile, int bits, uint16_t* states);
// Writer side (spec §3.2 / §5.6): packs 256 symbols (only the low K bits of each are used; a full
// 16-bit state may be passed) MSB-first into the 16K-uint16 file layout (pairs swapped). out: [16K].
void exl3PackTile(const uint16_t* symbols, int bits, uint16_t* out);

// ---- permutation ------------------------------------------------------------------------------------

// Position p of a tile -> (row r along k / in_features, column c along n / out_features), spec §3.1.
struct Exl3TilePos {
    uint8_t r;
    uint8_t c;
};
constexpr Exl3TilePos exl3TilePos(int p) {
    const int lane = p / 8, j = p % 8;
    return {uint8_t(2 * (lane % 4) + (j & 1) + 8 * ((j >> 1) & 1)), uint8_t(lane / 4 + 8 * (j >> 2))};
}

// ---- whole tiles ------------------------------------------------------------------------------------

// Decodes one packed tile into out[r * ld + c] (r, c in 0..15; r along k), values as fp32 (exact
// copies of the fp16 codebook values).
void exl3DecodeTile(const uint8_t* tile, int bits, Exl3Codebook cb, float* out, int64_t ld);

}  // namespace ts
