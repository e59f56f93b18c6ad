#include "objstore/bucket_sweeper.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

namespace ty::objstore {

BucketSweeper::BucketSweeper(BucketStore& store, const Clock& clock, SweepPolicy policy, Report report)
    : store_(store), clock_(clock), policy_(policy), report_(std::move(report)) {}

BucketSweeper::~BucketSweeper() { Stop(); }

bool BucketSweeper::SweepIfDue() {
  const int64_t now = clock_.now_ms();
  {
    MutexLock l(mu_);
    if (now < next_ms_) return false;
    next_ms_ = now + policy_.interval_ms;
  }
  std::optional<int64_t> uploads_before;
  if (policy_.upload_age_ms > 0) uploads_before = now - policy_.upload_age_ms;
  SweepResult result = store_.Sweep(now - policy_.temp_file_age_ms, uploads_before);
  if (report_) report_(result);
  return true;
}

void BucketSweeper::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void BucketSweeper::Stop() {
  {
    MutexLock l(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BucketSweeper::Loop() {
  while (true) {
    SweepIfDue();
    MutexLock l(mu_);
    // The clock says how long until the next sweep; the wait itself is the system's (a clock that
    // does not move, in a test, simply never makes the next one due).
    const int64_t wait_ms = std::max<int64_t>(next_ms_ - clock_.now_ms(), 1);
    if (!stopping_) wake_.wait_for(mu_, std::chrono::milliseconds(wait_ms));
    if (stopping_) return;
  }
}

}  // namespace ty::objstore
