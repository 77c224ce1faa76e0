// The KV memory plan: TwinSpark's own per-rank accounting, and the model of what the recipe's vLLM reports
// ("GPU KV cache size") for the same config and budget. The small configs below are made up so that every
// expected number can be worked out by hand (the working is in the comments); the real config is held
// against the recipe's published figures and against the arithmetic the recipe documents for its vLLM.
#include <QtTest>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cache/kv_pool.h"
#include "core/error.h"

using namespace ts;

namespace {

// The recipe (shared/REQUIREMENTS.md): "KV pool at those defaults: 982,612 tokens, fp8 MLA ≈ 15.67 GiB,
// ≈1.09× one full 900k request".
constexpr int64_t kRecipeTokens = 982612;
constexpr double kRecipeConcurrency = 1.09;
const int64_t kRecipeBudget = int64_t(15.67 * double(int64_t(1) << 30));

TextConfig realConfig() {
    std::ifstream f(TS_SOURCE_DIR "/tests/data/glm-5.3-flash.config.json");
    return parseModelConfig(nlohmann::json::parse(f), "glm-5.3-flash.config.json").text;
}

// Layers K D K D K (K = KDA, D = DSA with a full indexer): 2 DSA + 3 KDA. MLA latent 128 -> an fp8_ds_mla
// entry of 128 + 4 + 128 = 260 B; indexer key 128 -> 132 B per pool of 4 tokens; KDA 8 heads of 64, conv 4.
TextConfig smallConfig() {
    TextConfig c;
    c.num_hidden_layers = 5;
    c.layer_types = {LayerType::LinearAttention, LayerType::DeepseekSparseAttention, LayerType::LinearAttention,
                     LayerType::DeepseekSparseAttention, LayerType::LinearAttention};
    c.indexer_types.assign(5, IndexerType::Full);
    c.mlp_layer_types.assign(5, MlpLayerType::Dense);
    c.kv_lora_rank = 128;
    c.index_head_dim = 128;
    c.index_kpool = 4;
    c.linear_num_heads = 8;
    c.linear_head_dim = 64;
    c.linear_conv_kernel_dim = 4;
    return c;
}

VllmPlanInputs smallInputs() {
    VllmPlanInputs in;
    in.availableBytes = 10'000'000;
    in.maxModelLen = 4096;
    in.maxNumBatchedTokens = 512;
    in.tp = 2;
    in.numSpeculativeTokens = 1;
    in.drafter = VllmDrafterLayout::None;
    in.draftLayers = 1;
    in.draftKvHeads = 2;
    in.draftHeadDim = 16;
    in.draftSlidingWindow = 256;
    return in;
}

std::vector<int64_t> blocksPerGroup(const VllmKvPlan& p) {
    std::vector<int64_t> v;
    for (const VllmGroup& g : p.groups) v.push_back(g.blocksPerRequest);
    return v;
}

}  // namespace

class TestKvPlan : public QObject {
    Q_OBJECT

private slots:
    // ---- building blocks -------------------------------------------------------------------------
    void hybridBlockSizeRoundsUpToTheAlignment() {
        // 128 tokens x 260 B = 33,280 B per aligned step.
        QCOMPARE(vllmHybridBlockSize(66'560, 260, 128), int64_t(256));  // exactly two steps
        QCOMPARE(vllmHybridBlockSize(66'561, 260, 128), int64_t(384));  // one byte more needs a third
        QCOMPARE(vllmHybridBlockSize(0, 260, 128), int64_t(128));       // nothing to hold: one step
        QVERIFY_THROWS_EXCEPTION(Error, vllmHybridBlockSize(1, 0, 128));
    }

    void kdaStatePageIsShardedAndWidenedBySpecTokens() {
        const TextConfig c = smallConfig();
        // tp 2: 4 heads of 64 per rank. conv 3 x (3 + 1) x 256 x 2 B = 6,144; recurrent 4 x 64 x 64 x 4 = 65,536.
        QCOMPARE(vllmKdaStatePageBytes(c, 2, 1), int64_t(71'680));
        // tp 1, no speculation: conv 3 x 3 x 512 x 2 = 9,216; recurrent 8 x 64 x 64 x 4 = 131,072.
        QCOMPARE(vllmKdaStatePageBytes(c, 1, 0), int64_t(140'288));
        QVERIFY_THROWS_EXCEPTION(Error, vllmKdaStatePageBytes(c, 3, 0));  // 3 does not divide 8 heads
    }

    // ---- the vLLM model on the small config ------------------------------------------------------
    void smallConfigWithoutDrafter() {
        const VllmKvPlan p = VllmKvPlan::of(smallConfig(), smallInputs());
        QCOMPARE(p.dsaLayers, 2);
        QCOMPARE(p.indexerLayers, 2);
        QCOMPARE(p.kdaLayers, 3);
        QCOMPARE(p.mlaBytesPerToken, int64_t(260));
        QCOMPARE(p.indexerBytesPerState, int64_t(132));
        QCOMPARE(p.kdaStatePageBytes, int64_t(71'680));
        // lcm(64, 32 x 4) = 128; 71,680 / 33,280 = 2.15 -> 3 steps = 384 tokens.
        QCOMPARE(p.alignment, int64_t(128));
        QCOMPARE(p.blockSize, int64_t(384));
        QCOMPARE(p.mlaPageBytes, int64_t(99'840));    // 384 x 260
        QCOMPARE(p.indexerPageBytes, int64_t(12'672));  // 96 pools x 132
        QCOMPARE(p.bytesPerBlock, int64_t(225'024));  // 2 x 99,840 + 2 x 12,672
        QCOMPARE(p.numBlocks, int64_t(44));           // 44 x 225,024 = 9,901,056 <= 10^7 < 45 x ...
        // ceil(4096 / 384) = 11; tail 1; ceil(3 / 2) = 2 KDA groups (2 and 1 layers) of 2 + 1 = 3 blocks.
        QCOMPARE(p.kdaGroups, 2);
        QCOMPARE(blocksPerGroup(p), (std::vector<int64_t>{11, 1, 3, 3}));
        QCOMPARE(p.groups[2].layers, 2);
        QCOMPARE(p.groups[3].layers, 1);
        QCOMPARE(p.blocksPerRequest, int64_t(18));
        QCOMPARE(p.tokens, int64_t(10'012));  // 44 x 4096 / 18 = 10,012.4
        QVERIFY(std::fabs(p.maxConcurrency - 44.0 / 18.0) < 1e-12);
    }

    void smallConfigWithoutPrefixCaching() {
        VllmPlanInputs in = smallInputs();
        in.prefixCaching = false;  // one running state (+ the draft rows) per KDA group
        const VllmKvPlan p = VllmKvPlan::of(smallConfig(), in);
        QCOMPARE(blocksPerGroup(p), (std::vector<int64_t>{11, 1, 2, 2}));
        QCOMPARE(p.tokens, int64_t(11'264));  // 44 x 4096 / 16
    }

    void smallConfigStandaloneDrafter() {
        VllmPlanInputs in = smallInputs();
        in.drafter = VllmDrafterLayout::Standalone;
        const VllmKvPlan p = VllmKvPlan::of(smallConfig(), in);
        // 2 heads x 16 x (K, V) x bf16 = 128 B per token; 16-token pages of 2,048 B in every pool block.
        QCOMPARE(p.draftBytesPerToken, int64_t(128));
        QCOMPARE(p.draftBlockSize, int64_t(16));
        QCOMPARE(p.draftBytesPerBlock, int64_t(2'048));
        QCOMPARE(p.bytesPerBlock, int64_t(227'072));
        QCOMPARE(p.numBlocks, int64_t(44));  // 10^7 / 227,072 = 44.04
        // window 256 - 1 + 2 batches x 512 in flight = 1,279 tokens -> ceil(1279 / 16) + 1 = 81 block ids.
        QCOMPARE(blocksPerGroup(p), (std::vector<int64_t>{11, 1, 3, 3, 81}));
        QCOMPARE(p.blocksPerRequest, int64_t(99));
        QCOMPARE(p.tokens, int64_t(1'820));  // 44 x 4096 / 99 = 1,820.4
    }

    void smallConfigSlotShareDrafter() {
        VllmPlanInputs in = smallInputs();
        in.drafter = VllmDrafterLayout::PaddedSlotShare;
        const VllmKvPlan p = VllmKvPlan::of(smallConfig(), in);
        QCOMPARE(p.draftBytesPerBlock, int64_t(0));  // rides in the MLA tensors
        QCOMPARE(p.bytesPerBlock, int64_t(225'024));
        // ceil(1279 / 64) + 1 = 21 block ids.
        QCOMPARE(blocksPerGroup(p), (std::vector<int64_t>{11, 1, 3, 3, 21}));
        QCOMPARE(p.tokens, int64_t(4'621));  // 44 x 4096 / 39 = 4,621.1
        // More drafter layers than MLA tensors cannot slot-share.
        in.draftLayers = 3;
        QVERIFY_THROWS_EXCEPTION(Error, VllmKvPlan::of(smallConfig(), in));
    }

    void sharedIndexerLayersHaveNoIndexerPages() {
        TextConfig c = smallConfig();
        c.indexer_types[3] = IndexerType::Shared;  // the second DSA layer reuses the first one's selection
        const VllmKvPlan p = VllmKvPlan::of(c, smallInputs());
        QCOMPARE(p.indexerLayers, 1);
        QCOMPARE(p.bytesPerBlock, int64_t(212'352));  // 2 x 99,840 + 1 x 12,672
    }

    // ---- the real config: the recipe's vLLM ------------------------------------------------------
    // The arithmetic the recipe documents for its own boot (MAX_MODEL_LEN 1M, 2,048 batched tokens,
    // index_kpool 4, drafter slot-share): 280 + 1 + 4 x 9 + 97 = 414 block ids per request.
    void reproducesTheRecipesDocumentedBlockCounts() {
        TextConfig c = realConfig();
        c.index_kpool = 4;
        VllmPlanInputs in;
        in.availableBytes = kRecipeBudget;
        in.maxModelLen = 1'000'000;
        in.maxNumBatchedTokens = 2048;
        in.drafter = VllmDrafterLayout::PaddedSlotShare;
        const VllmKvPlan p = VllmKvPlan::of(c, in);
        QCOMPARE(p.kdaStatePageBytes, int64_t(2'342'912));
        QCOMPARE(p.blockSize, int64_t(3584));
        QCOMPARE(p.mlaPageBytes, int64_t(2'351'104));  // the "mla_page" of the recipe's boot log
        QCOMPARE(blocksPerGroup(p), (std::vector<int64_t>{280, 1, 9, 9, 9, 9, 97}));
        QCOMPARE(p.blocksPerRequest, int64_t(414));
        // Its launcher: "one request needs ~7.4 GiB + 7.1 GiB per 1M tokens of KV at MNBT 7168".
        in.maxNumBatchedTokens = 7168;
        const VllmKvPlan q = VllmKvPlan::of(c, in);
        const double fixed = double((q.blocksPerRequest - q.groups[0].blocksPerRequest) * q.bytesPerBlock) / (1 << 30);
        const double perMillion = 1e6 / double(q.blockSize) * double(q.bytesPerBlock) / (1 << 30);
        QVERIFY2(std::fabs(fixed - 7.4) < 0.1, qPrintable(QString::number(fixed)));
        QVERIFY2(std::fabs(perMillion - 7.1) < 0.1, qPrintable(QString::number(perMillion)));
    }

    // The recipe's defaults with the drafter layout it ran when it logged 982,612 tokens.
    void recipeDefaultsWithTheSharedConfig() {
        VllmPlanInputs in;
        in.availableBytes = kRecipeBudget;
        const VllmKvPlan p = VllmKvPlan::of(realConfig(), in);
        QCOMPARE(p.dsaLayers, 11);
        QCOMPARE(p.kdaLayers, 34);
        QCOMPARE(p.blockSize, int64_t(3584));
        QCOMPARE(p.bytesPerBlock, int64_t(26'515'072));  // 11 x 2,351,104 + 11 x 29,568 + 5 x 16 x 4,096
        QCOMPARE(p.numBlocks, int64_t(634));
        QCOMPARE(blocksPerGroup(p), (std::vector<int64_t>{252, 1, 9, 9, 9, 9, 257}));
        QCOMPARE(p.tokens, int64_t(1'045'054));
        // index_kpool 16 (this config) instead of the checkpoint's 4 shrinks the indexer pages: +6.4%.
        const double err = double(p.tokens) / double(kRecipeTokens) - 1;
        QVERIFY2(std::fabs(err) < 0.07, qPrintable(QString::number(err)));
        QVERIFY2(std::fabs(p.maxConcurrency - kRecipeConcurrency) < 0.08, qPrintable(QString::number(p.maxConcurrency)));
    }

    // The same with index_kpool 4, the value the deployed checkpoint carries (the recipe's boot logs).
    void recipeDefaultsWithTheCheckpointsKpool() {
        TextConfig c = realConfig();
        c.index_kpool = 4;
        VllmPlanInputs in;
        in.availableBytes = kRecipeBudget;
        const VllmKvPlan p = VllmKvPlan::of(c, in);
        QCOMPARE(p.numBlocks, int64_t(612));
        QCOMPARE(p.blocksPerRequest, int64_t(546));
        const double err = double(p.tokens) / double(kRecipeTokens) - 1;
        QVERIFY2(std::fabs(err) < 0.03, qPrintable(QString::number(err)));
        QVERIFY2(std::fabs(p.maxConcurrency - kRecipeConcurrency) < 0.04, qPrintable(QString::number(p.maxConcurrency)));
        // The recipe's drafter layout since then holds far more: the drafter no longer eats a pool block
        // per 16 tokens of its window.
        in.drafter = VllmDrafterLayout::PaddedSlotShare;
        const VllmKvPlan s = VllmKvPlan::of(c, in);
        QCOMPARE(s.blocksPerRequest, int64_t(354));
        QVERIFY(s.maxConcurrency > 1.7 && s.maxConcurrency < 1.8);
    }

    // ---- TwinSpark's own accounting --------------------------------------------------------------
    void nativePerRankMemory() {
        const TextConfig c = realConfig();
        const KvMemory m = KvMemory::of(c, KvCacheDtype::Fp8, false, 2);
        QCOMPARE(m.latentBytesPerToken, int64_t(7216));  // 11 x 656
        QCOMPARE(m.bytesPerToken, int64_t(7307));        // + ceil(11 x 4 x 132 / 64) pooled keys
        // 34 layers x (32 x 128 x 128 x 4 + 3 x 3 x 32 x 128 x 4) on one of two ranks.
        QCOMPARE(m.bytesPerSnapshot, int64_t(76'316'672));
        QCOMPARE(m.bytesPerStateSlot, int64_t(76'316'672 + 11 * 16 * 2 * 128 * 4));  // + indexer tails
        // One rank holds twice the KDA state of two.
        QCOMPARE(KvMemory::of(c, KvCacheDtype::Fp8, false, 1).bytesPerSnapshot, int64_t(2 * 76'316'672));
        QVERIFY_THROWS_EXCEPTION(Error, KvMemory::of(c, KvCacheDtype::Fp8, false, 3));
    }

    void badInputsAreRefused() {
        VllmPlanInputs in = smallInputs();
        in.availableBytes = 0;
        QVERIFY_THROWS_EXCEPTION(Error, VllmKvPlan::of(smallConfig(), in));
        in = smallInputs();
        in.drafter = VllmDrafterLayout::Standalone;
        in.draftTp = 3;  // does not divide 2 KV heads
        QVERIFY_THROWS_EXCEPTION(Error, VllmKvPlan::of(smallConfig(), in));
        TextConfig noDsa = smallConfig();
        noDsa.layer_types.assign(5, LayerType::LinearAttention);
        QVERIFY_THROWS_EXCEPTION(Error, VllmKvPlan::of(noDsa, smallInputs()));
    }
};

QTEST_GUILESS_MAIN(TestKvPlan)
#include "test_kv_plan.moc"
