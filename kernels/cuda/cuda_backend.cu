// CudaBackend: device memory, the weight and EXL3 upload caches, scratch slots, the factory, trapDevice (test hook).
// The ops live in the family files (cuda_math.cu, cuda_mhc_kda.cu, cuda_attention.cu, cuda_moe.cu,
// cuda_exl3.cu). Test: `twinspark-cli selftest --backend cuda` (scripts/gpu/run_gpu_suite.sh runs it with the
// benchmarks). Benchmark: none of its own — `bench-device` times the ops of the family files, and `--what upload`
// the upload path (cuda_memory.cu).
#include "cuda/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "core/dtype.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_exl3.cuh"
#include "cuda/cuda_graph.cuh"

namespace ts {

namespace cuda {
void throwCuda(const char* what, const char* detail, const char* file, int line) {
    fail(ErrorKind::Internal, std::string("CUDA: ") + what + " failed: " + detail + " (" + file + ":" +
                                  std::to_string(line) + ")");
}

bool isStickyError(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorContained:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable: return true;
    default: return false;
    }
}

void throwCuda(cudaError_t e, const char* what, const char* file, int line) {
    const std::string text = std::string("CUDA: ") + what + " failed: " + cudaGetErrorString(e) + " (" + file + ":" +
                             std::to_string(line) + ")";
    if (isStickyError(e))
        fail(ErrorKind::DeviceLost, text + "; this process's GPU context is lost (a CUDA sticky error)");
    fail(ErrorKind::Internal, text);
}
}  // namespace cuda

// The caching allocator behind alloc()/upload(). The model allocates its step buffers per op call
// (Backend::alloc), which would otherwise be a cudaMalloc + cudaFree each time. Freed blocks go back
// to a free list per size class and are handed out again; that is safe without events because one
// backend enqueues everything on its one stream, so a new owner's work runs after the old owner's.
// Classes: powers of two from 512 B to 64 MiB; larger buffers (weights, the KV pool) are exact-size
// cudaMalloc / cudaFree. When cudaMalloc fails, the cached blocks are released and it is tried again.
struct DevicePool {
    static constexpr size_t kMinClass = 512, kMaxCached = size_t(64) << 20;
    int device = 0;
    cudaStream_t stream = nullptr;
    std::atomic<bool> open{true};                   // false once the backend is gone: free directly
    std::map<size_t, std::vector<void*>> free;      // class bytes -> blocks
    size_t cachedBytes = 0;
    std::mutex mutex;  // Buffers may be released on another thread than the one running ops

    static size_t classOf(size_t bytes) {
        size_t c = kMinClass;
        while (c < bytes) c <<= 1;
        return c;
    }
    void releaseCached() {
        std::lock_guard<std::mutex> lock(mutex);
        cudaStreamSynchronize(stream);
        for (auto& [cls, blocks] : free)
            for (void* p : blocks) cudaFree(p);
        free.clear();
        cachedBytes = 0;
    }
};

namespace {
void* mallocOrThrow(DevicePool& pool, size_t n, size_t bytes) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        pool.releaseCached();  // takes the pool's lock: callers must not hold it
        e = cudaMalloc(&p, n);
    }
    if (cuda::isStickyError(e)) cuda::throwCuda(e, "cudaMalloc", __FILE__, __LINE__);  // not a full device: a lost one
    if (e != cudaSuccess)
        fail(ErrorKind::Io, "CUDA: cannot allocate " + std::to_string(bytes) + " bytes of device memory (" +
                                cudaGetErrorString(e) + ")");
    return p;
}

Buffer deviceAlloc(const std::shared_ptr<DevicePool>& pool, size_t bytes) {
    const size_t want = bytes == 0 ? 1 : bytes;  // a valid pointer even for empty tensors
    if (want > DevicePool::kMaxCached) {
        void* p = mallocOrThrow(*pool, want, bytes);
        return Buffer(std::shared_ptr<void>(p, [pool](void* q) {
                          // a kernel still queued may read it: let the stream drain first
                          if (pool->open) cudaStreamSynchronize(pool->stream);
                          cudaFree(q);
                      }),
                      bytes);
    }
    const size_t cls = DevicePool::classOf(want);
    void* p = nullptr;
    {
        std::lock_guard<std::mutex> lock(pool->mutex);
        auto& list = pool->free[cls];
        if (!list.empty()) {
            p = list.back();
            list.pop_back();
            pool->cachedBytes -= cls;
        }
    }
    if (!p) p = mallocOrThrow(*pool, cls, bytes);
    return Buffer(std::shared_ptr<void>(p, [pool, cls](void* q) {
                      std::lock_guard<std::mutex> lock(pool->mutex);
                      if (!pool->open) {
                          cudaFree(q);
                          return;
                      }
                      pool->free[cls].push_back(q);
                      pool->cachedBytes += cls;
                  }),
                  bytes);
}
}  // namespace

CudaBackend::CudaBackend(int device) : m_device(device) {
    TS_CUDA_CHECK(cudaSetDevice(device));
    TS_CUDA_CHECK(cudaGetDeviceProperties(&m_props, device));
    TS_CUDA_CHECK(cudaFree(nullptr));  // the context exists from here on: what it takes is not ours to plan
    checkKernelImage();
    openMemoryAccounting();
    // TS_CUDA_SM_LIMITS: a GB10 SM's shared memory and threads per SM. Before anything is created, so that a bad
    // name fails with nothing to release.
    openSmLimits();
    // A constructor that throws runs no destructor: from here on a failure hands the process-wide limits back.
    try {
        TS_CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
        int leastPriority = 0, greatestPriority = 0;
        TS_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&leastPriority, &greatestPriority));
        TS_CUDA_CHECK(cudaStreamCreateWithPriority(&m_side, cudaStreamNonBlocking, greatestPriority));
        openSmPartition(greatestPriority);  // TS_CUDA_SMS: both streams moved into a green context
        TS_CUDA_CHECK(cudaEventCreateWithFlags(&m_sideFork, cudaEventDisableTiming));
        TS_CUDA_CHECK(cudaEventCreateWithFlags(&m_sideJoin, cudaEventDisableTiming));
        TS_CUDA_CHECK(cublasCreate(&m_cublas));
        TS_CUDA_CHECK(cublasSetStream(m_cublas, m_stream));
        // On an SM partition (openSmPartition) cuBLAS plans for its SMs too, not the whole device's.
        if (m_partitionOf) TS_CUDA_CHECK(cublasSetSmCountTarget(m_cublas, m_props.multiProcessorCount));
        // Keep fp32 GEMMs in true fp32 (no TF32): the CPU backend is the reference.
        TS_CUDA_CHECK(cublasSetMathMode(m_cublas, CUBLAS_DEFAULT_MATH));
        // A workspace of our own: cuBLAS then allocates nothing per call, which graph capture needs.
        constexpr size_t kCublasWorkspace = size_t(32) << 20;
        TS_CUDA_CHECK(cudaMalloc(&m_cublasWorkspace, kCublasWorkspace));
        TS_CUDA_CHECK(cublasSetWorkspace(m_cublas, m_cublasWorkspace, kCublasWorkspace));
        m_pool = std::make_shared<DevicePool>();
        m_pool->device = device;
        m_pool->stream = m_stream;
        m_scratch.resize(kScratchCount);
        // What the lines above took (streams, the cuBLAS handle and workspace): ours, added back when the start
        // is taken again from a later reading (rebaseDeviceMemory).
        m_ownSinceOpen = std::max<int64_t>(0, m_freeAtOpen - freeBytesNow());
    } catch (...) {
        closeSmLimits();
        throw;
    }
}

CudaBackend::~CudaBackend() {
    if (m_side) cudaStreamSynchronize(m_side);
    if (m_stream) cudaStreamSynchronize(m_stream);
    m_graph.reset();  // graph execs and arenas, before the pool closes
    m_exl3.reset();  // its buffers go back to the pool below, its events before the stream goes
    m_uploadRing.reset();  // pinned slots and events, before the stream goes
    m_aside = AsideResources{};
    m_asideHeld.clear();
    m_denseMoe.clear();
    m_scratch.clear();
    m_weights.clear();
    m_trellis.clear();
    if (m_pool) {
        // Closed under the lock, so a Buffer released on another thread meanwhile is either in the
        // free list released here or freed directly by its deleter, never left in a dead list.
        {
            std::lock_guard<std::mutex> lock(m_pool->mutex);
            m_pool->open = false;  // Buffers that outlive the backend free their memory directly
        }
        m_pool->releaseCached();
    }
    if (m_cublas) cublasDestroy(m_cublas);
    if (m_cublasWorkspace) cudaFree(m_cublasWorkspace);
    if (m_sideFork) cudaEventDestroy(m_sideFork);
    if (m_sideJoin) cudaEventDestroy(m_sideJoin);
    if (m_side) cudaStreamDestroy(m_side);
    if (m_stream) cudaStreamDestroy(m_stream);
    closeSmPartition();
    closeSmLimits();
}

cudaStream_t CudaBackend::forkSide() {
    TS_CHECK(!m_asideOpen, "side work forked inside an aside (Backend::beginAside): not supported");
    TS_CUDA_CHECK(cudaEventRecord(m_sideFork, m_stream));
    TS_CUDA_CHECK(cudaStreamWaitEvent(m_side, m_sideFork, 0));
    return m_side;
}

void CudaBackend::sideIssued() {
    TS_CUDA_CHECK(cudaEventRecord(m_sideJoin, m_side));
    m_sidePending = true;
}

void CudaBackend::joinSide() {
    if (m_asideOpen) return;  // m_stream is the side stream itself then: nothing to wait for
    if (m_sidePending) {
        m_sidePending = false;
        TS_CUDA_CHECK(cudaStreamWaitEvent(m_stream, m_sideJoin, 0));
    }
    m_asideHeld.clear();  // the main stream's later work is ordered after every aside's: their memory may go
}

Buffer CudaBackend::alloc(size_t bytes) {
    Buffer b = allocUninit(bytes);
    // The zero fill is an op of its own in a graph region (captured with the ops around it).
    GraphOp op(*this, true, "alloc", {gk(b.bytes()), gk(int64_t(bytes))});
    if (!op.skip()) TS_CUDA_CHECK(cudaMemsetAsync(b.bytes(), 0, bytes == 0 ? 1 : bytes, m_stream));
    return b;
}

// No memset: the caller's first op overwrites every element (Backend::allocUninit's contract).
Buffer CudaBackend::allocUninit(size_t bytes) {
    Buffer b;
    if (graphAlloc(bytes, b)) return b;
    b = deviceAlloc(m_pool, bytes);
    graphKeep(b);
    if (m_asideOpen) m_asideHeld.push_back(b);  // see m_asideHeld
    return b;
}

Buffer CudaBackend::upload(const void* host, size_t bytes) {
    GraphOp op(*this, false, "upload", {});
    checkNotCapturing("upload");
    joinSide();
    Buffer b = deviceAlloc(m_pool, bytes);
    if (m_asideOpen) m_asideHeld.push_back(b);
    copyToDevice(b.bytes(), host, bytes);  // through pinned memory (cuda_memory.cu says why); synchronous
    return b;
}

void CudaBackend::download(const Buffer& src, void* host, size_t bytes, size_t offset) {
    GraphOp op(*this, false, "download", {});
    checkNotCapturing("download");
    joinSide();
    TS_CHECK(offset + bytes <= src.size(), "download out of range");
    if (bytes) TS_CUDA_CHECK(cudaMemcpyAsync(host, src.bytes() + offset, bytes, cudaMemcpyDeviceToHost, m_stream));
    TS_CUDA_CHECK(cudaStreamSynchronize(m_stream));
}

void CudaBackend::copy(const Buffer& src, size_t srcOffset, const Buffer& dst, size_t dstOffset, size_t bytes) {
    GraphOp op(*this, true, "copy", {gk(src.bytes()), gk(int64_t(srcOffset)), gk(dst.bytes()), gk(int64_t(dstOffset)),
                                     gk(int64_t(bytes))});
    if (op.skip()) return;
    TS_CHECK(srcOffset + bytes <= src.size() && dstOffset + bytes <= dst.size(), "copy out of range");
    if (bytes)
        TS_CUDA_CHECK(cudaMemcpyAsync(dst.bytes() + dstOffset, src.bytes() + srcOffset, bytes,
                                      cudaMemcpyDeviceToDevice, m_stream));
}

void CudaBackend::synchronize() {
    GraphOp op(*this, false, "synchronize", {});
    checkNotCapturing("synchronize");
    joinSide();
    TS_CUDA_CHECK(cudaStreamSynchronize(m_stream));
}

namespace {
// Backend::trapDevice's kernel: one thread stops the GPU the way a failed device assert does.
__global__ void trapKernel() { __trap(); }
}  // namespace

bool CudaBackend::trapDevice() {
    // On a stream of its own, not m_stream: the call may come while a decode step is being captured into a graph
    // (the trap must run, not be recorded), and it must not wait for the step's queued work either. What it leaves
    // behind is the process's whole context lost, like any sticky error: every later call on any stream fails.
    cudaStream_t s = nullptr;
    TS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cuda::launchPlain(trapKernel, dim3(1), dim3(1), 0, s);
    const cudaError_t e = cudaStreamSynchronize(s);
    (void)cudaStreamDestroy(s);  // fails too on the lost context; nothing to do about it
    if (e != cudaSuccess) cuda::throwCuda(e, "cudaStreamSynchronize after the trap (TS_FAULT_OP)", __FILE__, __LINE__);
    return true;  // the trap did not stop the device: FaultBackend says so
}

void CudaBackend::releaseWeights() {
    // Queued kernels may still read the weights, and launched graphs hold their addresses: wait, then drop both.
    // After a sticky error (the context lost: Engine::deviceFailure) nothing queued runs again and every wait
    // fails; the memory is let go all the same, without the wait — this runs in the model's destructor on the way
    // out of a server whose GPU failed, where a throw would end the process in std::terminate instead of exit 3.
    bool lost = false;
    try {
        synchronize();
    } catch (const Error& e) {
        if (e.kind() != ErrorKind::DeviceLost) throw;
        lost = true;
    }
    dropGraphs(lost);
    m_weights.clear();
    m_trellis.clear();
    m_exl3.reset();  // its per-layer expert tables point into m_trellis
    m_aside.exl3.reset();
    m_denseMoe.clear();  // likewise, into m_weights
    // The freed uploads and the previous user's step buffers sit in the pool's free lists: give them
    // back, so cudaMemGetInfo (serve's KV budget after the self-test) counts only live memory.
    m_pool->releaseCached();
}

void CudaBackend::preloadWeight(const WeightView& w) {
    if (w.packed) {
        if (w.packed->trellis()) deviceTrellis(*w.packed);
    } else if (w.data) {
        deviceWeight(w);
    }
}

const void* CudaBackend::deviceWeight(const WeightView& w) {
    TS_CHECK(!w.packed, "deviceWeight: packed view");
    TS_CHECK(w.dtype == DType::BF16 || w.dtype == DType::F16 || w.dtype == DType::F32,
             "deviceWeight: weights must be BF16, F16 or F32");
    const auto key = std::make_tuple(w.data, w.rows, w.cols, int(w.dtype));
    auto it = m_weights.find(key);
    if (it == m_weights.end()) {
        const size_t bytes = size_t(w.rows) * size_t(w.cols) * dtypeSize(w.dtype);
        it = m_weights.emplace(key, upload(w.data, bytes)).first;
    }
    return it->second.bytes();
}

const CudaBackend::DeviceTrellis& CudaBackend::deviceTrellis(const PackedLinear& p) {
    auto it = m_trellis.find(&p);
    if (it != m_trellis.end()) return it->second.view;
    const TrellisView* t = p.trellis();
    TS_CHECK(t != nullptr, "deviceTrellis: not an EXL3 linear");
    // One allocation: trellis, then suh, svh, bias (fp32, 256-byte aligned sections).
    auto align = [](size_t v) { return (v + 255) & ~size_t(255); };
    const size_t tb = align(t->trellisBytes()), sb = align(size_t(t->k) * 4), vb = align(size_t(t->n) * 4);
    const size_t bb = t->bias ? align(size_t(t->n) * 4) : 0;
    std::vector<uint8_t> host(tb + sb + vb + bb, 0);
    std::memcpy(host.data(), t->trellis, t->trellisBytes());
    std::memcpy(host.data() + tb, t->suh, size_t(t->k) * 4);
    std::memcpy(host.data() + tb + sb, t->svh, size_t(t->n) * 4);
    if (t->bias) std::memcpy(host.data() + tb + sb + vb, t->bias, size_t(t->n) * 4);
    TrellisEntry e;
    e.mem = upload(host.data(), host.size());
    uint8_t* base = e.mem.bytes();
    e.view.trellis = reinterpret_cast<const uint16_t*>(base);
    e.view.suh = reinterpret_cast<const float*>(base + tb);
    e.view.svh = reinterpret_cast<const float*>(base + tb + sb);
    e.view.bias = t->bias ? reinterpret_cast<const float*>(base + tb + sb + vb) : nullptr;
    e.view.k = t->k;
    e.view.n = t->n;
    e.view.bits = t->bits;
    e.view.codebook = t->codebook;
    return m_trellis.emplace(&p, std::move(e)).first->second.view;
}

void* CudaBackend::scratch(ScratchSlot slot, size_t bytes) {
    Buffer& b = m_scratch[size_t(slot)];
    if (b.empty() || b.size() < bytes) {
        size_t grown = b.empty() ? 4096 : b.size();
        while (grown < bytes) grown *= 2;
        // The old buffer may still be read by enqueued kernels (and by recorded graphs: then it is
        // kept until they are dropped): wait before letting it go.
        if (!b.empty() && !graphRetire(b)) synchronize();
        b = deviceAlloc(m_pool, grown);
    }
    return b.bytes();
}

Buffer& CudaBackend::zeroedScratch(Buffer& b, size_t bytes) {
    if (b.empty() || b.size() < bytes) {
        size_t grown = b.empty() ? 4096 : b.size();
        while (grown < bytes) grown *= 2;
        // Enqueued kernels (and recorded graphs: then it is kept until they are dropped) may still
        // use the old one.
        if (!b.empty() && !graphRetire(b)) synchronize();
        b = alloc(grown);  // zero-filled: arrival counters start at 0
    }
    return b;
}

const int32_t* CudaBackend::uploadInts(ScratchSlot slot, const int32_t* host, int64_t n) {
    auto* d = static_cast<int32_t*>(scratch(slot, size_t(n) * 4));
    if (n > 0) TS_CUDA_CHECK(cudaMemcpyAsync(d, host, size_t(n) * 4, cudaMemcpyHostToDevice, m_stream));
    return d;
}

CudaBackend::DeviceQueries CudaBackend::deviceQueries(const SeqRows* seqs, int64_t nSeqs, int64_t T) {
    int64_t tables = 0;
    for (int64_t s = 0; s < nSeqs; ++s) tables += seqs[s].pages.numBlocks;
    TS_CHECK(3 * T + tables <= int64_t(0x7fffffff), "batched op: too many queries or page-table entries");
    std::vector<int32_t> h(size_t(3 * T + tables));
    int32_t* qPos = h.data();
    int32_t* qTable = qPos + T;
    int32_t* qBlocks = qTable + T;
    int32_t* blocks = qBlocks + T;
    int64_t t = 0, off = 0;
    for (int64_t s = 0; s < nSeqs; ++s) {
        const SeqRows& q = seqs[s];
        TS_CHECK(q.pos0 + q.rows <= int64_t(0x7fffffff) && q.pages.numBlocks <= int64_t(0x7fffffff),
                 "batched op: positions beyond int32");
        for (int64_t r = 0; r < q.rows; ++r, ++t) {
            qPos[t] = int32_t(q.pos0 + r);
            qTable[t] = int32_t(off);
            qBlocks[t] = int32_t(q.pages.numBlocks);
        }
        if (q.pages.numBlocks > 0) std::copy(q.pages.blocks, q.pages.blocks + q.pages.numBlocks, blocks + off);
        off += q.pages.numBlocks;
    }
    TS_CHECK(t == T, "batched op: the sequences' rows do not add up to the call's rows");
    const int32_t* d = uploadInts(kScratchPages, h.data(), int64_t(h.size()));
    return DeviceQueries{d, d + T, d + 2 * T, d + 3 * T};
}

const float* CudaBackend::uploadFloats(ScratchSlot slot, const float* host, int64_t n) {
    auto* d = static_cast<float*>(scratch(slot, size_t(n) * 4));
    if (n > 0) TS_CUDA_CHECK(cudaMemcpyAsync(d, host, size_t(n) * 4, cudaMemcpyHostToDevice, m_stream));
    return d;
}

int cudaDeviceCountImpl() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky "no driver / no device" error
        return 0;
    }
    return n;
}

std::unique_ptr<Backend> makeCudaBackendImpl(int device) { return std::make_unique<CudaBackend>(device); }

}  // namespace ts
