#include "selftest/op_selftest.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>

#include "core/dtype.h"
#include "core/error.h"

namespace ts::selftest {

std::vector<float> Context::randn(size_t n, float stddev) {
    std::normal_distribution<float> d(0.0f, stddev);
    std::vector<float> v(n);
    for (float& x : v) {
        do x = d(m_rng);
        while (x == 0.0f);
    }
    return v;
}

std::vector<float> Context::uniform(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) {
        do x = d(m_rng);
        while (x == 0.0f);
    }
    return v;
}

std::vector<int32_t> Context::randint(size_t n, int32_t lo, int32_t hi) {
    std::uniform_int_distribution<int32_t> d(lo, hi);
    std::vector<int32_t> v(n);
    for (int32_t& x : v) x = d(m_rng);
    return v;
}

WeightView Context::weight(int64_t rows, int64_t cols, DType dtype, float stddev, std::vector<float>* values) {
    const size_t n = static_cast<size_t>(rows * cols);
    std::vector<float> f = randn(n, stddev);
    std::vector<uint8_t> bytes(n * dtypeSize(dtype));
    for (size_t i = 0; i < n; ++i) {
        switch (dtype) {
        case DType::BF16: {
            const uint16_t h = f32ToBf16(f[i]);
            std::memcpy(bytes.data() + 2 * i, &h, 2);
            f[i] = bf16ToF32(h);
            break;
        }
        case DType::F16: {
            const uint16_t h = f32ToF16(f[i]);
            std::memcpy(bytes.data() + 2 * i, &h, 2);
            f[i] = f16ToF32(h);
            break;
        }
        case DType::F32: std::memcpy(bytes.data() + 4 * i, &f[i], 4); break;
        default: fail(ErrorKind::Internal, "selftest weight: dtype must be BF16, F16 or F32");
        }
    }
    WeightView w;
    w.dtype = dtype;
    w.rows = rows;
    w.cols = cols;
    w.data = keep(std::move(bytes));
    if (values) *values = std::move(f);
    return w;
}

void* Context::keep(std::vector<uint8_t> bytes) {
    m_host.push_back(std::move(bytes));
    return m_host.back().data();
}

Buffer Context::poisoned(Backend& b, size_t bytes) {
    std::vector<uint8_t> ff(bytes, 0xFF);
    return b.upload(ff.data(), bytes);
}

std::vector<float> Context::getF32(Backend& b, const Buffer& buf, size_t count, size_t firstFloat) {
    std::vector<float> v(count);
    b.download(buf, v.data(), count * 4, firstFloat * 4);
    return v;
}

std::vector<int32_t> Context::getI32(Backend& b, const Buffer& buf, size_t count) {
    std::vector<int32_t> v(count);
    b.download(buf, v.data(), count * 4, 0);
    return v;
}

std::vector<uint8_t> Context::getBytes(Backend& b, const Buffer& buf, size_t bytes) {
    std::vector<uint8_t> v(bytes);
    b.download(buf, v.data(), bytes, 0);
    return v;
}

OpResult Context::compare(std::string family, std::string op, std::string shape, const std::vector<float>& ref,
                          const std::vector<float>& dut, double atol, double rtol) {
    OpResult r;
    r.family = std::move(family);
    r.op = std::move(op);
    r.shape = std::move(shape);
    r.atol = atol;
    r.rtol = rtol;
    if (ref.size() != dut.size()) {
        r.note = "size mismatch: ref " + std::to_string(ref.size()) + ", dut " + std::to_string(dut.size());
        r.worst = INFINITY;
        return r;
    }
    int64_t worstAt = -1;
    for (size_t i = 0; i < ref.size(); ++i) {
        const double a = ref[i], b = dut[i];
        if (!std::isfinite(a)) {  // the reference itself must be finite: a broken case, not a pass
            ++r.mismatches;
            if (worstAt < 0) { worstAt = int64_t(i); r.worst = INFINITY; }
            continue;
        }
        const double err = std::isfinite(b) ? std::fabs(a - b) : INFINITY;
        const double ratio = err / (atol + rtol * std::fabs(a));
        r.maxRef = std::max(r.maxRef, std::fabs(a));
        if (err > r.maxAbsErr) r.maxAbsErr = err;
        if (!(ratio <= 1.0)) ++r.mismatches;
        if (!(ratio <= r.worst) && r.worst != INFINITY) {
            r.worst = ratio;
            worstAt = int64_t(i);
        }
    }
    r.pass = r.mismatches == 0 && !ref.empty();
    if (ref.empty()) r.note = "nothing compared";
    else if (!r.pass && worstAt >= 0)
        r.note = "worst at element " + std::to_string(worstAt) + ": ref " + std::to_string(ref[size_t(worstAt)]) +
                 ", dut " + std::to_string(dut[size_t(worstAt)]);
    return r;
}

OpResult Context::verdict(std::string family, std::string op, std::string shape, bool pass, std::string note) {
    OpResult r;
    r.family = std::move(family);
    r.op = std::move(op);
    r.shape = std::move(shape);
    r.pass = pass;
    r.note = std::move(note);
    return r;
}

OpResult Context::compareExact(std::string family, std::string op, std::string shape,
                               const std::vector<int32_t>& ref, const std::vector<int32_t>& dut) {
    OpResult r;
    r.family = std::move(family);
    r.op = std::move(op);
    r.shape = std::move(shape);
    if (ref.size() != dut.size()) {
        r.note = "size mismatch";
        r.worst = INFINITY;
        return r;
    }
    int64_t first = -1;
    for (size_t i = 0; i < ref.size(); ++i)
        if (ref[i] != dut[i]) {
            ++r.mismatches;
            if (first < 0) first = int64_t(i);
        }
    r.maxAbsErr = double(r.mismatches);
    r.worst = r.mismatches ? INFINITY : 0.0;
    r.pass = r.mismatches == 0 && !ref.empty();
    if (first >= 0)
        r.note = std::to_string(r.mismatches) + " differ; first at " + std::to_string(first) + ": ref " +
                 std::to_string(ref[size_t(first)]) + ", dut " + std::to_string(dut[size_t(first)]);
    return r;
}

std::pair<Outs, Outs> onBoth(Context& ctx, const std::function<Outs(Backend&)>& f) {
    Outs r = f(ctx.ref());
    Outs d = f(ctx.dut());
    return {std::move(r), std::move(d)};
}

// The model's loop (layers.cpp moeForward without the shared expert), on one backend.
void moeExpertLoop(Backend& b, const Buffer& x, int64_t T, int64_t D, int64_t I, const std::vector<int32_t>& idx,
                   const std::vector<float>& wt, int64_t topk, const std::vector<WeightView>& gate,
                   const std::vector<WeightView>& up, const std::vector<WeightView>& down, int64_t E, float limit,
                   const Buffer& y) {
    std::vector<int32_t> rows;
    std::vector<float> scales;
    for (int64_t e = 0; e < E; ++e) {
        rows.clear();
        scales.clear();
        for (int64_t t = 0; t < T; ++t)
            for (int64_t k = 0; k < topk; ++k)
                if (idx[size_t(t * topk + k)] == e) {
                    rows.push_back(int32_t(t));
                    scales.push_back(wt[size_t(t * topk + k)]);
                }
        if (rows.empty()) continue;
        const int64_t n = int64_t(rows.size());
        const Buffer xe = b.alloc(size_t(n * D) * 4), g = b.alloc(size_t(n * I) * 4), u = b.alloc(size_t(n * I) * 4),
                     ye = b.alloc(size_t(n * D) * 4);
        b.gatherRows(x, D, rows.data(), n, xe);
        b.linear(xe, n, gate[size_t(e)], g);
        b.linear(xe, n, up[size_t(e)], u);
        b.swiglu(g, u, n, I, limit, g);
        b.linear(g, n, down[size_t(e)], ye);
        b.scatterAddRows(ye, D, rows.data(), scales.data(), n, y);
    }
}

// Random routing: topk distinct experts per token from [0, pool); weights in (0.05, 1).
void moeRandomRouting(Context& ctx, int64_t T, int64_t topk, int64_t pool, std::vector<int32_t>& idx, std::vector<float>& wt) {
    idx.assign(size_t(T * topk), 0);
    std::vector<int32_t> p(static_cast<size_t>(pool));
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t e = 0; e < pool; ++e) p[size_t(e)] = int32_t(e);
        for (int64_t k = 0; k < topk; ++k) {
            std::uniform_int_distribution<int64_t> pick(k, pool - 1);
            std::swap(p[size_t(k)], p[size_t(pick(ctx.rng()))]);
            idx[size_t(t * topk + k)] = p[size_t(k)];
        }
    }
    wt = ctx.uniform(size_t(T * topk), 0.05f, 1.0f);
}

std::vector<int32_t> bitsOf(const std::vector<float>& v) {
    std::vector<int32_t> b(v.size());
    if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * 4);
    return b;
}

std::string fstr(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", double(v));
    return buf;
}

std::vector<Case> allCases() {
    std::vector<Case> v;
    addMathCases(v);
    addMhcKdaCases(v);
    addAttentionCases(v);
    addMoeCases(v);
    addExl3Cases(v);
    addSamplingCases(v);
    return v;
}

std::vector<OpResult> run(Backend& ref, Backend& dut, uint64_t seed, const std::string& filter,
                          const std::function<void(const OpResult&)>& onResult) {
    std::vector<OpResult> all;
    Context ctx(ref, dut, seed);
    for (const Case& c : allCases()) {
        const std::string id = c.family + "/" + c.name;
        if (!filter.empty() && id.find(filter) == std::string::npos) continue;
        // Each case draws its inputs from the seed and its own id (FNV-1a), not from where the cases before it
        // left the generator: adding a case changes no other case's inputs, and a --filter run reproduces a
        // case of the whole run exactly.
        uint64_t h = 0xcbf29ce484222325ull;
        for (const unsigned char ch : id) h = (h ^ ch) * 0x100000001b3ull;
        ctx.reseed(seed ^ h);
        std::vector<OpResult> rs;
        try {
            rs = c.run(ctx);
            if (rs.empty()) rs.push_back(Context::verdict(c.family, c.name, "", false, "case produced no result"));
        } catch (const std::exception& e) {
            OpResult r = Context::verdict(c.family, c.name, "", false, std::string("threw: ") + e.what());
            r.worst = INFINITY;
            const auto* te = dynamic_cast<const Error*>(&e);
            if (te && te->kind() == ErrorKind::DeviceLost) {
                // The context is gone (a CUDA sticky error): every later case would fail the same way, and the
                // advice to skip the self-test would be wrong. The row names the op; the error ends the run.
                if (onResult) onResult(r);
                fail(ErrorKind::DeviceLost, "the GPU failed in the self-test's " + c.family + " / " + c.name + ": " +
                                                e.what());
            }
            rs = {r};
        }
        for (OpResult& r : rs) {
            if (onResult) onResult(r);
            all.push_back(std::move(r));
        }
    }
    // The cases' weights live in ctx's host memory and PackedLinears, freed on return: a device backend's
    // uploads of them (keyed by host pointer) must go too, or the model loaded next on this backend
    // (serve, the control center, selftest --model) can hit a stale copy at a reused address.
    try {
        dut.releaseWeights();
        ref.releaseWeights();
    } catch (const std::exception& e) {  // a device left broken by a case: a failure, not a lost table
        OpResult r = Context::verdict("harness", "releaseWeights", "", false, std::string("threw: ") + e.what());
        r.worst = INFINITY;
        if (onResult) onResult(r);
        all.push_back(std::move(r));
    }
    return all;
}

}  // namespace ts::selftest
