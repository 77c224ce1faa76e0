// Recursive-descent parser with jinja2's precedence ladder (parser.py): condexpr < or < and < not <
// compare < + - < ~ < * / // % < ** < unary, with postfix (. [] ()) and then filters/tests binding to a
// unary operand, so `-x|abs` is abs(-x) and `a is not none and b` groups as (a is not none) and b.
#include <set>

#include "core/error.h"
#include "text/jinja_ast.h"
#include "text/jinja_interpreter.h"  // pyFloat

namespace ts::jinja {

namespace {

constexpr int kMaxNesting = 200;  // deeper expressions/blocks than this are rejected, not recursed into

class Parser {
public:
    explicit Parser(std::vector<Token> toks) : m_t(std::move(toks)) {}

    Template run() {
        Template t;
        std::string endTag;
        t.body = parseBody({}, endTag);
        return t;
    }

private:
    std::vector<Token> m_t;
    size_t m_i = 0;
    int m_depth = 0;

    struct DepthGuard {
        Parser& p;
        explicit DepthGuard(Parser& pp) : p(pp) {
            if (++p.m_depth > kMaxNesting) p.error("template nested too deeply");
        }
        ~DepthGuard() { --p.m_depth; }
    };

    const Token& cur() const { return m_t[m_i]; }
    const Token& peek(size_t k = 1) const { return m_t[std::min(m_i + k, m_t.size() - 1)]; }
    int line() const {
        for (size_t k = m_i; k < m_t.size(); ++k)
            if (m_t[k].line) return m_t[k].line;
        return 0;
    }
    [[noreturn]] void error(const std::string& msg) const {
        fail(ErrorKind::InvalidArgument, "template syntax error (line " + std::to_string(line()) + "): " + msg);
    }
    bool isOp(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
    bool isName(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
    bool acceptOp(const char* op) {
        if (!isOp(op)) return false;
        ++m_i;
        return true;
    }
    bool acceptName(const char* n) {
        if (!isName(n)) return false;
        ++m_i;
        return true;
    }
    void expectOp(const char* op) {
        if (!acceptOp(op)) error(std::string("expected '") + op + "', got '" + describe(cur()) + "'");
    }
    std::string expectName() {
        if (cur().type != Tok::Name) error("expected a name, got '" + describe(cur()) + "'");
        return m_t[m_i++].text;
    }
    void expectBlockEnd() {
        if (cur().type != Tok::BlockEnd) error("expected end of tag '%}', got '" + describe(cur()) + "'");
        ++m_i;
    }
    static std::string describe(const Token& t) {
        switch (t.type) {
        case Tok::End: return "end of template";
        case Tok::BlockEnd: return "%}";
        case Tok::VarEnd: return "}}";
        case Tok::Data: return "text";
        default: return t.text;
        }
    }
    ExprPtr node(Expr::Kind k, int ln) {
        auto e = std::make_unique<Expr>();
        e->kind = k;
        e->line = ln;
        return e;
    }

    // Parses statements until one of `ends` block tags (returned in endTag) or the end of input.
    Body parseBody(const std::set<std::string>& ends, std::string& endTag) {
        DepthGuard g(*this);
        Body body;
        while (true) {
            const Token& t = cur();
            if (t.type == Tok::End) {
                if (!ends.empty()) error("unexpected end of template, expected '" + *ends.begin() + "'");
                return body;
            }
            if (t.type == Tok::Data) {
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Text;
                s->text = t.text;
                body.push_back(std::move(s));
                ++m_i;
            } else if (t.type == Tok::VarBegin) {
                ++m_i;
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Output;
                s->line = line();
                s->expr = parseTuple();
                if (cur().type != Tok::VarEnd) error("expected '}}', got '" + describe(cur()) + "'");
                ++m_i;
                body.push_back(std::move(s));
            } else if (t.type == Tok::BlockBegin) {
                ++m_i;
                if (cur().type != Tok::Name) error("expected a statement name");
                const std::string kw = cur().text;
                if (ends.count(kw)) {
                    endTag = kw;
                    ++m_i;
                    return body;
                }
                body.push_back(parseStatement());
            } else {
                error("unexpected '" + describe(t) + "'");
            }
        }
    }

    StmtPtr parseStatement() {
        const int ln = line();
        const std::string kw = expectName();
        auto s = std::make_unique<Stmt>();
        s->line = ln;
        std::string endTag;
        if (kw == "if") {
            s->kind = Stmt::Kind::If;
            s->conds.push_back(parseTuple());
            expectBlockEnd();
            while (true) {
                s->bodies.push_back(parseBody({"elif", "else", "endif"}, endTag));
                if (endTag == "elif") {
                    s->conds.push_back(parseTuple());
                    expectBlockEnd();
                    continue;
                }
                if (endTag == "else") {
                    expectBlockEnd();
                    s->else_body = parseBody({"endif"}, endTag);
                }
                break;
            }
        } else if (kw == "for") {
            s->kind = Stmt::Kind::For;
            s->target = parseAssignTarget(false);
            if (!acceptName("in")) error("expected 'in' in for loop");
            s->expr = parseTuple(/*noCondExpr=*/true);
            if (acceptName("if")) s->filter = parseExpression();
            if (acceptName("recursive")) s->recursive = true;
            expectBlockEnd();
            s->bodies.push_back(parseBody({"endfor", "else"}, endTag));
            if (endTag == "else") {
                expectBlockEnd();
                s->else_body = parseBody({"endfor"}, endTag);
            }
        } else if (kw == "set") {
            s->target = parseAssignTarget(true);
            if (acceptOp("=")) {
                s->kind = Stmt::Kind::Set;
                s->expr = parseTuple();
            } else {
                if (s->target->kind != Expr::Kind::Name) error("block set needs a plain variable name");
                s->kind = Stmt::Kind::SetBlock;
                s->name = s->target->name;
                if (isOp("|")) s->expr = parseFilterChain(node(Expr::Kind::Name, ln));
                expectBlockEnd();
                s->bodies.push_back(parseBody({"endset"}, endTag));
            }
        } else if (kw == "macro") {
            s->kind = Stmt::Kind::Macro;
            s->name = expectName();
            parseParams(s->params);
            expectBlockEnd();
            s->bodies.push_back(parseBody({"endmacro"}, endTag));
        } else if (kw == "call") {
            s->kind = Stmt::Kind::CallBlock;
            if (isOp("(")) parseParams(s->params);
            s->expr = parseExpression();
            if (s->expr->kind != Expr::Kind::Call) error("{% call %} needs a macro call");
            expectBlockEnd();
            s->bodies.push_back(parseBody({"endcall"}, endTag));
        } else if (kw == "filter") {
            s->kind = Stmt::Kind::FilterBlock;
            m_i--;  // reuse the filter-chain parser: pretend the keyword was a `|`
            m_t[m_i] = Token{Tok::Op, "|", ln};
            s->expr = parseFilterChain(node(Expr::Kind::Name, ln));
            expectBlockEnd();
            s->bodies.push_back(parseBody({"endfilter"}, endTag));
        } else if (kw == "break" || kw == "continue") {
            s->kind = kw == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
        } else if (kw == "generation" || kw == "with") {
            // {% generation %} is HF's assistant-mask marker: rendering ignores it. {% with %} takes no
            // assignments here (rare in chat templates); both just scope their body.
            s->kind = Stmt::Kind::Scope;
            if (kw == "with" && cur().type != Tok::BlockEnd) error("{% with %} assignments are not supported");
            expectBlockEnd();
            s->bodies.push_back(parseBody({kw == "with" ? "endwith" : "endgeneration"}, endTag));
        } else if (kw == "extends" || kw == "include" || kw == "import" || kw == "from" || kw == "block") {
            error("'" + kw + "' is not supported in chat templates");
        } else {
            error("unknown tag '" + kw + "'");
        }
        expectBlockEnd();  // the %} of the statement itself, or of its {% endxxx %} tag
        return s;
    }

    void parseParams(std::vector<Param>& params) {
        expectOp("(");
        while (!isOp(")")) {
            if (!params.empty()) expectOp(",");
            if (isOp(")")) break;
            Param p;
            p.name = expectName();
            if (acceptOp("=")) p.default_ = parseExpression();
            params.push_back(std::move(p));
        }
        expectOp(")");
    }

    // for/set targets: name, name.attr (set only), or a tuple of names (optionally parenthesised).
    ExprPtr parseAssignTarget(bool allowAttr) {
        const int ln = line();
        auto one = [&]() -> ExprPtr {
            if (acceptOp("(")) {
                auto t = parseAssignTarget(false);
                expectOp(")");
                return t;
            }
            auto n = node(Expr::Kind::Name, ln);
            n->name = expectName();
            if (allowAttr && acceptOp(".")) {
                auto a = node(Expr::Kind::GetAttr, ln);
                a->name = expectName();
                a->children.push_back(std::move(n));
                return a;
            }
            return n;
        };
        auto first = one();
        if (!isOp(",")) return first;
        auto tup = node(Expr::Kind::Tuple, ln);
        tup->children.push_back(std::move(first));
        while (acceptOp(",")) {
            if (cur().type != Tok::Name && !isOp("(")) break;
            tup->children.push_back(one());
        }
        return tup;
    }

    // An expression or an unparenthesised tuple `a, b`.
    ExprPtr parseTuple(bool noCondExpr = false) {
        const int ln = line();
        auto first = noCondExpr ? parseOr() : parseExpression();
        if (!isOp(",")) return first;
        auto tup = node(Expr::Kind::Tuple, ln);
        tup->children.push_back(std::move(first));
        while (acceptOp(",")) {
            if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || isOp(")") || isName("if")) break;
            tup->children.push_back(noCondExpr ? parseOr() : parseExpression());
        }
        return tup;
    }

    ExprPtr parseExpression() {
        DepthGuard g(*this);
        const int ln = line();
        auto e = parseOr();
        while (acceptName("if")) {
            auto c = node(Expr::Kind::Cond, ln);
            auto cond = parseOr();
            ExprPtr otherwise;
            if (acceptName("else")) otherwise = parseExpression();
            c->children.push_back(std::move(e));
            c->children.push_back(std::move(cond));
            c->children.push_back(std::move(otherwise));
            e = std::move(c);
        }
        return e;
    }

    ExprPtr binary(Expr::Kind k, ExprPtr l, ExprPtr r, int ln, std::string op = {}) {
        auto b = node(k, ln);
        b->name = std::move(op);
        b->children.push_back(std::move(l));
        b->children.push_back(std::move(r));
        return b;
    }

    ExprPtr parseOr() {
        const int ln = line();
        auto l = parseAnd();
        while (acceptName("or")) l = binary(Expr::Kind::Or, std::move(l), parseAnd(), ln);
        return l;
    }
    ExprPtr parseAnd() {
        const int ln = line();
        auto l = parseNot();
        while (acceptName("and")) l = binary(Expr::Kind::And, std::move(l), parseNot(), ln);
        return l;
    }
    ExprPtr parseNot() {
        DepthGuard g(*this);
        const int ln = line();
        if (acceptName("not")) {
            auto n = node(Expr::Kind::Not, ln);
            n->children.push_back(parseNot());
            return n;
        }
        return parseCompare();
    }
    ExprPtr parseCompare() {
        const int ln = line();
        auto first = parseMath1();
        ExprPtr cmp;
        while (true) {
            std::string op;
            if (cur().type == Tok::Op &&
                (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
                 cur().text == ">" || cur().text == ">=")) {
                op = cur().text;
                ++m_i;
            } else if (isName("in")) {
                op = "in";
                ++m_i;
            } else if (isName("not") && peek().type == Tok::Name && peek().text == "in") {
                op = "notin";
                m_i += 2;
            } else {
                break;
            }
            if (!cmp) {
                cmp = node(Expr::Kind::Compare, ln);
                cmp->children.push_back(std::move(first));
            }
            cmp->ops.push_back(op);
            cmp->children.push_back(parseMath1());
        }
        return cmp ? std::move(cmp) : std::move(first);
    }
    ExprPtr parseMath1() {
        const int ln = line();
        auto l = parseConcat();
        while (isOp("+") || isOp("-")) {
            const std::string op = m_t[m_i++].text;
            l = binary(Expr::Kind::Binary, std::move(l), parseConcat(), ln, op);
        }
        return l;
    }
    ExprPtr parseConcat() {
        const int ln = line();
        auto l = parseMath2();
        while (acceptOp("~")) l = binary(Expr::Kind::Binary, std::move(l), parseMath2(), ln, "~");
        return l;
    }
    ExprPtr parseMath2() {
        const int ln = line();
        auto l = parsePow();
        while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
            const std::string op = m_t[m_i++].text;
            l = binary(Expr::Kind::Binary, std::move(l), parsePow(), ln, op);
        }
        return l;
    }
    ExprPtr parsePow() {
        const int ln = line();
        auto l = parseUnary(true);
        while (acceptOp("**")) l = binary(Expr::Kind::Binary, std::move(l), parseUnary(true), ln, "**");
        return l;
    }
    ExprPtr parseUnary(bool withFilter) {
        DepthGuard g(*this);
        const int ln = line();
        ExprPtr e;
        if (acceptOp("-")) {
            e = node(Expr::Kind::Neg, ln);
            e->children.push_back(parseUnary(false));
        } else if (acceptOp("+")) {
            e = node(Expr::Kind::Pos, ln);
            e->children.push_back(parseUnary(false));
        } else {
            e = parsePrimary();
        }
        e = parsePostfix(std::move(e));
        if (withFilter) e = parseFilterChain(std::move(e));
        return e;
    }

    ExprPtr parsePrimary() {
        const int ln = line();
        const Token& t = cur();
        if (t.type == Tok::Name) {
            ++m_i;
            auto lit = node(Expr::Kind::Literal, ln);
            if (t.text == "true" || t.text == "True") lit->value = Value(true);
            else if (t.text == "false" || t.text == "False") lit->value = Value(false);
            else if (t.text == "none" || t.text == "None") lit->value = Value::none();
            else {
                auto n = node(Expr::Kind::Name, ln);
                n->name = t.text;
                return n;
            }
            return lit;
        }
        if (t.type == Tok::String) {
            std::string s;
            while (cur().type == Tok::String) s += m_t[m_i++].text;  // adjacent literals concatenate
            auto lit = node(Expr::Kind::Literal, ln);
            lit->value = Value(std::move(s));
            return lit;
        }
        if (t.type == Tok::Int || t.type == Tok::Float) {
            ++m_i;
            auto lit = node(Expr::Kind::Literal, ln);
            try {
                if (t.type == Tok::Int) {
                    lit->value = Value(int64_t(std::stoll(t.text)));
                } else {
                    const auto d = pyFloat(t.text);  // the C form, whatever the process's locale
                    if (!d) error("number out of range: " + t.text);
                    lit->value = Value(*d);
                }
            } catch (const std::out_of_range&) {
                error("number out of range: " + t.text);
            }
            return lit;
        }
        if (acceptOp("(")) {
            if (acceptOp(")")) return node(Expr::Kind::Tuple, ln);
            auto e = parseExpression();
            if (isOp(",")) {
                auto tup = node(Expr::Kind::Tuple, ln);
                tup->children.push_back(std::move(e));
                while (acceptOp(",")) {
                    if (isOp(")")) break;
                    tup->children.push_back(parseExpression());
                }
                e = std::move(tup);
            }
            expectOp(")");
            return e;
        }
        if (acceptOp("[")) {
            auto l = node(Expr::Kind::List, ln);
            while (!isOp("]")) {
                if (!l->children.empty()) expectOp(",");
                if (isOp("]")) break;
                l->children.push_back(parseExpression());
            }
            expectOp("]");
            return l;
        }
        if (acceptOp("{")) {
            auto d = node(Expr::Kind::Dict, ln);
            while (!isOp("}")) {
                if (!d->children.empty()) expectOp(",");
                if (isOp("}")) break;
                d->children.push_back(parseExpression());
                expectOp(":");
                d->children.push_back(parseExpression());
            }
            expectOp("}");
            return d;
        }
        error("unexpected '" + describe(t) + "'");
    }

    ExprPtr parsePostfix(ExprPtr e) {
        while (true) {
            const int ln = line();
            if (acceptOp(".")) {
                if (cur().type == Tok::Name) {
                    auto a = node(Expr::Kind::GetAttr, ln);
                    a->name = m_t[m_i++].text;
                    a->children.push_back(std::move(e));
                    e = std::move(a);
                } else if (cur().type == Tok::Int) {  // foo.0 is foo[0]
                    auto idx = node(Expr::Kind::Literal, ln);
                    idx->value = Value(int64_t(std::stoll(m_t[m_i++].text)));
                    auto g = node(Expr::Kind::GetItem, ln);
                    g->children.push_back(std::move(e));
                    g->children.push_back(std::move(idx));
                    e = std::move(g);
                } else {
                    error("expected a name after '.'");
                }
            } else if (acceptOp("[")) {
                e = parseSubscript(std::move(e), ln);
            } else if (isOp("(")) {
                auto c = node(Expr::Kind::Call, ln);
                c->children.push_back(std::move(e));
                parseCallArgs(c->args);
                e = std::move(c);
            } else {
                return e;
            }
        }
    }

    ExprPtr parseSubscript(ExprPtr e, int ln) {
        ExprPtr parts[3];
        int n = 0;
        bool isSlice = false;
        while (true) {
            if (!isOp(":") && !isOp("]")) parts[n] = parseExpression();
            if (acceptOp(":")) {
                isSlice = true;
                if (++n > 2) error("too many ':' in slice");
                continue;
            }
            break;
        }
        expectOp("]");
        if (!isSlice) {
            auto g = node(Expr::Kind::GetItem, ln);
            g->children.push_back(std::move(e));
            g->children.push_back(std::move(parts[0]));
            return g;
        }
        auto s = node(Expr::Kind::Slice, ln);
        s->children.push_back(std::move(e));
        for (auto& p : parts) s->children.push_back(std::move(p));
        return s;
    }

    void parseCallArgs(std::vector<Arg>& args) {
        expectOp("(");
        while (!isOp(")")) {
            if (!args.empty()) expectOp(",");
            if (isOp(")")) break;
            Arg a;
            if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
                a.name = m_t[m_i].text;
                m_i += 2;
            } else if (!args.empty() && !args.back().name.empty()) {
                error("positional argument after keyword argument");
            }
            a.value = parseExpression();
            args.push_back(std::move(a));
        }
        expectOp(")");
    }

    ExprPtr parseFilterChain(ExprPtr e) {
        while (true) {
            const int ln = line();
            if (acceptOp("|")) {
                auto f = node(Expr::Kind::Filter, ln);
                f->name = expectName();
                while (acceptOp(".")) f->name += "." + expectName();
                f->children.push_back(std::move(e));
                if (isOp("(")) parseCallArgs(f->args);
                e = std::move(f);
            } else if (acceptName("is")) {
                auto t = node(Expr::Kind::Test, ln);
                t->negated = acceptName("not");
                t->name = expectName();
                t->children.push_back(std::move(e));
                if (isOp("(")) {
                    parseCallArgs(t->args);
                } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                            cur().type == Tok::Float || isOp("[") || isOp("{")) &&
                           !isName("else") && !isName("or") && !isName("and") && !isName("is")) {
                    // `x is divisibleby 3`, `x is sameas false`: one bare argument
                    Arg a;
                    a.value = parsePostfix(parsePrimary());
                    t->args.push_back(std::move(a));
                }
                e = std::move(t);
            } else {
                return e;
            }
        }
    }
};

}  // namespace

Template parseTemplate(std::string_view source, const LexerOptions& opts) {
    return Parser(tokenize(source, opts)).run();
}

}  // namespace ts::jinja
