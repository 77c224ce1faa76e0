// `plan`: how a KV budget is spent for a config, without loading weights, per rank. Two accountings are
// printed: what TwinSpark's KV pool allocates, and what the recipe's vLLM reports for the same budget
// ("GPU KV cache size"). See docs/PERFORMANCE.md "KV pool plan" for both and the comparison with the recipe.
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "runtime/engine.h"

namespace ts::cli {

namespace {
double gib(int64_t b) { return double(b) / double(int64_t(1) << 30); }
double mib(int64_t b) { return double(b) / 1048576.0; }

VllmDrafterLayout drafterLayout(const std::string& s) {
    if (s == "standalone") return VllmDrafterLayout::Standalone;
    if (s == "slot-share") return VllmDrafterLayout::PaddedSlotShare;
    if (s == "none") return VllmDrafterLayout::None;
    fail(ErrorKind::InvalidArgument, "--drafter must be standalone, slot-share or none");
}

const char* drafterName(VllmDrafterLayout d) {
    switch (d) {
    case VllmDrafterLayout::Standalone: return "standalone";
    case VllmDrafterLayout::PaddedSlotShare: return "slot-share";
    case VllmDrafterLayout::None: break;
    }
    return "none";
}

nlohmann::json vllmJson(const VllmKvPlan& v, VllmDrafterLayout d) {
    nlohmann::json groups = nlohmann::json::array();
    for (const VllmGroup& g : v.groups)
        groups.push_back({{"name", g.name}, {"layers", g.layers}, {"block_size", g.blockSize},
                          {"blocks_per_request", g.blocksPerRequest}});
    return {{"drafter", drafterName(d)},           {"kda_state_page_bytes", v.kdaStatePageBytes},
            {"block_size", v.blockSize},           {"mla_page_bytes", v.mlaPageBytes},
            {"indexer_page_bytes", v.indexerPageBytes}, {"draft_bytes_per_block", v.draftBytesPerBlock},
            {"bytes_per_block", v.bytesPerBlock},  {"blocks", v.numBlocks},
            {"blocks_per_request", v.blocksPerRequest}, {"max_concurrency", v.maxConcurrency},
            {"tokens", v.tokens},                  {"groups", groups}};
}
}  // namespace

int cmdPlan(const Args& args) {
    if (args.help()) {
        std::printf(
            "twinspark-cli plan --config config.json [--kv-budget-gib G] [--max-model-len N] [--max-num-seqs N]\n"
            "    [--snapshot-slots N] [--kv-cache-dtype fp8|fp32] [--tp N] [--max-num-batched-tokens N]\n"
            "    [--num-spec-tokens N] [--drafter standalone|slot-share|none] [--draft-tp N] [--json FILE]\n"
            "Prints how the KV budget of one rank is spent, twice:\n"
            "  TwinSpark: the paged token pool (fp8_ds_mla latents and pooled indexer keys of every DSA layer),\n"
            "    the KDA state slots of running requests and the prefix-cache snapshots;\n"
            "  vLLM as the recipe runs it: its hybrid KV cache manager (one block pool shared by MLA, indexer,\n"
            "    KDA states and the DFlash2 drafter), and the \"GPU KV cache size\" it would log.\n"
            "Defaults are the recipe's: 15.67 GiB (vLLM's available KV memory at GPU_MEM_UTIL 0.87), 900000,\n"
            "4 sequences, 1024 batched tokens, DFlash2 with 7 speculative tokens, fp8, TP 2; 8 snapshots.\n"
            "--drafter picks the recipe's drafter KV layout: standalone (when it logged 982,612 tokens) or\n"
            "slot-share (its overlay since); both are printed, the chosen one in full.\n");
        return 0;
    }
    args.accept({"config", "kv-budget-gib", "max-model-len", "max-num-seqs", "snapshot-slots", "kv-cache-dtype", "tp",
                 "max-num-batched-tokens", "num-spec-tokens", "drafter", "draft-tp", "json"});
    const std::string path = args.require("config");
    std::ifstream f(path);
    if (!f) fail(ErrorKind::NotFound, "cannot open " + path);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(f);
    } catch (const nlohmann::json::exception& e) {
        fail(ErrorKind::InvalidFile, path + ": not valid JSON: " + e.what());
    }
    const ModelConfig mc = parseModelConfig(j, path);
    EngineConfig ec;
    // The recipe's vLLM reports this as its available KV cache memory at GPU_MEM_UTIL 0.87. It is what is
    // left of 0.87 × the GB10's memory after weights, the drafter, the profiled activation peak and the
    // CUDA-graph estimate; the recipe does not publish those terms, so the result is taken as the input.
    double budgetGib = 15.67;
    if (auto v = args.get("kv-budget-gib")) {
        try {
            budgetGib = std::stod(*v);
        } catch (...) {
            budgetGib = -1;
        }
        if (!(budgetGib > 0 && budgetGib < 65536)) fail(ErrorKind::InvalidArgument, "--kv-budget-gib must be a positive number");
    }
    ec.kvBudgetBytes = int64_t(budgetGib * double(int64_t(1) << 30));
    ec.maxModelLen = args.getInt("max-model-len", 900000, 2, int64_t(1) << 40);
    ec.maxNumSeqs = int32_t(args.getInt("max-num-seqs", 4, 1, 4096));
    ec.maxNumBatchedTokens = args.getInt("max-num-batched-tokens", 1024, 1, int64_t(1) << 30);
    ec.snapshotSlots = int32_t(args.getInt("snapshot-slots", 8, 0, 4096));
    const int32_t tp = int32_t(args.getInt("tp", 2, 1, 8));
    ec.kvDtype = parseKvCacheDtype(args.get("kv-cache-dtype").value_or("fp8"));  // serve's rule
    if (mc.text.linear_num_heads % tp != 0)
        fail(ErrorKind::InvalidArgument, "--tp " + std::to_string(tp) + " does not divide linear_num_heads");

    // ---- TwinSpark: what this engine allocates on one rank.
    const KvMemory mem = KvMemory::of(mc.text, ec.kvDtype, mc.text.num_nextn_predict_layers > 0, tp);
    KvPlan p;
    p.memory = mem;
    p.budgetBytes = ec.kvBudgetBytes;
    p.stateBytes = int64_t(ec.maxNumSeqs) * mem.bytesPerStateSlot;
    p.snapshotBytes = int64_t(ec.snapshotSlots) * mem.bytesPerSnapshot;
    const int64_t left = p.budgetBytes - p.stateBytes - p.snapshotBytes;
    p.numBlocks = left > 0 ? left / (int64_t(ec.blockSize) * mem.bytesPerToken) : 0;
    p.tokens = p.numBlocks * ec.blockSize;
    p.fullLengthRequests = double(p.tokens) / double(ec.maxModelLen);

    // ---- vLLM as the recipe runs it, for the same budget.
    VllmPlanInputs vin;
    vin.availableBytes = ec.kvBudgetBytes;
    vin.maxModelLen = ec.maxModelLen;
    vin.maxNumBatchedTokens = ec.maxNumBatchedTokens;
    vin.tp = tp;
    vin.numSpeculativeTokens = int32_t(args.getInt("num-spec-tokens", 7, 0, 64));
    vin.draftTp = int32_t(args.getInt("draft-tp", 1, 1, 8));
    vin.drafter = drafterLayout(args.get("drafter").value_or("standalone"));
    const VllmKvPlan v = VllmKvPlan::of(mc.text, vin);
    // The other drafter layout, for the one-line comparison (slot-share is impossible with more drafter
    // layers than MLA tensors, as in small test models: then the line says so).
    VllmPlanInputs other = vin;
    other.drafter = vin.drafter == VllmDrafterLayout::PaddedSlotShare ? VllmDrafterLayout::Standalone
                                                                      : VllmDrafterLayout::PaddedSlotShare;
    std::optional<VllmKvPlan> vo;
    std::string voError;
    try {
        vo = VllmKvPlan::of(mc.text, other);
    } catch (const Error& e) {
        voError = e.what();
    }

    std::printf("config: %s (%d layers: %d DSA-MLA%s, %d KDA), kv-cache-dtype %s, TP %d, KV budget %.2f GiB per rank\n",
                path.c_str(), mc.text.num_hidden_layers, mc.text.numDsaLayers(),
                mc.text.num_nextn_predict_layers > 0 ? " + 1 MTP" : "", mc.text.numLinearLayers(),
                ec.kvDtype == KvCacheDtype::Fp32 ? "fp32" : "fp8", tp,
                gib(p.budgetBytes));
    std::printf("\nTwinSpark (what this engine allocates, per rank):\n");
    std::printf("  per token (every rank): %lld B = %lld B MLA latent (%d layers x %zu B) + %lld B pooled indexer keys\n",
                (long long)mem.bytesPerToken, (long long)mem.latentBytesPerToken, mem.dsaLayers,
                mlaCacheEntryBytes(ec.kvDtype, mc.text.kv_lora_rank), (long long)(mem.bytesPerToken - mem.latentBytesPerToken));
    std::printf("  per running request (this rank): %.1f MiB KDA states + indexer tails; x %d slots = %.2f GiB\n",
                mib(mem.bytesPerStateSlot), ec.maxNumSeqs, gib(p.stateBytes));
    std::printf("  prefix-cache snapshots: %d x %.1f MiB = %.2f GiB\n", ec.snapshotSlots, mib(mem.bytesPerSnapshot),
                gib(p.snapshotBytes));
    std::printf("  -> %lld blocks of %d = %lld tokens = %.2fx one %lld-token request\n", (long long)p.numBlocks,
                ec.blockSize, (long long)p.tokens, p.fullLengthRequests, (long long)ec.maxModelLen);

    std::printf("\nvLLM as the recipe runs it (hybrid KV cache manager, drafter %s; docs/PERFORMANCE.md):\n",
                drafterName(vin.drafter));
    if (v.kdaLayers > 0)
        std::printf("  KDA state page: %lld B per layer = %lld B conv (bf16, %d spec tokens) + %lld B recurrent (fp32), "
                    "%d of %d heads\n",
                    (long long)v.kdaStatePageBytes, (long long)v.kdaConvBytes, vin.numSpeculativeTokens,
                    (long long)v.kdaRecurrentBytes, mc.text.linear_num_heads / tp, mc.text.linear_num_heads);
    std::printf("  block: %lld tokens = %lld x ceil(%lld B / (%lld x %lld B MLA per token))\n", (long long)v.blockSize,
                (long long)v.alignment, (long long)v.kdaStatePageBytes, (long long)v.alignment,
                (long long)v.mlaBytesPerToken);
    std::printf("  pool block: %lld B = %d x %lld B MLA + %d x %lld B indexer", (long long)v.bytesPerBlock, v.dsaLayers,
                (long long)v.mlaPageBytes, v.indexerLayers, (long long)v.indexerPageBytes);
    if (v.draftBytesPerBlock > 0)
        std::printf(" + %lld B drafter (%d layers x %lld tokens x %lld B)", (long long)v.draftBytesPerBlock,
                    vin.draftLayers, (long long)v.draftBlockSize, (long long)v.draftBytesPerToken);
    std::printf("\n  blocks: %.2f GiB / %lld B = %lld\n", gib(vin.availableBytes), (long long)v.bytesPerBlock,
                (long long)v.numBlocks);
    std::printf("  per %lld-token request: %lld block ids =", (long long)ec.maxModelLen, (long long)v.blocksPerRequest);
    bool first = true, kdaPrinted = false;
    for (const VllmGroup& g : v.groups) {
        const bool kda = g.name.rfind("KDA", 0) == 0;
        if (kda && kdaPrinted) continue;  // the KDA groups all hold as many blocks: printed once, with their count
        kdaPrinted = kdaPrinted || kda;
        std::printf("%s ", first ? "" : " +");
        if (kda) std::printf("%d KDA groups x %lld", v.kdaGroups, (long long)g.blocksPerRequest);
        else std::printf("%lld %s", (long long)g.blocksPerRequest, g.name.c_str());
        first = false;
    }
    std::printf("\n  -> GPU KV cache size: %lld tokens, maximum concurrency %.2fx\n", (long long)v.tokens,
                v.maxConcurrency);
    if (vo)
        std::printf("  with the drafter %s: %lld tokens, %.2fx\n", drafterName(other.drafter), (long long)vo->tokens,
                    vo->maxConcurrency);
    else
        std::printf("  with the drafter %s: not possible (%s)\n", drafterName(other.drafter), voError.c_str());

    if (auto out = args.get("json")) {
        nlohmann::json r = {{"bytes_per_token", mem.bytesPerToken}, {"latent_bytes_per_token", mem.latentBytesPerToken},
                            {"state_slot_bytes", mem.bytesPerStateSlot}, {"snapshot_bytes", mem.bytesPerSnapshot},
                            {"budget_bytes", p.budgetBytes}, {"blocks", p.numBlocks}, {"tokens", p.tokens},
                            {"full_length_requests", p.fullLengthRequests}, {"tp", tp},
                            {"vllm", vllmJson(v, vin.drafter)}};
        if (vo) r["vllm_other_drafter"] = vllmJson(*vo, other.drafter);
        writeFileAtomically(*out, r.dump(2) + "\n");
    }
    if (p.numBlocks < 1) fail(ErrorKind::InvalidArgument, "the KV budget does not even hold the state slots");
    return 0;
}

}  // namespace ts::cli
