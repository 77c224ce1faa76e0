// The CUDA backend's memory, host side: what it reports as its device's memory (Backend::deviceMemory), which the
// KV budget is planned from (engine/runtime/device_budget.h), and how bytes get from the host to the device
// (upload: the weights, at load). Host code only.
//
// A discrete GPU: cudaMemGetInfo as it is. A GPU that shares the system's memory — the GB10 of a DGX Spark, the
// product's target — is different: there cudaMemGetInfo's free is the host's MemFree, so the page cache (clean,
// reclaimable, and most of the machine right after the checkpoint was synced or a previous server ran) counts as
// used, and a budget planned from it comes out tens of GiB short or negative (the recipe measured MemFree ~2 GiB
// against MemAvailable ~117 GiB; NVIDIA's DGX Spark known issues say the same). On such a device free is the
// system's MemAvailable instead (core/host_memory.h), capped by the device total.
//
// Which devices count as unified: cudaDeviceProp::integrated (the GB10's GPU is an iGPU), or — should a driver
// not say so — a device whose free memory tracks the host's MemFree within 2 GiB while its total is within 5 %
// of MemTotal (a discrete card's never do both: its memory is not the host's). TS_UNIFIED_MEMORY=1 / 0 forces
// either answer (for a machine the rule gets wrong, and for trying the unified path on a discrete GPU).
//
// Uploads go through a ring of two pinned 16 MiB slots: the host copies a piece of the source into one slot
// while the DMA engine moves the other to the device. A weight's source is the mapped checkpoint file, and on a
// GB10 with 64 KiB pages the driver's own copy from a file-backed mapping wedged (the recipe's cold-load notes,
// measured on its 6.17 64k kernel: it stages every tensor into anonymous memory first); from pinned memory the
// DMA never touches the mapping. Elsewhere it costs nothing: on the H200, 1 GiB went at 9.69 / 9.91 GB/s from
// anonymous memory / a mapped file against 9.46 / 9.08 GB/s for the driver's own staging of pageable memory
// (bench-device --what upload; docs/PERFORMANCE.md, "Loading and device memory").
// Test: tests/unit/test_host_memory.cpp (the meminfo parsing, looksUnified); the budget arithmetic in
// tests/unit/test_device_budget.cpp; uploads: every self-test case and model row (they upload their inputs and
// weights). Not run on a GB10 (none here): on the H200 the discrete path runs.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/env_switch.h"
#include "core/error.h"
#include "core/log.h"
#include "core/host_memory.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"

namespace ts {

void CudaBackend::openMemoryAccounting() {
    size_t freeB = 0, totalB = 0;
    TS_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
    const auto host = readHostMemory();
    m_unified = m_props.integrated != 0 || (host && looksUnified(int64_t(freeB), int64_t(totalB), *host));
    m_unified = envSwitch("TS_UNIFIED_MEMORY", m_unified);
    if (m_unified && !host)
        logFormat(LogLevel::Warning, "warning: %s shares the system's memory but /proc/meminfo cannot be read: its free "
                                     "memory is taken from cudaMemGetInfo, which counts the page cache as used", m_props.name);
    m_freeAtOpen = freeBytesNow();
}

int64_t CudaBackend::freeBytesNow(int64_t* totalBytes) const {
    size_t freeB = 0, totalB = 0;
    TS_CUDA_CHECK(cudaSetDevice(m_device));
    TS_CUDA_CHECK(cudaMemGetInfo(&freeB, &totalB));
    if (totalBytes) *totalBytes = int64_t(totalB);
    if (!m_unified) return int64_t(freeB);
    const auto host = readHostMemory();
    if (!host) return int64_t(freeB);
    return std::min<int64_t>(host->availableBytes, int64_t(totalB));
}

bool CudaBackend::deviceMemory(DeviceMemory* out) const {
    out->freeBytes = freeBytesNow(&out->totalBytes);
    out->freeAtOpenBytes = m_freeAtOpen;
    out->unified = m_unified;
    return true;
}

void CudaBackend::rebaseDeviceMemory(int64_t freeNowBytes) {
    m_freeAtOpen = freeNowBytes + m_ownSinceOpen;
}

namespace {
// The build's smallest kernel: a device that has no image of it has none of the others (one fat binary).
__global__ void imageProbeKernel() {}

// "90a,120a,121a" (the build's TWINSPARK_CUDA_ARCHS) → "sm_90a, sm_120a, sm_121a".
std::string builtArchitectures() {
    std::string out, a = TS_CUDA_ARCHS;
    for (size_t i = 0; i <= a.size();) {
        const size_t j = std::min(a.find(',', i), a.size());
        if (j > i) out += (out.empty() ? "sm_" : ", sm_") + a.substr(i, j - i);
        i = j + 1;
    }
    return out;
}
}  // namespace

void CudaBackend::checkKernelImage() const {
    cudaFuncAttributes attr{};
    const cudaError_t e = cudaFuncGetAttributes(&attr, imageProbeKernel);
    if (e == cudaSuccess) return;
    cudaGetLastError();  // leave no error behind for the next CUDA call
    char msg[768];
    std::snprintf(msg, sizeof msg,
                  "the CUDA device '%s' (compute capability %d.%d) cannot run this build's kernels (%s): they are built "
                  "for %s (TWINSPARK_CUDA_ARCHS; an 'a' target runs only on its own architecture: sm_90a H100/H200, "
                  "sm_120a RTX 50-series / RTX PRO Blackwell, sm_121a GB10); use --backend cpu",
                  m_props.name, m_props.major, m_props.minor, cudaGetErrorString(e), builtArchitectures().c_str());
    fail(ErrorKind::Unsupported, msg);
}

struct CudaBackend::UploadRing {
    static constexpr size_t kSlotBytes = size_t(16) << 20;
    void* slot[2] = {nullptr, nullptr};
    cudaEvent_t done[2] = {nullptr, nullptr};  // the slot's last DMA, recorded on the backend's stream
    bool pending[2] = {false, false};
};

void CudaBackend::UploadRingDeleter::operator()(UploadRing* r) const {
    for (int s = 0; s < 2; ++s) {
        if (r->done[s]) {
            cudaEventSynchronize(r->done[s]);
            cudaEventDestroy(r->done[s]);
        }
        if (r->slot[s]) cudaFreeHost(r->slot[s]);
    }
    delete r;
}

static OverridableSwitch g_ring("TS_UPLOAD_RING", true);
namespace memcuda {  // exl3_tune.h's uploadSetRing / uploadRing (backend_factory.cpp)
int setRing(int on) { return g_ring.set(on); }
bool ring() { return g_ring.on(); }
}  // namespace memcuda

void CudaBackend::copyToDevice(void* dst, const void* host, size_t bytes) {
    if (bytes == 0) return;
    if (!g_ring.on()) {  // A/B: cudaMemcpy's own staging of pageable memory
        TS_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, m_stream));
        TS_CUDA_CHECK(cudaStreamSynchronize(m_stream));
        return;
    }
    if (!m_uploadRing) {
        std::unique_ptr<UploadRing, UploadRingDeleter> ring(new UploadRing);
        for (int s = 0; s < 2; ++s) {
            TS_CUDA_CHECK(cudaMallocHost(&ring->slot[s], UploadRing::kSlotBytes));
            TS_CUDA_CHECK(cudaEventCreateWithFlags(&ring->done[s], cudaEventDisableTiming));
        }
        m_uploadRing = std::move(ring);
    }
    UploadRing& r = *m_uploadRing;
    auto* d = static_cast<uint8_t*>(dst);
    const auto* h = static_cast<const uint8_t*>(host);
    int s = 0;
    for (size_t off = 0; off < bytes; off += UploadRing::kSlotBytes, s ^= 1) {
        const size_t n = std::min(UploadRing::kSlotBytes, bytes - off);
        if (r.pending[s]) TS_CUDA_CHECK(cudaEventSynchronize(r.done[s]));  // its previous piece has left
        std::memcpy(r.slot[s], h + off, n);
        TS_CUDA_CHECK(cudaMemcpyAsync(d + off, r.slot[s], n, cudaMemcpyHostToDevice, m_stream));
        TS_CUDA_CHECK(cudaEventRecord(r.done[s], m_stream));
        r.pending[s] = true;
    }
    TS_CUDA_CHECK(cudaStreamSynchronize(m_stream));
    r.pending[0] = r.pending[1] = false;
}

}  // namespace ts
