// PLACEHOLDER (being written): benchExl3Cuda. Replace this file.
#include "cli/bench_cuda.h"
#include "core/error.h"

namespace ts::cli {

nlohmann::json benchExl3Cuda(Backend& /*backend*/, int /*reps*/) {
    fail(ErrorKind::Unsupported, "bench-device: benchExl3Cuda is not written yet");
}

}  // namespace ts::cli
