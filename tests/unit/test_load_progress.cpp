// A model load reports its progress (Glm5NextModel's LoadProgress): (0, total) first, then the bytes made ready
// after each weight, never backwards, ending at total; the total is the checkpoint's matrices — for an EXL3
// model their packed trellis bytes, not the expanded size — so the figures a user sees are the real ones. Before
// that, binding reports its layers (BindProgress): (0, L), (1, L), … (L, L), all before the first weight.
#include <QtTest>

#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "model/glm5_next.h"

using namespace ts;

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The bytes of the text model's weights as the checkpoint lists them, counted independently of the loader: every
// 2-D tensor of the language model and the head (the indexer's compress APE excepted: a small table uploaded as
// fp32, like the norms) and every EXL3 trellis tensor (3-D, I16) — or, `trellisOnly`, the trellis tensors alone. The golden directories also
// hold reference outputs and the vision tower's weights, which the text model does not load.
int64_t weightBytes(const std::string& dir, bool trellisOnly) {
    SafetensorsCheckpoint ckpt(dir);
    int64_t sum = 0;
    for (const std::string& n : ckpt.names()) {
        const TensorInfo& t = ckpt.get(n);
        if (n.rfind("model.language_model.", 0) != 0 && n.rfind("lm_head.", 0) != 0) continue;
        const bool trellis = endsWith(n, ".trellis");
        if (trellisOnly ? trellis : (trellis || (t.shape.size() == 2 && !endsWith(n, "compress_ape"))))
            sum += int64_t(t.nbytes);
    }
    return sum;
}

std::vector<std::pair<int64_t, int64_t>> loadCalls(const std::string& dir) {
    auto backend = makeCpuBackend();
    std::vector<std::pair<int64_t, int64_t>> calls;
    Glm5NextModel model(dir, *backend, [&](int64_t done, int64_t total) { calls.emplace_back(done, total); });
    return calls;
}

void checkSequence(const std::vector<std::pair<int64_t, int64_t>>& calls) {
    QVERIFY(calls.size() > 10);  // once per weight
    const int64_t total = calls.front().second;
    QVERIFY(total > 0);
    QCOMPARE(calls.front().first, int64_t(0));
    for (size_t i = 1; i < calls.size(); ++i) {
        QCOMPARE(calls[i].second, total);
        QVERIFY(calls[i].first >= calls[i - 1].first);
    }
    QCOMPARE(calls.back().first, total);
}

}  // namespace

class TestLoadProgress : public QObject {
    Q_OBJECT
private slots:
    // What `serve` and `generate` print while a device backend uploads: both figures in the total's unit, MiB below
    // 1 GiB (the embedded EXL3 model's 17.3 MiB read "0.0 / 0.0 GiB" in the unit of the full-size model).
    void progressLine() {
        const int64_t MiB = int64_t(1) << 20, GiB = int64_t(1) << 30;
        QCOMPARE(formatLoadProgress(0, 18140160), std::string("0.0 / 17.3 MiB (0 %)"));
        QCOMPARE(formatLoadProgress(9 * MiB, 18 * MiB), std::string("9.0 / 18.0 MiB (50 %)"));
        QCOMPARE(formatLoadProgress(GiB - 1, GiB - 1), std::string("1024.0 / 1024.0 MiB (100 %)"));
        QCOMPARE(formatLoadProgress(GiB / 2, GiB), std::string("0.5 / 1.0 GiB (50 %)"));
        QCOMPARE(formatLoadProgress(3 * GiB / 2, 60 * GiB), std::string("1.5 / 60.0 GiB (2 %)"));
        QCOMPARE(formatLoadProgress(0, 0), std::string("0.0 / 0.0 MiB (100 %)"));  // nothing to upload: done
    }

    void denseModel() {
        const std::string dir = TS_SOURCE_DIR "/tests/golden/data/tiny_a";
        const auto calls = loadCalls(dir);
        checkSequence(calls);
        // Every matrix of the checkpoint is a weight the backend makes ready, and nothing else is counted (the
        // norms and other vectors are uploaded as small fp32 buffers, not weights).
        QCOMPARE(calls.back().second, weightBytes(dir, false));
    }

    void bindingReportsEveryLayerFirst() {
        const std::string dir = TS_SOURCE_DIR "/resources/models/glm5-next-tiny-exl3";
        auto backend = makeCpuBackend();
        std::vector<std::pair<int64_t, int64_t>> layers;
        size_t weightCallsBeforeLastLayer = 0, weightCalls = 0;
        const Glm5NextModel model(
            dir, *backend, [&](int64_t, int64_t) { ++weightCalls; },
            [&](int64_t done, int64_t total) {
                layers.emplace_back(done, total);
                weightCallsBeforeLastLayer = weightCalls;
            });
        const int64_t L = model.text().num_hidden_layers;
        QVERIFY(L >= 2);
        QCOMPARE(int64_t(layers.size()), L + 1);
        for (int64_t i = 0; i <= L; ++i) QCOMPARE(layers[size_t(i)], std::make_pair(i, L));
        QCOMPARE(weightCallsBeforeLastLayer, size_t(0));  // bound first, then made ready
        QVERIFY(weightCalls > 10);
    }

    void packedModel() {
        const std::string dir = TS_SOURCE_DIR "/resources/models/glm5-next-tiny-exl3";
        const auto calls = loadCalls(dir);
        checkSequence(calls);
        // The routed experts count as their trellis bytes (4 bits per weight), the rest as dense matrices.
        const int64_t trellis = weightBytes(dir, true);
        QVERIFY(trellis > 0);
        QCOMPARE(calls.back().second, weightBytes(dir, false));
    }
};

QTEST_APPLESS_MAIN(TestLoadProgress)
#include "test_load_progress.moc"
