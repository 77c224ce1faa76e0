// The recipe's GPU self-test before serving: every op of a non-CPU backend against the CPU reference
// (engine/selftest). Used by `twinspark-cli serve` and the control center when they open a backend.
#pragma once

#include <cstdint>
#include <string>

#include "backend.h"

namespace ts::selftest {

struct VerifySummary {
    bool ran = false;      // false for the CPU backend (it is the reference) or when skipped
    bool skipped = false;  // SKIP_OVERLAY_VERIFY=1
    int64_t checks = 0;
};

// SKIP_OVERLAY_VERIFY=1 in this process's environment (the recipe's switch; `serve` has copied the .env's
// values there by then — the control center reads its .env itself and passes `skip`).
bool skipOverlayVerifyRequested();

// For a CPU backend: nothing. Otherwise runs every op case unless `skip`, and throws ts::Error(Internal)
// naming the first failing check, how many failed, and how to see the table or skip the check.
VerifySummary verifyBackendOrThrow(Backend& backend, bool skip = skipOverlayVerifyRequested());

}  // namespace ts::selftest
