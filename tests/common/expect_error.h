// Asserting that bad input gives a ts::Error whose message names the culprit (shared by the tests).
#pragma once

#include <QString>
#include <QtTest>

#include <initializer_list>
#include <optional>
#include <string>

#include "core/error.h"

namespace ts::test {

// Empty when `fn` throws a ts::Error whose message contains every needle (and is of `kind` when given);
// otherwise what went wrong.
template <typename F>
QString errorCheck(F&& fn, std::initializer_list<std::string> needles, std::optional<ErrorKind> kind = {}) {
    try {
        fn();
    } catch (const Error& e) {
        const std::string msg = e.what();
        for (const auto& n : needles)
            if (msg.find(n) == std::string::npos)
                return QString::fromStdString("message \"" + msg + "\" does not mention \"" + n + "\"");
        if (kind && e.kind() != *kind) return QString::fromStdString("wrong error kind for \"" + msg + "\"");
        return {};
    } catch (const std::exception& e) {
        return QString("threw a non-ts exception: ") + e.what();
    }
    return "no error thrown";
}

}  // namespace ts::test

#define EXPECT_TS_ERROR(expr, ...)                                                     \
    do {                                                                               \
        const QString err_ = ::ts::test::errorCheck([&] { (void)(expr); }, __VA_ARGS__); \
        QVERIFY2(err_.isEmpty(), qPrintable(err_));                                    \
    } while (0)
