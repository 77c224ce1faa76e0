// SafetensorsFile / SafetensorsCheckpoint / writeSafetensors: round trips for every dtype, sharded
// checkpoints, one case per malformed-input rule (each must be a ts::Error naming the file and the
// tensor, never a crash), and a fixed-seed mutation fuzz loop that CI runs under AddressSanitizer.
#include "../common/expect_error.h"
#include "core/error.h"
#include "io/safetensors.h"

#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

using namespace ts;
namespace fs = std::filesystem;

namespace {


std::string le64(uint64_t v) {
    std::string s(8, '\0');
    std::memcpy(s.data(), &v, 8);
    return s;
}

// A raw file: length prefix (the header's true size unless overridden), header, `dataBytes` bytes.
std::string rawFile(const std::string& header, size_t dataBytes, std::optional<uint64_t> len = {}) {
    std::string data(dataBytes, '\0');
    for (size_t i = 0; i < dataBytes; ++i) data[i] = char(i * 7 + 1);
    return le64(len.value_or(header.size())) + header + data;
}

void writeBytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string readBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

template <typename T>
std::vector<uint8_t> asBytes(const std::vector<T>& v) {
    std::vector<uint8_t> b(v.size() * sizeof(T));
    if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
}

// Writes a shard holding the given F32 tensors ([2] each, values i and i+0.5).
void writeShard(const std::string& path, const std::vector<std::string>& names) {
    static const float vals[2] = {1.0f, 1.5f};
    std::vector<TensorToWrite> ts;
    for (const auto& n : names) ts.push_back({n, DType::F32, {2}, vals});
    writeSafetensors(path, ts);
}

}  // namespace

class TestSafetensors : public QObject {
    Q_OBJECT

private:
    QTemporaryDir m_tmp;
    std::string path(const std::string& name) const { return (fs::path(m_tmp.path().toStdString()) / name).string(); }
    std::string subdir(const std::string& name) const {
        const std::string p = path(name);
        fs::create_directories(p);
        return p;
    }

private slots:
    void initTestCase() { QVERIFY(m_tmp.isValid()); }

    void roundTripAllDtypes() {
        const std::vector<float> f32 = {1.0f, -2.5f, 3.25e-3f, 65504.0f, -0.0f};
        std::vector<uint16_t> bf16, f16;
        std::vector<uint8_t> fp8;
        for (float v : f32) bf16.push_back(f32ToBf16(v));
        for (float v : {0.5f, -1.0f, 1024.0f, 6.1035156e-05f}) f16.push_back(f32ToF16(v));
        for (float v : {0.5f, -448.0f, 0.015625f, 3.0f}) fp8.push_back(f32ToFp8e4m3(v));
        const std::vector<int8_t> i8 = {-128, -1, 0, 127};
        const std::vector<uint8_t> u8 = {0, 1, 200, 255};
        const std::vector<int16_t> i16 = {-32768, -3, 7, 32767};
        const std::vector<int32_t> i32 = {-2082680531, 0, 5, 2147483647};  // EXL3 flag value included
        const std::vector<int64_t> i64 = {-(int64_t(1) << 40), 0, 9, int64_t(1) << 50};
        const int32_t scalar = -877912083;

        const std::vector<TensorToWrite> tensors = {
            {"w.bf16", DType::BF16, {5}, bf16.data()},   {"w.f16", DType::F16, {2, 2}, f16.data()},
            {"w.f32", DType::F32, {5, 1}, f32.data()},   {"w.fp8", DType::F8_E4M3, {4}, fp8.data()},
            {"w.i8", DType::I8, {4}, i8.data()},         {"w.u8", DType::U8, {2, 2}, u8.data()},
            {"w.i16", DType::I16, {4}, i16.data()},      {"w.i32", DType::I32, {1, 4}, i32.data()},
            {"w.i64", DType::I64, {4}, i64.data()},      {"flag", DType::I32, {}, &scalar},
            {"empty", DType::BF16, {0, 3}, nullptr},
        };
        const std::string dir = subdir("roundtrip");
        const std::string file = (fs::path(dir) / "model.safetensors").string();
        writeSafetensors(file, tensors, {{"format", "pt"}, {"note", "unit test"}});

        // No temporary file is left next to the result, and the data section starts 8-aligned.
        QCOMPARE(int(std::distance(fs::directory_iterator(dir), fs::directory_iterator())), 1);
        uint64_t n = 0;
        std::memcpy(&n, readBytes(file).data(), 8);
        QCOMPARE(n % 8, uint64_t(0));

        SafetensorsFile st(file);
        QCOMPARE(st.tensors().size(), tensors.size());
        QCOMPARE(st.metadata().at("format"), std::string("pt"));
        QCOMPARE(st.metadata().at("note"), std::string("unit test"));
        const std::vector<std::vector<uint8_t>> raw = {asBytes(bf16), asBytes(f16), asBytes(f32), fp8,
                                                       asBytes(i8),   u8,           asBytes(i16), asBytes(i32),
                                                       asBytes(i64),  asBytes(std::vector<int32_t>{scalar}),
                                                       {}};
        for (size_t i = 0; i < tensors.size(); ++i) {
            const TensorInfo& t = st.get(tensors[i].name);
            QCOMPARE(t.name, tensors[i].name);
            QVERIFY(t.dtype == tensors[i].dtype);
            QCOMPARE(t.shape, tensors[i].shape);
            QCOMPARE(t.nbytes, uint64_t(raw[i].size()));
            QVERIFY(t.nbytes == 0 || std::memcmp(t.data, raw[i].data(), t.nbytes) == 0);
        }
        QCOMPARE(st.get("flag").numel(), int64_t(1));
        QCOMPARE(st.get("empty").numel(), int64_t(0));

        // toF32 for every dtype.
        QCOMPARE(toF32(st.get("w.f32")), f32);
        QCOMPARE(toF32(st.get("w.bf16"))[1], -2.5f);
        QCOMPARE(toF32(st.get("w.f16")), (std::vector<float>{0.5f, -1.0f, 1024.0f, 6.1035156e-05f}));
        QCOMPARE(toF32(st.get("w.fp8")), (std::vector<float>{0.5f, -448.0f, 0.015625f, 3.0f}));
        QCOMPARE(toF32(st.get("w.i8")), (std::vector<float>{-128, -1, 0, 127}));
        QCOMPARE(toF32(st.get("w.u8")), (std::vector<float>{0, 1, 200, 255}));
        QCOMPARE(toF32(st.get("w.i16")), (std::vector<float>{-32768, -3, 7, 32767}));
        QCOMPARE(toF32(st.get("w.i32"))[2], 5.0f);
        QCOMPARE(toF32(st.get("w.i64"))[3], float(int64_t(1) << 50));
        QVERIFY(toF32(st.get("empty")).empty());

        // names() sorted; find() on a missing name; get() names tensor and file.
        const auto names = st.names();
        QVERIFY(std::is_sorted(names.begin(), names.end()));
        QVERIFY(st.find("nope") == nullptr);
        EXPECT_TS_ERROR(st.get("nope"), {"nope", file}, ErrorKind::NotFound);

        // The directory form finds model.safetensors; moving keeps the mapping valid.
        SafetensorsCheckpoint ck(dir);
        QCOMPARE(ck.names(), names);
        QCOMPARE(ck.shardOf("w.i8"), &ck.shards()[0]);
        SafetensorsFile moved(std::move(st));
        QCOMPARE(toF32(moved.get("w.f32")), f32);
        SafetensorsFile other(file);
        other = std::move(moved);
        QCOMPARE(toF32(other.get("w.i16"))[0], -32768.0f);
    }

    // A file written by hand: odd header length, so the F32 data sits at an unaligned address.
    void handcraftedUnaligned() {
        const std::string header =
            R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[1,9]},)"
            R"("a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
        QVERIFY(header.size() % 8 != 0);
        float vals[2] = {3.5f, -7.0f};
        std::string data(9, '\0');
        data[0] = char(42);
        std::memcpy(&data[1], vals, 8);
        const std::string file = path("hand.safetensors");
        writeBytes(file, le64(header.size()) + header + data);
        SafetensorsFile st(file);
        QCOMPARE(st.names(), (std::vector<std::string>{"a", "b"}));
        QCOMPARE(toF32(st.get("b")), (std::vector<float>{3.5f, -7.0f}));
        QCOMPARE(toF32(st.get("a"))[0], 42.0f);
        // A zero dimension makes the tensor empty however large the other dims are.
        const std::string zero = path("zero.safetensors");
        writeBytes(zero, rawFile(R"({"z":{"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", 0));
        QCOMPARE(SafetensorsFile(zero).get("z").numel(), int64_t(0));
        // A file passed directly to SafetensorsCheckpoint works too.
        QCOMPARE(SafetensorsCheckpoint(file).get("a").nbytes, uint64_t(1));
    }

    void malformed_data() {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("needle");  // besides the file path, which every message must name
        const auto row = [](const char* tag, const std::string& bytes, const char* needle) {
            QTest::newRow(tag) << QByteArray(bytes.data(), qsizetype(bytes.size())) << QString(needle);
        };
        const std::string ok = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
        row("empty file", "", "shorter than the 8-byte");
        row("7 bytes", std::string(7, '\x01'), "shorter than the 8-byte");
        row("header cut short", rawFile(ok, 8).substr(0, 20), "runs past the end");
        row("data cut short", rawFile(ok, 4), "\"t\"");
        row("header length 2^63", rawFile(ok, 8, uint64_t(1) << 63), "exceeds the limit");
        row("header length 2^64-1", rawFile(ok, 8, ~uint64_t(0)), "exceeds the limit");
        row("header length > file", rawFile(ok, 8, 4096), "runs past the end");
        row("bad JSON", rawFile(R"({"t":{"dtype":)", 8), "not valid JSON");
        row("invalid UTF-8", rawFile("{\"t\xff\":{}}", 8), "not valid JSON");
        row("header is an array", rawFile("[1,2,3]", 8), "not an object");
        row("header is a string", rawFile("\"x\"", 8), "not an object");
        row("entry not an object", rawFile(R"({"t":[1]})", 8), "\"t\"");
        row("missing dtype", rawFile(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", 8), "dtype");
        row("dtype not a string", rawFile(R"({"t":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", 8), "dtype");
        row("unknown dtype", rawFile(R"({"t":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8), "Q7");
        row("unsupported dtype", rawFile(R"({"t":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8), "F64");
        row("missing shape", rawFile(R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", 8), "shape");
        row("shape is a string", rawFile(R"({"t":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", 8), "shape");
        row("shape has a float", rawFile(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8), "shape");
        row("shape has a string", rawFile(R"({"t":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8), "shape");
        row("negative dim", rawFile(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "shape");
        row("dim beyond int64",
            rawFile(R"({"t":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,8]}})", 8), "shape");
        row("shape product overflow",
            rawFile(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", 8),
            "too many elements");
        row("1e6^3 shape over 10 bytes",
            rawFile(R"({"t":{"dtype":"F32","shape":[1000000,1000000,1000000],"data_offsets":[0,10]}})", 10),
            "does not match");
        row("missing data_offsets", rawFile(R"({"t":{"dtype":"F32","shape":[2]}})", 8), "data_offsets");
        row("data_offsets 3 ints", rawFile(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})", 8),
            "data_offsets");
        row("data_offsets strings", rawFile(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":["0","8"]}})", 8),
            "data_offsets");
        row("data_offsets negative", rawFile(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8),
            "data_offsets");
        row("begin > end", rawFile(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "begin 8 > end 0");
        row("offsets out of range", rawFile(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 8),
            "outside the data section");
        row("byte size mismatch", rawFile(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 12),
            "does not match");
        row("overlapping tensors",
            rawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                    12),
            "overlap");
        row("duplicate tensor",
            rawFile(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                    16),
            "duplicate");
        std::string dims65 = "1";
        for (int i = 1; i < 65; ++i) dims65 += ",1";
        row("shape of 65 dims", rawFile(R"({"t":{"dtype":"U8","shape":[)" + dims65 + R"(],"data_offsets":[0,1]}})", 1),
            "more than 64 entries");
        row("nested too deep", rawFile(R"({"t":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})", 8),
            "nested deeper");
        row("metadata not an object", rawFile(R"({"__metadata__":[1]})", 0), "__metadata__");
        row("metadata value not a string", rawFile(R"({"__metadata__":{"k":1}})", 0), "__metadata__");
    }

    void malformed() {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, needle);
        const std::string file = path("bad.safetensors");
        writeBytes(file, bytes.toStdString());
        EXPECT_TS_ERROR(SafetensorsFile(file), {file, needle.toStdString()});
    }

    // A header of 100,000 entries (zero-size tensors; a crafted file, far past any checkpoint's shard) is read in
    // one linear pass. The duplicate-key check it once went through was quadratic (16 s at 50,000 entries,
    // measured; about a minute here): this test then still passes, only slower — the speed itself is not asserted
    // (no timed unit tests); what fails here is a header this size being refused or mis-read.
    void manyEntriesLoad() {
        std::string h = "{";
        for (int i = 0; i < 100000; ++i)
            h += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
        h += "}";
        const std::string file = path("many.safetensors");
        writeBytes(file, rawFile(h, 0));
        const SafetensorsFile f(file);
        QCOMPARE(f.tensors().size(), size_t(100000));
    }

    void openErrors() {
        EXPECT_TS_ERROR(SafetensorsFile(path("does-not-exist.safetensors")), {"does-not-exist"}, ErrorKind::NotFound);
        EXPECT_TS_ERROR(SafetensorsFile(m_tmp.path().toStdString()), {"not a regular file"});
        const std::string f64 = path("f64.safetensors");
        writeBytes(f64, rawFile(R"({"t":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8));
        EXPECT_TS_ERROR(SafetensorsFile(f64), {"F64", "\"t\""}, ErrorKind::Unsupported);
        EXPECT_TS_ERROR(SafetensorsCheckpoint(path("no-such-dir")), {"no-such-dir"}, ErrorKind::NotFound);
        EXPECT_TS_ERROR(SafetensorsCheckpoint(subdir("empty-dir")), {"empty-dir"}, ErrorKind::NotFound);
    }

    void shardedViaIndex() {
        const std::string dir = subdir("sharded");
        writeShard(dir + "/model-00001-of-00002.safetensors", {"a.weight", "c.weight"});
        writeShard(dir + "/model-00002-of-00002.safetensors", {"b.weight"});
        writeBytes(dir + "/model.safetensors.index.json",
                   R"({"metadata":{"total_size":24},"weight_map":{"a.weight":"model-00001-of-00002.safetensors",)"
                   R"("b.weight":"model-00002-of-00002.safetensors","c.weight":"model-00001-of-00002.safetensors"}})");
        SafetensorsCheckpoint ck(dir);
        QCOMPARE(ck.names(), (std::vector<std::string>{"a.weight", "b.weight", "c.weight"}));
        QCOMPARE(ck.shards().size(), size_t(2));
        QVERIFY(ck.shardOf("b.weight")->path().find("00002") != std::string::npos);
        QCOMPARE(toF32(ck.get("c.weight")), (std::vector<float>{1.0f, 1.5f}));
        QVERIFY(ck.find("d.weight") == nullptr);
        EXPECT_TS_ERROR(ck.get("d.weight"), {"d.weight", dir}, ErrorKind::NotFound);
        const SafetensorsCheckpoint moved = std::move(ck);
        QCOMPARE(toF32(moved.get("b.weight")), (std::vector<float>{1.0f, 1.5f}));
    }

    void allShardsWithoutIndex() {
        const std::string dir = subdir("loose");
        writeShard(dir + "/z.safetensors", {"z"});
        writeShard(dir + "/a.safetensors", {"a"});
        writeBytes(dir + "/notes.txt", "not a shard");
        SafetensorsCheckpoint ck(dir);
        QCOMPARE(ck.shards().size(), size_t(2));
        QVERIFY(ck.shards()[0].path().ends_with("a.safetensors"));  // sorted
        QCOMPARE(ck.names(), (std::vector<std::string>{"a", "z"}));
        // The same tensor in two shards is rejected.
        writeShard(dir + "/m.safetensors", {"a"});
        EXPECT_TS_ERROR(SafetensorsCheckpoint(dir), {"\"a\"", "two shards"});
    }

    void badIndex_data() {
        QTest::addColumn<QString>("index");
        QTest::addColumn<QString>("needle");
        QTest::addColumn<int>("kind");
        const auto row = [](const char* tag, const char* index, const char* needle, ErrorKind kind) {
            QTest::newRow(tag) << QString(index) << QString(needle) << int(kind);
        };
        row("bad JSON", R"({"weight_map":)", "not valid JSON", ErrorKind::InvalidFile);
        row("not an object", R"([1])", "not an object", ErrorKind::InvalidFile);
        row("no weight_map", R"({"metadata":{}})", "weight_map", ErrorKind::InvalidFile);
        row("weight_map not an object", R"({"weight_map":["s1.safetensors"]})", "weight_map", ErrorKind::InvalidFile);
        row("empty weight_map", R"({"weight_map":{}})", "empty", ErrorKind::InvalidFile);
        row("shard not a string", R"({"weight_map":{"a":1}})", "weight_map[\"a\"]", ErrorKind::InvalidFile);
        row("missing shard", R"({"weight_map":{"a":"s1.safetensors","b":"gone.safetensors"}})", "gone.safetensors",
            ErrorKind::NotFound);
        row("escaping ..", R"({"weight_map":{"a":"../s1.safetensors"}})", "../s1.safetensors", ErrorKind::InvalidFile);
        row("subdirectory", R"({"weight_map":{"a":"sub/s1.safetensors"}})", "sub/s1.safetensors",
            ErrorKind::InvalidFile);
        row("absolute path", R"({"weight_map":{"a":"/etc/passwd"}})", "/etc/passwd", ErrorKind::InvalidFile);
        row("tensor missing in shard", R"({"weight_map":{"a":"s1.safetensors","x":"s2.safetensors"}})", "\"x\"",
            ErrorKind::InvalidFile);
        row("tensor in the wrong shard", R"({"weight_map":{"a":"s2.safetensors","b":"s2.safetensors"}})", "\"a\"",
            ErrorKind::InvalidFile);
        row("duplicate tensor", R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors","d":"s3.safetensors"}})",
            "two shards", ErrorKind::InvalidFile);
    }

    void badIndex() {
        QFETCH(QString, index);
        QFETCH(QString, needle);
        QFETCH(int, kind);
        static int n = 0;
        const std::string dir = subdir("badindex" + std::to_string(n++));
        fs::create_directories(dir + "/sub");
        writeShard(dir + "/s1.safetensors", {"a"});
        writeShard(dir + "/s2.safetensors", {"b"});
        writeShard(dir + "/s3.safetensors", {"d", "a"});  // "a" again: only referenced by the duplicate case
        writeShard(dir + "/sub/s1.safetensors", {"a"});
        writeBytes(dir + "/model.safetensors.index.json", index.toStdString());
        EXPECT_TS_ERROR(SafetensorsCheckpoint(dir), {needle.toStdString()}, ErrorKind(kind));
    }

    void writerErrors() {
        const float v[2] = {1, 2};
        const std::string file = path("w.safetensors");
        EXPECT_TS_ERROR(writeSafetensors(file, {{"a", DType::F32, {2}, v}, {"a", DType::F32, {2}, v}}),
                        {"duplicate", "\"a\""}, ErrorKind::InvalidArgument);
        EXPECT_TS_ERROR(writeSafetensors(file, {{"a", DType::F32, {-2}, v}}), {"\"a\"", "negative"},
                        ErrorKind::InvalidArgument);
        EXPECT_TS_ERROR(writeSafetensors(file, {{"a", DType::F32, {2}, nullptr}}), {"\"a\"", "no data"},
                        ErrorKind::InvalidArgument);
        EXPECT_TS_ERROR(writeSafetensors(file, {{"__metadata__", DType::F32, {2}, v}}), {"__metadata__"},
                        ErrorKind::InvalidArgument);
        EXPECT_TS_ERROR(writeSafetensors(path("no/such/dir/x.safetensors"), {{"a", DType::F32, {2}, v}}),
                        {"no/such/dir"}, ErrorKind::Io);
        QVERIFY(!fs::exists(file));
        // Overwriting an existing file replaces it whole.
        writeSafetensors(file, {{"a", DType::F32, {2}, v}});
        writeSafetensors(file, {{"b", DType::F32, {1}, v}});
        QCOMPARE(SafetensorsFile(file).names(), std::vector<std::string>{"b"});
    }

    // Random mutations and truncations of a valid file: each attempt either loads (and then every
    // tensor can be read in bounds) or throws ts::Error. Fixed seed, so a failure reproduces.
    void fuzzMutations() {
        const std::vector<float> f = {1, 2, 3, 4, 5, 6};
        const std::vector<uint16_t> h = {1, 2, 3};
        const std::vector<int64_t> l = {7, 8};
        const std::string seedFile = path("seed.safetensors");
        writeSafetensors(seedFile,
                         {{"layer.0.w", DType::F32, {2, 3}, f.data()}, {"b", DType::BF16, {3}, h.data()},
                          {"idx", DType::I64, {2}, l.data()}, {"s", DType::F8_E4M3, {0}, nullptr}},
                         {{"format", "pt"}});
        const std::string seed = readBytes(seedFile);
        uint64_t hdrLen = 0;
        std::memcpy(&hdrLen, seed.data(), 8);

        std::mt19937_64 rng(0x75u);
        const std::string file = path("fuzz.safetensors");
        const char interesting[] = "{}[]\",:-0123456789e.\\ \x00\xff";
        int loaded = 0, rejected = 0;
        for (int iter = 0; iter < 2000; ++iter) {
            std::string b = seed;
            const int op = int(rng() % 6);
            const int edits = 1 + int(rng() % 4);
            for (int e = 0; e < edits; ++e) {
                // Mostly inside the header, where the parser lives.
                const size_t pos = rng() % 4 ? 8 + size_t(rng() % hdrLen) : size_t(rng() % b.size());
                if (op == 0) b[pos] = char(rng());
                else if (op == 1) b[pos] = interesting[rng() % (sizeof(interesting) - 1)];
                else if (op == 2) b[pos] = char(b[pos] ^ (1 << (rng() % 8)));
            }
            if (op == 3) b.resize(size_t(rng() % b.size()));
            if (op == 5) {  // digits only: the JSON stays valid, shapes and offsets change
                for (int e = 0; e < edits; ++e) {
                    const size_t pos = 8 + size_t(rng() % hdrLen);
                    if (b[pos] >= '0' && b[pos] <= '9') b[pos] = char('0' + rng() % 10);
                }
            }
            if (op == 4) {  // a random or nearly-right header length
                const uint64_t len = rng() % 2 ? rng() : hdrLen + (rng() % 17) - 8;
                std::memcpy(b.data(), &len, 8);
            }
            writeBytes(file, b);
            try {
                SafetensorsFile st(file);
                for (const auto& t : st.tensors()) {
                    const auto v = toF32(t);
                    QCOMPARE(uint64_t(v.size()) * dtypeSize(t.dtype), t.nbytes);
                }
                ++loaded;
            } catch (const Error&) {
                ++rejected;
            } catch (const std::exception& e) {
                QFAIL(qPrintable(QString("iteration %1 threw a non-ts exception: %2").arg(iter).arg(e.what())));
            }
        }
        qInfo("fuzz: %d loaded, %d rejected", loaded, rejected);
        QCOMPARE(loaded + rejected, 2000);
        QVERIFY(rejected > 100);  // the mutations do hit the validation paths
    }
};

QTEST_GUILESS_MAIN(TestSafetensors)
#include "test_safetensors.moc"
