#include "core/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ts {

namespace {

struct SinkStack {
    std::mutex mutex;
    std::vector<std::pair<uint64_t, LogSink>> sinks;  // the back one is current
    uint64_t nextId = 1;
};

SinkStack& stack() {
    static SinkStack s;
    return s;
}

// Without stdio's buffer or any allocation: the last resort when a sink or formatting failed.
void rawWrite(const char* data, size_t n) noexcept {
    while (n > 0) {
        const ssize_t w = ::write(2, data, n);
        if (w <= 0) return;
        data += w;
        n -= size_t(w);
    }
}

}  // namespace

const char* logLevelName(LogLevel level) noexcept {
    switch (level) {
    case LogLevel::Info: return "info";
    case LogLevel::Warning: return "warning";
    case LogLevel::Error: return "error";
    }
    return "info";
}

uint64_t addLogSink(LogSink sink) {
    SinkStack& s = stack();
    std::lock_guard<std::mutex> lock(s.mutex);
    const uint64_t id = s.nextId++;
    s.sinks.emplace_back(id, std::move(sink));
    return id;
}

void removeLogSink(uint64_t id) {
    SinkStack& s = stack();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto it = s.sinks.begin(); it != s.sinks.end(); ++it)
        if (it->first == id) {
            s.sinks.erase(it);
            return;
        }
}

void logToStderr(std::string_view message) noexcept {
    std::fwrite(message.data(), 1, message.size(), stderr);
    std::fputc('\n', stderr);
    std::fflush(stderr);
}

void logMessage(LogLevel level, std::string_view message) noexcept {
    SinkStack& s = stack();
    std::unique_lock<std::mutex> lock(s.mutex, std::defer_lock);
    try {
        lock.lock();
    } catch (...) {  // std::system_error: the line still goes out
        logToStderr(message);
        return;
    }
    if (s.sinks.empty() || !s.sinks.back().second) {
        logToStderr(message);
        return;
    }
    try {
        s.sinks.back().second(level, message);
    } catch (...) {
        // A sink that fails (out of memory while copying the line) must not take the engine thread down: the
        // line goes to stderr instead.
        logToStderr(message);
    }
}

void logFormat(LogLevel level, const char* format, ...) noexcept {
    va_list args;
    va_start(args, format);
    va_list again;
    va_copy(again, args);
    const int n = std::vsnprintf(nullptr, 0, format, args);
    va_end(args);
    std::string text;
    bool formatted = true;
    try {
        if (n > 0) {
            text.resize(size_t(n) + 1);
            std::vsnprintf(text.data(), text.size(), format, again);
            text.resize(size_t(n));
        }
    } catch (...) {  // no memory for the text
        formatted = false;
    }
    va_end(again);
    if (!formatted) {  // the format itself, unexpanded, still says what happened
        rawWrite(format, std::char_traits<char>::length(format));
        rawWrite("\n", 1);
        return;
    }
    while (!text.empty() && text.back() == '\n') text.pop_back();  // the sink adds line ends where it needs them
    logMessage(level, text);
}

}  // namespace ts
