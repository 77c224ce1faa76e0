#include "runtime/runtime_settings.h"

#include <charconv>

namespace ts {

namespace {

// The whole of `value` as a number, or nothing: std::from_chars reads the C locale's form whatever the process's
// locale (a control center started under a decimal-comma locale still reads "0.87"), and takes no leading blank,
// no '+' and no trailing character.
template <class T>
std::optional<T> wholeNumber(const std::string& value) {
    T x{};
    const char* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, x);
    if (ec != std::errc() || ptr != end || value.empty()) return std::nullopt;
    return x;
}

}  // namespace

std::optional<int64_t> parseIntSetting(const IntSetting& s, const std::string& value, std::string* why) {
    const auto x = wholeNumber<int64_t>(value);
    if (!x || *x < s.lo || *x > s.hi) {
        *why = "an integer in [" + std::to_string(s.lo) + ", " + std::to_string(s.hi) + "]";
        return std::nullopt;
    }
    return x;
}

std::optional<double> parseGpuMemUtilSetting(const std::string& value, std::string* why) {
    const auto u = wholeNumber<double>(value);
    if (!u || !(*u > 0.0 && *u <= 1.0)) {  // NaN fails the comparison too
        *why = "in (0, 1]";
        return std::nullopt;
    }
    return u;
}

std::optional<KvCacheDtype> parseKvCacheDtypeSetting(const std::string& value, std::string* why) {
    if (value == "fp8" || value == "fp8_ds_mla") return KvCacheDtype::Fp8;
    if (value == "fp32") return KvCacheDtype::Fp32;
    if (value == "bf16" || value == "auto" || value == "nvfp4")
        *why = "refused: GLM-5.3-Flash's sparse MLA kernels read fp8_ds_mla (the recipe's fp8); give fp8 or fp32 (the "
               "exact reference mode)";
    else
        *why = "fp8 or fp32";
    return std::nullopt;
}

}  // namespace ts
