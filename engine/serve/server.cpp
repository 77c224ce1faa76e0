#include "serve/server.h"

#include <chrono>
#include <vector>

#include <httplib.h>

#include "core/error.h"
#include "core/log.h"
#include "serve/api_error.h"
#include "serve/connection_probe.h"
#include "serve/handlers.h"
#include "serve/validation.h"

namespace ts::serve {

namespace {

enum class Access { Public, Key };
enum class Needs { Nothing, Model, ModelAndOpen };  // ModelAndOpen: refused while shutting down

// The route table, in one place. Every path not listed here is 404 *after* authentication, so probing
// paths without the key learns nothing. Only /health is public.
struct RouteEntry {
    const char* method;
    const char* path;
    Access access;
    Needs needs;
    int id;
};
enum RouteId { kHealth, kModels, kModel, kChat, kCompletions, kTokenize, kDetokenize, kMetrics, kVersion };
// A path ending in "/*" matches any non-empty rest (the rest is the route's argument).
constexpr RouteEntry kRoutes[] = {
    {"GET", "/health", Access::Public, Needs::Nothing, kHealth},
    {"GET", "/v1/models", Access::Key, Needs::Model, kModels},
    {"GET", "/v1/models/*", Access::Key, Needs::Model, kModel},
    {"POST", "/v1/chat/completions", Access::Key, Needs::ModelAndOpen, kChat},
    {"POST", "/v1/completions", Access::Key, Needs::ModelAndOpen, kCompletions},
    {"POST", "/tokenize", Access::Key, Needs::Model, kTokenize},
    {"POST", "/detokenize", Access::Key, Needs::Model, kDetokenize},
    {"GET", "/metrics", Access::Key, Needs::Model, kMetrics},
    {"GET", "/version", Access::Key, Needs::Nothing, kVersion},
};

bool pathMatches(std::string_view pattern, std::string_view path) {
    if (pattern.size() >= 2 && pattern.substr(pattern.size() - 2) == "/*") {
        const std::string_view prefix = pattern.substr(0, pattern.size() - 1);
        return path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix;
    }
    return pattern == path;
}

void sendError(httplib::Response& res, const ApiError& e) {
    res.status = e.status();
    if (e.status() == 503) res.set_header("Retry-After", "1");
    if (e.status() == 401) res.set_header("WWW-Authenticate", "Bearer");
    res.set_content(dumpJson(e.body()), "application/json");
}

}  // namespace

struct HttpServer::Route : RouteEntry {};

HttpServer::HttpServer(ServerOptions options)
    : m_options(std::move(options)), m_key(m_options.apiKey), m_cors(m_options.corsOrigins),
      m_loopback(isLoopbackAddress(m_options.host)), m_http(std::make_unique<httplib::Server>()) {}

HttpServer::~HttpServer() { shutdown(); }

void HttpServer::start() {
    if (!m_loopback && !m_key.enabled() && !m_allowNoAuthLan)
        fail(ErrorKind::InvalidArgument, "refusing to serve on " + m_options.host +
                                             " without an API key (--api-key or VLLM_API_KEY); anyone on the network "
                                             "could use the model. Bind 127.0.0.1, set a key, or pass "
                                             "--insecure-no-api-key to accept the risk");
    const ServerLimits& lim = m_options.limits;
    httplib::Server& s = *m_http;
    const size_t threads = size_t(lim.maxConcurrentRequests + lim.reserveThreads);
    s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    s.set_payload_max_length(lim.maxBodyBytes);
    s.set_read_timeout(lim.readTimeout);
    s.set_write_timeout(lim.writeTimeout);
    s.set_keep_alive_max_count(lim.keepAliveMaxCount);
    s.set_keep_alive_timeout(time_t(lim.keepAliveTimeout.count()));
    auto handler = [this](const httplib::Request& req, httplib::Response& res) { dispatch(req, res); };
    s.Get(".*", handler);
    s.Post(".*", handler);
    s.Put(".*", handler);
    s.Delete(".*", handler);
    s.Patch(".*", handler);
    s.Options(".*", handler);
    // Errors cpp-httplib produces itself (413 body too large, 414 URI too long, 400 malformed request)
    // get the same JSON body; responses that already have one are left alone.
    const size_t maxBody = lim.maxBodyBytes;
    s.set_error_handler(httplib::Server::HandlerWithResponse([maxBody](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
        std::string msg = res.status == 414 ? "the request URI is too long" : "malformed HTTP request";
        if (res.status == 413) {
            // cpp-httplib caps a body labelled as a form (curl -d's default type) at 8,192 bytes, far below
            // our limit, before any handler runs: name the label, not the size, as the cause.
            const std::string type = req.get_header_value("Content-Type");
            msg = type.rfind("application/x-www-form-urlencoded", 0) == 0
                      ? "the body is labelled Content-Type: application/x-www-form-urlencoded, which is limited to "
                        "8192 bytes here; send the JSON with Content-Type: application/json (limit " +
                            std::to_string(maxBody) + " bytes)"
                      : "the request body is larger than the server's limit (" + std::to_string(maxBody) + " bytes)";
        }
        sendError(res, ApiError(res.status, msg));
        return httplib::Server::HandlerResponse::Handled;
    }));
    s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        sendError(res, ApiError(500, "internal server error"));
    });
    m_port = m_options.port == 0 ? s.bind_to_any_port(m_options.host) : (s.bind_to_port(m_options.host, m_options.port) ? m_options.port : -1);
    if (m_port <= 0)
        fail(ErrorKind::Io, "cannot listen on " + m_options.host + ":" + std::to_string(m_options.port) +
                                " (address in use, or not an address of this machine)");
    m_thread = std::thread([this] { m_http->listen_after_bind(); });
}

void HttpServer::setReady(std::shared_ptr<ServeContext> ctx) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_ctx = std::move(ctx);
}

void HttpServer::setFailed(std::string message) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_failure = std::move(message);
}

bool HttpServer::ready() const { return context() != nullptr; }

std::shared_ptr<ServeContext> HttpServer::context() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_ctx;
}

void HttpServer::shutdown() {
    if (m_stopped) return;
    m_stopped = true;
    m_shutdown = true;
    // Generation handlers poll the flag every 100 ms: streams write their error event and end.
    const auto deadline = std::chrono::steady_clock::now() + m_options.limits.drainTimeout;
    while (m_counters.inFlight.load() > 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (m_http) m_http->stop();
    if (m_thread.joinable()) m_thread.join();
}

void HttpServer::dispatch(const httplib::Request& req, httplib::Response& res) {
    const auto t0 = std::chrono::steady_clock::now();
    m_counters.httpRequests.fetch_add(1);
    try {
        route(req, res);
    } catch (const ApiError& e) {
        sendError(res, e);
    } catch (const ts::Error& e) {
        sendError(res, fromEngineError(e));
    } catch (const nlohmann::json::exception& e) {
        sendError(res, ApiError(400, std::string("invalid request: ") + e.what()));
    } catch (const std::bad_alloc&) {
        sendError(res, ApiError(500, "out of memory while handling the request"));
    } catch (const std::exception& e) {
        sendError(res, ApiError(500, std::string("internal error: ") + e.what()));
    }
    if (m_options.logRequests) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        logFormat(LogLevel::Info, "serve: %s %s %d (%.1f ms)", req.method.c_str(), req.path.substr(0, 200).c_str(),
                  res.status, ms);
    }
}

void HttpServer::route(const httplib::Request& req, httplib::Response& res) {
    const ServerLimits& lim = m_options.limits;
    if (req.headers.size() > lim.maxHeaderCount)
        throw ApiError(431, "too many header fields (" + std::to_string(req.headers.size()) + "; the limit is " +
                                std::to_string(lim.maxHeaderCount) + ")");
    // DNS rebinding: a page on evil.example resolving to 127.0.0.1 still sends Host: evil.example.
    if (m_loopback && req.has_header("Host") && !isLoopbackHostHeader(req.get_header_value("Host")))
        throw ApiError(403, "the Host header must name this machine (localhost, 127.0.0.1 or [::1])");
    const std::string origin = req.get_header_value("Origin");
    const auto allowed = m_cors.allow(origin);
    if (allowed) {
        res.set_header("Access-Control-Allow-Origin", *allowed);
        res.set_header("Vary", "Origin");
        res.set_header("Access-Control-Expose-Headers", "Retry-After");  // the 503 back-off, readable by scripts
    }
    if (req.method == "OPTIONS") {
        // Preflight: browsers send it without credentials, so it is answered before authentication,
        // and only for listed origins. The headers asked for are allowed as asked (the official JS client
        // sends its X-Stainless-* set; a fixed list would fail it): the origin is what is checked, and
        // "*" would not cover Authorization.
        if (!allowed) throw ApiError(403, "CORS: origin not allowed");
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", corsAllowHeaders(req.get_header_value("Access-Control-Request-Headers")));
        res.set_header("Access-Control-Max-Age", "600");
        res.status = 204;
        return;
    }
    const RouteEntry* match = nullptr;
    std::string allow;
    for (const auto& r : kRoutes) {
        if (!pathMatches(r.path, req.path)) continue;
        if (req.method == r.method || (req.method == "HEAD" && std::string(r.method) == "GET")) match = &r;
        allow += (allow.empty() ? "" : ", ") + std::string(r.method);
    }
    const bool isPublic = match && match->access == Access::Public;
    if (!isPublic && !m_key.accepts(req.get_header_value("Authorization")))
        throw ApiError(401, "Unauthorized: a valid API key is required (Authorization: Bearer <key>)");
    if (!match) {
        if (!allow.empty()) {
            res.set_header("Allow", allow);
            throw ApiError(405, "method " + req.method + " is not allowed for " + req.path + " (allowed: " + allow + ")");
        }
        throw ApiError(404, "no route for " + req.method + " " + req.path.substr(0, 200));
    }
    std::shared_ptr<ServeContext> ctx = context();
    if (match->id == kHealth) {
        std::string failure;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            failure = m_failure;
        }
        if (m_shutdown) throw ApiError(503, "Shutting down");
        if (!failure.empty()) throw ApiError(503, "Model failed to load: " + failure);
        if (!ctx) throw ApiError(503, "Loading model");
        if (const std::string lost = ctx->source->failure(); !lost.empty())
            throw ApiError(503, "The engine stopped: " + lost);
        res.status = 200;
        res.set_content(R"({"status":"ok"})", "application/json");
        return;
    }
    if (match->id == kVersion) {
        res.status = 200;
        res.set_content(R"({"version":"twinspark-0.1.0"})", "application/json");
        return;
    }
    if (match->needs != Needs::Nothing && !ctx) throw ApiError(503, "Loading model");
    if (match->needs == Needs::ModelAndOpen && m_shutdown) throw ApiError(503, "the server is shutting down");
    HandlerEnv env{*ctx, m_options, m_counters, m_shutdown};
    switch (match->id) {
    case kModels:
        res.status = 200;
        res.set_content(dumpJson(modelsJson(*ctx, m_options)), "application/json");
        return;
    case kModel: {  // OpenAI's GET /v1/models/{model}: the card, or 404 as for a request naming another model
        const std::string id = req.path.substr(std::string_view("/v1/models/").size());
        if (id != m_options.servedModelName) throw unknownModelError(id, m_options.servedModelName);
        res.status = 200;
        res.set_content(dumpJson(modelsJson(*ctx, m_options)["data"][0]), "application/json");
        return;
    }
    case kMetrics:
        res.status = 200;
        res.set_content(metricsText(ctx->source->metrics(), m_counters, *ctx, m_options),
                        "text/plain; version=0.0.4; charset=utf-8");
        return;
    default: break;
    }
    const json body = parseBody(req.body, lim);
    ConnectionProbe connection(req);  // a non-streaming answer checks it while it waits (connection_probe.h)
    env.connection = &connection;
    switch (match->id) {
    case kChat: handleChat(body, env, res); break;
    case kCompletions: handleCompletions(body, env, res); break;
    case kTokenize: handleTokenize(body, env, res); break;
    case kDetokenize: handleDetokenize(body, env, res); break;
    default: throw ApiError(500, "route without a handler");
    }
}

}  // namespace ts::serve
