// The EXL3 quantizer (issue 3, "Quantizer" and "Quality, measured"): the Viterbi kernels agree, the
// search is tail-biting and re-encodes ideal tiles losslessly, the packed output round-trips bit for bit
// through safetensors + bindExl3Linear, the MSE on i.i.d. Gaussian weights is within 1.25× of the
// rate-distortion bound 2^(−2K) at K = 2, 3, 4, and LDLQ with a Hessian beats plain rounding on the proxy
// loss. Numbers are printed (docs/QUALITY.md quotes them).
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "quant/exl3_gemm.h"
#include "quant/exl3_ldlq.h"
#include "quant/exl3_quantize.h"
#include "quant/exl3_trellis.h"
#include "quant/exl3_viterbi.h"

using namespace ts;

namespace {

std::vector<float> gaussian(int64_t count, uint32_t seed, float sigma = 1.0f) {
    std::mt19937 g(seed);
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> v(static_cast<size_t>(count));
    for (auto& x : v) x = nd(g);
    return v;
}

// W = diag(suh)·BH·Ŵ·BH·diag(svh) of a result, [k, n], through the engine's reconstruction.
std::vector<float> reconstruct(const Exl3Quantized& q) {
    std::vector<float> w(static_cast<size_t>(q.k * q.n));
    exl3Reconstruct(exl3LinearView(q), w.data());
    return w;
}

// Mean squared error over the logical [in, out] block, per weight.
double mse(const std::vector<float>& w, const Exl3Quantized& q) {
    const std::vector<float> r = reconstruct(q);
    double s = 0;
    for (int64_t i = 0; i < q.in; ++i)
        for (int64_t j = 0; j < q.out; ++j) {
            const double d = double(w[size_t(i * q.out + j)]) - r[size_t(i * q.n + j)];
            s += d * d;
        }
    return s / double(q.in * q.out);
}

// tr((W − Ŵ)ᵀ H (W − Ŵ)) in the original basis, W [in, out], H [in, in].
double proxy(const std::vector<float>& w, const Exl3Quantized& q, const std::vector<float>& h) {
    const std::vector<float> r = reconstruct(q);
    const int64_t in = q.in, out = q.out;
    std::vector<double> hd(h.begin(), h.end());
    std::vector<float> a(static_cast<size_t>(in * out)), b(static_cast<size_t>(in * out));
    for (int64_t i = 0; i < in; ++i)
        for (int64_t j = 0; j < out; ++j) a[size_t(i * out + j)] = w[size_t(i * out + j)], b[size_t(i * out + j)] = r[size_t(i * q.n + j)];
    return exl3ProxyLoss(a.data(), b.data(), in, out, hd.data(), ThreadPool::global());
}

}  // namespace

class TestExl3Quantize : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { qInfo("Viterbi kernel: %s, threads: %d", exl3ViterbiKernelName(), ThreadPool::global().size()); }

    // Every SIMD kernel the CPU has gives the generic kernel's states exactly (same ops, same ties).
    void viterbiKernelsAgree() {
        const std::vector<float> w = gaussian(256, 7, 1.2f);
        for (int K = 1; K <= 8; ++K) {
            const Exl3Codebook cb = Exl3Codebook(K % 3);
            QVERIFY(exl3ViterbiUseKernel("generic"));
            uint16_t ref[256], st[256];
            const double e0 = exl3ViterbiTile(w.data(), K, cb, ref);
            for (const char* kern : {"avx2", "avx512"}) {
                if (!exl3ViterbiUseKernel(kern)) continue;
                const double e = exl3ViterbiTile(w.data(), K, cb, st);
                QVERIFY2(std::memcmp(ref, st, sizeof ref) == 0 && e == e0, qPrintable(QString("%1 K=%2").arg(kern).arg(K)));
            }
        }
        QVERIFY(exl3ViterbiUseKernel("auto"));
    }

    // Spec §6.6 items 3 and 4: the encoder's path closes (s_0 >> K == s_255 & (2^(16−K)−1)), and a tile
    // decoded from random symbols is re-encoded with zero error, for K = 1..8 and all codebooks.
    void tailBitingAndIdealReencode() {
        std::mt19937 g(11);
        for (int K = 1; K <= 8; ++K)
            for (int cb = 0; cb < 3; ++cb) {
                uint16_t sym[256], packed[128], states[256];
                for (auto& s : sym) s = uint16_t(g());
                exl3PackTile(sym, K, packed);
                exl3TileStates(reinterpret_cast<const uint8_t*>(packed), K, states);
                const float* lut = exl3CodebookLutF32(Exl3Codebook(cb));
                float w[256], v[256];
                for (int p = 0; p < 256; ++p) w[p] = lut[states[p]];
                uint16_t found[256];
                const double err = exl3ViterbiTile(w, K, Exl3Codebook(cb), found, v);
                QVERIFY2(err == 0.0, qPrintable(QString("K=%1 cb=%2 err=%3").arg(K).arg(cb).arg(err)));
                const uint16_t mask = uint16_t((1u << (16 - K)) - 1u);
                QCOMPARE(uint16_t(found[0] >> K), uint16_t(found[255] & mask));
                // The packed stream of the found states reproduces them exactly.
                uint16_t repacked[128], again[256];
                exl3PackTile(found, K, repacked);
                exl3TileStates(reinterpret_cast<const uint8_t*>(repacked), K, again);
                QVERIFY(std::memcmp(found, again, sizeof again) == 0);
            }
    }

    // The written tensors bind (bindExl3Linear) and decode to exactly the quantizer's own Ŵ, and the
    // original-basis reconstruction from the file equals the in-memory one bit for bit. Unpadded shapes,
    // all codebooks, with and without a Hessian.
    void roundTripIsExact() {
        const int64_t in = 200, out = 300;
        const std::vector<float> w = gaussian(in * out, 3, 0.02f);
        const std::vector<float> x = gaussian(512 * in, 4);
        std::vector<float> h(static_cast<size_t>(in * in), 0.0f);
        for (int64_t t = 0; t < 512; ++t)
            for (int64_t i = 0; i < in; ++i)
                for (int64_t j = 0; j < in; ++j) h[size_t(i * in + j)] += x[size_t(t * in + i)] * x[size_t(t * in + j)];
        QTemporaryDir dir;
        for (int cb = 0; cb < 3; ++cb) {
            Exl3QuantOptions o;
            o.bits = 3 + cb;
            o.codebook = Exl3Codebook(cb);
            o.seed = 99 + uint64_t(cb);
            const Exl3Quantized q = exl3Quantize(w.data(), in, out, cb == 1 ? nullptr : h.data(), o);
            QCOMPARE(q.k, int64_t(256));
            QCOMPARE(q.n, int64_t(384));
            QCOMPARE(q.usedHessian, cb != 1);
            const std::string path = dir.filePath(QString("q%1.safetensors").arg(cb)).toStdString();
            writeSafetensors(path, exl3Tensors(q, "layer.proj"));
            SafetensorsFile f(path);
            const Exl3Linear lin = bindExl3Linear(tensorLookup(f), "layer.proj");
            QCOMPARE(lin.bits, o.bits);
            QCOMPARE(lin.codebook, o.codebook);
            std::vector<float> rot(static_cast<size_t>(q.k * q.n));
            exl3ReconstructRotated(lin, rot.data());
            QVERIFY(std::memcmp(rot.data(), q.rotated.data(), rot.size() * 4) == 0);
            std::vector<float> fromFile(rot.size());
            exl3Reconstruct(lin, fromFile.data());
            const std::vector<float> mine = reconstruct(q);
            QVERIFY(std::memcmp(fromFile.data(), mine.data(), mine.size() * 4) == 0);
            // Sanity: it is W (relative error as a 3..5-bit code gives), and the padding decodes to 0.
            double num = 0, den = 0, pad = 0;
            for (int64_t i = 0; i < q.k; ++i)
                for (int64_t j = 0; j < q.n; ++j) {
                    const double r = mine[size_t(i * q.n + j)];
                    if (i < in && j < out) {
                        num += (r - w[size_t(i * out + j)]) * (r - w[size_t(i * out + j)]);
                        den += double(w[size_t(i * out + j)]) * w[size_t(i * out + j)];
                    } else if (j >= out) {
                        pad = std::max(pad, std::fabs(r));
                    }
                }
            qInfo("round trip cb=%d K=%d: relative MSE %.4g, g = %.3f, proxy %.4g, max |pad column| %g", cb, o.bits,
                  num / den, double(q.scale), q.proxyError, pad);
            QVERIFY(num / den < 0.1);
            QCOMPARE(pad, 0.0);
        }
    }

    // MSE per weight of i.i.d. N(0, 1) matrices against the Gaussian rate-distortion bound 2^(−2K).
    // Target (issue 3): ≤ 1.25× the bound.
    void gaussianMseNearBound_data() {
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("cols");
        QTest::addColumn<int>("cb");
        // 256x256 for every codebook, 512x256 for the default (MUL1); TS_EXL3_QUALITY_ALL=1 runs 512x256 for
        // all three too (the docs/QUALITY.md table), ~10 s more on 2 cores.
        const bool all = qEnvironmentVariableIntValue("TS_EXL3_QUALITY_ALL") != 0;
        for (auto [r, c] : {std::pair{256, 256}, {512, 256}})
            for (int cb : {0, 1, 2})
                if (r == 256 || all || cb == int(Exl3Codebook::Mul1)) {
                    const std::string name = std::to_string(r) + "x" + std::to_string(c) + " " +
                                             std::string(exl3CodebookName(Exl3Codebook(cb)));
                    QTest::newRow(name.c_str()) << r << c << cb;
                }
    }
    void gaussianMseNearBound() {
        QFETCH(int, rows);
        QFETCH(int, cols);
        QFETCH(int, cb);
#ifdef __SANITIZE_ADDRESS__
        // Under the sanitizers (scripts/test.sh's second build, at -O0) each row takes ~20 s and the quality bound is
        // not what that build is for: one row exercises the quantizer's memory accesses; the same suite's first
        // build checks every row's bound.
        if (rows != 256 || cb != int(Exl3Codebook::Mul1))
            QSKIP("the sanitized build runs the 256x256 MUL1 row only; the unsanitized build of scripts/test.sh runs all");
#endif
        const std::vector<float> w = gaussian(int64_t(rows) * cols, uint32_t(rows + cols));
        double worst = 0;
        QString line;
        for (int K = 2; K <= 4; ++K) {
            Exl3QuantOptions o;
            o.bits = K;
            o.codebook = Exl3Codebook(cb);
            const Exl3Quantized q = exl3Quantize(w.data(), rows, cols, nullptr, o);
            const double ratio = mse(w, q) / std::pow(2.0, -2.0 * K);
            line += QString("  K=%1: %2 (g %3)").arg(K).arg(ratio, 0, 'f', 3).arg(double(q.scale), 0, 'f', 3);
            worst = std::max(worst, ratio);
        }
        qInfo("Gaussian %dx%d %s MSE/bound:%s", rows, cols, exl3CodebookName(Exl3Codebook(cb)).data(), qPrintable(line));
        QVERIFY2(worst <= 1.25, qPrintable(QString("worst MSE/bound %1 > 1.25").arg(worst)));
    }

    // With correlated inputs (H = XᵀX, X = Z·A), LDLQ's error feedback gives a lower proxy loss
    // tr((W−Ŵ)ᵀ H (W−Ŵ)) than quantizing every tile on its own.
    void ldlqBeatsPlainRounding() {
        const int64_t in = 256, out = 256, T = 1024;
        const std::vector<float> w = gaussian(in * out, 21);
        const std::vector<float> z = gaussian(T * in, 22), a = gaussian(in * in, 23);
        // Inputs with a decaying spectrum: x = Σ_j z_j · a_j / (1 + j/8).
        std::vector<float> x(static_cast<size_t>(T * in), 0.0f);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < in; ++j) {
                const float zj = z[size_t(t * in + j)] / (1.0f + float(j) / 8.0f);
                for (int64_t i = 0; i < in; ++i) x[size_t(t * in + i)] += zj * a[size_t(j * in + i)];
            }
        std::vector<float> h(static_cast<size_t>(in * in), 0.0f);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t i = 0; i < in; ++i)
                for (int64_t j = 0; j < in; ++j) h[size_t(i * in + j)] += x[size_t(t * in + i)] * x[size_t(t * in + j)];
        for (int K : {2, 4}) {
            Exl3QuantOptions o;
            o.bits = K;
            const Exl3Quantized withH = exl3Quantize(w.data(), in, out, h.data(), o);
            const Exl3Quantized plain = exl3Quantize(w.data(), in, out, nullptr, o);
            QVERIFY(withH.usedHessian);
            const double pH = proxy(w, withH, h), pP = proxy(w, plain, h);
            qInfo("K=%d proxy loss tr(EᵀHE): LDLQ %.4g, plain %.4g, ratio %.3f (MSE LDLQ %.4g, plain %.4g)", K, pH, pP,
                  pH / pP, mse(w, withH), mse(w, plain));
            QVERIFY2(pH < 0.8 * pP, qPrintable(QString("LDLQ/plain = %1").arg(pH / pP)));
        }
    }

    void rejectsBadInput() {
        const std::vector<float> w(128 * 128, 0.5f);
        Exl3QuantOptions o;
        o.bits = 9;
        QVERIFY_THROWS_EXCEPTION(ts::Error, exl3Quantize(w.data(), 128, 128, nullptr, o));
        o.bits = 4;
        std::vector<float> bad = w;
        bad[5] = NAN;
        QVERIFY_THROWS_EXCEPTION(ts::Error, exl3Quantize(bad.data(), 128, 128, nullptr, o));
        // An all-zero weight quantizes to exactly zero.
        const std::vector<float> zero(64 * 32, 0.0f);
        const Exl3Quantized q = exl3Quantize(zero.data(), 64, 32, nullptr, o);
        for (float v : reconstruct(q)) QCOMPARE(v, 0.0f);
    }
};

QTEST_GUILESS_MAIN(TestExl3Quantize)
#include "test_exl3_quantize.moc"
