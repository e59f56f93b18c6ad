// What an executor is asked to run: one attempt of a training job, in the job's own terms.
//
// The spec holds job semantics only (what to run, on how many instances of which type, with which
// data, where the results go, how long it may take). How a host runs it (sandbox, job user, object
// store endpoint and keys, caches, limits) is the executor's own configuration, not part of the
// spec (LocalExecutor::Options). Encode/Decode give the JSON form (docs/design/attempt-spec.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "iam/evaluate.h"

namespace ty::exec {

// A FileSystemDataSource: a directory of one of the host's file systems, mounted rather than copied.
struct FileSystemSource {
  std::string file_system_id;              // a [file_systems] id of the host
  std::string directory_path = "/";        // absolute, inside that file system
  bool read_only = true;

  bool operator==(const FileSystemSource&) const = default;
};

// One input channel (InputDataConfig entry).
struct Channel {
  std::string name;
  std::string content_type;                 // "" = not given
  std::string input_mode = "File";          // "File" or "FastFile" (staged as File)
  std::string record_wrapper = "None";
  std::string distribution = "FullyReplicated";  // or "ShardedByS3Key"
  // S3DataSource (when file_system is absent):
  std::string uri;                          // s3://bucket/prefix-or-manifest
  std::string data_type = "S3Prefix";       // or "ManifestFile"
  std::optional<int64_t> shuffle_seed;      // ShuffleConfig.Seed
  std::optional<FileSystemSource> file_system;

  bool operator==(const Channel&) const = default;
};

// Script mode (no ContainerEntrypoint): python3 <program> with the hyperparameters as arguments.
struct ScriptMode {
  std::string program;                      // sagemaker_program
  std::string submit_uri;                   // sagemaker_submit_directory; "" = none

  bool operator==(const ScriptMode&) const = default;
};

struct CheckpointConfig {
  std::string uri;                          // S3Uri
  std::string local_path = "/opt/ml/checkpoints";

  bool operator==(const CheckpointConfig&) const = default;
};

// The warm pool the attempt runs on (docs/warm-pools.md): its instance workspaces are kept in the
// pool's directory so that the next job on the pool finds them prepared.
struct WarmPoolSpec {
  std::string id;
  std::string workspace;                    // the pool's directory
  std::string reused_from;                  // the job that ran on it before; "" on its first job

  bool operator==(const WarmPoolSpec&) const = default;
};

// Whom the attempt's reads and writes of the embedded object store are authorized as
// (docs/security.md, "Jobs' data"): the job's role session or its submitter, with that
// principal's policy documents as they were when the attempt was started. Buckets on a configured
// endpoint are not checked (the endpoint's own credentials and policies apply).
struct DataAccess {
  struct Policy {
    std::string name;      // for the AccessDenied message of an explicit deny
    std::string document;  // as accepted

    bool operator==(const Policy&) const = default;
  };
  iam::PrincipalKeys principal;
  std::vector<Policy> policies;  // none: nothing is allowed

  bool operator==(const DataAccess&) const = default;
};

// How `command` combines with an image's own Entrypoint and Cmd (docs/images.md, "How an image runs").
enum class ImageCommand {
  // SageMaker (`docker run IMAGE train`): a non-empty `command` (ContainerEntrypoint +
  // ContainerArguments, or script mode's) is the whole argv; empty: Entrypoint + ["train"].
  kTrain,
  // Batch containers (and ContainerArguments alone): the image's Entrypoint stays and a non-empty
  // `command` replaces its Cmd; empty: Entrypoint + Cmd, the image's own command.
  kCmd,
};

// What an attempt runs for: a SageMaker training job (the /opt/ml contract and SageMaker's
// environment: SM_*, TRAINING_JOB_NAME, RANK, ...) or a Batch container job, whose container gets
// what ECS gives a Batch task (AWS_BATCH_* in extra_env, the region) and nothing of SageMaker's.
enum class AttemptKind { kTraining, kContainer };

struct AttemptSpec {
  std::string attempt_id;                   // unique; the local executor's directory name
  AttemptKind kind = AttemptKind::kTraining;
  std::string training_job_name;
  std::string training_job_arn;
  std::string region;

  // Instances: the type and count, and what one instance of the type offers.
  std::string instance_type;
  int instance_count = 1;
  int vcpus = 1;
  int gpus = 0;
  int64_t memory_mib = 1024;
  int64_t volume_size_gb = 30;              // ResourceConfig.VolumeSizeInGB
  std::string setup_command;                // prepares an instance's workspace; "" = none

  // What runs: `command` (ContainerEntrypoint + ContainerArguments), or script mode when empty.
  std::vector<std::string> command;
  std::optional<ScriptMode> script_mode;
  // The OCI image the instances run in (TrainingImage, a container's `image`); "" = the host's
  // software. Which references the host runs with its own software is the executor's setting.
  std::string image;
  ImageCommand image_command = ImageCommand::kTrain;
  std::map<std::string, std::string> hyperparameters;  // as given; sagemaker_* keys included
  std::map<std::string, std::string> environment;      // the job's Environment
  std::map<std::string, std::string> extra_env;        // set by the server (AWS_BATCH_JOB_ID, ...)
  bool network_isolation = false;           // EnableNetworkIsolation

  // Data in and out.
  std::vector<Channel> channels;
  std::string output_prefix;                // <S3OutputPath>/<job>/output/
  bool compress = true;                     // OutputDataConfig.CompressionType != NONE
  std::optional<CheckpointConfig> checkpoint;
  std::optional<WarmPoolSpec> warm_pool;
  std::optional<DataAccess> data_access;    // absent: every object is allowed (root's jobs)

  // Time.
  int64_t stop_grace_seconds = 120;         // SIGTERM to SIGKILL when stopped or out of time
  int64_t max_runtime_seconds = 0;          // the executor's own backstop; 0 = none

  bool operator==(const AttemptSpec&) const = default;
};

// The JSON form of a spec (an object; docs/design/attempt-spec.md).
std::string Encode(const AttemptSpec& spec);

// A spec from its JSON form. Absent members take their defaults; a member of the wrong type, a
// missing attempt_id or instance_type, or an instance_count below 1 is InvalidArgument.
StatusOr<AttemptSpec> DecodeAttemptSpec(std::string_view json);

// Whether the job's own environment (CreateTrainingJob Environment, a Batch container's
// `environment` and its overrides) may name `name`: "" when it may, else the rule it breaks. The
// reserved names are the variables the server sets for every job or for a role job, on which the
// job's trust rests: where its credentials come from and which endpoint, region and CA it calls
// (AWS_CONTAINER_*, AWS_ENDPOINT_URL*, AWS_REGION, AWS_DEFAULT_REGION, AWS_CA_BUNDLE), Batch's
// AWS_BATCH*, the SageMaker variables the training toolkits read (SM_*, TRAINING_JOB_NAME,
// TRAINING_JOB_ARN, SAGEMAKER_SUBMIT_DIRECTORY, SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY) and
// trainyard's own (TRAINYARD_*: the checkpoint marker, the hosts file, the launcher's files).
// Refused when a job is created; an attempt whose spec still names one (stored before the rule)
// runs with the server's value (docs/security.md, "The job's environment").
std::string ReservedEnvironmentRule(std::string_view name);

// A Batch container job's terms (kind kContainer): `image` runs with `command` in place of its
// Cmd, or with its own Cmd when `command` is empty (image_command kCmd).
void UseContainerImage(AttemptSpec* spec, std::string image, std::vector<std::string> command);

}  // namespace ty::exec
