// Values of the Jinja renderer: the JSON data model (none, bool, int, float, string, array, object) plus
// Jinja's undefined, namespace() objects and callables (macros, builtins, bound methods). Semantics follow
// Python, because HF chat templates run on jinja2: truthiness, == between 1 and 1.0 and True, str() of
// None is "None", str() of a list is its Python repr, object keys keep insertion order (the order of a
// request's tool schema is visible in the prompt through tojson).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ts::jinja {

class Value;
using Array = std::vector<Value>;

// Insertion-ordered string-keyed map. Chat objects are small; a linear scan beats hashing here.
class Object {
public:
    const Value* find(std::string_view key) const;
    Value* find(std::string_view key);
    void set(std::string key, Value v);  // replaces in place or appends
    size_t size() const { return m_items.size(); }
    const std::vector<std::pair<std::string, Value>>& items() const { return m_items; }

private:
    std::vector<std::pair<std::string, Value>> m_items;
};

struct CallArgs;
class Interpreter;
// A builtin or macro. `self` is the object a method was read from (none for free functions).
using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;

struct Callable {
    std::string name;
    NativeFn fn;
};

class Value {
public:
    enum class Type { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

    Value() = default;  // undefined
    static Value none() { Value v; v.m_type = Type::None; return v; }
    Value(bool b) : m_type(Type::Bool), m_int(b ? 1 : 0) {}
    Value(int i) : m_type(Type::Int), m_int(i) {}
    Value(int64_t i) : m_type(Type::Int), m_int(i) {}
    Value(double d) : m_type(Type::Float), m_float(d) {}
    Value(std::string s) : m_type(Type::String), m_str(std::make_shared<const std::string>(std::move(s))) {}
    Value(const char* s) : Value(std::string(s)) {}
    Value(Array a) : m_type(Type::List), m_arr(std::make_shared<Array>(std::move(a))) {}
    Value(Object o) : m_type(Type::Dict), m_obj(std::make_shared<Object>(std::move(o))) {}
    // A Python tuple: a list that prints as (a, b) (varargs, items() pairs, tuple literals).
    static Value tuple(Array a) { Value v(std::move(a)); v.m_tuple = true; return v; }
    bool isTuple() const { return m_tuple; }
    static Value namespace_(Object o) { Value v(std::move(o)); v.m_type = Type::Namespace; return v; }
    static Value callable(std::string name, NativeFn fn);

    static Value fromJson(const nlohmann::ordered_json& j);
    // Throws ts::Error for undefined and callables (json.dumps raises on them too).
    nlohmann::ordered_json toJson() const;

    Type type() const { return m_type; }
    bool isUndefined() const { return m_type == Type::Undefined; }
    bool isNone() const { return m_type == Type::None; }
    bool isBool() const { return m_type == Type::Bool; }
    bool isInt() const { return m_type == Type::Int; }
    bool isFloat() const { return m_type == Type::Float; }
    bool isNumber() const { return m_type == Type::Int || m_type == Type::Float || m_type == Type::Bool; }
    bool isString() const { return m_type == Type::String; }
    bool isArray() const { return m_type == Type::List; }
    bool isObject() const { return m_type == Type::Dict; }  // a mapping (namespace is not one)
    bool isNamespace() const { return m_type == Type::Namespace; }
    bool isCallable() const { return m_type == Type::Callable; }

    bool asBool() const { return m_int != 0; }
    int64_t asInt() const { return m_type == Type::Float ? int64_t(m_float) : m_int; }
    double asFloat() const { return m_type == Type::Float ? m_float : double(m_int); }
    const std::string& str() const { return *m_str; }
    const Array& array() const { return *m_arr; }
    const Object& object() const { return *m_obj; }  // also the attributes of a namespace
    Object& mutableObject() const { return *m_obj; }  // namespaces only: `set ns.x = ...`
    const Callable& fn() const { return *m_fn; }

    bool truthy() const;
    // Python str(): what {{ value }} prints. Undefined prints as the empty string.
    std::string toString() const;
    // Python repr(): how a value prints inside a list or dict.
    std::string repr() const;
    std::string typeName() const;  // for error messages, e.g. "dict object"

private:
    Type m_type = Type::Undefined;
    bool m_tuple = false;
    int64_t m_int = 0;
    double m_float = 0;
    std::shared_ptr<const std::string> m_str;
    std::shared_ptr<Array> m_arr;
    std::shared_ptr<Object> m_obj;
    std::shared_ptr<Callable> m_fn;
};

// Python ==. 1 == 1.0 == True; undefined equals only undefined; containers compare element-wise.
bool equals(const Value& a, const Value& b);
// Python < for numbers, strings (by code point, which UTF-8 byte order preserves) and sequences;
// nullopt where Python raises TypeError.
std::optional<bool> lessThan(const Value& a, const Value& b);

// Python float repr (shortest round-trip digits, "1e+16", "1.5e-05", "inf", "nan").
std::string pyFloatRepr(double d);

struct JsonDumpOptions {
    bool ensure_ascii = false;  // HF's tojson default
    std::optional<int> indent;  // nullopt: single line
    std::string item_sep = ", ";
    std::string key_sep = ": ";
    bool sort_keys = false;
};
// json.dumps with the given options (HF's tojson filter is json.dumps with ensure_ascii=False).
std::string jsonDumps(const Value& v, const JsonDumpOptions& opts);

// UTF-8 helpers: Python strings index by code point.
std::vector<uint32_t> utf8Decode(std::string_view s);
std::string utf8Encode(const std::vector<uint32_t>& cps);
void utf8Append(std::string& out, uint32_t cp);
size_t utf8Length(std::string_view s);
bool pyIsSpace(uint32_t cp);

}  // namespace ts::jinja
