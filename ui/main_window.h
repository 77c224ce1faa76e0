// The control center's frame: a navigation list on the left (Server, Dashboard, Chat, Setup; Ctrl+1…4)
// and the pages in a stack, a menu (language, quit), and a status line with the engine's state.
#pragma once

#include <QMainWindow>

#include "ui/engine_controller.h"

class QLabel;
class QListWidget;
class QStackedWidget;

namespace ts::ui {

class ChatPage;
class ConversationStore;
class DashboardPage;
class EnvStore;
class ServerPage;
class SetupPage;

class MainWindow final : public QMainWindow {
    Q_OBJECT
public:
    enum Page { Server = 0, Dashboard, Chat, Setup };
    MainWindow(EngineController* controller, EnvStore* env, ConversationStore* conversations, QWidget* parent = nullptr);

    ServerPage* serverPage() const { return m_server; }
    DashboardPage* dashboardPage() const { return m_dashboard; }
    ChatPage* chatPage() const { return m_chat; }
    SetupPage* setupPage() const { return m_setup; }

public slots:
    void showPage(int page);

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    void buildMenus();
    void onStateChanged(EngineController::State state);

    EngineController* m_controller;
    QListWidget* m_nav = nullptr;
    QStackedWidget* m_stack = nullptr;
    ServerPage* m_server = nullptr;
    DashboardPage* m_dashboard = nullptr;
    ChatPage* m_chat = nullptr;
    SetupPage* m_setup = nullptr;
    QLabel* m_state = nullptr;
    QString m_modelName;
};

}  // namespace ts::ui
