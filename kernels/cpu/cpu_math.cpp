// Dense CPU ops: memory, embedding, linear (bf16/f16/f32 weights, fp32 math), norms, SwiGLU, concatColumns,
// repeatRows.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sys/mman.h>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "cpu/cpu_backend.h"

namespace ts {

WeightView WeightView::rowSlice(int64_t first, int64_t count) const {
    TS_CHECK(!packed, "rowSlice of a packed linear");
    TS_CHECK(first >= 0 && count >= 0 && first + count <= rows, "WeightView::rowSlice out of range");
    WeightView v = *this;
    v.data = static_cast<const uint8_t*>(data) + size_t(first) * size_t(cols) * dtypeSize(dtype);
    v.rows = count;
    return v;
}

Buffer Buffer::view(size_t offset, size_t bytes) const {
    TS_CHECK(offset + bytes <= m_bytes, "Buffer::view out of range");
    return Buffer(std::shared_ptr<void>(m_mem, static_cast<uint8_t*>(m_mem.get()) + offset), bytes);
}

size_t mlaCacheEntryBytes(KvCacheDtype dtype, int64_t latentDim) {
    if (dtype == KvCacheDtype::Fp32) return size_t(latentDim) * 4;
    return size_t(latentDim) + size_t((latentDim + 127) / 128) * 4 + 64 * 2;
}

size_t indexerKeyBytes(KvCacheDtype dtype, int64_t dim) {
    return dtype == KvCacheDtype::Fp32 ? size_t(dim) * 4 : size_t(dim) + 4;
}

namespace cpu {

void rowToF32(const WeightView& w, int64_t row, float* out) {
    TS_CHECK(!w.packed, "this op needs a dense weight, not a packed (EXL3) linear");
    const uint8_t* p = static_cast<const uint8_t*>(w.data) + size_t(row) * size_t(w.cols) * dtypeSize(w.dtype);
    switch (w.dtype) {
    case DType::F32: std::memcpy(out, p, size_t(w.cols) * 4); break;
    case DType::BF16:
        for (int64_t i = 0; i < w.cols; ++i) {
            uint16_t h;
            std::memcpy(&h, p + 2 * i, 2);
            out[i] = bf16ToF32(h);
        }
        break;
    case DType::F16:
        for (int64_t i = 0; i < w.cols; ++i) {
            uint16_t h;
            std::memcpy(&h, p + 2 * i, 2);
            out[i] = f16ToF32(h);
        }
        break;
    default: TS_CHECK(false, "rowToF32: unsupported weight dtype " + std::string(dtypeName(w.dtype)));
    }
}

float dot(const float* a, const float* b, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
    for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void hadamard(float* x, int64_t n) {
    for (int64_t h = 1; h < n; h *= 2)
        for (int64_t i = 0; i < n; i += 2 * h)
            for (int64_t j = i; j < i + h; ++j) {
                const float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    const float s = 1.0f / std::sqrt(float(n));
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace cpu

namespace {

constexpr size_t kMmapBytes = size_t(1) << 20;

// Host memory of `bytes` (64-byte aligned). Large buffers (KV pools) come straight from mmap: zero
// pages the OS fills lazily, so a 2 GiB pool costs nothing until used. Smaller ones come from
// aligned_alloc and hold garbage; `rounded` (if given) receives the bytes that may be written.
Buffer hostAlloc(size_t bytes, size_t* rounded) {
    if (bytes >= kMmapBytes) {
        void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        if (rounded) *rounded = bytes;
        return Buffer(std::shared_ptr<void>(p, [bytes](void* q) { ::munmap(q, bytes); }), bytes);
    }
    const size_t r = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, r);
    if (!p) throw std::bad_alloc();
    if (rounded) *rounded = r;
    return Buffer(std::shared_ptr<void>(p, [](void* q) { std::free(q); }), bytes);
}

}  // namespace

Buffer CpuBackend::alloc(size_t bytes) {
    size_t rounded = 0;
    Buffer b = hostAlloc(bytes, &rounded);
    if (bytes < kMmapBytes) std::memset(b.bytes(), 0, rounded);  // mmap pages are zero already
    return b;
}

Buffer CpuBackend::allocUninit(size_t bytes) {
    // Not garbage but NaN: any element an op fails to write, or any read that assumed alloc()'s zeros,
    // turns the results into NaN, which the golden and e2e tests cannot miss.
    Buffer b = hostAlloc(bytes, nullptr);
    constexpr uint32_t kQuietNaN = 0x7fc00000u;
    const size_t floats = bytes / 4;
    uint8_t* p = b.bytes();
    for (size_t i = 0; i < floats; ++i) std::memcpy(p + i * 4, &kQuietNaN, 4);
    std::memset(p + floats * 4, 0xFF, bytes - floats * 4);
    return b;
}

Buffer CpuBackend::upload(const void* host, size_t bytes) {
    Buffer b = alloc(bytes);
    if (bytes) std::memcpy(b.bytes(), host, bytes);
    return b;
}

void CpuBackend::download(const Buffer& src, void* host, size_t bytes, size_t offset) {
    TS_CHECK(offset + bytes <= src.size(), "download out of range");
    std::memcpy(host, src.bytes() + offset, bytes);
}

void CpuBackend::copy(const Buffer& src, size_t srcOffset, const Buffer& dst, size_t dstOffset, size_t bytes) {
    TS_CHECK(srcOffset + bytes <= src.size() && dstOffset + bytes <= dst.size(), "copy out of range");
    std::memmove(dst.bytes() + dstOffset, src.bytes() + srcOffset, bytes);
}

void CpuBackend::embedding(const int32_t* ids, int64_t T, const WeightView& table, const Buffer& out) {
    const int64_t D = table.cols;
    for (int64_t t = 0; t < T; ++t) {
        TS_CHECK(ids[t] >= 0 && ids[t] < table.rows, "embedding id out of range");
        cpu::rowToF32(table, ids[t], out.f32() + t * D);
    }
}

void CpuBackend::linear(const Buffer& x, int64_t T, const WeightView& w, const Buffer& y) {
    const int64_t in = w.cols, outF = w.rows;
    TS_CHECK(x.size() >= size_t(T * in) * 4 && y.size() >= size_t(T * outF) * 4, "linear: buffer too small");
    if (w.packed) {
        w.packed->forwardHost(x.f32(), T, y.f32());
        return;
    }
    const float* X = x.f32();
    float* Y = y.f32();
    // Blocks of 4 output rows: each converted weight row is reused across all T inputs.
    constexpr int64_t kRows = 4;
    const int64_t blocks = (outF + kRows - 1) / kRows;
    ThreadPool::global().parallelForCost(blocks, kRows * in * (T + 1), [&](int64_t b0, int64_t b1) {
        std::vector<float> wf(static_cast<size_t>(kRows * in));
        for (int64_t b = b0; b < b1; ++b) {
            const int64_t r0 = b * kRows, nr = std::min(kRows, outF - r0);
            for (int64_t r = 0; r < nr; ++r) cpu::rowToF32(w, r0 + r, wf.data() + r * in);
            for (int64_t t = 0; t < T; ++t)
                for (int64_t r = 0; r < nr; ++r) Y[t * outF + r0 + r] = cpu::dot(X + t * in, wf.data() + r * in, in);
        }
    });
}

void CpuBackend::rmsnorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, float eps, const Buffer& y) {
    const float* X = x.f32();
    float* Y = y.f32();
    const float* W = w.empty() ? nullptr : w.f32();
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = X + r * D;
        float* yr = Y + r * D;
        const float ms = cpu::dot(xr, xr, D) / float(D);
        const float inv = 1.0f / std::sqrt(ms + eps);
        for (int64_t i = 0; i < D; ++i) yr[i] = W ? W[i] * (xr[i] * inv) : xr[i] * inv;
    }
}

void CpuBackend::layernorm(const Buffer& x, int64_t rows, int64_t D, const Buffer& w, const Buffer& b, float eps,
                           const Buffer& y) {
    const float* X = x.f32();
    float* Y = y.f32();
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = X + r * D;
        float* yr = Y + r * D;
        double mean = 0;
        for (int64_t i = 0; i < D; ++i) mean += xr[i];
        const float m = float(mean / double(D));
        float var = 0;
        for (int64_t i = 0; i < D; ++i) var += (xr[i] - m) * (xr[i] - m);
        const float inv = 1.0f / std::sqrt(var / float(D) + eps);
        for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - m) * inv * w.f32()[i] + b.f32()[i];
    }
}

void CpuBackend::swiglu(const Buffer& gate, const Buffer& up, int64_t T, int64_t I, float limit,
                        const Buffer& out) {
    const float* G = gate.f32();
    const float* U = up.f32();
    float* O = out.f32();
    for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < I; ++i) {
            float g = G[t * I + i], u = U[t * I + i];
            if (limit > 0) {
                g = std::min(g, limit);
                u = std::clamp(u, -limit, limit);
            }
            O[t * I + i] = g / (1.0f + std::exp(-g)) * u;
        }
}

void CpuBackend::add(const Buffer& x, const Buffer& y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y.f32()[i] += x.f32()[i];
}

void CpuBackend::scale(const Buffer& x, int64_t n, float s) {
    for (int64_t i = 0; i < n; ++i) x.f32()[i] *= s;
}

void CpuBackend::zero(const Buffer& x) {
    if (x.size()) std::memset(x.bytes(), 0, x.size());
}

void CpuBackend::concatColumns(const Buffer* parts, const int64_t* widths, int count, int64_t T, const Buffer& out) {
    int64_t total = 0;
    for (int i = 0; i < count; ++i) total += widths[i];
    for (int64_t t = 0; t < T; ++t) {
        int64_t off = 0;
        for (int i = 0; i < count; ++i) {
            std::memcpy(out.f32() + t * total + off, parts[i].f32() + t * widths[i], size_t(widths[i]) * 4);
            off += widths[i];
        }
    }
}

void CpuBackend::repeatRows(const Buffer& src, int64_t T, int64_t D, int n, const Buffer& dst) {
    TS_CHECK(T >= 0 && D >= 0 && n >= 0, "repeatRows: negative shape");
    const size_t row = static_cast<size_t>(D) * 4;
    TS_CHECK(src.size() >= static_cast<size_t>(T) * row && dst.size() >= static_cast<size_t>(T * n) * row,
             "repeatRows: buffer too small");
    for (int64_t t = 0; t < T; ++t) {
        const uint8_t* s = src.bytes() + static_cast<size_t>(t) * row;
        for (int i = 0; i < n; ++i) std::memcpy(dst.bytes() + static_cast<size_t>(t * n + i) * row, s, row);
    }
}

std::unique_ptr<Backend> makeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace ts
