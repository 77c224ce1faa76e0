#include "ui/server_page.h"

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
#include <QDateTime>
#include <QFileDialog>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include "runtime/runtime_settings.h"
#include "ui/api_server.h"
#include "ui/env_store.h"

namespace ts::ui {

ServerPage::ServerPage(EngineController* controller, QWidget* parent) : QWidget(parent), m_controller(controller) {
    setObjectName(QStringLiteral("serverPage"));
    auto* top = new QHBoxLayout;
    top->addWidget(makeModelGroup(), 1);
    top->addWidget(makeHttpGroup(), 1);
    auto* lay = new QVBoxLayout(this);
    lay->addLayout(top);
    m_engineStatus = new QLabel(tr("Engine: no model loaded"));
    m_engineStatus->setObjectName(QStringLiteral("engineStatus"));
    lay->addWidget(m_engineStatus);
    auto* logBox = new QGroupBox(tr("Log"));
    auto* lv = new QVBoxLayout(logBox);
    m_log = new QPlainTextEdit;
    m_log->setObjectName(QStringLiteral("log"));
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(5000);  // bounded: a long session must not grow the GUI's memory
    m_log->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    lv->addWidget(m_log);
    lay->addWidget(logBox, 1);

    connect(controller, &EngineController::stateChanged, this, &ServerPage::onStateChanged);
    connect(controller, &EngineController::loadProgress, this, [this](int pct, const QString& stage) {
        m_progress->setValue(pct);
        m_modelStatus->setText(stage);
    });
    connect(controller, &EngineController::modelLoaded, this, &ServerPage::onModelLoaded);
    connect(controller, &EngineController::loadFailed, this, [this](const QString& error) {
        m_progress->setValue(0);
        m_modelStatus->setText(tr("Load failed: %1").arg(error));
    });
    connect(controller, &EngineController::modelUnloaded, this, [this] {
        m_modelStatus->setText(tr("No model loaded"));
        m_testModelNote->hide();
        m_progress->setValue(0);
    });
    connect(controller, &EngineController::httpStateChanged, this, &ServerPage::onHttpState);
    connect(controller, &EngineController::metricsUpdated, this, &ServerPage::onMetrics);
    connect(controller, &EngineController::logMessage, this, &ServerPage::appendLog);
    onStateChanged(controller->state());
    updateCurl();
}

QWidget* ServerPage::makeModelGroup() {
    auto* box = new QGroupBox(tr("Model"));
    auto* form = new QFormLayout(box);
    m_modelPath = new QLineEdit;
    m_modelPath->setObjectName(QStringLiteral("modelPath"));
    auto* browse = new QPushButton(tr("Browse…"));
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Model folder"), m_modelPath->text());
        if (!dir.isEmpty()) m_modelPath->setText(dir);
    });
    auto* pathRow = new QHBoxLayout;
    pathRow->addWidget(m_modelPath, 1);
    pathRow->addWidget(browse);
    form->addRow(tr("Folder"), pathRow);
    m_kvBudget = new QSpinBox;
    m_kvBudget->setObjectName(QStringLiteral("kvBudget"));
    m_kvBudget->setRange(int(kKvBudgetMibSetting.lo), int(kKvBudgetMibSetting.hi));  // as TS_KV_BUDGET_MIB takes it
    m_kvBudget->setSuffix(tr(" MiB"));
    m_kvBudget->setValue(int(kKvBudgetMibSetting.def));
    m_kvBudget->setToolTip(tr("Memory for the KV pool and the per-request recurrent states."));
    form->addRow(tr("KV budget"), m_kvBudget);
    m_maxSeqs = new QSpinBox;
    m_maxSeqs->setObjectName(QStringLiteral("maxSeqs"));
    m_maxSeqs->setRange(int(kMaxNumSeqsSetting.lo), int(kMaxNumSeqsSetting.hi));  // as MAX_NUM_SEQS takes it
    m_maxSeqs->setValue(int(kMaxNumSeqsSetting.def));
    m_maxSeqs->setToolTip(tr("Parallel generations (the recipe's MAX_NUM_SEQS is 4)."));
    form->addRow(tr("Parallel requests"), m_maxSeqs);
    m_load = new QPushButton(tr("Load"));
    m_load->setObjectName(QStringLiteral("loadButton"));
    m_load->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
    m_load->setToolTip(tr("Load the model (Ctrl+L)"));
    m_unload = new QPushButton(tr("Unload"));
    connect(m_load, &QPushButton::clicked, this, &ServerPage::loadModel);
    connect(m_unload, &QPushButton::clicked, this, &ServerPage::unloadModel);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_load);
    buttons->addWidget(m_unload);
    buttons->addStretch();
    form->addRow(buttons);
    m_progress = new QProgressBar;
    m_progress->setRange(0, 100);
    m_progress->setValue(0);
    form->addRow(m_progress);
    m_modelStatus = new QLabel(tr("No model loaded"));
    m_modelStatus->setObjectName(QStringLiteral("modelStatus"));
    m_modelStatus->setWordWrap(true);
    form->addRow(m_modelStatus);
    m_testModelNote = new QLabel(tr("This is a small generated test checkpoint with random weights: its answers "
                                    "are noise. It shows that the pipeline works, not what the model can do."));
    m_testModelNote->setWordWrap(true);
    m_testModelNote->setStyleSheet(QStringLiteral("color: #a15c00;"));
    m_testModelNote->hide();
    form->addRow(m_testModelNote);
    return box;
}

QWidget* ServerPage::makeHttpGroup() {
    m_httpGroup = new QGroupBox(tr("OpenAI API"));
    auto* form = new QFormLayout(m_httpGroup);
    m_httpOn = new QCheckBox(tr("Serve the API"));
    m_httpOn->setObjectName(QStringLiteral("httpOn"));
    connect(m_httpOn, &QCheckBox::toggled, this, &ServerPage::setHttpEnabled);
    form->addRow(m_httpOn);
    m_host = new QComboBox;
    m_host->addItem(tr("This computer only (127.0.0.1)"), QStringLiteral("127.0.0.1"));
    m_host->addItem(tr("The network (0.0.0.0) — needs an API key"), QStringLiteral("0.0.0.0"));
    form->addRow(tr("Listen on"), m_host);
    m_port = new QSpinBox;
    m_port->setRange(0, 65535);
    m_port->setSpecialValueText(tr("any free port"));
    m_port->setValue(8888);
    form->addRow(tr("Port"), m_port);
    m_apiKey = new QLineEdit;
    m_apiKey->setEchoMode(QLineEdit::PasswordEchoOnEdit);
    m_apiKey->setPlaceholderText(tr("none (loopback only)"));
    form->addRow(tr("API key"), m_apiKey);
    for (QWidget* w : {static_cast<QWidget*>(m_host), static_cast<QWidget*>(m_port), static_cast<QWidget*>(m_apiKey)})
        w->setToolTip(tr("Applies when the API is switched on."));
    connect(m_host, &QComboBox::currentIndexChanged, this, &ServerPage::updateCurl);
    connect(m_port, &QSpinBox::valueChanged, this, &ServerPage::updateCurl);
    connect(m_apiKey, &QLineEdit::textChanged, this, &ServerPage::updateCurl);
    m_httpStatus = new QLabel(tr("Off"));
    m_httpStatus->setObjectName(QStringLiteral("httpStatus"));
    m_httpStatus->setWordWrap(true);
    form->addRow(tr("Status"), m_httpStatus);
    m_baseUrl = new QLineEdit;
    m_baseUrl->setReadOnly(true);
    form->addRow(tr("Base URL"), m_baseUrl);
    m_curl = new QPlainTextEdit;
    m_curl->setObjectName(QStringLiteral("curl"));
    m_curl->setReadOnly(true);
    m_curl->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_curl->setMaximumHeight(110);
    form->addRow(tr("Example"), m_curl);
    auto* copy = new QPushButton(tr("Copy curl"));
    connect(copy, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(curlExample()); });
    auto* copyUrl = new QPushButton(tr("Copy URL"));
    connect(copyUrl, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(m_baseUrl->text()); });
    auto* row = new QHBoxLayout;
    row->addWidget(copyUrl);
    row->addWidget(copy);
    row->addStretch();
    form->addRow(row);
    if (!m_controller->hasApiServer()) {
        m_httpGroup->setEnabled(false);
        m_httpStatus->setText(tr("This build has no HTTP server."));
    }
    return m_httpGroup;
}

void ServerPage::setModelPath(const QString& path) { m_modelPath->setText(path); }
QString ServerPage::modelPath() const { return m_modelPath->text().trimmed(); }

void ServerPage::setHttpDefaults(const QString& host, int port, const QString& apiKey) {
    const int idx = m_host->findData(host);
    if (idx >= 0) m_host->setCurrentIndex(idx);
    m_port->setValue(port);
    m_apiKey->setText(apiKey);
    updateCurl();
}

void ServerPage::setEnvStore(EnvStore* env) {
    m_env = env;
    if (!m_env) return;
    const EngineSettings s = engineSettings(*m_env);
    m_kvBudget->setValue(int(s.options.kvBudgetMiB));
    m_maxSeqs->setValue(s.options.maxNumSeqs);
}

EngineSettings ServerPage::currentEngineSettings() {
    QString readError;
    if (!m_env->reload(&readError))
        appendLog(QDateTime::currentDateTime().toString(QStringLiteral("HH:mm:ss.zzz ")) +
                  tr("The .env file could not be read again (%1): its values as read before are used.").arg(readError));
    return engineSettings(*m_env);
}

void ServerPage::loadModel() {
    if (modelPath().isEmpty()) {
        m_modelStatus->setText(tr("Choose the model folder first."));
        return;
    }
    // The .env's engine settings as they are now (the file is read again: it may have been corrected since);
    // one that is not usable stops the load here, named, rather than a default standing in for it. MAX_NUM_SEQS
    // and TS_KV_BUDGET_MIB only started this page's controls, whose values the load takes: a bad one is logged.
    LoadOptions o;
    if (m_env) {
        const QString now = QDateTime::currentDateTime().toString(QStringLiteral("HH:mm:ss.zzz "));
        const EngineSettings s = currentEngineSettings();
        QStringList blocking;
        const QStringList controlKeys = serverPageControlKeys();
        for (auto it = s.problems.begin(); it != s.problems.end(); ++it) {
            if (it.key() == QLatin1String(kMaxConcurrentRequestsSetting.env)) continue;  // the API's: at its start
            if (controlKeys.contains(it.key()))
                appendLog(now + tr("%1 This page's value is used.").arg(it.value()));
            else
                blocking << it.value();
        }
        if (!blocking.isEmpty()) {
            m_progress->setValue(0);
            m_modelStatus->setText(tr("Not loaded: %1 Correct it in the .env file and load again (a value from the "
                                      "environment or --set needs a restart of the control center).")
                                       .arg(blocking.join(QLatin1Char(' '))));
            for (const QString& p : blocking) appendLog(now + tr("Not loaded: %1").arg(p));
            return;
        }
        o = s.options;
    }
    o.kvBudgetMiB = m_kvBudget->value();
    o.maxNumSeqs = m_maxSeqs->value();
    m_progress->setValue(0);
    m_controller->requestLoad(modelPath(), o);
}

void ServerPage::unloadModel() { m_controller->requestUnload(); }

void ServerPage::setHttpEnabled(bool on) {
    if (m_httpOn->isChecked() != on) {
        m_httpOn->setChecked(on);  // re-enters through toggled
        return;
    }
    if (on) {
        ApiServerSettings s;
        s.host = m_host->currentData().toString();
        s.port = m_port->value();
        s.apiKey = m_apiKey->text();
        if (m_env) {  // TS_MAX_CONCURRENT_REQUESTS, as `serve` takes it
            const EngineSettings e = currentEngineSettings();
            const auto bad = e.problems.constFind(QLatin1String(kMaxConcurrentRequestsSetting.env));
            if (bad != e.problems.constEnd()) {
                m_httpStatus->setText(tr("Not started: %1").arg(*bad));
                const QSignalBlocker block(m_httpOn);  // nothing was started: nothing to stop
                m_httpOn->setChecked(false);
                return;
            }
            s.maxConcurrentRequests = e.maxConcurrentRequests;
        }
        m_httpStatus->setText(tr("Starting…"));
        m_controller->requestHttpStart(s);
    } else {
        m_controller->requestHttpStop();
    }
}

void ServerPage::appendLog(const QString& line) { m_log->appendPlainText(line); }

void ServerPage::onStateChanged(EngineController::State state) {
    const bool busy = state == EngineController::State::Loading || state == EngineController::State::Unloading;
    m_load->setEnabled(!busy);
    m_unload->setEnabled(state == EngineController::State::Ready);
    m_modelPath->setEnabled(!busy);
    if (state != EngineController::State::Ready) m_engineStatus->setText(tr("Engine: no model loaded"));
}

void ServerPage::onModelLoaded(const ModelInfo& info) {
    m_modelStatus->setText(tr("Loaded %1: %2 layers, vocabulary %3, KV pool %4 tokens%5")
                               .arg(info.name).arg(info.layers).arg(info.vocabSize).arg(info.kvTokenCapacity)
                               .arg(info.hasChatTemplate ? QString() : tr(" (no chat template: API completions by token ids only)")));
    m_testModelNote->setVisible(info.randomWeights);
}

void ServerPage::onHttpState(bool running, const QString& baseUrl, const QString& error) {
    m_servedUrl = running ? baseUrl : QString();
    {
        const QSignalBlocker block(m_httpOn);  // reflect the real state without asking again
        m_httpOn->setChecked(running);
    }
    m_host->setEnabled(!running);
    m_port->setEnabled(!running);
    m_apiKey->setEnabled(!running);
    if (running) m_httpStatus->setText(tr("Listening on %1").arg(baseUrl));
    else if (!error.isEmpty()) m_httpStatus->setText(tr("Not running: %1").arg(error));
    else m_httpStatus->setText(tr("Off"));
    updateCurl();
}

void ServerPage::onMetrics(const MetricsSample& s) {
    if (!s.engineFailure.isEmpty()) {
        m_engineStatus->setText(tr("Engine stopped: %1. Restart TwinSpark to use the GPU again.").arg(s.engineFailure));
        return;
    }
    m_engineStatus->setText(tr("Engine: %1 running, %2 waiting · KV %3 % · %4 tok/s generation")
                                .arg(s.running).arg(s.waiting).arg(s.kvUsage * 100.0, 0, 'f', 1)
                                .arg(s.generationTokensPerSecond, 0, 'f', 1));
}

void ServerPage::updateCurl() {
    QString url = m_servedUrl;
    if (url.isEmpty()) {
        const QString host = m_host->currentData().toString() == QLatin1String("0.0.0.0")
                                 ? QStringLiteral("127.0.0.1") : m_host->currentData().toString();
        url = QStringLiteral("http://%1:%2/v1").arg(host).arg(m_port->value());
    }
    m_baseUrl->setText(url);
    m_curl->setPlainText(curlExample());
}

QString ServerPage::curlExample() const {
    QString auth;
    if (!m_apiKey->text().isEmpty()) auth = QStringLiteral(" \\\n  -H \"Authorization: Bearer $TWINSPARK_API_KEY\"");
    return QStringLiteral("curl %1/chat/completions%2 \\\n  -H \"Content-Type: application/json\" \\\n"
                          "  -d '{\"model\": \"GLM-5.3-Flash-EXL3\", \"messages\": [{\"role\": \"user\", "
                          "\"content\": \"Hello\"}], \"stream\": true}'")
        .arg(m_baseUrl->text(), auth);
}

}  // namespace ts::ui
