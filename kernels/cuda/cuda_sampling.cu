// cuda_sampling: Backend::sampleRows — the host sampler (engine/runtime/sampler.cpp, vLLM v1's order) on
// the GPU, so a decode step no longer downloads V floats per sequence: only the token, its logprob and the
// top-N come back. The contract is the host's token for the same logits and the same uniform number; where
// this kernel cannot prove it has the host's answer it says so (SampleOutput::status) and the runtime lets
// the host sampler decide that row (runtime/device_sampling.cpp).
//
// One block of 1024 threads per row (grid = rows, at most kRowsPerLaunch per launch). Steps, as the host:
//  1. raw row: NaN / +inf check (→ kNonFinite; the host raises its error), raw max for the logprobs;
//     rows with adjustments are copied to a scratch row, the others are read in place (and their
//     argmax is taken in the same pass);
//  2. adjustments (SampleLogitAdjust: min_tokens mask, repetition penalty, frequency/presence — the
//     subtrahend rounded on the host) with the host's float operations (__fdiv_rn / __fmul_rn / __fsub_rn);
//  3. max and argmax (ties: lowest id); all -inf → kAllMasked; greedy: the argmax, done;
//  4. l = double(x) · (1 / double(T)) rounded (__dmul_rn, never fused: the host rounds the product);
//     min_p: keep l ≥ maxL + log(min_p), the log taken on the host (libm's value); these are exact.
//  5. top_k: the k-th largest x among the min_p survivors by radix selection (8 bits per pass over the
//     order-preserving key of the float, -0 = +0; warp-aggregated shared-memory counts); keep x ≥ it —
//     ties at the cut kept. Exact: x → l is strictly increasing, so the float order is the host's order.
//  6. Z = Σ exp(l − maxL) over the candidates (double).
//  7. top_p (top_p < 1 and > 1 candidate): the host ranks candidates by (l desc, id asc) and keeps the
//     shortest prefix whose running sum reaches top_p · z. Here the ranking is walked in slabs of the 4096
//     smallest 64-bit keys (desc-float << idBits | id: unique, ascending = the host's order): radix-select
//     the slab's last key, gather, bitonic sort in shared memory, prefix-sum in double; the next slab
//     starts after the last key (a nucleus over 4096 tokens costs one more select per slab).
//  8. the draw: the host walks the kept candidates — in increasing id when top_p did not cut, else in the
//     top_p ranking — and takes the first whose running sum exceeds u · z (the last one if rounding leaves
//     u past the end). Increasing id: one contiguous chunk per thread + a block scan; ranking: step 7's
//     slabs again (slab 0 is usually still in shared memory).
//  9. logprobs (status ok): log_softmax of the raw row in double; top-N = the N smallest unique keys of
//     the raw row (radix select + gather + sort): best first, ties lower id first — the host's order.
// Exactness of 7 and 8: exp() here and glibc's differ by ≤ 2 ulp and the sums run in other orders, so a
// running sum can differ from the host's by at most (2n + 4)·u·Z (n candidates, u = 2⁻⁵³). A decision is
// taken only when the compared quantities are more than E = (8n + 256)·u·Z apart (the first element has
// no lower comparison, the last no upper one, exactly as in the host's loop); otherwise the row is
// kAmbiguous and the host decides. For continuous logits this happens with probability ~E/Z ≈ 1e-10 per
// row; it happens by construction for exact ties of sums (e.g. equal logits with top_p · n an integer).
// Everything else (greedy, penalties, masks, min_p, top_k, the candidate set, top-N ids) is bit-exact.
//
// Cost per row at V = 151552 (one SM): greedy is one pass over the row (two with adjustments); the usual
// top_p case ~8 (check + argmax, Z, ≤ 7 radix passes that mostly stop after 3-4, gather), a 4096-key
// bitonic sort and a few block scans; the draw reuses the sorted slab. A nucleus over 4096 tokens costs
// one select + gather + sort per further slab, twice (the draw walks from the top again).
//
// Test: `twinspark-cli selftest --backend cuda --filter sampling` (engine/selftest/cases_sampling.cpp:
// V = 1000 and 151552, greedy with exact ties, top_k with ties at the cut, min_p, top_p incl. nuclei over
// 4096 tokens, penalties, suppressed stops, logprobs, NaN / +inf / all-masked rows, constructed ties).
// Benchmark: nsys on a decode step (kernel sampleRowsKernel) against the logits download it replaces.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"

namespace ts {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kSlab = 4096;              // sorted keys per slab (32 KiB of shared memory)
constexpr int kPer = kSlab / kThreads;   // slab entries per thread in the prefix sums
constexpr int kRowsPerLaunch = 64;       // bounds the scratch copies of adjusted rows (64 · V floats)
constexpr float kGreedyTemperature = 1e-5f;  // the host's (vLLM's _SAMPLING_EPS)
constexpr double kUnitRoundoff = 0x1.0p-53;
constexpr unsigned kFull = 0xffffffffu;
constexpr unsigned long long kNoKey = ~0ull;  // above every real key (those have a non-NaN float part)

static_assert(kWarps == 32, "the block reductions scan one warp of warp totals");
static_assert(kSlab % kThreads == 0, "slab entries are split evenly over the threads");

// The device copy of a DeviceSampleRequest (the adjustments live in one flat array).
struct RowArgs {
    double uniform;
    double logMinP;
    long long row;
    long long workOffset;  // floats into the scratch rows, or -1: no adjustments, read the logits in place
    int adjustOffset;
    int numAdjust;
    int topK;
    int logprobs;
    float temperature;
    float topP;
    float repetitionPenalty;
    int pad;
};

struct Smem {
    unsigned long long keys[kSlab];            // the loaded slab, sorted ascending
    unsigned long long top[kMaxSampleTop];     // the logprobs' top-N keys
    double redD[kWarps];
    float redF[kWarps];
    int redI[kWarps];
    int hist[256];
    // broadcasts
    unsigned long long selPrefix;
    long long selK;
    int selDone;
    int counter;
    int claimPos;
    int loadedSlab;  // which slab `keys` holds (-1: none)
    int broken;      // an internal invariant failed: hand the row to the host
    double claimBefore, claimMass;
    unsigned long long claimKey;
    int claimFirst, claimLast;
};

// Order-preserving key of a float, reversed: ascending key = descending value. -0 is +0 (they compare
// equal on the host). NaN never gets here.
__device__ __forceinline__ uint32_t descKey(float x) {
    uint32_t b = __float_as_uint(x);
    if ((b << 1) == 0u) b = 0u;
    const uint32_t asc = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ~asc;
}
__device__ __forceinline__ float fromDescKey(uint32_t d) {
    const uint32_t asc = ~d;
    return __uint_as_float((asc & 0x80000000u) ? (asc & 0x7fffffffu) : ~asc);
}

// One row as the steps after 3 see it.
struct RowView {
    const float* x;  // the (adjusted) logits
    int V;
    int idBits;
    uint32_t kthDesc;  // top_k: candidates have descKey(x) <= kthDesc (0xffffffff: off)
    double invT, maxL, cutL;

    __device__ unsigned long long key(int i, float xi) const {
        return ((unsigned long long)descKey(xi) << idBits) | (unsigned long long)i;
    }
    // In the candidate set after min_p and top_k (the host's `c` before top_p).
    __device__ bool cand(float xi) const {
        if (xi == -INFINITY || descKey(xi) > kthDesc) return false;
        return !(__dmul_rn((double)xi, invT) < cutL);
    }
    // exp(l − maxL) with l rounded as the host's Cand::logit.
    __device__ double mass(float xi) const { return exp(__dsub_rn(__dmul_rn((double)xi, invT), maxL)); }
};

// Block reductions (every thread gets the result). They start with a barrier, so back-to-back calls
// never overwrite shared slots another thread still reads.
__device__ int blockSumInt(int v, Smem& s) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = __reduce_add_sync(kFull, v);
    __syncthreads();
    if (lane == 0) s.redI[warp] = v;
    __syncthreads();
    return __reduce_add_sync(kFull, s.redI[lane]);
}
__device__ int blockMinInt(int v, Smem& s) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = __reduce_min_sync(kFull, v);
    __syncthreads();
    if (lane == 0) s.redI[warp] = v;
    __syncthreads();
    return __reduce_min_sync(kFull, s.redI[lane]);
}
__device__ int blockMaxInt(int v, Smem& s) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = __reduce_max_sync(kFull, v);
    __syncthreads();
    if (lane == 0) s.redI[warp] = v;
    __syncthreads();
    return __reduce_max_sync(kFull, s.redI[lane]);
}
// Max and its lowest index (the host's strict `>` scan in increasing id).
__device__ __forceinline__ void argmaxStep(float& v, int& id, float ov, int oid) {
    if (ov > v || (ov == v && oid < id)) {
        v = ov;
        id = oid;
    }
}
__device__ void blockArgmax(float& v, int& id, Smem& s) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1) argmaxStep(v, id, __shfl_xor_sync(kFull, v, o), __shfl_xor_sync(kFull, id, o));
    __syncthreads();
    if (lane == 0) {
        s.redF[warp] = v;
        s.redI[warp] = id;
    }
    __syncthreads();
    v = s.redF[lane];
    id = s.redI[lane];
    for (int o = 16; o > 0; o >>= 1) argmaxStep(v, id, __shfl_xor_sync(kFull, v, o), __shfl_xor_sync(kFull, id, o));
}
// Exclusive prefix sum over the threads in order; `total` = the block's sum.
__device__ double blockExclusiveSumD(double v, Smem& s, double& total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    double inc = v;
    for (int o = 1; o < 32; o <<= 1) {
        const double t = __shfl_up_sync(kFull, inc, o);
        if (lane >= o) inc += t;
    }
    double exc = __shfl_up_sync(kFull, inc, 1);
    if (lane == 0) exc = 0.0;
    __syncthreads();
    if (lane == 31) s.redD[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        double w = s.redD[lane];
        for (int o = 1; o < 32; o <<= 1) {
            const double t = __shfl_up_sync(kFull, w, o);
            if (lane >= o) w += t;
        }
        s.redD[lane] = w;  // inclusive over the warps; each lane rewrites only its own slot
    }
    __syncthreads();
    total = s.redD[kWarps - 1];
    return (warp > 0 ? s.redD[warp - 1] : 0.0) + exc;
}

// Radix selection: the k-th smallest key (1 ≤ k ≤ the number of accepted elements) among the elements
// keyOf(i, key) accepts (keys < 2^nbits), 8 bits per pass from the top. Returns thr such that the accepted
// elements with key ≤ thr are exactly those with key ≤ the k-th smallest (ties included): as soon as the
// k-th smallest's bucket is taken whole, thr is that bucket's prefix with the lower bits set.
template <class KeyOf>
__device__ unsigned long long radixSelect(int V, int nbits, long long k, const KeyOf& keyOf, Smem& s) {
    const int lane = threadIdx.x & 31;
    unsigned long long prefix = 0;  // the digits decided so far, in place
    int shift = nbits;
    while (shift > 0) {
        const int width = min(8, shift);
        shift -= width;
        const unsigned long long hiMask = shift + width >= 64 ? 0ull : ~0ull << (shift + width);
        for (int i = threadIdx.x; i < 256; i += kThreads) s.hist[i] = 0;
        __syncthreads();
        for (int base = 0; base < V; base += kThreads) {  // uniform trip count: the warp calls match together
            const int i = base + int(threadIdx.x);
            unsigned long long key = 0;
            const bool ok = i < V && keyOf(i, key) && (key & hiMask) == prefix;
            const int d = ok ? int((key >> shift) & ((1u << width) - 1u)) : -1;
            const unsigned peers = __match_any_sync(kFull, d);
            if (ok && lane == __ffs(peers) - 1) atomicAdd(&s.hist[d], __popc(peers));
        }
        __syncthreads();
        if (threadIdx.x < 32) {  // warp 0 finds the bucket of the k-th smallest
            if (lane == 0) s.selK = -1;
            __syncwarp();
            int c[8], sum = 0;
#pragma unroll
            for (int b = 0; b < 8; ++b) {
                c[b] = s.hist[lane * 8 + b];
                sum += c[b];
            }
            int inc = sum;
            for (int o = 1; o < 32; o <<= 1) {
                const int t = __shfl_up_sync(kFull, inc, o);
                if (lane >= o) inc += t;
            }
            const long long exc = inc - sum;
            if (exc < k && k <= inc) {
                long long cum = exc;
#pragma unroll
                for (int b = 0; b < 8; ++b) {
                    if (cum + c[b] >= k && cum < k) {
                        s.selPrefix = prefix | ((unsigned long long)(lane * 8 + b) << shift);
                        s.selK = k - cum;
                        s.selDone = c[b] == k - cum;
                    }
                    cum += c[b];
                }
            }
        }
        __syncthreads();
        if (s.selK < 0) {  // k outside [1, count]: cannot happen; let the host decide the row
            if (threadIdx.x == 0) s.broken = 1;
            return kNoKey;
        }
        prefix = s.selPrefix;
        k = s.selK;
        if (s.selDone) return shift == 0 ? prefix : prefix | ((1ull << shift) - 1);
    }
    return prefix;
}

// Writes the keys of the accepted elements to dst in any order (at most cap); returns how many there were.
template <class KeyOf>
__device__ int gatherKeys(int V, const KeyOf& keyOf, unsigned long long* dst, int cap, Smem& s) {
    const int lane = threadIdx.x & 31;
    if (threadIdx.x == 0) s.counter = 0;
    __syncthreads();
    for (int base = 0; base < V; base += kThreads) {
        const int i = base + int(threadIdx.x);
        unsigned long long key = 0;
        const bool ok = i < V && keyOf(i, key);
        const unsigned ballot = __ballot_sync(kFull, ok);
        if (ballot == 0) continue;  // warp-uniform
        const int leader = __ffs(ballot) - 1;
        int off = 0;
        if (lane == leader) off = atomicAdd(&s.counter, __popc(ballot));
        off = __shfl_sync(kFull, off, leader);
        if (ok) {
            const int pos = off + __popc(ballot & ((1u << lane) - 1u));
            if (pos < cap) dst[pos] = key;
        }
    }
    __syncthreads();
    const int n = s.counter;
    __syncthreads();  // the next gather resets the counter
    return n;
}

// Ascending bitonic sort of keys[0, n), n a power of two ≤ kSlab. The caller has synchronized the writes.
__device__ void bitonicSort(unsigned long long* keys, int n) {
    for (int k = 2; k <= n; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < n; i += kThreads) {
                const int p = i ^ j;
                if (p > i) {  // each pair has one owner
                    const unsigned long long a = keys[i], b = keys[p];
                    if ((i & k) == 0 ? a > b : a < b) {
                        keys[i] = b;
                        keys[p] = a;
                    }
                }
            }
            __syncthreads();
        }
}

// The element where a running sum crosses a threshold (as the device computed it).
struct Crossing {
    bool found = false;
    unsigned long long key = 0;  // the id (increasing-id walk) or the 64-bit key (ranking walk)
    double before = 0, mass = 0;  // running sum before the element, and its own mass
    bool first = false, last = false;  // first / last element of the walk
};

// Each thread offers at most one element (pos unique across the block); the lowest position wins.
__device__ Crossing resolveClaim(bool claim, int pos, double before, double mass, unsigned long long key, bool first,
                                 bool last, Smem& s) {
    if (threadIdx.x == 0) s.claimPos = INT_MAX;
    __syncthreads();
    if (claim) atomicMin(&s.claimPos, pos);
    __syncthreads();
    if (claim && pos == s.claimPos) {
        s.claimBefore = before;
        s.claimMass = mass;
        s.claimKey = key;
        s.claimFirst = first;
        s.claimLast = last;
    }
    __syncthreads();
    Crossing c;
    c.found = s.claimPos != INT_MAX;
    if (c.found) {
        c.before = s.claimBefore;
        c.mass = s.claimMass;
        c.key = s.claimKey;
        c.first = s.claimFirst != 0;
        c.last = s.claimLast != 0;
    }
    __syncthreads();  // the next claim resets claimPos
    return c;
}

// Whether the host's loop provably takes the same element: the threshold lies more than E inside
// [before, before + mass) (no lower bound for the first element, no upper one for the last).
__device__ __forceinline__ bool decided(const Crossing& c, double tau, double E) {
    return c.found && (c.first || tau - c.before > E) && (c.last || c.before + c.mass - tau > E);
}

// Step 8 in increasing id: thread t walks ids [t·chunk, (t+1)·chunk).
__device__ Crossing crossIds(const RowView& r, double tau, int firstId, int lastId, Smem& s) {
    const int chunk = (r.V + kThreads - 1) / kThreads;
    const int lo = min(r.V, int(threadIdx.x) * chunk), hi = min(r.V, lo + chunk);
    double local = 0.0;
    for (int i = lo; i < hi; ++i) {
        const float xi = r.x[i];
        if (r.cand(xi)) local += r.mass(xi);
    }
    double total = 0.0;
    const double pre = blockExclusiveSumD(local, s, total);
    bool claim = false, first = false, last = false;
    int pos = 0;
    double before = 0.0, mass = 0.0;
    if (lo < hi && pre <= tau && (tau < pre + local || (lastId >= lo && lastId < hi))) {
        double a = pre;
        for (int i = lo; i < hi; ++i) {
            const float xi = r.x[i];
            if (!r.cand(xi)) continue;
            const double m = r.mass(xi);
            if (tau < a + m || i == lastId) {
                claim = true;
                pos = i;
                before = a;
                mass = m;
                first = i == firstId;
                last = i == lastId;
                break;
            }
            a += m;
        }
    }
    return resolveClaim(claim, pos, before, mass, (unsigned long long)pos, first, last, s);
}

// Loads slab `slab` (the candidates with key > lo, or all when !hasLo, smallest kSlab of them) into
// s.keys, sorted; `expect` = how many it must hold.
__device__ void loadSlab(const RowView& r, int slab, unsigned long long lo, bool hasLo, int remaining, Smem& s) {
    auto after = [&](int i, unsigned long long& key) {
        const float xi = r.x[i];
        if (!r.cand(xi)) return false;
        key = r.key(i, xi);
        return !hasLo || key > lo;
    };
    unsigned long long thr = kNoKey;
    if (remaining > kSlab) thr = radixSelect(r.V, 32 + r.idBits, kSlab, after, s);
    auto inSlab = [&](int i, unsigned long long& key) { return after(i, key) && key <= thr; };
    const int expect = min(remaining, kSlab);
    const int got = gatherKeys(r.V, inSlab, s.keys, kSlab, s);
    if (got != expect && threadIdx.x == 0) s.broken = 1;
    const int m = min(got, kSlab);
    int n2 = 1;
    while (n2 < m) n2 <<= 1;
    for (int i = m + int(threadIdx.x); i < n2; i += kThreads) s.keys[i] = kNoKey;
    __syncthreads();
    bitonicSort(s.keys, n2);
    if (threadIdx.x == 0) s.loadedSlab = slab;
    __syncthreads();
}

// Steps 7 and 8 in the ranking: walks the candidates with key ≤ limit (kNoKey: all of them; the last
// one walked is the last element) slab by slab.
__device__ Crossing crossRanked(const RowView& r, double tau, unsigned long long limit, int nc, Smem& s) {
    int consumed = 0, slab = 0;
    unsigned long long lo = 0;
    bool hasLo = false;
    double carry = 0.0;
    for (;;) {
        const int remaining = nc - consumed;
        if (remaining <= 0) return Crossing{};
        const int m = min(kSlab, remaining);
        if (s.loadedSlab != slab) loadSlab(r, slab, lo, hasLo, remaining, s);
        double mass[kPer];
        double local = 0.0;
        bool hasLast = false;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const int p = int(threadIdx.x) * kPer + j;
            mass[j] = 0.0;
            if (p < m && s.keys[p] <= limit) {
                mass[j] = r.mass(fromDescKey(uint32_t(s.keys[p] >> r.idBits)));
                hasLast = hasLast || s.keys[p] == limit || (limit == kNoKey && consumed + p == nc - 1);
            }
            local += mass[j];
        }
        double total = 0.0;
        const double pre = carry + blockExclusiveSumD(local, s, total);
        bool claim = false, first = false, last = false;
        int pos = 0;
        double before = 0.0, own = 0.0;
        unsigned long long key = 0;
        if (pre <= tau && (tau < pre + local || hasLast)) {
            double a = pre;
#pragma unroll
            for (int j = 0; j < kPer; ++j) {
                const int p = int(threadIdx.x) * kPer + j;
                if (claim || p >= m || s.keys[p] > limit) continue;
                const bool isLast = s.keys[p] == limit || (limit == kNoKey && consumed + p == nc - 1);
                if (tau < a + mass[j] || isLast) {
                    claim = true;
                    pos = consumed + p;
                    before = a;
                    own = mass[j];
                    key = s.keys[p];
                    first = consumed + p == 0;
                    last = isLast;
                }
                a += mass[j];
            }
        }
        const Crossing c = resolveClaim(claim, pos, before, own, key, first, last, s);
        if (c.found) return c;
        carry += total;
        const unsigned long long slabLast = s.keys[m - 1];
        if (slabLast >= limit || consumed + m >= nc) return Crossing{};  // the walk ended in this slab
        lo = slabLast;
        hasLo = true;
        consumed += m;
        ++slab;
    }
}

// A row that is not sampled here: no token, and the reason.
__device__ void writeStatus(SampleOutput& o, int status) {
    o.token = -1;
    o.status = status;
    o.logprob = 0.0f;
    o.numTop = 0;
}

__global__ void __launch_bounds__(kThreads, 1)
sampleRowsKernel(const float* logits, int V, int idBits, const RowArgs* args, const SampleLogitAdjust* adjust,
                 float* work, SampleOutput* out) {
    __shared__ Smem s;
    const RowArgs a = args[blockIdx.x];
    const float* raw = logits + (size_t)a.row * (size_t)V;
    float* copy = a.workOffset >= 0 ? work + a.workOffset : nullptr;
    const int tid = int(threadIdx.x);
    if (tid == 0) {
        s.broken = 0;
        s.loadedSlab = -1;
    }

    // 1. Non-finite check, raw max, the copy to adjust (or, without adjustments, step 3's argmax).
    int bad = 0;
    float rawMax = -INFINITY, best = -INFINITY;
    int bestId = INT_MAX;
    for (int i = tid; i < V; i += kThreads) {
        const float v = raw[i];
        bad |= (isnan(v) || v == INFINITY) ? 1 : 0;
        rawMax = fmaxf(rawMax, v);
        if (copy) {
            copy[i] = v;
        } else if (v > best) {
            best = v;
            bestId = i;
        }
    }
    bad = blockMaxInt(bad, s);
    rawMax = cuda::blockMax(rawMax, s.redF);
    SampleOutput& o = out[blockIdx.x];  // written by thread 0 only
    if (bad) {
        if (tid == 0) writeStatus(o, SampleOutput::kNonFinite);
        return;
    }
    // 2. Adjustments: distinct tokens, one thread each; the barrier makes the copy's writes visible.
    if (copy) {
        for (int j = tid; j < a.numAdjust; j += kThreads) {
            const SampleLogitAdjust e = adjust[a.adjustOffset + j];
            float v = copy[e.token];
            if (e.flags & SampleLogitAdjust::kAdjustMask) v = -INFINITY;
            if (e.flags & SampleLogitAdjust::kAdjustRepeat)
                v = v > 0.0f ? __fdiv_rn(v, a.repetitionPenalty) : __fmul_rn(v, a.repetitionPenalty);
            copy[e.token] = __fsub_rn(v, e.subtract);
        }
        __syncthreads();
        for (int i = tid; i < V; i += kThreads) {
            const float v = copy[i];
            if (v > best) {  // strict, in increasing i: the lowest id of a tie
                best = v;
                bestId = i;
            }
        }
    }
    RowView r;
    r.x = copy ? copy : raw;
    r.V = V;
    r.idBits = idBits;
    r.kthDesc = 0xffffffffu;
    r.invT = 1.0;
    r.maxL = 0.0;
    r.cutL = -INFINITY;

    // 3. Max / argmax (each thread's part was found above).
    blockArgmax(best, bestId, s);
    if (best == -INFINITY) {
        if (tid == 0) writeStatus(o, SampleOutput::kAllMasked);
        return;
    }
    int token = bestId;
    int status = SampleOutput::kOk;
    if (!(a.temperature < kGreedyTemperature)) {
        // 4. Temperature and min_p.
        r.invT = 1.0 / (double)a.temperature;  // IEEE division, as the host's
        r.maxL = __dmul_rn((double)best, r.invT);
        r.cutL = __dadd_rn(r.maxL, a.logMinP);
        // 5. top_k over the min_p survivors.
        if (a.topK > 0) {
            int n1 = 0;
            for (int i = tid; i < V; i += kThreads) n1 += r.cand(r.x[i]) ? 1 : 0;
            n1 = blockSumInt(n1, s);
            if (a.topK < n1) {
                auto valueKey = [&](int i, unsigned long long& key) {
                    const float xi = r.x[i];
                    if (!r.cand(xi)) return false;
                    key = descKey(xi);
                    return true;
                };
                r.kthDesc = uint32_t(radixSelect(V, 32, a.topK, valueKey, s));
            }
        }
        // 6. The candidates' mass.
        double z = 0.0;
        int nc = 0, firstId = INT_MAX, lastId = -1;
        for (int i = tid; i < V; i += kThreads) {
            const float xi = r.x[i];
            if (!r.cand(xi)) continue;
            z += r.mass(xi);
            ++nc;
            firstId = min(firstId, i);
            lastId = max(lastId, i);
        }
        z = cuda::blockSumD(z, s.redD);
        nc = blockSumInt(nc, s);
        firstId = blockMinInt(firstId, s);
        lastId = blockMaxInt(lastId, s);
        const double E = (8.0 * double(nc) + 256.0) * kUnitRoundoff * z;
        if (a.topP < 1.0f && nc > 1) {
            // 7. top_p: the boundary of the kept prefix of the ranking, then 8. the draw inside it.
            const double target = (double)a.topP * z;
            const Crossing c = crossRanked(r, target, kNoKey, nc, s);
            if (!decided(c, target, E)) {
                status = SampleOutput::kAmbiguous;
            } else {
                const double tau = a.uniform * (c.before + c.mass);
                const Crossing d = crossRanked(r, tau, c.key, nc, s);
                if (!decided(d, tau, E)) status = SampleOutput::kAmbiguous;
                else token = int(d.key & ((1ull << idBits) - 1));
            }
        } else {
            // 8. The draw in increasing id.
            const double tau = a.uniform * z;
            const Crossing c = crossIds(r, tau, firstId, lastId, s);
            if (!decided(c, tau, E)) status = SampleOutput::kAmbiguous;
            else token = int(c.key);
        }
    }
    __syncthreads();
    if (s.broken) status = SampleOutput::kAmbiguous;
    if (status != SampleOutput::kOk) {
        if (tid == 0) writeStatus(o, status);
        return;
    }

    // 9. Logprobs of the raw row.
    float logprob = 0.0f;
    int numTop = 0;
    if (a.logprobs >= 0) {
        double sum = 0.0;
        for (int i = tid; i < V; i += kThreads) sum += exp((double)raw[i] - (double)rawMax);
        sum = cuda::blockSumD(sum, s.redD);
        const double lse = (double)rawMax + log(sum);
        logprob = float((double)raw[token] - lse);
        numTop = min(a.logprobs, V);
        if (numTop > 0) {
            auto rawKey = [&](int i, unsigned long long& key) {
                key = ((unsigned long long)descKey(raw[i]) << idBits) | (unsigned long long)i;
                return true;
            };
            const unsigned long long thr = radixSelect(V, 32 + idBits, numTop, rawKey, s);
            auto inTop = [&](int i, unsigned long long& key) { return rawKey(i, key) && key <= thr; };
            const int got = gatherKeys(V, inTop, s.top, kMaxSampleTop, s);
            if (got != numTop || s.broken) {  // cannot happen (unique keys); the host decides if it does
                if (tid == 0) writeStatus(o, SampleOutput::kAmbiguous);
                return;
            }
            if (tid == 0) {
                for (int i = 1; i < numTop; ++i)  // insertion sort of ≤ 20 unique keys: best first
                    for (int j = i; j > 0 && s.top[j - 1] > s.top[j]; --j) {
                        const unsigned long long t = s.top[j];
                        s.top[j] = s.top[j - 1];
                        s.top[j - 1] = t;
                    }
                for (int i = 0; i < numTop; ++i) {
                    const int id = int(s.top[i] & ((1ull << idBits) - 1));
                    o.topIds[i] = id;
                    o.topLogprobs[i] = float((double)raw[id] - lse);
                }
            }
        }
    }
    if (tid == 0) {
        o.token = token;
        o.status = SampleOutput::kOk;
        o.logprob = logprob;
        o.numTop = numTop;
    }
}

}  // namespace

bool CudaBackend::sampleRows(const Buffer& logits, int64_t V, int64_t n, const DeviceSampleRequest* reqs,
                             SampleOutput* out) {
    GraphOp op(*this, false, "sampleRows", {gk(n)});
    TS_CHECK(V > 0 && V <= (int64_t(1) << 30), "sampleRows: vocabulary size out of range");
    if (n <= 0) return true;
    const int64_t logitRows = int64_t(logits.size() / (size_t(V) * 4));
    int idBits = 0;
    while ((int64_t(1) << idBits) < V) ++idBits;
    const int64_t pitch = (V + 31) / 32 * 32;  // scratch row stride in floats (128-byte aligned rows)

    for (int64_t first = 0; first < n; first += kRowsPerLaunch) {
        const int64_t rows = std::min<int64_t>(kRowsPerLaunch, n - first);
        std::vector<RowArgs> args(static_cast<size_t>(rows));
        std::vector<SampleLogitAdjust> adj;
        int64_t copies = 0;
        for (int64_t i = 0; i < rows; ++i) {
            const DeviceSampleRequest& q = reqs[first + i];
            TS_CHECK(q.row >= 0 && q.row < logitRows, "sampleRows: row outside the logits");
            TS_CHECK(q.numAdjust >= 0 && (q.numAdjust == 0 || q.adjust), "sampleRows: bad adjustments");
            TS_CHECK(q.logprobs >= -1 && q.logprobs <= kMaxSampleTop, "sampleRows: logprobs out of range");
            TS_CHECK(std::isfinite(q.temperature) && q.temperature >= 0.0f && q.topP > 0.0f && q.topP <= 1.0f &&
                         q.repetitionPenalty > 0.0f && std::isfinite(q.uniform) && q.uniform >= 0.0 && q.uniform < 1.0,
                     "sampleRows: parameters not validated");
            for (int32_t j = 0; j < q.numAdjust; ++j)
                TS_CHECK(q.adjust[j].token >= 0 && q.adjust[j].token < V && (j == 0 || q.adjust[j - 1].token < q.adjust[j].token),
                         "sampleRows: adjustment tokens must be distinct, ascending and inside the vocabulary");
            RowArgs& r = args[size_t(i)];
            std::memset(&r, 0, sizeof r);
            r.uniform = q.uniform;
            r.logMinP = q.logMinP;
            r.row = q.row;
            r.workOffset = q.numAdjust > 0 ? copies++ * pitch : -1;
            r.adjustOffset = int(adj.size());
            r.numAdjust = q.numAdjust;
            r.topK = q.topK;
            r.logprobs = q.logprobs;
            r.temperature = q.temperature;
            r.topP = q.topP;
            r.repetitionPenalty = q.repetitionPenalty;
            adj.insert(adj.end(), q.adjust, q.adjust + q.numAdjust);
        }
        TS_CHECK(adj.size() < size_t(INT_MAX), "sampleRows: too many adjustments");
        // One upload: [RowArgs × rows | adjustments].
        const size_t argBytes = (args.size() * sizeof(RowArgs) + 15) / 16 * 16;
        std::vector<uint8_t> packed(argBytes + adj.size() * sizeof(SampleLogitAdjust));
        std::memcpy(packed.data(), args.data(), args.size() * sizeof(RowArgs));
        if (!adj.empty()) std::memcpy(packed.data() + argBytes, adj.data(), adj.size() * sizeof(SampleLogitAdjust));
        auto* dPacked = static_cast<uint8_t*>(scratch(kScratchA, packed.size()));
        TS_CUDA_CHECK(cudaMemcpyAsync(dPacked, packed.data(), packed.size(), cudaMemcpyHostToDevice, m_stream));
        float* work = copies ? static_cast<float*>(scratch(kScratchC, size_t(copies * pitch) * 4)) : nullptr;
        auto* dOut = static_cast<SampleOutput*>(scratch(kScratchB, size_t(rows) * sizeof(SampleOutput)));
        cuda::launchPlain(sampleRowsKernel, unsigned(rows), kThreads, 0, m_stream, logits.f32(), int(V), idBits,
                          reinterpret_cast<const RowArgs*>(dPacked),
                          reinterpret_cast<const SampleLogitAdjust*>(dPacked + argBytes), work, dOut);
        TS_CUDA_CHECK(cudaMemcpyAsync(out + first, dOut, size_t(rows) * sizeof(SampleOutput), cudaMemcpyDeviceToHost,
                                      m_stream));
        TS_CUDA_CHECK(cudaStreamSynchronize(m_stream));  // `out` is read by the caller; `packed` goes now
    }
    return true;
}

}  // namespace ts
