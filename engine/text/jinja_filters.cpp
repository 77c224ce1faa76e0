// Filters and tests: jinja2's builtins that chat templates use, with jinja2's argument names and
// edge cases (default on undefined only, sort case-insensitive, first/last of empty is undefined), and
// HF's tojson (json.dumps, ensure_ascii=False by default, not jinja2's HTML-safe variant).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "text/jinja_interpreter.h"

namespace ts::jinja {

namespace {

uint32_t caseMap(uint32_t c, bool upper) {
    // ASCII, Latin-1, Greek and Cyrillic basic ranges: what the Python str methods do for the scripts
    // chat prompts contain in practice.
    if (upper) {
        if ((c >= 'a' && c <= 'z') || (c >= 0xe0 && c <= 0xfe && c != 0xf7) || (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) ||
            (c >= 0x430 && c <= 0x44f))
            return c - 0x20;
        if (c >= 0x450 && c <= 0x45f) return c - 0x50;
    } else {
        if ((c >= 'A' && c <= 'Z') || (c >= 0xc0 && c <= 0xde && c != 0xd7) || (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) ||
            (c >= 0x410 && c <= 0x42f))
            return c + 0x20;
        if (c >= 0x400 && c <= 0x40f) return c + 0x50;
    }
    return c;
}
bool isCased(uint32_t c) { return caseMap(c, true) != c || caseMap(c, false) != c; }

std::string mapCase(const std::string& s, int mode) {  // 0 lower, 1 upper, 2 capitalize, 3 title
    auto cps = utf8Decode(s);
    bool prevCased = false;
    for (size_t i = 0; i < cps.size(); ++i) {
        const uint32_t c = cps[i];
        bool up = mode == 1;
        if (mode == 2) up = i == 0;
        if (mode == 3) up = !prevCased;
        prevCased = isCased(c);
        cps[i] = caseMap(c, up);
    }
    return utf8Encode(cps);
}

const Value& requireString(Interpreter& in, const Value& v, const char* filter) {
    if (!v.isString()) in.error(std::string("filter '") + filter + "' needs a string, got " + v.typeName());
    return v;
}

Array toList(Interpreter& in, const Value& v, const char* what) { return in.iterationItems(v, what); }

// Attribute path "a.b.0" as jinja2's make_attrgetter resolves it.
Value attrPath(const Value& v, const std::string& path) {
    Value cur = v;
    size_t start = 0;
    while (start <= path.size()) {
        const size_t dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (cur.isObject() || cur.isNamespace()) {
            const Value* f = cur.object().find(part);
            cur = f ? *f : Value();
        } else if (cur.isArray() && !part.empty() && std::isdigit(static_cast<unsigned char>(part[0]))) {
            const size_t i = std::stoul(part);
            cur = i < cur.array().size() ? cur.array()[i] : Value();
        } else {
            return Value();
        }
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return cur;
}

CallArgs restArgs(const CallArgs& a, size_t from) {
    CallArgs r;
    for (size_t i = from; i < a.pos.size(); ++i) r.pos.push_back(a.pos[i]);
    r.kw = a.kw;
    return r;
}

Value fTojson(Interpreter& in, const Value& v, CallArgs& a) {
    JsonDumpOptions o;
    o.ensure_ascii = a.get(0, "ensure_ascii", Value(false)).truthy();
    const Value indent = a.get(1, "indent", Value::none());
    if (indent.isInt()) o.indent = int(indent.asInt());
    else if (indent.isString()) in.error("tojson: string indent is not supported");
    const Value seps = a.get(2, "separators", Value::none());
    if (o.indent) o.item_sep = ",";  // json.dumps drops the space after ',' when indenting
    if (seps.isArray() && seps.array().size() == 2 && seps.array()[0].isString() && seps.array()[1].isString()) {
        o.item_sep = seps.array()[0].str();
        o.key_sep = seps.array()[1].str();
    } else if (!seps.isNone()) {
        in.error("tojson: separators must be a pair of strings");
    }
    o.sort_keys = a.get(3, "sort_keys", Value(false)).truthy();
    try {
        return Value(jsonDumps(v, o));
    } catch (const Error& e) {
        in.error(e.what());
    }
}

Value fLength(Interpreter& in, const Value& v, CallArgs&) {
    switch (v.type()) {
    case Value::Type::String: return Value(int64_t(utf8Length(v.str())));
    case Value::Type::List: return Value(int64_t(v.array().size()));
    case Value::Type::Dict:
    case Value::Type::Namespace: return Value(int64_t(v.object().size()));
    case Value::Type::Undefined: return Value(0);
    default: in.error("object of type '" + v.typeName() + "' has no len()");
    }
}

Value fDefault(Interpreter&, const Value& v, CallArgs& a) {
    const bool boolean = a.get(1, "boolean", Value(false)).truthy();
    if (v.isUndefined() || (boolean && !v.truthy())) return a.get(0, "default_value", Value(""));
    return v;
}

Value fItems(Interpreter& in, const Value& v, CallArgs&) {
    if (v.isUndefined()) return Value(Array{});
    if (!v.isObject()) in.error("items: '" + v.typeName() + "' is not a mapping");
    Array out;
    for (const auto& [k, e] : v.object().items()) out.push_back(Value::tuple(Array{Value(k), e}));
    return Value(std::move(out));
}

Value fString(Interpreter&, const Value& v, CallArgs&) { return Value(v.toString()); }
Value fLower(Interpreter&, const Value& v, CallArgs&) { return Value(mapCase(v.toString(), 0)); }
Value fUpper(Interpreter&, const Value& v, CallArgs&) { return Value(mapCase(v.toString(), 1)); }
Value fCapitalize(Interpreter&, const Value& v, CallArgs&) { return Value(mapCase(v.toString(), 2)); }
Value fTitle(Interpreter&, const Value& v, CallArgs&) { return Value(mapCase(v.toString(), 3)); }
Value fTrim(Interpreter&, const Value& v, CallArgs& a) {
    return Value(pyStrip(v.toString(), a.get(0, "chars", Value::none()), true, true));
}
Value fSafe(Interpreter&, const Value& v, CallArgs&) { return v; }

Value fEscape(Interpreter&, const Value& v, CallArgs&) {
    std::string out;
    for (char c : v.toString()) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
        }
    }
    return Value(std::move(out));
}

Value fReplace(Interpreter& in, const Value& v, CallArgs& a) {
    const std::string s = v.toString();
    const std::string from = requireString(in, a.get(0, "old"), "replace").str();
    const std::string to = requireString(in, a.get(1, "new"), "replace").str();
    int64_t count = a.get(2, "count", Value::none()).isInt() ? a.get(2, "count").asInt() : -1;
    std::string out;
    if (from.empty()) {  // Python inserts `to` around every character
        const auto cps = utf8Decode(s);
        for (size_t i = 0; i <= cps.size(); ++i) {
            if (count < 0 || int64_t(i) < count) out += to;
            if (i < cps.size()) utf8Append(out, cps[i]);
        }
        return Value(std::move(out));
    }
    size_t start = 0;
    for (size_t p = s.find(from); p != std::string::npos && count != 0; p = s.find(from, start), --count) {
        out += s.substr(start, p - start) + to;
        start = p + from.size();
    }
    out += s.substr(start);
    return Value(std::move(out));
}

Value fJoin(Interpreter& in, const Value& v, CallArgs& a) {
    const std::string sep = a.get(0, "d", Value("")).toString();
    const Value attr = a.get(1, "attribute", Value::none());
    std::string out;
    bool first = true;
    for (const auto& e : toList(in, v, "join")) {
        if (!first) out += sep;
        first = false;
        out += (attr.isString() ? attrPath(e, attr.str()) : e).toString();
    }
    return Value(std::move(out));
}

Value fFirst(Interpreter& in, const Value& v, CallArgs&) {
    const Array l = toList(in, v, "first");
    return l.empty() ? Value() : l.front();
}
Value fLast(Interpreter& in, const Value& v, CallArgs&) {
    const Array l = toList(in, v, "last");
    return l.empty() ? Value() : l.back();
}
Value fList(Interpreter& in, const Value& v, CallArgs&) { return Value(toList(in, v, "list")); }

Value fReverse(Interpreter& in, const Value& v, CallArgs&) {
    if (v.isString()) {
        auto cps = utf8Decode(v.str());
        std::reverse(cps.begin(), cps.end());
        return Value(utf8Encode(cps));
    }
    Array l = toList(in, v, "reverse");
    std::reverse(l.begin(), l.end());
    return Value(std::move(l));
}

Value fMap(Interpreter& in, const Value& v, CallArgs& a) {
    Array out;
    const Value attr = a.get(SIZE_MAX, "attribute");
    for (const auto& e : toList(in, v, "map")) {
        if (attr.isString()) {
            Value r = attrPath(e, attr.str());
            if (r.isUndefined()) r = a.get(SIZE_MAX, "default");
            out.push_back(r);
        } else {
            if (a.pos.empty() || !a.pos[0].isString()) in.error("map needs a filter name or attribute=");
            CallArgs fa = restArgs(a, 1);
            out.push_back(in.callFilter(a.pos[0].str(), e, fa));
        }
    }
    return Value(std::move(out));
}

Value selectImpl(Interpreter& in, const Value& v, CallArgs& a, bool byAttr, bool keep) {
    Array out;
    size_t testPos = byAttr ? 1 : 0;
    for (const auto& e : toList(in, v, "select")) {
        const Value subject = byAttr ? attrPath(e, a.get(0, "attribute").toString()) : e;
        bool ok;
        if (a.pos.size() > testPos) {
            CallArgs ta = restArgs(a, testPos + 1);
            ok = in.callTest(a.pos[testPos].toString(), subject, ta);
        } else {
            ok = subject.truthy();
        }
        if (ok == keep) out.push_back(e);
    }
    return Value(std::move(out));
}
Value fSelect(Interpreter& in, const Value& v, CallArgs& a) { return selectImpl(in, v, a, false, true); }
Value fReject(Interpreter& in, const Value& v, CallArgs& a) { return selectImpl(in, v, a, false, false); }
Value fSelectattr(Interpreter& in, const Value& v, CallArgs& a) { return selectImpl(in, v, a, true, true); }
Value fRejectattr(Interpreter& in, const Value& v, CallArgs& a) { return selectImpl(in, v, a, true, false); }

Value sortKey(const Value& e, const Value& attr, bool caseSensitive) {
    Value k = attr.isString() ? attrPath(e, attr.str()) : e;
    if (!caseSensitive && k.isString()) k = Value(mapCase(k.str(), 0));
    return k;
}

Value fSort(Interpreter& in, const Value& v, CallArgs& a) {
    Array l = toList(in, v, "sort");
    const bool rev = a.get(0, "reverse", Value(false)).truthy();
    const bool cs = a.get(1, "case_sensitive", Value(false)).truthy();
    const Value attr = a.get(2, "attribute", Value::none());
    std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
        const auto r = rev ? lessThan(sortKey(y, attr, cs), sortKey(x, attr, cs))
                           : lessThan(sortKey(x, attr, cs), sortKey(y, attr, cs));
        if (!r) in.error("sort: values of different types cannot be ordered");
        return *r;
    });
    return Value(std::move(l));
}

Value fUnique(Interpreter& in, const Value& v, CallArgs& a) {
    const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
    const Value attr = a.get(1, "attribute", Value::none());
    Array out, keys;
    for (const auto& e : toList(in, v, "unique")) {
        const Value k = sortKey(e, attr, cs);
        bool seen = false;
        for (const auto& s : keys) seen = seen || equals(s, k);
        if (seen) continue;
        keys.push_back(k);
        out.push_back(e);
    }
    return Value(std::move(out));
}

Value fDictsort(Interpreter& in, const Value& v, CallArgs& a) {
    CallArgs none;
    Array items = fItems(in, v, none).array();
    const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
    const bool byValue = a.get(1, "by", Value("key")).toString() == "value";
    const bool rev = a.get(2, "reverse", Value(false)).truthy();
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        const Value& kx = x.array()[byValue ? 1 : 0];
        const Value& ky = y.array()[byValue ? 1 : 0];
        const auto r = rev ? lessThan(sortKey(ky, Value::none(), cs), sortKey(kx, Value::none(), cs))
                           : lessThan(sortKey(kx, Value::none(), cs), sortKey(ky, Value::none(), cs));
        if (!r) in.error("dictsort: values cannot be ordered");
        return *r;
    });
    return Value(std::move(items));
}

Value fInt(Interpreter&, const Value& v, CallArgs& a) {
    const Value def = a.get(0, "default", Value(0));
    if (v.isNumber()) return Value(v.asInt());
    if (v.isString()) {
        try {
            size_t used = 0;
            const std::string s = pyStrip(v.str(), Value::none(), true, true);
            const long long n = std::stoll(s, &used, 10);
            if (used == s.size()) return Value(int64_t(n));
            if (const auto d = pyFloat(s)) return Value(int64_t(*d));
        } catch (const std::exception&) {
        }
    }
    return def;
}

Value fFloat(Interpreter&, const Value& v, CallArgs& a) {
    const Value def = a.get(0, "default", Value(0.0));
    if (v.isNumber()) return Value(v.asFloat());
    if (v.isString()) {
        try {
            if (const auto d = pyFloat(pyStrip(v.str(), Value::none(), true, true))) return Value(*d);
        } catch (const std::exception&) {
        }
    }
    return def;
}

Value fAbs(Interpreter& in, const Value& v, CallArgs&) {
    if (v.isFloat()) return Value(std::fabs(v.asFloat()));
    if (v.isNumber()) {
        if (v.asInt() == INT64_MIN) in.error("integer overflow");
        return Value(v.asInt() < 0 ? -v.asInt() : v.asInt());
    }
    in.error("bad operand type for abs(): '" + v.typeName() + "'");
}

Value fRound(Interpreter& in, const Value& v, CallArgs& a) {
    if (!v.isNumber()) in.error("round needs a number");
    const auto prec = int(a.get(0, "precision", Value(0)).asInt());
    const std::string method = a.get(1, "method", Value("common")).toString();
    const double f = std::pow(10.0, prec);
    double x = v.asFloat() * f;
    x = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
    return Value(x / f);
}

Value fIndent(Interpreter&, const Value& v, CallArgs& a) {
    const Value w = a.get(0, "width", Value(4));
    const std::string pad = w.isString() ? w.str() : std::string(size_t(std::max<int64_t>(0, w.asInt())), ' ');
    const bool first = a.get(1, "first", Value(false)).truthy();
    const bool blank = a.get(2, "blank", Value(false)).truthy();
    const std::string s = v.toString();
    std::string out;
    size_t start = 0;
    bool isFirst = true;
    while (true) {
        const size_t nl = s.find('\n', start);
        const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        const bool indent = isFirst ? first : (blank || !pyStrip(line, Value::none(), true, true).empty());
        if (indent) out += pad;
        out += line;
        if (nl == std::string::npos) break;
        out += '\n';
        start = nl + 1;
        isFirst = false;
    }
    return Value(std::move(out));
}

Value fMinMax(Interpreter& in, const Value& v, bool wantMax) {
    const Array l = toList(in, v, wantMax ? "max" : "min");
    if (l.empty()) return Value();
    Value best = l[0];
    for (const auto& e : l) {
        const auto r = wantMax ? lessThan(best, e) : lessThan(e, best);
        if (!r) in.error("values cannot be ordered");
        if (*r) best = e;
    }
    return best;
}
Value fMin(Interpreter& in, const Value& v, CallArgs&) { return fMinMax(in, v, false); }
Value fMax(Interpreter& in, const Value& v, CallArgs&) { return fMinMax(in, v, true); }

Value fSum(Interpreter& in, const Value& v, CallArgs& a) {
    const Value attr = a.get(0, "attribute", Value::none());
    bool isF = false;
    int64_t si = a.get(1, "start", Value(0)).asInt();
    double sf = double(si);
    for (const auto& e : toList(in, v, "sum")) {
        const Value x = attr.isString() ? attrPath(e, attr.str()) : e;
        if (!x.isNumber()) in.error("sum: not a number");
        if (x.isFloat()) isF = true;
        si += x.asInt();
        sf += x.asFloat();
    }
    return isF ? Value(sf) : Value(si);
}

Value fAttr(Interpreter&, const Value& v, CallArgs& a) { return attrPath(v, a.get(0, "name").toString()); }

// obj[start:stop:step] (internal: the evaluator routes slices here).
Value fSlice(Interpreter& in, const Value& v, CallArgs& a) {
    const bool isStr = v.isString();
    if (!isStr && !v.isArray()) in.error("'" + v.typeName() + "' object is not subscriptable");
    std::vector<uint32_t> cps;
    if (isStr) cps = utf8Decode(v.str());
    const auto n = int64_t(isStr ? cps.size() : v.array().size());
    const Value s0 = a.pos[1], s1 = a.pos[2], s2 = a.pos[3];
    const int64_t step = (s2.isUndefined() || s2.isNone()) ? 1 : s2.asInt();
    if (step == 0) in.error("slice step cannot be zero");
    auto norm = [&](const Value& x, int64_t def) {
        if (x.isUndefined() || x.isNone()) return def;
        int64_t i = x.asInt();
        if (i < 0) i += n;
        if (step > 0) return std::clamp<int64_t>(i, 0, n);
        return std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t b = norm(s0, step > 0 ? 0 : n - 1);
    const int64_t e = norm(s1, step > 0 ? n : -1);
    Array out;
    std::vector<uint32_t> outCps;
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) {
        if (isStr) outCps.push_back(cps[size_t(i)]);
        else out.push_back(v.array()[size_t(i)]);
    }
    return isStr ? Value(utf8Encode(outCps)) : Value(std::move(out));
}

// ---- tests ----

bool tDefined(Interpreter&, const Value& v, CallArgs&) { return !v.isUndefined(); }
bool tUndefined(Interpreter&, const Value& v, CallArgs&) { return v.isUndefined(); }
bool tNone(Interpreter&, const Value& v, CallArgs&) { return v.isNone(); }
bool tString(Interpreter&, const Value& v, CallArgs&) { return v.isString(); }
bool tMapping(Interpreter&, const Value& v, CallArgs&) { return v.isObject(); }
// jinja2: len() and __getitem__ work. True for str, list, dict, and (oddly) for Undefined.
bool tSequence(Interpreter&, const Value& v, CallArgs&) {
    return v.isString() || v.isArray() || v.isObject() || v.isUndefined();
}
bool tIterable(Interpreter&, const Value& v, CallArgs&) {
    return v.isString() || v.isArray() || v.isObject() || v.isUndefined();
}
bool tNumber(Interpreter&, const Value& v, CallArgs&) { return v.isNumber(); }
bool tInteger(Interpreter&, const Value& v, CallArgs&) { return v.isInt(); }
bool tFloat(Interpreter&, const Value& v, CallArgs&) { return v.isFloat(); }
bool tBoolean(Interpreter&, const Value& v, CallArgs&) { return v.isBool(); }
bool tTrue(Interpreter&, const Value& v, CallArgs&) { return v.isBool() && v.asBool(); }
bool tFalse(Interpreter&, const Value& v, CallArgs&) { return v.isBool() && !v.asBool(); }
bool tCallable(Interpreter&, const Value& v, CallArgs&) { return v.isCallable(); }
bool tEq(Interpreter&, const Value& v, CallArgs& a) { return equals(v, a.get(0, "other")); }
bool tNe(Interpreter&, const Value& v, CallArgs& a) { return !equals(v, a.get(0, "other")); }
bool ordered(Interpreter& in, const Value& x, const Value& y) {
    const auto r = lessThan(x, y);
    if (!r) in.error("values of types '" + x.typeName() + "' and '" + y.typeName() + "' cannot be ordered");
    return *r;
}
bool tLt(Interpreter& in, const Value& v, CallArgs& a) { return ordered(in, v, a.get(0, "other")); }
bool tGt(Interpreter& in, const Value& v, CallArgs& a) { return ordered(in, a.get(0, "other"), v); }
bool tLe(Interpreter& in, const Value& v, CallArgs& a) { return !ordered(in, a.get(0, "other"), v); }
bool tGe(Interpreter& in, const Value& v, CallArgs& a) { return !ordered(in, v, a.get(0, "other")); }
bool tIn(Interpreter& in, const Value& v, CallArgs& a) {
    const Value seq = a.get(0, "seq");
    if (seq.isString()) return v.isString() && seq.str().find(v.str()) != std::string::npos;
    for (const auto& e : toList(in, seq, "in"))
        if (equals(e, v)) return true;
    return false;
}
bool tOdd(Interpreter&, const Value& v, CallArgs&) { return v.isNumber() && (v.asInt() % 2) != 0; }
bool tEven(Interpreter&, const Value& v, CallArgs&) { return v.isNumber() && (v.asInt() % 2) == 0; }
bool tDivisibleby(Interpreter& in, const Value& v, CallArgs& a) {
    const int64_t d = a.get(0, "num").asInt();
    if (d == 0) in.error("divisibleby 0");
    return v.asInt() % d == 0;
}
bool tSameas(Interpreter&, const Value& v, CallArgs& a) {
    const Value o = a.get(0, "other");
    return v.type() == o.type() && equals(v, o);
}
bool tLower(Interpreter&, const Value& v, CallArgs&) {
    return v.isString() && mapCase(v.str(), 0) == v.str() && mapCase(v.str(), 1) != v.str();
}
bool tUpper(Interpreter&, const Value& v, CallArgs&) {
    return v.isString() && mapCase(v.str(), 1) == v.str() && mapCase(v.str(), 0) != v.str();
}

struct FilterEntry {
    const char* name;
    FilterFn fn;
};
const FilterEntry kFilters[] = {
    {"tojson", fTojson},     {"length", fLength},   {"count", fLength},        {"default", fDefault},
    {"d", fDefault},         {"items", fItems},     {"string", fString},       {"lower", fLower},
    {"upper", fUpper},       {"capitalize", fCapitalize}, {"title", fTitle},   {"trim", fTrim},
    {"safe", fSafe},         {"escape", fEscape},   {"e", fEscape},            {"forceescape", fEscape},
    {"replace", fReplace},   {"join", fJoin},       {"first", fFirst},         {"last", fLast},
    {"list", fList},         {"reverse", fReverse}, {"map", fMap},             {"select", fSelect},
    {"reject", fReject},     {"selectattr", fSelectattr}, {"rejectattr", fRejectattr}, {"sort", fSort},
    {"unique", fUnique},     {"dictsort", fDictsort}, {"int", fInt},           {"float", fFloat},
    {"abs", fAbs},           {"round", fRound},     {"indent", fIndent},       {"min", fMin},
    {"max", fMax},           {"sum", fSum},         {"attr", fAttr},           {"__slice__", fSlice},
};

struct TestEntry {
    const char* name;
    TestFn fn;
};
const TestEntry kTests[] = {
    {"defined", tDefined},   {"undefined", tUndefined}, {"none", tNone},       {"string", tString},
    {"mapping", tMapping},   {"sequence", tSequence},   {"iterable", tIterable}, {"number", tNumber},
    {"integer", tInteger},   {"float", tFloat},         {"boolean", tBoolean}, {"true", tTrue},
    {"false", tFalse},       {"callable", tCallable},   {"equalto", tEq},      {"eq", tEq},
    {"ne", tNe},             {"lt", tLt},               {"lessthan", tLt},     {"le", tLe},
    {"gt", tGt},             {"greaterthan", tGt},      {"ge", tGe},           {"in", tIn},
    {"odd", tOdd},           {"even", tEven},           {"divisibleby", tDivisibleby}, {"sameas", tSameas},
    {"lower", tLower},       {"upper", tUpper},
};

}  // namespace

FilterFn findFilter(std::string_view name) {
    for (const auto& f : kFilters)
        if (name == f.name) return f.fn;
    return nullptr;
}

TestFn findTest(std::string_view name) {
    for (const auto& t : kTests)
        if (name == t.name) return t.fn;
    return nullptr;
}

}  // namespace ts::jinja
