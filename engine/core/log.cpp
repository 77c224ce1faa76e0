#include "core/log.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <vector>

namespace ts {

namespace {

std::mutex& sinkMutex() {
    static std::mutex m;
    return m;
}

LogSink& currentSink() {  // under sinkMutex
    static LogSink s;
    return s;
}

}  // namespace

void logToStderr(std::string_view message) {
    std::fwrite(message.data(), 1, message.size(), stderr);
    std::fputc('\n', stderr);
    std::fflush(stderr);
}

const char* logLevelName(LogLevel level) {
    switch (level) {
    case LogLevel::Info: return "info";
    case LogLevel::Warning: return "warning";
    case LogLevel::Error: return "error";
    }
    return "info";
}

LogSink setLogSink(LogSink sink) {
    std::lock_guard<std::mutex> lock(sinkMutex());
    LogSink previous = std::move(currentSink());
    currentSink() = std::move(sink);
    return previous;
}

void logMessage(LogLevel level, std::string_view message) {
    std::lock_guard<std::mutex> lock(sinkMutex());
    const LogSink& s = currentSink();
    if (!s) {
        logToStderr(message);
        return;
    }
    try {
        s(level, message);
    } catch (...) {
        // A sink that fails (out of memory while copying the line) must not take the engine thread down: the
        // line goes to stderr instead.
        logToStderr(message);
    }
}

void logf(LogLevel level, const char* format, ...) {
    va_list args;
    va_start(args, format);
    va_list again;
    va_copy(again, args);
    const int n = std::vsnprintf(nullptr, 0, format, args);
    va_end(args);
    std::string text;
    if (n > 0) {
        std::vector<char> buf(size_t(n) + 1);
        std::vsnprintf(buf.data(), buf.size(), format, again);
        text.assign(buf.data(), size_t(n));
    }
    va_end(again);
    while (!text.empty() && text.back() == '\n') text.pop_back();  // the sink adds line ends where it needs them
    logMessage(level, text);
}

}  // namespace ts
