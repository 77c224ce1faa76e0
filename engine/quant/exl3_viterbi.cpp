// Tail-biting Viterbi tile encoder for EXL3 (see exl3_viterbi.h).
#include "quant/exl3_viterbi.h"

#include "core/error.h"
#include "quant/exl3_trellis.h"

#include <atomic>
#include <limits>
#include <mutex>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TS_VITERBI_X86 1
#endif

namespace ts {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
enum class Kernel { Auto, Generic, Avx2, Avx512 };
std::atomic<Kernel> g_kernel{Kernel::Auto};

// The codebook LUT in the order the step reads it: for each chunk of 16 out-edges e0..e0+15, the 2^K
// candidates' values hi = 0..2^K−1 are 16 consecutive floats each, so one chunk is one contiguous
// 64·2^K-byte run (the natural order strides by 4·M bytes per candidate, which thrashes L1 sets).
// permuted[e0·H + hi·16 + l] = lut[hi·M + e0 + l]. Built once per (codebook, K), 256 KiB each.
constexpr int kChunk = 16;
const float* stepLut(Exl3Codebook cb, int K) {
    static std::vector<float> tables[3][kExl3MaxBits + 1];
    static std::once_flag once[3][kExl3MaxBits + 1];
    std::call_once(once[int(cb)][K], [&] {
        const float* lut = exl3CodebookLutF32(cb);
        const int M = 1 << (16 - K), H = 1 << K;
        std::vector<float>& t = tables[int(cb)][K];
        t.resize(65536);
        for (int e0 = 0; e0 < M; e0 += kChunk)
            for (int hi = 0; hi < H; ++hi)
                for (int l = 0; l < kChunk; ++l)
                    t[size_t(e0) * H + size_t(hi) * kChunk + size_t(l)] = lut[hi * M + e0 + l];
    });
    return tables[int(cb)][K].data();
}

// One trellis step. prev[in-edge] = best cost of a path ending in a state with that out-edge (the next
// state's in-edge); next[out-edge] = min over the 2^K states s = hi·M + out-edge of
// prev[s >> K] + (lut[s] − w)², back[out-edge] = the winning hi (ties: the lower hi). M = 2^(16−K)
// edges, Q = M >> K, so s >> K = hi·Q + (out-edge >> K). Out-edges go 16 at a time (M ≥ 256). d·d + p is
// a separate multiply and add (-std=c++20 disables FMA contraction) so all kernels round identically.
template <int K>
void stepGeneric(const float* lut, float w, const float* prev, float* next, uint8_t* back) {
    constexpr int M = 1 << (16 - K), H = 1 << K, Q = M >> K;
    for (int e0 = 0; e0 < M; e0 += kChunk) {
        float best[kChunk];
        uint8_t arg[kChunk];
        for (int l = 0; l < kChunk; ++l) best[l] = kInf, arg[l] = 0;
        for (int hi = 0; hi < H; ++hi) {
            const float* L = lut + size_t(e0) * H + hi * kChunk;
            const float* P = prev + hi * Q;
            for (int l = 0; l < kChunk; ++l) {
                const float d = L[l] - w;
                const float v = d * d + P[(e0 + l) >> K];
                const bool lt = v < best[l];  // branchless select, as the SIMD kernels
                best[l] = lt ? v : best[l];
                arg[l] = lt ? uint8_t(hi) : arg[l];
            }
        }
        for (int l = 0; l < kChunk; ++l) next[e0 + l] = best[l], back[e0 + l] = arg[l];
    }
}

#ifdef TS_VITERBI_X86
// AVX2: the 16 lanes of a chunk as two 8-wide halves (two independent dependency chains).
template <int K>
__attribute__((target("avx2"))) void stepAvx2(const float* lut, float w, const float* prev, float* next,
                                                 uint8_t* back) {
    constexpr int M = 1 << (16 - K), H = 1 << K, Q = M >> K;
    // Lane l needs prev[(e0 + l) >> K]: load from prev + ((e0 + half) >> K) and spread with a permutation
    // (lane l takes element l >> K); for K ≥ 3 the 8 lanes of a half share one element.
    const __m256i spread = _mm256_setr_epi32(0, 1 >> K, 2 >> K, 3 >> K, 4 >> K, 5 >> K, 6 >> K, 7 >> K);
    const __m256 wv = _mm256_set1_ps(w);
    for (int e0 = 0; e0 < M; e0 += kChunk) {
        __m256 best0 = _mm256_set1_ps(kInf), best1 = best0;
        __m256 arg0 = _mm256_setzero_ps(), arg1 = arg0;  // winning hi as float (exact: hi < 256)
        const float* L = lut + size_t(e0) * H;
        for (int hi = 0; hi < H; ++hi) {
            const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(L + hi * kChunk), wv);
            const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(L + hi * kChunk + 8), wv);
            const float* P0 = prev + hi * Q + (e0 >> K);
            const float* P1 = prev + hi * Q + ((e0 + 8) >> K);
            __m256 p0, p1;
            if constexpr (K >= 3) {
                p0 = _mm256_broadcast_ss(P0);
                p1 = _mm256_broadcast_ss(P1);
            } else {
                p0 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(P0), spread);
                p1 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(P1), spread);
            }
            const __m256 v0 = _mm256_add_ps(_mm256_mul_ps(d0, d0), p0);
            const __m256 v1 = _mm256_add_ps(_mm256_mul_ps(d1, d1), p1);
            const __m256 lt0 = _mm256_cmp_ps(v0, best0, _CMP_LT_OQ);
            const __m256 lt1 = _mm256_cmp_ps(v1, best1, _CMP_LT_OQ);
            const __m256 h = _mm256_set1_ps(float(hi));
            best0 = _mm256_blendv_ps(best0, v0, lt0);
            best1 = _mm256_blendv_ps(best1, v1, lt1);
            arg0 = _mm256_blendv_ps(arg0, h, lt0);
            arg1 = _mm256_blendv_ps(arg1, h, lt1);
        }
        _mm256_storeu_ps(next + e0, best0);
        _mm256_storeu_ps(next + e0 + 8, best1);
        // 16 small ints -> 16 bytes (values < 256, so the saturating packs are exact).
        const __m256i a0 = _mm256_cvtps_epi32(arg0), a1 = _mm256_cvtps_epi32(arg1);
        const __m128i w0 = _mm_packus_epi32(_mm256_castsi256_si128(a0), _mm256_extracti128_si256(a0, 1));
        const __m128i w1 = _mm_packus_epi32(_mm256_castsi256_si128(a1), _mm256_extracti128_si256(a1, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(back + e0), _mm_packus_epi16(w0, w1));
    }
}

// AVX-512: one chunk per vector, mask registers for the compare/select.
template <int K>
__attribute__((target("avx512f"))) void stepAvx512(const float* lut, float w, const float* prev, float* next,
                                                      uint8_t* back) {
    constexpr int M = 1 << (16 - K), H = 1 << K, Q = M >> K;
    const __m512i spread = _mm512_setr_epi32(0, 1 >> K, 2 >> K, 3 >> K, 4 >> K, 5 >> K, 6 >> K, 7 >> K, 8 >> K,
                                             9 >> K, 10 >> K, 11 >> K, 12 >> K, 13 >> K, 14 >> K, 15 >> K);
    const __m512 wv = _mm512_set1_ps(w);
    for (int e0 = 0; e0 < M; e0 += kChunk) {
        __m512 best = _mm512_set1_ps(kInf);
        __m512i arg = _mm512_setzero_si512();
        const float* L = lut + size_t(e0) * H;
        for (int hi = 0; hi < H; ++hi) {
            const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(L + hi * kChunk), wv);
            const float* P = prev + hi * Q + (e0 >> K);
            __m512 p;
            if constexpr (K >= 4) p = _mm512_set1_ps(*P);
            else p = _mm512_maskz_permutexvar_ps(__mmask16(0xFFFF), spread, _mm512_loadu_ps(P));
            const __m512 v = _mm512_add_ps(_mm512_mul_ps(d, d), p);
            const __mmask16 lt = _mm512_cmp_ps_mask(v, best, _CMP_LT_OQ);
            best = _mm512_mask_mov_ps(best, lt, v);
            arg = _mm512_mask_mov_epi32(arg, lt, _mm512_set1_epi32(hi));
        }
        _mm512_storeu_ps(next + e0, best);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(back + e0), _mm512_maskz_cvtepi32_epi8(__mmask16(0xFFFF), arg));
    }
}

bool haveAvx2() {
    static const bool ok = __builtin_cpu_supports("avx2");
    return ok;
}
bool haveAvx512() {
    static const bool ok = __builtin_cpu_supports("avx512f");
    return ok;
}
#endif

struct Scratch {
    std::vector<float> prev, next;  // [M + 16]: the SIMD loads may read up to 15 floats past M for K < 4
    std::vector<uint8_t> back;      // [256, M]: winning hi per (position, out-edge)
};

double tileError(const float* lut, const float* w, const uint16_t* states, float* values) {
    double err = 0;
    for (int p = 0; p < 256; ++p) {
        const float v = lut[states[p]];
        if (values) values[p] = v;
        err += (double(v) - w[p]) * (double(v) - w[p]);
    }
    return err;
}

template <int K>
double tileK(const float* w, Exl3Codebook cb, uint16_t* states, float* values, bool tailBiting) {
    constexpr int M = 1 << (16 - K);
    const float* lut = exl3CodebookLutF32(cb);
    const float* plut = stepLut(cb, K);
    thread_local Scratch s;
    s.prev.assign(M + 16, 0.0f);
    s.next.assign(M + 16, 0.0f);
    s.back.resize(size_t(256) * M);
    auto step = stepGeneric<K>;
#ifdef TS_VITERBI_X86
    const Kernel kern = g_kernel.load(std::memory_order_relaxed);
    if ((kern == Kernel::Auto && haveAvx512()) || kern == Kernel::Avx512) step = stepAvx512<K>;
    else if ((kern == Kernel::Auto && haveAvx2()) || kern == Kernel::Avx2) step = stepAvx2<K>;
#endif
    float* prev = s.prev.data();
    float* next = s.next.data();
    uint8_t* back = s.back.data();

    if (!tailBiting) {  // one pass, free start and free end
        for (int p = 0; p < 256; ++p) {
            step(plut, w[p], prev, next, back + size_t(p) * M);
            std::swap(prev, next);
        }
        int e = 0;
        for (int x = 1; x < M; ++x)
            if (prev[x] < prev[e]) e = x;
        for (int p = 255; p >= 0; --p) {
            const int st = int(back[size_t(p) * M + e]) * M + e;
            states[p] = uint16_t(st);
            e = st >> K;
        }
        return tileError(lut, w, states, values);
    }

    // Pass 1: free start (all in-edges cost 0) over w[128..255], w[0..127]. Only the second half's
    // decisions are backtracked, so the first half's rows are scratch (overwritten).
    for (int i = 0; i < 256; ++i) {
        step(plut, w[(i + 128) & 255], prev, next, back + size_t(i & 127) * M);
        std::swap(prev, next);
    }
    int e = 0;
    for (int x = 1; x < M; ++x)
        if (prev[x] < prev[e]) e = x;
    for (int i = 255; i >= 128; --i) e = ((int(back[size_t(i - 128) * M + e]) * M + e) >> K);
    const int e0 = e;  // in-edge of rotated position 128 = original position 0

    // Pass 2: position 0 constrained to in-edge e0; the path must end in out-edge e0 (tail-biting).
    for (int x = 0; x < M; ++x) prev[x] = x == e0 ? 0.0f : kInf;
    for (int p = 0; p < 256; ++p) {
        step(plut, w[p], prev, next, back + size_t(p) * M);
        std::swap(prev, next);
    }
    e = e0;
    for (int p = 255; p >= 0; --p) {
        const int st = int(back[size_t(p) * M + e]) * M + e;
        states[p] = uint16_t(st);
        e = st >> K;
    }
    TS_CHECK(e == e0, "EXL3 Viterbi: tail-biting path does not close");
    return tileError(lut, w, states, values);
}

}  // namespace

namespace {
double dispatch(const float* w, int bits, Exl3Codebook cb, uint16_t* states, float* values, bool tailBiting) {
    switch (bits) {
    case 1: return tileK<1>(w, cb, states, values, tailBiting);
    case 2: return tileK<2>(w, cb, states, values, tailBiting);
    case 3: return tileK<3>(w, cb, states, values, tailBiting);
    case 4: return tileK<4>(w, cb, states, values, tailBiting);
    case 5: return tileK<5>(w, cb, states, values, tailBiting);
    case 6: return tileK<6>(w, cb, states, values, tailBiting);
    case 7: return tileK<7>(w, cb, states, values, tailBiting);
    case 8: return tileK<8>(w, cb, states, values, tailBiting);
    default: fail(ErrorKind::InvalidArgument, "EXL3 quantizer: bits must be 1..8, got " + std::to_string(bits));
    }
}
}  // namespace

double exl3ViterbiTile(const float* w, int bits, Exl3Codebook cb, uint16_t* states, float* values) {
    return dispatch(w, bits, cb, states, values, true);
}

double exl3ViterbiTileOpen(const float* w, int bits, Exl3Codebook cb, float* values) {
    uint16_t states[kExl3TileValues];
    return dispatch(w, bits, cb, states, values, false);
}

const char* exl3ViterbiKernelName() {
    const Kernel kern = g_kernel.load();
#ifdef TS_VITERBI_X86
    if ((kern == Kernel::Auto && haveAvx512()) || kern == Kernel::Avx512) return "avx512";
    if ((kern == Kernel::Auto && haveAvx2()) || kern == Kernel::Avx2) return "avx2";
#endif
    (void)kern;
    return "generic";
}

bool exl3ViterbiUseKernel(std::string_view name) {
    Kernel k;
    if (name == "auto") k = Kernel::Auto;
    else if (name == "generic") k = Kernel::Generic;
#ifdef TS_VITERBI_X86
    else if (name == "avx2" && haveAvx2()) k = Kernel::Avx2;
    else if (name == "avx512" && haveAvx512()) k = Kernel::Avx512;
#endif
    else return false;
    g_kernel.store(k);
    return true;
}

}  // namespace ts
