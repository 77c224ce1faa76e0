#include "text/bpe.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "text/byte_level.h"

namespace ts {

namespace {
constexpr size_t kCacheMaxEntries = size_t(1) << 17;
constexpr size_t kCacheMaxPieceBytes = 256;  // long pieces (whitespace runs) rarely repeat
}  // namespace

BpeModel::BpeModel(std::unordered_map<std::string, TokenId> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options)
    : m_vocab(std::move(vocab)), m_opt(std::move(options)) {
    const ByteLevelTable& table = byteLevelTable();
    for (size_t b = 0; b < 256; ++b) {
        auto it = m_vocab.find(table.byteToUtf8[b]);
        m_byteId[b] = it == m_vocab.end() ? -1 : it->second;
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", unsigned(b));
        auto fb = m_vocab.find(name);
        m_fallbackId[b] = fb == m_vocab.end() ? -1 : fb->second;
    }
    if (m_opt.unkToken) {
        auto it = m_vocab.find(*m_opt.unkToken);
        if (it == m_vocab.end())
            fail(ErrorKind::InvalidFile, "tokenizer.json: model.unk_token '" + *m_opt.unkToken + "' is not in the vocabulary");
        m_unkId = it->second;
    }
    m_merges.reserve(merges.size());
    std::string joined;
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto& [a, b] = merges[rank];
        auto ia = m_vocab.find(a);
        auto ib = m_vocab.find(b);
        joined = a;
        joined += b;
        auto ij = m_vocab.find(joined);
        const std::string* missing = ia == m_vocab.end() ? &a : ib == m_vocab.end() ? &b : ij == m_vocab.end() ? &joined : nullptr;
        if (missing)
            fail(ErrorKind::InvalidFile, "tokenizer.json: merge #" + std::to_string(rank) + " ('" + a + "' '" + b +
                                             "') uses '" + *missing + "', which is not in the vocabulary");
        // A repeated pair keeps the later rank, as tokenizers' HashMap collect does.
        m_merges[pairKey(ia->second, ib->second)] = Merge{uint32_t(rank), ij->second};
    }
}

std::optional<TokenId> BpeModel::tokenToId(std::string_view token) const {
    auto it = m_vocab.find(std::string(token));
    if (it == m_vocab.end()) return std::nullopt;
    return it->second;
}

const BpeModel::Merge* BpeModel::findMerge(TokenId a, TokenId b) const {
    auto it = m_merges.find(pairKey(a, b));
    return it == m_merges.end() ? nullptr : &it->second;
}

void BpeModel::encodePiece(std::string_view bytes, std::vector<TokenId>& out) const {
    if (bytes.empty()) return;
    if (m_opt.ignoreMerges) {
        auto it = m_vocab.find(byteLevelEncode(bytes));
        if (it != m_vocab.end()) {
            out.push_back(it->second);
            return;
        }
    }
    const bool cacheable = bytes.size() < kCacheMaxPieceBytes;
    std::string key;
    if (cacheable) {
        key.assign(bytes);
        std::lock_guard lock(m_cacheMutex);
        auto it = m_cache.find(key);
        if (it != m_cache.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    size_t start = out.size();
    mergeWord(bytes, out);
    if (cacheable) {
        std::lock_guard lock(m_cacheMutex);
        if (m_cache.size() < kCacheMaxEntries)
            m_cache.emplace(std::move(key), std::vector<TokenId>(out.begin() + std::ptrdiff_t(start), out.end()));
    }
}

void BpeModel::mergeWord(std::string_view bytes, std::vector<TokenId>& out) const {
    struct Symbol {
        TokenId id;
        int prev, next;
        bool alive;
    };
    std::vector<Symbol> sym;
    sym.reserve(bytes.size() + 1);
    auto add = [&](TokenId id) {
        int n = int(sym.size());
        if (n > 0) sym.back().next = n;
        sym.push_back(Symbol{id, n - 1, -1, true});
    };

    // Initial symbols, mirroring tokenizers' BPE::merge_word over the ByteLevel-mapped characters (one per
    // byte). Unknown characters: byte fallback first, then the (possibly fused) unk token, else dropped.
    // Note the reference's ordering quirk kept here: a pending unk is emitted only at the next known
    // character (or the end), i.e. after any byte-fallback ids that came in between.
    const ByteLevelTable& table = byteLevelTable();
    std::optional<TokenId> pendingUnk;
    for (unsigned char b : bytes) {
        if (m_byteId[b] >= 0) {
            if (pendingUnk) add(*pendingUnk), pendingUnk.reset();
            add(m_byteId[b]);
            continue;
        }
        if (m_opt.byteFallback) {
            // The fallback spells the bytes of the mapped character, as the reference does.
            const std::string& mapped = table.byteToUtf8[b];
            bool all = std::all_of(mapped.begin(), mapped.end(), [&](char c) { return m_fallbackId[static_cast<unsigned char>(c)] >= 0; });
            if (all) {
                for (char c : mapped) add(m_fallbackId[static_cast<unsigned char>(c)]);
                continue;
            }
        }
        if (m_unkId) {
            if (pendingUnk && !m_opt.fuseUnk) add(*pendingUnk);
            pendingUnk = *m_unkId;
        }
    }
    if (pendingUnk) add(*pendingUnk);

    // Word::merge_all: a heap of candidate merges ordered by (rank, position); stale entries are skipped
    // by re-checking that the pair at that position still yields the same new id.
    struct Cand {
        uint32_t rank;
        int pos;
        TokenId newId;
    };
    auto worse = [](const Cand& x, const Cand& y) { return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos; };
    std::vector<Cand> heap;
    heap.reserve(sym.size());
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
        if (const Merge* m = findMerge(sym[i].id, sym[i + 1].id)) heap.push_back(Cand{m->rank, int(i), m->newId});
    }
    std::make_heap(heap.begin(), heap.end(), worse);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), worse);
        Cand top = heap.back();
        heap.pop_back();
        Symbol& cur = sym[size_t(top.pos)];
        if (!cur.alive || cur.next < 0) continue;
        const int nextPos = cur.next;
        const Symbol right = sym[size_t(nextPos)];
        const Merge* m = findMerge(cur.id, right.id);
        if (!m || m->newId != top.newId) continue;
        cur.id = top.newId;
        cur.next = right.next;
        sym[size_t(nextPos)].alive = false;
        if (right.next >= 0) sym[size_t(right.next)].prev = top.pos;
        if (cur.prev >= 0) {
            if (const Merge* pm = findMerge(sym[size_t(cur.prev)].id, cur.id)) {
                heap.push_back(Cand{pm->rank, cur.prev, pm->newId});
                std::push_heap(heap.begin(), heap.end(), worse);
            }
        }
        if (cur.next >= 0) {
            if (const Merge* nm = findMerge(cur.id, sym[size_t(cur.next)].id)) {
                heap.push_back(Cand{nm->rank, top.pos, nm->newId});
                std::push_heap(heap.begin(), heap.end(), worse);
            }
        }
    }
    for (const Symbol& s : sym) {
        if (s.alive) out.push_back(s.id);
    }
}

}  // namespace ts
