#include "ui/main_window.h"

#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QShortcut>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>

#include "ui/chat_page.h"
#include "ui/dashboard_page.h"
#include "ui/server_page.h"
#include "ui/setup_page.h"
#include "ui/translations.h"

namespace ts::ui {

MainWindow::MainWindow(EngineController* controller, EnvStore* env, ConversationStore* conversations, QWidget* parent)
    : QMainWindow(parent), m_controller(controller) {
    setWindowTitle(tr("TwinSpark"));
    m_nav = new QListWidget;
    m_nav->setObjectName(QStringLiteral("navigation"));
    m_nav->addItems({tr("Server"), tr("Dashboard"), tr("Chat"), tr("Setup")});
    m_nav->setMaximumWidth(180);
    m_stack = new QStackedWidget;
    m_server = new ServerPage(controller);
    m_server->setEnvStore(env);
    m_dashboard = new DashboardPage;
    m_chat = new ChatPage(controller, conversations);
    m_setup = new SetupPage(env);
    m_stack->addWidget(m_server);
    m_stack->addWidget(m_dashboard);
    m_stack->addWidget(m_chat);
    m_stack->addWidget(m_setup);
    connect(m_nav, &QListWidget::currentRowChanged, m_stack, &QStackedWidget::setCurrentIndex);
    auto* split = new QSplitter;
    split->addWidget(m_nav);
    split->addWidget(m_stack);
    split->setStretchFactor(1, 1);
    // The list is at most 180 px wide; without sizes the splitter gave its slot ~30 % of the window and left the
    // rest of it blank between the list and the page.
    split->setSizes({m_nav->maximumWidth(), 100000});
    setCentralWidget(split);
    for (int i = 0; i < 4; ++i)
        connect(new QShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)), this), &QShortcut::activated, this,
                [this, i] { showPage(i); });

    m_state = new QLabel;
    statusBar()->addPermanentWidget(m_state);
    connect(controller, &EngineController::stateChanged, this, &MainWindow::onStateChanged);
    connect(controller, &EngineController::metricsUpdated, m_dashboard, &DashboardPage::addSample);
    connect(controller, &EngineController::modelLoaded, this, [this](const ModelInfo& info) {
        m_modelName = info.randomWeights ? tr("%1 (test checkpoint, random weights)").arg(info.name) : info.name;
        setWindowTitle(tr("TwinSpark — %1").arg(m_modelName));
        m_dashboard->clear();
    });
    connect(controller, &EngineController::modelUnloaded, this, [this] {
        m_modelName.clear();
        setWindowTitle(tr("TwinSpark"));
    });
    connect(controller, &EngineController::loadFailed, this,
            [this](const QString& e) { statusBar()->showMessage(tr("Load failed: %1").arg(e), 10000); });
    buildMenus();
    onStateChanged(controller->state());
    showPage(QSettings().value(QStringLiteral("window/page"), Server).toInt());
    // First start (nothing saved): a size at which the chat column, the conversation list and the sampling
    // panel all fit side by side.
    if (!restoreGeometry(QSettings().value(QStringLiteral("window/geometry")).toByteArray()) || geometry().width() < 400)
        resize(1320, 820);
}

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);
    QMenu* view = menuBar()->addMenu(tr("&View"));
    const QStringList pages = {tr("Server"), tr("Dashboard"), tr("Chat"), tr("Setup")};
    for (int i = 0; i < pages.size(); ++i) {
        QAction* a = view->addAction(pages[i], this, [this, i] { showPage(i); });
        a->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
        a->setShortcutContext(Qt::WidgetShortcut);  // the window-wide QShortcut above handles the keys
    }
    QMenu* lang = view->addMenu(tr("&Language"));
    auto* group = new QActionGroup(lang);
    const QString current = chooseLanguage();
    for (const auto& [code, name] : availableLanguages()) {
        QAction* a = lang->addAction(name);
        a->setCheckable(true);
        a->setChecked(code == current);
        group->addAction(a);
        connect(a, &QAction::triggered, this, [this, code = code] {
            QSettings().setValue(QStringLiteral("language"), code);
            statusBar()->showMessage(tr("The language changes when TwinSpark starts again."), 8000);
        });
    }
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About TwinSpark"), this, [this] {
        QMessageBox::about(this, tr("About TwinSpark"),
                           tr("TwinSpark %1 — GLM-5.3-Flash inference with an embedded engine and an "
                              "OpenAI-compatible API.").arg(QCoreApplication::applicationVersion()));
    });
}

void MainWindow::showPage(int page) {
    if (page < 0 || page >= m_stack->count()) page = Server;
    m_nav->setCurrentRow(page);
    m_stack->setCurrentIndex(page);
}

void MainWindow::onStateChanged(EngineController::State state) {
    switch (state) {
    case EngineController::State::Empty: m_state->setText(tr("No model")); break;
    case EngineController::State::Loading: m_state->setText(tr("Loading…")); break;
    case EngineController::State::Ready: m_state->setText(tr("Ready")); break;
    case EngineController::State::Unloading: m_state->setText(tr("Unloading…")); break;
    }
}

void MainWindow::closeEvent(QCloseEvent* event) {
    QSettings s;
    s.setValue(QStringLiteral("window/geometry"), saveGeometry());
    s.setValue(QStringLiteral("window/page"), m_stack->currentIndex());
    event->accept();
}

}  // namespace ts::ui
