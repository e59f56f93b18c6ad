// Small string and id helpers shared by every component.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ty {

// A random RFC 4122 version-4 UUID (lower-case hex), from the OS's CSPRNG.
std::string NewUuid();

// `n` random bytes as lower-case hex, from the OS's CSPRNG.
std::string RandomHex(size_t n_bytes);

// Random alphanumeric string of length n (A-Z0-9 when upper, else a-zA-Z0-9), from the CSPRNG.
std::string RandomAlnum(size_t n, bool upper_only);

std::string ToHex(std::string_view bytes);
std::string Sha256Hex(std::string_view data);

// Base64 (RFC 4648, with padding), as S3 writes Content-MD5, checksums and SigV2 signatures.
std::string Base64Encode(std::string_view bytes);
// Strict: only the canonical encoding of some bytes (what Base64Encode writes) decodes, and only up
// to `max_text` characters; nullopt otherwise.
std::optional<std::string> Base64Decode(std::string_view text, size_t max_text);
std::string HmacSha256(std::string_view key, std::string_view data);

// The value of one hexadecimal digit (either case), or -1.
int HexDigitValue(char c);

// application/x-www-form-urlencoded decoding (query strings, form bodies): %XX is a byte, '+' a
// space; a '%' not followed by two hex digits stays as it is.
std::string FormDecode(std::string_view s);

// Text for an XML element or attribute: & < > " ' as entities, other control characters but tab
// and newline as &#xN; (as S3 writes them).
std::string XmlEscape(std::string_view s);

std::string ToLower(std::string_view s);
// ASCII case-insensitive equality (header names, enum spellings).
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
std::string ToUpper(std::string_view s);
std::vector<std::string> Split(std::string_view s, char sep);
// Whether `s` matches one of the shell glob `patterns` (fnmatch(3), no flags).
bool MatchesAnyGlob(const std::vector<std::string>& patterns, const std::string& s);
std::string_view Trim(std::string_view s);
bool StartsWith(std::string_view s, std::string_view p);
bool EndsWith(std::string_view s, std::string_view p);

// An AWS Batch resource name: 1 to 128 letters, digits, hyphens or underscores.
bool IsBatchName(std::string_view s);
// An AWS Batch job name: as IsBatchName, and the first character is a letter or digit.
bool IsBatchJobName(std::string_view s);

// AWS-style glob: `*` matches any run of characters (including none), everything else literally.
bool GlobMatch(std::string_view pattern, std::string_view text);

// ISO-8601 basic format used by SigV4 ("20260102T030405Z") <-> epoch ms.
std::string FormatAmzDate(int64_t epoch_ms);
bool ParseAmzDate(std::string_view s, int64_t* epoch_ms);
// ISO 8601 in UTC as AWS's query protocol sends timestamps: 2026-11-26T12:00:00Z, with an optional
// fraction (.123456) and "Z" or "+00:00". False for anything else.
bool ParseIso8601(std::string_view s, int64_t* epoch_ms);
// HTTP's Date format, IMF-fixdate (RFC 9110 section 5.6.7): "Sun, 06 Nov 1994 08:49:37 GMT".
// Independent of the process locale.
std::string FormatHttpDate(int64_t epoch_ms);
// An HTTP date: IMF-fixdate / RFC 1123 ("Fri, 02 Jan 2026 03:04:05 GMT", also with a "+0000" or
// "-0000" zone as Python's formatdate writes it), or ISO-8601 basic as in X-Amz-Date. False when
// it does not parse.
bool ParseHttpDate(std::string_view s, int64_t* epoch_ms);
// RFC 3339 UTC with milliseconds ("2026-01-02T03:04:05.123Z").
std::string FormatIso8601(int64_t epoch_ms);

// The deepest nesting of objects and arrays in `text`, counting brackets outside strings (a
// backslash escapes the next byte inside one); it stops counting once `limit` is passed, so the
// answer is min(depth, limit + 1). Malformed JSON is the parser's to refuse: this only bounds
// what the parser, validator and renderer may recurse into.
int JsonDepth(std::string_view text, int limit);

}  // namespace ty
