// Value types that cross the thread boundary between the EngineController (its own thread) and the
// widgets (GUI thread). They travel inside queued signals, so each is a plain copyable value registered
// with the meta-type system — never a pointer into engine state.
#pragma once

#include <QJsonArray>
#include <QMetaType>
#include <QString>

#include <cstdint>
#include <optional>

namespace ts::ui {

// What the loaded model is, for the Server page and the window title.
struct ModelInfo {
    QString path;
    QString name;              // folder name
    int layers = 0;
    qint64 vocabSize = 0;
    qint64 kvTokenCapacity = 0;
    qint64 maxModelLen = 0;
    bool hasChatTemplate = false;
    bool randomWeights = false;  // a generated test checkpoint: its text is noise, and the UI says so
};

// One ~4 Hz sample of the engine's metrics snapshot (the same counters as /metrics).
struct MetricsSample {
    double timeSeconds = 0;       // since the controller started
    int running = 0;
    int waiting = 0;
    double kvUsage = 0;           // fraction of blocks in use
    qint64 kvBlocksUsed = 0, kvBlocksTotal = 0;
    qint64 kvTokensUsed = 0, kvTokenCapacity = 0;
    double promptTokensPerSecond = 0;
    double generationTokensPerSecond = 0;
    qint64 promptTokensTotal = 0, generationTokensTotal = 0;
    qint64 requestsFinished = 0;
    qint64 graphReplays = 0;      // decode steps replayed from CUDA graphs (0 on the CPU backend)
    // The GPU's memory (bytes; total 0 on the CPU backend). Unified (a GB10): free is the system's MemAvailable.
    qint64 deviceMemoryTotal = 0, deviceMemoryFree = 0;
    bool deviceMemoryUnified = false;
    // Mean time to first token of the requests that got their first token since the previous sample;
    // negative when none did (the chart then shows no point rather than a fake zero).
    double ttftSeconds = -1;
    double ttftMeanSeconds = 0;  // over the whole run
    // Empty while the engine runs; after a lost GPU (Engine::deviceFailure) why it stopped: every request failed,
    // no new one is taken until the model is unloaded and TwinSpark restarted.
    QString engineFailure;
};

// One chat turn to generate. `messages` is the OpenAI messages array; the controller renders it with
// the model's chat template.
struct ChatRequest {
    QJsonArray messages;
    bool thinking = true;
    double temperature = 1.0;
    double topP = 0.95;
    int topK = 0;
    double minP = 0.0;
    double repetitionPenalty = 1.0;
    int maxTokens = 1024;
    std::optional<quint64> seed;
    bool ignoreEos = false;  // generate to maxTokens (benchmarks, load tests); no control in the chat page
};

// A piece of streamed output: what became final since the last delta.
struct ChatDelta {
    QString reasoning;
    QString content;
    int tokens = 0;  // tokens this delta covers
};

struct ChatFinish {
    QString reason;  // "stop", "length", "abort", "error"
    QString error;   // for reason == "error"
    qint64 promptTokens = 0, completionTokens = 0, cachedPromptTokens = 0;
    double ttftSeconds = 0;
    double tokensPerSecond = 0;  // generation speed after the first token
};

}  // namespace ts::ui

Q_DECLARE_METATYPE(ts::ui::ModelInfo)
Q_DECLARE_METATYPE(ts::ui::MetricsSample)
Q_DECLARE_METATYPE(ts::ui::ChatRequest)
Q_DECLARE_METATYPE(ts::ui::ChatDelta)
Q_DECLARE_METATYPE(ts::ui::ChatFinish)
