// What one instance of an attempt is told about itself: the files of its /opt/ml/input/config,
// its environment (SM_*, TRAINING_*, the rank variables) and the argv of script mode. Pure
// functions of the attempt's spec and the instance's layout: no file is read or written here
// (the supervisor writes what these return), so the unit tests pin them without a job.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "exec/attempt_spec.h"
#include "exec/local/launch.h"

namespace ty::exec::local {

// Touched (or rewritten) by a job when a checkpoint is complete, in its checkpoint directory;
// its path is in TRAINYARD_CHECKPOINT_MARKER.
inline constexpr const char* kCheckpointMarker = ".trainyard-checkpoint";
// Written into each instance's /opt/ml when a spot interruption arrives ($TRAINYARD_INTERRUPTION_NOTICE).
inline constexpr const char* kInterruptionNotice = "interruption-notice";

// The loopback address of algo-<n> in the sandbox's /etc/hosts: 127.0.1.n for n < 256.
std::string HostAddress(int n);
// The sandbox's /etc/hosts for `count` instances.
std::string EtcHosts(int count);
// The same where instance n runs at addresses[n - 1] (on another machine: a Slurm node).
std::string EtcHosts(const std::vector<std::string>& addresses);

// input/config/resourceconfig.json of instance n of `count` (JSON text); `interface` is the
// network interface its host name's address is on.
std::string ResourceConfig(const AttemptSpec& spec, int n, int count, const std::string& interface = "eth0");
// input/config/inputdataconfig.json (JSON text), the same for every instance.
std::string InputDataConfig(const AttemptSpec& spec);
// input/config/hyperparameters.json (JSON text): the hyperparameters as given.
std::string HyperparametersJson(const AttemptSpec& spec);

// The script-mode arguments: "--<name>" "<value>" per hyperparameter (sagemaker_* left out), a
// JSON string value given without its quotes.
std::vector<std::string> HyperparameterArgv(const AttemptSpec& spec);
// What an instance runs: the spec's command, else `python3 <program>` with HyperparameterArgv;
// under `launcher`'s launch mode when the hyperparameters ask for a distributed launch
// (exec/distribution.h, exec/local/launch.h).
std::vector<std::string> JobCommand(const AttemptSpec& spec, const std::string& launcher = kLauncherPath);

// CheckpointConfig.LocalPath relative to /opt/ml ("checkpoints" without a CheckpointConfig).
std::string CheckpointRel(const AttemptSpec& spec);

// Where instance n stands, as its environment names it.
struct OptMlLayout {
  int n = 1;                 // the instance, 1-based
  int count = 1;             // instances in the attempt
  std::string opt_ml;        // its /opt/ml as the job sees it ("/opt/ml" in the sandbox)
  bool sandbox = false;
  std::string job_home;      // $HOME in the sandbox
  std::string workspace;     // its workspace (code/, venv/, pylib/)
  bool has_venv = false;     // <workspace>/venv/bin exists
  bool has_pylib = false;    // <workspace>/pylib exists
  // False while the workspace is prepared (requirements.txt is installed before the instance's
  // input/config is written): SM_RESOURCE_CONFIG and SM_INPUT_DATA_CONFIG are {} then.
  bool config_written = true;
  // The network interface that carries the instances' addresses (SM_NETWORK_INTERFACE_NAME):
  // "lo" on one host, where algo-<n> is a loopback address.
  std::string network_interface = "eth0";
  // Outside the sandbox, the attempt's hosts file, where the launcher finds algo-<n>
  // (TRAINYARD_HOSTS_FILE); "" in the sandbox, whose /etc/hosts has them.
  std::string hosts_file;
  // The attempt's ports (exec/local/ports.h), 0 for the defaults: MASTER_PORT and, for an MPI
  // job, TRAINYARD_MPI_SHELL_PORT (where each instance's launcher takes mpirun's remote shell).
  int master_port = 0;
  int shell_port = 0;
};

// The server's variables a job inherits (PATH, HOME, LANG, CUDA_VISIBLE_DEVICES, ...), as set.
std::map<std::string, std::string> InheritedEnvironment();
// This process's whole environment (a launcher passes it on to its ranks; srun to its node agent).
std::map<std::string, std::string> ProcessEnvironment();

// The whole environment of instance n: `inherited`, then what SageMaker's containers set, then
// the job's Environment and the server's extra variables (each later one wins).
std::map<std::string, std::string> InstanceEnvironment(const AttemptSpec& spec, const OptMlLayout& layout,
                                                       std::map<std::string, std::string> inherited);

}  // namespace ty::exec::local
