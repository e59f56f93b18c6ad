// How this host runs attempts: the local executor's own configuration, which it writes into each
// attempt's spec.json beside the job's AttemptSpec (docs/design/attempt-spec.md). None of it is
// the job's: another executor would have settings of its own.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/status.h"

namespace ty::exec::local {

struct HostSettings {
  // The sandbox: "bwrap" (every instance under bubblewrap as job_user) or "none". Resolved
  // before the executor starts (ResolveSandbox); never "auto" here.
  std::string sandbox = "none";
  std::string job_user = "nobody";
  std::vector<std::string> sandbox_binds;          // bound read-write into every sandboxed instance
  // [file_systems]: id -> host directory. FileSystemDataSource channels name an id; every one of
  // these directories is hidden in the sandbox except a job's own channels.
  std::map<std::string, std::string> file_systems;
  int64_t pids_max = 4096;                         // per instance
  std::string cgroup_parent;                       // "" = the supervisor's own cgroup
  int64_t log_max_bytes = 0;                       // per instance log; 0 = no cap
  double system_metrics_interval_seconds = 0;      // 0 = not sampled
  std::string nvidia_smi;                          // "" = no GPU metrics
  std::string gpu_device_dir = "/dev";             // where the GPUs' nvidia<N> nodes are
  std::string pip_find_links;                      // for requirements.txt installs
  bool pip_no_index = false;
  // OCI images (docs/images.md): the cache (<data_dir>/images), the references run with the
  // host's software (glob patterns), the directories a path reference may name, whether an image
  // that cannot be copied falls back to the host's software, and how long each skopeo or umoci
  // run may take.
  std::string image_cache_dir;
  std::vector<std::string> host_images;
  std::vector<std::string> image_dirs;
  bool image_fallback_to_host = false;
  int image_pull_timeout_seconds = 900;
  // Where s3:// URIs lead: the endpoint (with its keys), else the embedded directory store.
  ObjectStoreConfig object_store;                  // region resolved (never empty)
  std::string object_dir_root;                     // the embedded directory store
  std::string object_cache_dir;                    // the host-wide object cache; "" = none
  // Poked on each phase change: a unix datagram socket path, or "udp:<ipv4>:<port>" where the
  // server is on another machine (the Slurm executor); "" = none.
  std::string notify_socket;
  // A file that, when it holds "udp:<ipv4>:<port>", replaces notify_socket: written by the server
  // that leads now, so that pokes follow it after a failover (the Slurm executor); "" = none.
  std::string notify_file;
  // The server's data directory, named in no message a job can read (a failure reason or a
  // transition's message says <data dir> in its place); "" = not known.
  std::string data_dir;
  // Free space the attempts' file system keeps ([server] data_dir_reserve_mib): a storage volume
  // is allocated only when it leaves this much free; 0: none.
  int64_t disk_reserve_bytes = 0;
  // How instances 2..N are started: "local" (forked here, with instance 1) or "slurm" (the
  // supervisor runs in a Slurm job's batch step on its first node; instance n runs on the
  // job's node n through srun, under `agent_binary --instance n <dir>`; docs/slurm.md).
  std::string launcher = "local";
  std::string agent_binary;                        // trainyard-supervisor, at the same path on every node
  std::string slurm_bin_dir;                       // srun and scontrol; "" = PATH
  std::string slurm_conf;                          // SLURM_CONF; "" = Slurm's default
  // {"<node name>": "<NodeAddr>", ...} of the cluster's nodes, kept by the server from its reads
  // of the nodes: a supervisor looks its nodes up there before asking slurmctld; "" = none.
  std::string slurm_node_addresses;
};

std::string Encode(const HostSettings& host);
// Absent members take their defaults; a member of the wrong type is InvalidArgument.
StatusOr<HostSettings> DecodeHostSettings(std::string_view json);

// The settings a server's configuration gives this host: `data_dir` holds the embedded buckets
// (buckets/), the object cache (cache/objects) and the notify socket (run/executor.sock);
// `sandbox` is the resolved mode (LocalExecutor::ResolveSandbox).
HostSettings HostSettingsFor(const Config& config, const std::string& data_dir, const std::string& sandbox);

// Whether `image` runs with the host's software: "" or a reference matching host.host_images.
bool IsHostSoftware(const HostSettings& host, const std::string& image);

// The host directory of a FileSystemDataSource (`directory_path` inside file system `id`), or ""
// when the host has no such file system.
std::string FileSystemHostPath(const HostSettings& host, const std::string& id, const std::string& directory_path);

}  // namespace ty::exec::local
