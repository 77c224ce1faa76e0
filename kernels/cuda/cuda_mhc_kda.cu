// PLACEHOLDER (being written): cuda_mhc_kda. Every op throws until its kernel lands.
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"

namespace ts {

void CudaBackend::mhcPre(const Buffer& /*streams*/, int64_t /*T*/, int64_t /*D*/, const HyperConnParams& /*p*/, const Buffer& /*x*/, const Buffer& /*post*/, const Buffer& /*comb*/) {
    fail(ErrorKind::Unsupported, "cuda: mhcPre is not implemented yet");
}

void CudaBackend::mhcPost(const Buffer& /*streams*/, int64_t /*T*/, int64_t /*D*/, int /*n*/, const Buffer& /*y*/, const Buffer& /*post*/, const Buffer& /*comb*/) {
    fail(ErrorKind::Unsupported, "cuda: mhcPost is not implemented yet");
}

void CudaBackend::mhcHead(const Buffer& /*streams*/, int64_t /*T*/, int64_t /*D*/, int /*n*/, const Buffer& /*out*/) {
    fail(ErrorKind::Unsupported, "cuda: mhcHead is not implemented yet");
}

void CudaBackend::causalConvSilu(const Buffer& /*x*/, int64_t /*T*/, int64_t /*C*/, int /*K*/, const Buffer& /*w*/, const Buffer& /*convState*/, const Buffer& /*out*/) {
    fail(ErrorKind::Unsupported, "cuda: causalConvSilu is not implemented yet");
}

void CudaBackend::kdaGate(const Buffer& /*f*/, int64_t /*T*/, int64_t /*H*/, int64_t /*Dk*/, const Buffer& /*aLog*/, const Buffer& /*dtBias*/, float /*lowerBound*/) {
    fail(ErrorKind::Unsupported, "cuda: kdaGate is not implemented yet");
}

void CudaBackend::kdaRecurrent(const Buffer& /*qkv*/, int64_t /*T*/, int64_t /*H*/, int64_t /*Dk*/, const Buffer& /*g*/, const Buffer& /*betaLogits*/, const Buffer& /*state*/, const Buffer& /*out*/) {
    fail(ErrorKind::Unsupported, "cuda: kdaRecurrent is not implemented yet");
}

void CudaBackend::gatedRmsnorm(const Buffer& /*o*/, int64_t /*T*/, int64_t /*H*/, int64_t /*Dv*/, const Buffer& /*w*/, float /*eps*/, const Buffer& /*gate*/) {
    fail(ErrorKind::Unsupported, "cuda: gatedRmsnorm is not implemented yet");
}

}  // namespace ts
