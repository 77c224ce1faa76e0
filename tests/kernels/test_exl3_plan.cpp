// The EXL3 CUDA launch planner on the host (exl3cuda::planLaunch, kernels/cuda/cuda_exl3.cu; no GPU needed —
// without a device the occupancy-based slice tuning is skipped, the rest is plain arithmetic): over K = 1..8,
// the three codebooks, decode and prefill jobs and GLM-5.3-Flash's shapes, every plan covers k exactly once
// with whole 128-input Hadamard blocks, has as many blocks as units, sizes its shared memory for the layout the
// kernel variant uses (the streaming unit: staged activations for 8 or 16 tokens, the row sums / exponents /
// flag, then one cp.async ring per warp, 16-byte aligned; the staged unit: its stages, hi/lo inputs, then the
// exponents and flag; the epilogue's [R][128] sums fit over the first region either way), streams exactly the
// 16-row plans whose slice one streaming unit takes (one stage; two for ≤ 8 rows at K ≥ 3 with the
// shared-memory ring), and combines through partials exactly when it must; and the fused MoE's two phases
// (planMoePhases) always get one kernel variant, and a projection qualifies for the fused MoE (moePackedView)
// exactly when its shape, K, codebook and padding are what the kernels take. Under a GB10's shared-memory limit
// (99 KiB per block) every plan fits it, and under the H200's (227 KiB) the plans are the unlimited ones.
#include <QtTest>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_exl3.cuh"
#include "exl3_tune.h"

using namespace ts;
using namespace ts::exl3cuda;

class TestExl3Plan : public QObject {
    Q_OBJECT

private slots:
    // unitCoords (cuda_exl3.cuh), the units' ticket orders: both cover every (job, column block, slice) of a
    // launch exactly once; the default keeps the jobs side by side (job = u mod J, then column block, then slice);
    // job-major gives each job one run of NB·S consecutive units, column block fastest within it. Shapes: the
    // 4096→12288 GEMV, GLM-5.3-Flash's MoE phases at batch 1 and 4 (gate/up: 16 or ~60 jobs of 16 column blocks × 4
    // slices; down: 8 jobs × 32 × 4), the device-routed plan's 256 pairs, and odd sizes.
    void unitOrdersCoverEveryUnit() {
        struct L {
            int J, NB, S;
        };
        const L launches[] = {{1, 96, 11}, {16, 16, 4}, {60, 16, 4}, {8, 32, 4}, {512, 16, 1}, {3, 5, 7}, {2, 1, 1}};
        for (const L& l : launches)
            for (const bool jobMajor : {false, true}) {
                const int64_t n = int64_t(l.J) * l.NB * l.S, per = int64_t(l.NB) * l.S;
                std::vector<uint8_t> seen(size_t(n), 0);
                for (int64_t u = 0; u < n; ++u) {
                    const UnitCoords c = unitCoords(u, l.J, l.NB, l.S, jobMajor);
                    QVERIFY(c.j >= 0 && c.j < l.J && c.b >= 0 && c.b < l.NB && c.s >= 0 && c.s < l.S);
                    uint8_t& hit = seen[size_t((int64_t(c.j) * l.NB + c.b) * l.S + c.s)];
                    QCOMPARE(int(hit), 0);  // no unit twice (and n units: every one once)
                    hit = 1;
                    if (jobMajor) {
                        QCOMPARE(int64_t(c.j), u / per);                     // the job's run of NB·S tickets
                        QCOMPARE(int64_t(c.b), (u % per) % l.NB);            // column block fastest
                        QCOMPARE(int64_t(c.s), (u % per) / l.NB);
                    } else {
                        QCOMPARE(int64_t(c.j), u % l.J);
                        QCOMPARE(int64_t(c.b), (u / l.J) % l.NB);
                        QCOMPARE(int64_t(c.s), u / (int64_t(l.J) * l.NB));
                    }
                }
            }
    }

    void plansAreConsistent() {
        const auto [streamOn, regRing, oneStage] = switchesInForce();
        struct Shape {
            int tilesK, NB;
        };
        // k/16 × n/128: small padded, 4096→2048 (gate/up), 2048→4096 (down), 4096→12288, 4096→4096.
        const Shape shapes[] = {{8, 2}, {16, 3}, {256, 16}, {128, 32}, {256, 96}, {256, 32}};
        int plans = 0, streamed = 0, twoStage = 0;
        for (int bits = 1; bits <= 8; ++bits)
            for (int cb = 0; cb < 3; ++cb)
                for (const Shape& sh : shapes)
                    for (int MG : {1, kMaxMG})
                        for (int J : {1, 16, 61})
                            for (int rows : {1, 4, 8, 9, 12, 16, 64})
                                for (bool pair : {false, true}) {
                                    if (rows > kGroupRows * MG || (pair && J % 2)) continue;
                                    const Plan p = planLaunch(bits, cb, MG, sh.tilesK, sh.NB, J, J * rows, rows, pair, 132);
                                    const QString what = QString("K=%1 cb=%2 k/16=%3 NB=%4 MG=%5 J=%6 rows=%7 pair=%8")
                                                             .arg(bits).arg(cb).arg(sh.tilesK).arg(sh.NB).arg(MG).arg(J)
                                                             .arg(rows).arg(pair);
                                    check(p, bits, MG, sh.tilesK, sh.NB, J, rows, pair, streamOn, regRing, oneStage, what);
                                    ++plans;
                                    streamed += p.MG == kStream;
                                    twoStage += p.MG == kStream && p.KSL > stageTiles(bits, 1);
                                    if (QTest::currentTestFailed()) return;
                                }
        QVERIFY(plans > 1000);
        // Decode plans exist in the grid (one-row jobs at every K), so with streaming on some must stream.
        if (streamOn) QVERIFY(streamed > 0);
        else QCOMPARE(streamed, 0);
        // ... and one-row jobs of a 4096-wide input at K ≥ 3 (the MoE layer's gate/up at batch 1: 16 jobs × 16
        // column blocks) take two stages per slice unless a switch keeps one.
        if (streamOn && !regRing && !oneStage) QVERIFY(twoStage > 0);
        else QCOMPARE(twoStage, 0);
    }

    // The fused MoE's two phases always share a kernel variant (the one launch runs both): planMoePhases keeps
    // planLaunch's plans when their variants agree and re-plans both without streaming when they do not.
    void moePhasesShareAVariant() {
        struct Shape {
            int tilesKG, NBG, tilesKD, NBD;
        };
        // GLM-5.3-Flash's routed experts (4096 → 2048 → 4096), and a small padded pair.
        const Shape shapes[] = {{256, 16, 128, 32}, {16, 3, 24, 2}};
        int cases = 0, replanned = 0;
        for (int bits = 1; bits <= 8; ++bits)
            for (int cb = 0; cb < 3; ++cb)
                for (const Shape& sh : shapes)
                    for (int pairs : {1, 8, 30, 61})
                        for (int R : {1, 2, 4, 8, 9, 12, 16}) {
                            const int rows = pairs * R;
                            const MoePlans p = planMoePhases(bits, cb, bits, cb, 1, sh.tilesKG, sh.NBG, sh.tilesKD,
                                                             sh.NBD, pairs, rows, R, 132);
                            const Plan gu = planLaunch(bits, cb, 1, sh.tilesKG, sh.NBG, 2 * pairs, 2 * rows, R, true, 132);
                            const Plan d = planLaunch(bits, cb, 1, sh.tilesKD, sh.NBD, pairs, rows, R, false, 132);
                            const QString what = QString("K=%1 cb=%2 k/16=%3 pairs=%4 R=%5").arg(bits).arg(cb)
                                                     .arg(sh.tilesKG).arg(pairs).arg(R);
                            QVERIFY2(p.gu.MG == p.d.MG, qPrintable(what + ": one kernel variant for both phases"));
                            if (gu.MG == d.MG) {
                                QVERIFY2(p.gu.MG == gu.MG && p.gu.S == gu.S && p.gu.KSL == gu.KSL && p.d.S == d.S &&
                                             p.d.KSL == d.KSL,
                                         qPrintable(what + ": agreeing plans kept"));
                            } else {
                                QVERIFY2(p.gu.MG != kStream, qPrintable(what + ": disagreeing plans re-planned staged"));
                                ++replanned;
                            }
                            ++cases;
                        }
        QVERIFY(cases > 100);
        qInfo("%d MoE phase plans, %d re-planned without streaming", cases, replanned);
    }

    // The rows of one decode-sized MoE job (moeJobRows: 8 unless TS_EXL3_MOE_JOB_ROWS or the override says otherwise):
    // the override takes 1..16, reports the previous one, and anything else restores the environment's. With 8-row
    // jobs the MoE phases of GLM-5.3-Flash's experts take the streaming unit's two-stage slices (the 16-row form
    // would not: one stage, twice the units) — the reason for the default.
    void moeJobRowsSwitch() {
        if (std::getenv("TS_EXL3_MOE_JOB_ROWS")) QSKIP("TS_EXL3_MOE_JOB_ROWS is set in this environment");
        QCOMPARE(moeJobRows(), 8);
        QCOMPARE(exl3SetMoeJobRows(16), -1);
        QCOMPARE(moeJobRows(), 16);
        QCOMPARE(exl3SetMoeJobRows(4), 16);
        QCOMPARE(moeJobRows(), 4);
        QCOMPARE(exl3SetMoeJobRows(17), 4);  // out of range: back to the environment's
        QCOMPARE(moeJobRows(), 8);
        QCOMPARE(exl3SetMoeJobRows(0), -1);
        QCOMPARE(moeJobRows(), 8);
        const auto [streamOn, regRing, oneStage] = switchesInForce();
        if (!streamOn || regRing || oneStage) return;
        const MoePlans p8 = planMoePhases(4, 2, 4, 2, 1, 256, 16, 128, 32, 30, 30 * 8, 8, 132);
        QCOMPARE(p8.gu.MG, int(kStream));
        QCOMPARE(p8.gu.KSL, 2 * stageTilesBase(4));
        // 16 rows: one-stage streaming slices, or (the split-K bound on partials keeping slices long) the staged unit.
        const MoePlans p16 = planMoePhases(4, 2, 4, 2, 1, 256, 16, 128, 32, 30, 30 * 16, 16, 132);
        QVERIFY(p16.gu.MG != kStream || p16.gu.KSL <= stageTilesBase(4));
    }

    // sm_120/121 (a GB10) give a block 99 KiB of shared memory, the H200 227 KiB. Under the smaller limit the
    // backend's plans — chooseMG, then planLaunch / planMoePhases with the limit — must all fit it (a launch
    // asking for more fails), and stay consistent; under the larger one nothing may change.
    void plansFitTheSharedMemoryLimit() {
        const size_t gb10 = 99 * 1024, h200 = 227 * 1024;
        const auto [streamOn, regRing, oneStage] = switchesInForce();
        struct Shape {
            int tilesK, NB;
        };
        const Shape shapes[] = {{16, 3}, {128, 32}, {256, 16}, {256, 96}, {768, 32}};
        int plans = 0, limited = 0;
        // Streaming allowed (a linear's plans) and not (a fused MoE phase re-planned staged, planMoePhases): since decode
        // jobs stream past the split-K bounds, only staged plans exceed 99 KiB unlimited (16-row jobs at K ≤ 2).
        for (const bool allowStream : {true, false})
        for (int bits = 1; bits <= 8; ++bits)
            for (const Shape& sh : shapes)
                for (int rows : {1, 8, 16, 40, 64, 512, 4096}) {
                    const int MG = chooseMG(double(rows), bits, gb10);
                    const int rpj = kGroupRows * MG, J = (rows + rpj - 1) / rpj, R = std::min(rows, rpj);
                    const QString what = QString("K=%1 k/16=%2 NB=%3 rows=%4 MG=%5 stream %6").arg(bits).arg(sh.tilesK)
                                             .arg(sh.NB).arg(rows).arg(MG).arg(allowStream);
                    const Plan p = planLaunch(bits, 2, MG, sh.tilesK, sh.NB, J, rows, R, false, 48, allowStream, gb10);
                    QVERIFY2(p.smem <= gb10, qPrintable(what + ": fits 99 KiB"));
                    check(p, bits, MG, sh.tilesK, sh.NB, J, R, false, streamOn && allowStream, regRing, oneStage, what);
                    const Plan big = planLaunch(bits, 2, chooseMG(double(rows), bits, h200), sh.tilesK, sh.NB, J, rows, R,
                                                false, 132, allowStream, h200);
                    const Plan none = planLaunch(bits, 2, chooseMG(double(rows)), sh.tilesK, sh.NB, J, rows, R, false, 132,
                                                 allowStream);
                    QVERIFY2(big.MG == none.MG && big.S == none.S && big.KSL == none.KSL && big.steps == none.steps &&
                                 big.smem == none.smem,
                             qPrintable(what + ": the H200's limit changes no plan"));
                    limited += none.smem > gb10;
                    ++plans;
                    if (QTest::currentTestFailed()) return;
                }
        QVERIFY(plans > 200);
        QVERIFY2(limited > 0, "some unlimited plans need more than 99 KiB (else this test checks nothing)");
        // The recipe's 4 bpw keeps its 64-row prefill jobs on a GB10; K = 2 cannot (64 rows of hi/lo inputs
        // alone are 128 KiB at its 32-tile stages).
        QCOMPARE(chooseMG(512.0, 4, gb10), kMaxMG);
        QCOMPARE(chooseMG(512.0, 2, gb10), 1);
        QCOMPARE(chooseMG(512.0, 2, h200), kMaxMG);
        QCOMPARE(chooseMG(512.0, 2, 0), kMaxMG);
        // The fused MoE's phases too (GLM-5.3-Flash's experts), decode to prefill.
        for (int bits = 1; bits <= 8; ++bits)
            for (int R : {1, 4, 16, 64}) {
                const int MG = R > 16 ? chooseMG(double(R), bits, gb10) : 1;
                const int r = std::min(R, kGroupRows * MG);
                const MoePlans m = planMoePhases(bits, 2, bits, 2, MG, 256, 16, 128, 32, 30, 30 * r, r, 48, gb10);
                QVERIFY2(m.gu.smem <= gb10 && m.d.smem <= gb10, qPrintable(QString("MoE K=%1 R=%2: fits 99 KiB").arg(bits).arg(R)));
                QCOMPARE(m.gu.MG, m.d.MG);
            }
    }

    // The fused MoE's eligibility of one projection (moePackedView, both MoE paths): the packed form when the
    // logical shape, K, codebook and 128-padding are what the kernels take, else null.
    void moePackedViewChecks() {
        struct Fake : PackedLinear {
            TrellisView t;
            int64_t in = 0, out = 0;
            bool packed = true;
            int64_t inFeatures() const override { return in; }
            int64_t outFeatures() const override { return out; }
            size_t packedBytes() const override { return t.trellisBytes(); }
            void forwardHost(const float*, int64_t, float*) const override {}
            const TrellisView* trellis() const override { return packed ? &t : nullptr; }
        };
        Fake f;
        f.in = 4000;
        f.out = 2000;
        f.t.k = 4096;
        f.t.n = 2048;
        f.t.bits = 4;
        f.t.codebook = 2;
        const WeightView w = WeightView::of(f);
        QCOMPARE(moePackedView(w, 2000, 4000), &f.t);
        QVERIFY(moePackedView(w, 4000, 2000) == nullptr);  // transposed logical shape
        WeightView dense = w;
        dense.packed = nullptr;
        QVERIFY(moePackedView(dense, 2000, 4000) == nullptr);
        WeightView stale = w;
        stale.rows = 1999;  // the view's shape disagrees with the packed linear's
        QVERIFY(moePackedView(stale, 1999, 4000) == nullptr);
        for (int bits : {0, 9}) {
            f.t.bits = bits;
            QVERIFY2(moePackedView(w, 2000, 4000) == nullptr, "K outside 1..8");
        }
        f.t.bits = 8;
        QCOMPARE(moePackedView(w, 2000, 4000), &f.t);
        f.t.codebook = 3;
        QVERIFY2(moePackedView(w, 2000, 4000) == nullptr, "unknown codebook");
        f.t.codebook = 0;
        f.t.k = 4000;
        QVERIFY2(moePackedView(w, 2000, 4000) == nullptr, "k not padded to 128");
        f.t.k = 4096;
        f.t.n = 2000;
        QVERIFY2(moePackedView(w, 2000, 4000) == nullptr, "n not padded to 128");
        f.t.n = 2048;
        f.packed = false;
        QVERIFY2(moePackedView(w, 2000, 4000) == nullptr, "another packed format");
    }

private:
    // The TS_EXL3_TUNE switches in force (exl3DecodeUnit names them): streaming on, the register ring, one-stage
    // slices.
    struct Switches {
        bool streamOn, regRing, oneStage;
    };
    static Switches switchesInForce() {
        const std::string unit = exl3DecodeUnit();
        return {unit.rfind("staged", 0) != 0, unit.rfind("streaming, register ring", 0) == 0,
                unit.find("one-stage slices") != std::string::npos};
    }

    static void check(const Plan& p, int bits, int MG, int tilesK, int NB, int J, int rows, bool pair, bool streamOn,
                      bool regRing, bool oneStage, const QString& what) {
        const auto msg = [&](const char* s) { return qPrintable(what + ": " + s); };
        QVERIFY2(p.S >= 1 && p.KSL >= 8 && p.KSL % 8 == 0, msg("slices of whole 128-input blocks"));
        QVERIFY2(int64_t(p.S) * p.KSL >= tilesK && int64_t(p.S - 1) * p.KSL < tilesK, msg("k covered once"));
        QCOMPARE(p.blocks, int64_t(J) * NB * p.S);
        QCOMPARE(p.partials, p.S > 1 || pair);
        QVERIFY2(p.R == rows, msg("rows reserved = the largest job"));
        // The longest slice one streaming unit takes, written out: two stages for ≤ 8 rows at K ≥ 3 with the
        // shared-memory ring, else one.
        // (TS_EXL3_TUNE bit 64 keeps slices to one stage; the unit's shared-memory layout stays the same.)
        const int stageK = stageTiles(bits, 1);
        const int layoutK = (rows <= 8 && bits >= 3 && !regRing ? 2 : 1) * stageK;
        const int streamK = oneStage ? stageK : layoutK;
        if (MG > 1) {
            QVERIFY2(p.MG == kMaxMG, msg("prefill jobs keep 64-row units"));
        } else {
            QVERIFY2((p.MG == kStream) == (streamOn && p.KSL <= streamK),
                     msg("streams exactly the 16-row plans whose slice one streaming unit takes"));
            QCOMPARE(p.steps, p.MG == kStream ? 1 : (p.KSL + stageK - 1) / stageK);
        }
        const int KS = stageTiles(bits, p.MG);
        const size_t red = size_t(p.R) * 128 * 4;  // the epilogue's sums over the start of shared memory
        if (p.MG == kStream) {
            // Staged activations of the longest slice, then Σ a and exponents of two stages ([2][16] each), flag.
            const size_t xs = size_t(layoutK) * streamRows(p.R) * 32, head = xs + (4 * kGroupRows + 4) * 4;
            const size_t rings = regRing ? 0 : size_t(kWarps) * ringSteps(bits) * 2 * tileWords(bits) * 4;
            QCOMPARE(p.smem, head + rings);
            QVERIFY2(head % 16 == 0, msg("cp.async rings 16-byte aligned"));
            QVERIFY2(red <= xs, msg("epilogue sums overlay only the staged activations"));
            QVERIFY2(p.smem <= 227 * 1024, msg("fits an SM's shared memory"));
        } else {
            const size_t stage = size_t(KS) * kUnitTilesN * tileWords(bits) * 4;
            const size_t body = size_t(p.steps > 1 ? 2 : 1) * stage + size_t(KS) * p.R * 64;  // stages + hi/lo inputs
            QCOMPARE(p.smem, body + (2 * kMaxRows + 4) * 4);
            QVERIFY2(red <= body, msg("epilogue sums overlay only the stages and inputs (not the exponents / flag)"));
            QVERIFY2(p.smem <= 227 * 1024, msg("fits an SM's shared memory"));
        }
    }
};

QTEST_APPLESS_MAIN(TestExl3Plan)
#include "test_exl3_plan.moc"
