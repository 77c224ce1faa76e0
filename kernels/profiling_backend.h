// A Backend decorator that times every op: each call is forwarded to the wrapped backend, which is then
// synchronized, and the wall time is added to the op's row (label = op name, plus "packed" for linears
// over packed weights). Synchronizing after every op removes overlap between the host and the device,
// so the per-op times add up to more than an unprofiled step; what it gives is attribution: which ops
// a decode step spends its time in (`twinspark-cli generate --profile-ops`). Graph regions and the aside
// stream are off under it: a replayed or side-stream op does not run when it is called, so its time could
// not be attributed.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "forwarding_backend.h"

namespace ts {

class ProfilingBackend final : public ForwardingBackend {
public:
    explicit ProfilingBackend(std::unique_ptr<Backend> inner) : ForwardingBackend(std::move(inner)) {}

    struct Row {
        int64_t calls = 0;
        double seconds = 0;
    };
    const std::map<std::string, Row>& rows() const { return m_rows; }
    void reset() { m_rows.clear(); }
    // The table, most expensive first: op, calls, total ms, µs per call, share of the total.
    std::string report() const;

    void beginGraphRegion(uint64_t /*key*/) override {}
    void endGraphRegion(GraphRegionEnd /*how*/) override {}
    bool setGraphsEnabled(bool /*on*/) override { return false; }
    GraphStats graphStats() const override { return {}; }
    bool beginAside() override { return false; }
    void endAside() override {}
    void joinAside() override {}

protected:
    // Ops only: allocations and host transfers are not rows (their cost shows in the ops around them).
    void before(const char* /*op*/, OpKind kind) override {
        if (kind == OpKind::Compute) m_t0 = std::chrono::steady_clock::now();
    }
    void after(const char* op, OpKind kind, bool ran) override;

private:
    std::chrono::steady_clock::time_point m_t0;  // of the op being forwarded (ops do not nest)
    std::map<std::string, Row> m_rows;
};

}  // namespace ts
