// How a CUDA error is reported (kernels/cuda/cuda_error.h, behind cuda_common.cuh's check), on the host, no GPU needed: the sticky errors —
// after which the process's context is unusable (an illegal address, a kernel trap or assert, a launch failure,
// an uncorrectable ECC error) — are thrown as ErrorKind::DeviceLost, so the engine stops taking requests and
// `serve` exits for a restart; every other error (a bad argument, out of memory, not ready) stays Internal and
// fails only the step it happened in.
#include <QtTest>

#include <string>

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "cuda/cuda_error.h"

using namespace ts;

namespace {

Error thrownFor(cudaError_t e) {
    try {
        if (e != cudaSuccess) cuda::throwCuda(e, "cudaStreamSynchronize", "file.cu", 7);
    } catch (const Error& err) {
        return err;
    }
    return Error(ErrorKind::InvalidArgument, "nothing thrown");
}

}  // namespace

class TestCudaErrors : public QObject {
    Q_OBJECT
private slots:
    void classification_data() {
        QTest::addColumn<int>("code");
        QTest::addColumn<bool>("sticky");
        QTest::newRow("illegal address") << int(cudaErrorIllegalAddress) << true;
        QTest::newRow("launch failure") << int(cudaErrorLaunchFailure) << true;
        QTest::newRow("device assert") << int(cudaErrorAssert) << true;
        QTest::newRow("illegal instruction (trap)") << int(cudaErrorIllegalInstruction) << true;
        QTest::newRow("misaligned address") << int(cudaErrorMisalignedAddress) << true;
        QTest::newRow("hardware stack error") << int(cudaErrorHardwareStackError) << true;
        QTest::newRow("launch timeout") << int(cudaErrorLaunchTimeout) << true;
        QTest::newRow("uncorrectable ECC") << int(cudaErrorECCUncorrectable) << true;
        QTest::newRow("contained") << int(cudaErrorContained) << true;
        QTest::newRow("out of memory") << int(cudaErrorMemoryAllocation) << false;
        QTest::newRow("invalid value") << int(cudaErrorInvalidValue) << false;
        QTest::newRow("not ready") << int(cudaErrorNotReady) << false;
        QTest::newRow("too many resources") << int(cudaErrorLaunchOutOfResources) << false;
        QTest::newRow("no kernel image") << int(cudaErrorNoKernelImageForDevice) << false;
    }
    void classification() {
        QFETCH(int, code);
        QFETCH(bool, sticky);
        const auto e = static_cast<cudaError_t>(code);
        QCOMPARE(cuda::isStickyError(e), sticky);
        const Error err = thrownFor(e);
        QCOMPARE(err.kind(), sticky ? ErrorKind::DeviceLost : ErrorKind::Internal);
        const std::string what = err.what();
        QVERIFY2(what.find("cudaStreamSynchronize failed: ") != std::string::npos, what.c_str());
        QVERIFY2(what.find(cudaGetErrorString(e)) != std::string::npos, what.c_str());
        QVERIFY2(what.find("file.cu:7") != std::string::npos, what.c_str());
        QCOMPARE(what.find("GPU context is lost") != std::string::npos, sticky);
    }
    void successThrowsNothing() {
        QCOMPARE(thrownFor(cudaSuccess).kind(), ErrorKind::InvalidArgument);  // thrownFor's "nothing thrown"
    }
};

QTEST_GUILESS_MAIN(TestCudaErrors)
#include "test_cuda_errors.moc"
