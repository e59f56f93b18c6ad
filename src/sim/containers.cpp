// Container jobs in virtual time: submits and completions are events; after each batch of
// events at one virtual time a pass of the production container pass (sched::ContainerPass)
// decides what starts, with each share's usage decayed as the controller decays it.
#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <tuple>

#include "sched/containers.h"
#include "sim/sim.h"

namespace ty::sim {

namespace {

// As the controller's kScanPerShare: entries of a share past those that fit nowhere now.
constexpr int kScanPerShare = 64;

struct ShareState {
  std::string name;
  double weight_factor = 1.0;
  sched::ContainerResources held;
  sched::ContainerUsage usage;
  std::set<std::pair<int, uint32_t>> runnable;  // (-priority, job): the controller's dispatch order
};

}  // namespace

Result SimulateContainers(const ClusterSpec& c, const sched::ContainerResources& capacity,
                          const std::vector<TraceJob>& trace, const std::vector<sched::ContainerResources>& sizes) {
  Result r;
  std::set<std::string> teams;
  for (const auto& j : trace) teams.insert(j.team);
  r.teams.assign(teams.begin(), teams.end());
  r.jobs.resize(trace.size());
  r.team_of_job.resize(trace.size());
  const bool fair = c.policy == Policy::kFairShare;
  // Shares by name, as SubmitJob's shareIdentifier (a FIFO queue has the one share "").
  std::map<std::string, ShareState> shares;
  std::vector<std::string> share_of(trace.size());
  std::vector<int> priority(trace.size(), 0);
  for (size_t i = 0; i < trace.size(); ++i) {
    r.team_of_job[i] = static_cast<int>(std::lower_bound(r.teams.begin(), r.teams.end(), trace[i].team) - r.teams.begin());
    const TeamSpec team = c.TeamOf(trace[i].team);
    share_of[i] = fair ? (team.share.empty() ? trace[i].team : team.share) : "";
    priority[i] = fair ? (trace[i].priority >= 0 ? trace[i].priority : team.priority) : 0;
    ShareState& sh = shares[share_of[i]];
    sh.name = share_of[i];
    if (auto spec = c.shares.find(sh.name); fair && spec != c.shares.end()) sh.weight_factor = spec->second.weight_factor;
  }
  sched::ContainerResources in_use;
  using End = std::pair<int64_t, uint32_t>;  // (end, job)
  std::priority_queue<End, std::vector<End>, std::greater<>> ends;
  size_t next = 0;
  int64_t last_t = trace.empty() ? 0 : trace.front().submit_s;
  while (next < trace.size() || !ends.empty()) {
    int64_t t = next < trace.size() ? trace[next].submit_s : INT64_MAX;
    if (!ends.empty()) t = std::min(t, ends.top().first);
    for (auto& [name, sh] : shares)
      sh.usage = sched::DecayedContainerUsage(sh.usage, sh.held, (t - last_t) * 1000, c.decay_seconds);
    last_t = t;
    while (!ends.empty() && ends.top().first == t) {
      const uint32_t i = ends.top().second;
      ends.pop();
      shares[share_of[i]].held -= sizes[i];
      in_use -= sizes[i];
      r.jobs[i].end_s = t;
      r.jobs[i].held_s += t - r.jobs[i].start_s;
      r.decisions.push_back({t, i, Decision::kEnd});
    }
    for (; next < trace.size() && trace[next].submit_s == t; ++next)
      shares[share_of[next]].runnable.insert({-priority[next], static_cast<uint32_t>(next)});
    // The pass, with the snapshot the controller builds: every share that holds or waits, the
    // front of each share's runnable jobs.
    sched::ContainerSnapshot snap;
    snap.environments.push_back({"ce", true, capacity, in_use});
    sched::ContainerQueue& q = snap.queues.emplace_back();
    q.name = "q";
    q.environments = {0};
    q.fair_share = fair;
    q.decay_seconds = c.decay_seconds;
    q.compute_reservation = c.compute_reservation;
    std::vector<ShareState*> listed;
    bool waiting = false;
    for (auto& [name, sh] : shares) {
      if (sh.runnable.empty() && sh.held == sched::ContainerResources{}) continue;
      waiting = waiting || !sh.runnable.empty();
      listed.push_back(&sh);
      sched::ContainerShare& out = q.shares.emplace_back();
      out.identifier = name;
      out.weight_factor = sh.weight_factor;
      out.usage = sh.usage;
      out.held = sh.held;
      sched::ContainerResources room = capacity;
      room -= in_use;
      int64_t fitting_vcpus = 0;
      int looked_past = 0;
      for (const auto& [p, i] : sh.runnable) {
        if (fitting_vcpus >= room.vcpus || looked_past >= kScanPerShare) break;
        if (sizes[i].FitsIn(room)) fitting_vcpus += sizes[i].vcpus;
        else ++looked_past;
        out.runnable.push_back({i + uint64_t{1}, sizes[i], 1});
      }
    }
    if (waiting) {
      ++r.passes;
      for (const sched::ContainerStart& s : sched::ScheduleContainers(snap)) {
        const uint32_t i = static_cast<uint32_t>(s.seq - 1);
        ShareState& sh = *listed[s.share];
        sh.runnable.erase({-priority[i], i});
        sh.held += sizes[i];
        in_use += sizes[i];
        r.jobs[i].start_s = t;
        ends.push({t + trace[i].duration_s, i});
        r.decisions.push_back({t, i, Decision::kStart});
      }
    }
  }
  return r;
}

}  // namespace ty::sim
