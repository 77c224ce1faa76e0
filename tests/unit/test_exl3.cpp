// EXL3 reading and computing: every test vector of shared/specs/exl3.md §6 bit-exact (codebook values,
// LUT CRCs and moments, the K = 4 packing example A, the 256×256 end-to-end example B, generated as the
// spec describes), property tests (bitstream round trips and tail-biting for K = 1..8, the permutation,
// the Hadamard, GEMV/GEMM == reconstruct-then-matmul on random shapes for K = 1..8 and all codebooks,
// padding, thread-count invariance), and one case per malformed-binding rule.
// Set TS_EXL3_BENCH=1 to run the GEMV benchmark (4096×2048, K = 4, 1 and 2 threads).
#include "../common/expect_error.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "quant/exl3_format.h"
#include "quant/exl3_gemm.h"
#include "quant/exl3_hadamard.h"
#include "quant/exl3_trellis.h"

#include <QTemporaryDir>
#include <QtTest>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

using namespace ts;

namespace {

// ---- helpers ------------------------------------------------------------------------------------------


uint32_t crc32(const uint8_t* p, size_t n) {
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int b = 0; b < 8; ++b) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

Exl3Codebook cbOf(int i) { return Exl3Codebook(i); }

// Naive H128 entry (−1)^popcount(a & b): an independent reference for the FWHT.
double had(int a, int b) { return (std::popcount(unsigned(a & b)) & 1) ? -1.0 : 1.0; }

// A self-contained linear: owns its trellis bytes; `lin` points into them.
struct OwnedLinear {
    std::vector<uint16_t> trellis;  // [k/16, n/16, 16K]
    Exl3Linear lin;
};

// Random symbols → packed tiles; fp16-exact random scales; optional bias.
OwnedLinear randomLinear(std::mt19937& rng, int64_t k, int64_t n, int bits, Exl3Codebook cb, bool bias) {
    OwnedLinear o;
    const int64_t tiles = (k / 16) * (n / 16);
    o.trellis.resize(size_t(tiles * 16 * bits));
    std::uniform_int_distribution<int> sym(0, 65535);
    uint16_t symbols[256];
    for (int64_t t = 0; t < tiles; ++t) {
        for (auto& s : symbols) s = uint16_t(sym(rng));
        exl3PackTile(symbols, bits, o.trellis.data() + t * 16 * bits);
    }
    std::uniform_real_distribution<float> u(0.05f, 0.5f);
    std::bernoulli_distribution sign(0.5);
    auto scale = [&] { return f16ToF32(f32ToF16(sign(rng) ? -u(rng) : u(rng))); };
    o.lin.prefix = "test";
    o.lin.k = k;
    o.lin.n = n;
    o.lin.bits = bits;
    o.lin.codebook = cb;
    o.lin.trellis = reinterpret_cast<const uint8_t*>(o.trellis.data());
    for (int64_t i = 0; i < k; ++i) o.lin.suh.push_back(scale());
    for (int64_t j = 0; j < n; ++j) o.lin.svh.push_back(scale());
    if (bias)
        for (int64_t j = 0; j < n; ++j) o.lin.bias.push_back(scale());
    return o;
}

// W = diag(suh)·BH·Ŵ·BH·diag(svh) in fp64 with the naive Hadamard matrix, from a rotated Ŵ [k, n].
std::vector<double> referenceW(const std::vector<float>& what, const Exl3Linear& l) {
    const int64_t k = l.k, n = l.n;
    const double s = 1.0 / std::sqrt(128.0);
    std::vector<double> left(size_t(k * n), 0.0), w(size_t(k * n), 0.0);
    for (int64_t i = 0; i < k; ++i) {
        const int64_t b = i / 128 * 128;
        for (int64_t t = 0; t < 128; ++t) {
            const double h = had(int(i - b), int(t)) * s;
            const float* src = &what[size_t((b + t) * n)];
            double* dst = &left[size_t(i * n)];
            for (int64_t j = 0; j < n; ++j) dst[j] += h * src[j];
        }
    }
    for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < n; ++j) {
            const int64_t b = j / 128 * 128;
            double acc = 0.0;
            for (int64_t t = 0; t < 128; ++t) acc += left[size_t(i * n + b + t)] * had(int(t), int(j - b)) * s;
            w[size_t(i * n + j)] = double(l.suh[size_t(i)]) * acc * double(l.svh[size_t(j)]);
        }
    return w;
}

double relFrobenius(const std::vector<float>& a, const std::vector<double>& ref) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
        den += ref[i] * ref[i];
    }
    return std::sqrt(num / den);
}

// ---- safetensors fixtures -----------------------------------------------------------------------------

struct Owned {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

template <typename T>
Owned owned(std::string name, DType dt, std::vector<int64_t> shape, const std::vector<T>& v) {
    Owned o{std::move(name), dt, std::move(shape), {}};
    o.bytes.resize(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
    return o;
}

Owned f16Vec(std::string name, const std::vector<float>& v) {
    std::vector<uint16_t> h;
    for (float f : v) h.push_back(f32ToF16(f));
    return owned(std::move(name), DType::F16, {int64_t(v.size())}, h);
}

Owned i32Scalar(std::string name, uint32_t value, std::vector<int64_t> shape = {}) {
    return owned(std::move(name), DType::I32, std::move(shape), std::vector<uint32_t>{value});
}

void writeFile(const std::string& path, const std::vector<Owned>& ts) {
    std::vector<TensorToWrite> w;
    for (const auto& t : ts) w.push_back({t.name, t.dtype, t.shape, t.bytes.data()});
    writeSafetensors(path, w);
}

// The tensors of an OwnedLinear under `prefix` (trellis, suh, svh, flag, bias).
std::vector<Owned> linearTensors(const OwnedLinear& o, const std::string& prefix) {
    const auto& l = o.lin;
    std::vector<Owned> v = {owned(prefix + ".trellis", DType::I16, {l.k / 16, l.n / 16, 16 * l.bits}, o.trellis),
                            f16Vec(prefix + ".suh", l.suh), f16Vec(prefix + ".svh", l.svh)};
    if (l.codebook == Exl3Codebook::Mcg) v.push_back(i32Scalar(prefix + ".mcg", kExl3McgMultiplier));
    if (l.codebook == Exl3Codebook::Mul1) v.push_back(i32Scalar(prefix + ".mul1", kExl3Mul1Multiplier));
    if (!l.bias.empty()) v.push_back(f16Vec(prefix + ".bias", l.bias));
    return v;
}

// ---- spec §6.5 generator --------------------------------------------------------------------------------

struct ExampleB {
    OwnedLinear o;
    std::vector<float> x;  // [256]
};

ExampleB exampleB() {
    ExampleB e;
    const int K = 3;
    e.o.trellis.resize(16 * 16 * 16 * K);
    uint32_t st = 12345;
    uint16_t symbols[256];
    for (int tk = 0; tk < 16; ++tk)
        for (int tn = 0; tn < 16; ++tn) {
            for (int p = 0; p < 256; ++p) {
                st = st * 1664525u + 1013904223u;
                symbols[p] = uint16_t(st >> 29);
            }
            exl3PackTile(symbols, K, e.o.trellis.data() + (tk * 16 + tn) * 16 * K);
        }
    auto& l = e.o.lin;
    l.prefix = "exampleB";
    l.k = l.n = 256;
    l.bits = K;
    l.codebook = Exl3Codebook::Mul1;
    l.trellis = reinterpret_cast<const uint8_t*>(e.o.trellis.data());
    for (int i = 0; i < 256; ++i) {
        l.suh.push_back(float(1 - 2 * (((i * i + 3 * i) % 7) % 2)) * (0.25f + 0.125f * float(i % 4)));
        l.svh.push_back(float(1 - 2 * ((i / 3) % 2)) * (0.5f + 0.25f * float(i % 3)));
        e.x.push_back(float((i % 7) - 3) * 0.125f);
    }
    return e;
}

}  // namespace

class TestExl3 : public QObject {
    Q_OBJECT

private slots:
    // §6.1 / §6.2
    void codebookValues() {
        struct Row {
            uint16_t state, v[3];
        };
        const Row rows[] = {
            {0x0000, {0x3A25, 0x3F60, 0xC2E8}}, {0x0001, {0xBB5B, 0x304E, 0x3921}}, {0x0002, {0x3B74, 0xBA13, 0xB72D}},
            {0x0003, {0x34B6, 0x3AB8, 0x3239}}, {0x00FF, {0x3CD1, 0xBD26, 0x3AB3}}, {0x0100, {0x3C3F, 0xBAF0, 0xB3DB}},
            {0x1234, {0xC066, 0x3E0F, 0xB89E}}, {0x4000, {0x381F, 0x4026, 0xC052}}, {0x7FFF, {0xBA96, 0x4172, 0x3FCA}},
            {0x8000, {0xB7F8, 0xB915, 0xBAF2}}, {0xABCD, {0xB98E, 0x35E7, 0xBD42}}, {0xBEEF, {0x424B, 0xC293, 0x3124}},
            {0xC0DE, {0xC046, 0xBA37, 0xBAD6}}, {0xDEAD, {0x3FE4, 0xBB30, 0x24BC}}, {0xFFFE, {0x410A, 0xBCA2, 0x3702}},
            {0xFFFF, {0xB110, 0x3ACD, 0xB936}},
        };
        for (const auto& r : rows)
            for (int cb = 0; cb < 3; ++cb) {
                QCOMPARE(exl3CodebookBits(cbOf(cb), r.state), r.v[cb]);
                QCOMPARE(exl3CodebookLutF16(cbOf(cb))[r.state], r.v[cb]);
                QCOMPARE(exl3CodebookLutF32(cbOf(cb))[r.state], f16ToF32(r.v[cb]));
            }
        // §6.2 final values of state 0x1234, as exact numbers.
        QCOMPARE(f16ToF32(exl3CodebookBits(Exl3Codebook::Inst3, 0x1234)), -2.19921875f);
        QCOMPARE(f16ToF32(exl3CodebookBits(Exl3Codebook::Mcg, 0x1234)), 1.5146484375f);
        QCOMPARE(f16ToF32(exl3CodebookBits(Exl3Codebook::Mul1, 0x1234)), -0.5771484375f);
    }

    // §6.3
    void lutChecksums() {
        struct Expect {
            uint32_t crc;
            double sum, sumSq, rms;
        };
        const Expect ex[3] = {{0x4C83D524u, 13.791504, 101372.1900, 1.243711},
                              {0xD2D13C52u, -2.419922, 101437.5582, 1.244112},
                              {0x2BDF05C5u, -126.555870, 65576.9101, 1.000312}};
        for (int cb = 0; cb < 3; ++cb) {
            const uint16_t* lut = exl3CodebookLutF16(cbOf(cb));
            std::vector<uint8_t> bytes(65536 * 2);
            for (int s = 0; s < 65536; ++s) {
                bytes[size_t(2 * s)] = uint8_t(lut[s] & 0xFF);  // little-endian uint16
                bytes[size_t(2 * s + 1)] = uint8_t(lut[s] >> 8);
            }
            QCOMPARE(crc32(bytes.data(), bytes.size()), ex[cb].crc);
            double sum = 0, sq = 0;
            for (int s = 0; s < 65536; ++s) {
                const double v = f16ToF32(lut[s]);
                sum += v;
                sq += v * v;
            }
            QVERIFY2(std::fabs(sum - ex[cb].sum) < 1e-6, qPrintable(QString::number(sum, 'f', 8)));
            QVERIFY2(std::fabs(sq - ex[cb].sumSq) < 1e-4, qPrintable(QString::number(sq, 'f', 6)));
            QVERIFY(std::fabs(std::sqrt(sq / 65536) - ex[cb].rms) < 1e-6);
        }
        // MUL1 has exactly 913 distinct values (§3.3).
        std::vector<uint16_t> v(exl3CodebookLutF16(Exl3Codebook::Mul1), exl3CodebookLutF16(Exl3Codebook::Mul1) + 65536);
        std::sort(v.begin(), v.end());
        QCOMPARE(std::unique(v.begin(), v.end()) - v.begin(), 913);
    }

    // §6.4
    void packingExampleA() {
        uint16_t symbols[256], file[64];
        for (int p = 0; p < 256; ++p) symbols[p] = uint16_t(p % 16);
        exl3PackTile(symbols, 4, file);
        const uint16_t expFile[8] = {0x4567, 0x0123, 0xCDEF, 0x89AB, 0x4567, 0x0123, 0xCDEF, 0x89AB};
        for (int i = 0; i < 8; ++i) QCOMPARE(file[i], expFile[i]);
        uint32_t words[32];
        exl3TileWords(reinterpret_cast<const uint8_t*>(file), 4, words);
        QCOMPARE(words[0], 0x01234567u);
        QCOMPARE(words[1], 0x89ABCDEFu);
        const uint16_t expStates[5] = {0xDEF0, 0xEF01, 0xF012, 0x0123, 0x1234};
        uint16_t states[256];
        exl3TileStates(reinterpret_cast<const uint8_t*>(file), 4, states);
        for (int p = 0; p < 5; ++p) {
            QCOMPARE(exl3StateAt(words, 4, p), expStates[p]);
            QCOMPARE(states[p], expStates[p]);
        }
        const float expValues[3][4] = {{-1.025390625f, 2.06640625f, -0.41015625f, -0.6640625f},
                                       {3.43359375f, 1.0751953125f, -0.56396484375f, -1.7880859375f},
                                       {-2.01171875f, -0.306396484375f, -0.04241943359375f, -0.299560546875f}};
        const int expR[5] = {0, 1, 8, 9, 0}, expC[5] = {0, 0, 0, 0, 8};
        for (int cb = 0; cb < 3; ++cb) {
            float tile[256];
            exl3DecodeTile(reinterpret_cast<const uint8_t*>(file), 4, cbOf(cb), tile, 16);
            for (int p = 0; p < 5; ++p) {
                QCOMPARE(int(exl3TilePos(p).r), expR[p]);
                QCOMPARE(int(exl3TilePos(p).c), expC[p]);
                const float v = f16ToF32(exl3CodebookBits(cbOf(cb), expStates[p]));
                QCOMPARE(tile[expR[p] * 16 + expC[p]], v);
                if (p < 4) QCOMPARE(v, expValues[cb][p]);
            }
        }
    }

    // §6.5, through a real safetensors file and bindExl3Linear.
    void endToEndExampleB() {
        ExampleB e = exampleB();
        QTemporaryDir dir;
        const std::string path = dir.filePath("b.safetensors").toStdString();
        auto tensors = linearTensors(e.o, "model.layers.0.mlp.experts.0.up_proj");
        // The flag's stored int32 value is −2082680531 (spec §2.1).
        int32_t flag;
        std::memcpy(&flag, tensors.back().bytes.data(), 4);
        QCOMPARE(flag, -2082680531);
        writeFile(path, tensors);
        SafetensorsFile f(path);
        const Exl3Linear lin = bindExl3Linear(tensorLookup(f), "model.layers.0.mlp.experts.0.up_proj");
        QCOMPARE(lin.k, 256);
        QCOMPARE(lin.n, 256);
        QCOMPARE(lin.bits, 3);
        QCOMPARE(lin.codebook, Exl3Codebook::Mul1);
        QCOMPARE(f.get("model.layers.0.mlp.experts.0.up_proj.trellis").shape, (std::vector<int64_t>{16, 16, 48}));

        const uint16_t expFile[8] = {0x1C98, 0x025E, 0x7DFF, 0x5E2B, 0x9190, 0x5B4E, 0x92F2, 0x6A71};
        for (int i = 0; i < 8; ++i) {
            uint16_t v;
            std::memcpy(&v, lin.trellis + 2 * i, 2);
            QCOMPARE(v, expFile[i]);
        }
        const uint16_t expSyms[8] = {0, 0, 4, 5, 7, 0, 3, 4};
        const uint16_t expStates[8] = {0x5890, 0xC480, 0x2404, 0x2025, 0x012F, 0x0978, 0x4BC3, 0x5E1C};
        uint16_t states[256];
        exl3TileStates(lin.tile(0, 0), 3, states);
        for (int p = 0; p < 8; ++p) {
            QCOMPARE(uint16_t(states[p] & 7), expSyms[p]);
            QCOMPARE(states[p], expStates[p]);
        }

        std::vector<float> what(256 * 256);
        exl3ReconstructRotated(lin, what.data());
        QCOMPARE(what[0 * 256 + 0], -2.357421875f);
        QCOMPARE(what[1 * 256 + 0], 0.1673583984375f);
        QCOMPARE(what[8 * 256 + 0], 0.478759765625f);
        QCOMPARE(what[0 * 256 + 8], -1.2607421875f);
        QCOMPARE(what[0 * 256 + 1], -1.2060546875f);
        QCOMPARE(what[2 * 256 + 0], -0.3671875f);
        double sumWhat = 0;
        for (float v : what) sumWhat += v;
        QVERIFY2(std::fabs(sumWhat - 67.602195740) < 1e-8, qPrintable(QString::number(sumWhat, 'f', 10)));

        std::vector<float> w(256 * 256);
        exl3Reconstruct(lin, w.data());
        auto near = [](double got, double want, double tol) {
            return std::fabs(got - want) <= tol ? QString() : QString("got %1, want %2").arg(got, 0, 'f', 10).arg(want, 0, 'f', 10);
        };
#define EXPECT_NEAR(got, want, tol) QVERIFY2(near(got, want, tol).isEmpty(), qPrintable(#got + QString(": ") + near(got, want, tol)))
        // fp32 pipeline vs the spec's fp64 numbers: elements to ~1e-7 absolute (|W| ≲ 1).
        EXPECT_NEAR(w[0], 0.090216391, 2e-7);
        EXPECT_NEAR(w[1], -0.074021045, 2e-7);
        EXPECT_NEAR(w[256], -0.101930525, 2e-7);
        EXPECT_NEAR(w[255 * 256 + 255], 0.182358455, 2e-7);
        double sumW = 0, sumAbs = 0;
        for (float v : w) sumW += v, sumAbs += std::fabs(v);
        EXPECT_NEAR(sumW, -55.764800470, 2e-5);
        EXPECT_NEAR(sumAbs, 17142.172909, 1e-3);
        // And against the fp64 naive-Hadamard reference built from our Ŵ.
        QVERIFY(relFrobenius(w, referenceW(what, lin)) < 1e-6);

        std::vector<float> y(256);
        exl3Gemm(lin, e.x.data(), 1, y.data());
        EXPECT_NEAR(y[0], 0.835025857, 2e-6);
        EXPECT_NEAR(y[1], -0.040935104, 2e-6);
        EXPECT_NEAR(y[2], 1.161790377, 2e-6);
        EXPECT_NEAR(y[3], -0.047821692, 2e-6);
        EXPECT_NEAR(y[255], 1.255281637, 2e-6);
        double sumY = 0;
        for (float v : y) sumY += v;
        EXPECT_NEAR(sumY, -53.060351158, 5e-5);
#undef EXPECT_NEAR
    }

    // §6.6 (2, 3): pack → extract equals the circular recurrence; both extractors agree; tail-biting.
    void bitstreamRoundTrip() {
        std::mt19937 rng(7);
        std::uniform_int_distribution<int> sym(0, 65535);
        for (int K = 1; K <= 8; ++K) {
            for (int rep = 0; rep < 50; ++rep) {
                uint16_t symbols[256], file[128], states[256];
                for (auto& s : symbols) s = uint16_t(sym(rng));
                exl3PackTile(symbols, K, file);
                const uint8_t* bytes = reinterpret_cast<const uint8_t*>(file);
                uint32_t words[64];
                exl3TileWords(bytes, K, words);
                exl3TileStates(bytes, K, states);
                const uint16_t mask = uint16_t((1u << K) - 1);
                // s_p = ((s_{p−1} << K) | σ_p) & 0xFFFF with indices mod 256: run the recurrence twice
                // round the circle so the start has seen ≥ 16 bits of history.
                uint16_t s = 0;
                for (int p = 0; p < 512; ++p) {
                    s = uint16_t((uint32_t(s) << K) | (symbols[p % 256] & mask));
                    if (p >= 256) {
                        QCOMPARE(states[p - 256], s);
                        QCOMPARE(exl3StateAt(words, K, p - 256), s);
                    }
                }
                QCOMPARE(uint16_t(states[0] >> K), uint16_t(states[255] & ((1u << (16 - K)) - 1)));
                // Re-packing the extracted states gives the same file (only the low K bits are stored).
                uint16_t again[128];
                exl3PackTile(states, K, again);
                QVERIFY(std::memcmp(again, file, size_t(32 * K)) == 0);
            }
        }
    }

    // §3.1: a bijection onto the 16×16 tile, equal to the mma.m16n8k16 B-fragment layout.
    void permutation() {
        bool seen[16][16] = {};
        for (int p = 0; p < 256; ++p) {
            const auto pos = exl3TilePos(p);
            QVERIFY(pos.r < 16 && pos.c < 16);
            QVERIFY(!seen[pos.r][pos.c]);
            seen[pos.r][pos.c] = true;
            const int t = p / 8, j = p % 8;
            // Lane t: B[2(t%4)+{0,1}][t/4] (first register), B[2(t%4)+8+{0,1}][t/4] (second); +8 columns for j ≥ 4.
            QCOMPARE(int(pos.r), 2 * (t % 4) + (j % 2) + ((j % 4) >= 2 ? 8 : 0));
            QCOMPARE(int(pos.c), t / 4 + (j >= 4 ? 8 : 0));
        }
    }

    // §6.6 (6) and the FWHT against the naive matrix.
    void hadamard() {
        float e0[128] = {};
        e0[0] = 1.0f;
        hadamard128(e0);
        for (float v : e0) QVERIFY(std::fabs(v - 0.08838835f) < 1e-7f);
        std::mt19937 rng(3);
        std::normal_distribution<float> g;
        float x[128], y[128];
        for (auto& v : x) v = g(rng);
        std::memcpy(y, x, sizeof x);
        hadamard128(y);
        for (int a = 0; a < 128; ++a) {
            double ref = 0;
            for (int b = 0; b < 128; ++b) ref += had(a, b) * x[b];
            QVERIFY(std::fabs(y[a] - ref / std::sqrt(128.0)) < 1e-5);
        }
        hadamard128(y);  // self-inverse
        for (int i = 0; i < 128; ++i) QVERIFY(std::fabs(y[i] - x[i]) < 1e-5f);
        // Column transform == per-column vector transform.
        const int cols = 37, ld = 41;
        std::vector<float> a(128 * ld);
        for (auto& v : a) v = g(rng);
        std::vector<float> b = a;
        hadamard128Rows(b.data(), ld, cols);
        for (int j = 0; j < ld; ++j) {
            float col[128];
            for (int i = 0; i < 128; ++i) col[i] = a[size_t(i * ld + j)];
            if (j < cols) hadamard128(col);
            for (int i = 0; i < 128; ++i) QCOMPARE(b[size_t(i * ld + j)], col[i]);
        }
    }

    // Fast decode == scalar spec formulas; reconstruction == fp64 naive formula; GEMV/GEMM ==
    // reconstruct-then-matmul, for K = 1..8, all codebooks, random shapes, with and without bias.
    void gemmMatchesReconstruction() {
        std::mt19937 rng(11);
        std::uniform_int_distribution<int> dim(1, 3);
        std::normal_distribution<float> g;
        ThreadPool two(2);
        for (int K = 1; K <= 8; ++K) {
            for (int cb = 0; cb < 3; ++cb) {
                const int64_t k = 128 * dim(rng), n = 128 * dim(rng);
                const bool bias = (K + cb) % 2 == 0;
                OwnedLinear o = randomLinear(rng, k, n, K, cbOf(cb), bias);
                const Exl3Linear& lin = o.lin;
                const QString tag = QString("K=%1 cb=%2 k=%3 n=%4").arg(K).arg(cb).arg(k).arg(n);

                std::vector<float> what(size_t(k * n));
                exl3ReconstructRotated(lin, what.data());
                // Scalar reference decode of a few tiles straight from the spec's formulas.
                for (int64_t tk : {int64_t(0), lin.tilesK() - 1})
                    for (int64_t tn : {int64_t(0), lin.tilesN() - 1}) {
                        uint32_t words[64];
                        exl3TileWords(lin.tile(tk, tn), K, words);
                        for (int p = 0; p < 256; ++p) {
                            const auto pos = exl3TilePos(p);
                            const float v = f16ToF32(exl3CodebookBits(lin.codebook, exl3StateAt(words, K, p)));
                            QCOMPARE(what[size_t((16 * tk + pos.r) * n + 16 * tn + pos.c)], v);
                        }
                    }

                std::vector<float> w(size_t(k * n));
                exl3Reconstruct(lin, w.data());
                const double wErr = relFrobenius(w, referenceW(what, lin));
                QVERIFY2(wErr < 1e-6, qPrintable(tag + QString(" W rel err %1").arg(wErr)));

                for (int64_t m : {1, 3, 17}) {
                    std::vector<float> x(size_t(m * k));
                    for (auto& v : x) v = g(rng);
                    std::vector<double> ref(size_t(m * n), 0.0);
                    for (int64_t i = 0; i < m; ++i)
                        for (int64_t r = 0; r < k; ++r) {
                            const double xv = x[size_t(i * k + r)];
                            for (int64_t j = 0; j < n; ++j) ref[size_t(i * n + j)] += xv * w[size_t(r * n + j)];
                        }
                    if (bias)
                        for (int64_t i = 0; i < m; ++i)
                            for (int64_t j = 0; j < n; ++j) ref[size_t(i * n + j)] += lin.bias[size_t(j)];
                    std::vector<float> y1(size_t(m * n)), y2(size_t(m * n));
                    ThreadPool one(1);
                    exl3Gemm(lin, x.data(), m, y1.data(), &one);
                    exl3Gemm(lin, x.data(), m, y2.data(), &two);
                    QVERIFY2(y1 == y2, qPrintable(tag + " result depends on the thread count"));
                    const double err = relFrobenius(y1, ref);
                    QVERIFY2(err < 1e-5, qPrintable(tag + QString(" m=%1 y rel err %2").arg(m).arg(err)));
                }
            }
        }
    }

    // Padding: x narrower than k is zero-extended, y is trimmed to yCols.
    void gemmPadding() {
        std::mt19937 rng(5);
        OwnedLinear o = randomLinear(rng, 256, 384, 4, Exl3Codebook::Mcg, true);
        const int64_t m = 2, xCols = 200, yCols = 300;
        std::normal_distribution<float> g;
        std::vector<float> x(size_t(m * xCols)), xPad(size_t(m * 256), 0.0f);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t c = 0; c < xCols; ++c) xPad[size_t(i * 256 + c)] = x[size_t(i * xCols + c)] = g(rng);
        std::vector<float> y(size_t(m * yCols)), yFull(size_t(m * 384));
        exl3Gemm(o.lin, x.data(), m, xCols, y.data(), yCols);
        exl3Gemm(o.lin, xPad.data(), m, yFull.data());
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < yCols; ++j) QCOMPARE(y[size_t(i * yCols + j)], yFull[size_t(i * 384 + j)]);
    }

    // Legacy packed signs bind to ±1 scales (bit i of word w = element 16w+i, 1 = −1).
    void legacySigns() {
        std::mt19937 rng(9);
        OwnedLinear o = randomLinear(rng, 128, 256, 2, Exl3Codebook::Inst3, false);
        std::vector<uint16_t> su(8), sv(16);
        for (auto& v : su) v = uint16_t(rng());
        for (auto& v : sv) v = uint16_t(rng());
        QTemporaryDir dir;
        const std::string path = dir.filePath("legacy.safetensors").toStdString();
        writeFile(path, {owned("l.trellis", DType::I16, {8, 16, 32}, o.trellis), owned("l.su", DType::I16, {8}, su),
                         owned("l.sv", DType::I16, {16}, sv)});
        SafetensorsFile f(path);
        const Exl3Linear lin = bindExl3Linear(tensorLookup(f), "l");
        QVERIFY(lin.legacySigns);
        QCOMPARE(lin.codebook, Exl3Codebook::Inst3);
        for (int i = 0; i < 128; ++i) QCOMPARE(lin.suh[size_t(i)], (su[size_t(i / 16)] >> (i % 16)) & 1 ? -1.0f : 1.0f);
        for (int j = 0; j < 256; ++j) QCOMPARE(lin.svh[size_t(j)], (sv[size_t(j / 16)] >> (j % 16)) & 1 ? -1.0f : 1.0f);
        QVERIFY(isExl3Linear(tensorLookup(f), "l"));
        QCOMPARE(exl3Prefixes(f.names()), std::vector<std::string>{"l"});
    }

    // One case per binding rule; each error names the offending tensor.
    void malformedBindings() {
        std::mt19937 rng(1);
        OwnedLinear o = randomLinear(rng, 128, 256, 4, Exl3Codebook::Mul1, true);
        QTemporaryDir dir;
        int fileNo = 0;
        // Writes the good tensor set with `edit` applied and binds prefix "p".
        auto bind = [&](const std::function<void(std::vector<Owned>&)>& edit) {
            auto ts = linearTensors(o, "p");
            edit(ts);
            const std::string path = dir.filePath(QString("m%1.safetensors").arg(fileNo++)).toStdString();
            writeFile(path, ts);
            SafetensorsFile f(path);
            return bindExl3Linear(tensorLookup(f), "p");
        };
        auto drop = [](std::vector<Owned>& ts, const std::string& name) {
            std::erase_if(ts, [&](const Owned& t) { return t.name == name; });
        };
        auto find = [](std::vector<Owned>& ts, const std::string& name) -> Owned& {
            for (auto& t : ts)
                if (t.name == name) return t;
            throw std::logic_error("fixture lacks " + name);
        };
        const Exl3Linear good = bind([](auto&) {});
        QCOMPARE(good.bits, 4);
        QCOMPARE(good.bias.size(), size_t(256));

        EXPECT_TS_ERROR(bind([&](auto& ts) { drop(ts, "p.trellis"); }), {"p.trellis"}, ErrorKind::NotFound);
        EXPECT_TS_ERROR(bind([&](auto& ts) { drop(ts, "p.svh"); }), {"p.svh"}, ErrorKind::NotFound);
        EXPECT_TS_ERROR(bind([&](auto& ts) { drop(ts, "p.suh"); }), {"p.suh"}, ErrorKind::NotFound);
        EXPECT_TS_ERROR(bind([&](auto& ts) { find(ts, "p.trellis").dtype = DType::F16; }), {"p.trellis", "I16"},
                        ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(bind([&](auto& ts) { find(ts, "p.trellis").shape = {8 * 16, 64}; }), {"p.trellis"},
                        ErrorKind::InvalidFile);
        // K = 9 (144 = 16·9) and a half-integer rate (72 = 16·4.5): unsupported, naming the tensor.
        EXPECT_TS_ERROR(bind([&](auto& ts) {
                            auto& t = find(ts, "p.trellis");
                            t.shape = {8, 8, 144};
                            t.bytes.resize(8 * 8 * 144 * 2);
                        }),
                        {"p.trellis", "1..8"}, ErrorKind::Unsupported);
        EXPECT_TS_ERROR(bind([&](auto& ts) {
                            auto& t = find(ts, "p.trellis");
                            t.shape = {8, 16, 72};
                            t.bytes.resize(8 * 16 * 72 * 2);
                        }),
                        {"p.trellis"}, ErrorKind::Unsupported);
        // 8 × 16 tiles = 128 × 256 is fine, 4 × 32 = 64 × 512 is not a multiple of 128.
        EXPECT_TS_ERROR(bind([&](auto& ts) { find(ts, "p.trellis").shape = {4, 32, 64}; }), {"p.trellis", "128"},
                        ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(bind([&](auto& ts) { find(ts, "p.suh") = f16Vec("p.suh", std::vector<float>(256, 1.0f)); }),
                        {"p.suh", "[256]", "[128]"}, ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(bind([&](auto& ts) { find(ts, "p.svh") = f16Vec("p.svh", std::vector<float>(128, 1.0f)); }),
                        {"p.svh"}, ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(bind([&](auto& ts) {
                            find(ts, "p.suh") = owned("p.suh", DType::F32, {128}, std::vector<float>(128, 1.0f));
                        }),
                        {"p.suh", "F16"}, ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(bind([&](auto& ts) { find(ts, "p.bias") = f16Vec("p.bias", std::vector<float>(128, 0.0f)); }),
                        {"p.bias"}, ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(bind([&](auto& ts) { ts.push_back(owned("p.su", DType::I16, {8}, std::vector<uint16_t>(8))); }),
                        {"p", ".su"}, ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(bind([&](auto& ts) { ts.push_back(i32Scalar("p.mcg", kExl3McgMultiplier)); }), {"p", "mcg", "mul1"},
                        ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(bind([&](auto& ts) { find(ts, "p.mul1") = i32Scalar("p.mul1", 0x12345678u); }),
                        {"p.mul1", "0x12345678"}, ErrorKind::Unsupported);
        EXPECT_TS_ERROR(bind([&](auto& ts) {
                            find(ts, "p.mul1") = owned("p.mul1", DType::I64, {}, std::vector<int64_t>{kExl3Mul1Multiplier});
                        }),
                        {"p.mul1", "I32"}, ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(bind([&](auto& ts) { 
                            find(ts, "p.mul1") = owned("p.mul1", DType::I32, {2},
                                                       std::vector<uint32_t>{kExl3Mul1Multiplier, kExl3Mul1Multiplier});
                        }),
                        {"p.mul1"}, ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(bind([&](auto& ts) { ts.push_back(f16Vec("p.scale", {1.0f})); }), {"p.scale"},
                        ErrorKind::Unsupported);
        // [1] instead of [] for the flag is accepted (some writers add the dim).
        QCOMPARE(bind([&](auto& ts) { find(ts, "p.mul1") = i32Scalar("p.mul1", kExl3Mul1Multiplier, {1}); }).codebook,
                 Exl3Codebook::Mul1);
    }

    // quantization_config, the sidecar, and the sidecar cross-check at bind time.
    void quantConfigAndSidecar() {
        using nlohmann::json;
        QVERIFY(!parseExl3QuantConfig(json(), "c").has_value());
        QVERIFY(!parseExl3QuantConfig(json{{"quant_method", "fp8"}}, "c").has_value());
        const json qc = {{"quant_method", "exl3"}, {"version", "1.4.1"}, {"bits", 4.0}, {"head_bits", 6},
                         {"calibration", {{"rows", 250}, {"cols", 2048}}}, {"out_scales", "always"}, {"codebook", "mul1"}};
        const auto c = parseExl3QuantConfig(qc, "config.json");
        QVERIFY(c.has_value());
        QCOMPARE(c->version, std::string("1.4.1"));
        QCOMPARE(c->bits, 4.0);
        QCOMPARE(c->headBits, 6);
        QCOMPARE(c->codebook, std::string("mul1"));
        EXPECT_TS_ERROR(parseExl3QuantConfig({{"quant_method", "exl3"}, {"head_bits", 9}}, "config.json"),
                        {"config.json", "head_bits"}, ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(parseExl3QuantConfig({{"quant_method", "exl3"}, {"codebook", "2mad"}}, "config.json"),
                        {"codebook", "2mad"}, ErrorKind::InvalidFile);
        EXPECT_TS_ERROR(parseExl3QuantConfig({{"quant_method", "exl3"}, {"bits", "four"}}, "config.json"), {"bits"},
                        ErrorKind::InvalidFile);

        // A model directory with config.json + sidecar + one MUL1 linear (K = 4, 128 × 256).
        std::mt19937 rng(2);
        OwnedLinear o = randomLinear(rng, 128, 256, 4, Exl3Codebook::Mul1, false);
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        writeFile(d + "/model.safetensors", linearTensors(o, "m.q"));
        json cfg = {{"model_type", "glm5_next"}, {"quantization_config", qc}};
        std::ofstream(d + "/config.json") << cfg.dump();
        auto sidecar = [&](int bpw, bool mul1, std::vector<int64_t> suhShape) {
            json side = qc;
            json entry = {{"stored_tensors",
                           {{"m.q.trellis", {{"shape", {8, 16, 64}}, {"n_bytes", 8 * 16 * 64 * 2}, {"dtype", "torch.int16"}}},
                            {"m.q.suh", {{"shape", suhShape}, {"n_bytes", 256}, {"dtype", "torch.float16"}}},
                            {"m.q.mul1", {{"shape", json::array()}, {"n_bytes", 4}, {"dtype", "torch.int32"}}}}},
                          {"quant_format", "exl3"},
                          {"bits_per_weight", bpw}};
            if (mul1) entry["mul1_multiplier"] = 2212286765u;
            side["tensor_storage"] = {{"m.q", entry}};
            std::ofstream(d + "/quantization_config.json") << side.dump();
        };
        sidecar(4, true, {128});
        auto loaded = loadExl3QuantConfig(d);
        QVERIFY(loaded.has_value());
        QCOMPARE(loaded->tensorStorage.count("m.q"), size_t(1));
        QCOMPARE(*loaded->tensorStorage.at("m.q").mul1Multiplier, kExl3Mul1Multiplier);
        SafetensorsCheckpoint ck(d);
        const Exl3Linear lin = bindExl3Linear(tensorLookup(ck), "m.q", &loaded->tensorStorage.at("m.q"));
        QCOMPARE(lin.bits, 4);

        sidecar(3, true, {128});
        loaded = loadExl3QuantConfig(d);
        EXPECT_TS_ERROR(bindExl3Linear(tensorLookup(ck), "m.q", &loaded->tensorStorage.at("m.q")), {"m.q", "bits_per_weight"},
                        ErrorKind::InvalidFile);
        sidecar(4, false, {128});
        loaded = loadExl3QuantConfig(d);
        EXPECT_TS_ERROR(bindExl3Linear(tensorLookup(ck), "m.q", &loaded->tensorStorage.at("m.q")), {"m.q", "codebook"},
                        ErrorKind::InvalidFile);
        sidecar(4, true, {256});
        loaded = loadExl3QuantConfig(d);
        EXPECT_TS_ERROR(bindExl3Linear(tensorLookup(ck), "m.q", &loaded->tensorStorage.at("m.q")), {"m.q.suh", "[256]"},
                        ErrorKind::InvalidFile);
        std::ofstream(d + "/quantization_config.json") << "{\"quant_method\": \"exl3\", \"tensor_storage\": []}";
        EXPECT_TS_ERROR(loadExl3QuantConfig(d), {"quantization_config.json", "tensor_storage"}, ErrorKind::InvalidFile);
    }

    // GEMV speed on a 4096 × 2048 (in × out), K = 4 MUL1 matrix; only with TS_EXL3_BENCH=1.
};

QTEST_GUILESS_MAIN(TestExl3)
#include "test_exl3.moc"
