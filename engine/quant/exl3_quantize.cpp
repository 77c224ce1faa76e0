// The EXL3 quantizer for one linear (see exl3_quantize.h).
#include "quant/exl3_quantize.h"

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/exl3_hadamard.h"
#include "quant/exl3_ldlq.h"
#include "quant/exl3_trellis.h"
#include "quant/exl3_viterbi.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <set>

namespace ts {

namespace {

constexpr double kCodebookScale = 1.24371088;  // RMS of 3INST (spec §3.3): the target row RMS of W_reg
constexpr int32_t kMcgFlag = int32_t(kExl3McgMultiplier);   // stored as int32 (spec §2.1)
constexpr int32_t kMul1Flag = int32_t(kExl3Mul1Multiplier);

int64_t pad128(int64_t x) { return (x + kExl3Pad - 1) / kExl3Pad * kExl3Pad; }

// x → fp16 → fp32, never 0 for a non-zero x (a scale that rounds to 0 would divide by 0 below).
float roundScale(float x, uint16_t& bits) {
    bits = f32ToF16(x);
    if ((bits & 0x7FFFu) == 0) bits = uint16_t((x < 0 ? 0x8000u : 0u) | 1u);  // smallest subnormal
    return f16ToF32(bits);
}

// ±1 per element from a 64-bit Mersenne Twister (its output sequence is fixed by the standard, unlike
// the <random> distributions, so the signs are the same on every platform).
std::vector<float> randomSigns(std::mt19937_64& rng, int64_t len) {
    std::vector<float> s(static_cast<size_t>(len));
    for (auto& v : s) v = (rng() >> 63) ? -1.0f : 1.0f;
    return s;
}

// RMS of each column / row of a [rows, cols] matrix. Callers normalise / floor them.
std::vector<double> columnRms(const std::vector<float>& a, int64_t rows, int64_t cols, int64_t realRows) {
    std::vector<double> s(static_cast<size_t>(cols), 0.0);
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) s[size_t(j)] += double(a[size_t(i * cols + j)]) * a[size_t(i * cols + j)];
    for (auto& v : s) v = std::sqrt(v / double(realRows));
    return s;
}

// The tile (tk, tn) of a [k, n] matrix as a 256-vector in position order (spec §3.1).
void gatherTile(const float* a, int64_t n, int64_t tk, int64_t tn, float* x) {
    for (int p = 0; p < kExl3TileValues; ++p)
        x[p] = a[(16 * tk + exl3TilePos(p).r) * n + 16 * tn + exl3TilePos(p).c];
}

// Global scale search (spec §5.3 step 4) on the normalised matrix a [k, n]: sampled tiles (a wrapped
// diagonal of width 3 over the tile grid, plus the highest- and lowest-RMS tiles), evenly thinned to
// at most `cap`; for a candidate g every sample is Viterbi-quantized as g·x and scored by
// mean((Q/g − x)²). The scoring search runs on the open trellis (exl3ViterbiTileOpen: one pass instead
// of the two tail-biting passes; the wrap constraint hardly moves a tile's error, and g only needs that). Coarse grid 0.1, 0.3, …, 1.9 on every third sample, then ±2 steps of 0.075 around the
// best on all samples, then the vertex of the parabola through the best fine point and its neighbours.
float searchScale(const std::vector<float>& a, int64_t k, int64_t n, int bits, Exl3Codebook cb, int cap,
                  ThreadPool& pool) {
    const int64_t TK = k / 16, TN = n / 16;
    std::vector<std::pair<int64_t, int64_t>> diag;
    std::set<std::pair<int64_t, int64_t>> seen;
    for (int64_t i = 0; i < std::max(TK, TN); ++i)
        for (int64_t d = 0; d < 3; ++d) {
            const std::pair<int64_t, int64_t> t{i % TK, (i + d) % TN};
            if (seen.insert(t).second) diag.push_back(t);
        }
    // Highest / lowest RMS tiles.
    std::pair<int64_t, int64_t> hiT{0, 0}, loT{0, 0};
    double hiR = -1, loR = 1e300;
    for (int64_t tk = 0; tk < TK; ++tk)
        for (int64_t tn = 0; tn < TN; ++tn) {
            double s = 0;
            for (int r = 0; r < 16; ++r)
                for (int c = 0; c < 16; ++c) s += double(a[size_t((16 * tk + r) * n + 16 * tn + c)]) * a[size_t((16 * tk + r) * n + 16 * tn + c)];
            if (s > hiR) hiR = s, hiT = {tk, tn};
            if (s < loR) loR = s, loT = {tk, tn};
        }
    std::vector<std::pair<int64_t, int64_t>> picks;
    const int64_t room = std::max<int64_t>(1, cap - 2);
    for (int64_t i = 0; i < std::min<int64_t>(room, int64_t(diag.size())); ++i)
        picks.push_back(diag[size_t(i * int64_t(diag.size()) / std::min<int64_t>(room, int64_t(diag.size())))]);
    for (auto t : {hiT, loT})
        if (std::find(picks.begin(), picks.end(), t) == picks.end()) picks.push_back(t);
    std::vector<float> tiles(picks.size() * kExl3TileValues);
    for (size_t i = 0; i < picks.size(); ++i) gatherTile(a.data(), n, picks[i].first, picks[i].second, &tiles[i * kExl3TileValues]);

    // Mean squared error of each candidate over a subset of the samples; all (candidate, tile) pairs in
    // one parallel loop, summed in a fixed order.
    auto score = [&](const std::vector<double>& gs, size_t stride) {
        std::vector<size_t> idx;
        for (size_t i = 0; i < picks.size(); i += stride) idx.push_back(i);
        std::vector<double> err(gs.size() * idx.size());
        std::atomic<size_t> next{0};
        pool.parallelFor(pool.size(), [&](int64_t, int64_t) {
            for (size_t job; (job = next.fetch_add(1)) < err.size();) {
                const double g = gs[job / idx.size()];
                const float* x = &tiles[idx[job % idx.size()] * kExl3TileValues];
                float xs[kExl3TileValues], v[kExl3TileValues];
                for (int p = 0; p < kExl3TileValues; ++p) xs[p] = float(g * x[p]);
                exl3ViterbiTileOpen(xs, bits, cb, v);
                double e = 0;
                for (int p = 0; p < kExl3TileValues; ++p) e += (v[p] / g - x[p]) * (v[p] / g - x[p]);
                err[job] = e;
            }
        });
        std::vector<double> mse(gs.size(), 0.0);
        for (size_t j = 0; j < err.size(); ++j) mse[j / idx.size()] += err[j];
        return mse;
    };
    std::vector<double> coarse;
    for (int i = 0; i < 10; ++i) coarse.push_back(0.1 + 0.2 * i);
    const std::vector<double> cm = score(coarse, 3);
    const double gc = coarse[size_t(std::min_element(cm.begin(), cm.end()) - cm.begin())];
    std::vector<double> fine;
    for (int d = -2; d <= 2; ++d) fine.push_back(std::max(0.01, gc + 0.075 * d));
    const std::vector<double> fm = score(fine, 1);
    const size_t m = size_t(std::min_element(fm.begin(), fm.end()) - fm.begin());
    double g = fine[m];
    if (m > 0 && m + 1 < fine.size()) {
        // Vertex of the parabola through (g−h, f0), (g, f1), (g+h, f2): g + h·(f0 − f2) / (2·(f0 − 2f1 + f2)).
        const double f0 = fm[m - 1], f1 = fm[m], f2 = fm[m + 1], h = 0.075;
        const double den = f0 - 2 * f1 + f2;
        if (den > 0) g = std::clamp(g + h * (f0 - f2) / (2 * den), fine[m - 1], fine[m + 1]);
    }
    return float(g);
}

}  // namespace

float exl3DefaultScale(Exl3Codebook cb) { return cb == Exl3Codebook::Mul1 ? 0.8f : 1.0f; }

uint64_t exl3TensorSeed(std::string_view prefix, uint64_t runSeed) {
    uint64_t h = 0xcbf29ce484222325ull ^ runSeed;
    for (unsigned char c : prefix) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

Exl3Quantized exl3Quantize(const float* w, int64_t in, int64_t out, const float* hessian, const Exl3QuantOptions& opt,
                           ThreadPool* poolPtr, const std::function<void(int64_t, int64_t)>& progress) {
    if (opt.bits < 1 || opt.bits > kExl3MaxBits)
        fail(ErrorKind::InvalidArgument, "EXL3 quantizer: bits must be 1..8, got " + std::to_string(opt.bits));
    if (in <= 0 || out <= 0) fail(ErrorKind::InvalidArgument, "EXL3 quantizer: empty weight");
    ThreadPool& pool = poolPtr ? *poolPtr : ThreadPool::global();
    Exl3Quantized q;
    q.in = in, q.out = out, q.bits = opt.bits, q.codebook = opt.codebook;
    const int64_t k = q.k = pad128(in), n = q.n = pad128(out);

    // W padded to [k, n].
    std::vector<float> a(static_cast<size_t>(k * n), 0.0f);
    for (int64_t i = 0; i < in; ++i)
        for (int64_t j = 0; j < out; ++j) {
            const float v = w[i * out + j];
            if (!std::isfinite(v)) fail(ErrorKind::InvalidArgument, "EXL3 quantizer: non-finite weight");
            a[size_t(i * n + j)] = v;
        }
    std::mt19937_64 rng(opt.seed);
    const std::vector<float> su0 = randomSigns(rng, k), sv0 = randomSigns(rng, n);

    // 1–2. Output scales (normalised by the mean over non-zero columns, floored at 1e-3 so that they stay
    // well inside fp16), then W ⊘ sv and the output Hadamard on every row.
    std::vector<double> cr = columnRms(a, k, n, in);
    double mean = 0;
    int64_t live = 0;
    for (double v : cr)
        if (v > 0) mean += v, ++live;
    mean = live ? mean / double(live) : 1.0;
    std::vector<float> sv(static_cast<size_t>(n));
    q.svh.resize(size_t(n));
    for (int64_t j = 0; j < n; ++j) {
        const double rel = cr[size_t(j)] > 0 ? std::max(cr[size_t(j)] / mean, 1e-3) : 0.1;
        sv[size_t(j)] = roundScale(float(opt.outScales ? sv0[size_t(j)] * rel : sv0[size_t(j)]), q.svh[size_t(j)]);
    }
    pool.parallelFor(k, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            float* row = a.data() + i * n;
            for (int64_t j = 0; j < n; ++j) row[j] /= sv[size_t(j)];
            hadamard128Blocks(row, n);
        }
    });

    // 3. Input scales: row RMS (over the padded width: the Hadamard spread the energy into it) / −1.2437.
    std::vector<double> rr(static_cast<size_t>(k), 0.0);
    for (int64_t i = 0; i < k; ++i) {
        double s = 0;
        for (int64_t j = 0; j < n; ++j) s += double(a[size_t(i * n + j)]) * a[size_t(i * n + j)];
        rr[size_t(i)] = std::sqrt(s / double(n));
    }
    double rmean = 0;
    live = 0;
    for (double v : rr)
        if (v > 0) rmean += v, ++live;
    rmean = live ? rmean / double(live) : 1.0;
    std::vector<double> su(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i)
        su[size_t(i)] = su0[size_t(i)] * (rr[size_t(i)] > 0 ? std::max(rr[size_t(i)], 1e-3 * rmean) : 0.1) / -kCodebookScale;

    // W_reg = BH_k · (W ⊘ su), per 128-row block (the left Hadamard mixes rows within a block).
    auto rotateRows = [&](const std::vector<float>& src, const std::vector<double>& s, std::vector<float>& dst) {
        dst.resize(src.size());
        pool.parallelFor(k / kExl3HadSize, [&](int64_t b, int64_t e) {
            for (int64_t blk = b; blk < e; ++blk) {
                for (int64_t i = blk * kExl3HadSize; i < (blk + 1) * kExl3HadSize; ++i)
                    for (int64_t j = 0; j < n; ++j) dst[size_t(i * n + j)] = float(src[size_t(i * n + j)] / s[size_t(i)]);
                hadamard128Rows(dst.data() + blk * kExl3HadSize * n, n, n);
            }
        });
    };
    std::vector<float> reg;
    // 4. The global scale g, searched on the normalised matrix; su ← su / g, rounded to fp16 first.
    if (opt.scaleSearch) {
        rotateRows(a, su, reg);
        q.scale = searchScale(reg, k, n, opt.bits, opt.codebook, std::max(3, opt.scaleSampleTiles), pool);
    } else {
        q.scale = opt.fixedScale > 0 ? opt.fixedScale : exl3DefaultScale(opt.codebook);
    }
    q.suh.resize(size_t(k));
    std::vector<float> suf(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) {
        suf[size_t(i)] = roundScale(float(su[size_t(i)] / q.scale), q.suh[size_t(i)]);
        su[size_t(i)] = suf[size_t(i)];
    }
    rotateRows(a, su, reg);
    for (int64_t j = 0; j < n; ++j)
        if (cr[size_t(j)] == 0) q.svh[size_t(j)] = 0;  // all-zero columns (incl. padding) decode to 0

    // 5. The rotated Hessian H' = BH_k · diag(su) · (H + λI) · diag(su) · BH_k and its block LDL.
    std::vector<double> hr;
    Exl3BlockLdl ldl;
    if (hessian) {
        double dm = 0;
        for (int64_t i = 0; i < in; ++i) dm += hessian[i * in + i];
        dm /= double(in);
        bool finite = std::isfinite(dm);
        for (int64_t i = 0; finite && i < in * in; ++i) finite = std::isfinite(hessian[i]);
        q.usedHessian = finite && dm >= 1e-20;
        if (q.usedHessian) {
            std::vector<float> hf(static_cast<size_t>(k * k), 0.0f);
            const double lambda = opt.sigmaReg * dm;
            pool.parallelFor(k, [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) {
                    float* row = hf.data() + i * k;
                    for (int64_t j = 0; j < k; ++j) {
                        const double h = (i < in && j < in ? double(hessian[i * in + j]) : 0.0) + (i == j ? lambda : 0.0);
                        row[j] = float(suf[size_t(i)] * h * suf[size_t(j)]);
                    }
                    hadamard128Blocks(row, k);  // right side: · BH_k
                }
            });
            pool.parallelFor(k / kExl3HadSize, [&](int64_t b, int64_t e) {  // left side: BH_k ·
                for (int64_t blk = b; blk < e; ++blk) hadamard128Rows(hf.data() + blk * kExl3HadSize * k, k, k);
            });
            hr.assign(hf.begin(), hf.end());
            double dr = 0;
            for (int64_t i = 0; i < k; ++i) dr += hr[size_t(i * k + i)];
            ldl = exl3BlockLdl(hr, k, 2 * opt.sigmaReg * dr / double(k), pool);
            q.dampRetries = ldl.dampRetries;
        }
    }

    // LDLQ + Viterbi, then pack.
    const int64_t tiles = (k / 16) * (n / 16);
    std::vector<uint16_t> states(static_cast<size_t>(tiles * kExl3TileValues));
    q.rotated.assign(size_t(k * n), 0.0f);
    exl3Ldlq(reg.data(), k, n, q.usedHessian ? &ldl : nullptr, opt.bits, opt.codebook, states.data(), q.rotated.data(),
             pool, [&](int64_t done) {
                 if (progress) progress(done, tiles);
             });
    q.trellis.resize(size_t(tiles * 16 * opt.bits));
    pool.parallelFor(tiles, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t)
            exl3PackTile(states.data() + t * kExl3TileValues, opt.bits, q.trellis.data() + t * 16 * opt.bits);
    });

    const double num = exl3ProxyLoss(reg.data(), q.rotated.data(), k, n, q.usedHessian ? hr.data() : nullptr, pool);
    const std::vector<float> zero(reg.size(), 0.0f);
    const double den = exl3ProxyLoss(reg.data(), zero.data(), k, n, q.usedHessian ? hr.data() : nullptr, pool);
    q.proxyError = den > 0 ? num / den : 0.0;
    return q;
}

std::vector<TensorToWrite> exl3Tensors(const Exl3Quantized& q, const std::string& prefix) {
    std::vector<TensorToWrite> t{
        {prefix + ".trellis", DType::I16, {q.k / 16, q.n / 16, 16 * int64_t(q.bits)}, q.trellis.data()},
        {prefix + ".suh", DType::F16, {q.k}, q.suh.data()},
        {prefix + ".svh", DType::F16, {q.n}, q.svh.data()},
    };
    if (q.codebook == Exl3Codebook::Mcg) t.push_back({prefix + ".mcg", DType::I32, {}, &kMcgFlag});
    if (q.codebook == Exl3Codebook::Mul1) t.push_back({prefix + ".mul1", DType::I32, {}, &kMul1Flag});
    return t;
}

Exl3Linear exl3LinearView(const Exl3Quantized& q, const std::string& prefix) {
    Exl3Linear l;
    l.prefix = prefix;
    l.k = q.k;
    l.n = q.n;
    l.bits = q.bits;
    l.codebook = q.codebook;
    l.trellis = reinterpret_cast<const uint8_t*>(q.trellis.data());
    for (uint16_t h : q.suh) l.suh.push_back(f16ToF32(h));
    for (uint16_t h : q.svh) l.svh.push_back(f16ToF32(h));
    return l;
}

}  // namespace ts
