#include "exec/local/opt_ml.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "exec/distribution.h"
#include "exec/local/launch.h"

namespace ty::exec::local {

using nlohmann::json;

namespace {

// A JSON-decoded hyperparameter value when it is JSON, else the raw string.
json DecodeHp(const std::string& v) {
  json j = json::parse(v, nullptr, false);
  return j.is_discarded() ? json(v) : j;
}

std::string HpArg(const std::string& v) {
  json j = json::parse(v, nullptr, false);
  if (!j.is_discarded() && j.is_string()) return j.get<std::string>();
  return v;
}

std::string Upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// algo-1 .. algo-<count>, in instance order.
std::vector<std::string> HostNames(int count) {
  std::vector<std::string> hosts;
  for (int n = 1; n <= count; ++n) hosts.push_back("algo-" + std::to_string(n));
  return hosts;
}

json ResourceConfigJson(const AttemptSpec& spec, int n, int count, const std::string& interface) {
  // In instance order, as SageMaker lists them; current_host is algo-<n>, as SM_CURRENT_HOST says.
  std::vector<std::string> hosts = HostNames(count);
  const std::string& type = spec.instance_type;
  return {{"current_host", hosts[static_cast<size_t>(n - 1)]},
          {"hosts", hosts},
          {"network_interface_name", interface},
          {"current_instance_type", type},
          {"current_group_name", "homogeneousCluster"},
          {"instance_groups",
           json::array({{{"instance_group_name", "homogeneousCluster"}, {"instance_type", type}, {"hosts", hosts}}})}};
}

json InputDataConfigJson(const AttemptSpec& spec) {
  json inputcfg = json::object();
  for (const auto& ch : spec.channels) {
    json c = {{"TrainingInputMode", ch.input_mode},
              {"S3DistributionType", ch.distribution},
              {"RecordWrapperType", ch.record_wrapper}};
    if (!ch.content_type.empty()) c["ContentType"] = ch.content_type;
    inputcfg[ch.name] = c;
  }
  return inputcfg;
}

}  // namespace

std::string HostAddress(int n) { return "127.0." + std::to_string(1 + n / 256) + "." + std::to_string(n % 256); }

std::string EtcHosts(int count) {
  std::vector<std::string> addresses;
  for (int n = 1; n <= count; ++n) addresses.push_back(HostAddress(n));
  return EtcHosts(addresses);
}

std::string EtcHosts(const std::vector<std::string>& addresses) {
  std::string etc_hosts = "127.0.0.1 localhost\n::1 localhost\n";
  for (size_t n = 1; n <= addresses.size(); ++n) etc_hosts += addresses[n - 1] + " algo-" + std::to_string(n) + "\n";
  return etc_hosts;
}

std::string ResourceConfig(const AttemptSpec& spec, int n, int count, const std::string& interface) {
  return ResourceConfigJson(spec, n, count, interface).dump();
}

std::string InputDataConfig(const AttemptSpec& spec) { return InputDataConfigJson(spec).dump(); }

std::string HyperparametersJson(const AttemptSpec& spec) { return json(spec.hyperparameters).dump(); }

std::vector<std::string> HyperparameterArgv(const AttemptSpec& spec) {
  std::vector<std::string> args;
  for (const auto& [k, v] : spec.hyperparameters) {
    if (k.rfind("sagemaker_", 0) == 0) continue;
    args.push_back("--" + k);
    args.push_back(HpArg(v));
  }
  return args;
}

std::vector<std::string> JobCommand(const AttemptSpec& spec, const std::string& launcher) {
  std::vector<std::string> cmd = spec.command;
  if (cmd.empty() && spec.script_mode) {
    cmd = {"python3", spec.script_mode->program};
    for (std::string& a : HyperparameterArgv(spec)) cmd.push_back(std::move(a));
  }
  // The request was checked with the same function; a spec that fails it runs undistributed.
  auto dist = ParseDistribution(spec.hyperparameters);
  return dist.ok() ? LaunchCommand(*dist, launcher, std::move(cmd)) : cmd;
}

std::string CheckpointRel(const AttemptSpec& spec) {
  std::string lp = spec.checkpoint ? spec.checkpoint->local_path : "/opt/ml/checkpoints";
  std::string rel = lp.rfind("/opt/ml/", 0) == 0 ? lp.substr(8) : "checkpoints";
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  return rel;
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::map<std::string, std::string> InheritedEnvironment() {
  std::map<std::string, std::string> env;
  for (const char* k : {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "PYTHONPATH", "LD_LIBRARY_PATH",
                        "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "PYENV_ROOT", "PYENV_VERSION"})
    if (const char* v = std::getenv(k)) env[k] = v;
  return env;
}

std::map<std::string, std::string> InstanceEnvironment(const AttemptSpec& spec, const OptMlLayout& layout,
                                                       std::map<std::string, std::string> env) {
  const int n = layout.n;
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  if (layout.sandbox) {
    env["HOME"] = layout.job_home;  // writable: pip install --user, caches
    env["USER"] = "job";
    // Debian's Python refuses every pip install outside a virtual environment (PEP 668), --user
    // included. In the sandbox the system's packages are read-only and $HOME is the instance's
    // own, so an install can only land in $HOME/.local (a plain `pip install` falls back to it).
    env["PIP_BREAK_SYSTEM_PACKAGES"] = "1";
  }
  if (spec.kind == AttemptKind::kContainer) {
    // A Batch container: what ECS gives a Batch task (the region; AWS_BATCH_* and the role's
    // credentials provider come in extra_env), the job's own variables, none of SageMaker's.
    env["AWS_REGION"] = spec.region;
    env["AWS_DEFAULT_REGION"] = spec.region;
    if (!layout.hosts_file.empty()) env["TRAINYARD_HOSTS_FILE"] = layout.hosts_file;
    for (const auto& [k, v] : spec.environment)
      if (ReservedEnvironmentRule(k).empty()) env[k] = v;
    for (const auto& [k, v] : spec.extra_env) env[k] = v;
    return env;
  }
  const std::string& ml = layout.opt_ml;
  const std::vector<std::string> hosts = HostNames(layout.count);
  json channels = json::array();
  for (const auto& ch : spec.channels) channels.push_back(ch.name);
  std::sort(channels.begin(), channels.end());
  json hps = json::object();
  json user_args = json::array();
  for (const auto& [k, s] : spec.hyperparameters) {
    if (k.rfind("sagemaker_", 0) == 0) continue;
    hps[k] = DecodeHp(s);
    env["SM_HP_" + Upper(k)] = HpArg(s);
  }
  for (const std::string& a : HyperparameterArgv(spec)) user_args.push_back(a);
  std::string program = spec.script_mode ? spec.script_mode->program : "";
  json resource = layout.config_written ? ResourceConfigJson(spec, n, layout.count, layout.network_interface) : json::object();
  json inputcfg = layout.config_written ? InputDataConfigJson(spec) : json::object();
  env["SM_MODEL_DIR"] = ml + "/model";
  env["TRAINYARD_CHECKPOINT_MARKER"] = ml + "/" + CheckpointRel(spec) + "/" + kCheckpointMarker;
  env["TRAINYARD_INTERRUPTION_NOTICE"] = ml + "/" + kInterruptionNotice;
  env["SM_CHANNELS"] = channels.dump();
  for (const auto& c : channels) env["SM_CHANNEL_" + Upper(c.get<std::string>())] = ml + "/input/data/" + c.get<std::string>();
  env["SM_HPS"] = hps.dump();
  env["SM_CURRENT_HOST"] = hosts[static_cast<size_t>(n - 1)];
  env["SM_HOSTS"] = json(hosts).dump();
  env["SM_NUM_GPUS"] = std::to_string(spec.gpus);
  env["SM_NUM_CPUS"] = std::to_string(spec.vcpus);
  env["SM_NUM_NEURONS"] = "0";
  env["SM_LOG_LEVEL"] = "20";
  env["SM_NETWORK_INTERFACE_NAME"] = layout.network_interface;
  env["SM_INPUT_DIR"] = ml + "/input";
  env["SM_INPUT_CONFIG_DIR"] = ml + "/input/config";
  env["SM_OUTPUT_DIR"] = ml + "/output";
  env["SM_OUTPUT_DATA_DIR"] = ml + "/output/data";
  env["SM_OUTPUT_INTERMEDIATE_DIR"] = ml + "/output/intermediate";
  env["SM_RESOURCE_CONFIG"] = resource.dump();
  env["SM_INPUT_DATA_CONFIG"] = inputcfg.dump();
  env["SM_CURRENT_INSTANCE_TYPE"] = spec.instance_type;
  env["SM_CURRENT_INSTANCE_GROUP"] = "homogeneousCluster";
  env["SM_IS_HETERO"] = "false";
  env["SM_MODULE_DIR"] = ml + "/code";
  env["SM_MODULE_NAME"] = program.substr(0, program.rfind('.'));
  env["SM_USER_ENTRY_POINT"] = program;
  env["SM_USER_ARGS"] = user_args.dump();
  env["SAGEMAKER_SUBMIT_DIRECTORY"] = ml + "/code";
  // The cache exists only with a warm pool, and the variable only then.
  if (spec.warm_pool) {
    env["SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"] = ml + "/sagemaker/warmpoolcache";
    // With a warm pool, what `pip install --user` installs is kept in the persistent cache, and
    // the next job on the pool imports it without installing again.
    if (layout.sandbox && !spec.environment.count("PYTHONUSERBASE"))
      env["PYTHONUSERBASE"] = ml + "/sagemaker/warmpoolcache/python-user";
  }
  const std::string& ws = layout.workspace;
  if (layout.has_venv) {
    env["VIRTUAL_ENV"] = ws + "/venv";
    env["PATH"] = ws + "/venv/bin:" + env["PATH"];
  }
  if (layout.has_pylib)
    env["PYTHONPATH"] = env.count("PYTHONPATH") ? ws + "/pylib:" + env["PYTHONPATH"] : ws + "/pylib";
  json training_env = {{"model_dir", ml + "/model"}, {"channel_input_dirs", json::object()},
                       {"hyperparameters", hps}, {"current_host", hosts[static_cast<size_t>(n - 1)]}, {"hosts", hosts},
                       {"num_gpus", spec.gpus}, {"num_cpus", spec.vcpus},
                       {"input_dir", ml + "/input"}, {"output_dir", ml + "/output"},
                       {"output_data_dir", ml + "/output/data"}, {"resource_config", resource},
                       {"input_data_config", inputcfg}, {"job_name", spec.training_job_name},
                       {"user_entry_point", program}, {"module_dir", ml + "/code"}};
  for (const auto& c : channels)
    training_env["channel_input_dirs"][c.get<std::string>()] = ml + "/input/data/" + c.get<std::string>();
  env["SM_TRAINING_ENV"] = training_env.dump();
  env["TRAINING_JOB_NAME"] = spec.training_job_name;
  env["TRAINING_JOB_ARN"] = spec.training_job_arn;
  env["AWS_REGION"] = spec.region;
  env["MASTER_ADDR"] = layout.sandbox ? "algo-1" : "127.0.0.1";
  // A torch-distributed launch listens where SageMaker's toolkit has torchrun listen.
  auto dist = ParseDistribution(spec.hyperparameters);
  const bool torch = dist.ok() && dist->kind == Distribution::Kind::kTorch;
  env["MASTER_PORT"] = layout.master_port > 0 ? std::to_string(layout.master_port)
                       : torch                ? std::to_string(kTorchMasterPort)
                                              : "29500";
  if (layout.shell_port > 0 && dist.ok() && dist->kind == Distribution::Kind::kMpi)
    env["TRAINYARD_MPI_SHELL_PORT"] = std::to_string(layout.shell_port);
  // An instance's place among the instances, for a job that starts its own processes. Not for
  // MPI: its ranks have MPI's own (OMPI_COMM_WORLD_RANK, ...), and a RANK of the instance would
  // mislead a framework that reads RANK first (torch's env:// rendezvous does).
  if (!(dist.ok() && dist->kind == Distribution::Kind::kMpi)) {
    env["WORLD_SIZE"] = std::to_string(layout.count);
    env["RANK"] = std::to_string(n - 1);
    env["NODE_RANK"] = std::to_string(n - 1);
  }
  if (!layout.sandbox) env["TRAINYARD_OPT_ML"] = ml;
  if (!layout.hosts_file.empty()) env["TRAINYARD_HOSTS_FILE"] = layout.hosts_file;
  // The job's own variables, but never one the server sets (a spec stored before the rule was
  // enforced at create may still name one): those keep the server's value, or stay unset.
  for (const auto& [k, v] : spec.environment)
    if (ReservedEnvironmentRule(k).empty()) env[k] = v;
  for (const auto& [k, v] : spec.extra_env) env[k] = v;
  return env;
}

}  // namespace ty::exec::local
