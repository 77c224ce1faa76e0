// The dashboard: series follow the metrics samples, history stays bounded, a sample without a new
// first token adds no TTFT point, every axis labels its ticks apart (no "0 0 1 1 1"); and, end to end, the
// controller's ~4 Hz metrics reach the charts.
#include <QtTest>

#include "gui_spy.h"

#include <QLineSeries>
#include <QValueAxis>

#include "ui/dashboard_page.h"
#include "ui/engine_controller.h"

using namespace ts::ui;

class TestDashboard final : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

    void seriesFollowSamples() {
        DashboardPage page;
        page.show();
        MetricsSample s;
        s.timeSeconds = 0.75;  // before any first token: no TTFT point (zero would read as an instant answer)
        s.ttftSeconds = -1;
        page.addSample(s);
        QCOMPARE(page.series(QStringLiteral("ttftMs"))->count(), 0);
        page.clear();
        s.timeSeconds = 1.0;
        s.running = 2;
        s.waiting = 1;
        s.kvUsage = 0.25;
        s.kvBlocksUsed = 16;
        s.kvBlocksTotal = 64;
        s.kvTokensUsed = 1024;
        s.kvTokenCapacity = 4096;
        s.promptTokensPerSecond = 300;
        s.generationTokensPerSecond = 42.5;
        s.ttftSeconds = 0.120;
        page.addSample(s);
        QCOMPARE(page.series(QStringLiteral("kvBlocks"))->count(), 1);
        QCOMPARE(page.series(QStringLiteral("kvBlocks"))->at(0), QPointF(1.0, 16));
        QCOMPARE(page.series(QStringLiteral("promptTps"))->at(0).y(), 300.0);
        QCOMPARE(page.series(QStringLiteral("generationTps"))->at(0).y(), 42.5);
        QCOMPARE(page.series(QStringLiteral("running"))->at(0).y(), 2.0);
        QCOMPARE(page.series(QStringLiteral("waiting"))->at(0).y(), 1.0);
        QCOMPARE(page.series(QStringLiteral("ttftMs"))->at(0).y(), 120.0);
        s.timeSeconds = 1.25;
        s.ttftSeconds = -1;  // nobody got a first token in this interval: the last measurement is held
        page.addSample(s);
        QCOMPARE(page.series(QStringLiteral("running"))->count(), 2);
        QCOMPARE(page.series(QStringLiteral("ttftMs"))->count(), 2);
        QCOMPARE(page.series(QStringLiteral("ttftMs"))->at(1), QPointF(1.25, 120.0));
        // The CPU backend has no graphs: the heading says nothing about them; on a GPU it counts the
        // decode steps replayed from CUDA graphs.
        QVERIFY2(!page.throughputTitle().contains(QStringLiteral("CUDA graphs")), qPrintable(page.throughputTitle()));
        s.timeSeconds = 1.5;
        s.graphReplays = 1234;
        page.addSample(s);
        QVERIFY2(page.throughputTitle().contains(QStringLiteral("1234 decode steps from CUDA graphs")),
                 qPrintable(page.throughputTitle()));
    }

    // Every axis of every chart: its tick labels, as its label format writes them, are all different.
    void tickLabelsAreDistinct() {
        DashboardPage page;
        page.show();
        auto check = [&](const char* when) {
            for (const char* name : {"kvBlocks", "promptTps", "generationTps", "running", "waiting", "ttftMs"}) {
                for (QAbstractAxis* a : page.series(QLatin1String(name))->attachedAxes()) {
                    auto* axis = qobject_cast<QValueAxis*>(a);
                    QVERIFY(axis);
                    const int ticks = axis->tickCount();
                    QStringList labels;
                    for (int i = 0; i < ticks; ++i) {
                        const double v = axis->min() + (axis->max() - axis->min()) * i / (ticks - 1);
                        labels << QString::asprintf(axis->labelFormat().toLatin1().constData(), v);
                    }
                    QVERIFY2(QSet<QString>(labels.begin(), labels.end()).size() == ticks,
                             qPrintable(QStringLiteral("%1, %2 axis %3: %4").arg(QLatin1String(when), QLatin1String(name),
                                                                             axis->titleText(), labels.join(QStringLiteral(", ")))));
                }
            }
        };
        check("before any sample");
        MetricsSample s;
        s.kvBlocksTotal = 3;  // a tiny pool: 0, 0.75, 1.5, 2.25, 3
        s.kvBlocksUsed = 1;
        s.running = 1;
        s.promptTokensPerSecond = 0.3;
        s.generationTokensPerSecond = 0.2;
        s.ttftSeconds = 0.0004;
        for (int i = 1; i <= 6; ++i) {  // a window of 0.1 s … 0.6 s
            s.timeSeconds = 0.1 * i;
            page.addSample(s);
            check("small values, short window");
        }
        // Request counts step by whole requests (the axis starts at 0–5 for up to four).
        {
            auto* y = qobject_cast<QValueAxis*>(page.series(QStringLiteral("running"))->attachedAxes().value(1));
            QVERIFY(y && y->orientation() == Qt::Vertical);
            QStringList labels;
            for (int i = 0; i < y->tickCount(); ++i)
                labels << QString::asprintf(y->labelFormat().toLatin1().constData(), y->max() * i / (y->tickCount() - 1));
            QCOMPARE(labels.join(QLatin1Char(',')), QStringLiteral("0,1,2,3,4,5"));
        }
        s.kvBlocksTotal = 4096;
        s.promptTokensPerSecond = 12345;
        for (int i = 0; i < 300; ++i) {  // a long run: the window slides over odd bounds
            s.timeSeconds = 0.6 + 0.2617 * i;
            page.addSample(s);
        }
        check("long run");
    }

    void deviceMemoryInTheKvHeading() {
        DashboardPage page;
        MetricsSample s;
        s.kvBlocksTotal = 64;
        page.addSample(s);  // the CPU backend: no device, nothing said about its memory
        QVERIFY2(!page.kvTitle().contains(QStringLiteral("memory")), qPrintable(page.kvTitle()));
        const qint64 gib = qint64(1) << 30;
        s.timeSeconds = 0.25;
        s.deviceMemoryTotal = 140 * gib;
        s.deviceMemoryFree = 17 * gib + gib / 2;
        page.addSample(s);  // a discrete GPU
        QVERIFY2(page.kvTitle().contains(QStringLiteral("GPU memory 17.5 GiB free of 140.0")), qPrintable(page.kvTitle()));
        QVERIFY2(!page.kvTitle().contains(QStringLiteral("low")), qPrintable(page.kvTitle()));
        s.timeSeconds = 0.5;
        s.deviceMemoryUnified = true;  // a GB10: the system's memory
        s.deviceMemoryTotal = qint64(121.69 * double(gib));
        s.deviceMemoryFree = 4 * gib;
        page.addSample(s);
        QVERIFY2(page.kvTitle().contains(QStringLiteral("system memory 4.0 GiB available of 121.7 (shared with the GPU)")),
                 qPrintable(page.kvTitle()));
        QVERIFY2(!page.kvTitle().contains(QStringLiteral("low")), qPrintable(page.kvTitle()));
        s.timeSeconds = 0.75;
        s.deviceMemoryFree = DashboardPage::kLowUnifiedMemoryBytes - 1;
        page.addSample(s);
        QVERIFY2(page.kvTitle().contains(QStringLiteral("<b>low</b>")), qPrintable(page.kvTitle()));
    }

    void historyIsBounded() {
        DashboardPage page;
        MetricsSample s;
        const int n = DashboardPage::kHistory + 100;
        for (int i = 0; i < n; ++i) {
            s.timeSeconds = i * 0.25;
            s.generationTokensPerSecond = i;
            s.ttftSeconds = 0.01;
            page.addSample(s);
        }
        for (const char* name : {"kvBlocks", "promptTps", "generationTps", "running", "waiting", "ttftMs"})
            QCOMPARE(page.series(QString::fromLatin1(name))->count(), DashboardPage::kHistory);
        QCOMPARE(page.series(QStringLiteral("generationTps"))->at(0).y(), double(n - DashboardPage::kHistory));
        QCOMPARE(page.series(QStringLiteral("generationTps"))->at(DashboardPage::kHistory - 1).y(), double(n - 1));
        page.clear();
        QCOMPARE(page.series(QStringLiteral("generationTps"))->count(), 0);
    }

    void controllerMetricsReachTheCharts() {
        EngineController controller;
        DashboardPage page;
        connect(&controller, &EngineController::metricsUpdated, &page, &DashboardPage::addSample);
        GuiSpy loaded(&controller, &EngineController::modelLoaded);
        LoadOptions o;
        o.kvBudgetMiB = 64;
        controller.requestLoad(QStringLiteral(TS_GUI_CHAT_MODEL), o);
        QVERIFY(loaded.wait(60000));
        const auto info = loaded.takeFirst().at(0).value<ModelInfo>();
        QVERIFY(info.kvTokenCapacity > 0);
        QElapsedTimer t;
        t.start();
        QTRY_VERIFY_WITH_TIMEOUT(page.sampleCount() >= 6, 5000);
        const double hz = page.sampleCount() * 1000.0 / double(t.elapsed());
        qInfo("metrics rate: %.1f Hz", hz);
        QVERIFY(hz > 2.0 && hz < 8.0);  // ~4 Hz
        QLineSeries* kv = page.series(QStringLiteral("kvBlocks"));
        QVERIFY(kv->count() >= 6);
        controller.shutdown();
    }
};

QTEST_MAIN(TestDashboard)
#include "test_dashboard.moc"
