// The engine settings of a model load (LoadOptions) and where the control center takes them from: the
// deployment .env's runtime block — MAX_NUM_SEQS, MAX_NUM_BATCHED_TOKENS, MAX_MODEL_LEN, GPU_MEM_UTIL,
// KV_CACHE_DTYPE, TwinSpark's TS_KV_BUDGET_MIB, TS_MAX_CONCURRENT_REQUESTS and TWINSPARK_BACKEND, and
// SKIP_OVERLAY_VERIFY — through EnvStore (command line,
// environment, file), by the rules of runtime/runtime_settings.h, which `twinspark-cli serve` applies too.
// A value neither accepts is reported with where it came from; the model is not loaded with a default in
// its place.
#pragma once

#include <QMap>
#include <QStringList>
#include <QtGlobal>

namespace ts::ui {

class EnvStore;

// Engine sizing for a load (the recipe's defaults where they apply to one CPU/GPU process).
struct LoadOptions {
    int maxNumSeqs = 4;
    qint64 maxNumBatchedTokens = 1024;
    qint64 maxModelLen = 900000;
    qint64 kvBudgetMiB = 2048;  // the KV budget on the CPU; on a GPU it comes from gpuMemUtil
    double gpuMemUtil = 0.87;   // GPU_MEM_UTIL (the recipe's default)
    bool kvFp32 = false;        // fp8 (the recipe's) unless an exact comparison is wanted
    bool skipGpuSelftest = false;  // SKIP_OVERLAY_VERIFY=1: serve without checking the GPU's kernels first
    QString backend = QStringLiteral("auto");  // TWINSPARK_BACKEND: auto, cpu or cuda
};

struct EngineSettings {
    LoadOptions options;             // each key's value, or the recipe's default where it is unset or empty
    int maxConcurrentRequests = 64;  // TS_MAX_CONCURRENT_REQUESTS: generation requests the in-process API takes at once
    // key → one sentence per unusable value: key, value, where it came from, what is accepted.
    QMap<QString, QString> problems;
};

// The keys whose .env value only starts a Server page control (MAX_NUM_SEQS: parallel requests; TS_KV_BUDGET_MIB:
// the KV budget): a load takes the control's value, so a bad one there is reported but does not stop the load.
QStringList serverPageControlKeys();

// The keys read here (EnvStore takes their environment overrides as well as the setup fields').
QStringList engineSettingKeys();
EngineSettings engineSettings(const EnvStore& env);

}  // namespace ts::ui
