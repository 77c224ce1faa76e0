#include "ui/default_model.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>

namespace ts::ui {

namespace {

bool isModelDir(const QString& dir) {
    return !dir.isEmpty() && QFileInfo(dir + QStringLiteral("/config.json")).isFile();
}

}  // namespace

QString defaultModelName() { return QStringLiteral("glm5-next-tiny-exl3"); }

QStringList defaultModelCandidates(const QString& appDir, const QString& workDir, const QString& sourceDir) {
    const QString name = defaultModelName();
    const QString inSource = QStringLiteral("/resources/models/") + name;
    QStringList c;
    if (!appDir.isEmpty()) {
        c << appDir + QStringLiteral("/../share/twinspark/models/") + name  // installed: <prefix>/bin
          << appDir + QStringLiteral("/../..") + inSource                   // build/app in the source tree
          << appDir + QStringLiteral("/..") + inSource                      // a binary one level down
          << appDir + inSource;
    }
    if (!workDir.isEmpty()) c << workDir + inSource;
    if (!sourceDir.isEmpty()) c << sourceDir + inSource;
    for (QString& p : c) p = QDir::cleanPath(p);
    c.removeDuplicates();
    return c;
}

QString findDefaultModel(const QString& appDir, const QString& workDir, const QString& sourceDir) {
    for (const QString& c : defaultModelCandidates(appDir, workDir, sourceDir))
        if (isModelDir(c)) return QDir(c).absolutePath();
    return QString();
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
    if (isModelDir(lastUsed.trimmed())) return lastUsed.trimmed();
    return defaultModel;
}

}  // namespace ts::ui
