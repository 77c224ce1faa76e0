// Backend selection by name (--backend auto|cpu|cuda). The CUDA half exists only in builds with
// TS_HAVE_CUDA (kernels/cuda); "auto" falls back to the CPU when no device is visible. Also the CUDA
// kernels' run-time switches of exl3_tune.h (no-ops without CUDA).
#include <string>

#include "backend.h"
#include "core/error.h"
#include "core/log.h"
#include "exl3_tune.h"
#include "fault_backend.h"

namespace ts {

#ifdef TS_HAVE_CUDA
int cudaDeviceCountImpl();
std::unique_ptr<Backend> makeCudaBackendImpl(int device);
bool cudaBackendBuilt() { return true; }
int cudaDeviceCount() { return cudaDeviceCountImpl(); }
namespace exl3cuda {  // cuda_exl3.cu
int setMoeLaunches(int n);
int setSmemLimitKiB(int kib);
bool prefillJobs(int bits);
int lastMoeLaunches();
int moeLaunches();
int moeJobRows();
int setMoeJobRows(int rows);
bool moeDeviceRouting();
bool tuneStagedDecode();
bool tuneRegisterRing();
bool tunePdlOff();
bool tuneOneStageSlices();
int tuneFlags();
int tuneSliceTiles();
void setTrace(unsigned long long* words, int64_t units);
int setPrefillPath(int on);
bool prefillPath();
int setPrefillMoeMinRows(int rows);
int prefillMoeMinRows();
int setPrefillLinearMinRows(int rows);
int prefillLinearMinRows();
int setPrefillCublasRows(int rows);
int prefillCublasRows();
int64_t prefillCublasCalls();
int setPrefillBudgetMiB(int mib);
int setPrefillMaxSplit(int splits);
int prefillLastSplits();
}  // namespace exl3cuda
namespace mhccuda {  // cuda_mhc_kda.cu
int setFusedPre(int on);
bool fusedPre();
int setSideSinkhorn(int mode);
int sideSinkhorn();
}  // namespace mhccuda
namespace asidecuda {  // cuda_aside.cu
int setMode(int mode);
int mode();
int64_t forks();
}  // namespace asidecuda
namespace memcuda {  // cuda_memory.cu
int setRing(int on);
bool ring();
}  // namespace memcuda
namespace mlatc {  // cuda_attention_tc.cu
int setTensorCores(int on);
bool tensorCores();
int setChunkTiles(int tiles);
bool fitsDevice();
}  // namespace mlatc
namespace idxsel {  // cuda_indexer_select.cu
int setFastSelect(int on);
bool fastSelect();
int64_t fp8ConversionMismatches();
}  // namespace idxsel
namespace mathcuda {  // cuda_math.cu
int setOneTokenMode(int mode);
int oneTokenMode();
int setMultiTokenMode(int mode);
int multiTokenMode();
int setManyTokenMode(int mode);
int manyTokenMode();
int64_t cublasMinTokens();
}  // namespace mathcuda
namespace kdacuda {  // cuda_kda_chunk.cu
int64_t setChunkMinTokens(int64_t t);
int64_t chunkMinTokensNow();
}  // namespace kdacuda
int64_t kdaSetChunkMinTokens(int64_t t) { return kdacuda::setChunkMinTokens(t); }
int64_t kdaChunkMinTokens() { return kdacuda::chunkMinTokensNow(); }
int mhcSetFusedPre(int on) { return mhccuda::setFusedPre(on); }
bool mhcFusedPre() { return mhccuda::fusedPre(); }
int mhcSetSideSinkhorn(int mode) { return mhccuda::setSideSinkhorn(mode); }
int mhcSideSinkhorn() { return mhccuda::sideSinkhorn(); }
int asideSetMode(int mode) { return asidecuda::setMode(mode); }
int asideMode() { return asidecuda::mode(); }
int64_t asideForks() { return asidecuda::forks(); }
int mlaSetTensorCores(int on) { return mlatc::setTensorCores(on); }
bool mlaTensorCores() { return mlatc::tensorCores(); }
bool mlaTensorCoresFit() { return mlatc::fitsDevice(); }
int mlaSetChunkTiles(int tiles) { return mlatc::setChunkTiles(tiles); }
int indexerSetFastSelect(int on) { return idxsel::setFastSelect(on); }
bool indexerFastSelect() { return idxsel::fastSelect(); }
int64_t indexerFp8ConversionMismatches() { return idxsel::fp8ConversionMismatches(); }
int gemvSetOneTokenMode(int mode) { return mathcuda::setOneTokenMode(mode); }
int gemvOneTokenMode() { return mathcuda::oneTokenMode(); }
int gemvSetMultiTokenMode(int mode) { return mathcuda::setMultiTokenMode(mode); }
int gemvMultiTokenMode() { return mathcuda::multiTokenMode(); }
int gemmSetMode(int mode) { return mathcuda::setManyTokenMode(mode); }
int gemmMode() { return mathcuda::manyTokenMode(); }
int64_t gemmCublasMinTokens() { return mathcuda::cublasMinTokens(); }
int uploadSetRing(int on) { return memcuda::setRing(on); }
bool uploadRing() { return memcuda::ring(); }
int exl3MoeSetLaunches(int n) { return exl3cuda::setMoeLaunches(n); }
int exl3SetMoeJobRows(int rows) { return exl3cuda::setMoeJobRows(rows); }
int exl3SetSmemLimitKiB(int kib) { return exl3cuda::setSmemLimitKiB(kib); }
bool exl3PrefillJobs(int bits) { return exl3cuda::prefillJobs(bits); }
int exl3SetPrefillPath(int on) { return exl3cuda::setPrefillPath(on); }
bool exl3PrefillPath() { return exl3cuda::prefillPath(); }
int exl3SetPrefillMoeMinRows(int rows) { return exl3cuda::setPrefillMoeMinRows(rows); }
int exl3PrefillMoeMinRows() { return exl3cuda::prefillMoeMinRows(); }
int exl3SetPrefillLinearMinRows(int rows) { return exl3cuda::setPrefillLinearMinRows(rows); }
int exl3PrefillLinearMinRows() { return exl3cuda::prefillLinearMinRows(); }
int exl3SetPrefillCublasRows(int rows) { return exl3cuda::setPrefillCublasRows(rows); }
int exl3PrefillCublasRows() { return exl3cuda::prefillCublasRows(); }
int64_t exl3PrefillCublasCalls() { return exl3cuda::prefillCublasCalls(); }
int exl3SetPrefillBudgetMiB(int mib) { return exl3cuda::setPrefillBudgetMiB(mib); }
int exl3SetPrefillMaxSplit(int splits) { return exl3cuda::setPrefillMaxSplit(splits); }
int exl3PrefillLastSplits() { return exl3cuda::prefillLastSplits(); }
void exl3SetTrace(unsigned long long* deviceWords, int64_t units) { exl3cuda::setTrace(deviceWords, units); }
int exl3MoeLastLaunches() { return exl3cuda::lastMoeLaunches(); }
int exl3MoeLaunches() { return exl3cuda::moeLaunches(); }
bool moeDeviceRouting() { return exl3cuda::moeDeviceRouting(); }
const char* exl3DecodeUnit() {
    static const std::string unit = std::string(exl3cuda::tuneStagedDecode()   ? "staged"
                                                : exl3cuda::tuneRegisterRing() ? "streaming, register ring"
                                                                               : "streaming, shared-memory ring") +
                                    (exl3cuda::tuneOneStageSlices() ? ", one-stage slices" : "") +
                                    (exl3cuda::tunePdlOff() ? ", launched without PDL" : "") +
                                    ((exl3cuda::tuneFlags() & 128) ? ", split-K bounds as before" : "") +
                                    (exl3cuda::moeJobRows() != 8
                                         ? ", MoE jobs of " + std::to_string(exl3cuda::moeJobRows()) + " rows"
                                         : std::string()) +
                                    (exl3cuda::tuneSliceTiles() > 0
                                         ? ", slices of " + std::to_string(exl3cuda::tuneSliceTiles()) + " k-tiles"
                                         : std::string());
    return unit.c_str();
}
#else
bool cudaBackendBuilt() { return false; }
int cudaDeviceCount() { return 0; }
int exl3MoeSetLaunches(int) { return 0; }
int exl3SetMoeJobRows(int) { return -1; }
int exl3SetSmemLimitKiB(int) { return 0; }
bool exl3PrefillJobs(int) { return true; }
int exl3SetPrefillPath(int) { return -1; }
bool exl3PrefillPath() { return false; }
int exl3SetPrefillMoeMinRows(int) { return -1; }
int exl3PrefillMoeMinRows() { return 0; }
int exl3SetPrefillLinearMinRows(int) { return -1; }
int exl3PrefillLinearMinRows() { return 0; }
int exl3SetPrefillCublasRows(int) { return -1; }
int exl3PrefillCublasRows() { return 0; }
int64_t exl3PrefillCublasCalls() { return 0; }
int exl3SetPrefillBudgetMiB(int) { return 0; }
int exl3SetPrefillMaxSplit(int) { return -1; }
int exl3PrefillLastSplits() { return 0; }
void exl3SetTrace(unsigned long long*, int64_t) {}
int exl3MoeLastLaunches() { return 0; }
int exl3MoeLaunches() { return 0; }
bool moeDeviceRouting() { return false; }
const char* exl3DecodeUnit() { return "none"; }
int64_t kdaSetChunkMinTokens(int64_t) { return -1; }
int64_t kdaChunkMinTokens() { return 0; }
int mhcSetFusedPre(int) { return -1; }
bool mhcFusedPre() { return false; }
int mhcSetSideSinkhorn(int) { return -1; }
int mhcSideSinkhorn() { return 0; }
int asideSetMode(int) { return -1; }
int asideMode() { return 0; }
int64_t asideForks() { return 0; }
int mlaSetTensorCores(int) { return -1; }
bool mlaTensorCores() { return false; }
bool mlaTensorCoresFit() { return false; }
int mlaSetChunkTiles(int) { return 0; }
int indexerSetFastSelect(int) { return -1; }
bool indexerFastSelect() { return false; }
int64_t indexerFp8ConversionMismatches() { return -1; }
int gemvSetOneTokenMode(int) { return -1; }
int gemvOneTokenMode() { return -1; }
int gemvSetMultiTokenMode(int) { return -1; }
int gemvMultiTokenMode() { return -1; }
int gemmSetMode(int) { return -1; }
int gemmMode() { return -1; }
int64_t gemmCublasMinTokens() { return 0; }
int uploadSetRing(int) { return -1; }
bool uploadRing() { return false; }
#endif

void checkBackendName(const std::string& name) {
    if (name != "auto" && name != "cpu" && name != "cuda")
        fail(ErrorKind::InvalidArgument, "--backend must be auto, cpu or cuda, got '" + name + "'");
    checkFaultInjection();  // a malformed TS_FAULT_OP: refused up front too, before a device is opened
    if (name != "cuda") return;
#ifdef TS_HAVE_CUDA
    if (cudaDeviceCount() == 0) fail(ErrorKind::Unsupported, "--backend cuda: no CUDA device is visible to this process");
#else
    fail(ErrorKind::Unsupported, "--backend cuda: this build has no CUDA backend (configure with nvcc present "
                                 "or -DTWINSPARK_CUDA=ON)");
#endif
}

namespace {

std::unique_ptr<Backend> openBackend(const std::string& name) {
    checkBackendName(name);
    if (name == "cpu") return makeCpuBackend();
#ifdef TS_HAVE_CUDA
    if (cudaDeviceCount() > 0) {
        if (name == "cuda") return makeCudaBackendImpl(0);
        try {
            return makeCudaBackendImpl(0);
        } catch (const Error& e) {
            // A setting the user got wrong (TS_CUDA_SM_LIMITS naming no known SM) is an error under "auto" too:
            // falling back to the CPU would quietly run something else than was asked for.
            if (e.kind() == ErrorKind::InvalidArgument) throw;
            // "auto": a visible device that cannot be opened (busy, exclusive mode, out of memory) is not
            // a reason to refuse to run; say so and use the CPU.
            logFormat(LogLevel::Warning, "warning: --backend auto: the CUDA device could not be opened (%s); using the CPU",
                      e.what());
        }
    }
#endif
    return makeCpuBackend();  // "auto" without a (usable) device
}

}  // namespace

std::unique_ptr<Backend> makeBackend(const std::string& name) {
    return withFaultInjection(openBackend(name));  // TS_FAULT_OP (tests): kernels/fault_backend.h
}

}  // namespace ts
