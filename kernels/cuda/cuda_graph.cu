// Decode-step graphs: CudaBackend's side of Backend::beginGraphRegion (the contract is there).
//
// What it computes: nothing of its own; it replays the model's own kernels. A region (one decode step's
// forward, keyed by its batch size) goes through three stages per key:
//   1. measure: runs eagerly; records each model-level op (name, capturable or eager, a hash of its
//      buffer addresses, shapes and scalars) and the bytes of the region's model-level allocations;
//   2. capture: the region's allocations come from one arena (shared by the keys: one region runs at a
//      time and its activations die with the step), so every step of the key sees the same activation
//      addresses; each run of capturable ops between two eager ones is
//      stream-captured into a CUDA graph, instantiated and launched at its end (so this step computes
//      too); the eager ops (the ones reading host arrays, positions or per-sequence state: embedding,
//      cache writes, indexer, sparse attention, KDA conv/recurrence, host routing) run between them;
//   3. replay: the model's host code runs as before, a captured op only compares its hash with the
//      recording and returns; each segment's graph is launched where the next eager op (or the end)
//      comes. Any difference from the recording is a broken contract: ts::Error(Internal), and the key
//      runs eagerly from then on.
// A step stopped by an op's exception (Backend::GraphRegionEnd::Failed: out of memory, a fault) says nothing
// about the key: a measuring or capturing key starts over at its next step (a partial capture is dropped once
// the stream has run it), a replayed one keeps its graphs.
// This is the piecewise form (vLLM's default in V1): attention and state updates stay eager, the dense
// and MoE work between them is graphed. Everything is on the backend's stream, except short side work
// (CudaBackend::forkSide: a decode step's mHC Sinkhorn) forked from it and joined back inside the same segment.
// Invalidation: a scratch buffer that grows (the indexer's with the context, a larger prefill's EXL3
// partials) or a weight release drops every recorded region at the next region start (the old buffers
// are kept until then: launched graphs may still read them).
// Test: `twinspark-cli selftest --backend cuda --model DIR` ("graph replay" rows: the logits of decode
// steps at batch 1 and 3 with graphs must equal the eager ones bit for bit, and the graphs must have
// been replayed). Benchmark: the slice's decode tok/s with TS_CUDA_GRAPHS=1 / 0
// (scripts/gpu/decode_step_ab.sh, AB_VARS).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "core/env_switch.h"
#include "core/error.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_graph.cuh"

namespace ts {

namespace {
constexpr size_t kArenaAlign = 256;
size_t alignArena(size_t b) { return (std::max<size_t>(b, 1) + kArenaAlign - 1) & ~(kArenaAlign - 1); }


uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}
}  // namespace

CudaBackend::GraphOp::GraphOp(CudaBackend& be, bool capturable, const char* name, std::initializer_list<uint64_t> args)
    : m_be(be) {
    GraphState* g = be.m_graph.get();
    if (be.m_opDepth == 0 && g && g->mode != GraphState::kOff) {
        // An op that waits for the host would end the capture with the side stream open (cuda_aside.cu).
        if (!capturable && be.m_asideOpen)
            fail(ErrorKind::Internal, std::string("CUDA graphs: ") + name +
                                          " inside an aside (Backend::beginAside): the aside's ops must not wait for the host");
        // The measuring run's activations come from the pool, the later ones' from the arena: it records
        // what the op is; the capturing run adds the addresses, which every replay must match.
        uint64_t shape = mix(0x7473, capturable ? 1 : 2);
        for (const char* c = name; *c; ++c) shape = mix(shape, uint64_t(uint8_t(*c)));
        uint64_t full = shape;
        for (uint64_t a : args) full = mix(full, a);
        GraphRegionEntry& e = *g->cur;
        const uint64_t h = g->mode == GraphState::kReplay ? full : shape;
        if (g->mode == GraphState::kMeasure) {
            e.ops.push_back(shape);
            e.names.push_back(name);
        } else {
            if (size_t(g->op) >= e.ops.size() || e.ops[size_t(g->op)] != h) {
                const std::string was = size_t(g->op) < e.names.size() ? e.names[size_t(g->op)] : "the region's end";
                e.stage = GraphRegionEntry::kBroken;  // endGraphRegion(Failed) closes any open capture
                fail(ErrorKind::Internal, "CUDA graphs: op #" + std::to_string(g->op) + " (" + name +
                                              ") of this decode step differs from the recorded one (" + was +
                                              "); graphs are off for this batch size from now on");
            }
            if (g->mode == GraphState::kCapture) {
                e.ops[size_t(g->op)] = full;
                if (capturable && !g->capturing) {
                    // Relaxed: other threads' driver calls stay legal during a capture (Engine::metrics reads the
                    // device's memory from an HTTP or UI thread) and do not invalidate it.
                    TS_CUDA_CHECK(cudaStreamBeginCapture(be.m_stream, cudaStreamCaptureModeRelaxed));
                    g->capturing = true;
                    g->segFirst = g->op;
                } else if (!capturable && g->capturing) {
                    be.graphSegmentEnd();
                }
            } else if (capturable) {
                m_skip = true;
            } else if (g->nextSegment < e.segments.size() && e.segments[g->nextSegment].end == g->op) {
                TS_CUDA_CHECK(cudaGraphLaunch(e.segments[g->nextSegment++].exec, be.m_stream));
                ++g->stats.segmentLaunches;
            }
        }
        if (!capturable) ++e.eagerOps;
        ++g->op;
    }
    ++be.m_opDepth;  // last: a constructor that throws leaves the depth as it was
}

void CudaBackend::beginGraphRegion(uint64_t key) {
    if (!m_graph) {
        m_graph = std::make_unique<GraphState>();
        static const bool fromEnv = envSwitch("TS_CUDA_GRAPHS", true);
        m_graph->enabled = fromEnv;
    }
    GraphState& g = *m_graph;
    TS_CHECK(g.mode == GraphState::kOff && m_opDepth == 0, "CUDA graphs: regions do not nest");
    if (!g.enabled) return;
    if (g.epoch != g.regionsEpoch) {
        if (!g.regions.empty()) ++g.stats.invalidations;
        Buffer arena = std::move(g.arena);  // still good: only the graphs are stale
        dropGraphs();
        g.arena = std::move(arena);
        g.regionsEpoch = g.epoch;
    }
    std::unique_ptr<GraphRegionEntry>& e = g.regions[key];
    if (e && e->stage == GraphRegionEntry::kRetry) {
        // A capture that an exception stopped (endGraphRegion, Failed): its partial segments were launched and
        // may still run, and they read its kept buffers, so both go only after the stream has run them. The key
        // then starts over as new.
        TS_CUDA_CHECK(cudaStreamSynchronize(m_stream));
        e.reset();
        ++g.stats.retries;
    }
    if (!e) e = std::make_unique<GraphRegionEntry>();
    if (e->stage == GraphRegionEntry::kBroken) {
        ++g.stats.eagerRegions;
        return;
    }
    g.cur = e.get();
    g.curKey = key;
    g.op = 0;
    g.arenaOff = 0;
    g.nextSegment = 0;
    g.capturing = false;
    e->eagerOps = 0;
    if (e->stage == GraphRegionEntry::kNew) {
        g.mode = GraphState::kMeasure;
        e->ops.clear();
        e->names.clear();
    } else if (e->stage == GraphRegionEntry::kMeasured) {
        if (g.arena.size() < e->arenaBytes) {
            // Grown (doubling, so a few larger batch sizes settle it): the graphs recorded so far point
            // into the old arena, so they are dropped at the next region's start (graphRetire).
            const size_t bytes = std::max(e->arenaBytes, 2 * g.arena.size());
            if (!g.arena.empty()) graphRetire(g.arena);
            g.arena = allocUninit(bytes);  // before the mode is set: from the pool
        }
        g.mode = GraphState::kCapture;
    } else {
        g.mode = GraphState::kReplay;
    }
}

// The open capture ends at op g.op: instantiated, kept as the key's next segment, and launched (this
// step computes through it like the later ones).
void CudaBackend::graphSegmentEnd() {
    GraphState& g = *m_graph;
    cudaGraph_t graph = nullptr;
    joinSide();  // a capture ends only with every stream it forked joined back
    g.capturing = false;
    TS_CUDA_CHECK(cudaStreamEndCapture(m_stream, &graph));
    GraphRegionEntry::Segment s;
    s.first = g.segFirst;
    s.end = g.op;
    // Node priorities kept: side-stream work (forkSide) is captured at its stream's higher priority.
    const cudaError_t ie = cudaGraphInstantiate(&s.exec, graph, cudaGraphInstantiateFlagUseNodePriority);
    cudaGraphDestroy(graph);
    TS_CUDA_CHECK(ie);
    g.cur->segments.push_back(s);
    TS_CUDA_CHECK(cudaGraphLaunch(s.exec, m_stream));
    ++g.stats.segmentLaunches;
}

void CudaBackend::endGraphRegion(GraphRegionEnd how) {
    if (!m_graph || m_graph->mode == GraphState::kOff) return;
    const bool completed = how == GraphRegionEnd::Completed;
    try {
        joinSide();  // the step's side work is part of it (an open capture needs it joined before it ends)
    } catch (const std::exception&) {
        cudaGetLastError();  // never throws: see below
    }
    GraphState& g = *m_graph;
    GraphRegionEntry& e = *g.cur;
    const GraphState::Mode mode = g.mode;
    const bool countOk = size_t(g.op) == e.ops.size() || mode == GraphState::kMeasure;
    if (!completed) {
        // The region stops early. Left: the model took a path whose ops depend on the data, so the key runs
        // eagerly from now on. Failed: an op threw (out of memory, an injected fault) — the key is not at
        // fault, so a measuring run starts over at its next step, a capturing one too once its partial
        // segments are dropped (kRetry: at the next beginGraphRegion, after the stream has run them), and a
        // replayed one keeps its graphs. A key that broke the contract (an op or an allocation unlike the
        // recording) was marked kBroken before the throw and stays so. What was issued so far must still
        // run: an open capture is closed and launched. Never throws (it runs while an exception unwinds).
        g.mode = GraphState::kOff;
        if (g.capturing) {
            try {
                graphSegmentEnd();
            } catch (const std::exception&) {
                g.capturing = false;
                cudaGraph_t graph = nullptr;
                cudaStreamEndCapture(m_stream, &graph);
                if (graph) cudaGraphDestroy(graph);
                cudaGetLastError();
            }
        }
        // Counted, not logged: the step's own error reaches its requests and the log, and nothing of the failed
        // step is used (the engine drops its sequences).
        if (how == GraphRegionEnd::Failed) ++g.stats.failedRegions;
        if (mode == GraphState::kReplay && g.nextSegment < e.segments.size() && e.segments[g.nextSegment].first < g.op)
            ++g.stats.stoppedMidSegment;
        if (e.stage != GraphRegionEntry::kBroken && mode != GraphState::kReplay) {
            if (how == GraphRegionEnd::Left)
                e.stage = GraphRegionEntry::kBroken;
            else if (mode == GraphState::kCapture)
                e.stage = GraphRegionEntry::kRetry;
            // else a failed measuring run: still kNew, measured again from the start
        }
        g.cur = nullptr;
        ++g.stats.eagerRegions;
        return;
    }
    if (g.capturing && !countOk) {  // a capture that issued fewer ops than recorded: dropped
        g.capturing = false;
        cudaGraph_t graph = nullptr;
        cudaStreamEndCapture(m_stream, &graph);
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError();
    }
    if (mode == GraphState::kMeasure) {
        g.mode = GraphState::kOff;
        g.cur = nullptr;
        e.arenaBytes = g.arenaOff;
        e.stage = GraphRegionEntry::kMeasured;
        ++g.stats.eagerRegions;
        return;
    }
    if (!countOk) {  // a region that stopped early issued fewer ops than recorded
        g.mode = GraphState::kOff;
        g.cur = nullptr;
        e.stage = GraphRegionEntry::kBroken;
        fail(ErrorKind::Internal, "CUDA graphs: this decode step issued " + std::to_string(g.op) + " ops, the recorded one " +
                                      std::to_string(e.ops.size()) + "; graphs are off for this batch size from now on");
    }
    if (mode == GraphState::kCapture) {
        if (g.capturing) graphSegmentEnd();
        e.stage = GraphRegionEntry::kCaptured;
        ++g.stats.captures;
    } else {
        if (g.nextSegment < e.segments.size() && e.segments[g.nextSegment].end == g.op) {
            TS_CUDA_CHECK(cudaGraphLaunch(e.segments[g.nextSegment++].exec, m_stream));
            ++g.stats.segmentLaunches;
        }
        ++g.stats.replays;
        g.stats.lastSegments = int64_t(e.segments.size());
        g.stats.lastEagerOps = e.eagerOps;
    }
    g.mode = GraphState::kOff;
    g.cur = nullptr;
}

bool CudaBackend::graphAlloc(size_t bytes, Buffer& out) {
    if (!m_graph || m_graph->mode == GraphState::kOff) return false;
    GraphState& g = *m_graph;
    if (m_opDepth > 0) return false;  // an op's own memory: graphKeep decides
    const size_t a = alignArena(bytes);
    if (g.mode == GraphState::kMeasure) {
        g.arenaOff += a;
        return false;
    }
    GraphRegionEntry& e = *g.cur;
    if (g.arenaOff + a > e.arenaBytes || g.arenaOff + a > g.arena.size()) {
        e.stage = GraphRegionEntry::kBroken;
        fail(ErrorKind::Internal, "CUDA graphs: this decode step allocates more than the recorded one (" +
                                      std::to_string(g.arenaOff + a) + " > " + std::to_string(e.arenaBytes) +
                                      " bytes); graphs are off for this batch size from now on");
    }
    out = g.arena.view(g.arenaOff, bytes);
    g.arenaOff += a;
    return true;
}

void CudaBackend::graphKeep(const Buffer& b) {
    // Memory a captured op allocated for itself: its graph reads it at every replay, so it stays taken.
    if (m_graph && m_graph->capturing && m_opDepth > 0) m_graph->cur->keep.push_back(b);
}

bool CudaBackend::graphRetire(Buffer& old) {
    if (!m_graph || m_graph->regions.empty()) return false;
    m_graph->retired.push_back(std::move(old));
    ++m_graph->epoch;
    return true;
}

bool CudaBackend::capturingNow() const { return m_graph && m_graph->capturing; }

bool CudaBackend::inGraphRegion() const { return m_graph && m_graph->mode != GraphState::kOff; }

void CudaBackend::checkNotCapturing(const char* what) const {
    if (m_graph && m_graph->capturing)
        fail(ErrorKind::Internal, std::string("CUDA graphs: ") + what +
                                      " would wait for the GPU inside a captured segment (an op marked capturable "
                                      "needs a first eager run)");
}

void CudaBackend::dropGraphs(bool contextLost) {
    if (!m_graph) return;
    if (!contextLost) {
        TS_CHECK(m_graph->mode == GraphState::kOff, "CUDA graphs: cannot drop the graphs inside a region");
        // Launched graphs may still run: their memory (arenas, kept and retired buffers) goes after them.
        if (!m_graph->regions.empty() || !m_graph->retired.empty()) TS_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    }
    m_graph->regions.clear();
    m_graph->retired.clear();
    m_graph->arena = Buffer();
}

bool CudaBackend::setGraphsEnabled(bool on) {
    if (!m_graph) m_graph = std::make_unique<GraphState>();
    m_graph->enabled = on;
    if (!on) dropGraphs();
    return true;
}

Backend::GraphStats CudaBackend::graphStats() const { return m_graph ? m_graph->stats : GraphStats{}; }

}  // namespace ts
