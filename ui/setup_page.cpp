#include "ui/setup_page.h"

#include <QLabel>
#include <QPushButton>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "ui/env_schema.h"
#include "ui/env_store.h"
#include "ui/setup_wizard.h"

namespace ts::ui {

SetupPage::SetupPage(EnvStore* store, QWidget* parent) : QWidget(parent), m_store(store) {
    setObjectName(QStringLiteral("setupPage"));
    auto* lay = new QVBoxLayout(this);
    m_path = new QLabel;
    m_path->setWordWrap(true);
    m_path->setTextInteractionFlags(Qt::TextSelectableByMouse);
    lay->addWidget(m_path);
    auto* open = new QPushButton(tr("Open the setup wizard…"));
    open->setObjectName(QStringLiteral("openWizard"));
    connect(open, &QPushButton::clicked, this, &SetupPage::openWizard);
    lay->addWidget(open, 0, Qt::AlignLeft);
    m_summary = new QTextBrowser;
    lay->addWidget(m_summary, 1);
    refresh();
}

void SetupPage::openWizard() {
    auto* wizard = new SetupWizard(m_store, this);
    wizard->setAttribute(Qt::WA_DeleteOnClose);
    connect(wizard, &SetupWizard::envWritten, this, [this](const QString& path) {
        refresh();
        emit envWritten(path);
    });
    wizard->open();  // window-modal, but the event loop keeps running: the engine's signals still arrive
}

void SetupPage::showEvent(QShowEvent* event) {
    refresh();
    QWidget::showEvent(event);
}

void SetupPage::refresh() {
    m_path->setText(tr("Deployment settings: %1").arg(m_store->path()));
    QString html = QStringLiteral("<table cellspacing=6>");
    for (const FieldSpec& f : EnvSchema::fields()) {
        QString value = m_store->value(f.key, f.fallback);
        if (f.kind == FieldKind::ApiKey && !value.isEmpty()) value = tr("(set)");
        const Verdict v = EnvSchema::validate(f.key, m_store->value(f.key, f.fallback));
        QString note;
        if (m_store->isOverridden(f.key)) note = tr("from the %1").arg(m_store->overrideSource(f.key));
        if (!v.message.isEmpty()) note += (note.isEmpty() ? QString() : QStringLiteral(" · ")) + v.message;
        html += QStringLiteral("<tr><td>%1</td><td><tt>%2</tt></td><td>%3</td></tr>")
                    .arg(f.label.toHtmlEscaped(), value.toHtmlEscaped(), note.toHtmlEscaped());
    }
    html += QStringLiteral("</table>");
    const QStringList problems = m_store->problems();
    if (!problems.isEmpty())
        html += QStringLiteral("<p>%1<br>%2</p>").arg(tr("Lines the launcher cannot read:").toHtmlEscaped(),
                                                      problems.join(QStringLiteral("<br>")).toHtmlEscaped());
    m_summary->setHtml(html);
}

}  // namespace ts::ui
