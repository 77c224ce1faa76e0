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
// The language to use: `requested` if given (normalizeLanguage; English when it names none), else the saved
// choice, else the system locale if we have it, else English.
QString chooseLanguage(const QString& requested = QString());
// For Chinese, makes the application's font one that has Chinese glyphs when the system's default has none (an
// English desktop running `--lang zh_CN`): drawn through font fallback, the charts' rotated axis titles were
// measured with the Latin font and cut to "…". Prefers Noto Sans CJK SC, Source Han Sans SC, WenQuanYi Micro Hei.
// Returns the family in use for the language's script (unchanged when the default already covers it), empty when
// no installed font covers it. Other languages: the default font, unchanged.
QString applyLanguageFont(const QString& code);
// Installs the Qt and TwinSpark translators for `code` on the application. False when the TwinSpark
// catalogue is missing (English is then shown).
bool installTranslations(QCoreApplication* app, const QString& code);

}  // namespace ts::ui
