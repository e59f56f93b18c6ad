#include "api/errors.h"

#include <nlohmann/json.hpp>

namespace ty::api {

WireError ToWireError(Protocol protocol, const Status& st) {
  const bool batch = protocol == Protocol::kBatchRestJson;
  if (protocol == Protocol::kLogsJson) {
    if (st.code() == Code::kInvalidArgument || st.code() == Code::kFailedPrecondition)
      return {400, "InvalidParameterException", st.message()};
    if (st.code() == Code::kNotFound) return {400, "ResourceNotFoundException", st.message()};
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
