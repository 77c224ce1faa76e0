#include "io/default_paths.h"

#include <cstdlib>
#include <system_error>

namespace ts {

namespace fs = std::filesystem;

namespace {

std::string envValue(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

}  // namespace

bool isModelDir(const fs::path& dir) {
    std::error_code ec;
    return !dir.empty() && fs::is_regular_file(dir / "config.json", ec);
}

const std::string& defaultModelName() {
    static const std::string name = "glm5-next-tiny-exl3";
    return name;
}

const std::string& defaultModelOriginalName() {
    static const std::string name = "glm5-next-tiny";
    return name;
}

std::vector<fs::path> defaultModelCandidates(const fs::path& appDir, const fs::path& workDir, const fs::path& sourceDir) {
    const fs::path inSource = fs::path("resources") / "models" / defaultModelName();
    std::vector<fs::path> c;
    if (!appDir.empty()) {
        c.push_back(appDir / ".." / "share" / "twinspark" / "models" / defaultModelName());  // installed: <prefix>/bin
        c.push_back(appDir / ".." / ".." / inSource);                                       // build/app in the source tree
        c.push_back(appDir / ".." / inSource);                                              // a binary one level down
        c.push_back(appDir / inSource);
    }
    if (!workDir.empty()) c.push_back(workDir / inSource);
    if (!sourceDir.empty()) c.push_back(sourceDir / inSource);
    std::vector<fs::path> out;
    for (const fs::path& p : c) {
        fs::path n = p.lexically_normal();
        if (n.has_filename() == false) n = n.parent_path();  // "a/b/" → "a/b"
        bool seen = false;
        for (const fs::path& o : out) seen = seen || o == n;
        if (!seen) out.push_back(n);
    }
    return out;
}

std::optional<fs::path> findDefaultModel(const fs::path& appDir, const fs::path& workDir, const fs::path& sourceDir) {
    for (const fs::path& c : defaultModelCandidates(appDir, workDir, sourceDir)) {
        if (!isModelDir(c)) continue;
        std::error_code ec;
        const fs::path abs = fs::absolute(c, ec);
        return ec ? c : abs.lexically_normal();
    }
    return std::nullopt;
}

fs::path executableDir() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : exe.parent_path();
}

fs::path defaultEnvPath() {
    if (std::string explicitPath = envValue("TWINSPARK_ENV"); !explicitPath.empty()) return explicitPath;
    // The recipe keeps .env next to its scripts; running from a checkout, that is the current folder.
    std::error_code ec;
    if (fs::exists(".env", ec)) return fs::absolute(".env", ec).lexically_normal();
    fs::path config = envValue("XDG_CONFIG_HOME");
    if (config.empty() || !config.is_absolute()) config = fs::path(envValue("HOME")) / ".config";
    return config / "TwinSpark" / "TwinSpark" / ".env";
}

}  // namespace ts
