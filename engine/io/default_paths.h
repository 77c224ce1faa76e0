// Where a TwinSpark binary finds what the user did not name: the embedded default model (issue 8) and the
// deployment .env. Qt-free, so that the headless `twinspark-cli serve` and the control center (ui/default_model,
// ui/env_store, which wrap or mirror these rules) open the same model and read the same settings.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ts {

// The folder name of the default model: "glm5-next-tiny-exl3" (routed experts EXL3 4 bpw; the BF16 original is
// glm5-next-tiny beside it in resources/models/).
const std::string& defaultModelName();
// The folder name of its BF16 original, "glm5-next-tiny", which lies beside it where the source tree is (what
// `selftest` checks too when no model is named: the two take different expert paths).
const std::string& defaultModelOriginalName();

// Where the default model is looked for, in order, each lexically normalised: installed next to the binary
// (<prefix>/bin → <prefix>/share/twinspark/models/NAME), the source tree of a build directory inside it
// (build/app → resources/models/NAME, also one level up or down), the working directory's resources/models/NAME,
// and the source tree the binary was built from. An empty argument contributes nothing; no duplicates.
std::vector<std::filesystem::path> defaultModelCandidates(const std::filesystem::path& appDir,
                                                          const std::filesystem::path& workDir,
                                                          const std::filesystem::path& sourceDir);

// Whether `dir` looks like a model folder: it holds a config.json (what every lookup here checks).
bool isModelDir(const std::filesystem::path& dir);

// The first candidate that holds a config.json, as an absolute path; nullopt when there is none.
std::optional<std::filesystem::path> findDefaultModel(const std::filesystem::path& appDir,
                                                      const std::filesystem::path& workDir,
                                                      const std::filesystem::path& sourceDir);

// The folder of the running executable (/proc/self/exe); empty when it cannot be read.
std::filesystem::path executableDir();

// The deployment .env a binary uses when none is named: $TWINSPARK_ENV when set and not empty, else ./.env when
// it exists, else the control center's configuration folder, as Qt's QStandardPaths::AppConfigLocation places it
// for organisation and application "TwinSpark": $XDG_CONFIG_HOME (when absolute, else ~/.config) +
// /TwinSpark/TwinSpark/.env. The returned file need not exist.
std::filesystem::path defaultEnvPath();

}  // namespace ts
