#include "cli/model_loading.h"

#include "profiling_backend.h"

#include "core/error.h"
#include "core/thread_pool.h"

namespace ts::cli {

const std::set<std::string> kModelOptions = {"model", "kv-cache-dtype", "threads", "backend"};

KvCacheDtype parseKvCacheDtype(const std::string& dt) {
    if (dt == "fp8") return KvCacheDtype::Fp8;
    if (dt == "fp32") return KvCacheDtype::Fp32;
    fail(ErrorKind::InvalidArgument, "--kv-cache-dtype must be fp8 or fp32, got '" + dt + "'");
}

LoadedModel loadModel(const Args& args, bool profileOps) {
    LoadedModel l;
    const std::string backend = args.get("backend").value_or("auto");
    const int64_t threads = args.getInt("threads", 0, 0, 1024);
    if (threads > 0) ThreadPool::setGlobalThreads(int(threads));
    l.dt = parseKvCacheDtype(args.get("kv-cache-dtype").value_or("fp8"));
    l.backend = makeBackend(backend);
    if (profileOps) l.backend = std::make_unique<ProfilingBackend>(std::move(l.backend));
    l.model = std::make_unique<Glm5NextModel>(args.require("model"), *l.backend);
    return l;
}

}  // namespace ts::cli
