// Who may talk to the server: the API key (Bearer), the Host header when bound to loopback (DNS
// rebinding), and the CORS allow-list. Pure functions over header values, so they are unit-testable
// without sockets.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ts::serve {

class ApiKey {
public:
    // An empty key means authentication is off.
    explicit ApiKey(std::string_view key = {});
    bool enabled() const { return m_enabled; }
    // `authorization` is the Authorization header value. True when it is "Bearer <key>" ("bearer" in
    // any case). The comparison hashes both sides with SHA-256 and compares the digests with
    // CRYPTO_memcmp, so its time does not depend on where (or whether) the keys differ, nor on the
    // key's length.
    bool accepts(std::string_view authorization) const;

private:
    bool m_enabled = false;
    std::array<unsigned char, 32> m_digest{};
};

// True for the names a loopback listener legitimately receives in Host: localhost, 127.0.0.1 (any
// 127.x), [::1], with or without a port. Anything else against a loopback-bound server is DNS rebinding.
bool isLoopbackHostHeader(std::string_view host);
// True when `address` (the --host value) is a loopback address or name.
bool isLoopbackAddress(std::string_view address);

class CorsPolicy {
public:
    explicit CorsPolicy(std::vector<std::string> origins = {}) : m_origins(std::move(origins)) {}
    bool enabled() const { return !m_origins.empty(); }
    // The origin to echo in Access-Control-Allow-Origin, when `origin` is on the list. Exact match:
    // no wildcards, and credentials are never allowed, so an unlisted site cannot read responses.
    std::optional<std::string> allow(std::string_view origin) const;

private:
    std::vector<std::string> m_origins;
};

// Access-Control-Allow-Headers for a preflight whose Access-Control-Request-Headers is `requested`:
// Authorization and Content-Type, then each requested name that is a valid header token (RFC 9110 tchar,
// at most 64 names of at most 64 bytes; anything else is left out, so nothing from the request reaches
// the reply unchecked), lower-cased and without repeats.
std::string corsAllowHeaders(std::string_view requested);

}  // namespace ts::serve
