// The k-pool lightning indexer on the GPU (glm_dsa.md §8.2, §11.4–5), the CUDA twin of the indexer half of
// kernels/cpu/cpu_attention.cpp. Its outputs are discrete (cache bytes, selected positions), so both ops
// reproduce the CPU's arithmetic bit for bit: same operation order, no FMA contraction (see
// cuda_attention_common.cuh).
//
//   indexerCacheWrite  (its batched form: the step's sequences, each with its own ring, in the same two launches,
//                      from one upload of task lists)
//                      (1) one block per pool that completes in this call: per channel, the softmax over
//                      the kp members (members before pos0 come from the tail ring, the others from the
//                      input, rounded through bf16 in fp8 mode) in the CPU's sequential order, then
//                      Hadamard (D a power of two) + e4m3 with a power-of-two scale, or the fp32 key;
//                      (2) one block per ring slot the call leaves behind (each sequence's last min(T, kp)
//                      tokens).
//                      The exponential is exp in double rounded to float (correctly rounded); glibc's
//                      expf is within 0.502 ulp, so a pooled key can differ from the CPU's in the last bit
//                      in rare channels — the self-test compares bytes exactly with gates whose softmax
//                      terms are exact (e^0, e^-300), and within one fp8 step with random gates.
//   indexerSelect      (1) fp8 mode: one block per (query, head) rotates and quantises q like the CPU;
//                      (2) one warp per (query, pool), ≥ 32 pools per block: the score
//                      Σ_h w[t,h]·relu(D^-1/2 · q_h·key) with the CPU's 8-lane dot order and sequential
//                      head sum, so scores are bit-identical; queries with ≤ K candidates skip scoring;
//                      (3) one block per query: radix select (4 × 8 bits) of the K-th largest score,
//                      then the pools above it plus the earliest pools equal to it, emitted in ascending
//                      order, expanded to tokens, the own tail appended, −1 padding; the tie flag and the
//                      selection hash (CPU's FNV-style fold) are computed there and downloaded.
//                      Score memory is bounded by processing queries in chunks of ≤ 64 MiB of scores.
//                      At GLM-5.3-Flash's widths (D = 128, ≤ 32 heads) steps (1)–(2) are one kernel and (3)
//                      keeps its keys in shared memory: cuda_indexer_select.cu, the same bits (the general
//                      kernels here stay for other shapes and as its A/B baseline, TS_IDX_FAST=0).
//
// Test: `twinspark-cli selftest --backend cuda --filter indexer` (engine/selftest/cases_attention.cpp).
// Benchmark: `twinspark-cli bench-device` (app/cli/bench_cuda_attention.cpp: select over 128k/kp pools).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/cuda_attention_common.cuh"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_indexer.cuh"

namespace ts {

namespace {

using namespace ts::cuda;
using idxsel::orderKey;
using idxsel::ScoreArgs;
using idxsel::TopArgs;

bool isPow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// Correctly rounded e^x in fp32 (the CPU calls glibc's expf, ≤ 0.502 ulp).
__device__ __forceinline__ float expRounded(float x) { return float(exp(double(x))); }

// --- indexerCacheWrite ----------------------------------------------------------------------------------

// One pool that completes in a call (a block of indexerPoolKernel), and one token a call leaves in its
// sequence's ring (a block of indexerRingKernel): the host's task lists, one upload for a whole batch.
struct PoolTask {
    float* ring;    // the sequence's tail ring [kp, 2, D] as it was before the call
    int32_t slot;   // pool slot of the store
    int32_t j;      // pool index within the sequence: members at positions j·kp ..
    int32_t pos0;   // the sequence's first position in this call
    int32_t row0;   // its first row in k / gate
};
struct RingTask {
    float* ring;    // the sequence's tail ring
    int32_t row;    // row of k / gate
    int32_t m;      // ring slot: (pos0 + t) % kp
};
static_assert(sizeof(PoolTask) == 24 && sizeof(RingTask) == 16, "task lists are uploaded as int32 words");

struct PoolArgs {
    const float* k;       // [T, D], every sequence's rows
    const float* gate;    // [T, D]
    const float* ape;     // [kp, D]
    uint8_t* store;       // [poolSlots, kb]
    const PoolTask* pools;  // [numPools]
    int64_t D, kp, kb;
    int fp8, hadamard;
    float hs;             // 1/sqrt(D), as the CPU's hadamard computes it
};

// grid numPools, block 128; shared key[D].
__global__ void __launch_bounds__(128) indexerPoolKernel(PoolArgs a) {
    extern __shared__ float key[];
    __shared__ float red[32];
    const PoolTask task = a.pools[blockIdx.x];
    const int64_t D = a.D, kp = a.kp, j = task.j, pos0 = task.pos0;
    const float* ring = task.ring;
    const float* kRows = a.k + int64_t(task.row0) * D;
    const float* gRows = a.gate + int64_t(task.row0) * D;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
        // Member m: (k, gate + ape) exactly as the CPU's ring holds them.
        auto member = [&](int64_t m, float& kv, float& gv) {
            const int64_t p = j * kp + m;
            if (p < pos0) {
                kv = ring[m * 2 * D + c];
                gv = ring[m * 2 * D + D + c];
            } else {
                kv = kRows[(p - pos0) * D + c];
                gv = gRows[(p - pos0) * D + c];
                if (a.fp8) {
                    kv = roundBf16(kv);
                    gv = roundBf16(gv);
                }
            }
            gv = __fadd_rn(gv, a.ape[m * D + c]);
        };
        float kv, gv, mx = -INFINITY;
        for (int64_t m = 0; m < kp; ++m) {
            member(m, kv, gv);
            mx = fmaxf(mx, gv);
        }
        float sum = 0.0f;
        for (int64_t m = 0; m < kp; ++m) {
            member(m, kv, gv);
            sum = __fadd_rn(sum, expRounded(__fsub_rn(gv, mx)));
        }
        float acc = 0.0f;
        for (int64_t m = 0; m < kp; ++m) {
            member(m, kv, gv);
            const float prob = __fdiv_rn(expRounded(__fsub_rn(gv, mx)), sum);
            acc = __fadd_rn(acc, __fmul_rn(prob, kv));
        }
        key[c] = acc;
    }
    __syncthreads();
    uint8_t* out = a.store + int64_t(task.slot) * a.kb;
    if (!a.fp8) {
        for (int64_t c = threadIdx.x; c < D; c += blockDim.x) storeF32Bytes(out + 4 * c, key[c]);
        return;
    }
    if (a.hadamard) blockHadamard(key, int(D), a.hs);  // rotation: exact scores unchanged, fp8 error spread
    const float s = blockQuantPow2(key, int(D), out, nullptr, red);
    if (threadIdx.x == 0) storeF32Bytes(out + D, s);
}

// grid = the ring tokens of the call (each sequence's last min(rows, kp)), block 128: (k, gate) into the slot.
__global__ void indexerRingKernel(const float* __restrict__ k, const float* __restrict__ gate, int64_t D, int fp8,
                                  const RingTask* __restrict__ tasks) {
    const RingTask task = tasks[blockIdx.x];
    float* dst = task.ring + int64_t(task.m) * 2 * D;
    const int64_t t = task.row;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) {
        float kv = k[t * D + c], gv = gate[t * D + c];
        if (fp8) {
            kv = roundBf16(kv);
            gv = roundBf16(gv);
        }
        dst[c] = kv;
        dst[D + c] = gv;
    }
}

// --- indexerSelect ------------------------------------------------------------------------------------

// grid T·H, block 128: q row → (Hadamard) → e4m3 with a power-of-two scale; qf = the e4m3 values, qs = scale.
__global__ void __launch_bounds__(128) indexerQuantQKernel(const float* __restrict__ q, int64_t D, int hadamard,
                                                           float hs, float* __restrict__ qf, float* __restrict__ qs) {
    extern __shared__ float x[];
    __shared__ float red[32];
    const int64_t th = blockIdx.x;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) x[i] = q[th * D + i];
    __syncthreads();
    if (hadamard) blockHadamard(x, int(D), hs);
    const float s = blockQuantPow2(x, int(D), nullptr, qf + th * D, red);
    if (threadIdx.x == 0) qs[th] = s;
}


// grid (ceil(ncMax / (8·poolsPerWarp)), queries of the chunk), block 256.
// Shared: q[H][Dp] | key[8][D] | qScale[H] | w[H].
__global__ void __launch_bounds__(256) indexerScoreKernel(ScoreArgs a) {
    extern __shared__ float sm[];
    const int64_t H = a.H, D = a.D, Dp = a.Dp;
    float* qsh = sm;
    float* ksh = qsh + H * Dp;
    float* qsc = ksh + 8 * D;
    float* wsh = qsc + H;
    const int64_t t = a.t0 + blockIdx.y, p = a.qPos[t], nc = (p + 1) / a.kp;
    const int64_t j0 = int64_t(blockIdx.x) * 8 * a.poolsPerWarp;
    if (nc <= a.K || j0 >= nc) return;  // all candidates are taken without scores / nothing here

    for (int64_t i = threadIdx.x; i < H * D; i += blockDim.x) qsh[(i / D) * Dp + i % D] = a.q[t * H * D + i];
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
        qsc[h] = a.fp8 ? a.qScale[t * H + h] : 1.0f;
        wsh[h] = a.w[t * H + h];
    }
    __syncthreads();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, l = lane & 7, hq = lane >> 3;
    const int32_t* blocks = a.blocks + a.qTable[t];
    float* kw = ksh + warp * D;
    for (int64_t jj = 0; jj < a.poolsPerWarp; ++jj) {
        const int64_t j = j0 + warp * a.poolsPerWarp + jj;
        if (j >= nc) break;  // uniform over the warp
        const int64_t tok = j * a.kp;
        const int64_t slot = (int64_t(blocks[tok / a.blockSize]) * a.blockSize + tok % a.blockSize) / a.kp;
        const uint8_t* e = a.store + slot * a.kb;
        float ks = 1.0f;
        if (a.fp8) {
            for (int64_t i = lane; i < D; i += 32) kw[i] = fp8ToF32(e[i]);
            ks = loadF32Bytes(e + D);
        } else if (a.aligned4) {
            for (int64_t i = lane; i < D; i += 32) kw[i] = reinterpret_cast<const float*>(e)[i];
        } else {
            for (int64_t i = lane; i < D; i += 32) kw[i] = loadF32Bytes(e + 4 * i);
        }
        __syncwarp();
        // Lane (hq, l) holds the CPU's accumulator l of head hb + hq; the 8 lanes of a head combine as
        // ((a0+a4)+(a1+a5)) + ((a2+a6)+(a3+a7)); lane 0 adds the heads' terms in head order.
        float total = 0.0f;
        for (int64_t hb = 0; hb < H; hb += 4) {
            const int64_t h = hb + hq;
            float acc = 0.0f;
            if (h < H) {
                const float* qh = qsh + h * Dp;
                for (int64_t i = l; i < D; i += 8) acc = __fadd_rn(acc, __fmul_rn(qh[i], kw[i]));
            }
            acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, 4));
            acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, 1));
            acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, 2));
            float term = 0.0f;
            if (h < H) {
                const float qk = a.fp8 ? __fmul_rn(acc, __fmul_rn(qsc[h], ks)) : acc;
                term = __fmul_rn(wsh[h], fmaxf(0.0f, __fmul_rn(a.softmaxScale, qk)));
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const float tv = __shfl_sync(0xffffffffu, term, u * 8);
                if (hb + u < H) total = __fadd_rn(total, tv);
            }
        }
        if (lane == 0) a.scores[(t - a.t0) * a.ncMax + j] = total;
        __syncwarp();  // kw is rewritten by the next pool
    }
}

constexpr int kTopThreads = 512;

// grid = queries of the chunk, block 512.
__global__ void __launch_bounds__(kTopThreads) indexerTopKernel(TopArgs a) {
    __shared__ int hist[256];
    __shared__ int scan[33];
    __shared__ int sDigit, sNeed, sEq;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t t = a.t0 + blockIdx.x, p = a.qPos[t], nc = (p + 1) / a.kp, kp = a.kp;
    int32_t* out = a.idx + t * a.width;
    int64_t chosen;
    int tied = 0;
    if (nc <= a.K) {
        chosen = nc;
        for (int64_t i = threadIdx.x; i < nc * kp; i += blockDim.x) out[i] = int32_t(i);
    } else {
        chosen = a.K;
        const float* sc = a.scores + int64_t(blockIdx.x) * a.ncMax;
        // Radix select of the K-th largest key, 8 bits at a time from the top.
        uint32_t prefix = 0, mask = 0;
        int need = int(a.K), eqCount = 0;
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
            __syncthreads();
            for (int64_t base = 0; base < nc; base += blockDim.x) {
                const int64_t j = base + threadIdx.x;
                int digit = 256;  // no bin
                if (j < nc) {
                    const uint32_t u = orderKey(sc[j]);
                    if ((u & mask) == prefix) digit = int((u >> shift) & 255u);
                }
                const unsigned peers = __match_any_sync(0xffffffffu, digit);
                if (digit < 256 && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
            }
            __syncthreads();
            if (warp == 0) {
                int cnt[8], s = 0;
#pragma unroll
                for (int b = 0; b < 8; ++b) s += (cnt[b] = hist[255 - lane * 8 - b]);
                int incl = s;
                for (int o = 1; o < 32; o <<= 1) {
                    const int v = __shfl_up_sync(0xffffffffu, incl, o);
                    if (lane >= o) incl += v;
                }
                int cum = incl - s;
                if (cum < need && need <= incl) {
                    for (int b = 0; b < 8; ++b) {
                        if (cum + cnt[b] >= need) {
                            sDigit = 255 - lane * 8 - b;
                            sNeed = need - cum;
                            sEq = cnt[b];
                            break;
                        }
                        cum += cnt[b];
                    }
                }
            }
            __syncthreads();
            prefix |= uint32_t(sDigit) << shift;
            mask |= 255u << shift;
            need = sNeed;
            eqCount = sEq;
        }
        // prefix = the K-th largest key; `need` of its copies are taken, the earliest pools first. Each
        // thread owns a contiguous run of pools, so two block scans give every pool its rank.
        tied = eqCount > need;
        const int64_t per = (nc + blockDim.x - 1) / blockDim.x, j0 = imin64(nc, per * threadIdx.x),
                      j1 = imin64(nc, j0 + per);
        int eqHere = 0;
        for (int64_t j = j0; j < j1; ++j) eqHere += orderKey(sc[j]) == prefix;
        int total;
        int eqBefore = blockScanInt(eqHere, scan, total);
        int selHere = 0;
        for (int64_t j = j0, e = eqBefore; j < j1; ++j) {
            const uint32_t u = orderKey(sc[j]);
            selHere += u > prefix || (u == prefix && e++ < need);
        }
        int r = blockScanInt(selHere, scan, total);
        for (int64_t j = j0, e = eqBefore; j < j1; ++j) {
            const uint32_t u = orderKey(sc[j]);
            if (u > prefix || (u == prefix && e++ < need)) {
                for (int64_t m = 0; m < kp; ++m) out[int64_t(r) * kp + m] = int32_t(j * kp + m);
                ++r;
            }
        }
    }
    // The query's own incomplete pool, then −1.
    const int64_t tail0 = chosen * kp, nTail = p + 1 - nc * kp;
    for (int64_t i = threadIdx.x; i < nTail; i += blockDim.x) out[tail0 + i] = int32_t(nc * kp + i);
    for (int64_t i = tail0 + nTail + threadIdx.x; i < a.width; i += blockDim.x) out[i] = -1;
    if (a.hashes) {
        __syncthreads();  // the chosen pools are in `out`
        if (threadIdx.x == 0) {
            uint64_t hsh = a.hashes[t] * 0x100000001b3ull + uint64_t(nc);
            for (int64_t r = 0; r < chosen; ++r) {
                const int64_t j = nc <= a.K ? r : out[r * kp] / kp;
                hsh = (hsh ^ uint64_t(j + 1)) * 0x100000001b3ull;
            }
            a.hashes[t] = hsh;
        }
    }
    if (threadIdx.x == 0) a.ties[t] = tied;
}

void setSharedLimit(const void* kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        TS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace

void CudaBackend::indexerCacheWrite(const Buffer& k, const Buffer& gate, int64_t T, int64_t D, int64_t kp,
                                    const Buffer& ape, KvCacheDtype dt, const Buffer& tail, const Buffer& poolStore,
                                    const PageTable& pages, int64_t pos0) {
    const SeqRows one{pages, pos0, T};
    indexerCacheWriteBatch(k, gate, &one, 1, D, kp, ape, dt, &tail, poolStore);
}

void CudaBackend::indexerCacheWriteBatch(const Buffer& k, const Buffer& gate, const SeqRows* seqs, int64_t nSeqs,
                                         int64_t D, int64_t kp, const Buffer& ape, KvCacheDtype dt, const Buffer* tails,
                                         const Buffer& poolStore) {
    const int64_t T = seqRowsTotal(seqs, nSeqs, "indexerCacheWrite");
    GraphOp op(*this, false, "indexerCacheWrite", {gk(T), gk(D)});
    TS_CHECK(nSeqs == 0 || tails, "indexerCacheWrite: no tail rings given");
    const size_t kb = indexerKeyBytes(dt, D);
    if (T <= 0 || D <= 0) return;
    TS_CHECK(kp > 0, "indexerCacheWrite: index_kpool must be positive");
    TS_CHECK(size_t(D) * 4 <= 48 * 1024, "indexerCacheWrite: key dimension too large");
    TS_CHECK(T <= int64_t(0x7fffffff), "indexerCacheWrite: too many rows");
    // Both lists, pools first, in one upload; every check before anything is enqueued.
    std::vector<PoolTask> pools;
    std::vector<RingTask> ring;
    std::vector<const float*> rings;
    int64_t r0 = 0;
    for (int64_t s = 0; s < nSeqs; ++s) {
        const SeqRows& sq = seqs[s];
        const int64_t n = sq.rows, pos0 = sq.pos0;
        if (n <= 0) continue;
        const PageTable& pages = sq.pages;
        TS_CHECK(pages.blockSize > 0 && pages.blockSize % kp == 0,
                 "indexerCacheWrite: block size must be a multiple of index_kpool");
        TS_CHECK(tails[s].size() >= size_t(kp * 2 * D) * 4, "indexerCacheWrite: tail ring too small");
        TS_CHECK(pos0 + n <= int64_t(0x7fffffff), "indexerCacheWrite: positions beyond int32");
        float* rp = tails[s].f32();
        rings.push_back(rp);
        for (int64_t j = pos0 / kp; j < (pos0 + n) / kp; ++j) {
            TS_CHECK(j * kp < pages.capacity(), "indexerCacheWrite: pool beyond the sequence's pages");
            const int64_t poolSlot = pages.slot(j * kp) / kp;
            TS_CHECK(poolSlot >= 0 && size_t(poolSlot + 1) * kb <= poolStore.size(),
                     "indexerCacheWrite: pool slot outside the store");
            pools.push_back(PoolTask{rp, int32_t(poolSlot), int32_t(j), int32_t(pos0), int32_t(r0)});
        }
        // The ring slots this call leaves behind (written after the pools have read the ring).
        for (int64_t t = n - std::min(n, kp); t < n; ++t)
            ring.push_back(RingTask{rp, int32_t(r0 + t), int32_t((pos0 + t) % kp)});
        r0 += n;
    }
    // Two sequences writing one ring would race (and mean a caller's bookkeeping error).
    std::sort(rings.begin(), rings.end());
    TS_CHECK(std::adjacent_find(rings.begin(), rings.end()) == rings.end(),
             "indexerCacheWrite: two sequences share one tail ring");
    std::vector<int32_t> words((pools.size() * sizeof(PoolTask) + ring.size() * sizeof(RingTask)) / 4);
    std::memcpy(words.data(), pools.data(), pools.size() * sizeof(PoolTask));
    std::memcpy(words.data() + pools.size() * sizeof(PoolTask) / 4, ring.data(), ring.size() * sizeof(RingTask));
    const int32_t* d = uploadInts(kScratchSel, words.data(), int64_t(words.size()));
    cudaStream_t st = stream();
    if (!pools.empty()) {
        PoolArgs a{};
        a.k = k.f32();
        a.gate = gate.f32();
        a.ape = ape.f32();
        a.store = poolStore.bytes();
        a.pools = reinterpret_cast<const PoolTask*>(d);
        a.D = D;
        a.kp = kp;
        a.kb = int64_t(kb);
        a.fp8 = dt == KvCacheDtype::Fp8;
        a.hadamard = isPow2(D);
        a.hs = 1.0f / std::sqrt(float(D));  // = cpu::hadamard's scale
        cuda::launchPlain(indexerPoolKernel, unsigned(pools.size()), 128, size_t(D) * 4, st, a);
    }
    cuda::launchPlain(indexerRingKernel, unsigned(ring.size()), 128, 0, st, k.f32(), gate.f32(), D,
                      dt == KvCacheDtype::Fp8,
                      reinterpret_cast<const RingTask*>(d + pools.size() * sizeof(PoolTask) / 4));
}

void CudaBackend::indexerSelect(const Buffer& q, const Buffer& w, int64_t T, int64_t H, int64_t D, int64_t kp,
                                int64_t topk, KvCacheDtype dt, const Buffer& poolStore, const PageTable& pages,
                                int64_t pos0, const Buffer& idx, IndexerStats* stats) {
    const SeqRows one{pages, pos0, T};
    indexerSelectBatch(q, w, &one, 1, H, D, kp, topk, dt, poolStore, idx, &stats);
}

void CudaBackend::indexerSelectBatch(const Buffer& q, const Buffer& w, const SeqRows* seqs, int64_t nSeqs, int64_t H,
                                     int64_t D, int64_t kp, int64_t topk, KvCacheDtype dt, const Buffer& poolStore,
                                     const Buffer& idx, IndexerStats* const* stats) {
    const size_t kb = indexerKeyBytes(dt, D);
    TS_CHECK(kp > 0 && topk >= kp, "indexerSelect: index_topk must be at least index_kpool");
    const int64_t K = topk / kp, width = topk + kp - 1;
    const int64_t T = seqRowsTotal(seqs, nSeqs, "indexerSelect", true);
    int64_t ncMax = 0;  // complete pools visible to the latest query
    for (int64_t s = 0; s < nSeqs; ++s)
        if (seqs[s].rows > 0) ncMax = std::max(ncMax, (seqs[s].pos0 + seqs[s].rows) / kp);
    GraphOp op(*this, false, "indexerSelect", {gk(T), gk(H)});
    if (T <= 0) return;
    TS_CHECK(T <= 0x7fffffff && H > 0 && D > 0, "indexerSelect: bad shape");
    const bool fp8 = dt == KvCacheDtype::Fp8;
    const int64_t blockSize = seqs[0].pages.blockSize;
    // Hashes when any sequence asks (its selectionHash sized to its rows); the others' rows hash from 0, unread.
    bool wantHash = false, wantStats = false;
    for (int64_t s = 0; s < nSeqs; ++s)
        if (stats && stats[s]) {
            wantStats = true;
            wantHash = wantHash || (seqs[s].rows > 0 && stats[s]->selectionHash.size() == size_t(seqs[s].rows));
        }
    cudaStream_t st = stream();

    // The fast path at GLM-5.3-Flash's widths (cuda_indexer_select.cu): its score kernel quantises q itself.
    const bool fast = idxsel::fastSelect();
    const auto addr = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
    const bool fastScore =
        fast && idxsel::fastScoreShape(H, D, kp, blockSize,
                                       addr(q.f32()) % 16 == 0 && addr(poolStore.bytes()) % (fp8 ? 4 : 16) == 0);
    const bool fastTop = fast && idxsel::fastTopFits(std::max<int64_t>(ncMax, 1), K, size_t(props().sharedMemPerBlockOptin));
    const float* dq = q.f32();
    const float* dqs = nullptr;
    if (fp8 && ncMax > K && !fastScore) {
        auto* mem = static_cast<float*>(scratch(kScratchA, size_t(T * H * D + T * H) * 4));
        TS_CHECK(size_t(D) * 4 <= 48 * 1024, "indexerSelect: key dimension too large");
        cuda::launchPlain(indexerQuantQKernel, unsigned(T * H), 128, size_t(D) * 4, st, q.f32(), D, isPow2(D),
                          1.0f / std::sqrt(float(D)), mem, mem + T * H * D);
        dq = mem;
        dqs = mem + T * H * D;
    }
    // Per-query outputs: ties [T] int32 and hashes [T] uint64 (8-byte aligned first).
    auto* flagMem = static_cast<uint8_t*>(scratch(kScratchC, size_t(T) * 12));
    auto* hashes = reinterpret_cast<uint64_t*>(flagMem);
    auto* ties = reinterpret_cast<int32_t*>(flagMem + size_t(T) * 8);
    std::vector<uint64_t> hostHash;
    if (wantHash) {
        hostHash.assign(size_t(T), 0);
        for (int64_t s = 0, r0 = 0; s < nSeqs; r0 += seqs[s].rows, ++s)
            if (stats[s] && seqs[s].rows > 0 && stats[s]->selectionHash.size() == size_t(seqs[s].rows))
                std::copy(stats[s]->selectionHash.begin(), stats[s]->selectionHash.end(), hostHash.begin() + r0);
        TS_CUDA_CHECK(cudaMemcpyAsync(hashes, hostHash.data(), size_t(T) * 8, cudaMemcpyHostToDevice, st));
    }

    // The device reads pool slots through the page tables unchecked: bound them here once (the blocks holding
    // each sequence's pools 0..nc−1), so a bad table is an error, not a stray read.
    for (int64_t s = 0; s < nSeqs; ++s) {
        const SeqRows& sq = seqs[s];
        const int64_t nc = sq.rows > 0 ? (sq.pos0 + sq.rows) / kp : 0;
        if (nc <= K) continue;
        TS_CHECK((nc - 1) * kp < sq.pages.capacity(), "indexerSelect: pools beyond the sequence's pages");
        int64_t maxBlock = 0;
        for (int64_t b = 0; b <= (nc - 1) * kp / blockSize; ++b) maxBlock = std::max<int64_t>(maxBlock, sq.pages.blocks[b]);
        TS_CHECK(size_t((maxBlock + 1) * blockSize / kp) * kb <= poolStore.size(), "indexerSelect: pool slot outside the store");
    }
    const DeviceQueries dqr = deviceQueries(seqs, nSeqs, T);
    ScoreArgs sa{};
    sa.q = dq;
    sa.qScale = dqs;
    sa.w = w.f32();
    sa.store = poolStore.bytes();
    sa.kb = int64_t(kb);
    sa.fp8 = fp8;
    sa.aligned4 = reinterpret_cast<uintptr_t>(poolStore.bytes()) % 4 == 0;
    sa.blocks = dqr.blocks;
    sa.qPos = dqr.qPos;
    sa.qTable = dqr.qTable;
    sa.blockSize = blockSize;
    sa.H = H;
    sa.D = D;
    sa.Dp = (D + 31) / 32 * 32 + 8;  // 4 heads' rows land 8 banks apart
    sa.kp = kp;
    sa.K = K;
    sa.ncMax = std::max<int64_t>(ncMax, 1);
    sa.softmaxScale = 1.0f / std::sqrt(float(D));  // = the CPU's softmaxScale
    sa.hs = 1.0f / std::sqrt(float(D));            // = cpu::hadamard's scale
    const size_t scoreShmem = size_t(H * sa.Dp + 8 * D + 2 * H) * 4;
    if (!fastScore) {
        TS_CHECK(scoreShmem <= size_t(props().sharedMemPerBlockOptin), "indexerSelect: q too large for shared memory");
        setSharedLimit(reinterpret_cast<const void*>(indexerScoreKernel), scoreShmem);
    }

    // Queries in chunks whose score rows fit 64 MiB.
    const int64_t chunkT = std::clamp<int64_t>((int64_t(64) << 20) / (sa.ncMax * 4), 1, std::min<int64_t>(T, 65535));
    // Pools per warp: ≥ 4 (decode: many small blocks over the pools), more when many queries already fill
    // the device (prefill: each block loads its query's q once for a long run of pools).
    const int64_t sms = std::max(1, props().multiProcessorCount);
    if (fastScore) {
        sa.poolsPerWarp = idxsel::fastPoolsPerWarp(sa.ncMax, std::min(T, chunkT), sms);
    } else {
        const int64_t blocksPerQuery = std::max<int64_t>(1, 4 * sms / std::min(T, chunkT));
        sa.poolsPerWarp = std::max<int64_t>(4, (sa.ncMax + 8 * blocksPerQuery - 1) / (8 * blocksPerQuery));
    }
    float* scores = ncMax > K ? static_cast<float*>(scratch(kScratchB, size_t(chunkT * sa.ncMax) * 4)) : nullptr;
    sa.scores = scores;
    TopArgs ta{};
    ta.scores = scores;
    ta.qPos = dqr.qPos;
    ta.ncMax = sa.ncMax;
    ta.kp = kp;
    ta.K = K;
    ta.width = width;
    ta.idx = idx.i32();
    ta.ties = ties;
    ta.hashes = wantHash ? hashes : nullptr;
    for (int64_t t0 = 0; t0 < T; t0 += chunkT) {
        const int64_t n = std::min(chunkT, T - t0);
        if (ncMax > K) {
            sa.t0 = t0;
            if (fastScore) {
                idxsel::launchScore128(sa, n, st);
            } else {
                const dim3 grid(unsigned((ncMax + 8 * sa.poolsPerWarp - 1) / (8 * sa.poolsPerWarp)), unsigned(n));
                cuda::launchPlain(indexerScoreKernel, grid, 256, scoreShmem, st, sa);
            }
        }
        ta.t0 = t0;
        if (fastTop) {
            idxsel::launchTopSmem(ta, n, st);
        } else {
            cuda::launchPlain(indexerTopKernel, unsigned(n), kTopThreads, 0, st, ta);
        }
    }

    if (wantStats) {
        std::vector<int32_t> tied(static_cast<size_t>(T));
        TS_CUDA_CHECK(cudaMemcpyAsync(tied.data(), ties, size_t(T) * 4, cudaMemcpyDeviceToHost, st));
        if (wantHash) TS_CUDA_CHECK(cudaMemcpyAsync(hostHash.data(), hashes, size_t(T) * 8, cudaMemcpyDeviceToHost, st));
        TS_CUDA_CHECK(cudaStreamSynchronize(st));
        for (int64_t s = 0, r0 = 0; s < nSeqs; r0 += seqs[s].rows, ++s) {
            IndexerStats* out = stats[s];
            if (!out) continue;
            for (int64_t t = 0; t < seqs[s].rows; ++t)
                if (tied[size_t(r0 + t)]) {
                    if (out->firstTiedQuery < 0) out->firstTiedQuery = t;
                    ++out->tiedQueries;
                }
            if (wantHash && seqs[s].rows > 0 && out->selectionHash.size() == size_t(seqs[s].rows))
                std::copy(hostHash.begin() + r0, hostHash.begin() + r0 + seqs[s].rows, out->selectionHash.begin());
        }
    }
}

}  // namespace ts
