// twinspark: the Qt control center. Wires the EngineController (engine on its own thread), the HTTP
// server implementation, the deployment .env, saved conversations and the main window, then runs the
// event loop. Options:
//   --model DIR       model folder to load at start (else MODEL_PATH from the environment / .env, else the
//                     last one loaded if it still exists, else the embedded default model: ui/default_model.h)
//   --no-load         do not load a model at start
//   --env FILE        the deployment .env (default: $TWINSPARK_ENV, ./.env, or the config folder)
//   --set KEY=VALUE   override a .env value for this run (repeatable; wins over the environment)
//   --serve           start the OpenAI API once the model is loaded
//   --lang CODE       en, zh_CN or uz (also zh, zh-CN, uz_UZ, en_US …); another ends the run with exit 2
#include <QApplication>
#include <QCommandLineParser>
#include <QMessageBox>
#include <QSettings>

#include <clocale>

#include "io/mapped_file_fault.h"
#include "ui/api_server.h"
#include "ui/chat_page.h"
#include "ui/conversation_store.h"
#include "ui/default_model.h"
#include "ui/engine_controller.h"
#include "ui/engine_settings.h"
#include "ui/env_schema.h"
#include "ui/env_store.h"
#include "ui/main_window.h"
#include "ui/termination_signals.h"
#include "ui/server_page.h"
#include "ui/setup_page.h"
#include "ui/translations.h"

using namespace ts::ui;

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    // QApplication set the C library's locale from the environment; numbers the engine parses and prints (the .env's
    // GPU_MEM_UTIL, chat templates' floats, /metrics) keep the C form under a decimal-comma locale. Qt's own
    // formatting follows QLocale, which this does not touch.
    std::setlocale(LC_NUMERIC, "C");
    ts::installMappedFileFaultReport();  // a model file rewritten while loaded: the log says why the process died
    QCoreApplication::setOrganizationName(QStringLiteral("TwinSpark"));
    QCoreApplication::setApplicationName(QStringLiteral("TwinSpark"));
    QCoreApplication::setApplicationVersion(QStringLiteral("0.1.0"));

    QCommandLineParser cli;
    cli.setApplicationDescription(QStringLiteral("TwinSpark control center"));
    cli.addHelpOption();
    cli.addVersionOption();
    const QCommandLineOption modelOpt(QStringLiteral("model"), QStringLiteral("Model folder to load."), QStringLiteral("DIR"));
    const QCommandLineOption noLoadOpt(QStringLiteral("no-load"), QStringLiteral("Do not load a model at start."));
    const QCommandLineOption envOpt(QStringLiteral("env"), QStringLiteral("The deployment .env file."), QStringLiteral("FILE"));
    const QCommandLineOption setOpt(QStringLiteral("set"), QStringLiteral("Override a .env value (KEY=VALUE)."), QStringLiteral("KEY=VALUE"));
    const QCommandLineOption serveOpt(QStringLiteral("serve"), QStringLiteral("Start the OpenAI API when the model is loaded."));
    const QCommandLineOption langOpt(QStringLiteral("lang"), QStringLiteral("Language: en, zh_CN, uz."), QStringLiteral("CODE"));
    cli.addOptions({modelOpt, noLoadOpt, envOpt, setOpt, serveOpt, langOpt});
    cli.process(app);

    if (cli.isSet(langOpt) && normalizeLanguage(cli.value(langOpt)).isEmpty()) {
        fprintf(stderr, "twinspark: --lang must be en, zh_CN or uz, got '%s'\n", qPrintable(cli.value(langOpt)));
        return 2;
    }
    const QString language = chooseLanguage(cli.value(langOpt));
    installTranslations(&app, language);
    if (applyLanguageFont(language).isEmpty())
        fprintf(stderr, "twinspark: no installed font has Chinese glyphs (install fonts-wqy-microhei or fonts-noto-cjk)\n");

    EnvStore env;
    QMap<QString, QString> overrides;
    for (const QString& kv : cli.values(setOpt)) {
        const qsizetype eq = kv.indexOf(QLatin1Char('='));
        if (eq <= 0) {
            fprintf(stderr, "twinspark: --set expects KEY=VALUE, got '%s'\n", qPrintable(kv));
            return 2;
        }
        overrides.insert(kv.left(eq), kv.mid(eq + 1));
    }
    env.setCommandLineOverrides(overrides);
    env.readEnvironmentOverrides();
    QString envError;
    const bool envOk = env.load(cli.isSet(envOpt) ? cli.value(envOpt) : EnvStore::defaultPath(), &envError);

    EngineController controller;
    controller.setApiServer(makeApiServer());
    ConversationStore conversations;
    MainWindow window(&controller, &env, &conversations);

    const QString model = startupModel(cli.value(modelOpt), env.value(QStringLiteral("MODEL_PATH")),
                                       QSettings().value(QStringLiteral("server/modelPath")).toString(), defaultModelPath());
    window.serverPage()->setModelPath(model);
    // A PORT that is not a port is refused, never replaced in silence by 8888: on the command line it ends the
    // run (as `twinspark-cli serve` does); from the environment or the .env file the window opens with a warning,
    // the API stays off even with --serve, and the Server page offers 8888 for the user to accept or change.
    QString portProblem;
    const int port = env.apiPort(&portProblem);
    if (port == 0 && env.fromCommandLine(QStringLiteral("PORT"))) {
        fprintf(stderr, "twinspark: %s\n", qPrintable(portProblem));
        return 2;
    }
    window.serverPage()->setHttpDefaults(QSettings().value(QStringLiteral("server/host"), QStringLiteral("127.0.0.1")).toString(),
                                         port != 0 ? port : EnvSchema::field(QStringLiteral("PORT")).fallback.toInt(),
                                         env.value(QStringLiteral("VLLM_API_KEY")));
    QObject::connect(&controller, &EngineController::modelLoaded, &window, [&](const ModelInfo& info) {
        QSettings().setValue(QStringLiteral("server/modelPath"), info.path);
        if (cli.isSet(serveOpt) && port != 0) window.serverPage()->setHttpEnabled(true);
    });
    // Context &app, not &controller: the controller lives on its own thread, and shutdown() must run here (on
    // the controller's thread it would wait for itself, and the process aborted at exit with a stream running).
    QObject::connect(&app, &QCoreApplication::aboutToQuit, &app, [&] { controller.shutdown(); });
    // kill / Ctrl-C: the same orderly end as closing the window (ui/termination_signals.h).
    TerminationSignals termination;
    QObject::connect(&termination, &TerminationSignals::received, [](const QString& name) {
        fprintf(stderr, "twinspark: %s received, shutting down\n", qPrintable(name));
    });

    window.show();
    // Window-modal and not blocking (as the wizard): the model loads while the warning is read.
    auto warn = [&window](const QString& text) {
        auto* box = new QMessageBox(QMessageBox::Warning, QObject::tr("Deployment settings"), text, QMessageBox::Ok, &window);
        box->setAttribute(Qt::WA_DeleteOnClose);
        box->open();
    };
    QStringList warnings;
    if (!envOk) {
        warnings << envError;
    } else {
        if (port == 0)
            warnings << portProblem + QLatin1Char('\n') +
                            (env.isOverridden(QStringLiteral("PORT"))
                                 ? QObject::tr("The API is not started. Correct or unset the PORT environment variable, or "
                                               "choose a port on the Server page and turn the API on there.")
                                 : QObject::tr("The API is not started. Correct PORT on the Setup page, or choose a port on "
                                               "the Server page and turn the API on there."));
        // The engine settings (engine_settings.h) are checked again at each load, which refuses while one is bad.
        const QStringList engineProblems = engineSettings(env).problems.values();
        if (!engineProblems.isEmpty())
            warnings << engineProblems.join(QLatin1Char('\n')) + QLatin1Char('\n') +
                            QObject::tr("Until this is corrected the model is not loaded: correct it in the .env file "
                                        "and load the model on the Server page (a value from the environment or --set "
                                        "needs a restart). A bad MAX_NUM_SEQS or TS_KV_BUDGET_MIB only leaves the "
                                        "Server page's value in use; a bad TS_MAX_CONCURRENT_REQUESTS keeps the API "
                                        "off.");
    }
    if (!warnings.isEmpty()) warn(warnings.join(QStringLiteral("\n\n")));
    else if (env.created()) window.setupPage()->openWizard();
    if (!cli.isSet(noLoadOpt) && !model.isEmpty()) window.serverPage()->loadModel();
    return app.exec();
}
