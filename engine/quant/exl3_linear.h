// An EXL3-packed linear as the model uses it: a PackedLinear (kernels/backend.h) over a bound Exl3Linear,
// computing y = x · W with the rotated GEMM (tile by tile, never expanding W). The logical shape may be
// smaller than the 128-padded trellis: inputs beyond `in` are zero, outputs beyond `out` are dropped.
#pragma once

#include "backend.h"
#include "quant/exl3_format.h"

namespace ts {

class Exl3PackedLinear final : public PackedLinear {
public:
    // Checks that the padded trellis covers [in, out]; throws InvalidFile naming the prefix otherwise.
    Exl3PackedLinear(Exl3Linear w, int64_t in, int64_t out);
    Exl3PackedLinear(const Exl3PackedLinear&) = delete;  // m_view points into m_w
    Exl3PackedLinear& operator=(const Exl3PackedLinear&) = delete;
    int64_t inFeatures() const override { return m_in; }
    int64_t outFeatures() const override { return m_out; }
    size_t packedBytes() const override { return size_t(m_w.packedBytes()); }
    void forwardHost(const float* x, int64_t T, float* y) const override;
    const TrellisView* trellis() const override { return &m_view; }
    const Exl3Linear& linear() const { return m_w; }

private:
    Exl3Linear m_w;
    int64_t m_in, m_out;
    TrellisView m_view;  // points into m_w (its vectors never change after construction)
};

}  // namespace ts
