#include "text/tokenizer_pretokenizer.h"

#include <algorithm>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/tokenizer_unicode16.h"

namespace ts {

namespace {

pcre2_code* code(void* p) { return static_cast<pcre2_code*>(p); }

std::string pcre2Message(int err) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    return reinterpret_cast<const char*>(buf);
}

// Unicode White_Space, which Rust's regex `\s` (used by tokenizers for lstrip/rstrip) matches.
bool isWhiteSpace(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Code point ending at byte `end` (text well-formed), and its start.
char32_t lastChar(std::string_view text, size_t end, size_t& start) {
    start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t n = utf8SequenceLength(text, start);
    return n ? utf8Decode(text, start, n) : 0xFFFD;
}

const Pcre2Regex& wordCharRegex() {
    static const Pcre2Regex re("^\\w$", "word-character pattern");
    return re;
}

bool isWordChar(std::string_view ch) {
    std::vector<std::pair<size_t, size_t>> m;
    wordCharRegex().findAll(ch, m);
    return !m.empty();
}

}  // namespace

std::string onigToPcre2(std::string_view p) {
    // Rewrites the four class escapes whose meaning differs between Oniguruma (Unicode 16) and PCRE2;
    // everything else is copied. Tracks character classes because the replacement differs inside one.
    // Limitation: \S inside a class is left alone (PCRE2's then also excludes U+180E).
    std::string out;
    out.reserve(p.size() + 1024);
    bool inClass = false;
    for (size_t i = 0; i < p.size(); ++i) {
        char c = p[i];
        if (c == '\\' && i + 1 < p.size()) {
            std::string_view rest = p.substr(i);
            auto rewrite = [&](std::string_view token, const std::string& inside, const std::string& outside) {
                if (rest.substr(0, token.size()) != token) return false;
                out += inClass ? inside : outside;
                i += token.size() - 1;
                return true;
            };
            using namespace unicode16;
            if (rewrite("\\p{L}", std::string("\\p{L}") + kExtraLetters, std::string("[\\p{L}") + kExtraLetters + "]") ||
                rewrite("\\p{N}", std::string("\\p{N}") + kExtraNumbers, std::string("[\\p{N}") + kExtraNumbers + "]") ||
                rewrite("\\s", kSpaces, std::string("[") + kSpaces + "]") ||
                (!inClass && rewrite("\\S", "", std::string("[^") + kSpaces + "]")))
                continue;
            if (!inClass && p[i + 1] == 'Q') {  // \Q...\E: literal text
                size_t end = p.find("\\E", i + 2);
                end = end == std::string_view::npos ? p.size() : end + 2;
                out.append(p.substr(i, end - i));
                i = end - 1;
                continue;
            }
            out += c;
            out += p[++i];
            continue;
        }
        if (!inClass && c == '[') {
            inClass = true;
            out += c;
            if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
            if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a leading ']' is literal
            continue;
        }
        if (inClass && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX [:name:]
            size_t end = p.find(":]", i + 2);
            end = end == std::string_view::npos ? p.size() : end + 2;
            out.append(p.substr(i, end - i));
            i = end - 1;
            continue;
        }
        if (inClass && c == ']') inClass = false;
        out += c;
    }
    return out;
}

Pcre2Regex::Pcre2Regex(const std::string& pattern, const std::string& what) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    // UTF: code points, not bytes; UCP: \s \w \d and POSIX classes use Unicode properties, as in Oniguruma.
    pcre2_code* c = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                  &err, &offset, nullptr);
    if (!c)
        fail(ErrorKind::InvalidFile, what + ": regex does not compile at offset " + std::to_string(offset) + ": " +
                                         pcre2Message(err) + " (pattern: " + pattern + ")");
    m_code = c;
    m_jit = pcre2_jit_compile(c, PCRE2_JIT_COMPLETE) == 0;
}

Pcre2Regex::~Pcre2Regex() { pcre2_code_free(code(m_code)); }

void Pcre2Regex::findAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code(m_code), nullptr);
    if (!md) fail(ErrorKind::Internal, "pcre2: out of memory");
    auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0;
    bool havePrevEnd = false;
    size_t prevEnd = 0;
    while (pos <= text.size()) {
        // The text was validated by the caller, so PCRE2's own UTF check is skipped.
        int rc = pcre2_match(code(m_code), subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && m_jit)  // very long runs: the interpreter has a larger budget
            rc = pcre2_match(code(m_code), subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            pcre2_match_data_free(md);
            fail(ErrorKind::InvalidArgument, "tokenizer: regex match failed: " + pcre2Message(rc));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (s == e && havePrevEnd && prevEnd == e) {
            // onig's FindMatches: reject an empty match touching the previous one and step one character.
            if (pos >= text.size()) break;
            size_t n = utf8SequenceLength(text, pos);
            pos += n ? n : 1;
            continue;
        }
        out.emplace_back(s, e);
        havePrevEnd = true;
        prevEnd = e;
        pos = e;
        if (s == e) {
            // The next search from the same position would find this empty match again and be rejected
            // above; stepping here directly is equivalent and avoids the extra search.
            if (pos >= text.size()) break;
            size_t n = utf8SequenceLength(text, pos);
            pos += n ? n : 1;
        }
    }
    pcre2_match_data_free(md);
}

void SplitRule::split(const Pcre2Regex& re, SplitBehavior behavior, bool invert, std::string_view text,
                      std::vector<std::pair<size_t, size_t>>& out) {
    if (text.empty()) return;  // the reference yields one empty piece, which is then dropped
    // Pattern::find_matches: matches and the gaps between them, covering the text.
    std::vector<std::pair<size_t, size_t>> ms;
    re.findAll(text, ms);
    struct Span {
        size_t b, e;
        bool match;
    };
    std::vector<Span> spans;
    size_t prev = 0;
    for (auto [s, e] : ms) {
        if (prev != s) spans.push_back({prev, s, false});
        spans.push_back({s, e, true});
        prev = e;
    }
    if (prev != text.size()) spans.push_back({prev, text.size(), false});
    if (invert)
        for (Span& sp : spans) sp.match = !sp.match;

    // NormalizedString::split: fold the spans according to the behaviour; (range, remove) pairs.
    std::vector<std::pair<std::pair<size_t, size_t>, bool>> pieces;
    switch (behavior) {
    case SplitBehavior::Isolated:
        for (const Span& sp : spans) pieces.push_back({{sp.b, sp.e}, false});
        break;
    case SplitBehavior::Removed:
        for (const Span& sp : spans) pieces.push_back({{sp.b, sp.e}, sp.match});
        break;
    case SplitBehavior::Contiguous: {
        bool prevMatch = false;
        for (const Span& sp : spans) {
            if (sp.match == prevMatch && !pieces.empty())
                pieces.back().first.second = sp.e;
            else
                pieces.push_back({{sp.b, sp.e}, false});
            prevMatch = sp.match;
        }
        break;
    }
    case SplitBehavior::MergedWithPrevious: {
        bool prevMatch = false;
        for (const Span& sp : spans) {
            if (sp.match && !prevMatch && !pieces.empty())
                pieces.back().first.second = sp.e;
            else
                pieces.push_back({{sp.b, sp.e}, false});
            prevMatch = sp.match;
        }
        break;
    }
    case SplitBehavior::MergedWithNext: {
        bool prevMatch = false;
        for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
            if (it->match && !prevMatch && !pieces.empty())
                pieces.back().first.first = it->b;
            else
                pieces.push_back({{it->b, it->e}, false});
            prevMatch = it->match;
        }
        std::reverse(pieces.begin(), pieces.end());
        break;
    }
    }
    for (const auto& [range, remove] : pieces) {
        if (!remove && range.first != range.second) out.push_back(range);
    }
}

void AddedTokenMatcher::build(const std::vector<const AddedTokenEntry*>& tokens) {
    m_nodes.assign(1, Node{});
    std::fill(std::begin(m_firstByte), std::end(m_firstByte), false);
    for (const AddedTokenEntry* t : tokens) {
        if (t->content.empty()) continue;  // an empty pattern never matches in the reference either
        int node = 0;
        for (char ch : t->content) {
            auto b = static_cast<unsigned char>(ch);
            int next = child(node, b);
            if (next < 0) {
                next = int(m_nodes.size());
                auto& kids = m_nodes[size_t(node)].children;
                kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, 0)), {b, next});
                m_nodes.emplace_back();
            }
            node = next;
        }
        m_nodes[size_t(node)].token = t;
        m_firstByte[static_cast<unsigned char>(t->content[0])] = true;
    }
}

int AddedTokenMatcher::child(int node, unsigned char b) const {
    const auto& kids = m_nodes[size_t(node)].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(b, 0));
    return it != kids.end() && it->first == b ? it->second : -1;
}

void AddedTokenMatcher::split(std::string_view text, bool skipSpecial, std::vector<Split>& out) const {
    size_t startOffset = 0;
    size_t pos = 0;
    while (pos < text.size()) {
        // Leftmost-longest: the first position where any token matches, the longest token there.
        if (!m_firstByte[static_cast<unsigned char>(text[pos])]) {
            ++pos;
            continue;
        }
        int node = 0;
        const AddedTokenEntry* best = nullptr;
        size_t bestEnd = 0;
        for (size_t i = pos; i < text.size(); ++i) {
            node = child(node, static_cast<unsigned char>(text[i]));
            if (node < 0) break;
            if (m_nodes[size_t(node)].token) best = m_nodes[size_t(node)].token, bestEnd = i + 1;
        }
        if (!best) {
            ++pos;
            continue;
        }
        size_t start = pos, stop = bestEnd;
        pos = bestEnd;  // the scan resumes after the match whether or not it is used
        if (skipSpecial && best->special) continue;
        if (best->singleWord) {
            bool startSpace = true;
            if (start > 0) {
                size_t cs = 0;
                lastChar(text, start, cs);
                startSpace = !isWordChar(text.substr(cs, start - cs));
            }
            size_t n = stop < text.size() ? utf8SequenceLength(text, stop) : 0;
            bool stopSpace = stop == text.size() || !isWordChar(text.substr(stop, n ? n : 1));
            if (!startSpace || !stopSpace) continue;
        }
        if (best->lstrip) {
            size_t s = start;
            while (s > 0) {
                size_t cs = 0;
                if (!isWhiteSpace(lastChar(text, s, cs))) break;
                s = cs;
            }
            start = std::max(s, startOffset);
        }
        if (best->rstrip) {
            while (stop < text.size()) {
                size_t n = utf8SequenceLength(text, stop);
                if (!n || !isWhiteSpace(utf8Decode(text, stop, n))) break;
                stop += n;
            }
            pos = std::max(pos, stop);
        }
        if (startOffset < start) out.push_back({startOffset, start, nullptr});
        out.push_back({start, stop, best});
        startOffset = stop;
    }
    if (startOffset != text.size()) out.push_back({startOffset, text.size(), nullptr});
}

}  // namespace ts
