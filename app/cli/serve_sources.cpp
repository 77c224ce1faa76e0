#include "cli/serve_sources.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "core/error.h"
#include "io/default_paths.h"
#include "io/dotenv.h"

namespace ts::cli {

namespace fs = std::filesystem;

void applyEnvFile(const Args& args, const std::function<void(const std::string&)>& note) {
    const auto given = args.get("env");
    const char* fromEnv = std::getenv("TWINSPARK_ENV");
    const bool named = given || (fromEnv && *fromEnv);
    const fs::path path = given ? fs::path(*given) : defaultEnvPath();
    const std::string who = given ? "--env" : "TWINSPARK_ENV";
    std::error_code ec;
    if (path.empty() || !fs::exists(path, ec)) {
        if (named) fail(ErrorKind::InvalidArgument, who + ": no such file '" + path.string() + "'");
        return;  // no .env anywhere: the environment and the recipe's defaults
    }
    if (fs::is_directory(path, ec)) {
        if (named) fail(ErrorKind::InvalidArgument, who + " names a folder, not a file: '" + path.string() + "'");
        // Found by the default rule (./.env), not named: a folder of that name is not a deployment file.
        note(path.string() + " is a folder, not a .env file: not read");
        return;
    }
    const DotEnv env = DotEnv::load(path);  // ts::Error(Io) when it cannot be read
    for (const auto& p : env.problems())
        note(path.string() + ":" + std::to_string(p.line) + ": " + p.message + " (line skipped)");
    std::string applied, overridden;
    for (const auto& [key, value] : env.values()) {
        // An empty variable counts as unset, as every setting read treats it.
        if (const char* cur = std::getenv(key.c_str()); cur && *cur) {
            overridden += (overridden.empty() ? "" : ", ") + key;
            continue;
        }
        if (::setenv(key.c_str(), value.c_str(), 1) != 0)
            fail(ErrorKind::InvalidArgument, path.string() + ": cannot use the value of " + key);
        applied += (applied.empty() ? "" : ", ") + key;
    }
    // Names only: a .env holds secrets (VLLM_API_KEY, GHCR_TOKEN).
    note("settings from " + path.string() + ": " + (applied.empty() ? "none" : applied) +
         (overridden.empty() ? " (the environment and command-line options win over the file)"
                             : "; the environment's " + overridden + " win over the file's (command-line options win "
                                                                     "over both)"));
}

std::string resolveServeModel(const Args& args, const std::function<void(const std::string&)>& note) {
    if (auto m = args.get("model")) {
        if (m->empty()) fail(ErrorKind::InvalidArgument, "--model must not be empty");
        return *m;
    }
    if (const char* e = std::getenv("MODEL_PATH"); e && *e) {
        note(std::string("model from MODEL_PATH: ") + e);
        return e;
    }
    if (const auto found = findEmbeddedModel()) {
        note("no --model or MODEL_PATH: serving the embedded default model " + found->string());
        return found->string();
    }
    std::string places;
    for (const auto& c : embeddedModelCandidates()) places += "\n  " + c.string();
    fail(ErrorKind::InvalidArgument, "no model to serve: give --model DIR or set MODEL_PATH (environment or .env); the "
                                     "embedded default model (" + defaultModelName() + ") is not at any of:" + places);
}

}  // namespace ts::cli
