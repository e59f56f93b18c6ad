// Time is an input: components that need "now" take a Clock&. Times are Unix epoch milliseconds.
#pragma once

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

}  // namespace ty
