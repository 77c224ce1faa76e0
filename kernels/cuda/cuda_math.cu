// PLACEHOLDER (being written): cuda_math. Every op throws until its kernel lands.
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"

namespace ts {

void CudaBackend::embedding(const int32_t* /*ids*/, int64_t /*T*/, const WeightView& /*table*/, const Buffer& /*out*/) {
    fail(ErrorKind::Unsupported, "cuda: embedding is not implemented yet");
}

void CudaBackend::linear(const Buffer& /*x*/, int64_t /*T*/, const WeightView& /*w*/, const Buffer& /*y*/) {
    fail(ErrorKind::Unsupported, "cuda: linear is not implemented yet");
}

void CudaBackend::rmsnorm(const Buffer& /*x*/, int64_t /*rows*/, int64_t /*D*/, const Buffer& /*w*/, float /*eps*/, const Buffer& /*y*/) {
    fail(ErrorKind::Unsupported, "cuda: rmsnorm is not implemented yet");
}

void CudaBackend::layernorm(const Buffer& /*x*/, int64_t /*rows*/, int64_t /*D*/, const Buffer& /*w*/, const Buffer& /*b*/, float /*eps*/, const Buffer& /*y*/) {
    fail(ErrorKind::Unsupported, "cuda: layernorm is not implemented yet");
}

void CudaBackend::swiglu(const Buffer& /*gate*/, const Buffer& /*up*/, int64_t /*T*/, int64_t /*I*/, float /*limit*/, const Buffer& /*out*/) {
    fail(ErrorKind::Unsupported, "cuda: swiglu is not implemented yet");
}

void CudaBackend::add(const Buffer& /*x*/, const Buffer& /*y*/, int64_t /*n*/) {
    fail(ErrorKind::Unsupported, "cuda: add is not implemented yet");
}

void CudaBackend::scale(const Buffer& /*x*/, int64_t /*n*/, float /*s*/) {
    fail(ErrorKind::Unsupported, "cuda: scale is not implemented yet");
}

void CudaBackend::zero(const Buffer& /*x*/) {
    fail(ErrorKind::Unsupported, "cuda: zero is not implemented yet");
}

void CudaBackend::concatColumns(const Buffer* /*parts*/, const int64_t* /*widths*/, int /*count*/, int64_t /*T*/, const Buffer& /*out*/) {
    fail(ErrorKind::Unsupported, "cuda: concatColumns is not implemented yet");
}

}  // namespace ts
