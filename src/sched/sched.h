// The scheduling core: a pure function from a value snapshot to decisions.
//
// It reads no clock, file, socket or global; the controller, the simulator and the tests call the
// same code. Orders are total: queues by descending priority then creation order, jobs by submit
// sequence number.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ty::sched {

// Arbitration: who is offered the host's capacity first in one pass (docs/scheduling.md,
// "Arbitration between kinds of work"). The controller runs the participants in this order over
// one host catalogue, each seeing what the ones before it took:
//   1. training jobs created with CreateTrainingJob (outside any queue), in creation order: they
//      are already InProgress in SageMaker's terms, so they get free instances first;
//   2. FIFO and fair-share queues together, in one Schedule() call: by descending queue priority,
//      then creation order, on shared environments (a lower queue may backfill around a higher
//      queue's head but never delay it);
//   3. quota-share queues, one ScheduleQuotaShares() call each in queue-name order, each on the
//      environment it alone uses, with what remains of the host.
enum class Participant { kTrainingJobs, kQueues, kQuotaQueues };
inline constexpr Participant kArbitrationOrder[] = {Participant::kTrainingJobs, Participant::kQueues,
                                                    Participant::kQuotaQueues};

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
  // Upper bound of its runtime (StoppingCondition.MaxRuntimeInSeconds); 0: unbounded. Backfill
  // and start-time estimates rely on it.
  int64_t max_runtime_ms = 0;
  // The job is not started before this time (a capacity-failure backoff, or the arrival batch of
  // an idle fair-share queue); until then it waits aside (WaitKind::kNotBefore) and neither
  // blocks the jobs behind it nor holds capacity for itself. 0: no such hold.
  int64_t not_before_ms = 0;
  // A capacity ladder: the host capacity keys (HostCapacity::instance_type) it accepts, in order
  // of preference, with `instance_type` first. The pass places it on the first rung with room
  // (Start::rung); when none has room it waits, and reserves, for the first. Empty: only
  // `instance_type`.
  std::vector<std::string> rungs{};
};

// A job that holds capacity now, with the latest time it gives it back.
struct Running {
  int environment = -1;  // index into Snapshot::environments; -1: none of them
  std::string instance_type;
  int64_t instance_count = 1;
  int64_t end_ms = 0;    // start + its runtime bound; 0: unbounded
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
  int64_t decay_seconds = 0;     // shareDecaySeconds; 0 means 600
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
  // EASY backfill: when the head cannot start, capacity is reserved for it at the earliest time
  // the running jobs' runtime bounds free enough, and jobs behind it start now only when they
  // cannot delay it. false: the head blocks the queue, as on AWS.
  bool backfill = true;
};

// Free instances on this host per instance type (the instance catalogue minus what runs).
struct HostCapacity {
  std::string instance_type;
  int64_t total = 0;
  int64_t free = 0;
};

struct Snapshot {
  int64_t now_ms = 0;
  std::vector<Environment> environments;
  std::vector<Queue> queues;
  std::vector<HostCapacity> host;
  // What holds capacity now. Capacity in use that no entry explains is never given back, as far
  // as backfill and estimates know.
  std::vector<Running> running;
};

struct Start {
  uint64_t job_seq;
  int environment;  // index into Snapshot::environments
  int rung = -1;    // index into the job's `rungs`; -1: it has none
};

enum class WaitKind {
  kCapacity,          // at the head of its queue; not enough free capacity now
  kBehind,            // waits behind the queue's head (and could delay it, with backfill)
  kMisconfiguration,  // can never fit any environment of its queue
  kQueueDisabled,     // the queue or all of its environments are disabled
  kReserved,          // at the head of its queue; it fits now, but capacity is reserved for
                      // an earlier queue's head job that it could delay
  kNotBefore,         // held back until Job::not_before_ms; the jobs behind it go on
};

struct Wait {
  uint64_t job_seq;
  WaitKind kind;
  uint32_t reason;  // index into Decisions::reasons (many waiting jobs share one reason)
};

// A queue's first waiting jobs in dispatch order: what GetJobQueueSnapshot shows. The estimate
// comes from starting them in that order on a simulated timeline where running jobs end at their
// runtime bounds; 0: not known.
struct FrontJob {
  uint64_t job_seq;
  size_t wait;                 // index into Decisions::waits
  int64_t estimated_start_ms;
};

struct QueueFront {
  std::string queue;
  std::vector<FrontJob> jobs;  // at most kEstimatedPerQueue
};

// Capacity held back for a queue's head job (EASY backfill).
struct Reservation {
  uint64_t job_seq;
  int environment;
  std::string instance_type;
  int64_t at_ms;  // when the head is expected to fit; INT64_MAX: not known
};

struct Decisions {
  std::vector<Start> starts;
  std::vector<QueueFront> fronts;         // one per enabled queue, in scheduling order
  std::vector<Reservation> reservations;
  // Every job of every queue's `runnable` prefix that does not start gets one Wait.
  std::vector<Wait> waits;
  // AWS-style "CATEGORY:CODE - text" for misconfiguration, prose otherwise.
  std::vector<std::string> reasons;
  // Reasons that name another job ("queued behind job ..."): reason index -> that job's seq. The
  // pass knows jobs by seq only, so their text holds kJobMark where the job goes, and the caller
  // names it as its users know it (ReasonNaming: the server writes the job's id and name).
  std::map<uint32_t, uint64_t> reason_jobs;

  uint32_t AddReason(std::string text, std::optional<uint64_t> about_job = std::nullopt) {
    reasons.push_back(std::move(text));
    const auto i = static_cast<uint32_t>(reasons.size() - 1);
    if (about_job) reason_jobs[i] = *about_job;
    return i;
  }
  const std::string& ReasonOf(const Wait& w) const { return reasons[w.reason]; }
  // reasons[i] with the job it names written in by `name_job(seq)` (unchanged when it names none).
  template <typename NameJob>
  std::string NamedReason(uint32_t i, NameJob name_job) const {
    std::string text = reasons[i];
    auto about = reason_jobs.find(i);
    if (about == reason_jobs.end()) return text;
    const size_t at = text.find(kJobMark);
    if (at != std::string::npos) text.replace(at, std::string_view(kJobMark).size(), name_job(about->second));
    return text;
  }
  static constexpr const char* kJobMark = "{job}";
  const QueueFront* FrontOf(const std::string& queue) const {
    for (const auto& f : fronts)
      if (f.queue == queue) return &f;
    return nullptr;
  }
};

inline constexpr size_t kEstimatedPerQueue = 100;

// One scheduling pass over every queue (FIFO or fair share).
Decisions Schedule(const Snapshot& snapshot);
inline Decisions ScheduleFifo(const Snapshot& snapshot) { return Schedule(snapshot); }

// Fair-share usage after `dt_ms` more milliseconds during which the share held `held`
// instances: the exponentially decayed integral of held capacity, time constant
// `decay_seconds` (0 means 600 s). Pure; callers keep the value between passes.
double DecayedUsage(double usage, int64_t held, int64_t dt_ms, int64_t decay_seconds);

// A fair share's place in its queue's dispatch order, lower goes first:
//   (4 x decayed_usage / tau + held + candidate) x weight_factor,  tau = decay_seconds (0: 600).
// decayed_usage / tau is what the share held on average over the decay window, in instances.
// The scheduler passes half the size of the share's next job as `candidate`; with candidate 0
// it is the share's weighted usage (GET /metrics, trainyard_fairshare_weighted_usage_instances).
double ShareOrderKey(double decayed_usage, int64_t held, double candidate, double weight_factor,
                     int64_t decay_seconds);


// The AWS reason string for a job that can never fit.
inline constexpr const char* kMaxResourceReason =
    "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated with "
    "the job queue cannot meet the capacity requirement of the job.";

}  // namespace ty::sched
