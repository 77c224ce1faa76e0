// One request as the runtime sees it (the nano-vllm Sequence): its tokens, sampling parameters, status,
// the blocks of the paged pool it owns, its KDA state slot and how far its caches are filled.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ts {

enum class SeqStatus : uint8_t { Waiting, Running, Finished };
// Error: the request failed in the engine (a NaN / +inf logit, a step that threw); EngineEvent::error says why.
enum class FinishReason : uint8_t { None, Stop, Length, Abort, Error };

// Per-request sampling parameters (OpenAI / vLLM names). Defaults come from generation_config.json and
// are overridden per request by the caller.
struct SamplingParams {
    float temperature = 1.0f;        // 0 = greedy
    float topP = 1.0f;               // (0, 1]
    int32_t topK = 0;                // 0 = off
    float minP = 0.0f;               // [0, 1]
    float presencePenalty = 0.0f;    // [-2, 2]
    float frequencyPenalty = 0.0f;   // [-2, 2]
    float repetitionPenalty = 1.0f;  // > 0; 1 = off
    std::optional<uint64_t> seed;    // reproducible sampling when set
    std::vector<std::string> stop;   // stop strings (matched on the detokenized completion)
    std::vector<int32_t> stopTokenIds;
    bool ignoreEos = false;
    int32_t maxTokens = 16;
    int32_t minTokens = 0;           // eos / stop tokens are masked until this many were generated
    int32_t logprobs = -1;           // -1 = none; N >= 0 = logprob of the sampled token + top N
    bool skipSpecialTokens = true;   // detokenization of the output (vLLM's default)
    bool includeStopStrInOutput = false;
};

class Sequence {
public:
    Sequence(int64_t id, std::vector<int32_t> prompt, SamplingParams params)
        : m_id(id), m_tokens(std::move(prompt)), m_numPrompt(int64_t(m_tokens.size())), m_params(std::move(params)) {}

    int64_t id() const { return m_id; }
    const SamplingParams& params() const { return m_params; }
    const std::vector<int32_t>& tokens() const { return m_tokens; }
    int64_t numTokens() const { return int64_t(m_tokens.size()); }
    int64_t numPromptTokens() const { return m_numPrompt; }
    int64_t numCompletionTokens() const { return numTokens() - m_numPrompt; }
    int32_t lastToken() const { return m_tokens.back(); }
    void appendToken(int32_t t) { m_tokens.push_back(t); }

    SeqStatus status = SeqStatus::Waiting;
    FinishReason finish = FinishReason::None;
    // Tokens whose KV / state are in the caches (prefix-cache hits included). The next step computes
    // tokens [numComputed, numComputed + n).
    int64_t numComputed = 0;
    int64_t numCachedPrompt = 0;     // prompt tokens served from the prefix cache (block aligned)
    std::vector<int32_t> blockTable; // physical block ids, one per 64 tokens
    int32_t stateSlot = -1;          // KDA recurrent-state slot while running
    int64_t numPreemptions = 0;
    // KDA state snapshot this sequence takes (BlockManager policy): the token count of the boundary, or -1,
    // and the snapshot slot reserved for it once the chunk that ends there is scheduled, or -1.
    int64_t snapshotAt = -1;
    int32_t snapshotSlot = -1;

private:
    int64_t m_id;
    std::vector<int32_t> m_tokens;
    int64_t m_numPrompt;
    SamplingParams m_params;
};

}  // namespace ts
