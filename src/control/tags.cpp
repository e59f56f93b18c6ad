// Tags of the resources trainyard has ARNs for (Batch TagResource, UntagResource and
// ListTagsForResource; SageMaker AddTags, DeleteTags and ListTags). A resource's tags live on its
// document, so they are stored with it and survive a restart.
#include "control/controller.h"
#include "control/turn.h"
#include "core/strings.h"

namespace ty::control {

namespace {

enum class Tagged { kEnvironment, kQueue, kPolicy, kQuotaShare, kServiceJob, kTrainingJob, kTuningJob, kJobDefinition, kComputeEnvironment, kContainerJob };

// A resource an ARN names: its kind and its key in State (a name, "<queue>/<share>", a job's seq;
// a job definition's name, with its revision in `seq`).
struct TaggedRef {
  Tagged kind;
  std::string key;
  uint64_t seq = 0;
};

// AWS's limit on the tags of one resource (user tags; "aws:" ones are refused at the edge).
constexpr size_t kMaxTagsPerResource = 50;

}  // namespace

// Which resource `arn` names, for the API of `service` ("batch" or "sagemaker").
// REQUIRES: the state lock is held (shared at least).
static StatusOr<TaggedRef> ResolveTagged(const State& s, const Config& config, const std::string& service,
                                         const std::string& arn) {
  const std::vector<std::string> parts = Split(arn, ':');
  if (parts.size() < 6 || parts[0] != "arn" || parts[5].empty())
    return InvalidArgument("resourceArn: '" + arn + "' is not an ARN (arn:aws:" + service + ":REGION:ACCOUNT:RESOURCE)");
  if (parts[2] != service)
    return InvalidArgument("resourceArn: '" + arn + "' is not a " + service + " resource");
  if (parts[3] != config.region || parts[4] != config.account_id)
    return InvalidArgument("resourceArn: '" + arn + "' belongs to region '" + parts[3] + "' and account '" + parts[4] +
                           "'; this server is region '" + config.region + "', account '" + config.account_id + "'");
  if (service == "sagemaker") {
    if (StartsWith(parts[5], "hyper-parameter-tuning-job/")) {
      const std::string key = ToLower(parts[5].substr(27));
      auto it = s.tuning_jobs.find(key);
      if (it == s.tuning_jobs.end() || it->second.arn != arn)
        return NotFound("resourceArn: hyperparameter tuning job " + arn + " does not exist");
      return TaggedRef{Tagged::kTuningJob, key};
    }
    if (!StartsWith(parts[5], "training-job/"))
      return InvalidArgument("resourceArn: '" + arn + "': only training jobs and hyperparameter tuning jobs can be tagged here");
    for (const auto& [name, tj] : s.training_jobs)
      if (tj.arn == arn) return TaggedRef{Tagged::kTrainingJob, name};
    return NotFound("resourceArn: training job " + arn + " does not exist");
  }
  if (const ServiceEnvironment* e = Controller::FindEnvironment(s, arn)) return TaggedRef{Tagged::kEnvironment, e->name};
  if (const JobQueue* q = Controller::FindQueue(s, arn)) return TaggedRef{Tagged::kQueue, q->name};
  if (const SchedulingPolicy* p = Controller::FindPolicy(s, arn)) return TaggedRef{Tagged::kPolicy, p->name};
  if (const QuotaShare* q = Controller::FindQuotaShareByArn(s, arn))
    return TaggedRef{Tagged::kQuotaShare, q->queue + "/" + q->name};
  if (const ServiceJobState* js = s.FindJob(arn)) return TaggedRef{Tagged::kServiceJob, js->job.id, js->job.seq};
  if (StartsWith(parts[5], "job-definition/")) {
    const JobDefinition* d = Controller::FindJobDefinition(s, arn);
    if (!d) return NotFound("resourceArn: " + arn + " does not exist");
    return TaggedRef{Tagged::kJobDefinition, d->name, static_cast<uint64_t>(d->revision)};
  }
  if (const ComputeEnvironment* e = Controller::FindComputeEnvironment(s, arn))
    return TaggedRef{Tagged::kComputeEnvironment, e->name};
  if (StartsWith(parts[5], "job/"))
    if (const ContainerJob* j = s.FindContainerJob(arn)) return TaggedRef{Tagged::kContainerJob, j->id, j->seq};
  static constexpr const char* kKinds[] = {"service-environment/", "job-queue/", "scheduling-policy/", "quota-share/",
                                           "service-job/", "compute-environment/", "job/"};
  for (const char* kind : kKinds)
    if (StartsWith(parts[5], kind)) return NotFound("resourceArn: " + arn + " does not exist");
  return InvalidArgument("resourceArn: '" + arn +
                         "': only service environments, compute environments, job queues, scheduling policies, quota "
                         "shares, service jobs, jobs and job definitions can be tagged here");
}

// The tags of `ref`, marking the resource changed in `t` (a Controller::Turn).
template <typename Turn>
static Tags& MutableTags(State& s, Turn& t, const TaggedRef& ref) {
  switch (ref.kind) {
    case Tagged::kEnvironment:
      t.environments.insert(ref.key);
      return s.environments.at(ref.key).tags;
    case Tagged::kQueue:
      t.queues.insert(ref.key);
      return s.queues.at(ref.key).tags;
    case Tagged::kPolicy:
      t.policies.insert(ref.key);
      return s.policies.at(ref.key).tags;
    case Tagged::kQuotaShare:
      t.quota_shares.insert(ref.key);
      return s.quota_shares.at(ref.key).tags;
    case Tagged::kServiceJob:
      t.jobs.insert(ref.seq);
      return s.jobs.at(ref.seq).job.tags;
    case Tagged::kTrainingJob:
      t.training_jobs.insert(ref.key);
      return s.training_jobs.at(ref.key).tags;
    case Tagged::kTuningJob:
      t.tuning_jobs.insert(ref.key);
      return s.tuning_jobs.at(ref.key).tags;
    case Tagged::kJobDefinition:
      t.job_definitions.insert({ref.key, static_cast<int>(ref.seq)});
      return s.job_definitions.at(ref.key).at(static_cast<int>(ref.seq)).tags;
    case Tagged::kComputeEnvironment:
      t.compute_environments.insert(ref.key);
      return s.compute_environments.at(ref.key).tags;
    case Tagged::kContainerJob:
      t.container_jobs.insert(ref.seq);
      return s.container_jobs.at(ref.seq).tags;
  }
  std::abort();  // every kind is handled above
}

static const Tags& TagsOfRef(const State& s, const TaggedRef& ref) {
  switch (ref.kind) {
    case Tagged::kEnvironment: return s.environments.at(ref.key).tags;
    case Tagged::kQueue: return s.queues.at(ref.key).tags;
    case Tagged::kPolicy: return s.policies.at(ref.key).tags;
    case Tagged::kQuotaShare: return s.quota_shares.at(ref.key).tags;
    case Tagged::kServiceJob: return s.jobs.at(ref.seq).job.tags;
    case Tagged::kTrainingJob: return s.training_jobs.at(ref.key).tags;
    case Tagged::kTuningJob: return s.tuning_jobs.at(ref.key).tags;
    case Tagged::kJobDefinition: return s.job_definitions.at(ref.key).at(static_cast<int>(ref.seq)).tags;
    case Tagged::kComputeEnvironment: return s.compute_environments.at(ref.key).tags;
    case Tagged::kContainerJob: return s.container_jobs.at(ref.seq).tags;
  }
  std::abort();  // every kind is handled above
}

Status Controller::TagResource(const TagResourceCommand& cmd) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    auto ref = ResolveTagged(state_, config_, cmd.service, cmd.arn);
    if (!ref.ok()) return ref.status();
    const Tags& now = TagsOfRef(state_, *ref);
    size_t total = now.size();
    for (const auto& [k, v] : cmd.tags) total += now.count(k) ? 0 : 1;
    if (total > kMaxTagsPerResource)
      return LimitExceeded("tags: " + cmd.arn + " has " + std::to_string(now.size()) + " tags; with these it would have " +
                           std::to_string(total) + ", more than the " + std::to_string(kMaxTagsPerResource) +
                           " a resource may have");
    Tags& tags = MutableTags(state_, t, *ref);
    for (const auto& [k, v] : cmd.tags) tags[k] = v;
    return Status::Ok();
  });
}

Status Controller::UntagResource(const UntagResourceCommand& cmd) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    auto ref = ResolveTagged(state_, config_, cmd.service, cmd.arn);
    if (!ref.ok()) return ref.status();
    Tags& tags = MutableTags(state_, t, *ref);
    for (const auto& k : cmd.keys) tags.erase(k);
    return Status::Ok();
  });
}

StatusOr<Tags> Controller::TagsOf(const std::string& service, const std::string& arn) const {
  return Read([&](const State& s) -> StatusOr<Tags> {
    auto ref = ResolveTagged(s, config_, service, arn);
    if (!ref.ok()) return ref.status();
    return TagsOfRef(s, *ref);
  });
}

}  // namespace ty::control
