// 128-point Hadamard transforms for EXL3 (see exl3_hadamard.h).
#include "quant/exl3_hadamard.h"

#include "core/error.h"

namespace ts {

void hadamard128(float* x) {
    // log2(128) = 7 butterfly stages: pairs (u, v) at distance h become (u + v, u − v).
    for (int h = 1; h < kExl3HadSize; h <<= 1) {
        for (int i = 0; i < kExl3HadSize; i += 2 * h) {
            for (int j = i; j < i + h; ++j) {
                const float u = x[j], v = x[j + h];
                x[j] = u + v;
                x[j + h] = u - v;
            }
        }
    }
    for (int i = 0; i < kExl3HadSize; ++i) x[i] *= kExl3HadScale;
}

void hadamard128Blocks(float* x, int64_t len, const float* pre, const float* post) {
    TS_CHECK(len % kExl3HadSize == 0, "hadamard128Blocks: length not a multiple of 128");
    for (int64_t b = 0; b < len; b += kExl3HadSize) {
        float* blk = x + b;
        if (pre)
            for (int i = 0; i < kExl3HadSize; ++i) blk[i] *= pre[b + i];
        hadamard128(blk);
        if (post)
            for (int i = 0; i < kExl3HadSize; ++i) blk[i] *= post[b + i];
    }
}

void hadamard128Rows(float* a, int64_t ld, int64_t cols) {
    for (int h = 1; h < kExl3HadSize; h <<= 1) {
        for (int i = 0; i < kExl3HadSize; i += 2 * h) {
            for (int r = i; r < i + h; ++r) {
                float* u = a + r * ld;
                float* v = a + (r + h) * ld;
                for (int64_t j = 0; j < cols; ++j) {
                    const float s = u[j], d = v[j];
                    u[j] = s + d;
                    v[j] = s - d;
                }
            }
        }
    }
    for (int r = 0; r < kExl3HadSize; ++r) {
        float* row = a + r * ld;
        for (int64_t j = 0; j < cols; ++j) row[j] *= kExl3HadScale;
    }
}

}  // namespace ts
