#include "ui/termination_signals.h"

#include <QCoreApplication>
#include <QSocketNotifier>

#include <cerrno>
#include <csignal>
#include <sys/socket.h>
#include <unistd.h>

namespace ts::ui {

namespace {

int g_pipe[2] = {-1, -1};  // [0] read by the event loop, [1] written by the handler

void onSignal(int sig) {
    const int savedErrno = errno;  // the interrupted code may be about to read it
    const unsigned char b = static_cast<unsigned char>(sig);
    [[maybe_unused]] const ssize_t n = ::write(g_pipe[1], &b, 1);  // a full pipe: a quit is already pending
    errno = savedErrno;
}

}  // namespace

TerminationSignals::TerminationSignals(QObject* parent) : QObject(parent) {
    // One socket pair per process, made by the first instance and kept (see the destructor).
    if (g_pipe[0] < 0 && ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, g_pipe) != 0) return;
    m_notifier = new QSocketNotifier(g_pipe[0], QSocketNotifier::Read, this);
    connect(m_notifier, &QSocketNotifier::activated, this, &TerminationSignals::onReadable);
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

TerminationSignals::~TerminationSignals() {
    if (!m_notifier) return;
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
    // The socket pair stays open until the process ends: a handler already running on another thread may
    // still write to it, and a closed (then reused) descriptor would take its byte elsewhere.
}

void TerminationSignals::onReadable() {
    unsigned char b = 0;
    int last = 0;
    while (::read(g_pipe[0], &b, 1) == 1) last = b;
    if (last == 0) return;
    emit received(QString::fromLatin1(last == SIGINT ? "SIGINT" : last == SIGTERM ? "SIGTERM" : "SIGHUP"));
    QCoreApplication::quit();
}

}  // namespace ts::ui
