// Python methods of str / list / dict that chat templates call (content.split('</think>'), s.strip(),
// d.items(), d.get(k, default) ...), and the globals HF provides (range, namespace, raise_exception,
// strftime_now). Methods that mutate (list.append, dict.update) are absent: HF renders in an
// ImmutableSandboxedEnvironment, which refuses them too.
#include <charconv>
#include <ctime>

#include "core/error.h"
#include "text/jinja_interpreter.h"

namespace ts::jinja {

namespace {

using Cps = std::vector<uint32_t>;

bool inChars(uint32_t cp, const Cps* chars) {
    if (!chars) return pyIsSpace(cp);
    for (uint32_t c : *chars)
        if (c == cp) return true;
    return false;
}

std::string requireStr(Interpreter& in, const Value& v, const char* what) {
    if (!v.isString()) in.error(std::string(what) + " must be str, not " + v.typeName());
    return v.str();
}

// Python str.format with {} / {0} / {name} fields (format specs other than empty are rejected).
std::string pyFormat(Interpreter& in, const std::string& fmt, const CallArgs& a) {
    std::string out;
    size_t autoIdx = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        const char c = fmt[i];
        if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out += '{';
            ++i;
        } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
            out += '}';
            ++i;
        } else if (c == '{') {
            const size_t close = fmt.find('}', i);
            if (close == std::string::npos) in.error("str.format: unmatched '{'");
            const std::string field = fmt.substr(i + 1, close - i - 1);
            if (field.find(':') != std::string::npos || field.find('!') != std::string::npos)
                in.error("str.format: format specs are not supported");
            Value v;
            if (field.empty()) v = autoIdx < a.pos.size() ? a.pos[autoIdx++] : Value();
            else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
                const size_t k = std::stoul(field);
                v = k < a.pos.size() ? a.pos[k] : Value();
            } else {
                v = a.get(SIZE_MAX, field);
            }
            if (v.isUndefined()) in.error("str.format: no value for field '{" + field + "}'");
            out += v.toString();
            i = close;
        } else {
            out += c;
        }
    }
    return out;
}

Value strMethod(Interpreter& in, const std::string& s, const std::string& name, CallArgs& a) {
    if (name == "startswith" || name == "endswith") {
        const Value p = a.get(0, "prefix");
        Array options = p.isArray() ? p.array() : Array{p};
        for (const auto& o : options) {
            const std::string x = requireStr(in, o, name.c_str());
            const bool hit = name == "startswith" ? s.compare(0, x.size(), x) == 0 && s.size() >= x.size()
                                                  : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
            if (hit) return Value(true);
        }
        return Value(false);
    }
    if (name == "split") return pySplit(s, a.get(0, "sep", Value::none()), a.get(1, "maxsplit", Value(-1)).asInt());
    if (name == "rsplit") {
        const Value sep = a.get(0, "sep", Value::none());
        const int64_t maxsplit = a.get(1, "maxsplit", Value(-1)).asInt();
        if (maxsplit < 0 || sep.isNone()) {
            if (sep.isNone() && maxsplit >= 0) in.error("rsplit() without a separator and with maxsplit is not supported");
            return pySplit(s, sep, -1);
        }
        const std::string d = requireStr(in, sep, "separator");
        if (d.empty()) in.error("empty separator");
        Array parts;
        size_t end = s.size();
        for (int64_t k = 0; k < maxsplit; ++k) {
            const size_t p = end >= d.size() ? s.rfind(d, end - d.size()) : std::string::npos;
            if (p == std::string::npos) break;
            parts.insert(parts.begin(), Value(s.substr(p + d.size(), end - p - d.size())));
            end = p;
        }
        parts.insert(parts.begin(), Value(s.substr(0, end)));
        return Value(std::move(parts));
    }
    if (name == "strip") return Value(pyStrip(s, a.get(0, "chars", Value::none()), true, true));
    if (name == "lstrip") return Value(pyStrip(s, a.get(0, "chars", Value::none()), true, false));
    if (name == "rstrip") return Value(pyStrip(s, a.get(0, "chars", Value::none()), false, true));
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
        CallArgs none;
        return in.callFilter(name, Value(s), none);
    }
    if (name == "replace") {
        CallArgs fa;
        fa.pos = {a.get(0, "old"), a.get(1, "new"), a.get(2, "count", Value(-1))};
        return in.callFilter("replace", Value(s), fa);
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
        const std::string x = requireStr(in, a.get(0, "sub"), name.c_str());
        if (name == "count") {
            if (x.empty()) return Value(int64_t(utf8Length(s) + 1));
            int64_t n = 0;
            for (size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++n;
            return Value(n);
        }
        const size_t p = (name == "find" || name == "index") ? s.find(x) : s.rfind(x);
        if (p == std::string::npos) {
            if (name == "index" || name == "rindex") in.error("substring not found");
            return Value(-1);
        }
        return Value(int64_t(utf8Length(s.substr(0, p))));
    }
    if (name == "join") {
        const Value items = a.get(0, "iterable");
        if (!items.isArray()) in.error("str.join needs a list");
        std::string out;
        for (size_t i = 0; i < items.array().size(); ++i) {
            if (i) out += s;
            out += requireStr(in, items.array()[i], "join item");
        }
        return Value(std::move(out));
    }
    if (name == "format") return Value(pyFormat(in, s, a));
    if (name == "removeprefix" || name == "removesuffix") {
        const std::string x = requireStr(in, a.get(0, "fix"), name.c_str());
        if (name == "removeprefix" && s.compare(0, x.size(), x) == 0 && s.size() >= x.size())
            return Value(s.substr(x.size()));
        if (name == "removesuffix" && !x.empty() && s.size() >= x.size() &&
            s.compare(s.size() - x.size(), x.size(), x) == 0)
            return Value(s.substr(0, s.size() - x.size()));
        return Value(s);
    }
    if (name == "splitlines") {
        Array lines;
        size_t start = 0;
        for (size_t i = 0; i < s.size(); ++i) {
            if (s[i] == '\n' || s[i] == '\r') {
                lines.push_back(Value(s.substr(start, i - start)));
                if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
                start = i + 1;
            }
        }
        if (start < s.size()) lines.push_back(Value(s.substr(start)));
        return Value(std::move(lines));
    }
    if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum") {
        const Cps cps = utf8Decode(s);
        if (cps.empty()) return Value(false);
        for (uint32_t c : cps) {
            const bool digit = c >= '0' && c <= '9';
            const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0xc0;
            const bool ok = name == "isdigit" ? digit : name == "isalpha" ? alpha : name == "isspace" ? pyIsSpace(c)
                                                                                                     : digit || alpha;
            if (!ok) return Value(false);
        }
        return Value(true);
    }
    if (name == "islower" || name == "isupper") {
        CallArgs none;
        return Value(in.callTest(name == "islower" ? "lower" : "upper", Value(s), none));
    }
    in.error("str has no method '" + name + "'");
}

const char* const kStrMethods[] = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip",
                                   "upper", "lower", "title", "capitalize", "replace", "find", "rfind", "index",
                                   "rindex", "count", "join", "format", "removeprefix", "removesuffix",
                                   "splitlines", "isdigit", "isalpha", "isspace", "isalnum", "islower", "isupper"};

bool isOneOf(const std::string& name, std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (name == n) return true;
    return false;
}

}  // namespace

std::optional<double> pyFloat(std::string_view s) {
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);  // Python takes "+1.5"; from_chars does not
    if (s.empty() || s.front() == '+') return std::nullopt;
    double d = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
    return d;
}

std::string pyStrip(const std::string& s, const Value& chars, bool left, bool right) {
    const Cps cps = utf8Decode(s);
    Cps set;
    const Cps* setp = nullptr;
    if (chars.isString()) {
        set = utf8Decode(chars.str());
        setp = &set;
    }
    size_t b = 0, e = cps.size();
    if (left)
        while (b < e && inChars(cps[b], setp)) ++b;
    if (right)
        while (e > b && inChars(cps[e - 1], setp)) --e;
    return utf8Encode(Cps(cps.begin() + std::ptrdiff_t(b), cps.begin() + std::ptrdiff_t(e)));
}

Value pySplit(const std::string& s, const Value& sep, int64_t maxsplit) {
    Array parts;
    if (sep.isNone() || sep.isUndefined()) {
        // Runs of whitespace separate; leading/trailing whitespace yields no empty parts.
        const Cps cps = utf8Decode(s);
        size_t i = 0;
        int64_t splits = 0;
        while (i < cps.size()) {
            while (i < cps.size() && pyIsSpace(cps[i])) ++i;
            if (i >= cps.size()) break;
            if (maxsplit >= 0 && splits >= maxsplit) {
                size_t e = cps.size();
                while (e > i && pyIsSpace(cps[e - 1])) --e;
                parts.push_back(Value(utf8Encode(Cps(cps.begin() + std::ptrdiff_t(i), cps.begin() + std::ptrdiff_t(e)))));
                break;
            }
            size_t j = i;
            while (j < cps.size() && !pyIsSpace(cps[j])) ++j;
            parts.push_back(Value(utf8Encode(Cps(cps.begin() + std::ptrdiff_t(i), cps.begin() + std::ptrdiff_t(j)))));
            ++splits;
            i = j;
        }
        return Value(std::move(parts));
    }
    if (!sep.isString()) fail(ErrorKind::InvalidArgument, "template error: split separator must be str");
    const std::string& d = sep.str();
    if (d.empty()) fail(ErrorKind::InvalidArgument, "template error: empty separator");
    size_t start = 0;
    int64_t splits = 0;
    for (size_t p = s.find(d); p != std::string::npos && (maxsplit < 0 || splits < maxsplit); p = s.find(d, start)) {
        parts.push_back(Value(s.substr(start, p - start)));
        start = p + d.size();
        ++splits;
    }
    parts.push_back(Value(s.substr(start)));
    return Value(std::move(parts));
}

Value findMethod(const Value& self, const std::string& name) {
    if (self.isString()) {
        bool known = false;
        for (const char* m : kStrMethods) known = known || name == m;
        if (!known) return Value();
        return Value::callable("str." + name, [self, name](Interpreter& in, CallArgs& a) {
            return strMethod(in, self.str(), name, a);
        });
    }
    if (self.isObject() && isOneOf(name, {"get", "items", "keys", "values"})) {
        return Value::callable("dict." + name, [self, name](Interpreter& in, CallArgs& a) -> Value {
            const Object& o = self.object();
            if (name == "get") {
                const Value k = a.get(0, "key");
                const Value* v = k.isString() ? o.find(k.str()) : nullptr;
                return v ? *v : a.get(1, "default", Value::none());
            }
            if (name == "items") {
                CallArgs none;
                return in.callFilter("items", self, none);
            }
            Array out;
            for (const auto& [k, v] : o.items()) out.push_back(name == "keys" ? Value(k) : v);
            return Value(std::move(out));
        });
    }
    if (self.isArray() && isOneOf(name, {"index", "count"})) {
        return Value::callable("list." + name, [self, name](Interpreter& in, CallArgs& a) -> Value {
            const Value x = a.get(0, "value");
            int64_t n = 0;
            for (size_t i = 0; i < self.array().size(); ++i) {
                if (!equals(self.array()[i], x)) continue;
                if (name == "index") return Value(int64_t(i));
                ++n;
            }
            if (name == "index") in.error(x.repr() + " is not in list");
            return Value(n);
        });
    }
    return Value();
}

Value findGlobal(std::string_view name) {
    if (name == "range") {
        return Value::callable("range", [](Interpreter& in, CallArgs& a) -> Value {
            int64_t start = 0, stop = 0, step = 1;
            for (const auto& v : a.pos)
                if (!v.isInt() && !v.isBool()) in.error("range() arguments must be integers, not " + v.typeName());
            if (a.pos.size() == 1) stop = a.pos[0].asInt();
            else if (a.pos.size() >= 2) {
                start = a.pos[0].asInt();
                stop = a.pos[1].asInt();
                if (a.pos.size() >= 3) step = a.pos[2].asInt();
            } else {
                in.error("range expected at least 1 argument");
            }
            if (step == 0) in.error("range() arg 3 must not be zero");
            Array out;
            for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                if (out.size() >= in.limits().max_sequence_length) in.error("range() too long");
                out.push_back(Value(i));
            }
            return Value(std::move(out));
        });
    }
    if (name == "namespace" || name == "dict") {
        const bool ns = name == "namespace";
        return Value::callable(std::string(name), [ns](Interpreter& in, CallArgs& a) -> Value {
            Object o;
            for (const auto& p : a.pos) {
                if (!p.isObject()) in.error(std::string(ns ? "namespace" : "dict") + "() takes a mapping");
                for (const auto& [k, v] : p.object().items()) o.set(k, v);
            }
            for (const auto& [k, v] : a.kw) o.set(k, v);
            return ns ? Value::namespace_(std::move(o)) : Value(std::move(o));
        });
    }
    if (name == "raise_exception") {
        return Value::callable("raise_exception", [](Interpreter& in, CallArgs& a) -> Value {
            in.error("raise_exception: " + a.get(0, "message").toString());
        });
    }
    if (name == "strftime_now") {
        return Value::callable("strftime_now", [](Interpreter& in, CallArgs& a) -> Value {
            const Value fmt = a.get(0, "format");
            if (!fmt.isString()) in.error("strftime_now needs a format string");
            const std::time_t t = std::time(nullptr);
            std::tm tm{};
            localtime_r(&t, &tm);
            char buf[512];
            const size_t n = std::strftime(buf, sizeof buf, fmt.str().c_str(), &tm);
            return Value(std::string(buf, n));
        });
    }
    return Value();
}

}  // namespace ts::jinja
