// Internal state shared by tokenizer.cpp (encode/decode) and tokenizer_load.cpp (JSON loading).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/bpe.h"
#include "text/tokenizer.h"
#include "text/tokenizer_pretokenizer.h"

namespace ts {

// Ids may be sparse, but tables are indexed by id: refuse absurd ids instead of allocating for them.
inline constexpr TokenId kMaxTokenId = (1 << 24) - 1;

struct TokenizerInfo {
    std::unique_ptr<BpeModel> bpe;

    // Added tokens, and the two matchers of tokenizers' AddedVocabulary: tokens with normalized=false are
    // extracted from the raw text first, normalized ones from what is left (there is no normalizer here,
    // so only the order differs).
    std::vector<std::unique_ptr<AddedTokenEntry>> added;
    std::unordered_map<std::string, const AddedTokenEntry*> addedByContent;
    AddedTokenMatcher rawMatcher, normalizedMatcher;

    // Pre-tokenizer: Split rules in order, then ByteLevel.
    std::vector<SplitRule> splits;
    bool addPrefixSpace = false;
    std::unique_ptr<Pcre2Regex> byteLevelRegex;  // ByteLevel use_regex (GPT-2 pattern), else null

    // Post-processor (TemplateProcessing, single sequence): ids around the text when addSpecialTokens.
    std::vector<TokenId> templatePrefix, templateSuffix;

    // Per id: token text as stored, bytes it decodes to, flags.
    std::vector<std::string> idToken;
    std::vector<std::string> idBytes;
    enum : uint8_t { kKnown = 1, kSpecial = 2, kAdded = 4 };
    std::vector<uint8_t> idFlags;

    TokenizerConfig config;

    // encode helpers (tokenizer.cpp)
    void encodePlain(std::string_view text, std::vector<TokenId>& out) const;
    void encodeWellFormed(std::string_view run, std::vector<TokenId>& out) const;
    void byteLevelStage(std::string_view piece, bool wellFormed, std::vector<TokenId>& out) const;
};

}  // namespace ts
