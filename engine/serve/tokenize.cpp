// /tokenize, /detokenize and /v1/models. Tokenize accepts vLLM's forms ({prompt} or {messages, tools,
// add_generation_prompt, chat_template_kwargs, reasoning_effort}) and llama.cpp's {content}; the answer carries both
// vLLM's fields (count, max_model_len, tokens) and, on request, the token strings.
#include <httplib.h>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/handlers.h"
#include "serve/validation.h"

namespace ts::serve {

namespace {
void requireTokenizer(const ServeContext& ctx, bool withTemplate) {
    if (!ctx.tokenizer || (withTemplate && !ctx.chatTemplate))
        throw ApiError(501, "this model has no tokenizer or chat template", {}, "not_supported_error");
}
}  // namespace

void handleTokenize(const json& body, HandlerEnv& env, httplib::Response& res) {
    const ServeContext& ctx = env.ctx;
    requireTokenizer(ctx, body.contains("messages"));
    if (auto it = body.find("model"); it != body.end() && !it->is_null() &&
                                      (!it->is_string() || *it != env.options.servedModelName))
        throw unknownModelError(it->is_string() ? it->get<std::string>() : it->dump(), env.options.servedModelName);
    auto flag = [&](const char* key, bool def) {
        auto it = body.find(key);
        if (it == body.end() || it->is_null()) return def;
        if (!it->is_boolean()) throw ApiError(400, std::string("'") + key + "' must be a boolean", key);
        return it->get<bool>();
    };
    std::vector<int32_t> ids;
    if (body.contains("messages")) {
        // Reuse the chat validation for messages, tools and kwargs (the sampling fields default).
        json chat = json::object();
        for (const char* k : {"messages", "tools", "chat_template_kwargs", "reasoning_effort", "add_generation_prompt"})
            if (body.contains(k)) chat[k] = body[k];
        ChatRequest r = parseChatRequest(chat, ctx, env.options.limits, env.options.servedModelName);
        std::string prompt;
        try {
            std::lock_guard<std::mutex> lock(ctx.templateMutex);
            prompt = ctx.chatTemplate->render(r.messages, r.tools, r.addGenerationPrompt, r.templateKwargs);
        } catch (const ts::Error& e) {
            throw fromEngineError(e, "messages");
        }
        ids = ctx.tokenizer->encode(prompt, true, false);
    } else {
        const char* key = body.contains("prompt") ? "prompt" : "content";
        auto it = body.find(key);
        if (it == body.end() || !it->is_string())
            throw ApiError(400, "'prompt' (a string) or 'messages' is required", "prompt");
        ids = ctx.tokenizer->encode(it->get<std::string>(), true, flag("add_special_tokens", true));
    }
    json out = json::object();
    out["count"] = ids.size();
    out["max_model_len"] = ctx.maxModelLen;
    out["tokens"] = ids;
    if (flag("return_token_strs", false) || flag("with_pieces", false)) {
        json strs = json::array();
        for (int32_t id : ids) strs.push_back(ctx.tokenizer->idToToken(id).value_or(""));
        out["token_strs"] = std::move(strs);
    }
    res.status = 200;
    res.set_content(dumpJson(out), "application/json");
}

void handleDetokenize(const json& body, HandlerEnv& env, httplib::Response& res) {
    const ServeContext& ctx = env.ctx;
    requireTokenizer(ctx, false);
    auto it = body.find("tokens");
    if (it == body.end() || !it->is_array()) throw ApiError(400, "'tokens' (an array of token ids) is required", "tokens");
    if (it->size() > env.options.limits.maxBodyBytes / 2)
        throw ApiError(400, "'tokens' is too long", "tokens");
    std::vector<int32_t> ids;
    for (const auto& t : *it) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= ctx.vocabSize)
            throw ApiError(400, "'tokens' must hold integers in [0, " + std::to_string(ctx.vocabSize) + ")", "tokens");
        ids.push_back(int32_t(t.get<int64_t>()));
    }
    const std::string text = ctx.tokenizer->decode(ids, false);
    json out = json::object();
    out["prompt"] = text;   // vLLM
    out["content"] = text;  // llama.cpp
    res.status = 200;
    res.set_content(dumpJson(out), "application/json");
}

json modelsJson(const ServeContext& ctx, const ServerOptions& options) {
    json card = json::object();
    card["id"] = options.servedModelName;
    card["object"] = "model";
    card["created"] = ctx.created;
    card["owned_by"] = "twinspark";
    card["root"] = ctx.root;
    card["parent"] = nullptr;
    card["max_model_len"] = ctx.maxModelLen;
    card["meta"] = json{{"n_ctx_train", ctx.maxModelLen}, {"n_vocab", ctx.vocabSize}};
    return json{{"object", "list"}, {"data", json::array({std::move(card)})}};
}

}  // namespace ts::serve
