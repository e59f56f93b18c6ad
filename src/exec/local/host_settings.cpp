#include "exec/local/host_settings.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace ty::exec::local {

using nlohmann::json;

std::string Encode(const HostSettings& h) {
  const ObjectStoreConfig& os = h.object_store;
  json fs = json::object();
  for (const auto& [id, dir] : h.file_systems) fs[id] = dir;
  json o = {{"sandbox", h.sandbox},
            {"job_user", h.job_user},
            {"sandbox_binds", h.sandbox_binds},
            {"file_systems", fs},
            {"pids_max", h.pids_max},
            {"cgroup_parent", h.cgroup_parent},
            {"log_max_bytes", h.log_max_bytes},
            {"system_metrics", {{"interval_seconds", h.system_metrics_interval_seconds}, {"nvidia_smi", h.nvidia_smi}}},
            {"gpu_device_dir", h.gpu_device_dir},
            {"pip", {{"find_links", h.pip_find_links}, {"no_index", h.pip_no_index}}},
            {"object_store",
             {{"endpoint", os.endpoint},
              {"region", os.region},
              {"access_key_id", os.access_key_id},
              {"secret_access_key", os.secret_access_key},
              {"path_style", os.path_style},
              {"buckets", os.buckets},
              {"multipart_threshold_bytes", os.multipart_threshold_bytes},
              {"multipart_part_bytes", os.multipart_part_bytes},
              {"checkpoint_sync_seconds", os.checkpoint_sync_seconds},
              {"dir_root", h.object_dir_root},
              {"cache_dir", h.object_cache_dir}}},
            {"images", {{"cache_dir", h.image_cache_dir}, {"host_images", h.host_images},
                        {"dirs", h.image_dirs},
                        {"fallback_to_host", h.image_fallback_to_host}, {"timeout_seconds", h.image_pull_timeout_seconds}}},
            {"notify_socket", h.notify_socket},
            {"notify_file", h.notify_file},
            {"data_dir", h.data_dir},
            {"disk_reserve_bytes", h.disk_reserve_bytes},
            {"launcher", {{"kind", h.launcher}, {"agent_binary", h.agent_binary},
                          {"slurm_bin_dir", h.slurm_bin_dir}, {"slurm_conf", h.slurm_conf},
                          {"slurm_node_addresses", h.slurm_node_addresses}}}};
  return o.dump();
}

StatusOr<HostSettings> DecodeHostSettings(std::string_view text) {
  json o = json::parse(text, nullptr, false);
  if (o.is_discarded() || !o.is_object()) return InvalidArgument("host settings: not a JSON object");
  // The executor wrote them; a type error is reported, never thrown.
  try {
    HostSettings h;
    h.sandbox = o.value("sandbox", h.sandbox);
    h.job_user = o.value("job_user", h.job_user);
    h.sandbox_binds = o.value("sandbox_binds", h.sandbox_binds);
    h.file_systems = o.value("file_systems", h.file_systems);
    h.pids_max = o.value("pids_max", h.pids_max);
    h.cgroup_parent = o.value("cgroup_parent", h.cgroup_parent);
    h.log_max_bytes = o.value("log_max_bytes", h.log_max_bytes);
    const json sm = o.value("system_metrics", json::object());
    h.system_metrics_interval_seconds = sm.value("interval_seconds", 0.0);
    h.nvidia_smi = sm.value("nvidia_smi", "");
    h.gpu_device_dir = o.value("gpu_device_dir", "/dev");
    const json pip = o.value("pip", json::object());
    h.pip_find_links = pip.value("find_links", "");
    h.pip_no_index = pip.value("no_index", false);
    const json s = o.value("object_store", json::object());
    ObjectStoreConfig& os = h.object_store;
    os.endpoint = s.value("endpoint", "");
    os.region = s.value("region", "us-east-1");
    os.access_key_id = s.value("access_key_id", "");
    os.secret_access_key = s.value("secret_access_key", "");
    os.path_style = s.value("path_style", true);
    os.buckets = s.value("buckets", std::vector<std::string>{});
    os.multipart_threshold_bytes = s.value("multipart_threshold_bytes", os.multipart_threshold_bytes);
    os.multipart_part_bytes = s.value("multipart_part_bytes", os.multipart_part_bytes);
    os.checkpoint_sync_seconds = s.value("checkpoint_sync_seconds", os.checkpoint_sync_seconds);
    h.object_dir_root = s.value("dir_root", "");
    h.object_cache_dir = s.value("cache_dir", "");
    const json im = o.value("images", json::object());
    h.image_cache_dir = im.value("cache_dir", "");
    h.host_images = im.value("host_images", std::vector<std::string>{});
    h.image_dirs = im.value("dirs", std::vector<std::string>{});
    h.image_fallback_to_host = im.value("fallback_to_host", false);
    h.image_pull_timeout_seconds = im.value("timeout_seconds", h.image_pull_timeout_seconds);
    h.notify_socket = o.value("notify_socket", "");
    h.notify_file = o.value("notify_file", "");
    h.data_dir = o.value("data_dir", "");
    h.disk_reserve_bytes = o.value("disk_reserve_bytes", int64_t{0});
    const json l = o.value("launcher", json::object());
    h.launcher = l.value("kind", "local");
    h.agent_binary = l.value("agent_binary", "");
    h.slurm_bin_dir = l.value("slurm_bin_dir", "");
    h.slurm_conf = l.value("slurm_conf", "");
    h.slurm_node_addresses = l.value("slurm_node_addresses", "");
    if (h.launcher != "local" && h.launcher != "slurm") return InvalidArgument("host settings: launcher.kind must be local or slurm");
    return h;
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("host settings: ") + e.what());
  }
}

HostSettings HostSettingsFor(const Config& config, const std::string& data_dir, const std::string& sandbox) {
  HostSettings h;
  h.sandbox = sandbox;
  h.job_user = config.job_user;
  h.sandbox_binds = config.sandbox_binds;
  for (const auto& [id, dir] : config.file_systems) h.file_systems.emplace(id, dir);
  h.pids_max = config.max_pids_per_instance;
  h.cgroup_parent = config.cgroup_parent;
  h.log_max_bytes = config.logs_max_bytes_per_stream;
  h.system_metrics_interval_seconds = config.system_metrics_interval_seconds;
  h.nvidia_smi = config.nvidia_smi;
  h.gpu_device_dir = config.gpu_device_dir;
  h.pip_find_links = config.pip_find_links;
  h.pip_no_index = config.pip_no_index;
  h.object_store = config.object_store;
  if (h.object_store.region.empty()) h.object_store.region = config.region;
  h.data_dir = data_dir;
  h.disk_reserve_bytes = std::max<int64_t>(0, config.data_dir_reserve_mib) << 20;
  h.object_dir_root = data_dir + "/buckets";
  h.object_cache_dir = data_dir + "/cache/objects";
  h.notify_socket = data_dir + "/run/executor.sock";
  h.image_cache_dir = data_dir + "/images";
  h.host_images = config.host_images;
  h.image_dirs = config.image_dirs;
  h.image_fallback_to_host = config.image_fallback_to_host;
  h.image_pull_timeout_seconds = config.image_pull_timeout_seconds;
  return h;
}

bool IsHostSoftware(const HostSettings& host, const std::string& image) {
  return IsHostImage(host.host_images, image);
}

std::string FileSystemHostPath(const HostSettings& host, const std::string& id, const std::string& directory_path) {
  auto it = host.file_systems.find(id);
  if (it == host.file_systems.end()) return "";
  std::string rel = directory_path;
  while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
  return (std::filesystem::path(it->second) / rel).lexically_normal().string();
}

}  // namespace ty::exec::local
