#include "ui/engine_controller.h"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QLocale>
#include <QTimer>

#include <chrono>
#include <exception>

#include "core/error.h"
#include "core/log.h"
#include "runtime/device_budget.h"
#include "selftest/verify_backend.h"
#include "text/reasoning_parser.h"
#include "ui/api_server.h"
#include "ui/loaded_engine.h"

namespace ts::ui {

using Clock = std::chrono::steady_clock;

// One chat answer in flight. The engine thread writes it (under the controller's m_streamMutex), the
// controller thread drains it.
struct ChatStream {
    explicit ChatStream(quint64 t, bool startsInReasoning) : ticket(t), parser(startsInReasoning) {}
    const quint64 ticket;
    std::atomic<int64_t> requestId{-1};
    ReasoningParser parser;
    ChatDelta pending;
    bool queued = false;    // already in m_dirty
    bool finished = false;  // the engine's Finished event arrived
    bool finishEmitted = false;
    ChatFinish finish;
    Clock::time_point submitted = Clock::now(), firstToken;
    bool gotFirst = false;
};

namespace {

QString reasonName(FinishReason r) {
    switch (r) {
    case FinishReason::Stop: return QStringLiteral("stop");
    case FinishReason::Length: return QStringLiteral("length");
    case FinishReason::Abort: return QStringLiteral("abort");
    case FinishReason::Error: return QStringLiteral("error");
    case FinishReason::None: break;
    }
    return QStringLiteral("stop");
}

// A generated test checkpoint has a toy width; a real GLM-5.3-Flash has hidden_size 4096.
// Generated test checkpoints (tests/fixtures/make_chat_model.py) say so in config.json; a small model is not
// necessarily noise (the embedded default model is small and trained).
bool looksLikeTestCheckpoint(const ModelConfig& c) { return c.raw.value("twinspark_random_weights", false); }

}  // namespace

EngineController::EngineController() {
    qRegisterMetaType<ModelInfo>();
    qRegisterMetaType<MetricsSample>();
    qRegisterMetaType<ChatRequest>();
    qRegisterMetaType<ChatDelta>();
    qRegisterMetaType<ChatFinish>();
    qRegisterMetaType<LoadOptions>();
    qRegisterMetaType<ApiServerSettings>();
    m_thread.setObjectName(QStringLiteral("EngineController"));
    moveToThread(&m_thread);
    m_clock.start();
    m_thread.start();
    // The timer must be created on the thread that runs it.
    QMetaObject::invokeMethod(this, [this] {
        m_metricsTimer = new QTimer(this);
        m_metricsTimer->setInterval(250);
        connect(m_metricsTimer, &QTimer::timeout, this, &EngineController::sampleMetrics);
        m_metricsTimer->start();
    }, Qt::QueuedConnection);
    // The engine's own messages (core/log.h: a failed request, a load warning, a CUDA note) come from any
    // thread: each is kept on the terminal (stderr) and posted to the controller
    // thread for the log pane. Removed in shutdown() (and in the destructor, whichever thread runs it), after which
    // the sink can no longer run.
    m_logSink = addLogSink([this](LogLevel, std::string_view message) {
        logToStderr(message);
        const QString line = QString::fromUtf8(message.data(), qsizetype(message.size()));
        QMetaObject::invokeMethod(this, [this, line] { log(line); }, Qt::QueuedConnection);
    });
}

EngineController::~EngineController() {
    shutdown();
    removeLogSink(m_logSink);  // also when shutdown() could not run here (the controller's own thread)
}

void EngineController::shutdown() {
    // The controller's own thread cannot wait for itself to end: a call from there (a signal connected with
    // the controller as context) would return at once and leave the thread running into the destructor.
    if (QThread::currentThread() == &m_thread) {
        qWarning("EngineController::shutdown() called on the controller's own thread; call it from the GUI thread");
        return;
    }
    if (m_shutDown) {
        m_thread.wait();  // a second call (the destructor's) still returns only once the thread has ended
        return;
    }
    m_shutDown = true;
    QMetaObject::invokeMethod(this, [this] {
        doUnload();
        if (m_metricsTimer) m_metricsTimer->stop();
        delete m_metricsTimer;
        m_metricsTimer = nullptr;
        m_thread.quit();
    }, Qt::QueuedConnection);
    m_thread.wait();
    removeLogSink(m_logSink);
}

ModelInfo EngineController::modelInfo() const {
    std::lock_guard<std::mutex> lock(m_infoMutex);
    return m_info;
}

void EngineController::setApiServer(std::unique_ptr<ApiServer> server) {
    m_hasApiServer = server != nullptr;
    // Handed to the controller thread, which is the only one that touches it from now on.
    auto* raw = server.release();
    QMetaObject::invokeMethod(this, [this, raw] { m_apiServer.reset(raw); }, Qt::QueuedConnection);
}

void EngineController::setMetricsInterval(int ms) {
    QMetaObject::invokeMethod(this, [this, ms] {
        if (m_metricsTimer) m_metricsTimer->setInterval(ms);
    }, Qt::QueuedConnection);
}

void EngineController::requestLoad(const QString& modelDir, const LoadOptions& options) {
    QMetaObject::invokeMethod(this, [this, modelDir, options] { doLoad(modelDir, options); }, Qt::QueuedConnection);
}

void EngineController::requestUnload() {
    QMetaObject::invokeMethod(this, [this] { doUnload(); }, Qt::QueuedConnection);
}

quint64 EngineController::requestChat(const ChatRequest& request) {
    const quint64 ticket = m_nextTicket++;
    QMetaObject::invokeMethod(this, [this, ticket, request] { doChat(ticket, request); }, Qt::QueuedConnection);
    return ticket;
}

void EngineController::requestStop(quint64 ticket) {
    QMetaObject::invokeMethod(this, [this, ticket] { doStop(ticket); }, Qt::QueuedConnection);
}

void EngineController::requestHttpStart(const ApiServerSettings& settings) {
    QMetaObject::invokeMethod(this, [this, settings] { doHttpStart(settings); }, Qt::QueuedConnection);
}

void EngineController::requestHttpStop() {
    QMetaObject::invokeMethod(this, [this] { doHttpStop(); }, Qt::QueuedConnection);
}

void EngineController::setState(State s) {
    m_state = s;
    emit stateChanged(s);
}

void EngineController::log(const QString& line) {
    emit logMessage(QDateTime::currentDateTime().toString(QStringLiteral("HH:mm:ss.zzz ")) + line);
}

void EngineController::doLoad(const QString& modelDir, const LoadOptions& options) {
    if (m_engine) doUnload();
    setState(State::Loading);
    log(tr("Loading %1").arg(modelDir));
    auto loaded = std::make_unique<LoadedEngine>();
    try {
        const std::string dir = QDir(modelDir).absolutePath().toStdString();
        loaded->dir = dir;
        emit loadProgress(5, tr("Reading config.json"));
        // TWINSPARK_BACKEND (engine_settings.h checked its spelling); "cuda" without a device fails here, named.
        loaded->backend = makeBackend(options.backend.toStdString());
        log(tr("Backend: %1").arg(QString::fromStdString(loaded->backend->name())));
        // GPU_MEM_UTIL's share must be free: checked now, not after minutes of loading (runtime/device_budget.h).
        checkStartupMemory(*loaded->backend, options.gpuMemUtil, [this](const std::string& line) {
            log(QString::fromStdString(line));
            if (line.rfind("waiting", 0) == 0) emit loadProgress(6, tr("Waiting for device memory"));
        });
        if (loaded->backend->name() != "cpu") {
            emit loadProgress(7, tr("GPU self-test (every kernel against the CPU reference)"));
            const auto verified = selftest::verifyBackendOrThrow(*loaded->backend, options.skipGpuSelftest);
            log(verified.skipped ? tr("GPU self-test skipped (SKIP_OVERLAY_VERIFY=1)")
                                 : tr("GPU self-test passed: %1 checks").arg(verified.checks));
        }
        emit loadProgress(10, tr("Mapping and checking the weights"));
        // 10 → 25 % while the weights are bound, layer by layer (a minute or more for the full-size model on a cold
        // page cache: its EXL3 scales are read from disk), then 25 → 78 % while they are made ready (a GPU uploads
        // them: minutes for the full-size model; on the CPU there is nothing to upload).
        int lastPercent = 10;
        const auto binding = [&](int64_t done, int64_t layers) {
            const int percent = 10 + int(layers > 0 ? 15 * done / layers : 15);
            if (done == 0 || percent == lastPercent) return;
            lastPercent = percent;
            emit loadProgress(percent, tr("Mapping and checking the weights (layer %1 of %2)").arg(done).arg(layers));
        };
        const auto weights = [&](int64_t done, int64_t total) {
            const int percent = 25 + int(total > 0 ? 53 * done / total : 53);
            if (percent == lastPercent) return;
            lastPercent = percent;
            // formattedDataSize picks the unit (MiB for the embedded model, GiB for the full-size one).
            const QLocale locale;
            emit loadProgress(percent, tr("Loading the weights (%1 of %2)")
                                           .arg(locale.formattedDataSize(done), locale.formattedDataSize(total)));
        };
        loaded->model = std::make_unique<Glm5NextModel>(dir, *loaded->backend, weights, binding);
        emit loadProgress(80, tr("Loading the tokenizer"));
        if (QFileInfo::exists(QString::fromStdString(dir + "/tokenizer.json"))) {
            loaded->tokenizer = Tokenizer::fromDirectory(dir);
            emit loadProgress(88, tr("Loading the chat template"));
            try {
                loaded->chatTemplate = ChatTemplate::fromModelDir(dir);
                loaded->chatTemplate->setSpecialTokens(nlohmann::ordered_json{
                    {"eos_token", loaded->tokenizer->config().eosToken.value_or("")},
                    {"bos_token", loaded->tokenizer->config().bosToken.value_or("")}});
            } catch (const Error& e) {
                if (e.kind() != ErrorKind::NotFound) throw;
                log(tr("No chat template in %1: the chat playground is unavailable").arg(modelDir));
            }
        } else {
            log(tr("No tokenizer.json in %1: the chat playground is unavailable").arg(modelDir));
        }
        emit loadProgress(92, tr("Sizing the KV pool"));
        EngineConfig ec;
        ec.maxNumSeqs = options.maxNumSeqs;
        ec.maxNumBatchedTokens = options.maxNumBatchedTokens;
        ec.maxModelLen = options.maxModelLen;
        ec.kvBudgetBytes = options.kvBudgetMiB << 20;
        ec.kvDtype = options.kvFp32 ? KvCacheDtype::Fp32 : KvCacheDtype::Fp8;
        if (const auto db = deviceKvBudget(*loaded->model, ec, options.gpuMemUtil)) {
            ec.kvBudgetBytes = db->kvBudgetBytes;
            log(tr("GPU memory: %1").arg(QString::fromStdString(describeDeviceBudget(*db, options.gpuMemUtil))));
        }
        log(tr("Engine: up to %1 sequences at once, %2 tokens per step, %3 tokens per request at most, KV cache %4")
                .arg(ec.maxNumSeqs)
                .arg(ec.maxNumBatchedTokens)
                .arg(ec.maxModelLen)
                .arg(ec.kvDtype == KvCacheDtype::Fp32 ? QStringLiteral("fp32") : QStringLiteral("fp8")));
        loaded->engine = std::make_unique<Engine>(*loaded->model, ec, loaded->tokenizer ? &*loaded->tokenizer : nullptr);
    } catch (const std::exception& e) {
        const QString msg = QString::fromUtf8(e.what());
        log(tr("Load failed: %1").arg(msg));
        loaded.reset();
        setState(State::Empty);
        emit loadFailed(msg);
        return;
    }
    m_engine = std::move(loaded);
    const TextConfig& t = m_engine->model->text();
    ModelInfo info;
    info.path = QString::fromStdString(m_engine->dir);
    info.name = QFileInfo(info.path).fileName();
    info.layers = t.num_hidden_layers;
    info.vocabSize = t.vocab_size;
    info.kvTokenCapacity = m_engine->engine->plan().tokens;
    info.maxModelLen = m_engine->engine->config().maxModelLen;
    info.hasChatTemplate = m_engine->tokenizer && m_engine->chatTemplate;
    info.randomWeights = looksLikeTestCheckpoint(m_engine->model->config());
    m_prevTtftSum = 0;
    m_prevTtftCount = 0;
    m_failureReported = false;
    {
        std::lock_guard<std::mutex> lock(m_infoMutex);
        m_info = info;
    }
    emit loadProgress(100, tr("Ready"));
    log(tr("Loaded %1: %2 layers, vocabulary %3, KV pool %4 tokens")
            .arg(info.name).arg(info.layers).arg(info.vocabSize).arg(info.kvTokenCapacity));
    setState(State::Ready);
    emit modelLoaded(info);
}

void EngineController::doUnload() {
    if (!m_engine) return;
    setState(State::Unloading);
    doHttpStop();
    for (const auto& s : std::as_const(m_active))
        if (s->requestId >= 0) m_engine->engine->abort(s->requestId);
    m_engine.reset();  // joins the step thread: no callback runs after this line
    {
        std::lock_guard<std::mutex> lock(m_infoMutex);
        m_info = ModelInfo();
    }
    flushStreams();
    // Requests the engine never finished (it stopped first) still get their chatFinished.
    for (const auto& s : std::as_const(m_active)) {
        ChatFinish f;
        f.reason = QStringLiteral("abort");
        emit chatFinished(s->ticket, f);
    }
    m_active.clear();
    log(tr("Model unloaded"));
    setState(State::Empty);
    emit modelUnloaded();
}

void EngineController::doChat(quint64 ticket, const ChatRequest& request) {
    auto failWith = [&](const QString& msg) {
        ChatFinish f;
        f.reason = QStringLiteral("error");
        f.error = msg;
        emit chatFinished(ticket, f);
    };
    if (!m_engine) return failWith(tr("No model is loaded."));
    if (!m_engine->tokenizer || !m_engine->chatTemplate)
        return failWith(tr("This model has no tokenizer or chat template, so it cannot chat."));
    try {
        const QByteArray json = QJsonDocument(request.messages).toJson(QJsonDocument::Compact);
        const auto messages = nlohmann::ordered_json::parse(json.constData(), json.constData() + json.size());
        const nlohmann::ordered_json kwargs = {{"enable_thinking", request.thinking}};
        const std::string prompt = m_engine->chatTemplate->render(messages, nullptr, true, kwargs);
        std::vector<int32_t> ids = m_engine->tokenizer->encode(prompt);
        const qint64 promptTokens = qint64(ids.size());
        SamplingParams p;
        p.temperature = float(request.temperature);
        p.topP = float(request.topP);
        p.topK = request.topK;
        p.minP = float(request.minP);
        p.repetitionPenalty = float(request.repetitionPenalty);
        p.maxTokens = request.maxTokens;
        if (request.seed) p.seed = *request.seed;
        p.ignoreEos = request.ignoreEos;
        auto stream = std::make_shared<ChatStream>(ticket, ChatTemplate::promptEndsInReasoning(prompt));
        m_active.insert(ticket, stream);
        const int64_t id = m_engine->engine->submit(std::move(ids), p, [this, stream](const EngineEvent& e) {
            onEngineEvent(stream, e);
        });
        stream->requestId = id;
        log(tr("Chat request %1: %2 prompt tokens").arg(id).arg(promptTokens));
    } catch (const std::exception& e) {
        m_active.remove(ticket);
        log(tr("Chat request refused: %1").arg(QString::fromUtf8(e.what())));
        failWith(QString::fromUtf8(e.what()));
    }
}

void EngineController::onEngineEvent(const std::shared_ptr<ChatStream>& s, const EngineEvent& e) {
    const EngineEvent* finished = e.type == EngineEvent::Type::Finished ? &e : nullptr;
    std::lock_guard<std::mutex> lock(m_streamMutex);
    const ReasoningDelta d = s->parser.feed(e.text);
    s->pending.reasoning += QString::fromStdString(d.reasoning);
    s->pending.content += QString::fromStdString(d.content);
    if (!finished) {
        ++s->pending.tokens;
        if (!s->gotFirst) {
            s->gotFirst = true;
            s->firstToken = Clock::now();
        }
    } else {
        const ReasoningDelta rest = s->parser.finish();
        s->pending.reasoning += QString::fromStdString(rest.reasoning);
        s->pending.content += QString::fromStdString(rest.content);
        s->finished = true;
        s->finish.reason = reasonName(finished->reason);
        s->finish.error = QString::fromStdString(finished->error);
        s->finish.promptTokens = finished->promptTokens;
        s->finish.completionTokens = finished->completionTokens;
        s->finish.cachedPromptTokens = finished->cachedPromptTokens;
        const auto now = Clock::now();
        if (s->gotFirst) {
            s->finish.ttftSeconds = std::chrono::duration<double>(s->firstToken - s->submitted).count();
            const double gen = std::chrono::duration<double>(now - s->firstToken).count();
            if (finished->completionTokens > 1 && gen > 0)
                s->finish.tokensPerSecond = double(finished->completionTokens - 1) / gen;
        }
    }
    if (!s->queued) {
        s->queued = true;
        m_dirty.push_back(s);
    }
    if (!m_flushPosted) {
        m_flushPosted = true;
        QMetaObject::invokeMethod(this, [this] { flushStreams(); }, Qt::QueuedConnection);
    }
}

void EngineController::flushStreams() {
    struct Out {
        quint64 ticket;
        ChatDelta delta;
        bool finished;
        ChatFinish finish;
    };
    std::vector<Out> out;
    {
        std::lock_guard<std::mutex> lock(m_streamMutex);
        m_flushPosted = false;
        for (const auto& s : m_dirty) {
            s->queued = false;
            Out o{s->ticket, std::move(s->pending), s->finished && !s->finishEmitted, s->finish};
            s->pending = ChatDelta();
            if (o.finished) s->finishEmitted = true;
            out.push_back(std::move(o));
        }
        m_dirty.clear();
    }
    for (const Out& o : out) {
        if (!o.delta.content.isEmpty() || !o.delta.reasoning.isEmpty() || o.delta.tokens > 0)
            emit chatDelta(o.ticket, o.delta);
        if (o.finished) {
            m_active.remove(o.ticket);
            emit chatFinished(o.ticket, o.finish);
        }
    }
}

void EngineController::doStop(quint64 ticket) {
    const auto it = m_active.constFind(ticket);
    if (it == m_active.constEnd() || !m_engine) return;
    if ((*it)->requestId >= 0) m_engine->engine->abort((*it)->requestId);
}

void EngineController::doHttpStart(const ApiServerSettings& settings) {
    if (!m_apiServer) {
        emit httpStateChanged(false, QString(), tr("This build has no HTTP server."));
        return;
    }
    if (!m_engine) {
        emit httpStateChanged(false, QString(), tr("Load a model first."));
        return;
    }
    try {
        if (m_apiServer->isRunning()) m_apiServer->stop();
        const QString url = m_apiServer->start(*m_engine, settings);
        log(tr("HTTP server listening: %1").arg(url));
        emit httpStateChanged(true, url, QString());
    } catch (const std::exception& e) {
        const QString msg = QString::fromUtf8(e.what());
        log(tr("HTTP server failed to start: %1").arg(msg));
        emit httpStateChanged(false, QString(), msg);
    }
}

void EngineController::doHttpStop() {
    if (!m_apiServer || !m_apiServer->isRunning()) return;
    m_apiServer->stop();
    log(tr("HTTP server stopped"));
    emit httpStateChanged(false, QString(), QString());
}

void EngineController::sampleMetrics() {
    if (!m_engine) return;
    const EngineMetrics m = m_engine->engine->metrics();
    MetricsSample s;
    s.timeSeconds = double(m_clock.elapsed()) / 1000.0;
    s.running = m.running;
    s.waiting = m.waiting;
    s.kvUsage = m.kvUsage;
    s.kvBlocksTotal = m.kvBlocks;
    s.kvBlocksUsed = qint64(m.kvUsage * double(m.kvBlocks) + 0.5);
    s.kvTokenCapacity = m.kvTokenCapacity;
    s.kvTokensUsed = m.kvBlocks > 0 ? s.kvBlocksUsed * (m.kvTokenCapacity / m.kvBlocks) : 0;
    s.promptTokensPerSecond = m.promptTokensPerSecond;
    s.generationTokensPerSecond = m.generationTokensPerSecond;
    s.promptTokensTotal = m.promptTokens;
    s.generationTokensTotal = m.generationTokens;
    s.graphReplays = m.graphReplays;
    s.deviceMemoryTotal = m.deviceMemoryTotal;
    s.deviceMemoryFree = m.deviceMemoryFree;
    s.deviceMemoryUnified = m.deviceMemoryUnified;
    s.requestsFinished = m.requestsFinished;
    if (m.ttft.count > m_prevTtftCount)
        s.ttftSeconds = (m.ttft.sum - m_prevTtftSum) / double(m.ttft.count - m_prevTtftCount);
    if (m.ttft.count > 0) s.ttftMeanSeconds = m.ttft.sum / double(m.ttft.count);
    m_prevTtftSum = m.ttft.sum;
    m_prevTtftCount = m.ttft.count;
    s.engineFailure = QString::fromStdString(m_engine->engine->deviceFailure());
    if (!s.engineFailure.isEmpty() && !m_failureReported) {
        m_failureReported = true;
        log(tr("The engine has stopped: %1. Nothing more runs on this GPU until TwinSpark is restarted; unload the "
               "model (the CPU backend still works).").arg(s.engineFailure));
    }
    emit metricsUpdated(s);
}

}  // namespace ts::ui
