// The deployment `.env` as the control center uses it: found (or created from the bundled
// .env.example), read through ts::DotEnv so comments and unknown keys survive, and overlaid with the
// values given in the environment or on the command line, which win over the file as in the recipe.
// An overridden field still shows where its value comes from, and saving writes the file's own value.
#pragma once

#include <QCoreApplication>
#include <QMap>
#include <QString>

#include "io/dotenv.h"

namespace ts::ui {

class EnvStore {
    Q_DECLARE_TR_FUNCTIONS(EnvStore)
public:
    // $TWINSPARK_ENV, else ./.env when it exists, else <app config dir>/.env.
    static QString defaultPath();
    // The bundled example (a Qt resource), as text.
    static QString exampleText();

    // Reads `path`, creating it from the example when missing. False with *error on failure.
    bool load(const QString& path, QString* error);
    const QString& path() const { return m_path; }
    bool created() const { return m_created; }
    QStringList problems() const;  // unparsable lines of the file, "line N: why"

    // Overrides: the process environment (for the setup fields' keys and the engine settings', engine_settings.h;
    // an empty variable counts as unset, as `twinspark-cli serve` reads it) and then the command line.
    void setCommandLineOverrides(const QMap<QString, QString>& values) { m_cli = values; }
    void readEnvironmentOverrides();
    bool isOverridden(const QString& key) const { return m_cli.contains(key) || m_env.contains(key); }
    QString overrideSource(const QString& key) const;  // "command line" / "environment" / empty
    bool fromCommandLine(const QString& key) const { return m_cli.contains(key); }

    QString fileValue(const QString& key) const;
    bool fileHas(const QString& key) const { return m_file.contains(key.toStdString()); }
    // The value in effect: command line, else environment, else file, else `fallback`.
    QString value(const QString& key, const QString& fallback = QString()) const;
    // Sets the file's value (the override, if any, still wins at run time). Refuses values DotEnv cannot
    // write back (newlines): false with *error.
    bool set(const QString& key, const QString& value, QString* error = nullptr);
    // The API port in effect: PORT's value (command line, environment, file), the schema's default (the recipe's
    // 8888) when unset or empty. A value that is not a port (1–65535) gives 0 and *problem names the value and
    // where it came from, so the caller can refuse it instead of serving on a port nobody asked for.
    int apiPort(QString* problem = nullptr) const;
    bool save(QString* error);
    // Reads the file again (edited since, by hand or another program; the overrides stay as they were read at start:
    // a process's environment does not change). False with *error when it cannot be read; the values as last read
    // stay then. Everything set here is saved at once (SetupWizard::writeEnv), so nothing unsaved is dropped.
    bool reload(QString* error);
    std::string serialize() const { return m_file.serialize(); }

private:
    QString m_path;
    bool m_created = false;
    DotEnv m_file;
    QMap<QString, QString> m_env, m_cli;
};

}  // namespace ts::ui
