// Runs the control center binary itself (TS_GUI_PATH, set by tests/CMakeLists.txt) for the tests of what main()
// does before any window: refusing bad options with exit 2 and a message. Offscreen, with its own config folder
// (never the user's saved settings) and without PORT from the test's environment.
#pragma once

#include <QProcess>
#include <QTemporaryDir>
#include <QString>
#include <QStringList>

struct ControlCenterRun {
    bool finished = false;  // false: still running after the timeout (killed)
    QProcess::ExitStatus status = QProcess::CrashExit;
    int exitCode = -1;
    QString stderrText;
};

inline ControlCenterRun runControlCenter(const QStringList& args, const QString& configDir, int timeoutMs = 60000) {
    QProcess p;
    QProcessEnvironment pe = QProcessEnvironment::systemEnvironment();
    pe.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    pe.insert(QStringLiteral("XDG_CONFIG_HOME"), configDir);
    pe.remove(QStringLiteral("PORT"));
    p.setProcessEnvironment(pe);
    p.start(QStringLiteral(TS_GUI_PATH), args);
    ControlCenterRun r;
    r.finished = p.waitForFinished(timeoutMs);
    if (!r.finished) {
        p.kill();
        p.waitForFinished(5000);
    }
    r.status = p.exitStatus();
    r.exitCode = p.exitCode();
    r.stderrText = QString::fromUtf8(p.readAllStandardError());
    return r;
}

// Runs the control center with `options` (plus a fresh --env and --no-load) and returns its stderr when it refused
// them — finished normally with exit 2 — else a text that starts with "not refused".
inline QString refusalOf(const QStringList& options) {
    QTemporaryDir dir;
    const ControlCenterRun r = runControlCenter(
        QStringList{QStringLiteral("--env"), dir.filePath(QStringLiteral(".env")), QStringLiteral("--no-load")} + options,
        dir.filePath(QStringLiteral("xdg")));
    if (!r.finished || r.status != QProcess::NormalExit || r.exitCode != 2)
        return QStringLiteral("not refused (finished %1, exit code %2): %3").arg(r.finished).arg(r.exitCode).arg(r.stderrText);
    return r.stderrText;
}
