// The server in-process with a scripted generation source: the response assembly for reasoning and
// tool calls (which random weights never produce), readiness, and the pure pieces (API key, Host
// check, CORS, context wording). Real sockets on loopback; the tokenizer and chat template come from
// the generated chat model (tests/fixtures/make_chat_model.py).
#include <QtTest>

#include <atomic>
#include <map>
#include <thread>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/auth.h"
#include "serve/server.h"
#include "serve/validation.h"
#include "server_process.h"

using namespace ts;
using namespace ts::serve;
using tstest::json;
using tstest::SseResult;

namespace {

// Emits `script` for every request, a few bytes per token event, on its own thread (like the engine).
class ScriptedSource final : public GenerationSource {
public:
    std::string script;
    std::vector<int32_t> lastPrompt;
    std::atomic<int> running{0};

    ~ScriptedSource() override {
        for (auto& t : m_threads) t.join();
    }
    int64_t submit(std::vector<int32_t> prompt, SamplingParams params, Callback cb) override {
        if (const std::string why = failure(); !why.empty()) fail(ErrorKind::DeviceLost, "the engine has stopped: " + why);
        const int64_t id = m_next++;
        lastPrompt = prompt;
        auto aborted = std::make_shared<std::atomic<bool>>(false);
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_aborted[id] = aborted;
        }
        ++running;
        const std::string text = script;
        const int64_t promptTokens = int64_t(prompt.size());
        m_threads.emplace_back([this, id, text, cb, aborted, promptTokens, params] {
            int64_t n = 0;
            for (size_t i = 0; i < text.size() && n < params.maxTokens; i += 3, ++n) {
                if (*aborted) break;
                EngineEvent e;
                e.requestId = id;
                e.token = 100 + int32_t(n % 50);
                e.logprob = -0.25f;
                e.text = text.substr(i, 3);
                cb(e);
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            EngineEvent f;
            f.type = EngineEvent::Type::Finished;
            f.requestId = id;
            f.reason = *aborted ? FinishReason::Abort : (n >= params.maxTokens ? FinishReason::Length : FinishReason::Stop);
            if (f.reason == FinishReason::Stop) f.stopToken = 6000;
            f.promptTokens = promptTokens;
            f.completionTokens = n;
            --running;
            cb(f);
        });
        return id;
    }
    bool abort(int64_t id) override {
        std::lock_guard<std::mutex> lock(m_mutex);
        auto it = m_aborted.find(id);
        if (it == m_aborted.end()) return false;
        *it->second = true;
        return true;
    }
    EngineMetrics metrics() const override {
        EngineMetrics m;
        m.running = running.load();
        return m;
    }
    std::string failure() const override {
        std::lock_guard<std::mutex> lock(m_mutex);
        return m_lost;
    }
    void setLost(std::string why) {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_lost = std::move(why);
    }

private:
    mutable std::mutex m_mutex;
    std::map<int64_t, std::shared_ptr<std::atomic<bool>>> m_aborted;
    std::string m_lost;  // failure(): a lost device, as Engine::deviceFailure
    std::vector<std::thread> m_threads;
    std::atomic<int64_t> m_next{1};
};

const json kTools = json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"Weather",
  "parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}},
  {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}])");

json userMessages() { return json::array({json{{"role", "user"}, {"content", "What is the weather in Paris?"}}}); }

}  // namespace

class TestServerAssembly : public QObject {
    Q_OBJECT

    std::unique_ptr<Tokenizer> m_tok;
    std::unique_ptr<ChatTemplate> m_tpl;
    ScriptedSource m_source;
    std::unique_ptr<HttpServer> m_server;
    std::unique_ptr<httplib::Client> m_client;

    json chat(json body, int expectStatus = 200) {
        auto r = m_client->Post("/v1/chat/completions", body.dump(), "application/json");
        if (!r) return json();
        if (r->status != expectStatus) qWarning("%d %s", r->status, r->body.c_str());
        [&] { QCOMPARE(r->status, expectStatus); }();
        return json::parse(r->body);
    }
    std::string lastPromptText() { return m_tok->decode(m_source.lastPrompt, false); }

private slots:
    void initTestCase() {
        const std::string dir = tstest::chatModelDir().toStdString();
        m_tok = std::make_unique<Tokenizer>(Tokenizer::fromDirectory(dir));
        m_tpl = std::make_unique<ChatTemplate>(ChatTemplate::fromModelDir(dir));
        ServerOptions o;
        o.port = 0;
        o.logRequests = false;
        m_server = std::make_unique<HttpServer>(o);
        m_server->start();
        m_client = std::make_unique<httplib::Client>("127.0.0.1", m_server->port());
        m_client->set_read_timeout(30, 0);
    }

    void healthIs503UntilReady() {
        auto r = m_client->Get("/health");
        QVERIFY(r);
        QCOMPARE(r->status, 503);
        json e = json::parse(r->body)["error"];
        QCOMPARE(e["message"], "Loading model");
        QCOMPARE(e["type"], "unavailable_error");
        QCOMPARE(m_client->Get("/v1/models")->status, 503);
        QCOMPARE(m_client->Post("/v1/chat/completions", "{}", "application/json")->status, 503);

        auto ctx = std::make_shared<ServeContext>();
        ctx->tokenizer = m_tok.get();
        ctx->chatTemplate = m_tpl.get();
        ctx->source = &m_source;
        ctx->maxModelLen = 4096;
        ctx->vocabSize = 6144;
        m_server->setReady(ctx);
        QCOMPARE(m_client->Get("/health")->status, 200);
    }

    // A lost device (Engine::deviceFailure): /health answers 503 with the reason, so a load balancer or a
    // supervisor sees it; a new generation request is refused with 503 and the reason; the rest still answers.
    void lostDeviceIsUnhealthy() {
        m_source.setLost("the GPU failed: CUDA: launch of k failed: an illegal memory access was encountered");
        auto h = m_client->Get("/health");
        QVERIFY(h);
        QCOMPARE(h->status, 503);
        const std::string msg = json::parse(h->body)["error"]["message"];
        QVERIFY2(msg.rfind("The engine stopped: the GPU failed", 0) == 0, msg.c_str());
        auto r = m_client->Post("/v1/chat/completions", json{{"messages", userMessages()}}.dump(), "application/json");
        QVERIFY(r);
        QCOMPARE(r->status, 503);
        QVERIFY2(r->body.find("illegal memory access") != std::string::npos, r->body.c_str());
        QCOMPARE(m_client->Get("/v1/models")->status, 200);
        m_source.setLost({});
        QCOMPARE(m_client->Get("/health")->status, 200);
    }

    void reasoningSplit() {
        m_source.script = "Let me think.</think>The answer.";
        json j = chat(json{{"messages", userMessages()}});
        const json& m = j["choices"][0]["message"];
        QCOMPARE(m["reasoning_content"], "Let me think.");
        QCOMPARE(m["reasoning"], "Let me think.");
        QCOMPARE(m["content"], "The answer.");
        QCOMPARE(j["choices"][0]["finish_reason"], "stop");
        QCOMPARE(j["choices"][0]["stop_reason"].get<int>(), 6000);
        QVERIFY(lastPromptText().size() > 7 && lastPromptText().substr(lastPromptText().size() - 7) == "<think>");
    }

    void reasoningStreamed() {
        m_source.script = "Let me think.</think>The answer.";
        SseResult s = tstest::postStream(*m_client, "/v1/chat/completions", json{{"messages", userMessages()}, {"stream", true}});
        QCOMPARE(s.status, 200);
        std::string reasoning, content;
        for (size_t i = 0; i + 1 < s.data.size(); ++i) {
            json d = json::parse(s.data[i])["choices"][0]["delta"];
            if (d.contains("reasoning")) {
                QCOMPARE(d["reasoning"], d["reasoning_content"]);
                reasoning += d["reasoning"].get<std::string>();
            }
            if (d.contains("content")) content += d["content"].get<std::string>();
        }
        QCOMPARE(reasoning, std::string("Let me think."));
        QCOMPARE(content, std::string("The answer."));
    }

    void toolCallAuto() {
        m_source.script = "Weather needed.</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
                          "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>";
        json j = chat(json{{"messages", userMessages()}, {"tools", kTools}});
        const json& c = j["choices"][0];
        QCOMPARE(c["finish_reason"], "tool_calls");
        QVERIFY(c["message"]["content"].is_null());
        QCOMPARE(c["message"]["tool_calls"].size(), size_t(1));
        const json& call = c["message"]["tool_calls"][0];
        QCOMPARE(call["type"], "function");
        QVERIFY(call["id"].get<std::string>().size() > 5);
        QCOMPARE(call["function"]["name"], "get_weather");
        QCOMPARE(json::parse(call["function"]["arguments"].get<std::string>()), json::parse(R"({"city":"Paris","days":2})"));
        // the tools were rendered into the prompt
        QVERIFY(lastPromptText().find("get_weather") != std::string::npos);
    }

    void toolCallStreamed() {
        m_source.script = "x</think><tool_call>get_time</tool_call>";
        SseResult s = tstest::postStream(*m_client, "/v1/chat/completions",
                                         json{{"messages", userMessages()}, {"tools", kTools}, {"stream", true}});
        int calls = 0;
        std::string finish;
        for (size_t i = 0; i + 1 < s.data.size(); ++i) {
            const json ch = json::parse(s.data[i])["choices"][0];
            if (ch["delta"].contains("tool_calls")) {
                const json& tc = ch["delta"]["tool_calls"][0];
                QCOMPARE(tc["index"].get<int>(), 0);
                QCOMPARE(tc["type"], "function");
                QCOMPARE(tc["function"]["name"], "get_time");
                QCOMPARE(tc["function"]["arguments"], "{}");
                ++calls;
            }
            if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
        }
        QCOMPARE(calls, 1);
        QCOMPARE(finish, std::string("tool_calls"));
    }

    void toolChoiceNoneKeepsText() {
        m_source.script = "x</think><tool_call>get_time</tool_call>";
        json j = chat(json{{"messages", userMessages()}, {"tools", kTools}, {"tool_choice", "none"}});
        QVERIFY(j["choices"][0]["message"]["tool_calls"].empty());
        QVERIFY(j["choices"][0]["message"]["content"].get<std::string>().find("<tool_call>get_time") != std::string::npos);
        QCOMPARE(j["choices"][0]["finish_reason"], "stop");
    }

    void toolChoiceRequiredSteersAndEnforces() {
        m_source.script = "get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value></tool_call>";
        json j = chat(json{{"messages", userMessages()}, {"tools", kTools}, {"tool_choice", "required"}});
        const std::string p = lastPromptText();
        QVERIFY2(p.size() > 26 && p.substr(p.size() - 26) == "<think></think><tool_call>", p.c_str());
        QCOMPARE(j["choices"][0]["finish_reason"], "tool_calls");
        QCOMPARE(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
        QVERIFY(j["choices"][0]["message"]["reasoning_content"].is_null());
        // output that is no call violates the choice: an error, never a silent plain answer
        m_source.script = "I refuse to call tools.";
        json e = chat(json{{"messages", userMessages()}, {"tools", kTools}, {"tool_choice", "required"}}, 500);
        QCOMPARE(e["error"]["type"], "server_error");
        QVERIFY(e["error"]["message"].get<std::string>().find("tool_choice") != std::string::npos);
        SseResult s = tstest::postStream(*m_client, "/v1/chat/completions",
                                         json{{"messages", userMessages()}, {"tools", kTools}, {"tool_choice", "required"},
                                              {"stream", true}});
        QCOMPARE(s.data.back(), std::string("[DONE]"));
        QVERIFY(json::parse(s.data[s.data.size() - 2]).contains("error"));
        // the text the parser held is not streamed before the error: it begins with our own prefill
        for (const std::string& d : s.data) QVERIFY2(d.find("<tool_call>") == std::string::npos, d.c_str());
    }

    void toolChoiceNamed() {
        m_source.script = "<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>";
        json tc = json{{"type", "function"}, {"function", {{"name", "get_weather"}}}};
        json j = chat(json{{"messages", userMessages()}, {"tools", kTools}, {"tool_choice", tc}});
        const std::string p = lastPromptText();
        QVERIFY2(p.size() > 22 && p.substr(p.size() - 22) == "<tool_call>get_weather", p.c_str());
        QCOMPARE(j["choices"][0]["finish_reason"], "stop");
        const json& call = j["choices"][0]["message"]["tool_calls"][0];
        QCOMPARE(call["function"]["name"], "get_weather");
        QCOMPARE(json::parse(call["function"]["arguments"].get<std::string>())["city"], "Oslo");
    }

    void parallelToolCallsOff() {
        m_source.script = "x</think><tool_call>get_time</tool_call><tool_call>get_weather<arg_key>city</arg_key>"
                          "<arg_value>Rome</arg_value></tool_call>";
        json j = chat(json{{"messages", userMessages()}, {"tools", kTools}});
        QCOMPARE(j["choices"][0]["message"]["tool_calls"].size(), size_t(2));
        j = chat(json{{"messages", userMessages()}, {"tools", kTools}, {"parallel_tool_calls", false}});
        QCOMPARE(j["choices"][0]["message"]["tool_calls"].size(), size_t(1));
    }

    void historyWithReasoningAndTools() {
        // assistant history may carry `reasoning` (vLLM's new name) and tool calls with string arguments
        m_source.script = "ok</think>done";
        json msgs = json::parse(R"([{"role":"user","content":"hi"},
            {"role":"assistant","content":null,"reasoning":"prior thought",
             "tool_calls":[{"id":"c1","type":"function","function":{"name":"get_time","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"12:00"},
            {"role":"user","content":"thanks"}])");
        json j = chat(json{{"messages", msgs}, {"tools", kTools}, {"chat_template_kwargs", {{"clear_thinking", false}}}});
        QCOMPARE(j["choices"][0]["message"]["content"], "done");
        const std::string p = lastPromptText();
        QVERIFY(p.find("<tool_call>get_time</tool_call>") != std::string::npos);
        QVERIFY(p.find("<|observation|><tool_response>12:00</tool_response>") != std::string::npos);
        QVERIFY(p.find("prior thought") != std::string::npos);  // clear_thinking false keeps past reasoning
    }

    // ---- pure pieces
    void apiKey() {
        ApiKey k("secret");
        QVERIFY(k.accepts("Bearer secret"));
        QVERIFY(k.accepts("bearer secret"));
        QVERIFY(!k.accepts("Bearer secreT"));
        QVERIFY(!k.accepts("Bearer secret2"));
        QVERIFY(!k.accepts("Bearer "));
        QVERIFY(!k.accepts("secret"));
        QVERIFY(!k.accepts(""));
        QVERIFY(ApiKey("").accepts(""));
    }

    void hostAndOrigin() {
        for (const char* ok : {"localhost", "localhost:8888", "127.0.0.1", "127.0.0.1:1", "[::1]:8888", "LOCALHOST"})
            QVERIFY2(isLoopbackHostHeader(ok), ok);
        for (const char* bad : {"evil.example", "127.0.0.1.evil.example", "localhost.evil", "0x7f000001", "[::2]", ""})
            QVERIFY2(!isLoopbackHostHeader(bad), bad);
        QVERIFY(isLoopbackAddress("127.0.0.1"));
        QVERIFY(!isLoopbackAddress("0.0.0.0"));
        CorsPolicy cors({"http://localhost:3000"});
        QVERIFY(cors.allow("http://localhost:3000"));
        QVERIFY(!cors.allow("http://localhost:3001"));
        QVERIFY(!CorsPolicy().allow("http://localhost:3000"));
        // Preflight headers: what the official JS client asks for is allowed, malformed names are left out.
        QCOMPARE(corsAllowHeaders(""), std::string("authorization, content-type"));
        QCOMPARE(corsAllowHeaders("Authorization, Content-Type, X-Stainless-OS,x-stainless-lang , x-stainless-os"),
                 std::string("authorization, content-type, x-stainless-os, x-stainless-lang"));
        QCOMPARE(corsAllowHeaders("bad name, (x), " + std::string(65, 'a') + ",,x-ok"),
                 std::string("authorization, content-type, x-ok"));
        std::string many;
        for (int i = 0; i < 100; ++i) many += "x-" + std::to_string(i) + ",";
        const std::string capped = corsAllowHeaders(many);
        QVERIFY(capped.find("x-63") != std::string::npos && capped.find("x-64") == std::string::npos);
    }

    void contextWording() {
        QCOMPARE(resolveMaxTokens(10, std::nullopt, 100), 90);
        QCOMPARE(resolveMaxTokens(10, 90, 100), 90);
        try {
            resolveMaxTokens(52189, 16384, 65536);
            QFAIL("no error");
        } catch (const ApiError& e) {
            QCOMPARE(e.status(), 400);
            QCOMPARE(std::string(e.what()),
                     std::string("This model's maximum context length is 65536 tokens. However, you requested 68573 "
                                 "tokens (52189 in the messages, 16384 in the completion). Please reduce the length of "
                                 "the messages or completion."));
        }
        try {
            resolveMaxTokens(100, std::nullopt, 100);
            QFAIL("no error");
        } catch (const ApiError& e) {
            QCOMPARE(std::string(e.what()), std::string("This model's maximum context length is 100 tokens. However, your "
                                                        "request has 100 input tokens. Please reduce the length of the "
                                                        "input messages."));
        }
        ServerLimits lim;
        QVERIFY_THROWS_EXCEPTION(ApiError, parseBody(std::string(65, '[') + std::string(65, ']'), lim));
        // brackets inside strings do not count as nesting
        const std::string inString = "{\"a\":\"" + std::string(72, '[') + "\"}";
        QCOMPARE(parseBody(inString, lim)["a"].get<std::string>().size(), size_t(72));
    }

    void cleanupTestCase() {
        m_server->shutdown();
        QCOMPARE(m_source.running.load(), 0);
    }
};

QTEST_GUILESS_MAIN(TestServerAssembly)
#include "test_server_assembly.moc"
