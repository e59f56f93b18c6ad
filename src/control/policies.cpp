// Scheduling policies: fair-share and quota-share policies, validated and stored.
#include "control/controller.h"
#include "control/turn.h"
#include "core/strings.h"

namespace ty::control {


const SchedulingPolicy* Controller::FindPolicy(const State& s, const std::string& arn) {
  auto slash = arn.rfind('/');
  auto it = s.policies.find(slash == std::string::npos ? arn : arn.substr(slash + 1));
  if (it == s.policies.end() || (StartsWith(arn, "arn:") && it->second.arn != arn)) return nullptr;
  return &it->second;
}

QueueKind Controller::KindOfPolicy(const State& s, const std::string& arn) {
  if (arn.empty()) return QueueKind::kFifo;
  const SchedulingPolicy* p = FindPolicy(s, arn);
  return p && !p->quotashare_policy_json.empty() ? QueueKind::kQuotaShare : QueueKind::kFairShare;
}

StatusOr<SchedulingPolicy> Controller::CreateSchedulingPolicy(const CreateSchedulingPolicyCommand& cmd) {
  SchedulingPolicy p;
  p.name = cmd.name;
  p.quotashare_policy_json = cmd.quotashare_json;
  p.fairshare_policy_json = cmd.fairshare_json;
  p.fairshare = cmd.fairshare;
  p.tags = cmd.tags;
  p.arn = Arn("batch", "scheduling-policy/" + p.name);
  return Execute<SchedulingPolicy>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<SchedulingPolicy> {
    if (state_.policies.count(p.name)) return AlreadyExists("Scheduling policy " + p.name + " already exists");
    p.seq = state_.next_seq++;
    state_.policies[p.name] = p;
    t.policies.insert(p.name);
    return p;
  });
}

StatusOr<SchedulingPolicy> Controller::UpdateSchedulingPolicy(const UpdateSchedulingPolicyCommand& cmd) {
  const std::string& arn = cmd.arn;
  return Execute<SchedulingPolicy>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<SchedulingPolicy> {
    const SchedulingPolicy* found = FindPolicy(state_, arn);
    if (!found) return InvalidArgument("arn: scheduling policy " + arn + " does not exist");
    SchedulingPolicy p = *found;
    bool fairshare = !p.fairshare_policy_json.empty();
    if (!cmd.quotashare_json.empty()) {
      if (fairshare) return InvalidArgument("quotaSharePolicy: the type of a scheduling policy can't be switched (it is fair share)");
      p.quotashare_policy_json = cmd.quotashare_json;
    }
    if (cmd.fairshare) {
      if (!fairshare) return InvalidArgument("fairsharePolicy: the type of a scheduling policy can't be switched (it is quota share)");
      p.fairshare_policy_json = cmd.fairshare_json;
      p.fairshare = cmd.fairshare;
    }
    state_.policies[p.name] = p;
    t.policies.insert(p.name);
    t.reschedule = true;
    return p;
  });
}

Status Controller::DeleteSchedulingPolicy(const DeleteSchedulingPolicyCommand& cmd) {
  const std::string& arn = cmd.arn;
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    const SchedulingPolicy* p = FindPolicy(state_, arn);
    if (!p) return InvalidArgument("arn: scheduling policy " + arn + " does not exist");
    for (const auto& [qn, q] : state_.queues)
      if (q.scheduling_policy_arn == p->arn)
        return FailedPrecondition("Scheduling policy " + p->name + " is used by job queue " + qn);
    std::string name = p->name;
    state_.policies.erase(name);
    t.deleted_policies.insert(name);
    return Status::Ok();
  });
}

}  // namespace ty::control
