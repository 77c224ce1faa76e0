// The state behind CudaBackend's decode-step graphs (cuda_graph.cu has the protocol; Backend::
// beginGraphRegion the contract). Private to kernels/cuda.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <vector>

#include "cuda/cuda_backend.h"

namespace ts {

// One key's recording: the ops of its region in order, the bytes of its activations, and the captured
// runs of capturable ops between the eager ones.
struct GraphRegionEntry {
    // kRetry: a capture stopped by an exception; dropped and measured again at the key's next region.
    enum Stage { kNew, kMeasured, kCaptured, kBroken, kRetry };
    Stage stage = kNew;
    // Per model-level op: a hash of its name and kind (measured), then also of its arguments (captured:
    // the addresses a replay must see again).
    std::vector<uint64_t> ops;
    std::vector<const char*> names;  // per op, for messages
    size_t arenaBytes = 0;           // the region's model-level allocations, 256-byte aligned each
    struct Segment {
        int first = 0, end = 0;      // ops [first, end)
        cudaGraphExec_t exec = nullptr;
    };
    std::vector<Segment> segments;
    std::vector<Buffer> keep;        // memory captured ops allocated for themselves
    int eagerOps = 0;
    ~GraphRegionEntry() {
        for (Segment& s : segments)
            if (s.exec) cudaGraphExecDestroy(s.exec);
    }
};

struct CudaBackend::GraphState {
    enum Mode { kOff, kMeasure, kCapture, kReplay };
    bool enabled = true;
    std::map<uint64_t, std::unique_ptr<GraphRegionEntry>> regions;
    GraphRegionEntry* cur = nullptr;  // the open region's entry (mode != kOff)
    uint64_t curKey = 0;
    Mode mode = kOff;
    int op = 0;                 // index of the next model-level op in the open region
    size_t arenaOff = 0;        // bytes of the arena handed out in the open region
    bool capturing = false;     // a segment's stream capture is open
    int segFirst = 0;           // first op of that segment
    size_t nextSegment = 0;     // replay: the next segment to launch
    uint64_t epoch = 0;         // bumped when a buffer the graphs may hold is replaced
    uint64_t regionsEpoch = 0;  // the epoch the recorded regions were made in
    std::vector<Buffer> retired;  // replaced scratch buffers the graphs may still read
    // Where every region's model-level allocations come from once its key is measured: shared by all
    // keys (one region runs at a time and its activations die with the step), as large as the largest.
    Buffer arena;
    GraphStats stats;
};

}  // namespace ts
