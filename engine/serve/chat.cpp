#include "serve/chat.h"

#include <httplib.h>

#include "core/error.h"
#include "core/log.h"
#include "serve/api_error.h"
#include "serve/respond.h"
#include "serve/sse.h"

namespace ts::serve {

ChatAssembler::ChatAssembler(const ChatRequest& req, const Tokenizer* tokenizer, std::string model,
                             bool startsInReasoning, std::string forcedPrefix, int64_t promptTokens)
    : m_req(req), m_tok(tokenizer), m_model(std::move(model)), m_id(makeRequestId("chatcmpl-")),
      m_created(unixTime()), m_promptTokens(promptTokens) {
    for (int i = 0; i < req.n; ++i) {
        Choice& c = m_choices.emplace_back(startsInReasoning);
        if (req.toolChoice != ToolChoice::None) {
            c.toolParser.emplace(req.tools);
            // The prefill is part of the call the model completes; it produces no output of its own.
            if (!forcedPrefix.empty()) c.toolParser->feed(forcedPrefix);
        }
    }
}

json ChatAssembler::chunk(json choices) const {
    json j = json::object();
    j["id"] = m_id;
    j["object"] = "chat.completion.chunk";
    j["created"] = m_created;
    j["model"] = m_model;
    j["choices"] = std::move(choices);
    if (m_req.includeUsage && m_req.continuousUsage)
        j["usage"] = usageJson(m_promptTokens, completionTokens(), 0);
    return j;
}

int64_t ChatAssembler::completionTokens() const {
    int64_t n = 0;
    for (const auto& c : m_choices) n += c.completionTokens;
    return n;
}

json ChatAssembler::logprobEntry(int32_t token, float lp, const std::vector<std::pair<int32_t, float>>& top) const {
    auto one = [&](int32_t id, float v) {
        json e = json::object();
        const int32_t ids[1] = {id};
        e["token"] = m_tok ? m_tok->decode(ids, false) : "token_id:" + std::to_string(id);
        e["logprob"] = finiteLogprob(v);
        json bytes = json::array();
        if (m_tok)
            for (unsigned char b : m_tok->tokenBytes(id)) bytes.push_back(int(b));
        e["bytes"] = std::move(bytes);
        return e;
    };
    json e = one(token, lp);
    json t = json::array();
    for (size_t i = 0; i < top.size() && int(i) < m_req.topLogprobs; ++i) t.push_back(one(top[i].first, top[i].second));
    e["top_logprobs"] = std::move(t);
    return e;
}

void ChatAssembler::start(std::vector<json>& chunks) {
    for (int i = 0; i < m_req.n; ++i) {
        json ch = json::object();
        ch["index"] = i;
        ch["delta"] = json{{"role", "assistant"}, {"content", ""}};
        ch["logprobs"] = nullptr;
        ch["finish_reason"] = nullptr;
        chunks.push_back(chunk(json::array({std::move(ch)})));
    }
}

void ChatAssembler::apply(Choice& c, int index, const ReasoningDelta& rd, bool final, json& delta) {
    (void)index;
    if (!rd.reasoning.empty()) {
        c.reasoning += rd.reasoning;
        delta["reasoning"] = delta.value("reasoning", std::string()) + rd.reasoning;
        delta["reasoning_content"] = delta["reasoning"];
    }
    ToolParserDelta td;
    if (c.toolParser) {
        if (!rd.content.empty()) td = c.toolParser->feed(rd.content);
        if (final) {
            ToolParserDelta rest = c.toolParser->finish();
            td.content += rest.content;
            td.tool_calls.insert(td.tool_calls.end(), rest.tool_calls.begin(), rest.tool_calls.end());
        }
    } else {
        td.content = rd.content;
    }
    if (!td.content.empty()) {
        c.content += td.content;
        delta["content"] = delta.value("content", std::string()) + td.content;
    }
    for (const auto& call : td.tool_calls) {
        if (!m_req.parallelToolCalls && !c.calls.empty()) continue;  // only the first call is returned
        c.calls.push_back(ToolCall{call.id, call.name, call.arguments});
        json tc = json::object();
        tc["index"] = int(c.calls.size()) - 1;
        tc["id"] = call.id;
        tc["type"] = "function";
        tc["function"] = json{{"name", call.name}, {"arguments", call.arguments}};
        if (!delta.contains("tool_calls")) delta["tool_calls"] = json::array();
        delta["tool_calls"].push_back(std::move(tc));
    }
}

const char* ChatAssembler::finishReason(const Choice& c) const {
    if (!c.calls.empty() && (m_req.toolChoice == ToolChoice::Auto || m_req.toolChoice == ToolChoice::Required))
        return "tool_calls";
    return finishReasonName(c.finish);
}

// One streamed chunk for `choice` carrying `delta` and the logprobs gathered since the last chunk.
void ChatAssembler::pushDelta(std::vector<json>& chunks, int choice, Choice& c, json& delta) {
    if (delta.empty()) return;
    json ch = json::object();
    ch["index"] = choice;
    ch["delta"] = std::move(delta);
    ch["logprobs"] = c.pendingLogprobs.empty() ? json(nullptr) : json{{"content", c.pendingLogprobs}};
    c.pendingLogprobs = json::array();
    ch["finish_reason"] = nullptr;
    chunks.push_back(chunk(json::array({std::move(ch)})));
}

void ChatAssembler::onEvent(const ChoiceEvent& ev, std::vector<json>* chunks, ServerCounters* counters) {
    if (ev.choice < 0 || ev.choice >= int(m_choices.size())) return;
    Choice& c = m_choices[size_t(ev.choice)];
    const EngineEvent& e = ev.event;
    json delta = json::object();
    if (e.type == EngineEvent::Type::Token) {
        ++c.completionTokens;
        if (m_req.logprobs) {
            json entry = logprobEntry(e.token, e.logprob, e.top);
            c.logprobs.push_back(entry);
            c.pendingLogprobs.push_back(std::move(entry));
        }
        if (!e.text.empty()) apply(c, ev.choice, c.reasoningParser.feed(e.text), false, delta);
        if (chunks) pushDelta(*chunks, ev.choice, c, delta);
        return;
    }
    // Finished: flush the held-back text and both parsers, then close the choice.
    if (!e.text.empty()) apply(c, ev.choice, c.reasoningParser.feed(e.text), false, delta);
    apply(c, ev.choice, c.reasoningParser.finish(), true, delta);
    c.finish = e.reason;
    c.completionTokens = e.completionTokens;
    c.cachedTokens = e.cachedPromptTokens;
    if (!e.stopString.empty()) c.stopReason = e.stopString;
    else if (e.stopToken >= 0) c.stopReason = e.stopToken;
    if (m_req.toolChoice == ToolChoice::Required || m_req.toolChoice == ToolChoice::Named) {
        if (c.calls.empty())
            c.violation = std::string("tool_choice ") + (m_req.toolChoice == ToolChoice::Named ? "'" + m_req.toolName + "'" : "'required'") +
                          ": the model's output contained no well-formed tool call (finish_reason " +
                          finishReasonName(c.finish) + ")";
        for (const auto& call : c.calls)
            if (m_req.toolChoice == ToolChoice::Named && call.name != m_req.toolName)
                c.violation = "tool_choice '" + m_req.toolName + "': the model called '" + call.name + "' instead";
    }
    if (counters) countFinish(*counters, e.reason);
    if (!chunks) return;
    // A forced call the model did not complete: the tool parser hands back what it held as text, which starts
    // with our own prefill ("<tool_call>name"); the error event says what happened, that text is not output.
    if (!c.violation.empty()) delta.erase("content");
    pushDelta(*chunks, ev.choice, c, delta);
    if (!c.violation.empty()) {
        chunks->push_back(ApiError(500, c.violation).body());
        return;
    }
    json ch = json::object();
    ch["index"] = ev.choice;
    ch["delta"] = json::object();
    ch["logprobs"] = c.pendingLogprobs.empty() ? json(nullptr) : json{{"content", c.pendingLogprobs}};
    c.pendingLogprobs = json::array();
    ch["finish_reason"] = finishReason(c);
    ch["stop_reason"] = c.stopReason;
    chunks->push_back(chunk(json::array({std::move(ch)})));
}

void ChatAssembler::complete(std::vector<json>& chunks) const {
    if (!m_req.includeUsage) return;
    json j = json::object();
    j["id"] = m_id;
    j["object"] = "chat.completion.chunk";
    j["created"] = m_created;
    j["model"] = m_model;
    j["choices"] = json::array();
    j["usage"] = usageJson(m_promptTokens, completionTokens(), m_choices.empty() ? 0 : m_choices[0].cachedTokens);
    chunks.push_back(std::move(j));
}

json ChatAssembler::response() const {
    json choices = json::array();
    for (size_t i = 0; i < m_choices.size(); ++i) {
        const Choice& c = m_choices[i];
        if (!c.violation.empty()) throw ApiError(500, c.violation, "tool_choice", "server_error");
        json msg = json::object();
        msg["role"] = "assistant";
        msg["content"] = (c.content.empty() && (!c.calls.empty() || !c.reasoning.empty())) ? json(nullptr) : json(c.content);
        msg["reasoning_content"] = c.reasoning.empty() ? json(nullptr) : json(c.reasoning);
        msg["reasoning"] = msg["reasoning_content"];
        json calls = json::array();
        for (const auto& call : c.calls)
            calls.push_back(json{{"id", call.id},
                                 {"type", "function"},
                                 {"function", json{{"name", call.name}, {"arguments", call.arguments}}}});
        msg["tool_calls"] = std::move(calls);
        json ch = json::object();
        ch["index"] = int(i);
        ch["message"] = std::move(msg);
        ch["logprobs"] = m_req.logprobs ? json{{"content", c.logprobs}} : json(nullptr);
        ch["finish_reason"] = finishReason(c);
        ch["stop_reason"] = c.stopReason;
        choices.push_back(std::move(ch));
    }
    json j = json::object();
    j["id"] = m_id;
    j["object"] = "chat.completion";
    j["created"] = m_created;
    j["model"] = m_model;
    j["choices"] = std::move(choices);
    j["usage"] = usageJson(m_promptTokens, completionTokens(), m_choices.empty() ? 0 : m_choices[0].cachedTokens);
    return j;
}

void handleChat(const json& body, HandlerEnv& env, httplib::Response& res) {
    const ServeContext& ctx = env.ctx;
    if (!ctx.tokenizer || !ctx.chatTemplate)
        throw ApiError(501, "this model has no tokenizer or chat template: chat completions are unavailable", {},
                       "not_supported_error");
    auto req = std::make_shared<ChatRequest>(
        parseChatRequest(body, ctx, env.options.limits, env.options.servedModelName));
    if (!req->ignoredFields.empty()) {
        std::string list;
        for (const auto& k : req->ignoredFields) list += (list.empty() ? "" : ", ") + k;
        logFormat(LogLevel::Warning, "serve: /v1/chat/completions: ignoring unknown fields: %s", list.c_str());
    }
    std::string prompt;
    try {
        std::lock_guard<std::mutex> lock(ctx.templateMutex);
        prompt = ctx.chatTemplate->render(req->messages, req->tools, req->addGenerationPrompt, req->templateKwargs);
    } catch (const ts::Error& e) {
        throw fromEngineError(e, "messages");
    }
    bool inReasoning = ChatTemplate::promptEndsInReasoning(prompt);
    std::string forced;
    if (req->toolChoice == ToolChoice::Required || req->toolChoice == ToolChoice::Named) {
        if (inReasoning) prompt += "</think>";
        inReasoning = false;
        forced = "<tool_call>" + (req->toolChoice == ToolChoice::Named ? req->toolName : std::string());
        prompt += forced;
    }
    std::vector<int32_t> ids = ctx.tokenizer->encode(prompt, true, false);
    const char* param = body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    req->sampling.maxTokens = resolveMaxTokens(int64_t(ids.size()), req->maxTokens, ctx.maxModelLen, param);
    if (req->sampling.minTokens > req->sampling.maxTokens)
        throw ApiError(400, "'min_tokens' must not exceed max_tokens", "min_tokens");

    auto slot = std::make_shared<InFlightSlot>(env.counters, env.options.limits.maxConcurrentRequests);
    auto gen = std::make_shared<Generation>(*ctx.source, env.shutdown, env.options.limits.maxBufferedEvents);
    try {
        std::vector<std::pair<std::vector<int32_t>, SamplingParams>> choices;
        for (int i = 0; i < req->n; ++i) {
            SamplingParams p = req->sampling;
            if (p.seed && i > 0) p.seed = *p.seed + uint64_t(i);  // n choices must differ; each stays reproducible
            choices.emplace_back(ids, std::move(p));
        }
        gen->submitAll(std::move(choices));  // the n choices start in the same engine step
    } catch (const ts::Error& e) {
        throw fromEngineError(e);
    }
    auto asm_ = std::make_shared<ChatAssembler>(*req, ctx.tokenizer, env.options.servedModelName, inReasoning, forced,
                                                int64_t(ids.size()));
    respond(req, gen, asm_, slot, &env.counters, req->stream, env.options.limits.sseHeartbeat, env.connection, res);
}

}  // namespace ts::serve
