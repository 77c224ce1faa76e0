#include "io/safetensors.h"

#include "core/error.h"
#include "io/atomic_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ts {

// The format is little-endian and we read it in place.
static_assert(std::endian::native == std::endian::little, "TwinSpark assumes a little-endian host");

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
    fail(ErrorKind::InvalidFile, "safetensors file " + path + ": " + what);
}

std::string sysError() { return std::strerror(errno); }

// Safetensors dtype names that are valid in the format but that TwinSpark does not implement; they
// get ErrorKind::Unsupported rather than InvalidFile so that the message tells the user the file is fine.
bool isKnownUnsupportedDtype(std::string_view n) {
    static constexpr std::string_view kNames[] = {"F64", "U16", "U32", "U64", "F8_E5M2", "F8_E8M0",
                                                   "F6_E2M3", "F6_E3M2", "F4", "C64"};
    return std::find(std::begin(kNames), std::end(kNames), n) != std::end(kNames);
}

// A non-negative JSON integer (nlohmann stores small non-negative literals as unsigned, negative ones
// as integer, and anything with a fraction, exponent or beyond 2^64 as float).
bool readU64(const json& v, uint64_t& out) {
    if (v.is_number_unsigned()) { out = v.get<uint64_t>(); return true; }
    if (v.is_number_integer()) {
        const int64_t s = v.get<int64_t>();
        if (s < 0) return false;
        out = uint64_t(s);
        return true;
    }
    return false;
}

}  // namespace

int64_t TensorInfo::numel() const {
    // A zero dim short-circuits: the other dims of an empty tensor may multiply past int64. Otherwise
    // the product cannot overflow: the loader checked it against the byte size.
    if (std::find(shape.begin(), shape.end(), int64_t(0)) != shape.end()) return 0;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

namespace {
// memcpy per element: the data may sit at any byte offset (see the header comment).
template <typename T, typename F>
void convertAll(const uint8_t* p, std::vector<float>& out, F convert) {
    for (size_t i = 0; i < out.size(); ++i) {
        T v;
        std::memcpy(&v, p + i * sizeof(T), sizeof(T));
        out[i] = float(convert(v));
    }
}
}  // namespace

std::vector<float> toF32(const TensorInfo& t) {
    const size_t n = size_t(t.numel());
    TS_CHECK(t.nbytes == n * dtypeSize(t.dtype), "tensor " + t.name + ": nbytes does not match its shape");
    std::vector<float> out(n);
    const uint8_t* p = t.data;
    const auto same = [](auto v) { return v; };
    switch (t.dtype) {
    case DType::BF16: convertAll<uint16_t>(p, out, bf16ToF32); break;
    case DType::F16: convertAll<uint16_t>(p, out, f16ToF32); break;
    case DType::F32: convertAll<float>(p, out, same); break;
    case DType::F8_E4M3: convertAll<uint8_t>(p, out, fp8e4m3ToF32); break;
    case DType::I8: convertAll<int8_t>(p, out, same); break;
    case DType::U8: convertAll<uint8_t>(p, out, same); break;
    case DType::I16: convertAll<int16_t>(p, out, same); break;
    case DType::I32: convertAll<int32_t>(p, out, same); break;
    case DType::I64: convertAll<int64_t>(p, out, same); break;
    case DType::BOOL: convertAll<uint8_t>(p, out, [](uint8_t v) { return v ? 1.0f : 0.0f; }); break;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------------
// SafetensorsFile

SafetensorsFile::SafetensorsFile(const std::string& path) : m_path(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const ErrorKind kind = errno == ENOENT ? ErrorKind::NotFound : ErrorKind::Io;
        fail(kind, "cannot open safetensors file " + path + ": " + sysError());
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const std::string e = sysError();
        ::close(fd);
        fail(ErrorKind::Io, "cannot stat safetensors file " + path + ": " + e);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        invalid(path, "not a regular file");
    }
    m_size = uint64_t(st.st_size);
    if (m_size < 8) {
        ::close(fd);
        invalid(path, "file is " + std::to_string(m_size) + " bytes, shorter than the 8-byte header length");
    }
    void* map = ::mmap(nullptr, size_t(m_size), PROT_READ, MAP_PRIVATE, fd, 0);
    const std::string mapErr = map == MAP_FAILED ? sysError() : std::string();
    ::close(fd);  // the mapping keeps its own reference to the file
    if (map == MAP_FAILED) fail(ErrorKind::Io, "cannot mmap safetensors file " + path + ": " + mapErr);
    m_map = map;
    try {
        parseHeader();
    } catch (...) {
        release();
        throw;
    }
}

SafetensorsFile::~SafetensorsFile() { release(); }

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : m_path(std::move(o.m_path)), m_map(std::exchange(o.m_map, nullptr)), m_size(std::exchange(o.m_size, 0)),
      m_tensors(std::move(o.m_tensors)), m_metadata(std::move(o.m_metadata)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
    if (this != &o) {
        release();
        m_path = std::move(o.m_path);
        m_map = std::exchange(o.m_map, nullptr);
        m_size = std::exchange(o.m_size, 0);
        m_tensors = std::move(o.m_tensors);
        m_metadata = std::move(o.m_metadata);
    }
    return *this;
}

void SafetensorsFile::release() noexcept {
    if (m_map) ::munmap(m_map, size_t(m_size));
    m_map = nullptr;
    m_tensors.clear();
}

namespace {

// One pass over the header's JSON events, holding nothing but the top-level keys: refuses a duplicate
// top-level key, nesting deeper than a header has (top object > entry > shape / data_offsets array) and an
// array longer than any shape (64 entries; the DOM of a crafted 4M-entry shape took ~100 MB).
struct HeaderScan : nlohmann::json_sax<json> {
    static constexpr size_t kMaxDepth = 3, kMaxArray = 64;
    std::set<std::string> topKeys;
    std::vector<std::pair<bool, size_t>> stack;  // (is an array, elements so far) per open container
    std::string error;

    bool refuse(std::string why) {
        if (error.empty()) error = std::move(why);
        return false;
    }
    bool value() {
        if (!stack.empty() && stack.back().first && ++stack.back().second > kMaxArray)
            return refuse("header has an array of more than " + std::to_string(kMaxArray) +
                          " entries (no tensor shape has that many dimensions)");
        return true;
    }
    bool open(bool array) {
        if (!value()) return false;
        if (stack.size() >= kMaxDepth) return refuse("header is nested deeper than a safetensors header is");
        stack.emplace_back(array, 0);
        return true;
    }
    bool null() override { return value(); }
    bool boolean(bool) override { return value(); }
    bool number_integer(number_integer_t) override { return value(); }
    bool number_unsigned(number_unsigned_t) override { return value(); }
    bool number_float(number_float_t, const string_t&) override { return value(); }
    bool string(string_t&) override { return value(); }
    bool binary(binary_t&) override { return value(); }
    bool start_object(std::size_t) override { return open(false); }
    bool start_array(std::size_t) override { return open(true); }
    bool end_object() override {
        stack.pop_back();
        return true;
    }
    bool end_array() override {
        stack.pop_back();
        return true;
    }
    bool key(string_t& k) override {
        if (stack.size() == 1 && !topKeys.insert(k).second) return refuse("duplicate header entry \"" + k + "\"");
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        return refuse(std::string("header is not valid JSON: ") + e.what());
    }
};

}  // namespace

void SafetensorsFile::parseHeader() {
    const auto* base = static_cast<const uint8_t*>(m_map);
    uint64_t n = 0;
    std::memcpy(&n, base, 8);
    if (n > kMaxHeaderBytes)
        invalid(m_path, "header length " + std::to_string(n) + " exceeds the limit of " +
                            std::to_string(kMaxHeaderBytes) + " bytes");
    if (n > m_size - 8)
        invalid(m_path, "header length " + std::to_string(n) + " runs past the end of the file (" +
                            std::to_string(m_size) + " bytes)");
    const auto* hdr = reinterpret_cast<const char*>(base + 8);
    const uint64_t dataStart = 8 + n;
    const uint64_t dataSize = m_size - dataStart;

    // A streaming pass first (HeaderScan): duplicate top-level keys, which would silently shadow each other in
    // the DOM, and shapes no tensor has are refused before any DOM is built. (nlohmann's callback parser, used
    // for the duplicates before, took time quadratic in the entry count: `inspect --file` of a header of 25,000 /
    // 50,000 empty tensors took 4.0 / 16.0 s, now 0.45 / 0.57 s; an 8 MB header holding one 4M-entry shape added
    // ~100 MB of peak memory before it was refused, now nothing.)
    HeaderScan scan;
    if (!json::sax_parse(hdr, hdr + n, &scan)) invalid(m_path, scan.error);
    json header;
    try {
        header = json::parse(hdr, hdr + n);
    } catch (const json::exception& e) {
        invalid(m_path, std::string("header is not valid JSON: ") + e.what());
    }
    if (!header.is_object()) invalid(m_path, std::string("header is a JSON ") + header.type_name() + ", not an object");

    m_tensors.reserve(header.size());
    for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            if (!entry.is_object()) invalid(m_path, "__metadata__ is not an object");
            for (const auto& [k, v] : entry.items()) {
                if (!v.is_string()) invalid(m_path, "__metadata__ value \"" + k + "\" is not a string");
                m_metadata[k] = v.get<std::string>();
            }
            continue;
        }
        const std::string where = "tensor \"" + name + "\": ";
        if (!entry.is_object()) invalid(m_path, where + "entry is not an object");

        TensorInfo t;
        t.name = name;
        const auto dt = entry.find("dtype");
        if (dt == entry.end() || !dt->is_string()) invalid(m_path, where + "missing or non-string \"dtype\"");
        const std::string& dtName = dt->get_ref<const std::string&>();
        const auto parsedDtype = dtypeFromName(dtName);
        if (!parsedDtype) {
            if (isKnownUnsupportedDtype(dtName))
                fail(ErrorKind::Unsupported, "safetensors file " + m_path + ": " + where + "dtype " + dtName +
                                                 " is not supported");
            invalid(m_path, where + "unknown dtype \"" + dtName + "\"");
        }
        t.dtype = *parsedDtype;

        const auto sh = entry.find("shape");
        if (sh == entry.end() || !sh->is_array()) invalid(m_path, where + "missing or non-array \"shape\"");
        uint64_t numel = 1;
        bool overflow = false, anyZero = false;
        for (const auto& d : *sh) {
            uint64_t dim = 0;
            if (!readU64(d, dim) || dim > uint64_t(std::numeric_limits<int64_t>::max()))
                invalid(m_path, where + "shape " + sh->dump() + " has a dimension that is not a non-negative integer");
            t.shape.push_back(int64_t(dim));
            anyZero = anyZero || dim == 0;
            if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim) overflow = true;
            numel *= dim;
        }
        // A zero dimension makes the product 0 whatever the other dims, so overflow only matters if
        // no dimension is zero.
        if (anyZero) numel = 0;
        else if (overflow) invalid(m_path, where + "shape " + sh->dump() + " has too many elements");

        const auto off = entry.find("data_offsets");
        uint64_t begin = 0, end = 0;
        if (off == entry.end() || !off->is_array() || off->size() != 2 || !readU64((*off)[0], begin) ||
            !readU64((*off)[1], end))
            invalid(m_path, where + "\"data_offsets\" must be an array of two non-negative integers");
        if (begin > end)
            invalid(m_path, where + "data_offsets begin " + std::to_string(begin) + " > end " + std::to_string(end));
        if (end > dataSize)
            invalid(m_path, where + "data_offsets end " + std::to_string(end) + " is outside the data section (" +
                                std::to_string(dataSize) + " bytes)");
        const uint64_t esz = dtypeSize(t.dtype);
        if (numel > std::numeric_limits<uint64_t>::max() / esz || numel * esz != end - begin)
            invalid(m_path, where + "byte size " + std::to_string(end - begin) + " does not match shape " +
                                sh->dump() + " x " + std::string(dtypeName(t.dtype)) + " (" +
                                std::to_string(esz) + " bytes per element)");
        // numel * esz == end - begin <= file size, so numel() fits int64 from here on.
        t.data = base + dataStart + begin;
        t.nbytes = end - begin;
        m_tensors.push_back(std::move(t));
    }

    // Overlap check: with tensors sorted by (begin, end) a neighbour overlap is the only kind possible.
    std::vector<const TensorInfo*> byOffset;
    byOffset.reserve(m_tensors.size());
    for (const auto& t : m_tensors) byOffset.push_back(&t);
    std::sort(byOffset.begin(), byOffset.end(), [](const TensorInfo* a, const TensorInfo* b) {
        return a->data != b->data ? a->data < b->data : a->nbytes < b->nbytes;
    });
    for (size_t i = 1; i < byOffset.size(); ++i) {
        const TensorInfo& prev = *byOffset[i - 1];
        const TensorInfo& cur = *byOffset[i];
        if (prev.data + prev.nbytes > cur.data)
            invalid(m_path, "tensors \"" + prev.name + "\" and \"" + cur.name + "\" overlap in the data section");
    }

    std::sort(m_tensors.begin(), m_tensors.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
    const auto it = std::lower_bound(m_tensors.begin(), m_tensors.end(), name,
                                     [](const TensorInfo& t, std::string_view n) { return t.name < n; });
    return it != m_tensors.end() && it->name == name ? &*it : nullptr;
}

const TensorInfo& SafetensorsFile::get(std::string_view name) const {
    if (const TensorInfo* t = find(name)) return *t;
    fail(ErrorKind::NotFound, "tensor \"" + std::string(name) + "\" not found in safetensors file " + m_path);
}

std::vector<std::string> SafetensorsFile::names() const {
    std::vector<std::string> out;
    out.reserve(m_tensors.size());
    for (const auto& t : m_tensors) out.push_back(t.name);
    return out;
}

// ---------------------------------------------------------------------------------------------------
// SafetensorsCheckpoint

namespace {

json readIndexJson(const std::string& path) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) fail(ErrorKind::Io, "cannot read " + path + ": " + ec.message());
    if (size > SafetensorsCheckpoint::kMaxIndexBytes)
        fail(ErrorKind::InvalidFile, path + ": " + std::to_string(size) + " bytes is larger than the limit");
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(ErrorKind::Io, "cannot open " + path);
    std::string text(size_t(size), '\0');
    in.read(text.data(), std::streamsize(size));
    if (in.gcount() != std::streamsize(size)) fail(ErrorKind::Io, "short read from " + path);
    try {
        return json::parse(text);
    } catch (const json::exception& e) {
        fail(ErrorKind::InvalidFile, path + ": not valid JSON: " + e.what());
    }
}

}  // namespace

SafetensorsCheckpoint::SafetensorsCheckpoint(const std::string& dirOrFile) : m_path(dirOrFile) {
    std::error_code ec;
    const fs::path p(dirOrFile);
    if (fs::is_regular_file(p, ec)) {
        openShards({dirOrFile});
        buildIndex();
        return;
    }
    if (!fs::is_directory(p, ec))
        fail(ErrorKind::NotFound, "model path " + dirOrFile + " is neither a directory nor a file");

    const fs::path single = p / "model.safetensors";
    const fs::path index = p / "model.safetensors.index.json";
    if (fs::exists(single, ec)) {
        openShards({single.string()});
        buildIndex();
        return;
    }
    if (fs::exists(index, ec)) {
        const std::string ip = index.string();
        const json j = readIndexJson(ip);
        if (!j.is_object()) fail(ErrorKind::InvalidFile, ip + ": top level is not an object");
        const auto wm = j.find("weight_map");
        if (wm == j.end() || !wm->is_object())
            fail(ErrorKind::InvalidFile, ip + ": missing or non-object \"weight_map\"");
        std::map<std::string, std::string> weightMap;
        std::set<std::string> shardNames;
        for (const auto& [tensor, file] : wm->items()) {
            if (!file.is_string())
                fail(ErrorKind::InvalidFile, ip + ": weight_map[\"" + tensor + "\"] is not a string");
            const std::string& f = file.get_ref<const std::string&>();
            // The index is outside input: a shard name must stay inside the model directory.
            if (f.empty() || f == "." || f.find('/') != std::string::npos || f.find('\\') != std::string::npos ||
                f.find("..") != std::string::npos)
                fail(ErrorKind::InvalidFile, ip + ": weight_map[\"" + tensor + "\"] = \"" + f +
                                                 "\" is not a plain file name in the model directory");
            weightMap[tensor] = f;
            shardNames.insert(f);
        }
        if (weightMap.empty()) fail(ErrorKind::InvalidFile, ip + ": \"weight_map\" is empty");
        std::vector<std::string> files;
        for (const auto& f : shardNames) {
            const fs::path sp = p / f;
            if (!fs::is_regular_file(sp, ec))
                fail(ErrorKind::NotFound, ip + ": shard " + f + " listed in weight_map does not exist in " + dirOrFile);
            files.push_back(sp.string());
        }
        openShards(files);
        buildIndex();
        checkWeightMap(ip, weightMap);
        return;
    }

    std::vector<std::string> files;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().extension() == ".safetensors" && it->is_regular_file(ec)) files.push_back(it->path().string());
    if (ec) fail(ErrorKind::Io, "cannot list model directory " + dirOrFile + ": " + ec.message());
    if (files.empty())
        fail(ErrorKind::NotFound,
             "no model.safetensors, model.safetensors.index.json or *.safetensors in " + dirOrFile);
    std::sort(files.begin(), files.end());
    openShards(files);
    buildIndex();
}

void SafetensorsCheckpoint::openShards(const std::vector<std::string>& files) {
    m_shards.reserve(files.size());
    for (const auto& f : files) m_shards.emplace_back(f);
}

void SafetensorsCheckpoint::buildIndex() {
    // Built after all shards are open: TensorInfo addresses are stable from here on.
    for (uint32_t s = 0; s < m_shards.size(); ++s)
        for (const auto& t : m_shards[s].tensors()) m_index.push_back({t.name, &t, s});
    std::sort(m_index.begin(), m_index.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
    for (size_t i = 1; i < m_index.size(); ++i)
        if (m_index[i].name == m_index[i - 1].name)
            fail(ErrorKind::InvalidFile, "tensor \"" + std::string(m_index[i].name) + "\" appears in two shards: " +
                                             m_shards[m_index[i - 1].shard].path() + " and " +
                                             m_shards[m_index[i].shard].path());
}

void SafetensorsCheckpoint::checkWeightMap(const std::string& indexPath,
                                           const std::map<std::string, std::string>& weightMap) {
    for (const auto& [tensor, file] : weightMap) {
        const Entry* e = lookup(tensor);
        const std::string expected = (fs::path(m_path) / file).string();
        if (!e || m_shards[e->shard].path() != expected)
            fail(ErrorKind::InvalidFile, indexPath + ": tensor \"" + tensor + "\" is mapped to " + file +
                                             " but that shard does not contain it");
    }
}

const SafetensorsCheckpoint::Entry* SafetensorsCheckpoint::lookup(std::string_view name) const {
    const auto it = std::lower_bound(m_index.begin(), m_index.end(), name,
                                     [](const Entry& e, std::string_view n) { return e.name < n; });
    return it != m_index.end() && it->name == name ? &*it : nullptr;
}

const TensorInfo* SafetensorsCheckpoint::find(std::string_view name) const {
    const Entry* e = lookup(name);
    return e ? e->info : nullptr;
}

const TensorInfo& SafetensorsCheckpoint::get(std::string_view name) const {
    if (const TensorInfo* t = find(name)) return *t;
    fail(ErrorKind::NotFound, "tensor \"" + std::string(name) + "\" not found in checkpoint " + m_path);
}

const SafetensorsFile* SafetensorsCheckpoint::shardOf(std::string_view name) const {
    const Entry* e = lookup(name);
    return e ? &m_shards[e->shard] : nullptr;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
    std::vector<std::string> out;
    out.reserve(m_index.size());
    for (const auto& e : m_index) out.emplace_back(e.name);
    return out;
}

// ---------------------------------------------------------------------------------------------------
// Writer

void writeSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata) {
    const auto bad = [&](const std::string& what) {
        fail(ErrorKind::InvalidArgument, "writing safetensors file " + path + ": " + what);
    };
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::set<std::string_view> names;
    std::vector<uint64_t> sizes;
    uint64_t offset = 0;
    for (const auto& t : tensors) {
        if (t.name.empty() || t.name == "__metadata__") bad("invalid tensor name \"" + t.name + "\"");
        if (!names.insert(t.name).second) bad("duplicate tensor \"" + t.name + "\"");
        uint64_t bytes = dtypeSize(t.dtype);
        for (int64_t d : t.shape) {
            if (d < 0) bad("tensor \"" + t.name + "\" has a negative dimension");
            if (d != 0 && bytes > std::numeric_limits<uint64_t>::max() / uint64_t(d))
                bad("tensor \"" + t.name + "\" is too large");
            bytes *= uint64_t(d);
        }
        if (bytes > 0 && !t.data) bad("tensor \"" + t.name + "\" has no data");
        header[t.name] = {{"dtype", std::string(dtypeName(t.dtype))}, {"shape", t.shape},
                          {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
        sizes.push_back(bytes);
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const nlohmann::json::exception& e) {
        bad(std::string("header cannot be encoded (names and metadata must be UTF-8): ") + e.what());
    }
    text.append((8 - text.size() % 8) % 8, ' ');
    const uint64_t n = text.size();

    // A temporary file renamed over the target (io/atomic_file.h): a reader never sees half a file.
    AtomicFileWriter out(path);
    out.write(&n, 8);
    out.write(text.data(), n);
    for (size_t i = 0; i < tensors.size(); ++i) out.write(tensors[i].data, sizes[i]);
    out.commit();
}

}  // namespace ts
