// The real `twinspark-cli serve` over real sockets (loopback only), with the random-weight chat model of
// tests/fixtures/make_chat_model.py: endpoints, OpenAI error JSON and statuses, auth, CORS, Host check,
// limits, SSE framing, client disconnect -> abort (KV blocks back in the pool), bad input of
// style_and_reliability.md §B5 (the server keeps serving after each), graceful SIGTERM.
// The weights are random: assertions are about protocol, never about the text.
#include <QtTest>

#include <thread>

#include "server_process.h"
#include "serve/handlers.h"

using namespace tstest;

namespace {

const char* kKey = "test-key-0123456789";
const httplib::Headers kAuth = {{"Authorization", std::string("Bearer ") + kKey}};

// ignore_eos (vLLM's extension): the fixture's random weights may sample an eos token at any step, and
// the tests count tokens exactly.
json chatBody(const std::string& text = "Hello", int maxTokens = 8) {
    return json{{"model", "GLM-5.3-Flash-EXL3"},
                {"messages", json::array({json{{"role", "user"}, {"content", text}}})},
                {"max_tokens", maxTokens},
                {"ignore_eos", true}};
}

double metric(const std::string& text, const std::string& name) {
    // First sample line of `name` (with labels); -1 if absent.
    size_t pos = 0;
    while ((pos = text.find(name, pos)) != std::string::npos) {
        const bool lineStart = pos == 0 || text[pos - 1] == '\n';
        const size_t after = pos + name.size();
        if (lineStart && after < text.size() && (text[after] == '{' || text[after] == ' ')) {
            const size_t sp = text.find(' ', text.find('}', after) == std::string::npos ? after : text.find('}', after));
            return std::stod(text.substr(sp + 1, text.find('\n', sp) - sp - 1));
        }
        pos = after;
    }
    return -1;
}

double abortCount(const std::string& text) {
    const std::string key = "finished_reason=\"abort\"} ";
    const size_t p = text.find(key);
    return p == std::string::npos ? -1 : std::stod(text.substr(p + key.size()));
}

void addBadParameterRows();

}  // namespace

class TestServer : public QObject {
    Q_OBJECT

    ServerProcess m_srv;

    httplib::Result post(const std::string& path, const json& body, httplib::Headers h = kAuth) {
        return m_srv.client().Post(path.c_str(), h, body.dump(), "application/json");
    }
    json postJson(const std::string& path, const json& body, int expectStatus) {
        auto r = post(path, body);
        if (!r) return json();
        if (r->status != expectStatus) qWarning("status %d body %s", r->status, r->body.c_str());
        [&] { QCOMPARE(r->status, expectStatus); }();
        return json::parse(r->body);
    }
    // 400 with an OpenAI error body; returns the error object.
    json expectError(const std::string& path, const std::string& body, int status = 400) {
        auto r = m_srv.client().Post(path.c_str(), kAuth, body, "application/json");
        if (!r) return json();
        if (r->status != status) qWarning("expected %d, got %d: %s (body %s)", status, r->status, r->body.c_str(), body.substr(0, 200).c_str());
        [&] { QCOMPARE(r->status, status); }();
        json j = json::parse(r->body, nullptr, false);
        [&] {
            QVERIFY(j.is_object() && j.contains("error"));
            QVERIFY(j["error"]["message"].is_string());
            QVERIFY(j["error"]["type"].is_string());
            QCOMPARE(j["error"]["code"].get<int>(), status);
        }();
        if (!j.is_object() || !j.contains("error") || !j["error"].is_object())
            return json{{"message", ""}, {"param", nullptr}};
        return j["error"];
    }
    std::string metricsText() {
        auto r = m_srv.client().Get("/metrics", kAuth);
        return r && r->status == 200 ? r->body : std::string();
    }
    // The engine publishes its gauges (running, waiting, KV usage, free blocks) after each step, so an
    // abort that leaves it idle is only visible after the next step: a 1-token request provides one.
    // True when, within `ms`, nothing runs or waits and every KV block is free again.
    bool waitIdle(int ms) {
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < ms) {
            auto c = m_srv.clientPtr();
            c->Post("/v1/completions", kAuth, R"({"prompt":"x","max_tokens":1})", "application/json");
            const std::string m = metricsText();
            if (metric(m, "vllm:num_requests_running") == 0 && metric(m, "vllm:num_requests_waiting") == 0 &&
                metric(m, "vllm:kv_cache_usage_perc") == 0 &&
                metric(m, "twinspark:kv_cache_free_blocks") == metric(m, "twinspark:kv_cache_blocks"))
                return true;
            QThread::msleep(50);
        }
        return false;
    }
    // Polls until the engine has counted `target` aborted requests (it counts them as it aborts).
    bool waitAborts(double target, int ms) {
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < ms) {
            if (abortCount(metricsText()) >= target) return true;
            QThread::msleep(20);
        }
        return false;
    }

    // After a client left: its request was aborted within 2 s of it (long before its 1,900 tokens), nothing more
    // is generated, and its blocks are back in the pool.
    void expectAbortedAndIdle(double abortsBefore) {
        QVERIFY2(waitAborts(abortsBefore + 1, 2000), metricsText().c_str());
        const double generated = metric(metricsText(), "vllm:generation_tokens_total");
        QThread::msleep(300);
        QCOMPARE(metric(metricsText(), "vllm:generation_tokens_total"), generated);  // nothing more was generated
        QVERIFY2(waitIdle(5000), metricsText().c_str());
        QCOMPARE(abortCount(metricsText()), abortsBefore + 1);
    }

private slots:
    void initTestCase() {
        QVERIFY2(m_srv.start({"--api-key", kKey, "--cors-origins", "http://localhost:3000",
                              "--max-concurrent-requests", "6", "--max-num-seqs", "4"}),
                 qPrintable(m_srv.log()));
    }

    void cleanupTestCase() {
        QCOMPARE(m_srv.stop(), 0);
    }

    // ---- endpoints
    void healthIsPublic() {
        auto r = m_srv.client().Get("/health");
        QVERIFY(r);
        QCOMPARE(r->status, 200);
    }

    void models() {
        auto r = m_srv.client().Get("/v1/models", kAuth);
        QVERIFY(r);
        QCOMPARE(r->status, 200);
        json j = json::parse(r->body);
        QCOMPARE(j["object"], "list");
        QCOMPARE(j["data"][0]["id"], "GLM-5.3-Flash-EXL3");
        QCOMPARE(j["data"][0]["max_model_len"].get<int>(), 2048);
        QVERIFY(j["data"][0]["owned_by"].is_string());
        QVERIFY(j["data"][0]["created"].is_number_integer());
    }

    void chatNonStreaming() {
        json j = postJson("/v1/chat/completions", chatBody("Hello", 6), 200);
        QCOMPARE(j["object"], "chat.completion");
        QVERIFY(j["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
        QCOMPARE(j["model"], "GLM-5.3-Flash-EXL3");
        QCOMPARE(j["choices"].size(), size_t(1));
        const json& m = j["choices"][0]["message"];
        QCOMPARE(m["role"], "assistant");
        // thinking is on by default: output is reasoning, under both names
        QCOMPARE(m["reasoning"], m["reasoning_content"]);
        QVERIFY(m.contains("tool_calls") && m["tool_calls"].is_array());
        QCOMPARE(j["usage"]["completion_tokens"].get<int>(), 6);
        QCOMPARE(j["usage"]["total_tokens"].get<int>(),
                 j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
        QCOMPARE(j["choices"][0]["finish_reason"], "length");
    }

    void chatThinkingOffGivesContent() {
        json b = chatBody("Hello", 5);
        b["chat_template_kwargs"] = {{"enable_thinking", false}};
        json j = postJson("/v1/chat/completions", b, 200);
        QVERIFY(j["choices"][0]["message"]["reasoning_content"].is_null());
        QVERIFY(j["choices"][0]["message"]["content"].is_string());
        // the rendered prompt ends with an empty, closed think block
        json t = postJson("/tokenize", json{{"messages", b["messages"]}, {"chat_template_kwargs", b["chat_template_kwargs"]}}, 200);
        json d = postJson("/detokenize", json{{"tokens", t["tokens"]}}, 200);
        const std::string prompt = d["prompt"];
        QVERIFY2(prompt.size() > 15 && prompt.substr(prompt.size() - 15) == "<think></think>", prompt.c_str());
    }

    void chatNAndLogprobs() {
        json b = chatBody("Hi", 4);
        b["n"] = 3;
        b["logprobs"] = true;
        b["top_logprobs"] = 3;
        json j = postJson("/v1/chat/completions", b, 200);
        QCOMPARE(j["choices"].size(), size_t(3));
        for (int i = 0; i < 3; ++i) {
            const json& c = j["choices"][size_t(i)];
            QCOMPARE(c["index"].get<int>(), i);
            const json& lp = c["logprobs"]["content"];
            QCOMPARE(lp.size(), size_t(4));
            for (const auto& e : lp) {
                QVERIFY(e["logprob"].get<double>() <= 0.0);
                QCOMPARE(e["top_logprobs"].size(), size_t(3));
                QVERIFY(e["bytes"].is_array());
            }
        }
        QCOMPARE(j["usage"]["completion_tokens"].get<int>(), 12);
    }

    void seedReproducible() {
        json b = chatBody("Seeded", 8);
        b["seed"] = 1234;
        b["temperature"] = 1.0;
        json a = postJson("/v1/chat/completions", b, 200), c = postJson("/v1/chat/completions", b, 200);
        QCOMPARE(a["choices"][0]["message"].dump(), c["choices"][0]["message"].dump());
    }

    // OpenAI's newer spellings reach the template: `developer` is the system role, top-level reasoning_effort
    // is the template's variable (chat_template_kwargs' own wins).
    void developerRoleAndReasoningEffort() {
        auto render = [&](const json& extra) {
            json b = {{"messages", json::array({json{{"role", "system"}, {"content", "be terse"}},
                                                json{{"role", "user"}, {"content", "hi"}}})}};
            for (auto& [k, v] : extra.items()) b[k] = v;
            const json t = postJson("/tokenize", b, 200);
            return postJson("/detokenize", json{{"tokens", t["tokens"]}}, 200)["prompt"].get<std::string>();
        };
        // The test model's template, as GLM-5.3-Flash's, knows no `developer` role.
        const std::string system = render(json::object());
        QVERIFY2(system.find("be terse") != std::string::npos, system.c_str());
        json asDeveloper = {{"role", "developer"}, {"content", "be terse"}};
        json dev = {{"messages", json::array({asDeveloper, json{{"role", "user"}, {"content", "hi"}}})}};
        const json t = postJson("/tokenize", dev, 200);
        QCOMPARE(postJson("/detokenize", json{{"tokens", t["tokens"]}}, 200)["prompt"].get<std::string>(), system);
        QVERIFY2(system.find("Reasoning Effort") == std::string::npos, system.c_str());
        const std::string low = render(json{{"reasoning_effort", "low"}});
        QVERIFY2(low.find("Reasoning Effort: Low") != std::string::npos, low.c_str());
        const std::string high = render(json{{"reasoning_effort", "low"},
                                             {"chat_template_kwargs", json{{"reasoning_effort", "high"}}}});
        QVERIFY2(high.find("Reasoning Effort: High") != std::string::npos && high.find("Low") == std::string::npos,
                 high.c_str());
        json e = expectError("/v1/chat/completions",
                             R"({"messages":[{"role":"user","content":"x"}],"reasoning_effort":"extreme"})");
        QCOMPARE(e["param"], "reasoning_effort");
    }

    // GET /v1/models/{id}: the card of the served model, 404 for another name (as a request naming it).
    void retrieveModel() {
        auto r = m_srv.client().Get("/v1/models/GLM-5.3-Flash-EXL3", kAuth);
        QVERIFY(r);
        QCOMPARE(r->status, 200);
        const json j = json::parse(r->body);
        QCOMPARE(j["id"], "GLM-5.3-Flash-EXL3");
        QCOMPARE(j["object"], "model");
        r = m_srv.client().Get("/v1/models/gpt-4", kAuth);
        QVERIFY(r);
        QCOMPARE(r->status, 404);
        QCOMPARE(json::parse(r->body)["error"]["param"], "model");
        r = m_srv.client().Get("/v1/models/GLM-5.3-Flash-EXL3");  // the key is still required
        QCOMPARE(r->status, 401);
        json e = expectError("/v1/chat/completions", R"({"model":"gpt-4","messages":[{"role":"user","content":"x"}]})", 404);
        QCOMPARE(e["param"], "model");
        e = expectError("/v1/completions", R"({"model":"gpt-4","prompt":"x"})", 404);
        e = expectError("/tokenize", R"({"model":"gpt-4","prompt":"x"})", 404);
    }

    void maxCompletionTokens() {
        json b = chatBody("x", 100);
        b.erase("max_tokens");
        b["max_completion_tokens"] = 3;
        json j = postJson("/v1/chat/completions", b, 200);
        QCOMPARE(j["usage"]["completion_tokens"].get<int>(), 3);
    }

    void chatStreamingFraming() {
        json b = chatBody("Stream", 6);
        b["stream"] = true;
        b["stream_options"] = {{"include_usage", true}};
        b["n"] = 2;
        SseResult s = postStream(m_srv.client(), "/v1/chat/completions", b, kAuth);
        QVERIFY(s.ok);
        QCOMPARE(s.status, 200);
        QVERIFY(s.data.size() >= 5);
        QCOMPARE(s.data.back(), std::string("[DONE]"));
        std::string id;
        bool sawRole[2] = {false, false};
        int finishes = 0;
        for (size_t i = 0; i + 1 < s.data.size(); ++i) {
            json c = json::parse(s.data[i]);
            QCOMPARE(c["object"], "chat.completion.chunk");
            if (id.empty()) id = c["id"];
            QCOMPARE(c["id"].get<std::string>(), id);
            if (i + 2 == s.data.size()) {  // the usage chunk
                QVERIFY(c["choices"].empty());
                QCOMPARE(c["usage"]["completion_tokens"].get<int>(), 12);
                continue;
            }
            QCOMPARE(c["choices"].size(), size_t(1));
            const json& ch = c["choices"][0];
            const int idx = ch["index"];
            QVERIFY(idx == 0 || idx == 1);
            if (!sawRole[idx]) {
                QCOMPARE(ch["delta"]["role"], "assistant");  // the first delta of each choice carries the role
                sawRole[idx] = true;
            } else {
                QVERIFY(!ch["delta"].contains("role"));
            }
            if (!ch["finish_reason"].is_null()) {
                ++finishes;
                QVERIFY(!ch["delta"].contains("content"));  // the finish chunk has no content key
            }
        }
        QCOMPARE(finishes, 2);
    }

    void streamWithoutUsageHasNoUsageChunk() {
        json b = chatBody("x", 3);
        b["stream"] = true;
        SseResult s = postStream(m_srv.client(), "/v1/chat/completions", b, kAuth);
        QCOMPARE(s.status, 200);
        for (size_t i = 0; i + 1 < s.data.size(); ++i) QVERIFY(!json::parse(s.data[i]).contains("usage"));
    }

    void completions() {
        json j = postJson("/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 5}, {"ignore_eos", true}}, 200);
        QCOMPARE(j["object"], "text_completion");
        QCOMPARE(j["choices"][0]["finish_reason"], "length");
        // list of prompts x n: indices prompt*n+j
        j = postJson("/v1/completions", json{{"prompt", json::array({"a", "b"})}, {"n", 2}, {"max_tokens", 2}}, 200);
        QCOMPARE(j["choices"].size(), size_t(4));
        for (int i = 0; i < 4; ++i) QCOMPARE(j["choices"][size_t(i)]["index"].get<int>(), i);
        // token ids, echo
        json t = postJson("/tokenize", json{{"prompt", "Echo me"}}, 200);
        j = postJson("/v1/completions", json{{"prompt", t["tokens"]}, {"echo", true}, {"max_tokens", 2}}, 200);
        QVERIFY(j["choices"][0]["text"].get<std::string>().rfind("Echo me", 0) == 0);
        // logprobs shape
        j = postJson("/v1/completions", json{{"prompt", "x"}, {"logprobs", 2}, {"max_tokens", 4}, {"ignore_eos", true}}, 200);
        const json& lp = j["choices"][0]["logprobs"];
        QCOMPARE(lp["tokens"].size(), size_t(4));
        QCOMPARE(lp["token_logprobs"].size(), size_t(4));
        QCOMPARE(lp["top_logprobs"].size(), size_t(4));
        QCOMPARE(lp["text_offset"].size(), size_t(4));
        // stream
        SseResult s = postStream(m_srv.client(), "/v1/completions",
                                 json{{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}, {"ignore_eos", true},
                                      {"stream_options", {{"include_usage", true}}}},
                                 kAuth);
        QCOMPARE(s.data.back(), std::string("[DONE]"));
        json usage = json::parse(s.data[s.data.size() - 2]);
        QCOMPARE(usage["usage"]["completion_tokens"].get<int>(), 3);
    }

    void tokenizeRoundTrip() {
        json t = postJson("/tokenize", json{{"prompt", "Hello wörld"}}, 200);
        QVERIFY(t["count"].get<int>() > 0);
        QCOMPARE(t["count"].get<size_t>(), t["tokens"].size());
        json d = postJson("/detokenize", json{{"tokens", t["tokens"]}}, 200);
        QCOMPARE(d["prompt"], "Hello wörld");
        expectError("/detokenize", R"({"tokens":[99999999]})");
    }

    void metricsNames() {
        const std::string m = metricsText();
        for (const char* n : {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                              "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                              "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                              "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_count",
                              "vllm:request_success_total", "twinspark:cuda_graph_replays_total",
                              "twinspark:cuda_graph_captures_total"})
            QVERIFY2(m.find(n) != std::string::npos, n);
        QVERIFY(metric(m, "vllm:generation_tokens_total") > 0);
        QCOMPARE(metric(m, "twinspark:cuda_graph_replays_total"), 0.0);  // the CPU backend has no graphs
        // ... and no device memory: the gauges are a GPU's only.
        QVERIFY2(m.find("twinspark:device_memory") == std::string::npos, m.c_str());
    }

    void metricsOfAGpusMemory() {
        // What a GB10 reports (the exposition on its own: no GPU here). Free is the system's MemAvailable.
        ts::EngineMetrics em;
        em.deviceMemoryTotal = int64_t(130663890944);
        em.deviceMemoryFree = int64_t(4) << 30;
        em.deviceMemoryUnified = true;
        ts::serve::ServerCounters counters;
        ts::serve::ServeContext ctx;
        ts::serve::ServerOptions options;
        options.servedModelName = "GLM-5.3-Flash-EXL3";
        const std::string m = ts::serve::metricsText(em, counters, ctx, options);
        QCOMPARE(metric(m, "twinspark:device_memory_total_bytes"), 130663890944.0);
        QCOMPARE(metric(m, "twinspark:device_memory_free_bytes"), double(int64_t(4) << 30));
        QCOMPARE(metric(m, "twinspark:device_memory_unified"), 1.0);
        QVERIFY2(m.find("# TYPE twinspark:device_memory_free_bytes gauge") != std::string::npos, m.c_str());
    }

    // ---- auth (B5 #18, #19, #22)
    void auth() {
        for (const char* p : {"/v1/models", "/metrics", "/nonexistent", "//v1/models", "/v1/models/", "/V1/MODELS"}) {
            auto r = m_srv.client().Get(p);
            QVERIFY(r);
            QCOMPARE(r->status, 401);
            QCOMPARE(json::parse(r->body)["error"]["type"], "authentication_error");
        }
        auto r = post("/v1/chat/completions", chatBody(), {});
        QCOMPARE(r->status, 401);
        std::string wrong = kKey;
        wrong.back() = wrong.back() == 'x' ? 'y' : 'x';  // differs in the last byte only
        for (const std::string& h : {std::string("Bearer ") + wrong, std::string("Bearer "), std::string(kKey),
                                     std::string("Basic ") + kKey}) {
            r = post("/v1/chat/completions", chatBody(), {{"Authorization", h}});
            QCOMPARE(r->status, 401);
        }
        r = m_srv.client().Get("/v1/models", {{"Authorization", std::string("bearer ") + kKey}});
        QCOMPARE(r->status, 200);
        // unknown paths are 404 only after authentication
        r = m_srv.client().Get("/v1/../admin", kAuth);
        QCOMPARE(r->status, 404);
        r = m_srv.client().Get("/nonexistent", kAuth);
        QCOMPARE(r->status, 404);
    }

    void methodNotAllowed() {
        auto r = m_srv.client().Delete("/v1/chat/completions", kAuth);
        QVERIFY(r);
        QCOMPARE(r->status, 405);
        QCOMPARE(r->get_header_value("Allow"), std::string("POST"));
        r = m_srv.client().Get("/v1/chat/completions", kAuth);
        QCOMPARE(r->status, 405);
    }

    // ---- network policy (B5 #20)
    void hostAndCors() {
        auto r = m_srv.client().Get("/health", {{"Host", "attacker.example"}});
        QCOMPARE(r->status, 403);
        r = m_srv.client().Get("/health", {{"Host", "localhost:1234"}});
        QCOMPARE(r->status, 200);
        r = m_srv.client().Options("/v1/chat/completions", {{"Origin", "http://localhost:3000"},
                                                            {"Access-Control-Request-Method", "POST"}});
        QCOMPARE(r->status, 204);
        QCOMPARE(r->get_header_value("Access-Control-Allow-Origin"), std::string("http://localhost:3000"));
        QVERIFY(!r->has_header("Access-Control-Allow-Credentials"));
        // The official JS client's preflight asks for its X-Stainless-* headers: each must be allowed.
        r = m_srv.client().Options("/v1/chat/completions",
                                   {{"Origin", "http://localhost:3000"}, {"Access-Control-Request-Method", "POST"},
                                    {"Access-Control-Request-Headers", "authorization,content-type,x-stainless-os,"
                                                                       "x-stainless-retry-count"}});
        QCOMPARE(r->status, 204);
        QCOMPARE(r->get_header_value("Access-Control-Allow-Headers"),
                 std::string("authorization, content-type, x-stainless-os, x-stainless-retry-count"));
        QCOMPARE(r->get_header_value("Access-Control-Expose-Headers"), std::string("Retry-After"));
        r = m_srv.client().Options("/v1/chat/completions", {{"Origin", "https://evil.example"}});
        QCOMPARE(r->status, 403);
        QVERIFY(!r->has_header("Access-Control-Allow-Origin"));
        httplib::Headers h = kAuth;
        h.emplace("Origin", "https://evil.example");
        r = m_srv.client().Get("/v1/models", h);
        QCOMPARE(r->status, 200);
        QVERIFY(!r->has_header("Access-Control-Allow-Origin"));
    }

    // ---- limits (B5 #7, #8)
    void limits() {
        std::string big(9u << 20, ' ');
        auto r = m_srv.client().Post("/v1/chat/completions", kAuth, big, "application/json");
        QVERIFY(r);
        QCOMPARE(r->status, 413);
        QVERIFY(json::parse(r->body)["error"]["message"].is_string());
        // curl -d's default label caps the body at 8 KiB in the HTTP layer: the message names the label.
        r = m_srv.client().Post("/v1/chat/completions", kAuth, chatBody(std::string(9000, 'x'), 1).dump(),
                                "application/x-www-form-urlencoded");
        QVERIFY(r);
        QCOMPARE(r->status, 413);
        QVERIFY2(json::parse(r->body)["error"]["message"].get<std::string>().find("Content-Type: application/json") !=
                     std::string::npos, r->body.c_str());
        httplib::Headers many = kAuth;
        for (int i = 0; i < 100; ++i) many.emplace("X-Pad-" + std::to_string(i), "1");
        auto c = m_srv.clientPtr();
        r = c->Get("/v1/models", many);
        QVERIFY(r);
        QCOMPARE(r->status, 431);
        c = m_srv.clientPtr();
        r = c->Get(("/v1/models?" + std::string(10000, 'a')).c_str(), kAuth);
        QVERIFY(r);
        QVERIFY(r->status == 414 || r->status == 400);
        c = m_srv.clientPtr();
        r = c->Get("/v1/models", {{"Authorization", std::string("Bearer ") + kKey}, {"X-Big", std::string(9000, 'b')}});
        QVERIFY(!r || r->status == 400 || r->status == 431);
    }

    // ---- bad parameters (B5 #1-#6, #9, #10, #13, #14)
    void badParameters_data() { addBadParameterRows(); }
    void badParameters() {
        QFETCH(QString, body);
        QFETCH(QString, param);
        std::string b = body.toStdString();
        if (QString(QTest::currentDataTag()) == "invalid utf8") b = std::string("{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}");
        json e = expectError("/v1/chat/completions", b);
        if (!param.isEmpty()) QCOMPARE(e["param"].is_string() ? e["param"].get<std::string>() : std::string(), param.toStdString());
    }

    void deepNesting() {
        std::string deep = R"({"messages":[{"role":"user","content":"x"}],"x":)" + std::string(100000, '[') +
                           std::string(100000, ']') + "}";
        expectError("/v1/chat/completions", deep);
    }

    void contextOverflowWording() {
        // prompt + max_tokens over the context: vLLM's wording with the three numbers
        json e = expectError("/v1/chat/completions", chatBody("Hi", 2045).dump());
        const std::string msg = e["message"];
        QVERIFY2(msg.find("This model's maximum context length is 2048 tokens. However, you requested ") == 0, msg.c_str());
        QVERIFY2(msg.find(" in the messages, 2045 in the completion). Please reduce the length of the messages or completion.") !=
                     std::string::npos, msg.c_str());
        // the prompt alone over the context
        std::string longText;
        for (int i = 0; i < 1500; ++i) longText += "word" + std::to_string(i) + " ";
        e = expectError("/v1/chat/completions", chatBody(longText, 1).dump());
        QVERIFY2(std::string(e["message"]).find("However, your request has ") != std::string::npos,
                 std::string(e["message"]).c_str());
        // completions: token ids outside the vocabulary, empty prompt
        expectError("/v1/completions", R"({"prompt":[1,2,99999999]})");
        expectError("/v1/completions", R"({"prompt":[-1]})");
        expectError("/v1/completions", R"({"prompt":""})");
        expectError("/v1/completions", R"({"prompt":"x","echo":true,"logprobs":1})");
        expectError("/v1/completions", R"({"prompt":["a","b","c","d","e"],"n":4})");
    }

    void oddButValidContent() {
        // NUL bytes, a role marker written by the user, multi-part text: accepted, valid JSON out
        json b = chatBody(std::string("a\0b <|system|> \xe2\x82\xac", 18), 3);
        json j = postJson("/v1/chat/completions", b, 200);
        QVERIFY(j["choices"].is_array());
        b["messages"][0]["content"] = json::array({json{{"type", "text"}, {"text", "one"}}, json{{"type", "text"}, {"text", "two"}}});
        postJson("/v1/chat/completions", b, 200);
        // unknown fields are ignored
        b["frobnicate"] = 1;
        postJson("/v1/chat/completions", b, 200);
    }

    // ---- streaming faults (B5 #23, #27)
    void disconnectAbortsAndFreesBlocks() {
        QVERIFY(waitIdle(10000));
        const double abortsBefore = abortCount(metricsText());
        json b = chatBody("Run long", 1900);
        b["ignore_eos"] = true;
        b["stream"] = true;
        auto c = m_srv.clientPtr();
        SseResult s = postStream(*c, "/v1/chat/completions", b, kAuth, 2);  // closes after 2 chunks
        QCOMPARE(s.status, 200);
        QCOMPARE(s.data.size(), size_t(2));
        c.reset();
        expectAbortedAndIdle(abortsBefore);
    }

    // A non-streaming client that gives up (its read timeout, as the official clients have, then a retry) writes
    // nothing the server could fail on: the server must still notice the closed connection and abort the request
    // (serve/connection_probe.h) instead of generating its 1,900 tokens for no one.
    void nonStreamingClientGoneAborts() {
        QVERIFY(waitIdle(10000));
        const double abortsBefore = abortCount(metricsText());
        json b = chatBody("Run long", 1900);
        b["ignore_eos"] = true;
        {
            auto c = m_srv.clientPtr(1);  // gives up after 1 s and closes its socket
            auto r = c->Post("/v1/chat/completions", kAuth, b.dump(), "application/json");
            QVERIFY(!r);  // timed out: no answer
        }
        expectAbortedAndIdle(abortsBefore);
    }

    void concurrencyLimit() {
        QVERIFY(waitIdle(10000));
        // 6 slots (--max-concurrent-requests 6): hold them with long streams, the 7th gets 503
        std::vector<std::thread> holders;
        std::atomic<bool> release{false};
        std::vector<std::unique_ptr<httplib::Client>> clients;
        for (int i = 0; i < 6; ++i) clients.push_back(m_srv.clientPtr());
        for (int i = 0; i < 6; ++i)
            holders.emplace_back([&, i] {
                json b = chatBody("hold", 1900);
                b["ignore_eos"] = true;
                b["stream"] = true;
                postStream(*clients[size_t(i)], "/v1/chat/completions", b, kAuth, -1, &release);
            });
        // wait until all six hold their slot, then one more request must be refused
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < 10000 && metric(metricsText(), "twinspark:http_generation_requests_in_flight") < 6)
            QThread::msleep(10);
        QCOMPARE(metric(metricsText(), "twinspark:http_generation_requests_in_flight"), 6.0);
        auto c = m_srv.clientPtr();
        auto r = c->Post("/v1/chat/completions", kAuth, chatBody("x", 1).dump(), "application/json");
        QVERIFY(r);
        const bool saw503 = r->status == 503;
        if (saw503) {
            QCOMPARE(r->get_header_value("Retry-After"), std::string("1"));
            QCOMPARE(json::parse(r->body)["error"]["type"], "unavailable_error");
        }
        release = true;
        for (auto& h : holders) h.join();
        QVERIFY(saw503);
        QVERIFY(waitIdle(10000));
    }

    void survivesEverything() {
        // after all of the above the server still serves normally
        json j = postJson("/v1/chat/completions", chatBody("still alive?", 3), 200);
        QCOMPARE(j["usage"]["completion_tokens"].get<int>(), 3);
        QVERIFY(m_srv.running());
    }
};

namespace {
// The rows of TestServer::badParameters (kept out of the class: moc cannot scan some of these literals).
void addBadParameterRows() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<QString>("param");
    const QString m = R"("messages":[{"role":"user","content":"x"}])";
    auto row = [&](const char* name, const QString& extra, const char* param) {
        QTest::newRow(name) << ("{" + m + (extra.isEmpty() ? "" : "," + extra) + "}") << QString(param);
    };
    row("n=0", R"("n":0)", "n");
    row("n=1e6", R"("n":1000000)", "n");
    row("n=-1", R"("n":-1)", "n");
    row("n=string", R"("n":"5")", "n");
    row("max_tokens=-5", R"("max_tokens":-5)", "max_tokens");
    row("max_tokens=0", R"("max_tokens":0)", "max_tokens");
    row("max_tokens=1.5", R"("max_tokens":1.5)", "max_tokens");
    row("max_tokens=2^63", R"("max_tokens":9223372036854775808)", "max_tokens");
    row("max_tokens over context", R"("max_tokens":2147483647)", "max_tokens");
    row("temperature<0", R"("temperature":-1)", "temperature");
    row("temperature string", R"("temperature":"hot")", "temperature");
    row("top_p=0", R"("top_p":0)", "top_p");
    row("top_p>1", R"("top_p":1.5)", "top_p");
    row("top_k<-1", R"("top_k":-2)", "top_k");
    row("min_p>1", R"("min_p":2)", "min_p");
    row("top_logprobs huge", R"("logprobs":true,"top_logprobs":1000000)", "top_logprobs");
    row("top_logprobs without logprobs", R"("top_logprobs":2)", "top_logprobs");
    row("seed string", R"("seed":"x")", "seed");
    row("stop 17", R"("stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"])", "stop");
    row("stop empty", R"("stop":[""])", "stop");
    row("stop number", R"("stop":5)", "stop");
    row("stop_token_ids >= vocab", R"("stop_token_ids":[999999])", "");
    row("stream_options without stream", R"("stream_options":{"include_usage":true})", "stream_options");
    row("logit_bias", R"("logit_bias":{"1":5})", "logit_bias");
    row("response_format json_schema", R"("response_format":{"type":"json_schema","json_schema":{}})", "response_format");
    row("tools not array", R"("tools":{})", "tools");
    row("tool bad name", R"("tools":[{"type":"function","function":{"name":"bad name!"}}])", "tools[0].function.name");
    row("tool params not object", R"("tools":[{"type":"function","function":{"name":"f","parameters":"x"}}])",
        "tools[0].function.parameters");
    row("tool_choice required without tools", R"("tool_choice":"required")", "tool_choice");
    row("tool_choice unknown name",
        R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}})",
        "tool_choice");
    row("tool_choice garbage", R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"always")", "tool_choice");
    row("kwargs not allowed", R"("chat_template_kwargs":{"tokenize":true})", "chat_template_kwargs.tokenize");
    row("kwargs wrong type", R"("chat_template_kwargs":{"enable_thinking":"yes"})", "chat_template_kwargs.enable_thinking");
    QTest::newRow("messages empty") << R"({"messages":[]})" << "messages";
    QTest::newRow("messages object") << R"({"messages":{}})" << "messages";
    QTest::newRow("messages missing") << R"({"model":"GLM-5.3-Flash-EXL3"})" << "messages";
    QTest::newRow("message not object") << R"({"messages":[123]})" << "messages[0]";
    QTest::newRow("message empty object") << R"({"messages":[{}]})" << "messages[0].role";
    QTest::newRow("role number") << R"({"messages":[{"role":123,"content":"x"}]})" << "messages[0].role";
    QTest::newRow("role unknown") << R"({"messages":[{"role":"wizard","content":"x"}]})" << "messages[0].role";
    QTest::newRow("content number") << R"({"messages":[{"role":"user","content":123}]})" << "messages[0].content";
    QTest::newRow("content null user") << R"({"messages":[{"role":"user","content":null}]})" << "messages[0].content";
    QTest::newRow("image part") << R"({"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/"}}]}]})"
                                << "messages[0].content";
    QTest::newRow("bad tool_call arguments")
        << R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{not json"}}]}]})"
        << "messages";
    QTest::newRow("tool_call arguments not an object")
        << R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1,2]"}}]}]})"
        << "messages";
    QTest::newRow("malformed json") << R"({"messages":[)" << "";
    QTest::newRow("not an object") << R"([1,2,3])" << "";
    QTest::newRow("lone surrogate") << R"({"messages":[{"role":"user","content":"\ud800"}]})" << "";
    QTest::newRow("invalid utf8") << QString::fromLatin1("{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}") << "";
    QTest::newRow("empty body") << "" << "";
}
}  // namespace

QTEST_GUILESS_MAIN(TestServer)

#include "test_server.moc"
