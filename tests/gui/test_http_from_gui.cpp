// One engine, two front doors: with the GUI running, the Server page switches the in-process HTTP
// server on, and a real HTTP client (cpp-httplib, on its own thread) gets /health, /v1/models and a
// chat completion from the same engine the chat page uses — while the GUI event loop keeps running.
// Switching it off closes the port; unloading the model stops it first.
#include <QtTest>

#include "gui_spy.h"

#include <QCheckBox>
#include <QTemporaryDir>

#include <atomic>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "ui/api_server.h"
#include "ui/engine_controller.h"
#include "ui/server_page.h"

using namespace ts::ui;

class TestHttpFromGui final : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    void apiServesWhileGuiRuns() {
        EngineController controller;
        controller.setApiServer(makeApiServer());
        QVERIFY(controller.hasApiServer());
        ServerPage page(&controller);
        page.show();
        page.setModelPath(QStringLiteral(TS_GUI_CHAT_MODEL));
        GuiSpy loaded(&controller, &EngineController::modelLoaded);
        page.loadModel();
        QVERIFY(loaded.wait(60000));

        GuiSpy http(&controller, &EngineController::httpStateChanged);
        page.setHttpDefaults(QStringLiteral("127.0.0.1"), 0, QStringLiteral("test-key-0123456789"));  // 0: any free port
        page.setHttpEnabled(true);
        QVERIFY(http.wait(10000));
        QVERIFY2(http.first().at(0).toBool(), qPrintable(http.first().at(2).toString()));
        const QUrl base(http.first().at(1).toString());
        QCOMPARE(base.path(), QStringLiteral("/v1"));
        QVERIFY(base.port() > 0);
        QVERIFY(page.findChild<QCheckBox*>(QStringLiteral("httpOn"))->isChecked());
        QVERIFY(page.curlExample().contains(base.toString() + QStringLiteral("/chat/completions")));
        QVERIFY(page.curlExample().contains(QStringLiteral("Authorization: Bearer")));

        // The client runs on its own thread; the GUI thread keeps spinning its event loop meanwhile.
        std::atomic<bool> done{false};
        int healthStatus = 0, modelsStatus = 0, noKeyStatus = 0, chatStatus = 0;
        std::string modelsBody, chatBody;
        std::thread client([&] {
            httplib::Client c("127.0.0.1", base.port());
            c.set_read_timeout(60, 0);
            if (auto r = c.Get("/health")) healthStatus = r->status;
            if (auto r = c.Get("/v1/models", {{"Authorization", "Bearer test-key-0123456789"}})) {
                modelsStatus = r->status;
                modelsBody = r->body;
            }
            const std::string body = R"({"model":"GLM-5.3-Flash-EXL3","max_tokens":6,"temperature":0,
                "messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false}})";
            if (auto r = c.Post("/v1/chat/completions", body, "application/json")) noKeyStatus = r->status;
            if (auto r = c.Post("/v1/chat/completions", {{"Authorization", "Bearer test-key-0123456789"}}, body,
                                "application/json")) {
                chatStatus = r->status;
                chatBody = r->body;
            }
            done = true;
        });
        QTRY_VERIFY_WITH_TIMEOUT(done.load(), 90000);
        client.join();
        QCOMPARE(healthStatus, 200);
        QCOMPARE(modelsStatus, 200);
        QVERIFY(modelsBody.find("GLM-5.3-Flash-EXL3") != std::string::npos);
        QCOMPARE(noKeyStatus, 401);
        QCOMPARE(chatStatus, 200);
        const auto j = nlohmann::json::parse(chatBody);
        QCOMPARE(j["object"].get<std::string>(), std::string("chat.completion"));
        QVERIFY(j["usage"]["completion_tokens"].get<int>() > 0);

        // Off: the port closes.
        http.clear();
        page.setHttpEnabled(false);
        QVERIFY(http.wait(10000));
        QVERIFY(!http.first().at(0).toBool());
        httplib::Client c("127.0.0.1", base.port());
        c.set_connection_timeout(1, 0);
        QVERIFY(!c.Get("/health"));

        // On again, then unload: the server stops before the engine goes away.
        http.clear();
        page.setHttpEnabled(true);
        QVERIFY(http.wait(10000));
        QVERIFY(http.first().at(0).toBool());
        http.clear();
        GuiSpy unloaded(&controller, &EngineController::modelUnloaded);
        page.unloadModel();
        QVERIFY(unloaded.wait(30000));
        QVERIFY(!http.isEmpty());
        QVERIFY(!http.last().at(0).toBool());
        controller.shutdown();
    }
};

QTEST_MAIN(TestHttpFromGui)
#include "test_http_from_gui.moc"
