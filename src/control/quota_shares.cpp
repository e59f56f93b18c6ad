// Quota shares of quota-management job queues.
#include "control/controller.h"
#include "control/turn.h"
#include "core/strings.h"

namespace ty::control {

namespace {

Status ApplyShareFields(const QuotaShareFields& f, const ServiceEnvironment& env, QuotaShare* q) {
  if (f.capacity_limits) {
    const std::vector<CapacityLimit>& limits = *f.capacity_limits;
    if (limits.empty() || limits.size() > 5) return InvalidArgument("capacityLimits must hold 1 to 5 limits");
    q->capacity_limits.clear();
    std::set<std::string> units;
    for (size_t i = 0; i < limits.size(); ++i) {
      std::string where = "capacityLimits[" + std::to_string(i) + "]";
      const std::string& unit = limits[i].capacity_unit;
      const int64_t max = limits[i].max_capacity;
      bool offered = false;
      for (const auto& l : env.capacity_limits) offered |= l.capacity_unit == unit;
      if (!offered)
        return InvalidArgument(where + ".capacityUnit " + unit + " is not a capacity unit of service environment " + env.name);
      if (max < 0) return InvalidArgument(where + ".maxCapacity must be >= 0");
      if (!units.insert(unit).second) return InvalidArgument(where + ".capacityUnit " + unit + " is listed twice");
      q->capacity_limits.push_back({unit, max});
    }
  }
  if (f.resource_sharing) {
    const QuotaShareFields::Sharing& rs = *f.resource_sharing;
    q->strategy = rs.strategy.value_or(q->strategy);
    q->borrow_limit = rs.borrow_limit.value_or(-1);
    if (q->borrow_limit < -1) return InvalidArgument("resourceSharingConfiguration.borrowLimit must be -1 (unlimited) or >= 0");
    if (q->strategy != ShareStrategy::kLendAndBorrow && rs.borrow_limit && q->borrow_limit != -1)
      return InvalidArgument("resourceSharingConfiguration.borrowLimit applies only to the LEND_AND_BORROW strategy");
  }
  if (f.in_share_preemption) q->in_share_preemption = *f.in_share_preemption;
  if (f.state) q->state = *f.state;
  return Status::Ok();
}

}  // namespace

const QuotaShare* Controller::FindQuotaShareByArn(const State& s, const std::string& arn) {
  for (const auto& [key, q] : s.quota_shares)
    if (q.arn == arn) return &q;
  return nullptr;
}

StatusOr<QuotaShare> Controller::CreateQuotaShare(const CreateQuotaShareCommand& cmd) {
  const std::string& queue_ref = cmd.queue;
  QuotaShare q;
  q.name = cmd.name;
  q.tags = cmd.tags;
  return Execute<QuotaShare>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<QuotaShare> {
    const JobQueue* queue = FindQueue(state_, queue_ref);
    if (!queue) return InvalidArgument("jobQueue: job queue " + queue_ref + " does not exist");
    if (queue->kind != QueueKind::kQuotaShare)
      return InvalidArgument("jobQueue: job queue " + queue->name + " has no quota-share scheduling policy");
    const ServiceEnvironment& env = state_.environments.at(queue->service_environment_order.front().service_environment);
    q.queue = queue->name;
    std::string key = q.queue + "/" + q.name;
    if (state_.quota_shares.count(key)) return AlreadyExists("Quota share " + q.name + " already exists in job queue " + q.queue);
    int shares = 0;
    for (const auto& [k, other] : state_.quota_shares) shares += other.queue == q.queue;
    if (shares >= 20) return LimitExceeded("job queue " + q.queue + " already has 20 quota shares");
    TY_RETURN_IF_ERROR(ApplyShareFields(cmd.fields, env, &q));
    q.arn = queue->arn + "/quota-share/" + q.name;
    q.seq = state_.next_seq++;
    state_.quota_shares[key] = q;
    t.quota_shares.insert(key);
    t.reschedule = true;
    return q;
  });
}

StatusOr<QuotaShare> Controller::UpdateQuotaShare(const UpdateQuotaShareCommand& cmd) {
  const std::string& arn = cmd.arn;
  return Execute<QuotaShare>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<QuotaShare> {
    const QuotaShare* found = FindQuotaShareByArn(state_, arn);
    if (!found) return InvalidArgument("quotaShareArn: quota share " + arn + " does not exist");
    QuotaShare q = *found;
    const JobQueue& queue = state_.queues.at(q.queue);
    const ServiceEnvironment& env = state_.environments.at(queue.service_environment_order.front().service_environment);
    TY_RETURN_IF_ERROR(ApplyShareFields(cmd.fields, env, &q));
    std::string key = q.queue + "/" + q.name;
    state_.quota_shares[key] = q;
    t.quota_shares.insert(key);
    t.reschedule = true;  // a lower limit makes the share's excess jobs preemptible
    return q;
  });
}

Status Controller::DeleteQuotaShare(const DeleteQuotaShareCommand& cmd) {
  const std::string& arn = cmd.arn;
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    const QuotaShare* q = FindQuotaShareByArn(state_, arn);
    if (!q) return InvalidArgument("quotaShareArn: quota share " + arn + " does not exist");
    auto active = state_.unfinished_by_share.find(q->queue);
    if (active != state_.unfinished_by_share.end() && active->second.count(q->name))
      return FailedPrecondition("Quota share " + q->name + " still has unfinished jobs");
    std::string key = q->queue + "/" + q->name;
    state_.quota_shares.erase(key);
    t.deleted_quota_shares.insert(key);
    return Status::Ok();
  });
}

}  // namespace ty::control
