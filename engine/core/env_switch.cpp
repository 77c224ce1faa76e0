#include "core/env_switch.h"

#include <climits>
#include <cstdlib>
#include <cstring>

#include "core/log.h"

namespace ts {

bool envSwitch(const char* name, bool def) {
    const char* e = std::getenv(name);
    if (!e) return def;
    if (std::strcmp(e, "1") == 0) return true;
    if (std::strcmp(e, "0") == 0) return false;
    logFormat(LogLevel::Warning, "twinspark: %s='%s' is not 0 or 1; keeping the default (%d)", name, e, def ? 1 : 0);
    return def;
}

int64_t envCount(const char* name, int64_t def) {
    const char* e = std::getenv(name);
    if (!e || !*e) return def;
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (*end == '\0' && v >= 0 && v <= INT32_MAX && (*e >= '0' && *e <= '9')) return int64_t(v);
    logFormat(LogLevel::Warning, "twinspark: %s='%s' is not a count (an integer >= 0); keeping the default (%lld)", name, e,
              static_cast<long long>(def));
    return def;
}

int envMode(const char* name, int modes, int def) {
    const int64_t v = envCount(name, def);
    if (v >= modes) {
        logFormat(LogLevel::Warning, "twinspark: %s=%lld: expected 0..%d; keeping the default (%d)", name,
                  static_cast<long long>(v), modes - 1, def);
        return def;
    }
    return int(v);
}

}  // namespace ts
