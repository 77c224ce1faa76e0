#include "text/byte_level.h"

namespace ts {

ByteLevelTable::ByteLevelTable() {
    // Same construction as GPT-2 / tokenizers' bytes_char(): the printable ranges keep their value, the rest
    // are numbered from 256 upwards in byte order.
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[size_t(b)] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[size_t(b)] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[size_t(b)] = true;
    char32_t next = 256;
    for (size_t b = 0; b < 256; ++b) {
        byteToChar[b] = printable[b] ? char32_t(b) : next++;
        appendUtf8(byteToUtf8[b], byteToChar[b]);
    }
}

int ByteLevelTable::charToByte(char32_t c) const {
    if (c < 256) {
        return byteToChar[c] == c ? int(c) : -1;
    }
    if (c < 256 + 68) {
        // The remapped bytes are, in order, the non-printable ones.
        int n = int(c - 256);
        for (size_t b = 0; b < 256; ++b) {
            if (byteToChar[b] >= 256 && n-- == 0) return int(b);
        }
    }
    return -1;
}

const ByteLevelTable& byteLevelTable() {
    static const ByteLevelTable table;
    return table;
}

std::string byteLevelEncode(std::string_view bytes) {
    const ByteLevelTable& t = byteLevelTable();
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char b : bytes) out += t.byteToUtf8[b];
    return out;
}

std::string byteLevelDecodeToken(std::string_view token) {
    // Reverse lookup through a small static table instead of charToByte's scan: decode runs per token.
    static const std::array<int, 324> reverse = [] {
        std::array<int, 324> r{};
        r.fill(-1);
        const ByteLevelTable& t = byteLevelTable();
        for (size_t b = 0; b < 256; ++b) r[t.byteToChar[b]] = int(b);
        return r;
    }();
    std::string out;
    out.reserve(token.size());
    for (size_t i = 0; i < token.size();) {
        size_t n = utf8SequenceLength(token, i);
        if (n == 0) return std::string(token);
        char32_t c = utf8Decode(token, i, n);
        if (c >= reverse.size() || reverse[c] < 0) return std::string(token);
        out.push_back(char(reverse[c]));
        i += n;
    }
    return out;
}

void appendUtf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(char(cp));
    } else if (cp < 0x800) {
        out.push_back(char(0xC0 | (cp >> 6)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(char(0xE0 | (cp >> 12)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(char(0xF0 | (cp >> 18)));
        out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    }
}

Utf8Step utf8Step(std::string_view s, size_t i) {
    // Unicode Table 3-7 (well-formed byte sequences): the lead byte fixes the length and the range allowed
    // for the second byte; later bytes are plain continuation bytes.
    auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) return {Utf8Step::Valid, 1};
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return {Utf8Step::Invalid, 1};
    }
    for (size_t k = 1; k < need; ++k) {
        if (i + k >= s.size()) return {Utf8Step::Incomplete, k};
        auto b = static_cast<unsigned char>(s[i + k]);
        bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
        if (!ok) return {Utf8Step::Invalid, k};
    }
    return {Utf8Step::Valid, need};
}

size_t utf8SequenceLength(std::string_view s, size_t i) {
    Utf8Step st = utf8Step(s, i);
    return st.kind == Utf8Step::Valid ? st.length : 0;
}

char32_t utf8Decode(std::string_view s, size_t i, size_t n) {
    auto b = [&](size_t k) { return char32_t(static_cast<unsigned char>(s[i + k])); };
    switch (n) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    }
}

static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

std::string utf8Lossy(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    for (size_t i = 0; i < bytes.size();) {
        Utf8Step st = utf8Step(bytes, i);
        if (st.kind == Utf8Step::Valid) {
            out.append(bytes.substr(i, st.length));
        } else {
            out.append(kReplacement);  // Invalid, or Incomplete at the very end: one U+FFFD either way
        }
        i += st.length;
    }
    return out;
}

std::string utf8LossyPrefix(std::string& pending) {
    std::string out;
    size_t i = 0;
    while (i < pending.size()) {
        Utf8Step st = utf8Step(pending, i);
        if (st.kind == Utf8Step::Incomplete) break;  // may still become valid: wait for more bytes
        if (st.kind == Utf8Step::Valid) {
            out.append(pending, i, st.length);
        } else {
            out.append(kReplacement);
        }
        i += st.length;
    }
    pending.erase(0, i);
    return out;
}

bool isValidUtf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        Utf8Step st = utf8Step(s, i);
        if (st.kind != Utf8Step::Valid) return false;
        i += st.length;
    }
    return true;
}

}  // namespace ts
