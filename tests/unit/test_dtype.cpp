// Scalar conversions at the file boundary: bf16, fp16 and fp8 e4m3 against values whose encodings are
// fixed by the formats (and by PyTorch's casts: round-to-nearest-even, fp8 saturating at ±448).
#include <QtTest>

#include <cmath>

#include "core/dtype.h"
#include "core/thread_pool.h"

using namespace ts;

class TestDtype : public QObject {
    Q_OBJECT

private slots:
    void names() {
        for (DType t : {DType::BF16, DType::F16, DType::F32, DType::F8_E4M3, DType::I8, DType::U8, DType::I16,
                        DType::I32, DType::I64, DType::BOOL})
            QCOMPARE(*dtypeFromName(dtypeName(t)), t);
        QVERIFY(!dtypeFromName("F8_E5M2").has_value());
        QCOMPARE(dtypeSize(DType::I64), size_t(8));
    }

    void bf16() {
        QCOMPARE(f32ToBf16(1.0f), uint16_t(0x3f80));
        QCOMPARE(bf16ToF32(0xc000), -2.0f);
        // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
        QCOMPARE(f32ToBf16(1.00390625f), uint16_t(0x3f80));
        QCOMPARE(f32ToBf16(1.01171875f), uint16_t(0x3f82));  // halfway, rounds up to the even 0x3f82
        QVERIFY(std::isnan(bf16ToF32(f32ToBf16(NAN))));
    }

    void f16() {
        QCOMPARE(f32ToF16(1.0f), uint16_t(0x3c00));
        QCOMPARE(f16ToF32(0xc000), -2.0f);
        QCOMPARE(f16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
        QCOMPARE(f32ToF16(65504.0f), uint16_t(0x7bff));
        QCOMPARE(f32ToF16(1e6f), uint16_t(0x7c00));           // overflow to inf
        for (uint32_t h = 0; h < 0x7c00; ++h) QCOMPARE(f32ToF16(f16ToF32(uint16_t(h))), uint16_t(h));
    }

    void fp8() {
        QCOMPARE(fp8e4m3ToF32(0x7e), 448.0f);
        QCOMPARE(fp8e4m3ToF32(0x01), std::ldexp(1.0f, -9));
        QCOMPARE(fp8e4m3ToF32(0x38), 1.0f);
        QVERIFY(std::isnan(fp8e4m3ToF32(0x7f)));
        QCOMPARE(f32ToFp8e4m3(1000.0f), uint8_t(0x7e));   // saturates
        QCOMPARE(f32ToFp8e4m3(-1000.0f), uint8_t(0xfe));
        QCOMPARE(f32ToFp8e4m3(1.0625f), uint8_t(0x38));   // halfway 1.0 / 1.125: even mantissa (1.0)
        QCOMPARE(f32ToFp8e4m3(1.1875f), uint8_t(0x3a));   // halfway 1.125 / 1.25: even (1.25)
        // Every finite code round-trips; every float rounds to a nearest code.
        for (int v = 0; v < 256; ++v) {
            const float f = fp8e4m3ToF32(uint8_t(v));
            if (std::isnan(f)) continue;
            if (f == 0.0f) continue;  // ±0 share a value
            QCOMPARE(f32ToFp8e4m3(f), uint8_t(v));
        }
        for (float x = -500.0f; x < 500.0f; x += 0.37f) {
            const float q = fp8e4m3ToF32(f32ToFp8e4m3(x));
            const float ax = std::min(std::fabs(x), 448.0f);
            QVERIFY2(std::fabs(std::fabs(q) - ax) <= std::max(ax * 0.0625f, std::ldexp(1.0f, -10)),
                     qPrintable(QString::number(x)));
        }
    }

    void threadPool() {
        ThreadPool pool(3);
        std::vector<int> hits(1000, 0);
        pool.parallelFor(1000, [&](int64_t a, int64_t b) {
            for (int64_t i = a; i < b; ++i) hits[size_t(i)]++;
        });
        for (int h : hits) QCOMPARE(h, 1);
        // Nested calls run inline instead of deadlocking.
        std::atomic<int> inner{0};
        pool.parallelFor(4, [&](int64_t a, int64_t b) {
            for (int64_t i = a; i < b; ++i) pool.parallelFor(10, [&](int64_t x, int64_t y) { inner += int(y - x); });
        });
        QCOMPARE(inner.load(), 40);
    }
};

QTEST_GUILESS_MAIN(TestDtype)
#include "test_dtype.moc"
