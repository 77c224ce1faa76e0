// PLACEHOLDER (being written): cuda_moe. Every op throws until its kernel lands.
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"

namespace ts {

void CudaBackend::moeRoute(const Buffer& /*x*/, int64_t /*T*/, const WeightView& /*gate*/, const Buffer& /*bias*/, int64_t /*E*/, int64_t /*topk*/, int64_t /*nGroup*/, int64_t /*topkGroup*/, bool /*normTopk*/, float /*scaling*/, int32_t* /*hostIdx*/, float* /*hostWeight*/) {
    fail(ErrorKind::Unsupported, "cuda: moeRoute is not implemented yet");
}

void CudaBackend::gatherRows(const Buffer& /*x*/, int64_t /*D*/, const int32_t* /*hostSel*/, int64_t /*n*/, const Buffer& /*rows*/) {
    fail(ErrorKind::Unsupported, "cuda: gatherRows is not implemented yet");
}

void CudaBackend::scatterAddRows(const Buffer& /*rows*/, int64_t /*D*/, const int32_t* /*hostSel*/, const float* /*hostScale*/, int64_t /*n*/, const Buffer& /*y*/) {
    fail(ErrorKind::Unsupported, "cuda: scatterAddRows is not implemented yet");
}

}  // namespace ts
