// The distributed launchers' pure parts (docs/distributed.md): the command an instance runs for
// an attempt's distribution, each torch-distributed rank's environment, mpirun's command line,
// and the framing and proof of the remote shell that mpirun reaches the other instances through.
// Nothing here starts a process or opens a socket (launcher.cpp does), so the unit tests pin it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/attempt_spec.h"
#include "exec/distribution.h"

namespace ty::exec::local {

// Where the sandbox holds the launcher (this build's trainyard-supervisor, read-only).
inline constexpr const char* kLauncherPath = "/opt/trainyard/bin/trainyard-supervisor";
inline constexpr const char* kLauncherDir = "/opt/trainyard";
// The MPI remote shell's per-attempt secret, in each instance's input/config (0600, the job user's).
inline constexpr const char* kShellSecretFile = "trainyard-shell-secret";

// What instance runs for `dist`: `cmd` itself without a distribution, else
// `<launcher> launch torch -- cmd...` or
// `<launcher> launch mpi --processes-per-host P [--mpi-option O]... -- cmd...`.
std::vector<std::string> LaunchCommand(const Distribution& dist, const std::string& launcher,
                                       std::vector<std::string> cmd);

// One instance's place in a torch-distributed job, read from its environment.
struct TorchNode {
  std::vector<std::string> hosts;  // SM_HOSTS
  int node_rank = 0;               // SM_CURRENT_HOST's index in SM_HOSTS
  int local_world_size = 1;        // max(1, SM_NUM_GPUS)
  std::string master_addr;         // MASTER_ADDR as set for the instance (algo-1)
  int master_port = kTorchMasterPort;  // MASTER_PORT when it is a port
};
// InvalidArgument when SM_HOSTS is not a JSON list of names or SM_CURRENT_HOST is not in it.
StatusOr<TorchNode> TorchNodeFromEnvironment(const std::map<std::string, std::string>& env);
// The variables torchrun sets for local rank `local_rank` (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
std::map<std::string, std::string> TorchRankEnvironment(const TorchNode& node, int local_rank);

// mpirun's command line as SageMaker's toolkit builds it: every host with `processes_per_host`
// slots, -np hosts*P, TCP over `interface`, no tree spawn (only algo-1 starts remote daemons,
// through `rsh_agent`), then the custom options and `cmd`. A default the custom options set
// again (an MCA parameter by name, -x of a variable, --bind-to, --map-by) is left out, so the
// user's wins, as in SageMaker's toolkit; the rsh wiring is always trainyard's. No SM_* variable
// is exported with -x (the toolkit exports algo-1's): each remote daemon runs in its own
// instance's environment, so every rank sees its own instance's SM_CURRENT_HOST, paths and PATH.
// `shared_memory` false leaves out Open MPI's shared-memory transport (vader): instances that
// share the host's name (no sandbox) would name their segments alike and crash in each other's.
std::vector<std::string> MpirunArgv(const std::vector<std::string>& hosts, int processes_per_host,
                                    const std::string& interface, const std::vector<std::string>& custom_options,
                                    const std::string& rsh_agent, const std::vector<std::string>& cmd,
                                    bool shared_memory = true);

// Remote shell frames: a type byte, a 4-byte big-endian length, the payload.
enum class FrameType : char {
  kNonce = 'N',    // server -> client: the challenge
  kRequest = 'Q',  // client -> server: {"kind": "shell"|"presence", "command": ..., "proof": hex}
  kStdout = 'O',
  kStderr = 'E',
  kExit = 'X',     // server -> client: the command's exit status, in decimal
  kRefused = 'R',  // server -> client: why the request was refused
};
inline constexpr uint32_t kMaxFrame = 1 << 20;
std::string EncodeFrame(FrameType type, const std::string& payload);
struct Frame {
  FrameType type;
  std::string payload;
};
// Takes one whole frame off the front of `buffer`; nullopt while it is incomplete. InvalidArgument
// for an unknown type or a length over kMaxFrame (the connection is then dropped).
StatusOr<std::optional<Frame>> DecodeFrame(std::string* buffer);

// HMAC-SHA256 of `message` under `key`, in lower-case hex.
std::string HmacSha256Hex(const std::string& key, const std::string& message);
// The proof a client sends: HmacSha256Hex(secret, nonce "\n" kind "\n" command).
std::string ShellProof(const std::string& secret, const std::string& nonce, const std::string& kind,
                       const std::string& command);
// Whether `proof` is ShellProof(...) (compared in constant time).
bool ShellProofValid(const std::string& secret, const std::string& nonce, const std::string& kind,
                     const std::string& command, const std::string& proof);

// An instance's address from an /etc/hosts text (the address of the first line naming it); outside the sandbox the launcher resolves algo-<n> through the attempt's hosts file.
std::optional<std::string> AddressInHosts(const std::string& hosts_text, const std::string& name);

}  // namespace ty::exec::local
