// EXL3 checkpoint side: quantization_config / sidecar parsing and the binding of one quantized linear.
#include "quant/exl3_format.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>

namespace ts {

namespace {

std::string shapeStr(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

[[noreturn]] void badFile(const std::string& msg) { fail(ErrorKind::InvalidFile, msg); }

// Typed json access for the config blocks: a wrong type is an error naming file and field.
const nlohmann::json* field(const nlohmann::json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string getString(const nlohmann::json& obj, const char* key, const std::string& where) {
    const auto* v = field(obj, key);
    if (!v) return {};
    if (!v->is_string()) badFile(where + ": quantization_config." + key + " must be a string");
    return v->get<std::string>();
}

double getNumber(const nlohmann::json& obj, const char* key, double def, const std::string& where) {
    const auto* v = field(obj, key);
    if (!v) return def;
    if (!v->is_number()) badFile(where + ": quantization_config." + key + " must be a number");
    return v->get<double>();
}

Exl3ModuleStorage parseModuleStorage(const nlohmann::json& j, const std::string& ctx) {
    if (!j.is_object()) badFile(ctx + " must be an object");
    Exl3ModuleStorage m;
    if (const auto* st = field(j, "stored_tensors")) {
        if (!st->is_object()) badFile(ctx + ".stored_tensors must be an object");
        for (const auto& [name, info] : st->items()) {
            const std::string tctx = ctx + ".stored_tensors." + name;
            if (!info.is_object()) badFile(tctx + " must be an object");
            Exl3StoredTensor t;
            if (const auto* shape = field(info, "shape")) {
                if (!shape->is_array()) badFile(tctx + ".shape must be an array");
                t.hasShape = true;
                for (const auto& d : *shape) {
                    if (!d.is_number_integer() || d.get<int64_t>() < 0) badFile(tctx + ".shape must hold non-negative integers");
                    t.shape.push_back(d.get<int64_t>());
                }
            }
            if (const auto* nb = field(info, "n_bytes")) {
                if (!nb->is_number_integer()) badFile(tctx + ".n_bytes must be an integer");
                t.nBytes = nb->get<int64_t>();
            }
            if (const auto* dt = field(info, "dtype")) {
                if (!dt->is_string()) badFile(tctx + ".dtype must be a string");
                t.dtype = dt->get<std::string>();
            }
            m.storedTensors.emplace(name, std::move(t));
        }
    }
    if (const auto* qf = field(j, "quant_format")) {
        if (!qf->is_string()) badFile(ctx + ".quant_format must be a string");
        m.exl3 = qf->get<std::string>() == "exl3";
    }
    if (const auto* bpw = field(j, "bits_per_weight")) {
        if (!bpw->is_number()) badFile(ctx + ".bits_per_weight must be a number");
        const double b = bpw->get<double>();
        // Half-integer rates exist in some exllamav3 builds; keep 0 ("not an integer K") so binding
        // reports the mismatch against the trellis rather than silently truncating.
        m.bitsPerWeight = (b == std::floor(b) && b >= 0 && b <= 64) ? int(b) : 0;
    }
    for (const char* key : {"mul1_multiplier", "mcg_multiplier"}) {
        const auto* v = field(j, key);
        if (!v) continue;
        if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > int64_t(UINT32_MAX))
            badFile(ctx + "." + key + " must be a uint32");
        (std::strcmp(key, "mul1_multiplier") == 0 ? m.mul1Multiplier : m.mcgMultiplier) = uint32_t(v->get<int64_t>());
    }
    return m;
}

nlohmann::json readJsonFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(std::filesystem::exists(path) ? ErrorKind::Io : ErrorKind::NotFound, "cannot open " + path);
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        badFile(path + ": not valid JSON: " + e.what());
    }
}

void mergeStorage(Exl3QuantConfig& qc, const nlohmann::json& j, const std::string& where) {
    const auto* ts = field(j, "tensor_storage");
    if (!ts) return;
    if (!ts->is_object()) badFile(where + ": tensor_storage must be an object");
    for (const auto& [key, v] : ts->items())
        qc.tensorStorage[key] = parseModuleStorage(v, where + ": tensor_storage." + key);
}

// ---- binding helpers ------------------------------------------------------------------------------

void expectShape(const TensorInfo& t, const std::vector<int64_t>& shape, const std::string& why) {
    if (t.shape != shape)
        badFile("EXL3 tensor " + t.name + " has shape " + shapeStr(t.shape) + ", expected " + shapeStr(shape) + " (" +
                why + ")");
}

// fp16/bf16/fp32 vector -> fp32, elements read with memcpy (data may be unaligned).
std::vector<float> readFloatVector(const TensorInfo& t, bool f16Only) {
    if (t.dtype != DType::F16 && (f16Only || (t.dtype != DType::BF16 && t.dtype != DType::F32)))
        badFile("EXL3 tensor " + t.name + " has dtype " + std::string(dtypeName(t.dtype)) + ", expected F16");
    return toF32(t);
}

// Legacy packed signs (spec §2.1): bit i of uint16 word w is the sign of element 16w+i, 1 means −1.
std::vector<float> unpackSigns(const TensorInfo& t) {
    std::vector<float> out(static_cast<size_t>(t.numel() * 16));
    for (int64_t w = 0; w < t.numel(); ++w) {
        uint16_t bits;
        std::memcpy(&bits, t.data + 2 * w, 2);
        for (int i = 0; i < 16; ++i) out[size_t(16 * w + i)] = (bits >> i) & 1u ? -1.0f : 1.0f;
    }
    return out;
}

// `.mcg` / `.mul1`: a 0-dim I32 holding the locked multiplier ([1] accepted: some writers add the dim).
void checkFlag(const TensorInfo& t, uint32_t expected) {
    if (t.dtype != DType::I32 || t.numel() != 1 || t.shape.size() > 1)
        badFile("EXL3 codebook flag " + t.name + " must be a 0-dim I32 tensor, got " +
                std::string(dtypeName(t.dtype)) + " " + shapeStr(t.shape));
    uint32_t v;
    std::memcpy(&v, t.data, 4);
    if (v != expected) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "multiplier 0x%08X, only the locked 0x%08X is supported", v, expected);
        fail(ErrorKind::Unsupported, "EXL3 codebook flag " + t.name + " holds " + buf);
    }
}

// Picks the new-style tensor (`suh`) or the legacy packed one (`su`); exactly one must exist.
const TensorInfo* pickScale(const TensorLookup& find, const std::string& prefix, const char* full, const char* legacy,
                            bool& isLegacy) {
    const TensorInfo* a = find(prefix + "." + full);
    const TensorInfo* b = find(prefix + "." + legacy);
    if (a && b)
        badFile("EXL3 linear " + prefix + " has both ." + full + " and legacy ." + legacy + "; exactly one is expected");
    if (!a && !b)
        fail(ErrorKind::NotFound, "EXL3 linear " + prefix + " lacks " + prefix + "." + full + " (or legacy ." + legacy + ")");
    isLegacy = !a;
    return a ? a : b;
}

void checkAgainstStorage(const Exl3Linear& lin, const TensorLookup& find, const Exl3ModuleStorage& st) {
    const std::string& p = lin.prefix;
    if (!st.exl3) badFile("sidecar tensor_storage." + p + " does not say quant_format \"exl3\" but " + p + ".trellis exists");
    if (st.bitsPerWeight != lin.bits)
        badFile("sidecar tensor_storage." + p + ".bits_per_weight (" + std::to_string(st.bitsPerWeight) +
                ") disagrees with " + p + ".trellis (K = " + std::to_string(lin.bits) + ")");
    const bool sideMul1 = st.mul1Multiplier.has_value(), sideMcg = st.mcgMultiplier.has_value();
    if (sideMul1 != (lin.codebook == Exl3Codebook::Mul1) || sideMcg != (lin.codebook == Exl3Codebook::Mcg))
        badFile("sidecar tensor_storage." + p + " names a different codebook than the tensors (" +
                std::string(exl3CodebookName(lin.codebook)) + ")");
    if ((sideMul1 && *st.mul1Multiplier != kExl3Mul1Multiplier) || (sideMcg && *st.mcgMultiplier != kExl3McgMultiplier))
        fail(ErrorKind::Unsupported, "sidecar tensor_storage." + p + " names a codebook multiplier other than the locked one");
    for (const auto& [name, info] : st.storedTensors) {
        const TensorInfo* t = find(name);
        if (!t) badFile("sidecar tensor_storage." + p + " lists " + name + ", which the checkpoint lacks");
        if (info.hasShape && info.shape != t->shape)
            badFile("sidecar gives " + name + " shape " + shapeStr(info.shape) + ", the checkpoint has " + shapeStr(t->shape));
        if (info.nBytes >= 0 && uint64_t(info.nBytes) != t->nbytes)
            badFile("sidecar gives " + name + " n_bytes " + std::to_string(info.nBytes) + ", the checkpoint has " +
                    std::to_string(t->nbytes));
    }
}

}  // namespace

std::string_view exl3CodebookName(Exl3Codebook cb) {
    switch (cb) {
    case Exl3Codebook::Inst3: return "3inst";
    case Exl3Codebook::Mcg: return "mcg";
    case Exl3Codebook::Mul1: return "mul1";
    }
    return "?";
}

std::optional<Exl3Codebook> exl3CodebookFromName(std::string_view name) {
    for (auto cb : {Exl3Codebook::Inst3, Exl3Codebook::Mcg, Exl3Codebook::Mul1})
        if (exl3CodebookName(cb) == name) return cb;
    return std::nullopt;
}

std::optional<Exl3QuantConfig> parseExl3QuantConfig(const nlohmann::json& qc, const std::string& where) {
    if (qc.is_null()) return std::nullopt;
    if (!qc.is_object()) badFile(where + ": quantization_config must be an object");
    const std::string method = getString(qc, "quant_method", where);
    if (method != "exl3") return std::nullopt;
    Exl3QuantConfig c;
    c.version = getString(qc, "version", where);
    c.bits = getNumber(qc, "bits", 0.0, where);
    if (!(c.bits >= 0.0 && c.bits <= double(kExl3MaxBits)))  // NaN fails too
        badFile(where + ": quantization_config.bits (the average bits per weight) must be in 0..8, got " +
                std::to_string(c.bits));
    const double hb = getNumber(qc, "head_bits", 6.0, where);
    if (hb != std::floor(hb) || hb < 1 || (hb > kExl3MaxBits && hb != 16))
        badFile(where + ": quantization_config.head_bits must be an integer in 1..8 or 16, got " + std::to_string(hb));
    c.headBits = int(hb);
    c.codebook = getString(qc, "codebook", where);
    if (!c.codebook.empty() && !exl3CodebookFromName(c.codebook))
        badFile(where + ": quantization_config.codebook must be mul1, mcg or 3inst, got '" + c.codebook + "'");
    c.outScales = getString(qc, "out_scales", where);
    mergeStorage(c, qc, where);
    return c;
}

Exl3QuantConfig readExl3Sidecar(const std::string& path) {
    const nlohmann::json j = readJsonFile(path);
    auto c = parseExl3QuantConfig(j, path);
    if (!c) badFile(path + ": quant_method is not \"exl3\"");
    return *c;
}

std::optional<Exl3QuantConfig> loadExl3QuantConfig(const std::string& modelDir) {
    const std::string cfgPath = (std::filesystem::path(modelDir) / "config.json").string();
    const nlohmann::json cfg = readJsonFile(cfgPath);
    if (!cfg.is_object()) badFile(cfgPath + ": not a JSON object");
    const auto* qc = field(cfg, "quantization_config");
    if (!qc) return std::nullopt;
    auto c = parseExl3QuantConfig(*qc, cfgPath);
    if (!c) return std::nullopt;
    const std::string sidecar = (std::filesystem::path(modelDir) / "quantization_config.json").string();
    if (std::filesystem::exists(sidecar)) mergeStorage(*c, readJsonFile(sidecar), sidecar);
    return c;
}

TensorLookup tensorLookup(const SafetensorsFile& f) {
    return [&f](std::string_view name) { return f.find(name); };
}

TensorLookup tensorLookup(const SafetensorsCheckpoint& c) {
    return [&c](std::string_view name) { return c.find(name); };
}

bool isExl3Linear(const TensorLookup& find, const std::string& prefix) {
    return find(prefix + ".trellis") && (find(prefix + ".suh") || find(prefix + ".su")) &&
           (find(prefix + ".svh") || find(prefix + ".sv"));
}

std::vector<std::string> exl3Prefixes(const std::vector<std::string>& names) {
    static constexpr std::string_view kSuffix = ".trellis";
    std::vector<std::string> out;
    for (const auto& n : names)
        if (n.size() > kSuffix.size() && n.compare(n.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
            out.push_back(n.substr(0, n.size() - kSuffix.size()));
    std::sort(out.begin(), out.end());
    return out;
}

Exl3Linear bindExl3Linear(const TensorLookup& find, const std::string& prefix, const Exl3ModuleStorage* storage) {
    Exl3Linear lin;
    lin.prefix = prefix;
    const TensorInfo* tr = find(prefix + ".trellis");
    if (!tr) fail(ErrorKind::NotFound, "EXL3 tensor " + prefix + ".trellis not found");
    if (const TensorInfo* sc = find(prefix + ".scale"))
        fail(ErrorKind::Unsupported, "EXL3 linear " + prefix + " has a legacy " + sc->name + " tensor (never released)");

    // Trellis: I16 [k/16, n/16, 16K] (spec §2.1); dims are multiples of 128 (§2.4).
    if (tr->dtype != DType::I16)
        badFile("EXL3 tensor " + tr->name + " has dtype " + std::string(dtypeName(tr->dtype)) + ", expected I16");
    if (tr->shape.size() != 3)
        badFile("EXL3 tensor " + tr->name + " has shape " + shapeStr(tr->shape) + ", expected [k/16, n/16, 16*K]");
    const int64_t last = tr->shape[2];
    if (last % 16 != 0 || last / 16 < 1 || last / 16 > kExl3MaxBits)
        fail(ErrorKind::Unsupported, "EXL3 tensor " + tr->name + " has last dimension " + std::to_string(last) +
                                         ": only K = 1..8 bits per weight (16*K) are supported");
    lin.bits = int(last / 16);
    lin.k = 16 * tr->shape[0];
    lin.n = 16 * tr->shape[1];
    if (lin.k <= 0 || lin.n <= 0 || lin.k % kExl3Pad != 0 || lin.n % kExl3Pad != 0)
        badFile("EXL3 tensor " + tr->name + " has shape " + shapeStr(tr->shape) + ": in/out features " +
                std::to_string(lin.k) + " x " + std::to_string(lin.n) + " are not positive multiples of 128");
    lin.trellis = tr->data;

    // Scale vectors: suh [k], svh [n] fp16, or legacy packed signs su [k/16], sv [n/16] I16.
    bool legacyU = false, legacyV = false;
    const TensorInfo* su = pickScale(find, prefix, "suh", "su", legacyU);
    const TensorInfo* sv = pickScale(find, prefix, "svh", "sv", legacyV);
    for (auto [t, legacy, dim, what] : {std::tuple{su, legacyU, lin.k, "in_features"}, std::tuple{sv, legacyV, lin.n, "out_features"}}) {
        if (legacy) {
            if (t->dtype != DType::I16)
                badFile("EXL3 tensor " + t->name + " has dtype " + std::string(dtypeName(t->dtype)) + ", expected I16 (packed signs)");
            expectShape(*t, {dim / 16}, std::string(what) + " / 16 from the trellis");
        } else {
            expectShape(*t, {dim}, std::string(what) + " from the trellis");
        }
    }
    lin.suh = legacyU ? unpackSigns(*su) : readFloatVector(*su, true);
    lin.svh = legacyV ? unpackSigns(*sv) : readFloatVector(*sv, true);
    lin.legacySigns = legacyU || legacyV;

    if (const TensorInfo* b = find(prefix + ".bias")) {
        expectShape(*b, {lin.n}, "out_features from the trellis");
        lin.bias = readFloatVector(*b, false);
    }

    const TensorInfo* mcg = find(prefix + ".mcg");
    const TensorInfo* mul1 = find(prefix + ".mul1");
    if (mcg && mul1) badFile("EXL3 linear " + prefix + " has both .mcg and .mul1 codebook flags");
    if (mcg) {
        checkFlag(*mcg, kExl3McgMultiplier);
        lin.codebook = Exl3Codebook::Mcg;
    }
    if (mul1) {
        checkFlag(*mul1, kExl3Mul1Multiplier);
        lin.codebook = Exl3Codebook::Mul1;
    }

    if (storage) checkAgainstStorage(lin, find, *storage);
    return lin;
}

}  // namespace ts
