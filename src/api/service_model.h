// ServiceModel: a botocore service-2.json model (AWS Batch, SageMaker), parsed once, and the
// request validation it drives.
//
// The embedded models (models/*.json, linked in via embedded_models.S) are the source of truth for
// operation names, HTTP routes and input constraints. ValidateInput() reproduces the checks AWS
// front ends apply before a request reaches the service: required members, JSON types, lengths,
// ranges, enums, patterns and unions, reported in the AWS ValidationException wording:
//
//   2 validation errors detected: Value null at 'RoleArn' failed to satisfy constraint: Member
//   must not be null; Value '-1' at 'ResourceConfig.InstanceCount' failed to satisfy constraint:
//   Member must have value greater than or equal to 0
//
// Paths use wire member names joined by '.', list items as `Name[i]` (0-based) and map entries
// as `Name.<key>`. Unknown members are ignored, JSON null counts as absent.
//
// Patterns in the models are Java regular expressions; each distinct one is translated to RE2
// (POSIX \p{Alnum}-style classes, \uXXXX escapes, possessive quantifiers, repetition counts over
// RE2's limit of 1000, leading lookaheads and trailing lookbehinds become separate checks) and
// compiled once at Parse() time. Patterns that still do not compile are skipped and listed by
// unsupported_patterns().
//
// A parsed model is immutable; all const methods are safe to call from any thread.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace ty::api {

class ServiceModel {
 public:
  struct Operation {
    std::string name, http_method, request_uri, input_shape, output_shape;
  };

  // A constraint AWS documents only in prose, for a member whose model shape has no trait for it
  // ("It can be up to 128 characters long and can contain letters, numbers, hyphens (-), and
  // underscores (_)."; "This value can be between 1 and 100."). It is enforced as if the model
  // said it, with the same wording.
  struct DocumentedRule {
    std::string_view member;         // "Structure.member", as the model names them
    std::optional<double> min, max;  // length of a string, list or map; value of a number
    std::string_view pattern;        // Java syntax, as the models write patterns; "" for none
  };

  // Parses a botocore service-2.json document and applies `rules` on top of it. Fails with
  // kInvalidArgument on malformed input (not JSON, missing sections, references to undefined
  // shapes) and on a rule naming a member the model does not have.
  static StatusOr<std::unique_ptr<ServiceModel>> Parse(std::string_view json_text,
                                                       std::span<const DocumentedRule> rules = {});
  // The rules Batch() applies: what the Batch API reference states in prose for the members of
  // the operations trainyard serves (docs/api-coverage.md lists them).
  static std::span<const DocumentedRule> BatchDocumentedRules();

  // The embedded models, parsed on first use (thread-safe). A broken embedded model is a build
  // defect: these abort the process with a message rather than return an error.
  static const ServiceModel& Batch();
  static const ServiceModel& SageMaker();

  ~ServiceModel();
  ServiceModel(const ServiceModel&) = delete;
  ServiceModel& operator=(const ServiceModel&) = delete;

  const Operation* FindOperation(std::string_view name) const;
  // rest-json routing: exact match on method and requestUri (a query string on `path` is ignored);
  // when nothing matches exactly, URIs with {param} segments match any one non-empty segment.
  const Operation* FindByHttp(std::string_view method, std::string_view path) const;

  const std::string& target_prefix() const;  // "SageMaker"; "" when the model has none
  const std::string& signing_name() const;   // signingName, else endpointPrefix: "batch"
  const std::string& protocol() const;       // "rest-json" / "json"
  const std::string& api_version() const;    // "2016-08-10"

  // Validates a request body against the operation's input shape. Members bound to the URI,
  // query string or headers are not expected in the body: they are checked in `bound`, an object
  // the router fills with them by member name (values decoded, as the model types them), and not
  // at all when `bound` is null. A null `input` is an empty body. OK when the operation has no
  // input shape.
  Status ValidateInput(const Operation& op, const nlohmann::json& input,
                       const nlohmann::json* bound = nullptr) const;
  // Validates a value against any named shape; `path` is the prefix for messages ("" at top
  // level). kNotFound when the shape does not exist.
  Status ValidateShape(std::string_view shape_name, const nlohmann::json& value,
                       std::string_view path) const;

  // Wire names of all members of a structure shape, in model order (empty if not a structure).
  std::vector<std::string> MemberNames(std::string_view structure_shape) const;
  // The members of a structure bound outside the body (rest-json): the member's name, its
  // location ("uri", "querystring", "header", "headers") and its name there, and whether its
  // shape is a list (a query parameter that may repeat).
  struct HttpMember {
    std::string member, location, location_name;
    bool is_list = false;
  };
  std::vector<HttpMember> HttpMembers(std::string_view structure_shape) const;
  // The members reachable from a structure shape whose wire name ends in `suffix`, compared
  // ASCII case-insensitively ("RoleArn" finds jobRoleArn, taskRoleArn, ExecutionRoleARN), each as
  // the steps that lead to it from the structure: member names, "[]" for every item of a list and
  // "{}" for every value of a map (ecsProperties, taskProperties, [], taskRoleArn). A shape that
  // contains itself is followed once per path. Empty when the shape is no structure.
  std::vector<std::vector<std::string>> MemberPathsEndingWith(std::string_view structure_shape,
                                                              std::string_view suffix) const;
  // All operation names, sorted.
  std::vector<std::string> OperationNames() const;
  bool HasShape(std::string_view shape_name) const;

  // Distinct patterns (as written in the model) of the shapes reachable from the operation's
  // input and output shapes, sorted. Empty for an unknown operation.
  std::vector<std::string> PatternsFor(std::string_view operation_name) const;
  // Whether a model pattern is enforced (false for unsupported or unknown patterns).
  bool PatternSupported(std::string_view pattern) const;
  // Patterns of this model that RE2 cannot run even after translation; they are not enforced.
  const std::vector<std::string>& unsupported_patterns() const;

 private:
  struct Impl;
  explicit ServiceModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ty::api
