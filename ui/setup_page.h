// Setup (issue 7, page 1) inside the main window: where the deployment `.env` is, what it holds (with
// the values the environment or command line override), its problems, and the button that opens the
// SetupWizard. The wizard is opened automatically on first run, when the .env had to be created.
#pragma once

#include <QWidget>

class QLabel;
class QTextBrowser;

namespace ts::ui {

class EnvStore;

class SetupPage final : public QWidget {
    Q_OBJECT
public:
    explicit SetupPage(EnvStore* store, QWidget* parent = nullptr);

public slots:
    void openWizard();
    void refresh();

signals:
    void envWritten(const QString& path);

protected:
    void showEvent(QShowEvent* event) override;  // the file may have been read again since (a model load does)

private:
    EnvStore* m_store;
    QLabel* m_path = nullptr;
    QTextBrowser* m_summary = nullptr;
};

}  // namespace ts::ui
