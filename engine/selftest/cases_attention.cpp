// Self-test cases of the attention family: DSA-MLA (mlaCacheWrite, mlaAbsorbQ, mlaUpV, mlaSparseAttention)
// and the k-pool indexer (indexerCacheWrite, indexerSelect). Shapes: GLM-5.3-Flash's real widths (64 heads,
// latent 512, dn = dv = 256, indexer 32 heads × 128, kp 16, top-2048, a 128k context), the golden tiny_a
// (4 heads, latent 64, indexer 16 × 32, kp 4, top-32) and the embedded model (latent 128, top-128), odd
// sizes (partial fp8 tiles, byte-unaligned cache entries, D not a power of two, kp 3), T = 1 and T > 1.
//
// Tolerances. Cache writes and the indexer's selection are discrete or bit-defined: compared exactly
// (cache bytes, ring bytes, indices, tie counts, selection hashes). The one transcendental in a cache
// write — the pool softmax's exp — is not bit-reproducible across math libraries (glibc's expf is within
// 0.502 ulp, not correctly rounded), so pooled keys are compared exactly with gates built to make every
// softmax term exact (e^0 and e^-500: a random subset of "winner" members per channel), and with random
// gates within fp32 rounding (fp32 keys) or allowing a rare adjacent-code flip (fp8 keys). Float outputs
// (GEMMs, attention) differ only by fp32 summation order and expf's last bits: bounds are stated at each.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "core/dtype.h"
#include "exl3_tune.h"
#include "selftest/op_selftest.h"

namespace ts::selftest {

namespace {

const char* const kFamily = "attention";

std::vector<int32_t> asInts(const std::vector<uint8_t>& b) { return std::vector<int32_t>(b.begin(), b.end()); }

// `count` distinct physical blocks out of `poolBlocks`, shuffled: the sequence's page table.
std::vector<int32_t> shuffledBlocks(Context& ctx, int64_t count, int64_t poolBlocks) {
    std::vector<int32_t> all(static_cast<size_t>(poolBlocks));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), ctx.rng());
    all.resize(static_cast<size_t>(count));
    return all;
}

std::string kvName(KvCacheDtype dt) { return dt == KvCacheDtype::Fp8 ? "fp8" : "fp32"; }

// --- mlaCacheWrite ------------------------------------------------------------------------------------

// Latent rows with a different magnitude per 128-tile (scales from 1e-3 to 30) and a few values far below
// the tile's amax (the e4m3 subnormal range).
std::vector<float> latentRows(Context& ctx, int64_t T, int64_t R) {
    std::vector<float> x = ctx.randn(size_t(T * R));
    std::uniform_int_distribution<int> mag(0, 3), pick(0, 15);
    const float mags[] = {1e-3f, 0.3f, 1.0f, 30.0f};
    for (int64_t t = 0; t < T; ++t)
        for (int64_t tile = 0; tile * 128 < R; ++tile) {
            const float m = mags[mag(ctx.rng())];
            for (int64_t i = tile * 128; i < std::min(R, tile * 128 + 128); ++i) {
                x[size_t(t * R + i)] *= m;
                if (pick(ctx.rng()) == 0) x[size_t(t * R + i)] *= 1e-4f;
            }
        }
    return x;
}

Case mlaCacheWriteCase(int64_t R, int64_t T, int64_t pos0, int64_t blockSize, KvCacheDtype dt) {
    const std::string shape = "R=" + std::to_string(R) + " T=" + std::to_string(T) + " pos0=" + std::to_string(pos0) +
                              " bs=" + std::to_string(blockSize) + " " + kvName(dt);
    return {kFamily, "mlaCacheWrite " + shape, [=](Context& ctx) {
                const size_t eb = mlaCacheEntryBytes(dt, R);
                const int64_t seqBlocks = (pos0 + T + blockSize - 1) / blockSize, poolBlocks = seqBlocks + 3;
                const auto blocks = shuffledBlocks(ctx, seqBlocks, poolBlocks);
                const PageTable pages{blocks.data(), seqBlocks, blockSize};
                const auto x = latentRows(ctx, T, R);
                const size_t bytes = size_t(poolBlocks * blockSize) * eb;
                std::vector<uint8_t> out[2];
                Backend* bs[2] = {&ctx.ref(), &ctx.dut()};
                for (int i = 0; i < 2; ++i) {
                    Buffer cache = Context::poisoned(*bs[i], bytes);  // untouched slots must stay 0xFF
                    bs[i]->mlaCacheWrite(Context::put(*bs[i], x), T, R, dt, cache, pages, pos0);
                    out[i] = Context::getBytes(*bs[i], cache, bytes);
                }
                // The quantisation is defined bit for bit (amax/448 scale, RNE e4m3): bytes equal exactly.
                return std::vector<OpResult>{
                    Context::compareExact(kFamily, "mlaCacheWrite", shape + " (cache bytes)", asInts(out[0]), asInts(out[1]))};
            }};
}

// --- mlaAbsorbQ / mlaUpV -------------------------------------------------------------------------------

Case mlaProjectionCase(int64_t T, int64_t H, int64_t dn, int64_t dv, int64_t R, DType wt) {
    const std::string shape = "T=" + std::to_string(T) + " H=" + std::to_string(H) + " dn=" + std::to_string(dn) +
                              " dv=" + std::to_string(dv) + " R=" + std::to_string(R) + " " +
                              std::string(dtypeName(wt));
    return {kFamily, "mlaAbsorbQ+mlaUpV " + shape, [=](Context& ctx) {
                const float sw = 0.05f;
                const WeightView kvb = ctx.weight(H * (dn + dv), R, wt, sw);
                const auto q = ctx.randn(size_t(T * H * dn));
                const auto oLat = ctx.randn(size_t(T * H * R));
                std::vector<float> ql[2], o[2];
                Backend* bs[2] = {&ctx.ref(), &ctx.dut()};
                for (int i = 0; i < 2; ++i) {
                    Buffer qLatB = Context::poisoned(*bs[i], size_t(T * H * R) * 4);
                    Buffer oB = Context::poisoned(*bs[i], size_t(T * H * dv) * 4);
                    bs[i]->mlaAbsorbQ(Context::put(*bs[i], q), T, H, dn, dv, kvb, qLatB);
                    bs[i]->mlaUpV(Context::put(*bs[i], oLat), T, H, dn, dv, kvb, oB);
                    ql[i] = Context::getF32(*bs[i], qLatB, size_t(T * H * R));
                    o[i] = Context::getF32(*bs[i], oB, size_t(T * H * dv));
                }
                // Dot products of K terms of unit-variance inputs times N(0, sw²) weights: the output's rms is
                // sw·√K; a different fp32 summation order moves it by ~√K·2^-24 of that (≈ 1e-6 relative at
                // K = 512). Bound: 2e-5 of the rms (≥ 10× that), plus 1e-5 relative.
                const double absorbTol = 2e-5 * sw * std::sqrt(double(dn)), upTol = 2e-5 * sw * std::sqrt(double(R));
                return std::vector<OpResult>{Context::compare(kFamily, "mlaAbsorbQ", shape, ql[0], ql[1], absorbTol, 1e-5),
                                             Context::compare(kFamily, "mlaUpV", shape, o[0], o[1], upTol, 1e-5)};
            }};
}

// --- mlaSparseAttention ---------------------------------------------------------------------------------

enum class IdxStyle {
    Indexer,  // what indexerSelect emits: ≤ K whole pools ascending, the own tail, −1 padding
    Messy,    // unsorted, duplicates, −1 and other negatives anywhere (the op takes a set)
};

std::vector<int32_t> attentionIndices(Context& ctx, IdxStyle style, int64_t T, int64_t width, int64_t L, int64_t kp,
                                      int64_t topk) {
    std::vector<int32_t> idx(size_t(T * width), -1);
    for (int64_t t = 0; t < T; ++t) {
        int32_t* row = idx.data() + t * width;
        const int64_t p = L - T + t;  // the queries are the last T positions of the context
        if (style == IdxStyle::Indexer) {
            const int64_t nc = (p + 1) / kp, K = std::min(topk / kp, nc);
            std::vector<int32_t> pools(static_cast<size_t>(nc));
            std::iota(pools.begin(), pools.end(), 0);
            std::shuffle(pools.begin(), pools.end(), ctx.rng());
            pools.resize(size_t(K));
            std::sort(pools.begin(), pools.end());
            int64_t n = 0;
            for (int32_t j : pools)
                for (int64_t m = 0; m < kp; ++m) row[n++] = int32_t(j * kp + m);
            for (int64_t tok = nc * kp; tok <= p; ++tok) row[n++] = int32_t(tok);
        } else {
            std::uniform_int_distribution<int32_t> pos(0, int32_t(p)), kind(0, 9);
            for (int64_t i = 0; i < width; ++i) {
                const int k = kind(ctx.rng());
                row[i] = k == 0 ? -1 : k == 1 ? -7 : k == 2 && i > 0 ? row[i - 1] : pos(ctx.rng());
            }
            if (t == 1)  // one query with nothing selected: its output is zero
                std::fill(row, row + width, -1);
        }
    }
    return idx;
}

Case mlaSparseAttentionCase(int64_t T, int64_t H, int64_t R, int64_t L, int64_t kp, int64_t topk, int64_t blockSize,
                            KvCacheDtype dt, IdxStyle style, float scale) {
    const int64_t width = topk + kp - 1;
    const std::string shape = "T=" + std::to_string(T) + " H=" + std::to_string(H) + " R=" + std::to_string(R) +
                              " ctx=" + std::to_string(L) + " width=" + std::to_string(width) + " " + kvName(dt) +
                              (style == IdxStyle::Messy ? " unsorted+dups" : "");
    return {kFamily, "mlaSparseAttention " + shape, [=](Context& ctx) {
                const size_t eb = mlaCacheEntryBytes(dt, R);
                const int64_t seqBlocks = (L + blockSize - 1) / blockSize, poolBlocks = seqBlocks + 2;
                const auto blocks = shuffledBlocks(ctx, seqBlocks, poolBlocks);
                const PageTable pages{blocks.data(), seqBlocks, blockSize};
                const size_t bytes = size_t(poolBlocks * blockSize) * eb;
                // The cache is written once by the reference and the same bytes are given to both sides,
                // so this case tests attention alone.
                Buffer refCache = Context::poisoned(ctx.ref(), bytes);
                ctx.ref().mlaCacheWrite(Context::put(ctx.ref(), ctx.randn(size_t(L * R))), L, R, dt, refCache, pages, 0);
                const auto cacheBytes = Context::getBytes(ctx.ref(), refCache, bytes);
                const auto q = ctx.randn(size_t(T * H * R));
                const auto idx = attentionIndices(ctx, style, T, width, L, kp, topk);
                auto run = [&](Backend& b, const Buffer& cache) {
                    Buffer out = Context::poisoned(b, size_t(T * H * R) * 4);
                    b.mlaSparseAttention(Context::put(b, q), T, H, R, cache, dt, pages, Context::put(b, idx), width,
                                         scale, out);
                    return Context::getF32(b, out, size_t(T * H * R));
                };
                const std::vector<float> ref = run(ctx.ref(), refCache);
                const Buffer dutCache = Context::put(ctx.dut(), cacheBytes);
                // Scores scale·q·c (|score| ≲ 10) differ by fp32 summation order (~1e-6 absolute) and exp by
                // ≤ 2 ulp, so each softmax weight is within ~1e-6 relative; the output is a convex combination
                // of latents (|c| ≲ 5): errors ≲ 1e-6. Bound 1e-5 absolute + 1e-4 relative (one missing latent
                // of 2,000 moves outputs by ~5e-4). The tensor-core kernel (fp8, R = 512, heads in 16s) keeps q
                // and the softmax weights to ~22 bits as two fp16 parts, so the same bound holds for it.
                std::vector<OpResult> rs = {
                    Context::compare(kFamily, "mlaSparseAttention", shape, ref, run(ctx.dut(), dutCache), 1e-5, 1e-4)};
                // On the GPU the real model's shape has two kernels (kernels/exl3_tune.h): the other one too.
                const bool tcShape = dt == KvCacheDtype::Fp8 && R == 512 && H % 16 == 0;
                if (ctx.dut().name() == "cuda" && tcShape) {
                    const bool tc = mlaTensorCores();
                    std::vector<float> other;
                    {
                        const TuneOverride<mlaSetTensorCores> flip(tc ? 0 : 1);
                        other = run(ctx.dut(), dutCache);
                    }
                    rs.push_back(Context::compare(kFamily, tc ? "mlaSparseAttention simt" : "mlaSparseAttention tensor cores",
                                                  shape, ref, other, 1e-5, 1e-4));
                }
                return rs;
            }};
}

// --- indexerCacheWrite ----------------------------------------------------------------------------------

// One sequence of a batched call: its first position and rows.
struct StepSeq {
    int64_t pos0, rows;
};

enum class GateStyle {
    Exact,   // every softmax term e^0 or e^-500: pooled keys are bit-defined
    Random,  // N(0, 2) gates, N(0, 0.5) ape
};

// fp8 pool keys [D e4m3 | fp32 scale]: scales equal, codes equal except adjacent-code flips (a pooled key
// one ulp apart from the CPU's, through expf, landing on an e4m3 rounding boundary), at most one per
// thousand codes.
OpResult compareFp8Keys(const std::string& shape, const std::vector<uint8_t>& ref, const std::vector<uint8_t>& dut,
                        const std::vector<int64_t>& written, int64_t D) {
    OpResult r;
    r.family = kFamily;
    r.op = "indexerCacheWrite";
    r.shape = shape + " (fp8 pool keys, random gates)";
    const size_t kb = size_t(D) + 4;
    int64_t flips = 0, codes = 0;
    for (int64_t slot : written) {
        const uint8_t* a = ref.data() + size_t(slot) * kb;
        const uint8_t* b = dut.data() + size_t(slot) * kb;
        if (std::memcmp(a + D, b + D, 4) != 0) ++r.mismatches;
        for (int64_t c = 0; c < D; ++c, ++codes) {
            if (a[c] == b[c]) continue;
            if ((a[c] & 0x80) == (b[c] & 0x80) && std::abs(int(a[c]) - int(b[c])) == 1) ++flips;
            else ++r.mismatches;
        }
    }
    if (flips > std::max<int64_t>(1, codes / 1000)) r.mismatches += flips;
    r.maxAbsErr = double(r.mismatches + flips);
    r.worst = r.mismatches ? INFINITY : 0.0;
    r.pass = r.mismatches == 0 && codes > 0;
    r.note = std::to_string(flips) + " adjacent-code flips in " + std::to_string(codes) + " codes";
    return r;
}

// ape [kp, D] and the gates of N tokens from a pool boundary: with Exact gates, g + ape is v[pool, c] for
// "winners" and ≈ −512 for the rest, so the softmax terms are e^0 = 1 and e^(−500…) = 0 in any exp; v, ape and
// v − ape are dyadic with few bits, so exact in bf16 and in every sum. At least one winner per (pool, channel).
std::vector<float> indexerApe(Context& ctx, int64_t kp, int64_t D, GateStyle gates) {
    if (gates == GateStyle::Random) return ctx.randn(size_t(kp * D), 0.5f);
    std::vector<float> ape(size_t(kp * D));
    std::uniform_int_distribution<int> small(1, 8), coin(0, 9);
    for (float& a : ape) a = float(small(ctx.rng())) * 0.25f * (coin(ctx.rng()) < 5 ? 1.0f : -1.0f);
    return ape;
}
std::vector<float> indexerGates(Context& ctx, const std::vector<float>& ape, int64_t N, int64_t kp, int64_t D,
                                GateStyle gates) {
    if (gates == GateStyle::Random) return ctx.randn(size_t(N * D), 2.0f);
    std::vector<float> gate(size_t(N * D));
    std::uniform_int_distribution<int> small(1, 8), coin(0, 9);
    for (int64_t j = 0; j * kp < N; ++j)
        for (int64_t c = 0; c < D; ++c) {
            const float v = float(small(ctx.rng()) - 4) + 0.5f;
            const int64_t forced = std::uniform_int_distribution<int64_t>(0, kp - 1)(ctx.rng());
            for (int64_t m = 0; m < kp && j * kp + m < N; ++m) {
                const bool win = m == forced || coin(ctx.rng()) < 4;
                gate[size_t((j * kp + m) * D + c)] = win ? v - ape[size_t(m * D + c)] : -512.0f;
            }
        }
    return gate;
}
// The ring as earlier calls left it, for tokens k / gate from `start` (a pool boundary): members [start, pos0) of
// the current pool (rounded through bf16 in fp8 mode, as the op stores them); other slots poisoned (never read).
std::vector<float> indexerRingBefore(const std::vector<float>& k, const std::vector<float>& gate, int64_t start,
                                     int64_t pos0, int64_t kp, int64_t D, bool fp8) {
    std::vector<float> ring(size_t(kp * 2 * D));
    std::memset(ring.data(), 0xFF, ring.size() * 4);
    for (int64_t p = start; p < pos0; ++p)
        for (int64_t c = 0; c < D; ++c) {
            float kv = k[size_t((p - start) * D + c)], gv = gate[size_t((p - start) * D + c)];
            if (fp8) {
                kv = bf16ToF32(f32ToBf16(kv));
                gv = bf16ToF32(f32ToBf16(gv));
            }
            ring[size_t((p % kp) * 2 * D + c)] = kv;
            ring[size_t((p % kp) * 2 * D + D + c)] = gv;
        }
    return ring;
}
// The pool stores after the writes: bytes exact with Exact gates; otherwise the `written` slots' keys (fp8 codes
// within one adjacent-code flip per thousand, or fp32 within 2e-6 + 1e-5 rel).
OpResult compareIndexerStores(const std::string& op, const std::string& shape, const std::vector<uint8_t>& ref,
                              const std::vector<uint8_t>& dut, const std::vector<int64_t>& written, int64_t D,
                              KvCacheDtype dt, GateStyle gates) {
    if (gates == GateStyle::Exact)
        return Context::compareExact(kFamily, op, shape + " (pool store bytes)", asInts(ref), asInts(dut));
    if (dt == KvCacheDtype::Fp8) {
        OpResult r = compareFp8Keys(shape, ref, dut, written, D);
        r.op = op;
        return r;
    }
    // fp32 keys Σ_m prob_m·k_m with |k| ≲ 4: probabilities within a few ulp of the CPU's (expf) move a key by ≲ 1e-6.
    const size_t kb = indexerKeyBytes(dt, D);
    std::vector<float> a, b;
    for (int64_t slot : written)
        for (int64_t c = 0; c < D; ++c) {
            float x, y;
            std::memcpy(&x, ref.data() + size_t(slot) * kb + size_t(c) * 4, 4);
            std::memcpy(&y, dut.data() + size_t(slot) * kb + size_t(c) * 4, 4);
            a.push_back(x);
            b.push_back(y);
        }
    return Context::compare(kFamily, op, shape + " (fp32 pool keys)", a, b, 2e-6, 1e-5);
}

Case indexerCacheWriteCase(int64_t D, int64_t kp, int64_t blockSize, KvCacheDtype dt, int64_t pos0,
                           std::vector<int64_t> calls, GateStyle gates) {
    std::string callStr;
    for (int64_t n : calls) {
        if (!callStr.empty()) callStr += '+';
        callStr += std::to_string(n);
    }
    const std::string shape = "D=" + std::to_string(D) + " kp=" + std::to_string(kp) + " pos0=" + std::to_string(pos0) +
                              " T=" + callStr + " " + kvName(dt) + (gates == GateStyle::Exact ? " exact-gates" : " random-gates");
    return {kFamily, "indexerCacheWrite " + shape, [=](Context& ctx) {
                const bool fp8 = dt == KvCacheDtype::Fp8;
                const size_t kb = indexerKeyBytes(dt, D);
                int64_t total = 0;
                for (int64_t n : calls) total += n;
                const int64_t start = pos0 / kp * kp;  // the first pool touched begins here
                const int64_t end = pos0 + total, seqBlocks = (end + blockSize - 1) / blockSize;
                const int64_t poolBlocks = seqBlocks + 2, poolSlots = poolBlocks * blockSize / kp;
                const auto blocks = shuffledBlocks(ctx, seqBlocks, poolBlocks);
                const PageTable pages{blocks.data(), seqBlocks, blockSize};

                // Tokens [start, end): k and gate; ape [kp, D]; the ring before the first call.
                const int64_t N = end - start;
                const std::vector<float> k = ctx.randn(size_t(N * D)), ape = indexerApe(ctx, kp, D, gates),
                                         gate = indexerGates(ctx, ape, N, kp, D, gates);
                const std::vector<float> ring = indexerRingBefore(k, gate, start, pos0, kp, D, fp8);

                std::vector<uint8_t> ringOut[2], store[2];
                Backend* bs[2] = {&ctx.ref(), &ctx.dut()};
                for (int i = 0; i < 2; ++i) {
                    Backend& b = *bs[i];
                    Buffer tail = Context::put(b, ring), pools = Context::poisoned(b, size_t(poolSlots) * kb);
                    Buffer apeB = Context::put(b, ape);
                    int64_t p = pos0;
                    for (int64_t n : calls) {
                        const size_t off = size_t((p - start) * D);
                        b.indexerCacheWrite(Context::put(b, k.data() + off, size_t(n * D) * 4),
                                            Context::put(b, gate.data() + off, size_t(n * D) * 4), n, D, kp, apeB, dt,
                                            tail, pools, pages, p);
                        p += n;
                    }
                    ringOut[i] = Context::getBytes(b, tail, ring.size() * 4);
                    store[i] = Context::getBytes(b, pools, size_t(poolSlots) * kb);
                }
                std::vector<OpResult> rs;
                // The ring holds inputs (bf16-rounded in fp8 mode): exact.
                rs.push_back(Context::compareExact(kFamily, "indexerCacheWrite", shape + " (tail ring bytes)",
                                                   asInts(ringOut[0]), asInts(ringOut[1])));
                std::vector<int64_t> written;
                for (int64_t j = pos0 / kp; j < end / kp; ++j) written.push_back(pages.slot(j * kp) / kp);
                rs.push_back(compareIndexerStores("indexerCacheWrite", shape, store[0], store[1], written, D, dt, gates));
                return rs;
            }};
}

// One step of several sequences through indexerCacheWriteBatch on the device under test, against the reference
// running each sequence alone through indexerCacheWrite: each its own shuffled blocks of one pool store, its own
// ring, position and rows (0 rows, a pool completing inside the step, more rows than kp, a mid-pool start).
Case indexerCacheWriteBatchCase(int64_t D, int64_t kp, int64_t blockSize, KvCacheDtype dt, std::vector<StepSeq> seqsIn,
                                GateStyle gates) {
    std::string shape = "D=" + std::to_string(D) + " kp=" + std::to_string(kp) + " " + kvName(dt) +
                        (gates == GateStyle::Exact ? " exact-gates" : " random-gates") + " seqs(pos0+rows)=";
    for (size_t i = 0; i < seqsIn.size(); ++i) {
        if (i > 0) shape += ',';
        shape += std::to_string(seqsIn[i].pos0) + "+" + std::to_string(seqsIn[i].rows);
    }
    return {kFamily, "indexerCacheWriteBatch " + shape, [=](Context& ctx) {
                const bool fp8 = dt == KvCacheDtype::Fp8;
                const size_t kb = indexerKeyBytes(dt, D);
                const int64_t n = int64_t(seqsIn.size());
                int64_t poolBlocks = 2;
                for (const StepSeq& q : seqsIn) poolBlocks += (q.pos0 + q.rows + blockSize - 1) / blockSize;
                const int64_t poolSlots = poolBlocks * blockSize / kp;
                const auto all = shuffledBlocks(ctx, poolBlocks, poolBlocks);
                const std::vector<float> ape = indexerApe(ctx, kp, D, gates);
                std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n));
                std::vector<SeqRows> seqs(static_cast<size_t>(n));
                std::vector<std::vector<float>> rings(static_cast<size_t>(n));
                std::vector<float> k, gate;  // the step's rows, sequence after sequence
                std::vector<int64_t> written;
                int64_t used = 0;
                for (int64_t s = 0; s < n; ++s) {
                    const StepSeq& q = seqsIn[size_t(s)];
                    const int64_t nb = (q.pos0 + q.rows + blockSize - 1) / blockSize;
                    tables[size_t(s)].assign(all.begin() + used, all.begin() + used + nb);
                    used += nb;
                    seqs[size_t(s)] = SeqRows{PageTable{tables[size_t(s)].data(), nb, blockSize}, q.pos0, q.rows};
                    const int64_t start = q.pos0 / kp * kp, N = q.pos0 + q.rows - start;
                    const std::vector<float> ks = ctx.randn(size_t(N * D)), gs = indexerGates(ctx, ape, N, kp, D, gates);
                    rings[size_t(s)] = indexerRingBefore(ks, gs, start, q.pos0, kp, D, fp8);
                    k.insert(k.end(), ks.begin() + (q.pos0 - start) * D, ks.end());
                    gate.insert(gate.end(), gs.begin() + (q.pos0 - start) * D, gs.end());
                    for (int64_t j = q.pos0 / kp; j < (q.pos0 + q.rows) / kp; ++j)
                        written.push_back(seqs[size_t(s)].pages.slot(j * kp) / kp);
                }
                std::vector<std::vector<uint8_t>> ringOut[2];
                std::vector<uint8_t> store[2];
                Backend* bs[2] = {&ctx.ref(), &ctx.dut()};
                for (int i = 0; i < 2; ++i) {
                    Backend& b = *bs[i];
                    std::vector<Buffer> tails;
                    for (const auto& r : rings) tails.push_back(Context::put(b, r));
                    const Buffer pools = Context::poisoned(b, size_t(poolSlots) * kb), apeB = Context::put(b, ape);
                    if (i == 0) {
                        int64_t r0 = 0;
                        for (int64_t s = 0; s < n; ++s) {
                            const SeqRows& q = seqs[size_t(s)];
                            if (q.rows > 0)
                                b.indexerCacheWrite(Context::put(b, k.data() + r0 * D, size_t(q.rows * D) * 4),
                                                    Context::put(b, gate.data() + r0 * D, size_t(q.rows * D) * 4), q.rows, D,
                                                    kp, apeB, dt, tails[size_t(s)], pools, q.pages, q.pos0);
                            r0 += q.rows;
                        }
                    } else {
                        b.indexerCacheWriteBatch(Context::put(b, k), Context::put(b, gate), seqs.data(), n, D, kp, apeB, dt,
                                                 tails.data(), pools);
                    }
                    for (const Buffer& t : tails) ringOut[i].push_back(Context::getBytes(b, t, size_t(kp * 2 * D) * 4));
                    store[i] = Context::getBytes(b, pools, size_t(poolSlots) * kb);
                }
                std::vector<OpResult> rs;
                for (int64_t s = 0; s < n; ++s)
                    rs.push_back(Context::compareExact(kFamily, "indexerCacheWriteBatch",
                                                       shape + " (tail ring of sequence " + std::to_string(s) + ")",
                                                       asInts(ringOut[0][size_t(s)]), asInts(ringOut[1][size_t(s)])));
                rs.push_back(compareIndexerStores("indexerCacheWriteBatch", shape, store[0], store[1], written, D, dt, gates));
                return rs;
            }};
}

// --- indexerSelect ----------------------------------------------------------------------------------------

// Pool keys: random fp8 codes (no NaN codes) with power-of-two scales, or N(0,1) fp32. With `distinct` > 0
// every pool copies one of `distinct` keys (plus an all-zero key that scores exactly 0): exact ties.
std::vector<uint8_t> poolStoreBytes(Context& ctx, KvCacheDtype dt, int64_t D, int64_t slots, int distinct) {
    const size_t kb = indexerKeyBytes(dt, D);
    std::vector<uint8_t> store(size_t(slots) * kb);
    std::uniform_int_distribution<int> code(0, 253), ex(-9, -5);
    auto fill = [&](uint8_t* e) {
        if (dt == KvCacheDtype::Fp8) {
            for (int64_t c = 0; c < D; ++c) {
                const int v = code(ctx.rng());
                e[c] = uint8_t(v >= 0x7f ? v + 1 : v);  // skip 0x7f (NaN); 0xff is out of range
            }
            const float s = std::ldexp(1.0f, ex(ctx.rng()));
            std::memcpy(e + D, &s, 4);
        } else {
            const auto v = ctx.randn(size_t(D));
            std::memcpy(e, v.data(), size_t(D) * 4);
        }
    };
    if (distinct <= 0) {
        for (int64_t s = 0; s < slots; ++s) fill(store.data() + size_t(s) * kb);
        return store;
    }
    std::vector<std::vector<uint8_t>> keys(size_t(distinct) + 1, std::vector<uint8_t>(kb, 0));
    for (int i = 0; i < distinct; ++i) fill(keys[size_t(i)].data());
    if (dt == KvCacheDtype::Fp8) {
        const float one = 1.0f;
        std::memcpy(keys.back().data() + D, &one, 4);  // zero codes, scale 1: the zero key
    }
    std::uniform_int_distribution<int> pick(0, distinct);
    for (int64_t s = 0; s < slots; ++s) std::memcpy(store.data() + size_t(s) * kb, keys[size_t(pick(ctx.rng()))].data(), kb);
    return store;
}

Case indexerSelectCase(int64_t T, int64_t H, int64_t D, int64_t kp, int64_t topk, int64_t pos0, int64_t blockSize,
                       KvCacheDtype dt, int distinct) {
    const std::string shape = "T=" + std::to_string(T) + " H=" + std::to_string(H) + " D=" + std::to_string(D) +
                              " kp=" + std::to_string(kp) + " topk=" + std::to_string(topk) + " pos0=" +
                              std::to_string(pos0) + " " + kvName(dt) +
                              (distinct > 0 ? " ties(" + std::to_string(distinct) + " keys)" : "");
    return {kFamily, "indexerSelect " + shape, [=](Context& ctx) {
                const int64_t width = topk + kp - 1, end = pos0 + T;
                const int64_t seqBlocks = (end + blockSize - 1) / blockSize, poolBlocks = seqBlocks + 1;
                const auto blocks = shuffledBlocks(ctx, seqBlocks, poolBlocks);
                const PageTable pages{blocks.data(), seqBlocks, blockSize};
                const auto store = poolStoreBytes(ctx, dt, D, poolBlocks * blockSize / kp, distinct);
                const auto q = ctx.randn(size_t(T * H * D));
                auto w = ctx.randn(size_t(T * H));
                for (float& x : w) x /= std::sqrt(float(H));
                std::vector<uint64_t> seeds(static_cast<size_t>(T));
                for (uint64_t& s : seeds) s = ctx.rng()();

                struct Result {
                    std::vector<int32_t> idx, stat, hash;
                };
                auto run = [&](Backend& b) {
                    Result r;
                    Buffer out = Context::poisoned(b, size_t(T * width) * 4);
                    IndexerStats st;
                    st.selectionHash = seeds;
                    b.indexerSelect(Context::put(b, q), Context::put(b, w), T, H, D, kp, topk, dt, Context::put(b, store),
                                    pages, pos0, out, &st);
                    r.idx = Context::getI32(b, out, size_t(T * width));
                    r.stat = {int32_t(st.tiedQueries), int32_t(st.firstTiedQuery)};
                    for (uint64_t h : st.selectionHash) {
                        r.hash.push_back(int32_t(uint32_t(h)));
                        r.hash.push_back(int32_t(uint32_t(h >> 32)));
                    }
                    return r;
                };
                // The scores are computed in the CPU's order on both sides, so the selection is exact even at
                // near-ties; exact ties resolve to the earliest pool.
                const Result ref = run(ctx.ref());
                std::vector<OpResult> rs;
                auto check = [&](const std::string& op, const Result& got) {
                    rs.push_back(Context::compareExact(kFamily, op, shape + " (indices)", ref.idx, got.idx));
                    rs.push_back(Context::compareExact(kFamily, op, shape + " (tiedQueries, firstTiedQuery)", ref.stat, got.stat));
                    rs.push_back(Context::compareExact(kFamily, op, shape + " (selection hashes)", ref.hash, got.hash));
                };
                check("indexerSelect", run(ctx.dut()));
                // On the GPU the real model's widths have two paths (kernels/exl3_tune.h): the other one too.
                if (ctx.dut().name() == "cuda" && D == 128 && H <= 32) {
                    const bool fast = indexerFastSelect();
                    Result other;
                    {
                        const TuneOverride<indexerSetFastSelect> flip(fast ? 0 : 1);
                        other = run(ctx.dut());
                    }
                    check(fast ? "indexerSelect general" : "indexerSelect fast", other);
                }
                return rs;
            }};
}

// The fast select's q quantiser converts with the GPU's fp32 → e4m3 instruction instead of the CPU's rounding
// rule (f32ToFp8e4m3): the two must agree for every fp32 input, which the device checks exhaustively (all 2^32
// bit patterns, ~10 ms). Only a CUDA device under test has such a conversion; elsewhere the row says so.
Case indexerFp8ConversionCase() {
    return {kFamily, "indexerSelect fp8 conversion", [](Context& ctx) {
                if (ctx.dut().name() != "cuda")
                    return std::vector<OpResult>{Context::verdict(kFamily, "indexerSelect", "q quantiser: not applicable",
                                                                  true, "no hardware e4m3 conversion on this backend")};
                const int64_t bad = indexerFp8ConversionMismatches();
                return std::vector<OpResult>{Context::verdict(
                    kFamily, "indexerSelect", "q quantiser: hardware e4m3 conversion vs the CPU rule, all 2^32 fp32 inputs",
                    bad == 0, std::to_string(bad) + " inputs differ")};
            }};
}

// --- the batched forms (mlaCacheWriteBatch, indexerSelectBatch, mlaSparseAttentionBatch) -------------------

// One step of several sequences, each on its own shuffled blocks of one shared pool, at its own position and
// with its own number of rows (a sequence with 0 rows included), through the three batched ops on the device
// under test, against the reference running each sequence alone through the per-sequence ops. In order: the
// step's latents written (cache bytes exact), the selection (indices, per-sequence tie statistics and hashes
// exact; one sequence asks for none), attention over that selection (the attention bound above).
Case batchedStepCase(int64_t H, int64_t R, int64_t Hi, int64_t D, int64_t kp, int64_t topk, int64_t blockSize,
                     KvCacheDtype dt, std::vector<StepSeq> seqsIn, float scale) {
    std::string shape = "H=" + std::to_string(H) + " R=" + std::to_string(R) + " indexer " + std::to_string(Hi) + "x" +
                        std::to_string(D) + " kp=" + std::to_string(kp) + " topk=" + std::to_string(topk) + " " +
                        kvName(dt) + " seqs(pos0+rows)=";
    for (size_t i = 0; i < seqsIn.size(); ++i) {
        if (i > 0) shape += ',';
        shape += std::to_string(seqsIn[i].pos0) + "+" + std::to_string(seqsIn[i].rows);
    }
    return {kFamily, "batched step " + shape, [=](Context& ctx) {
                const int64_t width = topk + kp - 1, n = int64_t(seqsIn.size());
                const size_t eb = mlaCacheEntryBytes(dt, R);
                // Page tables: disjoint shuffled slices of one pool of blocks (+2 never used).
                int64_t poolBlocks = 2, T = 0;
                for (const StepSeq& s : seqsIn) {
                    poolBlocks += (s.pos0 + s.rows + blockSize - 1) / blockSize;
                    T += s.rows;
                }
                const auto all = shuffledBlocks(ctx, poolBlocks, poolBlocks);
                std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n));
                std::vector<SeqRows> seqs(static_cast<size_t>(n));
                int64_t used = 0;
                for (int64_t s = 0; s < n; ++s) {
                    const int64_t nb = (seqsIn[size_t(s)].pos0 + seqsIn[size_t(s)].rows + blockSize - 1) / blockSize;
                    tables[size_t(s)].assign(all.begin() + used, all.begin() + used + nb);
                    used += nb;
                    seqs[size_t(s)] = SeqRows{PageTable{tables[size_t(s)].data(), nb, blockSize}, seqsIn[size_t(s)].pos0,
                                              seqsIn[size_t(s)].rows};
                }
                std::vector<int64_t> row0(size_t(n) + 1, 0);
                for (int64_t s = 0; s < n; ++s) row0[size_t(s) + 1] = row0[size_t(s)] + seqs[size_t(s)].rows;
                std::vector<OpResult> rs;

                // (1) Latents: each sequence's context before pos0 written by the reference, the same bytes given
                // to both sides; then the step's rows, per sequence vs batched.
                const size_t cacheBytes = size_t(poolBlocks * blockSize) * eb;
                Buffer refCache = Context::poisoned(ctx.ref(), cacheBytes);
                for (const SeqRows& s : seqs)
                    if (s.pos0 > 0)
                        ctx.ref().mlaCacheWrite(Context::put(ctx.ref(), ctx.randn(size_t(s.pos0 * R))), s.pos0, R, dt, refCache,
                                                s.pages, 0);
                const Buffer dutCache = Context::put(ctx.dut(), Context::getBytes(ctx.ref(), refCache, cacheBytes));
                // Unit-scale rows like the context's: attention below attends to them, and its bound assumes
                // |score| ≲ 10 — latentRows' ×30 tiles give scores in the hundreds, where fp32 order noise in a
                // score moves its softmax weight by ~1e-4 (measured: 2.9× the bound on the H200). The per-tile
                // magnitudes of the cache write itself are mlaCacheWriteCase's.
                const auto lat = ctx.randn(size_t(T * R));
                for (int64_t s = 0; s < n; ++s)
                    if (seqs[size_t(s)].rows > 0)
                        ctx.ref().mlaCacheWrite(Context::put(ctx.ref(), std::vector<float>(lat.begin() + row0[size_t(s)] * R,
                                                                                            lat.begin() + row0[size_t(s) + 1] * R)),
                                                seqs[size_t(s)].rows, R, dt, refCache, seqs[size_t(s)].pages, seqs[size_t(s)].pos0);
                ctx.dut().mlaCacheWriteBatch(Context::put(ctx.dut(), lat), seqs.data(), n, R, dt, dutCache);
                const auto refBytes = Context::getBytes(ctx.ref(), refCache, cacheBytes);
                rs.push_back(Context::compareExact(kFamily, "mlaCacheWriteBatch", shape + " (cache bytes)", asInts(refBytes),
                                                   asInts(Context::getBytes(ctx.dut(), dutCache, cacheBytes))));

                // (2) The selection over one pool store (random keys in every slot).
                const auto store = poolStoreBytes(ctx, dt, D, poolBlocks * blockSize / kp, 0);
                const auto q = ctx.randn(size_t(T * Hi * D));
                auto w = ctx.randn(size_t(T * Hi));
                for (float& x : w) x /= std::sqrt(float(Hi));
                std::vector<std::vector<uint64_t>> seeds(static_cast<size_t>(n));
                for (int64_t s = 0; s < n; ++s)
                    for (int64_t r = 0; r < seqs[size_t(s)].rows; ++r) seeds[size_t(s)].push_back(ctx.rng()());
                struct Selection {
                    std::vector<int32_t> idx, stats;  // stats: per sequence (tiedQueries, firstTiedQuery, hash words…)
                };
                const int64_t noStats = n > 1 ? 1 : -1;  // this sequence asks for no statistics
                auto statsOf = [&](std::vector<IndexerStats>& st, Selection& out) {
                    for (int64_t s = 0; s < n; ++s) {
                        if (s == noStats) continue;
                        out.stats.push_back(int32_t(st[size_t(s)].tiedQueries));
                        out.stats.push_back(int32_t(st[size_t(s)].firstTiedQuery));
                        for (uint64_t h : st[size_t(s)].selectionHash) {
                            out.stats.push_back(int32_t(uint32_t(h)));
                            out.stats.push_back(int32_t(uint32_t(h >> 32)));
                        }
                    }
                };
                auto freshStats = [&] {
                    std::vector<IndexerStats> st(static_cast<size_t>(n));
                    for (int64_t s = 0; s < n; ++s) st[size_t(s)].selectionHash = seeds[size_t(s)];
                    return st;
                };
                Selection ref;
                {
                    Backend& b = ctx.ref();
                    Buffer out = Context::poisoned(b, size_t(T * width) * 4);
                    const Buffer qB = Context::put(b, q), wB = Context::put(b, w), storeB = Context::put(b, store);
                    auto st = freshStats();
                    for (int64_t s = 0; s < n; ++s) {
                        const SeqRows& sq = seqs[size_t(s)];
                        if (sq.rows == 0) continue;
                        const int64_t r0 = row0[size_t(s)];
                        b.indexerSelect(qB.viewF32(size_t(r0 * Hi * D), size_t(sq.rows * Hi * D)),
                                        wB.viewF32(size_t(r0 * Hi), size_t(sq.rows * Hi)), sq.rows, Hi, D, kp, topk, dt, storeB,
                                        sq.pages, sq.pos0, out.view(size_t(r0 * width) * 4, size_t(sq.rows * width) * 4),
                                        s == noStats ? nullptr : &st[size_t(s)]);
                    }
                    ref.idx = Context::getI32(b, out, size_t(T * width));
                    statsOf(st, ref);
                }
                auto selectDut = [&] {
                    Backend& b = ctx.dut();
                    Selection r;
                    Buffer out = Context::poisoned(b, size_t(T * width) * 4);
                    auto st = freshStats();
                    std::vector<IndexerStats*> ptrs(static_cast<size_t>(n));
                    for (int64_t s = 0; s < n; ++s) ptrs[size_t(s)] = s == noStats ? nullptr : &st[size_t(s)];
                    b.indexerSelectBatch(Context::put(b, q), Context::put(b, w), seqs.data(), n, Hi, D, kp, topk, dt,
                                         Context::put(b, store), out, ptrs.data());
                    r.idx = Context::getI32(b, out, size_t(T * width));
                    statsOf(st, r);
                    return r;
                };
                auto checkSelection = [&](const std::string& op, const Selection& got) {
                    rs.push_back(Context::compareExact(kFamily, op, shape + " (indices)", ref.idx, got.idx));
                    rs.push_back(Context::compareExact(kFamily, op, shape + " (per-sequence ties and hashes)", ref.stats, got.stats));
                };
                checkSelection("indexerSelectBatch", selectDut());
                if (ctx.dut().name() == "cuda" && D == 128 && Hi <= 32) {  // the GPU's other select path
                    const bool fast = indexerFastSelect();
                    const TuneOverride<indexerSetFastSelect> flip(fast ? 0 : 1);
                    checkSelection(fast ? "indexerSelectBatch general" : "indexerSelectBatch fast", selectDut());
                }

                // (3) Attention over the reference's selection, on the reference's cache bytes.
                const auto ql = ctx.randn(size_t(T * H * R));
                std::vector<float> refO;
                {
                    Backend& b = ctx.ref();
                    Buffer out = Context::poisoned(b, size_t(T * H * R) * 4);
                    const Buffer qB = Context::put(b, ql), idxB = Context::put(b, ref.idx);
                    for (int64_t s = 0; s < n; ++s) {
                        const SeqRows& sq = seqs[size_t(s)];
                        if (sq.rows == 0) continue;
                        const int64_t r0 = row0[size_t(s)];
                        b.mlaSparseAttention(qB.viewF32(size_t(r0 * H * R), size_t(sq.rows * H * R)), sq.rows, H, R, refCache, dt,
                                             sq.pages, idxB.view(size_t(r0 * width) * 4, size_t(sq.rows * width) * 4), width,
                                             scale, out.viewF32(size_t(r0 * H * R), size_t(sq.rows * H * R)));
                    }
                    refO = Context::getF32(b, out, size_t(T * H * R));
                }
                auto attendDut = [&] {
                    Backend& b = ctx.dut();
                    Buffer out = Context::poisoned(b, size_t(T * H * R) * 4);
                    b.mlaSparseAttentionBatch(Context::put(b, ql), seqs.data(), n, H, R, dutCache, dt, Context::put(b, ref.idx),
                                              width, scale, out);
                    return Context::getF32(b, out, size_t(T * H * R));
                };
                rs.push_back(Context::compare(kFamily, "mlaSparseAttentionBatch", shape, refO, attendDut(), 1e-5, 1e-4));
                if (ctx.dut().name() == "cuda" && dt == KvCacheDtype::Fp8 && R == 512 && H % 16 == 0) {
                    const bool tc = mlaTensorCores();
                    const TuneOverride<mlaSetTensorCores> flip(tc ? 0 : 1);
                    rs.push_back(Context::compare(kFamily, tc ? "mlaSparseAttentionBatch simt" : "mlaSparseAttentionBatch tensor cores",
                                                  shape, refO, attendDut(), 1e-5, 1e-4));
                }
                return rs;
            }};
}

}  // namespace

void addAttentionCases(std::vector<Case>& out) {
    using KV = KvCacheDtype;
    // mlaCacheWrite: real latent (656-byte entries), tiny_a, embedded, a partial tile, byte-unaligned entries.
    out.push_back(mlaCacheWriteCase(512, 1, 100, 64, KV::Fp8));
    out.push_back(mlaCacheWriteCase(512, 150, 30, 64, KV::Fp8));
    out.push_back(mlaCacheWriteCase(64, 9, 3, 4, KV::Fp8));
    out.push_back(mlaCacheWriteCase(128, 5, 0, 16, KV::Fp8));
    out.push_back(mlaCacheWriteCase(200, 3, 7, 8, KV::Fp8));
    out.push_back(mlaCacheWriteCase(65, 2, 1, 2, KV::Fp8));
    out.push_back(mlaCacheWriteCase(512, 7, 60, 64, KV::Fp32));
    out.push_back(mlaCacheWriteCase(33, 4, 5, 4, KV::Fp32));

    // kv_b_proj absorption: real (dn = dv = 256, R = 512) at decode (the ≤ 16-row tile), tiny_a (T = 20) and
    // odd (T = 70) on the 64-row prefill tile, embedded.
    out.push_back(mlaProjectionCase(1, 64, 256, 256, 512, DType::BF16));
    out.push_back(mlaProjectionCase(20, 4, 32, 32, 64, DType::BF16));
    out.push_back(mlaProjectionCase(3, 4, 64, 64, 128, DType::F16));
    // Decode forms (≤ 4 rows) with partial column tiles and odd depths; 5 rows: the tiled kernel.
    out.push_back(mlaProjectionCase(2, 8, 192, 256, 512, DType::BF16));
    out.push_back(mlaProjectionCase(4, 5, 20, 12, 70, DType::F32));
    out.push_back(mlaProjectionCase(5, 5, 20, 12, 70, DType::F16));
    out.push_back(mlaProjectionCase(70, 3, 20, 12, 70, DType::F32));

    // Sparse attention: real decode (2,063-wide selection), batch of 4, fp32 cache, prefill, tiny_a and odd
    // shapes with unsorted / duplicated / negative indices and an empty query, embedded.
    out.push_back(mlaSparseAttentionCase(1, 64, 512, 4096, 16, 2048, 64, KV::Fp8, IdxStyle::Indexer, 1.0f / 16));
    out.push_back(mlaSparseAttentionCase(4, 64, 512, 3000, 16, 2048, 64, KV::Fp8, IdxStyle::Indexer, 1.0f / 16));
    out.push_back(mlaSparseAttentionCase(2, 64, 512, 1000, 16, 2048, 64, KV::Fp32, IdxStyle::Indexer, 1.0f / 16));
    // A prefill chunk (many queries: one chunk of the selection per block, no merge step).
    out.push_back(mlaSparseAttentionCase(36, 64, 512, 150, 16, 2048, 64, KV::Fp8, IdxStyle::Indexer, 1.0f / 16));
    // One rank's heads at TP = 2 (32), the selection unsorted with duplicates, negatives and an empty query at
    // the real width; one head group with a partial last tile.
    out.push_back(mlaSparseAttentionCase(3, 32, 512, 3000, 16, 2048, 64, KV::Fp8, IdxStyle::Messy, 1.0f / 16));
    out.push_back(mlaSparseAttentionCase(2, 16, 512, 77, 16, 2048, 64, KV::Fp8, IdxStyle::Indexer, 1.0f / 16));
    out.push_back(mlaSparseAttentionCase(7, 4, 64, 40, 4, 32, 4, KV::Fp8, IdxStyle::Messy, 1.0f / std::sqrt(32.0f)));
    out.push_back(mlaSparseAttentionCase(5, 4, 128, 300, 4, 128, 16, KV::Fp32, IdxStyle::Indexer, 0.125f));
    out.push_back(mlaSparseAttentionCase(3, 5, 200, 50, 3, 33, 6, KV::Fp8, IdxStyle::Messy, 0.1f));

    // Indexer cache: real widths over several calls (pools completing inside a call and across calls, from
    // the ring), decode-style single tokens on tiny_a widths, D not a power of two with kp 3 starting
    // mid-pool, byte-unaligned fp8 keys (D = 23).
    out.push_back(indexerCacheWriteCase(128, 16, 64, KV::Fp8, 0, {21, 40, 1, 1, 3}, GateStyle::Exact));
    out.push_back(indexerCacheWriteCase(128, 16, 64, KV::Fp8, 5, {37, 1, 30}, GateStyle::Random));
    out.push_back(indexerCacheWriteCase(128, 16, 64, KV::Fp32, 0, {50, 1, 14}, GateStyle::Exact));
    out.push_back(indexerCacheWriteCase(128, 16, 64, KV::Fp32, 3, {33, 16}, GateStyle::Random));
    out.push_back(indexerCacheWriteCase(32, 4, 4, KV::Fp8, 0, {1, 1, 1, 1, 1, 1, 1, 1, 1}, GateStyle::Exact));
    out.push_back(indexerCacheWriteCase(32, 4, 16, KV::Fp32, 6, {1, 1, 1, 5}, GateStyle::Exact));
    out.push_back(indexerCacheWriteCase(24, 3, 6, KV::Fp8, 2, {5, 7}, GateStyle::Exact));
    out.push_back(indexerCacheWriteCase(23, 2, 4, KV::Fp8, 1, {6, 1}, GateStyle::Exact));
    // The batched write: a decode step of six sequences at the real widths (two completing a pool, one with no
    // rows, one starting a pool), a chunk longer than kp beside single tokens, and odd widths.
    out.push_back(indexerCacheWriteBatchCase(128, 16, 64, KV::Fp8, {{15, 1}, {200, 1}, {31, 1}, {77, 0}, {64, 1}, {5, 1}},
                                             GateStyle::Exact));
    out.push_back(indexerCacheWriteBatchCase(128, 16, 64, KV::Fp8, {{3, 40}, {47, 1}, {0, 16}}, GateStyle::Random));
    out.push_back(indexerCacheWriteBatchCase(128, 16, 64, KV::Fp32, {{100, 20}, {11, 5}, {15, 1}}, GateStyle::Random));
    out.push_back(indexerCacheWriteBatchCase(23, 2, 4, KV::Fp8, {{1, 1}, {6, 3}, {0, 0}, {9, 1}}, GateStyle::Exact));

    // Indexer selection: a 128k context at decode (8,192 pools, K = 128), prefill across the point where
    // the candidates outnumber K, tiny_a / embedded widths with massive exact ties (few distinct keys and a
    // zero key), odd shapes (D = 24 and 23, kp 3 and 2).
    out.push_back(indexerSelectCase(2, 32, 128, 16, 2048, 131070, 64, KV::Fp8, 0));
    out.push_back(indexerSelectCase(40, 32, 128, 16, 2048, 2030, 64, KV::Fp32, 0));
    out.push_back(indexerSelectCase(5, 32, 128, 16, 2048, 5000, 64, KV::Fp8, 0));
    // The GPU's fast path at D = 128 (cuda_indexer_select.cu): exact ties at the K-th pool (6 keys over ~1,250
    // pools: every digit of the radix select, its finer digits over the list of the first digit's bin; then 2
    // keys over 10,000 pools: a first-digit bin of ~5,000, more than the list holds), fewer heads than lanes, a
    // prefill chunk crossing K in fp8, and more pools than its shared-memory top-K holds on any device (the
    // general top-K after the fast scores).
    out.push_back(indexerSelectCase(3, 32, 128, 16, 2048, 20000, 64, KV::Fp8, 5));
    out.push_back(indexerSelectCase(1, 32, 128, 16, 2048, 160000, 64, KV::Fp8, 1));
    out.push_back(indexerSelectCase(4, 17, 128, 16, 2048, 9000, 64, KV::Fp32, 0));
    out.push_back(indexerSelectCase(64, 32, 128, 16, 2048, 2000, 64, KV::Fp8, 0));
    out.push_back(indexerSelectCase(1, 2, 128, 1, 64, 60000, 64, KV::Fp8, 0));
    out.push_back(indexerFp8ConversionCase());
    out.push_back(indexerSelectCase(60, 16, 32, 4, 32, 0, 4, KV::Fp8, 3));
    out.push_back(indexerSelectCase(60, 16, 32, 4, 32, 0, 4, KV::Fp32, 3));
    out.push_back(indexerSelectCase(50, 16, 32, 4, 128, 100, 16, KV::Fp8, 0));
    // A prefill chunk of 300 queries over ~800 pools: the device scores long runs of pools per block.
    out.push_back(indexerSelectCase(300, 16, 32, 4, 128, 3000, 16, KV::Fp8, 0));
    out.push_back(indexerSelectCase(20, 5, 24, 3, 12, 7, 6, KV::Fp8, 4));
    out.push_back(indexerSelectCase(9, 3, 23, 2, 6, 3, 4, KV::Fp8, 0));
    out.push_back(indexerSelectCase(9, 3, 23, 2, 6, 3, 4, KV::Fp32, 2));

    // A step of several sequences through the batched ops: the real widths at decode (contexts past and below
    // the top-2,048, one sequence without rows, one with 3 rows: a speculative verify), fp32, tiny_a widths with
    // a mixed prefill + decode step, odd shapes.
    out.push_back(batchedStepCase(64, 512, 32, 128, 16, 2048, 64, KV::Fp8, {{5000, 1}, {700, 1}, {3000, 0}, {2500, 3}, {4100, 1}},
                                  1.0f / 16));
    out.push_back(batchedStepCase(32, 512, 32, 128, 16, 2048, 64, KV::Fp32, {{2200, 1}, {90, 2}}, 1.0f / 16));
    out.push_back(batchedStepCase(4, 64, 16, 32, 4, 32, 4, KV::Fp8, {{0, 20}, {61, 1}, {200, 1}, {7, 5}}, 1.0f / std::sqrt(32.0f)));
    out.push_back(batchedStepCase(5, 200, 3, 23, 3, 12, 6, KV::Fp8, {{40, 1}, {0, 0}, {13, 4}}, 0.1f));
}

}  // namespace ts::selftest
