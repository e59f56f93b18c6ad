#include "api/training_request.h"

#include <re2/re2.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "control/ladder.h"
#include "control/metric_regex.h"
#include "control/warm_pool_rules.h"
#include "core/object_key.h"
#include "core/strings.h"
#include "core/training_spec_json.h"
#include "exec/distribution.h"
#include "exec/executor.h"
#include "exec/image/reference.h"

namespace ty::api {

using control::CompileMetricRegex;
using control::kLadderTag;
using control::kMaxKeepAliveSeconds;
using control::ParseLadder;
using nlohmann::json;

namespace {

// `uri` is an s3:// URI whose bucket and key follow core/object_key.h's rules; the error names
// `field` and the rule.
Status CheckS3Uri(const std::string& field, const std::string& uri, KeyUse use) {
  auto loc = ParseS3Uri(uri, use);
  return loc.ok() ? Status::Ok() : InvalidArgument(field + ": " + loc.status().message());
}

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

// REQUIRES: `decoded` is `req` decoded.
Status CheckTrainingRequest(const json& req, const TrainingSpec& decoded, const Config& config, const std::string& sandbox) {
  const int64_t keep_alive = decoded.keep_alive_seconds;
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
                                  UnquoteHyperParameter(hps["sagemaker_submit_directory"].get<std::string>()), KeyUse::kObject));
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
    if (keep_alive > 0)
      return InvalidArgument("ResourceConfig.KeepAlivePeriodInSeconds: managed spot training cannot use warm pools");
    const int64_t spot = it ? it->spot_count : 0;
    if (count > spot)
      return LimitExceeded("The account-level service limit '" + type + " for spot training job usage' is " +
                           std::to_string(spot) + " Instances, with current utilization of 0 Instances and a request "
                           "delta of " + std::to_string(count) + " Instances. This host's instance catalogue sets the "
                           "limit (spot_count under [[instance_types]] in the configuration).");
  }
  {
    auto ladder = ParseLadder(decoded.tags, {type, spot_request}, count, config);
    if (!ladder.ok()) return InvalidArgument("Tags: " + ladder.status().message());
    if (!ladder->rungs.empty() && keep_alive > 0)
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

}  // namespace

StatusOr<control::TrainingRequest> AcceptTrainingRequest(const json& req, const Config& config, const std::string& sandbox) {
  control::TrainingRequest r;
  // Decoding reads a member of the wrong type as absent; the check refuses it first.
  if (!DecodeTrainingSpec(req, &r.spec)) return InvalidArgument("the training request must be a JSON object");
  TY_RETURN_IF_ERROR(CheckTrainingRequest(req, r.spec, config, sandbox));
  return r;
}

}  // namespace ty::api
