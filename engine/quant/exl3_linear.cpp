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
    m_view.k = m_w.k;
    m_view.n = m_w.n;
    m_view.bits = m_w.bits;
    m_view.codebook = static_cast<uint8_t>(m_w.codebook);
    m_view.trellis = m_w.trellis;
    m_view.suh = m_w.suh.data();
    m_view.svh = m_w.svh.data();
    m_view.bias = m_w.bias.empty() ? nullptr : m_w.bias.data();
}

void Exl3PackedLinear::forwardHost(const float* x, int64_t T, float* y) const {
    exl3Gemm(m_w, x, T, m_in, y, m_out);
}

}  // namespace ts
