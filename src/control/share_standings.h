// Where each job queue's shares stand now: what each holds against what it is entitled to, what
// it borrows and lends, and how many of its jobs wait. One computation behind GET /metrics'
// share gauges (api/metrics.cpp), QueueStandings and the share history (share_history.h), so that
// the three never disagree. Pure: reads a State under the caller's lock, no clock, no I/O.
//
// Cost: one walk of the active service jobs (SCHEDULED, STARTING, RUNNING: bounded by the host's
// capacity), then per queue its shares and per-status index sizes; never a walk of queued jobs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "control/share_history.h"
#include "control/state.h"

namespace ty::control {

// What the active service jobs hold, in instances, walked once.
struct Holdings {
  std::map<std::pair<std::string, std::string>, int64_t> by_environment;  // (environment, capacity key)
  std::map<std::pair<std::string, std::string>, int64_t> by_share;        // (queue, share), shares only
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> by_quota_type;  // (queue, quota share, type)
};
Holdings ActiveHoldings(const State& s);

// A fair share's place in its queue's order (docs/metrics.md, trainyard_fairshare_*).
struct FairShareStanding {
  // Decayed usage (instance-seconds) as of the queue's last pass, and the scheduler's order key
  // from it; absent before the share was first weighed by a pass.
  std::optional<double> usage;
  std::optional<double> weighted_usage;
  double weight_factor = 1;
  // 1/weightFactor over the sum of 1/weightFactor of the queue's active shares (0 when not
  // active), and that fraction of the NUM_INSTANCES limits of the queue's service environments.
  double entitlement_ratio = 0;
  double entitlement_instances = 0;
};

// A quota share's ledger for one instance type.
struct QuotaTypeLedger {
  int64_t limit = 0;     // its capacity limit for the type (0: none)
  int64_t in_use = 0;    // what its active jobs hold
  int64_t borrowed = 0;  // in_use above limit
  // Of its idle limit (LEND and LEND_AND_BORROW shares only), what other shares borrow: the
  // queue's borrowing of the type attributed to the lenders in proportion to their idle limits
  // (largest remainder, ties to the first share by name).
  int64_t lent = 0;
};

struct ShareStanding {
  std::string share;
  int64_t in_use = 0;   // instances its SCHEDULED, STARTING and RUNNING jobs hold
  int64_t waiting = 0;  // its RUNNABLE jobs
  // In instances. Fair share: entitlement_instances; held above it is borrowed, and the queue's
  // borrowing is attributed to the shares below theirs in proportion to their idle entitlement.
  // Quota share: the sums over its instance types.
  double entitlement = 0;
  double borrowed = 0;
  double lent = 0;
  std::optional<FairShareStanding> fair;                // fair-share queues
  std::map<std::string, QuotaTypeLedger> quota_types;  // quota-share queues: by instance type
};

struct QueueStanding {
  std::string queue;
  QueueKind kind = QueueKind::kFifo;
  ResourceState state = ResourceState::kEnabled;
  // Unfinished jobs per status (SUBMITTED to RUNNING), from the per-status indexes.
  std::map<JobStatus, int64_t> counts;
  // Every share the queue knows: fair shares weighed by a pass or with unfinished jobs; quota
  // shares defined on it or holding capacity. In name order; none for a FIFO queue.
  std::vector<ShareStanding> shares;
  // Quota-share queues: per instance type, what shares borrow beyond all lenders' idle limits
  // (the queue's capacity that no share's limit covers).
  std::map<std::string, int64_t> unassigned_lent;
};

// The standings of every queue (name order), or of `only` when it is set. REQUIRES: the state
// lock, shared at least; `held` = ActiveHoldings(s) of the same state.
std::vector<QueueStanding> ShareStandings(const State& s, const Holdings& held, const std::string* only = nullptr);

// "FIFO", "FAIR_SHARE" or "QUOTA_SHARE".
const char* QueueKindName(QueueKind kind);

// What the share history keeps of one queue's standing.
QueueSample SampleOf(const QueueStanding& q, EpochMs at);

}  // namespace ty::control
