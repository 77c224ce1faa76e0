// `bench-device --what mla`: DSA-MLA decode over a 128k-token context at GLM-5.3-Flash's widths (64 heads,
// latent 512, fp8_ds_mla cache of 656 B per token, block size 64) and the k-pool indexer that feeds it
// (32 heads × 128, kp 16, top-2048: 8,192 pools at 128k).
// - mlaSparseAttention, decode: each query attends to the 2,063 positions the indexer selected (128
//   pools × 16 + the 15-token tail). The figure of merit is achieved bandwidth = bytes of the selected
//   cache entries (2,063 × 656 B = 1.35 MB per query) / time. Note the arithmetic: 64 heads × 512 × 2
//   (scores and values) × 2 flops per latent element is ~200 flop per cache byte, so in fp32 the kernel
//   is compute-bound long before it is bandwidth-bound on an H200.
//   Rows: 1 sequence (T = 1), 4 sequences (4 calls, one per sequence; and one batched call,
//   mlaSparseAttentionBatch, as the model runs a batch), and 4 queries of one sequence in one call (T = 4, e.g.
//   speculative decode); each with the tensor-core kernel (the
//   default at this shape) and with the SIMT one (mlaSetTensorCores, kernels/exl3_tune.h); then the tensor-core
//   kernel's chunk length swept (mlaSetChunkTiles) for T = 1 and T = 4.
// - indexerSelect, decode: scores of all 8,192 pools + top-128 + expansion; bandwidth = pool-key bytes
//   (8,192 × 132 B) / time. Timed without stats (device work only, as the model calls it unless tie
//   statistics are asked for) and with stats (the tie flags come back to the host, one synchronisation per
//   call); 1 sequence, 4 sequences in 4 calls and in one batched call (indexerSelectBatch, the model's path); each
//   with the fast path (the default at these widths) and the general kernels (indexerSetFastSelect); and at a 4k
//   context (256 pools).
// - indexerCacheWrite, decode, a token completing its pool: 4 sequences in 4 calls and in one batched call.
// Only the Backend interface is used: it builds without CUDA and runs on any backend.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cli/bench_cuda.h"
#include "exl3_tune.h"

namespace ts::cli {

namespace {

constexpr int64_t kContext = 131072, kHeads = 64, kLatent = 512, kBlock = 64;
constexpr int64_t kIdxHeads = 32, kIdxDim = 128, kPool = 16, kTopk = 2048;
constexpr int kSeqs = 4;

struct Sequence {
    std::vector<int32_t> blocks;
    PageTable pages;
    Buffer idx;  // [1, width]: the indexer's selection for the query at position kContext − 1
};

}  // namespace

nlohmann::json benchMlaDecode(Backend& backend, int reps) {
    const KvCacheDtype dt = KvCacheDtype::Fp8;
    const int64_t width = kTopk + kPool - 1, blocksPerSeq = kContext / kBlock;
    const size_t eb = mlaCacheEntryBytes(dt, kLatent), kb = indexerKeyBytes(dt, kIdxDim);
    const int64_t poolsPerSeq = kContext / kPool;
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::printf("DSA-MLA sparse decode: context %lld, %lld heads, latent %lld, fp8_ds_mla %zu B/token, top-%lld (+%lld tail)\n",
                static_cast<long long>(kContext), static_cast<long long>(kHeads), static_cast<long long>(kLatent), eb,
                static_cast<long long>(kTopk), static_cast<long long>(kPool - 1));

    // One pool of blocks for 4 sequences of 128k tokens each, every sequence on its own shuffled blocks.
    std::vector<int32_t> perm(static_cast<size_t>(kSeqs * blocksPerSeq));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<Sequence> seqs(kSeqs);
    for (int s = 0; s < kSeqs; ++s) {
        seqs[size_t(s)].blocks.assign(perm.begin() + s * blocksPerSeq, perm.begin() + (s + 1) * blocksPerSeq);
        seqs[size_t(s)].pages = PageTable{seqs[size_t(s)].blocks.data(), blocksPerSeq, kBlock};
    }

    // Latent cache: written through the op (8,192 random rows, repeated along the context).
    const int64_t chunk = 8192;
    std::vector<float> rows(static_cast<size_t>(chunk * kLatent));
    for (float& v : rows) v = normal(rng);
    const Buffer rowsB = backend.upload(rows.data(), rows.size() * 4);
    const Buffer cache = backend.alloc(size_t(kSeqs * kContext) * eb);
    for (const Sequence& s : seqs)
        for (int64_t p = 0; p < kContext; p += chunk) backend.mlaCacheWrite(rowsB, chunk, kLatent, dt, cache, s.pages, p);

    // Indexer pool keys: random e4m3 codes (no NaN) with power-of-two scales, as the cache write leaves them.
    std::vector<uint8_t> keys(size_t(kSeqs * poolsPerSeq) * kb);
    std::uniform_int_distribution<int> code(0, 253), ex(-9, -5);
    for (size_t e = 0; e < keys.size() / kb; ++e) {
        uint8_t* k = keys.data() + e * kb;
        for (int64_t c = 0; c < kIdxDim; ++c) {
            const int v = code(rng);
            k[c] = uint8_t(v >= 0x7f ? v + 1 : v);
        }
        const float sc = std::ldexp(1.0f, ex(rng));
        std::memcpy(k + kIdxDim, &sc, 4);
    }
    const Buffer poolStore = backend.upload(keys.data(), keys.size());
    auto randomBuffer = [&](size_t n, float scale) {
        std::vector<float> v(n);
        for (float& x : v) x = normal(rng) * scale;
        return backend.upload(v.data(), n * 4);
    };
    const Buffer iq = randomBuffer(size_t(kIdxHeads * kIdxDim), 1.0f);
    const Buffer iw = randomBuffer(size_t(kIdxHeads), 1.0f / std::sqrt(float(kIdxHeads)));
    const int64_t pos = kContext - 1;  // the decoding query: the last position of the context
    for (Sequence& s : seqs) {
        s.idx = backend.alloc(size_t(width) * 4);
        backend.indexerSelect(iq, iw, 1, kIdxHeads, kIdxDim, kPool, kTopk, dt, poolStore, s.pages, pos, s.idx, nullptr);
    }
    // Four queries of sequence 0 (positions kContext − 4 … kContext − 1) for the T = 4 row.
    const Buffer iq4 = randomBuffer(size_t(4 * kIdxHeads * kIdxDim), 1.0f);
    const Buffer iw4 = randomBuffer(size_t(4 * kIdxHeads), 1.0f / std::sqrt(float(kIdxHeads)));
    const Buffer idx4 = backend.alloc(size_t(4 * width) * 4);
    backend.indexerSelect(iq4, iw4, 4, kIdxHeads, kIdxDim, kPool, kTopk, dt, poolStore, seqs[0].pages, pos - 3, idx4, nullptr);

    // The 4 sequences' selections side by side [4, width], and their rows for the batched calls.
    const Buffer idxSeqs = backend.alloc(size_t(kSeqs * width) * 4);
    for (int i = 0; i < kSeqs; ++i) backend.copy(seqs[size_t(i)].idx, 0, idxSeqs, size_t(i * width) * 4, size_t(width) * 4);
    std::vector<SeqRows> batch;
    for (const Sequence& s : seqs) batch.push_back(SeqRows{s.pages, pos, 1});

    const Buffer qLat = randomBuffer(size_t(4 * kHeads * kLatent), 0.1f);  // q_lat rows (≈ W_UKᵀ q magnitudes)
    const Buffer oLat = backend.alloc(size_t(4 * kHeads * kLatent) * 4);
    const float scale = 1.0f / 16.0f;  // qk_head_dim 256
    const double bytesPerQuery = double(width) * double(eb);

    nlohmann::json rows_ = nlohmann::json::array();
    auto report = [&](const char* name, const char* what, int64_t T, int sequences, double s, double bytes) {
        const double gbps = bytes / s / 1e9;
        std::printf("  %-40s %9.2f us/call  %8.1f GB/s (%s)\n", name, s * 1e6, gbps, what);
        rows_.push_back({{"case", name}, {"T", T}, {"sequences", sequences}, {"context", kContext},
                         {"us_per_call", s * 1e6}, {"bytes", bytes}, {"GBps", gbps}});
    };

    // Both kernels of the op (kernels/exl3_tune.h): the tensor-core one (the default for this shape), then SIMT.
    const bool tcFits = backend.name() != "cuda" || mlaTensorCoresFit();
    if (!tcFits)
        std::printf("  (this device gives a block less shared memory than the tensor-core kernel needs: the rows named "
                    "\"tensor cores\" run the SIMT kernel, and its chunk sweep is skipped)\n");
    for (const int tc : {1, 0}) {
        const OverrideScope<mlaSetTensorCores> variant(tc);
        const std::string sfx = tc ? ", tensor cores" : ", simt";
        {  // attention, 1 sequence
            const double s = medianSeconds(backend, reps, 50, [&] {
                backend.mlaSparseAttention(qLat, 1, kHeads, kLatent, cache, dt, seqs[0].pages, seqs[0].idx, width, scale, oLat);
            });
            report(("mlaSparseAttention decode, 1 sequence" + sfx).c_str(), "selected cache entries", 1, 1, s, bytesPerQuery);
        }
        {  // attention, 4 sequences, one call each
            const double s = medianSeconds(backend, reps, 20, [&] {
                for (int i = 0; i < kSeqs; ++i)
                    backend.mlaSparseAttention(qLat.viewF32(size_t(i * kHeads * kLatent), size_t(kHeads * kLatent)), 1, kHeads,
                                               kLatent, cache, dt, seqs[size_t(i)].pages, seqs[size_t(i)].idx, width, scale,
                                               oLat.viewF32(size_t(i * kHeads * kLatent), size_t(kHeads * kLatent)));
            });
            report(("mlaSparseAttention decode, 4 sequences" + sfx).c_str(), "selected cache entries", 1, kSeqs, s, kSeqs * bytesPerQuery);
        }
        {  // attention, 4 sequences in one batched call
            const double s = medianSeconds(backend, reps, 20, [&] {
                backend.mlaSparseAttentionBatch(qLat, batch.data(), kSeqs, kHeads, kLatent, cache, dt, idxSeqs, width, scale, oLat);
            });
            report(("mlaSparseAttention decode, 4 sequences, one call" + sfx).c_str(), "selected cache entries", 1, kSeqs, s,
                   kSeqs * bytesPerQuery);
        }
        {  // attention, 4 queries of one sequence in one call
            const double s = medianSeconds(backend, reps, 20, [&] {
                backend.mlaSparseAttention(qLat, 4, kHeads, kLatent, cache, dt, seqs[0].pages, idx4, width, scale, oLat);
            });
            report(("mlaSparseAttention T=4, 1 sequence" + sfx).c_str(), "selected cache entries", 4, 1, s, 4 * bytesPerQuery);
        }
    }
    // The tensor-core kernel's chunk length (tiles of 32 latents per block; the planner takes ~2 blocks per SM):
    // more chunks spread a query over more SMs but leave more partials to merge.
    if (tcFits) {
        const OverrideScope<mlaSetTensorCores> tcOn(1);
        for (const int tiles : {1, 2, 4, 8, 16, 65}) {
            const OverrideScope<mlaSetChunkTiles> chunkTiles(tiles);
            const std::string sfx = ", tensor cores, " + std::to_string(tiles) + " tiles/chunk";
            const double s1 = medianSeconds(backend, reps, 50, [&] {
                backend.mlaSparseAttention(qLat, 1, kHeads, kLatent, cache, dt, seqs[0].pages, seqs[0].idx, width, scale, oLat);
            });
            report(("mlaSparseAttention decode, 1 sequence" + sfx).c_str(), "selected cache entries", 1, 1, s1, bytesPerQuery);
            const double s4 = medianSeconds(backend, reps, 20, [&] {
                backend.mlaSparseAttention(qLat, 4, kHeads, kLatent, cache, dt, seqs[0].pages, idx4, width, scale, oLat);
            });
            report(("mlaSparseAttention T=4, 1 sequence" + sfx).c_str(), "selected cache entries", 4, 1, s4, 4 * bytesPerQuery);
        }
    }
    std::printf("k-pool indexer select: %lld pools (kp %lld), %lld heads x %lld, top-%lld pools\n",
                static_cast<long long>(poolsPerSeq), static_cast<long long>(kPool), static_cast<long long>(kIdxHeads),
                static_cast<long long>(kIdxDim), static_cast<long long>(kTopk / kPool));
    const double keyBytes = double(poolsPerSeq) * double(kb);
    const Buffer idxOut = backend.alloc(size_t(kSeqs * width) * 4);
    // The fast path (the default at these widths) and the general kernels, each without and with stats, at
    // 128k and at a 4k context (256 pools: the decode of a short conversation).
    for (int fast = 1; fast >= 0; --fast) {
        const OverrideScope<indexerSetFastSelect> variant(fast);
        const std::string sfx = fast ? ", fast" : ", general";
        for (int withStats = 0; withStats < 2; ++withStats) {
            IndexerStats stats;
            IndexerStats* st = withStats ? &stats : nullptr;
            const std::string name = "indexerSelect decode, 1 sequence" + std::string(withStats ? ", stats" : "") + sfx;
            const double s1 = medianSeconds(backend, reps, 20, [&] {
                backend.indexerSelect(iq, iw, 1, kIdxHeads, kIdxDim, kPool, kTopk, dt, poolStore, seqs[0].pages, pos, idxOut, st);
            });
            report(name.c_str(), "pool keys", 1, 1, s1, keyBytes);
            const double s4 = medianSeconds(backend, reps, 10, [&] {
                for (int i = 0; i < kSeqs; ++i)
                    backend.indexerSelect(iq, iw, 1, kIdxHeads, kIdxDim, kPool, kTopk, dt, poolStore, seqs[size_t(i)].pages, pos,
                                          idxOut.view(size_t(i * width) * 4, size_t(width) * 4), st);
            });
            report(("indexerSelect decode, 4 sequences" + std::string(withStats ? ", stats" : "") + sfx).c_str(), "pool keys",
                   1, kSeqs, s4, kSeqs * keyBytes);
            std::vector<IndexerStats> each(kSeqs);
            std::vector<IndexerStats*> eachPtr(kSeqs, nullptr);
            for (int i = 0; withStats && i < kSeqs; ++i) eachPtr[size_t(i)] = &each[size_t(i)];
            const double sb = medianSeconds(backend, reps, 10, [&] {
                backend.indexerSelectBatch(iq4, iw4, batch.data(), kSeqs, kIdxHeads, kIdxDim, kPool, kTopk, dt, poolStore,
                                           idxOut, eachPtr.data());
            });
            report(("indexerSelect decode, 4 sequences, one call" + std::string(withStats ? ", stats" : "") + sfx).c_str(),
                   "pool keys", 1, kSeqs, sb, kSeqs * keyBytes);
        }
        const int64_t pos4k = 4095;  // 256 pools
        const double s1 = medianSeconds(backend, reps, 20, [&] {
            backend.indexerSelect(iq, iw, 1, kIdxHeads, kIdxDim, kPool, kTopk, dt, poolStore, seqs[0].pages, pos4k, idxOut, nullptr);
        });
        report(("indexerSelect decode, 1 sequence, 4k context" + sfx).c_str(), "pool keys", 1, 1, s1,
               double((pos4k + 1) / kPool) * double(kb));
    }
    // The indexer's cache write at decode, where a token completes its pool (position kContext − 1 = 15 mod 16: the
    // pool's softmax over 15 ring members and the new token, then its key; the token into the ring): 4 sequences
    // in 4 calls and in one batched call (indexerCacheWriteBatch, the model's path). Repeating the call rewrites
    // the same ring slot and key, so every repetition does the same work. Bytes: the members read + the key.
    {
        const Buffer ik = randomBuffer(size_t(kSeqs * kIdxDim), 1.0f), ig = randomBuffer(size_t(kSeqs * kIdxDim), 2.0f);
        const Buffer ape = randomBuffer(size_t(kPool * kIdxDim), 0.5f);
        std::vector<Buffer> tails;
        for (int i = 0; i < kSeqs; ++i) tails.push_back(randomBuffer(size_t(kPool * 2 * kIdxDim), 1.0f));
        const double writeBytes = double(kPool * 2 * kIdxDim * 4) + double(kb);
        const double s4 = medianSeconds(backend, reps, 20, [&] {
            for (int i = 0; i < kSeqs; ++i)
                backend.indexerCacheWrite(ik.viewF32(size_t(i * kIdxDim), size_t(kIdxDim)),
                                          ig.viewF32(size_t(i * kIdxDim), size_t(kIdxDim)), 1, kIdxDim, kPool, ape, dt,
                                          tails[size_t(i)], poolStore, seqs[size_t(i)].pages, pos);
        });
        report("indexerCacheWrite decode, 4 sequences", "pool members + key", 1, kSeqs, s4, kSeqs * writeBytes);
        const double sb = medianSeconds(backend, reps, 20, [&] {
            backend.indexerCacheWriteBatch(ik, ig, batch.data(), kSeqs, kIdxDim, kPool, ape, dt, tails.data(), poolStore);
        });
        report("indexerCacheWrite decode, 4 sequences, one call", "pool members + key", 1, kSeqs, sb, kSeqs * writeBytes);
    }
    return rows_;
}

}  // namespace ts::cli
