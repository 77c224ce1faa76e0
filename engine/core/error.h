// Typed errors of the engine. Every failure that comes from outside input (a file, a config field, a
// command-line value) is thrown as ts::Error with a message that names the offending thing; the CLI turns
// it into a non-zero exit, the server into OpenAI error JSON. Programming errors use TS_CHECK.
#pragma once

#include <stdexcept>
#include <string>

namespace ts {

enum class ErrorKind {
    InvalidArgument,  // a value given by the user (CLI flag, request field) is wrong
    InvalidFile,      // a file exists but its content is malformed
    NotFound,         // a path, tensor or key is missing
    Io,               // the operating system refused (open, mmap, read)
    Unsupported,      // valid input we do not implement
    Internal,         // a broken invariant inside the engine
    DeviceLost,       // the accelerator failed in a way this process cannot recover from (a CUDA sticky error:
                      // illegal address, an uncorrectable ECC error): only a new process can use it again
};

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), m_kind(kind) {}
    ErrorKind kind() const noexcept { return m_kind; }

private:
    ErrorKind m_kind;
};

[[noreturn]] inline void fail(ErrorKind kind, const std::string& message) { throw Error(kind, message); }

}  // namespace ts

// Internal invariant check: cheap, always on; a failure is a bug in TwinSpark, not bad input.
#define TS_CHECK(cond, msg)                                                                            \
    do {                                                                                               \
        if (!(cond))                                                                                   \
            ::ts::fail(::ts::ErrorKind::Internal,                                                      \
                       std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + (msg));         \
    } while (0)
