#include "selftest/verify_backend.h"

#include <cstdlib>

#include "core/error.h"
#include "selftest/op_selftest.h"

namespace ts::selftest {

bool skipOverlayVerifyRequested() {
    const char* skip = std::getenv("SKIP_OVERLAY_VERIFY");
    return skip && std::string(skip) == "1";
}

VerifySummary verifyBackendOrThrow(Backend& backend, bool skip) {
    VerifySummary s;
    if (backend.name() == "cpu") return s;
    if (skip) {
        s.skipped = true;
        return s;
    }
    auto cpu = makeCpuBackend();
    int64_t failed = 0;
    std::string first;
    run(*cpu, backend, kDefaultSeed, {}, [&](const OpResult& r) {
        ++s.checks;
        if (!r.pass && failed++ == 0) first = r.family + "/" + r.op + " " + r.shape + ": " + r.note;
    });
    if (failed || s.checks == 0)
        fail(ErrorKind::Internal, "GPU self-test failed: " + std::to_string(failed) + " of " + std::to_string(s.checks) +
                                      " op checks (first: " + first + "); run 'twinspark-cli selftest --backend " +
                                      backend.name() + "' for the table, or set SKIP_OVERLAY_VERIFY=1 to serve anyway");
    s.ran = true;
    return s;
}

}  // namespace ts::selftest
