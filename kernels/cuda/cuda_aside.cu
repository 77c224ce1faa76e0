// The model's asides (Backend::beginAside … endAside … joinAside) on the CUDA backend: a run of ops that the ops
// after it do not read goes to the side stream (CudaBackend::forkSide, the highest priority) while the ops after it
// run on the main stream; joinAside makes the main stream wait for it before its results are read. The model's two:
// a MoE layer's shared expert beside the routing and the routed experts — the fused EXL3 MoE kernel and the routing
// kernels leave much of the memory bandwidth and many issue slots idle on the H200 (phases, waits;
// docs/PERFORMANCE_EXL3.md), which the expert's bandwidth-bound GEMVs fill —, and a KDA layer's gates (five small,
// latency-bound GEMVs and kdaGate) beside its q / k / v projections.
//
// What it computes: nothing of its own — the same kernels on another stream; the model adds the result where it
// did before, so the step's bits are unchanged.
// How it stays correct:
//   - stream: while the aside is open, m_stream *is* the side stream (forked after everything issued so far),
//     so every op's launches go there unchanged, cuBLAS's included (the handle follows m_stream); ops that wait
//     for the host are refused inside an open aside in a graph region (GraphOp), where they would end a capture;
//   - scratch: the backend's shared scratch (the slots, the BF16 GEMV's split-K partials and counters, the mHC
//     counters, the EXL3 cache) is swapped for a set of the aside's own, so the two streams never share one;
//   - memory: model-level buffers allocated inside the aside are held until the main stream has joined the side
//     (joinSide), so the pool cannot hand them to main-stream work still racing the side; everything freed
//     before the fork was last used by work the side stream waits for;
//   - graphs: the fork, the end and the join are capturable ops of their own (so a replay checks them like any
//     other), captured as a parallel branch of the segment's graph at the side stream's priority; a segment or
//     region end joins whatever is pending (joinSide), as for the Sinkhorn aside.
// Mode (asideSetMode, kernels/exl3_tune.h; TS_CUDA_ASIDE): 0 off, 1 inside decode-step graph regions (default:
// where the step is latency-bound and graphs remove the fork's host cost), 2 on every call.
// Test: `twinspark-cli selftest --backend cuda --model DIR` ("graphs" rows: decode steps with graphs — so with the
// asides — equal the eager steps without them bit for bit; "aside b3 pool" rows: mode 2 against mode 0, one aside
// per KDA layer and per MoE layer with a shared expert in every forward, counted);
// tests/e2e/test_graph_regions.cpp checks the model's side of the contract on the CPU.
// Benchmark: slice decode with TS_CUDA_ASIDE=0 / 1 (scripts/gpu/decode_step_ab.sh, AB_VARS).
#include <atomic>

#include "core/env_switch.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_exl3.cuh"

namespace ts {

namespace asidecuda {
static ModeSwitch g_mode("TS_CUDA_ASIDE", 3, 1);
static std::atomic<int64_t> g_forks{0};
int setMode(int mode) { return g_mode.set(mode); }
int mode() { return g_mode.now(); }
int64_t forks() { return g_forks.load(); }
}  // namespace asidecuda

void CudaBackend::swapAsideResources() {
    if (m_aside.scratch.empty()) m_aside.scratch.resize(m_scratch.size());
    std::swap(m_scratch, m_aside.scratch);
    std::swap(m_gemvPart, m_aside.gemvPart);
    std::swap(m_gemvCounters, m_aside.gemvCounters);
    std::swap(m_mhcCounters, m_aside.mhcCounters);
    std::swap(m_exl3, m_aside.exl3);
}

bool CudaBackend::beginAside() {
    const int mode = asidecuda::mode();
    if (mode == 0 || (mode == 1 && !inGraphRegion())) return false;
    TS_CHECK(!m_asideOpen, "beginAside: an aside is already open");
    GraphOp op(*this, true, "asideBegin", {});
    if (!op.skip()) {  // (a replay: the segment's graph holds the branch)
        cudaStream_t side = forkSide();
        m_asideMain = m_stream;
        m_stream = side;
        TS_CUDA_CHECK(cublasSetStream(m_cublas, m_stream));
        swapAsideResources();
        m_asideForked = true;
        ++asidecuda::g_forks;
    }
    m_asideOpen = true;
    return true;
}

void CudaBackend::endAside() {
    if (!m_asideOpen) return;
    m_asideOpen = false;
    if (m_asideForked) {  // first, so that the backend is back on its stream whatever follows
        m_asideForked = false;
        swapAsideResources();
        m_stream = m_asideMain;
        TS_CUDA_CHECK(cublasSetStream(m_cublas, m_stream));
        sideIssued();
    }
    GraphOp op(*this, true, "asideEnd", {});
}

void CudaBackend::joinAside() {
    GraphOp op(*this, true, "asideJoin", {});
    if (!op.skip()) joinSide();
}

cublasHandle_t CudaBackend::cublasNow() {
    if (m_sidePending && !m_asideOpen) joinSide();
    return m_cublas;
}

}  // namespace ts
