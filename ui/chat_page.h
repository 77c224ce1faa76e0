// Chat playground (issue 7, page 4): streaming answers with stop, regenerate and edit-and-resend; a
// system prompt and sampling controls; thinking on/off with the reasoning shown collapsible; Markdown
// and code blocks rendered with copy buttons; per-message speed (tok/s, TTFT); conversations kept
// across restarts (ConversationStore). It submits through the EngineController like any other client,
// so it shares the engine's batch with the HTTP API.
//
// Streamed deltas are appended to the message text at once but rendered at most every kRenderMs: a
// Markdown re-layout per token would make the GUI's cost grow with the answer's length times its speed.
#pragma once

#include <QList>
#include <QWidget>

#include "ui/conversation_store.h"
#include "ui/engine_controller.h"

class QCheckBox;
class QDoubleSpinBox;
class QLabel;
class QListWidget;
class QPlainTextEdit;
class QPushButton;
class QScrollArea;
class QSpinBox;
class QTimer;
class QVBoxLayout;

namespace ts::ui {

class ChatMessageWidget;

class ChatPage final : public QWidget {
    Q_OBJECT
public:
    static constexpr int kRenderMs = 50;
    ChatPage(EngineController* controller, ConversationStore* store, QWidget* parent = nullptr);

    bool isGenerating() const { return m_ticket != 0; }
    int messageCount() const { return int(m_conversation.messages.size()); }
    ChatMessageWidget* messageWidget(int index) const { return m_widgets.value(index); }
    const Conversation& conversation() const { return m_conversation; }
    ChatRequest buildRequest() const;  // from the conversation and the controls (tests, the API example)
    void setThinking(bool on);
    void setMaxTokens(int n);
    void setTemperature(double t);
    void setSeed(int seed);  // -1: random

public slots:
    void sendMessage(const QString& text);
    void send();  // the input box's text
    void stop();
    void regenerate();
    void editMessage(int index);
    void newConversation();
    void deleteConversation();

signals:
    void generationFinished(const ts::ui::ChatFinish& finish);

private:
    void onDelta(quint64 ticket, const ts::ui::ChatDelta& delta);
    void onFinished(quint64 ticket, const ts::ui::ChatFinish& finish);
    void render();
    void startGeneration();
    void showConversation(const Conversation& c);
    void addMessageWidget(const ChatMessage& m);
    void refreshList();
    void updateControls();
    void persist();
    void loadSettings();
    void saveSettings() const;
    QWidget* makeSettingsPanel();

    EngineController* m_controller;
    ConversationStore* m_store;
    Conversation m_conversation;
    QList<Conversation> m_all;
    QList<ChatMessageWidget*> m_widgets;
    quint64 m_ticket = 0;
    int m_streamTokens = 0;
    bool m_modelReady = false;
    bool m_canChat = false;
    bool m_dirtyRender = false;

    QListWidget* m_list = nullptr;
    QScrollArea* m_scroll = nullptr;
    QVBoxLayout* m_messages = nullptr;
    QPlainTextEdit* m_input = nullptr;
    QPushButton* m_send = nullptr;
    QPushButton* m_stop = nullptr;
    QPushButton* m_regenerate = nullptr;
    QLabel* m_status = nullptr;
    QPlainTextEdit* m_system = nullptr;
    QCheckBox* m_thinking = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QDoubleSpinBox* m_topP = nullptr;
    QSpinBox* m_topK = nullptr;
    QDoubleSpinBox* m_minP = nullptr;
    QDoubleSpinBox* m_repetition = nullptr;
    QSpinBox* m_maxTokens = nullptr;
    QSpinBox* m_seed = nullptr;
    bool m_loadingSettings = false;
    QTimer* m_renderTimer = nullptr;
};

}  // namespace ts::ui
