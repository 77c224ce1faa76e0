// CPU reference ops on inputs with known answers: the fp8_ds_mla cache layout and its error bound,
// sparse attention over an index set, the indexer's tie-break and tail, mHC's Sinkhorn projection,
// group-limited MoE routing, the SwiGLU clamp, the bf16 linear against a double-precision sum, the
// embedding broadcast to the mHC streams (repeatRows), and allocUninit's NaN fill.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backend.h"

using namespace ts;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

std::vector<float> read(Backend& b, const Buffer& buf, size_t n) {
    std::vector<float> v(n);
    b.download(buf, v.data(), n * 4);
    return v;
}

}  // namespace

class TestCpuOps : public QObject {
    Q_OBJECT

private slots:
    void fp8MlaCacheLayout() {
        auto b = makeCpuBackend();
        const int64_t R = 512, T = 3;
        QCOMPARE(mlaCacheEntryBytes(KvCacheDtype::Fp8, R), size_t(656));  // the recipe's fp8_ds_mla entry
        auto x = randn(size_t(T * R), 1, 3.0f);
        x[7] = 0.0f;
        // Pages of 2 slots; the sequence owns physical blocks {1, 2, 0}: positions 2..4 land in slots 4, 5, 0.
        const int32_t blocks[] = {1, 2, 0};
        const PageTable pages{blocks, 3, 2};
        Buffer in = b->upload(x.data(), x.size() * 4), cache = b->alloc(656 * 6);
        b->mlaCacheWrite(in, T, R, KvCacheDtype::Fp8, cache, pages, 2);
        std::vector<uint8_t> bytes(656 * 6);
        b->download(cache, bytes.data(), bytes.size());
        for (int i = 1 * 656; i < 4 * 656; ++i) QCOMPARE(bytes[size_t(i)], uint8_t(0));  // slots 1..3 untouched
        const int64_t slotOf[] = {4, 5, 0};
        for (int64_t t = 0; t < T; ++t) {
            const uint8_t* e = bytes.data() + slotOf[t] * 656;
            for (int i = 528; i < 656; ++i) QCOMPARE(e[i], uint8_t(0));  // k_pe ≡ 0 (NoPE)
            for (int64_t i = 0; i < R; ++i) {
                float s;
                std::memcpy(&s, e + 512 + (i / 128) * 4, 4);
                const float v = x[size_t(t * R + i)], q = fp8e4m3ToF32(e[i]) * s;
                // e4m3 keeps 3 mantissa bits: half an ulp is 2^-4 relative; subnormals 2^-10 of the scale.
                QVERIFY2(std::fabs(q - v) <= std::fabs(v) / 16.0f + s * std::ldexp(1.0f, -10),
                         qPrintable(QString("%1 vs %2").arg(q).arg(v)));
            }
            // The tile's largest magnitude maps to the top of the fp8 range.
            float amax = 0;
            for (int64_t i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(x[size_t(t * R + i)]));
            float s0;
            std::memcpy(&s0, e + 512, 4);
            QCOMPARE(s0, amax / 448.0f);
        }
    }

    void sparseAttentionUsesOnlyTheIndexSet() {
        auto b = makeCpuBackend();
        const int64_t R = 64, H = 2, N = 6;
        auto lat = randn(size_t(N * R), 2);
        auto q = randn(size_t(H * R), 3, 0.3f);
        Buffer cache = b->alloc(size_t(N * R) * 4);
        const int32_t blocks[] = {1, 0};  // 3-slot pages in reverse order: attention must follow the table
        const PageTable pages{blocks, 2, 3};
        b->mlaCacheWrite(b->upload(lat.data(), lat.size() * 4), N, R, KvCacheDtype::Fp32, cache, pages, 0);
        // Selected {4, 1, 1(dup), -1}: a set; duplicates and -1 are ignored.
        std::vector<int32_t> idx = {4, 1, 1, -1};
        Buffer out = b->alloc(size_t(H * R) * 4);
        b->mlaSparseAttention(b->upload(q.data(), q.size() * 4), 1, H, R, cache, KvCacheDtype::Fp32, pages,
                              b->upload(idx.data(), 16), 4, 0.125f, out);
        const auto o = read(*b, out, size_t(H * R));
        for (int64_t h = 0; h < H; ++h) {
            double s1 = 0, s4 = 0;
            for (int64_t r = 0; r < R; ++r) {
                s1 += double(q[size_t(h * R + r)]) * lat[size_t(1 * R + r)];
                s4 += double(q[size_t(h * R + r)]) * lat[size_t(4 * R + r)];
            }
            const double m = std::max(s1, s4) * 0.125, e1 = std::exp(s1 * 0.125 - m), e4 = std::exp(s4 * 0.125 - m);
            for (int64_t r = 0; r < R; ++r) {
                const double want = (e1 * lat[size_t(R + r)] + e4 * lat[size_t(4 * R + r)]) / (e1 + e4);
                QVERIFY(std::fabs(o[size_t(h * R + r)] - want) < 1e-5);
            }
        }
    }

    void indexerTieBreakAndTail() {
        auto b = makeCpuBackend();
        const int64_t D = 8, kp = 2, topk = 4, H = 1;  // K = 2 pools selected
        // 11 tokens → pools 0..4 complete, token 10 is the tail of the query at position 10.
        const int64_t T = 11;
        std::vector<float> k(size_t(T * D), 0.0f), gate(size_t(T * D), 0.0f), ape(size_t(kp * D), 0.0f);
        // Pool scores: pool 3 best; pools 0, 2 and 4 tie exactly (key = e0); pool 1 scores 0 (key = -e0).
        auto setPool = [&](int64_t j, float v) { for (int64_t m = 0; m < kp; ++m) k[size_t((j * kp + m) * D)] = v; };
        setPool(0, 1.0f); setPool(1, -1.0f); setPool(2, 1.0f); setPool(3, 2.0f); setPool(4, 1.0f);
        const int32_t blocks[] = {0, 1, 2};  // 4-token pages (2 pools each)
        const PageTable pages{blocks, 3, 4};
        Buffer tail = b->alloc(size_t(kp * 2 * D) * 4), pools = b->alloc(size_t(6) * indexerKeyBytes(KvCacheDtype::Fp32, D));
        // Written in two chunks (7 + 4 tokens): the tail ring carries the incomplete pool across calls.
        b->indexerCacheWrite(b->upload(k.data(), 7 * D * 4), b->upload(gate.data(), 7 * D * 4), 7, D, kp,
                             b->upload(ape.data(), ape.size() * 4), KvCacheDtype::Fp32, tail, pools, pages, 0);
        b->indexerCacheWrite(b->upload(k.data() + 7 * D, 4 * D * 4), b->upload(gate.data() + 7 * D, 4 * D * 4), 4, D, kp,
                             b->upload(ape.data(), ape.size() * 4), KvCacheDtype::Fp32, tail, pools, pages, 7);
        std::vector<float> q(size_t(T * H * D), 0.0f), w(size_t(T * H), 1.0f);
        for (int64_t t = 0; t < T; ++t) q[size_t(t * D)] = 1.0f;
        const int64_t width = topk + kp - 1;
        Buffer idx = b->alloc(size_t(T * width) * 4);
        IndexerStats stats;
        b->indexerSelect(b->upload(q.data(), q.size() * 4), b->upload(w.data(), w.size() * 4), T, H, D, kp, topk,
                         KvCacheDtype::Fp32, pools, pages, 0, idx, &stats);
        std::vector<int32_t> out(size_t(T * width));
        b->download(idx, out.data(), out.size() * 4);
        // Query 10: pools 3 (best) and 0 (earliest of the tied 0, 2, 4), then the tail token 10.
        const std::vector<int32_t> q10(out.begin() + 10 * width, out.begin() + 11 * width);
        QCOMPARE(q10, (std::vector<int32_t>{0, 1, 6, 7, 10}));
        // Query 3: only pools 0 and 1 are complete: all selected, no tail.
        QCOMPARE(std::vector<int32_t>(out.begin() + 3 * width, out.begin() + 4 * width),
                 (std::vector<int32_t>{0, 1, 2, 3, -1}));
        // Query 0: no complete pool, the tail alone.
        QCOMPARE(out[0], 0);
        QCOMPARE(out[1], -1);
        // The tie at the selection boundary is reported: first at query 7 (pools 0 and 2 for the second slot).
        QVERIFY(stats.tiedQueries >= 1);
        QCOMPARE(stats.firstTiedQuery, int64_t(7));  // pools 0..3: 3 best, then 0 ~ 2
    }

    void mhcSinkhorn() {
        auto b = makeCpuBackend();
        const int n = 4;
        const int64_t D = 16, T = 3, mix = 2 * n + n * n;
        auto streams = randn(size_t(T * n * D), 4);
        auto fn = randn(size_t(mix * n * D), 5, 0.05f);  // moderate logits: Sinkhorn converges in 20 steps
        auto base = randn(size_t(mix), 6);
        std::vector<float> scale = {1.5f, 0.7f, 2.0f};
        HyperConnParams p;
        p.fn = WeightView{DType::F32, fn.data(), mix, n * D};
        p.base = b->upload(base.data(), base.size() * 4);
        p.scale = b->upload(scale.data(), 12);
        p.n = n;
        p.sinkhornIters = 20;
        Buffer x = b->alloc(size_t(T * D) * 4), post = b->alloc(size_t(T * n) * 4), comb = b->alloc(size_t(T * n * n) * 4);
        b->mhcPre(b->upload(streams.data(), streams.size() * 4), T, D, p, x, post, comb);
        const auto c = read(*b, comb, size_t(T * n * n)), po = read(*b, post, size_t(T * n));
        for (int64_t t = 0; t < T; ++t) {
            for (int i = 0; i < n; ++i) {
                float row = 0, col = 0;
                for (int j = 0; j < n; ++j) {
                    row += c[size_t(t * n * n + i * n + j)];
                    col += c[size_t(t * n * n + j * n + i)];
                }
                QVERIFY2(std::fabs(col - 1.0f) < 1e-4f, "columns of comb sum to 1 (last step normalises columns)");
                QVERIFY2(std::fabs(row - 1.0f) < 1e-3f, qPrintable(QString("row sum %1").arg(row)));
                QVERIFY(po[size_t(t * n + i)] > 0.0f && po[size_t(t * n + i)] < 2.0f);
            }
        }
    }

    void moeGroupLimitedRouting() {
        auto b = makeCpuBackend();
        const int64_t E = 8, D = 4;
        // Router rows make logits = e (so sigmoid increases with e); bias favours expert 1.
        std::vector<float> w(size_t(E * D), 0.0f), x = {1, 0, 0, 0}, bias(size_t(E), 0.0f);
        for (int64_t e = 0; e < E; ++e) w[size_t(e * D)] = float(e) - 4.0f;
        bias[1] = 10.0f;
        int32_t idx[2];
        float wt[2];
        // 4 groups of 2: scores favour group 3 (experts 6, 7) and group 0 (expert 1 via bias).
        b->moeRoute(b->upload(x.data(), 16), 1, WeightView{DType::F32, w.data(), E, D}, b->upload(bias.data(), 32), E, 2,
                    4, 2, true, 2.5f, idx, wt);
        QCOMPARE(idx[0], 1);  // chosen by bias
        QCOMPARE(idx[1], 7);
        const float s1 = 1.0f / (1.0f + std::exp(3.0f)), s7 = 1.0f / (1.0f + std::exp(-3.0f));
        QVERIFY(std::fabs(wt[0] - 2.5f * s1 / (s1 + s7)) < 1e-6f);  // weights from unbiased scores
        QVERIFY(std::fabs(wt[1] - 2.5f * s7 / (s1 + s7)) < 1e-6f);
    }

    void swigluClamp() {
        auto b = makeCpuBackend();
        std::vector<float> g = {20.0f, -2.0f}, u = {-30.0f, 0.5f};
        Buffer out = b->alloc(8);
        b->swiglu(b->upload(g.data(), 8), b->upload(u.data(), 8), 1, 2, 10.0f, out);
        const auto o = read(*b, out, 2);
        QVERIFY(std::fabs(o[0] - 10.0f / (1.0f + std::exp(-10.0f)) * -10.0f) < 1e-4f);
        QVERIFY(std::fabs(o[1] - (-2.0f / (1.0f + std::exp(2.0f))) * 0.5f) < 1e-6f);
    }

    void linearBf16() {
        auto b = makeCpuBackend();
        const int64_t T = 3, in = 37, out = 11;  // odd sizes exercise the tails
        auto x = randn(size_t(T * in), 7);
        auto wf = randn(size_t(out * in), 8);
        std::vector<uint16_t> w(wf.size());
        for (size_t i = 0; i < w.size(); ++i) w[i] = f32ToBf16(wf[i]);
        Buffer y = b->alloc(size_t(T * out) * 4);
        b->linear(b->upload(x.data(), x.size() * 4), T, WeightView{DType::BF16, w.data(), out, in}, y);
        const auto got = read(*b, y, size_t(T * out));
        for (int64_t t = 0; t < T; ++t)
            for (int64_t o = 0; o < out; ++o) {
                double want = 0;
                for (int64_t i = 0; i < in; ++i) want += double(x[size_t(t * in + i)]) * bf16ToF32(w[size_t(o * in + i)]);
                QVERIFY(std::fabs(got[size_t(t * out + o)] - want) < 1e-4);
            }
    }

    void repeatRowsBroadcast() {
        auto b = makeCpuBackend();
        const int64_t T = 3, D = 5;
        const int n = 4;
        std::vector<float> src(static_cast<size_t>(T * D));
        for (size_t i = 0; i < src.size(); ++i) src[i] = float(i + 1);  // every row distinct, none zero
        // One spare float past [T, n, D]: it must be left alone.
        const size_t outFloats = static_cast<size_t>(T * n * D) + 1;
        std::vector<float> sentinel(outFloats, -7.0f);
        Buffer dst = b->upload(sentinel.data(), outFloats * 4);
        b->repeatRows(b->upload(src.data(), src.size() * 4), T, D, n, dst);
        const auto got = read(*b, dst, outFloats);
        for (int64_t t = 0; t < T; ++t)
            for (int i = 0; i < n; ++i)
                for (int64_t d = 0; d < D; ++d)
                    QCOMPARE(got[static_cast<size_t>((t * n + i) * D + d)], src[static_cast<size_t>(t * D + d)]);
        QCOMPARE(got.back(), -7.0f);
        // Nothing to do for an empty shape (and no access to the buffers).
        b->repeatRows(Buffer(), 0, D, n, Buffer());
        b->repeatRows(b->upload(src.data(), src.size() * 4), T, D, 0, Buffer());
    }

    void allocUninitIsNaN() {
        // The CPU backend poisons allocUninit memory so that a model buffer wrongly switched from
        // alloc() (one whose op does not overwrite it, or that is accumulated into) breaks the tests.
        auto b = makeCpuBackend();
        for (size_t bytes : {size_t(0), size_t(4), size_t(4 * 37 + 3), size_t(1) << 20, (size_t(1) << 20) + 2}) {
            Buffer u = b->allocUninit(bytes);
            QCOMPARE(u.size(), bytes);
            std::vector<uint8_t> host(bytes);
            if (bytes) b->download(u, host.data(), bytes);
            const size_t floats = bytes / 4;
            size_t wrong = 0;  // counted, then compared once: a QCOMPARE per byte of 1 MiB is slow
            for (size_t i = 0; i < floats; ++i) {
                uint32_t bits = 0;
                std::memcpy(&bits, host.data() + i * 4, 4);
                wrong += bits != 0x7fc00000u;
            }
            for (size_t i = floats * 4; i < bytes; ++i) wrong += host[i] != 0xFF;
            QCOMPARE(wrong, size_t(0));
            // alloc() stays zero-filled.
            Buffer z = b->alloc(bytes);
            std::vector<uint8_t> zh(bytes, 1);
            if (bytes) b->download(z, zh.data(), bytes);
            QCOMPARE(size_t(std::count(zh.begin(), zh.end(), uint8_t(0))), bytes);
        }
    }
};

QTEST_GUILESS_MAIN(TestCpuOps)
#include "test_cpu_ops.moc"
