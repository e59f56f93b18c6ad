// Managed warm pools: the rules that need no state (docs/warm-pools.md).
// Pure functions over a CreateTrainingJob request and times; unit-tested in warm_pool_test.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/clock.h"
#include "core/model.h"

namespace ty::control {

// A chain of jobs on one pool lives at most 28 days from the pool's creation (SageMaker's managed warm pools).
constexpr EpochMs kWarmPoolMaxLifetimeMs = 28LL * 24 * 3600 * 1000;
constexpr int64_t kMaxKeepAliveSeconds = 21600;  // ResourceConfig.KeepAlivePeriodInSeconds

inline int64_t KeepAliveOf(const nlohmann::json& req) {
  auto rc = req.find("ResourceConfig");
  if (rc == req.end() || !rc->is_object()) return 0;
  auto k = rc->find("KeepAlivePeriodInSeconds");
  return k == rc->end() || !k->is_number_integer() ? 0 : k->get<int64_t>();
}

// The matching criteria as one comparable string: the job's owner (the principal that submitted
// it, trainyard:JobOwner), so that a pool, whose workspaces and caches hold what its jobs left, is
// only ever taken over by a job of the same owner; then SageMaker's: RoleArn; ResourceConfig
// InstanceCount, InstanceType, VolumeKmsKeyId, VolumeSizeInGB; VpcConfig SecurityGroupIds and
// Subnets (as sets); EnableInterContainerTrafficEncryption; EnableNetworkIsolation.
// Hyperparameters, data, image and Environment are not part of it.
inline std::string WarmPoolMatchKey(const nlohmann::json& req, const std::string& owner) {
  using nlohmann::json;
  const json rc = req.value("ResourceConfig", json::object());
  json vpc = req.contains("VpcConfig") && req["VpcConfig"].is_object() ? req["VpcConfig"] : json::object();
  auto sorted = [](json a) {
    if (!a.is_array()) return json::array();
    std::vector<std::string> v;
    for (auto& x : a) v.push_back(x.is_string() ? x.get<std::string>() : x.dump());
    std::sort(v.begin(), v.end());
    return json(v);
  };
  json key = json::array({owner, req.value("RoleArn", ""), rc.value("InstanceType", ""), rc.value("InstanceCount", int64_t{1}),
                          rc.value("VolumeKmsKeyId", ""), rc.value("VolumeSizeInGB", int64_t{0}),
                          sorted(vpc.value("SecurityGroupIds", json::array())), sorted(vpc.value("Subnets", json::array())),
                          req.value("EnableInterContainerTrafficEncryption", false),
                          req.value("EnableNetworkIsolation", false)});
  return key.dump();
}

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
