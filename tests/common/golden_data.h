// Locating and reading the golden reference data written by tests/golden/make_golden.py.
#pragma once

#include <QDir>
#include <QFileInfo>
#include <QTest>
#include <QStringList>

#include <string>
#include <vector>

#include "io/safetensors.h"

namespace ts::test {

// Every checkpoint folder under tests/golden/data that holds a golden.safetensors, sorted.
inline QStringList goldenModelDirs() {
    QDir root(QStringLiteral(TS_SOURCE_DIR "/tests/golden/data"));
    QStringList out;
    for (const QString& d : root.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name))
        if (QFile::exists(root.filePath(d + "/golden.safetensors"))) out << root.filePath(d);
    return out;
}

// Data rows (dir, fp8) for every golden checkpoint × cache dtype: "tiny_a/fp32", "tiny_a/fp8", ...
inline void addModelAndCacheRows() {
    QTest::addColumn<QString>("dir");
    QTest::addColumn<bool>("fp8");
    for (const QString& d : goldenModelDirs()) {
        const QByteArray name = QFileInfo(d).fileName().toUtf8();
        QTest::newRow((name + "/fp32").constData()) << d << false;
        QTest::newRow((name + "/fp8").constData()) << d << true;
    }
}

inline std::vector<int32_t> readIds(const SafetensorsFile& f, const std::string& name) {
    const std::vector<float> v = toF32(f.get(name));
    return std::vector<int32_t>(v.begin(), v.end());
}

}  // namespace ts::test
