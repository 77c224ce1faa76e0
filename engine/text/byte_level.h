// Byte-level BPE helpers: GPT-2's byte <-> printable-character table (what Hugging Face `tokenizers` calls
// ByteLevel) and the UTF-8 rules the tokenizer must share with the reference exactly: which byte runs are
// well-formed, and how an ill-formed run is repaired (one U+FFFD per "maximal subpart", the rule of Rust's
// String::from_utf8_lossy and Python's errors="replace"), including the incremental form that a streaming
// detokenizer needs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ts {

// GPT-2 byte -> code point map: printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100+n.
struct ByteLevelTable {
    std::array<char32_t, 256> byteToChar{};
    std::array<std::string, 256> byteToUtf8{};  // byteToChar as UTF-8 (1 or 2 bytes)
    ByteLevelTable();
    // The byte a code point stands for, or -1 if the code point is not one of the 256 table characters.
    int charToByte(char32_t c) const;
};
const ByteLevelTable& byteLevelTable();

// Maps every byte of `bytes` through the table (the ByteLevel pre-tokenizer's transformation).
std::string byteLevelEncode(std::string_view bytes);

// The ByteLevel decoder's per-token rule: if every character of the token is a table character, the token
// stands for those bytes; otherwise (e.g. an added token such as "<|user|>" containing a non-table
// character) it stands for its own UTF-8 bytes. Invalid UTF-8 in `token` counts as non-table.
std::string byteLevelDecodeToken(std::string_view token);

void appendUtf8(std::string& out, char32_t cp);

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if s[i] does not start one (truncated
// sequences included).
size_t utf8SequenceLength(std::string_view s, size_t i);

// Decodes one code point at s[i] (which must start a well-formed sequence of length n).
char32_t utf8Decode(std::string_view s, size_t i, size_t n);

// Status of the bytes at s[i...] under the maximal-subpart rule.
struct Utf8Step {
    enum Kind { Valid, Invalid, Incomplete } kind;
    size_t length;  // Valid: sequence length; Invalid: bytes replaced by one U+FFFD; Incomplete: bytes available
};
Utf8Step utf8Step(std::string_view s, size_t i);

// from_utf8_lossy: well-formed sequences are kept, each maximal ill-formed subpart becomes U+FFFD.
std::string utf8Lossy(std::string_view bytes);

// Incremental from_utf8_lossy: converts as much of `pending` as is final and removes it from `pending`; a
// trailing incomplete-but-possibly-valid sequence stays in `pending` until more bytes (or the end) arrive.
// Concatenating the outputs of any sequence of calls, then utf8Lossy(pending), equals utf8Lossy(all bytes).
std::string utf8LossyPrefix(std::string& pending);

bool isValidUtf8(std::string_view s);

}  // namespace ts
