// EXL3 codebooks, tile bitstream and tile decode (see exl3_trellis.h).
#include "quant/exl3_trellis.h"

#include "core/dtype.h"
#include "core/error.h"

#include <bit>
#include <cstring>
#include <vector>

namespace ts {

// The file stores uint16 halves of little-endian uint32 words; reading a word with memcpy relies on the
// host being little-endian too (x86-64, aarch64).
static_assert(std::endian::native == std::endian::little, "EXL3 decoding assumes a little-endian host");

namespace {

constexpr uint32_t kInst3Mul = 89226354u;   // QTIP 3INST LCG
constexpr uint32_t kInst3Add = 64248484u;
constexpr uint32_t kMaskKeep = 0x8FFF8FFFu;  // sign + low 12 bits of each half
constexpr uint32_t kXorExp = 0x3B603B60u;    // forces exponent 0b011xx: halves in ±[0.125, 2)
constexpr uint16_t kMul1Inv = 0x1EEE;        // fp16 0.00676727294921875 ≈ 1/147.8
constexpr uint16_t kMul1Bias = 0xC931;       // fp16 −10.3828125

// 3INST / MCG tail: two fp16 halves added with one rounding. Each half has an 11-bit significand and
// their exponents differ by ≤ 3, so the fp32 sum is exact and f32ToF16 is the single __hadd rounding.
uint16_t sumHalves(uint32_t x) {
    x = (x & kMaskKeep) ^ kXorExp;
    const float lo = f16ToF32(uint16_t(x & 0xFFFFu));
    const float hi = f16ToF32(uint16_t(x >> 16));
    return f32ToF16(lo + hi);
}

struct Luts {
    std::vector<uint16_t> f16[3];
    std::vector<float> f32[3];
    Luts() {
        for (int cb = 0; cb < 3; ++cb) {
            f16[cb].resize(65536);
            f32[cb].resize(65536);
            for (uint32_t s = 0; s < 65536; ++s) {
                const uint16_t b = exl3CodebookBits(Exl3Codebook(cb), uint16_t(s));
                f16[cb][s] = b;
                f32[cb][s] = f16ToF32(b);
            }
        }
    }
};

const Luts& luts() {
    static const Luts l;  // C++11 magic static: built once, thread-safe
    return l;
}

// posOffset[p] = r * 16 + c, for decoding into a dense 16×16 tile.
struct PermTable {
    uint8_t r[kExl3TileValues];
    uint8_t c[kExl3TileValues];
    constexpr PermTable() : r(), c() {
        for (int p = 0; p < kExl3TileValues; ++p) {
            r[p] = exl3TilePos(p).r;
            c[p] = exl3TilePos(p).c;
        }
    }
};
constexpr PermTable kPerm;

void checkBits(int bits) { TS_CHECK(bits >= 1 && bits <= kExl3MaxBits, "EXL3 K out of range: " + std::to_string(bits)); }

}  // namespace

uint16_t exl3CodebookBits(Exl3Codebook cb, uint16_t state) {
    const uint32_t s = state;  // zero-extended before the 32-bit multiply (spec §8)
    switch (cb) {
    case Exl3Codebook::Inst3: return sumHalves(s * kInst3Mul + kInst3Add);
    case Exl3Codebook::Mcg: return sumHalves(s * kExl3McgMultiplier);
    case Exl3Codebook::Mul1: {
        const uint32_t x = s * kExl3Mul1Multiplier;
        // dp4a(x, 0x01010101, 0x6400): fp16 0x6400 = 1024 and the fp16 ulp in [1024, 2048) is 1, so
        // the pattern 0x6400 + bytesum is exactly 1024 + bytesum (≤ 2044).
        const uint32_t bytesum = (x & 0xFF) + ((x >> 8) & 0xFF) + ((x >> 16) & 0xFF) + (x >> 24);
        const float h = f16ToF32(uint16_t(0x6400u + bytesum));
        // __hfma with one rounding: h·kInv is an integer multiple of 2^-18 below 16 (22 significant
        // bits) and so is the sum with kBias, hence exact in fp32; f32ToF16 is the only rounding.
        return f32ToF16(h * f16ToF32(kMul1Inv) + f16ToF32(kMul1Bias));
    }
    }
    TS_CHECK(false, "bad EXL3 codebook id");
}

const uint16_t* exl3CodebookLutF16(Exl3Codebook cb) { return luts().f16[int(cb)].data(); }
const float* exl3CodebookLutF32(Exl3Codebook cb) { return luts().f32[int(cb)].data(); }

void exl3TileWords(const uint8_t* tile, int bits, uint32_t* words) {
    checkBits(bits);
    // File element 2m is the low half of word m (the swapped pair of spec §3.2), i.e. a plain LE uint32.
    std::memcpy(words, tile, size_t(bits) * 32);
}

uint16_t exl3StateAt(const uint32_t* words, int bits, int p) {
    checkBits(bits);
    const int64_t nWords = 8 * bits, nb = 256 * int64_t(bits);
    const int64_t end = (p + 1) * int64_t(bits) + nb;  // +nb keeps the window start non-negative
    const int64_t beg = end - 16;
    const int64_t i0 = beg / 32, i1 = (end - 1) / 32;
    const uint64_t a = words[i0 % nWords], b = words[i1 % nWords];
    const int64_t sh = (i1 + 1) * 32 - end;
    return uint16_t(((a << 32 | b) >> sh) & 0xFFFFu);
}

namespace {

// K as a compile-time constant turns the window offsets into constants the compiler can unroll.
template <uint32_t K>
void tileStatesK(const uint8_t* tile, uint16_t* states) {
    // ext[0] = the stream's last word, ext[1..8K] = the words: the window ending at stream bit e lies in
    // ext words (e+31)/32 − 1 and (e+31)/32, so the first positions' wrap-around needs no modulo.
    uint32_t ext[8 * K + 1];
    std::memcpy(ext + 1, tile, K * 32);
    ext[0] = ext[8 * K];
    for (uint32_t p = 0; p < 256; ++p) {
        const uint32_t end = (p + 1) * K + 32;  // in ext bit coordinates
        const uint32_t i1 = (end - 1) >> 5;
        const uint64_t win = uint64_t(ext[i1 - 1]) << 32 | ext[i1];
        states[p] = uint16_t(win >> ((i1 + 1) * 32 - end));
    }
}

}  // namespace

void exl3TileStates(const uint8_t* tile, int bits, uint16_t* states) {
    switch (bits) {
    case 1: return tileStatesK<1>(tile, states);
    case 2: return tileStatesK<2>(tile, states);
    case 3: return tileStatesK<3>(tile, states);
    case 4: return tileStatesK<4>(tile, states);
    case 5: return tileStatesK<5>(tile, states);
    case 6: return tileStatesK<6>(tile, states);
    case 7: return tileStatesK<7>(tile, states);
    case 8: return tileStatesK<8>(tile, states);
    default: checkBits(bits);
    }
}

void exl3PackTile(const uint16_t* symbols, int bits, uint16_t* out) {
    checkBits(bits);
    const uint32_t mask = (1u << bits) - 1u;
    uint64_t acc = 0;  // pending stream bits, MSB-first, in the low `have` bits
    int have = 0, m = 0;
    for (int p = 0; p < 256; ++p) {
        acc = acc << bits | (symbols[p] & mask);
        have += bits;
        if (have >= 32) {
            const uint32_t w = uint32_t(acc >> (have - 32));
            have -= 32;
            acc &= (uint64_t(1) << have) - 1;
            // Word m = (h_2m << 16) | h_2m+1; the file stores h_2m+1 first (SWAP16).
            out[2 * m] = uint16_t(w & 0xFFFFu);
            out[2 * m + 1] = uint16_t(w >> 16);
            ++m;
        }
    }
    TS_CHECK(have == 0 && m == 8 * bits, "EXL3 pack: stream length mismatch");
}

void exl3DecodeTile(const uint8_t* tile, int bits, Exl3Codebook cb, float* out, int64_t ld) {
    uint16_t states[kExl3TileValues];
    exl3TileStates(tile, bits, states);
    const float* lut = exl3CodebookLutF32(cb);
    for (int p = 0; p < kExl3TileValues; ++p) out[kPerm.r[p] * ld + kPerm.c[p]] = lut[states[p]];
}

}  // namespace ts
