// mHC hyper-connections (glm_dsa.md §8.1, §11.3) and KDA linear attention (§8.3, §11.7–9) on the CPU.
// Shapes: streams [T, n, D]; KDA qkv [T, 3·H·Dk] = [q | k | v] per token, state [H, Dk, Dv] fp32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/cpu_backend.h"

namespace ts {

void CpuBackend::mhcPre(const Buffer& streams, int64_t T, int64_t D, const HyperConnParams& p, const Buffer& x,
                        const Buffer& post, const Buffer& comb) {
    const int n = p.n;
    const int64_t mix = 2 * n + n * n, width = n * D;
    std::vector<float> fn(static_cast<size_t>(mix * width));
    for (int64_t r = 0; r < mix; ++r) cpu::rowToF32(p.fn, r, fn.data() + r * width);
    const float* base = p.base.f32();
    const float* scale = p.scale.f32();
    ThreadPool::global().parallelForCost(T, mix * width, [&](int64_t t0, int64_t t1) {
        std::vector<float> f(static_cast<size_t>(width)), m(static_cast<size_t>(mix)), c(static_cast<size_t>(n * n));
        for (int64_t t = t0; t < t1; ++t) {
            const float* s = streams.f32() + t * width;
            // Unweighted RMSNorm of the flattened streams, then the mixing logits.
            const float inv = 1.0f / std::sqrt(cpu::dot(s, s, width) / float(width) + p.normEps);
            for (int64_t i = 0; i < width; ++i) f[size_t(i)] = s[i] * inv;
            for (int64_t j = 0; j < mix; ++j) m[size_t(j)] = cpu::dot(f.data(), fn.data() + j * width, width);
            float* pre = x.f32() + t * D;  // reused below as the output row
            std::vector<float> preW(static_cast<size_t>(n));
            for (int i = 0; i < n; ++i) {
                preW[size_t(i)] = cpu::sigmoid(m[size_t(i)] * scale[0] + base[i]) + p.hcEps;
                post.f32()[t * n + i] = 2.0f * cpu::sigmoid(m[size_t(n + i)] * scale[1] + base[n + i]);
            }
            // comb: row softmax + eps, column normalise, then (iters − 1) × (row, column) normalisation.
            for (int i = 0; i < n; ++i) {
                float mx = -INFINITY;
                for (int j = 0; j < n; ++j) {
                    const int k = 2 * n + i * n + j;
                    c[size_t(i * n + j)] = m[size_t(k)] * scale[2] + base[k];
                    mx = std::max(mx, c[size_t(i * n + j)]);
                }
                float sum = 0;
                for (int j = 0; j < n; ++j) sum += (c[size_t(i * n + j)] = std::exp(c[size_t(i * n + j)] - mx));
                for (int j = 0; j < n; ++j) c[size_t(i * n + j)] = c[size_t(i * n + j)] / sum + p.hcEps;
            }
            auto colNorm = [&] {
                for (int j = 0; j < n; ++j) {
                    float sum = 0;
                    for (int i = 0; i < n; ++i) sum += c[size_t(i * n + j)];
                    for (int i = 0; i < n; ++i) c[size_t(i * n + j)] /= (sum + p.hcEps);
                }
            };
            auto rowNorm = [&] {
                for (int i = 0; i < n; ++i) {
                    float sum = 0;
                    for (int j = 0; j < n; ++j) sum += c[size_t(i * n + j)];
                    for (int j = 0; j < n; ++j) c[size_t(i * n + j)] /= (sum + p.hcEps);
                }
            };
            colNorm();
            for (int it = 0; it < p.sinkhornIters - 1; ++it) {
                rowNorm();
                colNorm();
            }
            std::copy(c.begin(), c.end(), comb.f32() + t * n * n);
            for (int64_t d = 0; d < D; ++d) {
                float acc = 0;
                for (int i = 0; i < n; ++i) acc += preW[size_t(i)] * s[i * D + d];
                pre[d] = acc;
            }
        }
    });
}

void CpuBackend::mhcPost(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& y, const Buffer& post,
                         const Buffer& comb) {
    ThreadPool::global().parallelForCost(T, n * n * D, [&](int64_t t0, int64_t t1) {
        std::vector<float> old(static_cast<size_t>(n * D));
        for (int64_t t = t0; t < t1; ++t) {
            float* s = streams.f32() + t * n * D;
            std::copy(s, s + n * D, old.begin());
            const float* c = comb.f32() + t * n * n;
            const float* yr = y.f32() + t * D;
            for (int i = 0; i < n; ++i) {
                const float pi = post.f32()[t * n + i];
                for (int64_t d = 0; d < D; ++d) {
                    float acc = 0;
                    for (int j = 0; j < n; ++j) acc += c[j * n + i] * old[size_t(j * D + d)];
                    s[i * D + d] = pi * yr[d] + acc;
                }
            }
        }
    });
}

void CpuBackend::mhcHead(const Buffer& streams, int64_t T, int64_t D, int n, const Buffer& out) {
    for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < D; ++d) {
            float acc = 0;
            for (int i = 0; i < n; ++i) acc += streams.f32()[(t * n + i) * D + d];
            out.f32()[t * D + d] = acc / float(n);
        }
}

void CpuBackend::causalConvSilu(const Buffer& x, int64_t T, int64_t C, int K, const Buffer& w,
                                const Buffer& convState, const Buffer& out) {
    const float* X = x.f32();
    float* S = convState.f32();  // [K−1, C], oldest first
    const float* W = w.f32();
    ThreadPool::global().parallelForCost(C, T * K, [&](int64_t c0, int64_t c1) {
        std::vector<float> window(static_cast<size_t>(K - 1 + T));
        for (int64_t c = c0; c < c1; ++c) {
            for (int i = 0; i < K - 1; ++i) window[size_t(i)] = S[i * C + c];
            for (int64_t t = 0; t < T; ++t) window[size_t(K - 1 + t)] = X[t * C + c];
            for (int64_t t = 0; t < T; ++t) {
                float acc = 0;
                for (int i = 0; i < K; ++i) acc += W[c * K + i] * window[size_t(t + i)];
                out.f32()[t * C + c] = acc / (1.0f + std::exp(-acc));
            }
            for (int i = 0; i < K - 1; ++i) S[i * C + c] = window[size_t(T + i)];
        }
    });
}

void CpuBackend::kdaGate(const Buffer& f, int64_t T, int64_t H, int64_t Dk, const Buffer& aLog, const Buffer& dtBias,
                         float lowerBound) {
    float* F = f.f32();
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            const float decay = std::exp(aLog.f32()[h]);
            for (int64_t d = 0; d < Dk; ++d) {
                float& v = F[(t * H + h) * Dk + d];
                const float g = v + dtBias.f32()[h * Dk + d];
                if (std::isnan(lowerBound)) {  // no lower bound: −exp(A_log)·softplus(g)
                    const float sp = g > 20.0f ? g : std::log(1.0f + std::exp(g));
                    v = -decay * sp;
                } else {
                    v = lowerBound * cpu::sigmoid(decay * g);
                }
            }
        }
}

void CpuBackend::kdaRecurrent(const Buffer& qkv, int64_t T, int64_t H, int64_t Dk, const Buffer& g,
                              const Buffer& betaLogits, const Buffer& state, const Buffer& out) {
    const int64_t Dv = Dk, C = 3 * H * Dk;
    const float qScale = 1.0f / std::sqrt(float(Dk));
    ThreadPool::global().parallelForCost(H, T * Dk * Dv * 4, [&](int64_t h0, int64_t h1) {
        std::vector<float> q(static_cast<size_t>(Dk)), k(static_cast<size_t>(Dk)), mem(static_cast<size_t>(Dv));
        for (int64_t h = h0; h < h1; ++h) {
            float* S = state.f32() + h * Dk * Dv;  // [Dk, Dv]
            for (int64_t t = 0; t < T; ++t) {
                const float* row = qkv.f32() + t * C;
                const float* qr = row + h * Dk;
                const float* kr = row + H * Dk + h * Dk;
                const float* vr = row + 2 * H * Dk + h * Dv;
                const float qn = std::sqrt(cpu::dot(qr, qr, Dk) + 1e-6f);
                const float kn = std::sqrt(cpu::dot(kr, kr, Dk) + 1e-6f);
                for (int64_t i = 0; i < Dk; ++i) {
                    q[size_t(i)] = qr[i] / qn * qScale;
                    k[size_t(i)] = kr[i] / kn;
                }
                const float beta = cpu::sigmoid(betaLogits.f32()[t * H + h]);
                const float* gr = g.f32() + (t * H + h) * Dk;
                for (int64_t i = 0; i < Dk; ++i) {
                    const float decay = std::exp(gr[i]);
                    for (int64_t j = 0; j < Dv; ++j) S[i * Dv + j] *= decay;
                }
                std::fill(mem.begin(), mem.end(), 0.0f);
                for (int64_t i = 0; i < Dk; ++i)
                    for (int64_t j = 0; j < Dv; ++j) mem[size_t(j)] += S[i * Dv + j] * k[size_t(i)];
                for (int64_t j = 0; j < Dv; ++j) mem[size_t(j)] = (vr[j] - mem[size_t(j)]) * beta;
                for (int64_t i = 0; i < Dk; ++i)
                    for (int64_t j = 0; j < Dv; ++j) S[i * Dv + j] += k[size_t(i)] * mem[size_t(j)];
                float* o = out.f32() + (t * H + h) * Dv;
                for (int64_t j = 0; j < Dv; ++j) o[j] = 0;
                for (int64_t i = 0; i < Dk; ++i)
                    for (int64_t j = 0; j < Dv; ++j) o[j] += S[i * Dv + j] * q[size_t(i)];
            }
        }
    });
}

void CpuBackend::gatedRmsnorm(const Buffer& o, int64_t T, int64_t H, int64_t Dv, const Buffer& w, float eps,
                              const Buffer& gate) {
    for (int64_t r = 0; r < T * H; ++r) {
        float* x = o.f32() + r * Dv;
        const float* gr = gate.f32() + r * Dv;
        const float inv = 1.0f / std::sqrt(cpu::dot(x, x, Dv) / float(Dv) + eps);
        for (int64_t j = 0; j < Dv; ++j) x[j] = w.f32()[j] * (x[j] * inv) * cpu::sigmoid(gr[j]);
    }
}

}  // namespace ts
