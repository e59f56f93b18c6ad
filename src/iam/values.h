// Parsing of the typed values that condition operators compare (iam/ internal). Each function
// is total: malformed text answers false, never throws.
#pragma once

#include <cstdint>
#include <string_view>

namespace ty::iam {

// Whether `text` holds a `${...}` policy variable.
bool HasVariables(std::string_view text);

// A finite decimal number ("3", "-2.5", "1e3").
bool ParseNumber(std::string_view text, double* out);

// An ISO 8601 date or date-time in UTC or with an offset ("2026-01-02", "2026-01-02T03:04:05Z",
// "2026-01-02T03:04:05.123+02:00"), or whole epoch seconds ("1767323045").
bool ParseDate(std::string_view text, int64_t* epoch_ms);

// An IPv4 or IPv6 address with an optional "/bits" prefix (all bits when absent). IPv4 is kept
// in its IPv4-mapped IPv6 form (::ffff:a.b.c.d) with the prefix moved by 96, so that one
// comparison serves both families.
bool ParseCidr(std::string_view text, unsigned char address[16], int* prefix_bits);

}  // namespace ty::iam
