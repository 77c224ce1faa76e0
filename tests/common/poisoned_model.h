// A copy of a model directory whose embedding row `row` is NaN: any prompt with that token id gives NaN
// logits for its own sequence (rows of a batch are computed apart), the others stay finite. Tests of how a
// numerical error ends one request and nothing else.
#pragma once

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QString>

#include <cstdint>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

namespace ts::test {

// Returns an empty string on success, else what went wrong.
inline std::string copyModelWithNanEmbeddingRow(const QString& src, const QString& dst, int64_t row) {
    QDir().mkpath(dst);
    for (const QFileInfo& fi : QDir(src).entryInfoList(QDir::Files)) {
        if (fi.fileName().startsWith(QStringLiteral("golden"))) continue;
        QFile::remove(dst + "/" + fi.fileName());
        if (!QFile::copy(fi.filePath(), dst + "/" + fi.fileName())) return "cannot copy " + fi.filePath().toStdString();
    }
    for (const QFileInfo& fi : QDir(dst).entryInfoList({QStringLiteral("*.safetensors")}, QDir::Files)) {
        QFile f(fi.filePath());
        if (!f.open(QIODevice::ReadWrite)) return "cannot open " + fi.filePath().toStdString();
        uint64_t headerLen = 0;
        if (f.read(reinterpret_cast<char*>(&headerLen), 8) != 8) return "short file";
        const nlohmann::json h = nlohmann::json::parse(f.read(qint64(headerLen)).toStdString());
        for (const auto& [name, t] : h.items()) {
            if (name.find("embed_tokens.weight") == std::string::npos || name.find("mtp") != std::string::npos) continue;
            const std::string dtype = t["dtype"];
            const int64_t width = t["shape"][1];
            const size_t elem = dtype == "F32" ? 4 : 2;
            const uint32_t nan32 = 0x7FC00000u;
            const uint16_t nan16 = dtype == "BF16" ? 0x7FC0 : 0x7E00;
            QByteArray bytes;
            for (int64_t i = 0; i < width; ++i)
                bytes.append(elem == 4 ? reinterpret_cast<const char*>(&nan32) : reinterpret_cast<const char*>(&nan16),
                             qsizetype(elem));
            const int64_t begin = t["data_offsets"][0];
            if (!f.seek(qint64(8 + headerLen + uint64_t(begin) + uint64_t(row * width) * elem)) || f.write(bytes) != bytes.size())
                return "cannot patch " + fi.filePath().toStdString();
            return {};
        }
    }
    return "no embed_tokens.weight in " + src.toStdString();
}

}  // namespace ts::test
