// Server (issue 7, page 2): load / unload the model with progress, the in-process OpenAI HTTP server
// (on/off, bind address, port, API key) with its base URL and a ready-to-copy curl example, the engine's
// status, and the live log. Everything goes through the EngineController; nothing here waits.
#pragma once

#include <QWidget>

#include "ui/engine_controller.h"

class QCheckBox;
class QComboBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace ts::ui {

class EnvStore;

class ServerPage final : public QWidget {
    Q_OBJECT
public:
    explicit ServerPage(EngineController* controller, QWidget* parent = nullptr);

    // Initial values (from .env / QSettings / the command line).
    void setModelPath(const QString& path);
    QString modelPath() const;
    void setHttpDefaults(const QString& host, int port, const QString& apiKey);
    // The deployment .env the engine settings come from (engine_settings.h): the KV budget and parallel requests
    // start at its values, and each load reads the file again and the rest from it — and refuses a value that is
    // not usable.
    void setEnvStore(EnvStore* env);
    QString curlExample() const;

public slots:
    void loadModel();
    void unloadModel();
    void setHttpEnabled(bool on);
    void appendLog(const QString& line);

private:
    void onStateChanged(EngineController::State state);
    void onModelLoaded(const ts::ui::ModelInfo& info);
    void onHttpState(bool running, const QString& baseUrl, const QString& error);
    void onMetrics(const ts::ui::MetricsSample& s);
    void updateCurl();
    QWidget* makeModelGroup();
    QWidget* makeHttpGroup();

    // The .env read again (a failure logged) and its engine settings.
    EngineSettings currentEngineSettings();

    EngineController* m_controller;
    EnvStore* m_env = nullptr;
    QLineEdit* m_modelPath = nullptr;
    QPushButton* m_load = nullptr;
    QPushButton* m_unload = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_modelStatus = nullptr;
    QLabel* m_testModelNote = nullptr;
    QSpinBox* m_kvBudget = nullptr;
    QSpinBox* m_maxSeqs = nullptr;
    QGroupBox* m_httpGroup = nullptr;
    QCheckBox* m_httpOn = nullptr;
    QComboBox* m_host = nullptr;
    QSpinBox* m_port = nullptr;
    QLineEdit* m_apiKey = nullptr;
    QLabel* m_httpStatus = nullptr;
    QLineEdit* m_baseUrl = nullptr;
    QPlainTextEdit* m_curl = nullptr;
    QLabel* m_engineStatus = nullptr;
    QPlainTextEdit* m_log = nullptr;
    QString m_servedUrl;
};

}  // namespace ts::ui
