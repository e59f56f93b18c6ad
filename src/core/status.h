// Status / StatusOr: the one error vocabulary of trainyard.
//
// Codes name what went wrong in the problem's terms; api/errors.cpp is the single place that maps
// each code onto an AWS error type and HTTP status for each wire protocol.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ty {

enum class Code {
  kOk = 0,
  kInvalidArgument,    // a request field breaks a rule (ValidationException / ClientException)
  kNotFound,           // a named resource does not exist
  kAlreadyExists,      // a name is taken (ResourceInUse / ClientException)
  kFailedPrecondition, // the resource is not in a state that allows the call
  kLimitExceeded,      // a quota or count limit would be exceeded
  kPayloadTooLarge,    // the request body is over the documented limit
  kUnauthenticated,    // missing signature
  kBadSignature,       // signature does not match
  kUnknownKey,         // access key is not known
  kExpired,            // request time too far from the server's clock
  kUnknownOperation,   // the operation is not part of the API
  kUnavailable,        // shutting down, or a dependency is down
  kThrottled,          // the caller made more requests than its rate allows (ThrottlingException)
  kAccessDenied,      // the caller's policies do not allow the call (AccessDeniedException, 403)
  kExpiredToken,       // temporary credentials past their expiry (ExpiredTokenException, 403)
  kInternal,           // a bug or an environment failure
};

// [[nodiscard]]: a dropped Status is a dropped error; where ignoring one is right, cast it to void
// with a comment saying why.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {Code::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {Code::kFailedPrecondition, std::move(m)}; }
inline Status LimitExceeded(std::string m) { return {Code::kLimitExceeded, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }

// StatusOr<T>: either a value or a non-OK status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}                         // NOLINT: implicit by design
  StatusOr(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

#define TY_RETURN_IF_ERROR(expr)        \
  do {                                  \
    ::ty::Status _st = (expr);          \
    if (!_st.ok()) return _st;          \
  } while (0)

}  // namespace ty
