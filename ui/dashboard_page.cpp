#include "ui/dashboard_page.h"

#include <QChart>
#include <QChartView>
#include <QGridLayout>
#include <QLabel>
#include <QLineSeries>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace ts::ui {

namespace {

// A round upper bound for an axis (1, 2, 5 × 10^k) so the scale does not jitter every sample.
double niceCeil(double v) {
    if (v <= 0) return 1;
    const double p = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (v <= m * p) return m * p;
    return 10 * p;
}

// The label format that tells an axis' ticks apart (a 0–1 range with five ticks under "%.0f" read 0, 0, 1, 1, 1):
// the decimals that write the tick step exactly when it has at most three (the charts' nice ranges: 0.25, 1.25,
// 2.5), else the fewest that make the step at least 1.5 units of the last digit (a sliding time window), at most
// three. The step is (max − min) / (ticks − 1).
int tickDecimals(double step) {
    if (!(step > 0)) return 0;
    for (int d = 0; d <= 3; ++d) {
        const double scaled = step * std::pow(10.0, d);
        if (std::abs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) return d;
    }
    int d = 0;
    while (d < 3 && step * std::pow(10.0, d) < 1.5) ++d;
    return d;
}

void keepTickLabelsDistinct(QValueAxis* axis) {
    auto update = [axis] {
        const int ticks = std::max(2, axis->tickCount());
        axis->setLabelFormat(QStringLiteral("%.%1f").arg(tickDecimals((axis->max() - axis->min()) / (ticks - 1))));
    };
    QObject::connect(axis, &QValueAxis::rangeChanged, axis, update);
    QObject::connect(axis, &QValueAxis::tickCountChanged, axis, update);
    update();
}

}  // namespace

DashboardPage::DashboardPage(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("dashboardPage"));
    auto* grid = new QGridLayout(this);
    QWidget* w = nullptr;
    m_kv = makeChart(tr("KV cache"), tr("blocks in use"), {QStringLiteral("kvBlocks")}, {tr("blocks in use")}, &w);
    grid->addWidget(w, 0, 0);
    m_tps = makeChart(tr("Throughput"), tr("tokens/s"), {QStringLiteral("promptTps"), QStringLiteral("generationTps")},
                      {tr("prompt"), tr("generation")}, &w);
    grid->addWidget(w, 0, 1);
    m_requests = makeChart(tr("Requests"), tr("requests"), {QStringLiteral("running"), QStringLiteral("waiting")},
                           {tr("running"), tr("waiting")}, &w);
    grid->addWidget(w, 1, 0);
    m_ttft = makeChart(tr("Time to first token"), tr("ms"), {QStringLiteral("ttftMs")}, {tr("TTFT")}, &w);
    grid->addWidget(w, 1, 1);
}

DashboardPage::Chart DashboardPage::makeChart(const QString& title, const QString& yTitle, const QStringList& names,
                                              const QStringList& labels, QWidget** container) {
    Chart c;
    c.chart = new QChart;
    c.chart->legend()->setVisible(names.size() > 1);
    c.chart->legend()->setAlignment(Qt::AlignBottom);
    c.chart->setMargins(QMargins(4, 4, 4, 4));
    c.x = new QValueAxis;
    c.x->setTitleText(tr("seconds"));
    c.x->setRange(0, 4);  // (until the first sample) whole seconds under five ticks
    keepTickLabelsDistinct(c.x);
    c.y = new QValueAxis;
    c.y->setTitleText(yTitle);
    c.y->setRange(0, 4);
    keepTickLabelsDistinct(c.y);
    c.chart->addAxis(c.x, Qt::AlignBottom);
    c.chart->addAxis(c.y, Qt::AlignLeft);
    for (int i = 0; i < names.size(); ++i) {
        auto* s = new QLineSeries;
        s->setName(labels.value(i));
        c.chart->addSeries(s);
        s->attachAxis(c.x);
        s->attachAxis(c.y);
        m_series.insert(names[i], s);
    }
    auto* view = new QChartView(c.chart);
    view->setRenderHint(QPainter::Antialiasing);
    view->setMinimumSize(280, 200);
    auto* box = new QWidget;
    auto* v = new QVBoxLayout(box);
    v->setContentsMargins(0, 0, 0, 0);
    c.title = new QLabel(QStringLiteral("<b>%1</b>").arg(title));
    c.title->setProperty("chartTitle", title);
    v->addWidget(c.title);
    v->addWidget(view, 1);
    *container = box;
    return c;
}

void DashboardPage::push(const QString& name, double t, double v) {
    QList<QPointF>& pts = m_points[name];
    pts.append(QPointF(t, v));
    if (pts.size() > kHistory) pts.remove(0, pts.size() - kHistory);
    m_series.value(name)->replace(pts);
}

void DashboardPage::rescale(Chart& c, const QStringList& names, double t, double minYMax) {
    double ymax = minYMax;
    double tmin = t;
    for (const QString& n : names)
        for (const QPointF& p : std::as_const(m_points[n])) {
            ymax = std::max(ymax, p.y());
            tmin = std::min(tmin, p.x());
        }
    const double top = niceCeil(ymax * 1.1);
    c.y->setRange(0, top);
    // Round steps on a 1-2-5 top: 0–5 by 1 (six ticks), 0–2 by 0.5 (five), 0–1 and 0–10 by a fifth (six) — never a
    // request count of 1.25.
    const double mantissa = top / std::pow(10.0, std::floor(std::log10(top)));
    c.y->setTickCount(std::abs(mantissa - 2.0) < 1e-9 ? 5 : 6);
    c.x->setRange(std::max(tmin, t - kHistory / 4.0), std::max(t, tmin + 1.0));
}

void DashboardPage::addSample(const MetricsSample& s) {
    ++m_samples;
    const double t = s.timeSeconds;
    push(QStringLiteral("kvBlocks"), t, double(s.kvBlocksUsed));
    push(QStringLiteral("promptTps"), t, s.promptTokensPerSecond);
    push(QStringLiteral("generationTps"), t, s.generationTokensPerSecond);
    push(QStringLiteral("running"), t, s.running);
    push(QStringLiteral("waiting"), t, s.waiting);
    // TTFT is an event, not a level: hold the latest measurement as a step line (a zero would read as an
    // instant answer, and a lone point of a line series is not drawn at all). Nothing before the first one.
    if (s.ttftSeconds >= 0) m_lastTtftMs = s.ttftSeconds * 1000.0;
    if (m_lastTtftMs >= 0) push(QStringLiteral("ttftMs"), t, m_lastTtftMs);

    rescale(m_kv, {QStringLiteral("kvBlocks")}, t, 1);
    m_kv.y->setRange(0, double(std::max<qint64>(1, s.kvBlocksTotal)));  // the pool's size is the scale
    rescale(m_tps, {QStringLiteral("promptTps"), QStringLiteral("generationTps")}, t, 1);
    rescale(m_requests, {QStringLiteral("running"), QStringLiteral("waiting")}, t, 4);
    rescale(m_ttft, {QStringLiteral("ttftMs")}, t, 10);
    m_ttft.x->setRange(m_tps.x->min(), m_tps.x->max());

    QString kv = tr("<b>KV cache</b> %1 % · %2 / %3 blocks · %4 / %5 tokens")
                     .arg(s.kvUsage * 100.0, 0, 'f', 1)
                     .arg(s.kvBlocksUsed).arg(s.kvBlocksTotal).arg(s.kvTokensUsed).arg(s.kvTokenCapacity);
    // On a GPU, what is left of its memory (the pool is allocated once; what moves is everyone else). On a GB10
    // that is the system's memory, and running out of it is what brings the machine down.
    if (s.deviceMemoryTotal > 0) {
        const double g = double(qint64(1) << 30);
        if (s.deviceMemoryUnified) {
            kv += tr(" · system memory %1 GiB available of %2 (shared with the GPU)")
                      .arg(double(s.deviceMemoryFree) / g, 0, 'f', 1).arg(double(s.deviceMemoryTotal) / g, 0, 'f', 1);
            if (s.deviceMemoryFree < kLowUnifiedMemoryBytes)
                kv += tr(" <span style=\"color:#c62828\"><b>low</b>: close other programs; a GB10 can reset when "
                         "its memory runs out</span>");
        } else {
            kv += tr(" · GPU memory %1 GiB free of %2")
                      .arg(double(s.deviceMemoryFree) / g, 0, 'f', 1).arg(double(s.deviceMemoryTotal) / g, 0, 'f', 1);
        }
    }
    m_kv.title->setText(kv);
    QString tps = tr("<b>Throughput</b> prompt %1 tok/s · generation %2 tok/s · %3 / %4 tokens in total")
                      .arg(s.promptTokensPerSecond, 0, 'f', 1).arg(s.generationTokensPerSecond, 0, 'f', 1)
                      .arg(s.promptTokensTotal).arg(s.generationTokensTotal);
    // On a GPU: whether decode steps run from CUDA graphs (the first steps of a batch size never do).
    if (s.graphReplays > 0) tps += tr(" · %1 decode steps from CUDA graphs").arg(s.graphReplays);
    m_tps.title->setText(tps);
    m_requests.title->setText(tr("<b>Requests</b> %1 running · %2 waiting · %3 finished")
                                  .arg(s.running).arg(s.waiting).arg(s.requestsFinished));
    m_ttft.title->setText(tr("<b>Time to first token</b> mean %1 ms").arg(s.ttftMeanSeconds * 1000.0, 0, 'f', 0));
}

QString DashboardPage::throughputTitle() const { return m_tps.title->text(); }
QString DashboardPage::kvTitle() const { return m_kv.title->text(); }

void DashboardPage::clear() {
    for (auto it = m_points.begin(); it != m_points.end(); ++it) {
        it.value().clear();
        m_series.value(it.key())->clear();
    }
    m_samples = 0;
    m_lastTtftMs = -1;
}

}  // namespace ts::ui
