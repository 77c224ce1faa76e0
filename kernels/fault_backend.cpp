#include "fault_backend.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "core/log.h"

namespace ts {

namespace {

std::string knownOps() {
    std::string s;
    for (const std::string& n : ForwardingBackend::opNames()) s += (s.empty() ? "" : ", ") + n;
    return s;
}

bool matches(const std::string& planned, const char* op) {
    if (planned == "*" || planned == op) return true;
    // "linear" also names the packed label "linear (packed)".
    const size_t n = planned.size();
    return std::string(op).compare(0, n, planned) == 0 && std::string(op).compare(n, 2, " (") == 0;
}

}  // namespace

FaultPlan parseFaultPlan(const std::string& value) {
    const auto bad = [&](const std::string& why) {
        fail(ErrorKind::InvalidArgument, "TS_FAULT_OP=" + value + ": " + why +
                                             " (expected <op>@<call>[:device-lost|:error|:trap], e.g. embedding@3; "
                                             "ops: * or " + knownOps() + ")");
    };
    FaultPlan p;
    p.label = "TS_FAULT_OP=" + value;
    const size_t at = value.find('@');
    if (at == std::string::npos || at == 0) bad("no op and call");
    p.op = value.substr(0, at);
    const auto& names = ForwardingBackend::opNames();
    if (p.op != "*" && std::find(names.begin(), names.end(), p.op) == names.end()) bad("unknown op '" + p.op + "'");
    const size_t colon = value.find(':', at);
    const std::string count = value.substr(at + 1, colon == std::string::npos ? std::string::npos : colon - at - 1);
    if (count.empty() || count.find_first_not_of("0123456789") != std::string::npos)
        bad("the call must be a positive decimal number");
    if (count.size() > 12) bad("the call must have at most 12 digits");
    p.call = std::strtoll(count.c_str(), nullptr, 10);
    if (p.call < 1) bad("the call must be a positive decimal number");
    if (colon != std::string::npos) {
        const std::string kind = value.substr(colon + 1);
        if (kind == "device-lost") p.kind = FaultPlan::Kind::DeviceLost;
        else if (kind == "error") p.kind = FaultPlan::Kind::Error;
        else if (kind == "trap") p.kind = FaultPlan::Kind::Trap;
        else bad("unknown kind '" + kind + "'");
    }
    return p;
}

void FaultBackend::before(const char* op, OpKind /*kind*/) {
    // After a sticky fault every call fails, as every CUDA call does on a context that met a sticky error.
    if (m_plan.kind == FaultPlan::Kind::DeviceLost && m_fired.load())
        fail(ErrorKind::DeviceLost, m_plan.label + ": " + op + " after the injected loss of the device");
    if (!matches(m_plan.op, op)) return;
    const int64_t n = ++m_calls;
    if (n != m_plan.call) return;
    m_fired = true;
    // The op counted, and the call's own label where it says more ("linear (packed)" counted as a "linear").
    const std::string counted = m_plan.op == "*" ? std::string("any op") : m_plan.op;
    const std::string what = m_plan.label + ": call " + std::to_string(n) + " of " + counted +
                             (counted == op ? std::string() : std::string(" (") + op + ")");
    if (m_plan.kind == FaultPlan::Kind::Trap) {
        // The device's own error is what the caller sees (the backend's message and kind); this line says why.
        logFormat(LogLevel::Warning, "warning: %s: making the device trap", what.c_str());
        if (!inner().trapDevice())
            fail(ErrorKind::Internal, what + ": the " + name() + " backend has no device to trap");
        fail(ErrorKind::Internal, what + ": the device trapped but the backend reported no error");
    }
    if (m_plan.kind == FaultPlan::Kind::DeviceLost) fail(ErrorKind::DeviceLost, what + " failed as on a lost GPU");
    fail(ErrorKind::Internal, what + " failed");
}

void FaultBackend::rearm(int64_t call) {
    TS_CHECK(m_plan.kind == FaultPlan::Kind::Error,
             "FaultBackend::rearm: a lost device cannot be found again (" + m_plan.label + ")");
    TS_CHECK(call >= 0, "FaultBackend::rearm: the call counts from 1 (0 disarms)");
    m_plan.call = call;
    m_calls = 0;
}

void checkFaultInjection() {
    const char* v = std::getenv("TS_FAULT_OP");
    if (v && *v) parseFaultPlan(v);
}

std::unique_ptr<Backend> withFaultInjection(std::unique_ptr<Backend> b) {
    const char* v = std::getenv("TS_FAULT_OP");
    if (!v || !*v) return b;
    FaultPlan plan = parseFaultPlan(v);
    if (plan.kind == FaultPlan::Kind::Trap && b->computeUnits().device == 0)
        fail(ErrorKind::InvalidArgument, plan.label + ": a trap needs a GPU backend; the " + b->name() +
                                             " backend has no device to trap (use :device-lost to act one out)");
    logFormat(LogLevel::Warning, "warning: %s: call %lld of %s will fail (%s); a test setting, not for use",
              plan.label.c_str(), static_cast<long long>(plan.call), plan.op == "*" ? "any op" : plan.op.c_str(),
              plan.kind == FaultPlan::Kind::Trap         ? "the device made to trap before it: a real sticky error"
              : plan.kind == FaultPlan::Kind::DeviceLost ? "as a lost GPU, and every hooked call after it"
                                                         : "once");
    return std::make_unique<FaultBackend>(std::move(b), std::move(plan));
}

}  // namespace ts
