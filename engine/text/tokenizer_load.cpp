// Loading tokenizer.json / tokenizer_config.json into TokenizerInfo. Every check here turns bad input into a
// ts::Error that names the field; nothing from the file reaches an unchecked index or an unchecked type.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/tokenizer.h"
#include "text/tokenizer_internal.h"

namespace ts {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& msg) { fail(ErrorKind::InvalidFile, "tokenizer.json: " + msg); }
[[noreturn]] void unsupported(const std::string& msg) { fail(ErrorKind::Unsupported, "tokenizer.json: " + msg); }

const json* field(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool boolField(const json& obj, const char* key, bool dflt, const std::string& where) {
    const json* v = field(obj, key);
    if (!v) return dflt;
    if (!v->is_boolean()) bad(where + "." + key + " must be a boolean");
    return v->get<bool>();
}

std::string stringField(const json& obj, const char* key, const std::string& where) {
    const json* v = field(obj, key);
    if (!v || !v->is_string()) bad(where + "." + key + " must be a string");
    return v->get<std::string>();
}

std::string typeOf(const json& obj, const std::string& where) {
    if (!obj.is_object()) bad(where + " must be an object");
    return stringField(obj, "type", where);
}

TokenId idValue(const json& v, const std::string& where) {
    if (!v.is_number_integer()) bad(where + " must be an integer id");
    int64_t id = v.get<int64_t>();
    if (id < 0 || id > kMaxTokenId) bad(where + ": id " + std::to_string(id) + " is out of range [0, " + std::to_string(kMaxTokenId) + "]");
    return TokenId(id);
}

// Literal text as a PCRE2 pattern (Split with {"String": ...}).
std::string quoteRegex(const std::string& s) {
    std::string out;
    for (char c : s) {
        auto u = static_cast<unsigned char>(c);
        if (u < 0x80 && !std::isalnum(u)) out += '\\';
        out += c;
    }
    return out;
}

SplitBehavior behaviorFrom(const std::string& name, const std::string& where) {
    if (name == "Isolated") return SplitBehavior::Isolated;
    if (name == "Removed") return SplitBehavior::Removed;
    if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
    if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
    if (name == "Contiguous") return SplitBehavior::Contiguous;
    bad(where + ".behavior '" + name + "' is unknown");
}

// GPT-2's pattern, which ByteLevel with use_regex=true applies.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

void loadPreTokenizer(const json* pt, TokenizerInfo& t) {
    if (!pt) unsupported("pre_tokenizer is null; only byte-level BPE (ByteLevel pre-tokenizer) is supported");
    std::vector<const json*> steps;
    if (typeOf(*pt, "pre_tokenizer") == "Sequence") {
        const json* list = field(*pt, "pretokenizers");
        if (!list || !list->is_array()) bad("pre_tokenizer.pretokenizers must be an array");
        for (const json& s : *list) steps.push_back(&s);
    } else {
        steps.push_back(pt);
    }
    bool sawByteLevel = false;
    for (size_t i = 0; i < steps.size(); ++i) {
        const std::string where = "pre_tokenizer[" + std::to_string(i) + "]";
        const std::string type = typeOf(*steps[i], where);
        if (sawByteLevel) unsupported(where + ": '" + type + "' after ByteLevel is not supported");
        if (type == "Split") {
            const json* pat = field(*steps[i], "pattern");
            if (!pat || !pat->is_object()) bad(where + ".pattern must be {\"Regex\": ...} or {\"String\": ...}");
            std::string pattern;
            if (const json* r = field(*pat, "Regex"); r && r->is_string())
                pattern = r->get<std::string>();
            else if (const json* s = field(*pat, "String"); s && s->is_string())
                pattern = quoteRegex(s->get<std::string>());
            else
                bad(where + ".pattern must be {\"Regex\": ...} or {\"String\": ...}");
            SplitRule rule;
            rule.regex = std::make_unique<Pcre2Regex>(onigToPcre2(pattern), "tokenizer.json: " + where + ".pattern");
            rule.behavior = behaviorFrom(stringField(*steps[i], "behavior", where), where);
            rule.invert = boolField(*steps[i], "invert", false, where);
            t.splits.push_back(std::move(rule));
        } else if (type == "ByteLevel") {
            sawByteLevel = true;
            t.addPrefixSpace = boolField(*steps[i], "add_prefix_space", true, where);
            if (boolField(*steps[i], "use_regex", true, where))
                t.byteLevelRegex = std::make_unique<Pcre2Regex>(onigToPcre2(kGpt2Pattern), "ByteLevel regex");
        } else {
            unsupported(where + ": pre-tokenizer type '" + type + "' is not supported");
        }
    }
    if (!sawByteLevel) unsupported("pre_tokenizer has no ByteLevel step; only byte-level BPE is supported");
}

void loadModel(const json& root, TokenizerInfo& t, std::unordered_map<std::string, TokenId>& vocabOut) {
    const json* model = field(root, "model");
    if (!model) bad("missing \"model\"");
    if (!model->is_object()) bad("model must be an object");
    if (const json* type = field(*model, "type"); type && (!type->is_string() || type->get<std::string>() != "BPE"))
        unsupported("model type " + type->dump() + " is not supported (only BPE)");
    if (const json* d = field(*model, "dropout"); d && (!d->is_number() || d->get<double>() != 0.0))
        unsupported("model.dropout is not supported");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        if (const json* v = field(*model, k); v && !(v->is_string() && v->get<std::string>().empty()))
            unsupported(std::string("model.") + k + " is not supported");
    }
    const json* vocab = field(*model, "vocab");
    if (!vocab || !vocab->is_object()) bad("model.vocab must be an object of token -> id");
    const json* merges = field(*model, "merges");
    if (!merges || !merges->is_array()) bad("model.merges must be an array");

    std::unordered_map<std::string, TokenId> v;
    v.reserve(vocab->size());
    std::unordered_map<TokenId, const std::string*> byId;
    byId.reserve(vocab->size());
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
        TokenId id = idValue(it.value(), "model.vocab['" + it.key() + "']");
        auto [pos, inserted] = byId.emplace(id, &it.key());
        if (!inserted) bad("model.vocab: id " + std::to_string(id) + " is used by both '" + *pos->second + "' and '" + it.key() + "'");
        v.emplace(it.key(), id);
    }

    std::vector<std::pair<std::string, std::string>> pairs;
    pairs.reserve(merges->size());
    bool legacy = false, tuple = false;
    for (size_t i = 0; i < merges->size(); ++i) {
        const json& m = (*merges)[i];
        const std::string where = "model.merges[" + std::to_string(i) + "]";
        if (m.is_string()) {
            legacy = true;
            const std::string& s = m.get_ref<const std::string&>();
            if (s.rfind("#version", 0) == 0) continue;  // merges.txt header, skipped by the reference too
            size_t sp = s.find(' ');
            if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                bad(where + " '" + s + "' is not two tokens separated by one space");
            pairs.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            tuple = true;
            pairs.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        } else {
            bad(where + " must be \"a b\" or [\"a\", \"b\"]");
        }
    }
    if (legacy && tuple) bad("model.merges mixes \"a b\" strings and [a, b] pairs");

    BpeOptions opt;
    if (const json* u = field(*model, "unk_token")) {
        if (!u->is_string()) bad("model.unk_token must be a string");
        opt.unkToken = u->get<std::string>();
    }
    opt.fuseUnk = boolField(*model, "fuse_unk", false, "model");
    opt.byteFallback = boolField(*model, "byte_fallback", false, "model");
    opt.ignoreMerges = boolField(*model, "ignore_merges", false, "model");
    vocabOut = v;
    t.bpe = std::make_unique<BpeModel>(std::move(v), pairs, std::move(opt));
}

void loadAddedTokens(const json& root, TokenizerInfo& t, const std::unordered_map<std::string, TokenId>& vocab,
                     std::unordered_map<TokenId, std::string>& vocabById) {
    const json* list = field(root, "added_tokens");
    if (!list) return;
    if (!list->is_array()) bad("added_tokens must be an array");
    std::unordered_map<TokenId, const AddedTokenEntry*> byId;
    for (size_t i = 0; i < list->size(); ++i) {
        const json& a = (*list)[i];
        const std::string where = "added_tokens[" + std::to_string(i) + "]";
        if (!a.is_object()) bad(where + " must be an object");
        const json* idv = field(a, "id");
        if (!idv) bad(where + " has no id");
        auto e = std::make_unique<AddedTokenEntry>();
        e->id = idValue(*idv, where + ".id");
        e->content = stringField(a, "content", where);
        if (e->content.empty()) bad(where + ".content is empty");
        e->special = boolField(a, "special", false, where);
        e->normalized = boolField(a, "normalized", true, where);
        e->lstrip = boolField(a, "lstrip", false, where);
        e->rstrip = boolField(a, "rstrip", false, where);
        e->singleWord = boolField(a, "single_word", false, where);
        if (byId.count(e->id)) bad(where + ": id " + std::to_string(e->id) + " is used by two added tokens");
        if (t.addedByContent.count(e->content)) bad(where + ": '" + e->content + "' is listed twice");
        if (auto it = vocab.find(e->content); it != vocab.end() && it->second != e->id)
            bad(where + ": '" + e->content + "' has id " + std::to_string(e->id) + " but the vocabulary says " + std::to_string(it->second));
        if (auto it = vocabById.find(e->id); it != vocabById.end() && it->second != e->content)
            bad(where + ": id " + std::to_string(e->id) + " ('" + e->content + "') is already the vocabulary's '" + it->second + "'");
        byId.emplace(e->id, e.get());
        t.addedByContent.emplace(e->content, e.get());
        t.added.push_back(std::move(e));
    }
    std::vector<const AddedTokenEntry*> raw, normalized;
    for (const auto& e : t.added) (e->normalized ? normalized : raw).push_back(e.get());
    t.rawMatcher.build(raw);
    t.normalizedMatcher.build(normalized);
}

void loadPostProcessor(const json* pp, TokenizerInfo& t) {
    if (!pp) return;
    std::vector<const json*> steps;
    if (typeOf(*pp, "post_processor") == "Sequence") {
        const json* list = field(*pp, "processors");
        if (!list || !list->is_array()) bad("post_processor.processors must be an array");
        for (const json& s : *list) steps.push_back(&s);
    } else {
        steps.push_back(pp);
    }
    for (const json* s : steps) {
        const std::string type = typeOf(*s, "post_processor");
        if (type == "ByteLevel") continue;  // offsets only
        if (type != "TemplateProcessing") unsupported("post_processor type '" + type + "' is not supported");
        const json* single = field(*s, "single");
        const json* specials = field(*s, "special_tokens");
        if (!single || !single->is_array()) bad("post_processor.single must be an array");
        bool seenSequence = false;
        for (const json& item : *single) {
            if (item.contains("Sequence")) {
                seenSequence = true;
                continue;
            }
            const json* st = item.is_object() ? field(item, "SpecialToken") : nullptr;
            if (!st || !st->is_object()) bad("post_processor.single items must be Sequence or SpecialToken");
            std::string name = stringField(*st, "id", "post_processor.single.SpecialToken");
            const json* def = specials && specials->is_object() ? field(*specials, name.c_str()) : nullptr;
            const json* ids = def && def->is_object() ? field(*def, "ids") : nullptr;
            if (!ids || !ids->is_array()) bad("post_processor.special_tokens['" + name + "'].ids is missing");
            for (const json& id : *ids) (seenSequence ? t.templateSuffix : t.templatePrefix).push_back(idValue(id, "post_processor id"));
        }
    }
}

void loadDecoder(const json* dec) {
    if (!dec) unsupported("decoder is null; only the ByteLevel decoder is supported");
    std::vector<const json*> steps;
    if (typeOf(*dec, "decoder") == "Sequence") {
        const json* list = field(*dec, "decoders");
        if (!list || !list->is_array()) bad("decoder.decoders must be an array");
        for (const json& s : *list) steps.push_back(&s);
    } else {
        steps.push_back(dec);
    }
    if (steps.size() != 1 || typeOf(*steps[0], "decoder") != "ByteLevel")
        unsupported("only the ByteLevel decoder is supported");
}

std::optional<std::string> tokenString(const json& cfg, const char* key) {
    const json* v = field(cfg, key);
    if (!v) return std::nullopt;
    if (v->is_string()) return v->get<std::string>();
    if (v->is_object()) {
        if (const json* c = field(*v, "content"); c && c->is_string()) return c->get<std::string>();
    }
    fail(ErrorKind::InvalidFile, std::string("tokenizer_config.json: ") + key + " must be a string or {\"content\": ...}");
}

TokenizerConfig parseConfig(std::string_view text) {
    TokenizerConfig c;
    if (text.empty()) return c;
    json cfg;
    try {
        cfg = json::parse(text);
    } catch (const json::exception& e) {
        fail(ErrorKind::InvalidFile, std::string("tokenizer_config.json: not valid JSON: ") + e.what());
    }
    if (!cfg.is_object()) fail(ErrorKind::InvalidFile, "tokenizer_config.json: top level must be an object");
    c.bosToken = tokenString(cfg, "bos_token");
    c.eosToken = tokenString(cfg, "eos_token");
    c.padToken = tokenString(cfg, "pad_token");
    c.unkToken = tokenString(cfg, "unk_token");
    auto flag = [&](const char* key, bool& out) {
        if (const json* v = field(cfg, key); v && v->is_boolean()) out = v->get<bool>();
    };
    flag("add_bos_token", c.addBosToken);
    flag("add_eos_token", c.addEosToken);
    flag("clean_up_tokenization_spaces", c.cleanUpTokenizationSpaces);
    if (const json* v = field(cfg, "model_max_length"); v && v->is_number()) {
        double d = v->get<double>();  // transformers writes 1e30 for "no limit"
        if (d >= 0 && d < 9.2e18) c.modelMaxLength = uint64_t(d);
    }
    if (const json* v = field(cfg, "chat_template")) {
        if (v->is_string()) {
            c.chatTemplate = v->get<std::string>();
        } else if (v->is_array()) {
            for (const json& e : *v) {
                if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") || !e["template"].is_string())
                    fail(ErrorKind::InvalidFile, "tokenizer_config.json: chat_template list items must be {name, template}");
                c.namedChatTemplates[e["name"].get<std::string>()] = e["template"].get<std::string>();
            }
            if (auto it = c.namedChatTemplates.find("default"); it != c.namedChatTemplates.end()) c.chatTemplate = it->second;
        } else {
            fail(ErrorKind::InvalidFile, "tokenizer_config.json: chat_template must be a string or a list");
        }
    }
    if (const json* v = field(cfg, "additional_special_tokens"); v && v->is_array()) {
        for (const json& e : *v) {
            if (e.is_string()) c.additionalSpecialTokens.push_back(e.get<std::string>());
            else if (e.is_object() && e.contains("content") && e["content"].is_string()) c.additionalSpecialTokens.push_back(e["content"].get<std::string>());
        }
    }
    return c;
}

std::string readFile(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) fail(ErrorKind::NotFound, "cannot open " + p.string());
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) fail(ErrorKind::Io, "cannot read " + p.string());
    return ss.str();
}

}  // namespace

Tokenizer Tokenizer::fromJson(std::string_view tokenizerJson, std::string_view tokenizerConfigJson) {
    json root;
    try {
        root = json::parse(tokenizerJson);
    } catch (const json::exception& e) {
        bad(std::string("not valid JSON: ") + e.what());
    }
    if (!root.is_object()) bad("top level must be an object");
    auto t = std::make_shared<TokenizerInfo>();

    if (const json* n = field(root, "normalizer")) {
        bool emptySequence = n->is_object() && typeOf(*n, "normalizer") == "Sequence" && n->contains("normalizers") &&
                             (*n)["normalizers"].is_array() && (*n)["normalizers"].empty();
        if (!emptySequence) unsupported("normalizer " + typeOf(*n, "normalizer") + " is not supported (GLM uses none)");
    }
    loadPreTokenizer(field(root, "pre_tokenizer"), *t);
    std::unordered_map<std::string, TokenId> vocab;
    loadModel(root, *t, vocab);
    std::unordered_map<TokenId, std::string> vocabById;
    vocabById.reserve(vocab.size());
    for (const auto& [tok, id] : vocab) vocabById.emplace(id, tok);
    loadAddedTokens(root, *t, vocab, vocabById);
    loadDecoder(field(root, "decoder"));
    loadPostProcessor(field(root, "post_processor"), *t);

    // Per-id tables for decode.
    TokenId maxId = -1;
    for (const auto& [tok, id] : vocab) maxId = std::max(maxId, id);
    for (const auto& e : t->added) maxId = std::max(maxId, e->id);
    const size_t n = size_t(maxId + 1);
    t->idToken.assign(n, {});
    t->idBytes.assign(n, {});
    t->idFlags.assign(n, 0);
    for (const auto& [tok, id] : vocab) {
        t->idToken[size_t(id)] = tok;
        t->idBytes[size_t(id)] = byteLevelDecodeToken(tok);
        t->idFlags[size_t(id)] = TokenizerInfo::kKnown;
    }
    for (const auto& e : t->added) {
        t->idToken[size_t(e->id)] = e->content;
        t->idBytes[size_t(e->id)] = byteLevelDecodeToken(e->content);
        t->idFlags[size_t(e->id)] = uint8_t(TokenizerInfo::kKnown | TokenizerInfo::kAdded | (e->special ? TokenizerInfo::kSpecial : 0));
    }
    t->config = parseConfig(tokenizerConfigJson);
    return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::fromFile(const std::filesystem::path& tokenizerJson) {
    return fromJson(readFile(tokenizerJson));
}

Tokenizer Tokenizer::fromDirectory(const std::filesystem::path& dir) {
    std::string cfg;
    if (std::filesystem::exists(dir / "tokenizer_config.json")) cfg = readFile(dir / "tokenizer_config.json");
    Tokenizer tok = fromJson(readFile(dir / "tokenizer.json"), cfg);
    if (std::filesystem::exists(dir / "chat_template.jinja")) {
        auto info = std::const_pointer_cast<TokenizerInfo>(tok.m);  // still unshared: built just above
        info->config.chatTemplate = readFile(dir / "chat_template.jinja");
    }
    return tok;
}

}  // namespace ts
