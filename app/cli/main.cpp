// twinspark-cli: the headless front door. Each subcommand lives in its own file (cmd_*.cpp) and is
// registered in the table below. Errors from bad input are ts::Error: printed, exit code 2; an internal
// error or a lost device (a GPU fault), exit code 3.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "io/mapped_file_fault.h"

namespace {

struct Command {
    const char* name;
    const char* summary;
    int (*run)(const ts::cli::Args&);
};

const Command kCommands[] = {
    {"logits", "full-forward logits of a prompt, written as safetensors", ts::cli::cmdLogits},
    {"generate", "greedy continuation of a prompt, with the decode speed", ts::cli::cmdGenerate},
    {"plan", "the KV-pool memory plan of a config (no weights loaded)", ts::cli::cmdPlan},
    {"bench-exl3", "time the EXL3 GEMV/GEMM on a random packed matrix (prints, --json)", ts::cli::cmdBenchExl3},
    {"tokenize", "text -> token ids (JSON) with the model's tokenizer", ts::cli::cmdTokenize},
    {"detokenize", "token ids -> text", ts::cli::cmdDetokenize},
    {"render", "the exact prompt for chat messages (the model's chat template)", ts::cli::cmdRender},
    {"inspect", "tensors of a safetensors file, its EXL3 linears; --model: what the engine holds", ts::cli::cmdInspect},
    {"quantize", "a BF16 checkpoint -> EXL3 (routed experts; --all-linears for the rest), with calibration", ts::cli::cmdQuantize},
    {"selftest", "the backend against the CPU reference: every op, then whole-model logits (exit 1 on failure)", ts::cli::cmdSelftest},
    {"bench-device", "device kernel benchmarks vs copy bandwidth: EXL3 GEMV/MoE, sparse MLA, KDA (--json)", ts::cli::cmdBenchDevice},
#ifdef TS_HAVE_SERVER
    {"serve", "the OpenAI-compatible HTTP server (health 503 while loading, graceful stop on SIGINT/SIGTERM)", ts::cli::cmdServe},
#endif
};

void usage(FILE* f) {
    std::fprintf(f, "usage: twinspark-cli <command> [options]\n\ncommands:\n");
    for (const auto& c : kCommands) std::fprintf(f, "  %-12s %s\n", c.name, c.summary);
    std::fprintf(f, "\n'twinspark-cli <command> --help' lists a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
    ts::installMappedFileFaultReport();  // a model file rewritten under a running command: say so, then die
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (const auto& c : kCommands) {
        if (std::strcmp(argv[1], c.name) != 0) continue;
        try {
            ts::cli::Args args(argc - 2, argv + 2);
            return c.run(args);
        } catch (const ts::Error& e) {
            std::fprintf(stderr, "twinspark-cli %s: error: %s\n", c.name, e.what());
            return e.kind() == ts::ErrorKind::Internal || e.kind() == ts::ErrorKind::DeviceLost ? 3 : 2;
        } catch (const std::filesystem::filesystem_error& e) {  // a path that cannot be made or read: bad input
            std::fprintf(stderr, "twinspark-cli %s: error: %s\n", c.name, e.what());
            return 2;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "twinspark-cli %s: error: %s\n", c.name, e.what());
            return 3;
        }
    }
    std::fprintf(stderr, "twinspark-cli: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
