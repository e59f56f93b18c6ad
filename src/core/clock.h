// Time is an input: components that need "now" take a Clock&. Times are Unix epoch milliseconds.
#pragma once

#include <atomic>
#include <cstdint>

namespace ty {

using EpochMs = int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual EpochMs now_ms() const = 0;
};

// The wall clock (system_clock).
class SystemClock final : public Clock {
 public:
  EpochMs now_ms() const override;
  static const SystemClock& instance();
};

// A clock that moves only when told; for tests and the simulator.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(EpochMs start = 1'700'000'000'000) : now_(start) {}
  EpochMs now_ms() const override { return now_; }
  void advance_ms(EpochMs d) { now_ += d; }
  void set_ms(EpochMs t) { now_ = t; }

 private:
  EpochMs now_;
};

// The wall clock plus an offset that only grows: time moves on by itself and can be advanced by
// hand. `trainyard serve --clock=offset` uses it so that tests can cross days (the 28-day warm
// pool lifetime) through the real server. Thread-safe.
class OffsetClock final : public Clock {
 public:
  EpochMs now_ms() const override;
  void advance_ms(EpochMs d) { offset_.fetch_add(d); }
  EpochMs offset_ms() const { return offset_.load(); }

 private:
  std::atomic<EpochMs> offset_{0};
};

}  // namespace ty
