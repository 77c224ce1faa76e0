// Expression evaluation: attribute/item lookup as jinja2's sandbox does it, Python arithmetic and
// comparisons, and the error jinja2 raises for an operation on an undefined value.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "text/jinja_interpreter.h"

namespace ts::jinja {

namespace {

// Source-like text of a Name / attribute chain, for "'x.y' is undefined" messages.
std::string describe(const Expr& e) {
    switch (e.kind) {
    case Expr::Kind::Name: return e.name;
    case Expr::Kind::GetAttr: return describe(*e.children[0]) + "." + e.name;
    case Expr::Kind::GetItem: return describe(*e.children[0]) + "[...]";
    case Expr::Kind::Call: return describe(*e.children[0]) + "(...)";
    case Expr::Kind::Literal: return e.value.repr();
    default: return "expression";
    }
}

bool addOverflows(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool subOverflows(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mulOverflows(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

}  // namespace

void Interpreter::evalArgs(const std::vector<Arg>& args, const ScopePtr& scope, CallArgs& out) {
    for (const auto& a : args) {
        Value v = eval(*a.value, scope);
        if (a.name.empty()) out.pos.push_back(std::move(v));
        else out.kw.emplace_back(a.name, std::move(v));
    }
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
    if (e.line) m_line = e.line;
    switch (e.kind) {
    case Expr::Kind::Literal: return e.value;
    case Expr::Kind::Name: return lookup(e.name, scope);
    case Expr::Kind::GetAttr: {
        const Value obj = eval(*e.children[0], scope);
        if (obj.isUndefined()) error("'" + describe(*e.children[0]) + "' is undefined");
        return getAttr(obj, e.name, e);
    }
    case Expr::Kind::GetItem: {
        const Value obj = eval(*e.children[0], scope);
        if (obj.isUndefined()) error("'" + describe(*e.children[0]) + "' is undefined");
        return getItem(obj, eval(*e.children[1], scope), e);
    }
    case Expr::Kind::Slice: {
        const Value obj = eval(*e.children[0], scope);
        Value parts[3];
        for (int i = 0; i < 3; ++i)
            if (e.children[size_t(i + 1)]) parts[i] = eval(*e.children[size_t(i + 1)], scope);
        m_line = e.line;
        CallArgs a;
        a.pos = {obj, parts[0], parts[1], parts[2]};
        return callFilter("__slice__", obj, a);
    }
    case Expr::Kind::Call: {
        const Value fn = eval(*e.children[0], scope);
        if (fn.isUndefined()) error("'" + describe(*e.children[0]) + "' is undefined");
        CallArgs args;
        evalArgs(e.args, scope, args);
        m_line = e.line;
        return call(fn, args);
    }
    case Expr::Kind::Filter: {
        const Value input = eval(*e.children[0], scope);
        CallArgs args;
        evalArgs(e.args, scope, args);
        m_line = e.line;
        return callFilter(e.name, input, args);
    }
    case Expr::Kind::Test: {
        const Value input = eval(*e.children[0], scope);
        CallArgs args;
        evalArgs(e.args, scope, args);
        m_line = e.line;
        return Value(callTest(e.name, input, args) != e.negated);
    }
    case Expr::Kind::Neg:
    case Expr::Kind::Pos: {
        const Value v = eval(*e.children[0], scope);
        if (!v.isNumber()) error("bad operand type for unary " + std::string(e.kind == Expr::Kind::Neg ? "-" : "+") +
                                 ": '" + v.typeName() + "'");
        if (e.kind == Expr::Kind::Pos) return v.isBool() ? Value(v.asInt()) : v;
        if (v.isFloat()) return Value(-v.asFloat());
        if (v.asInt() == std::numeric_limits<int64_t>::min()) error("integer overflow");
        return Value(-v.asInt());
    }
    case Expr::Kind::Not: return Value(!eval(*e.children[0], scope).truthy());
    case Expr::Kind::And: {
        Value a = eval(*e.children[0], scope);
        return a.truthy() ? eval(*e.children[1], scope) : a;
    }
    case Expr::Kind::Or: {
        Value a = eval(*e.children[0], scope);
        return a.truthy() ? a : eval(*e.children[1], scope);
    }
    case Expr::Kind::Cond:
        if (eval(*e.children[1], scope).truthy()) return eval(*e.children[0], scope);
        return e.children[2] ? eval(*e.children[2], scope) : Value();
    case Expr::Kind::Binary: {
        const Value a = eval(*e.children[0], scope);
        const Value b = eval(*e.children[1], scope);
        m_line = e.line;
        return binary(e.name, a, b);
    }
    case Expr::Kind::Compare: {
        Value left = eval(*e.children[0], scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
            Value right = eval(*e.children[i + 1], scope);
            m_line = e.line;
            if (!compare(e.ops[i], left, right)) return Value(false);
            left = std::move(right);
        }
        return Value(true);
    }
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
        Array items;
        for (const auto& c : e.children) items.push_back(eval(*c, scope));
        return e.kind == Expr::Kind::Tuple ? Value::tuple(std::move(items)) : Value(std::move(items));
    }
    case Expr::Kind::Dict: {
        Object o;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
            const Value k = eval(*e.children[i], scope);
            if (!k.isString()) error("only string keys are supported in dict literals");
            o.set(k.str(), eval(*e.children[i + 1], scope));
        }
        return Value(std::move(o));
    }
    }
    return Value();
}

// jinja2's sandbox getattr: Python attributes (here: the methods of str/list/dict) first, then items.
Value Interpreter::getAttr(const Value& obj, const std::string& name, const Expr&) {
    if (obj.isNamespace()) {
        const Value* v = obj.object().find(name);
        return v ? *v : Value();
    }
    Value m = findMethod(obj, name);
    if (!m.isUndefined()) return m;
    if (obj.isObject()) {
        const Value* v = obj.object().find(name);
        return v ? *v : Value();
    }
    return Value();
}

// jinja2's getitem: obj[key] first, then (for a string key) the attribute.
Value Interpreter::getItem(const Value& obj, const Value& key, const Expr& e) {
    if (obj.isObject() || obj.isNamespace()) {
        if (key.isString()) {
            if (const Value* v = obj.object().find(key.str())) return *v;
            return obj.isObject() ? findMethod(obj, key.str()) : Value();
        }
        return Value();
    }
    if ((obj.isArray() || obj.isString()) && (key.isInt() || key.isBool())) {
        int64_t i = key.asInt();
        if (obj.isArray()) {
            const auto n = int64_t(obj.array().size());
            if (i < 0) i += n;
            return (i >= 0 && i < n) ? obj.array()[size_t(i)] : Value();
        }
        const auto cps = utf8Decode(obj.str());
        const auto n = int64_t(cps.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value();
        std::string c;
        utf8Append(c, cps[size_t(i)]);
        return Value(std::move(c));
    }
    if (key.isString()) return getAttr(obj, key.str(), e);
    return Value();
}

Value Interpreter::binary(const std::string& op, const Value& a, const Value& b) {
    if (op == "~") {
        std::string r = a.toString() + b.toString();
        if (r.size() > m_limits.max_output_bytes) error("string too long (over the output size limit)");
        return Value(std::move(r));
    }
    if (a.isUndefined() || b.isUndefined()) error("unsupported operand: undefined value in '" + op + "'");
    const bool nums = a.isNumber() && b.isNumber();
    const bool ints = nums && !a.isFloat() && !b.isFloat();
    int64_t r = 0;
    if (op == "+") {
        if (ints) {
            if (addOverflows(a.asInt(), b.asInt(), &r)) error("integer overflow");
            return Value(r);
        }
        if (nums) return Value(a.asFloat() + b.asFloat());
        if (a.isString() && b.isString()) {
            if (a.str().size() + b.str().size() > m_limits.max_output_bytes) error("string too long");
            return Value(a.str() + b.str());
        }
        if (a.isArray() && b.isArray()) {
            if (a.array().size() + b.array().size() > m_limits.max_sequence_length) error("list too long");
            Array out = a.array();
            out.insert(out.end(), b.array().begin(), b.array().end());
            return Value(std::move(out));
        }
    } else if (op == "-") {
        if (ints) {
            if (subOverflows(a.asInt(), b.asInt(), &r)) error("integer overflow");
            return Value(r);
        }
        if (nums) return Value(a.asFloat() - b.asFloat());
    } else if (op == "*") {
        if (ints) {
            if (mulOverflows(a.asInt(), b.asInt(), &r)) error("integer overflow");
            return Value(r);
        }
        if (nums) return Value(a.asFloat() * b.asFloat());
        const Value* seq = (a.isString() || a.isArray()) ? &a : (b.isString() || b.isArray()) ? &b : nullptr;
        const Value* cnt = seq == &a ? &b : &a;
        if (seq && (cnt->isInt() || cnt->isBool())) {
            const int64_t n = std::max<int64_t>(0, cnt->asInt());
            const size_t unit = seq->isString() ? seq->str().size() : seq->array().size();
            if (unit && uint64_t(n) > m_limits.max_sequence_length / unit) error("sequence repetition too long");
            if (seq->isString()) {
                std::string out;
                for (int64_t i = 0; i < n; ++i) out += seq->str();
                return Value(std::move(out));
            }
            Array out;
            for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->array().begin(), seq->array().end());
            return Value(std::move(out));
        }
    } else if (op == "/") {
        if (nums) {
            if (b.asFloat() == 0.0) error("division by zero");
            return Value(a.asFloat() / b.asFloat());
        }
    } else if (op == "//" || op == "%") {
        if (ints) {
            const int64_t x = a.asInt(), y = b.asInt();
            if (y == 0) error("integer division or modulo by zero");
            if (x == std::numeric_limits<int64_t>::min() && y == -1) error("integer overflow");
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors toward -inf
                --q;
                m += y;
            }
            return Value(op == "//" ? q : m);
        }
        if (nums) {
            const double x = a.asFloat(), y = b.asFloat();
            if (y == 0.0) error("float division or modulo by zero");
            const double q = std::floor(x / y);
            return Value(op == "//" ? q : x - q * y);
        }
        if (op == "%" && a.isString()) error("printf-style '%' string formatting is not supported");
    } else if (op == "**") {
        if (ints && b.asInt() >= 0) {
            int64_t acc = 1, base = a.asInt();
            for (int64_t k = 0; k < b.asInt(); ++k) {
                if (mulOverflows(acc, base, &acc)) error("integer overflow");
                if (acc == 0 || acc == 1) break;
            }
            return Value(acc);
        }
        if (nums) return Value(std::pow(a.asFloat(), b.asFloat()));
    }
    error("unsupported operand types for " + op + ": '" + a.typeName() + "' and '" + b.typeName() + "'");
}

bool Interpreter::compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "in" || op == "notin") {
        bool found = false;
        if (b.isString()) {
            if (!a.isString()) error("'in <string>' requires string as left operand, not " + a.typeName());
            found = b.str().find(a.str()) != std::string::npos;
        } else if (b.isArray()) {
            for (const auto& x : b.array())
                if (equals(a, x)) {
                    found = true;
                    break;
                }
        } else if (b.isObject()) {
            found = a.isString() && b.object().find(a.str()) != nullptr;
        } else if (!b.isUndefined()) {
            error("argument of type '" + b.typeName() + "' is not iterable");
        }
        return op == "in" ? found : !found;
    }
    std::optional<bool> r;
    if (op == "<") r = lessThan(a, b);
    else if (op == ">") r = lessThan(b, a);
    else if (op == "<=") {
        r = lessThan(b, a);
        if (r) r = !*r;
    } else if (op == ">=") {
        r = lessThan(a, b);
        if (r) r = !*r;
    }
    if (!r) error("'" + op + "' not supported between instances of '" + a.typeName() + "' and '" + b.typeName() + "'");
    return *r;
}

}  // namespace ts::jinja
