// The batched ops' default: the per-sequence op on each sequence's rows, in sequence order — the paged-cache ops
// (the latent write, the indexer's cache write and select, sparse attention) and the KDA state ops (conv, recurrence). This is the
// definition of what a backend's own batched form must compute (the self-test compares the two).
#include <string>

#include "backend.h"
#include "core/error.h"

namespace ts {

int64_t seqRowsTotal(const SeqRows* seqs, int64_t nSeqs, const char* op, bool oneBlockSize) {
    TS_CHECK(nSeqs >= 0 && (nSeqs == 0 || seqs), std::string(op) + ": no sequences given");
    int64_t T = 0;
    for (int64_t s = 0; s < nSeqs; ++s) {
        TS_CHECK(seqs[s].rows >= 0 && seqs[s].pos0 >= 0, std::string(op) + ": negative rows or position");
        TS_CHECK(!oneBlockSize || (seqs[s].pages.blockSize == seqs[0].pages.blockSize && seqs[s].pages.blockSize > 0),
                 std::string(op) + ": the sequences' page tables differ in block size");
        T += seqs[s].rows;
    }
    return T;
}

void Backend::causalConvSiluBatch(const Buffer& x, const int64_t* rows, int64_t nSeqs, int64_t C, int K,
                                  const Buffer& w, const Buffer* convStates, const Buffer& out) {
    TS_CHECK(nSeqs >= 0 && (nSeqs == 0 || (rows && convStates)), "causalConvSiluBatch: no sequences given");
    int64_t r0 = 0;
    for (int64_t s = 0; s < nSeqs; ++s) {
        TS_CHECK(rows[s] >= 0, "causalConvSiluBatch: negative rows");
        if (rows[s] > 0)
            causalConvSilu(x.viewF32(size_t(r0 * C), size_t(rows[s] * C)), rows[s], C, K, w, convStates[s],
                           out.viewF32(size_t(r0 * C), size_t(rows[s] * C)));
        r0 += rows[s];
    }
}

void Backend::kdaRecurrentBatch(const Buffer& qkv, const int64_t* rows, int64_t nSeqs, int64_t H, int64_t Dk,
                                const Buffer& g, const Buffer& betaLogits, const Buffer* states, const Buffer& out) {
    TS_CHECK(nSeqs >= 0 && (nSeqs == 0 || (rows && states)), "kdaRecurrentBatch: no sequences given");
    const int64_t C = H * Dk;
    int64_t r0 = 0;
    for (int64_t s = 0; s < nSeqs; ++s) {
        TS_CHECK(rows[s] >= 0, "kdaRecurrentBatch: negative rows");
        const int64_t n = rows[s];
        if (n > 0)
            kdaRecurrent(qkv.viewF32(size_t(r0 * 3 * C), size_t(n * 3 * C)), n, H, Dk, g.viewF32(size_t(r0 * C), size_t(n * C)),
                         betaLogits.viewF32(size_t(r0 * H), size_t(n * H)), states[s], out.viewF32(size_t(r0 * C), size_t(n * C)));
        r0 += n;
    }
}

void Backend::mlaCacheWriteBatch(const Buffer& c, const SeqRows* seqs, int64_t nSeqs, int64_t R, KvCacheDtype dt,
                                 const Buffer& cache) {
    seqRowsTotal(seqs, nSeqs, "mlaCacheWrite");
    int64_t r0 = 0;
    for (int64_t s = 0; s < nSeqs; ++s) {
        const SeqRows& q = seqs[s];
        if (q.rows > 0) mlaCacheWrite(c.viewF32(size_t(r0 * R), size_t(q.rows * R)), q.rows, R, dt, cache, q.pages, q.pos0);
        r0 += q.rows;
    }
}

void Backend::mlaSparseAttentionBatch(const Buffer& qLat, const SeqRows* seqs, int64_t nSeqs, int64_t H, int64_t R,
                                      const Buffer& cache, KvCacheDtype dt, const Buffer& idx, int64_t width,
                                      float scale, const Buffer& oLat) {
    seqRowsTotal(seqs, nSeqs, "mlaSparseAttention");
    int64_t r0 = 0;
    for (int64_t s = 0; s < nSeqs; ++s) {
        const SeqRows& q = seqs[s];
        if (q.rows > 0)
            mlaSparseAttention(qLat.viewF32(size_t(r0 * H * R), size_t(q.rows * H * R)), q.rows, H, R, cache, dt, q.pages,
                               idx.view(size_t(r0 * width) * 4, size_t(q.rows * width) * 4), width, scale,
                               oLat.viewF32(size_t(r0 * H * R), size_t(q.rows * H * R)));
        r0 += q.rows;
    }
}

void Backend::indexerSelectBatch(const Buffer& q, const Buffer& w, const SeqRows* seqs, int64_t nSeqs, int64_t H,
                                 int64_t D, int64_t kp, int64_t topk, KvCacheDtype dt, const Buffer& poolStore,
                                 const Buffer& idx, IndexerStats* const* stats) {
    seqRowsTotal(seqs, nSeqs, "indexerSelect");
    TS_CHECK(kp > 0 && topk >= kp, "indexerSelect: index_topk must be at least index_kpool");
    const int64_t width = topk + kp - 1;
    int64_t r0 = 0;
    for (int64_t s = 0; s < nSeqs; ++s) {
        const SeqRows& sq = seqs[s];
        if (sq.rows > 0)
            indexerSelect(q.viewF32(size_t(r0 * H * D), size_t(sq.rows * H * D)), w.viewF32(size_t(r0 * H), size_t(sq.rows * H)),
                          sq.rows, H, D, kp, topk, dt, poolStore, sq.pages, sq.pos0,
                          idx.view(size_t(r0 * width) * 4, size_t(sq.rows * width) * 4), stats ? stats[s] : nullptr);
        r0 += sq.rows;
    }
}

void Backend::indexerCacheWriteBatch(const Buffer& k, const Buffer& gate, const SeqRows* seqs, int64_t nSeqs, int64_t D,
                                     int64_t kp, const Buffer& ape, KvCacheDtype dt, const Buffer* tails,
                                     const Buffer& poolStore) {
    seqRowsTotal(seqs, nSeqs, "indexerCacheWrite");
    TS_CHECK(nSeqs == 0 || tails, "indexerCacheWrite: no tail rings given");
    int64_t r0 = 0;
    for (int64_t s = 0; s < nSeqs; ++s) {
        const SeqRows& sq = seqs[s];
        if (sq.rows > 0)
            indexerCacheWrite(k.viewF32(size_t(r0 * D), size_t(sq.rows * D)), gate.viewF32(size_t(r0 * D), size_t(sq.rows * D)),
                              sq.rows, D, kp, ape, dt, tails[s], poolStore, sq.pages, sq.pos0);
        r0 += sq.rows;
    }
}

}  // namespace ts
