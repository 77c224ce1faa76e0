// The workspace of one forward step over several sequences (private to engine/model): the T rows of
// all sequences, the mHC buffers, and the bookkeeping that maps rows back to sequences.
#pragma once

#include <vector>

#include "model/glm5_next.h"

namespace ts {

struct Glm5NextModel::Batch {
    const std::vector<SeqStep>* steps = nullptr;
    std::vector<int64_t> rowStart;  // first row of each sequence; rowStart[s + 1] − rowStart[s] = n
    int64_t T = 0;
    Buffer streams;  // [T, n, D]
    Buffer x;        // [T, D] collapsed streams
    Buffer xn;       // [T, D] normalised sub-layer input
    Buffer post;     // [T, n]
    Buffer comb;     // [T, n, n]
    Buffer idx;      // [T, width] int32: the last full indexer layer's selection (for shared layers)
    std::vector<IndexerStats> stats;  // per sequence
    std::vector<uint64_t> rowHash;    // per row, when any sequence records its decisions
    const SeqStep& step(size_t s) const { return (*steps)[s]; }
    int64_t rows(size_t s) const { return rowStart[s + 1] - rowStart[s]; }
};

// One step's Backend::beginGraphRegion: closed by end() after the region's last op, or as failed when an
// exception leaves the step first.
class GraphRegionScope {
public:
    GraphRegionScope(Backend& b, bool on, uint64_t key) : m_b(on ? &b : nullptr) {
        if (m_b) m_b->beginGraphRegion(key);
    }
    ~GraphRegionScope() {
        if (m_b) m_b->endGraphRegion(Backend::GraphRegionEnd::Failed);
    }
    GraphRegionScope(const GraphRegionScope&) = delete;
    GraphRegionScope& operator=(const GraphRegionScope&) = delete;
    void end() {
        Backend* b = m_b;
        m_b = nullptr;
        if (b) b->endGraphRegion(Backend::GraphRegionEnd::Completed);
    }

private:
    Backend* m_b;
};

}  // namespace ts
