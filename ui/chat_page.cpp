#include "ui/chat_page.h"

#include <QApplication>
#include <QCheckBox>
#include <QPointer>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QShortcut>
#include <QSpinBox>
#include <QSplitter>
#include <QTimer>
#include <QVBoxLayout>

#include "ui/chat_message_widget.h"

namespace ts::ui {

ChatPage::ChatPage(EngineController* controller, ConversationStore* store, QWidget* parent)
    : QWidget(parent), m_controller(controller), m_store(store) {
    setObjectName(QStringLiteral("chatPage"));
    auto* split = new QSplitter(Qt::Horizontal);

    auto* left = new QWidget;
    auto* lv = new QVBoxLayout(left);
    m_list = new QListWidget;
    m_list->setObjectName(QStringLiteral("conversations"));
    lv->addWidget(m_list, 1);
    auto* newChat = new QPushButton(tr("New chat"));
    newChat->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_N));
    newChat->setToolTip(tr("Start a new conversation (Ctrl+N)"));
    auto* del = new QPushButton(tr("Delete"));
    lv->addWidget(newChat);
    lv->addWidget(del);
    connect(newChat, &QPushButton::clicked, this, &ChatPage::newConversation);
    connect(del, &QPushButton::clicked, this, &ChatPage::deleteConversation);
    connect(m_list, &QListWidget::currentRowChanged, this, [this](int row) {
        if (row < 0 || row >= m_all.size() || isGenerating() || m_all[row].id == m_conversation.id) return;
        showConversation(m_all[row]);
    });
    split->addWidget(left);

    auto* center = new QWidget;
    auto* cv = new QVBoxLayout(center);
    m_scroll = new QScrollArea;
    m_scroll->setWidgetResizable(true);
    auto* holder = new QWidget;
    m_messages = new QVBoxLayout(holder);
    m_messages->addStretch();
    m_scroll->setWidget(holder);
    cv->addWidget(m_scroll, 1);
    m_status = new QLabel;
    m_status->setObjectName(QStringLiteral("chatStatus"));
    m_status->setWordWrap(true);
    cv->addWidget(m_status);
    m_input = new QPlainTextEdit;
    m_input->setObjectName(QStringLiteral("chatInput"));
    m_input->setPlaceholderText(tr("Message (Ctrl+Enter to send)"));
    m_input->setMaximumHeight(120);
    cv->addWidget(m_input);
    auto* buttons = new QHBoxLayout;
    m_send = new QPushButton(tr("Send"));
    m_send->setToolTip(tr("Send (Ctrl+Enter)"));
    m_stop = new QPushButton(tr("Stop"));
    m_stop->setToolTip(tr("Stop generating (Esc)"));
    m_regenerate = new QPushButton(tr("Regenerate"));
    m_regenerate->setToolTip(tr("Answer the last message again (Ctrl+R)"));
    buttons->addWidget(m_send);
    buttons->addWidget(m_stop);
    buttons->addWidget(m_regenerate);
    buttons->addStretch();
    cv->addLayout(buttons);
    connect(m_send, &QPushButton::clicked, this, &ChatPage::send);
    connect(m_stop, &QPushButton::clicked, this, &ChatPage::stop);
    connect(m_regenerate, &QPushButton::clicked, this, &ChatPage::regenerate);
    for (auto key : {QKeySequence(Qt::CTRL | Qt::Key_Return), QKeySequence(Qt::CTRL | Qt::Key_Enter)})
        connect(new QShortcut(key, this), &QShortcut::activated, this, &ChatPage::send);
    connect(new QShortcut(QKeySequence(Qt::Key_Escape), this), &QShortcut::activated, this, &ChatPage::stop);
    connect(new QShortcut(QKeySequence(Qt::CTRL | Qt::Key_R), this), &QShortcut::activated, this, &ChatPage::regenerate);
    split->addWidget(center);
    split->addWidget(makeSettingsPanel());
    split->setStretchFactor(1, 1);
    split->setSizes({180, 600, 260});
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(split);

    m_renderTimer = new QTimer(this);
    m_renderTimer->setSingleShot(true);
    m_renderTimer->setInterval(kRenderMs);
    connect(m_renderTimer, &QTimer::timeout, this, &ChatPage::render);

    connect(controller, &EngineController::chatDelta, this, &ChatPage::onDelta);
    connect(controller, &EngineController::chatFinished, this, &ChatPage::onFinished);
    auto onLoaded = [this](const ModelInfo& info) {
        m_modelReady = true;
        m_canChat = info.hasChatTemplate;
        m_status->setText(info.hasChatTemplate
                              ? (info.randomWeights ? tr("%1 — a random-weight test checkpoint: answers are noise.").arg(info.name)
                                                    : tr("Model: %1").arg(info.name))
                              : tr("%1 has no tokenizer or chat template: it cannot chat.").arg(info.name));
        updateControls();
    };
    connect(controller, &EngineController::modelLoaded, this, onLoaded);
    connect(controller, &EngineController::modelUnloaded, this, [this] {
        m_modelReady = m_canChat = false;
        m_status->setText(tr("Load a model on the Server page to chat."));
        updateControls();
    });

    loadSettings();
    QStringList problems;
    m_all = m_store->loadAll(&problems);
    if (!problems.isEmpty()) m_status->setText(tr("Some saved conversations could not be read: %1").arg(problems.join(QStringLiteral("; "))));
    else m_status->setText(tr("Load a model on the Server page to chat."));
    if (m_all.isEmpty()) newConversation();
    else showConversation(m_all.first());
    refreshList();
    if (const ModelInfo info = controller->modelInfo(); !info.name.isEmpty()) onLoaded(info);
    updateControls();
}

QWidget* ChatPage::makeSettingsPanel() {
    auto* box = new QGroupBox(tr("Settings"));
    auto* form = new QFormLayout(box);
    m_system = new QPlainTextEdit;
    m_system->setObjectName(QStringLiteral("systemPrompt"));
    m_system->setPlaceholderText(tr("System prompt (optional)"));
    m_system->setMaximumHeight(100);
    form->addRow(tr("System"), m_system);
    m_thinking = new QCheckBox(tr("Thinking"));
    m_thinking->setToolTip(tr("Let the model reason before answering (shown collapsed above the answer)."));
    form->addRow(m_thinking);
    auto dbl = [](double lo, double hi, double step, int decimals) {
        auto* s = new QDoubleSpinBox;
        s->setRange(lo, hi);
        s->setSingleStep(step);
        s->setDecimals(decimals);
        return s;
    };
    m_temperature = dbl(0, 2, 0.05, 2);
    m_temperature->setToolTip(tr("0 = greedy (always the most likely token)"));
    form->addRow(tr("Temperature"), m_temperature);
    m_topP = dbl(0.01, 1, 0.05, 2);
    form->addRow(tr("Top-p"), m_topP);
    m_topK = new QSpinBox;
    m_topK->setRange(0, 100000);
    m_topK->setSpecialValueText(tr("off"));
    form->addRow(tr("Top-k"), m_topK);
    m_minP = dbl(0, 1, 0.01, 2);
    form->addRow(tr("Min-p"), m_minP);
    m_repetition = dbl(0.5, 2, 0.05, 2);
    form->addRow(tr("Repetition penalty"), m_repetition);
    m_maxTokens = new QSpinBox;
    m_maxTokens->setRange(1, 900000);
    form->addRow(tr("Max tokens"), m_maxTokens);
    m_seed = new QSpinBox;
    m_seed->setRange(-1, std::numeric_limits<int>::max());
    m_seed->setSpecialValueText(tr("random"));
    form->addRow(tr("Seed"), m_seed);
    for (auto* s : {m_temperature, m_topP, m_minP, m_repetition})
        connect(s, &QDoubleSpinBox::valueChanged, this, [this] { saveSettings(); });
    for (auto* s : {m_topK, m_maxTokens, m_seed}) connect(s, &QSpinBox::valueChanged, this, [this] { saveSettings(); });
    connect(m_thinking, &QCheckBox::toggled, this, [this] { saveSettings(); });
    connect(m_system, &QPlainTextEdit::textChanged, this, [this] { m_conversation.systemPrompt = m_system->toPlainText(); });
    return box;
}

void ChatPage::loadSettings() {
    // Setting a spin box emits valueChanged, which saves every control: without this guard the first
    // load would store the not-yet-loaded controls at their minimums (top-p 0.01, max tokens 1, ...).
    m_loadingSettings = true;
    QSettings s;
    m_thinking->setChecked(s.value(QStringLiteral("chat/thinking"), true).toBool());  // the recipe's default: on
    m_temperature->setValue(s.value(QStringLiteral("chat/temperature"), 1.0).toDouble());
    m_topP->setValue(s.value(QStringLiteral("chat/topP"), 0.95).toDouble());
    m_topK->setValue(s.value(QStringLiteral("chat/topK"), 0).toInt());
    m_minP->setValue(s.value(QStringLiteral("chat/minP"), 0.0).toDouble());
    m_repetition->setValue(s.value(QStringLiteral("chat/repetitionPenalty"), 1.0).toDouble());
    m_maxTokens->setValue(s.value(QStringLiteral("chat/maxTokens"), 2048).toInt());
    m_seed->setValue(s.value(QStringLiteral("chat/seed"), -1).toInt());
    m_loadingSettings = false;
}

void ChatPage::saveSettings() const {
    if (m_loadingSettings) return;
    QSettings s;
    s.setValue(QStringLiteral("chat/thinking"), m_thinking->isChecked());
    s.setValue(QStringLiteral("chat/temperature"), m_temperature->value());
    s.setValue(QStringLiteral("chat/topP"), m_topP->value());
    s.setValue(QStringLiteral("chat/topK"), m_topK->value());
    s.setValue(QStringLiteral("chat/minP"), m_minP->value());
    s.setValue(QStringLiteral("chat/repetitionPenalty"), m_repetition->value());
    s.setValue(QStringLiteral("chat/maxTokens"), m_maxTokens->value());
    s.setValue(QStringLiteral("chat/seed"), m_seed->value());
}

void ChatPage::setThinking(bool on) { m_thinking->setChecked(on); }
void ChatPage::setMaxTokens(int n) { m_maxTokens->setValue(n); }
void ChatPage::setTemperature(double t) { m_temperature->setValue(t); }
void ChatPage::setSeed(int seed) { m_seed->setValue(seed); }

ChatRequest ChatPage::buildRequest() const {
    ChatRequest r;
    if (!m_conversation.systemPrompt.trimmed().isEmpty())
        r.messages.append(QJsonObject{{QStringLiteral("role"), QStringLiteral("system")},
                                      {QStringLiteral("content"), m_conversation.systemPrompt}});
    for (const ChatMessage& m : m_conversation.messages) {
        if (m.role == QLatin1String("assistant") && m.content.isEmpty() && m.reasoning.isEmpty()) continue;
        r.messages.append(QJsonObject{{QStringLiteral("role"), m.role}, {QStringLiteral("content"), m.content}});
    }
    r.thinking = m_thinking->isChecked();
    r.temperature = m_temperature->value();
    r.topP = m_topP->value();
    r.topK = m_topK->value();
    r.minP = m_minP->value();
    r.repetitionPenalty = m_repetition->value();
    r.maxTokens = m_maxTokens->value();
    if (m_seed->value() >= 0) r.seed = quint64(m_seed->value());
    return r;
}

void ChatPage::send() {
    const QString text = m_input->toPlainText();
    if (text.trimmed().isEmpty() || isGenerating() || !m_canChat) return;
    m_input->clear();
    sendMessage(text);
}

void ChatPage::sendMessage(const QString& text) {
    if (isGenerating()) return;
    ChatMessage m{QStringLiteral("user"), text, QString(), QString()};
    if (m_conversation.messages.isEmpty() && m_conversation.title.isEmpty())
        m_conversation.title = text.simplified().left(48);
    m_conversation.messages.append(m);
    addMessageWidget(m);
    startGeneration();
}

void ChatPage::startGeneration() {
    const ChatRequest request = buildRequest();
    ChatMessage answer{QStringLiteral("assistant"), QString(), QString(), tr("waiting…")};
    m_conversation.messages.append(answer);
    addMessageWidget(answer);
    m_widgets.last()->setStreaming(true);
    m_streamTokens = 0;
    m_ticket = m_controller->requestChat(request);
    updateControls();
}

void ChatPage::onDelta(quint64 ticket, const ChatDelta& delta) {
    if (ticket != m_ticket || m_conversation.messages.isEmpty()) return;
    ChatMessage& m = m_conversation.messages.last();
    m.reasoning += delta.reasoning;
    m.content += delta.content;
    m_streamTokens += delta.tokens;
    m_dirtyRender = true;
    if (!m_renderTimer->isActive()) m_renderTimer->start();
}

void ChatPage::render() {
    if (!m_dirtyRender || m_widgets.isEmpty() || m_conversation.messages.isEmpty()) return;
    m_dirtyRender = false;
    const ChatMessage& m = m_conversation.messages.last();
    ChatMessageWidget* w = m_widgets.last();
    QScrollBar* bar = m_scroll->verticalScrollBar();
    const bool atBottom = bar->value() >= bar->maximum() - 8;  // follow the answer unless the user scrolled up
    if (w->reasoning() != m.reasoning) w->setReasoning(m.reasoning);
    if (w->content() != m.content) w->setContent(m.content);
    if (isGenerating()) w->setStats(tr("%n token(s)…", nullptr, m_streamTokens));
    if (atBottom) QTimer::singleShot(0, this, [bar] { bar->setValue(bar->maximum()); });
}

void ChatPage::onFinished(quint64 ticket, const ChatFinish& f) {
    if (ticket != m_ticket) return;
    m_ticket = 0;
    m_dirtyRender = true;
    render();
    ChatMessage& m = m_conversation.messages.last();
    if (f.reason == QLatin1String("error")) {
        m.stats = tr("Error: %1").arg(f.error);
    } else {
        QString reason;
        if (f.reason == QLatin1String("length")) reason = tr(" · max tokens reached");
        if (f.reason == QLatin1String("abort")) reason = tr(" · stopped");
        m.stats = tr("%1 tok/s · TTFT %2 ms · %3 tokens%4")
                      .arg(f.tokensPerSecond, 0, 'f', 1)
                      .arg(f.ttftSeconds * 1000.0, 0, 'f', 0)
                      .arg(f.completionTokens)
                      .arg(reason);
    }
    m_widgets.last()->setStats(m.stats);
    m_widgets.last()->setStreaming(false);
    persist();
    updateControls();
    emit generationFinished(f);
}

void ChatPage::stop() {
    if (isGenerating()) m_controller->requestStop(m_ticket);
}

void ChatPage::regenerate() {
    if (isGenerating() || !m_canChat) return;
    while (!m_conversation.messages.isEmpty() && m_conversation.messages.last().role == QLatin1String("assistant")) {
        m_conversation.messages.removeLast();
        delete m_widgets.takeLast();
    }
    if (m_conversation.messages.isEmpty()) return;
    startGeneration();
}

void ChatPage::editMessage(int index) {
    if (isGenerating() || index < 0 || index >= m_conversation.messages.size()) return;
    if (m_conversation.messages[index].role != QLatin1String("user")) return;
    // The edited message and everything after it leave the conversation; the text goes back to the
    // input box, to be changed and sent again.
    m_input->setPlainText(m_conversation.messages[index].content);
    while (m_conversation.messages.size() > index) {
        m_conversation.messages.removeLast();
        delete m_widgets.takeLast();
    }
    m_input->setFocus();
    persist();
    updateControls();
}

void ChatPage::addMessageWidget(const ChatMessage& m) {
    auto* w = new ChatMessageWidget(m);
    const int index = int(m_widgets.size());
    connect(w, &ChatMessageWidget::editRequested, this, [this, w] { editMessage(int(m_widgets.indexOf(w))); });
    m_messages->insertWidget(index, w);  // before the trailing stretch
    m_widgets.append(w);
}

void ChatPage::showConversation(const Conversation& c) {
    qDeleteAll(m_widgets);
    m_widgets.clear();
    m_conversation = c;
    {
        const QSignalBlocker block(m_system);
        m_system->setPlainText(c.systemPrompt);
    }
    for (const ChatMessage& m : c.messages) addMessageWidget(m);
    updateControls();
}

void ChatPage::newConversation() {
    if (isGenerating()) return;
    Conversation c;
    c.id = ConversationStore::newId();
    c.updated = QDateTime::currentDateTimeUtc();
    c.systemPrompt = m_system->toPlainText();
    showConversation(c);
    refreshList();
}

void ChatPage::deleteConversation() {
    if (isGenerating()) return;
    m_store->waitForWrites();  // a pending save must not bring the file back
    m_store->remove(m_conversation.id);
    m_all = m_store->loadAll();
    if (m_all.isEmpty()) newConversation();
    else showConversation(m_all.first());
    refreshList();
}

void ChatPage::persist() {
    if (m_conversation.messages.isEmpty()) return;
    m_conversation.updated = QDateTime::currentDateTimeUtc();
    // The write (fsynced) happens on the store's writer thread; the list is updated here in memory.
    QPointer<QLabel> status = m_status;
    m_store->saveAsync(m_conversation, [status](const QString& error) {
        QMetaObject::invokeMethod(qApp, [status, error] {
            if (status) status->setText(ChatPage::tr("Could not save the conversation: %1").arg(error));
        }, Qt::QueuedConnection);
    });
    for (qsizetype i = 0; i < m_all.size(); ++i)
        if (m_all[i].id == m_conversation.id) m_all.removeAt(i--);
    m_all.prepend(m_conversation);
    refreshList();
}

void ChatPage::refreshList() {
    const QSignalBlocker block(m_list);
    m_list->clear();
    int current = -1;
    for (int i = 0; i < m_all.size(); ++i) {
        m_list->addItem(m_all[i].title.isEmpty() ? tr("(untitled)") : m_all[i].title);
        if (m_all[i].id == m_conversation.id) current = i;
    }
    m_list->setCurrentRow(current);
}

void ChatPage::updateControls() {
    m_send->setEnabled(m_canChat && !isGenerating());
    m_stop->setEnabled(isGenerating());
    m_regenerate->setEnabled(m_canChat && !isGenerating() && !m_conversation.messages.isEmpty());
    m_list->setEnabled(!isGenerating());
}

}  // namespace ts::ui
