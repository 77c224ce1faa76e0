// The paged block pool's bookkeeping (the nano-vllm BlockManager): which physical blocks each sequence owns,
// their reference counts, the prefix cache over full blocks, and the KDA state-snapshot slots that make a
// prefix hit usable. No memory is touched here; the model runner owns the tensors these ids index.
//
// Blocks. A block holds blockSize consecutive tokens of one sequence; token t of a sequence lives in block
// blockTable[t / blockSize] at offset t % blockSize. Only full blocks whose tokens are all computed are
// shared, so a shared block is never written again; the partial last block is always private.
//
// Prefix cache. A full computed block gets the chained hash h_i = H(h_{i-1}, tokens of block i) (a 64-bit
// hash written here; h_{-1} is a fixed seed) and is registered in a hash -> block map. A lookup walks the
// chain from block 0 and accepts block i only if (a) the map has h_i, (b) that block's stored tokens equal
// the sequence's, and (c) its recorded parent is the block accepted at i-1 (id and reuse generation). By
// induction an accepted chain is exactly the sequence's prefix, whatever the hash collides with: the hash is
// only an index. If the same chain is already registered (a concurrent sequence computed the same prefix,
// or one that recomputed a cached prefix for want of a snapshot), the first block keeps the entry, the later
// one stays private and remembers its registered twin so that the chain continues through it; after a hash
// collision the later chain stays private from there on. A block whose reference
// count drops to 0 keeps its hash and goes to an LRU list (a sequence's blocks are released last-first, so
// a prefix outlives its tail); it is evicted, oldest first, only when no never-cached block is free.
// Hits are block aligned and capped at numTokens - 1: the last prompt token is always computed, because
// its logits are needed.
//
// KDA snapshots. Recurrent layers cannot resume from KV blocks alone: resuming at token boundary b needs the
// recurrent state after exactly b tokens. numSnapshotSlots state slots (the runner allocates the memory)
// hold such states, each tied to the cached block that ends at its boundary; a slot lives no longer than
// that block's cache entry and is reused LRU-first among slots whose block nobody references. A prefix hit
// of k blocks is used only up to the longest matched boundary j <= k with a snapshot (restoreSnapshot names
// it; -1 = cold start from token 0). The matched blocks past j are not shared: the sequence recomputes them
// into private blocks (recomputation in another batch need not be bit-identical, and shared blocks must
// never be rewritten).
// Policy: one snapshot per allocation, at the last full-block boundary before the last token,
// B = floor((numTokens - 1) / blockSize) * blockSize, if B is beyond the restored boundary. That is the
// longest hit any later request can use for this prompt: a regenerate of the same prompt restores at B, a
// follow-up chat turn that resends this history restores at B and computes only the new tokens.
// The scheduler cuts the prefill chunk at B (snapshotBoundary), asks for a slot when it schedules the chunk
// that ends there (snapshotSlotToCapture), the runner writes the state into that slot after the chunk, and
// commitComputed ties the slot to the cached block ending at B (the sequence's own, or the cached twin of
// a prefix it had to recompute for want of a snapshot).
// Without recurrent layers (gateHitsOnSnapshots = false) hits are not gated and no snapshots are taken.
//
// Not thread safe: the engine thread drives it between steps.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/sequence.h"

namespace ts {

class BlockManager {
public:
    BlockManager(int32_t numBlocks, int32_t blockSize, int32_t numSnapshotSlots, bool gateHitsOnSnapshots = true);

    struct Allocation {
        int64_t cachedTokens = 0;     // prefix tokens served from the cache (block aligned, snapshot gated)
        int32_t restoreSnapshot = -1;  // snapshot slot to load into the sequence's state first; -1 = cold
    };

    // The usable prefix hit (tokens) allocate() would give seq now; takes nothing, counts no query.
    int64_t cachedPrefix(const Sequence& seq) const { return int64_t(usableHits(matchPrefix(seq))) * m_blockSize; }
    // Blocks for tokens [0, seq.numTokens()) less the usable prefix hit. Nothing in between can fail.
    bool canAllocate(const Sequence& seq) const;
    // Fills seq.blockTable, numCachedPrompt = numComputed = cachedTokens, and the snapshot policy fields.
    // seq must own no blocks. Counts the lookup in prefixQueries / prefixHits (tokens, as vLLM counts).
    Allocation allocate(Sequence& seq);
    // Blocks so that seq can hold totalTokens tokens (decode growth).
    bool canGrow(const Sequence& seq, int64_t totalTokens) const;
    void grow(Sequence& seq, int64_t totalTokens);
    // After a step advanced seq.numComputed: registers the blocks that became full and computed, and ties a
    // captured snapshot to its block once the sequence has computed past its boundary.
    void commitComputed(Sequence& seq);
    // The token count at which seq should capture its snapshot, or -1 (none, or already captured).
    int64_t snapshotBoundary(const Sequence& seq) const;
    // Reserves (once) the slot the runner must write seq's state into after computing exactly
    // snapshotBoundary(seq) tokens; -1 when no snapshot is due or every slot is pinned by a live sequence.
    int32_t snapshotSlotToCapture(Sequence& seq);
    // Releases seq's blocks (last first) and any reserved slot; resets blockTable, numComputed,
    // numCachedPrompt and the snapshot fields. Safe on a sequence that owns nothing.
    void deallocate(Sequence& seq);
    // Drops every cache entry and snapshot that no live sequence references (vLLM's reset_prefix_cache).
    void resetPrefixCache();

    int32_t numBlocks() const { return int32_t(m_blocks.size()); }
    int32_t blockSize() const { return m_blockSize; }
    int32_t numFreeBlocks() const { return int32_t(m_free.size()) + m_lruSize; }  // free + cached-evictable
    int32_t numCachedBlocks() const { return int32_t(m_map.size()); }
    double usage() const { return 1.0 - double(numFreeBlocks()) / double(numBlocks()); }
    int64_t prefixQueries() const { return m_queries; }
    int64_t prefixHits() const { return m_hits; }
    int32_t numSnapshotSlots() const { return int32_t(m_slots.size()); }
    int32_t numSnapshotSlotsInUse() const;  // holding a snapshot or reserved for a capture
    int32_t refCount(int32_t block) const { return m_blocks[size_t(block)].refs; }
    // Throws ts::Error(Internal) naming the first broken invariant (free lists, LRU, map, slots).
    void verifyInvariants() const;

    // Test hook: Constant makes every hash equal, TokensOnly drops the parent from the chain, to prove that
    // the token and parent checks, not the hash, decide a hit.
    enum class HashMode : uint8_t { Chained, TokensOnly, Constant };
    void setHashModeForTesting(HashMode m) { m_hashMode = m; }

private:
    struct Block {
        int32_t refs = 0;
        uint32_t gen = 0;          // bumped each time the block is taken for new content
        bool hashed = false;       // full, computed, hash and tokens below are set
        bool registered = false;   // the map's entry for `hash`
        uint64_t hash = 0;
        int32_t parent = -1;       // canonical block before it in the chain (-1 = first block)
        uint32_t parentGen = 0;
        int32_t canon = -1;        // registered block holding the same chain: itself, a cached twin, or -1
        uint32_t canonGen = 0;
        std::vector<int32_t> tokens;
        int32_t slot = -1;         // snapshot slot tied to this block's end boundary
        int32_t lruPrev = -1, lruNext = -1;
        bool inLru = false;
    };
    struct Slot {
        int32_t block = -1;        // valid snapshot: the registered block ending at its boundary
        int64_t pendingSeq = -1;   // reserved for this sequence's capture
        uint64_t lastUse = 0;
    };

    uint64_t hashBlock(uint64_t parentHash, const int32_t* tokens) const;
    std::vector<int32_t> matchPrefix(const Sequence& seq) const;  // accepted chain, ungated, capped
    int32_t canonical(int32_t b) const;  // the registered block standing for b's content and chain, or -1
    bool canonicalGenMismatch(int32_t b) const;  // b's recorded parent was evicted or reused since
    int32_t usableHits(const std::vector<int32_t>& chain) const;   // blocks usable under the snapshot gate
    int32_t takeBlock();
    void releaseBlock(int32_t b);
    void lruPush(int32_t b);
    void lruRemove(int32_t b);
    void unregister(int32_t b);
    void freeSlot(int32_t s);
    int64_t blocksFor(int64_t tokens) const { return (tokens + m_blockSize - 1) / m_blockSize; }

    int32_t m_blockSize;
    bool m_gate;
    HashMode m_hashMode = HashMode::Chained;
    std::vector<Block> m_blocks;
    std::vector<int32_t> m_free;  // never-cached free blocks (a stack)
    int32_t m_lruHead = -1, m_lruTail = -1, m_lruSize = 0;  // head = oldest
    std::unordered_map<uint64_t, int32_t> m_map;
    std::vector<Slot> m_slots;
    uint64_t m_tick = 0;
    int64_t m_queries = 0, m_hits = 0;
};

}  // namespace ts
