// Runs the control center binary itself (TS_GUI_PATH, set by tests/CMakeLists.txt): for the tests of what main()
// does before any window (refusing bad options with exit 2 and a message; offscreen, with its own config folder,
// never the user's saved settings, and without PORT from the test's environment), and as a serving process
// (startServingControlCenter).
#pragma once

#include <QElapsedTimer>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <QString>
#include <QStringList>

#include <httplib.h>

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

// The control center serving the GUI suites' chat model on `port`: started with `--env ENV --model … --serve
// --lang en` under `pe`, then waited for (at most 90 s) until its in-process API answers /v1/models. False when
// the process ended or the API never came up (its stderr tells why).
inline bool startServingControlCenter(QProcess& app, const QString& env, const QProcessEnvironment& pe, int port) {
    app.setProcessEnvironment(pe);
    app.start(QStringLiteral(TS_GUI_PATH), {QStringLiteral("--env"), env, QStringLiteral("--model"),
                                            QStringLiteral(TS_GUI_CHAT_MODEL), QStringLiteral("--serve"),
                                            QStringLiteral("--lang"), QStringLiteral("en")});
    if (!app.waitForStarted(10000)) return false;
    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(1);
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < 90000 && app.state() == QProcess::Running) {
        const auto r = client.Get("/v1/models");
        if (r && r->status == 200) return true;
        QTest::qWait(250);
    }
    return false;
}
