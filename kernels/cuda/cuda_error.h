// How CUDA errors become ts::Error (defined in cuda_backend.cu). Host-only declarations, so host C++ (the unit
// test tests/kernels/test_cuda_errors.cpp) can include them without the device helpers of cuda_common.cuh.
#pragma once

#include <driver_types.h>

namespace ts::cuda {

// Throws ts::Error(Internal) "CUDA: <what> failed: <detail> (<file>:<line>)".
[[noreturn]] void throwCuda(const char* what, const char* detail, const char* file, int line);
// The same for a runtime error code: a sticky one (isStickyError) is thrown as ErrorKind::DeviceLost, the rest as
// Internal.
[[noreturn]] void throwCuda(cudaError_t e, const char* what, const char* file, int line);

// The errors after which this process's CUDA context is unusable: driver_types.h says of each that "any further
// CUDA work will return the same error" and the process "must be terminated and relaunched" (an illegal address,
// a trap or assert in a kernel, a launch failure, ...), plus the uncorrectable ECC and NVLink errors, after which
// nothing the GPU computed can be trusted. The engine stops taking requests on them (Engine::deviceFailure).
bool isStickyError(cudaError_t e);

}  // namespace ts::cuda
