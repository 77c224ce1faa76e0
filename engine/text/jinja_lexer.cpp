// Jinja lexer. The whitespace rules mirror jinja2.lexer (3.1): a `-` on a tag strips all whitespace on
// that side; otherwise lstrip_blocks removes spaces/tabs between a line start and a block or comment tag,
// and trim_blocks removes one newline after a block or comment tag (never after }}).
#include "text/jinja_lexer.h"

#include <cctype>

#include "core/error.h"
#include "text/jinja_value.h"

namespace ts::jinja {

namespace {

[[noreturn]] void syntaxError(int line, const std::string& msg) {
    fail(ErrorKind::InvalidArgument, "template syntax error (line " + std::to_string(line) + "): " + msg);
}

// Python's str.isspace on a UTF-8 string position; returns the byte length of the space or 0.
size_t spaceAt(std::string_view s, size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) return pyIsSpace(c) ? 1 : 0;
    const size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + len > s.size()) return 0;
    const auto cps = utf8Decode(s.substr(i, len));
    return (cps.size() == 1 && pyIsSpace(cps[0])) ? len : 0;
}

std::string rstripPy(std::string_view s) {
    // Walk back over whole code points that are Python whitespace.
    size_t end = s.size();
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
        if (spaceAt(s, start) != end - start) break;
        end = start;
    }
    return std::string(s.substr(0, end));
}

size_t skipSpacePy(std::string_view s, size_t i) {
    while (i < s.size()) {
        const size_t n = spaceAt(s, i);
        if (!n) break;
        i += n;
    }
    return i;
}

class Lexer {
public:
    Lexer(std::string src, const LexerOptions& o) : m_src(std::move(src)), m_opts(o) {}

    std::vector<Token> run() {
        size_t pos = 0;
        while (pos < m_src.size()) {
            const size_t open = findOpen(pos);
            if (open == std::string::npos) {
                pushData(m_src.substr(pos));
                break;
            }
            const char kind = m_src[open + 1];  // '{', '%' or '#'
            const char sign = open + 2 < m_src.size() ? m_src[open + 2] : '\0';
            std::string text = m_src.substr(pos, open - pos);
            if (sign == '-') {
                text = rstripPy(text);
            } else if (sign != '+' && m_opts.lstrip_blocks && kind != '{') {
                const size_t nl = text.rfind('\n');
                const size_t lpos = nl == std::string::npos ? 0 : nl + 1;
                const bool lineStarting = lpos > 0 || pos == 0 || m_src[pos - 1] == '\n';
                if (lineStarting && lpos < text.size() && skipSpacePy(text, lpos) == text.size())
                    text.resize(lpos);
            }
            pushData(text);
            size_t p = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
            if (kind == '#') {
                pos = endComment(p);
            } else if (kind == '%' && isRaw(p)) {
                pos = rawBlock(p);
            } else {
                pos = tag(p, kind == '{');
            }
        }
        m_out.push_back({Tok::End, "", lineAt(m_src.size())});
        return std::move(m_out);
    }

private:
    std::string m_src;
    LexerOptions m_opts;
    std::vector<Token> m_out;
    size_t m_lineCachePos = 0;
    int m_lineCache = 1;

    int lineAt(size_t pos) {
        // Tokens are produced left to right, so counting newlines incrementally is linear overall.
        if (pos < m_lineCachePos) {
            m_lineCachePos = 0;
            m_lineCache = 1;
        }
        for (; m_lineCachePos < pos && m_lineCachePos < m_src.size(); ++m_lineCachePos)
            if (m_src[m_lineCachePos] == '\n') ++m_lineCache;
        return m_lineCache;
    }

    size_t findOpen(size_t from) const {
        for (size_t i = m_src.find('{', from); i != std::string::npos; i = m_src.find('{', i + 1)) {
            if (i + 1 < m_src.size() && (m_src[i + 1] == '{' || m_src[i + 1] == '%' || m_src[i + 1] == '#'))
                return i;
        }
        return std::string::npos;
    }

    void pushData(std::string text) {
        if (!text.empty()) m_out.push_back({Tok::Data, std::move(text), 0});
    }

    // After a closing marker: `-` eats all following whitespace, else trim_blocks eats one newline.
    size_t afterClose(size_t p, char sign, bool isBlockOrComment) {
        if (sign == '-') return skipSpacePy(m_src, p);
        if (sign != '+' && isBlockOrComment && m_opts.trim_blocks && p < m_src.size() && m_src[p] == '\n')
            return p + 1;
        return p;
    }

    size_t endComment(size_t p) {
        const size_t close = m_src.find("#}", p);
        if (close == std::string::npos) syntaxError(lineAt(p), "unterminated comment");
        char sign = close > p && (m_src[close - 1] == '-' || m_src[close - 1] == '+') ? m_src[close - 1] : '\0';
        return afterClose(close + 2, sign, true);
    }

    bool isRaw(size_t p) {
        size_t q = skipSpacePy(m_src, p);
        if (m_src.compare(q, 3, "raw") != 0) return false;
        q = skipSpacePy(m_src, q + 3);
        if (q < m_src.size() && (m_src[q] == '-' || m_src[q] == '+')) ++q;
        return m_src.compare(q, 2, "%}") == 0;
    }

    size_t rawBlock(size_t p) {
        const size_t close = m_src.find("%}", p);
        const char openSign = m_src[close - 1];
        size_t body = afterClose(close + 2, openSign == '-' || openSign == '+' ? openSign : '\0', true);
        // Find {%[-+]? endraw [-+]?%}
        for (size_t i = m_src.find("{%", body); i != std::string::npos; i = m_src.find("{%", i + 2)) {
            size_t q = i + 2;
            const char s1 = q < m_src.size() ? m_src[q] : '\0';
            if (s1 == '-' || s1 == '+') ++q;
            q = skipSpacePy(m_src, q);
            if (m_src.compare(q, 6, "endraw") != 0) continue;
            q = skipSpacePy(m_src, q + 6);
            char s2 = '\0';
            if (q < m_src.size() && (m_src[q] == '-' || m_src[q] == '+')) s2 = m_src[q++];
            if (m_src.compare(q, 2, "%}") != 0) continue;
            std::string text = m_src.substr(body, i - body);
            if (s1 == '-') text = rstripPy(text);
            pushData(text);
            return afterClose(q + 2, s2, true);
        }
        syntaxError(lineAt(p), "missing {% endraw %}");
    }

    size_t tag(size_t p, bool isVar) {
        const int startLine = lineAt(p);
        m_out.push_back({isVar ? Tok::VarBegin : Tok::BlockBegin, "", startLine});
        std::vector<char> balance;  // open brackets: an end marker inside {...} is not one
        while (true) {
            p = skipSpacePy(m_src, p);
            if (p >= m_src.size()) syntaxError(startLine, std::string("unterminated ") + (isVar ? "{{" : "{%"));
            const int line = lineAt(p);
            if (balance.empty()) {
                const char* close = isVar ? "}}" : "%}";
                char sign = '\0';
                size_t q = p;
                if (m_src[q] == '-' || m_src[q] == '+') sign = m_src[q++];
                if (m_src.compare(q, 2, close) == 0 && !(isVar && sign == '+')) {
                    m_out.push_back({isVar ? Tok::VarEnd : Tok::BlockEnd, "", line});
                    return afterClose(q + 2, sign, !isVar);
                }
            }
            const char c = m_src[p];
            if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
                size_t q = p;
                while (q < m_src.size() && (std::isalnum(static_cast<unsigned char>(m_src[q])) || m_src[q] == '_'))
                    ++q;
                m_out.push_back({Tok::Name, m_src.substr(p, q - p), line});
                p = q;
            } else if (std::isdigit(static_cast<unsigned char>(c))) {
                p = number(p, line);
            } else if (c == '\'' || c == '"') {
                p = string(p, line);
            } else {
                static const char* ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                            ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|", ";"};
                std::string op;
                for (const char* o : ops) {
                    if (m_src.compare(p, std::char_traits<char>::length(o), o) == 0) {
                        op = o;
                        break;
                    }
                }
                if (op.empty()) syntaxError(line, std::string("unexpected character '") + c + "'");
                if (op == "(" || op == "[" || op == "{") balance.push_back(op[0]);
                if ((op == ")" || op == "]" || op == "}") && !balance.empty()) balance.pop_back();
                m_out.push_back({Tok::Op, op, line});
                p += op.size();
            }
        }
    }

    size_t number(size_t p, int line) {
        size_t q = p;
        auto digits = [&] {
            while (q < m_src.size() && (std::isdigit(static_cast<unsigned char>(m_src[q])) || m_src[q] == '_')) ++q;
        };
        digits();
        bool isFloat = false;
        // After a '.', as in `content.0.type`, a number is an index: never a float (jinja2 does the same).
        const bool afterDot = p > 0 && m_src[p - 1] == '.';
        if (!afterDot && q + 1 < m_src.size() && m_src[q] == '.' &&
            std::isdigit(static_cast<unsigned char>(m_src[q + 1]))) {
            isFloat = true;
            ++q;
            digits();
        }
        if (!afterDot && q < m_src.size() && (m_src[q] == 'e' || m_src[q] == 'E')) {
            size_t r = q + 1;
            if (r < m_src.size() && (m_src[r] == '+' || m_src[r] == '-')) ++r;
            if (r < m_src.size() && std::isdigit(static_cast<unsigned char>(m_src[r]))) {
                isFloat = true;
                q = r;
                digits();
            }
        }
        std::string text;
        for (size_t i = p; i < q; ++i)
            if (m_src[i] != '_') text += m_src[i];
        m_out.push_back({isFloat ? Tok::Float : Tok::Int, text, line});
        return q;
    }

    size_t string(size_t p, int line) {
        const char quote = m_src[p];
        std::string val;
        size_t q = p + 1;
        while (true) {
            if (q >= m_src.size()) syntaxError(line, "unterminated string");
            const char c = m_src[q];
            if (c == quote) break;
            if (c != '\\') {
                val += c;
                ++q;
                continue;
            }
            if (q + 1 >= m_src.size()) syntaxError(line, "unterminated string");
            const char e = m_src[q + 1];
            q += 2;
            switch (e) {
            case 'n': val += '\n'; break;
            case 't': val += '\t'; break;
            case 'r': val += '\r'; break;
            case '0': val += '\0'; break;
            case 'b': val += '\b'; break;
            case 'f': val += '\f'; break;
            case 'v': val += '\v'; break;
            case 'a': val += '\a'; break;
            case '\\': val += '\\'; break;
            case '\'': val += '\''; break;
            case '"': val += '"'; break;
            case '\n': break;  // line continuation
            case 'x':
            case 'u':
            case 'U': {
                const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                if (q + n > m_src.size()) syntaxError(line, "truncated \\" + std::string(1, e) + " escape");
                const std::string hex = m_src.substr(q, n);
                for (char h : hex)
                    if (!std::isxdigit(static_cast<unsigned char>(h))) syntaxError(line, "bad escape in string");
                utf8Append(val, uint32_t(std::stoul(hex, nullptr, 16)));
                q += n;
                break;
            }
            default:  // Python keeps unknown escapes verbatim
                val += '\\';
                val += e;
            }
        }
        m_out.push_back({Tok::String, std::move(val), line});
        return q + 1;
    }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& opts) {
    // jinja2 normalises \r\n and \r to \n and drops one final newline before lexing.
    std::string src;
    src.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            src += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            src += source[i];
        }
    }
    if (!opts.keep_trailing_newline && !src.empty() && src.back() == '\n') src.pop_back();
    return Lexer(std::move(src), opts).run();
}

}  // namespace ts::jinja
