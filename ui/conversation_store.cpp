#include "ui/conversation_store.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSaveFile>
#include <QStandardPaths>
#include <QUuid>

#include <algorithm>

namespace ts::ui {

QJsonObject Conversation::toJson() const {
    QJsonArray msgs;
    for (const ChatMessage& m : messages) {
        QJsonObject o{{QStringLiteral("role"), m.role}, {QStringLiteral("content"), m.content}};
        if (!m.reasoning.isEmpty()) o.insert(QStringLiteral("reasoning"), m.reasoning);
        if (!m.stats.isEmpty()) o.insert(QStringLiteral("stats"), m.stats);
        msgs.append(o);
    }
    return {{QStringLiteral("version"), 1},
            {QStringLiteral("id"), id},
            {QStringLiteral("title"), title},
            {QStringLiteral("system"), systemPrompt},
            {QStringLiteral("updated"), updated.toString(Qt::ISODateWithMs)},
            {QStringLiteral("messages"), msgs}};
}

Conversation Conversation::fromJson(const QJsonObject& o) {
    Conversation c;
    c.id = o.value(QStringLiteral("id")).toString();
    c.title = o.value(QStringLiteral("title")).toString();
    c.systemPrompt = o.value(QStringLiteral("system")).toString();
    c.updated = QDateTime::fromString(o.value(QStringLiteral("updated")).toString(), Qt::ISODateWithMs);
    for (const QJsonValue& v : o.value(QStringLiteral("messages")).toArray()) {
        const QJsonObject m = v.toObject();
        const QString role = m.value(QStringLiteral("role")).toString();
        if (role != QLatin1String("user") && role != QLatin1String("assistant")) continue;
        c.messages.append({role, m.value(QStringLiteral("content")).toString(),
                           m.value(QStringLiteral("reasoning")).toString(), m.value(QStringLiteral("stats")).toString()});
    }
    return c;
}

ConversationStore::ConversationStore(QString dir) : m_dir(std::move(dir)) {
    m_writer.setMaxThreadCount(1);
    m_writer.setObjectName(QStringLiteral("ConversationStore writer"));
    if (m_dir.isEmpty())
        m_dir = QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)).filePath(QStringLiteral("conversations"));
}

QString ConversationStore::newId() { return QUuid::createUuid().toString(QUuid::WithoutBraces); }

QList<Conversation> ConversationStore::loadAll(QStringList* problems) const {
    const_cast<QThreadPool&>(m_writer).waitForDone();  // see the latest writes
    QList<Conversation> out;
    const QDir d(m_dir);
    for (const QString& name : d.entryList({QStringLiteral("*.json")}, QDir::Files)) {
        QFile f(d.filePath(name));
        if (!f.open(QIODevice::ReadOnly) || f.size() > (64 << 20)) {
            if (problems) *problems << tr("%1: cannot be read").arg(name);
            continue;
        }
        QJsonParseError err{};
        const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &err);
        if (err.error != QJsonParseError::NoError || !doc.isObject()) {
            if (problems) *problems << tr("%1: not valid JSON (%2)").arg(name, err.errorString());
            continue;
        }
        Conversation c = Conversation::fromJson(doc.object());
        if (c.id.isEmpty() || c.id + QStringLiteral(".json") != name) {
            if (problems) *problems << tr("%1: not a conversation file").arg(name);
            continue;
        }
        out.append(std::move(c));
    }
    std::sort(out.begin(), out.end(), [](const Conversation& a, const Conversation& b) { return a.updated > b.updated; });
    return out;
}

bool ConversationStore::save(const Conversation& c, QString* error) const {
    QDir().mkpath(m_dir);
    QSaveFile f(QDir(m_dir).filePath(c.id + QStringLiteral(".json")));
    if (!f.open(QIODevice::WriteOnly)) {
        if (error) *error = f.errorString();
        return false;
    }
    f.write(QJsonDocument(c.toJson()).toJson(QJsonDocument::Indented));
    if (!f.commit()) {
        if (error) *error = f.errorString();
        return false;
    }
    return true;
}

void ConversationStore::saveAsync(Conversation c, std::function<void(const QString&)> onError) {
    m_writer.start([this, c = std::move(c), onError = std::move(onError)] {
        QString error;
        if (!save(c, &error) && onError) onError(error);
    });
}

bool ConversationStore::remove(const QString& id) const {
    return QFile::remove(QDir(m_dir).filePath(id + QStringLiteral(".json")));
}

}  // namespace ts::ui
