#include "cli/model_loading.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <system_error>

#include "profiling_backend.h"

#include "core/error.h"
#include "runtime/runtime_settings.h"
#include "core/thread_pool.h"
#include "io/default_paths.h"
#include "runtime/device_budget.h"

namespace ts::cli {

const std::set<std::string> kModelOptions = {"model", "kv-cache-dtype", "threads", "backend"};

KvCacheDtype parseKvCacheDtype(const std::string& dt) {
    std::string why;
    if (const auto d = parseKvCacheDtypeSetting(dt, &why)) return *d;
    if (why.rfind("refused", 0) == 0) fail(ErrorKind::InvalidArgument, "--kv-cache-dtype '" + dt + "' is " + why);
    fail(ErrorKind::InvalidArgument, "--kv-cache-dtype must be " + why + ", got '" + dt + "'");
}

LoadedModel loadModel(const Args& args, bool profileOps, std::optional<double> gpuMemUtil) {
    LoadedModel l;
    const std::string backend = args.get("backend").value_or("auto");
    const int64_t threads = args.getInt("threads", 0, 0, 1024);
    if (threads > 0) ThreadPool::setGlobalThreads(int(threads));
    l.dt = parseKvCacheDtype(args.get("kv-cache-dtype").value_or("fp8"));
    l.backend = makeBackend(backend);
    if (profileOps) l.backend = std::make_unique<ProfilingBackend>(std::move(l.backend));
    if (gpuMemUtil) {  // before the load: neither a CPU backend nor a shortfall should cost one
        DeviceMemory dm;
        if (!l.backend->deviceMemory(&dm))
            fail(ErrorKind::InvalidArgument,
                 "--gpu-mem-util sizes the KV pool on a GPU backend; this one is " + l.backend->name());
        checkStartupMemory(*l.backend, *gpuMemUtil, stderrNote("load"));
    }
    l.model = std::make_unique<Glm5NextModel>(args.require("model"), *l.backend, stderrLoadProgress("load", *l.backend),
                                              stderrBindProgress("load"));
    return l;
}

namespace {

// The three roots of the lookup: this binary's folder, the working directory (empty when it cannot be read) and
// the source tree the binary was built from (TS_SOURCE_DIR, set for twinspark-cli by app/CMakeLists.txt).
struct LookupRoots {
    std::filesystem::path app, work, source;
};

LookupRoots lookupRoots() {
    LookupRoots r;
    r.app = executableDir();
    std::error_code ec;
    r.work = std::filesystem::current_path(ec);
    if (ec) r.work.clear();
#ifdef TS_SOURCE_DIR
    r.source = TS_SOURCE_DIR;
#endif
    return r;
}

}  // namespace

std::optional<std::filesystem::path> findEmbeddedModel() {
    const LookupRoots r = lookupRoots();
    return findDefaultModel(r.app, r.work, r.source);
}

std::vector<std::filesystem::path> embeddedModelCandidates() {
    const LookupRoots r = lookupRoots();
    return defaultModelCandidates(r.app, r.work, r.source);
}

double parseGpuMemUtil(const std::string& value, const std::string& option) {
    std::string why;
    const auto u = parseGpuMemUtilSetting(value, &why);
    if (!u) fail(ErrorKind::InvalidArgument, option + " must be " + why + ", got '" + value + "'");
    return *u;
}

std::function<void(const std::string&)> stderrNote(const std::string& who) {
    return [who](const std::string& line) {
        std::fprintf(stderr, "%s: %s\n", who.c_str(), line.c_str());
        std::fflush(stderr);
    };
}

BindProgress stderrBindProgress(const std::string& who) {
    struct State {
        std::chrono::steady_clock::time_point start, last;
        bool printed = false;
    };
    auto st = std::make_shared<State>();
    return [who, st](int64_t done, int64_t layers) {
        const auto now = std::chrono::steady_clock::now();
        if (done == 0) {
            st->start = st->last = now;
            st->printed = false;
            return;
        }
        const double s = std::chrono::duration<double>(now - st->start).count();
        if (done == layers) {
            if (st->printed)
                std::fprintf(stderr, "%s: weights mapped and checked: %lld layers in %.1f s\n", who.c_str(),
                             (long long)layers, s);
        } else if (now - st->last >= std::chrono::seconds(2)) {
            st->last = now;
            st->printed = true;
            std::fprintf(stderr, "%s: mapping and checking the weights: layer %lld of %lld\n", who.c_str(),
                         (long long)done, (long long)layers);
        } else {
            return;
        }
        std::fflush(stderr);
    };
}

LoadProgress stderrLoadProgress(const std::string& who, const Backend& backend) {
    if (backend.name() == "cpu") return {};
    auto last = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
    return [who, last](int64_t done, int64_t total) {
        const auto now = std::chrono::steady_clock::now();
        if (done != total && (done == 0 || now - *last < std::chrono::seconds(2))) return;
        *last = now;
        std::fprintf(stderr, "%s: weights on the device %s\n", who.c_str(), formatLoadProgress(done, total).c_str());
        std::fflush(stderr);
    };
}

}  // namespace ts::cli
