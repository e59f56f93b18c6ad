// rest-json requests (Batch): the members of an operation's input that travel in the URI path and
// the query string (TagResource's resourceArn, UntagResource's tagKeys), read into one object that
// the router has validated with the body (ServiceModel::ValidateInput's `bound`) and then merges
// into it, so that handlers and decoders see one request.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "api/service_model.h"
#include "core/status.h"

namespace ty::api {

// Sets, in *out, each uri member of op's input to its path segment (percent-decoded; a greedy
// {label+} takes the rest of the path) and each querystring member to its parameter's values
// (`query_values(name)`, already decoded): a list for a list shape, else the first value.
// InvalidArgument for a path segment whose percent-escapes
// are malformed. REQUIRES: `path` matched op's requestUri (ServiceModel::FindByHttp).
Status BindHttpMembers(const ServiceModel& model, const ServiceModel::Operation& op, std::string_view path,
                       const std::function<std::vector<std::string>(std::string_view)>& query_values,
                       nlohmann::json* out);

}  // namespace ty::api
