// The routed experts of a dense-expert model (BF16 / F16 / F32 weights: the embedded default model, the
// golden checkpoints) with the routing left on the device: CudaBackend::moeExpertsFusedDevice's path for
// experts that are not packed (the EXL3 experts take cuda_exl3_moe_routed.cu's). Why: the model's
// per-expert loop (gatherRows / linear / swiglu / linear / scatterAddRows per used expert) needs the
// routing on the host — a download per MoE layer — and its ops follow the routing, so a decode step that
// takes it cannot be replayed from CUDA graphs. With this path a decode step of such a model stays in its
// graph region end to end (kernels/backend.h beginGraphRegion).
//
// What it computes (idx / weight [T, topk] from moeRouteDevice; ids outside [0, E) are skipped):
//   1. denseGateUpKernel, grid (⌈I/8⌉, T·topk): warp w of block (bx, p) takes row i = 8·bx + w of pair p =
//      (token t = p / topk, choice k = p % topk) with expert e = idx[p]:
//      h[p, i] = swiglu(gate_e[i, :] · x[t], up_e[i, :] · x[t]) (the clamp of `limit`, as swigluKernel).
//   2. denseDownKernel, grid (⌈D/8⌉, T): warp w of block (bx, t) takes output column d = 8·bx + w of token t
//      and adds, in ascending (expert, choice) order — the CPU loop's order: experts ascending, a token's
//      rows of one expert in choice order — weight[p] · (down_e[d, :] · h[p]) to y[t, d].
// Variants: weight dtype (BF16 / F16 / F32) × VEC (16-byte loads of 8 elements per lane when D and I are
// multiples of 8 and every row is 16-byte aligned; else one element per lane). fp32 accumulation; each
// dot product is the lanes' partial sums added by a butterfly, so results differ from the CPU's linear
// only by summation order. For decode steps (T ≤ kMaxTokens); prefill keeps the per-expert loop, whose
// GEMMs share each expert's weights between its tokens.
// Test: twinspark-cli selftest --backend cuda --filter moe ("moeExpertsFusedDevice dense" rows: against
// the CPU's per-expert loop; T = 17 must decline) and, with --model, the "graphs" rows of a BF16 model
// (decode steps replayed, logits bit-identical to the eager run). Benchmark: benchmark 4 of
// docs/PERFORMANCE.md (the embedded model's decode tok/s: scripts/gpu/run_gpu_suite.sh with BENCH_MODEL=1).
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"
#include "exl3_tune.h"

namespace ts {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int64_t kMaxTokens = 16;  // decode steps (the model's graph regions hold up to 16 rows)
constexpr int64_t kMaxTopk = 64;

// One expert's three matrices on the device: gate / up [I, D], down [D, I], row-major, the layer's dtype.
struct DenseExpert {
    const void* gate;
    const void* up;
    const void* down;
};

// Σ_k W[row, k] · v[k] over this lane's share of the K elements (not yet summed over the warp).
// VEC: lane l takes the 8-element pieces k = 8l + 256j (K % 8 == 0, W rows and v 16-byte aligned).
template <int DT, bool VEC>
__device__ __forceinline__ float lanePartialDot(const void* __restrict__ W, int64_t row, int64_t K,
                                                const float* __restrict__ v, int lane) {
    float acc = 0.0f;
    if constexpr (VEC) {
        for (int64_t k = int64_t(lane) * 8; k < K; k += 256) {
            float w[8];
            cuda::load8<DT, true>(W, row * K + k, w);
            const float4 a = *reinterpret_cast<const float4*>(v + k), b = *reinterpret_cast<const float4*>(v + k + 4);
            const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
            for (int q = 0; q < 8; ++q) acc = fmaf(xv[q], w[q], acc);
        }
    } else {
        for (int64_t k = lane; k < K; k += 32) acc = fmaf(v[k], cuda::loadWeight(W, row * K + k, DT), acc);
    }
    return acc;
}

template <int DT, bool VEC>
__global__ void __launch_bounds__(kThreads) denseGateUpKernel(const float* __restrict__ x, const int32_t* __restrict__ idx,
                                                              const DenseExpert* __restrict__ table, int E, int topk,
                                                              int64_t D, int64_t I, float limit, float* __restrict__ h) {
    const int p = int(blockIdx.y);
    const int e = idx[p];
    if (e < 0 || e >= E) return;  // skipped, as the CPU loop skips it (the down kernel never reads its row)
    const int lane = threadIdx.x & 31;
    const int64_t i = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
    if (i >= I) return;  // the whole warp
    const float* xr = x + int64_t(p / topk) * D;
    const DenseExpert ex = table[e];
    float g = cuda::warpSum(lanePartialDot<DT, VEC>(ex.gate, i, D, xr, lane));
    float u = cuda::warpSum(lanePartialDot<DT, VEC>(ex.up, i, D, xr, lane));
    if (lane == 0) {
        if (limit > 0.0f) {
            g = fminf(g, limit);
            u = u < -limit ? -limit : (limit < u ? limit : u);
        }
        h[int64_t(p) * I + i] = g / (1.0f + expf(-g)) * u;
    }
}

template <int DT, bool VEC>
__global__ void __launch_bounds__(kThreads) denseDownKernel(const float* __restrict__ h, const int32_t* __restrict__ idx,
                                                            const float* __restrict__ weight,
                                                            const DenseExpert* __restrict__ table, int E, int topk,
                                                            int64_t D, int64_t I, float* __restrict__ y) {
    const int t = int(blockIdx.y);
    const int lane = threadIdx.x & 31;
    const int64_t d = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
    if (d >= D) return;
    const int32_t* ti = idx + int64_t(t) * topk;
    float v = y[int64_t(t) * D + d];
    // The token's valid choices in ascending (expert, choice) order: key e·topk + k, each taken once.
    int64_t last = -1;
    for (int r = 0; r < topk; ++r) {
        int64_t best = INT64_MAX;
        int bk = -1;
        for (int k = 0; k < topk; ++k) {
            const int e = ti[k];
            if (e < 0 || e >= E) continue;
            const int64_t key = int64_t(e) * topk + k;
            if (key > last && key < best) {
                best = key;
                bk = k;
            }
        }
        if (bk < 0) break;
        last = best;
        const int p = t * topk + bk;
        const float s = cuda::warpSum(lanePartialDot<DT, VEC>(table[ti[bk]].down, d, I, h + int64_t(p) * I, lane));
        v = fmaf(weight[p], s, v);
    }
    if (lane == 0) y[int64_t(t) * D + d] = v;
}

int denseCode(DType d) {
    switch (d) {
    case DType::BF16: return 0;
    case DType::F16: return 1;
    case DType::F32: return 2;
    default: return -1;
    }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

// The layer's device table: every expert's three matrices (uploaded here on the layer's first call, so a
// graph region's first, eager run makes it), one dtype for all, and whether rows allow 16-byte loads.
struct CudaBackend::DenseMoeLayer {
    Buffer table;  // [E] DenseExpert
    int dtype = -1;
    bool vec = false;
    bool ok = false;
};

bool CudaBackend::denseExpertsRouted(const Buffer& x, int64_t T, int64_t D, int64_t I, const Buffer& idx,
                                     const Buffer& weight, int64_t topk, const WeightView* gate, const WeightView* up,
                                     const WeightView* down, int64_t E, float limit, const Buffer& y) {
    if (!moeDeviceRouting() || T < 1 || T > kMaxTokens || topk < 1 || topk > kMaxTopk || E <= 0 ||
        E > (int64_t(1) << 24) || D <= 0 || I <= 0 || D > (int64_t(1) << 30) || I > (int64_t(1) << 30))
        return false;
    TS_CHECK(x.size() >= size_t(T * D) * 4 && y.size() >= size_t(T * D) * 4, "moeExpertsFusedDevice: buffer too small");
    TS_CHECK(idx.size() >= size_t(T * topk) * 4 && weight.size() >= size_t(T * topk) * 4,
             "moeExpertsFusedDevice: idx / weight too small");

    const DenseKey key{gate[0].data, down[E - 1].data, E, D, I};
    std::shared_ptr<DenseMoeLayer>& slot = m_denseMoe[key];
    if (!slot) {
        OwnWork own(*this);  // the uploads below belong to this op, not to the model
        slot = std::make_shared<DenseMoeLayer>();
        DenseMoeLayer& L = *slot;
        L.dtype = denseCode(gate[0].dtype);
        bool ok = L.dtype >= 0, vec = D % 8 == 0 && I % 8 == 0;
        std::vector<DenseExpert> host(static_cast<size_t>(E));
        for (int64_t e = 0; e < E && ok; ++e) {
            const WeightView* vs[3] = {&gate[e], &up[e], &down[e]};
            const int64_t rows[3] = {I, I, D}, cols[3] = {D, D, I};
            const void* dev[3] = {};
            for (int q = 0; q < 3 && ok; ++q) {
                const WeightView& w = *vs[q];
                ok = !w.packed && w.data && w.rows == rows[q] && w.cols == cols[q] && denseCode(w.dtype) == L.dtype;
                if (ok) {
                    dev[q] = deviceWeight(w);
                    vec = vec && aligned16(dev[q]);
                }
            }
            host[size_t(e)] = DenseExpert{dev[0], dev[1], dev[2]};
        }
        if (ok) {
            L.table = upload(host.data(), host.size() * sizeof(DenseExpert));
            L.vec = vec;
            L.ok = true;
        }
    }
    const DenseMoeLayer& L = *slot;
    if (!L.ok) return false;
    GraphOp op(*this, true, "moeExpertsFusedDevice(dense)",
               {gk(x.bytes()), gk(T), gk(D), gk(I), gk(idx.bytes()), gk(weight.bytes()), gk(topk), gk(gate[0].data),
                gk(E), gf(limit), gk(y.bytes())});
    if (op.skip()) return true;
    const int64_t P = T * topk;
    // h [P, I] fp32: the pairs' swiglu rows (inside the op: kept with its graph when captured).
    const Buffer h = allocUninit(size_t(P * I) * 4);
    const bool vec = L.vec && aligned16(x.f32());
    const auto* tab = reinterpret_cast<const DenseExpert*>(L.table.bytes());
    const dim3 gu(unsigned((I + kWarps - 1) / kWarps), unsigned(P)), dn(unsigned((D + kWarps - 1) / kWarps), unsigned(T));
    auto launch = [&](auto dtTag, auto vecTag) {
        constexpr int DT = decltype(dtTag)::value;
        constexpr bool VEC = decltype(vecTag)::value;
        cuda::launchPlain(denseGateUpKernel<DT, VEC>, gu, kThreads, 0, m_stream, x.f32(), idx.i32(), tab, int(E),
                          int(topk), D, I, limit, h.f32());
        cuda::launchPlain(denseDownKernel<DT, VEC>, dn, kThreads, 0, m_stream, h.f32(), idx.i32(), weight.f32(), tab,
                          int(E), int(topk), D, I, y.f32());
    };
    auto byVec = [&](auto dtTag) {
        if (vec) launch(dtTag, std::true_type{});
        else launch(dtTag, std::false_type{});
    };
    if (L.dtype == 0) byVec(std::integral_constant<int, 0>{});
    else if (L.dtype == 1) byVec(std::integral_constant<int, 1>{});
    else byVec(std::integral_constant<int, 2>{});
    return true;
}

}  // namespace ts
