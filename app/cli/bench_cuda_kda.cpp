// `bench-device --what kda`: the KDA gated delta rule (Backend::kdaRecurrent) at GLM-5.3-Flash's width,
// 64 heads × 128 × 128 with an fp32 state (4 MiB per layer and sequence).
// - decode (T = 1): the state is the traffic, read once and written once per call, so the figure of
//   merit is achieved bandwidth = 2 · state bytes / time (compare with the copy bandwidth that
//   bench-device measures first; q, k, v, g, β and the output add 0.2% and are not counted);
// - decode of 4 sequences, one call each, and in one batched call (kdaRecurrentBatch: the model's path; one
//   state per sequence);
// - prefill through the recurrent kernel (T = 256 in one call, 64 heads): µs per token;
// - prefill, chunked vs recurrent, at T = 4096 with GLM-5.3-Flash's per-rank width at TP 2 (32 heads ×
//   128): µs per token and layer (one call = one layer of one sequence) and the speed-up;
// - the same pair at T = 4..64 (32 heads), the range where CudaBackend's threshold (T ≥ 16) sits.
// The path is chosen through the CUDA backend's run-time override of its chunking threshold
// (kdaSetChunkMinTokens, kernels/exl3_tune.h; the environment's TS_KDA_CHUNK is read once per process, so
// setting it here would not switch): 0 forces the recurrent kernel, 1 the chunked one (for any T ≥ 1); the
// previous override is restored afterwards. Other backends ignore it (the two rows are then the same
// computation).
// Only the Backend interface is used: it builds without CUDA and runs on any backend.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cli/bench_cuda.h"
#include "exl3_tune.h"

namespace ts::cli {

namespace {

struct KdaBenchInputs {
    Buffer qkv, g, beta, out;
};

KdaBenchInputs makeInputs(Backend& backend, std::mt19937& rng, int64_t T, int64_t H, int64_t Dk) {
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::uniform_real_distribution<float> gate(-1.0f, -0.01f);  // decays exp(g) in (0.37, 0.99)
    std::vector<float> qkv(size_t(T * 3 * H * Dk)), g(size_t(T * H * Dk)), beta(size_t(T * H));
    for (float& v : qkv) v = n(rng);
    for (float& v : g) v = gate(rng);
    for (float& v : beta) v = n(rng);
    KdaBenchInputs in;
    in.qkv = backend.upload(qkv.data(), qkv.size() * 4);
    in.g = backend.upload(g.data(), g.size() * 4);
    in.beta = backend.upload(beta.data(), beta.size() * 4);
    in.out = backend.alloc(size_t(T * H * Dk) * 4);
    return in;
}

Buffer makeState(Backend& backend, std::mt19937& rng, int64_t H, int64_t Dk) {
    std::normal_distribution<float> n(0.0f, 0.3f);
    std::vector<float> s(size_t(H * Dk * Dk));
    for (float& v : s) v = n(rng);
    return backend.upload(s.data(), s.size() * 4);
}

// Forces the KDA prefill's path for its lifetime ("0": the recurrent kernel, "1": the chunked form for any
// T ≥ 1) through the backend's run-time override (exl3_tune.h), then restores the previous one.
class KdaPathScope {
public:
    explicit KdaPathScope(const char* value) : m_old(kdaSetChunkMinTokens(std::strtoll(value, nullptr, 10))) {}
    ~KdaPathScope() { kdaSetChunkMinTokens(m_old); }
    KdaPathScope(const KdaPathScope&) = delete;
    KdaPathScope& operator=(const KdaPathScope&) = delete;

private:
    int64_t m_old;
};

// Median seconds of one kdaRecurrent call of T tokens on the chosen path ("0" / "1" as above). The
// state evolves from call to call (as layers would); the inputs stay the same.
double timePrefill(Backend& backend, const KdaBenchInputs& in, const Buffer& state, int64_t T, int64_t H, int64_t Dk,
                   const char* path, int reps, int inner) {
    KdaPathScope scope(path);
    return medianSeconds(backend, reps, inner, [&] {
        backend.kdaRecurrent(in.qkv, T, H, Dk, in.g, in.beta, state, in.out);
    });
}

}  // namespace

nlohmann::json benchKdaDecode(Backend& backend, int reps) {
    const int64_t H = 64, Dk = 128;  // GLM-5.3-Flash: linear_num_heads, linear_head_dim (Dv = Dk)
    const double stateBytes = double(H * Dk * Dk) * 4.0;
    std::mt19937 rng(6);
    nlohmann::json rows = nlohmann::json::array();
    std::printf("KDA gated delta rule (kdaRecurrent), H=%lld Dk=Dv=%lld, fp32 state %.2f MiB per sequence\n",
                static_cast<long long>(H), static_cast<long long>(Dk), stateBytes / (1 << 20));

    {  // decode, one sequence
        const KdaBenchInputs in = makeInputs(backend, rng, 1, H, Dk);
        const Buffer state = makeState(backend, rng, H, Dk);
        const double s = medianSeconds(backend, reps, 50, [&] {
            backend.kdaRecurrent(in.qkv, 1, H, Dk, in.g, in.beta, state, in.out);
        });
        const double gbps = 2.0 * stateBytes / s / 1e9;
        std::printf("  decode T=1, 1 sequence : %9.2f us/call  %8.1f GB/s (state read + write)\n", s * 1e6, gbps);
        rows.push_back({{"case", "decode"}, {"T", 1}, {"sequences", 1}, {"H", H}, {"Dk", Dk},
                        {"us_per_call", s * 1e6}, {"state_bytes_rw", 2.0 * stateBytes}, {"GBps", gbps}});
    }
    {  // decode, 4 sequences (4 calls, each on its own state)
        const int seqs = 4;
        std::vector<KdaBenchInputs> in;
        std::vector<Buffer> states;
        for (int i = 0; i < seqs; ++i) {
            in.push_back(makeInputs(backend, rng, 1, H, Dk));
            states.push_back(makeState(backend, rng, H, Dk));
        }
        const double s = medianSeconds(backend, reps, 20, [&] {
            for (int i = 0; i < seqs; ++i)
                backend.kdaRecurrent(in[size_t(i)].qkv, 1, H, Dk, in[size_t(i)].g, in[size_t(i)].beta, states[size_t(i)],
                                     in[size_t(i)].out);
        });
        const double gbps = 2.0 * stateBytes * seqs / s / 1e9;
        std::printf("  decode T=1, 4 sequences: %9.2f us/step  %8.1f GB/s (state read + write)\n", s * 1e6, gbps);
        rows.push_back({{"case", "decode"}, {"T", 1}, {"sequences", seqs}, {"H", H}, {"Dk", Dk},
                        {"us_per_step", s * 1e6}, {"state_bytes_rw", 2.0 * stateBytes * seqs}, {"GBps", gbps}});
        // The same step as one batched call: the 4 rows side by side, each sequence on its own state.
        const KdaBenchInputs all = makeInputs(backend, rng, seqs, H, Dk);
        const std::vector<int64_t> rowsPer(size_t(seqs), 1);
        const double sb = medianSeconds(backend, reps, 20, [&] {
            backend.kdaRecurrentBatch(all.qkv, rowsPer.data(), seqs, H, Dk, all.g, all.beta, states.data(), all.out);
        });
        const double gbpsB = 2.0 * stateBytes * seqs / sb / 1e9;
        std::printf("  decode T=1, 4 sequences, one call: %9.2f us/step  %8.1f GB/s (state read + write)\n", sb * 1e6, gbpsB);
        rows.push_back({{"case", "decode_batched"}, {"T", 1}, {"sequences", seqs}, {"H", H}, {"Dk", Dk},
                        {"us_per_step", sb * 1e6}, {"state_bytes_rw", 2.0 * stateBytes * seqs}, {"GBps", gbpsB}});
    }
    {  // prefill through the recurrent kernel
        const int64_t T = 256;
        const KdaBenchInputs in = makeInputs(backend, rng, T, H, Dk);
        const Buffer state = makeState(backend, rng, H, Dk);
        const double s = timePrefill(backend, in, state, T, H, Dk, "0", reps, 3);
        std::printf("  prefill T=%lld (recurrent): %9.2f us/call  %8.2f us/token\n", static_cast<long long>(T), s * 1e6,
                    s * 1e6 / double(T));
        rows.push_back({{"case", "prefill_recurrent"}, {"T", T}, {"sequences", 1}, {"H", H}, {"Dk", Dk},
                        {"us_per_call", s * 1e6}, {"us_per_token", s * 1e6 / double(T)}});
    }
    {  // prefill, chunked vs recurrent, at the per-rank width (TP 2: 32 of the 64 heads)
        const int64_t T = 4096, Hr = H / 2;
        const KdaBenchInputs in = makeInputs(backend, rng, T, Hr, Dk);
        const Buffer state = makeState(backend, rng, Hr, Dk);
        const double rec = timePrefill(backend, in, state, T, Hr, Dk, "0", reps, 1);
        const double chk = timePrefill(backend, in, state, T, Hr, Dk, "1", reps, 1);
        std::printf("  prefill T=%lld H=%lld (recurrent): %9.2f us/call  %8.3f us/token/layer\n",
                    static_cast<long long>(T), static_cast<long long>(Hr), rec * 1e6, rec * 1e6 / double(T));
        std::printf("  prefill T=%lld H=%lld (chunked)  : %9.2f us/call  %8.3f us/token/layer  %6.1fx\n",
                    static_cast<long long>(T), static_cast<long long>(Hr), chk * 1e6, chk * 1e6 / double(T), rec / chk);
        rows.push_back({{"case", "prefill_recurrent"}, {"T", T}, {"sequences", 1}, {"H", Hr}, {"Dk", Dk},
                        {"us_per_call", rec * 1e6}, {"us_per_token", rec * 1e6 / double(T)}});
        rows.push_back({{"case", "prefill_chunked"}, {"T", T}, {"sequences", 1}, {"H", Hr}, {"Dk", Dk},
                        {"us_per_call", chk * 1e6}, {"us_per_token", chk * 1e6 / double(T)}, {"speedup", rec / chk}});
    }
    {  // small T: where the chunked form starts to pay (CudaBackend's default threshold is T ≥ 16)
        const int64_t Hr = H / 2;
        std::printf("  small T, H=%lld: us/call recurrent | chunked\n", static_cast<long long>(Hr));
        for (const int64_t T : {int64_t(4), int64_t(8), int64_t(16), int64_t(32), int64_t(64)}) {
            const KdaBenchInputs in = makeInputs(backend, rng, T, Hr, Dk);
            const Buffer state = makeState(backend, rng, Hr, Dk);
            const double rec = timePrefill(backend, in, state, T, Hr, Dk, "0", reps, 10);
            const double chk = timePrefill(backend, in, state, T, Hr, Dk, "1", reps, 10);
            std::printf("    T=%3lld: %9.2f | %9.2f us  %6.2fx\n", static_cast<long long>(T), rec * 1e6, chk * 1e6, rec / chk);
            rows.push_back({{"case", "prefill_small"}, {"T", T}, {"sequences", 1}, {"H", Hr}, {"Dk", Dk},
                            {"us_per_call_recurrent", rec * 1e6}, {"us_per_call_chunked", chk * 1e6},
                            {"speedup", rec / chk}});
        }
    }
    return rows;
}

}  // namespace ts::cli
