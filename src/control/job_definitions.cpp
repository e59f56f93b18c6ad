// Batch job definitions: revisions registered per name, deregistered (INACTIVE) but never removed,
// as AWS keeps them. Stored as kMeta documents "job-definition/<name>:<revision>".
#include <charconv>

#include "control/controller.h"
#include "control/turn.h"
#include "core/strings.h"

namespace ty::control {

const JobDefinition* Controller::FindJobDefinition(const State& s, const std::string& ref) {
  std::string name_rev = ref;
  if (StartsWith(ref, "arn:")) {
    auto slash = ref.find('/');
    if (slash == std::string::npos) return nullptr;
    name_rev = ref.substr(slash + 1);
  }
  auto colon = name_rev.rfind(':');
  if (colon == std::string::npos) return nullptr;
  int revision = 0;
  const char* first = name_rev.data() + colon + 1;
  const char* last = name_rev.data() + name_rev.size();
  auto [end, ec] = std::from_chars(first, last, revision);
  if (ec != std::errc() || end != last || first == last) return nullptr;
  auto by_name = s.job_definitions.find(name_rev.substr(0, colon));
  if (by_name == s.job_definitions.end()) return nullptr;
  auto it = by_name->second.find(revision);
  if (it == by_name->second.end()) return nullptr;
  // An ARN of another region, account or partition names none of ours.
  if (StartsWith(ref, "arn:") && it->second.arn != ref) return nullptr;
  return &it->second;
}

StatusOr<JobDefinition> Controller::RegisterJobDefinition(const RegisterJobDefinitionCommand& cmd) {
  JobDefinition d;
  d.name = cmd.name;
  d.type = cmd.type;
  d.spec_json = cmd.spec_json;
  d.container = cmd.container;
  d.tags = cmd.tags;
  return Execute<JobDefinition>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<JobDefinition> {
    auto& revisions = state_.job_definitions[d.name];
    d.revision = revisions.empty() ? 1 : revisions.rbegin()->first + 1;
    d.arn = Arn("batch", "job-definition/" + d.name + ":" + std::to_string(d.revision));
    d.seq = state_.next_seq++;
    revisions[d.revision] = d;
    t.job_definitions.insert({d.name, d.revision});
    return d;
  });
}

Status Controller::DeregisterJobDefinition(const DeregisterJobDefinitionCommand& cmd) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    const JobDefinition* found = FindJobDefinition(state_, cmd.job_definition);
    if (!found)
      return InvalidArgument("jobDefinition: job definition " + cmd.job_definition +
                             " does not exist (name it as name:revision or by its ARN)");
    JobDefinition& d = state_.job_definitions.at(found->name).at(found->revision);
    d.active = false;  // deregistering an INACTIVE revision again changes nothing, as with AWS
    t.job_definitions.insert({d.name, d.revision});
    return Status::Ok();
  });
}

}  // namespace ty::control
