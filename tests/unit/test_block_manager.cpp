// BlockManager: the hash chain, hits only on full aligned blocks, the collision guards (forced through the
// hash test hook), ref-counted sharing, LRU eviction order, snapshot gating of hits, and a 1,000-request
// random stress whose every read of a "cached" token is checked against what was written there.
#include <QtTest>

#include <map>
#include <memory>
#include <numeric>
#include <random>

#include "cache/block_manager.h"
#include "core/error.h"

using namespace ts;

namespace {

int64_t g_nextId = 1;

std::unique_ptr<Sequence> seqOf(std::vector<int32_t> tokens) {
    return std::make_unique<Sequence>(g_nextId++, std::move(tokens), SamplingParams{});
}

std::vector<int32_t> range(int32_t from, int32_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), from);
    return v;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// What the scheduler and runner do for a prompt: compute up to the snapshot boundary (capturing there),
// then the rest. Returns the capture slot (or -1).
int32_t prefill(BlockManager& bm, Sequence& s) {
    int32_t slot = -1;
    if (bm.snapshotBoundary(s) > 0) {
        slot = bm.snapshotSlotToCapture(s);
        s.numComputed = s.snapshotAt;
        bm.commitComputed(s);
    }
    s.numComputed = s.numTokens();
    bm.commitComputed(s);
    return slot;
}

// Allocates, prefills and frees: leaves the prompt's blocks in the cache.
int64_t runOnce(BlockManager& bm, const std::vector<int32_t>& tokens) {
    auto s = seqOf(tokens);
    const int64_t cached = bm.allocate(*s).cachedTokens;
    prefill(bm, *s);
    bm.deallocate(*s);
    bm.verifyInvariants();
    return cached;
}

// The hit a prompt would get now, without disturbing the LRU.
int64_t probe(const BlockManager& bm, const std::vector<int32_t>& tokens) { return bm.cachedPrefix(*seqOf(tokens)); }

}  // namespace

class TestBlockManager : public QObject {
    Q_OBJECT

private slots:
    void hashChain() {
        BlockManager bm(32, 4, 0, false);
        const auto a = range(100, 13);  // 3 full blocks + 1
        QCOMPARE(runOnce(bm, a), int64_t(0));
        QCOMPARE(bm.numCachedBlocks(), 3);
        QCOMPARE(probe(bm, a), int64_t(12));
        // Same block contents at a different position: the chain differs, no hit.
        QCOMPARE(probe(bm, cat(range(900, 4), cat(range(104, 8), {1}))), int64_t(0));
        // Diverging in block 1: only block 0 hits.
        QCOMPARE(probe(bm, cat(range(100, 5), range(500, 8))), int64_t(4));
        // Stats count allocations, in tokens: 13 queried and 0 hit by the first run, 13 and 12 now.
        QCOMPARE(runOnce(bm, a), int64_t(12));
        QCOMPARE(bm.prefixQueries(), int64_t(26));
        QCOMPARE(bm.prefixHits(), int64_t(12));
    }

    void hitsOnlyOnFullAlignedBlocks() {
        BlockManager bm(32, 4, 0, false);
        const auto a = range(1, 10);  // blocks [1..4] [5..8] and a partial [9 10]
        runOnce(bm, a);
        QCOMPARE(bm.numCachedBlocks(), 2);                       // the partial block is never cached
        QCOMPARE(probe(bm, a), int64_t(8));
        QCOMPARE(probe(bm, cat(range(1, 7), {77, 78, 79})), int64_t(4));  // diverges inside block 1
        QCOMPARE(probe(bm, range(1, 8)), int64_t(4));            // 8 tokens: the last one is recomputed
        QCOMPARE(probe(bm, range(1, 9)), int64_t(8));
        QCOMPARE(probe(bm, range(1, 14)), int64_t(8));           // block 2 of a was partial: not cached
        QCOMPARE(probe(bm, {1}), int64_t(0));
    }

    void collisionGuards() {
        // Every hash equal: the stored tokens and the recorded parent decide, never the hash.
        BlockManager bm(32, 4, 0, false);
        bm.setHashModeForTesting(BlockManager::HashMode::Constant);
        runOnce(bm, range(1, 9));
        QCOMPARE(bm.numCachedBlocks(), 1);             // block 1 collides with block 0: stays private
        QCOMPARE(probe(bm, range(101, 9)), int64_t(0));  // other tokens, same hash: no hit
        QCOMPARE(probe(bm, range(1, 9)), int64_t(4));    // block 0 is really the same
        bm.verifyInvariants();

        // Hash without the parent: block [5..8] of one chain must not serve as the first block of another.
        BlockManager tb(32, 4, 0, false);
        tb.setHashModeForTesting(BlockManager::HashMode::TokensOnly);
        runOnce(tb, range(1, 9));
        QCOMPARE(tb.numCachedBlocks(), 2);
        QCOMPARE(probe(tb, cat(range(5, 4), {0})), int64_t(0));                  // right tokens, wrong parent
        QCOMPARE(probe(tb, cat(range(1, 4), cat(range(1, 4), {0}))), int64_t(4));  // block 1 = block 0's tokens
        QCOMPARE(probe(tb, range(1, 9)), int64_t(8));
        tb.verifyInvariants();
    }

    void refCountSharing() {
        BlockManager bm(16, 4, 0, false);
        auto a = seqOf(range(1, 9));
        bm.allocate(*a);
        prefill(bm, *a);  // a stays live
        QCOMPARE(bm.numFreeBlocks(), 13);
        auto b = seqOf(cat(range(1, 8), {50, 51, 52}));  // shares blocks 0 and 1
        QVERIFY(bm.canAllocate(*b));
        QCOMPARE(bm.allocate(*b).cachedTokens, int64_t(8));
        QCOMPARE(b->blockTable[0], a->blockTable[0]);
        QCOMPARE(b->blockTable[1], a->blockTable[1]);
        QVERIFY(b->blockTable[2] != a->blockTable[2]);
        QCOMPARE(bm.refCount(a->blockTable[0]), 2);
        QCOMPARE(bm.refCount(a->blockTable[2]), 1);
        QCOMPARE(bm.numFreeBlocks(), 12);
        QCOMPARE(b->numComputed, int64_t(8));
        bm.deallocate(*a);
        QCOMPARE(bm.refCount(b->blockTable[0]), 1);
        QCOMPARE(bm.numFreeBlocks(), 13);  // only a's private block came back
        bm.deallocate(*b);
        QCOMPARE(bm.numFreeBlocks(), 16);
        QCOMPARE(bm.numCachedBlocks(), 2);  // cached, unreferenced, still hit-able
        QVERIFY(bm.usage() == 0.0);
        bm.verifyInvariants();
    }

    void lruEvictionOrder() {
        BlockManager bm(6, 4, 0, false);
        const auto a = range(1, 9), b = range(101, 9);
        runOnce(bm, a);  // a0 a1 cached, its partial block free
        runOnce(bm, b);
        QCOMPARE(bm.numCachedBlocks(), 4);
        QCOMPARE(bm.numFreeBlocks(), 6);
        // 3 new blocks: two never-cached free ones first, then the oldest cached: a's LAST block (a1), since
        // a sequence's blocks are released last-first.
        auto c = seqOf(range(201, 12));
        QVERIFY(bm.canAllocate(*c));
        bm.allocate(*c);
        QCOMPARE(bm.numCachedBlocks(), 3);
        QCOMPARE(probe(bm, a), int64_t(4));  // a0 survives
        QCOMPARE(probe(bm, b), int64_t(8));
        auto d = seqOf(range(301, 4));  // one more block: a0 is the oldest now
        bm.allocate(*d);
        QCOMPARE(probe(bm, a), int64_t(0));
        QCOMPARE(probe(bm, b), int64_t(8));
        QVERIFY(!bm.canAllocate(*seqOf(range(401, 12))));  // 2 cached evictable blocks < 3
        QVERIFY(bm.canAllocate(*seqOf(range(401, 8))));
        // A hit on an evictable block is not also free space: b's 8 tokens + 1 need 1 new block, and taking
        // b's two cached blocks leaves none.
        QVERIFY(!bm.canAllocate(*seqOf(cat(range(101, 8), {5}))));
        bm.deallocate(*d);
        QVERIFY(bm.canAllocate(*seqOf(cat(range(101, 8), {5}))));
        bm.deallocate(*c);
        bm.deallocate(*d);
        QCOMPARE(bm.numFreeBlocks(), 6);
        bm.verifyInvariants();
    }

    void snapshotGating() {
        BlockManager bm(64, 4, 2, true);
        const auto a = range(1, 13);  // policy boundary floor(12/4)*4 = 12
        auto s = seqOf(a);
        QCOMPARE(bm.allocate(*s).restoreSnapshot, -1);
        QCOMPARE(bm.snapshotBoundary(*s), int64_t(12));
        const int32_t slotA = prefill(bm, *s);
        QVERIFY(slotA >= 0);
        QCOMPARE(bm.numSnapshotSlotsInUse(), 1);
        bm.deallocate(*s);

        // The same prompt again: hit up to 12, restored from a's snapshot; nothing new to capture.
        auto r = seqOf(a);
        const auto alloc = bm.allocate(*r);
        QCOMPARE(alloc.cachedTokens, int64_t(12));
        QCOMPARE(alloc.restoreSnapshot, slotA);
        QCOMPARE(bm.snapshotBoundary(*r), int64_t(-1));
        bm.deallocate(*r);

        // Shares only blocks 0-1 with a: matched, but no snapshot at 8 -> cold; it captures at its own
        // boundary (8), which it ties to a's cached block 1 (its own copy of that block is a private twin).
        const auto b = cat(range(1, 8), {90, 91});
        auto sb = seqOf(b);
        const auto ab = bm.allocate(*sb);
        QCOMPARE(ab.cachedTokens, int64_t(0));
        QCOMPARE(ab.restoreSnapshot, -1);
        QCOMPARE(bm.snapshotBoundary(*sb), int64_t(8));
        const int32_t slotB = prefill(bm, *sb);
        QVERIFY(slotB >= 0 && slotB != slotA);
        bm.deallocate(*sb);
        const auto ab2 = [&] { auto t = seqOf(cat(range(1, 8), {70})); auto x = bm.allocate(*t); bm.deallocate(*t); return x; }();
        QCOMPARE(ab2.cachedTokens, int64_t(8));
        QCOMPARE(ab2.restoreSnapshot, slotB);
        QCOMPARE(probe(bm, a), int64_t(12));  // a's longer snapshot still wins for a

        // A third boundary with both slots pinned by live sequences: no capture, and the hit stays usable.
        auto p1 = seqOf(a), p2 = seqOf(cat(range(1, 8), {70}));
        bm.allocate(*p1);
        bm.allocate(*p2);
        auto c = seqOf(range(500, 9));
        bm.allocate(*c);
        QCOMPARE(bm.snapshotBoundary(*c), int64_t(8));
        QCOMPARE(bm.snapshotSlotToCapture(*c), -1);
        prefill(bm, *c);
        bm.deallocate(*p1);
        // a's slot is unpinned now (b's is still pinned by p2): a new capture takes it.
        auto d = seqOf(range(700, 9));
        bm.allocate(*d);
        QCOMPARE(bm.snapshotSlotToCapture(*d), slotA);
        prefill(bm, *d);
        QCOMPARE(probe(bm, a), int64_t(8));  // a's own boundary lost its snapshot; b's at 8 remains
        for (auto* q : {p2.get(), c.get(), d.get()}) bm.deallocate(*q);
        bm.verifyInvariants();

        // Evicting the block a snapshot is tied to frees the slot.
        BlockManager small(4, 4, 1, true);
        runOnce(small, range(1, 9));  // boundary 8: snapshot on block 1
        QCOMPARE(small.numSnapshotSlotsInUse(), 1);
        auto big = seqOf(range(100, 16));  // needs all 4 blocks
        small.allocate(*big);
        QCOMPARE(small.numSnapshotSlotsInUse(), 0);
        small.deallocate(*big);
        small.verifyInvariants();
    }

    void abortedCaptureFreesItsSlot() {
        BlockManager bm(16, 4, 1, true);
        auto s = seqOf(range(1, 9));
        bm.allocate(*s);
        QVERIFY(bm.snapshotSlotToCapture(*s) >= 0);
        QCOMPARE(bm.numSnapshotSlotsInUse(), 1);
        bm.deallocate(*s);  // aborted before the chunk ran
        QCOMPARE(bm.numSnapshotSlotsInUse(), 0);
        QCOMPARE(s->snapshotSlot, -1);
        bm.verifyInvariants();
    }

    void growAndCommitDuringDecode() {
        BlockManager bm(8, 4, 0, false);
        auto s = seqOf(range(1, 3));
        bm.allocate(*s);
        prefill(bm, *s);
        for (int32_t t = 0; t < 10; ++t) {  // decode: append a token, make room for it, compute it
            s->appendToken(50 + t);
            QVERIFY(bm.canGrow(*s, s->numTokens()));
            bm.grow(*s, s->numTokens());
            s->numComputed = s->numTokens();
            bm.commitComputed(*s);
        }
        QCOMPARE(int64_t(s->blockTable.size()), int64_t(4));  // 13 tokens
        QCOMPARE(bm.numCachedBlocks(), 3);  // decoded blocks are cached too
        bm.deallocate(*s);
        QCOMPARE(probe(bm, cat(range(1, 3), range(50, 10))), int64_t(12));
        QVERIFY(!bm.canGrow(*seqOf({1}), 8 * 4 + 1));
        bm.resetPrefixCache();
        QCOMPARE(bm.numCachedBlocks(), 0);
        bm.verifyInvariants();
    }

    void badConstruction() {
        QVERIFY_THROWS_EXCEPTION(Error, BlockManager(0, 64, 1));
        QVERIFY_THROWS_EXCEPTION(Error, BlockManager(10, 0, 1));
        QVERIFY_THROWS_EXCEPTION(Error, BlockManager(10, 64, -1));
    }

    // 1,000 random requests over a small pool: prompts drawn from a few shared prefixes (so hits, twins and
    // snapshots all happen), prefill in random chunks cut at the snapshot boundary, decode growth, random
    // aborts at any point. A simulated cache checks every token a sequence reads back, and that it only ever
    // writes into blocks it owns alone. In the end every block and snapshot slot is free.
    void randomStress() {
        const int32_t bs = 4, numBlocks = 64, numSlots = 3;
        BlockManager bm(numBlocks, bs, numSlots, true);
        std::mt19937_64 g(12345);
        auto rnd = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
        std::vector<std::vector<int32_t>> bases;
        for (int i = 0; i < 5; ++i) bases.push_back(range(1000 * (i + 1), int32_t(rnd(0, 40))));

        std::vector<int32_t> pool(size_t(numBlocks * bs), -1);  // the "KV cache": token id per slot
        std::vector<std::unique_ptr<Sequence>> live;
        std::map<int64_t, int64_t> decodesLeft;
        int started = 0, restores = 0, completed = 0;
        int64_t cachedSum = 0;

        auto compute = [&](Sequence& s, int64_t n) {  // reads the prefix, writes [numComputed, +n)
            for (int64_t t = 0; t < s.numComputed; ++t) {
                const int32_t blk = s.blockTable[size_t(t / bs)];
                QCOMPARE(pool[size_t(blk * bs + t % bs)], s.tokens()[size_t(t)]);
            }
            for (int64_t t = s.numComputed; t < s.numComputed + n; ++t) {
                const int32_t blk = s.blockTable[size_t(t / bs)];
                QCOMPARE(bm.refCount(blk), 1);
                pool[size_t(blk * bs + t % bs)] = s.tokens()[size_t(t)];
            }
            s.numComputed += n;
            bm.commitComputed(s);
        };

        int64_t steps = 0;
        while (started < 1000 || !live.empty()) {
            ++steps;
            const int action = int(rnd(0, 19));
            if (started < 1000 && (action < 4 || live.empty())) {
                std::vector<int32_t> prompt = bases[size_t(rnd(0, 4))];
                const int64_t extra = rnd(0, 1) ? rnd(1, 30) : 0;
                for (int64_t i = 0; i < extra; ++i) prompt.push_back(int32_t(rnd(0, 50)));
                if (prompt.empty()) prompt.push_back(7);
                auto s = seqOf(prompt);
                if (!bm.canAllocate(*s)) {  // make room like a scheduler would: preempt the oldest
                    if (live.empty()) QFAIL("an empty pool refused a prompt that fits");
                    bm.deallocate(*live.front());
                    decodesLeft.erase(live.front()->id());
                    live.erase(live.begin());
                    continue;
                }
                const auto a = bm.allocate(*s);
                cachedSum += a.cachedTokens;
                if (a.restoreSnapshot >= 0) ++restores;
                QCOMPARE(a.cachedTokens % bs, int64_t(0));
                QVERIFY(a.cachedTokens < s->numTokens());
                decodesLeft[s->id()] = rnd(0, 12);
                live.push_back(std::move(s));
                ++started;
            } else if (action < 19 && !live.empty()) {
                Sequence& s = *live[size_t(rnd(0, int64_t(live.size()) - 1))];
                if (s.numComputed < s.numTokens()) {  // a prefill chunk
                    int64_t n = rnd(1, s.numTokens() - s.numComputed);
                    const int64_t b = bm.snapshotBoundary(s);
                    if (b > 0 && s.numComputed + n >= b) {
                        n = b - s.numComputed;
                        bm.snapshotSlotToCapture(s);
                    }
                    compute(s, n);
                } else if (decodesLeft[s.id()] > 0) {  // a decode step
                    if (!bm.canGrow(s, s.numTokens() + 1)) continue;
                    s.appendToken(int32_t(rnd(0, 50)));
                    bm.grow(s, s.numTokens());
                    compute(s, 1);
                    --decodesLeft[s.id()];
                } else {  // finished
                    ++completed;
                    bm.deallocate(s);
                    decodesLeft.erase(s.id());
                    std::erase_if(live, [&](auto& p) { return p.get() == &s; });
                }
            } else if (!live.empty()) {  // abort anywhere
                const size_t i = size_t(rnd(0, int64_t(live.size()) - 1));
                bm.deallocate(*live[i]);
                decodesLeft.erase(live[i]->id());
                live.erase(live.begin() + std::ptrdiff_t(i));
            }
            bm.verifyInvariants();
        }
        qInfo("stress: %d requests (%d completed), %lld steps, %lld cached prompt tokens, %d snapshot restores",
              started, completed, (long long)steps, (long long)cachedSum, restores);
        QVERIFY(cachedSum > 0);
        QVERIFY(restores > 0);
        QVERIFY(completed > 200);
        QCOMPARE(bm.numFreeBlocks(), numBlocks);
        for (int32_t b = 0; b < numBlocks; ++b) QCOMPARE(bm.refCount(b), 0);
        QVERIFY(bm.numSnapshotSlotsInUse() <= numSlots);  // only valid snapshots of cached blocks remain
        bm.resetPrefixCache();
        QCOMPARE(bm.numSnapshotSlotsInUse(), 0);
        QCOMPARE(bm.numCachedBlocks(), 0);
        bm.verifyInvariants();
    }
};

QTEST_GUILESS_MAIN(TestBlockManager)
#include "test_block_manager.moc"
