#include "ui/translations.h"

#include <QCoreApplication>
#include <QFontDatabase>
#include <QFontInfo>
#include <QGuiApplication>
#include <QLibraryInfo>
#include <QLocale>
#include <QSettings>
#include <QTranslator>

namespace ts::ui {

QList<QPair<QString, QString>> availableLanguages() {
    return {{QStringLiteral("en"), QStringLiteral("English")},
            {QStringLiteral("zh_CN"), QStringLiteral("简体中文")},
            {QStringLiteral("uz"), QStringLiteral("Oʻzbekcha")}};
}

QString normalizeLanguage(const QString& spelling) {
    // Language, then an optional region or script ("zh_CN", "zh-Hans", "uz-Latn-UZ"); Chinese is Simplified.
    const QString s = spelling.trimmed().toLower().replace(QLatin1Char('-'), QLatin1Char('_'));
    const QString lang = s.section(QLatin1Char('_'), 0, 0);
    if (lang == QLatin1String("en")) return QStringLiteral("en");
    if (lang == QLatin1String("uz")) return QStringLiteral("uz");
    if (lang == QLatin1String("zh") && (s == QLatin1String("zh") || s == QLatin1String("zh_cn") || s == QLatin1String("zh_hans") ||
                                        s.startsWith(QLatin1String("zh_hans_"))))
        return QStringLiteral("zh_CN");
    return QString();
}

QString chooseLanguage(const QString& requested) {
    if (!requested.isEmpty()) {
        const QString code = normalizeLanguage(requested);
        return code.isEmpty() ? QStringLiteral("en") : code;
    }
    QString code = QSettings().value(QStringLiteral("language")).toString();
    if (code.isEmpty()) {
        const QString sys = QLocale::system().name();  // e.g. zh_CN, uz_UZ
        for (const auto& [c, name] : availableLanguages())
            if (sys == c || sys.startsWith(c + QLatin1Char('_'))) code = c;
    }
    for (const auto& [c, name] : availableLanguages())
        if (c == code) return c;
    return QStringLiteral("en");
}

QString applyLanguageFont(const QString& code) {
    QFont font = QGuiApplication::font();
    const QString current = QFontInfo(font).family();  // the family fontconfig resolved "Sans Serif" to
    if (code != QLatin1String("zh_CN")) return current;
    constexpr auto script = QFontDatabase::SimplifiedChinese;
    if (QFontDatabase::writingSystems(current).contains(script)) return current;
    const QStringList have = QFontDatabase::families(script);
    if (have.isEmpty()) return QString();
    QString pick = have.first();
    for (const char* preferred : {"Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei", "WenQuanYi Zen Hei"})
        if (have.contains(QLatin1String(preferred))) {
            pick = QLatin1String(preferred);
            break;
        }
    font.setFamilies({pick, current});
    QGuiApplication::setFont(font);
    return pick;
}

bool installTranslations(QCoreApplication* app, const QString& code) {
    if (code == QLatin1String("en")) return true;
    // Qt's own strings (dialog buttons) when the system has them; missing ones are not an error.
    auto* qt = new QTranslator(app);
    if (qt->load(QLocale(code), QStringLiteral("qtbase"), QStringLiteral("_"),
                 QLibraryInfo::path(QLibraryInfo::TranslationsPath)))
        app->installTranslator(qt);
    auto* ours = new QTranslator(app);
    if (!ours->load(QStringLiteral(":/i18n/twinspark_%1.qm").arg(code))) return false;
    app->installTranslator(ours);
    return true;
}

}  // namespace ts::ui
