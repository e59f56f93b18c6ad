// Requests for AWS services trainyard does not serve (IAM, SQS, DynamoDB, ...): answered in that
// service's own protocol, so an SDK or the aws CLI prints a sentence naming the service instead of
// failing to parse an answer in another service's shape (docs/api-coverage.md, "Other services").
#pragma once

#include <optional>

#include "http/server.h"

namespace ty::api {

// The answer for a request in one of AWS's RPC protocols that no served service claimed:
//  - Smithy RPC v2 CBOR (POST /service/<Service>/operation/<Op>): a CBOR error body;
//  - AWS JSON 1.0 / 1.1 (X-Amz-Target: <Prefix>.<Op>): a JSON error body;
//  - the query protocol (Action=<Op> in the form body or the query): an XML <ErrorResponse>;
// each 400 UnknownOperationException (InvalidAction in the query protocol) naming the service (by
// its SigV4 credential scope, else the protocol's own service name) and the operation. Nothing is
// read but the request's head and form parameters; nothing changes. nullopt when the request is
// in none of these shapes.
std::optional<http::Response> AnswerUnservedService(const http::Request& req);

}  // namespace ty::api
