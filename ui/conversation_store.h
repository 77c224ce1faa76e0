// Chat conversations kept across restarts: one JSON file per conversation under the application's data
// folder, written atomically (QSaveFile), read back tolerantly (a damaged file is skipped and reported,
// never crashes the app or takes the others with it).
#pragma once

#include <QCoreApplication>
#include <QDateTime>
#include <QJsonObject>
#include <QList>
#include <QString>
#include <QThreadPool>

#include <functional>

namespace ts::ui {

struct ChatMessage {
    QString role;       // "user" or "assistant"
    QString content;
    QString reasoning;  // assistant only
    QString stats;      // assistant only: "12.3 tok/s · TTFT 80 ms · 57 tokens"
};

struct Conversation {
    QString id;
    QString title;
    QString systemPrompt;
    QDateTime updated;
    QList<ChatMessage> messages;

    QJsonObject toJson() const;
    static Conversation fromJson(const QJsonObject& o);
};

class ConversationStore {
    Q_DECLARE_TR_FUNCTIONS(ConversationStore)
public:
    // `dir` empty: <AppDataLocation>/conversations.
    explicit ConversationStore(QString dir = QString());
    const QString& dir() const { return m_dir; }
    // Newest first. Files that cannot be read are listed in *problems.
    QList<Conversation> loadAll(QStringList* problems = nullptr) const;
    bool save(const Conversation& c, QString* error = nullptr) const;
    // Saves on the store's own writer thread (the write is fsynced: never on the GUI thread), in
    // submission order. `onError` is called there with the message when it fails.
    void saveAsync(Conversation c, std::function<void(const QString&)> onError = {});
    void waitForWrites() { m_writer.waitForDone(); }
    bool remove(const QString& id) const;
    static QString newId();

private:
    QString m_dir;
    QThreadPool m_writer;  // one thread: writes stay in order
};

}  // namespace ts::ui
