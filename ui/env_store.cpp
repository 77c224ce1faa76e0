#include "ui/env_store.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QStandardPaths>

#include <exception>

#include "ui/engine_settings.h"
#include "ui/env_schema.h"

// resources/twinspark.qrc is compiled into the static ts_ui: its initializer must be referenced or the
// linker drops it. Q_INIT_RESOURCE only works at global scope.
static void initUiResources() { Q_INIT_RESOURCE(twinspark); }

namespace ts::ui {

QString EnvStore::defaultPath() {
    const QString fromEnv = qEnvironmentVariable("TWINSPARK_ENV");
    if (!fromEnv.isEmpty()) return fromEnv;
    // The recipe keeps .env next to its scripts; running from a checkout, that is the current folder.
    const QString local = QDir::current().filePath(QStringLiteral(".env"));
    if (QFileInfo::exists(local)) return local;
    return QDir(QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation)).filePath(QStringLiteral(".env"));
}

QString EnvStore::exampleText() {
    initUiResources();
    QFile f(QStringLiteral(":/twinspark/env.example"));
    if (!f.open(QIODevice::ReadOnly)) return QString();
    return QString::fromUtf8(f.readAll());
}

bool EnvStore::load(const QString& path, QString* error) {
    m_path = path;
    m_created = false;
    try {
        if (!QFileInfo::exists(path)) {
            const QString example = exampleText();
            if (example.isEmpty()) {
                *error = tr("The bundled .env.example is missing from this build.");
                return false;
            }
            QDir().mkpath(QFileInfo(path).absolutePath());
            DotEnv::parse(example.toStdString()).save(path.toStdString());
            m_created = true;
        }
        m_file = DotEnv::load(path.toStdString());
    } catch (const std::exception& e) {
        *error = QString::fromUtf8(e.what());
        return false;
    }
    return true;
}

QStringList EnvStore::problems() const {
    QStringList out;
    for (const DotEnv::Problem& p : m_file.problems())
        out << tr("line %1: %2").arg(p.line).arg(QString::fromStdString(p.message));
    return out;
}

void EnvStore::readEnvironmentOverrides() {
    m_env.clear();
    std::vector<std::string> keys;
    for (const QString& k : EnvSchema::keys() + engineSettingKeys()) keys.push_back(k.toStdString());
    for (const auto& [k, v] : DotEnv::environmentOverrides(keys))
        m_env.insert(QString::fromStdString(k), QString::fromStdString(v));
}

QString EnvStore::overrideSource(const QString& key) const {
    if (m_cli.contains(key)) return tr("command line");
    if (m_env.contains(key)) return tr("environment");
    return QString();
}

QString EnvStore::fileValue(const QString& key) const {
    const auto v = m_file.get(key.toStdString());
    return v ? QString::fromStdString(*v) : QString();
}

QString EnvStore::value(const QString& key, const QString& fallback) const {
    if (m_cli.contains(key)) return m_cli.value(key);
    if (m_env.contains(key)) return m_env.value(key);
    const auto v = m_file.get(key.toStdString());
    return v ? QString::fromStdString(*v) : fallback;
}

int EnvStore::apiPort(QString* problem) const {
    const QString key = QStringLiteral("PORT");
    const QString v = value(key);
    if (v.isEmpty()) return EnvSchema::field(key).fallback.toInt();  // the recipe's 8888
    const Verdict verdict = EnvSchema::validate(key, v);
    if (verdict.ok()) return v.toInt();
    if (problem) {
        const QString source = isOverridden(key) ? overrideSource(key) : tr("the .env file %1").arg(m_path);
        *problem = tr("PORT '%1' (from %2) is not usable: %3").arg(v, source, verdict.message);
    }
    return 0;
}

bool EnvStore::set(const QString& key, const QString& value, QString* error) {
    try {
        m_file.set(key.toStdString(), value.toStdString());
    } catch (const std::exception& e) {
        if (error) *error = QString::fromUtf8(e.what());
        return false;
    }
    return true;
}

bool EnvStore::reload(QString* error) {
    try {
        m_file = DotEnv::load(m_path.toStdString());
    } catch (const std::exception& e) {
        *error = QString::fromUtf8(e.what());
        return false;
    }
    return true;
}

bool EnvStore::save(QString* error) {
    try {
        m_file.save(m_path.toStdString());
    } catch (const std::exception& e) {
        *error = QString::fromUtf8(e.what());
        return false;
    }
    return true;
}

}  // namespace ts::ui
