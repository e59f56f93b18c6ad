// In-memory ports for driving the controller in unit tests, turn by turn, with no files, SQLite
// or supervisor processes: MemStore, MemEventLog (over a MemStore's events and audit records) and
// FakeExecutor.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exec/attempt_spec.h"
#include "exec/executor.h"
#include "store/event_log.h"
#include "store/store.h"

namespace ty::testing {

// What a MemStore holds. Shared (with a written reason: a test keeps it while controllers come and
// go) so that a "restart" hands the same contents to a new controller.
struct MemData {
  std::mutex mu;
  std::map<store::Kind, std::map<std::string, std::string>> docs;  // kind -> key -> document
  // While set, Commit fails with this (kUnavailable: a full disk) and stores nothing.
  Status fail_commits;
  int commits = 0;  // successful commits
  // Called by each Commit before it stores anything (on the committing thread), e.g. to look at
  // what readers see while a commit is in flight. Set before the controller runs.
  std::function<void()> during_commit;

  // The stored document, or "" when there is none.
  std::string Get(store::Kind kind, const std::string& key);
  size_t Count(store::Kind kind);
};

class MemStore final : public store::Store {
 public:
  explicit MemStore(std::shared_ptr<MemData> data) : data_(std::move(data)) {}
  Status Commit(const std::vector<store::Write>& writes) override;
  Status LoadAll(store::Kind kind, const std::function<void(const std::string&, const std::string&)>& fn) override;
  int SchemaVersion() const override { return 1; }

 private:
  std::shared_ptr<MemData> data_;
};

// The event log over a MemStore's kEvent documents (which the controller writes with its state).
class MemEventLog final : public store::EventLog {
 public:
  explicit MemEventLog(std::shared_ptr<MemData> data);
  Status Read(uint64_t after, size_t limit, std::vector<store::StoredEvent>* out) override;
  StatusOr<uint64_t> NewestStored() override;
  StatusOr<uint64_t> OldestStored() override;
  void Published(uint64_t seq) override;
  uint64_t LastPublished() const override;
  uint64_t WaitNewer(uint64_t after, std::chrono::steady_clock::time_point deadline) override;
  void Close() override;
  bool closed() const override;
  StatusOr<uint64_t> LoadCursor(const std::string& consumer, bool* found) override;
  Status SaveCursor(const std::string& consumer, uint64_t seq) override;
  StatusOr<int64_t> Prune(uint64_t keep, int64_t before_ms) override;
  Status ReadAudit(const std::string& lowest, const std::string& below, size_t limit,
                   std::vector<std::pair<std::string, std::string>>* out) override;
  StatusOr<int64_t> PruneAudit(uint64_t keep, int64_t before_ms) override;

 private:
  std::shared_ptr<MemData> data_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t published_ = 0;
  bool closed_ = false;
  std::map<std::string, uint64_t> cursors_;
};

// An executor that runs nothing: it records what the controller asks, and a test decides what
// happened by pushing the events that the next Poll() returns. Thread-safe.
class FakeExecutor final : public exec::Executor {
 public:
  Status Start(const std::string& attempt_id, const exec::AttemptSpec& spec) override;
  Status Stop(const std::string& attempt_id, int grace_seconds) override;
  Status Interrupt(const std::string& attempt_id, int grace_seconds) override;
  Status Adopt(const std::string& attempt_id) override;
  std::vector<exec::AttemptEvent> Poll() override;
  // `<log dir>/<attempt>-<instance>.log` once SetLogDir was called (a test writes the lines the
  // controller's metric regexes read), else "" (no log).
  std::string LogPath(const std::string& attempt_id, int instance) const override;
  std::string SystemMetricsPath(const std::string& attempt_id, int instance) const override { return ""; }
  void Cleanup(const std::string& attempt_id) override {}
  std::shared_ptr<const exec::CapacityReport> Capacity() const override;

  // The next Poll() returns e (after what was pushed before).
  void Push(exec::AttemptEvent e);
  // A phase change of an attempt at `at`; kExited with exit_code 0 unless changed by the caller.
  void Push(const std::string& attempt_id, exec::Phase phase, EpochMs at);
  // Where LogPath points from now on ("" = no logs).
  void SetLogDir(std::string dir);
  // While set, Start() fails with this status (and starts nothing).
  void FailStarts(Status st);
  // While set, Adopt() fails with this status (the attempt is not running here).
  void FailAdopts(Status st);
  // What Capacity() reports from now on (nullopt, the default: no view of its own, as the local
  // executor); a cluster's view as the Slurm executor hands it.
  void SetCapacity(std::optional<exec::CapacityReport> report);

  // What was asked, in order.
  std::vector<std::string> started() const;
  std::vector<std::string> stopped() const;
  std::vector<std::string> interrupted() const;
  std::vector<std::string> adopted() const;
  exec::AttemptSpec spec(const std::string& attempt_id) const;  // the spec it was started with

 private:
  mutable std::mutex mu_;
  std::deque<exec::AttemptEvent> pending_;
  Status fail_start_, fail_adopt_;
  std::string log_dir_;
  std::vector<std::string> started_, stopped_, interrupted_, adopted_;
  std::map<std::string, exec::AttemptSpec> specs_;
  std::shared_ptr<const exec::CapacityReport> capacity_;
};

}  // namespace ty::testing
