// Read-only access to safetensors checkpoints (one file or a sharded directory) and a small writer.
//
// Format: 8-byte little-endian u64 N, then N bytes of UTF-8 JSON (the header), then the data section.
// The header maps tensor name -> {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to
// the data section) plus an optional "__metadata__" object of strings. Everything in the header is
// outside input, so it is validated completely before any tensor is handed out: a malformed file is a
// ts::Error naming the file and the tensor, never a crash or an out-of-bounds read.
//
// Alignment: tensor data is mapped straight from the file and the format only promises byte offsets,
// so TensorInfo::data may be unaligned for its dtype. Read elements with std::memcpy (or byte access),
// never by casting to `const float*` etc.; toF32() below does this for you.
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ts {

struct TensorInfo {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;   // [] for a 0-dim scalar
    const uint8_t* data = nullptr;  // into the read-only mapping; may be unaligned (see above)
    uint64_t nbytes = 0;            // == numel() * dtypeSize(dtype), checked at load
    int64_t numel() const;
};

// Converts any supported dtype (BF16, F16, F32, F8_E4M3, I8, U8, I16, I32, I64, BOOL) to fp32.
// Integers above 2^24 lose precision, as a float cast does.
std::vector<float> toF32(const TensorInfo& t);

// One .safetensors file, mapped read-only for the lifetime of the object. Non-copyable (it owns the
// mapping), movable (TensorInfo::data pointers stay valid across a move: the mapping does not move).
// As with any mmap, truncating the file while it is open makes later reads fault (SIGBUS); checkpoints
// are treated as immutable while loaded.
class SafetensorsFile {
public:
    // Largest header accepted. Real headers are a few MiB at most; the limit keeps a corrupt length
    // from turning into a huge allocation.
    static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

    // Throws ts::Error: NotFound (no such file), Io (open/mmap failed), InvalidFile (malformed),
    // Unsupported (a valid safetensors dtype TwinSpark does not implement, e.g. F64).
    explicit SafetensorsFile(const std::string& path);
    ~SafetensorsFile();
    SafetensorsFile(SafetensorsFile&& other) noexcept;
    SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::string& path() const { return m_path; }
    uint64_t fileSize() const { return m_size; }
    // nullptr when absent.
    const TensorInfo* find(std::string_view name) const;
    // Throws ts::Error(NotFound) naming the tensor and the file.
    const TensorInfo& get(std::string_view name) const;
    // All tensor names, sorted.
    std::vector<std::string> names() const;
    // All tensors, sorted by name.
    const std::vector<TensorInfo>& tensors() const { return m_tensors; }
    // The header's "__metadata__" (empty when absent).
    const std::map<std::string, std::string>& metadata() const { return m_metadata; }

private:
    void parseHeader();
    void release() noexcept;

    std::string m_path;
    void* m_map = nullptr;
    uint64_t m_size = 0;
    std::vector<TensorInfo> m_tensors;  // sorted by name
    std::map<std::string, std::string> m_metadata;
};

// A model directory (or a single .safetensors file path). Layout, in the order Hugging Face tries it:
//   1. `model.safetensors`;
//   2. `model.safetensors.index.json` whose "weight_map" maps tensor name -> shard file name;
//   3. otherwise every `*.safetensors` in the directory, in sorted order.
// Tensor names must be unique across shards. Shard names from an index must be plain file names in
// the directory (no '/', no ".."); symlinks are followed, since the Hugging Face cache stores
// snapshots as symlinks into its blob directory.
class SafetensorsCheckpoint {
public:
    static constexpr uint64_t kMaxIndexBytes = 100ull << 20;

    explicit SafetensorsCheckpoint(const std::string& dirOrFile);
    // Movable (the index points into shard-owned storage, which a move does not relocate).
    SafetensorsCheckpoint(SafetensorsCheckpoint&&) noexcept = default;
    SafetensorsCheckpoint& operator=(SafetensorsCheckpoint&&) noexcept = default;
    SafetensorsCheckpoint(const SafetensorsCheckpoint&) = delete;
    SafetensorsCheckpoint& operator=(const SafetensorsCheckpoint&) = delete;

    const std::string& path() const { return m_path; }
    const TensorInfo* find(std::string_view name) const;
    const TensorInfo& get(std::string_view name) const;  // NotFound names the tensor and the checkpoint
    std::vector<std::string> names() const;              // sorted, across all shards
    // The shard holding `name` (nullptr when absent).
    const SafetensorsFile* shardOf(std::string_view name) const;
    const std::vector<SafetensorsFile>& shards() const { return m_shards; }

private:
    struct Entry {
        std::string_view name;  // points into the owning TensorInfo
        const TensorInfo* info;
        uint32_t shard;
    };
    const Entry* lookup(std::string_view name) const;
    void openShards(const std::vector<std::string>& files);
    void buildIndex();
    void checkWeightMap(const std::string& indexPath, const std::map<std::string, std::string>& weightMap);

    std::string m_path;
    std::vector<SafetensorsFile> m_shards;
    std::vector<Entry> m_index;  // sorted by name
};

struct TensorToWrite {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    const void* data = nullptr;  // numel * dtypeSize bytes, any alignment
};

// Writes a safetensors file atomically: the bytes go to a temporary file in the same directory which
// is fsync'ed and renamed over `path`, so a crash never leaves a half-written file under that name.
// Tensors are laid out in the given order; the header is space-padded to a multiple of 8 bytes so
// the data section starts 8-aligned. Throws InvalidArgument (bad tensor list) or Io.
void writeSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace ts
