// Lenient readers of a JSON object's members, for decoders of what was validated before (a
// request past its checks, a stored document): a member of the wrong type reads as absent, never
// throws. For core/'s .cpp files; no header includes this one.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace ty::json_read {

// `o[key]`, or null when `o` is not an object or has no such member.
inline const nlohmann::json& Member(const nlohmann::json& o, const char* key) {
  static const nlohmann::json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}
inline std::string StringOr(const nlohmann::json& o, const char* key, const std::string& fallback = "") {
  const nlohmann::json& v = Member(o, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}
inline std::optional<int64_t> OptionalInt(const nlohmann::json& o, const char* key) {
  const nlohmann::json& v = Member(o, key);
  return v.is_number_integer() ? std::optional<int64_t>(v.get<int64_t>()) : std::nullopt;
}
inline int64_t IntOr(const nlohmann::json& o, const char* key, int64_t fallback) {
  return OptionalInt(o, key).value_or(fallback);
}
inline bool BoolOr(const nlohmann::json& o, const char* key, bool fallback) {
  const nlohmann::json& v = Member(o, key);
  return v.is_boolean() ? v.get<bool>() : fallback;
}

}  // namespace ty::json_read
