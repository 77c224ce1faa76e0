// Setup (issue 7, page 1): a QWizard over the deployment `.env`. Each field is checked as the user types
// (EnvSchema), explains itself (with the recipe's warnings), and a page cannot be left while one of its
// fields is wrong. The recipe's forbidden settings are listed but cannot be selected, with the reason
// next to them. Finish writes the file through EnvStore: comments and unknown keys are kept.
#pragma once

#include <QHash>
#include <QWizard>

#include "ui/env_schema.h"

class QLabel;
class QComboBox;
class QLineEdit;

namespace ts::ui {

class EnvStore;
class FieldPage;

class SetupWizard final : public QWizard {
    Q_OBJECT
public:
    // `store` must outlive the wizard and be loaded.
    explicit SetupWizard(EnvStore* store, QWidget* parent = nullptr);

    // Sets a field as if the user had typed or picked the value. False (and nothing changes) for a
    // choice the recipe forbids or does not know.
    bool setFieldValue(const QString& key, const QString& value);
    QString fieldValue(const QString& key) const;
    Verdict verdict(const QString& key) const;
    QWidget* editor(const QString& key) const { return m_editors.value(key); }
    QLabel* messageLabel(const QString& key) const { return m_messages.value(key); }
    // True when every field is acceptable (warnings allowed).
    bool allValid() const;
    // Copies the fields into the store and saves it. False with *error.
    bool writeEnv(QString* error);

signals:
    void envWritten(const QString& path);

protected:
    void accept() override;

private:
    FieldPage* addFieldPage(const QString& title, const QString& subtitle, const QStringList& keys);
    QWidget* makeEditor(const FieldSpec& f);
    void revalidate();
    QMap<QString, QString> currentValues() const;

    EnvStore* m_store;
    QHash<QString, QWidget*> m_editors;
    QHash<QString, QLabel*> m_messages;
    QList<FieldPage*> m_pages;
    QLabel* m_summary = nullptr;
};

}  // namespace ts::ui
