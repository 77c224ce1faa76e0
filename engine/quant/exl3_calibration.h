// Hessian capture for the EXL3 quantizer (spec §5.1 step 2): H = Σ xᵀx over the rows x that a linear
// reads while our own forward runs on calibration tokens. It hooks the model's MLPs (MlpObserver,
// model/glm5_next.h): gate_proj and up_proj share the Hessian of the MLP input, down_proj has the one of
// the SwiGLU output; a routed expert accumulates only the tokens routed to it. Attention projections and
// the head are not hooked (the quantizer falls back to no Hessian for them).
#pragma once

#include "model/glm5_next.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ts {

class ThreadPool;

class Exl3HessianRecorder final : public MlpObserver {
public:
    // Downloads the observed rows through `backend` (host memory on the CPU backend); the accumulation
    // runs on `pool` (nullptr = ThreadPool::global()).
    explicit Exl3HessianRecorder(Backend& backend, ThreadPool* pool = nullptr);

    // Records the MLP at `mlp` (an element of the model's weights()) under `name`, its tensor prefix,
    // e.g. "model.language_model.layers.3.mlp.experts.7". MLPs never tracked are ignored.
    void track(const MlpWeights& mlp, const std::string& name);
    void clear();  // forgets every tracked MLP and its sums

    struct Sum {
        int64_t dim = 0;
        int64_t rows = 0;          // rows accumulated (non-finite rows are dropped)
        std::vector<double> xtx;   // Σ xᵀx [dim, dim], full symmetric
        // Σ xᵀx / rows as fp32 (what exl3Quantize takes); empty when no row was seen.
        std::vector<float> mean() const;
    };
    // The sums of the MLP `name`: its input (gate/up) and its activation (down). nullptr when untracked.
    const Sum* input(const std::string& name) const;
    const Sum* activation(const std::string& name) const;
    // Bytes the sums of an MLP with hidden size D and intermediate size I will hold.
    static int64_t bytesFor(int64_t D, int64_t I) { return (D * D + I * I) * int64_t(sizeof(double)); }

    void observe(const MlpWeights& mlp, const Buffer& in, const Buffer& act, int64_t T, int64_t D, int64_t I) override;

private:
    struct Entry {
        std::string name;
        Sum in, act;
    };
    void accumulate(Sum& s, const Buffer& x, int64_t T, int64_t dim);

    Backend& m_backend;
    ThreadPool* m_pool;
    std::map<const MlpWeights*, Entry> m_entries;
    std::map<std::string, const MlpWeights*> m_byName;
    std::vector<float> m_host;  // downloaded rows
};

}  // namespace ts
