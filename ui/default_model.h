// The embedded default model (issue 8) and which model the control center opens on.
//
// The default is resources/models/<defaultModelName()> of the source tree, installed as
// <prefix>/share/twinspark/models/<name> (the install rule in app/CMakeLists.txt). Of the two shipped variants
// the EXL3 export is the default, as issue 8 asks, because it meets the EXL3 bar (>= 90% held-out
// exact answers, docs/QUALITY.md); scripts/setup.sh and the README name the same folder.
#pragma once

#include <QString>
#include <QStringList>

namespace ts::ui {

// The folder name of the default model: "glm5-next-tiny-exl3" (routed experts EXL3 4 bpw; the BF16 original is
// glm5-next-tiny beside it).
QString defaultModelName();

// Where the default model is looked for, in order: installed next to the binary (<prefix>/bin →
// <prefix>/share/twinspark/models/NAME), the source tree of a build directory inside it (build/app →
// resources/models/NAME, also one level up or down), the working directory's resources/models/NAME, and the
// source tree the binary was built from (`sourceDir`; empty = none).
QStringList defaultModelCandidates(const QString& appDir, const QString& workDir, const QString& sourceDir);

// The first candidate that holds a config.json, as an absolute clean path; empty when there is none.
QString findDefaultModel(const QString& appDir, const QString& workDir, const QString& sourceDir);

// findDefaultModel for this process: the application's folder, the current directory and the source tree of
// this build.
QString defaultModelPath();

// The model the control center loads at start: the --model option, else MODEL_PATH (.env or environment), else
// the last model loaded if it still holds a config.json (a deleted or moved folder falls through), else
// `defaultModel`. Empty when none applies.
QString startupModel(const QString& cliModel, const QString& envModel, const QString& lastUsed,
                     const QString& defaultModel);

}  // namespace ts::ui
