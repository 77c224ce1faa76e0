#include "serve/auth.h"

#include <algorithm>
#include <cctype>

#include <openssl/crypto.h>
#include <openssl/sha.h>

namespace ts::serve {

namespace {

std::array<unsigned char, 32> sha256(std::string_view s) {
    std::array<unsigned char, 32> d{};
    SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
    return d;
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

// Splits "name:port" / "[v6]:port" into the name part.
std::string_view hostPart(std::string_view h) {
    if (!h.empty() && h.front() == '[') {
        const size_t close = h.find(']');
        return close == std::string_view::npos ? h : h.substr(0, close + 1);
    }
    const size_t colon = h.rfind(':');
    return colon == std::string_view::npos ? h : h.substr(0, colon);
}

bool is127(std::string_view h) {
    // 127.a.b.c with decimal octets only (no "127.0.0.1.evil.com", no hex).
    if (h.substr(0, 4) != "127.") return false;
    int dots = 0, digits = 0;
    for (char c : h.substr(4)) {
        if (c == '.') {
            if (digits == 0) return false;
            ++dots;
            digits = 0;
        } else if (c >= '0' && c <= '9') {
            if (++digits > 3) return false;
        } else {
            return false;
        }
    }
    return dots == 2 && digits > 0;
}

}  // namespace

ApiKey::ApiKey(std::string_view key) : m_enabled(!key.empty()) {
    if (m_enabled) m_digest = sha256(key);
}

bool ApiKey::accepts(std::string_view authorization) const {
    if (!m_enabled) return true;
    // Always hash and compare, also for a malformed header, so that the time taken says nothing.
    std::string_view token;
    if (authorization.size() > 7 && iequals(authorization.substr(0, 7), "bearer ")) token = authorization.substr(7);
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    const auto d = sha256(token);
    const bool same = CRYPTO_memcmp(d.data(), m_digest.data(), d.size()) == 0;
    return same && !token.empty();
}

bool isLoopbackHostHeader(std::string_view host) {
    const std::string_view h = hostPart(host);
    return iequals(h, "localhost") || h == "[::1]" || is127(h);
}

bool isLoopbackAddress(std::string_view address) {
    return iequals(address, "localhost") || address == "::1" || address == "[::1]" || is127(address);
}

std::optional<std::string> CorsPolicy::allow(std::string_view origin) const {
    if (origin.empty()) return std::nullopt;
    if (std::find(m_origins.begin(), m_origins.end(), origin) == m_origins.end()) return std::nullopt;
    return std::string(origin);
}

std::string corsAllowHeaders(std::string_view requested) {
    constexpr size_t kMaxNames = 64, kMaxNameBytes = 64;
    auto isTchar = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    };
    std::vector<std::string> names = {"authorization", "content-type"};
    size_t taken = 0;
    while (!requested.empty() && taken < kMaxNames) {
        const size_t comma = requested.find(',');
        std::string_view name = requested.substr(0, comma);
        requested = comma == std::string_view::npos ? std::string_view() : requested.substr(comma + 1);
        while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
        while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
        if (name.empty() || name.size() > kMaxNameBytes || !std::all_of(name.begin(), name.end(), isTchar)) continue;
        ++taken;
        std::string lower(name);
        for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
        if (std::find(names.begin(), names.end(), lower) == names.end()) names.push_back(std::move(lower));
    }
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
}

}  // namespace ts::serve
