// The scheduling core: a pure function from a value snapshot to decisions.
//
// It reads no clock, file, socket or global; the controller, the simulator and the tests call the
// same code. Orders are total: queues by descending priority then creation order, jobs by submit
// sequence number.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ty::sched {

struct Environment {
  std::string name;
  bool enabled = true;
  int64_t max_instances = 0;  // capacityLimits NUM_INSTANCES
  int64_t in_use = 0;         // instances held by SCHEDULED/STARTING/RUNNING jobs
};

struct Job {
  uint64_t seq = 0;           // submit order; also the job's identity in decisions
  std::string instance_type;
  int64_t instance_count = 1;
};

// One share of a fair-share queue: its jobs in dispatch order (schedulingPriority descending,
// then submit order), its weight, and its usage.
struct Share {
  std::string identifier;
  double weight_factor = 1.0;  // lower gets more
  double decayed_usage = 0;    // instance-seconds, decayed (see DecayedUsage)
  int64_t held = 0;            // instances its jobs hold now
  std::vector<Job> runnable;   // a prefix, in dispatch order
};

struct FairShare {
  int compute_reservation = 0;  // percent; (r/100)^activeShares of capacity is held back
  std::vector<Share> shares;
};

struct Queue {
  std::string name;
  int priority = 0;
  uint64_t seq = 0;               // creation order, tie-breaker between equal priorities
  bool enabled = true;
  std::vector<int> environments;  // indices into Snapshot::environments, in serviceEnvironmentOrder
  // FIFO queues: a prefix of the queue's RUNNABLE jobs in submit order. Jobs past the prefix
  // wait behind it.
  std::vector<Job> runnable;
  bool truncated = false;         // true when more runnable jobs exist past `runnable`
  // Fair-share queues: set instead of `runnable`.
  std::optional<FairShare> fair_share;
};

// Free instances on this host per instance type (the instance catalogue minus what runs).
struct HostCapacity {
  std::string instance_type;
  int64_t total = 0;
  int64_t free = 0;
};

struct Snapshot {
  std::vector<Environment> environments;
  std::vector<Queue> queues;
  std::vector<HostCapacity> host;
};

struct Start {
  uint64_t job_seq;
  int environment;  // index into Snapshot::environments
};

enum class WaitKind {
  kCapacity,          // at the head of its queue; not enough free capacity now
  kBehind,            // FIFO: waits behind the queue's head
  kMisconfiguration,  // can never fit any environment of its queue
  kQueueDisabled,     // the queue or all of its environments are disabled
};

struct Wait {
  uint64_t job_seq;
  WaitKind kind;
  uint32_t reason;  // index into Decisions::reasons (many waiting jobs share one reason)
};

struct Decisions {
  std::vector<Start> starts;
  // Every job of every queue's `runnable` prefix that does not start gets one Wait.
  std::vector<Wait> waits;
  // AWS-style "CATEGORY:CODE - text" for misconfiguration, prose otherwise.
  std::vector<std::string> reasons;

  uint32_t AddReason(std::string text) {
    reasons.push_back(std::move(text));
    return static_cast<uint32_t>(reasons.size() - 1);
  }
  const std::string& ReasonOf(const Wait& w) const { return reasons[w.reason]; }
};

// One scheduling pass over every queue (FIFO or fair share).
Decisions Schedule(const Snapshot& snapshot);
inline Decisions ScheduleFifo(const Snapshot& snapshot) { return Schedule(snapshot); }

// Fair-share usage after `dt_ms` more milliseconds during which the share held `held`
// instances: the exponentially decayed integral of held capacity, time constant
// `decay_seconds` (0 means 600 s). Pure; callers keep the value between passes.
double DecayedUsage(double usage, int64_t held, int64_t dt_ms, int64_t decay_seconds);

// The order key of a share: lower goes first.
inline double ShareKey(const Share& s) { return (s.decayed_usage + static_cast<double>(s.held)) * s.weight_factor; }

// The AWS reason string for a job that can never fit.
inline constexpr const char* kMaxResourceReason =
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated with "
    "the job queue cannot meet the capacity requirement of the job.";

}  // namespace ty::sched
