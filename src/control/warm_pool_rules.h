// Managed warm pools: the rules that need no state (docs/warm-pools.md).
// Pure functions over a training spec and times; unit-tested in warm_pool_test.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/clock.h"
#include "core/model.h"
#include "core/training_spec.h"

namespace ty::control {

// A chain of jobs on one pool lives at most 28 days from the pool's creation (SageMaker's managed warm pools).
constexpr EpochMs kWarmPoolMaxLifetimeMs = 28LL * 24 * 3600 * 1000;
constexpr int64_t kMaxKeepAliveSeconds = 21600;  // ResourceConfig.KeepAlivePeriodInSeconds

// The matching criteria are a function of the training spec: WarmPoolMatchKey (core/training_spec.h).

// How a training job ended, as far as its warm pool is concerned.
enum class PoolOutcome {
  kKept,          // completed, stopped after it started, or failed with an algorithm/client error
  kNotStarted,    // stopped before its instances were prepared
  kPreempted,     // preempted: its capacity is wanted elsewhere
  kInfrastructure // InternalServerError or a lost instance: the instances may be unhealthy
};

// REQUIRES: status is final (Completed, Stopped or Failed).
inline PoolOutcome ClassifyPoolOutcome(TrainingJobStatus status, const std::string& failure_reason,
                                       bool started, StopCause stop_cause) {
  if (status == TrainingJobStatus::kFailed)
    return failure_reason.rfind("InternalServerError", 0) == 0 ? PoolOutcome::kInfrastructure : PoolOutcome::kKept;
  if (status == TrainingJobStatus::kStopped) {
    if (stop_cause == StopCause::kPreempt) return PoolOutcome::kPreempted;
    return started ? PoolOutcome::kKept : PoolOutcome::kNotStarted;
  }
  return PoolOutcome::kKept;
}

// When an Available pool ends: its keep-alive from `since`, but never past the chain's lifetime.
inline EpochMs WarmPoolExpiry(EpochMs since, int64_t keep_alive_seconds, EpochMs created_at) {
  return std::min(since + keep_alive_seconds * 1000, created_at + kWarmPoolMaxLifetimeMs);
}

}  // namespace ty::control
