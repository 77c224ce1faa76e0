#include "core/env_switch.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ts {

bool envSwitch(const char* name, bool def) {
    const char* e = std::getenv(name);
    if (!e) return def;
    if (std::strcmp(e, "1") == 0) return true;
    if (std::strcmp(e, "0") == 0) return false;
    std::fprintf(stderr, "twinspark: %s='%s' is not 0 or 1; keeping the default (%d)\n", name, e, def ? 1 : 0);
    return def;
}

}  // namespace ts
