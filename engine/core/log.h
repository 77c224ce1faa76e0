// Where the engine's own messages go. The engine and the kernels never print: they call logMessage, and the
// process's front door decides where that lands. Default: stderr, one line each (the CLI and `serve`, whose
// stderr is the log). The control center adds a sink that also puts each line in its Server page's log pane,
// so a warning raised while loading (an EXL3 codebook the tensors contradict) or a request that failed on the
// engine thread is seen by someone who never looks at a terminal.
//
// Sinks form a stack: the newest one still installed receives every message; removing one (in any order)
// hands the messages back to the one below, and stderr is under them all. Thread safety: logMessage may be
// called from any thread (the engine's step thread, loader threads, CUDA set-up). Sinks are called one at a time
// under a lock, so once removeLogSink returns, that sink is not running and never runs again — a sink may
// capture an object that is destroyed right after it is removed. A sink must not log, add or remove sinks, or
// call into the engine (it would wait on that lock, or on a lock its caller holds).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace ts {

enum class LogLevel { Info, Warning, Error };

// "info", "warning", "error".
const char* logLevelName(LogLevel level) noexcept;

// One message: no trailing newline, may span lines. The sink receives it as given.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// Installs `sink` on top of the stack; returns its id for removeLogSink (never 0). Front doors only (the GUI's
// controller, tests); libraries never install one.
uint64_t addLogSink(LogSink sink);
// Removes the sink with that id, wherever it is in the stack; unknown ids (0, already removed) are ignored.
void removeLogSink(uint64_t id);

// Writes `message` to the current sink; never throws (a sink that throws, or no memory to format, falls back to
// a plain write to stderr), so it is safe in destructors and on the engine thread. The prefixes ("warning:",
// "engine:", "CUDA:") are the callers'.
void logMessage(LogLevel level, std::string_view message) noexcept;

// The default sink's write: "<message>\n" to stderr, flushed. For sinks that add a destination and keep the
// terminal's copy.
void logToStderr(std::string_view message) noexcept;

// printf-style: formats, drops trailing newlines, then logMessage. (Not "logf": that is the C library's
// float logarithm, which this would hide inside namespace ts.)
[[gnu::format(printf, 2, 3)]] void logFormat(LogLevel level, const char* format, ...) noexcept;

}  // namespace ts
