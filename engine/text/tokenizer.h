// Hugging Face tokenizer for GLM checkpoints: loads tokenizer.json (byte-level BPE) and
// tokenizer_config.json, and encodes/decodes exactly as the `tokenizers` library does (tests/golden/
// test_tokenizer_parity.cpp holds the parity evidence).
//
// Supported tokenizer.json (what GLM-4.x/5.x use, plus neighbours that cost nothing): normalizer null;
// pre_tokenizer = ByteLevel, or Sequence of Split(s) followed by ByteLevel; model BPE (vocab, merges as
// "a b" strings or [a, b] pairs, unk_token, fuse_unk, byte_fallback, ignore_merges); added_tokens with
// special/normalized/lstrip/rstrip/single_word; decoder ByteLevel; post_processor null, ByteLevel or
// TemplateProcessing. Anything else is a ts::Error(Unsupported) at load time; malformed content is
// ts::Error(InvalidFile). Loading never crashes on bad input.
//
// Ill-formed UTF-8 input: the reference cannot receive it (its Python API takes str, and str holding lone
// surrogates raises). Here each byte of an ill-formed sequence becomes its own pre-token, i.e. its
// one-byte token; the well-formed text around it is split as if the bad bytes were not there (they end a
// regex run). So decodeBytes(encode(b)) == b for any bytes b, and valid text is unaffected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/bpe.h"

namespace ts {

// tokenizer_config.json, the fields the engine uses. Token fields accept a plain string or an AddedToken
// object ({"content": ...}).
struct TokenizerConfig {
    std::optional<std::string> bosToken, eosToken, padToken, unkToken;
    std::string chatTemplate;                                  // "default" template, empty if none
    std::map<std::string, std::string> namedChatTemplates;     // list form: name -> template
    std::optional<uint64_t> modelMaxLength;
    bool addBosToken = false;
    bool addEosToken = false;
    bool cleanUpTokenizationSpaces = false;
    std::vector<std::string> additionalSpecialTokens;
};

struct TokenizerInfo;  // internal state (tokenizer.cpp)

class Tokenizer {
public:
    // tokenizer.json content. Throws ts::Error.
    static Tokenizer fromJson(std::string_view tokenizerJson, std::string_view tokenizerConfigJson = {});
    static Tokenizer fromFile(const std::filesystem::path& tokenizerJson);
    // A model folder: tokenizer.json, tokenizer_config.json if present, chat_template.jinja if present
    // (it overrides the config's chat_template, as transformers does).
    static Tokenizer fromDirectory(const std::filesystem::path& dir);

    // Token ids of `text`. allowSpecial: recognise special added tokens written in the text (tokenizers'
    // default); false = tokenizers' encode_special_tokens=True (special tokens are encoded as plain text;
    // non-special added tokens such as <think> are still recognised, as in the reference).
    // addSpecialTokens applies the post-processor (TemplateProcessing); GLM's adds nothing.
    std::vector<TokenId> encode(std::string_view text, bool allowSpecial = true, bool addSpecialTokens = false) const;

    // tokenizers' decode: unknown ids are skipped, special tokens dropped when skipSpecial, byte-level
    // bytes joined and repaired into UTF-8 (one U+FFFD per ill-formed subpart).
    std::string decode(std::span<const TokenId> ids, bool skipSpecial = false) const;
    // The same bytes before UTF-8 repair (lossless for any encode() input).
    std::string decodeBytes(std::span<const TokenId> ids, bool skipSpecial = false) const;
    // The bytes one token stands for (empty for unknown ids).
    const std::string& tokenBytes(TokenId id) const;

    // Pre-token pieces (raw bytes) of text without added tokens, for tests and tools.
    std::vector<std::string> preTokenize(std::string_view text) const;

    std::optional<TokenId> tokenToId(std::string_view token) const;  // vocab or added token text
    std::optional<std::string> idToToken(TokenId id) const;          // as stored in tokenizer.json
    bool isSpecial(TokenId id) const;
    bool isAddedToken(TokenId id) const;
    // One more than the largest id (the model's embedding may be larger).
    size_t vocabSize() const;

    const TokenizerConfig& config() const;
    std::optional<TokenId> eosId() const;
    std::optional<TokenId> padId() const;
    std::optional<TokenId> bosId() const;

private:
    explicit Tokenizer(std::shared_ptr<const TokenizerInfo> info) : m(std::move(info)) {}
    std::shared_ptr<const TokenizerInfo> m;
};

// Incremental decode for streaming generation: push() returns the text that became final with this token.
// The concatenation of all push() results and finish() equals tokenizer.decode(all ids, skipSpecial)
// exactly; no output ever ends inside a UTF-8 character (incomplete bytes wait for the next token and are
// flushed as U+FFFD by finish(), as the full decode would).
class StreamingDetokenizer {
public:
    explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skipSpecial = false);
    std::string push(TokenId id);
    std::string finish();
    bool hasPending() const { return !m_pending.empty(); }

private:
    Tokenizer m_tok;  // cheap copy (shared state)
    bool m_skipSpecial;
    std::string m_pending;
};

}  // namespace ts
