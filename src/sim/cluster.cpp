// The cluster file (TOML): capacity, policy, shares, team mapping, preemption cost model.
#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "sim/sim.h"

namespace ty::sim {

TeamSpec ClusterSpec::TeamOf(const std::string& team) const {
  auto it = teams.find(team);
  TeamSpec t = it != teams.end() ? it->second : default_team;
  if (t.share.empty()) t.share = policy == Policy::kFifo ? "all" : team;
  return t;
}

namespace {

// Errors name the file and the key, e.g. "cluster.toml: shares.a.strategy must be ...".
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Status Error(const std::string& key, const std::string& what) const {
    return InvalidArgument(source_ + ": " + key + " " + what);
  }

  Status Keys(const toml::table& t, const std::set<std::string>& allowed, const std::string& prefix) const {
    for (const auto& [k, v] : t) {
      std::string key(k.str());
      if (!allowed.count(key)) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        return InvalidArgument(source_ + ": unknown key '" + prefix + key + "' (allowed here: " + list + ")");
      }
    }
    return Status::Ok();
  }

  Status Int(const toml::table& t, const std::string& prefix, const char* key, int64_t* out, int64_t min,
             int64_t max) const {
    const toml::node* n = t.get(key);
    if (!n) return Status::Ok();
    if (!n->is_integer()) return Error(prefix + key, "must be an integer");
    int64_t v = n->as_integer()->get();
    if (v < min || v > max)
      return Error(prefix + key, "must be between " + std::to_string(min) + " and " + std::to_string(max) + " (got " +
                                     std::to_string(v) + ")");
    *out = v;
    return Status::Ok();
  }

  Status String(const toml::table& t, const std::string& prefix, const char* key, std::string* out) const {
    const toml::node* n = t.get(key);
    if (!n) return Status::Ok();
    if (!n->is_string()) return Error(prefix + key, "must be a string");
    *out = n->as_string()->get();
    return Status::Ok();
  }

  Status Bool(const toml::table& t, const std::string& prefix, const char* key, bool* out) const {
    const toml::node* n = t.get(key);
    if (!n) return Status::Ok();
    if (!n->is_boolean()) return Error(prefix + key, "must be true or false");
    *out = n->as_boolean()->get();
    return Status::Ok();
  }

  Status Number(const toml::table& t, const std::string& prefix, const char* key, double* out) const {
    const toml::node* n = t.get(key);
    if (!n) return Status::Ok();
    if (!n->is_number()) return Error(prefix + key, "must be a number");
    *out = n->is_integer() ? static_cast<double>(n->as_integer()->get()) : n->as_floating_point()->get();
    return Status::Ok();
  }

  Status Team(const toml::table& t, const std::string& prefix, TeamSpec* out) const {
    TY_RETURN_IF_ERROR(Keys(t, {"share", "priority"}, prefix));
    TY_RETURN_IF_ERROR(String(t, prefix, "share", &out->share));
    int64_t p = out->priority;
    TY_RETURN_IF_ERROR(Int(t, prefix, "priority", &p, 0, 9999));
    out->priority = static_cast<int>(p);
    return Status::Ok();
  }

 private:
  std::string source_;
};

constexpr int64_t kMaxInt = int64_t{1} << 40;

}  // namespace

StatusOr<ClusterSpec> ParseCluster(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(source + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  Reader r(source);
  ClusterSpec c;
  TY_RETURN_IF_ERROR(r.Keys(root,
                            {"gpus", "policy", "runtime_bound", "checkpoint_interval_s", "restart_cost_s",
                             "min_runtime_s", "fair_share", "shares", "defaults", "teams"},
                            ""));
  if (!root.get("gpus")) return r.Error("gpus", "is required (the cluster's capacity in GPUs)");
  TY_RETURN_IF_ERROR(r.Int(root, "", "gpus", &c.gpus, 1, kMaxInt));
  std::string policy;
  TY_RETURN_IF_ERROR(r.String(root, "", "policy", &policy));
  if (policy == "fifo") {
    c.policy = Policy::kFifo;
  } else if (policy == "fair_share") {
    c.policy = Policy::kFairShare;
  } else if (policy == "quota") {
    c.policy = Policy::kQuota;
  } else {
    return r.Error("policy", "must be one of fifo, fair_share, quota (got '" + policy + "')");
  }
  std::string bound = "none";
  TY_RETURN_IF_ERROR(r.String(root, "", "runtime_bound", &bound));
  if (bound != "none" && bound != "exact") return r.Error("runtime_bound", "must be none or exact (got '" + bound + "')");
  c.exact_runtime = bound == "exact";
  TY_RETURN_IF_ERROR(r.Int(root, "", "checkpoint_interval_s", &c.checkpoint_interval_s, 0, kMaxInt));
  TY_RETURN_IF_ERROR(r.Int(root, "", "restart_cost_s", &c.restart_cost_s, 0, kMaxInt));
  TY_RETURN_IF_ERROR(r.Int(root, "", "min_runtime_s", &c.min_runtime_s, 0, kMaxInt));

  if (const toml::node* n = root.get("fair_share")) {
    if (!n->is_table()) return r.Error("fair_share", "must be a table");
    if (c.policy != Policy::kFairShare) return r.Error("fair_share", "applies only with policy = \"fair_share\"");
    const toml::table& f = *n->as_table();
    TY_RETURN_IF_ERROR(r.Keys(f, {"share_decay_seconds", "compute_reservation"}, "fair_share."));
    TY_RETURN_IF_ERROR(r.Int(f, "fair_share.", "share_decay_seconds", &c.decay_seconds, 0, 604800));
    int64_t cr = 0;
    TY_RETURN_IF_ERROR(r.Int(f, "fair_share.", "compute_reservation", &cr, 0, 99));
    c.compute_reservation = static_cast<int>(cr);
  }

  if (const toml::node* n = root.get("shares")) {
    if (!n->is_table()) return r.Error("shares", "must be a table of tables ([shares.NAME])");
    if (c.policy == Policy::kFifo) return r.Error("shares", "does not apply with policy = \"fifo\"");
    for (const auto& [k, v] : *n->as_table()) {
      const std::string name(k.str());
      const std::string prefix = "shares." + name + ".";
      if (!v.is_table()) return r.Error("shares." + name, "must be a table");
      const toml::table& t = *v.as_table();
      ShareSpec s;
      s.name = name;
      if (c.policy == Policy::kFairShare) {
        TY_RETURN_IF_ERROR(r.Keys(t, {"weight_factor"}, prefix));
        TY_RETURN_IF_ERROR(r.Number(t, prefix, "weight_factor", &s.weight_factor));
        if (!(s.weight_factor >= 0.0001 && s.weight_factor <= 999.9999))
          return r.Error(prefix + "weight_factor", "must be between 0.0001 and 999.9999");
      } else {
        TY_RETURN_IF_ERROR(r.Keys(t, {"gpus", "strategy", "borrow_limit_percent", "in_share_preemption"}, prefix));
        if (!t.get("gpus")) return r.Error(prefix + "gpus", "is required (the share's quota in GPUs)");
        TY_RETURN_IF_ERROR(r.Int(t, prefix, "gpus", &s.gpus, 0, kMaxInt));
        std::string strategy = "LEND_AND_BORROW";
        TY_RETURN_IF_ERROR(r.String(t, prefix, "strategy", &strategy));
        if (strategy == "RESERVE") {
          s.strategy = Strategy::kReserve;
        } else if (strategy == "LEND") {
          s.strategy = Strategy::kLend;
        } else if (strategy == "LEND_AND_BORROW") {
          s.strategy = Strategy::kLendAndBorrow;
        } else {
          return r.Error(prefix + "strategy", "must be one of RESERVE, LEND, LEND_AND_BORROW (got '" + strategy + "')");
        }
        TY_RETURN_IF_ERROR(r.Int(t, prefix, "borrow_limit_percent", &s.borrow_limit_percent, -1, 1000000));
        TY_RETURN_IF_ERROR(r.Bool(t, prefix, "in_share_preemption", &s.in_share_preemption));
      }
      c.shares[name] = s;
    }
  }

  if (const toml::node* n = root.get("defaults")) {
    if (!n->is_table()) return r.Error("defaults", "must be a table");
    TY_RETURN_IF_ERROR(r.Team(*n->as_table(), "defaults.", &c.default_team));
  }
  if (const toml::node* n = root.get("teams")) {
    if (!n->is_table()) return r.Error("teams", "must be a table (team = { share = \"...\", priority = N })");
    for (const auto& [k, v] : *n->as_table()) {
      const std::string team(k.str());
      if (!v.is_table()) return r.Error("teams." + team, "must be a table { share = \"...\", priority = N }");
      TeamSpec t = c.default_team;
      TY_RETURN_IF_ERROR(r.Team(*v.as_table(), "teams." + team + ".", &t));
      c.teams[team] = t;
    }
  }

  if (c.policy == Policy::kQuota) {
    if (c.shares.empty()) return r.Error("shares", "must define at least one quota share with policy = \"quota\"");
    if (c.default_team.share.empty())
      return r.Error("defaults.share", "is required with policy = \"quota\" (teams not in [teams] run there)");
    if (!c.shares.count(c.default_team.share))
      return r.Error("defaults.share", "names no share in [shares] ('" + c.default_team.share + "')");
    for (const auto& [team, t] : c.teams)
      if (!c.shares.count(t.share))
        return r.Error("teams." + team + ".share", "names no share in [shares] ('" + t.share + "')");
  }
  return c;
}

StatusOr<ClusterSpec> LoadCluster(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read cluster file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseCluster(ss.str(), path);
}

}  // namespace ty::sim
