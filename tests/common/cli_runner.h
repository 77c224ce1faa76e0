// Running twinspark-cli as a user does, for the e2e tests: a real process, its exit code and output.
#pragma once

#include <QProcess>
#include <QString>
#include <QStringList>

namespace ts::test {

struct CliRun {
    int code = -1;  // -1: crashed or killed at the time limit
    QString out, err;
};

inline CliRun runCli(const QStringList& args, int timeoutMs = 120000) {
    QProcess p;
    p.start(QStringLiteral(TS_CLI_PATH), args);
    if (!p.waitForFinished(timeoutMs)) p.kill();
    CliRun r;
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}

}  // namespace ts::test
