// `inspect`: what a lone safetensors file holds (no config needed): every tensor, every EXL3 linear,
// and optionally one EXL3 linear's dense weight written back as F32.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "quant/exl3_format.h"
#include "quant/exl3_gemm.h"

namespace ts::cli {

namespace {

std::string shapeStr(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

void printLinear(const Exl3Linear& l) {
    std::printf("  %s  in=%" PRId64 " out=%" PRId64 " K=%d codebook=%s%s%s packed=%" PRId64 " bytes\n", l.prefix.c_str(),
                l.k, l.n, l.bits, std::string(exl3CodebookName(l.codebook)).c_str(), l.bias.empty() ? "" : " bias",
                l.legacySigns ? " legacy-signs" : "", l.packedBytes());
}

// Dense W [in_features, out_features] in the original basis (after both Hadamards and suh/svh).
int dequantize(const SafetensorsFile& f, const std::string& prefix, const std::string& out) {
    const Exl3Linear l = bindExl3Linear(tensorLookup(f), prefix);
    printLinear(l);
    std::vector<float> w(static_cast<size_t>(l.k * l.n));
    exl3Reconstruct(l, w.data());
    const std::map<std::string, std::string> meta = {{"source", f.path()},
                                                     {"prefix", prefix},
                                                     {"bits", std::to_string(l.bits)},
                                                     {"codebook", std::string(exl3CodebookName(l.codebook))},
                                                     {"layout", "[in_features, out_features], y = x · weight"}};
    writeSafetensors(out, {{"weight", DType::F32, {l.k, l.n}, w.data()}}, meta);
    std::fprintf(stderr, "wrote %s: weight F32 [%" PRId64 ", %" PRId64 "]\n", out.c_str(), l.k, l.n);
    return 0;
}

}  // namespace

int cmdInspect(const Args& args) {
    if (args.help()) {
        std::printf("twinspark-cli inspect --file X.safetensors [--tensor PREFIX [--dequantize --out Y.safetensors]]\n"
                    "    [--threads N]\n"
                    "Lists every tensor (name, dtype, shape) and every EXL3 linear (prefix, in/out features, K,\n"
                    "codebook). --tensor restricts the listing to one EXL3 linear; with --dequantize --out it writes\n"
                    "that linear's dense weight as F32 tensor 'weight' [in_features, out_features] (original basis:\n"
                    "both Hadamards and the suh/svh scales applied; the Hugging Face weight is its transpose).\n");
        return 0;
    }
    args.accept({"file", "tensor", "out", "threads"}, {"dequantize"});
    const SafetensorsFile f(args.require("file"));
    const int64_t threads = args.getInt("threads", 0, 0, 1024);
    if (threads > 0) ThreadPool::setGlobalThreads(int(threads));
    const auto prefix = args.get("tensor");
    const bool deq = args.flag("dequantize");
    if (deq && !prefix) fail(ErrorKind::InvalidArgument, "--dequantize needs --tensor PREFIX");
    if (deq != args.get("out").has_value())
        fail(ErrorKind::InvalidArgument, deq ? "--dequantize needs --out FILE" : "--out is only used with --dequantize");
    if (deq) return dequantize(f, *prefix, args.require("out"));
    if (prefix) {
        printLinear(bindExl3Linear(tensorLookup(f), *prefix));
        return 0;
    }

    std::printf("%s: %zu tensors, %" PRIu64 " bytes\n", f.path().c_str(), f.tensors().size(), f.fileSize());
    for (const auto& t : f.tensors())
        std::printf("  %s  %s %s\n", t.name.c_str(), std::string(dtypeName(t.dtype)).c_str(), shapeStr(t.shape).c_str());
    const auto prefixes = exl3Prefixes(f.names());
    std::printf("EXL3 linears: %zu\n", prefixes.size());
    int bad = 0;
    for (const auto& p : prefixes) {
        // Report a malformed linear and keep listing the others; the exit status says something was wrong.
        try {
            printLinear(bindExl3Linear(tensorLookup(f), p));
        } catch (const Error& e) {
            std::printf("  %s  ERROR: %s\n", p.c_str(), e.what());
            ++bad;
        }
    }
    if (bad) {
        std::fprintf(stderr, "twinspark-cli inspect: %d malformed EXL3 linear(s)\n", bad);
        return 2;
    }
    return 0;
}

}  // namespace ts::cli
