#include "ui/env_schema.h"

#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSet>

#include <string>

#include "runtime/runtime_settings.h"

namespace ts::ui {

QList<FieldSpec> EnvSchema::fields() {
    const QString ncclNote = tr("NCCL cannot use the 10.0.0.x loopback aliases: its traffic is pinned to the CX7 "
                                "interfaces and RDMA devices on the Fabric page, and wrong pins hang "
                                "initialisation (ncclCommInitRank) instead of failing.");
    return {
        {QStringLiteral("MODEL_PATH"), FieldKind::ModelPath, tr("Model folder"),
         tr("The checkpoint folder: config.json, the *.safetensors shards and tokenizer.json. The "
            "production model is Mia-AiLab/GLM-5.3-Flash-EXL3-TR3-4bpw (120 shards, about 164 GiB)."),
         QString()},
        {QStringLiteral("HEAD_IP"), FieldKind::IPv4, tr("Head address"),
         tr("This machine: rank 0, the scheduler, the API and the NCCL master. ") + ncclNote,
         QStringLiteral("10.0.0.1")},
        {QStringLiteral("WORKER_IP"), FieldKind::IPv4, tr("Worker address"),
         tr("The second Spark (rank 1), reached over SSH. It must differ from the head address."),
         QStringLiteral("10.0.0.2")},
        {QStringLiteral("WORKER_USER"), FieldKind::User, tr("Worker SSH user"),
         tr("The account on the worker, when it differs from yours here. Passwordless SSH from the head "
            "to the worker is required. Empty: the same user name."),
         QString()},
        {QStringLiteral("WORKER_HOME"), FieldKind::HomePath, tr("Worker home"),
         tr("Home directory (and Hugging Face cache location) on the worker, when it differs. An "
            "absolute path; empty: the same as here."),
         QString()},
        {QStringLiteral("PORT"), FieldKind::Port, tr("API port"),
         tr("Port of the OpenAI-compatible API on the head node (base URL http://HEAD:PORT/v1)."),
         QStringLiteral("8888")},
        {QStringLiteral("VLLM_API_KEY"), FieldKind::ApiKey, tr("API key"),
         tr("Bearer key that API clients must send. Without one the API has no authentication: the "
            "recipe warns to always set it in production."),
         QString()},
        {QStringLiteral("HEAD_CX7_IF"), FieldKind::Interface, tr("Head CX7 interface"),
         tr("Network interface of the CX7 link on the head (see `ip -br link`). ") + ncclNote, QString()},
        {QStringLiteral("WORKER_CX7_IF"), FieldKind::Interface, tr("Worker CX7 interface"),
         tr("Network interface of the CX7 link on the worker. Keep the documented pins unless your "
            "cabling differs."),
         QString()},
        {QStringLiteral("HEAD_CX7_IB"), FieldKind::RdmaDevices, tr("Head RDMA devices"),
         tr("RDMA (HCA) devices of the CX7 link on the head, comma-separated (see `ibdev2netdev`). Wrong "
            "devices hang NCCL initialisation."),
         QString()},
        {QStringLiteral("WORKER_CX7_IB"), FieldKind::RdmaDevices, tr("Worker RDMA devices"),
         tr("RDMA devices of the CX7 link on the worker, comma-separated."), QString()},
        {QStringLiteral("KV_CACHE_DTYPE"), FieldKind::Choice, tr("KV cache type"),
         tr("Storage of the target model's KV cache. The sparse MLA kernels take packed fp8_ds_mla only, "
            "so the recipe keeps fp8."),
         QStringLiteral("fp8")},
        {QStringLiteral("MOE_BACKEND"), FieldKind::Choice, tr("MoE backend"),
         tr("How routed experts run. EXL3 weights need their own packed-expert path."), QStringLiteral("exl3")},
        {QStringLiteral("DRAFT_ATTENTION_BACKEND"), FieldKind::Choice, tr("Draft attention"),
         tr("Attention backend of the speculative draft model (used once speculative decoding is "
            "available). Left to the automatic choice, FLASH_ATTN."),
         QStringLiteral("auto")},
    };
}

FieldSpec EnvSchema::field(const QString& key) {
    for (const FieldSpec& f : fields())
        if (f.key == key) return f;
    return {QString(), FieldKind::Choice, QString(), QString(), QString()};
}

QStringList EnvSchema::keys() {
    QStringList out;
    for (const FieldSpec& f : fields()) out << f.key;
    return out;
}

QList<FieldChoice> EnvSchema::choices(const QString& key) {
    if (key == QLatin1String("KV_CACHE_DTYPE"))
        return {{QStringLiteral("fp8"), tr("fp8 (packed fp8_ds_mla)"), true, QString()},
                {QStringLiteral("fp8_ds_mla"), tr("fp8_ds_mla (the same as fp8)"), true, QString()},
                {QStringLiteral("fp32"), tr("fp32 (exact reference)"), true, QString()},
                {QStringLiteral("bf16"), tr("bf16"), false,
                 tr("Forbidden: there is no sparse MLA kernel for a BF16 KV cache.")},
                {QStringLiteral("nvfp4"), tr("nvfp4"), false,
                 tr("Forbidden: the NVFP4 KV kernels are for dense MHA, not sparse MLA.")}};
    if (key == QLatin1String("MOE_BACKEND"))
        return {{QStringLiteral("exl3"), tr("EXL3 packed experts"), true, QString()},
                {QStringLiteral("marlin"), tr("marlin"), false,
                 tr("Forbidden: this deployment uses EXL3 weights and their own packed-expert method; "
                    "--moe-backend marlin is not allowed.")}};
    if (key == QLatin1String("DRAFT_ATTENTION_BACKEND"))
        return {{QStringLiteral("auto"), tr("automatic (FLASH_ATTN)"), true, QString()},
                {QStringLiteral("TRITON_ATTN"), tr("TRITON_ATTN"), false,
                 tr("Forbidden: TRITON_ATTN makes attention inside the draft block causal; acceptance "
                    "collapsed and speed fell from 61.7 to about 29 tok/s.")}};
    return {};
}

bool EnvSchema::isForbidden(const QString& key, const QString& value, QString* reason) {
    for (const FieldChoice& c : choices(key)) {
        if (c.value.compare(value, Qt::CaseInsensitive) != 0) continue;
        if (!c.allowed && reason) *reason = c.reason;
        return !c.allowed;
    }
    return false;
}

Verdict EnvSchema::validate(const QString& key, const QString& value, const QMap<QString, QString>& all) {
    const FieldSpec f = field(key);
    if (f.key.isEmpty()) return {};
    const QString v = value.trimmed();
    if (v != value && f.kind != FieldKind::ApiKey && f.kind != FieldKind::HomePath)
        return {Verdict::Error, tr("Remove the spaces around the value.")};
    switch (f.kind) {
    case FieldKind::ModelPath: return checkModelPath(v);
    case FieldKind::IPv4: return checkIPv4(key, v, all);
    case FieldKind::Port: {
        std::string why;  // runtime_settings.h's rule, as `serve` reads PORT (QString::toInt took "+80")
        const auto port = parseIntSetting(kPortSetting, v.toStdString(), &why);
        if (!port) return {Verdict::Error, tr("A port is a number from 1 to 65535.")};
        if (*port < 1024) return {Verdict::Warning, tr("Ports below 1024 need administrator rights.")};
        return {};
    }
    case FieldKind::User: {
        if (v.isEmpty()) return {};
        static const QRegularExpression re(QStringLiteral("^[a-z_][a-z0-9_-]{0,31}$"));
        if (!re.match(v).hasMatch())
            return {Verdict::Error, tr("Not a valid user name (lower-case letters, digits, '_' and '-').")};
        return {};
    }
    case FieldKind::HomePath:
        if (v.isEmpty()) return {};
        if (!v.startsWith(QLatin1Char('/'))) return {Verdict::Error, tr("Give an absolute path (starting with /).")};
        if (v != value || v.contains(QLatin1Char(' ')))
            return {Verdict::Warning, tr("Spaces in the path: make sure the worker's scripts quote it.")};
        return {};
    case FieldKind::Interface: return checkInterface(v);
    case FieldKind::RdmaDevices: return checkRdma(v);
    case FieldKind::ApiKey:
        if (value.isEmpty())
            return {Verdict::Warning, tr("No API key: anyone who can reach the port can use the API.")};
        if (value.contains(QRegularExpression(QStringLiteral("\\s"))))
            return {Verdict::Error, tr("The key cannot contain spaces.")};
        if (value.size() < 12) return {Verdict::Warning, tr("A short key is easy to guess; use 12 characters or more.")};
        return {};
    case FieldKind::Choice: {
        QString reason;
        if (isForbidden(key, v, &reason)) return {Verdict::Error, reason};
        // KV_CACHE_DTYPE in its exact spelling: the engine reads it as written (runtime/runtime_settings.h), as vLLM
        // does. The other choices are read by nothing here yet: any case passes.
        const Qt::CaseSensitivity cs = key == QLatin1String("KV_CACHE_DTYPE") ? Qt::CaseSensitive : Qt::CaseInsensitive;
        for (const FieldChoice& c : choices(key))
            if (c.allowed && c.value.compare(v, cs) == 0) return {};
        return {Verdict::Error, tr("Unknown value '%1'.").arg(v)};
    }
    }
    return {};
}

Verdict EnvSchema::checkModelPath(const QString& v) {
    if (v.isEmpty()) return {Verdict::Warning, tr("No model folder yet: the Server page will ask for one.")};
    if (!QDir::isAbsolutePath(v)) return {Verdict::Error, tr("Give an absolute path.")};
    const QFileInfo dir(v);
    if (!dir.exists()) return {Verdict::Error, tr("This folder does not exist.")};
    if (!dir.isDir()) return {Verdict::Error, tr("This is a file, not a folder.")};
    if (!QFileInfo::exists(v + QStringLiteral("/config.json")))
        return {Verdict::Error, tr("No config.json in this folder: it is not a checkpoint.")};
    if (!QFileInfo::exists(v + QStringLiteral("/tokenizer.json")))
        return {Verdict::Warning, tr("No tokenizer.json: the model can run, but not chat.")};
    return {};
}

Verdict EnvSchema::checkIPv4(const QString& key, const QString& v, const QMap<QString, QString>& all) {
    static const QRegularExpression re(QStringLiteral("^(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})$"));
    const auto m = re.match(v);
    bool inRange = m.hasMatch();
    for (int i = 1; inRange && i <= 4; ++i) inRange = m.captured(i).toInt() <= 255;
    if (!inRange) return {Verdict::Error, tr("An IPv4 address looks like 10.0.0.1 (four numbers from 0 to 255).")};
    const int first = m.captured(1).toInt();
    if (first == 127) return {Verdict::Error, tr("A loopback address (127.x) cannot be reached from the other node.")};
    if (first == 0 || first >= 224) return {Verdict::Error, tr("Not a host address.")};
    const QString other = key == QLatin1String("HEAD_IP") ? QStringLiteral("WORKER_IP") : QStringLiteral("HEAD_IP");
    if (all.value(other).trimmed() == v) return {Verdict::Error, tr("The head and worker addresses must differ.")};
    return {};
}

Verdict EnvSchema::checkInterface(const QString& v) {
    if (v.isEmpty()) return {Verdict::Warning, tr("Needed for the two-node setup only.")};
    static const QRegularExpression re(QStringLiteral("^[A-Za-z0-9_.-]{1,15}$"));
    if (v.contains(QLatin1Char(':')))
        return {Verdict::Error, tr("'%1' is an address alias; NCCL needs the interface itself (without ':').").arg(v)};
    if (!re.match(v).hasMatch())
        return {Verdict::Error, tr("Not an interface name (1–15 letters, digits, '_', '.', '-').")};
    if (v == QLatin1String("lo") || v.startsWith(QLatin1String("lo.")))
        return {Verdict::Error, tr("The loopback interface: NCCL cannot use the loopback aliases.")};
    if (v.startsWith(QLatin1String("docker")) || v.startsWith(QLatin1String("veth")) || v.startsWith(QLatin1String("virbr")))
        return {Verdict::Warning, tr("This looks like a virtual interface, not the CX7 port.")};
    return {};
}

Verdict EnvSchema::checkRdma(const QString& v) {
    if (v.isEmpty()) return {Verdict::Warning, tr("Needed for the two-node setup only.")};
    static const QRegularExpression re(QStringLiteral("^[A-Za-z0-9_]{1,63}(:[0-9]{1,3})?$"));
    QSet<QString> seen;
    for (const QString& dev : v.split(QLatin1Char(','))) {
        if (!re.match(dev).hasMatch())
            return {Verdict::Error, tr("'%1' is not an RDMA device name (like mlx5_0 or mlx5_0:1).").arg(dev)};
        if (seen.contains(dev)) return {Verdict::Error, tr("'%1' is listed twice.").arg(dev)};
        seen.insert(dev);
    }
    return {};
}

}  // namespace ts::ui
