#include "cache/block_manager.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ts {

namespace {

// xxh64's primes and round; any decent 64-bit mix would do, since a hit never trusts the hash alone.
constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kRootHash = 0x27D4EB2F165667C5ULL;  // h_{-1}: the parent of every first block

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t fmix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33;
    return h;
}

[[noreturn]] void broken(const std::string& what) { fail(ErrorKind::Internal, "BlockManager invariant: " + what); }

}  // namespace

BlockManager::BlockManager(int32_t numBlocks, int32_t blockSize, int32_t numSnapshotSlots, bool gateHitsOnSnapshots)
    : m_blockSize(blockSize), m_gate(gateHitsOnSnapshots) {
    if (numBlocks <= 0 || blockSize <= 0 || numSnapshotSlots < 0)
        fail(ErrorKind::InvalidArgument, "BlockManager: need numBlocks > 0 (got " + std::to_string(numBlocks) +
                                             "), blockSize > 0 (got " + std::to_string(blockSize) +
                                             ") and numSnapshotSlots >= 0 (got " + std::to_string(numSnapshotSlots) +
                                             ")");
    m_blocks.resize(size_t(numBlocks));
    m_free.reserve(size_t(numBlocks));
    for (int32_t b = numBlocks - 1; b >= 0; --b) m_free.push_back(b);  // hand out low ids first
    m_slots.resize(size_t(numSnapshotSlots));
}

uint64_t BlockManager::hashBlock(uint64_t parentHash, const int32_t* tokens) const {
    if (m_hashMode == HashMode::Constant) return 0;
    uint64_t h = fmix((m_hashMode == HashMode::TokensOnly ? kRootHash : parentHash) + kPrime1);
    for (int32_t i = 0; i < m_blockSize; ++i) h = rotl(h ^ (uint64_t(uint32_t(tokens[i])) * kPrime2), 31) * kPrime1;
    return fmix(h ^ uint64_t(m_blockSize));
}

std::vector<int32_t> BlockManager::matchPrefix(const Sequence& seq) const {
    std::vector<int32_t> chain;
    if (seq.numTokens() < 1) return chain;
    const int64_t maxBlocks = (seq.numTokens() - 1) / m_blockSize;  // the last token is always computed
    uint64_t h = kRootHash;
    int32_t prev = -1;
    uint32_t prevGen = 0;
    for (int64_t i = 0; i < maxBlocks; ++i) {
        const int32_t* toks = seq.tokens().data() + i * m_blockSize;
        h = hashBlock(h, toks);
        const auto it = m_map.find(h);
        if (it == m_map.end()) break;
        const Block& b = m_blocks[size_t(it->second)];
        if (b.parent != prev || (prev >= 0 && b.parentGen != prevGen)) break;  // another chain's block
        if (!std::equal(b.tokens.begin(), b.tokens.end(), toks)) break;         // a hash collision
        chain.push_back(it->second);
        prev = it->second;
        prevGen = b.gen;
    }
    return chain;
}

int32_t BlockManager::usableHits(const std::vector<int32_t>& chain) const {
    if (!m_gate) return int32_t(chain.size());
    for (size_t j = chain.size(); j > 0; --j)
        if (m_blocks[size_t(chain[j - 1])].slot >= 0) return int32_t(j);
    return 0;
}

bool BlockManager::canAllocate(const Sequence& seq) const {
    const std::vector<int32_t> chain = matchPrefix(seq);
    const int32_t k = usableHits(chain);
    int64_t available = int64_t(m_free.size()) + m_lruSize;
    for (int32_t i = 0; i < k; ++i)
        if (m_blocks[size_t(chain[size_t(i)])].refs == 0) --available;  // reviving it takes it off the LRU
    return blocksFor(seq.numTokens()) - k <= available;
}

BlockManager::Allocation BlockManager::allocate(Sequence& seq) {
    TS_CHECK(seq.blockTable.empty(), "allocate: sequence " + std::to_string(seq.id()) + " already owns blocks");
    TS_CHECK(seq.numTokens() >= 1, "allocate: empty sequence");
    TS_CHECK(canAllocate(seq), "allocate: not enough free blocks (call canAllocate first)");
    const std::vector<int32_t> chain = matchPrefix(seq);
    const int32_t k = usableHits(chain);

    Allocation a;
    for (int32_t i = 0; i < k; ++i) {
        const int32_t b = chain[size_t(i)];
        if (m_blocks[size_t(b)].refs == 0) lruRemove(b);
        ++m_blocks[size_t(b)].refs;
        seq.blockTable.push_back(b);
    }
    if (k > 0 && m_gate) {
        a.restoreSnapshot = m_blocks[size_t(chain[size_t(k - 1)])].slot;
        m_slots[size_t(a.restoreSnapshot)].lastUse = ++m_tick;
    }
    const int64_t need = blocksFor(seq.numTokens());
    while (int64_t(seq.blockTable.size()) < need) seq.blockTable.push_back(takeBlock());

    a.cachedTokens = int64_t(k) * m_blockSize;
    seq.numCachedPrompt = seq.numComputed = a.cachedTokens;
    m_queries += seq.numTokens();
    m_hits += a.cachedTokens;

    const int64_t boundary = (seq.numTokens() - 1) / m_blockSize * m_blockSize;
    seq.snapshotAt = (m_gate && !m_slots.empty() && boundary > a.cachedTokens) ? boundary : -1;
    seq.snapshotSlot = -1;
    return a;
}

bool BlockManager::canGrow(const Sequence& seq, int64_t totalTokens) const {
    return blocksFor(totalTokens) - int64_t(seq.blockTable.size()) <= int64_t(m_free.size()) + m_lruSize;
}

void BlockManager::grow(Sequence& seq, int64_t totalTokens) {
    TS_CHECK(canGrow(seq, totalTokens), "grow: not enough free blocks (call canGrow first)");
    while (int64_t(seq.blockTable.size()) < blocksFor(totalTokens)) seq.blockTable.push_back(takeBlock());
}

int32_t BlockManager::canonical(int32_t b) const {
    const Block& blk = m_blocks[size_t(b)];
    if (blk.canon < 0) return -1;
    const Block& c = m_blocks[size_t(blk.canon)];
    return c.registered && c.gen == blk.canonGen ? blk.canon : -1;
}

bool BlockManager::canonicalGenMismatch(int32_t b) const {
    const Block& blk = m_blocks[size_t(b)];
    if (blk.parent < 0) return false;
    const Block& p = m_blocks[size_t(blk.parent)];
    return !p.registered || p.gen != blk.parentGen;
}

void BlockManager::commitComputed(Sequence& seq) {
    const std::vector<int32_t>& table = seq.blockTable;
    const int64_t full = std::min(seq.numComputed, seq.numTokens()) / m_blockSize;
    TS_CHECK(full <= int64_t(table.size()), "commitComputed: computed tokens beyond the block table");
    int64_t i = full;  // blocks are hashed in order: find the first one not hashed yet
    while (i > 0 && !m_blocks[size_t(table[size_t(i - 1)])].hashed) --i;
    for (; i < full; ++i) {
        const int32_t id = table[size_t(i)];
        Block& b = m_blocks[size_t(id)];
        const int32_t* toks = seq.tokens().data() + i * m_blockSize;
        b.hashed = true;
        b.tokens.assign(toks, toks + m_blockSize);
        b.canon = -1;
        // The chain runs through canonical (registered) blocks: the sequence's own, or the cached twin of a
        // block it had to recompute privately. Past a block with neither, nothing can be matched any more.
        int32_t parent = -1;
        if (i > 0) {
            const int32_t prevId = table[size_t(i - 1)];
            b.hash = hashBlock(m_blocks[size_t(prevId)].hash, toks);
            parent = canonical(prevId);
            if (parent < 0) continue;
        } else {
            b.hash = hashBlock(kRootHash, toks);
        }
        b.parent = parent;
        b.parentGen = parent >= 0 ? m_blocks[size_t(parent)].gen : 0;
        const auto it = m_map.find(b.hash);
        if (it != m_map.end()) {
            const int32_t oldId = it->second;
            const Block& old = m_blocks[size_t(oldId)];
            if (old.parent == b.parent && old.parentGen == b.parentGen && old.tokens == b.tokens) {
                b.canon = oldId;  // the same prefix is cached already: the first copy keeps the entry
                b.canonGen = old.gen;
                continue;
            }
            // An entry whose parent was evicted since can never be reached again: replace it. Any other is a
            // hash collision; the first comer keeps the entry and this chain stays private from here on.
            const bool stale = canonicalGenMismatch(oldId);
            if (!stale) continue;
            unregister(oldId);
            if (m_blocks[size_t(oldId)].inLru) {
                lruRemove(oldId);
                m_free.push_back(oldId);
            }
        }
        m_map[b.hash] = id;
        b.registered = true;
        b.canon = id;
        b.canonGen = b.gen;
    }

    if (seq.snapshotAt >= 0 && seq.numComputed >= seq.snapshotAt) {
        const int32_t s = seq.snapshotSlot;
        if (s >= 0) {
            TS_CHECK(seq.numComputed == seq.snapshotAt,
                     "commitComputed: the chunk that captured a snapshot did not end at its boundary");
            // Tie it to the cached block that ends at the boundary (the sequence's own or its cached twin).
            const int32_t b = canonical(table[size_t(seq.snapshotAt / m_blockSize - 1)]);
            if (b >= 0 && m_blocks[size_t(b)].slot < 0) {
                m_slots[size_t(s)] = Slot{b, -1, ++m_tick};
                m_blocks[size_t(b)].slot = s;
            } else {
                freeSlot(s);  // not cacheable (collision), or another sequence cached this boundary first
            }
        }
        seq.snapshotAt = -1;
        seq.snapshotSlot = -1;
    }
}

int64_t BlockManager::snapshotBoundary(const Sequence& seq) const {
    return seq.snapshotAt > seq.numComputed ? seq.snapshotAt : -1;
}

int32_t BlockManager::snapshotSlotToCapture(Sequence& seq) {
    if (seq.snapshotSlot >= 0) return seq.snapshotSlot;
    if (snapshotBoundary(seq) < 0) return -1;
    int32_t pick = -1;
    for (size_t s = 0; s < m_slots.size() && pick < 0; ++s)
        if (m_slots[s].block < 0 && m_slots[s].pendingSeq < 0) pick = int32_t(s);
    if (pick < 0) {  // evict the least recently used snapshot whose block no live sequence holds
        for (size_t s = 0; s < m_slots.size(); ++s) {
            const Slot& sl = m_slots[s];
            if (sl.block < 0 || m_blocks[size_t(sl.block)].refs > 0) continue;
            if (pick < 0 || sl.lastUse < m_slots[size_t(pick)].lastUse) pick = int32_t(s);
        }
        if (pick < 0) return -1;
        freeSlot(pick);
    }
    m_slots[size_t(pick)] = Slot{-1, seq.id(), ++m_tick};
    seq.snapshotSlot = pick;
    return pick;
}

void BlockManager::deallocate(Sequence& seq) {
    for (size_t i = seq.blockTable.size(); i > 0; --i) releaseBlock(seq.blockTable[i - 1]);
    seq.blockTable.clear();
    if (seq.snapshotSlot >= 0) freeSlot(seq.snapshotSlot);
    seq.snapshotSlot = -1;
    seq.snapshotAt = -1;
    seq.numComputed = 0;
    seq.numCachedPrompt = 0;
}

void BlockManager::resetPrefixCache() {
    for (size_t b = 0; b < m_blocks.size(); ++b) {
        if (m_blocks[b].refs > 0 || !m_blocks[b].registered) continue;
        lruRemove(int32_t(b));
        unregister(int32_t(b));
        m_free.push_back(int32_t(b));
    }
}

int32_t BlockManager::numSnapshotSlotsInUse() const {
    return int32_t(std::count_if(m_slots.begin(), m_slots.end(),
                                 [](const Slot& s) { return s.block >= 0 || s.pendingSeq >= 0; }));
}

int32_t BlockManager::takeBlock() {
    int32_t b;
    if (!m_free.empty()) {
        b = m_free.back();
        m_free.pop_back();
    } else {
        TS_CHECK(m_lruHead >= 0, "takeBlock: pool exhausted");
        b = m_lruHead;  // the least recently released cached block
        lruRemove(b);
        unregister(b);
    }
    Block& blk = m_blocks[size_t(b)];
    ++blk.gen;
    blk.refs = 1;
    blk.hashed = false;
    blk.parent = -1;
    blk.canon = -1;
    blk.tokens.clear();
    return b;
}

void BlockManager::releaseBlock(int32_t b) {
    Block& blk = m_blocks[size_t(b)];
    TS_CHECK(blk.refs > 0, "releaseBlock: block " + std::to_string(b) + " is not referenced");
    if (--blk.refs > 0) return;
    if (blk.registered) {
        lruPush(b);
    } else {
        blk.hashed = false;
        m_free.push_back(b);
    }
}

void BlockManager::lruPush(int32_t b) {
    Block& blk = m_blocks[size_t(b)];
    blk.lruPrev = m_lruTail;
    blk.lruNext = -1;
    if (m_lruTail >= 0) m_blocks[size_t(m_lruTail)].lruNext = b;
    else m_lruHead = b;
    m_lruTail = b;
    blk.inLru = true;
    ++m_lruSize;
}

void BlockManager::lruRemove(int32_t b) {
    Block& blk = m_blocks[size_t(b)];
    if (!blk.inLru) return;
    if (blk.lruPrev >= 0) m_blocks[size_t(blk.lruPrev)].lruNext = blk.lruNext;
    else m_lruHead = blk.lruNext;
    if (blk.lruNext >= 0) m_blocks[size_t(blk.lruNext)].lruPrev = blk.lruPrev;
    else m_lruTail = blk.lruPrev;
    blk.lruPrev = blk.lruNext = -1;
    blk.inLru = false;
    --m_lruSize;
}

void BlockManager::unregister(int32_t b) {
    Block& blk = m_blocks[size_t(b)];
    if (blk.registered) m_map.erase(blk.hash);
    blk.registered = false;
    blk.hashed = false;
    ++blk.gen;  // children recorded the old generation: they can no longer be reached through this block
    if (blk.slot >= 0) freeSlot(blk.slot);
}

void BlockManager::freeSlot(int32_t s) {
    Slot& sl = m_slots[size_t(s)];
    if (sl.block >= 0) m_blocks[size_t(sl.block)].slot = -1;
    sl = Slot{};
}

void BlockManager::verifyInvariants() const {
    const size_t n = m_blocks.size();
    std::vector<uint8_t> onFree(n, 0);
    for (int32_t b : m_free) {
        if (b < 0 || size_t(b) >= n || onFree[size_t(b)]) broken("free list holds a bad or repeated id");
        onFree[size_t(b)] = 1;
    }
    int32_t lruCount = 0;
    for (int32_t b = m_lruHead, prev = -1; b >= 0; prev = b, b = m_blocks[size_t(b)].lruNext) {
        const Block& blk = m_blocks[size_t(b)];
        if (!blk.inLru || blk.lruPrev != prev) broken("LRU links of block " + std::to_string(b));
        if (++lruCount > int32_t(n)) broken("LRU list loops");
    }
    if (lruCount != m_lruSize) broken("LRU size");
    size_t registered = 0;
    for (size_t b = 0; b < n; ++b) {
        const Block& blk = m_blocks[b];
        const int states = int(blk.refs > 0) + int(blk.inLru) + int(onFree[b]);
        if (blk.refs < 0 || states != 1) broken("block " + std::to_string(b) + " is not in exactly one state");
        if (blk.inLru && !blk.registered) broken("unregistered block " + std::to_string(b) + " on the LRU");
        if (blk.registered) {
            ++registered;
            const auto it = m_map.find(blk.hash);
            if (!blk.hashed || it == m_map.end() || it->second != int32_t(b) ||
                blk.tokens.size() != size_t(m_blockSize))
                broken("registered block " + std::to_string(b) + " does not own its map entry");
        }
        if (blk.slot >= 0 && (size_t(blk.slot) >= m_slots.size() || m_slots[size_t(blk.slot)].block != int32_t(b)))
            broken("block " + std::to_string(b) + " names a snapshot slot that is not its own");
    }
    if (registered != m_map.size()) broken("map entries without a registered block");
    for (size_t s = 0; s < m_slots.size(); ++s) {
        const Slot& sl = m_slots[s];
        if (sl.block >= 0 && sl.pendingSeq >= 0) broken("snapshot slot both valid and reserved");
        if (sl.block >= 0 && (!m_blocks[size_t(sl.block)].registered || m_blocks[size_t(sl.block)].slot != int32_t(s)))
            broken("snapshot slot " + std::to_string(s) + " is tied to a block that is not cached");
    }
}

}  // namespace ts
