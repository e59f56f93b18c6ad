#include "exec/slurm/slurm_nodes.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <set>

#include "core/strings.h"

namespace ty::exec::slurm {
namespace {

// Counts beyond this are Slurm lying (or garbage): clamped so that sums cannot overflow.
constexpr int64_t kMaxQuantity = int64_t{1} << 40;
constexpr size_t kMaxProblems = 20;

void Problem(std::vector<std::string>* problems, std::string text) {
  if (problems && problems->size() < kMaxProblems) problems->push_back(std::move(text));
}

// A non-negative decimal (the whole of s), clamped to kMaxQuantity; false when it is not one.
bool ParseCount(std::string_view s, int64_t* out) {
  s = Trim(s);
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return false;
  *out = std::min(v, kMaxQuantity);
  return true;
}

// Slurm's memory sizes: MB by default, or with a K/M/G/T suffix ("4000", "4000M", "8G").
bool ParseMemoryMib(std::string_view s, int64_t* out) {
  s = Trim(s);
  if (s.empty()) return false;
  int64_t scale_num = 1, scale_den = 1;
  switch (s.back()) {
    case 'K': case 'k': scale_den = 1024; break;
    case 'M': case 'm': break;
    case 'G': case 'g': scale_num = 1024; break;
    case 'T': case 't': scale_num = 1024 * 1024; break;
    default: scale_num = 0;
  }
  if (scale_num == 0) return ParseCount(s, out);
  int64_t v = 0;
  if (!ParseCount(s.substr(0, s.size() - 1), &v)) return false;
  *out = std::min(v * scale_num / scale_den, kMaxQuantity);
  return true;
}

std::vector<std::string> SplitList(std::string_view s) {
  std::vector<std::string> out;
  if (s == "(null)" || s == "N/A") return out;
  for (const std::string& w : Split(s, ','))
    if (!w.empty()) out.push_back(w);
  return out;
}

// GPUs in a GRES list: "gpu:4", "gpu:a100:2(S:0-1),gpu:v100:2", "gres:gpu:2", "gres/gpu:2",
// "gpu" (one); other resources ("mps:100") are not GPUs.
int64_t GpusInGres(std::string_view gres) {
  // Drop parenthesised socket/index lists, which may themselves hold commas.
  std::string flat;
  int depth = 0;
  for (char ch : gres) {
    if (ch == '(') ++depth;
    else if (ch == ')') depth = std::max(0, depth - 1);
    else if (depth == 0) flat.push_back(ch);
  }
  int64_t total = 0;
  for (std::string entry : Split(flat, ',')) {
    if (StartsWith(entry, "gres:") || StartsWith(entry, "gres/")) entry = entry.substr(5);
    std::vector<std::string> parts = Split(entry, ':');
    if (parts.empty() || parts[0] != "gpu") continue;
    int64_t n = 1;
    if (parts.size() >= 2 && !ParseCount(parts.back(), &n)) n = parts.size() == 2 ? 1 : 0;  // "gpu:a100": one
    total = std::min(total + n, kMaxQuantity);
  }
  return total;
}

// GPUs in a TRES list ("cpu=2,mem=1G,gres/gpu=1,gres/gpu:a100=1"): the untyped count, else the
// typed ones summed.
int64_t GpusInTres(std::string_view tres) {
  int64_t untyped = -1, typed = 0;
  for (const std::string& entry : Split(tres, ',')) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string_view key(entry.data(), eq);
    int64_t n = 0;
    if (!ParseCount(std::string_view(entry).substr(eq + 1), &n)) continue;
    if (key == "gres/gpu") untyped = n;
    else if (StartsWith(key, "gres/gpu:")) typed = std::min(typed + n, kMaxQuantity);
  }
  return untyped >= 0 ? untyped : typed;
}

// "Key=Value" pairs of one --oneliner line. A word without '=' continues the value before it
// (values with spaces); Reason, which Slurm writes last and may hold anything, takes the rest.
std::map<std::string, std::string, std::less<>> Pairs(std::string_view line) {
  std::map<std::string, std::string, std::less<>> out;
  std::string* last = nullptr;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (j == i) break;
    std::string_view word = line.substr(i, j - i);
    size_t eq = word.find('=');
    if (eq != std::string_view::npos && eq > 0) {
      std::string key(word.substr(0, eq));
      if (key == "Reason") {
        out[key] = std::string(Trim(line.substr(i + eq + 1)));
        break;
      }
      last = &out[key];
      *last = std::string(word.substr(eq + 1));
    } else if (last) {
      *last += ' ';
      *last += word;
    }
    i = j;
  }
  return out;
}

bool MatchesConstraint(const std::vector<std::string>& features, const std::string& constraint) {
  if (constraint.empty()) return true;
  const bool any = constraint.find('|') != std::string::npos;
  for (const std::string& want : Split(constraint, any ? '|' : '&')) {
    const bool has = std::find(features.begin(), features.end(), want) != features.end();
    if (any && has) return true;
    if (!any && !has) return false;
  }
  return !any;
}

// Expands one host-list element ("n[1-3]x[a]..." : brackets hold ranges) into *names.
bool ExpandOne(std::string_view prefix, std::string_view rest, std::vector<std::string>* names) {
  size_t open = rest.find('[');
  if (open == std::string_view::npos) {
    if (rest.find(']') != std::string_view::npos) return false;
    if (names->size() >= kMaxHostlistNames) return false;
    names->push_back(std::string(prefix) + std::string(rest));
    return true;
  }
  size_t close = rest.find(']', open);
  if (close == std::string_view::npos || rest.substr(0, open).find(']') != std::string_view::npos) return false;
  const std::string head = std::string(prefix) + std::string(rest.substr(0, open));
  const std::string_view tail = rest.substr(close + 1);
  const std::string inside(rest.substr(open + 1, close - open - 1));
  if (inside.empty()) return false;
  for (const std::string& range : Split(inside, ',')) {
    size_t dash = range.find('-');
    std::string_view lo_s = std::string_view(range).substr(0, dash);
    std::string_view hi_s = dash == std::string::npos ? lo_s : std::string_view(range).substr(dash + 1);
    int64_t lo = 0, hi = 0;
    if (!ParseCount(lo_s, &lo) || !ParseCount(hi_s, &hi) || hi < lo) return false;
    if (hi - lo >= static_cast<int64_t>(kMaxHostlistNames)) return false;
    const size_t width = lo_s.size();  // "01-10": zero-padded to the low bound's width
    for (int64_t v = lo; v <= hi; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      if (!ExpandOne(head + digits, tail, names)) return false;
    }
  }
  return true;
}

}  // namespace

bool ExpandHostlist(std::string_view list, std::vector<std::string>* names) {
  list = Trim(list);
  if (list.empty() || list == "(null)") return true;
  // Split on the commas outside brackets.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    else if (i < list.size() && list[i] == ']') --depth;
    if (depth < 0 || depth > 1) return false;
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      std::string_view one = list.substr(start, i - start);
      if (one.empty() || !ExpandOne("", one, names)) return false;
      start = i + 1;
    }
  }
  return depth == 0;
}

std::vector<SlurmNode> ParseNodes(std::string_view text, std::vector<std::string>* problems) {
  std::vector<SlurmNode> out;
  size_t line_no = 0;
  for (const std::string& raw : Split(text, '\n')) {
    ++line_no;
    std::string_view line = Trim(raw);
    if (line.empty()) continue;
    auto kv = Pairs(line);
    auto get = [&](std::string_view key) -> std::string {
      auto it = kv.find(key);
      return it == kv.end() ? "" : it->second;
    };
    SlurmNode n;
    n.name = get("NodeName");
    if (n.name.empty()) {
      Problem(problems, "scontrol line " + std::to_string(line_no) + ": no NodeName, skipped");
      continue;
    }
    n.addr = get("NodeAddr");
    n.state = get("State");
    n.partitions = SplitList(get("Partitions"));
    n.features = SplitList(get("AvailableFeatures"));
    bool ok = ParseCount(kv.count("CPUEfctv") ? get("CPUEfctv") : get("CPUTot"), &n.cpus);
    ok = ParseCount(get("CPUAlloc"), &n.cpus_alloc) && ok;
    ok = ParseMemoryMib(get("RealMemory"), &n.memory_mib) && ok;
    if (!ParseMemoryMib(get("AllocMem"), &n.memory_alloc_mib)) n.memory_alloc_mib = 0;  // absent without memory tracking
    n.gpus = GpusInGres(get("Gres"));
    n.gpus_alloc = GpusInTres(get("AllocTRES"));
    n.reason = get("Reason");
    if (!ok || n.state.empty()) {
      Problem(problems, "scontrol line " + std::to_string(line_no) + ": node " + n.name +
                            " has no State, CPUTot, CPUAlloc or RealMemory that parses; counted as unusable");
      n.parsed = false;
    }
    out.push_back(std::move(n));
  }
  return out;
}

std::vector<SlurmJob> ParseJobs(std::string_view text, std::vector<std::string>* problems) {
  std::vector<SlurmJob> out;
  size_t line_no = 0;
  for (const std::string& raw : Split(text, '\n')) {
    ++line_no;
    if (Trim(raw).empty()) continue;
    // Nine fields; the name, last, keeps any '|' of its own.
    std::vector<std::string_view> f;
    std::string_view rest = raw;
    while (f.size() < 8) {
      size_t bar = rest.find('|');
      if (bar == std::string_view::npos) break;
      f.push_back(rest.substr(0, bar));
      rest = rest.substr(bar + 1);
    }
    f.push_back(rest);
    const std::string where = "squeue line " + std::to_string(line_no);
    if (f.size() != 9) {
      Problem(problems, where + ": " + std::to_string(f.size()) + " fields, not 9; skipped");
      continue;
    }
    SlurmJob j;
    j.id = std::string(Trim(f[0]));
    j.state = std::string(Trim(f[1]));
    j.comment = std::string(f[7]);
    j.name = std::string(f[8]);
    while (!j.name.empty() && (j.name.back() == '\r' || j.name.back() == ' ')) j.name.pop_back();
    int64_t count = 0, cpus = 0;
    if (j.id.empty() || !ParseCount(f[2], &count) || !ParseCount(f[3], &cpus)) {
      Problem(problems, where + ": no job id, node count or CPU count; skipped");
      continue;
    }
    if (!ExpandHostlist(f[6], &j.nodes)) {
      Problem(problems, where + ": job " + j.id + " has a node list that does not parse; skipped");
      continue;
    }
    const int64_t nodes = std::max<int64_t>(1, std::max<int64_t>(count, static_cast<int64_t>(j.nodes.size())));
    j.cpus_per_node = cpus / nodes;
    if (!ParseMemoryMib(f[4], &j.memory_per_node_mib)) j.memory_per_node_mib = 0;
    j.gpus_per_node = GpusInGres(Trim(f[5]));
    j.ours = StartsWith(j.name, "ty-") && j.comment == "trainyard";
    out.push_back(std::move(j));
  }
  return out;
}

std::string UnusableBecause(const SlurmNode& node) {
  static const std::set<std::string, std::less<>> kUsableBase = {"IDLE", "MIXED", "ALLOCATED", "ALLOC", "COMPLETING",
                                                                 "PLANNED"};
  static const std::set<std::string, std::less<>> kUnusableFlags = {
      "DOWN",          "DRAIN",         "DRAINED",      "DRAINING",      "FAIL",     "FAILING",
      "NOT_RESPONDING", "NO_RESPOND",   "MAINT",        "MAINTENANCE",   "RESERVED", "RESV",
      "REBOOT_ISSUED", "POWER_DOWN",    "POWERING_DOWN", "POWERING_UP",  "INVALID",  "INVALID_REG",
      "INVAL",         "FUTURE",        "UNKNOWN"};
  std::string why;
  bool first = true;
  for (std::string word : Split(node.state, '+')) {
    bool not_responding = false;
    while (!word.empty() && (word.back() == '*' || word.back() == '~' || word.back() == '#' || word.back() == '%' ||
                             word.back() == '$' || word.back() == '@' || word.back() == '!')) {
      not_responding |= word.back() == '*';
      word.pop_back();
    }
    word = ToUpper(word);
    const bool bad = first ? !kUsableBase.count(word) : kUnusableFlags.count(word) > 0;
    if (bad && why.empty()) why = word.empty() ? "no state" : word;
    if (not_responding && why.empty()) why = "NOT_RESPONDING";
    first = false;
  }
  if (node.state.empty()) why = "no state";
  if (!node.parsed) why = "figures that do not parse";
  if (!why.empty() && !node.reason.empty()) why += " (" + node.reason + ")";
  return why;
}

CapacityReport ComputeCapacity(const std::vector<InstanceTypeSpec>& types, const std::string& default_partition,
                               const std::vector<SlurmNode>& nodes, const std::vector<SlurmJob>& jobs, EpochMs at,
                               const std::vector<std::string>& problems) {
  CapacityReport r;
  r.at = at;
  for (size_t i = 0; i < problems.size() && i < 3; ++i) r.problem += (i ? "; " : "") + problems[i];
  if (problems.size() > 3) r.problem += "; and " + std::to_string(problems.size() - 3) + " more";
  // What trainyard's own jobs hold on each node (given back to it), and whether an outsider's does.
  struct Held {
    int64_t cpus = 0, memory_mib = 0, gpus = 0;
    bool outsider = false;
    bool mine = false;
  };
  std::map<std::string, Held, std::less<>> held;
  for (const SlurmJob& j : jobs)
    for (const std::string& n : j.nodes) {
      Held& h = held[n];
      if (!j.ours) {
        h.outsider = true;
        continue;
      }
      h.mine = true;
      h.cpus = std::min(h.cpus + j.cpus_per_node, kMaxQuantity);
      h.memory_mib = std::min(h.memory_mib + j.memory_per_node_mib, kMaxQuantity);
      h.gpus = std::min(h.gpus + j.gpus_per_node, kMaxQuantity);
    }

  struct Free {
    int64_t cpus, memory_mib, gpus;
    bool outsider;
  };
  std::vector<Free> free;
  for (const SlurmNode& n : nodes) {
    NodeReport nr;
    nr.name = n.name;
    nr.state = n.state;
    nr.partitions = n.partitions;
    nr.features = n.features;
    nr.why = UnusableBecause(n);
    nr.usable = nr.why.empty();
    nr.cpus = n.cpus, nr.cpus_alloc = n.cpus_alloc;
    nr.gpus = n.gpus, nr.gpus_alloc = n.gpus_alloc;
    nr.memory_mib = n.memory_mib, nr.memory_alloc_mib = n.memory_alloc_mib;
    r.nodes.push_back(std::move(nr));
    auto h = held.find(n.name);
    const Held ours = h == held.end() ? Held{} : h->second;
    // What outsiders leave: everything allocated that is not trainyard's is theirs.
    auto left = [](int64_t total, int64_t alloc, int64_t mine) {
      return std::clamp<int64_t>(total - std::max<int64_t>(0, alloc - mine), 0, total);
    };
    // Held by someone else: an outsider's job is listed on it, or Slurm shows an allocation there
    // that no job of trainyard's explains (a job that started after squeue answered). A node that
    // trainyard's own jobs hold is not compared amount for amount: Slurm may give a whole-node
    // job more than it asked (all GRES with --exclusive).
    const bool outsider = ours.outsider || (!ours.mine && (n.cpus_alloc > 0 || n.gpus_alloc > 0));
    free.push_back({left(n.cpus, n.cpus_alloc, ours.cpus), left(n.memory_mib, n.memory_alloc_mib, ours.memory_mib),
                    left(n.gpus, n.gpus_alloc, ours.gpus), outsider});
  }

  for (const InstanceTypeSpec& t : types) {
    const std::string& partition = t.slurm_partition.empty() ? default_partition : t.slurm_partition;
    int64_t total = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const SlurmNode& n = nodes[i];
      if (!r.nodes[i].usable) continue;
      if (!partition.empty() &&
          std::find(n.partitions.begin(), n.partitions.end(), partition) == n.partitions.end())
        continue;
      if (!MatchesConstraint(n.features, t.slurm_constraint)) continue;
      int64_t fits = 0;
      if (t.slurm_whole_node) {
        fits = !free[i].outsider && n.cpus >= t.vcpus && n.memory_mib >= t.memory_mib && n.gpus >= t.gpus ? 1 : 0;
      } else {
        fits = std::numeric_limits<int64_t>::max();
        if (t.vcpus > 0) fits = std::min<int64_t>(fits, free[i].cpus / t.vcpus);
        if (t.memory_mib > 0) fits = std::min<int64_t>(fits, free[i].memory_mib / t.memory_mib);
        if (t.gpus > 0) fits = std::min<int64_t>(fits, free[i].gpus / t.gpus);
        if (fits == std::numeric_limits<int64_t>::max()) fits = 1;  // asks for nothing: one per node
      }
      total = std::min(total + fits, kMaxQuantity);
    }
    r.instances[t.name] = total;
    r.instances[CapacityKey(t.name, true)] = total;
  }
  return r;
}

}  // namespace ty::exec::slurm
