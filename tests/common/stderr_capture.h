// What a piece of code writes to the process's stderr (fd 2, redirected to a temporary file meanwhile), for tests
// of messages that go there: the environment switches' reports, the default log sink.
#pragma once

#include <QFile>
#include <QString>

#include <cstdio>
#include <cstdlib>

#include <unistd.h>

namespace ts::test {

// Runs fn and returns its stderr; empty if the redirection cannot be set up.
template <class Fn>
QString stderrOf(Fn fn) {
    char path[] = "/tmp/ts_stderr_XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) return {};
    std::fflush(stderr);
    const int saved = ::dup(2);
    ::dup2(fd, 2);
    fn();
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    ::close(fd);
    QFile f(QString::fromLatin1(path));
    const QString text = f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
    ::unlink(path);
    return text;
}

}  // namespace ts::test
