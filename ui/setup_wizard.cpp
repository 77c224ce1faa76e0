#include "ui/setup_wizard.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QRandomGenerator>
#include <QStandardItemModel>
#include <QVBoxLayout>
#include <QWizardPage>

#include "ui/env_store.h"

namespace ts::ui {

// A wizard page over some of the fields; complete when none of them is wrong. (No Q_OBJECT: it adds no
// signals; the wizard tells it when to re-check.)
class FieldPage final : public QWizardPage {
public:
    FieldPage(SetupWizard* wizard, QStringList keys) : m_wizard(wizard), m_keys(std::move(keys)) {}
    bool isComplete() const override {
        for (const QString& k : m_keys)
            if (!m_wizard->verdict(k).ok()) return false;
        return true;
    }
    void recheck() { emit completeChanged(); }

private:
    SetupWizard* m_wizard;
    QStringList m_keys;
};

SetupWizard::SetupWizard(EnvStore* store, QWidget* parent) : QWizard(parent), m_store(store) {
    setWindowTitle(tr("TwinSpark setup"));
    setObjectName(QStringLiteral("setupWizard"));
    setWizardStyle(QWizard::ModernStyle);
    setOption(QWizard::NoBackButtonOnStartPage);
    setOption(QWizard::HaveHelpButton, false);
    // The help texts under each field carry the recipe's warnings: leave room to read them whole.
    setMinimumSize(760, 620);

    addFieldPage(tr("Model"), tr("Where the checkpoint is."), {QStringLiteral("MODEL_PATH")});
    addFieldPage(tr("Nodes"), tr("The two machines and how the head reaches the worker over SSH."),
                 {QStringLiteral("HEAD_IP"), QStringLiteral("WORKER_IP"), QStringLiteral("WORKER_USER"),
                  QStringLiteral("WORKER_HOME")});
    addFieldPage(tr("API"), tr("The OpenAI-compatible API served on the head node."),
                 {QStringLiteral("PORT"), QStringLiteral("VLLM_API_KEY")});
    addFieldPage(tr("Fabric"),
                 tr("The CX7 link between the nodes. Keep the documented pins unless your cabling differs."),
                 {QStringLiteral("HEAD_CX7_IF"), QStringLiteral("WORKER_CX7_IF"), QStringLiteral("HEAD_CX7_IB"),
                  QStringLiteral("WORKER_CX7_IB")});
    addFieldPage(tr("Runtime"), tr("Settings the recipe fixes. Forbidden values are shown, and why, but cannot be chosen."),
                 {QStringLiteral("KV_CACHE_DTYPE"), QStringLiteral("MOE_BACKEND"),
                  QStringLiteral("DRAFT_ATTENTION_BACKEND")});

    auto* last = new QWizardPage;
    last->setTitle(tr("Write .env"));
    last->setSubTitle(tr("Finish writes the file. Comments and settings this wizard does not know are kept."));
    m_summary = new QLabel;
    m_summary->setWordWrap(true);
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* lay = new QVBoxLayout(last);
    lay->addWidget(m_summary);
    lay->addStretch();
    addPage(last);
    connect(this, &QWizard::currentIdChanged, this, [this](int) { revalidate(); });
    revalidate();
}

FieldPage* SetupWizard::addFieldPage(const QString& title, const QString& subtitle, const QStringList& keys) {
    auto* page = new FieldPage(this, keys);
    page->setTitle(title);
    page->setSubTitle(subtitle);
    auto* form = new QFormLayout(page);
    form->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);
    for (const QString& key : keys) {
        const FieldSpec f = EnvSchema::field(key);
        auto* box = new QWidget;
        auto* v = new QVBoxLayout(box);
        v->setContentsMargins(0, 0, 0, 6);
        v->addWidget(makeEditor(f));
        auto* message = new QLabel;
        message->setObjectName(key + QStringLiteral("_message"));
        message->setWordWrap(true);
        m_messages.insert(key, message);
        v->addWidget(message);
        auto* help = new QLabel(f.help);
        help->setWordWrap(true);
        help->setEnabled(false);  // the palette's quieter text: an explanation, not a control
        v->addWidget(help);
        if (m_store->isOverridden(key)) {
            auto* over = new QLabel(tr("Set by the %1 to '%2': that value wins at run time; this file keeps what you "
                                       "enter here.")
                                        .arg(m_store->overrideSource(key), m_store->value(key)));
            over->setWordWrap(true);
            v->addWidget(over);
        }
        form->addRow(f.label + QLatin1Char(' ') + QStringLiteral("(%1)").arg(key), box);
    }
    addPage(page);
    m_pages << page;
    return page;
}

QWidget* SetupWizard::makeEditor(const FieldSpec& f) {
    // The file's value; the recipe's default only for a key the file does not have at all.
    const QString current = m_store->fileHas(f.key) ? m_store->fileValue(f.key) : f.fallback;
    if (f.kind == FieldKind::Choice) {
        auto* combo = new QComboBox;
        combo->setObjectName(f.key);
        // As wide as the line edits of the other pages: a combo keeps its content's width otherwise, and the
        // word-wrapped notes under it, laid out in that narrow column, overlapped one another.
        combo->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
        auto* model = new QStandardItemModel(combo);
        QStringList refused;
        for (const FieldChoice& c : EnvSchema::choices(f.key)) {
            auto* item = new QStandardItem(c.allowed ? c.label : tr("%1 — not allowed").arg(c.label));
            item->setData(c.value, Qt::UserRole);
            if (!c.allowed) {
                item->setFlags(item->flags() & ~(Qt::ItemIsEnabled | Qt::ItemIsSelectable));
                item->setToolTip(c.reason);
                refused << QStringLiteral("%1: %2").arg(c.label, c.reason);
            }
            model->appendRow(item);
        }
        combo->setModel(model);
        // A value already in the file is shown even when forbidden (a hand edit), so the error says why
        // it must change; the user can then only pick an allowed one.
        const QString value = current.isEmpty() ? f.fallback : current;
        const int idx = combo->findData(value, Qt::UserRole, Qt::MatchFixedString);
        if (idx >= 0) {
            combo->setCurrentIndex(idx);
        } else {
            combo->addItem(value, value);
            combo->setCurrentIndex(combo->count() - 1);
        }
        combo->setToolTip(refused.join(QLatin1Char('\n')));
        connect(combo, &QComboBox::currentIndexChanged, this, [this] { revalidate(); });
        m_editors.insert(f.key, combo);
        if (refused.isEmpty()) return combo;
        auto* box = new QWidget;
        auto* v = new QVBoxLayout(box);
        v->setContentsMargins(0, 0, 0, 0);
        v->addWidget(combo);
        auto* why = new QLabel(refused.join(QLatin1Char('\n')));
        why->setObjectName(f.key + QStringLiteral("_forbidden"));
        why->setWordWrap(true);
        v->addWidget(why);
        return box;
    }
    auto* edit = new QLineEdit(current);
    edit->setObjectName(f.key);
    edit->setClearButtonEnabled(true);
    connect(edit, &QLineEdit::textChanged, this, [this] { revalidate(); });
    m_editors.insert(f.key, edit);
    if (f.kind == FieldKind::ApiKey) edit->setEchoMode(QLineEdit::PasswordEchoOnEdit);
    if (f.kind != FieldKind::ModelPath && f.kind != FieldKind::ApiKey) return edit;
    auto* box = new QWidget;
    auto* h = new QHBoxLayout(box);
    h->setContentsMargins(0, 0, 0, 0);
    h->addWidget(edit, 1);
    if (f.kind == FieldKind::ModelPath) {
        auto* browse = new QPushButton(tr("Browse…"));
        connect(browse, &QPushButton::clicked, this, [this, edit] {
            const QString dir = QFileDialog::getExistingDirectory(this, tr("Model folder"), edit->text());
            if (!dir.isEmpty()) edit->setText(dir);
        });
        h->addWidget(browse);
    } else {
        auto* gen = new QPushButton(tr("Generate"));
        gen->setToolTip(tr("A random 32-character key"));
        connect(gen, &QPushButton::clicked, this, [edit] {
            QString key = QStringLiteral("ts-");
            for (int i = 0; i < 4; ++i)
                key += QString::number(QRandomGenerator::system()->generate64(), 16).rightJustified(16, QLatin1Char('0')).left(8);
            edit->setText(key);
        });
        h->addWidget(gen);
    }
    return box;
}

QString SetupWizard::fieldValue(const QString& key) const {
    QWidget* w = m_editors.value(key);
    if (auto* e = qobject_cast<QLineEdit*>(w)) return e->text();
    if (auto* c = qobject_cast<QComboBox*>(w)) return c->currentData(Qt::UserRole).toString();
    return QString();
}

bool SetupWizard::setFieldValue(const QString& key, const QString& value) {
    QWidget* w = m_editors.value(key);
    if (auto* e = qobject_cast<QLineEdit*>(w)) {
        e->setText(value);
        return true;
    }
    if (auto* c = qobject_cast<QComboBox*>(w)) {
        const int idx = c->findData(value, Qt::UserRole, Qt::MatchFixedString);
        const auto* model = qobject_cast<QStandardItemModel*>(c->model());
        if (idx < 0 || !model || !model->item(idx) || !model->item(idx)->isEnabled()) return false;
        c->setCurrentIndex(idx);
        return true;
    }
    return false;
}

QMap<QString, QString> SetupWizard::currentValues() const {
    QMap<QString, QString> out;
    for (auto it = m_editors.constBegin(); it != m_editors.constEnd(); ++it) out.insert(it.key(), fieldValue(it.key()));
    return out;
}

Verdict SetupWizard::verdict(const QString& key) const {
    return EnvSchema::validate(key, fieldValue(key), currentValues());
}

bool SetupWizard::allValid() const {
    for (const QString& k : m_editors.keys())
        if (!verdict(k).ok()) return false;
    return true;
}

void SetupWizard::revalidate() {
    const QMap<QString, QString> values = currentValues();
    QStringList warnings, errors;
    for (auto it = m_messages.constBegin(); it != m_messages.constEnd(); ++it) {
        const Verdict v = EnvSchema::validate(it.key(), values.value(it.key()), values);
        QLabel* l = it.value();
        l->setText(v.message);
        l->setVisible(!v.message.isEmpty());
        l->setStyleSheet(v.level == Verdict::Error ? QStringLiteral("color: #c62828;")
                                                   : QStringLiteral("color: #a15c00;"));
        if (v.level == Verdict::Error) errors << QStringLiteral("%1: %2").arg(it.key(), v.message);
        if (v.level == Verdict::Warning) warnings << QStringLiteral("%1: %2").arg(it.key(), v.message);
    }
    for (FieldPage* p : std::as_const(m_pages)) p->recheck();
    if (!m_summary) return;
    QString text = tr("File: %1").arg(m_store->path());
    if (m_store->created()) text += QLatin1Char('\n') + tr("It did not exist and was created from .env.example.");
    const QStringList problems = m_store->problems();
    if (!problems.isEmpty())
        text += QLatin1Char('\n') + tr("Lines the launcher cannot read (kept as they are):") + QLatin1Char('\n') +
                problems.join(QLatin1Char('\n'));
    if (!errors.isEmpty()) text += QLatin1Char('\n') + tr("To fix before writing:") + QLatin1Char('\n') + errors.join(QLatin1Char('\n'));
    if (!warnings.isEmpty()) text += QLatin1Char('\n') + tr("Warnings:") + QLatin1Char('\n') + warnings.join(QLatin1Char('\n'));
    m_summary->setText(text);
    if (QAbstractButton* finish = button(QWizard::FinishButton)) finish->setEnabled(errors.isEmpty());
}

bool SetupWizard::writeEnv(QString* error) {
    if (!allValid()) {
        *error = tr("Some fields are not valid.");
        return false;
    }
    const QMap<QString, QString> values = currentValues();
    for (auto it = values.constBegin(); it != values.constEnd(); ++it) {
        // A field the file never had and the user left empty stays out of the file.
        if (it.value().isEmpty() && !m_store->fileHas(it.key())) continue;
        if (!m_store->set(it.key(), it.value(), error)) return false;
    }
    if (!m_store->save(error)) return false;
    emit envWritten(m_store->path());
    return true;
}

void SetupWizard::accept() {
    QString error;
    if (!writeEnv(&error)) {
        QMessageBox::warning(this, tr("Cannot write .env"), error);
        return;
    }
    QWizard::accept();
}

}  // namespace ts::ui
