// PLACEHOLDER (being written): benchKdaDecode. Replace this file.
#include "cli/bench_cuda.h"
#include "core/error.h"

namespace ts::cli {

nlohmann::json benchKdaDecode(Backend& /*backend*/, int /*reps*/) {
    fail(ErrorKind::Unsupported, "bench-device: benchKdaDecode is not written yet");
}

}  // namespace ts::cli
