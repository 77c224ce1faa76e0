// Where `twinspark-cli serve` takes what the command line leaves out, so that the headless server runs what the
// control center's setup wizard configured: the deployment .env (the same file the control center reads and
// writes) and, when no model is named anywhere, the embedded default model.
//
// Precedence, as the recipe's launcher and the control center: command line > process environment > .env file >
// the recipe's defaults.
#pragma once

#include <functional>
#include <string>

namespace ts::cli {

class Args;

// Reads the .env named by --env, else the default one (engine/io/default_paths.h: $TWINSPARK_ENV, ./.env, the
// control center's configuration folder) and puts each of its values into this process's environment where the
// environment does not already hold that variable; the settings are then read from the environment as before.
// A file named by --env or $TWINSPARK_ENV must exist and not be a folder (ts::Error InvalidArgument otherwise); a
// missing default file is no error, and a folder found by the default rule (./.env) is passed over with a note.
// Lines the file cannot parse are skipped with a note. Never creates or edits the file.
// Call before any thread starts (setenv).
void applyEnvFile(const Args& args, const std::function<void(const std::string&)>& note);

// The model folder to serve: --model, else $MODEL_PATH (environment or .env), else the embedded default model
// found next to this binary, in the working directory or in the source tree it was built from. `note` says
// which. ts::Error InvalidArgument, naming the places looked at, when there is none.
std::string resolveServeModel(const Args& args, const std::function<void(const std::string&)>& note);

}  // namespace ts::cli
