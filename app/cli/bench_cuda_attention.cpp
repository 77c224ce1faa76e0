// PLACEHOLDER (being written): benchMlaDecode. Replace this file.
#include "cli/bench_cuda.h"
#include "core/error.h"

namespace ts::cli {

nlohmann::json benchMlaDecode(Backend& /*backend*/, int /*reps*/) {
    fail(ErrorKind::Unsupported, "bench-device: benchMlaDecode is not written yet");
}

}  // namespace ts::cli
