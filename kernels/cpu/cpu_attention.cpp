// DSA-MLA on the CPU (glm_dsa.md §3.3 absorbed form, §4 NoPE, §5.1 fp8_ds_mla cache) and the k-pool
// lightning indexer (§8.2, §11.4–5). Caches are per sequence here: entry i of a cache is token i.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "cpu/cpu_backend.h"

namespace ts {

namespace {

// Dequantise one cached latent entry into out[R].
void loadLatent(const uint8_t* entry, int64_t R, KvCacheDtype dt, float* out) {
    if (dt == KvCacheDtype::Fp32) {
        std::memcpy(out, entry, size_t(R) * 4);
        return;
    }
    const uint8_t* scales = entry + R;
    for (int64_t i = 0; i < R; ++i) {
        float s;
        std::memcpy(&s, scales + (i / 128) * 4, 4);
        out[i] = fp8e4m3ToF32(entry[i]) * s;
    }
}

// fp8 e4m3 quantisation of n values with one fp32 scale; pow2 rounds the scale up to a power of two
// (vLLM's "ue8m0" indexer format), otherwise the scale is amax/448 (vLLM's "arbitrary_fp32" for GLM).
float quantFp8(const float* x, int64_t n, bool pow2, float minAmax, uint8_t* out) {
    float amax = 0;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    float s = std::max(amax, minAmax) / 448.0f;
    if (pow2) s = std::exp2(std::ceil(std::log2(s)));
    for (int64_t i = 0; i < n; ++i) out[i] = f32ToFp8e4m3(x[i] / s);
    return s;
}

bool isPow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

void CpuBackend::mlaCacheWrite(const Buffer& c, int64_t T, int64_t R, KvCacheDtype dt, const Buffer& cache,
                               const PageTable& pages, int64_t pos0) {
    const size_t eb = mlaCacheEntryBytes(dt, R);
    TS_CHECK(pos0 + T <= pages.capacity(), "mlaCacheWrite: positions beyond the sequence's pages");
    for (int64_t t = 0; t < T; ++t) {
        const int64_t slot = pages.slot(pos0 + t);
        TS_CHECK(size_t(slot + 1) * eb <= cache.size(), "mlaCacheWrite: slot outside the cache");
        uint8_t* e = cache.bytes() + size_t(slot) * eb;
        const float* x = c.f32() + t * R;
        if (dt == KvCacheDtype::Fp32) {
            std::memcpy(e, x, size_t(R) * 4);
            continue;
        }
        for (int64_t tile = 0; tile * 128 < R; ++tile) {
            const int64_t n = std::min<int64_t>(128, R - tile * 128);
            const float s = quantFp8(x + tile * 128, n, false, FLT_MIN * 448.0f, e + tile * 128);
            std::memcpy(e + R + tile * 4, &s, 4);
        }
        std::memset(e + R + ((R + 127) / 128) * 4, 0, 128);  // k_pe ≡ 0 (NoPE)
    }
}

void CpuBackend::mlaAbsorbQ(const Buffer& q, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                            const Buffer& qLat) {
    const int64_t R = kvb.cols;
    ThreadPool::global().parallelForCost(H, dn * R * (T + 1), [&](int64_t h0, int64_t h1) {
        std::vector<float> wuk(static_cast<size_t>(dn * R));
        for (int64_t h = h0; h < h1; ++h) {
            for (int64_t d = 0; d < dn; ++d) cpu::rowToF32(kvb, h * (dn + dv) + d, wuk.data() + d * R);
            for (int64_t t = 0; t < T; ++t) {
                float* out = qLat.f32() + (t * H + h) * R;
                std::fill(out, out + R, 0.0f);
                const float* qh = q.f32() + t * H * dn + h * dn;
                for (int64_t d = 0; d < dn; ++d) {
                    const float qd = qh[d];
                    const float* w = wuk.data() + d * R;
                    for (int64_t r = 0; r < R; ++r) out[r] += qd * w[r];
                }
            }
        }
    });
}

void CpuBackend::mlaSparseAttention(const Buffer& qLat, int64_t T, int64_t H, int64_t R, const Buffer& cache,
                                    KvCacheDtype dt, const PageTable& pages, const Buffer& idx, int64_t width,
                                    float scale, const Buffer& oLat) {
    const size_t eb = mlaCacheEntryBytes(dt, R);
    ThreadPool::global().parallelForCost(T, width * R * (H + 1), [&](int64_t t0, int64_t t1) {
        std::vector<int32_t> sel;
        std::vector<float> lat, p;
        for (int64_t t = t0; t < t1; ++t) {
            // The selected set, deduplicated and in ascending order: attention is over a set.
            sel.assign(idx.i32() + t * width, idx.i32() + (t + 1) * width);
            sel.erase(std::remove_if(sel.begin(), sel.end(), [](int32_t v) { return v < 0; }), sel.end());
            std::sort(sel.begin(), sel.end());
            sel.erase(std::unique(sel.begin(), sel.end()), sel.end());
            const int64_t n = int64_t(sel.size());
            lat.resize(size_t(n * R));
            for (int64_t i = 0; i < n; ++i) {
                TS_CHECK(sel[size_t(i)] < pages.capacity(), "sparse attention index beyond the sequence's pages");
                loadLatent(cache.bytes() + size_t(pages.slot(sel[size_t(i)])) * eb, R, dt, lat.data() + i * R);
            }
            p.resize(size_t(n));
            for (int64_t h = 0; h < H; ++h) {
                const float* qh = qLat.f32() + (t * H + h) * R;
                float* o = oLat.f32() + (t * H + h) * R;
                std::fill(o, o + R, 0.0f);
                if (n == 0) continue;
                float mx = -INFINITY;
                for (int64_t i = 0; i < n; ++i) mx = std::max(mx, p[size_t(i)] = scale * cpu::dot(qh, lat.data() + i * R, R));
                float sum = 0;
                for (int64_t i = 0; i < n; ++i) sum += (p[size_t(i)] = std::exp(p[size_t(i)] - mx));
                for (int64_t i = 0; i < n; ++i) {
                    const float w = p[size_t(i)] / sum;
                    const float* c = lat.data() + i * R;
                    for (int64_t r = 0; r < R; ++r) o[r] += w * c[r];
                }
            }
        }
    });
}

void CpuBackend::mlaUpV(const Buffer& oLat, int64_t T, int64_t H, int64_t dn, int64_t dv, const WeightView& kvb,
                        const Buffer& o) {
    const int64_t R = kvb.cols;
    ThreadPool::global().parallelForCost(H, dv * R * (T + 1), [&](int64_t h0, int64_t h1) {
        std::vector<float> wuv(static_cast<size_t>(dv * R));
        for (int64_t h = h0; h < h1; ++h) {
            for (int64_t j = 0; j < dv; ++j) cpu::rowToF32(kvb, h * (dn + dv) + dn + j, wuv.data() + j * R);
            for (int64_t t = 0; t < T; ++t)
                for (int64_t j = 0; j < dv; ++j)
                    o.f32()[t * H * dv + h * dv + j] = cpu::dot(wuv.data() + j * R, oLat.f32() + (t * H + h) * R, R);
        }
    });
}

void CpuBackend::indexerCacheWrite(const Buffer& k, const Buffer& gate, int64_t T, int64_t D, int64_t kp,
                                   const Buffer& ape, KvCacheDtype dt, const Buffer& tail, const Buffer& poolStore,
                                   const PageTable& pages, int64_t pos0) {
    const size_t kb = indexerKeyBytes(dt, D);
    TS_CHECK(pages.blockSize % kp == 0, "indexerCacheWrite: block size must be a multiple of index_kpool");
    TS_CHECK(tail.size() >= size_t(kp * 2 * D) * 4, "indexerCacheWrite: tail ring too small");
    float* ring = tail.f32();  // [kp, 2, D]: member m of the current pool: k then gate
    std::vector<float> key(static_cast<size_t>(D));
    for (int64_t t = 0; t < T; ++t) {
        const int64_t p = pos0 + t, m0 = p % kp;
        float* dst = ring + m0 * 2 * D;
        for (int64_t c = 0; c < D; ++c) {
            float kv = k.f32()[t * D + c], gv = gate.f32()[t * D + c];
            if (dt == KvCacheDtype::Fp8) {  // the tail ring is bf16 in the recipe's layout
                kv = bf16ToF32(f32ToBf16(kv));
                gv = bf16ToF32(f32ToBf16(gv));
            }
            dst[c] = kv;
            dst[D + c] = gv;
        }
        if (m0 != kp - 1) continue;
        // Pool j = p / kp completed: per-channel softmax over its kp members.
        const int64_t j = p / kp;
        TS_CHECK(j * kp < pages.capacity(), "indexerCacheWrite: pool beyond the sequence's pages");
        const int64_t poolSlot = pages.slot(j * kp) / kp;
        TS_CHECK(size_t(poolSlot + 1) * kb <= poolStore.size(), "indexerCacheWrite: pool slot outside the store");
        for (int64_t c = 0; c < D; ++c) {
            float mx = -INFINITY;
            for (int64_t m = 0; m < kp; ++m) mx = std::max(mx, ring[m * 2 * D + D + c] + ape.f32()[m * D + c]);
            float sum = 0, acc = 0;
            for (int64_t m = 0; m < kp; ++m) sum += std::exp(ring[m * 2 * D + D + c] + ape.f32()[m * D + c] - mx);
            for (int64_t m = 0; m < kp; ++m) {
                const float prob = std::exp(ring[m * 2 * D + D + c] + ape.f32()[m * D + c] - mx) / sum;
                acc += prob * ring[m * 2 * D + c];
            }
            key[size_t(c)] = acc;
        }
        uint8_t* out = poolStore.bytes() + size_t(poolSlot) * kb;
        if (dt == KvCacheDtype::Fp32) {
            std::memcpy(out, key.data(), size_t(D) * 4);
        } else {
            if (isPow2(D)) cpu::hadamard(key.data(), D);  // rotation: exact scores unchanged, fp8 error spread
            const float s = quantFp8(key.data(), D, true, 1e-4f, out);
            std::memcpy(out + D, &s, 4);
        }
    }
}

void CpuBackend::indexerSelect(const Buffer& q, const Buffer& w, int64_t T, int64_t H, int64_t D, int64_t kp,
                               int64_t topk, KvCacheDtype dt, const Buffer& poolStore, const PageTable& pages,
                               int64_t pos0, const Buffer& idx, IndexerStats* stats) {
    const size_t kb = indexerKeyBytes(dt, D);
    const int64_t K = topk / kp, width = topk + kp - 1;
    const float softmaxScale = 1.0f / std::sqrt(float(D));
    std::vector<int64_t> tiedAt(static_cast<size_t>(T), 0);
    ThreadPool::global().parallelForCost(T, (pos0 + T) / kp * H * D + 1, [&](int64_t t0, int64_t t1) {
        std::vector<float> score, qf(static_cast<size_t>(H * D)), qs(static_cast<size_t>(H)), kf(static_cast<size_t>(D));
        std::vector<uint8_t> q8(static_cast<size_t>(H * D));
        std::vector<int64_t> order;
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t p = pos0 + t;
            const int64_t nc = (p + 1) / kp;  // complete pools whose last token is visible
            int32_t* out = idx.i32() + t * width;
            std::fill(out, out + width, -1);
            order.resize(size_t(nc));
            std::iota(order.begin(), order.end(), 0);
            if (nc > K) {
                score.assign(size_t(nc), 0.0f);
                const float* wt = w.f32() + t * H;
                if (dt == KvCacheDtype::Fp8) {
                    for (int64_t h = 0; h < H; ++h) {
                        std::copy(q.f32() + (t * H + h) * D, q.f32() + (t * H + h + 1) * D, qf.begin() + h * D);
                        if (isPow2(D)) cpu::hadamard(qf.data() + h * D, D);
                        qs[size_t(h)] = quantFp8(qf.data() + h * D, D, true, 1e-4f, q8.data() + h * D);
                        for (int64_t c = 0; c < D; ++c) qf[size_t(h * D + c)] = fp8e4m3ToF32(q8[size_t(h * D + c)]);
                    }
                }
                for (int64_t j = 0; j < nc; ++j) {
                    const uint8_t* e = poolStore.bytes() + size_t(pages.slot(j * kp) / kp) * kb;
                    float ks = 1.0f;
                    if (dt == KvCacheDtype::Fp32) {
                        std::memcpy(kf.data(), e, size_t(D) * 4);
                    } else {
                        for (int64_t c = 0; c < D; ++c) kf[size_t(c)] = fp8e4m3ToF32(e[c]);
                        std::memcpy(&ks, e + D, 4);
                    }
                    float acc = 0;
                    for (int64_t h = 0; h < H; ++h) {
                        const float* qh = dt == KvCacheDtype::Fp32 ? q.f32() + (t * H + h) * D : qf.data() + h * D;
                        const float qk = cpu::dot(qh, kf.data(), D) * (dt == KvCacheDtype::Fp32 ? 1.0f : qs[size_t(h)] * ks);
                        acc += wt[h] * std::max(0.0f, softmaxScale * qk);
                    }
                    score[size_t(j)] = acc;
                }
                // Best K pools; equal scores: the earlier pool wins (the CUDA topk order, §10).
                std::partial_sort(order.begin(), order.begin() + K + 1, order.end(), [&](int64_t a, int64_t b) {
                    return score[size_t(a)] != score[size_t(b)] ? score[size_t(a)] > score[size_t(b)] : a < b;
                });
                if (score[size_t(order[size_t(K - 1)])] == score[size_t(order[size_t(K)])]) tiedAt[size_t(t)] = 1;
                order.resize(size_t(K));
                std::sort(order.begin(), order.end());
            }
            if (stats && stats->selectionHash.size() == size_t(T)) {
                uint64_t hsh = stats->selectionHash[size_t(t)] * 0x100000001b3ull + uint64_t(nc);
                for (int64_t j : order) hsh = (hsh ^ uint64_t(j + 1)) * 0x100000001b3ull;
                stats->selectionHash[size_t(t)] = hsh;
            }
            int64_t n = 0;
            for (int64_t j : order)
                for (int64_t m = 0; m < kp; ++m) out[n++] = int32_t(j * kp + m);
            for (int64_t tok = nc * kp; tok <= p; ++tok) out[n++] = int32_t(tok);  // the incomplete pool's tail
        }
    });
    if (stats) {
        for (int64_t t = 0; t < T; ++t)
            if (tiedAt[size_t(t)]) {
                if (stats->firstTiedQuery < 0) stats->firstTiedQuery = t;
                ++stats->tiedQueries;
            }
    }
}

}  // namespace ts
