// Python semantics of Jinja values: printing (str/repr), truthiness, equality, ordering, json.dumps.
#include "text/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace ts::jinja {

const Value* Object::find(std::string_view key) const {
    for (const auto& [k, v] : m_items)
        if (k == key) return &v;
    return nullptr;
}

Value* Object::find(std::string_view key) {
    for (auto& [k, v] : m_items)
        if (k == key) return &v;
    return nullptr;
}

void Object::set(std::string key, Value v) {
    if (Value* existing = find(key)) {
        *existing = std::move(v);
        return;
    }
    m_items.emplace_back(std::move(key), std::move(v));
}

Value Value::callable(std::string name, NativeFn fn) {
    Value v;
    v.m_type = Type::Callable;
    v.m_fn = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
    return v;
}

Value Value::fromJson(const nlohmann::ordered_json& j) {
    switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
        const auto u = j.get<uint64_t>();
        if (u > uint64_t(INT64_MAX)) return Value(double(u));
        return Value(int64_t(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
        Array a;
        a.reserve(j.size());
        for (const auto& e : j) a.push_back(fromJson(e));
        return Value(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
        Object o;
        for (const auto& [k, e] : j.items()) o.set(k, fromJson(e));
        return Value(std::move(o));
    }
    default: return none();  // binary / discarded: never produced by the JSON parser
    }
}

nlohmann::ordered_json Value::toJson() const {
    switch (m_type) {
    case Type::None: return nullptr;
    case Type::Bool: return asBool();
    case Type::Int: return m_int;
    case Type::Float: return m_float;
    case Type::String: return *m_str;
    case Type::List: {
        auto j = nlohmann::ordered_json::array();
        for (const auto& e : *m_arr) j.push_back(e.toJson());
        return j;
    }
    case Type::Dict:
    case Type::Namespace: {
        auto j = nlohmann::ordered_json::object();
        for (const auto& [k, e] : m_obj->items()) j[k] = e.toJson();
        return j;
    }
    default: fail(ErrorKind::InvalidArgument, "Object of type " + typeName() + " is not JSON serializable");
    }
}

bool Value::truthy() const {
    switch (m_type) {
    case Type::Undefined:
    case Type::None: return false;
    case Type::Bool:
    case Type::Int: return m_int != 0;
    case Type::Float: return m_float != 0.0;
    case Type::String: return !m_str->empty();
    case Type::List: return !m_arr->empty();
    case Type::Dict: return m_obj->size() != 0;
    default: return true;
    }
}

std::string Value::typeName() const {
    switch (m_type) {
    case Type::Undefined: return "undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::List: return "list object";
    case Type::Dict: return "dict object";
    case Type::Namespace: return "Namespace";
    case Type::Callable: return "function " + m_fn->name;
    }
    return "?";
}

std::string pyFloatRepr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    // Shortest round-trip digits in scientific form, then laid out the way Python's repr does:
    // positional for 1e-4 <= |d| < 1e16, otherwise d.ddde+XX.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    const size_t epos = sci.find('e');
    std::string mant = sci.substr(0, epos);
    const int exp = std::stoi(sci.substr(epos + 1));
    bool neg = false;
    if (!mant.empty() && mant[0] == '-') {
        neg = true;
        mant.erase(0, 1);
    }
    std::string digits;
    for (char c : mant)
        if (c != '.') digits += c;
    std::string out;
    if (exp < -4 || exp >= 16) {
        out = digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char e[16];
        std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
        out += e;
    } else if (exp < 0) {
        out = "0." + std::string(size_t(-exp - 1), '0') + digits;
    } else {
        const auto intLen = size_t(exp + 1);
        if (digits.size() <= intLen) {
            out = digits + std::string(intLen - digits.size(), '0') + ".0";
        } else {
            out = digits.substr(0, intLen) + "." + digits.substr(intLen);
        }
    }
    return neg ? "-" + out : out;
}

static std::string pyStrRepr(const std::string& s) {
    // Python picks single quotes unless the text has a ' and no ".
    const bool hasSingle = s.find('\'') != std::string::npos;
    const bool hasDouble = s.find('"') != std::string::npos;
    const char q = (hasSingle && !hasDouble) ? '"' : '\'';
    std::string out(1, q);
    for (unsigned char c : s) {
        if (c == q || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            out += b;
        } else {
            out += char(c);  // printable non-ASCII stays as is in Python 3 repr
        }
    }
    out += q;
    return out;
}

std::string Value::repr() const {
    switch (m_type) {
    case Type::String: return pyStrRepr(*m_str);
    case Type::List: {
        std::string out = m_tuple ? "(" : "[";
        for (size_t i = 0; i < m_arr->size(); ++i) {
            if (i) out += ", ";
            out += (*m_arr)[i].repr();
        }
        if (m_tuple) return out + (m_arr->size() == 1 ? ",)" : ")");
        return out + "]";
    }
    case Type::Dict: {
        std::string out = "{";
        bool first = true;
        for (const auto& [k, v] : m_obj->items()) {
            if (!first) out += ", ";
            first = false;
            out += pyStrRepr(k) + ": " + v.repr();
        }
        return out + "}";
    }
    case Type::Undefined: return "Undefined";
    default: return toString();
    }
}

std::string Value::toString() const {
    switch (m_type) {
    case Type::Undefined: return "";
    case Type::None: return "None";
    case Type::Bool: return asBool() ? "True" : "False";
    case Type::Int: return std::to_string(m_int);
    case Type::Float: return pyFloatRepr(m_float);
    case Type::String: return *m_str;
    case Type::Namespace: return "<Namespace>";
    case Type::Callable: return "<function " + m_fn->name + ">";
    default: return repr();
    }
}

bool equals(const Value& a, const Value& b) {
    if (a.isNumber() && b.isNumber()) {
        if (a.isFloat() || b.isFloat()) return a.asFloat() == b.asFloat();
        return a.asInt() == b.asInt();
    }
    if (a.type() != b.type()) return false;
    switch (a.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: return true;
    case Value::Type::String: return a.str() == b.str();
    case Value::Type::List: {
        if (a.array().size() != b.array().size()) return false;
        for (size_t i = 0; i < a.array().size(); ++i)
            if (!equals(a.array()[i], b.array()[i])) return false;
        return true;
    }
    case Value::Type::Dict: {
        if (a.object().size() != b.object().size()) return false;
        for (const auto& [k, v] : a.object().items()) {
            const Value* o = b.object().find(k);
            if (!o || !equals(v, *o)) return false;
        }
        return true;
    }
    case Value::Type::Namespace: return &a.object() == &b.object();  // identity, as in Python
    default: return &a.fn() == &b.fn();
    }
}

std::optional<bool> lessThan(const Value& a, const Value& b) {
    if (a.isNumber() && b.isNumber()) {
        if (a.isFloat() || b.isFloat()) return a.asFloat() < b.asFloat();
        return a.asInt() < b.asInt();
    }
    if (a.isString() && b.isString()) return a.str() < b.str();
    if (a.isArray() && b.isArray()) {
        const auto& x = a.array();
        const auto& y = b.array();
        for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
            if (equals(x[i], y[i])) continue;
            return lessThan(x[i], y[i]);
        }
        return x.size() < y.size();
    }
    return std::nullopt;
}

// ---- UTF-8 ----

std::vector<uint32_t> utf8Decode(std::string_view s) {
    // Invalid bytes decode to themselves (as Latin-1) so that nothing is lost or thrown.
    std::vector<uint32_t> out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (len == 0 || i + size_t(len) > s.size()) {
            out.push_back(c);
            ++i;
            continue;
        }
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1fu) : len == 3 ? (c & 0x0fu) : (c & 0x07u);
        bool ok = true;
        for (int k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + size_t(k)]);
            if ((cc & 0xc0) != 0x80) ok = false;
            cp = (cp << 6) | (cc & 0x3fu);
        }
        if (!ok) {
            out.push_back(c);
            ++i;
            continue;
        }
        out.push_back(cp);
        i += size_t(len);
    }
    return out;
}

void utf8Append(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xc0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out += char(0xe0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3f));
        out += char(0x80 | (cp & 0x3f));
    } else {
        out += char(0xf0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3f));
        out += char(0x80 | ((cp >> 6) & 0x3f));
        out += char(0x80 | (cp & 0x3f));
    }
}

std::string utf8Encode(const std::vector<uint32_t>& cps) {
    std::string out;
    out.reserve(cps.size());
    for (uint32_t cp : cps) utf8Append(out, cp);
    return out;
}

size_t utf8Length(std::string_view s) {
    size_t n = 0;
    for (unsigned char c : s)
        if ((c & 0xc0) != 0x80) ++n;
    return n;
}

bool pyIsSpace(uint32_t cp) {
    // str.isspace() of Python 3: ASCII whitespace, the information separators and Unicode Zs/Zl/Zp.
    return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
           cp == 0x205f || cp == 0x3000;
}

// ---- json.dumps ----

static void dumpString(std::string& out, const std::string& s, bool ensureAscii) {
    out += '"';
    for (uint32_t cp : utf8Decode(s)) {
        switch (cp) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
            if (cp < 0x20 || (ensureAscii && cp > 0x7e)) {
                char b[16];
                if (cp >= 0x10000) {
                    const uint32_t v = cp - 0x10000;
                    std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
                } else {
                    std::snprintf(b, sizeof b, "\\u%04x", cp);
                }
                out += b;
            } else {
                utf8Append(out, cp);
            }
        }
    }
    out += '"';
}

static void dump(std::string& out, const Value& v, const JsonDumpOptions& o, int depth) {
    if (depth > 512) fail(ErrorKind::InvalidArgument, "tojson: value nested too deeply");
    auto newline = [&](int d) {
        if (!o.indent) return;
        out += '\n';
        out.append(size_t(std::max(0, *o.indent)) * size_t(d), ' ');
    };
    switch (v.type()) {
    case Value::Type::None: out += "null"; return;
    case Value::Type::Bool: out += v.asBool() ? "true" : "false"; return;
    case Value::Type::Int: out += std::to_string(v.asInt()); return;
    case Value::Type::Float: {
        const double d = v.asFloat();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
        else out += pyFloatRepr(d);
        return;
    }
    case Value::Type::String: dumpString(out, v.str(), o.ensure_ascii); return;
    case Value::Type::List: {
        if (v.array().empty()) {
            out += "[]";
            return;
        }
        out += '[';
        bool first = true;
        for (const auto& e : v.array()) {
            if (!first) out += o.item_sep;
            first = false;
            newline(depth + 1);
            dump(out, e, o, depth + 1);
        }
        newline(depth);
        out += ']';
        return;
    }
    case Value::Type::Dict:
    case Value::Type::Namespace: {
        if (v.object().size() == 0) {
            out += "{}";
            return;
        }
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& kv : v.object().items()) items.push_back(&kv);
        if (o.sort_keys)
            std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        out += '{';
        bool first = true;
        for (const auto* kv : items) {
            if (!first) out += o.item_sep;
            first = false;
            newline(depth + 1);
            dumpString(out, kv->first, o.ensure_ascii);
            out += o.key_sep;
            dump(out, kv->second, o, depth + 1);
        }
        newline(depth);
        out += '}';
        return;
    }
    default: fail(ErrorKind::InvalidArgument, "Object of type " + v.typeName() + " is not JSON serializable");
    }
}

std::string jsonDumps(const Value& v, const JsonDumpOptions& opts) {
    std::string out;
    dump(out, v, opts, 0);
    return out;
}

}  // namespace ts::jinja
