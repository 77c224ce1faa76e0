// Model weights are memory-mapped (io/safetensors.h): a shard truncated or rewritten in place while a model is
// loaded turns the next read of it into SIGBUS, which kills the process without a word. This installs a SIGBUS
// handler that says so on stderr (one write(2), async-signal-safe) and then re-raises the signal with its
// default action: the process still ends as killed by SIGBUS (core dump and exit status as before), but the
// log names the cause. Call once at the start of main().
#pragma once

namespace ts {

void installMappedFileFaultReport();

}  // namespace ts
