#include "core/clock.h"

#include <chrono>

namespace ty {

EpochMs SystemClock::now_ms() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

EpochMs OffsetClock::now_ms() const { return SystemClock::instance().now_ms() + offset_.load(); }

const SystemClock& SystemClock::instance() {
  static const SystemClock clock;
  return clock;
}

}  // namespace ty
