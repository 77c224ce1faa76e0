// `quantize`: a BF16 glm5_next checkpoint → an EXL3 checkpoint in exllamav3's layout (spec
// shared/specs/exl3.md §2, §5). Routed experts are quantized (with --all-linears also every other linear
// the model binds through a linear layer, the head at --head-bits); everything else is copied as is.
//
// Hessians come from our own BF16 forward over calibration token ids (Exl3HessianRecorder on the model's
// MLP hook): gate/up of an MLP share the Hessian of its input, down_proj has its activation's, a routed
// expert sees only its routed tokens. Attention projections and the head get no Hessian (plain per-tile
// Viterbi). Unlike exllamav3 the calibration state is not advanced through already-quantized layers: one
// BF16 forward feeds every layer (simpler; the Hessians are those of the original model).
//
// Output: one shard per decoder layer (the MTP block included) plus one for everything outside the layers,
// model.safetensors.index.json, config.json with quantization_config, and the other files of the input
// directory (generation_config.json, tokenizer files, ...). All of it is written into OUT.partial, which
// is renamed to OUT only once complete. Every shard is written atomically and recorded in
// OUT.partial/quantize_state.json, so rerunning the same command after an interruption resumes with the
// first unfinished shard (a different command on the same OUT.partial is refused).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "model/glm5_next.h"
#include "quant/exl3_calibration.h"
#include "quant/exl3_quantize.h"
#include "quant/exl3_viterbi.h"

namespace fs = std::filesystem;

namespace ts::cli {

namespace {

constexpr const char* kStateFile = "quantize_state.json";
constexpr const char* kQuantizerVersion = "0.1.0";  // TwinSpark's quantizer, written as quantization_config.version

using Clock = std::chrono::steady_clock;

// One linear to quantize. The source is `src` ([out, in]) or, for the fused expert layout, rows
// [rowOffset, rowOffset + out) of expert `expert` of a [E, rows, in] tensor.
struct Job {
    std::string prefix;  // output tensor prefix (per expert, HF names)
    const TensorInfo* src = nullptr;
    int64_t expert = -1, rowOffset = 0;
    int64_t out = 0, in = 0;
    int bits = 4;
    std::string mlp;  // the MLP prefix whose Hessian applies ("" = none)
    bool down = false;
    size_t group = 0;
    int64_t tiles() const { return ((in + 127) / 128 * 8) * ((out + 127) / 128 * 8); }
};

bool endsWith(const std::string& s, const std::string& suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// "…layers.<L>.rest" → L and rest; false for tensors outside the decoder layers.
bool splitLayer(const std::string& name, const std::string& prefix, int& layer, std::string& rest) {
    const std::string p = prefix + "layers.";
    if (name.rfind(p, 0) != 0) return false;
    size_t i = p.size(), j = i;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j == i || j >= name.size() || name[j] != '.') return false;
    layer = std::stoi(name.substr(i, j - i));
    rest = name.substr(j + 1);
    return true;
}

std::string hms(double s) {
    const long t = long(s + 0.5);
    char b[32];
    std::snprintf(b, sizeof b, "%02ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    return b;
}

std::string readFile(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) fail(ErrorKind::NotFound, "cannot read " + p.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}


uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

// Calibration rows: a JSON list of lists of token ids, or the deterministic synthetic set.
std::vector<std::vector<int32_t>> loadCalibration(const std::string& path) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(readFile(path));
    } catch (const nlohmann::json::exception& e) {
        fail(ErrorKind::InvalidFile, path + ": not valid JSON: " + e.what());
    }
    if (!j.is_array() || j.empty()) fail(ErrorKind::InvalidFile, path + ": expected a non-empty JSON list of lists of token ids");
    std::vector<std::vector<int32_t>> rows;
    for (size_t r = 0; r < j.size(); ++r) {
        if (!j[r].is_array() || j[r].empty())
            fail(ErrorKind::InvalidFile, path + ": row " + std::to_string(r) + " is not a non-empty list of token ids");
        std::vector<int32_t> row;
        for (const auto& v : j[r]) {
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
                fail(ErrorKind::InvalidFile, path + ": row " + std::to_string(r) + " holds a value that is not a token id");
            row.push_back(int32_t(v.get<int64_t>()));
        }
        rows.push_back(std::move(row));
    }
    return rows;
}

std::vector<std::vector<int32_t>> syntheticCalibration(int64_t rows, int64_t len, int64_t vocab) {
    // A fixed LCG over the whole vocabulary: the same set on every run and machine.
    std::vector<std::vector<int32_t>> out(static_cast<size_t>(rows));
    uint64_t s = 0x5eed;
    for (auto& row : out)
        for (int64_t t = 0; t < len; ++t) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            row.push_back(int32_t((s >> 33) % uint64_t(vocab)));
        }
    return out;
}

// W [in, out] fp32 of a job (the Hugging Face weight is [out, in]).
std::vector<float> loadWeight(const Job& j) {
    const std::vector<float> all = toF32(*j.src);
    const int64_t cols = j.src->shape.back();
    const int64_t rowsPerExpert = j.src->shape.size() == 3 ? j.src->shape[1] : 0;
    const int64_t base = j.expert >= 0 ? j.expert * rowsPerExpert + j.rowOffset : 0;
    std::vector<float> w(static_cast<size_t>(j.in * j.out));
    for (int64_t o = 0; o < j.out; ++o)
        for (int64_t i = 0; i < j.in; ++i) w[size_t(i * j.out + o)] = all[size_t((base + o) * cols + i)];
    return w;
}

// The MLP prefix of a projection ("…mlp.experts.7.gate_proj" → "…mlp.experts.7"), or "".
std::string mlpOf(const std::string& prefix, bool& down) {
    for (const char* proj : {".gate_proj", ".up_proj", ".down_proj"})
        if (endsWith(prefix, proj) && prefix.find(".mlp") != std::string::npos) {
            down = std::string(proj) == ".down_proj";
            return prefix.substr(0, prefix.size() - std::strlen(proj));
        }
    return {};
}

struct Plan {
    std::vector<Job> jobs;
    std::vector<std::vector<std::string>> copies;  // per group: source tensors copied verbatim
    std::vector<std::vector<size_t>> groupJobs;    // per group: indices into jobs
    std::vector<std::string> shardNames;
    size_t groups = 0;
};

Plan makePlan(const SafetensorsCheckpoint& ckpt, const Glm5NextModel& model, int bits, int headBits, bool allLinears) {
    const std::string P = model.weights().prefix;
    // Linear layers the model binds through Binder::linear (model/weights.cpp) besides the MLPs.
    static const std::set<std::string> kLinears = {
        "q_proj", "k_proj", "v_proj", "f_a_proj", "f_b_proj", "b_proj", "g_a_proj", "g_b_proj", "o_proj", "q_a_proj",
        "q_b_proj", "kv_a_proj_with_mqa", "wq_b", "wk", "weights_proj", "gate_proj", "up_proj", "down_proj", "eh_proj"};
    int maxLayer = -1;
    for (const auto& name : ckpt.names()) {
        int L;
        std::string rest;
        if (splitLayer(name, P, L, rest)) maxLayer = std::max(maxLayer, L);
    }
    Plan plan;
    plan.groups = size_t(maxLayer + 2);  // layers 0..maxLayer, then everything else
    plan.copies.resize(plan.groups);
    plan.groupJobs.resize(plan.groups);
    auto add = [&](Job j) {
        j.mlp = mlpOf(j.prefix, j.down);
        plan.groupJobs[j.group].push_back(plan.jobs.size());
        plan.jobs.push_back(std::move(j));
    };
    for (const auto& name : ckpt.names()) {
        const TensorInfo& t = ckpt.get(name);
        int L = -1;
        std::string rest;
        const bool inLayer = splitLayer(name, P, L, rest);
        const size_t group = inLayer ? size_t(L) : plan.groups - 1;
        const std::string stem = endsWith(name, ".weight") ? name.substr(0, name.size() - 7) : std::string();
        const std::string last = stem.substr(stem.rfind('.') + 1);
        const bool routed = inLayer && rest.rfind("mlp.experts.", 0) == 0;
        if (routed && (rest == "mlp.experts.gate_up_proj" || rest == "mlp.experts.down_proj")) {
            // transformers' fused layout: gate_up [E, 2I, D] (gate rows first), down [E, D, I]; written per expert.
            if (t.shape.size() != 3) fail(ErrorKind::InvalidFile, "tensor " + name + " is not [experts, rows, cols]");
            const std::string base = P + "layers." + std::to_string(L) + ".mlp.experts.";
            for (int64_t e = 0; e < t.shape[0]; ++e) {
                if (rest == "mlp.experts.down_proj") {
                    add({base + std::to_string(e) + ".down_proj", &t, e, 0, t.shape[1], t.shape[2], bits, {}, false, group});
                } else {
                    const int64_t I = t.shape[1] / 2;
                    add({base + std::to_string(e) + ".gate_proj", &t, e, 0, I, t.shape[2], bits, {}, false, group});
                    add({base + std::to_string(e) + ".up_proj", &t, e, I, I, t.shape[2], bits, {}, false, group});
                }
            }
            continue;
        }
        const bool twoD = t.shape.size() == 2 && !stem.empty();
        int jobBits = 0;
        if (twoD && routed && (last == "gate_proj" || last == "up_proj" || last == "down_proj")) jobBits = bits;
        else if (twoD && allLinears && inLayer && rest == "shared_head.head.weight") jobBits = headBits;
        else if (twoD && allLinears && inLayer && kLinears.count(last)) jobBits = bits;
        else if (twoD && allLinears && name == "lm_head.weight") jobBits = headBits;
        if (jobBits > 0 && jobBits <= kExl3MaxBits) add({stem, &t, -1, 0, t.shape[0], t.shape[1], jobBits, {}, false, group});
        else plan.copies[group].push_back(name);
    }
    for (size_t g = 0; g < plan.groups; ++g) {
        char b[64];
        std::snprintf(b, sizeof b, "model-%05zu-of-%05zu.safetensors", g + 1, plan.groups);
        plan.shardNames.push_back(b);
    }
    return plan;
}

// The MLP weights of the decoder layers (and the MTP block) by prefix, for the Hessian recorder.
std::map<std::string, const MlpWeights*> mlpsByPrefix(const Glm5NextModel& m) {
    std::map<std::string, const MlpWeights*> out;
    const ModelWeights& w = m.weights();
    auto addLayer = [&](const LayerWeights& lw, int L) {
        const std::string p = w.prefix + "layers." + std::to_string(L) + ".mlp";
        if (lw.denseMlp) {
            out[p] = &lw.mlp;
            return;
        }
        for (size_t e = 0; e < lw.moe.experts.size(); ++e) out[p + ".experts." + std::to_string(e)] = &lw.moe.experts[e];
        if (lw.moe.hasShared) out[p + ".shared_experts"] = &lw.moe.shared;
    };
    for (size_t L = 0; L < w.layers.size(); ++L) addLayer(w.layers[L], int(L));
    if (w.mtp.present) addLayer(w.mtp.layer, m.text().num_hidden_layers);
    return out;
}

// Runs the calibration rows through the model (and its MTP block), recording the tracked MLPs.
void runCalibration(const Glm5NextModel& model, const std::vector<std::vector<int32_t>>& rows) {
    for (const auto& ids : rows) {
        auto st = model.newSequence(KvCacheDtype::Fp32);
        const int64_t T = int64_t(ids.size());
        const bool mtp = model.hasMtp() && T > 1;
        ForwardResult r = model.forward(ids.data(), T, *st, /*lastOnly=*/!mtp, /*wantHidden=*/mtp);
        if (mtp) {  // row t: hidden state at t and the token at t + 1
            auto ms = model.newMtpSequence(KvCacheDtype::Fp32);
            model.forwardMtp(r.hidden.data(), ids.data() + 1, T - 1, *ms);
        }
    }
}

}  // namespace

int cmdQuantize(const Args& args) {
    if (args.help()) {
        std::printf(
            "twinspark-cli quantize --in BF16_CHECKPOINT --out DIR [--bits 4] [--head-bits 6]\n"
            "    [--codebook mul1|mcg|3inst] [--calibration FILE] [--all-linears] [--no-calibration]\n"
            "    [--calib-rows 16] [--calib-tokens 256] [--hessian-gb 16] [--seed 1] [--threads N]\n"
            "Writes an EXL3 checkpoint (exllamav3 layout) of a glm5_next checkpoint. Routed experts are quantized\n"
            "to --bits (1..8); with --all-linears also every other linear layer (attention, dense and shared\n"
            "MLPs, MTP projection) and the head at --head-bits (16 = keep it). Norms, embeddings, routers and\n"
            "everything else are copied. Hessians come from our forward on the CPU backend over --calibration (a\n"
            "JSON list of lists of token ids); without it a deterministic synthetic set of --calib-rows x\n"
            "--calib-tokens ids from the vocabulary is used (said on stderr and recorded in\n"
            "quantization_config.calibration).\n"
            "--no-calibration quantizes every tile on its own (no LDLQ). --hessian-gb bounds the memory of the\n"
            "Hessians held at once (more calibration passes when smaller).\n"
            "Output goes to DIR.partial and is renamed to DIR when complete. After an interruption, rerun the\n"
            "same command: finished shards are kept and the run resumes; another command is refused while\n"
            "DIR.partial exists (delete it to start over).\n");
        return 0;
    }
    args.accept({"in", "out", "bits", "head-bits", "codebook", "calibration", "calib-rows", "calib-tokens", "hessian-gb",
                 "seed", "threads"},
                {"all-linears", "no-calibration"});
    const fs::path in = args.require("in"), out = args.require("out");
    const int bits = int(args.getInt("bits", 4, 1, kExl3MaxBits));
    const int headBits = int(args.getInt("head-bits", 6, 1, 16));
    if (headBits > kExl3MaxBits && headBits != 16) fail(ErrorKind::InvalidArgument, "--head-bits must be 1..8 or 16 (unquantized)");
    const std::string cbName = args.get("codebook").value_or("mul1");
    const auto cb = exl3CodebookFromName(cbName);
    if (!cb) fail(ErrorKind::InvalidArgument, "--codebook must be mul1, mcg or 3inst, got '" + cbName + "'");
    const bool allLinears = args.flag("all-linears"), noCalib = args.flag("no-calibration");
    const auto calibPath = args.get("calibration");
    if (noCalib && calibPath) fail(ErrorKind::InvalidArgument, "--no-calibration and --calibration exclude each other");
    const int64_t calibRows = args.getInt("calib-rows", 16, 1, 100000), calibTokens = args.getInt("calib-tokens", 256, 2, 1 << 20);
    const int64_t hessianGb = args.getInt("hessian-gb", 16, 1, 1 << 20);
    const uint64_t seed = uint64_t(args.getInt("seed", 1, 0, INT64_MAX));
    if (const int64_t th = args.getInt("threads", 0, 0, 1024); th > 0) ThreadPool::setGlobalThreads(int(th));

    const fs::path partial = out.string() + ".partial";
    if (fs::exists(out)) fail(ErrorKind::InvalidArgument, "output " + out.string() + " already exists");
    if (!fs::is_directory(in)) fail(ErrorKind::NotFound, "input checkpoint directory " + in.string() + " not found");
    nlohmann::json srcCfg;
    try {
        srcCfg = nlohmann::json::parse(readFile(in / "config.json"));
    } catch (const nlohmann::json::exception& e) {
        fail(ErrorKind::InvalidFile, (in / "config.json").string() + ": not valid JSON (" + e.what() + ")");
    }
    if (auto it = srcCfg.find("quantization_config"); it != srcCfg.end() && it->is_object() && it->value("quant_method", "") == "exl3")
        fail(ErrorKind::InvalidArgument, in.string() + " is already an EXL3 checkpoint");

    auto backend = makeCpuBackend();
    Glm5NextModel model(in.string(), *backend, {}, stderrBindProgress("quantize"));
    SafetensorsCheckpoint ckpt(in.string());  // the source tensors (the model's own mapping is private)
    const Plan plan = makePlan(ckpt, model, bits, headBits > kExl3MaxBits ? 0 : headBits, allLinears);

    // Calibration rows (validated against the vocabulary before any work).
    std::vector<std::vector<int32_t>> calib;
    std::string calibDesc = "none";
    if (!noCalib) {
        if (calibPath) {
            calib = loadCalibration(*calibPath);
            calibDesc = "file " + fs::absolute(*calibPath).string() + " fnv1a " + std::to_string(fnv1a(readFile(*calibPath)));
        } else {
            calib = syntheticCalibration(calibRows, calibTokens, model.text().vocab_size);
            calibDesc = "synthetic " + std::to_string(calibRows) + "x" + std::to_string(calibTokens);
            std::fprintf(stderr,
                         "quantize: no --calibration given: using a deterministic synthetic set of %" PRId64 " rows x %" PRId64
                         " token ids drawn uniformly from the vocabulary (real text calibrates better)\n",
                         calibRows, calibTokens);
        }
        for (const auto& row : calib) model.checkIds(row.data(), int64_t(row.size()));
    }
    int64_t calibTokensTotal = 0;
    for (const auto& r : calib) calibTokensTotal += int64_t(r.size());

    // Resume state: the arguments that determine the bytes, and the shards already written.
    const nlohmann::json fingerprint = {{"in", fs::absolute(in).lexically_normal().string()},
                                        {"bits", bits},
                                        {"head_bits", headBits},
                                        {"codebook", cbName},
                                        {"all_linears", allLinears},
                                        {"calibration", calibDesc},
                                        {"seed", seed},
                                        {"shards", plan.shardNames.size()}};
    std::set<std::string> done;
    if (fs::exists(partial)) {
        nlohmann::json st;
        try {
            st = nlohmann::json::parse(readFile(partial / kStateFile));
        } catch (const std::exception&) {
            fail(ErrorKind::InvalidArgument, partial.string() + " exists but holds no readable " + kStateFile + "; delete it to start over");
        }
        if (st.value("args", nlohmann::json()) != fingerprint)
            fail(ErrorKind::InvalidArgument, partial.string() + " belongs to a run with other arguments (" +
                                                 st.value("args", nlohmann::json()).dump() + "); rerun that command or delete it");
        for (const auto& s : st.value("done", nlohmann::json::array()))
            if (fs::exists(partial / s.get<std::string>())) done.insert(s.get<std::string>());
        // Anything else there is the residue of the interrupted shard (a temporary file): drop it.
        for (const auto& e : fs::directory_iterator(partial)) {
            const std::string fn = e.path().filename().string();
            if (fn != kStateFile && !done.count(fn)) fs::remove_all(e.path());
        }
        std::fprintf(stderr, "quantize: resuming %s (%zu of %zu shards already written)\n", partial.string().c_str(),
                     done.size(), plan.shardNames.size());
    } else {
        fs::create_directories(partial);
    }
    // On any failure from here on, say what is left behind and how to go on.
    struct PartialNote {
        fs::path dir;
        bool finished = false;
        ~PartialNote() {
            if (!finished)
                std::fprintf(stderr, "quantize: stopped; finished shards are kept in %s (rerun the same command to resume, "
                                     "or delete it to start over)\n", dir.string().c_str());
        }
    } note{partial};
    auto saveState = [&] {
        nlohmann::json st = {{"args", fingerprint}, {"done", nlohmann::json::array()}};
        for (const auto& s : done) st["done"].push_back(s);
        writeFileAtomically((partial / kStateFile).string(), st.dump(2));
    };
    saveState();

    // Work estimate for the ETA: tiles of every job still to do, plus ~35 tile-equivalents of g search per job.
    int64_t totalWork = 0, doneWork = 0, jobsLeft = 0;
    for (size_t g = 0; g < plan.groups; ++g)
        if (!done.count(plan.shardNames[g]))
            for (size_t j : plan.groupJobs[g]) totalWork += plan.jobs[j].tiles() + 35, ++jobsLeft;
    std::fprintf(stderr, "quantize: %zu linears to quantize (%" PRId64 " left) at K=%d, codebook %s, %zu shards, Viterbi kernel %s, %d threads\n",
                 plan.jobs.size(), jobsLeft, bits, cbName.c_str(), plan.groups, exl3ViterbiKernelName(),
                 ThreadPool::global().size());

    Exl3HessianRecorder recorder(*backend);
    const auto mlps = mlpsByPrefix(model);
    std::set<size_t> recorded;  // groups whose Hessians the recorder holds
    const auto t0 = Clock::now();
    double bitsNum = 0, bitsDen = 0;  // numel-weighted average K of the decoder linears (head excluded)
    for (const auto& j : plan.jobs)
        if (endsWith(j.prefix, "lm_head") == false && endsWith(j.prefix, "shared_head.head") == false)
            bitsNum += double(j.bits) * double(j.in * j.out), bitsDen += double(j.in * j.out);
    int64_t jobNo = 0;
    for (size_t g = 0; g < plan.groups; ++g) {
        const std::string& shard = plan.shardNames[g];
        if (done.count(shard)) continue;
        // Hessians for this group and, within the memory budget, the following groups: one calibration pass.
        bool needs = false;
        for (size_t j : plan.groupJobs[g]) needs |= !plan.jobs[j].mlp.empty();
        if (!calib.empty() && needs && !recorded.count(g)) {
            recorder.clear();
            recorded.clear();
            int64_t bytes = 0;
            for (size_t h = g; h < plan.groups; ++h) {
                if (done.count(plan.shardNames[h])) continue;
                std::set<std::string> names;
                for (size_t j : plan.groupJobs[h])
                    if (!plan.jobs[j].mlp.empty() && mlps.count(plan.jobs[j].mlp)) names.insert(plan.jobs[j].mlp);
                int64_t add = 0;  // D = gate's in_features, I = down's in_features
                for (const auto& nm : names) add += Exl3HessianRecorder::bytesFor(mlps.at(nm)->gate.cols, mlps.at(nm)->down.cols);
                if (h > g && bytes + add > hessianGb << 30) break;
                for (const auto& nm : names) recorder.track(*mlps.at(nm), nm);
                bytes += add;
                recorded.insert(h);
            }
            const auto c0 = Clock::now();
            model.setMlpObserver(&recorder);
            runCalibration(model, calib);
            model.setMlpObserver(nullptr);
            std::fprintf(stderr, "quantize: calibration pass over %zu rows (%" PRId64 " tokens) for %zu layer group(s): %.1f s\n",
                         calib.size(), calibTokensTotal, recorded.size(), std::chrono::duration<double>(Clock::now() - c0).count());
        }

        std::vector<std::unique_ptr<Exl3Quantized>> results;
        std::vector<TensorToWrite> tensors;
        for (size_t ji : plan.groupJobs[g]) {
            const Job& j = plan.jobs[ji];
            std::vector<float> h;
            if (!j.mlp.empty() && recorded.count(g)) {
                const auto* s = j.down ? recorder.activation(j.mlp) : recorder.input(j.mlp);
                if (s) h = s->mean();
                if (s && s->dim != j.in) fail(ErrorKind::Internal, "Hessian width of " + j.mlp + " does not match " + j.prefix);
            }
            Exl3QuantOptions o;
            o.bits = j.bits;
            o.codebook = *cb;
            o.seed = exl3TensorSeed(j.prefix, seed);
            const std::vector<float> w = loadWeight(j);
            auto q = std::make_unique<Exl3Quantized>(exl3Quantize(w.data(), j.in, j.out, h.empty() ? nullptr : h.data(), o));
            q->rotated = {};  // only the packed tensors are kept until the shard is written
            doneWork += j.tiles() + 35;
            ++jobNo;
            const double el = std::chrono::duration<double>(Clock::now() - t0).count();
            std::fprintf(stderr, "[group %zu/%zu] %s K=%d [%" PRId64 "x%" PRId64 "]%s g=%.3f proxy=%.4f | %" PRId64 "/%" PRId64
                                 " linears, %.1f%%, elapsed %s, ETA %s\n",
                         g + 1, plan.groups, j.prefix.c_str(), j.bits, j.in, j.out, q->usedHessian ? " LDLQ" : "",
                         double(q->scale), q->proxyError, jobNo, jobsLeft, 100.0 * double(doneWork) / double(std::max<int64_t>(1, totalWork)),
                         hms(el).c_str(), hms(el * double(totalWork - doneWork) / double(std::max<int64_t>(1, doneWork))).c_str());
            for (auto& t : exl3Tensors(*q, j.prefix)) tensors.push_back(t);
            results.push_back(std::move(q));
        }
        for (const auto& name : plan.copies[g]) {
            const TensorInfo& t = ckpt.get(name);
            tensors.push_back({name, t.dtype, t.shape, t.data});
        }
        std::sort(tensors.begin(), tensors.end(), [](const TensorToWrite& a, const TensorToWrite& b) { return a.name < b.name; });
        writeSafetensors((partial / shard).string(), tensors, {{"format", "pt"}});
        done.insert(shard);
        saveState();
        recorded.erase(g);
    }

    // Index, config, auxiliary files; then the rename that makes OUT appear complete.
    nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
    uint64_t total = 0;
    for (const auto& shard : plan.shardNames) {
        SafetensorsFile f((partial / shard).string());
        for (const auto& t : f.tensors()) {
            index["weight_map"][t.name] = shard;
            total += t.nbytes;
        }
    }
    index["metadata"]["total_size"] = total;
    writeFileAtomically((partial / "model.safetensors.index.json").string(), index.dump(2));
    nlohmann::json cfg = srcCfg;
    if (cfg.contains("quantization_config")) cfg["original_quantization_config"] = cfg["quantization_config"];
    bool headQuantized = false;
    for (const auto& j : plan.jobs) headQuantized |= j.prefix == "lm_head";
    cfg["quantization_config"] = {
        {"quant_method", "exl3"},
        {"version", kQuantizerVersion},
        {"quantizer", "twinspark-cli"},
        {"bits", bitsDen > 0 ? std::round(100.0 * bitsNum / bitsDen) / 100.0 : double(bits)},
        {"head_bits", headQuantized ? headBits : 16},
        {"calibration", {{"rows", int64_t(calib.size())}, {"cols", calib.empty() ? 0 : int64_t(calib[0].size())}, {"source", calibDesc}}},
        {"out_scales", "always"},
        {"codebook", cbName}};
    writeFileAtomically((partial / "config.json").string(), cfg.dump(2));
    for (const auto& e : fs::directory_iterator(in)) {
        const std::string fn = e.path().filename().string();
        if (!e.is_regular_file() || fn.empty() || fn[0] == '.' || endsWith(fn, ".safetensors") || fn == "config.json" ||
            fn == "model.safetensors.index.json" || fn == "quantization_config.json")
            continue;
        fs::copy_file(e.path(), partial / fn, fs::copy_options::overwrite_existing);
    }
    fs::remove(partial / kStateFile);
    fs::rename(partial, out);
    note.finished = true;
    std::fprintf(stderr, "quantize: wrote %s (%zu linears, %.1f MiB) in %s\n", out.string().c_str(), plan.jobs.size(),
                 double(total) / 1048576.0, hms(std::chrono::duration<double>(Clock::now() - t0).count()).c_str());
    return 0;
}

}  // namespace ts::cli
