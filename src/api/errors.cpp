#include "api/errors.h"

#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace ty::api {

namespace {

struct S3Error {
  const char* code;
  int http_status;
};

// The S3 codes this server answers with, and S3's status for each.
constexpr S3Error kS3Errors[] = {
    {"AccessDenied", 403},          {"SignatureDoesNotMatch", 403}, {"InvalidAccessKeyId", 403},
    {"RequestTimeTooSkewed", 403},  {"ExpiredToken", 400},          {"InvalidToken", 400},
    {"NoSuchBucket", 404},          {"NoSuchKey", 404},             {"NoSuchUpload", 404},
    {"BucketNotEmpty", 409},        {"BucketAlreadyOwnedByYou", 409}, {"BucketAlreadyExists", 409},
    {"InvalidBucketName", 400},     {"KeyTooLongError", 400},       {"InvalidArgument", 400},
    {"InvalidPart", 400},           {"InvalidPartOrder", 400},      {"EntityTooSmall", 400},
    {"EntityTooLarge", 400},        {"BadDigest", 400},             {"InvalidDigest", 400},
    {"XAmzContentSHA256Mismatch", 400}, {"IncompleteBody", 400},    {"InvalidRange", 416},
    {"MalformedXML", 400},          {"MethodNotAllowed", 405},      {"NotImplemented", 501},
    {"InvalidRequest", 400},        {"IllegalLocationConstraintException", 400},
    {"InvalidLocationConstraint", 400}, {"MissingContentLength", 411}, {"PreconditionFailed", 412},
    {"NotModified", 304},           {"InternalError", 500},         {"SlowDown", 503},
    {"ServiceUnavailable", 503},    {"AuthorizationQueryParametersError", 400},
    // Not AWS's: the space limits of docs/object-store.md ("Space"). 507 (RFC 4918's Insufficient
    // Storage), which SDKs do not retry, as MinIO and Ceph answer a full store; 403 QuotaExceeded
    // as Ceph's RGW answers a user over quota.
    {"InsufficientStorage", 507},   {"QuotaExceeded", 403},
};

// "NoSuchKey: s3://b/k does not exist" -> "NoSuchKey" when the prefix is one of kS3Errors.
std::string S3CodePrefix(const std::string& message) {
  size_t colon = message.find(':');
  if (colon == std::string::npos || colon == 0 || colon > 40) return "";
  std::string code = message.substr(0, colon);
  for (const S3Error& e : kS3Errors)
    if (code == e.code) return code;
  return "";
}

WireError ToS3Error(const Status& st) {
  if (std::string code = S3CodePrefix(st.message()); !code.empty()) {
    std::string rest = st.message().substr(code.size() + 1);
    if (!rest.empty() && rest.front() == ' ') rest.erase(0, 1);
    return {S3HttpStatus(code), code, rest};
  }
  auto as = [&](const char* code) { return WireError{S3HttpStatus(code), code, st.message()}; };
  switch (st.code()) {
    case Code::kOk: return {200, "", ""};
    case Code::kUnauthenticated: return as("AccessDenied");
    case Code::kUnknownKey: return as("InvalidAccessKeyId");
    case Code::kBadSignature: return as("SignatureDoesNotMatch");
    // A presigned URL past its expiry is S3's AccessDenied; a clock too far off, RequestTimeTooSkewed.
    case Code::kExpired:
      return as(st.message().find("expired") != std::string::npos ? "AccessDenied" : "RequestTimeTooSkewed");
    case Code::kExpiredToken: return as("ExpiredToken");
    case Code::kUnknownOperation: return as("NotImplemented");
    case Code::kPayloadTooLarge: return as("EntityTooLarge");
    case Code::kInvalidArgument:
    case Code::kFailedPrecondition:
    case Code::kLimitExceeded: return as("InvalidArgument");
    case Code::kNotFound: return as("NoSuchKey");
    case Code::kAlreadyExists: return as("BucketAlreadyOwnedByYou");
    case Code::kThrottled: return as("SlowDown");
    case Code::kAccessDenied: return as("AccessDenied");
    case Code::kUnavailable: return as("ServiceUnavailable");
    case Code::kInternal: return as("InternalError");
  }
  return as("InternalError");
}

}  // namespace

int S3HttpStatus(const std::string& code) {
  for (const S3Error& e : kS3Errors)
    if (code == e.code) return e.http_status;
  return 400;
}

WireError ToWireError(Protocol protocol, const Status& st) {
  if (protocol == Protocol::kS3RestXml) return ToS3Error(st);
  const bool batch = protocol == Protocol::kBatchRestJson;
  if (protocol == Protocol::kLogsJson) {
    if (st.code() == Code::kInvalidArgument || st.code() == Code::kFailedPrecondition)
      return {400, "InvalidParameterException", st.message()};
    if (st.code() == Code::kNotFound) return {400, "ResourceNotFoundException", st.message()};
  }
  if (protocol == Protocol::kCloudWatch) {
    // CloudWatch's own errors; a missing member is told by AWS's wording ("The parameter X is required.").
    if (st.code() == Code::kInvalidArgument)
      return {400, StartsWith(st.message(), "The parameter ") && st.message().find(" is required") != std::string::npos
                       ? "MissingRequiredParameterException" : "InvalidParameterValueException", st.message()};
    if (st.code() == Code::kFailedPrecondition) return {400, "InvalidParameterCombinationException", st.message()};
    if (st.code() == Code::kNotFound) return {404, "ResourceNotFound", st.message()};
    if (st.code() == Code::kLimitExceeded) return {400, "LimitExceededException", st.message()};
    if (st.code() == Code::kInternal) return {500, "InternalServiceFault", st.message()};
  }
  if (protocol == Protocol::kEventsJson) {
    switch (st.code()) {
      case Code::kInvalidArgument:
        // A pattern's own error, as EventBridge names it (the message names the field first).
        if (st.message().rfind("EventPattern", 0) == 0) return {400, "InvalidEventPatternException", st.message()};
        return {400, "ValidationException", st.message()};
      case Code::kFailedPrecondition:  // only a configuration-file rule (control/event_bus.h)
        return {400, "ManagedRuleException", st.message()};
      case Code::kNotFound: return {400, "ResourceNotFoundException", st.message()};
      case Code::kAlreadyExists: return {400, "ResourceAlreadyExistsException", st.message()};
      case Code::kLimitExceeded: return {400, "LimitExceededException", st.message()};
      case Code::kInternal: return {500, "InternalException", st.message()};
      default: break;
    }
  }
  switch (st.code()) {
    case Code::kOk:
      return {200, "", ""};
    case Code::kUnauthenticated:
      return {403, "MissingAuthenticationTokenException", st.message()};
    case Code::kUnknownKey:
      return {403, "UnrecognizedClientException", st.message()};
    case Code::kBadSignature:
      return {403, "InvalidSignatureException", st.message()};
    case Code::kExpired:
      return {403, "InvalidSignatureException", st.message()};
    case Code::kExpiredToken:
      return {403, "ExpiredTokenException", st.message()};
    case Code::kUnknownOperation:
      // What AWS's front ends answer for a request no operation claims: a rest-json service
      // routes by method and path, and an unknown route is a 404; a JSON 1.1 service names the
      // operation in X-Amz-Target, and an unknown target is a 400. The type is the same.
      return {batch ? 404 : 400, "UnknownOperationException", st.message()};
    case Code::kPayloadTooLarge:
      return {413, batch ? "ClientException" : "ValidationException", st.message()};
    case Code::kInvalidArgument:
    case Code::kFailedPrecondition:
      return {400, batch ? "ClientException" : "ValidationException", st.message()};
    case Code::kNotFound:
      return {400, batch ? "ClientException" : "ResourceNotFound", st.message()};
    case Code::kAlreadyExists:
      return {400, batch ? "ClientException" : "ResourceInUse", st.message()};
    case Code::kLimitExceeded:
      return {400, batch ? "ClientException" : "ResourceLimitExceeded", st.message()};
    case Code::kThrottled:
      // AWS's common error for every JSON protocol (Batch's rest-json included); SDKs retry it.
      return {400, "ThrottlingException", st.message()};
    case Code::kAccessDenied:
      // The common error of every AWS JSON protocol, Batch's rest-json and CloudWatch Logs included.
      return {403, "AccessDeniedException", st.message()};
    case Code::kUnavailable:
      return {503, "ServiceUnavailableException", st.message()};
    case Code::kInternal:
      return {500, batch ? "ServerException" : "InternalFailure", st.message()};
  }
  return {500, "InternalFailure", st.message()};
}

std::string ErrorBody(Protocol protocol, const WireError& e) {
  nlohmann::json body = {{"__type", e.type}, {"message", e.message}};
  return body.dump();
}

}  // namespace ty::api
