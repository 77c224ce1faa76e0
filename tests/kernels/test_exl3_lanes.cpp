// The EXL3 CUDA decoder's lane arithmetic on the host (kernels/cuda/cuda_exl3.cuh; no GPU needed): the 16-bit
// states a lane extracts for its 8 tile positions — from memory (laneStates: the staged unit and the streaming
// unit's shared-memory ring) and through a word getter that stands for the register ring's shuffles
// (laneStatesFrom: lane t holds words t and t + 32 of the tile) — against the CPU decoder's direct window
// formula (engine/quant/exl3_trellis, spec §3.2), for K = 1..8 on random tiles; and the MUL1 affine map the
// streaming unit applies per token (kinv·(1024 + bytesum) + kbias, exact) against the CPU's fp16 codebook
// values: within half an fp16 ulp for all 65,536 states (the numerics the self-test's decode tolerance assumes);
// the streaming unit's ring pieces (ringPiece): every word of a slot copied once, from the right place; the
// 3INST/MCG halves route (halvesState, halvesDup) multiplied out through the mma's fragment layouts; and that
// route's K = 4 hashes (laneHashes4) against the hash of each state.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/cuda_exl3.cuh"
#include "quant/exl3_format.h"
#include "quant/exl3_trellis.h"

using namespace ts;

class TestExl3Lanes : public QObject {
    Q_OBJECT

    template <int K>
    void checkK(std::mt19937_64& rng) {
        constexpr int TW = exl3cuda::tileWords(K);
        for (int rep = 0; rep < 40; ++rep) {
            std::vector<uint8_t> tile(size_t(32 * K));
            for (auto& b : tile) b = uint8_t(rng());
            if (rep == 0) std::fill(tile.begin(), tile.end(), uint8_t(0xFF));  // all-ones stream
            uint32_t words[64];
            exl3TileWords(tile.data(), K, words);
            for (int lane = 0; lane < 32; ++lane) {
                uint32_t st[8], sr[8];
                exl3cuda::laneStates<K>(words, lane, st);
                // The register ring: word i lives in register i / 32 of lane i % 32; every index asked for
                // must be a word of the tile (lanes hold nothing else).
                bool inRange = true;
                exl3cuda::laneStatesFrom<K>(
                    [&](uint32_t i) {
                        inRange = inRange && i < uint32_t(TW);
                        const uint32_t reg0 = words[i % 32], reg1 = (i % 32) + 32 < uint32_t(TW) ? words[i % 32 + 32] : 0u;
                        return i < 32 ? reg0 : reg1;
                    },
                    lane, sr);
                QVERIFY2(inRange, qPrintable(QString("K=%1 lane %2 asks for a word past the tile").arg(K).arg(lane)));
                for (int j = 0; j < 8; ++j) {
                    const uint32_t want = exl3StateAt(words, K, 8 * lane + j);
                    if (st[j] != want || sr[j] != want)
                        QFAIL(qPrintable(QString("K=%1 rep %2 lane %3 j %4: memory %5, ring %6, CPU %7")
                                             .arg(K).arg(rep).arg(lane).arg(j).arg(st[j]).arg(sr[j]).arg(want)));
                }
            }
        }
    }

private slots:
    void laneStatesMatchTheCpuDecoder() {
        std::mt19937_64 rng(11);
        checkK<1>(rng);
        checkK<2>(rng);
        checkK<3>(rng);
        checkK<4>(rng);
        checkK<5>(rng);
        checkK<6>(rng);
        checkK<7>(rng);
        checkK<8>(rng);
    }

    // K = 4's special path (laneStates4: words t − 1 and t) is what both streaming rings call directly.
    void laneStates4IsTheGeneralWindow() {
        std::mt19937_64 rng(5);
        for (int rep = 0; rep < 200; ++rep) {
            const uint32_t w0 = uint32_t(rng()), w1 = uint32_t(rng());
            uint32_t st[8];
            exl3cuda::laneStates4(w0, w1, st);
            const uint64_t win = (uint64_t(w0) << 32) | w1;
            for (int j = 0; j < 8; ++j) QCOMPARE(st[j], uint32_t((win >> (28 - 4 * j)) & 0xFFFFu));
        }
    }

    // The halves route's K = 4 hashes (laneHashes4: a low half's hash from its word's and the high half's,
    // without the mask) against the hash of each state, for both codebooks; words of all ones and zeros too.
    void laneHashes4AreTheStatesHashes() {
        std::mt19937_64 rng(17);
        for (int rep = 0; rep < 400; ++rep) {
            const uint32_t w0 = rep == 0 ? 0xFFFFFFFFu : rep == 1 ? 0u : uint32_t(rng());
            const uint32_t w1 = rep == 0 ? 0xFFFFFFFFu : rep == 1 ? 0u : uint32_t(rng());
            uint32_t st[8], x3[8], xm[8];
            exl3cuda::laneStates4(w0, w1, st);
            exl3cuda::laneHashes4<0>(w0, w1, x3);
            exl3cuda::laneHashes4<1>(w0, w1, xm);
            for (int j = 0; j < 8; ++j) {
                QCOMPARE(x3[j], st[j] * 89226354u + 64248484u);  // 3INST (spec §3.3)
                QCOMPARE(xm[j], st[j] * 0xCBAC1FEDu);            // MCG
            }
        }
    }

    // The kernels' multipliers are the checkpoint format's (engine/quant/exl3_format.h), written once each.
    void multipliersAreTheFormats() {
        QCOMPARE(exl3cuda::kMul1Mul, kExl3Mul1Multiplier);
        QCOMPARE(exl3cuda::hashMul(1), kExl3McgMultiplier);
        QCOMPARE(exl3cuda::kMul1Mul, 0x83DCD12Du);  // spec §3.3
    }

    void mul1AffineValueWithinHalfAnUlp() {
        const float* lut = exl3CodebookLutF32(Exl3Codebook::Mul1);
        int exact = 0;
        for (uint32_t s = 0; s < 65536; ++s) {
            const uint32_t x = s * 0x83DCD12Du;
            const int bytesum = int(x & 0xFF) + int((x >> 8) & 0xFF) + int((x >> 16) & 0xFF) + int(x >> 24);
            const double v = double(exl3cuda::kMul1Inv) * (1024.0 + bytesum) + double(exl3cuda::kMul1Bias);
            const double ref = lut[s];
            int e = 0;
            std::frexp(ref == 0.0 ? v : ref, &e);  // |ref| in [2^(e−1), 2^e): fp16 ulp 2^(e−11) (normal range)
            const double halfUlp = std::ldexp(1.0, std::max(e - 11, -24) - 1);
            if (std::fabs(v - ref) > halfUlp * (1 + 1e-9))
                QFAIL(qPrintable(QString("state %1: affine %2, LUT %3").arg(s).arg(v, 0, 'g', 12).arg(ref, 0, 'g', 12)));
            exact += v == ref;
        }
        QVERIFY(exact < 65536);  // the map is not the LUT itself: the streaming unit really skips a rounding
    }

    // The streaming unit's shared-memory ring (ringPiece; the device's addresses are checked against it at
    // compile time): a slot's 16-byte pieces, over all lanes and copies, fill its 2 × 16K words exactly once,
    // each from the same word of the same k-tile in global memory (k-tile h of the pair, word w of the warp's
    // two contiguous n-tiles) — what ringStates reads back as k-tile h, n-tile w / 8K.
    void ringPiecesFillASlotOnce() {
        for (int K = 1; K <= 8; ++K) {
            const int kWords = 16 * K;  // one k-tile of the warp: two n-tiles of 8K words
            std::vector<int> written(size_t(2 * kWords), 0);
            for (int lane = 0; lane < 32; ++lane) {
                for (int r = 0; r < exl3cuda::ringPieces(K) + 1; ++r) {  // + 1: a copy past the last is none
                    const exl3cuda::RingPiece p = exl3cuda::ringPiece(K, lane, r);
                    if (!p.valid) continue;
                    QVERIFY2(r < exl3cuda::ringPieces(K), qPrintable(QString("K=%1 lane %2: copy %3").arg(K).arg(lane).arg(r)));
                    QVERIFY(p.h >= 0 && p.h < 2 && p.w >= 0 && 4 * p.w + 4 <= kWords);
                    for (int i = 0; i < 4; ++i)  // slot word h·16K + 4w + i ← k-tile h, word 4w + i
                        ++written[size_t(p.h * kWords + 4 * p.w + i)];
                }
            }
            for (int wd = 0; wd < 2 * kWords; ++wd)
                QVERIFY2(written[size_t(wd)] == 1,
                         qPrintable(QString("K=%1: slot word %2 written %3 times").arg(K).arg(wd).arg(written[size_t(wd)])));
        }
    }

    // The halves route of the streaming unit (cuda_exl3.cuh: halvesState, halvesDup), multiplied out on the
    // host with PTX's m16n8k16 fragment layouts — A: lane (g, c) register r holds row g + 8·(r & 1) at k
    // 2c + 8·(r >> 1) (low half) and + 1 (high half); B: registers 0, 1 hold k 2c, 2c+1 and 2c+8, 2c+9 of
    // column g — with __byte_perm's semantics, against W·x written directly. The weight at lane position j is
    // row g + 8·(j ≥ 4), input 2c + (j & 1) + 8·((j >> 1) & 1) (the layout the self-test has always checked);
    // its value is lo + hi of its two halves. Integers stand for the fp16 values (only the indexing is tested).
    void halvesRouteMultipliesOut() {
        const auto bytePerm = [](uint32_t a, uint32_t b, uint32_t sel) {
            const uint64_t v = (uint64_t(b) << 32) | a;
            uint32_t r = 0;
            for (int i = 0; i < 4; ++i) r |= uint32_t((v >> (8 * ((sel >> (4 * i)) & 7))) & 0xFF) << (8 * i);
            return r;
        };
        std::mt19937_64 rng(3);
        uint32_t wreg[32][8];      // lane, state j: (lo, hi) halves of its weight
        int64_t W[16][16] = {};    // row, input: lo + hi
        uint32_t act[8][16];       // token, input
        for (int lane = 0; lane < 32; ++lane)
            for (int j = 0; j < 8; ++j) {
                const uint32_t lo = uint32_t(rng() % 200), hi = uint32_t(rng() % 200);
                wreg[lane][j] = lo | (hi << 16);
                const int row = (lane >> 2) + 8 * (j >= 4), k = 2 * (lane & 3) + (j & 1) + 8 * ((j >> 1) & 1);
                QCOMPARE(W[row][k], int64_t(0));  // each (row, input) once
                W[row][k] = int64_t(lo) + hi;
            }
        for (auto& t : act)
            for (auto& v : t) v = uint32_t(rng() % 300);
        int64_t D[16][8] = {};
        for (int I = 0; I < 2; ++I) {
            int64_t A[16][16] = {}, B[16][8] = {};
            for (int lane = 0; lane < 32; ++lane) {
                const int g = lane >> 2, c = lane & 3;
                for (int r = 0; r < 4; ++r) {
                    const uint32_t a = wreg[lane][exl3cuda::halvesState(I, r)];
                    const int row = g + 8 * (r & 1), k = 2 * c + 8 * (r >> 1);
                    A[row][k] = a & 0xFFFF;
                    A[row][k + 1] = a >> 16;
                }
                for (int q = 0; q < 2; ++q) {  // the staged word of token g at k 2c + 8q, 2c + 8q + 1
                    const int k = 2 * c + 8 * q;
                    const uint32_t w = act[g][k] | (act[g][k + 1] << 16);
                    const uint32_t b = bytePerm(w, w, exl3cuda::halvesDup(I));
                    B[k][g] = b & 0xFFFF;
                    B[k + 1][g] = b >> 16;
                }
            }
            for (int m = 0; m < 16; ++m)
                for (int n = 0; n < 8; ++n)
                    for (int k = 0; k < 16; ++k) D[m][n] += A[m][k] * B[k][n];
        }
        for (int m = 0; m < 16; ++m)
            for (int n = 0; n < 8; ++n) {
                int64_t ref = 0;
                for (int k = 0; k < 16; ++k) ref += W[m][k] * act[n][k];
                QVERIFY2(D[m][n] == ref, qPrintable(QString("row %1 token %2: %3, W·x %4").arg(m).arg(n).arg(D[m][n]).arg(ref)));
            }
    }
};

QTEST_APPLESS_MAIN(TestExl3Lanes)
#include "test_exl3_lanes.moc"
