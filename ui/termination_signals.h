// SIGINT / SIGTERM / SIGHUP end the control center as closing its window does: the signal handler only
// writes a byte to a socket pair (async-signal-safe), and the event loop, reading the other end, quits the
// application. aboutToQuit then stops the in-process API the graceful way (new requests 503, running
// streams end with an error event and [DONE]), unloads the engine, and the conversation writer finishes its
// queue before the process exits 0. Without this a `kill` or Ctrl-C cut streams mid-token and dropped
// pending conversation saves.
#pragma once

#include <QObject>

class QSocketNotifier;

namespace ts::ui {

class TerminationSignals : public QObject {
    Q_OBJECT
public:
    // Installs the handlers; one instance at a time (the handlers share one socket pair, kept for the process's
    // life); the destructor restores the default actions.
    explicit TerminationSignals(QObject* parent = nullptr);
    ~TerminationSignals() override;

signals:
    // The signal's name ("SIGTERM"), emitted on the event loop before the application quits.
    void received(const QString& name);

private:
    void onReadable();
    QSocketNotifier* m_notifier = nullptr;
};

}  // namespace ts::ui
