// The chat page against a real EngineController on a small checkpoint with a tokenizer and a GLM-5.x
// template (tests/fixtures/make_chat_model.py; random weights, so the text is noise): answers stream in
// several deltas and the page shows exactly what streamed; thinking on splits reasoning from content;
// stop ends a generation; regenerate and edit-and-resend rewrite the conversation; conversations
// survive a restart; the code blocks of a Markdown answer are found for the copy buttons.
#include <QSettings>
#include <QtTest>

#include "gui_spy.h"

#include <QTemporaryDir>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTextBrowser>

#include "ui/chat_message_widget.h"
#include "ui/chat_page.h"
#include "ui/conversation_store.h"
#include "ui/engine_controller.h"

using namespace ts::ui;

class TestChatStreaming final : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(m_dir.isValid());
        GuiSpy loaded(&m_controller, &EngineController::modelLoaded);
        GuiSpy failed(&m_controller, &EngineController::loadFailed);
        GuiSpy progress(&m_controller, &EngineController::loadProgress);
        LoadOptions o;
        o.kvBudgetMiB = 128;
        m_controller.requestLoad(QStringLiteral(TS_GUI_CHAT_MODEL), o);
        QTRY_VERIFY_WITH_TIMEOUT(loaded.count() + failed.count() > 0, 60000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
        const auto info = loaded.first().first().value<ModelInfo>();
        QVERIFY(info.hasChatTemplate);
        QVERIFY(info.randomWeights);
        QVERIFY(progress.count() >= 4);
        QCOMPARE(progress.last().first().toInt(), 100);
        for (int i = 1; i < progress.count(); ++i)  // binding's and the weights' shares (10 → 78 %) included: never backwards
            QVERIFY2(progress.at(i).first().toInt() >= progress.at(i - 1).first().toInt(),
                     qPrintable(progress.at(i).at(1).toString()));
        // The weights' figures end at "(X of X)", in a unit that suits the model's size (never "0.0 GB of 0.0 GB").
        QString lastWeights;
        for (int i = 0; i < progress.count(); ++i)
            if (progress.at(i).at(1).toString().startsWith(QStringLiteral("Loading the weights")))
                lastWeights = progress.at(i).at(1).toString();
        static const QRegularExpression figures(QStringLiteral("\\((([0-9.,]+) \\S+) of (([0-9.,]+) \\S+)\\)$"));
        const auto m = figures.match(lastWeights);
        QVERIFY2(m.hasMatch(), qPrintable(lastWeights));
        QCOMPARE(m.captured(1), m.captured(3));
        bool ok = false;
        const double total = QLocale().toDouble(m.captured(4), &ok);
        QVERIFY2(ok && total >= 1.0, qPrintable(lastWeights));
        // Binding reports layer by layer before the weights' figures, ending at "(layer N of N)".
        static const QRegularExpression layer(QStringLiteral("^Mapping and checking the weights \\(layer ([0-9]+) of ([0-9]+)\\)$"));
        int lastLayerAt = -1, firstWeightsAt = -1;
        QRegularExpressionMatch lastLayer;
        for (int i = 0; i < progress.count(); ++i) {
            const QString text = progress.at(i).at(1).toString();
            if (const auto lm = layer.match(text); lm.hasMatch()) {
                lastLayerAt = i;
                lastLayer = lm;
            }
            if (firstWeightsAt < 0 && text.startsWith(QStringLiteral("Loading the weights"))) firstWeightsAt = i;
        }
        QVERIFY2(lastLayerAt >= 0 && lastLayerAt < firstWeightsAt, qPrintable(QString::number(lastLayerAt)));
        QCOMPARE(lastLayer.captured(1), lastLayer.captured(2));
        QVERIFY(lastLayer.captured(2).toInt() >= 2);
    }
    void cleanupTestCase() { m_controller.shutdown(); }

    // Fresh settings give the recipe's sampling defaults, and they survive a second page (the first load
    // used to save the not-yet-loaded controls at their minimums: top-p 0.01, max tokens 1).
    void samplingDefaultsPersist() {
        QSettings().remove(QStringLiteral("chat"));
        ConversationStore store(m_dir.filePath("conv-defaults"));
        for (int round = 0; round < 2; ++round) {
            ChatPage page(&m_controller, &store);
            const ChatRequest r = page.buildRequest();
            QCOMPARE(r.temperature, 1.0);
            QCOMPARE(r.topP, 0.95);
            QCOMPARE(r.repetitionPenalty, 1.0);
            QCOMPARE(r.maxTokens, 2048);
            QVERIFY(r.thinking);
            QVERIFY(!r.seed.has_value());
        }
        ChatPage page(&m_controller, &store);
        page.setMaxTokens(77);
        ChatPage again(&m_controller, &store);
        QCOMPARE(again.buildRequest().maxTokens, 77);
        QSettings().remove(QStringLiteral("chat"));
    }

    void streamsIntoThePage() {
        ConversationStore store(m_dir.filePath("conv"));
        ChatPage page(&m_controller, &store);
        page.show();
        QVERIFY(!m_controller.modelInfo().name.isEmpty());  // the page, created after the load, catches up
        GuiSpy deltas(&m_controller, &EngineController::chatDelta);
        QSignalSpy done(&page, &ChatPage::generationFinished);
        page.setThinking(false);
        page.setTemperature(0);
        page.setMaxTokens(40);
        page.sendMessage(QStringLiteral("Hello there"));
        QVERIFY(page.isGenerating());
        QVERIFY(done.wait(60000));
        const auto finish = done.first().first().value<ChatFinish>();
        QVERIFY2(finish.reason == QLatin1String("stop") || finish.reason == QLatin1String("length"), qPrintable(finish.reason + finish.error));
        QVERIFY(finish.completionTokens > 0);
        QVERIFY(finish.ttftSeconds > 0);
        qInfo("answer: %lld tokens in %lld deltas, TTFT %.1f ms, %.1f tok/s", finish.completionTokens,
              qint64(deltas.count()), finish.ttftSeconds * 1000, finish.tokensPerSecond);
        QVERIFY2(deltas.count() >= 2, "the answer should arrive in several pieces, not at the end");
        // Thinking off: the prompt ends <think></think>, so output is content unless the model itself
        // opens a block with a leading <think> (the glm45 parser's rule; random weights may do that).
        QString streamed, streamedReasoning;
        int tokens = 0;
        for (const auto& args : deltas) {
            const auto d = args.at(1).value<ChatDelta>();
            streamed += d.content;
            streamedReasoning += d.reasoning;
            tokens += d.tokens;
        }
        QCOMPARE(tokens, int(finish.completionTokens));
        QCOMPARE(page.messageCount(), 2);
        QVERIFY(!(streamed + streamedReasoning).isEmpty());
        QCOMPARE(page.conversation().messages.last().content, streamed);
        QCOMPARE(page.conversation().messages.last().reasoning, streamedReasoning);
        QCOMPARE(page.messageWidget(1)->content(), streamed);
        QVERIFY(page.conversation().messages.last().stats.contains(QStringLiteral("tok/s")));
        QVERIFY(!page.isGenerating());
    }

    void thinkingSplitsReasoning() {
        ConversationStore store(m_dir.filePath("conv2"));
        ChatPage page(&m_controller, &store);
        GuiSpy deltas(&m_controller, &EngineController::chatDelta);
        QSignalSpy done(&page, &ChatPage::generationFinished);
        page.setThinking(true);
        page.setTemperature(0);
        page.setMaxTokens(12);
        page.sendMessage(QStringLiteral("Think first"));
        QVERIFY(done.wait(60000));
        // The prompt ends inside <think>, so output is reasoning until a </think> (random weights are
        // unlikely to produce one in 12 tokens; either way nothing is lost between the two parts).
        QString reasoning, content;
        for (const auto& args : deltas) {
            reasoning += args.at(1).value<ChatDelta>().reasoning;
            content += args.at(1).value<ChatDelta>().content;
        }
        QVERIFY(!reasoning.isEmpty());
        QCOMPARE(page.conversation().messages.last().reasoning, reasoning);
        QCOMPARE(page.conversation().messages.last().content, content);
        ChatMessageWidget* w = page.messageWidget(1);
        QVERIFY(!w->reasoningExpanded());  // collapsed by default
        QCOMPARE(w->reasoning(), reasoning);
    }

    void stopRegenerateAndEdit() {
        ConversationStore store(m_dir.filePath("conv3"));
        {
            ChatPage page(&m_controller, &store);
                QSignalSpy done(&page, &ChatPage::generationFinished);
            GuiSpy deltas(&m_controller, &EngineController::chatDelta);
            page.setThinking(false);
            page.setTemperature(0.8);
            page.setMaxTokens(100000);  // would run for minutes: only Stop ends it
            page.sendMessage(QStringLiteral("first question"));
            QVERIFY(deltas.wait(60000));
            page.stop();
            QVERIFY(done.wait(30000));
            QCOMPARE(done.first().first().value<ChatFinish>().reason, QStringLiteral("abort"));
            QVERIFY(page.conversation().messages.last().stats.contains(QStringLiteral("stopped")));

            page.setMaxTokens(8);
            page.regenerate();
            QVERIFY(page.isGenerating());
            QVERIFY(done.wait(60000));
            QCOMPARE(page.messageCount(), 2);  // the old answer was replaced, not appended to
            QCOMPARE(page.conversation().messages[0].content, QStringLiteral("first question"));

            page.editMessage(0);
            QCOMPARE(page.messageCount(), 0);
            auto* input = page.findChild<QPlainTextEdit*>(QStringLiteral("chatInput"));
            QCOMPARE(input->toPlainText(), QStringLiteral("first question"));
            input->setPlainText(QStringLiteral("edited question"));
            page.send();
            QVERIFY(done.wait(60000));
            QCOMPARE(page.messageCount(), 2);
            QCOMPARE(page.conversation().messages[0].content, QStringLiteral("edited question"));
        }
        // Kept across restarts: a new page over the same store shows the conversation.
        ChatPage again(&m_controller, &store);
        QCOMPARE(again.messageCount(), 2);
        QCOMPARE(again.conversation().messages[0].content, QStringLiteral("edited question"));
        QCOMPARE(again.conversation().title, QStringLiteral("first question"));
    }

    void errorsAreShownNotHung() {
        EngineController empty;  // no model
        ConversationStore store(m_dir.filePath("conv4"));
        ChatPage page(&empty, &store);
        QSignalSpy done(&page, &ChatPage::generationFinished);
        page.sendMessage(QStringLiteral("anyone?"));
        QVERIFY(done.wait(5000));
        QCOMPARE(done.first().first().value<ChatFinish>().reason, QStringLiteral("error"));
        QVERIFY(page.conversation().messages.last().stats.startsWith(QStringLiteral("Error")));
        empty.shutdown();
    }

    void markdownCodeBlocks() {
        const QString md = QStringLiteral("Intro\n\n```cpp\nint main() {}\n```\n\ntext\n```\nplain\nlines\n```\n");
        QCOMPARE(ChatMessageWidget::codeBlocks(md), (QStringList{QStringLiteral("int main() {}"), QStringLiteral("plain\nlines")}));
        ChatMessageWidget w({QStringLiteral("assistant"), md, QString(), QString()});
        QVERIFY(w.body()->document()->toPlainText().contains(QStringLiteral("int main() {}")));
        QVERIFY(!w.body()->document()->toPlainText().contains(QStringLiteral("```")));  // rendered, not raw
        QCOMPARE(w.findChildren<QPushButton*>().size(), 2);
    }

private:
    QTemporaryDir m_dir;
    EngineController m_controller;
};

QTEST_MAIN(TestChatStreaming)
#include "test_chat_streaming.moc"
