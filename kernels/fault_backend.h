// A Backend decorator that makes one chosen call fail, for tests of the error paths above the backend: what
// the engine, the server and the control center do when a step's op throws. Set by TS_FAULT_OP (read by
// makeBackend, so every backend a process opens is wrapped: the CLI, `serve`, the control center, the
// self-test), e.g.
//   TS_FAULT_OP=embedding@3               the third `embedding` call (on the CPU: the model's third step) fails as
//                                         a lost GPU would: ErrorKind::DeviceLost, and every later hooked call
//                                         (ForwardingBackend::opNames) fails the same way, as every call on a CUDA
//                                         context after a sticky error does. Unhooked calls (releaseWeights, the
//                                         graph regions, deviceMemory, ...) still reach the backend, so destructors
//                                         and the unload path run as they would on a dead context
//   TS_FAULT_OP=linear@40:error           the 40th linear fails once (ErrorKind::Internal), as a launch that the
//                                         context survives (out of memory, a bad configuration); later calls run
//   TS_FAULT_OP=*@100                     the 100th hooked call of any op (ForwardingBackend::opNames)
//   TS_FAULT_OP=embedding@3:trap          before the third `embedding`, the device itself is made to fail: a kernel
//                                         that traps (Backend::trapDevice), a real CUDA sticky error, thrown as the
//                                         backend classifies it; later calls fail because the context is lost, not
//                                         because this class says so. GPU backends only: makeBackend refuses it on
//                                         the CPU
// Calls are counted from the backend's creation, 1-based, per op name ("linear" counts packed and dense ones). On a
// GPU, `serve` and the control center run on the served backend before the engine's first step: the start-up
// self-test (unless SKIP_OVERLAY_VERIFY=1) and one profiling forward that sizes the KV pool (runtime/device_budget),
// so their calls count too — with the self-test skipped, `embedding@3` fails the engine's second step. On the CPU
// neither runs. A plan can aim at them as well (a lost device in the self-test stops it at that case).
// The self-test's graphs-after-fail row uses the same class on its backend under test (borrowed), re-aimed at one
// decode step after another (rearm).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "forwarding_backend.h"

namespace ts {

struct FaultPlan {
    // What the planned call does: DeviceLost (":device-lost", the default) fails it and every later hooked call as
    // ErrorKind::DeviceLost; Error (":error") fails it once as ErrorKind::Internal; Trap (":trap") makes the device
    // itself fail before it (Backend::trapDevice) — later calls fail because the device is lost, not because of
    // this class.
    enum class Kind { DeviceLost, Error, Trap };
    std::string op;             // a name of ForwardingBackend::opNames(), or "*" for any
    int64_t call = 0;           // the failing call of that op, from 1
    Kind kind = Kind::DeviceLost;
    std::string label;          // how messages name the plan, e.g. "TS_FAULT_OP=embedding@3"
};

// Parses TS_FAULT_OP's value; throws ts::Error(InvalidArgument) naming the form and the op names.
FaultPlan parseFaultPlan(const std::string& value);

class FaultBackend final : public ForwardingBackend {
public:
    FaultBackend(std::unique_ptr<Backend> inner, FaultPlan plan)
        : ForwardingBackend(std::move(inner)), m_plan(std::move(plan)) {}
    // Borrows `inner`, which must outlive this and stays its owner's (the self-test's backend under test).
    FaultBackend(Backend& inner, FaultPlan plan) : ForwardingBackend(inner), m_plan(std::move(plan)) {}
    const FaultPlan& plan() const { return m_plan; }
    bool fired() const { return m_fired.load(); }
    // Aims a one-time (Error) plan again: the call-th call of its op from now fails; 0 disarms it. For a
    // caller that fails chosen steps one at a time. Not while another thread may be in an op of this backend.
    void rearm(int64_t call);

protected:
    void before(const char* op, OpKind kind) override;

private:
    FaultPlan m_plan;
    std::atomic<int64_t> m_calls{0};    // of the planned op so far (since the last rearm)
    std::atomic<bool> m_fired{false};
};

// makeBackend's hook: `b` wrapped in a FaultBackend when TS_FAULT_OP is set (and said so on the log), else `b`.
// A trap plan on a backend with no device (computeUnits().device == 0) throws InvalidArgument.
std::unique_ptr<Backend> withFaultInjection(std::unique_ptr<Backend> b);
// Throws parseFaultPlan's error for a malformed TS_FAULT_OP (checkBackendName calls it, so makeBackend does first).
void checkFaultInjection();

}  // namespace ts
