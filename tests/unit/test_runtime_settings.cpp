// The engine settings' one rule (runtime/runtime_settings.h), which `serve` and the control center both apply:
// each accepted value parses to itself, and the edges, stray characters and vLLM's other KV dtypes are refused
// with what is accepted — also under a decimal-comma locale, where the control center runs for many users (there
// the chat templates' numbers keep their C form too).
#include <QTemporaryDir>
#include <QtTest>

#include <clocale>
#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "../common/comma_locale.h"
#include "runtime/runtime_settings.h"
#include "text/jinja_template.h"

using namespace ts;

class TestRuntimeSettings : public QObject {
    Q_OBJECT

private slots:
    void integers() {
        std::string why;
        QCOMPARE(parseIntSetting(kMaxNumSeqsSetting, "1", &why).value(), int64_t(1));
        QCOMPARE(parseIntSetting(kMaxNumSeqsSetting, "4096", &why).value(), int64_t(4096));
        QCOMPARE(parseIntSetting(kMaxModelLenSetting, "2147483648", &why).value(), int64_t(1) << 31);
        for (const char* bad : {"0", "4097", "", "4 ", " 4", "4x", "0x10", "1e3", "-1", "99999999999999999999"}) {
            why.clear();
            QVERIFY2(!parseIntSetting(kMaxNumSeqsSetting, bad, &why), bad);
            QCOMPARE(why, std::string("an integer in [1, 4096]"));
        }
        // The recipe's defaults are inside their own ranges.
        for (const IntSetting& s : {kMaxNumSeqsSetting, kMaxNumBatchedTokensSetting, kMaxModelLenSetting,
                                    kKvBudgetMibSetting, kMaxConcurrentRequestsSetting})
            QCOMPARE(parseIntSetting(s, std::to_string(s.def), &why).value(), s.def);
    }

    void gpuMemUtil() {
        std::string why;
        QCOMPARE(parseGpuMemUtilSetting("0.87", &why).value(), 0.87);
        QCOMPARE(parseGpuMemUtilSetting("1", &why).value(), 1.0);
        QCOMPARE(parseGpuMemUtilSetting("1e-3", &why).value(), 0.001);
        for (const char* bad : {"0", "1.01", "-0.5", "", " 0.5", "0.5 ", "87%", "nan", "inf"}) {
            why.clear();
            QVERIFY2(!parseGpuMemUtilSetting(bad, &why), bad);
            QCOMPARE(why, std::string("in (0, 1]"));
        }
    }

    void kvCacheDtype() {
        std::string why;
        QCOMPARE(parseKvCacheDtypeSetting("fp8", &why).value(), KvCacheDtype::Fp8);
        QCOMPARE(parseKvCacheDtypeSetting("fp8_ds_mla", &why).value(), KvCacheDtype::Fp8);
        QCOMPARE(parseKvCacheDtypeSetting("fp32", &why).value(), KvCacheDtype::Fp32);
        for (const char* refused : {"bf16", "auto", "nvfp4"}) {
            why.clear();
            QVERIFY(!parseKvCacheDtypeSetting(refused, &why));
            QVERIFY2(why.rfind("refused: ", 0) == 0 && why.find("fp8_ds_mla") != std::string::npos, why.c_str());
        }
        for (const char* bad : {"FP8", "fp16", "", " fp8"}) {
            why.clear();
            QVERIFY(!parseKvCacheDtypeSetting(bad, &why));
            QCOMPARE(why, std::string("fp8 or fp32"));
        }
    }

    // de_DE.UTF-8, compiled from the locales package's source into a temporary folder (LOCPATH): the C library
    // then reads and prints "0,87". The settings and the chat templates' numbers must not follow it.
    void decimalCommaLocale() {
        QTemporaryDir dir;
        if (!test::compileCommaLocale(dir.path()))
            QSKIP("no de_DE locale source (the Debian package `locales`, which scripts/install-deps.sh installs)");
        const std::string before = std::setlocale(LC_NUMERIC, nullptr);
        ::setenv("LOCPATH", dir.path().toLocal8Bit().constData(), 1);
        const bool set = std::setlocale(LC_NUMERIC, test::kCommaLocale) != nullptr;
        ::unsetenv("LOCPATH");
        QVERIFY2(set, "localedef wrote the locale, but setlocale cannot load it");
        // The locale is in effect: the C library's own parse stops at the '.'.
        const double cParse = std::strtod("0.87", nullptr);
        std::string why;
        const auto u = parseGpuMemUtilSetting("0.87", &why);
        const auto commaRefused = !parseGpuMemUtilSetting("0,87", &why);
        const std::string rendered = jinja::JinjaTemplate("{{ 0.5 + 1 }}|{{ '2.5' | float }}|{{ '7.9' | int }}").render(nlohmann::ordered_json::object());
        std::setlocale(LC_NUMERIC, before.c_str());
        QCOMPARE(cParse, 0.0);
        QVERIFY(u.has_value());
        QCOMPARE(*u, 0.87);
        QVERIFY(commaRefused);
        QCOMPARE(rendered, std::string("1.5|2.5|7"));
    }
};

QTEST_GUILESS_MAIN(TestRuntimeSettings)
#include "test_runtime_settings.moc"
