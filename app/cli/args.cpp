#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"

namespace ts::cli {

Args::Args(int argc, char** argv) {
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            m_help = true;
            continue;
        }
        if (a.rfind("--", 0) != 0) fail(ErrorKind::InvalidArgument, "unexpected argument '" + a + "'");
        std::string key = a.substr(2), value;
        bool hasValue = false;
        if (auto eq = key.find('='); eq != std::string::npos) {
            value = key.substr(eq + 1);
            key = key.substr(0, eq);
            hasValue = true;
        } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
            value = argv[++i];
            hasValue = true;
        }
        if (m_values.count(key) || m_flags.count(key)) fail(ErrorKind::InvalidArgument, "option --" + key + " given twice");
        if (hasValue) m_values[key] = value;
        else m_flags.insert(key);
    }
}

void Args::accept(const std::set<std::string>& options, const std::set<std::string>& flags) const {
    for (const auto& [k, v] : m_values) {
        if (flags.count(k)) fail(ErrorKind::InvalidArgument, "option --" + k + " takes no value");
        if (!options.count(k)) fail(ErrorKind::InvalidArgument, "unknown option --" + k);
    }
    for (const auto& k : m_flags) {
        if (options.count(k)) fail(ErrorKind::InvalidArgument, "option --" + k + " needs a value");
        if (!flags.count(k)) fail(ErrorKind::InvalidArgument, "unknown option --" + k);
    }
}

bool Args::flag(const std::string& name) const { return m_flags.count(name) > 0; }

std::optional<std::string> Args::get(const std::string& name) const {
    auto it = m_values.find(name);
    if (it == m_values.end()) return std::nullopt;
    return it->second;
}

std::string Args::require(const std::string& name) const {
    auto v = get(name);
    if (!v || v->empty()) fail(ErrorKind::InvalidArgument, "missing required option --" + name);
    return *v;
}

static bool parseInt(const std::string& s, int64_t& out) {
    if (s.empty()) return false;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno || *end || end == s.c_str()) return false;
    out = v;
    return true;
}

int64_t Args::getInt(const std::string& name, int64_t def, int64_t min, int64_t max) const {
    auto v = get(name);
    if (!v) return def;
    int64_t x;
    if (!parseInt(*v, x) || x < min || x > max)
        fail(ErrorKind::InvalidArgument, "--" + name + " must be an integer in [" + std::to_string(min) + ", " +
                                             std::to_string(max) + "], got '" + *v + "'");
    return x;
}

std::string Args::requireTextOrFile(const std::string& name) const {
    const std::string v = require(name);
    if (v.empty() || v[0] != '@') return v;
    const std::string path = v.substr(1);
    std::error_code ec;
    if (path.empty() || !std::filesystem::is_regular_file(path, ec))  // a directory opens, then reads as nothing
        fail(ErrorKind::InvalidArgument, "--" + name + ": cannot read '" + path + "' (not a file)");
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(ErrorKind::InvalidArgument, "--" + name + ": cannot read '" + path + "'");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) fail(ErrorKind::InvalidArgument, "--" + name + ": cannot read '" + path + "'");
    std::string s = text.str();
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    if (s.empty()) fail(ErrorKind::InvalidArgument, "--" + name + ": '" + path + "' is empty");
    return s;
}

std::vector<int32_t> Args::parseIds(const std::string& option, const std::string& text) {
    std::vector<int32_t> ids;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        int64_t v;
        if (!parseInt(item, v) || v < 0 || v > INT32_MAX)
            fail(ErrorKind::InvalidArgument, "--" + option + ": '" + item + "' (element " +
                                                 std::to_string(ids.size()) + ") is not a token id");
        ids.push_back(int32_t(v));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (ids.empty()) fail(ErrorKind::InvalidArgument, "--" + option + " is empty");
    return ids;
}

}  // namespace ts::cli
