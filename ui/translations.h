// The control center's languages: English (the source), Simplified Chinese and Uzbek — the languages
// of the recipe's source documents. The .qm files are built from translations/*.ts and embedded
// under :/i18n; the choice is kept in QSettings and applied at start-up.
#pragma once

#include <QList>
#include <QPair>
#include <QString>

class QCoreApplication;

namespace ts::ui {

// (code, name in that language), e.g. ("zh_CN", "简体中文").
QList<QPair<QString, QString>> availableLanguages();
// The code of availableLanguages() a user's spelling names — "zh", "zh-CN", "ZH_cn" → "zh_CN"; "uz", "uz_UZ",
// "uz-Latn" → "uz"; "en_US" → "en" — or empty when it names none of them.
QString normalizeLanguage(const QString& spelling);
// The language to use: `requested` if given (normalizeLanguage; English when it names none), else the saved choice, else the system locale if we have
// it, else English.
QString chooseLanguage(const QString& requested = QString());
// Installs the Qt and TwinSpark translators for `code` on the application. False when the TwinSpark
// catalogue is missing (English is then shown).
bool installTranslations(QCoreApplication* app, const QString& code);

}  // namespace ts::ui
