// Jinja lexer: splits a template into data text and tag tokens, applying whitespace control the way
// jinja2 does under HF's environment (trim_blocks=True, lstrip_blocks=True, `-`/`+` markers,
// newline normalisation and the dropped final newline).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ts::jinja {

enum class Tok {
    Data,        // literal template text (already whitespace-controlled)
    VarBegin,    // {{
    VarEnd,      // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,
    String,      // text is the unescaped value
    Int,
    Float,
    Op,          // operators and punctuation: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
    End,
};

struct Token {
    Tok type;
    std::string text;
    int line;
};

struct LexerOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
    bool keep_trailing_newline = false;
};

// Throws ts::Error(InvalidArgument) on an unterminated tag, comment or string, naming the line.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& opts = {});

}  // namespace ts::jinja
