// Training jobs: creation, launch, executor events, stopping, timeouts and metrics.
#include <re2/re2.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>

#include "control/controller.h"
#include "control/ladder.h"
#include "control/metric_regex.h"
#include "control/system_metrics.h"
#include "control/turn.h"
#include "control/warm_pool_rules.h"
#include "core/strings.h"
#include "exec/executor.h"

namespace ty::control {

namespace {

constexpr const char* kSmPrefix = "Received status from SageMaker: ";

// The action of the first evaluateOnExit entry whose conditions all match the attempt's status
// reason; an entry without onStatusReason matches any reason. No entry matching means RETRY
// (the AWS Batch rule for container jobs; docs/design/decisions.md). Actions were read
// case-insensitively when the strategy was parsed.
ExitRule::Action RetryActionFor(const std::vector<ExitRule>& rules, const std::string& status_reason) {
  for (const auto& r : rules) {
    if (r.on_status_reason && !GlobMatch(*r.on_status_reason, status_reason)) continue;
    return r.action;
  }
  return ExitRule::Action::kRetry;
}

int PhaseRank(SecondaryStatus secondary) {
  switch (secondary) {
    case SecondaryStatus::kDownloading: return 1;
    case SecondaryStatus::kTraining: return 2;
    case SecondaryStatus::kUploading: return 3;
    default: return 0;
  }
}

}  // namespace

std::string Controller::FileSystemPath(const std::string& id) const {
  for (const auto& [name, dir] : config_.file_systems)
    if (name == id) return dir;
  return "";
}

std::unique_ptr<exec::LogFile> Controller::OpenLog(const std::string& training_job, int instance) const {
  return executor_ ? executor_->OpenLog(training_job, instance) : nullptr;
}

exec::Executor::LogChunk Controller::ReadLog(const std::string& training_job, int instance, int64_t offset,
                                             int64_t max_bytes) const {
  return executor_ ? executor_->ReadLog(training_job, instance, offset, max_bytes) : exec::Executor::LogChunk{"", offset};
}

void Controller::SweepLogs(EpochMs now, std::vector<std::string>* jobs) {
  if (config_.logs_retention_days <= 0 || !executor_ || now - last_log_sweep_ < 60000) return;
  last_log_sweep_ = now;
  const EpochMs cutoff = now - config_.logs_retention_days * 86400000;
  for (const auto& [name, tj] : state_.training_jobs) {
    if (IsLive(tj.status) || tj.training_end_time <= 0) continue;
    if (tj.training_end_time >= cutoff || logs_swept_.count(name)) continue;
    // Its system metrics are in the store (State::system_series); the samples were their source.
    jobs->push_back(name);
    logs_swept_.insert(name);
  }
}

StatusOr<TrainingJob> Controller::CreateTrainingJob(const CreateTrainingJobCommand& cmd) {
  const TrainingRequest& req = cmd.request;
  TrainingJob tj;
  tj.name = req.spec.training_job_name;
  tj.arn = Arn("sagemaker", "training-job/" + ToLower(tj.name));
  tj.owner = cmd.owner;
  tj.request_json = req.json;
  tj.spec = req.spec;
  tj.tags = req.spec.tags;
  tj.instance_type = req.spec.instance_type;
  tj.instance_count = req.spec.instance_count;
  tj.capacity_ladder = cmd.capacity_ladder;
  tj.fallback_after_interruptions = cmd.fallback_after_interruptions;
  return Execute<TrainingJob>([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> StatusOr<TrainingJob> {
    if (state_.FindTrainingJob(tj.name))
      return AlreadyExists("Training job names must be unique within an AWS account and region, and a training job with this name already exists (" + tj.arn + ")");
    tj.seq = state_.next_seq++;
    tj.creation_time = tj.last_modified_time = t.now;
    tj.secondary_status = SecondaryStatus::kStarting;
    tj.transitions.push_back({SecondaryStatus::kStarting, t.now, 0, "Starting the training job."});
    state_.AddTrainingJob(tj);
    t.training_jobs.insert(tj.name);
    TrainingJobEvent(t, tj.name, SecondaryStatus::kStarting, "Starting the training job.", t.now);
    t.reschedule = true;
    return tj;
  });
}

Status Controller::StopTrainingJob(const std::string& name) {
  return ExecuteStatus([&](Turn& t) REQUIRES(turn_mu_, state_mu_) -> Status {
    TrainingJob* found = state_.FindTrainingJob(name);
    if (!found) return NotFound("Requested resource not found: training job " + name);
    TrainingJob& tj = *found;
    if (tj.status != TrainingJobStatus::kInProgress)
      return FailedPrecondition("The training job " + name + " is " + ToWire(tj.status) + " and cannot be stopped");
    RequestStop(t, tj, StopCause::kUser, "Stopping the training job.");
    if (!tj.launched) {
      // Never launched: nothing to stop, it is Stopped at once.
      exec::AttemptEvent e;
      e.attempt_id = tj.name;
      e.phase = exec::Phase::kExited;
      e.at = t.now;
      e.stopped = true;
      ApplyEvent(t, e);
    }
    return Status::Ok();
  });
}

namespace {
// The TrainingJobStatus a SecondaryStatus belongs to (SageMaker API reference, DescribeTrainingJob).
TrainingJobStatus PrimaryStatusOf(SecondaryStatus secondary) {
  switch (secondary) {
    case SecondaryStatus::kCompleted: return TrainingJobStatus::kCompleted;
    case SecondaryStatus::kFailed: return TrainingJobStatus::kFailed;
    case SecondaryStatus::kStopping: return TrainingJobStatus::kStopping;
    case SecondaryStatus::kStopped:
    case SecondaryStatus::kMaxRuntimeExceeded:
    case SecondaryStatus::kMaxWaitTimeExceeded: return TrainingJobStatus::kStopped;
    default: return TrainingJobStatus::kInProgress;
  }
}
}  // namespace

void Controller::AddTransition(Turn& t, TrainingJob& tj, SecondaryStatus secondary, const std::string& message,
                               EpochMs at) {
  tj.secondary_status = secondary;
  tj.last_modified_time = t.now;
  t.training_jobs.insert(tj.name);
  // Starting again (created, then launching the instances) only updates its message.
  if (secondary == SecondaryStatus::kStarting && !tj.transitions.empty() && tj.transitions.back().end == 0 &&
      tj.transitions.back().status == secondary) {
    tj.transitions.back().message = message;
    return;
  }
  if (!tj.transitions.empty() && tj.transitions.back().end == 0) tj.transitions.back().end = at;
  tj.transitions.push_back({secondary, at, 0, message});
  TrainingJobEvent(t, tj.name, secondary, message, at);
}

void Controller::TrainingJobEvent(Turn& t, const std::string& name, SecondaryStatus secondary,
                                  const std::string& message, EpochMs at) {
  EventTrigger e;
  e.kind = EventTrigger::Kind::kTrainingJobStateChange;
  e.name = name;
  e.status = ToWire(PrimaryStatusOf(secondary));
  e.secondary = ToWire(secondary);
  e.reason = message;
  e.at = at;
  t.events.push_back(std::move(e));
}

void Controller::RequestStop(Turn& t, TrainingJob& tj, StopCause cause, const std::string& message,
                             int grace_seconds) {
  tj.stop_requested = true;
  tj.stop_cause = cause;
  tj.status = TrainingJobStatus::kStopping;
  AddTransition(t, tj, SecondaryStatus::kStopping, message, t.now);
  t.reschedule = true;
  if (tj.launched) {
    t.stops.emplace_back(tj.name, grace_seconds < 0 ? config_.stop_grace_seconds : grace_seconds);
  } else {
    // Nothing runs (never launched, or an interrupted spot job waiting for capacity): it ends now.
    exec::AttemptEvent e;
    e.attempt_id = tj.name;
    e.phase = exec::Phase::kExited;
    e.at = t.now;
    e.stopped = true;
    deferred_events_.push_back(e);
  }
}

void Controller::ReleaseCapacity(TrainingJob& tj) {
  if (tj.launched) state_.host_in_use[CapacityKey(tj.instance_type, tj.on_spot)] -= tj.instance_count;
}

void Controller::LaunchTrainingJob(Turn& t, TrainingJob& tj, bool spot) {
  const Status role = TrainingJobRole(tj, t.now);
  tj.launched = true;
  tj.run_launched_at = t.now;
  PriceRun(tj, spot);
  if (tj.interruptions > 0) {
    // The interrupted run's files go after the commit, before the start; its checkpoints were
    // uploaded when it ended.
    DropTail(t, tj.name);
    t.discards.push_back(tj.name);
    tj.stop_cause = StopCause::kNone;
  }
  std::string message;
  if (tj.on_spot || tj.interruptions > 0) {
    message = tj.interruptions == 0
                  ? "Launching requested spot instances on this host."
                  : "Spot capacity is available again: restarting after interruption " + std::to_string(tj.interruptions) +
                        (tj.spec.checkpoint
                             ? "; the checkpoints are copied back from S3 before training resumes."
                             : "; the job has no CheckpointConfig, so it starts from scratch.");
  } else if (role.ok()) {  // a refused attempt takes no warm pool and moves none aside
    message = AttachWarmPool(t, tj);
    if (tj.reused_from_job.empty()) MakeRoom(t, tj.instance_type, tj.instance_count, tj.name);
  } else {
    message = "Starting the training job.";
  }
  state_.host_in_use[CapacityKey(tj.instance_type, tj.on_spot)] += tj.instance_count;
  if (!tj.capacity_ladder.empty()) {
    const Ladder ladder = LadderFromText(tj.capacity_ladder, tj.fallback_after_interruptions);
    message += " Capacity ladder: rung " + std::to_string(tj.rung + 1) + " of " + std::to_string(ladder.rungs.size()) +
               " (" + tj.instance_type + (tj.on_spot ? ", spot)" : ", on-demand)") +
               (tj.rung == 0 ? "." : tj.interruptions >= tj.fallback_after_interruptions && !tj.on_spot
                                         ? ": spot rungs are skipped after " + std::to_string(tj.interruptions) + " interruptions."
                                         : ": the rungs before it have no free capacity.");
  }
  AddTransition(t, tj, SecondaryStatus::kStarting, message, t.now);
  if (!role.ok()) {
    RefuseAttempt(tj.name, role, t.now);
    return;
  }
  MintRoleSession(tj, t.now);
  t.starts.emplace_back(tj.name, BuildAttemptSpec(tj));
}

Status Controller::TrainingJobRole(const TrainingJob& tj, EpochMs now) const {
  auto dir = directory();
  if (dir->roles.empty()) return Status::Ok();  // no role to take
  return MayRunAsRole(*dir, config_.account_id, tj.owner, tj.spec.role_arn, kSageMakerPrincipal, now);
}

void Controller::RefuseAttempt(const std::string& attempt_id, const Status& why, EpochMs now) {
  spdlog::warn("attempt {} refused its role: {}", attempt_id, why.message());
  exec::AttemptEvent e;
  e.attempt_id = attempt_id;
  e.phase = exec::Phase::kExited;
  e.at = now;
  e.exit_code = 1;
  e.failure_kind = exec::FailureKind::kClient;
  e.failure_reason = "ClientError: the job may not run as its role: " + why.message();
  deferred_events_.push_back(std::move(e));
}

void Controller::MintRoleSession(TrainingJob& tj, EpochMs now) {
  const std::string role = RoleNameOf(tj.spec.role_arn, config_.account_id);
  if (role.empty() || !state_.principals.roles.count(role)) return;
  // Drawn once per job and stored with it (the launch's commit), so that a re-adopted attempt's
  // environment still holds a token the server knows.
  if (tj.credentials_token.empty()) tj.credentials_token = RandomAlnum(48, false);
  role_sessions_.Mint(tj.name, role, config_.account_id, now);
  role_sessions_.SetBearer(tj.name, tj.credentials_token);
}

void Controller::StartPendingTrainingJobs(Turn& t) {
  // Jobs created through CreateTrainingJob wait for host capacity in creation order, ahead of
  // queued service jobs (they are already InProgress in SageMaker's terms).
  std::vector<std::string> overdue, out_of_wait;
  for (const auto& [seq, name] : state_.live_training_jobs) {
    TrainingJob* tj = &state_.training_jobs.at(name);
    // MaxWaitTimeInSeconds: a spot job's time waiting for capacity plus its run time (SageMaker's managed spot training).
    if (tj->spec.managed_spot && tj->status == TrainingJobStatus::kInProgress && tj->spec.max_wait_seconds > 0 &&
        t.now - tj->creation_time >= tj->spec.max_wait_seconds * 1000) {
      out_of_wait.push_back(name);
      continue;
    }
    if (tj->launched || tj->status != TrainingJobStatus::kInProgress) continue;
    // Service jobs are placed by the scheduling pass; an interrupted spot run of one comes back here.
    const bool interrupted = tj->stop_cause == StopCause::kInterrupt;
    if (!tj->service_job_id.empty() && !interrupted) continue;
    // The first rung of its ladder with room (its own type when it has no ladder).
    const Ladder ladder = tj->capacity_ladder.empty()
                              ? Ladder{{Rung{tj->instance_type, tj->spec.managed_spot}}, 2}
                              : LadderFromText(tj->capacity_ladder, tj->fallback_after_interruptions);
    if (disk_low_) {
      const std::string reason = "Waiting: " + DiskReserveReason() + ".";
      if (tj->secondary_status != SecondaryStatus::kPending || tj->transitions.empty() || tj->transitions.back().message != reason)
        AddTransition(t, *tj, SecondaryStatus::kPending, reason, t.now);
      continue;
    }
    // PickRung calls this before it returns, under this turn's exclusive lock; the analysis cannot
    // follow a lambda through a template argument.
    const int rung = PickRung(ladder, tj->instance_count, tj->interruptions,
                              [&](const std::string& key) NO_THREAD_SAFETY_ANALYSIS {
      return HostCapacity(config_, state_, key) - state_.host_in_use[key];
    });
    if (rung >= 0) {
      tj->rung = rung;
      tj->instance_type = ladder.rungs[static_cast<size_t>(rung)].type;
      LaunchTrainingJob(t, *tj, ladder.rungs[static_cast<size_t>(rung)].spot);
      continue;
    }
    // Until spot capacity frees, a spot job stays Starting (never launched) or Interrupted.
    if (tj->spec.managed_spot || interrupted) continue;
    // The request is parsed only once a job has pended for the smallest MaxPendingTimeInSeconds.
    if (t.now - tj->creation_time >= kMinMaxPendingSeconds * 1000) {
      const int64_t max_pending = tj->spec.max_pending_seconds;
      if (max_pending > 0 && t.now - tj->creation_time >= max_pending * 1000) {
        overdue.push_back(name);
        continue;
      }
    }
    int64_t free = HostCapacity(config_, state_, tj->instance_type) - state_.host_in_use[tj->instance_type];
    if (tj->secondary_status != SecondaryStatus::kPending) {
      AddTransition(t, *tj, SecondaryStatus::kPending, "Waiting for capacity: " + std::to_string(std::max<int64_t>(0, free)) +
                                            " free " + tj->instance_type + " instances on this host.", t.now);
    }
  }
  for (const auto& name : out_of_wait)
    RequestStop(t, state_.training_jobs.at(name), StopCause::kMaxWait,
                "Stopping: the job reached MaxWaitTimeInSeconds (time waiting for spot capacity plus run time).");
  // MaxPendingTimeInSeconds: a job that waited that long for capacity is Stopped without running.
  for (const auto& name : overdue) {
    TrainingJob& tj = state_.training_jobs.at(name);
    RequestStop(t, tj, StopCause::kPending, "Stopping: the training job waited longer than MaxPendingTimeInSeconds for capacity.");
    exec::AttemptEvent e;
    e.attempt_id = name;
    e.phase = exec::Phase::kExited;
    e.at = t.now;
    e.stopped = true;
    ApplyEvent(t, e);
  }
}

exec::AttemptSpec Controller::BuildAttemptSpec(const TrainingJob& tj) const {
  // Only the job's terms go in; how this host runs it is the executor's (LocalExecutor::Options).
  const TrainingSpec& req = tj.spec;
  const InstanceTypeSpec* it = config_.FindInstanceType(tj.instance_type);
  exec::AttemptSpec spec;
  spec.attempt_id = tj.name;
  spec.training_job_name = tj.name;
  spec.training_job_arn = tj.arn;
  spec.region = config_.region;
  spec.instance_type = tj.instance_type;
  spec.instance_count = static_cast<int>(tj.instance_count);
  spec.vcpus = it ? it->vcpus : 1;
  spec.gpus = it ? it->gpus : 0;
  spec.memory_mib = it ? it->memory_mib : 1024;
  spec.volume_size_gb = req.volume_size_gb.value_or(30);
  spec.setup_command = it ? it->setup_command : "";
  spec.network_isolation = req.network_isolation;
  spec.command = req.container_entrypoint;
  spec.command.insert(spec.command.end(), req.container_arguments.begin(), req.container_arguments.end());
  // The image runs `train`, ContainerEntrypoint in place of its Entrypoint, or its Entrypoint with
  // ContainerArguments in place of `train` (docs/images.md); the executor decides which images
  // run with the host's software.
  spec.image = req.training_image;
  if (req.container_entrypoint.empty() && !spec.command.empty()) spec.image_command = exec::ImageCommand::kCmd;
  spec.hyperparameters = req.hyperparameters;
  if (spec.command.empty() && (spec.image.empty() || spec.hyperparameters.count("sagemaker_program"))) {
    auto hp = [&](const char* k) {
      auto f = spec.hyperparameters.find(k);
      return f == spec.hyperparameters.end() ? "" : UnquoteHyperParameter(f->second);
    };
    spec.script_mode = exec::ScriptMode{hp("sagemaker_program"), hp("sagemaker_submit_directory")};
  }
  spec.environment = req.environment;
  if (!tj.service_job_id.empty()) {
    auto seq = state_.job_seq_by_id.find(tj.service_job_id);
    if (seq != state_.job_seq_by_id.end()) {
      const ServiceJobState& js = state_.jobs.at(seq->second);
      spec.extra_env["AWS_BATCH_JOB_ID"] = js.job.id;
      spec.extra_env["AWS_BATCH_JOB_ARN"] = js.job.arn;
      spec.extra_env["AWS_BATCH_JOB_NAME"] = js.job.name;
      spec.extra_env["AWS_BATCH_JQ_NAME"] = js.job.queue;
      spec.extra_env["AWS_BATCH_SE_NAME"] = js.service_environment;
      spec.extra_env["AWS_BATCH_JOB_ATTEMPT"] = std::to_string(tj.attempt_number);
    }
  }
  // A role job: the AWS SDKs' container credentials provider fetches the role's session from this
  // server with the attempt's bearer token, and calls go back to this server (docs/security.md,
  // "Roles for jobs"). The sandbox shares the host's network unless EnableNetworkIsolation.
  AddRoleEnvironment(spec, tj.credentials_token);
  for (const auto& ch : req.channels) {
    exec::Channel c;
    c.name = ch.name;
    c.content_type = ch.content_type;
    c.input_mode = ch.input_mode.empty() ? req.training_input_mode : ch.input_mode;
    c.record_wrapper = ch.record_wrapper;
    if (ch.file_system) {
      c.file_system = exec::FileSystemSource{ch.file_system->id, ch.file_system->directory_path, ch.file_system->read_only};
    } else {
      c.uri = ch.s3_uri;
      c.data_type = ch.s3_data_type;
      c.distribution = ch.distribution;
      c.shuffle_seed = ch.shuffle_seed;
    }
    spec.channels.push_back(std::move(c));
  }
  spec.output_prefix = req.OutputPathTrimmed() + "/" + tj.name + "/output/";
  spec.compress = req.compressed_output;
  if (req.checkpoint) spec.checkpoint = exec::CheckpointConfig{req.checkpoint->s3_uri, req.checkpoint->local_path};
  spec.data_access = JobDataAccess(tj, req.role_arn);
  // The instance workspace (docs/warm-pools.md): kept in the pool's directory when the job has a
  // warm pool, else in the attempt's own directory.
  if (!tj.warm_pool_id.empty())
    spec.warm_pool = exec::WarmPoolSpec{tj.warm_pool_id, WarmPoolDir(tj.warm_pool_id), tj.reused_from_job};
  spec.stop_grace_seconds = config_.stop_grace_seconds;
  spec.max_runtime_seconds = std::max<int64_t>(1, RemainingRuntimeSeconds(tj, clock_.now_ms()));
  return spec;
}

std::optional<exec::DataAccess> Controller::JobDataAccess(const TrainingJob& tj, const std::string& role_arn) const {
  const JobPrincipal p = JobPrincipalOf(*directory(), config_.account_id, tj.owner, role_arn, tj.name);
  if (p.unrestricted) return std::nullopt;
  // A principal this region does not know, on a server joined to regions, is one whose request
  // entered through a peer that holds its user or role: its data was checked at create with the
  // policies the forwarded request carried, and there is nothing here to check it against again
  // (docs/security.md, "Jobs' data").
  if (!p.entry && (config_.regions.enabled() || !config_.regions.peer_secret.empty())) return std::nullopt;
  exec::DataAccess access;
  access.principal = PrincipalKeysOf(p.entry.get(), p.arn, p.username);
  if (p.entry)  // documents[i] is the text of policies[i]
    for (size_t i = 0; i < p.entry->policies.size(); ++i)
      access.policies.push_back({p.entry->policies[i]->name, p.entry->documents[i]});
  return access;
}

// ------------------------------------------------------------------------------------------
// Executor events.

void Controller::ReadoptAttempts() {
  for (const auto& [seq, name] : state_.live_training_jobs) {
    TrainingJob& tj = state_.training_jobs.at(name);
    if (!tj.launched) continue;
    // Sessions are not stored: an attempt that outlived the server gets a fresh one (its bearer
    // token, in its environment, was stored with the job).
    MintRoleSession(tj, clock_.now_ms());
    Status st = executor_->Adopt(name);
    if (st.ok()) {
      spdlog::info("re-adopted running attempt {}", name);
      // A stop committed just before the server died may never have reached the supervisor;
      // asking again is harmless (the supervisor keeps its first deadline).
      Status asked = tj.stop_requested ? executor_->Stop(name, config_.stop_grace_seconds)
                     : tj.stop_cause == StopCause::kInterrupt ? executor_->Interrupt(name, config_.spot_notice_seconds)
                                                    : Status::Ok();
      if (!asked.ok()) spdlog::warn("cannot ask attempt {} again to stop: {}", name, asked.message());
      continue;
    }
    // The launch was committed but the executor never started it (the server died in between):
    // start it now. It cannot be running, so this never runs an attempt twice.
    spdlog::warn("attempt {} was never started ({}); starting it now", name, st.message());
    if (Status cleared = executor_->Discard(name); !cleared.ok())
      spdlog::warn("cannot clear the files of attempt {}: {}", name, cleared.message());
    Status started = executor_->Start(name, BuildAttemptSpec(tj));
    if (!started.ok()) spdlog::error("cannot start attempt {}: {}", name, started.message());
  }
}

void Controller::ApplyExecutorEvents(Turn& t, const std::vector<exec::AttemptEvent>& polled) {
  std::vector<exec::AttemptEvent> deferred;
  deferred.swap(deferred_events_);
  if (deferred.empty() && polled.empty()) return;
  // What an executor says becomes a job's FailureReason, statusReason and transitions: the data
  // directory is named in none of them (the executors leave it out; this is the backstop).
  std::vector<exec::RedactedPath> paths;
  exec::AddRedactedPath(&paths, data_dir_, "<data dir>");
  for (const std::vector<exec::AttemptEvent>* events : {static_cast<const std::vector<exec::AttemptEvent>*>(&deferred), &polled})
    for (exec::AttemptEvent e : *events) {
      for (std::string* text : {&e.message, &e.detail, &e.failure_reason}) *text = exec::RedactPaths(std::move(*text), paths);
      ApplyEvent(t, e);
    }
}

void Controller::CountPreemptionLoss(ServiceJob& job, const TrainingJob& tj, EpochMs end) const {
  EpochMs since = std::max(tj.creation_time, tj.last_checkpoint_time);  // placed, or last checkpointed
  if (since <= 0 || end <= since) return;
  const int64_t instance_ms = (end - since) * tj.instance_count;
  const InstanceTypeSpec* spec = config_.FindInstanceType(tj.instance_type);
  job.preemption_lost_instance_ms += instance_ms;
  job.preemption_lost_gpu_ms += instance_ms * (spec ? spec->gpus : 0);
}

void Controller::ApplyEvent(Turn& t, const exec::AttemptEvent& e) {
  if (ApplyContainerEvent(t, e)) return;
  auto it = state_.training_jobs.find(e.attempt_id);
  if (it == state_.training_jobs.end()) return;
  TrainingJob& tj = it->second;
  if (!IsLive(tj.status)) return;  // already final
  ServiceJobState* js = tj.service_job_id.empty() ? nullptr : state_.FindJob(tj.service_job_id);
  // A spot run that was interrupted reports no more progress either.
  bool stopping = tj.status == TrainingJobStatus::kStopping || tj.stop_cause == StopCause::kInterrupt;

  switch (e.phase) {
    case exec::Phase::kCheckpointed:
      if (e.at > tj.last_checkpoint_time) {
        tj.last_checkpoint_time = e.at;
        t.training_jobs.insert(tj.name);
      }
      return;
    case exec::Phase::kPreparing:
      if (PhaseRank(tj.secondary_status) >= 1) return;
      if (!stopping) {
        AddTransition(t, tj, SecondaryStatus::kDownloading, e.message.empty() ? "Preparing the instances for training and downloading input data." : e.message, e.at);
      }
      tj.training_start_time = e.at;
      t.training_jobs.insert(tj.name);
      if (js && js->job.status == JobStatus::kScheduled) SetJobStatus(t, *js, JobStatus::kStarting, "");
      return;
    case exec::Phase::kTraining:
      if (PhaseRank(tj.secondary_status) >= 2) return;
      if (tj.training_start_time == 0) tj.training_start_time = e.at;
      if (!stopping) {
        // The supervisor's message may add what staging did ("Training in progress. Input data: ...").
        AddTransition(t, tj, SecondaryStatus::kTraining,
                      "Training in progress" + std::string(sandbox_ == "bwrap" ? " (sandboxed)." : " (no sandbox).") + e.detail, e.at);
      }
      t.training_jobs.insert(tj.name);
      if (js) {
        if (js->job.status == JobStatus::kScheduled) SetJobStatus(t, *js, JobStatus::kStarting, "");
        if (js->job.status == JobStatus::kStarting) SetJobStatus(t, *js, JobStatus::kRunning, "");
        if (js->job.started_at == 0) js->job.started_at = e.at;
        // A SageMaker restart of the same training job keeps the Batch attempt (and its timeout clock).
        if (!js->job.attempts.empty() && js->job.attempts.back().started_at == 0) js->job.attempts.back().started_at = e.at;
        t.jobs.insert(js->job.seq);
      }
      return;
    case exec::Phase::kUploading:
      if (PhaseRank(tj.secondary_status) >= 3) return;
      if (!stopping) AddTransition(t, tj, SecondaryStatus::kUploading, "Uploading generated training model.", e.at);
      return;
    case exec::Phase::kExited:
    case exec::Phase::kLost:
      break;
  }
  // The attempt is over: its role's credentials stop working (a restart mints new ones).
  role_sessions_.Revoke(tj.name);

  if (tj.status == TrainingJobStatus::kInProgress && tj.stop_cause == StopCause::kInterrupt && e.phase == exec::Phase::kExited && !e.stopped) {
    // The run ended on its own before the interruption reached it (its processes had exited and
    // the supervisor was uploading, so it never acted on the stop): its outcome stands. Restarting
    // it would run a completed job again (from scratch without checkpoints) and overwrite its model.
    tj.stop_cause = StopCause::kNone;
    stopping = false;
  }
  if (tj.status == TrainingJobStatus::kInProgress && tj.stop_cause == StopCause::kInterrupt) {
    // The interrupted run is over (checkpoints uploaded): the job waits, InProgress/Interrupted,
    // until spot capacity frees (StartPendingTrainingJobs), within MaxWaitTimeInSeconds.
    if (tj.launched) TailJobMetrics(t, tj, INT64_MAX);
    DropTail(t, tj.name);
    ReleaseCapacity(tj);
    CloseRun(tj, e.at);
    const EpochMs since = std::max(tj.run_launched_at, tj.last_checkpoint_time);
    if (since > 0 && e.at > since) {
      const int64_t instance_ms = (e.at - since) * tj.instance_count;
      tj.interruption_lost_instance_ms += instance_ms;
      const InstanceTypeSpec* spec = config_.FindInstanceType(tj.instance_type);
      Telemetry& m = state_.telemetry;
      m.interruption_lost_instance_seconds[tj.instance_type] += static_cast<double>(instance_ms) / 1000.0;
      m.interruption_lost_gpu_seconds[tj.instance_type] += static_cast<double>(instance_ms * (spec ? spec->gpus : 0)) / 1000.0;
    }
    tj.launched = false;
    tj.last_modified_time = t.now;
    t.training_jobs.insert(tj.name);
    t.reschedule = true;
    return;
  }

  const bool infrastructure_failure =
      e.phase == exec::Phase::kLost ||
      (e.exit_code != 0 && !e.stopped && !e.max_runtime_exceeded && e.failure_kind == exec::FailureKind::kInternal);
  if (infrastructure_failure && !stopping && RestartAfterInfrastructureFailure(t, tj, e)) return;

  // Final: the attempt is over.
  if (tj.launched) TailJobMetrics(t, tj, INT64_MAX);  // the last lines of the log count too
  DropTail(t, tj.name);
  ReleaseCapacity(tj);
  if (tj.launched) CloseRun(tj, e.at);
  t.reschedule = true;
  tj.training_end_time = e.at;
  if (e.phase == exec::Phase::kExited && e.model_uploaded) {
    tj.model_artifacts = tj.spec.OutputPathTrimmed() + "/" + tj.name +
                         (tj.spec.compressed_output ? "/output/model.tar.gz" : "/output/model/");
  }
  if (e.phase == exec::Phase::kLost) {
    tj.status = TrainingJobStatus::kFailed;
    tj.failure_reason = "InternalServerError: " + (e.message.empty() ? "the instance was lost: its supervisor exited without recording an outcome" : e.message);
    AddTransition(t, tj, SecondaryStatus::kFailed, tj.failure_reason, e.at);
  } else if (e.max_runtime_exceeded) {
    tj.status = TrainingJobStatus::kStopped;
    AddTransition(t, tj, SecondaryStatus::kMaxRuntimeExceeded, "Training job runtime exceeded MaxRuntimeInSeconds provided", e.at);
  } else if (tj.stop_cause == StopCause::kPending) {
    tj.status = TrainingJobStatus::kStopped;
    tj.failure_reason = "MaxPendingTimeExceeded: Training job pending time exceeded MaxPendingTimeInSeconds provided";
    AddTransition(t, tj, SecondaryStatus::kStopped, "Training job stopped: pending time exceeded MaxPendingTimeInSeconds provided.", e.at);
  } else if (tj.stop_cause == StopCause::kMaxWait) {
    tj.status = TrainingJobStatus::kStopped;
    AddTransition(t, tj, SecondaryStatus::kMaxWaitTimeExceeded, "Training job exceeded MaxWaitTimeInSeconds provided", e.at);
  } else if (tj.stop_cause == StopCause::kDiskReserve) {
    // CheckDiskReserve stopped it and wrote why; whatever the run recorded as it died (a write
    // that failed, a lost supervisor) is a consequence. Its scratch goes now: the store needs
    // the space to record this.
    tj.status = TrainingJobStatus::kFailed;
    AddTransition(t, tj, SecondaryStatus::kFailed, "Training job failed: " + tj.failure_reason, e.at);
    executor_->Cleanup(tj.name);
    scratch_reclaimed_.insert(tj.name);
  } else if (e.stopped || tj.stop_requested) {
    tj.status = TrainingJobStatus::kStopped;
    AddTransition(t, tj, SecondaryStatus::kStopped, "Training job stopped.", e.at);
  } else if (e.exit_code == 0) {
    tj.status = TrainingJobStatus::kCompleted;
    AddTransition(t, tj, SecondaryStatus::kCompleted, "Training job completed", e.at);
  } else {
    tj.status = TrainingJobStatus::kFailed;
    tj.failure_reason = e.failure_reason.empty()
                            ? "AlgorithmError: the training process exited with code " + std::to_string(e.exit_code)
                            : e.failure_reason;
    if (tj.failure_reason.size() > 1024) tj.failure_reason.resize(1024);
    AddTransition(t, tj, SecondaryStatus::kFailed, "Training job failed: " + tj.failure_reason, e.at);
  }
  if (!tj.transitions.empty()) tj.transitions.back().end = e.at;
  state_.live_training_jobs.erase({tj.seq, tj.name});
  t.training_jobs.insert(tj.name);
  SettleWarmPool(t, tj);
  if (js) FinishServiceJobAttempt(t, *js, tj);
}

bool Controller::RestartAfterInfrastructureFailure(Turn& t, TrainingJob& tj, const exec::AttemptEvent& e) {
  // RetryStrategy.MaximumRetryAttempts (SageMaker API reference): SageMaker retries a training job
  // whose instances failed; an algorithm error is never retried. The infrastructure failures
  // here are a lost run (its supervisor died, or the executor could not start it) and a run that
  // ended with InternalServerError (the object store unreachable, a full disk, a failed instance
  // setup). The executor reports kLost only after it has ended the run's process groups, and
  // kExited only once the run's instances are gone, so the new run never overlaps the old one.
  const int64_t allowed = tj.spec.max_retry_attempts;
  int64_t used = 0;
  for (const auto& tr : tj.transitions)
    if (tr.status == SecondaryStatus::kRestarting) ++used;
  if (used >= allowed) return false;
  if (RemainingRuntimeSeconds(tj, e.at) <= 0) return false;
  DropTail(t, tj.name);
  if (Status st = executor_->Discard(tj.name); !st.ok()) {  // the dead run's files; idempotent
    spdlog::error("cannot clear the lost run of {}: {}", tj.name, st.message());
    return false;
  }
  AddTransition(t, tj, SecondaryStatus::kRestarting,
                "Retrying after an infrastructure failure (retry " + std::to_string(used + 1) + " of " +
                    std::to_string(allowed) + "): " +
                    (e.phase == exec::Phase::kExited ? e.failure_reason
                     : e.message.empty()             ? "the instance was lost"
                                                     : e.message),
                e.at);
  CloseRun(tj, e.at);
  PriceRun(tj, tj.on_spot);
  tj.launched = true;  // it keeps its capacity
  if (Status role = TrainingJobRole(tj, t.now); !role.ok()) {
    RefuseAttempt(tj.name, role, t.now);  // the retry ends at once, as failed, without credentials
    return true;
  }
  MintRoleSession(tj, t.now);
  t.starts.emplace_back(tj.name, BuildAttemptSpec(tj));
  return true;
}

int64_t Controller::RemainingRuntimeSeconds(const TrainingJob& tj, EpochMs now) const {
  // MaxRuntimeInSeconds bounds the total over the runs of one training job (with RetryStrategy,
  // SageMaker API reference): the time already spent downloading, training and uploading counts.
  const int64_t max_runtime = tj.spec.MaxRuntimeSeconds();
  EpochMs spent = 0;
  for (const auto& tr : tj.transitions)
    if (tr.status == SecondaryStatus::kDownloading || tr.status == SecondaryStatus::kTraining || tr.status == SecondaryStatus::kUploading)
      spent += (tr.end ? tr.end : now) - tr.start;
  return max_runtime - spent / 1000;
}

void Controller::FinishServiceJobAttempt(Turn& t, ServiceJobState& js, const TrainingJob& tj) {
  ServiceJob& job = js.job;
  std::string reason;
  if (tj.status == TrainingJobStatus::kCompleted) {
    reason = std::string(kSmPrefix) + "Training job completed";
  } else if (tj.status == TrainingJobStatus::kStopped && tj.secondary_status == SecondaryStatus::kMaxRuntimeExceeded) {
    reason = std::string(kSmPrefix) + "MaxRuntimeExceeded: Training job runtime exceeded MaxRuntimeInSeconds provided";
  } else if (tj.status == TrainingJobStatus::kStopped && tj.secondary_status == SecondaryStatus::kMaxWaitTimeExceeded) {
    reason = std::string(kSmPrefix) + "MaxWaitTimeExceeded: Training job exceeded MaxWaitTimeInSeconds provided";
  } else if (tj.status == TrainingJobStatus::kStopped) {
    reason = std::string(kSmPrefix) + "Training job stopped";
  } else {
    reason = std::string(kSmPrefix) + tj.failure_reason;
  }
  if (!job.attempts.empty()) {
    job.attempts.back().stopped_at = tj.training_end_time;
    job.attempts.back().status_reason = reason;
  }
  if (tj.status == TrainingJobStatus::kCompleted) {
    SetJobStatus(t, js, JobStatus::kSucceeded, reason);
    return;
  }
  if (!job.terminate_reason.empty()) {
    SetJobStatus(t, js, JobStatus::kFailed, job.terminate_reason);
    return;
  }
  if (tj.stop_cause == StopCause::kTimeout) {
    SetJobStatus(t, js, JobStatus::kFailed, "Job attempt duration exceeded timeout");
    return;
  }
  // Insufficient capacity (Batch's service job retries): the training job failed with CapacityError, or a
  // spot job ran out of MaxWaitTimeInSeconds before it ever launched. Retried until capacity
  // comes, without consuming retryStrategy.attempts (jobStateTimeLimitActions can bound it).
  if (StartsWith(tj.failure_reason, "CapacityError") ||
      (tj.secondary_status == SecondaryStatus::kMaxWaitTimeExceeded && tj.training_start_time == 0)) {
    ++job.capacity_failed_attempt_count;
    ++state_.telemetry.retried[job.queue];
    // Placed again after a backoff (1 s, doubling, at most a minute), so that a host that keeps
    // failing to start instances is not asked again on every pass.
    const int64_t shift = std::min<int64_t>(6, job.capacity_failed_attempt_count - 1);
    js.not_before = t.now + std::min<int64_t>(60'000, int64_t{1000} << shift);
    backoff_ends_.insert(js.not_before);
    SetJobStatus(t, js, JobStatus::kRunnable,
                 "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY - Unable to provision requested compute resources");
    SetWaitCode(t, js, "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY", job.status_reason);
    return;
  }
  if (tj.stop_cause == StopCause::kPreempt) {
    // Preemption returns the job to RUNNABLE as a new attempt; it does not consume retries.
    ++job.preempted_attempt_count;
    {
      const int64_t instance_ms = job.preemption_lost_instance_ms, gpu_ms = job.preemption_lost_gpu_ms;
      CountPreemptionLoss(job, tj, tj.training_end_time);
      Telemetry& m = state_.telemetry;
      ++m.preempted[job.queue];
      m.preemption_lost_instance_seconds[job.queue] += static_cast<double>(job.preemption_lost_instance_ms - instance_ms) / 1000.0;
      m.preemption_lost_gpu_seconds[job.queue] += static_cast<double>(job.preemption_lost_gpu_ms - gpu_ms) / 1000.0;
    }
    std::string why = "Preempted: yielded its capacity to service job " + job.preempted_for;
    if (!job.attempts.empty()) job.attempts.back().status_reason = why;
    job.preempted_for.clear();
    const int64_t limit = job.preemption ? job.preemption->retries_before_termination : -1;
    if (limit >= 0 && job.preempted_attempt_count > limit) {
      SetJobStatus(t, js, JobStatus::kFailed, why + " (preemptionRetriesBeforeTermination reached)");
    } else {
      SetJobStatus(t, js, JobStatus::kRunnable, why);
    }
    return;
  }
  if (tj.stop_cause == StopCause::kUser) {  // StopTrainingJob on the attempt: the service job fails, no retry
    SetJobStatus(t, js, JobStatus::kFailed, reason);
    return;
  }
  if (tj.status == TrainingJobStatus::kStopped &&
      (tj.secondary_status == SecondaryStatus::kMaxRuntimeExceeded || tj.secondary_status == SecondaryStatus::kMaxWaitTimeExceeded)) {
    // A timed-out attempt is not retried, whichever of MaxRuntimeInSeconds and
    // attemptDurationSeconds fired (docs/design/decisions.md).
    SetJobStatus(t, js, JobStatus::kFailed, reason);
    return;
  }
  // A failure after STARTING: the retry strategy decides. Preempted attempts do not count.
  const RetryStrategy retry_strategy = job.retry_strategy.value_or(RetryStrategy{});
  const int attempts = retry_strategy.attempts;
  int64_t counted = static_cast<int64_t>(job.attempts.size()) - job.preempted_attempt_count -
                    job.capacity_failed_attempt_count;
  bool retry = counted < attempts && RetryActionFor(retry_strategy.evaluate_on_exit, reason) == ExitRule::Action::kRetry;
  if (retry) ++state_.telemetry.retried[job.queue];
  SetJobStatus(t, js, retry ? JobStatus::kRunnable : JobStatus::kFailed, reason);
}

void Controller::EnforceTimeouts(Turn& t) {
  // jobStateTimeLimitActions: a RUNNABLE job that has waited for one of the listed reasons for
  // maxTimeSeconds is terminated (SAGEMAKER_TRAINING queues allow only TERMINATE).
  for (const auto& [qname, q] : state_.queues) {
    const std::vector<TimeLimitAction>& actions = q.time_limit_actions;
    if (actions.empty()) continue;
    auto front = state_.front_of_queue.find(qname);
    if (front == state_.front_of_queue.end()) continue;
    std::vector<uint64_t> seqs = front->second;
    for (uint64_t seq : seqs) {
      ServiceJobState& js = state_.jobs.at(seq);
      if (js.job.status != JobStatus::kRunnable || js.wait_code.empty()) continue;
      EpochMs since = js.RunnableSince();
      for (const auto& a : actions) {
        if (a.reason != js.wait_code) continue;
        if (t.now - since < a.max_time_seconds * 1000) continue;
        js.job.is_terminated = true;
        SetJobStatus(t, js, JobStatus::kFailed,
                     "Terminated by JobStateTimeLimit action due to reason: " + js.wait_code);
        t.reschedule = true;
        break;
      }
    }
  }
  for (const auto& q : state_.queues) {
    for (JobStatus st : {JobStatus::kScheduled, JobStatus::kStarting, JobStatus::kRunning}) {
      for (uint64_t seq : state_.JobsIn(q.first, st)) {
        ServiceJobState& js = state_.jobs.at(seq);
        if (!js.job.timeout || js.job.attempts.empty()) continue;
        const int64_t secs = js.job.timeout->attempt_duration_seconds;
        EpochMs started = js.job.attempts.back().started_at;
        if (secs <= 0 || started == 0 || t.now - started < secs * 1000) continue;
        auto it = state_.training_jobs.find(js.job.attempts.back().training_job_name);
        if (it == state_.training_jobs.end() || it->second.stop_requested) continue;
        RequestStop(t, it->second, StopCause::kTimeout, "Stopping: the service job's attemptDurationSeconds was reached.");
      }
    }
  }
}

// ------------------------------------------------------------------------------------------
// Metrics: MetricDefinitions regexes (RE2: linear time) over each instance's log.

namespace {

// Reads the whole lines of a log after `from` (at most max_bytes of them) and appends the values
// the metrics' regexes capture, as (metric index, value, timestamp); returns the offset after them.
std::streamoff ReadMetricLines(const std::string& path, std::streamoff from, int64_t max_bytes,
                               const std::vector<std::pair<std::string, std::unique_ptr<RE2>>>& metrics,
                               std::vector<std::tuple<size_t, double, EpochMs>>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return from;
  in.seekg(from);
  std::string line;
  std::streamoff consumed = from;
  while (consumed - from < max_bytes && std::getline(in, line)) {
    if (in.eof()) break;  // partial last line: read it next time
    consumed += static_cast<std::streamoff>(line.size()) + 1;
    auto sp = line.find(' ');
    if (sp == std::string::npos) continue;
    EpochMs ts = std::strtoll(line.c_str(), nullptr, 10);
    std::string_view text(line.data() + sp + 1, line.size() - sp - 1);
    for (size_t m = 0; m < metrics.size(); ++m) {
      std::string value;
      if (RE2::PartialMatch(text, *metrics[m].second, &value)) {
        char* end = nullptr;
        double v = std::strtod(value.c_str(), &end);
        if (end != value.c_str()) out->emplace_back(m, v, ts);
      }
    }
  }
  return consumed;
}

// Reads the whole lines of a system metrics file after `from` into samples; returns the offset
// after them.
std::streamoff ReadSystemLines(const std::string& path, std::streamoff from, std::vector<SystemSample>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return from;
  in.seekg(from);
  std::string line;
  std::streamoff consumed = from;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // partial last line: read it next time
    consumed += static_cast<std::streamoff>(line.size()) + 1;
    SystemSample s;
    if (ParseSystemSampleLine(line, &s)) out->push_back(s);
  }
  return consumed;
}

}  // namespace

void Controller::PrefetchTails() {
  for (const auto& [name, instances] : tailing_) {
    auto it = tails_.find(name);
    if (it == tails_.end()) continue;  // a new tail is set up (and read) under the lock
    Tail& tail = *it->second;
    if (static_cast<int>(tail.offsets.size()) != instances) continue;
    auto p = std::make_unique<TailRead>();
    p->metric_samples.resize(static_cast<size_t>(instances));
    p->offsets = tail.offsets;
    p->system_samples.resize(static_cast<size_t>(instances));
    p->system_offsets = tail.system_offsets;
    for (int i = 0; i < instances; ++i) {
      const auto n = static_cast<size_t>(i);
      if (n < tail.system_offsets.size())
        p->system_offsets[n] = ReadSystemLines(executor_->SystemMetricsPath(name, i + 1), tail.system_offsets[n], &p->system_samples[n]);
      if (!tail.metrics.empty())
        p->offsets[n] = ReadMetricLines(executor_->LogPath(name, i + 1), tail.offsets[n], kMetricTailBytesPerTurn, tail.metrics,
                                        &p->metric_samples[n]);
    }
    tail.prefetched = std::move(p);
  }
}

void Controller::TailMetrics(Turn& t) {
  tailing_.clear();
  for (const auto& [seq, name] : state_.live_training_jobs) {
    TrainingJob& tj = state_.training_jobs.at(name);
    if (!tj.launched) continue;
    TailJobMetrics(t, tj, kMetricTailBytesPerTurn);
    tailing_.emplace_back(name, tj.instance_count);
  }
}

void Controller::TailJobMetrics(Turn& t, TrainingJob& tj, int64_t max_bytes) {
  const std::string& name = tj.name;
  auto& tail = tails_[name];
  if (!tail) {
    tail = std::make_unique<Tail>();
    for (const auto& md : tj.spec.metric_definitions) {
      auto re = CompileMetricRegex(md.regex);
      if (re->ok() && re->NumberOfCapturingGroups() >= 1) tail->metrics.emplace_back(md.name, std::move(re));
    }
    tail->offsets.assign(static_cast<size_t>(tj.instance_count), 0);
    tail->system_offsets.assign(static_cast<size_t>(tj.instance_count), 0);
    // Re-reading from the start after a restart rebuilds the series exactly (the downsampling
    // rule depends only on the order of the values).
    state_.metric_series.erase(name);
  }
  // A final read (the run ended) past what was prefetched: that page first, then the rest of the
  // log, read now; the final metrics are the log's last values, not the prefetch's.
  if (max_bytes > kMetricTailBytesPerTurn && tail->prefetched) TailJobMetrics(t, tj, kMetricTailBytesPerTurn);
  // What PrefetchTails read before the lock, else (a new tail, another instance count) read now.
  std::unique_ptr<TailRead> read = std::move(tail->prefetched);
  if (!read || read->offsets.size() != tail->offsets.size() || read->system_offsets.size() != tail->system_offsets.size()) {
    read = std::make_unique<TailRead>();
    read->metric_samples.resize(tail->offsets.size());
    read->offsets = tail->offsets;
    read->system_samples.resize(tail->system_offsets.size());
    read->system_offsets = tail->system_offsets;
    for (int i = 0; i < tj.instance_count; ++i) {
      const auto n = static_cast<size_t>(i);
      if (n < tail->system_offsets.size())
        read->system_offsets[n] = ReadSystemLines(executor_->SystemMetricsPath(name, i + 1), tail->system_offsets[n],
                                                  &read->system_samples[n]);
      if (!tail->metrics.empty() && n < tail->offsets.size())
        read->offsets[n] = ReadMetricLines(executor_->LogPath(name, i + 1), tail->offsets[n], max_bytes, tail->metrics,
                                           &read->metric_samples[n]);
    }
  }
  TailSystemMetrics(t, tj, *tail, *read);
  if (tail->metrics.empty()) return;
  bool changed = false;
  MetricSeries& series = state_.metric_series[name];
  for (size_t i = 0; i < read->offsets.size(); ++i) {
    for (const auto& [m, v, ts] : read->metric_samples[i]) {
      series.Append(tail->metrics[m].first, v, ts);
      changed = true;
    }
    tail->offsets[i] = read->offsets[i];
  }
  if (!changed) return;
  tj.final_metrics.clear();
  for (auto& [mname, re] : tail->metrics)
    if (const MetricTrack* track = series.Find(mname); track && !track->points.empty())
      tj.final_metrics.push_back({mname, track->points.back().value, track->points.back().timestamp});
  t.training_jobs.insert(name);
  // Like the system metrics: stored once a minute while the job runs (the logs rebuild what a
  // crash loses) and once more when its run ends (DropTail).
  tail->metrics_dirty = true;
  if (t.now - tail->metrics_persisted_at >= 60'000) {
    t.metric_series.insert(name);
    tail->metrics_dirty = false;
    tail->metrics_persisted_at = t.now;
  }
}

// System metrics (docs/metrics.md, "System metrics"): the samples the supervisor appends for
// each instance. A file is read from the start again after a restart (or for a new run of the
// job after an interruption); samples not newer than a host's last one are the ones already
// held, so the series of earlier runs and of before the restart stay as they were.
void Controller::TailSystemMetrics(Turn& t, const TrainingJob& tj, Tail& tail, const TailRead& read) {
  for (size_t i = 0; i < read.system_offsets.size() && i < tail.system_offsets.size(); ++i) {
    std::vector<SystemSample>* series = nullptr;
    for (const SystemSample& s : read.system_samples[i]) {
      if (!series) series = &state_.system_series[tj.name]["algo-" + std::to_string(i + 1)];
      if (AppendSystemSample(*series, s)) tail.system_dirty = true;
    }
    tail.system_offsets[i] = read.system_offsets[i];
  }
  // The store gets the series once a minute while the job runs (the files can rebuild what a
  // crash loses) and once more when its run ends (DropTail).
  if (tail.system_dirty && t.now - tail.system_persisted_at >= 60'000) {
    t.system_series.insert(tj.name);
    tail.system_dirty = false;
    tail.system_persisted_at = t.now;
  }
}

void Controller::DropTail(Turn& t, const std::string& name) {
  auto it = tails_.find(name);
  if (it == tails_.end()) return;
  if (it->second->system_dirty) t.system_series.insert(name);
  if (it->second->metrics_dirty) t.metric_series.insert(name);
  tails_.erase(it);
}

void Controller::AddRoleEnvironment(exec::AttemptSpec& spec, const std::string& token) const {
  if (token.empty() || job_endpoint_.empty()) return;
  spec.extra_env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = job_endpoint_ + "/trainyard/v1/credentials";
  spec.extra_env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = token;
  spec.extra_env["AWS_ENDPOINT_URL"] = job_endpoint_;
  spec.extra_env["AWS_REGION"] = config_.region;
  spec.extra_env["AWS_DEFAULT_REGION"] = config_.region;
  if (!job_ca_bundle_.empty()) spec.extra_env["AWS_CA_BUNDLE"] = job_ca_bundle_;
}

}  // namespace ty::control
