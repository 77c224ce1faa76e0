#include "ui/engine_settings.h"

#include <QCoreApplication>

#include <optional>
#include <string>

#include "runtime/runtime_settings.h"
#include "ui/env_store.h"

namespace ts::ui {

namespace {


QString keyOf(const IntSetting& s) { return QString::fromLatin1(s.env); }

// "<KEY> '<value>' (from <where>) is not usable: <what>": the same shape as a bad PORT's (EnvStore::apiPort).
QString problem(const EnvStore& env, const QString& key, const QString& value, const QString& what) {
    const QString source = env.isOverridden(key)
                               ? env.overrideSource(key)
                               : QCoreApplication::translate("EngineSettings", "the .env file %1").arg(env.path());
    return QCoreApplication::translate("EngineSettings", "%1 '%2' (from %3) is not usable: %4")
        .arg(key, value, source, what);
}

// The value in effect, or nullopt (unset or empty: the default applies).
std::optional<std::string> given(const EnvStore& env, const QString& key) {
    const QString v = env.value(key);
    if (v.isEmpty()) return std::nullopt;
    return v.toStdString();
}

template <class T>
void readInt(const EnvStore& env, const IntSetting& s, T* out, QMap<QString, QString>* problems) {
    const QString key = keyOf(s);
    const auto v = given(env, key);
    if (!v) return;
    std::string why;
    if (const auto x = parseIntSetting(s, *v, &why)) {
        *out = T(*x);
        return;
    }
    const QString what =
        QCoreApplication::translate("EngineSettings", "give a whole number from %1 to %2.").arg(s.lo).arg(s.hi);
    problems->insert(key, problem(env, key, QString::fromStdString(*v), what));
}

}  // namespace

QStringList engineSettingKeys() {
    return {keyOf(kMaxNumSeqsSetting),         keyOf(kMaxNumBatchedTokensSetting),
            keyOf(kMaxModelLenSetting),        keyOf(kKvBudgetMibSetting),
            keyOf(kMaxConcurrentRequestsSetting), QString::fromLatin1(kGpuMemUtilEnv),
            QString::fromLatin1(kKvCacheDtypeEnv), QString::fromLatin1(kBackendEnv),
            QStringLiteral("SKIP_OVERLAY_VERIFY")};
}

QStringList serverPageControlKeys() { return {keyOf(kMaxNumSeqsSetting), keyOf(kKvBudgetMibSetting)}; }

EngineSettings engineSettings(const EnvStore& env) {
    EngineSettings out;
    LoadOptions& o = out.options;
    readInt(env, kMaxNumSeqsSetting, &o.maxNumSeqs, &out.problems);
    readInt(env, kMaxNumBatchedTokensSetting, &o.maxNumBatchedTokens, &out.problems);
    readInt(env, kMaxModelLenSetting, &o.maxModelLen, &out.problems);
    readInt(env, kKvBudgetMibSetting, &o.kvBudgetMiB, &out.problems);
    readInt(env, kMaxConcurrentRequestsSetting, &out.maxConcurrentRequests, &out.problems);
    std::string why;
    const QString utilKey = QString::fromLatin1(kGpuMemUtilEnv);
    if (const auto v = given(env, utilKey)) {
        if (const auto u = parseGpuMemUtilSetting(*v, &why)) {
            o.gpuMemUtil = *u;
        } else {
            const QString what = QCoreApplication::translate(
                "EngineSettings", "give the share of the GPU's memory to use, above 0 and at most 1 (the recipe's 0.87).");
            out.problems.insert(utilKey, problem(env, utilKey, QString::fromStdString(*v), what));
        }
    }
    const QString dtypeKey = QString::fromLatin1(kKvCacheDtypeEnv);
    if (const auto v = given(env, dtypeKey)) {
        if (const auto d = parseKvCacheDtypeSetting(*v, &why)) {
            o.kvFp32 = *d == KvCacheDtype::Fp32;
        } else {
            const QString what =
                why.rfind("refused", 0) == 0
                    ? QCoreApplication::translate("EngineSettings",
                                                  "GLM-5.3-Flash's sparse MLA kernels read the packed fp8 cache "
                                                  "(fp8_ds_mla); give fp8, or fp32 for the exact reference mode.")
                    : QCoreApplication::translate("EngineSettings", "give fp8 (the recipe's) or fp32.");
            out.problems.insert(dtypeKey, problem(env, dtypeKey, QString::fromStdString(*v), what));
        }
    }
    const QString backendKey = QString::fromLatin1(kBackendEnv);
    if (const auto v = given(env, backendKey)) {
        if (isBackendSetting(*v))
            o.backend = QString::fromStdString(*v);
        else
            out.problems.insert(backendKey,
                                problem(env, backendKey, QString::fromStdString(*v),
                                        QCoreApplication::translate("EngineSettings", "give auto, cpu or cuda.")));
    }
    o.skipGpuSelftest = env.value(QStringLiteral("SKIP_OVERLAY_VERIFY")) == QLatin1String("1");
    return out;
}

}  // namespace ts::ui
