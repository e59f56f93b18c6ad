// Training jobs: creation, launch, executor events, stopping, timeouts and metrics.
#include <re2/re2.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "control/controller.h"
#include "control/ladder.h"
#include "control/system_metrics.h"
#include "control/training_request.h"
#include "control/turn.h"
#include "control/warm_pool_rules.h"
#include "core/object_key.h"
#include "core/strings.h"
#include "exec/distribution.h"
#include "exec/executor.h"
#include "exec/image/reference.h"

namespace ty::control {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* kSmPrefix = "Received status from SageMaker: ";

// `uri` is an s3:// URI whose bucket and key follow core/object_key.h's rules; the error names
// `field` and the rule.
Status CheckS3Uri(const std::string& field, const std::string& uri, KeyUse use) {
  auto loc = ParseS3Uri(uri, use);
  return loc.ok() ? Status::Ok() : InvalidArgument(field + ": " + loc.status().message());
}

// The RE2 a MetricDefinitions Regex compiles to: the same options when the request is checked and
// when the log is read, so a regex accepted at creation is the one that runs.
std::unique_ptr<RE2> CompileMetricRegex(const std::string& regex) {
  RE2::Options opts;
  opts.set_log_errors(false);
  return std::make_unique<RE2>(regex, opts);
}

std::string Unquote(const std::string& v) {
  // The SageMaker Python SDK JSON-encodes hyperparameter values ("\"s3://...\"").
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
    auto j = json::parse(v, nullptr, false);
    if (!j.is_discarded() && j.is_string()) return j.get<std::string>();
  }
  return v;
}

// The action of the first evaluateOnExit entry whose conditions all match the attempt's status
// reason; an entry without onStatusReason matches any reason. No entry matching means RETRY
// (the AWS Batch rule for container jobs; docs/design/decisions.md). Actions were read
// case-insensitively when the strategy was parsed.
ExitRule::Action RetryActionFor(const std::vector<ExitRule>& rules, const std::string& status_reason) {
  for (const auto& r : rules) {
    if (r.on_status_reason && !GlobMatch(*r.on_status_reason, status_reason)) continue;
    return r.action;
  }
  return ExitRule::Action::kRetry;
}

constexpr int64_t kMaxRuntimeLimitSeconds = 28 * 86400;  // SageMaker's 28-day ceiling
constexpr int64_t kMinMaxPendingSeconds = 7200;           // MaxPendingTimeInSeconds 7200..2419200
constexpr int64_t kMaxMaxPendingSeconds = 2419200;

// StoppingCondition (SageMaker API reference). Service-job payloads reach here without model
// validation, so every bound of the model is checked here too.
Status CheckStoppingCondition(const json& req) {
  if (!req.contains("StoppingCondition") || req["StoppingCondition"].is_null()) return Status::Ok();
  const json& sc = req["StoppingCondition"];
  if (!sc.is_object()) return InvalidArgument("StoppingCondition must be an object");
  auto field = [&](const char* name) { return sc.contains(name) ? sc[name] : json(); };
  const json runtime = field("MaxRuntimeInSeconds"), wait = field("MaxWaitTimeInSeconds"),
             pending = field("MaxPendingTimeInSeconds");
  if (!runtime.is_null() && (!runtime.is_number_integer() || runtime.get<int64_t>() < 1 ||
                             runtime.get<int64_t>() > kMaxRuntimeLimitSeconds))
    return InvalidArgument("StoppingCondition.MaxRuntimeInSeconds must be an integer between 1 and " +
                           std::to_string(kMaxRuntimeLimitSeconds) + " (28 days), not " + runtime.dump());
  if (!pending.is_null() &&
      (!pending.is_number_integer() || pending.get<int64_t>() < kMinMaxPendingSeconds ||
       pending.get<int64_t>() > kMaxMaxPendingSeconds))
    return InvalidArgument("StoppingCondition.MaxPendingTimeInSeconds must be an integer between " +
                           std::to_string(kMinMaxPendingSeconds) + " and " + std::to_string(kMaxMaxPendingSeconds) +
                           ", not " + pending.dump());
  if (!wait.is_null()) {
    if (!wait.is_number_integer() || wait.get<int64_t>() < 1)
      return InvalidArgument("StoppingCondition.MaxWaitTimeInSeconds must be a positive integer, not " + wait.dump());
    if (!req.value("EnableManagedSpotTraining", false))
      return InvalidArgument("StoppingCondition.MaxWaitTimeInSeconds applies only to managed spot training "
                             "(EnableManagedSpotTraining=true)");
    const int64_t bound = runtime.is_null() ? 86400 : runtime.get<int64_t>();
    if (wait.get<int64_t>() < bound)
      return InvalidArgument("StoppingCondition.MaxWaitTimeInSeconds (" + wait.dump() +
                             ") must be greater than or equal to MaxRuntimeInSeconds (" + std::to_string(bound) + ")");
  }
  return Status::Ok();
}

int PhaseRank(SecondaryStatus secondary) {
  switch (secondary) {
    case SecondaryStatus::kDownloading: return 1;
    case SecondaryStatus::kTraining: return 2;
    case SecondaryStatus::kUploading: return 3;
    default: return 0;
  }
}

}  // namespace

std::string Controller::FileSystemPath(const std::string& id) const {
  for (const auto& [name, dir] : config_.file_systems)
    if (name == id) return dir;
  return "";
}

std::unique_ptr<exec::LogFile> Controller::OpenLog(const std::string& training_job, int instance) const {
  return executor_ ? executor_->OpenLog(training_job, instance) : nullptr;
}

exec::Executor::LogChunk Controller::ReadLog(const std::string& training_job, int instance, int64_t offset,
                                             int64_t max_bytes) const {
  return executor_ ? executor_->ReadLog(training_job, instance, offset, max_bytes) : exec::Executor::LogChunk{"", offset};
}

void Controller::SweepLogs(EpochMs now, std::vector<std::string>* jobs) {
  if (config_.logs_retention_days <= 0 || !executor_ || now - last_log_sweep_ < 60000) return;
  last_log_sweep_ = now;
  const EpochMs cutoff = now - config_.logs_retention_days * 86400000;
  for (const auto& [name, tj] : state_.training_jobs) {
    if (IsLive(tj.status) || tj.training_end_time <= 0) continue;
    if (tj.training_end_time >= cutoff || logs_swept_.count(name)) continue;
    // Its system metrics are in the store (State::system_series); the samples were their source.
    jobs->push_back(name);
    logs_swept_.insert(name);
  }
}

Status CheckTrainingRequest(const json& req, const Config& config, const std::string& sandbox) {
  auto file_system_path = [&](const std::string& id) -> std::string {
    for (const auto& [name, dir] : config.file_systems)
      if (name == id) return dir;
    return "";
  };
  // Service-job payloads reach here too; the name becomes a directory name and part of paths.
  static const RE2 kTrainingJobName("[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}");
  const json name = req.value("TrainingJobName", json());
  if (!name.is_string() || !RE2::FullMatch(name.get<std::string>(), kTrainingJobName))
    return InvalidArgument("TrainingJobName " + name.dump() +
                           " must be 1 to 63 letters, digits and hyphens, starting and ending with a letter or digit");
  const json spec = req.value("AlgorithmSpecification", json::object());
  const json metrics = spec.value("MetricDefinitions", json::array());
  for (size_t i = 0; i < metrics.size(); ++i) {
    const std::string where = "AlgorithmSpecification.MetricDefinitions[" + std::to_string(i) + "]";
    const std::string metric = metrics[i].is_object() ? metrics[i].value("Name", "") : "";
    auto re = CompileMetricRegex(metrics[i].is_object() ? metrics[i].value("Regex", "") : "");
    if (!re->ok())
      return InvalidArgument(where + " (Name '" + metric + "'): the Regex does not compile: " + re->error());
    if (re->NumberOfCapturingGroups() < 1)
      return InvalidArgument(where + " (Name '" + metric + "'): the Regex has no capturing group, so it cannot "
                             "capture the metric's value; put the number in parentheses, e.g. loss=([0-9.]+)");
  }
  auto hps = req.value("HyperParameters", json::object());
  bool has_entry = spec.contains("ContainerEntrypoint") && !spec["ContainerEntrypoint"].empty();
  bool script = hps.contains("sagemaker_program");
  // An image runs its own entry point (`train`); an image this host maps to its own software has none.
  const std::string image = spec.contains("TrainingImage") && spec["TrainingImage"].is_string()
                                ? spec["TrainingImage"].get<std::string>() : "";
  const bool host_software = IsHostImage(config.host_images, image);
  if (!has_entry && !script && host_software)
    return InvalidArgument(
        "AlgorithmSpecification.ContainerEntrypoint: required unless HyperParameters.sagemaker_program selects "
        "script mode (TrainingImage '" + image + "' runs with this host's software (executor.host_images), "
        "which has no entry point of its own)");
  // A path reference names a host file, which only executor.image_dirs may hold (docs/images.md).
  if (!host_software)
    if (auto ref = exec::image::ParseImageReference(image); ref.ok())
      if (Status where = exec::image::CheckImageLocation(*ref, config.image_dirs); !where.ok())
        return InvalidArgument("AlgorithmSpecification.TrainingImage: " + where.message());
  if (spec.contains("AlgorithmName") && !spec["AlgorithmName"].is_null())
    return InvalidArgument("AlgorithmSpecification.AlgorithmName: built-in and marketplace algorithms are not available here");
  if (script && hps.contains("sagemaker_submit_directory"))
    TY_RETURN_IF_ERROR(CheckS3Uri("HyperParameters.sagemaker_submit_directory (an s3://bucket/key URI of a tar.gz)",
                                  Unquote(hps["sagemaker_submit_directory"].get<std::string>()), KeyUse::kObject));
  {
    // The distributed launch the hyperparameters ask for (docs/distributed.md).
    std::map<std::string, std::string> given;
    if (hps.is_object())
      for (const auto& [k, v] : hps.items())
        if (v.is_string()) given[k] = v.get<std::string>();
    if (auto dist = exec::ParseDistribution(given); !dist.ok()) return dist.status();
  }
  // The variables the server sets are its own (docs/security.md, "The job's environment").
  if (const json env = req.value("Environment", json::object()); env.is_object())
    for (const auto& item : env.items())
      if (const std::string rule = exec::ReservedEnvironmentRule(item.key()); !rule.empty())
        return InvalidArgument("Environment: the key '" + item.key() + "' is reserved: " + rule);
  const json rc = req.value("ResourceConfig", json::object());
  if (rc.contains("InstanceGroups") && !rc["InstanceGroups"].empty())
    return InvalidArgument("ResourceConfig.InstanceGroups: heterogeneous clusters are not supported yet; use InstanceType and InstanceCount");
  std::string type = rc.value("InstanceType", "");
  int64_t count = rc.value("InstanceCount", int64_t{1});
  if (type.empty()) return InvalidArgument("ResourceConfig.InstanceType is required");
  if (count < 1) return InvalidArgument("ResourceConfig.InstanceCount must be at least 1");
  if (req.value("EnableNetworkIsolation", false)) {
    if (sandbox != "bwrap")
      return InvalidArgument("EnableNetworkIsolation: this host runs jobs without a sandbox (executor.sandbox = \"none\" "
                             "or bubblewrap unavailable), which cannot cut a job off the network");
    if (count > 1)
      return InvalidArgument("EnableNetworkIsolation: a network-isolated job runs each instance without a network, so "
                             "its instances could not reach each other; use ResourceConfig.InstanceCount 1");
  }
  // Every instance of an attempt on this host has a storage volume of VolumeSizeInGB, allocated
  // in full above the data directory's reserve (exec/local/volume.h). Volumes that could not fit
  // even on an empty disk are refused now, rather than waiting for capacity that never comes.
  if (sandbox == "bwrap" && config.executor_kind == "local" && ::geteuid() == 0) {
    const int64_t gb = rc.value("VolumeSizeInGB", int64_t{30});
    struct statvfs fs {};
    if (gb > 0 && ::statvfs(config.data_dir.c_str(), &fs) == 0) {
      const int64_t disk = static_cast<int64_t>(fs.f_blocks) * static_cast<int64_t>(fs.f_frsize);
      const int64_t room = disk - (std::max<int64_t>(0, config.data_dir_reserve_mib) << 20);
      if (count * (gb << 30) > room)
        return InvalidArgument("ResourceConfig.VolumeSizeInGB: " + std::to_string(count) + " instance(s) x " +
                               std::to_string(gb) + " GB can never fit on this host: each instance's volume is "
                               "allocated in full, and the data directory's file system holds " +
                               std::to_string(disk >> 30) + " GiB in all, " + std::to_string(room >> 30) +
                               " GiB above [server] data_dir_reserve_mib");
    }
  }
  const InstanceTypeSpec* it = config.FindInstanceType(type);
  int64_t offered = it ? it->count : 0;
  const bool spot_request = req.contains("EnableManagedSpotTraining") && req["EnableManagedSpotTraining"] == true;
  if (count > offered && !spot_request)
    return LimitExceeded("The account-level service limit '" + type + " for training job usage' is " +
                         std::to_string(offered) + " Instances, with current utilization of 0 Instances and a "
                         "request delta of " + std::to_string(count) + " Instances. This host's instance "
                         "catalogue sets the limit (see [[instance_types]] in the configuration).");
  TY_RETURN_IF_ERROR(CheckS3Uri("OutputDataConfig.S3OutputPath",
                                req.value("OutputDataConfig", json::object()).value("S3OutputPath", ""), KeyUse::kPrefix));
  std::string compression = req.value("OutputDataConfig", json::object()).value("CompressionType", "GZIP");
  if (compression != "GZIP" && compression != "NONE")
    return InvalidArgument("OutputDataConfig.CompressionType must be GZIP or NONE, not '" + compression + "'");
  auto channels = req.value("InputDataConfig", json::array());
  std::set<std::string> names;
  for (size_t i = 0; i < channels.size(); ++i) {
    std::string where = "InputDataConfig[" + std::to_string(i) + "]";
    const json& ch = channels[i];
    const std::string name = ch.value("ChannelName", "");
    // The channel's files are staged in /opt/ml/input/data/<ChannelName>/: "." and ".." match
    // SageMaker's pattern but would put them beside it.
    static const RE2 kChannelName("[A-Za-z0-9.\\-_]{1,64}");
    if (!RE2::FullMatch(name, kChannelName) || name == "." || name == "..")
      return InvalidArgument(where + ".ChannelName '" + name + "' must be 1 to 64 letters, digits, '.', '-' or '_', "
                             "and not '.' or '..' (it names a folder under /opt/ml/input/data/)");
    if (!names.insert(name).second) return InvalidArgument(where + ".ChannelName '" + name + "' is used twice");
    const json ds = ch.value("DataSource", json::object());
    std::string mode = ch.value("InputMode", spec.value("TrainingInputMode", "File"));
    if (mode != "File" && mode != "FastFile")
      return InvalidArgument(where + ".InputMode: " + mode + " mode is not supported here; use File or FastFile");
    if (ds.contains("FileSystemDataSource")) {
      const json f = ds["FileSystemDataSource"];
      std::string id = f.value("FileSystemId", "");
      if (file_system_path(id).empty())
        return InvalidArgument(where + ".DataSource.FileSystemDataSource.FileSystemId: '" + id +
                               "' is not a file system of this host (see [file_systems] in the configuration)");
      std::string access = f.value("FileSystemAccessMode", "");
      if (access != "ro" && access != "rw")
        return InvalidArgument(where + ".DataSource.FileSystemDataSource.FileSystemAccessMode must be ro or rw");
      std::string type = f.value("FileSystemType", "");
      if (type != "EFS" && type != "FSxLustre")
        return InvalidArgument(where + ".DataSource.FileSystemDataSource.FileSystemType must be EFS or FSxLustre");
      std::string dir = f.value("DirectoryPath", "");
      if (dir.empty() || dir.front() != '/')
        return InvalidArgument(where + ".DataSource.FileSystemDataSource.DirectoryPath must be an absolute path");
      for (const auto& seg : Split(dir, '/'))
        if (seg == "..") return InvalidArgument(where + ".DataSource.FileSystemDataSource.DirectoryPath must not contain '..'");
      if (mode != "File")
        return InvalidArgument(where + ".InputMode: FileSystemDataSource channels must use File mode");
      continue;
    }
    if (!ds.contains("S3DataSource"))
      return InvalidArgument(where + ".DataSource: S3DataSource or FileSystemDataSource is required");
    const json s3 = ds["S3DataSource"];
    std::string type = s3.value("S3DataType", "");
    if (type != "S3Prefix" && type != "ManifestFile")
      return InvalidArgument(where + ".DataSource.S3DataSource.S3DataType: '" + type +
                             "' is not supported here; use S3Prefix or ManifestFile");
    TY_RETURN_IF_ERROR(CheckS3Uri(where + ".DataSource.S3DataSource.S3Uri", s3.value("S3Uri", ""),
                                  type == "ManifestFile" ? KeyUse::kObject : KeyUse::kPrefix));
    for (const char* unsupported : {"AttributeNames", "InstanceGroupNames"})
      if (s3.contains(unsupported) && !s3[unsupported].empty())
        return InvalidArgument(where + ".DataSource.S3DataSource." + unsupported + " is not supported here");
    std::string dist = s3.value("S3DataDistributionType", "FullyReplicated");
    if (dist != "FullyReplicated" && dist != "ShardedByS3Key")
      return InvalidArgument(where + ".DataSource.S3DataSource.S3DataDistributionType must be FullyReplicated or ShardedByS3Key");
    if (mode == "FastFile" && type != "S3Prefix")
      return InvalidArgument(where + ".InputMode: FastFile mode supports S3DataType S3Prefix only");
    if (ch.contains("ShuffleConfig") && !ch["ShuffleConfig"].is_null() &&
        !ch["ShuffleConfig"].value("Seed", json()).is_number_integer())
      return InvalidArgument(where + ".ShuffleConfig.Seed is required and must be an integer");
    if (ch.value("CompressionType", "None") != "None")
      return InvalidArgument(where + ".CompressionType: only Pipe mode reads compressed input; use None");
  }
  if (req.contains("CheckpointConfig") && !req["CheckpointConfig"].is_null()) {
    TY_RETURN_IF_ERROR(CheckS3Uri("CheckpointConfig.S3Uri", req["CheckpointConfig"].value("S3Uri", ""), KeyUse::kPrefix));
    std::string lp = req["CheckpointConfig"].value("LocalPath", "/opt/ml/checkpoints");
    if (lp.rfind("/opt/ml/", 0) != 0 || lp.size() <= 8 || lp.find("/../") != std::string::npos ||
        EndsWith(lp, "/.."))
      return InvalidArgument("CheckpointConfig.LocalPath must be a directory under /opt/ml/ on this host, not '" + lp + "'");
  }
  TY_RETURN_IF_ERROR(CheckStoppingCondition(req));
  if (req.contains("RetryStrategy") && !req["RetryStrategy"].is_null()) {
    const json& r = req["RetryStrategy"];
    const json n = r.is_object() && r.contains("MaximumRetryAttempts") ? r["MaximumRetryAttempts"] : json();
    if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > 30)
      return InvalidArgument("RetryStrategy.MaximumRetryAttempts is required and must be an integer between 1 and 30, not " +
                             (n.is_null() ? std::string("absent") : n.dump()));
  }
  if (req.contains("EnableManagedSpotTraining") && !req["EnableManagedSpotTraining"].is_boolean())
    return InvalidArgument("EnableManagedSpotTraining must be a boolean");
  if (req.value("EnableManagedSpotTraining", false)) {
    // Managed spot (docs/spot.md).
    if (req.value("StoppingCondition", json::object()).value("MaxWaitTimeInSeconds", json()).is_null())
      return InvalidArgument("StoppingCondition.MaxWaitTimeInSeconds is required when EnableManagedSpotTraining is true "
                             "(the time to wait for spot capacity plus the run time)");
    if (KeepAliveOf(req) > 0)
      return InvalidArgument("ResourceConfig.KeepAlivePeriodInSeconds: managed spot training cannot use warm pools");
    const int64_t spot = it ? it->spot_count : 0;
    if (count > spot)
      return LimitExceeded("The account-level service limit '" + type + " for spot training job usage' is " +
                           std::to_string(spot) + " Instances, with current utilization of 0 Instances and a request "
                           "delta of " + std::to_string(count) + " Instances. This host's instance catalogue sets the "
                           "limit (spot_count under [[instance_types]] in the configuration).");
  }
  {
    auto ladder = ParseLadder(RequestTags(req), {type, spot_request}, count, config);
    if (!ladder.ok()) return InvalidArgument("Tags: " + ladder.status().message());
    if (!ladder->rungs.empty() && KeepAliveOf(req) > 0)
      return InvalidArgument("ResourceConfig.KeepAlivePeriodInSeconds: a job with a capacity ladder (tag " +
                             std::string(kLadderTag) + ") cannot use warm pools");
  }
  // Service-job payloads reach here without model validation, so the range is checked again.
  if (rc.contains("KeepAlivePeriodInSeconds") && !rc["KeepAlivePeriodInSeconds"].is_null()) {
    const json& k = rc["KeepAlivePeriodInSeconds"];
    if (!k.is_number_integer() || k.get<int64_t>() < 0 || k.get<int64_t>() > kMaxKeepAliveSeconds)
      return InvalidArgument("ResourceConfig.KeepAlivePeriodInSeconds must be an integer between 0 and " +
                             std::to_string(kMaxKeepAliveSeconds) + ", not " + k.dump());
  }
  return Status::Ok();
}

StatusOr<TrainingJob> Controller::CreateTrainingJob(const CreateTrainingJobCommand& cmd) {
  const TrainingRequest& req = cmd.request;
  TrainingJob tj;
  tj.name = req.name;
  tj.arn = Arn("sagemaker", "training-job/" + ToLower(tj.name));
  tj.owner = cmd.owner;
  tj.request_json = req.json;
  tj.tags = req.tags;
  if (!ParseTrainingTerms(tj.request_json, &tj.terms)) return Internal("CreateTrainingJob: the accepted request is not a JSON object");
  tj.instance_type = req.instance_type;
  tj.instance_count = req.instance_count;
  tj.keep_alive_seconds = req.keep_alive_seconds;
  tj.managed_spot = req.managed_spot;
  tj.max_wait_seconds = req.max_wait_seconds;
  tj.capacity_ladder = cmd.capacity_ladder;
  tj.fallback_after_interruptions = cmd.fallback_after_interruptions;
  return Execute<TrainingJob>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<TrainingJob> {
    if (state_.FindTrainingJob(tj.name))
      return AlreadyExists("Training job names must be unique within an AWS account and region, and a training job with this name already exists (" + tj.arn + ")");
    tj.seq = state_.next_seq++;
    tj.creation_time = tj.last_modified_time = t.now;
    tj.secondary_status = SecondaryStatus::kStarting;
    tj.transitions.push_back({SecondaryStatus::kStarting, t.now, 0, "Starting the training job."});
    state_.AddTrainingJob(tj);
    t.training_jobs.insert(tj.name);
    TrainingJobEvent(t, tj.name, SecondaryStatus::kStarting, "Starting the training job.", t.now);
    t.reschedule = true;
    return tj;
  });
}

Status Controller::StopTrainingJob(const std::string& name) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    TrainingJob* found = state_.FindTrainingJob(name);
    if (!found) return NotFound("Requested resource not found: training job " + name);
    TrainingJob& tj = *found;
    if (tj.status != TrainingJobStatus::kInProgress)
      return FailedPrecondition("The training job " + name + " is " + ToWire(tj.status) + " and cannot be stopped");
    RequestStop(t, tj, StopCause::kUser, "Stopping the training job.");
    if (!tj.launched) {
      // Never launched: nothing to stop, it is Stopped at once.
      exec::AttemptEvent e;
      e.attempt_id = tj.name;
      e.phase = exec::Phase::kExited;
      e.at = t.now;
      e.stopped = true;
      ApplyEvent(t, e);
    }
    return Status::Ok();
  });
}

namespace {
// The TrainingJobStatus a SecondaryStatus belongs to (SageMaker API reference, DescribeTrainingJob).
TrainingJobStatus PrimaryStatusOf(SecondaryStatus secondary) {
  switch (secondary) {
    case SecondaryStatus::kCompleted: return TrainingJobStatus::kCompleted;
    case SecondaryStatus::kFailed: return TrainingJobStatus::kFailed;
    case SecondaryStatus::kStopping: return TrainingJobStatus::kStopping;
    case SecondaryStatus::kStopped:
    case SecondaryStatus::kMaxRuntimeExceeded:
    case SecondaryStatus::kMaxWaitTimeExceeded: return TrainingJobStatus::kStopped;
    default: return TrainingJobStatus::kInProgress;
  }
}
}  // namespace

void Controller::AddTransition(Turn& t, TrainingJob& tj, SecondaryStatus secondary, const std::string& message,
                               EpochMs at) {
  tj.secondary_status = secondary;
  tj.last_modified_time = t.now;
  t.training_jobs.insert(tj.name);
  // Starting again (created, then launching the instances) only updates its message.
  if (secondary == SecondaryStatus::kStarting && !tj.transitions.empty() && tj.transitions.back().end == 0 &&
      tj.transitions.back().status == secondary) {
    tj.transitions.back().message = message;
    return;
  }
  if (!tj.transitions.empty() && tj.transitions.back().end == 0) tj.transitions.back().end = at;
  tj.transitions.push_back({secondary, at, 0, message});
  TrainingJobEvent(t, tj.name, secondary, message, at);
}

void Controller::TrainingJobEvent(Turn& t, const std::string& name, SecondaryStatus secondary,
                                  const std::string& message, EpochMs at) {
  EventTrigger e;
  e.kind = EventTrigger::Kind::kTrainingJobStateChange;
  e.name = name;
  e.status = ToWire(PrimaryStatusOf(secondary));
  e.secondary = ToWire(secondary);
  e.reason = message;
  e.at = at;
  t.events.push_back(std::move(e));
}

void Controller::RequestStop(Turn& t, TrainingJob& tj, StopCause cause, const std::string& message,
                             int grace_seconds) {
  tj.stop_requested = true;
  tj.stop_cause = cause;
  tj.status = TrainingJobStatus::kStopping;
  AddTransition(t, tj, SecondaryStatus::kStopping, message, t.now);
  t.reschedule = true;
  if (tj.launched) {
    t.stops.emplace_back(tj.name, grace_seconds < 0 ? config_.stop_grace_seconds : grace_seconds);
  } else {
    // Nothing runs (never launched, or an interrupted spot job waiting for capacity): it ends now.
    exec::AttemptEvent e;
    e.attempt_id = tj.name;
    e.phase = exec::Phase::kExited;
    e.at = t.now;
    e.stopped = true;
    deferred_events_.push_back(e);
  }
}

void Controller::ReleaseCapacity(TrainingJob& tj) {
  if (tj.launched) state_.host_in_use[CapacityKey(tj.instance_type, tj.on_spot)] -= tj.instance_count;
}

void Controller::LaunchTrainingJob(Turn& t, TrainingJob& tj, bool spot) {
  const Status role = TrainingJobRole(tj, t.now);
  tj.launched = true;
  tj.run_launched_at = t.now;
  PriceRun(tj, spot);
  if (tj.interruptions > 0) {
    // The interrupted run's files go after the commit, before the start; its checkpoints were
    // uploaded when it ended.
    DropTail(t, tj.name);
    t.discards.push_back(tj.name);
    tj.stop_cause = StopCause::kNone;
  }
  std::string message;
  if (tj.on_spot || tj.interruptions > 0) {
    message = tj.interruptions == 0
                  ? "Launching requested spot instances on this host."
                  : "Spot capacity is available again: restarting after interruption " + std::to_string(tj.interruptions) +
                        (tj.terms.checkpoints
                             ? "; the checkpoints are copied back from S3 before training resumes."
                             : "; the job has no CheckpointConfig, so it starts from scratch.");
  } else if (role.ok()) {  // a refused attempt takes no warm pool and moves none aside
    message = AttachWarmPool(t, tj);
    if (tj.reused_from_job.empty()) MakeRoom(t, tj.instance_type, tj.instance_count, tj.name);
  } else {
    message = "Starting the training job.";
  }
  state_.host_in_use[CapacityKey(tj.instance_type, tj.on_spot)] += tj.instance_count;
  if (!tj.capacity_ladder.empty()) {
    const Ladder ladder = LadderFromText(tj.capacity_ladder, tj.fallback_after_interruptions);
    message += " Capacity ladder: rung " + std::to_string(tj.rung + 1) + " of " + std::to_string(ladder.rungs.size()) +
               " (" + tj.instance_type + (tj.on_spot ? ", spot)" : ", on-demand)") +
               (tj.rung == 0 ? "." : tj.interruptions >= tj.fallback_after_interruptions && !tj.on_spot
                                         ? ": spot rungs are skipped after " + std::to_string(tj.interruptions) + " interruptions."
                                         : ": the rungs before it have no free capacity.");
  }
  AddTransition(t, tj, SecondaryStatus::kStarting, message, t.now);
  if (!role.ok()) {
    RefuseAttempt(tj.name, role, t.now);
    return;
  }
  MintRoleSession(tj, t.now);
  t.starts.emplace_back(tj.name, BuildAttemptSpec(tj));
}

namespace {
std::string RoleArnOf(const TrainingJob& tj) {
  json req = json::parse(tj.request_json, nullptr, false);
  return req.is_object() ? req.value("RoleArn", "") : "";
}
}  // namespace

Status Controller::TrainingJobRole(const TrainingJob& tj, EpochMs now) const {
  auto dir = directory();
  if (dir->roles.empty()) return Status::Ok();  // no role to take: the request is not parsed
  return MayRunAsRole(*dir, config_.account_id, tj.owner, RoleArnOf(tj), kSageMakerPrincipal, now);
}

void Controller::RefuseAttempt(const std::string& attempt_id, const Status& why, EpochMs now) {
  spdlog::warn("attempt {} refused its role: {}", attempt_id, why.message());
  exec::AttemptEvent e;
  e.attempt_id = attempt_id;
  e.phase = exec::Phase::kExited;
  e.at = now;
  e.exit_code = 1;
  e.failure_kind = exec::FailureKind::kClient;
  e.failure_reason = "ClientError: the job may not run as its role: " + why.message();
  deferred_events_.push_back(std::move(e));
}

void Controller::MintRoleSession(TrainingJob& tj, EpochMs now) {
  const std::string role = RoleNameOf(RoleArnOf(tj), config_.account_id);
  if (role.empty() || !state_.principals.roles.count(role)) return;
  // Drawn once per job and stored with it (the launch's commit), so that a re-adopted attempt's
  // environment still holds a token the server knows.
  if (tj.credentials_token.empty()) tj.credentials_token = RandomAlnum(48, false);
  role_sessions_.Mint(tj.name, role, config_.account_id, now);
  role_sessions_.SetBearer(tj.name, tj.credentials_token);
}

void Controller::StartPendingTrainingJobs(Turn& t) {
  // Jobs created through CreateTrainingJob wait for host capacity in creation order, ahead of
  // queued service jobs (they are already InProgress in SageMaker's terms).
  std::vector<std::string> overdue, out_of_wait;
  for (const auto& [seq, name] : state_.live_training_jobs) {
    TrainingJob* tj = &state_.training_jobs.at(name);
    // MaxWaitTimeInSeconds: a spot job's time waiting for capacity plus its run time (SageMaker's managed spot training).
    if (tj->managed_spot && tj->status == TrainingJobStatus::kInProgress && tj->max_wait_seconds > 0 &&
        t.now - tj->creation_time >= tj->max_wait_seconds * 1000) {
      out_of_wait.push_back(name);
      continue;
    }
    if (tj->launched || tj->status != TrainingJobStatus::kInProgress) continue;
    // Service jobs are placed by the scheduling pass; an interrupted spot run of one comes back here.
    const bool interrupted = tj->stop_cause == StopCause::kInterrupt;
    if (!tj->service_job_id.empty() && !interrupted) continue;
    // The first rung of its ladder with room (its own type when it has no ladder).
    const Ladder ladder = tj->capacity_ladder.empty()
                              ? Ladder{{Rung{tj->instance_type, tj->managed_spot}}, 2}
                              : LadderFromText(tj->capacity_ladder, tj->fallback_after_interruptions);
    if (disk_low_) {
      const std::string reason = "Waiting: " + DiskReserveReason() + ".";
      if (tj->secondary_status != SecondaryStatus::kPending || tj->transitions.empty() || tj->transitions.back().message != reason)
        AddTransition(t, *tj, SecondaryStatus::kPending, reason, t.now);
      continue;
    }
    // PickRung calls this before it returns, under this turn's exclusive lock; the analysis cannot
    // follow a lambda through a template argument.
    const int rung = PickRung(ladder, tj->instance_count, tj->interruptions,
                              [&](const std::string& key) NO_THREAD_SAFETY_ANALYSIS {
      return HostCapacity(config_, state_, key) - state_.host_in_use[key];
    });
    if (rung >= 0) {
      tj->rung = rung;
      tj->instance_type = ladder.rungs[static_cast<size_t>(rung)].type;
      LaunchTrainingJob(t, *tj, ladder.rungs[static_cast<size_t>(rung)].spot);
      continue;
    }
    // Until spot capacity frees, a spot job stays Starting (never launched) or Interrupted.
    if (tj->managed_spot || interrupted) continue;
    // The request is parsed only once a job has pended for the smallest MaxPendingTimeInSeconds.
    if (t.now - tj->creation_time >= kMinMaxPendingSeconds * 1000) {
      const int64_t max_pending = tj->terms.max_pending_seconds;
      if (max_pending > 0 && t.now - tj->creation_time >= max_pending * 1000) {
        overdue.push_back(name);
        continue;
      }
    }
    int64_t free = HostCapacity(config_, state_, tj->instance_type) - state_.host_in_use[tj->instance_type];
    if (tj->secondary_status != SecondaryStatus::kPending) {
      AddTransition(t, *tj, SecondaryStatus::kPending, "Waiting for capacity: " + std::to_string(std::max<int64_t>(0, free)) +
                                            " free " + tj->instance_type + " instances on this host.", t.now);
    }
  }
  for (const auto& name : out_of_wait)
    RequestStop(t, state_.training_jobs.at(name), StopCause::kMaxWait,
                "Stopping: the job reached MaxWaitTimeInSeconds (time waiting for spot capacity plus run time).");
  // MaxPendingTimeInSeconds: a job that waited that long for capacity is Stopped without running.
  for (const auto& name : overdue) {
    TrainingJob& tj = state_.training_jobs.at(name);
    RequestStop(t, tj, StopCause::kPending, "Stopping: the training job waited longer than MaxPendingTimeInSeconds for capacity.");
    exec::AttemptEvent e;
    e.attempt_id = name;
    e.phase = exec::Phase::kExited;
    e.at = t.now;
    e.stopped = true;
    ApplyEvent(t, e);
  }
}

exec::AttemptSpec Controller::BuildAttemptSpec(const TrainingJob& tj) const {
  // The request passed CheckTrainingRequest and the service model: members have their types.
  // Only the job's terms go in; how this host runs it is the executor's (LocalExecutor::Options).
  json req = json::parse(tj.request_json);
  const json alg = req.value("AlgorithmSpecification", json::object());
  const InstanceTypeSpec* it = config_.FindInstanceType(tj.instance_type);
  auto as_string = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  exec::AttemptSpec spec;
  spec.attempt_id = tj.name;
  spec.training_job_name = tj.name;
  spec.training_job_arn = tj.arn;
  spec.region = config_.region;
  spec.instance_type = tj.instance_type;
  spec.instance_count = static_cast<int>(tj.instance_count);
  spec.vcpus = it ? it->vcpus : 1;
  spec.gpus = it ? it->gpus : 0;
  spec.memory_mib = it ? it->memory_mib : 1024;
  spec.volume_size_gb = req.value("ResourceConfig", json::object()).value("VolumeSizeInGB", int64_t{30});
  spec.setup_command = it ? it->setup_command : "";
  spec.network_isolation = req.value("EnableNetworkIsolation", false);
  for (auto& a : alg.value("ContainerEntrypoint", json::array())) spec.command.push_back(as_string(a));
  for (auto& a : alg.value("ContainerArguments", json::array())) spec.command.push_back(as_string(a));
  // The image runs `train`, ContainerEntrypoint in place of its Entrypoint, or its Entrypoint with
  // ContainerArguments in place of `train` (docs/images.md); the executor decides which images
  // run with the host's software.
  if (alg.contains("TrainingImage") && alg["TrainingImage"].is_string()) spec.image = alg["TrainingImage"].get<std::string>();
  if (alg.value("ContainerEntrypoint", json::array()).empty() && !spec.command.empty())
    spec.image_command = exec::ImageCommand::kCmd;
  const json hps = req.value("HyperParameters", json::object());
  for (auto& [k, v] : hps.items()) spec.hyperparameters[k] = as_string(v);
  if (spec.command.empty() && (spec.image.empty() || spec.hyperparameters.count("sagemaker_program"))) {
    auto hp = [&](const char* k) { auto f = spec.hyperparameters.find(k); return f == spec.hyperparameters.end() ? "" : Unquote(f->second); };
    spec.script_mode = exec::ScriptMode{hp("sagemaker_program"), hp("sagemaker_submit_directory")};
  }
  const json env = req.value("Environment", json::object());
  for (auto& [k, v] : env.items()) spec.environment[k] = as_string(v);
  if (!tj.service_job_id.empty()) {
    auto seq = state_.job_seq_by_id.find(tj.service_job_id);
    if (seq != state_.job_seq_by_id.end()) {
      const ServiceJobState& js = state_.jobs.at(seq->second);
      spec.extra_env["AWS_BATCH_JOB_ID"] = js.job.id;
      spec.extra_env["AWS_BATCH_JOB_ARN"] = js.job.arn;
      spec.extra_env["AWS_BATCH_JOB_NAME"] = js.job.name;
      spec.extra_env["AWS_BATCH_JQ_NAME"] = js.job.queue;
      spec.extra_env["AWS_BATCH_SE_NAME"] = js.service_environment;
      spec.extra_env["AWS_BATCH_JOB_ATTEMPT"] = std::to_string(tj.attempt_number);
    }
  }
  // A role job: the AWS SDKs' container credentials provider fetches the role's session from this
  // server with the attempt's bearer token, and calls go back to this server (docs/security.md,
  // "Roles for jobs"). The sandbox shares the host's network unless EnableNetworkIsolation.
  AddRoleEnvironment(spec, tj.credentials_token);
  for (auto& ch : req.value("InputDataConfig", json::array())) {
    exec::Channel c;
    c.name = ch["ChannelName"].get<std::string>();
    c.content_type = ch.value("ContentType", "");
    c.input_mode = ch.value("InputMode", alg.value("TrainingInputMode", "File"));
    c.record_wrapper = ch.value("RecordWrapperType", "None");
    if (ch["DataSource"].contains("FileSystemDataSource")) {
      const json f = ch["DataSource"]["FileSystemDataSource"];
      c.file_system = exec::FileSystemSource{f.value("FileSystemId", ""), f.value("DirectoryPath", "/"),
                                             f.value("FileSystemAccessMode", "ro") == "ro"};
    } else {
      const json s3 = ch["DataSource"]["S3DataSource"];
      c.uri = s3["S3Uri"].get<std::string>();
      c.data_type = s3.value("S3DataType", "S3Prefix");
      c.distribution = s3.value("S3DataDistributionType", "FullyReplicated");
      if (ch.contains("ShuffleConfig") && ch["ShuffleConfig"].is_object() && ch["ShuffleConfig"].value("Seed", json()).is_number_integer())
        c.shuffle_seed = ch["ShuffleConfig"]["Seed"].get<int64_t>();
    }
    spec.channels.push_back(std::move(c));
  }
  const json out = req["OutputDataConfig"];
  std::string prefix = out.value("S3OutputPath", "");
  while (EndsWith(prefix, "/")) prefix.pop_back();
  spec.output_prefix = prefix + "/" + tj.name + "/output/";
  spec.compress = out.value("CompressionType", "GZIP") != "NONE";
  if (req.contains("CheckpointConfig") && !req["CheckpointConfig"].is_null())
    spec.checkpoint = exec::CheckpointConfig{req["CheckpointConfig"]["S3Uri"].get<std::string>(),
                                             req["CheckpointConfig"].value("LocalPath", "/opt/ml/checkpoints")};
  spec.data_access = JobDataAccess(tj, req.value("RoleArn", ""));
  // The instance workspace (docs/warm-pools.md): kept in the pool's directory when the job has a
  // warm pool, else in the attempt's own directory.
  if (!tj.warm_pool_id.empty())
    spec.warm_pool = exec::WarmPoolSpec{tj.warm_pool_id, WarmPoolDir(tj.warm_pool_id), tj.reused_from_job};
  spec.stop_grace_seconds = config_.stop_grace_seconds;
  spec.max_runtime_seconds = std::max<int64_t>(1, RemainingRuntimeSeconds(tj, clock_.now_ms()));
  return spec;
}

std::optional<exec::DataAccess> Controller::JobDataAccess(const TrainingJob& tj, const std::string& role_arn) const {
  const JobPrincipal p = JobPrincipalOf(*directory(), config_.account_id, tj.owner, role_arn, tj.name);
  if (p.unrestricted) return std::nullopt;
  // A principal this region does not know, on a server joined to regions, is one whose request
  // entered through a peer that holds its user or role: its data was checked at create with the
  // policies the forwarded request carried, and there is nothing here to check it against again
  // (docs/security.md, "Jobs' data").
  if (!p.entry && (config_.regions.enabled() || !config_.regions.peer_secret.empty())) return std::nullopt;
  exec::DataAccess access;
  access.principal = PrincipalKeysOf(p.entry.get(), p.arn, p.username);
  if (p.entry)  // documents[i] is the text of policies[i]
    for (size_t i = 0; i < p.entry->policies.size(); ++i)
      access.policies.push_back({p.entry->policies[i]->name, p.entry->documents[i]});
  return access;
}

// ------------------------------------------------------------------------------------------
// Executor events.

void Controller::ReadoptAttempts() {
  for (const auto& [seq, name] : state_.live_training_jobs) {
    TrainingJob& tj = state_.training_jobs.at(name);
    if (!tj.launched) continue;
    // Sessions are not stored: an attempt that outlived the server gets a fresh one (its bearer
    // token, in its environment, was stored with the job).
    MintRoleSession(tj, clock_.now_ms());
    Status st = executor_->Adopt(name);
    if (st.ok()) {
      spdlog::info("re-adopted running attempt {}", name);
      // A stop committed just before the server died may never have reached the supervisor;
      // asking again is harmless (the supervisor keeps its first deadline).
      Status asked = tj.stop_requested ? executor_->Stop(name, config_.stop_grace_seconds)
                     : tj.stop_cause == StopCause::kInterrupt ? executor_->Interrupt(name, config_.spot_notice_seconds)
                                                    : Status::Ok();
      if (!asked.ok()) spdlog::warn("cannot ask attempt {} again to stop: {}", name, asked.message());
      continue;
    }
    // The launch was committed but the executor never started it (the server died in between):
    // start it now. It cannot be running, so this never runs an attempt twice.
    spdlog::warn("attempt {} was never started ({}); starting it now", name, st.message());
    if (Status cleared = executor_->Discard(name); !cleared.ok())
      spdlog::warn("cannot clear the files of attempt {}: {}", name, cleared.message());
    Status started = executor_->Start(name, BuildAttemptSpec(tj));
    if (!started.ok()) spdlog::error("cannot start attempt {}: {}", name, started.message());
  }
}

void Controller::ApplyExecutorEvents(Turn& t, const std::vector<exec::AttemptEvent>& polled) {
  std::vector<exec::AttemptEvent> deferred;
  deferred.swap(deferred_events_);
  if (deferred.empty() && polled.empty()) return;
  // What an executor says becomes a job's FailureReason, statusReason and transitions: the data
  // directory is named in none of them (the executors leave it out; this is the backstop).
  std::vector<exec::RedactedPath> paths;
  exec::AddRedactedPath(&paths, data_dir_, "<data dir>");
  for (const std::vector<exec::AttemptEvent>* events : {static_cast<const std::vector<exec::AttemptEvent>*>(&deferred), &polled})
    for (exec::AttemptEvent e : *events) {
      for (std::string* text : {&e.message, &e.detail, &e.failure_reason}) *text = exec::RedactPaths(std::move(*text), paths);
      ApplyEvent(t, e);
    }
}

void Controller::CountPreemptionLoss(ServiceJob& job, const TrainingJob& tj, EpochMs end) const {
  EpochMs since = std::max(tj.creation_time, tj.last_checkpoint_time);  // placed, or last checkpointed
  if (since <= 0 || end <= since) return;
  const int64_t instance_ms = (end - since) * tj.instance_count;
  const InstanceTypeSpec* spec = config_.FindInstanceType(tj.instance_type);
  job.preemption_lost_instance_ms += instance_ms;
  job.preemption_lost_gpu_ms += instance_ms * (spec ? spec->gpus : 0);
}

void Controller::ApplyEvent(Turn& t, const exec::AttemptEvent& e) {
  if (ApplyContainerEvent(t, e)) return;
  auto it = state_.training_jobs.find(e.attempt_id);
  if (it == state_.training_jobs.end()) return;
  TrainingJob& tj = it->second;
  if (!IsLive(tj.status)) return;  // already final
  ServiceJobState* js = tj.service_job_id.empty() ? nullptr : state_.FindJob(tj.service_job_id);
  // A spot run that was interrupted reports no more progress either.
  bool stopping = tj.status == TrainingJobStatus::kStopping || tj.stop_cause == StopCause::kInterrupt;

  switch (e.phase) {
    case exec::Phase::kCheckpointed:
      if (e.at > tj.last_checkpoint_time) {
        tj.last_checkpoint_time = e.at;
        t.training_jobs.insert(tj.name);
      }
      return;
    case exec::Phase::kPreparing:
      if (PhaseRank(tj.secondary_status) >= 1) return;
      if (!stopping) {
        AddTransition(t, tj, SecondaryStatus::kDownloading, e.message.empty() ? "Preparing the instances for training and downloading input data." : e.message, e.at);
      }
      tj.training_start_time = e.at;
      t.training_jobs.insert(tj.name);
      if (js && js->job.status == JobStatus::kScheduled) SetJobStatus(t, *js, JobStatus::kStarting, "");
      return;
    case exec::Phase::kTraining:
      if (PhaseRank(tj.secondary_status) >= 2) return;
      if (tj.training_start_time == 0) tj.training_start_time = e.at;
      if (!stopping) {
        // The supervisor's message may add what staging did ("Training in progress. Input data: ...").
        AddTransition(t, tj, SecondaryStatus::kTraining,
                      "Training in progress" + std::string(sandbox_ == "bwrap" ? " (sandboxed)." : " (no sandbox).") + e.detail, e.at);
      }
      t.training_jobs.insert(tj.name);
      if (js) {
        if (js->job.status == JobStatus::kScheduled) SetJobStatus(t, *js, JobStatus::kStarting, "");
        if (js->job.status == JobStatus::kStarting) SetJobStatus(t, *js, JobStatus::kRunning, "");
        if (js->job.started_at == 0) js->job.started_at = e.at;
        // A SageMaker restart of the same training job keeps the Batch attempt (and its timeout clock).
        if (!js->job.attempts.empty() && js->job.attempts.back().started_at == 0) js->job.attempts.back().started_at = e.at;
        t.jobs.insert(js->job.seq);
      }
      return;
    case exec::Phase::kUploading:
      if (PhaseRank(tj.secondary_status) >= 3) return;
      if (!stopping) AddTransition(t, tj, SecondaryStatus::kUploading, "Uploading generated training model.", e.at);
      return;
    case exec::Phase::kExited:
    case exec::Phase::kLost:
      break;
  }
  // The attempt is over: its role's credentials stop working (a restart mints new ones).
  role_sessions_.Revoke(tj.name);

  if (tj.status == TrainingJobStatus::kInProgress && tj.stop_cause == StopCause::kInterrupt && e.phase == exec::Phase::kExited && !e.stopped) {
    // The run ended on its own before the interruption reached it (its processes had exited and
    // the supervisor was uploading, so it never acted on the stop): its outcome stands. Restarting
    // it would run a completed job again (from scratch without checkpoints) and overwrite its model.
    tj.stop_cause = StopCause::kNone;
    stopping = false;
  }
  if (tj.status == TrainingJobStatus::kInProgress && tj.stop_cause == StopCause::kInterrupt) {
    // The interrupted run is over (checkpoints uploaded): the job waits, InProgress/Interrupted,
    // until spot capacity frees (StartPendingTrainingJobs), within MaxWaitTimeInSeconds.
    if (tj.launched) TailJobMetrics(t, tj, INT64_MAX);
    DropTail(t, tj.name);
    ReleaseCapacity(tj);
    CloseRun(tj, e.at);
    const EpochMs since = std::max(tj.run_launched_at, tj.last_checkpoint_time);
    if (since > 0 && e.at > since) {
      const int64_t instance_ms = (e.at - since) * tj.instance_count;
      tj.interruption_lost_instance_ms += instance_ms;
      const InstanceTypeSpec* spec = config_.FindInstanceType(tj.instance_type);
      Telemetry& m = state_.telemetry;
      m.interruption_lost_instance_seconds[tj.instance_type] += static_cast<double>(instance_ms) / 1000.0;
      m.interruption_lost_gpu_seconds[tj.instance_type] += static_cast<double>(instance_ms * (spec ? spec->gpus : 0)) / 1000.0;
    }
    tj.launched = false;
    tj.last_modified_time = t.now;
    t.training_jobs.insert(tj.name);
    t.reschedule = true;
    return;
  }

  const bool infrastructure_failure =
      e.phase == exec::Phase::kLost ||
      (e.exit_code != 0 && !e.stopped && !e.max_runtime_exceeded && e.failure_kind == exec::FailureKind::kInternal);
  if (infrastructure_failure && !stopping && RestartAfterInfrastructureFailure(t, tj, e)) return;

  // Final: the attempt is over.
  if (tj.launched) TailJobMetrics(t, tj, INT64_MAX);  // the last lines of the log count too
  DropTail(t, tj.name);
  ReleaseCapacity(tj);
  if (tj.launched) CloseRun(tj, e.at);
  t.reschedule = true;
  tj.training_end_time = e.at;
  if (e.phase == exec::Phase::kExited && e.model_uploaded) {
    tj.model_artifacts = tj.terms.s3_output_path + "/" + tj.name +
                         (tj.terms.compressed_output ? "/output/model.tar.gz" : "/output/model/");
  }
  if (e.phase == exec::Phase::kLost) {
    tj.status = TrainingJobStatus::kFailed;
    tj.failure_reason = "InternalServerError: " + (e.message.empty() ? "the instance was lost: its supervisor exited without recording an outcome" : e.message);
    AddTransition(t, tj, SecondaryStatus::kFailed, tj.failure_reason, e.at);
  } else if (e.max_runtime_exceeded) {
    tj.status = TrainingJobStatus::kStopped;
    AddTransition(t, tj, SecondaryStatus::kMaxRuntimeExceeded, "Training job runtime exceeded MaxRuntimeInSeconds provided", e.at);
  } else if (tj.stop_cause == StopCause::kPending) {
    tj.status = TrainingJobStatus::kStopped;
    tj.failure_reason = "MaxPendingTimeExceeded: Training job pending time exceeded MaxPendingTimeInSeconds provided";
    AddTransition(t, tj, SecondaryStatus::kStopped, "Training job stopped: pending time exceeded MaxPendingTimeInSeconds provided.", e.at);
  } else if (tj.stop_cause == StopCause::kMaxWait) {
    tj.status = TrainingJobStatus::kStopped;
    AddTransition(t, tj, SecondaryStatus::kMaxWaitTimeExceeded, "Training job exceeded MaxWaitTimeInSeconds provided", e.at);
  } else if (tj.stop_cause == StopCause::kDiskReserve) {
    // CheckDiskReserve stopped it and wrote why; whatever the run recorded as it died (a write
    // that failed, a lost supervisor) is a consequence. Its scratch goes now: the store needs
    // the space to record this.
    tj.status = TrainingJobStatus::kFailed;
    AddTransition(t, tj, SecondaryStatus::kFailed, "Training job failed: " + tj.failure_reason, e.at);
    executor_->Cleanup(tj.name);
    scratch_reclaimed_.insert(tj.name);
  } else if (e.stopped || tj.stop_requested) {
    tj.status = TrainingJobStatus::kStopped;
    AddTransition(t, tj, SecondaryStatus::kStopped, "Training job stopped.", e.at);
  } else if (e.exit_code == 0) {
    tj.status = TrainingJobStatus::kCompleted;
    AddTransition(t, tj, SecondaryStatus::kCompleted, "Training job completed", e.at);
  } else {
    tj.status = TrainingJobStatus::kFailed;
    tj.failure_reason = e.failure_reason.empty()
                            ? "AlgorithmError: the training process exited with code " + std::to_string(e.exit_code)
                            : e.failure_reason;
    if (tj.failure_reason.size() > 1024) tj.failure_reason.resize(1024);
    AddTransition(t, tj, SecondaryStatus::kFailed, "Training job failed: " + tj.failure_reason, e.at);
  }
  if (!tj.transitions.empty()) tj.transitions.back().end = e.at;
  state_.live_training_jobs.erase({tj.seq, tj.name});
  t.training_jobs.insert(tj.name);
  SettleWarmPool(t, tj);
  if (js) FinishServiceJobAttempt(t, *js, tj);
}

bool Controller::RestartAfterInfrastructureFailure(Turn& t, TrainingJob& tj, const exec::AttemptEvent& e) {
  // RetryStrategy.MaximumRetryAttempts (SageMaker API reference): SageMaker retries a training job
  // whose instances failed; an algorithm error is never retried. The infrastructure failures
  // here are a lost run (its supervisor died, or the executor could not start it) and a run that
  // ended with InternalServerError (the object store unreachable, a full disk, a failed instance
  // setup). The executor reports kLost only after it has ended the run's process groups, and
  // kExited only once the run's instances are gone, so the new run never overlaps the old one.
  const int64_t allowed = tj.terms.max_retry_attempts;
  int64_t used = 0;
  for (const auto& tr : tj.transitions)
    if (tr.status == SecondaryStatus::kRestarting) ++used;
  if (used >= allowed) return false;
  if (RemainingRuntimeSeconds(tj, e.at) <= 0) return false;
  DropTail(t, tj.name);
  if (Status st = executor_->Discard(tj.name); !st.ok()) {  // the dead run's files; idempotent
    spdlog::error("cannot clear the lost run of {}: {}", tj.name, st.message());
    return false;
  }
  AddTransition(t, tj, SecondaryStatus::kRestarting,
                "Retrying after an infrastructure failure (retry " + std::to_string(used + 1) + " of " +
                    std::to_string(allowed) + "): " +
                    (e.phase == exec::Phase::kExited ? e.failure_reason
                     : e.message.empty()             ? "the instance was lost"
                                                     : e.message),
                e.at);
  CloseRun(tj, e.at);
  PriceRun(tj, tj.on_spot);
  tj.launched = true;  // it keeps its capacity
  if (Status role = TrainingJobRole(tj, t.now); !role.ok()) {
    RefuseAttempt(tj.name, role, t.now);  // the retry ends at once, as failed, without credentials
    return true;
  }
  MintRoleSession(tj, t.now);
  t.starts.emplace_back(tj.name, BuildAttemptSpec(tj));
  return true;
}

int64_t Controller::RemainingRuntimeSeconds(const TrainingJob& tj, EpochMs now) const {
  // MaxRuntimeInSeconds bounds the total over the runs of one training job (with RetryStrategy,
  // SageMaker API reference): the time already spent downloading, training and uploading counts.
  const int64_t max_runtime = tj.terms.max_runtime_seconds;
  EpochMs spent = 0;
  for (const auto& tr : tj.transitions)
    if (tr.status == SecondaryStatus::kDownloading || tr.status == SecondaryStatus::kTraining || tr.status == SecondaryStatus::kUploading)
      spent += (tr.end ? tr.end : now) - tr.start;
  return max_runtime - spent / 1000;
}

void Controller::FinishServiceJobAttempt(Turn& t, ServiceJobState& js, const TrainingJob& tj) {
  ServiceJob& job = js.job;
  std::string reason;
  if (tj.status == TrainingJobStatus::kCompleted) {
    reason = std::string(kSmPrefix) + "Training job completed";
  } else if (tj.status == TrainingJobStatus::kStopped && tj.secondary_status == SecondaryStatus::kMaxRuntimeExceeded) {
    reason = std::string(kSmPrefix) + "MaxRuntimeExceeded: Training job runtime exceeded MaxRuntimeInSeconds provided";
  } else if (tj.status == TrainingJobStatus::kStopped && tj.secondary_status == SecondaryStatus::kMaxWaitTimeExceeded) {
    reason = std::string(kSmPrefix) + "MaxWaitTimeExceeded: Training job exceeded MaxWaitTimeInSeconds provided";
  } else if (tj.status == TrainingJobStatus::kStopped) {
    reason = std::string(kSmPrefix) + "Training job stopped";
  } else {
    reason = std::string(kSmPrefix) + tj.failure_reason;
  }
  if (!job.attempts.empty()) {
    job.attempts.back().stopped_at = tj.training_end_time;
    job.attempts.back().status_reason = reason;
  }
  if (tj.status == TrainingJobStatus::kCompleted) {
    SetJobStatus(t, js, JobStatus::kSucceeded, reason);
    return;
  }
  if (!job.terminate_reason.empty()) {
    SetJobStatus(t, js, JobStatus::kFailed, job.terminate_reason);
    return;
  }
  if (tj.stop_cause == StopCause::kTimeout) {
    SetJobStatus(t, js, JobStatus::kFailed, "Job attempt duration exceeded timeout");
    return;
  }
  // Insufficient capacity (Batch's service job retries): the training job failed with CapacityError, or a
  // spot job ran out of MaxWaitTimeInSeconds before it ever launched. Retried until capacity
  // comes, without consuming retryStrategy.attempts (jobStateTimeLimitActions can bound it).
  if (StartsWith(tj.failure_reason, "CapacityError") ||
      (tj.secondary_status == SecondaryStatus::kMaxWaitTimeExceeded && tj.training_start_time == 0)) {
    ++job.capacity_failed_attempt_count;
    ++state_.telemetry.retried[job.queue];
    // Placed again after a backoff (1 s, doubling, at most a minute), so that a host that keeps
    // failing to start instances is not asked again on every pass.
    const int64_t shift = std::min<int64_t>(6, job.capacity_failed_attempt_count - 1);
    js.not_before = t.now + std::min<int64_t>(60'000, int64_t{1000} << shift);
    backoff_ends_.insert(js.not_before);
    SetJobStatus(t, js, JobStatus::kRunnable,
                 "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - Unable to provision requested compute resources");
    SetWaitCode(t, js, "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY", job.status_reason);
    return;
  }
  if (tj.stop_cause == StopCause::kPreempt) {
    // Preemption returns the job to RUNNABLE as a new attempt; it does not consume retries.
    ++job.preempted_attempt_count;
    {
      const int64_t instance_ms = job.preemption_lost_instance_ms, gpu_ms = job.preemption_lost_gpu_ms;
      CountPreemptionLoss(job, tj, tj.training_end_time);
      Telemetry& m = state_.telemetry;
      ++m.preempted[job.queue];
      m.preemption_lost_instance_seconds[job.queue] += static_cast<double>(job.preemption_lost_instance_ms - instance_ms) / 1000.0;
      m.preemption_lost_gpu_seconds[job.queue] += static_cast<double>(job.preemption_lost_gpu_ms - gpu_ms) / 1000.0;
    }
    std::string why = "Preempted: yielded its capacity to service job " + job.preempted_for;
    if (!job.attempts.empty()) job.attempts.back().status_reason = why;
    job.preempted_for.clear();
    const int64_t limit = job.preemption ? job.preemption->retries_before_termination : -1;
    if (limit >= 0 && job.preempted_attempt_count > limit) {
      SetJobStatus(t, js, JobStatus::kFailed, why + " (preemptionRetriesBeforeTermination reached)");
    } else {
      SetJobStatus(t, js, JobStatus::kRunnable, why);
    }
    return;
  }
  if (tj.stop_cause == StopCause::kUser) {  // StopTrainingJob on the attempt: the service job fails, no retry
    SetJobStatus(t, js, JobStatus::kFailed, reason);
    return;
  }
  if (tj.status == TrainingJobStatus::kStopped &&
      (tj.secondary_status == SecondaryStatus::kMaxRuntimeExceeded || tj.secondary_status == SecondaryStatus::kMaxWaitTimeExceeded)) {
    // A timed-out attempt is not retried, whichever of MaxRuntimeInSeconds and
    // attemptDurationSeconds fired (docs/design/decisions.md).
    SetJobStatus(t, js, JobStatus::kFailed, reason);
    return;
  }
  // A failure after STARTING: the retry strategy decides. Preempted attempts do not count.
  const RetryStrategy retry_strategy = job.retry_strategy.value_or(RetryStrategy{});
  const int attempts = retry_strategy.attempts;
  int64_t counted = static_cast<int64_t>(job.attempts.size()) - job.preempted_attempt_count -
                    job.capacity_failed_attempt_count;
  bool retry = counted < attempts && RetryActionFor(retry_strategy.evaluate_on_exit, reason) == ExitRule::Action::kRetry;
  if (retry) ++state_.telemetry.retried[job.queue];
  SetJobStatus(t, js, retry ? JobStatus::kRunnable : JobStatus::kFailed, reason);
}

void Controller::EnforceTimeouts(Turn& t) {
  // jobStateTimeLimitActions: a RUNNABLE job that has waited for one of the listed reasons for
  // maxTimeSeconds is terminated (SAGEMAKER_TRAINING queues allow only TERMINATE).
  for (const auto& [qname, q] : state_.queues) {
    const std::vector<TimeLimitAction>& actions = q.time_limit_actions;
    if (actions.empty()) continue;
    auto front = state_.front_of_queue.find(qname);
    if (front == state_.front_of_queue.end()) continue;
    std::vector<uint64_t> seqs = front->second;
    for (uint64_t seq : seqs) {
      ServiceJobState& js = state_.jobs.at(seq);
      if (js.job.status != JobStatus::kRunnable || js.wait_code.empty()) continue;
      EpochMs since = js.RunnableSince();
      for (const auto& a : actions) {
        if (a.reason != js.wait_code) continue;
        if (t.now - since < a.max_time_seconds * 1000) continue;
        js.job.is_terminated = true;
        SetJobStatus(t, js, JobStatus::kFailed,
                     "Terminated by JobStateTimeLimit action due to reason: " + js.wait_code);
        t.reschedule = true;
        break;
      }
    }
  }
  for (const auto& q : state_.queues) {
    for (JobStatus st : {JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning}) {
      for (uint64_t seq : state_.JobsIn(q.first, st)) {
        ServiceJobState& js = state_.jobs.at(seq);
        if (!js.job.timeout || js.job.attempts.empty()) continue;
        const int64_t secs = js.job.timeout->attempt_duration_seconds;
        EpochMs started = js.job.attempts.back().started_at;
        if (secs <= 0 || started == 0 || t.now - started < secs * 1000) continue;
        auto it = state_.training_jobs.find(js.job.attempts.back().training_job_name);
        if (it == state_.training_jobs.end() || it->second.stop_requested) continue;
        RequestStop(t, it->second, StopCause::kTimeout, "Stopping: the service job's attemptDurationSeconds was reached.");
      }
    }
  }
}

// ------------------------------------------------------------------------------------------
// Metrics: MetricDefinitions regexes (RE2: linear time) over each instance's log.

namespace {

// Reads the whole lines of a log after `from` (at most max_bytes of them) and appends the values
// the metrics' regexes capture, as (metric index, value, timestamp); returns the offset after them.
std::streamoff ReadMetricLines(const std::string& path, std::streamoff from, int64_t max_bytes,
                               const std::vector<std::pair<std::string, std::unique_ptr<RE2>>>& metrics,
                               std::vector<std::tuple<size_t, double, EpochMs>>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return from;
  in.seekg(from);
  std::string line;
  std::streamoff consumed = from;
  while (consumed - from < max_bytes && std::getline(in, line)) {
    if (in.eof()) break;  // partial last line: read it next time
    consumed += static_cast<std::streamoff>(line.size()) + 1;
    auto sp = line.find(' ');
    if (sp == std::string::npos) continue;
    EpochMs ts = std::strtoll(line.c_str(), nullptr, 10);
    std::string_view text(line.data() + sp + 1, line.size() - sp - 1);
    for (size_t m = 0; m < metrics.size(); ++m) {
      std::string value;
      if (RE2::PartialMatch(text, *metrics[m].second, &value)) {
        char* end = nullptr;
        double v = std::strtod(value.c_str(), &end);
        if (end != value.c_str()) out->emplace_back(m, v, ts);
      }
    }
  }
  return consumed;
}

// Reads the whole lines of a system metrics file after `from` into samples; returns the offset
// after them.
std::streamoff ReadSystemLines(const std::string& path, std::streamoff from, std::vector<SystemSample>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return from;
  in.seekg(from);
  std::string line;
  std::streamoff consumed = from;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // partial last line: read it next time
    consumed += static_cast<std::streamoff>(line.size()) + 1;
    SystemSample s;
    if (ParseSystemSampleLine(line, &s)) out->push_back(s);
  }
  return consumed;
}

}  // namespace

void Controller::PrefetchTails() {
  for (const auto& [name, instances] : tailing_) {
    auto it = tails_.find(name);
    if (it == tails_.end()) continue;  // a new tail is set up (and read) under the lock
    Tail& tail = *it->second;
    if (static_cast<int>(tail.offsets.size()) != instances) continue;
    auto p = std::make_unique<TailRead>();
    p->metric_samples.resize(static_cast<size_t>(instances));
    p->offsets = tail.offsets;
    p->system_samples.resize(static_cast<size_t>(instances));
    p->system_offsets = tail.system_offsets;
    for (int i = 0; i < instances; ++i) {
      const auto n = static_cast<size_t>(i);
      if (n < tail.system_offsets.size())
        p->system_offsets[n] = ReadSystemLines(executor_->SystemMetricsPath(name, i + 1), tail.system_offsets[n], &p->system_samples[n]);
      if (!tail.metrics.empty())
        p->offsets[n] = ReadMetricLines(executor_->LogPath(name, i + 1), tail.offsets[n], kMetricTailBytesPerTurn, tail.metrics,
                                        &p->metric_samples[n]);
    }
    tail.prefetched = std::move(p);
  }
}

void Controller::TailMetrics(Turn& t) {
  tailing_.clear();
  for (const auto& [seq, name] : state_.live_training_jobs) {
    TrainingJob& tj = state_.training_jobs.at(name);
    if (!tj.launched) continue;
    TailJobMetrics(t, tj, kMetricTailBytesPerTurn);
    tailing_.emplace_back(name, tj.instance_count);
  }
}

void Controller::TailJobMetrics(Turn& t, TrainingJob& tj, int64_t max_bytes) {
  const std::string& name = tj.name;
  auto& tail = tails_[name];
  if (!tail) {
    tail = std::make_unique<Tail>();
    for (const auto& md : tj.terms.metric_definitions) {
      auto re = CompileMetricRegex(md.regex);
      if (re->ok() && re->NumberOfCapturingGroups() >= 1) tail->metrics.emplace_back(md.name, std::move(re));
    }
    tail->offsets.assign(static_cast<size_t>(tj.instance_count), 0);
    tail->system_offsets.assign(static_cast<size_t>(tj.instance_count), 0);
    // Re-reading from the start after a restart rebuilds the series exactly (the downsampling
    // rule depends only on the order of the values).
    state_.metric_series.erase(name);
  }
  // A final read (the run ended) past what was prefetched: that page first, then the rest of the
  // log, read now; the final metrics are the log's last values, not the prefetch's.
  if (max_bytes > kMetricTailBytesPerTurn && tail->prefetched) TailJobMetrics(t, tj, kMetricTailBytesPerTurn);
  // What PrefetchTails read before the lock, else (a new tail, another instance count) read now.
  std::unique_ptr<TailRead> read = std::move(tail->prefetched);
  if (!read || read->offsets.size() != tail->offsets.size() || read->system_offsets.size() != tail->system_offsets.size()) {
    read = std::make_unique<TailRead>();
    read->metric_samples.resize(tail->offsets.size());
    read->offsets = tail->offsets;
    read->system_samples.resize(tail->system_offsets.size());
    read->system_offsets = tail->system_offsets;
    for (int i = 0; i < tj.instance_count; ++i) {
      const auto n = static_cast<size_t>(i);
      if (n < tail->system_offsets.size())
        read->system_offsets[n] = ReadSystemLines(executor_->SystemMetricsPath(name, i + 1), tail->system_offsets[n],
                                                  &read->system_samples[n]);
      if (!tail->metrics.empty() && n < tail->offsets.size())
        read->offsets[n] = ReadMetricLines(executor_->LogPath(name, i + 1), tail->offsets[n], max_bytes, tail->metrics,
                                           &read->metric_samples[n]);
    }
  }
  TailSystemMetrics(t, tj, *tail, *read);
  if (tail->metrics.empty()) return;
  bool changed = false;
  MetricSeries& series = state_.metric_series[name];
  for (size_t i = 0; i < read->offsets.size(); ++i) {
    for (const auto& [m, v, ts] : read->metric_samples[i]) {
      series.Append(tail->metrics[m].first, v, ts);
      changed = true;
    }
    tail->offsets[i] = read->offsets[i];
  }
  if (!changed) return;
  tj.final_metrics.clear();
  for (auto& [mname, re] : tail->metrics)
    if (const MetricTrack* track = series.Find(mname); track && !track->points.empty())
      tj.final_metrics.push_back({mname, track->points.back().value, track->points.back().timestamp});
  t.training_jobs.insert(name);
  // Like the system metrics: stored once a minute while the job runs (the logs rebuild what a
  // crash loses) and once more when its run ends (DropTail).
  tail->metrics_dirty = true;
  if (t.now - tail->metrics_persisted_at >= 60'000) {
    t.metric_series.insert(name);
    tail->metrics_dirty = false;
    tail->metrics_persisted_at = t.now;
  }
}

// System metrics (docs/metrics.md, "System metrics"): the samples the supervisor appends for
// each instance. A file is read from the start again after a restart (or for a new run of the
// job after an interruption); samples not newer than a host's last one are the ones already
// held, so the series of earlier runs and of before the restart stay as they were.
void Controller::TailSystemMetrics(Turn& t, const TrainingJob& tj, Tail& tail, const TailRead& read) {
  for (size_t i = 0; i < read.system_offsets.size() && i < tail.system_offsets.size(); ++i) {
    std::vector<SystemSample>* series = nullptr;
    for (const SystemSample& s : read.system_samples[i]) {
      if (!series) series = &state_.system_series[tj.name]["algo-" + std::to_string(i + 1)];
      if (AppendSystemSample(*series, s)) tail.system_dirty = true;
    }
    tail.system_offsets[i] = read.system_offsets[i];
  }
  // The store gets the series once a minute while the job runs (the files can rebuild what a
  // crash loses) and once more when its run ends (DropTail).
  if (tail.system_dirty && t.now - tail.system_persisted_at >= 60'000) {
    t.system_series.insert(tj.name);
    tail.system_dirty = false;
    tail.system_persisted_at = t.now;
  }
}

void Controller::DropTail(Turn& t, const std::string& name) {
  auto it = tails_.find(name);
  if (it == tails_.end()) return;
  if (it->second->system_dirty) t.system_series.insert(name);
  if (it->second->metrics_dirty) t.metric_series.insert(name);
  tails_.erase(it);
}

void Controller::AddRoleEnvironment(exec::AttemptSpec& spec, const std::string& token) const {
  if (token.empty() || job_endpoint_.empty()) return;
  spec.extra_env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = job_endpoint_ + "/trainyard/v1/credentials";
  spec.extra_env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = token;
  spec.extra_env["AWS_ENDPOINT_URL"] = job_endpoint_;
  spec.extra_env["AWS_REGION"] = config_.region;
  spec.extra_env["AWS_DEFAULT_REGION"] = config_.region;
  if (!job_ca_bundle_.empty()) spec.extra_env["AWS_CA_BUNDLE"] = job_ca_bundle_;
}

}  // namespace ty::control
