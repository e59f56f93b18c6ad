// Batch compute environments: where container jobs run on this host (docs/batch-jobs.md). Each
// offers a number of vCPUs, MiB of memory and GPUs; the container-job pass places attempts by them.
// Stored as kMeta documents "compute-environment/<name>".
#include <algorithm>
#include <set>

#include "control/controller.h"
#include "control/turn.h"
#include "core/strings.h"

namespace ty::control {

const ComputeEnvironment* Controller::FindComputeEnvironment(const State& s, const std::string& name_or_arn) {
  std::string name = name_or_arn;
  if (StartsWith(name_or_arn, "arn:")) {
    auto slash = name_or_arn.rfind('/');
    if (slash == std::string::npos) return nullptr;
    name = name_or_arn.substr(slash + 1);
  }
  auto it = s.compute_environments.find(name);
  if (it == s.compute_environments.end()) return nullptr;
  if (StartsWith(name_or_arn, "arn:") && it->second.arn != name_or_arn) return nullptr;
  return &it->second;
}

StatusOr<std::vector<ComputeEnvironmentOrder>> Controller::ResolveComputeOrder(const State& s,
                                                                               const std::vector<EnvironmentRef>& order) {
  std::vector<ComputeEnvironmentOrder> out;
  std::set<int> orders;
  std::set<std::string> names;
  for (size_t i = 0; i < order.size(); ++i) {
    const std::string where = "computeEnvironmentOrder[" + std::to_string(i) + "]";
    const ComputeEnvironment* e = FindComputeEnvironment(s, order[i].environment);
    if (!e)
      return InvalidArgument(where + ".computeEnvironment: compute environment " + order[i].environment + " does not exist");
    if (!orders.insert(order[i].order).second)
      return InvalidArgument(where + ".order " + std::to_string(order[i].order) + " is used twice");
    if (!names.insert(e->name).second)
      return InvalidArgument(where + ": compute environment " + e->name + " is listed twice");
    out.push_back({order[i].order, e->name});
  }
  if (out.empty()) return InvalidArgument("computeEnvironmentOrder must name at least one compute environment");
  if (out.size() > 3) return InvalidArgument("computeEnvironmentOrder may name at most 3 compute environments");
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  return out;
}

StatusOr<ComputeEnvironment> Controller::CreateComputeEnvironment(const CreateComputeEnvironmentCommand& cmd) {
  ComputeEnvironment e;
  e.name = cmd.name;
  e.type = cmd.type;
  e.state = cmd.state;
  e.vcpus = cmd.vcpus;
  e.memory_mib = cmd.memory_mib;
  e.gpus = cmd.gpus;
  e.unmanaged_vcpus = cmd.unmanaged_vcpus;
  e.compute_resources_json = cmd.compute_resources_json;
  e.tags = cmd.tags;
  e.arn = Arn("batch", "compute-environment/" + e.name);
  return Execute<ComputeEnvironment>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<ComputeEnvironment> {
    if (state_.compute_environments.count(e.name))
      return InvalidArgument("Object already exists: compute environment " + e.name);
    if (state_.compute_environments.size() >= 50) return LimitExceeded("at most 50 compute environments may exist");
    e.seq = state_.next_seq++;
    state_.compute_environments[e.name] = e;
    t.compute_environments.insert(e.name);
    t.reschedule = true;
    return e;
  });
}

StatusOr<ComputeEnvironment> Controller::UpdateComputeEnvironment(const UpdateComputeEnvironmentCommand& cmd) {
  return Execute<ComputeEnvironment>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<ComputeEnvironment> {
    const ComputeEnvironment* found = FindComputeEnvironment(state_, cmd.compute_environment);
    if (!found) return InvalidArgument("computeEnvironment: compute environment " + cmd.compute_environment + " does not exist");
    ComputeEnvironment& e = state_.compute_environments.at(found->name);
    if (cmd.state) e.state = *cmd.state;
    // Lowering the vCPUs stops nothing: running attempts keep theirs, new ones wait for room.
    if (cmd.vcpus) e.vcpus = *cmd.vcpus;
    t.compute_environments.insert(e.name);
    t.reschedule = true;
    return e;
  });
}

Status Controller::DeleteComputeEnvironment(const DeleteComputeEnvironmentCommand& cmd) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    const ComputeEnvironment* e = FindComputeEnvironment(state_, cmd.compute_environment);
    if (!e) return InvalidArgument("computeEnvironment: compute environment " + cmd.compute_environment + " does not exist");
    if (e->state != ResourceState::kDisabled)
      return InvalidArgument("compute environment " + e->name + " must be DISABLED before it is deleted");
    for (const auto& [qn, q] : state_.queues)
      for (const auto& o : q.compute_environment_order)
        if (o.compute_environment == e->name)
          return InvalidArgument("Cannot delete, found existing JobQueue relationship: compute environment " + e->name +
                                 " is in job queue " + qn);
    if (auto use = state_.compute_in_use.find(e->name); use != state_.compute_in_use.end() && use->second.vcpus > 0)
      return InvalidArgument("compute environment " + e->name + " still runs jobs");
    const std::string name = e->name;
    state_.compute_environments.erase(name);
    state_.compute_in_use.erase(name);
    t.deleted_compute_environments.insert(name);
    return Status::Ok();
  });
}

}  // namespace ty::control
