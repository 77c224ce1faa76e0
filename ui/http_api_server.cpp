// ApiServer over the engine's OpenAI HTTP server (engine/serve): the same ts::Engine the chat page uses,
// so API clients and the playground share one batch, one KV pool and one set of metrics.
#include <QDateTime>

#include <algorithm>

#include "serve/generation.h"
#include "serve/server.h"
#include "ui/api_server.h"
#include "ui/loaded_engine.h"

namespace ts::ui {

namespace {

class HttpApiServer final : public ApiServer {
public:
    ~HttpApiServer() override { stop(); }

    QString start(LoadedEngine& loaded, const ApiServerSettings& settings) override {
        stop();
        serve::ServerOptions options;
        options.host = settings.host.toStdString();
        options.port = settings.port;
        options.apiKey = settings.apiKey.toStdString();
        options.limits.maxConcurrentRequests = settings.maxConcurrentRequests;
        options.logRequests = false;  // the GUI's log shows lifecycle lines; stderr stays quiet
        auto server = std::make_unique<serve::HttpServer>(options);
        server->start();  // throws with a message for the user (port in use, LAN without a key)
        m_source = std::make_unique<serve::EngineSource>(*loaded.engine);
        auto ctx = std::make_shared<serve::ServeContext>();
        ctx->tokenizer = loaded.tokenizer ? &*loaded.tokenizer : nullptr;
        ctx->chatTemplate = loaded.chatTemplate ? &*loaded.chatTemplate : nullptr;
        ctx->source = m_source.get();
        ctx->root = loaded.dir;
        ctx->maxModelLen = std::min(loaded.engine->config().maxModelLen, loaded.engine->plan().tokens);
        ctx->vocabSize = loaded.model->text().vocab_size;
        ctx->defaults = serve::SamplingDefaults::fromGenerationConfig(loaded.model->config().generation.raw);
        ctx->created = QDateTime::currentSecsSinceEpoch();
        server->setReady(ctx);
        m_ctx = std::move(ctx);
        m_server = std::move(server);
        const QString host = settings.host == QLatin1String("0.0.0.0") ? QStringLiteral("127.0.0.1") : settings.host;
        return QStringLiteral("http://%1:%2/v1").arg(host).arg(m_server->port());
    }

    void stop() override {
        if (m_server) m_server->shutdown();  // aborts in-flight requests and joins the HTTP threads
        m_server.reset();
        m_ctx.reset();
        m_source.reset();
    }

    bool isRunning() const override { return m_server != nullptr; }

private:
    std::unique_ptr<serve::EngineSource> m_source;
    std::shared_ptr<serve::ServeContext> m_ctx;
    std::unique_ptr<serve::HttpServer> m_server;
};

}  // namespace

std::unique_ptr<ApiServer> makeApiServer() { return std::make_unique<HttpApiServer>(); }

}  // namespace ts::ui
