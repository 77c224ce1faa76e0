// A decimal-comma locale for tests, without installing one: de_DE.UTF-8 compiled by localedef from the Debian
// package `locales` (scripts/install-deps.sh installs it) into a folder, which LOCPATH then names.
#pragma once

#include <QProcess>
#include <QString>

namespace ts::test {

inline constexpr char kCommaLocale[] = "de_DE.UTF-8";

// Compiles kCommaLocale into `dir`; false when localedef or the locale's source is missing.
inline bool compileCommaLocale(const QString& dir) {
    QProcess def;
    def.start(QStringLiteral("localedef"), {QStringLiteral("-i"), QStringLiteral("de_DE"), QStringLiteral("-f"),
                                            QStringLiteral("UTF-8"), dir + QLatin1Char('/') + QLatin1String(kCommaLocale)});
    // Exit 1 is localedef's "written, with warnings".
    return def.waitForFinished(60000) && def.exitStatus() == QProcess::NormalExit && def.exitCode() <= 1;
}

}  // namespace ts::test
