#include "core/model.h"

#include <nlohmann/json.hpp>

#include "core/json_read.h"
#include "core/strings.h"
#include "core/training_spec_json.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>

namespace ty {

namespace {
constexpr const char* kJobStatusNames[] = {"SUBMITTED", "PENDING",   "RUNNABLE",  "SCHEDULED",
                                           "STARTING",  "RUNNING",   "SUCCEEDED", "FAILED"};
}  // namespace

const char* JobStatusName(JobStatus s) { return kJobStatusNames[static_cast<int>(s)]; }

std::optional<JobStatus> ParseJobStatus(std::string_view s) {
  for (int i = 0; i < 8; ++i)
    if (s == kJobStatusNames[i]) return static_cast<JobStatus>(i);
  return std::nullopt;
}

const char* ToWire(ResourceState s) { return s == ResourceState::kEnabled ? "ENABLED" : "DISABLED"; }

std::optional<ResourceState> ParseResourceState(std::string_view s) {
  if (s == "ENABLED") return ResourceState::kEnabled;
  if (s == "DISABLED") return ResourceState::kDisabled;
  return std::nullopt;
}

namespace {
constexpr const char* kStopCauseNames[] = {"", "user", "terminate", "timeout", "preempt",
                                           "pending", "maxwait", "disk_reserve", "interrupt"};
}  // namespace

const char* StopCauseName(StopCause c) { return kStopCauseNames[static_cast<int>(c)]; }

std::optional<StopCause> ParseStopCause(std::string_view s) {
  for (int i = 0; i < static_cast<int>(std::size(kStopCauseNames)); ++i)
    if (s == kStopCauseNames[i]) return static_cast<StopCause>(i);
  return std::nullopt;
}

namespace {
constexpr const char* kShareStrategyNames[] = {"RESERVE", "LEND", "LEND_AND_BORROW"};
constexpr const char* kTrainingJobStatusNames[] = {"InProgress", "Completed", "Failed", "Stopping", "Stopped"};
constexpr const char* kSecondaryStatusNames[] = {
    "Starting", "LaunchingMLInstances", "PreparingTrainingStack", "Downloading", "DownloadingTrainingImage",
    "Training", "Uploading",  "Stopping", "Stopped", "MaxRuntimeExceeded", "Completed", "Failed",
    "Interrupted", "MaxWaitTimeExceeded", "Updating", "Restarting", "Pending"};
constexpr const char* kWarmPoolStatusNames[] = {"", "InUse", "Available", "Reused", "Terminated"};

template <typename E, size_t N>
std::optional<E> ParseName(const char* const (&names)[N], std::string_view s) {
  for (size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<E>(i);
  return std::nullopt;
}
}  // namespace

const char* ToWire(ShareStrategy s) { return kShareStrategyNames[static_cast<int>(s)]; }
std::optional<ShareStrategy> ParseShareStrategy(std::string_view s) {
  return ParseName<ShareStrategy>(kShareStrategyNames, s);
}
const char* ToWire(TrainingJobStatus s) { return kTrainingJobStatusNames[static_cast<int>(s)]; }
std::optional<TrainingJobStatus> ParseTrainingJobStatus(std::string_view s) {
  return ParseName<TrainingJobStatus>(kTrainingJobStatusNames, s);
}
const char* ToWire(SecondaryStatus s) { return kSecondaryStatusNames[static_cast<int>(s)]; }
std::optional<SecondaryStatus> ParseSecondaryStatus(std::string_view s) {
  return ParseName<SecondaryStatus>(kSecondaryStatusNames, s);
}
const char* ToWire(WarmPoolStatus s) { return kWarmPoolStatusNames[static_cast<int>(s)]; }
std::optional<WarmPoolStatus> ParseWarmPoolStatus(std::string_view s) {
  return ParseName<WarmPoolStatus>(kWarmPoolStatusNames, s);
}

// Stored documents spell these enums as the wire does, so a data dir written while they were
// strings loads unchanged. An unknown spelling fails the document's decode (it is not silently
// read as the first value).
#define TY_JSON_ENUM_AS_WIRE(E)                                              \
  void to_json(nlohmann::json& j, const E& v) { j = ToWire(v); }            \
  void from_json(const nlohmann::json& j, E& v) {                          \
    auto parsed = Parse##E(j.get<std::string>());                          \
    if (!parsed) throw nlohmann::json::other_error::create(501, "unknown " #E, &j); \
    v = *parsed;                                                           \
  }
TY_JSON_ENUM_AS_WIRE(ShareStrategy)
TY_JSON_ENUM_AS_WIRE(TrainingJobStatus)
TY_JSON_ENUM_AS_WIRE(SecondaryStatus)
TY_JSON_ENUM_AS_WIRE(WarmPoolStatus)
#undef TY_JSON_ENUM_AS_WIRE

NLOHMANN_JSON_SERIALIZE_ENUM(StopCause, {{StopCause::kNone, ""},
                                         {StopCause::kUser, "user"},
                                         {StopCause::kTerminate, "terminate"},
                                         {StopCause::kTimeout, "timeout"},
                                         {StopCause::kPreempt, "preempt"},
                                         {StopCause::kPending, "pending"},
                                         {StopCause::kMaxWait, "maxwait"},
                                         {StopCause::kDiskReserve, "disk_reserve"},
                                         {StopCause::kInterrupt, "interrupt"}})

NLOHMANN_JSON_SERIALIZE_ENUM(ResourceState, {{ResourceState::kEnabled, "ENABLED"}, {ResourceState::kDisabled, "DISABLED"}})

NLOHMANN_JSON_SERIALIZE_ENUM(JobStatus, {{JobStatus::kSubmitted, "SUBMITTED"},
                                         {JobStatus::kPending, "PENDING"},
                                         {JobStatus::kRunnable, "RUNNABLE"},
                                         {JobStatus::kScheduled, "SCHEDULED"},
                                         {JobStatus::kStarting, "STARTING"},
                                         {JobStatus::kRunning, "RUNNING"},
                                         {JobStatus::kSucceeded, "SUCCEEDED"},
                                         {JobStatus::kFailed, "FAILED"}})

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(CapacityLimit, capacity_unit, max_capacity)
// inSharePreemption is stored as its wire spelling.
void to_json(nlohmann::json& j, const QuotaShare& v) {
  j = nlohmann::json{{"name", v.name},
                     {"arn", v.arn},
                     {"queue", v.queue},
                     {"capacity_limits", v.capacity_limits},
                     {"strategy", v.strategy},
                     {"borrow_limit", v.borrow_limit},
                     {"in_share_preemption", v.in_share_preemption ? "ENABLED" : "DISABLED"},
                     {"state", v.state},
                     {"tags", v.tags},
                     {"seq", v.seq}};
}
void from_json(const nlohmann::json& j, QuotaShare& v) {
  const QuotaShare d;
  v.name = j.value("name", d.name);
  v.arn = j.value("arn", d.arn);
  v.queue = j.value("queue", d.queue);
  v.capacity_limits = j.value("capacity_limits", d.capacity_limits);
  v.strategy = j.value("strategy", d.strategy);
  v.borrow_limit = j.value("borrow_limit", d.borrow_limit);
  v.in_share_preemption = j.value("in_share_preemption", std::string("DISABLED")) == "ENABLED";
  v.state = j.value("state", d.state);
  v.tags = j.value("tags", d.tags);
  v.seq = j.value("seq", d.seq);
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ServiceEnvironment, name, arn, type, state, status,
                                                capacity_limits, tags, seq)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SchedulingPolicy, name, arn, fairshare_policy_json,
                                                quotashare_policy_json, tags, seq)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(JobDefinition, name, revision, arn, active, type, spec_json, tags,
                                                seq)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ServiceEnvironmentOrder, order, service_environment)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ComputeEnvironmentOrder, order, compute_environment)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ComputeEnvironment, name, arn, type, state, status, vcpus, memory_mib, gpus,
                                                compute_resources_json, unmanaged_vcpus, tags, seq)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ContainerExitRule, retry, on_exit_code, on_reason, on_status_reason)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ContainerAttempt, has_exit_code, exit_code, reason, log_stream_name,
                                                started_at, stopped_at, status_reason)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(JobDependency, job_id, type)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ContainerJob, id, arn, name, queue, seq, status, status_reason, created_at,
                                                started_at, stopped_at, job_definition, image, command, environment, vcpus,
                                                memory_mib, gpus, job_role_arn, retry_attempts, evaluate_on_exit,
                                                attempt_duration_seconds, share_identifier, scheduling_priority, tags,
                                                propagate_tags, depends_on, owner, array_size, next_index, parent_id,
                                                array_index, attempts, compute_environment, credentials_token,
                                                stop_reason, released)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(JobQueue, name, arn, state, status, status_reason,
                                                priority, job_queue_type, scheduling_policy_arn, compute_environment_order,
                                                service_environment_order,
                                                job_state_time_limit_actions_json, tags, seq)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ServiceJobAttempt, training_job_arn,
                                                training_job_name, started_at, stopped_at,
                                                status_reason)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(
    ServiceJob, id, arn, name, queue, seq, status, status_reason, created_at, scheduled_at,
    started_at, stopped_at, scheduling_priority, has_scheduling_priority, share_identifier,
    quota_share_name, retry_strategy_json, timeout_config_json, preemption_configuration_json, tags,
    payload, client_token, request_hash, is_terminated, terminate_reason, attempts, preempted_attempt_count,
    preempted_for, instance_type, instance_count, max_runtime_ms, preemption_lost_instance_ms,
    preemption_lost_gpu_ms, capacity_failed_attempt_count, managed_spot, capacity_ladder,
    fallback_after_interruptions, attempt_capacity_key, owner, tuning_job_arn)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StatusTransition, status, start, end, message)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(MetricValue, name, value, timestamp)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(
    TrainingJob, name, arn, request_json, tags, status, secondary_status, transitions, failure_reason,
    creation_time, training_start_time, training_end_time, last_modified_time, final_metrics,
    model_artifacts, instance_type, instance_count, service_job_id, attempt_number, seq, launched,
    stop_requested, stop_cause, stop_grace_seconds, warm_pool_id, warm_pool_status,
    reused_by_job, reused_from_job, warm_pool_available_since, warm_pool_retained_seconds,
    warm_pool_end_reason, last_checkpoint_time, capacity_ladder,
    fallback_after_interruptions, rung, on_spot, interruptions, run_launched_at, interruption_lost_instance_ms, billed_seconds, cost_usd,
    on_demand_cost_usd, billed_until, run_price_per_hour, run_on_demand_per_hour, owner,
    credentials_token, tuning_job_arn)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(WarmPool, id, seq, status, owner_job, instance_type,
                                                instance_count, match_key, created_at, available_since,
                                                expires_at, queue, quota_share, environment)

double TrainingJob::RunSeconds(EpochMs from, EpochMs to, EpochMs now) const {
  EpochMs ms = 0;
  for (const auto& tr : transitions) {
    if (!IsRunPhase(tr.status)) continue;
    EpochMs a = std::max(tr.start, from), b = std::min(tr.end ? tr.end : now, to);
    if (b > a) ms += b - a;
  }
  return static_cast<double>(ms) / 1000.0;
}

namespace {
// The open run's share: its seconds since the last closed run, times `per_hour` per instance.
double OpenRun(const TrainingJob& tj, EpochMs now, double per_hour) {
  return tj.RunSeconds(tj.billed_until, INT64_MAX, now) * per_hour;
}
}  // namespace

double TrainingJob::BillableSeconds(EpochMs now) const {
  double ratio = run_on_demand_per_hour > 0 ? run_price_per_hour / run_on_demand_per_hour : 1.0;
  return billed_seconds + OpenRun(*this, now, ratio);
}
double TrainingJob::CostUsd(EpochMs now) const {
  return cost_usd + OpenRun(*this, now, run_price_per_hour / 3600.0 * static_cast<double>(instance_count));
}
double TrainingJob::OnDemandCostUsd(EpochMs now) const {
  return on_demand_cost_usd + OpenRun(*this, now, run_on_demand_per_hour / 3600.0 * static_cast<double>(instance_count));
}

namespace {
template <typename T>
std::string Encode(const T& v) {
  return nlohmann::json(v).dump();
}
template <typename T>
bool Decode(const nlohmann::json& j, T* v) {
  if (!j.is_object()) return false;
  try {
    *v = j.get<T>();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}
template <typename T>
bool Decode(const std::string& doc, T* v) {
  return Decode(nlohmann::json::parse(doc, nullptr, /*allow_exceptions=*/false), v);
}
}  // namespace

namespace {
// The object `text` holds ("" is an empty one); nullopt when it is not a JSON object.
std::optional<nlohmann::json> ParseObject(const std::string& text) {
  if (text.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}
using json_read::IntOr;
}  // namespace

bool ParseRetryStrategy(const std::string& text, RetryStrategy* out) {
  auto j = ParseObject(text);
  if (!j) return false;
  *out = RetryStrategy{};
  out->attempts = static_cast<int>(IntOr(*j, "attempts", 1));
  auto rules = j->find("evaluateOnExit");
  if (rules == j->end() || !rules->is_array()) return true;
  for (const auto& r : *rules) {
    if (!r.is_object()) return false;
    ExitRule rule;
    auto action = r.find("action");
    if (action != r.end() && action->is_string()) {
      std::string a = action->get<std::string>();
      std::transform(a.begin(), a.end(), a.begin(), [](unsigned char c) { return std::toupper(c); });
      rule.action = a == "EXIT" ? ExitRule::Action::kExit : ExitRule::Action::kRetry;
    }
    auto reason = r.find("onStatusReason");
    if (reason != r.end() && reason->is_string()) rule.on_status_reason = reason->get<std::string>();
    out->evaluate_on_exit.push_back(std::move(rule));
  }
  return true;
}

bool ParseTimeoutConfig(const std::string& text, TimeoutConfig* out) {
  auto j = ParseObject(text);
  if (!j) return false;
  out->attempt_duration_seconds = IntOr(*j, "attemptDurationSeconds", 0);
  return true;
}

bool ParsePreemptionConfig(const std::string& text, PreemptionConfig* out) {
  auto j = ParseObject(text);
  if (!j) return false;
  out->retries_before_termination = IntOr(*j, "preemptionRetriesBeforeTermination", -1);
  return true;
}

namespace {
// A whole number given as a number or as a numeric string ("2", "2.0"); `fallback` otherwise.
int64_t WholeOf(const nlohmann::json& v, int64_t fallback) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number()) return static_cast<int64_t>(v.get<double>());
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    errno = 0;
    const double d = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || errno == ERANGE || !std::isfinite(d) || d < -9.2e18 || d > 9.2e18) return fallback;
    return static_cast<int64_t>(d);
  }
  return fallback;
}
using json_read::BoolOr;
using json_read::Member;
using json_read::StringOr;
}  // namespace

bool ParseContainerTemplate(const std::string& spec_json, ContainerTemplate* out) {
  const nlohmann::json spec = nlohmann::json::parse(spec_json, nullptr, false);
  if (!spec.is_object()) return false;
  ContainerTemplate c;
  const nlohmann::json& props = Member(spec, "containerProperties");
  if (props.is_object()) {
    c.image = StringOr(props, "image");
    c.job_role_arn = StringOr(props, "jobRoleArn");
    if (const auto& cmd = Member(props, "command"); cmd.is_array())
      for (const auto& a : cmd)
        if (a.is_string()) c.command.push_back(a.get<std::string>());
    if (const auto& env = Member(props, "environment"); env.is_array())
      for (const auto& e : env)
        if (e.is_object() && Member(e, "name").is_string()) c.environment[e["name"].get<std::string>()] = StringOr(e, "value");
    c.vcpus = WholeOf(Member(props, "vcpus"), c.vcpus);
    c.memory_mib = WholeOf(Member(props, "memory"), c.memory_mib);
    if (const auto& reqs = Member(props, "resourceRequirements"); reqs.is_array())
      for (const auto& r : reqs) {
        if (!r.is_object()) continue;
        const std::string type = StringOr(r, "type");
        if (type == "VCPU") c.vcpus = WholeOf(Member(r, "value"), c.vcpus);
        if (type == "MEMORY") c.memory_mib = WholeOf(Member(r, "value"), c.memory_mib);
        if (type == "GPU") c.gpus = WholeOf(Member(r, "value"), c.gpus);
      }
  }
  if (const auto& params = Member(spec, "parameters"); params.is_object())
    for (const auto& [k, v] : params.items())
      if (v.is_string()) c.parameters[k] = v.get<std::string>();
  if (const auto& retry = Member(spec, "retryStrategy"); retry.is_object()) {
    c.retry_attempts = static_cast<int>(std::clamp<int64_t>(WholeOf(Member(retry, "attempts"), 1), 0, 1000));
    if (const auto& rules = Member(retry, "evaluateOnExit"); rules.is_array())
      for (const auto& r : rules) {
        if (!r.is_object()) continue;
        ContainerExitRule rule;
        const std::string action = StringOr(r, "action");
        rule.retry = action.empty() || ToUpper(action) == "RETRY";
        rule.on_exit_code = StringOr(r, "onExitCode");
        rule.on_reason = StringOr(r, "onReason");
        rule.on_status_reason = StringOr(r, "onStatusReason");
        c.evaluate_on_exit.push_back(std::move(rule));
      }
  }
  if (const auto& timeout = Member(spec, "timeout"); timeout.is_object())
    c.attempt_duration_seconds = WholeOf(Member(timeout, "attemptDurationSeconds"), 0);
  c.scheduling_priority = static_cast<int>(std::clamp<int64_t>(WholeOf(Member(spec, "schedulingPriority"), 0), INT_MIN, INT_MAX));
  c.propagate_tags = BoolOr(spec, "propagateTags", false);
  *out = std::move(c);
  return true;
}

bool ParseFairSharePolicy(const std::string& text, FairSharePolicy* out) {
  auto j = ParseObject(text);
  if (!j) return false;
  *out = FairSharePolicy{};
  out->share_decay_seconds = IntOr(*j, "shareDecaySeconds", 0);
  out->compute_reservation = IntOr(*j, "computeReservation", 0);
  auto dist = j->find("shareDistribution");
  if (dist == j->end() || !dist->is_array()) return true;
  for (const auto& e : *dist) {
    if (!e.is_object()) return false;
    ShareAttributes w;
    if (auto id = e.find("shareIdentifier"); id != e.end() && id->is_string()) w.share_identifier = id->get<std::string>();
    if (auto f = e.find("weightFactor"); f != e.end() && f->is_number()) w.weight_factor = f->get<double>();
    out->share_distribution.push_back(std::move(w));
  }
  return true;
}

bool ParseTimeLimitActions(const std::string& text, std::vector<TimeLimitAction>* out) {
  out->clear();
  if (text.empty()) return true;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) return false;
  for (const auto& a : j) {
    if (!a.is_object()) return false;
    TimeLimitAction action;
    if (auto r = a.find("reason"); r != a.end() && r->is_string()) action.reason = r->get<std::string>();
    action.max_time_seconds = IntOr(a, "maxTimeSeconds", 0);
    out->push_back(std::move(action));
  }
  return true;
}

std::string EncodeDoc(const ServiceEnvironment& v) { return Encode(v); }
std::string EncodeDoc(const SchedulingPolicy& v) { return Encode(v); }
std::string EncodeDoc(const QuotaShare& v) { return Encode(v); }
bool DecodeDoc(const std::string& doc, QuotaShare* v) { return Decode(doc, v); }
std::string EncodeDoc(const JobDefinition& v) { return Encode(v); }
std::string EncodeDoc(const ComputeEnvironment& v) { return Encode(v); }
bool DecodeDoc(const std::string& doc, ComputeEnvironment* v) { return Decode(doc, v) && !v->name.empty(); }
std::string EncodeDoc(const ContainerJob& v) { return Encode(v); }
bool DecodeDoc(const std::string& doc, ContainerJob* v) { return Decode(doc, v) && !v->id.empty(); }
bool DecodeDoc(const std::string& doc, JobDefinition* v) {
  return Decode(doc, v) && !v->name.empty() && v->revision > 0 && ParseContainerTemplate(v->spec_json, &v->container);
}
bool DecodeDoc(const std::string& doc, SchedulingPolicy* v) {
  if (!Decode(doc, v)) return false;
  v->fairshare.reset();
  if (v->fairshare_policy_json.empty()) return true;
  FairSharePolicy fs;
  if (!ParseFairSharePolicy(v->fairshare_policy_json, &fs)) return false;
  v->fairshare = std::move(fs);
  return true;
}
std::string EncodeDoc(const JobQueue& v) { return Encode(v); }
namespace {
nlohmann::json ServiceJobJson(const ServiceJob& v) {
  nlohmann::json j = v;
  if (!v.tuning_job_arn.empty()) j["spec"] = EncodeTrainingSpec(v.spec);
  return j;
}
}  // namespace
std::string EncodeDoc(const ServiceJob& v) { return ServiceJobJson(v).dump(); }
std::string EncodeDoc(const TrainingJob& v) {
  nlohmann::json j = v;
  j["spec"] = EncodeTrainingSpec(v.spec);
  return j.dump();
}
std::string EncodeServiceJobRow(const ServiceJob& job, const std::string& service_environment, const StatusHistory& history) {
  nlohmann::json row = {{"job", ServiceJobJson(job)}, {"service_environment", service_environment}, {"history", nlohmann::json::array()}};
  for (const auto& [status, at] : history) row["history"].push_back({status, at});
  return row.dump();
}
bool DecodeDoc(const std::string& doc, ServiceEnvironment* v) { return Decode(doc, v); }
bool DecodeDoc(const std::string& doc, JobQueue* v) {
  return Decode(doc, v) && ParseTimeLimitActions(v->job_state_time_limit_actions_json, &v->time_limit_actions);
}
namespace {
bool DecodeServiceJob(const nlohmann::json& j, ServiceJob* v) {
  if (!Decode(j, v)) return false;
  auto spec = j.find("spec");
  if (!(spec != j.end() ? DecodeTrainingSpec(*spec, &v->spec) : DecodeTrainingSpec(v->payload, &v->spec))) return false;
  // Parses `text` into `out` when it is not "" (absent).
  auto parse = [](const std::string& text, auto& out, auto fn) {
    out.reset();
    if (text.empty()) return true;
    typename std::remove_reference_t<decltype(out)>::value_type value;
    if (!fn(text, &value)) return false;
    out = std::move(value);
    return true;
  };
  return parse(v->retry_strategy_json, v->retry_strategy, ParseRetryStrategy) &&
         parse(v->timeout_config_json, v->timeout, ParseTimeoutConfig) &&
         parse(v->preemption_configuration_json, v->preemption, ParsePreemptionConfig);
}
}  // namespace
bool DecodeDoc(const std::string& doc, ServiceJob* v) {
  return DecodeServiceJob(nlohmann::json::parse(doc, nullptr, false), v);
}
bool DecodeServiceJobRow(const std::string& doc, ServiceJob* job, std::string* service_environment, StatusHistory* history) {
  const auto row = nlohmann::json::parse(doc, nullptr, false);
  if (!row.is_object() || !row.contains("job") || !DecodeServiceJob(row["job"], job)) return false;
  auto env = row.find("service_environment");
  *service_environment = env != row.end() && env->is_string() ? env->get<std::string>() : "";
  history->clear();
  if (auto h = row.find("history"); h != row.end() && h->is_array())
    for (const auto& e : *h)
      if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_number_integer())
        history->emplace_back(e[0].get<std::string>(), e[1].get<EpochMs>());
  return true;
}
bool DecodeDoc(const std::string& doc, TrainingJob* v) {
  const auto j = nlohmann::json::parse(doc, nullptr, false);
  if (!Decode(j, v)) return false;
  if (auto spec = j.find("spec"); spec != j.end()) return DecodeTrainingSpec(*spec, &v->spec);
  // Stored before jobs kept their spec: the request as the controller had edited it (the rung,
  // the trial's values) holds the spec; and before jobs kept their own tags, they were its Tags.
  if (!DecodeTrainingSpec(v->request_json, &v->spec)) return false;
  if (!j.contains("tags")) v->tags = v->spec.tags;
  return true;
}
std::string EncodeDoc(const WarmPool& v) { return Encode(v); }
bool DecodeDoc(const std::string& doc, WarmPool* v) { return Decode(doc, v); }

}  // namespace ty
