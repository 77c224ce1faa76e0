// `inspect`: what a lone safetensors file holds (no config needed): every tensor, every EXL3 linear,
// and optionally one EXL3 linear's dense weight written back as F32. With --model: what the engine holds of a
// model directory (ModelWeights::held: each tensor the forward binds, in which form, at how many bytes) and
// which of the checkpoint's tensors it does not hold.
#include <array>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/glm5_next.h"
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

// "p.mul1" / "p.mcg" -> "p"; any other name -> "" (no linear).
std::string exl3FlagOwner(const std::string& name) {
    for (const char* flag : {".mul1", ".mcg"}) {
        const size_t n = std::char_traits<char>::length(flag);
        if (name.size() > n && name.compare(name.size() - n, n, flag) == 0) return name.substr(0, name.size() - n);
    }
    return {};
}

double mib(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

// The model is bound on the CPU backend: the matrices stay mapped views, so this reads headers and the small
// vectors only (the full-size checkpoint's suh / svh copies are ~1 GiB of host memory; nothing is computed).
int heldReport(const std::string& dir, bool listTensors, const std::optional<std::string>& jsonOut) {
    const std::unique_ptr<Backend> cpu = makeCpuBackend();
    const Glm5NextModel model(dir, *cpu, {}, stderrBindProgress("inspect"));
    const std::vector<HeldTensor>& held = model.weights().held;
    const SafetensorsCheckpoint ckpt(dir);
    const std::vector<std::string> all = ckpt.names();
    std::unordered_set<std::string> heldNames;
    for (const HeldTensor& h : held) heldNames.insert(h.name);
    std::vector<std::string> notHeld;  // the EXL3 codebook flags (read at binding), tensors no forward reads
    for (const std::string& n : all)
        if (!heldNames.count(n)) notHeld.push_back(n);

    constexpr std::array kForms = {HeldForm::Checkpoint, HeldForm::Fp32, HeldForm::Exl3Trellis};
    std::array<int64_t, 3> count{}, bytes{};
    int64_t total = 0;
    for (const HeldTensor& h : held) {
        count[size_t(h.form)] += 1;
        bytes[size_t(h.form)] += h.bytes;
        total += h.bytes;
    }
    std::printf("%s: the engine holds %zu of the checkpoint's %zu tensors, %.2f MiB\n", dir.c_str(), held.size(),
                all.size(), mib(total));
    const char* what[] = {"views of the file at its dtype (a device gets them as they are)",
                          "fp32 copies (per-channel vectors; EXL3 suh / svh / bias)", "EXL3 trellises, kept packed"};
    for (HeldForm f : kForms)
        std::printf("  %-10s %8" PRId64 " tensors %12.2f MiB  %s\n", std::string(heldFormName(f)).c_str(),
                    count[size_t(f)], mib(bytes[size_t(f)]), what[size_t(f)]);
    // The codebook flags (one per EXL3 linear) apart, so that the tensors no forward reads show up by name.
    std::vector<std::string> others;
    for (const std::string& n : notHeld)
        if (!isExl3Linear(tensorLookup(ckpt), exl3FlagOwner(n))) others.push_back(n);
    std::printf("not held: %zu tensors: %zu EXL3 codebook flags (read when binding), %zu others", notHeld.size(),
                notHeld.size() - others.size(), others.size());
    for (size_t i = 0; i < others.size() && i < 4; ++i) std::printf("%s%s", i ? ", " : " (", others[i].c_str());
    std::printf("%s\n", others.empty() ? "" : others.size() > 4 ? ", …)" : ")");
    if (listTensors)
        for (const HeldTensor& h : held)
            std::printf("  %s  %s %" PRId64 "\n", h.name.c_str(), std::string(heldFormName(h.form)).c_str(), h.bytes);
    if (jsonOut) {
        nlohmann::json j = {{"model", dir}, {"checkpoint_tensors", all.size()}, {"held_bytes", total}};
        nlohmann::json t = nlohmann::json::array();
        for (const HeldTensor& h : held)
            t.push_back({{"name", h.name}, {"form", heldFormName(h.form)}, {"bytes", h.bytes}});
        j["held"] = std::move(t);
        j["not_held"] = notHeld;
        writeFileAtomically(*jsonOut, j.dump(1) + "\n");
    }
    return 0;
}

}  // namespace

int cmdInspect(const Args& args) {
    if (args.help()) {
        std::printf("twinspark-cli inspect --file X.safetensors [--tensor PREFIX [--dequantize --out Y.safetensors]]\n"
                    "    [--threads N]\n"
                    "twinspark-cli inspect --model DIR [--tensors] [--json FILE]\n"
                    "Lists every tensor (name, dtype, shape) and every EXL3 linear (prefix, in/out features, K,\n"
                    "codebook). --tensor restricts the listing to one EXL3 linear; with --dequantize --out it writes\n"
                    "that linear's dense weight as F32 tensor 'weight' [in_features, out_features] (original basis:\n"
                    "both Hadamards and the suh/svh scales applied; the Hugging Face weight is its transpose).\n"
                    "--model: what the engine holds of a model directory: every tensor the forward binds, as a view of\n"
                    "the file at its dtype, an fp32 copy or a packed EXL3 trellis, with its bytes (totals; each tensor\n"
                    "with --tensors; all of it and the tensors it does not hold — EXL3 codebook flags, a vision tower —\n"
                    "with --json).\n");
        return 0;
    }
    args.accept({"file", "tensor", "out", "threads", "model", "json"}, {"dequantize", "tensors"});
    if (auto dir = args.get("model")) {
        for (const char* o : {"file", "tensor", "out", "threads"})  // binding computes nothing: no thread pool
            if (args.get(o)) fail(ErrorKind::InvalidArgument, std::string("--") + o + " is not used with --model");
        if (args.flag("dequantize")) fail(ErrorKind::InvalidArgument, "--dequantize is not used with --model");
        return heldReport(*dir, args.flag("tensors"), args.get("json"));
    }
    if (args.get("json")) fail(ErrorKind::InvalidArgument, "--json is only used with --model");
    if (args.flag("tensors")) fail(ErrorKind::InvalidArgument, "--tensors is only used with --model");
    if (!args.get("file")) fail(ErrorKind::InvalidArgument, "inspect needs --file X.safetensors or --model DIR");
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
