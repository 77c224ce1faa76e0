// One message of the chat playground: the role, the answer rendered as Markdown (code blocks included),
// the reasoning in a collapsible section, the per-message speed, and copy / edit buttons. The widget only
// renders; the ChatPage decides when (it coalesces streamed deltas before re-rendering).
#pragma once

#include <QFrame>

#include "ui/conversation_store.h"

class QHBoxLayout;
class QLabel;
class QTextBrowser;
class QToolButton;

namespace ts::ui {

class ChatMessageWidget final : public QFrame {
    Q_OBJECT
public:
    explicit ChatMessageWidget(const ChatMessage& message, QWidget* parent = nullptr);

    void setContent(const QString& markdown);
    void setReasoning(const QString& text);
    void setStats(const QString& stats);
    // While streaming, code-block copy buttons are not rebuilt (the blocks are still growing).
    void setStreaming(bool on);
    QString content() const { return m_content; }
    QString reasoning() const { return m_reasoning; }
    bool reasoningExpanded() const;
    QTextBrowser* body() const { return m_body; }
    // Fenced code blocks of a Markdown text, in order (their contents, without the fences).
    static QStringList codeBlocks(const QString& markdown);

signals:
    void editRequested();

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    void fit(QTextBrowser* b);
    void rebuildCodeButtons();

    QString m_role;
    QString m_content;
    QString m_reasoning;
    bool m_streaming = false;
    QLabel* m_header = nullptr;
    QLabel* m_stats = nullptr;
    QToolButton* m_reasoningToggle = nullptr;
    QTextBrowser* m_reasoningBody = nullptr;
    QTextBrowser* m_body = nullptr;
    QWidget* m_codeButtons = nullptr;
    QHBoxLayout* m_codeLayout = nullptr;
};

}  // namespace ts::ui
