// How CudaBackend::mlaSparseAttention (cuda_attention.cu) splits each query's selected set over blocks: chunks
// of whole tiles, each block one (query, chunk, head group), several chunks merged afterwards. Plain C++ (no
// CUDA), so that tests/kernels/test_mla_plan.cpp checks it on the host.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ts::mlaplan {

struct ChunkPlan {
    int64_t chunks = 1;    // chunks per query (grid.y); > 1: partials and a merge
    int64_t chunkLen = 0;  // selected entries per chunk, a multiple of the tile
};

// T queries × headGroups blocks each per chunk, a selection `width` wide (≥ 1), numSMs SMs. About two blocks per
// SM in all, at least minTiles tiles of `tile` entries per chunk (a block's fixed costs — q, the first copies —
// over enough tiles), at most 64 chunks (the partials' size). forcedTiles > 0 (A/B runs): that many tiles per
// chunk instead, at most the whole selection.
inline ChunkPlan planChunks(int64_t T, int64_t headGroups, int64_t width, int numSMs, int64_t tile, int64_t minTiles,
                            int64_t forcedTiles = 0) {
    const int64_t w = std::max<int64_t>(width, 1);
    const int64_t target = 2 * std::max(1, numSMs);
    const int64_t maxChunks = std::max<int64_t>(1, (w + minTiles * tile - 1) / (minTiles * tile));
    const int64_t perChunk = std::max<int64_t>(1, T * headGroups);
    ChunkPlan p;
    p.chunks = std::clamp<int64_t>((target + perChunk - 1) / perChunk, 1, std::min<int64_t>(maxChunks, 64));
    p.chunkLen = (w + p.chunks - 1) / p.chunks;
    p.chunkLen = (p.chunkLen + tile - 1) / tile * tile;
    if (forcedTiles > 0) p.chunkLen = std::max(tile, std::min(forcedTiles * tile, (w + tile - 1) / tile * tile));
    p.chunks = (w + p.chunkLen - 1) / p.chunkLen;
    return p;
}

}  // namespace ts::mlaplan
