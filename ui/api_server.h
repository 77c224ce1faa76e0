// The in-process OpenAI HTTP server as the control center sees it: started on the loaded engine (the
// chat page and API clients share its batching and KV pool) and stopped before the engine goes away.
// The controller owns it and calls it only on its own thread. makeApiServer() returns the
// implementation built into this binary, or null when there is none (the Server page then shows no
// HTTP switch rather than one that cannot work).
#pragma once

#include <QMetaType>
#include <QString>

#include <memory>

namespace ts::ui {

struct LoadedEngine;

struct ApiServerSettings {
    QString host = QStringLiteral("127.0.0.1");  // loopback unless serving on the LAN is chosen
    int port = 8888;
    QString apiKey;  // empty: no authentication (the server allows that on loopback only)
    int maxConcurrentRequests = 64;  // generation requests at once (TS_MAX_CONCURRENT_REQUESTS); more get 503
};

class ApiServer {
public:
    virtual ~ApiServer() = default;
    // Listens on settings.host:port and serves `engine` until stop(). Throws ts::Error with a message
    // for the user (port in use, no key on a LAN address, ...). Returns the base URL (…/v1).
    virtual QString start(LoadedEngine& engine, const ApiServerSettings& settings) = 0;
    // Aborts in-flight requests and stops listening. Safe when not running.
    virtual void stop() = 0;
    virtual bool isRunning() const = 0;
};

std::unique_ptr<ApiServer> makeApiServer();

}  // namespace ts::ui

Q_DECLARE_METATYPE(ts::ui::ApiServerSettings)
