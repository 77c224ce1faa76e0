// `bench-device --what upload`: host → device uploads (Backend::upload, how a model's weights reach a GPU at load)
// of 1 GiB from anonymous memory and from a mapped file (what the weights are: views into the mapped checkpoint),
// through the CUDA backend's pinned ring and, for A/B, straight from the source (uploadSetRing(0), cudaMemcpy's own
// staging of pageable memory). GB/s of the source bytes; median of `reps` uploads (held to 3..10: each moves 1 GiB)
// after one warm-up (the file's pages are in the page cache by then: the load of a checkpoint read before, or
// synced, is in that state).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/bench_cuda.h"
#include "core/error.h"

namespace ts::cli {

namespace {

// A 1 GiB file of non-zero bytes in /tmp, mapped read-only and private as the checkpoint loader maps one; the
// file is unlinked at once (the mapping keeps it), so nothing is left behind.
struct MappedFile {
    void* map = MAP_FAILED;
    size_t bytes = 0;
    explicit MappedFile(size_t n) : bytes(n) {
        char path[] = "/tmp/ts_bench_upload_XXXXXX";
        const int fd = ::mkstemp(path);
        if (fd < 0) fail(ErrorKind::Io, "bench-device upload: cannot create a file in /tmp");
        ::unlink(path);
        std::vector<uint8_t> chunk(size_t(16) << 20);
        for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = uint8_t(i * 131 + 7);
        for (size_t off = 0; off < n; off += chunk.size()) {
            const size_t w = std::min(chunk.size(), n - off);
            if (::write(fd, chunk.data(), w) != ssize_t(w)) {
                ::close(fd);
                fail(ErrorKind::Io, "bench-device upload: cannot write the 1 GiB file in /tmp (disk full?)");
            }
        }
        map = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
        ::close(fd);
        if (map == MAP_FAILED) fail(ErrorKind::Io, "bench-device upload: cannot map the file");
    }
    ~MappedFile() {
        if (map != MAP_FAILED) ::munmap(map, bytes);
    }
};

}  // namespace

nlohmann::json benchUpload(Backend& backend, int reps) {
    constexpr size_t kBytes = size_t(1) << 30;
    reps = std::max(3, std::min(reps, 10));  // a second or so per upload on a PCIe device
    std::vector<uint8_t> anon(kBytes);
    for (size_t i = 0; i < kBytes; i += 4096) anon[i] = uint8_t(i >> 12);  // every page touched: resident
    MappedFile file(kBytes);
    std::printf("\nupload (host -> device, Backend::upload of 1 GiB; GB/s of the source bytes)\n");
    std::printf("%-16s %-22s %10s %10s\n", "source", "path", "ms", "GB/s");
    nlohmann::json rows = nlohmann::json::array();
    const struct {
        const char* name;
        const void* src;
    } sources[] = {{"anonymous", anon.data()}, {"mapped file", file.map}};
    for (const auto& s : sources) {
        for (int ring = 1; ring >= 0; --ring) {
            OverrideScope<uploadSetRing> scope(ring);
            const double sec = medianSeconds(backend, reps, 1, [&] { (void)backend.upload(s.src, kBytes); });
            const char* path = backend.name() == "cpu" ? "host copy" : ring ? "pinned ring" : "cudaMemcpy pageable";
            std::printf("%-16s %-22s %10.1f %10.2f\n", s.name, path, sec * 1e3, double(kBytes) / sec / 1e9);
            rows.push_back({{"source", s.name}, {"path", path}, {"ring", ring == 1}, {"ms", sec * 1e3},
                            {"GBps", double(kBytes) / sec / 1e9}});
            if (backend.name() == "cpu") break;  // one path only
        }
    }
    return rows;
}

}  // namespace ts::cli
