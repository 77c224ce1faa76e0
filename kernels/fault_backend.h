// A Backend decorator that makes one chosen call fail, for tests of the error paths above the backend: what
// the engine, the server and the control center do when a step's op throws. Set by TS_FAULT_OP (read by
// makeBackend, so every backend a process opens is wrapped: the CLI, `serve`, the control center, the
// self-test), e.g.
//   TS_FAULT_OP=embedding@3               the third `embedding` call (the model's third step) fails as a lost
//                                         GPU would: ErrorKind::DeviceLost, and every later call fails the same
//                                         way, as a CUDA context after a sticky error does
//   TS_FAULT_OP=linear@40:error           the 40th linear fails once (ErrorKind::Internal), as a launch that the
//                                         context survives (out of memory, a bad configuration); later calls run
//   TS_FAULT_OP=*@100                     the 100th hooked call of any op (ForwardingBackend::opNames)
// Calls are counted from the backend's creation, 1-based, per op name ("linear" counts packed and dense ones). The
// start-up self-test of `serve --backend cuda` runs on the served backend, so its calls count too: a plan can aim at
// it (a lost device there stops the self-test at that case), or skip it with SKIP_OVERLAY_VERIFY=1 to aim at the
// first model steps.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "forwarding_backend.h"

namespace ts {

struct FaultPlan {
    std::string op;             // a name of ForwardingBackend::opNames(), or "*" for any
    int64_t call = 0;           // the failing call of that op, from 1
    bool sticky = true;         // device-lost: that call and every later one fail
    std::string text;           // the variable's value, for messages
};

// Parses TS_FAULT_OP's value; throws ts::Error(InvalidArgument) naming the form and the op names.
FaultPlan parseFaultPlan(const std::string& value);

class FaultBackend final : public ForwardingBackend {
public:
    FaultBackend(std::unique_ptr<Backend> inner, FaultPlan plan)
        : ForwardingBackend(std::move(inner)), m_plan(std::move(plan)) {}
    const FaultPlan& plan() const { return m_plan; }
    bool fired() const { return m_fired.load(); }

protected:
    void before(const char* op, OpKind kind) override;

private:
    FaultPlan m_plan;
    std::atomic<int64_t> m_calls{0};    // of the planned op so far
    std::atomic<bool> m_fired{false};
};

// makeBackend's hook: `b` wrapped in a FaultBackend when TS_FAULT_OP is set (and said so on the log), else `b`.
std::unique_ptr<Backend> withFaultInjection(std::unique_ptr<Backend> b);

}  // namespace ts
