// GLM reasoning split (vLLM glm45 behaviour), as a small state machine over buffered text.
#include "text/reasoning_parser.h"

namespace ts {

namespace {
constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool isWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
}  // namespace

size_t partialTagSuffix(std::string_view text, std::string_view tag) {
    for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
        if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
    return 0;
}

ReasoningParser::ReasoningParser(bool startsInReasoning)
    : m_state(startsInReasoning ? State::Reasoning : State::Start), m_atBlockStart(startsInReasoning) {}

ReasoningDelta ReasoningParser::feed(std::string_view text) noexcept {
    try {
        m_buf.append(text);
        return step(false);
    } catch (...) {  // allocation failure only; never let it escape into the serving loop
        return {};
    }
}

ReasoningDelta ReasoningParser::finish() noexcept {
    try {
        return step(true);
    } catch (...) {
        return {};
    }
}

ReasoningDelta ReasoningParser::step(bool final) {
    ReasoningDelta out;
    while (!m_buf.empty()) {
        if (m_state == State::Start) {
            // Leading whitespace, then either <think> (opens reasoning) or anything else (content).
            size_t i = 0;
            while (i < m_buf.size() && isWs(m_buf[i])) ++i;
            const std::string_view rest = std::string_view(m_buf).substr(i);
            if (rest.substr(0, kOpen.size()) == kOpen) {
                m_buf.erase(0, i + kOpen.size());
                m_state = State::Reasoning;
                m_atBlockStart = false;
                continue;
            }
            if (!final && (rest.empty() || kOpen.substr(0, rest.size()) == rest)) break;  // undecided yet
            m_state = State::Content;
            continue;
        }
        if (m_state == State::Content) {
            out.content += m_buf;
            m_buf.clear();
            break;
        }
        // Reasoning.
        if (m_atBlockStart) {
            if (!final && m_buf.size() < kOpen.size() && kOpen.substr(0, m_buf.size()) == m_buf) break;
            if (std::string_view(m_buf).substr(0, kOpen.size()) == kOpen) m_buf.erase(0, kOpen.size());
            m_atBlockStart = false;
            continue;
        }
        const size_t end = m_buf.find(kClose);
        if (end != std::string::npos) {
            out.reasoning += m_buf.substr(0, end);
            m_buf.erase(0, end + kClose.size());
            m_state = State::Content;
            m_sawEnd = true;
            continue;
        }
        const size_t hold = final ? 0 : partialTagSuffix(m_buf, kClose);
        out.reasoning += m_buf.substr(0, m_buf.size() - hold);
        m_buf.erase(0, m_buf.size() - hold);
        break;
    }
    return out;
}

ReasoningDelta ReasoningParser::parse(std::string_view text, bool startsInReasoning) {
    ReasoningParser p(startsInReasoning);
    ReasoningDelta a = p.feed(text);
    ReasoningDelta b = p.finish();
    a.reasoning += b.reasoning;
    a.content += b.content;
    return a;
}

}  // namespace ts
