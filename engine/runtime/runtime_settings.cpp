#include "runtime/runtime_settings.h"

#include <cerrno>
#include <cstdlib>

namespace ts {

std::optional<int64_t> parseIntSetting(const IntSetting& s, const std::string& value, std::string* why) {
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(value.c_str(), &end, 10);
    // strtoll skips leading blanks: a value the .env quoted with spaces is refused here, as a stray character.
    const bool blank = !value.empty() && (value.front() == ' ' || value.front() == '\t');
    if (errno || !end || *end || end == value.c_str() || blank || x < s.lo || x > s.hi) {
        *why = "an integer in [" + std::to_string(s.lo) + ", " + std::to_string(s.hi) + "]";
        return std::nullopt;
    }
    return int64_t(x);
}

std::optional<double> parseGpuMemUtilSetting(const std::string& value, std::string* why) {
    char* end = nullptr;
    const double u = std::strtod(value.c_str(), &end);
    const bool blank = !value.empty() && (value.front() == ' ' || value.front() == '\t');
    if (value.empty() || !end || *end || blank || !(u > 0.0 && u <= 1.0)) {
        *why = "in (0, 1]";
        return std::nullopt;
    }
    return u;
}

std::optional<KvCacheDtype> parseKvCacheDtypeSetting(const std::string& value, std::string* why) {
    if (value == "fp8" || value == "fp8_ds_mla") return KvCacheDtype::Fp8;
    if (value == "fp32") return KvCacheDtype::Fp32;
    if (value == "bf16" || value == "auto" || value == "nvfp4")
        *why = "refused: GLM-5.3-Flash's sparse MLA kernels read fp8_ds_mla (the recipe's fp8); fp32 is the exact "
               "reference mode";
    else
        *why = "fp8 or fp32";
    return std::nullopt;
}

}  // namespace ts
