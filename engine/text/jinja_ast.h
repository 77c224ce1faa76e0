// Syntax tree of a parsed Jinja template, and the parser that builds it. One node struct per family
// (expressions, statements) with a kind tag keeps the evaluator a pair of switch statements.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja_lexer.h"
#include "text/jinja_value.h"

namespace ts::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
    std::string name;  // empty: positional
    ExprPtr value;
};

struct Expr {
    enum class Kind {
        Literal,   // value
        Name,      // name
        GetAttr,   // a.name           (children[0] = a)
        GetItem,   // a[b]             (children = a, b)
        Slice,     // a[b:c:d]         (children = a, start?, stop?, step?: null where omitted)
        Call,      // f(args)          (children[0] = f)
        Filter,    // a | name(args)   (children[0] = a)
        Test,      // a is [not] name(args)   (children[0] = a, negated)
        Neg,       // -a
        Pos,       // +a
        Not,       // not a
        Binary,    // a op b for + - * / // % ** ~
        Compare,   // a op1 b op2 c ... (ops; children are the operands)
        And,
        Or,
        Cond,      // children = then, cond, else? (else null: undefined)
        List,
        Tuple,
        Dict,      // children alternate key, value
    };
    Kind kind;
    int line = 0;
    std::string name;              // Name, GetAttr, Filter, Test, Binary op
    Value value;                   // Literal
    std::vector<ExprPtr> children;
    std::vector<Arg> args;         // Call, Filter, Test
    std::vector<std::string> ops;  // Compare: "==", "!=", "<", "<=", ">", ">=", "in", "notin"
    bool negated = false;          // Test
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
    std::string name;
    ExprPtr default_;  // null: none given
};

struct Stmt {
    enum class Kind {
        Text,         // text
        Output,       // {{ expr }}
        If,           // conds[i] -> bodies[i]; else_body
        For,          // targets in expr [if filter]: body; else_body
        Set,          // target = expr (target: Name, GetAttr on a name, or Tuple of names)
        SetBlock,     // {% set name | filters %} body {% endset %}
        Macro,        // name(params): body
        CallBlock,    // {% call(params) expr %} body {% endcall %}
        FilterBlock,  // {% filter f %} body {% endfilter %}
        Break,
        Continue,
        Scope,        // body in its own scope ({% with %} and HF's {% generation %} pass through)
    };
    Kind kind;
    int line = 0;
    std::string text;  // Text
    std::string name;  // SetBlock, Macro
    ExprPtr expr;      // Output, For iterable, Set value, CallBlock call, SetBlock/FilterBlock filter chain
    ExprPtr target;    // Set / For target
    ExprPtr filter;    // For ... if filter
    std::vector<ExprPtr> conds;
    std::vector<Body> bodies;  // If branches; For/Macro/SetBlock/CallBlock/FilterBlock/Scope use bodies[0]
    Body else_body;
    std::vector<Param> params;  // Macro, CallBlock
    bool recursive = false;     // For ... recursive
};

struct Template {
    Body body;
};

// Throws ts::Error(InvalidArgument) "template syntax error (line N): ..." on bad syntax, including
// unknown block tags and unsupported ones (extends, include, import).
Template parseTemplate(std::string_view source, const LexerOptions& opts = {});

}  // namespace ts::jinja
