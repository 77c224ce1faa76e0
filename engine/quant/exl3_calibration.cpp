// Hessian capture for the EXL3 quantizer (see exl3_calibration.h).
#include "quant/exl3_calibration.h"

#include "core/error.h"
#include "core/thread_pool.h"

#include <cmath>

namespace ts {

Exl3HessianRecorder::Exl3HessianRecorder(Backend& backend, ThreadPool* pool) : m_backend(backend), m_pool(pool) {}

void Exl3HessianRecorder::track(const MlpWeights& mlp, const std::string& name) {
    m_entries[&mlp].name = name;
    m_byName[name] = &mlp;
}

void Exl3HessianRecorder::clear() {
    m_entries.clear();
    m_byName.clear();
}

const Exl3HessianRecorder::Sum* Exl3HessianRecorder::input(const std::string& name) const {
    auto it = m_byName.find(name);
    return it == m_byName.end() ? nullptr : &m_entries.at(it->second).in;
}

const Exl3HessianRecorder::Sum* Exl3HessianRecorder::activation(const std::string& name) const {
    auto it = m_byName.find(name);
    return it == m_byName.end() ? nullptr : &m_entries.at(it->second).act;
}

std::vector<float> Exl3HessianRecorder::Sum::mean() const {
    std::vector<float> h;
    if (rows == 0) return h;
    h.resize(xtx.size());
    for (size_t i = 0; i < xtx.size(); ++i) h[i] = float(xtx[i] / double(rows));
    return h;
}

void Exl3HessianRecorder::observe(const MlpWeights& mlp, const Buffer& in, const Buffer& act, int64_t T, int64_t D,
                                  int64_t I) {
    auto it = m_entries.find(&mlp);
    if (it == m_entries.end() || T <= 0) return;
    accumulate(it->second.in, in, T, D);
    accumulate(it->second.act, act, T, I);
}

void Exl3HessianRecorder::accumulate(Sum& s, const Buffer& x, int64_t T, int64_t dim) {
    if (s.dim == 0) {
        s.dim = dim;
        s.xtx.assign(size_t(dim * dim), 0.0);
    }
    TS_CHECK(s.dim == dim, "Hessian recorder: width changed between calls");
    m_host.resize(size_t(T * dim));
    m_backend.download(x, m_host.data(), m_host.size() * sizeof(float));
    // Rows with a non-finite value are dropped (spec §5.1), the rest packed to the front.
    int64_t rows = 0;
    for (int64_t t = 0; t < T; ++t) {
        const float* r = m_host.data() + t * dim;
        bool finite = true;
        for (int64_t i = 0; i < dim && finite; ++i) finite = std::isfinite(r[i]);
        if (!finite) continue;
        if (rows != t) std::copy(r, r + dim, m_host.data() + rows * dim);
        ++rows;
    }
    // xtx[i][j] += Σ_t x[t][i]·x[t][j]: each task owns whole rows i of the sum (fixed order per element).
    ThreadPool& pool = m_pool ? *m_pool : ThreadPool::global();
    const float* X = m_host.data();
    pool.parallelForCost(dim, rows * dim, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            double* hi = s.xtx.data() + i * dim;
            for (int64_t t = 0; t < rows; ++t) {
                const double xi = X[t * dim + i];
                if (xi == 0.0) continue;
                const float* xt = X + t * dim;
                for (int64_t j = 0; j < dim; ++j) hi[j] += xi * xt[j];
            }
        }
    });
    s.rows += rows;
}

}  // namespace ts
