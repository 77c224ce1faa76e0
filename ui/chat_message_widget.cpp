#include "ui/chat_message_widget.h"

#include <QApplication>
#include <QClipboard>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollBar>
#include <QTextBrowser>
#include <QToolButton>
#include <QVBoxLayout>

namespace ts::ui {

namespace {

QTextBrowser* makeBrowser() {
    auto* b = new QTextBrowser;
    b->setOpenExternalLinks(true);
    b->setFrameShape(QFrame::NoFrame);
    // The page scrolls, not each message: the browser is sized to its document.
    b->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    b->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    b->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    b->viewport()->setAutoFillBackground(false);
    return b;
}

}  // namespace

ChatMessageWidget::ChatMessageWidget(const ChatMessage& message, QWidget* parent) : QFrame(parent), m_role(message.role) {
    setFrameShape(QFrame::StyledPanel);
    setObjectName(message.role == QLatin1String("user") ? QStringLiteral("userMessage") : QStringLiteral("assistantMessage"));
    auto* lay = new QVBoxLayout(this);
    auto* head = new QHBoxLayout;
    m_header = new QLabel(QStringLiteral("<b>%1</b>").arg(message.role == QLatin1String("user") ? tr("You") : tr("Assistant")));
    head->addWidget(m_header);
    m_stats = new QLabel;
    m_stats->setObjectName(QStringLiteral("stats"));
    m_stats->setEnabled(false);
    head->addWidget(m_stats, 1);
    auto* copy = new QToolButton;
    copy->setText(tr("Copy"));
    copy->setToolTip(tr("Copy this message as Markdown"));
    connect(copy, &QToolButton::clicked, this, [this] { QApplication::clipboard()->setText(m_content); });
    head->addWidget(copy);
    if (message.role == QLatin1String("user")) {
        auto* edit = new QToolButton;
        edit->setText(tr("Edit"));
        edit->setToolTip(tr("Edit this message and send it again (the answers after it are replaced)"));
        connect(edit, &QToolButton::clicked, this, &ChatMessageWidget::editRequested);
        head->addWidget(edit);
    }
    lay->addLayout(head);

    m_reasoningToggle = new QToolButton;
    m_reasoningToggle->setObjectName(QStringLiteral("reasoningToggle"));
    m_reasoningToggle->setCheckable(true);
    m_reasoningToggle->setChecked(false);
    m_reasoningToggle->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    m_reasoningToggle->setArrowType(Qt::RightArrow);
    m_reasoningToggle->setText(tr("Reasoning"));
    m_reasoningToggle->setAutoRaise(true);
    m_reasoningToggle->hide();
    m_reasoningBody = makeBrowser();
    m_reasoningBody->setObjectName(QStringLiteral("reasoning"));
    m_reasoningBody->setEnabled(false);  // greyed: it is the model's scratch work, not the answer
    m_reasoningBody->hide();
    connect(m_reasoningToggle, &QToolButton::toggled, this, [this](bool on) {
        m_reasoningToggle->setArrowType(on ? Qt::DownArrow : Qt::RightArrow);
        m_reasoningBody->setVisible(on);
        if (on) fit(m_reasoningBody);
    });
    lay->addWidget(m_reasoningToggle);
    lay->addWidget(m_reasoningBody);

    m_body = makeBrowser();
    m_body->setObjectName(QStringLiteral("body"));
    lay->addWidget(m_body);
    m_codeButtons = new QWidget;
    m_codeLayout = new QHBoxLayout(m_codeButtons);
    m_codeLayout->setContentsMargins(0, 0, 0, 0);
    m_codeButtons->hide();
    lay->addWidget(m_codeButtons);

    setReasoning(message.reasoning);
    setContent(message.content);
    setStats(message.stats);
}

void ChatMessageWidget::setContent(const QString& markdown) {
    m_content = markdown;
    // User text is shown as typed; the model's answer is rendered as Markdown.
    if (m_role == QLatin1String("user")) m_body->setPlainText(markdown);
    else m_body->setMarkdown(markdown);
    fit(m_body);
    if (!m_streaming) rebuildCodeButtons();
}

void ChatMessageWidget::setReasoning(const QString& text) {
    m_reasoning = text;
    m_reasoningToggle->setVisible(!text.isEmpty());
    m_reasoningBody->setPlainText(text);
    if (m_reasoningBody->isVisible()) fit(m_reasoningBody);
}

void ChatMessageWidget::setStats(const QString& stats) { m_stats->setText(stats); }

void ChatMessageWidget::setStreaming(bool on) {
    m_streaming = on;
    if (!on) rebuildCodeButtons();
}

bool ChatMessageWidget::reasoningExpanded() const { return m_reasoningToggle->isChecked(); }

QStringList ChatMessageWidget::codeBlocks(const QString& markdown) {
    static const QRegularExpression re(QStringLiteral("(?:^|\\n)```[^\\n]*\\n(.*?)\\n```"),
                                       QRegularExpression::DotMatchesEverythingOption);
    QStringList out;
    auto it = re.globalMatch(markdown);
    while (it.hasNext()) out << it.next().captured(1);
    return out;
}

void ChatMessageWidget::rebuildCodeButtons() {
    while (QLayoutItem* item = m_codeLayout->takeAt(0)) {
        delete item->widget();
        delete item;
    }
    const QStringList blocks = m_role == QLatin1String("assistant") ? codeBlocks(m_content) : QStringList();
    for (int i = 0; i < blocks.size(); ++i) {
        auto* b = new QPushButton(blocks.size() == 1 ? tr("Copy code") : tr("Copy code %1").arg(i + 1));
        const QString code = blocks[i];
        connect(b, &QPushButton::clicked, this, [code] { QApplication::clipboard()->setText(code); });
        m_codeLayout->addWidget(b);
    }
    m_codeLayout->addStretch();
    m_codeButtons->setVisible(!blocks.isEmpty());
}

void ChatMessageWidget::fit(QTextBrowser* b) {
    const int width = std::max(100, b->viewport()->width());
    b->document()->setTextWidth(width);
    const int scroll = b->horizontalScrollBar()->isVisible() ? b->horizontalScrollBar()->height() : 0;
    b->setFixedHeight(int(b->document()->size().height()) + 2 * b->frameWidth() + scroll + 2);
}

void ChatMessageWidget::resizeEvent(QResizeEvent* event) {
    QFrame::resizeEvent(event);
    fit(m_body);
    if (m_reasoningBody->isVisible()) fit(m_reasoningBody);
}

}  // namespace ts::ui
