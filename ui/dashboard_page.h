// Dashboard (issue 7, page 3): live charts of the engine's metrics snapshot — the same counters as
// /metrics — at the controller's ~4 Hz. Each series keeps a bounded history (the last kHistory samples)
// and is redrawn with QLineSeries::replace(), about 100× faster than clear() + append() in Qt 6.4
// (shared/specs/apps.md §0.7). OpenGL series are never used: they crash under the offscreen platform.
#pragma once

#include <QHash>
#include <QList>
#include <QPointF>
#include <QWidget>

#include "ui/engine_types.h"

class QLabel;
class QChart;
class QChartView;
class QLineSeries;
class QValueAxis;

namespace ts::ui {

class DashboardPage final : public QWidget {
    Q_OBJECT
public:
    static constexpr int kHistory = 240;  // 60 s at 4 Hz
    explicit DashboardPage(QWidget* parent = nullptr);

    // The series by name ("kvBlocks", "promptTps", "generationTps", "running", "waiting", "ttftMs"), for tests.
    QLineSeries* series(const QString& name) const { return m_series.value(name); }
    int sampleCount() const { return m_samples; }
    QString throughputTitle() const;  // the throughput chart's heading, for tests
    QString kvTitle() const;          // the KV chart's heading (with the device's memory), for tests
    // Below this much available system memory a GPU that shares it (a GB10) is flagged: when the system runs out
    // there, the driver's allocation failures can hard-reset the machine (NVIDIA's dgx-spark-playbooks issue 97),
    // and one recipe run saw ~0.87 GiB go in a second.
    static constexpr qint64 kLowUnifiedMemoryBytes = qint64(2) << 30;

public slots:
    void addSample(const ts::ui::MetricsSample& sample);
    void clear();

private:
    struct Chart {
        QChart* chart = nullptr;
        QValueAxis* x = nullptr;
        QValueAxis* y = nullptr;
        QLabel* title = nullptr;
    };
    Chart makeChart(const QString& title, const QString& yTitle, const QStringList& seriesNames,
                    const QStringList& seriesLabels, QWidget** container);
    void push(const QString& name, double t, double v);
    void rescale(Chart& c, const QStringList& names, double t, double minYMax);

    QHash<QString, QLineSeries*> m_series;
    QHash<QString, QList<QPointF>> m_points;
    Chart m_kv, m_tps, m_requests, m_ttft;
    int m_samples = 0;
    double m_lastTtftMs = -1;  // the most recent time to first token, held between requests
};

}  // namespace ts::ui
