// Settings of the OpenAI-compatible HTTP server, with every limit explicit. The defaults are the
// documented limits (engine/serve/README.md lists them with the status each one answers); the CLI and
// the GUI may change them, never remove them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ts::serve {

struct ServerLimits {
    // Request body (bytes): a larger Content-Length, or a chunked body that grows past it, is 413.
    size_t maxBodyBytes = size_t(8) << 20;
    // Header lines per request: more is 431. (One header line is capped at 8,192 bytes and the request
    // URI at 8,192 bytes by cpp-httplib itself: 400 / 414.)
    size_t maxHeaderCount = 64;
    // JSON nesting depth of a body: deeper is 400 before the parser runs.
    int maxJsonDepth = 64;
    // Choices per request: chat `n`, and completions `n` × number of prompts.
    int32_t maxChoices = 16;
    // Stop strings per request and bytes per stop string.
    size_t maxStopStrings = 16;
    size_t maxStopStringBytes = 1024;
    size_t maxStopTokenIds = 64;
    // Tools per request.
    size_t maxTools = 128;
    // Messages per chat request.
    size_t maxMessages = 4096;
    // Generation requests (chat + completions, streaming or not) handled at once; more get 503 with
    // Retry-After. Each open stream pins one HTTP worker thread, so the pool is this plus a reserve.
    int32_t maxConcurrentRequests = 64;
    int32_t reserveThreads = 8;
    // Events buffered for one request that the client does not read fast enough: past this the request
    // is aborted (a slow reader never stalls the engine; the engine never blocks on a socket).
    size_t maxBufferedEvents = 65536;
    // Socket timeouts: a sender that stalls this long is dropped (slow-loris), a reader likewise.
    std::chrono::seconds readTimeout{10};
    std::chrono::seconds writeTimeout{30};
    // Keep-alive: requests per connection and idle seconds.
    size_t keepAliveMaxCount = 100;
    std::chrono::seconds keepAliveTimeout{5};
    // SSE comment sent when a stream has had nothing to say for this long; it also detects dead peers.
    std::chrono::milliseconds sseHeartbeat{1000};
    // Shutdown: in-flight requests are aborted, then we wait at most this long for their handlers.
    std::chrono::milliseconds drainTimeout{5000};
};

struct ServerOptions {
    std::string host = "127.0.0.1";  // loopback unless serving on the LAN is chosen explicitly
    int port = 8888;
    std::string servedModelName = "GLM-5.3-Flash-EXL3";
    std::string apiKey;                    // empty: no authentication (only allowed on loopback)
    std::vector<std::string> corsOrigins;  // exact origins ("http://localhost:3000"); empty: CORS off
    bool logRequests = true;               // one line per request on stderr
    ServerLimits limits;
};

}  // namespace ts::serve
