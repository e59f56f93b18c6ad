// Scenarios: a cluster file followed by timed submits and the decisions expected of the
// scheduler, checked against a simulated run (docs/simulate.md, "Scenarios").
#include <algorithm>
#include <map>
#include <sstream>

#include "sim/sim.h"

namespace ty::sim {

namespace {

struct Expect {
  int line = 0;
  int64_t t_s = 0;
  std::string what;                               // start | preempt | wait | run | end | held
  std::vector<std::string> jobs;                  // all but held
  std::vector<std::pair<std::string, int64_t>> held;  // held: team -> GPUs
};

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

}  // namespace

StatusOr<ScenarioOutcome> RunScenario(const std::string& text, const std::string& source) {
  // The header, up to the first line whose first word is `at`, is a cluster file; line numbers
  // of TOML errors stay those of the scenario file.
  std::istringstream in(text);
  std::string line, header;
  std::vector<std::pair<int, std::vector<std::string>>> events;  // (line, words)
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string body = line.substr(0, line.find('#'));
    std::istringstream ws(body);
    std::vector<std::string> words;
    for (std::string w; ws >> w;) words.push_back(w);
    if (events.empty() && (words.empty() || words[0] != "at")) {
      header += line + "\n";
      continue;
    }
    if (words.empty()) continue;
    events.emplace_back(n, std::move(words));
  }
  auto cluster = ParseCluster(header, source);
  if (!cluster.ok()) return cluster.status();

  std::vector<TraceJob> trace;
  std::map<std::string, size_t> job_index;
  std::vector<Expect> expects;
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
    if (w[2] == "submit") {
      if (w.size() < 4) return bad("submit needs a job name");
      TraceJob j;
      j.id = w[3];
      j.submit_s = t;
      j.team = "default";
      bool has_duration = false;
      for (size_t k = 4; k < w.size(); ++k) {
        const size_t eq = w[k].find('=');
        const std::string key = w[k].substr(0, eq), val = eq == std::string::npos ? "" : w[k].substr(eq + 1);
        int64_t v = 0;
        if (key == "team" && !val.empty()) {
          j.team = val;
        } else if (key == "gpus" && ParseInt(val, &v) && v >= 1) {
          j.gpus = v;
        } else if (key == "duration" && ParseInt(val, &v) && v >= 1) {
          j.duration_s = v;
          has_duration = true;
        } else if (key == "priority" && ParseInt(val, &v) && v <= 9999) {
          j.priority = static_cast<int>(v);
        } else {
          return bad("bad '" + w[k] +
                     "': submit takes team=NAME, gpus=N (>= 1), duration=S (>= 1, required), priority=P (0..9999)");
        }
      }
      if (!has_duration) return bad("submit " + j.id + " needs duration=S");
      if (job_index.count(j.id)) return bad("job " + j.id + " is submitted twice");
      job_index[j.id] = trace.size();
      trace.push_back(std::move(j));
    } else if (w[2] == "expect") {
      if (w.size() < 5) return bad("expect needs what (start, preempt, wait, run, end, held) and at least one job");
      Expect e{ln, t, w[3], {}, {}};
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
      } else {
        return bad("expect " + e.what + ": must be one of start, preempt, wait, run, end, held");
      }
      expects.push_back(std::move(e));
    } else {
      return bad("'" + w[2] + "': a line is 'at T submit ...' or 'at T expect ...'");
    }
  }
  // A job named by an expectation must be submitted at or before the expectation's time.
  for (const Expect& e : expects)
    for (const auto& name : e.jobs) {
      auto it = job_index.find(name);
      if (it == job_index.end())
        return InvalidArgument(source + ":" + std::to_string(e.line) + ": no job " + name + " is submitted");
      if (trace[it->second].submit_s > e.t_s)
        return InvalidArgument(source + ":" + std::to_string(e.line) + ": job " + name + " is submitted only at " +
                               std::to_string(trace[it->second].submit_s));
    }

  // The simulator wants the trace in submit order; the lines are in time order already.
  const Result r = Simulate(*cluster, trace);
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
