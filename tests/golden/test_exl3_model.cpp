// EXL3 weights inside the model forward (issue 3): a checkpoint whose routed experts are EXL3-packed
// gives the logits of its dense twin (the same weights reconstructed to F32), the experts are bound
// packed (never expanded), and loading + running a large packed MoE grows the resident memory by about
// the packed size, not the BF16 size.
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <fstream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "model/glm5_next.h"
#include "quant/exl3_format.h"
#include "quant/exl3_gemm.h"
#include "quant/exl3_linear.h"

using namespace ts;

namespace {

const std::string kTinyA = TS_SOURCE_DIR "/tests/golden/data/tiny_a";

struct OwnedTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

OwnedTensor copyOf(const TensorInfo& t) {
    return {t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)};
}

template <typename T>
OwnedTensor make(const std::string& name, DType dt, std::vector<int64_t> shape, const std::vector<T>& v) {
    OwnedTensor o{name, dt, std::move(shape), {}};
    o.bytes.resize(v.size() * sizeof(T));
    std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
    return o;
}

void writeAll(const std::string& path, const std::vector<OwnedTensor>& ts) {
    std::vector<TensorToWrite> w;
    for (const auto& t : ts) w.push_back({t.name, t.dtype, t.shape, t.bytes.data()});
    writeSafetensors(path, w);
}

int64_t pad128(int64_t x) { return (x + 127) / 128 * 128; }

// Random EXL3 tensors for a linear with `in` → `out` features: any trellis bits are a valid code.
std::vector<OwnedTensor> randomExl3(const std::string& prefix, int64_t in, int64_t out, int bits, bool mcg, std::mt19937& g) {
    const int64_t k = pad128(in), n = pad128(out);
    std::vector<int16_t> trellis(static_cast<size_t>(k / 16 * n / 16 * 16 * bits));
    for (auto& v : trellis) v = int16_t(g());
    std::uniform_real_distribution<float> u(0.05f, 0.15f);
    std::vector<uint16_t> suh(static_cast<size_t>(k)), svh(static_cast<size_t>(n));
    for (auto& v : suh) v = f32ToF16((g() & 1 ? 1.0f : -1.0f) * u(g));
    for (auto& v : svh) v = f32ToF16((g() & 1 ? 1.0f : -1.0f) * u(g));
    std::vector<OwnedTensor> parts{make(prefix + ".trellis", DType::I16, {k / 16, n / 16, 16 * bits}, trellis),
                                   make(prefix + ".suh", DType::F16, {k}, suh), make(prefix + ".svh", DType::F16, {n}, svh)};
    if (mcg) parts.push_back(make(prefix + ".mcg", DType::I32, {}, std::vector<int32_t>{int32_t(kExl3McgMultiplier)}));
    return parts;
}

// Writes an EXL3 copy of tiny_a (routed experts packed; optionally resized) and its dense F32 twin.
void buildPair(const std::string& exlDir, const std::string& denseDir, int64_t experts, int64_t inter, int bits,
               bool withDense = true) {
    SafetensorsCheckpoint src(kTinyA);
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(kTinyA + "/config.json"));
    const int64_t E0 = cfg["text_config"]["n_routed_experts"].get<int64_t>();
    const int64_t D = cfg["text_config"]["hidden_size"].get<int64_t>();
    const int64_t I0 = cfg["text_config"]["moe_intermediate_size"].get<int64_t>();
    const int64_t nShared = cfg["text_config"].value("n_shared_experts", int64_t(1));
    cfg["text_config"]["n_routed_experts"] = experts;
    cfg["text_config"]["moe_intermediate_size"] = inter;
    std::mt19937 g(17);
    std::vector<OwnedTensor> exl, dense;
    for (const auto& name : src.names()) {
        const TensorInfo& t = src.get(name);
        const bool expert = name.find(".mlp.experts.") != std::string::npos;
        const bool router = name.find(".mlp.gate.") != std::string::npos;
        if (expert) continue;
        if (name.find(".shared_experts.") != std::string::npos && inter != I0) {  // resized with the experts
            const bool down = name.find("down_proj") != std::string::npos;
            std::vector<int64_t> shape = down ? std::vector<int64_t>{D, inter * nShared} : std::vector<int64_t>{inter * nShared, D};
            std::vector<float> v(static_cast<size_t>(shape[0] * shape[1]));
            std::normal_distribution<float> nd(0.0f, 0.05f);
            for (auto& x : v) x = nd(g);
            exl.push_back(make(name, DType::F32, shape, v));
            dense.push_back(exl.back());
            continue;
        }
        if (router && experts != E0) {  // resize the router to the new expert count
            std::vector<float> v(static_cast<size_t>(experts * (name.find("bias") != std::string::npos ? 1 : D)));
            std::normal_distribution<float> nd(0.0f, name.find("bias") != std::string::npos ? 0.1f : 0.2f);
            for (auto& x : v) x = nd(g);
            std::vector<int64_t> shape = name.find("bias") != std::string::npos ? std::vector<int64_t>{experts}
                                                                                 : std::vector<int64_t>{experts, D};
            exl.push_back(make(name, DType::F32, shape, v));
            dense.push_back(exl.back());
            continue;
        }
        exl.push_back(copyOf(t));
        dense.push_back(exl.back());
    }
    // Experts of every MoE layer (the MTP block's too).
    std::set<std::string> layers;
    for (const auto& name : src.names())
        if (auto at = name.find(".mlp.experts."); at != std::string::npos) layers.insert(name.substr(0, at));
    for (const auto& layer : layers)
        for (int64_t e = 0; e < experts; ++e)
            for (auto [proj, in, out] : {std::tuple{"gate_proj", D, inter}, {"up_proj", D, inter}, {"down_proj", inter, D}}) {
                const std::string prefix = layer + ".mlp.experts." + std::to_string(e) + "." + proj;
                auto parts = randomExl3(prefix, in, out, bits, (e % 2) == 1, g);
                if (!withDense) {
                    for (auto& p : parts) exl.push_back(std::move(p));
                    continue;
                }
                // The dense twin: W [k, n] reconstructed in the original basis, stored as weight [out, in].
                writeAll(exlDir + "/one.safetensors", parts);
                SafetensorsFile one(exlDir + "/one.safetensors");
                const Exl3Linear lin = bindExl3Linear(tensorLookup(one), prefix);
                std::vector<float> W(static_cast<size_t>(lin.k * lin.n)), wt(static_cast<size_t>(in * out));
                exl3Reconstruct(lin, W.data());
                for (int64_t o = 0; o < out; ++o)
                    for (int64_t i = 0; i < in; ++i) wt[size_t(o * in + i)] = W[size_t(i * lin.n + o)];
                dense.push_back(make(prefix + ".weight", DType::F32, {out, in}, wt));
                for (auto& p : parts) exl.push_back(std::move(p));
            }
    std::remove((exlDir + "/one.safetensors").c_str());
    writeAll(exlDir + "/model.safetensors", exl);
    if (withDense) writeAll(denseDir + "/model.safetensors", dense);
    std::ofstream(denseDir + "/config.json") << cfg.dump(2);
    cfg["quantization_config"] = {{"quant_method", "exl3"}, {"version", "0.0.6"}, {"bits", double(bits)},
                                  {"head_bits", 16}, {"calibration", {{"rows", 0}}}};
    std::ofstream(exlDir + "/config.json") << cfg.dump(2);
}

long residentKb() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
}

}  // namespace

class TestExl3Model : public QObject {
    Q_OBJECT

private slots:
    void packedExpertsMatchDenseTwin() {
        QTemporaryDir a, b;
        buildPair(a.path().toStdString(), b.path().toStdString(), 8, 32, 4);
        auto backend = makeCpuBackend();
        Glm5NextModel exl(a.path().toStdString(), *backend), dense(b.path().toStdString(), *backend);
        // 8 experts × 3 projections × (5 MoE layers + the MTP block), all bound packed.
        QCOMPARE(exl.weights().packed.size(), size_t(8 * 3 * 6));
        QVERIFY(dense.weights().packed.empty());
        std::vector<int32_t> ids;
        for (int i = 0; i < 90; ++i) ids.push_back(int32_t((i * 37 + 11) % 500) + 3);
        auto s1 = exl.newSequence(KvCacheDtype::Fp32), s2 = dense.newSequence(KvCacheDtype::Fp32);
        const ForwardResult r1 = exl.forward(ids.data(), int64_t(ids.size()), *s1);
        const ForwardResult r2 = dense.forward(ids.data(), int64_t(ids.size()), *s2);
        float maxAbs = 0, scale = 0;
        for (size_t i = 0; i < r1.logits.size(); ++i) {
            maxAbs = std::max(maxAbs, std::fabs(r1.logits[i] - r2.logits[i]));
            scale = std::max(scale, std::fabs(r2.logits[i]));
        }
        qInfo("EXL3 experts vs dense twin: max|Δ| = %.3g (logit scale %.3g)", maxAbs, scale);
        QVERIFY2(maxAbs <= 1e-4f * std::max(1.0f, scale), qPrintable(QString::number(maxAbs)));
    }

    // 256 experts of 128→512→128 per layer: 4 bpw packed ≈ 24 MiB a layer, BF16 would be 96 MiB.
    void residentMemoryStaysPacked() {
        QTemporaryDir a, b;
        buildPair(a.path().toStdString(), b.path().toStdString(), 256, 512, 4, false);  // only the EXL3 model
        const long before = residentKb();
        auto backend = makeCpuBackend();
        Glm5NextModel m(a.path().toStdString(), *backend);
        std::vector<int32_t> ids;
        for (int i = 0; i < 64; ++i) ids.push_back(int32_t((i * 53 + 7) % 500) + 3);
        auto s = m.newSequence(KvCacheDtype::Fp8);
        m.forward(ids.data(), int64_t(ids.size()), *s);
        const long grown = residentKb() - before;
        const double packedMiB = double(heldBytes(m.weights(), HeldForm::Exl3Trellis)) / 1048576.0;
        const double bf16MiB = double(m.weights().packed.size()) * 128.0 * 512.0 * 2.0 / 1048576.0;
        qInfo("packed experts %.1f MiB (BF16 would be %.1f MiB); resident memory grew %.1f MiB", packedMiB, bf16MiB,
              double(grown) / 1024.0);
        QVERIFY(packedMiB * 3.5 < bf16MiB);
        QVERIFY2(double(grown) / 1024.0 < packedMiB + 32.0, "resident growth beyond packed size + 32 MiB");
    }
};

QTEST_GUILESS_MAIN(TestExl3Model)
#include "test_exl3_model.moc"
