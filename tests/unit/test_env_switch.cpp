// envSwitch: the 0/1 environment switches of the CUDA backend (TS_CUDA_GRAPHS, TS_GEMV_SPLIT, ...). Unset
// gives the default, "0"/"1" off/on, and a typo keeps the default and says so on stderr. envCount: the same
// for counts (TS_EXL3_TUNE, TS_EXL3_KSL, TS_KDA_CHUNK); envMode / ModeSwitch for modes (TS_GEMM, TS_MHC_SIDE).
#include <QtTest>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "../common/stderr_capture.h"
#include "core/env_switch.h"

using namespace ts;

using ts::test::stderrOf;

class TestEnvSwitch : public QObject {
    Q_OBJECT
private slots:
    void values() {
        const char* name = "TS_TEST_ENV_SWITCH";
        ::unsetenv(name);
        QCOMPARE(envSwitch(name, true), true);
        QCOMPARE(envSwitch(name, false), false);
        ::setenv(name, "0", 1);
        QCOMPARE(envSwitch(name, true), false);
        ::setenv(name, "1", 1);
        QCOMPARE(envSwitch(name, false), true);
        ::unsetenv(name);
    }

    // A bad value keeps the default and is reported, naming the variable and the value.
    void typoIsReported() {
        const char* name = "TS_TEST_ENV_SWITCH";
        ::setenv(name, "on", 1);
        bool a = false, b = true;
        const QString err = stderrOf([&] {
            a = envSwitch(name, true);
            b = envSwitch(name, false);
        });
        ::unsetenv(name);
        QCOMPARE(a, true);
        QCOMPARE(b, false);
        QVERIFY2(err.contains("TS_TEST_ENV_SWITCH='on' is not 0 or 1; keeping the default (1)"), qPrintable(err));
        QVERIFY2(err.contains("keeping the default (0)"), qPrintable(err));
    }

    // envCount: unset/empty → default, a decimal count → it, anything else → default and a report.
    void counts() {
        const char* name = "TS_TEST_ENV_COUNT";
        ::unsetenv(name);
        QCOMPARE(envCount(name, 16), int64_t(16));
        ::setenv(name, "", 1);
        QCOMPARE(envCount(name, 16), int64_t(16));
        ::setenv(name, "0", 1);
        QCOMPARE(envCount(name, 16), int64_t(0));
        ::setenv(name, "32", 1);
        QCOMPARE(envCount(name, 16), int64_t(32));
        ::setenv(name, "2147483647", 1);
        QCOMPARE(envCount(name, 16), int64_t(2147483647));
        int64_t bad[5];
        const QString err = stderrOf([&] {
            int i = 0;
            for (const char* v : {"abc", "-1", "8k", "+8", "2147483648"}) {
                ::setenv(name, v, 1);
                bad[i++] = envCount(name, 7);
            }
        });
        ::unsetenv(name);
        for (int64_t b : bad) QCOMPARE(b, int64_t(7));
        QVERIFY2(err.contains("TS_TEST_ENV_COUNT='abc' is not a count (an integer >= 0); keeping the default (7)"),
                 qPrintable(err));
        QCOMPARE(err.count(QStringLiteral("is not a count")), 5);
    }

    // envMode / ModeSwitch: a count below `modes` is taken, one at or above it keeps the default and says so; the
    // override replaces the environment's value at once and set(out of range) clears it.
    void modes() {
        const char* name = "TS_TEST_ENV_MODE";
        ::setenv(name, "2", 1);
        QCOMPARE(envMode(name, 3, 1), 2);
        int high = -1;
        const QString err = stderrOf([&] {
            ::setenv(name, "3", 1);
            high = envMode(name, 3, 1);
        });
        QCOMPARE(high, 1);
        QVERIFY2(err.contains("TS_TEST_ENV_MODE=3: expected 0..2; keeping the default (1)"), qPrintable(err));
        ::setenv(name, "0", 1);
        ModeSwitch m(name, 3, 1);
        QCOMPARE(m.now(), 0);  // read once, here
        ::setenv(name, "2", 1);
        QCOMPARE(m.now(), 0);
        QCOMPARE(m.set(2), -1);
        QCOMPARE(m.now(), 2);
        QCOMPARE(m.set(3), 2);  // out of range: the override is cleared
        QCOMPARE(m.now(), 0);
        ::unsetenv(name);
    }
};

QTEST_GUILESS_MAIN(TestEnvSwitch)
#include "test_env_switch.moc"
