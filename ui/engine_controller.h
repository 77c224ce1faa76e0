// The GUI's only door to the engine (shared/design/ARCHITECTURE.md §1). The controller is a QObject that
// lives on its own QThread: loading a model, rendering a chat template, tokenizing and submitting all
// happen there, and generation runs on the engine's own step thread. Widgets call the request*()
// methods, which only post work and return at once; everything comes back as signals, delivered to the
// widgets through queued connections. There is no BlockingQueuedConnection and no wait on the GUI
// thread, except in shutdown() when the application quits.
//
// Streaming: the engine calls back on its step thread for every token. Those callbacks only append to a
// buffer under a mutex and post at most one flush; the flush (on the controller thread) emits one
// chatDelta per request with everything gathered since the last one. However fast tokens arrive, the
// GUI receives a bounded number of events.
#pragma once

#include <QElapsedTimer>
#include <QHash>
#include <QObject>
#include <QThread>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/log.h"
#include "ui/engine_settings.h"  // LoadOptions
#include "ui/engine_types.h"

class QTimer;

namespace ts {
struct EngineEvent;
}

namespace ts::ui {

class ApiServer;
struct ApiServerSettings;
struct LoadedEngine;
struct ChatStream;

class EngineController final : public QObject {
    Q_OBJECT
public:
    enum class State { Empty, Loading, Ready, Unloading };
    Q_ENUM(State)

    EngineController();
    ~EngineController() override;

    // All of these return at once; results arrive as signals.
    void requestLoad(const QString& modelDir, const LoadOptions& options = {});
    void requestUnload();
    // Returns the ticket that identifies the answer's chatDelta / chatFinished signals.
    quint64 requestChat(const ChatRequest& request);
    void requestStop(quint64 ticket);
    void requestHttpStart(const ApiServerSettings& settings);
    void requestHttpStop();

    // Installs the HTTP server implementation (the controller owns it and runs it on the loaded engine).
    // Call before the first requestHttpStart; null means "no HTTP server in this build".
    void setApiServer(std::unique_ptr<ApiServer> server);
    bool hasApiServer() const { return m_hasApiServer.load(); }

    // The metrics period (default 250 ms: ~4 Hz, the dashboard's rate).
    void setMetricsInterval(int ms);

    // Stops generation, the HTTP server and the engine, and ends the thread. Called at exit from the GUI thread
    // (the destructor calls it too); this is the one place that waits, and only for the engine to stop. On the
    // controller's own thread it does nothing but warn (it cannot wait for itself). It also removes the controller's
    // sink for the engine's messages (core/log.h); with several controllers, the newest one alive gets them.
    void shutdown();

    State state() const { return m_state.load(); }
    // The loaded model (any thread; empty name when none). Lets a page created after the load catch up.
    ModelInfo modelInfo() const;

signals:
    void stateChanged(ts::ui::EngineController::State state);
    void loadProgress(int percent, const QString& stage);
    void modelLoaded(const ts::ui::ModelInfo& info);
    void loadFailed(const QString& error);
    void modelUnloaded();
    void chatDelta(quint64 ticket, const ts::ui::ChatDelta& delta);
    void chatFinished(quint64 ticket, const ts::ui::ChatFinish& finish);
    void metricsUpdated(const ts::ui::MetricsSample& sample);
    void httpStateChanged(bool running, const QString& baseUrl, const QString& error);
    // A timestamped line for the log pane: the controller's own steps and every engine message (core/log.h),
    // whichever thread logged it.
    void logMessage(const QString& line);

private:
    // These run on the controller thread.
    void doLoad(const QString& modelDir, const LoadOptions& options);
    void doUnload();
    void doChat(quint64 ticket, const ChatRequest& request);
    void doStop(quint64 ticket);
    void doHttpStart(const ApiServerSettings& settings);
    void doHttpStop();
    void flushStreams();
    void sampleMetrics();
    void setState(State s);
    void log(const QString& line);
    // Called on the engine's step thread.
    void onEngineEvent(const std::shared_ptr<ChatStream>& stream, const ts::EngineEvent& event);

    QThread m_thread;
    std::atomic<State> m_state{State::Empty};
    std::atomic<bool> m_hasApiServer{false};
    std::atomic<quint64> m_nextTicket{1};
    bool m_shutDown = false;  // GUI thread only

    // Controller-thread state.
    std::unique_ptr<LoadedEngine> m_engine;
    std::unique_ptr<ApiServer> m_apiServer;
    QHash<quint64, std::shared_ptr<ChatStream>> m_active;
    QTimer* m_metricsTimer = nullptr;
    QElapsedTimer m_clock;
    bool m_failureReported = false;  // the engine's device failure is logged once per load
    double m_prevTtftSum = 0;
    quint64 m_prevTtftCount = 0;

    uint64_t m_logSink = 0;  // this controller's sink for the engine's messages (core/log.h), removed in shutdown

    mutable std::mutex m_infoMutex;
    ModelInfo m_info;  // guarded by m_infoMutex

    // Hand-over from the engine thread: streams with output not yet emitted.
    std::mutex m_streamMutex;
    std::vector<std::shared_ptr<ChatStream>> m_dirty;
    bool m_flushPosted = false;
};

}  // namespace ts::ui

Q_DECLARE_METATYPE(ts::ui::LoadOptions)
