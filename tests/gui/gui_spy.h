// A QSignalSpy for signals emitted on another thread (the EngineController's). QSignalSpy records in the
// emitting thread, so reading it from the test thread races, and wait() can miss an emission that landed
// just before it started. GuiSpy receives through a queued connection on the test (GUI) thread instead,
// exactly as the widgets do.
#pragma once

#include <QElapsedTimer>
#include <QList>
#include <QObject>
#include <QTest>
#include <QVariant>

#include <type_traits>

class GuiSpy final : public QObject {
public:
    template <typename Obj, typename... Args>
    GuiSpy(const Obj* sender, void (Obj::*signal)(Args...)) {
        connect(sender, signal, this, [this](Args... args) {
            m_calls.append(QVariantList{QVariant::fromValue(std::decay_t<Args>(args))...});
        }, Qt::QueuedConnection);
    }
    qsizetype count() const { return m_calls.size(); }
    bool isEmpty() const { return m_calls.isEmpty(); }
    const QVariantList& at(qsizetype i) const { return m_calls.at(i); }
    const QVariantList& first() const { return m_calls.first(); }
    const QVariantList& last() const { return m_calls.last(); }
    const QList<QVariantList>& calls() const { return m_calls; }
    auto begin() const { return m_calls.begin(); }
    auto end() const { return m_calls.end(); }
    QVariantList takeFirst() { return m_calls.takeFirst(); }
    void clear() { m_calls.clear(); }
    // Runs the event loop until `n` calls in total have arrived, or `ms` passed.
    bool waitForCount(qsizetype n, int ms) {
        QElapsedTimer t;
        t.start();
        while (m_calls.size() < n && t.elapsed() < ms) QTest::qWait(2);
        return m_calls.size() >= n;
    }
    // One more call than now.
    bool wait(int ms) { return waitForCount(m_calls.size() + 1, ms); }

private:
    QList<QVariantList> m_calls;
};
