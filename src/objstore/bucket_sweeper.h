// The embedded buckets' housekeeping: BucketStore::Sweep run at start and then every hour, on a
// thread of its own, as S3 applies a lifecycle rule (AbortIncompleteMultipartUpload) by itself.
// `trainyard serve` starts one (api/server.cpp) with [s3] abort_incomplete_uploads_after_days.
// The clock is an input: a test drives SweepIfDue with a ManualClock and never waits for a timer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <thread>

#include "core/clock.h"
#include "core/thread_annotations.h"
#include "objstore/bucket_store.h"

namespace ty::objstore {

struct SweepPolicy {
  int64_t temp_file_age_ms = 24LL * 3600 * 1000;   // temporary files older than this are removed
  int64_t upload_age_ms = 7LL * 24 * 3600 * 1000;  // uploads initiated longer ago are aborted; 0 = never
  int64_t interval_ms = 3600 * 1000;               // between the starts of two sweeps
};

class BucketSweeper {
 public:
  // `report` is called after every sweep, on the thread that ran it.
  using Report = std::function<void(const SweepResult&)>;

  BucketSweeper(BucketStore& store, const Clock& clock, SweepPolicy policy, Report report);
  ~BucketSweeper();  // Stop()
  BucketSweeper(const BucketSweeper&) = delete;
  BucketSweeper& operator=(const BucketSweeper&) = delete;

  // Sweeps when one is due (the first call, then once interval_ms has passed since the last sweep
  // began, by the clock), with the cutoffs counted back from the clock's now. Whether it swept.
  bool SweepIfDue();

  // A thread that calls SweepIfDue at once and then whenever the next sweep is due.
  void Start();
  // Ends the thread (a sweep in progress finishes first). Idempotent.
  void Stop();

 private:
  void Loop() EXCLUDES(mu_);

  BucketStore& store_;
  const Clock& clock_;
  const SweepPolicy policy_;
  const Report report_;
  Mutex mu_;
  std::condition_variable_any wake_;  // waits with mu_ held
  bool stopping_ GUARDED_BY(mu_) = false;
  int64_t next_ms_ GUARDED_BY(mu_) = INT64_MIN;  // when the next sweep is due
  std::thread thread_;
};

}  // namespace ty::objstore
