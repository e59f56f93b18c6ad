// Managed spot training (docs/spot.md): interruptions, their random source, and billing.
#include <spdlog/spdlog.h>

#include <cmath>
#include <random>

#include "control/controller.h"
#include "control/turn.h"

namespace ty::control {

namespace {

// splitmix64: a small, well-mixed generator whose whole state is one integer.
uint64_t NextRandom(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Uniform(uint64_t& state) { return static_cast<double>(NextRandom(state) >> 11) * 0x1.0p-53; }

}  // namespace

void Controller::PriceRun(TrainingJob& tj, bool spot) const {
  tj.on_spot = spot;
  const InstanceTypeSpec* spec = config_.FindInstanceType(tj.instance_type);
  tj.run_on_demand_per_hour = spec ? spec->price_per_hour : 0;
  tj.run_price_per_hour = spec ? spec->PricePerHour(spot) : 0;
}

void Controller::CloseRun(TrainingJob& tj, EpochMs end) const {
  if (end <= tj.billed_until) return;
  const double seconds = tj.RunSeconds(tj.billed_until, end, end);
  const double ratio = tj.run_on_demand_per_hour > 0 ? tj.run_price_per_hour / tj.run_on_demand_per_hour : 1.0;
  const double count = static_cast<double>(tj.instance_count);
  tj.billed_seconds += seconds * ratio;
  tj.cost_usd += seconds * count * tj.run_price_per_hour / 3600.0;
  tj.on_demand_cost_usd += seconds * count * tj.run_on_demand_per_hour / 3600.0;
  tj.billed_until = end;
}

void Controller::Interrupt(Turn& t, TrainingJob& tj, const std::string& why) {
  tj.stop_cause = StopCause::kInterrupt;
  ++tj.interruptions;
  ++state_.telemetry.spot_interruptions[tj.instance_type];
  AddTransition(t, tj, SecondaryStatus::kInterrupted,
                "Spot interruption (" + why + "): the instances have " + std::to_string(config_.spot_notice_seconds) +
                    " s to save a checkpoint and exit; the job restarts when spot capacity is available.",
                t.now);
  t.interrupts.emplace_back(tj.name, config_.spot_notice_seconds);
}

Status Controller::InterruptTrainingJob(const std::string& name) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    TrainingJob* tj = state_.FindTrainingJob(name);
    if (!tj) return NotFound("Requested resource not found: training job " + name);
    if (!tj->spec.managed_spot && tj->capacity_ladder.find(":spot") == std::string::npos)
      return FailedPrecondition("The training job " + name + " does not use managed spot training (EnableManagedSpotTraining), "
                                "so it has no spot capacity to reclaim");
    if (tj->status != TrainingJobStatus::kInProgress)
      return FailedPrecondition("The training job " + name + " is " + ToWire(tj->status) + ", not InProgress");
    if (!tj->launched || tj->stop_cause == StopCause::kInterrupt || !tj->on_spot)
      return FailedPrecondition("The training job " + name + " has no running spot instances (it is " +
                                ToWire(tj->secondary_status) + ", waiting for spot capacity)");
    Interrupt(t, *tj, "trainyard admin interrupt");
    return Status::Ok();
  });
}

void Controller::InjectSpotInterruptions(Turn& t, EpochMs elapsed_ms) {
  if (chaos_state_ == 0) chaos_state_ = config_.chaos_seed ? config_.chaos_seed : std::random_device{}() | 1ull;
  std::vector<TrainingJob*> hit;
  for (const auto& [seq, name] : state_.live_training_jobs) {
    TrainingJob& tj = state_.training_jobs.at(name);
    if (!tj.launched || !tj.on_spot || tj.status != TrainingJobStatus::kInProgress || tj.stop_cause != StopCause::kNone) continue;
    const InstanceTypeSpec* spec = config_.FindInstanceType(tj.instance_type);
    if (!spec || spec->spot_interruptions_per_hour <= 0) continue;
    // Each instance is reclaimed independently at the type's rate; losing any ends the run.
    const double rate = spec->spot_interruptions_per_hour * static_cast<double>(tj.instance_count);
    const double p = 1.0 - std::exp(-rate * static_cast<double>(elapsed_ms) / 3'600'000.0);
    if (Uniform(chaos_state_) < p) hit.push_back(&tj);
  }
  for (TrainingJob* tj : hit) {
    spdlog::info("random spot interruption of {}", tj->name);
    Interrupt(t, *tj, "random interruption at the configured rate for " + tj->instance_type);
  }
}

}  // namespace ty::control
