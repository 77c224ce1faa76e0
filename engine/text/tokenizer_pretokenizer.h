// Splitting text before BPE, as Hugging Face `tokenizers` does it for byte-level models: first the added
// tokens (leftmost-longest, like its Aho-Corasick matcher), then each Split pre-tokenizer (a regex run with
// PCRE2 in UTF + UCP mode; tokenizers uses Oniguruma, whose syntax the GLM/GPT patterns share), then
// ByteLevel. Pieces are byte ranges; the regex only ever sees well-formed UTF-8 (see Tokenizer::encode for
// what happens to ill-formed bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/bpe.h"

namespace ts {

// An Oniguruma pattern (as tokenizer.json holds) rewritten for PCRE2 so that \p{L}, \p{N}, \s and \S mean
// what they mean in Oniguruma's Unicode 16 tables (see tokenizer_unicode16.h).
std::string onigToPcre2(std::string_view pattern);

// A compiled PCRE2 pattern (JIT when available), safe to use from several threads.
class Pcre2Regex {
public:
    // Throws ts::Error(InvalidFile) naming `what` if the pattern does not compile.
    Pcre2Regex(const std::string& pattern, const std::string& what);
    ~Pcre2Regex();
    Pcre2Regex(const Pcre2Regex&) = delete;
    Pcre2Regex& operator=(const Pcre2Regex&) = delete;

    // All matches in `text` (well-formed UTF-8) as [begin, end) byte ranges, iterated the way the onig
    // crate's find_iter does: an empty match right where the previous match ended is skipped.
    void findAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

private:
    void* m_code = nullptr;  // pcre2_code_8*, kept opaque so that pcre2.h stays out of this header
    bool m_jit = false;
};

// tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct SplitRule {
    std::unique_ptr<Pcre2Regex> regex;
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
    // Splits `text` into pieces (byte ranges relative to text), as NormalizedString::split does.
    void apply(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
        split(*regex, behavior, invert, text, out);
    }
    static void split(const Pcre2Regex& re, SplitBehavior behavior, bool invert, std::string_view text,
                      std::vector<std::pair<size_t, size_t>>& out);
    static void applyIsolated(const Pcre2Regex& re, std::string_view text, std::vector<std::pair<size_t, size_t>>& out) {
        split(re, SplitBehavior::Isolated, false, text, out);
    }
};

struct AddedTokenEntry {
    std::string content;
    TokenId id = -1;
    bool special = false;
    bool normalized = true;
    bool lstrip = false;
    bool rstrip = false;
    bool singleWord = false;
};

// Finds added tokens in text: leftmost match, longest among those starting there, then continue after it.
class AddedTokenMatcher {
public:
    void build(const std::vector<const AddedTokenEntry*>& tokens);
    bool empty() const { return m_nodes.size() <= 1; }

    struct Split {
        size_t begin, end;
        const AddedTokenEntry* token;  // null for plain text
    };
    // tokenizers' AddedVocabulary::find_matches. With skipSpecial, special tokens found are left in the
    // text (encode_special_tokens = true); their span is still consumed by the scan, as in the reference.
    void split(std::string_view text, bool skipSpecial, std::vector<Split>& out) const;

private:
    struct Node {
        std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
        const AddedTokenEntry* token = nullptr;
    };
    int child(int node, unsigned char b) const;
    std::vector<Node> m_nodes{1};
    bool m_firstByte[256] = {};
};

}  // namespace ts
