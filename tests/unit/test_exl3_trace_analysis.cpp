// bench-device --what exl3-trace's analysis (app/cli/bench_cuda_exl3_trace.cpp) on trace words written here:
// the numbers docs/PERFORMANCE_EXL3.md quotes from the H200 come out of this code, so its phases, per-SM ends and
// concurrency are checked against units whose times are known.
#include <QtTest>

#include <vector>

#include "cli/bench_cuda.h"
#include "exl3_tune.h"

namespace {

struct Unit {
    int64_t slot;
    unsigned sm;
    unsigned long long start, input, staged, loop[4], end;  // ns
    unsigned tiles;
    bool last;
};

std::vector<unsigned long long> words(const std::vector<Unit>& units, int64_t capacity) {
    std::vector<unsigned long long> w(size_t(capacity) * ts::kExl3TraceWords, 0);
    for (const Unit& u : units) {
        unsigned long long* r = &w[size_t(u.slot) * ts::kExl3TraceWords];
        r[ts::kTraceSm] = u.sm;
        r[ts::kTraceStart] = u.start;
        r[ts::kTraceInputReady] = u.input;
        r[ts::kTraceStaged] = u.staged;
        for (int k = 0; k < 4; ++k) r[ts::kTraceLoopEnd + k] = u.loop[k];
        r[ts::kTraceEnd] = u.end;
        r[ts::kTraceLast] = u.last;
        r[ts::kTraceClockStart] = 0;
        r[ts::kTraceClockEnd] = u.end ? (u.end - u.start) * 18 / 10 : 0;  // 1.8 GHz
        r[ts::kTraceMode] = 0;
        r[ts::kTraceTiles] = u.tiles;
    }
    return w;
}

}  // namespace

class TestExl3TraceAnalysis : public QObject {
    Q_OBJECT
private slots:
    void phasesPerSmAndConcurrency() {
        // Three finished units (slots 0, 1, 3), one that exited before its end (slot 4: not counted), slot 2 empty.
        const std::vector<Unit> units = {
            {0, 0, 1000, 2000, 3000, {5000, 6000, 5500, 5800}, 7000, 4, false},
            {1, 1, 1500, 2500, 4000, {8000, 8000, 8000, 8000}, 10000, 4, true},
            {3, 0, 7000, 7500, 8000, {9000, 9000, 9000, 9000}, 9500, 2, false},
            {4, 1, 1200, 0, 0, {0, 0, 0, 0}, 0, 4, false},
        };
        const auto j = ts::cli::analyseExl3Trace(words(units, 8), 8, "test");
        QCOMPARE(j.at("units").get<int>(), 3);
        QCOMPARE(j.at("span_us").get<double>(), 9.0);             // first start 1.0 µs → last end 10.0 µs
        QCOMPARE(j.at("alive_units_max").get<int>(), 2);           // slot 3 starts as slot 0 ends
        QCOMPARE(j.at("sm_clock_GHz").get<double>(), 1.8);
        const auto& lin = j.at("linear");
        QCOMPARE(lin.at("epilogues").get<int>(), 1);
        QCOMPARE(lin.at("wait").at("p50").get<double>(), 1.0);     // 1.0, 1.0, 0.5
        QCOMPARE(lin.at("stage").at("p10").get<double>(), 0.5);    // 1.0, 1.5, 0.5
        QCOMPARE(lin.at("stage").at("p90").get<double>(), 1.5);
        QCOMPARE(lin.at("loop").at("p50").get<double>(), 3.0);     // slowest warp: 3.0, 4.0, 1.0
        QCOMPARE(lin.at("loop_spread").at("p90").get<double>(), 1.0);
        QCOMPARE(lin.at("tail").at("p50").get<double>(), 1.0);     // 1.0, 2.0, 0.5
        QCOMPARE(lin.at("loop_ns_per_ktile").at("p50").get<double>(), 750.0);
        const auto& sm = j.at("per_sm");
        QCOMPARE(sm.at("last_loop_end_us").at("max").get<double>(), 8.0);  // SM 0: slot 3's loop, 9.0 − 1.0
        QCOMPARE(sm.at("last_loop_end_us").at("p10").get<double>(), 7.0); // SM 1: 8.0 − 1.0
        QCOMPARE(sm.at("last_end_us").at("max").get<double>(), 9.0);
        QCOMPARE(sm.at("loop_unit_us").at("p10").get<double>(), 4.0);     // SM 0: 3.0 + 1.0; SM 1: 4.0
        QCOMPARE(sm.at("loop_unit_us").at("max").get<double>(), 4.0);
        QCOMPARE(int(j.at("units_raw").size()), 3);
        QVERIFY(!j.contains("gate/up") && !j.contains("down"));
    }

    // The device-routed MoE's plan kernel writes one record of its own (kTraceModePlan) after the launch's units:
    // it is not a unit (nor the launch's first start), and analyseExl3TracePlan places it before the launch.
    void planRecordApart() {
        const std::vector<Unit> units = {
            {0, 0, 1000, 2000, 3000, {5000, 6000, 5500, 5800}, 7000, 4, false},
            {1, 1, 1500, 2500, 4000, {8000, 8000, 8000, 8000}, 10000, 4, true},
        };
        std::vector<unsigned long long> w = words(units, 4);
        unsigned long long* r = &w[size_t(2) * ts::kExl3TraceWords];
        r[ts::kTraceSm] = 5;
        r[ts::kTraceStart] = 200;        // the kernel starts
        r[ts::kTraceInputReady] = 400;   // its wait is over
        r[ts::kTraceStaged] = 500;       // routing loaded
        r[ts::kTraceLoopEnd] = 600;      // chunk counts
        r[ts::kTraceEnd] = 800;          // work list written
        r[ts::kTraceMode] = unsigned(ts::kTraceModePlan);
        const auto j = ts::cli::analyseExl3Trace(w, 4, "with a plan record");
        QCOMPARE(j.at("units").get<int>(), 2);
        QCOMPARE(j.at("span_us").get<double>(), 9.0);  // from the first unit's start (1.0 µs), not the plan's
        QCOMPARE(int(j.at("units_raw").size()), 2);
        const auto p = ts::cli::analyseExl3TracePlan(w, 4);
        QVERIFY(!p.is_null());
        QCOMPARE(p.at("start_us").get<double>(), -0.8);
        QCOMPARE(p.at("waited_us").get<double>(), -0.6);
        QCOMPARE(p.at("loaded_us").get<double>(), -0.5);
        QCOMPARE(p.at("chunks_us").get<double>(), -0.4);
        QCOMPARE(p.at("end_us").get<double>(), -0.2);
        QCOMPARE(p.at("length_after_wait_us").get<double>(), 0.4);
        QCOMPARE(p.at("first_input_us").get<double>(), 1.0);  // slot 0's inputs at 2.0 µs
        // No plan record (a host-routed launch): null.
        r[ts::kTraceMode] = 0;
        r[ts::kTraceStart] = r[ts::kTraceEnd] = 0;
        QVERIFY(ts::cli::analyseExl3TracePlan(w, 4).is_null());
    }

    void noTracedUnits() {
        const auto j = ts::cli::analyseExl3Trace(std::vector<unsigned long long>(4 * ts::kExl3TraceWords, 0), 4, "empty");
        QCOMPARE(j.at("units").get<int>(), 0);
        QVERIFY(!j.contains("span_us"));
    }
};

QTEST_GUILESS_MAIN(TestExl3TraceAnalysis)
#include "test_exl3_trace_analysis.moc"
