// PLACEHOLDER (being written): cuda_attention. Every op throws until its kernel lands.
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"

namespace ts {

void CudaBackend::mlaCacheWrite(const Buffer& /*c*/, int64_t /*T*/, int64_t /*R*/, KvCacheDtype /*dt*/, const Buffer& /*cache*/, const PageTable& /*pages*/, int64_t /*pos0*/) {
    fail(ErrorKind::Unsupported, "cuda: mlaCacheWrite is not implemented yet");
}

void CudaBackend::mlaAbsorbQ(const Buffer& /*q*/, int64_t /*T*/, int64_t /*H*/, int64_t /*dn*/, int64_t /*dv*/, const WeightView& /*kvb*/, const Buffer& /*qLat*/) {
    fail(ErrorKind::Unsupported, "cuda: mlaAbsorbQ is not implemented yet");
}

void CudaBackend::mlaSparseAttention(const Buffer& /*qLat*/, int64_t /*T*/, int64_t /*H*/, int64_t /*R*/, const Buffer& /*cache*/, KvCacheDtype /*dt*/, const PageTable& /*pages*/, const Buffer& /*idx*/, int64_t /*width*/, float /*scale*/, const Buffer& /*oLat*/) {
    fail(ErrorKind::Unsupported, "cuda: mlaSparseAttention is not implemented yet");
}

void CudaBackend::mlaUpV(const Buffer& /*oLat*/, int64_t /*T*/, int64_t /*H*/, int64_t /*dn*/, int64_t /*dv*/, const WeightView& /*kvb*/, const Buffer& /*o*/) {
    fail(ErrorKind::Unsupported, "cuda: mlaUpV is not implemented yet");
}

void CudaBackend::indexerCacheWrite(const Buffer& /*k*/, const Buffer& /*gate*/, int64_t /*T*/, int64_t /*D*/, int64_t /*kp*/, const Buffer& /*ape*/, KvCacheDtype /*dt*/, const Buffer& /*tail*/, const Buffer& /*poolStore*/, const PageTable& /*pages*/, int64_t /*pos0*/) {
    fail(ErrorKind::Unsupported, "cuda: indexerCacheWrite is not implemented yet");
}

void CudaBackend::indexerSelect(const Buffer& /*q*/, const Buffer& /*w*/, int64_t /*T*/, int64_t /*H*/, int64_t /*D*/, int64_t /*kp*/, int64_t /*topk*/, KvCacheDtype /*dt*/, const Buffer& /*poolStore*/, const PageTable& /*pages*/, int64_t /*pos0*/, const Buffer& /*idx*/, IndexerStats* /*stats*/) {
    fail(ErrorKind::Unsupported, "cuda: indexerSelect is not implemented yet");
}

}  // namespace ts
