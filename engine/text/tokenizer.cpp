#include "text/tokenizer.h"

#include "core/error.h"
#include "text/byte_level.h"
#include "text/tokenizer_internal.h"

namespace ts {

// ---- encode ---------------------------------------------------------------------------------------------

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool allowSpecial, bool addSpecialTokens) const {
    const TokenizerInfo& t = *m;
    std::vector<TokenId> out;
    out.reserve(text.size() / 3 + 8);
    if (addSpecialTokens) out.insert(out.end(), t.templatePrefix.begin(), t.templatePrefix.end());

    // AddedVocabulary::extract_and_normalize: raw-matched tokens first, then the normalized ones in what
    // is left. Pieces without a token go through the pre-tokenizer and the model.
    std::vector<AddedTokenMatcher::Split> outer, inner;
    t.rawMatcher.split(text, !allowSpecial, outer);
    for (const auto& s : outer) {
        if (s.token) {
            out.push_back(s.token->id);
            continue;
        }
        std::string_view seg = text.substr(s.begin, s.end - s.begin);
        inner.clear();
        t.normalizedMatcher.split(seg, !allowSpecial, inner);
        for (const auto& s2 : inner) {
            if (s2.token)
                out.push_back(s2.token->id);
            else
                t.encodePlain(seg.substr(s2.begin, s2.end - s2.begin), out);
        }
    }
    if (addSpecialTokens) out.insert(out.end(), t.templateSuffix.begin(), t.templateSuffix.end());
    return out;
}

void TokenizerInfo::encodePlain(std::string_view text, std::vector<TokenId>& out) const {
    // Well-formed runs go through the regex pre-tokenizer; each byte of an ill-formed sequence is a piece
    // of its own (see tokenizer.h).
    size_t runStart = 0;
    size_t i = 0;
    while (i < text.size()) {
        Utf8Step st = utf8Step(text, i);
        if (st.kind == Utf8Step::Valid) {
            i += st.length;
            continue;
        }
        if (runStart < i) encodeWellFormed(text.substr(runStart, i - runStart), out);
        for (size_t k = 0; k < st.length; ++k) byteLevelStage(text.substr(i + k, 1), false, out);
        i += st.length;
        runStart = i;
    }
    if (runStart < text.size()) encodeWellFormed(text.substr(runStart), out);
}

void TokenizerInfo::encodeWellFormed(std::string_view run, std::vector<TokenId>& out) const {
    if (splits.empty()) {
        byteLevelStage(run, true, out);
        return;
    }
    // Each Split rule refines the pieces of the previous one (PreTokenizedString::split).
    std::vector<std::pair<size_t, size_t>> pieces{{0, run.size()}}, next, tmp;
    for (const SplitRule& rule : splits) {
        next.clear();
        for (auto [b, e] : pieces) {
            tmp.clear();
            rule.apply(run.substr(b, e - b), tmp);
            for (auto [pb, pe] : tmp) next.emplace_back(b + pb, b + pe);
        }
        pieces.swap(next);
    }
    for (auto [b, e] : pieces) byteLevelStage(run.substr(b, e - b), true, out);
}

void TokenizerInfo::byteLevelStage(std::string_view piece, bool wellFormed, std::vector<TokenId>& out) const {
    std::string withSpace;
    if (addPrefixSpace && (piece.empty() || piece.front() != ' ')) {
        withSpace.reserve(piece.size() + 1);
        withSpace.push_back(' ');
        withSpace.append(piece);
        piece = withSpace;
    }
    if (byteLevelRegex && wellFormed) {
        std::vector<std::pair<size_t, size_t>> sub;
        SplitRule::applyIsolated(*byteLevelRegex, piece, sub);
        for (auto [b, e] : sub) bpe->encodePiece(piece.substr(b, e - b), out);
        return;
    }
    bpe->encodePiece(piece, out);
}

std::vector<std::string> Tokenizer::preTokenize(std::string_view text) const {
    // Same path as encodePlain, collecting the pieces instead of encoding them.
    std::vector<std::string> pieces;
    const TokenizerInfo& t = *m;
    auto addRun = [&](std::string_view run) {
        std::vector<std::pair<size_t, size_t>> ps{{0, run.size()}}, next, tmp;
        for (const SplitRule& rule : t.splits) {
            next.clear();
            for (auto [b, e] : ps) {
                tmp.clear();
                rule.apply(run.substr(b, e - b), tmp);
                for (auto [pb, pe] : tmp) next.emplace_back(b + pb, b + pe);
            }
            ps.swap(next);
        }
        for (auto [b, e] : ps) pieces.emplace_back(run.substr(b, e - b));
    };
    size_t runStart = 0, i = 0;
    while (i < text.size()) {
        Utf8Step st = utf8Step(text, i);
        if (st.kind == Utf8Step::Valid) {
            i += st.length;
            continue;
        }
        if (runStart < i) addRun(text.substr(runStart, i - runStart));
        for (size_t k = 0; k < st.length; ++k) pieces.emplace_back(text.substr(i + k, 1));
        i += st.length;
        runStart = i;
    }
    if (runStart < text.size()) addRun(text.substr(runStart));
    return pieces;
}

// ---- decode ---------------------------------------------------------------------------------------------

std::string Tokenizer::decodeBytes(std::span<const TokenId> ids, bool skipSpecial) const {
    const TokenizerInfo& t = *m;
    std::string out;
    for (TokenId id : ids) {
        if (id < 0 || size_t(id) >= t.idFlags.size()) continue;  // unknown ids are skipped, as in the reference
        uint8_t f = t.idFlags[size_t(id)];
        if (!(f & TokenizerInfo::kKnown) || (skipSpecial && (f & TokenizerInfo::kSpecial))) continue;
        out += t.idBytes[size_t(id)];
    }
    return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skipSpecial) const {
    return utf8Lossy(decodeBytes(ids, skipSpecial));
}

const std::string& Tokenizer::tokenBytes(TokenId id) const {
    static const std::string empty;
    const TokenizerInfo& t = *m;
    if (id < 0 || size_t(id) >= t.idFlags.size() || !(t.idFlags[size_t(id)] & TokenizerInfo::kKnown)) return empty;
    return t.idBytes[size_t(id)];
}

// ---- lookups --------------------------------------------------------------------------------------------

std::optional<TokenId> Tokenizer::tokenToId(std::string_view token) const {
    auto it = m->addedByContent.find(std::string(token));
    if (it != m->addedByContent.end()) return it->second->id;
    return m->bpe->tokenToId(token);
}

std::optional<std::string> Tokenizer::idToToken(TokenId id) const {
    if (id < 0 || size_t(id) >= m->idFlags.size() || !(m->idFlags[size_t(id)] & TokenizerInfo::kKnown)) return std::nullopt;
    return m->idToken[size_t(id)];
}

bool Tokenizer::isSpecial(TokenId id) const {
    return id >= 0 && size_t(id) < m->idFlags.size() && (m->idFlags[size_t(id)] & TokenizerInfo::kSpecial);
}

bool Tokenizer::isAddedToken(TokenId id) const {
    return id >= 0 && size_t(id) < m->idFlags.size() && (m->idFlags[size_t(id)] & TokenizerInfo::kAdded);
}

size_t Tokenizer::vocabSize() const { return m->idFlags.size(); }

const TokenizerConfig& Tokenizer::config() const { return m->config; }

std::optional<TokenId> Tokenizer::eosId() const {
    return m->config.eosToken ? tokenToId(*m->config.eosToken) : std::nullopt;
}
std::optional<TokenId> Tokenizer::padId() const {
    return m->config.padToken ? tokenToId(*m->config.padToken) : std::nullopt;
}
std::optional<TokenId> Tokenizer::bosId() const {
    return m->config.bosToken ? tokenToId(*m->config.bosToken) : std::nullopt;
}

// ---- streaming ------------------------------------------------------------------------------------------

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skipSpecial)
    : m_tok(tokenizer), m_skipSpecial(skipSpecial) {}

std::string StreamingDetokenizer::push(TokenId id) {
    if (m_skipSpecial && m_tok.isSpecial(id)) return {};
    // Decoding is a pure function of the concatenated bytes, so buffering the bytes that may still
    // complete a character and emitting the rest gives exactly the full decode, piece by piece.
    m_pending += m_tok.tokenBytes(id);
    return utf8LossyPrefix(m_pending);
}

std::string StreamingDetokenizer::finish() {
    std::string out = utf8Lossy(m_pending);
    m_pending.clear();
    return out;
}

}  // namespace ts
