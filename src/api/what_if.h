// WhatIf (POST /trainyard/v1/what-if; docs/simulate.md, "What if"): a job queue's recent history
// replayed through the simulator (src/sim/) with its current settings and with changed share
// weights, quotas or capacity, beside what happened.
//
// Three steps, so that the controller's lock is held only while the history is copied:
//   ReadQueueHistory  (under Controller::Read) the queue's settings and the jobs of the window;
//   CheckChanges      the requested changes against that history (names, ranges);
//   ToReplay          the history as the simulator's cluster spec and trace, with or without them;
// then sim::Simulate twice and Figures over each outcome.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "sim/sim.h"

namespace ty {
struct Config;
namespace control {
struct State;
}
}  // namespace ty

namespace ty::api::what_if {

using EpochMs = int64_t;

// One service job of the window, as it happened up to the window's end.
struct HistoryJob {
  uint64_t seq = 0;
  std::string share;  // its share identifier or quota share; "" on a FIFO queue
  int priority = 0;   // schedulingPriority
  int64_t instances = 1;
  EpochMs submitted = 0;
  // When it held capacity (SCHEDULED, STARTING or RUNNING), in order; a span still open at the
  // window's end is closed there. Empty: it never started.
  std::vector<std::pair<EpochMs, EpochMs>> held;
  bool finished = false;       // SUCCEEDED or FAILED by the window's end
  int64_t lost_ms = 0;         // work its preemptions threw away (per instance)
  int64_t runtime_bound_ms = 0;  // MaxRuntimeInSeconds, or the server's one-day default
};

// A queue's settings and the service jobs submitted in [start, end), those that ran or still
// wait or run at `end`; the jobs that ended without running are only counted.
struct QueueHistory {
  std::string queue;
  sim::Policy policy = sim::Policy::kFifo;
  int64_t capacity = 0;  // instances: its service environments' limits, within what the host has
  int64_t decay_seconds = 0;        // fair share
  int compute_reservation = 0;      // fair share
  int64_t min_runtime_s = 0;        // quota: the queue's trainyard:minRuntimeSeconds tag
  std::map<std::string, double> weights;          // fair share: each share of the window -> weightFactor
  std::map<std::string, sim::ShareSpec> quotas;   // quota: the queue's quota shares (limits summed over types)
  std::vector<std::string> instance_types;        // of the window's jobs, sorted
  std::vector<std::string> other_queues;          // queues that share its service environments
  EpochMs start = 0, end = 0;
  std::vector<HistoryJob> jobs;  // by submit order
  int64_t never_ran = 0;         // ended (terminated, failed) without holding capacity: left out
};

// REQUIRES: the controller's state lock (call inside Controller::Read). NotFound for a queue
// that does not exist; InvalidArgument for a container (ECS) queue, or a window that holds
// more than `max_jobs` jobs of the queue.
StatusOr<QueueHistory> ReadQueueHistory(const control::State& s, const Config& config, const std::string& queue_ref,
                                        EpochMs start, EpochMs end, int64_t max_jobs);

// What the request changes. Ranges are checked when the request is read; CheckChanges checks
// the names against the queue.
struct Changes {
  std::map<std::string, double> weights;  // share identifier -> weightFactor
  std::map<std::string, int64_t> quotas;  // quota share -> instances
  std::optional<int64_t> capacity;        // instances
};

// InvalidArgument naming the member: weights on a queue without a fair-share policy, or for a
// share that ran no job in the window; quotas on a queue without quota shares, or for a share
// that is not one of its own.
Status CheckChanges(const QueueHistory& h, const Changes& changes);

// The history as the simulator's input. Times are whole seconds from the window's start. A job
// that finished runs for the time it held capacity less the work its preemptions lost; one still
// running for the time it has held capacity so far; one still waiting for its runtime bound
// (what the scheduler itself assumes of it). Each share is one team of the trace; each job keeps
// its own schedulingPriority. trace[k] is history.jobs[k].
struct Replay {
  sim::ClusterSpec cluster;
  std::vector<sim::TraceJob> trace;
};
Replay ToReplay(const QueueHistory& h, const Changes& changes);

// Waits and capacity of a set of jobs. Waits are of the jobs that started (for what happened,
// also those still waiting, counted up to the window's end); capacity is what they held inside
// the window.
struct Figures {
  int64_t jobs = 0;
  std::vector<double> waits_s;  // sorted
  double instance_seconds = 0;  // held inside the window
};
struct FiguresByShare {
  std::map<std::string, Figures> shares;  // by share ("" on a FIFO queue)
  Figures total;
};
// What happened, from the history.
FiguresByShare ActualFigures(const QueueHistory& h);
// The replay's outcome. `never_started` counts its jobs that could not start at all (larger than
// the capacity or their quota allows).
FiguresByShare SimulatedFigures(const QueueHistory& h, const Replay& replay, const sim::Result& result,
                                int64_t* never_started);

// Nearest-rank percentile of sorted values (the simulator's summary.json rule); nullopt when empty.
std::optional<double> Percentile(const std::vector<double>& sorted, int p);

}  // namespace ty::api::what_if
