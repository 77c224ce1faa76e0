// What the CUDA backend's start-up check (CudaBackend::checkKernelImage, kernels/cuda/cuda_memory.cu) relies on,
// checked on the GPU machine: under CUDA 13's lazy module loading, cudaFuncGetAttributes on a kernel of a fat
// binary that holds no image for this device reports an error (cudaErrorNoKernelImageForDevice) — at the check,
// not later at a launch. Built there for an architecture the device is not (scripts/gpu/load_memory_check.sh:
// sm_120a on the H200) it must print "no image: ..." and exit 0; built for the device's own, "image ok".
#include <cstdio>

#include <cuda_runtime.h>

__global__ void probe() {}

int main() {
    cudaFuncAttributes a{};
    const cudaError_t e = cudaFuncGetAttributes(&a, probe);
    if (e == cudaSuccess) {
        std::printf("image ok\n");
        return 0;
    }
    std::printf("no image: %s (%s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
    return e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction ? 0 : 1;
}
