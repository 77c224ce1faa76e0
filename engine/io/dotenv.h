// The deployment configuration `.env`, in the recipe's format: the subset of bash that its launcher
// `source`s — `KEY=VALUE` lines (optionally `export KEY=VALUE`), values plain, 'single' or "double"
// quoted, `#` comment lines, blank lines, and ` # comment` after an unquoted value.
//
// Editing is surgical: set() rewrites only the value of the line that holds the key (its comment and
// `export` stay), new keys are appended, and every other line — comments, unknown keys, even lines we
// cannot parse — is written back byte for byte. A human's file survives the GUI.
//
// Precedence (as the recipe's launcher): values given on the command line or in the environment win
// over the file; effective() merges them without touching the file.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ts {

class DotEnv {
public:
    struct Problem {
        int line = 0;  // 1-based
        std::string message;
    };

    // Never throws: lines that are not comments, blanks or valid assignments are kept verbatim and
    // reported in problems() (the launcher would fail on them; the GUI shows them).
    static DotEnv parse(std::string_view text);
    // Throws ts::Error(NotFound) when the file is missing, ts::Error(Io) when it cannot be read.
    static DotEnv load(const std::filesystem::path& path);
    // The recipe's auto-create: when `path` is missing, `example` is copied there first (byte for byte)
    // and *created is set. Throws ts::Error(NotFound) when neither exists.
    static DotEnv loadOrCreate(const std::filesystem::path& path, const std::filesystem::path& example,
                               bool* created = nullptr);

    std::optional<std::string> get(std::string_view key) const;
    bool contains(std::string_view key) const { return get(key).has_value(); }
    // Sets the value of the last assignment of `key` (the one bash keeps), or appends `KEY=value`.
    // Throws ts::Error(InvalidArgument) for a key that is not a shell identifier or a value with a
    // newline or NUL (it could not be written back safely).
    void set(std::string_view key, std::string_view value);
    // Removes every assignment of `key`; false if there was none.
    bool remove(std::string_view key);
    // Keys in order of first appearance.
    std::vector<std::string> keys() const;
    std::map<std::string, std::string> values() const;
    const std::vector<Problem>& problems() const { return m_problems; }

    std::string serialize() const;
    // Atomic (temp file in the same directory, fsync, rename): a crash never leaves half a .env.
    void save(const std::filesystem::path& path) const;

    // The file's values overlaid by `overrides` (environment, then command line: later wins).
    std::map<std::string, std::string> effective(const std::map<std::string, std::string>& overrides) const;
    // Environment variables named `keys` that are set, and not empty, in the process environment (an empty one
    // counts as unset, as every setting `twinspark-cli serve` reads treats it: the file's value stands).
    static std::map<std::string, std::string> environmentOverrides(const std::vector<std::string>& keys);

    static bool isValidKey(std::string_view key);
    // The form set() writes: plain when safe for bash, else single-quoted ('\'' for a quote).
    static std::string quote(std::string_view value);

private:
    struct Line {
        std::string raw;      // the line as read (without its newline), used unless edited
        std::string key;      // empty for comments, blanks and unparsable lines
        std::string value;    // unquoted value
        std::string head;     // "export KEY=" or "KEY=" as written
        std::string tail;     // whitespace + comment after the value, as written
        bool edited = false;
    };
    static bool parseLine(const std::string& raw, Line* out, std::string* error);

    std::vector<Line> m_lines;
    bool m_finalNewline = true;
    std::vector<Problem> m_problems;
};

}  // namespace ts
