// Element types that cross file boundaries (safetensors dtypes) and the scalar conversions the CPU
// reference needs: bf16 / fp16 / fp8 e4m3 <-> fp32. Conversions are exact where the format allows
// (widening) and round-to-nearest-even when narrowing, matching PyTorch's casts.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace ts {

enum class DType : uint8_t { BF16, F16, F32, F8_E4M3, I8, U8, I16, I32, I64, BOOL };

// Bytes per element.
constexpr size_t dtypeSize(DType t) {
    switch (t) {
    case DType::BF16: case DType::F16: case DType::I16: return 2;
    case DType::F32: case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::F8_E4M3: case DType::I8: case DType::U8: case DType::BOOL: return 1;
    }
    return 0;
}

// The names safetensors uses ("BF16", "F8_E4M3", ...).
std::string_view dtypeName(DType t);
std::optional<DType> dtypeFromName(std::string_view name);

inline float bitsToF32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t f32ToBits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float bf16ToF32(uint16_t h) { return bitsToF32(uint32_t(h) << 16); }

// Round-to-nearest-even, NaN kept quiet (as torch's .to(torch.bfloat16)).
inline uint16_t f32ToBf16(float f) {
    uint32_t u = f32ToBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

float f16ToF32(uint16_t h);
uint16_t f32ToF16(float f);

// float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa; no infinities; 0x7f/0xff are NaN; max 448.
// Decoding is a 256-entry table.
float fp8e4m3ToF32(uint8_t v);
// Saturating round-to-nearest-even (CUDA's __nv_cvt_float_to_fp8 with __NV_SATFINITE, torch's cast
// after clamping to ±448). NaN maps to 0x7f.
uint8_t f32ToFp8e4m3(float f);

}  // namespace ts
