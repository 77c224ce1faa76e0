// Statement execution and expression evaluation with jinja2 (3.1) semantics under the sandbox HF uses.
#include "text/jinja_interpreter.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace ts::jinja {

Value CallArgs::get(size_t i, std::string_view name, Value def) const {
    if (i < pos.size()) return pos[i];
    for (const auto& [k, v] : kw)
        if (k == name) return v;
    return def;
}

bool CallArgs::has(size_t i, std::string_view name) const {
    if (i < pos.size()) return true;
    for (const auto& kv : kw)
        if (kv.first == name) return true;
    return false;
}

Interpreter::Interpreter(const RenderLimits& limits, const Object& globals)
    : m_limits(limits), m_globals(globals), m_root(std::make_shared<Scope>()) {}

void Interpreter::error(const std::string& msg) const {
    fail(ErrorKind::InvalidArgument, "template error (line " + std::to_string(m_line) + "): " + msg);
}

void Interpreter::chargeIterations(uint64_t n) {
    m_iterations += n;
    if (m_iterations > m_limits.max_loop_iterations)
        error("loop iteration limit (" + std::to_string(m_limits.max_loop_iterations) + ") exceeded");
}

void Interpreter::append(std::string& out, std::string_view text) {
    // Counted over every buffer (macro bodies, set blocks), so nested captures cannot dodge the limit.
    m_outputBytes += text.size();
    if (m_outputBytes > m_limits.max_output_bytes)
        error("output size limit (" + std::to_string(m_limits.max_output_bytes) + " bytes) exceeded");
    out += text;
}

std::string Interpreter::run(const Template& t) {
    m_root->vars = Object();
    for (const auto& [k, v] : m_globals.items()) m_root->vars.set(k, v);
    std::string out;
    const Flow f = exec(t.body, m_root, out);
    if (f != Flow::Normal) error("'break' or 'continue' outside a loop");
    return out;
}

Interpreter::Flow Interpreter::exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const auto& s : body) {
        const Flow f = execStmt(*s, scope, out);
        if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
}

Interpreter::Flow Interpreter::execStmt(const Stmt& s, const ScopePtr& scope, std::string& out) {
    if (s.line) m_line = s.line;
    switch (s.kind) {
    case Stmt::Kind::Text: append(out, s.text); break;
    case Stmt::Kind::Output: append(out, eval(*s.expr, scope).toString()); break;
    case Stmt::Kind::If:
        for (size_t i = 0; i < s.conds.size(); ++i) {
            if (eval(*s.conds[i], scope).truthy()) return exec(s.bodies[i], scope, out);
        }
        return exec(s.else_body, scope, out);
    case Stmt::Kind::For: execFor(s, scope, out); break;
    case Stmt::Kind::Set: assign(*s.target, eval(*s.expr, scope), scope); break;
    case Stmt::Kind::SetBlock: {
        std::string buf;
        const Flow f = exec(s.bodies[0], scope, buf);
        if (f != Flow::Normal) return f;
        Value v(std::move(buf));
        if (s.expr) v = applyFilterChain(*s.expr, v, scope);
        scope->vars.set(s.name, v);
        break;
    }
    case Stmt::Kind::Macro: scope->vars.set(s.name, makeMacro(s, scope)); break;
    case Stmt::Kind::CallBlock: {
        const Expr& callExpr = *s.expr;
        Value fn = eval(*callExpr.children[0], scope);
        CallArgs args;
        evalArgs(callExpr.args, scope, args);
        // `caller` renders the block body like a macro; its parameters come from {% call(params) %}.
        args.kw.emplace_back("caller", makeMacro(s, scope));
        m_line = s.line;
        append(out, call(fn, args).toString());
        break;
    }
    case Stmt::Kind::FilterBlock: {
        std::string buf;
        const Flow f = exec(s.bodies[0], scope, buf);
        if (f != Flow::Normal) return f;
        append(out, applyFilterChain(*s.expr, Value(std::move(buf)), scope).toString());
        break;
    }
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
    case Stmt::Kind::Scope: {
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        return exec(s.bodies[0], inner, out);
    }
    }
    return Flow::Normal;
}

Array Interpreter::iterationItems(const Value& v, const std::string& what) const {
    switch (v.type()) {
    case Value::Type::List: return v.array();
    case Value::Type::Undefined: return {};
    case Value::Type::Dict: {
        Array keys;
        for (const auto& kv : v.object().items()) keys.push_back(Value(kv.first));
        return keys;
    }
    case Value::Type::String: {
        Array chars;
        for (uint32_t cp : utf8Decode(v.str())) {
            std::string c;
            utf8Append(c, cp);
            chars.push_back(Value(std::move(c)));
        }
        return chars;
    }
    default: error((what.empty() ? "" : what + ": ") + "'" + v.typeName() + "' object is not iterable");
    }
}

void Interpreter::execFor(const Stmt& s, const ScopePtr& scope, std::string& out) {
    Array items = iterationItems(eval(*s.expr, scope));
    if (s.filter) {
        Array kept;
        for (const auto& it : items) {
            chargeIterations(1);
            auto tmp = std::make_shared<Scope>();
            tmp->parent = scope;
            assign(*s.target, it, tmp);
            if (eval(*s.filter, tmp).truthy()) kept.push_back(it);
        }
        items = std::move(kept);
    }
    const auto n = int64_t(items.size());
    for (int64_t i = 0; i < n; ++i) {
        chargeIterations(1);
        auto iter = std::make_shared<Scope>();
        iter->parent = scope;
        assign(*s.target, items[size_t(i)], iter);
        Object loop;
        loop.set("index", Value(i + 1));
        loop.set("index0", Value(i));
        loop.set("revindex", Value(n - i));
        loop.set("revindex0", Value(n - i - 1));
        loop.set("first", Value(i == 0));
        loop.set("last", Value(i == n - 1));
        loop.set("length", Value(n));
        loop.set("depth", Value(1));
        loop.set("depth0", Value(0));
        loop.set("previtem", i > 0 ? items[size_t(i - 1)] : Value());
        loop.set("nextitem", i + 1 < n ? items[size_t(i + 1)] : Value());
        loop.set("cycle", Value::callable("cycle", [i](Interpreter& in, CallArgs& a) -> Value {
                     if (a.pos.empty()) in.error("loop.cycle() needs at least one argument");
                     return a.pos[size_t(i) % a.pos.size()];
                 }));
        iter->vars.set("loop", Value(std::move(loop)));
        const Flow f = exec(s.bodies[0], iter, out);
        if (f == Flow::Break) break;
    }
    if (n == 0) exec(s.else_body, scope, out);
}

void Interpreter::assign(const Expr& target, const Value& v, const ScopePtr& scope) {
    switch (target.kind) {
    case Expr::Kind::Name: scope->vars.set(target.name, v); return;
    case Expr::Kind::GetAttr: {
        const Value obj = eval(*target.children[0], scope);
        if (!obj.isNamespace()) error("cannot assign attribute on non-namespace object");
        obj.mutableObject().set(target.name, v);
        return;
    }
    case Expr::Kind::Tuple: {
        const Array items = iterationItems(v);
        if (items.size() != target.children.size())
            error("cannot unpack " + std::to_string(items.size()) + " values into " +
                  std::to_string(target.children.size()) + " names");
        for (size_t i = 0; i < items.size(); ++i) assign(*target.children[i], items[i], scope);
        return;
    }
    default: error("invalid assignment target");
    }
}

Value Interpreter::makeMacro(const Stmt& s, const ScopePtr& scope) {
    // The macro closes over its defining scope weakly: the scope owns the macro value, so a strong
    // reference would be a cycle. Should the scope be gone, the root scope stands in.
    std::weak_ptr<Scope> defScope = scope;
    const Stmt* def = &s;
    return Value::callable(s.name, [this, def, defScope](Interpreter&, CallArgs& args) -> Value {
        auto ms = std::make_shared<Scope>();
        ms->parent = defScope.lock();
        if (!ms->parent) ms->parent = m_root;
        Array varargs;
        Object kwargs;
        const auto& params = def->params;
        for (size_t i = 0; i < args.pos.size(); ++i) {
            if (i < params.size()) ms->vars.set(params[i].name, args.pos[i]);
            else varargs.push_back(args.pos[i]);
        }
        for (const auto& [k, v] : args.kw) {
            bool isParam = k == "caller";
            for (const auto& p : params) isParam = isParam || p.name == k;
            if (isParam) ms->vars.set(k, v);
            else kwargs.set(k, v);
        }
        for (const auto& p : params) {
            if (ms->vars.find(p.name)) continue;
            ms->vars.set(p.name, p.default_ ? eval(*p.default_, ms) : Value());
        }
        ms->vars.set("varargs", Value::tuple(std::move(varargs)));
        ms->vars.set("kwargs", Value(std::move(kwargs)));
        std::string buf;
        const Flow f = exec(def->bodies[0], ms, buf);
        if (f != Flow::Normal) error("'break' or 'continue' outside a loop");
        return Value(std::move(buf));
    });
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
    if (fn.isUndefined()) error("call of an undefined value");
    if (!fn.isCallable()) error("'" + fn.typeName() + "' object is not callable");
    if (++m_depth > m_limits.max_call_depth) {
        error("call depth limit (" + std::to_string(m_limits.max_call_depth) + ") exceeded in '" + fn.fn().name +
              "'");
    }
    const int line = m_line;
    Value r = fn.fn().fn(*this, args);
    m_line = line;
    --m_depth;
    return r;
}

Value Interpreter::callFilter(const std::string& name, const Value& input, CallArgs& args) {
    FilterFn f = findFilter(name);
    if (!f) error("no filter named '" + name + "'");
    return f(*this, input, args);
}

bool Interpreter::callTest(const std::string& name, const Value& input, CallArgs& args) {
    TestFn t = findTest(name);
    if (!t) error("no test named '" + name + "'");
    return t(*this, input, args);
}

Value Interpreter::applyFilterChain(const Expr& chain, const Value& input, const ScopePtr& scope) {
    // The chain's innermost operand is a placeholder Name with an empty name; bind it to the input.
    auto tmp = std::make_shared<Scope>();
    tmp->parent = scope;
    tmp->vars.set("", input);
    return eval(chain, tmp);
}

Value Interpreter::lookup(const std::string& name, const ScopePtr& scope) const {
    for (const Scope* s = scope.get(); s; s = s->parent.get()) {
        if (const Value* v = s->vars.find(name)) return *v;
    }
    return findGlobal(name);
}

}  // namespace ts::jinja
