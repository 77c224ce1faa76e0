// The op self-test: every op of kernels/backend.h run on one backend (the device under test, DUT)
// and on the reference (the CPU backend) with the same fresh random inputs, outputs compared
// element-wise. Inputs are never zeros; every output buffer is poisoned (all bytes 0xFF = NaN in fp32)
// before each run, so an op that skips writing an element fails. Cases are grouped by family, one
// file each (cases_*.cpp), so each kernel family's author owns its cases.
//
// Used by `twinspark-cli selftest --backend cuda` (the recipe's GPU self-test before serving) and by
// tests/unit/test_op_selftest.cpp (CPU vs CPU must pass; CPU vs a deliberately wrong backend must fail
// and name the op).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend.h"
#include "runtime/sampler.h"

namespace ts::selftest {

struct OpResult {
    std::string family;   // "math", "mhc_kda", "attention", "moe", "exl3", "sampling"
    std::string op;       // the Backend method, e.g. "rmsnorm"
    std::string shape;    // human-readable case, e.g. "rows=7 D=4096"
    double maxAbsErr = 0;  // max |dut − ref| over the compared elements
    double maxRef = 0;     // max |ref|, for scale
    double worst = 0;      // max |dut − ref| / (atol + rtol·|ref|); pass iff ≤ 1 and finite
    double atol = 0, rtol = 0;
    int64_t mismatches = 0;  // elements over the bound (or not finite)
    bool pass = false;
    std::string note;        // e.g. which element was worst, or why the case could not run
};

// Shared state of one run: the two backends, the random source, and the host memory that weight views
// point into (kept alive for the whole run: device backends cache uploads by host pointer).
class Context {
public:
    Context(Backend& ref, Backend& dut, uint64_t seed) : m_ref(ref), m_dut(dut), m_rng(seed) {}
    Backend& ref() { return m_ref; }
    Backend& dut() { return m_dut; }
    std::mt19937_64& rng() { return m_rng; }
    void reseed(uint64_t seed) { m_rng.seed(seed); }

    // n floats ~ N(0, stddev²), with no exact zeros.
    std::vector<float> randn(size_t n, float stddev = 1.0f);
    // n floats uniform in [lo, hi).
    std::vector<float> uniform(size_t n, float lo, float hi);
    // n int32 uniform in [lo, hi].
    std::vector<int32_t> randint(size_t n, int32_t lo, int32_t hi);

    // A weight matrix [rows, cols] of the given dtype (BF16 / F16 / F32) filled with N(0, stddev²),
    // stored in host memory owned by the context; also returns the exact fp32 values if wanted.
    WeightView weight(int64_t rows, int64_t cols, DType dtype, float stddev, std::vector<float>* values = nullptr);
    // Keeps arbitrary host memory alive for the run (e.g. packed trellis bytes) and returns its pointer.
    void* keep(std::vector<uint8_t> bytes);
    // Keeps an object alive for the run (e.g. a PackedLinear the views point to).
    template <class T>
    T* own(std::unique_ptr<T> obj) {
        T* p = obj.get();
        m_objects.push_back(std::shared_ptr<void>(std::move(obj)));
        return p;
    }

    // Uploads host data to a backend.
    static Buffer put(Backend& b, const void* host, size_t bytes) { return b.upload(host, bytes); }
    template <class T>
    static Buffer put(Backend& b, const std::vector<T>& v) { return b.upload(v.data(), v.size() * sizeof(T)); }
    // A buffer of `bytes` on backend b with every byte 0xFF (fp32 NaN, int32 −1).
    static Buffer poisoned(Backend& b, size_t bytes);
    static std::vector<float> getF32(Backend& b, const Buffer& buf, size_t count, size_t firstFloat = 0);
    static std::vector<int32_t> getI32(Backend& b, const Buffer& buf, size_t count);
    static std::vector<uint8_t> getBytes(Backend& b, const Buffer& buf, size_t bytes);

    // Element-wise comparison of fp32 results.
    static OpResult compare(std::string family, std::string op, std::string shape, const std::vector<float>& ref,
                            const std::vector<float>& dut, double atol, double rtol);
    // A result that is a verdict, not a comparison (a path taken or declined, a case that could not run).
    static OpResult verdict(std::string family, std::string op, std::string shape, bool pass, std::string note);
    // Exact comparison (ints, bytes, discrete decisions).
    static OpResult compareExact(std::string family, std::string op, std::string shape,
                                 const std::vector<int32_t>& ref, const std::vector<int32_t>& dut);

private:
    Backend& m_ref;
    Backend& m_dut;
    std::mt19937_64 m_rng;
    std::vector<std::vector<uint8_t>> m_host;
    std::vector<std::shared_ptr<void>> m_objects;
};

// One case: runs an op (or a few) on both backends and returns one result per compared output.
struct Case {
    std::string family;
    std::string name;
    std::function<std::vector<OpResult>(Context&)> run;
};

// Helpers the family files share.
using Outs = std::vector<std::vector<float>>;
// Runs `f` on the reference, then on the device under test; each returns its outputs in the same order.
std::pair<Outs, Outs> onBoth(Context& ctx, const std::function<Outs(Backend&)>& f);
// The bit patterns of fp32 values, for exact comparisons (compareExact).
std::vector<int32_t> bitsOf(const std::vector<float>& v);
// The model's per-expert MoE loop (layers.cpp moeForward without the shared expert) on one backend:
// y += Σ over each token's choices of weight · down_e(swiglu(gate_e · x, up_e · x)); ids outside [0, E)
// are skipped. The reference for the fused MoE paths (EXL3 and dense).
void moeExpertLoop(Backend& b, const Buffer& x, int64_t T, int64_t D, int64_t I, const std::vector<int32_t>& idx,
                   const std::vector<float>& wt, int64_t topk, const std::vector<WeightView>& gate,
                   const std::vector<WeightView>& up, const std::vector<WeightView>& down, int64_t E, float limit,
                   const Buffer& y);
// Random routing for the MoE cases: topk distinct experts per token from [0, pool), weights in (0.05, 1)
// (idx drawn first, then wt).
void moeRandomRouting(Context& ctx, int64_t T, int64_t topk, int64_t pool, std::vector<int32_t>& idx,
                      std::vector<float>& wt);
// Case labels: an integer, and a float in %g form.
inline std::string str(int64_t v) { return std::to_string(v); }
std::string fstr(float v);

// Each family file appends its cases.
void addMathCases(std::vector<Case>& out);
void addMhcKdaCases(std::vector<Case>& out);
void addAttentionCases(std::vector<Case>& out);
void addMoeCases(std::vector<Case>& out);
void addExl3Cases(std::vector<Case>& out);  // may be empty where the format is not linked in
void addSamplingCases(std::vector<Case>& out);  // Backend::sampleRows against the host sampler
// The sampling cases' rule for a row a backend hands back (SampleOutput::kAmbiguous) outside the constructed ties:
// due when the host's own margins (sampleMarginsWithUniform) put a decision within twice the device sampler's
// rounding bound (8n + 256)·2⁻⁵³ of its other side; a hand-back that is not due fails the case.
bool handBackIsDue(const SampleMargins& m);

std::vector<Case> allCases();

// The seed of the gate before serving (verifyBackendOrThrow) and selftest's default: the CLI reproduces
// exactly the inputs the gate saw.
inline constexpr uint64_t kDefaultSeed = 20261129;

// Runs every case whose "family/name" contains `filter` (empty = all). A case that throws yields a
// failed result whose note is the exception's message. `onResult` (optional) sees each result as it
// comes (progress output).
std::vector<OpResult> run(Backend& ref, Backend& dut, uint64_t seed, const std::string& filter = {},
                          const std::function<void(const OpResult&)>& onResult = {});

}  // namespace ts::selftest
