// Shared plumbing of twinspark-cli subcommands: a small "--key value" / "--flag" argument parser with
// strict checking (an unknown or repeated option, or a missing value, is an error naming it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ts::cli {

class Args {
public:
    Args(int argc, char** argv);
    // Declares the options a command accepts; call once, first. Flags take no value.
    void accept(const std::set<std::string>& options, const std::set<std::string>& flags = {}) const;
    bool help() const { return m_help; }
    bool flag(const std::string& name) const;
    std::optional<std::string> get(const std::string& name) const;
    std::string require(const std::string& name) const;
    int64_t getInt(const std::string& name, int64_t def, int64_t min, int64_t max) const;
    // "1,2,3" -> ids; every element must be an integer in [0, 2^31).
    static std::vector<int32_t> parseIds(const std::string& option, const std::string& text);
    // require(name), where "@PATH" stands for the contents of the file PATH with its trailing whitespace (a final
    // newline) dropped: for id lists longer than one command-line argument may be (Linux: 128 KiB, ~18k ids).
    std::string requireTextOrFile(const std::string& name) const;

private:
    std::map<std::string, std::string> m_values;
    std::set<std::string> m_flags;
    bool m_help = false;
};

int cmdLogits(const Args& args);
int cmdGenerate(const Args& args);
int cmdPlan(const Args& args);
int cmdBenchExl3(const Args& args);
int cmdTokenize(const Args& args);
int cmdDetokenize(const Args& args);
int cmdRender(const Args& args);
int cmdInspect(const Args& args);
int cmdQuantize(const Args& args);
int cmdServe(const Args& args);
int cmdSelftest(const Args& args);
int cmdBenchDevice(const Args& args);

}  // namespace ts::cli
