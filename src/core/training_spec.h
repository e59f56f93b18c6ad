// The training spec: everything the controller and an executor need of a CreateTrainingJob
// request (or a service job's serviceRequestPayload), typed. It is decoded once, where a request
// is accepted (api/) or a stored document is loaded (core/model.cpp); the controller holds it and
// never sees the request's JSON. A capacity-ladder rung and a tuning trial are new spec values
// (a copy with fields changed); warm-pool matching is a function of it. The request text itself
// is kept beside it only to be echoed (docs/design/layout.md, "The training spec").
//
// The codec is in training_spec.cpp (ty_model); the JSON forms are declared in
// training_spec_json.h so that this header stays free of nlohmann.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ty {

using Tags = std::map<std::string, std::string>;

// SageMaker's bounds on StoppingCondition.
constexpr int64_t kMaxRuntimeLimitSeconds = 28 * 86400;  // MaxRuntimeInSeconds: the 28-day ceiling
constexpr int64_t kMinMaxPendingSeconds = 7200;           // MaxPendingTimeInSeconds 7200..2419200
constexpr int64_t kMaxMaxPendingSeconds = 2419200;

struct TrainingSpec {
  std::string training_job_name;  // TrainingJobName
  std::string role_arn;           // RoleArn; "" none

  // AlgorithmSpecification.
  struct MetricDefinition {
    std::string name, regex;
    bool operator==(const MetricDefinition&) const = default;
  };
  std::string training_image;                   // "": none (the host's software)
  std::string training_input_mode = "File";     // the channels' default InputMode
  std::vector<std::string> container_entrypoint;
  std::vector<std::string> container_arguments;
  std::vector<MetricDefinition> metric_definitions;

  // HyperParameters and Environment, as given (a value that is not a string is its JSON text).
  std::map<std::string, std::string> hyperparameters;
  std::map<std::string, std::string> environment;

  // InputDataConfig: each channel has either an S3 source or a file system.
  struct FileSystemSource {
    std::string id;                  // FileSystemId
    std::string directory_path = "/";
    bool read_only = true;           // FileSystemAccessMode "ro"
    bool operator==(const FileSystemSource&) const = default;
  };
  struct Channel {
    std::string name;
    std::string content_type;
    std::string input_mode;          // "": the algorithm's TrainingInputMode
    std::string record_wrapper = "None";
    std::string s3_uri;
    std::string s3_data_type = "S3Prefix";
    std::string distribution = "FullyReplicated";
    std::optional<int64_t> shuffle_seed;    // ShuffleConfig.Seed
    std::optional<FileSystemSource> file_system;
    bool operator==(const Channel&) const = default;
  };
  std::vector<Channel> channels;

  // OutputDataConfig.
  std::string s3_output_path;      // as given (a trailing '/' kept)
  bool compressed_output = true;   // CompressionType is not NONE

  // CheckpointConfig.
  struct Checkpoint {
    std::string s3_uri;
    std::string local_path = "/opt/ml/checkpoints";
    bool operator==(const Checkpoint&) const = default;
  };
  std::optional<Checkpoint> checkpoint;

  // ResourceConfig.
  std::string instance_type;
  int64_t instance_count = 1;
  std::optional<int64_t> volume_size_gb;  // VolumeSizeInGB; absent: 30 on this host
  std::string volume_kms_key_id;
  int64_t keep_alive_seconds = 0;         // KeepAlivePeriodInSeconds; 0: no warm pool

  // VpcConfig (sets: sorted), and the network flags.
  std::vector<std::string> security_group_ids;
  std::vector<std::string> subnets;
  bool network_isolation = false;                 // EnableNetworkIsolation
  bool inter_container_traffic_encryption = false;  // EnableInterContainerTrafficEncryption

  // StoppingCondition (0: absent), managed spot and RetryStrategy.
  int64_t max_runtime_seconds = 0;   // MaxRuntimeInSeconds; absent: AWS's default, one day
  int64_t max_wait_seconds = 0;      // MaxWaitTimeInSeconds (managed spot only)
  int64_t max_pending_seconds = 0;   // MaxPendingTimeInSeconds
  bool managed_spot = false;         // EnableManagedSpotTraining
  int64_t max_retry_attempts = 0;    // RetryStrategy.MaximumRetryAttempts

  Tags tags;  // Tags ([{Key, Value}] on the wire; malformed entries are skipped)

  // MaxRuntimeInSeconds, or AWS's default of one day.
  int64_t MaxRuntimeSeconds() const { return max_runtime_seconds > 0 ? max_runtime_seconds : 86400; }
  // S3OutputPath without trailing '/'.
  std::string OutputPathTrimmed() const;

  bool operator==(const TrainingSpec&) const = default;
};

// `request_json` (a CreateTrainingJob request, or a spec's stored form) decoded. It passed
// CheckTrainingRequest when it was accepted, so a member of the wrong type reads as absent.
// "" reads as an empty request. False: not a JSON object.
bool DecodeTrainingSpec(const std::string& request_json, TrainingSpec* out);

// A hyperparameter's value as the SageMaker Python SDK means it: it JSON-encodes values
// ("\"s3://...\""), so a JSON string literal is unquoted; anything else is as given.
std::string UnquoteHyperParameter(const std::string& value);

// The matching criteria of a managed warm pool as one comparable string (docs/warm-pools.md):
// the job's owner (the principal that submitted it, trainyard:JobOwner), so that a pool, whose
// workspaces and caches hold what its jobs left, is only ever taken over by a job of the same
// owner; then SageMaker's: RoleArn; ResourceConfig InstanceCount, InstanceType, VolumeKmsKeyId,
// VolumeSizeInGB; VpcConfig SecurityGroupIds and Subnets (as sets);
// EnableInterContainerTrafficEncryption; EnableNetworkIsolation. Hyperparameters, data, image and
// Environment are not part of it. The string is stored with each pool (WarmPool::match_key), so
// its form never changes: a canonical JSON array.
std::string WarmPoolMatchKey(const TrainingSpec& spec, const std::string& owner);

}  // namespace ty
