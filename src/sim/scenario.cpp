// Scenarios: a cluster file followed by timed submits and the decisions expected of the
// scheduler, checked against a simulated run (docs/simulate.md, "Scenarios").
#include <algorithm>
#include <map>
#include <sstream>

#include "sim/sim.h"

namespace ty::sim {

namespace {

using Expect = ScenarioExpect;

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 15) return false;
  for (char ch : s)
    if (ch < '0' || ch > '9') return false;
  *out = std::stoll(s);
  return true;
}

const char* KindName(Decision::Kind k) {
  return k == Decision::kStart ? "start" : k == Decision::kPreempt ? "preempt" : "end";
}

// Splits `w` on `sep`, dropping empty pieces.
std::vector<std::string> Split(const std::string& w, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : w + sep) {
    if (ch != sep) {
      cur += ch;
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  return out;
}

// A header line `KEY = "VALUE"` of one of the scenario's own keys (runners, instance_types,
// queues, compute_environment), which are not cluster-file keys: the value's words, or false for any other line.
bool ScenarioKey(const std::string& line, std::string* key, std::vector<std::string>* words) {
  const std::string body = line.substr(0, line.find('#'));
  const size_t eq = body.find('=');
  if (eq == std::string::npos) return false;
  std::istringstream ks(body.substr(0, eq));
  if (!(ks >> *key) || (*key != "runners" && *key != "instance_types" && *key != "queues" &&
                           *key != "compute_environment"))
    return false;
  std::string value = body.substr(eq + 1);
  std::replace(value.begin(), value.end(), '"', ' ');
  std::istringstream vs(value);
  words->clear();
  for (std::string w; vs >> w;) words->push_back(w);
  return true;
}

}  // namespace

StatusOr<Scenario> ParseScenario(const std::string& text, const std::string& source) {
  // The header, up to the first line whose first word is `at`, is a cluster file; line numbers
  // of TOML errors stay those of the scenario file. The scenario's own keys (before any table)
  // are taken out of it, leaving blank lines.
  Scenario sc;
  std::istringstream in(text);
  std::string line, header;
  std::vector<std::pair<int, std::vector<std::string>>> events;  // (line, words)
  bool in_table = false;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string body = line.substr(0, line.find('#'));
    std::istringstream ws(body);
    std::vector<std::string> words;
    for (std::string w; ws >> w;) words.push_back(w);
    if (events.empty() && (words.empty() || words[0] != "at")) {
      in_table |= !words.empty() && words[0][0] == '[';
      std::string key;
      std::vector<std::string> values;
      if (!in_table && ScenarioKey(line, &key, &values)) {
        auto bad = [&](const std::string& what) {
          return InvalidArgument(source + ":" + std::to_string(n) + ": " + what);
        };
        if (key == "runners") {
          sc.sim = sc.controller = false;
          for (const auto& v : values) {
            if (v == "sim") sc.sim = true;
            else if (v == "controller") sc.controller = true;
            else return bad("runners lists sim and/or controller (got '" + v + "')");
          }
          if (!sc.sim && !sc.controller) return bad("runners lists sim and/or controller");
        } else if (key == "instance_types") {
          for (const auto& v : values) {
            const size_t eq = v.find('=');
            int64_t count = 0;
            if (eq == std::string::npos || eq == 0 || !ParseInt(v.substr(eq + 1), &count) || count < 1)
              return bad("instance_types takes TYPE=COUNT pairs (got '" + v + "')");
            sc.instance_types.emplace_back(v.substr(0, eq), count);
          }
        } else if (key == "compute_environment") {
          sched::ContainerResources ce{0, 0, 0};
          for (const auto& v : values) {
            const size_t eq = v.find('=');
            int64_t n = 0;
            const std::string name = v.substr(0, eq == std::string::npos ? v.size() : eq);
            if (eq == std::string::npos || !ParseInt(v.substr(eq + 1), &n) ||
                (name != "vcpus" && name != "memory" && name != "gpus"))
              return bad("compute_environment takes vcpus=N, memory=MIB and gpus=N (got '" + v + "')");
            (name == "vcpus" ? ce.vcpus : name == "memory" ? ce.memory_mib : ce.gpus) = n;
          }
          if (ce.vcpus < 1) return bad("compute_environment needs vcpus=N (at least 1)");
          if (ce.memory_mib == 0) ce.memory_mib = ce.vcpus * 4096;  // as CreateComputeEnvironment's default
          sc.compute_environment = ce;
          // The cluster file's required `gpus` (what a service scenario's GPUs are) is written in
          // from here, on this line: a container scenario does not give it.
          header += "gpus = " + std::to_string(std::max<int64_t>(1, ce.gpus)) + "\n";
          continue;
        } else {
          for (const auto& v : values) {
            const size_t eq = v.find('=');
            auto parts = Split(eq == std::string::npos ? "" : v.substr(eq + 1), ':');
            ScenarioQueue q;
            q.name = v.substr(0, eq);
            int64_t priority = 1;
            if (q.name.empty() || parts.empty() || parts.size() > 2 ||
                (parts.size() == 2 && (!ParseInt(parts[1], &priority) || priority > 1000)))
              return bad("queues takes NAME=POLICY[:PRIORITY] (got '" + v + "')");
            q.priority = static_cast<int>(priority);
            if (parts[0] == "fifo") q.policy = Policy::kFifo;
            else if (parts[0] == "fair_share") q.policy = Policy::kFairShare;
            else if (parts[0] == "quota") q.policy = Policy::kQuota;
            else return bad("a queue's policy is fifo, fair_share or quota (got '" + parts[0] + "')");
            sc.queues.push_back(q);
          }
        }
        header += "\n";
        continue;
      }
      header += line + "\n";
      continue;
    }
    if (words.empty()) continue;
    events.emplace_back(n, std::move(words));
  }
  auto cluster = ParseCluster(header, source);
  if (!cluster.ok()) return cluster.status();
  sc.cluster = std::move(cluster).value();
  if (sc.sim && (!sc.instance_types.empty() || !sc.queues.empty()))
    return InvalidArgument(source + ": instance_types and queues are the controller's: the file needs runners = \"controller\"");
  if (sc.compute_environment && (sc.cluster.policy == Policy::kQuota || !sc.instance_types.empty() || !sc.queues.empty()))
    return InvalidArgument(source + ": a container scenario (compute_environment) has one FIFO or fair_share queue: "
                           "no quota policy, instance_types or queues");
  if (sc.controller && (sc.cluster.checkpoint_interval_s > 0 || sc.cluster.restart_cost_s > 0 || sc.cluster.min_runtime_s > 0))
    return InvalidArgument(source + ": checkpoint_interval_s, restart_cost_s and min_runtime_s are the simulator's model: "
                           "the file needs runners = \"sim\"");

  std::map<std::string, size_t> job_index;
  int64_t last_t = -1;
  for (auto& [ln, w] : events) {
    auto bad = [&, ln = ln](const std::string& what) {
      return InvalidArgument(source + ":" + std::to_string(ln) + ": " + what);
    };
    int64_t t = 0;
    if (w[0] != "at" || w.size() < 3 || !ParseInt(w[1], &t))
      return bad("expected 'at T submit JOB ...' or 'at T expect WHAT ...' (T in whole seconds)");
    if (t < last_t) return bad("time " + w[1] + " is before the previous line's " + std::to_string(last_t));
    last_t = t;
    if (w[2] == "submit" || w[2] == "train") {
      if (w.size() < 4) return bad(w[2] + " needs a job name");
      ScenarioJob sj;
      sj.line = ln;
      sj.training = w[2] == "train";
      TraceJob& j = sj.job;
      j.id = w[3];
      j.submit_s = t;
      j.team = "default";
      bool has_duration = false, controller_only = sj.training;
      for (size_t k = 4; k < w.size(); ++k) {
        const size_t eq = w[k].find('=');
        const std::string key = w[k].substr(0, eq), val = eq == std::string::npos ? "" : w[k].substr(eq + 1);
        int64_t v = 0;
        if (key == "team" && !val.empty()) {
          j.team = val;
        } else if (key == "gpus" && sc.compute_environment && ParseInt(val, &v)) {
          sj.container.gpus = v;
        } else if (key == "vcpus" && sc.compute_environment && ParseInt(val, &v) && v >= 1) {
          sj.container.vcpus = v;
        } else if (key == "memory" && sc.compute_environment && ParseInt(val, &v) && v >= 4) {
          sj.container.memory_mib = v;
        } else if (key == "gpus" && ParseInt(val, &v) && v >= 1) {
          j.gpus = v;
        } else if (key == "duration" && ParseInt(val, &v) && v >= 1) {
          j.duration_s = v;
          has_duration = true;
        } else if (key == "priority" && ParseInt(val, &v) && v <= 9999) {
          j.priority = static_cast<int>(v);
        } else if (key == "queue" && !val.empty()) {
          sj.queue = val;
          controller_only = true;
        } else if (key == "type" && !val.empty()) {
          sj.instance_type = val;
          controller_only = true;
        } else if (key == "ladder" && !val.empty()) {
          for (const auto& r : Split(val, ',')) sj.ladder += (sj.ladder.empty() ? "" : " ") + r;
          controller_only = true;
        } else if (key == "keep_alive" && ParseInt(val, &v) && v >= 1) {
          sj.keep_alive_s = v;
          controller_only = true;
        } else if (key == "role" && !val.empty()) {
          sj.role = val;
          controller_only = true;
        } else {
          return bad("bad '" + w[k] +
                     "': submit takes team=NAME, gpus=N (>= 1), duration=S (>= 1, required), priority=P (0..9999), "
                     "and for the controller queue=NAME, type=T, ladder=T1,T2, keep_alive=S, role=NAME; "
                     "a container scenario's jobs take vcpus=N (>= 1), memory=MIB (>= 4) and gpus=N");
        }
      }
      if (!has_duration) return bad(w[2] + " " + j.id + " needs duration=S");
      if (job_index.count(j.id)) return bad("job " + j.id + " is submitted twice");
      if (sc.compute_environment && controller_only)
        return bad("train and the options queue, type, ladder, keep_alive and role are the service jobs': a container "
                   "scenario has none");
      if (sc.compute_environment && !sj.container.FitsIn(*sc.compute_environment))
        return bad("job " + j.id + " fits nowhere in the compute environment (SubmitJob refuses it)");
      if (controller_only && sc.sim)
        return bad("train and the options queue, type, ladder, keep_alive and role are the controller's: the file needs "
                   "runners = \"controller\"");
      job_index[j.id] = sc.jobs.size();
      sc.jobs.push_back(std::move(sj));
    } else if (w[2] == "expect") {
      if (w.size() < 5) return bad("expect needs what (start, preempt, wait, run, end, held, warm, cold) and at least one job");
      Expect e{ln, t, w[3], {}, {}};
      if (sc.compute_environment && e.what != "start" && e.what != "wait" && e.what != "run" && e.what != "end")
        return bad("expect " + e.what + ": a container scenario expects start, wait, run or end");
      if (e.what == "held") {
        for (size_t k = 4; k < w.size(); ++k) {
          const size_t eq = w[k].find('=');
          int64_t v = 0;
          if (eq == std::string::npos || eq == 0 || !ParseInt(w[k].substr(eq + 1), &v))
            return bad("held takes TEAM=GPUS pairs (got '" + w[k] + "')");
          e.held.emplace_back(w[k].substr(0, eq), v);
        }
      } else if (e.what == "start" || e.what == "preempt" || e.what == "wait" || e.what == "run" || e.what == "end") {
        e.jobs.assign(w.begin() + 4, w.end());
      } else if (e.what == "warm" || e.what == "cold" || e.what == "on") {
        if (sc.sim) return bad("expect " + e.what + " is the controller's: the file needs runners = \"controller\"");
        if (e.what == "on") {
          if (w.size() < 6) return bad("expect on TYPE JOB... needs an instance type and at least one job");
          e.type = w[4];
          e.jobs.assign(w.begin() + 5, w.end());
        } else {
          e.jobs.assign(w.begin() + 4, w.end());
        }
      } else {
        return bad("expect " + e.what + ": must be one of start, preempt, wait, run, end, held, warm, cold, on");
      }
      sc.expects.push_back(std::move(e));
    } else {
      return bad("'" + w[2] + "': a line is 'at T submit ...', 'at T train ...' or 'at T expect ...'");
    }
  }
  // A job named by an expectation must be submitted at or before the expectation's time.
  for (const Expect& e : sc.expects)
    for (const auto& name : e.jobs) {
      auto it = job_index.find(name);
      if (it == job_index.end())
        return InvalidArgument(source + ":" + std::to_string(e.line) + ": no job " + name + " is submitted");
      if (sc.jobs[it->second].job.submit_s > e.t_s)
        return InvalidArgument(source + ":" + std::to_string(e.line) + ": job " + name + " is submitted only at " +
                               std::to_string(sc.jobs[it->second].job.submit_s));
    }
  return sc;
}

StatusOr<ScenarioOutcome> RunScenario(const std::string& text, const std::string& source) {
  auto sc = ParseScenario(text, source);
  if (!sc.ok()) return sc.status();
  if (!sc->sim) return InvalidArgument(source + ": runners leaves out the simulator (runners = \"controller\")");
  const ClusterSpec& cluster_spec = sc->cluster;
  const std::vector<Expect>& expects = sc->expects;
  std::vector<TraceJob> trace;
  std::map<std::string, size_t> job_index;
  for (const ScenarioJob& j : sc->jobs) {
    job_index[j.job.id] = trace.size();
    trace.push_back(j.job);
  }

  // The simulator wants the trace in submit order; the lines are in time order already.
  std::vector<sched::ContainerResources> sizes;
  for (const ScenarioJob& j : sc->jobs) sizes.push_back(j.container);
  const Result r = sc->compute_environment ? SimulateContainers(cluster_spec, *sc->compute_environment, trace, sizes)
                                           : Simulate(cluster_spec, trace);
  ScenarioOutcome out;
  std::vector<std::vector<Decision>> by_job(trace.size());
  for (const Decision& d : r.decisions) {
    by_job[d.job].push_back(d);
    out.log += "t=" + std::to_string(d.t_s) + " " + KindName(d.kind) + " " + trace[d.job].id + "\n";
  }
  // A job's state once every decision up to and including time t is taken.
  auto state = [&](size_t i, int64_t t) -> std::string {
    std::string s = "waiting";
    for (const Decision& d : by_job[i]) {
      if (d.t_s > t) break;
      s = d.kind == Decision::kStart ? "running" : d.kind == Decision::kPreempt ? "waiting" : "ended";
    }
    return s;
  };
  auto history = [&](size_t i) {
    std::string h;
    for (const Decision& d : by_job[i])
      h += std::string(h.empty() ? "" : ", ") + KindName(d.kind) + " at " + std::to_string(d.t_s);
    return h.empty() ? std::string("it never started") : "its decisions: " + h;
  };
  for (const Expect& e : expects) {
    const std::string where = source + ":" + std::to_string(e.line) + ": ";
    ++out.expectations;
    if (e.what == "held") {
      // The last timeline sample at or before t is the cluster after the decisions at t.
      Timeline::Cursor cursor(r.timeline, r.teams.size());
      bool any = false;
      while (cursor.next() < r.timeline.size() && r.timeline.t_s(cursor.next()) <= e.t_s) any = cursor.Next();
      for (const auto& [team, want] : e.held) {
        auto it = std::lower_bound(r.teams.begin(), r.teams.end(), team);
        const int64_t got = it == r.teams.end() || *it != team || !any ? 0 : cursor.sample().held[it - r.teams.begin()];
        if (got != want)
          out.failures.push_back(where + "expected team " + team + " to hold " + std::to_string(want) + " GPUs at " +
                                 std::to_string(e.t_s) + ", but it held " + std::to_string(got));
      }
      continue;
    }
    for (const auto& name : e.jobs) {
      const size_t i = job_index.at(name);
      bool ok = false;
      if (e.what == "start" || e.what == "preempt" || e.what == "end") {
        const Decision::Kind k = e.what == "start" ? Decision::kStart : e.what == "preempt" ? Decision::kPreempt : Decision::kEnd;
        for (const Decision& d : by_job[i]) ok |= d.t_s == e.t_s && d.kind == k;
      } else {
        ok = state(i, e.t_s) == (e.what == "wait" ? "waiting" : "running");
      }
      if (!ok)
        out.failures.push_back(where + "expected " + name + " to " + e.what + " at " + std::to_string(e.t_s) +
                               ", but it was " + state(i, e.t_s) + " then (" + history(i) + ")");
    }
  }
  return out;
}

}  // namespace ty::sim
