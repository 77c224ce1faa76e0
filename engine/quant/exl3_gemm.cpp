// EXL3 reconstruction and rotated-input GEMM on the CPU (see exl3_gemm.h).
#include "quant/exl3_gemm.h"

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/exl3_hadamard.h"
#include "quant/exl3_trellis.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace ts {

namespace {

ThreadPool& poolOf(ThreadPool* pool) { return pool ? *pool : ThreadPool::global(); }

void checkLinear(const Exl3Linear& w) {
    TS_CHECK(w.trellis && w.bits >= 1 && w.bits <= kExl3MaxBits, "EXL3 linear " + w.prefix + " is not bound");
    TS_CHECK(w.k % kExl3HadSize == 0 && w.n % kExl3HadSize == 0, "EXL3 linear " + w.prefix + " has unpadded dims");
    TS_CHECK(int64_t(w.suh.size()) == w.k && int64_t(w.svh.size()) == w.n,
             "EXL3 linear " + w.prefix + ": scale vectors do not match the trellis");
    TS_CHECK(w.bias.empty() || int64_t(w.bias.size()) == w.n, "EXL3 linear " + w.prefix + ": bias size");
}

// Rows per parallel task for the per-row transforms: ~64k floats of work keeps tiny calls inline.
int64_t rowGrain(int64_t width) { return std::max<int64_t>(1, 65536 / std::max<int64_t>(1, width)); }

// One 16-wide column strip of yr, tiles tk in [0, k/16): acc [m, 16] += xr[:, 16tk..] · tile.
// The tile (1 KiB) is the only decoded weight storage.
void accumulateTile(const float* tile, const float* xr, int64_t m, int64_t k, int64_t tk, float* yr, int64_t n,
                    int64_t tn) {
    for (int64_t i = 0; i < m; ++i) {
        const float* xv = xr + i * k + 16 * tk;
        float acc[16];
        float* yrow = yr + i * n + 16 * tn;
        std::memcpy(acc, yrow, sizeof acc);
        for (int r = 0; r < 16; ++r) {
            const float a = xv[r];
            const float* wrow = tile + r * 16;
            for (int c = 0; c < 16; ++c) acc[c] += a * wrow[c];
        }
        std::memcpy(yrow, acc, sizeof acc);
    }
}

}  // namespace

void exl3ReconstructRotated(const Exl3Linear& w, float* out, ThreadPool* pool) {
    checkLinear(w);
    const int64_t tn = w.tilesN();
    // One task = one tile row (16 input channels × n); every tile is written exactly once.
    poolOf(pool).parallelFor(w.tilesK(), [&](int64_t b, int64_t e) {
        for (int64_t tk = b; tk < e; ++tk)
            for (int64_t j = 0; j < tn; ++j)
                exl3DecodeTile(w.tile(tk, j), w.bits, w.codebook, out + 16 * tk * w.n + 16 * j, w.n);
    });
}

void exl3Reconstruct(const Exl3Linear& w, float* out, ThreadPool* pool) {
    checkLinear(w);
    // A 128-row block of W depends only on the same rows of Ŵ (the left Hadamard mixes rows within the
    // block, the right one mixes columns within a row), so each block is finished independently.
    const int64_t blocks = w.k / kExl3HadSize, tilesPerBlock = kExl3HadSize / 16;
    poolOf(pool).parallelFor(blocks, [&](int64_t b, int64_t e) {
        for (int64_t blk = b; blk < e; ++blk) {
            float* a = out + blk * kExl3HadSize * w.n;  // [128, n]
            for (int64_t t = 0; t < tilesPerBlock; ++t)
                for (int64_t j = 0; j < w.tilesN(); ++j)
                    exl3DecodeTile(w.tile(blk * tilesPerBlock + t, j), w.bits, w.codebook, a + 16 * t * w.n + 16 * j,
                                   w.n);
            hadamard128Rows(a, w.n, w.n);  // Ĥ · Ŵ[block, :]  (input side)
            for (int64_t r = 0; r < kExl3HadSize; ++r) {
                float* row = a + r * w.n;
                const float s = w.suh[size_t(blk * kExl3HadSize + r)];
                for (int64_t j = 0; j < w.n; ++j) row[j] *= s;
                hadamard128Blocks(row, w.n, nullptr, w.svh.data());  // (row · Ĥ) ⊙ svh  (output side)
            }
        }
    });
}

void exl3InputTransform(const Exl3Linear& w, const float* x, int64_t m, int64_t xCols, float* xr, ThreadPool* pool) {
    checkLinear(w);
    TS_CHECK(xCols >= 0 && xCols <= w.k, "EXL3 " + w.prefix + ": input wider than in_features");
    poolOf(pool).parallelFor(m, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            float* row = xr + i * w.k;
            std::memcpy(row, x + i * xCols, size_t(xCols) * sizeof(float));
            std::fill(row + xCols, row + w.k, 0.0f);  // pad rows of W see zero inputs
            hadamard128Blocks(row, w.k, w.suh.data(), nullptr);
        }
    }, rowGrain(w.k));
}

void exl3RotatedMatmul(const Exl3Linear& w, const float* xr, int64_t m, float* yr, ThreadPool* pool) {
    checkLinear(w);
    std::fill(yr, yr + m * w.n, 0.0f);
    // Tasks own disjoint 16-column strips of yr, so no reduction is needed and the sum order (tk
    // ascending) is the same for any thread count. Within a task tk is the outer loop so that the
    // trellis is read as contiguous runs of the task's tiles.
    const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, w.k));
    poolOf(pool).parallelFor(w.tilesN(), [&](int64_t b, int64_t e) {
        alignas(64) float tile[kExl3TileValues];
        for (int64_t tk = 0; tk < w.tilesK(); ++tk) {
            for (int64_t tn = b; tn < e; ++tn) {
                exl3DecodeTile(w.tile(tk, tn), w.bits, w.codebook, tile, 16);
                accumulateTile(tile, xr, m, w.k, tk, yr, w.n, tn);
            }
        }
    }, grain);
}

void exl3OutputTransform(const Exl3Linear& w, float* yr, int64_t m, float* y, int64_t yCols, ThreadPool* pool) {
    checkLinear(w);
    TS_CHECK(yCols >= 0 && yCols <= w.n, "EXL3 " + w.prefix + ": output wider than out_features");
    poolOf(pool).parallelFor(m, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            float* row = yr + i * w.n;
            hadamard128Blocks(row, w.n, nullptr, w.svh.data());
            float* out = y + i * yCols;
            if (w.bias.empty()) {
                std::memcpy(out, row, size_t(yCols) * sizeof(float));
            } else {
                for (int64_t j = 0; j < yCols; ++j) out[j] = row[j] + w.bias[size_t(j)];
            }
        }
    }, rowGrain(w.n));
}

void exl3Gemm(const Exl3Linear& w, const float* x, int64_t m, int64_t xCols, float* y, int64_t yCols,
              ThreadPool* pool) {
    if (m <= 0) return;
    std::vector<float> xr(static_cast<size_t>(m * w.k));  // [m, k] rotated input
    std::vector<float> yr(static_cast<size_t>(m * w.n));  // [m, n] rotated output
    exl3InputTransform(w, x, m, xCols, xr.data(), pool);
    exl3RotatedMatmul(w, xr.data(), m, yr.data(), pool);
    exl3OutputTransform(w, yr.data(), m, y, yCols, pool);
}

}  // namespace ts
