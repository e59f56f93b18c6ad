#include "obs/event_access.h"

#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace ty::obs {

using nlohmann::json;

std::string EventReadCheck::Key() const {
  // '\n' appears in none of the parts' legal values (ARNs, actions, sources are checked).
  return action + '\n' + resource + '\n' + put_by + '\n' + source + '\n' + detail_type;
}

namespace {

std::string Text(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// arn:partition:service:region:account:resource -> service and resource ("" when not an ARN).
bool SplitArn(const std::string& arn, std::string* service, std::string* resource) {
  size_t pos = 0;
  for (int field = 0; field < 5; ++field) {
    const size_t colon = arn.find(':', pos);
    if (colon == std::string::npos) return false;
    if (field == 0 && arn.compare(0, colon, "arn") != 0) return false;
    if (field == 2) *service = arn.substr(pos, colon - pos);
    pos = colon + 1;
  }
  *resource = arn.substr(pos);
  return true;
}

}  // namespace

EventReadCheck ReadCheckOf(const json& stored) {
  EventReadCheck c;
  if (!stored.is_object()) return c;
  const json empty = json::object();
  auto e = stored.find("event");
  const json& event = e != stored.end() && e->is_object() ? *e : empty;
  if (std::string put_by = Text(stored, "put_by"); !put_by.empty()) {
    c.action = "events:PutEvents";
    c.resource = "arn:aws:events:" + Text(event, "region") + ":" + Text(event, "account") + ":event-bus/default";
    c.put_by = std::move(put_by);
    c.source = Text(event, "source");
    c.detail_type = Text(event, "detail-type");
    return c;
  }
  if (Text(event, "detail-type") == "AWS API Call via CloudTrail") {
    c.action = "trainyard:LookupAuditEvents";  // as the admin/audit endpoint is checked: on "*"
    c.resource = "*";
    return c;
  }
  auto resources = event.find("resources");
  if (resources == event.end() || !resources->is_array() || resources->empty() || !(*resources)[0].is_string()) return c;
  const std::string arn = (*resources)[0].get<std::string>();
  std::string service, resource;
  if (!SplitArn(arn, &service, &resource)) return c;
  c.resource = arn;
  if (service == "batch" && StartsWith(resource, "service-job/")) {
    c.action = "batch:DescribeServiceJob";
  } else if (service == "batch" && StartsWith(resource, "job/")) {
    c.action = "batch:DescribeJobs";
  } else if (service == "sagemaker" && StartsWith(resource, "training-job/")) {
    c.action = "sagemaker:DescribeTrainingJob";
  } else if (service == "sagemaker" && StartsWith(resource, "hyper-parameter-tuning-job/")) {
    c.action = "sagemaker:DescribeHyperParameterTuningJob";
  } else if (service == "cloudwatch" && StartsWith(resource, "alarm:")) {
    c.action = "cloudwatch:DescribeAlarms";
  } else if (service == "events" && StartsWith(resource, "rule/")) {
    c.action = "events:DescribeRule";
  } else {
    c.resource.clear();
  }
  return c;
}

}  // namespace ty::obs
