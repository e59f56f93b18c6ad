// The scheduling discipline of a job queue, decided in one place.
#pragma once

#include "control/state.h"

namespace ty::control {

enum class QueueKind {
  kFifo,       // no scheduling policy: submit order
  kFairShare,  // a fair-share policy (or a policy ARN that no longer resolves): shares by weight
  kQuota,      // a quota-share policy: shares with guaranteed capacity (sched/quota.h)
};

// Every place that treats queues by kind asks this function, so that the rule lives here only.
QueueKind KindOf(const State& s, const JobQueue& q);

}  // namespace ty::control
