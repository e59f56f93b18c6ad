// The one place where a Status becomes an AWS error on the wire.
#pragma once

#include <string>

#include "core/status.h"

namespace ty::api {

// kS3RestXml: the S3 endpoint (api/s3_api.cpp), whose errors are XML documents it writes itself
// from the WireError's type (S3's code) and message.
// kCloudWatch: CloudWatch's metrics API (api/cloudwatch_api.cpp), in rpc-v2-cbor or JSON 1.0.
// kEventsJson: EventBridge (AWSEvents.*), whose error names differ from SageMaker's.
enum class Protocol { kBatchRestJson, kSageMakerJson, kLogsJson, kS3RestXml, kCloudWatch, kEventsJson };

struct WireError {
  int http_status;
  std::string type;  // e.g. "ClientException", "ValidationException"
  std::string message;
};

WireError ToWireError(Protocol protocol, const Status& status);

// S3's HTTP status for one of its error codes ("NoSuchKey" -> 404); 400 for a code it does not know.
int S3HttpStatus(const std::string& code);

// The JSON body of an error, as the protocol's clients parse it.
std::string ErrorBody(Protocol protocol, const WireError& e);

}  // namespace ty::api
