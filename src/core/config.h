// Server configuration: embedded defaults, optionally overridden by a TOML file
// (reference: docs/configuration.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/strings.h"
#include "core/status.h"

namespace ty {

// One entry of the instance catalogue: the capacity this host offers for an instance type.
struct InstanceTypeSpec {
  std::string name;       // e.g. "ml.m5.large"
  int64_t count = 0;      // how many instances of this type may run at once on this host
  int vcpus = 2;          // reported to jobs (SM_NUM_CPUS)
  int gpus = 0;           // reported to jobs (SM_NUM_GPUS)
  int64_t memory_mib = 8192;
  // Managed warm pools: how many instances of this type may be kept warm at once (AWS's
  // per-type warm-pool quota). -1 (the default): as many as the type's count.
  int64_t warm_pool_quota = -1;
  // Run once per instance on a cold start, in the instance's workspace (e.g. create a virtualenv);
  // kept with a warm pool. "" = none.
  std::string setup_command;
  // Managed spot (docs/spot.md): how many instances of this type this host offers as spot
  // capacity, separate from `count`; the catalogue prices per instance-hour (on-demand and spot);
  // and a random interruption rate for chaos testing (expected interruptions per spot
  // instance-hour; 0: interruptions come only from `trainyard admin interrupt`).
  int64_t spot_count = 0;
  double price_per_hour = 0;
  double spot_price_per_hour = -1;  // -1: 30% of price_per_hour
  double spot_interruptions_per_hour = 0;
  // On the Slurm executor (docs/slurm-capacity.md): the partition this type's jobs go to ("": the
  // executor's default partition), the node features they need (sbatch --constraint: features
  // joined by '&', all needed, or by '|', any one; "": none), and whether an instance is a whole
  // node rather than a slice of vcpus CPUs, memory_mib MiB and gpus GPUs of one.
  std::string slurm_partition;
  std::string slurm_constraint;
  bool slurm_whole_node = false;

  int64_t WarmPoolQuota() const { return warm_pool_quota < 0 ? count : warm_pool_quota; }
  double PricePerHour(bool spot) const {
    return !spot ? price_per_hour : spot_price_per_hour < 0 ? price_per_hour * 0.3 : spot_price_per_hour;
  }
  int64_t Capacity(bool spot) const { return spot ? spot_count : count; }
};

// Slurm names in [[instance_types]] (slurm_partition, slurm_constraint): a partition is 1 to 64 of
// [A-Za-z0-9_.-]; a constraint is features of [A-Za-z0-9_.:-] joined by '&' or by '|' (not both).
bool ValidSlurmPartitionName(std::string_view name);
bool ValidSlurmConstraint(std::string_view constraint);

// Host capacity is kept per instance type and market: "ml.m5.large" (on-demand) and
// "ml.m5.large#spot".
inline std::string CapacityKey(const std::string& type, bool spot) { return spot ? type + "#spot" : type; }
struct CapacityKeyParts {
  std::string type;
  bool spot = false;
};
inline CapacityKeyParts SplitCapacityKey(const std::string& key) {
  auto hash = key.find('#');
  if (hash == std::string::npos) return {key, false};
  return {key.substr(0, hash), key.compare(hash + 1, std::string::npos, "spot") == 0};
}

// Where s3:// buckets live (reference: docs/object-store.md). Buckets named in `buckets` (or
// every bucket with "*") go to the S3-compatible endpoint; all others to the embedded directory
// store under <data_dir>/buckets/. Empty fields fall back to AWS_ENDPOINT_URL_S3 /
// AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION (ApplyEnvironment).
// [executor.slurm] (docs/slurm.md): how the server reaches the Slurm cluster its attempts run on.
struct SlurmConfig {
  std::string partition = "main";   // every instance type's partition unless it names its own
  std::string account;              // sbatch --account; "" = none
  std::string bin_dir;              // where sbatch, squeue, scontrol, scancel and srun are; "" = PATH
  std::string conf;                 // SLURM_CONF for those commands; "" = Slurm's default
  std::vector<std::string> sbatch_args;  // appended to every sbatch, as given
  int poll_interval_ms = 500;       // how often the cluster's jobs and nodes are read
  // The IPv4 address the nodes reach this server at: supervisors poke it over UDP (any free
  // port) on each phase change, so the server need not wait for its next look.
  std::string notify_address = "127.0.0.1";
  // Held allocations (docs/slurm.md, "Held allocations"): a single-instance attempt runs in an
  // allocation trainyard keeps, which then waits hold_keep_alive_seconds for the next attempt of
  // the same shape before Slurm gets it back. At most hold_max_allocations at once; 0 turns them off.
  int hold_max_allocations = 64;
  int hold_keep_alive_seconds = 15;
  std::vector<std::string> hold_sbatch_args;  // appended to a held allocation's sbatch (e.g. a QOS)
};

struct ObjectStoreConfig {
  std::string endpoint;            // e.g. "http://127.0.0.1:9000"; empty: no remote store
  std::string region;              // signing region; empty: the server's region
  std::string access_key_id;
  std::string secret_access_key;
  bool path_style = true;          // false: virtual-host style (bucket.host)
  std::vector<std::string> buckets;  // routed to the endpoint; {"*"} = all (the default with an endpoint)
  int64_t multipart_threshold_bytes = 64 * 1024 * 1024;  // Put uses multipart at or above this
  int64_t multipart_part_bytes = 16 * 1024 * 1024;
  int checkpoint_sync_seconds = 10;  // how often checkpoints are synced during training

  // True when `bucket` goes to the endpoint.
  bool Routes(const std::string& bucket) const {
    if (endpoint.empty()) return false;
    for (const auto& b : buckets)
      if (b == "*" || b == bucket) return true;
    return false;
  }
};

// [s3] (docs/object-store.md, "The S3 endpoint"): the S3 REST API `trainyard serve` answers for
// the embedded buckets (<data_dir>/buckets).
struct S3Config {
  bool enabled = true;                            // false: every S3 request is 501 NotImplemented
  int64_t max_upload_bytes = 256LL * 1024 * 1024;  // the body limit of a PutObject / UploadPart request
  // Host: BUCKET.DOMAIN[:port] addresses BUCKET (virtual-host style); any other Host is path style.
  std::vector<std::string> virtual_host_domains = {"localhost"};
  // Multipart uploads initiated longer ago than this are aborted (S3's lifecycle rule
  // AbortIncompleteMultipartUpload, for every bucket); 0 = never.
  int64_t abort_incomplete_uploads_after_days = 7;
  // The bytes the parts of one user's (or one role's) incomplete multipart uploads may hold
  // together; an UploadPart past it is refused with QuotaExceeded. 0 = no quota.
  int64_t max_incomplete_upload_bytes_per_user = 64LL << 30;
};

// A webhook that receives events (docs/events.md): every stored event that passes all the given
// filters (an empty filter passes everything) is POSTed to `url`, in order, at least once.
struct WebhookConfig {
  std::string name;  // identifies its delivery cursor: renaming a webhook starts it from the newest event
  std::string url;   // http:// or https://
  std::vector<std::string> sources;       // e.g. "aws.batch"
  std::vector<std::string> detail_types;  // e.g. "Batch Service Job State Change"
  std::vector<std::string> queues;        // job queue names
  std::vector<std::string> shares;        // share identifiers or quota share names
  std::vector<std::pair<std::string, std::string>> tags;  // every one must be on the job
  std::string pattern;  // an EventBridge event pattern (JSON); "" = none
  std::string secret;   // signs each body: X-Trainyard-Signature: sha256=HMAC(secret, body)
  int timeout_seconds = 5;
  int max_backoff_seconds = 60;  // retries back off from 1 s, doubling, to this
  // EventBridge API destinations (docs/events.md) set these; a configuration-file webhook keeps
  // the defaults.
  std::string method = "POST";                                // POST | PUT
  std::vector<std::pair<std::string, std::string>> headers;  // the connection's authorization
  std::string input;       // a constant body instead of the event ("" = none)
  std::string input_path;  // "$" or "$.a.b": the part of the event sent ("" = all of it)
  // An InputTransformer (obs/input_transformer.h): the body rendered from these ("" = none), with
  // the rule's name ("" = this webhook's) and ARN as its predefined variables.
  std::map<std::string, std::string> input_paths_map;
  std::string input_template;
  std::string rule_name;
  std::string rule_arn;
  // An event is given up (counted, logged, and passed) after this many failed POSTs, or once it is
  // this old (seconds since it was stored); 0: never, as for a configuration-file webhook.
  int max_attempts = 0;
  int max_event_age_seconds = 0;
  // An EventBridge rule's target: the ARN of the principal that made the rule. Only the events it
  // may read are sent (obs/event_access.h), and only to addresses the outbound rules allow
  // (obs/outbound.h). "" : a configuration-file webhook, the operator's own: every event, any address.
  std::string owner;
  bool operator==(const WebhookConfig&) const = default;
};

// An alarm rule (docs/alarms.md), evaluated by the controller about once a second. It is in
// ALARM while its condition holds and OK otherwise; each change is an event.
struct AlarmConfig {
  std::string name;
  // runnable_longer_than | failure_ratio | idle_capacity_while_waiting | warm_pool_expiring
  std::string rule;
  std::string queue;          // only this job queue (name); "" = all
  std::string instance_type;  // idle_capacity_while_waiting: only this type; "" = all
  // runnable_longer_than: T; warm_pool_expiring: expires within T; idle_capacity_while_waiting:
  // how long the condition must hold before the alarm fires (0: at once).
  int64_t seconds = 0;
  double threshold = 0;       // failure_ratio: X in (0, 1]; idle_capacity_while_waiting: Y instances
  int64_t window_seconds = 3600;  // failure_ratio: the window
  int64_t min_jobs = 1;           // failure_ratio: jobs that ended in the window, at least
};

// [regions] (docs/regions.md): the other regions this server forwards to. A request signed for a
// peer's region is authenticated here and forwarded there; each region keeps its own state.
struct RegionsConfig {
  std::map<std::string, std::string> peers;  // region name -> base URL (http://host:port or https://)
  std::string peer_secret_file;  // the federation's shared secret; refused unless mode 0600 (or stricter)
  std::string peer_secret;       // read from peer_secret_file when the config is loaded; never logged
  int connect_timeout_seconds = 5;
  int timeout_seconds = 120;       // a whole forwarded request, connect to last byte of the answer
  int replay_window_seconds = 300; // a forwarded request older or newer than this is refused
  bool enabled() const { return !peers.empty(); }
};

// [console] (docs/console.md): the web console under /console/ on the API's port.
// [ha]: several servers over one PostgreSQL store, one of which leads (docs/operations.md, "High
// availability"). Read only when [store] url names PostgreSQL.
struct HaConfig {
  // How long a leader's lease lasts without renewal: a leader that dies is replaced this long
  // (at most) after its last renewal. Renewed every third of it. 1 to 60 seconds.
  double lease_seconds = 3;
  // This server's name in `trainyard admin status` ("": <host name>:<port>).
  std::string name;
  // Where the other servers reach this one when it leads ("": http(s)://<listen host, or this
  // host's name when listening on every address>:<port>).
  std::string advertise_url;
  // The longest a follower waits for the leader's answer to a request it passes on.
  int forward_timeout_seconds = 120;
};

struct ConsoleConfig {
  bool enabled = true;
  int session_hours = 8;        // a session ends this long after sign-in, whatever happens
  int idle_minutes = 60;        // ... or after this long without a request
  int max_sessions = 10000;     // the oldest session goes when one more signs in
  // Sign-in attempts per client address: a token bucket of signin_burst attempts refilled at
  // signin_rate a second (guessing secrets online, or flooding the audit trail, is this slow).
  double signin_rate = 1;
  double signin_burst = 20;
  // The console's files (app/ and node_modules/ below it); "": the directory the build recorded
  // (the source tree's console/).
  std::string assets_dir;
  // The most service jobs one WhatIf replays (docs/simulate.md, "What if"); a longer window is refused.
  int64_t what_if_max_jobs = 100000;
  // How often the controller samples each queue's share standings into its in-memory history
  // (control/share_history.h; 1 to 86400 seconds).
  int64_t share_history_interval_seconds = 60;
};

// [cloudwatch] (docs/metrics.md, "The CloudWatch API"): the metrics stored for PutMetricData.
struct CloudWatchConfig {
  int64_t max_series = 1000;  // metrics (namespace, name, dimensions); a put that adds one more is refused
  // Memory the stored metrics may take (control/cloudwatch_metrics.h, kCwBucketBytes per minute
  // bucket); a put that needs a new bucket past it is refused.
  int64_t max_series_bytes = int64_t{256} << 20;
  int64_t max_alarms = 5000;  // PutMetricAlarm's alarms (docs/alarms.md); one past it is refused
};

struct Config {
  std::string listen = "127.0.0.1:8080";
  std::string data_dir = "trainyard-data";
  std::string region = "us-east-1";
  std::string account_id = "000000000000";
  int stop_grace_seconds = 120;        // StopTrainingJob / TerminateServiceJob grace
  int spot_notice_seconds = 120;       // a spot interruption's notice before SIGKILL (EC2's two minutes)
  uint64_t chaos_seed = 0;             // seeds random spot interruptions; 0: a different run each time
  // [scheduler] batch_ms: jobs that arrive at an idle fair-share queue within this many
  // milliseconds of the first are weighed together (share and schedulingPriority), not started
  // in admission order; 0: no batching (docs/scheduling.md, "Arrival batches").
  int64_t scheduler_batch_ms = 1000;
  std::string sandbox = "auto";        // auto | bwrap | none
  int64_t max_request_bytes = 6 * 1024 * 1024;   // bodies above this are refused (413)
  int64_t max_submit_payload_bytes = 30 * 1024;  // serviceRequestPayload limit
  int http_threads = 16;           // workers that run requests (event streams and long polls get their own)
  // The network layer's limits (docs/configuration.md, [server]).
  int64_t max_header_bytes = 16 * 1024;  // request line and headers together; more is refused (431)
  int max_header_fields = 100;           // header lines; more are refused (431)
  int64_t max_buffered_request_bytes = 512 * 1024 * 1024;  // bodies being read, all connections; over it: 503
  int header_timeout_seconds = 10;       // the whole head must arrive this soon after its first byte
  int body_timeout_seconds = 60;         // the whole body after the head; also each response write
  int idle_timeout_seconds = 60;         // keep-alive connections with no request under way close after this
  int max_connections = 20000;           // more are answered 503 and closed (lowered to fit RLIMIT_NOFILE)
  int max_connections_per_address = 1000;  // open connections from one address (loopback too); more: the same 503
  int io_threads = 1;                    // threads that only read and write sockets
  int max_json_depth = 64;               // deeper JSON request bodies are refused before parsing
  double throttle_rate = 25000;          // requests per second per access key (0 = no throttling)
  double throttle_burst = 50000;         // the bucket's size: requests a key may make at once
  // [server] tls (docs/configuration.md, "TLS"): "auto" (TLS when a certificate is configured or
  // the listener is not on a loopback address), "on" or "off". The certificate and its key are
  // PEM files, both or neither; with neither, a self-signed pair kept in <data_dir>/tls is used.
  std::string tls = "auto";
  std::string tls_certificate_file;
  std::string tls_key_file;
  // GET /metrics: "" leaves it open (as before users existed); otherwise a scrape sends
  // "Authorization: Bearer <token>", or signs the request as root or as a user allowed
  // trainyard:GetMetrics. Never logged.
  std::string metrics_token;
  bool sqlite_synchronous_full = true;
  // [store] url: "" keeps the state in SQLite in the data directory; a PostgreSQL connection string
  // or URI puts it there instead (docs/operations.md, "PostgreSQL"). Never logged with a password.
  std::string store_url;
  // [server] data_dir_reserve_mib: free space the data dir's file system keeps. Under it no job
  // starts and the running job using most of the data dir is failed (docs/configuration.md,
  // "Disk reserve"); 0: no reserve.
  int64_t data_dir_reserve_mib = 256;
  std::vector<InstanceTypeSpec> instance_types;
  ObjectStoreConfig object_store;
  S3Config s3;
  RegionsConfig regions;
  ConsoleConfig console;
  CloudWatchConfig cloudwatch;
  HaConfig ha;
  // FileSystemDataSource: FileSystemId -> host directory ([file_systems] in the config file).
  std::vector<std::pair<std::string, std::string>> file_systems;
  // pip options for installing a submit directory's requirements.txt (offline installs).
  std::string pip_find_links;
  bool pip_no_index = false;
  // Host directories bound read-write, at the same path, into every sandboxed instance
  // (executor.sandbox_binds): a place jobs and the host share on purpose. Absolute paths.
  std::vector<std::string> sandbox_binds;
  // The sandbox (docs/user-guide.md, "The sandbox"): when the server runs as root, jobs run as
  // this unprivileged user ("name", "uid" or "uid:gid"; executor.job_user); each instance's
  // cgroup allows this many tasks (executor.max_pids_per_instance) and is made under this
  // cgroup (executor.cgroup_parent, a path inside the hierarchy; "": the server's own).
  std::string job_user = "nobody";
  // OCI images (docs/images.md): references matching one of host_images (glob patterns) run with
  // the host's software, as before images were run; with image_fallback_to_host, so does an image
  // that cannot be copied (otherwise the job fails with CannotPullContainerError). Each skopeo or
  // umoci run may take image_pull_timeout_seconds.
  std::vector<std::string> host_images = {"local/*", "*.amazonaws.com/*"};
  // The host directories whose OCI layouts and archives a job may name by path (oci:PATH,
  // oci-archive:PATH, docker-archive:PATH; executor.image_dirs, absolute). Empty: none, and every
  // path reference is refused (the server reads them as root; a job must not probe the host).
  std::vector<std::string> image_dirs;
  bool image_fallback_to_host = false;
  int image_pull_timeout_seconds = 900;
  // The storage volume (its /tmp and $HOME) each attempt of a Batch container job gets, in GiB,
  // allocated whole on the host's disk while it runs (executor.container_volume_gb).
  int64_t container_volume_gb = 1;
  // executor.kind: where attempts run: "local" (this host) or "slurm" (a Slurm cluster,
  // docs/slurm.md; the [executor.slurm] table below).
  std::string executor_kind = "local";
  SlurmConfig slurm;
  int64_t max_pids_per_instance = 4096;
  std::string cgroup_parent;
  // [logs] (docs/logs.md): events older than this many days are no longer served, and a finished
  // job's log files are deleted once its end is that old (0: keep forever); a stream's log file
  // stops growing at max_bytes_per_stream (0: no cap).
  int64_t logs_retention_days = 0;
  int64_t logs_max_bytes_per_stream = 0;
  // [events] (docs/events.md): state-change events are stored with the state, in one sequence;
  // the oldest go once there are more than max_events or they are older than retention_days.
  bool events_enabled = true;
  int64_t events_retention_days = 7;
  int64_t events_max = 200000;
  int events_max_streams = 8;
  // API destinations may reach loopback, link-local and unspecified addresses and this server's own
  // ports (obs/outbound.h); off, they are refused when made and at each delivery.
  bool events_allow_local_endpoints = false;  // concurrent event streams and waiting event reads (each holds an HTTP thread)
  // [audit] (docs/security.md, "Audit"): records of mutating and refused API calls, stored with
  // the state; those older than retain_days go (0: keep forever), and the oldest once there are
  // more than max_records. record_reads records successful reads too. trusted_proxies: peer
  // addresses whose X-Forwarded-For names the client (otherwise the peer is the source).
  int64_t audit_retain_days = 90;
  int64_t audit_max_records = 1000000;
  bool audit_record_reads = false;
  std::vector<std::string> audit_trusted_proxies;
  std::vector<WebhookConfig> webhooks;
  std::vector<AlarmConfig> alarms;
  // System metrics of each instance (docs/metrics.md, "System metrics"): sampled by the
  // supervisor every this many seconds (0: not sampled); GPUs through this nvidia-smi ("": none;
  // a bare name is looked up on PATH).
  int system_metrics_interval_seconds = 10;
  std::string nvidia_smi = "nvidia-smi";
  // The host's GPUs (docs/gpus.md): the indices the local executor gives instances, each to one
  // instance at a time. Unset: discovered, every /dev/nvidia<N> (within the server's
  // CUDA_VISIBLE_DEVICES when it names indices). gpus_out_of_service are never given out (a GPU
  // that failed); gpu_device_dir is where the nvidia<N> nodes are (stand-ins in tests).
  std::optional<std::vector<int>> gpus;
  std::vector<int> gpus_out_of_service;
  std::string gpu_device_dir = "/dev";

  // Whether the listener speaks TLS under this configuration (server.tls resolved against listen).
  bool TlsEnabled() const;
  const InstanceTypeSpec* FindInstanceType(const std::string& name) const;
  // The catalogue entry of a capacity key ("type" or "type#spot"), and the capacity it offers.
  int64_t CapacityOf(const std::string& key) const;
};

// The embedded defaults (used when no --config is given).
Config DefaultConfig();

// Reads a TOML file over the defaults. Unknown keys are errors, so typos do not pass silently.
StatusOr<Config> LoadConfigFile(const std::string& path, Config base);

// Fills the object-store settings the config left empty from the AWS_* environment variables
// (a bucket list is implied: an endpoint from the environment alone routes every bucket).
void ApplyEnvironment(Config* config);

// Whether an image reference runs with the host's software rather than as an OCI image: "" or a
// reference matching one of `host_images` (glob patterns, executor.host_images; docs/images.md).
inline bool IsHostImage(const std::vector<std::string>& host_images, const std::string& image) {
  return image.empty() || MatchesAnyGlob(host_images, image);
}

}  // namespace ty
