#include "ui/default_model.h"

#include <QCoreApplication>
#include <QDir>

#include "io/default_paths.h"

namespace ts::ui {

namespace {

std::filesystem::path toPath(const QString& s) { return std::filesystem::path(s.toStdString()); }

}  // namespace

// The rules live in engine/io/default_paths (Qt-free): the headless `twinspark-cli serve` finds the same model.
QString defaultModelName() { return QString::fromStdString(ts::defaultModelName()); }

QStringList defaultModelCandidates(const QString& appDir, const QString& workDir, const QString& sourceDir) {
    QStringList c;
    for (const auto& p : ts::defaultModelCandidates(toPath(appDir), toPath(workDir), toPath(sourceDir)))
        c << QString::fromStdString(p.string());
    return c;
}

QString findDefaultModel(const QString& appDir, const QString& workDir, const QString& sourceDir) {
    const auto found = ts::findDefaultModel(toPath(appDir), toPath(workDir), toPath(sourceDir));
    return found ? QDir::cleanPath(QString::fromStdString(found->string())) : QString();
}

QString defaultModelPath() {
#ifdef TS_SOURCE_DIR
    const QString source = QStringLiteral(TS_SOURCE_DIR);
#else
    const QString source;
#endif
    return findDefaultModel(QCoreApplication::applicationDirPath(), QDir::currentPath(), source);
}

QString startupModel(const QString& cliModel, const QString& envModel, const QString& lastUsed,
                     const QString& defaultModel) {
    if (!cliModel.trimmed().isEmpty()) return cliModel.trimmed();
    if (!envModel.trimmed().isEmpty()) return envModel.trimmed();
    if (ts::isModelDir(toPath(lastUsed.trimmed()))) return lastUsed.trimmed();
    return defaultModel;
}

}  // namespace ts::ui
