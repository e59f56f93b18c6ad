// The one place where a Status becomes an AWS error on the wire.
#pragma once

#include <string>

#include "core/status.h"

namespace ty::api {

enum class Protocol { kBatchRestJson, kSageMakerJson, kLogsJson };

struct WireError {
  int http_status;
  std::string type;  // e.g. "ClientException", "ValidationException"
  std::string message;
};

WireError ToWireError(Protocol protocol, const Status& status);

// The JSON body of an error, as the protocol's clients parse it.
std::string ErrorBody(Protocol protocol, const WireError& e);

}  // namespace ty::api
