#include "quant/exl3_linear.h"

#include "core/error.h"
#include "quant/exl3_gemm.h"

namespace ts {

Exl3PackedLinear::Exl3PackedLinear(Exl3Linear w, int64_t in, int64_t out) : m_w(std::move(w)), m_in(in), m_out(out) {
    if (in > m_w.k || out > m_w.n || in <= m_w.k - kExl3Pad || out <= m_w.n - kExl3Pad)
        fail(ErrorKind::InvalidFile, "EXL3 linear '" + m_w.prefix + "' holds [" + std::to_string(m_w.k) + " x " +
                                         std::to_string(m_w.n) + "] (padded to 128), the config implies [" +
                                         std::to_string(in) + " x " + std::to_string(out) + "]");
    if (!m_w.bias.empty() && int64_t(m_w.bias.size()) < out)
        fail(ErrorKind::InvalidFile, "EXL3 linear '" + m_w.prefix + "': bias shorter than out_features");
}

void Exl3PackedLinear::forwardHost(const float* x, int64_t T, float* y) const {
    exl3Gemm(m_w, x, T, m_in, y, m_out);
}

}  // namespace ts
