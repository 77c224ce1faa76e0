// What each `.env` field of the setup wizard means, how it is checked as the user types, and which
// values the recipe forbids. Kept apart from the widgets so the rules are one list that the wizard,
// its tests and (later) a headless `twinspark-cli setup` can share.
#pragma once

#include <QCoreApplication>
#include <QList>
#include <QMap>
#include <QString>

namespace ts::ui {

enum class FieldKind { ModelPath, IPv4, Port, User, HomePath, Interface, RdmaDevices, ApiKey, Choice };

struct FieldSpec {
    QString key;
    FieldKind kind;
    QString label;    // translated
    QString help;     // translated: what it is, and the recipe's warning where it has one
    QString fallback; // the recipe's default, used when the file has no value
};

// One value of a Choice field. A forbidden value is listed (so the user sees that it exists and why it
// is refused) but cannot be selected.
struct FieldChoice {
    QString value;
    QString label;
    bool allowed = true;
    QString reason;  // why it is forbidden (translated)
};

struct Verdict {
    enum Level { Ok, Warning, Error };
    Level level = Ok;
    QString message;  // empty when Ok
    bool ok() const { return level != Error; }
};

class EnvSchema {
    Q_DECLARE_TR_FUNCTIONS(EnvSchema)
public:
    // The wizard's fields in page order.
    static QList<FieldSpec> fields();
    static FieldSpec field(const QString& key);  // key empty when unknown
    static QStringList keys();
    static QList<FieldChoice> choices(const QString& key);
    // `all` holds the other fields' current values (HEAD_IP and WORKER_IP must differ).
    static Verdict validate(const QString& key, const QString& value, const QMap<QString, QString>& all = {});
    // True (with the reason) when the recipe forbids this value of this key.
    static bool isForbidden(const QString& key, const QString& value, QString* reason = nullptr);

private:
    static Verdict checkModelPath(const QString& v);
    static Verdict checkIPv4(const QString& key, const QString& v, const QMap<QString, QString>& all);
    static Verdict checkInterface(const QString& v);
    static Verdict checkRdma(const QString& v);
};

}  // namespace ts::ui
