#include "testing/fakes.h"

#include <nlohmann/json.hpp>

namespace ty::testing {

std::string MemData::Get(store::Kind kind, const std::string& key) {
  std::lock_guard lock(mu);
  auto& table = docs[kind];
  auto it = table.find(key);
  return it == table.end() ? "" : it->second;
}

size_t MemData::Count(store::Kind kind) {
  std::lock_guard lock(mu);
  return docs[kind].size();
}

Status MemStore::Commit(const std::vector<store::Write>& writes) {
  if (data_->during_commit) data_->during_commit();
  std::lock_guard lock(data_->mu);
  if (!data_->fail_commits.ok()) return data_->fail_commits;
  for (const store::Write& w : writes) {
    if (w.doc.empty()) data_->docs[w.kind].erase(w.key);
    else data_->docs[w.kind][w.key] = w.doc;
  }
  ++data_->commits;
  return Status::Ok();
}

Status MemStore::LoadAll(store::Kind kind, const std::function<void(const std::string&, const std::string&)>& fn) {
  std::map<std::string, std::string> copy;
  {
    std::lock_guard lock(data_->mu);
    copy = data_->docs[kind];
  }
  for (const auto& [key, doc] : copy) fn(key, doc);
  return Status::Ok();
}

MemEventLog::MemEventLog(std::shared_ptr<MemData> data) : data_(std::move(data)) {
  auto newest = NewestStored();
  published_ = newest.ok() ? *newest : 0;
}

Status MemEventLog::Read(uint64_t after, size_t limit, std::vector<store::StoredEvent>* out) {
  std::lock_guard lock(data_->mu);
  auto& events = data_->docs[store::Kind::kEvent];
  for (auto it = events.upper_bound(Key(after)); it != events.end() && out->size() < limit; ++it)
    out->push_back({std::stoull(it->first), it->second});
  return Status::Ok();
}

StatusOr<uint64_t> MemEventLog::NewestStored() {
  std::lock_guard lock(data_->mu);
  auto& events = data_->docs[store::Kind::kEvent];
  return events.empty() ? uint64_t{0} : std::stoull(events.rbegin()->first);
}

StatusOr<uint64_t> MemEventLog::OldestStored() {
  std::lock_guard lock(data_->mu);
  auto& events = data_->docs[store::Kind::kEvent];
  return events.empty() ? uint64_t{0} : std::stoull(events.begin()->first);
}

void MemEventLog::Published(uint64_t seq) {
  std::lock_guard lock(mu_);
  published_ = std::max(published_, seq);
  cv_.notify_all();
}

uint64_t MemEventLog::LastPublished() const {
  std::lock_guard lock(mu_);
  return published_;
}

uint64_t MemEventLog::WaitNewer(uint64_t after, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return published_ > after || closed_; });
  return published_;
}

void MemEventLog::Close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

bool MemEventLog::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

StatusOr<uint64_t> MemEventLog::LoadCursor(const std::string& consumer, bool* found) {
  std::lock_guard lock(mu_);
  auto it = cursors_.find(consumer);
  *found = it != cursors_.end();
  return *found ? it->second : uint64_t{0};
}

Status MemEventLog::SaveCursor(const std::string& consumer, uint64_t seq) {
  std::lock_guard lock(mu_);
  cursors_[consumer] = seq;
  return Status::Ok();
}

StatusOr<int64_t> MemEventLog::Prune(uint64_t keep, int64_t before_ms) {
  std::lock_guard lock(data_->mu);
  auto& events = data_->docs[store::Kind::kEvent];
  int64_t gone = 0;
  for (auto it = events.begin(); it != events.end();) {
    const bool over = keep > 0 && events.size() > keep;
    const auto doc = nlohmann::json::parse(it->second, nullptr, false);
    const bool old = before_ms > 0 && doc.is_object() && doc.value("at", int64_t{0}) < before_ms;
    if (!over && !old) break;  // events are in sequence order, so in time order
    it = events.erase(it);
    ++gone;
  }
  return gone;
}

Status MemEventLog::ReadAudit(const std::string& lowest, const std::string& below, size_t limit,
                              std::vector<std::pair<std::string, std::string>>* out) {
  std::lock_guard lock(data_->mu);
  auto& records = data_->docs[store::Kind::kAudit];
  auto end = records.lower_bound(below);
  for (auto it = end; it != records.begin() && out->size() < limit;) {
    --it;
    if (it->first < lowest) break;
    out->emplace_back(it->first, it->second);
  }
  return Status::Ok();
}

StatusOr<int64_t> MemEventLog::PruneAudit(uint64_t keep, int64_t before_ms) {
  std::lock_guard lock(data_->mu);
  auto& records = data_->docs[store::Kind::kAudit];
  int64_t gone = 0;
  const std::string below = before_ms > 0 ? AuditKey(before_ms, "") : "";
  for (auto it = records.begin(); it != records.end();) {
    if (records.size() <= keep && it->first >= below) break;  // keys are in time order
    it = records.erase(it);
    ++gone;
  }
  return gone;
}

Status FakeExecutor::Start(const std::string& attempt_id, const exec::AttemptSpec& spec) {
  std::lock_guard lock(mu_);
  if (!fail_start_.ok()) return fail_start_;
  started_.push_back(attempt_id);
  specs_[attempt_id] = spec;
  return Status::Ok();
}

Status FakeExecutor::Stop(const std::string& attempt_id, int) {
  std::lock_guard lock(mu_);
  stopped_.push_back(attempt_id);
  return Status::Ok();
}

Status FakeExecutor::Interrupt(const std::string& attempt_id, int) {
  std::lock_guard lock(mu_);
  interrupted_.push_back(attempt_id);
  return Status::Ok();
}

Status FakeExecutor::Adopt(const std::string& attempt_id) {
  std::lock_guard lock(mu_);
  if (!fail_adopt_.ok()) return fail_adopt_;
  adopted_.push_back(attempt_id);
  return Status::Ok();
}

std::vector<exec::AttemptEvent> FakeExecutor::Poll() {
  std::lock_guard lock(mu_);
  std::vector<exec::AttemptEvent> out(pending_.begin(), pending_.end());
  pending_.clear();
  return out;
}

void FakeExecutor::Push(exec::AttemptEvent e) {
  std::lock_guard lock(mu_);
  pending_.push_back(std::move(e));
}

void FakeExecutor::Push(const std::string& attempt_id, exec::Phase phase, EpochMs at) {
  exec::AttemptEvent e;
  e.attempt_id = attempt_id;
  e.phase = phase;
  e.at = at;
  e.model_uploaded = phase == exec::Phase::kExited;
  Push(std::move(e));
}

std::string FakeExecutor::LogPath(const std::string& attempt_id, int instance) const {
  std::lock_guard lock(mu_);
  return log_dir_.empty() ? "" : log_dir_ + "/" + attempt_id + "-" + std::to_string(instance) + ".log";
}

void FakeExecutor::SetLogDir(std::string dir) {
  std::lock_guard lock(mu_);
  log_dir_ = std::move(dir);
}

void FakeExecutor::FailStarts(Status st) {
  std::lock_guard lock(mu_);
  fail_start_ = std::move(st);
}

void FakeExecutor::FailAdopts(Status st) {
  std::lock_guard lock(mu_);
  fail_adopt_ = std::move(st);
}

void FakeExecutor::SetCapacity(std::optional<exec::CapacityReport> report) {
  std::lock_guard lock(mu_);
  capacity_ = report ? std::make_shared<const exec::CapacityReport>(std::move(*report)) : nullptr;
}

std::shared_ptr<const exec::CapacityReport> FakeExecutor::Capacity() const {
  std::lock_guard lock(mu_);
  return capacity_;
}

std::vector<std::string> FakeExecutor::started() const {
  std::lock_guard lock(mu_);
  return started_;
}
std::vector<std::string> FakeExecutor::stopped() const {
  std::lock_guard lock(mu_);
  return stopped_;
}
std::vector<std::string> FakeExecutor::interrupted() const {
  std::lock_guard lock(mu_);
  return interrupted_;
}
std::vector<std::string> FakeExecutor::adopted() const {
  std::lock_guard lock(mu_);
  return adopted_;
}
exec::AttemptSpec FakeExecutor::spec(const std::string& attempt_id) const {
  std::lock_guard lock(mu_);
  auto it = specs_.find(attempt_id);
  return it == specs_.end() ? exec::AttemptSpec{} : it->second;
}

}  // namespace ty::testing
