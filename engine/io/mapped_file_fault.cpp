#include "io/mapped_file_fault.h"

#include <csignal>
#include <cstring>
#include <unistd.h>

namespace ts {

namespace {

void onBusError(int sig) {
    static const char kMessage[] =
        "\nfatal: SIGBUS reading a memory-mapped file: a model file (.safetensors) was truncated or rewritten while "
        "loaded. Stop TwinSpark before replacing or editing model files (a download or sync writes a new folder).\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    std::signal(sig, SIG_DFL);
    ::raise(sig);
}

}  // namespace

void installMappedFileFaultReport() {
    struct sigaction sa {};
    sa.sa_handler = onBusError;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;  // a fault in the handler itself ends the process at once
    ::sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace ts
