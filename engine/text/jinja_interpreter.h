// Tree-walking evaluator of a parsed template (internal to the renderer; use jinja_template.h).
// Scoping follows jinja2: a for-loop iteration and a macro call each get a fresh scope whose parent is
// the enclosing (lexical) scope; `set` writes to the innermost scope, so a variable set in a loop body
// is gone at the next iteration and after the loop; if-blocks do not open scopes; namespace() objects
// are shared references and so carry state out of loops.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_template.h"

namespace ts::jinja {

struct Scope {
    std::shared_ptr<Scope> parent;
    Object vars;
};
using ScopePtr = std::shared_ptr<Scope>;

struct CallArgs {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
    Value self;  // the receiver of a method, undefined otherwise

    // Argument `i` by position or by keyword `name`, or `def` when given neither.
    Value get(size_t i, std::string_view name, Value def = Value()) const;
    bool has(size_t i, std::string_view name) const;
};

class Interpreter {
public:
    Interpreter(const RenderLimits& limits, const Object& globals);

    std::string run(const Template& t);

    // For builtins.
    [[noreturn]] void error(const std::string& msg) const;
    Value call(const Value& fn, CallArgs& args);
    void chargeIterations(uint64_t n);
    const RenderLimits& limits() const { return m_limits; }
    Value callFilter(const std::string& name, const Value& input, CallArgs& args);
    bool callTest(const std::string& name, const Value& input, CallArgs& args);
    // What iterating `v` yields, as jinja2 does: list elements, dict keys, string characters; undefined
    // is empty; anything else is an error "<what>: '<type>' object is not iterable" (for loops and filters).
    Array iterationItems(const Value& v, const std::string& what = {}) const;

private:
    enum class Flow { Normal, Break, Continue };

    Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
    Flow execStmt(const Stmt& s, const ScopePtr& scope, std::string& out);
    void execFor(const Stmt& s, const ScopePtr& scope, std::string& out);
    void assign(const Expr& target, const Value& v, const ScopePtr& scope);
    Value makeMacro(const Stmt& s, const ScopePtr& scope);
    Value applyFilterChain(const Expr& chain, const Value& input, const ScopePtr& scope);
    void append(std::string& out, std::string_view text);

    Value eval(const Expr& e, const ScopePtr& scope);
    Value lookup(const std::string& name, const ScopePtr& scope) const;
    Value getAttr(const Value& obj, const std::string& name, const Expr& e);
    Value getItem(const Value& obj, const Value& key, const Expr& e);
    Value binary(const std::string& op, const Value& a, const Value& b);
    bool compare(const std::string& op, const Value& a, const Value& b);
    void evalArgs(const std::vector<Arg>& args, const ScopePtr& scope, CallArgs& out);

    RenderLimits m_limits;
    const Object& m_globals;
    ScopePtr m_root;
    uint64_t m_iterations = 0;
    int m_depth = 0;
    mutable int m_line = 0;
    size_t m_outputBytes = 0;
};

// Builtins (jinja_builtins.cpp). Filters and tests get the input separately from their arguments.
using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& input, CallArgs& args);
FilterFn findFilter(std::string_view name);
TestFn findTest(std::string_view name);
// A bound method of a str, list or dict (undefined when there is none of that name).
Value findMethod(const Value& self, const std::string& name);
// range, namespace, dict, raise_exception, strftime_now, cycler, joiner.
Value findGlobal(std::string_view name);
// Python str.split / strip semantics on code points.
Value pySplit(const std::string& s, const Value& sep, int64_t maxsplit);
std::string pyStrip(const std::string& s, const Value& chars, bool left, bool right);
// Python's float() of an already stripped string, in the C form whatever the process's locale (the control center
// runs under the user's): nullopt unless all of `s` is one number; out of range is nullopt too.
std::optional<double> pyFloat(std::string_view s);

}  // namespace ts::jinja
