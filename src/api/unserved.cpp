#include "api/unserved.h"

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "api/s3_api.h"
#include "core/strings.h"

namespace ty::api {
namespace {

// What a user calls the services they are most likely to point at trainyard by habit.
std::string ServiceTitle(const std::string& signing_name) {
  static const std::map<std::string, std::string> kTitles = {
      {"iam", "IAM"}, {"monitoring", "CloudWatch"}, {"events", "EventBridge"}, {"sqs", "SQS"},
      {"sns", "SNS"}, {"dynamodb", "DynamoDB"}, {"ecr", "ECR"}, {"ecs", "ECS"}, {"ec2", "EC2"},
      {"lambda", "Lambda"}, {"kms", "KMS"}, {"secretsmanager", "Secrets Manager"}, {"ssm", "Systems Manager"},
      {"cloudformation", "CloudFormation"}, {"organizations", "Organizations"}, {"eks", "EKS"},
  };
  auto it = kTitles.find(signing_name);
  return it != kTitles.end() ? it->second : signing_name;
}

std::string Message(const std::string& service, const std::string& operation) {
  std::string m = "trainyard does not serve the " + ServiceTitle(service) + " API (service '" + service + "'" +
                  (operation.empty() ? std::string("") : ", operation " + operation) +
                  "): it serves AWS Batch, SageMaker, CloudWatch metrics, CloudWatch Logs, EventBridge, S3 and STS, and its own API "
                  "(docs/api-coverage.md)";
  if (service == "iam")
    m += "; users, access keys, policies and roles are managed with `trainyard admin user|key|policy|role` "
         "(docs/security.md)";
  return m;
}

// The form parameter `name` of a query-protocol request (the POST body's first, then the query).
std::string FormParam(const http::Request& req, const std::string& name) {
  for (const std::string* text : {&req.body, &req.query}) {
    if (text == &req.body) {
      const std::string* type = req.Header("Content-Type");
      if (req.method != "POST" || !type || ToLower(*type).find("application/x-www-form-urlencoded") == std::string::npos)
        continue;
    }
    for (const auto& part : Split(*text, '&')) {
      const size_t eq = part.find('=');
      if (eq != std::string::npos && FormDecode(std::string_view(part).substr(0, eq)) == name)
        return FormDecode(std::string_view(part).substr(eq + 1));
    }
  }
  return "";
}

http::Response Error(const std::string& content_type, std::string body, const char* type = "UnknownOperationException") {
  http::Response res;
  res.status = 400;
  res.headers = {{"Content-Type", content_type}, {"x-amzn-ErrorType", type}};
  res.body = std::move(body);
  return res;
}

}  // namespace

std::optional<http::Response> AnswerUnservedService(const http::Request& req) {
  const std::string signed_for = ScopeService(req);
  // Smithy RPC v2 CBOR: /service/<ServiceShape>/operation/<Operation>.
  static const std::string kService = "/service/", kOperation = "/operation/";
  if (req.method == "POST" && StartsWith(req.path, kService)) {
    const size_t op = req.path.find(kOperation, kService.size());
    if (op != std::string::npos) {
      const std::string shape = req.path.substr(kService.size(), op - kService.size());
      const std::string operation = req.path.substr(op + kOperation.size());
      nlohmann::json body = {{"__type", "UnknownOperationException"},
                             {"message", Message(signed_for.empty() ? shape : signed_for, operation)}};
      const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(body);
      http::Response res = Error("application/cbor", std::string(cbor.begin(), cbor.end()));
      res.headers.emplace_back("smithy-protocol", "rpc-v2-cbor");
      return res;
    }
  }
  // AWS JSON 1.0 / 1.1: X-Amz-Target: <Prefix>.<Operation>.
  if (const std::string* target = req.Header("X-Amz-Target"); target && req.method == "POST") {
    const size_t dot = target->rfind('.');
    const std::string prefix = dot == std::string::npos ? *target : target->substr(0, dot);
    const std::string operation = dot == std::string::npos ? "" : target->substr(dot + 1);
    const std::string* type = req.Header("Content-Type");
    const std::string content_type =
        type && type->find("application/x-amz-json-1.0") != std::string::npos ? "application/x-amz-json-1.0" : "application/x-amz-json-1.1";
    nlohmann::json body = {{"__type", "UnknownOperationException"},
                           {"message", Message(signed_for.empty() ? prefix : signed_for, operation)}};
    return Error(content_type, body.dump());
  }
  // The query protocol: Action=<Operation>&Version=<date>.
  if (const std::string action = FormParam(req, "Action"); !action.empty()) {
    const std::string service = signed_for.empty() ? "unknown" : signed_for;
    return Error("text/xml",
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ErrorResponse><Error><Type>Sender</Type>"
                 "<Code>InvalidAction</Code><Message>" + XmlEscape(Message(service, action)) +
                     "</Message></Error><RequestId>" + XmlEscape(NewUuid()) + "</RequestId></ErrorResponse>",
                 "InvalidAction");
  }
  return std::nullopt;
}

}  // namespace ty::api
