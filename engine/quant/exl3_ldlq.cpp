// EXL3 block LDL and LDLQ (see exl3_ldlq.h).
#include "quant/exl3_ldlq.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/exl3_trellis.h"
#include "quant/exl3_viterbi.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>

namespace ts {

namespace {

constexpr int kMaxDampRetries = 10;

// In-place Cholesky h = C·Cᵀ (C lower, row-major, the strict upper part left as is), column by column
// (Crout): column j needs rows 0..j of C, and its k−j−1 entries below the diagonal are independent dot
// products, spread over the pool. Returns false when a pivot is not positive (or not finite).
bool cholesky(std::vector<double>& a, int64_t k, ThreadPool& pool) {
    for (int64_t j = 0; j < k; ++j) {
        double* rj = a.data() + j * k;
        double d = rj[j];
        for (int64_t p = 0; p < j; ++p) d -= rj[p] * rj[p];
        if (!(d > 0.0) || !std::isfinite(d)) return false;
        const double djj = std::sqrt(d);
        rj[j] = djj;
        pool.parallelForCost(k - j - 1, j + 1, [&](int64_t b, int64_t e) {
            for (int64_t i = j + 1 + b; i < j + 1 + e; ++i) {
                double* ri = a.data() + i * k;
                double s = ri[j];
                for (int64_t p = 0; p < j; ++p) s -= ri[p] * rj[p];
                ri[j] = s / djj;
            }
        });
    }
    return true;
}

}  // namespace

Exl3BlockLdl exl3BlockLdl(std::vector<double> h, int64_t k, double dampStep, ThreadPool& pool) {
    TS_CHECK(k % 16 == 0 && int64_t(h.size()) == k * k, "exl3BlockLdl: bad shape");
    Exl3BlockLdl out;
    out.k = k;
    std::vector<double> a = h;
    while (!cholesky(a, k, pool)) {
        if (++out.dampRetries > kMaxDampRetries || !(dampStep > 0.0))
            fail(ErrorKind::InvalidArgument, "EXL3 quantizer: the Hessian is not positive definite after " +
                                                 std::to_string(kMaxDampRetries) + " damping retries");
        for (int64_t i = 0; i < k; ++i) h[size_t(i * k + i)] += dampStep;
        a = h;
    }
    // L = C · blockdiag(C_bb)^-1 makes the diagonal blocks identity (then dropped): H = (L+I)·D·(L+I)ᵀ
    // with D_b = C_bb·C_bbᵀ. Each 16-column strip b is independent: invert its 16×16 lower block, then
    // multiply the rows below it.
    const int64_t strips = k / 16;
    out.lt.assign(size_t(k * k), 0.0f);
    pool.parallelFor(strips, [&](int64_t sb, int64_t se) {
        for (int64_t b = sb; b < se; ++b) {
            double inv[16][16] = {};  // inverse of the lower-triangular C_bb, by forward substitution
            for (int c = 0; c < 16; ++c) {
                for (int r = 0; r < 16; ++r) {
                    double s = r == c ? 1.0 : 0.0;
                    for (int p = 0; p < r; ++p) s -= a[size_t((16 * b + r) * k + 16 * b + p)] * inv[p][c];
                    inv[r][c] = s / a[size_t((16 * b + r) * k + 16 * b + r)];
                }
            }
            for (int64_t i = 16 * (b + 1); i < k; ++i) {
                const double* ci = a.data() + i * k + 16 * b;  // C[i][16b .. 16b+16)
                float* dst = out.lt.data() + (b * k + i) * 16;
                for (int r = 0; r < 16; ++r) {
                    double s = 0;
                    for (int p = r; p < 16; ++p) s += ci[p] * inv[p][r];  // inv is lower: inv[p][r] = 0 for p < r
                    dst[r] = float(s);
                }
            }
        }
    });
    return out;
}

void exl3Ldlq(const float* wReg, int64_t k, int64_t n, const Exl3BlockLdl* ldl, int bits, Exl3Codebook cb,
              uint16_t* states, float* q, ThreadPool& pool, const std::function<void(int64_t)>& onTiles) {
    TS_CHECK(k % 16 == 0 && n % 16 == 0, "exl3Ldlq: dims must be multiples of 16");
    TS_CHECK(!ldl || ldl->k == k, "exl3Ldlq: factor does not match");
    const int64_t tk = k / 16, tn = n / 16;
    int64_t done = 0;
    for (int64_t b = tk - 1; b >= 0; --b) {
        // Tiles of the strip in any order (an atomic ticket balances the load; each tile's work and result
        // are independent of which thread runs it).
        std::atomic<int64_t> next{0};
        pool.parallelFor(pool.size(), [&](int64_t, int64_t) {
            for (int64_t j; (j = next.fetch_add(1)) < tn;) {
                float t[16][16];  // target tile, [row r along k][column c along n]
                for (int r = 0; r < 16; ++r)
                    for (int c = 0; c < 16; ++c) t[r][c] = wReg[(16 * b + r) * n + 16 * j + c];
                if (ldl) {
                    // + Σ_{i below the strip} L[i][16b + r] · E[i][cols], with E = wReg − q of those rows.
                    const float* lt = ldl->lt.data() + b * k * 16;
                    for (int64_t i = 16 * (b + 1); i < k; ++i) {
                        const float* li = lt + i * 16;
                        float e[16];
                        for (int c = 0; c < 16; ++c) e[c] = wReg[i * n + 16 * j + c] - q[i * n + 16 * j + c];
                        for (int r = 0; r < 16; ++r)
                            for (int c = 0; c < 16; ++c) t[r][c] += li[r] * e[c];
                    }
                }
                float x[kExl3TileValues], v[kExl3TileValues];
                for (int p = 0; p < kExl3TileValues; ++p) x[p] = t[exl3TilePos(p).r][exl3TilePos(p).c];
                uint16_t* st = states + (b * tn + j) * kExl3TileValues;
                exl3ViterbiTile(x, bits, cb, st, v);
                for (int p = 0; p < kExl3TileValues; ++p)
                    q[(16 * b + exl3TilePos(p).r) * n + 16 * j + exl3TilePos(p).c] = v[p];
            }
        });
        done += tn;
        if (onTiles) onTiles(done);
    }
}

double exl3ProxyLoss(const float* a, const float* b, int64_t k, int64_t n, const double* h, ThreadPool& pool) {
    // Column by column: tr(Eᵀ H E) = Σ_c e_cᵀ H e_c. Per-thread partial sums, combined in chunk order.
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(n, 64));
    std::vector<double> part(size_t(chunks), 0.0);
    pool.parallelFor(chunks, [&](int64_t cb, int64_t ce) {
        std::vector<double> e(static_cast<size_t>(k));
        for (int64_t ch = cb; ch < ce; ++ch) {
            double s = 0;
            for (int64_t c = n * ch / chunks; c < n * (ch + 1) / chunks; ++c) {
                for (int64_t i = 0; i < k; ++i) e[size_t(i)] = double(a[i * n + c]) - double(b[i * n + c]);
                if (!h) {
                    for (int64_t i = 0; i < k; ++i) s += e[size_t(i)] * e[size_t(i)];
                    continue;
                }
                for (int64_t i = 0; i < k; ++i) {
                    const double* hi = h + i * k;
                    double acc = 0;
                    for (int64_t p = 0; p < k; ++p) acc += hi[p] * e[size_t(p)];
                    s += e[size_t(i)] * acc;
                }
            }
            part[size_t(ch)] = s;
        }
    });
    double total = 0;
    for (double p : part) total += p;
    return total;
}

}  // namespace ts
