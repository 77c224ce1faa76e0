#include "core/host_memory.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ts {

namespace {

// "<spaces><digits> kB" after the colon → bytes; -1 when it is not that.
int64_t kibField(const std::string& rest) {
    size_t i = 0;
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\t')) ++i;
    const size_t digits = i;
    while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i;
    if (i == digits || i - digits > 15) return -1;  // none, or beyond any machine's memory (and int64's reach ×1024)
    const int64_t v = std::strtoll(rest.c_str() + digits, nullptr, 10);
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\t')) ++i;
    if (rest.compare(i, std::string::npos, "kB") != 0) return -1;
    return v * 1024;
}

}  // namespace

std::optional<HostMemory> parseMemInfo(const std::string& text) {
    HostMemory m;
    bool total = false, free = false, available = false;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        const std::string name = line.substr(0, colon);
        int64_t* dst = nullptr;
        bool* seen = nullptr;
        if (name == "MemTotal") dst = &m.totalBytes, seen = &total;
        else if (name == "MemFree") dst = &m.freeBytes, seen = &free;
        else if (name == "MemAvailable") dst = &m.availableBytes, seen = &available;
        if (!dst) continue;
        const int64_t v = kibField(line.substr(colon + 1));
        if (v < 0) return std::nullopt;
        *dst = v;
        *seen = true;
    }
    if (!total || !free || !available) return std::nullopt;
    return m;
}

bool looksUnified(int64_t deviceFree, int64_t deviceTotal, const HostMemory& host) {
    constexpr int64_t kGiB = int64_t(1) << 30;
    if (deviceTotal <= 0 || host.totalBytes <= 0) return false;
    const int64_t dFree = deviceFree > host.freeBytes ? deviceFree - host.freeBytes : host.freeBytes - deviceFree;
    const int64_t dTotal = deviceTotal > host.totalBytes ? deviceTotal - host.totalBytes : host.totalBytes - deviceTotal;
    return dFree <= 2 * kGiB && double(dTotal) <= 0.05 * double(host.totalBytes);
}

std::optional<HostMemory> readHostMemory() {
    std::ifstream f("/proc/meminfo");
    if (!f) return std::nullopt;
    std::ostringstream s;
    s << f.rdbuf();
    return parseMemInfo(s.str());
}

}  // namespace ts
