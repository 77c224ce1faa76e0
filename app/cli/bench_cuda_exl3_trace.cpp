// `bench-device --what exl3-trace`: where the time of one EXL3 decode launch goes, unit by unit. The K = 4
// streaming unit has a trace instantiation (kernels/exl3_tune.h: exl3SetTrace) that stamps the device's
// global clock at its phases: start, inputs readable (after the PDL wait; MoE down units after their rows'
// wait), activations staged (the block barrier behind the input transform), each warp's loop end, and the
// unit's end (sums out, arrival counted, the epilogue if it was the last). This file turns a traced launch
// into phase statistics, a timeline of how many units are in each phase and per-SM ends — the measurements
// of docs/PERFORMANCE_EXL3.md's ninth-session block.
//
// Each configuration is traced alone (the GPU idle before it: what a launch costs from cold) and as the last
// two of five back-to-back calls (the benchmark's situation: with PDL a call's blocks start while the
// previous call's finish, so "wait" includes the previous kernel's tail; the hand-off between the two is
// printed). The traced kernel is a separate instantiation whose registers may differ from the production
// kernel's; its median time per call is printed beside the production one (the perturbation).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cli/bench_cuda.h"
#include "exl3_tune.h"

namespace ts::cli {

namespace {

// p10 / median / p90 / max of a sample, sorted once (nearest rank; zeros for an empty sample).
struct Quantiles {
    double p10 = 0, p50 = 0, p90 = 0, max = 0;
    nlohmann::json json(bool withMax) const {
        nlohmann::json j = {{"p10", p10}, {"p50", p50}, {"p90", p90}};
        if (withMax) j["max"] = max;
        return j;
    }
};
Quantiles quantiles(std::vector<double> v) {
    Quantiles q;
    if (v.empty()) return q;
    std::sort(v.begin(), v.end());
    auto at = [&](double p) { return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))]; };
    q.p10 = at(0.1);
    q.p50 = at(0.5);
    q.p90 = at(0.9);
    q.max = v.back();
    return q;
}

struct UnitTimes {
    int sm = 0, mode = 0;
    double start = 0, input = 0, staged = 0, loopFirst = 0, loopLast = 0, end = 0;  // µs from the launch's first start
    double tiles = 0, ghz = 0;
    bool last = false;
};

// A finished unit's record: started and ended (a unit that exited at once has no end), and not the plan kernel's
// record (kTraceModePlan, planOf).
bool isUnitRecord(const unsigned long long* r) {
    return r[kTraceStart] != 0 && r[kTraceEnd] != 0 && r[kTraceMode] != unsigned(kTraceModePlan);
}

std::vector<UnitTimes> unitsOf(const std::vector<unsigned long long>& w, int64_t capacity) {
    std::vector<UnitTimes> u;
    unsigned long long t0 = ~0ull;
    for (int64_t i = 0; i < capacity; ++i) {
        const unsigned long long* r = &w[size_t(i * kExl3TraceWords)];
        if (isUnitRecord(r)) t0 = std::min(t0, r[kTraceStart]);
    }
    for (int64_t i = 0; i < capacity; ++i) {
        const unsigned long long* r = &w[size_t(i * kExl3TraceWords)];
        if (!isUnitRecord(r)) continue;
        auto us = [&](unsigned long long t) { return double(t - t0) * 1e-3; };
        UnitTimes x;
        x.sm = int(r[kTraceSm]);
        x.mode = int(r[kTraceMode]);
        x.start = us(r[kTraceStart]);
        x.input = us(r[kTraceInputReady]);
        x.staged = us(r[kTraceStaged]);
        unsigned long long lo = ~0ull, hi = 0;
        for (int k = 0; k < 4; ++k) {
            lo = std::min(lo, r[kTraceLoopEnd + k]);
            hi = std::max(hi, r[kTraceLoopEnd + k]);
        }
        x.loopFirst = us(lo);
        x.loopLast = us(hi);
        x.end = us(r[kTraceEnd]);
        x.tiles = double(r[kTraceTiles]);
        x.last = r[kTraceLast] != 0;
        const double ns = double(r[kTraceEnd] - r[kTraceStart]);
        x.ghz = ns > 0 ? double(r[kTraceClockEnd] - r[kTraceClockStart]) / ns : 0.0;
        u.push_back(x);
    }
    return u;
}

// The device-routed MoE's plan kernel record (kTraceModePlan, exl3_tune.h), absolute ns; zeros when absent.
struct PlanStamps {
    unsigned long long start = 0, waited = 0, loaded = 0, chunks = 0, end = 0;
};
PlanStamps planOf(const std::vector<unsigned long long>& w, int64_t capacity) {
    for (int64_t i = 0; i < capacity; ++i) {
        const unsigned long long* r = &w[size_t(i * kExl3TraceWords)];
        if (r[kTraceMode] == unsigned(kTraceModePlan) && r[kTraceStart] != 0 && r[kTraceEnd] != 0)
            return {r[kTraceStart], r[kTraceInputReady], r[kTraceStaged], r[kTraceLoopEnd], r[kTraceEnd]};
    }
    return {};
}
// The first start and the first "inputs readable" of a launch's units (absolute ns; ~0 when none).
std::pair<unsigned long long, unsigned long long> firstStartInput(const std::vector<unsigned long long>& w, int64_t capacity) {
    unsigned long long s = ~0ull, in = ~0ull;
    for (int64_t i = 0; i < capacity; ++i) {
        const unsigned long long* r = &w[size_t(i * kExl3TraceWords)];
        if (!isUnitRecord(r)) continue;
        s = std::min(s, r[kTraceStart]);
        in = std::min(in, r[kTraceInputReady]);
    }
    return {s, in};
}
}  // namespace

// The plan kernel's place before its MoE launch: its stamps as µs from the launch's first unit start (negative:
// before it), and its length after its wait.
nlohmann::json analyseExl3TracePlan(const std::vector<unsigned long long>& w, int64_t capacity) {
    const PlanStamps p = planOf(w, capacity);
    const auto [s0, in0] = firstStartInput(w, capacity);
    if (p.start == 0 || s0 == ~0ull) return nullptr;
    auto rel = [&](unsigned long long t) { return (double(t) - double(s0)) * 1e-3; };
    std::printf("    plan kernel: starts %.2f us, done waiting %.2f, routing loaded %.2f, chunk counts %.2f, ends %.2f us (%.2f us "
                "after its wait) from the MoE launch's first unit start; first inputs readable at %.2f us\n",
                rel(p.start), rel(p.waited), rel(p.loaded), rel(p.chunks), rel(p.end), double(p.end - p.waited) * 1e-3, rel(in0));
    return {{"start_us", rel(p.start)}, {"waited_us", rel(p.waited)}, {"loaded_us", rel(p.loaded)},
            {"chunks_us", rel(p.chunks)}, {"end_us", rel(p.end)}, {"length_after_wait_us", double(p.end - p.waited) * 1e-3},
            {"first_input_us", rel(in0)}};
}

namespace {

const char* modeName(int m) { return m == 1 ? "gate/up" : m == 2 ? "down" : "linear"; }

// Phase statistics of one traced launch, printed and returned.
nlohmann::json analyse(const std::vector<UnitTimes>& units, const std::string& how) {
    nlohmann::json out = {{"situation", how}, {"units", units.size()}};
    if (units.empty()) {
        std::printf("  %s: no traced units (the launch did not take the K = 4 streaming unit)\n", how.c_str());
        return out;
    }
    double span = 0, loopSum = 0, ghz = 0;
    for (const UnitTimes& u : units) {
        span = std::max(span, u.end);
        loopSum += u.loopLast - u.staged;
        ghz += u.ghz;
    }
    ghz /= double(units.size());
    out["span_us"] = span;
    out["sm_clock_GHz"] = ghz;
    std::printf("  %s: %zu units, launch span %.2f us (first unit start to last unit end), SM clock %.2f GHz\n",
                how.c_str(), units.size(), span, ghz);
    std::printf("    %-8s %-22s %8s %8s %8s\n", "units", "phase (us)", "p10", "median", "p90");
    for (int mode = 0; mode <= 2; ++mode) {
        std::vector<double> st, wait, stage, loop, spread, tail, total, perTile;
        int lastN = 0;
        for (const UnitTimes& u : units) {
            if (u.mode != mode) continue;
            st.push_back(u.start);
            wait.push_back(u.input - u.start);
            stage.push_back(u.staged - u.input);
            loop.push_back(u.loopLast - u.staged);
            spread.push_back(u.loopLast - u.loopFirst);
            tail.push_back(u.end - u.loopLast);
            total.push_back(u.end - u.start);
            if (u.tiles > 0) perTile.push_back((u.loopLast - u.staged) * 1e3 / u.tiles);
            lastN += u.last;
        }
        if (st.empty()) continue;
        struct Row {
            const char* name;
            const std::vector<double>* v;
            const char* key;
        } rows[] = {{"start (from first)", &st, "start"},
                    {"wait for inputs", &wait, "wait"},
                    {"transform + barrier", &stage, "stage"},
                    {"loop (slowest warp)", &loop, "loop"},
                    {"warps' loop-end spread", &spread, "loop_spread"},
                    {"sums out + arrival", &tail, "tail"},
                    {"whole unit", &total, "unit"},
                    {"loop ns per k-tile", &perTile, "loop_ns_per_ktile"}};
        nlohmann::json m = {{"units", st.size()}, {"epilogues", lastN}};
        for (const Row& r : rows) {
            const Quantiles q = quantiles(*r.v);
            std::printf("    %-8s %-22s %8.2f %8.2f %8.2f\n", modeName(mode), r.name, q.p10, q.p50, q.p90);
            m[r.key] = q.json(false);
        }
        out[modeName(mode)] = m;
    }
    // The timeline: units in each phase at 16 instants across the span; and how many units were in a main
    // loop on average over the span, against the most units alive at once.
    std::printf("    timeline: units started-but-waiting / staging / looping / finishing at instants across the span\n");
    nlohmann::json tl = nlohmann::json::array();
    for (int i = 0; i < 16; ++i) {
        const double t = span * (i + 0.5) / 16.0;
        int n[4] = {0, 0, 0, 0};
        for (const UnitTimes& u : units) {
            if (t < u.start || t >= u.end) continue;
            n[t < u.input ? 0 : t < u.staged ? 1 : t < u.loopLast ? 2 : 3]++;
        }
        std::printf("      t=%6.2f us: %5d %5d %5d %5d\n", t, n[0], n[1], n[2], n[3]);
        tl.push_back({{"t_us", t}, {"waiting", n[0]}, {"staging", n[1]}, {"looping", n[2]}, {"finishing", n[3]}});
    }
    out["timeline"] = tl;
    // Most units alive at once: a sweep over the start/end events.
    std::vector<std::pair<double, int>> ev;
    for (const UnitTimes& u : units) {
        ev.emplace_back(u.start, 1);
        ev.emplace_back(u.end, -1);
    }
    std::sort(ev.begin(), ev.end());
    int alive = 0, most = 0;
    for (const auto& e : ev) most = std::max(most, alive += e.second);
    // Per SM: when its last unit's loop ended and how much loop time its units had — whether the launch's
    // end waits for a few slow SMs (imbalance between SMs) or every SM ends late.
    std::vector<double> smLoopEnd, smLoop, smEnd;
    {
        int maxSm = 0;
        for (const UnitTimes& u : units) maxSm = std::max(maxSm, u.sm);
        std::vector<double> le(size_t(maxSm) + 1, -1.0), ls(size_t(maxSm) + 1, 0.0), en(size_t(maxSm) + 1, 0.0);
        for (const UnitTimes& u : units) {
            le[size_t(u.sm)] = std::max(le[size_t(u.sm)], u.loopLast);
            ls[size_t(u.sm)] += u.loopLast - u.staged;
            en[size_t(u.sm)] = std::max(en[size_t(u.sm)], u.end);
        }
        for (size_t i = 0; i < le.size(); ++i)
            if (le[i] >= 0) {
                smLoopEnd.push_back(le[i]);
                smLoop.push_back(ls[i]);
                smEnd.push_back(en[i]);
            }
    }
    std::printf("    per SM (%zu SMs)            p10   median      p90      max\n", smEnd.size());
    nlohmann::json perSm;
    for (const auto& [name, key, v] : {std::tuple{"last loop end (us)", "last_loop_end_us", &smLoopEnd},
                                       std::tuple{"last unit end (us)", "last_end_us", &smEnd},
                                       std::tuple{"loop unit-us", "loop_unit_us", &smLoop}}) {
        const Quantiles q = quantiles(*v);
        std::printf("      %-18s %8.2f %8.2f %8.2f %8.2f\n", name, q.p10, q.p50, q.p90, q.max);
        perSm[key] = q.json(true);
    }
    out["per_sm"] = perSm;
    // Every unit, for offline analysis: [sm, mode, k-tiles, last, start, input, staged, first loop end, last
    // loop end, end] (µs from the first start, 0.01 µs).
    nlohmann::json raw = nlohmann::json::array();
    auto r2 = [](double v) { return double(int64_t(v * 100.0 + 0.5)) / 100.0; };
    for (const UnitTimes& u : units)
        raw.push_back({u.sm, u.mode, int(u.tiles), int(u.last), r2(u.start), r2(u.input), r2(u.staged), r2(u.loopFirst),
                       r2(u.loopLast), r2(u.end)});
    out["units_raw"] = raw;
    out["looping_units_mean"] = span > 0 ? loopSum / span : 0.0;
    out["alive_units_max"] = most;
    std::printf("    units in a main loop, averaged over the span: %.0f; most units alive at once: %d\n",
                span > 0 ? loopSum / span : 0.0, most);
    return out;
}

}  // namespace

nlohmann::json analyseExl3Trace(const std::vector<unsigned long long>& words, int64_t capacity, const std::string& how) {
    return analyse(unitsOf(words, capacity), how);
}

nlohmann::json traceExl3Calls(Backend& backend, const std::string& label, const std::function<void()>& call,
                              double productionSeconds, int reps) {
    nlohmann::json out = {{"label", label}};
    if (backend.name() != "cuda") {
        std::printf("  trace of %s: needs the CUDA backend\n", label.c_str());
        return out;
    }
    constexpr int64_t kCapacity = int64_t(1) << 16;  // units (the MoE layer at batch 4 has ~4,000)
    const size_t bytes = size_t(kCapacity) * kExl3TraceWords * 8;
    const Buffer buf = backend.alloc(bytes);
    auto* words = reinterpret_cast<unsigned long long*>(buf.f32());
    std::vector<unsigned long long> host(size_t(kCapacity) * kExl3TraceWords);
    std::printf("\ntrace of %s\n", label.c_str());
    constexpr int64_t kHalf = kCapacity / 2;
    for (int situation = 0; situation < 2; ++situation) {
        backend.zero(buf);
        backend.synchronize();
        if (situation == 1)
            for (int i = 0; i < 3; ++i) call();  // queued: the traced calls follow them back to back
        // Back to back, two consecutive calls are traced (into the two halves of the buffer): the second's
        // statistics, and the hand-off between them.
        exl3SetTrace(words, kHalf);
        call();
        if (situation == 1) {
            exl3SetTrace(words + kHalf * kExl3TraceWords, kHalf);
            call();
        }
        exl3SetTrace(nullptr, 0);
        backend.synchronize();
        backend.download(buf, host.data(), bytes);
        if (situation == 0) {
            out["alone"] = analyseExl3Trace(host, kHalf, "alone (idle GPU before it)");
            if (nlohmann::json pr = analyseExl3TracePlan(host, kHalf); !pr.is_null()) out["alone"]["plan_kernel"] = pr;
            continue;
        }
        const std::vector<unsigned long long> second(host.begin() + kHalf * kExl3TraceWords, host.end());
        out["back_to_back"] = analyseExl3Trace(second, kHalf, "the 5th of 5 calls back to back");
        if (nlohmann::json pr = analyseExl3TracePlan(second, kHalf); !pr.is_null()) out["back_to_back"]["plan_kernel"] = pr;
        // Hand-off (absolute device clock): the first call's last unit end → the second's first and median
        // "inputs readable" (its PDL wait returning once the first call has completed).
        unsigned long long endA = 0, firstInputB = ~0ull;
        std::vector<double> inputB;
        unsigned long long startB = ~0ull, startA = ~0ull;
        for (int64_t i = 0; i < kHalf; ++i) {
            const unsigned long long* a = &host[size_t(i * kExl3TraceWords)];
            const unsigned long long* b2 = &second[size_t(i * kExl3TraceWords)];
            if (isUnitRecord(a)) {
                endA = std::max(endA, a[kTraceEnd]);
                startA = std::min(startA, a[kTraceStart]);
            }
            if (isUnitRecord(b2)) {
                inputB.push_back(double(b2[kTraceInputReady]));
                firstInputB = std::min(firstInputB, b2[kTraceInputReady]);
                startB = std::min(startB, b2[kTraceStart]);
            }
        }
        if (endA > 0 && !inputB.empty()) {
            const double first = double(firstInputB) - double(endA), median = quantiles(inputB).p50 - double(endA);
            std::printf("  hand-off: 4th call's last unit end -> 5th call's inputs readable: first %.2f us, median %.2f us;"
                        " starts %.2f us apart\n",
                        first * 1e-3, median * 1e-3, (double(startB) - double(startA)) * 1e-3);
            out["handoff_us"] = {{"first", first * 1e-3}, {"median", median * 1e-3},
                                 {"start_to_start", (double(startB) - double(startA)) * 1e-3}};
            if (const PlanStamps pb = planOf(second, kHalf); pb.start != 0) {  // device-routed: the plan in between
                const double ps = (double(pb.start) - double(endA)) * 1e-3, pe = (double(pb.end) - double(endA)) * 1e-3;
                const double pw = (double(pb.waited) - double(endA)) * 1e-3;
                std::printf("  the 5th call's plan kernel: starts %.2f us, is done waiting %.2f us and ends %.2f us after the 4th"
                            " call's last unit end; its MoE launch's first unit starts %.2f us after it\n",
                            ps, pw, pe, (double(startB) - double(endA)) * 1e-3);
                out["handoff_us"]["plan_start"] = ps;
                out["handoff_us"]["plan_waited"] = pw;
                out["handoff_us"]["plan_end"] = pe;
                out["handoff_us"]["first_unit_start"] = (double(startB) - double(endA)) * 1e-3;
            }
        }
    }
    // The trace kernel's own time per call, beside the production kernel's.
    exl3SetTrace(words, kCapacity);
    const double traced = medianSeconds(backend, reps, 16, call);
    exl3SetTrace(nullptr, 0);
    std::printf("  time per call: production %.1f us, traced %.1f us\n", productionSeconds * 1e6, traced * 1e6);
    out["us"] = productionSeconds * 1e6;
    out["traced_us"] = traced * 1e6;
    return out;
}

}  // namespace ts::cli
