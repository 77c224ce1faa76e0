// Everything a loaded model consists of, owned together on the controller thread: backend, weights,
// tokenizer, chat template and the engine that runs them. The HTTP server borrows it (same engine, one
// batch for both front doors); members are destroyed in reverse order, the engine first.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "backend.h"
#include "model/glm5_next.h"
#include "runtime/engine.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ts::ui {

struct LoadedEngine {
    std::string dir;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Glm5NextModel> model;
    std::optional<Tokenizer> tokenizer;
    std::optional<ChatTemplate> chatTemplate;
    std::unique_ptr<Engine> engine;
};

}  // namespace ts::ui
