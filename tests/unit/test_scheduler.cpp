// Scheduler: token budget and max_num_seqs, decode before prefill, chunked prefill, the cut at the KDA
// snapshot boundary, preemption and resume, abort, finish reasons, rejection of oversize prompts, and a
// 1,000-request soak against a fake model whose "KV cache" and "recurrent state" are simulated: every
// token it reads back is checked, and its next token is a function of the state it built, so any
// bookkeeping error (wrong block, wrong hit, wrong snapshot, lost token) changes the output.
#include <QtTest>

#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>

#include "cache/block_manager.h"
#include "core/error.h"
#include "runtime/scheduler.h"

using namespace ts;

namespace {

constexpr int32_t kVocab = 64;
constexpr uint64_t kSeedState = 0x1234567;

uint64_t mix(uint64_t h, int32_t t) {
    h ^= uint64_t(uint32_t(t)) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h *= 0xFF51AFD7ED558CCDULL;
    return h ^ (h >> 29);
}
int32_t nextToken(uint64_t state) { return int32_t(state % kVocab); }

std::vector<int32_t> range(int32_t from, int32_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), from);
    return v;
}

void check(bool ok, const std::string& what) {
    if (!ok) throw std::logic_error(what);
}

// The model: a KV pool of token ids, one recurrent state (a running hash) per state slot, snapshot slots.
struct FakeModel {
    BlockManager& bm;
    std::vector<int32_t> kv;
    std::vector<uint64_t> state, snap;
    std::vector<int64_t> stateLen, snapLen;
    int restores = 0, captures = 0;

    FakeModel(BlockManager& b, int32_t maxNumSeqs)
        : bm(b), kv(size_t(b.numBlocks()) * size_t(b.blockSize()), -1), state(size_t(maxNumSeqs)),
          snap(size_t(b.numSnapshotSlots())), stateLen(size_t(maxNumSeqs), -1), snapLen(size_t(b.numSnapshotSlots()), -1) {}

    std::vector<int32_t> run(const SchedulerOutput& out) {
        std::vector<int32_t> sampled;
        const int64_t bs = bm.blockSize();
        for (const ScheduledSeq& e : out.seqs) {
            const Sequence& s = *e.seq;
            const int64_t c0 = s.numComputed;
            check(s.stateSlot >= 0, "no state slot");
            const size_t slot = size_t(s.stateSlot);
            if (e.restoreSnapshot >= 0) {
                state[slot] = snap[size_t(e.restoreSnapshot)];
                stateLen[slot] = snapLen[size_t(e.restoreSnapshot)];
                ++restores;
            } else if (c0 == 0) {
                state[slot] = kSeedState;
                stateLen[slot] = 0;
            }
            check(stateLen[slot] == c0, "state holds " + std::to_string(stateLen[slot]) + " tokens, cache " + std::to_string(c0));
            check(int64_t(s.blockTable.size()) * bs >= c0 + e.numTokens, "block table too short");
            for (int64_t t = 0; t < c0; ++t)
                check(kv[size_t(s.blockTable[size_t(t / bs)] * bs + t % bs)] == s.tokens()[size_t(t)], "cached token differs");
            for (int64_t t = c0; t < c0 + e.numTokens; ++t) {
                const int32_t blk = s.blockTable[size_t(t / bs)];
                check(bm.refCount(blk) == 1, "write into a shared block");
                kv[size_t(blk * bs + t % bs)] = s.tokens()[size_t(t)];
                state[slot] = mix(state[slot], s.tokens()[size_t(t)]);
                ++stateLen[slot];
            }
            if (e.captureSnapshot >= 0) {
                check(c0 + e.numTokens == s.snapshotAt, "capture off the boundary");
                snap[size_t(e.captureSnapshot)] = state[slot];
                snapLen[size_t(e.captureSnapshot)] = stateLen[slot];
                ++captures;
            }
            check(e.samples == (c0 + e.numTokens == s.numTokens()), "samples flag");
            if (e.samples) sampled.push_back(nextToken(state[slot]));
        }
        return sampled;
    }
};

// What the sequence produces when it runs alone, uninterrupted.
std::pair<std::vector<int32_t>, FinishReason> runAlone(const std::vector<int32_t>& prompt, const SamplingParams& p,
                                                       const std::vector<int32_t>& eos, int64_t maxLen) {
    std::vector<int32_t> toks = prompt;
    uint64_t h = kSeedState;
    for (int32_t t : prompt) h = mix(h, t);
    for (;;) {
        const int32_t t = nextToken(h);
        toks.push_back(t);
        h = mix(h, t);
        const int64_t completion = int64_t(toks.size() - prompt.size());
        if (completion >= p.maxTokens || int64_t(toks.size()) >= maxLen) return {toks, FinishReason::Length};
        if (completion >= p.minTokens) {
            const bool isEos = std::find(eos.begin(), eos.end(), t) != eos.end();
            const bool isStop = std::find(p.stopTokenIds.begin(), p.stopTokenIds.end(), t) != p.stopTokenIds.end();
            if ((isEos && !p.ignoreEos) || isStop) return {toks, FinishReason::Stop};
        }
    }
}

SchedulerConfig smallConfig() {
    SchedulerConfig c;
    c.maxNumSeqs = 4;
    c.maxNumBatchedTokens = 16;
    c.maxModelLen = 200;
    c.blockSize = 4;
    c.eosTokenIds = {};
    return c;
}

int64_t total(const SchedulerOutput& o) {
    int64_t n = 0;
    for (auto& e : o.seqs) n += e.numTokens;
    return n;
}

}  // namespace

class TestScheduler : public QObject {
    Q_OBJECT

    std::vector<std::unique_ptr<Sequence>> m_seqs;
    Sequence* make(std::vector<int32_t> prompt, SamplingParams p = {}) {
        m_seqs.push_back(std::make_unique<Sequence>(int64_t(m_seqs.size()) + 1, std::move(prompt), std::move(p)));
        return m_seqs.back().get();
    }
    SamplingParams maxTok(int32_t n) {
        SamplingParams p;
        p.maxTokens = n;
        return p;
    }

private slots:
    void init() { m_seqs.clear(); }

    void budgetAndMaxNumSeqs() {
        BlockManager bm(64, 4, 0, true);
        Scheduler sch(smallConfig(), bm);
        FakeModel model(bm, 4);
        for (int i = 0; i < 6; ++i) sch.add(make(range(100 * i + 1, 10), maxTok(5)));
        SchedulerOutput o = sch.schedule();
        QCOMPARE(o.seqs.size(), size_t(2));  // 10 + 6 = the whole budget
        QCOMPARE(o.seqs[0].numTokens, int64_t(10));
        QVERIFY(o.seqs[0].samples && o.seqs[0].isPrefill);
        QCOMPARE(o.seqs[1].numTokens, int64_t(6));
        QVERIFY(!o.seqs[1].samples);
        int steps = 0;
        while (sch.hasWork()) {
            QVERIFY(total(o) <= 16);
            QVERIFY(o.seqs.size() <= 4 && sch.numRunning() <= 4);
            sch.postprocess(o.seqs, model.run(o));
            o = sch.schedule();
            QVERIFY(++steps < 100);
        }
        for (auto& s : m_seqs) {
            QCOMPARE(s->status, SeqStatus::Finished);
            QCOMPARE(s->finish, FinishReason::Length);
            QCOMPARE(s->numCompletionTokens(), int64_t(5));
        }
        QCOMPARE(bm.numFreeBlocks(), 64);
    }

    void decodeFirst() {
        BlockManager bm(64, 4, 0, true);
        Scheduler sch(smallConfig(), bm);
        FakeModel model(bm, 4);
        Sequence* a = make(range(1, 3), maxTok(10));
        sch.add(a);
        SchedulerOutput o = sch.schedule();
        sch.postprocess(o.seqs, model.run(o));
        Sequence* b = make(range(50, 40), maxTok(10));
        sch.add(b);
        o = sch.schedule();
        QCOMPARE(o.seqs.size(), size_t(2));
        QCOMPARE(o.seqs[0].seq, a);
        QCOMPARE(o.seqs[0].numTokens, int64_t(1));
        QVERIFY(!o.seqs[0].isPrefill && o.seqs[0].samples);
        QCOMPARE(o.seqs[1].seq, b);
        QCOMPARE(o.seqs[1].numTokens, int64_t(15));
        QVERIFY(o.seqs[1].isPrefill && !o.seqs[1].samples);
        sch.postprocess(o.seqs, model.run(o));
    }

    void chunkedPrefill() {
        BlockManager bm(64, 4, 0, true);
        Scheduler sch(smallConfig(), bm);
        FakeModel model(bm, 4);
        Sequence* s = make(range(1, 40), maxTok(2));
        sch.add(s);
        const int64_t chunks[] = {16, 16, 8};
        for (int64_t n : chunks) {
            SchedulerOutput o = sch.schedule();
            QCOMPARE(o.seqs.size(), size_t(1));
            QCOMPARE(o.seqs[0].numTokens, n);
            QVERIFY(o.seqs[0].isPrefill);
            QCOMPARE(o.seqs[0].samples, n == 8);
            const auto sampled = model.run(o);
            QCOMPARE(sampled.size(), size_t(n == 8 ? 1 : 0));
            sch.postprocess(o.seqs, sampled);
        }
        QCOMPARE(s->numComputed, int64_t(40));
        QCOMPARE(s->numTokens(), int64_t(41));
        SchedulerOutput o = sch.schedule();
        QCOMPARE(o.seqs[0].numTokens, int64_t(1));
        sch.postprocess(o.seqs, model.run(o));
        QCOMPARE(s->finish, FinishReason::Length);
    }

    // A long prompt in its prefill shares the step with a request that arrives meanwhile (and with another
    // running prefill): the short one is admitted at once and samples its first token long before the long
    // prompt's prefill ends.
    void longPrefillSharesTheStep() {
        BlockManager bm(256, 4, 0, true);
        Scheduler sch(smallConfig(), bm);
        FakeModel model(bm, 4);
        Sequence* a = make(range(1, 100), maxTok(2));
        sch.add(a);
        SchedulerOutput o = sch.schedule();
        QCOMPARE(o.seqs.size(), size_t(1));
        QCOMPARE(o.seqs[0].numTokens, int64_t(16));  // alone: the whole budget
        sch.postprocess(o.seqs, model.run(o));
        Sequence* b = make(range(500, 5), maxTok(2));
        sch.add(b);
        o = sch.schedule();
        QCOMPARE(o.seqs.size(), size_t(2));
        QCOMPARE(o.seqs[0].seq, a);
        QCOMPARE(o.seqs[0].numTokens, int64_t(8));   // half, b being admissible
        QCOMPARE(o.seqs[1].seq, b);
        QCOMPARE(o.seqs[1].numTokens, int64_t(5));   // b's whole prompt: it samples in this step
        QVERIFY(o.seqs[1].samples);
        sch.postprocess(o.seqs, model.run(o));
        QCOMPARE(b->numCompletionTokens(), int64_t(1));
        // b decodes; c (long) arrives: a and c share what the decode leaves.
        Sequence* c = make(range(900, 60), maxTok(2));
        sch.add(c);
        o = sch.schedule();
        QCOMPARE(o.seqs.size(), size_t(3));
        QCOMPARE(o.seqs[0].seq, b);
        QCOMPARE(o.seqs[1].seq, a);
        QCOMPARE(o.seqs[1].numTokens, int64_t(7));   // (16 - 1) / 2
        QCOMPARE(o.seqs[2].seq, c);
        QCOMPARE(o.seqs[2].numTokens, int64_t(8));
        sch.postprocess(o.seqs, model.run(o));
        o = sch.schedule();                           // both running now: (16 - 0) / 2 each (b finished)
        QCOMPARE(b->finish, FinishReason::Length);
        QCOMPARE(o.seqs.size(), size_t(2));
        QCOMPARE(o.seqs[0].numTokens, int64_t(8));
        QCOMPARE(o.seqs[1].numTokens, int64_t(8));
        sch.postprocess(o.seqs, model.run(o));
        while (sch.hasWork()) {
            o = sch.schedule();
            QVERIFY(total(o) <= 16);
            sch.postprocess(o.seqs, model.run(o));
        }
        QCOMPARE(a->finish, FinishReason::Length);
        QCOMPARE(c->finish, FinishReason::Length);
        QCOMPARE(bm.numFreeBlocks(), 256);
    }

    void snapshotBoundaryCut() {
        BlockManager bm(64, 4, 2, true);
        Scheduler sch(smallConfig(), bm);
        FakeModel model(bm, 4);
        Sequence* a = make(range(1, 30), maxTok(3));  // boundary floor(29 / 4) * 4 = 28
        sch.add(a);
        SchedulerOutput o = sch.schedule();
        QCOMPARE(o.seqs[0].numTokens, int64_t(16));
        QCOMPARE(o.seqs[0].captureSnapshot, -1);
        sch.postprocess(o.seqs, model.run(o));
        o = sch.schedule();
        QCOMPARE(o.seqs[0].numTokens, int64_t(12));  // 14 left, cut at 28
        const int32_t slot = o.seqs[0].captureSnapshot;
        QVERIFY(slot >= 0);
        sch.postprocess(o.seqs, model.run(o));
        o = sch.schedule();
        QCOMPARE(o.seqs[0].numTokens, int64_t(2));
        QVERIFY(o.seqs[0].samples);
        sch.postprocess(o.seqs, model.run(o));

        // The same prompt while a still runs: 28 tokens from the cache, state restored from a's snapshot.
        Sequence* b = make(range(1, 30), maxTok(3));
        sch.add(b);
        o = sch.schedule();
        QCOMPARE(o.seqs.size(), size_t(2));
        QCOMPARE(o.seqs[1].seq, b);
        QCOMPARE(o.seqs[1].numTokens, int64_t(2));
        QCOMPARE(o.seqs[1].restoreSnapshot, slot);
        QCOMPARE(b->numCachedPrompt, int64_t(28));
        sch.postprocess(o.seqs, model.run(o));
        while (sch.hasWork()) {
            o = sch.schedule();
            sch.postprocess(o.seqs, model.run(o));
        }
        QCOMPARE(a->tokens(), b->tokens());  // the restored state gives the same continuation
        QCOMPARE(model.restores, 1);
        QCOMPARE(bm.prefixHits(), int64_t(28));
    }

    void preemptionAndResume() {
        // Reference: B alone.
        std::vector<int32_t> expectB;
        {
            BlockManager bm(64, 4, 0, true);
            Scheduler sch(smallConfig(), bm);
            FakeModel model(bm, 4);
            Sequence* b = make(range(101, 12), maxTok(12));
            sch.add(b);
            while (sch.hasWork()) {
                const SchedulerOutput o = sch.schedule();
                sch.postprocess(o.seqs, model.run(o));
            }
            expectB = b->tokens();
        }
        SchedulerConfig c = smallConfig();
        c.maxNumBatchedTokens = 64;
        BlockManager bm(8, 4, 0, true);  // 32 tokens; no snapshot slots, so no hits either
        Scheduler sch(c, bm);
        FakeModel model(bm, 4);
        Sequence* a = make(range(1, 12), maxTok(12));
        Sequence* b = make(range(101, 12), maxTok(12));
        sch.add(a);
        sch.add(b);
        bool sawPreemption = false;
        int steps = 0;
        while (sch.hasWork()) {
            const SchedulerOutput o = sch.schedule();
            if (!o.preempted.empty()) {
                QVERIFY(!sawPreemption);
                sawPreemption = true;
                QCOMPARE(o.preempted.size(), size_t(1));
                QCOMPARE(o.preempted[0], b);  // the newest goes
                QCOMPARE(b->status, SeqStatus::Waiting);
                QCOMPARE(b->numComputed, int64_t(0));
                QVERIFY(b->blockTable.empty());
                QCOMPARE(b->stateSlot, -1);
                QCOMPARE(b->numPreemptions, int64_t(1));
                QCOMPARE(sch.numWaiting(), 1);
                for (auto& e : o.seqs) QVERIFY(e.seq != b);
            }
            sch.postprocess(o.seqs, model.run(o));
            QVERIFY(++steps < 200);
        }
        QVERIFY(sawPreemption);
        QCOMPARE(sch.numPreemptions(), int64_t(1));
        QCOMPARE(b->tokens(), expectB);  // recomputed, same continuation
        QCOMPARE(a->finish, FinishReason::Length);
        QCOMPARE(b->finish, FinishReason::Length);
        QCOMPARE(bm.numFreeBlocks(), 8);
    }

    void abortAnywhere() {
        BlockManager bm(64, 4, 2, true);
        Scheduler sch(smallConfig(), bm);
        FakeModel model(bm, 4);
        Sequence* w = make(range(1, 10), maxTok(50));
        Sequence* r = make(range(200, 10), maxTok(50));
        Sequence* m = make(range(300, 30), maxTok(50));
        sch.add(r);
        SchedulerOutput o = sch.schedule();
        sch.postprocess(o.seqs, model.run(o));
        sch.add(m);
        sch.add(w);
        o = sch.schedule();  // r decodes, m prefills (capture pending at 28 later), w gets no budget... or some
        const auto sampled = model.run(o);
        QVERIFY(sch.abort(m->id()));  // after the step ran, before its postprocess
        QCOMPARE(m->status, SeqStatus::Finished);
        QCOMPARE(m->finish, FinishReason::Abort);
        QVERIFY(m->blockTable.empty());
        sch.postprocess(o.seqs, sampled);  // m's entry is skipped
        QCOMPARE(m->numCompletionTokens(), int64_t(0));
        QVERIFY(sch.abort(r->id()));
        QVERIFY(!sch.abort(r->id()));
        QVERIFY(!sch.abort(12345));
        QVERIFY(sch.abort(w->id()));
        QVERIFY(!sch.hasWork());
        QCOMPARE(bm.numFreeBlocks(), 64);
        QCOMPARE(bm.numSnapshotSlotsInUse() <= 2, true);
        bm.verifyInvariants();
        QVERIFY(sch.finish(make({1})->id(), FinishReason::Stop) == false);  // never added
    }

    void finishReasons() {
        SchedulerConfig c = smallConfig();
        c.maxModelLen = 40;
        // Find the token the fake model produces first for a prompt, and use it as eos / stop id.
        const std::vector<int32_t> prompt = range(7, 5);
        const auto alone = runAlone(prompt, maxTok(100), {}, 1000).first;
        const int32_t first = alone[5], second = alone[6];
        auto runOne = [&](SamplingParams p, std::vector<int32_t> eos) -> std::pair<int64_t, FinishReason> {
            SchedulerConfig cc = c;
            cc.eosTokenIds = std::move(eos);
            BlockManager bm(64, 4, 0, true);
            Scheduler sch(cc, bm);
            FakeModel model(bm, 4);
            Sequence* s = make(prompt, p);
            sch.add(s);
            while (sch.hasWork()) {
                const SchedulerOutput o = sch.schedule();
                const auto fin = sch.postprocess(o.seqs, model.run(o));
                for (Sequence* f : fin) check(f == s, "finished someone else");
            }
            return std::make_pair(s->numCompletionTokens(), s->finish);
        };
        QCOMPARE(runOne(maxTok(100), {first}), std::make_pair(int64_t(1), FinishReason::Stop));
        SamplingParams ig = maxTok(3);
        ig.ignoreEos = true;
        QCOMPARE(runOne(ig, {first}), std::make_pair(int64_t(3), FinishReason::Length));
        SamplingParams st = maxTok(100);
        st.stopTokenIds = {second};
        QVERIFY(first != second);
        QCOMPARE(runOne(st, {}), std::make_pair(int64_t(2), FinishReason::Stop));
        SamplingParams mt = maxTok(100);
        mt.minTokens = 2;  // eos at token 1 does not count yet
        const auto r = runOne(mt, {first});
        QVERIFY(r.first >= 2);
        QCOMPARE(r.second, runAlone(prompt, mt, {first}, 40).second);
        QCOMPARE(r.first, int64_t(runAlone(prompt, mt, {first}, 40).first.size() - prompt.size()));
        QCOMPARE(runOne(maxTok(1), {}), std::make_pair(int64_t(1), FinishReason::Length));
        QCOMPARE(runOne(maxTok(1000), {}), std::make_pair(int64_t(40 - 5), FinishReason::Length));  // max_model_len
    }

    void rejectsOversizePrompts() {
        BlockManager bm(64, 4, 0, true);  // 256 tokens
        Scheduler sch(smallConfig(), bm);   // max_model_len 200
        auto expectReject = [&](Scheduler& s, Sequence* q, const char* words) {
            try {
                s.add(q);
                QFAIL("accepted");
            } catch (const Error& e) {
                QCOMPARE(e.kind(), ErrorKind::InvalidArgument);
                QVERIFY2(QString(e.what()).contains(words), e.what());
            }
        };
        expectReject(sch, make(range(1, 201)), "maximum model length of 200");
        expectReject(sch, make({}), "empty");
        sch.add(make(range(1, 200)));
        SchedulerConfig big = smallConfig();
        big.maxModelLen = 1000;
        Scheduler sch2(big, bm);
        expectReject(sch2, make(range(1, 257)), "KV cache can ever hold (256 tokens)");
        QCOMPARE(sch2.effectiveMaxLen(), int64_t(256));
        SchedulerConfig wrong = smallConfig();
        wrong.blockSize = 64;
        QVERIFY_THROWS_EXCEPTION(Error, Scheduler(wrong, bm));
    }

    // A prompt exactly as long as the pool: prefilled, one token, then Length (its KV never needs more).
    void promptFillingThePool() {
        SchedulerConfig c = smallConfig();
        c.maxModelLen = 1000;
        BlockManager bm(4, 4, 0, true);
        Scheduler sch(c, bm);
        FakeModel model(bm, 4);
        Sequence* s = make(range(1, 16), maxTok(10));
        sch.add(s);
        while (sch.hasWork()) {
            const SchedulerOutput o = sch.schedule();
            QVERIFY(!o.empty());
            sch.postprocess(o.seqs, model.run(o));
        }
        QCOMPARE(s->numCompletionTokens(), int64_t(1));
        QCOMPARE(s->finish, FinishReason::Length);
    }

    void randomSoak() {
        const int32_t numBlocks = 48, bs = 4;
        SchedulerConfig c;
        c.maxNumSeqs = 4;
        c.maxNumBatchedTokens = 32;
        c.maxModelLen = 120;
        c.blockSize = bs;
        c.eosTokenIds = {0};
        BlockManager bm(numBlocks, bs, 3, true);
        Scheduler sch(c, bm);
        FakeModel model(bm, c.maxNumSeqs);
        std::mt19937_64 g(2024);
        auto rnd = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
        std::vector<std::vector<int32_t>> bases;
        for (int i = 0; i < 5; ++i) bases.push_back(range(1 + 7 * i, int32_t(rnd(0, 40))));
        std::map<int64_t, bool> aborted;
        std::vector<Sequence*> live;
        int added = 0, steps = 0;
        try {
            while (added < 1000 || sch.hasWork()) {
                for (int64_t k = rnd(0, 2); k > 0 && added < 1000; --k) {
                    std::vector<int32_t> prompt = bases[size_t(rnd(0, 4))];
                    for (int64_t i = rnd(prompt.empty() ? 1 : 0, 40); i > 0; --i) prompt.push_back(int32_t(rnd(1, kVocab - 1)));
                    SamplingParams p;
                    p.maxTokens = int32_t(rnd(1, 40));
                    p.minTokens = int32_t(rnd(0, 1) ? rnd(0, p.maxTokens) : 0);
                    p.ignoreEos = rnd(0, 9) == 0;
                    if (rnd(0, 4) == 0) p.stopTokenIds = {int32_t(rnd(1, kVocab - 1))};
                    Sequence* s = make(prompt, p);
                    sch.add(s);
                    live.push_back(s);
                    ++added;
                }
                const SchedulerOutput o = sch.schedule();
                check(total(o) <= c.maxNumBatchedTokens && int32_t(o.seqs.size()) <= c.maxNumSeqs, "limits");
                check(!o.empty() || !sch.hasWork(), "work left but nothing scheduled");
                const std::vector<int32_t> sampled = model.run(o);
                if (rnd(0, 29) == 0 && !live.empty()) {  // abort anything, even what this step computed
                    Sequence* victim = live[size_t(rnd(0, int64_t(live.size()) - 1))];
                    if (sch.abort(victim->id())) aborted[victim->id()] = true;
                }
                sch.postprocess(o.seqs, sampled);
                std::erase_if(live, [](Sequence* s) { return s->status == SeqStatus::Finished; });
                bm.verifyInvariants();
                check(++steps < 200000, "no progress");
            }
        } catch (const std::exception& e) {
            QFAIL(e.what());
        }
        int completed = 0;
        for (auto& s : m_seqs) {
            QCOMPARE(s->status, SeqStatus::Finished);
            const std::vector<int32_t> prompt(s->tokens().begin(), s->tokens().begin() + s->numPromptTokens());
            const auto [expect, reason] = runAlone(prompt, s->params(), c.eosTokenIds, c.maxModelLen);
            if (aborted.count(s->id())) {
                QCOMPARE(s->finish, FinishReason::Abort);
                QVERIFY(s->tokens().size() <= expect.size());
                QVERIFY(std::equal(s->tokens().begin(), s->tokens().end(), expect.begin()));
            } else {
                ++completed;
                QCOMPARE(s->tokens(), expect);
                QCOMPARE(s->finish, reason);
            }
        }
        qInfo("soak: %d requests, %d completed, %d steps, %lld preemptions, %lld/%lld prompt tokens from the "
              "cache, %d snapshot restores, %d captures",
              added, completed, steps, (long long)sch.numPreemptions(), (long long)bm.prefixHits(),
              (long long)bm.prefixQueries(), model.restores, model.captures);
        QVERIFY(sch.numPreemptions() > 0);
        QVERIFY(model.restores > 0);
        QVERIFY(completed > 700);
        QCOMPARE(bm.numFreeBlocks(), numBlocks);
        for (int32_t b = 0; b < numBlocks; ++b) QCOMPARE(bm.refCount(b), 0);
        bm.resetPrefixCache();
        QCOMPARE(bm.numSnapshotSlotsInUse(), 0);
        bm.verifyInvariants();
    }
};

QTEST_GUILESS_MAIN(TestScheduler)
#include "test_scheduler.moc"
