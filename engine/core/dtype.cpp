#include "core/dtype.h"

#include <array>

namespace ts {

namespace {
struct NameEntry { DType type; std::string_view name; };
constexpr NameEntry kNames[] = {
    {DType::BF16, "BF16"}, {DType::F16, "F16"},   {DType::F32, "F32"}, {DType::F8_E4M3, "F8_E4M3"},
    {DType::I8, "I8"},     {DType::U8, "U8"},     {DType::I16, "I16"}, {DType::I32, "I32"},
    {DType::I64, "I64"},   {DType::BOOL, "BOOL"},
};

std::array<float, 256> makeFp8Table() {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) {
        const int sign = v >> 7, exp = (v >> 3) & 0xf, man = v & 7;
        float mag;
        if (exp == 0xf && man == 7) mag = NAN;
        else if (exp == 0) mag = std::ldexp(float(man), -9);  // subnormal: man/8 * 2^-6
        else mag = std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
        t[size_t(v)] = sign ? -mag : mag;
    }
    return t;
}
const std::array<float, 256> kFp8Table = makeFp8Table();
}  // namespace

std::string_view dtypeName(DType t) {
    for (const auto& e : kNames)
        if (e.type == t) return e.name;
    return "?";
}

std::optional<DType> dtypeFromName(std::string_view name) {
    for (const auto& e : kNames)
        if (e.name == name) return e.type;
    return std::nullopt;
}

float f16ToF32(uint16_t h) {
    const uint32_t sign = uint32_t(h >> 15) << 31;
    const int exp = (h >> 10) & 0x1f;
    const uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        const float mag = std::ldexp(float(man), -24);
        return sign ? -mag : mag;
    }
    if (exp == 0x1f) return bitsToF32(sign | 0x7f800000u | (man << 13));
    return bitsToF32(sign | (uint32_t(exp - 15 + 127) << 23) | (man << 13));
}

uint16_t f32ToF16(float f) {
    const uint32_t u = f32ToBits(f);
    const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    const float a = std::fabs(f);
    if (std::isnan(f)) return uint16_t(sign | 0x7e00u);
    if (a >= 65520.0f) return uint16_t(sign | 0x7c00u);  // rounds to inf
    if (a < 6.103515625e-05f) {                          // subnormal range: quantum 2^-24
        const float q = std::nearbyint(a * 16777216.0f);   // default rounding mode = nearest-even
        return uint16_t(sign | uint16_t(q));
    }
    uint32_t m = u & 0x7fffffffu;
    m += 0xfffu + ((m >> 13) & 1u);
    return uint16_t(sign | uint16_t((m - (112u << 23)) >> 13));
}

float fp8e4m3ToF32(uint8_t v) { return kFp8Table[v]; }

uint8_t f32ToFp8e4m3(float f) {
    if (std::isnan(f)) return 0x7f;
    const uint8_t sign = std::signbit(f) ? 0x80 : 0;
    float a = std::fabs(f);
    if (a >= 448.0f) return uint8_t(sign | 0x7e);  // saturate to max finite
    if (a < std::ldexp(1.0f, -6)) {                  // subnormal: quantum 2^-9
        const float q = std::nearbyint(a * 512.0f);  // may round up to 8 = smallest normal, encoded the same
        return uint8_t(sign | uint8_t(q));
    }
    int e;
    const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    // normal: a = (1 + man/8) * 2^(e-1); quantum 2^(e-1-3)
    float q = std::nearbyint(std::ldexp(a, 3 - (e - 1)));  // in [8, 16]
    int exp = e - 1 + 7;
    if (q >= 16.0f) { q = 8.0f; ++exp; }
    (void)m;
    if (exp > 15 || (exp == 15 && q - 8.0f > 6.0f)) return uint8_t(sign | 0x7e);
    return uint8_t(sign | uint8_t(exp << 3) | uint8_t(int(q) - 8));
}

}  // namespace ts
