// MoE routing (glm_dsa.md §3.5: sigmoid scores, correction bias for selection only, group-limited top-k,
// normalised weights × routed scaling) and the row gather / scatter used to run only selected experts.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "cpu/cpu_backend.h"

namespace ts {

void CpuBackend::moeRoute(const Buffer& x, int64_t T, const WeightView& gate, const Buffer& bias, int64_t E,
                          int64_t topk, int64_t nGroup, int64_t topkGroup, bool normTopk, float scaling,
                          int32_t* hostIdx, float* hostWeight) {
    const int64_t D = gate.cols;
    std::vector<float> wg(static_cast<size_t>(E * D));
    for (int64_t e = 0; e < E; ++e) cpu::rowToF32(gate, e, wg.data() + e * D);
    const int64_t perGroup = E / nGroup;
    ThreadPool::global().parallelForCost(T, E * D, [&](int64_t t0, int64_t t1) {
        std::vector<float> s(static_cast<size_t>(E)), choice(static_cast<size_t>(E)), gscore(static_cast<size_t>(nGroup));
        std::vector<int64_t> order(static_cast<size_t>(E)), gorder(static_cast<size_t>(nGroup));
        for (int64_t t = t0; t < t1; ++t) {
            for (int64_t e = 0; e < E; ++e) {
                s[size_t(e)] = cpu::sigmoid(cpu::dot(x.f32() + t * D, wg.data() + e * D, D));
                choice[size_t(e)] = s[size_t(e)] + bias.f32()[e];
            }
            if (nGroup > 1) {
                // Group score = sum of its two best choice scores; keep the topkGroup best groups.
                for (int64_t g = 0; g < nGroup; ++g) {
                    float b1 = -INFINITY, b2 = -INFINITY;
                    for (int64_t e = g * perGroup; e < (g + 1) * perGroup; ++e) {
                        const float v = choice[size_t(e)];
                        if (v > b1) { b2 = b1; b1 = v; } else if (v > b2) b2 = v;
                    }
                    gscore[size_t(g)] = b1 + b2;
                }
                std::iota(gorder.begin(), gorder.end(), 0);
                std::stable_sort(gorder.begin(), gorder.end(),
                                 [&](int64_t a, int64_t b) { return gscore[size_t(a)] > gscore[size_t(b)]; });
                for (int64_t r = topkGroup; r < nGroup; ++r)
                    for (int64_t e = gorder[size_t(r)] * perGroup; e < (gorder[size_t(r)] + 1) * perGroup; ++e)
                        choice[size_t(e)] = -INFINITY;
            }
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(order.begin(), order.begin() + topk, order.end(), [&](int64_t a, int64_t b) {
                return choice[size_t(a)] != choice[size_t(b)] ? choice[size_t(a)] > choice[size_t(b)] : a < b;
            });
            float sum = 0;
            for (int64_t k = 0; k < topk; ++k) sum += s[size_t(order[size_t(k)])];
            for (int64_t k = 0; k < topk; ++k) {
                const int64_t e = order[size_t(k)];
                hostIdx[t * topk + k] = int32_t(e);
                float wgt = s[size_t(e)];
                if (normTopk) wgt /= (sum + 1e-20f);
                hostWeight[t * topk + k] = wgt * scaling;
            }
        }
    });
}

void CpuBackend::gatherRows(const Buffer& x, int64_t D, const int32_t* hostSel, int64_t n, const Buffer& rows) {
    for (int64_t i = 0; i < n; ++i) std::copy(x.f32() + hostSel[i] * D, x.f32() + (hostSel[i] + 1) * D, rows.f32() + i * D);
}

void CpuBackend::scatterAddRows(const Buffer& rows, int64_t D, const int32_t* hostSel, const float* hostScale,
                                int64_t n, const Buffer& y) {
    for (int64_t i = 0; i < n; ++i) {
        float* dst = y.f32() + hostSel[i] * D;
        const float* src = rows.f32() + i * D;
        for (int64_t d = 0; d < D; ++d) dst[d] += hostScale[i] * src[d];
    }
}

}  // namespace ts
