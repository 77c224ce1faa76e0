#include "io/dotenv.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"

namespace ts {

namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Characters bash treats specially in an unquoted word; a value with any of them is written quoted.
bool needsQuoting(std::string_view v) {
    if (v.empty()) return false;
    for (char c : v) {
        if (std::isalnum(static_cast<unsigned char>(c))) continue;
        if (std::strchr("_-.,:/@%+=", c) != nullptr) continue;
        return true;
    }
    return false;
}

}  // namespace

bool DotEnv::isValidKey(std::string_view key) {
    if (key.empty()) return false;
    const auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
    if (!alpha(key[0])) return false;
    for (char c : key)
        if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
    return true;
}

std::string DotEnv::quote(std::string_view value) {
    if (!needsQuoting(value)) return std::string(value);
    std::string out = "'";
    for (char c : value) {
        if (c == '\'') out += "'\\''";  // close, escaped quote, reopen: the only way inside '…'
        else out += c;
    }
    return out + "'";
}

// One line: blank / comment (key stays empty, no error), an assignment, or an error.
bool DotEnv::parseLine(const std::string& raw, Line* out, std::string* error) {
    out->raw = raw;
    size_t i = 0;
    while (i < raw.size() && isSpace(raw[i])) ++i;
    if (i == raw.size() || raw[i] == '#') return true;
    const size_t headStart = 0;
    if (raw.compare(i, 7, "export ") == 0 || raw.compare(i, 7, "export\t") == 0) {
        i += 7;
        while (i < raw.size() && isSpace(raw[i])) ++i;
    }
    const size_t keyStart = i;
    while (i < raw.size() && raw[i] != '=' && !isSpace(raw[i])) ++i;
    const std::string key = raw.substr(keyStart, i - keyStart);
    if (i == raw.size() || raw[i] != '=') {
        *error = "expected KEY=VALUE (no spaces around '=')";
        return false;
    }
    if (!isValidKey(key)) {
        *error = "'" + key + "' is not a valid variable name";
        return false;
    }
    ++i;  // '='
    out->head = raw.substr(headStart, i - headStart);
    std::string value;
    // A bash word: unquoted, '…' and "…" segments concatenated until whitespace.
    while (i < raw.size() && !isSpace(raw[i])) {
        const char c = raw[i];
        if (c == '\'') {
            const size_t end = raw.find('\'', i + 1);
            if (end == std::string::npos) {
                *error = "unterminated single quote";
                return false;
            }
            value += raw.substr(i + 1, end - i - 1);
            i = end + 1;
        } else if (c == '"') {
            ++i;
            bool closed = false;
            while (i < raw.size()) {
                if (raw[i] == '"') {
                    closed = true;
                    ++i;
                    break;
                }
                // Inside "…" a backslash escapes only these (bash); elsewhere it is literal.
                if (raw[i] == '\\' && i + 1 < raw.size() && std::strchr("\"\\$`", raw[i + 1]) != nullptr) ++i;
                value += raw[i++];
            }
            if (!closed) {
                *error = "unterminated double quote";
                return false;
            }
        } else if (c == '\\' && i + 1 < raw.size()) {
            value += raw[i + 1];
            i += 2;
        } else {  // includes '#': inside a word it is not a comment (KEY=#x is "#x" in bash)
            value += c;
            ++i;
        }
    }
    // After the value: nothing, or whitespace then a comment. `KEY=a b` would run `b` in bash.
    size_t j = i;
    while (j < raw.size() && isSpace(raw[j])) ++j;
    if (j < raw.size() && raw[j] != '#') {
        *error = "unquoted space in the value of " + key + " (quote the value)";
        return false;
    }
    out->key = key;
    out->value = value;
    out->tail = raw.substr(i);
    return true;
}

DotEnv DotEnv::parse(std::string_view text) {
    DotEnv env;
    env.m_finalNewline = text.empty() || text.back() == '\n';
    size_t start = 0;
    int lineNo = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        ++lineNo;
        Line line;
        std::string error;
        if (!parseLine(std::string(text.substr(start, end - start)), &line, &error)) {
            line.key.clear();
            env.m_problems.push_back({lineNo, error});
        }
        env.m_lines.push_back(std::move(line));
        start = end + 1;
    }
    return env;
}

DotEnv DotEnv::load(const std::filesystem::path& path) {
    std::error_code ec;
    const std::filesystem::file_status st = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(st)) fail(ErrorKind::NotFound, ".env not found: " + path.string());
    // A pipe would block the start until something writes to it; a folder is no file. /dev/null (an empty
    // .env, which the tests use) and other devices are read up to the size limit.
    if (std::filesystem::is_directory(st) || std::filesystem::is_fifo(st) || std::filesystem::is_socket(st))
        fail(ErrorKind::Io, "cannot read " + path.string() + ": it is a " +
                                (std::filesystem::is_directory(st) ? "folder" : "pipe or socket") + ", not a .env file");
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(ErrorKind::Io, "cannot read " + path.string() + ": " + std::strerror(errno));
    constexpr size_t kMaxBytes = 1 << 20;  // a deployment .env is a few KB
    std::string text(kMaxBytes + 1, '\0');
    in.read(text.data(), std::streamsize(text.size()));
    text.resize(size_t(in.gcount()));
    if (text.size() > kMaxBytes)
        fail(ErrorKind::InvalidFile, path.string() + " is larger than 1 MiB: not a .env file");
    if (in.bad()) fail(ErrorKind::Io, "cannot read " + path.string() + ": " + std::strerror(errno));
    return parse(text);
}

DotEnv DotEnv::loadOrCreate(const std::filesystem::path& path, const std::filesystem::path& example, bool* created) {
    if (created) *created = false;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        if (!std::filesystem::exists(example, ec))
            fail(ErrorKind::NotFound, "neither " + path.string() + " nor " + example.string() + " exists");
        load(example).save(path);  // through save(): atomic, so a half-copied .env never exists
        if (created) *created = true;
    }
    return load(path);
}

std::optional<std::string> DotEnv::get(std::string_view key) const {
    for (auto it = m_lines.rbegin(); it != m_lines.rend(); ++it)  // bash keeps the last assignment
        if (it->key == key) return it->value;
    return std::nullopt;
}

void DotEnv::set(std::string_view key, std::string_view value) {
    if (!isValidKey(key)) fail(ErrorKind::InvalidArgument, "'" + std::string(key) + "' is not a valid variable name");
    if (value.find('\n') != std::string_view::npos || value.find('\0') != std::string_view::npos)
        fail(ErrorKind::InvalidArgument, "the value of " + std::string(key) + " cannot hold a newline or NUL");
    for (auto it = m_lines.rbegin(); it != m_lines.rend(); ++it) {
        if (it->key != key) continue;
        if (it->value == value) return;  // unchanged: keep the line exactly as the user wrote it
        it->value = std::string(value);
        it->edited = true;  // head and tail (export, comment) are kept around the new value
        return;
    }
    Line line;
    line.key = std::string(key);
    line.value = std::string(value);
    line.head = line.key + "=";
    line.edited = true;
    if (!m_finalNewline && !m_lines.empty()) m_finalNewline = true;  // the new line must start on its own
    m_lines.push_back(std::move(line));
}

bool DotEnv::remove(std::string_view key) {
    const size_t before = m_lines.size();
    std::erase_if(m_lines, [&](const Line& l) { return l.key == key; });
    return m_lines.size() != before;
}

std::vector<std::string> DotEnv::keys() const {
    std::vector<std::string> out;
    for (const Line& l : m_lines)
        if (!l.key.empty() && std::find(out.begin(), out.end(), l.key) == out.end()) out.push_back(l.key);
    return out;
}

std::map<std::string, std::string> DotEnv::values() const {
    std::map<std::string, std::string> out;
    for (const Line& l : m_lines)
        if (!l.key.empty()) out[l.key] = l.value;  // later lines overwrite: bash semantics
    return out;
}

std::string DotEnv::serialize() const {
    std::string out;
    for (size_t i = 0; i < m_lines.size(); ++i) {
        const Line& l = m_lines[i];
        out += l.edited ? l.head + quote(l.value) + l.tail : l.raw;
        if (i + 1 < m_lines.size() || m_finalNewline) out += '\n';
    }
    return out;
}

void DotEnv::save(const std::filesystem::path& path) const {
    // 0600 whatever the file had: it may hold the API key and registry tokens (a .env copied from the 0644
    // example must not stay readable by all). A symlinked .env stays a link (its target is rewritten).
    writeFileAtomically(path.string(), serialize(), 0600, false);
}

std::map<std::string, std::string> DotEnv::effective(const std::map<std::string, std::string>& overrides) const {
    std::map<std::string, std::string> out = values();
    for (const auto& [k, v] : overrides) out[k] = v;
    return out;
}

std::map<std::string, std::string> DotEnv::environmentOverrides(const std::vector<std::string>& keys) {
    std::map<std::string, std::string> out;
    for (const std::string& k : keys)
        if (const char* v = std::getenv(k.c_str()); v && *v) out[k] = v;  // empty: unset, the file's value stands
    return out;
}

}  // namespace ts
