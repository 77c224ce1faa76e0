// `plan`: how a KV budget is spent for a config, without loading weights (the memory plan of the
// engine's KV pool, per rank). See docs/PERFORMANCE.md "KV pool plan" for the comparison with the recipe.
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "runtime/engine.h"

namespace ts::cli {

namespace {
double gib(int64_t b) { return double(b) / double(int64_t(1) << 30); }
}  // namespace

int cmdPlan(const Args& args) {
    if (args.help()) {
        std::printf("twinspark-cli plan --config config.json [--kv-budget-gib G] [--max-model-len N] [--max-num-seqs N]\n"
                    "    [--snapshot-slots N] [--kv-cache-dtype fp8|fp32] [--tp N] [--json FILE]\n"
                    "Prints how the KV budget of one rank is spent: the paged token pool (fp8_ds_mla latents and\n"
                    "pooled indexer keys of every DSA layer), the KDA state slots of running requests and the\n"
                    "prefix-cache snapshots. Defaults: the recipe's 15.67 GiB, 900000, 4, 8 snapshots, fp8, TP 2.\n");
        return 0;
    }
    args.accept({"config", "kv-budget-gib", "max-model-len", "max-num-seqs", "snapshot-slots", "kv-cache-dtype", "tp", "json"});
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
    ec.snapshotSlots = int32_t(args.getInt("snapshot-slots", 8, 0, 4096));
    const int64_t tp = args.getInt("tp", 2, 1, 8);
    const std::string dt = args.get("kv-cache-dtype").value_or("fp8");
    if (dt == "fp8") ec.kvDtype = KvCacheDtype::Fp8;
    else if (dt == "fp32") ec.kvDtype = KvCacheDtype::Fp32;
    else fail(ErrorKind::InvalidArgument, "--kv-cache-dtype must be fp8 or fp32");
    if (mc.text.linear_num_heads % tp != 0)
        fail(ErrorKind::InvalidArgument, "--tp " + std::to_string(tp) + " does not divide linear_num_heads");

    // Per rank: the MLA latent is one shared "head" and the indexer key one head, so every rank holds
    // them whole; KDA heads are split across ranks, so each rank holds 1/tp of every KDA state.
    KvMemory mem = KvMemory::of(mc.text, ec.kvDtype, mc.text.num_nextn_predict_layers > 0);
    mem.bytesPerSnapshot /= tp;
    const int64_t idxTail = mem.bytesPerStateSlot - mem.kdaLayers * (mem.bytesPerSnapshot * tp / std::max(1, mem.kdaLayers));
    mem.bytesPerStateSlot = mem.bytesPerSnapshot + idxTail;
    KvPlan p;
    p.memory = mem;
    p.budgetBytes = ec.kvBudgetBytes;
    p.stateBytes = int64_t(ec.maxNumSeqs) * mem.bytesPerStateSlot;
    p.snapshotBytes = int64_t(ec.snapshotSlots) * mem.bytesPerSnapshot;
    const int64_t left = p.budgetBytes - p.stateBytes - p.snapshotBytes;
    p.numBlocks = left > 0 ? left / (int64_t(ec.blockSize) * mem.bytesPerToken) : 0;
    p.tokens = p.numBlocks * ec.blockSize;
    p.fullLengthRequests = double(p.tokens) / double(ec.maxModelLen);

    std::printf("config: %s (%d layers: %d DSA-MLA%s, %d KDA), kv-cache-dtype %s, TP %lld\n", path.c_str(),
                mc.text.num_hidden_layers, mc.text.numDsaLayers(), mc.text.num_nextn_predict_layers > 0 ? " + 1 MTP" : "",
                mc.text.numLinearLayers(), dt.c_str(), (long long)tp);
    std::printf("per token (every rank): %lld B = %lld B MLA latent (%d layers x %zu B) + %lld B pooled indexer keys\n",
                (long long)mem.bytesPerToken, (long long)mem.latentBytesPerToken, mem.dsaLayers,
                mlaCacheEntryBytes(ec.kvDtype, mc.text.kv_lora_rank), (long long)(mem.bytesPerToken - mem.latentBytesPerToken));
    std::printf("per running request (this rank): %.1f MiB KDA states + indexer tails; x %d slots = %.2f GiB\n",
                double(mem.bytesPerStateSlot) / 1048576.0, ec.maxNumSeqs, gib(p.stateBytes));
    std::printf("prefix-cache snapshots: %d x %.1f MiB = %.2f GiB\n", ec.snapshotSlots,
                double(mem.bytesPerSnapshot) / 1048576.0, gib(p.snapshotBytes));
    std::printf("KV budget %.2f GiB -> %lld blocks of %d = %lld tokens = %.2fx one %lld-token request\n", gib(p.budgetBytes),
                (long long)p.numBlocks, ec.blockSize, (long long)p.tokens, p.fullLengthRequests, (long long)ec.maxModelLen);
    if (auto out = args.get("json")) {
        nlohmann::json r = {{"bytes_per_token", mem.bytesPerToken}, {"latent_bytes_per_token", mem.latentBytesPerToken},
                            {"state_slot_bytes", mem.bytesPerStateSlot}, {"snapshot_bytes", mem.bytesPerSnapshot},
                            {"budget_bytes", p.budgetBytes}, {"blocks", p.numBlocks}, {"tokens", p.tokens},
                            {"full_length_requests", p.fullLengthRequests}, {"tp", tp}};
        std::ofstream o(*out);
        o << r.dump(2) << "\n";
        if (!o) fail(ErrorKind::Io, "cannot write " + *out);
    }
    if (p.numBlocks < 1) fail(ErrorKind::InvalidArgument, "the KV budget does not even hold the state slots");
    return 0;
}

}  // namespace ts::cli
