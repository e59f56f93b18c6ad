// Quota-share scheduling: guaranteed capacity per share, lending of idle capacity, borrowing
// within limits, and preemption to give borrowed capacity back or to honour priorities inside a
// share. Pure: a value snapshot in, decisions out (Batch's quota shares; docs/scheduling.md and
// docs/design/decisions.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ty::sched {

enum class SharingStrategy { kReserve, kLend, kLendAndBorrow };

struct QuotaJob {
  uint64_t seq = 0;  // submit order; identity in decisions
  std::string instance_type;
  int64_t instance_count = 1;
  int priority = 0;  // schedulingPriority
  int64_t max_runtime_ms = 0;  // runtime bound, for estimates; 0: unbounded
  // It waited on preemptions in the previous pass (QuotaDecisions::promised): it is offered
  // capacity before every other job, so that what its victims free goes to it.
  bool nominated = false;
};

struct QuotaRunningJob {
  uint64_t seq = 0;
  int share = 0;  // index into QuotaSnapshot::shares
  std::string instance_type;
  int64_t instance_count = 1;
  int priority = 0;
  uint64_t start_order = 0;  // larger = started more recently
  bool preempting = false;   // already told to stop; its capacity is on its way back
  bool preemptible = true;   // false while inside the queue's minimum runtime
  int64_t end_ms = 0;        // when it gives its capacity back at the latest; 0: not known
  // Work that a preemption would throw away runs from its last checkpoint, or from when it
  // started when it never checkpointed. 0: not known; both 0: no work counted as lost.
  int64_t started_ms = 0;
  int64_t last_checkpoint_ms = 0;
};

// Instance-milliseconds a preemption of `r` at `now_ms` throws away: instances × time since its
// last checkpoint (or its start). 0 when neither is known.
int64_t WorkLostMs(const QuotaRunningJob& r, int64_t now_ms);

// Idle capacity kept warm for a share: a warm pool that a finished job left (docs/warm-pools.md).
// It holds its share's instances like a running job below every priority and newer than every
// attempt, so it is the first victim when a share reclaims its quota; a preemption of it
// (QuotaPreemption::victim_seq == seq) means: release it. It holds only while nothing waiting
// could use it: it counts as free capacity when a job of its own share waits, when a waiting job
// would take it over (`wanted`), or, when its share lends, when a job of another share that may
// borrow waits (that job takes it over or releases it when it starts).
struct IdleHold {
  uint64_t seq = 0;  // identity in decisions; distinct from every job's seq
  int share = 0;     // index into QuotaSnapshot::shares
  std::string instance_type;
  int64_t instance_count = 1;
  int64_t expires_ms = 0;  // when it gives its capacity back at the latest
  bool wanted = false;     // a waiting job matches it and would take it over
};

struct QuotaShareSpec {
  std::string name;
  std::map<std::string, int64_t> limit;  // instance type -> instances guaranteed
  SharingStrategy strategy = SharingStrategy::kLendAndBorrow;
  int64_t borrow_limit_percent = -1;     // of its own limit per type; -1: unlimited
  bool in_share_preemption = false;
  std::vector<QuotaJob> runnable;        // any order; the library orders them
};

struct QuotaSnapshot {
  int64_t now_ms = 0;
  std::map<std::string, int64_t> capacity;  // what the queue may use now per instance type
  // The most it could ever use per type (the environment's limit, or the host's whole catalogue
  // when smaller): a job above it can never run. Types missing here use `capacity`.
  std::map<std::string, int64_t> ceiling;  // the environment's limit per instance type
  std::vector<QuotaShareSpec> shares;
  std::vector<QuotaRunningJob> running;
  std::vector<IdleHold> idle_holds;
};

struct QuotaStart {
  uint64_t job_seq;
  bool borrowing;  // runs on capacity lent by other shares
};

struct QuotaPreemption {
  uint64_t victim_seq;
  uint64_t for_job_seq;
  bool in_share;  // true: priority inside a share; false: reclaim of borrowed capacity
};

struct QuotaWait {
  uint64_t job_seq;
  uint32_t reason;  // index into QuotaDecisions::reasons (many waiting jobs share one reason)
};

struct QuotaDecisions {
  std::vector<QuotaStart> starts;
  std::vector<QuotaPreemption> preemptions;
  // Jobs that wait on preemptions (victims of this pass or earlier ones): pass them back as
  // nominated in the next pass.
  std::vector<uint64_t> promised;
  // Every runnable job that does not start, in the order jobs are offered capacity.
  std::vector<QuotaWait> waits;
  // "MISCONFIGURATION:..." codes as AWS; prose otherwise.
  std::vector<std::string> reasons;
  // The first 100 waiting jobs with when each is expected to start: the jobs are started on a
  // simulated timeline where what runs ends at its runtime bound, each as soon as its share's
  // quota and borrowing rules let it (preemption left out). 0: not known.
  struct FrontJob {
    uint64_t job_seq;
    size_t wait;  // index into waits
    int64_t estimated_start_ms;
  };
  std::vector<FrontJob> front;

  const std::string& ReasonOf(const QuotaWait& w) const { return reasons[w.reason]; }
};

QuotaDecisions ScheduleQuotaShares(const QuotaSnapshot& snapshot);

inline constexpr const char* kQuotaLimitReason =
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requirements exceed quota share capacity limits.";
inline constexpr const char* kQuotaBorrowLimitReason =
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requirements exceed quota share capacity limits and "
    "borrow limits.";
inline constexpr const char* kQuotaBorrowableReason =
    "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requires borrowing that exceeds all configured borrowable "
    "capacity.";

}  // namespace ty::sched
