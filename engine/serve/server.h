// The OpenAI-compatible HTTP server (cpp-httplib): lifecycle, the route table and the one dispatcher
// that applies, in order, the header limit, the Host check, CORS, authentication, routing (404/405),
// readiness (503) and the error mapping. It answers /health from the moment it listens (503 "Loading
// model" until setReady), so a client can poll while the weights load.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "serve/auth.h"
#include "serve/context.h"
#include "serve/server_options.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace ts::serve {

class HttpServer {
public:
    explicit HttpServer(ServerOptions options);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts listening on its own thread. Throws ts::Error(Io) when the address cannot be
    // bound, ts::Error(InvalidArgument) for a non-loopback host without an API key.
    void start();
    int port() const { return m_port; }
    const ServerOptions& options() const { return m_options; }

    // The model is loaded: model routes start answering. The context must outlive the server.
    void setReady(std::shared_ptr<ServeContext> ctx);
    // Loading failed: /health answers 503 with this message until shutdown.
    void setFailed(std::string message);
    bool ready() const;

    // Graceful stop: new generation requests get 503, in-flight ones are aborted (streams end with an
    // error event and [DONE]), their handlers get limits.drainTimeout to finish, then the listener
    // stops and its threads are joined. Idempotent.
    void shutdown();

    const ServerCounters& counters() const { return m_counters; }

    // Allow insecure binding (non-loopback without a key): only for an explicit operator choice.
    void allowUnauthenticatedLan(bool on) { m_allowNoAuthLan = on; }

private:
    struct Route;
    void dispatch(const httplib::Request& req, httplib::Response& res);
    void route(const httplib::Request& req, httplib::Response& res);
    std::shared_ptr<ServeContext> context() const;

    ServerOptions m_options;
    ApiKey m_key;
    CorsPolicy m_cors;
    bool m_loopback = true;
    bool m_allowNoAuthLan = false;
    std::unique_ptr<httplib::Server> m_http;
    std::thread m_thread;
    int m_port = 0;
    std::atomic<bool> m_shutdown{false};
    bool m_stopped = false;
    mutable std::mutex m_mutex;
    std::shared_ptr<ServeContext> m_ctx;
    std::string m_failure;
    ServerCounters m_counters;
};

}  // namespace ts::serve
