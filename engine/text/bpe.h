// The BPE model of a byte-level Hugging Face tokenizer: vocabulary, ranked merges, and the merge loop.
// It works on the raw bytes of one pre-token piece; since ByteLevel maps each byte to one character, the
// initial symbols are the ids of the 256 one-character tokens, and merges are pairs of ids. The merge order
// is tokenizers' Word::merge_all exactly: lowest rank first, then leftmost position.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ts {

using TokenId = int32_t;

struct BpeOptions {
    std::optional<std::string> unkToken;
    bool fuseUnk = false;
    bool byteFallback = false;
    bool ignoreMerges = false;
};

class BpeModel {
public:
    // vocab: token (ByteLevel-mapped text) -> id; merges: pairs of tokens in rank order. Throws ts::Error
    // (InvalidFile) for merges whose parts or result are not in the vocabulary, or a missing unk token.
    BpeModel(std::unordered_map<std::string, TokenId> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
             BpeOptions options);

    // Appends the ids of one pre-token piece (raw bytes) to `out`.
    void encodePiece(std::string_view bytes, std::vector<TokenId>& out) const;

    std::optional<TokenId> tokenToId(std::string_view token) const;
    const std::unordered_map<std::string, TokenId>& vocab() const { return m_vocab; }

private:
    struct Merge {
        uint32_t rank;
        TokenId newId;
    };
    static uint64_t pairKey(TokenId a, TokenId b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
    const Merge* findMerge(TokenId a, TokenId b) const;
    void mergeWord(std::string_view bytes, std::vector<TokenId>& out) const;

    std::unordered_map<std::string, TokenId> m_vocab;
    std::unordered_map<uint64_t, Merge> m_merges;
    BpeOptions m_opt;
    std::optional<TokenId> m_unkId;
    TokenId m_byteId[256];      // id of the one-character token of each byte, -1 if absent
    TokenId m_fallbackId[256];  // id of "<0xXX>" (byte_fallback), -1 if absent

    // Piece -> ids cache (pieces repeat a lot in real text). Bounded; guarded because encode is const and
    // may run on several threads.
    mutable std::mutex m_cacheMutex;
    mutable std::unordered_map<std::string, std::vector<TokenId>> m_cache;
};

}  // namespace ts
