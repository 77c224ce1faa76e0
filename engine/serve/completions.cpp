// /v1/completions: the legacy OpenAI text completion. `prompt` may be a string, a list of strings, token
// ids, or a list of token-id lists; each prompt gets `n` choices, numbered prompt × n + j as vLLM does.
// echo puts the prompt text in front of the completion; logprobs N gives the legacy shape
// {tokens, token_logprobs, top_logprobs: [{text: logprob}], text_offset}. echo with logprobs would need
// prompt logprobs, which the engine does not compute: refused in validation.
#include <httplib.h>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/handlers.h"
#include "serve/respond.h"
#include "serve/sse.h"
#include "serve/validation.h"

namespace ts::serve {

namespace {

class CompletionAssembler {
public:
    CompletionAssembler(const CompletionRequest& req, const Tokenizer* tok, std::string model,
                        std::vector<std::string> echoTexts, std::vector<int64_t> promptTokens)
        : m_req(req), m_tok(tok), m_model(std::move(model)), m_id(makeRequestId("cmpl-")), m_created(unixTime()),
          m_promptTokens(std::move(promptTokens)) {
        for (size_t p = 0; p < echoTexts.size(); ++p)
            for (int j = 0; j < req.n; ++j) {
                Choice c;
                c.prompt = p;
                if (req.echo) c.text = echoTexts[p];
                m_choices.push_back(std::move(c));
            }
    }

    // Streaming: the echoed prompts go out first.
    void start(std::vector<json>& chunks) {
        if (!m_req.echo) return;
        for (size_t i = 0; i < m_choices.size(); ++i)
            chunks.push_back(chunk(choiceJson(int(i), m_choices[i].text, nullptr, nullptr)));
    }

    void onEvent(const ChoiceEvent& ev, std::vector<json>* chunks, ServerCounters* counters) {
        if (ev.choice < 0 || ev.choice >= int(m_choices.size())) return;
        Choice& c = m_choices[size_t(ev.choice)];
        const EngineEvent& e = ev.event;
        json lp = nullptr;
        if (e.type == EngineEvent::Type::Token) {
            ++c.completionTokens;
            if (m_req.logprobs >= 0) lp = addLogprob(c, e);
        } else {
            c.finish = e.reason;
            c.completionTokens = e.completionTokens;
            c.cachedTokens = e.cachedPromptTokens;
            if (!e.stopString.empty()) c.stopReason = e.stopString;
            else if (e.stopToken >= 0) c.stopReason = e.stopToken;
            if (counters) countFinish(*counters, e.reason);
        }
        c.text += e.text;
        if (!chunks) return;
        if (!e.text.empty() || !lp.is_null())
            chunks->push_back(chunk(choiceJson(ev.choice, e.text, std::move(lp), nullptr)));
        if (e.type == EngineEvent::Type::Finished) {
            json ch = choiceJson(ev.choice, "", nullptr, finishReasonName(c.finish));
            ch[0]["stop_reason"] = c.stopReason;
            chunks->push_back(chunk(std::move(ch)));
        }
    }

    void complete(std::vector<json>& chunks) const {
        if (!m_req.includeUsage) return;
        json j = header();
        j["choices"] = json::array();
        j["usage"] = usage();
        chunks.push_back(std::move(j));
    }

    json response() const {
        json choices = json::array();
        for (size_t i = 0; i < m_choices.size(); ++i) {
            const Choice& c = m_choices[i];
            json ch = json::object();
            ch["index"] = int(i);
            ch["text"] = c.text;
            ch["logprobs"] = m_req.logprobs >= 0 ? c.logprobs : json(nullptr);
            ch["finish_reason"] = finishReasonName(c.finish);
            ch["stop_reason"] = c.stopReason;
            choices.push_back(std::move(ch));
        }
        json j = header();
        j["choices"] = std::move(choices);
        j["usage"] = usage();
        return j;
    }

private:
    struct Choice {
        size_t prompt = 0;
        std::string text;
        json logprobs = json{{"tokens", json::array()},
                             {"token_logprobs", json::array()},
                             {"top_logprobs", json::array()},
                             {"text_offset", json::array()}};
        FinishReason finish = FinishReason::None;
        json stopReason = nullptr;
        int64_t completionTokens = 0, cachedTokens = 0;
    };

    std::string tokenText(int32_t id) const {
        const int32_t ids[1] = {id};
        return m_tok ? m_tok->decode(ids, false) : "token_id:" + std::to_string(id);
    }

    // Appends the token's entry to the choice and returns it alone (a stream chunk's logprobs).
    json addLogprob(Choice& c, const EngineEvent& e) {
        const std::string tok = tokenText(e.token);
        json top = json::object();
        for (size_t i = 0; i < e.top.size() && int(i) < m_req.logprobs; ++i)
            top[tokenText(e.top[i].first)] = finiteLogprob(e.top[i].second);
        const size_t offset = c.text.size();
        c.logprobs["tokens"].push_back(tok);
        c.logprobs["token_logprobs"].push_back(finiteLogprob(e.logprob));
        c.logprobs["top_logprobs"].push_back(top);
        c.logprobs["text_offset"].push_back(offset);
        return json{{"tokens", json::array({tok})},
                    {"token_logprobs", json::array({finiteLogprob(e.logprob)})},
                    {"top_logprobs", json::array({top})},
                    {"text_offset", json::array({offset})}};
    }

    json header() const {
        json j = json::object();
        j["id"] = m_id;
        j["object"] = "text_completion";
        j["created"] = m_created;
        j["model"] = m_model;
        return j;
    }

    json chunk(json choices) const {
        json j = header();
        j["choices"] = std::move(choices);
        if (m_req.includeUsage && m_req.continuousUsage) j["usage"] = usage();
        return j;
    }

    static json choiceJson(int index, const std::string& text, json logprobs, const char* finish) {
        json ch = json::object();
        ch["index"] = index;
        ch["text"] = text;
        ch["logprobs"] = std::move(logprobs);
        ch["finish_reason"] = finish ? json(finish) : json(nullptr);
        return json::array({std::move(ch)});
    }

    json usage() const {
        int64_t prompt = 0, completion = 0;
        for (int64_t p : m_promptTokens) prompt += p;
        for (const auto& c : m_choices) completion += c.completionTokens;
        return usageJson(prompt, completion, m_choices.empty() ? 0 : m_choices[0].cachedTokens);
    }

    const CompletionRequest& m_req;
    const Tokenizer* m_tok;
    std::string m_model, m_id;
    int64_t m_created;
    std::vector<int64_t> m_promptTokens;
    std::vector<Choice> m_choices;
};

}  // namespace

void handleCompletions(const json& body, HandlerEnv& env, httplib::Response& res) {
    const ServeContext& ctx = env.ctx;
    if (!ctx.tokenizer)
        throw ApiError(501, "this model has no tokenizer: completions are unavailable", {}, "not_supported_error");
    auto req = std::make_shared<CompletionRequest>(
        parseCompletionRequest(body, ctx, env.options.limits, env.options.servedModelName));
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::string> echo;
    std::vector<int64_t> promptTokens;
    std::vector<int32_t> maxTokens;
    for (const auto& p : req->prompts) {
        if (std::holds_alternative<std::string>(p)) {
            const std::string& s = std::get<std::string>(p);
            prompts.push_back(ctx.tokenizer->encode(s, true, true));
            echo.push_back(s);
        } else {
            prompts.push_back(std::get<std::vector<int32_t>>(p));
            echo.push_back(ctx.tokenizer->decode(prompts.back(), false));
        }
        if (prompts.back().empty()) throw ApiError(400, "'prompt' encodes to no tokens", "prompt");
        promptTokens.push_back(int64_t(prompts.back().size()));
        maxTokens.push_back(resolveMaxTokens(promptTokens.back(), req->maxTokens, ctx.maxModelLen, "max_tokens", "prompt"));
        if (req->sampling.minTokens > maxTokens.back())
            throw ApiError(400, "'min_tokens' must not exceed max_tokens", "min_tokens");
    }
    auto slot = std::make_shared<InFlightSlot>(env.counters, env.options.limits.maxConcurrentRequests);
    auto gen = std::make_shared<Generation>(*ctx.source, env.shutdown, env.options.limits.maxBufferedEvents);
    try {
        std::vector<std::pair<std::vector<int32_t>, SamplingParams>> choices;
        for (size_t p = 0; p < prompts.size(); ++p)
            for (int j = 0; j < req->n; ++j) {
                SamplingParams sp = req->sampling;
                sp.maxTokens = maxTokens[p];
                if (sp.seed && (p > 0 || j > 0)) sp.seed = *sp.seed + uint64_t(p * size_t(req->n) + size_t(j));
                choices.emplace_back(prompts[p], std::move(sp));
            }
        gen->submitAll(std::move(choices));  // every prompt × n choice starts in the same engine step
    } catch (const ts::Error& e) {
        throw fromEngineError(e);
    }
    auto asm_ = std::make_shared<CompletionAssembler>(*req, ctx.tokenizer, env.options.servedModelName, echo,
                                                      promptTokens);
    respond(req, gen, asm_, slot, &env.counters, req->stream, env.options.limits.sseHeartbeat, env.connection, res);
}

}  // namespace ts::serve
