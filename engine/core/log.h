// Where the engine's own messages go. The engine and the kernels never print: they call logMessage, and the
// process's front door decides where that lands. Default: stderr, one line each (the CLI and `serve`, whose
// stderr is the log). The control center installs a sink that also puts each line in its Server page's log
// pane, so a warning raised while loading (an EXL3 codebook the tensors contradict) or a request that failed
// on the engine thread is seen by someone who never looks at a terminal.
//
// Thread safety: logMessage may be called from any thread (the engine's step thread, loader threads, CUDA
// set-up). Sinks are called one at a time under a lock, so once setLogSink returns, the previous sink is not
// running and never runs again — a sink may capture an object that is destroyed right after it is replaced.
// A sink must not call logMessage or setLogSink itself (it would wait on that lock forever).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace ts {

enum class LogLevel { Info, Warning, Error };

// "info", "warning", "error".
const char* logLevelName(LogLevel level);

// One message: no trailing newline, may span lines. The sink receives it as given.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// Installs a sink for the whole process and returns the one it replaces; an empty sink restores the default
// (stderr). Front doors only (main, the GUI's controller); libraries never replace it.
LogSink setLogSink(LogSink sink);

// Writes `message` to the current sink. The default sink writes "<message>\n" to stderr; the prefixes
// ("warning:", "engine:", "CUDA:") are the callers', as they always were.
void logMessage(LogLevel level, std::string_view message);

// The default sink's write: "<message>\n" to stderr, flushed. For sinks that add a destination and keep the
// terminal's copy.
void logToStderr(std::string_view message);

// printf-style convenience: formats, then logMessage.
[[gnu::format(printf, 2, 3)]] void logf(LogLevel level, const char* format, ...);

}  // namespace ts
