#include "exec/local/launch.h"

#include "exec/local/ports.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace ty::exec::local {

std::vector<std::string> LaunchCommand(const Distribution& dist, const std::string& launcher,
                                       std::vector<std::string> cmd) {
  if (dist.kind == Distribution::Kind::kNone || cmd.empty()) return cmd;
  std::vector<std::string> out = {launcher, "launch"};
  if (dist.kind == Distribution::Kind::kTorch) {
    out.push_back("torch");
  } else {
    out.insert(out.end(), {"mpi", "--processes-per-host", std::to_string(dist.processes_per_host)});
    for (const std::string& o : dist.custom_mpi_options) out.insert(out.end(), {"--mpi-option", o});
  }
  out.push_back("--");
  for (std::string& a : cmd) out.push_back(std::move(a));
  return out;
}

StatusOr<TorchNode> TorchNodeFromEnvironment(const std::map<std::string, std::string>& env) {
  auto get = [&env](const char* k) {
    auto it = env.find(k);
    return it == env.end() ? std::string() : it->second;
  };
  TorchNode node;
  nlohmann::json hosts = nlohmann::json::parse(get("SM_HOSTS"), nullptr, false);
  if (!hosts.is_array() || hosts.empty()) return InvalidArgument("SM_HOSTS is not a JSON list of host names");
  for (const auto& h : hosts) {
    if (!h.is_string()) return InvalidArgument("SM_HOSTS is not a JSON list of host names");
    node.hosts.push_back(h.get<std::string>());
  }
  const std::string current = get("SM_CURRENT_HOST");
  auto it = std::find(node.hosts.begin(), node.hosts.end(), current);
  if (it == node.hosts.end()) return InvalidArgument("SM_CURRENT_HOST '" + current + "' is not in SM_HOSTS");
  node.node_rank = static_cast<int>(it - node.hosts.begin());
  const std::string gpus = get("SM_NUM_GPUS");
  int g = 0;
  if (!gpus.empty() && gpus.find_first_not_of("0123456789") == std::string::npos && gpus.size() < 6) g = std::stoi(gpus);
  node.local_world_size = std::max(1, g);
  node.master_addr = get("MASTER_ADDR").empty() ? node.hosts[0] : get("MASTER_ADDR");
  if (int port = ParsePort(get("MASTER_PORT")); port > 0) node.master_port = port;
  return node;
}

std::map<std::string, std::string> TorchRankEnvironment(const TorchNode& node, int local_rank) {
  const int world = node.local_world_size * static_cast<int>(node.hosts.size());
  const std::string rank = std::to_string(node.node_rank * node.local_world_size + local_rank);
  return {{"RANK", rank},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_WORLD_SIZE", std::to_string(node.local_world_size)},
          {"GROUP_RANK", std::to_string(node.node_rank)},
          {"NODE_RANK", std::to_string(node.node_rank)},
          {"GROUP_WORLD_SIZE", std::to_string(node.hosts.size())},
          {"ROLE_RANK", rank},
          {"ROLE_WORLD_SIZE", std::to_string(world)},
          {"ROLE_NAME", "default"},
          {"MASTER_ADDR", node.master_addr},
          {"MASTER_PORT", std::to_string(node.master_port)}};
}

namespace {

// The names the custom options set: "mca:<param>" for -mca/--mca/-gmca P V, "x:<VAR>" for
// -x VAR[=value], "flag:<name>" for a single-valued option such as --bind-to (one or two dashes).
std::set<std::string> NamesSet(const std::vector<std::string>& options) {
  static const std::set<std::string> kValued = {"bind-to", "map-by", "rank-by", "report-bindings"};
  std::set<std::string> names;
  for (size_t i = 0; i < options.size(); ++i) {
    std::string o = options[i];
    if (o.rfind("--", 0) == 0) o = o.substr(2);
    else if (o.rfind("-", 0) == 0) o = o.substr(1);
    else continue;
    if ((o == "mca" || o == "gmca") && i + 1 < options.size()) names.insert("mca:" + options[i + 1]);
    else if (o == "x" && i + 1 < options.size()) names.insert("x:" + options[i + 1].substr(0, options[i + 1].find('=')));
    else if (kValued.count(o)) names.insert("flag:" + o);
  }
  return names;
}

}  // namespace

std::vector<std::string> MpirunArgv(const std::vector<std::string>& hosts, int processes_per_host,
                                    const std::string& interface, const std::vector<std::string>& custom_options,
                                    const std::string& rsh_agent, const std::vector<std::string>& cmd,
                                    bool shared_memory) {
  std::string host_list;
  for (const std::string& h : hosts) host_list += (host_list.empty() ? "" : ",") + h + ":" + std::to_string(processes_per_host);
  std::vector<std::string> argv = {
      "mpirun", "--host", host_list, "-np", std::to_string(processes_per_host * static_cast<int>(hosts.size())),
      "--allow-run-as-root", "--tag-output"};
  // A default the custom options also set is left out: mpirun refuses an MCA parameter given
  // twice ("listed multiple times"), and SageMaker's toolkit lets the user's win. The launch's
  // own wiring (how algo-1 reaches the other instances) is not a default and always goes first.
  const std::set<std::string> custom = NamesSet(custom_options);
  auto mca = [&](const std::string& name, const std::string& value, bool wiring = false) {
    if (wiring || !custom.count("mca:" + name)) argv.insert(argv.end(), {"-mca", name, value});
  };
  mca("plm_rsh_agent", rsh_agent, true);
  mca("plm_rsh_no_tree_spawn", "1", true);
  // The remote daemon stays in its shell session rather than daemonizing, so a session's end
  // is the daemon's end (the worker instance then ends), and a worker's end is its daemon's.
  mca("orte_leave_session_attached", "1", true);
  mca("btl_tcp_if_include", interface);
  mca("oob_tcp_if_include", interface);
  if (!custom.count("flag:bind-to")) argv.insert(argv.end(), {"-bind-to", "none"});
  if (!custom.count("flag:map-by")) argv.insert(argv.end(), {"-map-by", "slot"});
  // Open MPI's rtc/hwloc maps the node's topology into shared memory at an address it found
  // free a moment before; when another process of the host takes it first (daemons starting
  // together), orted crashes in hwloc_shmem_topology_write. Nothing is bound here anyway.
  mca("rtc", "^hwloc");
  mca("pml", "ob1");
  // vader names its segments by host name, job and local rank: two instances with one host name
  // (no sandbox) made the same ones, and a rank crashed in the other instance's (SIGSEGV in
  // mca_btl_vader_poll_handle_frag). Those ranks talk over loopback TCP instead.
  mca("btl", shared_memory ? "^openib" : "^openib,vader");
  mca("orte_abort_on_non_zero_status", "1");
  mca("btl_vader_single_copy_mechanism", "none");
  if (!custom.count("x:NCCL_SOCKET_IFNAME")) argv.insert(argv.end(), {"-x", "NCCL_SOCKET_IFNAME=" + interface});
  for (const std::string& o : custom_options) argv.push_back(o);
  for (const std::string& a : cmd) argv.push_back(a);
  return argv;
}

std::string EncodeFrame(FrameType type, const std::string& payload) {
  std::string f(5, '\0');
  f[0] = static_cast<char>(type);
  const uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) f[1 + i] = static_cast<char>((n >> (24 - 8 * i)) & 0xff);
  return f + payload;
}

StatusOr<std::optional<Frame>> DecodeFrame(std::string* buffer) {
  if (buffer->size() < 5) return std::optional<Frame>();
  const char t = (*buffer)[0];
  if (std::string("NQOEXR").find(t) == std::string::npos)
    return InvalidArgument("remote shell: unknown frame type " + std::to_string(static_cast<unsigned char>(t)));
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>((*buffer)[1 + i]);
  if (n > kMaxFrame) return InvalidArgument("remote shell: a frame of " + std::to_string(n) + " bytes is over the limit");
  if (buffer->size() < 5 + static_cast<size_t>(n)) return std::optional<Frame>();
  Frame f{static_cast<FrameType>(t), buffer->substr(5, n)};
  buffer->erase(0, 5 + static_cast<size_t>(n));
  return std::optional<Frame>(std::move(f));
}

std::string HmacSha256Hex(const std::string& key, const std::string& message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), mac, &len);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[mac[i] >> 4]);
    out.push_back(kHex[mac[i] & 15]);
  }
  return out;
}

std::string ShellProof(const std::string& secret, const std::string& nonce, const std::string& kind,
                       const std::string& command) {
  return HmacSha256Hex(secret, nonce + "\n" + kind + "\n" + command);
}

bool ShellProofValid(const std::string& secret, const std::string& nonce, const std::string& kind,
                     const std::string& command, const std::string& proof) {
  if (secret.empty() || nonce.empty()) return false;
  const std::string want = ShellProof(secret, nonce, kind, command);
  return proof.size() == want.size() && CRYPTO_memcmp(proof.data(), want.data(), want.size()) == 0;
}

std::optional<std::string> AddressInHosts(const std::string& hosts_text, const std::string& name) {
  std::istringstream in(hosts_text);
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string address, n;
    if (!(words >> address)) continue;
    while (words >> n)
      if (n == name) return address;
  }
  return std::nullopt;
}

}  // namespace ty::exec::local
