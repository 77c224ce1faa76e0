#include "profiling_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

namespace ts {

void ProfilingBackend::after(const char* op, OpKind kind, bool ran) {
    if (kind != OpKind::Compute) return;
    // sampleRows waits for its host result itself; every other op is timed to its completion.
    if (std::strcmp(op, "sampleRows") != 0) inner().synchronize();
    if (!ran) return;  // a declined call did nothing to time (the model runs its fallback, whose ops are rows)
    Row& r = m_rows[op];
    ++r.calls;
    r.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - m_t0).count();
}

std::string ProfilingBackend::report() const {
    std::vector<std::pair<std::string, Row>> v(m_rows.begin(), m_rows.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0;
    for (const auto& [k, r] : v) total += r.seconds;
    std::string out = "op                          calls    total ms    us/call   share\n";
    char line[160];
    for (const auto& [k, r] : v) {
        std::snprintf(line, sizeof line, "%-26s %7lld %11.3f %10.2f %6.1f%%\n", k.c_str(), (long long)r.calls,
                      r.seconds * 1e3, r.calls ? r.seconds * 1e6 / double(r.calls) : 0.0,
                      total > 0 ? 100.0 * r.seconds / total : 0.0);
        out += line;
    }
    std::snprintf(line, sizeof line, "%-26s %7s %11.3f\n", "total", "", total * 1e3);
    out += line;
    return out;
}

}  // namespace ts
